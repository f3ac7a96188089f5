//! The contract a Job controller relies on (docs/fleet.md#the-job-contract):
//! a bounded, visible wait for a control plane that is still coming up,
//! exit codes that tell a retryable lock apart from a failure, and a
//! one-line JSON termination message.

use serde_json::{Value, json};
use testkit::builder::Test;
use testkit::cluster::{CLUSTER, Cluster, RELEASES, daemonset, dead_lease, live_lease};

fn config() -> Test {
    Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file("releases/core.yaml", RELEASES)
}

fn script(cluster: &Cluster) {
    cluster.script(json!({
        "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
    }));
}

fn termination(dir: &tempfile::TempDir) -> Value {
    let text = std::fs::read_to_string(dir.path().join("termination-log")).expect("written");
    assert!(!text.contains('\n'), "one line: {text}");
    assert!(text.len() <= 4096);
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_successful_apply_leaves_its_counts_in_the_termination_message() {
    let cluster = Cluster::start();
    script(&cluster);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("termination-log");
    let out = cluster.run(
        &config(),
        &["apply", "infra", "--termination-log", log.to_str().unwrap()],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let message = termination(&dir);
    assert_eq!(message["command"], "apply");
    assert_eq!(message["exitCode"], 0);
    assert_eq!(message["clusters"][0]["cluster"], "infra");
    assert_eq!(message["clusters"][0]["ok"], true);
    assert_eq!(message["clusters"][0]["outcomes"], json!({"installed": 4}));
    assert_eq!(message["clusters"][0]["failed"], json!([]));
}

#[test]
fn a_held_lock_exits_3_and_says_so_in_the_termination_message() {
    let cluster = Cluster::start();
    script(&cluster);
    cluster.api.insert(live_lease("job-infra-1 pid 1"));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("termination-log");
    let out = cluster.run(
        &config(),
        &["apply", "infra", "--termination-log", log.to_str().unwrap()],
    );
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    let message = termination(&dir);
    assert_eq!(message["exitCode"], 3);
    assert!(
        message["error"]
            .as_str()
            .unwrap()
            .contains("another bootstrap apply holds the lock on this cluster: job-infra-1 pid 1"),
        "{message}"
    );
    assert!(cluster.installs().is_empty());
}

#[test]
fn a_config_error_exits_2_with_the_error_in_the_termination_message() {
    let cluster = Cluster::start();
    let broken = Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file(
            "releases/core.yaml",
            &RELEASES.replace("needs: [cilium]", "needs: [cilum]"),
        );
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("termination-log");
    let out = cluster.run(
        &broken,
        &["apply", "infra", "--termination-log", log.to_str().unwrap()],
    );
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    let message = termination(&dir);
    assert_eq!(message["exitCode"], 2);
    assert_eq!(message["clusters"], json!([]));
    assert!(
        message["error"].as_str().unwrap().contains("cilum"),
        "{message}"
    );
}

#[test]
fn wait_for_api_bounds_the_wait_for_a_control_plane_that_never_answers() {
    let cluster = Cluster::start();
    cluster.api.fail_next(1_000_000, 503);
    let timed = |wait: &str| {
        let started = std::time::Instant::now();
        let out = cluster.run(&config(), &["apply", "infra", "--wait-for-api", wait]);
        (out, started.elapsed())
    };
    // The same run asking for no wait: what starting, loading and one
    // refused answer cost on this machine now, so a loaded machine stretches
    // both sides alike.
    let (once, floor) = timed("1ms");
    assert_eq!(once.code, 1, "{}\n{}", once.stdout, once.stderr);
    let (out, took) = timed("2s");
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    // 2 s asked, and waited; one more attempt in flight at the deadline
    // and the retries' pauses may add to it, never another wait.
    assert!(took >= std::time::Duration::from_secs(2), "{took:?}");
    assert!(
        took < floor + std::time::Duration::from_secs(5),
        "{took:?} against {floor:?} with no wait"
    );
    assert!(
        out.stderr.contains(&format!(
            "waiting for the Kubernetes API server of context `admin@infra` at {} (up to 2s)",
            cluster.api.url()
        )),
        "{}",
        out.stderr
    );
}

#[test]
fn wait_for_api_waits_for_a_control_plane_coming_up() {
    let cluster = Cluster::start();
    script(&cluster);
    // The first answers are 503, as from an API server still starting.
    cluster.api.fail_next(4, 503);
    let out = cluster.run(&config(), &["apply", "infra", "--wait-for-api", "5m"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "waiting for the Kubernetes API server of context `admin@infra` at {} (up to 5m)",
            cluster.api.url()
        )),
        "{}",
        out.stderr
    );
}

/// A run killed during a first install leaves its release `pending-install`
/// and its Lease unreleased. The next run takes over the expired Lease, so
/// it knows the pending install was that dead run's (no other run can hold
/// the lock): it uninstalls the release and installs it afresh, and the
/// re-run converges with exit 0. Without a taken-over lock the release is
/// refused with advice, as anything else could be a live helm operation.
#[test]
fn a_rerun_after_a_killed_run_repairs_its_pending_install() {
    let cluster = Cluster::start();
    script(&cluster);
    std::fs::write(
        cluster.path().join("helm-state/kube-system__coredns.json"),
        serde_json::to_string(&json!({"name": "coredns", "namespace": "kube-system", "revision": 1,
            "status": "pending-install", "chart": "coredns", "version": "1.44.3", "app_version": "1.12.0",
            "values": {}, "labels": {}, "updated": "2026-01-01T00:00:00Z", "manifest": ""}))
        .unwrap(),
    )
    .unwrap();
    cluster.api.insert(dead_lease("job-infra-1 pid 1"));
    let out = cluster.run(&config(), &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(
        said.contains(
            "kube-system/coredns was left pending-install by job-infra-1 pid 1, whose expired lock this run took over; uninstalled it to install it afresh"
        ),
        "{said}"
    );
    assert_eq!(
        cluster.release_state("kube-system", "coredns").unwrap()["status"],
        "deployed"
    );
    assert!(cluster.ledger().contains_key("kube-system.coredns"));
}
