//! `command: [argv...]`: runs a program without a shell, in the config root,
//! with `KUBECONFIG` pointing at a kubeconfig whose current context is the
//! cluster's and `HELM_KUBECONTEXT`/`BOOTSTRAP_CONTEXT` set to it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncBufReadExt;

use super::{HookEnv, HookFailure, HookKind};
use crate::validate;

pub struct Command;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("`command` is empty; give the program and its arguments as a list")]
    Empty,
    /// `kubectl apply -f FILE` with a FILE inside the config root that does
    /// not exist would fail only after the releases before it were installed.
    #[error(
        "hook `{program}` reads `{}`, which does not exist in the config root; create it or fix the path",
        .file.display()
    )]
    MissingFile { program: String, file: PathBuf },
}

impl HookKind for Command {
    type File = Vec<String>;
    type Action = Vec<String>;
    type Error = Error;
    const READINESS: bool = false;

    fn check(argv: &Vec<String>, _release_namespace: &str) -> Result<Vec<String>, Error> {
        if argv.is_empty() || argv[0].trim().is_empty() {
            return Err(Error::Empty);
        }
        Ok(argv.clone())
    }

    fn templates(argv: &mut Vec<String>) -> Vec<&mut String> {
        argv.iter_mut().collect()
    }

    fn check_rendered(argv: &Vec<String>, root: &Path) -> Result<(), Error> {
        check_files(argv, root)
    }

    fn contexts(argv: &Vec<String>) -> Vec<String> {
        named_contexts(argv.iter().map(String::as_str))
    }

    fn describe(argv: &Vec<String>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "command `{}`", argv.join(" "))
    }

    async fn run<P: crate::kube::wait::Observer + Send + Sync>(
        argv: &Vec<String>,
        env: &HookEnv,
        timeout: Duration,
        progress: &P,
    ) -> Result<Option<String>, HookFailure> {
        run_argv(argv, env, timeout, progress).await
    }
}

/// The values of `--context`/`--kube-context` (kubectl, helm) among `words`,
/// in both `--flag value` and `--flag=value` forms.
pub(super) fn named_contexts<'a>(words: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut found = Vec::new();
    let mut words = words.peekable();
    while let Some(word) = words.next() {
        for flag in ["--context", "--kube-context"] {
            if word == flag {
                if let Some(value) = words.peek() {
                    found.push(value.trim_matches(['"', '\'']).to_string());
                }
            } else if let Some(value) = word
                .strip_prefix(flag)
                .and_then(|rest| rest.strip_prefix('='))
            {
                found.push(value.trim_matches(['"', '\'']).to_string());
            }
        }
    }
    found
}

/// The `-f`/`--filename` files of a command that lie inside the config root
/// must exist.
fn check_files(argv: &[String], root: &Path) -> Result<(), Error> {
    let mut files: Vec<&str> = Vec::new();
    let mut iter = argv.iter().skip(1).peekable();
    while let Some(arg) = iter.next() {
        if arg == "-f" || arg == "--filename" {
            if let Some(next) = iter.next() {
                files.push(next);
            }
        } else if let Some(v) = arg
            .strip_prefix("--filename=")
            .or_else(|| arg.strip_prefix("-f="))
        {
            files.push(v);
        }
    }
    for file in files {
        if file == "-" || validate::is_url(file) {
            continue;
        }
        let path = if Path::new(file).is_absolute() {
            PathBuf::from(file)
        } else {
            root.join(file)
        };
        if path.starts_with(root) && !path.exists() {
            let shown = path.strip_prefix(root).unwrap_or(&path);
            return Err(Error::MissingFile {
                program: argv.first().cloned().unwrap_or_default(),
                file: shown.to_path_buf(),
            });
        }
    }
    Ok(())
}

/// Runs `argv` (also for `shell:`, as `sh -c`); each output line also goes
/// to `progress` when `env.stream` is set (`-v`).
pub(super) async fn run_argv<P: crate::kube::wait::Observer + Send + Sync>(
    argv: &[String],
    env: &HookEnv,
    timeout: Duration,
    progress: &P,
) -> Result<Option<String>, HookFailure> {
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(&env.root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own process group with a parent-death signal, stopped as a whole
    // when the hook ends early (timeout, the run stopped): nothing a hook
    // started outlives the run (docs/design.md#children-and-temporary-files).
    crate::child::guard(&mut cmd);
    // helmfile forgets --kube-context for hooks; we point kubectl (KUBECONFIG
    // with our current-context) and helm (HELM_KUBECONTEXT) at the cluster.
    if let Some(kubeconfig) = &env.kubeconfig {
        cmd.env("KUBECONFIG", kubeconfig);
    }
    if let Some(context) = &env.context {
        cmd.env("HELM_KUBECONTEXT", context);
        cmd.env("BOOTSTRAP_CONTEXT", context);
    }
    let child = cmd
        .spawn()
        .map_err(|e| HookFailure::new(format!("cannot run `{}`: {e}", argv[0])))?;
    let mut group = crate::child::Group::new(child);
    let stdout = group.child().stdout.take();
    let stderr = group.child().stderr.take();
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
                        progress.pending(&line, None);
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
        let status = group.wait().await;
        (status, output.into_inner().unwrap_or_default())
    };
    // The caller names the hook (and so the command): the message says
    // what happened and what the command last said.
    let finished = tokio::time::timeout(timeout, collect).await;
    if finished.is_err() {
        group.terminate().await;
    }
    match finished {
        Err(_) => Err(HookFailure::new(format!(
            "did not finish within {}",
            crate::duration::span(timeout)
        ))),
        Ok((Err(e), output)) => Err(HookFailure {
            message: format!("failed: {e}{}", output_tail(&output)),
            output: Some(output),
            diagnostics: None,
        }),
        Ok((Ok(status), output)) if status.success() => Ok(Some(output)),
        Ok((Ok(status), output)) => Err(HookFailure {
            message: format!(
                "exited with {}{}",
                status
                    .code()
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "a signal".into()),
                output_tail(&output)
            ),
            output: Some(output),
            diagnostics: None,
        }),
    }
}

/// The last lines a failed command printed (stderr and stdout as they
/// came), for the one-line failure message: `: line | line`, at most three
/// lines and 400 characters; empty when it printed nothing.
fn output_tail(output: &str) -> String {
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
    let mut cut: String = tail.chars().take(400).collect();
    if cut.len() < tail.len() {
        cut.push('…');
    }
    format!(": {cut}")
}
