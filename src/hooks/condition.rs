//! `condition: {apiVersion, kind, name, namespace?, type, status?}`: an
//! object's status condition (`status` defaults to `"True"`).

use std::convert::Infallible;
use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::object::{self, Diagnose, ObjectRef};
use super::{HookEnv, HookFailure, HookKind};
use crate::kube::ready;

pub struct Condition;

#[derive(Debug, Deserialize, JsonSchema, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConditionFile {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
    #[serde(rename = "type")]
    pub type_: String,
    /// Default `"True"`.
    pub status: Option<String>,
}

/// The condition `type_` of `object` must have `status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectCondition {
    pub object: ObjectRef,
    pub type_: String,
    pub status: String,
}

impl HookKind for Condition {
    type File = ConditionFile;
    type Action = ObjectCondition;
    type Error = Infallible;
    const READINESS: bool = true;

    fn check(file: &ConditionFile, release_namespace: &str) -> Result<ObjectCondition, Infallible> {
        Ok(ObjectCondition {
            object: ObjectRef {
                api_version: file.api_version.clone(),
                kind: file.kind.clone(),
                namespace: object::scoped_namespace(&file.kind, &file.namespace, release_namespace),
                name: file.name.clone(),
            },
            type_: file.type_.clone(),
            status: file.status.clone().unwrap_or_else(|| "True".into()),
        })
    }

    fn templates(action: &mut ObjectCondition) -> Vec<&mut String> {
        action.object.templates()
    }

    fn describe(action: &ObjectCondition, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}={}", action.object, action.type_, action.status)
    }

    async fn run<P: crate::kube::wait::Observer + Send + Sync>(
        action: &ObjectCondition,
        env: &HookEnv,
        timeout: Duration,
        progress: &P,
    ) -> Result<Option<String>, HookFailure> {
        object::wait(
            env,
            &action.object.target(),
            ready::condition_check(&action.type_, &action.status),
            timeout,
            progress,
            Diagnose::No,
        )
        .await
    }
}
