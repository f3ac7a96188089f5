//! What one release's step finds before helm runs: whether the release
//! changed since the ledger recorded it (chart, version, values, `--force`),
//! and what an unchanged release still verifies (its readiness hooks).

use tokio::time::Instant;

use crate::event::{Event, HookPhase, Outcome};
use crate::helm::Helm;
use crate::ledger::{self, Entry};
use crate::release::{Hook, Release};
use crate::scheduler::StepResult;
use crate::stop::StopSignal;

use super::{Change, ReleaseRunner, adopted};

impl<H: Helm> ReleaseRunner<H> {
    /// A release helm leaves alone (docs/design.md#hooks): its readiness
    /// hooks still verify it, so dependents never start on a sick release;
    /// its command hooks run again only when their definition changed since
    /// they last ran (the ledger's hooks digest), and the result says which
    /// it skipped.
    pub(super) async fn unchanged(
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
                crate::plural::count(commands.len(), "command hook"),
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
                crate::plural::count(commands.len(), "command hook"),
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
    pub(super) fn commands_changed(&self, release: &Release) -> bool {
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

    /// The dry run's message: what `diff` says would change
    /// (docs/design.md#diff), with `reason` when the upgrade is for
    /// something else; `None` (with a warning) when it cannot be worked out.
    pub(super) async fn describe(
        &self,
        release: &Release,
        reason: Option<String>,
    ) -> Option<String> {
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
    pub(super) async fn compare(&self, release: &Release) -> Result<Change, StepResult> {
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
        if crate::values::digest(&values) != crate::values::digest(release.values()) {
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
}

pub(super) fn is_command(hook: &Hook) -> bool {
    !hook.action.is_readiness()
}
