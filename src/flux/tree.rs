//! Resolves a GitOps tree the way kustomize-controller builds it, offline.
//!
//! - A directory with a kustomization file is built from its `resources`,
//!   `bases` and `components`; its `namespace:` overrides the namespace of
//!   everything below it, the outermost kustomization winning as in kustomize.
//! - A directory without one gets what Flux generates (fluxcd/pkg
//!   `kustomize/kustomize_generator.go`): every `*.yaml`/`*.yml` below it,
//!   except that a subdirectory holding a kustomization file is included as a
//!   kustomization and not descended into.
//! - Every Flux `Kustomization` found starts a new build at `spec.path`
//!   (relative to `flux.root`) whose namespace is `spec.targetNamespace`;
//!   the kustomize namespaces around the Kustomization object do not reach in.
//!
//! Nothing here fails: unreadable files, bad YAML, missing paths and remote
//! resources become findings and the walk goes on.

use std::collections::{BTreeSet, HashSet, VecDeque};
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use super::findings::{
    Finding, PATH_NOT_FOUND, REMOTE_RESOURCE_NOT_FOLLOWED, SOURCE_NOT_FOLLOWED, Severity,
    YAML_INVALID,
};
use super::object::{Object, ObjectRef};

const KUSTOMIZATION_FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];
/// Guards against absurd nesting (and symlink loops kustomize would reject).
const MAX_DEPTH: usize = 64;

#[derive(Debug, Default)]
pub struct Tree {
    pub objects: Vec<Object>,
    pub findings: Vec<Finding>,
    pub files_scanned: usize,
}

/// A build Flux starts: the entrypoint, or a Kustomization's `spec.path`.
struct Build {
    dir: PathBuf,
    namespace: Option<String>,
    chain: Vec<String>,
    origin: Option<ObjectRef>,
    raw_path: String,
}

struct Walker {
    root: PathBuf,
    tree: Tree,
    files: BTreeSet<PathBuf>,
    started: HashSet<(PathBuf, Option<String>)>,
    pending: VecDeque<Build>,
}

/// Resolves everything Flux would apply starting at `root/entrypoint`.
pub fn resolve(root: &Path, entrypoint: &Path) -> Tree {
    let root = normalize(root);
    let mut walker = Walker {
        tree: Tree::default(),
        files: BTreeSet::new(),
        started: HashSet::new(),
        pending: VecDeque::new(),
        root: root.clone(),
    };
    walker.pending.push_back(Build {
        dir: normalize(&root.join(entrypoint)),
        namespace: None,
        chain: Vec::new(),
        origin: None,
        raw_path: entrypoint.display().to_string(),
    });
    // Breadth-first, so an object reached along several Kustomizations keeps
    // the chain with the fewest Flux hops.
    while let Some(build) = walker.pending.pop_front() {
        if walker
            .started
            .insert((build.dir.clone(), build.namespace.clone()))
        {
            walker.start(build);
        }
    }
    walker.tree.files_scanned = walker.files.len();
    walker.tree
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

    fn start(&mut self, build: Build) {
        let Build {
            dir,
            namespace,
            chain,
            origin,
            raw_path,
        } = build;
        if !dir.starts_with(&self.root) {
            let message = format!("`{raw_path}` points outside flux.root; Flux cannot read it");
            self.not_found(origin, chain, message);
        } else if dir.is_dir() {
            self.build_dir(&dir, namespace.as_deref(), &chain, &mut Vec::new());
        } else if dir.is_file() {
            // Flux wants a directory; a file entrypoint is accepted for convenience.
            self.load_file(&dir, namespace.as_deref(), &chain);
        } else {
            let message = match &origin {
                Some(ks) => format!(
                    "spec.path `{raw_path}` of Kustomization {}/{} in {} does not exist under flux.root",
                    ks.namespace.as_deref().unwrap_or("<no namespace>"),
                    ks.name,
                    ks.file
                ),
                None => format!("the Flux entrypoint `{raw_path}` does not exist under flux.root"),
            };
            self.not_found(origin, chain, message);
        }
    }

    fn not_found(&mut self, object: Option<ObjectRef>, chain: Vec<String>, message: String) {
        self.tree.findings.push(Finding {
            severity: Severity::Warning,
            code: PATH_NOT_FOUND,
            release: None,
            object,
            chain,
            message,
        });
    }

    fn build_dir(
        &mut self,
        dir: &Path,
        ns: Option<&str>,
        chain: &[String],
        stack: &mut Vec<PathBuf>,
    ) {
        match kustomization_file(dir) {
            Some(kfile) => self.build_kustomization(&kfile, ns, chain, stack),
            None => self.generate(dir, ns, chain, stack, &mut HashSet::new()),
        }
    }

    /// What Flux generates for a directory without a kustomization file.
    fn generate(
        &mut self,
        dir: &Path,
        ns: Option<&str>,
        chain: &[String],
        stack: &mut Vec<PathBuf>,
        seen: &mut HashSet<PathBuf>,
    ) {
        let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        if seen.len() > MAX_DEPTH * 16 || !seen.insert(canonical) {
            return;
        }
        let mut entries: Vec<PathBuf> = match std::fs::read_dir(dir) {
            Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
            Err(e) => {
                let file = self.rel(dir);
                self.invalid(chain, &file, format!("cannot read directory {file}: {e}"));
                return;
            }
        };
        entries.sort();
        for path in entries {
            if path.is_dir() {
                match kustomization_file(&path) {
                    Some(kfile) => self.build_kustomization(&kfile, ns, chain, stack),
                    None => self.generate(&path, ns, chain, stack, seen),
                }
            } else if matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml")
            ) {
                self.load_file(&path, ns, chain);
            }
        }
    }

    fn build_kustomization(
        &mut self,
        kfile: &Path,
        outer_ns: Option<&str>,
        chain: &[String],
        stack: &mut Vec<PathBuf>,
    ) {
        // kustomize rejects cycles; stopping here is enough to never loop.
        if stack.len() >= MAX_DEPTH || stack.iter().any(|p| p == kfile) {
            return;
        }
        self.files.insert(kfile.to_path_buf());
        let file = self.rel(kfile);
        let Some(doc) = self
            .read_documents(kfile, chain)
            .and_then(|d| d.into_iter().next())
        else {
            return;
        };
        let mut chain = chain.to_vec();
        chain.push(file.clone());
        let own_ns = doc.get("namespace").and_then(Value::as_str);
        let ns = outer_ns.or(own_ns).map(str::to_string);
        let dir = kfile.parent().unwrap_or(&self.root).to_path_buf();
        // `patches` and friends modify objects but never add any: not followed.
        let entries: Vec<String> = ["resources", "bases", "components"]
            .iter()
            .filter_map(|key| doc.get(*key).and_then(Value::as_array))
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        stack.push(kfile.to_path_buf());
        for entry in entries {
            let target = normalize(&dir.join(&entry));
            if !target.starts_with(&self.root) {
                let message =
                    format!("{file} references `{entry}`, outside flux.root; Flux cannot read it");
                self.not_found(None, chain.clone(), message);
            } else if target.is_dir() {
                match kustomization_file(&target) {
                    Some(sub) => self.build_kustomization(&sub, ns.as_deref(), &chain, stack),
                    None => {
                        let message = format!(
                            "{file} references directory `{entry}`, which has no kustomization.yaml; kustomize cannot build it"
                        );
                        self.not_found(None, chain.clone(), message);
                    }
                }
            } else if target.is_file() {
                self.load_file(&target, ns.as_deref(), &chain);
            } else if is_remote(&entry) {
                self.tree.findings.push(Finding {
                    severity: Severity::Warning,
                    code: REMOTE_RESOURCE_NOT_FOLLOWED,
                    release: None,
                    object: None,
                    chain: chain.clone(),
                    message: format!(
                        "{file} includes the remote resource `{entry}`; it is not fetched, so objects it defines are not checked"
                    ),
                });
            } else {
                let message = format!("{file} references `{entry}`, which does not exist");
                self.not_found(None, chain.clone(), message);
            }
        }
        stack.pop();
    }

    fn load_file(&mut self, path: &Path, ns: Option<&str>, chain: &[String]) {
        self.files.insert(path.to_path_buf());
        let Some(docs) = self.read_documents(path, chain) else {
            return;
        };
        let file = self.rel(path);
        let mut chain = chain.to_vec();
        chain.push(file.clone());
        for body in docs {
            let text = |p: &str| body.pointer(p).and_then(Value::as_str).map(str::to_string);
            // Non-object documents (patch fragments, values) are not applied.
            let (Some(kind), Some(name)) = (text("/kind"), text("/metadata/name")) else {
                continue;
            };
            let namespace = match ns {
                Some(ns) if !is_cluster_scoped(&kind) => Some(ns.to_string()),
                _ => text("/metadata/namespace"),
            };
            let object = Object {
                api_version: text("/apiVersion").unwrap_or_default(),
                kind,
                name,
                namespace,
                file: file.clone(),
                chain: chain.clone(),
                body,
            };
            if object.is_flux("kustomize", "Kustomization") {
                self.schedule(&object);
            }
            self.tree.objects.push(object);
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
                    ks.namespace.as_deref().unwrap_or("<no namespace>"),
                    ks.name
                ),
            });
            return;
        }
        let raw = spec.get("path").and_then(Value::as_str).unwrap_or("./");
        let target = self.root.join(raw.trim_start_matches('/'));
        self.pending.push_back(Build {
            dir: normalize(&target),
            namespace: spec
                .get("targetNamespace")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            chain: ks.chain.clone(),
            origin: Some(ks.reference()),
            raw_path: raw.to_string(),
        });
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
        self.tree.findings.push(Finding {
            severity: Severity::Warning,
            code: YAML_INVALID,
            release: None,
            object: None,
            chain,
            message,
        });
    }
}

fn kustomization_file(dir: &Path) -> Option<PathBuf> {
    KUSTOMIZATION_FILES
        .iter()
        .map(|name| dir.join(name))
        .find(|p| p.is_file())
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

/// Kinds kustomize's namespace transformer leaves alone (built-in cluster-scoped
/// kinds; like kustomize, unknown custom kinds are treated as namespaced).
fn is_cluster_scoped(kind: &str) -> bool {
    matches!(
        kind,
        "Namespace"
            | "CustomResourceDefinition"
            | "ClusterRole"
            | "ClusterRoleBinding"
            | "PersistentVolume"
            | "StorageClass"
            | "PriorityClass"
            | "IngressClass"
            | "RuntimeClass"
            | "CSIDriver"
            | "APIService"
            | "MutatingWebhookConfiguration"
            | "ValidatingWebhookConfiguration"
            | "ValidatingAdmissionPolicy"
            | "ValidatingAdmissionPolicyBinding"
    )
}

/// Lexical normalization: `..` applies to the path as written, as kustomize
/// and Flux do, not to where a symlink points.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}
