//! `bootstrap apply` end to end: the real binary against the loopback API
//! server and the fake helm.

use std::time::Duration;

use kube_loopback::Rollout;
use serde_json::json;
use testkit::builder::Test;
use testkit::cluster::{Cluster, crd, daemonset, dead_lease, deployment, live_lease};

use testkit::cluster::{CLUSTER, RELEASES};

fn config() -> Test {
    Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file("releases/core.yaml", RELEASES)
}

/// certificates.cert-manager.io held by a finalizer and deleted: it stays,
/// marked, until the test lets it go.
fn held_deleted_crd(cluster: &Cluster) -> &'static str {
    let name = "certificates.cert-manager.io";
    let mut held = crd("cert-manager.io", "certificates", "Certificate");
    held["metadata"]["finalizers"] = json!(["test.example/hold"]);
    cluster.api.insert(held);
    cluster.api.delete(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        None,
        name,
    );
    name
}

fn live_crd(cluster: &Cluster, name: &str) -> Option<serde_json::Value> {
    cluster.api.get(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        None,
        name,
    )
}

/// A CRD still being deleted (a `destroy --crds` moments ago, its custom
/// resources not yet removed) would take the CRD phase's apply and then
/// vanish, leaving the phase to wait for an Established that never comes:
/// the phase waits until it is gone and creates it again.
#[test]
fn a_crd_being_deleted_is_created_again_once_it_is_gone() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    let name = held_deleted_crd(&cluster);
    let get = || live_crd(&cluster, name);
    assert!(
        !get().unwrap()["metadata"]["deletionTimestamp"].is_null(),
        "marked"
    );
    // As kube-apiserver leaves a CRD deleted moments after its storage was
    // set up: its cleanup failed, and is retried only after a backoff.
    let mut failed = get().unwrap();
    failed["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({
            "type": "Terminating", "status": "True", "reason": "InstanceDeletionFailed",
            "message": "could not list instances: storage is (re)initializing",
        }));
    cluster.api.insert(failed);
    let test = config();
    let mut child = cluster.spawn(&test, &["apply", "infra", "--output", "json"]);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "apply ended while the CRD was being deleted"
    );
    assert!(
        cluster.installs().is_empty(),
        "no release before the CRD phase is done"
    );
    // The failed cleanup is nudged: an annotation write makes the API
    // server retry it now.
    assert!(
        get().unwrap()["metadata"]["annotations"]["bootstrap.dev/cleanup-retried"].is_string(),
        "{}",
        get().unwrap()
    );
    let mut done = get().unwrap();
    done["metadata"]["finalizers"] = json!([]);
    cluster.api.insert(done);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let applied: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["event"] == "crd_applied")
        .collect();
    assert_eq!(applied.len(), 1, "{stdout}");
    assert_eq!(applied[0]["change"], "created", "{stdout}");
    let now = get().expect("created again");
    assert!(now["metadata"]["deletionTimestamp"].is_null(), "{now}");
}

/// The CRD phase's watch sees a CRD deleted moments before the apply
/// created it again: the old object, Established to its end, comes first
/// in the stream. Only the object the apply created counts: the phase ends
/// once that one is Established, not when the old one was.
#[test]
fn a_crd_created_again_is_waited_for_not_the_one_it_replaced() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    // Established at once, as it was created, then deleted.
    let name = held_deleted_crd(&cluster);
    let get = || live_crd(&cluster, name);
    let established = |crd: &serde_json::Value| {
        crd["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    };
    assert!(established(&get().unwrap()), "{}", get().unwrap());
    // The one created again takes a while.
    cluster
        .api
        .set_crd_establish(name, Rollout::After(Duration::from_millis(700)));
    let test = config();
    let child = cluster.spawn(&test, &["apply", "infra", "--output", "json"]);
    std::thread::sleep(Duration::from_millis(1000));
    let mut gone = get().unwrap();
    gone["metadata"]["finalizers"] = json!([]);
    cluster.api.insert(gone);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let now = get().expect("created again");
    assert!(now["metadata"]["deletionTimestamp"].is_null(), "{now}");
    assert!(established(&now), "the phase ended before it: {now}");
}

/// docs/design.md#crd-record: a re-run does not apply a CRD the last run
/// left as it is, and applies it again when anything about it changed.
#[test]
fn a_crd_as_the_last_apply_left_it_is_not_applied_again() {
    let cluster = Cluster::start();
    let mut labelled = crd("cert-manager.io", "certificates", "Certificate");
    labelled["metadata"]["labels"] = json!({"app.kubernetes.io/name": "cert-manager"});
    cluster.script(json!({
        "*": {"delay_ms": 50},
        "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
        "cert-manager/cert-manager": {"crds": [labelled], "manifests": [deployment("cert-manager", "cert-manager")]},
    }));
    let test = config();
    let name = "certificates.cert-manager.io";
    let crd_writes = |from: usize| {
        cluster.api.request_log()[from..]
            .iter()
            .filter(|r| r.is_mutation() && r.path.contains("/customresourcedefinitions"))
            .count()
    };
    let live_crd = || {
        cluster
            .api
            .get(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                None,
                name,
            )
            .unwrap()
    };
    let changes = |out: &testkit::builder::Output| -> Vec<String> {
        out.stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["event"] == "crd_applied")
            .map(|e| e["change"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let apply = |args: &[&str]| {
        let from = cluster.api.request_log().len();
        let mut all = vec!["apply", "infra", "--output", "json"];
        all.extend_from_slice(args);
        let out = cluster.run(&test, &all);
        assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
        (changes(&out), crd_writes(from))
    };
    assert_eq!(apply(&[]), (vec!["created".to_string()], 1), "first run");
    let record = cluster
        .api
        .get("v1", "ConfigMap", Some("kube-system"), "bootstrap-crds")
        .expect("the record is written");
    assert!(
        record["data"][name]
            .as_str()
            .unwrap()
            .contains("\"generation\":1"),
        "{record}"
    );
    assert_eq!(
        apply(&[]),
        (vec!["unchanged".to_string()], 0),
        "a re-run writes no CRD"
    );

    // Someone edits the CRD's spec: its generation moves, it is applied.
    let mut edited = live_crd();
    edited["spec"]["names"]["shortNames"] = json!(["cert"]);
    cluster.api.insert(edited);
    let (change, writes) = apply(&[]);
    assert_eq!(writes, 1, "an edited CRD is applied again ({change:?})");
    assert_eq!(
        apply(&[]),
        (vec!["unchanged".to_string()], 0),
        "and recorded"
    );

    // A label bootstrap sets, changed by hand (no generation change).
    let mut relabelled = live_crd();
    relabelled["metadata"]["labels"]["app.kubernetes.io/name"] = json!("changed-by-hand");
    cluster.api.insert(relabelled);
    assert_eq!(apply(&[]).1, 1, "a changed label is put back");

    // --force applies every CRD; a deleted record applies every CRD.
    assert_eq!(apply(&["--force"]).1, 1, "--force");
    cluster
        .api
        .delete("v1", "ConfigMap", Some("kube-system"), "bootstrap-crds");
    assert_eq!(apply(&[]).1, 1, "no record");
    assert_eq!(apply(&[]).1, 0, "recorded again");

    // destroy --crds takes it out of the record.
    let out = cluster.run(&test, &["destroy", "infra", "--crds", "--yes"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        cluster
            .api
            .get("v1", "ConfigMap", Some("kube-system"), "bootstrap-crds")
            .is_none(),
        "the record goes with its last CRD"
    );
}

#[test]
fn applies_crds_then_releases_in_dag_order_and_records_ownership() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    let test = config();
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );

    let installs = cluster.installs();
    let order: Vec<&str> = installs.iter().filter_map(|c| c.release()).collect();
    assert_eq!(order.len(), 4, "{order:?}");
    let finished = |name: &str| {
        installs
            .iter()
            .find(|c| c.release() == Some(name))
            .unwrap()
            .end_ms
    };
    let started = |name: &str| {
        installs
            .iter()
            .find(|c| c.release() == Some(name))
            .unwrap()
            .start_ms
    };
    assert!(started("coredns") >= finished("cilium"));
    assert!(started("cert-manager") >= finished("coredns"));
    assert!(started("spegel") >= finished("coredns"));

    // CRD phase: applied and Established before the first release started.
    let crd = cluster.api.get(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        None,
        "certificates.cert-manager.io",
    );
    assert!(crd.is_some(), "CRD applied");
    let cm_install = installs
        .iter()
        .find(|c| c.release() == Some("cert-manager"))
        .unwrap();
    assert!(cm_install.has("--skip-crds"));
    // The chart was pulled from its repository into the chart cache once,
    // and helm installs the archive (docs/design.md#chart-cache).
    assert!(!cm_install.has("--repo"), "{:?}", cm_install.argv);
    assert!(
        cm_install.positionals()[1].ends_with(".tgz"),
        "{:?}",
        cm_install.argv
    );
    let pull = cluster
        .helm_calls()
        .into_iter()
        .find(|c| c.argv[0] == "pull" && c.positionals() == ["cert-manager"])
        .unwrap();
    assert_eq!(pull.flag("--repo"), Some("https://charts.jetstack.io"));
    assert_eq!(cm_install.values_files[0]["mode"], "600");
    assert_eq!(
        cm_install.values_files[0]["content"],
        json!({"crds": {"enabled": false}})
    );
    let template = cluster
        .helm_calls()
        .into_iter()
        .find(|c| c.argv[0] == "template" && c.argv.iter().any(|a| a == "cert-manager"))
        .unwrap();
    assert!(template.has("--include-crds"));
    assert_eq!(
        template.values_files[0]["content"],
        json!({"crds": {"enabled": true}})
    );

    // Ownership: ledger entries and labels on the Helm release.
    let ledger = cluster.ledger();
    let entry: serde_json::Value =
        serde_json::from_str(ledger["kube-system.cilium"].as_str().unwrap()).unwrap();
    assert_eq!(entry["chart"], "cilium");
    assert_eq!(entry["version"], "1.18.2");
    assert_eq!(entry["policy"], "bootstrap");
    assert_eq!(ledger.len(), 4);
    let state = cluster.release_state("kube-system", "cilium").unwrap();
    assert_eq!(state["labels"]["bootstrap.dev/owner"], "bootstrap");

    // The lock is released.
    assert!(
        cluster
            .api
            .get(
                "coordination.k8s.io/v1",
                "Lease",
                Some("kube-system"),
                "bootstrap-lock"
            )
            .is_none()
    );
}

fn outcome_of(stdout: &str, release: &str) -> Option<String> {
    // The JSON summary names every release's outcome.
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "run_finished")
        .and_then(|e| {
            e["summary"]["releases"]
                .as_array()?
                .iter()
                .find(|r| r["release"] == release)
                .map(|r| r["outcome"].as_str().unwrap_or_default().to_string())
        })
}

#[test]
fn independent_releases_overlap_and_the_concurrency_cap_holds() {
    let releases = (0..4)
        .map(|i| format!("name: r{i}\nnamespace: apps\nchart: {{ oci: oci://example.com/charts/r{i}, version: 1.0.0 }}\ncrds: none\n"))
        .collect::<Vec<_>>()
        .join("---\n");
    let test = Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file("releases/r.yaml", &releases);
    let cluster = Cluster::start();
    cluster.script(json!({"*": {"delay_ms": 400}}));
    let out = cluster.run(&test, &["apply", "infra", "--concurrency", "2"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let installs = cluster.installs();
    assert_eq!(installs.len(), 4);
    // Helm processes running at the moment each one started.
    let max_parallel = installs
        .iter()
        .map(|a| {
            installs
                .iter()
                .filter(|b| b.start_ms <= a.start_ms && a.start_ms < b.end_ms)
                .count()
        })
        .max()
        .unwrap();
    assert_eq!(max_parallel, 2, "two at a time, and they do overlap");
}

#[test]
fn a_failing_release_skips_exactly_its_dependents() {
    let cluster = Cluster::start();
    cluster.script(json!({
        "*": {"delay_ms": 20},
        "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
        "kube-system/coredns": {"fail": "Error: UPGRADE FAILED: context deadline exceeded"},
    }));
    let test = config().file(
        "releases/other.yaml",
        "name: metrics\nnamespace: monitoring\nchart: { oci: oci://example.com/charts/metrics, version: 1.0.0 }\n",
    );
    let out = cluster.run(&test, &["apply", "infra", "--output", "json"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    // JSON Lines: every line an event, `run_started` first, `run_finished`
    // last and nothing after it (the failure is in its summary and on stderr).
    let events: Vec<serde_json::Value> = out
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("every stdout line is JSON"))
        .collect();
    assert!(
        events.iter().all(|e| e["event"].is_string()),
        "{}",
        out.stdout
    );
    assert_eq!(events[0]["event"], "run_started");
    assert_eq!(events.last().unwrap()["event"], "run_finished");
    assert_eq!(events.last().unwrap()["summary"]["ok"], false);
    assert_eq!(
        outcome_of(&out.stdout, "kube-system/cilium").as_deref(),
        Some("installed")
    );
    assert_eq!(
        outcome_of(&out.stdout, "kube-system/coredns").as_deref(),
        Some("failed")
    );
    assert_eq!(
        outcome_of(&out.stdout, "cert-manager/cert-manager").as_deref(),
        Some("skipped")
    );
    assert_eq!(
        outcome_of(&out.stdout, "kube-system/spegel").as_deref(),
        Some("skipped")
    );
    assert_eq!(
        outcome_of(&out.stdout, "monitoring/metrics").as_deref(),
        Some("installed")
    );
    assert!(
        out.stderr.contains("kube-system/coredns failed"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("context deadline exceeded"));
    let ledger = cluster.ledger();
    assert!(ledger.contains_key("kube-system.cilium"));
    assert!(
        !ledger.contains_key("kube-system.coredns"),
        "a failed release is not recorded"
    );
    assert!(!ledger.contains_key("cert-manager.cert-manager"));
}

#[test]
fn a_rollout_that_never_finishes_times_out_with_diagnostics() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    cluster.api.set_rollout(
        "DaemonSet",
        "kube-system",
        "cilium",
        kube_loopback::Rollout::Never,
    );
    cluster.api.insert(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "cilium-4xk2p", "namespace": "kube-system", "labels": {"app": "cilium"}},
        "spec": {"nodeName": "node-1", "initContainers": [{"name": "config", "image": "cilium"}, {"name": "mount-cgroup", "image": "cilium"}], "containers": [{"name": "cilium-agent", "image": "cilium"}]},
        "status": {"phase": "Pending",
                   "initContainerStatuses": [
                       {"name": "config", "ready": false, "restartCount": 4, "image": "cilium", "imageID": "", "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 1m20s restarting failed container"}},
                        "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "message": "Error: Build config failed: dial tcp 10.96.0.1:443: i/o timeout"}}},
                       {"name": "mount-cgroup", "ready": false, "restartCount": 0, "image": "cilium", "imageID": "", "state": {"waiting": {"reason": "PodInitializing"}}}],
                   "containerStatuses": [{"name": "cilium-agent", "ready": false, "restartCount": 0, "image": "cilium", "imageID": "", "state": {"waiting": {"reason": "PodInitializing"}}}]}
    }));
    let test = Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file(
        "releases/core.yaml",
        &RELEASES.replace(
            "hooks:\n  postsync:\n    - rollout: { kind: DaemonSet, name: cilium }",
            "timeout: 3s\nhooks:\n  postsync:\n    - rollout: { kind: DaemonSet, name: cilium }",
        ),
    );
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        // The hook gets what is left of the 3 s release budget after helm.
        out.stdout.contains("timed out after ")
            && out
                .stdout
                .contains("s waiting for DaemonSet kube-system/cilium"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("cilium-4xk2p"),
        "diagnostics name the pod:\n{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("Init:CrashLoopBackOff") || out.stdout.contains("Init:0/2"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("10.96.0.1:443"),
        "the stuck init container's error is shown:\n{}",
        out.stdout
    );
    assert!(
        cluster
            .installs()
            .iter()
            .all(|c| c.release() == Some("cilium")),
        "nothing after cilium started"
    );
}

#[test]
fn a_dependent_starts_only_after_the_rollout_completes() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    cluster.api.set_rollout(
        "DaemonSet",
        "kube-system",
        "cilium",
        kube_loopback::Rollout::After(std::time::Duration::from_millis(800)),
    );
    let wall = std::time::SystemTime::now();
    let instant = std::time::Instant::now();
    let out = cluster.run(&config(), &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let done = cluster
        .api
        .rollout_completed_at("DaemonSet", "kube-system", "cilium")
        .expect("rolled out");
    let done_ms = (wall + (done - instant))
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let coredns = cluster
        .installs()
        .into_iter()
        .find(|c| c.release() == Some("coredns"))
        .unwrap();
    assert!(
        coredns.start_ms + 5 >= done_ms,
        "coredns started {}ms before cilium was rolled out",
        done_ms.saturating_sub(coredns.start_ms)
    );
}

#[test]
fn transient_api_errors_are_survived() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    cluster.api.fail_next(3, 500);
    let out = cluster.run(&config(), &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(cluster.installs().len(), 4);
}

#[test]
fn only_runs_a_release_and_what_it_needs() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    let out = cluster.run(&config(), &["apply", "infra", "--only", "coredns"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let names: Vec<String> = cluster
        .installs()
        .iter()
        .filter_map(|c| c.release().map(str::to_string))
        .collect();
    assert_eq!(names, ["cilium", "coredns"]);

    let cluster = Cluster::start();
    cluster.script_standard(50);
    let out = cluster.run(
        &config(),
        &["apply", "infra", "--only", "coredns", "--no-needs"],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let names: Vec<String> = cluster
        .installs()
        .iter()
        .filter_map(|c| c.release().map(str::to_string))
        .collect();
    assert_eq!(names, ["coredns"]);
}

#[test]
fn dry_run_changes_nothing_and_says_what_it_would_do() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    cluster.api.clear_request_log();
    let out = cluster.run(
        &config(),
        &["apply", "infra", "--dry-run", "--output", "json"],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(
        outcome_of(&out.stdout, "kube-system/cilium").as_deref(),
        Some("would_install")
    );
    assert_eq!(
        outcome_of(&out.stdout, "kube-system/spegel").as_deref(),
        Some("would_install")
    );
    assert!(
        cluster.api.mutations().is_empty(),
        "mutations: {:?}",
        cluster.api.mutations()
    );
    assert!(cluster.installs().is_empty());
}

#[test]
fn helm_missing_is_one_clear_error_and_nothing_changes() {
    let cluster = Cluster::start();
    cluster.api.clear_request_log();
    let test = config();
    let out = test
        .command()
        .args([
            "apply",
            "infra",
            "--helm",
            "/nonexistent/helm",
            "--kubeconfig",
        ])
        .arg(&cluster.kubeconfig)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: helm was not found at `/nonexistent/helm`; install helm 3.13 or newer, or pass --helm PATH\n"
    );
    assert!(cluster.api.mutations().is_empty());
}

#[test]
fn helm_too_old_is_refused() {
    let cluster = Cluster::start();
    let out = cluster
        .command(&config(), &["apply", "infra"])
        .env("FAKE_HELM_VERSION", "v3.10.3")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("too old"));
    assert!(cluster.installs().is_empty());
}

#[test]
fn unknown_context_is_a_prerequisite_error() {
    let cluster = Cluster::start();
    let test = Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            "name: infra\ncontext: admin@nowhere\n",
        )
        .file("releases/core.yaml", RELEASES);
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("kubeconfig context `admin@nowhere` does not exist"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_second_apply_fails_fast_naming_the_lock_holder() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    cluster.api.insert(live_lease("alice@laptop pid 4242"));
    let out = cluster.run(&config(), &["apply", "infra"]);
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("alice@laptop pid 4242"),
        "{}",
        out.stderr
    );
    assert!(cluster.installs().is_empty());
}

#[test]
fn an_expired_lock_is_taken_over_with_a_warning() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    cluster.api.insert(dead_lease("bob@ci pid 7"));
    let out = cluster.run(&config(), &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("took over the bootstrap lock of bob@ci pid 7: it went unrenewed for 1s"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_flux_helmrelease_targeting_a_bootstrap_release_is_refused() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    cluster.api.insert(
        crd("helm.toolkit.fluxcd.io", "helmreleases", "HelmRelease")
            .as_object()
            .cloned()
            .map(|mut c| {
                c["spec"]["versions"][0]["name"] = json!("v2");
                serde_json::Value::Object(c)
            })
            .unwrap(),
    );
    cluster.api.insert(json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "cilium", "namespace": "kube-system"},
        "spec": {"suspend": true, "chart": {"spec": {"chart": "cilium", "version": "1.18.2"}}}
    }));
    cluster.api.clear_request_log();
    let out = cluster.run(&config(), &["apply", "infra"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("Flux HelmRelease kube-system/cilium (suspended) manages Helm release kube-system/cilium"), "{}", out.stderr);
    assert!(cluster.installs().is_empty());
    let changed: Vec<_> = cluster
        .api
        .mutations()
        .into_iter()
        .filter(|r| !r.path.contains("leases"))
        .collect();
    assert!(changed.is_empty(), "only the lock was touched: {changed:?}");
}

/// `apply infra` with coredns left in Helm at `revision` in `status` (a
/// predecessor killed mid-operation).
fn apply_with_coredns_left(revision: u64, status: &str) -> (Cluster, testkit::builder::Output) {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    std::fs::write(
        cluster.path().join("helm-state/kube-system__coredns.json"),
        serde_json::to_string(&json!({"name": "coredns", "namespace": "kube-system", "revision": revision, "status": status,
            "chart": "coredns", "version": "1.44.3", "app_version": "1.12.0", "values": {}, "labels": {}, "updated": "2026-01-01T00:00:00Z", "manifest": ""})).unwrap(),
    )
    .unwrap();
    let out = cluster.run(&config(), &["apply", "infra"]);
    (cluster, out)
}

#[test]
fn a_pending_release_is_refused() {
    let (cluster, out) = apply_with_coredns_left(2, "pending-upgrade");
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("Helm release kube-system/coredns is pending-upgrade"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("`helm rollback coredns -n kube-system`"),
        "{}",
        out.stderr
    );
    assert!(cluster.installs().is_empty());
}

/// A first install that was killed has no revision to roll back to: the
/// advice is to uninstall it, never `helm rollback`.
#[test]
fn a_release_left_pending_install_is_refused_with_uninstall_advice() {
    let (_cluster, out) = apply_with_coredns_left(1, "pending-install");
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("recover with `helm uninstall coredns -n kube-system`"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("helm rollback"), "{}", out.stderr);
}

#[test]
#[cfg_attr(not(kubectl), ignore = "needs kubectl on PATH (.ci/run installs it)")]
fn command_hooks_get_the_clusters_kubeconfig_and_context() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    let test = Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file(
            "releases/core.yaml",
            "name: cilium\nnamespace: kube-system\nchart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }\nhooks:\n  postsync:\n    - command: [sh, -c, 'kubectl config current-context > hook.out; pwd >> hook.out; echo $HELM_KUBECONTEXT >> hook.out']\n    - command: [kubectl, apply, --server-side, -f, \"{{root}}/cm.yaml\"]\n",
        )
        .file("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-hook, namespace: default}\ndata: {a: b}\n");
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let written = std::fs::read_to_string(test.path().join("hook.out")).unwrap();
    let root = std::fs::canonicalize(test.path()).unwrap();
    assert_eq!(
        written,
        format!("admin@infra\n{}\nadmin@infra\n", root.display())
    );
    assert!(
        cluster
            .api
            .get("v1", "ConfigMap", Some("default"), "from-hook")
            .is_some(),
        "kubectl reached the loopback cluster"
    );
}

#[test]
fn sigint_stops_cleanly_and_a_rerun_resumes() {
    let cluster = Cluster::start();
    let test = config();
    // Ctrl-C while helm is installing cilium.
    let child = apply_while_cilium_installs(&cluster, &test, 1500);
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(130),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The running helm got its grace period and finished; nothing new started.
    assert_eq!(
        outcome_of(&stdout, "kube-system/cilium").as_deref(),
        Some("installed"),
        "{stdout}"
    );
    // Never started: skipped (`interrupted` is for what was stopped).
    assert_eq!(
        outcome_of(&stdout, "kube-system/coredns").as_deref(),
        Some("skipped")
    );
    assert_eq!(
        cluster.release_state("kube-system", "cilium").unwrap()["status"],
        "deployed"
    );
    assert!(cluster.release_state("kube-system", "coredns").is_none());
    assert!(
        cluster.ledger().contains_key("kube-system.cilium"),
        "what finished was recorded"
    );
    assert!(
        cluster
            .api
            .get(
                "coordination.k8s.io/v1",
                "Lease",
                Some("kube-system"),
                "bootstrap-lock"
            )
            .is_none(),
        "lock released"
    );

    let out = cluster.run(&test, &["apply", "infra", "--output", "json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(
        outcome_of(&out.stdout, "kube-system/cilium").as_deref(),
        Some("unchanged")
    );
    assert_eq!(
        outcome_of(&out.stdout, "kube-system/coredns").as_deref(),
        Some("installed")
    );
    assert_eq!(
        outcome_of(&out.stdout, "kube-system/spegel").as_deref(),
        Some("installed")
    );
}

/// The second Ctrl-C cuts a running hook short; the message names the hook
/// as the user wrote it (an earlier version lowercased the whole message).
#[test]
fn a_hook_cut_short_by_a_second_interrupt_keeps_its_own_text() {
    let cluster = Cluster::start();
    let test = Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file(
            "releases/r.yaml",
            "name: waiter\nnamespace: default\nchart: { oci: oci://example.com/charts/waiter, version: 1.0.0 }\nhooks:\n  postsync:\n    - command: [sh, -c, 'touch Started; sleep 30 # Wait-For-IT']\n",
        );
    let child = cluster.spawn(&test, &["apply", "infra", "--output", "json"]);
    let started = test.path().join("Started");
    testkit::wait_until("the hook to run", || started.exists());
    for _ in 0..2 {
        std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(130), "{stdout}");
    let message = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "release_finished")
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    assert!(
        message.starts_with("interrupted during postsync hook ") && message.contains("Wait-For-IT"),
        "{message}\n{stdout}"
    );
}

#[test]
fn a_rerun_is_unchanged_and_a_values_change_upgrades() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    // A value under a key that output redacts (`key`, as in every
    // `tolerations` list) is still compared as it is.
    let releases = RELEASES.replace(
        "values: { crds: { enabled: false } }",
        "values: { crds: { enabled: false }, tolerations: [{ key: CriticalAddonsOnly, operator: Exists }] }",
    );
    assert_ne!(releases, RELEASES);
    let config = || {
        Test::new()
            .file("clusters/infra/cluster.yaml", CLUSTER)
            .file("releases/core.yaml", &releases)
    };
    let out = cluster.run(&config(), &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let out = cluster.run(&config(), &["apply", "infra", "--output", "json"]);
    assert_eq!(out.code, 0);
    for r in [
        "kube-system/cilium",
        "kube-system/coredns",
        "cert-manager/cert-manager",
        "kube-system/spegel",
    ] {
        assert_eq!(
            outcome_of(&out.stdout, r).as_deref(),
            Some("unchanged"),
            "{r}"
        );
    }
    assert_eq!(
        cluster.installs().len(),
        4,
        "no helm upgrade on an unchanged run"
    );
    let changed = Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file(
            "releases/core.yaml",
            &releases.replace("k8sServiceHost: 10.0.0.1", "k8sServiceHost: 10.0.0.2"),
        );
    let out = cluster.run(&changed, &["apply", "infra", "--output", "json"]);
    assert_eq!(out.code, 0);
    assert_eq!(
        outcome_of(&out.stdout, "kube-system/cilium").as_deref(),
        Some("upgraded")
    );
    assert_eq!(
        outcome_of(&out.stdout, "kube-system/coredns").as_deref(),
        Some("unchanged")
    );
}

#[test]
fn a_global_timeout_fails_the_run() {
    let cluster = Cluster::start();
    cluster.script(json!({"*": {"delay_ms": 5000}}));
    let out = cluster.run(&config(), &["apply", "infra", "--timeout", "1s"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("timed out after 1s"), "{}", out.stderr);
}

#[test]
fn the_admission_guard_is_installed_unless_turned_off() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    let out = cluster.run(&config(), &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let policies = cluster.api.list(
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicy",
    );
    assert_eq!(policies.len(), 1);
    let binding = &cluster.api.list(
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicyBinding",
    )[0];
    assert_eq!(
        binding["spec"]["paramRef"]["selector"],
        json!({"matchLabels": {"bootstrap.dev/ledger": "ownership"}})
    );
    assert_eq!(binding["spec"]["paramRef"]["namespace"], "kube-system");

    let cluster = Cluster::start();
    cluster.script_standard(50);
    let test = Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            &format!("{CLUSTER}guard: false\n"),
        )
        .file("releases/core.yaml", RELEASES);
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        cluster
            .api
            .list(
                "admissionregistration.k8s.io/v1",
                "ValidatingAdmissionPolicy"
            )
            .is_empty()
    );
}

#[test]
fn a_cluster_without_admission_policies_gets_a_warning() {
    let cluster = Cluster::with(
        kube_loopback::ApiServer::builder()
            .without_validating_admission_policy()
            .start(),
    );
    cluster.script_standard(50);
    let out = cluster.run(&config(), &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(
            "the admission guard that keeps Flux off bootstrap releases is not installed"
        ),
        "{}",
        out.stdout
    );
}

#[test]
fn command_hook_output_is_streamed_with_verbose_and_shown_on_failure() {
    let releases = "name: a\nnamespace: apps\nchart: { oci: oci://example.com/charts/a, version: 1.0.0 }\nhooks:\n  postsync:\n    - shell: 'echo out-$((40+2)); echo out-$((40+3))'\n---\nname: b\nnamespace: apps\nchart: { oci: oci://example.com/charts/b, version: 1.0.0 }\nhooks:\n  postsync:\n    - shell: 'echo why-it-broke >&2; exit 3'\n";
    let test = Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file("releases/r.yaml", releases);
    let cluster = Cluster::start();
    let quiet = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(quiet.code, 1);
    assert!(
        !quiet.stdout.contains("out-42"),
        "a successful hook's output is not shown by default"
    );
    assert!(
        quiet.stdout.contains("why-it-broke"),
        "a failed hook's output is shown:\n{}",
        quiet.stdout
    );
    // The failure says what the command said, and names it once.
    let failed = quiet
        .stdout
        .lines()
        .find(|l| l.contains("exited with 3"))
        .unwrap_or_default();
    assert!(
        failed.contains("exited with 3: why-it-broke"),
        "{}",
        quiet.stdout
    );
    assert_eq!(failed.matches("exit 3").count(), 1, "{failed}");
    let cluster = Cluster::start();
    let verbose = cluster.run(&test, &["apply", "infra", "-v"]);
    assert!(
        verbose
            .stdout
            .contains("apps/a: hook shell `echo out-$((40+2)); echo out-$((40+3))`: out-42"),
        "{}",
        verbose.stdout
    );
    assert!(verbose.stdout.contains(": out-43"));
}

#[test]
fn a_release_flux_already_manages_is_refused() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    cluster.api.insert(json!({
        "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
        "metadata": {"name": "sh.helm.release.v1.coredns.v3", "namespace": "kube-system",
                     "labels": {"owner": "helm", "name": "coredns", "status": "deployed", "version": "3",
                                "helm.toolkit.fluxcd.io/name": "coredns", "helm.toolkit.fluxcd.io/namespace": "kube-system"}},
        "data": {"release": "e30="}
    }));
    let out = cluster.run(&config(), &["apply", "infra"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("Helm release kube-system/coredns carries Flux's labels (Secret kube-system/sh.helm.release.v1.coredns.v3)"),
        "{}",
        out.stderr
    );
    assert!(cluster.installs().is_empty(), "nothing was installed");
}

/// `count` releases of one chart, round-robin over `namespaces` namespaces
/// (`ns0`, `ns1`, …), no needs.
fn spread(count: usize, namespaces: usize) -> Test {
    let releases: String = (0..count)
        .map(|i| {
            format!(
                "name: r{i}\nnamespace: ns{}\nchart: {{ repo: https://charts.example.com, name: app, version: 1.0.0 }}\n---\n",
                i % namespaces
            )
        })
        .collect();
    Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file("releases/many.yaml", &releases)
}

/// Preflight's requests do not grow with the releases
/// (docs/design.md#preflight-requests): the Helm release Secrets are read
/// with one metadata-only list per namespace (their payloads are every kept
/// revision of the release; only labels are read), not one list per release.
#[test]
fn preflight_makes_one_secret_list_per_namespace_whatever_the_releases() {
    let preflight = |releases: usize| {
        let cluster = Cluster::start();
        cluster.script(json!({"*": {"delay_ms": 0}}));
        let out = cluster.run(&spread(releases, 3), &["apply", "infra", "--dry-run"]);
        assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
        cluster.api.request_log()
    };
    let (few, many) = (preflight(3), preflight(60));
    let secret_lists = |log: &[kube_loopback::Request]| -> Vec<String> {
        let mut lists: Vec<String> = log
            .iter()
            .filter(|r| r.path.ends_with("/secrets"))
            .map(|r| {
                assert!(r.is_metadata_only(), "a whole-object list: {r:?}");
                assert_eq!(r.query, "&labelSelector=owner%3Dhelm", "{r:?}");
                r.path.clone()
            })
            .collect();
        lists.sort();
        lists
    };
    let per_namespace: Vec<String> = (0..3)
        .map(|n| format!("/api/v1/namespaces/ns{n}/secrets"))
        .collect();
    assert_eq!(secret_lists(&few), per_namespace);
    assert_eq!(secret_lists(&many), per_namespace);
    assert_eq!(
        few.len(),
        many.len(),
        "20 times the releases, the same requests:\n{:#?}\n{:#?}",
        few.iter().map(|r| &r.path).collect::<Vec<_>>(),
        many.iter().map(|r| &r.path).collect::<Vec<_>>()
    );
}

/// Reading the secrets per namespace keeps the per-release judgement: only
/// the release's own Secrets (its namespace, its `name` label) count, and a
/// namespace that cannot be read is named with its releases.
#[test]
fn a_namespace_list_judges_each_release_by_its_own_secrets() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    let flux_labelled = |namespace: &str, name: &str| {
        json!({
            "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
            "metadata": {"name": format!("sh.helm.release.v1.{name}.v1"), "namespace": namespace,
                         "labels": {"owner": "helm", "name": name, "status": "deployed", "version": "1",
                                    "helm.toolkit.fluxcd.io/name": name, "helm.toolkit.fluxcd.io/namespace": namespace}},
            "data": {"release": "e30="}
        })
    };
    // Another namespace's coredns, and a release of kube-system that is
    // not bootstrap's: neither is a conflict.
    cluster.api.insert(flux_labelled("other", "coredns"));
    cluster
        .api
        .insert(flux_labelled("kube-system", "metrics-server"));
    let out = cluster.run(&config(), &["apply", "infra", "--dry-run"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);

    // The list only (`path?query`), not the ledger's key read beside it.
    cluster
        .api
        .fail_next_matching(1, 403, "namespaces/kube-system/secrets?");
    let out = cluster.run(&config(), &["apply", "infra", "--dry-run"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(
            "cannot read the Helm release secrets in namespace kube-system (of kube-system/cilium, kube-system/coredns, kube-system/spegel)"
        ),
        "{}",
        out.stderr
    );
}

/// An API server that answers 503 to everything: the wait for it is bounded
/// by `--timeout` (never minutes of silent retries), says what it waits for,
/// and nothing is changed.
#[test]
fn an_api_server_answering_503_is_waited_for_visibly_and_within_the_timeout() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    cluster.api.fail_next(1_000_000, 503);
    let started = std::time::Instant::now();
    let out = cluster.run(&config(), &["apply", "infra", "--timeout", "3s"]);
    let took = started.elapsed();
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        took < std::time::Duration::from_secs(8),
        "bounded by --timeout: {took:?}"
    );
    // The server is named, and the reason is said once, not every retry.
    let waiting = format!(
        "waiting for the Kubernetes API server of context `admin@infra` at {} (up to 3s): ",
        cluster.api.url().trim_end_matches('/')
    );
    assert_eq!(out.stderr.matches(&waiting).count(), 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("cannot reach the Kubernetes API server"),
        "{}",
        out.stderr
    );
    assert!(cluster.installs().is_empty());
}

/// Starts `apply infra --output json` with cilium's helm taking `cilium_ms`
/// (the others 20 ms) and returns once helm is installing cilium (bounded
/// wait): the lock is held and cilium is mid-install.
fn apply_while_cilium_installs(
    cluster: &Cluster,
    test: &Test,
    cilium_ms: u64,
) -> std::process::Child {
    apply_while_cilium_installs_with(cluster, test, cilium_ms, &["--output", "json"])
}

/// [`apply_while_cilium_installs`] with `args` after `apply infra`.
fn apply_while_cilium_installs_with(
    cluster: &Cluster,
    test: &Test,
    cilium_ms: u64,
    args: &[&str],
) -> std::process::Child {
    cluster.script(json!({
        "*": {"delay_ms": 20},
        "kube-system/cilium": {"delay_ms": cilium_ms, "apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
    }));
    let mut argv = vec!["apply", "infra"];
    argv.extend_from_slice(args);
    let child = cluster
        .command(test, &argv)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let state = cluster.path().join("helm-state/kube-system__cilium.json");
    testkit::wait_until("cilium's install to start", || state.exists());
    child
}

/// [`apply_while_cilium_installs`] with a 7 s cilium, then `tamper` on the
/// Lease (held by then); returns the finished run.
fn apply_with_lease_tampering(tamper: impl FnOnce(&Cluster)) -> (Cluster, std::process::Output) {
    apply_with_lease_tampering_setup(|_| {}, tamper)
}

fn apply_with_lease_tampering_setup(
    setup: impl FnOnce(&Cluster),
    tamper: impl FnOnce(&Cluster),
) -> (Cluster, std::process::Output) {
    let cluster = Cluster::start();
    setup(&cluster);
    let child = apply_while_cilium_installs(&cluster, &config(), 7000);
    tamper(&cluster);
    let out = child.wait_with_output().unwrap();
    (cluster, out)
}

fn lease(cluster: &Cluster) -> Option<serde_json::Value> {
    cluster.api.get(
        "coordination.k8s.io/v1",
        "Lease",
        Some("kube-system"),
        "bootstrap-lock",
    )
}

/// Another run taking the lock mid-run (here: rewriting its holder) is
/// noticed at the next renewal: nothing new starts, the running helm
/// finishes, and the run fails naming the new holder.
#[test]
fn a_stolen_lock_stops_the_run_and_names_the_new_holder() {
    let (cluster, out) = apply_with_lease_tampering(|cluster| {
        let mut stolen = lease(cluster).expect("the lock is held");
        stolen["spec"]["holderIdentity"] = json!("thief@elsewhere pid 1");
        cluster.api.insert(stolen);
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("the cluster lock was lost (it is now held by thief@elsewhere pid 1)"),
        "{stderr}"
    );
    // The running helm finished, but without the lock nothing is recorded
    // (docs/design.md#cluster-lock).
    assert_eq!(
        outcome_of(&stdout, "kube-system/cilium").as_deref(),
        Some("interrupted"),
        "{stdout}"
    );
    assert!(
        stdout.contains("done, but not recorded in the ledger: the cluster lock may be lost"),
        "{stdout}"
    );
    assert_eq!(
        cluster.release_state("kube-system", "cilium").unwrap()["status"],
        "deployed"
    );
    assert!(!cluster.ledger().contains_key("kube-system.cilium"));
    assert!(cluster.release_state("kube-system", "coredns").is_none());
    assert_eq!(
        lease(&cluster).unwrap()["spec"]["holderIdentity"],
        "thief@elsewhere pid 1",
        "the new holder's lock is left alone"
    );
}

/// A deleted Lease is noticed too, and never silently recreated.
#[test]
fn a_deleted_lock_stops_the_run() {
    let (cluster, out) = apply_with_lease_tampering(|cluster| {
        cluster.api.delete(
            "coordination.k8s.io/v1",
            "Lease",
            Some("kube-system"),
            "bootstrap-lock",
        );
    });
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("the Lease kube-system/bootstrap-lock was deleted"),
        "{stderr}"
    );
    assert!(cluster.release_state("kube-system", "coredns").is_none());
    assert!(lease(&cluster).is_none(), "not recreated");
}

/// The Lease deleted while the CRD phase waits for a CRD: the run stops
/// before any release, and ends with exit 3 naming the lost lock, not as
/// "interrupted" (exit 130): nobody pressed Ctrl-C.
#[test]
fn a_lock_lost_in_the_crd_phase_exits_3() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    let name = "certificates.cert-manager.io";
    cluster
        .api
        .set_crd_establish(name, Rollout::After(Duration::from_secs(20)));
    let test = config();
    let child = cluster.spawn(&test, &["apply", "infra"]);
    testkit::wait_until("the CRD to be applied", || {
        live_crd(&cluster, name).is_some()
    });
    cluster.delete_lease();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("apply of cluster `infra` stopped: the cluster lock was lost (the Lease kube-system/bootstrap-lock was deleted)"),
        "{stderr}"
    );
    assert!(!stderr.contains("interrupted"), "{stderr}");
    assert!(cluster.installs().is_empty());
}

/// A run whose releases are all unchanged records nothing, so only the
/// check at its end can find a ledger deleted or rewritten while it ran
/// (here: while the CRD phase waits for a CRD deleted by hand). It puts
/// every entry back and says so; the run exits 0 and the guard keeps
/// guarding every release.
#[test]
fn a_ledger_lost_during_a_run_that_records_nothing_is_put_back() {
    let name = "certificates.cert-manager.io";
    for rewrite in [false, true] {
        let cluster = Cluster::start();
        cluster.script_standard(50);
        let test = config();
        let first = cluster.run(&test, &["apply", "infra"]);
        assert_eq!(first.code, 0, "{}", first.stderr);
        let recorded = cluster.ledger();
        assert_eq!(recorded.len(), 4);
        cluster
            .api
            .delete(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                None,
                name,
            )
            .expect("the CRD exists");
        cluster
            .api
            .set_crd_establish(name, Rollout::After(Duration::from_millis(1500)));
        let child = cluster.spawn(&test, &["apply", "infra"]);
        testkit::wait_until("the CRD to be applied", || {
            live_crd(&cluster, name).is_some()
        });
        if rewrite {
            cluster.api.insert(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "bootstrap-ownership", "namespace": "kube-system"},
                "data": {},
            }));
        } else {
            cluster
                .api
                .delete(
                    "v1",
                    "ConfigMap",
                    Some("kube-system"),
                    "bootstrap-ownership",
                )
                .expect("the ledger exists");
        }
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{stdout}");
        assert!(
            stdout.contains("4 unchanged"),
            "every release unchanged: {stdout}"
        );
        let said = if rewrite {
            "(ConfigMap kube-system/bootstrap-ownership) was rewritten during the run; 4 entries recorded earlier were restored"
        } else {
            "(ConfigMap kube-system/bootstrap-ownership) was deleted during the run; it was created again with all 4 entries"
        };
        assert!(stdout.contains(said), "{stdout}");
        assert_eq!(cluster.ledger(), recorded, "rewrite: {rewrite}");
    }
}

/// A release's namespace still being deleted (a `destroy` just before took
/// a chart's Namespace with it, held by a finalizer): the install waits,
/// saying so, until the namespace is gone, instead of failing on helm's
/// "is being terminated".
#[test]
fn an_install_into_a_namespace_still_being_deleted_waits_for_it() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    let held = json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "cert-manager", "finalizers": ["example.com/hold"],
                     "deletionTimestamp": "2026-01-01T00:00:00Z"},
        "status": {"phase": "Terminating"}
    });
    cluster.api.insert(held.clone());
    let test = config();
    let child = cluster.spawn(&test, &["apply", "infra"]);
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        cluster
            .release_state("cert-manager", "cert-manager")
            .is_none(),
        "no helm ran into the terminating namespace"
    );
    let mut gone = held;
    gone["metadata"]["finalizers"] = json!([]);
    cluster.api.insert(gone);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains(
            "cert-manager/cert-manager: waiting for namespace cert-manager to finish being deleted"
        ),
        "{stdout}"
    );
    assert_eq!(
        cluster
            .release_state("cert-manager", "cert-manager")
            .unwrap()["status"],
        "deployed"
    );
}

/// The ledger deleted mid-run: the next record creates it again with every
/// entry this run and earlier runs recorded, and says so.
#[test]
fn a_ledger_deleted_mid_run_is_restored_with_every_entry() {
    let earlier = r#"{"chart":"x","version":"1.0.0","policy":"bootstrap"}"#;
    let (cluster, out) = apply_with_lease_tampering_setup(
        |cluster| {
            cluster.api.insert(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "bootstrap-ownership", "namespace": "kube-system"},
                "data": {"other.earlier": earlier},
            }));
        },
        |cluster| {
            cluster
                .api
                .delete(
                    "v1",
                    "ConfigMap",
                    Some("kube-system"),
                    "bootstrap-ownership",
                )
                .expect("the ledger existed");
        },
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("was deleted during the run; it was created again with all"),
        "{stdout}"
    );
    let ledger = cluster.ledger();
    assert_eq!(
        ledger["other.earlier"], earlier,
        "the earlier run's entry is back"
    );
    for key in [
        "kube-system.cilium",
        "kube-system.coredns",
        "cert-manager.cert-manager",
        "kube-system.spegel",
    ] {
        assert!(ledger.contains_key(key), "{key}: {ledger:?}");
    }
}

/// A chart repository URL with credentials: the token never reaches helm's
/// argv (readable by any local user in `ps`). The repository is added once,
/// with the password on stdin, to a private repository config that every
/// later command names and that is gone when the run ends.
#[test]
fn repository_credentials_never_reach_helms_argv() {
    const TOKEN: &str = "s3cr3t-t0ken";
    let cluster = Cluster::start();
    cluster.script_standard(50);
    let test = Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file(
            "releases/core.yaml",
            &RELEASES.replace(
                "https://charts.jetstack.io",
                &format!("https://robot:{TOKEN}@charts.jetstack.io"),
            ),
        );
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    assert!(!out.stdout.contains(TOKEN) && !out.stderr.contains(TOKEN));

    let calls = cluster.helm_calls();
    for call in &calls {
        assert!(
            !call.argv.iter().any(|a| a.contains(TOKEN)),
            "the token is in helm's argv: {:?}",
            call.argv
        );
    }
    let adds: Vec<_> = calls
        .iter()
        .filter(|c| c.argv.starts_with(&["repo".into(), "add".into()]))
        .collect();
    assert_eq!(adds.len(), 1, "added once per run: {adds:?}");
    let add = adds[0];
    assert_eq!(add.positionals()[1], "https://charts.jetstack.io");
    assert_eq!(add.flag("--username"), Some("robot"));
    assert!(add.has("--password-stdin"));
    let (name, config) = (
        add.positionals()[0].clone(),
        add.flag("--repository-config").unwrap().to_string(),
    );

    // The chart is pulled through it (once, into the chart cache); the CRD
    // phase's render and the install use the archive.
    let through_repo: Vec<_> = calls
        .iter()
        .filter(|c| c.argv.contains(&format!("{name}/cert-manager")))
        .collect();
    assert_eq!(through_repo.len(), 1, "{calls:?}");
    assert_eq!(through_repo[0].argv[0], "pull");
    for call in through_repo {
        assert_eq!(call.flag("--repository-config"), Some(config.as_str()));
        assert!(!call.has("--repo"), "{:?}", call.argv);
        assert_eq!(call.exit_code, 0);
    }
    assert!(
        !std::path::Path::new(&config).exists(),
        "the private repository config outlives the run"
    );
}

/// Timing that tells the truth (docs/design.md#run_finished): with one helm
/// slot for four independent releases, the wait for the slot is reported
/// apart from each release's run time and keeps them off the critical path;
/// the run's duration is the whole run, preflight and CRD phase included;
/// preflight says what it did as it does it; no CRD line when there are none.
#[test]
fn queued_time_run_time_and_the_whole_run() {
    let releases = (0..4)
        .map(|i| format!("name: r{i}\nnamespace: apps\nchart: {{ oci: oci://example.com/charts/r{i}, version: 1.0.0 }}\ncrds: none\n"))
        .collect::<Vec<_>>()
        .join("---\n");
    let test = Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file("releases/r.yaml", &releases);
    let cluster = Cluster::start();
    cluster.script(json!({"*": {"delay_ms": 300}}));
    let out = cluster.run(
        &test,
        &["apply", "infra", "--concurrency", "1", "--output", "json"],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let events: Vec<serde_json::Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let steps: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "preflight_step")
        .map(|e| e["step"].as_str().unwrap())
        .collect();
    assert!(steps[0].starts_with("helm v"), "{steps:?}");
    assert_eq!(
        steps[1..],
        [
            "API server of context `admin@infra` answers",
            "cluster lock taken",
            "ownership: 4 releases checked, no conflict",
            "live lints: 0 findings",
            "ledger: 0 entries",
            "CRDs rendered: 0 CRDs from 0 releases",
        ]
    );
    let summary = &events.last().unwrap()["summary"];
    let ms = |v: &serde_json::Value| v.as_u64().unwrap();
    let releases = summary["releases"].as_array().unwrap();
    let slots: Vec<u64> = releases.iter().map(|r| ms(&r["queuedSlot"])).collect();
    let runs: Vec<u64> = releases.iter().map(|r| ms(&r["run"])).collect();
    for r in releases {
        // duration = run + queuedSlot (each rounded down to a millisecond);
        // each ran at least the fake's 300 ms.
        let parts = ms(&r["run"]) + ms(&r["queuedSlot"]);
        assert!(ms(&r["duration"]).abs_diff(parts) <= 1, "{r}");
        assert!(ms(&r["run"]) >= 300, "{r}");
    }
    // No needs: nothing waits for them, however slow the machine.
    let needs: Vec<u64> = releases.iter().map(|r| ms(&r["queuedNeeds"])).collect();
    assert!(needs.iter().max() < runs.iter().min(), "{needs:?} {runs:?}");
    // One slot: the wait for it is the time from a release's `queued` step
    // (its check done) to its `installing` step, counted apart from its run
    // time; and each release got the slot only once the one before it had
    // held it for its whole helm run (300 ms). Stated on the run's own
    // event times, so a loaded machine (slow checks, overlapping the other
    // releases' helm runs) cannot fail it.
    let step_at = |release: &serde_json::Value, step: &str| {
        events
            .iter()
            .find(|e| e["event"] == "release_step" && e["release"] == *release && e["step"] == step)
            .map(|e| ms(&e["elapsedMs"]))
            .unwrap_or_else(|| panic!("no {step} step of {release}"))
    };
    let mut granted: Vec<(u64, u64)> = Vec::new();
    for (i, r) in releases.iter().enumerate() {
        let (queued, installing) = (
            step_at(&r["release"], "queued"),
            step_at(&r["release"], "installing"),
        );
        // Within the rounding of three millisecond stamps (the cached
        // chart's prefetch sits between the two steps, inside neither).
        assert!(
            slots[i] <= installing - queued + 2,
            "{r}: queued at {queued} ms, installing at {installing} ms"
        );
        granted.push((installing, runs[i]));
    }
    granted.sort();
    for pair in granted.windows(2) {
        assert!(
            pair[1].0 >= pair[0].0 + 300,
            "a slot was given before its holder's helm run ended: {granted:?}"
        );
    }
    let last = (0..releases.len()).max_by_key(|&i| slots[i]).unwrap();
    assert!(slots[last] > 0, "{slots:?} {runs:?}");
    assert_eq!(summary["criticalPath"].as_array().unwrap().len(), 1);
    let phases = &summary["phases"];
    assert!(ms(&phases["releases"]) >= 1200, "{phases}");
    assert!(
        ms(&summary["duration"])
            >= ms(&phases["preflight"]) + ms(&phases["crds"]) + ms(&phases["releases"]),
        "{summary}"
    );

    // The plain lines: preflight steps, no `crds: 0 established`, the
    // totals line with the phases.
    let cluster = Cluster::start();
    let out = cluster.run(&test, &["apply", "infra", "--dry-run"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("preflight: ledger: 0 entries"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("established"), "{}", out.stdout);
    let totals = out.stdout.lines().last().unwrap();
    assert!(
        totals.starts_with("infra (dry run): 4 would install in ")
            && totals.contains(" (preflight ")
            && totals.contains(", CRDs ")
            && totals.contains(", releases "),
        "{totals}"
    );
}

/// The ledger keeps a keyed digest of the values (key in a Secret created by
/// the first apply), never a plain hash someone could test password guesses
/// against; an entry written before keyed digests is rewritten on the next
/// apply without upgrading anything.
#[test]
fn the_ledger_digest_is_keyed_and_old_entries_are_rewritten() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    let out = cluster.run(&config(), &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let key = cluster
        .api
        .get("v1", "Secret", Some("kube-system"), "bootstrap-ledger-key")
        .expect("the digest key Secret");
    assert!(key["data"]["key"].as_str().is_some_and(|k| k.len() >= 40));
    let entry = |cluster: &Cluster| -> serde_json::Value {
        serde_json::from_str(cluster.ledger()["kube-system.cilium"].as_str().unwrap()).unwrap()
    };
    let keyed = entry(&cluster);
    assert!(
        keyed["valuesDigest"]
            .as_str()
            .unwrap()
            .starts_with("hmac-sha256:"),
        "{keyed}"
    );

    // An entry as an older bootstrap wrote it: plain SHA-256 of the values.
    let plan = cluster.run(&config(), &["plan", "infra", "--output", "json"]);
    let plan: serde_json::Value = serde_json::from_str(&plan.stdout).unwrap();
    let plain = plan["releases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "kube-system/cilium")
        .unwrap()["valuesDigest"]
        .clone();
    let mut old = keyed.clone();
    old["valuesDigest"] = plain;
    let mut cm = cluster
        .api
        .get(
            "v1",
            "ConfigMap",
            Some("kube-system"),
            "bootstrap-ownership",
        )
        .unwrap();
    cm["data"]["kube-system.cilium"] = json!(old.to_string());
    cluster.api.insert(cm);

    let out = cluster.run(&config(), &["apply", "infra", "--output", "json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(
        outcome_of(&out.stdout, "kube-system/cilium").as_deref(),
        Some("unchanged")
    );
    assert_eq!(cluster.installs().len(), 4, "nothing upgraded");
    assert_eq!(entry(&cluster)["valuesDigest"], keyed["valuesDigest"]);
}

/// `release_finished` messages of a JSON Lines run, by release.
fn finished(stdout: &str) -> std::collections::BTreeMap<String, (String, String)> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "release_finished")
        .map(|e| {
            (
                e["release"].as_str().unwrap_or_default().to_string(),
                (
                    e["outcome"].as_str().unwrap_or_default().to_string(),
                    e["message"].as_str().unwrap_or_default().to_string(),
                ),
            )
        })
        .collect()
}

fn hooked(hook: &str) -> Test {
    Test::new().file("clusters/infra/cluster.yaml", CLUSTER).file(
        "releases/r.yaml",
        &format!(
            "name: a\nnamespace: apps\nchart: {{ oci: oci://example.com/charts/a, version: 1.0.0 }}\nhooks:\n  postsync:\n    - shell: '{hook}'\n---\nname: b\nnamespace: apps\nchart: {{ oci: oci://example.com/charts/b, version: 1.0.0 }}\nhooks:\n  postsync:\n    - created: {{ apiVersion: v1, kind: Namespace, name: apps }}\n"
        ),
    )
}

/// docs/design.md#hooks: an unchanged release's readiness hooks verify it
/// every run; its command hooks run again only when their definition
/// changed, and a skip is said, with how to run them anyway.
#[test]
fn hooks_of_an_unchanged_release_verify_and_command_hooks_rerun_when_changed() {
    let cluster = Cluster::start();
    cluster
        .api
        .insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}}));
    let runs = |test: &Test| {
        std::fs::read_to_string(test.path().join("ran"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    let first = hooked("echo one >> ran");
    let out = cluster.run(&first, &["apply", "infra", "-o", "json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(runs(&first), 1);
    let entry: serde_json::Value =
        serde_json::from_str(cluster.ledger()["apps.a"].as_str().unwrap()).unwrap();
    assert_eq!(entry["cluster"], "infra");
    assert!(
        entry["hooksDigest"]
            .as_str()
            .unwrap()
            .starts_with("hmac-sha256:")
    );
    assert!(
        cluster.ledger()["apps.b"]
            .as_str()
            .unwrap()
            .find("hooksDigest")
            .is_none()
    );

    // Nothing changed: the command hook is skipped and says so; the
    // readiness hook verified.
    let out = cluster.run(&first, &["apply", "infra", "-o", "json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(runs(&first), 1, "an unchanged hook did not run again");
    let found = finished(&out.stdout);
    assert_eq!(found["apps/a"].0, "unchanged");
    assert_eq!(
        found["apps/a"].1,
        "unchanged; skipped 1 command hook (shell `echo one >> ran`): neither the release nor the hook changed since it last ran; --force runs it"
    );
    assert_eq!(
        found["apps/b"],
        ("unchanged".to_string(), "unchanged, ready".to_string())
    );

    // The hook's definition changed, the release did not: the hook runs.
    let changed = first.file(
        "releases/r.yaml",
        &std::fs::read_to_string(hooked("echo two >> ran").path().join("releases/r.yaml")).unwrap(),
    );
    let out = cluster.run(&changed, &["apply", "infra", "-o", "json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(runs(&changed), 2, "the changed hook ran");
    let found = finished(&out.stdout);
    assert_eq!(
        found["apps/a"],
        (
            "unchanged".to_string(),
            "unchanged; ran 1 command hook again: its definition changed since it last ran"
                .to_string()
        )
    );
    // And once it ran, it is recorded: the next run skips it again.
    let out = cluster.run(&changed, &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(runs(&changed), 2);
}

/// The ledger records which cluster config installed each release: applying
/// another config to the same cluster (the wrong kubeconfig context) stops
/// before changing anything, unless `--force`.
#[test]
fn apply_of_another_cluster_config_over_recorded_releases_stops() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    assert_eq!(cluster.run(&config(), &["apply", "infra"]).code, 0);
    let installs = cluster.installs().len();
    let home = config()
        .file(
            "clusters/home/cluster.yaml",
            "name: home\ncontext: admin@infra\nlints:\n  ignore: [cilium-cluster-id-invalid, cilium-cluster-name-mismatch]\n",
        );
    let out = cluster.run(&home, &["apply", "home"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("error: apply of cluster `home` refused: the ownership ledger of this cluster says its releases were installed by cluster config `infra` (kube-system/cilium, kube-system/coredns"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("pass --force to apply `home` over them anyway"),
        "{}",
        out.stderr
    );
    assert_eq!(cluster.installs().len(), installs, "nothing was changed");
    let out = cluster.run(&home, &["apply", "home", "--force"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let entry: serde_json::Value =
        serde_json::from_str(cluster.ledger()["kube-system.cilium"].as_str().unwrap()).unwrap();
    assert_eq!(entry["cluster"], "home");
}

/// A run stopped before its release phase (here: the lock is held) ends its
/// JSON Lines with a `run_failed` event carrying the error JSON's fields.
#[test]
fn a_run_stopped_in_preflight_ends_its_json_lines_with_run_failed() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    cluster.api.insert(live_lease("job-infra-1 pid 1"));
    let out = cluster.run(&config(), &["apply", "infra", "-o", "json"]);
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    let events: Vec<serde_json::Value> = out
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("every stdout line is JSON"))
        .collect();
    assert_eq!(events[0]["event"], "run_started", "{}", out.stdout);
    let last = events.last().unwrap();
    assert_eq!(last["event"], "run_failed", "{}", out.stdout);
    assert_eq!(last["exitCode"], 3);
    assert!(last["elapsedMs"].is_u64());
    assert!(
        last["error"]
            .as_str()
            .unwrap()
            .contains("another bootstrap apply holds the lock on this cluster: job-infra-1 pid 1"),
        "{last}"
    );
    assert_eq!(
        events.iter().filter(|e| e["event"] == "run_failed").count(),
        1
    );
}

/// A chart version the repository lacks: the failure says where the
/// version is written.
#[test]
fn a_missing_chart_version_names_where_it_is_set() {
    let cluster = Cluster::start();
    cluster.script(json!({
        "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
        "kube-system/coredns": {"fail": "Error: chart \"coredns\" version \"1.44.3\" not found in https://coredns.github.io/helm repository"},
    }));
    let test = config();
    let out = cluster.run(&test, &["apply", "infra", "-o", "json"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let text = std::fs::read_to_string(test.path().join("releases/core.yaml")).unwrap();
    let start = text.lines().position(|l| l == "name: coredns").unwrap();
    let line = text
        .lines()
        .enumerate()
        .skip(start)
        .find(|(_, l)| l.contains("version: 1.44.3"))
        .map(|(i, _)| i + 1)
        .unwrap();
    let found = finished(&out.stdout);
    assert!(
        found["kube-system/coredns"].1.ends_with(&format!(
            "(its chart and version are set at releases/core.yaml:{line})"
        )),
        "{:?}",
        found["kube-system/coredns"]
    );
}

/// A Flux tree whose only HelmRelease manages a release bootstrap does not
/// install: the scan passes.
pub(crate) const GITOPS_KS: &str = "apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 10m
  path: ./apps
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
";

const GITOPS_HR: &str = "apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: podinfo
  namespace: apps
spec:
  interval: 10m
  chart:
    spec:
      chart: podinfo
      sourceRef:
        kind: HelmRepository
        name: podinfo
";

#[test]
fn apply_says_what_protects_the_releases_from_flux() {
    let release = "name: r\nnamespace: apps\nchart: { oci: oci://example.com/charts/r, version: 1.0.0 }\ncrds: none\n";
    let test = Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            &format!("{CLUSTER}flux:\n  root: gitops\n  entrypoint: clusters/infra\n"),
        )
        .file("releases/r.yaml", release)
        .file("gitops/clusters/infra/apps.yaml", GITOPS_KS)
        .file("gitops/apps/podinfo.yaml", GITOPS_HR);
    let cluster = Cluster::start();
    // Plain lines: the scan before anything changed, the guard once applied.
    let first = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(first.code, 0, "{}\n{}", first.stdout, first.stderr);
    let scanned = first
        .stdout
        .lines()
        .position(|l| l.contains("GitOps tree "))
        .unwrap_or_else(|| panic!("{}", first.stdout));
    assert!(
        first.stdout.lines().nth(scanned).unwrap().ends_with(
            "(entrypoint clusters/infra) scanned: 2 files, 1 Flux Kustomization, 1 HelmRelease; none manages a release bootstrap owns"
        ),
        "{}",
        first.stdout
    );
    assert!(
        first.stdout.contains(
            "admission guard installed (ValidatingAdmissionPolicy bootstrap-ownership-guard): Flux HelmReleases for bootstrap's releases are denied"
        ),
        "{}",
        first.stdout
    );
    let helm = first
        .stdout
        .lines()
        .position(|l| l.contains("apps/r: installing"))
        .unwrap();
    assert!(scanned < helm, "scanned before helm ran:\n{}", first.stdout);

    // JSON: one event each, structured; the second run finds it in place.
    let second = cluster.run(&test, &["apply", "infra", "--output", "json"]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    let events: Vec<serde_json::Value> = second
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |kind: &str| -> Vec<&serde_json::Value> {
        events.iter().filter(|e| e["event"] == kind).collect()
    };
    let [scan] = of("gitops_scanned")[..] else {
        panic!("{}", second.stdout)
    };
    assert_eq!(
        (
            &scan["entrypoint"],
            &scan["files"],
            &scan["kustomizations"],
            &scan["helmReleases"]
        ),
        (&json!("clusters/infra"), &json!(2), &json!(1), &json!(1)),
        "{scan}"
    );
    let [guard] = of("guard")[..] else {
        panic!("{}", second.stdout)
    };
    assert_eq!(
        (&guard["policy"], &guard["state"]),
        (&json!("bootstrap-ownership-guard"), &json!("unchanged"))
    );
}

#[test]
fn apply_without_flux_says_git_was_not_checked_and_guard_off_says_so() {
    let release = "name: r\nnamespace: apps\nchart: { oci: oci://example.com/charts/r, version: 1.0.0 }\ncrds: none\n";
    let test = Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            &format!("{CLUSTER}guard: false\n"),
        )
        .file("releases/r.yaml", release);
    let cluster = Cluster::start();
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(
            "no GitOps tree scanned (no `flux:` in cluster.yaml): whether Flux manages these releases was not checked"
        ) && out.stdout.contains("admission guard off (`guard: false` in cluster.yaml)"),
        "{}",
        out.stdout
    );
}

/// Ctrl-C is a deliberate stop: the releases phase is "stopped", never
/// "failed"; what never started is "skipped" and listed once as not
/// started, what finished as finished.
#[test]
fn ctrl_c_says_stopped_and_names_what_never_started_once() {
    let cluster = Cluster::start();
    let test = config();
    let child = apply_while_cilium_installs_with(&cluster, &test, 1500, &[]);
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(130), "{stdout}");
    assert!(stdout.contains("] releases phase stopped\n"), "{stdout}");
    assert!(!stdout.contains("phase failed"), "{stdout}");
    assert!(
        stdout.contains("kube-system/coredns: skipped: the run was stopped before it started"),
        "{stdout}"
    );
    assert!(
        stdout.contains("\nfinished: kube-system/cilium\n"),
        "{stdout}"
    );
    let not_started = stdout
        .lines()
        .filter(|l| l.starts_with("not started: "))
        .collect::<Vec<_>>();
    assert_eq!(not_started.len(), 1, "{stdout}");
    assert!(
        !stdout.contains("\ninterrupted: "),
        "nothing was running when it stopped: {stdout}"
    );
}

/// `-q` shows only failures, warnings and the summary: the table lists the
/// releases that did not succeed and counts the rest.
#[test]
fn quiet_lists_only_what_did_not_succeed() {
    let cluster = Cluster::start();
    cluster.script(json!({
        "*": {"delay_ms": 20},
        "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
        "kube-system/coredns": {"fail": "boom"},
    }));
    let out = cluster.run(&config(), &["apply", "infra", "-q"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("kube-system/coredns") && out.stdout.contains("failed"),
        "{}",
        out.stdout
    );
    assert!(
        !out.stdout.contains("kube-system/cilium   ")
            && out.stdout.contains("(and 1 release that succeeded)"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("critical path"), "{}", out.stdout);
}

/// A `needs` edge costs no request for the lock: the Lease is watched, so
/// the check before each step and before each ledger write is local while
/// the watch is open and the last renewal recent
/// (docs/design.md#cluster-lock). A chain of 8 releases, 40 ms from the API
/// server: the Lease is written when the lock is taken and by the periodic
/// renewal only (every 5 s), never once per step.
#[test]
fn a_needs_edge_makes_no_request_for_the_lock() {
    let cluster = Cluster::start();
    cluster.script(json!({"*": {"delay_ms": 0}}));
    cluster
        .api
        .set_latency(Duration::from_millis(40), Duration::ZERO);
    let releases: String = (0..8)
        .map(|i| {
            let needs = if i == 0 {
                String::new()
            } else {
                format!("needs: [r{}]\n", i - 1)
            };
            format!(
                "name: r{i}\nnamespace: apps\nchart: {{ repo: https://charts.example.com, name: app, version: 1.0.0 }}\n{needs}---\n"
            )
        })
        .collect();
    let test = Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file("releases/chain.yaml", &releases);
    let started = std::time::Instant::now();
    let out = cluster.run(&test, &["apply", "infra"]);
    let took = started.elapsed();
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let lease_writes = cluster
        .api
        .request_log()
        .iter()
        .filter(|r| r.path.ends_with("/leases/bootstrap-lock") && r.method == "PUT")
        .count();
    let renewals = (took.as_secs() / 5) as usize;
    assert!(
        lease_writes <= renewals + 1,
        "{lease_writes} Lease writes in {took:?} for 8 steps"
    );
}

/// Every apply leaves a run record (its JSON events, how it exited), named
/// on stderr; `runs` lists them newest first and `runs --show` prints one;
/// a failed run's record ends with its error; `--no-record` keeps none
/// (docs/design.md#run-record).
#[test]
fn an_apply_leaves_a_record_that_runs_lists_and_shows() {
    let cluster = Cluster::start();
    cluster.script_standard(50);
    let test = config();
    let out = cluster.run(&test, &["apply", "infra", "--set", "token=s3cr3t-value"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let named = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("run record: "))
        .expect("the record is named")
        .to_string();
    let record = std::fs::read_to_string(&named).unwrap();
    let events: Vec<serde_json::Value> = record
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON Lines"))
        .collect();
    assert_eq!(events[0]["event"], "run_started");
    assert!(events.iter().any(|e| e["event"] == "run_finished"));
    assert_eq!(events.last().unwrap()["event"], "exited");
    assert_eq!(events.last().unwrap()["exitCode"], 0);
    assert!(!record.contains("s3cr3t-value"), "{record}");

    // A second run, refused: the lock is held.
    cluster.api.insert(live_lease("alice@laptop pid 4242"));
    let refused = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(refused.code, 3);
    cluster.delete_lease();
    let _ = cluster.run(&test, &["apply", "infra", "--no-record"]);

    let listed = cluster.run(&test, &["runs", "infra"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let lines: Vec<&str> = listed.stdout.lines().collect();
    assert!(
        lines[0].starts_with(" 1  ") && lines[0].contains("apply    infra        exit 3"),
        "{}",
        listed.stdout
    );
    assert!(
        lines[1].starts_with(" 2  ") && lines[1].contains("exit 0") && lines[1].ends_with(&named),
        "{}",
        listed.stdout
    );
    assert_eq!(lines.len(), 3, "--no-record left none: {}", listed.stdout);

    let shown = cluster.run(&test, &["runs", "infra", "--show"]);
    let last: serde_json::Value =
        serde_json::from_str(shown.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["exitCode"], 3);
    assert!(
        last["error"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("alice@laptop pid 4242")),
        "{last}"
    );
    let json = cluster.run(&test, &["runs", "-o", "json"]);
    let runs: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(2));
    assert_eq!(runs["runs"][1]["exitCode"], 0);
}
