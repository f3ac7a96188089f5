//! `shell: "script"`: runs `sh -c script`, otherwise like `command`; for
//! when a pipe or a loop is really needed.

use std::fmt;
use std::time::Duration;

use super::{HookEnv, HookFailure, HookKind, command};

pub struct Shell;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("`shell` is empty")]
    Empty,
}

impl HookKind for Shell {
    type File = String;
    type Action = String;
    type Error = Error;
    const READINESS: bool = false;

    fn check(script: &String, _release_namespace: &str) -> Result<String, Error> {
        if script.trim().is_empty() {
            return Err(Error::Empty);
        }
        Ok(script.clone())
    }

    fn templates(script: &mut String) -> Vec<&mut String> {
        vec![script]
    }

    /// Words of the script, split on whitespace: enough for `kubectl
    /// --context=X`, the form hooks use.
    fn contexts(script: &String) -> Vec<String> {
        command::named_contexts(script.split_whitespace())
    }

    fn describe(script: &String, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "shell `{script}`")
    }

    async fn run<P: crate::kube::wait::Observer + Send + Sync>(
        script: &String,
        env: &HookEnv,
        timeout: Duration,
        progress: &P,
    ) -> Result<Option<String>, HookFailure> {
        let argv = ["sh".to_string(), "-c".to_string(), script.clone()];
        command::run_argv(&argv, env, timeout, progress).await
    }
}
