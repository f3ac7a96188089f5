//! `bootstrap template`: rendered values by default (no helm needed), the
//! chart's manifests with `--manifests` (through the fake helm), and secrets
//! redacted unless `--show-secrets`.

use serde_json::{Value, json};
use testkit::builder::{Output, Test, repo_root};
use testkit::fake_helm;

/// A release whose install values and CRD-phase values differ, as in the
/// shipped cert-manager definition.
const RELEASES: &str = "name: cert-manager
namespace: cert-manager
chart: { repo: https://charts.jetstack.io, name: cert-manager, version: v1.19.0 }
values:
  crds: { enabled: false }
  webhook: { apiToken: hunter2 }
crdValues:
  crds: { enabled: true }
";

/// What the fake helm renders for cert-manager: a Secret, a Deployment, and
/// (with `--include-crds`) one CRD.
fn script() -> Value {
    json!({
        "cert-manager": {
            "manifests": [
                {"apiVersion": "v1", "kind": "Secret",
                 "metadata": {"name": "cert-manager-webhook-ca", "namespace": "cert-manager"},
                 "data": {"tls.key": "c3VwZXItc2VjcmV0LWtleQ=="},
                 "stringData": {"token": "plain-text-token"}},
                {"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": "cert-manager", "namespace": "cert-manager"}}
            ],
            "crds": [
                {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                 "metadata": {"name": "certificates.cert-manager.io"},
                 "spec": {"group": "cert-manager.io", "names": {"kind": "Certificate"},
                          "versions": [{"name": "v1", "served": true, "storage": true}]}}
            ]
        }
    })
}

/// The config above, the fake helm and its script and log in the test dir.
fn with_fake_helm(args: &[&str]) -> Test {
    with_script(script(), args)
}

fn with_script(script: Value, args: &[&str]) -> Test {
    let test = Test::with_releases(RELEASES).file("script.json", &script.to_string());
    let script = test.path().join("script.json");
    let log = test.path().join("helm.log");
    test.env("FAKE_HELM_SCRIPT", script.to_str().unwrap())
        .env("FAKE_HELM_LOG", log.to_str().unwrap())
        .args(args)
        .args(&["--helm", fake_helm()])
}

/// The `helm template` calls the fake helm logged: (argv, first values file).
fn template_calls(test: &Test) -> Vec<(Vec<String>, Value)> {
    let text = std::fs::read_to_string(test.path().join("helm.log")).unwrap_or_default();
    text.lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|entry| entry["argv"][0] == "template")
        .map(|entry| {
            let argv = entry["argv"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string())
                .collect();
            (argv, entry["values_files"][0]["content"].clone())
        })
        .collect()
}

fn ok(out: &Output) {
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
}

/// The values document of `template CLUSTER RELEASE` text output.
fn values_of(stdout: &str) -> Value {
    let docs: Vec<Value> = serde_saphyr::from_multiple(stdout).unwrap();
    docs.into_iter().next().unwrap()
}

#[test]
fn shipped_config_renders_per_cluster_values_without_helm() {
    // A helm that does not exist: plain `template` must not need it.
    for (cluster, host, id) in [("infra", "10.25.11.10", 1), ("apps", "10.25.12.10", 2)] {
        let out = Test::new()
            .args(&["template", cluster, "cilium", "--dir"])
            .args(&[repo_root().to_str().unwrap()])
            .args(&["--helm", "/nonexistent/helm"])
            .run();
        ok(&out);
        assert!(
            out.stdout
                .starts_with("---\n# release: kube-system/cilium  chart: cilium 1.18.2\n"),
            "{}",
            out.stdout
        );
        let values = values_of(&out.stdout);
        assert_eq!(values["k8sServiceHost"], host, "{cluster}");
        assert_eq!(values["k8sServicePort"], 6443, "{cluster}");
        assert_eq!(values["cluster"], json!({"name": cluster, "id": id}));
        assert_eq!(values["kubeProxyReplacement"], true);
        assert!(!out.stdout.contains("# manifests"), "{}", out.stdout);
    }
}

#[test]
fn manifests_render_with_install_values_and_redact_secrets() {
    let test = with_fake_helm(&["template", "infra", "cert-manager", "--manifests"]);
    let out = test.run();
    ok(&out);
    assert!(
        out.stdout
            .contains("# manifests of cert-manager/cert-manager: 2 document(s)\n"),
        "{}",
        out.stdout
    );
    let docs: Vec<Value> = serde_saphyr::from_multiple(&out.stdout).unwrap();
    let secret = docs.iter().find(|d| d["kind"] == "Secret").unwrap();
    assert_eq!(secret["data"], json!({"tls.key": "<redacted>"}));
    assert_eq!(secret["stringData"], json!({"token": "<redacted>"}));
    assert!(docs.iter().any(|d| d["kind"] == "Deployment"));
    assert!(!docs.iter().any(|d| d["kind"] == "CustomResourceDefinition"));
    for leaked in ["c3VwZXItc2VjcmV0LWtleQ==", "plain-text-token", "hunter2"] {
        assert!(!out.stdout.contains(leaked), "{leaked} leaked");
    }

    // First the CRD phase (crdValues, CRDs included), for the API versions
    // its CRDs serve; then the install render with the install values (the
    // real ones, not the redacted view) and those API versions, as on the
    // cluster after the CRD phase.
    let calls = template_calls(&test);
    assert_eq!(calls.len(), 2, "{calls:?}");
    let (argv, values) = &calls[0];
    assert!(argv.contains(&"--include-crds".to_string()), "{argv:?}");
    assert_eq!(values["crds"]["enabled"], true);
    let (argv, values) = &calls[1];
    assert!(!argv.contains(&"--include-crds".to_string()), "{argv:?}");
    assert_eq!(values["crds"]["enabled"], false);
    assert_eq!(values["webhook"]["apiToken"], "hunter2");
    assert!(
        argv.join(" ").contains(
            "--api-versions cert-manager.io/v1 --api-versions cert-manager.io/v1/Certificate --"
        ),
        "{argv:?}"
    );
    assert!(
        out.stdout.starts_with(
            "# manifests rendered as on the cluster after the CRD phase: helm --api-versions \
             for the 1 API version it serves (cert-manager.io/v1) and their kinds\n"
        ),
        "{}",
        out.stdout
    );
}

#[test]
fn crds_flag_renders_the_crd_phase_with_crds_included() {
    let test = with_fake_helm(&["template", "infra", "cert-manager", "--manifests", "--crds"]);
    let out = test.run();
    ok(&out);
    let docs: Vec<Value> = serde_saphyr::from_multiple(&out.stdout).unwrap();
    let kinds: Vec<&str> = docs
        .iter()
        .skip(1)
        .filter_map(|d| d["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["CustomResourceDefinition", "Secret", "Deployment"]);

    let calls = template_calls(&test);
    let (argv, values) = &calls[0];
    assert!(argv.contains(&"--include-crds".to_string()), "{argv:?}");
    assert_eq!(values["crds"]["enabled"], true, "CRD-phase values");
}

#[test]
fn crds_rendered_by_templates_are_omitted_without_crds_flag() {
    // A chart whose templates (not crds/) render a CRD, as cert-manager's do
    // with `crds.enabled: true`: helm prints it even without --include-crds.
    let mut script = script();
    let crd = script["cert-manager"]["crds"][0].clone();
    script["cert-manager"]["manifests"]
        .as_array_mut()
        .unwrap()
        .push(crd);
    let out = with_script(
        script,
        &["template", "infra", "cert-manager", "--manifests"],
    )
    .run();
    ok(&out);
    assert!(
        out.stdout.contains(
            "# manifests of cert-manager/cert-manager: 2 document(s), \
             1 CustomResourceDefinition(s) omitted (--crds shows them)\n"
        ),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("certificates.cert-manager.io"));
}

#[test]
fn show_secrets_prints_secret_data_from_manifests() {
    let out = with_fake_helm(&[
        "template",
        "infra",
        "cert-manager",
        "--manifests",
        "--show-secrets",
    ])
    .run();
    ok(&out);
    assert!(out.stdout.contains("tls.key: c3VwZXItc2VjcmV0LWtleQ=="));
    assert!(out.stdout.contains("token: plain-text-token"));
}

#[test]
fn json_output_carries_the_manifests() {
    let out = with_fake_helm(&["template", "infra", "--manifests", "--output", "json"]).run();
    ok(&out);
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let release = &doc["releases"][0];
    assert_eq!(release["release"], "cert-manager/cert-manager");
    assert_eq!(release["crdsOmitted"], 0);
    let kinds: Vec<&str> = release["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["Secret", "Deployment"]);
    assert_eq!(release["manifests"][0]["data"]["tls.key"], "<redacted>");
    assert_eq!(
        doc["apiVersions"],
        json!(["cert-manager.io/v1", "cert-manager.io/v1/Certificate"])
    );
}

#[test]
fn manifests_without_helm_is_a_missing_prerequisite() {
    Test::with_releases(RELEASES)
        .args(&[
            "template",
            "infra",
            "--manifests",
            "--helm",
            "/nonexistent/helm",
        ])
        .invalid(
            "error: helm was not found at `/nonexistent/helm`; \
             install helm 3.13 or newer, or pass --helm PATH\n",
        );
}

#[test]
fn manifests_with_too_old_helm_is_a_missing_prerequisite() {
    let test =
        with_fake_helm(&["template", "infra", "--manifests"]).env("FAKE_HELM_VERSION", "v3.12.3");
    test.invalid(
        "error: helm v3.12.3 is too old; bootstrap needs helm 3.13 or newer (for --labels)\n",
    );
    assert!(template_calls(&test).is_empty(), "nothing rendered");
}

#[test]
fn unknown_release_suggests_the_closest_name() {
    Test::new()
        .args(&["template", "infra", "cilum", "--dir"])
        .args(&[repo_root().to_str().unwrap()])
        .invalid("error: `cilum` is not a release of cluster `infra`; did you mean `cilium`?\n");
}

#[test]
fn secret_looking_values_are_redacted_unless_show_secrets() {
    let redacted = Test::with_releases(RELEASES)
        .args(&["template", "infra", "cert-manager"])
        .run();
    ok(&redacted);
    assert_eq!(
        values_of(&redacted.stdout)["webhook"]["apiToken"],
        "<redacted>"
    );
    assert!(!redacted.stdout.contains("hunter2"));

    let shown = Test::with_releases(RELEASES)
        .args(&["template", "infra", "cert-manager", "--show-secrets"])
        .run();
    ok(&shown);
    assert_eq!(values_of(&shown.stdout)["webhook"]["apiToken"], "hunter2");
}

/// A bare `key` is a secret (a TLS key) except where it names something:
/// a toleration's taint, a selector's label, the entry a `secretKeyRef`
/// picks.
#[test]
fn a_key_that_names_a_taint_or_a_label_is_not_redacted() {
    let releases = "name: cilium
namespace: kube-system
chart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }
values:
  tolerations:
    - { key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule }
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions: [{ key: kubernetes.io/os, operator: In, values: [linux] }]
  env:
    - { name: TOKEN, valueFrom: { secretKeyRef: { name: api, key: token } } }
  tls: { key: PRIVATE-KEY-PEM, crt: CERT }
";
    let out = Test::with_releases(releases)
        .args(&["template", "infra", "cilium"])
        .run();
    ok(&out);
    let values = values_of(&out.stdout);
    assert_eq!(
        values["tolerations"][0]["key"],
        "node-role.kubernetes.io/control-plane"
    );
    assert_eq!(
        values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchExpressions"][0]["key"],
        "kubernetes.io/os"
    );
    assert_eq!(
        values["env"][0]["valueFrom"]["secretKeyRef"]["key"],
        "token"
    );
    assert_eq!(values["tls"]["key"], "<redacted>");
    assert!(!out.stdout.contains("PRIVATE-KEY-PEM"));
}

/// A CoreDNS release whose values file carries a Corefile server block.
const COREDNS: &str = "name: coredns
namespace: kube-system
chart: { repo: https://coredns.github.io/helm, name: coredns, version: 1.44.3 }
valuesFiles: [values/coredns.yaml]
";

#[test]
fn a_plain_values_file_is_read_as_it_is_braces_and_all() {
    // The `{{ .Zone }}` is CoreDNS's own (Go) template, for the chart.
    let corefile = "zoneFiles:\n  - filename: example.db\n    domain: example.com\n    contents: |\n      example.com. IN SOA sns.dns.icann.com. noc.dns.icann.com. 1 7200 3600 1209600 3600\n      authority \"{{ .Zone }} ns1.{{ .Zone }}\"\n";
    let out = Test::with_releases(COREDNS)
        .file("releases/values/coredns.yaml", corefile)
        .args(&["template", "infra", "coredns"])
        .run();
    ok(&out);
    let values = values_of(&out.stdout);
    assert_eq!(
        values["zoneFiles"][0]["contents"],
        "example.com. IN SOA sns.dns.icann.com. noc.dns.icann.com. 1 7200 3600 1209600 3600\nauthority \"{{ .Zone }} ns1.{{ .Zone }}\"\n"
    );
}

#[test]
fn only_hbs_values_files_are_templates() {
    let out = Test::with_releases(&COREDNS.replace("coredns.yaml]", "coredns.yaml.hbs]"))
        .file(
            "releases/values/coredns.yaml.hbs",
            "service:\n  name: {{cluster.name}}-{{release.name}}\n  zone: {{release.name}}.{{cluster.name}}.local\n",
        )
        .args(&["template", "infra", "coredns"])
        .run();
    ok(&out);
    let values = values_of(&out.stdout);
    assert_eq!(
        values["service"],
        json!({"name": "infra-coredns", "zone": "coredns.infra.local"})
    );
}

/// `-q` prints the values documents alone; `-v` says where each release's
/// values come from, in merge order (docs/design.md#global-flags).
#[test]
fn quiet_and_verbose_template() {
    let test = Test::with_releases(&format!("{RELEASES}valuesFiles: [values/cm.yaml]\n"))
        .file("releases/values/cm.yaml", "replicaCount: 2\n");
    let quiet = test.args(&["template", "infra", "-q"]).run();
    assert_eq!(
        quiet.stdout,
        "---\ncrds:\n  enabled: false\nwebhook:\n  apiToken: <redacted>\nreplicaCount: 2\n"
    );
    let test = Test::with_releases(&format!("{RELEASES}valuesFiles: [values/cm.yaml]\n"))
        .file("releases/values/cm.yaml", "replicaCount: 2\n");
    let verbose = test.args(&["template", "infra", "-v", "--crds"]).run();
    assert_eq!(
        verbose.stdout,
        "---\n# release: cert-manager/cert-manager  chart: cert-manager v1.19.0  (CRD-phase values)\n# values from: releases/core.yaml (values)\n# values from: releases/values/cm.yaml\n# values from: releases/core.yaml (crdValues)\ncrds:\n  enabled: true\nwebhook:\n  apiToken: <redacted>\nreplicaCount: 2\n"
    );
}

/// `plan -q` is the count line and the findings; `plan -v` adds each
/// release's values sources, digest, timeout and wait.
#[test]
fn quiet_and_verbose_plan() {
    let release = "name: cilium\nnamespace: kube-system\nchart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }\nvalues: { ipam: { mode: kubernetes } }\ntimeout: 5m\nwait: true\n";
    let quiet = Test::with_releases(release)
        .args(&["plan", "infra", "-q"])
        .run();
    assert_eq!(quiet.code, 0, "{}", quiet.stderr);
    assert_eq!(
        quiet.stdout,
        "Plan for cluster `infra`: 1 release (1 installed)\n"
    );
    let verbose = Test::with_releases(release)
        .args(&["plan", "infra", "-v"])
        .run();
    // SHA-256 of the canonical JSON {"ipam":{"mode":"kubernetes"}}.
    let tail: Vec<&str> = verbose.stdout.lines().rev().take(4).collect();
    assert_eq!(
        tail,
        [
            "      timeout:  5m, waits for every workload",
            "      digest:   sha256:cdc9efc23e547029ce972a1cecb8f49aa241d7746ae11f100ab3e8e9a63c4be6",
            "      values:   releases/core.yaml (values)",
            "   1. kube-system/cilium                       cilium 1.18.2                needs: -",
        ]
    );
}

/// `plan` never claims CRDs it has not seen: a local chart's `crds/` files
/// are counted; a repository chart's CRDs are known once apply renders it.
#[test]
fn plan_says_which_releases_carry_crds() {
    let releases = "name: local\nnamespace: x\nchart: { path: ./local }\n---\nname: cilium\nnamespace: kube-system\nchart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }\n";
    let out = Test::with_releases(releases)
        .file("releases/local/Chart.yaml", "name: local\nversion: 1.0.0\n")
        .file(
            "releases/local/crds/a.yaml",
            "kind: CustomResourceDefinition\n",
        )
        .file(
            "releases/local/crds/b.yaml",
            "kind: CustomResourceDefinition\n",
        )
        // No helm: nothing can be rendered here.
        .args(&["plan", "infra", "--helm", "/nonexistent/helm"])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let phase: Vec<&str> = out.stdout.lines().skip(3).take(2).collect();
    assert_eq!(
        phase,
        [
            "  kube-system/cilium                            cilium 1.18.2                    CRDs: rendered at apply; installed with --skip-crds",
            "  x/local                                       local 1.0.0                      2 CRD files in crds/, applied here; installed with --skip-crds",
        ]
    );
}

/// Three CRD-phase releases: two local charts (one carrying CRDs, one
/// carrying none) and a repository chart plan does not download.
const CRD_RELEASES: &str = "name: operator\nnamespace: ops\nchart: { path: ./operator }\ncrdValues: { crds: { enabled: true } }\n---
name: plain\nnamespace: ops\nchart: { path: ./plain }\n---
name: cilium\nnamespace: kube-system\nchart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }\n";

fn crd(name: &str) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": name}})
}

fn plan_with_charts(script: Value, args: &[&str]) -> Test {
    let test = Test::with_releases(CRD_RELEASES)
        .file(
            "releases/operator/Chart.yaml",
            "name: operator\nversion: 1.0.0\n",
        )
        .file("releases/plain/Chart.yaml", "name: plain\nversion: 1.0.0\n")
        .file("script.json", &script.to_string());
    let script = test.path().join("script.json");
    let log = test.path().join("helm.log");
    test.env("FAKE_HELM_SCRIPT", script.to_str().unwrap())
        .env("FAKE_HELM_LOG", log.to_str().unwrap())
        .args(&["plan", "infra", "--helm", fake_helm()])
        .args(args)
}

/// With helm and a local chart, plan renders the CRD phase and names the
/// CRDs each release carries (or says it carries none); a repository chart
/// is not downloaded and stays "rendered at apply".
#[test]
fn plan_names_the_crds_the_crd_phase_render_carries() {
    let script = json!({
        "operator": {"crds": [crd("widgets.example.com"), crd("gadgets.example.com"), crd("gizmos.example.com")],
                     "manifests": [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "operator"}}]},
        "plain": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain"}}]},
    });
    let test = plan_with_charts(script.clone(), &[]);
    let out = test.run();
    ok(&out);
    let phase: Vec<&str> = out.stdout.lines().skip(3).take(3).collect();
    assert_eq!(
        phase,
        [
            "  kube-system/cilium                            cilium 1.18.2                    CRDs: rendered at apply; installed with --skip-crds",
            "  ops/operator                                  operator 1.0.0                   CRDs: 3 (gadgets.example.com, gizmos.example.com, …); installed with --skip-crds",
            "  ops/plain                                     plain 1.0.0                      no CRDs",
        ],
        "{}",
        out.stdout
    );
    // The CRD-phase render: crdValues merged in, --include-crds; only the
    // local charts.
    let calls = template_calls(&test);
    assert_eq!(calls.len(), 2, "{calls:?}");
    for (argv, values) in &calls {
        assert!(argv.contains(&"--include-crds".to_string()), "{argv:?}");
        assert!(!argv.iter().any(|a| a.contains("cilium")), "{argv:?}");
        if argv.contains(&"operator".to_string()) {
            assert_eq!(values["crds"]["enabled"], true);
        }
    }

    let json = plan_with_charts(script, &["--output", "json"]).run();
    ok(&json);
    let doc: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        doc["crds"],
        json!([
            {"release": "kube-system/cilium", "carried": null,
             "notRendered": "the chart is not local: rendering it would download it"},
            {"release": "ops/operator", "carried": ["gadgets.example.com", "gizmos.example.com", "widgets.example.com"],
             "notRendered": null},
            {"release": "ops/plain", "carried": [], "notRendered": null},
        ])
    );
}

/// A failing render is no failure of plan: the release falls back to
/// "rendered at apply" with helm's reason under it, and the others render.
#[test]
fn plan_survives_a_failing_crd_render() {
    let script = json!({
        "operator": {"template_fail": "template: operator/templates/crds.yaml:3:7: executing \"x\": nil pointer"},
        "plain": {"crds": [crd("plains.example.com")]},
    });
    let out = plan_with_charts(script, &[]).run();
    ok(&out);
    let phase: Vec<&str> = out.stdout.lines().skip(4).take(3).collect();
    assert_eq!(
        phase[0],
        "  ops/operator                                  operator 1.0.0                   CRDs: rendered at apply; installed with --skip-crds"
    );
    assert_eq!(
        phase[1],
        "      not rendered here: helm template failed: Error: template: operator/templates/crds.yaml:3:7: executing \"x\": nil pointer"
    );
    assert_eq!(
        phase[2],
        "  ops/plain                                     plain 1.0.0                      CRDs: 1 (plains.example.com); installed with --skip-crds"
    );
}

/// No helm: plan still works, says nothing was rendered, and the JSON says why.
#[test]
fn plan_without_helm_keeps_rendered_at_apply() {
    let out = Test::with_releases(CRD_RELEASES)
        .file(
            "releases/operator/Chart.yaml",
            "name: operator\nversion: 1.0.0\n",
        )
        .file("releases/plain/Chart.yaml", "name: plain\nversion: 1.0.0\n")
        .args(&[
            "plan",
            "infra",
            "--helm",
            "/nonexistent/helm",
            "--output",
            "json",
        ])
        .run();
    ok(&out);
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    let why = "helm is not usable (helm was not found at `/nonexistent/helm`; install helm 3.13 or newer, or pass --helm PATH)";
    assert_eq!(
        doc["crds"][1],
        json!({"release": "ops/operator", "carried": null, "notRendered": why})
    );
    assert_eq!(
        doc["crds"][2],
        json!({"release": "ops/plain", "carried": null, "notRendered": why})
    );
}

/// A `from:` release with a HelmRelease whose values a YAML 1.1 reading
/// gets wrong: kustomize (go-yaml v3) reads them, and helm-controller gets
/// them as JSON, so `yes`/`on` stay text, `0644` is octal 420, a date is a
/// timestamp and `1e3` the integer 1000. `template` shows what helm will
/// get, as Flux would give it.
#[test]
fn from_values_are_read_as_kustomize_and_helm_controller_read_them() {
    let helm_release = |values: &str| {
        format!(
            "apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata: {{name: repo, namespace: apps}}
spec: {{url: https://example.com/charts, interval: 1h}}
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {{name: app, namespace: apps}}
spec:
  interval: 1h
  chart:
    spec: {{chart: app, version: 1.0.0, sourceRef: {{kind: HelmRepository, name: repo}}}}
  values:
{values}"
        )
    };
    let test = |values: &str| {
        Test::new()
            .file(
                "clusters/dev/cluster.yaml",
                "name: dev\nflux: {root: gitops, entrypoint: apps}\n",
            )
            .file(
                "releases/r.yaml",
                "name: app\nnamespace: apps\nfrom: { helmRelease: apps/hr.yaml }\nownership: handover\n",
            )
            .file("gitops/apps/hr.yaml", &helm_release(values))
    };
    let out = test(
        "    enabled: yes\n    tls: on\n    defaultMode: 0644\n    since: 2024-01-01\n    limit: 1e3\n    quoted: 'yes'\n    really: true\n",
    )
    .args(&["template", "dev", "-o", "json"])
    .run();
    ok(&out);
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(
        doc["releases"][0]["values"],
        json!({"enabled": "yes", "tls": "on", "defaultMode": 420,
               "since": "2024-01-01T00:00:00Z", "limit": 1000, "quoted": "yes", "really": true})
    );

    // A value JSON cannot carry: Flux cannot build the file, and the error
    // says so where it says the HelmRelease is not reached.
    let out = test("    ratio: .inf\n").args(&["template", "dev"]).run();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("no HelmRelease in `apps/hr.yaml` is reached")
            && out.stderr.contains("Caused by:")
            && out.stderr.contains("`.inf` is a float JSON cannot carry"),
        "{}",
        out.stderr
    );
}
