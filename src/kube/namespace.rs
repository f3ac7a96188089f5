//! Namespaces still being deleted: what `destroy` waits for after an
//! uninstall took a chart's Namespace with it, and what `apply` waits for
//! before it installs into one (helm's `--create-namespace` fails on a
//! terminating namespace: "is being terminated"). docs/design.md#destroy.

use std::time::Duration;

use ::kube::api::Api;
use k8s_openapi::api::core::v1::Namespace;
use tokio::time::Instant;

use super::retry::{API_RETRY_BUDGET, retry};

/// How often a terminating namespace is read again.
const POLL: Duration = Duration::from_millis(500);

/// `Some(why)` when namespace `name` is being deleted: why it lingers (the
/// namespace controller's condition, e.g. "Some content in the namespace
/// has finalizers remaining"), or that it is being deleted.
pub async fn terminating(
    client: &::kube::Client,
    name: &str,
) -> Result<Option<String>, ::kube::Error> {
    let api: Api<Namespace> = Api::all(client.clone());
    let namespace = retry(API_RETRY_BUDGET, || api.get_opt(name)).await?;
    Ok(namespace.and_then(|ns| lingering(&ns)))
}

/// The namespaces being deleted, from one metadata-only list: what
/// `apply` reads in preflight, so a release step waits (and asks again)
/// only for a namespace in it, and a `needs` edge costs no request for it.
pub async fn all_terminating(
    client: &::kube::Client,
) -> Result<std::collections::BTreeSet<String>, ::kube::Error> {
    let api: Api<Namespace> = Api::all(client.clone());
    let params = ::kube::api::ListParams::default();
    let list = retry(API_RETRY_BUDGET, || api.list_metadata(&params)).await?;
    Ok(list
        .items
        .into_iter()
        .filter(|ns| ns.metadata.deletion_timestamp.is_some())
        .filter_map(|ns| ns.metadata.name)
        .collect())
}

/// Why a namespace with a deletionTimestamp is still there; `None` when it
/// is not being deleted.
fn lingering(ns: &Namespace) -> Option<String> {
    ns.metadata.deletion_timestamp.as_ref()?;
    let reason = ns
        .status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .filter(|c| c.status == "True")
        .find_map(|c| c.message.clone().filter(|m| !m.is_empty()));
    Some(reason.unwrap_or_else(|| "it is being deleted".to_string()))
}

/// Why [`settled`] ended before the namespace was gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsettled {
    /// Still being deleted when the time was up, with why it lingers.
    Lingering(String),
    /// The run is being stopped.
    Stopped,
}

/// Waits until namespace `name` is gone (or no longer being deleted), up
/// to `until`. `Err(why)` with the last reason it lingered when the time
/// is up; a read that fails ends the wait (what runs next says the rest).
pub async fn settled(
    client: &::kube::Client,
    name: &str,
    until: Instant,
    stop: &crate::stop::StopSignal,
) -> Result<(), Unsettled> {
    loop {
        let why = match terminating(client, name).await {
            Ok(Some(why)) => why,
            Ok(None) | Err(_) => return Ok(()),
        };
        if Instant::now() + POLL > until {
            return Err(Unsettled::Lingering(why));
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = crate::stop::stopped(stop.clone(), crate::stop::Stop::Graceful) => {
                return Err(Unsettled::Stopped);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn namespace(value: serde_json::Value) -> Namespace {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_namespace_being_deleted_says_why_it_lingers() {
        let live = namespace(serde_json::json!({"metadata": {"name": "cert-manager"}}));
        assert_eq!(lingering(&live), None);
        let going = namespace(serde_json::json!({
            "metadata": {"name": "cert-manager", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"phase": "Terminating", "conditions": [
                {"type": "NamespaceDeletionDiscoveryFailure", "status": "False", "message": "All resources successfully discovered"},
                {"type": "NamespaceFinalizersRemaining", "status": "True",
                 "message": "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"}
            ]}
        }));
        assert_eq!(
            lingering(&going).as_deref(),
            Some(
                "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
            )
        );
        let plain = namespace(serde_json::json!({
            "metadata": {"name": "x", "deletionTimestamp": "2026-01-01T00:00:00Z"}
        }));
        assert_eq!(lingering(&plain).as_deref(), Some("it is being deleted"));
    }
}
