//! `bootstrap import helmfile` (docs/design.md#import): reads helmfile state
//! files as helmfile interprets them (`helmfile`), evaluates the Go
//! templates that only read files (`gotmpl`), converts hooks (`hooks`) and
//! writes a config root (`write`). Everything it does not convert is an
//! [`Issue`] with file and line; nothing is guessed.

mod convert;
pub mod gotmpl;
mod helmfile;
pub mod hooks;
mod write;

use std::fmt;
use std::path::{Component, Path, PathBuf};

pub use convert::{Imported, import};
pub use write::{Written, render, write};

/// One construct the importer did not convert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub file: PathBuf,
    /// 1-based; 0 when the whole file is meant.
    pub line: usize,
    /// The key, action or value, as written (shortened).
    pub construct: String,
    pub reason: String,
    /// The release field it was found in (for the importer's own use).
    field: String,
}

impl Issue {
    pub fn new(
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
        }
    }

    fn field(mut self, field: &str) -> Issue {
        self.field = field.to_string();
        self
    }
}

impl From<gotmpl::Unsupported> for Issue {
    fn from(u: gotmpl::Unsupported) -> Issue {
        Issue::new(u.file, u.line, u.construct, u.reason)
    }
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let construct: String = if self.construct.chars().count() > 80 {
            let cut: String = self.construct.chars().take(77).collect();
            format!("{cut}...")
        } else {
            self.construct.clone()
        };
        if self.line > 0 {
            write!(
                f,
                "{}:{}: `{construct}`: {}",
                self.file.display(),
                self.line,
                self.reason
            )
        } else {
            write!(f, "{}: `{construct}`: {}", self.file.display(), self.reason)
        }
    }
}

/// `to` relative to the directory `from`; both absolute or both relative
/// to the same place, compared lexically.
pub fn relative(from: &Path, to: &Path) -> PathBuf {
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
