//! The terminal reporter (docs/design.md#the-live-display): a live area at
//! the bottom of the terminal, redrawn as events come and on every tick,
//! laid out by [`super::layout`] from a [`Model`] of each cluster's run; a
//! permanent line above it for each release that ends, each warning and
//! each failed hook.
//!
//! The live area is one indicatif bar whose message is the laid-out lines:
//! indicatif owns the cursor (clearing and redrawing), the layout owns
//! every character. Permanent lines go through `ProgressBar::suspend`,
//! which clears the area, prints, and redraws, so they never interleave
//! with a half-drawn frame.
//!
//! Many clusters in one process share one [`Screen`], one [`Model`] each:
//! the layout groups them (docs/fleet.md).

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use console::Style;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::Verbosity;
use super::layout::{self, Board, Queued, Row};
use super::summary::{fmt_duration, render_summary_for, stdout_width};
use super::{Reporter, Tracker, step_label};
use crate::event::{Event, Outcome, Phase, Stamped, Step};
use crate::release::ReleaseId;

/// How often the live area is redrawn when nothing happens (timers, spinner).
pub const TICK: Duration = Duration::from_millis(100);

/// What the display knows of one cluster's run.
#[derive(Debug, Default)]
pub struct Model {
    cluster: String,
    dry_run: bool,
    /// `run_started` was seen: there is something to show.
    started: bool,
    /// When the run started (its events' `elapsed` counts from there).
    origin: Option<Instant>,
    /// `(ok, how long)` once the run is over.
    finished: Option<(bool, Duration)>,
    /// Every release of the run, in plan order.
    order: Vec<ReleaseId>,
    needs: BTreeMap<ReleaseId, Vec<ReleaseId>>,
    /// Releases that started (absent: queued on their needs).
    states: HashMap<ReleaseId, State>,
    /// The preflight or CRD phase while it runs: its detail and start.
    phase: Option<(Phase, String, Instant)>,
    crds_applied: usize,
    crds_established: usize,
}

#[derive(Debug, Clone)]
enum State {
    /// Waiting for a helm slot (`--concurrency`).
    Slot,
    Running {
        since: Instant,
        /// What it is doing (`installing`, `hook command`).
        step: String,
        /// The latest detail of that step, and whether it is a counted
        /// rollout (which says it all: `rollout DaemonSet/cilium 1/3 ready`).
        detail: Option<(String, bool)>,
    },
    Done,
    Failed,
    Skipped,
}

impl Model {
    fn new(cluster: &str) -> Model {
        Model {
            cluster: cluster.to_string(),
            ..Model::default()
        }
    }

    /// The model after `event`, which happened `elapsed` into the run and
    /// is seen `now`.
    fn apply(&mut self, event: &Event, elapsed: Duration, now: Instant) {
        if self.origin.is_none() {
            self.origin = Some(now.checked_sub(elapsed).unwrap_or(now));
        }
        match event {
            Event::RunStarted {
                cluster,
                releases,
                dry_run,
                needs,
            } => {
                self.cluster.clone_from(cluster);
                self.started = true;
                self.dry_run = *dry_run;
                self.order.clone_from(releases);
                self.needs.clone_from(needs);
            }
            Event::PhaseStarted { phase } if *phase != Phase::Releases => {
                self.phase = Some((*phase, String::new(), now));
            }
            Event::PhaseFinished { .. } => self.phase = None,
            Event::PreflightStep { step } => {
                if let Some((Phase::Preflight, detail, _)) = &mut self.phase {
                    detail.clone_from(step);
                }
            }
            Event::CrdApplied { .. } => {
                self.crds_applied += 1;
                self.crd_detail();
            }
            Event::CrdEstablished { .. } => {
                self.crds_established += 1;
                self.crd_detail();
            }
            Event::ReleaseStarted { release } => {
                self.states.insert(
                    release.clone(),
                    State::Running {
                        since: now,
                        step: "starting".into(),
                        detail: None,
                    },
                );
            }
            Event::ReleaseStep { release, step } => {
                let since = match self.states.get(release) {
                    Some(State::Running { since, .. }) => *since,
                    _ => now,
                };
                let state = match step {
                    Step::Queued => State::Slot,
                    step => State::Running {
                        since,
                        step: step_label(step),
                        detail: None,
                    },
                };
                self.states.insert(release.clone(), state);
            }
            Event::ReleaseProgress {
                release,
                message,
                tally,
            } => {
                if let Some(State::Running { detail, .. }) = self.states.get_mut(release) {
                    *detail = Some(match tally {
                        Some(tally) => (tally.label(), true),
                        None => (message.clone(), false),
                    });
                }
            }
            Event::ReleaseFinished { result, .. } => {
                let state = match result.outcome {
                    Outcome::Failed => State::Failed,
                    Outcome::Skipped | Outcome::Interrupted => State::Skipped,
                    _ => State::Done,
                };
                self.states.insert(result.release.clone(), state);
            }
            Event::RunFinished { summary } => {
                self.phase = None;
                self.finished = Some((summary.ok, elapsed));
            }
            _ => {}
        }
    }

    /// Every CRD is applied before the first wait: `applied` is the total
    /// while they are waited for.
    fn crd_detail(&mut self) {
        if let Some((Phase::Crds, detail, _)) = &mut self.phase {
            *detail = format!(
                "CRDs {}/{} Established",
                self.crds_established, self.crds_applied
            );
        }
    }

    /// What the layout draws, `now`.
    fn board(&self, now: Instant) -> Board {
        let elapsed = match (self.finished, self.origin) {
            (Some((_, took)), _) => took,
            (None, Some(origin)) => now.saturating_duration_since(origin),
            (None, None) => Duration::ZERO,
        };
        let mut board = Board {
            cluster: self.cluster.clone(),
            dry_run: self.dry_run,
            elapsed,
            finished: self.finished.map(|(ok, _)| ok),
            total: self.order.len().max(self.states.len()),
            ..Board::default()
        };
        board.phase = self.phase.as_ref().map(|(phase, detail, since)| Row {
            name: super::phase_label(*phase).to_string(),
            step: detail.clone(),
            elapsed: now.saturating_duration_since(*since),
        });
        let mut running = Vec::new();
        // Before the release phase nothing is queued behind a release: the
        // run itself is still in preflight or the CRD phase.
        let before_releases = self.phase.is_some() && self.states.is_empty();
        for id in &self.order {
            match self.states.get(id) {
                None if before_releases => board.pending += 1,
                None => {
                    let waiting_on = self
                        .needs
                        .get(id)
                        .into_iter()
                        .flatten()
                        .filter(|n| {
                            !matches!(
                                self.states.get(n),
                                Some(State::Done | State::Failed | State::Skipped)
                            )
                        })
                        .map(|n| n.name.clone())
                        .collect();
                    board.queued.push(Queued {
                        name: id.name.clone(),
                        waiting_on,
                    });
                }
                Some(State::Slot) => board.slot.push(id.name.clone()),
                Some(State::Running { .. }) => {}
                Some(State::Done) => board.done += 1,
                Some(State::Failed) => board.failed += 1,
                Some(State::Skipped) => board.skipped += 1,
            }
        }
        // Releases the plan did not announce still count.
        for (id, state) in &self.states {
            if let State::Running {
                since,
                step,
                detail,
            } = state
            {
                let step = match detail {
                    Some((counted, true)) => counted.clone(),
                    Some((d, false)) => format!("{step}: {d}"),
                    None => step.clone(),
                };
                running.push((
                    *since,
                    Row {
                        name: id.to_string(),
                        step,
                        elapsed: now.saturating_duration_since(*since),
                    },
                ));
            } else if !self.order.contains(id) {
                match state {
                    State::Done => board.done += 1,
                    State::Failed => board.failed += 1,
                    State::Skipped => board.skipped += 1,
                    _ => {}
                }
            }
        }
        running.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.name.cmp(&b.1.name)));
        board.running = running.into_iter().map(|(_, row)| row).collect();
        board
    }
}

/// The live area every cluster of the process draws into.
pub struct Screen {
    bar: ProgressBar,
    models: Vec<Model>,
    /// Several clusters: grouped layout, permanent lines tagged.
    fleet: bool,
    color: bool,
    frame: usize,
    last: Option<Instant>,
}

pub type SharedScreen = Arc<Mutex<Screen>>;

impl Screen {
    pub fn new(target: ProgressDrawTarget, fleet: bool, color: bool) -> SharedScreen {
        let style =
            ProgressStyle::with_template("{msg}").unwrap_or_else(|_| ProgressStyle::default_bar());
        let bar = ProgressBar::with_draw_target(None, target).with_style(style);
        Arc::new(Mutex::new(Screen {
            bar,
            models: Vec::new(),
            fleet,
            color,
            frame: 0,
            last: None,
        }))
    }

    /// A board for `cluster`; its index. Shown once its run starts; the
    /// live area stays until every board's run is over (or [`Screen::clear`]).
    pub fn add(&mut self, cluster: &str) -> usize {
        self.models.push(Model::new(cluster));
        self.models.len() - 1
    }

    fn is_hidden(&self) -> bool {
        self.bar.is_hidden()
    }

    /// The lines of the live area at `width` × `height`, `now`.
    fn lines(&self, width: usize, height: usize, now: Instant) -> Vec<String> {
        let boards: Vec<Board> = self
            .models
            .iter()
            .filter(|m| m.started)
            .map(|m| m.board(now))
            .collect();
        if self.fleet {
            let waiting: Vec<String> = self
                .models
                .iter()
                .filter(|m| !m.started && m.finished.is_none())
                .map(|m| m.cluster.clone())
                .collect();
            layout::fleet(&boards, &waiting, width, height, self.frame)
        } else {
            boards
                .first()
                .map(|b| layout::single(b, width, height, self.frame))
                .unwrap_or_default()
        }
    }

    /// Redraws the live area (at most every [`TICK`] unless `force`).
    fn draw(&mut self, force: bool) {
        if self.is_hidden() || self.bar.is_finished() {
            return;
        }
        let now = Instant::now();
        if !force && self.last.is_some_and(|t| now.duration_since(t) < TICK) {
            return;
        }
        self.last = Some(now);
        self.frame = self.frame.wrapping_add(1);
        // As wide as the draw target says (three columns short of the
        // terminal: see `terminal::Synchronized::width`).
        let (height, width) = console::Term::stderr()
            .size_checked()
            .map_or((24, 80), |(h, w)| (usize::from(h), usize::from(w)));
        let width = width.saturating_sub(3).max(1);
        let lines = self.lines(width, height, now);
        let bold = Style::new().bold();
        let text: Vec<String> = lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                // Headers are the lines that do not start with a space.
                if self.color && (i == 0 || !l.starts_with(' ')) {
                    bold.apply_to(l).force_styling(true).to_string()
                } else {
                    l.clone()
                }
            })
            .collect();
        self.bar.set_message(text.join("\n"));
    }

    /// Prints `text` above the live area (to `to` directly when hidden).
    fn print(&mut self, to: &mut dyn Write, text: &str) {
        if self.is_hidden() || self.bar.is_finished() {
            let _ = writeln!(to, "{text}");
            let _ = to.flush();
        } else {
            self.bar.suspend(|| {
                let _ = writeln!(to, "{text}");
                let _ = to.flush();
            });
        }
    }

    /// Board `index`'s run is over, whether or not it started (a cluster
    /// whose prerequisites failed never does): no longer waiting.
    pub fn close(&mut self, index: usize, ok: bool) {
        if let Some(model) = self.models.get_mut(index)
            && model.finished.is_none()
        {
            let took = model.origin.map_or(Duration::ZERO, |o| o.elapsed());
            model.finished = Some((ok, took));
        }
    }

    /// Whether every cluster's run is over.
    fn all_finished(&self) -> bool {
        self.models.iter().all(|m| m.finished.is_some())
    }

    /// Removes the live area for good.
    pub fn clear(&mut self) {
        if !self.bar.is_finished() {
            self.bar.finish_and_clear();
            if !self.bar.is_hidden() {
                super::terminal::show_cursor();
            }
        }
    }
}

pub struct ProgressReporter {
    screen: SharedScreen,
    /// This cluster's model in the screen.
    index: usize,
    out: Box<dyn Write + Send>,
    /// Where permanent lines go.
    err: Box<dyn Write + Send>,
    verbosity: Verbosity,
    color: bool,
    tracker: Tracker,
}

impl ProgressReporter {
    /// The reporter of a single cluster, drawing on `target`.
    pub fn new(
        verbosity: Verbosity,
        target: ProgressDrawTarget,
        out: Box<dyn Write + Send>,
        err: Box<dyn Write + Send>,
        color: bool,
    ) -> Self {
        let screen = Screen::new(target, false, color);
        let index = lock(&screen).add("");
        Self::on(screen, index, verbosity, out, err, color)
    }

    /// The reporter of one cluster among many sharing `screen`, drawing
    /// board `index` ([`Screen::add`]); `out` and `err` tag their lines with
    /// the cluster.
    pub fn on(
        screen: SharedScreen,
        index: usize,
        verbosity: Verbosity,
        out: Box<dyn Write + Send>,
        err: Box<dyn Write + Send>,
        color: bool,
    ) -> Self {
        ProgressReporter {
            screen,
            index,
            out,
            err,
            verbosity,
            color,
            tracker: Tracker::default(),
        }
    }

    fn paint(&self, style: Style, text: &str) -> String {
        super::paint(self.color, style, text)
    }

    fn println(&mut self, text: &str) {
        lock(&self.screen).print(&mut *self.err, text);
    }

    /// `line` followed by `block` indented under it.
    fn println_block(&mut self, line: &str, block: Option<&str>) {
        let mut text = line.to_string();
        for l in block.into_iter().flat_map(str::lines) {
            text.push('\n');
            text.push_str(format!("    {l}").trim_end());
        }
        self.println(&text);
    }

    fn release_finished(&mut self, event: &Event) {
        let Event::ReleaseFinished {
            result,
            diagnostics_text,
            ..
        } = event
        else {
            return;
        };
        self.tracker.finished(&result.release, result.outcome);
        let took = super::summary::took(result);
        let label = result.outcome.label();
        let (mark, style, how) = match result.outcome {
            Outcome::Failed => ("✗", Style::new().red().bold(), format!(" after {took}")),
            Outcome::Skipped => ("-", Style::new().yellow(), String::new()),
            Outcome::Interrupted => ("!", Style::new().yellow(), format!(" after {took}")),
            _ => ("✓", Style::new().green(), format!(" in {took}")),
        };
        let mut line = format!(
            "{} {} {}{how}",
            self.paint(style.clone(), mark),
            result.release,
            self.paint(style, label)
        );
        let mut block = Vec::new();
        if let Some(message) = &result.message {
            let mut lines = message.lines();
            if let Some(first) = lines.next() {
                line = format!("{line}: {first}");
            }
            block.extend(lines);
        }
        block.extend(diagnostics_text.as_deref());
        let block = (!block.is_empty()).then(|| block.join("\n"));
        self.println_block(&line, block.as_deref());
    }

    /// The permanent lines of an event, if any.
    fn print_event(&mut self, event: &Event) {
        let verbose = self.verbosity == Verbosity::Verbose;
        match event {
            Event::PhaseFinished { phase, ok, stopped } => {
                if *stopped {
                    // A deliberate stop: not a failure.
                    let stopped = self.paint(Style::new().yellow(), "stopped");
                    self.println(&format!("! {} phase {stopped}", super::phase_label(*phase)));
                } else if !ok {
                    let failed = self.paint(Style::new().red().bold(), "failed");
                    self.println(&format!("✗ {} phase {failed}", super::phase_label(*phase)));
                } else if *phase == Phase::Preflight {
                    self.println("✓ preflight checks passed");
                }
            }
            // No line for a CRD phase with nothing in it.
            Event::CrdsEstablished { count: 0 } => {}
            Event::CrdsEstablished { count } => {
                self.println(&format!("✓ crds: {count} established"));
            }
            Event::CrdDeleted {
                release,
                crd,
                change,
            } => {
                self.println(&format!("✓ crd {crd} {change} ({release})"));
            }
            Event::ReleaseStep { release, step } => self.tracker.step(release, step),
            Event::ReleaseProgress {
                release, message, ..
            } => {
                self.tracker.progress(release, message);
            }
            Event::HookFinished {
                release,
                phase,
                hook,
                ok,
                duration,
                output,
            } => {
                if *ok && !(verbose && output.is_some()) {
                    return;
                }
                let hook = super::hook_label(*phase, hook);
                let took = fmt_duration(*duration);
                let line = if *ok {
                    format!("  {release}: {hook} done in {took}")
                } else {
                    let failed = self.paint(Style::new().red().bold(), "failed");
                    format!("  {release}: {hook} {failed} after {took}")
                };
                self.println_block(&line, output.as_deref());
            }
            event @ Event::ReleaseFinished { .. } => self.release_finished(event),
            Event::Warning { message } => {
                let warning = self.paint(Style::new().yellow(), "warning");
                self.println(&format!("{warning}: {message}"));
            }
            Event::GitopsScanned { .. } | Event::Guard { .. } | Event::LeftBehind { .. } => {
                if let Some(line) = super::protection_line(event) {
                    self.println(&format!("✓ {line}"));
                }
            }
            Event::Interrupting { running, grace } => {
                let text = format!(
                    "! interrupting: waiting up to {} for {} running release(s); Ctrl-C again stops at once",
                    fmt_duration(*grace),
                    running.len()
                );
                self.println(&text);
            }
            Event::RunFinished { summary } => {
                let table = render_summary_for(
                    summary,
                    &self.tracker.interrupted_in_helm,
                    false,
                    stdout_width(),
                );
                let mut screen = lock(&self.screen);
                if screen.all_finished() {
                    screen.clear();
                }
                let out = &mut *self.out;
                screen.print(out, &format!("\n{}", table.trim_end_matches('\n')));
            }
            _ => {}
        }
    }
}

pub fn lock(screen: &SharedScreen) -> std::sync::MutexGuard<'_, Screen> {
    screen.lock().unwrap_or_else(|e| e.into_inner())
}

impl Reporter for ProgressReporter {
    fn report(&mut self, stamped: &Stamped) {
        // An event that moves a release or a phase is drawn before its
        // line is printed: the line and the live area change together,
        // never a frame with a release both done and still rolling out.
        let moves = matches!(
            stamped.event,
            Event::ReleaseStarted { .. }
                | Event::ReleaseFinished { .. }
                | Event::PhaseStarted { .. }
                | Event::PhaseFinished { .. }
                | Event::RunFinished { .. }
        );
        {
            let mut screen = lock(&self.screen);
            let index = self.index;
            if let Some(model) = screen.models.get_mut(index) {
                model.apply(&stamped.event, stamped.elapsed, Instant::now());
            }
            if moves {
                screen.draw(true);
            }
        }
        self.print_event(&stamped.event);
        lock(&self.screen).draw(false);
    }

    fn tick(&mut self) {
        lock(&self.screen).draw(false);
    }

    fn finish(&mut self) {
        {
            let mut screen = lock(&self.screen);
            if let Some(model) = screen.models.get_mut(self.index)
                && model.finished.is_none()
            {
                // The engine is gone without a summary (an error ended the
                // run): this cluster has nothing more to show.
                let took = model.origin.map_or(Duration::ZERO, |o| o.elapsed());
                model.finished = Some((false, took));
            }
            if screen.all_finished() {
                screen.clear();
            } else {
                screen.draw(true);
            }
        }
        let _ = self.out.flush();
        let _ = self.err.flush();
    }
}

impl Drop for ProgressReporter {
    /// A live area left behind by a reporter that never saw `finish` (a
    /// panic in the engine) would otherwise stay drawn over the shell prompt.
    fn drop(&mut self) {
        let mut screen = lock(&self.screen);
        if let Some(model) = screen.models.get_mut(self.index)
            && model.finished.is_none()
        {
            model.finished = Some((false, Duration::ZERO));
        }
        if screen.all_finished() {
            screen.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::event::{CrdChange, HookPhase, ReleaseResult, Step, Summary};
    use crate::reporter::tests::{Shared, at};

    fn reporter(out: &Shared, err: &Shared) -> ProgressReporter {
        ProgressReporter::new(
            Verbosity::Verbose,
            ProgressDrawTarget::hidden(),
            Box::new(out.clone()),
            Box::new(err.clone()),
            false,
        )
    }

    fn id(name: &str) -> ReleaseId {
        ReleaseId::new("ns", name)
    }

    fn result(name: &str, outcome: Outcome) -> ReleaseResult {
        ReleaseResult {
            release: id(name),
            outcome,
            duration: Duration::from_millis(2_500),
            timing: Default::default(),
            message: (outcome == Outcome::Failed).then(|| "rollout timed out\nsecond line".into()),
        }
    }

    fn summary() -> Summary {
        Summary {
            phases: None,
            cluster: "infra".into(),
            ok: false,
            dry_run: false,
            duration: Duration::from_secs(5),
            releases: vec![
                result("a", Outcome::Installed),
                result("b", Outcome::Failed),
            ],
            critical_path: vec![id("a"), id("b"), id("never-seen")],
            root_failures: vec![id("b")],
            interrupted: true,
            lock_lost: None,
        }
    }

    /// Every kind of event, for releases known and unknown.
    fn pool() -> Vec<Event> {
        let mut events = vec![
            Event::RunStarted {
                cluster: "infra".into(),
                releases: vec![id("a"), id("b")],
                dry_run: true,
                needs: [(id("b"), vec![id("a")])].into(),
            },
            Event::PhaseStarted {
                phase: Phase::Preflight,
            },
            Event::PhaseStarted { phase: Phase::Crds },
            Event::PhaseStarted {
                phase: Phase::Releases,
            },
            Event::PhaseFinished {
                phase: Phase::Crds,
                ok: true,
                stopped: false,
            },
            Event::PhaseFinished {
                phase: Phase::Releases,
                ok: false,
                stopped: false,
            },
            Event::CrdApplied {
                release: id("a"),
                crd: "x.example.com".into(),
                change: CrdChange::Created,
            },
            Event::CrdsEstablished { count: 3 },
            Event::Warning {
                message: "w\nsecond".into(),
            },
            Event::Interrupting {
                running: vec![id("a")],
                grace: Duration::from_secs(30),
            },
            Event::RunFinished { summary: summary() },
        ];
        for name in ["a", "b", "unknown"] {
            events.extend([
                Event::ReleaseStarted { release: id(name) },
                Event::ReleaseStep {
                    release: id(name),
                    step: Step::Upgrading,
                },
                Event::ReleaseStep {
                    release: id(name),
                    step: Step::Waiting {
                        what: "DaemonSet ns/x".into(),
                    },
                },
                Event::ReleaseProgress {
                    release: id(name),
                    message: "1 of 3".into(),
                    tally: None,
                },
                Event::HookFinished {
                    release: id(name),
                    phase: HookPhase::Presync,
                    hook: "command".into(),
                    ok: false,
                    duration: Duration::ZERO,
                    output: Some("out\n".into()),
                },
                Event::ReleaseFinished {
                    result: result(name, Outcome::Failed),
                    diagnostics: None,
                    diagnostics_text: Some("pod x: CrashLoopBackOff\n  last log line".into()),
                },
                Event::ReleaseFinished {
                    result: result(name, Outcome::Interrupted),
                    diagnostics: None,
                    diagnostics_text: None,
                },
            ]);
        }
        events
    }

    #[test]
    fn finished_releases_become_permanent_lines_and_the_summary_goes_to_stdout() {
        let (out, err) = (Shared::default(), Shared::default());
        let mut r = reporter(&out, &err);
        let events = [
            Event::RunStarted {
                cluster: "infra".into(),
                releases: vec![id("a"), id("b")],
                dry_run: false,
                needs: Default::default(),
            },
            Event::ReleaseStarted { release: id("a") },
            Event::ReleaseStep {
                release: id("a"),
                step: Step::Installing,
            },
            Event::ReleaseFinished {
                result: result("a", Outcome::Installed),
                diagnostics: None,
                diagnostics_text: None,
            },
            Event::ReleaseFinished {
                result: result("b", Outcome::Failed),
                diagnostics: None,
                diagnostics_text: Some("pod b-1: Pending".into()),
            },
            Event::RunFinished { summary: summary() },
        ];
        for (i, event) in events.into_iter().enumerate() {
            r.report(&at(i as u64, event));
        }
        r.finish();
        assert_eq!(
            err.text(),
            "✓ ns/a installed in 2.5s\n✗ ns/b failed after 2.5s: rollout timed out\n    second line\n    pod b-1: Pending\n"
        );
        assert!(
            out.text()
                .starts_with("\nrelease  outcome     run  queued  message\n"),
            "{}",
            out.text()
        );
        let screen = lock(&r.screen);
        let board = screen.models[0].board(Instant::now());
        assert_eq!((board.done, board.failed, board.total), (1, 1, 2));
        assert!(screen.all_finished());
    }

    #[test]
    fn the_board_says_who_runs_who_waits_for_a_slot_and_who_waits_on_what() {
        let mut model = Model::default();
        let t0 = Instant::now();
        let later = |ms| t0 + Duration::from_millis(ms);
        let events = [
            Event::RunStarted {
                cluster: "infra".into(),
                releases: vec![id("a"), id("b"), id("c"), id("d"), id("e")],
                dry_run: false,
                needs: [
                    (id("c"), vec![id("a")]),
                    (id("d"), vec![id("a"), id("c")]),
                    (id("e"), vec![id("b")]),
                ]
                .into(),
            },
            Event::ReleaseStarted { release: id("a") },
            Event::ReleaseStep {
                release: id("a"),
                step: Step::Hook {
                    phase: HookPhase::Postsync,
                    hook: "rollout of DaemonSet ns/a".into(),
                },
            },
            Event::ReleaseProgress {
                release: id("a"),
                message: "1 of 3 updated pods available".into(),
                tally: Some(crate::event::Tally {
                    subject: "DaemonSet/a".into(),
                    done: 1,
                    total: 3,
                    unit: "ready",
                }),
            },
            Event::ReleaseStarted { release: id("b") },
            Event::ReleaseStep {
                release: id("b"),
                step: Step::Queued,
            },
        ];
        for (i, event) in events.iter().enumerate() {
            model.apply(event, Duration::from_millis(i as u64), later(i as u64));
        }
        let board = model.board(later(2_000));
        assert_eq!(board.total, 5);
        assert_eq!(
            board.running,
            [Row {
                name: "ns/a".into(),
                step: "rollout DaemonSet/a 1/3 ready".into(),
                elapsed: Duration::from_millis(1_999),
            }]
        );
        assert_eq!(board.slot, ["b"]);
        assert_eq!(
            board.queued,
            [
                Queued {
                    name: "c".into(),
                    waiting_on: vec!["a".into()]
                },
                Queued {
                    name: "d".into(),
                    waiting_on: vec!["a".into(), "c".into()]
                },
                Queued {
                    name: "e".into(),
                    waiting_on: vec!["b".into()]
                },
            ]
        );
        model.apply(
            &Event::ReleaseFinished {
                result: result("a", Outcome::Installed),
                diagnostics: None,
                diagnostics_text: None,
            },
            Duration::from_secs(3),
            later(3_000),
        );
        let board = model.board(later(3_000));
        assert_eq!((board.done, board.running.len()), (1, 0));
        assert_eq!(board.queued[1].waiting_on, ["c"], "a is done");
        assert_eq!(board.elapsed, Duration::from_secs(3));
    }

    #[test]
    fn finish_without_start() {
        let (out, err) = (Shared::default(), Shared::default());
        let mut r = reporter(&out, &err);
        r.finish();
        r.report(&at(
            0,
            Event::ReleaseProgress {
                release: id("ghost"),
                message: "?".into(),
                tally: None,
            },
        ));
        r.finish();
        assert_eq!(out.text(), "");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn any_sequence_of_events_is_survived(picks in prop::collection::vec(0usize..100, 0..40)) {
            let (out, err) = (Shared::default(), Shared::default());
            let pool = pool();
            let mut r = reporter(&out, &err);
            for (i, pick) in picks.iter().enumerate() {
                r.report(&at(i as u64 * 100, pool[pick % pool.len()].clone()));
            }
            r.finish();
            prop_assert!(lock(&r.screen).all_finished());
        }
    }
}
