//! The terminal reporter: a top line with overall progress, one live spinner
//! line per running release (its step, latest readiness detail and elapsed
//! time), and a permanent line above the bars for each release that ends.
//! Multi-line blocks (diagnostics, hook output) go through
//! `MultiProgress::println`, which clears and redraws the bars around them,
//! so they never interleave with a half-drawn bar.

use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;

use console::Style;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::Verbosity;
use super::summary::{fmt_duration, render_summary};
use super::{Reporter, Tracker, phase_label, step_label};
use crate::event::{Event, Outcome, Phase, Stamped};
use crate::release::ReleaseId;

const TICK: Duration = Duration::from_millis(120);

pub struct ProgressReporter {
    multi: MultiProgress,
    top: Option<ProgressBar>,
    /// The preflight or CRD phase while it runs.
    phase: Option<ProgressBar>,
    bars: HashMap<ReleaseId, ProgressBar>,
    out: Box<dyn Write + Send>,
    /// Where permanent lines go when the draw target is hidden (stderr is not
    /// a terminal after all): they must not be lost with the bars.
    err: Box<dyn Write + Send>,
    verbosity: Verbosity,
    color: bool,
    tracker: Tracker,
    cluster: String,
    dry_run: bool,
    total: usize,
    done: usize,
    crds_applied: usize,
}

impl ProgressReporter {
    pub fn new(
        verbosity: Verbosity,
        target: ProgressDrawTarget,
        out: Box<dyn Write + Send>,
        err: Box<dyn Write + Send>,
        color: bool,
    ) -> Self {
        ProgressReporter {
            multi: MultiProgress::with_draw_target(target),
            top: None,
            phase: None,
            bars: HashMap::new(),
            out,
            err,
            verbosity,
            color,
            tracker: Tracker::default(),
            cluster: String::new(),
            dry_run: false,
            total: 0,
            done: 0,
            crds_applied: 0,
        }
    }

    fn paint(&self, style: Style, text: &str) -> String {
        super::paint(self.color, style, text)
    }

    fn println(&mut self, text: &str) {
        if self.multi.is_hidden() {
            let _ = writeln!(self.err, "{text}");
        } else {
            // suspend() clears every bar, prints, then redraws: unlike
            // MultiProgress::println it leaves no stale copy of the top bar
            // in the scrollback when bars come and go between draws.
            self.multi.suspend(|| eprintln!("{text}"));
        }
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

    fn spinner(&self, template: &str) -> ProgressBar {
        let style = ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        // Hidden until attached: a bar drawn before MultiProgress::add
        // would paint itself straight onto stderr and leave a stale copy.
        ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden()).with_style(style)
    }

    /// Attaches `bar` (at `index`, or last) and starts its spinner.
    fn attach(&self, bar: ProgressBar, index: Option<usize>) -> ProgressBar {
        let bar = match index {
            Some(i) => self.multi.insert(i, bar),
            None => self.multi.add(bar),
        };
        if !self.multi.is_hidden() {
            bar.enable_steady_tick(TICK);
        }
        bar
    }

    fn update_top(&mut self) {
        if self.top.is_none() {
            let bar = self.spinner("{prefix:.bold} {msg} ({elapsed})");
            self.top = Some(self.attach(bar, Some(0)));
        }
        self.total = self.total.max(self.done);
        let dry = if self.dry_run { " (dry run)" } else { "" };
        let prefix = format!("{}{dry}", self.cluster);
        let message = format!(
            "{} of {} done",
            self.done,
            crate::duration::count(self.total, "release")
        );
        if let Some(top) = &self.top {
            top.set_prefix(prefix);
            top.set_message(message);
        }
    }

    fn set_live(&mut self, release: &ReleaseId, message: String) {
        let bar = match self.bars.get(release) {
            Some(bar) => bar.clone(),
            None => {
                let bar = self.spinner("  {spinner:.cyan} {prefix:.bold} {wide_msg} {elapsed:>4}");
                bar.set_prefix(release.to_string());
                let bar = self.attach(bar, None);
                self.bars.insert(release.clone(), bar.clone());
                bar
            }
        };
        bar.set_message(message);
    }

    fn end_phase(&mut self) {
        if let Some(bar) = self.phase.take() {
            bar.finish_and_clear();
            self.multi.remove(&bar);
        }
    }

    fn clear_bars(&mut self) {
        self.end_phase();
        for (_, bar) in self.bars.drain() {
            bar.finish_and_clear();
            self.multi.remove(&bar);
        }
        if let Some(top) = self.top.take() {
            top.finish_and_clear();
            self.multi.remove(&top);
        }
        let _ = self.multi.clear();
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
        if let Some(bar) = self.bars.remove(&result.release) {
            bar.finish_and_clear();
            self.multi.remove(&bar);
        }
        self.done += 1;
        self.update_top();
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
}

impl Reporter for ProgressReporter {
    fn report(&mut self, stamped: &Stamped) {
        let verbose = self.verbosity == Verbosity::Verbose;
        match &stamped.event {
            Event::RunStarted {
                cluster,
                releases,
                dry_run,
            } => {
                self.cluster = cluster.clone();
                self.dry_run = *dry_run;
                self.total = releases.len();
                self.update_top();
            }
            Event::PhaseStarted { phase } => {
                if *phase != Phase::Releases {
                    self.end_phase();
                    let bar = self.spinner("  {spinner:.cyan} {wide_msg} {elapsed:>4}");
                    bar.set_message(phase_label(*phase));
                    self.phase = Some(self.attach(bar, None));
                }
            }
            Event::PhaseFinished { phase, ok } => {
                if *phase != Phase::Releases {
                    self.end_phase();
                }
                if !ok {
                    let failed = self.paint(Style::new().red().bold(), "failed");
                    self.println(&format!("✗ {} phase {failed}", phase_label(*phase)));
                } else if *phase == Phase::Preflight {
                    self.println("✓ preflight checks passed");
                }
            }
            Event::CrdApplied { release, crd, .. } => {
                self.crds_applied += 1;
                let message = format!("crds: {} applied ({release}: {crd})", self.crds_applied);
                match &self.phase {
                    Some(bar) => bar.set_message(message),
                    None => self.set_live(release, message),
                }
            }
            // No line for a CRD phase with nothing in it.
            Event::CrdsEstablished { count: 0 } => {}
            Event::CrdsEstablished { count } => {
                self.println(&format!("✓ crds: {count} established"));
            }
            Event::PreflightStep { step } => match &self.phase {
                Some(bar) => bar.set_message(format!("preflight: {step}")),
                None => self.println(&format!("  preflight: {step}")),
            },
            Event::CrdDeleted {
                release,
                crd,
                change,
            } => {
                self.println(&format!("✓ crd {crd} {change} ({release})"));
            }
            Event::ReleaseStarted { release } => self.set_live(release, "started".into()),
            Event::ReleaseStep { release, step } => {
                self.tracker.step(release, step);
                self.set_live(release, step_label(step));
            }
            Event::ReleaseProgress { release, message } => {
                if self.tracker.progress(release, message) {
                    let live = match self.tracker.current_step(release) {
                        Some(step) => format!("{}: {message}", step_label(step)),
                        None => message.clone(),
                    };
                    self.set_live(release, live);
                }
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
            Event::Interrupting { running, grace } => {
                let text = format!(
                    "! interrupting: waiting up to {} for {} running release(s); Ctrl-C again stops at once",
                    fmt_duration(*grace),
                    running.len()
                );
                self.println(&text);
            }
            Event::RunFinished { summary } => {
                self.clear_bars();
                let table = render_summary(summary, &self.tracker.interrupted_in_helm);
                let _ = write!(self.out, "\n{table}");
                let _ = self.out.flush();
            }
        }
    }

    fn finish(&mut self) {
        self.clear_bars();
        let _ = self.out.flush();
        let _ = self.err.flush();
    }
}

impl Drop for ProgressReporter {
    /// Bars left behind by a reporter that never saw `finish` (a panic in the
    /// engine) would otherwise stay drawn over the shell prompt.
    fn drop(&mut self) {
        self.clear_bars();
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
            },
            Event::PhaseFinished {
                phase: Phase::Releases,
                ok: false,
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
        assert_eq!(r.done, 2);
        assert!(r.bars.is_empty() && r.top.is_none());
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
            prop_assert!(r.bars.is_empty());
        }
    }
}
