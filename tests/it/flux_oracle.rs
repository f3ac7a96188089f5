//! Differential tests of the GitOps scan against Flux's own code: the Flux
//! oracle (tools/realenv/flux-oracle, docs/design.md#flux-oracle) builds each
//! tree with fluxcd/pkg, kustomize and source-controller's archive, and what
//! `check` resolves (`check -v --output json`'s `builds`) must be the same:
//! every build, its objects (apiVersion, kind, namespace, name) and its
//! HelmReleases (release identity, `spec.values` with their types,
//! `valuesFrom`).
//!
//! A build Flux fails must be one `check` fails or warns about; a build only
//! `check` does must come from a Kustomization that only a build Flux fails
//! applies. Trees: every fixture under tests/fixtures/flux, the examples,
//! the public trees of ../shared/corpus, and random trees (proptest, fixed
//! seed; `FLUX_ORACLE_CASES=N` for a bigger run).
//!
//! Without the oracle binary (`tools/realenv/build flux-oracle`; `.ci/run`
//! builds it) the tier is reported as ignored, never as passed.

#![cfg_attr(not(flux_oracle), allow(dead_code, unused_imports))]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use bootstrap::flux::{Severity, builds_json, tree};
use serde_json::Value;

const ORACLE: &str = "tools/realenv/.bin/flux-oracle/flux-oracle";

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The oracle's builds for `root/entry`.
fn oracle(root: &Path, entry: &str) -> Result<Vec<Value>, String> {
    let output = Command::new(manifest().join(ORACLE))
        .arg("-root")
        .arg(root)
        .arg("-entrypoint")
        .arg(entry)
        .output()
        .map_err(|e| {
            format!("cannot run the oracle ({ORACLE}; tools/realenv/build flux-oracle): {e}")
        })?;
    if !output.status.success() {
        return Err(format!(
            "the oracle failed on {}: {}",
            root.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let doc: Value = serde_json::from_slice(&output.stdout).map_err(|e| e.to_string())?;
    Ok(doc["builds"].as_array().cloned().unwrap_or_default())
}

/// A build's key: who does it.
fn key(build: &Value) -> String {
    build["by"].as_str().unwrap_or("(entrypoint)").to_string()
}

fn object_key(o: &Value) -> String {
    format!(
        "{} {} {}/{}",
        o["apiVersion"].as_str().unwrap_or_default(),
        o["kind"].as_str().unwrap_or_default(),
        o["namespace"].as_str().unwrap_or("~"),
        o["name"].as_str().unwrap_or_default()
    )
}

/// JSON equality with numbers compared as numbers (Go prints 3 and 3.0
/// alike).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// The differences between what `check` resolves for `root/entry` and what
/// Flux's code does; empty when they agree.
fn divergences(root: &Path, entry: &str) -> Result<(usize, Vec<String>), String> {
    let flux = oracle(root, entry)?;
    // As `check` runs: with kubectl on PATH for what it delegates.
    let kubectl = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file());
    let resolved = tree::resolve_with(root, Path::new(entry), kubectl.as_deref());
    let warned = resolved
        .findings
        .iter()
        .any(|f| f.severity == Severity::Warning);
    let ours = builds_json(&resolved.builds);
    let ours = ours.as_array().cloned().unwrap_or_default();
    let theirs: BTreeMap<String, &Value> = flux.iter().map(|b| (key(b), b)).collect();
    let mine: BTreeMap<String, &Value> = ours.iter().map(|b| (key(b), b)).collect();
    let mut out = Vec::new();
    let mut compared = 0;
    // Which build applies each Kustomization (by key), in check's walk.
    let mut applier: BTreeMap<String, String> = BTreeMap::new();
    for b in &ours {
        for o in b["objects"].as_array().into_iter().flatten() {
            if o["kind"] == "Kustomization" {
                let k = format!(
                    "Kustomization/{}/{}",
                    o["namespace"].as_str().unwrap_or_default(),
                    o["name"].as_str().unwrap_or_default()
                );
                applier.entry(k).or_insert_with(|| key(b));
            }
        }
    }
    // A build Flux fails, or one the oracle does not do (ResourceSets).
    let flux_failed = |k: &str| {
        theirs
            .get(k)
            .is_some_and(|b| b["error"].is_string() || b["unsupported"].is_string())
    };
    for (k, theirs_b) in &theirs {
        if theirs_b["unsupported"].is_string() {
            continue;
        }
        let Some(mine_b) = mine.get(k) else {
            out.push(format!("{k}: Flux builds it, check does not"));
            continue;
        };
        compared += 1;
        if let Some(error) = theirs_b["error"].as_str() {
            if !(mine_b["failed"] == Value::Bool(true) || warned) {
                out.push(format!(
                    "{k}: Flux fails this build ({error}); check neither fails it nor warns"
                ));
            }
            continue;
        }
        if mine_b["failed"] == Value::Bool(true) {
            out.push(format!("{k}: check fails this build, Flux applies it"));
            continue;
        }
        let objects = |b: &Value| {
            let mut v: Vec<String> = b["objects"]
                .as_array()
                .into_iter()
                .flatten()
                .map(object_key)
                .collect();
            v.sort();
            v
        };
        let (a, b) = (objects(mine_b), objects(theirs_b));
        if a != b {
            let only_check: Vec<_> = a.iter().filter(|x| !b.contains(x)).collect();
            let only_flux: Vec<_> = b.iter().filter(|x| !a.contains(x)).collect();
            out.push(format!(
                "{k}: objects differ; only check: {only_check:?}; only Flux: {only_flux:?}"
            ));
            continue;
        }
        let releases = |b: &Value| {
            let mut v: Vec<Value> = b["helmReleases"].as_array().cloned().unwrap_or_default();
            v.sort_by_key(|h| format!("{}/{}", h["namespace"], h["name"]));
            v
        };
        for (x, y) in releases(mine_b).iter().zip(releases(theirs_b).iter()) {
            if !same(x, y) {
                out.push(format!(
                    "{k}: HelmRelease differs:\n  check: {x}\n  Flux:  {y}"
                ));
            }
        }
    }
    for k in mine.keys() {
        if theirs.contains_key(k) {
            continue;
        }
        // A Kustomization only a failed (or itself extra) Flux build applies
        // never exists in the cluster.
        let mut at = k.clone();
        let mut explained = false;
        for _ in 0..64 {
            match applier.get(&at) {
                Some(parent) if flux_failed(parent) => {
                    explained = true;
                    break;
                }
                Some(parent) if !theirs.contains_key(parent) => at = parent.clone(),
                _ => break,
            }
        }
        if !explained {
            out.push(format!("{k}: check builds it, Flux does not"));
        }
    }
    Ok((compared, out))
}

/// Fixtures that `check` reports as not modelled (each with a warning
/// naming the construct), where Flux's result cannot be matched offline.
const ANNOUNCED: &[(&str, &str)] = &[];

fn fixture_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(manifest().join("tests/fixtures/flux"))
        .expect("tests/fixtures/flux")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("clusters/test").exists())
        .collect();
    dirs.sort();
    dirs
}

fn assert_agree(trees: &[(PathBuf, String)]) {
    let mut report = Vec::new();
    let mut compared = 0;
    for (root, entry) in trees {
        match divergences(root, entry) {
            Ok((n, found)) => {
                compared += n;
                report.extend(
                    found
                        .into_iter()
                        .map(|d| format!("{}: {d}", root.display())),
                );
            }
            Err(e) => report.push(e),
        }
    }
    assert!(
        report.is_empty(),
        "{} divergence(s) from Flux over {} trees ({compared} builds):\n{}",
        report.len(),
        trees.len(),
        report.join("\n")
    );
    eprintln!(
        "{} trees, {compared} builds: check agrees with Flux",
        trees.len()
    );
}

#[test]
#[cfg_attr(
    not(flux_oracle),
    ignore = "needs the Flux oracle: tools/realenv/build flux-oracle (.ci/run builds it)"
)]
fn every_fixture_agrees_with_flux() {
    let trees: Vec<(PathBuf, String)> = fixture_dirs()
        .into_iter()
        .filter(|d| {
            !ANNOUNCED
                .iter()
                .any(|(name, _)| d.file_name().is_some_and(|n| n == *name))
        })
        .map(|d| (d, "clusters/test".to_string()))
        .collect();
    assert_agree(&trees);
}

#[test]
#[cfg_attr(
    not(flux_oracle),
    ignore = "needs the Flux oracle: tools/realenv/build flux-oracle (.ci/run builds it)"
)]
fn the_examples_agree_with_flux() {
    let trees: Vec<(PathBuf, String)> = [
        "examples/handover",
        "examples/flux-dual-management/broken",
        "examples/flux-dual-management/fixed",
    ]
    .iter()
    .map(|d| (manifest().join(d), "kubernetes/clusters/infra".to_string()))
    .collect();
    assert_agree(&trees);
}

#[test]
#[cfg_attr(
    not(all(flux_oracle, shared_corpus)),
    ignore = "needs the Flux oracle (tools/realenv/build flux-oracle) and ../shared/corpus"
)]
fn the_corpus_agrees_with_flux() {
    let Some(corpus) = option_env!("BOOTSTRAP_TEST_CORPUS_DIR").map(PathBuf::from) else {
        panic!("build.rs found no corpus: set BOOTSTRAP_TEST_CORPUS or put it at ../shared/corpus");
    };
    let mut trees: Vec<(PathBuf, String)> = std::fs::read_dir(&corpus)
        .expect("the corpus directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("kubernetes/flux/cluster").is_dir())
        .map(|p| (p, "kubernetes/flux/cluster".to_string()))
        .collect();
    trees.sort();
    assert!(!trees.is_empty(), "no tree in ../shared/corpus");
    assert_agree(&trees);
}

/// Random trees over the constructs `check` models: Flux Kustomizations
/// (targetNamespace, namePrefix, postBuild with every envsubst form and
/// `substituteStrategy`, the same path reached twice), kustomizations
/// (namespace, namePrefix, patches by original or current name and by
/// set-based label selectors, generators with and without the hash and a
/// `nameReference`) or none (Flux's generated one), and HelmReleases whose
/// names and values hold substitutions.
mod generated {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    #[derive(Debug, Clone)]
    pub struct Release {
        name: &'static str,
        tier: &'static str,
        replicas: &'static str,
        values_from: bool,
    }

    #[derive(Debug, Clone)]
    pub struct Kustomize {
        namespace: Option<&'static str>,
        prefix: Option<&'static str>,
        /// Patch target: by the original name, the prefixed name, or a
        /// set-based selector.
        patch: Option<u8>,
        /// A configMapGenerator: (hash kept, nameReference configured).
        generator: Option<(bool, bool)>,
    }

    #[derive(Debug, Clone)]
    pub struct Ks {
        target_ns: Option<&'static str>,
        prefix: Option<&'static str>,
        vars: Vec<(&'static str, &'static str)>,
        always: bool,
        twice: bool,
        kustomize: Option<Kustomize>,
        releases: Vec<Release>,
    }

    fn release() -> impl Strategy<Value = Release> {
        (
            prop::sample::select(vec![
                "cilium",
                "${APP}",
                "${APP:=cilium}",
                "${APP=coredns}",
                "${MISSING:-spegel}",
                "${MISSING:+spegel}",
                "x-${APP,,}",
                "${APP^^}",
                "a${APP/i/o}",
                "${APP:0:3}",
                "${#APP}x",
                "$${APP}",
                "${APP-bad}",
                "${MISSING}",
            ]),
            prop::sample::select(vec!["core", "edge", "none"]),
            prop::sample::select(vec![
                "${N}", "${N:=1}", "\"${N}\"", "v${N}", "'${N}'", "${N}: x", "3",
            ]),
            any::<bool>(),
        )
            .prop_map(|(name, tier, replicas, values_from)| Release {
                name,
                tier,
                replicas,
                values_from,
            })
    }

    fn kustomize() -> impl Strategy<Value = Kustomize> {
        (
            prop::option::of(prop::sample::select(vec!["kube-system", "apps"])),
            prop::option::of(prop::sample::select(vec!["team-", "x-"])),
            prop::option::of(0u8..3),
            prop::option::of((any::<bool>(), any::<bool>())),
        )
            .prop_map(|(namespace, prefix, patch, generator)| Kustomize {
                namespace,
                prefix,
                patch,
                generator,
            })
    }

    fn ks() -> impl Strategy<Value = Ks> {
        (
            prop::option::of(prop::sample::select(vec![
                "kube-system",
                "flux-system",
                "${NS:=kube-system}",
            ])),
            prop::option::of(prop::sample::select(vec!["p-", "${P:=q}-"])),
            prop::collection::vec(
                (
                    prop::sample::select(vec!["APP", "N", "NS", "P"]),
                    prop::sample::select(vec![
                        "cilium", "coredns", "3", "1.10", "yes", "on", "0x10", "007", "text",
                    ]),
                ),
                0..3,
            ),
            any::<bool>(),
            prop::bool::weighted(0.2),
            prop::option::of(kustomize()),
            prop::collection::vec(release(), 1..3),
        )
            .prop_map(
                |(target_ns, prefix, vars, always, twice, kustomize, releases)| Ks {
                    target_ns,
                    prefix,
                    vars,
                    always,
                    twice,
                    kustomize,
                    releases,
                },
            )
    }

    pub fn trees() -> impl Strategy<Value = Vec<Ks>> {
        prop::collection::vec(ks(), 1..4)
    }

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    /// Writes the tree; the entrypoint is `clusters/test`.
    pub fn materialize(root: &Path, tree: &[Ks]) {
        let mut entry = String::new();
        for (i, ks) in tree.iter().enumerate() {
            let copies = if ks.twice { 2 } else { 1 };
            for copy in 0..copies {
                entry.push_str(&format!(
                    "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: app{i}-{copy}\n  namespace: flux-system\nspec:\n  interval: 1h\n  path: ./apps/app{i}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n"
                ));
                if let Some(ns) = ks.target_ns {
                    entry.push_str(&format!("  targetNamespace: \"{ns}\"\n"));
                }
                if let Some(p) = ks.prefix {
                    entry.push_str(&format!("  namePrefix: \"{p}\"\n"));
                }
                if !ks.vars.is_empty() || ks.always {
                    entry.push_str("  postBuild:\n");
                    if ks.always {
                        entry.push_str("    substituteStrategy: Always\n");
                    }
                    if !ks.vars.is_empty() {
                        entry.push_str("    substitute:\n");
                        for (k, v) in &ks.vars {
                            entry.push_str(&format!("      {k}: \"{v}\"\n"));
                        }
                    }
                }
            }
            let dir = format!("apps/app{i}");
            let mut files = Vec::new();
            for (j, r) in ks.releases.iter().enumerate() {
                let mut hr = format!(
                    "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: {}\n  namespace: kube-system\n  labels:\n    tier: {}\nspec:\n  interval: 1h\n  chart:\n    spec:\n      chart: cilium\n      sourceRef:\n        kind: HelmRepository\n        name: charts\n  values:\n    replicas: {}\n",
                    r.name, r.tier, r.replicas
                );
                if r.values_from {
                    hr.push_str("  valuesFrom:\n    - kind: ConfigMap\n      name: values\n");
                }
                write(root, &format!("{dir}/hr{j}.yaml"), &hr);
                files.push(format!("hr{j}.yaml"));
            }
            if let Some(k) = &ks.kustomize {
                let mut text = String::from(
                    "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n",
                );
                for f in &files {
                    text.push_str(&format!("  - {f}\n"));
                }
                if let Some(ns) = k.namespace {
                    text.push_str(&format!("namespace: {ns}\n"));
                }
                if let Some(p) = k.prefix {
                    text.push_str(&format!("namePrefix: {p}\n"));
                }
                if let Some(patch) = k.patch {
                    let target = match patch {
                        0 => "kind: HelmRelease\n      name: cilium".to_string(),
                        1 => format!(
                            "kind: HelmRelease\n      name: {}cilium",
                            k.prefix.unwrap_or("")
                        ),
                        _ => "kind: HelmRelease\n      labelSelector: tier in (core,edge)"
                            .to_string(),
                    };
                    text.push_str(&format!(
                        "patches:\n  - target:\n      {target}\n    patch: |\n      - op: add\n        path: /spec/releaseName\n        value: patched\n"
                    ));
                }
                if let Some((hash, nameref)) = k.generator {
                    text.push_str("configMapGenerator:\n  - name: values\n    literals:\n      - values.yaml=a\n");
                    if !hash {
                        text.push_str("    options:\n      disableNameSuffixHash: true\n");
                    }
                    if nameref {
                        text.push_str("configurations:\n  - kustomizeconfig.yaml\n");
                        write(
                            root,
                            &format!("{dir}/kustomizeconfig.yaml"),
                            "nameReference:\n  - kind: ConfigMap\n    version: v1\n    fieldSpecs:\n      - path: spec/valuesFrom/name\n        kind: HelmRelease\n",
                        );
                    }
                }
                write(root, &format!("{dir}/kustomization.yaml"), &text);
            }
        }
        write(root, "clusters/test/kustomizations.yaml", &entry);
    }

    /// The number of trees: `FLUX_ORACLE_CASES`, else what CI runs.
    pub fn cases() -> u32 {
        std::env::var("FLUX_ORACLE_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(CI_CASES)
    }

    pub const CI_CASES: u32 = 40;

    pub fn run() {
        let config = Config {
            cases: cases(),
            failure_persistence: None,
            max_shrink_iters: 256,
            ..Config::default()
        };
        // A fixed seed: CI compares the same trees every run.
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]);
        let mut runner = TestRunner::new_with_rng(config, rng);
        let result = runner.run(&trees(), |tree| {
            let dir = tempfile::tempdir().expect("a temporary directory");
            materialize(dir.path(), &tree);
            let (_, found) = divergences(dir.path(), "clusters/test")
                .map_err(proptest::test_runner::TestCaseError::fail)?;
            prop_assert!(found.is_empty(), "{}", found.join("\n"));
            Ok(())
        });
        if let Err(e) = result {
            panic!("check diverges from Flux on a generated tree (shrunk): {e}");
        }
        eprintln!("{} generated trees: check agrees with Flux", cases());
    }
}

#[test]
#[cfg_attr(
    not(flux_oracle),
    ignore = "needs the Flux oracle: tools/realenv/build flux-oracle (.ci/run builds it)"
)]
fn generated_trees_agree_with_flux() {
    generated::run();
}
