//! The real test environment (docs/design.md#real-environment): a control
//! plane of real Kubernetes processes on 127.0.0.1, the real helm CLIs and a
//! chart repository over loopback HTTP, for the tests of the real tier.
//!
//! The binaries come from `tools/realenv/build`, which builds them from
//! pinned Go modules and links `tools/realenv/.bin/TOOL` to their directory:
//!
//! - `kube`: etcd (embedded, `cmd/etcd`), kube-apiserver,
//!   kube-controller-manager and kube-scheduler v1.34, and `kube-pki`, which
//!   writes the CA, the serving and client certificates and the
//!   service-account signing key;
//! - `kwok`: kwok, which keeps fake Nodes alive and turns their Pods Running
//!   and Ready (and completes Job pods and run-once hook pods), and
//!   `kwok-stages`, which prints the Stage configuration it runs;
//! - `helm3`, `helm4`: the real helm CLIs ([`helm`]);
//! - `flux-crds`: the Flux controllers' CRDs, copied from their modules
//!   ([`share`]).
//!
//! [`ControlPlane::start`] starts etcd, kube-apiserver (RBAC,
//! ValidatingAdmissionPolicy, service-account tokens signed with a generated
//! key, serving certificates of its own CA), kube-controller-manager,
//! kube-scheduler and kwok with a few Nodes, writes a kubeconfig and waits
//! until the API server is ready and the controllers work. Dropping it stops
//! every process (their whole process groups); when the test is failing, the
//! directory with each process's log is kept and its path printed.
//!
//! Tests check [`missing`] first (through a `cfg` set by the build script,
//! see the root build.rs), so a clone without the environment reports them
//! ignored with the command that builds it: [`BUILD`].

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod api;
mod charts;
mod distance;

pub use api::{Api, ApiError};
pub use charts::{ChartRepo, GATEWAY_API, infra_root, journey_root, rewrite};
pub use distance::Distance;

/// The command that builds the environment.
pub const BUILD: &str = "tools/realenv/build";

/// The tools this front end needs.
pub const TOOLS: [&str; 5] = ["kube", "kwok", "helm3", "helm4", "flux-crds"];

/// `tools/realenv/.bin/TOOL`: where the build links a tool's binaries.
pub fn tool_dir(tool: &str) -> PathBuf {
    crate::bins::workspace_root()
        .join("tools/realenv/.bin")
        .join(tool)
}

/// The tools of [`TOOLS`] not built yet (empty when the environment is
/// complete).
pub fn missing() -> Vec<&'static str> {
    TOOLS
        .iter()
        .copied()
        .filter(|t| !tool_dir(t).is_dir())
        .collect()
}

/// Holds the process's one real-tier slot: a test takes it before it starts
/// a control plane, so the tests of one binary (which cargo runs in
/// parallel) run their control planes one after the other. Each plane is
/// several processes busy for minutes; on a small machine, two or more at
/// once starved kwok's Node heartbeats and the controllers.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SLOT: std::sync::Mutex<()> = std::sync::Mutex::new(());
    // A test that failed while holding it poisons it; the slot is free.
    SLOT.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The binary `name` of `tool`; a missing one fails the test with the
/// command that builds it (never a silent pass).
pub fn bin(tool: &str, name: &str) -> PathBuf {
    let path = tool_dir(tool).join(name);
    assert!(
        path.is_file(),
        "{} is missing: build the real test environment with `{BUILD}` (or `{BUILD} {tool}`)",
        path.display()
    );
    path
}

/// The real helm CLI of a major version (3 or 4).
pub fn helm(major: u8) -> PathBuf {
    bin(&format!("helm{major}"), "helm")
}

/// A file a tool's `share` list copied from its Go modules, e.g.
/// `share("flux-crds", "github.com/fluxcd/helm-controller/config/crd/bases")`.
pub fn share(tool: &str, path: &str) -> PathBuf {
    let full = tool_dir(tool).join("../share").join(path);
    assert!(
        full.exists(),
        "{} is missing: build the real test environment with `{BUILD} {tool}`",
        full.display()
    );
    full
}

/// One process of the environment, in its own process group.
struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn spawn(name: &str, program: &Path, args: &[String], logs: &Path) -> Proc {
        use std::os::unix::process::CommandExt;
        let log = logs.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).expect("create the log file");
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
        Proc {
            name: name.to_string(),
            child,
            log,
        }
    }

    /// Panics with the end of the log when the process has exited.
    fn check_alive(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "{} exited ({status}); the end of its log {}:\n{}",
                self.name,
                self.log.display(),
                tail(&self.log, 40)
            );
        }
    }

    /// SIGTERM to the group, SIGKILL after `grace`.
    fn stop(&mut self, grace: Duration) {
        let pgid = self.child.id() as libc::pid_t;
        // SAFETY: plain syscalls on a process group this struct started.
        unsafe { libc::kill(-pgid, libc::SIGTERM) };
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                // The group may still hold children; they get the KILL too.
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: as above.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// How long a command of the real tier (bootstrap, helm) may run before
/// the test gives up on it: longer than any of bootstrap's own waits in
/// these tests, so a hang fails the test instead of stalling it.
pub const COMMAND_LIMIT: Duration = Duration::from_secs(600);

/// Runs `cmd` to completion with its output captured, killing it and
/// failing the test when it runs longer than `limit`.
pub fn output_within(cmd: &mut Command, limit: Duration) -> std::process::Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
    finish_within(child, limit, &format!("{cmd:?}"))
}

/// Waits for a child started with piped stdout and stderr, killing it and
/// failing the test when it runs longer than `limit`.
pub fn finish_within(mut child: Child, limit: Duration, what: &str) -> std::process::Output {
    let pipe = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = pipe(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let stderr = pipe(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for a child") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            let err = stderr.join().unwrap_or_default();
            let out = stdout.join().unwrap_or_default();
            panic!(
                "{what} ran longer than {limit:?} and was killed; its stderr:\n{}\nits stdout:\n{}",
                String::from_utf8_lossy(&err),
                String::from_utf8_lossy(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

/// The last `lines` lines of a log file.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A free TCP port on 127.0.0.1 (bound and released: the process given it
/// binds it a moment later).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}

/// Options of [`ControlPlane::start_with`].
#[derive(Debug, Clone)]
pub struct Options {
    /// The kubeconfig context (and cluster and user) name.
    pub context: String,
    /// How many kwok Nodes.
    pub nodes: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            context: "admin@infra".into(),
            nodes: 3,
        }
    }
}

/// A running control plane; see the module docs.
pub struct ControlPlane {
    dir: Option<tempfile::TempDir>,
    procs: Vec<Proc>,
    /// The kubeconfig (one context, [`Options::context`], the current one).
    pub kubeconfig: PathBuf,
    /// Its context.
    pub context: String,
    /// `https://127.0.0.1:PORT`.
    pub server: String,
    api: Api,
}

impl ControlPlane {
    /// A control plane with context `admin@infra` and 3 Nodes.
    pub fn start() -> ControlPlane {
        Self::start_with(Options::default())
    }

    pub fn start_with(options: Options) -> ControlPlane {
        let mut plane = Self::start_api_server(&options.context);
        plane.start_controllers(&options);
        plane
    }

    /// etcd and kube-apiserver alone, ready: no controllers, scheduler,
    /// kwok or Nodes (an API server that only answers, for dry-runs).
    pub fn start_api_server(context: &str) -> ControlPlane {
        let missing = missing();
        assert!(
            missing.is_empty(),
            "the real test environment lacks {missing:?}: build it with `{BUILD}`"
        );
        let dir = tempfile::Builder::new()
            .prefix("realenv-")
            .tempdir()
            .expect("tempdir");
        let root = dir.path().to_path_buf();
        let logs = root.join("logs");
        std::fs::create_dir_all(&logs).expect("logs dir");
        let pki = root.join("pki");
        let out = Command::new(bin("kube", "kube-pki"))
            .arg(&pki)
            .output()
            .expect("running kube-pki");
        assert!(
            out.status.success(),
            "kube-pki: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let file = |name: &str| pki.join(name).to_string_lossy().into_owned();

        let mut plane = ControlPlane {
            dir: Some(dir),
            procs: Vec::new(),
            kubeconfig: root.join("kubeconfig"),
            context: context.to_string(),
            server: String::new(),
            api: Api::placeholder(),
        };

        // etcd
        let etcd_port = free_port();
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        plane.spawn(
            "etcd",
            &bin("kube", "etcd"),
            &[
                format!("--data-dir={}", root.join("etcd").display()),
                format!("--listen-client-urls={etcd_url}"),
                format!("--listen-peer-urls=http://127.0.0.1:{}", free_port()),
            ],
            &logs,
        );

        // kube-apiserver
        let port = free_port();
        plane.server = format!("https://127.0.0.1:{port}");
        plane.spawn(
            "kube-apiserver",
            &bin("kube", "kube-apiserver"),
            &[
                format!("--etcd-servers={etcd_url}"),
                "--bind-address=127.0.0.1".into(),
                "--advertise-address=127.0.0.1".into(),
                format!("--secure-port={port}"),
                format!("--cert-dir={}", root.join("apiserver-certs").display()),
                format!("--tls-cert-file={}", file("apiserver.crt")),
                format!("--tls-private-key-file={}", file("apiserver.key")),
                format!("--client-ca-file={}", file("ca.crt")),
                // The front proxy CA the controllers' authentication reads
                // (none is used; set so they find one).
                format!("--requestheader-client-ca-file={}", file("ca.crt")),
                // The kubernetes Service's endpoint would be 127.0.0.1,
                // which Endpoints reject (loopback).
                "--endpoint-reconciler-type=none".into(),
                "--authorization-mode=RBAC".into(),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                format!("--service-account-key-file={}", file("sa.pub")),
                format!("--service-account-signing-key-file={}", file("sa.key")),
                // kube-pki's serving certificate names 10.96.0.1.
                "--service-cluster-ip-range=10.96.0.0/16".into(),
                // Charts run privileged agents (cilium, spegel).
                "--allow-privileged=true".into(),
                "--profiling=false".into(),
            ],
            &logs,
        );
        plane.write_kubeconfig(&plane.kubeconfig.clone(), context);
        plane.api = Api::new(&plane.kubeconfig, context);
        plane.wait("the API server's /readyz", Duration::from_secs(120), |p| {
            p.api.raw_get("/readyz").ok().filter(|body| body == "ok")
        });
        plane
    }

    /// The controllers, scheduler and kwok, as admin, and the Nodes.
    fn start_controllers(&mut self, options: &Options) {
        let plane = self;
        let root = plane.root().to_path_buf();
        let logs = root.join("logs");
        let pki = root.join("pki");
        let file = |name: &str| pki.join(name).to_string_lossy().into_owned();
        let kubeconfig = plane.kubeconfig.to_string_lossy().into_owned();
        plane.spawn(
            "kube-controller-manager",
            &bin("kube", "kube-controller-manager"),
            &[
                format!("--kubeconfig={kubeconfig}"),
                format!("--authentication-kubeconfig={kubeconfig}"),
                format!("--authorization-kubeconfig={kubeconfig}"),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", free_port()),
                "--leader-elect=false".into(),
                "--use-service-account-credentials=true".into(),
                format!("--service-account-private-key-file={}", file("sa.key")),
                format!("--root-ca-file={}", file("ca.crt")),
                format!("--cluster-signing-cert-file={}", file("ca.crt")),
                format!("--cluster-signing-key-file={}", file("ca.key")),
                "--controllers=*".into(),
            ],
            &logs,
        );
        plane.spawn(
            "kube-scheduler",
            &bin("kube", "kube-scheduler"),
            &[
                format!("--kubeconfig={kubeconfig}"),
                format!("--authentication-kubeconfig={kubeconfig}"),
                format!("--authorization-kubeconfig={kubeconfig}"),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", free_port()),
                "--leader-elect=false".into(),
            ],
            &logs,
        );
        let stages = root.join("kwok-stages.yaml");
        let out = Command::new(bin("kwok", "kwok-stages"))
            .output()
            .expect("running kwok-stages");
        assert!(out.status.success(), "kwok-stages failed");
        std::fs::write(&stages, &out.stdout).expect("write kwok stages");
        plane.spawn(
            "kwok",
            &bin("kwok", "kwok"),
            &[
                format!("--kubeconfig={kubeconfig}"),
                format!("--config={}", stages.display()),
                "--manage-all-nodes=true".into(),
                // Keep a Lease per Node in kube-node-lease, renewed every
                // quarter of its duration, as a kubelet does (kwokctl's
                // default). Without it kwok (whose default is no Lease)
                // refreshes a Node's conditions only every 10 to 20
                // minutes (its heartbeat stage counts on the Lease), so the
                // node lifecycle controller, seeing no heartbeat for its
                // grace period (50 s), marked every Node NotReady and every
                // Pod on them not ready: rollouts went back to 0 ready.
                "--node-lease-duration-seconds=40".into(),
                "--cidr=10.244.0.0/16".into(),
                "--node-ip=10.25.0.1".into(),
            ],
            &logs,
        );
        for i in 0..options.nodes {
            plane
                .api
                .create("/api/v1/nodes", &node(&format!("node-{i}")))
                .unwrap_or_else(|e| panic!("creating Node node-{i}: {e}"));
        }
        plane.wait(
            "kwok's Nodes Ready, the default ServiceAccount",
            Duration::from_secs(120),
            |p| {
                let nodes = p.api.list("/api/v1/nodes");
                let ready = nodes.iter().filter(|n| condition(n, "Ready")).count();
                let sa = p
                    .api
                    .get("/api/v1/namespaces/default/serviceaccounts/default");
                (ready == options.nodes && sa.is_some()).then_some(())
            },
        );
    }

    fn spawn(&mut self, name: &str, program: &Path, args: &[String], logs: &Path) {
        self.procs.push(Proc::spawn(name, program, args, logs));
    }

    /// Polls `probe` every 200 ms until it answers, failing after `timeout`
    /// (or at once when a process of the environment died).
    pub fn wait<T>(
        &mut self,
        what: &str,
        timeout: Duration,
        mut probe: impl FnMut(&Self) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(value) = probe(self) {
                return value;
            }
            for proc in &mut self.procs {
                proc.check_alive();
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {timeout:?} waiting for {what} (logs: {})",
                self.logs().display()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Sends `signal` to the process group of the environment's process
    /// `name` (`kube-apiserver`, `etcd`, ...): SIGSTOP makes an API server
    /// that accepts connections and answers nothing, as a partition does;
    /// SIGCONT lets it go on.
    pub fn signal(&self, name: &str, signal: libc::c_int) {
        let proc = self
            .procs
            .iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("no process {name} in the environment"));
        let pgid = proc.child.id() as libc::pid_t;
        // SAFETY: a plain syscall on a process group this environment started.
        let rc = unsafe { libc::kill(-pgid, signal) };
        assert_eq!(rc, 0, "signal {signal} to {name}");
    }

    /// The client of this API server, as admin.
    pub fn api(&self) -> &Api {
        &self.api
    }

    /// The directory of the processes' logs.
    pub fn logs(&self) -> PathBuf {
        self.root().join("logs")
    }

    /// The environment's directory (certificates, data, logs).
    pub fn root(&self) -> &Path {
        self.dir
            .as_ref()
            .expect("the environment's directory")
            .path()
    }

    /// Writes a kubeconfig for this API server whose only context (also
    /// its cluster and user) is `context`.
    pub fn write_kubeconfig(&self, path: &Path, context: &str) {
        write_kubeconfig(path, &[(self, context)]);
    }

    /// Writes a kubeconfig like [`ControlPlane::write_kubeconfig`] whose
    /// server is this API server seen through `distance`, one round trip
    /// away.
    pub fn write_kubeconfig_through(&self, path: &Path, context: &str, distance: &Distance) {
        write_kubeconfig(path, &[(self, context)]);
        let text = std::fs::read_to_string(path).expect("read the kubeconfig");
        let text = text.replace(
            &format!("server: {}\n", self.server),
            &format!("server: {}\n", distance.server),
        );
        std::fs::write(path, text).expect("write the kubeconfig");
    }
}

/// Writes one kubeconfig for several control planes: a context (also its
/// cluster and user) per plane, named as given; the first is current.
pub fn write_kubeconfig(path: &Path, planes: &[(&ControlPlane, &str)]) {
    let (mut clusters, mut users, mut contexts) = (String::new(), String::new(), String::new());
    for (plane, context) in planes {
        let pki = plane.root().join("pki");
        clusters += &format!(
            "- name: {context}\n  cluster:\n    server: {}\n    certificate-authority: {}\n",
            plane.server,
            pki.join("ca.crt").display()
        );
        users += &format!(
            "- name: {context}\n  user:\n    client-certificate: {}\n    client-key: {}\n",
            pki.join("admin.crt").display(),
            pki.join("admin.key").display()
        );
        contexts += &format!(
            "- name: {context}\n  context:\n    cluster: {context}\n    user: {context}\n"
        );
    }
    let current = planes.first().map_or("", |(_, context)| context);
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n{clusters}users:\n{users}contexts:\n{contexts}current-context: {current}\n"
    );
    std::fs::write(path, text).expect("write the kubeconfig");
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        for proc in self.procs.iter_mut().rev() {
            proc.stop(Duration::from_secs(5));
        }
        if std::thread::panicking()
            && let Some(dir) = self.dir.take()
        {
            let kept = dir.keep();
            eprintln!(
                "realenv: the logs of the real control plane are kept in {}",
                kept.join("logs").display()
            );
        }
    }
}

/// A Node kwok manages: Linux, amd64, with the labels charts select on.
fn node(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
        "status": {
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
        },
    })
}

/// release → outcome, from the `run_finished` summary that ends a run's
/// JSON events (`apply`/`destroy -o json`).
pub fn outcomes(events: &[Value]) -> std::collections::BTreeMap<String, String> {
    let finished = events.last().expect("events");
    assert_eq!(finished["event"], "run_finished", "{finished}");
    finished["summary"]["releases"]
        .as_array()
        .expect("summary releases")
        .iter()
        .map(|r| {
            (
                r["release"].as_str().unwrap().to_string(),
                r["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Whether `object` has condition `type` with status True.
pub fn condition(object: &Value, type_: &str) -> bool {
    object["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == type_ && c["status"] == "True")
    })
}
