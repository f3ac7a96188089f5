//! `bootstrap import helmfile` (docs/design.md#import): reads helmfile state
//! files as helmfile interprets them (`helmfile`), evaluates the Go
//! templates that only read files (`gotmpl`), converts hooks (`hooks`) and
//! writes a config root (`write`). Everything it does not convert is an
//! [`Issue`] with file and line; nothing is guessed.

mod convert;
pub(crate) mod environment;
pub(crate) mod gotmpl;
mod helmfile;
pub(crate) mod hooks;
pub(crate) mod rendered;
mod write;

use std::fmt;
use std::path::{Component, Path, PathBuf};

pub(crate) use convert::{Imported, Options, import};
pub(crate) use rendered::{Helmfile, Renderer};

/// What rendering `paths` (as `import helmfile` lists their state files)
/// with helmfile would execute of the repository's commands; paths that
/// list no state file are left to the import to report.
pub(crate) fn commands(paths: &[PathBuf]) -> Vec<rendered::Runs> {
    let files: Vec<PathBuf> = paths
        .iter()
        .filter_map(|p| helmfile::state_files(p).ok())
        .flatten()
        .collect();
    rendered::commands(&files)
}
pub(crate) use write::{Written, render, write};

/// One construct the importer did not convert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Issue {
    pub file: PathBuf,
    /// 1-based; 0 when the whole file is meant.
    pub line: usize,
    /// The key, action or value, as written (shortened).
    pub construct: String,
    pub reason: String,
    /// The release field it was found in (for the importer's own use).
    field: String,
    /// helmfile itself would have evaluated it: rendering with helmfile
    /// (docs/coming-from-helmfile.md) converts it.
    pub helmfile_renders: bool,
}

impl Issue {
    pub(crate) fn new(
        file: impl AsRef<Path>,
        line: usize,
        construct: impl Into<String>,
        reason: impl Into<String>,
    ) -> Issue {
        Issue {
            file: file.as_ref().to_path_buf(),
            line,
            construct: construct.into(),
            reason: reason.into(),
            field: String::new(),
            helmfile_renders: false,
        }
    }

    /// `file:line: `construct`` (the construct shortened).
    pub(crate) fn location(&self) -> String {
        let construct: String = if self.construct.chars().count() > 80 {
            let cut: String = self.construct.chars().take(77).collect();
            format!("{cut}...")
        } else {
            self.construct.clone()
        };
        if self.line > 0 {
            format!("{}:{}: `{construct}`", self.file.display(), self.line)
        } else {
            format!("{}: `{construct}`", self.file.display())
        }
    }

    fn field(mut self, field: &str) -> Issue {
        self.field = field.to_string();
        self
    }
}

impl From<gotmpl::Unsupported> for Issue {
    fn from(u: gotmpl::Unsupported) -> Issue {
        let renders = u.helmfile_renders();
        let mut issue = Issue::new(u.file, u.line, u.construct, u.reason);
        issue.helmfile_renders = renders;
        issue
    }
}

impl fmt::Display for Issue {
    /// Never the importer's internal `env` mark: the template it stands for.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = format!("{}: {}", self.location(), self.reason);
        f.write_str(&gotmpl::env_marks_to_templates(&text))
    }
}

/// The issues that share one cause (the same reason), in the order of
/// their first occurrence.
pub(crate) struct Cause<'a> {
    pub reason: &'a str,
    pub issues: Vec<&'a Issue>,
}

impl Cause<'_> {
    pub(crate) fn helmfile_renders(&self) -> bool {
        self.issues.iter().all(|i| i.helmfile_renders)
    }
}

/// `issues` grouped by cause, so that one template construct used by forty
/// releases reads as one line.
pub(crate) fn causes(issues: &[Issue]) -> Vec<Cause<'_>> {
    let mut out: Vec<Cause> = Vec::new();
    for issue in issues {
        match out.iter_mut().find(|c| c.reason == issue.reason) {
            Some(cause) => cause.issues.push(issue),
            None => out.push(Cause {
                reason: &issue.reason,
                issues: vec![issue],
            }),
        }
    }
    out
}

/// The files below `dir` whose names end with one of `endings`, in name
/// order, hidden files and directories left out, until `out` holds `limit`.
pub(crate) fn files_below(dir: &Path, endings: &[&str], limit: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if out.len() >= limit {
            return;
        }
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            files_below(&path, endings, limit, out);
        } else if endings.iter().any(|e| name.ends_with(e)) {
            out.push(path);
        }
    }
}

/// `to` relative to the directory `from`; both absolute or both relative
/// to the same place, compared lexically.
pub(crate) fn relative(from: &Path, to: &Path) -> PathBuf {
    let from = gotmpl::normalize(&hooks::absolute(from));
    let to = gotmpl::normalize(&hooks::absolute(to));
    let a: Vec<Component> = from.components().collect();
    let b: Vec<Component> = to.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..a.len() {
        out.push("..");
    }
    for part in &b[common..] {
        out.push(part);
    }
    if out.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths() {
        assert_eq!(
            relative(Path::new("/a/b/releases"), Path::new("/a/k/v.yaml")),
            PathBuf::from("../../k/v.yaml")
        );
        assert_eq!(
            relative(Path::new("/a"), Path::new("/a/b")),
            PathBuf::from("b")
        );
        assert_eq!(
            relative(Path::new("/a"), Path::new("/a")),
            PathBuf::from(".")
        );
    }
}
