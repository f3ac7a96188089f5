//! helmfile releases as bootstrap releases: chart references, needs,
//! values, hooks, `helmDefaults`, CRD-only files, `installed: false`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::helmfile::{self, FluxDocument, State};
use super::hooks::{self, Converted};
use super::{Issue, relative};
use crate::error::{Error, Problem};

mod chart;
mod defaults;
mod discover;
mod flux;
mod hook;
mod order;
mod release;
mod values;

use defaults::{helm_defaults, repositories};
use flux::{flux_managed, flux_tree, kustomization_tree, read_from_flux};
use order::{merge_duplicates, order_files, resolve_needs};
use release::{InState, convert_release};

/// What the import produced, before anything is written.
pub(crate) struct Imported {
    pub cluster: String,
    /// The state files read, as shown.
    pub sources: Vec<PathBuf>,
    /// One group per state file that defines releases, in helmfile's order.
    pub groups: Vec<Group>,
    /// The kubeconfig context of `helmDefaults.kubeContext`.
    pub context: Option<String>,
    /// The Flux tree: named by the imported values, given with
    /// `--flux-root`, or found in the repository (`discover`).
    pub flux: Option<FluxOut>,
    /// Where the import looked for a Flux tree and found none.
    pub flux_searched: Vec<PathBuf>,
    /// The environment variables whose values helmfile rendered into what
    /// is written: each written as `{{env "X"}}`, never as its value.
    pub from_environment: Vec<String>,
    /// Fields bootstrap takes no template in that hold a variable's value
    /// (a version read with `env`): written as the value, and said.
    pub literals: Vec<super::environment::Literal>,
    pub issues: Vec<Issue>,
    /// Settings not carried over because they have no effect on a
    /// bootstrap (said in the output and in cluster.yaml, never silent).
    pub notes: Vec<Issue>,
    /// Who rendered the helmfiles' templates.
    pub renderer: super::Renderer,
}

/// How to read the helmfiles.
#[derive(Default)]
pub(crate) struct Options {
    /// Render with helmfile itself (else the importer's template subset).
    pub helmfile: Option<super::Helmfile>,
    /// Why there is no helmfile, when there is none.
    pub without: String,
    /// helmfile's `--environment`.
    pub environment: Option<String>,
    /// `--flux-root`: the directory Flux's GitRepository is rooted at.
    pub flux_root: Option<PathBuf>,
    /// `--flux-entrypoint` (relative to the root): where Flux starts.
    pub flux_entrypoint: Option<String>,
}

/// The releases of one state file: one `releases/<stem>.yaml`.
pub(crate) struct Group {
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

pub(crate) struct ReleaseOut {
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
pub(crate) struct FromOut {
    /// The HelmRelease file, absolute.
    pub helmrelease: PathBuf,
    /// The template that read its `spec.values`, absolute.
    pub template: PathBuf,
    /// The template read another document of the file (see
    /// [`FluxDocument`]): said where `from:` is written.
    pub document: Option<FluxDocument>,
}

/// The Flux tree `from:` is resolved in: cluster.yaml `flux:`.
pub(crate) struct FluxOut {
    /// The directory Flux's GitRepository is rooted at, absolute.
    pub root: PathBuf,
    /// `spec.sync.path` of the FluxInstance (flux-instance chart values),
    /// else the directory of the Flux Kustomization that reaches the
    /// HelmReleases read.
    pub entrypoint: String,
    /// The file that says so (the flux-instance values, or the
    /// Kustomization's file), absolute.
    pub source: PathBuf,
    /// How it was found, for the comment above `flux:`.
    pub by: FoundBy,
}

/// How the import found the Flux tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FoundBy {
    /// The FluxInstance's sync path, in the flux-instance values imported.
    InstanceValues,
    /// The Flux Kustomization whose path holds the HelmReleases read.
    ReadHelmReleases,
    /// A FluxInstance (or the flux-instance chart's values in a
    /// HelmRelease) of the repository.
    Instance,
    /// The `flux-system` Kustomization of the repository (`flux bootstrap`'s).
    FluxSystem,
    /// A Flux Kustomization of the repository that no other one's path holds.
    Kustomization,
    /// `--flux-root` and `--flux-entrypoint`.
    Options,
}

impl ReleaseOut {
    pub(crate) fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ChartOut {
    Repo {
        repo: String,
        name: String,
    },
    Oci(String),
    /// A chart directory, absolute.
    Path(PathBuf),
}

pub(crate) struct Chart {
    pub chart: ChartOut,
    pub version: Option<String>,
}

pub(crate) enum ValuesOut {
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
pub(crate) enum ValuesNote {
    Flux {
        helmrelease: PathBuf,
        template: PathBuf,
    },
    Rendered(PathBuf),
    Text(String),
}

impl ValuesNote {
    pub(crate) fn text(&self, dir: &Path) -> String {
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
pub(crate) fn import(
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
        flux_searched: Vec::new(),
        from_environment: Vec::new(),
        literals: Vec::new(),
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
            rendered.extend(render_with_helmfile(
                hf,
                &listed,
                options,
                (&mut imported.from_environment, &mut imported.literals),
                &mut issues,
            ));
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
    find_flux(&mut imported, options);
    if let Some(flux) = &imported.flux {
        read_from_flux(&mut imported.groups, flux);
        flux_managed(&mut imported.groups, flux);
    }
    unmatched_flux_documents(&mut imported.groups, imported.flux.is_some(), &mut issues);
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

/// The state files `listed` as helmfile renders them, one at a time (the
/// files are the ones listed here); a file helmfile cannot render is an
/// issue, and the subset reads it. What the templates read from the
/// environment comes back as its values, which are never written as they
/// are: marked instead, the variables named in `from_environment`.
fn render_with_helmfile(
    hf: &super::Helmfile,
    listed: &[PathBuf],
    options: &Options,
    (from_environment, literals): (&mut Vec<String>, &mut Vec<super::environment::Literal>),
    issues: &mut Vec<Issue>,
) -> Vec<super::rendered::RenderedState> {
    let variables = super::environment::referenced(listed);
    let mut rendered = Vec::new();
    for file in listed {
        match super::rendered::build(hf, file, options.environment.as_deref()) {
            Ok(mut states) => {
                for state in &mut states {
                    let (used, literal) = super::environment::mask(state, &variables);
                    for name in used {
                        if !from_environment.contains(&name) {
                            from_environment.push(name);
                        }
                    }
                    literals.extend(literal);
                }
                rendered.extend(states);
            }
            Err(why) => issues.push(Issue::new(
                file,
                0,
                "helmfile build",
                format!("helmfile could not render it ({why}); the importer's own template subset read it instead: fix what helmfile says (a variable to set, `--environment`) and import again"),
            )),
        }
    }
    rendered
}

/// The Flux tree: `--flux-root` with `--flux-entrypoint`, else the one the
/// imported values name, else the repository's (`discover`), always looked
/// for: a release a HelmRelease of the repository manages must not be
/// written bootstrap-owned unseen.
fn find_flux(imported: &mut Imported, options: &Options) {
    imported.flux = match (&options.flux_root, &options.flux_entrypoint) {
        (Some(root), Some(entrypoint)) => Some(FluxOut {
            root: super::gotmpl::normalize(&hooks::absolute(root)),
            entrypoint: entrypoint.trim_start_matches("./").to_string(),
            source: super::gotmpl::normalize(&hooks::absolute(root)),
            by: FoundBy::Options,
        }),
        (Some(_), None) => None,
        (None, _) => flux_tree(&imported.groups).or_else(|| kustomization_tree(&imported.groups)),
    };
    if imported.flux.is_none() {
        let state = imported.sources.first().cloned().unwrap_or_default();
        match discover::repository_tree(&state, options.flux_root.as_deref(), &imported.cluster) {
            Ok(found) => imported.flux = Some(found),
            Err(discover::Searched(dirs)) => imported.flux_searched = dirs,
        }
    }
}

/// A release whose values template reads a Flux HelmRelease with
/// `fromYaml` from a multi-document file, where the HelmRelease is not the
/// document read and no `from:` could be found: an issue and a `todo`.
fn unmatched_flux_documents(groups: &mut [Group], flux_found: bool, issues: &mut Vec<Issue>) {
    for release in groups.iter_mut().flat_map(|g| &mut g.releases) {
        if let (Some(doc), None) = (&release.flux_document, &release.from) {
            let why = if !flux_found {
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
    let in_state = InState {
        state,
        repos: &repos,
        defaults: &defaults,
        override_namespace: state.doc.get("namespace").and_then(Value::as_str),
        crds_only: group.crds_only.is_some(),
    };
    for release in helmfile::releases(state, issues) {
        if let Some(out) = convert_release(&in_state, &release, root, issues) {
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

#[cfg(test)]
mod tests {
    use super::defaults::seconds_text;
    use super::values::{EnvInText, insert_path, split_set_path, typed_set_value};
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
