//! `bootstrap apply --all` / `--clusters`: many clusters from one process,
//! each against its own loopback API server, with its own lock, ledger and
//! helm state (docs/fleet.md).

use serde_json::{Value, json};
use testkit::cluster::{daemonset, live_lease};
use testkit::fleet::{Fleet, fleet_releases};

fn script(fleet: &Fleet) {
    fleet.script(json!({
        "*": {"delay_ms": 30},
        "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
    }));
}

fn ledger(fleet: &Fleet, cluster: &str) -> Vec<String> {
    fleet
        .api(cluster)
        .get(
            "v1",
            "ConfigMap",
            Some("kube-system"),
            "bootstrap-ownership",
        )
        .and_then(|cm| {
            cm["data"]
                .as_object()
                .map(|d| d.keys().cloned().collect::<Vec<_>>())
        })
        .map(|mut keys| {
            keys.sort();
            keys
        })
        .unwrap_or_default()
}

fn hold_lock(fleet: &Fleet, cluster: &str) {
    fleet.api(cluster).insert(live_lease("ci-job-7 pid 1"));
}

#[test]
fn clusters_share_one_pull_per_chart() {
    // Three clusters start at once and all want the same four charts: the
    // chart cache pulls each once, the others wait for it and use its
    // archive.
    let fleet = Fleet::start(&["apps", "edge", "infra"]);
    script(&fleet);
    let out = fleet.run(&fleet.config(&fleet_releases()), &["apply", "--all"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let mut pulled: Vec<String> = fleet
        .helm_calls()
        .into_iter()
        .filter(|call| call.argv[0] == "pull")
        .map(|call| call.positionals()[0].clone())
        .collect();
    pulled.sort();
    let mut charts = pulled.clone();
    charts.dedup();
    assert_eq!(pulled, charts, "a chart pulled more than once");
    assert_eq!(pulled.len(), 4, "{pulled:?}");
}

#[test]
fn every_cluster_is_bootstrapped_each_against_its_own_api() {
    let fleet = Fleet::start(&["apps", "edge", "infra"]);
    script(&fleet);
    let out = fleet.run(&fleet.config(&fleet_releases()), &["apply", "--all"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    for cluster in ["apps", "edge", "infra"] {
        assert_eq!(
            ledger(&fleet, cluster),
            [
                "cert-manager.cert-manager",
                "kube-system.cilium",
                "kube-system.coredns",
                "kube-system.spegel"
            ],
            "{cluster}"
        );
        assert_eq!(
            fleet
                .release_state(cluster, "kube-system", "cilium")
                .unwrap()["status"],
            "deployed"
        );
        // Its own Lease was taken and given back.
        assert!(
            fleet
                .api(cluster)
                .get(
                    "coordination.k8s.io/v1",
                    "Lease",
                    Some("kube-system"),
                    "bootstrap-lock"
                )
                .is_none()
        );
    }
    // Every line names its cluster; the end says how each went.
    assert!(out.stdout.contains("infra │ "), "{}", out.stdout);
    assert!(out.stdout.contains("apps  │ "), "{}", out.stdout);
    assert!(
        out.stdout.contains("3 of 3 clusters applied"),
        "{}",
        out.stdout
    );
}

/// One cluster unreachable, one locked by another run: the third is still
/// bootstrapped, each failure is reported under its cluster, and the exit
/// code is the worst (1: failed, over 3: locked).
#[test]
fn a_failing_cluster_never_stops_another_and_the_worst_exit_code_wins() {
    let fleet = Fleet::start(&["apps", "edge", "infra"]);
    script(&fleet);
    fleet.api("edge").fail_next(1_000_000, 503);
    hold_lock(&fleet, "apps");
    let out = fleet.run(
        &fleet.config(&fleet_releases()),
        &["apply", "--all", "--wait-for-api", "2s"],
    );
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(ledger(&fleet, "infra").len(), 4, "{}", out.stderr);
    assert!(ledger(&fleet, "apps").is_empty());
    assert!(
        out.stderr.contains(
            "apps  │ error: another bootstrap apply holds the lock on this cluster: ci-job-7 pid 1"
        ),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(
            "edge  │ error: cannot reach the Kubernetes API server of context `admin@edge`"
        ),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("error: apply failed on 2 of 3 clusters: apps (exit 3), edge (exit 1)"),
        "{}",
        out.stderr
    );

    // Only the locked one left: exit 3, so a Job controller retries it.
    let out = fleet.run(
        &fleet.config(&fleet_releases()),
        &["apply", "--clusters", "apps,infra"],
    );
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
}

#[test]
fn json_lines_carry_the_cluster_and_end_with_the_fleet_result() {
    let fleet = Fleet::start(&["apps", "infra"]);
    script(&fleet);
    let out = fleet.run(
        &fleet.config(&fleet_releases()),
        &[
            "apply",
            "--all",
            "--output",
            "json",
            "--cluster-concurrency",
            "1",
        ],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    for line in &lines[..lines.len() - 1] {
        assert!(
            line["cluster"] == "apps" || line["cluster"] == "infra",
            "{line}"
        );
    }
    let finished = |cluster: &str| {
        lines
            .iter()
            .position(|l| l["event"] == "run_finished" && l["cluster"] == cluster)
            .unwrap_or_else(|| panic!("no run_finished for {cluster}"))
    };
    let started = |cluster: &str| {
        lines
            .iter()
            .position(|l| l["event"] == "run_started" && l["cluster"] == cluster)
            .unwrap()
    };
    // --cluster-concurrency 1: one cluster after the other.
    let (first, second) = if started("apps") < started("infra") {
        ("apps", "infra")
    } else {
        ("infra", "apps")
    };
    assert!(finished(first) < started(second));
    let mut last = lines.last().unwrap().clone();
    let stamp = last.as_object_mut().unwrap();
    assert!(stamp.remove("time").unwrap().is_string());
    assert!(stamp.remove("elapsedMs").unwrap().is_u64());
    assert_eq!(
        last,
        json!({"event": "fleet_finished", "schemaVersion": 1, "exitCode": 0,
                "clusters": [{"cluster": "apps", "exitCode": 0}, {"cluster": "infra", "exitCode": 0}]})
    );
}

#[test]
fn named_clusters_must_exist_and_context_is_per_cluster() {
    let fleet = Fleet::start(&["apps", "infra"]);
    let out = fleet.run(
        &fleet.config(&fleet_releases()),
        &["apply", "--clusters", "apps,nope"],
    );
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("nope"), "{}", out.stderr);
    let out = fleet.run(
        &fleet.config(&fleet_releases()),
        &["apply", "--all", "--context", "admin@apps"],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(ledger(&fleet, "apps").is_empty());
}

/// Ctrl-C while the first of two clusters installs (`--cluster-concurrency
/// 1`): the running cluster stops cleanly, the waiting one never starts,
/// and the fleet exits 130.
#[test]
fn an_interrupt_stops_the_running_clusters_and_starts_no_other() {
    let fleet = Fleet::start(&["apps", "infra"]);
    fleet.script(json!({
        "*": {"delay_ms": 1500},
        "kube-system/cilium": {"delay_ms": 1500, "apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
    }));
    let config = fleet.config(&fleet_releases());
    let child = fleet
        .command(&config, &["apply", "--all", "--cluster-concurrency", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let installing = |cluster: &str| {
        fleet
            .release_state(cluster, "kube-system", "cilium")
            .is_some()
    };
    let mut child = child;
    while !installing("apps") && !installing("infra") {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "ended before any install ({status}):\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(std::time::Instant::now() < deadline, "nothing started");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let pid = i32::try_from(child.id()).unwrap();
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stdout}\n{stderr}");
    assert!(
        !(installing("apps") && installing("infra")),
        "the waiting cluster started:\n{stdout}"
    );
    assert!(stdout.contains("0 of 2 clusters applied"), "{stdout}");
}

/// `status --all`: every cluster's table, each read through its own context;
/// a cluster that cannot be read is reported under its name and the others
/// still are; the exit code is the worst.
#[test]
fn status_of_every_cluster_and_the_worst_exit_code() {
    let fleet = Fleet::start(&["apps", "infra"]);
    script(&fleet);
    let config = fleet.config(&fleet_releases());
    let out = fleet.run(&config, &["apply", "--clusters", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);

    let out = fleet.run(&config, &["status", "--all", "--output", "json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let clusters = doc["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), 2);
    assert_eq!(clusters[0]["cluster"], "apps");
    assert_eq!(clusters[1]["cluster"], "infra");
    let cilium = |c: &Value| {
        c["releases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["release"] == "kube-system/cilium")
            .unwrap()["deployed"]
            .clone()
    };
    assert!(cilium(&clusters[0]).is_null(), "apps was never applied");
    assert_eq!(cilium(&clusters[1])["status"], "deployed");

    fleet.api("apps").fail_next(1_000_000, 503);
    let out = fleet.run(&config, &["status", "--all", "--wait-for-api", "1s"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("cluster `infra`:"), "{}", out.stdout);
    assert!(
        out.stderr.contains(
            "apps: error: cannot reach the Kubernetes API server of context `admin@apps`"
        ),
        "{}",
        out.stderr
    );
}
