//! One release step: compare with what is deployed, presync hooks, helm
//! upgrade --install, postsync hooks, ledger. The scheduler decides when.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::error::one_line;
use crate::event::{Emitter, Event, HookPhase, Outcome, Step};
use crate::helm::{DeployedRelease, Helm, HelmError, InstallRequest};
use crate::hooks::HookEnv;
use crate::kube::KubeTarget;
use crate::kube::lock::{LockCheck, Predecessor};
use crate::ledger::{self, Entry, Ledger};
use crate::release::{Release, ReleaseId};
use crate::scheduler::{Runner, StepResult};
use crate::stop::{Stop, StopSignal, stopped};

mod compare;
mod hook;
mod pending;

pub(crate) use pending::LeftPending;

/// Added to the helm timeout of a run that died before its release record
/// counts as abandoned: helm's `--timeout` bounds each of its waits, not the
/// whole command.
pub(crate) const HELM_SETTLE: std::time::Duration = std::time::Duration::from_secs(60);

pub(crate) struct ReleaseRunner<H: Helm> {
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
    /// The releases `left_by` may have left pending; each this run
    /// recovers is taken off. While one is left, the released Lease passes
    /// that run on to the next, which would otherwise not know whose it is.
    pub left_pending: Arc<LeftPending>,
    /// Checked before a release starts and before each ledger write; `None`
    /// without a lock (a dry run).
    pub lock: Option<LockCheck>,
    pub force: bool,
    pub verbose: bool,
    /// The cluster config being applied, recorded in each ledger entry.
    pub cluster: String,
    /// The namespaces being deleted when preflight read them: an install
    /// waits only for one of these (`None`: not read, each asks).
    pub terminating: Option<Arc<std::collections::BTreeSet<String>>>,
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
            return self.would(release, change).await;
        }
        if let Change::Unchanged | Change::Adopted(_) = change {
            return self.unchanged(release, &change, deadline, stop).await;
        }

        if let Change::Install = change
            && let Err(result) = self.namespace_settled(release, deadline, &stop).await
        {
            return result;
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
            values: release.values(),
            secrets: release.secrets(),
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
        if let Err(e) = installed {
            return self.helm_failed(release, upgrading, e).await;
        }

        // `wait` is helm's `--wait` under helmfile: ready before the
        // postsync hooks, which may use what the workloads did when they
        // started (docs/design.md#release-file).
        if release.wait
            && let Err(result) = self.track_workloads(release, deadline, stop.clone()).await
        {
            return result;
        }
        if let Err(result) = self.postsync(release, deadline, &stop).await {
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

    /// The namespace of a release to install, still being deleted (a
    /// `destroy` just before, which took a chart's Namespace with it):
    /// waited for until it is gone, within the release's budget, so helm
    /// does not fail on "is being terminated" (docs/design.md#destroy).
    async fn namespace_settled(
        &self,
        release: &Release,
        deadline: Instant,
        stop: &StopSignal,
    ) -> Result<(), StepResult> {
        use crate::kube::namespace::{self, Unsettled};
        let Some(client) = &self.hooks.client else {
            return Ok(());
        };
        let ns = &release.id.namespace;
        if self
            .terminating
            .as_ref()
            .is_some_and(|set| !set.contains(ns))
        {
            return Ok(());
        }
        if !matches!(namespace::terminating(client, ns).await, Ok(Some(_))) {
            return Ok(());
        }
        self.step_event(
            release,
            Step::Waiting {
                what: format!("namespace {ns} to finish being deleted"),
            },
        );
        namespace::settled(client, ns, deadline, stop)
            .await
            .map_err(|unsettled| match unsettled {
                Unsettled::Stopped => interrupted(
                    "interrupted while its namespace was being deleted; nothing was changed for this release",
                ),
                Unsettled::Lingering(why) => StepResult::failed(format!(
                    "namespace {ns} is still being deleted ({why}); remove what holds it, or wait, and run `bootstrap apply` again"
                )),
            })
    }

    /// A dry run's result: what apply would do to the release.
    async fn would(&self, release: &Release, change: Change) -> StepResult {
        match change {
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

        }
    }

    /// The result of a helm install or upgrade that did not succeed: an
    /// interruption, or helm's failure in its own words (after recovering a
    /// release a killed helm left pending).
    async fn helm_failed(
        &self,
        release: &Release,
        upgrading: bool,
        error: HelmError,
    ) -> StepResult {
        match error {
            HelmError::NotStarted { .. } => {
                interrupted("interrupted before helm started; nothing was changed for this release")
            }
            HelmError::Stopped { .. } => interrupted(format!(
                "helm was stopped mid-operation; the release may be left pending-{}: run `bootstrap apply` again, and if helm reports another operation in progress, {}",
                if upgrading { "upgrade" } else { "install" },
                crate::helm::recovery(&release.id, !upgrading)
            )),
            HelmError::Failed {
                argv,
                status,
                stderr,
            } => {
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
                StepResult {
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
                }
            }
            e => StepResult::failed(e.to_string()),
        }
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
