//! Runs one helm process: captures its output, bounds it with a timeout and
//! follows the run's stop signal.
//!
//! Stopping sends SIGTERM first, SIGKILL only if that is ignored. helm's
//! install/upgrade commands catch SIGTERM and cancel their context, so the
//! release is recorded as failed; a SIGKILLed helm leaves it `pending-*`, which
//! blocks every later operation on it until someone rolls it back by hand.
//!
//! helm's stdout and stderr are unnamed temporary files, not pipes. helm's
//! signal handler prints `Release NAME has been cancelled.` to stdout before
//! it cancels the action, and a Go program whose write to stdout or stderr
//! finds a broken pipe dies of SIGPIPE on the spot. When bootstrap is killed
//! (SIGKILL), the parent-death signal (SIGTERM) reaches helm as the dead
//! run's descriptors close: with a pipe, helm died at that line about half
//! the time and left the release `pending-*` (which the next run must then
//! wait out), instead of recording it `failed`. A file takes the line
//! whether or not bootstrap is still there to read it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::process::Command;
use tokio::time::{Instant, sleep_until};

use crate::stop::{Stop, StopSignal, stopped};

#[cfg(test)]
use crate::child::KILL_AFTER;
use crate::child::{self, Group};

#[derive(Debug)]
pub struct Invocation<'a> {
    pub program: &'a Path,
    pub args: &'a [String],
    /// Added to the inherited environment.
    pub env: &'a [(OsString, OsString)],
    /// Hard limit; the process is stopped when it is reached.
    pub timeout: Duration,
    /// How long a running process may go on after `Stop::Graceful`.
    pub grace: Duration,
    pub stop: Option<StopSignal>,
    /// Written to the process's stdin, which is then closed (a secret helm
    /// reads with `--password-stdin`); none: stdin is /dev/null.
    pub stdin: Option<&'a [u8]>,
}

#[derive(Debug)]
pub struct Finished {
    /// `None` when a signal ended the process.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

#[derive(Debug)]
pub enum RunError {
    /// The program could not be started.
    Spawn(std::io::Error),
    /// Waiting on the process failed.
    Wait(std::io::Error),
    /// Not started: the run was already being stopped.
    NotStarted,
    /// Stopped by the run's stop signal while it ran.
    Stopped(String),
    TimedOut(Duration),
    /// The files that take its output could not be made or read back.
    Output(std::io::Error),
}

pub async fn run(invocation: Invocation<'_>) -> Result<Finished, RunError> {
    let stop = invocation.stop;
    if let Some(signal) = &stop {
        // Stopping means no new helm operations, not even ones already queued.
        if *signal.borrow() != Stop::Run {
            return Err(RunError::NotStarted);
        }
    }
    // Unnamed (nothing is left behind, whatever ends the run), in the
    // temporary directory; they hold what helm prints, values included.
    let stdout = tempfile::tempfile().map_err(RunError::Output)?;
    let stderr = tempfile::tempfile().map_err(RunError::Output)?;
    let mut command = Command::new(invocation.program);
    // Its own process group: a Ctrl-C on the terminal goes to the whole
    // foreground group and would abort helm at once, defeating the grace
    // period; bootstrap relays stops itself. And a parent-death signal, so
    // helm never outlives a killed bootstrap.
    child::guard(&mut command);
    let mut child = command
        .args(invocation.args)
        .envs(invocation.env.iter().map(|(k, v)| (k, v)))
        .stdin(if invocation.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(stdout.try_clone().map_err(RunError::Output)?)
        .stderr(stderr.try_clone().map_err(RunError::Output)?)
        .spawn()
        .map_err(RunError::Spawn)?;
    if let (Some(mut pipe), Some(input)) = (child.stdin.take(), invocation.stdin) {
        use tokio::io::AsyncWriteExt;
        // Small (a password): fits the pipe buffer, so this cannot block on
        // a child that does not read; a child that exits first is its answer.
        let _ = pipe.write_all(input).await;
        drop(pipe);
    }
    let mut group = Group::new(child);

    let hard_deadline = Instant::now() + invocation.timeout;
    let mut grace_deadline: Option<Instant> = None;
    // Without a signal nothing stops helm but its own deadline.
    let stop = stop.unwrap_or_else(|| tokio::sync::watch::channel(Stop::Run).1);
    let status = loop {
        tokio::select! {
            status = group.wait() => break status.map_err(RunError::Wait),
            () = stopped(stop.clone(), Stop::Graceful), if grace_deadline.is_none() => {
                grace_deadline = Some(Instant::now() + invocation.grace);
            }
            () = stopped(stop.clone(), Stop::Now) => {
                group.terminate().await;
                break Err(RunError::Stopped("stopped at once on a second interrupt".into()));
            }
            () = sleep_until_some(grace_deadline) => {
                group.terminate().await;
                break Err(RunError::Stopped(format!(
                    "still running {} after the interrupt",
                    crate::duration::span(invocation.grace)
                )));
            }
            () = sleep_until(hard_deadline) => {
                group.terminate().await;
                break Err(RunError::TimedOut(invocation.timeout));
            }
        }
    };
    let status: ExitStatus = status?;
    let finished = Finished {
        code: status.code(),
        stdout: read_back(stdout).await.map_err(RunError::Output)?,
        stderr: read_back(stderr).await.map_err(RunError::Output)?,
    };
    // helm ignores a failed write to its stdout: on a full temporary
    // directory its output is lost without a word, and `helm version`'s
    // empty answer would read as an unknown helm. Said for what it is.
    let silent = finished.stdout.is_empty() && finished.stderr.is_empty();
    if (silent || !finished.success())
        && let Some(full) = temp_dir_full()
    {
        return Err(RunError::Output(full));
    }
    Ok(finished)
}

/// Below this, the temporary directory is taken to be full: helm's output
/// and a release's values file may not fit.
const TEMP_ROOM: u64 = 1 << 20;

/// `Some` when the temporary directory has less than [`TEMP_ROOM`] free.
pub fn temp_dir_full() -> Option<std::io::Error> {
    dir_full(&std::env::temp_dir())
}

fn dir_full(dir: &Path) -> Option<std::io::Error> {
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: `path` is a NUL-terminated string that outlives the call, and
    // `stats` is a plain struct statvfs only writes into.
    let free = unsafe {
        let mut stats: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(path.as_ptr(), &mut stats) != 0 {
            return None;
        }
        (stats.f_bavail as u64).saturating_mul(stats.f_frsize as u64)
    };
    (free < TEMP_ROOM).then(|| {
        std::io::Error::new(
            std::io::ErrorKind::StorageFull,
            format!(
                "it is full ({} KiB free): free some space, or point TMPDIR at a directory with room",
                free / 1024
            ),
        )
    })
}

async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// What the process wrote to `file` (its stdout or stderr), from the start.
/// A grandchild (plugin, post-renderer) that still holds the file cannot
/// make this wait, as it could a pipe's end.
async fn read_back(file: std::fs::File) -> std::io::Result<String> {
    let mut file = tokio::fs::File::from_std(file);
    file.rewind().await?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).await?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The program helm is run as, for messages: the path as given.
pub fn display(program: &Path) -> String {
    program.display().to_string()
}

/// `helm` unless a path was given.
pub fn program(path: Option<PathBuf>) -> PathBuf {
    path.unwrap_or_else(|| PathBuf::from("helm"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory with no room left is said to be full, with how much is
    /// free; one with room is not (`/proc` has no blocks to give).
    #[test]
    fn a_directory_without_room_is_full() {
        let full = dir_full(Path::new("/proc")).expect("/proc has no free blocks");
        assert_eq!(full.kind(), std::io::ErrorKind::StorageFull);
        assert!(
            full.to_string().starts_with("it is full (0 KiB free)"),
            "{full}"
        );
        let roomy = tempfile::tempdir().unwrap();
        assert!(dir_full(roomy.path()).is_none());
    }

    fn sh(script: &str) -> Vec<String> {
        vec!["-c".into(), script.into()]
    }

    fn invocation<'a>(args: &'a [String], stop: Option<StopSignal>) -> Invocation<'a> {
        Invocation {
            program: Path::new("/bin/sh"),
            args,
            env: &[],
            timeout: Duration::from_secs(60),
            grace: Duration::from_secs(30),
            stop,
            stdin: None,
        }
    }

    #[tokio::test]
    async fn stdin_is_given_and_closed() {
        let args = sh("read -r line; echo \"got $line\"; cat");
        let finished = run(Invocation {
            stdin: Some(b"s3cr3t\n"),
            ..invocation(&args, None)
        })
        .await
        .unwrap();
        assert_eq!(finished.stdout, "got s3cr3t\n");
    }

    #[tokio::test]
    async fn captures_stdout_stderr_and_exit_code() {
        let args = sh("echo out; echo err >&2; exit 3");
        let finished = run(invocation(&args, None)).await.unwrap();
        assert_eq!(finished.code, Some(3));
        assert_eq!(finished.stdout, "out\n");
        assert_eq!(finished.stderr, "err\n");
        assert!(!finished.success());
    }

    /// A write to helm's stdout or stderr cannot fail for want of a reader
    /// (a Go program dies of SIGPIPE on such a write): they are files.
    #[tokio::test]
    async fn output_goes_to_files_not_pipes() {
        let args = sh("[ -p /dev/stdout ] || echo out; [ -p /dev/stderr ] || echo err >&2");
        let finished = run(invocation(&args, None)).await.unwrap();
        assert_eq!(
            (finished.stdout.as_str(), finished.stderr.as_str()),
            ("out\n", "err\n")
        );
    }

    /// A grandchild that keeps helm's output open (a plugin left running)
    /// does not hold the result back.
    #[tokio::test]
    async fn a_grandchild_holding_the_output_does_not_delay_the_result() {
        let args = sh("sleep 30 & echo done");
        let started = std::time::Instant::now();
        let finished = run(invocation(&args, None)).await.unwrap();
        assert_eq!(finished.stdout, "done\n");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn a_missing_program_is_a_spawn_error() {
        let args = Vec::new();
        let mut inv = invocation(&args, None);
        inv.program = Path::new("/nonexistent/helm");
        match run(inv).await {
            Err(RunError::Spawn(e)) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound),
            other => panic!("expected a spawn error, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_hung_process_is_stopped_at_the_timeout() {
        let args = sh("exec sleep 60");
        let mut inv = invocation(&args, None);
        inv.timeout = Duration::from_millis(200);
        let started = std::time::Instant::now();
        match run(inv).await {
            Err(RunError::TimedOut(after)) => assert_eq!(after, Duration::from_millis(200)),
            other => panic!("expected a timeout, got {other:?}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "SIGTERM ends sleep"
        );
    }

    #[tokio::test]
    async fn a_process_ignoring_sigterm_is_killed() {
        // An ignored signal stays ignored across exec.
        let args = sh("trap '' TERM; exec sleep 60");
        let mut inv = invocation(&args, None);
        inv.timeout = Duration::from_secs(1);
        let started = std::time::Instant::now();
        assert!(matches!(run(inv).await, Err(RunError::TimedOut(_))));
        let elapsed = started.elapsed();
        assert!(
            elapsed >= KILL_AFTER,
            "SIGKILL only after {KILL_AFTER:?}: {elapsed:?}"
        );
        assert!(elapsed < KILL_AFTER + Duration::from_secs(5), "{elapsed:?}");
    }

    #[tokio::test]
    async fn a_stop_already_requested_starts_nothing() {
        let (_tx, rx) = tokio::sync::watch::channel(Stop::Graceful);
        let args = sh("exit 0");
        assert!(matches!(
            run(invocation(&args, Some(rx))).await,
            Err(RunError::NotStarted)
        ));
    }

    #[tokio::test]
    async fn a_dropped_stop_sender_lets_the_process_finish() {
        let (tx, rx) = tokio::sync::watch::channel(Stop::Run);
        drop(tx);
        let args = sh("echo done");
        let finished = run(invocation(&args, Some(rx))).await.unwrap();
        assert_eq!(finished.stdout, "done\n");
    }

    /// Polls (bounded) for a file a test script writes.
    async fn appears(path: &Path) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if path.exists() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// A script that marks when it has started and when it got SIGTERM, and
    /// otherwise runs for a minute.
    fn trapping(dir: &Path) -> Vec<String> {
        let d = dir.display();
        sh(&format!(
            "trap 'echo > {d}/term; exit 0' TERM; echo > {d}/started; sleep 60 & wait"
        ))
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn helm_runs_in_its_own_process_group() {
        // Field 5 of /proc/PID/stat is the process group.
        let args = sh("echo $$; cut -d' ' -f5 /proc/$$/stat");
        let out = run(invocation(&args, None)).await.unwrap().stdout;
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{out}");
        assert_eq!(lines[0], lines[1], "pid and process group differ");
    }

    #[tokio::test]
    async fn stop_now_sends_sigterm_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, rx) = tokio::sync::watch::channel(Stop::Run);
        let args = trapping(dir.path());
        let task = async { run(invocation(&args, Some(rx))).await };
        let stopper = async {
            assert!(appears(&dir.path().join("started")).await);
            tx.send(Stop::Now).unwrap();
        };
        let started = std::time::Instant::now();
        let (result, ()) = tokio::join!(task, stopper);
        assert!(matches!(result, Err(RunError::Stopped(r)) if r.contains("at once")));
        assert!(dir.path().join("term").exists(), "SIGTERM, not SIGKILL");
        assert!(started.elapsed() < KILL_AFTER);
    }

    #[tokio::test]
    async fn graceful_stop_terminates_after_the_grace_period() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, rx) = tokio::sync::watch::channel(Stop::Run);
        let args = trapping(dir.path());
        let mut inv = invocation(&args, Some(rx));
        inv.grace = Duration::from_millis(300);
        let stopper = async {
            assert!(appears(&dir.path().join("started")).await);
            tx.send(Stop::Graceful).unwrap();
        };
        let (result, ()) = tokio::join!(run(inv), stopper);
        match result {
            Err(RunError::Stopped(reason)) => {
                assert_eq!(reason, "still running 300ms after the interrupt")
            }
            other => panic!("expected a stop, got {other:?}"),
        }
        assert!(dir.path().join("term").exists());
    }

    #[tokio::test]
    async fn a_cancelled_run_sends_sigterm_not_sigkill() {
        let dir = tempfile::tempdir().unwrap();
        let args = trapping(dir.path());
        let task = tokio::spawn(async move { run(invocation(&args, None)).await });
        assert!(appears(&dir.path().join("started")).await);
        task.abort();
        assert!(
            appears(&dir.path().join("term")).await,
            "no SIGTERM on drop"
        );
    }
}
