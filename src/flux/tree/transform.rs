//! kustomize's transformers as a kustomization configures them: patches,
//! namespace, name prefix and suffix, labels and annotations, replacements ([`crate::flux::kustomize`]
//! holds the transformers themselves).

use std::path::Path;

use serde_json::Value;

use super::{Walker, normalize};
use crate::flux::findings::{BUILD_FAILS, Finding, PATH_NOT_FOUND, Severity};
use crate::flux::kustomize;
use crate::flux::kustomize::metadata;
use crate::flux::object::Object;

impl Walker {
    /// kustomize's transformers in its order (see [`super::kustomize`]).
    pub(super) fn transform(
        &mut self,
        doc: &Value,
        dir: &Path,
        configured: &metadata::Configured,
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
                self.apply_patch(&patch, target, true, label, chain, objects);
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
        self.warn_comma_names(objects, label, chain);
        self.labels_and_annotations(doc, configured, label, chain, objects);
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
                self.apply_patch(&patch, entry.get("target"), false, label, chain, objects);
            }
        }
        self.warn_duplicate_ids(objects, label, chain);
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

    /// The label transformers (each `labels` entry, then `commonLabels`),
    /// then the annotation transformer (`commonAnnotations`), as kustomize
    /// runs them after the prefix and suffix ([`metadata`]). One that
    /// kustomize rejects fails the build; the others still run.
    fn labels_and_annotations(
        &mut self,
        doc: &Value,
        configured: &metadata::Configured,
        label: &str,
        chain: &[String],
        objects: &mut [Object],
    ) {
        for transformer in metadata::label_transformers(doc, configured)
            .into_iter()
            .chain(metadata::annotation_transformer(doc, configured))
        {
            if let Err(e) = metadata::apply(objects, &transformer) {
                let message =
                    format!("{label}: kustomize would fail to set labels or annotations: {e}");
                self.warn(BUILD_FAILS, None, chain, message);
            }
        }
    }

    /// kustomize records previous names and namespaces comma-separated
    /// (`config.kubernetes.io/previousNames`): a renamed object whose
    /// name holds a comma makes the build fail.
    fn warn_comma_names(&mut self, objects: &[Object], label: &str, chain: &[String]) {
        if let Some(obj) = objects.iter().find(|o| {
            !o.previous_ids.is_empty() && o.previous_ids.iter().any(|(n, _)| n.contains(','))
        }) {
            let message = format!(
                "{label}: {} `{}` has a comma in its name and a namespace, prefix, suffix or JSON patch records its previous id; kustomize fails the build (it keeps previous names comma-separated)",
                obj.kind, obj.name
            );
            self.warn(BUILD_FAILS, Some(obj.reference()), chain, message);
        }
    }

    /// kustomize's resource map holds one resource per id: a patch that
    /// renames one object onto another's id fails the build ("may not
    /// add resource with an already registered id").
    fn warn_duplicate_ids(&mut self, objects: &[Object], label: &str, chain: &[String]) {
        let mut ids = std::collections::HashSet::new();
        if let Some(obj) = objects.iter().find(|o| {
            let ns = match o.namespace.as_deref() {
                None | Some("") if !kustomize::is_cluster_scoped(&o.kind) => Some("default"),
                other => other,
            };
            !ids.insert((
                o.group().to_string(),
                o.kind.clone(),
                ns.map(str::to_string),
                o.name.clone(),
            ))
        }) {
            let message = format!(
                "{label}: two objects end up as {} {}/{}; kustomize fails the build (may not add resource with an already registered id)",
                obj.kind,
                obj.namespace.as_deref().unwrap_or("default"),
                obj.name
            );
            self.warn(BUILD_FAILS, Some(obj.reference()), chain, message);
        }
    }

    /// A patch file's documents (relative to the kustomization directory).
    pub(super) fn patch_file(
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

    pub(super) fn parse_patch(
        &mut self,
        text: &str,
        label: &str,
        chain: &[String],
    ) -> Option<Vec<Value>> {
        match crate::flux::kyaml::from_multiple(text) {
            Ok(docs) => Some(docs.into_iter().filter(|d| !d.is_null()).collect()),
            Err(e) => {
                let message = format!("{label} has an inline patch that is not valid YAML: {e}");
                self.warn(BUILD_FAILS, None, chain, message);
                None
            }
        }
    }

    /// A `patches` or `patchesJson6902` entry: a JSON 6902 list needs a
    /// target; a strategic-merge patch applies to its target's objects, or
    /// without one to the object it names (kustomize
    /// `api/internal/builtins/PatchTransformer.go`).
    /// `store_id`: a `patches` entry, whose JSON 6902 patch records each
    /// target's current id as a previous one (kustomize
    /// `PatchTransformer.transformJson6902` calls `StorePreviousId`; the
    /// legacy `patchesJson6902` does not).
    pub(super) fn apply_patch(
        &mut self,
        patch: &Value,
        target: Option<&Value>,
        store_id: bool,
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
                    if store_id {
                        obj.previous_ids
                            .push((obj.name.clone(), obj.namespace.clone()));
                    }
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
                            written: None,
                            ignored: false,
                        });
                    }
                    // kustomize applies a JSON patch to the object's JSON and
                    // reads the result back: every scalar gets the style
                    // go-yaml gives it.
                    obj.quoted = kustomize::canonical_quoted(&obj.body);
                    // ...and a null is printed `null`, which a later
                    // strategic merge keeps.
                    obj.bare_nulls.clear();
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
                        if !kustomize::strategic_merge_styled(
                            &mut obj.body,
                            &mut obj.quoted,
                            &mut obj.bare_nulls,
                            &p,
                        ) {
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
    pub(super) fn smp_by_id(
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
        // kustomize `GetById(patch.OrgId())`: group, version and kind
        // equal (`Gvk.Equals`), an absent apiVersion being empty ones.
        let api_version = text("/apiVersion").unwrap_or_default();
        let matches: Vec<usize> = objects
            .iter()
            .enumerate()
            .filter(|(_, o)| {
                o.kind == kind
                    && o.api_version == api_version
                    && std::iter::once((&o.name, &o.namespace))
                        .chain(o.previous_ids.iter().map(|(n, ns)| (n, ns)))
                        .any(|(n, ns)| n == name && ns_of(ns.as_deref()) == want_ns)
            })
            .map(|(i, _)| i)
            .collect();
        let [i] = matches[..] else {
            let message = format!(
                "{label}: kustomize would fail: the strategic-merge patch for {kind} {name} (apiVersion `{api_version}`) matches {} objects, not one (kustomize matches its apiVersion, kind, name and namespace exactly)",
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
        let obj = &mut objects[i];
        if kustomize::strategic_merge_styled(
            &mut obj.body,
            &mut obj.quoted,
            &mut obj.bare_nulls,
            &patch,
        ) {
            kustomize::sync(&mut objects[i]);
        } else {
            objects.remove(i);
        }
    }
}
