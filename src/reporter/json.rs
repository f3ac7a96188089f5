//! `--output json`: JSON Lines on stdout, one object per event, flushed as it
//! happens so a consumer (`jq`, a provisioning script) sees progress live.
//! The last line is `run_finished`, carrying the summary (docs/design.md#run_finished).
//! `--output yaml`: the same events, each a YAML document starting with `---`.

use std::io::Write;

use super::Reporter;
use crate::event::Stamped;
use crate::output::Format;

pub struct JsonReporter {
    out: Box<dyn Write + Send>,
    format: Format,
    /// The reader went away (`| head`): stop writing, the run goes on.
    closed: bool,
}

impl JsonReporter {
    pub fn new(out: Box<dyn Write + Send>, format: Format) -> Self {
        JsonReporter {
            out,
            format,
            closed: false,
        }
    }
}

impl Reporter for JsonReporter {
    fn report(&mut self, event: &Stamped) {
        if self.closed {
            return;
        }
        let Ok(value) = serde_json::to_value(event) else {
            return;
        };
        let text = crate::output::event(self.format, &value);
        let written = self
            .out
            .write_all(text.as_bytes())
            .and_then(|()| self.out.flush());
        self.closed = written.is_err();
    }

    fn finish(&mut self) {
        let _ = self.out.flush();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::Value;

    use super::*;
    use crate::event::{Event, Outcome, ReleaseResult, Step, Summary};
    use crate::release::ReleaseId;
    use crate::reporter::tests::{Shared, at};

    #[test]
    fn one_parseable_object_per_event_ending_with_the_summary() {
        let out = Shared::default();
        let mut reporter = JsonReporter::new(Box::new(out.clone()), Format::Json);
        let cilium = ReleaseId::new("kube-system", "cilium");
        let result = ReleaseResult {
            release: cilium.clone(),
            outcome: Outcome::Installed,
            duration: Duration::from_millis(63_000),
            timing: Default::default(),
            message: None,
        };
        let events = [
            Event::RunStarted {
                cluster: "infra".into(),
                releases: vec![cilium.clone()],
                dry_run: false,
                needs: Default::default(),
            },
            Event::ReleaseStarted {
                release: cilium.clone(),
            },
            Event::ReleaseStep {
                release: cilium.clone(),
                step: Step::Waiting {
                    what: "DaemonSet kube-system/cilium".into(),
                },
            },
            Event::ReleaseFinished {
                result: result.clone(),
                diagnostics: None,
                diagnostics_text: None,
            },
            Event::RunFinished {
                summary: Summary {
                    phases: None,
                    cluster: "infra".into(),
                    ok: true,
                    dry_run: false,
                    duration: Duration::from_millis(63_100),
                    releases: vec![result],
                    critical_path: vec![cilium.clone()],
                    root_failures: vec![],
                    interrupted: false,
                    lock_lost: None,
                },
            },
        ];
        for (i, event) in events.into_iter().enumerate() {
            reporter.report(&at(i as u64 * 1000, event));
        }
        reporter.finish();

        let text = out.text();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let tags: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
        assert_eq!(
            tags,
            [
                "run_started",
                "release_started",
                "release_step",
                "release_finished",
                "run_finished"
            ]
        );
        assert_eq!(lines[2]["step"], "waiting");
        assert_eq!(lines[2]["what"], "DaemonSet kube-system/cilium");
        assert_eq!(lines[3]["release"], "kube-system/cilium");
        assert_eq!(lines[3]["outcome"], "installed");
        assert_eq!(lines[4]["elapsedMs"], 4000);
        assert_eq!(lines[4]["schemaVersion"], 1);
        let keys: Vec<&String> = lines[4].as_object().unwrap().keys().collect();
        assert_eq!(keys[..4], ["time", "elapsedMs", "event", "schemaVersion"]);
        let summary = &lines[4]["summary"];
        assert_eq!(summary["releases"][0]["outcome"], "installed");
        assert_eq!(summary["releases"][0]["duration"], 63_000);
        assert_eq!(summary["criticalPath"][0], "kube-system/cilium");
        assert_eq!(summary["releases"][0]["queuedSlot"], 0);
    }

    #[test]
    fn a_counted_rollout_and_the_needs_are_in_the_events() {
        let out = Shared::default();
        let mut reporter = JsonReporter::new(Box::new(out.clone()), Format::Json);
        let cilium = ReleaseId::new("kube-system", "cilium");
        let coredns = ReleaseId::new("kube-system", "coredns");
        let events = [
            Event::RunStarted {
                cluster: "infra".into(),
                releases: vec![cilium.clone(), coredns.clone()],
                dry_run: false,
                needs: [(coredns.clone(), vec![cilium.clone()])].into(),
            },
            Event::ReleaseProgress {
                release: cilium.clone(),
                message: "1 of 3 updated pods available".into(),
                tally: Some(crate::event::Tally {
                    subject: "DaemonSet/cilium".into(),
                    done: 1,
                    total: 3,
                    unit: "ready",
                }),
            },
            Event::ReleaseProgress {
                release: cilium.clone(),
                message: "API server error, retrying: 503".into(),
                tally: None,
            },
        ];
        for event in events {
            reporter.report(&at(0, event));
        }
        let lines: Vec<Value> = out
            .text()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            lines[0]["needs"],
            serde_json::json!({"kube-system/coredns": ["kube-system/cilium"]})
        );
        assert_eq!(
            lines[1]["tally"],
            serde_json::json!({"subject": "DaemonSet/cilium", "done": 1, "total": 3, "unit": "ready"})
        );
        assert!(lines[2].get("tally").is_none(), "{}", lines[2]);
    }

    #[test]
    fn a_closed_reader_does_not_stop_the_run() {
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut reporter = JsonReporter::new(Box::new(Broken), Format::Json);
        reporter.report(&at(
            0,
            Event::Warning {
                message: "x".into(),
            },
        ));
        reporter.report(&at(
            1,
            Event::Warning {
                message: "y".into(),
            },
        ));
        assert!(reporter.closed);
    }
}
