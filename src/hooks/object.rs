//! What the kinds that wait on objects share: naming an object, the default
//! namespace rules, and waiting through `kube::wait` (one object by name or
//! a set by labels), with diagnostics when a workload never gets ready.

use std::fmt;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::{HookEnv, HookFailure};
use crate::kube::ready::Readiness;
use crate::kube::wait::{self, ObjectTarget, WaitError};

/// Names a Kubernetes object a hook waits on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}", self.kind, ns, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

impl ObjectRef {
    /// What `kube::wait` watches for this object.
    pub fn target(&self) -> ObjectTarget {
        ObjectTarget::new(
            &self.api_version,
            &self.kind,
            self.namespace.as_deref(),
            &self.name,
        )
    }

    /// The templated strings: the name, then the namespace.
    pub fn templates(&mut self) -> Vec<&mut String> {
        let mut texts = vec![&mut self.name];
        texts.extend(self.namespace.as_mut());
        texts
    }
}

/// A namespace not given is the release's.
pub(crate) fn or_release(given: &Option<String>, release_namespace: &str) -> Option<String> {
    Some(
        given
            .clone()
            .unwrap_or_else(|| release_namespace.to_string()),
    )
}

/// Like [`or_release`], except that cluster-scoped kinds we know get no
/// namespace unless one is given.
pub(crate) fn scoped_namespace(
    kind: &str,
    given: &Option<String>,
    release_namespace: &str,
) -> Option<String> {
    const CLUSTER_SCOPED: &[&str] = &[
        "CustomResourceDefinition",
        "Namespace",
        "Node",
        "ClusterRole",
        "ClusterRoleBinding",
        "StorageClass",
        "PersistentVolume",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "APIService",
        "PriorityClass",
        "IngressClass",
        "GatewayClass",
        "ClusterIssuer",
        "ClusterSecretStore",
        "CiliumLoadBalancerIPPool",
        "CiliumClusterwideNetworkPolicy",
    ];
    match given {
        Some(ns) => Some(ns.clone()),
        None if CLUSTER_SCOPED.contains(&kind) => None,
        None => Some(release_namespace.to_string()),
    }
}

/// Whether a failed wait collects the workload's pods and events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Diagnose {
    /// A workload: its pods explain why it is not ready.
    Workload,
    /// Anything else: the wait's own message says it all.
    No,
}

/// Waits until `check` passes for the target (each selected object, for a
/// label selector); see `kube::wait::wait_for`.
pub(crate) async fn wait<F, P>(
    env: &HookEnv,
    target: &ObjectTarget,
    check: F,
    timeout: Duration,
    progress: &P,
    diagnose: Diagnose,
) -> Result<Option<String>, HookFailure>
where
    F: Fn(Option<&Value>) -> Readiness + Send + Sync,
    P: crate::kube::wait::Observer + Send + Sync,
{
    let client = client(env)?;
    let result = wait::wait_for(
        client.clone(),
        target,
        check,
        timeout,
        wait::Relay(progress),
    )
    .await;
    finish(client, target, result, diagnose).await
}

fn client(env: &HookEnv) -> Result<::kube::Client, HookFailure> {
    env.client
        .clone()
        .ok_or_else(|| HookFailure::new("no cluster connection for a readiness hook"))
}

async fn finish(
    client: ::kube::Client,
    target: &ObjectTarget,
    result: Result<(), WaitError>,
    diagnose: Diagnose,
) -> Result<Option<String>, HookFailure> {
    let Err(e) = result else {
        return Ok(None);
    };
    let stuck = match &e {
        WaitError::Timeout { .. } | WaitError::Failed { .. } => true,
        WaitError::Api { .. } => false,
    };
    let diagnostics = match diagnose {
        Diagnose::Workload if stuck => wait::diagnose(client, target).await.ok(),
        Diagnose::Workload | Diagnose::No => None,
    };
    Err(HookFailure {
        message: e.to_string(),
        output: None,
        diagnostics,
    })
}
