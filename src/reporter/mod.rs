//! Reporters turn the engine's [`Event`]s into what a person or a script sees.
//!
//! Which one runs is [`resolve`]d from the environment:
//! - `--output json` ([`json`]): JSON Lines on stdout, one object per event,
//!   the last one `run_finished` with the summary. Nothing else goes to stdout.
//!   `--output yaml`: the same events, each a YAML document (`---` first).
//! - a terminal, not CI ([`progress`]): live indicatif lines on stderr, one per
//!   running release, finished releases printed above them; the summary table
//!   goes to stdout once the bars are gone.
//! - everything else ([`plain`]): CI logs, task runners, pipes. One timestamped
//!   line per event **and** the summary table, all on stdout. One stream keeps
//!   the order of lines intact and makes `bootstrap apply infra | tee apply.log`
//!   capture the whole story; stderr carries only the final `error:` report.
//!
//! `--no-progress`, `NO_COLOR` and `TERM=dumb` turn the live display off
//! ([`animation_allowed`]): plain lines, no colour, no animation.
//!
//! "A terminal" means stdout *and* stderr are terminals ([`detect`]): with
//! `| tee log`, stdout is a pipe, so the log gets plain lines rather than an
//! empty file next to bars drawn on stderr. It also means this process has
//! the terminal's foreground: run in the background (`&`), under `timeout`
//! from a script, or by a task runner with a process group of its own, the
//! run prints plain lines and never touches the terminal's settings.
//!
//! `-q` shows only failures, warnings and the summary (in the plain format,
//! since there is nothing live to draw); `-v` adds command hook output and
//! unchanged CRDs.

/// How much the reporters say: `-q`, default, `-v`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    Quiet,
    Normal,
    Verbose,
}

/// `text` in `style` when colour is on (both human reporters).
pub(crate) fn paint(color: bool, style: console::Style, text: &str) -> String {
    if color {
        style.force_styling(true).apply_to(text).to_string()
    } else {
        text.to_string()
    }
}

/// How a reporter names a hook: postsync hooks are the common case and go
/// without their phase.
pub(crate) fn hook_label(phase: crate::event::HookPhase, hook: &str) -> String {
    match phase {
        crate::event::HookPhase::Presync => format!("{phase} hook {hook}"),
        crate::event::HookPhase::Postsync => format!("hook {hook}"),
    }
}

pub mod json;
pub mod layout;
pub mod plain;
pub mod progress;
mod terminal;
pub use terminal::{in_foreground, stderr_target};
pub mod summary;
pub mod tagged;

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsStr;
use std::io::{IsTerminal, Write};

use crate::event::{HookPhase, Outcome, Phase, Stamped, Step};
use crate::release::ReleaseId;

pub trait Reporter: Send {
    fn report(&mut self, event: &Stamped);
    /// Called every [`progress::TICK`] while the run goes on, events or not
    /// (the live display redraws its timers).
    fn tick(&mut self) {}
    /// Called once when no more events will come (the run is over, or the
    /// engine is gone): leave the terminal clean.
    fn finish(&mut self) {}
}

/// Two reporters fed the same events: the display and the run record.
pub struct Tee(pub Box<dyn Reporter>, pub Box<dyn Reporter>);

impl Reporter for Tee {
    fn report(&mut self, event: &Stamped) {
        self.0.report(event);
        self.1.report(event);
    }

    fn tick(&mut self) {
        self.0.tick();
        self.1.tick();
    }

    fn finish(&mut self) {
        self.0.finish();
        self.1.finish();
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReporterKind {
    Progress,
    Plain,
    /// `--output json|yaml`: one JSON line or YAML document per event.
    Structured(crate::output::Format),
}

/// Which reporter fits: JSON or YAML when asked for, live bars only on an
/// interactive terminal outside CI (CI log viewers render cursor movement
/// as garbage).
pub fn resolve(
    is_terminal: bool,
    is_ci: bool,
    structured: Option<crate::output::Format>,
) -> ReporterKind {
    if let Some(format) = structured {
        ReporterKind::Structured(format)
    } else if is_terminal && !is_ci {
        ReporterKind::Progress
    } else {
        ReporterKind::Plain
    }
}

/// Whether the value of `CI` means "running in CI": set, and not `false`/`0`.
pub fn ci_from(value: Option<&OsStr>) -> bool {
    match value.and_then(OsStr::to_str) {
        None => value.is_some(),
        Some(v) => !matches!(v.trim(), "" | "0" | "false" | "False" | "FALSE"),
    }
}

/// Whether colour may be used: not with `NO_COLOR` set (and not empty,
/// no-color.org) nor on a `TERM=dumb` terminal.
pub fn colour_allowed(no_color: Option<&OsStr>, term: Option<&OsStr>) -> bool {
    no_color.is_none_or(OsStr::is_empty) && term.is_none_or(|t| t != "dumb")
}

/// Whether the live display may animate: not with `--no-progress`, and not
/// where colour is off (`NO_COLOR`, `TERM=dumb`): a terminal that cannot or
/// should not show styles gets the plain lines.
pub fn animation_allowed(
    no_progress: bool,
    no_color: Option<&OsStr>,
    term: Option<&OsStr>,
) -> bool {
    !no_progress && colour_allowed(no_color, term)
}

/// [`resolve`] for this process.
pub fn detect(structured: Option<crate::output::Format>, no_progress: bool) -> ReporterKind {
    let animate = animation_allowed(
        no_progress,
        std::env::var_os("NO_COLOR").as_deref(),
        std::env::var_os("TERM").as_deref(),
    );
    // A terminal this process does not have the foreground of (`cmd &`,
    // `timeout cmd` from a script) gets the plain lines: the live display
    // would redraw over the shell's own, and changing the terminal's
    // settings from there stops the process (SIGTTOU).
    let is_terminal = animate
        && std::io::stdout().is_terminal()
        && std::io::stderr().is_terminal()
        && terminal::in_foreground(2);
    resolve(
        is_terminal,
        ci_from(std::env::var_os("CI").as_deref()),
        structured,
    )
}

/// Builds a reporter. `out` is stdout, `err` is stderr; the progress reporter
/// draws its bars on the process's stderr and uses `err` only when that is not
/// a terminal. Colours follow `console` (off a terminal and with `NO_COLOR`).
pub fn make(
    kind: ReporterKind,
    verbosity: Verbosity,
    out: Box<dyn Write + Send>,
    err: Box<dyn Write + Send>,
) -> Box<dyn Reporter> {
    match kind {
        ReporterKind::Structured(format) => Box::new(json::JsonReporter::new(out, format)),
        ReporterKind::Progress if verbosity != Verbosity::Quiet => {
            Box::new(progress::ProgressReporter::new(
                verbosity,
                terminal::stderr_target(),
                out,
                err,
                console::colors_enabled_stderr(),
            ))
        }
        ReporterKind::Progress | ReporterKind::Plain => Box::new(plain::PlainReporter::new(
            verbosity,
            out,
            console::colors_enabled(),
        )),
    }
}

/// Feeds every event to `reporter` until the engine drops its emitters.
pub async fn drive(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Stamped>,
    mut reporter: Box<dyn Reporter>,
) -> Box<dyn Reporter> {
    let mut ticks = tokio::time::interval(progress::TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            event = rx.recv() => match event {
                Some(event) => reporter.report(&event),
                None => break,
            },
            _ = ticks.tick() => reporter.tick(),
        }
    }
    reporter.finish();
    reporter
}

/// The line that says what protects the releases from Flux (the GitOps
/// scan, the admission guard), for both human reporters; `None` for every
/// other event.
pub fn protection_line(event: &crate::event::Event) -> Option<String> {
    use crate::event::{Event, GuardState};
    use crate::plural::count;
    match event {
        Event::GitopsScanned {
            root: Some(root),
            entrypoint,
            files,
            kustomizations,
            helm_releases,
        } => Some(format!(
            "GitOps tree {} (entrypoint {}) scanned: {}, {}, {}; none manages a release bootstrap owns",
            root.display(),
            entrypoint.as_deref().unwrap_or("."),
            count(*files, "file"),
            count(*kustomizations, "Flux Kustomization"),
            count(*helm_releases, "HelmRelease"),
        )),
        Event::GitopsScanned { root: None, .. } => Some(
            "no GitOps tree scanned (no `flux:` in cluster.yaml): whether Flux manages these releases was not checked"
                .to_string(),
        ),
        Event::LeftBehind { objects, remove } => Some(format!(
            "left in the cluster: {}; to remove them too: {remove}",
            objects.join(", ")
        )),
        Event::Guard { policy, state } => Some(match state {
            GuardState::Installed => format!(
                "admission guard installed (ValidatingAdmissionPolicy {policy}): Flux HelmReleases for bootstrap's releases are denied"
            ),
            GuardState::Updated => format!(
                "admission guard updated (ValidatingAdmissionPolicy {policy}): Flux HelmReleases for bootstrap's releases are denied"
            ),
            GuardState::Unchanged => format!(
                "admission guard in place (ValidatingAdmissionPolicy {policy}, unchanged): Flux HelmReleases for bootstrap's releases are denied"
            ),
            GuardState::WouldApply => format!(
                "admission guard would be installed (ValidatingAdmissionPolicy {policy}; --dry-run)"
            ),
            GuardState::Off => {
                "admission guard off (`guard: false` in cluster.yaml): nothing in the cluster stops a Flux HelmRelease for bootstrap's releases".to_string()
            }
            GuardState::Unsupported => {
                "admission guard not installed: the cluster does not serve ValidatingAdmissionPolicy".to_string()
            }
        }),
        _ => None,
    }
}

/// What a running release is doing, in the words of the live line.
pub fn step_label(step: &Step) -> String {
    match step {
        Step::Checking => "checking".to_string(),
        Step::Queued => "queued".to_string(),
        Step::Installing => "installing".to_string(),
        Step::Upgrading => "upgrading".to_string(),
        Step::Uninstalling => "uninstalling".to_string(),
        Step::Hook {
            phase: HookPhase::Presync,
            hook,
        } => format!("presync hook {hook}"),
        Step::Hook {
            phase: HookPhase::Postsync,
            hook,
        } => format!("hook {hook}"),
        Step::Waiting { what } => format!("waiting for {what}"),
    }
}

pub fn phase_label(phase: Phase) -> &'static str {
    match phase {
        Phase::Preflight => "preflight",
        Phase::Crds => "crds",
        Phase::Releases => "releases",
    }
}

/// The state of each release that the plain and progress reporters share:
/// its current step (to prefix progress messages and to tell whether an
/// interruption hit a helm operation) and its last progress message.
#[derive(Debug, Default)]
pub struct Tracker {
    live: HashMap<ReleaseId, Live>,
    /// Interrupted while helm was installing or upgrading: possibly `pending-*`.
    pub interrupted_in_helm: BTreeSet<ReleaseId>,
}

#[derive(Debug, Default)]
struct Live {
    step: Option<Step>,
    progress: Option<String>,
}

impl Tracker {
    pub fn step(&mut self, release: &ReleaseId, step: &Step) {
        let live = self.live.entry(release.clone()).or_default();
        live.step = Some(step.clone());
        live.progress = None;
    }

    /// Records a progress message; `false` when it repeats the last one, which
    /// is then not worth another line.
    pub fn progress(&mut self, release: &ReleaseId, message: &str) -> bool {
        let live = self.live.entry(release.clone()).or_default();
        if live.progress.as_deref() == Some(message) {
            return false;
        }
        live.progress = Some(message.to_string());
        true
    }

    pub fn current_step(&self, release: &ReleaseId) -> Option<&Step> {
        self.live.get(release).and_then(|l| l.step.as_ref())
    }

    pub fn finished(&mut self, release: &ReleaseId, outcome: Outcome) {
        let live = self.live.remove(release);
        let in_helm = matches!(
            live.and_then(|l| l.step),
            Some(Step::Installing | Step::Upgrading)
        );
        if outcome == Outcome::Interrupted && in_helm {
            self.interrupted_in_helm.insert(release.clone());
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::event::Event;

    /// A writer the test keeps a handle on after giving it to a reporter.
    #[derive(Clone, Default)]
    pub(crate) struct Shared(pub(crate) Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        pub(crate) fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    pub(crate) fn at(millis: u64, event: Event) -> Stamped {
        Stamped {
            time: SystemTime::UNIX_EPOCH + Duration::from_secs(1_750_000_000),
            elapsed: Duration::from_millis(millis),
            event,
        }
    }

    #[test]
    fn resolve_truth_table() {
        use crate::output::Format;
        use ReporterKind::*;
        let table = [
            // (terminal, ci, structured) -> kind
            ((true, false, None), Progress),
            ((true, true, None), Plain),
            ((false, false, None), Plain),
            ((false, true, None), Plain),
            ((true, false, Some(Format::Json)), Structured(Format::Json)),
            ((true, true, Some(Format::Json)), Structured(Format::Json)),
            ((false, false, Some(Format::Json)), Structured(Format::Json)),
            ((false, true, Some(Format::Yaml)), Structured(Format::Yaml)),
            ((true, false, Some(Format::Yaml)), Structured(Format::Yaml)),
        ];
        for ((terminal, ci, structured), kind) in table {
            assert_eq!(
                resolve(terminal, ci, structured),
                kind,
                "terminal={terminal} ci={ci} structured={structured:?}"
            );
        }
    }

    #[test]
    fn no_color_and_dumb_terminals_get_no_animation() {
        let os = |s: &'static str| Some(OsStr::new(s));
        assert!(animation_allowed(false, None, os("xterm-256color")));
        assert!(animation_allowed(false, os(""), None));
        assert!(!animation_allowed(true, None, os("xterm")));
        assert!(!animation_allowed(false, os("1"), os("xterm")));
        assert!(!animation_allowed(false, None, os("dumb")));
        assert!(!colour_allowed(None, os("dumb")));
        assert!(colour_allowed(None, None));
    }

    #[test]
    fn ci_variable_values() {
        assert!(!ci_from(None));
        for off in ["", "0", "false", "FALSE"] {
            assert!(!ci_from(Some(OsStr::new(off))), "{off:?}");
        }
        for on in ["true", "1", "yes", "woodpecker"] {
            assert!(ci_from(Some(OsStr::new(on))), "{on:?}");
        }
    }

    #[test]
    fn interruption_during_helm_is_remembered_but_not_during_a_hook() {
        let mut tracker = Tracker::default();
        let a = ReleaseId::new("ns", "a");
        let b = ReleaseId::new("ns", "b");
        tracker.step(&a, &Step::Upgrading);
        tracker.step(&b, &Step::Installing);
        tracker.step(
            &b,
            &Step::Hook {
                phase: HookPhase::Postsync,
                hook: "rollout".into(),
            },
        );
        tracker.finished(&a, Outcome::Interrupted);
        tracker.finished(&b, Outcome::Interrupted);
        assert_eq!(
            tracker.interrupted_in_helm.iter().collect::<Vec<_>>(),
            vec![&a]
        );
    }

    #[test]
    fn repeated_progress_is_dropped_until_the_step_changes() {
        let mut tracker = Tracker::default();
        let a = ReleaseId::new("ns", "a");
        assert!(tracker.progress(&a, "1 of 3"));
        assert!(!tracker.progress(&a, "1 of 3"));
        assert!(tracker.progress(&a, "2 of 3"));
        tracker.step(&a, &Step::Waiting { what: "x".into() });
        assert!(tracker.progress(&a, "2 of 3"));
    }

    #[tokio::test]
    async fn drive_reports_every_event_then_finishes() {
        let out = Shared::default();
        let reporter = make(
            ReporterKind::Structured(crate::output::Format::Json),
            Verbosity::Normal,
            Box::new(out.clone()),
            Box::new(std::io::sink()),
        );
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        for phase in [Phase::Preflight, Phase::Crds] {
            tx.send(at(0, Event::PhaseStarted { phase })).unwrap();
        }
        drop(tx);
        drive(rx, reporter).await;
        assert_eq!(out.text().lines().count(), 2);
    }
}
