//! Values checked against the chart itself (docs/design.md#lints): only
//! charts on disk (`chart: { path: … }`), since the lints run offline.

use std::path::Path;

use serde_json::{Map, Value};

use super::Hit;
use super::locate::locate;
use crate::error::suggest;
use crate::plan::Plan;
use crate::release::{ChartSource, Release};

pub(super) const VALUES_UNKNOWN_KEY: &str = "values-unknown-key";

/// Keys no values file can be wrong about: Helm passes `global` to every chart.
const ALWAYS_ALLOWED: &[&str] = &["global"];

/// A values key the chart's `values.schema.json` rejects (a key outside
/// `properties` where `additionalProperties: false`), or, when the chart has
/// no schema, a top-level key absent from its default `values.yaml`: a typo
/// that silently does nothing.
pub(super) fn values_unknown_key(plan: &Plan) -> Vec<Hit> {
    let mut hits = Vec::new();
    for release in plan.installed() {
        let Some(ChartSource::Path(dir)) = release.chart().map(|c| &c.source) else {
            continue;
        };
        let Some(values) = release.values().as_object() else {
            continue;
        };
        let mut unknown = Vec::new();
        if let Some(schema) = read_json(&dir.join("values.schema.json")) {
            by_schema(&schema, &schema, values, &mut Vec::new(), &mut unknown);
        } else if let Some(Value::Object(defaults)) = read_yaml(&dir.join("values.yaml")) {
            for key in values.keys() {
                if !defaults.contains_key(key) && !ALWAYS_ALLOWED.contains(&key.as_str()) {
                    unknown.push((vec![key.clone()], defaults.keys().cloned().collect()));
                }
            }
        }
        for (path, known) in unknown {
            hits.push(hit(release, &path, &known));
        }
    }
    hits
}

fn hit(release: &Release, path: &[String], known: &[String]) -> Hit {
    let key = path.join(".");
    let last = path.last().map(String::as_str).unwrap_or_default();
    let hint = suggest(last, known.iter().map(String::as_str))
        .map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_default();
    let keys: Vec<&str> = path.iter().map(String::as_str).collect();
    Hit {
        release: Some(release.id.clone()),
        at: Some(locate(release, &keys)),
        message: format!(
            "values key `{key}` is not one chart `{}` knows{hint}; Helm would ignore it (or reject it by the chart's schema), so it silently does nothing",
            release.chart_label()
        ),
        fix: "correct the key's spelling or place (see the chart's values.yaml), or remove it"
            .into(),
    }
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn read_yaml(path: &Path) -> Option<Value> {
    crate::yaml::document(&std::fs::read_to_string(path).ok()?, path).ok()
}

/// Follows a local `$ref` (`#/$defs/x`, `#/definitions/x`).
fn resolve<'a>(root: &'a Value, mut schema: &'a Value) -> &'a Value {
    for _ in 0..32 {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(r) if r.starts_with('#') => match root.pointer(&r[1..]) {
                Some(target) => schema = target,
                None => return schema,
            },
            _ => return schema,
        }
    }
    schema
}

/// Keys of `values` that `schema` closes off, recursively: (path, known keys).
fn by_schema(
    root: &Value,
    schema: &Value,
    values: &Map<String, Value>,
    path: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, Vec<String>)>,
) {
    let schema = resolve(root, schema);
    let properties = schema.get("properties").and_then(Value::as_object);
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false))
        && schema.get("patternProperties").is_none();
    for (key, value) in values {
        let known = properties.and_then(|p| p.get(key));
        if known.is_none() && closed && !(path.is_empty() && ALWAYS_ALLOWED.contains(&key.as_str()))
        {
            let mut at = path.clone();
            at.push(key.clone());
            let keys = properties
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            out.push((at, keys));
            continue;
        }
        if let (Some(sub), Value::Object(map)) = (known, value) {
            path.push(key.clone());
            by_schema(root, sub, map, path, out);
            path.pop();
        }
    }
}
