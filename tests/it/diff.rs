//! `bootstrap diff` end to end: the real binary against the loopback API
//! server and the fake helm, whose scripted manifests render `{{ .Values.x }}`
//! from the values it is given (as a chart would), before and after `apply`.

use serde_json::{Value, json};
use testkit::builder::Test;
use testkit::cluster::{CLUSTER, Cluster};
use testkit::pty::Pty;

/// cilium (its ConfigMap renders `k8sServicePort`, its Secret the relay
/// password) and coredns.
fn releases(cilium_version: &str, cilium_values: &str) -> String {
    format!(
        "name: cilium
namespace: kube-system
chart: {{ repo: https://helm.cilium.io, name: cilium, version: {cilium_version} }}
values: {cilium_values}
---
name: coredns
namespace: kube-system
chart: {{ repo: https://coredns.github.io/helm, name: coredns, version: 1.44.3 }}
needs: [cilium]
"
    )
}

const VALUES: &str = "{ k8sServicePort: 6443, hubble: { relay: { password: s3cr3t-relay-pw } } }";

fn config(cilium_version: &str, cilium_values: &str) -> Test {
    Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file(
            "releases/core.yaml",
            &releases(cilium_version, cilium_values),
        )
}

fn cluster() -> Cluster {
    let cluster = Cluster::start();
    cluster.script(json!({
        "kube-system/cilium": {"manifests": [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "cilium-config", "namespace": "kube-system"},
             "data": {"k8s-service-port": "{{ .Values.k8sServicePort }}",
                      "relay-url": "https://relay:{{ .Values.hubble.relay.password }}@hubble",
                      "version": "{{ .Chart.Version }}"}},
            {"apiVersion": "v1", "kind": "Secret",
             "metadata": {"name": "hubble-relay", "namespace": "kube-system"},
             "stringData": {"password": "{{ .Values.hubble.relay.password }}"}},
        ]},
        "kube-system/coredns": {"manifests": [
            {"apiVersion": "apps/v1", "kind": "Deployment",
             "metadata": {"name": "coredns", "namespace": "kube-system"},
             "spec": {"replicas": 2}},
        ]},
    }));
    cluster
}

/// A cluster where `apply infra` has succeeded with `VALUES` and 1.18.2.
fn applied() -> Cluster {
    let cluster = cluster();
    let out = cluster.run(&config("1.18.2", VALUES), &["apply", "infra"]);
    assert_eq!(out.code, 0, "apply: {}\n{}", out.stdout, out.stderr);
    cluster
}

fn no_secret(out: &testkit::builder::Output) {
    for text in [&out.stdout, &out.stderr] {
        assert!(!text.contains("s3cr3t"), "a secret was printed:\n{text}");
    }
}

#[test]
fn releases_not_installed_show_as_additions_of_every_value_and_object() {
    let cluster = cluster();
    let test = config("1.18.2", VALUES);
    let out = cluster.run(&test, &["diff", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    no_secret(&out);
    assert_eq!(
        out.stdout,
        "\
+ kube-system/cilium: install cilium 1.18.2, 2 values, 2 objects
  values:
    + hubble.relay.password: <redacted>
    + k8sServicePort: 6443
--- ConfigMap kube-system/cilium-config (deployed)
+++ ConfigMap kube-system/cilium-config (bootstrap)
@@ -0,0 +1,9 @@
+apiVersion: v1
+kind: ConfigMap
+metadata:
+  name: cilium-config
+  namespace: kube-system
+data:
+  k8s-service-port: 6443
+  relay-url: https://<redacted>@hubble
+  version: \"1.18.2\"
--- Secret kube-system/hubble-relay (deployed)
+++ Secret kube-system/hubble-relay (bootstrap)
@@ -0,0 +1,7 @@
+apiVersion: v1
+kind: Secret
+metadata:
+  name: hubble-relay
+  namespace: kube-system
+stringData:
+  password: <redacted>
+ kube-system/coredns: install coredns 1.44.3, 1 object
--- Deployment kube-system/coredns (deployed)
+++ Deployment kube-system/coredns (bootstrap)
@@ -0,0 +1,7 @@
+apiVersion: apps/v1
+kind: Deployment
+metadata:
+  name: coredns
+  namespace: kube-system
+spec:
+  replicas: 2
infra: 2 to install
"
    );
    // Read-only: nothing installed, nothing written to the cluster.
    assert!(cluster.installs().is_empty());
    assert!(
        cluster.api.mutations().is_empty(),
        "{:?}",
        cluster.api.mutations()
    );
    let out = cluster.run(&test, &["diff", "infra", "--exit-code"]);
    assert_eq!((out.code, out.stderr.as_str()), (1, ""), "{}", out.stdout);
}

#[test]
fn after_apply_nothing_would_change_and_exit_code_is_0() {
    let cluster = applied();
    let out = cluster.run(&config("1.18.2", VALUES), &["diff", "infra", "--exit-code"]);
    assert_eq!(
        (out.code, out.stdout.as_str(), out.stderr.as_str()),
        (0, "infra: no changes (2 releases)\n", "")
    );
    let verbose = cluster.run(&config("1.18.2", VALUES), &["diff", "infra", "-v"]);
    assert_eq!(
        verbose.stdout,
        "  kube-system/cilium: unchanged\n  kube-system/coredns: unchanged\ninfra: no changes (2 releases)\n"
    );
}

#[test]
fn a_values_change_shows_its_key_path_and_the_manifest_hunk_and_exits_1() {
    let cluster = applied();
    let changed = "{ k8sServicePort: 7445, hubble: { relay: { password: s3cr3t-relay-pw } } }";
    let out = cluster.run(
        &config("1.18.2", changed),
        &["diff", "infra", "--exit-code"],
    );
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(out.stderr, "");
    assert_eq!(
        out.stdout,
        "\
~ kube-system/cilium: 1 value changed, 1 object changed
  values:
    ~ k8sServicePort: 6443 → 7445
--- ConfigMap kube-system/cilium-config (deployed)
+++ ConfigMap kube-system/cilium-config (bootstrap)
@@ -4,6 +4,6 @@
   name: cilium-config
   namespace: kube-system
 data:
-  k8s-service-port: 6443
+  k8s-service-port: 7445
   relay-url: https://<redacted>@hubble
   version: \"1.18.2\"
infra: 1 to upgrade, 1 unchanged
"
    );
    // `-q`: the summary lines only.
    let quiet = cluster.run(&config("1.18.2", changed), &["diff", "infra", "-q"]);
    assert_eq!(
        quiet.stdout,
        "~ kube-system/cilium: 1 value changed, 1 object changed\ninfra: 1 to upgrade, 1 unchanged\n"
    );
    // A run's --set is diffed as apply would install it; --only narrows.
    let set = cluster.run(
        &config("1.18.2", VALUES),
        &[
            "diff",
            "infra",
            "--set",
            "k8sServicePort=7445",
            "--only",
            "cilium",
            "-q",
        ],
    );
    assert_eq!(
        set.stdout,
        "~ kube-system/cilium: 1 value changed, 1 object changed\ninfra: 1 to upgrade\n"
    );
}

#[test]
fn a_version_change_is_named_and_what_it_renders_differently_shown() {
    let cluster = applied();
    let out = cluster.run(&config("1.18.3", VALUES), &["diff", "infra", "cilium"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(
        out.stdout,
        "\
~ kube-system/cilium: cilium 1.18.2 → 1.18.3, 1 object changed
--- ConfigMap kube-system/cilium-config (deployed)
+++ ConfigMap kube-system/cilium-config (bootstrap)
@@ -6,4 +6,4 @@
 data:
   k8s-service-port: 6443
   relay-url: https://<redacted>@hubble
-  version: \"1.18.2\"
+  version: \"1.18.3\"
infra: 1 to upgrade
"
    );
}

#[test]
fn a_changed_secret_is_shown_as_changed_but_never_printed() {
    let cluster = applied();
    let changed = "{ k8sServicePort: 6443, hubble: { relay: { password: s3cr3t-other-pw } } }";
    for output in ["text", "json"] {
        let out = cluster.run(
            &config("1.18.2", changed),
            &["diff", "infra", "--output", output],
        );
        assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
        no_secret(&out);
        assert!(
            out.stdout.contains("hubble.relay.password"),
            "{}",
            out.stdout
        );
    }
    let out = cluster.run(&config("1.18.2", changed), &["diff", "infra"]);
    assert!(
        out.stdout
            .contains("    ~ hubble.relay.password: <redacted> → <redacted>\n")
            && out
                .stdout
                .contains("-  password: <redacted>\n+  password: <redacted, changed>\n"),
        "{}",
        out.stdout
    );
}

#[test]
fn json_has_every_release_with_its_values_and_objects() {
    let cluster = applied();
    let changed = "{ k8sServicePort: 7445, hubble: { relay: { password: s3cr3t-relay-pw } } }";
    let out = cluster.run(
        &config("1.18.2", changed),
        &["diff", "infra", "--output", "json", "--exit-code"],
    );
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(doc["cluster"], "infra");
    assert_eq!(doc["changed"], true);
    assert_eq!(doc["apiVersions"], json!([]));
    let cilium = &doc["releases"][0];
    assert_eq!(cilium["release"], "kube-system/cilium");
    assert_eq!(cilium["change"], "upgrade");
    assert_eq!(cilium["summary"], "1 value changed, 1 object changed");
    assert_eq!(
        cilium["deployed"],
        json!({"chart": "cilium", "version": "1.18.2"})
    );
    assert_eq!(
        cilium["desired"],
        json!({"chart": "cilium", "version": "1.18.2"})
    );
    assert_eq!(
        cilium["values"],
        json!([{"path": "k8sServicePort", "op": "change", "from": 6443, "to": 7445}])
    );
    assert_eq!(cilium["reasons"], json!([]));
    let object = &cilium["objects"][0];
    assert_eq!(
        (
            &object["apiVersion"],
            &object["kind"],
            &object["namespace"],
            &object["name"],
            &object["op"]
        ),
        (
            &json!("v1"),
            &json!("ConfigMap"),
            &json!("kube-system"),
            &json!("cilium-config"),
            &json!("change")
        )
    );
    assert!(
        object["diff"]
            .as_str()
            .unwrap()
            .contains("-  k8s-service-port: 6443\n+  k8s-service-port: 7445\n"),
        "{object}"
    );
    assert_eq!(doc["releases"][1]["change"], "unchanged");
    assert_eq!(doc["releases"][1]["objects"], json!([]));
}

#[test]
fn colour_only_on_a_terminal_and_never_with_no_color() {
    let cluster = applied();
    let test = config("1.18.3", VALUES);
    let piped = cluster.run(&test, &["diff", "infra"]);
    assert!(!piped.stdout.contains('\u{1b}'), "{}", piped.stdout);

    let on_tty = |no_color: Option<&str>| {
        let mut cmd = cluster.command(&test, &["diff", "infra"]);
        // testkit sets NO_COLOR for pipes; a terminal user may not.
        match no_color {
            Some(v) => cmd.env("NO_COLOR", v),
            None => cmd.env_remove("NO_COLOR"),
        };
        let pty = Pty::spawn(cmd, 40, 120);
        let bytes = pty.bytes();
        let (code, _) = pty.finish(std::time::Duration::from_secs(60));
        assert_eq!(code, 0);
        String::from_utf8_lossy(&bytes.lock().unwrap()).replace("\r\n", "\n")
    };
    let coloured = on_tty(None);
    assert!(
        coloured.contains("\u{1b}[32m+  version: \"1.18.3\""),
        "{coloured:?}"
    );
    assert!(
        coloured.contains("\u{1b}[31m-  version: \"1.18.2\""),
        "{coloured:?}"
    );
    let plain = on_tty(Some("1"));
    assert!(!plain.contains('\u{1b}'), "{plain:?}");
    assert!(plain.contains("+  version: \"1.18.3\""), "{plain:?}");
}

#[test]
fn apply_dry_run_says_what_diff_says_in_one_line() {
    let cluster = applied();
    let changed = "{ k8sServicePort: 7445, hubble: { relay: { password: s3cr3t-relay-pw } } }";
    let out = cluster.run(
        &config("1.18.3", changed),
        &["apply", "infra", "--dry-run", "--output", "json"],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    no_secret(&out);
    let finished: Vec<Value> = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "release_finished")
        .collect();
    let message = |release: &str| {
        finished
            .iter()
            .find(|e| e["release"] == release)
            .map(|e| (e["outcome"].clone(), e["message"].clone()))
    };
    assert_eq!(
        message("kube-system/cilium"),
        Some((
            json!("would_upgrade"),
            json!("cilium 1.18.2 → 1.18.3, 1 value changed, 1 object changed")
        ))
    );
    assert_eq!(
        message("kube-system/coredns").map(|(outcome, _)| outcome),
        Some(json!("unchanged"))
    );
    // On a fresh cluster: what each install brings.
    let fresh = self::cluster();
    let out = fresh.run(&config("1.18.2", VALUES), &["apply", "infra", "--dry-run"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("would install  ")
            && out
                .stdout
                .contains("install cilium 1.18.2, 2 values, 2 objects"),
        "{}",
        out.stdout
    );
}
