//! `bootstrap destroy` end to end: the real binary against the loopback API
//! server and the fake helm, after a real `apply`.

use serde_json::json;
use testkit::builder::Test;
use testkit::cluster::{Cluster, HelmCall, crd, daemonset, deployment};

use testkit::cluster::{CLUSTER, RELEASES};

const CERTIFICATES: &str = "certificates.cert-manager.io";

/// A cluster where `apply infra` has succeeded.
fn applied() -> (Cluster, Test) {
    let cluster = Cluster::start();
    cluster.script(json!({
        "*": {"delay_ms": 20},
        "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
        "cert-manager/cert-manager": {"crds": [crd("cert-manager.io", "certificates", "Certificate")], "manifests": [deployment("cert-manager", "cert-manager")]},
    }));
    let test = Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file("releases/core.yaml", RELEASES);
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 0, "apply: {}\n{}", out.stdout, out.stderr);
    assert_eq!(cluster.ledger().len(), 4);
    (cluster, test)
}

fn uninstalls(cluster: &Cluster) -> Vec<HelmCall> {
    let mut calls: Vec<HelmCall> = cluster
        .helm_calls()
        .into_iter()
        .filter(|c| c.argv.first().map(String::as_str) == Some("uninstall"))
        .collect();
    calls.sort_by_key(|c| c.start_ms);
    calls
}

fn name(call: &HelmCall) -> &str {
    &call.positionals()[0]
}

fn crd_exists(cluster: &Cluster) -> bool {
    cluster
        .api
        .get(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            None,
            CERTIFICATES,
        )
        .is_some()
}

fn lease(cluster: &Cluster) -> Option<serde_json::Value> {
    cluster.api.get(
        "coordination.k8s.io/v1",
        "Lease",
        Some("kube-system"),
        "bootstrap-lock",
    )
}

#[test]
fn uninstalls_dependents_first_removes_ledger_entries_and_keeps_crds() {
    let (cluster, test) = applied();
    let out = cluster.run(&test, &["destroy", "infra", "--yes"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);

    let calls = uninstalls(&cluster);
    let order: Vec<&str> = calls.iter().map(name).collect();
    assert_eq!(order.len(), 4, "{order:?}");
    let call = |n: &str| calls.iter().find(|c| name(c) == n).unwrap();
    // Each uninstall starts only after every release that needs it is gone.
    for (dependent, need) in [
        ("spegel", "coredns"),
        ("cert-manager", "coredns"),
        ("coredns", "cilium"),
    ] {
        assert!(
            call(dependent).end_ms <= call(need).start_ms,
            "{dependent} must be gone before {need} starts: {order:?}"
        );
    }
    assert_eq!(
        call("cert-manager").flag("--namespace"),
        Some("cert-manager")
    );

    assert!(cluster.ledger().is_empty(), "{:?}", cluster.ledger());
    assert!(cluster.release_state("kube-system", "cilium").is_none());
    assert!(
        cluster
            .api
            .get("apps/v1", "DaemonSet", Some("kube-system"), "cilium")
            .is_none(),
        "helm uninstall removed cilium's workload"
    );
    assert!(crd_exists(&cluster), "CRDs stay without --crds");
    assert!(lease(&cluster).is_none(), "the lock is released");
    assert!(
        out.stdout.contains("infra: 4 uninstalled in"),
        "{}",
        out.stdout
    );

    // Nothing left: a second run reports every release absent and succeeds.
    let again = cluster.run(&test, &["destroy", "infra", "--yes"]);
    assert_eq!(again.code, 0, "{}\n{}", again.stdout, again.stderr);
    assert!(
        again.stdout.contains("infra: 4 absent in"),
        "{}",
        again.stdout
    );
    assert_eq!(uninstalls(&cluster).len(), 4, "no new uninstall");
}

#[test]
fn crds_are_deleted_with_crds_after_every_release() {
    let (cluster, test) = applied();
    let out = cluster.run(&test, &["destroy", "infra", "--yes", "--crds"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(!crd_exists(&cluster), "CRD deleted");
    assert!(cluster.ledger().is_empty());
    let line = out
        .stdout
        .lines()
        .find(|l| l.contains("crd certificates.cert-manager.io deleted"))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    let crd_at = out.stdout.find(line).unwrap();
    let last_release = out.stdout.find("kube-system/cilium: uninstalled").unwrap();
    assert!(
        last_release < crd_at,
        "CRDs go after the releases:\n{}",
        out.stdout
    );
}

/// A CRD with a finalizer is only marked for deletion (the real API server
/// keeps it while its custom resources are removed): `destroy --crds` waits
/// until it is gone, as `kubectl delete` does, so an `apply` right after
/// never finds it half-deleted.
#[test]
fn destroy_crds_waits_until_each_crd_is_gone() {
    let (cluster, test) = applied();
    let name = "certificates.cert-manager.io";
    let mut held = cluster
        .api
        .get(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            None,
            name,
        )
        .expect("the CRD phase applied it");
    held["metadata"]["finalizers"] = json!(["test.example/hold"]);
    cluster.api.insert(held);
    let started = std::time::Instant::now();
    let mut child = cluster.spawn(&test, &["destroy", "infra", "--yes", "--crds"]);
    // Marked, not gone, while the finalizer holds it.
    let marked = || {
        cluster
            .api
            .get(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                None,
                name,
            )
            .is_some_and(|c| !c["metadata"]["deletionTimestamp"].is_null())
    };
    while !marked() {
        assert!(
            started.elapsed().as_secs() < 60,
            "destroy never deleted {name}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "destroy returned while the CRD was still being deleted"
    );
    let mut done = cluster
        .api
        .get(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            None,
            name,
        )
        .unwrap();
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
    assert!(!crd_exists(&cluster), "gone when destroy returns");
    assert!(stdout.contains(&format!("crd {name} deleted")), "{stdout}");
}

#[test]
fn dry_run_lists_what_would_be_removed_and_changes_nothing() {
    let (cluster, test) = applied();
    cluster.api.clear_request_log();
    let out = cluster.run(&test, &["destroy", "infra", "--dry-run", "--crds"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("kube-system/cilium: would uninstall in"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("crd certificates.cert-manager.io would delete"),
        "{}",
        out.stdout
    );
    assert!(uninstalls(&cluster).is_empty());
    assert_eq!(
        cluster.api.mutations().len(),
        0,
        "{:?}",
        cluster.api.mutations()
    );
    assert_eq!(cluster.ledger().len(), 4);
}

#[test]
fn only_uninstalls_exactly_the_named_release_and_warns_about_its_dependents() {
    let (cluster, test) = applied();
    let out = cluster.run(&test, &["destroy", "infra", "--yes", "--only", "coredns"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let order: Vec<String> = uninstalls(&cluster)
        .iter()
        .map(|c| name(c).to_string())
        .collect();
    assert_eq!(order, ["coredns"]);
    assert!(
        out.stdout
            .contains("warning: kube-system/spegel needs kube-system/coredns and stays installed"),
        "{}",
        out.stdout
    );
    let ledger = cluster.ledger();
    assert!(!ledger.contains_key("kube-system.coredns"));
    assert_eq!(ledger.len(), 3);
}

#[test]
fn without_a_terminal_and_without_yes_it_refuses_and_changes_nothing() {
    let (cluster, test) = applied();
    // `Command::output` gives the child a null stdin: not a terminal.
    let out = cluster.run(&test, &["destroy", "infra"]);
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("pass --yes"), "{}", out.stderr);
    assert!(out.stderr.contains("nothing was changed"), "{}", out.stderr);
    assert!(uninstalls(&cluster).is_empty());
    assert_eq!(cluster.ledger().len(), 4);
}

#[test]
fn a_held_lock_stops_destroy_before_any_uninstall_and_names_the_holder() {
    let (cluster, test) = applied();
    let now = humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string();
    cluster.api.insert(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "bootstrap-lock", "namespace": "kube-system",
                     "annotations": {"bootstrap/operation": "apply"}},
        "spec": {"holderIdentity": "alice@ops-laptop pid 4242", "leaseDurationSeconds": 30,
                 "acquireTime": now, "renewTime": now}
    }));
    let out = cluster.run(&test, &["destroy", "infra", "--yes"]);
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(
            "another bootstrap apply holds the lock on this cluster: alice@ops-laptop pid 4242"
        ),
        "{}",
        out.stderr
    );
    assert!(uninstalls(&cluster).is_empty());
    assert_eq!(cluster.ledger().len(), 4);
    let held = lease(&cluster).unwrap();
    assert_eq!(held["spec"]["holderIdentity"], "alice@ops-laptop pid 4242");
}

#[test]
fn a_failed_uninstall_keeps_what_it_needs_and_exits_1() {
    let (cluster, test) = applied();
    cluster.script(json!({
        "*": {"delay_ms": 20},
        "kube-system/coredns": {"apply_manifests": true},
        "cert-manager/cert-manager": {"crds": [crd("cert-manager.io", "certificates", "Certificate")]},
    }));
    // helm marks the release secret `uninstalling` first; refusing that write fails coredns.
    cluster
        .api
        .fail_next_matching(10, 403, "secrets/sh.helm.release.v1.coredns");
    let out = cluster.run(&test, &["destroy", "infra", "--yes", "--crds"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let order: Vec<String> = uninstalls(&cluster)
        .iter()
        .map(|c| name(c).to_string())
        .collect();
    assert_eq!(order.len(), 3, "cilium is never attempted: {order:?}");
    assert!(!order.contains(&"cilium".to_string()));
    assert!(
        out.stdout.contains(
            "kube-system/cilium: skipped: kept: kube-system/coredns still needs it (its uninstall failed)"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("warning: CRDs kept (1): not every release was uninstalled"),
        "{}",
        out.stdout
    );
    assert!(crd_exists(&cluster));
    let ledger = cluster.ledger();
    let mut left: Vec<&String> = ledger.keys().collect();
    left.sort();
    assert_eq!(left, ["kube-system.cilium", "kube-system.coredns"]);
    assert!(
        out.stderr
            .contains("destroy of cluster `infra` failed: kube-system/coredns failed"),
        "{}",
        out.stderr
    );
    assert!(
        lease(&cluster).is_none(),
        "the lock is released on failure too"
    );
}

#[test]
fn an_interrupt_lets_the_running_uninstall_finish_then_stops_with_130() {
    let (cluster, test) = applied();
    cluster.script(json!({"kube-system/spegel": {"delay_ms": 1500}}));
    let child = cluster.spawn(&test, &["destroy", "infra", "--yes"]);
    // The fake helm marks the release `uninstalling` before its delay.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while cluster
        .release_state("kube-system", "spegel")
        .is_some_and(|s| s["status"] != "uninstalling")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "spegel never started uninstalling"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let pid = i32::try_from(child.id()).unwrap();
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(130), "{stdout}");
    assert!(
        stdout.contains("kube-system/spegel: uninstalled"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "kube-system/cilium: interrupted after 0.0s: not started: destroy was interrupted"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("run `bootstrap destroy` again to continue"),
        "{stdout}"
    );
    let order: Vec<String> = uninstalls(&cluster)
        .iter()
        .map(|c| name(c).to_string())
        .collect();
    assert_eq!(order, ["spegel"]);
    let ledger = cluster.ledger();
    assert!(!ledger.contains_key("kube-system.spegel"));
    assert_eq!(ledger.len(), 3);
    assert!(
        lease(&cluster).is_none(),
        "the lock is released on interrupt"
    );
}

#[test]
fn destroy_of_the_whole_cluster_names_what_it_leaves_and_how_to_remove_it() {
    let (cluster, test) = applied();
    let out = cluster.run(&test, &["destroy", "infra", "--yes"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let line = out
        .stdout
        .lines()
        .find(|l| l.contains("left in the cluster: "))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    for named in [
        "the admission guard (ValidatingAdmissionPolicy and binding bootstrap-ownership-guard)",
        "the ownership ledger (ConfigMaps kube-system/bootstrap.dev/ledger=ownership",
        "the CRDs of the CRD phase (`destroy --crds` deletes them)",
        "kubectl delete validatingadmissionpolicybinding,validatingadmissionpolicy bootstrap-ownership-guard",
    ] {
        assert!(line.contains(named), "{named}:\n{line}");
    }
    // What it names is there: the guard stays.
    assert!(
        cluster
            .api
            .get(
                "admissionregistration.k8s.io/v1",
                "ValidatingAdmissionPolicy",
                None,
                "bootstrap-ownership-guard"
            )
            .is_some()
    );
    // --only leaves the guard in use: nothing is said.
    let (cluster, test) = applied();
    let out = cluster.run(&test, &["destroy", "infra", "--yes", "--only", "spegel"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        !out.stdout.contains("left in the cluster"),
        "{}",
        out.stdout
    );
}

/// The Lease deleted while the first uninstall runs: `destroy` checks the
/// lock before each uninstall (docs/design.md#cluster-lock), so no other
/// uninstall starts, and the run ends with exit 3 saying why, not
/// "interrupted".
#[test]
fn a_lock_lost_mid_destroy_starts_no_other_uninstall_and_exits_3() {
    let (cluster, test) = applied();
    cluster.script(json!({"*": {"delay_ms": 1500}}));
    let child = cluster.spawn(&test, &["destroy", "infra", "--yes"]);
    let uninstalling = || {
        [("kube-system", "spegel"), ("cert-manager", "cert-manager")]
            .iter()
            .any(|(ns, name)| {
                cluster
                    .release_state(ns, name)
                    .is_some_and(|s| s["status"] == "uninstalling")
            })
    };
    testkit::wait_until("an uninstall to start", uninstalling);
    cluster.delete_lease();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("destroy of cluster `infra` stopped: the cluster lock was lost (the Lease kube-system/bootstrap-lock was deleted)"),
        "{stderr}"
    );
    assert_eq!(uninstalls(&cluster).len(), 1, "{stdout}");
    assert!(
        stdout.contains("not started: the cluster lock was lost (the Lease kube-system/bootstrap-lock was deleted)"),
        "{stdout}"
    );
    assert!(lease(&cluster).is_none(), "not recreated");
}

/// An uninstall that took its chart's Namespace with it, held a moment by
/// a finalizer: `destroy` waits until it is gone before it ends, so a
/// `destroy && apply` does not meet a namespace being deleted.
#[test]
fn destroy_waits_for_a_namespace_its_uninstall_is_deleting() {
    let cluster = Cluster::start();
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "cert-manager", "finalizers": ["example.com/hold"]}});
    cluster.script(json!({
        "*": {"delay_ms": 20},
        "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
        "cert-manager/cert-manager": {"apply_manifests": true,
            "crds": [crd("cert-manager.io", "certificates", "Certificate")],
            "manifests": [namespace, deployment("cert-manager", "cert-manager")]},
    }));
    let test = Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file("releases/core.yaml", RELEASES);
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 0, "apply: {}\n{}", out.stdout, out.stderr);
    let mut child = cluster.spawn(&test, &["destroy", "infra", "--yes"]);
    let ns = || cluster.api.get("v1", "Namespace", None, "cert-manager");
    testkit::wait_until("the namespace to be deleted", || {
        ns().is_some_and(|n| !n["metadata"]["deletionTimestamp"].is_null())
    });
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "destroy ended while the namespace was still being deleted"
    );
    let mut released = ns().expect("held by its finalizer");
    released["metadata"]["finalizers"] = json!([]);
    cluster.api.insert(released);
    let let_go = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(ns().is_none());
    assert!(!stdout.contains("still being deleted"), "{stdout}");
    // And it ended soon after the namespace was let go.
    assert!(let_go.elapsed() < std::time::Duration::from_secs(5));
}
