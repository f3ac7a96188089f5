//! What source-controller puts into the GitRepository artifact Flux builds
//! from: the repository minus symlinks and ignored paths.
//!
//! - Symlinks: the archiver keeps regular files and directories only
//!   (fluxcd/pkg `tar`/source-controller `internal/storage` `Archive`: "Ignore
//!   anything that is not a file or directories e.g. symlinks"), and walks
//!   without following them, so a path through a symlink does not exist.
//! - Ignore rules: every `.sourceignore` below the root, each scoped to its
//!   directory (`LoadIgnorePatterns`), with gitignore semantics: the last
//!   matching pattern wins, `!` re-includes, a trailing `/` matches
//!   directories only, a pattern with a `/` before its end is anchored.
//!   Before them come the VCS patterns (fluxcd/pkg `sourceignore`
//!   `ExcludeVCS`) and, only when there is no `.sourceignore` pattern and no
//!   `spec.ignore` at all, source-controller's defaults (`ExcludeExt`,
//!   `ExcludeCI`, `ExcludeExtra`; fluxcd/pkg `artifact/storage`
//!   `SourceIgnoreFilter`: `NewDefaultMatcher` only for an empty list).
//! - Each path is matched on its own: the archive walk does not skip an
//!   ignored directory, it only leaves its entry out, so a later `!` rule
//!   re-includes a file inside it (and extracting the file creates the
//!   directory).
//!
//! - The GitRepository's `spec.ignore`: appended after the `.sourceignore`
//!   files, scoped to the repository root (fluxcd/source-controller
//!   `internal/controller/gitrepository_controller.go` `reconcileArtifact`:
//!   `ps = append(ps, sourceignore.ReadPatterns(strings.NewReader(*obj.Spec.Ignore), ignoreDomain)...)`),
//!   so it can re-include (`!`) what the defaults or a `.sourceignore`
//!   leave out. The scan learns it from the root GitRepository object in
//!   the tree ([`super::tree`]).

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use regex::Regex;

const EXCLUDE_VCS: &str = ".git/,.gitignore,.gitmodules,.gitattributes";
const EXCLUDE_DEFAULTS: &str = "*.jpg,*.jpeg,*.gif,*.png,*.wmv,*.flv,*.tar.gz,*.zip,\
.github/,.circleci/,.travis.yml,.gitlab-ci.yml,appveyor.yml,.drone.yml,cloudbuild.yaml,codeship-services.yml,codeship-steps.yml,\
**/.goreleaser.yml,**/.sops.yaml,**/.flux.yaml";

struct Pattern {
    /// Directory components (relative to the root) the pattern is scoped to.
    domain: Vec<String>,
    /// One regex per `/`-separated component; `None` stands for `**`.
    parts: Vec<Option<Regex>>,
    anchored: bool,
    dir_only: bool,
    negate: bool,
}

/// The artifact view of a checkout.
pub struct Artifact {
    root: PathBuf,
    patterns: Vec<Pattern>,
    /// Path → in the artifact (as a directory: `Some(true)`), or not (`None`).
    seen: RefCell<HashMap<PathBuf, Option<bool>>>,
    walked: RefCell<HashMap<PathBuf, bool>>,
}

impl Artifact {
    pub fn new(root: &Path) -> Artifact {
        Artifact::with_ignore(root, None)
    }

    /// The artifact of a GitRepository with `spec.ignore` (`ignore`): its
    /// patterns come last, so they win.
    pub fn with_ignore(root: &Path, ignore: Option<&str>) -> Artifact {
        let mut own = Vec::new();
        load_ignore_files(root, &mut Vec::new(), &mut own, 0);
        own.extend(read_patterns(ignore.unwrap_or_default(), &[]));
        let mut patterns: Vec<Pattern> = EXCLUDE_VCS
            .split(',')
            .filter_map(|p| parse(p, &[]))
            .collect();
        if own.is_empty() {
            patterns.extend(EXCLUDE_DEFAULTS.split(',').filter_map(|p| parse(p, &[])));
        }
        patterns.extend(own);
        Artifact {
            root: root.to_path_buf(),
            patterns,
            seen: RefCell::new(HashMap::new()),
            walked: RefCell::new(HashMap::new()),
        }
    }

    fn parts(&self, path: &Path) -> Option<Vec<String>> {
        let rel = path.strip_prefix(&self.root).ok()?;
        Some(
            rel.components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect(),
        )
    }

    /// Whether `path` (lexically under the root) is in the artifact, and a
    /// directory: no component below the root is a symlink and no ignore
    /// rule excludes it.
    fn present(&self, path: &Path) -> Option<bool> {
        if let Some(known) = self.seen.borrow().get(path) {
            return *known;
        }
        let found = self.lookup(path);
        self.seen.borrow_mut().insert(path.to_path_buf(), found);
        found
    }

    fn lookup(&self, path: &Path) -> Option<bool> {
        if path == self.root {
            return std::fs::metadata(path).ok().map(|m| m.is_dir());
        }
        let parent = path.parent()?;
        // The walk reaches it only through real directories (cached).
        if !self.walked(parent) {
            return None;
        }
        let meta = std::fs::symlink_metadata(path).ok()?;
        if meta.file_type().is_symlink() || !(meta.is_file() || meta.is_dir()) {
            return None;
        }
        let parts = self.parts(path)?;
        if !self.ignored(&parts, meta.is_dir()) {
            return Some(meta.is_dir());
        }
        // An ignored directory still exists in the artifact when something
        // in it is re-included.
        (meta.is_dir()
            && std::fs::read_dir(path)
                .into_iter()
                .flatten()
                .filter_map(|e| e.ok())
                .any(|e| self.present(&e.path()).is_some()))
        .then_some(true)
    }

    /// Whether the archive walk descends into `dir`: it and every directory
    /// above are real directories (not symlinks), ignored or not.
    fn walked(&self, dir: &Path) -> bool {
        if let Some(known) = self.walked.borrow().get(dir) {
            return *known;
        }
        let found = dir == self.root
            || (dir.starts_with(&self.root)
                && dir.parent().is_some_and(|p| self.walked(p))
                && std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()));
        self.walked.borrow_mut().insert(dir.to_path_buf(), found);
        found
    }

    pub fn is_dir(&self, path: &Path) -> bool {
        self.present(path) == Some(true)
    }

    pub fn is_file(&self, path: &Path) -> bool {
        self.present(path) == Some(false)
    }

    /// Whether the path exists on disk but is left out of the artifact.
    pub fn left_out(&self, path: &Path) -> bool {
        path.exists() && self.present(path).is_none()
    }

    /// The entries of a directory that are in the artifact, sorted.
    pub fn read_dir(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| self.present(p).is_some())
            .collect();
        entries.sort();
        Ok(entries)
    }

    fn ignored(&self, parts: &[String], is_dir: bool) -> bool {
        let mut ignored = false;
        for p in &self.patterns {
            if p.matches(parts, is_dir) {
                ignored = !p.negate;
            }
        }
        ignored
    }
}

fn load_ignore_files(dir: &Path, domain: &mut Vec<String>, out: &mut Vec<Pattern>, depth: usize) {
    if depth > 64 {
        return;
    }
    if let Ok(text) = std::fs::read_to_string(dir.join(".sourceignore")) {
        out.extend(read_patterns(&text, domain));
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut subdirs: Vec<_> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()) && e.file_name() != ".git")
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    subdirs.sort();
    for name in subdirs {
        domain.push(name.clone());
        load_ignore_files(&dir.join(&name), domain, out, depth + 1);
        domain.pop();
    }
}

/// The patterns of a `.sourceignore` text (fluxcd/pkg
/// `sourceignore/sourceignore.go` `ReadPatterns`): every line but comments
/// (`#`) and blank ones.
fn read_patterns<'a>(text: &'a str, domain: &'a [String]) -> impl Iterator<Item = Pattern> + 'a {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(move |l| parse(l, domain))
}

/// go-git's `gitignore.ParsePattern`, which source-controller uses.
fn parse(line: &str, domain: &[String]) -> Option<Pattern> {
    let mut p = line.trim_end_matches([' ', '\t']).to_string();
    let negate = p.starts_with('!');
    if negate {
        p.remove(0);
    }
    let dir_only = p.ends_with('/') && p.len() > 1;
    let p = p.trim_end_matches('/');
    if p.is_empty() {
        return None;
    }
    let anchored = p.trim_start_matches("**/").contains('/') || p.starts_with('/');
    let parts = p
        .trim_start_matches('/')
        .split('/')
        .map(|c| if c == "**" { None } else { glob(c) })
        .collect();
    Some(Pattern {
        domain: domain.to_vec(),
        parts,
        anchored,
        dir_only,
        negate,
    })
}

/// A shell glob for one path component (`*`, `?`, `[...]`).
fn glob(component: &str) -> Option<Regex> {
    let mut re = String::from("^");
    let mut chars = component.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            '[' => {
                let mut class = String::from("[");
                if chars.peek() == Some(&'!') {
                    chars.next();
                    class.push('^');
                }
                for c in chars.by_ref() {
                    if c == ']' {
                        break;
                    }
                    if c == '\\' || c == '[' {
                        class.push('\\');
                    }
                    class.push(c);
                }
                class.push(']');
                re.push_str(&class);
            }
            '\\' => {
                if let Some(next) = chars.next() {
                    re.push_str(&regex::escape(&next.to_string()));
                }
            }
            other => re.push_str(&regex::escape(&other.to_string())),
        }
    }
    re.push('$');
    Regex::new(&re).ok()
}

impl Pattern {
    fn matches(&self, path: &[String], is_dir: bool) -> bool {
        if path.len() <= self.domain.len() || !path.starts_with(&self.domain) {
            return false;
        }
        let rest = &path[self.domain.len()..];
        if !self.anchored {
            // A name pattern: any component; one above the last is a directory.
            let Some(Some(re)) = self.parts.last() else {
                return false;
            };
            return rest.iter().enumerate().any(|(i, name)| {
                re.is_match(name) && (!self.dir_only || i + 1 < rest.len() || is_dir)
            });
        }
        (1..=rest.len()).any(|k| {
            prefix_matches(&self.parts, &rest[..k]) && (k < rest.len() || !self.dir_only || is_dir)
        })
    }
}

fn prefix_matches(parts: &[Option<Regex>], path: &[String]) -> bool {
    match parts.split_first() {
        None => path.is_empty(),
        Some((None, rest)) => (0..=path.len()).any(|skip| prefix_matches(rest, &path[skip..])),
        Some((Some(re), rest)) => {
            path.first().is_some_and(|name| re.is_match(name)) && prefix_matches(rest, &path[1..])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(pattern: &str, path: &str, is_dir: bool) -> bool {
        let parts: Vec<String> = path.split('/').map(str::to_string).collect();
        parse(pattern, &[]).unwrap().matches(&parts, is_dir)
    }

    #[test]
    fn gitignore_rules() {
        assert!(check("*.png", "a/b/c.png", false));
        assert!(check(".github/", ".github/workflows/x.yaml", false));
        assert!(!check(".github/", ".github", false));
        assert!(check("/apps/skip", "apps/skip/hr.yaml", false));
        assert!(!check("/apps/skip", "x/apps/skip/hr.yaml", false));
        assert!(check("**/.sops.yaml", "a/b/.sops.yaml", false));
        assert!(check("apps/**/hr.yaml", "apps/a/b/hr.yaml", false));
        assert!(check("skip", "x/skip/y.yaml", false));
    }

    #[test]
    fn later_patterns_win_and_sourceignore_files_are_scoped() {
        let root = tempfile::tempdir().unwrap();
        let write = |rel: &str, text: &str| {
            let p = root.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write(".sourceignore", "*.yaml\n!keep.yaml\n");
        write("apps/.sourceignore", "/local.txt\n");
        write("apps/keep.yaml", "");
        write("apps/drop.yaml", "");
        write("apps/local.txt", "");
        write("local.txt", "");
        write(".github/ci.yml", "");
        let artifact = Artifact::new(root.path());
        let has = |rel: &str| artifact.is_file(&root.path().join(rel));
        assert!(has("apps/keep.yaml"));
        assert!(!has("apps/drop.yaml"));
        assert!(!has("apps/local.txt"));
        assert!(
            has("local.txt"),
            "apps/.sourceignore applies below apps/ only"
        );
        assert!(
            has(".github/ci.yml"),
            "with a .sourceignore, source-controller's defaults are dropped"
        );
        assert!(artifact.left_out(&root.path().join("apps/drop.yaml")));
    }

    #[test]
    fn defaults_apply_only_without_any_ignore_pattern_and_files_are_matched_alone() {
        let root = tempfile::tempdir().unwrap();
        let write = |rel: &str| {
            let p = root.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "").unwrap();
        };
        write(".github/ci.yml");
        write("skip/keep.yaml");
        write("skip/drop.yaml");
        let bare = Artifact::new(root.path());
        assert!(!bare.is_file(&root.path().join(".github/ci.yml")));
        assert!(bare.is_file(&root.path().join("skip/keep.yaml")));
        let ignoring = Artifact::with_ignore(root.path(), Some("skip/\n!skip/keep.yaml\n"));
        assert!(ignoring.is_file(&root.path().join(".github/ci.yml")));
        assert!(ignoring.is_file(&root.path().join("skip/keep.yaml")));
        assert!(!ignoring.is_file(&root.path().join("skip/drop.yaml")));
        assert!(ignoring.is_dir(&root.path().join("skip")));
        assert_eq!(
            ignoring.read_dir(&root.path().join("skip")).unwrap(),
            [root.path().join("skip/keep.yaml")]
        );
    }
}
