#![allow(dead_code)]
pub mod apiserver;
pub mod builder;
pub mod cluster;
