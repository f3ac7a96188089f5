//! Runs a release's hooks: readiness waits against the API (watch-based, with
//! a timeout and diagnostics when a workload never becomes ready) and command
//! hooks (no shell unless `shell:`, the cluster's kubeconfig and context in
//! the environment, the config root as working directory).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncBufReadExt;

use crate::kube::diagnose::Diagnosis;
use crate::kube::ready;
use crate::kube::wait::{self, ObjectTarget, WaitError};
use crate::release::{HookAction, ObjectRef};

/// What hooks need to reach the cluster.
#[derive(Clone)]
pub struct HookEnv {
    pub client: Option<::kube::Client>,
    pub root: PathBuf,
    /// A kubeconfig whose current context is the cluster's.
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    /// Stream command output line by line as progress (`-v`).
    pub stream: bool,
}

#[derive(Debug)]
pub struct HookFailure {
    pub message: String,
    pub output: Option<String>,
    pub diagnostics: Option<Diagnosis>,
}

impl HookFailure {
    fn new(message: impl Into<String>) -> Self {
        HookFailure {
            message: message.into(),
            output: None,
            diagnostics: None,
        }
    }
}

fn target(o: &ObjectRef) -> ObjectTarget {
    ObjectTarget::new(&o.api_version, &o.kind, o.namespace.as_deref(), &o.name)
}

/// Runs one hook within `timeout`; on success returns command output, if any.
pub async fn run(
    action: &HookAction,
    env: &HookEnv,
    timeout: Duration,
    progress: impl Fn(&str) + Send + Sync,
) -> Result<Option<String>, HookFailure> {
    match action {
        HookAction::Command(argv) => command(argv, env, timeout, &progress).await,
        HookAction::Shell(script) => {
            command(
                &["sh".into(), "-c".into(), script.clone()],
                env,
                timeout,
                &progress,
            )
            .await
        }
        HookAction::Rollout(o) => {
            let check =
                ready::rollout_check(&o.kind).map_err(|e| HookFailure::new(e.to_string()))?;
            wait(env, o, check, timeout, progress, true).await
        }
        HookAction::Job(o) => {
            let check = ready::rollout_check("Job").map_err(|e| HookFailure::new(e.to_string()))?;
            wait(env, o, check, timeout, progress, true).await
        }
        HookAction::Condition {
            object,
            type_,
            status,
        } => {
            wait(
                env,
                object,
                ready::condition_check(type_, status),
                timeout,
                progress,
                false,
            )
            .await
        }
        HookAction::Created(o) => wait(env, o, ready::exists, timeout, progress, false).await,
    }
}

async fn wait<F>(
    env: &HookEnv,
    object: &ObjectRef,
    check: F,
    timeout: Duration,
    progress: impl Fn(&str) + Send + Sync,
    workload: bool,
) -> Result<Option<String>, HookFailure>
where
    F: Fn(Option<&serde_json::Value>) -> ready::Readiness + Send + Sync,
{
    let Some(client) = env.client.clone() else {
        return Err(HookFailure::new(
            "no cluster connection for a readiness hook",
        ));
    };
    let target = target(object);
    match wait::wait_for(client.clone(), &target, check, timeout, progress).await {
        Ok(()) => Ok(None),
        Err(e) => {
            let diagnostics = match (&e, workload) {
                (WaitError::Timeout { .. } | WaitError::Failed { .. }, true) => {
                    wait::diagnose(client, &target).await.ok()
                }
                _ => None,
            };
            Err(HookFailure {
                message: e.to_string(),
                output: None,
                diagnostics,
            })
        }
    }
}

/// Runs a command hook; each output line also goes to `progress` when
/// `env.stream` is set (`-v`).
async fn command(
    argv: &[String],
    env: &HookEnv,
    timeout: Duration,
    progress: &(impl Fn(&str) + Send + Sync),
) -> Result<Option<String>, HookFailure> {
    let shown = argv.join(" ");
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(&env.root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // helmfile forgets --kube-context for hooks; we point kubectl (KUBECONFIG
    // with our current-context) and helm (HELM_KUBECONTEXT) at the cluster.
    if let Some(kubeconfig) = &env.kubeconfig {
        cmd.env("KUBECONFIG", kubeconfig);
    }
    if let Some(context) = &env.context {
        cmd.env("HELM_KUBECONTEXT", context);
        cmd.env("BOOTSTRAP_CONTEXT", context);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| HookFailure::new(format!("cannot run `{}`: {e}", argv[0])))?;
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let stream = env.stream;
    let collect = async {
        let output = std::sync::Mutex::new(String::new());
        let pump = |reader: Option<Box<dyn tokio::io::AsyncRead + Unpin + Send>>| {
            let output = &output;
            async move {
                let Some(reader) = reader else { return };
                let mut lines = tokio::io::BufReader::new(reader).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if stream {
                        progress(&line);
                    }
                    if let Ok(mut out) = output.lock() {
                        out.push_str(&line);
                        out.push('\n');
                    }
                }
            }
        };
        tokio::join!(
            pump(stdout.map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>)),
            pump(stderr.map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Unpin + Send>)),
        );
        let status = child.wait().await;
        (status, output.into_inner().unwrap_or_default())
    };
    match tokio::time::timeout(timeout, collect).await {
        Err(_) => Err(HookFailure::new(format!(
            "command `{shown}` did not finish within {}",
            humantime::format_duration(timeout)
        ))),
        Ok((Err(e), output)) => Err(HookFailure {
            message: format!("command `{shown}` failed: {e}"),
            output: Some(output),
            diagnostics: None,
        }),
        Ok((Ok(status), output)) if status.success() => Ok(Some(output)),
        Ok((Ok(status), output)) => Err(HookFailure {
            message: format!(
                "command `{shown}` exited with {}",
                status
                    .code()
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "a signal".into())
            ),
            output: Some(output),
            diagnostics: None,
        }),
    }
}
