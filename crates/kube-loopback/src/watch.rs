//! Watch streams: newline-delimited JSON events, replayed from the store's
//! history after the client's resourceVersion and then sent as they happen.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};

use super::Shared;
use super::resources::ResourceType;
use super::select::Selector;
use super::status::ApiError;
use super::store::Store;

const BOOKMARK_INTERVAL: Duration = Duration::from_secs(1);

pub struct WatchParams {
    /// `None` (no or "0" resourceVersion) starts with the current state as
    /// ADDED events, as the real server does.
    pub since: Option<u64>,
    pub timeout: Option<Duration>,
    pub bookmarks: bool,
    pub send_initial_events: bool,
    pub namespace: Option<String>,
    pub selector: Selector,
    /// Each event's object as its metadata only (`as=PartialObjectMetadata`).
    pub metadata: Option<super::http::Metadata>,
}

/// Decrements the open-watch count however the stream ends.
struct OpenWatch(Arc<Shared>);

impl Drop for OpenWatch {
    fn drop(&mut self) {
        self.0.lock().open_watches -= 1;
    }
}

pub fn respond(shared: Arc<Shared>, rt: ResourceType, params: WatchParams) -> Response {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    shared.lock().open_watches += 1;
    let guard = OpenWatch(shared.clone());
    tokio::spawn(async move {
        let _guard = guard;
        run(&shared, &rt, params, &tx).await;
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|chunk| (Ok::<_, Infallible>(chunk), rx))
    });
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from_stream(stream))
        .unwrap_or_default()
}

fn line(kind: &str, object: Value) -> Bytes {
    let mut bytes =
        serde_json::to_vec(&json!({ "type": kind, "object": object })).unwrap_or_default();
    bytes.push(b'\n');
    Bytes::from(bytes)
}

fn bookmark(
    rt: &ResourceType,
    rv: u64,
    initial_events_end: bool,
    shape: &impl Fn(Value) -> Value,
) -> Bytes {
    let mut meta = json!({ "resourceVersion": rv.to_string() });
    if initial_events_end {
        meta["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
    }
    line(
        "BOOKMARK",
        shape(json!({ "kind": rt.kind, "apiVersion": rt.api_version(), "metadata": meta })),
    )
}

/// Sends until the client leaves, the stream times out, the test drops
/// watches, or the event limit is reached.
async fn run(
    shared: &Arc<Shared>,
    rt: &ResourceType,
    params: WatchParams,
    tx: &mpsc::Sender<Bytes>,
) {
    let mut rv_rx = shared.rv_tx.subscribe();
    let mut drop_rx = shared.drop_tx.subscribe();
    drop_rx.borrow_and_update();
    let deadline = params.timeout.map(|t| Instant::now() + t);
    let ns = params.namespace.as_deref();
    let matches = |obj: &Value| {
        ns.is_none_or(|ns| obj["metadata"]["namespace"].as_str() == Some(ns))
            && params.selector.matches(obj)
    };
    // The real server transforms every event's object, bookmarks too.
    let shape = |obj: Value| match &params.metadata {
        Some(m) => super::http::transform(obj.clone(), Some(m), false).unwrap_or(obj),
        None => obj,
    };
    let limit = shared.lock().watch_event_limit;
    let mut sent = 0usize;
    let mut send = async |chunk: Bytes, counts: bool| -> bool {
        if tx.send(chunk).await.is_err() {
            return false;
        }
        sent += usize::from(counts);
        limit.is_none_or(|l| sent < l)
    };

    rv_rx.borrow_and_update();
    let (initial, mut last) = {
        let st = shared.lock();
        match params.since.filter(|_| !params.send_initial_events) {
            Some(since) => (Vec::new(), since),
            None => (st.store.list(rt, ns, &params.selector), st.store.rv()),
        }
    };
    for obj in initial {
        if !send(line("ADDED", shape(obj)), true).await {
            return;
        }
    }
    if params.send_initial_events
        && params.bookmarks
        && !send(bookmark(rt, last, true, &shape), false).await
    {
        return;
    }

    let mut ticks = tokio::time::interval_at(Instant::now() + BOOKMARK_INTERVAL, BOOKMARK_INTERVAL);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        let pending = {
            let st = shared.lock();
            let events = st.store.events_since(last);
            if events.is_some() {
                last = last.max(st.store.rv());
            }
            events
        };
        let Some(events) = pending else {
            let gone = ApiError::expired(format!("too old resource version: {last}"));
            let _ = send(line("ERROR", gone.to_status()), true).await;
            return;
        };
        for event in events {
            let same_kind = event.group == rt.group && event.res_kind == rt.kind;
            if same_kind
                && matches(&event.object)
                && !send(
                    line(event.kind, shape(Store::present(rt, &event.object))),
                    true,
                )
                .await
            {
                return;
            }
        }
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tx.closed() => return,
            _ = drop_rx.changed() => return,
            _ = sleep => return,
            changed = rv_rx.changed() => if changed.is_err() { return },
            _ = ticks.tick(), if params.bookmarks => {
                if !send(bookmark(rt, last, false, &shape), false).await {
                    return;
                }
            }
        }
    }
}
