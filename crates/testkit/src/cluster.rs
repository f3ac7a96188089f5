//! A loopback cluster for binary tests: the API server, a kubeconfig that
//! points at it, and the fake helm with its state, log and script.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use kube_loopback::ApiServer;

use crate::builder::{Output, Test};

pub struct Cluster {
    pub api: ApiServer,
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
}

/// One fake-helm invocation, as logged.
#[derive(Debug, Clone)]
pub struct HelmCall {
    pub argv: Vec<String>,
    pub start_ms: u64,
    pub end_ms: u64,
    pub exit_code: i32,
    pub values_files: Vec<Value>,
}

impl HelmCall {
    /// The command words and the positional arguments (`uninstall coredns`,
    /// `upgrade cilium /path/cilium-1.18.2.tgz`): bootstrap passes the
    /// positionals after `--`.
    pub fn command(&self) -> String {
        self.argv
            .iter()
            .take_while(|a| !a.starts_with('-'))
            .chain(self.positionals())
            .cloned()
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The arguments after `--`.
    pub fn positionals(&self) -> &[String] {
        match self.argv.iter().position(|a| a == "--") {
            Some(at) => &self.argv[at + 1..],
            None => &[],
        }
    }

    /// The release name of `upgrade --install NAME ...`.
    pub fn release(&self) -> Option<&str> {
        if self.argv.first().map(String::as_str) != Some("upgrade") {
            return None;
        }
        self.positionals().first().map(String::as_str)
    }

    pub fn flag(&self, name: &str) -> Option<&str> {
        let pos = self.argv.iter().position(|a| a == name)?;
        self.argv.get(pos + 1).map(String::as_str)
    }

    pub fn has(&self, name: &str) -> bool {
        self.argv.iter().any(|a| a == name)
    }
}

impl Cluster {
    pub fn start() -> Cluster {
        Self::with(ApiServer::start())
    }

    pub fn with(api: ApiServer) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = api.write_kubeconfig(dir.path(), "admin@infra");
        std::fs::create_dir_all(dir.path().join("helm-state")).unwrap();
        std::fs::write(dir.path().join("script.json"), "{}").unwrap();
        std::fs::create_dir_all(dir.path().join("kubecache")).unwrap();
        Cluster {
            api,
            dir,
            kubeconfig,
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Knobs for the fake helm (FAKE_HELM_SCRIPT).
    pub fn script(&self, script: Value) {
        std::fs::write(
            self.dir.path().join("script.json"),
            serde_json::to_string_pretty(&script).unwrap(),
        )
        .unwrap();
    }

    /// The fake helm of [`RELEASES`] as most apply tests want it: every
    /// release takes `delay_ms`; cilium applies its DaemonSet; cert-manager
    /// carries a CRD and a Deployment.
    pub fn script_standard(&self, delay_ms: u64) {
        self.script(serde_json::json!({
            "*": {"delay_ms": delay_ms},
            "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
            "cert-manager/cert-manager": {"crds": [crd("cert-manager.io", "certificates", "Certificate")], "manifests": [deployment("cert-manager", "cert-manager")]},
        }));
    }

    /// `bootstrap ARGS` in the config root of `test`, against this cluster.
    pub fn command(&self, test: &Test, args: &[&str]) -> Command {
        behind_fake_helm(test, args, &self.kubeconfig, self.dir.path())
    }

    pub fn run(&self, test: &Test, args: &[&str]) -> Output {
        output(self.command(test, args))
    }

    /// `bootstrap ARGS` started with its stdout and stderr piped, for a test
    /// that acts on the cluster while it runs.
    pub fn spawn(&self, test: &Test, args: &[&str]) -> std::process::Child {
        self.command(test, args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start bootstrap")
    }

    /// Deletes the cluster lock's Lease (another run's doing, in a test);
    /// panics when there is none.
    pub fn delete_lease(&self) {
        self.api
            .delete(
                "coordination.k8s.io/v1",
                "Lease",
                Some("kube-system"),
                "bootstrap-lock",
            )
            .expect("the cluster lock is held");
    }

    pub fn helm_calls(&self) -> Vec<HelmCall> {
        helm_calls_in(self.dir.path())
    }

    /// Completed `upgrade --install` calls, in start order.
    pub fn installs(&self) -> Vec<HelmCall> {
        let mut calls: Vec<HelmCall> = self
            .helm_calls()
            .into_iter()
            .filter(|c| c.argv.first().map(String::as_str) == Some("upgrade"))
            .collect();
        calls.sort_by_key(|c| c.start_ms);
        calls
    }

    pub fn release_state(&self, namespace: &str, name: &str) -> Option<Value> {
        let text = std::fs::read_to_string(
            self.dir
                .path()
                .join("helm-state")
                .join(format!("{namespace}__{name}.json")),
        )
        .ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Every ledger entry, merged over the ledger's shards (ConfigMaps
    /// `bootstrap-ownership`, `bootstrap-ownership-1`, … in kube-system).
    pub fn ledger(&self) -> serde_json::Map<String, Value> {
        let mut entries = serde_json::Map::new();
        for shard in self.ledger_shards() {
            if let Some(data) = shard.get("data").and_then(Value::as_object) {
                for (key, value) in data {
                    entries.entry(key.clone()).or_insert_with(|| value.clone());
                }
            }
        }
        entries
    }

    /// The ledger's shards, first shard first.
    pub fn ledger_shards(&self) -> Vec<Value> {
        let mut shards: Vec<(usize, Value)> = self
            .api
            .list("v1", "ConfigMap")
            .into_iter()
            .filter(|cm| cm["metadata"]["namespace"] == "kube-system")
            .filter_map(|cm| {
                let name = cm["metadata"]["name"].as_str()?;
                let index = match name.strip_prefix("bootstrap-ownership")? {
                    "" => 0,
                    suffix => suffix.strip_prefix('-')?.parse().ok()?,
                };
                Some((index, cm))
            })
            .collect();
        shards.sort_by_key(|(index, _)| *index);
        shards.into_iter().map(|(_, cm)| cm).collect()
    }
}

/// `bootstrap ARGS` in `test`'s config root with the fake helm and
/// `kubeconfig`, the fake helm's state, log, script and kube cache in `dir`.
/// The fake helm's calls logged in `dir` (its `FAKE_HELM_LOG`), in order.
pub(crate) fn helm_calls_in(dir: &Path) -> Vec<HelmCall> {
    let text = std::fs::read_to_string(dir.join("helm.log")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| HelmCall {
            argv: v["argv"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string())
                .collect(),
            start_ms: v["start_ms"].as_u64().unwrap(),
            end_ms: v["end_ms"].as_u64().unwrap(),
            exit_code: v["exit_code"].as_i64().unwrap() as i32,
            values_files: v["values_files"].as_array().cloned().unwrap_or_default(),
        })
        .collect()
}

pub(crate) fn behind_fake_helm(
    test: &Test,
    args: &[&str],
    kubeconfig: &Path,
    dir: &Path,
) -> Command {
    let mut cmd = test.command();
    cmd.args(args)
        .arg("--helm")
        .arg(crate::fake_helm())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("FAKE_HELM_STATE", dir.join("helm-state"))
        .env("FAKE_HELM_LOG", dir.join("helm.log"))
        .env("FAKE_HELM_SCRIPT", dir.join("script.json"))
        .env("KUBECACHEDIR", dir.join("kubecache"));
    cmd
}

/// Runs `cmd` to the end and keeps what it printed.
pub(crate) fn output(mut cmd: Command) -> Output {
    let out = cmd.output().expect("run bootstrap");
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A Lease `kube-system/bootstrap-lock` held by `holder` for an apply,
/// renewed at `renewed` (RFC 3339): in the future it is held, in the past
/// it has expired.
pub fn lease(holder: &str, renewed: &str) -> Value {
    serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "bootstrap-lock", "namespace": "kube-system",
                     "annotations": {"bootstrap/operation": "apply"}},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 30,
                 "acquireTime": renewed, "renewTime": renewed}
    })
}

/// A Lease another run holds and renews: renewed now, by the clock the
/// run under test reads too, so it is refused at once.
pub fn live_lease(holder: &str) -> Value {
    lease(holder, &rfc3339(std::time::SystemTime::now()))
}

/// The Lease of a run that died: renewed long ago and declared 1 s long, so
/// a run watches it unchanged for 1 s (docs/design.md#cluster-lock) and
/// takes it over.
pub fn dead_lease(holder: &str) -> Value {
    let mut lease = lease(holder, "2020-01-01T00:00:00.000000Z");
    lease["spec"]["leaseDurationSeconds"] = serde_json::json!(1);
    lease
}

/// `t` as a Kubernetes MicroTime (`2026-11-29T01:02:03.000000Z`).
pub fn rfc3339(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days since 1970-01-01 to a civil date (the proleptic Gregorian
    // calendar), as `date -u` prints it.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.000000Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

pub const CLUSTER: &str = "name: infra\ncontext: admin@infra\n";

/// cilium -> coredns -> {cert-manager, spegel}; cert-manager carries CRDs.
pub const RELEASES: &str = "name: cilium
namespace: kube-system
chart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }
values: { k8sServiceHost: 10.0.0.1 }
hooks:
  postsync:
    - rollout: { kind: DaemonSet, name: cilium }
---
name: coredns
namespace: kube-system
chart: { repo: https://coredns.github.io/helm, name: coredns, version: 1.44.3 }
needs: [cilium]
---
name: cert-manager
namespace: cert-manager
chart: { repo: https://charts.jetstack.io, name: cert-manager, version: v1.19.0 }
needs: [coredns]
values: { crds: { enabled: false } }
crdValues: { crds: { enabled: true } }
---
name: spegel
namespace: kube-system
chart: { oci: oci://ghcr.io/spegel-org/helm-charts/spegel, version: 0.4.0 }
needs: [coredns]
";

/// A workload manifest for the fake helm to apply.
pub fn daemonset(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": name}}, "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": name, "image": "x"}]}}}
    })
}

pub fn deployment(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}}, "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": name, "image": "x"}]}}}
    })
}

pub fn crd(group: &str, plural: &str, kind: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    })
}
