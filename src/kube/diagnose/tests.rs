use super::*;
use pretty_assertions::assert_eq;
use serde_json::json;

#[derive(serde::Deserialize)]
struct List<T> {
    items: Vec<T>,
}

fn fixture_list<T: serde::de::DeserializeOwned>(name: &str) -> Vec<T> {
    let path = format!(
        "{}/tests/fixtures/objects/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let list: List<T> = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    list.items
}

fn pod(v: Value) -> Pod {
    serde_json::from_value(v).unwrap()
}

/// A pod with the given init and main container statuses; specs are derived
/// from the statuses' names.
fn pod_with(phase: &str, init: Value, main: Value) -> Pod {
    let names = |v: &Value| -> Vec<Value> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|c| json!({"name": c["name"], "image": "x"}))
            .collect()
    };
    pod(json!({
        "metadata": {"name": "p"},
        "spec": {"initContainers": names(&init), "containers": names(&main)},
        "status": {"phase": phase, "initContainerStatuses": init, "containerStatuses": main}
    }))
}

fn cs(name: &str, state: Value) -> Value {
    json!({"name": name, "image": "x", "imageID": "", "ready": false, "restartCount": 0, "state": state})
}

fn status_of(p: &Pod) -> String {
    PodDiagnosis::from_pod(p).status
}

fn cilium() -> Diagnosis {
    Diagnosis::build(
        &fixture_list("pods-cilium-stuck-init.yaml"),
        &fixture_list("events-cilium-stuck-init.yaml"),
    )
}

#[test]
fn kube_proxy_free_deadlock_cilium_pods_show_kubectl_status_and_the_stuck_init_container() {
    let d = cilium();
    let rows: Vec<_> = d
        .pods
        .iter()
        .map(|p| {
            (
                p.name.as_str(),
                p.status.as_str(),
                p.ready.as_str(),
                p.restarts,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("cilium-4xk2p", "Init:0/6", "0/1", 4),
            ("cilium-b7q2d", "Init:CrashLoopBackOff", "0/1", 4),
            ("cilium-m9zfh", "Init:0/6", "0/1", 0),
        ]
    );
    let timeout = "Error: Build config failed: failed to start: Get \"https://10.96.0.1:443/api/v1/namespaces/kube-system\": dial tcp 10.96.0.1:443: i/o timeout";
    assert_eq!(
        d.pods[0].reason.as_deref(),
        Some(
            format!(
                "init container config running (restarted 4 times); last exit code 1: {timeout}"
            )
            .as_str()
        )
    );
    assert_eq!(
        d.pods[1].reason.as_deref(),
        Some(format!(
            "init container config waiting: CrashLoopBackOff (back-off 2m40s restarting failed container=config pod=cilium-b7q2d_kube-system(2d8e6f1a-9c4b-4e7d-a3f5-0b1c2d3e4f5a)) (restarted 4 times); last exit code 1: {timeout}"
        ).as_str())
    );
    assert_eq!(
        d.pods[2].reason.as_deref(),
        Some("init container config running, not finished yet")
    );
}

#[test]
fn kube_proxy_free_deadlock_rendered_text_explains_the_stuck_cilium() {
    let text = cilium().to_string();
    assert_eq!(
        text.lines().take(3).collect::<Vec<_>>(),
        [
            "  POD           STATUS                 READY  RESTARTS  NODE",
            "  cilium-4xk2p  Init:0/6               0/1    4         infra-cp-1",
            "      init container config running (restarted 4 times); last exit code 1: Error: Build config failed: failed to start: Get \"https://10.96.0.1:443/api/v1/namespaces/kube-system\": dial tcp 10.96.0.1:443: i/o timeout",
        ]
    );
    assert!(text.contains("    2025-11-08T10:06:41Z Warning BackOff Pod/cilium-b7q2d: Back-off restarting failed container config in pod cilium-b7q2d_kube-system(2d8e6f1a-9c4b-4e7d-a3f5-0b1c2d3e4f5a) (x9)\n"), "{text}");
    // Every line is indented so it nests under the failed release.
    assert!(text.lines().all(|l| l.starts_with("  ")), "{text}");
}

#[test]
fn events_are_the_most_recent_ones_oldest_first() {
    let d = cilium();
    // 13 events in the fixture, out of order; the 3 oldest (the DaemonSet's
    // SuccessfulCreate) are dropped. The scheduler's events only carry a
    // sub-second eventTime, which orders them within the same second.
    assert_eq!(d.events.len(), DEFAULT_EVENT_LIMIT);
    assert!(!d.events.iter().any(|e| e.contains("SuccessfulCreate")));
    assert_eq!(
        d.events.first().unwrap(),
        "2025-11-08T10:00:04Z Normal Scheduled Pod/cilium-b7q2d: Successfully assigned kube-system/cilium-b7q2d to infra-w-1"
    );
    assert_eq!(
        d.events.last().unwrap(),
        "2025-11-08T10:06:41Z Warning BackOff Pod/cilium-b7q2d: Back-off restarting failed container config in pod cilium-b7q2d_kube-system(2d8e6f1a-9c4b-4e7d-a3f5-0b1c2d3e4f5a) (x9)"
    );
    let mut times: Vec<&str> = d.events.iter().map(|e| &e[..20]).collect();
    let sorted = {
        let mut t = times.clone();
        t.sort();
        t
    };
    assert_eq!(times, sorted);
    times.dedup();
    assert!(times.len() > 3);
}

#[test]
fn event_limit_is_honoured_and_duplicates_are_dropped() {
    let mut events: Vec<Event> = fixture_list("events-cilium-stuck-init.yaml");
    events.extend(events.clone());
    let d = Diagnosis::build_with_limit(&[], &events, 3);
    assert_eq!(d.events.len(), 3);
    assert_eq!(d.events.iter().filter(|e| e.contains("(x9)")).count(), 1);
}

#[test]
fn kube_proxy_free_deadlock_coredns_is_pending_because_nodes_are_not_ready() {
    let d = Diagnosis::build(
        &fixture_list("pods-coredns-pending.yaml"),
        &fixture_list("events-coredns-pending.yaml"),
    );
    let p = &d.pods[0];
    assert_eq!(
        (p.status.as_str(), p.ready.as_str(), p.node.as_deref()),
        ("Pending", "0/1", None)
    );
    assert_eq!(
        p.reason.as_deref(),
        Some(
            "unschedulable: 0/3 nodes are available: 3 node(s) had untolerated taint {node.kubernetes.io/not-ready: }. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        )
    );
    let text = d.to_string();
    assert!(
        text.contains("coredns-7d9c8b5f6b-5mxkq  Pending  0/1    0         <none>"),
        "{text}"
    );
    assert!(
        text.contains("Warning FailedScheduling Pod/coredns-7d9c8b5f6b-tq8wn: 0/3 nodes"),
        "{text}"
    );
}

#[test]
fn diagnosis_serializes_for_json_output() {
    let d = Diagnosis::build(&fixture_list("pods-coredns-pending.yaml"), &[]);
    let v = serde_json::to_value(&d).unwrap();
    assert_eq!(v["pods"][0]["name"], "coredns-7d9c8b5f6b-5mxkq");
    assert_eq!(v["pods"][0]["status"], "Pending");
    assert_eq!(v["pods"][0]["node"], Value::Null);
    assert_eq!(v["events"], json!([]));
}

#[test]
fn empty_diagnosis_says_so() {
    let d = Diagnosis::default();
    assert!(d.is_empty());
    assert_eq!(d.to_string(), "  pods: none found\n  events: none\n");
}

#[test]
fn unhealthy_pods_come_first_and_long_lists_are_summarised() {
    let running = |name: &str| {
        pod(json!({
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "c", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
                 "state": {"running": {}}}]}
        }))
    };
    let mut pods: Vec<Pod> = (0..12).map(|i| running(&format!("a-{i:02}"))).collect();
    pods.push(pod(
        json!({"metadata": {"name": "z-broken"}, "status": {"phase": "Pending"}}),
    ));
    let d = Diagnosis::build(&pods, &[]);
    assert_eq!(d.pods[0].name, "z-broken");
    assert!(d.pods[1].is_healthy());
    let text = d.to_string();
    assert!(
        text.contains("  ... and 3 more pods (3 of them healthy)\n"),
        "{text}"
    );
}

// The STATUS column, one kubectl printPod branch per test.

#[test]
fn status_init_waiting_reason() {
    let p = pod_with(
        "Pending",
        json!([cs(
            "mount-cgroup",
            json!({"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s restarting failed container"}})
        )]),
        json!([cs(
            "agent",
            json!({"waiting": {"reason": "PodInitializing"}})
        )]),
    );
    let d = PodDiagnosis::from_pod(&p);
    assert_eq!(d.status, "Init:CrashLoopBackOff");
    assert_eq!(
        d.reason.as_deref(),
        Some(
            "init container mount-cgroup waiting: CrashLoopBackOff (back-off 5m0s restarting failed container)"
        )
    );
}

#[test]
fn status_init_terminated_with_reason_and_message() {
    let p = pod_with(
        "Pending",
        json!([cs(
            "config",
            json!({"terminated": {"exitCode": 1, "reason": "Error", "message": "line one\nfatal: cannot reach API\n\n"}})
        )]),
        json!([cs(
            "agent",
            json!({"waiting": {"reason": "PodInitializing"}})
        )]),
    );
    let d = PodDiagnosis::from_pod(&p);
    assert_eq!(d.status, "Init:Error");
    assert_eq!(
        d.reason.as_deref(),
        Some("init container config terminated with exit code 1: fatal: cannot reach API")
    );
}

#[test]
fn status_init_terminated_without_reason_shows_exit_code_or_signal() {
    let exit = pod_with(
        "Pending",
        json!([cs("a", json!({"terminated": {"exitCode": 2}}))]),
        json!([]),
    );
    assert_eq!(status_of(&exit), "Init:ExitCode:2");
    let signal = pod_with(
        "Pending",
        json!([cs(
            "a",
            json!({"terminated": {"exitCode": 137, "signal": 9}})
        )]),
        json!([]),
    );
    assert_eq!(status_of(&signal), "Init:Signal:9");
}

#[test]
fn status_init_counts_completed_init_containers() {
    let p = pod_with(
        "Pending",
        json!([
            cs(
                "a",
                json!({"terminated": {"exitCode": 0, "reason": "Completed"}})
            ),
            cs(
                "b",
                json!({"terminated": {"exitCode": 0, "reason": "Completed"}})
            ),
            cs("c", json!({"running": {}})),
            cs("d", json!({"waiting": {"reason": "PodInitializing"}})),
        ]),
        json!([cs(
            "main",
            json!({"waiting": {"reason": "PodInitializing"}})
        )]),
    );
    let d = PodDiagnosis::from_pod(&p);
    assert_eq!(d.status, "Init:2/4");
    assert_eq!(
        d.reason.as_deref(),
        Some("init container c running, not finished yet")
    );
}

#[test]
fn status_main_container_waiting_reasons() {
    for reason in [
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ContainerCreating",
        "ErrImagePull",
    ] {
        let p = pod_with(
            "Pending",
            json!([]),
            json!([cs("app", json!({"waiting": {"reason": reason}}))]),
        );
        assert_eq!(status_of(&p), reason);
    }
}

#[test]
fn status_crashloop_reason_carries_the_last_exit() {
    let mut c = cs(
        "app",
        json!({"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s restarting failed container=app"}}),
    );
    c["restartCount"] = json!(3);
    c["lastState"] = json!({"terminated": {"exitCode": 1, "reason": "Error"}});
    let p = pod_with("Running", json!([]), json!([c]));
    let d = PodDiagnosis::from_pod(&p);
    assert_eq!((d.status.as_str(), d.restarts), ("CrashLoopBackOff", 3));
    assert_eq!(
        d.reason.as_deref(),
        Some(
            "container app waiting: CrashLoopBackOff (back-off 40s restarting failed container=app) (restarted 3 times); last exit code 1 (Error)"
        )
    );
}

#[test]
fn status_running_and_ready() {
    let mut c = cs(
        "app",
        json!({"running": {"startedAt": "2025-11-08T10:00:00Z"}}),
    );
    c["ready"] = json!(true);
    let p = pod_with("Running", json!([]), json!([c]));
    let d = PodDiagnosis::from_pod(&p);
    assert_eq!(
        (d.status.as_str(), d.ready.as_str(), d.reason.as_deref()),
        ("Running", "1/1", None)
    );
    assert!(d.is_healthy());
}

#[test]
fn status_running_but_not_ready_is_explained() {
    let p = pod_with(
        "Running",
        json!([]),
        json!([cs("app", json!({"running": {}}))]),
    );
    let d = PodDiagnosis::from_pod(&p);
    assert_eq!((d.status.as_str(), d.ready.as_str()), ("Running", "0/1"));
    assert_eq!(
        d.reason.as_deref(),
        Some("container app running but not ready")
    );
    assert!(!d.is_healthy());
}

#[test]
fn status_completed_with_a_running_container_is_not_completed() {
    let mut running = cs("b", json!({"running": {}}));
    running["ready"] = json!(true);
    let done = cs(
        "a",
        json!({"terminated": {"exitCode": 0, "reason": "Completed"}}),
    );
    let p = pod_with("Running", json!([]), json!([done, running]));
    assert_eq!(status_of(&p), "NotReady");
    let mut ready = p.clone();
    ready.status.as_mut().unwrap().conditions = Some(vec![
        serde_json::from_value(json!({"type": "Ready", "status": "True"})).unwrap(),
    ]);
    assert_eq!(status_of(&ready), "Running");
}

#[test]
fn status_terminating_and_node_lost() {
    let mut c = cs("app", json!({"running": {}}));
    c["ready"] = json!(true);
    let mut p = pod_with("Running", json!([]), json!([c]));
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2025-11-08T10:00:00Z".parse().unwrap(),
    ));
    assert_eq!(status_of(&p), "Terminating");
    p.status.as_mut().unwrap().reason = Some("NodeLost".into());
    assert_eq!(status_of(&p), "Unknown");
}

#[test]
fn status_evicted_pod_uses_pod_reason() {
    let p = pod(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": "Failed", "reason": "Evicted",
                   "message": "The node was low on resource: memory."}
    }));
    let d = PodDiagnosis::from_pod(&p);
    assert_eq!(d.status, "Evicted");
    assert_eq!(
        d.reason.as_deref(),
        Some("Evicted: The node was low on resource: memory.")
    );
}

#[test]
fn status_scheduling_gated() {
    let p = pod(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
             "message": "Scheduling is blocked due to non-empty scheduling gates"}]}
    }));
    let d = PodDiagnosis::from_pod(&p);
    assert_eq!(d.status, "SchedulingGated");
    assert_eq!(
        d.reason.as_deref(),
        Some("scheduling gated: Scheduling is blocked due to non-empty scheduling gates")
    );
}

#[test]
fn status_started_sidecar_counts_as_a_ready_container() {
    let mut sidecar = cs("proxy", json!({"running": {}}));
    sidecar["started"] = json!(true);
    sidecar["ready"] = json!(true);
    sidecar["restartCount"] = json!(2);
    let mut app = cs("app", json!({"running": {}}));
    app["ready"] = json!(true);
    let mut p = pod_with("Running", json!([sidecar]), json!([app]));
    p.spec.as_mut().unwrap().init_containers.as_mut().unwrap()[0].restart_policy =
        Some("Always".into());
    let d = PodDiagnosis::from_pod(&p);
    assert_eq!(
        (d.status.as_str(), d.ready.as_str(), d.restarts),
        ("Running", "2/2", 2)
    );
    assert_eq!(d.reason, None);
}

#[test]
fn long_messages_are_cut() {
    let long = "x".repeat(1000);
    let p = pod_with(
        "Pending",
        json!([cs(
            "a",
            json!({"terminated": {"exitCode": 1, "message": long}})
        )]),
        json!([]),
    );
    let reason = PodDiagnosis::from_pod(&p).reason.unwrap();
    assert!(
        reason.chars().count() < 400 && reason.ends_with('…'),
        "{reason}"
    );
}

#[test]
fn pod_without_status_does_not_panic() {
    let d = PodDiagnosis::from_pod(&Pod::default());
    assert_eq!(
        (d.status.as_str(), d.phase.as_str(), d.ready.as_str()),
        ("", "Unknown", "0/0")
    );
}

// Selectors.

#[test]
fn selector_from_match_labels_is_sorted() {
    let ds = json!({"spec": {"selector": {"matchLabels": {"k8s-app": "cilium", "app": "x"}}}});
    assert_eq!(pod_selector(&ds).as_deref(), Some("app=x,k8s-app=cilium"));
}

#[test]
fn selector_with_match_expressions() {
    let w = json!({"spec": {"selector": {
    "matchLabels": {"app": "coredns"},
    "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["b", "a"]},
        {"key": "track", "operator": "NotIn", "values": ["canary"]},
        {"key": "managed", "operator": "Exists"},
        {"key": "legacy", "operator": "DoesNotExist"}
    ]}}});
    assert_eq!(
        pod_selector(&w).as_deref(),
        Some("app=coredns,tier in (a,b),track notin (canary),managed,!legacy")
    );
}

#[test]
fn selector_plain_map_form() {
    let rc = json!({"spec": {"selector": {"app": "web"}}});
    assert_eq!(pod_selector(&rc).as_deref(), Some("app=web"));
}

#[test]
fn selector_absent_empty_or_invalid_is_none() {
    assert_eq!(pod_selector(&json!({"spec": {}})), None);
    assert_eq!(pod_selector(&json!({"spec": {"selector": {}}})), None);
    assert_eq!(
        pod_selector(&json!({"spec": {"selector": {"matchLabels": {}}}})),
        None
    );
    let bad_op =
        json!({"spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Gt"}]}}});
    assert_eq!(pod_selector(&bad_op), None);
    let bad_value = json!({"spec": {"selector": {"matchLabels": {"a": 1}}}});
    assert_eq!(pod_selector(&bad_value), None);
}

#[test]
fn selector_of_a_real_daemonset_fixture() {
    let path = format!(
        "{}/tests/fixtures/objects/daemonset-cilium-stuck-init.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let ds: Value = serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(pod_selector(&ds).as_deref(), Some("k8s-app=cilium"));
}
