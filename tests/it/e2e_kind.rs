//! End to end against a real cluster: `examples/kind` on a throw-away kind
//! cluster, with the real helm pulling the real charts (network needed).
//!
//! Ignored (reported as such, never as passed) unless `BOOTSTRAP_E2E=1` was
//! set when the tests were built (build.rs turns it into `cfg(bootstrap_e2e)`):
//!
//! ```sh
//! BOOTSTRAP_E2E=1 cargo test --test it e2e_kind:: -- --nocapture
//! ```
//!
//! - `BOOTSTRAP_E2E_CLUSTER=NAME`: use an existing kind cluster (created from
//!   `examples/kind/kind-config.yaml` with `--name NAME`) instead of creating one;
//!   it is never deleted.
//! - `BOOTSTRAP_E2E_KEEP=1`: keep the cluster this test created (to look around).
//!
//! Needs on PATH: `kind`, `docker` (or `podman`), `helm` >= 3.13, `kubectl`.
//! The kubeconfig lives in a temp dir: the user's own kubeconfig is untouched.
//!
//! One test function on purpose: the steps share one cluster and must run in
//! order. Its helpers (`parse.rs`, `process.rs` next to this file) are
//! unit-tested on every `cargo test`.

mod parse;
mod process;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use testkit::builder::copy_dir;

use parse::{
    MIN_HELM, Planned, final_outcomes, helm_version, installed_releases, retarget, subcommands,
};
use process::{Env, Provider, expect_ok, which};

const BOOTSTRAP: &str = env!("CARGO_BIN_EXE_bootstrap");

const MINUTE: Duration = Duration::from_secs(60);
/// Version probes and reads (`kubectl get`, `helm list`).
const QUICK: Duration = Duration::from_secs(60);
/// Cilium (10m) and cert-manager (5m) release timeouts, image pulls on three
/// fresh nodes and chart downloads, with room to spare.
const APPLY: Duration = Duration::from_secs(30 * 60);

#[test]
#[cfg_attr(
    not(bootstrap_e2e),
    ignore = "needs kind, docker, helm and network: BOOTSTRAP_E2E=1"
)]
fn kind_end_to_end() {
    let provider = prerequisites();
    let work = tempfile::tempdir().expect("temp dir");
    let kubeconfig = work.path().join("kubeconfig");
    let env = Env {
        kubeconfig: kubeconfig.clone(),
        provider,
    };

    let reused = std::env::var("BOOTSTRAP_E2E_CLUSTER")
        .ok()
        .filter(|n| !n.is_empty());
    let name = reused.clone().unwrap_or_else(unique_name);
    // Created before `kind create` runs, so a create that fails or times out
    // half-way is still cleaned up when the guard drops (also on panic).
    let _cluster = KindCluster {
        name: name.clone(),
        delete: reused.is_none() && std::env::var("BOOTSTRAP_E2E_KEEP").as_deref() != Ok("1"),
        created: reused.is_none(),
        env: env.clone(),
    };
    if reused.is_some() {
        step(&format!("using existing kind cluster `{name}`"));
        let out = env.run("kind", &["get", "kubeconfig", "--name", &name], QUICK);
        expect_ok(&out, "kind get kubeconfig");
        std::fs::write(&kubeconfig, &out.stdout).expect("write kubeconfig");
    } else {
        step(&format!("creating kind cluster `{name}`"));
        let config = repo().join("examples/kind/kind-config.yaml");
        let out = env.run(
            "kind",
            &[
                "create",
                "cluster",
                "--name",
                &name,
                "--config",
                path(&config),
                "--kubeconfig",
                path(&kubeconfig),
            ],
            6 * MINUTE,
        );
        expect_ok(&out, "kind create cluster");
    }

    let root = work.path().join("config");
    copy_dir(&repo().join("examples/kind"), &root);
    let cluster_yaml = root.join("clusters/kind/cluster.yaml");
    let original = std::fs::read_to_string(&cluster_yaml).expect("read cluster.yaml");
    std::fs::write(&cluster_yaml, retarget(&original, &name).expect("retarget")).unwrap();
    let dir = path(&root);
    let kcfg = path(&kubeconfig);

    step("bootstrap plan kind");
    let out = env.run(
        BOOTSTRAP,
        &["plan", "kind", "--dir", dir, "--output", "json"],
        QUICK,
    );
    expect_ok(&out, "bootstrap plan");
    let plan: Value = serde_json::from_str(&out.stdout).expect("plan prints JSON");
    let planned = installed_releases(&plan);
    let ids: Vec<&str> = planned.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["kube-system/cilium", "cert-manager/cert-manager"]);

    step("bootstrap apply kind (real helm; pulls charts and images)");
    let args = [
        "apply",
        "kind",
        "--dir",
        dir,
        "--kubeconfig",
        kcfg,
        "--output",
        "json",
    ];
    let out = env.run(BOOTSTRAP, &args, APPLY);
    expect_ok(&out, "bootstrap apply");
    let outcomes = final_outcomes(&out.stdout).expect("apply ends with run_finished");
    for release in &planned {
        let outcome = outcomes.iter().find(|(id, _)| *id == release.id);
        let expected: &[&str] = if reused.is_some() {
            &["installed", "upgraded", "unchanged"]
        } else {
            &["installed"]
        };
        assert!(
            outcome.is_some_and(|(_, o)| expected.contains(&o.as_str())),
            "{}: {outcome:?}, expected one of {expected:?}",
            release.id
        );
    }

    step("cilium rolled out, nodes Ready");
    let out = env.run(
        "kubectl",
        &[
            "-n",
            "kube-system",
            "rollout",
            "status",
            "daemonset/cilium",
            "--timeout=300s",
        ],
        6 * MINUTE,
    );
    expect_ok(&out, "kubectl rollout status daemonset/cilium");
    let out = env.run(
        "kubectl",
        &[
            "wait",
            "--for=condition=Ready",
            "nodes",
            "--all",
            "--timeout=300s",
        ],
        6 * MINUTE,
    );
    expect_ok(&out, "kubectl wait nodes Ready");

    step("ownership: ledger entries and Helm release labels");
    check_ownership(&env, &planned);

    step("second apply: everything unchanged");
    let out = env.run(BOOTSTRAP, &args, APPLY);
    expect_ok(&out, "second bootstrap apply");
    let outcomes = final_outcomes(&out.stdout).expect("apply ends with run_finished");
    assert!(!outcomes.is_empty());
    for (id, outcome) in &outcomes {
        assert_eq!(outcome, "unchanged", "{id} on the second apply");
    }

    let commands = subcommands(&env.run(BOOTSTRAP, &["--help"], QUICK).stdout);
    if commands.iter().any(|c| c == "status") {
        step("bootstrap status kind");
        let out = env.run(
            BOOTSTRAP,
            &["status", "kind", "--dir", dir, "--kubeconfig", kcfg],
            QUICK,
        );
        expect_ok(&out, "bootstrap status");
        for release in &planned {
            assert!(
                out.stdout.contains(&release.name),
                "status lists {}",
                release.id
            );
        }
    } else {
        step("bootstrap status: not in this build, skipped");
    }
    if commands.iter().any(|c| c == "destroy") {
        step("bootstrap destroy kind --yes");
        let args = [
            "destroy",
            "kind",
            "--dir",
            dir,
            "--kubeconfig",
            kcfg,
            "--yes",
        ];
        let out = env.run(BOOTSTRAP, &args, 15 * MINUTE);
        expect_ok(&out, "bootstrap destroy");
        let left = helm_releases(&env);
        for release in &planned {
            assert!(
                !left.iter().any(|r| r["name"] == release.name.as_str()
                    && r["namespace"] == release.namespace.as_str()),
                "{} still installed after destroy",
                release.id
            );
        }
    } else {
        step("bootstrap destroy: not in this build, skipped");
    }
}

/// The ledger has an entry per release matching the plan, and each Helm
/// release (its storage Secret) carries bootstrap's owner label.
fn check_ownership(env: &Env, planned: &[Planned]) {
    let out = env.run(
        "kubectl",
        &[
            "-n",
            "kube-system",
            "get",
            "configmap",
            "bootstrap-ownership",
            "-o",
            "json",
        ],
        QUICK,
    );
    expect_ok(&out, "kubectl get configmap bootstrap-ownership");
    let ledger: Value = serde_json::from_str(&out.stdout).expect("ConfigMap JSON");
    let deployed = helm_releases(env);
    for release in planned {
        let key = format!("{}.{}", release.namespace, release.name);
        let entry: Value = ledger["data"][&key]
            .as_str()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_else(|| panic!("no ledger entry `{key}` in {}", ledger["data"]));
        assert_eq!(entry["release"], release.id.as_str(), "{entry}");
        assert_eq!(entry["chart"], release.chart.as_str(), "{entry}");
        assert_eq!(entry["version"], release.version.as_str(), "{entry}");
        assert_eq!(
            entry["valuesDigest"],
            release.values_digest.as_str(),
            "{entry}"
        );
        assert_eq!(entry["policy"], "bootstrap", "{entry}");

        let found = deployed
            .iter()
            .find(|r| {
                r["name"] == release.name.as_str() && r["namespace"] == release.namespace.as_str()
            })
            .unwrap_or_else(|| panic!("helm list has no {}", release.id));
        assert_eq!(found["status"], "deployed", "{found}");
        // helm list shows NAME-VERSION with the version as the chart spells it (v1.19.0).
        assert_eq!(
            found["chart"],
            format!("{}-{}", release.chart, release.version).as_str(),
            "{found}"
        );

        // Helm 3 stores `--labels` on the release's storage Secret.
        let selector = format!("owner=helm,name={},status=deployed", release.name);
        let out = env.run(
            "kubectl",
            &[
                "-n",
                &release.namespace,
                "get",
                "secret",
                "-l",
                &selector,
                "-o",
                "json",
            ],
            QUICK,
        );
        expect_ok(&out, "kubectl get secret (helm release storage)");
        let secrets: Value = serde_json::from_str(&out.stdout).expect("Secret list JSON");
        let items = secrets["items"].as_array().cloned().unwrap_or_default();
        assert!(
            !items.is_empty(),
            "no deployed helm storage Secret for {}",
            release.id
        );
        for secret in items {
            assert_eq!(
                secret["metadata"]["labels"]["bootstrap.dev/owner"], "bootstrap",
                "{} labels: {}",
                release.id, secret["metadata"]["labels"]
            );
        }
    }
}

fn helm_releases(env: &Env) -> Vec<Value> {
    let out = env.run(
        "helm",
        // Every state, spelled so that Helm 3 and Helm 4 both accept it
        // (Helm 4 has no `--all`).
        &[
            "list",
            "--all-namespaces",
            "--deployed",
            "--failed",
            "--pending",
            "--superseded",
            "--uninstalling",
            "-o",
            "json",
        ],
        QUICK,
    );
    expect_ok(&out, "helm list");
    serde_json::from_str::<Value>(&out.stdout)
        .ok()
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
}

/// Fails with an install hint per missing tool; checks helm's version and
/// that the container runtime answers.
fn prerequisites() -> Provider {
    let mut missing: Vec<&str> = ["kind", "helm", "kubectl"]
        .into_iter()
        .filter(|tool| which(tool).is_none())
        .collect();
    let podman_asked = std::env::var("KIND_EXPERIMENTAL_PROVIDER").as_deref() == Ok("podman");
    let provider = match (which("docker").is_some(), which("podman").is_some()) {
        (true, _) if !podman_asked => Some(Provider::Docker),
        (_, true) => Some(Provider::Podman),
        _ => None,
    };
    if provider.is_none() {
        missing.push("docker (or podman)");
    }
    if !missing.is_empty() {
        panic!(
            "BOOTSTRAP_E2E=1, but not on PATH: {}.\n\
             kind:    https://kind.sigs.k8s.io/docs/user/quick-start/#installation \
             (e.g. `go install sigs.k8s.io/kind@latest`)\n\
             helm:    https://helm.sh/docs/intro/install/ (3.13 or newer)\n\
             kubectl: https://kubernetes.io/docs/tasks/tools/\n\
             docker:  https://docs.docker.com/engine/install/ (or podman)",
            missing.join(", ")
        );
    }
    let provider = provider.unwrap_or(Provider::Docker);
    let probe = Env {
        kubeconfig: PathBuf::new(),
        provider,
    };
    let out = probe.run("helm", &["version", "--template", "{{.Version}}"], QUICK);
    expect_ok(&out, "helm version");
    match helm_version(&out.stdout) {
        Some(v) if v >= MIN_HELM => {}
        _ => panic!(
            "helm {} is too old or unreadable; the e2e suite needs helm {}.{} or newer",
            out.stdout.trim(),
            MIN_HELM.0,
            MIN_HELM.1
        ),
    }
    let runtime = provider.program();
    let out = probe.run(runtime, &["info"], QUICK);
    assert!(
        out.success(),
        "`{runtime} info` failed; is the {runtime} daemon running and usable by this user?\n{}",
        out.stderr
    );
    provider
}

/// Deletes the cluster it stands for when dropped, unless it was reused or
/// is to be kept.
struct KindCluster {
    name: String,
    created: bool,
    delete: bool,
    env: Env,
}

impl Drop for KindCluster {
    fn drop(&mut self) {
        if !self.created {
            return;
        }
        if !self.delete {
            println!(
                "kept kind cluster `{0}` (BOOTSTRAP_E2E_KEEP=1); kubeconfig: `kind get kubeconfig --name {0}`; \
                 delete it with `kind delete cluster --name {0}`",
                self.name
            );
            return;
        }
        let out = self.env.run(
            "kind",
            &[
                "delete",
                "cluster",
                "--name",
                &self.name,
                "--kubeconfig",
                path(&self.env.kubeconfig),
            ],
            3 * MINUTE,
        );
        if !out.success() {
            // No panic in drop (it may already be unwinding): say what to do.
            eprintln!(
                "could not delete kind cluster `{0}`; run `kind delete cluster --name {0}`\n{1}",
                self.name, out.stderr
            );
        }
    }
}

/// Short and unique enough for parallel runs on one machine; kind names must
/// be lowercase DNS labels.
fn unique_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() ^ (d.as_secs() as u32))
        .unwrap_or_default();
    format!(
        "bootstrap-e2e-{:06x}",
        (nanos ^ std::process::id()) & 0xff_ffff
    )
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn step(what: &str) {
    println!("==> {what}");
}

fn path(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}
