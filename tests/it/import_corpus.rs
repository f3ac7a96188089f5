//! Every corpus setup (../shared/corpus, the public home-lab repositories
//! that bootstrap with helmfile) imported through helmfile-rendering
//! (docs/coming-from-helmfile.md) with no edit, and compared with what
//! `helmfile template` renders for the same releases.
//!
//! The test environment has no network, so the charts are served on the
//! loopback: distribution's registry (`tools/realenv/build oci-registry`)
//! for `oci://` charts, and its file server for classic `https://` chart
//! repositories. A working copy of each setup has its chart hosts pointed
//! there (`oci://ghcr.io/x` becomes `oci://127.0.0.1:PORT/ghcr.io/x`; the
//! only change, standing in for the internet); nothing else is edited.
//!
//! Each chart a release names is pushed at its name and version: the real
//! chart where ../shared/charts has it at that version, else a values probe
//! (a chart of that name and version whose one template renders the values
//! helm gives it as JSON). The test prints which was used for each release
//! and why (to stderr, past the harness's capture), so that what was
//! compared is never in doubt. Both tools render
//! with the real helm 4 (`helmfile template`; `bootstrap template
//! --manifests`), so helm merges the values both ways; the documents must
//! be the same, and so must the values `bootstrap template` prints without
//! helm.

#![cfg_attr(
    not(all(helmfile, shared_corpus, oci_registry, realenv_helm4)),
    allow(dead_code, unused_imports)
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use pretty_assertions::assert_eq;
use serde_json::Value;
use testkit::registry::Registry;

/// A corpus setup: the repository, how its tree is made, the state files
/// its bootstrap runs (in that order, as its mod.just or Taskfile does) and
/// where the imported config goes.
pub(crate) struct Setup {
    pub(crate) repo: &'static str,
    pub(crate) tree: Tree,
    pub(crate) files: &'static [&'static str],
    pub(crate) config: &'static str,
    /// `secrets:` entries dropped from the working copy, with why: files
    /// encrypted to a key only the repository's owner holds.
    pub(crate) secrets: &'static [&'static str],
}

/// How a setup's working tree is made.
pub(crate) enum Tree {
    /// The corpus repository as it is.
    Corpus,
    /// Rendered with makejinja from the repository's template/config (a
    /// template repository).
    Makejinja,
    /// Written by the test: a setup in the corpus's style whose charts are
    /// pinned at the versions ../shared/charts has, so that the real charts
    /// are rendered.
    Written(fn(&Path)),
}

fn corpus() -> PathBuf {
    PathBuf::from(option_env!("BOOTSTRAP_TEST_CORPUS_DIR").unwrap_or("../shared/corpus"))
}

fn helmfile() -> PathBuf {
    PathBuf::from(option_env!("BOOTSTRAP_TEST_HELMFILE_BIN").unwrap_or("helmfile"))
}

pub(crate) fn shared_charts() -> Option<PathBuf> {
    option_env!("BOOTSTRAP_TEST_CHARTS_DIR").map(PathBuf::from)
}

/// The environment every program runs in: the real helm 4 first on PATH,
/// the registry's certificate, a HOME of the test's own.
pub(crate) struct Env {
    pub(crate) vars: Vec<(String, String)>,
}

impl Env {
    fn new(registry: &Registry, home: &Path) -> Env {
        let helm = testkit::realenv::helm(4);
        let path = format!(
            "{}:{}",
            helm.parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut vars = registry.env();
        vars.extend([
            ("PATH".to_string(), path),
            ("HOME".to_string(), home.display().to_string()),
            ("HELMFILE_UPGRADE_NOTICE_DISABLED".to_string(), "1".into()),
            ("NO_COLOR".to_string(), "1".into()),
        ]);
        Env { vars }
    }

    pub(crate) fn run(&self, program: &Path, cwd: &Path, args: &[&str]) -> Output {
        let mut command = Command::new(program);
        command
            .current_dir(cwd)
            .args(args)
            .env_remove("CI")
            .env_remove("KUBECONFIG")
            .env_remove("BOOTSTRAP_HELMFILE");
        for (k, v) in &self.vars {
            command.env(k, v);
        }
        command
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", program.display()))
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `oci://HOST/...` and the `https://` chart repositories of the state
/// files, pointed at the registry in every file of the working copy that
/// names a chart location: the OCIRepositories the templates read and the
/// state files. Returns what was replaced, for the record.
fn point_charts_at(root: &Path, files: &[&str], registry: &Registry) -> Vec<(String, String)> {
    let mut replaced = Vec::new();
    let state_files: Vec<PathBuf> = files.iter().map(|f| root.join(f)).collect();
    let mut paths = Vec::new();
    walk(root, &mut |path| {
        if path.file_name().is_some_and(|n| n == "ocirepository.yaml")
            || state_files.iter().any(|s| s == path)
        {
            paths.push(path.to_path_buf());
        }
    });
    for path in paths {
        let before = std::fs::read_to_string(&path).unwrap();
        let state = state_files.contains(&path);
        let mut after = String::new();
        for line in before.split_inclusive('\n') {
            let key = line.trim_start().trim_start_matches("- ").trim_start();
            let locating = key.starts_with("url:") || key.starts_with("chart:");
            let mut line = line.to_string();
            if locating && let Some(at) = line.find("oci://") {
                let rest = &line[at + "oci://".len()..];
                let to = format!("oci://{}/{rest}", registry.addr());
                replaced.push((
                    format!("oci://{}", rest.trim_end()),
                    to.trim_end().to_string(),
                ));
                line = format!("{}{to}", &line[..at]);
            } else if state
                && key.starts_with("url:")
                && let Some(at) = line.find("https://")
            {
                let rest = line[at + "https://".len()..].trim_end().to_string();
                let to = registry.files_url(&rest);
                replaced.push((format!("https://{rest}"), to.clone()));
                line = format!("{}{to}\n", &line[..at]);
            }
            after.push_str(&line);
        }
        if after != before {
            std::fs::remove_file(&path).unwrap();
            std::fs::write(&path, after).unwrap();
        }
    }
    replaced.sort();
    replaced.dedup();
    replaced
}

fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, f);
        } else {
            f(&path);
        }
    }
}

/// Drops the `secrets:` entries named (a line `- FILE` under `secrets:`),
/// and a `secrets:` key left empty.
fn drop_secrets(path: &Path, secrets: &[&str]) {
    let before = std::fs::read_to_string(path).unwrap();
    let mut lines: Vec<&str> = before
        .lines()
        .filter(|l| {
            !secrets
                .iter()
                .any(|s| l.trim().trim_start_matches("- ").trim() == *s)
        })
        .collect();
    // A `secrets:` key with no entry left under it.
    let mut i = 0;
    while i < lines.len() {
        let indent = lines[i].len() - lines[i].trim_start().len();
        let empty = lines[i].trim() == "secrets:"
            && lines
                .get(i + 1)
                .is_none_or(|next| next.len() - next.trim_start().len() <= indent);
        if empty {
            lines.remove(i);
        } else {
            i += 1;
        }
    }
    std::fs::remove_file(path).unwrap();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// A release's chart as `helmfile list` prints it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Listed {
    id: String,
    chart: String,
    version: String,
}

/// `helmfile --file F list --output json`: every release with its chart and
/// version, as helmfile renders them (no chart is pulled).
fn list(env: &Env, root: &Path, file: &str) -> Vec<Listed> {
    let out = env.run(
        &helmfile(),
        root,
        &["--file", file, "list", "--output", "json"],
    );
    assert!(
        out.status.success(),
        "helmfile list {file}: {}",
        text(&out.stderr)
    );
    let list: Vec<Value> = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("helmfile list {file}: {e}: {}", text(&out.stdout)));
    list.iter()
        .map(|r| Listed {
            id: format!(
                "{}/{}",
                r["namespace"].as_str().unwrap(),
                r["name"].as_str().unwrap()
            ),
            chart: r["chart"].as_str().unwrap().to_string(),
            version: r["version"].as_str().unwrap_or("").to_string(),
        })
        .collect()
}

/// Where a chart is served: an OCI repository (`ADDR/PATH`, without the
/// chart's name) or a classic repository (a path under the file server).
enum Location {
    Oci(String),
    Files(String),
}

/// The chart `name` and where it goes, for a `chart:` as helmfile lists
/// it (`oci://...`, or `REPO/NAME` with REPO in the file's `repositories:`).
fn locate(chart: &str, state: &Value, registry: &Registry) -> (String, Location) {
    if let Some(rest) = chart.strip_prefix("oci://") {
        let rest = rest
            .strip_prefix(registry.addr())
            .unwrap_or_else(|| panic!("{chart} is not served by the test registry"))
            .trim_start_matches('/');
        let (path, name) = rest.rsplit_once('/').unwrap();
        return (name.to_string(), Location::Oci(path.to_string()));
    }
    let (repo, name) = chart
        .split_once('/')
        .unwrap_or_else(|| panic!("chart `{chart}`"));
    let url = state["repositories"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["name"] == repo)
        .and_then(|r| r["url"].as_str())
        .unwrap_or_else(|| panic!("repository `{repo}` of chart `{chart}`"));
    let prefix = registry.files_url("");
    let path = url
        .strip_prefix(prefix.trim_end_matches('/'))
        .unwrap_or_else(|| panic!("{url} is not served by the test registry"))
        .trim_matches('/');
    (name.to_string(), Location::Files(path.to_string()))
}

/// The values probe: a chart NAME VERSION whose one template is a
/// ConfigMap holding the values helm gives it, as JSON.
fn probe(dir: &Path, name: &str, version: &str) -> PathBuf {
    let chart = dir.join(format!("{name}-{version}"));
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    std::fs::write(
        chart.join("Chart.yaml"),
        format!(
            "apiVersion: v2\nname: {name}\nversion: {version}\ndescription: values probe of tests/it/import_corpus.rs\n"
        ),
    )
    .unwrap();
    std::fs::write(
        chart.join("templates/values.yaml"),
        r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-values
  namespace: {{ .Release.Namespace }}
data:
  chart: {{ printf "%s %s" .Chart.Name .Chart.Version | quote }}
  values: {{ toJson .Values | quote }}
"#,
    )
    .unwrap();
    chart
}

/// The real chart NAME at VERSION, if the test environment has it: in
/// ../shared/charts, or Cilium's own chart from its Go module at a version
/// the corpus pins (`tools/realenv/build cilium cilium-1.17`).
pub(crate) fn real_chart(name: &str, version: &str) -> Option<PathBuf> {
    let is = |dir: PathBuf| -> Option<PathBuf> {
        let chart: Value =
            serde_saphyr::from_str(&std::fs::read_to_string(dir.join("Chart.yaml")).ok()?).ok()?;
        (chart["name"] == name && chart["version"] == version).then_some(dir)
    };
    shared_charts()
        .and_then(|charts| is(charts.join(name)))
        .or_else(|| is(cilium_share(version, CILIUM_CHART)?))
}

/// Cilium's chart as released, in its Go module (`install/kubernetes/cilium`,
/// Chart.yaml at the module's version).
pub(crate) const CILIUM_CHART: &str = "install/kubernetes/cilium";
/// The CRDs cilium-operator registers when it starts.
pub(crate) const CILIUM_CRDS: &str = "pkg/k8s/apis/cilium.io/client/crds";

/// The realenv tools that share Cilium's module, by the version each pins.
const CILIUM_TOOLS: [(&str, &str); 2] = [("1.20.1", "cilium"), ("1.17.1", "cilium-1.17")];

/// A path in the Cilium module at `version` that a `tools/realenv/build`
/// tool shares (resolved: helm reads `..` after a link as text); `None`
/// for a version no tool pins.
pub(crate) fn cilium_share(version: &str, path: &str) -> Option<PathBuf> {
    let (_, tool) = CILIUM_TOOLS.iter().find(|(v, _)| *v == version)?;
    let path = testkit::realenv::tool_dir(tool)
        .join("../share/github.com/cilium/cilium")
        .join(path);
    Some(std::fs::canonicalize(&path).unwrap_or(path))
}

fn shared_version(name: &str) -> Option<String> {
    let text = std::fs::read_to_string(shared_charts()?.join(name).join("Chart.yaml")).ok()?;
    let chart: Value = serde_saphyr::from_str(&text).ok()?;
    chart["version"].as_str().map(String::from)
}

/// What was served for each release: the real chart or a probe, and why.
struct Served {
    /// release id -> real chart served.
    real: BTreeMap<String, bool>,
    report: Vec<String>,
}

fn serve(releases: &[(String, Listed)], registry: &Registry, root: &Path, work: &Path) -> Served {
    let mut served = Served {
        real: BTreeMap::new(),
        report: Vec::new(),
    };
    let mut pushed: BTreeMap<(String, String), bool> = BTreeMap::new();
    for (file, release) in releases {
        let state: Value =
            serde_saphyr::from_str(&std::fs::read_to_string(root.join(file)).unwrap())
                .unwrap_or(Value::Null);
        let (name, location) = locate(&release.chart, &state, registry);
        let key = (release.chart.clone(), release.version.clone());
        let real = match pushed.get(&key) {
            Some(real) => *real,
            None => {
                let real = real_chart(&name, &release.version);
                let chart = real
                    .clone()
                    .unwrap_or_else(|| probe(work, &name, &release.version));
                match &location {
                    Location::Oci(path) => registry.push(&chart, path),
                    Location::Files(path) => registry.publish(&chart, path),
                }
                pushed.insert(key, real.is_some());
                real.is_some()
            }
        };
        served.real.insert(release.id.clone(), real);
        served.report.push(if real {
            format!(
                "{}: {} {}: the real chart from {}",
                release.id,
                release.chart,
                release.version,
                real_chart(&name, &release.version).unwrap().display()
            )
        } else {
            format!(
                "{}: {} {}: values probe (../shared/charts has {}): values compared, the chart's own manifests not rendered",
                release.id,
                release.chart,
                release.version,
                match shared_version(&name) {
                    Some(v) => format!("{name} {v}, not {}", release.version),
                    None => format!("no {name}"),
                }
            )
        });
    }
    served
}

/// The documents of a multi-document YAML stream (helm's output).
fn documents(stream: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(stream)
        .unwrap_or_else(|e| panic!("not YAML: {e}\n{stream}"))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// The probe's ConfigMaps among `docs`: release id -> (chart, values).
fn probed(docs: &[Value]) -> BTreeMap<String, (String, Value)> {
    docs.iter()
        .filter(|d| {
            d["kind"] == "ConfigMap"
                && d["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.ends_with("-values"))
                && d["data"]["values"].is_string()
        })
        .map(|d| {
            let name = d["metadata"]["name"].as_str().unwrap();
            let id = format!(
                "{}/{}",
                d["metadata"]["namespace"].as_str().unwrap(),
                name.trim_end_matches("-values")
            );
            let values: Value =
                serde_json::from_str(d["data"]["values"].as_str().unwrap()).unwrap();
            (
                id,
                (d["data"]["chart"].as_str().unwrap().to_string(), values),
            )
        })
        .collect()
}

/// A setup imported (and compared with helmfile): its working copy, the
/// environment and the registry that serves its charts, kept for the steps
/// after the import (tests/it/corpus_applied.rs).
pub(crate) struct Imported {
    pub(crate) tmp: tempfile::TempDir,
    pub(crate) root: PathBuf,
    pub(crate) env: Env,
    /// Kept: it serves the charts to the steps after the import.
    pub(crate) _registry: Registry,
    /// The release ids served with their real chart.
    pub(crate) real: Vec<String>,
    /// What was served and compared, line by line.
    pub(crate) report: Vec<String>,
}

pub(crate) fn compare(setup: &Setup) -> Imported {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join(setup.repo);
    let source = corpus().join(setup.repo);
    match setup.tree {
        Tree::Corpus => testkit::builder::copy_dir(&source, &root),
        Tree::Makejinja => testkit::makejinja::render_tree(&source.join("template/config"), &root),
        Tree::Written(write) => write(&root),
    }
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let registry = Registry::start(&testkit::realenv::helm(4));
    let env = Env::new(&registry, &home);
    let mut report = vec![format!(
        "{}: {}",
        setup.repo,
        match setup.tree {
            Tree::Corpus => "the corpus tree as it is",
            Tree::Makejinja => "rendered with makejinja (testkit::makejinja's configuration)",
            Tree::Written(_) => "written by the test, in the corpus's style",
        }
    )];
    for (from, to) in point_charts_at(&root, setup.files, &registry) {
        report.push(format!("  chart location {from} served as {to}"));
    }
    for secret in setup.secrets {
        for file in setup.files {
            drop_secrets(&root.join(file), &[secret]);
        }
        report.push(format!(
            "  secrets entry {secret} dropped from both runs: sops-encrypted to a key only the repository's owner holds, so neither tool can read it"
        ));
    }

    let mut releases: Vec<(String, Listed)> = Vec::new();
    for file in setup.files {
        for release in list(&env, &root, file) {
            releases.push((file.to_string(), release));
        }
    }
    let work = tmp.path().join("charts");
    let served = serve(&releases, &registry, &root, &work);
    report.extend(served.report.iter().map(|l| format!("  {l}")));

    // The import: through helmfile, nothing left unconverted.
    let bootstrap = PathBuf::from(testkit::bootstrap());
    let mut args = vec!["--dir", setup.config, "import", "helmfile"];
    args.extend(setup.files.iter().copied());
    let hf = helmfile();
    args.extend(["--cluster", "lab", "--helmfile", hf.to_str().unwrap()]);
    let import = env.run(&bootstrap, &root, &args);
    let stdout = text(&import.stdout);
    assert_eq!(
        (import.status.code(), text(&import.stderr).as_str()),
        (Some(0), ""),
        "{}\n{stdout}",
        report.join("\n")
    );
    assert!(stdout.starts_with("rendered with helmfile v"), "{stdout}");
    assert!(!stdout.contains("not converted"), "{stdout}");
    report.extend(
        stdout
            .lines()
            .skip_while(|l| !l.starts_with("not carried over"))
            .take_while(|l| !l.starts_with("next:"))
            .map(|l| format!("  import: {}", l.trim())),
    );
    for (command, extra) in [("plan", &[][..]), ("check", &["-q"][..])] {
        let mut args = vec!["--dir", setup.config];
        args.extend(extra);
        args.extend([command, "lab"]);
        let out = env.run(&bootstrap, &root, &args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{command}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }

    // helmfile's rendering, file by file, with the real helm 4.
    let helmfile_template = || -> Vec<Value> {
        let mut docs: Vec<Value> = Vec::new();
        for file in setup.files {
            let out = env.run(&helmfile(), &root, &["--file", file, "template"]);
            assert!(
                out.status.success(),
                "helmfile template {file}: {}",
                text(&out.stderr)
            );
            docs.extend(documents(&text(&out.stdout)));
        }
        docs
    };
    let mut theirs = helmfile_template();

    // bootstrap's: the values it computes, and what helm renders from them
    // (installed releases, then the CRD phase's values of CRD-only ones).
    let template = |crds: bool| -> Value {
        let mut args = vec![
            "--dir",
            setup.config,
            "--output",
            "json",
            "template",
            "lab",
            "--manifests",
            "--show-secrets",
        ];
        if crds {
            args.push("--crds");
        }
        let out = env.run(&bootstrap, &root, &args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "template{}: {}",
            if crds { " --crds" } else { "" },
            text(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let plan: Value = {
        let out = env.run(
            &bootstrap,
            &root,
            &["--dir", setup.config, "--output", "json", "plan", "lab"],
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let crds_only: Vec<String> = plan["releases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["installs"] == false)
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    let (installs, crd_phase) = (template(false), template(true));
    let mut ours_values: BTreeMap<String, Value> = BTreeMap::new();
    let mut ours: Vec<Value> = Vec::new();
    for (doc, crd) in [(&installs, false), (&crd_phase, true)] {
        for release in doc["releases"].as_array().unwrap() {
            let id = release["release"].as_str().unwrap().to_string();
            if crds_only.contains(&id) != crd {
                continue;
            }
            ours_values.insert(id.clone(), release["values"].clone());
            ours.extend(
                release["manifests"]
                    .as_array()
                    .unwrap_or_else(|| panic!("{id}: no manifests: {release}"))
                    .iter()
                    .cloned(),
            );
        }
    }

    // Release by release: the same chart, and the same values.
    let their_probes = probed(&theirs);
    let our_probes = probed(&ours);
    let mut compared = 0;
    for (_, release) in &releases {
        let id = &release.id;
        if served.real[id] {
            continue;
        }
        let theirs = their_probes
            .get(id)
            .unwrap_or_else(|| panic!("helmfile rendered no probe for {id}"));
        let ours = our_probes
            .get(id)
            .unwrap_or_else(|| panic!("bootstrap rendered no probe for {id}"));
        assert_eq!(ours, theirs, "{id}: chart and values as helm got them");
        // What `template` prints without helm is what helm got.
        let mut printed = ours_values[id].clone();
        strip_nulls(&mut printed);
        assert_eq!(printed, theirs.1, "{id}: values bootstrap prints");
        compared += 1;
    }
    // Real charts: the whole documents.
    let real: Vec<&String> = served
        .real
        .iter()
        .filter(|(_, real)| **real)
        .map(|(id, _)| id)
        .collect();
    if !real.is_empty() {
        // What a chart draws at random (Cilium's `genCA` certificates)
        // differs between two renders of the same input: found by rendering
        // helmfile's side twice, and not compared.
        let unstable = mask_unstable(&mut theirs, &helmfile_template());
        mask(&mut ours, &unstable);
        if !unstable.is_empty() {
            report.push(format!(
                "  not compared: {} values that differ between two renders by helmfile itself (drawn at random by the chart): {}",
                unstable.len(),
                unstable
                    .iter()
                    .map(|(k, p)| format!("{k} {p}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        // `bootstrap template` renders what the install applies: helm's
        // hooks (and test pods) are not part of it (`helm template
        // --no-hooks --skip-tests`), while `helmfile template` keeps them.
        let hook = |d: &&Value| d["metadata"]["annotations"]["helm.sh/hook"].is_string();
        let differences = differences(
            theirs.iter().filter(|d| !is_probe(d) && !hook(d)),
            ours.iter().filter(|d| !is_probe(d)),
        );
        assert!(
            differences.is_empty(),
            "the documents of the real charts ({real:?}) differ (helmfile template / bootstrap template --manifests):\n{}",
            differences.join("\n")
        );
    }
    report.push(format!(
        "  compared: {} releases, {compared} by their values through a probe, {} with real charts",
        releases.len(),
        real.len()
    ));
    assert_eq!(compared + real.len(), releases.len());
    // Past the test harness's capture (it takes print! and eprint! only):
    // what was compared, and how, shows in every run.
    use std::io::Write;
    let _ = std::io::stderr().write_all(format!("{}\n", report.join("\n")).as_bytes());
    let real = real.into_iter().cloned().collect();
    Imported {
        tmp,
        root,
        env,
        _registry: registry,
        real,
        report,
    }
}

/// The documents of two renders, matched by kind, namespace and name: one
/// line per document only one side has, or that differs (with the first
/// path where it does).
fn differences<'a>(
    theirs: impl Iterator<Item = &'a Value>,
    ours: impl Iterator<Item = &'a Value>,
) -> Vec<String> {
    let theirs: BTreeMap<String, &Value> = theirs.map(|d| (doc_key(d), d)).collect();
    let ours: BTreeMap<String, &Value> = ours.map(|d| (doc_key(d), d)).collect();
    let mut out = Vec::new();
    for (k, t) in &theirs {
        match ours.get(k) {
            None => out.push(format!("  only helmfile: {k}")),
            Some(o) if o != t => {
                out.push(format!("  differs: {k} at {}", first_difference(t, o, "")))
            }
            Some(_) => {}
        }
    }
    for k in ours.keys().filter(|k| !theirs.contains_key(*k)) {
        out.push(format!("  only bootstrap: {k}"));
    }
    out
}

/// The kind, namespace and name of a rendered document.
fn doc_key(d: &Value) -> String {
    format!(
        "{} {}/{}",
        d["kind"].as_str().unwrap_or("?"),
        d["metadata"]["namespace"].as_str().unwrap_or(""),
        d["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// Masks in `docs` every value that differs in `again` (a second render of
/// the same input); returns where, as (document, JSON pointer).
fn mask_unstable(docs: &mut [Value], again: &[Value]) -> Vec<(String, String)> {
    let again: BTreeMap<String, &Value> = again.iter().map(|d| (doc_key(d), d)).collect();
    let mut out = Vec::new();
    for doc in docs.iter() {
        if let Some(other) = again.get(&doc_key(doc)) {
            let mut pointers = Vec::new();
            leaf_differences(doc, other, String::new(), &mut pointers);
            out.extend(pointers.into_iter().map(|p| (doc_key(doc), p)));
        }
    }
    mask(docs, &out);
    out
}

/// Replaces each (document, pointer) of `at` in `docs` with a mark.
fn mask(docs: &mut [Value], at: &[(String, String)]) {
    for doc in docs.iter_mut() {
        let key = doc_key(doc);
        for (_, pointer) in at.iter().filter(|(k, _)| *k == key) {
            if let Some(v) = doc.pointer_mut(pointer) {
                *v = Value::String("(differs between renders)".into());
            }
        }
    }
}

fn leaf_differences(a: &Value, b: &Value, at: String, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                if let Some(w) = y.get(k) {
                    let k = k.replace('~', "~0").replace('/', "~1");
                    leaf_differences(v, w, format!("{at}/{k}"), out);
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                leaf_differences(v, w, format!("{at}/{i}"), out);
            }
        }
        _ if a != b => out.push(at),
        _ => {}
    }
}

fn first_difference(a: &Value, b: &Value, at: &str) -> String {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys()) {
                if x.get(k) != y.get(k) {
                    return first_difference(
                        x.get(k).unwrap_or(&Value::Null),
                        y.get(k).unwrap_or(&Value::Null),
                        &format!("{at}.{k}"),
                    );
                }
            }
            at.to_string()
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                if p != q {
                    return first_difference(p, q, &format!("{at}[{i}]"));
                }
            }
            at.to_string()
        }
        _ => format!("{at}: {a} / {b}"),
    }
}

fn is_probe(doc: &Value) -> bool {
    doc["kind"] == "ConfigMap"
        && doc["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.ends_with("-values"))
        && doc["data"]["values"].is_string()
}

/// helm drops null values when it merges (a null deletes the key); the
/// values `template` prints keep them as written.
fn strip_nulls(value: &mut Value) {
    if let Value::Object(map) = value {
        map.retain(|_, v| !v.is_null());
        map.values_mut().for_each(strip_nulls);
    }
}

macro_rules! setup {
    ($test:ident, $name:ident, $setup:expr) => {
        pub(crate) const $name: Setup = $setup;

        #[test]
        #[cfg_attr(
            not(all(helmfile, shared_corpus, oci_registry, realenv_helm4)),
            ignore = "needs helmfile, the chart registry, the real helm 4 and ../shared/corpus: run `tools/realenv/build helmfile oci-registry helm4` (the corpus is ../shared/corpus beside the repository, or BOOTSTRAP_TEST_CORPUS)"
        )]
        fn $test() {
            compare(&$name);
        }
    };
}

setup!(
    bjw_s_labs_home_ops,
    BJW_S_LABS_HOME_OPS,
    Setup {
        repo: "bjw-s-labs__home-ops",
        tree: Tree::Corpus,
        files: &[
            "kubernetes/bootstrap/helmfile/crds.yaml",
            "kubernetes/bootstrap/helmfile/apps.yaml",
        ],
        config: "kubernetes/bootstrap/config",
        secrets: &[],
    }
);

setup!(
    buroa_k8s_gitops,
    BUROA_K8S_GITOPS,
    Setup {
        repo: "buroa__k8s-gitops",
        tree: Tree::Corpus,
        files: &[
            "bootstrap/helmfile/crds.yaml",
            "bootstrap/helmfile/apps.yaml"
        ],
        config: "bootstrap/config",
        secrets: &[],
    }
);

setup!(
    onedr0p_home_ops,
    ONEDR0P_HOME_OPS,
    Setup {
        repo: "onedr0p__home-ops",
        tree: Tree::Corpus,
        files: &[
            "bootstrap/helmfile/crds.yaml",
            "bootstrap/helmfile/apps.yaml"
        ],
        config: "bootstrap/config",
        secrets: &[],
    }
);

setup!(
    onedr0p_cluster_template,
    ONEDR0P_CLUSTER_TEMPLATE,
    Setup {
        repo: "onedr0p__cluster-template",
        tree: Tree::Makejinja,
        files: &[
            "bootstrap/helmfile/crds.yaml",
            "bootstrap/helmfile/apps.yaml"
        ],
        config: "bootstrap/config",
        secrets: &[],
    }
);

setup!(
    jfroy_flatops,
    JFROY_FLATOPS,
    Setup {
        repo: "jfroy__flatops",
        tree: Tree::Corpus,
        files: &["kubernetes/bootstrap/helmfile.yaml"],
        config: "kubernetes/bootstrap/config",
        secrets: &["coredns.sops.yaml"],
    }
);

/// A values template that reads the second document of a file with
/// `fromYaml` (tests/it/import_handover.rs): helmfile, with its charts
/// served, fails on it (`fromYaml` takes the first document, which has no
/// `.spec.values`) and the import says so; the importer's own reading then
/// says which document it read and writes the release with `from:` and
/// `ownership: handover`, as without helmfile.
#[test]
#[cfg_attr(
    not(all(helmfile, oci_registry, realenv_helm4)),
    ignore = "needs helmfile, the chart registry and the real helm 4: run `tools/realenv/build helmfile oci-registry helm4`"
)]
fn a_later_document_helmfile_fails_on_is_still_read_with_from() {
    let registry = Registry::start(&testkit::realenv::helm(4));
    let work = tempfile::tempdir().unwrap();
    for (name, version) in [("app", "1.2.3"), ("dns", "1.0.0")] {
        registry.push(&probe(work.path(), name, version), "ghcr.io/example/charts");
    }
    let charts = format!("oci://{}/ghcr.io/example/charts", registry.addr());
    let test = crate::import_handover::repository_with(&charts);
    std::fs::create_dir_all(test.path().join("home")).unwrap();
    let env = Env::new(&registry, &test.path().join("home"));
    let hf = helmfile();
    let run = env.run(
        Path::new(testkit::bootstrap()),
        test.path(),
        &[
            "--dir",
            "bootstrap/config",
            "import",
            "helmfile",
            "bootstrap/helmfile.yaml",
            "--cluster",
            "infra",
            "--helmfile",
            hf.to_str().unwrap(),
        ],
    );
    let stdout = text(&run.stdout);
    assert_eq!(run.status.code(), Some(1), "{stdout}{}", text(&run.stderr));
    assert!(
        stdout.contains(crate::import_handover::READ_DOCUMENT),
        "{stdout}"
    );
    assert!(
        stdout
            .contains("bootstrap/helmfile.yaml: `helmfile build`: helmfile could not render it (")
            && stdout.contains("map has no entry for key \"values\""),
        "{stdout}"
    );
    let releases =
        std::fs::read_to_string(test.path().join("bootstrap/config/releases/helmfile.yaml"))
            .unwrap();
    assert!(
        releases
            .split("---\n")
            .nth(1)
            .unwrap()
            .starts_with(crate::import_handover::APP_RELEASE),
        "{releases}"
    );
}

/// The corpus's release-template style (chart and version from each
/// release's OCIRepository, values from its HelmRelease, through
/// `templates/`) with the charts ../shared/charts holds, at their versions:
/// CoreDNS, Spegel and cert-manager installed, the Prometheus operator's
/// CRDs rendered for their CRDs only. The Flux tree is found through its
/// Kustomization.
fn shared_charts_setup(root: &Path) {
    let write = |path: &str, text: &str| {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "bootstrap/helmfile/default.yaml",
        r#"templates:
  default:
    chart: '{{ (fromYaml (tpl (readFile "./templates/release.yaml.gotmpl") .)).chart }}'
    version: '{{ (fromYaml (tpl (readFile "./templates/release.yaml.gotmpl") .)).version }}'
    values:
      - ./templates/values.yaml.gotmpl
"#,
    );
    write(
        "bootstrap/helmfile/templates/release.yaml.gotmpl",
        r#"{{- $oci := fromYaml (readFile (printf "../../kubernetes/apps/%s/%s/app/ocirepository.yaml" .Release.Namespace .Release.Name)) -}}
chart: {{ $oci.spec.url }}
version: {{ $oci.spec.ref.tag }}
"#,
    );
    write(
        "bootstrap/helmfile/templates/values.yaml.gotmpl",
        r#"{{ (fromYaml (readFile (printf "../../../kubernetes/apps/%s/%s/app/helmrelease.yaml" .Release.Namespace .Release.Name))).spec.values | toYaml }}
"#,
    );
    write(
        "bootstrap/helmfile/crds.yaml",
        "helmDefaults:\n  args:\n    - --include-crds\n    - --no-hooks\nbases:\n  - default.yaml\ndefaultInherit: default\nreleases:\n  - name: prometheus-operator-crds\n    namespace: observability\n",
    );
    write(
        "bootstrap/helmfile/apps.yaml",
        "helmDefaults:\n  wait: true\nbases:\n  - default.yaml\ndefaultInherit: default\nreleases:\n  - name: coredns\n    namespace: kube-system\n  - name: spegel\n    namespace: kube-system\n    needs: [kube-system/coredns]\n  - name: cert-manager\n    namespace: cert-manager\n    needs: [kube-system/spegel]\n",
    );
    write(
        "kubernetes/flux/cluster/ks.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: cluster-apps\n  namespace: flux-system\nspec:\n  interval: 1h\n  path: ./kubernetes/apps\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n",
    );
    for (ns, name, url, tag, values) in [
        (
            "observability",
            "prometheus-operator-crds",
            "oci://ghcr.io/prometheus-community/charts/prometheus-operator-crds",
            "24.0.1",
            "{}",
        ),
        (
            "kube-system",
            "coredns",
            "oci://ghcr.io/coredns/charts/coredns",
            "1.44.3",
            "\n    replicaCount: 2\n    service:\n      clusterIP: 10.43.0.10\n      name: kube-dns",
        ),
        (
            "kube-system",
            "spegel",
            "oci://ghcr.io/spegel-org/helm-charts/spegel",
            "0.4.0",
            "\n    spegel:\n      containerdSock: /run/containerd/containerd.sock\n      containerdRegistryConfigPath: /etc/cri/conf.d/hosts",
        ),
        (
            "cert-manager",
            "cert-manager",
            "oci://quay.io/jetstack/charts/cert-manager",
            "v1.19.0",
            "\n    replicaCount: 2\n    dns01RecursiveNameservers: https://1.1.1.1:443/dns-query",
        ),
    ] {
        write(
            &format!("kubernetes/apps/{ns}/{name}/app/ocirepository.yaml"),
            &format!(
                "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  interval: 1h\n  url: {url}\n  ref:\n    tag: {tag}\n"
            ),
        );
        write(
            &format!("kubernetes/apps/{ns}/{name}/app/helmrelease.yaml"),
            &format!(
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  interval: 1h\n  chartRef:\n    kind: OCIRepository\n    name: {name}\n  values: {values}\n"
            ),
        );
    }
}

#[test]
#[cfg_attr(
    not(all(helmfile, oci_registry, realenv_helm4, shared_charts)),
    ignore = "needs helmfile, the chart registry, the real helm 4 and ../shared/charts: run `tools/realenv/build helmfile oci-registry helm4` (the charts are ../shared/charts beside the repository, BOOTSTRAP_TEST_CHARTS or scripts/pull-test-charts)"
)]
fn the_real_charts_render_the_same_through_both() {
    compare(&Setup {
        repo: "shared-charts",
        tree: Tree::Written(shared_charts_setup),
        files: &[
            "bootstrap/helmfile/crds.yaml",
            "bootstrap/helmfile/apps.yaml",
        ],
        config: "bootstrap/config",
        secrets: &[],
    });
}
