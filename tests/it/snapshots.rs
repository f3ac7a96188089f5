//! What a user reads, pinned whole as reviewed snapshots (insta;
//! `tests/it/snapshots/`): `check`'s text at each verbosity and its JSON,
//! `plan`'s lint block, `apply`'s refusals before any change, and a config
//! error, on two small config roots: the outage (a HelmRelease in the
//! GitOps tree managing the Cilium bootstrap installs) and a config whose
//! lints refuse it. A change of wording shows as a diff to review
//! (`cargo insta review`, or `INSTA_UPDATE=always` and `git diff`); CI fails
//! on any difference (insta writes nothing where `CI` is set).
//!
//! Nothing here reaches a cluster: every command ends before the
//! prerequisites (docs/design.md#phases-of-apply).

use testkit::builder::Test;

const CLUSTER: &str = "name: infra
context: admin@infra
flux:
  root: gitops
  entrypoint: clusters/infra
";

const RELEASES: &str = "name: cilium
namespace: kube-system
chart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }
values:
  k8sServiceHost: 10.0.0.1
  k8sServicePort: 6443
  kubeProxyReplacement: true
hooks:
  postsync:
    - rollout: { kind: DaemonSet, name: cilium }
---
name: coredns
namespace: kube-system
chart: { repo: https://coredns.github.io/helm, name: coredns, version: 1.44.3 }
needs: [cilium]
";

const SYNC: &str = "apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 1h
  path: ./apps
  prune: true
  targetNamespace: kube-system
  sourceRef:
    kind: GitRepository
    name: flux-system
";

/// The HelmRelease of the outage: Flux upgrades the Cilium bootstrap owns.
const HELMRELEASE: &str = "apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: cilium
spec:
  interval: 1h
  chart:
    spec:
      chart: cilium
      version: 1.18.2
      sourceRef: { kind: HelmRepository, name: cilium, namespace: flux-system }
";

const PODINFO: &str = "apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: podinfo
spec:
  interval: 1h
  chart:
    spec:
      chart: podinfo
      version: 6.7.1
      sourceRef: { kind: HelmRepository, name: podinfo, namespace: flux-system }
";

/// The outage: Flux's tree manages Cilium, which bootstrap installs.
fn outage() -> Test {
    Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file("releases/core.yaml", RELEASES)
        .file("gitops/clusters/infra/apps.yaml", SYNC)
        .file("gitops/apps/cilium/helmrelease.yaml", HELMRELEASE)
        .file("gitops/apps/podinfo/helmrelease.yaml", PODINFO)
}

/// No GitOps tree, and Cilium replacing kube-proxy with nothing to reach
/// the API server by: a lint error.
fn refused_by_lints() -> Test {
    Test::new()
        .file("clusters/infra/cluster.yaml", "name: infra\n")
        .file(
            "releases/core.yaml",
            &RELEASES.replace("  k8sServiceHost: 10.0.0.1\n  k8sServicePort: 6443\n", ""),
        )
}

/// Exit code, stdout and stderr as one text, the test's directory as
/// `[DIR]`, an event's time and elapsed milliseconds as `[TIME]`, `[MS]`.
fn shown(test: &Test, args: &[&str]) -> String {
    // No helm: what `plan` shows of charts must not depend on one on PATH.
    let out = test
        .command()
        .args(args)
        .env("BOOTSTRAP_HELM", "/nonexistent/helm")
        .output()
        .expect("run bootstrap");
    let out = testkit::builder::Output::from(out);
    let dir = test.path().to_string_lossy().into_owned();
    let real = std::fs::canonicalize(test.path())
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| dir.clone());
    let mask = |text: &str| {
        let text = text.replace(&real, "[DIR]").replace(&dir, "[DIR]");
        let text = masked(&text, "\"time\":\"", '"', "[TIME]");
        masked(&text, "\"elapsedMs\":", ',', "[MS]")
    };
    format!(
        "exit {}\n--- stdout\n{}--- stderr\n{}",
        out.code,
        mask(&out.stdout),
        mask(&out.stderr)
    )
}

#[test]
fn check_of_the_outage() {
    let test = outage();
    insta::assert_snapshot!("check_outage", shown(&test, &["check", "infra"]));
    insta::assert_snapshot!(
        "check_outage_quiet",
        shown(&test, &["check", "infra", "-q"])
    );
    insta::assert_snapshot!(
        "check_outage_verbose",
        shown(&test, &["check", "infra", "-v"])
    );
    insta::assert_snapshot!(
        "check_outage_json",
        shown(&test, &["check", "infra", "-o", "json"])
    );
}

#[test]
fn apply_of_the_outage_is_refused_before_any_change() {
    let test = outage();
    insta::assert_snapshot!("apply_outage", shown(&test, &["apply", "infra"]));
    insta::assert_snapshot!(
        "apply_outage_json",
        shown(&test, &["apply", "infra", "-o", "json"])
    );
}

#[test]
fn a_lint_error_in_check_plan_and_apply() {
    let test = refused_by_lints();
    insta::assert_snapshot!("check_lints", shown(&test, &["check", "infra"]));
    insta::assert_snapshot!(
        "check_lints_json",
        shown(&test, &["check", "infra", "-o", "json"])
    );
    insta::assert_snapshot!("plan_lints", shown(&test, &["plan", "infra"]));
    insta::assert_snapshot!("apply_lints", shown(&test, &["apply", "infra"]));
}

#[test]
fn a_config_error_names_file_line_release_and_fix() {
    let test = Test::new()
        .file("clusters/infra/cluster.yaml", "name: infra\n")
        .file(
            "releases/core.yaml",
            &RELEASES.replace("needs: [cilium]", "needs: [cilum]\nwiat: true"),
        );
    insta::assert_snapshot!("config_error", shown(&test, &["plan", "infra"]));
}

/// `text` with the value after each `key`, up to `end`, written `with`.
fn masked(text: &str, key: &str, end: char, with: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(key) {
        let value = at + key.len();
        out.push_str(&rest[..value]);
        out.push_str(with);
        rest = &rest[value..];
        rest = &rest[rest.find(end).unwrap_or(rest.len())..];
    }
    out.push_str(rest);
    out
}
