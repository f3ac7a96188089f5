//! The harness of bootstrap's binary-level tests and benchmarks (a
//! dev-dependency of the root package):
//!
//! - [`builder::Test`] writes a config root into a temp dir and runs the real
//!   `bootstrap` binary on it;
//! - [`cluster::Cluster`] puts a loopback API server ([`kube_loopback`]) and
//!   the fake helm (crates/fake-helm) behind it;
//! - [`pty::Pty`] runs it on a pseudo-terminal and keeps the screen it draws;
//!   [`tmux::Tmux`] in tmux, a terminal that reflows when resized;
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
pub mod tmux;

pub use bins::{bootstrap, fake_helm};

/// Polls `done` every 10 ms, failing the test after 20 s with `what`.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// xorshift64*: small, and the same on every machine (the seeded tests'
/// random draws).
pub struct Rng(pub u64);

impl Rng {
    pub fn draw(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A draw in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.draw() % n.max(1)
    }
}
