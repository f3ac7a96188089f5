//! `check` and Flux health checks on workloads a bootstrap release owns
//! though no hook names them (docs/design.md#check): learnt from the chart
//! render when helm and the chart are at hand, inferred from names
//! otherwise, and never a failure when the render fails.

use serde_json::{Value, json};
use testkit::builder::{Output, Test};
use testkit::fake_helm;

/// `webhooks` (local chart, namespace `certs`, a hook on its main
/// Deployment) and `other` (local chart, namespace `other`, no health check
/// concerns it).
const RELEASES: &str = "name: webhooks
namespace: certs
chart: { path: ./webhooks }
values: { replicas: 2 }
hooks:
  postsync:
    - rollout: { kind: Deployment, name: webhooks }
---
name: other
namespace: other
chart: { path: ./other }
";

/// A Flux Kustomization health-checking four Deployments in `certs`: the
/// hooked one, one named by convention that the chart renders, one the
/// chart renders under another name, one named by convention that the
/// chart does not render.
const KS: &str = "apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: { name: certs, namespace: flux-system }
spec:
  interval: 10m
  path: ./apps
  prune: true
  sourceRef: { kind: GitRepository, name: flux-system }
  healthChecks:
    - { apiVersion: apps/v1, kind: Deployment, name: webhooks, namespace: certs }
    - { apiVersion: apps/v1, kind: Deployment, name: webhooks-webhook, namespace: certs }
    - { apiVersion: apps/v1, kind: Deployment, name: signer, namespace: certs }
    - { apiVersion: apps/v1, kind: Deployment, name: webhooks-extra, namespace: certs }
";

fn deployment(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}})
}

/// What the fake helm renders for `webhooks`: its three Deployments (no
/// namespace: they land in the release's) and a Service.
fn script() -> Value {
    json!({"certs/webhooks": {"manifests": [
        deployment("webhooks"), deployment("webhooks-webhook"), deployment("signer"),
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "webhooks-extra"}},
    ]}})
}

fn test(script: Value, helm: &str) -> Test {
    let test = Test::with_releases(RELEASES)
        .file(
            "releases/webhooks/Chart.yaml",
            "name: webhooks\nversion: 1.0.0\n",
        )
        .file("releases/other/Chart.yaml", "name: other\nversion: 1.0.0\n")
        .file(
            "gitops/clusters/infra/kustomization.yaml",
            "resources: [ks.yaml]\n",
        )
        .file("gitops/clusters/infra/ks.yaml", KS)
        .file("gitops/apps/kustomization.yaml", "resources: []\n")
        .file("script.json", &script.to_string());
    let script = test.path().join("script.json");
    let log = test.path().join("helm.log");
    test.env("FAKE_HELM_SCRIPT", script.to_str().unwrap())
        .env("FAKE_HELM_LOG", log.to_str().unwrap())
        .args(&[
            "check",
            "infra",
            "--flux-root",
            "gitops",
            "--flux-entrypoint",
            "clusters/infra",
            "--output",
            "json",
            "--helm",
            helm,
        ])
}

/// (severity, code, the workload named in the message or the release) of
/// the health-check findings and render notes.
fn findings(out: &Output) -> Vec<(String, String, String)> {
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            [
                "flux-healthcheck-on-bootstrap-workload",
                "chart-not-rendered",
            ]
            .contains(&f["code"].as_str().unwrap())
        })
        .map(|f| {
            let message = f["message"].as_str().unwrap();
            let how = if message.contains("its chart renders it") {
                "rendered"
            } else if message.contains("inferred from the names") {
                "inferred"
            } else if message.contains("could not be rendered") {
                "not rendered"
            } else {
                "hook"
            };
            let what = message
                .split("health-checks Deployment ")
                .nth(1)
                .and_then(|rest| rest.split(',').next())
                .unwrap_or(f["release"].as_str().unwrap());
            (
                f["severity"].as_str().unwrap().to_string(),
                how.to_string(),
                what.to_string(),
            )
        })
        .collect()
}

fn row(severity: &str, how: &str, what: &str) -> (String, String, String) {
    (severity.into(), how.into(), what.into())
}

/// The `helm template` calls the fake helm logged, by argv.
fn template_calls(test: &Test) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(test.path().join("helm.log")).unwrap_or_default();
    text.lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|entry| entry["argv"][0] == "template")
        .map(|entry| serde_json::from_value(entry["argv"].clone()).unwrap())
        .collect()
}

#[test]
fn the_chart_render_decides_which_health_checked_workloads_a_release_owns() {
    let test = test(script(), fake_helm());
    let out = test.run();
    assert_eq!(
        findings(&out),
        [
            row("warning", "rendered", "certs/signer"),
            row("warning", "hook", "certs/webhooks"),
            row("warning", "rendered", "certs/webhooks-webhook"),
        ],
        "{}",
        out.stdout
    );
    // One render: the release a health check concerns, with its install
    // values and without CRDs; `other` is not rendered.
    let calls = template_calls(&test);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(calls[0].contains(&"webhooks".to_string()), "{calls:?}");
    assert!(
        !calls[0].contains(&"--include-crds".to_string()),
        "{calls:?}"
    );
}

#[test]
fn without_helm_the_workloads_are_inferred_from_names() {
    let out = test(script(), "/nonexistent/helm").run();
    assert_eq!(
        findings(&out),
        [
            row("warning", "hook", "certs/webhooks"),
            row("warning", "inferred", "certs/webhooks-extra"),
            row("warning", "inferred", "certs/webhooks-webhook"),
        ],
        "{}",
        out.stdout
    );
}

#[test]
fn a_failing_render_falls_back_to_inference_with_an_info_note() {
    let script = json!({"certs/webhooks": {"template_fail": "execution error at (webhooks/templates/deployment.yaml:4:3): replicas must be odd"}});
    let out = test(script, fake_helm()).run();
    assert_eq!(
        findings(&out),
        [
            row("warning", "hook", "certs/webhooks"),
            row("warning", "inferred", "certs/webhooks-extra"),
            row("warning", "inferred", "certs/webhooks-webhook"),
            row("info", "not rendered", "certs/webhooks"),
        ],
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("replicas must be odd"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_tree_without_health_checks_renders_nothing() {
    let test = test(script(), fake_helm()).file(
        "gitops/clusters/infra/ks.yaml",
        &KS[..KS.find("  healthChecks:").unwrap()],
    );
    let out = test.run();
    assert_eq!(findings(&out), []);
    assert_eq!(template_calls(&test), Vec::<Vec<String>>::new());
}
