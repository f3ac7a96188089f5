#![allow(dead_code)]
pub use kube_loopback as apiserver;
pub mod builder;
pub mod cluster;
