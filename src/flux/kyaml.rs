//! YAML read as Flux reads a GitOps tree: kustomize's kyaml (go-yaml v3)
//! resolves each plain scalar, and the object reaches the API server, and
//! helm-controller, as JSON (docs/design.md#tree-resolution).
//!
//! That differs from a YAML 1.1 reading where a chart's values notice it:
//! `yes`, `no`, `on`, `off`, `y` and `n` are strings (only `true`/`false`
//! in three spellings are booleans); `0644` is the octal 420 and `0x1F`,
//! `0o14`, `0b101` and `1_000` integers, as Go's `ParseInt(s, 0, 64)`
//! reads them; a date (`2024-01-01`) is a timestamp, written to JSON as
//! `2024-01-01T00:00:00Z`; a number without a fraction is an integer
//! however it was written (`1e3` is 1000), as JSON carries it. `.inf` and
//! `.nan` have no JSON form: kustomize fails on such a document, and so
//! does this reader.

use granit_parser::{Event, Parser, ScalarStyle, Tag};
use serde_json::{Map, Number, Value};

use super::varsub;

/// Why a text is not what Flux could apply.
#[derive(Debug, thiserror::Error)]
pub enum KyamlError {
    #[error("{0}")]
    Syntax(String),
    /// A value JSON cannot carry (`.inf`, `.nan`), or a key that is not text.
    #[error("{0}")]
    NotJson(String),
}

/// A plain scalar JSON cannot carry (`.inf`, `.nan`), as written.
struct NotJson(String);

/// An open collection.
enum Open {
    /// A mapping, its anchor and the key awaiting its value; keys set by a
    /// merge (`<<`) that an explicit key may still replace.
    Map(Map<String, Value>, usize, Option<String>, Vec<String>),
    Seq(Vec<Value>, usize),
}

/// Which go-yaml reads the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    /// kustomize's kyaml: go-yaml v3.
    V3,
    /// `sigs.k8s.io/yaml` (go-yaml v2, YAML 1.1), as helm's
    /// `common.ReadValues` reads a values file.
    V2,
}

/// The documents of `text`, each as the JSON Flux applies (an empty
/// document is `null`).
pub fn from_multiple(text: &str) -> Result<Vec<Value>, KyamlError> {
    documents(text, Dialect::V3)
}

/// A values file as helm reads it (`common.ReadValues`, `sigs.k8s.io/yaml`
/// on go-yaml v2), as JSON: YAML 1.1's booleans (`yes`, `on`, `y`, …),
/// integers as go-yaml v2 resolves them (`0644` is 420, `0x1F`, `1_000`), a
/// date stays text, a float without a fraction is an integer (as the JSON
/// helm stores); a key written twice takes its last value.
pub fn values_file(text: &str) -> Result<Value, KyamlError> {
    Ok(documents(text, Dialect::V2)?
        .into_iter()
        .next()
        .unwrap_or(Value::Null))
}

fn documents(text: &str, dialect: Dialect) -> Result<Vec<Value>, KyamlError> {
    let mut docs = Vec::new();
    let mut stack: Vec<Open> = Vec::new();
    let mut anchors: std::collections::HashMap<usize, Value> = Default::default();
    let mut root: Option<Value> = None;
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| KyamlError::Syntax(e.to_string()))?;
        let line = span.start.line();
        let node = match event {
            Event::DocumentStart(..) => {
                root = None;
                continue;
            }
            Event::DocumentEnd => {
                docs.push(root.take().unwrap_or(Value::Null));
                continue;
            }
            Event::MappingStart(_, anchor, _) => {
                stack.push(Open::Map(Map::new(), anchor, None, Vec::new()));
                continue;
            }
            Event::SequenceStart(_, anchor, _) => {
                stack.push(Open::Seq(Vec::new(), anchor));
                continue;
            }
            Event::MappingEnd | Event::SequenceEnd => {
                let (value, anchor) = match stack.pop() {
                    Some(Open::Map(map, anchor, ..)) => (Value::Object(map), anchor),
                    Some(Open::Seq(seq, anchor)) => (Value::Array(seq), anchor),
                    None => return Err(KyamlError::Syntax("unbalanced collection".into())),
                };
                if anchor > 0 {
                    anchors.insert(anchor, value.clone());
                }
                value
            }
            Event::Alias(id) => anchors.get(&id).cloned().unwrap_or(Value::Null),
            Event::Scalar(text, style, anchor, tag) => {
                // A key is text as written: kustomize's map keys are strings.
                if let Some(Open::Map(_, _, key @ None, _)) = stack.last_mut() {
                    *key = Some(match dialect {
                        Dialect::V3 => text.into_owned(),
                        Dialect::V2 if style != ScalarStyle::Plain || tag.is_some() => {
                            text.into_owned()
                        }
                        Dialect::V2 => key_v2(&text).map_err(|NotJson(text)| {
                            KyamlError::NotJson(format!(
                                "line {line}: the key `{text}` is null, which helm cannot read as a values key"
                            ))
                        })?,
                    });
                    continue;
                }
                let value = scalar(&text, style, tag.as_deref(), dialect).map_err(|NotJson(text)| {
                    KyamlError::NotJson(format!(
                        "line {line}: `{text}` is a float JSON cannot carry, so kustomize cannot build this document"
                    ))
                })?;
                if anchor > 0 {
                    anchors.insert(anchor, value.clone());
                }
                value
            }
            _ => continue,
        };
        place(&mut stack, &mut root, node, dialect)?;
    }
    Ok(docs)
}

/// Puts a finished node into the collection that holds it (or makes it the
/// document).
fn place(
    stack: &mut [Open],
    root: &mut Option<Value>,
    node: Value,
    dialect: Dialect,
) -> Result<(), KyamlError> {
    match stack.last_mut() {
        None => *root = Some(node),
        Some(Open::Seq(seq, _)) => seq.push(node),
        Some(Open::Map(_, _, None, _)) => {
            // A collection as a key: JSON has no such key.
            return Err(KyamlError::NotJson(
                "a mapping key that is a collection cannot be written as JSON".into(),
            ));
        }
        Some(Open::Map(map, _, key @ Some(_), merged)) => {
            let key = key.take().unwrap_or_default();
            if key == "<<" {
                merge(map, merged, node);
            } else if map.contains_key(&key) && !merged.contains(&key) && dialect == Dialect::V3 {
                // go-yaml refuses a key written twice (one a merge brought
                // may be written over).
                return Err(KyamlError::Syntax(format!(
                    "mapping key \"{key}\" already defined"
                )));
            } else {
                merged.retain(|k| *k != key);
                map.insert(key, node);
            }
        }
    }
    Ok(())
}

/// A merge key's mapping (or each of a sequence of them, the first
/// winning), under the keys written explicitly.
fn merge(map: &mut Map<String, Value>, merged: &mut Vec<String>, node: Value) {
    let sources = match node {
        Value::Array(items) => items,
        other => vec![other],
    };
    for source in sources {
        let Value::Object(source) = source else {
            continue;
        };
        for (k, v) in source {
            if !map.contains_key(&k) {
                merged.push(k.clone());
                map.insert(k, v);
            }
        }
    }
}

/// One scalar as go-yaml v3 resolves it: quoted and block scalars are
/// text; a plain one by its form, or by its core-schema tag.
fn scalar(
    text: &str,
    style: ScalarStyle,
    tag: Option<&Tag>,
    dialect: Dialect,
) -> Result<Value, NotJson> {
    let tag = tag
        .filter(|t| t.is_yaml_core_schema())
        .map(|t| t.suffix().to_string());
    match tag.as_deref() {
        Some("str") | Some("binary") => return Ok(Value::String(text.to_string())),
        Some("null") => return Ok(Value::Null),
        _ => {}
    }
    if style != ScalarStyle::Plain && tag.is_none() {
        return Ok(Value::String(text.to_string()));
    }
    match dialect {
        Dialect::V3 => plain(text),
        Dialect::V2 => plain_v2(text),
    }
}

/// A plain map key as go-yaml v2 resolves it, made text as
/// `sigs.k8s.io/yaml` makes it (`convertToJSONableObject`): `on`, `yes`,
/// `y` are `true`; an integer in decimal; a float as Go's
/// `FormatFloat(f, 'g', -1, 32)`; a null key fails.
fn key_v2(text: &str) -> Result<String, NotJson> {
    match varsub::reread(text) {
        None => Ok(text.to_string()),
        Some(Value::String(s)) => Ok(s),
        Some(Value::Bool(b)) => Ok(b.to_string()),
        Some(Value::Number(n)) if !n.is_f64() => Ok(n.to_string()),
        Some(Value::Number(n)) => Ok(go_float32_g(n.as_f64().unwrap_or_default())),
        Some(_) => Err(NotJson(text.to_string())),
    }
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 32)`: the shortest digits of the
/// float32, in `%e` form (`1e+06`) when the exponent is below -4 or at
/// least 6 (the shortest form's precision), else in `%f` form.
fn go_float32_g(f: f64) -> String {
    let f = f as f32;
    if f.is_infinite() {
        return if f > 0.0 { ".inf" } else { "-.inf" }.into();
    }
    if f.is_nan() {
        return ".nan".into();
    }
    let scientific = format!("{f:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..6).contains(&exponent) {
        return format!("{f}");
    }
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.abs())
}

/// A plain scalar as go-yaml v2 resolves it ([`varsub::reread`]), then as
/// JSON (`.inf` and `.nan` have no JSON form: `sigs.k8s.io/yaml` fails).
fn plain_v2(text: &str) -> Result<Value, NotJson> {
    match varsub::reread(text) {
        Some(Value::String(s))
            if matches!(
                s.as_str(),
                ".inf"
                    | ".Inf"
                    | ".INF"
                    | "+.inf"
                    | "+.Inf"
                    | "+.INF"
                    | "-.inf"
                    | "-.Inf"
                    | "-.INF"
                    | ".nan"
                    | ".NaN"
                    | ".NAN"
            ) =>
        {
            Err(NotJson(text.to_string()))
        }
        Some(Value::Number(n)) => Ok(n
            .as_f64()
            .filter(|_| n.is_f64())
            .map_or(Value::Number(n), json_number)),
        Some(v) => Ok(v),
        None => Ok(Value::String(text.to_string())),
    }
}

/// A plain scalar: go-yaml v3's `resolve` for a value decoded into an
/// interface, then as JSON.
fn plain(text: &str) -> Result<Value, NotJson> {
    match text {
        "true" | "True" | "TRUE" => return Ok(Value::Bool(true)),
        "false" | "False" | "FALSE" => return Ok(Value::Bool(false)),
        "" | "~" | "null" | "Null" | "NULL" => return Ok(Value::Null),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF"
        | ".nan" | ".NaN" | ".NAN" => {
            return Err(NotJson(text.to_string()));
        }
        _ => {}
    }
    let first = text.chars().next().unwrap_or(' ');
    if !(first.is_ascii_digit() || matches!(first, '+' | '-' | '.')) {
        return Ok(Value::String(text.to_string()));
    }
    if first.is_ascii_digit()
        && let Some(stamp) = timestamp(text)
    {
        return Ok(Value::String(stamp));
    }
    // Go's `ParseInt(s, 0, 64)`, then `ParseUint`, then YAML's float form.
    let digits: String = text.chars().filter(|c| *c != '_').collect();
    if let Some(n) = varsub::go_int(&digits, true).and_then(|n| i64::try_from(n).ok()) {
        return Ok(Value::from(n));
    }
    if let Some(n) = varsub::go_int(&digits, false).and_then(|n| u64::try_from(n).ok()) {
        return Ok(Value::from(n));
    }
    if varsub::yaml_float_form(&digits)
        && let Ok(f) = digits.parse::<f64>()
        && f.is_finite()
    {
        return Ok(json_number(f));
    }
    Ok(Value::String(text.to_string()))
}

/// A float as JSON carries it to the API server and back (Go writes
/// `1000` for 1e3, and helm-controller reads it as an integer).
fn json_number(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
        Value::Number(Number::from(f as i64))
    } else {
        Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

/// go-yaml v3's timestamps (`2006-1-2`, `2006-1-2T15:4:5.999999999Z07:00`,
/// its `t` form, `2006-1-2 15:4:5.999999999`), written as Go's JSON writes a
/// time (RFC 3339, the offset kept, the fraction without trailing zeros).
fn timestamp(text: &str) -> Option<String> {
    let number = |t: &str, max: usize| -> Option<u32> {
        (!t.is_empty() && t.len() <= max && t.chars().all(|c| c.is_ascii_digit()))
            .then(|| t.parse().ok())
            .flatten()
    };
    let (date, time) = match text.find(['T', 't', ' ']) {
        Some(i) => (&text[..i], Some((&text[i..i + 1], &text[i + 1..]))),
        None => (text, None),
    };
    let mut parts = date.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || y.len() != 4 {
        return None;
    }
    let (y, m, d) = (number(y, 4)?, number(m, 2)?, number(d, 2)?);
    if !(1..=12).contains(&m) || !(1..=days_in(y, m)).contains(&d) {
        return None;
    }
    let date = format!("{y:04}-{m:02}-{d:02}");
    let Some((separator, time)) = time else {
        return Some(format!("{date}T00:00:00Z"));
    };
    // The space form has no zone; the `T` forms end in `Z` or `±hh:mm`.
    let (clock, zone) = if separator == " " {
        (time, "Z".to_string())
    } else if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, "Z".to_string())
    } else {
        let at = time.rfind(['+', '-'])?;
        let zone = &time[at..];
        let (h, mm) = zone[1..].split_once(':')?;
        let (h, mm) = (number(h, 2)?, number(mm, 2)?);
        let zone = if h == 0 && mm == 0 {
            "Z".to_string()
        } else {
            format!("{}{h:02}:{mm:02}", &zone[..1])
        };
        (&time[..at], zone)
    };
    let (hms, fraction) = match clock.split_once('.') {
        Some((hms, f)) => (hms, Some(f)),
        None => (clock, None),
    };
    let mut hms = hms.split(':');
    let (h, mi, s) = (
        number(hms.next()?, 2)?,
        number(hms.next()?, 2)?,
        number(hms.next()?, 2)?,
    );
    if hms.next().is_some() || h > 23 || mi > 59 || s > 59 {
        return None;
    }
    let fraction = match fraction {
        Some(f) if !f.is_empty() && f.len() <= 9 && f.chars().all(|c| c.is_ascii_digit()) => {
            let f = f.trim_end_matches('0');
            if f.is_empty() {
                String::new()
            } else {
                format!(".{f}")
            }
        }
        Some(_) => return None,
        None => String::new(),
    };
    Some(format!("{date}T{h:02}:{mi:02}:{s:02}{fraction}{zone}"))
}

fn days_in(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn one(text: &str) -> Value {
        from_multiple(text).unwrap().remove(0)
    }

    #[test]
    fn plain_scalars_resolve_as_go_yaml_v3_and_json_carry_them() {
        let doc = one(
            "a: yes\nb: on\nc: 0644\nd: 2024-01-01\ne: 0x1F\nf: ~\ng: 1e3\ni: Yes\nj: 0o14\nk: 1_000\nl: n\nm: TRUE\no: 0.5\np: '0644'\nq: 08\nr: -0x10\ns: 2024-01-02T03:04:05.120Z\nt: 2024-01-02 03:04:05\nu: 2024-02-30\nv: .5\nw: 1.0\n",
        );
        assert_eq!(
            doc,
            json!({"a": "yes", "b": "on", "c": 420, "d": "2024-01-01T00:00:00Z", "e": 31,
                   "f": null, "g": 1000, "i": "Yes", "j": 12, "k": 1000, "l": "n", "m": true,
                   "o": 0.5, "p": "0644", "q": 8, "r": -16,
                   "s": "2024-01-02T03:04:05.12Z", "t": "2024-01-02T03:04:05Z",
                   "u": "2024-02-30", "v": 0.5, "w": 1})
        );
    }

    #[test]
    fn tags_anchors_merges_and_documents() {
        let docs = from_multiple(
            "base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  y: 3\nlist: [*b]\nn: !!str 12\nq: !!int \"7\"\n---\n---\nk: v\n",
        )
        .unwrap();
        assert_eq!(
            docs[0],
            json!({"base": {"x": 1, "y": 2}, "use": {"x": 1, "y": 3}, "list": [{"x": 1, "y": 2}], "n": "12", "q": 7})
        );
        assert_eq!(docs[1], Value::Null);
        assert_eq!(docs[2], json!({"k": "v"}));
    }

    #[test]
    fn what_json_cannot_carry_fails_the_document() {
        for text in ["a: .inf\n", "a: -.Inf\n", "a: .nan\n", "? [a]\n: b\n"] {
            assert!(
                matches!(from_multiple(text), Err(KyamlError::NotJson(_))),
                "{text}"
            );
        }
        assert!(matches!(
            from_multiple("a: [b\n"),
            Err(KyamlError::Syntax(_))
        ));
        // A key written twice is refused; one a merge brought is replaced.
        assert!(matches!(
            from_multiple("a: 1\na: 2\n"),
            Err(KyamlError::Syntax(_))
        ));
        assert_eq!(
            one("b: &b {a: 1}\nc:\n  <<: *b\n  a: 2\n")["c"],
            json!({"a": 2})
        );
    }
}
