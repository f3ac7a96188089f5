//! apiVersion + kind → the REST resource to watch. Built-in kinds come from
//! k8s-openapi without a round trip; anything else goes through discovery,
//! retried because a CRD established a moment ago may not be served yet.

use std::time::Duration;

use ::kube::Client;
use ::kube::core::{ApiResource, GroupVersion};
use ::kube::discovery::{self, Scope};
use ::kube::runtime::watcher;
use k8s_openapi::api::admissionregistration::v1 as admission;
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::batch::v1 as batch;
use k8s_openapi::api::coordination::v1 as coordination;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::rbac::v1 as rbac;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};

use super::{ObjectTarget, Reporter, Stop};

trait Scoped {
    const NAMESPACED: bool;
}
impl Scoped for NamespaceResourceScope {
    const NAMESPACED: bool = true;
}
impl Scoped for ClusterResourceScope {
    const NAMESPACED: bool = false;
}

fn entry<K>() -> (ApiResource, bool)
where
    K: k8s_openapi::Resource,
    K::Scope: Scoped,
{
    let ar = ApiResource {
        group: K::GROUP.into(),
        version: K::VERSION.into(),
        api_version: K::API_VERSION.into(),
        kind: K::KIND.into(),
        plural: K::URL_PATH_SEGMENT.into(),
    };
    (ar, K::Scope::NAMESPACED)
}

/// The kinds bootstrap hooks name most; everything else is discovered.
const BUILTIN: &[fn() -> (ApiResource, bool)] = &[
    entry::<apps::Deployment>,
    entry::<apps::DaemonSet>,
    entry::<apps::StatefulSet>,
    entry::<apps::ReplicaSet>,
    entry::<batch::Job>,
    entry::<batch::CronJob>,
    entry::<core::Pod>,
    entry::<core::ConfigMap>,
    entry::<core::Secret>,
    entry::<core::Service>,
    entry::<core::ServiceAccount>,
    entry::<core::Namespace>,
    entry::<core::Node>,
    entry::<core::PersistentVolumeClaim>,
    entry::<apiextensions::CustomResourceDefinition>,
    entry::<coordination::Lease>,
    entry::<rbac::ClusterRole>,
    entry::<rbac::ClusterRoleBinding>,
    entry::<admission::ValidatingAdmissionPolicy>,
    entry::<admission::ValidatingAdmissionPolicyBinding>,
    entry::<admission::ValidatingWebhookConfiguration>,
    entry::<admission::MutatingWebhookConfiguration>,
];

/// The resource and whether it is namespaced, for well-known built-in kinds.
/// `None` means "ask discovery" (custom resources, other versions).
pub fn builtin_resource(api_version: &str, kind: &str) -> Option<(ApiResource, bool)> {
    BUILTIN
        .iter()
        .map(|f| f())
        .find(|(ar, _)| ar.api_version == api_version && ar.kind == kind)
}

/// Delay before discovery attempt `attempt` (0-based): quick at first, since a
/// freshly established CRD is usually served within a second, then patient.
pub(super) fn retry_delay(attempt: u32) -> Duration {
    let millis = 250u64.saturating_mul(1 << attempt.min(5));
    Duration::from_millis(millis.min(5_000))
}

fn parse_group_version(target: &ObjectTarget) -> Result<GroupVersion, Stop> {
    target
        .api_version
        .parse::<GroupVersion>()
        .map_err(|e| Stop::Api(format!("invalid apiVersion {:?}: {e}", target.api_version)))
}

fn is_permanent(e: &::kube::Error) -> bool {
    matches!(e, ::kube::Error::Api(s) if s.code == 401 || s.code == 403)
}

/// A client error in a line a user can read: the status message for API
/// errors (kube's own Display appends the whole Status in Debug form), the
/// cause chain ("... Connection refused") for transport errors.
pub(super) fn describe(e: &::kube::Error) -> String {
    crate::kube::retry::describe(e)
}

pub(super) fn describe_watch_error(e: &watcher::Error) -> String {
    match e {
        watcher::Error::InitialListFailed(e) => format!("list failed: {}", describe(e)),
        watcher::Error::WatchStartFailed(e) => format!("watch failed to start: {}", describe(e)),
        watcher::Error::WatchFailed(e) => format!("watch failed: {}", describe(e)),
        watcher::Error::WatchError(s) => format!("watch failed: {} ({})", s.message, s.code),
        watcher::Error::NoResourceVersion => e.to_string(),
    }
}

/// Retrying will not help: the credentials are rejected or lack permission.
pub(super) fn is_permanent_watch_error(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => is_permanent(e),
        watcher::Error::WatchError(s) => s.code == 401 || s.code == 403,
        watcher::Error::NoResourceVersion => false,
    }
}

/// Resolves the target's resource, re-running discovery until it is served.
/// Unbounded on its own: the caller's timeout ends it.
pub(super) async fn resolve<P: super::Observer>(
    client: &Client,
    target: &ObjectTarget,
    reporter: &Reporter<'_, P>,
) -> Result<(ApiResource, bool), Stop> {
    if let Some(found) = builtin_resource(&target.api_version, &target.kind) {
        return Ok(found);
    }
    let gvk = parse_group_version(target)?.with_kind(&target.kind);
    let mut attempt = 0;
    loop {
        match discovery::pinned_kind(client, &gvk).await {
            Ok((ar, caps)) => return Ok((ar, caps.scope == Scope::Namespaced)),
            Err(e) if is_permanent(&e) => return Err(Stop::Api(describe(&e))),
            Err(e) => reporter.pending(&format!(
                "{} {} is not served by the API server yet ({})",
                target.api_version,
                target.kind,
                describe(&e)
            )),
        }
        tokio::time::sleep(retry_delay(attempt)).await;
        attempt += 1;
    }
}

/// One discovery attempt, for diagnostics that must not linger.
pub(super) async fn resolve_once(
    client: &Client,
    target: &ObjectTarget,
) -> Result<(ApiResource, bool), Stop> {
    if let Some(found) = builtin_resource(&target.api_version, &target.kind) {
        return Ok(found);
    }
    let gvk = parse_group_version(target)?.with_kind(&target.kind);
    let (ar, caps) = discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| Stop::Api(describe(&e)))?;
    Ok((ar, caps.scope == Scope::Namespaced))
}
