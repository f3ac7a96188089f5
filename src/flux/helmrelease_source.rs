//! What a Flux HelmRelease installs, resolved offline the way helm-controller
//! resolves it (docs/design.md#from-a-flux-helmrelease): the chart and its
//! version through the HelmRelease's source, the values from `spec.valuesFrom`
//! and `spec.values`, and the Helm release it manages ([`super::helmrelease`]).
//! Used by `from:` (bootstrap installs exactly what Flux will adopt) and by
//! `check`'s handover proof (what Flux would reconcile equals what bootstrap
//! installed).
//!
//! - The chart: `spec.chart.spec` (`chart`, `version`, `sourceRef` to a
//!   HelmRepository, `type: oci` making it an OCI registry), or `spec.chartRef`
//!   to an OCIRepository (`spec.url`, `spec.ref.tag`); fluxcd/helm-controller
//!   `api/v2/helmrelease_types.go` (`HelmChartTemplateSpec`, `CrossNamespaceSourceReference`).
//!   A source's namespace defaults to the HelmRelease's.
//! - The values: [`super::values_from`] (fluxcd/pkg `chartutil/values.go`
//!   `ChartValuesFromReferences`).

use serde_json::Value;

use super::helmrelease::{HelmReleaseIdentity, identity};
use super::object::{GitObject, Object};
pub use super::values_from::{Layer, Unreadable, Unresolved, ValuesError};

/// Where a HelmRelease's chart comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChartLocation {
    /// A classic Helm repository (HelmRepository without `type: oci`).
    Repo { url: String, name: String },
    /// `oci://registry/path/chart`.
    Oci(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginChart {
    pub location: ChartLocation,
    /// As written; the caller checks it is pinned.
    pub version: String,
}

impl OriginChart {
    /// The chart's name as Helm records it.
    pub fn name(&self) -> String {
        match &self.location {
            ChartLocation::Repo { name, .. } => name.clone(),
            ChartLocation::Oci(url) => url.rsplit('/').next().unwrap_or(url).to_string(),
        }
    }
}

/// Why a HelmRelease cannot be found, or what it installs cannot be
/// resolved offline, the way helm-controller resolves it.
#[derive(Debug, thiserror::Error)]
pub enum OriginError {
    #[error(
        "`{reference}` is neither a file (…/helmrelease.yaml, relative to `flux.root`) nor namespace/name of a HelmRelease"
    )]
    NotAReference { reference: String },
    #[error(
        "no HelmRelease in `{reference}` is reached from `flux.entrypoint` (the path is relative to `flux.root`; Flux would not apply a file it does not reach either; `bootstrap check` shows what is reached)"
    )]
    FileNotReached { reference: String },
    #[error(
        "no HelmRelease `{reference}` is reached from `flux.entrypoint`; `bootstrap check` shows what is reached"
    )]
    NameNotReached { reference: String },
    /// `names`: each as namespace/name.
    #[error(
        "`{reference}` names {} HelmReleases ({}); name one as namespace/name",
        .names.len(),
        .names.join(", ")
    )]
    Ambiguous {
        reference: String,
        names: Vec<String>,
    },
    #[error(transparent)]
    Values(#[from] ValuesError),
    #[error(
        "its chart source {kind} {}/{name} is not reached from `flux.entrypoint`",
        .namespace.as_deref().unwrap_or("-")
    )]
    SourceNotReached {
        kind: String,
        namespace: Option<String>,
        name: String,
    },
    /// `template`: where the chart template is (`spec.chart.spec`, a HelmChart's spec).
    #[error("`{template}.chart` is missing")]
    NoChart { template: String },
    #[error(
        "its chart comes from a {kind} (`{chart}`); bootstrap installs charts from a HelmRepository or an OCIRepository only: give the release its own `chart:` instead of `from:`"
    )]
    ChartSourceKind { kind: String, chart: String },
    #[error("{kind} {name} ({file}) has no `spec.url`")]
    NoUrl {
        kind: &'static str,
        name: String,
        file: String,
    },
    #[error("it has neither `spec.chart` nor `spec.chartRef`")]
    NoChartOrRef,
    #[error(
        "its `spec.chartRef` names a {kind}; bootstrap follows an OCIRepository or a HelmChart only: give the release its own `chart:` instead of `from:`"
    )]
    ChartRefKind { kind: String },
    #[error(
        "OCIRepository {name} ({file}) follows the semver range `{range}`; bootstrap installs pinned versions: pin `spec.ref.tag`"
    )]
    SemverRange {
        name: String,
        file: String,
        range: String,
    },
    #[error(
        "OCIRepository {name} ({file}) has no `spec.ref.tag` (a digest alone, or the implicit `latest`); bootstrap installs pinned versions: pin `spec.ref.tag`"
    )]
    NoTag { name: String, file: String },
}

/// What a HelmRelease installs, as helm-controller would resolve it.
#[derive(Debug, Clone)]
pub struct Origin {
    pub object: GitObject,
    pub identity: HelmReleaseIdentity,
    pub chart: OriginChart,
    /// In merge order; `values` is their merge.
    pub layers: Vec<Layer>,
    pub values: Value,
    /// Non-optional `valuesFrom` entries that could not be read offline.
    pub unresolved: Vec<Unresolved>,
}

/// Whether `object` is a Flux HelmRelease.
pub fn is_helm_release(object: &Object) -> bool {
    object.is_flux("helm", "HelmRelease")
}

/// The HelmRelease `reference` names among the scanned objects: a path
/// relative to `flux.root` (`…/helmrelease.yaml`) or `namespace/name`.
pub fn find<'a>(objects: &'a [Object], reference: &str) -> Result<&'a Object, OriginError> {
    let releases = objects.iter().filter(|o| is_helm_release(o));
    let is_path = reference.ends_with(".yaml") || reference.ends_with(".yml");
    let found: Vec<&Object> = if is_path {
        let wanted = reference.trim_start_matches("./");
        releases.filter(|o| o.file == wanted).collect()
    } else {
        let Some((namespace, name)) = reference.split_once('/') else {
            return Err(OriginError::NotAReference {
                reference: reference.into(),
            });
        };
        releases
            .filter(|o| o.name == name && o.namespace.as_deref() == Some(namespace))
            .collect()
    };
    match found.as_slice() {
        [one] => Ok(one),
        [] if is_path => Err(OriginError::FileNotReached {
            reference: reference.into(),
        }),
        [] => Err(OriginError::NameNotReached {
            reference: reference.into(),
        }),
        many => Err(OriginError::Ambiguous {
            reference: reference.into(),
            names: many
                .iter()
                .map(|o| format!("{}/{}", o.namespace.as_deref().unwrap_or("-"), o.name))
                .collect(),
        }),
    }
}

/// Every HelmRelease among `objects` that manages Helm release `name` stored
/// in `namespace` (helm-controller's identity rules).
pub fn managing<'a>(objects: &'a [Object], namespace: &str, name: &str) -> Vec<&'a Object> {
    objects
        .iter()
        .filter(|o| is_helm_release(o))
        .filter(|o| {
            let spec = o.body.get("spec").cloned().unwrap_or_default();
            let id = identity(&o.name, o.namespace.as_deref(), &spec);
            id.release_name == name && id.storage_namespace.as_deref() == Some(namespace)
        })
        .collect()
}

/// Resolves what `release` (a HelmRelease among `objects`) installs.
pub fn resolve(release: &Object, objects: &[Object]) -> Result<Origin, OriginError> {
    let spec = release.body.get("spec").cloned().unwrap_or_default();
    let namespace = release.namespace.as_deref();
    let chart = chart(release, &spec, objects)?;
    let composed = super::values_from::compose(release, &spec, objects)?;
    Ok(Origin {
        object: release.reference(),
        identity: identity(&release.name, namespace, &spec),
        chart,
        layers: composed.layers,
        values: composed.values,
        unresolved: composed.unresolved,
    })
}

fn chart(release: &Object, spec: &Value, objects: &[Object]) -> Result<OriginChart, OriginError> {
    let source = |kind: &str, name: &str, ns: Option<&str>| -> Result<&Object, OriginError> {
        let ns = ns.or(release.namespace.as_deref());
        objects
            .iter()
            .find(|o| {
                o.kind == kind
                    && o.group() == "source.toolkit.fluxcd.io"
                    && o.name == name
                    && o.namespace.as_deref() == ns
            })
            .ok_or_else(|| OriginError::SourceNotReached {
                kind: kind.into(),
                namespace: ns.map(str::to_string),
                name: name.into(),
            })
    };
    let str_at = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_string);
    // A chart template (`spec.chart.spec`) or a HelmChart's spec: chart,
    // version and a source whose namespace defaults to `namespace`.
    let from_template = |template: &Value, namespace: Option<&str>, what: &str| {
        let chart = str_at(template, "/chart").ok_or_else(|| OriginError::NoChart {
            template: what.into(),
        })?;
        let version = str_at(template, "/version").unwrap_or_else(|| "*".into());
        let kind = str_at(template, "/sourceRef/kind").unwrap_or_default();
        let name = str_at(template, "/sourceRef/name").unwrap_or_default();
        let ns = str_at(template, "/sourceRef/namespace");
        if kind != "HelmRepository" {
            return Err(OriginError::ChartSourceKind { kind, chart });
        }
        let repo = source(&kind, &name, ns.as_deref().or(namespace))?;
        let url = str_at(&repo.body, "/spec/url").ok_or_else(|| OriginError::NoUrl {
            kind: "HelmRepository",
            name: name.clone(),
            file: repo.file.clone(),
        })?;
        let location = if str_at(&repo.body, "/spec/type").as_deref() == Some("oci")
            || url.starts_with("oci://")
        {
            ChartLocation::Oci(format!("{}/{chart}", url.trim_end_matches('/')))
        } else {
            ChartLocation::Repo { url, name: chart }
        };
        Ok(OriginChart { location, version })
    };
    if let Some(template) = spec.pointer("/chart/spec") {
        return from_template(template, None, "spec.chart.spec");
    }
    let Some(chart_ref) = spec.get("chartRef") else {
        return Err(OriginError::NoChartOrRef);
    };
    let kind = str_at(chart_ref, "/kind").unwrap_or_default();
    let name = str_at(chart_ref, "/name").unwrap_or_default();
    if kind == "HelmChart" {
        // A HelmChart's sourceRef is local: its own namespace.
        let chart = source(&kind, &name, str_at(chart_ref, "/namespace").as_deref())?;
        let spec = chart.body.get("spec").cloned().unwrap_or_default();
        return from_template(
            &spec,
            chart.namespace.as_deref(),
            &format!("HelmChart {name} ({}) spec", chart.file),
        );
    }
    if kind != "OCIRepository" {
        return Err(OriginError::ChartRefKind { kind });
    }
    let repo = source(&kind, &name, str_at(chart_ref, "/namespace").as_deref())?;
    let url = str_at(&repo.body, "/spec/url").ok_or_else(|| OriginError::NoUrl {
        kind: "OCIRepository",
        name: name.clone(),
        file: repo.file.clone(),
    })?;
    if let Some(range) = str_at(&repo.body, "/spec/ref/semver") {
        return Err(OriginError::SemverRange {
            name,
            file: repo.file.clone(),
            range,
        });
    }
    let Some(tag) = str_at(&repo.body, "/spec/ref/tag") else {
        return Err(OriginError::NoTag {
            name,
            file: repo.file.clone(),
        });
    };
    Ok(OriginChart {
        location: ChartLocation::Oci(url),
        version: tag,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(api_version: &str, kind: &str, name: &str, file: &str, body: Value) -> Object {
        let mut body = body;
        body["apiVersion"] = json!(api_version);
        body["kind"] = json!(kind);
        body["metadata"] = json!({"name": name, "namespace": "kube-system"});
        Object::of((api_version, kind, name), Some("kube-system"), file, body)
    }

    fn hr(spec: Value) -> Object {
        obj(
            "helm.toolkit.fluxcd.io/v2",
            "HelmRelease",
            "cilium",
            "apps/cilium/helmrelease.yaml",
            json!({ "spec": spec }),
        )
    }

    fn oci(reference: Value) -> Object {
        obj(
            "source.toolkit.fluxcd.io/v1",
            "OCIRepository",
            "cilium",
            "apps/cilium/ocirepository.yaml",
            json!({"spec": {"url": "oci://quay.io/cilium/charts/cilium", "ref": reference}}),
        )
    }

    #[test]
    fn chart_ref_to_an_oci_repository_with_a_pinned_tag() {
        let release = hr(
            json!({"chartRef": {"kind": "OCIRepository", "name": "cilium"},
                                "values": {"hubble": {"enabled": false}}}),
        );
        let objects = vec![release.clone(), oci(json!({"tag": "1.18.2"}))];
        let origin = resolve(&release, &objects).unwrap();
        assert_eq!(
            origin.chart.location,
            ChartLocation::Oci("oci://quay.io/cilium/charts/cilium".into())
        );
        assert_eq!(origin.chart.version, "1.18.2");
        assert_eq!(origin.chart.name(), "cilium");
        assert_eq!(origin.values, json!({"hubble": {"enabled": false}}));
        assert_eq!(origin.identity.release_name, "cilium");

        let semver = vec![release.clone(), oci(json!({"semver": ">=1.18.0"}))];
        let err = resolve(&release, &semver).unwrap_err().to_string();
        assert!(err.contains("semver range `>=1.18.0`"), "{err}");
        let digest = vec![release.clone(), oci(json!({"digest": "sha256:abc"}))];
        let err = resolve(&release, &digest).unwrap_err().to_string();
        assert!(err.contains("no `spec.ref.tag`"), "{err}");
        let err = resolve(&release, std::slice::from_ref(&release))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("OCIRepository kube-system/cilium is not reached"),
            "{err}"
        );
    }

    #[test]
    fn chart_spec_with_a_helm_repository() {
        let release = hr(
            json!({"chart": {"spec": {"chart": "cilium", "version": "1.18.2",
            "sourceRef": {"kind": "HelmRepository", "name": "cilium"}}}}),
        );
        let repo = |spec: Value| {
            obj(
                "source.toolkit.fluxcd.io/v1",
                "HelmRepository",
                "cilium",
                "repos.yaml",
                json!({ "spec": spec }),
            )
        };
        let objects = vec![
            release.clone(),
            repo(json!({"url": "https://helm.cilium.io/"})),
        ];
        let origin = resolve(&release, &objects).unwrap();
        assert_eq!(
            origin.chart.location,
            ChartLocation::Repo {
                url: "https://helm.cilium.io/".into(),
                name: "cilium".into()
            }
        );
        let objects = vec![
            release.clone(),
            repo(json!({"url": "oci://ghcr.io/charts/", "type": "oci"})),
        ];
        let origin = resolve(&release, &objects).unwrap();
        assert_eq!(
            origin.chart.location,
            ChartLocation::Oci("oci://ghcr.io/charts/cilium".into())
        );
    }

    #[test]
    fn values_from_merge_in_order_and_spec_values_win() {
        let release = hr(json!({
            "chartRef": {"kind": "OCIRepository", "name": "cilium"},
            "valuesFrom": [
                {"kind": "ConfigMap", "name": "base"},
                {"kind": "Secret", "name": "creds", "valuesKey": "token", "targetPath": "auth.token"},
                {"kind": "Secret", "name": "absent", "optional": true},
                {"kind": "Secret", "name": "external"},
            ],
            "values": {"a": {"b": 2}},
        }));
        let cm = obj(
            "v1",
            "ConfigMap",
            "base",
            "cm.yaml",
            json!({"data": {"values.yaml": "a:\n  b: 1\n  c: 1\nd: x\n"}}),
        );
        let secret = obj(
            "v1",
            "Secret",
            "creds",
            "secret.yaml",
            json!({"data": {"token": "czNjcjN0"}}),
        );
        let objects = vec![release.clone(), oci(json!({"tag": "1.0.0"})), cm, secret];
        let origin = resolve(&release, &objects).unwrap();
        assert_eq!(
            origin.values,
            json!({"a": {"b": 2, "c": 1}, "d": "x", "auth": {"token": "s3cr3t"}})
        );
        let labels: Vec<&str> = origin.layers.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "ConfigMap kube-system/base key values.yaml",
                "Secret kube-system/creds key token at auth.token",
                "HelmRelease kube-system/cilium spec.values"
            ]
        );
        assert_eq!(
            origin.unresolved,
            [Unresolved {
                what: "Secret kube-system/external".into(),
                why: Unreadable::NotInTree,
                target_path: None,
            }]
        );
    }

    #[test]
    fn find_by_path_or_namespace_and_name() {
        let release = hr(json!({}));
        let objects = vec![release];
        assert!(find(&objects, "apps/cilium/helmrelease.yaml").is_ok());
        assert!(find(&objects, "./apps/cilium/helmrelease.yaml").is_ok());
        assert!(find(&objects, "kube-system/cilium").is_ok());
        let err = find(&objects, "apps/other/helmrelease.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no HelmRelease in `apps/other/helmrelease.yaml`"),
            "{err}"
        );
        assert_eq!(managing(&objects, "kube-system", "cilium").len(), 1);
        assert!(managing(&objects, "default", "cilium").is_empty());
    }
}
