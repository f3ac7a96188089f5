//! helmfile releases as bootstrap releases: chart references, needs,
//! values, hooks, `helmDefaults`, CRD-only files, `installed: false`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::helmfile::{self, FluxDocument, Release as HelmfileRelease, State, ValuesEntry};
use super::hooks::{self, Converted};
use super::{Issue, relative};
use crate::error::{Error, Problem};

/// What the import produced, before anything is written.
pub struct Imported {
    pub cluster: String,
    /// The state files read, as shown.
    pub sources: Vec<PathBuf>,
    /// One group per state file that defines releases, in helmfile's order.
    pub groups: Vec<Group>,
    /// The kubeconfig context of `helmDefaults.kubeContext`.
    pub context: Option<String>,
    /// The Flux tree, when the imported values name it.
    pub flux: Option<FluxOut>,
    pub issues: Vec<Issue>,
    /// Settings not carried over because they have no effect on a
    /// bootstrap (said in the output and in cluster.yaml, never silent).
    pub notes: Vec<Issue>,
    /// Who rendered the helmfiles' templates.
    pub renderer: super::Renderer,
}

/// How to read the helmfiles.
#[derive(Default)]
pub struct Options {
    /// Render with helmfile itself (else the importer's template subset).
    pub helmfile: Option<super::Helmfile>,
    /// Why there is no helmfile, when there is none.
    pub without: String,
    /// helmfile's `--environment`.
    pub environment: Option<String>,
}

/// The releases of one state file: one `releases/<stem>.yaml`.
pub struct Group {
    pub source: PathBuf,
    pub stem: String,
    /// Why its releases are CRD-only, when they are.
    pub crds_only: Option<String>,
    /// Its `helmDefaults` as bootstrap `helm.*` keys.
    pub helm_defaults: Map<String, Value>,
    /// Settings with no effect on a bootstrap ([`Imported::notes`]).
    pub notes: Vec<Issue>,
    pub releases: Vec<ReleaseOut>,
}

pub struct ReleaseOut {
    pub name: String,
    pub namespace: String,
    pub source: PathBuf,
    pub line: usize,
    pub chart: Option<Chart>,
    pub chart_note: Option<String>,
    /// `namespace/name`, with why when the helmfile did not write it.
    pub needs: Vec<(String, Option<String>)>,
    pub wait: Option<(bool, String)>,
    pub timeout: Option<(String, String)>,
    pub values: Vec<ValuesOut>,
    pub hooks: Vec<Converted>,
    pub installed: bool,
    /// `helmDefaults.skipCRDs`: helm installed it with `--skip-crds`.
    pub skip_crds: bool,
    /// The release's own helm settings (`helm.*`).
    pub helm: Map<String, Value>,
    /// The Flux HelmRelease (absolute path) whose chart, version and
    /// `spec.values` are exactly what the helmfile installs: it becomes
    /// `from:` when the Flux tree is known ([`Imported::flux`]).
    pub from_candidate: Option<PathBuf>,
    /// `from: { helmRelease }` written (relative to the Flux root), with
    /// `ownership: handover`: chart and values are not written then.
    pub from: Option<FromOut>,
    pub labels: BTreeMap<String, String>,
    /// What was not converted: written as `todo:`, which `plan`, `check`
    /// and `apply` refuse until a person has done it and removed it.
    pub todo: Vec<Issue>,
    /// Other files that define the same release the same way.
    pub also: Vec<(PathBuf, usize)>,
    /// A CRD-only file that defines it too: its CRDs go to the CRD phase.
    pub crd_stage: Option<PathBuf>,
    /// The Flux HelmRelease (`namespace/name` and its file under the Flux
    /// root) that manages this release: it is written `ownership: handover`.
    pub flux_managed: Option<(String, String)>,
    /// Its settings with no effect on a bootstrap ([`Imported::notes`]).
    pub notes: Vec<Issue>,
    /// Its values template read a file of several documents whose later
    /// one is its Flux HelmRelease (see [`FluxDocument`]): read with `from:`.
    pub flux_document: Option<FluxDocument>,
}

/// A release read from the Flux tree (docs/design.md#from-a-flux-helmrelease).
pub struct FromOut {
    /// The HelmRelease file, absolute.
    pub helmrelease: PathBuf,
    /// The template that read its `spec.values`, absolute.
    pub template: PathBuf,
    /// The template read another document of the file (see
    /// [`FluxDocument`]): said where `from:` is written.
    pub document: Option<FluxDocument>,
}

/// The Flux tree `from:` is resolved in: cluster.yaml `flux:`.
pub struct FluxOut {
    /// The directory Flux's GitRepository is rooted at, absolute.
    pub root: PathBuf,
    /// `spec.sync.path` of the FluxInstance (flux-instance chart values),
    /// else the directory of the Flux Kustomization that reaches the
    /// HelmReleases read.
    pub entrypoint: String,
    /// The file that says so (the flux-instance values, or the
    /// Kustomization's file), absolute.
    pub source: PathBuf,
    /// Found through a Flux Kustomization, not a FluxInstance.
    pub by_kustomization: bool,
}

impl ReleaseOut {
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum ChartOut {
    Repo {
        repo: String,
        name: String,
    },
    Oci(String),
    /// A chart directory, absolute.
    Path(PathBuf),
}

pub struct Chart {
    pub chart: ChartOut,
    pub version: Option<String>,
}

pub enum ValuesOut {
    /// A plain values file, referenced where it is (absolute).
    InPlace(PathBuf),
    /// Values helmfile computed, written to `releases/values/…`.
    Generated {
        values: Map<String, Value>,
        note: ValuesNote,
        /// It reads the environment (`env`/`requiredEnv` of the helmfile):
        /// written as a `.hbs` template whose `{{env}}` bootstrap renders.
        env: bool,
    },
}

/// Where computed values came from, said with paths relative to the file
/// that says it.
pub enum ValuesNote {
    Flux {
        helmrelease: PathBuf,
        template: PathBuf,
    },
    Rendered(PathBuf),
    Text(String),
}

impl ValuesNote {
    pub fn text(&self, dir: &Path) -> String {
        match self {
            ValuesNote::Flux {
                helmrelease,
                template,
            } => format!(
                "spec.values of the Flux HelmRelease {}, as {} reads it; copied at import time, so keep the two in step",
                relative(dir, helmrelease).display(),
                relative(dir, template).display()
            ),
            ValuesNote::Rendered(template) => {
                format!(
                    "rendered from {} at import time",
                    relative(dir, template).display()
                )
            }
            ValuesNote::Text(text) => text.clone(),
        }
    }
}

/// Reads every PATH (in order) and converts what it finds.
pub fn import(
    paths: &[PathBuf],
    cluster: &str,
    root: &Path,
    options: &Options,
) -> Result<Imported, Error> {
    let root = hooks::absolute(root);
    let mut issues = Vec::new();
    let mut imported = Imported {
        cluster: cluster.to_string(),
        sources: Vec::new(),
        groups: Vec::new(),
        context: None,
        flux: None,
        issues: Vec::new(),
        notes: Vec::new(),
        renderer: match &options.helmfile {
            Some(h) => super::Renderer::Helmfile(h.clone()),
            None => super::Renderer::Subset(options.without.clone()),
        },
    };
    let mut files = Vec::new();
    let mut rendered = Vec::new();
    for path in paths {
        let listed =
            helmfile::state_files(path).map_err(|m| Error::config(Problem::new(m.to_string())))?;
        if let Some(hf) = &options.helmfile {
            // One state file at a time: the files are the ones listed here.
            for file in &listed {
                match super::rendered::build(hf, file, options.environment.as_deref()) {
                    Ok(states) => rendered.extend(states),
                    Err(why) => issues.push(Issue::new(
                        file,
                        0,
                        "helmfile build",
                        format!("helmfile could not render it ({why}); the importer's own template subset read it instead: fix what helmfile says (a variable to set, `--environment`) and import again"),
                    )),
                }
            }
        }
        files.extend(listed);
    }
    for file in files {
        let key = super::gotmpl::normalize(&hooks::absolute(&file));
        if let Some(at) = rendered.iter().position(|r| r.source == key) {
            let state = helmfile::State::rendered(&file, rendered.remove(at));
            imported.sources.push(state.path.clone());
            let group = convert_state(&state, &root, &mut imported.context, &mut issues);
            if !group.releases.is_empty() {
                imported.groups.push(group);
            }
            continue;
        }
        let before = issues.len();
        let state = match helmfile::load(&file, &mut issues) {
            Ok(state) => state,
            Err(declared) => {
                let why: Vec<Issue> = issues[before..].to_vec();
                let group = unreadable(&file, &declared, &why, &mut issues);
                imported.sources.push(file);
                if !group.releases.is_empty() {
                    imported.groups.push(group);
                }
                continue;
            }
        };
        imported.sources.push(state.path.clone());
        let group = convert_state(&state, &root, &mut imported.context, &mut issues);
        if !group.releases.is_empty() {
            imported.groups.push(group);
        }
    }
    for group in &imported.groups {
        imported.notes.extend(group.notes.iter().cloned());
        for release in &group.releases {
            imported.notes.extend(release.notes.iter().cloned());
        }
    }
    merge_duplicates(&mut imported.groups)?;
    resolve_needs(&mut imported.groups, &mut issues);
    order_files(&mut imported.groups);
    imported.flux = flux_tree(&imported.groups).or_else(|| kustomization_tree(&imported.groups));
    if let Some(flux) = &imported.flux {
        read_from_flux(&mut imported.groups, flux);
        flux_managed(&mut imported.groups, flux);
    }
    for release in imported.groups.iter_mut().flat_map(|g| &mut g.releases) {
        if let (Some(doc), None) = (&release.flux_document, &release.from) {
            let why = if imported.flux.is_none() {
                "the Flux tree it belongs to was not found (no FluxInstance sync path in the imported values, no Flux Kustomization above it)"
            } else {
                "it does not install what the helmfile names (chart URL and tag of its OCIRepository, release name and namespace, no valuesFrom)"
            };
            let issue = Issue::new(
                &doc.template,
                1,
                format!("fromYaml {}", doc.file.display()),
                format!(
                    "{}; {} holds {} documents and `fromYaml` reads only {}, as helmfile does (helmfile fails the same way); the HelmRelease of `{}` is document {}, but {why}: write `from: {{ helmRelease: FILE }}` with `ownership: handover`, or values of your own",
                    doc.failure,
                    doc.file.display(),
                    doc.total,
                    doc.first,
                    release.id(),
                    doc.helmrelease
                ),
            );
            issues.push(issue.clone());
            release.todo.push(issue);
        }
    }
    let mut stems: BTreeMap<String, usize> = BTreeMap::new();
    for group in &mut imported.groups {
        let n = stems.entry(group.stem.clone()).or_default();
        *n += 1;
        if *n > 1 {
            group.stem = format!("{}-{n}", group.stem);
        }
    }
    // In the order of the files read, then by line.
    let order: Vec<PathBuf> = imported.sources.clone();
    let rank = |file: &Path| order.iter().position(|s| s == file).unwrap_or(usize::MAX);
    issues.sort_by(|a, b| (rank(&a.file), &a.file, a.line).cmp(&(rank(&b.file), &b.file, b.line)));
    imported.issues = issues;
    Ok(imported)
}

/// The releases of a state file that could not be read as a whole (a
/// template in it the importer does not evaluate, YAML that does not
/// parse): each is still written, named as the text declares it, with
/// what went wrong as its `todo`, so that no release goes missing unnoticed.
fn unreadable(
    file: &Path,
    declared: &[helmfile::Declared],
    why: &[Issue],
    issues: &mut Vec<Issue>,
) -> Group {
    let names: Vec<String> = declared
        .iter()
        .filter(|d| !d.name.contains("{{"))
        .map(|d| d.name.clone())
        .collect();
    let mut group = Group {
        source: file.to_path_buf(),
        stem: stem(file),
        crds_only: None,
        helm_defaults: Map::new(),
        notes: Vec::new(),
        releases: Vec::new(),
    };
    let cause = why
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join("; ");
    for d in declared {
        let templated = |t: &str| t.contains("{{") || t.contains("${bootstrap:env");
        if templated(&d.name) || crate::validate::dns_label(&d.name).is_err() {
            continue;
        }
        let mut todo = vec![Issue::new(
            file,
            d.line,
            format!("name: {}", d.name),
            format!(
                "its file could not be read as a whole ({cause}), so nothing of this release but its name was imported; write its chart, version, values and needs"
            ),
        )];
        let namespace = match d.namespace.as_deref() {
            Some(ns) if !templated(ns) && crate::validate::dns_label(ns).is_ok() => ns.to_string(),
            _ => {
                todo.push(Issue::new(
                    file,
                    d.line,
                    format!("name: {}", d.name),
                    "its namespace could not be read; written as `default`: write the namespace",
                ));
                "default".to_string()
            }
        };
        group.releases.push(ReleaseOut {
            name: d.name.clone(),
            namespace,
            source: file.to_path_buf(),
            line: d.line,
            chart: None,
            chart_note: None,
            needs: Vec::new(),
            wait: None,
            timeout: None,
            values: Vec::new(),
            hooks: Vec::new(),
            installed: true,
            skip_crds: false,
            helm: Map::new(),
            from_candidate: None,
            from: None,
            labels: BTreeMap::new(),
            todo,
            also: Vec::new(),
            crd_stage: None,
            flux_managed: None,
            notes: Vec::new(),
            flux_document: None,
        });
    }
    if !names.is_empty() {
        issues.push(Issue::new(
            file,
            0,
            "releases",
            format!(
                "the file could not be read, so its releases {} are written with a `todo` and nothing but their names",
                names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    group
}

/// One release defined in several state files (helmfile installs it once
/// per file, the last one winning): the same definition twice is one
/// release, a CRD-only one and an installing one are the installing one
/// with its CRDs applied in the CRD phase, anything else stops the import
/// naming both places, since bootstrap would otherwise install one of them
/// silently.
fn merge_duplicates(groups: &mut [Group]) -> Result<(), Error> {
    let mut problems = Vec::new();
    let mut seen: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut drop: Vec<(usize, usize)> = Vec::new();
    for g in 0..groups.len() {
        for r in 0..groups[g].releases.len() {
            let id = groups[g].releases[r].id();
            let Some(&(fg, fr)) = seen.get(&id) else {
                seen.insert(id, (g, r));
                continue;
            };
            if fg == g {
                continue; // within one file: `plan` reports the duplicate id
            }
            let (first_crds, later_crds) = (
                groups[fg].crds_only.is_some(),
                groups[g].crds_only.is_some(),
            );
            let first = &groups[fg].releases[fr];
            let later = &groups[g].releases[r];
            let at = (later.source.clone(), later.line);
            if first_crds == later_crds && same_install(first, later) {
                let needs = later.needs.clone();
                let first = &mut groups[fg].releases[fr];
                first.also.push(at);
                for need in needs {
                    if !first.needs.iter().any(|(n, _)| *n == need.0) {
                        first.needs.push(need);
                    }
                }
                drop.push((g, r));
            } else if first_crds != later_crds && same_chart(first, later) {
                // The installing one stays, its CRDs in the CRD phase.
                let (keep, gone) = if first_crds {
                    ((g, r), (fg, fr))
                } else {
                    ((fg, fr), (g, r))
                };
                let gone_at = {
                    let r = &groups[gone.0].releases[gone.1];
                    (r.source.clone(), r.line)
                };
                let kept = &mut groups[keep.0].releases[keep.1];
                kept.crd_stage = Some(gone_at.0.clone());
                kept.also.push(gone_at);
                drop.push(gone);
                seen.insert(id, keep);
            } else {
                problems.push(
                    Problem::new(format!(
                        "release `{id}` is defined at {}:{} and again, differently, at {}:{}; bootstrap installs a release once: make the two definitions the same, or import only one of the files",
                        first.source.display(),
                        first.line,
                        later.source.display(),
                        later.line
                    ))
                    .file(&later.source)
                    .at(later.line as u64, 0),
                );
            }
        }
    }
    if !problems.is_empty() {
        return Err(Error::Config(problems));
    }
    drop.sort();
    for (g, r) in drop.into_iter().rev() {
        groups[g].releases.remove(r);
    }
    Ok(())
}

fn same_chart(a: &ReleaseOut, b: &ReleaseOut) -> bool {
    match (&a.chart, &b.chart) {
        (Some(x), Some(y)) => x.chart == y.chart && x.version == y.version,
        _ => false,
    }
}

/// Two definitions install the same thing the same way.
fn same_install(a: &ReleaseOut, b: &ReleaseOut) -> bool {
    let values = |r: &ReleaseOut| -> Vec<Value> {
        r.values
            .iter()
            .map(|v| match v {
                ValuesOut::InPlace(p) => Value::String(p.display().to_string()),
                ValuesOut::Generated { values, .. } => Value::Object(values.clone()),
            })
            .collect()
    };
    // `needs` may differ (each file names its own neighbours): the merged
    // release keeps all of them.
    same_chart(a, b)
        && values(a) == values(b)
        && a.hooks == b.hooks
        && a.wait.as_ref().map(|w| w.0) == b.wait.as_ref().map(|w| w.0)
        && a.timeout.as_ref().map(|t| &t.0) == b.timeout.as_ref().map(|t| &t.0)
        && a.helm == b.helm
        && a.installed == b.installed
        && a.todo.is_empty()
        && b.todo.is_empty()
}

/// The defaults `helmDefaults` sets for every release of a file.
#[derive(Default)]
struct Defaults {
    wait: Option<bool>,
    skip_crds: bool,
    /// `helm.*` keys (docs/design.md#defaults).
    helm: Map<String, Value>,
    timeout: Option<String>,
    notes: Vec<Issue>,
}

fn convert_state(
    state: &State,
    root: &Path,
    context: &mut Option<String>,
    issues: &mut Vec<Issue>,
) -> Group {
    let crds_only = crds_only(state);
    for (key, value) in &state.doc {
        // helmfile evaluated the environment and state values already.
        if state.embedded.is_some() && matches!(key.as_str(), "environments" | "values") {
            continue;
        }
        if let Some(reason) = top_level(key, value) {
            let line = helmfile::line_of(&state.text, &[key]);
            issues.push(Issue::new(&state.path, line, key, reason));
        }
    }
    let repos = repositories(state, issues);
    let defaults = helm_defaults(state, crds_only.is_some(), context, issues);
    let stem = stem(&state.path);
    let mut group = Group {
        source: state.path.clone(),
        stem,
        crds_only,
        helm_defaults: defaults.helm.clone(),
        notes: defaults.notes.clone(),
        releases: Vec::new(),
    };
    let override_namespace = state.doc.get("namespace").and_then(Value::as_str);
    for release in helmfile::releases(state, issues) {
        if let Some(out) = convert_release(
            state,
            &release,
            &repos,
            &defaults,
            override_namespace,
            group.crds_only.is_some(),
            root,
            issues,
        ) {
            group.releases.push(out);
        }
    }
    group
}

/// `releases/<stem>.yaml` for `helmfile.d/00-crds.yaml.gotmpl` is `00-crds`;
/// a plain `helmfile.yaml` is `helmfile`.
fn stem(path: &Path) -> String {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let mut stem = name.trim_end_matches(".gotmpl").to_string();
    for ext in [".yaml", ".yml"] {
        if let Some(s) = stem.strip_suffix(ext) {
            stem = s.to_string();
        }
    }
    stem
}

/// A file whose releases helmfile only renders for their CRDs: named
/// `crds` (after a `00-` style prefix), or templating with
/// `--include-crds` in `helmDefaults.args` (what a `helmfile template |
/// yq 'select(.kind == "CustomResourceDefinition")'` stage passes).
fn crds_only(state: &State) -> Option<String> {
    let stem = stem(&state.path);
    let bare = stem
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .trim_start_matches(['-', '_']);
    let args: Vec<&str> = state
        .doc
        .get("helmDefaults")
        .and_then(|d| d.get("args"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let by_name = matches!(bare, "crds" | "crd");
    let by_args = args.contains(&"--include-crds");
    match (by_name, by_args) {
        (true, true) => Some(format!(
            "the file is named `{stem}` and templates with `--include-crds`: its releases are rendered only for their CRDs"
        )),
        (true, false) => Some(format!("the file is named `{stem}`: its releases are rendered only for their CRDs")),
        (false, true) => Some(
            "helmDefaults.args has `--include-crds` (a `helmfile template` stage for CRDs): its releases are rendered only for their CRDs"
                .to_string(),
        ),
        (false, false) => None,
    }
}

/// Why a top-level key is not converted; `None` when it is.
fn top_level(key: &str, value: &Value) -> Option<String> {
    Some(match key {
        "releases" | "repositories" | "helmDefaults" | "templates" | "bases" | "defaultInherit"
        | "namespace" => return None,
        "environments" => "helmfile environments become bootstrap clusters: one clusters/NAME/cluster.yaml each, per-cluster values under `values:` or `overrides:`".into(),
        "values" => "state values (`.Values`) have no bootstrap equivalent; per-cluster values go in clusters/NAME/cluster.yaml `values:`".into(),
        "helmfiles" => "sub-helmfiles are not followed; import each one by naming it on the command line".into(),
        "hooks" => "global hooks have no bootstrap equivalent; attach them to a release's `hooks:`".into(),
        "commonLabels" => "release labels select releases on helmfile's command line; bootstrap selects with `--only`".into(),
        _ if value.is_null() => return None,
        other => format!("`{other}` has no bootstrap equivalent"),
    })
}

struct Repo {
    url: String,
    oci: bool,
}

fn repositories(state: &State, issues: &mut Vec<Issue>) -> BTreeMap<String, Repo> {
    let mut repos = BTreeMap::new();
    let list = state
        .doc
        .get("repositories")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for repo in list {
        let name = repo
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let url = repo
            .get("url")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let line =
            helmfile::find_key_between(&state.text, 1, usize::MAX, "repositories").unwrap_or(0);
        for key in [
            "username",
            "password",
            "caFile",
            "certFile",
            "keyFile",
            "registryConfig",
        ] {
            if repo.get(key).is_some_and(|v| !v.is_null()) {
                issues.push(Issue::new(
                    &state.path,
                    line,
                    format!("repositories {name} {key}"),
                    "repository credentials are not passed by bootstrap; log in with `helm registry login` or a credentials helper before `apply`",
                ));
            }
        }
        let oci =
            repo.get("oci").and_then(Value::as_bool).unwrap_or(false) || url.starts_with("oci://");
        repos.insert(name, Repo { url, oci });
    }
    repos
}

/// Reads `helmDefaults`; what has no bootstrap equivalent becomes an issue.
fn helm_defaults(
    state: &State,
    crds_only: bool,
    context: &mut Option<String>,
    issues: &mut Vec<Issue>,
) -> Defaults {
    let mut defaults = Defaults::default();
    let Some(Value::Object(map)) = state.doc.get("helmDefaults") else {
        return defaults;
    };
    let section = helmfile::line_of(&state.text, &["helmDefaults"]);
    for (key, value) in map {
        let line =
            helmfile::find_key_between(&state.text, section, usize::MAX, key).unwrap_or(section);
        let issue = |reason: String| {
            Issue::new(
                &state.path,
                line,
                format!("helmDefaults.{key}: {}", short(value)),
                reason,
            )
        };
        match key.as_str() {
            "wait" => defaults.wait = value.as_bool(),
            "skipCRDs" => defaults.skip_crds = value.as_bool().unwrap_or(false),
            "timeout" => match value.as_u64() {
                Some(seconds) if seconds > 0 => defaults.timeout = Some(seconds_text(seconds)),
                // helmfile passes no --timeout then (its `build` prints 0 for unset).
                Some(0) => {}
                _ => issues.push(issue("is not a positive number of seconds".into())),
            },
            "args" => {
                for arg in value.as_array().into_iter().flatten() {
                    let arg = arg.as_str().unwrap_or("");
                    if crds_only && matches!(arg, "--include-crds" | "--no-hooks") {
                        continue;
                    }
                    issues.push(Issue::new(
                        &state.path,
                        line,
                        format!("helmDefaults.args {arg}"),
                        "extra helm arguments have no bootstrap equivalent",
                    ));
                }
            }
            "kubeContext" => match value.as_str() {
                Some(c) if context.as_deref().is_none_or(|known| known == c) => {
                    *context = Some(c.to_string())
                }
                Some(c) => issues.push(issue(format!(
                    "a second kubeconfig context (`{c}` after `{}`); one cluster has one context",
                    context.as_deref().unwrap_or("")
                ))),
                None => {}
            },
            other => {
                if let Some((key, value)) = helm_key(other, value) {
                    defaults.helm.insert(key.to_string(), value);
                } else if let Some(why) = no_effect(other, value) {
                    defaults.notes.push(issue(why));
                } else if let Some(reason) = helm_flag(other, value) {
                    issues.push(issue(reason));
                }
            }
        }
    }
    defaults
}

/// A helm setting bootstrap passes per release (docs/design.md#defaults:
/// `helm.*` of a release or of `defaults`), as `(key, value)`; `None` when
/// it has no such key. `serverSide: auto` (helmfile decides) has none.
fn helm_key(key: &str, value: &Value) -> Option<(&'static str, Value)> {
    let flag = |name: &'static str| value.as_bool().map(|b| (name, Value::Bool(b)));
    match key {
        "cleanupOnFail" => flag("cleanupOnFail"),
        "force" => flag("force"),
        "forceConflicts" => flag("forceConflicts"),
        "disableOpenAPIValidation" => flag("disableOpenAPIValidation"),
        "historyMax" => value.as_u64().map(|n| ("historyMax", Value::from(n))),
        "serverSide" => match value {
            Value::Bool(b) => Some(("serverSide", Value::Bool(*b))),
            Value::String(s) if s == "true" || s == "false" => {
                Some(("serverSide", Value::Bool(s == "true")))
            }
            _ => None,
        },
        _ => None,
    }
}

/// Why a helm setting (in `helmDefaults` or a release) that is on has no
/// effect on a bootstrap, so that nothing is lost by not carrying it over.
fn no_effect(key: &str, value: &Value) -> Option<String> {
    match key {
        // helmfile passes `--recreate-pods`: helm 3 deletes the pods of an
        // upgraded release with it (pkg/action/upgrade.go, never on an
        // install); helm 4 has no such flag (helmfile fails with it there).
        "recreatePods" if value.as_bool() == Some(true) => Some(
            "helm 3 recreates pods only when it upgrades a release with it and helm 4 has no such flag, while bootstrap installs the releases of a new cluster".into(),
        ),
        _ => None,
    }
}

/// Why a helm setting (in `helmDefaults` or a release) is not converted;
/// `None` when bootstrap already behaves that way or it is off.
fn helm_flag(key: &str, value: &Value) -> Option<String> {
    let off = matches!(value, Value::Null | Value::Bool(false))
        || value.as_array().is_some_and(|a| a.is_empty())
        || value.as_str() == Some("");
    match key {
        // helm --wait waits for Jobs only with --wait-for-jobs; bootstrap's
        // `wait` includes Jobs, so it covers both.
        "waitForJobs" | "skipDeps" | "skipRefresh" | "waitRetries" => None,
        "createNamespace" if value.as_bool() != Some(false) => None,
        "createNamespace" => Some("bootstrap always installs with --create-namespace".into()),
        "skipCRDs" if value.as_bool() == Some(true) => None,
        _ if off => None,
        "cleanupOnFail"
        | "forceConflicts"
        | "force"
        | "recreatePods"
        | "atomic"
        | "rollbackOnFailure"
        | "historyMax"
        | "serverSide"
        | "takeOwnership"
        | "reuseValues"
        | "disableValidation"
        | "disableOpenAPIValidation"
        | "skipSchemaValidation"
        | "postRenderer"
        | "postRendererArgs"
        | "verify"
        | "devel"
        | "enableDNS"
        | "insecureSkipTLSVerify"
        | "plainHttp"
        | "keyring"
        | "cascade"
        | "deleteWait"
        | "deleteTimeout"
        | "syncArgs"
        | "diffArgs"
        | "templateArgs"
        | "kubeContext"
        | "description"
        | "suppressOutputLineRegex"
        | "trackMode" => Some(format!(
            "the helm setting `{key}` has no bootstrap equivalent (its `helm:` keys are cleanupOnFail, force, historyMax, disableOpenAPIValidation, serverSide, forceConflicts)"
        )),
        _ => Some(format!("`{key}` has no bootstrap equivalent")),
    }
}

fn short(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Seconds the way bootstrap durations read: `10m`, `90s`.
fn seconds_text(seconds: u64) -> String {
    if seconds.is_multiple_of(3600) {
        format!("{}h", seconds / 3600)
    } else if seconds.is_multiple_of(60) {
        format!("{}m", seconds / 60)
    } else {
        format!("{seconds}s")
    }
}

#[allow(clippy::too_many_arguments)]
fn convert_release(
    state: &State,
    release: &HelmfileRelease,
    repos: &BTreeMap<String, Repo>,
    defaults: &Defaults,
    override_namespace: Option<&str>,
    crds_only: bool,
    root: &Path,
    all_issues: &mut Vec<Issue>,
) -> Option<ReleaseOut> {
    let spec = &release.spec;
    // Everything not converted in this release is also its `todo:`.
    let mut own = release.issues.clone();
    let issues = &mut own;
    let text = |k: &str| {
        spec.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .unwrap_or("")
            .to_string()
    };
    let name = text("name");
    let at = |key: &str| release.origin(key, state);
    if name.is_empty() {
        all_issues.push(Issue::new(
            &state.path,
            release.line,
            "releases",
            "a release has no name",
        ));
        return None;
    }
    let mut namespace = text("namespace");
    if namespace.is_empty() {
        namespace = override_namespace.unwrap_or("").to_string();
    }
    if namespace.is_empty() {
        issues.push(Issue::new(
            &state.path,
            release.line,
            format!("name: {name}"),
            "has no namespace (helm would use the kubeconfig's); bootstrap needs one: written as `default`",
        ));
        namespace = "default".into();
    }
    let mut helm = Map::new();
    let mut notes = Vec::new();
    for key in spec.keys() {
        let reason = match key.as_str() {
            "name" | "namespace" | "chart" | "version" | "needs" | "values" | "set" | "setString"
            | "secrets" | "hooks" | "installed" | "wait" | "timeout" => continue,
            "labels" => continue,
            "condition" => "a condition on helmfile state values; list the release in clusters/NAME/cluster.yaml `releases:` for the clusters that get it".to_string(),
            "valuesTemplate" | "setTemplate" => format!("`{key}` is evaluated with helmfile state values; write the values it produces into a values file"),
            "kubeContext" => "a per-release kubeconfig context; bootstrap installs each cluster's releases in its own context".to_string(),
            other => {
                if let Some((k, v)) = helm_key(other, &spec[key]) {
                    helm.insert(k.to_string(), v);
                    continue;
                }
                if let Some(why) = no_effect(other, &spec[key]) {
                    let o = at(key);
                    notes.push(Issue::new(
                        &o.file,
                        o.line,
                        format!("{key}: {}", short(&spec[key])),
                        why,
                    ));
                    continue;
                }
                match helm_flag(other, &spec[key]) {
                    Some(reason) => reason,
                    None => continue,
                }
            }
        };
        let o = at(key);
        issues.push(Issue::new(
            &o.file,
            o.line,
            format!("{key}: {}", short(&spec[key])),
            reason,
        ));
    }
    let chart = chart(release, state, repos, issues);
    // Notes name files the way a release file does: from releases/.
    let notes_dir = root.join("releases");
    let chart_note = chart
        .as_ref()
        .and_then(|_| chart_source(release, &notes_dir));
    let installed = spec
        .get("installed")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let wait = match spec.get("wait").and_then(Value::as_bool) {
        Some(w) => Some((w, "wait".to_string())),
        None => defaults.wait.map(|w| (w, "helmDefaults.wait".to_string())),
    };
    let timeout = match spec.get("timeout").and_then(Value::as_u64) {
        Some(s) if s > 0 => Some((seconds_text(s), "timeout".to_string())),
        _ => defaults
            .timeout
            .clone()
            .map(|t| (t, "helmDefaults.timeout".to_string())),
    };
    let needs = spec
        .get("needs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(|s| (s.trim().to_string(), None)))
                .collect()
        })
        .unwrap_or_default();
    let mut values = Vec::new();
    let mut flux_document = None;
    for entry in &release.values {
        match entry {
            ValuesEntry::File(path) => values.push(ValuesOut::InPlace(path.clone())),
            ValuesEntry::FluxDocument(doc) => flux_document = Some(doc.clone()),
            ValuesEntry::Computed {
                values: map,
                from,
                reads,
            } => {
                let note = match (from, flux_values(map, reads)) {
                    (Some(from), Some(hr)) => ValuesNote::Flux {
                        helmrelease: hr,
                        template: from.clone(),
                    },
                    (Some(from), None) => ValuesNote::Rendered(from.clone()),
                    (None, _) => {
                        ValuesNote::Text(format!("inline values of {}", state.path.display()))
                    }
                };
                if !map.is_empty() {
                    values.push(ValuesOut::Generated {
                        values: map.clone(),
                        note,
                        env: false,
                    });
                }
            }
        }
    }
    // helmfile gives helm the `secrets:` (decrypted) after `values:` and
    // before `set:` (helmfile pkg/state/state.go, namespaceAndValuesFlags).
    for entry in spec
        .get("secrets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match secrets_file(state, entry) {
            Ok(path) => values.push(ValuesOut::InPlace(path)),
            Err(reason) => {
                let o = at("secrets");
                issues.push(Issue::new(
                    &o.file,
                    o.line,
                    format!("secrets: {}", short(entry)),
                    reason.to_string(),
                ));
            }
        }
    }
    if let Some(set) = set_values(release, state, issues) {
        values.push(set);
    }
    for entry in &mut values {
        if let ValuesOut::Generated {
            values: map, env, ..
        } = entry
        {
            match env_leaves(map) {
                Ok(found) => *env = found,
                Err(mixed) => {
                    let o = at("values");
                    issues.push(Issue::new(
                        &o.file,
                        o.line,
                        mixed.0.clone(),
                        mixed.to_string(),
                    ));
                }
            }
        }
    }
    for key in ["chart", "version", "namespace"] {
        if let Some(text) = spec.get(key).and_then(Value::as_str)
            && super::gotmpl::has_env_mark(text)
        {
            let o = at(key);
            issues.push(env_issue(&o, key, text));
        }
    }
    let hooks = convert_hooks(state, release, &namespace, crds_only, root, issues);
    let labels = labels(release, state, issues);
    let from_candidate = match (&chart, crds_only, &flux_document) {
        // The HelmRelease is all the values the template meant.
        (Some(chart), false, Some(doc)) if values.is_empty() => {
            candidate(release, &doc.file, chart, &name, &namespace)
        }
        (Some(chart), false, None) => from_candidate(release, &values, chart, &name, &namespace),
        _ => None,
    };
    Some(ReleaseOut {
        name,
        namespace,
        source: state.path.clone(),
        line: release.line,
        chart,
        chart_note,
        needs,
        wait,
        timeout,
        values,
        hooks,
        installed,
        skip_crds: defaults.skip_crds,
        helm,
        from_candidate,
        from: None,
        labels,
        todo: {
            all_issues.extend(own.iter().cloned());
            own
        },
        also: Vec::new(),
        crd_stage: None,
        flux_managed: None,
        notes,
        flux_document,
    })
}

/// An environment variable where bootstrap takes no template.
fn env_issue(at: &helmfile::Origin, key: &str, text: &str) -> Issue {
    let names = super::gotmpl::env_mark_names(text).join("`, `");
    Issue::new(
        &at.file,
        at.line,
        format!("{key}: {}", super::gotmpl::env_marks_to_templates(text)),
        format!(
            "reads the environment variable `{names}`; bootstrap has no template in `{key}`: write the value"
        ),
    )
}

/// Whether the values read the environment: `Ok(true)` when every such
/// leaf is exactly one `env`/`requiredEnv` and nothing else holds `{{`
/// (so the file can be a `.hbs` template), `Err` with the leaf when not.
fn env_leaves(values: &Map<String, Value>) -> Result<bool, EnvInText> {
    fn walk(value: &Value, marks: &mut usize, braces: &mut Option<String>) {
        match value {
            Value::String(s) if super::gotmpl::has_env_mark(s) => {
                let whole = super::gotmpl::env_mark_names(s).len() == 1
                    && super::gotmpl::env_marks_to_templates(s).starts_with("{{")
                    && super::gotmpl::env_marks_to_templates(s).ends_with("}}")
                    && !s.contains("{{");
                if whole {
                    *marks += 1;
                } else {
                    *braces = Some(super::gotmpl::env_marks_to_templates(s));
                }
            }
            Value::String(s) if s.contains("{{") => *braces = Some(s.clone()),
            Value::Array(list) => list.iter().for_each(|v| walk(v, marks, braces)),
            Value::Object(map) => map.values().for_each(|v| walk(v, marks, braces)),
            _ => {}
        }
    }
    let (mut marks, mut braces) = (0, None);
    for value in values.values() {
        walk(value, &mut marks, &mut braces);
    }
    match (marks, braces) {
        (0, _) => Ok(false),
        (_, None) => Ok(true),
        (_, Some(leaf)) => Err(EnvInText(leaf)),
    }
}

/// A values leaf that reads the environment inside other text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "reads the environment inside other text (or next to other `{{{{`); bootstrap templates a values file only as a whole `.hbs`: write the value, or a values file `NAME.yaml.hbs` with `{{{{env \"NAME\"}}}}`"
)]
struct EnvInText(String);

/// helmfile's release `labels` (what `--selector` matches) as bootstrap's
/// `labels:` (docs/design.md#selection), which are strings.
fn labels(
    release: &HelmfileRelease,
    state: &State,
    issues: &mut Vec<Issue>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (key, value) in release
        .spec
        .get("labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        match value {
            Value::String(s) if !s.contains("{{") => {
                out.insert(key.clone(), s.clone());
            }
            Value::Bool(_) | Value::Number(_) => {
                out.insert(key.clone(), value.to_string());
            }
            other => {
                let at = release.origin("labels", state);
                issues.push(Issue::new(
                    &at.file,
                    at.line,
                    format!("labels {key}: {}", short(other)),
                    "is not a plain string; write the label's value",
                ));
            }
        }
    }
    out
}

/// The Flux HelmRelease this release can be read from with `from:`, giving
/// the same install as the helmfile: its only values are the HelmRelease's
/// `spec.values` (no `valuesFrom`, which the helmfile did not read), it
/// manages this very release (docs/design.md#release-identity), and its
/// `chartRef` names an OCIRepository (next to it or read by the template)
/// with the helmfile's chart URL and version.
fn from_candidate(
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
fn candidate(
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
    same_chart.then(|| super::gotmpl::normalize(&super::hooks::absolute(helmrelease)))
}

/// The Flux tree the imported releases come from: the root Kustomization's
/// path is `spec.sync.path` of the FluxInstance the flux-instance chart
/// creates (its `instance.sync.path` value), and the root is the directory
/// above a HelmRelease to read where that path exists (the repository Flux
/// syncs; flux-operator api/v1/fluxinstance_types.go `Sync.Path`).
fn flux_tree(groups: &[Group]) -> Option<FluxOut> {
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
        by_kustomization: false,
    })
}

/// The Flux tree when no FluxInstance says it: the Flux Kustomization
/// (kustomize.toolkit.fluxcd.io) whose `spec.path` holds the HelmRelease a
/// template read, the widest such path winning (the tree's top, not an
/// app's own Kustomization). The root is the nearest directory above the
/// HelmRelease where that path exists, searched no higher than the
/// directory that holds both the HelmRelease and the state file (the
/// repository); the entrypoint is the directory of the Kustomization's file.
fn kustomization_tree(groups: &[Group]) -> Option<FluxOut> {
    let (hr, state) = groups
        .iter()
        .flat_map(|g| &g.releases)
        .find_map(|r| Some((r.from_candidate.as_ref()?, hooks::absolute(&r.source))))?;
    let common: PathBuf = hr
        .components()
        .zip(super::gotmpl::normalize(&state).components())
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
                let target = super::gotmpl::normalize(&dir.join(path.trim_start_matches("./")));
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
                by_kustomization: true,
            });
        }
    }
    None
}

/// The `*.yaml`/`*.yml` files below `dir` (hidden directories left out),
/// at most `limit` of them.
fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>, limit: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if out.len() >= limit {
            return;
        }
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            yaml_files(&path, out, limit);
        } else if name.ends_with(".yaml") || name.ends_with(".yml") {
            out.push(path);
        }
    }
}

/// Every release with a [`from_candidate`] inside the Flux tree is read
/// from it: `from:` in place of its chart and copied values.
fn read_from_flux(groups: &mut [Group], flux: &FluxOut) {
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
fn flux_managed(groups: &mut [Group], flux: &FluxOut) {
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

/// A `secrets:` entry as a values file bootstrap decrypts with sops itself
/// (docs/design.md#secrets): it must exist and be recognisable as
/// sops-encrypted, by name or by its `sops:` metadata.
fn secrets_file(state: &State, entry: &Value) -> Result<PathBuf, NotSecrets> {
    let Some(path) = entry.as_str().map(str::trim) else {
        return Err(NotSecrets::NotAPath);
    };
    if path.contains("{{") {
        return Err(NotSecrets::Templated);
    }
    let file = super::hooks::absolute(&super::gotmpl::normalize(&state.dir.join(path)));
    let text = std::fs::read_to_string(&file).map_err(NotSecrets::Unreadable)?;
    if !crate::config::sops::named(&file) && !crate::config::sops::has_metadata(&text) {
        return Err(NotSecrets::NotSops);
    }
    Ok(file)
}

/// Why a `secrets:` entry is not converted.
#[derive(Debug, thiserror::Error)]
enum NotSecrets {
    #[error("a `secrets:` entry that is not a path is not converted")]
    NotAPath,
    #[error(
        "a templated `secrets:` path is not converted; write the file's path in the release's `valuesFiles`"
    )]
    Templated,
    #[error("cannot read it ({0}); helmfile fails too")]
    Unreadable(std::io::Error),
    #[error(
        "is not sops-encrypted as bootstrap recognises it (a `*.sops.yaml` name or a top-level `sops:` key); decrypt it into a values file, or re-encrypt it with sops"
    )]
    NotSops,
}

/// The chart reference in bootstrap's terms (docs/design.md#release-file).
fn chart(
    release: &HelmfileRelease,
    state: &State,
    repos: &BTreeMap<String, Repo>,
    issues: &mut Vec<Issue>,
) -> Option<Chart> {
    let spec = &release.spec;
    let chart = spec
        .get("chart")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim()
        .to_string();
    let version = spec
        .get("version")
        .and_then(|v| match v {
            Value::String(s) => Some(s.trim().to_string()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .filter(|v| !v.is_empty());
    let at = release.origin("chart", state);
    if chart.contains("{{") && issues.iter().any(|i| i.field == "chart") {
        // Its template was not evaluated (listed already): the text is no
        // chart reference to judge.
        return None;
    }
    if chart.is_empty() {
        if !issues
            .iter()
            .any(|i| i.field == "chart" && i.file == at.file && i.line == at.line)
        {
            issues.push(Issue::new(
                &at.file,
                at.line,
                "chart",
                "the release has no chart (helmfile fails too)",
            ));
        }
        return None;
    }
    let local = state.dir.join(&chart);
    let reference = if let Some(rest) = chart.strip_prefix("oci://") {
        ChartOut::Oci(format!("oci://{rest}"))
    } else if chart.starts_with("./")
        || chart.starts_with("../")
        || chart.starts_with('/')
        || local.is_dir()
    {
        ChartOut::Path(super::hooks::absolute(&super::gotmpl::normalize(&local)))
    } else if let Some((repo, name)) = chart.split_once('/') {
        match repos.get(repo) {
            Some(Repo { url, oci: true }) => ChartOut::Oci(format!(
                "oci://{}/{name}",
                url.trim_start_matches("oci://").trim_end_matches('/')
            )),
            Some(Repo { url, oci: false }) => ChartOut::Repo {
                repo: url.clone(),
                name: name.to_string(),
            },
            None => {
                issues.push(Issue::new(
                    &at.file,
                    at.line,
                    format!("chart: {chart}"),
                    format!(
                        "the repository `{repo}` is not in `repositories:`, so its URL is unknown"
                    ),
                ));
                return None;
            }
        }
    } else {
        issues.push(Issue::new(
            &at.file,
            at.line,
            format!("chart: {chart}"),
            "is neither `repo/chart`, `oci://…` nor a chart directory",
        ));
        return None;
    };
    let needs_pin = !matches!(reference, ChartOut::Path(_));
    let version_failed = issues
        .iter()
        .any(|i| i.field == "version" && i.file == release.origin("version", state).file);
    match &version {
        _ if version_failed => {}
        None if needs_pin => {
            let at = release.origin("version", state);
            issues.push(Issue::new(
                &at.file,
                at.line,
                format!("chart: {chart}"),
                "has no `version` (helm would take the latest); bootstrap installs pinned versions: add the version to the release file",
            ));
        }
        Some(v) if crate::validate::pinned_version(v).is_err() => {
            let at = release.origin("version", state);
            issues.push(Issue::new(
                &at.file,
                at.line,
                format!("version: {v}"),
                "is a range; bootstrap installs pinned versions: write the exact version in the release file",
            ));
        }
        _ => {}
    }
    Some(Chart {
        chart: reference,
        version,
    })
}

/// "read from …ocirepository.yaml" when the chart and version came from a
/// Flux OCIRepository a template read.
fn chart_source(release: &HelmfileRelease, root: &Path) -> Option<String> {
    let chart = release.spec.get("chart")?.as_str()?;
    for read in &release.chart_reads {
        let docs: Vec<Value> = serde_saphyr::from_multiple(&read.text).unwrap_or_default();
        for doc in docs {
            if doc.get("kind").and_then(Value::as_str) == Some("OCIRepository")
                && doc.pointer("/spec/url").and_then(Value::as_str) == Some(chart)
            {
                return Some(format!(
                    "chart and version: spec.url and spec.ref.tag of the Flux OCIRepository {}, as the helmfile reads them; copied at import time, so keep the two in step",
                    relative(root, &read.path).display()
                ));
            }
        }
    }
    None
}

/// The Flux HelmRelease among `reads` whose `spec.values` are `values`.
fn flux_values(values: &Map<String, Value>, reads: &[super::gotmpl::Read]) -> Option<PathBuf> {
    for read in reads {
        let docs: Vec<Value> = serde_saphyr::from_multiple(&read.text).unwrap_or_default();
        for doc in docs {
            let is_hr = doc.get("kind").and_then(Value::as_str) == Some("HelmRelease")
                && doc
                    .get("apiVersion")
                    .and_then(Value::as_str)
                    .is_some_and(|a| a.starts_with("helm.toolkit.fluxcd.io/"));
            let theirs = doc.pointer("/spec/values").cloned().unwrap_or(Value::Null);
            let same = match &theirs {
                Value::Object(m) => m == values,
                Value::Null => values.is_empty(),
                _ => false,
            };
            if is_hr && same {
                return Some(read.path.clone());
            }
        }
    }
    None
}

/// `set:` and `setString:` as one values file merged last, as helm applies
/// `--set` after every values file. Paths are helm's `--set` keys
/// (`a.b.c`, `\.` for a literal dot); list indices are not converted.
fn set_values(
    release: &HelmfileRelease,
    state: &State,
    issues: &mut Vec<Issue>,
) -> Option<ValuesOut> {
    let mut values = Map::new();
    for (key, as_string) in [("set", false), ("setString", true)] {
        let Some(list) = release.spec.get(key).and_then(Value::as_array) else {
            continue;
        };
        let at = release.origin(key, state);
        for entry in list {
            let name = entry.get("name").and_then(Value::as_str).unwrap_or("");
            let value = match (entry.get("value"), entry.get("values")) {
                (Some(v), _) => typed_set_value(v, as_string),
                (None, Some(Value::Array(list))) => {
                    Value::Array(list.iter().map(|v| typed_set_value(v, as_string)).collect())
                }
                _ => {
                    issues.push(Issue::new(
                        &at.file,
                        at.line,
                        format!("{key} {name}"),
                        "sets no `value` (a `file:` value is not converted)",
                    ));
                    continue;
                }
            };
            // helmfile renders `set` values as templates with `.Release`.
            let value = match value.as_str() {
                Some(text) if text.contains("{{") => {
                    let data = helmfile::release_data(&release.spec);
                    match super::gotmpl::Engine::translating_env(data)
                        .render(text, &at.file, at.line, &state.dir)
                    {
                        Ok(rendered) if super::gotmpl::has_env_mark(&rendered) => {
                            Value::String(rendered)
                        }
                        Ok(rendered) => typed_set_value(&Value::String(rendered), as_string),
                        Err(u) => {
                            issues.push(Issue::from(u));
                            continue;
                        }
                    }
                }
                _ => value,
            };
            let path = split_set_path(name);
            if name.is_empty() || path.iter().any(|p| p.contains('[') || p.is_empty()) {
                issues.push(Issue::new(
                    &at.file,
                    at.line,
                    format!("{key} {name}"),
                    "a `--set` path with list indices is not converted; write the value into a values file",
                ));
                continue;
            }
            insert_path(&mut values, &path, value);
        }
    }
    (!values.is_empty()).then(|| ValuesOut::Generated {
        env: false,
        values,
        note: ValuesNote::Text(format!(
            "`set:` of the release in {}, applied last as helm applies --set",
            state.path.display()
        )),
    })
}

/// helm's `--set` typing (helm `pkg/strvals/parser.go` `typedVal`): `true`,
/// `false`, `null` and integers without a leading zero are typed, the rest
/// stays a string; `setString` keeps everything a string.
fn typed_set_value(value: &Value, as_string: bool) -> Value {
    let text = match value {
        Value::String(s) => s.clone(),
        other if as_string => short(other),
        other => return other.clone(),
    };
    if as_string {
        return Value::String(text);
    }
    match text.as_str() {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        "null" => Value::Null,
        t if !(t.starts_with('0') && t.len() > 1) => t
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or(Value::String(text)),
        _ => Value::String(text),
    }
}

fn split_set_path(name: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut chars = name.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(next), Some(p)) = (chars.next(), parts.last_mut()) {
                    p.push(next);
                }
            }
            '.' => parts.push(String::new()),
            c => {
                if let Some(p) = parts.last_mut() {
                    p.push(c);
                }
            }
        }
    }
    parts
}

fn insert_path(values: &mut Map<String, Value>, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut map = values;
    for key in parents {
        let slot = map
            .entry(key.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if !slot.is_object() {
            *slot = Value::Object(Map::new());
        }
        let Value::Object(inner) = slot else { return };
        map = inner;
    }
    map.insert(last.clone(), value);
}

fn convert_hooks(
    state: &State,
    release: &HelmfileRelease,
    namespace: &str,
    crds_only: bool,
    root: &Path,
    issues: &mut Vec<Issue>,
) -> Vec<Converted> {
    let mut out = Vec::new();
    let Some(list) = release.spec.get("hooks").and_then(Value::as_array) else {
        return out;
    };
    let at = release.origin("hooks", state);
    let data = helmfile::release_data(&release.spec);
    let dir = hooks::absolute(&state.dir);
    for hook in list {
        // bootstrap templates hook commands: `env`/`requiredEnv` stay
        // reads of the environment at apply time.
        let render = |text: &str| -> Result<String, Issue> {
            if !text.contains("{{") {
                return Ok(super::gotmpl::env_marks_to_templates(text));
            }
            super::gotmpl::Engine::translating_env(data.clone())
                .render(text, &at.file, at.line, &state.dir)
                .map(|r| super::gotmpl::env_marks_to_templates(&r))
                .map_err(Issue::from)
        };
        let mut argv = Vec::new();
        let mut failed = false;
        if let Some(apply) = hook.get("kubectlApply").and_then(Value::as_object) {
            argv.push("kubectl".to_string());
            argv.push("apply".to_string());
            if let Some(f) = apply.get("filename").and_then(Value::as_str) {
                argv.extend(["-f".to_string(), f.to_string()]);
            } else if let Some(k) = apply.get("kustomize").and_then(Value::as_str) {
                argv.extend(["-k".to_string(), k.to_string()]);
            }
        } else {
            argv.push(
                hook.get("command")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            );
            for arg in hook
                .get("args")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                argv.push(short(arg));
            }
        }
        for arg in argv.iter_mut() {
            match render(arg) {
                Ok(r) => *arg = r,
                Err(issue) => {
                    issues.push(issue);
                    failed = true;
                }
            }
        }
        let was = argv.join(" ");
        if failed {
            continue;
        }
        if argv[0].trim().is_empty() {
            issues.push(Issue::new(
                &at.file,
                at.line,
                "hooks",
                "a hook without a command",
            ));
            continue;
        }
        let events: Vec<&str> = hook
            .get("events")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if crds_only {
            issues.push(Issue::new(
                &at.file,
                at.line,
                format!("hooks: {was}"),
                "a CRD-only release is never installed, so its hooks never run",
            ));
            continue;
        }
        let converted = hooks::convert(&argv, namespace, &dir, root);
        for event in events {
            match hooks::phase(event) {
                Some(phase) => {
                    for hook in hooks::flatten(converted.clone()) {
                        out.push(Converted { phase, hook, was: was.clone() });
                    }
                }
                None => issues.push(Issue::new(
                    &at.file,
                    at.line,
                    format!("hooks: events [{event}] {was}"),
                    format!("bootstrap has presync and postsync hooks only; `{event}` has no moment in apply"),
                )),
            }
        }
    }
    out
}

/// helmfile's needs (`[KUBECONTEXT/][NAMESPACE/]NAME`, `pkg/state/state.go`
/// `ReleaseToID`) as `namespace/name` of an imported release, across all
/// the files imported. A need that names no release, or several, is never
/// dropped quietly: it is an issue and a `todo` of the release naming both
/// sides.
fn resolve_needs(groups: &mut [Group], issues: &mut Vec<Issue>) {
    let ids: Vec<(String, String, PathBuf, usize)> = groups
        .iter()
        .flat_map(|g| {
            g.releases.iter().map(|r| {
                (
                    r.namespace.clone(),
                    r.name.clone(),
                    r.source.clone(),
                    r.line,
                )
            })
        })
        .collect();
    for group in groups.iter_mut() {
        for release in &mut group.releases {
            let mut resolved = Vec::new();
            for (need, note) in std::mem::take(&mut release.needs) {
                let parts: Vec<&str> = need.split('/').collect();
                let (ns, name) = match parts.as_slice() {
                    [name] => (None, *name),
                    [ns, name] => (Some(*ns), *name),
                    [_, ns, name] => (Some(*ns).filter(|n| !n.is_empty()), *name),
                    _ => (None, ""),
                };
                let matches: Vec<&(String, String, PathBuf, usize)> = ids
                    .iter()
                    .filter(|(n, r, _, _)| r == name && ns.is_none_or(|ns| ns == n))
                    .collect();
                let reason = match matches.as_slice() {
                    [(n, r, _, _)] => {
                        resolved.push((format!("{n}/{r}"), note));
                        continue;
                    }
                    [] => format!(
                        "release `{}` ({}:{}) needs `{need}`, which none of the imported helmfiles defines; import the file that defines it too (or write the release), or remove the need",
                        release.id(),
                        release.source.display(),
                        release.line
                    ),
                    several => format!(
                        "release `{}` needs `{need}`, which names {}; write the one meant as namespace/name",
                        release.id(),
                        several
                            .iter()
                            .map(|(n, r, f, l)| format!("`{n}/{r}` ({}:{l})", f.display()))
                            .collect::<Vec<_>>()
                            .join(" and ")
                    ),
                };
                let issue = Issue::new(
                    &release.source,
                    release.line,
                    format!("needs: {need}"),
                    reason,
                );
                issues.push(issue.clone());
                release.todo.push(issue);
            }
            resolved.dedup();
            release.needs = resolved;
        }
    }
}

/// helmfile runs the files of helmfile.d (and the PATHs given) one after
/// another; bootstrap starts a release when its needs are done. So the
/// first releases of each file need the last releases of the file before
/// it (CRD-only files excepted: bootstrap's CRD phase runs before every
/// release anyway).
fn order_files(groups: &mut [Group]) {
    let mut previous: Option<(PathBuf, Vec<String>)> = None;
    for group in groups.iter_mut() {
        if group.crds_only.is_some() {
            continue;
        }
        let own: Vec<String> = group.releases.iter().map(ReleaseOut::id).collect();
        if let Some((file, sinks)) = &previous {
            for release in &mut group.releases {
                if release.needs.iter().any(|(n, _)| own.contains(n)) {
                    continue;
                }
                for sink in sinks {
                    release.needs.push((
                        sink.clone(),
                        Some(format!(
                            "helmfile runs {} after {}",
                            group.source.display(),
                            file.display()
                        )),
                    ));
                }
            }
        }
        let needed: Vec<&String> = group
            .releases
            .iter()
            .flat_map(|r| r.needs.iter().map(|(n, _)| n))
            .collect();
        let sinks = own
            .iter()
            .filter(|id| !needed.contains(id))
            .cloned()
            .collect();
        previous = Some((group.source.clone(), sinks));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The message names the template braces as written (`{{`), not as a
    /// format string would print them.
    #[test]
    fn env_in_text_names_the_braces() {
        let text = EnvInText("a-{{ env \"X\" }}".into()).to_string();
        assert!(
            text.contains("other `{{`)") && text.contains("`{{env \"NAME\"}}`"),
            "{text}"
        );
    }

    #[test]
    fn set_paths_and_typing_follow_helm() {
        assert_eq!(split_set_path(r"a.b\.c"), vec!["a", "b.c"]);
        assert_eq!(typed_set_value(&json!("true"), false), json!(true));
        assert_eq!(typed_set_value(&json!("0123"), false), json!("0123"));
        assert_eq!(typed_set_value(&json!("42"), false), json!(42));
        assert_eq!(typed_set_value(&json!("42"), true), json!("42"));
        let mut values = Map::new();
        insert_path(&mut values, &["a".into(), "b".into()], json!(1));
        insert_path(&mut values, &["a".into(), "c".into()], json!(2));
        assert_eq!(Value::Object(values), json!({"a": {"b": 1, "c": 2}}));
    }

    #[test]
    fn seconds_read_like_bootstrap_durations() {
        assert_eq!(seconds_text(600), "10m");
        assert_eq!(seconds_text(90), "90s");
        assert_eq!(seconds_text(7200), "2h");
    }
}
