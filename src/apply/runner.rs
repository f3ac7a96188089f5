//! One release step: compare with what is deployed, presync hooks, helm
//! upgrade --install, postsync hooks, ledger. The scheduler decides when.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::error::one_line;
use crate::event::{Emitter, Event, HookPhase, Outcome, Step};
use crate::helm::{DeployedRelease, Helm, HelmError, InstallRequest};
use crate::hooks::{self, HookEnv};
use crate::kube::KubeTarget;
use crate::kube::lock::{LockCheck, Predecessor};
use crate::ledger::{self, Entry, Ledger};
use crate::release::{Hook, HookAction, Release, ReleaseId};
use crate::scheduler::{Runner, StepResult};
use crate::stop::{Stop, StopSignal, stopped};

/// Added to the helm timeout of a run that died before its release record
/// counts as abandoned: helm's `--timeout` bounds each of its waits, not the
/// whole command.
pub const HELM_SETTLE: std::time::Duration = std::time::Duration::from_secs(60);

pub struct ReleaseRunner<H: Helm> {
    pub helm: Arc<H>,
    pub target: KubeTarget,
    pub hooks: HookEnv,
    pub ledger: Option<Ledger>,
    /// Ledger entries as read before the run started.
    pub recorded: Arc<BTreeMap<String, Entry>>,
    /// The ledger's digest key (docs/design.md#ledger); `None` only in a dry
    /// run on a cluster no apply has recorded in yet.
    pub digest_key: Option<ledger::DigestKey>,
    /// Every release `helm list` showed before the run, in any state, with
    /// its chart and version (we hold the lock since, so it is current for
    /// the releases of this run): no release step asks helm again, a whole
    /// helm process per release on the critical path. `None`: unknown, ask.
    pub listed: Option<Arc<BTreeMap<ReleaseId, DeployedRelease>>>,
    /// Handover releases a Flux HelmRelease has adopted, with its
    /// `namespace/name`: never upgraded again (docs/design.md#handover).
    pub adopted: Arc<BTreeMap<ReleaseId, String>>,
    pub events: Emitter,
    /// `--concurrency`: parallel helm operations (hooks don't hold a slot).
    pub helm_slots: Arc<Semaphore>,
    pub dry_run: bool,
    /// `--api-versions` for the dry run's renders: what the CRD phase serves.
    pub api_versions: Arc<Vec<String>>,
    /// The run whose expired lock this run (or an earlier run, which passed
    /// it on) took over: a release it left `pending-install` is installed
    /// afresh once no helm of that run can still be working on it
    /// (docs/design.md#live-refusal-rules).
    pub left_by: Option<Predecessor>,
    /// Set when a release `left_by` left pending is refused for now (a helm
    /// of that run may still be working on it): the released Lease passes
    /// that run on to the next, which would otherwise not know whose it is.
    pub left_for_later: Arc<std::sync::atomic::AtomicBool>,
    /// Checked before a release starts and before each ledger write; `None`
    /// without a lock (a dry run).
    pub lock: Option<LockCheck>,
    pub force: bool,
    pub verbose: bool,
    /// The cluster config being applied, recorded in each ledger entry.
    pub cluster: String,
}

enum Change {
    Install,
    /// Why; `content`: because the chart, version or values differ (what
    /// the diff shows), not for another reason (`--force`, the ledger).
    Upgrade {
        why: String,
        content: bool,
    },
    Unchanged,
    /// A handover release Flux has adopted (through this HelmRelease).
    Adopted(String),
}

impl<H: Helm + 'static> Runner for ReleaseRunner<H> {
    async fn run(&self, release: Arc<Release>, stop: StopSignal) -> StepResult {
        let mut queued = std::time::Duration::ZERO;
        let mut result = self.step(&release, stop, &mut queued).await;
        result.queued = queued;
        result
    }
}

impl<H: Helm> ReleaseRunner<H> {
    fn step_event(&self, release: &Release, step: Step) {
        self.events.emit(Event::ReleaseStep {
            release: release.id.clone(),
            step,
        });
    }

    /// `queued`: set to the time spent waiting for a helm slot.
    async fn step(
        &self,
        release: &Release,
        stop: StopSignal,
        queued: &mut std::time::Duration,
    ) -> StepResult {
        let deadline = Instant::now() + release.budget();
        if let Err(result) = self.lock_held("not started").await {
            return result;
        }
        self.step_event(release, Step::Checking);
        let change = match self.compare(release).await {
            Ok(change) => change,
            Err(result) => return result,
        };
        if self.dry_run {
            return match change {
                Change::Install => StepResult {
                    message: Some(self.describe(release, None).await.unwrap_or_else(|| {
                        format!(
                            "would install {} {}",
                            release.chart_label(),
                            release.version_label()
                        )
                    })),
                    ..StepResult::new(Outcome::WouldInstall)
                },
                Change::Upgrade { why, content } => StepResult {
                    message: Some(
                        self.describe(release, (!content).then(|| why.clone()))
                            .await
                            .unwrap_or_else(|| format!("would upgrade: {why}")),
                    ),
                    ..StepResult::new(Outcome::WouldUpgrade)
                },
                Change::Unchanged => StepResult {
                    message: self
                        .commands_changed(release)
                        .then(|| "would run its command hooks again: their definition changed since they last ran".to_string()),
                    ..StepResult::new(Outcome::Unchanged)
                },
                Change::Adopted(by) => adopted(&by),
            };
        }
        if let Change::Unchanged | Change::Adopted(_) = change {
            return self.unchanged(release, &change, deadline, stop).await;
        }

        for hook in &release.hooks.presync {
            if let Err(result) = self
                .hook(release, HookPhase::Presync, hook, deadline, stop.clone())
                .await
            {
                return result;
            }
        }

        let Some(chart) = release.chart() else {
            return StepResult::failed("has no chart to install");
        };
        self.step_event(release, Step::Queued);
        // Its chart first (docs/design.md#chart-cache; done already unless
        // the download is slow), so no helm slot is held during a download;
        // a failed fetch is helm's error below.
        tokio::select! {
            () = self.helm.prefetch(vec![chart.clone()]) => {}
            _ = stopped(stop.clone(), Stop::Graceful) => {
                return interrupted("interrupted while its chart was being fetched; nothing was changed for this release");
            }
        }
        let waiting = Instant::now();
        let permit = tokio::select! {
            permit = self.helm_slots.clone().acquire_owned() => permit.ok(),
            _ = stopped(stop.clone(), Stop::Graceful) => {
                *queued = waiting.elapsed();
                return interrupted("interrupted while waiting for a helm slot; nothing was changed for this release");
            }
        };
        *queued = waiting.elapsed();
        if let Err(result) = self.lock_held("helm not started").await {
            return result;
        }
        let upgrading = matches!(change, Change::Upgrade { .. });
        self.step_event(
            release,
            if upgrading {
                Step::Upgrading
            } else {
                Step::Installing
            },
        );
        let labels = ledger::owner_labels(release.ownership);
        let remaining = deadline.saturating_duration_since(Instant::now());
        let request = InstallRequest {
            release: &release.id,
            chart,
            values: &release.values,
            secrets: &release.secrets,
            skip_crds: release.crds == crate::release::CrdPolicy::Bootstrap,
            timeout: remaining,
            labels: &labels,
            flags: &release.helm,
        };
        let installed = self
            .helm
            .upgrade_install(&self.target, &request, stop.clone())
            .await;
        drop(permit);
        match installed {
            Ok(()) => {}
            Err(HelmError::NotStarted { .. }) => {
                return interrupted(
                    "interrupted before helm started; nothing was changed for this release",
                );
            }
            Err(HelmError::Stopped { .. }) => {
                return interrupted(format!(
                    "helm was stopped mid-operation; the release may be left pending-{}: run `bootstrap apply` again, and if helm reports another operation in progress, {}",
                    if upgrading { "upgrade" } else { "install" },
                    crate::helm::recovery(&release.id, !upgrading)
                ));
            }
            Err(HelmError::Failed {
                argv,
                status,
                stderr,
            }) => {
                // killed (by the OOM killer, say): its release may be left
                // pending-*, and nobody but this run can be working on it.
                let recovered = match status {
                    None => self.recover_killed(release).await,
                    Some(_) => String::new(),
                };
                // The summary gets helm's own words; the full command goes under the release.
                let status = status
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "a signal".into());
                // A chart or version the repository lacks: where to fix it.
                let lacking = stderr.contains("not found") || stderr.contains("no chart version");
                let at = if lacking {
                    format!(
                        " (its chart and version are set at {})",
                        release.version_at(&self.hooks.root)
                    )
                } else {
                    String::new()
                };
                return StepResult {
                    message: Some(format!(
                        "helm {} exited with {status}{}{at}{recovered}",
                        if upgrading { "upgrade" } else { "install" },
                        match stderr.trim() {
                            "" => String::new(),
                            said => format!(": {said}"),
                        }
                    )),
                    diagnostics_text: Some(format!("command: {}", argv.join(" "))),
                    ..StepResult::new(Outcome::Failed)
                };
            }
            Err(e) => return StepResult::failed(e.to_string()),
        }

        for hook in &release.hooks.postsync {
            if let Err(result) = self
                .hook(release, HookPhase::Postsync, hook, deadline, stop.clone())
                .await
            {
                return result;
            }
        }
        if release.wait
            && let Err(result) = self.track_workloads(release, deadline, stop.clone()).await
        {
            return result;
        }
        if let Err(result) = self.record(release).await {
            return result;
        }
        StepResult::new(if upgrading {
            Outcome::Upgraded
        } else {
            Outcome::Installed
        })
    }

    /// Whether this run still holds the cluster lock
    /// (docs/design.md#cluster-lock): a run whose lock may be lost starts
    /// nothing new and writes nothing more.
    async fn lock_held(&self, what: &str) -> Result<(), StepResult> {
        let Some(lock) = &self.lock else {
            return Ok(());
        };
        lock.ensure().await.map_err(|why| {
            interrupted(format!(
                "{what}: the cluster lock may be lost ({why}); run `bootstrap apply` again"
            ))
        })
    }

    /// A release helm leaves alone (docs/design.md#hooks): its readiness
    /// hooks still verify it, so dependents never start on a sick release;
    /// its command hooks run again only when their definition changed since
    /// they last ran (the ledger's hooks digest), and the result says which
    /// it skipped.
    async fn unchanged(
        &self,
        release: &Release,
        change: &Change,
        deadline: Instant,
        stop: StopSignal,
    ) -> StepResult {
        let commands: Vec<&Hook> = release
            .hooks
            .presync
            .iter()
            .chain(&release.hooks.postsync)
            .filter(|h| is_command(h))
            .collect();
        let rerun = matches!(change, Change::Unchanged) && self.commands_changed(release);
        let phases = [
            (HookPhase::Presync, &release.hooks.presync),
            (HookPhase::Postsync, &release.hooks.postsync),
        ];
        let mut verified = 0;
        for (phase, hooks) in phases {
            for hook in hooks.iter().filter(|h| rerun || !is_command(h)) {
                if let Err(result) = self
                    .hook(release, phase, hook, deadline, stop.clone())
                    .await
                {
                    return result;
                }
                verified += usize::from(!is_command(hook));
            }
        }
        if let Change::Adopted(by) = change {
            // Flux's now: its ledger entry is left as it was.
            return adopted(by);
        }
        // An entry written before digests were keyed is rewritten, and so
        // is one whose command hooks just ran again.
        let unkeyed = self
            .recorded
            .get(&ledger::key(&release.id))
            .is_some_and(Entry::is_unkeyed);
        if (rerun || unkeyed)
            && let Err(result) = self.record(release).await
        {
            return result;
        }
        let ready = if verified > 0 { ", ready" } else { "" };
        let message = if rerun {
            Some(format!(
                "unchanged{ready}; ran {} again: {} changed since {} last ran",
                crate::duration::count(commands.len(), "command hook"),
                if commands.len() == 1 {
                    "its definition"
                } else {
                    "their definitions"
                },
                if commands.len() == 1 { "it" } else { "they" },
            ))
        } else if !commands.is_empty() {
            let names: Vec<String> = commands.iter().map(|h| h.action.to_string()).collect();
            Some(format!(
                "unchanged{ready}; skipped {} ({}): neither the release nor {} changed since {} last ran; --force runs {}",
                crate::duration::count(commands.len(), "command hook"),
                names.join(", "),
                if commands.len() == 1 {
                    "the hook"
                } else {
                    "the hooks"
                },
                if commands.len() == 1 { "it" } else { "they" },
                if commands.len() == 1 { "it" } else { "them" },
            ))
        } else {
            (verified > 0).then(|| "unchanged, ready".to_string())
        };
        StepResult {
            message,
            ..StepResult::new(Outcome::Unchanged)
        }
    }

    /// The release's command hooks differ from the ones that last ran (the
    /// ledger's hooks digest); never for a release without command hooks.
    fn commands_changed(&self, release: &Release) -> bool {
        let has_commands = release
            .hooks
            .presync
            .iter()
            .chain(&release.hooks.postsync)
            .any(is_command);
        if !has_commands || self.ledger.is_none() {
            return false;
        }
        self.recorded
            .get(&ledger::key(&release.id))
            .is_none_or(|entry| !entry.hooks_match(release, self.digest_key.as_ref()))
    }

    /// Records the release in the ledger (when there is one), warning about
    /// every repair the write made.
    async fn record(&self, release: &Release) -> Result<(), StepResult> {
        let Some(ledger) = &self.ledger else {
            return Ok(());
        };
        self.lock_held("done, but not recorded in the ledger")
            .await?;
        let Some(key) = &self.digest_key else {
            return Err(StepResult::failed(
                "the ledger's digest key was not loaded; nothing was recorded".to_string(),
            ));
        };
        let repairs = ledger
            .record(
                &Entry::for_release(release, &self.cluster, key),
                &release.id,
            )
            .await
            .map_err(|e| StepResult::failed(one_line(&e)))?;
        for repair in repairs {
            self.events.emit(Event::Warning {
                message: repair.message(),
            });
        }
        Ok(())
    }

    /// The dry run's message: what `diff` says would change
    /// (docs/design.md#diff), with `reason` when the upgrade is for
    /// something else; `None` (with a warning) when it cannot be worked out.
    async fn describe(&self, release: &Release, reason: Option<String>) -> Option<String> {
        let deployed = self.listed.as_ref().and_then(|l| l.get(&release.id));
        let deployed = match (deployed, &self.listed) {
            (Some(d), _) => Some(d.clone()),
            (None, Some(_)) => None,
            (None, None) => self
                .helm
                .status(&self.target, &release.id)
                .await
                .ok()
                .flatten(),
        };
        let found = crate::change::compare(
            self.helm.as_ref(),
            &self.target,
            release,
            deployed.as_ref(),
            &self.api_versions,
            reason.into_iter().collect(),
        )
        .await;
        match found {
            Ok(change) => Some(change.describe()),
            Err(e) => {
                self.events.emit(Event::Warning {
                    message: format!("{}: cannot say what would change: {e}", release.id),
                });
                None
            }
        }
    }

    /// What must happen to the deployed release.
    async fn compare(&self, release: &Release) -> Result<Change, StepResult> {
        if release.ownership == crate::release::Ownership::Handover
            && let Some(by) = self.adopted.get(&release.id)
        {
            // Never upgrade an adopted release: a new revision changes the
            // release digest helm-controller recorded, so it finds the
            // release `Unmanaged` again and upgrades it back (the
            // two-controller fight; fluxcd/helm-controller
            // `internal/reconcile/state.go`, `action.VerifyReleaseObject`).
            return Ok(Change::Adopted(by.clone()));
        }
        let deployed = match &self.listed {
            Some(listed) => listed.get(&release.id).cloned(),
            None => self
                .helm
                .status(&self.target, &release.id)
                .await
                .map_err(|e| {
                    StepResult::failed(format!("cannot read the release from helm: {e}"))
                })?,
        };
        let Some(deployed) = deployed else {
            return Ok(Change::Install);
        };
        if (deployed.status == "pending-install" || deployed.status == "pending-upgrade")
            && let Some(dead) = &self.left_by
        {
            return self.left_pending(release, &deployed, dead).await;
        }
        if deployed.is_pending() {
            return Err(StepResult::failed(format!(
                "is {} in Helm (another operation is in progress, or one was interrupted); wait for it, or recover with {}",
                deployed.status,
                deployed.recovery()
            )));
        }
        if self.force {
            return Ok(Change::Upgrade {
                why: "--force".into(),
                content: false,
            });
        }
        if deployed.status != "deployed" {
            return Ok(Change::Upgrade {
                why: format!("helm status is {}", deployed.status),
                content: false,
            });
        }
        if deployed.chart != release.chart_label() || deployed.version != release.version_label() {
            return Ok(Change::Upgrade {
                why: format!(
                    "chart {} {} -> {} {}",
                    deployed.chart,
                    deployed.version,
                    release.chart_label(),
                    release.version_label()
                ),
                content: true,
            });
        }
        let values = self
            .helm
            .get_values(&self.target, &release.id)
            .await
            .map_err(|e| {
                StepResult::failed(format!("cannot read deployed values from helm: {e}"))
            })?;
        // The values themselves: `values_digest()` is of the redacted view
        // shown in output, and a value under a secret-looking key (coredns'
        // `tolerations[].key`) would make every run an upgrade.
        if crate::values::digest(&values) != crate::values::digest(&release.values) {
            return Ok(Change::Upgrade {
                why: "values changed".into(),
                content: true,
            });
        }
        match self.recorded.get(&ledger::key(&release.id)) {
            Some(entry) if entry.matches(release, self.digest_key.as_ref()) => {
                Ok(Change::Unchanged)
            }
            Some(_) => Ok(Change::Upgrade {
                why: "the ledger records another version or values".into(),
                content: false,
            }),
            // Installed but its hooks never finished (or it predates the ledger).
            None if self.ledger.is_some() => Ok(Change::Upgrade {
                why: "not recorded in the ownership ledger".into(),
                content: false,
            }),
            None => Ok(Change::Unchanged),
        }
    }

    /// After this run's helm was killed by a signal mid-operation: the
    /// release may be left `pending-*`, which would block every later run.
    /// Provably nobody is working on it (that helm is reaped, its process
    /// group signalled, and this run holds the lock: checked first), so a
    /// first install is uninstalled and an upgrade rolled back, and the next
    /// run installs or upgrades it as usual. Says what was done (or why
    /// not), to go after helm's message.
    async fn recover_killed(&self, release: &Release) -> String {
        if self.lock_held("not recovered").await.is_err() {
            return "; the cluster lock may be lost, so the release was not recovered".into();
        }
        let deployed = match self.helm.status(&self.target, &release.id).await {
            Ok(Some(deployed)) if deployed.is_pending() => deployed,
            Ok(_) => return String::new(),
            Err(e) => return format!("; cannot read the release to recover it: {e}"),
        };
        let (done, result) = match deployed.status.as_str() {
            "pending-install" => (
                "uninstalled it, so the next run installs it afresh",
                self.helm
                    .uninstall(&self.target, &release.id, release.budget())
                    .await,
            ),
            "pending-upgrade" => (
                "rolled it back to the revision before, so the next run upgrades it again",
                self.helm
                    .rollback(&self.target, &release.id, release.budget())
                    .await,
            ),
            _ => return String::new(),
        };
        match result {
            Ok(()) => format!(
                "; the release was left {} and no helm is working on it any more: {done}",
                deployed.status
            ),
            Err(e) => format!(
                "; the release is left {} and could not be recovered: {e}; recover with {}",
                deployed.status,
                deployed.recovery()
            ),
        }
    }

    /// A release the run whose expired lock this run took over left
    /// `pending-*`: its helm may still be working on it (an orphan that
    /// outlived its run) until the release record is older than that run's
    /// longest helm operation plus [`HELM_SETTLE`]; until then it is
    /// refused with the time to wait. After that a first install is removed
    /// and installed afresh, and an upgrade is rolled back to the revision
    /// before it and upgraded again.
    async fn left_pending(
        &self,
        release: &Release,
        deployed: &DeployedRelease,
        dead: &Predecessor,
    ) -> Result<Change, StepResult> {
        let holder = &format!(
            "{}, whose expired lock {} took over",
            dead.holder,
            if dead.inherited {
                "an earlier run"
            } else {
                "this run"
            }
        );
        let status = &deployed.status;
        // Unknown (a run before the Lease recorded it): the longest a
        // release of this run may take, at least the default budget.
        let bound = dead.helm_timeout.unwrap_or_else(|| {
            release
                .budget()
                .max(crate::release::DEFAULT_RELEASE_TIMEOUT)
        }) + HELM_SETTLE;
        let now = std::time::SystemTime::now();
        let wait = match deployed.updated {
            Some(started) => (started + bound).duration_since(now).ok(),
            None => Some(bound),
        };
        if let Some(wait) = wait.filter(|w| !w.is_zero()) {
            self.left_for_later
                .store(true, std::sync::atomic::Ordering::SeqCst);
            let since = deployed
                .updated
                .map(|t| format!(" at {}", crate::duration::timestamp(t)))
                .unwrap_or_default();
            return Err(StepResult::failed(format!(
                "was left {status}{since} by {holder}; a helm of that run may still be working on it for up to {} more (its helm timeout {} plus {}): run `bootstrap apply` again after that",
                crate::duration::span(wait.max(std::time::Duration::from_secs(1))),
                crate::duration::span(bound - HELM_SETTLE),
                crate::duration::span(HELM_SETTLE),
            )));
        }
        if status == "pending-upgrade" {
            // An upgrade that never finished, and nobody working on it any
            // more: back to the revision before it, then upgrade as usual.
            self.helm
                .rollback(&self.target, &release.id, release.budget())
                .await
                .map_err(|e| {
                    StepResult::failed(format!(
                        "was left pending-upgrade by {holder}, and cannot be rolled back to upgrade it again: {e}"
                    ))
                })?;
            self.events.emit(Event::Warning {
                message: format!(
                    "{} was left pending-upgrade by {holder}; rolled it back to the revision before to upgrade it again",
                    release.id
                ),
            });
            return Ok(Change::Upgrade {
                why: "rolled back from pending-upgrade".into(),
                content: false,
            });
        }
        // The dead run's first install of this release never finished, and
        // nobody can be working on it any more: nothing to roll back to, so
        // remove it and install afresh.
        self.helm
            .uninstall(&self.target, &release.id, release.budget())
            .await
            .map_err(|e| {
                StepResult::failed(format!(
                    "was left pending-install by {holder}, and cannot be uninstalled to install it afresh: {e}"
                ))
            })?;
        self.events.emit(Event::Warning {
            message: format!(
                "{} was left pending-install by {holder}; uninstalled it to install it afresh",
                release.id
            ),
        });
        Ok(Change::Install)
    }

    async fn hook(
        &self,
        release: &Release,
        phase: HookPhase,
        hook: &Hook,
        deadline: Instant,
        stop: StopSignal,
    ) -> Result<(), StepResult> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let timeout = hook.timeout.map_or(remaining, |t| t.min(remaining));
        let name = hook.action.to_string();
        self.step_event(
            release,
            Step::Hook {
                phase,
                hook: name.clone(),
            },
        );
        let started = Instant::now();
        let progress = Progress {
            events: &self.events,
            release: &release.id,
        };
        // A running release keeps its hooks through the grace period; only
        // the hard stop (second Ctrl-C, grace over, --timeout) cuts them short.
        let result = tokio::select! {
            result = hooks::run(&hook.action, &self.hooks, timeout, progress) => result,
            _ = stopped(stop, Stop::Now) => {
                return Err(interrupted(format!("interrupted during {phase} hook {name}; run `bootstrap apply` again to resume")));
            }
        };
        let ok = result.is_ok();
        let output = match &result {
            Ok(out) if self.verbose => out.clone(),
            Ok(_) => None,
            Err(failure) => failure.output.clone(),
        };
        self.events.emit(Event::HookFinished {
            release: release.id.clone(),
            phase,
            hook: name.clone(),
            ok,
            duration: started.elapsed(),
            output,
        });
        result.map(|_| ()).map_err(|failure| StepResult {
            outcome: Outcome::Failed,
            queued: std::time::Duration::ZERO,
            message: Some(format!("{phase} hook {name}: {}", failure.message)),
            diagnostics_text: failure.diagnostics.as_ref().map(|d| d.to_string()),
            diagnostics: failure
                .diagnostics
                .as_ref()
                .and_then(|d| serde_json::to_value(d).ok()),
        })
    }

    /// `wait: true`: every workload in the release's manifest must roll out.
    async fn track_workloads(
        &self,
        release: &Release,
        deadline: Instant,
        stop: StopSignal,
    ) -> Result<(), StepResult> {
        let manifest = self
            .helm
            .get_manifest(&self.target, &release.id)
            .await
            .map_err(|e| {
                StepResult::failed(format!(
                    "cannot read the release manifest to track its workloads: {e}"
                ))
            })?;
        let docs =
            crate::yaml::manifests(&manifest, std::path::Path::new("manifest")).unwrap_or_default();
        for doc in docs {
            let kind = doc.get("kind").and_then(|k| k.as_str()).unwrap_or_default();
            if !crate::kube::ready::ROLLOUT_KINDS.contains(&kind) {
                continue;
            }
            let name = doc
                .pointer("/metadata/name")
                .and_then(|n| n.as_str())
                .unwrap_or_default();
            let namespace = doc
                .pointer("/metadata/namespace")
                .and_then(|n| n.as_str())
                .unwrap_or(&release.id.namespace);
            let object = crate::release::ObjectRef {
                api_version: doc
                    .get("apiVersion")
                    .and_then(|v| v.as_str())
                    .unwrap_or("apps/v1")
                    .to_string(),
                kind: kind.to_string(),
                namespace: Some(namespace.to_string()),
                name: name.to_string(),
            };
            let action = if kind == "Job" {
                HookAction::Job(object)
            } else {
                HookAction::Rollout(object)
            };
            let hook = Hook {
                action,
                timeout: None,
            };
            self.step_event(
                release,
                Step::Waiting {
                    what: hook.action.to_string(),
                },
            );
            self.hook(release, HookPhase::Postsync, &hook, deadline, stop.clone())
                .await?;
        }
        Ok(())
    }
}

fn is_command(hook: &Hook) -> bool {
    !hook.action.is_readiness()
}

fn adopted(by: &str) -> StepResult {
    StepResult {
        message: Some(format!(
            "adopted by Flux (HelmRelease {by}); bootstrap no longer upgrades it"
        )),
        ..StepResult::new(Outcome::Adopted)
    }
}

fn interrupted(message: impl Into<String>) -> StepResult {
    StepResult {
        message: Some(message.into()),
        ..StepResult::new(Outcome::Interrupted)
    }
}

/// A hook's progress, as `release_progress` events of its release.
struct Progress<'a> {
    events: &'a crate::event::Emitter,
    release: &'a crate::release::ReleaseId,
}

impl crate::kube::wait::Observer for Progress<'_> {
    fn pending(&self, reason: &str, tally: Option<&crate::event::Tally>) {
        self.events.emit(Event::ReleaseProgress {
            release: self.release.clone(),
            message: reason.to_string(),
            tally: tally.cloned(),
        });
    }
}
