//! A release left `pending-*` by a helm that was killed, in this run or in
//! the run whose expired lock this one took over: recovered (uninstalled or
//! rolled back) once provably nobody is working on it.

use std::collections::BTreeSet;
use std::sync::Mutex;

use crate::event::Event;
use crate::helm::{DeployedRelease, Helm};
use crate::kube::lock::Predecessor;
use crate::release::{Release, ReleaseId};
use crate::scheduler::StepResult;

use super::{Change, HELM_SETTLE, ReleaseRunner};

/// The releases a dead run may have left `pending-*`, in a run that took
/// its lock over (or inherited it, docs/design.md#cluster-lock): every
/// release helm listed `pending-install` or `pending-upgrade` when this
/// run read them, less each it recovered. The dead run is passed on in the
/// released Lease while one is left (refused for later, not selected, or
/// not reached), or when the run ended before it read them.
#[derive(Debug, Default)]
pub(crate) struct LeftPending(Mutex<Option<BTreeSet<ReleaseId>>>);

impl LeftPending {
    /// What helm listed pending when the run read the cluster.
    pub(crate) fn listed<'a>(&self, releases: impl IntoIterator<Item = &'a DeployedRelease>) {
        let pending = releases
            .into_iter()
            .filter(|r| r.status == "pending-install" || r.status == "pending-upgrade")
            .map(|r| r.id.clone())
            .collect();
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(pending);
    }

    /// `release` is recovered (uninstalled or rolled back): no longer the
    /// dead run's.
    pub(crate) fn recovered(&self, release: &ReleaseId) {
        if let Some(left) = self.0.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            left.remove(release);
        }
    }

    /// Whether the dead run must be passed on: a release it may have left
    /// is not recovered, or the run never read which.
    pub(crate) fn unresolved(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_none_or(|left| !left.is_empty())
    }
}

impl<H: Helm> ReleaseRunner<H> {
    /// After this run's helm was killed by a signal mid-operation: the
    /// release may be left `pending-*`, which would block every later run.
    /// Provably nobody is working on it (that helm is reaped, its process
    /// group signalled, and this run holds the lock: checked first), so a
    /// first install is uninstalled and an upgrade rolled back, and the next
    /// run installs or upgrades it as usual. Says what was done (or why
    /// not), to go after helm's message.
    pub(super) async fn recover_killed(&self, release: &Release) -> String {
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
    pub(super) async fn left_pending(
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
            self.left_pending.recovered(&release.id);
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
        self.left_pending.recovered(&release.id);
        self.events.emit(Event::Warning {
            message: format!(
                "{} was left pending-install by {holder}; uninstalled it to install it afresh",
                release.id
            ),
        });
        Ok(Change::Install)
    }
}
