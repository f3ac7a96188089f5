//! `bootstrap status` end to end: the real binary against the loopback API
//! server and the fake helm, after a real `apply`.

use kube_loopback::Rollout;
use serde_json::{Value, json};
use testkit::builder::Test;
use testkit::cluster::{Cluster, daemonset};

use testkit::cluster::CLUSTER;

/// cilium -> coredns -> spegel; cilium has a rollout hook.
fn releases(cilium_values: &str, coredns_version: &str) -> String {
    format!(
        "name: cilium
namespace: kube-system
chart: {{ repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }}
values: {cilium_values}
hooks:
  postsync:
    - rollout: {{ kind: DaemonSet, name: cilium }}
---
name: coredns
namespace: kube-system
chart: {{ repo: https://coredns.github.io/helm, name: coredns, version: {coredns_version} }}
needs: [cilium]
---
name: spegel
namespace: kube-system
chart: {{ oci: oci://ghcr.io/spegel-org/helm-charts/spegel, version: 0.4.0 }}
needs: [coredns]
"
    )
}

fn config() -> Test {
    Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file(
            "releases/core.yaml",
            &releases("{ k8sServiceHost: 10.0.0.1 }", "1.44.3"),
        )
}

/// A cluster where `apply infra` has succeeded.
fn applied() -> (Cluster, Test) {
    let cluster = Cluster::start();
    cluster.script(json!({
        "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
    }));
    let test = config();
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 0, "apply: {}\n{}", out.stdout, out.stderr);
    (cluster, test)
}

fn status_json(cluster: &Cluster, test: &Test) -> (i32, Value, String) {
    let out = cluster.run(test, &["status", "infra", "--output", "json"]);
    let value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", out.stdout, out.stderr));
    (out.code, value, out.stderr)
}

fn entry<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["releases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["release"] == format!("kube-system/{name}"))
        .unwrap_or_else(|| panic!("no {name} in {report}"))
}

#[test]
fn after_apply_every_release_is_owned_ready_and_up_to_date_without_a_single_write() {
    let (cluster, test) = applied();
    cluster.api.clear_request_log();

    let out = cluster.run(&test, &["status", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(
        out.stdout,
        "\
cluster infra

release              chart    desired  deployed  helm      rev  owner      drift       ready
kube-system/cilium   cilium   1.18.2   1.18.2    deployed  1    bootstrap  up to date  ready
kube-system/coredns  coredns  1.44.3   1.44.3    deployed  1    bootstrap  up to date  -
kube-system/spegel   spegel   0.4.0    0.4.0     deployed  1    bootstrap  up to date  -

admission guard: in place (ValidatingAdmissionPolicy bootstrap-ownership-guard and its binding): Flux HelmReleases for bootstrap's releases are denied

no conflicts
"
    );

    let (code, report, _) = status_json(&cluster, &test);
    assert_eq!(code, 0);
    assert_eq!(report["cluster"], "infra");
    let cilium = entry(&report, "cilium");
    assert_eq!(cilium["chart"], "cilium");
    assert_eq!(cilium["desired"]["version"], "1.18.2");
    // The ledger's keyed digest, the same as the entry's: never a plain hash.
    let digest = cilium["desired"]["valuesDigest"].as_str().unwrap();
    assert!(digest.starts_with("hmac-sha256:"), "{digest}");
    let recorded: serde_json::Value =
        serde_json::from_str(cluster.ledger()["kube-system.cilium"].as_str().unwrap()).unwrap();
    assert_eq!(recorded["valuesDigest"], digest);
    assert_eq!(
        cilium["deployed"],
        json!({"version": "1.18.2", "status": "deployed", "revision": 1})
    );
    assert_eq!(
        cilium["ready"],
        json!({"ok": true, "message": "ready", "workloads": [
            {"object": "DaemonSet kube-system/cilium", "ready": true, "message": "ready"}
        ]})
    );
    assert_eq!(cilium["owner"], "bootstrap");
    assert_eq!(cilium["drift"], "up to date");
    assert_eq!(cilium["conflicts"], json!([]));

    let writes = cluster.api.mutations();
    assert!(writes.is_empty(), "status wrote to the cluster: {writes:?}");
    let helm_writes: Vec<String> = cluster
        .helm_calls()
        .iter()
        .map(|c| c.command())
        .filter(|c| c.starts_with("upgrade") || c.starts_with("uninstall"))
        .collect();
    assert_eq!(
        helm_writes.len(),
        3,
        "only apply's installs: {helm_writes:?}"
    );
}

/// Nothing is read once per release in turn (docs/design.md#commands):
/// helm is asked once for every release (`helm list`), never a `helm
/// history` per release, and the Helm release Secrets with one
/// metadata-only list for the namespace.
#[test]
fn status_asks_helm_once_and_lists_secrets_once_per_namespace() {
    let (cluster, test) = applied();
    let before = cluster.helm_calls().len();
    cluster.api.clear_request_log();
    let out = cluster.run(&test, &["status", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let helm: Vec<String> = cluster.helm_calls()[before..]
        .iter()
        .map(|c| c.argv[..2].join(" "))
        .filter(|c| !c.starts_with("version"))
        .collect();
    assert_eq!(helm, ["list --all-namespaces"], "{helm:?}");
    let secret_lists: Vec<_> = cluster
        .api
        .request_log()
        .into_iter()
        .filter(|r| r.path.ends_with("/secrets"))
        .map(|r| (r.path.clone(), r.is_metadata_only()))
        .collect();
    assert_eq!(
        secret_lists,
        [("/api/v1/namespaces/kube-system/secrets".to_string(), true)]
    );
}

/// `-q` shows only what needs attention; `-v` every workload judged
/// (docs/design.md#global-flags).
#[test]
fn status_says_when_the_admission_guard_is_missing() {
    let (cluster, test) = applied();
    cluster.api.delete(
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicyBinding",
        None,
        "bootstrap-ownership-guard",
    );
    // -q too: a missing guard needs attention.
    let out = cluster.run(&test, &["status", "infra", "-q"]);
    assert!(
        out.stdout.contains(
            "admission guard: missing (ValidatingAdmissionPolicy bootstrap-ownership-guard or its binding): nothing in the cluster denies a Flux HelmRelease for bootstrap's releases; `bootstrap apply` installs it"
        ),
        "{}",
        out.stdout
    );
    let (_, report, _) = status_json(&cluster, &test);
    assert_eq!(report["guard"], "missing");
}

#[test]
fn quiet_shows_only_what_needs_attention_and_verbose_each_workload() {
    let (cluster, test) = applied();
    let quiet = cluster.run(&test, &["status", "infra", "-q"]);
    assert_eq!(quiet.code, 0, "{}", quiet.stderr);
    assert_eq!(
        quiet.stdout,
        "cluster infra\n\n3 releases deployed, up to date and ready\n\nno conflicts\n"
    );
    let test = test.file(
        "releases/core.yaml",
        &releases("{ k8sServiceHost: 10.0.0.1 }", "1.45.0"),
    );
    let quiet = cluster.run(&test, &["status", "infra", "-q"]);
    assert_eq!(
        quiet.stdout,
        "\
cluster infra

release              chart    desired  deployed  helm      rev  owner      drift                     ready
kube-system/coredns  coredns  1.45.0   1.44.3    deployed  1    bootstrap  version 1.44.3 -> 1.45.0  -
(and 2 more releases deployed, up to date and ready)

no conflicts
"
    );
    let verbose = cluster.run(&test, &["status", "infra", "-v"]);
    assert!(
        verbose
            .stdout
            .contains("\n    DaemonSet kube-system/cilium: ready\n"),
        "{}",
        verbose.stdout
    );
    assert!(
        verbose
            .stdout
            .contains("  kube-system/coredns: values hmac-sha256:"),
        "{}",
        verbose.stdout
    );
}

#[test]
fn a_changed_config_shows_as_drift() {
    let (cluster, test) = applied();
    let test = test.file(
        "releases/core.yaml",
        &releases("{ k8sServiceHost: 10.0.0.2 }", "1.45.0"),
    );
    let (code, report, stderr) = status_json(&cluster, &test);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(entry(&report, "cilium")["drift"], "values changed");
    assert_eq!(
        entry(&report, "coredns")["drift"],
        "version 1.44.3 -> 1.45.0"
    );
    assert_eq!(entry(&report, "spegel")["drift"], "up to date");

    let out = cluster.run(&test, &["status", "infra"]);
    let coredns = out
        .stdout
        .lines()
        .find(|l| l.starts_with("kube-system/coredns"))
        .unwrap();
    assert!(coredns.contains("1.45.0   1.44.3"), "{coredns}");
    assert!(coredns.contains("version 1.44.3 -> 1.45.0"), "{coredns}");
}

#[test]
fn a_workload_that_is_not_rolled_out_shows_why() {
    let (cluster, test) = applied();
    // A spec change the controller never acts on: the old status must not
    // pass for this rollout's success.
    cluster
        .api
        .set_rollout("DaemonSet", "kube-system", "cilium", Rollout::Never);
    let mut ds = cluster
        .api
        .get("apps/v1", "DaemonSet", Some("kube-system"), "cilium")
        .unwrap();
    let generation = ds["metadata"]["generation"].as_i64().unwrap();
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = json!("cilium:v2");
    cluster.api.insert(ds);
    let (code, report, _) = status_json(&cluster, &test);
    assert_eq!(code, 0, "not ready is information, not failure");
    let ready = &entry(&report, "cilium")["ready"];
    assert_eq!(ready["ok"], false);
    assert_eq!(
        ready["message"],
        format!(
            "not ready: DaemonSet kube-system/cilium: waiting for the controller to observe generation {}",
            generation + 1
        )
    );
}

#[test]
fn a_flux_helmrelease_targeting_a_release_is_a_conflict_and_exits_1() {
    let (cluster, test) = applied();
    cluster.api.insert(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "helmreleases.helm.toolkit.fluxcd.io"},
        "spec": {"group": "helm.toolkit.fluxcd.io", "scope": "Namespaced",
                 "names": {"plural": "helmreleases", "singular": "helmrelease", "kind": "HelmRelease"},
                 "versions": [{"name": "v2", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }));
    cluster.api.insert(json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": "cilium", "namespace": "kube-system"},
        "spec": {"interval": "10m", "chart": {"spec": {"chart": "cilium", "sourceRef": {"kind": "HelmRepository", "name": "cilium"}}}}
    }));

    let out = cluster.run(&test, &["status", "infra"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let conflicts = out
        .stdout
        .split_once("\nconflicts (`bootstrap apply` refuses until they are resolved):\n")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no conflicts section:\n{}", out.stdout));
    assert!(
        conflicts.starts_with("  kube-system/cilium: Flux HelmRelease kube-system/cilium"),
        "{conflicts}"
    );
    assert_eq!(conflicts.lines().count(), 1, "{conflicts}");
    assert!(
        out.stderr
            .contains("1 live conflict in cluster `infra`: `bootstrap apply` would refuse"),
        "{}",
        out.stderr
    );

    let (code, report, _) = status_json(&cluster, &test);
    assert_eq!(code, 1);
    let found = entry(&report, "cilium")["conflicts"].as_array().unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["object"], "HelmRelease kube-system/cilium");
    assert_eq!(entry(&report, "coredns")["conflicts"], json!([]));
}

#[test]
fn a_pending_release_shows_its_helm_status_and_a_conflict() {
    let (cluster, test) = applied();
    let state = cluster.path().join("helm-state/kube-system__coredns.json");
    let mut release: Value =
        serde_json::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    release["status"] = json!("pending-upgrade");
    release["revision"] = json!(2);
    std::fs::write(&state, serde_json::to_string(&release).unwrap()).unwrap();

    let (code, report, _) = status_json(&cluster, &test);
    assert_eq!(code, 1);
    let coredns = entry(&report, "coredns");
    assert_eq!(
        coredns["deployed"],
        json!({"version": "1.44.3", "status": "pending-upgrade", "revision": 2})
    );
    assert_eq!(
        coredns["conflicts"][0]["object"],
        "Helm release kube-system/coredns"
    );

    let out = cluster.run(&test, &["status", "infra"]);
    let row = out
        .stdout
        .lines()
        .find(|l| l.starts_with("kube-system/coredns"))
        .unwrap();
    assert!(row.contains("pending-upgrade  2"), "{row}");
    assert!(
        out.stdout
            .contains("  kube-system/coredns: Helm release kube-system/coredns is pending-upgrade"),
        "{}",
        out.stdout
    );
}

#[test]
fn releases_never_installed_show_as_not_installed() {
    let cluster = Cluster::start();
    let test = config();
    let (code, report, stderr) = status_json(&cluster, &test);
    assert_eq!(code, 0, "{stderr}");
    let cilium = entry(&report, "cilium");
    assert_eq!(cilium["deployed"], Value::Null);
    assert_eq!(cilium["owner"], "-");
    assert_eq!(cilium["drift"], "not installed");
    assert_eq!(cilium["ready"]["ok"], false);
}

/// `--only` and `-l` mean on `status` what they mean on `apply`: the chosen
/// releases and what they need, unless `--no-needs`.
#[test]
fn status_only_reads_the_chosen_releases_and_their_needs() {
    let (cluster, test) = applied();
    let names = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["status", "infra", "-o", "json"];
        all.extend_from_slice(args);
        let out = cluster.run(&test, &all);
        assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
        let report: Value = serde_json::from_str(&out.stdout).unwrap();
        report["releases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["release"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        names(&["--only", "coredns"]),
        ["kube-system/cilium", "kube-system/coredns"]
    );
    assert_eq!(
        names(&["--only", "coredns", "--no-needs"]),
        ["kube-system/coredns"]
    );
    assert_eq!(
        names(&["-l", "name=spegel", "--no-needs"]),
        ["kube-system/spegel"]
    );
    assert_eq!(names(&[]).len(), 3);
}
