//! The live display's layout as a pure function (docs/design.md#the-live-display):
//! the state of one cluster's run (a [`Board`]) or of many, a terminal's
//! width and height → the lines to draw. No terminal, no clock: the
//! progress reporter builds the boards and draws what this returns.
//!
//! One cluster:
//!
//! ```text
//! infra · 2 running · 3 queued · 1 waiting for a helm slot · 4/11 done   12.3s
//!   ⠋ kube-system/cilium      rollout DaemonSet/cilium 1/3 ready          8.1s
//!   ⠋ cert-manager/cert-man…  installing                                  2.0s
//!   waiting for a helm slot: spegel
//!   queued: coredns, flux-operator, flux-instance · waiting on cilium
//! ```
//!
//! Every line fits the width (one column spare, so the terminal never
//! wraps): names and steps are cut with an ellipsis `…`, lists end in
//! `+N more`. Timers are right-aligned in one column just after the longest
//! line's text, not at the far edge of a wide terminal. Many clusters get a
//! block like the above each, or one line each when the blocks do not fit
//! ([`fleet`]).

use std::time::Duration;

/// One cluster's run, as the display shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Board {
    pub cluster: String,
    pub dry_run: bool,
    /// Since the run started (frozen once it is over).
    pub elapsed: Duration,
    /// `Some(ok)` once the run is over.
    pub finished: Option<bool>,
    /// The preflight or CRD phase while it runs (`name` is the phase).
    pub phase: Option<Row>,
    pub total: usize,
    /// Finished successfully (installed, upgraded, unchanged, ...).
    pub done: usize,
    pub failed: usize,
    /// Not run because something they need failed, or interrupted.
    pub skipped: usize,
    /// Working, in the order they started.
    pub running: Vec<Row>,
    /// Waiting for a free helm slot (`--concurrency`).
    pub slot: Vec<String>,
    /// Waiting for the releases they need.
    pub queued: Vec<Queued>,
    /// Not started because the preflight or CRD phase still runs: counted,
    /// not listed as queued (nothing waits on a release yet).
    pub pending: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Row {
    pub name: String,
    /// What it is doing, in the user's terms (`installing`,
    /// `rollout DaemonSet/cilium 1/3 ready`).
    pub step: String,
    pub elapsed: Duration,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Queued {
    pub name: String,
    /// Its needs that have not finished yet.
    pub waiting_on: Vec<String>,
}

const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
/// Narrower than this and lines are cut anyway; the layout does not go below.
const MIN_WIDTH: usize = 20;
/// More clusters than this get one line each, even when their blocks fit.
pub const GROUPED_MAX: usize = 8;

/// A line before fitting: text, and a timer to right-align after it.
struct Line {
    text: String,
    timer: Option<String>,
}

/// The lines for one cluster, at most `height - 1` of them (the cursor
/// keeps the last row), none wider than `width - 1`.
pub fn single(board: &Board, width: usize, height: usize, frame: usize) -> Vec<String> {
    let width = usable(width);
    let budget = height.saturating_sub(1).max(2);
    let mut lines = vec![header(board, None, width)];
    lines.extend(block(board, width, budget - 1, frame));
    fit(lines, width)
}

/// The lines for many clusters: a block per cluster (its header, its
/// running releases beneath) while they fit in `height - 1` rows and there
/// are at most [`GROUPED_MAX`] clusters; else one line per cluster
/// (`infra  ▸ 5/11 done · rollout DaemonSet/cilium 1/3 ready   12.3s`),
/// the ones still running first when not even those fit. `waiting`: the
/// clusters not started yet (`--cluster-concurrency`), on a last line.
pub fn fleet(
    boards: &[Board],
    waiting: &[String],
    width: usize,
    height: usize,
    frame: usize,
) -> Vec<String> {
    let width = usable(width);
    let mut budget = height.saturating_sub(1).max(2);
    let waiting = (!waiting.is_empty()).then(|| {
        budget = budget.saturating_sub(1).max(2);
        list("waiting for their turn: ", waiting, "", width)
    });
    let mut lines = fleet_lines(boards, width, budget, frame);
    lines.extend(waiting);
    fit(lines, width)
}

fn fleet_lines(boards: &[Board], width: usize, budget: usize, frame: usize) -> Vec<Line> {
    let tag = boards.iter().map(|b| chars(&b.cluster)).max().unwrap_or(0);
    let grouped_len: usize = boards.iter().map(|b| 1 + block_len(b)).sum();
    if boards.len() <= GROUPED_MAX && grouped_len <= budget {
        let mut lines = Vec::new();
        for board in boards {
            let pad = " ".repeat(tag - chars(&board.cluster));
            lines.push(header(board, Some(&pad), width));
            lines.extend(block(board, width, usize::MAX, frame));
        }
        return lines;
    }
    let mut order: Vec<&Board> = boards.iter().collect();
    let mut lines = Vec::new();
    if order.len() > budget {
        // Running clusters first, in their order; the finished ones are
        // counted on the last line.
        order.sort_by_key(|b| b.finished.is_some());
        let shown = budget - 1;
        let rest = &order[shown..];
        let ok = rest.iter().filter(|b| b.finished == Some(true)).count();
        let failed = rest.iter().filter(|b| b.finished == Some(false)).count();
        let running = rest.len() - ok - failed;
        let mut parts = vec![format!("… {} more clusters:", rest.len())];
        parts.extend(counted(running, "running"));
        parts.extend(counted(ok, "done"));
        parts.extend(counted(failed, "failed"));
        order.truncate(shown);
        let summary = Line {
            text: join_first(&parts),
            timer: None,
        };
        lines.extend(order.iter().map(|b| one_line(b, tag, width)));
        lines.push(summary);
    } else {
        lines.extend(order.iter().map(|b| one_line(b, tag, width)));
    }
    lines
}

/// `… 3 more clusters: 1 running · 2 done`.
fn join_first(parts: &[String]) -> String {
    match parts.split_first() {
        Some((first, rest)) if !rest.is_empty() => format!("{first} {}", rest.join(" · ")),
        Some((first, _)) => first.clone(),
        None => String::new(),
    }
}

fn usable(width: usize) -> usize {
    width.saturating_sub(1).max(MIN_WIDTH)
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// `text` cut to `width` characters, ending in `…` when cut.
pub fn truncate(text: &str, width: usize) -> String {
    if chars(text) <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut cut: String = text.chars().take(width - 1).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

/// A step cut to `width` characters, keeping its count: in `rollout
/// Deployment ns/webhook 0/1 ready` or `CRDs 1/2 Established` the tally
/// from its `N/M` on is what changes and what the user watches, so the
/// subject before it is cut instead (`rollout Deployment ns/we… 0/1
/// ready`); a step without one is cut at its end.
fn truncate_step(step: &str, width: usize) -> String {
    if chars(step) <= width {
        return step.to_string();
    }
    let tally = step.rfind(' ').and_then(|_| {
        let words: Vec<(usize, &str)> = step
            .match_indices(' ')
            .map(|(i, _)| (i + 1, &step[i + 1..]))
            .collect();
        words.into_iter().rev().find(|(_, rest)| {
            let word = rest.split(' ').next().unwrap_or_default();
            word.split_once('/').is_some_and(|(a, b)| {
                !a.is_empty()
                    && !b.is_empty()
                    && a.chars().all(|c| c.is_ascii_digit())
                    && b.chars().all(|c| c.is_ascii_digit())
            })
        })
    });
    match tally {
        // Room for the tally and at least a few characters of the subject.
        Some((at, tail)) if chars(tail) + 4 <= width => {
            let subject = truncate(step[..at].trim_end(), width - chars(tail) - 1);
            format!("{subject} {tail}")
        }
        _ => truncate(step, width),
    }
}

fn counted(n: usize, what: &str) -> Option<String> {
    (n > 0).then(|| format!("{n} {what}"))
}

/// The counts of a board, most telling first; `short` for narrow terminals.
fn counts(board: &Board, short: bool) -> Vec<String> {
    let mut parts = Vec::new();
    parts.extend(counted(board.running.len(), "running"));
    parts.extend(counted(board.queued.len(), "queued"));
    if board.pending > 0 {
        let phase = match board.phase.as_ref().map(|p| p.name.as_str()) {
            Some("crds") => "the CRD phase",
            _ => "preflight",
        };
        parts.push(if short {
            format!("{} pending", board.pending)
        } else {
            format!("{} waiting for {phase}", board.pending)
        });
    }
    let slot = if short {
        "for a slot"
    } else {
        "waiting for a helm slot"
    };
    parts.extend(counted(board.slot.len(), slot));
    parts.push(format!("{}/{} done", board.done, board.total));
    parts.extend(counted(board.failed, "failed"));
    parts.extend(counted(board.skipped, "skipped"));
    parts
}

fn mark(board: &Board) -> &'static str {
    match board.finished {
        None => "▸",
        Some(true) => "✓",
        Some(false) => "✗",
    }
}

/// `infra · 2 running · 4/11 done` (a cluster of a fleet: `infra  ▸ ...`,
/// `fleet` padding aligning the names), with the run's timer.
fn header(board: &Board, fleet: Option<&str>, width: usize) -> Line {
    let dry = if board.dry_run { " (dry run)" } else { "" };
    let timer = crate::reporter::summary::fmt_duration(board.elapsed);
    let room = width.saturating_sub(chars(&timer) + 2);
    let name = format!("{}{dry}", board.cluster);
    let text = |short: bool| {
        let counts = counts(board, short).join(" · ");
        match fleet {
            None if board.finished.is_none() => format!("{name} · {counts}"),
            pad => format!("{name}{}  {} {counts}", pad.unwrap_or(""), mark(board)),
        }
    };
    let long = text(false);
    let text = if chars(&long) <= room {
        long
    } else {
        truncate(&text(true), room)
    };
    Line {
        text,
        timer: Some(timer),
    }
}

/// How many lines [`block`] takes without a height limit.
fn block_len(board: &Board) -> usize {
    if board.finished.is_some() {
        return 0;
    }
    usize::from(board.phase.is_some())
        + board.running.len()
        + usize::from(!board.slot.is_empty())
        + usize::from(!board.queued.is_empty())
}

/// A cluster's lines under its header: the phase, the running releases,
/// who waits for a slot and who is queued; at most `budget` lines (the
/// running releases that do not fit are counted on one line).
fn block(board: &Board, width: usize, budget: usize, frame: usize) -> Vec<Line> {
    if board.finished.is_some() {
        return Vec::new();
    }
    let spinner = SPINNER[frame % SPINNER.len()];
    let mut rows: Vec<&Row> = board.phase.iter().collect();
    rows.extend(&board.running);
    let mut tail = Vec::new();
    if !board.slot.is_empty() {
        tail.push(list("waiting for a helm slot: ", &board.slot, "", width));
    }
    if !board.queued.is_empty() {
        let names: Vec<String> = board.queued.iter().map(|q| q.name.clone()).collect();
        let mut on: Vec<String> = Vec::new();
        for q in &board.queued {
            for need in &q.waiting_on {
                // What the queue waits on is what is not itself queued.
                if !on.contains(need) && !board.queued.iter().any(|o| &o.name == need) {
                    on.push(need.clone());
                }
            }
        }
        let on = if on.is_empty() {
            String::new()
        } else {
            format!(" · waiting on {}", on.join(", "))
        };
        tail.push(list("queued: ", &names, &on, width));
    }
    let room = budget.saturating_sub(tail.len());
    let mut hidden = 0;
    if rows.len() > room {
        hidden = rows.len() - room.saturating_sub(1);
        rows.truncate(room.saturating_sub(1));
    }
    let timers: Vec<String> = rows
        .iter()
        .map(|r| crate::reporter::summary::fmt_duration(r.elapsed))
        .collect();
    // The header's timer is in the same column.
    let header_timer = chars(&crate::reporter::summary::fmt_duration(board.elapsed));
    let timer_width = timers
        .iter()
        .map(|t| chars(t))
        .chain([header_timer])
        .max()
        .unwrap_or(0);
    // "  ⠋ " + name + " " + step + "  " + timer
    let room = width.saturating_sub(4 + 1 + 2 + timer_width);
    let longest = rows.iter().map(|r| chars(&r.name)).max().unwrap_or(0);
    let longest_step = rows.iter().map(|r| chars(&r.step)).max().unwrap_or(0);
    // Names get what the steps leave, but at least half the room (or
    // their whole length, when shorter).
    let name_width = longest.min(room.saturating_sub(longest_step).max(room / 2));
    let step_width = room.saturating_sub(name_width);
    let mut lines: Vec<Line> = rows
        .iter()
        .zip(timers)
        .map(|(row, timer)| {
            let name = truncate(&row.name, name_width);
            let pad = " ".repeat(name_width - chars(&name));
            let step = truncate_step(&row.step, step_width);
            Line {
                text: format!("  {spinner} {name}{pad} {step}")
                    .trim_end()
                    .to_string(),
                timer: Some(timer),
            }
        })
        .collect();
    if hidden > 0 {
        lines.push(Line {
            text: format!("  … {hidden} more running"),
            timer: None,
        });
    }
    lines.extend(tail);
    lines
}

/// `  label: a, b, c +4 more suffix`, as many names as fit `width`.
fn list(label: &str, names: &[String], suffix: &str, width: usize) -> Line {
    let lead = format!("  {label}");
    let mut shown = names.len();
    loop {
        let mut text = format!("{lead}{}", names[..shown].join(", "));
        if shown < names.len() {
            let more = format!("+{} more", names.len() - shown);
            text = if shown == 0 {
                format!("{lead}{more}")
            } else {
                format!("{text} {more}")
            };
        }
        text.push_str(suffix);
        if chars(&text) <= width || shown == 0 {
            return Line {
                text: truncate(&text, width),
                timer: None,
            };
        }
        shown -= 1;
    }
}

/// One cluster of a large fleet on one line: its name, its counts and what
/// its longest-running release is doing.
fn one_line(board: &Board, tag: usize, width: usize) -> Line {
    let timer = crate::reporter::summary::fmt_duration(board.elapsed);
    let room = width.saturating_sub(chars(&timer) + 2);
    let name = truncate(&board.cluster, tag.min(room / 3).max(1));
    let pad = " ".repeat(tag.min(room / 3).max(1).saturating_sub(chars(&name)));
    let mut parts = vec![format!("{}/{} done", board.done, board.total)];
    parts.extend(counted(board.failed, "failed"));
    if board.finished.is_none() {
        let doing = match (&board.phase, board.running.first()) {
            (Some(phase), _) => Some(format!("{}: {}", phase.name, phase.step)),
            // A bare verb (`installing`) says nothing without its release.
            (None, Some(row)) if !row.step.contains(' ') => {
                Some(format!("{} {}", row.step, short_name(&row.name)))
            }
            (None, Some(row)) => Some(row.step.clone()),
            (None, None) => None,
        };
        if let Some(mut doing) = doing {
            if board.running.len() > 1 {
                doing.push_str(&format!(" +{} more", board.running.len() - 1));
            }
            parts.push(doing);
        }
    }
    let text = format!("{name}{pad}  {} {}", mark(board), parts.join(" · "));
    Line {
        text: truncate(&text, room),
        timer: Some(timer),
    }
}

/// `cilium` of `kube-system/cilium`.
fn short_name(id: &str) -> &str {
    id.rsplit('/').next().unwrap_or(id)
}

/// Right-aligns every timer in one column two spaces after the longest
/// timed text, within `width`.
fn fit(lines: Vec<Line>, width: usize) -> Vec<String> {
    let timer_width = lines
        .iter()
        .filter_map(|l| l.timer.as_ref())
        .map(|t| chars(t))
        .max()
        .unwrap_or(0);
    let text_room = width.saturating_sub(timer_width + 2);
    let column = lines
        .iter()
        .filter(|l| l.timer.is_some())
        .map(|l| chars(&l.text).min(text_room))
        .max()
        .unwrap_or(0);
    lines
        .into_iter()
        .map(|line| match line.timer {
            Some(timer) => {
                // A line cut here (another cluster's timer is wider) keeps
                // its count too.
                let text = truncate_step(&line.text, text_room);
                let pad = column - chars(&text);
                format!("{text}{}  {timer:>timer_width$}", " ".repeat(pad))
            }
            None => truncate(&line.text, width),
        })
        .collect()
}

#[cfg(test)]
mod tests;
