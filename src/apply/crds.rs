//! The CRD phase: render every CRD-carrying release, keep the
//! CustomResourceDefinitions, apply them all server-side, wait until each is
//! Established. Runs before any release is touched.

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use crate::event::{CrdChange, Emitter, Event};
use crate::helm::{Helm, TemplateRequest};
use crate::kube::wait::{ObjectTarget, wait_for};
use crate::kube::{apply, ready};
use crate::plan::Plan;
use crate::release::{ReleaseId, Source};

/// How long a CRD may take to become Established.
pub const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(120);
const PARALLEL_APPLIES: usize = 8;

#[derive(Debug, Clone)]
pub struct Crd {
    pub release: ReleaseId,
    pub name: String,
    pub manifest: Value,
}

/// Renders the CRDs of every release in the CRD phase. Pure with respect to
/// the cluster: nothing is changed here.
pub async fn render<H: Helm>(helm: &H, plan: &Plan) -> Result<Vec<Crd>, String> {
    let mut crds: Vec<Crd> = Vec::new();
    for release in plan.crd_releases() {
        let docs = match &release.source {
            Source::Chart(chart) => {
                let request = TemplateRequest {
                    release: &release.id,
                    chart,
                    values: &release.crd_values,
                    include_crds: true,
                };
                let text = helm.template(&request).await.map_err(|e| {
                    format!("release `{}`: cannot render its CRDs: {e}", release.id)
                })?;
                crate::yaml::manifests(&text, Path::new("helm template output")).map_err(|e| {
                    format!(
                        "release `{}`: helm template printed invalid YAML: {e}",
                        release.id
                    )
                })?
            }
            Source::Manifests(list) => {
                let mut docs = Vec::new();
                for source in list {
                    let text = fetch(source).await.map_err(|e| {
                        format!(
                            "release `{}`: cannot read manifest `{source}`: {e}",
                            release.id
                        )
                    })?;
                    docs.extend(
                        crate::yaml::manifests(&text, Path::new(source))
                            .map_err(|e| format!("release `{}`: {e}", release.id))?,
                    );
                }
                docs
            }
        };
        for doc in docs {
            if doc.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
                continue;
            }
            let Some(name) = doc.pointer("/metadata/name").and_then(Value::as_str) else {
                continue;
            };
            let crd = Crd {
                release: release.id.clone(),
                name: name.to_string(),
                manifest: doc.clone(),
            };
            // Two charts shipping one CRD: the later release in execution order wins.
            match crds.iter_mut().find(|c| c.name == crd.name) {
                Some(existing) => *existing = crd,
                None => crds.push(crd),
            }
        }
    }
    Ok(crds)
}

async fn fetch(source: &str) -> Result<String, String> {
    if source.starts_with("https://") || source.starts_with("http://") {
        let url = source.to_string();
        tokio::task::spawn_blocking(move || {
            ureq::get(&url)
                .call()
                .map_err(|e| e.to_string())?
                .body_mut()
                .read_to_string()
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())?
    } else {
        tokio::fs::read_to_string(source)
            .await
            .map_err(|e| e.to_string())
    }
}

/// Applies and establishes `crds`; the first failure names the CRD and the
/// release it came from.
pub async fn apply_all(
    client: &::kube::Client,
    crds: &[Crd],
    events: &Emitter,
) -> Result<(), String> {
    let results: Vec<Result<(), String>> = futures::stream::iter(crds)
        .map(|crd| async move {
            let change = apply::apply(client, &crd.manifest).await.map_err(|e| {
                format!(
                    "CRD {} (from release `{}`) could not be applied: {e}",
                    crd.name, crd.release
                )
            })?;
            events.emit(Event::CrdApplied {
                release: crd.release.clone(),
                crd: crd.name.clone(),
                change,
            });
            Ok(())
        })
        .buffer_unordered(PARALLEL_APPLIES)
        .collect()
        .await;
    results.into_iter().collect::<Result<Vec<()>, String>>()?;

    let waits: Vec<Result<(), String>> = futures::stream::iter(crds)
        .map(|crd| async move {
            let target = ObjectTarget::new(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                None,
                &crd.name,
            );
            wait_for(
                client.clone(),
                &target,
                ready::crd_established,
                ESTABLISH_TIMEOUT,
                |_| {},
            )
            .await
            .map_err(|e| {
                format!(
                    "CRD {} (from release `{}`) did not become Established: {e}",
                    crd.name, crd.release
                )
            })
        })
        .buffer_unordered(PARALLEL_APPLIES)
        .collect()
        .await;
    results_ok(waits)?;
    events.emit(Event::CrdsEstablished { count: crds.len() });
    Ok(())
}

fn results_ok(results: Vec<Result<(), String>>) -> Result<(), String> {
    results
        .into_iter()
        .collect::<Result<Vec<()>, String>>()
        .map(|_| ())
}

pub fn dry_run(crds: &[Crd], events: &Emitter) {
    for crd in crds {
        events.emit(Event::CrdApplied {
            release: crd.release.clone(),
            crd: crd.name.clone(),
            change: CrdChange::WouldApply,
        });
    }
}
