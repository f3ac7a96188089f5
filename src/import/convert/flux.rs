//! A Flux tree beside the helmfile: the Kustomizations and HelmReleases
//! that manage imported releases, which become `from:` candidates or
//! `handover` releases.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Chart, ChartOut, FluxOut, FromOut, Group, ValuesNote, ValuesOut};
use crate::import::helmfile::Release as HelmfileRelease;
use crate::import::{hooks, relative};

/// The Flux HelmRelease this release can be read from with `from:`, giving
/// the same install as the helmfile: its only values are the HelmRelease's
/// `spec.values` (no `valuesFrom`, which the helmfile did not read), it
/// manages this very release (docs/design.md#release-identity), and its
/// `chartRef` names an OCIRepository (next to it or read by the template)
/// with the helmfile's chart URL and version.
pub(super) fn from_candidate(
    release: &HelmfileRelease,
    values: &[ValuesOut],
    chart: &Chart,
    name: &str,
    namespace: &str,
) -> Option<PathBuf> {
    let [
        ValuesOut::Generated {
            note: ValuesNote::Flux { helmrelease, .. },
            ..
        },
    ] = values
    else {
        return None;
    };
    candidate(release, helmrelease, chart, name, namespace)
}

/// The HelmRelease file `helmrelease` as [`from_candidate`] accepts it.
pub(super) fn candidate(
    release: &HelmfileRelease,
    helmrelease: &Path,
    chart: &Chart,
    name: &str,
    namespace: &str,
) -> Option<PathBuf> {
    let ChartOut::Oci(url) = &chart.chart else {
        return None;
    };
    let text = std::fs::read_to_string(helmrelease).ok()?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).ok()?;
    let hr = docs
        .iter()
        .find(|d| d.get("kind").and_then(Value::as_str) == Some("HelmRelease"))?;
    let str_at = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_string);
    let is = |p: &str, want: &str| str_at(hr, p).is_none_or(|v| v == want);
    let identity = str_at(hr, "/metadata/name").as_deref() == Some(name)
        && is("/spec/releaseName", name)
        && is("/metadata/namespace", namespace)
        && is("/spec/targetNamespace", namespace)
        && is("/spec/storageNamespace", namespace);
    let values_from = hr
        .pointer("/spec/valuesFrom")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if !identity
        || values_from
        || str_at(hr, "/spec/chartRef/kind").as_deref() != Some("OCIRepository")
    {
        return None;
    }
    let repo_name = str_at(hr, "/spec/chartRef/name")?;
    // The OCIRepository: among what the template read, else beside the HelmRelease.
    let beside = helmrelease
        .parent()
        .and_then(|d| std::fs::read_dir(d).ok())
        .into_iter()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok());
    let texts: Vec<String> = release
        .chart_reads
        .iter()
        .map(|r| r.text.clone())
        .chain(beside)
        .collect();
    let same_chart = texts.iter().any(|text| {
        serde_saphyr::from_multiple::<Value>(text)
            .unwrap_or_default()
            .iter()
            .any(|d| {
                d.get("kind").and_then(Value::as_str) == Some("OCIRepository")
                    && str_at(d, "/metadata/name").as_deref() == Some(repo_name.as_str())
                    && str_at(d, "/spec/url").as_deref() == Some(url.as_str())
                    && str_at(d, "/spec/ref/tag") == chart.version
                    && d.pointer("/spec/ref/semver").is_none()
            })
    });
    same_chart
        .then(|| crate::import::gotmpl::normalize(&crate::import::hooks::absolute(helmrelease)))
}

/// The Flux tree the imported releases come from: the root Kustomization's
/// path is `spec.sync.path` of the FluxInstance the flux-instance chart
/// creates (its `instance.sync.path` value), and the root is the directory
/// above a HelmRelease to read where that path exists (the repository Flux
/// syncs; flux-operator api/v1/fluxinstance_types.go `Sync.Path`).
pub(super) fn flux_tree(groups: &[Group]) -> Option<FluxOut> {
    let releases = || groups.iter().flat_map(|g| &g.releases);
    let (entrypoint, source) = releases().find_map(|r| {
        r.values.iter().find_map(|v| match v {
            ValuesOut::Generated { values, note, .. } => {
                let path = values
                    .get("instance")?
                    .pointer("/sync/path")?
                    .as_str()?
                    .trim()
                    .trim_start_matches("./")
                    .trim_end_matches('/')
                    .to_string();
                let source = match note {
                    ValuesNote::Flux { helmrelease, .. } => helmrelease.clone(),
                    _ => r.source.clone(),
                };
                (!path.is_empty() && !path.starts_with('/') && !path.contains(".."))
                    .then_some((path, source))
            }
            ValuesOut::InPlace(_) => None,
        })
    })?;
    let candidate = releases().find_map(|r| r.from_candidate.as_ref())?;
    let root = candidate
        .ancestors()
        .skip(1)
        .find(|dir| dir.join(&entrypoint).is_dir())?
        .to_path_buf();
    Some(FluxOut {
        root,
        entrypoint,
        source,
        by: super::FoundBy::InstanceValues,
    })
}

/// The Flux tree when no FluxInstance says it: the Flux Kustomization
/// (kustomize.toolkit.fluxcd.io) whose `spec.path` holds the HelmRelease a
/// template read, the widest such path winning (the tree's top, not an
/// app's own Kustomization). The root is the nearest directory above the
/// HelmRelease where that path exists, searched no higher than the
/// directory that holds both the HelmRelease and the state file (the
/// repository); the entrypoint is the directory of the Kustomization's file.
pub(super) fn kustomization_tree(groups: &[Group]) -> Option<FluxOut> {
    let (hr, state) = groups
        .iter()
        .flat_map(|g| &g.releases)
        .find_map(|r| Some((r.from_candidate.as_ref()?, hooks::absolute(&r.source))))?;
    let common: PathBuf = hr
        .components()
        .zip(crate::import::gotmpl::normalize(&state).components())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a)
        .collect();
    for dir in hr.ancestors().skip(1) {
        if !dir.starts_with(&common) || dir == Path::new("/") {
            break;
        }
        let mut best: Option<(usize, PathBuf)> = None;
        let mut files = Vec::new();
        yaml_files(dir, &mut files, 5000);
        for file in files {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            if !text.contains("kustomize.toolkit.fluxcd.io") {
                continue;
            }
            for doc in serde_saphyr::from_multiple::<Value>(&text).unwrap_or_default() {
                let api = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("");
                let path = doc.pointer("/spec/path").and_then(Value::as_str);
                let (true, Some(path)) = (
                    api.starts_with("kustomize.toolkit.fluxcd.io/")
                        && doc.get("kind").and_then(Value::as_str) == Some("Kustomization"),
                    path,
                ) else {
                    continue;
                };
                let target =
                    crate::import::gotmpl::normalize(&dir.join(path.trim_start_matches("./")));
                let depth = target.components().count();
                if hr.starts_with(&target) && best.as_ref().is_none_or(|(d, _)| depth < *d) {
                    best = Some((depth, file.clone()));
                }
            }
        }
        if let Some((_, file)) = best {
            let entrypoint = relative(dir, file.parent()?);
            return Some(FluxOut {
                root: dir.to_path_buf(),
                entrypoint: entrypoint.to_string_lossy().into_owned(),
                source: file,
                by: super::FoundBy::ReadHelmReleases,
            });
        }
    }
    None
}

/// The `*.yaml`/`*.yml` files below `dir` (hidden directories left out),
/// at most `limit` of them.
pub(super) fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>, limit: usize) {
    crate::import::files_below(dir, &[".yaml", ".yml"], limit, out);
}

/// Every release with a [`from_candidate`] inside the Flux tree is read
/// from it: `from:` in place of its chart and copied values.
pub(super) fn read_from_flux(groups: &mut [Group], flux: &FluxOut) {
    for release in groups.iter_mut().flat_map(|g| &mut g.releases) {
        let Some(hr) = release.from_candidate.as_ref() else {
            continue;
        };
        if !hr.starts_with(&flux.root) {
            continue;
        }
        let template = release.values.iter().find_map(|v| match v {
            ValuesOut::Generated {
                note: ValuesNote::Flux { template, .. },
                ..
            } => Some(template.clone()),
            _ => None,
        });
        let template = template.or_else(|| {
            release
                .flux_document
                .as_ref()
                .map(|doc| doc.template.clone())
        });
        let Some(template) = template else { continue };
        release.from = Some(FromOut {
            helmrelease: hr.clone(),
            template,
            document: release.flux_document.clone(),
        });
        release.values.clear();
        release.chart_note = None;
    }
}

/// Every installed release that a HelmRelease of the Flux tree manages
/// (the tree as `check` resolves it, docs/design.md#tree-resolution) is
/// Flux's after the bootstrap: `ownership: handover`, so that `check`
/// verifies the adoption instead of reporting the HelmRelease.
pub(super) fn flux_managed(groups: &mut [Group], flux: &FluxOut) {
    let tree = crate::flux::tree::resolve(&flux.root, Path::new(&flux.entrypoint));
    for hr in tree
        .objects
        .iter()
        .filter(|o| o.is_flux("helm", "HelmRelease"))
    {
        let spec = hr.body.get("spec").unwrap_or(&Value::Null);
        let id = crate::flux::helmrelease::identity(&hr.name, hr.namespace.as_deref(), spec);
        let Some(ns) = id.storage_namespace else {
            continue;
        };
        for group in groups.iter_mut().filter(|g| g.crds_only.is_none()) {
            for release in &mut group.releases {
                if release.namespace == ns && release.name == id.release_name {
                    release.flux_managed = Some((
                        format!("{}/{}", hr.namespace.as_deref().unwrap_or(""), hr.name),
                        hr.file.clone(),
                    ));
                }
            }
        }
    }
}
