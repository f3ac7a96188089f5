//! A release's values entries: files, inline maps, sops secrets, `set`
//! and `setString` typed as helm types them, and the `{{ env }}` texts
//! bootstrap cannot carry over.

use std::path::PathBuf;

use serde_json::{Map, Value};

use super::defaults::short;
use super::{ValuesNote, ValuesOut};
use crate::import::helmfile::{Release as HelmfileRelease, State};
use crate::import::{Issue, helmfile};

/// An environment variable where bootstrap takes no template.
pub(super) fn env_issue(at: &helmfile::Origin, key: &str, text: &str) -> Issue {
    let names = crate::import::gotmpl::env_mark_names(text).join("`, `");
    Issue::new(
        &at.file,
        at.line,
        format!(
            "{key}: {}",
            crate::import::gotmpl::env_marks_to_templates(text)
        ),
        format!(
            "reads the environment variable `{names}`; bootstrap has no template in `{key}`: write the value"
        ),
    )
}

/// Whether the values read the environment: `Ok(true)` when every such
/// leaf is exactly one `env`/`requiredEnv` and nothing else holds `{{`
/// (so the file can be a `.hbs` template), `Err` with the leaf when not.
pub(super) fn env_leaves(values: &Map<String, Value>) -> Result<bool, EnvInText> {
    fn walk(value: &Value, marks: &mut usize, braces: &mut Option<String>) {
        match value {
            Value::String(s) if crate::import::gotmpl::has_env_mark(s) => {
                let whole = crate::import::gotmpl::env_mark_names(s).len() == 1
                    && crate::import::gotmpl::env_marks_to_templates(s).starts_with("{{")
                    && crate::import::gotmpl::env_marks_to_templates(s).ends_with("}}")
                    && !s.contains("{{");
                if whole {
                    *marks += 1;
                } else {
                    *braces = Some(crate::import::gotmpl::env_marks_to_templates(s));
                }
            }
            Value::String(s) if s.contains("{{") => *braces = Some(s.clone()),
            Value::Array(list) => list.iter().for_each(|v| walk(v, marks, braces)),
            Value::Object(map) => map.values().for_each(|v| walk(v, marks, braces)),
            _ => {}
        }
    }
    let (mut marks, mut braces) = (0, None);
    for value in values.values() {
        walk(value, &mut marks, &mut braces);
    }
    match (marks, braces) {
        (0, _) => Ok(false),
        (_, None) => Ok(true),
        (_, Some(leaf)) => Err(EnvInText(leaf)),
    }
}

/// A values leaf that reads the environment inside other text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "reads the environment inside other text (or next to other `{{{{`); bootstrap templates a values file only as a whole `.hbs`: write the value, or a values file `NAME.yaml.hbs` with `{{{{env \"NAME\"}}}}`"
)]
pub(super) struct EnvInText(pub(super) String);

/// A `secrets:` entry as a values file bootstrap decrypts with sops itself
/// (docs/design.md#secrets): it must exist and be recognisable as
/// sops-encrypted, by name or by its `sops:` metadata.
pub(super) fn secrets_file(state: &State, entry: &Value) -> Result<PathBuf, NotSecrets> {
    let Some(path) = entry.as_str().map(str::trim) else {
        return Err(NotSecrets::NotAPath);
    };
    if path.contains("{{") {
        return Err(NotSecrets::Templated);
    }
    let file =
        crate::import::hooks::absolute(&crate::import::gotmpl::normalize(&state.dir.join(path)));
    let text = std::fs::read_to_string(&file).map_err(NotSecrets::Unreadable)?;
    if !crate::config::sops::named(&file) && !crate::config::sops::has_metadata(&text) {
        return Err(NotSecrets::NotSops);
    }
    Ok(file)
}

/// Why a `secrets:` entry is not converted.
#[derive(Debug, thiserror::Error)]
pub(super) enum NotSecrets {
    #[error("a `secrets:` entry that is not a path is not converted")]
    NotAPath,
    #[error(
        "a templated `secrets:` path is not converted; write the file's path in the release's `valuesFiles`"
    )]
    Templated,
    #[error("cannot read it ({0}); helmfile fails too")]
    Unreadable(std::io::Error),
    #[error(
        "is not sops-encrypted as bootstrap recognises it (a `*.sops.yaml` name or a top-level `sops:` key); decrypt it into a values file, or re-encrypt it with sops"
    )]
    NotSops,
}

/// The Flux HelmRelease among `reads` whose `spec.values` are `values`.
pub(super) fn flux_values(
    values: &Map<String, Value>,
    reads: &[crate::import::gotmpl::Read],
) -> Option<PathBuf> {
    for read in reads {
        let docs: Vec<Value> = serde_saphyr::from_multiple(&read.text).unwrap_or_default();
        for doc in docs {
            let is_hr = doc.get("kind").and_then(Value::as_str) == Some("HelmRelease")
                && doc
                    .get("apiVersion")
                    .and_then(Value::as_str)
                    .is_some_and(|a| a.starts_with("helm.toolkit.fluxcd.io/"));
            let theirs = doc.pointer("/spec/values").cloned().unwrap_or(Value::Null);
            let same = match &theirs {
                Value::Object(m) => m == values,
                Value::Null => values.is_empty(),
                _ => false,
            };
            if is_hr && same {
                return Some(read.path.clone());
            }
        }
    }
    None
}

/// `set:` and `setString:` as one values file merged last, as helm applies
/// `--set` after every values file. Paths are helm's `--set` keys
/// (`a.b.c`, `\.` for a literal dot); list indices are not converted.
pub(super) fn set_values(
    release: &HelmfileRelease,
    state: &State,
    issues: &mut Vec<Issue>,
) -> Option<ValuesOut> {
    let mut values = Map::new();
    for (key, as_string) in [("set", false), ("setString", true)] {
        let Some(list) = release.spec.get(key).and_then(Value::as_array) else {
            continue;
        };
        let at = release.origin(key, state);
        for entry in list {
            let name = entry.get("name").and_then(Value::as_str).unwrap_or("");
            let value = match (entry.get("value"), entry.get("values")) {
                (Some(v), _) => typed_set_value(v, as_string),
                (None, Some(Value::Array(list))) => {
                    Value::Array(list.iter().map(|v| typed_set_value(v, as_string)).collect())
                }
                _ => {
                    issues.push(Issue::new(
                        &at.file,
                        at.line,
                        format!("{key} {name}"),
                        "sets no `value` (a `file:` value is not converted)",
                    ));
                    continue;
                }
            };
            // helmfile renders `set` values as templates with `.Release`.
            let value = match value.as_str() {
                Some(text) if text.contains("{{") => {
                    let data = helmfile::release_data(&release.spec);
                    match crate::import::gotmpl::Engine::translating_env(data)
                        .render(text, &at.file, at.line, &state.dir)
                    {
                        Ok(rendered) if crate::import::gotmpl::has_env_mark(&rendered) => {
                            // setString: a string whatever the variable holds.
                            Value::String(if as_string {
                                crate::import::gotmpl::as_string_mark(&rendered)
                            } else {
                                rendered
                            })
                        }
                        Ok(rendered) => typed_set_value(&Value::String(rendered), as_string),
                        Err(u) => {
                            issues.push(Issue::from(u));
                            continue;
                        }
                    }
                }
                // Marked by the import's environment masking (helmfile
                // rendered the variable's value).
                Some(text) if as_string && crate::import::gotmpl::has_env_mark(text) => {
                    Value::String(crate::import::gotmpl::as_string_mark(text))
                }
                _ => value,
            };
            let path = split_set_path(name);
            if name.is_empty() || path.iter().any(|p| p.contains('[') || p.is_empty()) {
                issues.push(Issue::new(
                    &at.file,
                    at.line,
                    format!("{key} {name}"),
                    "a `--set` path with list indices is not converted; write the value into a values file",
                ));
                continue;
            }
            insert_path(&mut values, &path, value);
        }
    }
    (!values.is_empty()).then(|| ValuesOut::Generated {
        env: false,
        values,
        note: ValuesNote::Text(format!(
            "`set:` of the release in {}, applied last as helm applies --set",
            state.path.display()
        )),
    })
}

/// helm's `--set` typing (helm `pkg/strvals/parser.go` `typedVal`): `true`,
/// `false`, `null` and integers without a leading zero are typed, the rest
/// stays a string; `setString` keeps everything a string.
pub(super) fn typed_set_value(value: &Value, as_string: bool) -> Value {
    let text = match value {
        Value::String(s) => s.clone(),
        other if as_string => short(other),
        other => return other.clone(),
    };
    if as_string {
        return Value::String(text);
    }
    match text.as_str() {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        "null" => Value::Null,
        t if !(t.starts_with('0') && t.len() > 1) => t
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or(Value::String(text)),
        _ => Value::String(text),
    }
}

pub(super) fn split_set_path(name: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut chars = name.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(next), Some(p)) = (chars.next(), parts.last_mut()) {
                    p.push(next);
                }
            }
            '.' => parts.push(String::new()),
            c => {
                if let Some(p) = parts.last_mut() {
                    p.push(c);
                }
            }
        }
    }
    parts
}

pub(super) fn insert_path(values: &mut Map<String, Value>, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut map = values;
    for key in parents {
        let slot = map
            .entry(key.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if !slot.is_object() {
            *slot = Value::Object(Map::new());
        }
        let Value::Object(inner) = slot else { return };
        map = inner;
    }
    map.insert(last.clone(), value);
}
