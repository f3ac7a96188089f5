//! Runs a command in a real terminal emulator that reflows its lines when
//! it is resized, as most users' terminals do (tmux, VTE, iTerm2, kitty…):
//! tmux, on a server of the test's own. [`crate::pty::Pty`]'s emulator
//! (vt100) truncates on a resize instead, as xterm does; a resize test
//! needs both.
//!
//! Needs `tmux` on PATH (`.ci/run` installs it).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux server with one window running the command.
pub struct Tmux {
    dir: tempfile::TempDir,
}

/// `text` quoted for sh.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

impl Tmux {
    /// Whether tmux is on PATH.
    pub fn available() -> bool {
        Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Starts `cmd` (its program, arguments, directory and environment
    /// changes; `CI` and `NO_COLOR` unset unless `cmd` sets them, as on
    /// [`crate::pty::Pty`]) in a detached window of `cols` × `rows`. The
    /// window stays after the command exits, for [`Tmux::capture`].
    pub fn start(cmd: &Command, cols: u16, rows: u16) -> Tmux {
        let dir = tempfile::tempdir().unwrap();
        let mut script = String::from("#!/bin/sh\nunset CI NO_COLOR TMUX\n");
        if let Some(cwd) = cmd.get_current_dir() {
            script.push_str(&format!("cd {}\n", quote(&cwd.display().to_string())));
        }
        for (key, value) in cmd.get_envs() {
            let key = key.to_string_lossy();
            match value {
                Some(value) => script.push_str(&format!(
                    "export {key}={}\n",
                    quote(&value.to_string_lossy())
                )),
                None => script.push_str(&format!("unset {key}\n")),
            }
        }
        for part in std::iter::once(cmd.get_program()).chain(cmd.get_args()) {
            script.push_str(&quote(&part.to_string_lossy()));
            script.push(' ');
        }
        // The exit status, as the shell saw it (128 + N for signal N).
        script.push_str(&format!(
            "\necho $? > {}\n",
            quote(&dir.path().join("status").display().to_string())
        ));
        let run = dir.path().join("run.sh");
        std::fs::write(&run, script).unwrap();
        std::fs::write(
            dir.path().join("tmux.conf"),
            "set -g remain-on-exit on\nset -g history-limit 10000\nset -g default-terminal screen-256color\nset -g status off\n",
        )
        .unwrap();
        let tmux = Tmux { dir };
        tmux.tmux(&[
            "-f",
            tmux.path("tmux.conf").to_str().unwrap(),
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            &cols.to_string(),
            "-y",
            &rows.to_string(),
            &format!("sh {}", quote(run.to_str().unwrap())),
        ]);
        tmux
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn socket(&self) -> PathBuf {
        self.path("socket")
    }

    /// Runs a tmux command on this server; its stdout.
    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(self.socket())
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Resizes the window, as a user dragging the terminal's edge.
    pub fn resize(&self, cols: u16, rows: u16) {
        self.tmux(&[
            "resize-window",
            "-t",
            "t",
            "-x",
            &cols.to_string(),
            "-y",
            &rows.to_string(),
        ]);
    }

    /// Everything the terminal holds, scrollback and screen, a line the
    /// terminal wrapped joined again (so that a line reads the same at any
    /// width), trailing blank lines dropped.
    pub fn capture(&self) -> String {
        let text = self.tmux(&["capture-pane", "-p", "-J", "-t", "t", "-S", "-", "-E", "-"]);
        text.trim_end().to_string()
    }

    /// Polls [`Tmux::capture`] until `matches` holds; fails the test after
    /// `timeout` with the last capture.
    pub fn wait_for(&self, timeout: Duration, matches: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.capture();
            if matches(&text) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting on the tmux window; it shows:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the command to exit; its exit code (128 + N when signal
    /// N ended it).
    pub fn wait_exit(&self, timeout: Duration) -> i32 {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(status) = std::fs::read_to_string(self.path("status"))
                && let Ok(code) = status.trim().parse()
            {
                return code;
            }
            assert!(
                Instant::now() < deadline,
                "the command in tmux did not exit; it shows:\n{}",
                self.capture()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(self.socket())
            .arg("kill-server")
            .output();
    }
}
