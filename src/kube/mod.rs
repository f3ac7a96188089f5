pub mod apply;
pub mod client;
pub mod diagnose;
pub mod lock;
pub mod namespace;
pub mod ready;
pub mod retry;
pub mod wait;

pub use client::KubeTarget;
