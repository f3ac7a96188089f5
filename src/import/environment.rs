//! What helmfile read from the environment, never written as a literal
//! (docs/design.md#import). Rendering with helmfile gives the values as
//! they are on this machine: an API token read with `requiredEnv` comes
//! back as its text. The importer finds the variables the repository's
//! templates read (`env "X"`, `requiredEnv "X"`) and, in what it writes
//! from helmfile's rendering (computed values, `set`/`setString`, hook
//! arguments), puts the mark of the variable wherever its value appears,
//! as its own template subset does: a leaf that is the value becomes
//! `{{env "X"}}` in a `.hbs` values file (`{{toJson (env "X")}}` for
//! `setString`); a longer text that holds it is listed, with the value
//! never shown.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::gotmpl::env_mark;
use super::rendered::RenderedState;

/// A variable the templates read, with its value on this machine.
#[derive(Debug, Clone)]
pub(crate) struct Variable {
    pub name: String,
    /// Read with `requiredEnv` somewhere: `{{env "X"}}` (an error when
    /// unset) rather than `{{env "X" ""}}`.
    pub required: bool,
    value: String,
}

/// Values shorter than this are replaced only where a leaf is the value
/// itself, never inside a longer text (`1` is in too many texts).
const INSIDE_TEXT: usize = 6;

/// Files read at most below one state file's directory.
const FILE_LIMIT: usize = 2000;

/// The variables the state files and the templates beside them read, each
/// with a value set and not empty on this machine.
pub(crate) fn referenced(state_files: &[PathBuf]) -> Vec<Variable> {
    let mut files: Vec<PathBuf> = state_files.to_vec();
    for state in state_files {
        if let Some(dir) = state.parent() {
            template_files(dir, &mut files);
        }
    }
    files.sort();
    files.dedup();
    let mut found: Vec<(String, bool)> = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for (name, required) in calls(&text) {
            match found.iter_mut().find(|(n, _)| *n == name) {
                Some((_, r)) => *r |= required,
                None => found.push((name, required)),
            }
        }
    }
    let mut vars: Vec<Variable> = found
        .into_iter()
        .filter_map(|(name, required)| {
            let value = std::env::var(&name).ok().filter(|v| !v.is_empty())?;
            Some(Variable {
                name,
                required,
                value,
            })
        })
        .collect();
    // The longest value first: one that holds another is replaced whole.
    vars.sort_by_key(|v| std::cmp::Reverse(v.value.len()));
    vars
}

/// `env "X"` and `requiredEnv "X"` in a template's text: (X, required).
fn calls(text: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for (function, required) in [("requiredEnv", true), ("env", false)] {
        for (at, _) in text.match_indices(function) {
            // A function name of its own: not inside another word or a field.
            if text[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
            {
                continue;
            }
            let rest = text[at + function.len()..].trim_start_matches([' ', '\t']);
            let Some(quoted) = rest.strip_prefix('"') else {
                continue;
            };
            let name: String = quoted
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && quoted[name.len()..].starts_with('"') {
                out.push((name, required));
            }
        }
    }
    out
}

/// The template files below `dir` (hidden directories left out).
fn template_files(dir: &Path, out: &mut Vec<PathBuf>) {
    super::files_below(dir, &[".yaml", ".yml", ".gotmpl", ".tpl"], FILE_LIMIT, out);
}

/// Puts each variable's mark where its value is, in what the import writes
/// of `state`: the computed values, inline values, `set`/`setString` and
/// hook arguments of every release (never names, namespaces, charts or
/// paths). Returns the names of the variables whose values it replaced,
/// and the fields bootstrap takes no template in that hold a variable's
/// value (written as that value, and said: see [`Literal`]).
pub(crate) fn mask(
    state: &mut RenderedState,
    vars: &[Variable],
) -> (BTreeSet<String>, Vec<Literal>) {
    let mut used = BTreeSet::new();
    let mut literal = Vec::new();
    if vars.is_empty() {
        return (used, literal);
    }
    for release in &mut state.embedded {
        if let Some(values) = release.get_mut("values") {
            mask_value(values, vars, &mut used);
        }
    }
    if let Some(Value::Array(releases)) = state.doc.get_mut("releases") {
        for release in releases {
            let Value::Object(release) = release else {
                continue;
            };
            let text = |k: &str| release.get(k).and_then(Value::as_str).unwrap_or("");
            let id = format!("{}/{}", text("namespace"), text("name"));
            for key in ["name", "namespace", "chart", "version"] {
                if let Some(var) = vars.iter().find(|v| v.value == text(key)) {
                    literal.push(Literal {
                        release: id.clone(),
                        key,
                        variable: var.name.clone(),
                    });
                }
            }
            for key in ["set", "setString", "hooks"] {
                if let Some(value) = release.get_mut(key) {
                    mask_value(value, vars, &mut used);
                }
            }
            if let Some(Value::Array(values)) = release.get_mut("values") {
                for entry in values.iter_mut().filter(|v| v.is_object()) {
                    mask_value(entry, vars, &mut used);
                }
            }
        }
    }
    (used, literal)
}

/// A field bootstrap takes no template in (a release's name, namespace,
/// chart or version) that holds the value of a variable the templates
/// read: written as the value helmfile rendered, and said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Literal {
    pub release: String,
    pub key: &'static str,
    pub variable: String,
}

fn mask_value(value: &mut Value, vars: &[Variable], used: &mut BTreeSet<String>) {
    match value {
        Value::String(text) => {
            if let Some(var) = vars.iter().find(|v| *text == v.value) {
                *text = env_mark(&var.name, var.required);
                used.insert(var.name.clone());
                return;
            }
            for var in vars.iter().filter(|v| v.value.len() >= INSIDE_TEXT) {
                if text.contains(&var.value) {
                    *text = text.replace(&var.value, &env_mark(&var.name, var.required));
                    used.insert(var.name.clone());
                }
            }
        }
        Value::Number(_) | Value::Bool(_) => {
            let shown = value.to_string();
            if let Some(var) = vars.iter().find(|v| v.value.len() >= 4 && v.value == shown) {
                *value = Value::String(env_mark(&var.name, var.required));
                used.insert(var.name.clone());
            }
        }
        Value::Array(list) => list.iter_mut().for_each(|v| mask_value(v, vars, used)),
        Value::Object(map) => map.values_mut().for_each(|v| mask_value(v, vars, used)),
        Value::Null => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn var(name: &str, value: &str, required: bool) -> Variable {
        Variable {
            name: name.into(),
            required,
            value: value.into(),
        }
    }

    #[test]
    fn the_calls_templates_make() {
        assert_eq!(
            calls(
                r#"{{ requiredEnv "API_TOKEN" }} {{env "HOME"}} {{ .Values.env "X" }} getenv "Y" {{ env	"A_1" | quote }}"#
            ),
            vec![
                ("API_TOKEN".to_string(), true),
                ("HOME".to_string(), false),
                ("A_1".to_string(), false)
            ]
        );
    }

    #[test]
    fn values_become_marks_and_nothing_of_the_value_stays() {
        let vars = [
            var("TOKEN", "s3cr3t-t0ken-value", true),
            var("PORT", "8443", false),
            var("SHORT", "ab", true),
        ];
        let mut values = json!({
            "token": "s3cr3t-t0ken-value",
            "url": "https://user:s3cr3t-t0ken-value@example.com",
            "port": 8443,
            "replicas": 1,
            "name": "ab",
            "other": "abc",
        });
        let mut used = BTreeSet::new();
        mask_value(&mut values, &vars, &mut used);
        assert_eq!(
            used.into_iter().collect::<Vec<_>>(),
            ["PORT", "SHORT", "TOKEN"]
        );
        assert_eq!(values["token"], json!("${bootstrap:env:TOKEN}"));
        assert_eq!(
            values["url"],
            json!("https://user:${bootstrap:env:TOKEN}@example.com")
        );
        assert_eq!(values["port"], json!("${bootstrap:env?:PORT}"));
        assert_eq!(values["name"], json!("${bootstrap:env:SHORT}"));
        // A short value is no part of longer texts, a number not the value.
        assert_eq!(
            (&values["other"], &values["replicas"]),
            (&json!("abc"), &json!(1))
        );
        assert!(!values.to_string().contains("s3cr3t"));
    }
}
