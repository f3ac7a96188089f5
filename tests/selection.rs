//! `--selector/-l` on release labels and several `--only`
//! (docs/design.md#selection), through `template` (offline) and `apply`.

use testkit::builder::Test;
use testkit::cluster::{CLUSTER, Cluster};

const RELEASES: &str = "name: cilium
namespace: kube-system
labels: { tier: network }
chart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }
---
name: coredns
namespace: kube-system
labels: { tier: network }
chart: { repo: https://coredns.github.io/helm, name: coredns, version: 1.44.3 }
needs: [cilium]
---
name: cert-manager
namespace: cert-manager
labels: { tier: platform }
chart: { repo: https://charts.jetstack.io, name: cert-manager, version: v1.19.0 }
needs: [coredns]
";

/// The release ids `template` prints, in order.
fn templated(args: &[&str]) -> Vec<String> {
    let out = Test::with_releases(RELEASES)
        .args(&["template", "infra"])
        .args(args)
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.stdout
        .lines()
        .filter_map(|l| l.strip_prefix("# release: "))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect()
}

#[test]
fn selectors_in_helmfile_syntax() {
    assert_eq!(
        templated(&["-l", "tier=network"]),
        ["kube-system/cilium", "kube-system/coredns"]
    );
    // Comma: AND; `!=`.
    assert_eq!(
        templated(&["--selector", "tier=network,name!=cilium"]),
        ["kube-system/coredns"]
    );
    // Several -l: OR; name, namespace and chart are labels of every release.
    assert_eq!(
        templated(&["-l", "name=cilium", "-l", "namespace=cert-manager"]),
        ["cert-manager/cert-manager", "kube-system/cilium"]
    );
    assert_eq!(templated(&["-l", "chart=coredns"]), ["kube-system/coredns"]);
    // --only and -l each add releases; template adds no needs (so
    // nothing orders these two but their ids).
    assert_eq!(
        templated(&["--only", "cert-manager", "--only", "cilium"]),
        ["cert-manager/cert-manager", "kube-system/cilium"]
    );
    assert_eq!(
        templated(&["--only", "cilium", "-l", "tier=platform"]),
        ["cert-manager/cert-manager", "kube-system/cilium"]
    );
}

#[test]
fn a_selector_matching_nothing_is_an_error() {
    Test::with_releases(RELEASES)
        .args(&["template", "infra", "-l", "tier=storage"])
        .invalid("error: --selector `tier=storage` matches no release of cluster `infra`; releases carry their `labels:` and `name`, `namespace`, `chart`\n");
}

#[test]
fn a_malformed_selector_is_a_usage_error() {
    let out = Test::with_releases(RELEASES)
        .args(&["template", "infra", "-l", "tier"])
        .run();
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains(
            "`tier` is not `key=value` or `key!=value` (a comma between terms means AND; repeat -l for OR)"
        ),
        "{}",
        out.stderr
    );
}

#[test]
fn apply_with_a_selector_adds_needs_unless_no_needs() {
    let cluster = Cluster::start();
    let test = Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file("releases/core.yaml", RELEASES);
    let out = cluster.run(
        &test,
        &["apply", "infra", "-l", "tier=platform", "--no-needs"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let installed: Vec<String> = cluster
        .installs()
        .iter()
        .filter_map(|c| c.release().map(str::to_string))
        .collect();
    assert_eq!(installed, ["cert-manager"]);
    let out = cluster.run(&test, &["apply", "infra", "-l", "name=coredns"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let installed: Vec<String> = cluster
        .installs()
        .iter()
        .filter_map(|c| c.release().map(str::to_string))
        .collect();
    assert_eq!(installed, ["cert-manager", "cilium", "coredns"]);
}
