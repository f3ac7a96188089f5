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

/// Draws indicatif's frames so that they survive a resize.
///
/// indicatif writes each line of the live area padded with spaces to the
/// terminal's width and leaves the wrap to the terminal, so the whole area
/// is one soft-wrapped line, and it clears the previous frame by moving up
/// as many rows as it drew. Terminals that reflow on a resize (tmux, VTE,
/// iTerm2, kitty, Windows Terminal…) rejoin soft-wrapped rows when they
/// widen: the area shrinks to fewer rows, indicatif moves up past it and
/// erases the permanent lines above; when they narrow, every row wraps and
/// moving up that many rows leaves stale rows behind.
///
/// So a frame is collected whole (its rows cut at the width indicatif laid
/// it out for, trailing padding dropped) and written at `flush` as rows
/// ended by real newlines, which no terminal rejoins. Each frame starts at
/// the top of the previous one, found from what was drawn: as many rows as
/// it had, or, on a narrower terminal, as many as its rows take once
/// rewrapped (a terminal that truncates instead of rewrapping, like xterm,
/// loses that many rows above the area), each of them cleared.
#[derive(Debug)]
struct Synchronized {
    term: Term,
    _quiet: QuietCtrlC,
    state: std::sync::Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The cursor was hidden and must be shown again.
    hidden: bool,
    /// A frame is being written: its end marker is due at `flush`.
    open: bool,
    /// This frame has moved to the top of the previous one.
    positioned: bool,
    /// This frame's text as indicatif wrote it.
    text: String,
    /// The width indicatif asked for last (what it laid this frame out for).
    width: usize,
    /// The previous frame: the visible width of each row, and the
    /// terminal's width then.
    drawn: Vec<usize>,
    drawn_width: usize,
}

impl Synchronized {
    fn new(term: Term) -> Self {
        Synchronized {
            term,
            _quiet: QuietCtrlC::new(),
            state: std::sync::Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Before anything of a frame: open it (hiding the cursor once) and go
    /// to the top of the previous frame, clearing from there down.
    fn begin(&self, state: &mut State) -> io::Result<()> {
        let mut out = String::new();
        if !state.hidden {
            state.hidden = true;
            out.push_str(HIDE_CURSOR);
        }
        if !state.open {
            state.open = true;
            out.push_str(BEGIN_SYNC);
        }
        if !state.positioned {
            state.positioned = true;
            let width = usize::from(self.term.size().1).max(1);
            let rows = rows_now(&state.drawn, state.drawn_width, width);
            // Row by row: clearing to the end of the screen from its top
            // left corner makes tmux keep a copy of the screen in the
            // scrollback (its `scroll-on-clear`).
            let up = |n: usize| {
                if n > 0 {
                    format!("\x1b[{n}A")
                } else {
                    String::new()
                }
            };
            out.push_str(&up(rows.saturating_sub(1)));
            for row in 0..rows {
                out.push_str("\r\x1b[2K");
                if row + 1 < rows {
                    out.push_str("\x1b[1B");
                }
            }
            out.push_str(&up(rows.saturating_sub(1)));
            out.push('\r');
            state.drawn.clear();
        }
        (&self.term).write_all(out.as_bytes())
    }
}

/// How many rows a frame drawn as rows of `drawn` visible widths on a
/// terminal `then` columns wide takes on one `now` wide: the same rows, or
/// on a narrower one each rewrapped.
fn rows_now(drawn: &[usize], then: usize, now: usize) -> usize {
    if now >= then {
        return drawn.len();
    }
    drawn.iter().map(|w| w.div_ceil(now).max(1)).sum()
}

/// `text` (lines each padded to `width` columns, as indicatif writes them)
/// cut into the rows the terminal shows, each without its trailing
/// padding, with its visible width. Escape sequences take no column.
fn rows_of(text: &str, width: usize) -> Vec<(String, usize)> {
    let width = width.max(1);
    let mut rows = Vec::new();
    let (mut row, mut used) = (String::new(), 0);
    for (piece, escape) in console::AnsiCodeIterator::new(text) {
        if escape {
            row.push_str(piece);
            continue;
        }
        for c in piece.chars() {
            if c == '\n' {
                rows.push((std::mem::take(&mut row), used));
                used = 0;
                continue;
            }
            let w = console::measure_text_width(c.encode_utf8(&mut [0; 4]));
            if used + w > width {
                rows.push((std::mem::take(&mut row), used));
                used = 0;
            }
            row.push(c);
            used += w;
        }
    }
    if !row.is_empty() {
        rows.push((row, used));
    }
    rows.into_iter()
        .map(|(row, _)| {
            // The padding goes; escapes after it (none, as indicatif writes)
            // would stay.
            let trimmed = row.trim_end_matches(' ').to_string();
            let visible = console::measure_text_width(&trimmed);
            (trimmed, visible)
        })
        .collect()
}

impl TermLike for Synchronized {
    fn width(&self) -> u16 {
        let width = self.term.size().1;
        self.state().width = usize::from(width);
        width
    }

    fn height(&self) -> u16 {
        self.term.size().0
    }

    // indicatif's own moves and clears only position the frame, which
    // `begin` has done.
    fn move_cursor_up(&self, _n: usize) -> io::Result<()> {
        self.begin(&mut self.state())
    }

    fn move_cursor_down(&self, _n: usize) -> io::Result<()> {
        self.begin(&mut self.state())
    }

    fn move_cursor_right(&self, _n: usize) -> io::Result<()> {
        self.begin(&mut self.state())
    }

    fn move_cursor_left(&self, _n: usize) -> io::Result<()> {
        self.begin(&mut self.state())
    }

    fn write_line(&self, s: &str) -> io::Result<()> {
        let mut state = self.state();
        self.begin(&mut state)?;
        state.text.push_str(s);
        state.text.push('\n');
        Ok(())
    }

    fn write_str(&self, s: &str) -> io::Result<()> {
        let mut state = self.state();
        self.begin(&mut state)?;
        state.text.extend(s.chars().filter(|c| *c != '\r'));
        Ok(())
    }

    fn clear_line(&self) -> io::Result<()> {
        self.begin(&mut self.state())
    }

    /// Writes the frame: its rows ended by newlines, the cursor left after
    /// the last one (where the next frame's count starts).
    fn flush(&self) -> io::Result<()> {
        let mut state = self.state();
        if state.open {
            let width = if state.width == 0 {
                usize::from(self.term.size().1)
            } else {
                state.width
            };
            let rows = rows_of(&std::mem::take(&mut state.text), width);
            let mut out = rows
                .iter()
                .map(|(row, _)| row.as_str())
                .collect::<Vec<_>>()
                .join("\n");
            out.push_str(END_SYNC);
            state.drawn = rows.iter().map(|(_, w)| *w).collect();
            state.drawn_width = width;
            state.open = false;
            state.positioned = false;
            (&self.term).write_all(out.as_bytes())?;
        }
        self.term.flush()
    }
}

impl Drop for Synchronized {
    /// The cursor comes back with the shell prompt, however the run ended.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if std::mem::take(&mut state.open) {
            let _ = (&self.term).write_all(END_SYNC.as_bytes());
        }
        if std::mem::take(&mut state.hidden) {
            let _ = (&self.term).write_all(SHOW_CURSOR.as_bytes());
        }
        let _ = self.term.flush();
    }
}

/// Shows the cursor again and gives the terminal back its echo of `^C` (the
/// live area is gone for good).
pub(super) fn show_cursor() {
    restore_echo();
    let term = Term::stderr();
    if term.is_term() {
        let _ = (&term).write_all(SHOW_CURSOR.as_bytes());
        let _ = term.flush();
    }
}
