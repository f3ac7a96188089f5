//! The corpus setups (../shared/corpus) taken the whole way a user takes
//! them: imported through the real helmfile (tests/it/import_corpus.rs,
//! which also runs `plan` and `check` against each setup's own Flux tree and
//! compares the import with `helmfile template`), then applied with the real
//! helm 4 on a fresh real control plane (docs/design.md#the-journey).
//!
//! What is applied is the part of each setup whose charts the test
//! environment has at the version the setup pins: Cilium 1.20.1 (1.17.1 for
//! jfroy/flatops), the chart as released, from Cilium's own Go module
//! (`tools/realenv/build cilium cilium-1.17`).
//! The setups' other charts (CoreDNS 1.47.0, Spegel 0.7.4, cert-manager
//! v1.21.1, external-secrets 2.9.0, flux-operator 0.58.1, …) cannot be had
//! offline at their pins, so those releases are imported and compared but not
//! applied: `apply --only cilium --no-needs`. Nothing of a setup is edited
//! but its chart hosts, pointed at the loopback registry (standing in for
//! the internet), and jfroy/flatops's `secrets:` entry of CoreDNS, a file
//! encrypted to a key only its owner holds.
//!
//! On a real cluster cilium-operator registers Cilium's CRDs when it starts,
//! and the setups' hooks wait for them (`kubectl wait --for=create
//! crd/ciliumbgp…`) or apply objects of those kinds right after the install
//! (`kubectl apply --server-side` of the setup's own networking files). kwok
//! runs no container, so a stand-in does what the operator does: when the
//! `cilium-operator` Deployment appears, it registers the CRDs of the same
//! module at the same version (`pkg/k8s/apis/cilium.io/client/crds`), as
//! kwok stands in for the kubelets.

#![cfg_attr(
    not(all(
        helmfile,
        shared_corpus,
        oci_registry,
        realenv,
        realenv_cilium,
        kubectl,
        shared_charts
    )),
    allow(dead_code, unused_imports)
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common;
use serde_json::Value;
use testkit::realenv::{self, Api, ControlPlane, outcomes};

use crate::import_corpus::{self, Imported, Setup};

/// The first object of the operator helm creates (helm creates
/// ServiceAccounts before workloads).
const OPERATOR: &str = "/api/v1/namespaces/kube-system/serviceaccounts/cilium-operator";

/// cilium-operator's stand-in, until dropped. The operator registers Cilium's
/// CRDs when it starts and reports ready only once they are established,
/// so a `helm --wait` that returns finds them served. kwok makes the
/// operator's pods ready at once, so the stand-in registers the CRDs (all of
/// them, then waits until each is Established) as soon as helm starts
/// creating the operator's objects: its ServiceAccount.
struct OperatorStandIn {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Option<Duration>>>,
}

impl OperatorStandIn {
    fn start(plane: &ControlPlane, version: &str, work: &Path) -> OperatorStandIn {
        let api = Api::new(&plane.kubeconfig, &plane.context);
        let crds = work.join("cilium-crds.yaml");
        let mut all = String::new();
        for api_version in ["v2", "v2alpha1"] {
            let dir = import_corpus::cilium_share(version, import_corpus::CILIUM_CRDS)
                .expect("a tool shares Cilium at this version")
                .join(api_version);
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
                .collect();
            files.sort();
            for file in files {
                all.push_str("---\n");
                all.push_str(&std::fs::read_to_string(file).unwrap());
            }
        }
        std::fs::write(&crds, all).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            while !stopped.load(Ordering::Relaxed) {
                if api.get(OPERATOR).is_some() {
                    api.install_crds(&crds);
                    return Some(started.elapsed());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            None
        });
        OperatorStandIn {
            stop,
            thread: Some(thread),
        }
    }

    /// When the CRDs were registered (after the stand-in started), if
    /// they were.
    fn registered(mut self) -> Option<Duration> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take()?.join().expect("the stand-in panicked")
    }
}

impl Drop for OperatorStandIn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A bootstrap or helm run in the imported setup, against `plane`.
struct Applier<'a> {
    imported: &'a Imported,
    setup: &'a Setup,
    plane: &'a ControlPlane,
    /// The plane's kubeconfig, or one through a [`Distance`].
    kubeconfig: PathBuf,
    home: PathBuf,
}

impl Applier<'_> {
    fn command(&self, program: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(&self.imported.root);
        for (k, v) in &self.imported.env.vars {
            cmd.env(k, v);
        }
        common::isolate(&mut cmd, &self.kubeconfig, &self.home);
        cmd
    }

    /// `bootstrap --dir CONFIG --context CTX ARGS`: exit code, stdout,
    /// stderr.
    fn bootstrap(&self, args: &[&str]) -> (i32, String, String) {
        let mut cmd = self.command(Path::new(testkit::bootstrap()));
        cmd.args(["--dir", self.setup.config, "--context", &self.plane.context])
            .arg("--helm")
            .arg(realenv::helm(4))
            .args(args);
        let out = realenv::output_within(&mut cmd, realenv::COMMAND_LIMIT);
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `apply lab --only cilium -o json`: the events, exit 0 required.
    fn apply(&self) -> Vec<Value> {
        let (code, stdout, stderr) = self.bootstrap(&[
            "-o",
            "json",
            "apply",
            "lab",
            "--only",
            "cilium",
            "--no-needs",
        ]);
        assert_eq!(code, 0, "apply: {stderr}\n{stdout}");
        stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// The Cilium version the imported config pins (`plan -o json`).
    fn cilium_version(&self) -> String {
        let (code, stdout, stderr) = self.bootstrap(&["-o", "json", "plan", "lab"]);
        assert_eq!(code, 0, "plan: {stderr}");
        let plan: Value = serde_json::from_str(&stdout).unwrap();
        plan["releases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == "kube-system/cilium")
            .and_then(|r| r["version"].as_str())
            .unwrap_or_else(|| panic!("no kube-system/cilium in the plan: {plan}"))
            .to_string()
    }

    fn helm(&self, args: &[&str]) -> String {
        let mut cmd = self.command(&realenv::helm(4));
        cmd.args(args);
        let out = realenv::output_within(&mut cmd, realenv::COMMAND_LIMIT);
        assert!(
            out.status.success(),
            "helm {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// The CRDs of ../shared/charts/prometheus-operator-crds as helm renders
/// them, in a file.
fn prometheus_operator_crds(applier: &Applier) -> PathBuf {
    let chart = import_corpus::shared_charts()
        .expect("../shared/charts (cfg(shared_charts))")
        .join("prometheus-operator-crds");
    let rendered = applier.helm(&[
        "template",
        "prometheus-operator-crds",
        chart.to_str().unwrap(),
    ]);
    let file = applier
        .imported
        .tmp
        .path()
        .join("prometheus-operator-crds.yaml");
    std::fs::write(&file, rendered).unwrap();
    file
}

fn phase_ms(phases: &Value, phase: &str) -> u64 {
    phases[phase].as_u64().unwrap_or(0)
}

/// Imports `setup` (with its comparison and `plan` and `check`); Cilium
/// must be served with its real chart.
fn import(setup: &Setup) -> (Imported, Duration) {
    let started = Instant::now();
    let imported = import_corpus::compare(setup);
    let took = started.elapsed();
    assert!(
        imported.real.iter().any(|id| id == "kube-system/cilium"),
        "Cilium was not served with its real chart:\n{}",
        imported.report.join("\n")
    );
    (imported, took)
}

/// Imports `setup`, then applies its Cilium on a fresh control plane;
/// prints each step's wall time.
fn import_and_apply(setup: &Setup) {
    let (imported, took) = import(setup);
    let _slot = realenv::one_at_a_time();
    let mut times = vec![("import, plan, check, compare", took)];
    let applied = apply_on_a_fresh_plane(&imported, setup, None, &mut times);
    let edits = if setup.secrets.is_empty() {
        "zero edits".to_string()
    } else {
        format!(
            "one edit: the `secrets:` entries {:?} dropped (encrypted to a key only the repository's owner holds; not of Cilium)",
            setup.secrets
        )
    };
    let mut report = vec![format!(
        "{}: Cilium {} applied with {edits}; cilium-operator's CRDs registered {:.1}s after the apply started; hooks passed:",
        setup.repo,
        applied.version,
        applied.registered.as_secs_f64()
    )];
    report.extend(applied.hooks.iter().map(|h| format!("    {h}")));
    for (step, took) in times {
        report.push(format!("  {step}: {:.1}s", took.as_secs_f64()));
    }
    use std::io::Write;
    let _ = std::io::stderr().write_all(format!("{}\n", report.join("\n")).as_bytes());
}

/// The apply, `status` and the second apply of an imported setup on a
/// fresh control plane, its API server `rtt` away (loopback: `None`); each
/// step's wall time into `times`.
fn apply_on_a_fresh_plane(
    imported: &Imported,
    setup: &Setup,
    rtt: Option<Duration>,
    times: &mut Vec<(&'static str, Duration)>,
) -> Applied {
    let started = Instant::now();
    let plane = ControlPlane::start();
    times.push(("control plane", started.elapsed()));
    let home = imported.tmp.path().join(match rtt {
        None => "apply-home".to_string(),
        Some(rtt) => format!("apply-home-{}ms", rtt.as_millis()),
    });
    std::fs::create_dir_all(&home).unwrap();
    let distance = rtt.map(|rtt| realenv::Distance::start(&plane.server, rtt));
    let kubeconfig = match &distance {
        None => plane.kubeconfig.clone(),
        Some(distance) => {
            let path = home.join("kubeconfig");
            plane.write_kubeconfig_through(&path, &plane.context, distance);
            path
        }
    };
    let applier = Applier {
        imported,
        setup,
        plane: &plane,
        kubeconfig,
        home,
    };

    // The setups' CRD stage renders kube-prometheus-stack's CRDs (Cilium's
    // values turn on its ServiceMonitors); that chart is not here at its
    // pin, so the same CRDs come from prometheus-operator-crds.
    let started = Instant::now();
    let crds = prometheus_operator_crds(&applier);
    plane.api().install_crds(&crds);
    times.push(("CRD stage stand-in", started.elapsed()));

    let started = Instant::now();
    let version = applier.cilium_version();
    let operator = OperatorStandIn::start(&plane, &version, &applier.home);
    let events = applier.apply();
    times.push(("apply --only cilium", started.elapsed()));
    // bootstrap's own account of it: its phases, and hooks within releases.
    let phases = &events.last().expect("events")["summary"]["phases"];
    for (step, phase) in [
        ("  of which preflight", "preflight"),
        ("  of which CRD phase", "crds"),
        ("  of which releases", "releases"),
    ] {
        times.push((step, Duration::from_millis(phase_ms(phases, phase))));
    }
    let hook_ms: u64 = events
        .iter()
        .filter(|e| e["event"] == "hook_finished")
        .filter_map(|e| e["duration"].as_u64())
        .sum();
    times.push(("    of which hooks", Duration::from_millis(hook_ms)));
    let registered = operator.registered();
    assert!(
        registered.is_some(),
        "the cilium-operator Deployment never appeared"
    );
    assert_eq!(
        outcomes(&events)
            .get("kube-system/cilium")
            .map(String::as_str),
        Some("installed"),
        "{events:#?}"
    );
    let hooks: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "hook_finished")
        .collect();
    for hook in &hooks {
        assert_eq!(hook["ok"], true, "{hook}");
    }
    // The setups' own hooks that apply Cilium objects (an IP pool among
    // them) reached the API server.
    let commands = hooks
        .iter()
        .filter(|h| h["hook"].as_str().is_some_and(|h| h.starts_with("command")))
        .count();
    if commands > 0 {
        let pools = plane
            .api()
            .list("/apis/cilium.io/v2/ciliumloadbalancerippools");
        assert!(!pools.is_empty(), "no CiliumLoadBalancerIPPool was applied");
    }

    // helm's own record: the chart at the setup's pin, deployed.
    let list: Value = serde_json::from_str(&applier.helm(&[
        "list",
        "--namespace",
        "kube-system",
        "--output",
        "json",
    ]))
    .unwrap();
    let cilium = list
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "cilium")
        .unwrap_or_else(|| panic!("helm lists no cilium: {list}"));
    assert_eq!(cilium["chart"], format!("cilium-{version}"), "{cilium}");
    assert_eq!(cilium["status"], "deployed", "{cilium}");
    let daemonset = plane
        .api()
        .get("/apis/apps/v1/namespaces/kube-system/daemonsets/cilium")
        .expect("daemonset/cilium");
    assert!(
        daemonset["status"]["numberReady"].as_i64().unwrap_or(0) > 0
            && daemonset["status"]["numberReady"] == daemonset["status"]["desiredNumberScheduled"],
        "{}",
        daemonset["status"]
    );

    // The day after: status, and a second apply that changes nothing.
    let started = Instant::now();
    let (code, stdout, stderr) =
        applier.bootstrap(&["status", "lab", "--only", "cilium", "--no-needs"]);
    assert_eq!(code, 0, "status: {stderr}\n{stdout}");
    let events = applier.apply();
    times.push(("status, second apply", started.elapsed()));
    assert_eq!(
        outcomes(&events)
            .get("kube-system/cilium")
            .map(String::as_str),
        Some("unchanged"),
        "{events:#?}"
    );

    Applied {
        hooks: hooks
            .iter()
            .map(|h| h["hook"].as_str().unwrap_or("?").to_string())
            .collect(),
        registered: registered.unwrap(),
        version,
    }
}

/// What an apply on a fresh plane did.
struct Applied {
    /// The hooks that passed.
    hooks: Vec<String>,
    /// When the operator's stand-in registered Cilium's CRDs.
    registered: Duration,
    /// The Cilium version installed.
    version: String,
}

macro_rules! applied {
    ($test:ident, $setup:path) => {
        #[test]
        #[cfg_attr(
            not(all(
                helmfile,
                shared_corpus,
                oci_registry,
                realenv,
                realenv_cilium,
                kubectl,
                shared_charts
            )),
            ignore = "needs helmfile, the chart registry, the real test environment, Cilium's module, kubectl, ../shared/corpus and ../shared/charts: run `tools/realenv/build helmfile oci-registry kube kwok helm3 helm4 flux-crds cilium cilium-1.17` and install kubectl"
        )]
        fn $test() {
            import_and_apply(&$setup);
        }
    };
}

applied!(bjw_s_labs_home_ops, import_corpus::BJW_S_LABS_HOME_OPS);
applied!(buroa_k8s_gitops, import_corpus::BUROA_K8S_GITOPS);
applied!(onedr0p_home_ops, import_corpus::ONEDR0P_HOME_OPS);
applied!(
    onedr0p_cluster_template,
    import_corpus::ONEDR0P_CLUSTER_TEMPLATE
);
applied!(jfroy_flatops, import_corpus::JFROY_FLATOPS);

/// One setup applied twice, each on a fresh control plane: with its API
/// server on the loopback, then 50 ms away (a round trip through
/// [`realenv::Distance`], for bootstrap, helm and the setup's kubectl
/// alike), as from a laptop to a cluster in another region. Prints both
/// runs' steps and their ratio (docs/design.md#the-corpus-setups-applied).
#[test]
#[cfg_attr(
    not(all(
        helmfile,
        shared_corpus,
        oci_registry,
        realenv,
        realenv_cilium,
        kubectl,
        shared_charts
    )),
    ignore = "needs helmfile, the chart registry, the real test environment, Cilium's module, kubectl, ../shared/corpus and ../shared/charts: run `tools/realenv/build helmfile oci-registry kube kwok helm3 helm4 flux-crds cilium cilium-1.17` and install kubectl"
)]
fn onedr0p_home_ops_applied_50_ms_away() {
    let setup = &import_corpus::ONEDR0P_HOME_OPS;
    let (imported, _) = import(setup);
    let _slot = realenv::one_at_a_time();
    // 50 ms in CI; `BOOTSTRAP_TEST_DISTANCES_MS=20,100` for other distances
    // (each against the same loopback run).
    let distances: Vec<u64> = std::env::var("BOOTSTRAP_TEST_DISTANCES_MS")
        .ok()
        .map(|v| v.split(',').filter_map(|d| d.trim().parse().ok()).collect())
        .filter(|d: &Vec<u64>| !d.is_empty())
        .unwrap_or_else(|| vec![50]);
    let mut near = Vec::new();
    apply_on_a_fresh_plane(&imported, setup, None, &mut near);
    let mut report = Vec::new();
    for ms in distances {
        let mut far = Vec::new();
        apply_on_a_fresh_plane(&imported, setup, Some(Duration::from_millis(ms)), &mut far);
        report.push(format!(
            "{}: loopback / {ms} ms round trip (the same steps, one run):",
            setup.repo
        ));
        for ((step, a), (_, b)) in near.iter().zip(&far) {
            report.push(format!(
                "  {step}: {:.1}s / {:.1}s ({:.1}x)",
                a.as_secs_f64(),
                b.as_secs_f64(),
                b.as_secs_f64() / a.as_secs_f64().max(0.001)
            ));
        }
    }
    use std::io::Write;
    let _ = std::io::stderr().write_all(format!("{}\n", report.join("\n")).as_bytes());
}
