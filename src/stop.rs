//! The run-wide stop signal (Ctrl-C, SIGTERM, `--timeout`) and the one way to
//! wait on it. Everything that can be interrupted (preflight calls, helm
//! processes, hooks, the scheduler, destroy's uninstalls) waits through
//! [`stopped`], so "stopping" means the same everywhere.
//!
//! No project imports: helm, kube and the engines all depend on this module.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// How far running work may go once the run is being stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stop {
    /// Keep going.
    Run,
    /// First Ctrl-C: start nothing new; running helm operations and hooks
    /// may finish within [`GRACE`].
    Graceful,
    /// Second Ctrl-C, the grace period over, or `--timeout`: stop now.
    Now,
}

pub type StopSignal = watch::Receiver<Stop>;

/// The grace period running helm operations get after the first Ctrl-C.
pub const GRACE: Duration = Duration::from_secs(30);

/// Resolves once the run is being stopped at least as hard as `level`
/// (`Graceful` resolves on `Graceful` or `Now`). Never resolves once nobody
/// can stop the run any more (the sender is gone).
pub async fn stopped(mut stop: StopSignal, level: Stop) {
    loop {
        if *stop.borrow_and_update() >= level && level != Stop::Run {
            return;
        }
        if stop.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Why [`interruptible`] or [`until_stopped`] gave up on its work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// Runs `work` unless the run starts stopping first: for work that changes
/// nothing and may be abandoned at once (reads, preflight).
pub async fn interruptible<T>(
    stop: &StopSignal,
    work: impl Future<Output = T>,
) -> Result<T, Interrupted> {
    tokio::select! {
        value = work => Ok(value),
        () = stopped(stop.clone(), Stop::Graceful) => Err(Interrupted),
    }
}

/// Runs `work` through a stop: on `Graceful` it gets `grace` more time
/// (`on_grace` runs when that starts), on `Now` it is dropped at once.
/// Dropping a helm future stops helm (SIGTERM to its process group).
pub async fn until_stopped<T>(
    work: impl Future<Output = T>,
    stop: &StopSignal,
    grace: Duration,
    on_grace: impl FnOnce(),
) -> Result<T, Interrupted> {
    tokio::pin!(work);
    tokio::select! {
        value = &mut work => return Ok(value),
        () = stopped(stop.clone(), Stop::Graceful) => {}
    }
    if *stop.borrow() == Stop::Now {
        return Err(Interrupted);
    }
    on_grace();
    let deadline = Instant::now() + grace;
    tokio::select! {
        value = &mut work => Ok(value),
        () = stopped(stop.clone(), Stop::Now) => Err(Interrupted),
        () = tokio::time::sleep_until(deadline) => Err(Interrupted),
    }
}

/// Where a wait says why it goes on.
pub type Say = Arc<dyn Fn(String) + Send + Sync>;

/// What bounds every wait of a run (docs/design.md#one-deadline): the
/// deadline of `--timeout`, and where a wait says why it goes on. Set for
/// the whole run with [`Bounds::scope`] (by `run::Run::bounded`, the one
/// place a run sets them); tasks the run spawns carry it on
/// through [`Bounds::current`].
#[derive(Clone, Default)]
pub struct Bounds {
    pub deadline: Option<Instant>,
    pub say: Option<Say>,
}

tokio::task_local! {
    static BOUNDS: Bounds;
}

impl Bounds {
    /// The bounds of the run this task belongs to; none outside a run.
    pub fn current() -> Bounds {
        BOUNDS.try_with(Clone::clone).unwrap_or_default()
    }

    /// Runs `work` under these bounds.
    pub async fn scope<F: Future>(self, work: F) -> F::Output {
        BOUNDS.scope(self, work).await
    }

    /// The earlier of `deadline` and the run's.
    pub fn clamp(&self, deadline: Instant) -> Instant {
        self.deadline.map_or(deadline, |d| d.min(deadline))
    }

    /// Says why a wait goes on (nowhere outside a run).
    pub fn say(&self, message: String) {
        if let Some(say) = &self.say {
            say(message);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn work_finishes_without_a_stop() {
        let (_tx, rx) = watch::channel(Stop::Run);
        assert_eq!(interruptible(&rx, async { 7 }).await, Ok(7));
        let r = until_stopped(async { 8 }, &rx, GRACE, || panic!("no grace")).await;
        assert_eq!(r, Ok(8));
    }

    #[tokio::test(start_paused = true)]
    async fn interruptible_gives_up_on_the_first_stop() {
        let (tx, rx) = watch::channel(Stop::Run);
        let work = tokio::time::sleep(Duration::from_secs(60));
        let stopper = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            tx.send(Stop::Graceful).unwrap();
        };
        let (result, ()) = tokio::join!(interruptible(&rx, work), stopper);
        assert_eq!(result, Err(Interrupted));
    }

    #[tokio::test(start_paused = true)]
    async fn graceful_stop_lets_work_finish_within_the_grace_period() {
        let (tx, rx) = watch::channel(Stop::Graceful);
        let announced = AtomicBool::new(false);
        let work = async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            "done"
        };
        let result = until_stopped(work, &rx, GRACE, || announced.store(true, Ordering::SeqCst));
        assert_eq!(result.await, Ok("done"));
        assert!(announced.load(Ordering::SeqCst));
        drop(tx);
    }

    #[tokio::test(start_paused = true)]
    async fn graceful_stop_ends_work_after_the_grace_period() {
        let (_tx, rx) = watch::channel(Stop::Graceful);
        let started = Instant::now();
        let work = tokio::time::sleep(Duration::from_secs(600));
        assert_eq!(
            until_stopped(work, &rx, GRACE, || {}).await,
            Err(Interrupted)
        );
        assert_eq!(started.elapsed(), GRACE);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hard_stop_ends_work_at_once() {
        let (tx, rx) = watch::channel(Stop::Graceful);
        let work = tokio::time::sleep(Duration::from_secs(600));
        let stopper = async {
            tokio::time::sleep(Duration::from_secs(2)).await;
            tx.send(Stop::Now).unwrap();
        };
        let started = Instant::now();
        let (result, ()) = tokio::join!(until_stopped(work, &rx, GRACE, || {}), stopper);
        assert_eq!(result, Err(Interrupted));
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn bounds_reach_the_work_they_scope_and_clamp_to_the_run() {
        assert!(Bounds::current().deadline.is_none());
        let run_ends = Instant::now() + Duration::from_secs(40);
        let bounds = Bounds {
            deadline: Some(run_ends),
            say: None,
        };
        let seen = bounds
            .scope(async {
                let later = Instant::now() + Duration::from_secs(60);
                let sooner = Instant::now() + Duration::from_secs(5);
                let current = Bounds::current();
                (current.clamp(later), current.clamp(sooner), sooner)
            })
            .await;
        assert_eq!(seen.0, run_ends);
        assert_eq!(seen.1, seen.2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_sender_never_stops_anything() {
        let (tx, rx) = watch::channel(Stop::Run);
        drop(tx);
        let work = async {
            tokio::time::sleep(Duration::from_secs(100)).await;
            1
        };
        assert_eq!(interruptible(&rx, work).await, Ok(1));
    }
}
