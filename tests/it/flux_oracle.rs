//! Differential tests of the GitOps scan against Flux's own code: the Flux
//! oracle (tools/realenv/flux-oracle, docs/design.md#flux-oracle) builds each
//! tree with fluxcd/pkg, kustomize and source-controller's archive, and what
//! `check` resolves (`check -v --output json`'s `builds`) must be the same:
//! every build, its objects (apiVersion, kind, namespace, name) and its
//! HelmReleases (release identity, `spec.values` with their types,
//! `valuesFrom`, and, when the oracle applied the build, the values
//! helm-controller composes from them).
//!
//! A build Flux fails must be one `check` fails or warns about; a build only
//! `check` does must come from a Kustomization that only a build Flux fails
//! applies; a build only Flux does must come from a Kustomization whose
//! apply `check` finds refused (the oracle builds, it does not apply); a build whose inputs only the cluster has (a ResourceSet input
//! provider other than Static) must be one `check` warns about. Trees:
//! every fixture under tests/fixtures/flux, the examples, the public trees
//! of ../shared/corpus, and random trees ([`generated`]: proptest, a fixed
//! seed, 1,000 trees; `FLUX_ORACLE_CASES=N FLUX_ORACLE_SEED=S` for another
//! run). One oracle process answers every tree ([`oracle`]). The generated
//! trees and the fixtures are also applied to a real API server with
//! Flux's CRDs ([`apply`]): `check`'s `flux-apply-fails` must refuse the
//! builds it refuses, at the same stage, with one of its errors.
//!
//! Without the oracle binary (`tools/realenv/build flux-oracle`; `.ci/run`
//! builds it), or flux-operator's CLI for the tests that build ResourceSets
//! (`tools/realenv/build flux-operator`), the tier is reported as ignored,
//! never as passed.

#![cfg_attr(not(all(flux_oracle, flux_operator)), allow(dead_code, unused_imports))]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bootstrap::flux::{Severity, builds_json, tree};
use serde_json::Value;

mod apply;
mod generated;
mod oracle;

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A build's key: who does it.
fn key(build: &Value) -> String {
    build["by"].as_str().unwrap_or("(entrypoint)").to_string()
}

/// A Kustomization or a ResourceSet: an object that starts builds.
fn is_builder(o: &Value) -> bool {
    o["kind"] == "Kustomization" || o["kind"] == "ResourceSet"
}

/// A builder's key as a build's `by` names it: `Kind/namespace/name`.
fn builder_key(o: &Value) -> String {
    format!(
        "{}/{}/{}",
        o["kind"].as_str().unwrap_or_default(),
        o["namespace"].as_str().unwrap_or_default(),
        o["name"].as_str().unwrap_or_default()
    )
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
/// Flux's code does (with `kubeconfig`, its apply to that API server too:
/// [`apply`]); empty when they agree.
fn divergences(
    root: &Path,
    entry: &str,
    kubeconfig: Option<&Path>,
) -> Result<(usize, Vec<String>), String> {
    let flux = oracle::builds(root, entry, kubeconfig)?;
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
    // Which build applies each Kustomization and ResourceSet (by key), in
    // check's walk.
    let mut applier: BTreeMap<String, String> = BTreeMap::new();
    for b in &ours {
        for o in b["objects"].as_array().into_iter().flatten() {
            if is_builder(o) {
                let k = builder_key(o);
                applier.entry(k).or_insert_with(|| key(b));
            }
        }
    }
    // The Kustomizations and ResourceSets a refused staged apply leaves out
    // (`notApplied`, docs/design.md#tree-resolution).
    let mut refused: std::collections::BTreeSet<String> = ours
        .iter()
        .flat_map(|b| b["notApplied"].as_array().cloned().unwrap_or_default())
        .filter(is_builder)
        .map(|o| builder_key(&o))
        .chain(flux.iter().flat_map(apply::skipped_builders))
        .collect();
    // And, transitively, a Kustomization or ResourceSet no build reachable
    // from the entrypoint applies (in Flux's builds; none of check's applies
    // it): a nested Kustomization that only a refused one creates, or a
    // cycle of them.
    let applied_in = |b: &Value| -> Vec<String> {
        b["objects"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|o| is_builder(o))
            .map(builder_key)
            .collect()
    };
    let mut reached: std::collections::BTreeSet<String> = theirs
        .keys()
        .filter(|k| !k.contains('/'))
        .cloned()
        .collect();
    loop {
        let more: Vec<String> = reached
            .iter()
            .filter_map(|k| theirs.get(k))
            .flat_map(|b| applied_in(b))
            .filter(|k| !refused.contains(k) && !reached.contains(k))
            .collect();
        if more.is_empty() {
            break;
        }
        reached.extend(more);
    }
    let unreached: Vec<String> = theirs
        .keys()
        .filter(|k| !reached.contains(*k) && !applier.contains_key(*k))
        .cloned()
        .collect();
    refused.extend(unreached);
    // A build Flux fails, or one the oracle does not do (ResourceSets).
    let flux_failed = |k: &str| {
        theirs
            .get(k)
            .is_some_and(|b| b["error"].is_string() || b["unsupported"].is_string())
    };
    for (k, theirs_b) in &theirs {
        if let Some(why) = theirs_b["unsupported"].as_str() {
            // Inputs only the cluster has: `check` must say it cannot tell.
            if oracle::has_flux_operator() && !warned {
                out.push(format!(
                    "{k}: Flux's result needs the cluster ({why}); check does not warn"
                ));
            }
            continue;
        }
        let Some(mine_b) = mine.get(k) else {
            // The oracle builds without applying: a Kustomization or
            // ResourceSet whose apply check finds refused is never created.
            if !refused.contains(k) {
                out.push(format!("{k}: Flux builds it, check does not"));
            }
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
        out.extend(apply::differs(k, mine_b, theirs_b));
        // What Flux's apply skips is never in the cluster; check leaves it
        // out of the build.
        let skipped = apply::skipped(theirs_b);
        let (a, mut b) = (
            apply::keys(&mine_b["objects"]),
            apply::keys(&theirs_b["objects"]),
        );
        b.retain(|o| !skipped.contains(o));
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
            v.retain(|h| !apply::skips_release(theirs_b, h));
            // Without the apply step the oracle cannot tell which
            // ConfigMaps and Secrets reach the cluster (check leaves out a
            // refused stage's): the composed values are compared only
            // when it applied.
            if theirs_b["apply"].is_null() {
                for h in &mut v {
                    if let Some(h) = h.as_object_mut() {
                        h.remove("composed");
                        h.remove("composeError");
                    }
                }
            }
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
const ANNOUNCED: &[(&str, &str)] = &[
    (
        "flux-apply-excluded",
        "the oracle builds as kustomize-controller does but does not apply: the objects its apply skips (fluxcd/pkg ssa `shouldSkipApply`: `reconcile: disabled`, `ssa: Ignore`, after `spec.commonMetadata`) are in the oracle's builds and not in check's",
    ),
    (
        "resourceset-control-action",
        "a ResourceSet `<< if >>` action is not modelled (check warns, naming it and its line); flux-operator renders what it guards",
    ),
];

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
    assert_agree_applied(trees, None);
}

/// [`assert_agree`], each build also applied to the API server of
/// `kubeconfig` ([`apply`]).
fn assert_agree_applied(trees: &[(PathBuf, String)], kubeconfig: Option<&Path>) {
    let mut report = Vec::new();
    let mut compared = 0;
    for (root, entry) in trees {
        match divergences(root, entry, kubeconfig) {
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

/// Every fixture's builds applied to a real API server with Flux's CRDs
/// ([`apply`]): `check`'s `flux-apply-fails` refuses the builds it refuses,
/// with its errors (the `apply-*` fixtures' messages are the API
/// server's). `flux-apply-excluded` is compared too: the apply step knows
/// what Flux's apply skips.
#[test]
#[cfg_attr(
    not(all(flux_oracle, realenv)),
    ignore = "needs the Flux oracle and the real test environment: tools/realenv/build flux-oracle kube kwok helm3 helm4 flux-crds (.ci/run builds them)"
)]
fn every_fixture_applies_as_the_api_server_does() {
    let _slot = testkit::realenv::one_at_a_time();
    let plane = apply::start();
    let trees: Vec<(PathBuf, String)> = fixture_dirs()
        .into_iter()
        .filter(|d| {
            !ANNOUNCED.iter().any(|(name, _)| {
                *name != "flux-apply-excluded" && d.file_name().is_some_and(|n| n == *name)
            })
        })
        .map(|d| (d, "clusters/test".to_string()))
        .collect();
    assert_agree_applied(&trees, Some(&plane.kubeconfig));
}

/// The fixtures with ResourceSets, which the oracle builds with
/// flux-operator's CLI (without it, `every_fixture_agrees_with_flux` cannot
/// compare their ResourceSet builds).
#[test]
#[cfg_attr(
    not(all(flux_oracle, flux_operator)),
    ignore = "needs the Flux oracle and flux-operator's CLI: tools/realenv/build flux-oracle flux-operator (.ci/run builds them)"
)]
fn resource_sets_agree_with_flux_operator() {
    let trees: Vec<(PathBuf, String)> = [
        "resourceset",
        "resourceset-slugify",
        "resourceset-slugify-unicode",
    ]
    .iter()
    .map(|d| {
        (
            manifest().join("tests/fixtures/flux").join(d),
            "clusters/test".to_string(),
        )
    })
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

#[test]
#[cfg_attr(
    not(all(flux_oracle, flux_operator, realenv)),
    ignore = "needs the Flux oracle, flux-operator's CLI and the real test environment: tools/realenv/build flux-oracle flux-operator kube kwok helm3 helm4 flux-crds (.ci/run builds them)"
)]
fn generated_trees_agree_with_flux() {
    let _slot = testkit::realenv::one_at_a_time();
    let plane = apply::start();
    generated::run(|root| {
        divergences(root, "clusters/test", Some(&plane.kubeconfig)).map(|(_, found)| found)
    });
}
