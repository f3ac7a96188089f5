//! Flux post-build variable substitution (fluxcd/pkg
//! `kustomize/kustomize_varsub.go` `SubstituteVariables`, expanding with
//! fluxcd/pkg `envsubst`).
//!
//! - Only when the Kustomization has variables (`len(vars) > 0`); without
//!   `postBuild` everything stays literal.
//! - Variables: `substituteFrom` ConfigMaps/Secrets in the Kustomization's
//!   namespace, in order, then `substitute` over them; newlines are removed
//!   from values.
//! - An object labelled or annotated `kustomize.toolkit.fluxcd.io/substitute:
//!   disabled` is left alone.
//! - Not strict (kustomize-controller's default): an unset variable is set
//!   and empty, so `${X:=d}`/`${X:-d}` give `d` and `${X}`, `${X=d}`, `${X-d}`
//!   give the empty string. `$$` is a literal `$`, so `$${X}` stays `${X}`.
//! - The whole object is substituted (keys and values); here on its string
//!   scalars, which is where names and namespaces live.

use std::collections::BTreeMap;

use serde_json::Value;

pub const DISABLED_KEY: &str = "kustomize.toolkit.fluxcd.io/substitute";

/// Substitutes every string of `value` in place. Returns the expressions
/// it could not evaluate (operators not modelled), which are left as written.
pub fn substitute(value: &mut Value, vars: &BTreeMap<String, String>) -> Vec<String> {
    let mut unsupported = Vec::new();
    walk(value, vars, &mut unsupported);
    unsupported
}

pub fn is_disabled(body: &Value) -> bool {
    ["/metadata/labels", "/metadata/annotations"]
        .iter()
        .any(|p| {
            body.pointer(p)
                .and_then(|m| m.get(DISABLED_KEY))
                .and_then(Value::as_str)
                == Some("disabled")
        })
}

fn walk(value: &mut Value, vars: &BTreeMap<String, String>, bad: &mut Vec<String>) {
    match value {
        Value::String(s) if s.contains('$') => *s = expand(s, vars, bad),
        Value::Array(items) => items.iter_mut().for_each(|v| walk(v, vars, bad)),
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().filter(|k| k.contains('$')).cloned().collect();
            for key in keys {
                if let Some(v) = map.remove(&key) {
                    map.insert(expand(&key, vars, bad), v);
                }
            }
            map.values_mut().for_each(|v| walk(v, vars, bad));
        }
        _ => {}
    }
}

/// Expands `${...}` expressions in `text`.
pub fn expand(text: &str, vars: &BTreeMap<String, String>, bad: &mut Vec<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            // `$$` escapes the dollar.
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('{') {
            match body.find('}') {
                Some(end) => {
                    let expr = &body[..end];
                    match eval(expr, vars) {
                        Some(v) => out.push_str(&v),
                        None => {
                            bad.push(format!("${{{expr}}}"));
                            out.push_str(&format!("${{{expr}}}"));
                        }
                    }
                    rest = &body[end + 1..];
                }
                None => {
                    out.push_str(&rest[i..]);
                    rest = "";
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

fn eval(expr: &str, vars: &BTreeMap<String, String>) -> Option<String> {
    let name_end = expr
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(expr.len());
    let (name, op) = expr.split_at(name_end);
    if name.is_empty() {
        return None;
    }
    // Not strict: every variable is set, unset ones to "".
    let value = vars.get(name).cloned().unwrap_or_default();
    let default = |d: &str| expand(d, vars, &mut Vec::new());
    if op.is_empty() {
        return Some(value);
    }
    if let Some(d) = op.strip_prefix(":=").or_else(|| op.strip_prefix(":-")) {
        return Some(if value.is_empty() { default(d) } else { value });
    }
    if op.starts_with('=') || op.starts_with('-') {
        return Some(value);
    }
    match op {
        "^^" => Some(value.to_uppercase()),
        ",," => Some(value.to_lowercase()),
        "^" => Some(first(&value, char::to_uppercase)),
        "," => Some(first(&value, char::to_lowercase)),
        _ => None,
    }
}

fn first<I: Iterator<Item = char>>(value: &str, f: impl Fn(char) -> I) -> String {
    let mut chars = value.chars();
    match chars.next() {
        Some(c) => f(c).chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envsubst_forms() {
        let vars: BTreeMap<String, String> = [("A".to_string(), "kube-system".to_string())].into();
        let mut bad = Vec::new();
        assert_eq!(expand("${A}", &vars, &mut bad), "kube-system");
        assert_eq!(expand("x-${B:=cilium}-y", &vars, &mut bad), "x-cilium-y");
        assert_eq!(expand("${B:-d}", &vars, &mut bad), "d");
        assert_eq!(expand("${B=d}", &vars, &mut bad), "");
        assert_eq!(expand("$${A}", &vars, &mut bad), "${A}");
        assert_eq!(expand("${A^^}", &vars, &mut bad), "KUBE-SYSTEM");
        assert_eq!(expand("$A", &vars, &mut bad), "$A");
        assert!(bad.is_empty());
        assert_eq!(expand("${A/x/y}", &vars, &mut bad), "${A/x/y}");
        assert_eq!(bad, ["${A/x/y}"]);
    }
}
