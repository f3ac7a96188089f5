//! `from: { helmRelease: … }` (docs/design.md#from-a-flux-helmrelease): the
//! chart, version and values of a release taken from the Flux HelmRelease
//! that will adopt it, resolved in the cluster's GitOps tree by the same
//! resolution `check` scans with (`crate::flux::tree`, `crate::flux::helmrelease_source`).

use std::collections::BTreeMap;
use std::path::Path;

use super::Cluster;
use super::draft::{Draft, Paths};
use crate::error::Problem;
use crate::flux::helmrelease_source::{ChartLocation, Origin, OriginError, Unresolved};
use crate::release::{Chart, ChartSource, FromHelmRelease, ReleaseId};
use crate::validate;
use crate::values::stack::{Layer, Step, ValuesSource};

/// What `from:` gives a release.
pub(crate) struct Resolved {
    pub chart: Chart,
    pub from: FromHelmRelease,
    /// The HelmRelease's values layers (step 0 of the merge order), in
    /// merge order, before the release's own.
    pub layers: Vec<Layer>,
    /// `valuesFrom` objects that are not in git: the release must supply
    /// their values itself.
    pub unresolved: Vec<Unresolved>,
}

/// Resolves the `from:` of every draft that has one, building the cluster's
/// GitOps tree once.
pub(crate) fn resolve_all(
    paths: &Paths,
    cluster: &Cluster,
    drafts: &[&Draft],
    problems: &mut Vec<Problem>,
) -> BTreeMap<ReleaseId, Resolved> {
    let mut out = BTreeMap::new();
    let with_from: Vec<&&Draft> = drafts.iter().filter(|d| d.doc.from.is_some()).collect();
    if with_from.is_empty() {
        return out;
    }
    let problem = |draft: &Draft, message: String| {
        let from = draft.doc.from.as_ref().expect("filtered on from");
        Problem::new(message)
            .file(paths.show(&draft.file))
            .at(from.referenced.line(), from.referenced.column())
            .release(&draft.id)
    };
    let Some(flux) = &cluster.flux else {
        for draft in with_from {
            problems.push(problem(
                draft,
                format!(
                    "has `from:`, but cluster `{}` has no `flux:` (root, entrypoint) in its cluster.yaml: the HelmRelease is looked up in that GitOps tree",
                    cluster.name
                ),
            ));
        }
        return out;
    };
    let tree = crate::flux::tree::resolve(&flux.root, &flux.entrypoint);
    for draft in with_from {
        let reference = &draft
            .doc
            .from
            .as_ref()
            .expect("filtered")
            .value
            .helm_release;
        let converted = crate::flux::helmrelease_source::find(&tree.objects, reference)
            .and_then(|hr| crate::flux::helmrelease_source::resolve(hr, &tree.objects))
            .map_err(FromError::Origin)
            .and_then(|o| match convert(&o, &draft.id) {
                Ok(chart) => Ok((o, chart)),
                Err(why) => Err(FromError::NotAdoptable(why)),
            });
        match converted {
            Ok((origin, chart)) => {
                let layers = helm_release_layers(&origin, paths, &flux.root);
                out.insert(
                    draft.id.clone(),
                    Resolved {
                        chart,
                        from: FromHelmRelease {
                            helm_release: format!(
                                "{}/{}",
                                origin.object.namespace.as_deref().unwrap_or("-"),
                                origin.object.name
                            ),
                            file: origin.object.file.clone(),
                        },
                        layers,
                        unresolved: origin.unresolved.clone(),
                    },
                );
            }
            Err(why) => {
                let mut found = problem(
                    draft,
                    format!("`from: {{helmRelease: {reference}}}`: {why}"),
                );
                // Not reached because Flux could not read or build what holds
                // it: the scan's own words, so `check` (which stops at this
                // same error) need not be run to learn them.
                if matches!(
                    why,
                    FromError::Origin(
                        OriginError::FileNotReached { .. } | OriginError::NameNotReached { .. }
                    )
                ) {
                    for cause in unreadable(&tree, reference) {
                        found = found.caused_by(cause);
                    }
                }
                problems.push(found);
            }
        }
    }
    out
}

/// Step 0 of the merge order: each `valuesFrom` entry, then `spec.values`,
/// labelled with the file each is read from; the first written in the
/// HelmRelease's own file is where the lints locate its keys (under
/// `spec.values`).
fn helm_release_layers(origin: &Origin, paths: &Paths, flux_root: &Path) -> Vec<Layer> {
    let mut located = false;
    origin
        .layers
        .iter()
        .map(|l| {
            let label = match &l.file {
                Some(f) => format!("{} ({f})", l.label),
                None => l.label.clone(),
            };
            let layer = Layer::new(Step::HelmRelease, label, l.values.clone());
            match l.file.as_deref() {
                Some(f) if !located && f == origin.object.file => {
                    located = true;
                    let path = flux_root.join(f);
                    layer.written_at(ValuesSource {
                        shown: paths.show(&path),
                        path,
                        prefix: vec!["spec".into(), "values".into()],
                        document_line: None,
                    })
                }
                _ => layer,
            }
        })
        .collect()
}

/// The chart bootstrap installs for `origin`, once the HelmRelease is known
/// to manage exactly release `id` the way `helm upgrade --install` stores it.
fn convert(origin: &Origin, id: &ReleaseId) -> Result<Chart, NotAdoptable> {
    let hr = format!(
        "HelmRelease {}/{} ({})",
        origin.object.namespace.as_deref().unwrap_or("-"),
        origin.object.name,
        origin.object.file
    );
    let identity = &origin.identity;
    let manages = ReleaseId::new(
        identity.storage_namespace.clone().unwrap_or_default(),
        identity.release_name.clone(),
    );
    if manages != *id {
        return Err(NotAdoptable::OtherRelease {
            hr,
            manages,
            id: id.clone(),
        });
    }
    if identity.release_namespace != identity.storage_namespace {
        return Err(NotAdoptable::StoredElsewhere {
            hr,
            installs: identity.release_namespace.clone(),
            stores: identity.storage_namespace.clone(),
        });
    }
    validate::pinned_version(&origin.chart.version).map_err(|version| NotAdoptable::Unpinned {
        hr: hr.clone(),
        version,
    })?;
    Ok(Chart {
        source: match &origin.chart.location {
            ChartLocation::Repo { url, name } => ChartSource::Repo {
                url: url.clone(),
                name: name.clone(),
            },
            ChartLocation::Oci(url) => ChartSource::Oci(url.clone()),
        },
        version: Some(origin.chart.version.clone()),
    })
}

/// Why `from:` gives a release nothing: the HelmRelease cannot be found or
/// resolved, or Flux would not adopt what it installs.
#[derive(Debug, thiserror::Error)]
enum FromError {
    #[error(transparent)]
    Origin(crate::flux::helmrelease_source::OriginError),
    #[error(transparent)]
    NotAdoptable(NotAdoptable),
}

/// Why a Flux HelmRelease cannot be what bootstrap installs for a release:
/// Flux would not adopt the result. `hr` names the HelmRelease and its file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum NotAdoptable {
    #[error(
        "{hr} manages Helm release {manages} (helm-controller's naming: releaseName, else targetNamespace-name, else name; storage namespace), not {id}: set this release's name and namespace to those, or Flux would install a second release instead of adopting this one"
    )]
    OtherRelease {
        hr: String,
        manages: ReleaseId,
        id: ReleaseId,
    },
    #[error(
        "{hr} installs into namespace {} but stores the release in {}; `helm upgrade --install` stores a release where it installs, so Flux could not adopt it: drop `storageNamespace` or `targetNamespace`",
        .installs.as_deref().unwrap_or("-"),
        .stores.as_deref().unwrap_or("-")
    )]
    StoredElsewhere {
        hr: String,
        installs: Option<String>,
        stores: Option<String>,
    },
    #[error(
        "{hr} chart version {version}; bootstrap installs pinned versions: pin it in the HelmRelease or its source"
    )]
    Unpinned {
        hr: String,
        version: validate::VersionError,
    },
}

/// What the scan of the tree said it could not read or build, about the
/// file `reference` names (a path) or anywhere (a `namespace/name`).
fn unreadable(tree: &crate::flux::tree::Tree, reference: &str) -> Vec<String> {
    let is_path = reference.ends_with(".yaml") || reference.ends_with(".yml");
    let wanted = reference.trim_start_matches("./");
    tree.findings
        .iter()
        .filter(|f| {
            f.code == crate::flux::findings::YAML_INVALID
                || f.code == crate::flux::findings::BUILD_FAILS
        })
        .filter(|f| !is_path || f.chain.iter().any(|c| c == wanted))
        .map(|f| f.message.clone())
        .chain(not_applied(tree, reference))
        .collect()
}

/// Built but never applied: the HelmRelease is in a stage of a build whose
/// server-side apply the API server refuses (docs/design.md#tree-resolution).
fn not_applied<'a>(
    tree: &'a crate::flux::tree::Tree,
    reference: &'a str,
) -> impl Iterator<Item = String> + 'a {
    let is_path = reference.ends_with(".yaml") || reference.ends_with(".yml");
    let wanted = reference.trim_start_matches("./");
    tree.builds.iter().flat_map(move |build| {
        let by = build.by.as_deref().unwrap_or("the entrypoint");
        let why = build.apply_error.as_deref().unwrap_or_default();
        build
            .not_applied
            .iter()
            .filter(|o| crate::flux::helmrelease_source::is_helm_release(o))
            .filter(move |o| {
                if is_path {
                    o.file == wanted
                } else {
                    reference.split_once('/').is_some_and(|(namespace, name)| {
                        o.name == name && o.namespace.as_deref() == Some(namespace)
                    })
                }
            })
            .map(move |o| {
                format!(
                    "HelmRelease {}/{} ({}) is built but never applied: {by}'s server-side apply fails, `{why}`; fix that stage and Flux applies it",
                    o.namespace.as_deref().unwrap_or("-"),
                    o.name,
                    o.file
                )
            })
    })
}
