//! CRD ownership between the CRD phase and Helm (docs/design.md#lints,
//! docs/design.md#release-file).

use super::locate::locate;
use super::{Hit, get, is_true};
use crate::plan::Plan;
use crate::release::CrdPolicy;

pub(super) const CRD_VALUES_INVERTED: &str = "crd-values-inverted";

/// The chart switches that make CRDs chart templates: cert-manager
/// `crds.enabled`, external-secrets and flux-operator `installCRDs`, and the
/// common `crds.install`/`crds.create`.
const CRD_SWITCHES: &[&[&str]] = &[
    &["crds", "enabled"],
    &["crds", "install"],
    &["crds", "create"],
    &["installCRDs"],
];

/// A `crds: bootstrap` release whose install values switch a CRD template
/// on: Helm would render those CRDs (skip-crds only skips `crds/`) and own
/// what the CRD phase applied.
pub(super) fn crd_values_inverted(plan: &Plan) -> Vec<Hit> {
    let mut hits = Vec::new();
    for release in plan.installed().filter(|r| r.crds == CrdPolicy::Bootstrap) {
        for path in CRD_SWITCHES {
            if !is_true(get(release.values(), path)) {
                continue;
            }
            let key = path.join(".");
            hits.push(Hit {
                release: Some(release.id.clone()),
                at: Some(locate(release, path)),
                message: format!(
                    "`{key}: true` is in the install values of a `crds: bootstrap` release: the CRD phase applies its CRDs, and the install would render them again as chart templates (`--skip-crds` only skips the chart's crds/ directory), so Helm would try to own CRDs bootstrap applied"
                ),
                fix: format!(
                    "set `{key}: false` in `values` and `{key}: true` in `crdValues` (the CRD-phase render only)"
                ),
            });
        }
    }
    hits
}
