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
//!   `components`, then generators, then runs its transformers
//!   ([`super::kustomize`]), bottom-up, so the outermost `namespace` wins.
//! - The built objects get post-build substitution ([`super::varsub`]), then
//!   every Flux Kustomization among them that reads the root's GitRepository
//!   starts a new build, and every flux-operator ResourceSet is expanded
//!   ([`super::resourceset`]) and its objects are treated the same way.
//!
//! Nothing here fails: unreadable files, bad YAML, missing paths, remote
//! resources and constructs that are not modelled become findings and the
//! walk goes on.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value, json};

use super::artifact::Artifact;
use super::findings::{
    BUILD_FAILS, Finding, NOT_MODELLED, PATH_NOT_FOUND, REMOTE_RESOURCE_NOT_FOLLOWED,
    SOURCE_NOT_FOLLOWED, SUBSTITUTE_FROM_UNRESOLVED, Severity, YAML_INVALID,
};
use super::kustomize;
use super::object::{Object, ObjectRef, decode_base64};
use super::resourceset;
use super::varsub;

const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];
/// Guards against absurd nesting (and symlink loops kustomize would reject).
const MAX_DEPTH: usize = 64;
/// How often a build waits for the ConfigMaps/Secrets its `substituteFrom`
/// names to be found by other builds.
const MAX_DEFERRALS: usize = 3;

/// kustomization fields that are applied.
const MODELLED_FIELDS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "resources",
    "bases",
    "components",
    "namespace",
    "namePrefix",
    "nameSuffix",
    "patches",
    "patchesStrategicMerge",
    "patchesJson6902",
    "replacements",
    "configMapGenerator",
    "secretGenerator",
    "generatorOptions",
];
/// kustomization fields that change no object's existence, kind or name.
const NAME_NEUTRAL_FIELDS: &[&str] = &[
    "commonLabels",
    "labels",
    "commonAnnotations",
    "images",
    "replicas",
    "buildMetadata",
    "sortOptions",
    "configurations",
    "crds",
    "openapi",
];

#[derive(Debug, Default)]
pub struct Tree {
    pub objects: Vec<Object>,
    pub findings: Vec<Finding>,
    pub files_scanned: usize,
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
}

impl Build {
    fn key(&self) -> (PathBuf, String) {
        let spec = self.ks.as_ref().map(|ks| {
            let spec = ks.body.get("spec").unwrap_or(&Value::Null);
            let pick = |k: &str| spec.get(k).cloned().unwrap_or(Value::Null);
            json!([
                ks.namespace,
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
        object: Option<ObjectRef>,
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
        let Build {
            dir,
            ks,
            chain,
            raw_path,
            ..
        } = build;
        let origin = ks.as_ref().map(Object::reference);
        if let (Some(ks), Some(root_source)) = (&ks, &self.root_source)
            && let Some(source) = git_source(ks).filter(|s| s != root_source)
        {
            self.tree.findings.push(Finding {
                severity: Severity::Info,
                code: SOURCE_NOT_FOLLOWED,
                release: None,
                object: origin.clone(),
                chain: chain.clone(),
                message: format!(
                    "Kustomization {}/{} reads GitRepository {}/{}, not the root's {}/{}; its objects are not checked",
                    ns_display(ks.namespace.as_deref()),
                    ks.name,
                    ns_display(source.1.as_deref()),
                    source.0,
                    ns_display(root_source.1.as_deref()),
                    root_source.0,
                ),
            });
            return;
        }
        let mut objects = if !dir.starts_with(&self.root) {
            let message = format!("`{raw_path}` points outside flux.root; Flux cannot read it");
            self.warn(PATH_NOT_FOUND, origin, &chain, message);
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
            return;
        };
        if let Some(ks) = &ks {
            self.post_build(ks, &mut objects, &chain);
        }
        self.emit(objects, 0);
    }

    /// Records built objects, then follows the Kustomizations and expands the
    /// ResourceSets among them.
    fn emit(&mut self, objects: Vec<Object>, depth: usize) {
        let first = self.tree.objects.len();
        self.tree.objects.extend(objects);
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

    fn expand_resource_set(&mut self, rs: &Object, depth: usize) {
        if depth >= 8 {
            return;
        }
        let providers: Vec<&Object> = self
            .tree
            .objects
            .iter()
            .filter(|o| {
                o.group() == "fluxcd.controlplane.io" && o.kind == "ResourceSetInputProvider"
            })
            .collect();
        let expansion = resourceset::expand(rs, &providers);
        for problem in expansion.problems {
            let message = format!(
                "ResourceSet {}/{} in {}: {problem}; the objects it would generate from this are not checked",
                ns_display(rs.namespace.as_deref()),
                rs.name,
                rs.file
            );
            self.warn(NOT_MODELLED, Some(rs.reference()), &rs.chain, message);
        }
        let objects = expansion
            .objects
            .into_iter()
            .filter_map(|body| object(body, &rs.file, &rs.chain))
            .collect();
        self.emit(objects, depth + 1);
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
        });
    }

    fn kustomization_file(&self, dir: &Path) -> Option<PathBuf> {
        KUSTOMIZATION_FILES
            .iter()
            .map(|name| dir.join(name))
            .find(|p| self.artifact.is_file(p))
    }

    /// The build of a Flux Kustomization's path (or the entrypoint).
    fn build_root(&mut self, dir: &Path, ks: Option<&Object>, chain: &[String]) -> Vec<Object> {
        let kfile = self.kustomization_file(dir);
        let mut doc = match &kfile {
            Some(kfile) => match self.read_kustomization(kfile, chain) {
                Some(doc) => match self.delegate(dir, kfile, &doc, chain) {
                    // Built by kubectl kustomize; Flux's own build fields
                    // (and components) transform what it built, as a
                    // kustomization around it.
                    Some(built) => {
                        let mut flux = json!({});
                        if let Some(spec) = ks.and_then(|ks| ks.body.get("spec")) {
                            overlay(&mut flux, spec);
                        }
                        let mut chain = chain.to_vec();
                        chain.push(self.rel(kfile));
                        return self.build_doc(dir, None, flux, &chain, &mut Vec::new(), built);
                    }
                    None => doc,
                },
                None => return Vec::new(),
            },
            None => {
                let mut resources = Vec::new();
                self.generate(dir, dir, &mut resources, &mut HashSet::new(), chain);
                json!({ "resources": resources })
            }
        };
        if let Some(spec) = ks.and_then(|ks| ks.body.get("spec")) {
            overlay(&mut doc, spec);
            // GenerateManifest: with spec.ignoreMissingComponents, a missing
            // component of the Kustomization's is left out.
            if spec.get("ignoreMissingComponents").and_then(Value::as_bool) == Some(true) {
                let own: Vec<&Value> = spec
                    .get("components")
                    .and_then(Value::as_array)
                    .map(|c| c.iter().collect())
                    .unwrap_or_default();
                if let Some(list) = doc.get_mut("components").and_then(Value::as_array_mut) {
                    list.retain(|c| {
                        !own.contains(&c)
                            || c.as_str()
                                .is_some_and(|c| self.artifact.is_dir(&normalize(&dir.join(c))))
                    });
                }
            }
        }
        self.build_doc(
            dir,
            kfile.as_deref(),
            doc,
            chain,
            &mut Vec::new(),
            Vec::new(),
        )
    }

    /// What Flux generates for a directory without a kustomization file:
    /// resource entries relative to `base`.
    fn generate(
        &mut self,
        base: &Path,
        dir: &Path,
        out: &mut Vec<String>,
        seen: &mut HashSet<PathBuf>,
        chain: &[String],
    ) {
        if seen.len() > MAX_DEPTH * 16 || !seen.insert(dir.to_path_buf()) {
            return;
        }
        let entries = match self.artifact.read_dir(dir) {
            Ok(entries) => entries,
            Err(e) => {
                let file = self.rel(dir);
                self.invalid(chain, &file, format!("cannot read directory {file}: {e}"));
                return;
            }
        };
        let rel = |p: &Path| {
            p.strip_prefix(base)
                .unwrap_or(p)
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/")
        };
        for path in entries {
            if self.artifact.is_dir(&path) {
                if self.kustomization_file(&path).is_some() {
                    out.push(rel(&path));
                } else {
                    self.generate(base, &path, out, seen, chain);
                }
            } else if matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml")
            ) {
                out.push(rel(&path));
            }
        }
    }

    fn read_kustomization(&mut self, kfile: &Path, chain: &[String]) -> Option<Value> {
        self.files.insert(kfile.to_path_buf());
        self.read_documents(kfile, chain)
            .map(|d| d.into_iter().next().unwrap_or_else(|| json!({})))
    }

    /// One kustomization: `acc` are the objects accumulated so far (a
    /// component transforms its parent's); returns everything built.
    fn build_doc(
        &mut self,
        dir: &Path,
        kfile: Option<&Path>,
        doc: Value,
        chain: &[String],
        stack: &mut Vec<PathBuf>,
        acc: Vec<Object>,
    ) -> Vec<Object> {
        let mut chain = chain.to_vec();
        let label = match kfile {
            Some(kfile) => {
                // kustomize rejects cycles; stopping here is enough to never loop.
                if stack.len() >= MAX_DEPTH || stack.iter().any(|p| p == kfile) {
                    return acc;
                }
                stack.push(kfile.to_path_buf());
                let file = self.rel(kfile);
                chain.push(file.clone());
                file
            }
            None => format!("the kustomization Flux generates for {}", self.rel(dir)),
        };
        self.unmodelled_fields(&doc, &label, &chain);
        let mut objects = acc;
        let list = |key: &str| -> Vec<String> {
            doc.get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        };
        for entry in list("resources").into_iter().chain(list("bases")) {
            let built = self.resource(dir, &entry, &label, &chain, stack);
            objects.extend(built);
        }
        for entry in list("components") {
            let target = normalize(&dir.join(&entry));
            let component = if target.starts_with(&self.root) && self.artifact.is_dir(&target) {
                self.kustomization_file(&target)
            } else {
                None
            };
            match component {
                Some(cfile) => {
                    if let Some(cdoc) = self.read_kustomization(&cfile, &chain) {
                        objects =
                            self.build_doc(&target, Some(&cfile), cdoc, &chain, stack, objects);
                    }
                }
                None if is_remote(&entry) => self.remote(&label, &entry, &chain),
                None => {
                    let message = format!(
                        "{label} lists component `{entry}`, which is not a directory with a kustomization file in the artifact"
                    );
                    self.warn(PATH_NOT_FOUND, None, &chain, message);
                }
            }
        }
        self.generators(&doc, dir, &label, &chain, &mut objects);
        self.transform(&doc, dir, &label, &chain, &mut objects);
        if kfile.is_some() {
            stack.pop();
        }
        objects
    }

    fn resource(
        &mut self,
        dir: &Path,
        entry: &str,
        label: &str,
        chain: &[String],
        stack: &mut Vec<PathBuf>,
    ) -> Vec<Object> {
        let target = normalize(&dir.join(entry));
        if is_remote(entry) {
            self.remote(label, entry, chain);
        } else if !target.starts_with(&self.root) {
            let message =
                format!("{label} references `{entry}`, outside flux.root; Flux cannot read it");
            self.warn(PATH_NOT_FOUND, None, chain, message);
        } else if self.artifact.is_dir(&target) {
            match self.kustomization_file(&target) {
                Some(sub) => {
                    if let Some(doc) = self.read_kustomization(&sub, chain) {
                        if let Some(built) = self.delegate(&target, &sub, &doc, chain) {
                            return built;
                        }
                        return self.build_doc(&target, Some(&sub), doc, chain, stack, Vec::new());
                    }
                }
                None => {
                    let message = format!(
                        "{label} references directory `{entry}`, which has no kustomization.yaml; kustomize cannot build it"
                    );
                    self.warn(PATH_NOT_FOUND, None, chain, message);
                }
            }
        } else if self.artifact.is_file(&target) {
            return self.load_file(&target, chain);
        } else if self.artifact.left_out(&target) {
            let message = format!(
                "{label} references `{entry}`, which is a symlink or ignored (.sourceignore, the GitRepository's spec.ignore, source-controller's defaults), so it is not in the GitRepository artifact"
            );
            self.warn(PATH_NOT_FOUND, None, chain, message);
        } else {
            let message = format!("{label} references `{entry}`, which does not exist");
            self.warn(PATH_NOT_FOUND, None, chain, message);
        }
        Vec::new()
    }

    /// The objects `kubectl kustomize` builds from `dir`, when the
    /// kustomization `doc` (in `kfile`) uses a [`DELEGATED_FIELDS`] construct
    /// and kubectl is at hand; `None` (the built-in build runs, and warns)
    /// otherwise. Built through a kustomization around `dir` with
    /// `buildMetadata: [originAnnotations]`, whose
    /// `config.kubernetes.io/origin` gives each object's file
    /// (kubernetes-sigs/kustomize `api/internal/target/kusttarget.go`,
    /// `api/resource/origin.go`); generated objects are attributed to the
    /// kustomization that configures them.
    fn delegate(
        &mut self,
        dir: &Path,
        kfile: &Path,
        doc: &Value,
        chain: &[String],
    ) -> Option<Vec<Object>> {
        let kubectl = self.kubectl.clone()?;
        let used: Vec<String> = doc
            .as_object()?
            .keys()
            .filter(|k| DELEGATED_FIELDS.contains(&k.as_str()))
            .map(|k| format!("`{k}`"))
            .collect();
        if used.is_empty() {
            return None;
        }
        let file = self.rel(kfile);
        let mut chain = chain.to_vec();
        chain.push(file.clone());
        let built = kubectl_kustomize(&kubectl, dir).and_then(|(wrapper, text)| {
            serde_saphyr::from_multiple::<Value>(&text)
                .map(|docs| (wrapper, docs))
                .map_err(|e| format!("its output is not YAML: {}", e.without_snippet()))
        });
        let (wrapper, docs) = match built {
            Ok(built) => built,
            Err(why) => {
                self.tree.findings.push(Finding {
                    severity: Severity::Info,
                    code: NOT_MODELLED,
                    release: None,
                    object: None,
                    chain,
                    message: format!(
                        "{file} uses {}, which this scan does not model, and `kubectl kustomize` could not build it ({why}); see the warnings about it",
                        used.join(", ")
                    ),
                });
                return None;
            }
        };
        let mut objects = Vec::new();
        for mut body in docs.into_iter().filter(|d| !d.is_null()) {
            let origin = take_origin(&mut body);
            let from = origin
                .and_then(|o| {
                    let path = o
                        .get("path")
                        .or(o.get("configuredIn"))?
                        .as_str()?
                        .to_string();
                    Some(self.rel(&normalize(&wrapper.join(path))))
                })
                .unwrap_or_else(|| file.clone());
            let mut object_chain = chain.clone();
            if from != file {
                object_chain.push(from.clone());
            }
            objects.extend(object(body, &from, &object_chain));
        }
        self.tree.findings.push(Finding {
            severity: Severity::Info,
            code: NOT_MODELLED,
            release: None,
            object: None,
            chain,
            message: format!(
                "{file} uses {}, which this scan does not model; it was built with `kubectl kustomize` instead ({})",
                used.join(", "),
                crate::duration::count(objects.len(), "object")
            ),
        });
        Some(objects)
    }

    fn remote(&mut self, label: &str, entry: &str, chain: &[String]) {
        let message = format!(
            "{label} includes the remote resource `{entry}`; it is not fetched, so objects it defines are not checked"
        );
        self.warn(REMOTE_RESOURCE_NOT_FOLLOWED, None, chain, message);
    }

    /// Every kustomization field that could add, remove or rename objects and
    /// that is not applied here is a warning.
    fn unmodelled_fields(&mut self, doc: &Value, label: &str, chain: &[String]) {
        let Some(map) = doc.as_object() else {
            return;
        };
        for key in map.keys() {
            if MODELLED_FIELDS.contains(&key.as_str())
                || NAME_NEUTRAL_FIELDS.contains(&key.as_str())
            {
                continue;
            }
            let what = match key.as_str() {
                "generators" | "transformers" | "validators" => "kustomize plugins",
                "helmCharts" | "helmGlobals" | "helmChartInflationGenerator" => {
                    "kustomize's Helm chart inflation"
                }
                "vars" => "kustomize vars",
                _ => "a kustomization field this scan does not know",
            };
            let message = format!(
                "{label} uses `{key}` ({what}), which can add or rename objects and is not modelled; HelmReleases it produces or renames are not checked"
            );
            self.warn(NOT_MODELLED, None, chain, message);
        }
        for (key, entry) in ["patches", "patchesJson6902"].iter().flat_map(|k| {
            doc.get(*k)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(move |e| (*k, e))
        }) {
            if entry.pointer("/options/allowNameChange") == Some(&Value::Bool(true))
                || entry.pointer("/options/allowKindChange") == Some(&Value::Bool(true))
            {
                let message = format!(
                    "{label} has a `{key}` entry with allowNameChange/allowKindChange; a renaming strategic-merge patch is not modelled"
                );
                self.warn(NOT_MODELLED, None, chain, message);
            }
        }
    }

    /// `configMapGenerator`/`secretGenerator`: the ConfigMaps and Secrets,
    /// with their data, when their names carry no content hash (only those
    /// can be found by name, e.g. by `substituteFrom`).
    fn generators(
        &mut self,
        doc: &Value,
        dir: &Path,
        label: &str,
        chain: &[String],
        objects: &mut Vec<Object>,
    ) {
        let global_disable = doc
            .pointer("/generatorOptions/disableNameSuffixHash")
            .and_then(Value::as_bool)
            == Some(true);
        for (key, kind) in [
            ("configMapGenerator", "ConfigMap"),
            ("secretGenerator", "Secret"),
        ] {
            for generator in doc.get(key).and_then(Value::as_array).into_iter().flatten() {
                let disable = generator
                    .pointer("/options/disableNameSuffixHash")
                    .and_then(Value::as_bool)
                    .unwrap_or(global_disable);
                let Some(name) = generator.get("name").and_then(Value::as_str) else {
                    continue;
                };
                if !disable {
                    continue;
                }
                let mut data = Map::new();
                let strings = |k: &str| -> Vec<String> {
                    generator
                        .get(k)
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                };
                let mut env_lines = Vec::new();
                for env in strings("envs").into_iter().chain(strings("env")) {
                    let path = normalize(&dir.join(&env));
                    self.files.insert(path.clone());
                    match std::fs::read_to_string(&path) {
                        Ok(text) if self.artifact.is_file(&path) => {
                            env_lines.extend(text.lines().map(str::to_string))
                        }
                        _ => {
                            let message = format!(
                                "{label}: {key} `{name}` reads `{env}`, which cannot be read"
                            );
                            self.warn(BUILD_FAILS, None, chain, message);
                        }
                    }
                }
                for line in strings("literals").into_iter().chain(env_lines) {
                    let line = line.trim();
                    if line.is_empty() || line.starts_with('#') {
                        continue;
                    }
                    if let Some((k, v)) = line.split_once('=') {
                        let v = v.trim_matches('"');
                        data.insert(k.trim().to_string(), Value::String(v.to_string()));
                    }
                }
                for file in strings("files") {
                    let (k, path) = match file.split_once('=') {
                        Some((k, p)) => (k.to_string(), p.to_string()),
                        None => (
                            file.rsplit('/').next().unwrap_or(&file).to_string(),
                            file.clone(),
                        ),
                    };
                    let path = normalize(&dir.join(&path));
                    if let Ok(text) = std::fs::read_to_string(&path) {
                        data.insert(k, Value::String(text));
                    }
                }
                let data_key = if kind == "Secret" {
                    "stringData"
                } else {
                    "data"
                };
                let mut meta = json!({ "name": name });
                if let Some(ns) = generator.get("namespace").and_then(Value::as_str) {
                    meta["namespace"] = json!(ns);
                }
                let body =
                    json!({ "apiVersion": "v1", "kind": kind, "metadata": meta, data_key: data });
                let behavior = generator.get("behavior").and_then(Value::as_str);
                if (behavior == Some("merge") || behavior == Some("replace"))
                    && let Some(existing) = objects
                        .iter_mut()
                        .find(|o| o.kind == kind && o.name == name)
                {
                    if behavior == Some("replace") {
                        existing.body[data_key] = json!({});
                    }
                    kustomize::strategic_merge(
                        &mut existing.body,
                        &json!({ data_key: body[data_key] }),
                    );
                    continue;
                }
                if let Some(obj) = object(body, &label_file(label, chain), chain) {
                    objects.push(obj);
                }
            }
        }
    }

    /// kustomize's transformers in its order (see [`super::kustomize`]).
    fn transform(
        &mut self,
        doc: &Value,
        dir: &Path,
        label: &str,
        chain: &[String],
        objects: &mut Vec<Object>,
    ) {
        let entries = |key: &str| -> Vec<Value> {
            doc.get(key)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        for entry in entries("patchesStrategicMerge") {
            let patches = match &entry {
                Value::String(s) if !s.contains('\n') && !s.contains(':') => {
                    self.patch_file(dir, s, label, chain)
                }
                Value::String(s) => self.parse_patch(s, label, chain),
                other => Some(vec![other.clone()]),
            };
            for patch in patches.into_iter().flatten() {
                self.smp_by_id(&patch, label, chain, objects);
            }
        }
        for entry in entries("patches") {
            let patches = match (
                entry.get("patch"),
                entry.get("path").and_then(Value::as_str),
            ) {
                (Some(Value::String(s)), _) => self.parse_patch(s, label, chain),
                (Some(other), _) => Some(vec![other.clone()]),
                (None, Some(path)) => self.patch_file(dir, path, label, chain),
                (None, None) => None,
            };
            let target = entry.get("target");
            for patch in patches.into_iter().flatten() {
                self.apply_patch(&patch, target, label, chain, objects);
            }
        }
        if let Some(ns) = doc
            .get("namespace")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            kustomize::set_namespace(objects, ns);
        }
        let prefix = doc
            .get("namePrefix")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let suffix = doc
            .get("nameSuffix")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !prefix.is_empty() || !suffix.is_empty() {
            kustomize::add_prefix_suffix(objects, prefix, suffix);
        }
        for entry in entries("patchesJson6902") {
            let patches = match (
                entry.get("patch"),
                entry.get("path").and_then(Value::as_str),
            ) {
                (Some(Value::String(s)), _) => self.parse_patch(s, label, chain),
                (Some(other), _) => Some(vec![other.clone()]),
                (None, Some(path)) => self.patch_file(dir, path, label, chain),
                (None, None) => None,
            };
            for patch in patches.into_iter().flatten() {
                self.apply_patch(&patch, entry.get("target"), label, chain, objects);
            }
        }
        for entry in entries("replacements") {
            let replacements = match entry.get("path").and_then(Value::as_str) {
                Some(path) => self
                    .patch_file(dir, path, label, chain)
                    .unwrap_or_default()
                    .into_iter()
                    .flat_map(|d| match d {
                        Value::Array(items) => items,
                        other => vec![other],
                    })
                    .collect(),
                None => vec![entry.clone()],
            };
            for replacement in replacements {
                if let Err(e) = kustomize::replace(objects, &replacement) {
                    let message = format!("{label}: kustomize would fail on a replacement: {e}");
                    self.warn(BUILD_FAILS, None, chain, message);
                }
            }
        }
    }

    /// A patch file's documents (relative to the kustomization directory).
    fn patch_file(
        &mut self,
        dir: &Path,
        path: &str,
        label: &str,
        chain: &[String],
    ) -> Option<Vec<Value>> {
        let target = normalize(&dir.join(path));
        if !target.starts_with(&self.root) || !self.artifact.is_file(&target) {
            let message = format!(
                "{label} references patch `{path}`, which is not in the GitRepository artifact"
            );
            self.warn(PATH_NOT_FOUND, None, chain, message);
            return None;
        }
        self.files.insert(target.clone());
        self.read_documents(&target, chain)
    }

    fn parse_patch(&mut self, text: &str, label: &str, chain: &[String]) -> Option<Vec<Value>> {
        match serde_saphyr::from_multiple::<Value>(text) {
            Ok(docs) => Some(docs.into_iter().filter(|d| !d.is_null()).collect()),
            Err(e) => {
                let message = format!(
                    "{label} has an inline patch that is not valid YAML: {}",
                    e.without_snippet()
                );
                self.warn(BUILD_FAILS, None, chain, message);
                None
            }
        }
    }

    /// A `patches` or `patchesJson6902` entry: a JSON 6902 list needs a
    /// target; a strategic-merge patch applies to its target's objects, or
    /// without one to the object it names (kustomize
    /// `api/internal/builtins/PatchTransformer.go`).
    fn apply_patch(
        &mut self,
        patch: &Value,
        target: Option<&Value>,
        label: &str,
        chain: &[String],
        objects: &mut Vec<Object>,
    ) {
        match (patch, target) {
            (Value::Array(ops), Some(target)) => {
                for obj in objects
                    .iter_mut()
                    .filter(|o| kustomize::selected(o, target))
                {
                    if let Err(e) = kustomize::json6902(&mut obj.body, ops) {
                        let message = format!(
                            "{label}: kustomize would fail to patch {} {}: {e}",
                            obj.kind, obj.name
                        );
                        self.tree.findings.push(Finding {
                            severity: Severity::Warning,
                            code: BUILD_FAILS,
                            release: None,
                            object: Some(obj.reference()),
                            chain: chain.to_vec(),
                            message,
                        });
                    }
                    kustomize::sync(obj);
                }
            }
            (Value::Array(_), None) => {
                let message =
                    format!("{label}: a JSON 6902 patch without a target; kustomize would fail");
                self.warn(BUILD_FAILS, None, chain, message);
            }
            (patch, Some(target)) => {
                // The patch's own kind and name are replaced by each target's.
                let mut keep = Vec::with_capacity(objects.len());
                for mut obj in objects.drain(..) {
                    if kustomize::selected(&obj, target) {
                        let mut p = patch.clone();
                        if let Some(meta) = p.get_mut("metadata").and_then(Value::as_object_mut) {
                            meta.remove("name");
                            meta.remove("namespace");
                        }
                        if let Some(map) = p.as_object_mut() {
                            map.remove("kind");
                            map.remove("apiVersion");
                        }
                        if !kustomize::strategic_merge(&mut obj.body, &p) {
                            continue;
                        }
                        kustomize::sync(&mut obj);
                    }
                    keep.push(obj);
                }
                *objects = keep;
            }
            (patch, None) => self.smp_by_id(patch, label, chain, objects),
        }
    }

    /// A strategic-merge patch applied to the object with its kind, name and
    /// namespace, current or before a rename (`""` equals `default`, kustomize `resid.IsNsEquals`);
    /// kustomize fails when there is not exactly one.
    fn smp_by_id(
        &mut self,
        patch: &Value,
        label: &str,
        chain: &[String],
        objects: &mut Vec<Object>,
    ) {
        let text = |p: &str| patch.pointer(p).and_then(Value::as_str);
        let (Some(kind), Some(name)) = (text("/kind"), text("/metadata/name")) else {
            let message = format!(
                "{label}: a strategic-merge patch without kind and metadata.name; kustomize would fail"
            );
            self.warn(BUILD_FAILS, None, chain, message);
            return;
        };
        let ns_of = |ns: Option<&str>| match ns {
            None | Some("") => "default".to_string(),
            Some(ns) => ns.to_string(),
        };
        let want_ns = ns_of(text("/metadata/namespace"));
        let group = text("/apiVersion")
            .and_then(|v| v.rsplit_once('/'))
            .map(|(g, _)| g);
        let matches: Vec<usize> = objects
            .iter()
            .enumerate()
            .filter(|(_, o)| {
                o.kind == kind
                    && group.is_none_or(|g| g == o.group())
                    && std::iter::once((&o.name, &o.namespace))
                        .chain(o.previous_ids.iter().map(|(n, ns)| (n, ns)))
                        .any(|(n, ns)| n == name && ns_of(ns.as_deref()) == want_ns)
            })
            .map(|(i, _)| i)
            .collect();
        let [i] = matches[..] else {
            let message = format!(
                "{label}: kustomize would fail: the strategic-merge patch for {kind} {name} matches {} objects, not one",
                matches.len()
            );
            self.warn(BUILD_FAILS, None, chain, message);
            return;
        };
        // The patch names the object; it does not rename it.
        let mut patch = patch.clone();
        if let Some(meta) = patch.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("name");
            meta.remove("namespace");
        }
        if kustomize::strategic_merge(&mut objects[i].body, &patch) {
            kustomize::sync(&mut objects[i]);
        } else {
            objects.remove(i);
        }
    }

    /// Whether every ConfigMap/Secret a Kustomization's `substituteFrom`
    /// names is among the scanned objects (or `extra`).
    fn substitution_sources_found(&self, ks: &Object, extra: &[Object]) -> bool {
        substitute_from(ks)
            .iter()
            .all(|(kind, name, _)| self.find_source(ks, kind, name, extra).is_some())
    }

    fn find_source<'a>(
        &'a self,
        ks: &Object,
        kind: &str,
        name: &str,
        extra: &'a [Object],
    ) -> Option<&'a Object> {
        self.tree.objects.iter().chain(extra).find(|o| {
            o.kind == kind && o.name == name && o.namespace == ks.namespace && o.group().is_empty()
        })
    }

    /// Flux's post-build substitution of a Kustomization's objects.
    fn post_build(&mut self, ks: &Object, objects: &mut [Object], chain: &[String]) {
        let Some(post_build) = ks.body.pointer("/spec/postBuild") else {
            return;
        };
        let mut vars = BTreeMap::new();
        let mut unresolved = Vec::new();
        for (kind, name, optional) in substitute_from(ks) {
            match self.find_source(ks, &kind, &name, objects) {
                Some(source) => match source_data(source) {
                    Ok(data) => vars.extend(data),
                    Err(why) => unresolved.push(format!("{kind} {name} ({why})")),
                },
                None => unresolved.push(format!(
                    "{kind} {}/{name}{} (not in the scanned tree)",
                    ns_display(ks.namespace.as_deref()),
                    if optional { ", optional" } else { "" }
                )),
            }
        }
        for what in unresolved {
            let message = format!(
                "Kustomization {}/{} substitutes variables from {what}; its variables are unknown, so names and namespaces that use them are checked as if they were empty or defaulted",
                ns_display(ks.namespace.as_deref()),
                ks.name
            );
            self.warn(
                SUBSTITUTE_FROM_UNRESOLVED,
                Some(ks.reference()),
                chain,
                message,
            );
        }
        for (k, v) in post_build
            .get("substitute")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let v = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            vars.insert(k.clone(), v.replace('\n', ""));
        }
        if vars.is_empty() {
            return;
        }
        for obj in objects.iter_mut().filter(|o| !varsub::is_disabled(&o.body)) {
            let bad = varsub::substitute(&mut obj.body, &vars);
            kustomize::sync(obj);
            for expr in bad {
                let message = format!(
                    "{} {} in {} uses `{expr}`, a substitution form not modelled; it is kept as written",
                    obj.kind, obj.name, obj.file
                );
                self.warn(
                    NOT_MODELLED,
                    Some(obj.reference()),
                    &obj.chain.clone(),
                    message,
                );
            }
        }
    }

    fn load_file(&mut self, path: &Path, chain: &[String]) -> Vec<Object> {
        self.files.insert(path.to_path_buf());
        let Some(docs) = self.read_documents(path, chain) else {
            return Vec::new();
        };
        let file = self.rel(path);
        let mut chain = chain.to_vec();
        chain.push(file.clone());
        let mut out = Vec::new();
        for body in docs {
            // kustomize reads `kind: List` items as objects.
            let items = match body.get("items").and_then(Value::as_array) {
                Some(items)
                    if body
                        .get("kind")
                        .and_then(Value::as_str)
                        .is_some_and(|k| k.ends_with("List")) =>
                {
                    items.clone()
                }
                _ => vec![body],
            };
            out.extend(items.into_iter().filter_map(|b| object(b, &file, &chain)));
        }
        out
    }

    fn read_documents(&mut self, path: &Path, chain: &[String]) -> Option<Vec<Value>> {
        let file = self.rel(path);
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) => {
                self.invalid(chain, &file, format!("cannot read {file}: {e}"));
                return None;
            }
        };
        match serde_saphyr::from_multiple::<Value>(&text) {
            Ok(docs) => Some(docs.into_iter().filter(|d| !d.is_null()).collect()),
            Err(e) => {
                let e = e.without_snippet();
                self.invalid(
                    chain,
                    &file,
                    format!("{file} is not valid YAML, so Flux would fail to apply it: {e}"),
                );
                None
            }
        }
    }

    fn invalid(&mut self, chain: &[String], file: &str, message: String) {
        let mut chain = chain.to_vec();
        chain.push(file.to_string());
        self.warn(YAML_INVALID, None, &chain, message);
    }
}

/// kustomization fields kustomize builds and this scan does not model: with
/// kubectl at hand, a kustomization using one is built by `kubectl
/// kustomize` ([`resolve_with`]). Remote resources are not among them (that
/// build would fetch them).
pub const DELEGATED_FIELDS: [&str; 7] = [
    "generators",
    "transformers",
    "validators",
    "helmCharts",
    "helmGlobals",
    "helmChartInflationGenerator",
    "vars",
];

/// How long `kubectl kustomize` may build one kustomization.
const KUBECTL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// `kubectl kustomize` of a kustomization around `dir` with origin
/// annotations: (the wrapper's directory, which the origins are relative
/// to, and the output). kustomize takes no absolute path as a resource, so
/// the wrapper names `dir` relative to itself. No plugin or helm flag is
/// given: exec and container plugins never run, `helmCharts` fails (and the
/// built-in build warns).
fn kubectl_kustomize(kubectl: &Path, dir: &Path) -> Result<(PathBuf, String), String> {
    use std::io::Read;
    let wrapper = tempfile::tempdir().map_err(|e| format!("no temporary directory: {e}"))?;
    let base = normalize(&std::fs::canonicalize(wrapper.path()).map_err(|e| e.to_string())?);
    let target = normalize(&std::fs::canonicalize(dir).map_err(|e| e.to_string())?);
    std::fs::write(
        base.join("kustomization.yaml"),
        format!(
            "resources:\n  - {}\nbuildMetadata: [originAnnotations]\n",
            serde_json::Value::from(relative(&base, &target).to_string_lossy().into_owned())
        ),
    )
    .map_err(|e| e.to_string())?;
    let mut child = std::process::Command::new(kubectl)
        .arg("kustomize")
        .arg(&base)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", kubectl.display()))?;
    let read = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            pipe.read_to_string(&mut text).map(|_| text)
        })
    };
    let stdout = read(Box::new(child.stdout.take().expect("piped")));
    let stderr = read(Box::new(child.stderr.take().expect("piped")));
    let deadline = std::time::Instant::now() + KUBECTL_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "it did not finish within {}s",
                    KUBECTL_TIMEOUT.as_secs()
                ));
            }
            Err(e) => return Err(e.to_string()),
        }
    };
    let stdout = stdout.join().ok().and_then(Result::ok).unwrap_or_default();
    let stderr = stderr.join().ok().and_then(Result::ok).unwrap_or_default();
    if !status.success() {
        let why = stderr
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("no message")
            .to_string();
        return Err(why);
    }
    Ok((base, stdout))
}

/// `to` relative to `from` (both absolute and normalized): `../x/y`.
fn relative(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<Component> = from.components().collect();
    let to: Vec<Component> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..from.len() {
        out.push("..");
    }
    for part in &to[common..] {
        out.push(part.as_os_str());
    }
    out
}

/// Removes kustomize's `config.kubernetes.io/origin` annotation (and an
/// annotations map it leaves empty) and returns it, parsed.
fn take_origin(body: &mut Value) -> Option<Value> {
    let annotations = body
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)?;
    let origin = annotations.remove("config.kubernetes.io/origin")?;
    if annotations.is_empty()
        && let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.remove("annotations");
    }
    serde_saphyr::from_str::<Value>(origin.as_str()?).ok()
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
    })
}

/// Writes a Flux Kustomization's build fields into the kustomization, as
/// `GenerateManifest` does.
fn overlay(doc: &mut Value, spec: &Value) {
    if !doc.is_object() {
        *doc = json!({});
    }
    let set = |doc: &mut Value, from: &str, to: &str| {
        if let Some(v) = spec.get(from).and_then(Value::as_str) {
            doc[to] = json!(v);
        }
    };
    if spec
        .get("targetNamespace")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())
    {
        set(doc, "targetNamespace", "namespace");
    }
    set(doc, "namePrefix", "namePrefix");
    set(doc, "nameSuffix", "nameSuffix");
    let append = |doc: &mut Value, key: &str, items: Vec<Value>| {
        if items.is_empty() {
            return;
        }
        let list = doc
            .as_object_mut()
            .expect("an object")
            .entry(key)
            .or_insert_with(|| json!([]));
        if let Some(list) = list.as_array_mut() {
            list.extend(items);
        }
    };
    let array = |key: &str| {
        spec.get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    append(doc, "patches", array("patches"));
    append(doc, "components", array("components"));
    append(doc, "patchesStrategicMerge", array("patchesStrategicMerge"));
    append(doc, "patchesJson6902", array("patchesJson6902"));
}

/// (kind, name, optional) of each `postBuild.substituteFrom` entry.
fn substitute_from(ks: &Object) -> Vec<(String, String, bool)> {
    ks.body
        .pointer("/spec/postBuild/substituteFrom")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            Some((
                e.get("kind")?.as_str()?.to_string(),
                e.get("name")?.as_str()?.to_string(),
                e.get("optional").and_then(Value::as_bool) == Some(true),
            ))
        })
        .collect()
}

/// The variables a ConfigMap or Secret provides; a SOPS-encrypted Secret's
/// cannot be known.
fn source_data(source: &Object) -> Result<BTreeMap<String, String>, String> {
    if source.body.get("sops").is_some() {
        return Err("SOPS-encrypted".into());
    }
    let mut out = BTreeMap::new();
    let mut add = |k: &str, v: String| {
        out.insert(k.to_string(), v.replace('\n', ""));
    };
    let data = source.body.get("data").and_then(Value::as_object);
    for (k, v) in data.into_iter().flatten() {
        let text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if source.kind == "Secret" {
            add(k, decode_base64(&text).ok_or("data that is not base64")?);
        } else {
            add(k, text);
        }
    }
    if source.kind == "Secret" {
        for (k, v) in source
            .body
            .get("stringData")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            add(k, v.as_str().map_or_else(|| v.to_string(), str::to_string));
        }
    }
    Ok(out)
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
    fn secret_data_is_base64() {
        assert_eq!(
            decode_base64("a3ViZS1zeXN0ZW0=").as_deref(),
            Some("kube-system")
        );
        assert_eq!(decode_base64("Y2lsaXVt").as_deref(), Some("cilium"));
        assert_eq!(decode_base64("ENC[AES256_GCM"), None);
    }

    #[test]
    fn kustomize_resources_are_named_relative_to_the_wrapper() {
        assert_eq!(
            relative(Path::new("/tmp/.tmpX"), Path::new("/work/repo/apps")),
            Path::new("../../work/repo/apps")
        );
        assert_eq!(
            relative(Path::new("/work/a"), Path::new("/work/a/b")),
            Path::new("b")
        );
    }

    #[test]
    fn the_origin_annotation_is_taken_out() {
        let mut body = json!({"metadata": {"name": "x", "annotations": {
            "config.kubernetes.io/origin": "path: ../repo/apps/hr.yaml\n"}}});
        assert_eq!(
            take_origin(&mut body),
            Some(json!({"path": "../repo/apps/hr.yaml"}))
        );
        assert_eq!(body, json!({"metadata": {"name": "x"}}));
        let mut plain = json!({"metadata": {"name": "x", "annotations": {"a": "b"}}});
        assert_eq!(take_origin(&mut plain), None);
        assert_eq!(plain["metadata"]["annotations"], json!({"a": "b"}));
    }

    #[test]
    fn remote_entries() {
        assert!(is_remote("https://github.com/x/y//deploy?ref=v1"));
        assert!(is_remote("github.com/x/y/deploy?ref=v1"));
        assert!(!is_remote("../base"));
    }
}
