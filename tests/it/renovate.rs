//! The Renovate preset (renovate/bootstrap.json5) run by the real Renovate:
//! the version tools/realenv/renovate/package.json pins, on the Node.js it
//! pins (`tools/realenv/build renovate`), in Renovate's local-platform mode
//! over a working copy whose `renovate.json5` is the preset file as shipped,
//! byte for byte (what a repository that copies it has; `extends` of a
//! `github>` preset needs the network).
//!
//! - The shipped catalog (`releases/`, `clusters/`): Renovate finds every
//!   version it pins, with the datasource and source Renovate must look it
//!   up in (extraction: no lookup, so no network).
//! - A catalog whose charts are served on the loopback (distribution's
//!   registry: a classic chart repository at `/files/`, charts by `oci://`):
//!   the exact updates Renovate proposes, and a `from:` release left to
//!   Renovate's flux manager, which bumps the HelmRelease it reads.

#![cfg_attr(not(renovate), allow(dead_code, unused_imports))]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use testkit::registry::Registry;

/// One dependency as Renovate reports it: the manager and file it came
/// from, its name, datasource, where it is looked up (the chart repository,
/// the OCI repository, the GitHub repository) and the version pinned; with
/// a lookup, the updates proposed as `TYPE NEW_VALUE`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Dep {
    file: String,
    manager: String,
    name: String,
    datasource: String,
    source: String,
    current: String,
    updates: Vec<String>,
}

fn renovate_bin() -> PathBuf {
    testkit::realenv::bin("renovate", "renovate")
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=test", "-c", "user.email=test@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A git working copy with the preset as its `renovate.json5`.
fn working_copy(dir: &Path) {
    let preset = Path::new(env!("CARGO_MANIFEST_DIR")).join("renovate/bootstrap.json5");
    std::fs::copy(preset, dir.join("renovate.json5")).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "catalog"]);
}

/// Runs Renovate on `repo` (`extract` or `lookup`) with `global` as its
/// global config; returns the dependencies it reports and every warning or
/// error it logged.
fn renovate(
    repo: &Path,
    mode: &str,
    global: &Value,
    env: &[(String, String)],
) -> (Vec<Dep>, Vec<String>) {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config.json");
    std::fs::write(&config, global.to_string()).unwrap();
    let mut cmd = Command::new(renovate_bin());
    cmd.args(["--platform=local", &format!("--dry-run={mode}")])
        .current_dir(repo)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("RENOVATE_BASE_DIR", home.path().join("renovate"))
        .env("RENOVATE_CONFIG_FILE", &config)
        .env("LOG_FORMAT", "json")
        .env("LOG_LEVEL", "debug")
        .envs(env.iter().map(|(k, v)| (k, v)));
    let out = testkit::realenv::output_within(&mut cmd, Duration::from_secs(180));
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "renovate exited with {}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        tail(&log)
    );
    let lines: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let wanted = match mode {
        "extract" => "Extracted dependencies",
        _ => "packageFiles with updates",
    };
    let report = lines
        .iter()
        .find(|l| l["msg"] == wanted)
        .unwrap_or_else(|| panic!("renovate logged no `{wanted}`:\n{}", tail(&log)));
    let files = match mode {
        "extract" => &report["packageFiles"],
        _ => &report["config"],
    };
    let warnings = lines
        .iter()
        .filter(|l| l["level"].as_u64().unwrap_or(0) >= 40)
        .map(|l| l["msg"].as_str().unwrap_or_default().to_string())
        .collect();
    (deps(files), warnings)
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Renovate's package files (`{MANAGER: [{packageFile, deps}]}`) as [`Dep`]s.
fn deps(files: &Value) -> Vec<Dep> {
    let mut out = Vec::new();
    for (manager, files) in files.as_object().into_iter().flatten() {
        for file in files.as_array().into_iter().flatten() {
            for dep in file["deps"].as_array().into_iter().flatten() {
                let source = dep["registryUrls"][0]
                    .as_str()
                    .or(dep["packageName"].as_str())
                    .unwrap_or_default()
                    .trim_end_matches('/');
                let mut updates: Vec<String> = dep["updates"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|u| format!("{} {}", text(&u["updateType"]), text(&u["newValue"])))
                    .collect();
                updates.sort();
                out.push(Dep {
                    file: text(&file["packageFile"]),
                    manager: manager.clone(),
                    name: text(&dep["depName"]),
                    datasource: text(&dep["datasource"]),
                    source: source.to_string(),
                    current: text(&dep["currentValue"]),
                    updates,
                });
            }
        }
    }
    out.sort();
    out
}

fn text(v: &Value) -> String {
    v.as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string())
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

/// What a reader of the catalog's files (not of the preset) says Renovate
/// must find: each release's `chart:` with a repository or an OCI
/// reference, each GitHub release asset among `manifests:`, and a
/// FluxInstance's `instance.distribution.version` in a values file.
fn pinned_in(root: &Path) -> Vec<Dep> {
    let dep = |file: &Path, name: &str, datasource: &str, source: &str, current: &str| Dep {
        file: file.strip_prefix(root).unwrap().display().to_string(),
        manager: "jsonata".into(),
        name: name.into(),
        datasource: datasource.into(),
        source: source.trim_end_matches('/').into(),
        current: current.into(),
        updates: vec![],
    };
    let mut files = Vec::new();
    yaml_files(&root.join("releases"), &mut files);
    yaml_files(&root.join("clusters"), &mut files);
    let mut out = Vec::new();
    for file in files {
        let content = std::fs::read_to_string(&file).unwrap();
        let docs: Vec<Value> = serde_saphyr::from_multiple(&content).unwrap();
        let release_file = file.parent() == Some(&root.join("releases"));
        for doc in docs {
            let version = doc["chart"]["version"].as_str().unwrap_or_default();
            if let (true, Some(repo)) = (release_file, doc["chart"]["repo"].as_str()) {
                out.push(dep(
                    &file,
                    text(&doc["chart"]["name"]).as_str(),
                    "helm",
                    repo,
                    version,
                ));
            }
            if let (true, Some(oci)) = (release_file, doc["chart"]["oci"].as_str()) {
                let reference = oci.trim_start_matches("oci://");
                let name = reference.rsplit('/').next().unwrap();
                out.push(dep(&file, name, "docker", reference, version));
            }
            for url in doc["manifests"].as_array().into_iter().flatten() {
                let url = url.as_str().unwrap_or_default();
                let Some(rest) = url.strip_prefix("https://github.com/") else {
                    continue;
                };
                let parts: Vec<&str> = rest.split('/').collect();
                if release_file
                    && parts.len() > 4
                    && parts[2] == "releases"
                    && parts[3] == "download"
                {
                    let repo = format!("{}/{}", parts[0], parts[1]);
                    out.push(dep(&file, &repo, "github-releases", &repo, parts[4]));
                }
            }
            if let Some(flux) = doc["instance"]["distribution"]["version"].as_str() {
                out.push(dep(
                    &file,
                    "fluxcd/flux2",
                    "github-releases",
                    "fluxcd/flux2",
                    flux,
                ));
            }
        }
    }
    out.sort();
    out
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            copy_dir(&path, &to.join(entry.file_name()));
        } else {
            std::fs::copy(&path, to.join(entry.file_name())).unwrap();
        }
    }
}

#[test]
#[cfg_attr(
    not(renovate),
    ignore = "needs the real Renovate: run `tools/realenv/build renovate` (npm)"
)]
fn the_preset_finds_every_version_the_shipped_catalog_pins() {
    let repo = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    copy_dir(&root.join("releases"), &repo.path().join("releases"));
    copy_dir(&root.join("clusters"), &repo.path().join("clusters"));
    working_copy(repo.path());

    let (found, warnings) = renovate(repo.path(), "extract", &json!({}), &[]);

    let expected = pinned_in(repo.path());
    // Not two empty lists: the catalog's two most important pins, one of
    // each chart source, are among them.
    for (name, datasource) in [("cilium", "helm"), ("spegel", "docker")] {
        assert!(
            expected
                .iter()
                .any(|d| d.name == name && d.datasource == datasource),
            "the shipped catalog no longer pins {name}: {expected:#?}"
        );
    }
    assert_eq!(found, expected);
    assert_eq!(allowed_only(&warnings), Vec::<String>::new());
}

/// Warnings that say nothing about the preset: the regex engine Renovate
/// falls back to (its native RE2 is built by an install script, which the
/// offline install skips), and GitHub lookups without a token (the local
/// platform has none; Renovate on GitHub has its app's).
fn allowed_only(warnings: &[String]) -> Vec<String> {
    warnings
        .iter()
        .filter(|w| {
            !matches!(
                w.as_str(),
                "RE2 not usable, falling back to RegExp"
                    | "GitHub token is required for some dependencies"
            )
        })
        .cloned()
        .collect()
}

/// A chart of `name` at `version` (no templates: Renovate reads versions
/// only), under `work`.
fn chart(work: &Path, name: &str, version: &str) -> PathBuf {
    let dir = work.join(format!("{name}-{version}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("Chart.yaml"),
        format!("apiVersion: v2\nname: {name}\nversion: {version}\n"),
    )
    .unwrap();
    dir
}

#[test]
#[cfg_attr(
    not(all(renovate, oci_registry, realenv_helm4)),
    ignore = "needs the real Renovate, the chart registry and the real helm 4: run `tools/realenv/build renovate oci-registry helm4`"
)]
fn renovate_proposes_the_exact_chart_updates_and_leaves_from_to_the_flux_manager() {
    let registry = Registry::start(&testkit::realenv::helm(4));
    let work = tempfile::tempdir().unwrap();
    let published = [
        (
            "cilium",
            "cilium",
            &["1.18.2", "1.18.3", "1.19.1", "2.0.0"][..],
        ),
        ("jetstack", "cert-manager", &["v1.19.0", "v1.19.2"][..]),
        ("podinfo", "podinfo", &["6.0.0", "6.1.0"][..]),
    ];
    for (path, name, versions) in published {
        for version in versions {
            registry.publish(&chart(work.path(), name, version), path);
        }
    }
    for version in ["0.4.0", "0.4.1", "0.5.0"] {
        registry.push(
            &chart(work.path(), "spegel", version),
            "spegel-org/helm-charts",
        );
    }
    let oci = format!("oci://{}/spegel-org/helm-charts/spegel", registry.addr());

    let repo = tempfile::tempdir().unwrap();
    let releases = repo.path().join("releases");
    std::fs::create_dir_all(&releases).unwrap();
    // The shapes a catalog is written in: block and flow mappings, keys in
    // any order, quoted versions, several releases in one file, a local
    // chart and a `from:` release (no version of its own).
    std::fs::write(
        releases.join("core.yaml"),
        format!(
            "---\nname: cilium\nnamespace: kube-system\nchart:\n  repo: {cilium}\n  name: cilium\n  version: 1.18.2\n\
             ---\nname: spegel\nnamespace: kube-system\nchart: {{version: \"0.4.0\", oci: {oci}}}\nneeds: [cilium]\n\
             ---\nname: local\nnamespace: kube-system\nchart:\n  path: ../charts/local\n",
            cilium = registry.files_url("cilium"),
        ),
    )
    .unwrap();
    std::fs::write(
        releases.join("apps.yml"),
        format!(
            "name: cert-manager\nnamespace: cert-manager\nchart:\n  version: v1.19.0\n  name: cert-manager\n  repo: {jetstack}\n\
             ---\nname: podinfo\nnamespace: apps\nfrom:\n  helmRelease: apps/podinfo\n",
            jetstack = registry.files_url("jetstack"),
        ),
    )
    .unwrap();
    let flux = repo.path().join("flux/apps");
    std::fs::create_dir_all(&flux).unwrap();
    std::fs::write(
        flux.join("podinfo.yaml"),
        format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: podinfo\n  namespace: apps\nspec:\n  interval: 1h\n  url: {podinfo}\n\
             ---\napiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: podinfo\n  namespace: apps\nspec:\n  interval: 1h\n  chart:\n    spec:\n      chart: podinfo\n      version: 6.0.0\n      sourceRef:\n        kind: HelmRepository\n        name: podinfo\n",
            podinfo = registry.files_url("podinfo"),
        ),
    )
    .unwrap();
    working_copy(repo.path());

    // What a repository with a GitOps tree configures anyway: Renovate's
    // flux manager reads only gotk-components.yaml unless told where the
    // tree is.
    // The loopback stands in for the internet: Renovate is told it may
    // reach that internal host, as its warning asks.
    let global = json!({
        "flux": {"managerFilePatterns": ["/^flux/.+\\.yaml$/"]},
        "hostRules": [{"matchHost": "127.0.0.1", "allowInternal": true}],
    });
    let env = vec![(
        "NODE_EXTRA_CA_CERTS".to_string(),
        registry.ca().display().to_string(),
    )];
    let (found, warnings) = renovate(repo.path(), "lookup", &global, &env);

    let helm = |file: &str, name: &str, path: &str, current: &str, updates: &[&str]| Dep {
        file: file.into(),
        manager: "jsonata".into(),
        name: name.into(),
        datasource: "helm".into(),
        source: registry.files_url(path),
        current: current.into(),
        updates: updates.iter().map(|u| u.to_string()).collect(),
    };
    let mut expected = vec![
        helm(
            "releases/core.yaml",
            "cilium",
            "cilium",
            "1.18.2",
            &["major 2.0.0", "minor 1.19.1"],
        ),
        helm(
            "releases/apps.yml",
            "cert-manager",
            "jetstack",
            "v1.19.0",
            &["patch v1.19.2"],
        ),
        Dep {
            file: "releases/core.yaml".into(),
            manager: "jsonata".into(),
            name: "spegel".into(),
            datasource: "docker".into(),
            source: oci.trim_start_matches("oci://").into(),
            current: "0.4.0".into(),
            updates: vec!["minor 0.5.0".into()],
        },
        Dep {
            manager: "flux".into(),
            ..helm(
                "flux/apps/podinfo.yaml",
                "podinfo",
                "podinfo",
                "6.0.0",
                &["minor 6.1.0"],
            )
        },
    ];
    expected.sort();
    assert_eq!(found, expected);
    assert_eq!(allowed_only(&warnings), Vec::<String>::new());
}
