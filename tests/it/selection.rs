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
    // `--no-needs`: exactly what the selectors choose.
    let exactly = |args: &[&str]| {
        let mut all = vec!["--no-needs"];
        all.extend_from_slice(args);
        templated(&all)
    };
    assert_eq!(
        exactly(&["-l", "tier=network"]),
        ["kube-system/cilium", "kube-system/coredns"]
    );
    // Comma: AND; `!=`.
    assert_eq!(
        exactly(&["--selector", "tier=network,name!=cilium"]),
        ["kube-system/coredns"]
    );
    // Several -l: OR; name, namespace and chart are labels of every release.
    assert_eq!(
        exactly(&["-l", "name=cilium", "-l", "namespace=cert-manager"]),
        ["cert-manager/cert-manager", "kube-system/cilium"]
    );
    assert_eq!(exactly(&["-l", "chart=coredns"]), ["kube-system/coredns"]);
    // --only and -l each add releases.
    assert_eq!(
        exactly(&["--only", "cert-manager", "--only", "cilium"]),
        ["cert-manager/cert-manager", "kube-system/cilium"]
    );
    assert_eq!(
        exactly(&["--only", "cilium", "-l", "tier=platform"]),
        ["cert-manager/cert-manager", "kube-system/cilium"]
    );
}

/// `--only` and `-l` mean on `template` (and `diff`) what they mean on
/// `apply`: the releases chosen and what they need, in execution order.
#[test]
fn only_adds_needs_as_apply_does() {
    assert_eq!(
        templated(&["--only", "coredns"]),
        ["kube-system/cilium", "kube-system/coredns"]
    );
    assert_eq!(
        templated(&["-l", "tier=platform"]),
        [
            "kube-system/cilium",
            "kube-system/coredns",
            "cert-manager/cert-manager"
        ]
    );
    let out = Test::with_releases(RELEASES)
        .args(&["template", "infra", "--no-needs"])
        .run();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("--no-needs runs exactly the releases --only or --selector chooses"),
        "{}",
        out.stderr
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

/// `template -v CLUSTER RELEASE` with `args`: (the values document, the
/// `# values from:` lines).
fn values_with(test: Test, args: &[&str]) -> (serde_json::Value, Vec<String>) {
    let out = test
        .args(&["template", "infra", "cilium", "-v"])
        .args(args)
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let sources = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("# values from: "))
        .map(str::to_string)
        .collect();
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&out.stdout).unwrap();
    (docs.into_iter().next().unwrap(), sources)
}

#[test]
fn set_and_values_win_over_the_config_and_are_shown() {
    let test = Test::with_releases(&RELEASES.replace(
        "labels: { tier: network }\nchart: { repo: https://helm.cilium.io",
        "labels: { tier: network }\nvalues: { ipam: { mode: kubernetes }, debug: { enabled: false } }\nchart: { repo: https://helm.cilium.io",
    ))
    .file("run.yaml", "debug: { enabled: true, verbose: flow }\nipam: { mode: cluster-pool }\n");
    let (values, sources) = values_with(
        test,
        &[
            "--values",
            "run.yaml",
            "--set",
            "ipam.mode=eni,operator.replicas=1",
            "--set",
            "auth.password=hunter2",
        ],
    );
    // --values over the config, --set over --values; helm's --set typing.
    assert_eq!(
        values,
        serde_json::json!({
            "ipam": {"mode": "eni"},
            "debug": {"enabled": true, "verbose": "flow"},
            "operator": {"replicas": 1},
            "auth": {"password": "<redacted>"}
        })
    );
    assert_eq!(
        sources,
        [
            "releases/core.yaml (values)",
            "run.yaml",
            "--set ipam.mode=eni,operator.replicas=1",
            "--set auth.password=<redacted>"
        ]
    );
}

#[test]
fn a_bad_set_or_values_file_is_an_error() {
    Test::with_releases(RELEASES)
        .args(&["template", "infra", "--set", "ipam.mode", "--values", "nope.yaml"])
        .invalid("error: nope.yaml: cannot read the --values file: No such file or directory (os error 2)\nerror: --set `ipam.mode` is not `path=value`\nerror: 2 problems in the config; nothing was changed\n");
}

#[test]
fn apply_installs_with_the_run_values() {
    let cluster = Cluster::start();
    let test = Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file("releases/core.yaml", RELEASES);
    let out = cluster.run(
        &test,
        &[
            "apply",
            "infra",
            "--only",
            "cilium",
            "--set",
            "ipam.mode=eni",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let installs = cluster.installs();
    assert_eq!(
        installs[0].values_files[0]["content"],
        serde_json::json!({"ipam": {"mode": "eni"}})
    );
}
