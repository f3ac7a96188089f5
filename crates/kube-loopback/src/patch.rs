//! The patch formats clients send: RFC 7386 merge patches (also standing in
//! for strategic merge and server-side apply, minus field ownership) and
//! RFC 6902 JSON patches.

use serde_json::{Map, Value};

/// RFC 7386: objects merge recursively, `null` removes, anything else replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target) = target else {
        return;
    };
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
        } else {
            merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// Splits `/a/b/c` into the parent pointer `/a/b` and the last token `c`.
fn split_pointer(path: &str) -> Result<(&str, String), String> {
    let idx = path
        .rfind('/')
        .ok_or_else(|| format!("invalid JSON pointer {path:?}"))?;
    Ok((&path[..idx], unescape(&path[idx + 1..])))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, last) = split_pointer(path)?;
    match doc.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.insert(last, value);
            Ok(())
        }
        Some(Value::Array(items)) => {
            let idx = if last == "-" {
                items.len()
            } else {
                last.parse().map_err(|_| format!("bad index in {path:?}"))?
            };
            if idx > items.len() {
                return Err(format!("index out of bounds in {path:?}"));
            }
            items.insert(idx, value);
            Ok(())
        }
        _ => Err(format!("doc is missing path: {path:?}")),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, String> {
    let (parent, last) = split_pointer(path)?;
    let missing = || format!("doc is missing path: {path:?}");
    match doc.pointer_mut(parent) {
        Some(Value::Object(map)) => map.remove(&last).ok_or_else(missing),
        Some(Value::Array(items)) => match last.parse::<usize>() {
            Ok(i) if i < items.len() => Ok(items.remove(i)),
            _ => Err(missing()),
        },
        _ => Err(missing()),
    }
}

/// RFC 6902; all operations or none take effect.
pub fn json_patch(doc: &mut Value, ops: &Value) -> Result<(), String> {
    let ops = ops
        .as_array()
        .ok_or("a JSON patch must be an array of operations")?;
    let mut work = doc.clone();
    for op in ops {
        let path = op["path"].as_str().ok_or("operation is missing \"path\"")?;
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| format!("operation on {path:?} is missing \"value\""))
        };
        let from = || {
            op["from"]
                .as_str()
                .ok_or_else(|| format!("operation on {path:?} is missing \"from\""))
        };
        match op["op"].as_str().unwrap_or_default() {
            "add" => add(&mut work, path, value()?)?,
            "remove" => {
                remove(&mut work, path)?;
            }
            "replace" => {
                remove(&mut work, path)?;
                add(&mut work, path, value()?)?;
            }
            "move" => {
                let moved = remove(&mut work, from()?)?;
                add(&mut work, path, moved)?;
            }
            "copy" => {
                let copied = work
                    .pointer(from()?)
                    .cloned()
                    .ok_or_else(|| format!("doc is missing path: {path:?}"))?;
                add(&mut work, path, copied)?;
            }
            "test" => {
                if work.pointer(path) != Some(&value()?) {
                    return Err(format!("test failed at {path:?}"));
                }
            }
            other => return Err(format!("unknown JSON patch operation {other:?}")),
        }
    }
    *doc = work;
    Ok(())
}
