//! Child processes (helm, hook commands) never outlive the run
//! (docs/design.md#children-and-temporary-files).
//!
//! Each runs in its own process group (a terminal's Ctrl-C reaches the whole
//! foreground group and would cut helm short; bootstrap relays stops itself)
//! with a parent-death signal: when bootstrap dies, even by SIGKILL, the
//! kernel sends the child SIGTERM, so a helm never goes on working on a
//! release after the run that started it is gone. Every exit path of
//! bootstrap also signals every group still running ([`terminate_all`]).
//!
//! The parent-death signal follows the *thread* that forked the child, and
//! tokio's worker threads live as long as the runtime, which ends with the
//! command.
//!
//! Temporary files that hold secrets (values, the hooks' kubeconfig, a
//! credentialed repository config) are removed when their guard drops, on
//! every exit path that runs destructors; their names carry the pid of the
//! run that made them ([`temp_prefix`]), so the next run removes those a
//! killed run left behind ([`sweep_stale`]).

use std::collections::BTreeSet;
use std::process::ExitStatus;
use std::sync::Mutex;
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::time::timeout;

/// How long a SIGTERMed child gets before SIGKILL.
pub(crate) const KILL_AFTER: Duration = Duration::from_secs(5);

/// Process groups of children still running.
static LIVE: Mutex<BTreeSet<libc::pid_t>> = Mutex::new(BTreeSet::new());

/// Makes `cmd` start in its own process group with SIGTERM as its
/// parent-death signal.
pub(crate) fn guard(cmd: &mut Command) {
    cmd.process_group(0);
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getpid(2) is async-signal-safe.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the closure runs between fork and exec and only calls
        // async-signal-safe functions (prctl, getppid, _exit); it allocates
        // nothing.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // bootstrap died between fork and prctl: the signal will
                // never come, so do not start at all.
                if libc::getppid() != parent {
                    libc::_exit(143);
                }
                Ok(())
            });
        }
    }
}

/// SIGTERM to every child process group still running: for the last exit
/// path, where nothing else will stop them.
pub(crate) fn terminate_all() {
    let live = LIVE.lock().map(|l| l.clone()).unwrap_or_default();
    signal_groups(&live, libc::SIGTERM);
}

fn signal_groups(groups: &BTreeSet<libc::pid_t>, signal: libc::c_int) {
    for pid in groups {
        // SAFETY: kill(2) touches no memory of ours; each id is the group of
        // a child of ours not yet reaped (removed from LIVE when reaped).
        unsafe {
            libc::kill(-pid, signal);
        }
    }
}

/// A child's process group, signalled as a whole so plugins and
/// post-renderers stop with it. Dropped while the child still runs (the
/// caller's future was cancelled), it sends SIGTERM (not tokio's SIGKILL:
/// helm catches SIGTERM and records the release as failed); tokio reaps the
/// process in the background.
pub(crate) struct Group {
    child: Child,
    /// Also the group id; `None` once the process has been reaped, so a
    /// recycled pid is never signalled.
    pid: Option<libc::pid_t>,
}

impl Group {
    /// `child` must have been spawned from a command given to [`guard`].
    pub(crate) fn new(child: Child) -> Group {
        let pid = child.id().and_then(|pid| libc::pid_t::try_from(pid).ok());
        if let (Some(pid), Ok(mut live)) = (pid, LIVE.lock()) {
            live.insert(pid);
        }
        Group { child, pid }
    }

    pub(crate) fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    pub(crate) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        let status = self.child.wait().await;
        if status.is_ok() {
            self.forget();
        }
        status
    }

    fn forget(&mut self) {
        if let (Some(pid), Ok(mut live)) = (self.pid.take(), LIVE.lock()) {
            live.remove(&pid);
        }
    }

    pub(crate) fn signal(&self, signal: libc::c_int) {
        if let Some(pid) = self.pid {
            // SAFETY: kill(2) touches no memory of ours. The group is led by our
            // own unreaped child, so its id cannot belong to anyone else.
            unsafe {
                libc::kill(-pid, signal);
            }
        }
    }

    /// SIGTERM, then SIGKILL after [`KILL_AFTER`]; returns once the child is
    /// reaped.
    pub(crate) async fn terminate(&mut self) {
        self.signal(libc::SIGTERM);
        if timeout(KILL_AFTER, self.wait()).await.is_err() {
            self.signal(libc::SIGKILL);
            let _ = self.wait().await;
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.signal(libc::SIGTERM);
        // Still tracked until reaped: a later `terminate_all` signals it again.
        if let Ok(Some(_)) = self.child.try_wait() {
            self.forget();
        }
    }
}

/// The start of the name of a temporary file or directory of this run:
/// `bootstrap-<pid>.<what>-`.
pub(crate) fn temp_prefix(what: &str) -> String {
    format!("bootstrap-{}.{what}-", std::process::id())
}

/// Removes what runs that are gone left in the temporary directory: entries
/// named by [`temp_prefix`] whose run's process no longer exists, owned by
/// this user. Returns how many were removed.
pub(crate) fn sweep_stale() -> usize {
    sweep_in(&std::env::temp_dir())
}

fn sweep_in(dir: &std::path::Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    // SAFETY: getuid(2) cannot fail and touches no memory.
    let uid = unsafe { libc::getuid() };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("bootstrap-"))
            .and_then(|n| n.split_once('.'))
            .and_then(|(pid, _)| pid.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if meta.uid() != uid || pid <= 0 || alive(pid) {
            continue;
        }
        let gone = if meta.is_dir() {
            std::fs::remove_dir_all(entry.path())
        } else {
            std::fs::remove_file(entry.path())
        };
        if gone.is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Whether a process with this id exists (a recycled id counts: then the
/// entry is left for a later run).
fn alive(pid: libc::pid_t) -> bool {
    // SAFETY: kill(2) with signal 0 only checks; it touches no memory.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeping_removes_what_dead_runs_left_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        // A pid that is gone: a child that ran and was reaped.
        let mut done = std::process::Command::new("true").spawn().unwrap();
        let dead = done.id();
        done.wait().unwrap();
        let live = std::process::id();
        let stale_file = dir
            .path()
            .join(format!("bootstrap-{dead}.values-ab12.yaml"));
        let stale_dir = dir.path().join(format!("bootstrap-{dead}.kubeconfig-cd34"));
        let ours = dir
            .path()
            .join(format!("bootstrap-{live}.values-ef56.yaml"));
        let other = dir.path().join("bootstrap-values-old.yaml");
        std::fs::write(&stale_file, "password: x").unwrap();
        std::fs::create_dir(&stale_dir).unwrap();
        std::fs::write(stale_dir.join("config"), "token: x").unwrap();
        std::fs::write(&ours, "").unwrap();
        std::fs::write(&other, "").unwrap();
        assert_eq!(sweep_in(dir.path()), 2);
        assert!(!stale_file.exists() && !stale_dir.exists());
        assert!(ours.exists(), "a running run's file is kept");
        assert!(other.exists(), "only names with a pid are swept");
        assert!(temp_prefix("values").starts_with(&format!("bootstrap-{live}.values-")));
    }

    fn running(pid: i32) -> bool {
        // Zombies count as gone: /proc/PID/stat's state field is `Z`.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().next())
                    != Some("Z")
            })
            .unwrap_or(false)
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_child_dies_with_the_thread_that_started_it() {
        // The parent-death signal fires when the forking thread ends: a
        // thread standing in for a bootstrap that was killed.
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let script = format!("echo $$ > {}; exec sleep 60", pidfile.display());
        let written = pidfile.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let mut cmd = Command::new("/bin/sh");
                cmd.args(["-c", &script]);
                guard(&mut cmd);
                let child = cmd.spawn().unwrap();
                // Leaked on purpose: nothing of ours stops it but the kernel.
                std::mem::forget(child);
                for _ in 0..500 {
                    if std::fs::read_to_string(&written).is_ok_and(|s| s.ends_with('\n')) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            });
        })
        .join()
        .unwrap();
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while running(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!running(pid), "the child outlived its parent thread");
    }

    #[tokio::test]
    async fn live_groups_are_tracked_until_reaped_and_signalled_as_a_whole() {
        let mut cmd = Command::new("/bin/sh");
        // A grandchild in the same group: signalled with it.
        cmd.args(["-c", "sleep 60 & wait"]);
        guard(&mut cmd);
        let mut group = Group::new(cmd.spawn().unwrap());
        let pid = group.pid.unwrap();
        assert!(LIVE.lock().unwrap().contains(&pid));
        let started = std::time::Instant::now();
        // What terminate_all does, on this group only (other tests run
        // children at the same time).
        signal_groups(&BTreeSet::from([pid]), libc::SIGTERM);
        let status = timeout(Duration::from_secs(10), group.wait())
            .await
            .expect("ended by terminate_all")
            .unwrap();
        assert!(!status.success());
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(group.pid.is_none());
        assert!(
            !LIVE.lock().unwrap().contains(&pid),
            "forgotten once reaped"
        );
    }
}
