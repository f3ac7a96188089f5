//! The live display's terminal: stderr, with each frame in a synchronized
//! update (DEC private mode 2026: the terminal shows the frame whole, never
//! half drawn; terminals without it ignore the sequence) and the cursor
//! hidden while the live area is up, and a typed Ctrl-C not echoed as `^C`
//! there (see [`QuietCtrlC`]).
//!
//! Only a process in its terminal's foreground process group may change the
//! terminal's settings: from a background group (`cmd &`, `timeout cmd` in a
//! script, a task runner's own process group) `tcsetattr` raises SIGTTOU,
//! which stops the process until someone brings it to the foreground, as
//! helm or kubectl never would. [`in_foreground`] decides whether the live
//! display may run at all, and every change of the settings is made with
//! SIGTTOU blocked ([`without_sigttou`]), so that a run sent to the
//! background after it started (Ctrl-Z, `bg`) still ends.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use console::Term;
use indicatif::{ProgressDrawTarget, TermLike};

const BEGIN_SYNC: &str = "\x1b[?2026h";
const END_SYNC: &str = "\x1b[?2026l";
const HIDE_CURSOR: &str = "\x1b[?25l";
const SHOW_CURSOR: &str = "\x1b[?25h";

/// Whether this process is in the foreground process group of the terminal
/// on `fd`: false when `fd` is not a terminal, is not this session's
/// controlling terminal (`setsid`), or another group has the foreground
/// (`&`, `timeout`, a task runner that makes a process group of its own).
pub fn in_foreground(fd: std::os::fd::RawFd) -> bool {
    // SAFETY: tcgetpgrp and getpgrp only read the process's and the
    // terminal's state; tcgetpgrp returns -1 for a descriptor that is not
    // the controlling terminal.
    unsafe {
        let group = libc::tcgetpgrp(fd);
        group != -1 && group == libc::getpgrp()
    }
}

/// Runs `f` (a `tcsetattr`) with SIGTTOU blocked on this thread: a process
/// outside the foreground group then changes the settings (or gets EIO)
/// instead of being stopped.
fn without_sigttou<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: sigset_t is plain data filled by sigemptyset/sigaddset;
    // pthread_sigmask changes only this thread's mask, restored below.
    unsafe {
        let mut block = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        libc::sigemptyset(block.as_mut_ptr());
        libc::sigaddset(block.as_mut_ptr(), libc::SIGTTOU);
        let block = block.assume_init();
        let mut old = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        let blocked = libc::pthread_sigmask(libc::SIG_BLOCK, &block, old.as_mut_ptr()) == 0;
        let out = f();
        if blocked {
            libc::pthread_sigmask(libc::SIG_SETMASK, old.as_ptr(), std::ptr::null_mut());
        }
        out
    }
}

/// Where the live display draws: stderr when it is a terminal whose
/// foreground this process has.
pub fn stderr_target() -> ProgressDrawTarget {
    let term = Term::stderr();
    if !term.is_term() || !in_foreground(2) {
        return ProgressDrawTarget::hidden();
    }
    ProgressDrawTarget::term_like_with_hz(Box::new(Synchronized::new(term)), 20)
}

/// While the live area is up, the terminal does not echo control
/// characters as `^C`: indicatif leaves the cursor after the last column of
/// the area's last line (so that anything printed goes below it), where the
/// two characters of the echo would wrap onto a new row; every redraw after
/// that would start one row too low and leave a stale header in the
/// scrollback. The interrupt is still delivered, and the display says
/// "interrupting" itself. The terminal's setting comes back when the
/// display ends (`stty sane` restores it after a `kill -9`).
#[derive(Debug)]
struct QuietCtrlC;

/// The terminal's settings before [`QuietCtrlC`] changed them.
static SAVED: std::sync::Mutex<Option<libc::termios>> = std::sync::Mutex::new(None);

impl QuietCtrlC {
    /// On stderr's terminal (the one the display draws on).
    fn new() -> QuietCtrlC {
        if !in_foreground(2) {
            return QuietCtrlC;
        }
        let mut saved = std::mem::MaybeUninit::<libc::termios>::uninit();
        // SAFETY: tcgetattr fills the struct when it returns 0; fd 2 stays
        // open for the process's life.
        let saved = unsafe {
            if libc::tcgetattr(2, saved.as_mut_ptr()) != 0 {
                return QuietCtrlC;
            }
            saved.assume_init()
        };
        if saved.c_lflag & libc::ECHOCTL == 0 {
            return QuietCtrlC;
        }
        let mut quiet = saved;
        quiet.c_lflag &= !libc::ECHOCTL;
        let mut slot = SAVED.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: a valid termios for the same terminal.
        if slot.is_none()
            && without_sigttou(|| unsafe { libc::tcsetattr(2, libc::TCSANOW, &quiet) }) == 0
        {
            *slot = Some(saved);
        }
        QuietCtrlC
    }
}

impl Drop for QuietCtrlC {
    fn drop(&mut self) {
        restore_echo();
    }
}

/// Gives the terminal back its echo of control characters (a no-op when
/// [`QuietCtrlC`] changed nothing).
fn restore_echo() {
    if let Some(saved) = SAVED.lock().unwrap_or_else(|e| e.into_inner()).take() {
        // SAFETY: the settings read from this terminal in `QuietCtrlC::new`.
        without_sigttou(|| unsafe { libc::tcsetattr(2, libc::TCSANOW, &saved) });
    }
}

#[derive(Debug)]
struct Synchronized {
    term: Term,
    _quiet: QuietCtrlC,
    /// A frame is being written: its end marker is due at `flush`.
    open: AtomicBool,
    /// The cursor was hidden and must be shown again.
    hidden: AtomicBool,
}

impl Synchronized {
    fn new(term: Term) -> Self {
        Synchronized {
            term,
            _quiet: QuietCtrlC::new(),
            open: AtomicBool::new(false),
            hidden: AtomicBool::new(false),
        }
    }

    /// Before anything of a frame: open it (and hide the cursor once).
    fn begin(&self) -> io::Result<()> {
        if !self.hidden.swap(true, Ordering::SeqCst) {
            (&self.term).write_all(HIDE_CURSOR.as_bytes())?;
        }
        if !self.open.swap(true, Ordering::SeqCst) {
            (&self.term).write_all(BEGIN_SYNC.as_bytes())?;
        }
        Ok(())
    }
}

impl TermLike for Synchronized {
    fn width(&self) -> u16 {
        self.term.size().1
    }

    fn height(&self) -> u16 {
        self.term.size().0
    }

    fn move_cursor_up(&self, n: usize) -> io::Result<()> {
        self.begin()?;
        self.term.move_cursor_up(n)
    }

    fn move_cursor_down(&self, n: usize) -> io::Result<()> {
        self.begin()?;
        self.term.move_cursor_down(n)
    }

    fn move_cursor_right(&self, n: usize) -> io::Result<()> {
        self.begin()?;
        self.term.move_cursor_right(n)
    }

    fn move_cursor_left(&self, n: usize) -> io::Result<()> {
        self.begin()?;
        self.term.move_cursor_left(n)
    }

    fn write_line(&self, s: &str) -> io::Result<()> {
        self.begin()?;
        self.term.write_line(s)
    }

    fn write_str(&self, s: &str) -> io::Result<()> {
        self.begin()?;
        self.term.write_str(s)
    }

    fn clear_line(&self) -> io::Result<()> {
        self.begin()?;
        self.term.clear_line()
    }

    fn flush(&self) -> io::Result<()> {
        if self.open.swap(false, Ordering::SeqCst) {
            (&self.term).write_all(END_SYNC.as_bytes())?;
        }
        self.term.flush()
    }
}

impl Drop for Synchronized {
    /// The cursor comes back with the shell prompt, however the run ended.
    fn drop(&mut self) {
        if self.open.swap(false, Ordering::SeqCst) {
            let _ = (&self.term).write_all(END_SYNC.as_bytes());
        }
        if self.hidden.swap(false, Ordering::SeqCst) {
            let _ = (&self.term).write_all(SHOW_CURSOR.as_bytes());
        }
        let _ = self.term.flush();
    }
}

/// Shows the cursor again and gives the terminal back its echo of `^C` (the
/// live area is gone for good).
pub fn show_cursor() {
    restore_echo();
    let term = Term::stderr();
    if term.is_term() {
        let _ = (&term).write_all(SHOW_CURSOR.as_bytes());
        let _ = term.flush();
    }
}
