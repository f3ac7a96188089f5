//! The objects the scan finds, as Flux would apply them ([`Object`]); a
//! finding points at one as a [`GitObject`].

use std::collections::BTreeSet;

pub use crate::finding::GitObject;
use serde_json::Value;

/// A Kubernetes object as Flux would apply it.
#[derive(Debug, Clone)]
pub struct Object {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    /// Effective namespace after kustomize and Flux overrides.
    pub namespace: Option<String>,
    /// Relative to the root, `/`-separated.
    pub file: String,
    /// Files from the entrypoint down to `file` (inclusive).
    pub chain: Vec<String>,
    pub body: Value,
    /// The (name, namespace) pairs it had before kustomize renamed it: a
    /// patch may name any of them (kustomize `GetMatchingResourcesByAnyId`).
    pub previous_ids: Vec<(String, Option<String>)>,
    /// The Flux Kustomization (`namespace/name`) whose build applies it;
    /// `None` for the entrypoint's build.
    pub applier: Option<String>,
    /// The JSON pointers of the scalars kustomize holds quoted or as blocks
    /// ([`super::yaml_style`]): where a strategic-merge patch writes a
    /// string.
    pub quoted: BTreeSet<String>,
    /// The JSON pointers of the nulls written as nothing (`key:`,
    /// [`super::yaml_style::Styles`]): a strategic-merge patch on the object
    /// drops them.
    pub bare_nulls: BTreeSet<String>,
}

#[cfg(test)]
impl Object {
    /// An object with the identity given (unit tests): nothing renamed,
    /// no chain, no applier, no YAML styles.
    pub(crate) fn of(
        (api_version, kind, name): (&str, &str, &str),
        namespace: Option<&str>,
        file: &str,
        body: Value,
    ) -> Object {
        Object {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            namespace: namespace.map(str::to_string),
            file: file.into(),
            chain: Vec::new(),
            body,
            previous_ids: Vec::new(),
            applier: None,
            quoted: BTreeSet::new(),
            bare_nulls: BTreeSet::new(),
        }
    }
}

impl Object {
    pub fn group(&self) -> &str {
        match self.api_version.split_once('/') {
            Some((group, _)) => group,
            None => "",
        }
    }

    /// `controller` is the toolkit controller prefix: `kustomize`, `helm`, `source`.
    pub fn is_flux(&self, controller: &str, kind: &str) -> bool {
        self.kind == kind
            && self
                .group()
                .strip_prefix(controller)
                .is_some_and(|rest| rest == ".toolkit.fluxcd.io")
    }

    pub fn reference(&self) -> GitObject {
        GitObject {
            kind: self.kind.clone(),
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            file: self.file.clone(),
        }
    }
}

/// A Secret's `data` value as text (`None`: not base64, e.g. SOPS `ENC[…]`).
pub fn decode_base64(text: &str) -> Option<String> {
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::new();
    for c in text
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
    {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(v);
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    String::from_utf8(out).ok()
}
