//! The release phase: each release starts the moment all of its own `needs`
//! have succeeded (no level-by-level batches). A failure skips exactly its
//! transitive dependents; everything else runs to completion.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use tokio::task::JoinSet;

use crate::event::{Emitter, Event, Outcome, ReleaseResult, Summary, Timing};
use crate::release::{Release, ReleaseId};
use crate::stop::{Stop, StopSignal, stopped};

/// What running one release produced.
#[derive(Debug, Clone)]
pub(crate) struct StepResult {
    pub outcome: Outcome,
    /// Time spent waiting for a helm slot (`--concurrency`) in the step.
    pub queued: Duration,
    pub message: Option<String>,
    pub diagnostics: Option<serde_json::Value>,
    pub diagnostics_text: Option<String>,
}

impl StepResult {
    pub(crate) fn new(outcome: Outcome) -> Self {
        StepResult {
            outcome,
            queued: Duration::ZERO,
            message: None,
            diagnostics: None,
            diagnostics_text: None,
        }
    }

    pub(crate) fn failed(message: impl Into<String>) -> Self {
        StepResult {
            message: Some(message.into()),
            ..StepResult::new(Outcome::Failed)
        }
    }
}

/// Runs one release (helm + hooks + ledger). The scheduler only decides when.
pub(crate) trait Runner: Send + Sync + 'static {
    fn run(
        &self,
        release: Arc<Release>,
        stop: StopSignal,
    ) -> impl Future<Output = StepResult> + Send;
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Options {
    /// Stop starting new releases after the first failure.
    pub fail_fast: bool,
    pub dry_run: bool,
    /// How long running releases may go on after the first interrupt.
    pub grace: Duration,
}

struct Finished {
    id: ReleaseId,
    result: StepResult,
    started: Instant,
    finished: Instant,
    /// When the release phase started.
    origin: Instant,
}

impl Finished {
    fn timing(&self) -> Timing {
        let duration = self.finished - self.started;
        Timing {
            run: duration.saturating_sub(self.result.queued),
            queued_slot: self.result.queued,
            queued_needs: self.started.saturating_duration_since(self.origin),
        }
    }

    fn release_result(&self) -> ReleaseResult {
        ReleaseResult {
            release: self.id.clone(),
            outcome: self.result.outcome,
            duration: self.finished - self.started,
            timing: self.timing(),
            message: self.result.message.clone(),
        }
    }
}

/// A release that never ran: no time of its own.
fn not_run(id: &ReleaseId, outcome: Outcome, message: String) -> ReleaseResult {
    ReleaseResult {
        release: id.clone(),
        outcome,
        duration: Duration::ZERO,
        timing: Timing::default(),
        message: Some(message),
    }
}

/// Runs `releases` (in execution order) and reports every event to `events`.
// One piece (tests/it/architecture.rs lists it): the scheduling state
// (waiting counts, the running set, helm slots, the stop) lives across one
// select loop.
pub(crate) async fn run<R: Runner>(
    cluster: &str,
    releases: &[Release],
    runner: Arc<R>,
    options: Options,
    events: &Emitter,
    stop: StopSignal,
) -> Summary {
    let run_started = Instant::now();
    let order: Vec<ReleaseId> = releases.iter().map(|r| r.id.clone()).collect();
    let position: HashMap<&ReleaseId, usize> =
        order.iter().enumerate().map(|(i, id)| (id, i)).collect();
    let by_id: HashMap<ReleaseId, Arc<Release>> = releases
        .iter()
        .map(|r| (r.id.clone(), Arc::new(r.clone())))
        .collect();
    let mut dependents: HashMap<&ReleaseId, Vec<&ReleaseId>> = HashMap::new();
    let mut waiting_on: HashMap<&ReleaseId, usize> = HashMap::new();
    for r in releases {
        let needs: Vec<&ReleaseId> = r
            .needs
            .iter()
            .filter(|n| position.contains_key(n))
            .collect();
        waiting_on.insert(&r.id, needs.len());
        for need in needs {
            dependents.entry(need).or_default().push(&r.id);
        }
    }
    // Ready releases start in execution order, so runs are reproducible.
    let mut ready: BTreeMap<usize, &ReleaseId> = order
        .iter()
        .filter(|id| waiting_on[id] == 0)
        .map(|id| (position[id], id))
        .collect();

    let mut running: JoinSet<Finished> = JoinSet::new();
    let mut running_ids: HashSet<ReleaseId> = HashSet::new();
    // Which release each task runs, so a task that panics is charged to its
    // own release (a JoinError knows only its task id).
    let mut tasks: HashMap<tokio::task::Id, (ReleaseId, Instant)> = HashMap::new();
    let mut finished: HashMap<ReleaseId, Finished> = HashMap::new();
    let mut skipped: HashMap<ReleaseId, String> = HashMap::new();
    let mut halted: Option<String> = None;
    let mut interrupted = false;

    loop {
        if halted.is_none() {
            while let Some((_, id)) = ready.pop_first() {
                let release = by_id[id].clone();
                let runner = runner.clone();
                let child_stop = stop.clone();
                let id = id.clone();
                events.emit(Event::ReleaseStarted {
                    release: id.clone(),
                });
                running_ids.insert(id.clone());
                let task_release = id.clone();
                // The run's deadline and wait messages go with the release.
                let bounds = crate::stop::Bounds::current();
                let task = running.spawn(bounds.scope(async move {
                    let started = Instant::now();
                    let result = runner.run(release, child_stop).await;
                    Finished {
                        id,
                        result,
                        started,
                        finished: Instant::now(),
                        origin: run_started,
                    }
                }));
                tasks.insert(task.id(), (task_release, Instant::now()));
            }
        }
        if running.is_empty() {
            break;
        }
        tokio::select! {
            joined = running.join_next() => {
                let Some(joined) = joined else { break };
                let done = match joined {
                    Ok(done) => done,
                    // A panicking runner is a bug; it must not take the run down with it.
                    Err(e) => {
                        let Some((id, started)) = tasks.remove(&e.id()) else { continue };
                        let what = if e.is_panic() { "panicked" } else { "was cancelled" };
                        Finished { id, result: StepResult::failed(format!("internal error: its step {what}; this is a bug in bootstrap")), started, finished: Instant::now(), origin: run_started }
                    }
                };
                running_ids.remove(&done.id);
                events.emit(Event::ReleaseFinished {
                    result: done.release_result(),
                    diagnostics: done.result.diagnostics.clone(),
                    diagnostics_text: done.result.diagnostics_text.clone(),
                });
                let id = by_id[&done.id].id.clone();
                if done.result.outcome.is_success() {
                    for dependent in dependents.get(&id).into_iter().flatten() {
                        if skipped.contains_key(*dependent) {
                            continue;
                        }
                        let count = waiting_on.get_mut(dependent).expect("known release");
                        *count -= 1;
                        if *count == 0 {
                            ready.insert(position[dependent], dependent);
                        }
                    }
                } else {
                    let reason = match done.result.outcome {
                        Outcome::Interrupted => format!("needs {id}, which was interrupted"),
                        _ => format!("needs {id}, which failed"),
                    };
                    skip_dependents(&id, &dependents, &reason, &mut skipped, events);
                    if options.fail_fast && done.result.outcome == Outcome::Failed && halted.is_none() {
                        halted = Some(format!("not started: --fail-fast stopped the run after {id} failed"));
                    }
                }
                finished.insert(done.id.clone(), done);
            }
            () = stopped(stop.clone(), Stop::Graceful), if !interrupted => {
                if *stop.borrow() == Stop::Graceful {
                    let mut running: Vec<ReleaseId> = running_ids.iter().cloned().collect();
                    running.sort();
                    events.emit(Event::Interrupting { running, grace: options.grace });
                }
                interrupted = true;
                if halted.is_none() {
                    halted = Some("the run was stopped before it started".to_string());
                }
            }
        }
    }

    let mut results = Vec::with_capacity(order.len());
    for id in &order {
        let result = match finished.get(id) {
            Some(done) => done.release_result(),
            None => {
                let message = skipped
                    .get(id)
                    .cloned()
                    .or_else(|| halted.clone())
                    .unwrap_or_else(|| "not started".to_string());
                // Never started: skipped, whatever stopped the run
                // (`interrupted` is for what was running and was stopped).
                let outcome = Outcome::Skipped;
                if !skipped.contains_key(id) {
                    events.emit(Event::ReleaseFinished {
                        result: not_run(id, outcome, message.clone()),
                        diagnostics: None,
                        diagnostics_text: None,
                    });
                }
                not_run(id, outcome, message)
            }
        };
        results.push(result);
    }

    let root_failures = order
        .iter()
        .filter(|id| {
            finished
                .get(*id)
                .is_some_and(|f| f.result.outcome == Outcome::Failed)
        })
        .cloned()
        .collect();
    let critical_path = critical_path(releases, &finished);
    Summary {
        cluster: cluster.to_string(),
        ok: results.iter().all(|r| r.outcome.is_success()),
        dry_run: options.dry_run,
        duration: run_started.elapsed(),
        releases: results,
        critical_path,
        root_failures,
        interrupted,
        lock_lost: None,
        phases: None,
    }
}

fn skip_dependents<'a>(
    failed: &ReleaseId,
    dependents: &HashMap<&'a ReleaseId, Vec<&'a ReleaseId>>,
    reason: &str,
    skipped: &mut HashMap<ReleaseId, String>,
    events: &Emitter,
) {
    let mut stack: Vec<&ReleaseId> = dependents.get(failed).cloned().unwrap_or_default();
    while let Some(id) = stack.pop() {
        if skipped.contains_key(id) {
            continue;
        }
        skipped.insert(id.clone(), reason.to_string());
        events.emit(Event::ReleaseFinished {
            result: not_run(id, Outcome::Skipped, reason.to_string()),
            diagnostics: None,
            diagnostics_text: None,
        });
        stack.extend(dependents.get(id).into_iter().flatten().copied());
    }
}

/// The chain of needs with the most work on it: the longest path through
/// the DAG weighted by each release's run time (queueing for a helm slot
/// left out, so `--concurrency` does not put a release on it). Ties go to
/// the chain ending later in execution order.
fn critical_path(releases: &[Release], finished: &HashMap<ReleaseId, Finished>) -> Vec<ReleaseId> {
    // releases are in execution order: every need comes before its dependent.
    let mut best: HashMap<&ReleaseId, (Duration, Option<&ReleaseId>)> = HashMap::new();
    let mut end: Option<(Duration, &ReleaseId)> = None;
    for r in releases {
        let Some(done) = finished.get(&r.id) else {
            continue;
        };
        let before = r
            .needs
            .iter()
            .filter_map(|n| best.get(n).map(|(cost, _)| (*cost, n)))
            .max_by_key(|(cost, _)| *cost);
        let cost = before.map(|(c, _)| c).unwrap_or_default() + done.timing().run;
        best.insert(&r.id, (cost, before.map(|(_, n)| n)));
        if end.is_none_or(|(longest, _)| cost >= longest) {
            end = Some((cost, &r.id));
        }
    }
    let mut path = Vec::new();
    let mut at = end.map(|(_, id)| id);
    while let Some(id) = at {
        path.push(id.clone());
        at = best.get(id).and_then(|(_, prev)| *prev);
    }
    path.reverse();
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::CrdPolicy;
    use std::sync::Mutex;

    /// Sleeps for a scripted time (virtual clock) and records start/end.
    struct Scripted {
        durations: HashMap<String, (u64, Outcome)>,
        log: Arc<Mutex<Vec<(String, u128, u128)>>>,
        origin: Instant,
    }

    impl Runner for Scripted {
        fn run(
            &self,
            release: Arc<Release>,
            _stop: StopSignal,
        ) -> impl Future<Output = StepResult> + Send {
            let (ms, outcome) = self
                .durations
                .get(&release.id.name)
                .copied()
                .unwrap_or((10, Outcome::Installed));
            let start = self.origin.elapsed().as_millis();
            let log = self.log.clone();
            let origin = self.origin;
            async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                assert!(
                    !release.id.name.starts_with("panic"),
                    "scripted panic of {}",
                    release.id
                );
                log.lock().unwrap().push((
                    release.id.name.clone(),
                    start,
                    origin.elapsed().as_millis(),
                ));
                // `queued-*` releases spent all but 10 ms of it waiting for a helm slot.
                let queued = if release.id.name.starts_with("queued") {
                    Duration::from_millis(ms.saturating_sub(10))
                } else {
                    Duration::ZERO
                };
                StepResult {
                    queued,
                    ..StepResult::new(outcome)
                }
            }
        }
    }

    fn release(name: &str, needs: &[&str]) -> Release {
        Release::fake(name, needs, CrdPolicy::Bootstrap)
    }

    async fn go(
        releases: Vec<Release>,
        durations: &[(&str, u64, Outcome)],
        fail_fast: bool,
    ) -> (Summary, Vec<(String, u128, u128)>) {
        let runner = Arc::new(Scripted {
            durations: durations
                .iter()
                .map(|(n, d, o)| (n.to_string(), (*d, *o)))
                .collect(),
            log: Arc::new(Mutex::new(Vec::new())),
            origin: Instant::now(),
        });
        let (events, _rx) = Emitter::since(std::time::Instant::now());
        let (_tx, stop) = tokio::sync::watch::channel(Stop::Run);
        let summary = run(
            "infra",
            &releases,
            runner.clone(),
            Options {
                fail_fast,
                dry_run: false,
                grace: Duration::from_secs(30),
            },
            &events,
            stop,
        )
        .await;
        let log = runner.log.lock().unwrap().clone();
        (summary, log)
    }

    fn start_of(log: &[(String, u128, u128)], name: &str) -> u128 {
        log.iter().find(|l| l.0 == name).map(|l| l.1).unwrap()
    }

    /// A runner that panics is a bug in bootstrap; the run goes on, and the
    /// failure is charged to the release whose step panicked, not to another
    /// one that happens to be running.
    #[tokio::test(start_paused = true)]
    async fn a_panicking_step_fails_its_own_release_only() {
        let releases = vec![
            release("a", &[]),
            release("panicky", &[]),
            release("b", &["a"]),
            release("c", &["panicky"]),
        ];
        let (summary, _) = go(
            releases,
            &[
                ("a", 100, Outcome::Installed),
                ("panicky", 10, Outcome::Installed),
            ],
            false,
        )
        .await;
        let outcome = |name: &str| {
            let r = summary
                .releases
                .iter()
                .find(|r| r.release.name == name)
                .unwrap();
            (r.outcome, r.message.clone().unwrap_or_default())
        };
        assert_eq!(outcome("a").0, Outcome::Installed);
        assert_eq!(outcome("b").0, Outcome::Installed);
        let (panicked, message) = outcome("panicky");
        assert_eq!(panicked, Outcome::Failed);
        assert!(message.contains("panicked"), "{message}");
        assert_eq!(outcome("c").0, Outcome::Skipped);
        assert_eq!(summary.root_failures, vec![ReleaseId::new("ns", "panicky")]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_release_starts_when_its_own_needs_are_done_not_its_level() {
        // a(100) -> c ; b(10) -> d : d must start at 10, not wait for a.
        let releases = vec![
            release("a", &[]),
            release("b", &[]),
            release("c", &["a"]),
            release("d", &["b"]),
        ];
        let (summary, log) = go(
            releases,
            &[
                ("a", 100, Outcome::Installed),
                ("b", 10, Outcome::Installed),
            ],
            false,
        )
        .await;
        assert!(summary.ok);
        assert_eq!(start_of(&log, "a"), 0);
        assert_eq!(start_of(&log, "b"), 0);
        assert_eq!(start_of(&log, "d"), 10);
        assert_eq!(start_of(&log, "c"), 100);
        let path: Vec<String> = summary
            .critical_path
            .iter()
            .map(|i| i.name.clone())
            .collect();
        assert_eq!(path, ["a", "c"]);
    }

    /// Time spent waiting for a helm slot is `--concurrency`'s, not the
    /// release's: it is reported apart and never puts a release on the
    /// critical path, which weighs run time along `needs`.
    #[tokio::test(start_paused = true)]
    async fn queueing_is_reported_apart_and_the_critical_path_weighs_run_time() {
        let releases = vec![
            release("a", &[]),
            release("queued-b", &[]),
            release("c", &["queued-b"]),
        ];
        let (summary, _) = go(
            releases,
            &[
                ("a", 50, Outcome::Installed),
                ("queued-b", 100, Outcome::Installed),
                ("c", 10, Outcome::Installed),
            ],
            false,
        )
        .await;
        let timing = |name: &str| {
            let r = summary
                .releases
                .iter()
                .find(|r| r.release.name == name)
                .unwrap();
            (r.duration.as_millis(), r.timing)
        };
        let (duration, b) = timing("queued-b");
        assert_eq!(duration, 100);
        assert_eq!(b.run, Duration::from_millis(10));
        assert_eq!(b.queued_slot, Duration::from_millis(90));
        let (_, c) = timing("c");
        assert_eq!(c.queued_needs, Duration::from_millis(100));
        assert_eq!(c.run, Duration::from_millis(10));
        // By finishing time the run ended with queued-b -> c (110 ms); by
        // work, a (50 ms) is longer than queued-b + c (20 ms).
        let path: Vec<String> = summary
            .critical_path
            .iter()
            .map(|i| i.name.clone())
            .collect();
        assert_eq!(path, ["a"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_skips_exactly_its_dependents() {
        let releases = vec![
            release("a", &[]),
            release("b", &["a"]),
            release("c", &["b"]),
            release("x", &[]),
            release("y", &["x"]),
        ];
        let (summary, log) = go(releases, &[("a", 10, Outcome::Failed)], false).await;
        assert!(!summary.ok);
        let outcome = |n: &str| {
            summary
                .releases
                .iter()
                .find(|r| r.release.name == n)
                .unwrap()
                .outcome
        };
        assert_eq!(outcome("a"), Outcome::Failed);
        assert_eq!(outcome("b"), Outcome::Skipped);
        assert_eq!(outcome("c"), Outcome::Skipped);
        assert_eq!(outcome("x"), Outcome::Installed);
        assert_eq!(outcome("y"), Outcome::Installed);
        assert_eq!(
            summary
                .releases
                .iter()
                .find(|r| r.release.name == "c")
                .unwrap()
                .message
                .as_deref(),
            Some("needs ns/a, which failed")
        );
        assert_eq!(summary.root_failures, vec![ReleaseId::new("ns", "a")]);
        assert_eq!(log.len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn fail_fast_starts_nothing_new() {
        let releases = vec![release("a", &[]), release("b", &[]), release("c", &["b"])];
        let (summary, _) = go(
            releases,
            &[("a", 5, Outcome::Failed), ("b", 20, Outcome::Installed)],
            true,
        )
        .await;
        let outcome = |n: &str| {
            summary
                .releases
                .iter()
                .find(|r| r.release.name == n)
                .unwrap()
                .outcome
        };
        assert_eq!(outcome("b"), Outcome::Installed, "running work finishes");
        assert_eq!(outcome("c"), Outcome::Skipped);
    }

    #[tokio::test(start_paused = true)]
    async fn an_interrupt_lets_running_work_finish_and_starts_nothing_new() {
        let releases = vec![release("a", &[]), release("b", &["a"]), release("x", &[])];
        let runner = Arc::new(Scripted {
            durations: [
                ("a".to_string(), (100, Outcome::Installed)),
                ("x".to_string(), (10, Outcome::Installed)),
            ]
            .into(),
            log: Arc::new(Mutex::new(Vec::new())),
            origin: Instant::now(),
        });
        let (events, mut rx) = Emitter::since(std::time::Instant::now());
        let (tx, stop) = tokio::sync::watch::channel(Stop::Run);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            tx.send(Stop::Graceful).unwrap();
            // Keep the sender alive until the run is over.
            tokio::time::sleep(Duration::from_secs(3600)).await;
        });
        let options = Options {
            fail_fast: false,
            dry_run: false,
            grace: Duration::from_secs(30),
        };
        let summary = run("infra", &releases, runner, options, &events, stop).await;
        let outcome = |n: &str| {
            summary
                .releases
                .iter()
                .find(|r| r.release.name == n)
                .unwrap()
                .outcome
        };
        assert!(summary.interrupted);
        assert_eq!(outcome("a"), Outcome::Installed, "running work finishes");
        assert_eq!(outcome("x"), Outcome::Installed);
        assert_eq!(outcome("b"), Outcome::Skipped, "nothing new starts");
        drop(events);
        let mut running = None;
        while let Some(e) = rx.recv().await {
            if let Event::Interrupting { running: r, .. } = e.event {
                running = Some(r);
            }
        }
        assert_eq!(running, Some(vec![ReleaseId::new("ns", "a")]));
    }
}
