//! `template --manifests`: the chart rendered by `helm template` with the
//! release's values, as the install (or, with `--crds`, the CRD phase) would
//! render it. Asked for explicitly, because rendering may download charts.

use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Failure, Prerequisite};
use crate::helm::{Helm, TemplateRequest};
use crate::release::{CrdPolicy, Release, Source};
use crate::values::REDACTED;

/// What `--manifests` shows for one release.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Rendered {
    Documents {
        documents: Vec<Value>,
        /// CustomResourceDefinitions dropped because `--crds` was not given.
        crds_omitted: usize,
    },
    /// Not something helm renders; a line saying why.
    Note(String),
}

pub(super) struct Options {
    pub crds: bool,
    pub show_secrets: bool,
    /// `--api-versions` for helm: what the CRD phase will serve.
    pub api_versions: Vec<String>,
}

/// Checks helm first, so a missing or too old helm is a prerequisite error
/// (exit 2) before any chart is rendered.
pub(super) async fn check_helm<H: Helm>(helm: &H) -> Result<(), Error> {
    helm.version()
        .await
        .map(|_| ())
        .map_err(|e| Prerequisite::Helm { error: e.into() }.into())
}

pub(super) async fn render<H: Helm>(
    helm: &H,
    release: &Release,
    options: &Options,
) -> Result<Rendered, Error> {
    let chart = match &release.source {
        Source::Chart(chart) => chart,
        Source::Manifests(list) => {
            return Ok(Rendered::Note(format!(
                "manifests, applied as they are: {}",
                list.join(", ")
            )));
        }
    };
    if release.crds == CrdPolicy::Only && !options.crds {
        return Ok(Rendered::Note(
            "crds: only — never installed; --crds shows the CRDs it contributes".into(),
        ));
    }
    let request = TemplateRequest {
        release: &release.id,
        chart,
        values: if options.crds {
            release.crd_values()
        } else {
            release.values()
        },
        secrets: release.secrets(),
        include_crds: options.crds,
        api_versions: &options.api_versions,
    };
    let text = helm.template(&request).await.map_err(|e| {
        Error::from(Failure::Template {
            release: release.id.to_string(),
            source: e.into(),
        })
    })?;
    let documents =
        crate::yaml::manifests(&text, Path::new("helm template output")).map_err(|e| {
            Error::from(Failure::TemplateOutput {
                release: release.id.to_string(),
                problem: e,
            })
        })?;
    let mut rendered = shape(documents, options);
    if !options.show_secrets
        && let Rendered::Documents { documents, .. } = &mut rendered
    {
        // The values of sops-encrypted files, wherever the chart put them
        // (a ConfigMap, an env var, an annotation).
        let secrets = release.secrets().strings(request.values);
        for doc in documents {
            scrub(doc, &secrets);
        }
    }
    Ok(rendered)
}

/// Every string in `doc` with each of `secrets` (longest first) replaced.
fn scrub(doc: &mut Value, secrets: &[String]) {
    match doc {
        Value::String(text) => *text = crate::values::scrub(text, secrets),
        Value::Array(items) => items.iter_mut().for_each(|v| scrub(v, secrets)),
        Value::Object(map) => map.values_mut().for_each(|v| scrub(v, secrets)),
        _ => {}
    }
}

/// Drops CRDs unless asked for and redacts Secrets unless asked not to.
pub(super) fn shape(documents: Vec<Value>, options: &Options) -> Rendered {
    let total = documents.len();
    let documents: Vec<Value> = documents
        .into_iter()
        .filter(|doc| options.crds || !is_kind(doc, "CustomResourceDefinition"))
        .map(|doc| {
            if options.show_secrets {
                doc
            } else {
                redact_secret(doc)
            }
        })
        .collect();
    Rendered::Documents {
        crds_omitted: total - documents.len(),
        documents,
    }
}

fn is_kind(doc: &Value, kind: &str) -> bool {
    doc.get("kind").and_then(Value::as_str) == Some(kind)
}

/// A Secret with every `data` and `stringData` value replaced; the keys stay,
/// so a reader still sees what the Secret holds.
pub(super) fn redact_secret(mut doc: Value) -> Value {
    if !is_kind(&doc, "Secret") {
        return doc;
    }
    for field in ["data", "stringData"] {
        if let Some(Value::Object(map)) = doc.get_mut(field) {
            for value in map.values_mut() {
                *value = Value::String(REDACTED.to_string());
            }
        }
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secret() -> Value {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
               "data": {"tls.key": "c2VjcmV0"}, "stringData": {"token": "abc"}, "type": "Opaque"})
    }

    #[test]
    fn secret_values_are_redacted_but_keys_kept() {
        assert_eq!(
            redact_secret(secret()),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                   "data": {"tls.key": REDACTED}, "stringData": {"token": REDACTED}, "type": "Opaque"})
        );
    }

    #[test]
    fn values_of_sops_files_are_scrubbed_from_any_document() {
        let mut doc = json!({"kind": "ConfigMap", "data": {"dsn": "postgres://app:db-pass-1@db", "n": 5},
                             "metadata": {"annotations": {"x": "db-pass-1"}}});
        scrub(&mut doc, &["db-pass-1".into()]);
        assert_eq!(
            doc,
            json!({"kind": "ConfigMap", "data": {"dsn": "postgres://app:<redacted>@db", "n": 5},
                   "metadata": {"annotations": {"x": "<redacted>"}}})
        );
    }

    #[test]
    fn other_kinds_are_untouched_even_with_a_data_field() {
        let cm = json!({"kind": "ConfigMap", "data": {"password": "visible-by-design"}});
        assert_eq!(redact_secret(cm.clone()), cm);
    }

    #[test]
    fn crds_are_dropped_and_counted_unless_asked_for() {
        let docs = vec![
            json!({"kind": "CustomResourceDefinition", "metadata": {"name": "a.b"}}),
            secret(),
        ];
        let hidden = Options {
            crds: false,
            show_secrets: false,
            api_versions: Vec::new(),
        };
        match shape(docs.clone(), &hidden) {
            Rendered::Documents {
                documents,
                crds_omitted,
            } => {
                assert_eq!(crds_omitted, 1);
                assert_eq!(documents, vec![redact_secret(secret())]);
            }
            other => panic!("{other:?}"),
        }
        let shown = Options {
            crds: true,
            show_secrets: true,
            api_versions: Vec::new(),
        };
        assert_eq!(
            shape(docs.clone(), &shown),
            Rendered::Documents {
                documents: docs,
                crds_omitted: 0
            }
        );
    }
}
