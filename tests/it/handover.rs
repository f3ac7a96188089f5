//! `ownership: handover` and `from:` (docs/design.md#handover,
//! docs/design.md#from-a-flux-helmrelease): bootstrap installs a release
//! exactly as the Flux HelmRelease in the GitOps tree will reconcile it,
//! leaves it to Flux once helm-controller has adopted it, and `check` proves
//! the adoption changes nothing. Binary tests against the loopback API and
//! the fake helm.

use serde_json::{Value, json};
use testkit::builder::Test;
use testkit::cluster::{Cluster, crd, daemonset};

const CLUSTER: &str = "name: infra
context: admin@infra
flux:
  root: gitops
  entrypoint: clusters/infra
";

/// Cilium handed over (read from its HelmRelease), CoreDNS bootstrap-owned.
const RELEASES: &str = "name: cilium
namespace: kube-system
from: { helmRelease: apps/cilium/helmrelease.yaml }
ownership: handover
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

const OCI: &str = "apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata:
  name: cilium
spec:
  interval: 1h
  url: oci://quay.io/cilium/charts/cilium
  ref:
    tag: 1.18.2
";

const HELMRELEASE: &str = "apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: cilium
spec:
  interval: 1h
  chartRef:
    kind: OCIRepository
    name: cilium
  values:
    k8sServiceHost: 10.0.0.1
    k8sServicePort: 6443
    kubeProxyReplacement: true
    hubble:
      enabled: false
";

fn config() -> Test {
    Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file("releases/core.yaml", RELEASES)
        .file("gitops/clusters/infra/apps.yaml", SYNC)
        .file("gitops/apps/cilium/ocirepository.yaml", OCI)
        .file("gitops/apps/cilium/helmrelease.yaml", HELMRELEASE)
}

fn script(cluster: &Cluster) {
    cluster.script(json!({
        "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
    }));
}

/// The HelmRelease CRD, served as v2.
fn helmrelease_crd(cluster: &Cluster) {
    let mut c = crd("helm.toolkit.fluxcd.io", "helmreleases", "HelmRelease");
    c["spec"]["versions"][0]["name"] = json!("v2");
    cluster.api.insert(c);
}

/// The HelmRelease as Flux applies it; `history` is helm-controller's
/// `status.history` (empty before it has reconciled the release).
fn live_helmrelease(name: &str, history: Value) -> Value {
    json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {"releaseName": "cilium", "chartRef": {"kind": "OCIRepository", "name": "cilium"},
                 "values": {"k8sServiceHost": "10.0.0.1", "k8sServicePort": 6443,
                            "kubeProxyReplacement": true, "hubble": {"enabled": false}}},
        "status": {"history": history},
    })
}

/// helm-controller's snapshot of the release it upgraded when adopting it
/// (fluxcd/helm-controller `api/v2/snapshot_types.go`, written by
/// `internal/release/observation.go` `ObservedToSnapshot`).
fn adopted_history(revision: u64) -> Value {
    json!([{
        "name": "cilium", "namespace": "kube-system", "version": revision,
        "status": "deployed", "chartName": "cilium", "chartVersion": "1.18.2",
        "configDigest": "sha256:0", "digest": "sha256:1",
        "firstDeployed": "2025-01-01T00:00:00Z", "lastDeployed": "2025-01-01T00:10:00Z",
    }])
}

fn outcomes(stdout: &str) -> Vec<(String, String, String)> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "release_finished")
        .map(|e| {
            (
                e["release"].as_str().unwrap_or_default().to_string(),
                e["outcome"].as_str().unwrap_or_default().to_string(),
                e["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn hooks_run(stdout: &str, release: &str) -> usize {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "hook_finished" && e["release"] == release && e["ok"] == true)
        .count()
}

#[test]
fn a_handover_release_is_installed_from_its_helmrelease_and_recorded_as_handover() {
    let cluster = Cluster::start();
    script(&cluster);
    let test = config();
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let installs = cluster.installs();
    let cilium = installs
        .iter()
        .find(|c| c.release() == Some("cilium"))
        .expect("cilium installed");
    // Chart and version from the OCIRepository (pulled into the chart
    // cache, installed from there), values from the HelmRelease.
    let pull = cluster
        .helm_calls()
        .into_iter()
        .find(|c| c.argv[0] == "pull" && c.positionals() == ["oci://quay.io/cilium/charts/cilium"])
        .expect("cilium's chart pulled from the OCIRepository");
    assert_eq!(pull.flag("--version"), Some("1.18.2"));
    assert!(
        cilium.positionals()[1].starts_with(test.cache_dir().to_str().unwrap()),
        "{:?}",
        cilium.argv
    );
    assert_eq!(
        cilium.values_files[0]["content"],
        json!({"k8sServiceHost": "10.0.0.1", "k8sServicePort": 6443,
               "kubeProxyReplacement": true, "hubble": {"enabled": false}})
    );
    let labels = cilium.flag("--labels").unwrap_or_default();
    assert!(labels.contains("bootstrap.dev/policy=handover"), "{labels}");
    let ledger = cluster.ledger();
    let entry: Value =
        serde_json::from_str(ledger["kube-system.cilium"].as_str().unwrap()).unwrap();
    assert_eq!(entry["policy"], "handover");
    // The guard's CEL admits exactly this substring (src/flux/policy.rs).
    assert!(
        ledger["kube-system.cilium"]
            .as_str()
            .unwrap()
            .contains("\"policy\":\"handover\"")
    );
    let coredns: Value =
        serde_json::from_str(ledger["kube-system.coredns"].as_str().unwrap()).unwrap();
    assert_eq!(coredns["policy"], "bootstrap");
}

#[test]
fn before_adoption_a_helmrelease_is_expected_and_the_release_is_still_bootstraps_to_upgrade() {
    let cluster = Cluster::start();
    script(&cluster);
    let test = config();
    assert_eq!(cluster.run(&test, &["apply", "infra"]).code, 0);
    helmrelease_crd(&cluster);
    // Flux has applied the HelmRelease, helm-controller has not reconciled it yet.
    cluster.api.insert(live_helmrelease("cilium", json!([])));
    let changed = test.file(
        "clusters/infra/cluster.yaml",
        &format!(
            "{CLUSTER}overrides:\n  cilium:\n    values:\n      operator: {{ replicas: 1 }}\n"
        ),
    );
    let out = cluster.run(&changed, &["apply", "infra", "--output", "json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let found = outcomes(&out.stdout);
    assert!(
        found.contains(&(
            "kube-system/cilium".into(),
            "upgraded".into(),
            String::new()
        )),
        "{found:?}"
    );
    let status = cluster.run(&changed, &["status", "infra", "--output", "json"]);
    assert_eq!(status.code, 0, "{}\n{}", status.stdout, status.stderr);
    let report: Value = serde_json::from_str(&status.stdout).unwrap();
    let cilium = &report["releases"][0];
    assert_eq!(cilium["owner"], "handover");
    let state = cilium["handover"].as_str().unwrap();
    assert!(
        state.starts_with("drifted: HelmRelease kube-system/cilium would change operator.replicas: bootstrap 1, Flux unset"),
        "{state}"
    );
    assert_eq!(report["releases"][1]["handover"], Value::Null);
}

#[test]
fn once_flux_has_adopted_it_apply_never_upgrades_it_but_still_waits_for_it() {
    let cluster = Cluster::start();
    script(&cluster);
    let test = config();
    assert_eq!(cluster.run(&test, &["apply", "infra"]).code, 0);
    let before = cluster.installs().len();
    helmrelease_crd(&cluster);
    cluster
        .api
        .insert(live_helmrelease("cilium", adopted_history(2)));
    // Even with other values, and with --force, an adopted release is Flux's.
    let changed = test.file(
        "clusters/infra/cluster.yaml",
        &format!(
            "{CLUSTER}overrides:\n  cilium:\n    values:\n      hubble: {{ enabled: true }}\n"
        ),
    );
    let out = cluster.run(&changed, &["apply", "infra", "--force", "--output", "json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let found = outcomes(&out.stdout);
    let cilium = found
        .iter()
        .find(|(r, _, _)| r == "kube-system/cilium")
        .unwrap();
    assert_eq!(cilium.1, "adopted", "{found:?}");
    assert_eq!(
        cilium.2,
        "adopted by Flux (HelmRelease kube-system/cilium); bootstrap no longer upgrades it"
    );
    let upgraded: Vec<_> = cluster.installs()[before..]
        .iter()
        .filter_map(|c| c.release().map(str::to_string))
        .collect();
    assert_eq!(
        upgraded,
        ["coredns"],
        "only the bootstrap-owned release (--force)"
    );
    assert_eq!(
        hooks_run(&out.stdout, "kube-system/cilium"),
        1,
        "rollout hook still ran"
    );

    let text = cluster.run(&changed, &["apply", "infra"]);
    assert!(
        text.stdout.contains("kube-system/cilium: adopted by Flux"),
        "{}",
        text.stdout
    );
    let status = cluster.run(&changed, &["status", "infra"]);
    assert!(
        status
            .stdout
            .contains("kube-system/cilium: adopted by Flux (HelmRelease kube-system/cilium)"),
        "{}",
        status.stdout
    );
}

#[test]
fn destroy_leaves_an_adopted_release_installed_and_says_so() {
    let cluster = Cluster::start();
    script(&cluster);
    let test = config();
    assert_eq!(cluster.run(&test, &["apply", "infra"]).code, 0);
    helmrelease_crd(&cluster);
    cluster
        .api
        .insert(live_helmrelease("cilium", adopted_history(2)));
    let out = cluster.run(&test, &["destroy", "infra", "--yes", "--output", "json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let found = outcomes(&out.stdout);
    assert!(
        found.contains(&(
            "kube-system/cilium".into(),
            "adopted".into(),
            "adopted by Flux (HelmRelease kube-system/cilium); left installed: remove it from the GitOps tree to uninstall it".into()
        )),
        "{found:?}"
    );
    let uninstalled: Vec<String> = cluster
        .helm_calls()
        .into_iter()
        .filter(|c| c.argv.first().map(String::as_str) == Some("uninstall"))
        .flat_map(|c| c.argv)
        .collect();
    assert!(
        uninstalled.contains(&"coredns".to_string()),
        "{uninstalled:?}"
    );
    assert!(
        !uninstalled.contains(&"cilium".to_string()),
        "{uninstalled:?}"
    );
    assert!(cluster.release_state("kube-system", "cilium").is_some());
    assert!(!cluster.ledger().contains_key("kube-system.cilium"));
}

#[test]
fn two_helmreleases_for_one_handover_release_are_refused_live_and_in_check() {
    let cluster = Cluster::start();
    script(&cluster);
    helmrelease_crd(&cluster);
    cluster.api.insert(live_helmrelease("cilium", json!([])));
    cluster
        .api
        .insert(live_helmrelease("cilium-again", json!([])));
    let test = config();
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("2 Flux HelmReleases manage handover release kube-system/cilium (kube-system/cilium, kube-system/cilium-again)"),
        "{}",
        out.stderr
    );
    assert!(cluster.installs().is_empty());

    let twice = config().file(
        "gitops/apps/cilium/again.yaml",
        &HELMRELEASE.replace(
            "name: cilium\nspec:",
            "name: cilium-again\nspec:\n  releaseName: cilium",
        ),
    );
    let check = twice.args(&["check", "infra", "--output", "json"]).run();
    assert_eq!(check.code, 1, "{}\n{}", check.stdout, check.stderr);
    let doc: Value = serde_json::from_str(&check.stdout).unwrap();
    let codes: Vec<&str> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "error")
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["handover-managed-twice", "handover-managed-twice"]);
}

#[test]
fn check_proves_the_adoption_changes_nothing_or_lists_each_difference() {
    let ok = config().args(&["check", "infra"]).run();
    assert_eq!(ok.code, 0, "{}\n{}", ok.stdout, ok.stderr);
    assert!(
        !ok.stdout.contains("flux-manages-bootstrap-release"),
        "{}",
        ok.stdout
    );

    let drifted = config()
        .file(
            "clusters/infra/cluster.yaml",
            &format!(
                "{CLUSTER}overrides:\n  cilium:\n    values:\n      hubble: {{ enabled: true }}\n      operator: {{ replicas: 1 }}\n"
            ),
        )
        .args(&["check", "infra"])
        .run();
    assert_eq!(drifted.code, 1, "{}\n{}", drifted.stdout, drifted.stderr);
    let line = drifted
        .stdout
        .lines()
        .find(|l| l.starts_with("error[handover-drift]"))
        .unwrap_or_else(|| panic!("{}", drifted.stdout));
    let cause = "(set by cluster override values (clusters/infra/cluster.yaml overrides.cilium))";
    assert!(
        line.contains(&format!(
            "hubble.enabled: bootstrap true, Flux false {cause}"
        )),
        "{line}"
    );
    assert!(
        line.contains(&format!(
            "operator.replicas: bootstrap 1, Flux unset {cause}"
        )),
        "{line}"
    );

    // A handover release without a HelmRelease is never adopted: a warning.
    let never = config()
        .file("gitops/apps/cilium/helmrelease.yaml", "")
        .file(
            "releases/core.yaml",
            &RELEASES.replace(
                "from: { helmRelease: apps/cilium/helmrelease.yaml }",
                "chart: { oci: oci://quay.io/cilium/charts/cilium, version: 1.18.2 }",
            ),
        )
        .args(&["check", "infra"])
        .run();
    assert_eq!(never.code, 0, "{}\n{}", never.stdout, never.stderr);
    assert!(
        never.stdout.contains("warning[handover-never-adopted]: no HelmRelease in the tree manages handover release kube-system/cilium"),
        "{}",
        never.stdout
    );

    // A bootstrap-owned release is still an error for the same HelmRelease.
    let owned = config()
        .file(
            "releases/core.yaml",
            &RELEASES.replace("ownership: handover\n", ""),
        )
        .args(&["check", "infra"])
        .run();
    assert_eq!(owned.code, 1);
    assert!(
        owned
            .stdout
            .contains("error[flux-manages-bootstrap-release]"),
        "{}",
        owned.stdout
    );
}

#[test]
fn from_errors_name_the_helmrelease_and_what_to_do() {
    let unpinned = config()
        .file(
            "gitops/apps/cilium/ocirepository.yaml",
            &OCI.replace("tag: 1.18.2", "semver: \">=1.18.0\""),
        )
        .args(&["plan", "infra"])
        .run();
    assert_eq!(unpinned.code, 2, "{}", unpinned.stderr);
    assert!(
        unpinned.stderr.contains("releases/core.yaml:3:7: release `kube-system/cilium`: `from: {helmRelease: apps/cilium/helmrelease.yaml}`: OCIRepository cilium (apps/cilium/ocirepository.yaml) follows the semver range `>=1.18.0`"),
        "{}",
        unpinned.stderr
    );
    let secret = config()
        .file(
            "gitops/apps/cilium/helmrelease.yaml",
            &HELMRELEASE.replace(
                "  values:\n",
                "  valuesFrom:\n    - kind: Secret\n      name: cilium-credentials\n  values:\n",
            ),
        )
        .args(&["plan", "infra"])
        .run();
    assert_eq!(secret.code, 2, "{}", secret.stderr);
    assert!(
        secret.stderr.contains("takes values from Secret kube-system/cilium-credentials, but it is not in the GitOps tree"),
        "{}",
        secret.stderr
    );
    let renamed = config()
        .file(
            "releases/core.yaml",
            &RELEASES.replacen("name: cilium\n", "name: cni\n", 1),
        )
        .args(&["plan", "infra"])
        .run();
    assert_eq!(renamed.code, 2);
    assert!(
        renamed
            .stderr
            .contains("manages Helm release kube-system/cilium"),
        "{}",
        renamed.stderr
    );
}

/// helm-controller's marker on the release itself: the revision its adoption
/// upgrade wrote labels every object with the HelmRelease
/// (fluxcd/helm-controller `internal/postrender/build.go`). Even before the
/// HelmRelease's status says so, such a release is Flux's.
#[test]
fn origin_labels_on_the_release_mark_it_adopted() {
    let cluster = Cluster::start();
    let mut labelled = daemonset("kube-system", "cilium");
    labelled["metadata"]["labels"] = json!({
        "helm.toolkit.fluxcd.io/name": "cilium",
        "helm.toolkit.fluxcd.io/namespace": "kube-system",
    });
    cluster.script(json!({
        "kube-system/cilium": {"apply_manifests": true, "manifests": [labelled]},
    }));
    let test = config();
    assert_eq!(cluster.run(&test, &["apply", "infra"]).code, 0);
    let before = cluster.installs().len();
    helmrelease_crd(&cluster);
    cluster.api.insert(live_helmrelease("cilium", json!([])));
    let out = cluster.run(&test, &["apply", "infra", "--force", "--output", "json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let found = outcomes(&out.stdout);
    assert!(
        found
            .iter()
            .any(|(r, o, _)| r == "kube-system/cilium" && o == "adopted"),
        "{found:?}"
    );
    let upgraded: Vec<_> = cluster.installs()[before..]
        .iter()
        .filter_map(|c| c.release().map(str::to_string))
        .collect();
    assert_eq!(upgraded, ["coredns"]);
    // Another HelmRelease's labels are not this one's adoption.
    let other = Cluster::start();
    let mut foreign = daemonset("kube-system", "cilium");
    foreign["metadata"]["labels"] = json!({
        "helm.toolkit.fluxcd.io/name": "other",
        "helm.toolkit.fluxcd.io/namespace": "kube-system",
    });
    other.script(json!({"kube-system/cilium": {"apply_manifests": true, "manifests": [foreign]}}));
    assert_eq!(other.run(&config(), &["apply", "infra"]).code, 0);
    helmrelease_crd(&other);
    other.api.insert(live_helmrelease("cilium", json!([])));
    let out = other.run(
        &config(),
        &["apply", "infra", "--force", "--output", "json"],
    );
    assert!(
        outcomes(&out.stdout).contains(&(
            "kube-system/cilium".into(),
            "upgraded".into(),
            "".into()
        )),
        "{}",
        out.stdout
    );
}

/// CoreDNS owned by bootstrap, and a HelmRelease in the GitOps tree that
/// manages the same Helm release: the dual management `apply` must refuse by
/// itself, whether or not `check` was run first.
const COREDNS_HELMRELEASE: &str = "apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: coredns
spec:
  interval: 1h
  chart:
    spec:
      chart: coredns
      version: 1.44.3
      sourceRef: { kind: HelmRepository, name: coredns, namespace: flux-system }
";

fn dual_managed() -> Test {
    config().file("gitops/apps/coredns/helmrelease.yaml", COREDNS_HELMRELEASE)
}

#[test]
fn apply_refuses_a_release_the_gitops_tree_hands_to_flux_before_touching_anything() {
    let cluster = Cluster::start();
    script(&cluster);
    let out = cluster.run(&dual_managed(), &["apply", "infra"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .starts_with("error: apply of cluster `infra` refused: the GitOps tree Flux applies"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("nothing was changed"), "{}", out.stderr);
    // The finding, the chain by which Flux reaches it, and the fixes,
    // handover among them.
    assert!(out.stderr.contains("error[flux-manages-bootstrap-release]: HelmRelease kube-system/coredns manages Helm release kube-system/coredns"), "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "  reached by:\n    clusters/infra/apps.yaml\n    -> apps/coredns/helmrelease.yaml\n"
        ),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(
            "`ownership: handover` with `from: { helmRelease: apps/coredns/helmrelease.yaml }`"
        ),
        "{}",
        out.stderr
    );
    // Refused before helm ran at all, and the cluster was never touched.
    assert!(
        cluster.helm_calls().is_empty(),
        "{:?}",
        cluster.helm_calls()
    );
    assert!(cluster.ledger().is_empty());
}

#[test]
fn apply_goes_ahead_when_lints_ignore_names_the_finding_and_its_release() {
    let cluster = Cluster::start();
    script(&cluster);
    let test = dual_managed().file(
        "clusters/infra/cluster.yaml",
        &format!("{CLUSTER}lints:\n  ignore:\n    - {{code: flux-manages-bootstrap-release, release: kube-system/coredns}}\n"),
    );
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("flux scan flux-manages-bootstrap-release ignored (listed in lints.ignore): HelmRelease kube-system/coredns"),
        "{}",
        out.stdout
    );
    // `plan` shows what is let through.
    let plan = test.command().args(["plan", "infra"]).output().unwrap();
    let plan = String::from_utf8_lossy(&plan.stdout);
    assert!(
        plan.contains("lints.ignore (errors reported, not blocking): flux-manages-bootstrap-release (release kube-system/coredns)"),
        "{plan}"
    );
    // `check` reports it, marked ignored, and does not fail on it.
    let check = test.command().args(["check", "infra"]).output().unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(0), "{text}");
    assert!(
        text.contains("error[flux-manages-bootstrap-release] (ignored: listed in lints.ignore):"),
        "{text}"
    );
}

/// A stage Flux's API server refuses (a HelmRelease at `v2beta2`, which
/// Flux 2.9 no longer serves) whose HelmRelease would manage a bootstrap
/// release is an error, ignored one release at a time like the scan's other
/// errors.
#[test]
fn a_refused_stage_that_hides_a_bootstrap_release_is_ignored_per_release() {
    let unserved = COREDNS_HELMRELEASE.replace(
        "helm.toolkit.fluxcd.io/v2\n",
        "helm.toolkit.fluxcd.io/v2beta2\n",
    );
    // In a Kustomization of its own: the stage refused is that one's.
    let dns = SYNC
        .replace("name: apps", "name: dns")
        .replace("./apps", "./dns");
    let refused = || {
        config()
            .file("gitops/clusters/infra/dns.yaml", &dns)
            .file("gitops/dns/helmrelease.yaml", &unserved)
    };
    let out = refused().args(&["check", "infra"]).run();
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("error[flux-apply-fails]: Kustomization flux-system/dns fails"),
        "{}",
        out.stdout
    );
    let out = refused()
        .file(
            "clusters/infra/cluster.yaml",
            &format!("{CLUSTER}lints:\n  ignore:\n    - {{code: flux-apply-fails, release: kube-system/coredns}}\n"),
        )
        .args(&["check", "infra"])
        .run();
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("error[flux-apply-fails] (ignored: listed in lints.ignore):"),
        "{}",
        out.stdout
    );
}

/// `from:` a HelmRelease Flux builds but never applies (its stage's
/// server-side apply is refused) says why, not only that it is not reached.
#[test]
fn from_a_helmrelease_in_a_refused_stage_says_which_apply_fails() {
    let unserved = COREDNS_HELMRELEASE.replace(
        "helm.toolkit.fluxcd.io/v2\n",
        "helm.toolkit.fluxcd.io/v2beta2\n",
    );
    let out = config()
        .file("gitops/apps/coredns/helmrelease.yaml", &unserved)
        .args(&["plan", "infra"])
        .run();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("no HelmRelease in `apps/cilium/helmrelease.yaml` is reached"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("HelmRelease kube-system/cilium (apps/cilium/helmrelease.yaml) is built but never applied: Kustomization/flux-system/apps's server-side apply fails, `HelmRelease/kube-system/coredns dry-run failed: no matches for kind \"HelmRelease\" in version \"helm.toolkit.fluxcd.io/v2beta2\"`"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_flux_scan_code_is_ignored_only_per_release() {
    let out = dual_managed()
        .file(
            "clusters/infra/cluster.yaml",
            &format!("{CLUSTER}lints:\n  ignore: [flux-manages-bootstrap-release]\n"),
        )
        .args(&["plan", "infra"])
        .run();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("`lints.ignore` lists `flux-manages-bootstrap-release` for every release; the Flux scan's errors are ignored one release at a time: write `- {code: flux-manages-bootstrap-release, release: NAMESPACE/NAME}`"),
        "{}",
        out.stderr
    );
    let out = dual_managed()
        .file(
            "clusters/infra/cluster.yaml",
            &format!("{CLUSTER}lints:\n  ignore:\n    - {{code: flux-manages-bootstrap-release, release: kube-system/cordns}}\n"),
        )
        .args(&["plan", "infra"])
        .run();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("`lints.ignore` names `kube-system/cordns`, which is not a release"),
        "{}",
        out.stderr
    );
}

/// `check --flux-root ../gitops` run from the config root: the root is
/// where the path points (it once resolved to `gitops` under the working
/// directory, scanned nothing and exited 0).
#[test]
fn check_with_a_relative_flux_root_above_the_config_root() {
    let test = Test::new()
        .file("infra/clusters/infra/cluster.yaml", "name: infra\n")
        .file(
            "infra/releases/core.yaml",
            RELEASES
                .replace(
                    "from: { helmRelease: apps/cilium/helmrelease.yaml }\nownership: handover\n",
                    "chart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }\n",
                )
                .as_str(),
        )
        .file("gitops/clusters/infra/apps.yaml", SYNC)
        .file("gitops/apps/coredns/helmrelease.yaml", COREDNS_HELMRELEASE);
    // Run from the config root, as a user in it would.
    let check = |root: &str, entrypoint: &str| {
        let mut cmd = test.command();
        cmd.current_dir(test.path().join("infra")).args([
            "check",
            "infra",
            "--flux-root",
            root,
            "--flux-entrypoint",
            entrypoint,
        ]);
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stdout, stderr) = check("../gitops", "clusters/infra");
    assert_eq!(code, Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("error[flux-manages-bootstrap-release]"),
        "{stdout}"
    );
    assert!(stdout.contains("scanned 2 files"), "{stdout}");

    // A root or entrypoint that is not there is an error naming the path
    // as resolved, never an empty scan.
    let (code, _, stderr) = check("../gitopz", "clusters/infra");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--flux-root `../gitopz` resolves to `"),
        "{stderr}"
    );
    assert!(stderr.contains("gitopz`"), "{stderr}");
    let (code, _, stderr) = check("../gitops", "clusters/edge");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("the Flux entrypoint `clusters/edge` resolves to `"),
        "{stderr}"
    );
}

/// An entrypoint that holds no file Flux would apply proves nothing: exit 2.
#[test]
fn a_flux_tree_in_which_the_scan_reads_no_file_is_an_error() {
    let test = config().file("gitops/clusters/empty/README.md", "nothing here\n");
    let out = test
        .command()
        .args(["check", "infra", "--flux-entrypoint", "clusters/empty"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the Flux scan of cluster `infra` read no file at `"),
        "{stderr}"
    );
}
