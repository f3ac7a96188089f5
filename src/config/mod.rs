//! Loading and validating a config root (docs/design.md#file-formats) into a [`Plan`]. Everything
//! here is synchronous and pure apart from reading files: every problem in the
//! whole config is found before any command talks to a cluster.

mod draft;
pub mod file;
mod load;
mod render;
pub mod validate;

use std::path::PathBuf;

use serde_json::{Map, Value};

pub use load::{cluster_names, load};

/// A cluster after loading.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub name: String,
    /// Absolute path of `clusters/<name>`.
    pub dir: PathBuf,
    pub context: Option<String>,
    pub values: Map<String, Value>,
    pub flux: Option<Flux>,
    pub guard: bool,
}

#[derive(Debug, Clone)]
pub struct Flux {
    /// Absolute path of the directory Flux's GitRepository points at.
    pub root: PathBuf,
    /// Relative to `root`.
    pub entrypoint: PathBuf,
}
