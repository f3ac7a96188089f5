//! One `apply`/`destroy` per cluster at a time: a coordination.k8s.io/v1 Lease
//! `bootstrap-lock` in kube-system, renewed while the run lasts and released
//! on every exit path.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use ::kube::api::{Api, DeleteParams, PostParams};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;

use super::retry::{is_conflict, is_not_found, retry};
use crate::error::{Cause, Error, Failure};

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
        match e {
            LockError::Read(_) | LockError::Take(_) => Failure::Cluster(Cause(Box::new(e))).into(),
            LockError::Held { .. } | LockError::Race => Error::Locked(e.to_string()),
        }
    }
}

pub const LEASE_NAME: &str = "bootstrap-lock";
pub const LEASE_NAMESPACE: &str = "kube-system";
const LEASE_SECONDS: i32 = 30;
/// Six renewals per lease duration: a lost lock is noticed within 5 s, and
/// a few failed renewals in a row still keep it.
const RENEW_EVERY: Duration = Duration::from_secs(5);
/// How long giving the lock back may take at the end of a run.
const RELEASE_WITHIN: Duration = Duration::from_secs(5);

pub struct Lock {
    api: Api<Lease>,
    holder: String,
    renewer: tokio::task::JoinHandle<()>,
    /// Watches the Lease, so a deletion or takeover is known the moment the
    /// API server tells it, without a request before each step.
    watcher: tokio::task::JoinHandle<()>,
    /// What the renewer and [`Lock::check`] share.
    shared: Arc<Shared>,
    /// Set when the lock is no longer ours (or may not be), with the reason.
    lost: tokio::sync::watch::Receiver<Option<LockLost>>,
    /// Set by [`Lock::release`], so dropping it afterwards does not release twice.
    released: bool,
    /// The run that held the expired lock this run took over: a run that
    /// died without releasing it (docs/design.md#cluster-lock).
    took_over: Option<Predecessor>,
}

/// The run whose expired lock this run took over, or an earlier run did
/// and passed on in the Lease it released ([`Lock::release`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Predecessor {
    pub holder: String,
    /// Passed on by an earlier run, not taken over by this one.
    pub inherited: bool,
    /// The longest a helm operation of that run could last, as it recorded
    /// in the Lease; `None` for a run that did not record it.
    pub helm_timeout: Option<Duration>,
}

/// Recorded in the Lease: the longest a helm operation of the holder's run
/// may last (its longest release budget), in seconds.
const HELM_TIMEOUT_ANNOTATION: &str = "bootstrap/helm-timeout-seconds";

/// Kept in a released Lease by a run that took over a dead run's lock (or
/// inherited it) and did not recover every release that run may have left
/// `pending-*` (left for later while a helm of the dead run might still be
/// working on it, or not reached): the dead run's holder and helm timeout,
/// so the next run knows whose release it is and recovers it
/// (docs/design.md#cluster-lock).
const LEFT_BY_ANNOTATION: &str = "bootstrap/left-by";
const LEFT_BY_TIMEOUT_ANNOTATION: &str = "bootstrap/left-by-helm-timeout-seconds";

/// Taken off the Lease's duration for the local "valid until": room for the
/// time a renewal takes to reach the API server and for clocks that differ.
const VALID_MARGIN: Duration = Duration::from_secs(5);

/// A check younger than this trusts the last renewal; an older one renews
/// first, so a Lease deleted or taken over is noticed before the next step.
const CONFIRM_AFTER: Duration = Duration::from_millis(500);

struct Shared {
    /// The Lease as our last write left it (its resourceVersion makes the
    /// next renewal conditional); the mutex serialises renewals.
    held: tokio::sync::Mutex<Held>,
    lost: tokio::sync::watch::Sender<Option<LockLost>>,
    /// Whether the API server answers the renewals: the run's heartbeat
    /// (a renewal every 5 s, bounded), so an outage is said while it lasts.
    health: tokio::sync::watch::Sender<Option<Unanswered>>,
    holder: String,
    /// When the last successful renewal was sent (as `Held::renewed`),
    /// readable while a renewal holds `held`.
    renewed: std::sync::Mutex<Instant>,
    /// A watch of the Lease is open and has missed nothing since our last
    /// write: a change by anyone else would have been seen.
    watching: std::sync::atomic::AtomicBool,
}

/// The API server has not answered a renewal since `since` (the last
/// renewal that it answered), the last attempt failing with `cause`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unanswered {
    pub since: Instant,
    pub cause: String,
}

impl Shared {
    /// Records how the last renewal went, for [`Lock::health`].
    fn answered(&self, outcome: &Renewal, held: &Held) {
        match outcome {
            Renewal::Failed(e) => {
                let cause = super::retry::describe(e);
                self.health.send_if_modified(|now| match now {
                    Some(u) if u.cause == cause => false,
                    _ => {
                        *now = Some(Unanswered {
                            since: held.renewed,
                            cause,
                        });
                        true
                    }
                });
            }
            Renewal::Renewed => {
                *self.renewed.lock().unwrap_or_else(|e| e.into_inner()) = held.renewed;
                self.health.send_if_modified(|now| now.take().is_some());
            }
            Renewal::Lost(_) => {}
        }
    }

    /// The watch saw the lock lost: said once, to every waiter.
    fn lose(&self, why: LockLost) {
        self.lost.send_if_modified(|now| {
            let first = now.is_none();
            if first {
                *now = Some(why);
            }
            first
        });
    }
}

struct Held {
    lease: Lease,
    /// When the last successful renewal was sent.
    renewed: Instant,
}

impl Held {
    /// Nobody else can take the lock before this: the Lease's duration from
    /// the moment our last successful renewal was sent, less a margin.
    fn valid_until(&self) -> Instant {
        valid_until(self.renewed)
    }
}

/// Nobody else can take the lock before this, for a renewal sent at
/// `renewed`: the Lease's duration from then, less a margin.
fn valid_until(renewed: Instant) -> Instant {
    renewed + Duration::from_secs(LEASE_SECONDS as u64) - VALID_MARGIN
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

/// How a Lease held by another run looks by this machine's clock. Only a
/// refusal is ever based on it: the holder's `renewTime` is written by the
/// holder's clock, which may differ from ours by seconds or hours, so a
/// Lease that looks expired is watched before it is taken over
/// ([`watch_holder`]), never taken on the clocks' word
/// (docs/design.md#cluster-lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Looks {
    /// Renewed within its duration by our clock, and not from our future:
    /// the holder is taken to be alive.
    Live,
    /// Not renewed within its duration by our clock, or renewed at a time
    /// still ahead of our clock: the clocks may disagree.
    Unsure,
}

/// A renewal this far ahead of our clock still counts as consistent (the
/// latency of a write and small clock differences).
const AHEAD_MARGIN: Duration = Duration::from_secs(5);

fn looks(lease: &Lease, now: Timestamp) -> Looks {
    let Some(spec) = &lease.spec else {
        return Looks::Unsure;
    };
    let Some(renewed) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) else {
        return Looks::Unsure;
    };
    let renewed = renewed.0.as_second();
    let now = now.as_second();
    let ahead = renewed - now > AHEAD_MARGIN.as_secs() as i64;
    if !ahead && now <= renewed.saturating_add(i64::from(declared_seconds(lease))) {
        Looks::Live
    } else {
        Looks::Unsure
    }
}

/// The duration the holder declared in its Lease (ours: [`LEASE_SECONDS`]).
fn declared_seconds(lease: &Lease) -> i32 {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.lease_duration_seconds)
        .filter(|s| *s > 0)
        .unwrap_or(LEASE_SECONDS)
}

/// What watching another run's Lease found.
enum Watched {
    /// Its record changed: renewed (the holder is alive) or taken by a
    /// third run; the Lease as it is now.
    Renewed(Lease),
    /// Deleted or released while we watched: try again from the start.
    Gone,
    /// Unchanged for its whole declared duration on our own monotonic
    /// clock: its holder stopped renewing it, whatever the clocks say.
    Unchanged(Lease),
}

/// Watches a Lease held by another run until its record changes or has
/// stayed the same for the duration its holder declared, measured on this
/// machine's monotonic clock from our first read, as Kubernetes' leader
/// election does: a live holder renews within that, a dead one never does.
async fn watch_holder(api: &Api<Lease>, seen: Lease) -> Result<Watched, ::kube::Error> {
    let declared = Duration::from_secs(declared_seconds(&seen) as u64);
    let until = Instant::now() + declared;
    let every = (declared / 4).clamp(Duration::from_millis(100), Duration::from_secs(1));
    let version = seen.metadata.resource_version.clone();
    loop {
        let now = Instant::now();
        if now >= until {
            return Ok(Watched::Unchanged(seen));
        }
        tokio::time::sleep(every.min(until - now)).await;
        // A read that fails is retried; the watch goes on either way, as
        // the takeover is conditional on the record we saw.
        let Some(lease) = retry(super::retry::API_RETRY_BUDGET, || api.get_opt(LEASE_NAME)).await?
        else {
            return Ok(Watched::Gone);
        };
        if lease.metadata.resource_version == version {
            continue;
        }
        let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.clone());
        return Ok(match holder {
            Some(h) if !h.is_empty() => Watched::Renewed(lease),
            _ => Watched::Gone,
        });
    }
}

/// What [`Lock::acquire`] tells the run while it takes the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockNote {
    /// Watching a Lease that looks expired, or comes from a clock ahead of
    /// ours, before taking it over.
    Watching(String),
    /// Took over a dead run's lock.
    TookOver(String),
}

fn holder_of(lease: &Lease) -> String {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .unwrap_or_default()
}

/// The run whose lock this one takes: its holder (taken over), or the dead
/// run an earlier run passed on in a released Lease (inherited).
fn predecessor(lease: &Lease) -> Option<Predecessor> {
    let annotation = |key: &str| {
        lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .cloned()
    };
    let seconds = |key: &str| {
        annotation(key)
            .and_then(|s| s.parse::<u64>().ok())
            .map(Duration::from_secs)
    };
    let other = holder_of(lease);
    if !other.is_empty() {
        Some(Predecessor {
            holder: other,
            inherited: false,
            helm_timeout: seconds(HELM_TIMEOUT_ANNOTATION),
        })
    } else {
        annotation(LEFT_BY_ANNOTATION).map(|dead| Predecessor {
            holder: dead,
            inherited: true,
            helm_timeout: seconds(LEFT_BY_TIMEOUT_ANNOTATION),
        })
    }
}

fn watching_message(lease: &Lease) -> String {
    let renewed = lease
        .spec
        .as_ref()
        .and_then(|s| s.renew_time.as_ref().or(s.acquire_time.as_ref()))
        .map(|t| t.0.to_string())
        .unwrap_or_else(|| "never".into());
    let seconds = declared_seconds(lease);
    format!(
        "the cluster lock is held by {}, last renewed at {renewed} by its own clock, which is not within the last {seconds}s of this machine's; watching it for {seconds}s before taking it over (a live run renews it every {}s)",
        holder_of(lease),
        RENEW_EVERY.as_secs()
    )
}

fn held_error(lease: &Lease) -> LockError {
    let spec = lease.spec.clone().unwrap_or_default();
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
    LockError::Held {
        operation,
        holder: spec.holder_identity.unwrap_or_default(),
        since,
    }
}

/// The Lease this run writes: held by `holder` for `operation`, with the
/// longest helm operation it may run (for a run that takes it over);
/// `resource_version`: the one it replaces.
fn lease(
    holder: &str,
    operation: &str,
    helm_timeout: Duration,
    resource_version: Option<String>,
) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(LEASE_NAME.into()),
            namespace: Some(LEASE_NAMESPACE.into()),
            resource_version,
            annotations: Some(
                [
                    ("bootstrap/operation".to_string(), operation.to_string()),
                    (
                        HELM_TIMEOUT_ANNOTATION.to_string(),
                        helm_timeout.as_secs().to_string(),
                    ),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.to_string()),
            lease_duration_seconds: Some(LEASE_SECONDS),
            acquire_time: Some(now()),
            renew_time: Some(now()),
            ..LeaseSpec::default()
        }),
    }
}

impl Lock {
    /// Takes the lock or fails (exit 3) naming who holds it. A Lease held
    /// by another run that does not look alive by our clock is watched for
    /// its whole duration first ([`watch_holder`]): clocks are never
    /// compared across machines. `helm_timeout`: the longest a helm
    /// operation of this run may last, recorded in the Lease for a run that
    /// takes it over after this one died.
    pub async fn acquire(
        client: &::kube::Client,
        operation: &str,
        helm_timeout: Duration,
        mut notify: impl FnMut(LockNote),
    ) -> Result<Lock, LockError> {
        let api: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
        let holder = holder_identity();
        let budget = super::retry::API_RETRY_BUDGET;
        let fresh = |rv: Option<String>| lease(&holder, operation, helm_timeout, rv);
        let mut took_over = None;
        // A Lease deleted or released while we watched it is read again, a
        // few times at most (another run may be taking it meanwhile).
        let mut attempts = 0;
        let (result, sent) = loop {
            attempts += 1;
            if attempts > 3 {
                return Err(LockError::Race);
            }
            let existing = retry(budget, || api.get_opt(LEASE_NAME))
                .await
                .map_err(LockError::Read)?;
            let Some(mut lease) = existing else {
                // Before the write: "valid until" counts from no later than
                // the moment the Lease's renewTime was set.
                let sent = Instant::now();
                let lease = fresh(None);
                let params = PostParams::default();
                break (retry(budget, || api.create(&params, &lease)).await, sent);
            };
            let other = holder_of(&lease);
            if !other.is_empty() {
                if looks(&lease, Timestamp::now()) == Looks::Live {
                    return Err(held_error(&lease));
                }
                notify(LockNote::Watching(watching_message(&lease)));
                match watch_holder(&api, lease).await.map_err(LockError::Read)? {
                    Watched::Renewed(now) => return Err(held_error(&now)),
                    Watched::Gone => continue,
                    Watched::Unchanged(seen) => lease = seen,
                }
            }
            took_over = predecessor(&lease);
            if let Some(dead) = took_over.as_ref().filter(|p| !p.inherited) {
                notify(LockNote::TookOver(format!(
                    "took over the bootstrap lock of {}: it went unrenewed for {}s; that run is presumed dead",
                    dead.holder,
                    declared_seconds(&lease)
                )));
            }
            let sent = Instant::now();
            let taken = fresh(lease.metadata.resource_version.clone());
            let params = PostParams::default();
            break (
                retry(budget, || api.replace(LEASE_NAME, &params, &taken)).await,
                sent,
            );
        };
        let held = match result {
            Ok(lease) => lease,
            Err(e) if is_conflict(&e) => return Err(LockError::Race),
            Err(e) => return Err(LockError::Take(e)),
        };
        let (lost_tx, lost) = tokio::sync::watch::channel(None);
        let (health, _) = tokio::sync::watch::channel(None);
        let shared = Arc::new(Shared {
            held: tokio::sync::Mutex::new(Held {
                lease: held,
                renewed: sent,
            }),
            lost: lost_tx,
            health,
            holder: holder.clone(),
            renewed: std::sync::Mutex::new(sent),
            watching: std::sync::atomic::AtomicBool::new(false),
        });
        let renewer = tokio::spawn(renew(api.clone(), shared.clone()));
        let watcher = tokio::spawn(watch_lease(api.clone(), shared.clone()));
        Ok(Lock {
            api,
            holder,
            renewer,
            watcher,
            shared,
            lost,
            released: false,
            took_over,
        })
    }

    /// What a run checks before it starts a release or writes the ledger
    /// (docs/design.md#cluster-lock).
    pub fn checker(&self) -> LockCheck {
        LockCheck {
            api: self.api.clone(),
            shared: self.shared.clone(),
        }
    }

    /// Resolves with the reason once the lock is lost (deleted, taken by
    /// another run, or not renewable for a whole lease duration); never while
    /// it is held.
    pub fn lost(&self) -> tokio::sync::watch::Receiver<Option<LockLost>> {
        self.lost.clone()
    }

    /// `Some` while the API server does not answer the lock's renewals
    /// (docs/design.md#cluster-lock): the run's view of an outage.
    pub fn health(&self) -> tokio::sync::watch::Receiver<Option<Unanswered>> {
        self.shared.health.subscribe()
    }

    /// The run whose expired lock this run took over, if it did.
    pub fn took_over(&self) -> Option<&Predecessor> {
        self.took_over.as_ref()
    }

    /// Gives the lock back: deletes the Lease, or, with `pass_on` (a dead
    /// run that may have left a release this run did not recover), keeps it with no holder and
    /// that run recorded, for the next run. Also runs (best effort,
    /// detached, without `pass_on`) on drop. Bounded: an API server that
    /// does not answer leaves the Lease to expire ([`LEASE_SECONDS`] after
    /// the last renewal). `Err(why)` when it could not be given back.
    pub async fn release(mut self, pass_on: Option<&Predecessor>) -> Result<(), NotReleased> {
        self.renewer.abort();
        self.watcher.abort();
        self.released = true;
        let released = async {
            match pass_on {
                Some(dead) => release_passing_on(&self.api, &self.holder, dead).await,
                None => release(&self.api, &self.holder).await,
            }
        };
        match tokio::time::timeout(RELEASE_WITHIN, released).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(NotReleased::Refused(super::retry::describe(&e))),
            Err(_) => Err(NotReleased::NoAnswer(RELEASE_WITHIN)),
        }
    }
}

/// Why the lock could not be given back; it expires by itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotReleased {
    /// The API server's answer, in words.
    #[error(
        "could not give the cluster lock back ({0}); it expires {LEASE_SECONDS}s after its last renewal"
    )]
    Refused(String),
    #[error(
        "could not give the cluster lock back (no answer within {}); it expires {LEASE_SECONDS}s after its last renewal",
        crate::duration::span(*.0)
    )]
    NoAnswer(Duration),
}

/// Why the lock is no longer this run's, or may not be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockLost {
    #[error("the Lease kube-system/bootstrap-lock was deleted")]
    Deleted,
    /// Another run holds it now.
    #[error("it is now held by {0}")]
    TakenBy(String),
    /// Not renewed for `since`; `cause` is the last renewal's error, in words.
    #[error(
        "it could not be renewed for {} ({cause}), so another run may take it",
        crate::duration::span(*.since)
    )]
    Unrenewed { since: Duration, cause: String },
}

impl Drop for Lock {
    fn drop(&mut self) {
        self.renewer.abort();
        self.watcher.abort();
        if self.released {
            return;
        }
        let api = self.api.clone();
        let holder = self.holder.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = release(&api, &holder).await;
            });
        }
    }
}

async fn release(api: &Api<Lease>, holder: &str) -> Result<(), ::kube::Error> {
    // Only delete our own lease: a takeover may have happened meanwhile.
    if let Some(lease) = api.get_opt(LEASE_NAME).await?
        && lease.spec.and_then(|s| s.holder_identity).as_deref() == Some(holder)
    {
        match api.delete(LEASE_NAME, &DeleteParams::default()).await {
            Err(e) if !is_not_found(&e) => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// Releases our Lease by clearing its holder, keeping `dead` in it.
async fn release_passing_on(
    api: &Api<Lease>,
    holder: &str,
    dead: &Predecessor,
) -> Result<(), ::kube::Error> {
    let Some(mut lease) = api.get_opt(LEASE_NAME).await? else {
        return Ok(());
    };
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    if spec.holder_identity.as_deref() != Some(holder) {
        return Ok(());
    }
    spec.holder_identity = None;
    let annotations = lease
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    annotations.insert(LEFT_BY_ANNOTATION.into(), dead.holder.clone());
    match dead.helm_timeout {
        Some(t) => annotations.insert(LEFT_BY_TIMEOUT_ANNOTATION.into(), t.as_secs().to_string()),
        None => annotations.remove(LEFT_BY_TIMEOUT_ANNOTATION),
    };
    // Conditional on our last write (the resourceVersion read): a run that
    // took the Lease meanwhile is never overwritten.
    match api
        .replace(LEASE_NAME, &PostParams::default(), &lease)
        .await
    {
        Err(e) if is_conflict(&e) || is_not_found(&e) => Ok(()),
        other => other.map(|_| ()),
    }
}

/// The check before each step that changes the cluster: is the lock still
/// ours? Cheap when the last renewal is fresh; otherwise it renews now.
#[derive(Clone)]
pub struct LockCheck {
    api: Api<Lease>,
    shared: Arc<Shared>,
}

impl LockCheck {
    /// Why the lock is lost, if it is known to be (no request made).
    pub fn lost(&self) -> Option<LockLost> {
        self.shared.lost.borrow().clone()
    }

    /// `Err(why)` when the lock is lost or may be: deleted or taken over
    /// (found by renewing now), or not renewed successfully for so long
    /// that another run may have taken it. A failure is also reported as
    /// the lock being lost, so the run starts nothing new.
    pub async fn ensure(&self) -> Result<(), LockLost> {
        if let Some(why) = self.shared.lost.borrow().clone() {
            return Err(why);
        }
        // With the Lease watched since our last write, a deletion or a
        // takeover would have been seen: no request before the step, only
        // the local "valid until" (docs/design.md#cluster-lock).
        let renewed = *self
            .shared
            .renewed
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if self
            .shared
            .watching
            .load(std::sync::atomic::Ordering::Acquire)
            && Instant::now() < valid_until(renewed)
        {
            return Ok(());
        }
        let mut held = self.shared.held.lock().await;
        if held.renewed.elapsed() < CONFIRM_AFTER {
            return Ok(());
        }
        let outcome = renew_once(&self.api, &self.shared.holder, &mut held).await;
        self.shared.answered(&outcome, &held);
        match outcome {
            Renewal::Renewed => Ok(()),
            Renewal::Lost(why) => {
                let _ = self.shared.lost.send(Some(why.clone()));
                Err(why)
            }
            Renewal::Failed(_) if Instant::now() < held.valid_until() => Ok(()),
            Renewal::Failed(e) => {
                let why = unrenewed(&held, &e);
                let _ = self.shared.lost.send(Some(why.clone()));
                Err(why)
            }
        }
    }
}

enum Renewal {
    Renewed,
    /// Deleted or taken over: not ours any more.
    Lost(LockLost),
    /// Could not be renewed this time (the API server did not answer).
    Failed(::kube::Error),
}

/// Renews the lease with the resourceVersion of our last write, so a lease
/// that was deleted, replaced or taken over in between is never silently
/// overwritten (or recreated).
async fn renew_once(api: &Api<Lease>, holder: &str, held: &mut Held) -> Renewal {
    let sent = Instant::now();
    held.lease
        .spec
        .get_or_insert_with(LeaseSpec::default)
        .renew_time = Some(now());
    // One attempt, bounded: the next check or renewal tries again.
    let attempt = tokio::time::timeout(
        RENEW_EVERY,
        api.replace(LEASE_NAME, &PostParams::default(), &held.lease),
    )
    .await
    .unwrap_or_else(|_| {
        Err(::kube::Error::Service(
            format!("no answer within {}", crate::duration::span(RENEW_EVERY)).into(),
        ))
    });
    match attempt {
        Ok(lease) => {
            held.lease = lease;
            held.renewed = sent;
            Renewal::Renewed
        }
        Err(e) if is_not_found(&e) => Renewal::Lost(LockLost::Deleted),
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
                    held.lease = lease;
                    Box::pin(renew_once(api, holder, held)).await
                } else {
                    Renewal::Lost(LockLost::TakenBy(other))
                }
            }
            Ok(None) => Renewal::Lost(LockLost::Deleted),
            Err(e) => Renewal::Failed(e),
        },
        Err(e) => Renewal::Failed(e),
    }
}

fn unrenewed(held: &Held, e: &::kube::Error) -> LockLost {
    LockLost::Unrenewed {
        since: held.renewed.elapsed(),
        cause: super::retry::describe(e),
    }
}

/// Watches the Lease from the resourceVersion of our last write: a
/// deletion, or a write that gives it another holder, loses the lock the
/// moment the API server says so. While no watch is open (not yet, or
/// broken and being opened again), [`LockCheck::ensure`] renews before a
/// step as it did without one.
async fn watch_lease(api: Api<Lease>, shared: Arc<Shared>) {
    use ::kube::api::{WatchEvent, WatchParams};
    use futures::StreamExt;
    let watching = |on: bool| {
        shared
            .watching
            .store(on, std::sync::atomic::Ordering::Release)
    };
    loop {
        let from = shared
            .held
            .lock()
            .await
            .lease
            .metadata
            .resource_version
            .clone()
            .unwrap_or_else(|| "0".into());
        let params = WatchParams::default()
            .fields(&format!("metadata.name={LEASE_NAME}"))
            .timeout(290);
        let stream = match api.watch(&params, &from).await {
            Ok(stream) => stream,
            Err(_) => {
                watching(false);
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let mut stream = std::pin::pin!(stream);
        watching(true);
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Added(lease) | WatchEvent::Modified(lease)) => {
                    let other = holder_of(&lease);
                    if other != shared.holder {
                        watching(false);
                        shared.lose(if other.is_empty() {
                            LockLost::Deleted
                        } else {
                            LockLost::TakenBy(other)
                        });
                        return;
                    }
                }
                Ok(WatchEvent::Deleted(_)) => {
                    watching(false);
                    shared.lose(LockLost::Deleted);
                    return;
                }
                Ok(WatchEvent::Bookmark(_)) => {}
                // Too old a resourceVersion (410) or another error: what
                // happened since is unknown; open a new watch from our
                // last write, renewing before steps meanwhile.
                Ok(WatchEvent::Error(_)) | Err(_) => break,
            }
        }
        watching(false);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Renews every [`RENEW_EVERY`]; reports the lock lost when it was deleted
/// or taken over, or once its local "valid until" has passed without a
/// successful renewal.
async fn renew(api: Api<Lease>, shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        let mut held = shared.held.lock().await;
        let outcome = renew_once(&api, &shared.holder, &mut held).await;
        shared.answered(&outcome, &held);
        let why = match outcome {
            Renewal::Renewed => continue,
            Renewal::Failed(_) if Instant::now() < held.valid_until() => continue,
            Renewal::Failed(e) => unrenewed(&held, &e),
            Renewal::Lost(why) => why,
        };
        let _ = shared.lost.send(Some(why));
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn renewed(at: Timestamp, seconds: i32) -> Lease {
        let mut held = lease(
            "alice@laptop pid 1",
            "apply",
            Duration::from_secs(600),
            None,
        );
        let spec = held.spec.as_mut().unwrap();
        spec.renew_time = Some(MicroTime(at));
        spec.lease_duration_seconds = Some(seconds);
        held
    }

    /// Only a Lease renewed within its duration, by our clock, and not from
    /// our future, is refused at once; anything else is watched.
    #[test]
    fn a_lease_looks_live_only_when_both_clocks_could_agree() {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let at = |offset: i64| now.checked_add(jiff_seconds(offset)).unwrap();
        assert_eq!(looks(&renewed(now, 30), now), Looks::Live);
        assert_eq!(looks(&renewed(at(-29), 30), now), Looks::Live);
        assert_eq!(looks(&renewed(at(3), 30), now), Looks::Live);
        assert_eq!(looks(&renewed(at(-31), 30), now), Looks::Unsure);
        assert_eq!(looks(&renewed(at(-3600), 30), now), Looks::Unsure);
        assert_eq!(looks(&renewed(at(3600), 30), now), Looks::Unsure);
        assert_eq!(looks(&renewed(at(-5), 2), now), Looks::Unsure);
        let mut never = renewed(now, 30);
        never.spec.as_mut().unwrap().renew_time = None;
        never.spec.as_mut().unwrap().acquire_time = None;
        assert_eq!(looks(&never, now), Looks::Unsure);
    }

    fn jiff_seconds(s: i64) -> k8s_openapi::jiff::SignedDuration {
        k8s_openapi::jiff::SignedDuration::from_secs(s)
    }

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
