//! `created: {apiVersion, kind, name, namespace?}`: an object exists.

use std::convert::Infallible;
use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::object::{self, Diagnose, ObjectRef};
use super::{HookEnv, HookFailure, HookKind};
use crate::kube::ready;

pub struct Created;

#[derive(Debug, Deserialize, JsonSchema, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ObjectFile {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
}

impl HookKind for Created {
    type File = ObjectFile;
    type Action = ObjectRef;
    type Error = Infallible;
    const READINESS: bool = true;

    fn check(file: &ObjectFile, release_namespace: &str) -> Result<ObjectRef, Infallible> {
        Ok(ObjectRef {
            api_version: file.api_version.clone(),
            kind: file.kind.clone(),
            namespace: object::scoped_namespace(&file.kind, &file.namespace, release_namespace),
            name: file.name.clone(),
        })
    }

    fn templates(action: &mut ObjectRef) -> Vec<&mut String> {
        action.templates()
    }

    fn describe(action: &ObjectRef, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{action} exists")
    }

    async fn run<P: crate::kube::wait::Observer + Send + Sync>(
        action: &ObjectRef,
        env: &HookEnv,
        timeout: Duration,
        progress: &P,
    ) -> Result<Option<String>, HookFailure> {
        object::wait(
            env,
            &action.target(),
            ready::exists,
            timeout,
            progress,
            Diagnose::No,
        )
        .await
    }
}
