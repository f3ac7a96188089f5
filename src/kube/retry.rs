//! Retries for API calls: the API server blips while Cilium comes up, and a
//! bootstrap must ride that out instead of failing.

use std::future::Future;
use std::time::Duration;

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
/// hard bound: an attempt still running when it ends is abandoned.
pub async fn retry<T, F, Fut>(budget: Duration, op: F) -> Result<T, ::kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ::kube::Error>>,
{
    retry_with(budget, op, |_, _| {}).await
}

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
    let deadline = tokio::time::Instant::now() + budget;
    let mut delay = Duration::from_millis(200);
    let mut last: Option<::kube::Error> = None;
    loop {
        let attempt = match tokio::time::timeout_at(deadline, op()).await {
            Ok(result) => result,
            // Out of time: the last real error says more than "timed out".
            Err(_) => {
                return Err(last.unwrap_or_else(|| {
                    ::kube::Error::Service(
                        format!("no answer within {}", crate::duration::span(budget)).into(),
                    )
                }));
            }
        };
        match attempt {
            Ok(value) => return Ok(value),
            Err(e) if is_transient(&e) && tokio::time::Instant::now() < deadline => {
                let pause = delay.min(deadline - tokio::time::Instant::now());
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
    let mut innermost = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !text.trim().is_empty() {
            innermost = text;
        }
        source = cause.source();
    }
    innermost
}

pub fn describe(e: &::kube::Error) -> String {
    if let ::kube::Error::Api(s) = e {
        return match (s.message.is_empty(), s.reason.is_empty()) {
            (false, _) => format!("{} ({})", s.message, s.code),
            (true, false) => format!("{} ({})", s.reason, s.code),
            (true, true) => format!("HTTP {}", s.code),
        };
    }
    let mut out = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}
