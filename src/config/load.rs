//! Reads `clusters/<cluster>/cluster.yaml` and `releases/*.yaml`, checks them,
//! resolves `needs`, renders templates and orders the releases: the
//! catalog of release files is read once (`releases`, `chart`, `resolve`),
//! then each cluster's plan is made from it (`cluster`, `render`).

use std::collections::BTreeMap;
use std::path::Path;

use super::cache::{Pack, ParseCache};
use super::cluster_file::{build_cluster, read_cluster, select};
use super::draft::{Draft, Paths};
use super::file::{ClusterFile, DefaultsFile, OverrideFile};
use super::layers::ValuesFiles;
use super::reference::{ResolveError, Resolver};
use super::release_render::{Defaults, Readers, render_release, shape_release};
use super::releases::{DEFAULTS_FILE, read_defaults, read_releases};
use crate::error::{Error, Problem};
use crate::graph::ReleaseGraph;
use crate::plan::Plan;
use crate::release::ReleaseId;
use crate::validate;
use crate::yaml;

/// Loads everything `cluster` needs from the config root `dir`.
pub fn load(dir: &Path, cluster: &str) -> Result<Plan, Error> {
    load_for(dir, cluster, None)
}

/// [`load`] for a run whose kubeconfig context is `context` (`--context`)
/// rather than cluster.yaml's: templates (`{{cluster.context}}`) and hooks
/// see the context the run really targets.
pub fn load_for(dir: &Path, cluster: &str, context: Option<&str>) -> Result<Plan, Error> {
    Catalog::read(dir)?.plan(cluster, context)
}

/// The release files of a config root, read, checked and their `needs`
/// resolved once: what every cluster's plan is made from. Commands that
/// plan several clusters (`--all`, and the fleet lints of one cluster) read
/// the files once, not once per cluster.
pub struct Catalog {
    paths: Paths,
    /// `Err` when `releases/` cannot be listed: no plan can be made.
    read: Result<Releases, Problem>,
    /// Where each cluster's plan keeps the values files it parsed.
    cache: Option<ParseCache>,
}

struct Releases {
    drafts: Vec<Draft>,
    resolver: Resolver,
    /// What is wrong with the release files, whichever cluster is planned.
    problems: Vec<Problem>,
}

impl Catalog {
    /// Reads `releases/` of the config root `dir`.
    pub fn read(dir: &Path) -> Result<Catalog, Error> {
        Catalog::read_cached(dir, None)
    }

    /// [`Catalog::read`] through the parse cache `cache`
    /// (docs/design.md#parse-cache).
    pub fn read_cached(dir: &Path, cache: Option<&ParseCache>) -> Result<Catalog, Error> {
        let root = std::fs::canonicalize(dir).map_err(|e| {
            Error::config(Problem::new(format!(
                "config root `{}` cannot be read ({e}); pass --dir with the directory that holds clusters/ and releases/",
                dir.display()
            )))
        })?;
        let paths = Paths::new(root, dir.to_path_buf());
        let pack = cache.map_or_else(Pack::none, |cache| cache.open(&paths.root));
        let read = read_catalog(&paths, &pack);
        Ok(Catalog {
            paths,
            read,
            cache: cache.cloned(),
        })
    }

    /// The plan of `cluster` (`context` as in [`load_for`]), or every
    /// problem of its cluster file and of the release files.
    pub fn plan(&self, cluster: &str, context: Option<&str>) -> Result<Plan, Error> {
        self.plan_as(cluster, context, Render::Values)
    }

    /// The plan of `cluster` as `graph` prints it (docs/design.md#commands):
    /// the releases, their charts and needs, checked as for [`plan`](Self::plan),
    /// but no values, values files or hooks read or rendered.
    pub fn shape(&self, cluster: &str) -> Result<Plan, Error> {
        self.plan_as(cluster, None, Render::Shape)
    }

    fn plan_as(&self, cluster: &str, context: Option<&str>, render: Render) -> Result<Plan, Error> {
        let mut problems = Vec::new();
        let cluster_file = read_cluster(&self.paths, cluster, &mut problems)?;
        let releases = self.read.as_ref().map_err(|p| Error::config(p.clone()))?;
        problems.extend(releases.problems.iter().cloned());
        let values = match (&self.cache, render) {
            (Some(cache), Render::Values) => cache.open_values(&self.paths.root, cluster),
            _ => Pack::none(),
        };
        plan_cluster(
            &self.paths,
            releases,
            (cluster, cluster_file, context),
            (values, render),
            problems,
        )
    }
}

/// Every release file parsed and checked, names unique, `needs` resolved,
/// no cycles: the part of loading that does not depend on the cluster.
fn read_catalog(paths: &Paths, pack: &Pack) -> Result<Releases, Problem> {
    let mut problems = Vec::new();
    let mut broken = Vec::new();
    let drafts = read_releases(paths, pack, &mut problems, &mut broken)?;

    let mut by_id: BTreeMap<ReleaseId, usize> = BTreeMap::new();
    let mut catalog: Vec<Draft> = Vec::new();
    for draft in drafts {
        if let Some(&first) = by_id.get(&draft.id) {
            let first: &Draft = &catalog[first];
            problems.push(
                Problem::new(format!(
                    "is defined twice; the first definition is at {}:{}; rename one or remove it",
                    paths.show(&first.file).display(),
                    first.line
                ))
                .file(paths.show(&draft.file))
                .at(draft.line, 0)
                .release(&draft.id),
            );
            continue;
        }
        by_id.insert(draft.id.clone(), catalog.len());
        catalog.push(draft);
    }

    // A broken release's `needs` are checked too (its own problem is
    // reported already): one run reports every problem of the config.
    let resolver = Resolver::new(catalog.iter().map(|d| &d.id), broken.clone());
    for b in &broken {
        let Some(namespace) = &b.namespace else {
            continue;
        };
        let (id, file) = (ReleaseId::new(namespace.clone(), b.name.clone()), &b.file);
        for (need, line, column) in &b.needs {
            if let Err(message @ (ResolveError::Unknown { .. } | ResolveError::Ambiguous { .. })) =
                resolver.resolve(need)
            {
                problems.push(
                    Problem::new(format!("needs {message}"))
                        .file(file)
                        .at(*line, *column)
                        .release(&id),
                );
            }
        }
    }
    for draft in &mut catalog {
        let mut needs = Vec::new();
        for need in &draft.doc.needs {
            let at = (need.referenced.line(), need.referenced.column());
            match resolver.resolve(&need.value) {
                Ok(id) if id == draft.id => problems.push(
                    Problem::new("needs itself; remove it from `needs`")
                        .file(paths.show(&draft.file))
                        .at(at.0, at.1)
                        .release(&draft.id),
                ),
                Ok(id) => needs.push(id),
                Err(ResolveError::Broken) => {}
                Err(message) => problems.push(
                    Problem::new(format!("needs {message}"))
                        .file(paths.show(&draft.file))
                        .at(at.0, at.1)
                        .release(&draft.id),
                ),
            }
        }
        needs.sort();
        needs.dedup();
        draft.needs = needs;
    }

    let graph = ReleaseGraph::new(catalog.iter().map(|d| (&d.id, d.needs.as_slice())));
    for cycle in graph.cycles() {
        let first = &catalog[by_id[&cycle.0[0]]];
        problems.push(
            Problem::new(format!(
                "dependency cycle: {cycle}; remove one of these `needs`"
            ))
            .file(paths.show(&first.file))
            .at(first.line, 0)
            .release(&first.id),
        );
    }
    // In the order of the files' lines, as a reader goes through them.
    problems.sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
    Ok(Releases {
        drafts: catalog,
        resolver,
        problems,
    })
}

/// The plan of `cluster` from the checked catalog; `problems` holds what
/// was found so far (its cluster file's, then the release files').
/// What a plan's releases get: their values and hooks rendered, or only
/// what `graph` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Render {
    Values,
    Shape,
}

fn plan_cluster(
    paths: &Paths,
    releases: &Releases,
    (cluster, cluster_file, context): (&str, Option<ClusterFile>, Option<&str>),
    (values, render): (Pack, Render),
    mut problems: Vec<Problem>,
) -> Result<Plan, Error> {
    let Releases {
        drafts: catalog,
        resolver,
        ..
    } = releases;
    // Without a usable cluster file, what depends on it cannot be checked;
    // the release files have been.
    let Some(cluster_file) = cluster_file else {
        return Err(Error::Config(problems));
    };
    let cluster_path = paths
        .root
        .join("clusters")
        .join(cluster)
        .join("cluster.yaml");
    let shown_cluster = paths.show(&cluster_path);
    let selected = selected(
        catalog,
        resolver,
        &cluster_file,
        &shown_cluster,
        &mut problems,
    );
    check_needs_selected(paths, cluster, &selected, &shown_cluster, &mut problems);
    let overrides = overrides(
        resolver,
        &cluster_file,
        &cluster_path,
        &shown_cluster,
        &mut problems,
    );
    let mut cluster = build_cluster(
        paths,
        cluster,
        &cluster_file,
        resolver,
        &shown_cluster,
        &mut problems,
    );
    if let Some(context) = context {
        cluster.context = Some(context.to_string());
    }
    let origins = super::from::resolve_all(paths, &cluster, &selected, &mut problems);
    let shared_defaults = read_defaults(paths, &mut problems);
    let defaults = defaults(
        paths,
        &cluster_file,
        &shown_cluster,
        shared_defaults.as_ref(),
        &mut problems,
    );
    let rendered = match render {
        Render::Shape => selected
            .iter()
            .map(|draft| shape_release(draft, origins.get(&draft.id), &defaults))
            .collect(),
        Render::Values => {
            let readers = Readers {
                renderer: crate::handlebars::Renderer::new(),
                sops: super::sops::Sops::from_env(),
                files: ValuesFiles::cached(values),
            };
            // Each release on its own (in parallel), gathered in the catalog's order.
            let rendered = super::par::map(&selected, |draft| {
                render_release(
                    &readers,
                    paths,
                    &cluster,
                    draft,
                    overrides.get(&draft.id).copied(),
                    origins.get(&draft.id),
                    &defaults,
                )
            });
            readers.files.save();
            rendered
        }
    };
    let mut releases = Vec::new();
    for result in rendered {
        match result {
            Ok(release) => releases.push(release),
            Err(mut more) => problems.append(&mut more),
        }
    }

    if !problems.is_empty() {
        return Err(Error::Config(problems));
    }
    Ok(Plan::new(cluster, paths.root.clone(), releases))
}

/// The drafts the cluster's `releases:` selects (all without it), in
/// catalog order.
fn selected<'a>(
    catalog: &'a [Draft],
    resolver: &Resolver,
    cluster_file: &ClusterFile,
    shown_cluster: &Path,
    problems: &mut Vec<Problem>,
) -> Vec<&'a Draft> {
    match select(cluster_file, resolver, shown_cluster, problems) {
        Some(ids) => catalog.iter().filter(|d| ids.contains(&d.id)).collect(),
        None => catalog.iter().collect(),
    }
}

/// Each `needs` of a selected release names a selected release.
fn check_needs_selected(
    paths: &Paths,
    cluster: &str,
    selected: &[&Draft],
    shown_cluster: &Path,
    problems: &mut Vec<Problem>,
) {
    let selected_ids: std::collections::BTreeSet<&ReleaseId> =
        selected.iter().map(|d| &d.id).collect();
    for draft in selected {
        for need in &draft.needs {
            if !selected_ids.contains(need) {
                problems.push(
                    Problem::new(format!(
                        "needs `{need}`, which cluster `{cluster}` does not include; add it to `releases:` in {}",
                        shown_cluster.display()
                    ))
                    .file(paths.show(&draft.file))
                    .at(draft.line, 0)
                    .release(&draft.id),
                );
            }
        }
    }
}

/// The cluster file's `overrides`, by the release each names (with the key
/// it is written under).
fn overrides<'a>(
    resolver: &Resolver,
    cluster_file: &'a ClusterFile,
    cluster_path: &Path,
    shown_cluster: &Path,
    problems: &mut Vec<Problem>,
) -> BTreeMap<ReleaseId, (&'a str, &'a OverrideFile)> {
    let mut overrides = BTreeMap::new();
    for (key, value) in &cluster_file.overrides {
        match resolver.resolve(key) {
            Ok(id) => {
                overrides.insert(id, (key.as_str(), value));
            }
            Err(ResolveError::Broken) => {}
            Err(message) => {
                let mut problem =
                    Problem::new(format!("`overrides` names {message}")).file(shown_cluster);
                if let Some(line) = std::fs::read_to_string(cluster_path)
                    .ok()
                    .and_then(|text| yaml::key_line(&text, &["overrides", key]))
                {
                    problem = problem.at(line, 3);
                }
                problems.push(problem);
            }
        }
    }
    overrides
}

/// The layers of `defaults` (docs/design.md#defaults): cluster.yaml's,
/// then `releases/defaults.yaml`'s, each with its timeout checked.
fn defaults<'a>(
    paths: &Paths,
    cluster_file: &'a ClusterFile,
    shown_cluster: &Path,
    shared: Option<&'a DefaultsFile>,
    problems: &mut Vec<Problem>,
) -> Vec<Defaults<'a>> {
    let shared_file = paths.show(&paths.root.join("releases").join(DEFAULTS_FILE));
    let layers = [
        (shown_cluster.to_path_buf(), Some(&cluster_file.defaults)),
        (shared_file, shared),
    ];
    let mut defaults = Vec::new();
    for (file, doc) in layers {
        let Some(doc) = doc else { continue };
        let timeout = doc.timeout.as_ref().and_then(|t| {
            validate::duration(&t.value)
                .map_err(|why| {
                    problems.push(
                        Problem::new(format!("defaults timeout {why}"))
                            .file(&file)
                            .at(t.referenced.line(), t.referenced.column()),
                    )
                })
                .ok()
        });
        defaults.push(Defaults { file, doc, timeout });
    }
    defaults
}
