//! What the engine reports while it works. The engine knows nothing about
//! terminals: it emits these, and a reporter (progress bars, plain lines, JSON
//! Lines) renders them.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::release::ReleaseId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Prerequisites, lock and live ownership checks.
    Preflight,
    Crds,
    Releases,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HookPhase {
    Presync,
    Postsync,
}

/// The one wording of a hook phase, for messages and both reporters.
impl std::fmt::Display for HookPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HookPhase::Presync => "presync",
            HookPhase::Postsync => "postsync",
        })
    }
}

/// What a running release is doing right now (the live line of a reporter).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(
    tag = "step",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum Step {
    /// Comparing the deployed release with the desired one.
    Checking,
    /// Waiting for a free helm slot (`--concurrency`).
    Queued,
    Installing,
    Upgrading,
    /// `destroy`: helm uninstall is running.
    Uninstalling,
    Hook {
        phase: HookPhase,
        hook: String,
    },
    /// `wait: true`: tracking the release's workloads.
    Waiting {
        what: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Installed,
    Upgraded,
    Unchanged,
    /// A handover release Flux has adopted: left alone (apply: not upgraded,
    /// readiness hooks still run; destroy: not uninstalled).
    Adopted,
    Failed,
    Skipped,
    Interrupted,
    /// `--dry-run`: what would have happened.
    WouldInstall,
    WouldUpgrade,
    /// `destroy`: the release was uninstalled and its ledger entry removed.
    Uninstalled,
    /// `destroy`: the release was not installed; nothing to do.
    Absent,
    /// `destroy --dry-run`.
    WouldUninstall,
}

impl Outcome {
    pub fn is_success(self) -> bool {
        matches!(
            self,
            Outcome::Installed
                | Outcome::Upgraded
                | Outcome::Unchanged
                | Outcome::Adopted
                | Outcome::WouldInstall
                | Outcome::WouldUpgrade
                | Outcome::Uninstalled
                | Outcome::Absent
                | Outcome::WouldUninstall
        )
    }

    pub fn label(self) -> &'static str {
        match self {
            Outcome::Installed => "installed",
            Outcome::Upgraded => "upgraded",
            Outcome::Unchanged => "unchanged",
            Outcome::Adopted => "adopted by Flux",
            Outcome::Failed => "failed",
            Outcome::Skipped => "skipped",
            Outcome::Interrupted => "interrupted",
            Outcome::WouldInstall => "would install",
            Outcome::WouldUpgrade => "would upgrade",
            Outcome::Uninstalled => "uninstalled",
            Outcome::Absent => "absent",
            Outcome::WouldUninstall => "would uninstall",
        }
    }

    /// An outcome only `destroy` produces.
    pub fn is_removal(self) -> bool {
        matches!(
            self,
            Outcome::Uninstalled | Outcome::Absent | Outcome::WouldUninstall
        )
    }
}

pub(crate) use crate::kube::apply::CrdChange;
pub(crate) use crate::kube::ready::Tally;

/// `destroy --crds`: what happened to one CRD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CrdRemoval {
    Deleted,
    /// It was not in the cluster.
    Absent,
    /// `--dry-run`.
    WouldDelete,
}

impl std::fmt::Display for CrdRemoval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CrdRemoval::Deleted => "deleted",
            CrdRemoval::Absent => "absent",
            CrdRemoval::WouldDelete => "would delete",
        })
    }
}

/// Where a release's time went (docs/design.md#apply-and-destroy-events):
/// `duration` = `run` + `queuedSlot`; `queuedNeeds` came before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timing {
    /// Working: the release step without the wait for a helm slot.
    #[serde(serialize_with = "millis")]
    pub run: Duration,
    /// Waiting for a helm slot (`--concurrency`) inside the step.
    #[serde(serialize_with = "millis")]
    pub queued_slot: Duration,
    /// From the start of the release phase until the step started: waiting
    /// for the releases it needs.
    #[serde(serialize_with = "millis")]
    pub queued_needs: Duration,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseResult {
    pub release: ReleaseId,
    pub outcome: Outcome,
    #[serde(serialize_with = "millis")]
    pub duration: Duration,
    #[serde(flatten)]
    pub timing: Timing,
    /// Why it failed or was skipped, or what a dry run would change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub cluster: String,
    pub ok: bool,
    pub dry_run: bool,
    #[serde(serialize_with = "millis")]
    pub duration: Duration,
    /// Every release of the run, in execution order.
    pub releases: Vec<ReleaseResult>,
    /// The chain of releases that determined the run's length.
    pub critical_path: Vec<ReleaseId>,
    /// Failures that caused every other failure and skip.
    pub root_failures: Vec<ReleaseId>,
    pub interrupted: bool,
    /// Set when the cluster lock was lost mid-run (why): the run stopped
    /// starting work, as on an interrupt, but it is a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lock_lost: Option<String>,
    /// `apply`: how long each phase took; `duration` is then the whole run,
    /// from the command's start (prerequisites and preflight included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phases: Option<PhaseTimes>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseTimes {
    /// Prerequisites (helm, the API server) and preflight (lock, live
    /// checks, ledger, CRD renders).
    #[serde(serialize_with = "millis")]
    pub preflight: Duration,
    /// Applying the CRDs and waiting for them to be Established, and the guard.
    #[serde(serialize_with = "millis")]
    pub crds: Duration,
    #[serde(serialize_with = "millis")]
    pub releases: Duration,
}

/// What a finished run means for its command's exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    Interrupted,
    /// The cluster lock was lost (why), so the run stopped early.
    LockLost(String),
    /// `releases` failed first (empty: the run failed outside a release,
    /// e.g. CRDs that could not be deleted).
    Failed {
        releases: String,
    },
}

impl Summary {
    /// Marks a run whose cluster lock was lost as failed.
    pub fn with_lock_lost(mut self, lost: Option<String>) -> Summary {
        if lost.is_some() {
            self.ok = false;
        }
        self.lock_lost = lost;
        self
    }

    pub fn verdict(&self) -> Verdict {
        if let Some(why) = &self.lock_lost {
            Verdict::LockLost(why.clone())
        } else if self.ok {
            Verdict::Ok
        } else if self.interrupted {
            Verdict::Interrupted
        } else {
            let releases: Vec<String> =
                self.root_failures.iter().map(ToString::to_string).collect();
            Verdict::Failed {
                releases: releases.join(", "),
            }
        }
    }
}

/// Event names are snake_case values (`run_finished`), their fields
/// camelCase keys, as every key of the JSON output (docs/design.md#json-shapes).
#[derive(Debug, Clone, Serialize)]
#[serde(
    tag = "event",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum Event {
    RunStarted {
        cluster: String,
        releases: Vec<ReleaseId>,
        dry_run: bool,
        /// `apply`: what each release needs (only releases with needs), so
        /// a display can tell what a queued release is waiting on.
        #[serde(skip_serializing_if = "BTreeMap::is_empty")]
        needs: BTreeMap<ReleaseId, Vec<ReleaseId>>,
    },
    PhaseStarted {
        phase: Phase,
    },
    PhaseFinished {
        phase: Phase,
        ok: bool,
        /// The run was stopped (Ctrl-C, `--timeout`) before the phase was
        /// done: what did not finish was stopped, not failed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        stopped: bool,
    },
    /// What preflight just did, as it happens (`helm 3.16.2`, `context
    /// admin@infra`, `lock taken`, `ownership: 7 releases checked`, ...).
    PreflightStep {
        step: String,
    },
    CrdApplied {
        release: ReleaseId,
        crd: String,
        change: CrdChange,
    },
    /// One CRD of the CRD phase is Established (they are waited for in
    /// parallel, after every `crd_applied`).
    CrdEstablished {
        release: ReleaseId,
        crd: String,
    },
    CrdsEstablished {
        count: usize,
    },
    /// `destroy --crds`, after every release is gone.
    CrdDeleted {
        release: ReleaseId,
        crd: String,
        change: CrdRemoval,
    },
    ReleaseStarted {
        release: ReleaseId,
    },
    ReleaseStep {
        release: ReleaseId,
        #[serde(flatten)]
        step: Step,
    },
    /// Latest readiness detail while a hook waits ("1 of 3 pods available").
    ReleaseProgress {
        release: ReleaseId,
        message: String,
        /// How far a rollout is, counted (`rollout DaemonSet/cilium 1/3 ready`).
        #[serde(skip_serializing_if = "Option::is_none")]
        tally: Option<Tally>,
    },
    HookFinished {
        release: ReleaseId,
        phase: HookPhase,
        hook: String,
        ok: bool,
        #[serde(serialize_with = "millis")]
        duration: Duration,
        /// Command output (on failure, or always with -v).
        #[serde(skip_serializing_if = "Option::is_none")]
        output: Option<String>,
    },
    ReleaseFinished {
        #[serde(flatten)]
        result: ReleaseResult,
        /// Pods, container states and events of a workload that did not become ready.
        #[serde(skip_serializing_if = "Option::is_none")]
        diagnostics: Option<serde_json::Value>,
        /// The same, rendered for people.
        #[serde(skip_serializing_if = "Option::is_none")]
        diagnostics_text: Option<String>,
    },
    Warning {
        message: String,
    },
    /// What `apply` found of Flux in git before anything changed
    /// (docs/design.md#admission-guard): the GitOps tree of
    /// cluster.yaml's `flux:` scanned, with no Flux object that would
    /// manage a release bootstrap owns (else the run was refused).
    GitopsScanned {
        /// `ROOT` and `ENTRYPOINT` as scanned; `None`: the cluster has no
        /// `flux:`, and nothing in git was checked.
        #[serde(skip_serializing_if = "Option::is_none")]
        root: Option<std::path::PathBuf>,
        #[serde(skip_serializing_if = "Option::is_none")]
        entrypoint: Option<String>,
        files: usize,
        kustomizations: usize,
        helm_releases: usize,
    },
    /// The admission guard that denies Flux HelmReleases for bootstrap's
    /// releases in the cluster, once `apply` applied it (or why not).
    Guard {
        policy: String,
        state: GuardState,
    },
    /// `destroy` of a whole cluster: what stays in the cluster on purpose
    /// (the admission guard, the ledger, the CRD record, the lock's Lease,
    /// the CRDs without `--crds`) and the command that removes it.
    LeftBehind {
        objects: Vec<String>,
        remove: String,
    },
    /// First SIGINT/SIGTERM: no new work starts; running work gets a grace period.
    Interrupting {
        running: Vec<ReleaseId>,
        #[serde(serialize_with = "millis")]
        grace: Duration,
    },
    RunFinished {
        summary: Summary,
    },
}

/// What became of the admission guard in one `apply`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardState {
    Installed,
    Updated,
    Unchanged,
    /// `--dry-run`: the API server accepted it without keeping it.
    WouldApply,
    /// `guard: false` in cluster.yaml.
    Off,
    /// The cluster does not serve ValidatingAdmissionPolicy (< 1.30).
    Unsupported,
}

/// An event with the time it happened. Its JSON is `time`, `elapsedMs`,
/// `event`, `schemaVersion`, then the event's own fields
/// (docs/design.md#apply-and-destroy-events).
#[derive(Debug, Clone)]
pub struct Stamped {
    pub time: SystemTime,
    /// Since the command started: the same origin as the summary's
    /// `duration`, so no event says less time passed than the summary.
    pub elapsed: Duration,
    pub event: Event,
}

impl Serialize for Stamped {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeMap};
        let serde_json::Value::Object(fields) =
            serde_json::to_value(&self.event).map_err(S::Error::custom)?
        else {
            return Err(S::Error::custom("an event is a JSON object"));
        };
        let mut map = s.serialize_map(Some(fields.len() + 3))?;
        map.serialize_entry(
            "time",
            &humantime::format_rfc3339_millis(self.time).to_string(),
        )?;
        map.serialize_entry("elapsedMs", &as_millis(self.elapsed))?;
        for (key, value) in &fields {
            map.serialize_entry(key, value)?;
            if key == "event" {
                map.serialize_entry(
                    crate::output::SCHEMA_VERSION_KEY,
                    &crate::output::SCHEMA_VERSION,
                )?;
            }
        }
        map.end()
    }
}

/// A duration as the integer milliseconds of the JSON output.
pub(crate) fn as_millis(d: Duration) -> u64 {
    d.as_millis().try_into().unwrap_or(u64::MAX)
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(as_millis(*d))
}

/// Where the engine sends events; cheap to clone into every task.
#[derive(Debug, Clone)]
pub(crate) struct Emitter {
    started: std::time::Instant,
    tx: tokio::sync::mpsc::UnboundedSender<Stamped>,
    /// The releases started and not finished, as the events said: what
    /// an outage warning names as in flight.
    running: std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<ReleaseId>>>,
}

impl Emitter {
    /// An emitter whose events' `elapsed` counts from `started` (the
    /// command's start, which the summary's `duration` counts from too).
    pub(crate) fn since(
        started: std::time::Instant,
    ) -> (Emitter, tokio::sync::mpsc::UnboundedReceiver<Stamped>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (
            Emitter {
                started,
                tx,
                running: Default::default(),
            },
            rx,
        )
    }

    /// The releases started and not yet finished.
    pub(crate) fn running(&self) -> Vec<ReleaseId> {
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        running.iter().cloned().collect()
    }

    pub(crate) fn emit(&self, event: Event) {
        match &event {
            Event::ReleaseStarted { release } => {
                let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
                running.insert(release.clone());
            }
            Event::ReleaseFinished { result, .. } => {
                let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
                running.remove(&result.release);
            }
            _ => {}
        }
        // The reporter is gone only when the run is over; nothing to do then.
        let _ = self.tx.send(Stamped {
            time: SystemTime::now(),
            elapsed: self.started.elapsed(),
            event,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an outage warning names as in flight: started, not finished.
    #[test]
    fn the_emitter_knows_which_releases_are_running() {
        let (events, _rx) = Emitter::since(std::time::Instant::now());
        let id = |name: &str| ReleaseId {
            namespace: "kube-system".into(),
            name: name.into(),
        };
        events.emit(Event::ReleaseStarted {
            release: id("cilium"),
        });
        events.emit(Event::ReleaseStarted {
            release: id("coredns"),
        });
        assert_eq!(events.running(), [id("cilium"), id("coredns")]);
        events.emit(Event::ReleaseFinished {
            result: ReleaseResult {
                release: id("cilium"),
                outcome: Outcome::Installed,
                duration: Duration::ZERO,
                timing: Timing::default(),
                message: None,
            },
            diagnostics: None,
            diagnostics_text: None,
        });
        assert_eq!(events.clone().running(), [id("coredns")]);
    }
}
