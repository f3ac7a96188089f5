//! What loading and rendering share: where files are shown from, and a
//! release as parsed and checked but not yet rendered. Its own module so that
//! `load` (which makes drafts) and `render` (which renders them) both import
//! it and neither imports the other.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::file::ReleaseFile;
use crate::release::{Hooks, ReleaseId, Source};

/// Paths shown to the user: relative to the config root, prefixed with the
/// `--dir` the user typed, so they can be pasted into an editor.
#[derive(Debug, Clone)]
pub(crate) struct Paths {
    pub root: PathBuf,
    shown_root: PathBuf,
}

impl Paths {
    /// `root` is the canonical config root, `shown_root` the `--dir` as typed.
    pub(super) fn new(root: PathBuf, shown_root: PathBuf) -> Self {
        Paths { root, shown_root }
    }

    pub(super) fn show(&self, path: &Path) -> PathBuf {
        let rel = path.strip_prefix(&self.root).unwrap_or(path);
        // `releases/../../values.yaml` reads as the file it is.
        crate::lexical::normalize(&if self.shown_root.as_os_str().is_empty()
            || self.shown_root == Path::new(".")
        {
            rel.to_path_buf()
        } else {
            self.shown_root.join(rel)
        })
    }
}

/// A release as parsed and checked, before rendering.
pub(crate) struct Draft {
    pub id: ReleaseId,
    pub file: PathBuf,
    /// `file` as shown ([`Paths::show`]), made once.
    pub shown: PathBuf,
    pub line: u64,
    pub doc: ReleaseFile,
    /// `None` only with `from:`, which gives the chart once the cluster's
    /// GitOps tree is known.
    pub source: Option<Source>,
    pub needs: Vec<ReleaseId>,
    pub timeout: Option<Duration>,
    pub hooks: Hooks,
}
