//! One kustomize build: a kustomization file (or the one Flux generates for
//! a directory without one), its resources, generators, components and
//! transformers, bottom-up.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{KUSTOMIZATION_FILES, MAX_DEPTH, Walker, is_remote, normalize, object};
use crate::flux::findings::{
    BUILD_FAILS, NOT_MODELLED, PATH_NOT_FOUND, REMOTE_RESOURCE_NOT_FOLLOWED, YAML_INVALID,
};
use crate::flux::object::Object;
use crate::flux::yaml_style::{self, Styles};

impl Walker {
    pub(super) fn kustomization_file(&self, dir: &Path) -> Option<PathBuf> {
        KUSTOMIZATION_FILES
            .iter()
            .map(|name| dir.join(name))
            .find(|p| self.artifact.is_file(p))
    }

    /// The build of a Flux Kustomization's path (or the entrypoint).
    pub(super) fn build_root(
        &mut self,
        dir: &Path,
        ks: Option<&Object>,
        chain: &[String],
    ) -> Vec<Object> {
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
                        let mut objects =
                            self.build_doc(dir, None, flux, &chain, &mut Vec::new(), built);
                        self.finish(&mut objects);
                        return objects;
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
        let mut objects = self.build_doc(
            dir,
            kfile.as_deref(),
            doc,
            chain,
            &mut Vec::new(),
            Vec::new(),
        );
        self.finish(&mut objects);
        objects
    }

    /// What Flux generates for a directory without a kustomization file:
    /// resource entries relative to `base`.
    pub(super) fn generate(
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

    pub(super) fn read_kustomization(&mut self, kfile: &Path, chain: &[String]) -> Option<Value> {
        self.files.insert(kfile.to_path_buf());
        self.read_documents(kfile, chain)
            .map(|d| d.into_iter().next().unwrap_or_else(|| json!({})))
    }

    /// One kustomization: `acc` are the objects accumulated so far (a
    /// component transforms its parent's); returns everything built.
    pub(super) fn build_doc(
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
                // kustomize rejects cycles (and so Flux fails the build).
                if stack.len() >= MAX_DEPTH || stack.iter().any(|p| p == kfile) {
                    let message = format!(
                        "{} includes itself through its resources (a cycle); kustomize fails the build",
                        self.rel(kfile)
                    );
                    self.warn(BUILD_FAILS, None, &chain, message);
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
        let configured = self.configurations(&doc, dir, &label, &chain);
        self.generators(&doc, dir, &label, &chain, &mut objects);
        // kustomize (api v0.21, `accumulateTarget`) accumulates components
        // after the generators: a component's transformers see the
        // generated ConfigMaps and Secrets too.
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
        self.transform(&doc, dir, &configured, &label, &chain, &mut objects);
        if kfile.is_some() {
            stack.pop();
        }
        objects
    }

    pub(super) fn resource(
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

    pub(super) fn remote(&mut self, label: &str, entry: &str, chain: &[String]) {
        let message = format!(
            "{label} includes the remote resource `{entry}`; it is not fetched, so objects it defines are not checked"
        );
        self.warn(REMOTE_RESOURCE_NOT_FOLLOWED, None, chain, message);
    }

    /// Every kustomization field that could add, remove or rename objects and
    /// that is not applied here is a warning.
    pub(super) fn unmodelled_fields(&mut self, doc: &Value, label: &str, chain: &[String]) {
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

    pub(super) fn load_file(&mut self, path: &Path, chain: &[String]) -> Vec<Object> {
        self.files.insert(path.to_path_buf());
        let Some(docs) = self.read_documents_styled(path, chain) else {
            return Vec::new();
        };
        let file = self.rel(path);
        let mut chain = chain.to_vec();
        chain.push(file.clone());
        let mut out = Vec::new();
        for (body, styles) in docs {
            // kustomize reads `kind: List` items as objects.
            let items: Vec<(Value, Styles)> = match body.get("items").and_then(Value::as_array) {
                Some(items)
                    if body
                        .get("kind")
                        .and_then(Value::as_str)
                        .is_some_and(|k| k.ends_with("List")) =>
                {
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| (item.clone(), styles.under(&format!("/items/{i}"))))
                        .collect()
                }
                _ => vec![(body, styles)],
            };
            for (body, styles) in items {
                let is_object = body.is_object();
                match object(body, &file, &chain) {
                    Some(mut obj) => {
                        obj.quoted = styles.quoted;
                        obj.bare_nulls = styles.bare_nulls;
                        out.push(obj);
                    }
                    None => {
                        let what = if is_object {
                            "a document without kind or metadata.name"
                        } else {
                            "a document that is not a mapping"
                        };
                        let message = format!(
                            "{file} holds {what}, which is not a Kubernetes object; kustomize (and Flux's generated kustomization) fail the build; the other documents are checked"
                        );
                        self.warn(BUILD_FAILS, None, &chain, message);
                    }
                }
            }
        }
        out
    }

    pub(super) fn read_documents(&mut self, path: &Path, chain: &[String]) -> Option<Vec<Value>> {
        self.read_documents_styled(path, chain)
            .map(|docs| docs.into_iter().map(|(doc, _)| doc).collect())
    }

    /// [`Walker::read_documents`], each with its scalars' styles
    /// ([`crate::flux::yaml_style`]).
    pub(super) fn read_documents_styled(
        &mut self,
        path: &Path,
        chain: &[String],
    ) -> Option<Vec<(Value, Styles)>> {
        let file = self.rel(path);
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) => {
                self.invalid(chain, &file, format!("cannot read {file}: {e}"));
                return None;
            }
        };
        // As kustomize reads it, and as it reaches helm-controller as JSON.
        match crate::flux::kyaml::from_multiple(&text) {
            Ok(docs) => {
                let mut styles = yaml_style::styles(&text);
                if styles.len() != docs.len() {
                    styles = vec![Styles::default(); docs.len()];
                }
                Some(
                    docs.into_iter()
                        .zip(styles)
                        .filter(|(d, _)| !d.is_null())
                        .collect(),
                )
            }
            Err(e) => {
                self.invalid(
                    chain,
                    &file,
                    format!("{file} is not valid YAML, so Flux would fail to apply it: {e}"),
                );
                None
            }
        }
    }

    pub(super) fn invalid(&mut self, chain: &[String], file: &str, message: String) {
        let mut chain = chain.to_vec();
        chain.push(file.to_string());
        self.warn(YAML_INVALID, None, &chain, message);
    }
}

/// kustomization fields that are applied.
pub(super) const MODELLED_FIELDS: &[&str] = &[
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
    "configurations",
    "commonLabels",
    "labels",
    "commonAnnotations",
];

/// kustomization fields that change no object's existence, kind or name.
pub(super) const NAME_NEUTRAL_FIELDS: &[&str] = &[
    "images",
    "replicas",
    "buildMetadata",
    "sortOptions",
    "crds",
    "openapi",
];

/// Writes a Flux Kustomization's build fields into the kustomization, as
/// `GenerateManifest` does.
pub(super) fn overlay(doc: &mut Value, spec: &Value) {
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
