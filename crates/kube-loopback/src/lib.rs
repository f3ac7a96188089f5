//! A loopback Kubernetes API server for binary-level tests and benchmarks.
//!
//! It serves discovery, CRUD, patch (including server-side apply), status
//! subresources, watches and metadata-only reads (`Accept: …;as=PartialObjectMetadata`
//! or `…List`) over plain HTTP, faithfully enough for kube-rs and kubectl,
//! from an in-memory store. Scripted controllers roll out
//! workloads and establish CRDs; faults can be injected on demand.
//!
//! It runs on its own tokio runtime in a background thread so plain `#[test]`
//! functions can use it; dropping the [`ApiServer`] shuts it down.

mod controllers;
mod defaults;
mod discovery;
mod http;
mod kubeconfig;
mod openapi;
mod patch;
mod protobuf;
mod resources;
mod select;
mod status;
mod store;
mod watch;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::runtime::Handle;
use tokio::sync::{oneshot, watch as channel};

pub use controllers::Rollout;
pub use kubeconfig::write as write_kubeconfig;

use store::Store;

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_type: Option<String>,
    /// The Accept header (`…;as=PartialObjectMetadataList;…` for a
    /// metadata-only list).
    pub accept: Option<String>,
    /// What the client sent (tests look for secrets in it).
    pub body: axum::body::Bytes,
    /// Its place among every request the server received, from 0 (kept
    /// when the log is cleared).
    pub seq: u64,
    /// When the server received it (after the first half of any
    /// [latency](Builder::latency)).
    pub received: Instant,
    /// When its answer left, (after the second half of the latency);
    /// `None` while it is being served, and for a watch, when its stream
    /// started.
    pub answered: Option<Instant>,
}

impl Request {
    pub fn is_mutation(&self) -> bool {
        self.method != "GET"
    }

    /// Asked for the objects' metadata only (`as=PartialObjectMetadata` or
    /// `as=PartialObjectMetadataList`).
    pub fn is_metadata_only(&self) -> bool {
        self.accept
            .as_deref()
            .is_some_and(|a| a.contains("as=PartialObjectMetadata"))
    }

    pub fn is_watch(&self) -> bool {
        self.query
            .split('&')
            .any(|p| p == "watch=true" || p == "watch=1")
    }
}

/// A network's delay on every request: `base` ± up to `jitter`, uniformly.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Latency {
    pub base: Duration,
    pub jitter: Duration,
}

impl Latency {
    /// `KUBE_LOOPBACK_LATENCY_MS` and `KUBE_LOOPBACK_JITTER_MS` (whole or
    /// fractional milliseconds); none when unset or unreadable.
    pub fn from_env() -> Latency {
        let ms = |name: &str| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|v| v.is_finite() && *v >= 0.0)
                .map_or(Duration::ZERO, |v| Duration::from_secs_f64(v / 1000.0))
        };
        Latency {
            base: ms("KUBE_LOOPBACK_LATENCY_MS"),
            jitter: ms("KUBE_LOOPBACK_JITTER_MS"),
        }
    }

    /// One request's whole delay; `random` is uniform over `u64`.
    fn sample(self, random: u64) -> Duration {
        if self.jitter.is_zero() {
            return self.base;
        }
        let span = self.jitter.as_secs_f64() * 2.0;
        let offset = (random as f64 / u64::MAX as f64) * span - self.jitter.as_secs_f64();
        Duration::from_secs_f64((self.base.as_secs_f64() + offset).max(0.0))
    }
}

/// How many of `requests` a client waited for one after another: the
/// longest chain in which each request was received after the one before
/// it was answered (requests that overlap are one step of it). A request
/// not answered yet, or a watch, counts from its start. With a
/// [latency](Builder::latency) well above the client's own work between
/// requests, this is the round trips on the critical path.
pub fn serial_depth(requests: &[Request]) -> usize {
    let mut spans: Vec<(Instant, Instant)> = requests
        .iter()
        .map(|r| (r.received, r.answered.unwrap_or(r.received)))
        .collect();
    spans.sort();
    let mut depth: Vec<usize> = Vec::with_capacity(spans.len());
    for (i, (received, _)) in spans.iter().enumerate() {
        let before = spans[..i]
            .iter()
            .zip(&depth)
            .filter(|((_, answered), _)| answered <= received)
            .map(|(_, d)| *d)
            .max()
            .unwrap_or(0);
        depth.push(before + 1);
    }
    depth.into_iter().max().unwrap_or(0)
}

struct Fault {
    remaining: usize,
    code: u16,
    /// Matched against `path?query`.
    target_contains: Option<String>,
}

type ObjectRef = (String, String, String);

struct State {
    store: Store,
    rollouts: HashMap<ObjectRef, Rollout>,
    default_rollout: Rollout,
    crd_establish: HashMap<String, Rollout>,
    completed_at: HashMap<ObjectRef, Instant>,
    log: Vec<Request>,
    /// Requests received so far.
    received: u64,
    faults: Vec<Fault>,
    watch_event_limit: Option<usize>,
    open_watches: usize,
}

struct Shared {
    state: Mutex<State>,
    /// The store's resourceVersion after each commit; wakes watches.
    rv_tx: channel::Sender<u64>,
    /// Bumped to make every open watch end.
    drop_tx: channel::Sender<u64>,
    runtime: Handle,
    addr: SocketAddr,
    latency: Mutex<Latency>,
    /// xorshift64 state for the jitter.
    random: AtomicU64,
}

impl Shared {
    /// The next request's delay (the whole round trip).
    fn delay(&self) -> Duration {
        let mut x = self.random.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.random.store(x, Ordering::Relaxed);
        let latency = *self.latency.lock().unwrap_or_else(|e| e.into_inner());
        latency.sample(x)
    }

    /// Notes when the answer to request `seq` left.
    fn answered(&self, seq: u64) {
        let mut st = self.lock();
        if let Some(request) = st.log.iter_mut().rev().find(|r| r.seq == seq) {
            request.answered = Some(Instant::now());
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock must not hide its own
        // failure behind poison errors in every later request.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs a store mutation, then wakes the watches and lets the
    /// controllers react to what changed.
    fn mutate<R>(self: &Arc<Self>, f: impl FnOnce(&mut State) -> R) -> R {
        let (result, changes, rv) = {
            let mut st = self.lock();
            let result = f(&mut st);
            (result, st.store.take_changes(), st.store.rv())
        };
        self.rv_tx.send_replace(rv);
        for change in &changes {
            controllers::react(self, change);
        }
        result
    }

    /// Logs the request (numbering it) and says its number and which
    /// injected failure, if any, it gets.
    fn admit(&self, mut req: Request) -> (u64, Option<u16>) {
        let target = format!("{}?{}", req.path, req.query);
        let mut st = self.lock();
        let index = st.received;
        st.received += 1;
        req.seq = index;
        st.log.push(req);
        let Some(fault) = st.faults.iter_mut().find(|f| {
            f.remaining > 0
                && f.target_contains
                    .as_deref()
                    .is_none_or(|t| target.contains(t))
        }) else {
            return (index, None);
        };
        fault.remaining -= 1;
        let code = fault.code;
        st.faults.retain(|f| f.remaining > 0);
        (index, Some(code))
    }
}

/// Options for [`ApiServer`]; start with [`ApiServer::builder`].
#[derive(Debug, Clone)]
pub struct Builder {
    validating_admission_policy: bool,
    default_rollout: Rollout,
    history_capacity: usize,
    watch_event_limit: Option<usize>,
    latency: Latency,
}

impl Builder {
    /// Delays every request as a server `base` away would (± up to
    /// `jitter`, uniformly): half before it is served (a write happens
    /// then), half before its answer leaves; a watch's later events are not
    /// delayed. By default `KUBE_LOOPBACK_LATENCY_MS` and
    /// `KUBE_LOOPBACK_JITTER_MS`, else none.
    pub fn latency(mut self, base: Duration, jitter: Duration) -> Self {
        self.latency = Latency { base, jitter };
        self
    }

    /// Simulates a cluster that does not serve ValidatingAdmissionPolicy.
    pub fn without_validating_admission_policy(mut self) -> Self {
        self.validating_admission_policy = false;
        self
    }

    /// How workloads (and Jobs) without their own script roll out.
    pub fn default_rollout(mut self, rollout: Rollout) -> Self {
        self.default_rollout = rollout;
        self
    }

    /// How many watch events are kept for replay; older resourceVersions
    /// get 410 Gone.
    pub fn history_capacity(mut self, events: usize) -> Self {
        self.history_capacity = events;
        self
    }

    /// Ends every watch stream after it has sent `events` events.
    pub fn close_watches_after(mut self, events: usize) -> Self {
        self.watch_event_limit = Some(events);
        self
    }

    pub fn start(self) -> ApiServer {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("loopback-apiserver".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("building the API server runtime");
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                        .await
                        .expect("binding 127.0.0.1:0");
                    let addr = listener.local_addr().expect("listener address");
                    let shared = Arc::new(self.shared(Handle::current(), addr));
                    let _ = ready_tx.send(shared.clone());
                    let serve = axum::serve(listener, http::router(shared));
                    tokio::select! {
                        result = serve => result.expect("serving the API server"),
                        _ = shutdown_rx => {}
                    }
                });
                // Dropping the runtime cancels open watches and pending
                // controller timers.
            })
            .expect("spawning the API server thread");
        let shared = ready_rx
            .recv()
            .expect("the API server thread died while starting");
        ApiServer {
            shared,
            shutdown: Some(shutdown_tx),
            thread: Some(thread),
        }
    }

    fn shared(self, runtime: Handle, addr: SocketAddr) -> Shared {
        let store = Store::new(self.validating_admission_policy, self.history_capacity);
        let rv = store.rv();
        Shared {
            state: Mutex::new(State {
                store,
                rollouts: HashMap::new(),
                default_rollout: self.default_rollout,
                crd_establish: HashMap::new(),
                completed_at: HashMap::new(),
                log: Vec::new(),
                received: 0,
                faults: Vec::new(),
                watch_event_limit: self.watch_event_limit,
                open_watches: 0,
            }),
            rv_tx: channel::Sender::new(rv),
            drop_tx: channel::Sender::new(0),
            runtime,
            addr,
            latency: Mutex::new(self.latency),
            random: AtomicU64::new(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
                    | 1,
            ),
        }
    }
}

pub struct ApiServer {
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn object_ref(kind: &str, namespace: &str, name: &str) -> ObjectRef {
    (kind.to_string(), namespace.to_string(), name.to_string())
}

impl ApiServer {
    pub fn start() -> ApiServer {
        Self::builder().start()
    }

    pub fn builder() -> Builder {
        Builder {
            validating_admission_policy: true,
            default_rollout: Rollout::Immediately,
            history_capacity: 10_000,
            watch_event_limit: None,
            latency: Latency::from_env(),
        }
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    /// Writes `dir/kubeconfig` with `context` as current-context.
    pub fn write_kubeconfig(&self, dir: &Path, context: &str) -> PathBuf {
        let url = self.url();
        kubeconfig::write(&dir.join("kubeconfig"), &[(context, url.as_str())], context)
    }

    fn resolve(&self, api_version: &str, kind: &str) -> resources::ResourceType {
        self.shared
            .lock()
            .store
            .resolve_kind(api_version, kind)
            .unwrap_or_else(|| {
                panic!("the loopback API server does not serve {api_version} {kind}")
            })
    }

    /// Creates or replaces an object as a fixture (a given `status` is kept);
    /// controllers react as to any write. Namespaced objects without a
    /// namespace land in `default`.
    pub fn insert(&self, obj: Value) -> Value {
        let api_version = obj["apiVersion"].as_str().unwrap_or_default();
        let rt = self.resolve(api_version, obj["kind"].as_str().unwrap_or_default());
        self.shared
            .mutate(|st| st.store.upsert(&rt, obj))
            .unwrap_or_else(|e| panic!("inserting a {}: {}", rt.kind, e.message))
    }

    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let rt = self.resolve(api_version, kind);
        self.shared
            .lock()
            .store
            .get(&rt, namespace.unwrap_or_default(), name)
    }

    /// Every object of the kind, across namespaces.
    pub fn list(&self, api_version: &str, kind: &str) -> Vec<Value> {
        let rt = self.resolve(api_version, kind);
        self.shared
            .lock()
            .store
            .list(&rt, None, &select::Selector::default())
    }

    pub fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let rt = self.resolve(api_version, kind);
        let ns = namespace.unwrap_or_default();
        self.shared
            .mutate(|st| st.store.delete(&rt, ns, name, &Value::Null, false).ok())
    }

    /// The highest resourceVersion handed out so far.
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().store.rv()
    }

    pub fn request_log(&self) -> Vec<Request> {
        self.shared.lock().log.clone()
    }

    /// Every request that was not a GET.
    pub fn mutations(&self) -> Vec<Request> {
        self.request_log()
            .into_iter()
            .filter(Request::is_mutation)
            .collect()
    }

    /// The delay every request gets ([`Builder::latency`]).
    pub fn latency(&self) -> Latency {
        *self
            .shared
            .latency
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the delay of the requests that arrive from now on (a
    /// benchmark sets a cluster up at no latency, then measures at several).
    pub fn set_latency(&self, base: Duration, jitter: Duration) {
        *self
            .shared
            .latency
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Latency { base, jitter };
    }

    pub fn clear_request_log(&self) {
        self.shared.lock().log.clear();
    }

    /// Scripts how a Deployment, DaemonSet, StatefulSet or Job rolls out
    /// after each create or spec change.
    pub fn set_rollout(&self, kind: &str, namespace: &str, name: &str, rollout: Rollout) {
        self.shared
            .lock()
            .rollouts
            .insert(object_ref(kind, namespace, name), rollout);
    }

    /// Scripts when the CRD named `crd_name` (`plural.group`) gets its
    /// Established and NamesAccepted conditions.
    pub fn set_crd_establish(&self, crd_name: &str, rollout: Rollout) {
        self.shared
            .lock()
            .crd_establish
            .insert(crd_name.to_string(), rollout);
    }

    /// When the controller last marked the object rolled out (for a CRD:
    /// kind `CustomResourceDefinition`, namespace "").
    pub fn rollout_completed_at(&self, kind: &str, namespace: &str, name: &str) -> Option<Instant> {
        self.shared
            .lock()
            .completed_at
            .get(&object_ref(kind, namespace, name))
            .copied()
    }

    /// The next `n` requests fail with `code` (503 gives ServiceUnavailable).
    pub fn fail_next(&self, n: usize, code: u16) {
        self.push_fault(n, code, None);
    }

    /// Like [`fail_next`](Self::fail_next), counting only requests whose
    /// `path?query` contains `target`.
    pub fn fail_next_matching(&self, n: usize, code: u16, target: &str) {
        self.push_fault(n, code, Some(target.to_string()));
    }

    /// Forgets every injected failure not yet served.
    pub fn clear_faults(&self) {
        self.shared.lock().faults.clear();
    }

    fn push_fault(&self, n: usize, code: u16, target_contains: Option<String>) {
        self.shared.lock().faults.push(Fault {
            remaining: n,
            code,
            target_contains,
        });
    }

    /// Closes every open watch stream now, as an API server restart does.
    pub fn drop_watches(&self) {
        self.shared.drop_tx.send_modify(|n| *n += 1);
    }

    /// Watch streams currently open, so tests can wait for a client to be
    /// watching before they act.
    pub fn open_watches(&self) -> usize {
        self.shared.lock().open_watches
    }
}
