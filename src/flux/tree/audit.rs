//! Flux fields the scan does not follow: each is a warning naming it, never
//! a silent pass.

use serde_json::Value;

use super::{Walker, ns_display};
use crate::flux::findings::NOT_MODELLED;
use crate::flux::object::Object;

/// The `spec` fields of a Flux Kustomization (kustomize-controller
/// `api/v1` `KustomizationSpec`) the scan knows: modelled, or changing no
/// object's existence, kind, name or namespace.
const KUSTOMIZATION_SPEC: &[&str] = &[
    "commonMetadata",
    "components",
    "decryption",
    "deletionPolicy",
    "dependsOn",
    "force",
    "healthCheckExprs",
    "healthChecks",
    "ignoreMissingComponents",
    "images",
    "interval",
    "kubeConfig",
    "namePrefix",
    "nameSuffix",
    "patches",
    "patchesJson6902",
    "patchesStrategicMerge",
    "path",
    "postBuild",
    "prune",
    "retryInterval",
    "serviceAccountName",
    "sourceRef",
    "suspend",
    "targetNamespace",
    "timeout",
    "wait",
];

impl Walker {
    /// Flux fields that change what a Kustomization or HelmRelease does in
    /// this cluster and that the scan does not follow: each is a warning
    /// naming it, never a silent pass.
    pub(super) fn audit(&mut self, obj: &Object) {
        let spec = obj.body.get("spec").and_then(Value::as_object);
        let what = format!(
            "{} {}/{} in {}",
            obj.kind,
            ns_display(obj.namespace.as_deref()),
            obj.name,
            obj.file
        );
        let mut notes = Vec::new();
        if obj.is_flux("kustomize", "Kustomization") {
            for key in spec.into_iter().flat_map(|s| s.keys()) {
                if !KUSTOMIZATION_SPEC.contains(&key.as_str()) {
                    notes.push(format!(
                        "{what} sets `spec.{key}`, a field this scan does not know; what it changes is not modelled"
                    ));
                }
            }
        }
        if obj.is_flux("kustomize", "Kustomization") || obj.is_flux("helm", "HelmRelease") {
            let set = |k: &str| spec.and_then(|s| s.get(k)).is_some_and(|v| !v.is_null());
            if set("kubeConfig") {
                notes.push(format!(
                    "{what} sets `spec.kubeConfig`: it acts on another cluster, which this scan does not tell apart; it is checked as if it acted on this one"
                ));
            }
            if spec.and_then(|s| s.get("suspend")) == Some(&Value::Bool(true)) {
                notes.push(format!(
                    "{what} is suspended (`spec.suspend: true`): Flux does not reconcile it until it is resumed; it is checked as if it were"
                ));
            }
        }
        for message in notes {
            self.warn(NOT_MODELLED, Some(obj.reference()), &obj.chain, message);
        }
    }
}
