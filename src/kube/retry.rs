//! Retries for API calls: the API server blips while Cilium comes up, and a
//! bootstrap must ride that out instead of failing.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::stop::Bounds;

/// How long transient API errors are retried for one call.
pub const API_RETRY_BUDGET: Duration = Duration::from_secs(60);

/// Errors worth another try: connection problems, timeouts, 429 and 5xx.
pub fn is_transient(error: &::kube::Error) -> bool {
    match error {
        ::kube::Error::Api(status) => status.code == 429 || status.code >= 500,
        ::kube::Error::HyperError(_) | ::kube::Error::Service(_) => true,
        _ => false,
    }
}

/// Runs `op` until it succeeds, fails permanently, or `budget` is spent,
/// backing off 200 ms, 400 ms, ... up to 5 s between tries. The budget is a
/// hard bound, and so is the run's deadline (`--timeout`): an attempt still
/// running when either ends is abandoned. A wait that goes on says why
/// (once it has lasted [`SAY_AFTER`], then every [`SAY_EVERY`]) where the
/// run's bounds say to.
pub async fn retry<T, F, Fut>(budget: Duration, op: F) -> Result<T, ::kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ::kube::Error>>,
{
    let bounds = Bounds::current();
    let mut failing_since: Option<Instant> = None;
    let mut said: Option<Instant> = None;
    let end = bounds.clamp(Instant::now() + budget);
    retry_with(budget, op, |e, pause| {
        let now = Instant::now();
        let since = *failing_since.get_or_insert(now);
        // Said now when waiting for the next try would otherwise go past
        // the moment to say it.
        let due = match said {
            None => now + pause - since >= SAY_AFTER,
            Some(at) => now + pause - at > SAY_EVERY,
        };
        if due {
            said = Some(now);
            bounds.say(format!(
                "waiting for the Kubernetes API server (for {} now, at most {} more): {}",
                crate::duration::span(now - since),
                crate::duration::span(end.saturating_duration_since(now)),
                describe(e)
            ));
        }
    })
    .await
}

/// How long a retried call fails before it says why it waits.
pub const SAY_AFTER: Duration = Duration::from_secs(2);
/// How often a wait that goes on says so again.
pub const SAY_EVERY: Duration = Duration::from_secs(5);
/// The longest one attempt may go without an answer before it counts as a
/// failed try (and the wait says so).
pub const ATTEMPT: Duration = Duration::from_secs(20);

/// [`retry`], calling `on_retry(error, next try in)` before each pause (to
/// show why a wait goes on).
pub async fn retry_with<T, F, Fut>(
    budget: Duration,
    mut op: F,
    mut on_retry: impl FnMut(&::kube::Error, Duration),
) -> Result<T, ::kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ::kube::Error>>,
{
    let started = Instant::now();
    let deadline = Bounds::current().clamp(started + budget);
    let mut delay = Duration::from_millis(200);
    let mut last: Option<::kube::Error> = None;
    loop {
        let cut = deadline.min(Instant::now() + ATTEMPT);
        let attempt = match tokio::time::timeout_at(cut, op()).await {
            Ok(result) => result,
            // An attempt without an answer is one failed try.
            Err(_) if cut < deadline => Err(::kube::Error::Service(
                format!("no answer within {}", crate::duration::span(ATTEMPT)).into(),
            )),
            // Out of time: the last real error says more than "timed out".
            Err(_) => {
                return Err(last.unwrap_or_else(|| {
                    ::kube::Error::Service(
                        format!(
                            "no answer within {}",
                            crate::duration::span(deadline - started)
                        )
                        .into(),
                    )
                }));
            }
        };
        match attempt {
            Ok(value) => return Ok(value),
            Err(e) if is_transient(&e) && Instant::now() < deadline => {
                let pause = delay.min(deadline - Instant::now());
                on_retry(&e, pause);
                last = Some(e);
                tokio::time::sleep(pause).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
            Err(e) => return Err(e),
        }
    }
}

pub fn is_not_found(error: &::kube::Error) -> bool {
    matches!(error, ::kube::Error::Api(status) if status.code == 404)
}

pub fn is_conflict(error: &::kube::Error) -> bool {
    matches!(error, ::kube::Error::Api(status) if status.code == 409)
}

/// An API error in a person's words: the server's message and status code,
/// not the Debug dump of a `Status`.
/// Why a request did not get an answer, in the words of the innermost
/// error (`Connection refused (os error 111)`, a DNS or TLS failure), not
/// the layers of client and service wrappers above it. An answer from the
/// API server is [`describe`]d.
pub fn root_cause(e: &::kube::Error) -> String {
    if let ::kube::Error::Api(_) = e {
        return describe(e);
    }
    crate::error::innermost(e)
}

pub fn describe(e: &::kube::Error) -> String {
    crate::error::describe_kube(e)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    fn unavailable() -> ::kube::Error {
        ::kube::Error::Api(Box::new(
            ::kube::core::Status::failure("etcd is down", "ServiceUnavailable").with_code(503),
        ))
    }

    /// A call failing with 503 for good, inside a run whose `--timeout`
    /// ends after 40 s: it gives up at the run's deadline, not after its own
    /// 60 s budget, and says why it waits at least every 5 s.
    #[tokio::test(start_paused = true)]
    async fn the_runs_deadline_bounds_a_retry_and_the_wait_says_why() {
        let said = Arc::new(Mutex::new(Vec::<(Duration, String)>::new()));
        let started = Instant::now();
        let sink = said.clone();
        let bounds = Bounds {
            deadline: Some(started + Duration::from_secs(40)),
            say: Some(Arc::new(move |m| {
                sink.lock().unwrap().push((started.elapsed(), m));
            })),
        };
        let result: Result<(), _> = bounds
            .scope(retry(Duration::from_secs(60), || async {
                Err(unavailable())
            }))
            .await;
        assert_eq!(started.elapsed(), Duration::from_secs(40));
        assert_eq!(describe(&result.unwrap_err()), "etcd is down (503)");
        let said = said.lock().unwrap();
        assert!(!said.is_empty());
        assert!(said[0].0 <= Duration::from_secs(3), "{said:?}");
        for pair in said.windows(2) {
            assert!(pair[1].0 - pair[0].0 <= Duration::from_secs(6), "{said:?}");
        }
        assert!(
            said[0]
                .1
                .starts_with("waiting for the Kubernetes API server (for ")
                && said[0].1.ends_with("): etcd is down (503)"),
            "{said:?}"
        );
    }

    /// An attempt that never answers is one failed try, not the whole wait.
    #[tokio::test(start_paused = true)]
    async fn an_attempt_without_an_answer_is_retried() {
        let tries = Arc::new(Mutex::new(0));
        let counted = tries.clone();
        let result = retry(Duration::from_secs(60), move || {
            let counted = counted.clone();
            async move {
                let n = {
                    let mut n = counted.lock().unwrap();
                    *n += 1;
                    *n
                };
                if n == 1 {
                    std::future::pending::<()>().await;
                }
                Ok::<_, ::kube::Error>(n)
            }
        })
        .await;
        assert_eq!(result.unwrap(), 2);
    }
}
