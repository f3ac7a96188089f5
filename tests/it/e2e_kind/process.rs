//! Running the external tools of the e2e suite: a deadline on every
//! command, output echoed live (with `--nocapture`) and collected.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Docker,
    Podman,
}

impl Provider {
    pub fn program(self) -> &'static str {
        match self {
            Provider::Docker => "docker",
            Provider::Podman => "podman",
        }
    }
}

/// What every external command of the run shares: the temp kubeconfig and
/// kind's provider choice.
#[derive(Clone)]
pub struct Env {
    pub kubeconfig: PathBuf,
    pub provider: Provider,
}

impl Env {
    pub fn run(&self, program: &str, args: &[&str], timeout: Duration) -> Output {
        let mut cmd = Command::new(program);
        cmd.args(args).env("NO_COLOR", "1");
        if !self.kubeconfig.as_os_str().is_empty() {
            cmd.env("KUBECONFIG", &self.kubeconfig);
        }
        if self.provider == Provider::Podman {
            cmd.env("KIND_EXPERIMENTAL_PROVIDER", "podman");
        }
        let shown = Path::new(program)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        println!("$ {shown} {}", args.join(" "));
        run_with_deadline(cmd, timeout)
    }
}

#[derive(Debug)]
pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: Option<Duration>,
}

impl Output {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

pub fn expect_ok(out: &Output, what: &str) {
    if let Some(after) = out.timed_out {
        panic!(
            "{what}: no answer within {after:?}; killed\nstderr:\n{}",
            out.stderr
        );
    }
    assert!(
        out.success(),
        "{what} exited with {:?}\nstdout:\n{}\nstderr:\n{}",
        out.code,
        out.stdout,
        out.stderr
    );
}

/// Runs `cmd`, echoing its output line by line as it comes (visible with
/// `--nocapture`) and collecting it. Past `timeout` the process group is
/// killed, so a hung helm or docker child goes too.
pub fn run_with_deadline(mut cmd: Command, timeout: Duration) -> Output {
    use std::os::unix::process::CommandExt;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => panic!("cannot run {:?}: {e}", cmd.get_program()),
    };
    let pid = child.id() as i32;
    let stdout = echo(child.stdout.take().expect("piped stdout"), "  | ");
    let stderr = echo(child.stderr.take().expect("piped stderr"), "  ! ");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let (status, timed_out) = match rx.recv_timeout(timeout) {
        Ok(status) => (status.ok(), None),
        Err(_) => {
            // SAFETY: kill(2) on the process group we created; at worst a no-op.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            (rx.recv().ok().and_then(Result::ok), Some(timeout))
        }
    };
    Output {
        code: status.and_then(|s| s.code()),
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
        timed_out,
    }
}

fn echo(
    stream: impl Read + Send + 'static,
    prefix: &'static str,
) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            println!("{prefix}{line}");
            all.push_str(&line);
            all.push('\n');
        }
        all
    })
}

pub fn which(tool: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(tool))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_report_output_and_exit_code() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out; echo err >&2; exit 3"]);
        let out = run_with_deadline(cmd, Duration::from_secs(60));
        assert_eq!(
            (out.code, out.stdout.as_str(), out.stderr.as_str()),
            (Some(3), "out\n", "err\n")
        );
        assert_eq!(out.timed_out, None);
    }

    #[test]
    fn deadline_kills_the_whole_process_group() {
        // The background `sleep` keeps stdout open: if only `sh` were killed, the
        // reader would wait the full 600 s for it.
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo started; sleep 600 & wait"]);
        let started = std::time::Instant::now();
        let out = run_with_deadline(cmd, Duration::from_millis(300));
        assert_eq!(out.timed_out, Some(Duration::from_millis(300)));
        assert_eq!(out.stdout, "started\n");
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "took {:?}",
            started.elapsed()
        );
    }
}
