//! `job: {name, namespace?}`: a Job completed.

use std::convert::Infallible;
use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::object::{self, Diagnose, ObjectRef};
use super::{HookEnv, HookFailure, HookKind};
use crate::kube::ready;

pub struct Job;

#[derive(Debug, Deserialize, JsonSchema, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JobFile {
    pub name: String,
    pub namespace: Option<String>,
}

impl HookKind for Job {
    type File = JobFile;
    type Action = ObjectRef;
    type Error = Infallible;
    const READINESS: bool = true;

    fn check(file: &JobFile, release_namespace: &str) -> Result<ObjectRef, Infallible> {
        Ok(ObjectRef {
            api_version: "batch/v1".into(),
            kind: "Job".into(),
            namespace: object::or_release(&file.namespace, release_namespace),
            name: file.name.clone(),
        })
    }

    fn templates(action: &mut ObjectRef) -> Vec<&mut String> {
        action.templates()
    }

    fn describe(action: &ObjectRef, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{action} complete")
    }

    async fn run<P: crate::kube::wait::Observer + Send + Sync>(
        action: &ObjectRef,
        env: &HookEnv,
        timeout: Duration,
        progress: &P,
    ) -> Result<Option<String>, HookFailure> {
        let check = ready::rollout_check("Job").map_err(|e| HookFailure::new(e.to_string()))?;
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
}
