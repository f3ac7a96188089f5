//! The lints (docs/design.md#lints) as a user meets them: through `check`,
//! `plan` and `apply`'s preflight on a config tree, with exit codes, text,
//! JSON, file:line and `lints.ignore`.

use serde_json::Value;
use testkit::builder::{Test, repo_root};

const CILIUM_KPR: &str = "name: cilium
namespace: kube-system
chart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }
values:
  ipam:
    mode: kubernetes
  kubeProxyReplacement: true
";

/// Runs `args` on the tree of `t` (which stays usable).
fn run(t: &Test, args: &[&str]) -> testkit::builder::Output {
    let out = t.command().args(args).output().unwrap();
    testkit::builder::Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn json(out: &testkit::builder::Output) -> Value {
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", out.stdout))
}

/// The lint findings of a `check` or `plan` JSON document.
fn lints(doc: &Value) -> Vec<Value> {
    let list = doc.get("lints").or(doc.get("findings")).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .filter(|f| f.get("fix").is_some())
        .cloned()
        .collect()
}

fn codes(doc: &Value) -> Vec<String> {
    lints(doc)
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn kpr_without_api_host_through_check_text_and_json() {
    let t = Test::with_releases(CILIUM_KPR);
    let out = t.command().args(["check", "infra"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.starts_with("error[cilium-kpr-without-api-host]: Cilium replaces kube-proxy (`kubeProxyReplacement: true`) but `k8sServiceHost` and `k8sServicePort` are not set"),
        "{stdout}"
    );
    assert!(stdout.contains("\n  at: releases/core.yaml:7\n  release: kube-system/cilium\n  fix: set `k8sServiceHost` and `k8sServicePort`"), "{stdout}");
    assert!(
        stdout.contains("lints infra: 1 error, 0 warnings\n"),
        "{stdout}"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: check found 1 error in cluster `infra`\n"
    );

    let out = t.args(&["check", "infra", "--output", "json"]).run();
    assert_eq!(out.code, 1);
    let doc = json(&out);
    let f = &lints(&doc)[0];
    assert_eq!(f["severity"], "error");
    assert_eq!(f["code"], "cilium-kpr-without-api-host");
    assert_eq!(f["release"], "kube-system/cilium");
    assert_eq!(f["file"], "releases/core.yaml");
    assert_eq!(f["line"], 7);
    assert_eq!(f["object"], Value::Null);
    assert_eq!(f["ignored"], false);
    // The check document keeps its shape: the info finding is still there.
    assert_eq!(
        doc["findings"].as_array().unwrap().last().unwrap()["code"],
        "gitops-tree-not-scanned"
    );
}

#[test]
fn the_fix_passes_and_the_location_follows_the_winning_source() {
    // Host and port from cluster.yaml through an override values file; the
    // kubeProxyReplacement line is the one in the override, which wins.
    let t = Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            "name: infra\noverrides:\n  cilium:\n    valuesFiles: [cilium.yaml]\n",
        )
        .file(
            "clusters/infra/cilium.yaml",
            "# per cluster\nk8sServiceHost: 10.0.0.1\nk8sServicePort: 6443\n",
        )
        .file("releases/core.yaml", CILIUM_KPR);
    let out = t.args(&["plan", "infra", "--output", "json"]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(json(&out)["lints"], serde_json::json!([]));

    let t = Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            "name: infra\noverrides:\n  cilium:\n    valuesFiles: [cilium.yaml]\n",
        )
        .file(
            "clusters/infra/cilium.yaml",
            "\n\nkubeProxyReplacement: \"true\"\n",
        )
        .file("releases/core.yaml", CILIUM_KPR);
    let out = t.args(&["plan", "infra", "--output", "json"]).run();
    assert_eq!(out.code, 1);
    let f = &lints(&json(&out))[0];
    assert_eq!(f["file"], "clusters/infra/cilium.yaml");
    assert_eq!(f["line"], 3);
}

#[test]
fn kpr_partial_through_plan() {
    let t = Test::with_releases(
        "name: cilium
namespace: kube-system
chart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }
values:
  kubeProxyReplacement: partial
  k8sServiceHost: 10.0.0.1
  k8sServicePort: 6443
",
    );
    let out = t.args(&["plan", "infra"]).run();
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stdout.starts_with("Plan for cluster `infra`"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("error[cilium-kpr-partial]: `kubeProxyReplacement: partial` does not exist in Cilium 1.18"), "{}", out.stdout);
    assert!(
        out.stdout.contains("  at: releases/core.yaml:5\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("  fix: write `kubeProxyReplacement: true` and set"),
        "{}",
        out.stdout
    );
    assert_eq!(
        out.stderr,
        "error: plan found error-level findings: 1 in cluster `infra`\n"
    );
}

#[test]
fn crd_values_inverted_through_check() {
    let t = Test::with_releases(
        "name: cert-manager
namespace: cert-manager
chart: { repo: https://charts.jetstack.io, name: cert-manager, version: v1.19.0 }
crds: bootstrap
values:
  crds: { enabled: true }
",
    );
    let out = t.args(&["check", "infra", "--output", "json"]).run();
    assert_eq!(out.code, 1);
    let f = &lints(&json(&out))[0];
    assert_eq!(f["code"], "crd-values-inverted");
    assert_eq!(f["line"], 6);
    assert_eq!(
        f["fix"],
        "set `crds.enabled: false` in `values` and `crds.enabled: true` in `crdValues` (the CRD-phase render only)"
    );
}

#[test]
fn lints_ignore_lets_it_through_and_says_so() {
    let t = Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            "name: infra\nlints:\n  ignore: [cilium-kpr-without-api-host]\n",
        )
        .file("releases/core.yaml", CILIUM_KPR);
    let out = t.command().args(["check", "infra"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout
            .starts_with("error[cilium-kpr-without-api-host] (ignored: listed in lints.ignore): ")
    );
    assert!(stdout.contains(
        "lints infra: 0 errors, 0 warnings; ignored by lints.ignore: cilium-kpr-without-api-host\n"
    ));
    let out = t.args(&["check", "infra", "--output", "json"]).run();
    assert_eq!(lints(&json(&out))[0]["ignored"], true);
}

#[test]
fn an_unknown_code_in_lints_ignore_is_invalid() {
    Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            "name: infra\nlints:\n  ignore: [cilium-kpr-without-api-hots]\n",
        )
        .file("releases/core.yaml", CILIUM_KPR)
        .args(&["check", "infra"])
        .invalid("error: clusters/infra/cluster.yaml:3:12: `lints.ignore` lists `cilium-kpr-without-api-hots`, which is not a lint code nor an error code of the Flux scan; did you mean `cilium-kpr-without-api-host`?\n");
}

#[test]
fn schema_shows_lints_ignore() {
    let out = Test::new().args(&["schema", "cluster"]).run();
    let schema: Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(schema["properties"]["lints"].is_object(), "{}", out.stdout);
    assert!(out.stdout.contains("\"ignore\""));
}

/// apply runs the lints before it even looks for helm or a kubeconfig: the
/// refusal is exit 1 with the findings, and nothing else happened.
#[test]
fn apply_refuses_before_contacting_anything() {
    let t = Test::with_releases(CILIUM_KPR)
        .env("BOOTSTRAP_HELM", "/nonexistent/helm")
        .args(&["apply", "infra"]);
    let out = t.run();
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.starts_with(
        "error: apply of cluster `infra` refused: 1 error-level lint finding; nothing was changed. Fix it, or list the code in `lints.ignore` in clusters/infra/cluster.yaml to go ahead anyway\n\nerror[cilium-kpr-without-api-host]: "
    ), "{}", out.stderr);
    assert!(
        out.stderr.contains("  at: releases/core.yaml:7\n"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stdout, "");

    // Ignored, apply goes on to its prerequisites (here: no helm, exit 2).
    let t = Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            "name: infra\nlints: { ignore: [cilium-kpr-without-api-host] }\n",
        )
        .file("releases/core.yaml", CILIUM_KPR)
        .env("BOOTSTRAP_HELM", "/nonexistent/helm")
        .args(&["apply", "infra"]);
    let out = t.run();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(!out.stderr.contains("lint"), "{}", out.stderr);
}

const MESH_RELEASE: &str = "name: cilium
namespace: kube-system
chart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }
valuesFiles: [values/cilium.yaml.hbs]
";

const MESH_VALUES: &str = "cluster:
  name: \"{{cluster.name}}\"
  id: {{cluster.values.id}}
ipv4NativeRoutingCIDR: \"{{cluster.values.cidr}}\"
clustermesh:
  apiserver:
    service:
      annotations:
        io.cilium/lb-ipam-ips: \"{{cluster.values.ip}}\"
";

fn mesh(infra: (&str, &str, &str), apps: (&str, &str, &str)) -> Test {
    let cluster = |name: &str, (id, cidr, ip): (&str, &str, &str)| {
        format!("name: {name}\nvalues:\n  id: {id}\n  cidr: {cidr}\n  ip: {ip}\n")
    };
    Test::new()
        .file("clusters/infra/cluster.yaml", &cluster("infra", infra))
        .file("clusters/apps/cluster.yaml", &cluster("apps", apps))
        .file("releases/core.yaml", MESH_RELEASE)
        .file("releases/values/cilium.yaml.hbs", MESH_VALUES)
}

#[test]
fn cross_cluster_rules_through_check_all() {
    let good = mesh(
        ("1", "10.244.0.0/16", "10.25.11.100"),
        ("2", "10.246.0.0/16", "10.25.12.100"),
    );
    let out = good.args(&["check", "--all", "--output", "json"]).run();
    assert_eq!(out.code, 0, "{}", out.stdout);
    let doc = json(&out);
    let clusters: Vec<&str> = doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cluster"].as_str().unwrap())
        .collect();
    assert_eq!(clusters, ["apps", "infra"]);

    let bad = mesh(
        ("1", "10.244.0.0/16", "10.25.11.100"),
        ("1", "10.244.128.0/17", "10.25.11.100"),
    );
    let out = run(&bad, &["check", "--all", "--output", "json"]);
    assert_eq!(out.code, 1);
    let doc = json(&out);
    for cluster in doc["clusters"].as_array().unwrap() {
        assert_eq!(
            codes(cluster),
            [
                "cilium-cluster-id-duplicate",
                "cilium-lb-ipam-ip-reused",
                "cilium-native-routing-cidr-overlap"
            ],
            "{cluster}"
        );
        let id = &lints(cluster)[0];
        assert_eq!(id["file"], "releases/values/cilium.yaml.hbs");
        assert_eq!(id["line"], 3);
    }
    // One cluster named: the other clusters are still looked at.
    let out = run(&bad, &["plan", "apps", "--output", "json"]);
    assert_eq!(out.code, 1);
    assert_eq!(codes(&json(&out)).len(), 3);
    // The same through text: both clusters, then one error line per cluster.
    let out = run(&bad, &["check", "--all"]);
    assert_eq!(
        out.stderr,
        "error: check found 3 errors in cluster `apps`; check found 3 errors in cluster `infra`\n"
    );
}

#[test]
fn cluster_id_range_and_name() {
    let t = mesh(
        ("300", "10.244.0.0/16", "10.25.11.100"),
        ("2", "10.246.0.0/16", "10.25.12.100"),
    )
    .file(
        "releases/values/cilium.yaml.hbs",
        &MESH_VALUES.replace("\"{{cluster.name}}\"", "default"),
    );
    let out = t.args(&["check", "--all", "--output", "json"]).run();
    assert_eq!(out.code, 1);
    let doc = json(&out);
    let apps = &doc["clusters"][0];
    let infra = &doc["clusters"][1];
    assert_eq!(codes(apps), ["cilium-cluster-name-mismatch"]);
    assert_eq!(
        codes(infra),
        ["cilium-cluster-id-invalid", "cilium-cluster-name-mismatch"]
    );
    assert!(
        lints(apps)[0]["message"]
            .as_str()
            .unwrap()
            .contains("the same as on `infra`")
    );
    assert_eq!(lints(apps)[0]["line"], 2);
}

#[test]
fn the_shipped_config_and_the_kind_example_pass_and_its_broken_variant_fails() {
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_bootstrap"))
            .current_dir(repo_root())
            .args(args)
            .env_remove("KUBECONFIG")
            .output()
            .unwrap()
    };
    for args in [
        &["check", "--all", "--output", "json"][..],
        &["plan", "--all", "--output", "json"][..],
        &[
            "check",
            "kind",
            "--dir",
            "examples/kind",
            "--output",
            "json",
        ][..],
    ] {
        let out = run(args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            !text.contains("\"fix\""),
            "{args:?}: a lint finding: {text}"
        );
    }
    let out = run(&[
        "check",
        "kind",
        "--dir",
        "examples/kind/broken",
        "--output",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(codes(&doc), ["cilium-kpr-without-api-host"]);
    assert_eq!(
        lints(&doc)[0]["file"],
        "examples/kind/broken/releases/core.yaml"
    );
    assert_eq!(lints(&doc)[0]["line"], 15);
}

/// With the code in `lints.ignore`, a real run goes ahead against the
/// loopback API server and the fake helm, and says which lint it ignored.
#[test]
fn apply_with_an_ignored_lint_runs_and_warns() {
    let cluster = testkit::cluster::Cluster::start();
    cluster.script(serde_json::json!({
        "kube-system/cilium": {"apply_manifests": true, "manifests": [testkit::cluster::daemonset("kube-system", "cilium")]},
    }));
    let t = Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            "name: infra\ncontext: admin@infra\nlints: { ignore: [cilium-kpr-without-api-host] }\n",
        )
        .file("releases/core.yaml", CILIUM_KPR);
    let out = cluster.run(&t, &["apply", "infra", "--output", "json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let warning = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["event"] == "warning")
        .unwrap_or_else(|| panic!("no warning event: {}", out.stdout));
    let message = warning["message"].as_str().unwrap();
    assert!(
        message.starts_with("lint cilium-kpr-without-api-host ignored (listed in lints.ignore): Cilium replaces kube-proxy"),
        "{message}"
    );
    assert!(message.ends_with("(releases/core.yaml:7)"), "{message}");
}

/// A real chart from ../shared/charts (or BOOTSTRAP_TEST_CHARTS), used in
/// place (never copied); build.rs sets `cfg(shared_charts)` where they are.
fn shared_chart(name: &str) -> String {
    let Some(charts) = option_env!("BOOTSTRAP_TEST_CHARTS_DIR") else {
        panic!(
            "needs the real charts: ../shared/charts beside the repository, BOOTSTRAP_TEST_CHARTS=DIR, or scripts/pull-test-charts"
        )
    };
    let dir = std::path::Path::new(charts).join(name);
    assert!(
        dir.join("Chart.yaml").is_file(),
        "{} missing",
        dir.display()
    );
    std::fs::canonicalize(dir)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
#[cfg_attr(
    not(shared_charts),
    ignore = "needs the real charts: ../shared/charts beside the repository, BOOTSTRAP_TEST_CHARTS=DIR (unpacked charts by name), or scripts/pull-test-charts"
)]
fn values_unknown_key_is_a_warning_with_the_line_of_the_typo() {
    let t = Test::with_releases(&format!(
        "name: cert-manager
namespace: cert-manager
chart: {{ path: {} }}
crds: bootstrap
values:
  crds:
    enabled: false
  replicaCont: 2
",
        shared_chart("cert-manager")
    ));
    let out = run(&t, &["check", "infra"]);
    // Warnings do not fail check.
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("warning[values-unknown-key]: values key `replicaCont` is not one chart `cert-manager` knows; did you mean `replicaCount`?"), "{}", out.stdout);
    assert!(
        out.stdout.contains("  at: releases/core.yaml:8\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("lints infra: 0 errors, 1 warning\n"),
        "{}",
        out.stdout
    );
}

#[test]
fn needs_missing_for_kind_names_the_provider() {
    let releases = "name: kube-prometheus-stack
namespace: observability
chart: { oci: oci://x/kube-prometheus-stack, version: 1.0.0 }
crds: chart
---
name: external-secrets
namespace: external-secrets
chart: { oci: oci://x/external-secrets, version: 1.0.0 }
values:
  serviceMonitor:
    enabled: true
";
    let t = Test::with_releases(releases);
    let out = run(&t, &["plan", "infra", "--output", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let f = &lints(&json(&out))[0];
    assert_eq!(f["severity"], "warning");
    assert_eq!(f["code"], "needs-missing-for-kind");
    assert_eq!(f["release"], "external-secrets/external-secrets");
    assert_eq!(f["line"], 11);
    assert_eq!(
        f["fix"],
        "add `observability/kube-prometheus-stack` to `needs`, or give it `crds: bootstrap`"
    );
    let fixed = Test::with_releases(
        &releases.replace("values:\n", "needs: [kube-prometheus-stack]\nvalues:\n"),
    );
    let out = run(&fixed, &["plan", "infra", "--output", "json"]);
    assert_eq!(json(&out)["lints"], serde_json::json!([]));
}

/// Cilium replacing kube-proxy, with an API host that refuses connections.
fn live_config(cidr: &str) -> Test {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            "name: infra\ncontext: admin@infra\n",
        )
        .file(
            "releases/core.yaml",
            &format!(
                "name: cilium
namespace: kube-system
chart: {{ repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }}
values:
  kubeProxyReplacement: true
  k8sServiceHost: 127.0.0.1
  k8sServicePort: {closed}
  ipv4NativeRoutingCIDR: {cidr}
"
            ),
        )
}

fn node(name: &str, cidr: &str) -> Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name},
        "spec": {"podCIDR": cidr, "podCIDRs": [cidr]}
    })
}

/// The live rules through apply's preflight against the loopback API with
/// Nodes: a Node outside the native-routing CIDR refuses the run before the
/// CRD phase; kube-proxy and an unreachable API host are warnings.
#[test]
fn live_rules_in_apply_preflight() {
    let cluster = testkit::cluster::Cluster::start();
    cluster.script(serde_json::json!({
        "kube-system/cilium": {"apply_manifests": true, "manifests": [testkit::cluster::daemonset("kube-system", "cilium")]},
    }));
    cluster.api.insert(node("node-1", "10.244.1.0/24"));
    cluster.api.insert(node("node-2", "10.99.2.0/24"));
    cluster
        .api
        .insert(testkit::cluster::daemonset("kube-system", "kube-proxy"));

    let out = cluster.run(&live_config("10.244.0.0/16"), &["apply", "infra"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("error[native-routing-cidr-mismatch]: Nodes' pod CIDRs lie outside Cilium's `ipv4NativeRoutingCIDR: 10.244.0.0/16`: node-2 (10.99.2.0/24)"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("  at: releases/core.yaml:8\n"),
        "{}",
        out.stderr
    );
    assert!(
        cluster.installs().is_empty(),
        "nothing installed after a refusal"
    );

    let out = cluster.run(
        &live_config("10.0.0.0/8"),
        &["apply", "infra", "--output", "json"],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let warnings: Vec<String> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "warning")
        .map(|e| e["message"].as_str().unwrap().to_string())
        .collect();
    assert!(
        warnings.iter().any(|w| w
            .starts_with("lint api-host-unreachable: `k8sServiceHost:k8sServicePort` (127.0.0.1:")
            && w.contains("does not answer TLS from where bootstrap runs (cannot connect")),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|w| w.starts_with(
            "lint kube-proxy-present-with-kpr: DaemonSet kube-system/kube-proxy exists"
        )),
        "{warnings:?}"
    );
}

/// `status` runs the live rules too, read-only, and exits 1 on an error
/// `apply` would refuse on.
#[test]
fn live_rules_in_status() {
    let cluster = testkit::cluster::Cluster::start();
    cluster.api.insert(node("node-1", "10.99.1.0/24"));
    let out = cluster.run(
        &live_config("10.244.0.0/16"),
        &["status", "infra", "--output", "json"],
    );
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let doc = json(&out);
    assert_eq!(
        codes(&doc),
        ["native-routing-cidr-mismatch", "api-host-unreachable"]
    );
    assert_eq!(
        out.stderr,
        "error: 1 error-level live lint finding in cluster `infra`: `bootstrap apply` would refuse; see above\n"
    );
    let out = cluster.run(&live_config("10.0.0.0/8"), &["status", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("\nlive lints:\n\nwarning[api-host-unreachable]: "),
        "{}",
        out.stdout
    );
}

#[test]
fn lb_ipam_pools_of_the_gitops_trees_count_too() {
    let pool = |name: &str, block: &str| {
        format!(
            "apiVersion: cilium.io/v2alpha1\nkind: CiliumLoadBalancerIPPool\nmetadata:\n  name: {name}\nspec:\n  blocks:\n    - {block}\n"
        )
    };
    let flux = |name: &str| format!("flux:\n  root: .\n  entrypoint: gitops/{name}\n");
    let t = mesh(
        ("1", "10.244.0.0/16", "10.25.11.100"),
        ("2", "10.246.0.0/16", "10.25.11.50"),
    );
    let add = |t: Test, name: &str| {
        let cluster =
            std::fs::read_to_string(t.path().join(format!("clusters/{name}/cluster.yaml")))
                .unwrap();
        t.file(
            &format!("clusters/{name}/cluster.yaml"),
            &format!("{cluster}{}", flux(name)),
        )
    };
    let t = add(add(t, "infra"), "apps")
        .file(
            "gitops/infra/pool.yaml",
            &pool("infra-pool", "cidr: 10.25.11.0/24"),
        )
        .file(
            "gitops/apps/pool.yaml",
            &pool("apps-pool", "{ start: 10.25.11.200, stop: 10.25.11.250 }"),
        );
    let out = run(&t, &["check", "--all", "--output", "json"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let doc = json(&out);
    let (apps, infra) = (&doc["clusters"][0], &doc["clusters"][1]);
    assert_eq!(
        codes(apps),
        ["cilium-lb-ipam-ip-reused", "cilium-lb-ipam-ip-reused"]
    );
    assert_eq!(codes(infra), ["cilium-lb-ipam-ip-reused"]);
    let messages: Vec<String> = lints(apps)
        .iter()
        .map(|f| f["message"].as_str().unwrap().to_string())
        .collect();
    assert!(messages.iter().any(|m| m.starts_with("LB-IPAM address 10.25.11.50 (`io.cilium/lb-ipam-ips` at `clustermesh.apiserver.service.annotations.io.cilium/lb-ipam-ips`) of cluster `apps` is also used by cluster `infra` (in its pool infra-pool 10.25.11.0/24)")), "{messages:?}");
    let pool_finding = &lints(infra)[0];
    assert_eq!(pool_finding["release"], Value::Null);
    assert_eq!(pool_finding["file"], "gitops/infra/pool.yaml");
    assert_eq!(pool_finding["line"], 7);
    assert!(
        pool_finding["message"]
            .as_str()
            .unwrap()
            .contains("overlaps apps-pool 10.25.11.200-10.25.11.250 of `apps`"),
        "{}",
        pool_finding["message"]
    );
}

/// Every error the Flux scan can report is one `lints.ignore` takes per
/// release (`flux::findings::IGNORABLE`), and docs/design.md's row of
/// `lints.ignore` names each: the docs' table of finding codes is the
/// registry read here.
#[test]
fn every_error_code_of_the_flux_scan_is_ignorable_and_documented_so() {
    let design = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/design.md"),
    )
    .unwrap();
    let section = &design[design.find("### Finding codes").unwrap()..];
    let table = &section[section.find("\n| code | severity").unwrap()..];
    let table = &table[..table.find("\n\n").unwrap_or(table.len())];
    let errors: Vec<&str> = table
        .lines()
        .filter_map(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let code = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            cells.get(2)?.starts_with("error").then_some(code)
        })
        .collect();
    assert!(errors.len() >= 5, "{errors:?}");
    let mut ignorable = bootstrap::flux::findings::IGNORABLE.to_vec();
    ignorable.sort_unstable();
    let mut documented = errors.clone();
    documented.sort_unstable();
    assert_eq!(ignorable, documented);
    let row = design
        .lines()
        .find(|l| l.starts_with("| `lints.ignore` |"))
        .unwrap();
    for code in errors {
        assert!(row.contains(&format!("`{code}`")), "{code}: {row}");
    }
}
