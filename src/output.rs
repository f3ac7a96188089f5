//! The one style of what `--output json|yaml` prints (docs/design.md#json-shapes):
//! every key camelCase, values as they are (`run_finished`,
//! `would_install`), durations integer milliseconds, and `schemaVersion`
//! on every document and every event line, bumped on any incompatible
//! change. A document is printed as pretty JSON or as YAML; an event of
//! `apply`/`destroy` as one JSON line or one YAML document (`---` first).

use serde_json::{Map, Value};

/// The version of every JSON/YAML document and event shape. Bumped when a
/// key is renamed or removed or a value changes its meaning; a new key is
/// no incompatible change.
pub(crate) const SCHEMA_VERSION: u64 = 1;

/// The key that carries [`SCHEMA_VERSION`].
pub(crate) const SCHEMA_VERSION_KEY: &str = "schemaVersion";

/// JSON or YAML: the two structured forms of `--output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Yaml,
}

/// A top-level document: `schemaVersion` first, then `value`'s own keys
/// (a value that is no object is returned as it is).
pub(crate) fn versioned(value: Value) -> Value {
    match value {
        Value::Object(fields) => {
            let mut document = Map::new();
            document.insert(SCHEMA_VERSION_KEY.into(), SCHEMA_VERSION.into());
            document.extend(fields.into_iter().filter(|(k, _)| k != SCHEMA_VERSION_KEY));
            Value::Object(document)
        }
        other => other,
    }
}

/// A document as printed: pretty JSON or YAML, ending with a newline.
pub(crate) fn document(format: Format, value: &Value) -> String {
    match format {
        Format::Json => {
            let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
            text.push('\n');
            text
        }
        Format::Yaml => yaml(value),
    }
}

/// One event of a stream: a JSON line, or a YAML document that starts
/// with `---` (as `kubectl get -w -o yaml` separates them).
pub(crate) fn event(format: Format, value: &Value) -> String {
    match format {
        Format::Json => {
            let mut line = serde_json::to_string(value).unwrap_or_default();
            line.push('\n');
            line
        }
        Format::Yaml => format!("---\n{}", yaml(value)),
    }
}

fn yaml(value: &Value) -> String {
    let text = serde_saphyr::to_string(value)
        .unwrap_or_else(|e| format!("# cannot render as YAML: {e}\n"));
    if text.ends_with('\n') {
        text
    } else {
        format!("{text}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_version_comes_first_and_once() {
        let doc = versioned(json!({"cluster": "infra", "schemaVersion": 7}));
        let keys: Vec<&String> = doc.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["schemaVersion", "cluster"]);
        assert_eq!(doc["schemaVersion"], SCHEMA_VERSION);
    }

    #[test]
    fn yaml_reads_back_as_the_same_value() {
        let value = json!({"schemaVersion": 1, "a": {"b": [1, "two", null, true]}, "s": "x: y\nz"});
        let text = document(Format::Yaml, &value);
        let back: Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(back, value);
        let one = event(Format::Yaml, &value);
        assert!(one.starts_with("---\n"), "{one}");
        assert_eq!(event(Format::Json, &value).lines().count(), 1);
    }
}
