//! Reads `clusters/<cluster>/cluster.yaml` and `releases/*.yaml`, checks them,
//! resolves `needs`, renders templates and orders the releases.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_saphyr::Spanned;

use super::draft::{Draft, Paths};
use super::file::{ChartFile, ClusterFile, DefaultsFile, IgnoreEntry, ReleaseFile};
use super::render::{Defaults, Readers, render_release};
use super::{Cluster, Flux};
use crate::error::{Error, Problem, did_you_mean, suggest};
use crate::graph::ReleaseGraph;
use crate::plan::{Ignore, Plan};
use crate::release::{Chart, ChartSource, Hooks, ReleaseId, Source};
use crate::validate;
use crate::validate::VersionError;
use crate::yaml;

pub fn cluster_names(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join("clusters"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("cluster.yaml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

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
        let root = std::fs::canonicalize(dir).map_err(|e| {
            Error::config(Problem::new(format!(
                "config root `{}` cannot be read ({e}); pass --dir with the directory that holds clusters/ and releases/",
                dir.display()
            )))
        })?;
        let paths = Paths::new(root, dir.to_path_buf());
        let read = read_catalog(&paths);
        Ok(Catalog { paths, read })
    }

    /// The plan of `cluster` (`context` as in [`load_for`]), or every
    /// problem of its cluster file and of the release files.
    pub fn plan(&self, cluster: &str, context: Option<&str>) -> Result<Plan, Error> {
        let mut problems = Vec::new();
        let cluster_file = read_cluster(&self.paths, cluster, &mut problems)?;
        let releases = self.read.as_ref().map_err(|p| Error::config(p.clone()))?;
        problems.extend(releases.problems.iter().cloned());
        plan_cluster(
            &self.paths,
            releases,
            cluster,
            cluster_file,
            context,
            problems,
        )
    }
}

/// Every release file parsed and checked, names unique, `needs` resolved,
/// no cycles: the part of loading that does not depend on the cluster.
fn read_catalog(paths: &Paths) -> Result<Releases, Problem> {
    let mut problems = Vec::new();
    let mut broken = Vec::new();
    let drafts = read_releases(paths, &mut problems, &mut broken)?;

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

    let resolver = Resolver::new(catalog.iter().map(|d| &d.id), broken);
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
    Ok(Releases {
        drafts: catalog,
        resolver,
        problems,
    })
}

/// The plan of `cluster` from the checked catalog; `problems` holds what
/// was found so far (its cluster file's, then the release files').
fn plan_cluster(
    paths: &Paths,
    releases: &Releases,
    cluster: &str,
    cluster_file: Option<ClusterFile>,
    context: Option<&str>,
    mut problems: Vec<Problem>,
) -> Result<Plan, Error> {
    let Releases {
        drafts: catalog,
        resolver,
        ..
    } = releases;
    let root = paths.root.clone();
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
    let selected = select(&cluster_file, resolver, &shown_cluster, &mut problems);
    let selected: Vec<&Draft> = match selected {
        Some(ids) => catalog.iter().filter(|d| ids.contains(&d.id)).collect(),
        None => catalog.iter().collect(),
    };
    let selected_ids: std::collections::BTreeSet<&ReleaseId> =
        selected.iter().map(|d| &d.id).collect();
    for draft in &selected {
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

    let mut overrides = BTreeMap::new();
    for (key, value) in &cluster_file.overrides {
        match resolver.resolve(key) {
            Ok(id) => {
                overrides.insert(id, (key.as_str(), value));
            }
            Err(ResolveError::Broken) => {}
            Err(message) => {
                let mut problem =
                    Problem::new(format!("`overrides` names {message}")).file(&shown_cluster);
                if let Some(line) = std::fs::read_to_string(&cluster_path)
                    .ok()
                    .and_then(|text| yaml::key_line(&text, &["overrides", key]))
                {
                    problem = problem.at(line, 3);
                }
                problems.push(problem);
            }
        }
    }

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
    let origins = super::origin::resolve_all(paths, &cluster, &selected, &mut problems);
    let shared_defaults = read_defaults(paths, &mut problems);
    let mut defaults = Vec::new();
    for (file, doc) in [(shown_cluster.clone(), Some(&cluster_file.defaults))]
        .into_iter()
        .chain(std::iter::once((
            paths.show(&paths.root.join("releases").join(DEFAULTS_FILE)),
            shared_defaults.as_ref(),
        )))
    {
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
    let readers = Readers {
        renderer: crate::template::Renderer::new(),
        sops: super::sops::Sops::from_env(),
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
    Ok(Plan::new(cluster, root, releases))
}

/// The cluster file, or `None` when it is too broken to use; its problems
/// go to `problems` so the release files are still checked. An unknown
/// cluster is an error on its own: nothing else can be checked for it.
fn read_cluster(
    paths: &Paths,
    cluster: &str,
    problems: &mut Vec<Problem>,
) -> Result<Option<ClusterFile>, Error> {
    let path = paths
        .root
        .join("clusters")
        .join(cluster)
        .join("cluster.yaml");
    if std::fs::symlink_metadata(&path).is_ok() {
        // There is something by that name: read it as a config file (a
        // FIFO, directory or dangling symlink is an error naming it).
        if let Err(unreadable) = super::read::text(&path) {
            return Err(Error::config(unreadable.problem(&paths.show(&path))));
        }
    }
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            let known = cluster_names(&paths.root);
            let listing = if known.is_empty() {
                "there is no clusters/<name>/cluster.yaml here; pass --dir with your config root"
                    .to_string()
            } else {
                format!(
                    "clusters here: {}{}",
                    known.join(", "),
                    did_you_mean(cluster, known.iter().map(String::as_str))
                )
            };
            let message = if e.kind() == std::io::ErrorKind::NotFound {
                format!("unknown cluster `{cluster}`; {listing}")
            } else {
                format!("cannot read the cluster file: {e}")
            };
            return Err(Error::config(Problem::new(message).file(paths.show(&path))));
        }
    };
    let mut parsed = yaml::one_document::<ClusterFile>(&text, &paths.show(&path));
    problems.append(&mut parsed.problems);
    let Some(file) = parsed.value else {
        return Ok(None);
    };
    if file.name.value != cluster {
        problems.push(
            Problem::new(format!(
                "`name: {}` does not match its directory `clusters/{cluster}`; they must be equal",
                file.name.value
            ))
            .file(paths.show(&path))
            .at(file.name.referenced.line(), file.name.referenced.column()),
        );
    } else if let Err(why) = validate::dns_label(cluster) {
        problems
            .push(Problem::new(format!("cluster name `{cluster}` {why}")).file(paths.show(&path)));
    }
    Ok(Some(file))
}

/// `releases/defaults.yaml`: the defaults every cluster's releases take
/// (docs/design.md#defaults); not a release file.
const DEFAULTS_FILE: &str = "defaults.yaml";

fn read_defaults(paths: &Paths, problems: &mut Vec<Problem>) -> Option<DefaultsFile> {
    let path = paths.root.join("releases").join(DEFAULTS_FILE);
    std::fs::symlink_metadata(&path).ok()?;
    let text = match super::read::text(&path) {
        Ok(text) => text,
        Err(unreadable) => {
            problems.push(unreadable.problem(&paths.show(&path)));
            return None;
        }
    };
    match yaml::document::<Option<DefaultsFile>>(&text, &paths.show(&path)) {
        Ok(doc) => doc,
        Err(mut problem) => {
            if problem.message.contains("unknown key `name`") {
                problem.message.push_str(
                    "; releases/defaults.yaml holds the defaults of every release, not releases: move the releases to another file",
                );
            }
            problems.push(problem);
            None
        }
    }
}

/// A release that is known by name but failed its checks: `needs` naming
/// it are not reported again (its own problem says what is wrong).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Broken {
    namespace: Option<String>,
    name: String,
}

/// Just enough of a release document to know which release it means.
#[derive(serde::Deserialize)]
struct Identity {
    name: Option<String>,
    namespace: Option<String>,
}

fn read_releases(
    paths: &Paths,
    problems: &mut Vec<Problem>,
    broken: &mut Vec<Broken>,
) -> Result<Vec<Draft>, Problem> {
    let dir = paths.root.join("releases");
    let entries = std::fs::read_dir(&dir).map_err(|e| {
        Problem::new(format!(
            "cannot read the release definitions ({e}); a config root holds releases/*.yaml"
        ))
        .file(paths.show(&dir))
    })?;
    // Every `*.yaml`/`*.yml` entry: a symlink that leads nowhere (dangling,
    // or a loop), a directory, FIFO or socket by such a name is a file the
    // user meant to be read, so it is reported below, never skipped.
    let mut files: Vec<PathBuf> = Vec::new();
    for entry in entries {
        match entry {
            Ok(entry) => {
                let path = entry.path();
                let yaml = matches!(
                    path.extension().and_then(|e| e.to_str()),
                    Some("yaml" | "yml")
                );
                let defaults = path.file_name().is_some_and(|n| n == DEFAULTS_FILE);
                if yaml && !defaults {
                    files.push(path);
                }
            }
            Err(e) => problems
                .push(Problem::new(format!("cannot list an entry: {e}")).file(paths.show(&dir))),
        }
    }
    files.sort();
    // Each file on its own (in parallel), gathered in file order.
    let mut drafts = Vec::new();
    for mut read in super::par::map(&files, |file| read_release_file(paths, file)) {
        drafts.append(&mut read.drafts);
        problems.append(&mut read.problems);
        broken.append(&mut read.broken);
    }
    Ok(drafts)
}

/// What one release file holds: its releases, its problems and the names
/// of its releases too broken to use.
#[derive(Default)]
struct FileRead {
    drafts: Vec<Draft>,
    problems: Vec<Problem>,
    broken: Vec<Broken>,
}

fn read_release_file(paths: &Paths, file: &Path) -> FileRead {
    let mut read = FileRead::default();
    let FileRead {
        drafts,
        problems,
        broken,
    } = &mut read;
    let shown = paths.show(file);
    let text = match super::read::text(file) {
        Ok(text) => text,
        Err(unreadable) => {
            problems.push(unreadable.problem(&shown));
            return read;
        }
    };
    for mut parsed in yaml::each_document::<ReleaseFile>(&text, &shown) {
        if parsed.problems.is_empty() {
            let Some(doc) = parsed.value else { continue };
            let id = ReleaseId::new(doc.namespace.value.clone(), doc.name.value.clone());
            match check_release(paths, file, doc, problems) {
                Some(draft) => drafts.push(draft),
                None => broken.push(Broken {
                    namespace: Some(id.namespace),
                    name: id.name,
                }),
            }
            continue;
        }
        // A Kubernetes object dropped among the release files: one
        // error saying so, not one per key it has.
        if let Some((kind, kind_line)) = kubernetes_object(&parsed.text) {
            problems.push(
                Problem::new(format!(
                    "is a Kubernetes object ({kind}), not a release: release files hold `name`, `namespace` and `chart`; move it out of releases/ (a CustomResourceDefinition file can be listed in a release's `manifests:`, for the CRD phase)"
                ))
                .file(&shown)
                .at(kind_line, 0),
            );
            continue;
        }
        // What the rest of the document says is not checked: keys were
        // taken out of it to read it. Its names are whole.
        if let Some(doc) = &parsed.value {
            check_names(doc, &shown, &mut parsed.problems);
            parsed.problems.sort_by_key(|p| (p.line, p.column));
        }
        let identity = match parsed.value {
            Some(doc) => Some(Identity {
                name: Some(doc.name.value),
                namespace: Some(doc.namespace.value),
            }),
            None => serde_saphyr::from_str::<Identity>(&parsed.text)
                .ok()
                .or_else(|| identity_by_lines(&parsed.text)),
        };
        if let Some(Identity {
            name: Some(name),
            namespace,
        }) = identity
        {
            if let Some(namespace) = &namespace {
                let id = ReleaseId::new(namespace.clone(), name.clone());
                for p in &mut parsed.problems {
                    p.release = Some(id.to_string());
                }
            }
            broken.push(Broken { namespace, name });
        }
        problems.append(&mut parsed.problems);
    }
    read
}

/// `kind` of a document that is a Kubernetes object (top-level
/// `apiVersion:` and `kind:`), read off its lines.
/// With the 1-based line of its `apiVersion:` (`text` keeps the document at
/// its place in the file).
fn kubernetes_object(text: &str) -> Option<(String, u64)> {
    let top = |key: &str| {
        text.lines().enumerate().find_map(|(i, line)| {
            let value = line.strip_prefix(key)?.strip_prefix(':')?;
            let value = value.split(" #").next().unwrap_or_default().trim();
            Some((value.to_string(), i as u64 + 1))
        })
    };
    let (_, line) = top("apiVersion")?;
    let (kind, _) = top("kind").filter(|(k, _)| !k.is_empty())?;
    Some((kind, line))
}

/// The top-level `name:` and `namespace:` of a document YAML cannot parse
/// (an unclosed quote, a tab): read off its lines, so that what `needs` it
/// is not reported as needing an unknown release as well.
fn identity_by_lines(text: &str) -> Option<Identity> {
    let field = |key: &str| {
        text.lines().find_map(|line| {
            let value = line.strip_prefix(key)?.strip_prefix(':')?;
            let value = value.split(" #").next()?.trim().trim_matches(['"', '\'']);
            // Only a plain name: what else the line holds is what broke it.
            let plain = !value.is_empty()
                && value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
            plain.then(|| value.to_string())
        })
    };
    Some(Identity {
        name: Some(field("name")?),
        namespace: field("namespace"),
    })
}

/// `name` and `namespace` are DNS-1123 labels.
fn check_names(doc: &ReleaseFile, shown: &Path, problems: &mut Vec<Problem>) {
    let id = ReleaseId::new(doc.namespace.value.clone(), doc.name.value.clone());
    for (what, field) in [("name", &doc.name), ("namespace", &doc.namespace)] {
        if let Err(why) = validate::dns_label(&field.value) {
            problems.push(
                Problem::new(format!("{what} `{}` {why}", field.value))
                    .file(shown)
                    .at(field.referenced.line(), field.referenced.column())
                    .release(&id),
            );
        }
    }
}

/// Static checks of one release document; `None` when it is too broken to use.
fn check_release(
    paths: &Paths,
    file: &Path,
    doc: ReleaseFile,
    problems: &mut Vec<Problem>,
) -> Option<Draft> {
    let shown = paths.show(file);
    let base = file.parent().unwrap_or(&paths.root).to_path_buf();
    let line = doc.name.referenced.line();
    let id = ReleaseId::new(doc.namespace.value.clone(), doc.name.value.clone());
    let before = problems.len();
    let problem = |message: String, at: Option<(u64, u64)>| {
        let mut p = Problem::new(message).file(&shown).release(&id);
        if let Some((l, c)) = at {
            p = p.at(l, c);
        }
        p
    };

    check_names(&doc, &shown, problems);

    for todo in &doc.todo {
        problems.push(problem(
            format!(
                "not fully imported: {}; do it, then remove this entry from `todo:`",
                todo.value.trim_end_matches(['.', ';', ' '])
            ),
            Some((todo.referenced.line(), todo.referenced.column())),
        ));
    }

    let source = match (&doc.chart, &doc.manifests) {
        // The import could not tell the chart: the `todo` entries say why.
        (None, None) if !doc.todo.is_empty() && doc.from.is_none() => None,
        _ if doc.from.is_some() && (doc.chart.is_some() || doc.manifests.is_some()) => {
            problems.push(problem(
                "has `from` and `chart`/`manifests`; `from:` takes the chart from the Flux HelmRelease: keep one".into(),
                Some((line, 0)),
            ));
            None
        }
        (None, None) if doc.from.is_some() => None,
        (Some(_), Some(_)) => {
            problems.push(problem(
                "has both `chart` and `manifests`; keep one".into(),
                Some((line, 0)),
            ));
            None
        }
        (None, None) => {
            problems.push(problem(
                "has neither `chart` nor `manifests`; add `chart: {repo: URL, name: NAME, version: X.Y.Z}` (or `from: {helmRelease: PATH}`)".into(),
                Some((line, 0)),
            ));
            None
        }
        (Some(chart), None) => {
            let at = (chart.referenced.line(), chart.referenced.column());
            match check_chart(&chart.value, &base) {
                Ok(chart) => Some(Source::Chart(chart)),
                Err(e) => {
                    problems.push(problem(e.to_string(), Some(at)));
                    None
                }
            }
        }
        (None, Some(manifests)) => {
            let mut list = Vec::new();
            for m in manifests {
                let at = Some((m.referenced.line(), m.referenced.column()));
                if validate::is_url(&m.value) {
                    if m.value.starts_with("https://") || m.value.starts_with("http://") {
                        list.push(m.value.clone());
                    } else {
                        problems.push(problem(
                            format!("manifest `{}` is not an http(s) URL or a path", m.value),
                            at,
                        ));
                    }
                } else {
                    let path = base.join(&m.value);
                    if path.is_file() {
                        list.push(path.to_string_lossy().into_owned());
                    } else {
                        problems.push(problem(
                            format!("manifest file `{}` does not exist (paths are relative to the release file)", m.value),
                            at,
                        ));
                    }
                }
            }
            if list.is_empty() && problems.len() == before {
                problems.push(problem("`manifests` is empty".into(), Some((line, 0))));
            }
            Some(Source::Manifests(list))
        }
    };

    let timeout = doc.timeout.as_ref().and_then(|t| {
        validate::duration(&t.value)
            .map_err(|why| {
                problems.push(problem(
                    format!("timeout {why}"),
                    Some((t.referenced.line(), t.referenced.column())),
                ))
            })
            .ok()
    });

    for vf in &doc.values_files {
        let path = base.join(&vf.value);
        let at = Some((vf.referenced.line(), vf.referenced.column()));
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() => {}
            // There, but a FIFO, directory or socket: say what it is (the
            // read would otherwise hang on a FIFO).
            Ok(meta) => problems.push(problem(
                format!(
                    "values file `{}` is {}, not a file: a values file must be a regular file or a symlink to one",
                    vf.value,
                    super::read::kind(meta.file_type())
                ),
                at,
            )),
            Err(_) => problems.push(problem(
                format!(
                    "values file `{}` does not exist (paths are relative to the release file)",
                    vf.value
                ),
                at,
            )),
        }
    }

    let mut hooks = Hooks::default();
    for (phase, list, out) in [
        ("presync", &doc.hooks.presync, &mut hooks.presync),
        ("postsync", &doc.hooks.postsync, &mut hooks.postsync),
    ] {
        for hook in list {
            let at = Some((hook.referenced.line(), hook.referenced.column()));
            match hook.value.check(&id.namespace) {
                Ok(h) => out.push(h),
                Err(e) => problems.push(problem(format!("{phase} hook {e}"), at)),
            }
        }
    }

    if problems.len() > before {
        return None;
    }
    Some(Draft {
        id,
        file: file.to_path_buf(),
        line,
        doc,
        source,
        needs: Vec::new(),
        timeout,
        hooks,
    })
}

/// Why a `chart:` cannot be used; each reads as a whole sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ChartError {
    #[error("chart has both `repo` and `oci`; an OCI chart needs only `oci: oci://...`")]
    RepoAndOci,
    #[error(
        "chart `name` is a URL (`{0}`); put the repository URL in `repo` (or `oci`) and the chart's name in `name`"
    )]
    UrlAsName(String),
    #[error("chart needs one of `repo` (with `name`), `oci` or `path`")]
    NoSource,
    #[error("chart must have exactly one of `repo`, `oci` or `path`")]
    SeveralSources,
    #[error("chart has no `version`; pin an exact version so the bootstrap is reproducible")]
    NoVersion,
    #[error("chart version {0}; pin an exact version")]
    NotPinned(#[source] VersionError),
    #[error("chart with `repo` needs `name`, the chart's name in that repository")]
    RepoWithoutName,
    #[error(
        "chart `name` is a URL (`{0}`); `name` is the chart's name in the repository, e.g. `cilium`"
    )]
    RepoNameIsUrl(String),
    #[error(
        "chart `name: {0}` looks like `repo/chart`; bootstrap does not use `helm repo add`: give the repository URL in `repo` and the bare chart name in `name`"
    )]
    RepoSlashChart(String),
    #[error(
        "chart `name: {0}` is not a chart name: it must start with a letter or digit and hold only letters, digits, `.`, `_` and `-` (helm would read a leading `-` as a flag)"
    )]
    BadName(String),
    #[error("chart `repo: {0}` is not an http(s) URL; OCI registries go in `oci: oci://...`")]
    RepoNotHttp(String),
    #[error("chart with `oci` takes no `name`; the chart is the last path segment of the URL")]
    OciWithName,
    #[error("chart `oci: {0}` must start with oci://")]
    NotOci(String),
    #[error("chart path `{0}` has no Chart.yaml (paths are relative to the release file)")]
    NoChartYaml(String),
    /// A local chart's version is optional, but when given it must be exact.
    #[error("chart version {0}")]
    PathVersion(#[source] VersionError),
}

fn check_chart(chart: &ChartFile, base: &Path) -> Result<Chart, ChartError> {
    let forms = [
        chart.repo.is_some(),
        chart.oci.is_some(),
        chart.path.is_some(),
    ];
    if forms.iter().filter(|f| **f).count() != 1 {
        return Err(if chart.repo.is_some() && chart.oci.is_some() {
            ChartError::RepoAndOci
        } else if forms.iter().all(|f| !f) {
            match &chart.name {
                Some(name) if validate::is_url(name) => ChartError::UrlAsName(name.clone()),
                _ => ChartError::NoSource,
            }
        } else {
            ChartError::SeveralSources
        });
    }
    let pinned = |v: &Option<String>| -> Result<String, ChartError> {
        match v {
            None => Err(ChartError::NoVersion),
            Some(v) => validate::pinned_version(v)
                .map(|_| v.clone())
                .map_err(ChartError::NotPinned),
        }
    };
    if let Some(repo) = &chart.repo {
        let name = match &chart.name {
            None => return Err(ChartError::RepoWithoutName),
            Some(name) if validate::is_url(name) => {
                return Err(ChartError::RepoNameIsUrl(name.clone()));
            }
            Some(name) if name.contains('/') => {
                return Err(ChartError::RepoSlashChart(name.clone()));
            }
            Some(name) if !validate::chart_name(name) => {
                return Err(ChartError::BadName(name.clone()));
            }
            Some(name) => name.clone(),
        };
        if !(repo.starts_with("https://") || repo.starts_with("http://")) {
            return Err(ChartError::RepoNotHttp(repo.clone()));
        }
        let version = pinned(&chart.version)?;
        return Ok(Chart {
            source: ChartSource::Repo {
                url: repo.clone(),
                name,
            },
            version: Some(version),
        });
    }
    if let Some(oci) = &chart.oci {
        if chart.name.is_some() {
            return Err(ChartError::OciWithName);
        }
        if !oci.starts_with("oci://") {
            return Err(ChartError::NotOci(oci.clone()));
        }
        let version = pinned(&chart.version)?;
        return Ok(Chart {
            source: ChartSource::Oci(oci.clone()),
            version: Some(version),
        });
    }
    let path = chart.path.as_deref().unwrap_or_default();
    let dir = base.join(path);
    if !dir.join("Chart.yaml").is_file() {
        return Err(ChartError::NoChartYaml(path.to_string()));
    }
    if let Some(v) = &chart.version {
        validate::pinned_version(v).map_err(ChartError::PathVersion)?;
    }
    // Unpinned, a local chart is the version its Chart.yaml says: what helm
    // records for the release, so `apply`, `status` and `diff` compare the
    // deployed version with it (helm ignores `--version` for a directory).
    let version = chart
        .version
        .clone()
        .or_else(|| chart_yaml_version(&dir.join("Chart.yaml")));
    Ok(Chart {
        source: ChartSource::Path(dir),
        version,
    })
}

/// The `version:` of a local chart's Chart.yaml (`None` if unreadable:
/// helm reports that chart itself).
fn chart_yaml_version(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let meta: serde_json::Value = serde_saphyr::from_str(&text).ok()?;
    match meta.get("version")? {
        serde_json::Value::String(v) => Some(v.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn select(
    file: &ClusterFile,
    resolver: &Resolver,
    shown: &Path,
    problems: &mut Vec<Problem>,
) -> Option<std::collections::BTreeSet<ReleaseId>> {
    let list: &Vec<Spanned<String>> = file.releases.as_ref()?;
    let mut ids = std::collections::BTreeSet::new();
    for entry in list {
        match resolver.resolve(&entry.value) {
            Ok(id) => {
                ids.insert(id);
            }
            Err(ResolveError::Broken) => {}
            Err(message) => problems.push(
                Problem::new(format!("`releases` lists {message}"))
                    .file(shown)
                    .at(entry.referenced.line(), entry.referenced.column()),
            ),
        }
    }
    Some(ids)
}

fn build_cluster(
    paths: &Paths,
    name: &str,
    file: &ClusterFile,
    resolver: &Resolver,
    shown: &Path,
    problems: &mut Vec<Problem>,
) -> Cluster {
    let dir = paths.root.join("clusters").join(name);
    let flux = file.flux.as_ref().and_then(|f| {
        let root = paths.root.join(&f.root);
        let entry = root.join(&f.entrypoint);
        if !root.is_dir() {
            problems.push(
                Problem::new(format!(
                    "`flux.root: {}` is not a directory (relative to the config root)",
                    f.root
                ))
                .file(shown),
            );
            None
        } else if !entry.exists() {
            problems.push(
                Problem::new(format!(
                    "`flux.entrypoint: {}` does not exist under `flux.root`",
                    f.entrypoint
                ))
                .file(shown),
            );
            None
        } else {
            Some(Flux {
                root: std::fs::canonicalize(&root).unwrap_or(root),
                entrypoint: PathBuf::from(&f.entrypoint),
            })
        }
    });
    Cluster {
        name: name.to_string(),
        dir,
        context: file.context.clone(),
        values: file.values.clone(),
        flux,
        guard: file.guard.unwrap_or(true),
        lints_ignore: lints_ignore(file, resolver, shown, problems),
    }
}

/// `lints.ignore` (docs/design.md#lints): a lint code, for every release or
/// for one; a Flux-scan error code only for one release, since a blanket
/// ignore of "Flux manages a bootstrap release" would switch the scan off.
fn lints_ignore(
    file: &ClusterFile,
    resolver: &Resolver,
    shown: &Path,
    problems: &mut Vec<Problem>,
) -> Vec<Ignore> {
    let lint_codes = crate::lint::RULES.iter().map(|r| r.code);
    let scan_codes = crate::flux::findings::IGNORABLE;
    let codes: Vec<&str> = lint_codes.chain(scan_codes).collect();
    let mut out = Vec::new();
    for entry in &file.lints.ignore {
        let at = (entry.referenced.line(), entry.referenced.column());
        let problem = |message: String| Problem::new(message).file(shown).at(at.0, at.1);
        let (code, release) = match &entry.value {
            IgnoreEntry::Code(code) => (code, None),
            IgnoreEntry::Release(r) => (&r.code, Some(&r.release)),
        };
        if !codes.contains(&code.as_str()) {
            problems.push(problem(format!(
                "`lints.ignore` lists `{code}`, which is not a lint code nor an error code of the Flux scan{}",
                did_you_mean(code, codes.iter().copied())
            )));
            continue;
        }
        let release = match release {
            None if scan_codes.contains(&code.as_str()) => {
                problems.push(problem(format!(
                    "`lints.ignore` lists `{code}` for every release; the Flux scan's errors are ignored one release at a time: write `- {{code: {code}, release: NAMESPACE/NAME}}`"
                )));
                continue;
            }
            None => None,
            Some(reference) => match resolver.resolve(reference) {
                Ok(id) => Some(id),
                Err(ResolveError::Broken) => continue,
                Err(message) => {
                    problems.push(problem(format!("`lints.ignore` names {message}")));
                    continue;
                }
            },
        };
        out.push(Ignore {
            code: code.clone(),
            release,
        });
    }
    out
}

/// A reference (`needs`, `releases`, `overrides`) that names no single
/// release. The text completes a sentence like "needs ..." / "lists ...".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ResolveError {
    #[error("`{reference}`, which is not a release{}", hint(.suggestion.as_deref()))]
    Unknown {
        reference: String,
        suggestion: Option<String>,
    },
    #[error("`{reference}`, which is ambiguous: {}; write namespace/name", quoted(.candidates))]
    Ambiguous {
        reference: String,
        candidates: Vec<ReleaseId>,
    },
    /// A release whose definition has problems of its own, already
    /// reported: saying it is not a release would be a false follow-up.
    #[error("a release whose definition has problems")]
    Broken,
}

fn hint(suggestion: Option<&str>) -> String {
    suggestion
        .map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_default()
}

fn quoted(ids: &[ReleaseId]) -> String {
    ids.iter()
        .map(|id| format!("`{id}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Resolves `needs` entries: `name` when unique, `namespace/name` always.
struct Resolver {
    by_name: HashMap<String, Vec<ReleaseId>>,
    all: Vec<String>,
    broken: Vec<Broken>,
}

impl Resolver {
    fn new<'a>(ids: impl Iterator<Item = &'a ReleaseId>, broken: Vec<Broken>) -> Self {
        let mut by_name: HashMap<String, Vec<ReleaseId>> = HashMap::new();
        let mut all = Vec::new();
        for id in ids {
            by_name.entry(id.name.clone()).or_default().push(id.clone());
            all.push(id.name.clone());
            all.push(id.to_string());
        }
        all.sort();
        all.dedup();
        Resolver {
            by_name,
            all,
            broken,
        }
    }

    /// Whether `reference` names a release that failed its own checks,
    /// also when the names differ only in case (`needs: [coredns]` for a
    /// release written `name: CoreDNS`, which the name check refused).
    fn names_broken(&self, reference: &str) -> bool {
        let (namespace, name) = match reference.split_once('/') {
            Some((namespace, name)) => (Some(namespace), name),
            None => (None, reference),
        };
        self.broken.iter().any(|b| {
            b.name.eq_ignore_ascii_case(name)
                && match (namespace, &b.namespace) {
                    (Some(want), Some(have)) => want.eq_ignore_ascii_case(have),
                    _ => true,
                }
        })
    }

    fn resolve(&self, reference: &str) -> Result<ReleaseId, ResolveError> {
        let unknown = || {
            if self.names_broken(reference) {
                return ResolveError::Broken;
            }
            ResolveError::Unknown {
                reference: reference.to_string(),
                suggestion: suggest(reference, self.all.iter().map(String::as_str)).map(Into::into),
            }
        };
        match reference.split_once('/') {
            Some((namespace, name)) => {
                let id = ReleaseId::new(namespace, name);
                match self.by_name.get(name) {
                    Some(ids) if ids.contains(&id) => Ok(id),
                    _ => Err(unknown()),
                }
            }
            None => match self.by_name.get(reference).map(Vec::as_slice) {
                Some([one]) => Ok(one.clone()),
                Some(many) => Err(ResolveError::Ambiguous {
                    reference: reference.to_string(),
                    candidates: many.to_vec(),
                }),
                None => Err(unknown()),
            },
        }
    }
}
