//! `bootstrap apply` end to end: the real binary against the loopback API
//! server and the fake helm.

mod support;

use serde_json::json;
use support::builder::Test;
use support::cluster::{Cluster, crd, daemonset, deployment};

const CLUSTER: &str = "name: infra\ncontext: admin@infra\n";

/// cilium -> coredns -> {cert-manager, spegel}; cert-manager carries CRDs.
const RELEASES: &str = "name: cilium
namespace: kube-system
chart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }
values: { k8sServiceHost: 10.0.0.1 }
hooks:
  postsync:
    - rollout: { kind: DaemonSet, name: cilium }
---
name: coredns
namespace: kube-system
chart: { repo: https://coredns.github.io/helm, name: coredns, version: 1.44.3 }
needs: [cilium]
---
name: cert-manager
namespace: cert-manager
chart: { repo: https://charts.jetstack.io, name: cert-manager, version: v1.19.0 }
needs: [coredns]
values: { crds: { enabled: false } }
crdValues: { crds: { enabled: true } }
---
name: spegel
namespace: kube-system
chart: { oci: oci://ghcr.io/spegel-org/helm-charts/spegel, version: 0.4.0 }
needs: [coredns]
";

fn config() -> Test {
    Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file("releases/core.yaml", RELEASES)
}

fn standard_script(cluster: &Cluster) {
    cluster.script(json!({
        "*": {"delay_ms": 50},
        "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
        "cert-manager/cert-manager": {"crds": [crd("cert-manager.io", "certificates", "Certificate")], "manifests": [deployment("cert-manager", "cert-manager")]},
    }));
}

#[test]
fn applies_crds_then_releases_in_dag_order_and_records_ownership() {
    let cluster = Cluster::start();
    standard_script(&cluster);
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
    assert_eq!(
        cm_install.flag("--repo"),
        Some("https://charts.jetstack.io")
    );
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
