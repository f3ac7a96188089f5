//! Loading and validating a config root (docs/design.md#file-formats) into a [`Plan`]. Everything
//! here is synchronous and pure apart from reading files: every problem in the
//! whole config is found before any command talks to a cluster.

mod draft;
pub mod file;
mod load;
mod origin;
mod render;

pub use load::{cluster_names, load, load_for};

pub use crate::plan::{Cluster, Flux};
