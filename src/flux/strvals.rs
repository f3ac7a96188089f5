//! A `valuesFrom` entry's `targetPath` as helm-controller sets it
//! (docs/design.md#from-a-flux-helmrelease): fluxcd/pkg `chartutil/values.go`
//! `ReplacePathValue` writes `PATH=TEXT` through helm's `--set` parser
//! (helm.sh/helm/v4 `pkg/strvals/parser.go`, `ParseInto`; a text wholly
//! in single or double quotes loses every quote at both ends and goes
//! through `ParseIntoString`), and `ReplacePathLiteralValue` (`literal:
//! true`) escapes the text's `\ , [ ] { }` first so it stays one string.
//!
//! The parser works on the values as Go holds them: maps and lists are
//! shared, not copied ([`GoValue`]). `ChartValuesFromReferences` merges
//! `spec.values` in before each `targetPath` entry with `MergeMaps`, which
//! copies the maps it merges into but shares the ones it only takes, so the
//! parser may write into `spec.values` itself and win over it in the last
//! merge: the composition is modelled with the sharing.
//!
//! What the parser does with `PATH=TEXT`:
//! - `.` nests maps, `[i]` indexes lists (a list grows with nulls up to
//!   `i`, at most 65536), `\` escapes the next character anywhere; more than
//!   30 levels of `.` is an error. A segment that exists and is not a map
//!   (or not a list, for `[i]`), `null` included, is an error.
//! - `{a,b}` is a list; `,` ends the value and starts another `KEY=VALUE`
//!   at the top (`a,b` fails: key `b` has no value; `a,b=c` also sets `b`).
//! - Typed (not for quoted or literal text): `true`, `false`, `null` in any
//!   case (Go's `strings.EqualFold`), `0`, and a decimal `int64` that does
//!   not start with `0` (`042` stays text, `-042` is -42, `+5` is 5);
//!   everything else, floats included, is text; an empty text is `""`.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use serde_json::{Map, Value};

/// A Go `map[string]any` the composition shares between its holders.
pub type GoMap = Rc<RefCell<BTreeMap<String, GoValue>>>;
/// A Go `[]any`: shared while it is only written at an index it has.
pub type GoList = Rc<RefCell<Vec<GoValue>>>;

/// A value as Go's `any` holds it in the values maps.
#[derive(Debug, Clone)]
pub enum GoValue {
    Map(GoMap),
    List(GoList),
    /// A string, number, boolean or `nil`.
    Scalar(Value),
}

/// Why helm's parser refuses `PATH=TEXT`: helm-controller then fails the
/// HelmRelease (`ValuesError`) and installs nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StrvalsError {
    #[error("key \"{0}\" has no value")]
    NoValue(String),
    #[error("key \"{0}\" has no value (cannot end with ,)")]
    EndsWithComma(String),
    #[error("key map \"{0}\" has no value")]
    EmptyMap(String),
    #[error("value name nested level is greater than maximum supported nested level of 30")]
    TooDeep,
    #[error("error parsing index: `{0}` is not an integer")]
    BadIndex(String),
    #[error("negative {0} index not allowed")]
    NegativeIndex(i64),
    #[error("index of {0} is greater than maximum supported index of 65536")]
    IndexTooLarge(i64),
    #[error("unexpected data at end of array index: \"{0}\"")]
    AfterIndex(String),
    #[error("list must terminate with '}}'")]
    UnterminatedList,
    #[error("unable to parse key: `{0}` holds a value that is not a map")]
    NotAMap(String),
    #[error("unable to parse key: `{0}` holds a value that is not a list")]
    NotAList(String),
}

/// A fresh Go copy of a JSON value (nothing shared).
pub fn from_json(value: &Value) -> GoValue {
    match value {
        Value::Object(map) => GoValue::Map(go_map(map)),
        Value::Array(items) => {
            GoValue::List(Rc::new(RefCell::new(items.iter().map(from_json).collect())))
        }
        other => GoValue::Scalar(other.clone()),
    }
}

/// A fresh Go map of a JSON map.
pub fn go_map(map: &Map<String, Value>) -> GoMap {
    Rc::new(RefCell::new(
        map.iter().map(|(k, v)| (k.clone(), from_json(v))).collect(),
    ))
}

/// The JSON value (keys sorted, as Go prints a map).
pub fn to_json(value: &GoValue) -> Value {
    match value {
        GoValue::Map(map) => Value::Object(
            map.borrow()
                .iter()
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect(),
        ),
        GoValue::List(list) => Value::Array(list.borrow().iter().map(to_json).collect()),
        GoValue::Scalar(v) => v.clone(),
    }
}

/// fluxcd/pkg `chartutil/merge.go` `MergeMaps`: a new map with `a`'s
/// entries, then `b`'s, a map of `b` over a map of `a` merged the same way
/// (a new map), anything else of `b` taken as it is (shared).
pub fn merge_maps(a: &GoMap, b: &GoMap) -> GoMap {
    let mut out = a.borrow().clone();
    for (k, v) in b.borrow().iter() {
        if let (GoValue::Map(over), Some(GoValue::Map(under))) = (v, out.get(k)) {
            let merged = merge_maps(under, over);
            out.insert(k.clone(), GoValue::Map(merged));
            continue;
        }
        out.insert(k.clone(), v.clone());
    }
    Rc::new(RefCell::new(out))
}

/// fluxcd/pkg `ReplacePathValue`: `text` at `path` of `values`.
pub fn replace_path_value(values: &GoMap, path: &str, text: &str) -> Result<(), StrvalsError> {
    let single = text.starts_with('\'') && text.ends_with('\'');
    let double = text.starts_with('"') && text.ends_with('"');
    if single || double {
        let unquoted = text.trim_matches(['\'', '"']);
        return parse_into(&format!("{path}={unquoted}"), values, true);
    }
    parse_into(&format!("{path}={text}"), values, false)
}

/// fluxcd/pkg `ReplacePathLiteralValue` (`literal: true`): `text`, verbatim,
/// at `path` of `values`.
pub fn replace_path_literal_value(
    values: &GoMap,
    path: &str,
    text: &str,
) -> Result<(), StrvalsError> {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | ',' | '[' | ']' | '{' | '}') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    parse_into(&format!("{path}={escaped}"), values, true)
}

/// helm `strvals.ParseInto` (`string`: `ParseIntoString`, every value text).
fn parse_into(line: &str, dest: &GoMap, string: bool) -> Result<(), StrvalsError> {
    let mut parser = Parser {
        chars: line.chars().collect(),
        at: 0,
        string,
    };
    loop {
        match parser.key(dest, 0) {
            Ok(()) => continue,
            Err(Stop::End) => return Ok(()),
            Err(Stop::Error(e)) => return Err(e),
        }
    }
}

/// Why a step of the parser stopped: the end of the line (Go's `io.EOF`,
/// which ends the parse without error) or an error.
enum Stop {
    End,
    Error(StrvalsError),
}

impl From<StrvalsError> for Stop {
    fn from(e: StrvalsError) -> Self {
        Stop::Error(e)
    }
}

/// What `valList` found after `=`.
enum ListStart {
    List(Vec<GoValue>),
    /// The line ended right after `=`.
    End,
    /// Not a `{`: a single value.
    NotList,
}

struct Parser {
    chars: Vec<char>,
    at: usize,
    string: bool,
}

impl Parser {
    fn read(&mut self) -> Option<char> {
        let c = self.chars.get(self.at).copied();
        if c.is_some() {
            self.at += 1;
        }
        c
    }

    /// `runesUntil`: the text up to a `stop` character (consumed, returned;
    /// `None` at the end of the line), `\` taking the next character as it is.
    fn until(&mut self, stop: &[char]) -> (String, Option<char>) {
        let mut text = String::new();
        loop {
            match self.read() {
                None => return (text, None),
                Some(c) if stop.contains(&c) => return (text, Some(c)),
                Some('\\') => match self.read() {
                    None => return (text, None),
                    Some(next) => text.push(next),
                },
                Some(c) => text.push(c),
            }
        }
    }

    /// `typedVal`.
    fn typed(&self, text: String) -> GoValue {
        if self.string {
            return GoValue::Scalar(Value::String(text));
        }
        GoValue::Scalar(if fold_eq(&text, "true") {
            Value::Bool(true)
        } else if fold_eq(&text, "false") {
            Value::Bool(false)
        } else if fold_eq(&text, "null") {
            Value::Null
        } else if text == "0" {
            Value::from(0)
        } else if let Some(n) = (!text.starts_with('0'))
            .then(|| text.parse::<i64>().ok())
            .flatten()
        {
            Value::from(n)
        } else {
            Value::String(text)
        })
    }

    /// `key`: one `KEY…=VALUE` into `data`.
    fn key(&mut self, data: &GoMap, level: usize) -> Result<(), Stop> {
        let (key, last) = self.until(&['=', '[', ',', '.']);
        match last {
            None if key.is_empty() => Err(Stop::End),
            None => Err(StrvalsError::NoValue(key).into()),
            Some('[') => {
                let index = self.index()?;
                let list = match get(data, &key) {
                    None => new_list(Vec::new()),
                    Some(GoValue::List(list)) => list,
                    Some(_) => return Err(StrvalsError::NotAList(key).into()),
                };
                let (list, result) = self.list_item(list, index, level);
                set(data, &key, GoValue::List(list));
                result
            }
            Some('=') => match self.list_start()? {
                ListStart::List(items) => {
                    set(data, &key, GoValue::List(new_list(items)));
                    Ok(())
                }
                ListStart::End => {
                    set(data, &key, GoValue::Scalar(Value::String(String::new())));
                    Err(Stop::End)
                }
                ListStart::NotList => {
                    let (text, _) = self.until(&[',']);
                    let value = self.typed(text);
                    set(data, &key, value);
                    Ok(())
                }
            },
            Some(',') => {
                set(data, &key, GoValue::Scalar(Value::String(String::new())));
                Err(StrvalsError::EndsWithComma(key).into())
            }
            _ => {
                let level = level + 1;
                if level > 30 {
                    return Err(StrvalsError::TooDeep.into());
                }
                let inner = match get(data, &key) {
                    None => Rc::new(RefCell::new(BTreeMap::new())),
                    Some(GoValue::Map(map)) => map,
                    Some(_) => return Err(StrvalsError::NotAMap(key).into()),
                };
                let result = self.key(&inner, level);
                let empty = inner.borrow().is_empty();
                if result.is_ok() && empty {
                    return Err(StrvalsError::EmptyMap(key).into());
                }
                if !empty {
                    set(data, &key, GoValue::Map(inner));
                }
                result
            }
        }
    }

    /// `keyIndex`: the index up to `]`. Without a `]` the parse ends
    /// there, without an error (Go wraps `io.EOF`, which `parse` takes for
    /// the end).
    fn index(&mut self) -> Result<i64, Stop> {
        match self.until(&[']']) {
            (text, Some(_)) => text
                .parse()
                .map_err(|_| StrvalsError::BadIndex(text).into()),
            (_, None) => Err(Stop::End),
        }
    }

    /// `valList`: `{a,b}` after `=`.
    fn list_start(&mut self) -> Result<ListStart, StrvalsError> {
        match self.read() {
            None => return Ok(ListStart::End),
            Some('{') => {}
            Some(_) => {
                self.at -= 1;
                return Ok(ListStart::NotList);
            }
        }
        let mut items = Vec::new();
        loop {
            match self.until(&[',', '}']) {
                (_, None) => return Err(StrvalsError::UnterminatedList),
                (text, Some('}')) => {
                    // A `,` after the list is consumed.
                    if let Some(c) = self.read()
                        && c != ','
                    {
                        self.at -= 1;
                    }
                    items.push(self.typed(text));
                    return Ok(ListStart::List(items));
                }
                (text, _) => items.push(self.typed(text)),
            }
        }
    }

    /// `listItem`: what follows `[index]`, into `list`; the list to set
    /// (even on an error) and how the step ended.
    fn list_item(&mut self, list: GoList, index: i64, level: usize) -> (GoList, Result<(), Stop>) {
        if index < 0 {
            return (list, Err(StrvalsError::NegativeIndex(index).into()));
        }
        let (text, last) = self.until(&['[', '.', '=']);
        if !text.is_empty() {
            return (list, Err(StrvalsError::AfterIndex(text).into()));
        }
        let existing = usize::try_from(index)
            .ok()
            .and_then(|i| list.borrow().get(i).cloned());
        match last {
            None => (list, Err(Stop::End)),
            Some('=') => match self.list_start() {
                Ok(ListStart::List(items)) => {
                    set_index(list, index, GoValue::List(new_list(items)))
                }
                Ok(ListStart::End) => {
                    set_index(list, index, GoValue::Scalar(Value::String(String::new())))
                }
                Ok(ListStart::NotList) => {
                    let (text, _) = self.until(&[',']);
                    let value = self.typed(text);
                    set_index(list, index, value)
                }
                Err(e) => (list, Err(e.into())),
            },
            Some('[') => {
                let next = match self.index() {
                    Ok(next) => next,
                    Err(stop) => return (list, Err(stop)),
                };
                let nested = match existing {
                    None | Some(GoValue::Scalar(Value::Null)) => new_list(Vec::new()),
                    Some(GoValue::List(nested)) => nested,
                    Some(_) => {
                        let at = format!("[{index}]");
                        return (list, Err(StrvalsError::NotAList(at).into()));
                    }
                };
                match self.list_item(nested, next, level) {
                    (nested, Ok(())) => set_index(list, index, GoValue::List(nested)),
                    (_, err) => (list, err),
                }
            }
            _ => {
                let inner = match existing {
                    None => Rc::new(RefCell::new(BTreeMap::new())),
                    Some(GoValue::Map(map)) => map,
                    // Not a map: replaced by an empty one, in place.
                    Some(_) => {
                        let map = Rc::new(RefCell::new(BTreeMap::new()));
                        list.borrow_mut()[index as usize] = GoValue::Map(map.clone());
                        map
                    }
                };
                match self.key(&inner, level) {
                    Ok(()) => set_index(list, index, GoValue::Map(inner)),
                    err => (list, err),
                }
            }
        }
    }
}

fn new_list(items: Vec<GoValue>) -> GoList {
    Rc::new(RefCell::new(items))
}

fn get(data: &GoMap, key: &str) -> Option<GoValue> {
    data.borrow().get(key).cloned()
}

/// `set`: an empty key is not set.
fn set(data: &GoMap, key: &str, value: GoValue) {
    if !key.is_empty() {
        data.borrow_mut().insert(key.to_string(), value);
    }
}

/// `setIndex`: in place when the list has the index, else into a new,
/// longer list (nulls in between).
fn set_index(list: GoList, index: i64, value: GoValue) -> (GoList, Result<(), Stop>) {
    if index < 0 {
        return (list, Err(StrvalsError::NegativeIndex(index).into()));
    }
    if index > 65536 {
        return (list, Err(StrvalsError::IndexTooLarge(index).into()));
    }
    let i = index as usize;
    if i < list.borrow().len() {
        list.borrow_mut()[i] = value;
        return (list, Ok(()));
    }
    let mut longer = list.borrow().clone();
    longer.resize(i + 1, GoValue::Scalar(Value::Null));
    longer[i] = value;
    (new_list(longer), Ok(()))
}

/// Go's `strings.EqualFold` against an ASCII word: ASCII case folding, and
/// `ſ` (U+017F) folds to `s`.
fn fold_eq(text: &str, word: &str) -> bool {
    text.chars().count() == word.len()
        && text
            .chars()
            .zip(word.chars())
            .all(|(c, w)| c.to_ascii_lowercase() == w || (c == 'ſ' && w == 's'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set_at(path: &str, text: &str) -> Result<Value, StrvalsError> {
        let values = go_map(&Map::new());
        replace_path_value(&values, path, text)?;
        Ok(to_json(&GoValue::Map(values)))
    }

    fn value(text: &str) -> Value {
        set_at("v", text).unwrap()["v"].clone()
    }

    #[test]
    fn typed_as_helm_set_types() {
        assert_eq!(value("true"), json!(true));
        assert_eq!(value("True"), json!(true));
        assert_eq!(value("FALSE"), json!(false));
        assert_eq!(value("falſe"), json!(false));
        assert_eq!(value("NULL"), json!(null));
        assert_eq!(value("Null"), json!(null));
        assert_eq!(value("0"), json!(0));
        assert_eq!(value("42"), json!(42));
        assert_eq!(value("-042"), json!(-42));
        assert_eq!(value("+5"), json!(5));
        assert_eq!(value("042"), json!("042"));
        assert_eq!(value("00"), json!("00"));
        assert_eq!(value("1.5"), json!("1.5"));
        assert_eq!(value("1e3"), json!("1e3"));
        assert_eq!(value("0x1F"), json!("0x1F"));
        assert_eq!(value("yes"), json!("yes"));
        assert_eq!(value("9223372036854775808"), json!("9223372036854775808"));
        assert_eq!(value(""), json!(""));
        assert_eq!(value("x.y=z"), json!("x.y=z"));
        assert_eq!(value("a\nb"), json!("a\nb"));
    }

    #[test]
    fn quoted_text_is_a_string_without_its_quotes() {
        assert_eq!(value("\"true\""), json!("true"));
        assert_eq!(value("'42'"), json!("42"));
        // Every quote at both ends goes (Go's strings.Trim).
        assert_eq!(value("\"'x'\""), json!("x"));
        assert_eq!(value("\""), json!(""));
        // Still parsed: a list, and `,` ends the value.
        assert_eq!(value("\"{a,1}\""), json!(["a", "1"]));
        assert!(set_at("v", "\"a,b\"").is_err());
        // Not quoted at both ends: typed text.
        assert_eq!(value("\"x"), json!("\"x"));
    }

    #[test]
    fn lists_commas_and_escapes() {
        assert_eq!(value("{a,b}"), json!(["a", "b"]));
        assert_eq!(value("{1,true,042}"), json!([1, true, "042"]));
        assert_eq!(value("{}"), json!([""]));
        assert_eq!(value("a\\,b"), json!("a,b"));
        assert_eq!(value("\\{a\\,b\\}"), json!("{a,b}"));
        assert_eq!(
            set_at("v", "a,b").unwrap_err(),
            StrvalsError::NoValue("b".into())
        );
        assert_eq!(
            set_at("v", "{a,b").unwrap_err(),
            StrvalsError::UnterminatedList
        );
        assert_eq!(
            set_at("v", "{a}b").unwrap_err(),
            StrvalsError::NoValue("b".into())
        );
        // `,` starts another KEY=VALUE at the top; a trailing one is nothing.
        assert_eq!(
            set_at("a.v", "1,b=2").unwrap(),
            json!({"a": {"v": 1}, "b": 2})
        );
        assert_eq!(set_at("v", "x,").unwrap(), json!({"v": "x"}));
    }

    #[test]
    fn paths_nest_maps_and_index_lists() {
        assert_eq!(set_at("a\\.b.c", "1").unwrap(), json!({"a.b": {"c": 1}}));
        assert_eq!(
            set_at("a[2]", "x").unwrap(),
            json!({"a": [null, null, "x"]})
        );
        assert_eq!(
            set_at("a[1].b", "x").unwrap(),
            json!({"a": [null, {"b": "x"}]})
        );
        assert_eq!(set_at("a[0][1]", "x").unwrap(), json!({"a": [[null, "x"]]}));
        // No `]`: the line ends there, nothing set, no error.
        assert_eq!(set_at("a[0", "x").unwrap(), json!({}));
        assert_eq!(
            set_at("a[-1]", "x").unwrap_err(),
            StrvalsError::NegativeIndex(-1)
        );
        assert_eq!(
            set_at("a[x]", "x").unwrap_err(),
            StrvalsError::BadIndex("x".into())
        );
        assert_eq!(
            set_at("a[65537]", "x").unwrap_err(),
            StrvalsError::IndexTooLarge(65537)
        );
        assert_eq!(
            set_at("a[0]b", "x").unwrap_err(),
            StrvalsError::AfterIndex("b".into())
        );
        let deep = vec!["k"; 32].join(".");
        assert_eq!(set_at(&deep, "x").unwrap_err(), StrvalsError::TooDeep);
    }

    #[test]
    fn into_existing_values() {
        let values = go_map(
            json!({"m": {"keep": 1}, "l": ["a", "b", "c"], "s": "x", "n": null})
                .as_object()
                .unwrap(),
        );
        replace_path_value(&values, "m.new", "2").unwrap();
        replace_path_value(&values, "l[1]", "B").unwrap();
        replace_path_value(&values, "l[0].k", "v").unwrap();
        assert_eq!(
            to_json(&GoValue::Map(values.clone())),
            json!({"m": {"keep": 1, "new": 2}, "l": [{"k": "v"}, "B", "c"], "s": "x", "n": null})
        );
        for path in ["s.x", "n.x", "l.x"] {
            assert!(matches!(
                replace_path_value(&values, path, "1"),
                Err(StrvalsError::NotAMap(_))
            ));
        }
        assert!(matches!(
            replace_path_value(&values, "m[0]", "1"),
            Err(StrvalsError::NotAList(_))
        ));
    }

    #[test]
    fn literal_text_stays_one_string() {
        let values = go_map(&Map::new());
        replace_path_literal_value(&values, "a\\.b", "{x,y}\\z,=w\n").unwrap();
        assert_eq!(
            to_json(&GoValue::Map(values)),
            json!({"a.b": "{x,y}\\z,=w\n"})
        );
    }

    #[test]
    fn merge_maps_shares_what_it_takes() {
        let values = go_map(json!({"a": {"b": 1}}).as_object().unwrap());
        let result = merge_maps(&go_map(&Map::new()), &values);
        replace_path_value(&result, "a.b", "2").unwrap();
        // `a` was taken from `values`, not copied: `values` changed too.
        assert_eq!(to_json(&GoValue::Map(values)), json!({"a": {"b": 2}}));
        let values = go_map(json!({"a": {"b": 1}}).as_object().unwrap());
        let earlier = go_map(json!({"a": {"c": 1}}).as_object().unwrap());
        let result = merge_maps(&earlier, &values);
        replace_path_value(&result, "a.b", "2").unwrap();
        // Merged into a new map: `values` kept its own.
        assert_eq!(to_json(&GoValue::Map(values)), json!({"a": {"b": 1}}));
    }
}
