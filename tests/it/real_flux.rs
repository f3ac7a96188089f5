//! The real tier with Flux (docs/design.md#real-environment): the
//! `bootstrap` binary and the real helm 4 on the real control plane
//! (crates/testkit/src/realenv/), with the real source-controller,
//! helm-controller and kustomize-controller reconciling a GitOps tree served
//! by a git server on loopback, and charts from `../shared/charts` served
//! as a HelmRepository (crates/testkit/src/realflux.rs).
//!
//! - adoption: a `handover` release bootstrap installed is adopted by the
//!   real helm-controller without a workload noticing; a drifted value makes
//!   helm-controller roll the workload;
//! - the dual-management outage (examples/flux-dual-management/broken):
//!   the admission guard denies the HelmRelease the real kustomize-controller
//!   applies; without the guard the HelmRelease is created, and `status`
//!   and `apply` refuse;
//! - the fleet ResourceSet (examples/fleet) rendered by the real
//!   flux-operator CLI is what the project's own expander makes of it;
//! - `from:` values (from_values): what bootstrap composes from a
//!   HelmRelease is what the real helm-controller gives helm.
//!
//! Reported as ignored unless built with cfg(real_flux) (build.rs: the tools
//! of `tools/realenv/build`, Flux's included, are linked in
//! tools/realenv/.bin).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::common;
use serde_json::{Value, json};
use testkit::builder::{copy_dir, repo_root};
use testkit::realenv::{self, ChartRepo, ControlPlane, outcomes};
use testkit::realflux::{self, Flux, GitServer, ready};

mod from_values;

/// The real charts, used in place (build.rs sets `cfg(shared_charts)` and
/// their directory where they are).
fn charts() -> PathBuf {
    let dir = option_env!("BOOTSTRAP_TEST_CHARTS_DIR").unwrap_or("../shared/charts");
    PathBuf::from(dir)
}

/// The chart repository of this test process, packaged once by the real
/// helm 4.
fn repo() -> &'static ChartRepo {
    static REPO: OnceLock<ChartRepo> = OnceLock::new();
    REPO.get_or_init(|| {
        let charts = charts();
        let dirs: Vec<PathBuf> = ["cilium", "coredns", "prometheus-operator-crds"]
            .iter()
            .map(|n| charts.join(n))
            .collect();
        ChartRepo::serve(&realenv::helm(4), &dirs)
    })
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// bootstrap and the real helm 4 on a control plane with Flux, on a config
/// root that is also the git repository Flux syncs.
struct Real {
    flux: Flux,
    plane: ControlPlane,
    root: tempfile::TempDir,
    git: Option<GitServer>,
    /// helm's homes, bootstrap's chart cache.
    home: tempfile::TempDir,
}

impl Real {
    fn start(root: tempfile::TempDir) -> Real {
        let plane = ControlPlane::start();
        let flux = Flux::start(&plane);
        Real {
            flux,
            plane,
            root,
            git: None,
            home: tempfile::tempdir().unwrap(),
        }
    }

    fn env(&self, cmd: &mut Command) {
        common::isolate(cmd, &self.plane.kubeconfig, self.home.path());
    }

    fn run(&self, args: &[&str]) -> Run {
        let mut cmd = Command::new(testkit::bootstrap());
        cmd.current_dir(self.root.path())
            .args(args)
            .arg("--dir")
            .arg(self.root.path())
            .arg("--helm")
            .arg(realenv::helm(4));
        self.env(&mut cmd);
        let out = realenv::output_within(&mut cmd, realenv::COMMAND_LIMIT);
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// The JSON lines of `bootstrap COMMAND infra ARGS --output json`,
    /// asserting its exit code.
    fn json(&self, code: i32, command: &str, args: &[&str]) -> Vec<Value> {
        let mut argv = vec![command, "infra"];
        argv.extend_from_slice(args);
        argv.extend_from_slice(&["--output", "json"]);
        let run = self.run(&argv);
        assert_eq!(
            run.code,
            code,
            "bootstrap {} (logs: {}):\n{}\n{}",
            argv.join(" "),
            self.plane.logs().display(),
            run.stderr,
            run.stdout
        );
        if command == "status" {
            // One document (apply and destroy print one event a line).
            return vec![
                serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout)),
            ];
        }
        run.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// The real helm's answer to `helm ARGS` against this cluster.
    fn helm(&self, args: &[&str]) -> String {
        let mut cmd = Command::new(realenv::helm(4));
        cmd.args(args);
        self.env(&mut cmd);
        let out = realenv::output_within(&mut cmd, realenv::COMMAND_LIMIT);
        assert!(
            out.status.success(),
            "helm {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The revisions of a Helm release: (revision, status, description).
    fn history(&self, release: &str) -> Vec<(i64, String, String)> {
        let out = self.helm(&["history", release, "-n", "kube-system", "-o", "json"]);
        let entries: Vec<Value> = serde_json::from_str(&out).unwrap();
        entries
            .iter()
            .map(|e| {
                (
                    e["revision"].as_i64().unwrap(),
                    e["status"].as_str().unwrap_or_default().to_string(),
                    e["description"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }

    /// Serves `tree` as the git repository and points a GitRepository
    /// `flux-system/flux-system` at it.
    fn serve_git(&mut self, tree: &Path) {
        let git = GitServer::serve(tree);
        let repository = json!({
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "GitRepository",
            "metadata": {"name": "flux-system", "namespace": "flux-system"},
            "spec": {"interval": "10m", "ref": {"branch": "main"}, "url": git.url},
        });
        self.create(&repository);
        self.git = Some(git);
    }

    /// Creates a namespaced object by its apiVersion and kind.
    fn create(&self, object: &Value) -> Value {
        let path = collection(object);
        self.plane
            .api()
            .create(&path, object)
            .unwrap_or_else(|e| panic!("creating {path}: {e}"))
    }

    /// Waits for the Flux object at `path` to be Ready=`status`; returns it.
    fn wait_ready(&mut self, path: &str, status: &str, timeout: Duration) -> Value {
        let what = format!("{path} Ready={status}");
        self.wait_object(path, &what, timeout, |o| {
            ready(o).is_some_and(|(s, _, _)| s == status)
        })
    }

    /// Waits until a HelmRelease is Ready=True and its `status.history`
    /// holds the release. helm-controller's status patch (fluxcd/pkg
    /// `runtime/patch`) writes the conditions before the rest of the
    /// status, so Ready=True alone can be read before the history it
    /// summarises.
    fn wait_released(&mut self, path: &str, timeout: Duration) -> Value {
        let what = format!("{path} Ready=True with status.history");
        self.wait_object(path, &what, timeout, |o| {
            ready(o).is_some_and(|(s, _, _)| s == "True")
                && o.pointer("/status/history/0").is_some()
        })
    }

    /// Waits until the object at `path` satisfies `done`, printing the last
    /// one read if it never does.
    fn wait_object(
        &mut self,
        path: &str,
        what: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let mut last = None;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.flux.wait(&self.plane, what, timeout, |plane| {
                let object = plane.api().get(path);
                last = object.clone();
                object.filter(|o| done(o))
            })
        }));
        match result {
            Ok(object) => object,
            Err(e) => {
                eprintln!("{path} at the timeout: {}", last.unwrap_or(Value::Null));
                std::panic::resume_unwind(e)
            }
        }
    }

    /// Asks a Flux object to reconcile now.
    fn reconcile(&self, path: &str) {
        let now = format!("{:?}", std::time::SystemTime::now());
        self.plane
            .api()
            .merge_patch(
                path,
                &json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": now}}}),
            )
            .unwrap_or_else(|e| panic!("requesting a reconcile of {path}: {e}"));
    }
}

/// The API path of the collection a namespaced object goes to.
fn collection(object: &Value) -> String {
    let api_version = object["apiVersion"].as_str().unwrap();
    let namespace = object["metadata"]["namespace"].as_str().unwrap();
    let plural = match object["kind"].as_str().unwrap() {
        "GitRepository" => "gitrepositories",
        "HelmRepository" => "helmrepositories",
        "Kustomization" => "kustomizations",
        "HelmRelease" => "helmreleases",
        other => panic!("no path for {other}"),
    };
    format!("/apis/{api_version}/namespaces/{namespace}/{plural}")
}

/// The documents of a YAML file.
fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

// ---------------------------------------------------------------------------
// Adoption

/// A handover config root after examples/handover, its charts from the
/// loopback HelmRepository instead of OCI registries. `coredns_override` is
/// the cluster's override of coredns's values (YAML under `values:`).
fn handover_root(coredns_override: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let full = root.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    };
    let url = &repo().url;
    write(
        "clusters/infra/cluster.yaml",
        &format!(
            "name: infra\nflux:\n  root: .\n  entrypoint: kubernetes/clusters/infra\n\
             overrides:\n  coredns:\n    values:\n{coredns_override}"
        ),
    );
    write(
        "releases/core.yaml",
        "name: cilium\nnamespace: kube-system\n\
         from: { helmRelease: kubernetes/apps/kube-system/cilium/app/helmrelease.yaml }\n\
         ownership: handover\nhooks:\n  postsync:\n    - rollout: { kind: DaemonSet, name: cilium }\n\
         ---\n\
         name: coredns\nnamespace: kube-system\nfrom: { helmRelease: kube-system/coredns }\n\
         ownership: handover\nneeds: [cilium]\nhooks:\n  postsync:\n    - rollout: { kind: Deployment, name: coredns }\n",
    );
    // The GitRepository's URL is set in the cluster (Real::serve_git); the
    // tree's own is what `check` reads and never fetched.
    write(
        "kubernetes/clusters/infra/flux-system/gotk-sync.yaml",
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-system\n  namespace: flux-system\n\
         spec:\n  interval: 10m\n  ref:\n    branch: main\n  url: https://git.example.com/infra/gitops.git\n",
    );
    write(
        "kubernetes/clusters/infra/flux-system/charts.yaml",
        &format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: charts\n  namespace: flux-system\n\
             spec:\n  interval: 1h\n  url: {url}\n"
        ),
    );
    write(
        "kubernetes/clusters/infra/apps.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: cluster-apps\n  namespace: flux-system\n\
         spec:\n  interval: 1h\n  path: ./kubernetes/apps/kube-system\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n\
         \x20 postBuild:\n    substitute:\n      K8S_SERVICE_HOST: 10.25.11.10\n",
    );
    write(
        "kubernetes/apps/kube-system/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: kube-system\nresources:\n  - ./cilium/app\n  - ./coredns/app\n",
    );
    write(
        "kubernetes/apps/kube-system/cilium/app/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ./helmrelease.yaml\n\
         configMapGenerator:\n  - name: cilium-values\n    files:\n      - values.yaml=./values.yaml\n\
         generatorOptions:\n  disableNameSuffixHash: true\n",
    );
    write(
        "kubernetes/apps/kube-system/cilium/app/values.yaml",
        "ipam:\n  mode: kubernetes\nipv4NativeRoutingCIDR: 10.244.0.0/16\nroutingMode: native\nautoDirectNodeRoutes: true\n",
    );
    write(
        "kubernetes/apps/kube-system/cilium/app/helmrelease.yaml",
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: cilium\n\
         spec:\n  interval: 1h\n  chart:\n    spec:\n      chart: cilium\n      version: 1.18.2\n\
         \x20     sourceRef:\n        kind: HelmRepository\n        name: charts\n        namespace: flux-system\n\
         \x20 valuesFrom:\n    - kind: ConfigMap\n      name: cilium-values\n\
         \x20 values:\n    cluster:\n      name: infra\n      id: 1\n    kubeProxyReplacement: true\n\
         \x20   k8sServiceHost: ${K8S_SERVICE_HOST}\n    k8sServicePort: 6443\n    hubble:\n      enabled: true\n\
         \x20   operator:\n      replicas: 1\n",
    );
    write(
        "kubernetes/apps/kube-system/coredns/app/kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ./helmrelease.yaml\n",
    );
    write(
        "kubernetes/apps/kube-system/coredns/app/helmrelease.yaml",
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: coredns\n\
         spec:\n  interval: 1h\n  dependsOn:\n    - name: cilium\n  chart:\n    spec:\n      chart: coredns\n      version: 1.44.3\n\
         \x20     sourceRef:\n        kind: HelmRepository\n        name: charts\n        namespace: flux-system\n\
         \x20 values:\n    fullnameOverride: coredns\n    replicaCount: 2\n    k8sAppLabelOverride: kube-dns\n\
         \x20   service:\n      name: kube-dns\n      clusterIP: 10.96.0.10\n",
    );
    root
}

/// What a workload feels of a change: its generation and pod template, its
/// pods (uid and template hash label) and its ReplicaSets or
/// ControllerRevisions.
#[derive(Debug, PartialEq)]
pub(crate) struct Felt {
    generation: Value,
    template: Value,
    pods: BTreeSet<(String, String)>,
    revisions: BTreeSet<String>,
}

/// The Deployments and DaemonSets of kube-system, by `Kind/name`.
pub(crate) fn workloads(plane: &ControlPlane) -> BTreeMap<String, (Felt, Value)> {
    let api = plane.api();
    let pods = api.list("/api/v1/namespaces/kube-system/pods");
    let owned_by = |uid: &Value, items: &[Value]| -> Vec<Value> {
        items
            .iter()
            .filter(|o| {
                o["metadata"]["ownerReferences"]
                    .as_array()
                    .is_some_and(|refs| refs.iter().any(|r| &r["uid"] == uid))
            })
            .cloned()
            .collect()
    };
    let replica_sets = api.list("/apis/apps/v1/namespaces/kube-system/replicasets");
    let revisions = api.list("/apis/apps/v1/namespaces/kube-system/controllerrevisions");
    let mut out = BTreeMap::new();
    for (kind, plural, hash) in [
        ("Deployment", "deployments", "pod-template-hash"),
        ("DaemonSet", "daemonsets", "controller-revision-hash"),
    ] {
        for object in api.list(&format!("/apis/apps/v1/namespaces/kube-system/{plural}")) {
            let uid = &object["metadata"]["uid"];
            let children = if kind == "Deployment" {
                owned_by(uid, &replica_sets)
            } else {
                owned_by(uid, &revisions)
            };
            let mut own_pods = BTreeSet::new();
            for child in children.iter().chain(std::iter::once(&object)) {
                for pod in owned_by(&child["metadata"]["uid"], &pods) {
                    own_pods.insert((
                        pod["metadata"]["uid"].as_str().unwrap().to_string(),
                        pod["metadata"]["labels"][hash]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                    ));
                }
            }
            let felt = Felt {
                generation: object["metadata"]["generation"].clone(),
                template: object["spec"]["template"].clone(),
                pods: own_pods,
                revisions: children
                    .iter()
                    .map(|c| c["metadata"]["name"].as_str().unwrap().to_string())
                    .collect(),
            };
            let name = object["metadata"]["name"].as_str().unwrap();
            out.insert(
                format!("{kind}/{name}"),
                (felt, object["metadata"]["labels"].clone()),
            );
        }
    }
    out
}

/// Every object of a Helm release's manifest as the API server has it, by
/// `Kind/namespace/name`: its labels and, for everything but workloads, the
/// rest of it without status and metadata.
fn release_objects(real: &Real, release: &str) -> BTreeMap<String, Value> {
    let manifest = real.helm(&["get", "manifest", release, "-n", "kube-system"]);
    let api = real.plane.api();
    serde_saphyr::from_multiple::<Value>(&manifest)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .map(|doc| {
            let path = api.path_of(&doc, "kube-system");
            let o = api
                .get(&path)
                .unwrap_or_else(|| panic!("{release}: {path} is missing"));
            let key = format!(
                "{}/{}/{}",
                o["kind"].as_str().unwrap(),
                o["metadata"]["namespace"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap()
            );
            let mut body = o.clone();
            if let Some(map) = body.as_object_mut() {
                map.remove("status");
                map.remove("metadata");
            }
            (
                key,
                json!({"labels": o["metadata"]["labels"], "body": body}),
            )
        })
        .collect()
}

/// The labels `after` has that `before` lacks, and whether any other label
/// changed.
pub(crate) fn added_labels(
    before: &Value,
    after: &Value,
) -> (BTreeMap<String, String>, Vec<String>) {
    let empty = serde_json::Map::new();
    let before = before.as_object().unwrap_or(&empty);
    let after = after.as_object().unwrap_or(&empty);
    let mut added = BTreeMap::new();
    let mut changed = Vec::new();
    for (k, v) in after {
        match before.get(k) {
            None => {
                added.insert(k.clone(), v.as_str().unwrap_or_default().to_string());
            }
            Some(old) if old != v => changed.push(format!("{k}: {old} -> {v}")),
            Some(_) => {}
        }
    }
    for k in before.keys().filter(|k| !after.contains_key(*k)) {
        changed.push(format!("{k} removed"));
    }
    (added, changed)
}

pub(crate) fn origin_labels(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("helm.toolkit.fluxcd.io/name".to_string(), name.to_string()),
        (
            "helm.toolkit.fluxcd.io/namespace".to_string(),
            "kube-system".to_string(),
        ),
    ])
}

fn both(outcome: &str) -> BTreeMap<String, String> {
    ["kube-system/cilium", "kube-system/coredns"]
        .iter()
        .map(|r| (r.to_string(), outcome.to_string()))
        .collect()
}

/// Serves the config root as the git repository and creates what the
/// tree's entrypoint declares besides its own sync (which would point the
/// GitRepository away from the loopback server): the HelmRepository and the
/// Kustomization `cluster-apps`, which kustomize-controller reconciles.
fn sync_tree(real: &mut Real) {
    let tree = real.root.path().to_path_buf();
    real.serve_git(&tree);
    let entrypoint = tree.join("kubernetes/clusters/infra");
    for file in ["flux-system/charts.yaml", "apps.yaml"] {
        for object in documents(&entrypoint.join(file)) {
            real.create(&object);
        }
    }
}

#[test]
#[cfg_attr(
    not(all(real_flux, shared_charts)),
    ignore = "needs the real test environment with Flux (`tools/realenv/build`, with flux-controllers and flux-operator) and the real charts (../shared/charts, BOOTSTRAP_TEST_CHARTS=DIR or scripts/pull-test-charts)"
)]
fn helm_controller_adopts_a_handover_release_without_a_workload_noticing() {
    let _slot = realenv::one_at_a_time();
    let mut real = Real::start(handover_root("      replicaCount: 2\n"));

    // The tree is consistent: check proves both adoptions change nothing.
    let check = real.run(&["check", "infra"]);
    assert_eq!(check.code, 0, "{}\n{}", check.stdout, check.stderr);

    let events = real.json(0, "apply", &[]);
    assert_eq!(outcomes(&events), both("installed"));
    let before = workloads(&real.plane);
    assert!(
        before.contains_key("DaemonSet/cilium")
            && before.contains_key("Deployment/cilium-operator")
            && before.contains_key("Deployment/coredns"),
        "{:?}",
        before.keys()
    );
    let objects_before: BTreeMap<&str, BTreeMap<String, Value>> = ["cilium", "coredns"]
        .into_iter()
        .map(|r| (r, release_objects(&real, r)))
        .collect();
    let status = real.json(0, "status", &[]);
    for release in status[0]["releases"].as_array().unwrap() {
        assert!(
            release["handover"]
                .as_str()
                .is_some_and(|h| h.starts_with("awaiting adoption")),
            "{release}"
        );
    }

    // Flux syncs the tree: the guard admits both HelmReleases (handover
    // entries) and the real helm-controller adopts both releases.
    sync_tree(&mut real);
    for name in ["cilium", "coredns"] {
        let path =
            format!("/apis/helm.toolkit.fluxcd.io/v2/namespaces/kube-system/helmreleases/{name}");
        let hr = real.wait_released(&path, Duration::from_secs(300));
        let history = hr["status"]["history"].as_array().expect("status.history");
        assert_eq!(history[0]["name"], name, "{hr}");
        // helm-controller upgraded the release: one new revision.
        let revisions = real.history(name);
        assert_eq!(revisions.len(), 2, "{name}: {revisions:?}");
        assert_eq!(history[0]["version"], 2, "{hr}");
    }

    // Nothing a workload feels: same generation, template, pods, hashes.
    let after = workloads(&real.plane);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    for (key, (felt, labels)) in &before {
        let (felt_after, labels_after) = &after[key];
        assert_eq!(felt, felt_after, "{key} felt the adoption");
        let (added, changed) = added_labels(labels, labels_after);
        assert_eq!(changed, Vec::<String>::new(), "{key}");
        let release = if key.contains("coredns") {
            "coredns"
        } else {
            "cilium"
        };
        assert_eq!(added, origin_labels(release), "{key}");
    }
    // Every object of both releases: only the origin labels added.
    let mut other_changes = Vec::new();
    for (release, objects) in &objects_before {
        let now = release_objects(&real, release);
        assert_eq!(
            objects.keys().collect::<Vec<_>>(),
            now.keys().collect::<Vec<_>>(),
            "{release}: the adoption changed the set of objects"
        );
        for (key, old) in objects {
            let new = &now[key];
            let (added, changed) = added_labels(&old["labels"], &new["labels"]);
            assert_eq!(changed, Vec::<String>::new(), "{key}");
            assert_eq!(added, origin_labels(release), "{key}");
            if old["body"] != new["body"] {
                other_changes.push(key.clone());
            }
        }
    }
    assert_eq!(
        other_changes,
        Vec::<String>::new(),
        "objects the adoption changed beyond their labels"
    );

    // status says adopted, apply leaves them alone, destroy leaves them.
    let status = real.json(0, "status", &[]);
    for release in status[0]["releases"].as_array().unwrap() {
        assert!(
            release["handover"]
                .as_str()
                .is_some_and(|h| h.starts_with("adopted by Flux (HelmRelease kube-system/")),
            "{release}"
        );
    }
    let events = real.json(0, "apply", &[]);
    assert_eq!(outcomes(&events), both("adopted"));
    let events = real.json(0, "destroy", &["--yes"]);
    assert_eq!(outcomes(&events), both("adopted"));
    for name in ["cilium", "coredns"] {
        let revisions = real.history(name);
        assert_eq!(revisions.len(), 2, "{name}: {revisions:?}");
        assert_eq!(revisions[1].1, "deployed", "{name}: {revisions:?}");
    }
    assert_eq!(workloads(&real.plane), after);
}

#[test]
#[cfg_attr(
    not(all(real_flux, shared_charts)),
    ignore = "needs the real test environment with Flux (`tools/realenv/build`, with flux-controllers and flux-operator) and the real charts (../shared/charts, BOOTSTRAP_TEST_CHARTS=DIR or scripts/pull-test-charts)"
)]
fn a_drifted_value_makes_helm_controller_roll_the_workload() {
    let _slot = realenv::one_at_a_time();
    // bootstrap installs coredns with other resources than the HelmRelease.
    let mut real = Real::start(handover_root(
        "      replicaCount: 2\n      resources:\n        limits:\n          memory: 256Mi\n",
    ));
    let check = real.run(&["check", "infra"]);
    assert_eq!(check.code, 1, "{}\n{}", check.stdout, check.stderr);
    assert!(
        check.stdout.contains("handover-drift") && check.stdout.contains("resources.limits.memory"),
        "{}",
        check.stdout
    );

    let events = real.json(0, "apply", &[]);
    assert_eq!(outcomes(&events), both("installed"));
    let before = workloads(&real.plane);

    sync_tree(&mut real);
    let path = "/apis/helm.toolkit.fluxcd.io/v2/namespaces/kube-system/helmreleases/coredns";
    real.wait_ready(path, "True", Duration::from_secs(300));
    // The Deployment rolls: a new generation and template, new pods.
    let template = real.flux.wait(
        &real.plane,
        "coredns rolled by helm-controller",
        Duration::from_secs(120),
        |plane| {
            let now = workloads(plane);
            let (felt, _) = &now["Deployment/coredns"];
            let old = &before["Deployment/coredns"].0;
            let replaced = felt.pods.len() == 2 && felt.pods.is_disjoint(&old.pods);
            (replaced && felt.generation != old.generation).then(|| felt.template.clone())
        },
    );
    let memory = template["spec"]["containers"][0]["resources"]["limits"]["memory"].clone();
    assert_eq!(
        memory, "128Mi",
        "the chart's default, the HelmRelease's value"
    );
    // cilium had no drift: untouched.
    let after = workloads(&real.plane);
    assert_eq!(before["DaemonSet/cilium"].0, after["DaemonSet/cilium"].0);
}

// ---------------------------------------------------------------------------
// The dual-management outage

/// The config root bootstrap applies, examples/flux-dual-management/fixed,
/// with cilium's chart from the loopback repository and the PrometheusRule
/// CRD the Flux Kustomization needs (prometheus-operator-crds, CRDs only).
fn fixed_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    copy_dir(
        &repo_root().join("examples/flux-dual-management/fixed"),
        root.path(),
    );
    let url = &repo().url;
    let releases = root.path().join("releases/core.yaml");
    let text = std::fs::read_to_string(&releases).unwrap();
    assert!(text.contains("repo: https://helm.cilium.io"), "{text}");
    let text = text.replace("repo: https://helm.cilium.io", &format!("repo: {url}"))
        + &format!(
            "---\nname: prometheus-operator-crds\nnamespace: observability\nchart:\n  repo: {url}\n  name: prometheus-operator-crds\n  version: 24.0.1\ncrds: only\n"
        );
    std::fs::write(&releases, text).unwrap();
    root
}

const HELMRELEASE: &str =
    "/apis/helm.toolkit.fluxcd.io/v2/namespaces/kube-system/helmreleases/cilium";
const KS_CILIUM: &str =
    "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations/cilium";

#[test]
#[cfg_attr(
    not(all(real_flux, shared_charts)),
    ignore = "needs the real test environment with Flux (`tools/realenv/build`, with flux-controllers and flux-operator) and the real charts (../shared/charts, BOOTSTRAP_TEST_CHARTS=DIR or scripts/pull-test-charts)"
)]
fn the_dual_management_outage_is_denied_by_the_guard_and_refused_without_it() {
    let _slot = realenv::one_at_a_time();
    // bootstrap applies the fixed tree; the broken one is what Flux gets
    // (the base listed again after bootstrap ran, check not run on it).
    let mut real = Real::start(fixed_root());

    let events = real.json(0, "apply", &[]);
    assert_eq!(outcomes(&events)["kube-system/cilium"], "installed");
    let before = workloads(&real.plane);
    let revisions = real.history("cilium");

    // Flux reconciles the tree from infrastructure.yaml, as the clusters
    // did: the Kustomization `cilium` applies the HelmRelease.
    let broken = repo_root().join("examples/flux-dual-management/broken");
    real.serve_git(&broken);
    let infrastructure = documents(&broken.join("kubernetes/clusters/infra/infrastructure.yaml"));
    real.create(&infrastructure[0]);
    let ks = real.wait_ready(KS_CILIUM, "False", Duration::from_secs(180));
    let (_, reason, message) = ready(&ks).unwrap();
    assert!(
        message.contains("bootstrap-ownership-guard") && message.contains("HelmRelease"),
        "the Kustomization does not report the guard's denial ({reason}): {message}"
    );
    assert_eq!(real.plane.api().get(HELMRELEASE), None);
    assert_eq!(real.history("cilium"), revisions);
    assert_eq!(workloads(&real.plane), before);

    // Without the guard (`guard: false`; the policy the first apply
    // installed is removed too, as on a cluster that never had it), the
    // HelmRelease gets in.
    let cluster = real.root.path().join("clusters/infra/cluster.yaml");
    let text = std::fs::read_to_string(&cluster).unwrap();
    std::fs::write(&cluster, format!("{text}guard: false\n")).unwrap();
    for path in [
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/bootstrap-ownership-guard",
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/bootstrap-ownership-guard",
    ] {
        real.plane.api().delete(path).unwrap();
    }
    // The API server drops the policy from its admission chain a moment
    // after the delete: wait until a dry run of the HelmRelease gets in, so
    // the reconcile asked for below is not denied once more (its next try
    // would be in 10 minutes).
    let probe = json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "cilium", "namespace": "kube-system"},
        "spec": {"interval": "1h", "chart": {"spec": {"chart": "cilium", "sourceRef": {"kind": "HelmRepository", "name": "cilium"}}}},
    });
    real.flux.wait(
        &real.plane,
        "the API server to drop the guard",
        Duration::from_secs(60),
        |plane| {
            plane
                .api()
                .create(
                    "/apis/helm.toolkit.fluxcd.io/v2/namespaces/kube-system/helmreleases?dryRun=All",
                    &probe,
                )
                .ok()
        },
    );
    real.reconcile(KS_CILIUM);
    real.flux.wait(
        &real.plane,
        "the HelmRelease applied",
        Duration::from_secs(180),
        |plane| plane.api().get(HELMRELEASE),
    );

    let status = real.run(&["status", "infra"]);
    assert_eq!(status.code, 1, "{}\n{}", status.stdout, status.stderr);
    assert!(
        status.stdout.contains("HelmRelease kube-system/cilium"),
        "{}",
        status.stdout
    );
    let apply = real.run(&["apply", "infra"]);
    assert_eq!(apply.code, 1, "{}\n{}", apply.stdout, apply.stderr);
    assert!(
        apply.stderr.contains("HelmRelease kube-system/cilium")
            && apply.stderr.contains("nothing was changed"),
        "{}",
        apply.stderr
    );
    assert_eq!(real.history("cilium"), revisions);
}

// ---------------------------------------------------------------------------
// Fleet

/// `flux-operator build resourceset -f FILE`: the objects it renders.
fn build_resourceset(file: &Path) -> Vec<Value> {
    let out = realenv::output_within(
        Command::new(realflux::flux_operator())
            .args(["build", "resourceset", "-f"])
            .arg(file),
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "flux-operator build resourceset -f {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_saphyr::from_multiple::<Value>(&String::from_utf8_lossy(&out.stdout))
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

#[test]
#[cfg_attr(
    not(flux_operator),
    ignore = "needs the real flux-operator CLI: run `tools/realenv/build flux-operator`"
)]
fn the_fleet_resourceset_renders_as_the_project_expands_it() {
    let file = repo_root().join("examples/fleet/flux-operator/resourceset.yaml");
    let outer = build_resourceset(&file);
    let dir = tempfile::tempdir().unwrap();
    let mut jobs = Vec::new();
    for (i, child) in outer.iter().enumerate() {
        assert_eq!(child["kind"], "ResourceSet", "{child}");
        let path = dir.path().join(format!("{i}.yaml"));
        std::fs::write(&path, serde_json::to_string(child).unwrap()).unwrap();
        jobs.extend(build_resourceset(&path));
    }
    // The CLI labels every object with the ResourceSet that generated it
    // (as the operator does when it applies them); the project's expander
    // models what is generated, not the labels the apply adds.
    let strip = |objects: Vec<Value>, parents: &[&str]| -> Vec<Value> {
        assert_eq!(objects.len(), parents.len());
        objects
            .into_iter()
            .zip(parents)
            .map(|(mut object, parent)| {
                let labels = object["metadata"]["labels"].as_object_mut().unwrap();
                let name = labels.remove("resourceset.fluxcd.controlplane.io/name");
                let namespace = labels.remove("resourceset.fluxcd.controlplane.io/namespace");
                let empty = labels.is_empty();
                assert_eq!(
                    (name, namespace),
                    (Some(json!(parent)), Some(json!("fleet"))),
                    "{object}"
                );
                if empty {
                    object["metadata"].as_object_mut().unwrap().remove("labels");
                }
                object
            })
            .collect()
    };
    let (expected_outer, expected_jobs) = fleet_expanded(&file);
    assert_eq!(strip(outer, &["bootstrap-fleet"; 2]), expected_outer);
    assert_eq!(
        strip(jobs, &["bootstrap-prod-eu-1", "bootstrap-prod-us-1"]),
        expected_jobs
    );
}

/// The project's own expansion (src/flux/resourceset.rs), as
/// tests/fleet_examples.rs asserts it.
fn fleet_expanded(file: &Path) -> (Vec<Value>, Vec<Value>) {
    use bootstrap::flux::object::Object;
    use bootstrap::flux::resourceset;
    let object = |body: &Value| Object {
        api_version: body["apiVersion"].as_str().unwrap().to_string(),
        kind: body["kind"].as_str().unwrap().to_string(),
        name: body["metadata"]["name"].as_str().unwrap().to_string(),
        namespace: body["metadata"]["namespace"].as_str().map(str::to_string),
        file: file.display().to_string(),
        chain: Vec::new(),
        body: body.clone(),
        previous_ids: Vec::new(),
        applier: None,
        quoted: Default::default(),
        bare_nulls: Default::default(),
    };
    let fleet = documents(file);
    let outer = resourceset::expand(&object(&fleet[0]), &[]);
    assert_eq!(outer.problems, Vec::<String>::new());
    let mut jobs = Vec::new();
    for child in &outer.objects {
        let inner = resourceset::expand(&object(child), &[]);
        assert_eq!(inner.problems, Vec::<String>::new());
        jobs.extend(inner.objects);
    }
    (outer.objects, jobs)
}
