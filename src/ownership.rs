//! Live ownership checks before anything changes (docs/design.md#live-refusal-rules): refuse when Flux
//! already targets a bootstrap release, when a release's Helm secret carries
//! Flux's labels, or when a release is mid-operation in Helm.

use std::collections::BTreeMap;

use crate::error::Error;
use crate::helm::{DeployedRelease, Helm};
use crate::kube::apply::list_all;
use crate::kube::client::Connection;
use crate::plan::Plan;
use crate::release::ReleaseId;

/// A reason a bootstrap release must not be touched now.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Conflict {
    pub release: ReleaseId,
    pub object: String,
    pub message: String,
}

/// Every live conflict, for `apply` (which refuses) and `status` (which shows them).
pub async fn conflicts<H: Helm>(
    plan: &Plan,
    helm: &H,
    connection: &Connection,
) -> Result<Vec<Conflict>, Error> {
    Ok(conflicts_and_listed(plan, helm, connection).await?.0)
}

/// The conflicts, and every release `helm list --all` knows (any status).
async fn conflicts_and_listed<H: Helm>(
    plan: &Plan,
    helm: &H,
    connection: &Connection,
) -> Result<(Vec<Conflict>, BTreeMap<ReleaseId, DeployedRelease>), Error> {
    let ours: Vec<&ReleaseId> = plan.installed().map(|r| &r.id).collect();
    let mut found = Vec::new();

    for api_version in [
        "helm.toolkit.fluxcd.io/v2",
        "helm.toolkit.fluxcd.io/v2beta2",
        "helm.toolkit.fluxcd.io/v2beta1",
    ] {
        let list = list_all(&connection.client, api_version, "HelmRelease")
            .await
            .map_err(|e| Error::failed_with("cannot list Flux HelmReleases in the cluster", e))?;
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
            if ours.contains(&&target)
                && !found
                    .iter()
                    .any(|c: &Conflict| c.release == target && c.object.contains(name))
            {
                let suspended = spec
                    .get("suspend")
                    .and_then(|v| v.as_bool())
                    .unwrap_or(false);
                found.push(Conflict {
                    release: target.clone(),
                    object: format!("HelmRelease {}/{name}", namespace.unwrap_or("default")),
                    message: format!(
                        "Flux HelmRelease {}/{name} ({}) manages Helm release {target}, which bootstrap owns; suspend it (`flux suspend helmrelease {name} -n {}`; deleting it unsuspended makes helm-controller uninstall the release), then delete it and remove it from git (`bootstrap check` shows where), or drop the release from bootstrap",
                        namespace.unwrap_or("default"),
                        if suspended { "suspended" } else { "not suspended" },
                        namespace.unwrap_or("default")
                    ),
                });
            }
        }
    }

    for id in &ours {
        let api: ::kube::Api<k8s_openapi::api::core::v1::Secret> =
            ::kube::Api::namespaced(connection.client.clone(), &id.namespace);
        let params =
            ::kube::api::ListParams::default().labels(&format!("owner=helm,name={}", id.name));
        let secrets =
            crate::kube::retry::retry(crate::kube::apply::API_RETRY_BUDGET, || api.list(&params))
                .await
                .map_err(|e| {
                    Error::failed_with(format!("cannot read the Helm release secrets of {id}"), e)
                })?;
        for secret in secrets.items {
            let labels = secret.metadata.labels.clone().unwrap_or_default();
            if labels
                .keys()
                .any(|k| k.starts_with("helm.toolkit.fluxcd.io/"))
                && !found.iter().any(|c: &Conflict| &c.release == *id)
            {
                let secret_name = secret.metadata.name.clone().unwrap_or_default();
                found.push(Conflict {
                    release: (*id).clone(),
                    object: format!("Secret {}/{secret_name}", id.namespace),
                    message: format!(
                        "Helm release {id} carries Flux's labels (Secret {}/{secret_name}): Flux already manages it; take it out of Flux first, or drop it from bootstrap",
                        id.namespace
                    ),
                });
            }
        }
    }

    let deployed = helm
        .list(&connection.target)
        .await
        .map_err(|e| Error::failed_with("cannot list Helm releases", e))?;
    let listed = deployed.iter().map(|r| (r.id.clone(), r.clone())).collect();
    for release in deployed {
        if release.is_pending() && ours.contains(&&release.id) {
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
    Ok((found, listed))
}

/// Refuses on any conflict; otherwise returns every release Helm knows (any
/// status, with chart and version), so the release steps need not ask Helm
/// again.
pub async fn live_conflicts<H: Helm>(
    plan: &Plan,
    helm: &H,
    connection: &Connection,
) -> Result<BTreeMap<ReleaseId, DeployedRelease>, Error> {
    let (found, listed) = conflicts_and_listed(plan, helm, connection).await?;
    if found.is_empty() {
        return Ok(listed);
    }
    let lines: Vec<String> = found.iter().map(|c| c.message.clone()).collect();
    Err(Error::failed(format!(
        "refusing to apply; nothing was changed:\n  {}",
        lines.join("\n  ")
    )))
}
