//! kustomize-controller's staged server-side apply (fluxcd/pkg `ssa`
//! v0.76.2 `ResourceManager.ApplyAllStaged`, the same in flux-operator's
//! ResourceSet controller): the objects of a build go in stages, cluster
//! definitions (CRDs, `v1` Namespaces, ClusterRoles), then kinds named
//! `…Class`, then the custom stage kinds (none for kustomize-controller by
//! default, `rbac.authorization.k8s.io/Role` for flux-operator), then the
//! rest. `ApplyAll` dry-runs every object of a stage before it applies any:
//! one refused object and nothing of that stage is applied, and
//! `ApplyAllStaged` returns at once, so no later stage is either; the
//! stages before it stay applied. Which refusal the Kustomization reports
//! when several objects fail is the first the concurrent dry-runs return;
//! `check` names the first in `ssa`'s apply order (`sort.go`).

use std::cmp::Ordering;

use super::ns_display;
use crate::flux::BootstrapRelease;
use crate::flux::findings::{APPLY_FAILS, Finding, Severity, helm_release_conflicts};
use crate::flux::object::Object;
use crate::flux::{resourceset, schema};

/// The stages, in order.
pub const STAGES: [&str; 4] = [
    "cluster definitions (CRDs, Namespaces, ClusterRoles)",
    "class definitions",
    "custom stage",
    "other objects",
];

/// flux-operator's custom stage (its ResourceSet controller's
/// `CustomStageKinds`).
pub(super) const RESOURCE_SET_CUSTOM: &[(&str, &str)] = &[("rbac.authorization.k8s.io", "Role")];

/// A stage the API server refuses: what is not applied, and why.
#[derive(Debug, Clone)]
pub struct Refused {
    /// Index in [`STAGES`].
    pub stage: usize,
    /// The object whose dry-run fails and the error as Flux prints it.
    pub failing: Object,
    pub reason: String,
    /// How many objects of the stage fail their dry-run.
    pub failures: usize,
    /// The objects of that stage and of every later one.
    pub not_applied: Vec<Object>,
}

fn stage_of(obj: &Object, custom: &[(&str, &str)]) -> usize {
    let kind = obj.kind.to_lowercase();
    let api = obj.api_version.as_str();
    let definition = (kind == "customresourcedefinition"
        && api.starts_with("apiextensions.k8s.io/"))
        || (kind == "namespace" && api == "v1")
        || (kind == "clusterrole" && api.starts_with("rbac.authorization.k8s.io/"));
    if definition {
        0
    } else if obj.kind.ends_with("Class") {
        1
    } else if custom
        .iter()
        .any(|(g, k)| *g == obj.group() && *k == obj.kind)
    {
        2
    } else {
        3
    }
}

/// `ssa.ReconcileOrder`: kinds applied first and last.
const FIRST: [&str; 23] = [
    "CustomResourceDefinition",
    "Namespace",
    "ClusterRole",
    "ClusterClass",
    "RuntimeClass",
    "PriorityClass",
    "StorageClass",
    "VolumeSnapshotClass",
    "IngressClass",
    "GatewayClass",
    "ClusterRoleBinding",
    "ResourceQuota",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ConfigMap",
    "Secret",
    "Service",
    "LimitRange",
    "Deployment",
    "StatefulSet",
    "CronJob",
    "PodDisruptionBudget",
];
const LAST: [&str; 2] = [
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

fn kind_index(kind: &str) -> i64 {
    if let Some(i) = FIRST.iter().position(|k| *k == kind) {
        return i as i64 - FIRST.len() as i64;
    }
    LAST.iter()
        .position(|k| *k == kind)
        .map_or(0, |i| i as i64 + 1)
}

/// `ssa`'s `SortableUnstructureds` order.
fn apply_order(a: &Object, b: &Object) -> Ordering {
    (kind_index(&a.kind), a.group(), &a.kind)
        .cmp(&(kind_index(&b.kind), b.group(), &b.kind))
        .then_with(|| {
            a.namespace
                .as_deref()
                .unwrap_or_default()
                .cmp(b.namespace.as_deref().unwrap_or_default())
        })
        .then_with(|| a.name.cmp(&b.name))
}

/// The objects the staged apply puts in the cluster (in the build's
/// order), and the stage it stops at, if any.
pub(super) fn staged_apply(
    objects: Vec<Object>,
    custom: &[(&str, &str)],
) -> (Vec<Object>, Option<Refused>) {
    let stages: Vec<usize> = objects.iter().map(|o| stage_of(o, custom)).collect();
    for stage in 0..STAGES.len() {
        let mut members: Vec<&Object> = objects
            .iter()
            .zip(&stages)
            .filter(|(_, s)| **s == stage)
            .map(|(o, _)| o)
            .collect();
        members.sort_by(|a, b| apply_order(a, b));
        let failing: Vec<(&Object, String)> = members
            .iter()
            .filter_map(|o| schema::dry_run_error(o).map(|e| (*o, e)))
            .collect();
        let Some((first, reason)) = failing.first().cloned() else {
            continue;
        };
        let refused = Refused {
            stage,
            failing: first.clone(),
            reason,
            failures: failing.len(),
            not_applied: Vec::new(),
        };
        let (applied, not_applied): (Vec<_>, Vec<_>) = objects
            .into_iter()
            .zip(stages)
            .partition(|(_, s)| *s < stage);
        let refused = Refused {
            not_applied: not_applied.into_iter().map(|(o, _)| o).collect(),
            ..refused
        };
        return (applied.into_iter().map(|(o, _)| o).collect(), Some(refused));
    }
    (objects, None)
}

/// A build whose apply the API server refuses ([`staged_apply`]).
#[derive(Debug, Clone)]
pub struct Refusal {
    /// Who applies it: `Kustomization/namespace/name`,
    /// `ResourceSet/namespace/name`, or `None` for the entrypoint's build.
    pub by: Option<String>,
    /// The build's directory, relative to the root (the ResourceSet's file).
    pub path: String,
    pub refused: Refused,
}

/// One finding per build whose staged apply the API server refuses
/// (docs/design.md#tree-resolution): Flux applies nothing of that stage nor
/// of a later one, so the conflicts of those objects are not created and
/// are not reported as such. An error when, once the refusal is fixed, one
/// of its HelmReleases would manage or duplicate a bootstrap release (a
/// copy applied before the refusal is still in the cluster and reconciled);
/// a warning otherwise.
pub fn apply_failures(
    refusals: &[Refusal],
    objects: &[Object],
    releases: &[BootstrapRelease],
) -> Vec<Finding> {
    let mut out = Vec::new();
    for refusal in refusals {
        let r = &refusal.refused;
        let mut scope: Vec<Object> = r.not_applied.clone();
        scope.extend(objects.iter().cloned());
        let refused_ids: Vec<_> = r.not_applied.iter().map(Object::reference).collect();
        let conflicts: Vec<Finding> = helm_release_conflicts(&scope, releases)
            .into_iter()
            .filter(|f| f.object.as_ref().is_some_and(|o| refused_ids.contains(o)))
            .collect();
        let who = match &refusal.by {
            Some(by) => match by.split_once('/') {
                Some((kind, rest)) => format!("{kind} {rest}"),
                None => by.clone(),
            },
            None => format!(
                "the Kustomization that reconciles the entrypoint `{}`",
                refusal.path
            ),
        };
        let followed: Vec<String> = r
            .not_applied
            .iter()
            .filter(|o| o.is_flux("kustomize", "Kustomization") || resourceset::is_resource_set(o))
            .map(|o| {
                format!(
                    "{} {}/{}",
                    o.kind,
                    ns_display(o.namespace.as_deref()),
                    o.name
                )
            })
            .collect();
        let others = match r.failures {
            1 => String::new(),
            n => format!(
                " ({n} objects of the stage fail their dry-run; Flux reports whichever it meets first)"
            ),
        };
        let mut message = format!(
            "{who} fails: its server-side apply stops at the stage of {}, `{}`{others}; nothing of that stage nor of a later one is applied ({}, from {}), so it is not Ready and what depends on it waits",
            STAGES[r.stage],
            r.reason,
            match r.not_applied.len() {
                1 => "1 object".to_string(),
                n => format!("{n} objects"),
            },
            r.failing.file,
        );
        if !followed.is_empty() {
            message += &format!(
                "; the builds of {} are not done, so they are not checked",
                followed.join(", ")
            );
        }
        let mut severity = Severity::Warning;
        let mut release = None;
        if let Some(first) = conflicts.first() {
            severity = Severity::Error;
            release.clone_from(&first.release);
            let each: Vec<&str> = conflicts.iter().map(|c| c.message.as_str()).collect();
            message += &format!(
                ". Once that is fixed: {} (and a copy Flux applied before this failure is still in the cluster, which helm-controller still reconciles)",
                each.join("; ")
            );
        }
        out.push(Finding::tree(
            severity,
            APPLY_FAILS,
            release,
            Some(r.failing.reference()),
            r.failing.chain.clone(),
            message,
        ));
    }
    out
}
