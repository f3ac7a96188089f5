//! helm-controller's rules for which Helm release a `HelmRelease` manages.
//!
//! Mirrors `GetReleaseName`/`GetReleaseNamespace`/`GetStorageNamespace` of
//! fluxcd/helm-controller `api/v2/helmrelease_types.go`, and `ShortenName` of
//! `internal/release/name.go`, which the controller applies to every release
//! name it hands to Helm.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::object::Object;

/// Helm's limit on release names; helm-controller shortens longer ones.
pub const MAX_RELEASE_NAME: usize = 53;
const SHORT_HASH: usize = 12;

/// The Helm release a `HelmRelease` object manages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelmReleaseIdentity {
    /// The name Helm stores the release under, already shortened.
    pub release_name: String,
    /// Where the chart's objects go (`spec.targetNamespace` or the object's namespace).
    pub release_namespace: Option<String>,
    /// Where Helm keeps the release secret (`spec.storageNamespace` or the object's namespace).
    pub storage_namespace: Option<String>,
}

/// helm-controller's `ShortenName`: names over 53 bytes become their first
/// 40 bytes, a `-`, and the first 12 hex digits of the SHA-256 of the full name.
pub fn shorten_name(name: &str) -> String {
    if name.len() <= MAX_RELEASE_NAME {
        return name.to_string();
    }
    let digest = Sha256::digest(name.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    let keep = MAX_RELEASE_NAME - (SHORT_HASH + 1);
    // Go slices bytes; release names are ASCII, but stay on a char boundary
    // so that a non-ASCII name cannot make us panic.
    let mut cut = keep;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{}", &name[..cut], &hex[..SHORT_HASH])
}

/// The release a HelmRelease named `name` in `namespace` (its effective
/// namespace after kustomize and Flux) with `spec` manages.
pub fn identity(name: &str, namespace: Option<&str>, spec: &Value) -> HelmReleaseIdentity {
    let target = non_empty(spec, "targetNamespace");
    let release_name = match (non_empty(spec, "releaseName"), target) {
        (Some(explicit), _) => explicit.to_string(),
        (None, Some(target)) => format!("{target}-{name}"),
        (None, None) => name.to_string(),
    };
    HelmReleaseIdentity {
        release_name: shorten_name(&release_name),
        release_namespace: target.or(namespace).map(str::to_string),
        storage_namespace: non_empty(spec, "storageNamespace")
            .or(namespace)
            .map(str::to_string),
    }
}

/// The chart a HelmRelease installs: `spec.chart.spec.chart`, or for a
/// `spec.chartRef` the chart of the OCIRepository/HelmChart it names, looked up
/// among the scanned objects. `None` when it cannot be known offline.
pub fn chart_name(release: &Object, objects: &[Object]) -> Option<String> {
    let spec = release.body.get("spec")?;
    if let Some(chart) = spec.pointer("/chart/spec/chart").and_then(Value::as_str) {
        return last_segment(chart);
    }
    let chart_ref = spec.get("chartRef")?;
    let kind = chart_ref.get("kind").and_then(Value::as_str)?;
    let name = chart_ref.get("name").and_then(Value::as_str)?;
    let namespace = chart_ref
        .get("namespace")
        .and_then(Value::as_str)
        .or(release.namespace.as_deref());
    let source = objects.iter().find(|o| {
        o.kind == kind
            && o.group() == "source.toolkit.fluxcd.io"
            && o.name == name
            && o.namespace.as_deref() == namespace
    })?;
    match kind {
        "OCIRepository" => {
            let url = source.body.pointer("/spec/url").and_then(Value::as_str)?;
            // A tag or digest in the URL is not part of the chart name.
            let path = url.rsplit('/').next()?;
            let path = path.split(['@', ':']).next()?;
            (!path.is_empty()).then(|| path.to_string())
        }
        "HelmChart" => source
            .body
            .pointer("/spec/chart")
            .and_then(Value::as_str)
            .and_then(last_segment),
        _ => None,
    }
}

fn non_empty<'a>(spec: &'a Value, key: &str) -> Option<&'a str> {
    spec.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// A chart from a GitRepository is a path (`./charts/cilium`); its directory
/// name is the chart name in every layout Helm accepts.
fn last_segment(chart: &str) -> Option<String> {
    chart
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .filter(|s| !s.is_empty() && *s != ".")
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn release_name_rules() {
        let id = identity("cilium", Some("kube-system"), &json!({}));
        assert_eq!(id.release_name, "cilium");
        assert_eq!(id.storage_namespace.as_deref(), Some("kube-system"));

        let id = identity(
            "cilium",
            Some("flux-system"),
            &json!({"targetNamespace": "kube-system"}),
        );
        assert_eq!(id.release_name, "kube-system-cilium");
        assert_eq!(id.release_namespace.as_deref(), Some("kube-system"));
        assert_eq!(id.storage_namespace.as_deref(), Some("flux-system"));

        let id = identity(
            "x",
            Some("flux-system"),
            &json!({"releaseName": "cilium", "targetNamespace": "kube-system",
                    "storageNamespace": "kube-system"}),
        );
        assert_eq!(id.release_name, "cilium");
        assert_eq!(id.storage_namespace.as_deref(), Some("kube-system"));
    }

    #[test]
    fn long_names_are_shortened_like_helm_controller() {
        let short = "a".repeat(53);
        assert_eq!(shorten_name(&short), short);
        // 54 characters: the first 40, a dash, 12 hex digits of SHA-256 of the whole name.
        let long = format!(
            "{}-{}",
            "some-front-appended-namespace", "release-with-a-long-name"
        );
        assert_eq!(long.len(), 54);
        let shortened = shorten_name(&long);
        assert_eq!(shortened.len(), 53);
        assert!(shortened.starts_with("some-front-appended-namespace-release-wi-"));
        let digest = Sha256::digest(long.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(&shortened[41..], &hex[..12]);
        // Never panics on multi-byte input.
        let wide = "é".repeat(40);
        assert!(shorten_name(&wide).len() <= 53);
    }
}
