//! One line per event, prefixed with the time since the run started, for CI
//! logs, task runners and pipes. Everything (including the summary table)
//! goes to one stream so the log keeps its order; see the module docs.

use std::io::Write;

use console::Style;

use super::Verbosity;
use super::summary::{fmt_duration, render_summary_for};
use super::{Reporter, Tracker, phase_label, step_label};
use crate::event::{CrdChange, Event, Outcome, Stamped, Step};

pub struct PlainReporter {
    out: Box<dyn Write + Send>,
    verbosity: Verbosity,
    color: bool,
    tracker: Tracker,
    closed: bool,
}

impl PlainReporter {
    pub fn new(verbosity: Verbosity, out: Box<dyn Write + Send>, color: bool) -> Self {
        PlainReporter {
            out,
            verbosity,
            color,
            tracker: Tracker::default(),
            closed: false,
        }
    }

    fn paint(&self, style: Style, text: &str) -> String {
        super::paint(self.color, style, text)
    }

    /// The text of the event's line and any block indented under it; `None`
    /// when the verbosity hides the event.
    // One piece (tests/it/architecture.rs lists it): one match over the
    // event kinds, an arm per event.
    fn render(&mut self, event: &Event) -> Option<(String, Option<String>)> {
        let quiet = self.verbosity == Verbosity::Quiet;
        let verbose = self.verbosity == Verbosity::Verbose;
        let line = match event {
            Event::RunStarted {
                cluster,
                releases,
                dry_run,
                ..
            } if !quiet => {
                let dry = if *dry_run {
                    " (dry run: nothing will change)"
                } else {
                    ""
                };
                format!(
                    "cluster {cluster}: {}{dry}",
                    crate::plural::count(releases.len(), "release")
                )
            }
            Event::PhaseStarted { phase } if !quiet => {
                format!("{} phase started", phase_label(*phase))
            }
            Event::PhaseFinished {
                phase,
                stopped: true,
                ..
            } => {
                let stopped = self.paint(Style::new().yellow(), "stopped");
                format!("{} phase {stopped}", phase_label(*phase))
            }
            Event::PhaseFinished {
                phase, ok: true, ..
            } if !quiet => {
                format!("{} phase done", phase_label(*phase))
            }
            Event::PhaseFinished {
                phase, ok: false, ..
            } => {
                let failed = self.paint(Style::new().red().bold(), "failed");
                format!("{} phase {failed}", phase_label(*phase))
            }
            Event::CrdApplied {
                release,
                crd,
                change,
            } if !quiet && (verbose || *change != CrdChange::Unchanged) => {
                let change = match change {
                    CrdChange::Created => "created",
                    CrdChange::Updated => "updated",
                    CrdChange::Unchanged => "unchanged",
                    CrdChange::WouldApply => "would apply",
                };
                format!("{release}: crd {crd} {change}")
            }
            Event::CrdsEstablished { count } if !quiet && *count > 0 => {
                format!("crds: {count} established")
            }
            Event::PreflightStep { step } if !quiet => format!("preflight: {step}"),
            Event::GitopsScanned { .. } | Event::Guard { .. } | Event::LeftBehind { .. }
                if !quiet =>
            {
                super::protection_line(event)?
            }
            Event::CrdDeleted {
                release,
                crd,
                change,
            } if !quiet => {
                format!("{release}: crd {crd} {change}")
            }
            // "started", "checking" and "queued" say little in a log; -v shows them.
            Event::ReleaseStarted { release } if verbose => format!("{release}: started"),
            Event::ReleaseStep { release, step } => {
                self.tracker.step(release, step);
                if quiet || (!verbose && matches!(step, Step::Checking | Step::Queued)) {
                    return None;
                }
                format!("{release}: {}", step_label(step))
            }
            Event::ReleaseProgress {
                release, message, ..
            } => {
                if !self.tracker.progress(release, message) || quiet {
                    return None;
                }
                match self.tracker.current_step(release) {
                    Some(step) => format!("{release}: {}: {message}", step_label(step)),
                    None => format!("{release}: {message}"),
                }
            }
            Event::HookFinished {
                release,
                phase,
                hook,
                ok,
                duration,
                output,
            } if !quiet || !ok => {
                let hook = super::hook_label(*phase, hook);
                let block = output.clone().filter(|_| verbose || !ok);
                let line = if *ok {
                    format!("{release}: {hook} done in {}", fmt_duration(*duration))
                } else {
                    let failed = self.paint(Style::new().red().bold(), "failed");
                    format!(
                        "{release}: {hook} {failed} after {}",
                        fmt_duration(*duration)
                    )
                };
                return Some((line, block));
            }
            Event::ReleaseFinished {
                result,
                diagnostics_text,
                ..
            } => {
                self.tracker.finished(&result.release, result.outcome);
                if quiet && result.outcome != Outcome::Failed {
                    return None;
                }
                let (first, rest) = match result.message.as_deref() {
                    Some(m) => match m.split_once('\n') {
                        Some((first, rest)) => (Some(first), Some(rest)),
                        None => (Some(m), None),
                    },
                    None => (None, None),
                };
                let took = super::summary::took(result);
                let label = result.outcome.label();
                let mut line = match result.outcome {
                    Outcome::Failed => format!(
                        "{}: {} after {took}",
                        result.release,
                        self.paint(Style::new().red().bold(), label)
                    ),
                    Outcome::Skipped => format!(
                        "{}: {}",
                        result.release,
                        self.paint(Style::new().yellow(), label)
                    ),
                    Outcome::Interrupted => format!(
                        "{}: {} after {took}",
                        result.release,
                        self.paint(Style::new().yellow(), label)
                    ),
                    _ => format!(
                        "{}: {} in {took}",
                        result.release,
                        self.paint(Style::new().green(), label)
                    ),
                };
                if let Some(first) = first {
                    line = format!("{line}: {first}");
                }
                let block: Vec<&str> = rest
                    .into_iter()
                    .chain(diagnostics_text.as_deref())
                    .collect();
                let block = (!block.is_empty()).then(|| block.join("\n"));
                return Some((line, block));
            }
            Event::Warning { message } => {
                format!(
                    "{}: {message}",
                    self.paint(Style::new().yellow(), "warning")
                )
            }
            Event::Interrupting { running, grace } => {
                if running.is_empty() {
                    "interrupting: no release is running".to_string()
                } else {
                    let names: Vec<String> = running.iter().map(ToString::to_string).collect();
                    format!(
                        "interrupting: waiting up to {} for {} running release(s) to finish ({}); Ctrl-C again stops at once",
                        fmt_duration(*grace),
                        running.len(),
                        names.join(", ")
                    )
                }
            }
            _ => return None,
        };
        Some((line, None))
    }

    fn write(&mut self, text: &str) {
        if self.closed {
            return;
        }
        let written = self
            .out
            .write_all(text.as_bytes())
            .and_then(|()| self.out.flush());
        self.closed = written.is_err();
    }
}

impl Reporter for PlainReporter {
    fn report(&mut self, stamped: &Stamped) {
        if let Event::RunFinished { summary } = &stamped.event {
            let quiet = self.verbosity == Verbosity::Quiet;
            let table = render_summary_for(
                summary,
                &self.tracker.interrupted_in_helm,
                quiet,
                super::summary::stdout_width(),
            );
            self.write(&format!("\n{table}"));
            return;
        }
        let Some((line, block)) = self.render(&stamped.event) else {
            return;
        };
        let stamp = format!("[{:>6.1}s]", stamped.elapsed.as_secs_f64());
        let mut text = format!("{} {line}\n", self.paint(Style::new().dim(), &stamp));
        if let Some(block) = block {
            let indent = " ".repeat(stamp.chars().count() + 3);
            for l in block.lines() {
                text.push_str(format!("{indent}{l}").trim_end());
                text.push('\n');
            }
        }
        self.write(&text);
    }

    fn finish(&mut self) {
        let _ = self.out.flush();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use pretty_assertions::assert_eq;

    use super::*;
    use crate::event::{HookPhase, Phase, ReleaseResult, Step, Summary};
    use crate::release::ReleaseId;
    use crate::reporter::tests::{Shared, at};

    fn cilium() -> ReleaseId {
        ReleaseId::new("kube-system", "cilium")
    }
    fn coredns() -> ReleaseId {
        ReleaseId::new("kube-system", "coredns")
    }
    fn rollout() -> Step {
        Step::Hook {
            phase: HookPhase::Postsync,
            hook: "rollout of DaemonSet kube-system/cilium".into(),
        }
    }
    fn finished(release: ReleaseId, outcome: Outcome, ms: u64, message: Option<&str>) -> Event {
        Event::ReleaseFinished {
            result: ReleaseResult {
                release,
                outcome,
                duration: Duration::from_millis(ms),
                timing: crate::event::Timing {
                    run: Duration::from_millis(ms),
                    ..Default::default()
                },
                message: message.map(str::to_string),
            },
            diagnostics: None,
            diagnostics_text: None,
        }
    }

    /// A run where cilium installs and coredns fails its rollout.
    fn script() -> Vec<Stamped> {
        let failed = Event::ReleaseFinished {
            result: ReleaseResult {
                release: coredns(),
                outcome: Outcome::Failed,
                duration: Duration::from_millis(30_000),
                timing: crate::event::Timing {
                    run: Duration::from_millis(30_000),
                    ..Default::default()
                },
                message: Some(
                    "hook rollout of Deployment kube-system/coredns timed out after 30s".into(),
                ),
            },
            diagnostics: Some(serde_json::json!({"pods": []})),
            diagnostics_text: Some(
                "pod coredns-abc: Pending\n  event: 0/1 nodes are available".into(),
            ),
        };
        vec![
            at(
                0,
                Event::RunStarted {
                    cluster: "infra".into(),
                    releases: vec![cilium(), coredns()],
                    dry_run: false,
                    needs: Default::default(),
                },
            ),
            at(
                10,
                Event::PhaseStarted {
                    phase: Phase::Releases,
                },
            ),
            at(20, Event::ReleaseStarted { release: cilium() }),
            at(
                30,
                Event::ReleaseStep {
                    release: cilium(),
                    step: Step::Installing,
                },
            ),
            at(
                20_000,
                Event::ReleaseStep {
                    release: cilium(),
                    step: rollout(),
                },
            ),
            at(
                21_000,
                Event::ReleaseProgress {
                    release: cilium(),
                    message: "1 of 3 updated pods available".into(),
                    tally: None,
                },
            ),
            at(
                22_000,
                Event::ReleaseProgress {
                    release: cilium(),
                    message: "1 of 3 updated pods available".into(),
                    tally: None,
                },
            ),
            at(
                41_200,
                Event::ReleaseProgress {
                    release: cilium(),
                    message: "2 of 3 updated pods available".into(),
                    tally: None,
                },
            ),
            at(
                63_000,
                Event::HookFinished {
                    release: cilium(),
                    phase: HookPhase::Postsync,
                    hook: "rollout of DaemonSet kube-system/cilium".into(),
                    ok: true,
                    duration: Duration::from_millis(43_000),
                    output: None,
                },
            ),
            at(63_000, finished(cilium(), Outcome::Installed, 63_000, None)),
            at(63_100, Event::ReleaseStarted { release: coredns() }),
            at(93_100, failed),
            at(
                93_200,
                Event::PhaseFinished {
                    phase: Phase::Releases,
                    ok: false,
                    stopped: false,
                },
            ),
            at(
                93_300,
                Event::RunFinished {
                    summary: Summary {
                        phases: None,
                        cluster: "infra".into(),
                        ok: false,
                        dry_run: false,
                        duration: Duration::from_millis(93_300),
                        releases: vec![
                            ReleaseResult {
                                release: cilium(),
                                outcome: Outcome::Installed,
                                duration: Duration::from_millis(63_000),
                                timing: Default::default(),
                                message: None,
                            },
                            ReleaseResult {
                                release: coredns(),
                                outcome: Outcome::Failed,
                                duration: Duration::from_millis(30_000),
                                timing: Default::default(),
                                message: Some("rollout timed out".into()),
                            },
                        ],
                        critical_path: vec![cilium(), coredns()],
                        root_failures: vec![coredns()],
                        interrupted: false,
                        lock_lost: None,
                    },
                },
            ),
        ]
    }

    fn run(verbosity: Verbosity, events: &[Stamped]) -> String {
        let out = Shared::default();
        let mut reporter = PlainReporter::new(verbosity, Box::new(out.clone()), false);
        for event in events {
            reporter.report(event);
        }
        reporter.finish();
        out.text()
    }

    #[test]
    fn one_line_per_event_with_elapsed_time() {
        assert_eq!(
            run(Verbosity::Normal, &script()),
            "\
[   0.0s] cluster infra: 2 releases
[   0.0s] releases phase started
[   0.0s] kube-system/cilium: installing
[  20.0s] kube-system/cilium: hook rollout of DaemonSet kube-system/cilium
[  21.0s] kube-system/cilium: hook rollout of DaemonSet kube-system/cilium: 1 of 3 updated pods available
[  41.2s] kube-system/cilium: hook rollout of DaemonSet kube-system/cilium: 2 of 3 updated pods available
[  63.0s] kube-system/cilium: hook rollout of DaemonSet kube-system/cilium done in 43.0s
[  63.0s] kube-system/cilium: installed in 63.0s
[  93.1s] kube-system/coredns: failed after 30.0s: hook rollout of Deployment kube-system/coredns timed out after 30s
            pod coredns-abc: Pending
              event: 0/1 nodes are available
[  93.2s] releases phase failed

release              outcome      run  queued  message
kube-system/cilium   installed  63.0s    0.0s
kube-system/coredns  failed     30.0s    0.0s  rollout timed out

critical path: kube-system/cilium (63.0s) → kube-system/coredns (30.0s) = 93.0s
infra: 1 installed, 1 failed in 93.3s
root failure: kube-system/coredns: rollout timed out
"
        );
    }

    #[test]
    fn quiet_shows_only_failures_and_the_summary() {
        let text = run(Verbosity::Quiet, &script());
        let lines: Vec<&str> = text.lines().take(5).collect();
        assert_eq!(
            lines,
            [
                "[  93.1s] kube-system/coredns: failed after 30.0s: hook rollout of Deployment kube-system/coredns timed out after 30s",
                "            pod coredns-abc: Pending",
                "              event: 0/1 nodes are available",
                "[  93.2s] releases phase failed",
                "",
            ]
        );
        assert!(text.contains("root failure: kube-system/coredns"));
    }

    #[test]
    fn hook_output_only_on_failure_unless_verbose() {
        let hook = |ok| {
            at(
                5_000,
                Event::HookFinished {
                    release: cilium(),
                    phase: HookPhase::Presync,
                    hook: "command kubectl apply".into(),
                    ok,
                    duration: Duration::from_millis(1_500),
                    output: Some("configmap/x created\n".into()),
                },
            )
        };
        assert_eq!(
            run(Verbosity::Normal, &[hook(true)]),
            "[   5.0s] kube-system/cilium: presync hook command kubectl apply done in 1.5s\n"
        );
        assert_eq!(
            run(Verbosity::Verbose, &[hook(true)]),
            "[   5.0s] kube-system/cilium: presync hook command kubectl apply done in 1.5s\n            configmap/x created\n"
        );
        assert_eq!(
            run(Verbosity::Quiet, &[hook(false)]),
            "[   5.0s] kube-system/cilium: presync hook command kubectl apply failed after 1.5s\n            configmap/x created\n"
        );
    }

    #[test]
    fn skips_interruptions_and_unknown_releases() {
        let events = [
            at(
                1_000,
                Event::ReleaseProgress {
                    release: coredns(),
                    message: "waiting".into(),
                    tally: None,
                },
            ),
            at(
                2_000,
                finished(
                    coredns(),
                    Outcome::Skipped,
                    0,
                    Some("needs kube-system/cilium, which failed"),
                ),
            ),
            at(
                3_000,
                Event::Interrupting {
                    running: vec![cilium()],
                    grace: Duration::from_secs(30),
                },
            ),
            at(4_000, finished(cilium(), Outcome::Interrupted, 4_000, None)),
        ];
        assert_eq!(
            run(Verbosity::Normal, &events),
            "\
[   1.0s] kube-system/coredns: waiting
[   2.0s] kube-system/coredns: skipped: needs kube-system/cilium, which failed
[   3.0s] interrupting: waiting up to 30.0s for 1 running release(s) to finish (kube-system/cilium); Ctrl-C again stops at once
[   4.0s] kube-system/cilium: interrupted after 4.0s
"
        );
    }

    #[test]
    fn colours_only_when_enabled() {
        let events = [at(0, finished(cilium(), Outcome::Failed, 0, Some("boom")))];
        assert!(!run(Verbosity::Normal, &events).contains('\u{1b}'));
        let out = Shared::default();
        let mut reporter = PlainReporter::new(Verbosity::Normal, Box::new(out.clone()), true);
        reporter.report(&events[0]);
        assert!(out.text().contains("\u{1b}["));
    }
}
