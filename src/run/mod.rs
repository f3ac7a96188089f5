//! What every cluster command (apply, destroy, status) stands on: the async
//! runtime, the prerequisites (helm, a reachable cluster), and the session
//! (reporter task, signals, stop). The commands are siblings on this layer
//! and never import each other.

mod context;
pub(crate) mod record;
pub(crate) mod session;
pub(crate) mod termination;

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use crate::error::{Error, Failure, Prerequisite};
use crate::event::{Emitter, Event};
use crate::helm::Helm;
use crate::helm::binary::HelmCli;
use crate::helm::cache::ChartCache;
use crate::kube::client::Connection;
use crate::kube::lock::{Lock, LockCheck, LockNote, Predecessor};
use crate::plan::Plan;
use crate::stop::{GRACE, Stop, StopSignal, interruptible};

pub(crate) use context::{Run, Timeout};
pub(crate) use session::Session;

/// How long preflight waits for the API server to answer.
pub(crate) const REACHABILITY_BUDGET: Duration = Duration::from_secs(30);

/// Where a cluster command finds helm and the cluster (the global flags).
#[derive(Debug, Clone, Default)]
pub struct Target<'a> {
    /// `None`: `helm` from PATH.
    pub helm: Option<&'a Path>,
    pub kubeconfig: Option<&'a Path>,
    /// Where the caches live, as `Config::cache_dir` resolves it (`None`:
    /// no directory to put them in).
    pub cache_dir: Option<std::path::PathBuf>,
    /// `--no-chart-cache`.
    pub no_chart_cache: bool,
    /// `--wait-for-api`, else [`REACHABILITY_BUDGET`].
    pub wait_for_api: Duration,
    /// apply's `--timeout`, which bounds the wait for the API server too.
    pub timeout: Option<Duration>,
}

impl Target<'_> {
    /// The chart cache (docs/design.md#chart-cache): `--cache-dir`, else
    /// the user's cache directory; none with `--no-chart-cache`, or (with a
    /// warning) when there is no home to put it in.
    pub fn chart_cache(&self) -> Option<ChartCache> {
        if self.no_chart_cache {
            return None;
        }
        let dir = self.cache_dir.clone();
        if dir.is_none() {
            eprintln!(
                "warning: no chart cache (neither XDG_CACHE_HOME nor HOME is set): helm downloads each chart at each use; give one with --cache-dir"
            );
        }
        dir.map(ChartCache::new)
    }

    /// This target for a run bounded by `timeout` (apply's `--timeout`).
    pub(crate) fn timed(self, timeout: Option<Duration>) -> Self {
        Target { timeout, ..self }
    }

    /// How long the prerequisites wait for the API server: `--wait-for-api`,
    /// cut to `--timeout`.
    fn reachability(&self) -> Duration {
        self.timeout
            .map_or(self.wait_for_api, |t| t.min(self.wait_for_api))
    }

    /// helm as the cluster commands run it: `--helm`, the chart cache.
    pub fn helm(&self) -> HelmCli {
        HelmCli::new(self.helm.map(Path::to_path_buf)).with_cache(self.chart_cache())
    }
}

/// Runs `work` on a multi-threaded runtime: the one place a cluster command
/// builds one.
pub(crate) fn block_on<T>(work: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|source| Failure::Runtime { source })?
        .block_on(work)
}

/// What a cluster command stands on once its [`prerequisites`] hold.
pub(crate) struct Prepared {
    /// helm as the run invokes it (`--helm`, the chart cache, the grace
    /// period of a stop).
    pub(crate) helm: HelmCli,
    /// The cluster, through the plan's kubeconfig context, answering.
    pub(crate) connection: Connection,
    /// What `helm version` said.
    pub(crate) version: crate::helm::HelmVersion,
}

/// Prerequisites every cluster command checks before anything else: a
/// usable helm and a reachable cluster through a usable kubeconfig context.
/// Failures exit 2 (helm, kubeconfig) or 1 (cluster unreachable); nothing
/// has changed when they happen. The wait for the API server is bounded by
/// `--wait-for-api` (default [`REACHABILITY_BUDGET`]) and `--timeout`, says
/// on stderr why it goes on, and ends at once on Ctrl-C.
pub(crate) async fn prerequisites(target: Target<'_>, plan: &Plan) -> Result<Prepared, Error> {
    // What runs killed before this one left (docs/design.md#children-and-temporary-files).
    crate::child::sweep_stale();
    let helm = target.helm().with_grace(GRACE);
    let version = helm
        .version()
        .await
        .map_err(|e| Prerequisite::Helm { error: e.into() })?;
    // The plan's context is the run's: `--context` was applied when the
    // plan was loaded (config::load_for), the one place it overrides.
    let connection =
        crate::kube::client::connect(target.kubeconfig, plan.cluster.context.as_deref()).await?;
    let context = connection.target.context.clone().unwrap_or_default();
    let server = connection.server.clone();
    let budget = target.reachability();
    let begun = tokio::time::Instant::now();
    let mut said = None::<(tokio::time::Instant, String)>;
    let say = |e: &::kube::Error, _next: Duration| {
        // The reason when it changes; the same reason again every 10 s, with
        // how long it has waited: enough to see the wait is alive and why.
        let now = tokio::time::Instant::now();
        let why = crate::kube::retry::root_cause(e);
        match &said {
            Some((at, last)) if *last == why && now - *at < Duration::from_secs(10) => {}
            Some((_, last)) if *last == why => {
                said = Some((now, why));
                eprintln!(
                    "still waiting for the Kubernetes API server at {server} ({} of {})",
                    crate::duration::span(now - begun),
                    crate::duration::span(budget),
                );
            }
            _ => {
                eprintln!(
                    "waiting for the Kubernetes API server of context `{context}` at {server} (up to {}): {why}",
                    crate::duration::span(budget),
                );
                said = Some((now, why));
            }
        }
    };
    let reachable =
        crate::kube::retry::retry_with(budget, || connection.client.apiserver_version(), say);
    let reachable = tokio::select! {
        result = reachable => result,
        _ = tokio::signal::ctrl_c() => return Err(Error::Interrupted),
    };
    if let Err(e) = reachable {
        return Err(Failure::Unreachable {
            context,
            server: connection.server.clone(),
            budget,
            source: crate::kube::retry::root_cause(&e).into(),
        }
        .into());
    }
    Ok(Prepared {
        helm,
        connection,
        version,
    })
}

/// The cluster lock of a run that changes the cluster, and the stop signal
/// the run's engine follows: the command's own (Ctrl-C, `--timeout`), plus a
/// stop when the lock is lost mid-run (deleted, or taken by another run) —
/// start nothing new, give running helm operations the grace period.
pub(crate) struct Held {
    lock: Option<Lock>,
    pub stop: StopSignal,
    lost: Option<tokio::sync::watch::Receiver<Option<crate::kube::lock::LockLost>>>,
    follower: Option<tokio::task::JoinHandle<()>>,
    /// Says when the API server (its URL) stops and starts answering again.
    outages: Option<(tokio::task::JoinHandle<()>, String)>,
}

impl Held {
    /// The run whose expired lock this run (or an earlier run, which
    /// passed it on) took over, if it did.
    pub(crate) fn took_over(&self) -> Option<Predecessor> {
        self.lock.as_ref().and_then(|l| l.took_over().cloned())
    }

    /// The check before each step that changes the cluster; `None` without
    /// a lock (a dry run).
    pub(crate) fn checker(&self) -> Option<LockCheck> {
        self.lock.as_ref().map(Lock::checker)
    }

    /// Why the lock was lost, if it was.
    pub(crate) fn lost(&self) -> Option<crate::kube::lock::LockLost> {
        self.lost.as_ref().and_then(|l| l.borrow().clone())
    }

    /// A run that ended in an error because the lost lock stopped it (in
    /// preflight, the CRD phase, before any release), not because its user
    /// did: the lock's error, exit 3, instead of "interrupted"
    /// (docs/design.md#cluster-lock). `user`: the command's own stop.
    pub(crate) fn judge<T>(
        &self,
        result: Result<T, Error>,
        user: &StopSignal,
        command: &str,
        cluster: &str,
    ) -> Result<T, Error> {
        match (result, self.lost()) {
            (Err(Error::Interrupted), Some(why)) if *user.borrow() == Stop::Run => {
                Err(lock_lost(command, cluster, &why.to_string()))
            }
            (result, _) => result,
        }
    }

    /// Gives the lock back; a failure to is a warning (the Lease then
    /// expires by itself). `pass_on`: a dead run that may have left a
    /// release `pending-*` this run did not recover, recorded in the
    /// released Lease for the next run.
    pub(crate) async fn release(self, events: &Emitter, pass_on: Option<&Predecessor>) {
        if let Some(follower) = self.follower {
            follower.abort();
        }
        if let Some((outages, _)) = &self.outages {
            outages.abort();
        }
        let Some(lock) = self.lock else { return };
        // An outage said and not yet seen over (the next renewal had not
        // come): the release's answer says it is.
        let away = lock.health().borrow().clone();
        match lock.release(pass_on).await {
            Err(message) => events.emit(Event::Warning {
                message: message.to_string(),
            }),
            Ok(()) => {
                if let (Some(away), Some((_, server))) = (away, &self.outages) {
                    events.emit(Event::Warning {
                        message: answers_again(server, away.since),
                    });
                }
            }
        }
    }
}

/// The error of a run that lost its cluster lock.
pub(crate) fn lock_lost(command: &str, cluster: &str, why: &str) -> Error {
    Error::Locked(format!(
        "{command} of cluster `{cluster}` stopped: the cluster lock was lost ({why}); nothing new was started after that. Run `bootstrap {command}` again once the other run has finished"
    ))
}

/// Takes the cluster lock (not for a dry run, which changes nothing);
/// taking over an expired lock is a warning. `helm_timeout`: the longest a
/// helm operation of this run may last (its longest release budget).
pub(crate) async fn lock(
    connection: &crate::kube::client::Connection,
    operation: &str,
    helm_timeout: Duration,
    dry_run: bool,
    events: &Emitter,
    stop: &StopSignal,
) -> Result<Held, Error> {
    if dry_run {
        return Ok(Held {
            lock: None,
            stop: stop.clone(),
            lost: None,
            follower: None,
            outages: None,
        });
    }
    let note = |note: LockNote| match note {
        LockNote::Watching(step) => events.emit(Event::PreflightStep { step }),
        LockNote::TookOver(message) => events.emit(Event::Warning { message }),
    };
    let client = &connection.client;
    let lock = interruptible(stop, Lock::acquire(client, operation, helm_timeout, note)).await??;
    let lost = lock.lost();
    let (tx, inner) = tokio::sync::watch::channel(*stop.borrow());
    let follower = tokio::spawn(follow(
        stop.clone(),
        lost.clone(),
        std::sync::Arc::new(tx),
        events.clone(),
    ));
    let outages = tokio::spawn(say_outages(
        lock.health(),
        connection.server.clone(),
        events.clone(),
    ));
    Ok(Held {
        lock: Some(lock),
        stop: inner,
        lost: Some(lost),
        follower: Some(follower),
        outages: Some((outages, connection.server.clone())),
    })
}

fn answers_again(server: &str, since: tokio::time::Instant) -> String {
    format!(
        "the Kubernetes API server at {server} answers again, after {} without an answer",
        crate::duration::span(since.elapsed())
    )
}

/// Says when the API server stops answering the lock's renewals and when
/// it answers again (docs/design.md#cluster-lock): an outage is seen
/// within a renewal or two (5 to 10 s), in the tool's own words, whether
/// the server refuses connections or stops answering.
async fn say_outages(
    mut health: tokio::sync::watch::Receiver<Option<crate::kube::lock::Unanswered>>,
    server: String,
    events: Emitter,
) {
    let mut away: Option<tokio::time::Instant> = None;
    while health.changed().await.is_ok() {
        let now = health.borrow_and_update().clone();
        match (now, away) {
            (Some(unanswered), None) => {
                away = Some(unanswered.since);
                let running: Vec<String> =
                    events.running().iter().map(ToString::to_string).collect();
                let in_flight = match running.as_slice() {
                    [] => "nothing in flight".to_string(),
                    names => format!("in flight: {}", names.join(", ")),
                };
                events.emit(Event::Warning {
                    message: format!(
                        "the Kubernetes API server at {server} has not answered for {} ({}; {in_flight}); waiting for it: what runs goes on when it answers, and the run stops (exit 3) if it stays away until the cluster lock may be lost",
                        crate::duration::span(unanswered.since.elapsed()),
                        unanswered.cause
                    ),
                });
            }
            (None, Some(since)) => {
                away = None;
                events.emit(Event::Warning {
                    message: answers_again(&server, since),
                });
            }
            _ => {}
        }
    }
}

/// Forwards the command's stop to the engine's, and stops the engine
/// (gracefully, then hard after [`GRACE`]) when the lock is lost.
async fn follow(
    mut outer: StopSignal,
    mut lost: tokio::sync::watch::Receiver<Option<crate::kube::lock::LockLost>>,
    inner: std::sync::Arc<tokio::sync::watch::Sender<Stop>>,
    events: Emitter,
) {
    let mut lost_open = true;
    loop {
        tokio::select! {
            changed = outer.changed() => {
                if changed.is_err() {
                    return;
                }
                let level = *outer.borrow_and_update();
                inner.send_if_modified(|now| {
                    let raise = level > *now;
                    if raise { *now = level; }
                    raise
                });
            }
            changed = lost.changed(), if lost_open => {
                if changed.is_err() {
                    lost_open = false;
                    continue;
                }
                let Some(why) = lost.borrow_and_update().clone() else { continue };
                events.emit(Event::Warning {
                    message: format!(
                        "lost the cluster lock: {why}; starting nothing new, running helm operations get {} to finish",
                        crate::duration::span(GRACE)
                    ),
                });
                inner.send_if_modified(|now| {
                    let raise = *now < Stop::Graceful;
                    if raise { *now = Stop::Graceful; }
                    raise
                });
                lost_open = false;
                let inner_now = inner.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(GRACE).await;
                    let _ = inner_now.send(Stop::Now);
                });
            }
        }
    }
}
