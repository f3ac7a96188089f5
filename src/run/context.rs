//! A run's context, as helm's `action.Configuration` is an action's: what
//! the engines that change a cluster (`apply`, `destroy`) work with, built
//! once by the command from its prerequisites and its session, and the
//! `--timeout` that bounds it (docs/design.md#one-deadline).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::Session;
use crate::event::{Emitter, Event};
use crate::kube::client::Connection;
use crate::plan::Plan;
use crate::stop::{Bounds, Stop, StopSignal};

/// One cluster's run.
pub(crate) struct Run<'a, H> {
    pub plan: &'a Plan,
    /// helm as the run invokes it ([`super::Prepared::helm`]).
    pub helm: Arc<H>,
    /// The cluster, answering.
    pub connection: &'a Connection,
    /// Where the run's events go (the session's reporter).
    pub events: Emitter,
    /// Ctrl-C, a signal or `--timeout` (the session's).
    pub stop: StopSignal,
    /// When `--timeout` ends the run; `None` without one.
    pub deadline: Option<Instant>,
}

impl<H> Run<'_, H> {
    /// `work` under the run's bounds: every Kubernetes API call and retry
    /// it makes, in the tasks it spawns too, ends by the run's deadline, and
    /// a wait that goes on says why as a warning event. The engines run
    /// their whole body in it; `kube::retry` reads it as
    /// [`Bounds::current`] (a task-local, so that the many calls deep in
    /// the engines need not each be handed the run).
    pub(crate) async fn bounded<F: Future>(&self, work: F) -> F::Output {
        bounds(&self.events, self.deadline).scope(work).await
    }
}

/// The bounds of a run whose events go to `events`.
fn bounds(events: &Emitter, deadline: Option<Instant>) -> Bounds {
    let events = events.clone();
    Bounds {
        deadline,
        say: Some(Arc::new(move |message| {
            events.emit(Event::Warning { message })
        })),
    }
}

/// `--timeout`: the deadline of a run, counted from the command's start
/// (loading and the prerequisites count), and what reaching it does: a
/// warning, then a stop now. Dropped, it does nothing more.
pub(crate) struct Timeout {
    deadline: Option<Instant>,
    reached: Arc<AtomicBool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Timeout {
    /// Starts counting for `session`'s run; `timeout: None`, never reached.
    pub(crate) fn start(
        timeout: Option<Duration>,
        begun: std::time::Instant,
        session: &Session,
    ) -> Timeout {
        let reached = Arc::new(AtomicBool::new(false));
        let Some(timeout) = timeout else {
            return Timeout {
                deadline: None,
                reached,
                task: None,
            };
        };
        let deadline = Instant::now() + timeout.saturating_sub(begun.elapsed());
        let (stop, events, flag) = (session.stopper(), session.events.clone(), reached.clone());
        let task = tokio::spawn(async move {
            tokio::time::sleep_until(deadline).await;
            flag.store(true, Ordering::SeqCst);
            events.emit(Event::Warning {
                message: format!(
                    "--timeout {} reached; stopping",
                    crate::duration::span(timeout)
                ),
            });
            let _ = stop.send(Stop::Now);
        });
        Timeout {
            deadline: Some(deadline),
            reached,
            task: Some(task),
        }
    }

    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Whether the run was stopped by it.
    pub(crate) fn reached(&self) -> bool {
        self.reached.load(Ordering::SeqCst)
    }
}

impl Drop for Timeout {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_run_is_bounded_by_its_deadline_and_says_why_it_waits() {
        let (events, mut rx) = Emitter::since(std::time::Instant::now());
        let deadline = Instant::now() + Duration::from_secs(5);
        let seen = bounds(&events, Some(deadline))
            .scope(async {
                // In a task the run spawns, as the scheduler carries it on.
                let bounds = Bounds::current();
                tokio::spawn(bounds.clone().scope(async {
                    let bounds = Bounds::current();
                    bounds.say("waiting for the Kubernetes API server".into());
                    bounds.clamp(Instant::now() + Duration::from_secs(60))
                }))
                .await
                .unwrap()
            })
            .await;
        assert_eq!(seen, deadline);
        let said = rx.try_recv().unwrap();
        assert!(
            matches!(&said.event, Event::Warning { message } if message == "waiting for the Kubernetes API server"),
            "{said:?}"
        );
        // Outside the run, nothing bounds a wait.
        assert!(Bounds::current().deadline.is_none());
    }
}
