#![allow(dead_code)]
pub mod apiserver;
