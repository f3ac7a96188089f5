//! `wait_for` and `diagnose` through kube-rs against a tiny scripted HTTP API
//! on loopback: proves the watch, field selector, discovery retry and 503
//! handling work with the real client, not only with scripted streams.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bootstrap::kube::ready::{self, Readiness};
use bootstrap::kube::wait::{ObjectTarget, WaitError, diagnose, wait_for, wait_for_set};
use futures::StreamExt;
use serde_json::{Value, json};

fn fixture(name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/objects/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[derive(Default)]
struct Script {
    /// Every request's path and query, in order.
    seen: Vec<String>,
    /// Requests of each kind answered so far.
    lists: usize,
    watches: usize,
    discoveries: usize,
}

type Shared = Arc<Mutex<Script>>;

fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                      "code": code, "reason": reason, "message": message});
    (StatusCode::from_u16(code).unwrap(), axum::Json(body)).into_response()
}

fn list(kind: &str, items: Vec<Value>) -> Response {
    axum::Json(json!({"apiVersion": "v1", "kind": kind,
                      "metadata": {"resourceVersion": "100"}, "items": items}))
    .into_response()
}

/// A watch that sends `events` and then stays open without a word.
fn watch(events: Vec<Value>) -> Response {
    let lines = events.into_iter().map(|e| {
        Ok::<_, std::io::Error>(Bytes::from(format!(
            "{}\n",
            serde_json::to_string(&e).unwrap()
        )))
    });
    let body = futures::stream::iter(lines).chain(futures::stream::pending());
    Body::from_stream(body).into_response()
}

async fn serve(app: Router) -> ::kube::Client {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let mut config = ::kube::Config::new(format!("http://{addr}").parse().unwrap());
    config.default_namespace = "kube-system".into();
    ::kube::Client::try_from(config).unwrap()
}

fn cilium() -> ObjectTarget {
    ObjectTarget::new("apps/v1", "DaemonSet", Some("kube-system"), "cilium")
}

async fn rollout_api(State(s): State<Shared>, req: Request) -> Response {
    let uri = req.uri().to_string();
    let is_watch = uri.contains("watch=true");
    let (lists, watches) = {
        let mut s = s.lock().unwrap();
        s.seen.push(uri.clone());
        if is_watch {
            s.watches += 1;
        } else {
            s.lists += 1;
        }
        (s.lists, s.watches)
    };
    if !uri.starts_with("/apis/apps/v1/namespaces/kube-system/daemonsets?") {
        return status(404, "NotFound", "not scripted");
    }
    match (is_watch, lists, watches) {
        // The API server blips while Cilium replaces the datapath: kube's
        // client retries the 503 itself, the 500 reaches the watcher.
        (false, 1, _) => status(
            503,
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        ),
        (false, 2, _) => status(500, "InternalError", "etcdserver: leader changed"),
        (false, _, _) => list(
            "DaemonSetList",
            vec![fixture("daemonset-cilium-mid-rollout.yaml")],
        ),
        // The first watch connection drops at once.
        (true, _, 1) => Body::empty().into_response(),
        (true, _, _) => {
            let mut done = fixture("daemonset-cilium-rolled-out.yaml");
            done["metadata"]["generation"] = 3.into();
            done["status"]["observedGeneration"] = 3.into();
            watch(vec![json!({"type": "MODIFIED", "object": done})])
        }
    }
}

#[tokio::test]
async fn rollout_wait_survives_api_errors_and_a_dropped_watch() {
    let script = Shared::default();
    let client = serve(
        Router::new()
            .fallback(rollout_api)
            .with_state(script.clone()),
    )
    .await;
    let heard = Mutex::new(Vec::new());
    let result = wait_for(
        client,
        &cilium(),
        ready::rollout_check("DaemonSet").unwrap(),
        Duration::from_secs(30),
        |p: &str| heard.lock().unwrap().push(p.to_string()),
    )
    .await;
    assert_eq!(result, Ok(()));
    assert_eq!(
        heard.into_inner().unwrap(),
        [
            "API server error, retrying: list failed: etcdserver: leader changed (500)",
            "1 of 3 pods updated"
        ]
    );
    let script = script.lock().unwrap();
    // Lists: the 503, the 500, the direct read after the failed list, the
    // watcher's list that works. Watches: the dropped one, the one that works.
    assert_eq!((script.lists, script.watches), (4, 2));
    let seen = &script.seen;
    assert!(
        seen.iter()
            .all(|u| u.contains("fieldSelector=metadata.name%3Dcilium")),
        "{seen:?}"
    );
}

/// The DaemonSet mid-rollout; each watch stays quiet until the server ends
/// it (as the API server does at the watch's `timeoutSeconds`, here after
/// 200 ms), the third sends the finished rollout.
async fn quiet_api(State(s): State<Shared>, req: Request) -> Response {
    let uri = req.uri().to_string();
    let watches = {
        let mut s = s.lock().unwrap();
        s.seen.push(uri.clone());
        if uri.contains("watch=true") {
            s.watches += 1;
        }
        s.watches
    };
    if !uri.contains("watch=true") {
        return list(
            "DaemonSetList",
            vec![fixture("daemonset-cilium-mid-rollout.yaml")],
        );
    }
    if watches < 3 {
        let quiet = futures::stream::once(async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            Ok::<_, std::io::Error>(Bytes::new())
        });
        return Body::from_stream(quiet).into_response();
    }
    let mut done = fixture("daemonset-cilium-rolled-out.yaml");
    done["metadata"]["generation"] = 3.into();
    done["status"]["observedGeneration"] = 3.into();
    watch(vec![json!({"type": "MODIFIED", "object": done})])
}

/// The API server sends nothing on a watch while the object is unchanged.
/// Each watch asks the server to end it before the client's read timeout
/// would cut it (which was reported as `API server error, retrying: …
/// timed out` every quiet minute against a real API server), and a watch
/// the server ends is started again without a word.
#[tokio::test]
async fn a_quiet_watch_is_ended_by_the_server_and_restarted_silently() {
    let script = Shared::default();
    let client = serve(Router::new().fallback(quiet_api).with_state(script.clone())).await;
    let heard = Mutex::new(Vec::new());
    let result = wait_for(
        client,
        &cilium(),
        ready::rollout_check("DaemonSet").unwrap(),
        Duration::from_secs(30),
        |p: &str| heard.lock().unwrap().push(p.to_string()),
    )
    .await;
    assert_eq!(result, Ok(()));
    assert_eq!(heard.into_inner().unwrap(), ["1 of 3 pods updated"]);
    let script = script.lock().unwrap();
    assert_eq!(script.watches, 3);
    let read_timeout = bootstrap::kube::client::READ_TIMEOUT.as_secs();
    for uri in script.seen.iter().filter(|u| u.contains("watch=true")) {
        let asked: u64 = uri
            .split(['?', '&'])
            .find_map(|p| p.strip_prefix("timeoutSeconds="))
            .unwrap_or_else(|| panic!("a watch without timeoutSeconds: {uri}"))
            .parse()
            .unwrap();
        assert!(
            asked < read_timeout,
            "the watch lasts {asked}s, the client reads for {read_timeout}s: {uri}"
        );
    }
}

async fn crd_api(State(s): State<Shared>, req: Request) -> Response {
    let uri = req.uri().to_string();
    let discoveries = {
        let mut s = s.lock().unwrap();
        s.seen.push(uri.clone());
        if uri == "/apis/cilium.io/v2" {
            s.discoveries += 1;
        }
        s.discoveries
    };
    match uri.split('?').next().unwrap() {
        // The CRD was established a moment ago: the group is not served at first.
        "/apis/cilium.io/v2" if discoveries < 3 => status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ),
        "/apis/cilium.io/v2" => axum::Json(json!({
            "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "cilium.io/v2",
            "resources": [{"name": "ciliumnodes", "singularName": "ciliumnode", "namespaced": false,
                           "kind": "CiliumNode", "verbs": ["get", "list", "watch"]}]
        }))
        .into_response(),
        "/apis/cilium.io/v2/ciliumnodes" if uri.contains("watch=true") => watch(vec![]),
        "/apis/cilium.io/v2/ciliumnodes" => list(
            "CiliumNodeList",
            vec![json!({"apiVersion": "cilium.io/v2", "kind": "CiliumNode",
                        "metadata": {"name": "infra-cp-1", "resourceVersion": "99"}})],
        ),
        _ => status(404, "NotFound", "not scripted"),
    }
}

#[tokio::test]
async fn custom_kind_is_found_once_discovery_serves_it() {
    let script = Shared::default();
    let client = serve(Router::new().fallback(crd_api).with_state(script.clone())).await;
    let heard = Mutex::new(Vec::new());
    let target = ObjectTarget::new("cilium.io/v2", "CiliumNode", None, "infra-cp-1");
    let result = wait_for(
        client,
        &target,
        ready::exists,
        Duration::from_secs(30),
        |p: &str| heard.lock().unwrap().push(p.to_string()),
    )
    .await;
    assert_eq!(result, Ok(()));
    assert_eq!(script.lock().unwrap().discoveries, 3);
    let heard = heard.into_inner().unwrap();
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert!(
        heard[0].starts_with("cilium.io/v2 CiliumNode is not served by the API server yet"),
        "{heard:?}"
    );
}

async fn stuck_api(State(s): State<Shared>, req: Request) -> Response {
    let uri = req.uri().to_string();
    s.lock().unwrap().seen.push(uri.clone());
    let (path, query) = uri.split_once('?').unwrap_or((&uri, ""));
    let query = urlencoding_decode(query);
    match path {
        "/apis/apps/v1/namespaces/kube-system/daemonsets" if query.contains("watch=true") => {
            watch(vec![])
        }
        "/apis/apps/v1/namespaces/kube-system/daemonsets" => list(
            "DaemonSetList",
            vec![fixture("daemonset-cilium-stuck-init.yaml")],
        ),
        "/apis/apps/v1/namespaces/kube-system/daemonsets/cilium" => {
            axum::Json(fixture("daemonset-cilium-stuck-init.yaml")).into_response()
        }
        "/api/v1/namespaces/kube-system/pods" if query.contains("labelSelector=k8s-app=cilium") => {
            list("PodList", items("pods-cilium-stuck-init.yaml"))
        }
        "/api/v1/namespaces/kube-system/events" => {
            let name = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("fieldSelector=involvedObject.name="))
                .unwrap_or_default()
                .to_string();
            let events = items("events-cilium-stuck-init.yaml")
                .into_iter()
                .filter(|e| e["involvedObject"]["name"] == name.as_str())
                .collect();
            list("EventList", events)
        }
        _ => status(404, "NotFound", "not scripted"),
    }
}

fn items(name: &str) -> Vec<Value> {
    fixture(name)["items"].as_array().unwrap().clone()
}

fn urlencoding_decode(s: &str) -> String {
    s.replace("%3D", "=")
        .replace("%2C", ",")
        .replace("%2F", "/")
}

#[tokio::test]
async fn stuck_cilium_times_out_and_diagnose_explains_why() {
    let script = Shared::default();
    let client = serve(Router::new().fallback(stuck_api).with_state(script.clone())).await;
    let err = wait_for(
        client.clone(),
        &cilium(),
        ready::rollout_check("DaemonSet").unwrap(),
        Duration::from_millis(500),
        |_: &str| {},
    )
    .await
    .unwrap_err();
    assert_eq!(
        err,
        WaitError::Timeout {
            target: "DaemonSet kube-system/cilium".into(),
            after: Duration::from_millis(500),
            last: "0 of 3 updated pods available".into()
        }
    );

    let diagnosis = diagnose(client, &cilium()).await.unwrap();
    let text = diagnosis.to_string();
    assert!(text.contains("cilium-4xk2p  Init:0/6"), "{text}");
    assert!(
        text.contains("init container config running (restarted 4 times); last exit code 1: Error: Build config failed: failed to start: Get \"https://10.96.0.1:443/api/v1/namespaces/kube-system\": dial tcp 10.96.0.1:443: i/o timeout"),
        "{text}"
    );
    assert!(text.contains("Warning BackOff Pod/cilium-b7q2d"), "{text}");
    assert_eq!(diagnosis.pods.len(), 3);
}

#[tokio::test]
async fn a_label_selected_set_is_watched_by_labels_and_diagnosed_as_a_set() {
    let script = Shared::default();
    let client = serve(Router::new().fallback(stuck_api).with_state(script.clone())).await;
    let target = ObjectTarget::labelled(
        "apps/v1",
        "DaemonSet",
        Some("kube-system"),
        "k8s-app=cilium",
    );
    let err = wait_for_set(
        client.clone(),
        &target,
        |daemonsets: &[Value]| match daemonsets {
            [] => Readiness::Pending("no DaemonSet yet".into()),
            [one] => ready::judge("DaemonSet", one),
            many => Readiness::Failed(format!("{} DaemonSets", many.len())),
        },
        Duration::from_millis(500),
        |_: &str| {},
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "timed out after 500ms waiting for DaemonSet objects in kube-system labelled k8s-app=cilium: 0 of 3 updated pods available"
    );
    let seen = script.lock().unwrap().seen.clone();
    assert!(
        seen.iter()
            .all(|u| urlencoding_decode(u).contains("labelSelector=k8s-app=cilium")),
        "{seen:?}"
    );

    // One check per object: the member that is not ready is named.
    let err = wait_for(
        client.clone(),
        &target,
        ready::rollout_check("DaemonSet").unwrap(),
        Duration::from_millis(300),
        |_: &str| {},
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string()
            .ends_with("k8s-app=cilium: cilium: 0 of 3 updated pods available"),
        "{err}"
    );

    let diagnosis = diagnose(client, &target).await.unwrap();
    assert_eq!(diagnosis.pods.len(), 3);
    assert!(
        diagnosis
            .to_string()
            .contains("Warning BackOff Pod/cilium-b7q2d"),
        "{diagnosis}"
    );
}

#[tokio::test]
async fn failed_check_is_reported_with_its_reason() {
    let script = Shared::default();
    let client = serve(Router::new().fallback(stuck_api).with_state(script)).await;
    let err = wait_for(
        client,
        &cilium(),
        |_: Option<&Value>| Readiness::Failed("gave up".into()),
        Duration::from_secs(30),
        |_: &str| {},
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "DaemonSet kube-system/cilium failed: gave up"
    );
}
