//! One `apply`/`destroy` per cluster at a time: a coordination.k8s.io/v1 Lease
//! `bootstrap-lock` in kube-system, renewed while the run lasts and released
//! on every exit path.

use std::time::{Duration, SystemTime};

use ::kube::api::{Api, DeleteParams, PostParams};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;

use super::retry::{is_conflict, is_not_found, retry};
use crate::error::Error;

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("cannot read the bootstrap lock (Lease kube-system/bootstrap-lock)")]
    Read(#[source] ::kube::Error),
    #[error(
        "another bootstrap {operation} holds the lock on this cluster: {holder}, since {since}; wait for it to finish (the lock expires {LEASE_SECONDS}s after its holder stops renewing it)"
    )]
    Held {
        operation: String,
        holder: String,
        since: String,
    },
    #[error(
        "another bootstrap run took the lock on this cluster at the same moment; try again when it has finished"
    )]
    Race,
    #[error("cannot take the bootstrap lock (Lease kube-system/bootstrap-lock)")]
    Take(#[source] ::kube::Error),
}

impl From<LockError> for Error {
    fn from(e: LockError) -> Error {
        let message = e.to_string();
        match e {
            LockError::Read(source) | LockError::Take(source) => {
                Error::failed_with(message, source)
            }
            LockError::Held { .. } | LockError::Race => Error::Locked(message),
        }
    }
}

pub const LEASE_NAME: &str = "bootstrap-lock";
pub const LEASE_NAMESPACE: &str = "kube-system";
const LEASE_SECONDS: i32 = 30;
/// Six renewals per lease duration: a lost lock is noticed within 5 s, and
/// a few failed renewals in a row still keep it.
const RENEW_EVERY: Duration = Duration::from_secs(5);

pub struct Lock {
    api: Api<Lease>,
    holder: String,
    renewer: tokio::task::JoinHandle<()>,
    /// Set by the renewer when the lock is no longer ours, with the reason.
    lost: tokio::sync::watch::Receiver<Option<String>>,
    /// Set by [`Lock::release`], so dropping it afterwards does not release twice.
    released: bool,
    /// The holder of the expired lock this run took over: a run that died
    /// without releasing it (docs/design.md#cluster-lock).
    took_over: Option<String>,
}

/// `user@host pid N` — what a second run prints about the first.
pub fn holder_identity() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(account_name);
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    format!("{user}@{host} pid {}", std::process::id())
}

/// The effective user's account name from the password database, else
/// `uid N` (a container's user often has no entry): never a made-up name.
fn account_name() -> String {
    // SAFETY: geteuid cannot fail; getpwuid_r writes only into `entry` and
    // `buffer`, both owned here and sized as passed, and `found` points at
    // `entry` only when it succeeded.
    unsafe {
        let uid = libc::geteuid();
        let mut entry: libc::passwd = std::mem::zeroed();
        let mut buffer = vec![0 as libc::c_char; 4096];
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(
            uid,
            &mut entry,
            buffer.as_mut_ptr(),
            buffer.len(),
            &mut found,
        );
        if rc == 0 && !found.is_null() && !entry.pw_name.is_null() {
            let name = std::ffi::CStr::from_ptr(entry.pw_name).to_string_lossy();
            if !name.is_empty() {
                return name.into_owned();
            }
        }
        format!("uid {uid}")
    }
}

fn now() -> MicroTime {
    MicroTime(Timestamp::now())
}

fn expired(lease: &Lease) -> bool {
    let Some(spec) = &lease.spec else { return true };
    let Some(renewed) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) else {
        return true;
    };
    let seconds = spec.lease_duration_seconds.unwrap_or(LEASE_SECONDS) as i64;
    let until = renewed.0.as_second() + seconds;
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(i64::MAX);
    now > until
}

impl Lock {
    /// Takes the lock or fails (exit 1) naming who holds it.
    pub async fn acquire(
        client: &::kube::Client,
        operation: &str,
        on_takeover: impl FnOnce(String),
    ) -> Result<Lock, LockError> {
        let api: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
        let holder = holder_identity();
        let budget = super::apply::API_RETRY_BUDGET;
        let fresh = |rv: Option<String>| Lease {
            metadata: ObjectMeta {
                name: Some(LEASE_NAME.into()),
                namespace: Some(LEASE_NAMESPACE.into()),
                resource_version: rv,
                annotations: Some(
                    [("bootstrap/operation".to_string(), operation.to_string())].into(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.clone()),
                lease_duration_seconds: Some(LEASE_SECONDS),
                acquire_time: Some(now()),
                renew_time: Some(now()),
                ..LeaseSpec::default()
            }),
        };
        let existing = retry(budget, || api.get_opt(LEASE_NAME))
            .await
            .map_err(LockError::Read)?;
        let mut took_over = None;
        let result = match existing {
            None => {
                let lease = fresh(None);
                let params = PostParams::default();
                retry(budget, || api.create(&params, &lease)).await
            }
            Some(lease) => {
                let spec = lease.spec.clone().unwrap_or_default();
                let other = spec.holder_identity.clone().unwrap_or_default();
                if !expired(&lease) && !other.is_empty() {
                    let since = spec
                        .acquire_time
                        .map(|t| t.0.to_string())
                        .unwrap_or_else(|| "?".into());
                    let operation = lease
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get("bootstrap/operation"))
                        .cloned()
                        .unwrap_or_else(|| "run".into());
                    return Err(LockError::Held {
                        operation,
                        holder: other,
                        since,
                    });
                }
                if !other.is_empty() {
                    on_takeover(format!(
                        "took over the expired bootstrap lock of {other}; that run is presumed dead"
                    ));
                    took_over = Some(other.clone());
                }
                let taken = fresh(lease.metadata.resource_version.clone());
                let params = PostParams::default();
                retry(budget, || api.replace(LEASE_NAME, &params, &taken)).await
            }
        };
        let held = match result {
            Ok(lease) => lease,
            Err(e) if is_conflict(&e) => return Err(LockError::Race),
            Err(e) => return Err(LockError::Take(e)),
        };
        let (lost_tx, lost) = tokio::sync::watch::channel(None);
        let renewer = tokio::spawn(renew(api.clone(), holder.clone(), held, lost_tx));
        Ok(Lock {
            api,
            holder,
            renewer,
            lost,
            released: false,
            took_over,
        })
    }

    /// Resolves with the reason once the lock is lost (deleted, taken by
    /// another run, or not renewable for a whole lease duration); never while
    /// it is held.
    pub fn lost(&self) -> tokio::sync::watch::Receiver<Option<String>> {
        self.lost.clone()
    }

    /// The holder of the expired lock this run took over, if it did.
    pub fn took_over(&self) -> Option<&str> {
        self.took_over.as_deref()
    }

    /// Gives the lock back. Also runs (best effort, detached) on drop.
    pub async fn release(mut self) {
        self.renewer.abort();
        release(&self.api, &self.holder).await;
        self.released = true;
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        self.renewer.abort();
        if self.released {
            return;
        }
        let api = self.api.clone();
        let holder = self.holder.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move { release(&api, &holder).await });
        }
    }
}

async fn release(api: &Api<Lease>, holder: &str) {
    // Only delete our own lease: a takeover may have happened meanwhile.
    if let Ok(Some(lease)) = api.get_opt(LEASE_NAME).await
        && lease.spec.and_then(|s| s.holder_identity).as_deref() == Some(holder)
    {
        let _ = api.delete(LEASE_NAME, &DeleteParams::default()).await;
    }
}

/// Renews the lease with the resourceVersion of our last write, so a lease
/// that was deleted, replaced or taken over in between is never silently
/// overwritten (or recreated): the renewal fails, and the lock is lost.
async fn renew(
    api: Api<Lease>,
    holder: String,
    mut held: Lease,
    lost: tokio::sync::watch::Sender<Option<String>>,
) {
    let mut renewed = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        held.spec.get_or_insert_with(LeaseSpec::default).renew_time = Some(now());
        let reason = match api.replace(LEASE_NAME, &PostParams::default(), &held).await {
            Ok(lease) => {
                held = lease;
                renewed = tokio::time::Instant::now();
                continue;
            }
            Err(e) if is_not_found(&e) => {
                "the Lease kube-system/bootstrap-lock was deleted".to_string()
            }
            Err(e) if is_conflict(&e) => match api.get_opt(LEASE_NAME).await {
                Ok(Some(lease)) => {
                    let other = lease
                        .spec
                        .as_ref()
                        .and_then(|s| s.holder_identity.clone())
                        .unwrap_or_default();
                    if other == holder {
                        // Our own lease, changed by someone (an annotation):
                        // still ours, renew on top of what is there now.
                        held = lease;
                        continue;
                    }
                    format!("it is now held by {other}")
                }
                Ok(None) => "the Lease kube-system/bootstrap-lock was deleted".to_string(),
                Err(_) => continue,
            },
            Err(_) if renewed.elapsed() < Duration::from_secs(LEASE_SECONDS as u64) => continue,
            Err(e) => format!(
                "it could not be renewed for {LEASE_SECONDS}s ({}), so another run may take it",
                super::retry::describe(&e)
            ),
        };
        let _ = lost.send(Some(reason));
        return;
    }
}

#[cfg(test)]
mod tests {
    /// Without $USER (a Job's container, `env -i`), the holder still names
    /// the real account, as `id -un` does, or its uid.
    #[test]
    fn account_name_is_the_effective_users() {
        let id = std::process::Command::new("id")
            .arg("-un")
            .output()
            .unwrap();
        let expected = String::from_utf8_lossy(&id.stdout).trim().to_string();
        if id.status.success() {
            assert_eq!(super::account_name(), expected);
        } else {
            // No entry in the password database: `id` says so; we say `uid N`.
            assert!(super::account_name().starts_with("uid "));
        }
    }
}
