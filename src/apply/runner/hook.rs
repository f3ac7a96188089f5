//! One hook of a release step, and the workloads a release's readiness
//! hooks track, reported as the release's progress.

use tokio::time::Instant;

use crate::event::{Event, HookPhase, Outcome, Step};
use crate::helm::Helm;
use crate::hooks::{self};
use crate::release::{Hook, HookAction, Release};
use crate::scheduler::StepResult;
use crate::stop::{Stop, StopSignal, stopped};

use super::{ReleaseRunner, interrupted};

impl<H: Helm> ReleaseRunner<H> {
    /// The release's postsync hooks, in order; the first that fails ends
    /// the release.
    pub(super) async fn postsync(
        &self,
        release: &Release,
        deadline: Instant,
        stop: &StopSignal,
    ) -> Result<(), StepResult> {
        for hook in &release.hooks.postsync {
            self.hook(release, HookPhase::Postsync, hook, deadline, stop.clone())
                .await?;
        }
        Ok(())
    }

    pub(super) async fn hook(
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
    pub(super) async fn track_workloads(
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

/// A hook's progress, as `release_progress` events of its release.
pub(super) struct Progress<'a> {
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
