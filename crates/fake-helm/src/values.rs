//! User values the way helm assembles them: `-f` files deep-merged in order,
//! then `--set-json`, `--set`, `--set-string`, `--set-file`, `--set-literal`.

use serde_json::{Map, Value};

use crate::args::Parsed;

/// Helm's `mergeMaps`: maps merge key by key, anything else is replaced.
pub fn deep_merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(existing) if existing.is_object() && v.is_object() => {
                        deep_merge(existing, v)
                    }
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

/// Parses one values file's text as helm does: empty means `{}`, a non-map is an error.
pub fn parse_values_text(text: &str, path: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    match serde_saphyr::from_str::<Value>(text) {
        Ok(Value::Null) => Ok(Value::Object(Map::new())),
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(format!(
            "failed to parse {path}: error unmarshaling JSON: json: cannot unmarshal array into Go value of type map[string]interface {{}}"
        )),
        Err(e) => Err(format!("failed to parse {path}: {e}")),
    }
}

#[derive(Clone, Copy)]
enum Typing {
    /// `--set`: true/false/null/integers become typed.
    Inferred,
    /// `--set-string`, `--set-file`, `--set-literal`: always strings.
    String,
    /// `--set-json`: the value is JSON.
    Json,
}

/// Builds the user values from already-parsed values files plus the `--set*` flags.
pub fn user_values(files: Vec<Value>, args: &Parsed) -> Result<Value, String> {
    let mut values = Value::Object(Map::new());
    for file in files {
        deep_merge(&mut values, file);
    }
    for item in args.all("set-json") {
        apply_set(&mut values, item, Typing::Json)?;
    }
    for item in args.all("set") {
        apply_set(&mut values, item, Typing::Inferred)?;
    }
    for item in args.all("set-string") {
        apply_set(&mut values, item, Typing::String)?;
    }
    for item in args.all("set-file") {
        for pair in split_unescaped(item, ',') {
            let (key, path) = pair
                .split_once('=')
                .ok_or_else(|| format!("key \"{pair}\" has no value"))?;
            let text = std::fs::read_to_string(path).map_err(|e| format!("open {path}: {e}"))?;
            set_path(&mut values, key, Value::String(text))?;
        }
    }
    for item in args.all("set-literal") {
        let (key, val) = item
            .split_once('=')
            .ok_or_else(|| format!("key \"{item}\" has no value"))?;
        set_path(&mut values, key, Value::String(val.to_string()))?;
    }
    Ok(values)
}

fn apply_set(values: &mut Value, item: &str, typing: Typing) -> Result<(), String> {
    if let Typing::Json = typing {
        let (key, json) = item
            .split_once('=')
            .ok_or_else(|| format!("key \"{item}\" has no value"))?;
        let v = serde_json::from_str(json)
            .map_err(|e| format!("failed parsing --set-json data {item}: {e}"))?;
        return set_path(values, key, v);
    }
    for pair in split_unescaped(item, ',') {
        let (key, raw) = pair
            .split_once('=')
            .ok_or_else(|| format!("key \"{pair}\" has no value"))?;
        let v = if let Some(list) = raw.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
            Value::Array(
                split_unescaped(list, ',')
                    .iter()
                    .map(|s| typed(s, typing))
                    .collect(),
            )
        } else {
            typed(raw, typing)
        };
        set_path(values, key, v)?;
    }
    Ok(())
}

/// Splits on `sep` outside `{...}` and not preceded by a backslash; removes the escapes.
fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0u32;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    // Keep escapes meant for a later split (`\.` in a key while splitting on commas).
                    if n != sep {
                        cur.push('\\');
                    }
                    cur.push(n);
                }
            }
            '{' => {
                depth += 1;
                cur.push(c);
            }
            '}' => {
                depth = depth.saturating_sub(1);
                cur.push(c);
            }
            c if c == sep && depth == 0 => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out
}

fn typed(raw: &str, typing: Typing) -> Value {
    if let Typing::String = typing {
        return Value::String(raw.to_string());
    }
    match raw {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        "null" => Value::Null,
        // strvals only types base-10 integers without leading zeros; "1.5" stays a string.
        _ if raw == "0" || (!raw.starts_with('0') && !raw.starts_with("-0")) => raw
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| Value::String(raw.to_string())),
        _ => Value::String(raw.to_string()),
    }
}

/// Sets `a.b[0].c` (with `\.` escaping a dot) to `v`, creating maps and lists on the way.
pub fn set_path(root: &mut Value, key: &str, v: Value) -> Result<(), String> {
    let mut cur = root;
    let segments = split_unescaped(key, '.');
    let last = segments.len().saturating_sub(1);
    for (i, seg) in segments.iter().enumerate() {
        let (name, indexes) = split_indexes(seg)?;
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let Value::Object(map) = cur else {
            return Err(format!("cannot set {key}"));
        };
        let mut slot = map.entry(name).or_insert(Value::Null);
        for idx in indexes {
            if !slot.is_array() {
                *slot = Value::Array(Vec::new());
            }
            let Value::Array(list) = slot else {
                return Err(format!("cannot set {key}"));
            };
            if idx > 65536 {
                return Err(format!(
                    "index of {idx} is greater than maximum supported index of 65536"
                ));
            }
            if list.len() <= idx {
                list.resize(idx + 1, Value::Null);
            }
            slot = &mut list[idx];
        }
        if i == last {
            *slot = v;
            return Ok(());
        }
        cur = slot;
    }
    Ok(())
}

fn split_indexes(seg: &str) -> Result<(String, Vec<usize>), String> {
    let Some(open) = seg.find('[') else {
        return Ok((seg.to_string(), Vec::new()));
    };
    let mut indexes = Vec::new();
    for part in seg[open..].split('[').skip(1) {
        let n = part
            .strip_suffix(']')
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("error parsing index: {seg}"))?;
        indexes.push(n);
    }
    Ok((seg[..open].to_string(), indexes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn set_types_like_strvals() {
        let mut v = json!({});
        apply_set(
            &mut v,
            "a.b=1,c=true,d=007,e=x\\,y,f={1,2},g[1]=z,h\\.i=j",
            Typing::Inferred,
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"a": {"b": 1}, "c": true, "d": "007", "e": "x,y", "f": [1, 2], "g": [null, "z"], "h.i": "j"})
        );
    }

    #[test]
    fn maps_merge_lists_replace() {
        let mut v = json!({"a": {"x": 1, "l": [1, 2]}, "b": 1});
        deep_merge(&mut v, json!({"a": {"y": 2, "l": [3]}}));
        assert_eq!(v, json!({"a": {"x": 1, "y": 2, "l": [3]}, "b": 1}));
    }
}

/// The scripted `manifests` as a chart would render them from `values`
/// (the chart's defaults under the user's, as helm coalesces them): a
/// string `{{ .Values.a.b }}` becomes the value at `a.b` (whole, any type),
/// and inside a longer string its text; `{{ .Chart.Version }}` the chart
/// version. So a values change shows in `template` and, after an upgrade,
/// in `get manifest`, as with a real chart.
pub fn render_manifests(objects: &[Value], values: &Value, chart_version: &str) -> Vec<Value> {
    objects
        .iter()
        .map(|o| fill(o, values, chart_version))
        .collect()
}

fn fill(object: &Value, values: &Value, chart_version: &str) -> Value {
    match object {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill(v, values, chart_version)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| fill(v, values, chart_version))
                .collect(),
        ),
        Value::String(s) => {
            let whole = s.trim();
            if let Some(path) = placeholder(whole)
                && whole.len() == s.len()
            {
                return lookup(values, path).cloned().unwrap_or(Value::Null);
            }
            Value::String(substitute(s, values, chart_version))
        }
        other => other.clone(),
    }
}

/// `a.b` of `{{ .Values.a.b }}`.
fn placeholder(text: &str) -> Option<&str> {
    let inner = text.strip_prefix("{{")?.strip_suffix("}}")?.trim();
    inner.strip_prefix(".Values.")
}

fn lookup<'a>(values: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(values, |at, key| at.get(key))
}

fn substitute(text: &str, values: &Value, chart_version: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start..].find("}}") else {
            break;
        };
        let action = &rest[start..start + len + 2];
        out.push_str(&rest[..start]);
        if action.trim_matches(|c| c == '{' || c == '}').trim() == ".Chart.Version" {
            out.push_str(chart_version);
        } else if let Some(path) = placeholder(action) {
            // Go's text/template prints a missing value as `<no value>`.
            match lookup(values, path) {
                Some(Value::String(s)) => out.push_str(s),
                Some(v) => out.push_str(&v.to_string()),
                None => out.push_str("<no value>"),
            }
        } else {
            out.push_str(action);
        }
        rest = &rest[start + len + 2..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod render_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn placeholders_take_values_whole_or_as_text() {
        let objects = [json!({"kind": "ConfigMap", "data": {
            "port": "{{ .Values.port }}", "url": "https://x:{{ .Values.port }}/v{{ .Chart.Version }}",
            "missing": "{{ .Values.nope.x }}", "plain": "a"}})];
        assert_eq!(
            render_manifests(&objects, &json!({"port": 6443}), "1.2.3"),
            [json!({"kind": "ConfigMap", "data": {
                "port": 6443, "url": "https://x:6443/v1.2.3", "missing": null, "plain": "a"}})]
        );
    }
}
