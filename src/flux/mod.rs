//! The offline GitOps ownership scan behind `bootstrap check`, and the
//! admission policy that enforces the same rule in the cluster.
//!
//! A release bootstrap installs must never also be managed by Flux (the
//! dual-management outage, docs/design.md#dual-management-outage: a Flux
//! HelmRelease for Cilium, reached through
//! `kubernetes/infrastructure/networking/cilium/kustomization.yaml →
//! ../../../bases/cilium`, fought the bootstrap's Cilium and took the cluster
//! down). [`scan`] resolves the tree Flux would apply from the cluster's
//! entrypoint ([`tree`]), computes the Helm release each HelmRelease manages
//! ([`helmrelease`]) and reports conflicts ([`findings`]).
//!
//! # Finding codes (a stable contract: never rename one once shipped)
//!
//! | code | severity | meaning |
//! |---|---|---|
//! | `flux-manages-bootstrap-release` | error | A HelmRelease's (release name, storage namespace) is a bootstrap release: helm-controller would upgrade, remediate or uninstall what bootstrap owns. |
//! | `flux-duplicates-bootstrap-chart` | error | A HelmRelease installs the same chart as a bootstrap release into the same target namespace under another Helm release. An error, not a warning: both releases render the same object names, so the second install fails on ownership conflicts or, with takeover, steals the objects from the first. |
//! | `flux-healthcheck-on-bootstrap-workload` | warning | A Flux Kustomization health-checks a workload a bootstrap release owns (the dual-management outage's fix removed these): Flux would stall it and its dependents on something it does not manage. |
//! | `flux-dependson-missing` | warning | A Kustomization/HelmRelease `dependsOn` names an object of its kind that is not in the tree (the namespace defaults to the object's own): it would never become ready. |
//! | `path-not-found` | warning | A Kustomization `spec.path`, a kustomize resource, or the entrypoint does not exist (or is a directory without a kustomization file); the finding's chain ends with the file that referenced it. |
//! | `yaml-invalid` | warning | A file on the path cannot be read or is not valid YAML; Flux would fail to apply it, and its objects are not checked. |
//! | `remote-resource-not-followed` | warning | A kustomization includes a remote resource (URL, git repository); it is not fetched, so it is not checked. |
//! | `source-not-followed` | info | A Flux Kustomization reads from a source other than a GitRepository (OCI, bucket); its content is not in this repository. |
//!
//! Known limits: `${VAR}` post-build substitutions are kept literally, so a
//! name or namespace that depends on one only matches a bootstrap release
//! spelled the same way; objects that end up without any namespace (nothing
//! sets one, so Flux would refuse to apply them) match nothing; every
//! Kustomization with a GitRepository source is assumed to read this
//! repository.

pub mod artifact;
pub mod findings;
pub mod helmrelease;
pub mod kustomize;
pub mod object;
pub mod policy;
pub mod resourceset;
pub mod tree;
pub mod varsub;

use std::path::Path;

pub use findings::{Finding, Severity};
pub use helmrelease::{HelmReleaseIdentity, shorten_name};
pub use object::ObjectRef;
pub use policy::{admission_policy, ledger_key};

/// A workload a bootstrap release owns, e.g. DaemonSet kube-system/cilium
/// (from its rollout hooks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadRef {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

/// A release bootstrap installs and owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapRelease {
    pub name: String,
    pub namespace: String,
    /// The chart's name (`cilium`; for OCI charts the last path segment).
    pub chart: Option<String>,
    pub workloads: Vec<WorkloadRef>,
}

pub struct ScanInput<'a> {
    /// `flux.root`, absolute: the directory Flux's GitRepository points at.
    pub root: &'a Path,
    /// The path the root Flux Kustomization reconciles, relative to `root`.
    pub entrypoint: &'a Path,
    pub releases: &'a [BootstrapRelease],
}

#[derive(Debug, Clone, Default)]
pub struct Scan {
    /// Sorted: errors first, then by code, release, object and chain.
    pub findings: Vec<Finding>,
    pub files_scanned: usize,
    pub objects_scanned: usize,
}

impl Scan {
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }
}

/// Scans the tree Flux would apply for conflicts with bootstrap releases.
/// Never fails: problems with the tree itself are findings too.
pub fn scan(input: &ScanInput) -> Scan {
    let tree = tree::resolve(input.root, input.entrypoint);
    let mut found = tree.findings;
    found.extend(findings::helm_release_conflicts(
        &tree.objects,
        input.releases,
    ));
    found.extend(findings::health_checks_on_bootstrap(
        &tree.objects,
        input.releases,
    ));
    found.extend(findings::missing_dependencies(&tree.objects));
    found.extend(findings::nothing_reached(&tree.objects, input.releases));
    findings::normalize(&mut found);
    Scan {
        findings: found,
        files_scanned: tree.files_scanned,
        objects_scanned: tree.objects.len(),
    }
}
