//! Live ownership checks before anything changes (docs/design.md#live-refusal-rules): refuse when Flux
//! already targets a bootstrap release, when a release's Helm secret carries
//! Flux's labels, when two HelmReleases manage a handover release, or when a
//! release is mid-operation in Helm. Also finds which handover releases Flux
//! has adopted (docs/design.md#handover).

use std::collections::BTreeMap;

use futures::StreamExt;

use crate::error::{Error, Failure};
use crate::helm::{DeployedRelease, Helm};
use crate::kube::apply::ApplyError;
use crate::kube::client::Connection;
use crate::plan::Plan;
use crate::release::{Ownership, Release, ReleaseId};

/// A reason a bootstrap release must not be touched now.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Conflict {
    pub release: ReleaseId,
    pub object: String,
    pub message: String,
}

/// A Flux HelmRelease in the cluster that manages a release of the plan.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LiveHelmRelease {
    /// `namespace/name` of the HelmRelease.
    pub name: String,
    pub suspended: bool,
    /// helm-controller has taken the release over: `status.history` holds a
    /// snapshot of it (see [`adopted`]).
    pub adopted: bool,
    pub spec: serde_json::Value,
}

/// Whether helm-controller has adopted release `id` through HelmRelease
/// `hr`: its `status.history` is not empty and its latest snapshot targets
/// the release (fluxcd/helm-controller `internal/reconcile/state.go`
/// `DetermineReleaseState`: a release in storage while `Status.History` is
/// empty is `Unmanaged`, which `internal/reconcile/atomic_release.go` answers
/// with an upgrade using the HelmRelease's chart and values; that upgrade
/// records the snapshot, `internal/release/observation.go`
/// `ObservedToSnapshot`, and `Snapshot.Targets` matches it by name and
/// namespace). The upgraded revision's objects also carry the origin labels
/// `helm.toolkit.fluxcd.io/name`/`namespace` (`internal/postrender/build.go`
/// `NewOriginLabels`, always added).
pub(crate) fn adopted(hr: &serde_json::Value, id: &ReleaseId) -> bool {
    hr.pointer("/status/history/0").is_some_and(|latest| {
        latest.get("name").and_then(|v| v.as_str()) == Some(id.name.as_str())
            && latest.get("namespace").and_then(|v| v.as_str()) == Some(id.namespace.as_str())
    })
}

/// Whether a release manifest's objects carry helm-controller's origin
/// labels for HelmRelease `hr` (`namespace/name`): `helm.toolkit.fluxcd.io/name`
/// and `helm.toolkit.fluxcd.io/namespace`, which the post-renderer of
/// fluxcd/helm-controller `internal/postrender/build.go` (`NewOriginLabels`)
/// adds to every object of every install and upgrade it makes.
pub(crate) fn origin_labelled(manifest: &str, hr: &str) -> bool {
    let Some((namespace, name)) = hr.split_once('/') else {
        return false;
    };
    crate::yaml::manifests(manifest, std::path::Path::new("manifest"))
        .unwrap_or_default()
        .iter()
        .any(|doc| {
            let label = |k: &str| {
                doc.pointer("/metadata/labels")
                    .and_then(|l| l.get(k))
                    .and_then(|v| v.as_str())
            };
            label("helm.toolkit.fluxcd.io/name") == Some(name)
                && label("helm.toolkit.fluxcd.io/namespace") == Some(namespace)
        })
}

/// What the live checks found.
#[derive(Debug, Clone, Default)]
pub(crate) struct Live {
    pub conflicts: Vec<Conflict>,
    /// Every release `helm list --all` knows (any status).
    pub listed: BTreeMap<ReleaseId, DeployedRelease>,
    /// The Flux HelmReleases managing each release of the plan (one entry
    /// per HelmRelease, whatever API versions serve it).
    pub managed_by: BTreeMap<ReleaseId, Vec<LiveHelmRelease>>,
}

impl Live {
    /// The HelmRelease that has adopted a handover release, if any.
    pub(crate) fn adopted_by(&self, id: &ReleaseId) -> Option<&LiveHelmRelease> {
        self.managed_by.get(id)?.iter().find(|hr| hr.adopted)
    }
}

/// The API versions of Flux's HelmRelease read, newest first.
const HELM_RELEASE_VERSIONS: [&str; 3] = [
    "helm.toolkit.fluxcd.io/v2",
    "helm.toolkit.fluxcd.io/v2beta2",
    "helm.toolkit.fluxcd.io/v2beta1",
];

/// The Flux HelmReleases in the cluster (`v2`, `v2beta2`, `v2beta1`) that
/// manage releases of the plan, by release (helm-controller's identity rules).
/// The three versions are listed at once (docs/design.md#preflight-requests);
/// they are read in the order above whatever answered first.
pub(crate) async fn helm_releases(
    plan: &Plan,
    connection: &Connection,
) -> Result<BTreeMap<ReleaseId, Vec<LiveHelmRelease>>, Error> {
    let lists = futures::future::join_all(
        HELM_RELEASE_VERSIONS
            .map(|api_version| list_helm_releases(&connection.client, api_version)),
    )
    .await;
    let mut managed_by: BTreeMap<ReleaseId, Vec<LiveHelmRelease>> = BTreeMap::new();
    for list in lists {
        let list = list.map_err(|e| Failure::ListHelmReleases { source: e.into() })?;
        for hr in list {
            let name = hr
                .pointer("/metadata/name")
                .and_then(|v| v.as_str())
                .unwrap_or_default();
            let namespace = hr.pointer("/metadata/namespace").and_then(|v| v.as_str());
            let spec = hr.get("spec").cloned().unwrap_or_default();
            let identity = crate::flux::helmrelease::identity(name, namespace, &spec);
            let Some(storage) = identity.storage_namespace.clone() else {
                continue;
            };
            let target = ReleaseId::new(storage, identity.release_name.clone());
            if !plan.installed().any(|r| r.id == target) {
                continue;
            }
            let full = format!("{}/{name}", namespace.unwrap_or("default"));
            let entry = managed_by.entry(target.clone()).or_default();
            if entry.iter().any(|h| h.name == full) {
                continue;
            }
            entry.push(LiveHelmRelease {
                name: full,
                suspended: spec
                    .get("suspend")
                    .and_then(|v| v.as_bool())
                    .unwrap_or(false),
                adopted: adopted(&hr, &target),
                spec,
            });
        }
    }
    Ok(managed_by)
}

/// Each release's Helm release Secrets: name and labels.
type SecretLabels = BTreeMap<ReleaseId, Vec<(String, BTreeMap<String, String>)>>;

/// Every HelmRelease of `api_version` in all namespaces, as JSON with its
/// `apiVersion` and `kind`. Listed directly: its resource is `helmreleases`,
/// namespaced, in every version of Flux, so no discovery round trip comes
/// first; a version the cluster does not serve answers 404, which is none.
async fn list_helm_releases(
    client: &::kube::Client,
    api_version: &str,
) -> Result<Vec<serde_json::Value>, ApplyError> {
    use ::kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, "HelmRelease");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "helmreleases");
    let api: ::kube::Api<DynamicObject> = ::kube::Api::all_with(client.clone(), &resource);
    let params = ListParams::default();
    let list =
        match crate::kube::retry::retry(crate::kube::retry::API_RETRY_BUDGET, || api.list(&params))
            .await
        {
            Ok(list) => list,
            Err(e) if crate::kube::retry::is_not_found(&e) => return Ok(Vec::new()),
            Err(source) => {
                return Err(ApplyError::Api {
                    what: "list HelmRelease".into(),
                    source,
                });
            }
        };
    Ok(list
        .items
        .into_iter()
        .filter_map(|o| {
            let mut v = serde_json::to_value(o).ok()?;
            v["apiVersion"] = serde_json::Value::String(api_version.to_string());
            v["kind"] = serde_json::Value::String("HelmRelease".into());
            Some(v)
        })
        .collect())
}

/// How many namespaces' Helm release secrets are listed at once.
const SECRET_LISTS_AT_ONCE: usize = 16;

/// The labels of every Helm release Secret (`owner=helm`) of `releases`,
/// by release, each release's in the API server's order (by name): one
/// metadata-only list per namespace (a Secret's payload is every kept
/// revision of the release; only its labels are read), those of all
/// namespaces at once, each retried as any read (docs/design.md#one-deadline).
/// A namespace that cannot be read fails with its releases named; with
/// several, the first in `releases`' order.
async fn release_secret_labels(
    releases: &[&Release],
    client: &::kube::Client,
) -> Result<SecretLabels, Error> {
    let mut namespaces: Vec<(&str, Vec<&ReleaseId>)> = Vec::new();
    for release in releases {
        let id = &release.id;
        match namespaces.iter_mut().find(|(ns, _)| *ns == id.namespace) {
            Some((_, ids)) => ids.push(id),
            None => namespaces.push((&id.namespace, vec![id])),
        }
    }
    let params = ::kube::api::ListParams::default().labels("owner=helm");
    let listed: Vec<_> = futures::stream::iter(namespaces.iter().map(|(namespace, _)| {
        let api: ::kube::Api<k8s_openapi::api::core::v1::Secret> =
            ::kube::Api::namespaced(client.clone(), namespace);
        let params = &params;
        async move {
            crate::kube::retry::retry(crate::kube::retry::API_RETRY_BUDGET, || {
                api.list_metadata(params)
            })
            .await
        }
    }))
    .buffered(SECRET_LISTS_AT_ONCE)
    .collect()
    .await;
    let mut labels = SecretLabels::new();
    for ((namespace, ids), list) in namespaces.iter().zip(listed) {
        let list = list.map_err(|e| Failure::ReleaseSecrets {
            namespace: namespace.to_string(),
            releases: ids
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            source: e.into(),
        })?;
        for secret in list.items {
            let secret_labels = secret.metadata.labels.unwrap_or_default();
            let Some(id) = ids
                .iter()
                .find(|id| secret_labels.get("name") == Some(&id.name))
            else {
                continue;
            };
            labels
                .entry((*id).clone())
                .or_default()
                .push((secret.metadata.name.unwrap_or_default(), secret_labels));
        }
    }
    Ok(labels)
}

/// Handover releases a Flux HelmRelease has adopted, with its `namespace/name`.
pub(crate) type Adoptions = BTreeMap<ReleaseId, String>;

/// Handover releases of the plan a Flux HelmRelease has adopted, with its
/// `namespace/name`.
pub(crate) async fn adoptions<H: Helm>(
    plan: &Plan,
    helm: &H,
    connection: &Connection,
) -> Result<Adoptions, Error> {
    let live = gather(plan, helm, connection).await?;
    Ok(plan
        .installed()
        .filter(|r| r.ownership == Ownership::Handover)
        .filter_map(|r| Some((r.id.clone(), live.adopted_by(&r.id)?.name.clone())))
        .collect())
}

/// The conflicts of Flux HelmReleases (`managed_by`: which manage each
/// release) with `ours`: one that manages a release bootstrap owns, two
/// that manage one handover release.
fn helm_release_conflicts(
    ours: &[&Release],
    managed_by: &BTreeMap<ReleaseId, Vec<LiveHelmRelease>>,
) -> Vec<Conflict> {
    let mut found = Vec::new();
    for (target, hrs) in managed_by {
        let Some(release) = ours.iter().find(|r| &r.id == target) else {
            continue;
        };
        if release.ownership == Ownership::Handover {
            continue;
        }
        for hr in hrs {
            let (namespace, name) = hr.name.split_once('/').unwrap_or(("default", &hr.name));
            found.push(Conflict {
                release: target.clone(),
                object: format!("HelmRelease {}", hr.name),
                message: format!(
                    "Flux HelmRelease {} ({}) manages Helm release {target}, which bootstrap owns; suspend it (`flux suspend helmrelease {name} -n {namespace}`; deleting it unsuspended makes helm-controller uninstall the release), then delete it and remove it from git (`bootstrap check` shows where), set `ownership: handover` on the release if Flux is meant to take it over, or drop the release from bootstrap",
                    hr.name,
                    if hr.suspended { "suspended" } else { "not suspended" },
                ),
            });
        }
    }
    for (id, hrs) in managed_by {
        let handover = ours
            .iter()
            .any(|r| &r.id == id && r.ownership == Ownership::Handover);
        if handover && hrs.len() > 1 {
            let names: Vec<&str> = hrs.iter().map(|h| h.name.as_str()).collect();
            found.push(Conflict {
                release: id.clone(),
                object: format!("HelmRelease {}", names.join(", HelmRelease ")),
                message: format!(
                    "{} Flux HelmReleases manage handover release {id} ({}): they would upgrade it in turn with their own values; keep one",
                    hrs.len(),
                    names.join(", ")
                ),
            });
        }
    }
    found
}

/// The conflicts, every release helm knows, and the Flux HelmReleases that
/// manage releases of the plan. A `handover` release may be managed by one
/// HelmRelease (that is the point), never by two.
pub(crate) async fn gather<H: Helm>(
    plan: &Plan,
    helm: &H,
    connection: &Connection,
) -> Result<Live, Error> {
    let ours: Vec<&Release> = plan.installed().collect();
    // helm-controller's own labels are expected once Flux adopts a handover
    // release: only the others' secrets are read.
    let owned: Vec<&Release> = ours
        .iter()
        .copied()
        .filter(|r| r.ownership != Ownership::Handover)
        .collect();
    // Three independent reads at once (docs/design.md#preflight-requests),
    // judged in this order whatever answered first.
    let (managed_by, secrets, deployed) = tokio::join!(
        helm_releases(plan, connection),
        release_secret_labels(&owned, &connection.client),
        helm.list(&connection.target),
    );
    let (managed_by, secrets) = (managed_by?, secrets?);
    let mut found = helm_release_conflicts(&ours, &managed_by);
    for release in &owned {
        let id = &release.id;
        for (secret_name, labels) in secrets.get(id).map(Vec::as_slice).unwrap_or_default() {
            if labels
                .keys()
                .any(|k| k.starts_with("helm.toolkit.fluxcd.io/"))
                && !found.iter().any(|c: &Conflict| &c.release == id)
            {
                found.push(Conflict {
                    release: id.clone(),
                    object: format!("Secret {}/{secret_name}", id.namespace),
                    message: format!(
                        "Helm release {id} carries Flux's labels (Secret {}/{secret_name}): Flux already manages it; take it out of Flux first, or drop it from bootstrap",
                        id.namespace
                    ),
                });
            }
        }
    }

    let deployed = deployed.map_err(|e| Failure::ListReleases { source: e.into() })?;
    let listed: BTreeMap<ReleaseId, DeployedRelease> =
        deployed.iter().map(|r| (r.id.clone(), r.clone())).collect();
    let mut managed_by = managed_by;
    for (id, hrs) in managed_by.iter_mut() {
        let handover = ours
            .iter()
            .any(|r| &r.id == id && r.ownership == Ownership::Handover);
        let deployed = listed.get(id).is_some_and(|d| d.status == "deployed");
        if !handover || !deployed || hrs.iter().any(|h| h.adopted) {
            continue;
        }
        // helm-controller's other marker, on the release itself: the
        // revision its adoption upgrade wrote carries its origin labels.
        let manifest = helm
            .get_manifest(&connection.target, id)
            .await
            .map_err(|e| Failure::Manifest {
                release: id.to_string(),
                source: e.into(),
            })?;
        for hr in hrs.iter_mut() {
            hr.adopted = origin_labelled(&manifest, &hr.name);
        }
    }
    for release in deployed {
        if release.is_pending() && ours.iter().any(|r| r.id == release.id) {
            found.push(Conflict {
                release: release.id.clone(),
                object: format!("Helm release {}", release.id),
                message: format!(
                    "Helm release {} is {} (another operation is in progress, or one was interrupted); wait for it, or recover with {}",
                    release.id,
                    release.status,
                    release.recovery()
                ),
            });
        }
    }
    found.sort_by(|a, b| a.release.cmp(&b.release).then(a.object.cmp(&b.object)));
    Ok(Live {
        conflicts: found,
        listed,
        managed_by,
    })
}

/// Refuses on any conflict; otherwise returns every release Helm knows (any
/// status, with chart and version), so the release steps need not ask Helm
/// again, and which handover releases Flux has adopted.
///
/// `took_over`: this run took over the expired lock of a run that died. A
/// release of the plan left `pending-install` or `pending-upgrade` is then
/// that dead run's interrupted operation, and no conflict here: the release
/// step decides, by the release's age, whether a helm of that run could
/// still be working on it (docs/design.md#live-refusal-rules).
pub(crate) async fn live_conflicts<H: Helm>(
    plan: &Plan,
    helm: &H,
    connection: &Connection,
    took_over: bool,
) -> Result<Live, Error> {
    let mut live = gather(plan, helm, connection).await?;
    if took_over {
        let listed = &live.listed;
        live.conflicts.retain(|c| {
            c.object != format!("Helm release {}", c.release)
                || listed
                    .get(&c.release)
                    .is_none_or(|r| r.status != "pending-install" && r.status != "pending-upgrade")
        });
    }
    if live.conflicts.is_empty() {
        return Ok(live);
    }
    Err(Failure::OwnershipRefused {
        conflicts: live.conflicts.iter().map(|c| c.message.clone()).collect(),
    }
    .into())
}
