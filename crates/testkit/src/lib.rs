//! The harness of bootstrap's binary-level tests and benchmarks (a
//! dev-dependency of the root package):
//!
//! - [`builder::Test`] writes a config root into a temp dir and runs the real
//!   `bootstrap` binary on it;
//! - [`cluster::Cluster`] puts a loopback API server ([`kube_loopback`]) and
//!   the fake helm (crates/fake-helm) behind it;
//! - [`pty::Pty`] runs it on a pseudo-terminal and keeps the screen it draws;
//! - [`realenv`] starts the real test environment (kube-apiserver and the
//!   controllers, kwok, the real helm CLIs, a chart repository);
//! - [`realflux`] serves a git repository for Flux over loopback HTTP and
//!   finds the real flux-operator CLI;
//! - [`makejinja`] renders the corpus's makejinja template repository;
//! - [`registry::Registry`] serves charts by `oci://` and `https://` on the
//!   loopback (distribution's registry, `tools/realenv/build oci-registry`);
//! - [`bootstrap`] and [`fake_helm`] say where those two binaries are.

mod bins;
pub mod builder;
pub mod cluster;
pub mod fleet;
pub mod makejinja;
pub mod pty;
pub mod realenv;
pub mod realflux;
pub mod registry;

pub use bins::{bootstrap, fake_helm};
