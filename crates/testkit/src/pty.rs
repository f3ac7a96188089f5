//! Runs a command on a pseudo-terminal of a given size, as a user's
//! terminal would run it, and keeps what it draws on a [`vt100`] screen, so
//! a test can assert what the user sees (the live display's frames, then
//! the final scrollback) rather than the bytes that drew it.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Pty {
    child: Child,
    screen: Arc<Mutex<vt100::Parser>>,
    /// Every frame seen (the screen's text after each read), in order.
    frames: Arc<Mutex<Vec<String>>>,
    /// Every byte the command wrote, escape sequences included.
    bytes: Arc<Mutex<Vec<u8>>>,
    reader: Option<std::thread::JoinHandle<()>>,
    /// The master side, for what the user types ([`Pty::press`]).
    keyboard: File,
}

/// The pair of a new pseudo-terminal of `rows` × `cols`: (master, slave).
fn open(rows: u16, cols: u16) -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors it opened into the pointers;
    // the name and termios arguments may be null.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

impl Pty {
    /// Starts `cmd` with its stdin, stdout and stderr on a new terminal of
    /// `rows` × `cols` (`TERM=xterm-256color`; `CI` and `NO_COLOR` unset
    /// unless set on `cmd`). The terminal is the command's controlling
    /// terminal and its process group the foreground one, as in a shell: a
    /// Ctrl-C typed there ([`Pty::press`]) is echoed and signals the group.
    pub fn spawn(mut cmd: Command, rows: u16, cols: u16) -> Pty {
        let (master, slave) = open(rows, cols);
        cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave))
            .env("TERM", "xterm-256color");
        // The test's own environment (CI sets CI=true) must not decide;
        // what the test set on `cmd` does.
        for key in ["CI", "NO_COLOR"] {
            if !cmd.get_envs().any(|(k, _)| k == key) {
                cmd.env_remove(key);
            }
        }
        // SAFETY: setsid and ioctl are async-signal-safe; nothing else runs
        // between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                // stdin is the slave side by now: make it the session's
                // controlling terminal.
                if libc::ioctl(0, libc::TIOCSCTTY, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("start the command on the terminal");
        // The child holds the slave now; with ours closed (dropped with
        // `cmd`'s Stdio), reads end when the child's last copy closes.
        drop(cmd);
        let screen = Arc::new(Mutex::new(vt100::Parser::new(
            std::num::NonZeroU16::new(rows).expect("rows"),
            std::num::NonZeroU16::new(cols).expect("columns"),
            10_000,
        )));
        let frames = Arc::new(Mutex::new(Vec::new()));
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let mut master = File::from(master);
        let keyboard = master.try_clone().expect("a second handle on the terminal");
        let reader = {
            let (screen, frames, bytes) = (screen.clone(), frames.clone(), bytes.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                // EIO once the child side is closed: the end.
                while let Ok(n) = master.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    bytes.lock().unwrap().extend_from_slice(&buf[..n]);
                    let mut parser = screen.lock().unwrap();
                    parser.process(&buf[..n]);
                    let text = text_of(parser.screen());
                    frames.lock().unwrap().push(text);
                }
            })
        };
        Pty {
            child,
            screen,
            frames,
            bytes,
            reader: Some(reader),
            keyboard,
        }
    }

    /// The terminal's local modes now (`termios.c_lflag`: `ECHO`,
    /// `ECHOCTL`…), as the command set them.
    pub fn local_modes(&self) -> TerminalModes {
        TerminalModes(self.keyboard.try_clone().expect("a handle on the terminal"))
    }

    /// Types `keys` on the terminal, as a user would: `b"\x03"` is Ctrl-C
    /// (the terminal echoes `^C` and sends SIGINT to the foreground group).
    pub fn press(&mut self, keys: &[u8]) {
        self.keyboard.write_all(keys).expect("type on the terminal");
    }

    /// The text on the screen now.
    pub fn screen(&self) -> String {
        text_of(self.screen.lock().unwrap().screen())
    }

    /// Waits until the screen shows something `matches` accepts, and returns
    /// that screen; panics with every frame seen after `timeout`.
    pub fn wait_for(&self, timeout: Duration, matches: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        let mut seen = 0;
        loop {
            {
                let frames = self.frames.lock().unwrap();
                if let Some(frame) = frames[seen..].iter().find(|f| matches(f)) {
                    return frame.clone();
                }
                seen = frames.len();
            }
            if start.elapsed() > timeout {
                panic!(
                    "no frame matched within {timeout:?}; frames seen:\n{}",
                    self.frames.lock().unwrap().join("\n-----\n")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the command to end; its exit code and the whole text it
    /// left, scrollback included.
    pub fn finish(mut self, timeout: Duration) -> (i32, String) {
        let start = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > timeout {
                let _ = self.child.kill();
                panic!("still running after {timeout:?}:\n{}", self.screen());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        let mut parser = self.screen.lock().unwrap();
        let rows = usize::from(parser.screen().size().0.get());
        // Everything written, scrollback first: scroll to the top and read
        // one screen at a time.
        let mut text = Vec::new();
        let mut offset = usize::MAX;
        parser.screen_mut().set_scrollback(offset);
        offset = parser.screen().scrollback();
        loop {
            parser.screen_mut().set_scrollback(offset);
            let page = text_of(parser.screen());
            let lines: Vec<&str> = page.split('\n').collect();
            let take = if offset == 0 {
                lines.len()
            } else {
                rows.min(offset)
            };
            text.extend(lines.iter().take(take).map(|l| l.to_string()));
            if offset == 0 {
                break;
            }
            offset = offset.saturating_sub(rows);
        }
        parser.screen_mut().set_scrollback(0);
        (status.code().unwrap_or(-1), text.join("\n"))
    }

    /// What the command wrote, escape sequences (colours) included: read it
    /// after [`Pty::finish`] for everything.
    pub fn bytes(&self) -> Arc<Mutex<Vec<u8>>> {
        self.bytes.clone()
    }

    /// Every frame seen so far.
    pub fn frames(&self) -> Vec<String> {
        self.frames.lock().unwrap().clone()
    }
}

/// Reads a terminal's local modes, also after its command ended.
pub struct TerminalModes(File);

impl TerminalModes {
    pub fn get(&self) -> libc::tcflag_t {
        use std::os::fd::AsRawFd;
        let mut modes = std::mem::MaybeUninit::<libc::termios>::uninit();
        // SAFETY: tcgetattr fills the struct when it returns 0 (on Linux, the
        // master side reads the terminal's settings).
        unsafe {
            assert_eq!(
                libc::tcgetattr(self.0.as_raw_fd(), modes.as_mut_ptr()),
                0,
                "tcgetattr: {}",
                std::io::Error::last_os_error()
            );
            modes.assume_init().c_lflag
        }
    }
}

/// The screen's rows, one line each (a row the terminal wrapped into the
/// next stays a line of its own: the display pads its lines to the full
/// width and lets the terminal wrap), trailing blanks dropped.
fn text_of(screen: &vt100::Screen) -> String {
    let cols = screen.size().1.get();
    let rows: Vec<String> = screen
        .rows(0, cols)
        .map(|r| r.trim_end().to_string())
        .collect();
    rows.join("\n").trim_end().to_string()
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
