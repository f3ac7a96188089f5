//! The integration tests: one test binary whose modules are the suites
//! (docs/design.md#test-map). Each test binary links the whole library and
//! its dependencies, so one binary is linked once where a file per suite was
//! linked once per suite.
//!
//! A suite is a module: `tests/it/NAME.rs` plus its line below (a suite's
//! helpers in `tests/it/NAME/`). tests/it/architecture.rs fails on a suite
//! file that is not declared here and on a test binary beside this one.
//!
//! One suite, or one test, by name (libtest's filter is a substring of the
//! path `suite::test`):
//!
//! ```sh
//! cargo test --test it apply::              # the apply suite
//! cargo test --test it -- apply:: status::  # two suites
//! cargo test --test it real_cluster::       # a tier: `ignored, REASON` while it is off
//! ```
//!
//! The optional tiers (build.rs sets their cfgs) are reported ignored with
//! their reason and the command that enables them, never as passed: the kind
//! end-to-end suite (`e2e_kind`, `BOOTSTRAP_E2E=1`), the real Helm engine
//! (`real_helm`), the real helm 3 CLI (`real_helm_signals`), the real control
//! plane (`real_cluster`), real Flux on it (`real_flux`), the Flux oracle
//! (`flux_oracle`), sops, helmfile, kubectl, graphviz and the shared charts
//! and corpus.

mod apply;
mod apply_fresh_install;
mod architecture;
mod chaos;
mod chart_cache;
mod check_workloads;
mod cluster_side;
mod common;
mod config_fuzz;
mod corpus_applied;
mod defaults;
mod destroy;
mod diff;
mod e2e_kind;
mod fleet;
mod fleet_examples;
mod flux_constructs;
mod flux_corpus;
mod flux_kustomize;
mod flux_oracle;
mod flux_policy;
mod flux_scan;
mod handover;
mod handover_corpus;
mod helm_driver;
mod import;
mod import_corpus;
mod import_flux_tree;
mod import_handover;
mod import_helmfile;
mod job_contract;
mod json_output;
mod kube_wait;
mod ledger;
mod lint;
mod loader_props;
mod manpages;
mod parse_cache;
mod progress_pty;
mod real_cluster;
mod real_flux;
mod real_helm;
mod real_helm_signals;
mod reliability;
mod renovate;
mod selection;
mod shipped_config;
mod snapshots;
mod sops;
mod status;
mod template;
mod validation;
