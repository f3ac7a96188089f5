//! `rollout: {kind, name, namespace?}`: a Deployment, DaemonSet or
//! StatefulSet fully rolled out (the rules are `kube::ready`'s, shared with
//! `status` and `wait: true`).

use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::object::{self, Diagnose, ObjectRef};
use super::{HookEnv, HookFailure, HookKind};
use crate::error::did_you_mean;
use crate::kube::ready;

/// The workload kinds a `rollout` hook takes: what readiness can judge, but
/// Jobs, which have their own `job` hook.
fn workloads() -> impl Iterator<Item = &'static str> {
    ready::ROLLOUT_KINDS.into_iter().filter(|k| *k != "Job")
}

pub struct Rollout;

#[derive(Debug, Deserialize, JsonSchema, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkloadFile {
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(
        "`rollout` kind `{0}` is not a workload; use Deployment, DaemonSet or StatefulSet{hint}",
        hint = did_you_mean(.0, workloads())
    )]
    NotAWorkload(String),
}

impl HookKind for Rollout {
    type File = WorkloadFile;
    type Action = ObjectRef;
    type Error = Error;
    const READINESS: bool = true;

    fn check(file: &WorkloadFile, release_namespace: &str) -> Result<ObjectRef, Error> {
        if !workloads().any(|k| k == file.kind) {
            return Err(Error::NotAWorkload(file.kind.clone()));
        }
        Ok(ObjectRef {
            api_version: "apps/v1".into(),
            kind: file.kind.clone(),
            namespace: object::or_release(&file.namespace, release_namespace),
            name: file.name.clone(),
        })
    }

    fn templates(action: &mut ObjectRef) -> Vec<&mut String> {
        action.templates()
    }

    fn describe(action: &ObjectRef, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rollout of {action}")
    }

    /// Also waits for the workloads `wait: true` finds in a manifest, whose
    /// apiVersion comes from the manifest.
    async fn run<P: crate::kube::wait::Observer + Send + Sync>(
        action: &ObjectRef,
        env: &HookEnv,
        timeout: Duration,
        progress: &P,
    ) -> Result<Option<String>, HookFailure> {
        let check =
            ready::rollout_check(&action.kind).map_err(|e| HookFailure::new(e.to_string()))?;
        object::wait(
            env,
            &action.target(),
            check,
            timeout,
            progress,
            Diagnose::Workload,
        )
        .await
    }

    fn workload(action: &ObjectRef) -> Option<&ObjectRef> {
        Some(action)
    }
}
