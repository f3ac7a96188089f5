//! `defaults:` in cluster.yaml and `releases/defaults.yaml`
//! (docs/design.md#defaults): merged under each release, the release's own
//! keys first; helm flags per helm version, refused before any change when
//! the detected helm lacks one.

use serde_json::json;
use testkit::builder::Test;
use testkit::cluster::{CLUSTER, Cluster, RELEASES, daemonset};

/// A cluster whose fake helm rolls cilium's DaemonSet out.
fn cluster() -> Cluster {
    let cluster = Cluster::start();
    cluster.script(json!({
        "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
    }));
    cluster
}

/// cilium sets `cleanupOnFail: false` and its own timeout; the others take
/// the defaults.
fn config() -> Test {
    let releases = RELEASES.replace(
        "values: { k8sServiceHost: 10.0.0.1 }\n",
        "values: { k8sServiceHost: 10.0.0.1 }\ntimeout: 7m\nhelm: { cleanupOnFail: false }\n",
    );
    Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            &format!(
                "{CLUSTER}defaults:\n  timeout: 3m\n  helm:\n    cleanupOnFail: true\n    serverSide: true\n    forceConflicts: true\n"
            ),
        )
        .file(
            "releases/defaults.yaml",
            "timeout: 9m\ncrds: chart\nhelm: { historyMax: 5, cleanupOnFail: false }\n",
        )
        .file("releases/core.yaml", &releases)
}

#[test]
fn defaults_are_merged_under_each_release_and_become_helm_flags() {
    let cluster = cluster();
    let out = cluster.run(&config(), &["apply", "infra"]);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    let installs = cluster.installs();
    assert_eq!(installs.len(), 4);
    for install in &installs {
        let name = install.release().unwrap();
        assert!(install.has("--force-conflicts"), "{name}");
        assert!(install.has("--server-side=true"), "{name}");
        // releases/defaults.yaml is under cluster.yaml's defaults.
        assert_eq!(install.flag("--history-max"), Some("5"), "{name}");
        // crds: chart from releases/defaults.yaml: helm installs the CRDs.
        assert!(!install.has("--skip-crds"), "{name}");
        // The release's own key wins over both.
        assert_eq!(install.has("--cleanup-on-fail"), name != "cilium", "{name}");
        let timeout = install.flag("--timeout").unwrap();
        let secs: u64 = timeout.trim_end_matches('s').parse().unwrap();
        let limit = if name == "cilium" { 420 } else { 180 };
        assert!(secs <= limit && secs > limit - 30, "{name}: {timeout}");
    }
}

#[test]
fn a_helm_4_flag_on_helm_3_is_refused_before_any_change() {
    let cluster = cluster();
    let out = cluster
        .command(&config(), &["apply", "infra"])
        .env("FAKE_HELM_VERSION", "v3.19.0")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: clusters/infra/cluster.yaml: `helm.forceConflicts` (for kube-system/cilium, kube-system/coredns, cert-manager/cert-manager, kube-system/spegel) needs helm's `--force-conflicts`, which helm v3.19.0 does not have; remove it, or run with a helm that has it (Helm 4: --helm PATH)\n\
         error: clusters/infra/cluster.yaml: `helm.serverSide` (for kube-system/cilium, kube-system/coredns, cert-manager/cert-manager, kube-system/spegel) needs helm's `--server-side`, which helm v3.19.0 does not have; remove it, or run with a helm that has it (Helm 4: --helm PATH)\n\
         error: 2 problems in the config; nothing was changed\n"
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(cluster.installs().is_empty());
    assert!(cluster.api.mutations().is_empty());
}

#[test]
fn helm_3_gets_its_own_flag_names() {
    let test = Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            &format!(
                "{CLUSTER}defaults:\n  helm: {{ force: true, disableOpenAPIValidation: true }}\n"
            ),
        )
        .file("releases/core.yaml", RELEASES);
    for (version, force) in [("v3.19.0", "--force"), ("v4.2.4", "--force-replace")] {
        let cluster = cluster();
        let out = cluster
            .command(&test, &["apply", "infra", "--only", "cilium"])
            .env("FAKE_HELM_VERSION", version)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let last = cluster.installs().pop().unwrap();
        assert!(last.has(force), "{version}: {:?}", last.argv);
        assert!(last.has("--disable-openapi-validation"));
    }
}

#[test]
fn defaults_are_validated_like_release_keys() {
    Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            "name: infra\ndefaults:\n  helm: { cleanUpOnFail: true }\n",
        )
        .file("releases/core.yaml", RELEASES)
        .args(&["plan", "infra"])
        .invalid("error: clusters/infra/cluster.yaml:3:11: unknown key `cleanUpOnFail`; did you mean `cleanupOnFail`?\n");
    Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            "name: infra\ndefaults:\n  timeout: soon\n",
        )
        .file("releases/core.yaml", RELEASES)
        .args(&["plan", "infra"])
        .invalid("error: clusters/infra/cluster.yaml:3:12: defaults timeout `soon` is not a duration (expected number at 0); write it like `90s`, `5m` or `1h30m`\n");
    Test::new()
        .file("clusters/infra/cluster.yaml", "name: infra\n")
        .file("releases/defaults.yaml", "timeout: soon\n")
        .file("releases/core.yaml", RELEASES)
        .args(&["plan", "infra"])
        .invalid("error: releases/defaults.yaml:1:10: defaults timeout `soon` is not a duration (expected number at 0); write it like `90s`, `5m` or `1h30m`\n");
    Test::new()
        .file("clusters/infra/cluster.yaml", "name: infra\n")
        .file("releases/defaults.yaml", RELEASES)
        .args(&["plan", "infra"])
        .invalid("error: releases/defaults.yaml:1:1: unknown key `name` (allowed: timeout, wait, crds, helm); releases/defaults.yaml holds the defaults of every release, not releases: move the releases to another file\n");
}
