//! bootstrap's own chaos test: `apply` runs against the loopback API server
//! and the fake helm with one random fault each (API errors, watch drops,
//! the Lease stolen or deleted, ledger shards deleted or rewritten, helm
//! failing, slow or hung, SIGINT/SIGTERM/SIGHUP, kill -9, a second run at
//! the same time, one whose clock reads the first run's Lease as an hour
//! old, `--timeout` with the API gone), each followed by a clean
//! re-run. The seed is fixed, so every run of this test draws the same
//! scenarios (the timing of a fault against the run still varies).
//!
//! Invariants, checked after every run:
//! - exit 0 only when every release is installed, ready and recorded;
//! - no two helm operations on one release overlap (the fake helm's
//!   `overlaps.log`), and no helm outlives the run that started it;
//! - the clean re-run exits 0, and then `status` finds every release
//!   deployed, ready and up to date: the ledger equals helm's state;
//! - no secret of the config in any output, helm argv, request body sent to
//!   the API server, or file left in the temporary directory;
//! - no panic, no hang (every run ends within its bound).
//!
//! `CHAOS_RUNS` (default 30) sets the number of scenarios, `CHAOS_SEED` the
//! seed.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::builder::Test;
use testkit::cluster::{CLUSTER, Cluster, crd, daemonset, deployment, live_lease};

const SEED: u64 = 0x5eed_b007_c4a0_5001;
const SECRET: &str = "S3cr3t-chaos-hunter2";
const KEY_DATA: &str = "LS0tLS1CRUdJTi1jaGFvcy1rZXk";

fn releases() -> String {
    format!(
        "name: cilium
namespace: kube-system
chart: {{ repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }}
values: {{ k8sServiceHost: 10.0.0.1 }}
hooks:
  postsync:
    - rollout: {{ kind: DaemonSet, name: cilium }}
---
name: coredns
namespace: kube-system
chart: {{ repo: https://coredns.github.io/helm, name: coredns, version: 1.44.3 }}
needs: [cilium]
values:
  auth: {{ password: {SECRET} }}
  upstream:
    users: [ {{ name: admin, user: {{ client-key-data: {KEY_DATA} }} }} ]
---
name: cert-manager
namespace: cert-manager
chart: {{ repo: https://charts.jetstack.io, name: cert-manager, version: v1.19.0 }}
needs: [coredns]
values: {{ crds: {{ enabled: false }} }}
crdValues: {{ crds: {{ enabled: true }} }}
---
name: spegel
namespace: kube-system
chart: {{ oci: oci://ghcr.io/spegel-org/helm-charts/spegel, version: 0.4.0 }}
needs: [coredns]
"
    )
}

const RELEASES: [(&str, &str); 4] = [
    ("kube-system", "cilium"),
    ("kube-system", "coredns"),
    ("cert-manager", "cert-manager"),
    ("kube-system", "spegel"),
];

use testkit::Rng;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    ApiErrors,
    LedgerWriteErrors,
    WatchDrops,
    LeaseStolen,
    LeaseDeleted,
    ShardDeleted,
    ShardRewritten,
    HelmFails,
    HelmSlow,
    Sigint,
    Sigterm,
    Sighup,
    Kill9,
    /// helm killed outright too (it leaves its release pending-*), then
    /// bootstrap.
    Kill9WithHelm,
    Concurrent,
    /// A second run while the first one's Lease looks an hour old, as it
    /// does from a machine whose clock is an hour ahead of the holder's.
    SkewedConcurrent,
    HelmHangsPastTimeout,
    ApiGoneWithTimeout,
}

const FAULTS: [Fault; 18] = [
    Fault::ApiErrors,
    Fault::LedgerWriteErrors,
    Fault::WatchDrops,
    Fault::LeaseStolen,
    Fault::LeaseDeleted,
    Fault::ShardDeleted,
    Fault::ShardRewritten,
    Fault::HelmFails,
    Fault::HelmSlow,
    Fault::Sigint,
    Fault::Sigterm,
    Fault::Sighup,
    Fault::Kill9,
    Fault::Kill9WithHelm,
    Fault::Concurrent,
    Fault::SkewedConcurrent,
    Fault::HelmHangsPastTimeout,
    Fault::ApiGoneWithTimeout,
];

struct Finished {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
}

struct Scenario {
    number: usize,
    fault: Fault,
    cluster: Cluster,
    test: Test,
    tmp: tempfile::TempDir,
    violations: Vec<String>,
}

impl Scenario {
    fn new(number: usize, fault: Fault, rng: &mut Rng) -> Scenario {
        let cluster = Cluster::start();
        let delay = 50 + rng.below(200);
        let mut script = json!({
            "*": {"delay_ms": delay},
            "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
            "cert-manager/cert-manager": {"crds": [crd("cert-manager.io", "certificates", "Certificate")],
                                          "manifests": [deployment("cert-manager", "cert-manager")]},
        });
        let victim = RELEASES[rng.below(4) as usize];
        let victim = format!("{}/{}", victim.0, victim.1);
        let knobs = match fault {
            Fault::HelmFails => json!({"fail": "Error: UPGRADE FAILED: chaos", "fail_times": 1}),
            Fault::HelmHangsPastTimeout => json!({"delay_ms": 600_000}),
            _ => json!({}),
        };
        match fault {
            Fault::HelmSlow => script["*"]["delay_ms"] = json!(1000 + rng.below(2000)),
            Fault::Sigint
            | Fault::Sigterm
            | Fault::Sighup
            | Fault::Kill9
            | Fault::Kill9WithHelm
            | Fault::LeaseStolen
            | Fault::LeaseDeleted
            | Fault::ShardDeleted
            | Fault::ShardRewritten => script["*"]["delay_ms"] = json!(400 + rng.below(600)),
            _ => {}
        }
        // The victim's knobs over what the fixtures set for it.
        if !script[&victim].is_object() {
            script[&victim] = json!({});
        }
        for (k, v) in knobs.as_object().unwrap() {
            script[&victim][k] = v.clone();
        }
        cluster.script(script);
        let test = Test::new()
            .file("clusters/infra/cluster.yaml", CLUSTER)
            .file("releases/core.yaml", &releases());
        Scenario {
            number,
            fault,
            cluster,
            test,
            tmp: tempfile::tempdir().unwrap(),
            violations: Vec::new(),
        }
    }

    fn violation(&mut self, what: String) {
        self.violations
            .push(format!("run {} ({:?}): {what}", self.number, self.fault));
    }

    fn spawn(&self, extra: &[&str]) -> Child {
        let mut args = vec!["apply", "infra", "--output", "json"];
        args.extend_from_slice(extra);
        self.cluster
            .command(&self.test, &args)
            .env("TMPDIR", self.tmp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Waits for `child` at most `bound`; a run still going then is a hang
    /// (killed, and reported).
    fn finish(&mut self, mut child: Child, started: Instant, bound: Duration) -> Finished {
        loop {
            match child.try_wait().unwrap() {
                Some(_) => break,
                None if started.elapsed() > bound => {
                    let _ = child.kill();
                    self.violation(format!("hang: still running after {bound:?}"));
                    break;
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        let out = child.wait_with_output().unwrap();
        let finished = Finished {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            took: started.elapsed(),
        };
        self.check_output(&finished);
        finished
    }

    fn check_output(&mut self, run: &Finished) {
        for text in [&run.stdout, &run.stderr] {
            if text.contains("panicked at") || text.contains("RUST_BACKTRACE") {
                self.violation(format!("panic:\n{}", run.stderr));
            }
            if text.contains(SECRET) || text.contains(KEY_DATA) {
                self.violation("a secret in bootstrap's output".into());
            }
            if text.contains("Status {") || text.contains("ApiError:") {
                self.violation(format!("a debug dump in an error:\n{text}"));
            }
        }
    }

    /// Until the first helm operation has started.
    fn wait_for_helm(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let any = std::fs::read_dir(self.cluster.path().join("helm-state"))
                .map(|d| {
                    d.flatten()
                        .any(|e| e.file_name().to_string_lossy().ends_with(".json"))
                })
                .unwrap_or(false);
            if any {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn lease(&self) -> Option<Value> {
        self.cluster.api.get(
            "coordination.k8s.io/v1",
            "Lease",
            Some("kube-system"),
            "bootstrap-lock",
        )
    }

    /// The faulty run.
    fn run_faulty(&mut self, rng: &mut Rng) {
        let api = &self.cluster.api;
        let started = Instant::now();
        let bound = Duration::from_secs(90);
        let run = match self.fault {
            Fault::ApiErrors => {
                api.fail_next(
                    1 + rng.below(25) as usize,
                    [500, 503, 429][rng.below(3) as usize],
                );
                let child = self.spawn(&[]);
                self.finish(child, started, bound)
            }
            Fault::LedgerWriteErrors => {
                api.fail_next_matching(1 + rng.below(8) as usize, 503, "configmaps");
                let child = self.spawn(&[]);
                self.finish(child, started, bound)
            }
            Fault::WatchDrops => {
                let child = self.spawn(&[]);
                for _ in 0..3 {
                    std::thread::sleep(Duration::from_millis(100 + rng.below(300)));
                    self.cluster.api.drop_watches();
                }
                self.finish(child, started, bound)
            }
            Fault::LeaseStolen | Fault::LeaseDeleted => {
                let child = self.spawn(&[]);
                self.wait_for_helm();
                std::thread::sleep(Duration::from_millis(rng.below(400)));
                if self.fault == Fault::LeaseStolen {
                    self.cluster.api.insert(live_lease("thief@chaos pid 1"));
                } else {
                    self.cluster.api.delete(
                        "coordination.k8s.io/v1",
                        "Lease",
                        Some("kube-system"),
                        "bootstrap-lock",
                    );
                }
                let run = self.finish(child, started, bound);
                if !matches!(run.code, Some(0 | 3)) {
                    self.violation(format!(
                        "lock lost: exit {:?}, expected 3 (or 0 if it finished first)\n{}",
                        run.code, run.stderr
                    ));
                }
                run
            }
            Fault::ShardDeleted | Fault::ShardRewritten => {
                let child = self.spawn(&[]);
                // Once something is recorded.
                let deadline = Instant::now() + Duration::from_secs(20);
                while self.cluster.ledger().is_empty() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(10));
                }
                if self.fault == Fault::ShardDeleted {
                    self.cluster.api.delete(
                        "v1",
                        "ConfigMap",
                        Some("kube-system"),
                        "bootstrap-ownership",
                    );
                } else if let Some(mut shard) = self.cluster.ledger_shards().into_iter().next() {
                    shard["data"] = json!({"kube-system.cilium": "{\"release\":\"forged\"}"});
                    self.cluster.api.insert(shard);
                }
                let run = self.finish(child, started, bound);
                if run.code == Some(0) && !run.stderr.contains("ownership ledger") {
                    // Tampering after the last write is only noticed by the
                    // next run; earlier tampering must be repaired with a warning.
                    let last_write_after = self.cluster.ledger().len() == RELEASES.len();
                    if !last_write_after {
                        self.violation("ledger repaired without a warning".into());
                    }
                }
                run
            }
            Fault::HelmFails | Fault::HelmSlow => {
                let child = self.spawn(&[]);
                self.finish(child, started, bound)
            }
            Fault::Sigint
            | Fault::Sigterm
            | Fault::Sighup
            | Fault::Kill9
            | Fault::Kill9WithHelm => {
                let child = self.spawn(&[]);
                self.wait_for_helm();
                std::thread::sleep(Duration::from_millis(rng.below(800)));
                if self.fault == Fault::Kill9WithHelm {
                    for pid in fake_helms(&self.cluster) {
                        let _ = Command::new("kill")
                            .args(["-KILL", &pid.to_string()])
                            .status();
                    }
                }
                let signal = match self.fault {
                    Fault::Sigint => "INT",
                    Fault::Sigterm => "TERM",
                    Fault::Sighup => "HUP",
                    _ => "KILL",
                };
                let _ = Command::new("kill")
                    .args([&format!("-{signal}"), &child.id().to_string()])
                    .status();
                let run = self.finish(child, started, bound);
                if signal != "KILL" && !matches!(run.code, Some(0 | 130)) {
                    self.violation(format!("SIG{signal}: exit {:?}\n{}", run.code, run.stderr));
                }
                if signal != "KILL" && self.lease().is_some() {
                    self.violation(format!("SIG{signal}: the lock was not released"));
                }
                run
            }
            Fault::Concurrent => {
                let first = self.spawn(&[]);
                std::thread::sleep(Duration::from_millis(rng.below(300)));
                let second = self.spawn(&[]);
                let a = self.finish(first, started, bound);
                let b = self.finish(second, started, bound);
                for run in [&a, &b] {
                    if !matches!(run.code, Some(0 | 3)) {
                        self.violation(format!(
                            "concurrent run: exit {:?}\n{}",
                            run.code, run.stderr
                        ));
                    }
                }
                self.check_success(&b);
                a
            }
            Fault::SkewedConcurrent => {
                let first = self.spawn(&[]);
                let deadline = Instant::now() + Duration::from_secs(10);
                while self.lease().is_none() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(10));
                }
                std::thread::sleep(Duration::from_millis(rng.below(300)));
                let mut second = self.spawn(&[]);
                let hour_ago = testkit::cluster::rfc3339(
                    std::time::SystemTime::now() - Duration::from_secs(3600),
                );
                // The holder's renewals, as this machine's clock reads them.
                while second.try_wait().unwrap().is_none() && started.elapsed() < bound {
                    if let Some(mut held) = self.lease() {
                        held["spec"]["renewTime"] = json!(hour_ago);
                        self.cluster.api.insert(held);
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
                let b = self.finish(second, started, bound);
                let a = self.finish(first, started, bound);
                for run in [&a, &b] {
                    if !matches!(run.code, Some(0 | 3)) {
                        self.violation(format!(
                            "skewed concurrent run: exit {:?}\n{}",
                            run.code, run.stderr
                        ));
                    }
                }
                self.check_success(&a);
                a
            }
            Fault::HelmHangsPastTimeout => {
                let child = self.spawn(&["--timeout", "6s"]);
                let run = self.finish(child, started, bound);
                if run.code == Some(0) {
                    self.violation("a hung helm, and yet exit 0".into());
                }
                if run.took > Duration::from_secs(6 + 15) {
                    self.violation(format!("--timeout 6s, and the run took {:?}", run.took));
                }
                run
            }
            Fault::ApiGoneWithTimeout => {
                let child = self.spawn(&["--timeout", "8s"]);
                std::thread::sleep(Duration::from_millis(300 + rng.below(1500)));
                self.cluster.api.fail_next(usize::MAX / 2, 503);
                let run = self.finish(child, started, bound);
                if run.took > Duration::from_secs(8 + 10) {
                    self.violation(format!(
                        "--timeout 8s with the API gone, and the run took {:?}",
                        run.took
                    ));
                }
                run
            }
        };
        self.check_success(&run);
        self.check_after_run();
    }

    /// Exit 0 only when every release is installed, ready and recorded.
    fn check_success(&mut self, run: &Finished) {
        if run.code != Some(0) {
            return;
        }
        for (ns, name) in RELEASES {
            let state = self.cluster.release_state(ns, name);
            if state.as_ref().map(|s| s["status"].clone()) != Some(json!("deployed")) {
                self.violation(format!(
                    "exit 0, but {ns}/{name} is {:?} in helm",
                    state.map(|s| s["status"].clone())
                ));
            }
        }
        let ledger = self.cluster.ledger();
        for (ns, name) in RELEASES {
            if !ledger.contains_key(&format!("{ns}.{name}")) {
                self.violation(format!("exit 0, but {ns}/{name} is not in the ledger"));
            }
        }
        let ready = self
            .cluster
            .api
            .get("apps/v1", "DaemonSet", Some("kube-system"), "cilium")
            .is_some_and(|ds| {
                ds["status"]["numberReady"] == ds["status"]["desiredNumberScheduled"]
                    && ds["status"]["desiredNumberScheduled"].as_u64().unwrap_or(0) > 0
            });
        if !ready {
            self.violation("exit 0, but DaemonSet kube-system/cilium is not ready".into());
        }
    }

    /// No helm left running, no overlap, no secret in argv or request bodies.
    fn check_after_run(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut left = fake_helms(&self.cluster);
        while !left.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            left = fake_helms(&self.cluster);
        }
        if !left.is_empty() {
            self.violation(format!("helm outlived the run: pids {left:?}"));
        }
        let overlaps = std::fs::read_to_string(self.cluster.path().join("helm-state/overlaps.log"))
            .unwrap_or_default();
        if !overlaps.is_empty() {
            self.violation(format!("helm operations overlapped:\n{overlaps}"));
        }
        for call in self.cluster.helm_calls() {
            let argv = call.argv.join(" ");
            if argv.contains(SECRET) || argv.contains(KEY_DATA) {
                self.violation(format!("a secret in helm's argv: {}", call.command()));
            }
        }
        for request in self.cluster.api.request_log() {
            let body = String::from_utf8_lossy(&request.body);
            if body.contains(SECRET) || body.contains(KEY_DATA) {
                self.violation(format!(
                    "a secret in a request body: {} {}",
                    request.method, request.path
                ));
            }
        }
    }

    /// What a run killed by SIGKILL left: the Lease expires and, once no
    /// helm can be working (checked above: none is left), so much time
    /// passes that the release records count as abandoned.
    fn let_time_pass(&self) {
        if let Some(mut held) = self.lease() {
            held["spec"]["renewTime"] = json!("2020-01-01T00:00:00.000000Z");
            held["spec"]["acquireTime"] = json!("2020-01-01T00:00:00.000000Z");
            // Watched unchanged for its declared duration before it is
            // taken over (docs/design.md#cluster-lock): 1 s here.
            held["spec"]["leaseDurationSeconds"] = json!(1);
            self.cluster.api.insert(held);
        }
        for (ns, name) in RELEASES {
            let path = self
                .cluster
                .path()
                .join(format!("helm-state/{ns}__{name}.json"));
            if let Some(mut state) = self.cluster.release_state(ns, name)
                && state["status"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("pending-"))
            {
                state["updated"] = json!("2020-01-01T00:00:00Z");
                std::fs::write(&path, serde_json::to_string(&state).unwrap()).unwrap();
            }
        }
    }

    fn clean_rerun(&mut self) {
        self.cluster.api.clear_faults();
        self.cluster.script(json!({
            "*": {"delay_ms": 20},
            "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
            "cert-manager/cert-manager": {"crds": [crd("cert-manager.io", "certificates", "Certificate")],
                                          "manifests": [deployment("cert-manager", "cert-manager")]},
        }));
        match self.fault {
            // The thief finished and gave its lock back.
            Fault::LeaseStolen => {
                self.cluster.api.delete(
                    "coordination.k8s.io/v1",
                    "Lease",
                    Some("kube-system"),
                    "bootstrap-lock",
                );
            }
            // A run killed, or one that could not give its lock back to an
            // API server that was gone: its Lease expires.
            Fault::Kill9 | Fault::Kill9WithHelm | Fault::ApiGoneWithTimeout => self.let_time_pass(),
            _ => {}
        }
        let started = Instant::now();
        let child = self.spawn(&[]);
        let run = self.finish(child, started, Duration::from_secs(60));
        if run.code != Some(0) {
            self.violation(format!(
                "the clean re-run did not converge: exit {:?}\n{}",
                run.code, run.stderr
            ));
            return;
        }
        self.check_success(&run);
        self.check_after_run();
        let values_left: Vec<PathBuf> = std::fs::read_dir(self.tmp.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        if !values_left.is_empty() {
            self.violation(format!("files left in TMPDIR: {values_left:?}"));
        }
        let status = self
            .cluster
            .command(&self.test, &["status", "infra", "--output", "json"])
            .env("TMPDIR", self.tmp.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&status.stdout);
        let Ok(report) = serde_json::from_str::<Value>(&text) else {
            self.violation(format!("status printed no JSON:\n{text}"));
            return;
        };
        for release in report["releases"].as_array().into_iter().flatten() {
            let id = release["release"].as_str().unwrap_or("?");
            if release["drift"] != "up to date"
                || release["owner"] != "bootstrap"
                || release["ready"]["ok"] != true
                || release["deployed"]["status"] != "deployed"
            {
                self.violation(format!(
                    "after the clean re-run, status disagrees for {id}: {release}"
                ));
            }
        }
        if text.contains(SECRET) || text.contains(KEY_DATA) {
            self.violation("a secret in status output".into());
        }
        // The ledger holds keyed digests only.
        for (key, entry) in self.cluster.ledger() {
            let entry: Value =
                serde_json::from_str(entry.as_str().unwrap_or("{}")).unwrap_or_default();
            if !entry["valuesDigest"]
                .as_str()
                .is_some_and(|d| d.starts_with("hmac-sha256:"))
            {
                self.violation(format!("ledger entry {key} is not keyed: {entry}"));
            }
        }
    }
}

/// Live (not zombie) fake helm processes of `cluster`.
fn fake_helms(cluster: &Cluster) -> Vec<u32> {
    let needle = format!(
        "FAKE_HELM_STATE={}",
        cluster.path().join("helm-state").display()
    );
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if !environ
            .split(|b| *b == 0)
            .any(|var| var == needle.as_bytes())
        {
            continue;
        }
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        // bootstrap itself carries the variable too: only fake helms count.
        let exe = std::fs::read_link(entry.path().join("exe")).unwrap_or_default();
        let fake = std::fs::canonicalize(testkit::fake_helm()).unwrap_or_default();
        if !zombie && exe == fake {
            found.push(pid);
        }
    }
    found
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn chaos() {
    let runs = env_number("CHAOS_RUNS", 30) as usize;
    let seed = env_number("CHAOS_SEED", SEED);
    let mut rng = Rng(seed | 1);
    let mut violations = Vec::new();
    let mut tally: std::collections::BTreeMap<String, usize> = Default::default();
    let started = Instant::now();
    for number in 0..runs {
        // Every kind of fault once before any repeats, then at random.
        let fault = match FAULTS.get(number) {
            Some(fault) => *fault,
            None => FAULTS[rng.below(FAULTS.len() as u64) as usize],
        };
        *tally.entry(format!("{fault:?}")).or_default() += 1;
        let mut scenario = Scenario::new(number, fault, &mut rng);
        scenario.run_faulty(&mut rng);
        scenario.clean_rerun();
        violations.extend(scenario.violations);
    }
    eprintln!(
        "chaos: {runs} runs (seed {seed:#x}) in {:?}: {tally:?}; {} violations",
        started.elapsed(),
        violations.len()
    );
    assert!(
        violations.is_empty(),
        "{} violations:\n{}",
        violations.len(),
        violations.join("\n")
    );
}
