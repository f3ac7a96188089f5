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
/// backing off 200 ms, 400 ms, ... up to 5 s between tries.
pub async fn retry<T, F, Fut>(budget: Duration, mut op: F) -> Result<T, ::kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ::kube::Error>>,
{
    let deadline = tokio::time::Instant::now() + budget;
    let mut delay = Duration::from_millis(200);
    loop {
        match op().await {
            Ok(value) => return Ok(value),
            Err(e) if is_transient(&e) && tokio::time::Instant::now() + delay < deadline => {
                tokio::time::sleep(delay).await;
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
