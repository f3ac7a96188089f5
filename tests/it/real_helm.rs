//! The real-helm tier: the real `bootstrap` binary with `--helm
//! tests/it/real_helm/helm`, a helm front end over the REAL Helm v4 engine (the
//! Helm Go SDK in the helm-python-sdk package), rendering the real charts at
//! the shipped versions from `../shared/charts` (`REAL_HELM_CHARTS`). No
//! network; the cluster is the loopback API server (crates/kube-loopback),
//! and the one stand-in is the chart download (see the script's header).
//! What the fake helm (crates/fake-helm) only pretends, these tests get from
//! Helm itself: values merged into real templates, each chart's
//! values.schema.json, subchart conditions, `--include-crds`, and installs,
//! upgrades, hooks and uninstalls as Helm 4 performs them.
//!
//! Reported as ignored unless built with cfg(real_helm) (build.rs: the venv
//! `.venv-helm/bin/python` exists or `BOOTSTRAP_TEST_PYTHON` is set); when
//! enabled and Python or the package is missing, the tests fail and say how
//! to install it.
//!
//! Every chart the shipped catalog pins is in the mirror (external-secrets
//! 0.20.3, flux-operator 0.32.0, flux-instance 0.32.0,
//! victoria-metrics-operator-crds 0.5.1 and cloudnative-pg 0.26.0 too); the
//! tests assert that no release is left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::common;
use kube_loopback::ApiServer;
use serde_json::Value;
use testkit::builder::copy_dir;
use testkit::realenv::outcomes;

const INSTALL: &str = "python3 -m venv .venv-helm && .venv-helm/bin/pip install helm-python-sdk (then touch build.rs)";

/// The shipped releases whose charts the mirror does not hold, per
/// cluster: none, since `../shared/charts` holds every chart the catalog
/// pins.
const NOT_IN_MIRROR: &[&str] = &[];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn helm() -> PathBuf {
    repo().join("tests/it/real_helm/helm")
}

/// The interpreter with helm_python, checked once; a missing one fails the
/// test with the way to install it (never a silent pass).
fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let python = std::env::var_os("BOOTSTRAP_TEST_PYTHON")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| repo().join(".venv-helm/bin/python"));
        let probe = Command::new(&python)
            .args([
                "-c",
                "import helm_python; print(helm_python.helm_sdk_version())",
            ])
            .output();
        match probe {
            Ok(out) if out.status.success() => python,
            Ok(out) => panic!(
                "{} cannot import helm_python ({}); install it: {INSTALL}",
                python.display(),
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or_default()
            ),
            Err(e) => panic!(
                "the real-helm tier needs Python with helm-python-sdk at {} ({e}); set \
                 BOOTSTRAP_TEST_PYTHON or install it: {INSTALL}",
                python.display()
            ),
        }
    })
}

/// The chart mirror: `REAL_HELM_CHARTS`, else the real charts build.rs
/// found (cfg(shared_charts): `BOOTSTRAP_TEST_CHARTS`, `../shared/charts`
/// or `.test-charts`).
fn charts() -> PathBuf {
    let dir = std::env::var_os("REAL_HELM_CHARTS")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| option_env!("BOOTSTRAP_TEST_CHARTS_DIR").map(PathBuf::from))
        .unwrap_or_else(|| repo().join("../shared/charts"));
    assert!(
        dir.join("cilium/Chart.yaml").is_file(),
        "the real-helm tier renders the real charts in {}; set REAL_HELM_CHARTS to a directory of \
         unpacked charts by name, or get them with scripts/pull-test-charts",
        dir.display()
    );
    dir
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// The chart cache of this tier's runs: the archives `helm pull` makes of
/// the mirror's charts, shared by the tests (a cache is safe to share) and
/// kept in the build's temporary directory, never in ~/.cache.
fn chart_cache() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("real-helm-chart-cache")
}

/// `bootstrap ARGS --helm tests/it/real_helm/helm`, in the config root `dir`.
fn bootstrap_in(dir: &Path, args: &[&str], env: &[(&str, &Path)]) -> Run {
    // The script runs under `python3` from PATH and re-executes itself with
    // helm_python's interpreter; finding that one first saves a start.
    let mut path =
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).collect::<Vec<_>>();
    if let Some(bin) = python().parent() {
        path.insert(0, bin.to_path_buf());
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bootstrap"));
    cmd.current_dir(dir)
        .env("PATH", std::env::join_paths(path).expect("PATH"))
        .args(args)
        .arg("--dir")
        .arg(dir)
        .arg("--helm")
        .arg(helm())
        .env("BOOTSTRAP_TEST_PYTHON", python())
        .env("REAL_HELM_CHARTS", charts())
        .env("BOOTSTRAP_CACHE_DIR", chart_cache())
        .env("NO_COLOR", "1")
        .env_remove("KUBECONFIG")
        .env_remove("HELM_NAMESPACE")
        .env_remove("HELM_DRIVER")
        .env_remove("HELM_KUBECONTEXT");
    for (key, value) in env {
        cmd.env(key, value);
    }
    let out = cmd.output().expect("running bootstrap");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `bootstrap ARGS` on the shipped config; stdout parsed as JSON, exit 0 required.
fn bootstrap_json(args: &[&str]) -> Value {
    bootstrap_json_in(&repo(), args)
}

fn bootstrap_json_in(dir: &Path, args: &[&str]) -> Value {
    let run = bootstrap_in(dir, args, &[]);
    assert_eq!(
        run.code,
        0,
        "bootstrap {} failed:\n{}",
        args.join(" "),
        run.stderr
    );
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("bootstrap {}: {e}\n{}", args.join(" "), run.stdout))
}

/// One release of `bootstrap plan CLUSTER --output json`.
#[derive(Debug, Clone)]
struct Planned {
    id: String,
    namespace: String,
    chart: String,
    version: String,
    crds: String,
    installs: bool,
    hooks: Vec<String>,
}

impl Planned {
    /// A `manifests:` release: plan shows it as chart `manifests` without a version.
    fn is_manifests(&self) -> bool {
        self.chart == "manifests" && self.version.is_empty()
    }
}

fn plan(cluster: &str) -> Vec<Planned> {
    let plan = bootstrap_json(&["plan", cluster, "--output", "json"]);
    let str_of = |r: &Value, key: &str| r[key].as_str().unwrap_or_default().to_string();
    plan["releases"]
        .as_array()
        .expect("plan releases")
        .iter()
        .map(|r| Planned {
            id: str_of(r, "id"),
            namespace: str_of(r, "namespace"),
            chart: str_of(r, "chart"),
            version: str_of(r, "version"),
            crds: str_of(r, "crds"),
            installs: r["installs"].as_bool().unwrap_or(false),
            hooks: ["presync", "postsync"]
                .iter()
                .flat_map(|phase| r["hooks"][phase].as_array().cloned().unwrap_or_default())
                .filter_map(|h| h.as_str().map(str::to_string))
                .collect(),
        })
        .collect()
}

/// Whether the mirror holds the release's chart at the release's version.
fn in_mirror(release: &Planned) -> bool {
    let path = charts().join(&release.chart).join("Chart.yaml");
    let Ok(text) = std::fs::read_to_string(&path) else {
        return false;
    };
    let chart: Value =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    chart["version"].as_str() == Some(release.version.as_str())
}

/// The documents `bootstrap template CLUSTER RELEASE --manifests [--crds]`
/// got from the engine, and how many CRDs it left out.
fn render(cluster: &str, release: &str, crds: bool) -> (Vec<Value>, u64) {
    render_in(&repo(), cluster, release, crds).0
}

/// [`render`] in the config root `dir`, with the API versions helm was
/// given (`apiVersions`, empty for the CRD-phase render).
fn render_in(
    dir: &Path,
    cluster: &str,
    release: &str,
    crds: bool,
) -> ((Vec<Value>, u64), Vec<String>) {
    let mut args = vec![
        "template",
        cluster,
        release,
        "--manifests",
        "--output",
        "json",
    ];
    if crds {
        args.push("--crds");
    }
    let out = bootstrap_json_in(dir, &args);
    let entry = &out["releases"][0];
    let documents = entry["manifests"]
        .as_array()
        .unwrap_or_else(|| panic!("{release}: no manifests in {entry}"))
        .clone();
    let api_versions = out["apiVersions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    (
        (documents, entry["crdsOmitted"].as_u64().unwrap_or(0)),
        api_versions,
    )
}

fn kind(doc: &Value) -> &str {
    doc["kind"].as_str().unwrap_or_default()
}

fn name(doc: &Value) -> &str {
    doc["metadata"]["name"].as_str().unwrap_or_default()
}

fn find<'a>(docs: &'a [Value], kind_: &str, name_: &str) -> &'a Value {
    docs.iter()
        .find(|d| kind(d) == kind_ && name(d) == name_)
        .unwrap_or_else(|| {
            let have: Vec<String> = docs
                .iter()
                .map(|d| format!("{}/{}", kind(d), name(d)))
                .collect();
            panic!("no {kind_} {name_} among {have:?}")
        })
}

fn crd_names(docs: &[Value]) -> BTreeSet<String> {
    docs.iter()
        .filter(|d| kind(d) == "CustomResourceDefinition")
        .map(|d| name(d).to_string())
        .collect()
}

/// `group/Kind` of every kind the CRDs serve.
fn served_kinds(crds: &[Value]) -> BTreeSet<String> {
    crds.iter()
        .filter(|d| kind(d) == "CustomResourceDefinition")
        .map(|d| {
            format!(
                "{}/{}",
                d["spec"]["group"].as_str().unwrap_or_default(),
                d["spec"]["names"]["kind"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// API groups every Kubernetes API server serves without CRDs.
const BUILT_IN_GROUPS: &[&str] = &[
    "",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "apps",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
];

fn group(doc: &Value) -> &str {
    let api_version = doc["apiVersion"].as_str().unwrap_or_default();
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

const GATEWAY_API: &str = "gateway-api-v1.2.1-standard-install.yaml";

fn gateway_api_crds() -> Vec<Value> {
    let path = charts().join(GATEWAY_API);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split("\n---")
        .filter_map(|doc| serde_saphyr::from_str::<Value>(doc).ok())
        .filter(|doc| kind(doc) == "CustomResourceDefinition")
        .collect()
}

/// Renders every installed release of `cluster` whose chart the mirror holds
/// and checks what the real charts make of the shipped values: the release's
/// rollout hooks wait for workloads the chart really renders, no release
/// renders a CRD (the CRD phase owns them), and every custom resource a chart
/// renders is of a kind the CRD phase serves.
fn check_cluster(cluster: &str) -> BTreeMap<String, Vec<Value>> {
    let planned = plan(cluster);
    let not_in_mirror: Vec<&str> = planned
        .iter()
        .filter(|r| !r.is_manifests() && !in_mirror(r))
        .map(|r| r.id.as_str())
        .collect();
    assert_eq!(
        not_in_mirror.iter().copied().collect::<BTreeSet<_>>(),
        NOT_IN_MIRROR.iter().copied().collect::<BTreeSet<_>>(),
        "the releases of {cluster} this tier cannot render offline changed; update NOT_IN_MIRROR \
         and the list in the module docs"
    );

    // What the CRD phase serves, as far as the mirror can say.
    let mut served = served_kinds(&gateway_api_crds());
    for release in planned.iter().filter(|r| r.crds != "none" && in_mirror(r)) {
        let (docs, _) = render(cluster, &release.id, true);
        served.extend(served_kinds(&docs));
    }

    // The install renders: on the cluster after the CRD phase, so helm is
    // given the API versions the CRD phase serves. That phase is rendered
    // offline, so from a copy of the cluster limited to what the mirror has.
    let offline: Vec<&str> = planned
        .iter()
        .filter(|r| r.is_manifests() || in_mirror(r))
        .map(|r| r.id.split_once('/').map_or(r.id.as_str(), |(_, n)| n))
        .collect();
    let offline = offline_root(cluster, &offline);
    let mut rendered = BTreeMap::new();
    for release in planned.iter().filter(|r| r.installs && in_mirror(r)) {
        let ((docs, crds_omitted), api_versions) =
            render_in(offline.path(), cluster, &release.id, false);
        let expected: BTreeSet<String> = served
            .iter()
            .map(|group_kind| group_kind.split_once('/').unwrap().0.to_string())
            .collect();
        let given: BTreeSet<String> = api_versions
            .iter()
            .filter_map(|v| v.split('/').next().map(String::from))
            .collect();
        assert_eq!(
            given, expected,
            "{}: the API groups helm was told the cluster serves",
            release.id
        );
        assert!(
            !docs.is_empty(),
            "{}: the chart rendered nothing",
            release.id
        );
        if release.crds == "bootstrap" {
            assert_eq!(
                (crds_omitted, crd_names(&docs).len()),
                (0, 0),
                "{}: its CRDs belong to the CRD phase, yet the install renders CustomResourceDefinitions",
                release.id
            );
        }
        for hook in &release.hooks {
            let Some(target) = hook.strip_prefix("rollout of ") else {
                continue;
            };
            let (kind_, object) = target.split_once(' ').expect("rollout of KIND NS/NAME");
            let (namespace, name_) = object.split_once('/').expect("NS/NAME");
            let doc = find(&docs, kind_, name_);
            let doc_namespace = doc["metadata"]["namespace"]
                .as_str()
                .unwrap_or(&release.namespace);
            assert_eq!(
                doc_namespace, namespace,
                "{}: hook `{hook}` waits in another namespace than the chart renders",
                release.id
            );
        }
        for doc in &docs {
            if BUILT_IN_GROUPS.contains(&group(doc)) {
                continue;
            }
            let served_kind = format!("{}/{}", group(doc), kind(doc));
            assert!(
                served.contains(&served_kind),
                "{}: renders {served_kind} {}, which no CRD-phase release of {cluster} serves",
                release.id,
                name(doc)
            );
        }
        rendered.insert(release.id.clone(), docs);
    }
    assert_eq!(
        rendered.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "cert-manager/cert-manager",
            "external-secrets/external-secrets",
            "flux-system/flux-instance",
            "flux-system/flux-operator",
            "kube-system/cilium",
            "kube-system/coredns",
            "kube-system/spegel",
        ],
        "the releases of {cluster} rendered by the real engine"
    );
    rendered
}

/// The cluster's own values, seen in what the real charts render.
fn check_cluster_values(
    rendered: &BTreeMap<String, Vec<Value>>,
    cluster: &str,
    id: &str,
    cidr: &str,
    api_host: &str,
) {
    let cilium = &rendered["kube-system/cilium"];
    let config = &find(cilium, "ConfigMap", "cilium-config")["data"];
    assert_eq!(config["cluster-name"], cluster);
    assert_eq!(config["cluster-id"], id);
    assert_eq!(config["ipv4-native-routing-cidr"], cidr);
    assert_eq!(config["kube-proxy-replacement"], "true");
    assert_eq!(config["enable-gateway-api"], "true");
    let agent = &find(cilium, "DaemonSet", "cilium")["spec"]["template"]["spec"]["containers"][0];
    let env = agent["env"].as_array().expect("cilium agent env");
    assert!(
        env.iter()
            .any(|e| e["name"] == "KUBERNETES_SERVICE_HOST" && e["value"] == api_host),
        "cilium must reach the API server directly at {api_host}: {env:?}"
    );
    // The chart renders its GatewayClass only where
    // `.Capabilities.APIVersions` has gateway.networking.k8s.io/v1/GatewayClass
    // (../shared/charts/README.md): on the cluster, where the CRD phase
    // applied the Gateway API, and so in `template --manifests`, which tells
    // helm what the CRD phase serves.
    assert_eq!(
        find(cilium, "GatewayClass", "cilium")["spec"]["controllerName"],
        "io.cilium/gateway-controller"
    );

    let coredns = &rendered["kube-system/coredns"];
    assert_eq!(
        find(coredns, "Service", "kube-dns")["spec"]["clusterIP"],
        "10.96.0.10"
    );
    assert_eq!(
        find(coredns, "Deployment", "coredns")["spec"]["replicas"],
        2
    );

    let spegel = find(&rendered["kube-system/spegel"], "DaemonSet", "spegel").to_string();
    assert!(spegel.contains("/etc/cri/conf.d/hosts"), "{spegel}");
    assert!(spegel.contains("29999"), "{spegel}");
}

#[test]
#[cfg_attr(
    not(all(real_helm, shared_charts)),
    ignore = "needs helm-python-sdk (python3 -m venv .venv-helm && .venv-helm/bin/pip install helm-python-sdk, then touch build.rs) and the real charts (../shared/charts, BOOTSTRAP_TEST_CHARTS=DIR or scripts/pull-test-charts)"
)]
fn infra_renders_with_the_real_engine() {
    let rendered = check_cluster("infra");
    check_cluster_values(&rendered, "infra", "1", "10.244.0.0/16", "10.25.11.10");
}

#[test]
#[cfg_attr(
    not(all(real_helm, shared_charts)),
    ignore = "needs helm-python-sdk (python3 -m venv .venv-helm && .venv-helm/bin/pip install helm-python-sdk, then touch build.rs) and the real charts (../shared/charts, BOOTSTRAP_TEST_CHARTS=DIR or scripts/pull-test-charts)"
)]
fn apps_renders_with_the_real_engine() {
    let rendered = check_cluster("apps");
    check_cluster_values(&rendered, "apps", "2", "10.246.0.0/16", "10.25.12.10");
}

/// The CRD-phase renders of the charts: cert-manager's CRDs are templates
/// behind `crds.enabled` (switched on by its crdValues only), the
/// prometheus-operator-crds chart renders them from its `crds` subchart.
#[test]
#[cfg_attr(
    not(all(real_helm, shared_charts)),
    ignore = "needs helm-python-sdk (python3 -m venv .venv-helm && .venv-helm/bin/pip install helm-python-sdk, then touch build.rs) and the real charts (../shared/charts, BOOTSTRAP_TEST_CHARTS=DIR or scripts/pull-test-charts)"
)]
fn crd_phase_renders_of_the_charts() {
    let (docs, _) = render("infra", "cert-manager/cert-manager", true);
    assert_eq!(
        crd_names(&docs),
        [
            "certificaterequests.cert-manager.io",
            "certificates.cert-manager.io",
            "challenges.acme.cert-manager.io",
            "clusterissuers.cert-manager.io",
            "issuers.cert-manager.io",
            "orders.acme.cert-manager.io",
        ]
        .map(String::from)
        .into()
    );
    let (docs, _) = render("infra", "observability/prometheus-operator-crds", true);
    assert_eq!(
        crd_names(&docs),
        [
            "alertmanagerconfigs",
            "alertmanagers",
            "podmonitors",
            "probes",
            "prometheusagents",
            "prometheuses",
            "prometheusrules",
            "scrapeconfigs",
            "servicemonitors",
            "thanosrulers",
        ]
        .map(|n| format!("{n}.monitoring.coreos.com"))
        .into()
    );
    assert_eq!(docs.len(), 10, "prometheus-operator-crds renders only CRDs");
}

/// A config root with the shipped releases and the shipped infra cluster
/// without its GitOps scan, limited to `releases` (all in the mirror);
/// gateway-api's URL is replaced by the same file in the mirror (no network).
fn infra_root(releases: &[&str]) -> tempfile::TempDir {
    offline_root("infra", releases)
}

/// [`infra_root`] for any shipped cluster.
fn offline_root(cluster_name: &str, releases: &[&str]) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    copy_dir(&repo().join("releases"), &root.path().join("releases"));
    // flux-instance's sync hook applies the cluster's sync.yaml from there.
    copy_dir(
        &repo().join("examples/gitops"),
        &root.path().join("examples/gitops"),
    );
    let crds_yaml = root.path().join("releases/crds.yaml");
    let url = "https://github.com/kubernetes-sigs/gateway-api/releases/download/v1.2.1/standard-install.yaml";
    let text = std::fs::read_to_string(&crds_yaml).unwrap();
    assert!(
        text.contains(url),
        "the shipped gateway-api release changed"
    );
    let local = charts().join(GATEWAY_API);
    std::fs::write(&crds_yaml, text.replace(url, local.to_str().unwrap())).unwrap();
    let shipped = repo().join("clusters").join(cluster_name);
    let cluster = std::fs::read_to_string(shipped.join("cluster.yaml")).unwrap();
    let cluster = cluster.split("\nflux:").next().unwrap().to_string()
        + &format!("\nreleases: [{}]\n", releases.join(", "));
    let dir = root.path().join("clusters").join(cluster_name);
    copy_dir(&shipped, &dir);
    std::fs::write(dir.join("cluster.yaml"), cluster).unwrap();
    root
}

/// The whole CRD phase as `apply` runs it (src/apply/crds.rs: every chart of
/// the phase rendered by the engine with `--include-crds` and its crdValues,
/// `manifests:` read as they are), shown by `apply --dry-run --output json`
/// against the loopback API server; the real engine's `helm list` of the
/// preflight goes to that server too. gateway-api's URL is replaced by the
/// same file in the mirror (no network).
#[test]
#[cfg_attr(
    not(all(real_helm, shared_charts)),
    ignore = "needs helm-python-sdk (python3 -m venv .venv-helm && .venv-helm/bin/pip install helm-python-sdk, then touch build.rs) and the real charts (../shared/charts, BOOTSTRAP_TEST_CHARTS=DIR or scripts/pull-test-charts)"
)]
fn crd_phase_of_apply_dry_run() {
    let root = infra_root(&[
        "cilium",
        "coredns",
        "cert-manager",
        "prometheus-operator-crds",
        "gateway-api",
    ]);
    let cluster = Live::start();
    let events = cluster.apply(root.path(), &["--dry-run"]);
    let by_release = crds_by_release(&events, "would_apply");
    assert_eq!(
        crd_counts(&by_release),
        CRD_PHASE_COUNTS.into(),
        "CRDs of the CRD phase per release"
    );
    assert_eq!(
        by_release["kube-system/gateway-api"],
        crd_names(&gateway_api_crds())
    );
    assert_eq!(
        outcomes(&events),
        BTreeMap::from([
            (
                "cert-manager/cert-manager".to_string(),
                "would_install".to_string()
            ),
            (
                "kube-system/cilium".to_string(),
                "would_install".to_string()
            ),
            (
                "kube-system/coredns".to_string(),
                "would_install".to_string()
            ),
        ])
    );
    assert!(
        cluster.api.mutations().is_empty(),
        "a dry run changed the cluster: {:?}",
        cluster.api.mutations()
    );
}

/// The CRDs each CRD-phase release of the infra cluster applies:
/// cert-manager's 6 templates behind `crds.enabled`, prometheus-operator-crds'
/// 10 from its subchart, the Gateway API's 5.
const CRD_PHASE_COUNTS: [(&str, usize); 3] = [
    ("cert-manager/cert-manager", 6),
    ("kube-system/gateway-api", 5),
    ("observability/prometheus-operator-crds", 10),
];

/// A loopback API server and a kubeconfig naming it as `admin@infra`.
struct Live {
    api: ApiServer,
    kubeconfig: PathBuf,
    cache: PathBuf,
    _dir: tempfile::TempDir,
}

impl Live {
    fn start() -> Live {
        let api = ApiServer::start();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = api.write_kubeconfig(dir.path(), "admin@infra");
        let cache = dir.path().join("cache");
        Live {
            api,
            kubeconfig,
            cache,
            _dir: dir,
        }
    }

    /// `bootstrap COMMAND infra ARGS --output json` against this server.
    fn run(&self, root: &Path, command: &str, args: &[&str]) -> Run {
        let mut argv = vec![command, "infra"];
        argv.extend_from_slice(args);
        argv.extend_from_slice(&["--output", "json"]);
        bootstrap_in(
            root,
            &argv,
            &[
                ("KUBECONFIG", self.kubeconfig.as_path()),
                ("KUBECACHEDIR", self.cache.as_path()),
            ],
        )
    }

    /// The events of a successful `apply` (or `destroy`).
    fn apply(&self, root: &Path, args: &[&str]) -> Vec<Value> {
        self.events(root, "apply", args)
    }

    fn events(&self, root: &Path, command: &str, args: &[&str]) -> Vec<Value> {
        let run = self.run(root, command, args);
        assert_eq!(
            run.code,
            0,
            "{command} {} failed:\n{}\n{}",
            args.join(" "),
            run.stderr,
            run.stdout
        );
        run.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// The real engine's answer to `helm ARGS` against this server.
    fn helm(&self, args: &[&str]) -> String {
        let out = Command::new(helm())
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("BOOTSTRAP_TEST_PYTHON", python())
            .env("REAL_HELM_CHARTS", charts())
            .env_remove("HELM_NAMESPACE")
            .env_remove("HELM_DRIVER")
            .output()
            .expect("running tests/it/real_helm/helm");
        assert!(
            out.status.success(),
            "helm {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// release → the CRDs it applied with `change`, from `crd_applied` events.
fn crds_by_release(events: &[Value], change: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut by_release: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for event in events.iter().filter(|e| e["event"] == "crd_applied") {
        assert_eq!(event["change"], change, "{event}");
        by_release
            .entry(event["release"].as_str().unwrap_or_default().to_string())
            .or_default()
            .insert(event["crd"].as_str().unwrap_or_default().to_string());
    }
    by_release
}

fn crd_counts(by_release: &BTreeMap<String, BTreeSet<String>>) -> BTreeMap<&str, usize> {
    by_release
        .iter()
        .map(|(r, c)| (r.as_str(), c.len()))
        .collect()
}

fn all(releases: &[&str], outcome: &str) -> BTreeMap<String, String> {
    releases
        .iter()
        .map(|r| (r.to_string(), outcome.to_string()))
        .collect()
}

/// The releases of the lifecycle test that install (the others are CRD-only).
const INSTALLED: [&str; 4] = [
    "cert-manager/cert-manager",
    "kube-system/cilium",
    "kube-system/coredns",
    "kube-system/spegel",
];

/// The whole life of a cluster through the REAL Helm 4 engine against the
/// loopback API: `apply` (CRDs first and Established, hooks of the charts
/// run: cert-manager's startupapicheck Job), `apply` again (all unchanged),
/// a values change (exactly one upgrade), `status`, `destroy --crds`
/// (spegel's post-delete hook Pod runs). Helm 4 writes its release Secrets
/// in protobuf; the loopback server decodes them (crates/kube-loopback
/// src/protobuf.rs).
#[test]
#[cfg_attr(
    not(all(real_helm, shared_charts)),
    ignore = "needs helm-python-sdk (python3 -m venv .venv-helm && .venv-helm/bin/pip install helm-python-sdk, then touch build.rs) and the real charts (../shared/charts, BOOTSTRAP_TEST_CHARTS=DIR or scripts/pull-test-charts)"
)]
fn apply_lifecycle_with_the_real_engine() {
    let root = infra_root(&[
        "cilium",
        "coredns",
        "spegel",
        "cert-manager",
        "prometheus-operator-crds",
        "gateway-api",
    ]);
    let cluster = Live::start();
    let api = &cluster.api;

    // apply: the CRD phase first, every CRD Established before any release.
    let events = cluster.apply(root.path(), &[]);
    let by_release = crds_by_release(&events, "created");
    assert_eq!(crd_counts(&by_release), CRD_PHASE_COUNTS.into());
    let position = |pred: &dyn Fn(&Value) -> bool| events.iter().position(pred);
    let last_crd = events
        .iter()
        .rposition(|e| e["event"] == "crd_applied")
        .unwrap();
    let established = position(&|e| e["event"] == "crds_established").expect("crds_established");
    let first_release = position(&|e| e["event"] == "release_started").expect("release_started");
    assert!(last_crd < established && established < first_release);
    let crds = api.list("apiextensions.k8s.io/v1", "CustomResourceDefinition");
    assert_eq!(crds.len(), 21);
    for crd in &crds {
        let conditions = crd["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            conditions
                .iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True"),
            "{} is not Established",
            name(crd)
        );
        // Charts label their CRDs managed-by Helm; Helm does not own them.
        assert_ne!(
            crd["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "Helm",
            "{}",
            name(crd)
        );
    }
    assert_eq!(outcomes(&events), all(&INSTALLED, "installed"));
    // cert-manager's post-install hook ran to completion and was cleaned up
    // (hook-delete-policy) — the engine waited for the Job.
    assert!(
        api.request_log()
            .iter()
            .any(|r| r.method == "PATCH" && r.path.ends_with("/jobs/cert-manager-startupapicheck")),
        "cert-manager's startupapicheck hook did not run"
    );

    // Helm 4's release records: the ownership labels, no CRD in a manifest.
    let records: Vec<Value> = api
        .list("v1", "Secret")
        .into_iter()
        .filter(|s| s["metadata"]["labels"]["owner"] == "helm")
        .collect();
    assert_eq!(
        records.len(),
        INSTALLED.len(),
        "one release Secret per release"
    );
    for record in &records {
        let labels = &record["metadata"]["labels"];
        assert_eq!(record["type"], "helm.sh/release.v1");
        assert_eq!(
            labels["bootstrap.dev/owner"],
            "bootstrap",
            "{}",
            name(record)
        );
        assert_eq!(
            labels["bootstrap.dev/policy"],
            "bootstrap",
            "{}",
            name(record)
        );
    }
    for release in INSTALLED {
        let (namespace, release_name) = release.split_once('/').unwrap();
        let manifest = cluster.helm(&["get", "manifest", release_name, "-n", namespace]);
        assert!(!manifest.trim().is_empty(), "{release}: empty manifest");
        assert!(
            !manifest.contains("kind: CustomResourceDefinition"),
            "{release}: the release manifest holds a CRD"
        );
    }
    let ledger = api
        .get(
            "v1",
            "ConfigMap",
            Some("kube-system"),
            "bootstrap-ownership",
        )
        .expect("the ledger ConfigMap");
    let recorded: BTreeSet<String> = ledger["data"]
        .as_object()
        .expect("ledger data")
        .keys()
        .cloned()
        .collect();
    let expected: BTreeSet<String> = INSTALLED.iter().map(|r| r.replace('/', ".")).collect();
    assert_eq!(recorded, expected, "the ledger");

    // apply again: nothing to do.
    let events = cluster.apply(root.path(), &[]);
    assert_eq!(
        outcomes(&events),
        all(&INSTALLED, "unchanged"),
        "{:#}",
        events.last().unwrap()
    );
    assert_eq!(
        crd_counts(&crds_by_release(&events, "unchanged")),
        CRD_PHASE_COUNTS.into()
    );

    // A cluster override of coredns' values: exactly one upgrade. (Not the
    // cluster DNS address: a Service's clusterIP cannot change once set, and
    // the API server refuses that upgrade.)
    let cluster_yaml = root.path().join("clusters/infra/cluster.yaml");
    let text = std::fs::read_to_string(&cluster_yaml).unwrap();
    assert!(text.contains("overrides:\n"));
    std::fs::write(
        &cluster_yaml,
        text.replace(
            "overrides:\n",
            "overrides:\n  coredns:\n    values: { replicaCount: 3 }\n",
        ),
    )
    .unwrap();
    let events = cluster.apply(root.path(), &[]);
    let mut expected = all(&INSTALLED, "unchanged");
    expected.insert("kube-system/coredns".into(), "upgraded".into());
    assert_eq!(outcomes(&events), expected);
    let deployment = api
        .get("apps/v1", "Deployment", Some("kube-system"), "coredns")
        .expect("coredns Deployment");
    assert_eq!(deployment["spec"]["replicas"], 3);

    // status: every release deployed by bootstrap, up to date, ready.
    let run = cluster.run(root.path(), "status", &[]);
    assert_eq!(
        run.code, 0,
        "status failed:\n{}\n{}",
        run.stderr, run.stdout
    );
    let rows = common::status_rows(&run.stdout);
    for release in INSTALLED {
        assert_eq!(
            rows.get(release),
            Some(&common::Row::applied()),
            "status of {release}"
        );
    }

    // destroy: every release uninstalled (spegel's post-delete hook Pod
    // runs to completion), the ledger emptied, the CRDs gone.
    api.clear_request_log();
    let events = cluster.events(root.path(), "destroy", &["--yes", "--crds"]);
    assert_eq!(outcomes(&events), all(&INSTALLED, "uninstalled"));
    assert!(
        api.request_log()
            .iter()
            .any(|r| r.method == "PATCH" && r.path.ends_with("/pods/spegel-cleanup-wait")),
        "spegel's post-delete hook did not run"
    );
    assert!(
        api.list("v1", "Secret")
            .iter()
            .all(|s| s["metadata"]["labels"]["owner"] != "helm"),
        "helm release records remain"
    );
    assert!(
        api.list("apiextensions.k8s.io/v1", "CustomResourceDefinition")
            .is_empty()
    );
    let ledger = api.get(
        "v1",
        "ConfigMap",
        Some("kube-system"),
        "bootstrap-ownership",
    );
    assert!(
        ledger.is_none_or(|l| l["data"].as_object().is_none_or(|d| d.is_empty())),
        "the ledger still has entries"
    );
}

/// The front end rejects unknown flags like helm does, from its own copy of
/// Helm 4's flag table; that copy must be src/helm/flags.rs's.
#[test]
#[cfg_attr(
    not(all(real_helm, shared_charts)),
    ignore = "needs helm-python-sdk (python3 -m venv .venv-helm && .venv-helm/bin/pip install helm-python-sdk, then touch build.rs) and the real charts (../shared/charts, BOOTSTRAP_TEST_CHARTS=DIR or scripts/pull-test-charts)"
)]
fn front_end_flags_are_helm_4s() {
    use bootstrap::helm::flags::{Command as HelmCommand, Kind, accepted};

    let dump = "import json, runpy, sys\n\
                g = runpy.run_path(sys.argv[1], run_name='flags')\n\
                print(json.dumps({c: [[f['long'], f['short'], f['kind']] for f in g['GLOBAL'] + fs]\n\
                                  for c, fs in g['ACCEPTED'].items()}))";
    let out = Command::new(python())
        .args(["-c", dump])
        .arg(helm())
        .env("REAL_HELM_STAGE", "helm")
        .output()
        .expect("running python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tables: BTreeMap<String, Vec<(String, Option<String>, String)>> =
        serde_json::from_slice(&out.stdout).expect("flag tables");
    let mut compared = 0;
    for command in HelmCommand::ALL {
        let Some(table) = tables.get(command.words()) else {
            continue;
        };
        let mut ours: Vec<_> = table.clone();
        let mut helms: Vec<_> = accepted(4, command)
            .into_iter()
            .map(|f| {
                let kind = match f.kind {
                    Kind::Bool => "bool",
                    Kind::Value => "value",
                    Kind::OptValue => "opt",
                };
                (
                    f.long.to_string(),
                    f.short.map(String::from),
                    kind.to_string(),
                )
            })
            .collect();
        ours.sort();
        helms.sort();
        assert_eq!(ours, helms, "helm 4 {}: flags", command.words());
        compared += 1;
    }
    assert_eq!(
        compared,
        tables.len(),
        "the front end answers a command flags.rs does not know"
    );
}

/// A config root of cluster `infra` with `releases` (YAML) whose charts are
/// the mirror's, named by path: at hand, so `plan` and `check` render them.
fn local_chart_root(releases: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("clusters/infra")).unwrap();
    std::fs::create_dir_all(root.path().join("releases")).unwrap();
    std::fs::write(
        root.path().join("clusters/infra/cluster.yaml"),
        "name: infra\n",
    )
    .unwrap();
    let releases = releases.replace("CHARTS", charts().to_str().unwrap());
    std::fs::write(root.path().join("releases/core.yaml"), releases).unwrap();
    root
}

/// `plan` names the CRDs the real engine's CRD-phase render carries:
/// cert-manager's 6 behind `crds.enabled` (its crdValues), the 10 of
/// prometheus-operator-crds' subchart `crds/`, none for coredns.
#[test]
#[cfg_attr(
    not(all(real_helm, shared_charts)),
    ignore = "needs helm-python-sdk (python3 -m venv .venv-helm && .venv-helm/bin/pip install helm-python-sdk, then touch build.rs) and the real charts (../shared/charts, BOOTSTRAP_TEST_CHARTS=DIR or scripts/pull-test-charts)"
)]
fn plan_names_the_crds_of_the_real_charts() {
    let root = local_chart_root(
        "name: cert-manager\nnamespace: cert-manager\nchart: { path: CHARTS/cert-manager }\ncrdValues: { crds: { enabled: true } }\n---
name: prometheus-operator-crds\nnamespace: observability\nchart: { path: CHARTS/prometheus-operator-crds }\ncrds: only\n---
name: coredns\nnamespace: kube-system\nchart: { path: CHARTS/coredns }\n",
    );
    let plan = bootstrap_json_in(root.path(), &["plan", "infra", "--output", "json"]);
    let carried = |i: usize| -> BTreeSet<String> {
        serde_json::from_value(plan["crds"][i]["carried"].clone())
            .unwrap_or_else(|e| panic!("{e}: {}", plan["crds"]))
    };
    assert_eq!(plan["crds"][0]["release"], "cert-manager/cert-manager");
    assert_eq!(
        carried(0),
        [
            "certificaterequests.cert-manager.io",
            "certificates.cert-manager.io",
            "challenges.acme.cert-manager.io",
            "clusterissuers.cert-manager.io",
            "issuers.cert-manager.io",
            "orders.acme.cert-manager.io",
        ]
        .map(String::from)
        .into()
    );
    assert_eq!(plan["crds"][1]["release"], "kube-system/coredns");
    assert_eq!(carried(1), BTreeSet::new());
    assert_eq!(
        plan["crds"][2]["release"],
        "observability/prometheus-operator-crds"
    );
    assert_eq!(carried(2).len(), 10, "{}", plan["crds"][2]);
    assert!(
        carried(2)
            .iter()
            .all(|n| n.ends_with(".monitoring.coreos.com"))
    );

    let text = bootstrap_in(root.path(), &["plan", "infra"], &[]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    let phase: Vec<&str> = text
        .stdout
        .lines()
        .skip(3)
        .take(3)
        .map(str::trim_end)
        .collect();
    assert!(phase[0].starts_with("  cert-manager/cert-manager") && phase[0].ends_with("CRDs: 6 (certificaterequests.cert-manager.io, certificates.cert-manager.io, …); installed with --skip-crds"), "{}", text.stdout);
    assert!(phase[1].ends_with("no CRDs"), "{}", text.stdout);
    assert!(
        phase[2].contains("CRDs: 10 (") && phase[2].ends_with("; never installed"),
        "{}",
        text.stdout
    );
}

/// `check` learns from the real cert-manager render that the release owns
/// Deployment cert-manager-webhook, which no hook names; a name that only
/// looks like the chart's (`cert-manager-extra`) is not flagged.
#[test]
#[cfg_attr(
    not(all(real_helm, shared_charts)),
    ignore = "needs helm-python-sdk (python3 -m venv .venv-helm && .venv-helm/bin/pip install helm-python-sdk, then touch build.rs) and the real charts (../shared/charts, BOOTSTRAP_TEST_CHARTS=DIR or scripts/pull-test-charts)"
)]
fn check_finds_health_checks_on_workloads_of_the_real_chart_render() {
    let root = local_chart_root(
        "name: cert-manager\nnamespace: cert-manager\nchart: { path: CHARTS/cert-manager }\n",
    );
    let gitops = root.path().join("gitops/clusters/infra");
    std::fs::create_dir_all(&gitops).unwrap();
    std::fs::write(gitops.join("kustomization.yaml"), "resources: [ks.yaml]\n").unwrap();
    std::fs::write(
        gitops.join("ks.yaml"),
        "apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: { name: issuers, namespace: flux-system }
spec:
  interval: 10m
  path: ./clusters/infra
  prune: true
  sourceRef: { kind: GitRepository, name: flux-system }
  healthChecks:
    - { apiVersion: apps/v1, kind: Deployment, name: cert-manager-webhook, namespace: cert-manager }
    - { apiVersion: apps/v1, kind: Deployment, name: cert-manager-extra, namespace: cert-manager }
",
    )
    .unwrap();
    let doc = bootstrap_json_in(
        root.path(),
        &[
            "check",
            "infra",
            "--flux-root",
            "gitops",
            "--flux-entrypoint",
            "clusters/infra",
            "--output",
            "json",
        ],
    );
    let messages: Vec<&str> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            f["code"] == "flux-healthcheck-on-bootstrap-workload"
                || f["code"] == "chart-not-rendered"
        })
        .map(|f| f["message"].as_str().unwrap())
        .collect();
    assert_eq!(messages.len(), 1, "{messages:#?}");
    assert!(
        messages[0].contains("health-checks Deployment cert-manager/cert-manager-webhook, which bootstrap release cert-manager/cert-manager owns (its chart renders it, though no hook names it)"),
        "{}",
        messages[0]
    );
}

/// `diff` with the real engine: right after `apply` nothing would change
/// (the chart rendered by `helm template` is what `helm get manifest`
/// stored), and after a values change exactly that value and the one
/// object it renders into.
#[test]
#[cfg_attr(
    not(all(real_helm, shared_charts)),
    ignore = "needs helm-python-sdk (python3 -m venv .venv-helm && .venv-helm/bin/pip install helm-python-sdk, then touch build.rs) and the real charts (../shared/charts, BOOTSTRAP_TEST_CHARTS=DIR or scripts/pull-test-charts)"
)]
fn diff_after_apply_is_empty_and_then_shows_exactly_a_values_change() {
    let release = |replicas: u32| {
        format!(
            "name: coredns\nnamespace: kube-system\nchart: {{ path: CHARTS/coredns }}\nvalues: {{ replicaCount: {replicas} }}\n"
        )
    };
    let root = local_chart_root(&release(2));
    let cluster = Live::start();
    cluster.apply(root.path(), &[]);

    let same = cluster.run(root.path(), "diff", &["--exit-code"]);
    assert_eq!(same.code, 0, "{}\n{}", same.stdout, same.stderr);
    let doc: Value = serde_json::from_str(&same.stdout).unwrap();
    assert_eq!(doc["changed"], false, "{doc}");
    assert_eq!(doc["releases"][0]["change"], "unchanged", "{doc}");

    let changed = release(3).replace("CHARTS", charts().to_str().unwrap());
    std::fs::write(root.path().join("releases/core.yaml"), changed).unwrap();
    let diff = cluster.run(root.path(), "diff", &["--exit-code"]);
    assert_eq!(diff.code, 1, "{}\n{}", diff.stdout, diff.stderr);
    let doc: Value = serde_json::from_str(&diff.stdout).unwrap();
    let coredns = &doc["releases"][0];
    assert_eq!(coredns["change"], "upgrade");
    assert_eq!(
        coredns["values"],
        serde_json::json!([{"path": "replicaCount", "op": "change", "from": 2, "to": 3}])
    );
    let objects = coredns["objects"].as_array().unwrap();
    let changed: Vec<(&str, &str)> = objects
        .iter()
        .map(|o| (o["kind"].as_str().unwrap(), o["name"].as_str().unwrap()))
        .collect();
    assert_eq!(changed, [("Deployment", "coredns")], "{coredns}");
    let text = objects[0]["diff"].as_str().unwrap();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| {
            (l.starts_with('+') || l.starts_with('-'))
                && !l.starts_with("+++")
                && !l.starts_with("---")
        })
        .collect();
    assert_eq!(lines, ["-  replicas: 2", "+  replicas: 3"], "{text}");
}
