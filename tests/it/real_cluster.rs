//! The real tier (docs/design.md#real-environment): the `bootstrap` binary
//! against a real kube-apiserver v1.34 with the real kube-controller-manager,
//! kube-scheduler and kwok's Nodes (crates/testkit/src/realenv/), the real
//! helm CLIs (3 and 4) pulling the real charts of `../shared/charts` from a
//! chart repository over loopback HTTP.
//!
//! What the loopback server and the fake helm only pretend, these tests get
//! from the real components: CRDs Established by the apiextensions
//! controller, Deployments and DaemonSets rolled out by the real controllers
//! and scheduler (kwok makes their Pods Ready), Jobs completed by the Job
//! controller, the admission guard's CEL evaluated by the API server, the
//! cluster lock on the real Lease API, helm's own install, upgrade, hooks
//! and uninstall, what the real helm leaves when the run that started it is
//! killed (and how the next run recovers it), and `apply --all` over two
//! API servers.
//!
//! The catalog is the shipped `infra` cluster limited to the releases whose
//! charts `../shared/charts` holds (cilium, coredns, spegel, cert-manager,
//! prometheus-operator-crds, and gateway-api from its manifest file there):
//! external-secrets, flux-operator and flux-instance (installed releases)
//! and victoria-metrics-operator-crds and cloudnative-pg (CRD-only) are left
//! out. The derived config points the charts' repositories at the loopback
//! repository; spegel, an OCI chart in the catalog, is served from that
//! repository too (no OCI registry here).
//!
//! Reported as ignored unless built with cfg(realenv) (build.rs: the tools
//! of `tools/realenv/build` are linked in tools/realenv/.bin) and
//! cfg(shared_charts) (the charts are found).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use crate::common;
use serde_json::{Value, json};
use testkit::builder::{copy_dir, repo_root};
use testkit::realenv::{self, ChartRepo, ControlPlane, condition, outcomes};

/// The real charts, used in place: `BOOTSTRAP_TEST_CHARTS`, else
/// `../shared/charts` (build.rs, cfg(shared_charts)).
fn charts() -> PathBuf {
    let dir = option_env!("BOOTSTRAP_TEST_CHARTS_DIR")
        .map(PathBuf::from)
        .expect(
            "the real tier installs the real charts of ../shared/charts (or BOOTSTRAP_TEST_CHARTS)",
        );
    assert!(
        dir.join("cilium/Chart.yaml").is_file(),
        "{} holds no cilium chart",
        dir.display()
    );
    dir
}

/// The chart repository of this test process: every chart of the mirror,
/// packaged once by the real helm 4.
fn repo() -> &'static ChartRepo {
    static REPO: OnceLock<ChartRepo> = OnceLock::new();
    REPO.get_or_init(|| {
        let charts = charts();
        let names = [
            "cilium",
            "coredns",
            "cert-manager",
            "spegel",
            "prometheus-operator-crds",
        ];
        let dirs: Vec<PathBuf> = names.iter().map(|n| charts.join(n)).collect();
        ChartRepo::serve(&realenv::helm(4), &dirs)
    })
}

/// The shipped `infra` cluster and catalog, limited to `releases`, on the
/// loopback chart repository ([`realenv::infra_root`]).
fn infra_root(releases: &[&str]) -> tempfile::TempDir {
    realenv::infra_root(&repo().url, &charts(), releases)
}

/// The infra releases whose charts the mirror holds.
const CATALOG: [&str; 6] = [
    "cilium",
    "coredns",
    "spegel",
    "cert-manager",
    "prometheus-operator-crds",
    "gateway-api",
];

/// The releases of [`CATALOG`] that install (the others are CRD-only).
const INSTALLED: [&str; 4] = [
    "cert-manager/cert-manager",
    "kube-system/cilium",
    "kube-system/coredns",
    "kube-system/spegel",
];

/// The CRDs each CRD-phase release applies: cert-manager's 6 templates
/// behind `crds.enabled`, prometheus-operator-crds' 10 from its subchart,
/// the Gateway API's 5.
const CRD_PHASE_COUNTS: [(&str, usize); 3] = [
    ("cert-manager/cert-manager", 6),
    ("kube-system/gateway-api", 5),
    ("observability/prometheus-operator-crds", 10),
];

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// bootstrap, the real helm and a config root on a control plane.
struct Real {
    plane: ControlPlane,
    helm: PathBuf,
    root: tempfile::TempDir,
    /// helm's homes, bootstrap's chart cache, kubectl's discovery cache.
    home: tempfile::TempDir,
}

impl Real {
    fn start(helm_major: u8, releases: &[&str]) -> Real {
        let plane = ControlPlane::start();
        Real {
            plane,
            helm: realenv::helm(helm_major),
            root: infra_root(releases),
            home: tempfile::tempdir().unwrap(),
        }
    }

    fn env(&self, cmd: &mut Command) {
        common::isolate(cmd, &self.plane.kubeconfig, self.home.path());
    }

    /// `bootstrap ARGS --dir ROOT --helm HELM`.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(testkit::bootstrap());
        cmd.current_dir(self.root.path())
            .args(args)
            .arg("--dir")
            .arg(self.root.path())
            .arg("--helm")
            .arg(&self.helm);
        self.env(&mut cmd);
        cmd
    }

    fn run(&self, args: &[&str]) -> Run {
        let out = realenv::output_within(&mut self.command(args), realenv::COMMAND_LIMIT);
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// The JSON events of a successful `COMMAND infra ARGS --output json`.
    fn events(&self, command: &str, args: &[&str]) -> Vec<Value> {
        let mut argv = vec![command, "infra"];
        argv.extend_from_slice(args);
        argv.extend_from_slice(&["--output", "json"]);
        let run = self.run(&argv);
        assert_eq!(
            run.code,
            0,
            "bootstrap {} failed (logs: {}):\n{}\n{}",
            argv.join(" "),
            self.plane.logs().display(),
            run.stderr,
            run.stdout
        );
        let events: Vec<Value> = run
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        // A quiet watch is ended by the API server at its timeoutSeconds,
        // never cut by the client's read timeout and retried as an error.
        let cut: Vec<&Value> = events
            .iter()
            .filter(|e| {
                e["event"] == "release_progress"
                    && e["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("error reading a body"))
            })
            .collect();
        assert!(cut.is_empty(), "a watch was cut: {cut:?}");
        events
    }

    fn apply(&self, args: &[&str]) -> Vec<Value> {
        self.events("apply", args)
    }

    /// The real helm's answer to `helm ARGS` against this cluster.
    fn helm(&self, args: &[&str]) -> String {
        let mut cmd = Command::new(&self.helm);
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

    fn edit_cluster(&self, edit: impl FnOnce(String) -> String) {
        let path = self.root.path().join("clusters/infra/cluster.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, edit(text)).unwrap();
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

fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

/// The rollout hooks of the catalog: kind, namespace, name.
const ROLLOUTS: [(&str, &str, &str); 7] = [
    ("DaemonSet", "kube-system", "cilium"),
    ("Deployment", "kube-system", "cilium-operator"),
    ("Deployment", "kube-system", "coredns"),
    ("DaemonSet", "kube-system", "spegel"),
    ("Deployment", "cert-manager", "cert-manager"),
    ("Deployment", "cert-manager", "cert-manager-cainjector"),
    ("Deployment", "cert-manager", "cert-manager-webhook"),
];

fn workload_path(kind: &str, namespace: &str, name: &str) -> String {
    let plural = match kind {
        "DaemonSet" => "daemonsets",
        "Deployment" => "deployments",
        "StatefulSet" => "statefulsets",
        other => panic!("no path for {other}"),
    };
    format!("/apis/apps/v1/namespaces/{namespace}/{plural}/{name}")
}

/// The rollout as the real controllers report it: the controller saw the
/// latest generation, and every replica (or every Node's pod) is updated
/// and ready. Returns the ready count.
fn rolled_out(plane: &ControlPlane, kind: &str, namespace: &str, name: &str) -> i64 {
    let object = plane
        .api()
        .get(&workload_path(kind, namespace, name))
        .unwrap_or_else(|| panic!("{kind} {namespace}/{name} is missing"));
    let status = &object["status"];
    assert_eq!(
        status["observedGeneration"], object["metadata"]["generation"],
        "{kind} {namespace}/{name}: the controller has not seen the latest generation: {status}"
    );
    let (want, updated, ready) = match kind {
        "DaemonSet" => (
            &status["desiredNumberScheduled"],
            &status["updatedNumberScheduled"],
            &status["numberReady"],
        ),
        _ => (
            &object["spec"]["replicas"],
            &status["updatedReplicas"],
            &status["readyReplicas"],
        ),
    };
    let want = want.as_i64().unwrap_or(0);
    assert!(
        want > 0,
        "{kind} {namespace}/{name}: nothing to roll out: {status}"
    );
    assert_eq!(
        (updated.as_i64(), ready.as_i64()),
        (Some(want), Some(want)),
        "{kind} {namespace}/{name} is not rolled out: {status}"
    );
    want
}

/// The pods of a workload (by its selector's matchLabels), all Running and
/// Ready on kwok's Nodes.
fn pods_of(plane: &ControlPlane, kind: &str, namespace: &str, name: &str) -> Vec<Value> {
    let object = plane
        .api()
        .get(&workload_path(kind, namespace, name))
        .unwrap();
    let labels = object["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels")
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap()))
        .collect::<Vec<_>>()
        .join(",");
    plane.api().list(&format!(
        "/api/v1/namespaces/{namespace}/pods?labelSelector={}",
        labels
            .replace('/', "%2F")
            .replace('=', "%3D")
            .replace(',', "%2C")
    ))
}

fn lifecycle(helm_major: u8) {
    let _slot = realenv::one_at_a_time();
    let real = Real::start(helm_major, &CATALOG);
    let plane = &real.plane;
    let api = plane.api();
    let version = real.helm(&["version", "--short"]);
    assert!(
        version.starts_with(&format!("v{helm_major}.")),
        "helm {helm_major}: {version}"
    );

    // apply: the CRD phase first, every CRD Established before any release.
    let events = real.apply(&[]);
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
    assert_eq!(outcomes(&events), all(&INSTALLED, "installed"));

    // The apiextensions controller Established every CRD; helm owns none.
    let crds = api.list("/apis/apiextensions.k8s.io/v1/customresourcedefinitions");
    assert_eq!(
        crds.len(),
        21,
        "{:?}",
        crds.iter().map(name).collect::<Vec<_>>()
    );
    for crd in &crds {
        assert!(
            condition(crd, "Established"),
            "{} is not Established",
            name(crd)
        );
        assert_ne!(
            crd["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "Helm",
            "{}",
            name(crd)
        );
    }

    // Every rollout hook watched a rollout of the real controllers: when
    // apply is done, each workload is rolled out and its pods are Ready.
    for (kind, namespace, workload) in ROLLOUTS {
        let hook = format!("rollout of {kind} {namespace}/{workload}");
        let finished = events
            .iter()
            .find(|e| e["event"] == "hook_finished" && e["hook"] == hook.as_str())
            .unwrap_or_else(|| panic!("no hook_finished for `{hook}`"));
        assert_eq!(finished["ok"], true, "{finished}");
        let ready = rolled_out(plane, kind, namespace, workload);
        let pods = pods_of(plane, kind, namespace, workload);
        assert_eq!(pods.len() as i64, ready, "{hook}: pods");
        for pod in &pods {
            assert!(
                pod["spec"]["nodeName"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("node-")),
                "{hook}: pod {} not scheduled on a kwok Node",
                name(pod)
            );
            assert!(
                condition(pod, "Ready"),
                "{hook}: pod {} not Ready",
                name(pod)
            );
        }
    }
    // A DaemonSet has a pod on each of the 3 Nodes.
    assert_eq!(rolled_out(plane, "DaemonSet", "kube-system", "cilium"), 3);

    // cert-manager's post-install hook Job ran to completion under the
    // real Job controller (helm deleted it after: hook-succeeded), as its
    // events say.
    let job_events = api.list("/api/v1/namespaces/cert-manager/events");
    assert!(
        job_events
            .iter()
            .any(|e| e["involvedObject"]["kind"] == "Job"
                && e["involvedObject"]["name"] == "cert-manager-startupapicheck"
                && e["reason"] == "Completed"),
        "cert-manager's startupapicheck Job did not complete: {:?}",
        job_events
            .iter()
            .map(|e| format!(
                "{} {} {}",
                e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"]
            ))
            .collect::<Vec<_>>()
    );

    // The releases as the real helm lists them; the records carry
    // bootstrap's labels.
    let listed: Vec<Value> =
        serde_json::from_str(&real.helm(&["list", "-A", "-o", "json"])).unwrap();
    let listed: BTreeMap<String, (String, String)> = listed
        .iter()
        .map(|r| {
            (
                format!(
                    "{}/{}",
                    r["namespace"].as_str().unwrap(),
                    r["name"].as_str().unwrap()
                ),
                (
                    r["status"].as_str().unwrap().to_string(),
                    r["revision"].to_string().trim_matches('"').to_string(),
                ),
            )
        })
        .collect();
    assert_eq!(
        listed,
        INSTALLED
            .iter()
            .map(|r| (r.to_string(), ("deployed".to_string(), "1".to_string())))
            .collect()
    );
    let records: Vec<Value> = api
        .list("/api/v1/secrets?labelSelector=owner%3Dhelm")
        .into_iter()
        .collect();
    assert_eq!(
        records.len(),
        INSTALLED.len(),
        "one release Secret per release"
    );
    for record in &records {
        let labels = &record["metadata"]["labels"];
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
    let ledger = api
        .get("/api/v1/namespaces/kube-system/configmaps/bootstrap-ownership")
        .expect("the ledger ConfigMap");
    let recorded: BTreeSet<String> = ledger["data"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let expected: BTreeSet<String> = INSTALLED.iter().map(|r| r.replace('/', ".")).collect();
    assert_eq!(recorded, expected, "the ledger");
    // The admission guard is installed and bound.
    assert!(
        api.get("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/bootstrap-ownership-guard")
            .is_some()
    );

    // apply again: nothing to do.
    let events = real.apply(&[]);
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
    // Unchanged through the CRD record (docs/design.md#crd-record): its
    // uid and generation are the real API server's, and the CRD list it
    // is compared with (metadata only) was read without a warning.
    let warnings: Vec<&Value> = events.iter().filter(|e| e["event"] == "warning").collect();
    assert!(warnings.is_empty(), "{warnings:?}");
    let record = api
        .get("/api/v1/namespaces/kube-system/configmaps/bootstrap-crds")
        .expect("the CRD record");
    let record = record["data"].as_object().expect("entries");
    assert_eq!(
        record.len(),
        CRD_PHASE_COUNTS.iter().map(|(_, n)| n).sum::<usize>(),
        "one entry per CRD"
    );
    for (crd, entry) in record {
        let entry: Value = serde_json::from_str(entry.as_str().unwrap()).unwrap();
        let live = api
            .get(&format!(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}"
            ))
            .unwrap_or_else(|| panic!("recorded CRD {crd} is not there"));
        assert_eq!(entry["uid"], live["metadata"]["uid"], "{crd}");
        assert_eq!(entry["generation"], live["metadata"]["generation"], "{crd}");
    }

    // One values change (coredns' replicas, a cluster override): exactly one
    // upgrade, and its rollout hook waits for the third replica.
    real.edit_cluster(|text| {
        text.replace(
            "overrides:\n",
            "overrides:\n  coredns:\n    values: { replicaCount: 3 }\n",
        )
    });
    let events = real.apply(&[]);
    let mut expected = all(&INSTALLED, "unchanged");
    expected.insert("kube-system/coredns".into(), "upgraded".into());
    assert_eq!(outcomes(&events), expected);
    assert_eq!(rolled_out(plane, "Deployment", "kube-system", "coredns"), 3);

    // diff: nothing would change.
    let diff = real.run(&["diff", "infra", "--exit-code"]);
    assert_eq!(
        diff.code, 0,
        "diff after apply:\n{}\n{}",
        diff.stdout, diff.stderr
    );
    assert!(
        diff.stdout.contains("infra: no changes (6 releases)")
            || diff.stdout.contains("infra: no changes"),
        "{}",
        diff.stdout
    );

    // cilium's chart generates its TLS Secrets anew on every render
    // (`genCA`): diff renders it twice, sees them differ, and says so
    // instead of calling the release changed.
    let run = real.run(&["diff", "infra", "--output", "json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let diff: Value = serde_json::from_str(&run.stdout).expect("diff JSON");
    let cilium = diff["releases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["release"] == "kube-system/cilium")
        .expect("cilium in diff");
    assert_eq!(cilium["change"], "unchanged", "{cilium}");
    assert!(
        cilium["regenerated"]
            .as_array()
            .is_some_and(|r| r.contains(&json!("Secret kube-system/hubble-server-certs"))),
        "{cilium}"
    );

    // status: every release deployed by bootstrap, up to date, ready.
    let run = real.run(&["status", "infra", "--output", "json"]);
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
            "status of {release}: {}",
            run.stdout
        );
    }

    // destroy --crds: every release uninstalled (spegel's post-delete hook
    // Pod runs to completion), the ledger emptied, the CRDs gone.
    let events = real.events("destroy", &["--yes", "--crds"]);
    assert_eq!(outcomes(&events), all(&INSTALLED, "uninstalled"));
    assert!(
        api.list("/api/v1/secrets?labelSelector=owner%3Dhelm")
            .is_empty(),
        "helm release records remain"
    );
    for (kind, namespace, workload) in ROLLOUTS {
        assert!(
            api.get(&workload_path(kind, namespace, workload)).is_none(),
            "{kind} {namespace}/{workload} is still there"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = api.list("/apis/apiextensions.k8s.io/v1/customresourcedefinitions");
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "CRDs left after destroy --crds: {:?}",
            left.iter().map(name).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let ledger = api.get("/api/v1/namespaces/kube-system/configmaps/bootstrap-ownership");
    assert!(
        ledger.is_none_or(|l| l["data"].as_object().is_none_or(|d| d.is_empty())),
        "the ledger still has entries"
    );

    apply_right_after_destroy_crds(&real, helm_major);
}

/// The CRD-only releases of [`CATALOG`].
const CRD_ONLY: [&str; 2] = [
    "observability/prometheus-operator-crds",
    "kube-system/gateway-api",
];

/// A Gateway API CRD held by a finalizer of the test while it is deleted.
const HELD_CRD: &str = "httproutes.gateway.networking.k8s.io";

const HOLD: &str = "bootstrap.test/hold";

/// `apply` at once after `destroy --crds` (which the caller just ran): the
/// CRDs are created again and Established by the apiextensions controller.
/// Then, with helm 4 (the check needs no helm), a CRD still being deleted
/// when `apply` comes (held by a finalizer, as one whose custom resources
/// take long to go): `apply` waits until it is gone and creates it again,
/// where applying onto it would report it there and then lose it.
fn apply_right_after_destroy_crds(real: &Real, helm_major: u8) {
    let api = real.plane.api();
    let mut args = Vec::new();
    for release in CRD_ONLY {
        args.extend(["--only", release]);
    }
    let events = real.apply(&args);
    let mut counts: BTreeMap<&str, usize> = CRD_PHASE_COUNTS.into();
    counts.remove("cert-manager/cert-manager");
    assert_eq!(crd_counts(&crds_by_release(&events, "created")), counts);
    let crds = api.list("/apis/apiextensions.k8s.io/v1/customresourcedefinitions");
    assert_eq!(crds.len(), counts.values().sum::<usize>());
    for crd in &crds {
        assert!(
            condition(crd, "Established"),
            "{} is not Established",
            name(crd)
        );
    }
    if helm_major != 4 {
        return;
    }

    let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{HELD_CRD}");
    let held = api
        .merge_patch(&path, &json!({"metadata": {"finalizers": [HOLD]}}))
        .unwrap_or_else(|e| panic!("holding {HELD_CRD}: {e}"));
    let uid = held["metadata"]["uid"].clone();
    api.delete(&path)
        .unwrap_or_else(|e| panic!("deleting {HELD_CRD}: {e}"));
    let deleting = |crd: &Value| {
        crd["metadata"]["uid"] == uid && crd["metadata"]["deletionTimestamp"].is_string()
    };
    assert!(
        api.get(&path).is_some_and(|c| deleting(&c)),
        "{HELD_CRD} is not being deleted"
    );

    let mut child = real
        .command(&[
            "apply",
            "infra",
            "--only",
            "kube-system/gateway-api",
            "--output",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting bootstrap");
    let stdout = child.stdout.take().expect("piped stdout");
    let (lines, received) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)).map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    // The CRDs of a release are applied in parallel: once the other four
    // are, the held one's apply has found it being deleted.
    let mut seen = Vec::new();
    let others = |seen: &[Value]| {
        seen.iter()
            .filter(|e| e["event"] == "crd_applied" && e["crd"] != HELD_CRD)
            .count()
    };
    while others(&seen) < 4 {
        let line = received
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("apply applied no other Gateway API CRD: {seen:?}"));
        seen.push(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")));
    }
    assert!(
        !seen
            .iter()
            .any(|e| e["event"] == "crd_applied" && e["crd"] == HELD_CRD),
        "apply applied {HELD_CRD} while it was being deleted: {seen:?}"
    );
    assert!(
        api.get(&path).is_some_and(|c| deleting(&c)),
        "{HELD_CRD} went on its own"
    );
    // Release it (the apiextensions controller may be removing its own
    // finalizer at the same time: a conflict is read again).
    plane_wait(&real.plane, "the test's finalizer removed", || {
        let mut crd = api.get(&path)?;
        if !deleting(&crd) {
            return Some(());
        }
        let finalizers: Vec<Value> = crd["metadata"]["finalizers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|f| *f != HOLD)
            .cloned()
            .collect();
        crd["metadata"]["finalizers"] = Value::Array(finalizers);
        api.update(&path, &crd).ok().map(|_| ())
    });
    let out = realenv::finish_within(child, realenv::COMMAND_LIMIT, "bootstrap apply");
    reader.join().expect("the reader of apply's events");
    seen.extend(
        received
            .try_iter()
            .map(|l| serde_json::from_str(&l).unwrap()),
    );
    assert!(
        out.status.success(),
        "apply after a held CRD went: {}\n{seen:?}",
        String::from_utf8_lossy(&out.stderr)
    );
    let change = seen
        .iter()
        .find(|e| e["event"] == "crd_applied" && e["crd"] == HELD_CRD)
        .map(|e| e["change"].clone());
    assert_eq!(change, Some(json!("created")), "{seen:?}");
    let crd = api.get(&path).expect("the held CRD created again");
    assert_ne!(crd["metadata"]["uid"], uid);
    assert!(
        condition(&crd, "Established"),
        "{HELD_CRD} is not Established"
    );
}

/// The whole life of the infra catalog with the real helm 3.
#[test]
#[cfg_attr(
    not(all(realenv, shared_charts)),
    ignore = "needs the real test environment (`tools/realenv/build`) and the real charts (../shared/charts, BOOTSTRAP_TEST_CHARTS=DIR or scripts/pull-test-charts)"
)]
fn lifecycle_with_helm_3() {
    lifecycle(3);
}

/// The whole life of the infra catalog with the real helm 4.
#[test]
#[cfg_attr(
    not(all(realenv, shared_charts)),
    ignore = "needs the real test environment (`tools/realenv/build`) and the real charts (../shared/charts, BOOTSTRAP_TEST_CHARTS=DIR or scripts/pull-test-charts)"
)]
fn lifecycle_with_helm_4() {
    lifecycle(4);
}

// ---------------------------------------------------------------------------
// The admission guard, evaluated by the API server.

const HELM_RELEASE_CRD: &str =
    "github.com/fluxcd/helm-controller/config/crd/bases/helm.toolkit.fluxcd.io_helmreleases.yaml";

const LONG_TARGET: &str = "observability-platform-team-namespace";
const LONG_NAME: &str = "kube-prometheus-stack-operator";

/// A config root of cluster `infra` with `releases` (a release file).
fn small_root(cluster: &str, releases: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("clusters/infra")).unwrap();
    std::fs::create_dir_all(root.path().join("releases")).unwrap();
    std::fs::write(root.path().join("clusters/infra/cluster.yaml"), cluster).unwrap();
    std::fs::write(root.path().join("releases/core.yaml"), releases).unwrap();
    root
}

/// A valid HelmRelease (the CRD's schema is checked before admission).
fn helm_release(name: &str, namespace: &str, spec: Value) -> Value {
    let mut full = json!({
        "interval": "1h",
        "chart": {"spec": {"chart": "podinfo", "sourceRef": {"kind": "HelmRepository", "name": "charts"}}},
    });
    for (key, value) in spec.as_object().unwrap() {
        full[key] = value.clone();
    }
    json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": full,
    })
}

fn helm_releases(namespace: &str) -> String {
    format!("/apis/helm.toolkit.fluxcd.io/v2/namespaces/{namespace}/helmreleases")
}

/// One case of the guard: a HelmRelease and, when denied, the Helm release
/// it would manage and the ledger shard that owns it.
struct Case {
    what: &'static str,
    object: Value,
    denied_by: Option<(String, &'static str)>,
}

fn ledger_entry(release: &str, chart: &str, policy: &str) -> String {
    serde_json::to_string(&bootstrap::ledger::Entry {
        release: release.into(),
        chart: chart.into(),
        version: "1.0.0".into(),
        values_digest: "sha256:00".into(),
        applied_at: "2025-01-01T00:00:00Z".into(),
        tool_version: "0.1.0".into(),
        policy: policy.into(),
        cluster: Some("infra".into()),
        hooks_digest: None,
    })
    .unwrap()
}

/// The guard as the real API server evaluates it: HelmReleases that would
/// manage a bootstrap-owned release are denied on CREATE and UPDATE (by
/// release name, `releaseName`, `targetNamespace`, `storageNamespace`, a
/// long composed name, an entry in the second shard), a `handover` entry
/// and unrelated releases are admitted, and without a ledger everything is
/// admitted. bootstrap installs the HelmRelease CRD (helm-controller's own,
/// a `manifests:` CRD-phase release), the guard and a real ledger entry
/// (coredns); the test adds the other entries to the shards.
#[test]
#[cfg_attr(
    not(all(realenv, shared_charts)),
    ignore = "needs the real test environment (`tools/realenv/build`) and the real charts (../shared/charts, BOOTSTRAP_TEST_CHARTS=DIR or scripts/pull-test-charts)"
)]
fn the_guard_is_evaluated_by_the_api_server() {
    let _slot = realenv::one_at_a_time();
    use bootstrap::flux::{ledger_key, shorten_name};

    let crd = realenv::share("flux-crds", HELM_RELEASE_CRD);
    let releases = format!(
        "name: helm-controller-crds\nnamespace: flux-system\nmanifests: [{}]\ncrds: only\n---\n\
         name: coredns\nnamespace: kube-system\nchart: {{ repo: {}, name: coredns, version: 1.44.3 }}\n\
         values: {{ fullnameOverride: coredns }}\n",
        crd.display(),
        repo().url
    );
    let root = small_root("name: infra\nreleases: [helm-controller-crds]\n", &releases);
    let real = Real {
        plane: ControlPlane::start(),
        helm: realenv::helm(4),
        root,
        home: tempfile::tempdir().unwrap(),
    };
    let plane = &real.plane;
    let api = plane.api();

    // 1. The CRD phase and the guard, no ledger yet.
    let events = real.apply(&[]);
    assert_eq!(
        crd_counts(&crds_by_release(&events, "created")),
        [("flux-system/helm-controller-crds", 1)].into()
    );
    let policy_path = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/bootstrap-ownership-guard";
    let policy = api.get(policy_path).expect("the guard's policy");
    assert!(
        api.get("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/bootstrap-ownership-guard")
            .is_some(),
        "the guard's binding"
    );
    // The API server type-checked the CEL against the HelmRelease schema.
    let checked = plane_wait(plane, "the policy type-checked", || {
        let policy = api.get(policy_path)?;
        (policy["status"]["observedGeneration"] == policy["metadata"]["generation"])
            .then_some(policy)
    });
    assert!(
        checked["status"]["typeChecking"].is_object(),
        "the API server did not type-check the guard: {}",
        checked["status"]
    );
    assert_eq!(
        checked["status"]["typeChecking"]["expressionWarnings"],
        Value::Null,
        "the API server's type check of the guard's CEL warns: {}",
        checked["status"]
    );
    drop(policy);
    let shards = || {
        api.list("/api/v1/namespaces/kube-system/configmaps?labelSelector=bootstrap.dev%2Fledger%3Downership")
    };
    assert!(
        shards().is_empty(),
        "a ledger before any release was installed"
    );

    let long = shorten_name(&format!("{LONG_TARGET}-{LONG_NAME}"));
    let cases = vec![
        Case {
            what: "storageNamespace",
            object: helm_release(
                "cilium",
                "flux-system",
                json!({"storageNamespace": "kube-system"}),
            ),
            denied_by: Some(("kube-system/cilium".into(), "bootstrap-ownership")),
        },
        Case {
            what: "targetNamespace composing a bootstrap release name",
            object: helm_release(
                "operator",
                "flux-system",
                json!({"targetNamespace": "flux"}),
            ),
            denied_by: Some(("flux-system/flux-operator".into(), "bootstrap-ownership")),
        },
        Case {
            what: "a composed name over 53 characters",
            object: helm_release(
                LONG_NAME,
                "flux-system",
                json!({"targetNamespace": LONG_TARGET}),
            ),
            denied_by: Some((format!("flux-system/{long}"), "bootstrap-ownership")),
        },
        Case {
            what: "an entry of the second shard",
            object: helm_release("metrics-server", "kube-system", json!({})),
            denied_by: Some(("kube-system/metrics-server".into(), "bootstrap-ownership-1")),
        },
        Case {
            what: "a handover entry",
            object: helm_release("spegel", "kube-system", json!({})),
            denied_by: None,
        },
        Case {
            what: "the name of a bootstrap release in another namespace",
            object: helm_release("cilium", "default", json!({})),
            denied_by: None,
        },
        Case {
            what: "an unrelated release",
            object: helm_release("podinfo", "default", json!({})),
            denied_by: None,
        },
    ];
    // Cases whose release bootstrap installs itself (apply would refuse
    // while they exist, so they are only created later).
    let installed_cases = vec![
        Case {
            what: "the release name",
            object: helm_release("coredns", "kube-system", json!({})),
            denied_by: Some(("kube-system/coredns".into(), "bootstrap-ownership")),
        },
        Case {
            what: "releaseName",
            object: helm_release("dns", "kube-system", json!({"releaseName": "coredns"})),
            denied_by: Some(("kube-system/coredns".into(), "bootstrap-ownership")),
        },
    ];
    let path_of = |case: &Case| {
        format!(
            "{}/{}",
            helm_releases(case.object["metadata"]["namespace"].as_str().unwrap()),
            name(&case.object)
        )
    };
    let create = |case: &Case| {
        api.create(
            &helm_releases(case.object["metadata"]["namespace"].as_str().unwrap()),
            &case.object,
        )
    };
    for namespace in ["flux-system", "default"] {
        let _ = api.create(
            "/api/v1/namespaces",
            &json!({"metadata": {"name": namespace}}),
        );
    }

    // 2. Without a ledger the guard admits every HelmRelease.
    for case in &cases {
        create(case).unwrap_or_else(|e| panic!("{} without a ledger: {e}", case.what));
    }

    // 3. coredns installed: the real ledger entry; then the test's entries:
    // more in the first shard, one in a second shard.
    real.edit_cluster(|t| {
        t.replace(
            "releases: [helm-controller-crds]",
            "releases: [helm-controller-crds, coredns]",
        )
    });
    let events = real.apply(&[]);
    assert_eq!(
        outcomes(&events),
        all(&["kube-system/coredns"], "installed")
    );
    let first = "/api/v1/namespaces/kube-system/configmaps/bootstrap-ownership";
    assert!(
        api.get(first).unwrap()["data"][ledger_key("kube-system", "coredns")].is_string(),
        "bootstrap recorded coredns"
    );
    api.merge_patch(
        first,
        &json!({"data": {
            ledger_key("kube-system", "cilium"): ledger_entry("kube-system/cilium", "cilium", "bootstrap"),
            ledger_key("flux-system", "flux-operator"): ledger_entry("flux-system/flux-operator", "flux-operator", "bootstrap"),
            ledger_key("flux-system", &long): ledger_entry(&format!("flux-system/{long}"), "kube-prometheus-stack", "bootstrap"),
            ledger_key("kube-system", "spegel"): ledger_entry("kube-system/spegel", "spegel", "handover"),
        }}),
    )
    .expect("adding entries to the first shard");
    api.create(
        "/api/v1/namespaces/kube-system/configmaps",
        &json!({
            "metadata": {
                "name": "bootstrap-ownership-1",
                "labels": {"app.kubernetes.io/managed-by": "bootstrap", "bootstrap.dev/ledger": "ownership"},
            },
            "data": {
                ledger_key("kube-system", "metrics-server"): ledger_entry("kube-system/metrics-server", "metrics-server", "bootstrap"),
            },
        }),
    )
    .expect("the second shard");

    // The API server reads the shards through an informer: wait until it
    // denies the second shard's entry.
    let touch = |case: &Case| {
        let mut current = api.get(&path_of(case)).expect("the HelmRelease");
        current["metadata"]["labels"] = json!({"touched": "yes"});
        api.update(&path_of(case), &current)
    };
    plane_wait(plane, "the guard to see the second shard", || {
        touch(&cases[3]).err()
    });

    // 4. UPDATE of the HelmReleases created before: denied exactly where the
    // ledger owns the release, the message naming release and shard.
    let verdict = |what: &str, op: &str, case: &Case, result: Result<Value, realenv::ApiError>| {
        match (&case.denied_by, result) {
            (None, Ok(_)) => {}
            (None, Err(e)) => panic!("{what} ({op}) was denied: {e}"),
            (Some((release, _)), Ok(_)) => {
                panic!("{what} ({op}) was admitted, yet {release} is owned by bootstrap")
            }
            (Some((release, shard)), Err(e)) => {
                let expected = format!(
                    "HelmRelease {}/{} would manage Helm release {release}, which is owned by bootstrap \
                     (ledger ConfigMap kube-system/{shard}).",
                    case.object["metadata"]["namespace"].as_str().unwrap(),
                    name(&case.object)
                );
                assert!(
                    e.message.contains(&expected)
                        && e.message.contains("bootstrap-ownership-guard"),
                    "{what} ({op}): {e}\nexpected: {expected}"
                );
            }
        }
    };
    for case in &cases {
        verdict(case.what, "UPDATE", case, touch(case));
    }

    // 5. CREATE: every case again from scratch, the installed ones too.
    for case in &cases {
        api.delete(&path_of(case)).unwrap();
    }
    for case in cases.iter().chain(&installed_cases) {
        verdict(case.what, "CREATE", case, create(case));
    }

    // 6. The ledger gone, the guard admits again.
    for shard in ["bootstrap-ownership", "bootstrap-ownership-1"] {
        api.delete(&format!(
            "/api/v1/namespaces/kube-system/configmaps/{shard}"
        ))
        .unwrap();
    }
    plane_wait(plane, "the guard to admit without a ledger", || {
        create(&installed_cases[0]).ok()
    });
    for case in cases.iter().chain(&installed_cases[1..]) {
        if case.denied_by.is_some() {
            create(case).unwrap_or_else(|e| panic!("{} without a ledger: {e}", case.what));
        }
    }
}

/// Polls `probe` every 200 ms for up to 60 s.
fn plane_wait<T>(plane: &ControlPlane, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what} (logs: {})",
            plane.logs().display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

// ---------------------------------------------------------------------------
// The cluster lock on the real Lease API.

const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/bootstrap-lock";

/// The Lease's holder, while one holds it.
fn lease_holder(real: &Real) -> Option<String> {
    real.plane.api().get(LEASE).and_then(|l| {
        l["spec"]["holderIdentity"]
            .as_str()
            .filter(|h| !h.is_empty())
            .map(String::from)
    })
}

/// The Lease's renewTime set back to 2020: by this machine's clock, its
/// holder stopped renewing it long ago.
fn long_unrenewed(real: &Real) {
    let then = json!({"spec": {"renewTime": "2020-01-01T00:00:00.000000Z"}});
    real.plane
        .api()
        .merge_patch(LEASE, &then)
        .expect("set back renewTime");
}

fn spawn_apply(real: &Real) -> Child {
    real.command(&["apply", "infra", "--output", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting bootstrap")
}

fn finish(child: Child) -> Run {
    let out = realenv::finish_within(child, realenv::COMMAND_LIMIT, "bootstrap apply");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Two applies at once: the second exits 3 naming the first's holder. A
/// run killed with SIGKILL leaves the Lease held: the next run exits 3
/// until the Lease expires (30 s), then takes it over with a warning and
/// converges.
#[test]
#[cfg_attr(
    not(all(realenv, shared_charts)),
    ignore = "needs the real test environment (`tools/realenv/build`) and the real charts (../shared/charts, BOOTSTRAP_TEST_CHARTS=DIR or scripts/pull-test-charts)"
)]
fn the_lock_on_the_real_lease_api() {
    let _slot = realenv::one_at_a_time();
    // cilium's values create ServiceMonitors: their CRD comes first.
    let real = Real::start(4, &["prometheus-operator-crds", "cilium", "coredns"]);

    // Two concurrent applies.
    let first = spawn_apply(&real);
    let pid = first.id();
    let holder = plane_wait(&real.plane, "the first apply to take the lock", || {
        lease_holder(&real)
    });
    assert!(holder.ends_with(&format!("pid {pid}")), "{holder}");
    let second = real.run(&["apply", "infra"]);
    assert_eq!(second.code, 3, "{}", second.stderr);
    assert!(
        second.stderr.starts_with("error: ") && second.stderr.contains(&holder),
        "{}",
        second.stderr
    );
    let first = finish(first);
    assert_eq!(
        first.code,
        0,
        "{}\n{}\n(logs: {})",
        first.stderr,
        first.stdout,
        real.plane.logs().display()
    );
    assert_eq!(lease_holder(&real), None, "the lock was released");

    // A live run on a machine whose clock is an hour behind: its renewals
    // look an hour old here. Watched, seen renewed, refused: exit 3.
    let skewed = || testkit::cluster::rfc3339(SystemTime::now() - Duration::from_secs(3600));
    let alive = testkit::cluster::lease("alice@behind pid 1", &skewed());
    real.plane
        .api()
        .create(
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
            &alive,
        )
        .expect("create the skewed Lease");
    let renewing = std::sync::atomic::AtomicBool::new(true);
    let refused = std::thread::scope(|scope| {
        scope.spawn(|| {
            while renewing.load(std::sync::atomic::Ordering::Relaxed) {
                let renewal = json!({"spec": {"renewTime": skewed()}});
                real.plane
                    .api()
                    .merge_patch(LEASE, &renewal)
                    .expect("renew");
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        let refused = real.run(&["apply", "infra"]);
        renewing.store(false, std::sync::atomic::Ordering::Relaxed);
        refused
    });
    assert_eq!(refused.code, 3, "{}\n{}", refused.stdout, refused.stderr);
    assert!(
        refused.stderr.contains("alice@behind pid 1"),
        "{}",
        refused.stderr
    );
    assert_eq!(lease_holder(&real).as_deref(), Some("alice@behind pid 1"));
    real.plane.api().delete(LEASE).unwrap();

    // kill -9 in the middle of an upgrade.
    real.edit_cluster(|text| {
        text.replace(
            "overrides:\n",
            "overrides:\n  coredns:\n    values: { replicaCount: 3 }\n",
        )
    });
    let victim = spawn_apply(&real);
    let pid = victim.id();
    let holder = plane_wait(&real.plane, "the victim to take the lock", || {
        lease_holder(&real).filter(|h| h.ends_with(&format!("pid {pid}")))
    });
    // SAFETY: a plain kill of the child this test started.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    let victim = finish(victim);
    assert_eq!(victim.code, -1, "killed: {}", victim.stderr);
    assert_eq!(
        lease_holder(&real).as_deref(),
        Some(holder.as_str()),
        "the dead run's Lease stays"
    );

    // Held and not expired: exit 3.
    let blocked = real.run(&["apply", "infra"]);
    assert_eq!(blocked.code, 3, "{}", blocked.stderr);
    assert!(blocked.stderr.contains(&holder), "{}", blocked.stderr);

    // Not renewed for longer than its 30 s (by this clock: its renewTime
    // set back, as if time had passed): the next run still watches it for
    // its 30 s on its own clock, takes it over with a warning, and
    // converges.
    long_unrenewed(&real);
    let events = real.apply(&[]);
    let warning = format!("took over the bootstrap lock of {holder}: it went unrenewed for 30s");
    assert!(
        events.iter().any(|e| e["event"] == "warning"
            && e["message"].as_str().is_some_and(|m| m.contains(&warning))),
        "no takeover warning: {events:?}"
    );
    let outcome = outcomes(&events);
    assert_eq!(outcome["kube-system/cilium"], "unchanged");
    assert!(
        outcome["kube-system/coredns"] == "upgraded"
            || outcome["kube-system/coredns"] == "installed",
        "{outcome:?}"
    );
    assert_eq!(
        rolled_out(&real.plane, "Deployment", "kube-system", "coredns"),
        3
    );
    let status = real.run(&["status", "infra", "--output", "json"]);
    assert_eq!(status.code, 0, "{}", status.stderr);

    // The API server stops answering (SIGSTOP: connections are accepted,
    // nothing is answered, as in a partition) for 12 s right after a run
    // took the lock: the run says so in its own words within seconds, says
    // when it answers again, and converges.
    let run = spawn_apply(&real);
    let pid = run.id();
    plane_wait(&real.plane, "the run to take the lock", || {
        lease_holder(&real).filter(|h| h.ends_with(&format!("pid {pid}")))
    });
    real.plane.signal("kube-apiserver", libc::SIGSTOP);
    std::thread::sleep(Duration::from_secs(12));
    real.plane.signal("kube-apiserver", libc::SIGCONT);
    let run = finish(run);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let warnings: Vec<String> = run
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "warning")
        .filter_map(|e| e["message"].as_str().map(String::from))
        .collect();
    let away = format!(
        "the Kubernetes API server at {} has not answered for ",
        real.plane.server
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with(&away) && w.contains("in flight")),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|w| w.contains("answers again, after ")),
        "{warnings:?}"
    );
    assert!(
        !run.stdout.contains("ServiceError") && !run.stderr.contains("ServiceError"),
        "{}",
        run.stdout
    );

    // A rolling update that stays unready: the new pod can be scheduled
    // nowhere, the real Deployment controller keeps the 3 old pods
    // available. The tally counts pods of the new template only (0/3, never
    // the old pods' 1/3 or 3/3), and the release fails at its timeout
    // saying why, as `kubectl rollout status` would.
    real.edit_cluster(|text| {
        text.replace(
            "overrides:\n  coredns:\n    values: { replicaCount: 3 }\n",
            "overrides:\n  coredns:\n    timeout: 20s\n    values: { replicaCount: 3, nodeSelector: { bootstrap.dev/nowhere: \"true\" } }\n",
        )
    });
    let stuck = real.run(&["apply", "infra", "--output", "json"]);
    assert_eq!(stuck.code, 1, "{}\n{}", stuck.stdout, stuck.stderr);
    let events: Vec<Value> = stuck
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let tallies: Vec<(i64, i64)> = events
        .iter()
        .filter(|e| e["event"] == "release_progress" && e["release"] == "kube-system/coredns")
        .filter_map(|e| Some((e["tally"]["done"].as_i64()?, e["tally"]["total"].as_i64()?)))
        .collect();
    assert!(!tallies.is_empty(), "{}", stuck.stdout);
    assert!(
        tallies
            .iter()
            .all(|(done, total)| *done == 0 && *total == 3),
        "{tallies:?}"
    );
    assert_eq!(outcomes(&events)["kube-system/coredns"], "failed");
    let failed = events
        .iter()
        .find(|e| e["event"] == "release_finished" && e["release"] == "kube-system/coredns")
        .and_then(|e| e["message"].as_str())
        .unwrap_or_default();
    // Said as `kubectl rollout status` says it: new pods missing (1 or 2 of
    // 3 updated, as coredns' surge and unavailability allow), never ready.
    assert!(
        failed.contains(" of 3 pods updated") || failed.contains(" of 3 updated pods available"),
        "{failed}\n{}",
        stuck.stdout
    );
}

// ---------------------------------------------------------------------------
// The fleet example's Job.

/// The Job of examples/fleet (the ResourceSet expanded by the project's own
/// expander, as tests/it/fleet_examples.rs does), with its podFailurePolicy,
/// its RBAC and ConfigMap, created on the real API server (which validates
/// podFailurePolicy against restartPolicy and the container names), run by
/// the real Job controller to completion (kwok completes its Pod).
#[test]
#[cfg_attr(
    not(realenv),
    ignore = "needs the real test environment: tools/realenv/build"
)]
fn the_fleet_job_is_accepted_and_completes() {
    let _slot = realenv::one_at_a_time();
    use bootstrap::flux::object::Object;
    use bootstrap::flux::resourceset;

    let plane = ControlPlane::start();
    let api = plane.api();
    let documents = |path: &str| -> Vec<Value> {
        let text = std::fs::read_to_string(repo_root().join("examples/fleet").join(path)).unwrap();
        serde_saphyr::from_multiple::<Value>(&text)
            .unwrap()
            .into_iter()
            .filter(|d| !d.is_null())
            .collect()
    };
    let object = |body: &Value| {
        let text = |p: &str| body.pointer(p).and_then(Value::as_str).map(str::to_string);
        Object {
            api_version: text("/apiVersion").unwrap(),
            kind: text("/kind").unwrap(),
            name: text("/metadata/name").unwrap(),
            namespace: text("/metadata/namespace"),
            file: "examples/fleet/flux-operator/resourceset.yaml".into(),
            chain: Vec::new(),
            body: body.clone(),
            previous_ids: Vec::new(),
            applier: None,
            quoted: Default::default(),
            bare_nulls: Default::default(),
        }
    };
    let fleet = documents("flux-operator/resourceset.yaml");
    let outer = resourceset::expand(&object(&fleet[0]), &[]);
    assert_eq!(outer.problems, Vec::<String>::new());
    let mut jobs = Vec::new();
    for child in &outer.objects {
        let inner = resourceset::expand(&object(child), &[]);
        assert_eq!(inner.problems, Vec::<String>::new());
        jobs.extend(inner.objects);
    }
    assert_eq!(jobs.len(), 2);

    api.create(
        "/api/v1/namespaces",
        &json!({"metadata": {"name": "fleet"}}),
    )
    .unwrap();
    let mut objects = documents("flux-operator/rbac.yaml");
    objects.extend(documents("flux-operator/config.yaml"));
    for doc in &objects {
        let path = match doc["kind"].as_str().unwrap() {
            "ServiceAccount" => "/api/v1/namespaces/fleet/serviceaccounts",
            "ConfigMap" => "/api/v1/namespaces/fleet/configmaps",
            "Role" => "/apis/rbac.authorization.k8s.io/v1/namespaces/fleet/roles",
            "RoleBinding" => "/apis/rbac.authorization.k8s.io/v1/namespaces/fleet/rolebindings",
            other => panic!("no path for {other}"),
        };
        api.create(path, doc)
            .unwrap_or_else(|e| panic!("{} {}: {e}", doc["kind"], name(doc)));
    }
    for job in &jobs {
        let created = api
            .create("/apis/batch/v1/namespaces/fleet/jobs", job)
            .unwrap_or_else(|e| panic!("Job {}: {e}", name(job)));
        // Kept as written, with the server's default for a pod condition
        // rule's status.
        let mut expected = job["spec"]["podFailurePolicy"].clone();
        expected["rules"][2]["onPodConditions"][0]["status"] = json!("True");
        assert_eq!(created["spec"]["podFailurePolicy"], expected);
    }
    for job in &jobs {
        let path = format!("/apis/batch/v1/namespaces/fleet/jobs/{}", name(job));
        plane_wait(&plane, &format!("Job {} to complete", name(job)), || {
            api.get(&path).filter(|j| condition(j, "Complete"))
        });
    }
    // The server's own validation: the same Job with restartPolicy
    // OnFailure is rejected (podFailurePolicy needs Never).
    let mut invalid = jobs[0].clone();
    invalid["metadata"]["name"] = json!("bootstrap-invalid");
    invalid["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure");
    let err = api
        .create("/apis/batch/v1/namespaces/fleet/jobs", &invalid)
        .expect_err("podFailurePolicy with restartPolicy OnFailure");
    assert_eq!(err.code, 422, "{err}");
    assert!(err.message.contains("podFailurePolicy"), "{err}");
}

// ---------------------------------------------------------------------------
// A run killed while the real helm works: the orphaned-helm case.

const SLOW_CHART: &str = "apiVersion: v2\nname: slow\nversion: 0.1.0\n";
const SLOW_DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: slow
spec:
  replicas: {{ .Values.replicas | default 1 }}
  selector: {matchLabels: {app: slow}}
  template:
    metadata: {labels: {app: slow}}
    spec:
      containers: [{name: c, image: busybox}]
";
/// A hook Job whose Pod can run only on a Node labelled
/// `bootstrap.test/hooks=run`: until the test labels one, helm waits for it
/// with its release pending, as it would for a slow migration Job.
const SLOW_HOOK: &str = "apiVersion: batch/v1
kind: Job
metadata:
  name: slow-hook
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
    helm.sh/hook-delete-policy: before-hook-creation
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {bootstrap.test/hooks: run}
      containers: [{name: c, image: busybox}]
";
/// The release's budget: helm's `--timeout`, and what the Lease records as
/// the run's longest helm operation.
const SLOW_TIMEOUT_SECS: u64 = 30;

/// The release `default/slow` as `helm status` reports it: (status,
/// revision); `None` when there is none.
fn slow_release(real: &Real) -> Option<(String, i64)> {
    let mut cmd = Command::new(&real.helm);
    cmd.args([
        "status",
        "slow",
        "--namespace",
        "default",
        "--output",
        "json",
    ]);
    real.env(&mut cmd);
    let out = realenv::output_within(&mut cmd, realenv::COMMAND_LIMIT);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        assert!(stderr.contains("not found"), "helm status slow: {stderr}");
        return None;
    }
    let status: Value = serde_json::from_slice(&out.stdout).expect("helm status's JSON");
    Some((
        status["info"]["status"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        status["version"].as_i64().unwrap_or(-1),
    ))
}

/// Lets the hook Job's Pod run (on node-0), or not.
fn hooks_may_run(real: &Real, run: bool) {
    let value = if run { json!("run") } else { Value::Null };
    real.plane
        .api()
        .merge_patch(
            "/api/v1/nodes/node-0",
            &json!({"metadata": {"labels": {"bootstrap.test/hooks": value}}}),
        )
        .expect("labelling node-0");
}

/// How a run is killed while its helm works.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kill {
    /// bootstrap alone, by SIGKILL: its helm gets the parent-death signal.
    Run,
    /// bootstrap and its helm at once, by SIGKILL, as a container runtime
    /// ends every process of a container or the OOM killer ends both.
    RunAndHelm,
}

/// What became of one apply killed while its helm waited for the hook.
struct Killed {
    holder: String,
    /// The release status helm left.
    left: String,
    /// No earlier than helm's last write of the release record.
    pending_seen: Instant,
}

/// Starts `apply`, waits until its helm has made the release `pending`
/// (`pending-install` or `pending-upgrade`), kills it as `kill` says and
/// waits for its helm to be gone: a helm that outlives its run by more
/// than a few seconds fails the test.
fn kill_while_helm_works(real: &Real, pending: &str, kill: Kill) -> Killed {
    let helms = || crate::real_helm_signals::helm_processes(&real.helm, &real.plane.kubeconfig);
    let victim = spawn_apply(real);
    let pid = victim.id() as libc::pid_t;
    let holder = plane_wait(&real.plane, "the run to take the lock", || {
        lease_holder(real).filter(|h| h.ends_with(&format!("pid {pid}")))
    });
    plane_wait(
        &real.plane,
        &format!("helm to leave the release {pending}"),
        || slow_release(real).filter(|(s, _)| s == pending),
    );
    let pending_seen = Instant::now();
    let working = helms();
    assert_eq!(
        working.len(),
        1,
        "one helm works on the release: {working:?}"
    );
    // SAFETY: plain kills of the child this test started and of its helm.
    unsafe {
        if kill == Kill::RunAndHelm {
            // Stopped first, so bootstrap never sees its helm die.
            libc::kill(pid, libc::SIGSTOP);
            libc::kill(working[0] as libc::pid_t, libc::SIGKILL);
        }
        libc::kill(pid, libc::SIGKILL);
    }
    let killed = Instant::now();
    let victim = finish(victim);
    assert_eq!(victim.code, -1, "killed: {}", victim.stderr);
    while !helms().is_empty() {
        assert!(
            killed.elapsed() < Duration::from_secs(20),
            "the killed run's helm still runs"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (left, _) = slow_release(real).expect("the release");
    Killed {
        holder,
        left,
        pending_seen,
    }
}

/// After a kill: the Lease is still the dead run's; once it expires the next
/// run takes it over. A release the dead run left `pending-*` is refused
/// until its record is older than the dead run's helm timeout plus a minute
/// (a helm of that run may still be working on it), then recovered: a
/// `pending-install` uninstalled and installed afresh, a `pending-upgrade`
/// rolled back and upgraded again. A release helm recorded `failed` is
/// upgraded at once. Returns the converging run's events.
fn take_over_and_recover(real: &Real, killed: &Killed) -> Vec<Value> {
    assert_eq!(
        lease_holder(real).as_deref(),
        Some(killed.holder.as_str()),
        "the dead run's Lease stays"
    );
    // Long unrenewed by this clock (as if time had passed); the next run
    // still watches it for its 30 s before it takes it over
    // (docs/design.md#cluster-lock).
    long_unrenewed(real);
    let pending = killed.left.starts_with("pending-");
    if pending {
        let refused = real.run(&["apply", "infra"]);
        let said = format!("{}{}", refused.stdout, refused.stderr);
        assert_eq!(refused.code, 1, "{said}");
        assert!(
            said.contains(&format!(
                "default/slow: failed after 0.0s: was left {} at ",
                killed.left
            )) && said.contains(&format!(
                "by {}, whose expired lock this run took over; a helm of that run may still be working on it for up to ",
                killed.holder
            )) && said.contains(&format!(
                "took over the bootstrap lock of {}: it went unrenewed for 30s",
                killed.holder
            )),
            "{said}"
        );
        assert_eq!(
            slow_release(real).map(|(s, _)| s).as_deref(),
            Some(killed.left.as_str()),
            "the refused run touched the release"
        );
        // Released, with the dead run passed on to the next run.
        let lease = real.plane.api().get(LEASE).expect("the released Lease");
        assert_eq!(lease["spec"]["holderIdentity"], Value::Null, "{lease}");
        assert_eq!(
            lease["metadata"]["annotations"]["bootstrap/left-by"],
            killed.holder.as_str()
        );
    }
    hooks_may_run(real, true);
    if pending {
        let settled = killed.pending_seen + Duration::from_secs(SLOW_TIMEOUT_SECS + 60 + 1);
        std::thread::sleep(settled.saturating_duration_since(Instant::now()));
    }
    let events = real.apply(&[]);
    let warnings: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "warning")
        .filter_map(|e| e["message"].as_str())
        .collect();
    let recovered = match killed.left.as_str() {
        "pending-install" => Some("uninstalled it to install it afresh"),
        "pending-upgrade" => Some("rolled it back to the revision before to upgrade it again"),
        _ => None,
    };
    match recovered {
        // The run that took the lock over refused it; this one knows the
        // dead run from the Lease that run released.
        Some(done) => {
            let warning = format!(
                "default/slow was left {} by {}, whose expired lock an earlier run took over; {done}",
                killed.left, killed.holder
            );
            assert!(warnings.contains(&warning.as_str()), "{warnings:?}");
        }
        None => {
            let takeover = format!(
                "took over the bootstrap lock of {}: it went unrenewed for 30s",
                killed.holder
            );
            assert!(
                warnings.iter().any(|w| w.contains(&takeover)),
                "{warnings:?}"
            );
        }
    }
    assert_eq!(real.plane.api().get(LEASE), None, "the Lease was deleted");
    events
}

/// The orphaned-helm case with the real helm on the real control plane:
/// bootstrap is killed while its helm waits for the pre-install hook Job,
/// then for the pre-upgrade one, once per entry of `kills` (the first a
/// first install, each later one an upgrade to one more replica). Killed
/// alone, bootstrap leaves no helm working: the parent-death signal makes
/// helm cancel and record the release `failed`, and the next run upgrades it
/// as soon as the Lease has expired. Killed with its helm, it leaves the
/// release `pending-*`, which the next run refuses, then recovers, after the
/// wait the design sets (docs/design.md#live-refusal-rules).
fn orphaned_helm(helm_major: u8, kills: &[Kill]) {
    let _slot = realenv::one_at_a_time();
    let chart = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(chart.path().join("templates")).unwrap();
    std::fs::write(chart.path().join("Chart.yaml"), SLOW_CHART).unwrap();
    std::fs::write(chart.path().join("templates/deploy.yaml"), SLOW_DEPLOYMENT).unwrap();
    std::fs::write(chart.path().join("templates/hook.yaml"), SLOW_HOOK).unwrap();
    let cluster = |replicas: usize| {
        format!(
            "name: infra\nreleases: [slow]\noverrides:\n  slow:\n    values: {{ replicas: {replicas} }}\n"
        )
    };
    let root = small_root(
        &cluster(1),
        &format!(
            "name: slow\nnamespace: default\nchart: {{ path: {} }}\ntimeout: {SLOW_TIMEOUT_SECS}s\n",
            chart.path().display()
        ),
    );
    let real = Real {
        plane: ControlPlane::start(),
        helm: realenv::helm(helm_major),
        root,
        home: tempfile::tempdir().unwrap(),
    };
    for (i, &kill) in kills.iter().enumerate() {
        let replicas = i + 1;
        let first = i == 0;
        hooks_may_run(&real, false);
        real.edit_cluster(|_| cluster(replicas));
        let before = slow_release(&real).map_or(0, |(_, revision)| revision);
        let pending = if first {
            "pending-install"
        } else {
            "pending-upgrade"
        };
        let killed = kill_while_helm_works(&real, pending, kill);
        let expected = match kill {
            Kill::Run => "failed",
            Kill::RunAndHelm => pending,
        };
        assert_eq!(
            killed.left,
            expected,
            "helm {helm_major}, {kill:?} killed during the {}",
            if first { "install" } else { "upgrade" }
        );
        let events = take_over_and_recover(&real, &killed);
        let (outcome, revision) = match (first, kill) {
            // Uninstalled, installed afresh.
            (true, Kill::RunAndHelm) => ("installed", 1),
            // The failed revision, then the upgrade.
            (_, Kill::Run) => ("upgraded", before + 2),
            // The pending revision, the rollback, the upgrade.
            (false, Kill::RunAndHelm) => ("upgraded", before + 3),
        };
        assert_eq!(outcomes(&events)["default/slow"], outcome);
        assert_eq!(
            slow_release(&real),
            Some(("deployed".to_string(), revision))
        );
        assert_eq!(
            rolled_out(&real.plane, "Deployment", "default", "slow"),
            replicas as i64
        );
    }
    let status = real.run(&["status", "infra", "--output", "json"]);
    assert_eq!(status.code, 0, "{}\n{}", status.stderr, status.stdout);
}

/// helm 3: killed alone, during a first install and an upgrade. (A helm 3
/// killed outright and the commands that recover its release are
/// real_helm_signals' cases.)
#[test]
#[cfg_attr(
    not(realenv),
    ignore = "needs the real test environment: tools/realenv/build"
)]
fn a_killed_run_leaves_no_helm_3_working_and_the_next_run_converges() {
    orphaned_helm(3, &[Kill::Run, Kill::Run]);
}

/// helm 4: killed with its helm during a first install, alone during an
/// upgrade, then with its helm during another upgrade.
#[test]
#[cfg_attr(
    not(realenv),
    ignore = "needs the real test environment: tools/realenv/build"
)]
fn a_killed_run_and_its_helm_4_leave_a_release_the_next_run_recovers() {
    orphaned_helm(4, &[Kill::RunAndHelm, Kill::Run, Kill::RunAndHelm]);
}

// ---------------------------------------------------------------------------
// A fleet: `apply --all` over two real API servers.

/// The ledger entries on one API server: key → the cluster config that
/// recorded it.
fn ledger_clusters(plane: &ControlPlane) -> BTreeMap<String, String> {
    let shards = plane.api().list(
        "/api/v1/namespaces/kube-system/configmaps?labelSelector=bootstrap.dev%2Fledger%3Downership",
    );
    let mut entries = BTreeMap::new();
    for shard in &shards {
        for (key, value) in shard["data"].as_object().into_iter().flatten() {
            let entry: Value = serde_json::from_str(value.as_str().unwrap_or_default())
                .unwrap_or_else(|e| panic!("ledger entry {key}: {e}"));
            entries.insert(
                key.clone(),
                entry["cluster"].as_str().unwrap_or_default().to_string(),
            );
        }
    }
    entries
}

/// `apply --all` with two clusters, `infra` and `apps`, each on its own
/// real API server, reached through one kubeconfig with a context for each:
/// both installed, each cluster's ledger and Lease on its own server, the
/// releases on the right one, and `status --all` clean.
#[test]
#[cfg_attr(
    not(all(realenv, shared_charts)),
    ignore = "needs the real test environment (`tools/realenv/build`) and the real charts (../shared/charts, BOOTSTRAP_TEST_CHARTS=DIR or scripts/pull-test-charts)"
)]
fn apply_all_over_two_real_api_servers() {
    let _slot = realenv::one_at_a_time();
    // cilium's values create ServiceMonitors, and coredns needs cilium.
    let real = Real::start(4, &["prometheus-operator-crds", "cilium", "coredns"]);
    let apps = ControlPlane::start_with(realenv::Options {
        context: "admin@apps".into(),
        nodes: 2,
    });
    // The shipped `apps` cluster (its own Cilium identity, pod CIDR and
    // addresses), limited to the same releases.
    let shipped = repo_root().join("clusters/apps");
    let apps_dir = real.root.path().join("clusters/apps");
    copy_dir(&shipped, &apps_dir);
    let cluster = std::fs::read_to_string(shipped.join("cluster.yaml")).unwrap();
    assert!(
        cluster.contains("context: admin@apps\n"),
        "the shipped clusters/apps changed: {cluster}"
    );
    let cluster = cluster.split("\nflux:").next().unwrap().to_string()
        + "\nreleases: [prometheus-operator-crds, cilium, coredns]\n";
    std::fs::write(apps_dir.join("cluster.yaml"), cluster).unwrap();
    let kubeconfig = real.home.path().join("fleet-kubeconfig");
    realenv::write_kubeconfig(
        &kubeconfig,
        &[(&real.plane, "admin@infra"), (&apps, "admin@apps")],
    );
    let fleet = |args: &[&str]| {
        let mut cmd = real.command(args);
        cmd.env("KUBECONFIG", &kubeconfig);
        let out = realenv::output_within(&mut cmd, realenv::COMMAND_LIMIT);
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    };

    let applied = fleet(&["apply", "--all"]);
    assert_eq!(
        applied.code,
        0,
        "{}\n{}\n(logs: {}, {})",
        applied.stderr,
        applied.stdout,
        real.plane.logs().display(),
        apps.logs().display()
    );
    assert!(
        applied.stdout.contains("2 of 2 clusters applied"),
        "{}",
        applied.stdout
    );
    for (name, plane, nodes) in [("infra", &real.plane, 3), ("apps", &apps, 2)] {
        // Each cluster's ledger is on its own server and names it.
        let ledger = ledger_clusters(plane);
        let expected: BTreeMap<String, String> = ["kube-system.cilium", "kube-system.coredns"]
            .iter()
            .map(|key| (key.to_string(), name.to_string()))
            .collect();
        assert_eq!(ledger, expected, "{name}");
        assert_eq!(
            rolled_out(plane, "DaemonSet", "kube-system", "cilium"),
            nodes,
            "{name}"
        );
        assert_eq!(
            rolled_out(plane, "Deployment", "kube-system", "coredns"),
            2,
            "{name}"
        );
        assert!(
            plane
                .api()
                .get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/servicemonitors.monitoring.coreos.com")
                .is_some(),
            "{name}: the CRD phase"
        );
        assert_eq!(
            plane.api().get(LEASE),
            None,
            "{name}: the lock was released"
        );
    }

    let status = fleet(&["status", "--all", "--output", "json"]);
    assert_eq!(status.code, 0, "{}\n{}", status.stderr, status.stdout);
    let doc: Value = serde_json::from_str(&status.stdout).expect("status JSON");
    let clusters = doc["clusters"].as_array().expect("clusters");
    let names: Vec<&str> = clusters
        .iter()
        .map(|c| c["cluster"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(names, ["apps", "infra"]);
    for cluster in clusters {
        let coredns = cluster["releases"]
            .as_array()
            .expect("releases")
            .iter()
            .find(|r| r["release"] == "kube-system/coredns")
            .expect("coredns");
        assert_eq!(coredns["deployed"]["status"], "deployed", "{cluster}");
    }
    // Once more: nothing to do on either.
    let again = fleet(&["apply", "--all"]);
    assert_eq!(again.code, 0, "{}\n{}", again.stderr, again.stdout);
}

// The journey (docs/design.md#the-journey): the shipped `infra` cluster as a
// user applies it, every release and all eleven real charts, with
// flux-operator's real controller running as the flux-operator release's
// pod would: it installs Flux from the FluxInstance, so the catalog's
// `FluxInstance … Ready=True` hook passes because the operator said so.

/// Every chart the shipped catalog pins, served on the loopback.
fn journey_repo() -> &'static ChartRepo {
    static REPO: OnceLock<ChartRepo> = OnceLock::new();
    REPO.get_or_init(|| {
        let charts = charts();
        let names = [
            "cilium",
            "coredns",
            "cert-manager",
            "spegel",
            "external-secrets",
            "flux-operator",
            "flux-instance",
            "prometheus-operator-crds",
            "victoria-metrics-operator-crds",
            "cloudnative-pg",
        ];
        let dirs: Vec<PathBuf> = names.iter().map(|n| charts.join(n)).collect();
        ChartRepo::serve(&realenv::helm(4), &dirs)
    })
}

/// The releases of the shipped `infra` cluster that install (the CRD-only
/// ones apply their CRDs in the CRD phase).
const SHIPPED_INSTALLED: [&str; 7] = [
    "cert-manager/cert-manager",
    "external-secrets/external-secrets",
    "flux-system/flux-instance",
    "flux-system/flux-operator",
    "kube-system/cilium",
    "kube-system/coredns",
    "kube-system/spegel",
];

/// The wall time of each step, printed at the end (past the harness's
/// capture) and in docs/design.md#the-journey.
struct Steps(Vec<(String, Duration)>, Instant);

impl Steps {
    fn new() -> Steps {
        Steps(Vec::new(), Instant::now())
    }

    fn done(&mut self, step: &str) {
        let now = Instant::now();
        self.0.push((step.to_string(), now - self.1));
        self.1 = now;
    }

    fn print(&self, title: &str) {
        let mut text = format!("{title}:\n");
        for (step, took) in &self.0 {
            text.push_str(&format!("  {:>6.1} s  {step}\n", took.as_secs_f64()));
        }
        let total: Duration = self.0.iter().map(|(_, d)| *d).sum();
        text.push_str(&format!("  {:>6.1} s  in all\n", total.as_secs_f64()));
        eprint!("{text}");
    }
}

fn journey(helm_major: u8) {
    let _slot = realenv::one_at_a_time();
    let mut steps = Steps::new();
    let registry = testkit::registry::Registry::start(&realenv::helm(4));
    let artifact = testkit::realflux::manifests_artifact(&registry);
    let mut made = None;
    let git = testkit::realflux::GitServer::serve_made(|url| {
        let root = realenv::journey_root(&journey_repo().url, &charts(), url, &artifact);
        hand_over_spegel(root.path(), &journey_repo().url);
        let path = root.path().to_path_buf();
        made = Some(root);
        path
    });
    let real = Real {
        plane: ControlPlane::start(),
        helm: realenv::helm(helm_major),
        root: made.expect("the journey's config root"),
        home: tempfile::tempdir().unwrap(),
    };
    let (plane, api) = (&real.plane, real.plane.api());
    steps.done(
        "control plane up, 10 charts served, the Flux manifests artifact pushed, the repository served over git",
    );

    // apply, as a user runs it; the operator starts as its pod would, once
    // helm has installed the flux-operator release.
    let log = real.home.path().join("apply.jsonl");
    let mut cmd = real.command(&["apply", "infra", "--output", "json"]);
    cmd.stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(real.home.path().join("apply.err")).unwrap());
    let mut child = cmd.spawn().expect("bootstrap apply");
    let deadline = Instant::now() + realenv::COMMAND_LIMIT;
    let deployment = "/apis/apps/v1/namespaces/flux-system/deployments/flux-operator";
    while api.get(deployment).is_none() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "apply ended before flux-operator was installed:\n{}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default(),
            std::fs::read_to_string(real.home.path().join("apply.err")).unwrap_or_default()
        );
        assert!(Instant::now() < deadline, "flux-operator never installed");
        std::thread::sleep(Duration::from_millis(250));
    }
    steps.done("apply: CRD phase and releases up to flux-operator");
    let mut operator = testkit::realflux::Operator::start_with(plane, &registry.env());
    steps.done("flux-operator's controller started");
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        operator.check_alive();
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("apply still running after {:?}", realenv::COMMAND_LIMIT);
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let stdout = std::fs::read_to_string(&log).unwrap();
    let stderr = std::fs::read_to_string(real.home.path().join("apply.err")).unwrap();
    assert!(
        status.success(),
        "apply failed (logs: {}):\n{stderr}\n{stdout}",
        plane.logs().display()
    );
    steps.done("apply: flux-instance and its hooks (Flux installed by the operator)");
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(outcomes(&events), all(&SHIPPED_INSTALLED, "installed"));
    // What the workloads are before Flux runs, and spegel awaiting adoption.
    let felt_before = crate::real_flux::workloads(plane);
    assert!(
        felt_before.contains_key("DaemonSet/spegel"),
        "{:?}",
        felt_before.keys()
    );
    assert_eq!(
        handover(&real, "kube-system/spegel")
            .split(" (")
            .next()
            .unwrap_or_default(),
        "awaiting adoption"
    );
    // Every CRD of the CRD phase Established before the first release.
    let established = events
        .iter()
        .position(|e| e["event"] == "crds_established")
        .expect("crds_established");
    let first_release = events
        .iter()
        .position(|e| e["event"] == "release_started")
        .expect("release_started");
    assert!(established < first_release);
    // `needs` order: each release started after everything it needs finished.
    let at = |kind: &str, release: &str| {
        events
            .iter()
            .position(|e| e["event"] == kind && e["release"] == release)
            .unwrap_or_else(|| panic!("no {kind} of {release}"))
    };
    for (release, need) in [
        ("kube-system/coredns", "kube-system/cilium"),
        ("kube-system/spegel", "kube-system/coredns"),
        ("cert-manager/cert-manager", "kube-system/coredns"),
        (
            "external-secrets/external-secrets",
            "cert-manager/cert-manager",
        ),
        ("flux-system/flux-operator", "cert-manager/cert-manager"),
        ("flux-system/flux-instance", "flux-system/flux-operator"),
    ] {
        assert!(
            at("release_finished", need) < at("release_started", release),
            "{release} started before {need} finished"
        );
    }

    // The FluxInstance is Ready because the operator reconciled it: it
    // wrote the revision it applied, and Flux's controllers and CRDs are
    // in the cluster.
    let instance = api
        .get("/apis/fluxcd.controlplane.io/v1/namespaces/flux-system/fluxinstances/flux")
        .expect("the FluxInstance");
    assert!(condition(&instance, "Ready"), "{instance:#}");
    let revision = instance["status"]["lastAppliedRevision"]
        .as_str()
        .unwrap_or_default();
    assert!(revision.starts_with("v2.7."), "{instance:#}");
    for controller in [
        "source-controller",
        "kustomize-controller",
        "helm-controller",
        "notification-controller",
    ] {
        assert!(
            api.get(&format!(
                "/apis/apps/v1/namespaces/flux-system/deployments/{controller}"
            ))
            .is_some(),
            "the operator installed no {controller}"
        );
    }
    for crd in [
        "gitrepositories.source.toolkit.fluxcd.io",
        "kustomizations.kustomize.toolkit.fluxcd.io",
        "helmreleases.helm.toolkit.fluxcd.io",
    ] {
        let crd = api
            .get(&format!(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}"
            ))
            .unwrap_or_else(|| panic!("no CRD {crd}"));
        assert!(condition(&crd, "Established"), "{crd:#}");
    }
    // The catalog's sync hook applied the tree's GitRepository, which names
    // the repository the tree is served from.
    let repository = api
        .get("/apis/source.toolkit.fluxcd.io/v1/namespaces/flux-system/gitrepositories/flux-system")
        .expect("the GitRepository of sync.yaml");
    assert_eq!(repository["spec"]["url"], git.url.as_str());
    // The scan and the guard were said.
    assert!(
        events.iter().any(|e| e["event"] == "gitops_scanned"
            && e["entrypoint"] == "examples/gitops/clusters/infra")
    );
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "guard" && e["state"] == "installed")
    );

    // Flux takes over: its real controllers (standing in for the pods of
    // the Deployments the operator installed) reconcile the tree from git,
    // starting from the objects the sync hook applied.
    let mut flux = testkit::realflux::Flux::start_controllers(plane);
    steps.done("Flux's controllers started");
    const SYNC: &str =
        "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations/flux-system";
    const REPOSITORY: &str =
        "/apis/source.toolkit.fluxcd.io/v1/namespaces/flux-system/gitrepositories/flux-system";
    let ready = |p: &ControlPlane, path: &str| {
        let object = p.api().get(path)?;
        testkit::realflux::ready(&object)
    };
    flux.wait(plane, "flux-system Ready", Duration::from_secs(180), |p| {
        ready(p, SYNC).filter(|(status, ..)| status == "True")
    });
    for applied in ["cilium-config", "metrics-server"] {
        assert!(
            api.get(&format!(
                "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations/{applied}"
            ))
            .is_some(),
            "Flux did not apply the tree's Kustomization {applied}"
        );
    }
    steps.done("Flux reconciled the tree (flux-system Ready)");

    // The handover: the guard admits spegel's HelmRelease (its release is
    // `ownership: handover`), helm-controller adopts the release, and no
    // workload feels it: same generation, pod template, pods and hashes;
    // spegel's objects gain only helm-controller's origin labels.
    const SPEGEL: &str =
        "/apis/helm.toolkit.fluxcd.io/v2/namespaces/kube-system/helmreleases/spegel";
    flux.wait(
        plane,
        "spegel adopted by helm-controller",
        Duration::from_secs(300),
        |p| ready(p, SPEGEL).filter(|(status, ..)| status == "True"),
    );
    let history: Vec<Value> =
        serde_json::from_str(&real.helm(&["history", "spegel", "-n", "kube-system", "-o", "json"]))
            .unwrap();
    assert_eq!(
        history.len(),
        2,
        "helm-controller's upgrade is spegel's second revision: {history:?}"
    );
    let felt_after = crate::real_flux::workloads(plane);
    assert_eq!(
        felt_before.keys().collect::<Vec<_>>(),
        felt_after.keys().collect::<Vec<_>>()
    );
    for (key, (felt, labels)) in &felt_before {
        let (felt_now, labels_now) = &felt_after[key];
        assert_eq!(felt, felt_now, "{key} felt the adoption");
        let (added, changed) = crate::real_flux::added_labels(labels, labels_now);
        assert_eq!(changed, Vec::<String>::new(), "{key}");
        if key == "DaemonSet/spegel" {
            assert_eq!(added, crate::real_flux::origin_labels("spegel"), "{key}");
        } else {
            assert!(added.is_empty(), "{key}: {added:?}");
        }
    }
    assert!(
        handover(&real, "kube-system/spegel")
            .starts_with("adopted by Flux (HelmRelease kube-system/spegel"),
        "{}",
        handover(&real, "kube-system/spegel")
    );
    steps.done("spegel adopted by helm-controller, no workload changed");

    // The outage, after the bootstrap: a commit puts a HelmRelease for the
    // bootstrap release kube-system/cilium in the tree. The admission guard
    // denies it, Flux's Kustomization says so, and Cilium keeps its
    // revision and its pods.
    let generation = |p: &ControlPlane| {
        p.api()
            .get("/apis/apps/v1/namespaces/kube-system/daemonsets/cilium")
            .expect("cilium's DaemonSet")["metadata"]["generation"]
            .clone()
    };
    let before = generation(plane);
    // In the repository and in its working copy (the config root, where
    // `check` reads it), as a user's commit is in both.
    git.commit("a HelmRelease for cilium", |tree| {
        outage(tree, true);
        outage(real.root.path(), true);
    });
    for path in [REPOSITORY, SYNC] {
        let now = format!("{:?}", std::time::SystemTime::now());
        api.merge_patch(
            path,
            &json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": now}}}),
        )
        .unwrap_or_else(|e| panic!("requesting a reconcile of {path}: {e}"));
    }
    let (_, reason, message) = flux.wait(
        plane,
        "flux-system denied by the guard",
        Duration::from_secs(180),
        |p| ready(p, SYNC).filter(|(status, ..)| status == "False"),
    );
    assert!(
        message.contains("bootstrap-ownership-guard") && message.contains("HelmRelease"),
        "{reason}: {message}"
    );
    assert!(
        api.get("/apis/helm.toolkit.fluxcd.io/v2/namespaces/kube-system/helmreleases/cilium")
            .is_none(),
        "the HelmRelease for cilium was created"
    );
    let history: Vec<Value> =
        serde_json::from_str(&real.helm(&["history", "cilium", "-n", "kube-system", "-o", "json"]))
            .unwrap();
    assert_eq!(history.len(), 1, "cilium has one revision: {history:?}");
    assert_eq!(generation(plane), before, "cilium's DaemonSet changed");
    // `check` finds it in git, with the chain of files.
    let check = real.run(&["check", "infra"]);
    assert_eq!(check.code, 1, "{}\n{}", check.stdout, check.stderr);
    assert!(
        check.stdout.contains("flux-manages-bootstrap-release")
            && check
                .stdout
                .contains("examples/gitops/clusters/infra/cilium.yaml"),
        "{}",
        check.stdout
    );
    steps.done("a HelmRelease for cilium in git: denied by the guard, cilium unchanged");
    // Taken out again, as the fix: Flux is Ready once more.
    git.commit("no HelmRelease for cilium", |tree| {
        outage(tree, false);
        outage(real.root.path(), false);
    });
    for path in [REPOSITORY, SYNC] {
        let now = format!("{:?}", std::time::SystemTime::now());
        api.merge_patch(
            path,
            &json!({"metadata": {"annotations": {"reconcile.fluxcd.io/requestedAt": now}}}),
        )
        .unwrap_or_else(|e| panic!("requesting a reconcile of {path}: {e}"));
    }
    flux.wait(
        plane,
        "flux-system Ready again",
        Duration::from_secs(180),
        |p| ready(p, SYNC).filter(|(status, ..)| status == "True"),
    );
    steps.done("the fix committed: flux-system Ready again");

    // status, diff --exit-code, a second apply: all clean.
    let run = real.run(&["status", "infra"]);
    assert_eq!(run.code, 0, "status:\n{}\n{}", run.stdout, run.stderr);
    steps.done("status");
    let run = real.run(&["diff", "infra", "--exit-code"]);
    assert_eq!(run.code, 0, "diff:\n{}\n{}", run.stdout, run.stderr);
    steps.done("diff --exit-code");
    let events = real.apply(&[]);
    assert_eq!(outcomes(&events), shipped_after_handover("unchanged"));
    steps.done("apply again (nothing upgraded)");

    // destroy: dependents first; the operator (still running) removes Flux
    // when flux-instance's FluxInstance goes.
    let events = real.events("destroy", &["--yes"]);
    assert_eq!(outcomes(&events), shipped_after_handover("uninstalled"));
    let finished = |release: &str| at_in(&events, "release_finished", release);
    assert!(finished("flux-system/flux-instance") < finished("flux-system/flux-operator"));
    assert!(finished("flux-system/flux-operator") < finished("cert-manager/cert-manager"));
    assert!(finished("kube-system/coredns") < finished("kube-system/cilium"));
    steps.done("destroy (reverse order)");
    drop(flux);
    operator.check_alive();
    drop(operator);
    steps.print(&format!("the journey with helm {helm_major}"));
}

/// The shipped releases' outcomes once spegel is Flux's: `adopted`, the
/// others `outcome`.
fn shipped_after_handover(outcome: &str) -> BTreeMap<String, String> {
    let mut out = all(&SHIPPED_INSTALLED, outcome);
    out.insert("kube-system/spegel".into(), "adopted".into());
    out
}

/// `status infra -o json`'s handover line of `release`.
fn handover(real: &Real, release: &str) -> String {
    let run = real.run(&["status", "infra", "--output", "json"]);
    let status: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("status: {e}\n{}\n{}", run.stdout, run.stderr));
    let doc = if status.is_array() {
        &status[0]
    } else {
        &status
    };
    doc["releases"]
        .as_array()
        .expect("status releases")
        .iter()
        .find(|r| r["release"] == release)
        .unwrap_or_else(|| panic!("status has no {release}: {status}"))["handover"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A user's choice in the journey's working copy: spegel handed over to
/// Flux (`ownership: handover`), its HelmRelease in the tree with the same
/// chart and values, from a HelmRepository on the served charts.
fn hand_over_spegel(root: &std::path::Path, charts: &str) {
    realenv::rewrite(
        root,
        "releases/core.yaml",
        &[(
            "name: spegel\nnamespace: kube-system\n",
            "name: spegel\nnamespace: kube-system\n# Flux's after the bootstrap: examples/gitops/clusters/infra/spegel.yaml.\nownership: handover\n".into(),
        )],
    );
    let dir = root.join("examples/gitops/clusters/infra");
    std::fs::write(
        dir.join("spegel.yaml"),
        format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: charts\n  namespace: flux-system\nspec:\n  interval: 1h\n  url: {charts}\n---\n\
             apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: spegel\n  namespace: kube-system\nspec:\n  interval: 1h\n\
             \x20 chart:\n    spec:\n      chart: spegel\n      version: 0.4.0\n      sourceRef:\n        kind: HelmRepository\n        name: charts\n        namespace: flux-system\n\
             \x20 values:\n    spegel:\n      containerdRegistryConfigPath: /etc/cri/conf.d/hosts\n    service:\n      registry:\n        hostPort: 29999\n"
        ),
    )
    .unwrap();
    let kustomization = dir.join("kustomization.yaml");
    let text = std::fs::read_to_string(&kustomization).unwrap();
    std::fs::write(&kustomization, format!("{text}  - spegel.yaml\n")).unwrap();
}

/// The outage's mistake in the tree under `root`: a HelmRelease for the
/// bootstrap release kube-system/cilium, added (`true`) or taken out.
fn outage(root: &std::path::Path, add: bool) {
    let dir = root.join("examples/gitops/clusters/infra");
    let kustomization = dir.join("kustomization.yaml");
    let text = std::fs::read_to_string(&kustomization).unwrap();
    if add {
        std::fs::write(
            dir.join("cilium.yaml"),
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: cilium\n  namespace: kube-system\nspec:\n  interval: 10m\n  chart:\n    spec:\n      chart: cilium\n      version: 1.18.2\n      sourceRef:\n        kind: HelmRepository\n        name: cilium\n",
        )
        .unwrap();
        std::fs::write(&kustomization, format!("{text}  - cilium.yaml\n")).unwrap();
    } else {
        std::fs::remove_file(dir.join("cilium.yaml")).unwrap();
        std::fs::write(&kustomization, text.replace("  - cilium.yaml\n", "")).unwrap();
    }
}

fn at_in(events: &[Value], kind: &str, release: &str) -> usize {
    events
        .iter()
        .position(|e| e["event"] == kind && e["release"] == release)
        .unwrap_or_else(|| panic!("no {kind} of {release}"))
}

#[test]
#[cfg_attr(
    not(all(real_flux, shared_charts)),
    ignore = "needs the real test environment with Flux (`tools/realenv/build`, with flux-controllers and flux-operator) and the real charts (../shared/charts, BOOTSTRAP_TEST_CHARTS=DIR or scripts/pull-test-charts)"
)]
fn the_journey_with_helm_4() {
    journey(4);
}

#[test]
#[cfg_attr(
    not(all(real_flux, shared_charts)),
    ignore = "needs the real test environment with Flux (`tools/realenv/build`, with flux-controllers and flux-operator) and the real charts (../shared/charts, BOOTSTRAP_TEST_CHARTS=DIR or scripts/pull-test-charts)"
)]
fn the_journey_with_helm_3() {
    journey(3);
}

/// A helmfile hook `kubectl wait --for condition=established crd/…` is
/// imported as a typed `condition` hook with kubectl's word as written
/// (`established`), and passes against the real API server, whose CRD
/// reports `Established`: conditions compare without case, as kubectl
/// compares them (it waited until its timeout before).
#[test]
#[cfg_attr(
    not(all(realenv, shared_charts)),
    ignore = "needs the real test environment and the real charts: run `tools/realenv/build` (the charts are ../shared/charts beside the repository, or BOOTSTRAP_TEST_CHARTS)"
)]
fn an_imported_kubectl_wait_for_established_passes_on_the_real_api_server() {
    let _slot = realenv::one_at_a_time();
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("hf")).unwrap();
    std::fs::write(
        root.path().join("hf/helmfile.yaml"),
        format!(
            "repositories:\n  - name: local\n    url: {}\nreleases:\n  - name: coredns\n    namespace: kube-system\n    chart: local/coredns\n    version: 1.44.3\n    values:\n      - fullnameOverride: coredns\n    hooks:\n      - events: [\"postsync\"]\n        command: kubectl\n        args: [\"wait\", \"--for\", \"condition=established\", \"crd/helmreleases.helm.toolkit.fluxcd.io\", \"--timeout=60s\"]\n",
            repo().url
        ),
    )
    .unwrap();
    let real = Real {
        plane: ControlPlane::start(),
        helm: realenv::helm(4),
        root,
        home: tempfile::tempdir().unwrap(),
    };
    let import = real.run(&[
        "import",
        "helmfile",
        "hf",
        "--cluster",
        "infra",
        "--no-helmfile",
    ]);
    assert_eq!(import.code, 0, "{}\n{}", import.stdout, import.stderr);
    let written = std::fs::read_to_string(real.root.path().join("releases/helmfile.yaml")).unwrap();
    assert!(written.contains("type: established"), "{written}");
    real.plane
        .api()
        .install_crds(&realenv::share("flux-crds", HELM_RELEASE_CRD));
    let started = Instant::now();
    let events = real.apply(&[]);
    assert_eq!(outcomes(&events)["kube-system/coredns"], "installed");
    let hook = events
        .iter()
        .find(|e| e["event"] == "hook_finished")
        .expect("the imported hook ran");
    assert_eq!(hook["ok"], true, "{hook}");
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "the hook waited for its timeout: {:?}",
        started.elapsed()
    );
}
