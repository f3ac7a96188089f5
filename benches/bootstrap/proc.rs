//! Runs a child process and measures it: wall time, peak RSS, and the CPU
//! time of the child itself, separate from the CPU of its own children.
//!
//! `getrusage(RUSAGE_CHILDREN)` and `wait4` both fold in every descendant the
//! child waited for (the helm processes `bootstrap apply` runs). So we wait
//! with `WNOWAIT`: the child is then a zombie whose `/proc/<pid>/stat` still
//! holds its final utime+stime (all of its threads) in fields 14-15, and the
//! time of its reaped children apart in fields 16-17. Only then is it reaped
//! with `wait4`, whose `ru_maxrss` is the peak RSS (for `plan`/`check`, which
//! start no children, that is the child's own).

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Measured {
    pub wall: Duration,
    pub code: i32,
    /// Peak resident set, bytes.
    pub max_rss: u64,
    /// User+system time of the process itself, all threads.
    pub cpu_own: Duration,
    /// User+system time of the children it waited for (e.g. helm).
    pub cpu_children: Duration,
    pub stdout: String,
    pub stderr: String,
}

// The child is reaped by `wait4` below, which std's `Child` does not see.
#[allow(clippy::zombie_processes)]
pub fn run(mut cmd: Command) -> Measured {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().expect("spawn the benchmarked process");
    let pid = child.id() as libc::pid_t;
    let out = drain(child.stdout.take().expect("piped stdout"));
    let err = drain(child.stderr.take().expect("piped stderr"));

    // SAFETY: plain syscalls on our own child; the structs are zeroed C data.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        )
    };
    assert_eq!(rc, 0, "waitid: {}", std::io::Error::last_os_error());
    let wall = started.elapsed();
    let (cpu_own, cpu_children) = zombie_cpu(pid);

    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid, "wait4: {}", std::io::Error::last_os_error());
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    Measured {
        wall,
        code,
        max_rss: usage.ru_maxrss as u64 * 1024,
        cpu_own,
        cpu_children,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// (own utime+stime, reaped children's cutime+cstime) of an unreaped child.
fn zombie_cpu(pid: libc::pid_t) -> (Duration, Duration) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after `(comm)`, which may itself contain spaces: state is field 3.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<u64> = rest
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let field = |n: usize| fields.get(n - 3).copied().unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let ticks = |t: u64| Duration::from_secs_f64(t as f64 / hz);
    (ticks(field(14) + field(15)), ticks(field(16) + field(17)))
}
