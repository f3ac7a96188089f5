//! Server-side apply of arbitrary manifests (CRDs, the ledger, the admission
//! policy) with one fixed field manager, resolving kinds through discovery.

use std::time::Duration;

use ::kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use ::kube::core::GroupVersionKind;
use ::kube::discovery::{self, Scope};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

use super::retry::{API_RETRY_BUDGET, is_not_found, retry};

/// What applying an object (a CRD, in the CRD phase) changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CrdChange {
    Created,
    Updated,
    Unchanged,
    /// `--dry-run`.
    WouldApply,
}

/// The field manager for everything bootstrap applies.
pub const FIELD_MANAGER: &str = "bootstrap";

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("{0}")]
    Invalid(String),
    #[error("the API server does not serve {0}")]
    UnknownKind(String),
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: ::kube::Error,
    },
    #[error(
        "{what} is being deleted and was still there after {}; what it holds is still being removed (a `destroy --crds` moments ago?): run again once it is gone (`kubectl get` it shows its finalizers)",
        crate::duration::span(*waited)
    )]
    StillTerminating { what: String, waited: Duration },
}

/// How long [`apply`] waits for an object being deleted to be gone before
/// it creates it again.
pub const TERMINATING_WAIT: Duration = Duration::from_secs(120);

/// apiVersion, kind, namespace and name of a manifest.
pub fn identity(obj: &Value) -> Result<(GroupVersionKind, Option<String>, String), ApplyError> {
    let text = |path: &[&str]| -> Option<String> {
        let mut v = obj;
        for p in path {
            v = v.get(p)?;
        }
        v.as_str().map(str::to_string)
    };
    let api_version = text(&["apiVersion"])
        .ok_or_else(|| ApplyError::Invalid("manifest has no apiVersion".into()))?;
    let kind = text(&["kind"]).ok_or_else(|| ApplyError::Invalid("manifest has no kind".into()))?;
    let name = text(&["metadata", "name"])
        .ok_or_else(|| ApplyError::Invalid(format!("{kind} has no metadata.name")))?;
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), api_version.clone()),
    };
    Ok((
        GroupVersionKind {
            group,
            version,
            kind,
        },
        text(&["metadata", "namespace"]),
        name,
    ))
}

pub async fn resolve(
    client: &::kube::Client,
    gvk: &GroupVersionKind,
) -> Result<(ApiResource, bool), ApplyError> {
    // Served by every Kubernetes since 1.16, and applied by the dozen in
    // the CRD phase: no discovery call per CRD.
    if (gvk.group.as_str(), gvk.version.as_str(), gvk.kind.as_str())
        == ("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
    {
        return Ok((ApiResource::erase::<CustomResourceDefinition>(&()), false));
    }
    let (resource, caps) = retry(API_RETRY_BUDGET, || discovery::pinned_kind(client, gvk))
        .await
        .map_err(|e| match &e {
            e if is_not_found(e) => {
                ApplyError::UnknownKind(format!("{}/{} {}", gvk.group, gvk.version, gvk.kind))
            }
            ::kube::Error::Discovery(_) => {
                ApplyError::UnknownKind(format!("{}/{} {}", gvk.group, gvk.version, gvk.kind))
            }
            _ => ApplyError::Api {
                what: format!("discovery of {}", gvk.kind),
                source: e,
            },
        })?;
    Ok((resource, caps.scope == Scope::Namespaced))
}

fn api_for(
    client: &::kube::Client,
    resource: &ApiResource,
    namespaced: bool,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    match (namespaced, namespace) {
        (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, resource),
        (true, None) => Api::default_namespaced_with(client.clone(), resource),
        (false, _) => Api::all_with(client.clone(), resource),
    }
}

/// Applies `obj` (server-side, forced) and says whether it changed, with
/// the object as the API server returned it (its status included).
pub async fn apply(client: &::kube::Client, obj: &Value) -> Result<(CrdChange, Value), ApplyError> {
    let (gvk, namespace, name) = identity(obj)?;
    let (resource, namespaced) = resolve(client, &gvk).await?;
    let api = api_for(client, &resource, namespaced, namespace.as_deref());
    let what = format!("{} {name}", gvk.kind);
    // Its metadata alone (a CRD can be a megabyte): whether it exists, its
    // resourceVersion, whether it is being deleted.
    let get = || async {
        retry(API_RETRY_BUDGET, || api.get_metadata_opt(&name))
            .await
            .map_err(|source| ApplyError::Api {
                what: what.clone(),
                source,
            })
    };
    let mut existing = get().await?;
    // An object being deleted (a CRD whose custom resources are still
    // being removed) would take the apply and then vanish: it is created
    // again once it is gone.
    let deadline = tokio::time::Instant::now() + TERMINATING_WAIT;
    let mut nudge = CleanupNudge::default();
    while existing
        .as_ref()
        .is_some_and(|o| o.metadata.deletion_timestamp.is_some())
    {
        if tokio::time::Instant::now() >= deadline {
            return Err(ApplyError::StillTerminating {
                what,
                waited: TERMINATING_WAIT,
            });
        }
        // Its conditions say whether its cleanup failed: the whole object,
        // read only when a nudge would be due.
        if gvk.kind == "CustomResourceDefinition"
            && nudge.due()
            && let Ok(Some(full)) = api.get_opt(&name).await
            && let Ok(value) = serde_json::to_value(full)
        {
            nudge.when_stuck(&api, &name, &value).await;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        existing = get().await?;
    }
    let before = existing.and_then(|o| o.metadata.resource_version);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let patch = Patch::Apply(obj);
    let applied = retry(API_RETRY_BUDGET, || api.patch(&name, &params, &patch))
        .await
        .map_err(|source| ApplyError::Api {
            what: what.clone(),
            source,
        })?;
    let after = applied.metadata.resource_version.clone();
    let change = match before {
        None => CrdChange::Created,
        Some(rv) if Some(&rv) == after.as_ref() => CrdChange::Unchanged,
        Some(_) => CrdChange::Updated,
    };
    Ok((change, serde_json::to_value(applied).unwrap_or(Value::Null)))
}

/// A deleted CRD whose custom resources the API server failed to remove:
/// condition `Terminating` with reason `InstanceDeletionFailed` (kube-apiserver
/// reports "could not list instances: storage is (re)initializing" when the
/// CRD is deleted moments after its storage was set up). Its cleanup is then
/// retried only after a backoff that reaches minutes.
pub fn cleanup_failed(crd: &Value) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                c["type"] == "Terminating"
                    && c["status"] == "True"
                    && c["reason"] == "InstanceDeletionFailed"
            })
        })
}

/// The annotation whose write makes the API server retry a failed CRD
/// cleanup now: its finalizer controller queues the CRD again on every
/// update, ahead of its backoff.
pub const CLEANUP_RETRIED: &str = "bootstrap.dev/cleanup-retried";

/// How often a stuck cleanup is nudged.
const NUDGE_EVERY: Duration = Duration::from_secs(2);

/// Nudges a deleted CRD (callers pass only CRDs) whose cleanup failed
/// ([`cleanup_failed`]), at most
/// every [`NUDGE_EVERY`]; a failed nudge only means the API server's own
/// retry is waited for.
#[derive(Default)]
pub struct CleanupNudge {
    last: Option<tokio::time::Instant>,
}

impl CleanupNudge {
    /// Whether [`Self::when_stuck`] would nudge now if the CRD's cleanup
    /// failed (none in the last [`NUDGE_EVERY`]).
    pub fn due(&self) -> bool {
        self.last.is_none_or(|at| at.elapsed() >= NUDGE_EVERY)
    }

    pub async fn when_stuck<K>(&mut self, api: &Api<K>, name: &str, live: &Value)
    where
        K: ::kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        if !cleanup_failed(live) {
            return;
        }
        if !self.due() {
            return;
        }
        self.last = Some(tokio::time::Instant::now());
        let now = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
        let patch = Patch::Merge(serde_json::json!({
            "metadata": {"annotations": {CLEANUP_RETRIED: now}}
        }));
        let _ = api.patch(name, &PatchParams::default(), &patch).await;
    }
}

/// Whether the API server serves `kind` of `api_version` (false also when
/// discovery cannot say).
pub async fn serves(client: &::kube::Client, api_version: &str, kind: &str) -> bool {
    let obj =
        serde_json::json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}});
    let Ok((gvk, _, _)) = identity(&obj) else {
        return false;
    };
    resolve(client, &gvk).await.is_ok()
}

/// Reads an object; `None` when it or its kind does not exist.
pub async fn get(
    client: &::kube::Client,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Result<Option<Value>, ApplyError> {
    let obj =
        serde_json::json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
    let (gvk, _, _) = identity(&obj)?;
    let (resource, namespaced) = match resolve(client, &gvk).await {
        Ok(r) => r,
        Err(ApplyError::UnknownKind(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let api = api_for(client, &resource, namespaced, namespace);
    let found = retry(API_RETRY_BUDGET, || api.get_opt(name))
        .await
        .map_err(|source| ApplyError::Api {
            what: format!("{kind} {name}"),
            source,
        })?;
    Ok(found.and_then(|o| serde_json::to_value(o).ok()))
}

/// Lists objects of a kind in all namespaces; empty when the kind is not served.
pub async fn list_all(
    client: &::kube::Client,
    api_version: &str,
    kind: &str,
) -> Result<Vec<Value>, ApplyError> {
    let obj =
        serde_json::json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}});
    let (gvk, _, _) = identity(&obj)?;
    let (resource, _) = match resolve(client, &gvk).await {
        Ok(r) => r,
        Err(ApplyError::UnknownKind(_)) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let params = ::kube::api::ListParams::default();
    let list = retry(API_RETRY_BUDGET, || api.list(&params))
        .await
        .map_err(|source| ApplyError::Api {
            what: format!("list {kind}"),
            source,
        })?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|o| {
            let mut v = serde_json::to_value(o).ok()?;
            v["apiVersion"] = Value::String(api_version.to_string());
            v["kind"] = Value::String(kind.to_string());
            Some(v)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crd_whose_cleanup_failed_is_told_apart() {
        let crd = |reason: &str| {
            serde_json::json!({"status": {"conditions": [
                {"type": "Established", "status": "True"},
                {"type": "Terminating", "status": "True", "reason": reason,
                 "message": "could not list instances: storage is (re)initializing"},
            ]}})
        };
        assert!(cleanup_failed(&crd("InstanceDeletionFailed")));
        assert!(!cleanup_failed(&crd("InstanceDeletionInProgress")));
        assert!(!cleanup_failed(&serde_json::json!({"status": {}})));
    }

    #[test]
    fn identity_of_core_and_group_kinds() {
        let (gvk, ns, name) = identity(&serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "b"}})).unwrap();
        assert_eq!(
            (gvk.group.as_str(), gvk.version.as_str(), gvk.kind.as_str()),
            ("", "v1", "ConfigMap")
        );
        assert_eq!((ns.as_deref(), name.as_str()), (Some("b"), "a"));
        let (gvk, _, _) = identity(&serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "x"}})).unwrap();
        assert_eq!(gvk.group, "apiextensions.k8s.io");
        assert!(identity(&serde_json::json!({"kind": "X"})).is_err());
    }
}
