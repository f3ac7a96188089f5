//! Waiting for objects to become ready: a watch on the objects a
//! [`Selector`] picks (one by name, or a set by labels) in a namespace, judged
//! by a pure check from [`super::ready`], bounded by a timeout.
//!
//! The API server blips while Cilium comes up, so every API error short of
//! "you may not" is retried with backoff until the timeout; only the timeout
//! (or the check saying Failed) ends a wait early.

mod resolve;

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use ::kube::api::{Api, DynamicObject, ListParams};
use ::kube::core::ApiResource;
use ::kube::runtime::{WatchStreamExt, watcher};
use ::kube::{Client, ResourceExt};
use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Event, Pod};
use serde::Serialize;
use serde_json::Value;

use super::diagnose::{Diagnosis, PodDiagnosis, pod_selector};
use super::ready::{Readiness, Tally, tally};
pub use resolve::builtin_resource;

/// How long collecting diagnostics may take: it runs after a failure and must
/// not keep the user waiting on an API server that is itself the problem.
pub const DIAGNOSE_TIMEOUT: Duration = Duration::from_secs(15);
/// Events are fetched for at most this many unhealthy pods.
const DIAGNOSED_PODS: usize = 10;

/// Which objects of a kind a wait is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Selector {
    /// The one object with this name.
    Name(String),
    /// Every object whose labels match this selector (`app=x,tier!=db`),
    /// however many there are, including none.
    Labels(String),
}

impl Selector {
    /// Whether a watched object is one of ours. The API server already
    /// filters by the field or label selector; a server that ignores the
    /// field selector must still not make another object's status count.
    fn admits(&self, object: &DynamicObject) -> bool {
        match self {
            Selector::Name(name) => object.metadata.name.as_deref() == Some(name),
            Selector::Labels(_) => true,
        }
    }

    /// The same selection for a plain list (the fallback read).
    fn list_params(&self) -> ListParams {
        match self {
            Selector::Name(name) => ListParams::default().fields(&format!("metadata.name={name}")),
            Selector::Labels(labels) => ListParams::default().labels(labels),
        }
    }

    /// The watch asks the server to end it after [`WATCH_SECONDS`]: the
    /// watcher then starts the next one from where it was, silently.
    fn watch_config(&self) -> watcher::Config {
        let config = watcher::Config::default().timeout(WATCH_SECONDS);
        match self {
            Selector::Name(name) => config.fields(&format!("metadata.name={name}")),
            Selector::Labels(labels) => config.labels(labels),
        }
    }
}

/// How long one watch lasts (its server-side `timeoutSeconds`): under the
/// client's read timeout. The API server sends nothing on a watch while the
/// object does not change, so a watch left to kube's default (290 s) was cut
/// by the client's read timeout after a quiet minute, and reported as an
/// API error (`error reading a body from connection: timed out`) and
/// retried; one the server ends is a normal end.
const WATCH_SECONDS: u32 = crate::kube::client::READ_TIMEOUT.as_secs() as u32 - 10;

/// The objects a wait is about: a kind, a namespace, and which of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObjectTarget {
    pub api_version: String,
    pub kind: String,
    /// Ignored for cluster-scoped kinds; the client's default namespace when
    /// absent for a namespaced kind.
    pub namespace: Option<String>,
    pub selector: Selector,
}

impl ObjectTarget {
    /// The one object `name`.
    pub fn new(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Self {
        Self::selected(api_version, kind, namespace, Selector::Name(name.into()))
    }

    /// Every object of `kind` whose labels match `labels`.
    pub fn labelled(api_version: &str, kind: &str, namespace: Option<&str>, labels: &str) -> Self {
        Self::selected(
            api_version,
            kind,
            namespace,
            Selector::Labels(labels.into()),
        )
    }

    pub fn selected(
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        selector: Selector,
    ) -> Self {
        ObjectTarget {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.map(Into::into),
            selector,
        }
    }
}

impl fmt::Display for ObjectTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.selector, &self.namespace) {
            (Selector::Name(name), Some(ns)) => write!(f, "{} {ns}/{name}", self.kind),
            (Selector::Name(name), None) => write!(f, "{} {name}", self.kind),
            (Selector::Labels(labels), Some(ns)) => {
                write!(f, "{} objects in {ns} labelled {labels}", self.kind)
            }
            (Selector::Labels(labels), None) => {
                write!(f, "{} objects labelled {labels}", self.kind)
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitError {
    /// `last` is the latest Pending reason (and API error, if one followed it).
    Timeout {
        target: String,
        after: Duration,
        last: String,
    },
    /// The check judged the object Failed.
    Failed { target: String, reason: String },
    /// An API error retrying cannot fix (forbidden, bad apiVersion).
    Api { target: String, message: String },
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitError::Timeout {
                target,
                after,
                last,
            } => write!(
                f,
                "timed out after {} waiting for {target}: {last}",
                crate::duration::span(*after)
            ),
            WaitError::Failed { target, reason } => write!(f, "{target} failed: {reason}"),
            WaitError::Api { target, message } => write!(f, "cannot read {target}: {message}"),
        }
    }
}

impl std::error::Error for WaitError {}

/// Why a wait stopped before its timeout, before the target is attached.
#[derive(Debug, PartialEq, Eq)]
enum Stop {
    Failed(String),
    Api(String),
}

impl Stop {
    fn into_error(self, target: &ObjectTarget) -> WaitError {
        let target = target.to_string();
        match self {
            Stop::Failed(reason) => WaitError::Failed { target, reason },
            Stop::Api(message) => WaitError::Api { target, message },
        }
    }
}

/// What the wait knew last, kept outside the timed future so a timeout can
/// still say what it was waiting for.
#[derive(Debug, Default)]
struct Progress {
    pending: Option<String>,
    tally: Option<Tally>,
    error: Option<String>,
}

impl Progress {
    fn summary(&self) -> String {
        match (&self.pending, &self.error) {
            (Some(p), Some(e)) => format!("{p} (last API error: {e})"),
            (Some(p), None) => p.clone(),
            (None, Some(e)) => format!("API server error: {e}"),
            (None, None) => "no answer from the API server".into(),
        }
    }
}

/// Hears what a wait learns as it goes: each new Pending reason (or
/// transient API error), with the rollout's [`Tally`] when the target is a
/// rollout kind with something to count. A plain `Fn(&str)` hears the reason.
pub trait Observer {
    fn pending(&self, reason: &str, tally: Option<&Tally>);
}

impl<F: Fn(&str)> Observer for F {
    fn pending(&self, reason: &str, _: Option<&Tally>) {
        self(reason)
    }
}

/// Passes everything on to the observer it borrows.
pub struct Relay<'a, P: ?Sized>(pub &'a P);

impl<P: Observer + ?Sized> Observer for Relay<'_, P> {
    fn pending(&self, reason: &str, tally: Option<&Tally>) {
        self.0.pending(reason, tally)
    }
}

struct Reporter<'a, P> {
    state: &'a Mutex<Progress>,
    progress: &'a P,
    target: &'a ObjectTarget,
}

impl<P: Observer> Reporter<'_, P> {
    fn pending(&self, reason: &str) {
        self.pending_of(reason, &[]);
    }

    /// A Pending reason about `objects`, counted when the target is a rollout.
    fn pending_of(&self, reason: &str, objects: &[Value]) {
        let kind = self.target.kind.as_str();
        let tally = tally(kind, objects).map(|(done, total)| Tally {
            subject: match &self.target.selector {
                Selector::Name(name) => format!("{kind}/{name}"),
                Selector::Labels(labels) => format!("{kind}s {labels}"),
            },
            done,
            total,
            unit: if kind == "Job" { "complete" } else { "ready" },
        });
        let changed = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            s.error = None;
            let changed = s.pending.as_deref() != Some(reason) || s.tally != tally;
            s.pending = Some(reason.to_string());
            s.tally.clone_from(&tally);
            changed
        };
        if changed {
            self.progress.pending(reason, tally.as_ref());
        }
    }

    fn error(&self, message: String) {
        let changed = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let changed = s.error.as_deref() != Some(message.as_str());
            s.error = Some(message.clone());
            changed
        };
        if changed {
            self.progress
                .pending(&format!("API server error, retrying: {message}"), None);
        }
    }
}

/// Waits until `check` says the target is Ready, watching it (not
/// polling). `check` judges one object and sees `None` while there is none:
/// for a [`Selector::Name`] the object itself; for [`Selector::Labels`] every
/// selected object must be Ready (and one must exist). `progress` hears each
/// new Pending reason and each new transient API error.
pub async fn wait_for<F>(
    client: Client,
    target: &ObjectTarget,
    check: F,
    timeout: Duration,
    progress: impl Observer + Send + Sync,
) -> Result<(), WaitError>
where
    F: Fn(Option<&Value>) -> Readiness + Send + Sync,
{
    let check = each(check, &target.selector);
    wait_for_set(client, target, check, timeout, progress).await
}

/// Waits until `check` says the selected set is Ready. `check` sees every
/// selected object at once, sorted by name (none while nothing matches), so
/// it can judge the set as a whole: "some EndpointSlice of the Service has a
/// ready endpoint".
pub async fn wait_for_set<F>(
    client: Client,
    target: &ObjectTarget,
    check: F,
    timeout: Duration,
    progress: impl Observer + Send + Sync,
) -> Result<(), WaitError>
where
    F: Fn(&[Value]) -> Readiness + Send + Sync,
{
    let state = Mutex::new(Progress::default());
    let reporter = Reporter {
        state: &state,
        progress: &progress,
        target,
    };
    let work = async {
        let (ar, namespaced) = resolve::resolve(&client, target, &reporter).await?;
        let api = dynamic_api(client.clone(), &ar, namespaced, target);
        let config = target.selector.watch_config();
        loop {
            let stream = watcher(api.clone(), config.clone()).backoff(CappedBackoff::default());
            let read = || read_now(&api, &target.selector);
            if drive(stream, &target.selector, &check, &reporter, read).await? {
                return Ok(());
            }
            // The stream only ends if the backoff gives up; start over.
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    };
    bounded(target, timeout, &state, work).await
}

/// A check of one object as a check of the selected set: Ready when every
/// object is; the first one that is not gives the reason (prefixed with its
/// name when the set is selected by labels).
fn each<F>(check: F, selector: &Selector) -> impl Fn(&[Value]) -> Readiness + use<F>
where
    F: Fn(Option<&Value>) -> Readiness,
{
    let by_name = match selector {
        Selector::Name(_) => true,
        Selector::Labels(_) => false,
    };
    move |objects: &[Value]| {
        if objects.is_empty() {
            return check(None);
        }
        let named = |reason: String, object: &Value| {
            if by_name {
                reason
            } else {
                format!("{}: {reason}", name_of(object))
            }
        };
        for object in objects {
            match check(Some(object)) {
                Readiness::Ready => {}
                Readiness::Pending(reason) => return Readiness::Pending(named(reason, object)),
                Readiness::Failed(reason) => return Readiness::Failed(named(reason, object)),
            }
        }
        Readiness::Ready
    }
}

fn name_of(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

async fn bounded(
    target: &ObjectTarget,
    timeout: Duration,
    state: &Mutex<Progress>,
    work: impl Future<Output = Result<(), Stop>>,
) -> Result<(), WaitError> {
    match tokio::time::timeout(timeout, work).await {
        Ok(result) => result.map_err(|stop| stop.into_error(target)),
        Err(_) => Err(WaitError::Timeout {
            target: target.to_string(),
            after: timeout,
            last: state.lock().unwrap_or_else(|e| e.into_inner()).summary(),
        }),
    }
}

/// Follows a watch of the selected objects until the check settles:
/// `Ok(true)` when Ready, `Ok(false)` when the stream ended first (the caller
/// re-watches).
///
/// When the watch fails (it will be restarted after a backoff), the objects
/// are read once directly: a workload that is Ready is noticed even while
/// its watch cannot start.
async fn drive<S, F, P, R, Fut>(
    stream: S,
    selector: &Selector,
    check: &F,
    reporter: &Reporter<'_, P>,
    read: R,
) -> Result<bool, Stop>
where
    S: Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>>,
    F: Fn(&[Value]) -> Readiness,
    P: Observer,
    R: Fn() -> Fut,
    Fut: Future<Output = Option<Vec<Value>>>,
{
    let mut stream = std::pin::pin!(stream);
    let mut tracker = Tracker::default();
    while let Some(item) = stream.next().await {
        let event = match item {
            Ok(event) => event,
            Err(e) if resolve::is_permanent_watch_error(&e) => {
                return Err(Stop::Api(resolve::describe_watch_error(&e)));
            }
            Err(e) => {
                reporter.error(resolve::describe_watch_error(&e));
                if let Some(objects) = read().await {
                    match check(&objects) {
                        Readiness::Ready => return Ok(true),
                        Readiness::Failed(reason) => return Err(Stop::Failed(reason)),
                        Readiness::Pending(reason) => reporter.pending_of(&reason, &objects),
                    }
                }
                continue;
            }
        };
        if !tracker.apply(event, selector) {
            continue;
        }
        match check(&tracker.current) {
            Readiness::Ready => return Ok(true),
            Readiness::Failed(reason) => return Err(Stop::Failed(reason)),
            Readiness::Pending(reason) => reporter.pending_of(&reason, &tracker.current),
        }
    }
    Ok(false)
}

/// The selected objects as a plain read right now, sorted by name; `None`
/// when the read fails too.
async fn read_now(api: &Api<DynamicObject>, selector: &Selector) -> Option<Vec<Value>> {
    let list = api.list(&selector.list_params()).await.ok()?;
    let mut objects: Vec<Value> = list
        .items
        .into_iter()
        .filter(|o| selector.admits(o))
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect();
    objects.sort_by(|a, b| name_of(a).cmp(name_of(b)));
    Some(objects)
}

/// Watch restarts back off 200 ms, 400 ms, ... up to 5 s (kube's default
/// grows to 30 s, long after a workload became Ready); reset by the stream
/// once a watch works again.
#[derive(Debug, Clone, Copy)]
struct CappedBackoff {
    next: Duration,
}

impl CappedBackoff {
    const FIRST: Duration = Duration::from_millis(200);
    const CAP: Duration = Duration::from_secs(5);
}

impl Default for CappedBackoff {
    fn default() -> Self {
        CappedBackoff { next: Self::FIRST }
    }
}

impl Iterator for CappedBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let now = self.next;
        self.next = (self.next * 2).min(Self::CAP);
        Some(now)
    }
}

impl ::kube::runtime::utils::Backoff for CappedBackoff {
    fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}

/// The latest known state of the selected objects, across watch restarts.
#[derive(Debug, Default)]
struct Tracker {
    /// Sorted by name.
    current: Vec<Value>,
    /// Objects listed since the last `Init`, applied atomically at `InitDone`.
    listing: Option<Vec<Value>>,
}

impl Tracker {
    /// Whether the known state of the selected objects may have changed.
    fn apply(&mut self, event: watcher::Event<DynamicObject>, selector: &Selector) -> bool {
        use watcher::Event as E;
        let json = |o: DynamicObject| serde_json::to_value(o).unwrap_or(Value::Null);
        match event {
            E::Init => {
                self.listing = Some(Vec::new());
                false
            }
            E::InitApply(o) if selector.admits(&o) => {
                upsert(self.listing.get_or_insert_with(Vec::new), json(o));
                false
            }
            E::InitDone => {
                self.current = self.listing.take().unwrap_or_default();
                true
            }
            E::Apply(o) if selector.admits(&o) => {
                upsert(&mut self.current, json(o));
                true
            }
            E::Delete(o) if selector.admits(&o) => {
                let name = o.metadata.name.unwrap_or_default();
                self.current.retain(|v| name_of(v) != name);
                true
            }
            _ => false,
        }
    }
}

/// Replaces the object of the same name, or inserts it in name order.
fn upsert(objects: &mut Vec<Value>, object: Value) {
    match objects.binary_search_by(|o| name_of(o).cmp(name_of(&object))) {
        Ok(i) => objects[i] = object,
        Err(i) => objects.insert(i, object),
    }
}

fn dynamic_api(
    client: Client,
    ar: &ApiResource,
    namespaced: bool,
    target: &ObjectTarget,
) -> Api<DynamicObject> {
    match (namespaced, target.namespace.as_deref()) {
        (true, Some(ns)) => Api::namespaced_with(client, ns, ar),
        (true, None) => Api::default_namespaced_with(client, ar),
        (false, _) => Api::all_with(client, ar),
    }
}

/// The target's pods and their recent events, for a failed or timed-out wait.
/// Best effort and bounded by [`DIAGNOSE_TIMEOUT`]: events that cannot be
/// read are left out.
pub async fn diagnose(client: Client, target: &ObjectTarget) -> Result<Diagnosis, WaitError> {
    let state = Mutex::new(Progress {
        pending: Some("collecting diagnostics".into()),
        ..Progress::default()
    });
    let mut diagnosis = None;
    let work = async {
        diagnosis = Some(collect(client, target).await?);
        Ok(())
    };
    bounded(target, DIAGNOSE_TIMEOUT, &state, work).await?;
    Ok(diagnosis.unwrap_or_default())
}

async fn collect(client: Client, target: &ObjectTarget) -> Result<Diagnosis, Stop> {
    let api_error = |e: ::kube::Error| Stop::Api(resolve::describe(&e));
    let (ar, namespaced) = resolve::resolve_once(&client, target).await?;
    let api = dynamic_api(client.clone(), &ar, namespaced, target);
    let json = |o: DynamicObject| serde_json::to_value(o).ok();
    // Events are looked up by the names of the objects involved: a named
    // target's own name even when it does not exist.
    let (workloads, mut names): (Vec<Value>, Vec<String>) = match &target.selector {
        Selector::Name(name) => (
            api.get_opt(name)
                .await
                .map_err(api_error)?
                .and_then(json)
                .into_iter()
                .collect(),
            vec![name.clone()],
        ),
        Selector::Labels(labels) => {
            let listed = api
                .list(&ListParams::default().labels(labels))
                .await
                .map_err(api_error)?;
            let objects: Vec<Value> = listed.items.into_iter().filter_map(json).collect();
            let names = objects.iter().map(|o| name_of(o).to_string()).collect();
            (objects, names)
        }
    };
    let ns = target
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_string());

    let mut pods: Vec<Pod> = Vec::new();
    for workload in &workloads {
        if target.kind == "Pod" {
            pods.extend(serde_json::from_value(workload.clone()));
        } else if let Some(selector) = pod_selector(workload) {
            pods.extend(
                Api::<Pod>::namespaced(client.clone(), &ns)
                    .list(&ListParams::default().labels(&selector))
                    .await
                    .map_err(api_error)?
                    .items,
            );
        }
        if target.kind == "Deployment" {
            // Pod creation failures (quota, PodSecurity) are reported on the ReplicaSet.
            names.extend(replica_sets(&client, &ns, workload).await);
        }
    }
    let mut unhealthy: Vec<&Pod> = pods
        .iter()
        .filter(|p| !PodDiagnosis::from_pod(p).is_healthy())
        .collect();
    unhealthy.truncate(DIAGNOSED_PODS);
    names.extend(unhealthy.iter().map(|p| p.name_any()));

    let events_api = Api::<Event>::namespaced(client, &ns);
    let lists = futures::future::join_all(names.iter().map(|name| {
        let params = ListParams::default().fields(&format!("involvedObject.name={name}"));
        let api = events_api.clone();
        async move { api.list(&params).await }
    }))
    .await;
    let events: Vec<Event> = lists.into_iter().flatten().flat_map(|l| l.items).collect();
    Ok(Diagnosis::build(&pods, &events))
}

/// Names of the ReplicaSets a Deployment owns.
async fn replica_sets(client: &Client, ns: &str, deployment: &Value) -> Vec<String> {
    let Some(selector) = pod_selector(deployment) else {
        return Vec::new();
    };
    let uid = deployment.pointer("/metadata/uid").and_then(Value::as_str);
    let params = ListParams::default().labels(&selector);
    let Ok(list) = Api::<ReplicaSet>::namespaced(client.clone(), ns)
        .list(&params)
        .await
    else {
        return Vec::new();
    };
    list.items
        .into_iter()
        .filter(|rs| {
            rs.owner_references()
                .iter()
                .any(|o| Some(o.uid.as_str()) == uid)
        })
        .map(|rs| rs.name_any())
        .collect()
}

#[cfg(test)]
mod tests;
