//! Flux's post-build: the variables of `postBuild.substitute` and
//! `substituteFrom`, substituted into the built objects
//! ([`crate::flux::varsub`]).

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Walker, ns_display};
use crate::flux::findings::{BUILD_FAILS, NOT_MODELLED, SUBSTITUTE_FROM_UNRESOLVED};
use crate::flux::kustomize;
use crate::flux::object::{GitObject, Object, decode_base64};
use crate::flux::varsub;

impl Walker {
    /// Whether every ConfigMap/Secret a Kustomization's `substituteFrom`
    /// names is among the scanned objects (or `extra`).
    pub(super) fn substitution_sources_found(&self, ks: &Object, extra: &[Object]) -> bool {
        substitute_from(ks)
            .iter()
            .all(|(kind, name, _)| self.find_source(ks, kind, name, extra).is_some())
    }

    pub(super) fn find_source<'a>(
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

    /// The variables of a Kustomization's `substituteFrom` sources, in
    /// order; a source that is not in the tree or cannot be read is warned
    /// about (its variables are unknown).
    fn substitute_from_vars(
        &mut self,
        ks: &Object,
        objects: &[Object],
        chain: &[String],
    ) -> BTreeMap<String, String> {
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
        vars
    }

    /// Flux's post-build substitution of a Kustomization's objects.
    /// Returns whether Flux fails the build (then `objects` is emptied).
    pub(super) fn post_build(
        &mut self,
        ks: &Object,
        objects: &mut Vec<Object>,
        chain: &[String],
    ) -> bool {
        let Some(post_build) = ks.body.pointer("/spec/postBuild") else {
            return false;
        };
        let mut vars = self.substitute_from_vars(ks, objects, chain);
        for (k, v) in post_build
            .get("substitute")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let Value::String(v) = v else {
                // fluxcd/pkg SubstituteVariables reads `substitute` as a
                // map of strings: anything else fails the build.
                let message = format!(
                    "Kustomization {}/{}: `postBuild.substitute.{k}` is not a string ({v}); kustomize-controller fails the build and applies none of its objects: quote it",
                    ns_display(ks.namespace.as_deref()),
                    ks.name
                );
                self.warn(BUILD_FAILS, Some(ks.reference()), chain, message);
                objects.clear();
                return true;
            };
            vars.insert(k.clone(), v.replace('\n', ""));
        }
        let always = post_build.get("substituteStrategy").and_then(Value::as_str) == Some("Always");
        if vars.is_empty() && !always {
            return false;
        }
        let ks_name = format!(
            "Kustomization {}/{}",
            ns_display(ks.namespace.as_deref()),
            ks.name
        );
        if let Some(bad) = vars.keys().find(|k| !varsub::valid_name(k)) {
            let message = format!(
                "{ks_name}: post-build variable `{bad}` is not a valid name (letters, digits, `_`, not starting with a digit); kustomize-controller fails the build and applies none of its objects"
            );
            self.warn(BUILD_FAILS, Some(ks.reference()), chain, message);
            objects.clear();
            return true;
        }
        let mut failed = false;
        for i in 0..objects.len() {
            if varsub::is_disabled(&objects[i].body) {
                continue;
            }
            // The object as written in git, which a finding points at.
            let written = objects[i].reference();
            let obj = &mut objects[i];
            let outcome = varsub::substitute(&mut obj.body, &vars);
            kustomize::sync(obj);
            for rejected in outcome.errors {
                failed = true;
                let message = format!(
                    "{ks_name}: {} {} in {} uses {rejected}; kustomize-controller fails the build and applies none of its objects",
                    obj.kind, obj.name, obj.file
                );
                self.warn(
                    BUILD_FAILS,
                    Some(obj.reference()),
                    &obj.chain.clone(),
                    message,
                );
            }
            for text in outcome.unmodelled {
                let message = format!(
                    "{} {} in {}: a substituted value became `{text}`, which Flux reads again as YAML; how it reads is not modelled, it is kept as a string",
                    obj.kind, obj.name, obj.file
                );
                self.warn(
                    NOT_MODELLED,
                    Some(obj.reference()),
                    &obj.chain.clone(),
                    message,
                );
            }
            if !failed && self.id_collision(&ks_name, objects, i, &written) {
                failed = true;
            }
        }
        // An object left without a name is built; the apply step refuses it
        // as client-go does ([`super::stage`]).
        if failed {
            objects.clear();
        }
        failed
    }

    /// Whether object `i`, just substituted, has the id of another object
    /// of the build (kustomize-controller's resmap `Replace` then fails the
    /// build), said as a `flux-build-fails` warning about the object as
    /// `written` in git.
    fn id_collision(
        &mut self,
        ks_name: &str,
        objects: &[Object],
        i: usize,
        written: &GitObject,
    ) -> bool {
        let Some(same) = same_id(objects, i) else {
            return false;
        };
        let message = format!(
            "{ks_name}: after substitution {} {} in {} has the kind, namespace and name of another object of the build; kustomize-controller puts each substituted object back by that id and fails the build (`in Replace: id matched {same} resources`), applying none of its objects",
            written.kind, written.name, written.file
        );
        let chain = objects[i].chain.clone();
        self.warn(BUILD_FAILS, Some(written.clone()), &chain, message);
        true
    }
}

/// (kind, name, optional) of each `postBuild.substituteFrom` entry.
pub(super) fn substitute_from(ks: &Object) -> Vec<(String, String, bool)> {
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

/// Why the variables of a `substituteFrom` source cannot be known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(super) enum Unreadable {
    #[error("SOPS-encrypted")]
    SopsEncrypted,
    #[error("data that is not base64")]
    NotBase64,
}

/// The variables a ConfigMap or Secret provides; a SOPS-encrypted Secret's
/// cannot be known.
pub(super) fn source_data(source: &Object) -> Result<BTreeMap<String, String>, Unreadable> {
    if source.body.get("sops").is_some() {
        return Err(Unreadable::SopsEncrypted);
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
            add(k, decode_base64(&text).ok_or(Unreadable::NotBase64)?);
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

/// How many objects of the build share the id of object `i`, just
/// substituted (kustomize's `CurId`: apiVersion, kind, namespace, name),
/// when more than one: kustomize-controller substitutes the objects in
/// order, each put back by that id (resmap `Replace`), which fails when two
/// match. The earlier objects are substituted already, the later not yet.
fn same_id(objects: &[Object], i: usize) -> Option<usize> {
    let id = |o: &Object| {
        (
            o.api_version.clone(),
            o.kind.clone(),
            o.namespace.clone(),
            id_name(o),
        )
    };
    let own = id(&objects[i]);
    let same = objects.iter().filter(|o| id(o) == own).count();
    (same > 1).then_some(same)
}

/// `metadata.name` as kustomize's resmap reads it for an object's id: the
/// text of the scalar whatever its YAML type (a name substituted to `3` is
/// the integer 3 in the object, and `3` in its id), else empty.
fn id_name(o: &Object) -> String {
    match o.body.pointer("/metadata/name") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_data_is_base64() {
        assert_eq!(
            decode_base64("a3ViZS1zeXN0ZW0=").as_deref(),
            Some("kube-system")
        );
        assert_eq!(decode_base64("Y2lsaXVt").as_deref(), Some("cilium"));
        assert_eq!(decode_base64("ENC[AES256_GCM"), None);
    }
}
