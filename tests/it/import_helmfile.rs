//! `bootstrap import helmfile` rendering with helmfile itself
//! (docs/coming-from-helmfile.md): the helmfile that `tools/realenv/build
//! helmfile` builds from its Go module. helmfile asks `helm version` before
//! anything else, so the fake helm stands in for helm on PATH; the fixtures
//! use local charts, which `helmfile build` does not pull.

#![cfg_attr(not(helmfile), allow(dead_code, unused_imports))]

use std::path::{Path, PathBuf};
use std::process::Command;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn helmfile() -> PathBuf {
    PathBuf::from(option_env!("BOOTSTRAP_TEST_HELMFILE_BIN").unwrap_or("helmfile"))
}

/// Runs bootstrap with the fake helm as `helm` on PATH.
fn bootstrap(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let bin = cwd.join(".bin");
    std::fs::create_dir_all(&bin).unwrap();
    let helm = bin.join("helm");
    if !helm.exists() {
        std::os::unix::fs::symlink(testkit::fake_helm(), &helm).unwrap();
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new(testkit::bootstrap());
    command
        .current_dir(cwd)
        .args(args)
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .env("HOME", cwd)
        .env_remove("CI")
        .env_remove("KUBECONFIG")
        .env_remove("BOOTSTRAP_HELMFILE");
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn import(cwd: &Path, dir: &str, renderer: &str, env: &[(&str, &str)]) -> Run {
    let helmfile = helmfile();
    let flag = match renderer {
        "helmfile" => vec!["--helmfile", helmfile.to_str().unwrap()],
        _ => vec!["--no-helmfile"],
    };
    let mut args = vec!["--dir", dir, "import", "helmfile", "hf", "--cluster", "lab"];
    args.extend(flag);
    bootstrap(cwd, &args, env)
}

/// `plan` and `template` of an imported config, in JSON: what it installs.
fn installs(cwd: &Path, dir: &str, env: &[(&str, &str)]) -> (Value, Value) {
    let plan = bootstrap(cwd, &["--dir", dir, "--output", "json", "plan", "lab"], env);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let mut plan: Value = serde_json::from_str(&plan.stdout).unwrap();
    let template = bootstrap(
        cwd,
        &[
            "--dir",
            dir,
            "--output",
            "json",
            "template",
            "lab",
            "--show-secrets",
        ],
        env,
    );
    assert_eq!(template.code, 0, "{}", template.stderr);
    let template: Value = serde_json::from_str(&template.stdout).unwrap();
    let values: Vec<(Value, Value)> = template["releases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["release"].clone(), r["values"].clone()))
        .collect();
    // Where files are named differs with the config root; what installs does not.
    for release in plan["releases"].as_array_mut().unwrap() {
        let release = release.as_object_mut().unwrap();
        release.retain(|k, _| {
            [
                "id", "chart", "version", "needs", "installs", "hooks", "wait", "timeout",
            ]
            .contains(&k.as_str())
        });
    }
    (plan["releases"].clone(), json!(values))
}

fn fixture(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

const CHART: (&str, &str) = (
    "hf/charts/app/Chart.yaml",
    "apiVersion: v2\nname: app\nversion: 0.1.0\n",
);

/// `range`, `exec`, `requiredEnv` and `.Release` in a values template: none
/// of them in the importer's own subset, all of them helmfile's.
#[test]
#[cfg_attr(
    not(helmfile),
    ignore = "needs helmfile: run `tools/realenv/build helmfile` (or set BOOTSTRAP_TEST_HELMFILE)"
)]
fn helmfile_renders_what_the_subset_cannot() {
    let dir = fixture(&[
        CHART,
        (
            "hf/helmfile.yaml.gotmpl",
            r#"releases:
{{- range $name := list "a" "b" }}
  - name: {{ $name }}
    namespace: apps
    chart: ./charts/app
    values:
      - values.yaml.gotmpl
    setString:
      - name: cluster
        value: {{ requiredEnv "CLUSTER_NAME" }}
{{- end }}
"#,
        ),
        (
            "hf/values.yaml.gotmpl",
            "name: {{ .Release.Name | upper }}\nversion: {{ exec \"sh\" (list \"-c\" \"printf 1.2.3\") }}\n",
        ),
    ]);
    let env = [("CLUSTER_NAME", "lab-1")];
    let run = import(dir.path(), "out", "helmfile", &env);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{}", run.stdout);
    assert!(
        run.stdout.starts_with(&format!(
            "rendered with helmfile v1.8.0 ({})\nhelmfile ran the repository's commands while rendering (twice: `build` and `build --embed-values`): an `exec` template call at hf/values.yaml.gotmpl:2; --no-exec renders without running them\nimported 2 releases from hf/helmfile.yaml.gotmpl into out:\n",
            helmfile().display()
        )),
        "{}",
        run.stdout
    );
    // The variable is read when bootstrap renders, as helmfile read it.
    let (plan, values) = installs(dir.path(), "out", &env);
    assert_eq!(
        plan.as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].clone())
            .collect::<Vec<_>>(),
        [json!("apps/a"), json!("apps/b")]
    );
    assert_eq!(
        values,
        json!([
            ["apps/a", {"name": "A", "version": "1.2.3", "cluster": "lab-1"}],
            ["apps/b", {"name": "B", "version": "1.2.3", "cluster": "lab-1"}],
        ])
    );

    // The subset names what it could not evaluate, and that helmfile would.
    let subset = import(dir.path(), "subset", "subset", &env);
    assert_eq!(subset.code, 1, "{}{}", subset.stdout, subset.stderr);
    assert!(
        subset.stdout.contains("`range` (control flow) is not evaluated by the importer; the result depends on values it would have to guess [helmfile-rendering converts this]"),
        "{}",
        subset.stdout
    );

    // helmfile failing (a variable unset) says so, and the subset reads it instead.
    let unset = import(dir.path(), "unset", "helmfile", &[]);
    assert_eq!(unset.code, 1, "{}{}", unset.stdout, unset.stderr);
    assert!(
        unset.stdout.contains("hf/helmfile.yaml.gotmpl: `helmfile build`: helmfile could not render it (`helmfile --file hf/helmfile.yaml.gotmpl build` exited with 1: "),
        "{}",
        unset.stdout
    );
}

/// A helmfile the subset evaluates imports to the same config both ways:
/// releases, charts, needs, hooks, waits and values.
#[test]
#[cfg_attr(
    not(helmfile),
    ignore = "needs helmfile: run `tools/realenv/build helmfile` (or set BOOTSTRAP_TEST_HELMFILE)"
)]
fn what_the_subset_evaluates_imports_the_same_through_helmfile() {
    let dir = fixture(&[
        CHART,
        (
            "hf/helmfile.yaml",
            r#"bases:
  - defaults.yaml
releases:
  - name: cni
    namespace: kube-system
    inherit:
      - template: app
    values:
      - cni.yaml
    hooks:
      - events: [postsync]
        command: kubectl
        args: [rollout, status, "daemonset/{{ .Release.Name }}", -n, "{{ .Release.Namespace }}", --timeout=5m]
  - name: dns
    namespace: kube-system
    inherit:
      - template: app
    needs: [kube-system/cni]
    values:
      - dns.yaml.gotmpl
    set:
      - name: replicas
        value: 2
"#,
        ),
        (
            "hf/defaults.yaml",
            "helmDefaults:\n  wait: true\n  timeout: 600\ntemplates:\n  app:\n    chart: ./charts/app\n",
        ),
        ("hf/cni.yaml", "ipam:\n  mode: kubernetes\n"),
        (
            "hf/dns.yaml.gotmpl",
            "{{ (fromYaml (readFile \"flux/dns.yaml\")).spec.values | toYaml }}\nname: {{ .Release.Name }}\n",
        ),
        (
            "hf/flux/dns.yaml",
            "kind: HelmRelease\nspec:\n  values:\n    servers:\n      - zones: [{zone: .}]\n",
        ),
    ]);
    let by_helmfile = import(dir.path(), "a", "helmfile", &[]);
    assert_eq!(
        (by_helmfile.code, by_helmfile.stderr.as_str()),
        (0, ""),
        "{}",
        by_helmfile.stdout
    );
    let by_subset = import(dir.path(), "b", "subset", &[]);
    assert_eq!(
        (by_subset.code, by_subset.stderr.as_str()),
        (0, ""),
        "{}",
        by_subset.stdout
    );
    let a = installs(dir.path(), "a", &[]);
    let b = installs(dir.path(), "b", &[]);
    assert_eq!(a, b);
    assert_eq!(
        a.1,
        json!([
            ["kube-system/cni", {"ipam": {"mode": "kubernetes"}}],
            ["kube-system/dns", {"servers": [{"zones": [{"zone": "."}]}], "name": "dns", "replicas": 2}],
        ])
    );
}

/// Every file under `dir`, with its text.
fn written(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push((
                    path.clone(),
                    std::fs::read_to_string(&path).unwrap_or_default(),
                ));
            }
        }
    }
    out
}

/// What helmfile renders from the environment (a token read with
/// `requiredEnv` into values, `set` and `setString`) is never written as
/// its value: each leaf becomes `{{env "X"}}` (`{{toJson (env "X")}}` for
/// `setString`, which stays a string), and bootstrap renders the same
/// values as helmfile did once the variables are set.
#[test]
#[cfg_attr(
    not(helmfile),
    ignore = "needs helmfile: run `tools/realenv/build helmfile` (or set BOOTSTRAP_TEST_HELMFILE)"
)]
fn values_from_the_environment_are_never_written_as_their_values() {
    let dir = fixture(&[
        CHART,
        (
            "hf/helmfile.yaml.gotmpl",
            r#"releases:
  - name: app
    namespace: apps
    chart: ./charts/app
    version: {{ env "APP_CHART_VERSION" }}
    values:
      - values.yaml.gotmpl
    set:
      - name: apiToken
        value: {{ requiredEnv "API_TOKEN" }}
    setString:
      - name: port
        value: {{ requiredEnv "APP_PORT" }}
"#,
        ),
        (
            "hf/values.yaml.gotmpl",
            "onePassword:\n  token: {{ requiredEnv \"OP_CONNECT_TOKEN\" }}\nreplicas: 2\n",
        ),
    ]);
    let env = [
        ("API_TOKEN", "tok-9f8e7d6c5b4a"),
        ("APP_PORT", "12345"),
        ("OP_CONNECT_TOKEN", "eyJhbGciOiJFUzI1NiJ9.secret"),
        ("APP_CHART_VERSION", "0.1.0"),
    ];
    let run = import(dir.path(), "out", "helmfile", &env);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{}", run.stdout);
    assert!(
        run.stdout.contains("read from the environment by helmfile, written as `{{env \"X\"}}` templates and never as their values: API_TOKEN, APP_PORT, OP_CONNECT_TOKEN\n"),
        "{}",
        run.stdout
    );
    // A version read from the environment is written as its value
    // (bootstrap takes no template there), and said.
    assert!(
        run.stdout.contains("`version` of apps/app: the value of the environment variable `APP_CHART_VERSION` as helmfile rendered it, written as that value (bootstrap takes no template in `version`)\n"),
        "{}",
        run.stdout
    );
    for (path, text) in written(&dir.path().join("out")) {
        for (name, value) in env.iter().filter(|(n, _)| *n != "APP_CHART_VERSION") {
            assert!(
                !text.contains(value),
                "{} holds the value of {name}:\n{text}",
                path.display()
            );
        }
    }
    // Rendered by bootstrap with the variables set: helmfile's values,
    // `port` a string as `setString` made it.
    let (_, values) = installs(dir.path(), "out", &env);
    assert_eq!(
        values,
        json!([["apps/app", {
            "onePassword": {"token": "eyJhbGciOiJFUzI1NiJ9.secret"},
            "replicas": 2,
            "apiToken": "tok-9f8e7d6c5b4a",
            "port": "12345",
        }]])
    );
}

/// The importer's own subset keeps `setString` a string too.
#[test]
fn set_string_from_the_environment_stays_a_string_without_helmfile() {
    let dir = fixture(&[
        CHART,
        (
            "hf/helmfile.yaml",
            r#"releases:
  - name: app
    namespace: apps
    chart: ./charts/app
    setString:
      - name: port
        value: '{{ requiredEnv "APP_PORT" }}'
      - name: motd
        value: '{{ env "APP_MOTD" }}'
"#,
        ),
    ]);
    let run = import(dir.path(), "out", "subset", &[]);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{}", run.stdout);
    let env = [("APP_PORT", "12345"), ("APP_MOTD", "a: b")];
    let (_, values) = installs(dir.path(), "out", &env);
    assert_eq!(
        values,
        json!([["apps/app", {"port": "12345", "motd": "a: b"}]])
    );
}

/// Rendering with helmfile runs the repository's `prepare` hooks (twice:
/// `build` and `build --embed-values`): the import says so, and
/// `--no-exec` reads the files with the importer's own subset instead,
/// which runs nothing.
#[test]
#[cfg_attr(
    not(helmfile),
    ignore = "needs helmfile: run `tools/realenv/build helmfile` (or set BOOTSTRAP_TEST_HELMFILE)"
)]
fn the_import_says_what_helmfile_ran_and_no_exec_runs_nothing() {
    let dir = fixture(&[CHART]);
    let marker = dir.path().join("ran.txt");
    std::fs::write(
        dir.path().join("hf/helmfile.yaml"),
        format!(
            r#"releases:
  - name: app
    namespace: apps
    chart: ./charts/app
    hooks:
      - events: ["prepare"]
        showlogs: true
        command: sh
        args: ["-c", "echo ran >> {}"]
"#,
            marker.display()
        ),
    )
    .unwrap();
    let ran = || std::fs::read_to_string(&marker).unwrap_or_default();
    let run = import(dir.path(), "out", "helmfile", &[]);
    assert!(
        run.stdout.contains("helmfile ran the repository's commands while rendering (twice: `build` and `build --embed-values`): a `prepare` hook at hf/helmfile.yaml:6; --no-exec renders without running them\n"),
        "{}{}",
        run.stdout,
        run.stderr
    );
    assert_eq!(ran(), "ran\nran\n", "helmfile ran the hook");

    std::fs::remove_file(&marker).unwrap();
    let mut args = vec![
        "--dir",
        "safe",
        "import",
        "helmfile",
        "hf",
        "--cluster",
        "lab",
    ];
    let helmfile = helmfile();
    args.extend(["--helmfile", helmfile.to_str().unwrap(), "--no-exec"]);
    let safe = bootstrap(dir.path(), &args, &[]);
    assert!(
        safe.stdout.starts_with("rendered with the importer's own template subset (--no-exec: rendering with helmfile would run a `prepare` hook at hf/helmfile.yaml:6)\n"),
        "{}{}",
        safe.stdout,
        safe.stderr
    );
    assert_eq!(ran(), "", "nothing ran");
}
