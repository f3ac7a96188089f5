//! Resolves a GitOps tree the way source-controller packs it and
//! kustomize-controller builds it, offline.
//!
//! - The tree is the GitRepository artifact ([`Artifact`]): no symlinks, no
//!   ignored paths.
//! - A Flux Kustomization's `spec.path` is built like kustomize-controller
//!   does (fluxcd/pkg `kustomize/kustomize_generator.go` `GenerateManifest`):
//!   its kustomization file, or the one Flux generates (every `*.yaml`/`*.yml`
//!   below it, a subdirectory with a kustomization file included as one and
//!   not descended into, `scanManifests`); then Flux's `targetNamespace`,
//!   `namePrefix`, `nameSuffix` overwrite the kustomization's `namespace`,
//!   `namePrefix`, `nameSuffix`, and its `patches`, `components`,
//!   `patchesStrategicMerge`, `patchesJson6902` are appended.
//! - A kustomization accumulates its `resources` (`bases`), then its
//!   generators, then its `components`, then runs its transformers
//!   ([`super::kustomize`]), bottom-up, so the outermost `namespace` wins.
//! - The built objects get post-build substitution ([`super::varsub`]), then
//!   every Flux Kustomization among them that reads the root's GitRepository
//!   starts a new build, and every flux-operator ResourceSet is expanded
//!   ([`super::resourceset`]) and its objects are treated the same way.
//!
//! This module walks the builds; each step of one build has its file:
//! [`build`] (a kustomization and what it accumulates), [`generators`]
//! (generated ConfigMaps and Secrets, the hash suffix, name references),
//! [`transform`] (patches, namespace, prefix and suffix, replacements),
//! [`postbuild`] (Flux's substitution), [`apply`] (`spec.commonMetadata`,
//! the objects kustomize-controller skips) and [`delegate`] (`kubectl
//! kustomize`).
//!
//! Nothing here fails: unreadable files, bad YAML, missing paths, remote
//! resources and constructs that are not modelled become findings and the
//! walk goes on.

mod apply;
mod audit;
mod build;
mod delegate;
mod generators;
mod postbuild;
mod resource_set;
mod stage;
mod transform;

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::path::{Component, Path, PathBuf};

use serde_json::{Value, json};

use super::artifact::Artifact;
use super::findings::{Finding, NOT_MODELLED, PATH_NOT_FOUND, SOURCE_NOT_FOLLOWED, Severity};
use super::object::{GitObject, Object};
use super::resourceset;

pub use delegate::DELEGATED_FIELDS;
pub use stage::{Refusal, Refused, STAGES, apply_failures};

const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];
/// Guards against absurd nesting (and symlink loops kustomize would reject).
const MAX_DEPTH: usize = 64;
/// How often a build waits for the ConfigMaps/Secrets its `substituteFrom`
/// names to be found by other builds.
const MAX_DEFERRALS: usize = 3;

#[derive(Debug, Default)]
pub struct Tree {
    /// Every object applied, once: an object (group, kind, namespace,
    /// name) that several builds apply is one object in the cluster, kept
    /// as the first build (fewest Flux hops) gives it.
    pub objects: Vec<Object>,
    pub findings: Vec<Finding>,
    pub files_scanned: usize,
    /// Each build, in the order done, with what it applies: what
    /// `check -v --output json` shows (docs/design.md#check-json).
    pub builds: Vec<Applied>,
    /// The builds whose apply the API server refuses (a stage and every
    /// later one not applied, [`stage`]).
    pub refusals: Vec<Refusal>,
}

/// One build Flux does and the objects it applies.
#[derive(Debug, Clone)]
pub struct Applied {
    /// `Kustomization/namespace/name`, `ResourceSet/namespace/name`, or
    /// `None` for the entrypoint's build.
    pub by: Option<String>,
    /// The build's directory, relative to the root (`spec.path`).
    pub path: String,
    pub objects: Vec<Object>,
    /// Flux fails this build and applies nothing (a path that does not
    /// exist, a substitution envsubst rejects).
    pub failed: bool,
    /// The dry-run error that stops its staged apply: the objects of that
    /// stage and of the later ones are not applied ([`stage`]).
    pub apply_error: Option<String>,
    /// Those objects.
    pub not_applied: Vec<Object>,
}

/// A build Flux starts: the entrypoint, or a Kustomization's `spec.path`.
struct Build {
    dir: PathBuf,
    /// The Flux Kustomization (after its parent's substitution); `None` for
    /// the entrypoint.
    ks: Option<Object>,
    chain: Vec<String>,
    raw_path: String,
    deferrals: usize,
    /// The entrypoint's build (even when a Kustomization's fields shape it).
    entry: bool,
}

impl Build {
    fn key(&self) -> (PathBuf, String) {
        let spec = self.ks.as_ref().map(|ks| {
            let spec = ks.body.get("spec").unwrap_or(&Value::Null);
            let pick = |k: &str| spec.get(k).cloned().unwrap_or(Value::Null);
            json!([
                ks.namespace,
                ks.name,
                pick("sourceRef"),
                pick("targetNamespace"),
                pick("namePrefix"),
                pick("nameSuffix"),
                pick("patches"),
                pick("components"),
                pick("patchesStrategicMerge"),
                pick("patchesJson6902"),
                pick("postBuild"),
            ])
            .to_string()
        });
        (self.dir.clone(), spec.unwrap_or_default())
    }
}

struct Walker {
    root: PathBuf,
    artifact: Artifact,
    tree: Tree,
    files: BTreeSet<PathBuf>,
    started: HashSet<(PathBuf, String)>,
    pending: VecDeque<Build>,
    /// The GitRepository (name, namespace) the root Kustomization reads.
    root_source: Option<(String, Option<String>)>,
    /// Whether Flux Kustomizations and ResourceSets are followed ([`resolve`])
    /// or only the one kustomize build is done ([`build`]).
    follow: bool,
    /// `kubectl`, when kustomizations with constructs this scan does not
    /// model are built by `kubectl kustomize` ([`resolve_with`]).
    kubectl: Option<PathBuf>,
    /// Index in `tree.objects` of each (group, kind, namespace, name).
    applied: HashMap<(String, String, Option<String>, String), usize>,
    /// The `configurations` name references of the build under way.
    name_references: Vec<generators::NameReference>,
}

impl Walker {
    fn new(root: PathBuf, follow: bool) -> Walker {
        Walker::with_ignore(root, follow, None)
    }

    /// A walker over the artifact of a GitRepository with `spec.ignore`.
    fn with_ignore(root: PathBuf, follow: bool, ignore: Option<&str>) -> Walker {
        Walker {
            artifact: Artifact::with_ignore(&root, ignore),
            tree: Tree::default(),
            files: BTreeSet::new(),
            started: HashSet::new(),
            pending: VecDeque::new(),
            root,
            root_source: None,
            follow,
            kubectl: None,
            name_references: Vec::new(),
            applied: HashMap::new(),
        }
    }
}

/// The objects `kustomize build root/dir` gives (with Flux's generated
/// kustomization when `dir` has none), without following Flux objects: what
/// the differential tests compare with `kubectl kustomize`.
pub fn build(root: &Path, dir: &Path) -> Tree {
    let root = absolute_root(root);
    let mut walker = Walker::new(root.clone(), false);
    walker.start(Build {
        dir: normalize(&root.join(dir)),
        ks: None,
        chain: Vec::new(),
        raw_path: dir.display().to_string(),
        deferrals: 0,
        entry: false,
    });
    walker.tree.files_scanned = walker.files.len();
    walker.tree
}

/// Resolves everything Flux would apply starting at `root/entrypoint`.
pub fn resolve(root: &Path, entrypoint: &Path) -> Tree {
    resolve_with(root, entrypoint, None)
}

/// [`resolve`], with a kustomization that uses a construct this scan does
/// not model (plugins, `helmCharts`, `vars`: [`DELEGATED_FIELDS`]) built by
/// `kubectl kustomize` when `kubectl` is given (docs/design.md#tree-resolution).
pub fn resolve_with(root: &Path, entrypoint: &Path, kubectl: Option<&Path>) -> Tree {
    resolve_from(
        root,
        entrypoint,
        Resolution {
            entry_ks: None,
            ignore: None,
            kubectl: kubectl.map(Path::to_path_buf),
        },
    )
}

/// What a walk from the entrypoint starts with.
#[derive(Clone)]
struct Resolution {
    /// The Kustomization that reconciles the entrypoint itself, when it has
    /// build fields of its own.
    entry_ks: Option<Object>,
    /// The root GitRepository's `spec.ignore`, once the entrypoint's build
    /// has found it.
    ignore: Option<String>,
    kubectl: Option<PathBuf>,
}

/// The Flux build fields and post-build of a Kustomization: with none, its
/// build is kustomize's alone.
const BUILD_FIELDS: [&str; 8] = [
    "targetNamespace",
    "namePrefix",
    "nameSuffix",
    "patches",
    "components",
    "patchesStrategicMerge",
    "patchesJson6902",
    "postBuild",
];

/// What one Flux Kustomization (`ks`, a whole object) builds, post-build
/// substitution included, without following the Flux objects it holds: what
/// the differential tests compare with kustomize-controller's build.
pub fn build_flux_kustomization(root: &Path, ks: Value) -> Tree {
    let root = absolute_root(root);
    let mut walker = Walker::new(root.clone(), false);
    let Some(ks) = object(ks, "", &[]) else {
        return walker.tree;
    };
    let raw = spec_str(&ks, "path").unwrap_or("./").to_string();
    walker.start(Build {
        dir: normalize(&root.join(raw.trim_start_matches('/'))),
        ks: Some(ks),
        chain: Vec::new(),
        raw_path: raw,
        deferrals: 0,
        entry: false,
    });
    walker.tree.files_scanned = walker.files.len();
    walker.tree
}

fn resolve_from(root: &Path, entrypoint: &Path, resolution: Resolution) -> Tree {
    let root_path = root;
    let root = absolute_root(root);
    let entry_dir = normalize(&root.join(entrypoint));
    let rebuilt = resolution.entry_ks.is_some();
    let mut walker = Walker::with_ignore(root.clone(), true, resolution.ignore.as_deref());
    walker.kubectl = resolution.kubectl.clone();
    walker.pending.push_back(Build {
        dir: entry_dir.clone(),
        ks: resolution.entry_ks.clone(),
        chain: Vec::new(),
        raw_path: entrypoint.display().to_string(),
        deferrals: 0,
        entry: true,
    });
    let mut first = true;
    // Breadth-first, so an object reached along several Kustomizations keeps
    // the chain with the fewest Flux hops.
    while let Some(mut build) = walker.pending.pop_front() {
        let key = build.key();
        if walker.started.contains(&key) {
            continue;
        }
        if let Some(ks) = &build.ks
            && !walker.pending.is_empty()
            && build.deferrals < MAX_DEFERRALS
            && !walker.substitution_sources_found(ks, &[])
        {
            build.deferrals += 1;
            walker.pending.push_back(build);
            continue;
        }
        walker.started.insert(key);
        walker.start(build);
        if first {
            first = false;
            // The entrypoint is the build of the Kustomization that reconciles
            // it (gotk-sync's flux-system): with build fields of its own
            // (targetNamespace, postBuild, …) it is built again with them.
            let own_ks = walker
                .pending
                .iter()
                .filter_map(|b| b.ks.as_ref().filter(|_| b.dir == entry_dir))
                .find(|ks| {
                    let spec = ks.body.get("spec");
                    BUILD_FIELDS
                        .iter()
                        .any(|f| spec.and_then(|s| s.get(f)).is_some_and(|v| !v.is_null()))
                })
                .cloned();
            if let (false, Some(ks)) = (rebuilt, own_ks) {
                let again = Resolution {
                    entry_ks: Some(ks),
                    ..resolution
                };
                return resolve_from(root_path, entrypoint, again);
            }
            walker.root_source = walker.pick_root_source(&entry_dir);
            // The root GitRepository's `spec.ignore` shapes its artifact
            // (docs/design.md#tree-resolution): the walk starts again
            // over the artifact it leaves.
            let found = walker.root_ignore();
            if resolution.ignore.is_none() && found.is_some() {
                let again = Resolution {
                    ignore: found,
                    ..resolution
                };
                return resolve_from(root_path, entrypoint, again);
            }
            // The Kustomization that reconciles the entrypoint itself (gotk-sync's
            // flux-system) is the build just done, not another one.
            let own: Vec<(PathBuf, String)> = walker
                .pending
                .iter()
                .filter(|b| b.dir == entry_dir)
                .map(Build::key)
                .collect();
            walker.started.extend(own);
        }
    }
    walker.tree.files_scanned = walker.files.len();
    walker.tree
}

fn spec_str<'a>(obj: &'a Object, key: &str) -> Option<&'a str> {
    obj.body
        .pointer(&format!("/spec/{key}"))
        .and_then(Value::as_str)
}

fn ns_display(ns: Option<&str>) -> &str {
    ns.unwrap_or("<no namespace>")
}

/// A GitRepository `sourceRef` as (name, namespace), defaulting the
/// namespace to the Kustomization's.
fn git_source(ks: &Object) -> Option<(String, Option<String>)> {
    let kind = ks
        .body
        .pointer("/spec/sourceRef/kind")
        .and_then(Value::as_str);
    if kind.is_some_and(|k| k != "GitRepository") {
        return None;
    }
    let name = ks
        .body
        .pointer("/spec/sourceRef/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let namespace = ks
        .body
        .pointer("/spec/sourceRef/namespace")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| ks.namespace.clone());
    Some((name, namespace))
}

impl Walker {
    fn rel(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.root).unwrap_or(path);
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        parts.join("/")
    }

    fn warn(
        &mut self,
        code: &'static str,
        object: Option<GitObject>,
        chain: &[String],
        message: String,
    ) {
        self.tree.findings.push(Finding {
            severity: Severity::Warning,
            code,
            release: None,
            object,
            chain: chain.to_vec(),
            message,
            written: None,
            ignored: false,
        });
    }

    /// The `spec.ignore` of the root's GitRepository, when the object is
    /// among those found so far.
    fn root_ignore(&self) -> Option<String> {
        let (name, namespace) = self.root_source.as_ref()?;
        self.tree
            .objects
            .iter()
            .find(|o| {
                o.is_flux("source", "GitRepository")
                    && &o.name == name
                    && o.namespace.as_ref() == namespace.as_ref()
            })?
            .body
            .pointer("/spec/ignore")
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    /// The root's GitRepository: the source of the Kustomization that
    /// reconciles the entrypoint itself (flux-system's gotk-sync), else that of
    /// the first Kustomization the entrypoint holds.
    fn pick_root_source(&self, entry_dir: &Path) -> Option<(String, Option<String>)> {
        let kss: Vec<&Object> = self
            .tree
            .objects
            .iter()
            .filter(|o| o.is_flux("kustomize", "Kustomization"))
            .collect();
        let path_of = |ks: &Object| {
            normalize(
                &self
                    .root
                    .join(spec_str(ks, "path").unwrap_or("./").trim_start_matches('/')),
            )
        };
        kss.iter()
            .find(|ks| path_of(ks) == entry_dir && git_source(ks).is_some())
            .or_else(|| kss.iter().find(|ks| git_source(ks).is_some()))
            .and_then(|ks| git_source(ks))
    }

    fn start(&mut self, build: Build) {
        let entry = build.entry;
        let Build {
            dir,
            ks,
            chain,
            raw_path,
            ..
        } = build;
        let origin = ks.as_ref().map(Object::reference);
        let by = ks.as_ref().filter(|_| !entry).map(|ks| {
            format!(
                "Kustomization/{}/{}",
                ks.namespace.as_deref().unwrap_or_default(),
                ks.name
            )
        });
        let path = self.rel(&dir);
        if let (Some(ks), Some(root_source)) = (&ks, &self.root_source)
            && let Some(source) = git_source(ks).filter(|s| s != root_source)
        {
            self.tree.findings.push(Finding {
                severity: Severity::Warning,
                code: SOURCE_NOT_FOLLOWED,
                release: None,
                object: origin.clone(),
                chain: chain.clone(),
                message: format!(
                    "Kustomization {}/{} reads GitRepository {}/{}, not the root's {}/{}: what it applies (possibly HelmReleases, possibly this repository at another branch or tag) is not in this checkout and is not checked",
                    ns_display(ks.namespace.as_deref()),
                    ks.name,
                    ns_display(source.1.as_deref()),
                    source.0,
                    ns_display(root_source.1.as_deref()),
                    root_source.0,
                ),
                written: None,
                ignored: false,
            });
            return;
        }
        let failed = |walker: &mut Walker| {
            walker.tree.builds.push(Applied {
                by: by.clone(),
                path: path.clone(),
                objects: Vec::new(),
                failed: true,
                apply_error: None,
                not_applied: Vec::new(),
            });
        };
        let mut objects = if !dir.starts_with(&self.root) {
            let message = format!("`{raw_path}` points outside flux.root; Flux cannot read it");
            self.warn(PATH_NOT_FOUND, origin, &chain, message);
            failed(self);
            return;
        } else if self.artifact.is_dir(&dir) {
            self.build_root(&dir, ks.as_ref(), &chain)
        } else if self.artifact.is_file(&dir) {
            // Flux wants a directory; a file entrypoint is accepted for convenience.
            self.load_file(&dir, &chain)
        } else {
            let why = if self.artifact.left_out(&dir) {
                "is a symlink or ignored (.sourceignore, the GitRepository's spec.ignore, source-controller's defaults), so it is not in the GitRepository artifact"
            } else if raw_path.contains("${") {
                "does not exist under flux.root; it still holds a `${…}` variable, which only the postBuild of the Kustomization that applies this one could set"
            } else {
                "does not exist under flux.root"
            };
            let message = match &origin {
                Some(ks) => format!(
                    "spec.path `{raw_path}` of Kustomization {}/{} in {} {why}",
                    ns_display(ks.namespace.as_deref()),
                    ks.name,
                    ks.file
                ),
                None => format!("the Flux entrypoint `{raw_path}` {why}"),
            };
            self.warn(PATH_NOT_FOUND, origin, &chain, message);
            failed(self);
            return;
        };
        let mut failed = false;
        if let Some(ks) = &ks {
            failed = self.post_build(ks, &mut objects, &chain);
            apply::set_common_metadata(ks, &mut objects);
        }
        self.skip_excluded(&mut objects);
        for obj in &mut objects {
            obj.applier = by.clone();
        }
        let built = objects.clone();
        let refused = if self.follow && !failed {
            let (applied, refused) = stage::staged_apply(objects, &[]);
            objects = applied;
            refused
        } else {
            None
        };
        self.record(by, path, built, failed, refused);
        self.emit(objects, 0);
    }

    /// Records a build, and its refused apply.
    fn record(
        &mut self,
        by: Option<String>,
        path: String,
        objects: Vec<Object>,
        failed: bool,
        refused: Option<Refused>,
    ) {
        self.tree.builds.push(Applied {
            by: by.clone(),
            path: path.clone(),
            objects,
            failed,
            apply_error: refused.as_ref().map(|r| r.reason.clone()),
            not_applied: refused
                .as_ref()
                .map(|r| r.not_applied.clone())
                .unwrap_or_default(),
        });
        if let Some(refused) = refused {
            self.tree.refusals.push(Refusal { by, path, refused });
        }
    }

    /// Records built objects, then follows the Kustomizations and expands the
    /// ResourceSets among them.
    fn emit(&mut self, objects: Vec<Object>, depth: usize) {
        let first = self.tree.objects.len();
        for obj in objects {
            let key = (
                obj.group().to_string(),
                obj.kind.clone(),
                obj.namespace.clone(),
                obj.name.clone(),
            );
            match self.applied.get(&key) {
                Some(&i) => {
                    let kept = &self.tree.objects[i];
                    if kept.body != obj.body {
                        let message = format!(
                            "{} {}/{} is applied by {} ({}) and again, with other content, by {} ({}); Flux applies both in turn, so it changes back and forth; it is checked as the first gives it",
                            obj.kind,
                            ns_display(obj.namespace.as_deref()),
                            obj.name,
                            kept.applier.as_deref().unwrap_or("the entrypoint's build"),
                            kept.file,
                            obj.applier.as_deref().unwrap_or("the entrypoint's build"),
                            obj.file,
                        );
                        self.warn(NOT_MODELLED, Some(obj.reference()), &obj.chain, message);
                    }
                }
                None => {
                    self.audit(&obj);
                    self.applied.insert(key, self.tree.objects.len());
                    self.tree.objects.push(obj);
                }
            }
        }
        if !self.follow {
            return;
        }
        let batch: Vec<Object> = self.tree.objects[first..]
            .iter()
            .filter(|o| o.is_flux("kustomize", "Kustomization") || resourceset::is_resource_set(o))
            .cloned()
            .collect();
        for obj in &batch {
            if obj.is_flux("kustomize", "Kustomization") {
                self.schedule(obj);
            } else if resourceset::is_resource_set(obj) {
                self.expand_resource_set(obj, depth);
            }
        }
    }

    /// Queues the build a Flux Kustomization starts.
    fn schedule(&mut self, ks: &Object) {
        let spec = ks.body.get("spec").unwrap_or(&Value::Null);
        let source = spec.pointer("/sourceRef/kind").and_then(Value::as_str);
        if let Some(kind) = source.filter(|k| *k != "GitRepository") {
            self.tree.findings.push(Finding {
                severity: Severity::Info,
                code: SOURCE_NOT_FOLLOWED,
                release: None,
                object: Some(ks.reference()),
                chain: ks.chain.clone(),
                message: format!(
                    "Kustomization {}/{} reads from a {kind}, not from this repository; its objects are not checked",
                    ns_display(ks.namespace.as_deref()),
                    ks.name
                ),
                written: None,
                ignored: false,
            });
            return;
        }
        let raw = spec.get("path").and_then(Value::as_str).unwrap_or("./");
        let target = self.root.join(raw.trim_start_matches('/'));
        self.pending.push_back(Build {
            dir: normalize(&target),
            ks: Some(ks.clone()),
            chain: ks.chain.clone(),
            raw_path: raw.to_string(),
            deferrals: 0,
            entry: false,
        });
    }
}

/// The file a generated object is attributed to: the kustomization's.
fn label_file(label: &str, chain: &[String]) -> String {
    chain.last().cloned().unwrap_or_else(|| label.to_string())
}

/// An object from a document; `None` for documents that are no object
/// (patch fragments, values).
fn object(body: Value, file: &str, chain: &[String]) -> Option<Object> {
    let text = |p: &str| body.pointer(p).and_then(Value::as_str).map(str::to_string);
    let (Some(kind), Some(name)) = (text("/kind"), text("/metadata/name")) else {
        return None;
    };
    Some(Object {
        api_version: text("/apiVersion").unwrap_or_default(),
        kind,
        name,
        namespace: text("/metadata/namespace").filter(|n| !n.is_empty()),
        file: file.to_string(),
        chain: chain.to_vec(),
        body,
        previous_ids: Vec::new(),
        applier: None,
        quoted: Default::default(),
        bare_nulls: Default::default(),
    })
}

/// kustomize's remote forms: URLs, `git@host:`, and `host/org/repo//path?ref=`.
fn is_remote(entry: &str) -> bool {
    entry.contains("://")
        || entry.starts_with("git@")
        || entry.contains("?ref=")
        || ["github.com/", "gitlab.com/", "bitbucket.org/"]
            .iter()
            .any(|host| entry.starts_with(host))
}

/// Lexical normalization: `..` applies to the path as written, as kustomize
/// and Flux do, not to where a symlink points.
/// `path` with `.` and `..` resolved lexically. A relative path keeps its
/// leading `..` (`../gitops` stays `../gitops`, never `gitops`); above the
/// root of an absolute path `..` stays at the root, as the kernel does.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(".."),
            },
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The root a walk starts from: absolute, so that every path derived from
/// it (and every `..` in a reference) resolves against the real directory,
/// whatever the working directory of the command.
fn absolute_root(root: &Path) -> PathBuf {
    normalize(&std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_keeps_leading_parent_dirs_of_a_relative_path() {
        assert_eq!(
            normalize(Path::new("../../gitops")),
            Path::new("../../gitops")
        );
        assert_eq!(normalize(Path::new("a/../../b/./c")), Path::new("../b/c"));
        assert_eq!(normalize(Path::new("/a/../../b")), Path::new("/b"));
        assert_eq!(normalize(Path::new("a/b/..")), Path::new("a"));
    }

    #[test]
    fn remote_entries() {
        assert!(is_remote("https://github.com/x/y//deploy?ref=v1"));
        assert!(is_remote("github.com/x/y/deploy?ref=v1"));
        assert!(!is_remote("../base"));
    }
}
