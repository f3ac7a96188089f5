//! The CRD phase: render every CRD-carrying release, keep the
//! CustomResourceDefinitions, apply them all server-side, wait until each is
//! Established. Runs before any release is touched.

mod established;
pub(crate) mod record;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use crate::error::Problem;
use crate::event::{CrdChange, Emitter, Event};
use crate::helm::{Helm, HelmError, TemplateRequest};
use crate::kube::apply::ApplyError;
use crate::kube::wait::{ObjectTarget, WaitError, wait_for};
use crate::kube::{apply, ready};
use crate::plan::Plan;
use crate::release::{Release, ReleaseId, Source};

/// Why the CRD phase could not render or apply a release's CRDs; each names
/// the release (and the CRD) and keeps the underlying error as its cause.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CrdError {
    #[error("release `{release}`: cannot render its CRDs (its chart and version are set at {at})")]
    Render {
        release: ReleaseId,
        /// `file:line` of the chart's version.
        at: String,
        #[source]
        source: HelmError,
    },
    #[error("release `{release}`: helm template printed invalid YAML")]
    RenderedYaml {
        release: ReleaseId,
        #[source]
        source: Problem,
    },
    #[error("release `{release}`: cannot read manifest `{location}`")]
    Fetch {
        release: ReleaseId,
        location: String,
        #[source]
        source: FetchError,
    },
    #[error("release `{release}`: manifest `{location}` is not valid YAML")]
    ManifestYaml {
        release: ReleaseId,
        location: String,
        #[source]
        source: Problem,
    },
    #[error("CRD {crd} (from release `{release}`) could not be applied")]
    Apply {
        crd: String,
        release: ReleaseId,
        #[source]
        source: ApplyError,
    },
    #[error("CRD {crd} (from release `{release}`) did not become Established")]
    Establish {
        crd: String,
        release: ReleaseId,
        #[source]
        source: WaitError,
    },
}

/// Reading a `manifests:` source.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FetchError {
    #[error(transparent)]
    Http(#[from] ureq::Error),
    #[error(transparent)]
    File(#[from] std::io::Error),
    #[error("the download task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// How long a CRD may take to become Established.
pub(crate) const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(120);
/// CRDs applied at once: the API server takes them side by side (creating
/// the shipped catalog's 21 CRDs 8 at a time took 1.2x as long as all at
/// once, docs/BENCHMARKS.md), bounded for catalogs with hundreds.
const PARALLEL_APPLIES: usize = 32;
/// CRDs watched for `Established` at once (a watch each, a connection each).
const PARALLEL_WAITS: usize = 64;

#[derive(Debug, Clone)]
pub(crate) struct Crd {
    pub release: ReleaseId,
    pub name: String,
    pub manifest: Value,
}

/// How many CRD-phase releases are rendered at once.
const PARALLEL_RENDERS: usize = 4;

/// Renders the CRDs of every release in the CRD phase, several releases at
/// a time (each waits only for its own chart, docs/design.md#chart-cache).
/// Pure with respect to the cluster: nothing is changed here.
pub(crate) async fn render<H: Helm>(helm: &H, plan: &Plan) -> Result<Vec<Crd>, CrdError> {
    let releases: Vec<&Release> = plan.crd_releases().collect();
    // By index: a closure over `&Release` would not be `Send` for every
    // lifetime (a limit of rustc). `buffered` keeps the results in order.
    let rendered: Vec<Result<Vec<Value>, CrdError>> = futures::stream::iter(0..releases.len())
        .map(|i| documents(helm, releases[i], &plan.root))
        .buffered(PARALLEL_RENDERS)
        .collect()
        .await;
    let mut crds: Vec<Crd> = Vec::new();
    for (release, docs) in releases.into_iter().zip(rendered) {
        for crd in carried(&release.id, docs?) {
            // Two charts shipping one CRD: the later release in execution order wins.
            match crds.iter_mut().find(|c| c.name == crd.name) {
                Some(existing) => *existing = crd,
                None => crds.push(crd),
            }
        }
    }
    Ok(crds)
}

/// The CustomResourceDefinitions among a release's rendered documents, as
/// the CRD phase applies them.
pub(crate) fn carried(release: &ReleaseId, docs: Vec<Value>) -> impl Iterator<Item = Crd> + '_ {
    docs.into_iter().filter_map(move |doc| {
        if doc.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
            return None;
        }
        let name = doc
            .pointer("/metadata/name")
            .and_then(Value::as_str)?
            .to_string();
        Some(Crd {
            release: release.clone(),
            name,
            manifest: owned_by_bootstrap(doc),
        })
    })
}

/// What `.Capabilities.APIVersions` holds on a cluster once `crds` are
/// applied: for every served version of every CRD, `group/version` and
/// `group/version/Kind`, as helm builds the set from the cluster's discovery
/// (helm pkg/action/action.go, GetVersionSet). Sorted, without repeats.
pub(crate) fn api_versions(crds: &[Crd]) -> Vec<String> {
    let mut out = std::collections::BTreeSet::new();
    for crd in crds {
        let spec = &crd.manifest["spec"];
        let (Some(group), Some(kind)) = (
            spec["group"].as_str(),
            spec.pointer("/names/kind").and_then(Value::as_str),
        ) else {
            continue;
        };
        for version in spec["versions"].as_array().into_iter().flatten() {
            if version["served"].as_bool() == Some(false) {
                continue;
            }
            if let Some(name) = version["name"].as_str() {
                out.insert(format!("{group}/{name}"));
                out.insert(format!("{group}/{name}/{kind}"));
            }
        }
    }
    out.into_iter().collect()
}

/// The label Helm (and charts imitating it) put on what Helm manages.
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// A CRD as bootstrap applies it: charts that template their CRDs (cert-manager,
/// flux-operator) label them `app.kubernetes.io/managed-by: Helm`, which would
/// tell every reader that Helm owns them; Helm does not (the CRD phase applies
/// them server-side, and helm installs the release with `--skip-crds`), so
/// bootstrap says it is the manager.
fn owned_by_bootstrap(mut crd: Value) -> Value {
    if let Some(labels) = crd
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
        && labels.get(MANAGED_BY).and_then(Value::as_str) == Some("Helm")
    {
        labels.insert(MANAGED_BY.into(), Value::from("bootstrap"));
    }
    crd
}

/// Every document of one CRD-phase release: its chart rendered with the
/// CRD values (CRDs included), or its manifests read.
async fn documents<H: Helm>(
    helm: &H,
    release: &Release,
    root: &Path,
) -> Result<Vec<Value>, CrdError> {
    match &release.source {
        Source::Chart(chart) => {
            let request = TemplateRequest {
                release: &release.id,
                chart,
                values: release.crd_values(),
                secrets: release.secrets(),
                include_crds: true,
                api_versions: &[],
            };
            let text = helm
                .template(&request)
                .await
                .map_err(|source| CrdError::Render {
                    release: release.id.clone(),
                    at: release.version_at(root),
                    source,
                })?;
            crate::yaml::manifests(&text, Path::new("helm template output")).map_err(|source| {
                CrdError::RenderedYaml {
                    release: release.id.clone(),
                    source,
                }
            })
        }
        Source::Manifests(list) => {
            let mut docs = Vec::new();
            for source in list {
                let text = fetch(source).await.map_err(|e| CrdError::Fetch {
                    release: release.id.clone(),
                    location: source.clone(),
                    source: e,
                })?;
                docs.extend(
                    crate::yaml::manifests(&text, Path::new(source)).map_err(|e| {
                        CrdError::ManifestYaml {
                            release: release.id.clone(),
                            location: source.clone(),
                            source: e,
                        }
                    })?,
                );
            }
            Ok(docs)
        }
    }
}

async fn fetch(source: &str) -> Result<String, FetchError> {
    if source.starts_with("https://") || source.starts_with("http://") {
        let url = source.to_string();
        let text = tokio::task::spawn_blocking(move || -> Result<String, ureq::Error> {
            ureq::get(&url).call()?.body_mut().read_to_string()
        })
        .await??;
        Ok(text)
    } else {
        Ok(tokio::fs::read_to_string(source).await?)
    }
}

/// The wait of a CRD the watch did not see Established by the phase's
/// deadline reads it once more, for at least this long, so its error says
/// what the CRD reports.
const LAST_LOOK: Duration = Duration::from_secs(2);

fn crd_target(name: &str) -> ObjectTarget {
    ObjectTarget::new(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        None,
        name,
    )
}

/// Applies and establishes `crds`; the first failure names the CRD and the
/// release it came from. A CRD `known` says is as the last apply left it
/// is not applied again (docs/design.md#crd-record). Returns what this run
/// applied, as the record keeps it.
pub(crate) async fn apply_all(
    client: &::kube::Client,
    crds: &[Crd],
    known: &record::Known,
    events: &Emitter,
) -> Result<BTreeMap<String, record::Applied>, CrdError> {
    let unchanged: Vec<bool> = crds
        .iter()
        .map(|crd| known.unchanged(&crd.name, &crd.manifest))
        .collect();
    // Opened before the first write, so it sees every change the writes
    // cause (docs/design.md#phases-of-apply).
    let mut watch = if unchanged.contains(&false) {
        established::EstablishedWatch::open(client, ESTABLISH_TIMEOUT).await
    } else {
        None
    };
    let applied = write_all(client, crds, &unchanged, events).await?;
    // Skipped (unchanged since it was Established), or Established already
    // in what the apply returned: nothing to wait for.
    let established = |crd: &Crd| {
        events.emit(Event::CrdEstablished {
            release: crd.release.clone(),
            crd: crd.name.clone(),
        });
    };
    let mut waiting: Vec<(&Crd, Option<&str>)> = Vec::new();
    for (crd, applied) in crds.iter().zip(&applied) {
        match applied {
            Some(a) if ready::crd_established(Some(a)) != ready::Readiness::Ready => {
                waiting.push((crd, a.pointer("/metadata/uid").and_then(Value::as_str)));
            }
            _ => established(crd),
        }
    }
    wait_established(client, waiting, watch.as_mut(), events).await?;
    events.emit(Event::CrdsEstablished { count: crds.len() });
    Ok(crds
        .iter()
        .zip(&applied)
        .filter_map(|(crd, returned)| {
            Some((
                crd.name.clone(),
                record::applied(&crd.manifest, returned.as_ref()?)?,
            ))
        })
        .collect())
}

/// Applies every CRD not `unchanged`, up to [`PARALLEL_APPLIES`] at a
/// time; what each apply returned, `None` for those skipped.
async fn write_all(
    client: &::kube::Client,
    crds: &[Crd],
    unchanged: &[bool],
    events: &Emitter,
) -> Result<Vec<Option<Value>>, CrdError> {
    let results: Vec<Result<Option<Value>, CrdError>> =
        futures::stream::iter(crds.iter().zip(unchanged))
            .map(|(crd, unchanged)| async move {
                if *unchanged {
                    events.emit(Event::CrdApplied {
                        release: crd.release.clone(),
                        crd: crd.name.clone(),
                        change: CrdChange::Unchanged,
                    });
                    return Ok(None);
                }
                let (change, applied) =
                    apply::apply(client, &crd.manifest)
                        .await
                        .map_err(|source| CrdError::Apply {
                            crd: crd.name.clone(),
                            release: crd.release.clone(),
                            source,
                        })?;
                events.emit(Event::CrdApplied {
                    release: crd.release.clone(),
                    crd: crd.name.clone(),
                    change,
                });
                Ok(Some(applied))
            })
            .buffered(PARALLEL_APPLIES)
            .collect()
            .await;
    results.into_iter().collect()
}

/// Waits until every CRD of `waiting` is Established: through `watch`
/// while it lasts, then one wait per CRD it did not see, all to one
/// deadline.
async fn wait_established(
    client: &::kube::Client,
    mut waiting: Vec<(&Crd, Option<&str>)>,
    watch: Option<&mut established::EstablishedWatch>,
    events: &Emitter,
) -> Result<(), CrdError> {
    let established = |crd: &Crd| {
        events.emit(Event::CrdEstablished {
            release: crd.release.clone(),
            crd: crd.name.clone(),
        });
    };
    let deadline = tokio::time::Instant::now() + ESTABLISH_TIMEOUT;
    if let Some(watch) = watch
        && !waiting.is_empty()
    {
        let by_name: BTreeMap<&str, &Crd> =
            waiting.iter().map(|(c, _)| (c.name.as_str(), *c)).collect();
        let names: Vec<(&str, Option<&str>)> = waiting
            .iter()
            .map(|(c, uid)| (c.name.as_str(), *uid))
            .collect();
        let mut failed = None;
        let left = watch
            .until(&names, deadline, |name, seen| {
                let crd = by_name[name];
                match seen {
                    established::Seen::Established => established(crd),
                    established::Seen::Failed(reason) => {
                        failed.get_or_insert((crd, reason));
                    }
                }
            })
            .await;
        if let Some((crd, reason)) = failed {
            return Err(CrdError::Establish {
                crd: crd.name.clone(),
                release: crd.release.clone(),
                source: WaitError::Failed {
                    target: crd_target(&crd.name).to_string(),
                    reason,
                },
            });
        }
        waiting.retain(|(c, _)| left.contains(&c.name));
    }

    // What the watch did not see: one wait per CRD, until the same deadline.
    let waits: Vec<Result<(), CrdError>> = futures::stream::iter(waiting)
        .map(|(crd, _)| async move {
            let timeout = deadline
                .saturating_duration_since(tokio::time::Instant::now())
                .max(LAST_LOOK);
            wait_for(
                client.clone(),
                &crd_target(&crd.name),
                ready::crd_established,
                timeout,
                |_: &str| {},
            )
            .await
            .map_err(|source| CrdError::Establish {
                crd: crd.name.clone(),
                release: crd.release.clone(),
                // The whole wait, the watch's part included.
                source: match source {
                    WaitError::Timeout { target, last, .. } => WaitError::Timeout {
                        target,
                        after: ESTABLISH_TIMEOUT,
                        last,
                    },
                    other => other,
                },
            })?;
            established(crd);
            Ok(())
        })
        .buffer_unordered(PARALLEL_WAITS)
        .collect()
        .await;
    waits.into_iter().collect::<Result<Vec<()>, CrdError>>()?;
    Ok(())
}

pub(crate) fn dry_run(crds: &[Crd], events: &Emitter) {
    for crd in crds {
        events.emit(Event::CrdApplied {
            release: crd.release.clone(),
            crd: crd.name.clone(),
            change: CrdChange::WouldApply,
        });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn api_versions_are_the_served_group_versions_and_their_kinds() {
        let crd = |group: &str, kind: &str, versions: Value| Crd {
            release: ReleaseId::new("kube-system", "gateway-api"),
            name: format!("{}s.{group}", kind.to_lowercase()),
            manifest: json!({"kind": "CustomResourceDefinition", "spec": {
                "group": group, "names": {"kind": kind}, "versions": versions}}),
        };
        let crds = [
            crd(
                "gateway.networking.k8s.io",
                "GatewayClass",
                json!([{"name": "v1", "served": true}, {"name": "v1beta1", "served": true},
                       {"name": "v1alpha1", "served": false}]),
            ),
            crd(
                "gateway.networking.k8s.io",
                "Gateway",
                json!([{"name": "v1", "served": true}]),
            ),
        ];
        assert_eq!(
            api_versions(&crds),
            [
                "gateway.networking.k8s.io/v1",
                "gateway.networking.k8s.io/v1/Gateway",
                "gateway.networking.k8s.io/v1/GatewayClass",
                "gateway.networking.k8s.io/v1beta1",
                "gateway.networking.k8s.io/v1beta1/GatewayClass",
            ]
        );
    }

    #[test]
    fn helms_managed_by_label_becomes_bootstraps() {
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "certificates.cert-manager.io", "labels": {
                "app.kubernetes.io/managed-by": "Helm",
                "app.kubernetes.io/name": "cert-manager",
            }},
        });
        let owned = owned_by_bootstrap(crd);
        assert_eq!(
            owned["metadata"]["labels"],
            json!({"app.kubernetes.io/managed-by": "bootstrap", "app.kubernetes.io/name": "cert-manager"})
        );
        let other = json!({"metadata": {"name": "x", "labels": {"app.kubernetes.io/managed-by": "kustomize"}}});
        assert_eq!(
            owned_by_bootstrap(other.clone()),
            other,
            "only Helm's claim is replaced"
        );
        let bare = json!({"metadata": {"name": "x"}});
        assert_eq!(owned_by_bootstrap(bare.clone()), bare);
    }
}
