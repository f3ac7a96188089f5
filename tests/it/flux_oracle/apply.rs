//! The apply step (docs/design.md#flux-oracle): a real kube-apiserver
//! (testkit's real environment, etcd and kube-apiserver alone) with the
//! Flux CRDs the real tier installs, to which the oracle applies every
//! build it makes as kustomize-controller does (fluxcd/pkg `ssa`'s staged
//! apply through a dry-run client, tools/realenv/flux-oracle apply.go).
//! `check`'s staged apply (`flux-apply-fails`) must refuse the builds the
//! API server refuses, at the same stage, with one of its errors.

use serde_json::Value;
use testkit::realenv::{self, ControlPlane};

use super::object_key;

/// flux-operator's CRDs (ResourceSet, its input provider), which the
/// flux-crds tool copies beside the controllers'.
const OPERATOR_CRDS: &str = "github.com/controlplaneio-fluxcd/flux-operator/config/crd/bases";

/// An API server with the Flux CRDs (and flux-operator's), ready.
pub fn start() -> ControlPlane {
    let plane = ControlPlane::start_api_server("admin@flux-oracle");
    for dir in bootstrap::flux::schema::CRD_DIRS
        .iter()
        .copied()
        .chain([OPERATOR_CRDS])
    {
        plane.api().install_crds(&realenv::share("flux-crds", dir));
    }
    plane
}

/// The sorted keys of a list of objects (`object_key`).
pub fn keys(list: &Value) -> Vec<String> {
    let mut v: Vec<String> = list
        .as_array()
        .into_iter()
        .flatten()
        .map(object_key)
        .collect();
    v.sort();
    v
}

/// The objects of a Flux build its apply skips (its exclusion selector),
/// which `check` leaves out of the build.
pub fn skipped(theirs: &Value) -> Vec<String> {
    keys(&theirs["apply"]["skipped"])
}

/// The Kustomizations and ResourceSets Flux's apply of a build skips
/// (`Kind/namespace/name`): never created, their builds are never done.
pub fn skipped_builders(theirs: &Value) -> Vec<String> {
    theirs["apply"]["skipped"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| super::is_builder(o))
        .map(super::builder_key)
        .collect()
}

/// Whether Flux's apply of the build skips the HelmRelease `h` (one of
/// the build's `helmReleases`).
pub fn skips_release(theirs: &Value, h: &Value) -> bool {
    theirs["apply"]["skipped"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|o| {
            o["kind"] == "HelmRelease" && o["namespace"] == h["namespace"] && o["name"] == h["name"]
        })
}

/// How `check`'s apply of the build `k` differs from the API server's, if
/// the oracle applied it.
pub fn differs(k: &str, mine: &Value, theirs: &Value) -> Option<String> {
    let real = &theirs["apply"];
    if real.is_null() || real["unknown"].is_string() {
        return None;
    }
    let errors: Vec<&str> = real["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    match (mine["applyError"].as_str(), real["stage"].as_u64()) {
        (None, None) => None,
        (Some(ours), None) => Some(format!(
            "{k}: check reports its apply refused (`{ours}`); the API server applies every stage"
        )),
        (None, Some(stage)) => Some(format!(
            "{k}: the API server refuses stage {stage} of its apply ({errors:?}); check reports no flux-apply-fails"
        )),
        (Some(ours), Some(stage)) => {
            let (a, b) = (keys(&mine["notApplied"]), keys(&real["notApplied"]));
            if a != b {
                return Some(format!(
                    "{k}: the apply stops at another stage; not applied by check: {a:?}; by the API server (stage {stage}): {b:?}"
                ));
            }
            let ours_n = unordered(ours);
            (!errors
                .iter()
                .any(|e| unordered(e) == ours_n || same_typed(e, ours)))
            .then(|| {
                format!(
                    "{k}: check's refusal is none of the API server's:\n  check: {ours}\n  API server: {errors:#?}"
                )
            })
        }
    }
}

/// A typed-patch error's head and its lines (`errors:` then one per line).
fn typed_lines(error: &str) -> Option<(&str, Vec<&str>)> {
    let (head, rest) = error.split_once("failed to create typed patch object")?;
    let (object, list) = rest.split_once("): ")?;
    let lines = match list.strip_prefix("errors:\n") {
        Some(list) => list.lines().map(str::trim).collect(),
        None => vec![list],
    };
    Some((&error[..head.len() + object.len()], lines))
}

/// Two typed-patch errors that structured-merge-diff may give for one
/// object: the same type errors in any order; with a field the schema does
/// not declare, its walk of that map (in Go's map order, which changes
/// from one request to the next) stops there, so the errors besides it
/// vary, and the undeclared field is what both must name.
fn same_typed(a: &str, b: &str) -> bool {
    let (Some((head_a, mut x)), Some((head_b, mut y))) = (typed_lines(a), typed_lines(b)) else {
        return false;
    };
    x.sort_unstable();
    y.sort_unstable();
    let undeclared = |v: &[&str]| -> Vec<String> {
        v.iter()
            .filter(|l| l.ends_with("field not declared in schema"))
            .map(|l| l.to_string())
            .collect()
    };
    let (ux, uy) = (undeclared(&x), undeclared(&y));
    head_a == head_b && (x == y || (!ux.is_empty() && ux == uy))
}

/// An error with its list of field errors (`is invalid: [a, b]`) sorted:
/// the API server lists a level's properties in a Go map's order, which
/// changes from one request to the next.
fn unordered(error: &str) -> String {
    let Some((head, list)) = error.split_once("is invalid: [") else {
        return error.to_string();
    };
    let list = list.strip_suffix(']').unwrap_or(list);
    // An item starts with a field path and the error's type.
    let starts = |piece: &str| {
        piece.split_once(": ").is_some_and(|(path, rest)| {
            !path.contains(' ')
                && [
                    "Invalid value",
                    "Required value",
                    "Unsupported value",
                    "Too long",
                    "Forbidden",
                ]
                .iter()
                .any(|t| rest.starts_with(t))
        })
    };
    let mut items: Vec<String> = Vec::new();
    for piece in list.split(", ") {
        match items.last_mut() {
            Some(last) if !starts(piece) => {
                last.push_str(", ");
                last.push_str(piece);
            }
            _ => items.push(piece.to_string()),
        }
    }
    items.sort();
    format!("{head}is invalid: [{}]", items.join(", "))
}
