#![allow(dead_code)]
pub mod builder;
