//! RFC 6902 JSON patches as kustomize applies them (`patches` and
//! `patchesJson6902` with a JSON list; gopkg.in/evanphx/json-patch.v4).

use serde_json::Value;

/// Why kustomize's RFC 6902 patch fails on an object: the failing operation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatchError {
    #[error("JSON patch operation without op/path: {op}")]
    NoOpOrPath { op: Value },
    #[error("unknown JSON patch op `{op}`")]
    UnknownOp { op: String },
    #[error("`{path}` is not a JSON pointer")]
    NotAPointer { path: String },
    #[error("{op} without from")]
    NoFrom { op: String },
    #[error("{op}: {path} does not exist")]
    Missing { op: &'static str, path: String },
    #[error("test failed at {path}")]
    TestFailed { path: String },
    #[error("bad index in {path}")]
    BadIndex { path: String },
    #[error("add: index out of range in {path}")]
    IndexOutOfRange { path: String },
    #[error("add: the parent of {path} does not exist")]
    NoParent { path: String },
}

/// RFC 6902 on one object. An error names the failing operation.
pub fn json6902(body: &mut Value, ops: &[Value]) -> Result<(), PatchError> {
    for op in ops {
        let field = |k: &str| op.get(k).and_then(Value::as_str);
        let (Some(kind), Some(path)) = (field("op"), field("path")) else {
            return Err(PatchError::NoOpOrPath { op: op.clone() });
        };
        let value = op.get("value").cloned().unwrap_or(Value::Null);
        match kind {
            "add" => add(body, path, value)?,
            "replace" => match body.pointer_mut(path) {
                Some(slot) => *slot = value,
                // kustomize's json-patch (gopkg.in/evanphx/json-patch.v4)
                // reads a missing key of an object as present: replace
                // sets it, as add would.
                None => {
                    let (parent, key) = split_pointer(path)?;
                    match body.pointer_mut(&parent) {
                        Some(Value::Object(map)) => {
                            map.insert(key, value);
                        }
                        _ => {
                            return Err(PatchError::Missing {
                                op: "replace",
                                path: path.into(),
                            });
                        }
                    }
                }
            },
            "remove" => {
                remove(body, path)?;
            }
            "move" | "copy" => {
                let from = field("from").ok_or_else(|| PatchError::NoFrom { op: kind.into() })?;
                let moved = if kind == "move" {
                    remove(body, from)?
                } else {
                    body.pointer(from)
                        .cloned()
                        .ok_or_else(|| PatchError::Missing {
                            op: "copy",
                            path: from.into(),
                        })?
                };
                add(body, path, moved)?;
            }
            "test" => {
                if body.pointer(path) != Some(&value) {
                    return Err(PatchError::TestFailed { path: path.into() });
                }
            }
            other => return Err(PatchError::UnknownOp { op: other.into() }),
        }
    }
    Ok(())
}

fn split_pointer(path: &str) -> Result<(String, String), PatchError> {
    let (parent, last) = path
        .rsplit_once('/')
        .ok_or_else(|| PatchError::NotAPointer { path: path.into() })?;
    Ok((
        parent.to_string(),
        last.replace("~1", "/").replace("~0", "~"),
    ))
}

fn add(body: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
    if path.is_empty() {
        *body = value;
        return Ok(());
    }
    let (parent, key) = split_pointer(path)?;
    match body.pointer_mut(&parent) {
        Some(Value::Object(map)) => {
            map.insert(key, value);
            Ok(())
        }
        Some(Value::Array(items)) => {
            let index = if key == "-" {
                items.len()
            } else {
                key.parse::<usize>()
                    .map_err(|_| PatchError::BadIndex { path: path.into() })?
            };
            if index > items.len() {
                return Err(PatchError::IndexOutOfRange { path: path.into() });
            }
            items.insert(index, value);
            Ok(())
        }
        _ => Err(PatchError::NoParent { path: path.into() }),
    }
}

fn remove(body: &mut Value, path: &str) -> Result<Value, PatchError> {
    let (parent, key) = split_pointer(path)?;
    let missing = || PatchError::Missing {
        op: "remove",
        path: path.into(),
    };
    match body.pointer_mut(&parent) {
        Some(Value::Object(map)) => map.remove(&key).ok_or_else(missing),
        Some(Value::Array(items)) => match key.parse::<usize>() {
            Ok(i) if i < items.len() => Ok(items.remove(i)),
            _ => Err(missing()),
        },
        _ => Err(missing()),
    }
}
