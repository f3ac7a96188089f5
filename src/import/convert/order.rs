//! The imported releases put in order: duplicates merged, `needs`
//! resolved across files, files ordered by what they need.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use super::{Group, ReleaseOut, ValuesOut};
use crate::error::{Error, Problem};
use crate::import::Issue;

/// One release defined in several state files (helmfile installs it once
/// per file, the last one winning): the same definition twice is one
/// release, a CRD-only one and an installing one are the installing one
/// with its CRDs applied in the CRD phase, anything else stops the import
/// naming both places, since bootstrap would otherwise install one of them
/// silently.
pub(super) fn merge_duplicates(groups: &mut [Group]) -> Result<(), Error> {
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
            } else if first_crds == later_crds && !comparable(first, later) {
                // A part of either was not converted (a chart template the
                // subset cannot evaluate): whether they differ is unknown.
                // Written once, with a `todo` naming both places, rather
                // than stopping the import on a difference that may not be.
                let name = later.name.clone();
                let issue = Issue::new(
                    &at.0,
                    at.1,
                    format!("name: {name}"),
                    format!(
                        "defined again here (first at {}:{}); the two could not be compared, since a part of them was not converted: bootstrap installs the release once, as the first definition says; check that this one says the same",
                        first.source.display(),
                        first.line
                    ),
                );
                let first = &mut groups[fg].releases[fr];
                first.also.push(at);
                first.todo.push(issue);
                drop.push((g, r));
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

/// Whether two definitions were converted whole, so that a difference
/// between them is one.
fn comparable(a: &ReleaseOut, b: &ReleaseOut) -> bool {
    a.chart.is_some() && b.chart.is_some() && a.todo.is_empty() && b.todo.is_empty()
}

pub(super) fn same_chart(a: &ReleaseOut, b: &ReleaseOut) -> bool {
    match (&a.chart, &b.chart) {
        (Some(x), Some(y)) => x.chart == y.chart && x.version == y.version,
        _ => false,
    }
}

/// Two definitions install the same thing the same way.
pub(super) fn same_install(a: &ReleaseOut, b: &ReleaseOut) -> bool {
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

/// helmfile's needs (`[KUBECONTEXT/][NAMESPACE/]NAME`, `pkg/state/state.go`
/// `ReleaseToID`) as `namespace/name` of an imported release, across all
/// the files imported. A need that names no release, or several, is never
/// dropped quietly: it is an issue and a `todo` of the release naming both
/// sides.
pub(super) fn resolve_needs(groups: &mut [Group], issues: &mut Vec<Issue>) {
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
pub(super) fn order_files(groups: &mut [Group]) {
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
