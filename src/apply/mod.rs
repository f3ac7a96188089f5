//! `bootstrap apply`: preflight (lock, live ownership checks, CRD rendering),
//! the CRD phase, then the release phase. Nothing changes in the cluster
//! before every check has passed.

pub(crate) mod runner;

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::crds;
use crate::error::{Error, Failure};
use crate::event::{Emitter, Event, GuardState, Phase, Summary};
use crate::helm::Helm;
use crate::hooks::HookEnv;
use crate::kube::apply::CrdChange;
use crate::kube::client::Connection;
use crate::ledger::Ledger;
use crate::ownership;
use crate::plan::Plan;
use crate::scheduler;
use crate::stop::{GRACE, StopSignal, interruptible};

/// Parallel helm operations unless `--concurrency` says otherwise.
pub(crate) const DEFAULT_CONCURRENCY: usize = 4;

#[derive(Debug, Clone)]
pub struct Options {
    pub dry_run: bool,
    pub concurrency: usize,
    pub fail_fast: bool,
    pub force: bool,
    pub verbose: bool,
}

/// Runs the whole apply; `Ok(summary)` even when releases failed.
/// The whole run is bounded by the run's deadline ([`crate::run::Run::bounded`]).
pub(crate) async fn run<H: Helm + 'static>(
    run: &crate::run::Run<'_, H>,
    options: &Options,
    earlier: Vec<Event>,
) -> Result<Summary, Error> {
    run.bounded(phases(run, options, earlier)).await
}

async fn phases<H: Helm + 'static>(
    run: &crate::run::Run<'_, H>,
    options: &Options,
    earlier: Vec<Event>,
) -> Result<Summary, Error> {
    let (plan, helm, connection, events) =
        (run.plan, run.helm.clone(), run.connection, &run.events);
    let stop = run.stop.clone();
    let installed: Vec<_> = plan.installed().cloned().collect();
    events.emit(Event::RunStarted {
        cluster: plan.cluster.name.clone(),
        releases: installed.iter().map(|r| r.id.clone()).collect(),
        dry_run: options.dry_run,
        needs: installed
            .iter()
            .filter(|r| !r.needs.is_empty())
            .map(|r| (r.id.clone(), r.needs.clone()))
            .collect(),
    });
    let step = |step: String| events.emit(Event::PreflightStep { step });

    let preflight = tokio::time::Instant::now();
    // Every chart is fetched from here on, in the background, while the
    // checks below run (docs/design.md#chart-cache); the CRD phase and each
    // release wait only for their own chart. Stopped when the run ends.
    let warnings = events.clone();
    helm.on_warning(Some(Arc::new(move |message| {
        warnings.emit(Event::Warning { message })
    })));
    // Declared first, dropped last: no warning sink (holding the events
    // channel open) outlives the run.
    let _sink = WarningsUntilDropped(helm.clone());
    let _prefetch = AbortOnDrop(tokio::spawn({
        let (helm, charts) = (helm.clone(), plan.charts());
        async move { helm.prefetch(charts).await }
    }));
    events.emit(Event::PhaseStarted {
        phase: Phase::Preflight,
    });
    // What the prerequisites found before this run started.
    for event in earlier {
        events.emit(event);
    }
    let longest = installed
        .iter()
        .map(|r| r.budget())
        .max()
        .unwrap_or(crate::release::DEFAULT_RELEASE_TIMEOUT);
    let held =
        crate::run::lock(connection, "apply", longest, options.dry_run, events, &stop).await?;
    step(if options.dry_run {
        "no cluster lock (--dry-run)".to_string()
    } else {
        "cluster lock taken".to_string()
    });
    let user = stop;
    let stop = held.stop.clone();
    let took_over = held.took_over();
    // The releases the dead run may have left pending-*, until recovered.
    let left_pending = Arc::new(runner::LeftPending::default());
    let context = Preflight {
        plan,
        helm: helm.as_ref(),
        connection,
        options,
        events,
        stop: &stop,
    };
    let result = context
        .phases(
            helm.clone(),
            took_over.clone(),
            left_pending.clone(),
            held.checker(),
            preflight,
        )
        .await;
    let result = held.judge(result, &user, "apply", &plan.cluster.name);
    let lost = held.lost();
    // Passed on unless this run recovered every release the dead run may
    // have left: one not reached (`--only`, a run stopped before it) or
    // left for later is still the dead run's (docs/design.md#cluster-lock).
    let pass_on = took_over.filter(|_| left_pending.unresolved());
    held.release(events, pass_on.as_ref()).await;
    result.map(|summary| summary.with_lock_lost(lost.map(|why| why.to_string())))
}

/// What apply's preflight and CRD phase work with: one cluster's run.
struct Preflight<'a, H> {
    plan: &'a Plan,
    helm: &'a H,
    connection: &'a Connection,
    options: &'a Options,
    events: &'a Emitter,
    stop: &'a StopSignal,
}

impl<H: Helm> Preflight<'_, H> {
    fn step(&self, step: String) {
        self.events.emit(Event::PreflightStep { step });
    }

    /// The checks on the live cluster, read side by side: ownership
    /// conflicts (`took_over`: after a dead run's lock), the live lints,
    /// the ledger (and another cluster's entries in it) and its digest key;
    /// only creating that key, the run's first write past the lock, waits
    /// for them. Returns what the release phase needs of them.
    async fn checks(
        &self,
        ledger: &Ledger,
        took_over: bool,
    ) -> Result<
        (
            ownership::Live,
            BTreeMap<String, crate::ledger::Entry>,
            Option<crate::ledger::DigestKey>,
            Option<std::collections::BTreeSet<String>>,
        ),
        Error,
    > {
        let (plan, helm, connection, options, events) = (
            self.plan,
            self.helm,
            self.connection,
            self.options,
            self.events,
        );
        let (client, stop) = (&connection.client, self.stop);
        let installed = plan.installed().count();
        let step = |step: String| self.step(step);
        // The digest key is read beside them; only creating it (a first
        // run) waits for every check (docs/design.md#preflight-requests).
        let (owners, live, recorded, key, terminating) = tokio::join!(
            interruptible(
                stop,
                ownership::live_conflicts(plan, helm, connection, took_over),
            ),
            interruptible(stop, crate::gate::Findings::live(plan, client)),
            interruptible(stop, ledger.entries()),
            interruptible(stop, ledger.digest_key(false)),
            interruptible(stop, crate::kube::namespace::all_terminating(client)),
        );
        // Not read (an API server that refuses to list namespaces): each
        // install asks for its own namespace instead.
        let terminating = terminating?.ok();
        let owners = owners??;
        step(format!(
            "ownership: {} checked, no conflict",
            crate::plural::count(installed, "release")
        ));
        // The live lints (docs/design.md#lints): refuse before anything
        // changes on an error not in `lints.ignore`; warn about the rest.
        let live = live?;
        live.refusal()
            .map_err(|refusal| Error::from(Failure::Refused(refusal)))?;
        for message in live.lint_warnings() {
            events.emit(Event::Warning { message });
        }
        step(format!(
            "live lints: {}",
            crate::plural::count(live.lints.len(), "finding")
        ));
        let recorded = recorded??;
        step(match recorded.len() {
            1 => "ledger: 1 entry".to_string(),
            n => format!("ledger: {n} entries"),
        });
        if !options.force {
            installed_by_another(plan, &recorded)?;
        }
        // The first write of the run past the lock, after every check.
        let digest_key = match key?? {
            Some(key) => Some(key),
            None => interruptible(stop, ledger.digest_key(!options.dry_run)).await??,
        };
        let carriers = plan.crd_releases().count();
        if carriers > 0 {
            step(format!(
                "rendering the CRDs of {}",
                crate::plural::count(carriers, "release")
            ));
        }
        Ok((owners, recorded, digest_key, terminating))
    }

    /// The CRD phase (docs/design.md#phases-of-apply): the CRDs applied and
    /// established (a dry run shows them), then the admission guard.
    async fn crd_phase(&self, crds: &[crds::Crd]) -> Result<(), Error> {
        let (plan, options, events, stop) = (self.plan, self.options, self.events, self.stop);
        let client = &self.connection.client;
        events.emit(Event::PhaseStarted { phase: Phase::Crds });
        if options.dry_run {
            crds::dry_run(crds, events);
            events.emit(Event::PhaseFinished {
                phase: Phase::Crds,
                ok: true,
                stopped: false,
            });
            return Ok(());
        }
        let known = self.crds_known(crds).await?;
        let fresh = match interruptible(stop, crds::apply_all(client, crds, &known, events)).await?
        {
            Ok(fresh) => fresh,
            Err(e) => {
                events.emit(Event::PhaseFinished {
                    phase: Phase::Crds,
                    ok: false,
                    stopped: false,
                });
                return Err(Failure::CrdPhase { source: e.into() }.into());
            }
        };
        events.emit(Event::PhaseFinished {
            phase: Phase::Crds,
            ok: true,
            stopped: false,
        });
        // The record is written beside the guard: neither needs the other.
        let record = async {
            if fresh.is_empty() {
                return;
            }
            if let Err(e) = crds::record::write(client, known.recorded, fresh).await {
                events.emit(Event::Warning {
                    message: format!(
                        "{}: the next run applies these CRDs again",
                        crate::error::one_line(&e)
                    ),
                });
            }
        };
        let (_, guard) = tokio::join!(
            interruptible(stop, record),
            interruptible(stop, install_guard(plan, client, events))
        );
        guard??;
        Ok(())
    }

    /// What the CRD phase needs to skip CRDs the last apply left as they
    /// are (docs/design.md#crd-record); nothing with `--force`, or when it
    /// cannot be read (then every CRD is applied, and a warning says why).
    async fn crds_known(&self, crds: &[crds::Crd]) -> Result<crds::record::Known, Error> {
        if self.options.force || crds.is_empty() {
            return Ok(crds::record::Known::default());
        }
        match interruptible(self.stop, crds::record::read(&self.connection.client)).await? {
            Ok(known) => Ok(known),
            Err(e) => {
                self.events.emit(Event::Warning {
                    message: format!(
                        "{}: every CRD is applied, changed or not",
                        crate::error::one_line(&e)
                    ),
                });
                Ok(crds::record::Known::default())
            }
        }
    }
}

impl<H: Helm + 'static> Preflight<'_, H> {
    /// Once the lock is held: the checks and the CRD render side by side,
    /// the CRD phase, then the release phase through the scheduler; the
    /// summary with each phase's time (`preflight`: when it started).
    async fn phases(
        &self,
        helm: Arc<H>,
        took_over: Option<crate::kube::lock::Predecessor>,
        left_pending: Arc<runner::LeftPending>,
        lock: Option<crate::kube::lock::LockCheck>,
        preflight: tokio::time::Instant,
    ) -> Result<Summary, Error> {
        let (plan, connection, options, events, stop) = (
            self.plan,
            self.connection,
            self.options,
            self.events,
            self.stop,
        );
        let client = &connection.client;
        let installed: Vec<_> = plan.installed().cloned().collect();
        let step = |step: String| self.step(step);
        let ledger = Ledger::new(client);
        // The CRDs render (helm, local) while the cluster is read; the
        // reads are independent of each other. Their findings are judged in
        // this order, whichever came back first, so a run that fails with
        // several reports the same one every time
        // (docs/design.md#phases-of-apply).
        let render =
            async { Ok::<_, Error>(interruptible(stop, crds::render(helm.as_ref(), plan)).await?) };
        let checks = self.checks(&ledger, took_over.is_some());
        let ((owners, recorded, digest_key, terminating), crds) = tokio::try_join!(checks, render)?;
        left_pending.listed(owners.listed.values());
        // Handover releases Flux has adopted: never upgraded again
        // (docs/design.md#handover).
        let adopted: BTreeMap<_, _> = plan
            .installed()
            .filter(|r| r.ownership == crate::release::Ownership::Handover)
            .filter_map(|r| Some((r.id.clone(), owners.adopted_by(&r.id)?.name.clone())))
            .collect();
        let crds = crds.map_err(|e| Error::from(Failure::CrdRender { source: e.into() }))?;
        step(format!(
            "CRDs rendered: {} from {}",
            crate::plural::count(crds.len(), "CRD"),
            crate::plural::count(plan.crd_releases().count(), "release")
        ));
        events.emit(Event::PhaseFinished {
            phase: Phase::Preflight,
            ok: true,
            stopped: false,
        });
        let preflight = preflight.elapsed();

        let crd_phase = tokio::time::Instant::now();
        self.crd_phase(&crds).await?;
        let crd_phase = crd_phase.elapsed();

        events.emit(Event::PhaseStarted {
            phase: Phase::Releases,
        });
        let runner = runner::ReleaseRunner {
            helm,
            target: connection.target.clone(),
            hooks: HookEnv {
                client: Some(client.clone()),
                root: plan.root.clone(),
                kubeconfig: connection.hook_kubeconfig.clone(),
                context: connection.target.context.clone(),
                stream: options.verbose,
            },
            ledger: Some(ledger.clone()),
            recorded: Arc::new(recorded.into_iter().collect::<BTreeMap<_, _>>()),
            digest_key,
            listed: Some(Arc::new(owners.listed)),
            adopted: Arc::new(adopted),
            events: events.clone(),
            helm_slots: Arc::new(Semaphore::new(options.concurrency.max(1))),
            dry_run: options.dry_run,
            api_versions: Arc::new(crds::api_versions(&crds)),
            force: options.force,
            verbose: options.verbose,
            left_by: took_over,
            left_pending,
            lock: lock.clone(),
            cluster: plan.cluster.name.clone(),
            terminating: terminating.map(Arc::new),
        };
        let summary = scheduler::run(
            &plan.cluster.name,
            &installed,
            Arc::new(runner),
            scheduler::Options {
                fail_fast: options.fail_fast,
                dry_run: options.dry_run,
                grace: GRACE,
            },
            events,
            stop.clone(),
        )
        .await;
        events.emit(Event::PhaseFinished {
            phase: Phase::Releases,
            ok: summary.ok,
            stopped: summary.interrupted,
        });
        if !options.dry_run && !summary.interrupted {
            self.verify_ledger(&ledger, lock.as_ref(), summary.ok)
                .await?;
        }
        let phases = crate::event::PhaseTimes {
            preflight,
            crds: crd_phase,
            releases: summary.duration,
        };
        Ok(Summary {
            phases: Some(phases),
            ..summary
        })
    }
}

impl<H: Helm> Preflight<'_, H> {
    /// The ledger checked at the end of a run that was not stopped
    /// (docs/design.md#ledger): what a deletion or rewrite during the run
    /// took from it is put back, with a warning each. A ledger that cannot
    /// be checked fails a run that would otherwise exit 0 (the guard may
    /// admit HelmReleases for its releases until it is right); on a run
    /// that failed anyway it is a warning. Not without the lock.
    async fn verify_ledger(
        &self,
        ledger: &Ledger,
        lock: Option<&crate::kube::lock::LockCheck>,
        ok: bool,
    ) -> Result<(), Error> {
        if let Some(lock) = lock
            && lock.ensure().await.is_err()
        {
            return Ok(());
        }
        match ledger.verify().await {
            Ok(repairs) => {
                for repair in repairs {
                    self.events.emit(Event::Warning {
                        message: repair.message(),
                    });
                }
                Ok(())
            }
            Err(e) if ok => Err(e.into()),
            Err(e) => {
                self.events.emit(Event::Warning {
                    message: crate::error::one_line(&e),
                });
                Ok(())
            }
        }
    }
}

/// A background task that ends with the scope holding it.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Sends helm's warnings back to stderr when the run ends, so the events
/// channel closes and the reporter finishes.
struct WarningsUntilDropped<H: Helm>(Arc<H>);

impl<H: Helm> Drop for WarningsUntilDropped<H> {
    fn drop(&mut self) {
        self.0.on_warning(None);
    }
}

/// The ledger says another cluster config installed releases this one
/// would now upgrade: most likely the wrong kubeconfig context, and a run
/// would rewrite their values without a word (docs/design.md#ledger).
/// `--force` goes ahead.
fn installed_by_another(
    plan: &Plan,
    recorded: &BTreeMap<String, crate::ledger::Entry>,
) -> Result<(), Error> {
    let this = plan.cluster.name.as_str();
    let mut others: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for release in &plan.releases {
        if let Some(entry) = recorded.get(&crate::ledger::key(&release.id))
            && let Some(other) = entry.cluster.as_deref()
            && other != this
        {
            others
                .entry(other)
                .or_default()
                .push(release.id.to_string());
        }
    }
    if others.is_empty() {
        return Ok(());
    }
    let by: Vec<String> = others
        .iter()
        .map(|(cluster, releases)| format!("`{cluster}` ({})", releases.join(", ")))
        .collect();
    Err(Failure::OtherCluster {
        cluster: this.to_string(),
        installed_by: by,
    }
    .into())
}

/// The admission guard: a ValidatingAdmissionPolicy (with its binding) that
/// denies any Flux HelmRelease whose release is in the ownership ledger.
/// `guard: false` in cluster.yaml turns it off; clusters that do not serve
/// the API get a warning.
async fn install_guard(
    plan: &Plan,
    client: &::kube::Client,
    events: &Emitter,
) -> Result<(), Error> {
    let policy = crate::flux::policy::POLICY_NAME.to_string();
    if !plan.cluster.guard {
        events.emit(Event::Guard {
            policy,
            state: GuardState::Off,
        });
        return Ok(());
    }
    let objects = crate::flux::admission_policy(
        crate::ledger::LEDGER_NAMESPACE,
        (crate::ledger::SHARD_LABEL, crate::ledger::SHARD_LABEL_VALUE),
    );
    // The policy and its binding: the guard is as new as the newer of the two.
    let mut state = GuardState::Unchanged;
    for object in &objects {
        match crate::kube::apply::apply(client, object).await {
            Ok((change, _)) => {
                state = match (state, change) {
                    (_, CrdChange::Created) | (GuardState::Installed, _) => GuardState::Installed,
                    (_, CrdChange::Updated) | (GuardState::Updated, _) => GuardState::Updated,
                    (_, CrdChange::WouldApply) | (GuardState::WouldApply, _) => {
                        GuardState::WouldApply
                    }
                    (state, CrdChange::Unchanged) => state,
                };
            }
            Err(crate::kube::apply::ApplyError::UnknownKind(_)) => {
                events.emit(Event::Warning {
                    message: "this cluster does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (Kubernetes < 1.30): the admission guard that keeps Flux off bootstrap releases is not installed; `bootstrap check` still finds them in git".into(),
                });
                events.emit(Event::Guard {
                    policy,
                    state: GuardState::Unsupported,
                });
                return Ok(());
            }
            Err(e) => {
                return Err(Failure::Guard { source: e.into() }.into());
            }
        }
    }
    events.emit(Event::Guard { policy, state });
    Ok(())
}
