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
//! | `flux-healthcheck-on-bootstrap-workload` | warning | A Flux Kustomization health-checks a workload a bootstrap release owns, named by its hooks or inferred from the names its chart conventionally gives (the dual-management outage's fix removed these): Flux would stall it and its dependents on something it does not manage. |
//! | `flux-dependson-missing` | warning | A Kustomization/HelmRelease `dependsOn` names an object of its kind that is not in the tree (the namespace defaults to the object's own): it would never become ready. |
//! | `path-not-found` | warning | A Kustomization `spec.path`, a kustomize resource, or the entrypoint does not exist (or is a directory without a kustomization file); the finding's chain ends with the file that referenced it. |
//! | `yaml-invalid` | warning | A file on the path cannot be read or is not valid YAML; Flux would fail to apply it, and its objects are not checked. |
//! | `remote-resource-not-followed` | warning | A kustomization includes a remote resource (URL, git repository); it is not fetched, so it is not checked. |
//! | `flux-construct-not-modelled` | warning | Something that could add or rename HelmReleases is not modelled (kustomize plugins, `helmCharts`, `vars`, an unknown kustomization field, a substitution operator, a ResourceSet template action or an input provider that needs the cluster); the message names the file and the construct. |
//! | `flux-apply-skipped` | warning | A Kustomization or HelmRelease is labelled or annotated `kustomize.toolkit.fluxcd.io/reconcile: disabled` or `kustomize.toolkit.fluxcd.io/ssa: Ignore` (its own, or its Kustomization's `spec.commonMetadata`): kustomize-controller never creates or updates it, so it is not checked as applied; a copy already in the cluster stays and is still reconciled. |
//! | `flux-apply-fails` | error or warning | The API server refuses a stage of a build's server-side apply (a version no Flux CRD serves, a field the CRD does not declare, a missing required field, a value of the wrong type, a namespaced object without a namespace): Flux applies nothing of that stage nor of a later one. An error when one of the objects not applied is a HelmRelease that would manage or duplicate a bootstrap release. |
//! | `flux-build-fails` | warning | kustomize would reject the build (a patch without a unique match, a failing JSON patch, a replacement without one source); the objects are still checked as built so far. |
//! | `substitute-from-unresolved` | warning | A `postBuild.substituteFrom` ConfigMap/Secret is not in the tree or cannot be read (SOPS): its variables are unknown. |
//! | `handover-never-adopted` | warning | No HelmRelease in the tree manages a `handover` release: Flux never takes it over. |
//! | `handover-managed-twice` | error | Two or more HelmReleases manage a `handover` release: they would upgrade it in turn. |
//! | `handover-drift` | error | The HelmRelease that adopts a `handover` release installs another chart, version or values than bootstrap: its adoption upgrade would change the release. Each differing value path is listed, with the bootstrap source that sets it. |
//! | `handover-values-unknown` | warning | The adopting HelmRelease takes values from a ConfigMap/Secret not in git (or SOPS-encrypted): those values cannot be compared offline. |
//! | `no-helmrelease-reached` | warning | The tree holds no HelmRelease at all while bootstrap has releases: the scan cannot vouch for them. |
//! | `chart-not-rendered` | info | `check` tried to render a release's chart to learn the workloads it owns (a health check names a workload in its namespace) and helm failed; its workloads are inferred from names instead. |
//! | `source-not-followed` | warning or info | A Flux Kustomization reads from a source other than the root's GitRepository; its content is not in this checkout. A warning for another GitRepository, info for OCI and Bucket sources. |
//!
//! Known limits (each reported, never silent, where it could hide a
//! HelmRelease): kustomize plugins, Helm chart inflation and `vars` are not
//! run, unless `check` finds kubectl and `kubectl kustomize` builds them
//! ([`tree::resolve_with`]);
//! `substituteFrom` reads only objects in the tree; ResourceSet input
//! providers other than `Static` need the cluster; objects that end up without any namespace
//! (Flux would refuse them) match nothing.

pub mod artifact;
pub mod findings;
pub mod helmrelease;
pub mod helmrelease_source;
pub mod kustomize;
pub mod kyaml;
pub mod object;
pub mod policy;
pub mod resourceset;
pub mod schema;
pub mod strvals;
pub mod tree;
pub mod values_from;
pub mod varsub;
pub mod yaml_style;

use std::path::Path;

pub use findings::{Finding, Severity};
pub use helmrelease::{HelmReleaseIdentity, shorten_name};
pub use object::GitObject;
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
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BootstrapRelease {
    pub name: String,
    pub namespace: String,
    /// The chart's name (`cilium`; for OCI charts the last path segment).
    pub chart: Option<String>,
    pub workloads: Vec<WorkloadRef>,
    /// The workloads its chart renders, when `check` could render it
    /// (docs/design.md#health-checks-and-the-chart-render): what it owns beyond its hooks' names, in
    /// place of the name-convention inference.
    pub rendered: Option<Vec<WorkloadRef>>,
    /// Set for `ownership: handover`: what bootstrap installs, which the
    /// HelmRelease that adopts it must reproduce (docs/design.md#handover).
    pub handover: Option<Handover>,
}

/// What bootstrap installs for a handover release.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Handover {
    /// The chart's version.
    pub version: String,
    pub values: serde_json::Value,
    /// Bootstrap's own values sources (release values and files, cluster
    /// overrides) as (label, values), in merge order: what can make the
    /// values differ from a `from:` HelmRelease's.
    pub overrides: Vec<(String, serde_json::Value)>,
    /// The leaves of sops-encrypted values files: redacted in findings.
    pub secrets: crate::values::SecretPaths,
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
    /// Every HelmRelease the tree reaches, with the Helm release it would
    /// manage: what `check -v` shows as the proof behind its verdict.
    pub helm_releases: Vec<Reached>,
    /// Each build Flux would do and what it applies ([`builds_json`]).
    pub builds: Vec<tree::Applied>,
}

/// A HelmRelease Flux would apply and the Helm release it would manage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reached {
    pub object: GitObject,
    /// The Helm release as `storage-namespace/release-name`.
    pub release: String,
    /// Files by which Flux reaches it, from the entrypoint down.
    pub chain: Vec<String>,
}

impl Scan {
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Error)
    }
}

/// Scans the tree Flux would apply for conflicts with bootstrap releases.
/// Never fails: problems with the tree itself are findings too.
pub fn scan(input: &ScanInput) -> Scan {
    scan_resolved(tree::resolve(input.root, input.entrypoint), input.releases)
}

/// [`scan`] of a tree already resolved (`check` resolves it first to learn
/// which releases' charts to render: [`findings::health_check_namespaces`]).
pub fn scan_resolved(tree: tree::Tree, releases: &[BootstrapRelease]) -> Scan {
    let mut found = tree.findings;
    found.extend(findings::helm_release_conflicts(&tree.objects, releases));
    found.extend(tree::apply_failures(
        &tree.refusals,
        &tree.objects,
        releases,
    ));
    found.extend(findings::health_checks_on_bootstrap(
        &tree.objects,
        releases,
    ));
    found.extend(findings::handover(&tree.objects, releases));
    found.extend(findings::missing_dependencies(&tree.objects));
    // A HelmRelease only a refused apply holds is reached: its finding
    // says so.
    let mut reached = tree.objects.clone();
    reached.extend(
        tree.refusals
            .iter()
            .flat_map(|r| r.refused.not_applied.clone()),
    );
    found.extend(findings::nothing_reached(&reached, releases));
    findings::normalize(&mut found);
    let mut helm_releases: Vec<Reached> = tree
        .objects
        .iter()
        .filter(|o| o.is_flux("helm", "HelmRelease"))
        .map(|hr| {
            let spec = hr.body.get("spec").unwrap_or(&serde_json::Value::Null);
            let id = helmrelease::identity(&hr.name, hr.namespace.as_deref(), spec);
            Reached {
                object: hr.reference(),
                release: format!(
                    "{}/{}",
                    id.storage_namespace.as_deref().unwrap_or("(no namespace)"),
                    id.release_name
                ),
                chain: hr.chain.clone(),
            }
        })
        .collect();
    helm_releases.sort_by(|a, b| a.release.cmp(&b.release));
    Scan {
        findings: found,
        files_scanned: tree.files_scanned,
        objects_scanned: tree.objects.len(),
        helm_releases,
        builds: tree.builds,
    }
}

/// What each build applies, in the form `check -v --output json` prints and
/// the Flux oracle prints (docs/design.md#check-json): for each build, who
/// does it (`Kustomization/ns/name`, `ResourceSet/ns/name`, `null` for the
/// entrypoint's), its path, whether Flux fails it, its objects (apiVersion,
/// kind, namespace, name) and, for each HelmRelease, the Helm release it
/// manages and its `spec.values` after substitution, with their types, and
/// the values helm-controller composes from them and `spec.valuesFrom`
/// (`composed`, or `composeError`: [`composed_json`]).
pub fn builds_json(builds: &[tree::Applied]) -> serde_json::Value {
    use serde_json::json;
    let cluster = in_cluster(builds);
    let list: Vec<serde_json::Value> = builds
        .iter()
        .map(|b| {
            let objects: Vec<serde_json::Value> = b
                .objects
                .iter()
                .map(|o| {
                    json!({"apiVersion": o.api_version, "kind": o.kind,
                           "namespace": o.namespace, "name": o.name})
                })
                .collect();
            let releases: Vec<serde_json::Value> = b
                .objects
                .iter()
                .filter(|o| o.is_flux("helm", "HelmRelease"))
                .map(|hr| {
                    let spec = hr.body.get("spec").unwrap_or(&serde_json::Value::Null);
                    let id = helmrelease::identity(&hr.name, hr.namespace.as_deref(), spec);
                    let values_from: Vec<serde_json::Value> = spec
                        .get("valuesFrom")
                        .and_then(serde_json::Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(|v| json!({"kind": v.get("kind").cloned().unwrap_or_default(),
                                        "name": v.get("name").cloned().unwrap_or_default()}))
                        .collect();
                    let mut release = json!({
                        "namespace": hr.namespace,
                        "name": hr.name,
                        "releaseName": id.release_name,
                        "releaseNamespace": id.release_namespace,
                        "storageNamespace": id.storage_namespace,
                        "values": spec.get("values").filter(|v| !v.is_null()).cloned().unwrap_or_else(|| json!({})),
                        "valuesFrom": values_from,
                    });
                    let (field, composed) = composed_json(hr, spec, &cluster);
                    release[field] = composed;
                    release
                })
                .collect();
            json!({
                "by": b.by,
                "path": b.path,
                "failed": b.failed,
                "applyError": b.apply_error,
                "notApplied": b.not_applied.iter().map(|o| json!({"apiVersion": o.api_version, "kind": o.kind,
                           "namespace": o.namespace, "name": o.name})).collect::<Vec<_>>(),
                "objects": objects,
                "helmReleases": releases,
            })
        })
        .collect();
    serde_json::Value::Array(list)
}

/// The objects the builds put in the cluster, the first of each id: not
/// those of a build Flux fails, nor of a stage the API server refuses.
fn in_cluster(builds: &[tree::Applied]) -> Vec<object::Object> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for b in builds.iter().filter(|b| !b.failed) {
        for o in &b.objects {
            let id = (o.group().to_string(), &o.kind, &o.namespace, &o.name);
            let refused = b
                .not_applied
                .iter()
                .any(|n| n.kind == o.kind && n.name == o.name && n.namespace == o.namespace);
            if !refused && seen.insert(id) {
                out.push(o.clone());
            }
        }
    }
    out
}

/// The values helm-controller gives helm for `hr` with the ConfigMaps and
/// Secrets among `cluster` (`values_from::compose`): `("composed", values)`,
/// or `("composeError", reason)`, the reason as fluxcd/pkg `chartutil`
/// names its errors (`not-found`, `key-not-found`, `target-path`, …).
fn composed_json(
    hr: &object::Object,
    spec: &serde_json::Value,
    cluster: &[object::Object],
) -> (&'static str, serde_json::Value) {
    use values_from::{Unreadable, ValuesError};
    let reason = match values_from::compose(hr, spec, cluster) {
        Ok(c) => match c.unresolved.first() {
            None => return ("composed", c.values),
            Some(u) if u.why == Unreadable::NotInTree => "not-found",
            Some(_) => "unreadable",
        },
        Err(ValuesError::SpecValuesNotAMap) => "spec-values",
        Err(ValuesError::ValuesFromKind { .. }) => "kind",
        Err(ValuesError::NoSuchKey { .. }) => "key-not-found",
        Err(ValuesError::TargetPath { .. }) => "target-path",
        Err(ValuesError::NotYaml { .. } | ValuesError::NotAMap { .. }) => "values-read",
        Err(ValuesError::NotLayered { .. }) => "not-layered",
    };
    ("composeError", serde_json::Value::String(reason.into()))
}
