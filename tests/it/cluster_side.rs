//! The cluster side of `apply` against the loopback API: new CRD kinds are
//! usable right after the CRD phase, a stale rollout status is never taken
//! for done, and dropped watches do not break a wait.

use std::time::Duration;

use kube_loopback::{ApiServer, Rollout};
use serde_json::json;
use testkit::builder::Test;
use testkit::cluster::{Cluster, crd, daemonset};

use testkit::cluster::CLUSTER;

#[test]
fn kinds_from_the_crd_phase_are_usable_by_the_releases() {
    let cluster = Cluster::start();
    cluster.api.set_crd_establish(
        "widgets.example.com",
        Rollout::After(Duration::from_millis(400)),
    );
    cluster.script(json!({
        "example/widgets": {"crds": [crd("example.com", "widgets", "Widget")]},
        "example/widget-user": {"apply_manifests": true, "manifests": [
            {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1", "namespace": "example"}, "spec": {"size": 3}}
        ]},
    }));
    let test = Test::new().file("clusters/infra/cluster.yaml", CLUSTER).file(
        "releases/r.yaml",
        "name: widgets\nnamespace: example\nchart: { oci: oci://example.com/charts/widgets, version: 1.0.0 }\ncrds: only\n---\nname: widget-user\nnamespace: example\nchart: { oci: oci://example.com/charts/widget-user, version: 1.0.0 }\ncrds: none\nhooks:\n  presync:\n    - condition: { apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, name: widgets.example.com, type: Established }\n  postsync:\n    - created: { apiVersion: example.com/v1, kind: Widget, name: w1 }\n",
    );
    let wall = std::time::SystemTime::now();
    let instant = std::time::Instant::now();
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        cluster
            .api
            .get("example.com/v1", "Widget", Some("example"), "w1")
            .is_some()
    );
    // Established before the first release started.
    let established = cluster
        .api
        .rollout_completed_at("CustomResourceDefinition", "", "widgets.example.com")
        .expect("established");
    let established_ms = (wall + (established - instant))
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let first = cluster
        .installs()
        .into_iter()
        .next()
        .expect("widget-user installed");
    assert!(
        first.start_ms + 5 >= established_ms,
        "a release started before the CRD was Established"
    );
    assert_eq!(
        first.release(),
        Some("widget-user"),
        "crds: only releases are never installed"
    );
}

/// Five CRD-only releases' CRDs, each Established 300 ms after it is written.
fn five_slow_crds(cluster: &Cluster) -> Test {
    let mut script = serde_json::Map::new();
    let mut releases = String::new();
    for i in 0..5 {
        let plural = format!("widgets{i}");
        cluster.api.set_crd_establish(
            &format!("{plural}.example.com"),
            Rollout::After(Duration::from_millis(300)),
        );
        script.insert(
            format!("example/w{i}"),
            json!({"crds": [crd("example.com", &plural, &format!("Widget{i}"))]}),
        );
        releases.push_str(&format!(
            "---\nname: w{i}\nnamespace: example\nchart: {{ oci: oci://example.com/charts/w{i}, version: 1.0.0 }}\ncrds: only\n"
        ));
    }
    cluster.script(serde_json::Value::Object(script));
    Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file("releases/r.yaml", &releases)
}

/// `apply` succeeds and reports each of the five CRDs Established.
fn applies_five_established(cluster: &Cluster, test: &Test) {
    let out = cluster.run(test, &["apply", "infra", "--output", "json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let established = out
        .stdout
        .lines()
        .filter(|l| l.contains("\"crd_established\""))
        .count();
    assert_eq!(established, 5, "{}", out.stdout);
}

/// The CRD watches of the log: (on the collection, on one CRD by name).
fn crd_watches(cluster: &Cluster) -> (usize, usize) {
    let watches: Vec<_> = cluster
        .api
        .request_log()
        .into_iter()
        .filter(|r| r.is_watch() && r.path.ends_with("/customresourcedefinitions"))
        .collect();
    let by_name = watches
        .iter()
        .filter(|r| r.query.contains("fieldSelector=metadata.name"))
        .count();
    (watches.len() - by_name, by_name)
}

#[test]
fn the_crd_phase_waits_for_every_crd_through_one_watch() {
    let cluster = Cluster::start();
    let test = five_slow_crds(&cluster);
    applies_five_established(&cluster, &test);
    // One watch on the collection, opened before the writes; none per CRD
    // (each would first list its whole CRD).
    assert_eq!(crd_watches(&cluster), (1, 0));
}

#[test]
fn a_crd_watch_that_ends_early_leaves_the_rest_to_a_wait_per_crd() {
    // Every watch ends after its first event: the CRD phase's own watch
    // sees one CRD written, none Established.
    let cluster = Cluster::with(ApiServer::builder().close_watches_after(1).start());
    let test = five_slow_crds(&cluster);
    applies_five_established(&cluster, &test);
    let (collection, by_name) = crd_watches(&cluster);
    assert_eq!(collection, 1);
    assert!(by_name >= 5, "{by_name} watches by name");
}

#[test]
fn a_crd_that_never_establishes_fails_before_any_release() {
    let cluster = Cluster::start();
    cluster.api.set_crd_establish(
        "widgets.example.com",
        Rollout::FailAfter(Duration::from_millis(10)),
    );
    cluster.script(json!({"example/widgets": {"crds": [crd("example.com", "widgets", "Widget")]}}));
    let test = Test::new().file("clusters/infra/cluster.yaml", CLUSTER).file(
        "releases/r.yaml",
        "name: widgets\nnamespace: example\nchart: { oci: oci://example.com/charts/widgets, version: 1.0.0 }\ntimeout: 1m\n",
    );
    // FailAfter reports NamesAccepted=False: that never resolves by waiting.
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(
            "CRD widgets.example.com (from release `example/widgets`) did not become Established"
        ),
        "{}",
        out.stderr
    );
    assert!(cluster.installs().is_empty(), "no release was touched");
}

#[test]
fn a_stale_rollout_status_is_not_taken_for_done() {
    let cluster = Cluster::start();
    // A DaemonSet fully rolled out at generation 1 ...
    let mut ds = daemonset("kube-system", "cilium");
    ds["metadata"]["generation"] = json!(1);
    ds["status"] = json!({"observedGeneration": 1, "desiredNumberScheduled": 1, "currentNumberScheduled": 1, "updatedNumberScheduled": 1, "numberAvailable": 1, "numberReady": 1});
    cluster.api.insert(ds);
    // ... whose controller never observes the upgrade the release makes.
    cluster
        .api
        .set_rollout("DaemonSet", "kube-system", "cilium", Rollout::Never);
    let mut upgraded = daemonset("kube-system", "cilium");
    upgraded["spec"]["template"]["spec"]["containers"][0]["image"] = json!("cilium:v1.18.2");
    cluster
        .script(json!({"kube-system/cilium": {"apply_manifests": true, "manifests": [upgraded]}}));
    let test = Test::new().file("clusters/infra/cluster.yaml", CLUSTER).file(
        "releases/r.yaml",
        "name: cilium\nnamespace: kube-system\nchart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }\ntimeout: 2s\nhooks:\n  postsync:\n    - rollout: { kind: DaemonSet, name: cilium }\n",
    );
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("waiting for the controller to observe generation 2"),
        "{}",
        out.stdout
    );
}

#[test]
fn waits_survive_dropped_watches() {
    let cluster = Cluster::with(ApiServer::builder().close_watches_after(1).start());
    cluster.api.set_rollout(
        "DaemonSet",
        "kube-system",
        "cilium",
        Rollout::After(Duration::from_millis(700)),
    );
    cluster.script(json!({"kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]}}));
    let test = Test::new().file("clusters/infra/cluster.yaml", CLUSTER).file(
        "releases/r.yaml",
        "name: cilium\nnamespace: kube-system\nchart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }\ntimeout: 30s\nhooks:\n  postsync:\n    - rollout: { kind: DaemonSet, name: cilium }\n",
    );
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        cluster
            .api
            .rollout_completed_at("DaemonSet", "kube-system", "cilium")
            .is_some()
    );
}

#[test]
fn wait_true_tracks_every_workload_of_the_release() {
    let cluster = Cluster::start();
    cluster.api.set_rollout(
        "Deployment",
        "apps",
        "web",
        Rollout::After(Duration::from_millis(300)),
    );
    cluster.script(json!({"apps/web": {"apply_manifests": true, "manifests": [testkit::cluster::deployment("apps", "web")]}}));
    let test = Test::new().file("clusters/infra/cluster.yaml", CLUSTER).file(
        "releases/r.yaml",
        "name: web\nnamespace: apps\nchart: { oci: oci://example.com/charts/web, version: 1.0.0 }\nwait: true\n---\nname: after\nnamespace: apps\nchart: { oci: oci://example.com/charts/after, version: 1.0.0 }\nneeds: [web]\n",
    );
    let wall = std::time::SystemTime::now();
    let instant = std::time::Instant::now();
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let done = cluster
        .api
        .rollout_completed_at("Deployment", "apps", "web")
        .unwrap();
    let done_ms = (wall + (done - instant))
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let after = cluster
        .installs()
        .into_iter()
        .find(|c| c.release() == Some("after"))
        .unwrap();
    assert!(after.start_ms + 5 >= done_ms);
}

/// `wait: true` is helm's `--wait` under helmfile: the release's workloads
/// are ready before its postsync hooks run, so a hook may use what the
/// workload does when it starts (cilium-operator registers Cilium's CRDs
/// before it is ready, and a setup's hook applies objects of those kinds).
/// The hooks ran first before, and on a real control plane that hook failed
/// (tests/it/corpus_applied.rs).
#[test]
fn wait_true_means_ready_before_the_postsync_hooks_run() {
    let cluster = Cluster::start();
    cluster.api.set_rollout(
        "Deployment",
        "apps",
        "web",
        Rollout::After(Duration::from_millis(500)),
    );
    cluster.script(json!({"apps/web": {"apply_manifests": true, "manifests": [testkit::cluster::deployment("apps", "web")]}}));
    let test = Test::new().file("clusters/infra/cluster.yaml", CLUSTER).file(
        "releases/r.yaml",
        "name: web\nnamespace: apps\nchart: { oci: oci://example.com/charts/web, version: 1.0.0 }\nwait: true\nhooks:\n  postsync:\n    - shell: date +%s%3N > hook-ran\n",
    );
    let wall = std::time::SystemTime::now();
    let instant = std::time::Instant::now();
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let done = cluster
        .api
        .rollout_completed_at("Deployment", "apps", "web")
        .unwrap();
    let done_ms = (wall + (done - instant))
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let ran: u64 = std::fs::read_to_string(test.path().join("hook-ran"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        ran + 5 >= done_ms,
        "the postsync hook ran {} ms before the Deployment was ready",
        done_ms - ran
    );
}
