//! What kustomize-controller does between a build and the cluster
//! (kustomize-controller v1.9.5 `internal/controller/kustomization_controller.go`
//! `apply`, fluxcd/pkg `ssa` v0.76.2): the Kustomization's
//! `spec.commonMetadata` is set on every object (`ssa/utils`
//! `SetCommonMetadata`: metadata labels and annotations only, after the
//! post-build substitution), then every object whose labels or annotations
//! hold `kustomize.toolkit.fluxcd.io/reconcile: disabled` or
//! `kustomize.toolkit.fluxcd.io/ssa: Ignore` (values compared ignoring
//! case, `utils.AnyInMetadata` over the apply's `ExclusionSelector`) is
//! skipped (`ResourceManager.shouldSkipApply`): never created, never
//! updated. A skipped Kustomization starts no build, and a skipped
//! HelmRelease is not one Flux puts in the cluster.

use serde_json::{Map, Value};

use super::{Walker, ns_display};
use crate::flux::findings::APPLY_SKIPPED;
use crate::flux::object::Object;

/// kustomize-controller's apply `ExclusionSelector`.
pub(super) const EXCLUSIONS: [(&str, &str); 2] = [
    ("kustomize.toolkit.fluxcd.io/reconcile", "disabled"),
    ("kustomize.toolkit.fluxcd.io/ssa", "Ignore"),
];

/// `ssa/utils.SetCommonMetadata`: `spec.commonMetadata` of the Flux
/// Kustomization `ks` into every object's metadata.
pub(super) fn set_common_metadata(ks: &Object, objects: &mut [Object]) {
    let Some(common) = ks.body.pointer("/spec/commonMetadata") else {
        return;
    };
    for key in ["labels", "annotations"] {
        let Some(pairs) = common.get(key).and_then(Value::as_object) else {
            continue;
        };
        if pairs.is_empty() {
            continue;
        }
        for obj in objects.iter_mut() {
            let Some(meta) = obj.body.get_mut("metadata").and_then(Value::as_object_mut) else {
                continue;
            };
            let entry = meta.entry(key).or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            if let Some(map) = entry.as_object_mut() {
                for (k, v) in pairs {
                    map.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

/// The exclusion an object's labels or annotations hold, if any
/// (`utils.AnyInMetadata`: a non-empty value equal ignoring case).
pub(super) fn exclusion(body: &Value) -> Option<(&'static str, &'static str)> {
    EXCLUSIONS.into_iter().find(|(key, value)| {
        ["/metadata/labels", "/metadata/annotations"]
            .iter()
            .any(|p| {
                body.pointer(p)
                    .and_then(|m| m.get(*key))
                    .and_then(Value::as_str)
                    .is_some_and(|v| !v.is_empty() && v.eq_ignore_ascii_case(value))
            })
    })
}

impl Walker {
    /// Removes the objects kustomize-controller skips from what the build
    /// applies; a skipped Kustomization or HelmRelease is a warning
    /// naming it (a copy already in the cluster is left as it is).
    pub(super) fn skip_excluded(&mut self, objects: &mut Vec<Object>) {
        let mut kept = Vec::with_capacity(objects.len());
        for obj in objects.drain(..) {
            let Some((key, value)) = exclusion(&obj.body) else {
                kept.push(obj);
                continue;
            };
            let flux =
                obj.is_flux("kustomize", "Kustomization") || obj.is_flux("helm", "HelmRelease");
            if !flux {
                continue;
            }
            let then = if obj.kind == "HelmRelease" {
                "so Flux does not manage its Helm release from this tree; a copy applied before is left in the cluster as it is, and helm-controller still reconciles that one"
            } else {
                "so the build it would start is not done; a copy applied before is left in the cluster as it is, and kustomize-controller still reconciles that one"
            };
            let message = format!(
                "{} {}/{} in {} is marked `{key}: {value}`: kustomize-controller never applies it (neither creates nor updates it), {then}",
                obj.kind,
                ns_display(obj.namespace.as_deref()),
                obj.name,
                obj.file,
            );
            self.warn(APPLY_SKIPPED, Some(obj.reference()), &obj.chain, message);
        }
        *objects = kept;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn exclusions_are_labels_or_annotations_with_values_ignoring_case() {
        let annotated = |k: &str, v: &str| json!({"metadata": {"annotations": {k: v}}});
        assert_eq!(
            exclusion(&annotated("kustomize.toolkit.fluxcd.io/ssa", "ignore")),
            Some(("kustomize.toolkit.fluxcd.io/ssa", "Ignore"))
        );
        assert!(
            exclusion(&annotated(
                "kustomize.toolkit.fluxcd.io/ssa",
                "IfNotPresent"
            ))
            .is_none()
        );
        assert!(
            exclusion(&annotated(
                "kustomize.toolkit.fluxcd.io/reconcile",
                "enabled"
            ))
            .is_none()
        );
        let labelled =
            json!({"metadata": {"labels": {"kustomize.toolkit.fluxcd.io/reconcile": "Disabled"}}});
        assert_eq!(
            exclusion(&labelled).map(|e| e.0),
            Some("kustomize.toolkit.fluxcd.io/reconcile")
        );
    }
}
