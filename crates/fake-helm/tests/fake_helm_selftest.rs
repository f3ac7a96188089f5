//! Drives the fake-helm binary the way bootstrap's binary tests will, and checks
//! that it answers like helm and records what it was asked.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_fake-helm");

struct Fake {
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl Fake {
    fn new() -> Fake {
        Fake {
            dir: tempfile::tempdir().unwrap(),
            env: Vec::new(),
        }
    }

    fn with_script(mut self, script: Value) -> Fake {
        let path = self.path("script.json");
        std::fs::write(&path, script.to_string()).unwrap();
        self.env
            .push(("FAKE_HELM_SCRIPT".into(), path.display().to_string()));
        self
    }

    fn with_env(mut self, k: &str, v: &str) -> Fake {
        self.env.push((k.into(), v.into()));
        self
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write(&self, name: &str, text: &str, mode: u32) -> String {
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path.display().to_string()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .env_remove("KUBECONFIG")
            .env_remove("HELM_NAMESPACE")
            .env_remove("FAKE_HELM_VERSION")
            .env("FAKE_HELM_STATE", self.path("state"))
            .env("FAKE_HELM_LOG", self.path("log.jsonl"));
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// Runs a command that must succeed and returns its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(args)).unwrap()
    }

    fn state(&self, ns: &str, name: &str) -> Option<Value> {
        let path = self.path("state").join(format!("{ns}__{name}.json"));
        let text = std::fs::read_to_string(path).ok()?;
        Some(serde_json::from_str(&text).unwrap())
    }

    fn seed(&self, release: Value) {
        let dir = self.path("state");
        std::fs::create_dir_all(&dir).unwrap();
        let file = format!(
            "{}__{}.json",
            release["namespace"].as_str().unwrap(),
            release["name"].as_str().unwrap()
        );
        std::fs::write(dir.join(file), release.to_string()).unwrap();
    }

    fn log(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.path("log.jsonl")).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn upgrade<'a>(name: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "upgrade",
        "--install",
        name,
        "cilium",
        "--repo",
        "https://helm.cilium.io",
        "--version",
        "1.18.2",
        "-n",
        "kube-system",
    ];
    args.extend_from_slice(extra);
    args
}

fn seeded(name: &str, status: &str) -> Value {
    json!({
        "name": name, "namespace": "default", "revision": 1, "status": status,
        "chart": "podinfo", "version": "6.0.0", "app_version": "6.0.0", "values": {},
        "labels": {}, "updated": "2025-10-01T12:00:00Z", "manifest": ""
    })
}

#[test]
fn version_forms_match_helm() {
    let fake = Fake::new();
    assert_eq!(
        fake.ok(&["version", "--short"]),
        "v4.2.4+g1234567\n",
        "the newest Helm 4 by default"
    );
    assert_eq!(
        fake.ok(&["version", "--template", "{{.Version}}"]),
        "v4.2.4"
    );
    assert_eq!(fake.ok(&["version", "--template={{.Version}}"]), "v4.2.4");
    assert!(
        fake.ok(&["version"])
            .starts_with("version.BuildInfo{Version:\"v4.2.4\", GitCommit:")
    );
    let v3 = Fake::new().with_env("FAKE_HELM_VERSION", "v3.19.0");
    assert_eq!(v3.ok(&["version", "--short"]), "v3.19.0+g1234567\n");
    assert_eq!(v3.ok(&["version", "-c", "--short"]), "v3.19.0+g1234567\n");
    let out = fake.run(&["version", "--client"]);
    assert_eq!(stderr(&out), "Error: unknown flag: --client\n");
    let custom = Fake::new().with_script(json!({"*": {"version_output": "garbage"}}));
    assert_eq!(custom.ok(&["version", "--short"]), "garbage\n");
}

#[test]
fn upgrade_install_counts_revisions_and_logs_argv_and_values_files() {
    let fake = Fake::new();
    let values = fake.write("values.yaml", "hubble:\n  enabled: true\n", 0o600);
    let first = fake.ok(&upgrade("cilium", &["-f", &values]));
    assert!(
        first.starts_with("Release \"cilium\" does not exist. Installing it now.\nNAME: cilium\n"),
        "{first}"
    );
    let state = fake.state("kube-system", "cilium").unwrap();
    assert_eq!(
        (state["revision"].as_u64(), state["status"].as_str()),
        (Some(1), Some("deployed"))
    );
    assert_eq!(
        (state["chart"].as_str(), state["version"].as_str()),
        (Some("cilium"), Some("1.18.2"))
    );

    let second = fake.ok(&upgrade("cilium", &["--values", &values]));
    assert!(
        second.starts_with("Release \"cilium\" has been upgraded. Happy Helming!\n"),
        "{second}"
    );
    assert_eq!(fake.state("kube-system", "cilium").unwrap()["revision"], 2);

    let log = fake.log();
    assert_eq!(log.len(), 2);
    let argv: Vec<&str> = log[0]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(argv, upgrade("cilium", &["-f", &values]));
    assert_eq!(log[0]["exit_code"], 0);
    assert_eq!(
        log[0]["values_files"],
        json!([{"path": values, "mode": "600", "content": {"hubble": {"enabled": true}}}])
    );
    assert!(log[0]["end_ms"].as_u64().unwrap() >= log[0]["start_ms"].as_u64().unwrap());
}

#[test]
fn values_files_deep_merge_in_order_then_set() {
    let fake = Fake::new();
    let a = fake.write(
        "a.yaml",
        "ipam:\n  mode: kubernetes\n  pool: [a]\nk8sServicePort: 6443\n",
        0o644,
    );
    let b = fake.write("b.yaml", "ipam:\n  pool: [b]\nroutingMode: native\n", 0o644);
    fake.ok(&upgrade(
        "cilium",
        &[
            "-f",
            &a,
            "-f",
            &b,
            "--set",
            "ipam.mode=cluster-pool,replicas=2",
            "--set-string",
            "port=80",
        ],
    ));
    let expected = json!({
        "ipam": {"mode": "cluster-pool", "pool": ["b"]},
        "k8sServicePort": 6443, "routingMode": "native", "replicas": 2, "port": "80"
    });
    assert_eq!(
        fake.state("kube-system", "cilium").unwrap()["values"],
        expected
    );
    assert_eq!(
        fake.json(&["get", "values", "cilium", "-n", "kube-system", "-o", "json"]),
        expected
    );
}

#[test]
fn helm_3_list_hides_pending_unless_asked() {
    let fake = Fake::new().with_env("FAKE_HELM_VERSION", "v3.19.0");
    fake.seed(seeded("ok", "deployed"));
    fake.seed(seeded("broken", "failed"));
    fake.seed(seeded("stuck", "pending-install"));
    let names = |args: &[&str]| -> Vec<String> {
        let rows = fake.json(args);
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&["list", "-o", "json"]), ["broken", "ok"]);
    assert_eq!(
        names(&["list", "-a", "-o", "json"]),
        ["broken", "ok", "stuck"]
    );
    assert_eq!(names(&["list", "--pending", "-o", "json"]), ["stuck"]);
    assert_eq!(names(&["list", "--filter", "^o", "-o", "json"]), ["ok"]);
    assert_eq!(
        names(&["list", "-n", "other", "-o", "json"]),
        Vec::<String>::new()
    );

    let row = &fake.json(&["list", "-A", "--deployed", "-o", "json"])[0];
    assert_eq!(row["revision"], "1", "helm prints the revision as a string");
    assert_eq!(row["chart"], "podinfo-6.0.0");
    assert_eq!(row["updated"], "2025-10-01 12:00:00 +0000 UTC");
}

#[test]
fn helm_4_lists_every_state_and_rejects_all_like_cobra() {
    let fake = Fake::new().with_env("FAKE_HELM_VERSION", "v4.2.3");
    fake.seed(seeded("ok", "deployed"));
    fake.seed(seeded("stuck", "pending-install"));
    let names = |args: &[&str]| -> Vec<String> {
        let rows = fake.json(args);
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&["list", "-o", "json"]), ["ok", "stuck"]);
    assert_eq!(names(&["list", "--pending", "-o", "json"]), ["stuck"]);
    for all in ["--all", "-a"] {
        let out = fake.run(&["list", "--all-namespaces", all, "--max", "0"]);
        let expected = if all == "-a" {
            "Error: unknown shorthand flag: 'a' in -a\n"
        } else {
            "Error: unknown flag: --all\n"
        };
        assert_eq!(
            (out.status.code(), stderr(&out)),
            (Some(1), expected.into())
        );
    }
}

#[test]
fn status_and_get_values_have_helms_json_shape() {
    let fake = Fake::new().with_script(json!({"cilium": {"app_version": "1.18.2-app"}}));
    fake.ok(&upgrade("cilium", &["--set", "a.b=c"]));
    let status = fake.json(&["status", "cilium", "-n", "kube-system", "-o", "json"]);
    assert_eq!(status["name"], "cilium");
    assert_eq!(status["namespace"], "kube-system");
    assert_eq!(status["version"], 1);
    assert_eq!(status["info"]["status"], "deployed");
    assert!(
        status["info"]["last_deployed"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    assert!(
        status.get("chart").is_none(),
        "helm status strips the chart (pkg/cmd/status.go)"
    );
    assert_eq!(status["config"], json!({"a": {"b": "c"}}));
    let history = fake.json(&[
        "history",
        "cilium",
        "-n",
        "kube-system",
        "--max",
        "1",
        "-o",
        "json",
    ]);
    assert_eq!(history[0]["chart"], "cilium-1.18.2");
    assert_eq!(history[0]["app_version"], "1.18.2-app");
    assert_eq!(history[0]["revision"], 1);

    let missing = fake.run(&["status", "nope", "-n", "kube-system", "-o", "json"]);
    assert_eq!(
        (missing.status.code(), stderr(&missing)),
        (Some(1), "Error: release: not found\n".into())
    );
    let missing = fake.run(&["get", "values", "nope", "-o", "json"]);
    assert_eq!(stderr(&missing), "Error: release: not found\n");
}

#[test]
fn template_prints_crds_only_with_include_crds() {
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "widgets.example.com"}});
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"k": "v"}});
    let fake = Fake::new().with_script(json!({"app": {"crds": [crd], "manifests": [cm]}}));
    let plain = fake.ok(&[
        "template",
        "app",
        "oci://ghcr.io/org/charts/app",
        "--version",
        "1.0.0",
    ]);
    assert!(
        plain.starts_with("---\n# Source: app/templates/"),
        "{plain}"
    );
    let docs: Vec<Value> = serde_saphyr::from_multiple(&plain).unwrap();
    assert_eq!(docs, std::slice::from_ref(&cm));

    let with_crds = fake.ok(&[
        "template",
        "app",
        "oci://ghcr.io/org/charts/app",
        "--include-crds",
    ]);
    let docs: Vec<Value> = serde_saphyr::from_multiple(&with_crds).unwrap();
    assert_eq!(docs, [crd, cm]);
    assert!(with_crds.contains("# Source: app/crds/"));
}

#[test]
fn scripted_delay_and_failure_then_success_after_fail_times() {
    let fake = Fake::new().with_script(json!({
        "*": {"delay_ms": 150},
        "kube-system/cilium": {"fail": "Error: UPGRADE FAILED: context deadline exceeded", "fail_times": 1}
    }));
    let out = fake.run(&upgrade("cilium", &[]));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "Error: UPGRADE FAILED: context deadline exceeded\n"
    );
    let state = fake.state("kube-system", "cilium").unwrap();
    assert_eq!(
        (state["status"].as_str(), state["revision"].as_u64()),
        (Some("failed"), Some(1))
    );
    assert_eq!(
        fake.json(&["list", "-n", "kube-system", "-o", "json"])[0]["status"],
        "failed"
    );

    fake.ok(&upgrade("cilium", &[]));
    let state = fake.state("kube-system", "cilium").unwrap();
    assert_eq!(
        (state["status"].as_str(), state["revision"].as_u64()),
        (Some("deployed"), Some(2))
    );

    let upgrades: Vec<Value> = fake
        .log()
        .into_iter()
        .filter(|e| e["argv"][0] == "upgrade")
        .collect();
    assert_eq!(upgrades.len(), 2);
    for entry in upgrades {
        let took = entry["end_ms"].as_u64().unwrap() - entry["start_ms"].as_u64().unwrap();
        assert!(took >= 150, "delay_ms not honoured: {took} ms");
    }
}

#[test]
fn atomic_install_failure_leaves_no_release() {
    let fake = Fake::new().with_script(json!({"cilium": {"fail": "boom"}}));
    let out = fake.run(&upgrade("cilium", &["--atomic"]));
    assert_eq!(
        (out.status.code(), stderr(&out)),
        (Some(1), "boom\n".into())
    );
    assert_eq!(fake.state("kube-system", "cilium"), None);
}

/// Starts `upgrade --install cilium` working for a minute; returns once the
/// release is pending-install.
fn working(fake: &Fake) -> std::process::Child {
    let child = fake
        .command(&upgrade("cilium", &[]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while fake
        .state("kube-system", "cilium")
        .is_none_or(|s| s["status"] != "pending-install")
    {
        assert!(
            Instant::now() < deadline,
            "release never became pending-install"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

/// helm 3 and 4 cancel the operation on SIGTERM and record the release as
/// failed (pkg/cmd/install.go's signal handler, pkg/action's failRelease).
#[test]
fn sigterm_during_the_operation_marks_the_release_failed_like_helm() {
    let fake = Fake::new().with_script(json!({"cilium": {"delay_ms": 60_000}}));
    let child = working(&fake);
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Release cilium has been cancelled.\n"
    );
    assert_eq!(stderr(&out), "Error: UPGRADE FAILED: context canceled\n");
    assert_eq!(
        fake.state("kube-system", "cilium").unwrap()["status"],
        "failed"
    );
}

/// SIGKILL leaves the release pending, and that blocks the next upgrade.
#[test]
fn sigkill_during_the_operation_leaves_pending_install_that_blocks_the_next_upgrade() {
    let fake = Fake::new().with_script(json!({"cilium": {"delay_ms": 60_000}}));
    let mut child = working(&fake);
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(9));
    assert_eq!(
        fake.state("kube-system", "cilium").unwrap()["status"],
        "pending-install"
    );

    let fast = Fake {
        dir: fake.dir,
        env: Vec::new(),
    };
    let out = fast.run(&upgrade("cilium", &[]));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress\n"
    );
    assert_eq!(
        fast.state("kube-system", "cilium").unwrap()["status"],
        "pending-install"
    );
}

#[test]
fn uninstall_removes_the_release_and_reports_missing_ones_like_helm() {
    let fake = Fake::new();
    fake.ok(&upgrade("cilium", &[]));
    assert_eq!(
        fake.ok(&["uninstall", "cilium", "-n", "kube-system"]),
        "release \"cilium\" uninstalled\n"
    );
    assert_eq!(fake.state("kube-system", "cilium"), None);
    let again = fake.run(&["uninstall", "cilium", "-n", "kube-system"]);
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(
        stderr(&again),
        "Error: uninstall: Release not loaded: cilium: release: not found\n"
    );
    assert_eq!(
        fake.ok(&[
            "uninstall",
            "cilium",
            "-n",
            "kube-system",
            "--ignore-not-found"
        ]),
        ""
    );
}

#[test]
fn install_refuses_existing_and_upgrade_needs_install_flag() {
    let fake = Fake::new();
    let plain_upgrade = ["upgrade", "podinfo", "./charts/podinfo"];
    let out = fake.run(&plain_upgrade);
    assert_eq!(
        stderr(&out),
        "Error: UPGRADE FAILED: \"podinfo\" has no deployed releases\n"
    );
    fake.ok(&["install", "podinfo", "./charts/podinfo/"]);
    let state = fake.state("default", "podinfo").unwrap();
    assert_eq!(
        (state["chart"].as_str(), state["version"].as_str()),
        (Some("podinfo"), Some("0.0.0"))
    );
    let out = fake.run(&["install", "podinfo", "./charts/podinfo"]);
    assert_eq!(
        stderr(&out),
        "Error: INSTALLATION FAILED: cannot re-use a name that is still in use\n"
    );
    fake.ok(&plain_upgrade);
}

#[test]
fn unknown_flags_fail_like_helm() {
    let fake = Fake::new();
    let out = fake.run(&["upgrade", "--install", "x", "y", "--bogus"]);
    assert_eq!(
        (out.status.code(), stderr(&out)),
        (Some(1), "Error: unknown flag: --bogus\n".into())
    );
    let out = fake.run(&["list", "-Z"]);
    assert_eq!(stderr(&out), "Error: unknown shorthand flag: 'Z' in -Z\n");
    let out = fake.run(&["frobnicate"]);
    assert!(stderr(&out).starts_with("Error: unknown command \"frobnicate\" for \"helm\""));
}

#[test]
fn concurrent_invocations_write_whole_log_lines() {
    let fake = Fake::new();
    let children: Vec<_> = (0..8)
        .map(|i| {
            fake.command(&upgrade(&format!("r{i}"), &[]))
                .stdout(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let log = fake.log();
    assert_eq!(log.len(), 8);
    let rows = fake.json(&["list", "-A", "-o", "json"]);
    assert_eq!(rows.as_array().unwrap().len(), 8);
}

#[test]
fn missing_values_file_fails_like_helm_and_is_still_logged() {
    let fake = Fake::new();
    let out = fake.run(&upgrade("cilium", &["-f", "/nonexistent/values.yaml"]));
    assert_eq!(
        stderr(&out),
        "Error: open /nonexistent/values.yaml: no such file or directory\n"
    );
    assert_eq!(
        fake.log()[0]["values_files"][0]["path"],
        "/nonexistent/values.yaml"
    );
    assert!(!Path::new(&fake.path("state").join("kube-system__cilium.json")).exists());
}
