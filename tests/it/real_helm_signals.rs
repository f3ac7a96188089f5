//! What the real helm 3 CLI does when a run is stopped or killed, and
//! that bootstrap's recovery holds with them (docs/design.md#live-refusal-rules,
//! #children-and-temporary-files): the real helm 3 binary of the test
//! environment (`tools/realenv/build helm3`) against the loopback API
//! server, with a local chart whose Deployment never becomes ready, so helm
//! `--wait`s until it is signalled.
//!
//! - SIGTERM during `upgrade --install` (a first install, then an upgrade):
//!   helm cancels the operation and records the release `failed`.
//! - SIGKILL: the release stays `pending-install`; `helm uninstall` and, for
//!   a `pending-upgrade`, `helm rollback -- NAME` recover it (the commands
//!   bootstrap runs for it).
//! - `bootstrap apply` killed with SIGKILL while the real helm installs
//!   (waiting for its pre-install hook Job): no helm outlives it, the
//!   parent-death signal makes helm record the release failed (its output
//!   goes to files, so its "has been cancelled" line cannot kill it with
//!   SIGPIPE), and the next run takes the lock over and installs it; closed
//!   with SIGHUP: exit 130, helm stopped after the grace period, the release
//!   failed, the lock released.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube_loopback::{ApiServer, Rollout};
use serde_json::{Value, json};
use testkit::builder::Test;

const CHART: &str = "apiVersion: v2\nname: slow\nversion: 0.1.0\n";
const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: slow
spec:
  replicas: 1
  selector: {matchLabels: {app: slow}}
  template:
    metadata: {labels: {app: slow}}
    spec:
      containers: [{name: c, image: busybox}]
";
/// A hook helm waits for whether or not it `--wait`s: the operation stays
/// pending until the Job completes (never, or after the rollout delay).
const HOOK: &str = "apiVersion: batch/v1
kind: Job
metadata:
  name: slow-hook
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
    helm.sh/hook-delete-policy: before-hook-creation
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox}]
";

struct Env {
    api: ApiServer,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    helm: PathBuf,
}

impl Env {
    fn new(major: u8, rollout: Rollout) -> Env {
        let api = ApiServer::builder().default_rollout(rollout).start();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = api.write_kubeconfig(dir.path(), "admin@infra");
        let chart = dir.path().join("chart");
        std::fs::create_dir_all(chart.join("templates")).unwrap();
        std::fs::write(chart.join("Chart.yaml"), CHART).unwrap();
        std::fs::write(chart.join("templates/deploy.yaml"), DEPLOYMENT).unwrap();
        std::fs::write(chart.join("templates/hook.yaml"), HOOK).unwrap();
        Env {
            api,
            dir,
            kubeconfig,
            helm: testkit::realenv::helm(major),
        }
    }

    fn chart(&self) -> PathBuf {
        self.dir.path().join("chart")
    }

    fn helm(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.helm);
        c.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HELM_CACHE_HOME", self.dir.path().join("cache"))
            .env("HELM_CONFIG_HOME", self.dir.path().join("config"))
            .env("HELM_DATA_HOME", self.dir.path().join("data"))
            .stdin(Stdio::null());
        c
    }

    /// `upgrade --install slow` waiting for its never-ready Deployment,
    /// signalled with `signal` once its release is pending.
    fn interrupted_upgrade(&self, signal: &str, extra: &[&str]) -> std::process::Output {
        let chart = self.chart();
        let mut args = vec![
            "upgrade",
            "--install",
            "--namespace",
            "default",
            "--wait",
            "--timeout",
            "120s",
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "slow", chart.to_str().unwrap()]);
        let child = self
            .helm(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        self.until_pending();
        kill(child.id(), signal);
        child.wait_with_output().unwrap()
    }

    fn until_pending(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.status().is_some_and(|s| s.starts_with("pending-")) {
            assert!(
                Instant::now() < deadline,
                "the release never became pending"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The release's status as `helm list -a` reports it.
    fn status(&self) -> Option<String> {
        let out = self
            .helm(&["list", "-a", "--namespace", "default", "--output", "json"])
            .output()
            .unwrap();
        let list: Value = serde_json::from_slice(&out.stdout).ok()?;
        list.as_array()?
            .iter()
            .find(|r| r["name"] == "slow")
            .map(|r| r["status"].as_str().unwrap_or_default().to_string())
    }

    fn ok(&self, args: &[&str]) {
        let out = self.helm(args).output().unwrap();
        assert!(
            out.status.success(),
            "helm {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn kill(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn sigterm_marks_failed(major: u8) {
    let env = Env::new(major, Rollout::Never);
    let out = env.interrupted_upgrade("TERM", &[]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("context canceled"),
        "{out:?}"
    );
    assert_eq!(env.status().as_deref(), Some("failed"), "a first install");

    // Deployed again (no wait), then an upgrade stopped the same way.
    env.ok(&[
        "upgrade",
        "--install",
        "--no-hooks",
        "--namespace",
        "default",
        "--",
        "slow",
        env.chart().to_str().unwrap(),
    ]);
    let out = env.interrupted_upgrade("TERM", &["--set", "x=1"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(env.status().as_deref(), Some("failed"), "an upgrade");
}

fn sigkill_leaves_pending_and_bootstraps_recovery_works(major: u8) {
    let env = Env::new(major, Rollout::Never);
    let chart = env.chart();
    let chart = chart.to_str().unwrap();
    env.interrupted_upgrade("KILL", &[]);
    assert_eq!(env.status().as_deref(), Some("pending-install"));
    // What bootstrap runs for an abandoned first install.
    env.ok(&[
        "uninstall",
        "--namespace",
        "default",
        "--timeout",
        "60s",
        "--",
        "slow",
    ]);
    assert_eq!(env.status(), None);

    env.ok(&[
        "upgrade",
        "--install",
        "--no-hooks",
        "--namespace",
        "default",
        "--",
        "slow",
        chart,
    ]);
    env.interrupted_upgrade("KILL", &["--set", "x=1"]);
    assert_eq!(env.status().as_deref(), Some("pending-upgrade"));
    // What bootstrap runs for an abandoned upgrade, then the upgrade.
    env.ok(&[
        "rollback",
        "--namespace",
        "default",
        "--timeout",
        "60s",
        "--",
        "slow",
    ]);
    assert_eq!(env.status().as_deref(), Some("deployed"));
    env.ok(&[
        "upgrade",
        "--install",
        "--no-hooks",
        "--namespace",
        "default",
        "--",
        "slow",
        chart,
    ]);
    assert_eq!(env.status().as_deref(), Some("deployed"));
}

/// A config root whose one release is the local slow chart.
fn config(env: &Env) -> Test {
    Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            "name: infra\ncontext: admin@infra\n",
        )
        .file(
            "releases/slow.yaml",
            &format!(
                "name: slow\nnamespace: default\nchart: {{ path: {} }}\ntimeout: 2m\n",
                env.chart().display()
            ),
        )
}

fn bootstrap(env: &Env, test: &Test, tmp: &Path) -> Command {
    let mut cmd = test.command();
    cmd.args(["apply", "infra", "--output", "json"])
        .arg("--helm")
        .arg(&env.helm)
        .arg("--kubeconfig")
        .arg(&env.kubeconfig)
        // The same file, so the helms of this environment can be told
        // apart from other tests' (see `helms`).
        .env("KUBECONFIG", &env.kubeconfig)
        .env("TMPDIR", tmp)
        .env("HELM_CACHE_HOME", env.dir.path().join("cache"))
        .env("HELM_CONFIG_HOME", env.dir.path().join("config"))
        .env("HELM_DATA_HOME", env.dir.path().join("data"));
    cmd
}

/// Live processes running `helm`'s binary against this environment's API
/// server (other tests run helm at the same time).
fn helms(env: &Env) -> Vec<u32> {
    helm_processes(&env.helm, &env.kubeconfig)
}

/// Live (not zombie) processes of the binary `helm` whose environment has
/// `KUBECONFIG=kubeconfig`: the helms of one test's cluster.
pub(crate) fn helm_processes(helm: &Path, kubeconfig: &Path) -> Vec<u32> {
    let target = std::fs::canonicalize(helm).unwrap();
    let ours = format!("KUBECONFIG={}", kubeconfig.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let exe = std::fs::read_link(e.path().join("exe")).ok()?;
            let environ = std::fs::read(e.path().join("environ")).ok()?;
            if !environ.split(|b| *b == 0).any(|v| v == ours.as_bytes()) {
                return None;
            }
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            (exe == target && !zombie).then_some(pid)
        })
        .collect()
}

fn spawn_until_pending(env: &Env, test: &Test, tmp: &Path) -> Child {
    let child = bootstrap(env, test, tmp)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    env.until_pending();
    child
}

fn killed_run_leaves_no_helm_and_the_next_run_converges(major: u8) {
    let env = Env::new(major, Rollout::After(Duration::from_secs(8)));
    let test = config(&env);
    let tmp = tempfile::tempdir().unwrap();
    let mut child = spawn_until_pending(&env, &test, tmp.path());
    kill(child.id(), "KILL");
    child.wait().unwrap();
    // The parent-death signal reaches helm: it cancels, records the release
    // failed and stops. (Its first act, printing "Release slow has been
    // cancelled." to stdout, killed it with SIGPIPE about half the time
    // while that was a pipe to the dead run: the release stayed
    // pending-install.)
    let deadline = Instant::now() + Duration::from_secs(20);
    while !helms(&env).is_empty() {
        assert!(Instant::now() < deadline, "helm outlived the killed run");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(env.status().as_deref(), Some("failed"));
    // The killed run's Lease: expired by now as far as the next run knows.
    let mut lease = env
        .api
        .get(
            "coordination.k8s.io/v1",
            "Lease",
            Some("kube-system"),
            "bootstrap-lock",
        )
        .expect("the killed run held the lock");
    lease["spec"]["renewTime"] = json!("2020-01-01T00:00:00.000000Z");
    // Watched unchanged for its declared duration before it is taken over
    // (docs/design.md#cluster-lock): 1 s here, for the test's sake.
    lease["spec"]["leaseDurationSeconds"] = json!(1);
    env.api.insert(lease);
    let out = bootstrap(&env, &test, tmp.path()).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert_eq!(env.status().as_deref(), Some("deployed"));
    // The killed run's values file was swept by this one.
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "{left:?}");
}

fn sighup_stops_the_run_and_helm(major: u8) {
    let env = Env::new(major, Rollout::Never);
    let test = config(&env);
    let tmp = tempfile::tempdir().unwrap();
    let child = spawn_until_pending(&env, &test, tmp.path());
    kill(child.id(), "HUP");
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(helms(&env).is_empty(), "helm outlived the run");
    // Stopped after the grace period by SIGTERM: failed, not pending.
    assert_eq!(env.status().as_deref(), Some("failed"));
    assert!(
        env.api
            .get(
                "coordination.k8s.io/v1",
                "Lease",
                Some("kube-system"),
                "bootstrap-lock"
            )
            .is_none(),
        "the lock was released"
    );
}

// Helm 4 does not get as far as a pending release against the loopback
// API server; these cases are left to run against the real control plane of
// the test environment (testkit::realenv).
macro_rules! helm3 {
    ($($name:ident),* $(,)?) => {
        mod helm3 {
            $(
                #[test]
                #[cfg_attr(not(realenv_helm3), ignore = "needs the real helm 3 CLI: tools/realenv/build helm3")]
                fn $name() { super::$name(3) }
            )*
        }
    };
}

helm3!(
    sigterm_marks_failed,
    sigkill_leaves_pending_and_bootstraps_recovery_works,
    killed_run_leaves_no_helm_and_the_next_run_converges,
    sighup_stops_the_run_and_helm,
);
