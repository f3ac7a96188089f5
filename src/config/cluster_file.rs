//! A cluster's file, `clusters/<cluster>/cluster.yaml`: read and checked,
//! the releases it selects, and the [`Cluster`] it describes.

use std::path::{Path, PathBuf};

use super::file::Spanned;

use super::draft::Paths;
use super::file::{ClusterFile, IgnoreEntry};
use super::reference::{ResolveError, Resolver};
use super::{Cluster, Flux};
use crate::error::{Error, Problem, did_you_mean};
use crate::plan::Ignore;
use crate::release::ReleaseId;
use crate::validate;
use crate::yaml;

/// The names of the clusters of the config root `root`.
pub fn cluster_names(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join("clusters"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("cluster.yaml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The cluster file, or `None` when it is too broken to use; its problems
/// go to `problems` so the release files are still checked. An unknown
/// cluster is an error on its own: nothing else can be checked for it.
pub(super) fn read_cluster(
    paths: &Paths,
    cluster: &str,
    problems: &mut Vec<Problem>,
) -> Result<Option<ClusterFile>, Error> {
    let path = paths
        .root
        .join("clusters")
        .join(cluster)
        .join("cluster.yaml");
    if std::fs::symlink_metadata(&path).is_ok() {
        // There is something by that name: read it as a config file (a
        // FIFO, directory or dangling symlink is an error naming it).
        if let Err(unreadable) = super::read::text(&path) {
            return Err(Error::config(unreadable.problem(&paths.show(&path))));
        }
    }
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            let known = cluster_names(&paths.root);
            let listing = if known.is_empty() {
                "there is no clusters/<name>/cluster.yaml here; pass --dir with your config root"
                    .to_string()
            } else {
                format!(
                    "clusters here: {}{}",
                    known.join(", "),
                    did_you_mean(cluster, known.iter().map(String::as_str))
                )
            };
            let message = if e.kind() == std::io::ErrorKind::NotFound {
                format!("unknown cluster `{cluster}`; {listing}")
            } else {
                format!("cannot read the cluster file: {e}")
            };
            return Err(Error::config(Problem::new(message).file(paths.show(&path))));
        }
    };
    let mut parsed = yaml::one_document::<ClusterFile>(&text, &paths.show(&path));
    problems.append(&mut parsed.problems);
    let Some(file) = parsed.value else {
        return Ok(None);
    };
    if file.name.value != cluster {
        problems.push(
            Problem::new(format!(
                "`name: {}` does not match its directory `clusters/{cluster}`; they must be equal",
                file.name.value
            ))
            .file(paths.show(&path))
            .at(file.name.referenced.line(), file.name.referenced.column()),
        );
    } else if let Err(why) = validate::dns_label(cluster) {
        problems
            .push(Problem::new(format!("cluster name `{cluster}` {why}")).file(paths.show(&path)));
    }
    Ok(Some(file))
}

/// The releases `releases:` lists, or `None` when it lists none (all).
pub(super) fn select(
    file: &ClusterFile,
    resolver: &Resolver,
    shown: &Path,
    problems: &mut Vec<Problem>,
) -> Option<std::collections::BTreeSet<ReleaseId>> {
    let list: &Vec<Spanned<String>> = file.releases.as_ref()?;
    let mut ids = std::collections::BTreeSet::new();
    for entry in list {
        match resolver.resolve(&entry.value) {
            Ok(id) => {
                ids.insert(id);
            }
            Err(ResolveError::Broken) => {}
            Err(message) => problems.push(
                Problem::new(format!("`releases` lists {message}"))
                    .file(shown)
                    .at(entry.referenced.line(), entry.referenced.column()),
            ),
        }
    }
    Some(ids)
}

pub(super) fn build_cluster(
    paths: &Paths,
    name: &str,
    file: &ClusterFile,
    resolver: &Resolver,
    shown: &Path,
    problems: &mut Vec<Problem>,
) -> Cluster {
    let dir = paths.root.join("clusters").join(name);
    let flux = file.flux.as_ref().and_then(|f| {
        let root = paths.root.join(&f.root);
        let entry = root.join(&f.entrypoint);
        if !root.is_dir() {
            problems.push(
                Problem::new(format!(
                    "`flux.root: {}` is not a directory (relative to the config root)",
                    f.root
                ))
                .file(shown),
            );
            None
        } else if !entry.exists() {
            problems.push(
                Problem::new(format!(
                    "`flux.entrypoint: {}` does not exist under `flux.root`",
                    f.entrypoint
                ))
                .file(shown),
            );
            None
        } else {
            Some(Flux {
                root: std::fs::canonicalize(&root).unwrap_or(root),
                entrypoint: PathBuf::from(&f.entrypoint),
            })
        }
    });
    Cluster {
        name: name.to_string(),
        dir,
        context: file.context.clone(),
        values: file.values.clone(),
        flux,
        guard: file.guard.unwrap_or(true),
        lints_ignore: lints_ignore(file, resolver, shown, problems),
    }
}

/// `lints.ignore` (docs/design.md#lints): a lint code, for every release or
/// for one; a Flux-scan error code only for one release, since a blanket
/// ignore of "Flux manages a bootstrap release" would switch the scan off.
fn lints_ignore(
    file: &ClusterFile,
    resolver: &Resolver,
    shown: &Path,
    problems: &mut Vec<Problem>,
) -> Vec<Ignore> {
    let lint_codes = crate::lint::RULES.iter().map(|r| r.code);
    let scan_codes = crate::flux::findings::IGNORABLE;
    let codes: Vec<&str> = lint_codes.chain(scan_codes).collect();
    let mut out = Vec::new();
    for entry in &file.lints.ignore {
        let at = (entry.referenced.line(), entry.referenced.column());
        let problem = |message: String| Problem::new(message).file(shown).at(at.0, at.1);
        let (code, release) = match &entry.value {
            IgnoreEntry::Code(code) => (code, None),
            IgnoreEntry::Release(r) => (&r.code, Some(&r.release)),
        };
        if !codes.contains(&code.as_str()) {
            problems.push(problem(format!(
                "`lints.ignore` lists `{code}`, which is not a lint code nor an error code of the Flux scan{}",
                did_you_mean(code, codes.iter().copied())
            )));
            continue;
        }
        let release = match release {
            None if scan_codes.contains(&code.as_str()) => {
                problems.push(problem(format!(
                    "`lints.ignore` lists `{code}` for every release; the Flux scan's errors are ignored one release at a time: write `- {{code: {code}, release: NAMESPACE/NAME}}`"
                )));
                continue;
            }
            None => None,
            Some(reference) => match resolver.resolve(reference) {
                Ok(id) => Some(id),
                Err(ResolveError::Broken) => continue,
                Err(message) => {
                    problems.push(problem(format!("`lints.ignore` names {message}")));
                    continue;
                }
            },
        };
        out.push(Ignore {
            code: code.clone(),
            release,
        });
    }
    out
}
