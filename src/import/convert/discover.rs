//! The repository's Flux tree when nothing the helmfile read names it
//! (docs/design.md#import): the import always looks, so that a release a
//! Flux HelmRelease manages is never written bootstrap-owned unseen.
//!
//! Where: `--flux-root` when given, else the repository the state files are
//! in: the nearest directory above them with `.git`, or, without one, the
//! state file's directory and those above it up to the working directory
//! ([`LEVELS`] at most), the first that holds a Flux tree. A state file
//! outside the working directory, with no `.git` above it, is searched
//! beside only: nothing above the user's own directory is read. What: the entrypoints Flux itself starts from — a
//! FluxInstance's `spec.sync.path` (or the flux-instance chart's
//! `instance.sync.path` in a HelmRelease), the path of the `flux-system`
//! Kustomization (`flux bootstrap`'s), else every Flux Kustomization's
//! directory that no other Kustomization's path holds — each resolved as
//! `check` resolves it (docs/design.md#tree-resolution); the one whose tree
//! holds the most HelmReleases wins (then one whose path names the cluster,
//! then the shortest).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::flux::yaml_files;
use super::{FluxOut, FoundBy};
use crate::import::gotmpl::normalize;
use crate::import::{hooks, relative};

/// How many directories above the state file's own are searched at most
/// when no `.git` marks the repository's top (`bootstrap/helmfile.d/x.yaml`
/// sits two below it in the setups this replaces).
const LEVELS: usize = 3;

/// Files read at most in one directory searched: a search that reaches a
/// home directory stops there rather than read it all.
const FILE_LIMIT: usize = 5000;

/// Where the import looked, for the line that says nothing was found.
pub(super) struct Searched(pub Vec<PathBuf>);

/// The Flux tree below `root` (`--flux-root`), or of the repository that
/// holds `state` (a state file, absolute or relative to the working
/// directory). `Err` lists the directories searched.
pub(super) fn repository_tree(
    state: &Path,
    root: Option<&Path>,
    cluster: &str,
) -> Result<FluxOut, Searched> {
    let dirs: Vec<PathBuf> = match root {
        Some(root) => vec![normalize(&hooks::absolute(root))],
        None => search_dirs(state),
    };
    for dir in &dirs {
        if let Some(found) = tree_in(dir, cluster) {
            return Ok(found);
        }
    }
    Err(Searched(dirs))
}

/// The directories to search, nearest first.
fn search_dirs(state: &Path) -> Vec<PathBuf> {
    let state = normalize(&hooks::absolute(state));
    let Some(start) = state.parent() else {
        return Vec::new();
    };
    if let Some(top) = start.ancestors().find(|d| d.join(".git").exists()) {
        return vec![top.to_path_buf()];
    }
    let cwd = std::env::current_dir()
        .map(|d| normalize(&d))
        .unwrap_or_default();
    if !start.starts_with(&cwd) {
        return vec![start.to_path_buf()];
    }
    start
        .ancestors()
        .take(LEVELS + 1)
        .take_while(|d| d.starts_with(&cwd))
        // Never the file system's root.
        .filter(|d| d.parent().is_some())
        .map(Path::to_path_buf)
        .collect()
}

/// What a search found of Flux in one directory.
#[derive(Default)]
struct Seen {
    /// (entrypoint relative to the directory, the file that says it, how).
    synced: Vec<(String, PathBuf, FoundBy)>,
    /// Flux Kustomizations: (their file, `spec.path` normalised).
    kustomizations: Vec<(PathBuf, PathBuf)>,
}

fn tree_in(dir: &Path, cluster: &str) -> Option<FluxOut> {
    let mut files = Vec::new();
    yaml_files(dir, &mut files, FILE_LIMIT);
    let mut seen = Seen::default();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        if !text.contains("fluxcd.") {
            continue;
        }
        for doc in serde_saphyr::from_multiple::<Value>(&text).unwrap_or_default() {
            read(dir, &file, &doc, &mut seen);
        }
    }
    // FluxInstance paths and `flux-system`'s first; else the roots of the
    // Kustomizations' graph.
    let mut candidates = seen.synced;
    if candidates.is_empty() {
        for (file, _) in &seen.kustomizations {
            let Some(parent) = file.parent() else {
                continue;
            };
            let held = seen
                .kustomizations
                .iter()
                .any(|(other, target)| other != file && parent.starts_with(target));
            if !held {
                let entry = relative(dir, parent).to_string_lossy().into_owned();
                if !candidates.iter().any(|(e, ..)| *e == entry) {
                    candidates.push((entry, file.clone(), FoundBy::Kustomization));
                }
            }
        }
    }
    let best = candidates
        .into_iter()
        .filter(|(entry, ..)| dir.join(entry).is_dir())
        .map(|(entry, source, by)| {
            let tree = crate::flux::tree::resolve(dir, Path::new(&entry));
            let helmreleases = tree
                .objects
                .iter()
                .filter(|o| o.is_flux("helm", "HelmRelease"))
                .count();
            let names_cluster = Path::new(&entry)
                .components()
                .any(|c| c.as_os_str() == cluster);
            (helmreleases, names_cluster, entry, source, by)
        })
        .max_by(|a, b| {
            (a.0, a.1)
                .cmp(&(b.0, b.1))
                .then_with(|| b.2.len().cmp(&a.2.len()))
                .then_with(|| b.2.cmp(&a.2))
        })?;
    let (_, _, entrypoint, source, by) = best;
    Some(FluxOut {
        root: dir.to_path_buf(),
        entrypoint,
        source,
        by,
    })
}

/// One YAML document of `file` under `dir`: a FluxInstance, a flux-instance
/// HelmRelease or a Flux Kustomization.
fn read(dir: &Path, file: &Path, doc: &Value, seen: &mut Seen) {
    let api = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
    let synced = match (api.split('/').next().unwrap_or(""), kind) {
        ("fluxcd.controlplane.io", "FluxInstance") => doc.pointer("/spec/sync/path"),
        ("helm.toolkit.fluxcd.io", "HelmRelease") => doc.pointer("/spec/values/instance/sync/path"),
        ("kustomize.toolkit.fluxcd.io", "Kustomization") => {
            let Some(path) = doc.pointer("/spec/path").and_then(Value::as_str) else {
                return;
            };
            let target = normalize(&dir.join(path.trim().trim_start_matches("./")));
            if doc.pointer("/metadata/name").and_then(Value::as_str) == Some("flux-system")
                && let Some(entry) = entrypoint(path)
            {
                seen.synced
                    .push((entry, file.to_path_buf(), FoundBy::FluxSystem));
            }
            seen.kustomizations.push((file.to_path_buf(), target));
            return;
        }
        _ => None,
    };
    if let Some(entry) = synced.and_then(Value::as_str).and_then(entrypoint) {
        seen.synced
            .push((entry, file.to_path_buf(), FoundBy::Instance));
    }
}

/// A sync path as an entrypoint relative to the repository: `./a/b/` →
/// `a/b`; none for an absolute path, one that climbs out, or a template.
fn entrypoint(path: &str) -> Option<String> {
    let path = path
        .trim()
        .trim_start_matches("./")
        .trim_end_matches('/')
        .to_string();
    (!path.is_empty()
        && !path.starts_with('/')
        && !path.contains("..")
        && !path.contains("{{")
        && !path.contains("${"))
    .then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, path: &str, text: &str) {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    const HR: &str = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: cilium\n  namespace: kube-system\nspec:\n  interval: 1h\n  chart:\n    spec:\n      chart: cilium\n";

    fn ks(name: &str, path: &str) -> String {
        format!(
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n  namespace: flux-system\nspec:\n  interval: 1h\n  path: {path}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n"
        )
    }

    #[test]
    fn entrypoints_are_relative_paths_without_templates() {
        assert_eq!(
            entrypoint("./kubernetes/flux/"),
            Some("kubernetes/flux".into())
        );
        assert_eq!(entrypoint("/abs"), None);
        assert_eq!(entrypoint("../up"), None);
        assert_eq!(entrypoint("clusters/{{ .cluster }}"), None);
        assert_eq!(entrypoint("./"), None);
    }

    #[test]
    fn flux_bootstrap_layout_is_found_through_flux_system() {
        let repo = tempfile::tempdir().unwrap();
        let dir = repo.path();
        write(dir, "bootstrap/helmfile.yaml", "releases: []\n");
        write(dir, ".git/HEAD", "ref: refs/heads/main\n");
        write(
            dir,
            "clusters/infra/flux-system/gotk-sync.yaml",
            &ks("flux-system", "./clusters/infra"),
        );
        write(dir, "clusters/infra/apps.yaml", &ks("apps", "./apps"));
        write(dir, "apps/cilium/helmrelease.yaml", HR);
        let found = repository_tree(&dir.join("bootstrap/helmfile.yaml"), None, "infra")
            .ok()
            .unwrap();
        assert_eq!(found.root, normalize(dir));
        assert_eq!(found.entrypoint, "clusters/infra");
    }

    #[test]
    fn without_flux_system_the_kustomization_graph_root_wins() {
        let repo = tempfile::tempdir().unwrap();
        let dir = repo.path();
        write(dir, ".git/HEAD", "ref: refs/heads/main\n");
        write(dir, "bootstrap/helmfile.d/01-apps.yaml", "releases: []\n");
        write(
            dir,
            "kubernetes/flux/cluster/ks.yaml",
            &ks("cluster-apps", "./kubernetes/apps"),
        );
        write(
            dir,
            "kubernetes/apps/kube-system/cilium/ks.yaml",
            &ks("cilium", "./kubernetes/apps/kube-system/cilium/app"),
        );
        write(
            dir,
            "kubernetes/apps/kube-system/cilium/app/helmrelease.yaml",
            HR,
        );
        let found = repository_tree(
            &dir.join("bootstrap/helmfile.d/01-apps.yaml"),
            None,
            "infra",
        )
        .ok()
        .unwrap();
        assert_eq!(found.root, normalize(dir));
        assert_eq!(found.entrypoint, "kubernetes/flux/cluster");
        assert_eq!(found.by, FoundBy::Kustomization);
    }

    #[test]
    fn the_cluster_named_wins_among_equal_trees_and_none_says_where_it_looked() {
        let repo = tempfile::tempdir().unwrap();
        let dir = repo.path();
        write(dir, ".git/HEAD", "ref: refs/heads/main\n");
        write(dir, "helmfile.yaml", "releases: []\n");
        for cluster in ["infra", "apps"] {
            write(
                dir,
                &format!("clusters/{cluster}/flux-system/gotk-sync.yaml"),
                &ks("flux-system", &format!("./clusters/{cluster}")),
            );
            write(dir, &format!("clusters/{cluster}/cilium.yaml"), HR);
        }
        let found = repository_tree(&dir.join("helmfile.yaml"), None, "apps")
            .ok()
            .unwrap();
        assert_eq!(found.entrypoint, "clusters/apps");

        let empty = tempfile::tempdir().unwrap();
        write(empty.path(), ".git/HEAD", "x\n");
        write(empty.path(), "helmfile.yaml", "releases: []\n");
        let Err(Searched(dirs)) =
            repository_tree(&empty.path().join("helmfile.yaml"), None, "infra")
        else {
            panic!("no tree there")
        };
        assert_eq!(dirs, vec![normalize(empty.path())]);
    }
}
