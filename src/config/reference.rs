//! References to releases (`needs`, `releases:`, `overrides`,
//! `lints.ignore`): `name` when unique, `namespace/name` always.

use std::collections::HashMap;

use crate::error::suggest;
use crate::release::ReleaseId;

/// A release that is known by name but failed its checks: `needs` naming
/// it are not reported again (its own problem says what is wrong).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Broken {
    pub namespace: Option<String>,
    pub name: String,
    /// Its `needs` as written (name, line, column), when the rest of it
    /// could be read: they are checked all the same, so that one run reports
    /// a bad `needs` beside the problem that broke the release.
    pub needs: Vec<(String, u64, u64)>,
    /// Its file, as shown.
    pub file: std::path::PathBuf,
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
pub(super) struct Resolver {
    by_name: HashMap<String, Vec<ReleaseId>>,
    all: Vec<String>,
    broken: Vec<Broken>,
}

impl Resolver {
    pub(super) fn new<'a>(ids: impl Iterator<Item = &'a ReleaseId>, broken: Vec<Broken>) -> Self {
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

    pub(super) fn resolve(&self, reference: &str) -> Result<ReleaseId, ResolveError> {
        let unknown = || {
            if self.names_broken(reference) {
                return ResolveError::Broken;
            }
            // A release that failed its own checks is still a name the
            // user meant (`cilum` for a `cilium` with a problem of its own).
            let broken = self.broken.iter().map(|b| b.name.as_str());
            ResolveError::Unknown {
                reference: reference.to_string(),
                suggestion: suggest(reference, self.all.iter().map(String::as_str).chain(broken))
                    .map(Into::into),
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
