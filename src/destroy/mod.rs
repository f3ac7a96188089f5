//! `bootstrap destroy`: uninstalls a plan's releases in reverse DAG order
//! under the cluster lock, removes each ledger entry after its uninstall,
//! and with `--crds` deletes the CRDs the CRD phase applies once every
//! release is gone.
//!
//! Releases go one at a time, in the reverse of the plan's execution order
//! (a valid order: every release after all of its dependents). Unlike
//! `apply`, there is little to gain from running them side by side: helm
//! uninstall deletes objects without waiting for readiness, so each step
//! takes seconds. One at a time keeps the log in a fixed order and makes a
//! failure's consequence simple: what the failed release needs stays, since
//! it still runs on it; everything else carries on.

use std::collections::{BTreeMap, BTreeSet};

use ::kube::api::{Api, DeleteParams};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use tokio::time::Instant;

use crate::crds::{self, Crd};
use crate::error::{Error, Failure, one_line};
use crate::event::{CrdRemoval, Emitter, Event, Outcome, Phase, ReleaseResult, Step, Summary};
use crate::helm::Helm;
use crate::kube::client::Connection;
use crate::kube::retry::API_RETRY_BUDGET;
use crate::kube::retry::{is_not_found, retry};
use crate::ledger::Ledger;
use crate::plan::Plan;
use crate::release::{Release, ReleaseId};
use crate::stop::{GRACE, Interrupted, Stop, StopSignal, until_stopped};

const NOT_STARTED: &str = "not started: destroy was interrupted";

#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    pub dry_run: bool,
    /// Also delete the CRDs of the CRD phase, after every release is gone.
    pub crds: bool,
}

/// The releases to uninstall, in order: every one before what it needs.
pub(crate) fn order(plan: &Plan) -> Vec<&Release> {
    let mut order: Vec<&Release> = plan.installed().collect();
    order.reverse();
    order
}

/// With `--only`: installed releases outside the selection that depend on a
/// selected one, as `(dependent, selected)`; they keep running without it.
pub(crate) fn left_behind(full: &Plan, selected: &Plan) -> Vec<(ReleaseId, ReleaseId)> {
    let chosen: BTreeSet<&ReleaseId> = selected.installed().map(|r| &r.id).collect();
    let mut found = Vec::new();
    for id in &chosen {
        for dependent in full.graph.with_dependents([*id]) {
            let installed = full.release(&dependent).is_some_and(Release::is_installed);
            if installed && !chosen.contains(&dependent) {
                found.push((dependent, (*id).clone()));
            }
        }
    }
    found
}

/// Runs the whole destroy; `Ok(summary)` even when uninstalls failed.
/// The whole run is bounded by the run's bounds ([`crate::run::Run::bounded`]).
pub(crate) async fn run<H: Helm>(
    run: &crate::run::Run<'_, H>,
    options: Options,
) -> Result<Summary, Error> {
    run.bounded(uninstall(run, options)).await
}

async fn uninstall<H: Helm>(
    run: &crate::run::Run<'_, H>,
    options: Options,
) -> Result<Summary, Error> {
    let (plan, helm, connection, events) =
        (run.plan, run.helm.as_ref(), run.connection, &run.events);
    let stop = run.stop.clone();
    let started = Instant::now();
    let order = order(plan);
    events.emit(Event::RunStarted {
        cluster: plan.cluster.name.clone(),
        releases: order.iter().map(|r| r.id.clone()).collect(),
        dry_run: options.dry_run,
        needs: Default::default(),
    });
    events.emit(Event::PhaseStarted {
        phase: Phase::Preflight,
    });
    let held = crate::run::lock(
        connection,
        "destroy",
        order
            .iter()
            .map(|r| r.budget())
            .max()
            .unwrap_or(crate::release::DEFAULT_RELEASE_TIMEOUT),
        options.dry_run,
        events,
        &stop,
    )
    .await?;
    let user = stop;
    let stop = held.stop.clone();
    let result = async {
        // Rendered before the first uninstall, so a chart that cannot be
        // rendered stops the run while nothing has changed.
        let crds = if options.crds {
            crds::render(helm, plan)
                .await
                .map_err(|e| Error::from(Failure::CrdsToDelete { source: e.into() }))?
        } else {
            Vec::new()
        };
        // Handover releases Flux has adopted are Flux's now: left installed.
        let adopted = crate::ownership::adoptions(plan, helm, connection).await?;
        events.emit(Event::PhaseFinished {
            phase: Phase::Preflight,
            ok: true,
            stopped: false,
        });
        let destroyer = Destroyer {
            helm,
            connection,
            ledger: Ledger::new(&connection.client),
            events,
            dry_run: options.dry_run,
            adopted,
            lock: held.checker(),
        };
        events.emit(Event::PhaseStarted {
            phase: Phase::Releases,
        });
        let (results, interrupted) = destroyer.releases(plan, &order, stop.clone()).await;
        destroyer.namespaces_settled(&results, &stop).await;
        let ok = results.iter().all(|r| r.outcome.is_success());
        events.emit(Event::PhaseFinished {
            phase: Phase::Releases,
            ok,
            stopped: interrupted,
        });
        let left_to_flux = results.iter().any(|r| r.outcome == Outcome::Adopted);
        if options.crds && left_to_flux {
            events.emit(Event::Warning {
                message: "CRDs kept: releases adopted by Flux are left installed and may use them"
                    .into(),
            });
        }
        let crds_ok = !options.crds || left_to_flux || destroyer.crds(&crds, ok, &stop).await;
        let root_failures = results
            .iter()
            .filter(|r| r.outcome == Outcome::Failed)
            .map(|r| r.release.clone())
            .collect();
        Ok(Summary {
            cluster: plan.cluster.name.clone(),
            ok: ok && crds_ok,
            dry_run: options.dry_run,
            duration: started.elapsed(),
            releases: results,
            critical_path: Vec::new(),
            root_failures,
            interrupted,
            lock_lost: None,
            phases: None,
        })
    }
    .await;
    let result = held.judge(result, &user, "destroy", &plan.cluster.name);
    let lost = held.lost();
    // A dead run whose lock this run took over (or inherited) is passed on:
    // destroy does not read which releases it left pending, and the next
    // apply, which does, lets it go once none is (docs/design.md#cluster-lock).
    let pass_on = held.took_over();
    held.release(events, pass_on.as_ref()).await;
    result.map(|summary| summary.with_lock_lost(lost.map(|why| why.to_string())))
}

/// How long `destroy` waits for the namespaces its uninstalls emptied to
/// finish being deleted.
const NAMESPACES_WITHIN: std::time::Duration = std::time::Duration::from_secs(120);

struct Destroyer<'a, H: Helm> {
    helm: &'a H,
    connection: &'a Connection,
    ledger: Ledger,
    events: &'a Emitter,
    dry_run: bool,
    /// Handover releases adopted by Flux, with the HelmRelease's `namespace/name`.
    adopted: BTreeMap<ReleaseId, String>,
    /// Checked before each uninstall, ledger write and CRD deletion, as
    /// `apply` checks it (docs/design.md#cluster-lock); `None`: a dry run.
    lock: Option<crate::kube::lock::LockCheck>,
}

impl<H: Helm> Destroyer<'_, H> {
    /// The message when the cluster lock is lost or may be: the step that
    /// asked is not done, and the run starts nothing new.
    async fn lock_lost(&self, what: &str) -> Option<String> {
        let why = self.lock.as_ref()?.ensure().await.err()?;
        Some(format!(
            "{what}: the cluster lock may be lost ({why}); run `bootstrap destroy` again"
        ))
    }

    /// Every release in `order`; returns the results and whether the run was interrupted.
    async fn releases(
        &self,
        plan: &Plan,
        order: &[&Release],
        stop: StopSignal,
    ) -> (Vec<ReleaseResult>, bool) {
        let mut results = Vec::with_capacity(order.len());
        // Releases a failed uninstall still runs on, with the reason they stay.
        let mut kept: BTreeMap<ReleaseId, String> = BTreeMap::new();
        let mut interrupted = false;
        for release in order {
            let id = &release.id;
            let begun = Instant::now();
            interrupted = interrupted || *stop.borrow() != Stop::Run;
            let (outcome, message) = if interrupted {
                let why = match self.lock.as_ref().and_then(|l| l.lost()) {
                    Some(why) => format!(
                        "not started: the cluster lock was lost ({why}); run `bootstrap destroy` again"
                    ),
                    None => NOT_STARTED.to_string(),
                };
                (Outcome::Interrupted, Some(why))
            } else if let Some(why) = kept.get(id) {
                (Outcome::Skipped, Some(why.clone()))
            } else {
                self.events.emit(Event::ReleaseStarted {
                    release: id.clone(),
                });
                let (outcome, message) = self.one(release, stop.clone()).await;
                let how = match outcome {
                    Outcome::Failed => Some("failed"),
                    Outcome::Interrupted => Some("was interrupted"),
                    _ => None,
                };
                if let Some(how) = how {
                    let why = format!("kept: {id} still needs it (its uninstall {how})");
                    for need in plan.graph.with_needs([id]) {
                        if &need != id {
                            kept.entry(need).or_insert_with(|| why.clone());
                        }
                    }
                }
                interrupted = outcome == Outcome::Interrupted;
                (outcome, message)
            };
            let result = ReleaseResult {
                release: id.clone(),
                outcome,
                duration: begun.elapsed(),
                timing: crate::event::Timing {
                    run: begun.elapsed(),
                    ..Default::default()
                },
                message,
            };
            self.events.emit(Event::ReleaseFinished {
                result: result.clone(),
                diagnostics: None,
                diagnostics_text: None,
            });
            results.push(result);
        }
        (results, interrupted)
    }

    async fn one(&self, release: &Release, stop: StopSignal) -> (Outcome, Option<String>) {
        let id = &release.id;
        let target = &self.connection.target;
        self.events.emit(Event::ReleaseStep {
            release: id.clone(),
            step: Step::Checking,
        });
        if let Some(by) = self.adopted.get(id) {
            // Uninstalling it would take from Flux what it now manages (and
            // helm-controller would install it again).
            if !self.dry_run {
                if let Some(why) = self.lock_lost("not started").await {
                    return (Outcome::Interrupted, Some(why));
                }
                if let Err(e) = self.ledger.remove(id).await {
                    return (Outcome::Failed, Some(one_line(&e)));
                }
            }
            return (
                Outcome::Adopted,
                Some(format!(
                    "adopted by Flux (HelmRelease {by}); left installed: remove it from the GitOps tree to uninstall it"
                )),
            );
        }
        let deployed = match self.helm.status(target, id).await {
            Ok(deployed) => deployed,
            Err(e) => {
                return (
                    Outcome::Failed,
                    Some(format!("cannot read the release from helm: {e}")),
                );
            }
        };
        let Some(deployed) = deployed else {
            if !self.dry_run {
                if let Some(why) = self.lock_lost("not started").await {
                    return (Outcome::Interrupted, Some(why));
                }
                // A ledger entry without a release would claim ownership of nothing.
                if let Err(e) = self.ledger.remove(id).await {
                    return (Outcome::Failed, Some(one_line(&e)));
                }
            }
            return (Outcome::Absent, Some("not installed".into()));
        };
        let what = format!(
            "{} {} ({}, revision {})",
            deployed.chart, deployed.version, deployed.status, deployed.revision
        );
        if self.dry_run {
            return (
                Outcome::WouldUninstall,
                Some(format!("would uninstall {what}")),
            );
        }
        if *stop.borrow() != Stop::Run {
            return (Outcome::Interrupted, Some(NOT_STARTED.into()));
        }
        if let Some(why) = self.lock_lost("not started").await {
            return (Outcome::Interrupted, Some(why));
        }
        self.events.emit(Event::ReleaseStep {
            release: id.clone(),
            step: Step::Uninstalling,
        });
        let timeout = release.budget();
        let announce = || {
            self.events.emit(Event::Interrupting {
                running: vec![id.clone()],
                grace: GRACE,
            })
        };
        let uninstall = self.helm.uninstall(target, id, timeout);
        match until_stopped(uninstall, &stop, GRACE, announce).await {
            Err(Interrupted) => {
                return (
                    Outcome::Interrupted,
                    Some(format!(
                        "helm uninstall was stopped; the release may be left uninstalling: run `bootstrap destroy` again (`helm uninstall {} -n {}` finishes it)",
                        id.name, id.namespace
                    )),
                );
            }
            Ok(Err(e)) => return (Outcome::Failed, Some(e.to_string())),
            Ok(Ok(())) => {}
        }
        if let Some(why) = self
            .lock_lost("uninstalled, but not removed from the ledger")
            .await
        {
            return (Outcome::Interrupted, Some(why));
        }
        if let Err(e) = self.ledger.remove(id).await {
            return (
                Outcome::Failed,
                Some(format!("uninstalled, but {}", one_line(&e))),
            );
        }
        (Outcome::Uninstalled, Some(format!("was {what}")))
    }

    /// Waits (up to [`NAMESPACES_WITHIN`], all at once) for the namespaces
    /// of uninstalled releases that are being deleted (a chart that carried
    /// its Namespace); warns about each still being deleted then, with why,
    /// so a `destroy && apply` is not a surprise (docs/design.md#destroy).
    async fn namespaces_settled(&self, results: &[ReleaseResult], stop: &StopSignal) {
        use crate::kube::namespace::{Unsettled, settled};
        if self.dry_run {
            return;
        }
        let namespaces: BTreeSet<&str> = results
            .iter()
            .filter(|r| r.outcome == Outcome::Uninstalled)
            .map(|r| r.release.namespace.as_str())
            .collect();
        let client = &self.connection.client;
        let until = Instant::now() + NAMESPACES_WITHIN;
        let waits = namespaces
            .iter()
            .map(|ns| async move { (*ns, settled(client, ns, until, stop).await) });
        for (ns, settled) in futures::future::join_all(waits).await {
            if let Err(Unsettled::Lingering(why)) = settled {
                self.events.emit(Event::Warning {
                    message: format!(
                        "namespace {ns} is still being deleted after {} ({why}); `bootstrap apply` waits for it before installing into it",
                        crate::duration::span(NAMESPACES_WITHIN)
                    ),
                });
            }
        }
    }

    /// Deletes the CRDs once every release is gone; with releases left, the
    /// CRDs stay (deleting a CRD deletes every object of its kind).
    async fn crds(&self, crds: &[Crd], releases_ok: bool, stop: &StopSignal) -> bool {
        self.events.emit(Event::PhaseStarted { phase: Phase::Crds });
        if !releases_ok {
            if !crds.is_empty() {
                self.events.emit(Event::Warning {
                    message: format!(
                        "CRDs kept ({}): not every release was uninstalled",
                        crds.len()
                    ),
                });
            }
            self.events.emit(Event::PhaseFinished {
                phase: Phase::Crds,
                ok: false,
                stopped: false,
            });
            return false;
        }
        if let Some(message) = self.lock_lost("CRDs kept").await {
            self.events.emit(Event::Warning { message });
            self.events.emit(Event::PhaseFinished {
                phase: Phase::Crds,
                ok: false,
                stopped: true,
            });
            return false;
        }
        let api: Api<CustomResourceDefinition> = Api::all(self.connection.client.clone());
        let mut ok = true;
        let params = DeleteParams::default();
        let mut deleted = Vec::new();
        for crd in crds {
            let change = if self.dry_run {
                match retry(API_RETRY_BUDGET, || api.get_opt(&crd.name)).await {
                    Ok(None) => Ok(CrdRemoval::Absent),
                    Ok(Some(_)) => Ok(CrdRemoval::WouldDelete),
                    Err(e) => Err(e),
                }
            } else {
                match retry(API_RETRY_BUDGET, || api.delete(&crd.name, &params)).await {
                    Ok(_) => Ok(CrdRemoval::Deleted),
                    Err(e) if is_not_found(&e) => Ok(CrdRemoval::Absent),
                    Err(e) => Err(e),
                }
            };
            match change {
                Ok(change) => {
                    if change == CrdRemoval::Deleted {
                        deleted.push(crd);
                    }
                    self.events.emit(Event::CrdDeleted {
                        release: crd.release.clone(),
                        crd: crd.name.clone(),
                        change,
                    })
                }
                Err(e) => {
                    ok = false;
                    self.events.emit(Event::Warning {
                        message: format!(
                            "CRD {} (from release `{}`) could not be deleted: {e}",
                            crd.name, crd.release
                        ),
                    });
                }
            }
        }
        if !deleted.is_empty() {
            let names: Vec<&str> = deleted.iter().map(|c| c.name.as_str()).collect();
            if let Err(e) = crds::record::forget(&self.connection.client, &names).await {
                // Harmless: a CRD created again has a new uid, which the
                // record does not match, so it is applied.
                self.events.emit(Event::Warning {
                    message: crate::error::one_line(&e),
                });
            }
        }
        self.wait_gone(&api, deleted, stop).await;
        self.events.emit(Event::PhaseFinished {
            phase: Phase::Crds,
            ok,
            stopped: false,
        });
        ok
    }

    /// As `kubectl delete` waits: a CRD is gone once its custom resources
    /// are, and an apply right after must not find it half-deleted.
    /// Bounded: what is left goes on its own.
    async fn wait_gone(
        &self,
        api: &Api<CustomResourceDefinition>,
        deleted: Vec<&Crd>,
        stop: &StopSignal,
    ) {
        let deadline = tokio::time::Instant::now() + crate::kube::apply::TERMINATING_WAIT;
        for crd in deleted {
            let mut nudge = crate::kube::apply::CleanupNudge::default();
            loop {
                if *stop.borrow() != Stop::Run {
                    break;
                }
                match retry(API_RETRY_BUDGET, || api.get_opt(&crd.name)).await {
                    Ok(None) => break,
                    Ok(Some(live)) if tokio::time::Instant::now() < deadline => {
                        if let Ok(value) = serde_json::to_value(&live) {
                            nudge.when_stuck(api, &crd.name, &value).await;
                        }
                        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                    }
                    Ok(Some(_)) => {
                        self.events.emit(Event::Warning {
                            message: format!(
                                "CRD {} (from release `{}`) is still being deleted after {}: its custom resources are still being removed; it goes on its own, and an `apply` before then waits for it",
                                crd.name,
                                crd.release,
                                crate::duration::span(crate::kube::apply::TERMINATING_WAIT)
                            ),
                        });
                        break;
                    }
                    Err(e) => {
                        self.events.emit(Event::Warning {
                            message: format!(
                                "CRD {} (from release `{}`) was deleted; whether it is gone could not be read: {e}",
                                crd.name, crd.release
                            ),
                        });
                        break;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
