//! Every YAML read in the project goes through here, on `serde-saphyr`: a
//! maintained, panic-free YAML parser that reports line and column for both
//! syntax and type errors (the same crate kube 5 uses; `serde_yaml` is archived).

use std::path::Path;

use serde::de::DeserializeOwned;

use crate::error::{Problem, did_you_mean};

/// Parses every document of a (multi-document) YAML text. Empty documents are
/// skipped, as kubectl and helm do.
pub fn documents<T: DeserializeOwned>(text: &str, file: &Path) -> Result<Vec<T>, Problem> {
    serde_saphyr::from_multiple::<T>(text).map_err(|e| problem(&e, file))
}

/// Parses a single-document YAML text.
pub fn document<T: DeserializeOwned>(text: &str, file: &Path) -> Result<T, Problem> {
    serde_saphyr::from_str::<T>(text).map_err(|e| problem(&e, file))
}

/// Parses a Kubernetes-style manifest stream into JSON values, skipping empty
/// documents and nulls. A chart's rendered output is far bigger than any
/// config file (thousands of documents, CRD schemas nested deep), so its
/// limits are raised; they still bound a runaway input.
pub fn manifests(text: &str, file: &Path) -> Result<Vec<serde_json::Value>, Problem> {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_documents = 100_000;
    budget.max_nodes = 20_000_000;
    budget.max_events = 50_000_000;
    budget.max_depth = 256;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    Ok(
        serde_saphyr::from_multiple_with_options::<serde_json::Value>(text, options)
            .map_err(|e| problem(&e, file))?
            .into_iter()
            .filter(|doc| !doc.is_null())
            .collect(),
    )
}

/// A parser limit in the user's words (its Debug text read like
/// `budget breached: Documents { documents: 1025 }`).
fn breach(breach: &serde_saphyr::budget::BudgetBreach) -> String {
    use serde_saphyr::budget::BudgetBreach as B;
    let what = match breach {
        B::Documents { documents } => format!("more than {} YAML documents", documents - 1),
        B::Depth { depth } => format!("nesting deeper than {} levels", depth - 1),
        B::Nodes { .. } => "too many values (maps, lists and scalars)".to_string(),
        B::Events { .. } => "too much YAML".to_string(),
        B::Aliases { .. } | B::Anchors { .. } | B::AliasAnchorRatio { .. } => {
            "too many YAML anchors or aliases (an alias bomb?)".to_string()
        }
        B::ScalarBytes { .. } | B::InputBytes { .. } => "too many bytes of text".to_string(),
        other => format!("a YAML limit ({other:?})"),
    };
    format!("holds {what}, more than bootstrap reads; split it into smaller files")
}

pub fn to_string<T: serde::Serialize>(value: &T) -> String {
    serde_saphyr::to_string(value).unwrap_or_else(|e| format!("# cannot render as YAML: {e}\n"))
}

fn problem(error: &serde_saphyr::Error, file: &Path) -> Problem {
    let error = error.without_snippet();
    let message = match error {
        serde_saphyr::Error::SerdeUnknownField {
            field, expected, ..
        } => format!(
            "unknown key `{field}`{}",
            match did_you_mean(field, expected.iter().copied()) {
                hint if hint.is_empty() => format!(" (allowed: {})", expected.join(", ")),
                hint => hint,
            }
        ),
        serde_saphyr::Error::SerdeMissingField { field, .. } => {
            format!("missing required key `{field}`")
        }
        serde_saphyr::Error::Budget { breach: b, .. } => breach(b),
        other => {
            let options =
                serde_saphyr::render_options! { snippets: serde_saphyr::SnippetMode::Off };
            let text = other.render_with_options(options);
            // The renderer appends " at line L, column C"; we print the location
            // ourselves in the `file:line:col` prefix.
            match text.rfind(" at line ") {
                Some(cut) => text[..cut].to_string(),
                None => text,
            }
        }
    };
    let mut problem = Problem::new(message).file(file);
    if let Some(location) = error.location() {
        problem = problem.at(location.line(), location.column());
    }
    problem
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_read_in_words_and_manifests_may_be_large() {
        let many = "a: 1\n---\n".repeat(1100);
        let problem = documents::<serde_json::Value>(&many, Path::new("r.yaml")).unwrap_err();
        assert_eq!(
            problem.message,
            "holds more than 1024 YAML documents, more than bootstrap reads; split it into smaller files"
        );
        assert_eq!(manifests(&many, Path::new("m.yaml")).unwrap().len(), 1100);
    }
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Doc {
        name: String,
        values_files: Option<Vec<String>>,
    }

    #[test]
    fn unknown_key_suggests_the_closest() {
        let err = documents::<Doc>("name: a\nvaluesFile: [x]\n", Path::new("r.yaml")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "r.yaml:2:1: unknown key `valuesFile`; did you mean `valuesFiles`?"
        );
    }

    #[test]
    fn missing_key_is_named() {
        let err = documents::<Doc>("---\nvaluesFiles: []\n", Path::new("r.yaml")).unwrap_err();
        assert!(
            err.to_string().contains("missing required key `name`"),
            "{err}"
        );
    }

    #[test]
    fn syntax_error_has_a_location() {
        let err = documents::<Doc>("name: [a\n", Path::new("r.yaml")).unwrap_err();
        assert_eq!(err.line, Some(1));
    }

    #[test]
    fn empty_documents_are_skipped() {
        let docs = manifests("---\n---\na: 1\n---\n", Path::new("m.yaml")).unwrap();
        assert_eq!(docs.len(), 1);
    }
}
