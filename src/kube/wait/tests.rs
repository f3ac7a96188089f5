use super::resolve::{is_permanent_watch_error, retry_delay};
use super::*;
use ::kube::core::Status;
use futures::stream;
use pretty_assertions::assert_eq;
use watcher::Event as E;

fn fixture(name: &str) -> DynamicObject {
    let path = format!(
        "{}/tests/fixtures/objects/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let value: Value = serde_saphyr::from_str(&text).unwrap();
    serde_json::from_value(value).unwrap()
}

fn named(name: &str) -> Selector {
    Selector::Name(name.into())
}

fn cilium() -> ObjectTarget {
    ObjectTarget::new("apps/v1", "DaemonSet", Some("kube-system"), "cilium")
}

fn unavailable() -> watcher::Error {
    watcher::Error::WatchError(Box::new(
        Status::failure(
            "the server is currently unable to handle the request",
            "ServiceUnavailable",
        )
        .with_code(503),
    ))
}

fn forbidden() -> watcher::Error {
    watcher::Error::InitialListFailed(::kube::Error::Api(Box::new(
        Status::failure("daemonsets.apps \"cilium\" is forbidden", "Forbidden").with_code(403),
    )))
}

fn daemonset_target() -> ObjectTarget {
    ObjectTarget::new("apps/v1", "DaemonSet", Some("kube-system"), "cilium")
}

type Item = Result<watcher::Event<DynamicObject>, watcher::Error>;

/// Runs `drive` over a scripted watch, returning its result and what
/// `progress` heard.
async fn run(items: Vec<Item>) -> (Result<bool, Stop>, Vec<String>) {
    let heard = Mutex::new(Vec::new());
    let progress = |s: &str| heard.lock().unwrap().push(s.to_string());
    let state = Mutex::new(Progress::default());
    let reporter = Reporter {
        state: &state,
        progress: &progress,
        target: &daemonset_target(),
    };
    let check = each(
        crate::kube::ready::rollout_check("DaemonSet").unwrap(),
        &named("cilium"),
    );
    let result = drive(
        stream::iter(items),
        &named("cilium"),
        &check,
        &reporter,
        no_read,
    )
    .await;
    (result, heard.into_inner().unwrap())
}

#[tokio::test]
async fn stale_status_then_rollout_then_ready() {
    let mut done = fixture("daemonset-cilium-rolled-out.yaml");
    done.metadata.generation = Some(3);
    done.data["status"]["observedGeneration"] = 3.into();
    let (result, heard) = run(vec![
        Ok(E::Init),
        Ok(E::InitApply(fixture(
            "daemonset-cilium-stale-generation.yaml",
        ))),
        Ok(E::InitDone),
        Ok(E::Apply(fixture("daemonset-cilium-mid-rollout.yaml"))),
        Ok(E::Apply(fixture("daemonset-cilium-mid-rollout.yaml"))),
        Ok(E::Apply(done)),
        Ok(E::Apply(fixture("daemonset-cilium-mid-rollout.yaml"))),
    ])
    .await;
    assert_eq!(result, Ok(true));
    assert_eq!(
        heard,
        [
            "waiting for the controller to observe generation 3",
            "1 of 3 pods updated"
        ]
    );
}

#[tokio::test]
async fn transient_errors_are_reported_and_survived() {
    let (result, heard) = run(vec![
        Err(unavailable()),
        Ok(E::Init),
        Ok(E::InitApply(fixture("daemonset-cilium-mid-rollout.yaml"))),
        Ok(E::InitDone),
        Err(unavailable()),
        Err(unavailable()),
        Ok(E::Init),
        Ok(E::InitApply(fixture("daemonset-cilium-mid-rollout.yaml"))),
        Ok(E::InitDone),
        Ok(E::Apply(fixture("daemonset-cilium-rolled-out.yaml"))),
    ])
    .await;
    assert_eq!(result, Ok(true));
    let retry = "API server error, retrying: watch failed: the server is currently unable to handle the request (503)";
    assert_eq!(heard, [retry, "1 of 3 pods updated", retry]);
}

#[tokio::test]
async fn absent_object_is_checked_as_none_until_it_appears() {
    let (result, heard) = run(vec![
        Ok(E::Init),
        Ok(E::InitDone),
        Ok(E::Apply(fixture("daemonset-cilium-stuck-init.yaml"))),
        Ok(E::Delete(fixture("daemonset-cilium-stuck-init.yaml"))),
    ])
    .await;
    assert_eq!(result, Ok(false));
    assert_eq!(
        heard,
        [
            "DaemonSet does not exist yet",
            "0 of 3 updated pods available",
            "DaemonSet does not exist yet"
        ]
    );
}

#[tokio::test]
async fn objects_with_other_names_are_ignored() {
    let mut other = fixture("daemonset-cilium-rolled-out.yaml");
    other.metadata.name = Some("cilium-envoy".into());
    let (result, heard) = run(vec![
        Ok(E::Init),
        Ok(E::InitApply(other.clone())),
        Ok(E::InitDone),
        Ok(E::Apply(other)),
    ])
    .await;
    assert_eq!(result, Ok(false));
    assert_eq!(heard, ["DaemonSet does not exist yet"]);
}

#[tokio::test]
async fn forbidden_ends_the_wait_at_once() {
    let (result, _) = run(vec![Err(forbidden()), Ok(E::Init), Ok(E::InitDone)]).await;
    assert!(
        matches!(&result, Err(Stop::Api(m)) if m == "list failed: daemonsets.apps \"cilium\" is forbidden (403)"),
        "{result:?}"
    );
}

#[tokio::test]
async fn failed_check_ends_the_wait() {
    let heard = Mutex::new(Vec::<String>::new());
    let progress = |s: &str| heard.lock().unwrap().push(s.to_string());
    let state = Mutex::new(Progress::default());
    let reporter = Reporter {
        state: &state,
        progress: &progress,
        target: &daemonset_target(),
    };
    let check = each(
        crate::kube::ready::rollout_check("Job").unwrap(),
        &named("cilium"),
    );
    let mut job = fixture("job-failed.yaml");
    job.metadata.name = Some("cilium".into());
    let items: Vec<Item> = vec![Ok(E::Init), Ok(E::InitApply(job)), Ok(E::InitDone)];
    let result = drive(
        stream::iter(items),
        &named("cilium"),
        &check,
        &reporter,
        no_read,
    )
    .await;
    let err = result.unwrap_err().into_error(&ObjectTarget::new(
        "batch/v1",
        "Job",
        Some("security"),
        "migrate",
    ));
    assert_eq!(
        err.to_string(),
        "Job security/migrate failed: BackoffLimitExceeded: Job has reached the specified backoff limit"
    );
}

/// The fallback read when a test's watch has all there is to say.
async fn no_read() -> Option<Vec<serde_json::Value>> {
    None
}

/// A watch that cannot start (the API server refuses it, again and again)
/// does not hide a workload that is Ready: the direct read after the failed
/// start sees it, without waiting for the watch ever to work.
#[tokio::test]
async fn a_ready_object_is_seen_by_a_direct_read_while_the_watch_fails() {
    let state = Mutex::new(Progress::default());
    let heard = Mutex::new(Vec::<String>::new());
    let progress = |s: &str| heard.lock().unwrap().push(s.to_string());
    let reporter = Reporter {
        state: &state,
        progress: &progress,
        target: &daemonset_target(),
    };
    let check = each(
        crate::kube::ready::rollout_check("DaemonSet").unwrap(),
        &named("cilium"),
    );
    let refused = || {
        Err(watcher::Error::WatchStartFailed(::kube::Error::Api(
            ::kube::core::Status::failure("the server is busy", "ServiceUnavailable")
                .with_code(503)
                .boxed(),
        )))
    };
    let items: Vec<Item> = vec![refused(), refused(), refused()];
    let ready = serde_json::to_value(fixture("daemonset-cilium-rolled-out.yaml")).unwrap();
    let read = || {
        let ready = ready.clone();
        async move { Some(vec![ready]) }
    };
    let result = drive(stuck(items), &named("cilium"), &check, &reporter, read).await;
    assert_eq!(result.unwrap(), true);
    assert!(
        heard.lock().unwrap()[0].contains("watch failed to start"),
        "{:?}",
        heard.lock().unwrap()
    );
}

#[test]
fn watch_restarts_back_off_to_five_seconds_at_most() {
    let delays: Vec<Duration> = CappedBackoff::default().take(8).collect();
    assert_eq!(delays[0], Duration::from_millis(200));
    assert_eq!(delays[4], Duration::from_millis(3200));
    assert!(delays[5..].iter().all(|d| *d == Duration::from_secs(5)));
}

/// A watch that reports one state and then nothing more, ever.
fn stuck(items: Vec<Item>) -> impl Stream<Item = Item> {
    stream::iter(items).chain(stream::pending())
}

#[tokio::test]
async fn timeout_names_the_target_and_the_last_reason() {
    let state = Mutex::new(Progress::default());
    let progress = |_: &str| {};
    let reporter = Reporter {
        state: &state,
        progress: &progress,
        target: &daemonset_target(),
    };
    let check = each(
        crate::kube::ready::rollout_check("DaemonSet").unwrap(),
        &named("cilium"),
    );
    let items = vec![
        Ok(E::Init),
        Ok(E::InitApply(fixture("daemonset-cilium-stuck-init.yaml"))),
        Ok(E::InitDone),
    ];
    let work = async {
        drive(stuck(items), &named("cilium"), &check, &reporter, no_read).await?;
        Ok(())
    };
    // A real, short timeout: tokio's test-util (time pausing) is not enabled.
    let err = bounded(&cilium(), Duration::from_millis(20), &state, work)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "timed out after 20ms waiting for DaemonSet kube-system/cilium: 0 of 3 updated pods available"
    );
}

#[tokio::test]
async fn timeout_mentions_an_api_error_that_followed_the_last_reason() {
    let state = Mutex::new(Progress::default());
    let progress = |_: &str| {};
    let reporter = Reporter {
        state: &state,
        progress: &progress,
        target: &daemonset_target(),
    };
    let check = each(
        crate::kube::ready::rollout_check("DaemonSet").unwrap(),
        &named("cilium"),
    );
    let items = vec![
        Ok(E::Init),
        Ok(E::InitApply(fixture("daemonset-cilium-stuck-init.yaml"))),
        Ok(E::InitDone),
        Err(unavailable()),
    ];
    let work = async {
        drive(stuck(items), &named("cilium"), &check, &reporter, no_read).await?;
        Ok(())
    };
    let err = bounded(&cilium(), Duration::from_millis(20), &state, work)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "timed out after 20ms waiting for DaemonSet kube-system/cilium: 0 of 3 updated pods available (last API error: watch failed: the server is currently unable to handle the request (503))"
    );
}

#[tokio::test]
async fn timeout_before_any_answer_says_so() {
    let state = Mutex::new(Progress::default());
    let err = bounded(
        &cilium(),
        Duration::from_millis(20),
        &state,
        std::future::pending(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err,
        WaitError::Timeout {
            target: "DaemonSet kube-system/cilium".into(),
            after: Duration::from_millis(20),
            last: "no answer from the API server".into()
        }
    );
}

#[test]
fn permanent_and_transient_watch_errors() {
    assert!(is_permanent_watch_error(&forbidden()));
    assert!(!is_permanent_watch_error(&unavailable()));
    let not_found = watcher::Error::InitialListFailed(::kube::Error::Api(Box::new(
        Status::failure(
            "the server could not find the requested resource",
            "NotFound",
        )
        .with_code(404),
    )));
    // A CRD being re-established answers 404 for a moment.
    assert!(!is_permanent_watch_error(&not_found));
}

#[test]
fn builtin_kinds_resolve_without_discovery() {
    let (ar, namespaced) = builtin_resource("apps/v1", "DaemonSet").unwrap();
    assert_eq!(
        (ar.group.as_str(), ar.plural.as_str(), namespaced),
        ("apps", "daemonsets", true)
    );
    let (ar, namespaced) =
        builtin_resource("apiextensions.k8s.io/v1", "CustomResourceDefinition").unwrap();
    assert_eq!(
        (ar.plural.as_str(), namespaced),
        ("customresourcedefinitions", false)
    );
    let (ar, namespaced) = builtin_resource("v1", "ConfigMap").unwrap();
    assert_eq!(
        (ar.group.as_str(), ar.plural.as_str(), namespaced),
        ("", "configmaps", true)
    );
}

#[test]
fn custom_and_unknown_versions_go_to_discovery() {
    assert_eq!(
        builtin_resource("cilium.io/v2", "CiliumNetworkPolicy"),
        None
    );
    assert_eq!(builtin_resource("apps/v1beta1", "Deployment"), None);
    assert_eq!(builtin_resource("v1", "Deployment"), None);
}

#[test]
fn discovery_retries_start_fast_and_cap() {
    let delays: Vec<u64> = (0..8).map(|a| retry_delay(a).as_millis() as u64).collect();
    assert_eq!(delays, [250, 500, 1000, 2000, 4000, 5000, 5000, 5000]);
    assert_eq!(retry_delay(u32::MAX), Duration::from_secs(5));
}

#[test]
fn timeout_wording() {
    let err = WaitError::Timeout {
        target: cilium().to_string(),
        after: Duration::from_secs(300),
        last: "1 of 3 updated pods available".into(),
    };
    assert_eq!(
        err.to_string(),
        "timed out after 5m waiting for DaemonSet kube-system/cilium: 1 of 3 updated pods available"
    );
}

#[test]
fn targets_and_errors_read_well() {
    let crd = ObjectTarget::new(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        None,
        "gateways.gateway.networking.k8s.io",
    );
    assert_eq!(
        crd.to_string(),
        "CustomResourceDefinition gateways.gateway.networking.k8s.io"
    );
    let api = WaitError::Api {
        target: cilium().to_string(),
        message: "forbidden".into(),
    };
    assert_eq!(
        api.to_string(),
        "cannot read DaemonSet kube-system/cilium: forbidden"
    );
}

fn slice(name: &str, ready: bool) -> DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": "kube-system",
                     "labels": {"kubernetes.io/service-name": "hubble-relay"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": ready}}],
    }))
    .unwrap()
}

/// A set check: some selected EndpointSlice has a ready endpoint.
fn any_ready_endpoint(slices: &[Value]) -> Readiness {
    let ready = slices.iter().any(|s| {
        s["endpoints"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["conditions"]["ready"] == Value::Bool(true))
    });
    match (slices.len(), ready) {
        (_, true) => Readiness::Ready,
        (0, false) => Readiness::Pending("no EndpointSlice yet".into()),
        (n, false) => Readiness::Pending(format!("no ready endpoint in {n} EndpointSlices")),
    }
}

fn hubble() -> Selector {
    Selector::Labels("kubernetes.io/service-name=hubble-relay".into())
}

#[tokio::test]
async fn a_label_selected_set_is_judged_as_a_whole() {
    let heard = Mutex::new(Vec::<String>::new());
    let progress = |s: &str| heard.lock().unwrap().push(s.to_string());
    let state = Mutex::new(Progress::default());
    let reporter = Reporter {
        state: &state,
        progress: &progress,
        target: &daemonset_target(),
    };
    let items: Vec<Item> = vec![
        Ok(E::Init),
        Ok(E::InitDone),
        Ok(E::Apply(slice("hubble-relay-a", false))),
        Ok(E::Apply(slice("hubble-relay-b", false))),
        Ok(E::Delete(slice("hubble-relay-a", false))),
        Ok(E::Apply(slice("hubble-relay-b", true))),
    ];
    let result = drive(
        stream::iter(items),
        &hubble(),
        &any_ready_endpoint,
        &reporter,
        no_read,
    )
    .await;
    assert_eq!(result, Ok(true));
    assert_eq!(
        heard.into_inner().unwrap(),
        [
            "no EndpointSlice yet",
            "no ready endpoint in 1 EndpointSlices",
            "no ready endpoint in 2 EndpointSlices",
            "no ready endpoint in 1 EndpointSlices",
        ]
    );
}

#[test]
fn the_tracker_keeps_every_selected_object_in_name_order_across_relists() {
    let mut tracker = Tracker::default();
    for event in [
        E::Init,
        E::InitApply(slice("b", false)),
        E::InitApply(slice("a", false)),
        E::InitDone,
        E::Apply(slice("c", false)),
        E::Apply(slice("a", true)),
    ] {
        tracker.apply(event, &hubble());
    }
    let names: Vec<&str> = tracker.current.iter().map(name_of).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(
        tracker.current[0]["endpoints"][0]["conditions"]["ready"],
        true
    );
    // A relist replaces the set: what it no longer lists is gone.
    for event in [E::Init, E::InitApply(slice("c", true)), E::InitDone] {
        tracker.apply(event, &hubble());
    }
    let names: Vec<&str> = tracker.current.iter().map(name_of).collect();
    assert_eq!(names, ["c"]);
}

#[test]
fn each_object_of_a_labelled_set_must_pass_a_per_object_check() {
    let check = each(crate::kube::ready::exists, &hubble());
    assert_eq!(
        check(&[]),
        Readiness::Pending("object does not exist yet".into())
    );
    let ready = |o: Option<&Value>| match o {
        Some(o) if o["endpoints"][0]["conditions"]["ready"] == true => Readiness::Ready,
        Some(_) => Readiness::Pending("not ready".into()),
        None => Readiness::Pending("none".into()),
    };
    let check = each(ready, &hubble());
    let a = serde_json::to_value(slice("a", true)).unwrap();
    let b = serde_json::to_value(slice("b", false)).unwrap();
    assert_eq!(check(std::slice::from_ref(&a)), Readiness::Ready);
    assert_eq!(check(&[a, b]), Readiness::Pending("b: not ready".into()));
}

#[test]
fn labelled_targets_read_well() {
    let target = ObjectTarget::labelled(
        "discovery.k8s.io/v1",
        "EndpointSlice",
        Some("kube-system"),
        "kubernetes.io/service-name=hubble-relay",
    );
    assert_eq!(
        target.to_string(),
        "EndpointSlice objects in kube-system labelled kubernetes.io/service-name=hubble-relay"
    );
    let nodes = ObjectTarget::labelled("v1", "Node", None, "node-role.kubernetes.io/control-plane");
    assert_eq!(
        nodes.to_string(),
        "Node objects labelled node-role.kubernetes.io/control-plane"
    );
}
