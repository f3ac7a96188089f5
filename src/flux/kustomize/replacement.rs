//! kustomize `replacements` and the field paths they read and write
//! (`spec.a.[name=x].b`, `a.0`; kyaml's field path syntax).

use serde_json::{Map, Value};

use super::{replacement_source, replacement_target, sync};
use crate::flux::object::Object;

/// One step of a kustomize field path (`spec.a.[name=x].b`, `a.0`).
enum Step {
    Key(String),
    Match(String, String),
    Index(usize),
}

fn field_path(path: &str) -> Vec<Step> {
    // Split on dots outside brackets.
    let mut steps = Vec::new();
    let mut current = String::new();
    let mut depth = 0;
    for c in path.chars() {
        match c {
            '[' => {
                depth += 1;
                current.push(c);
            }
            ']' => {
                depth -= 1;
                current.push(c);
            }
            '.' if depth == 0 => steps.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    steps.push(current);
    steps
        .into_iter()
        .filter(|s| !s.is_empty())
        .map(
            |s| match s.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
                Some(inner) => match inner.split_once('=') {
                    Some((k, v)) => Step::Match(k.to_string(), v.to_string()),
                    None => Step::Key(inner.to_string()),
                },
                None => match s.parse::<usize>() {
                    Ok(i) => Step::Index(i),
                    Err(_) => Step::Key(s),
                },
            },
        )
        .collect()
}

pub fn get_field<'a>(body: &'a Value, path: &str) -> Option<&'a Value> {
    let mut at = body;
    for step in field_path(path) {
        at = match step {
            Step::Key(k) => at.get(&k)?,
            Step::Index(i) => at.get(i)?,
            Step::Match(k, v) => at
                .as_array()?
                .iter()
                .find(|item| item.get(&k).and_then(Value::as_str) == Some(v.as_str()))?,
        };
    }
    Some(at)
}

pub(super) fn set_field(body: &mut Value, path: &str, value: Value, create: bool) -> bool {
    let steps = field_path(path);
    let mut at = body;
    for (i, step) in steps.iter().enumerate() {
        let last = i + 1 == steps.len();
        at = match step {
            Step::Key(k) => {
                let Some(map) = at.as_object_mut() else {
                    return false;
                };
                if !map.contains_key(k) {
                    if !create {
                        return false;
                    }
                    map.insert(k.clone(), Value::Object(Map::new()));
                }
                map.get_mut(k).expect("just ensured")
            }
            Step::Index(idx) => match at.get_mut(*idx) {
                Some(v) => v,
                None => return false,
            },
            Step::Match(k, v) => {
                let Some(items) = at.as_array_mut() else {
                    return false;
                };
                match items
                    .iter_mut()
                    .find(|item| item.get(k).and_then(Value::as_str) == Some(v.as_str()))
                {
                    Some(item) => item,
                    None => return false,
                }
            }
        };
        if last {
            *at = value;
            return true;
        }
    }
    false
}

/// kustomize `replacements` (`api/filters/replacement/replacement.go`):
/// the value at `source.fieldPath` (default `metadata.name`) of the one
/// source object is written to every target's `fieldPaths`; `options`
/// `delimiter`/`index` pick or replace one part, `create` adds missing
/// fields.
pub fn replace(objects: &mut [Object], replacement: &Value) -> Result<(), ReplacementError> {
    let value = source_value(objects, replacement)?;
    for target in replacement
        .get("targets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let select = target.get("select").unwrap_or(&Value::Null);
        let rejects: Vec<&Value> = target
            .get("reject")
            .and_then(Value::as_array)
            .map(|r| r.iter().collect())
            .unwrap_or_default();
        let create = target.pointer("/options/create").and_then(Value::as_bool) == Some(true);
        let delimiter = target.pointer("/options/delimiter").and_then(Value::as_str);
        let index = target.pointer("/options/index").and_then(Value::as_u64);
        let paths: Vec<&str> = target
            .get("fieldPaths")
            .and_then(Value::as_array)
            .map(|p| p.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for obj in objects.iter_mut() {
            if !replacement_target(obj, select, &rejects) {
                continue;
            }
            for path in &paths {
                if path.contains('*') {
                    return Err(ReplacementError::Wildcard {
                        path: (*path).into(),
                    });
                }
                let mut new = value.clone();
                if let (Some(delim), Some(Value::String(old)), Value::String(part)) =
                    (delimiter, get_field(&obj.body, path), &value)
                {
                    let mut parts: Vec<String> = old.split(delim).map(str::to_string).collect();
                    let i = index.unwrap_or(0) as usize;
                    if i < parts.len() {
                        parts[i] = part.clone();
                    } else {
                        parts.push(part.clone());
                    }
                    new = Value::String(parts.join(delim));
                }
                // A scalar target keeps its tag (kyaml `setFieldValue` copies
                // only the value's text): a number written onto a string is
                // the string of its text, a string of digits onto a number is
                // a number.
                match get_field(&obj.body, path) {
                    Some(old) => new = keep_scalar_type(old, new)?,
                    // A created field is a new untagged scalar given the
                    // value's text: it reads back as that text's type.
                    None => {
                        if let Value::String(s) = &new {
                            new = crate::flux::varsub::reread(s).unwrap_or(new);
                        }
                    }
                }
                // kustomize fails the build on a target field it cannot
                // find (or, with `create`, create).
                if !set_field(&mut obj.body, path, new, create) {
                    return Err(ReplacementError::TargetField {
                        path: (*path).into(),
                        create,
                        kind: obj.kind.clone(),
                        name: obj.name.clone(),
                    });
                }
            }
            sync(obj);
        }
    }
    Ok(())
}

/// The value a replacement writes: its source object's field (with
/// `options.delimiter`/`index`, one part of it).
fn source_value(objects: &[Object], replacement: &Value) -> Result<Value, ReplacementError> {
    let source = replacement
        .get("source")
        .ok_or(ReplacementError::NoSource)?;
    let sources: Vec<&Object> = objects
        .iter()
        .filter(|o| replacement_source(o, source))
        .collect();
    let [from] = sources[..] else {
        return Err(ReplacementError::SourceCount {
            selector: source.clone(),
            count: sources.len(),
        });
    };
    let path = source
        .get("fieldPath")
        .and_then(Value::as_str)
        .unwrap_or("metadata.name");
    let mut value = get_field(&from.body, path)
        .cloned()
        .ok_or_else(|| ReplacementError::SourceField { path: path.into() })?;
    if let (Some(Value::String(s)), Some(delim)) = (
        Some(&value),
        source.pointer("/options/delimiter").and_then(Value::as_str),
    ) {
        let index = source
            .pointer("/options/index")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let parts: Vec<&str> = s.split(delim).collect();
        value = Value::String(
            usize::try_from(index)
                .ok()
                .and_then(|i| parts.get(i))
                .ok_or(ReplacementError::SourceIndex)?
                .to_string(),
        );
    }
    Ok(value)
}

/// Why kustomize fails the build on a `replacements` entry.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReplacementError {
    #[error("a replacement without source")]
    NoSource,
    #[error("replacement source {selector} matches {count} objects, not one")]
    SourceCount { selector: Value, count: usize },
    #[error("replacement source field `{path}` not found")]
    SourceField { path: String },
    #[error("replacement source index out of range")]
    SourceIndex,
    #[error("target field path `{path}` uses a `*` wildcard, which is not modelled")]
    Wildcard { path: String },
    #[error(
        "unable to find{} field `{path}` in replacement target {kind} {name}",
        if *.create { " or create" } else { "" }
    )]
    TargetField {
        path: String,
        create: bool,
        kind: String,
        name: String,
    },
    /// kyaml cannot decode the text as the target's tag (`cannot decode
    /// !!str … as a !!int`); `held`: what the target holds (a number, a
    /// boolean, a null).
    #[error("cannot decode `{text}` as the {held} the target field holds")]
    Decode { text: String, held: &'static str },
}

/// `new` written where `old` was, by kustomize's replacement: a scalar
/// keeps `old`'s tag and takes `new`'s text, so a number written onto a
/// string is the string of its text, and text that is no number written
/// onto a number fails the build (`cannot decode !!str … as a !!int`), as
/// text that is no null written onto a null does (`as a !!null`: `~`, or a
/// key written with no value).
fn keep_scalar_type(old: &Value, new: Value) -> Result<Value, ReplacementError> {
    let text = match &new {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => return Ok(new),
    };
    let read = crate::flux::varsub::reread(&text);
    let fits = match (old, &read) {
        (Value::String(_), _) => return Ok(Value::String(text)),
        (Value::Number(o), Some(Value::Number(n))) => o.is_f64() || !n.is_f64(),
        (Value::Bool(_), Some(Value::Bool(_))) => true,
        (Value::Null, Some(Value::Null)) => true,
        (Value::Number(_) | Value::Bool(_) | Value::Null, _) => false,
        _ => return Ok(new),
    };
    match read {
        Some(v) if fits => Ok(v),
        _ => Err(ReplacementError::Decode {
            text,
            held: match old {
                Value::Bool(_) => "boolean",
                Value::Null => "null",
                _ => "number",
            },
        }),
    }
}
