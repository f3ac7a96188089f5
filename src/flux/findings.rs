//! What the scan reports (docs/design.md#check-json) and the ownership rules that
//! turn resolved Flux objects into findings.

use serde_json::Value;

use super::BootstrapRelease;
use super::helmrelease::{chart_name, identity};
use super::object::Object;

pub const MANAGES_BOOTSTRAP_RELEASE: &str = "flux-manages-bootstrap-release";
pub const DUPLICATES_BOOTSTRAP_CHART: &str = "flux-duplicates-bootstrap-chart";
pub const HEALTHCHECK_ON_BOOTSTRAP_WORKLOAD: &str = "flux-healthcheck-on-bootstrap-workload";
pub const DEPENDSON_MISSING: &str = "flux-dependson-missing";
pub const PATH_NOT_FOUND: &str = "path-not-found";
pub const YAML_INVALID: &str = "yaml-invalid";
pub const REMOTE_RESOURCE_NOT_FOLLOWED: &str = "remote-resource-not-followed";
pub const SOURCE_NOT_FOLLOWED: &str = "source-not-followed";
pub const APPLY_SKIPPED: &str = "flux-apply-skipped";
pub const NOT_MODELLED: &str = "flux-construct-not-modelled";
pub const BUILD_FAILS: &str = "flux-build-fails";
pub const APPLY_FAILS: &str = "flux-apply-fails";
pub const SUBSTITUTE_FROM_UNRESOLVED: &str = "substitute-from-unresolved";
pub const CHART_NOT_RENDERED: &str = "chart-not-rendered";
pub const NO_HELMRELEASE_REACHED: &str = "no-helmrelease-reached";
pub const HANDOVER_NEVER_ADOPTED: &str = "handover-never-adopted";
pub const HANDOVER_MANAGED_TWICE: &str = "handover-managed-twice";
pub const HANDOVER_DRIFT: &str = "handover-drift";
pub const HANDOVER_VALUES_UNKNOWN: &str = "handover-values-unknown";

/// The scan's error codes, which `lints.ignore` may list per release
/// (docs/design.md#lints).
pub const IGNORABLE: [&str; 5] = [
    MANAGES_BOOTSTRAP_RELEASE,
    DUPLICATES_BOOTSTRAP_CHART,
    HANDOVER_MANAGED_TWICE,
    HANDOVER_DRIFT,
    APPLY_FAILS,
];

pub use crate::finding::{Finding, Severity};

/// Sorts for stable output and drops exact repeats (an object reached twice).
pub fn normalize(findings: &mut Vec<Finding>) {
    findings.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    findings.dedup();
}

fn release_id(release: &BootstrapRelease) -> String {
    format!("{}/{}", release.namespace, release.name)
}

fn ns_display(ns: Option<&str>) -> &str {
    ns.unwrap_or("<no namespace>")
}

/// HelmReleases that would manage, or collide with, a bootstrap release.
pub fn helm_release_conflicts(objects: &[Object], releases: &[BootstrapRelease]) -> Vec<Finding> {
    let mut out = Vec::new();
    for hr in objects.iter().filter(|o| o.is_flux("helm", "HelmRelease")) {
        let spec = hr.body.get("spec").unwrap_or(&Value::Null);
        let id = identity(&hr.name, hr.namespace.as_deref(), spec);
        let chart = chart_name(hr, objects);
        for release in releases {
            let manages = id.release_name == release.name
                && id.storage_namespace.as_deref() == Some(release.namespace.as_str());
            if manages && release.handover.is_some() {
                // Meant to happen: [`handover`] proves the adoption is a no-op.
                continue;
            }
            if manages {
                out.push(Finding {
                    severity: Severity::Error,
                    code: MANAGES_BOOTSTRAP_RELEASE,
                    release: Some(release_id(release)),
                    object: Some(hr.reference()),
                    chain: hr.chain.clone(),
                    message: format!(
                        "HelmRelease {}/{} manages Helm release {} (release name `{}`, storage namespace `{}`), which bootstrap installs and owns; \
                         two controllers would fight over it. Remove the HelmRelease from the Flux tree (or the reference in `{}` that pulls it in); \
                         or, to install it now and let Flux own it afterwards, set `ownership: handover` with `from: {{ helmRelease: {} }}` on `{}` (chart, version and values then come from the HelmRelease, so its adoption changes nothing); \
                         or drop `{}` from the bootstrap releases if Flux alone should install it",
                        ns_display(hr.namespace.as_deref()),
                        hr.name,
                        release_id(release),
                        id.release_name,
                        release.namespace,
                        referrer(&hr.chain),
                        hr.reference().file,
                        release_id(release),
                        release_id(release),
                    ),
                    written: None,
                    ignored: false,
                });
                continue;
            }
            let same_chart = chart.is_some() && chart == release.chart;
            if same_chart && id.release_namespace.as_deref() == Some(release.namespace.as_str()) {
                out.push(Finding {
                    severity: Severity::Error,
                    code: DUPLICATES_BOOTSTRAP_CHART,
                    release: Some(release_id(release)),
                    object: Some(hr.reference()),
                    chain: hr.chain.clone(),
                    message: format!(
                        "HelmRelease {}/{} installs chart `{}` into namespace `{}` as Helm release `{}` (storage namespace `{}`), \
                         beside bootstrap's release {} of the same chart; both would create the same objects. \
                         Remove the HelmRelease, or drop `{}` from the bootstrap releases",
                        ns_display(hr.namespace.as_deref()),
                        hr.name,
                        chart.as_deref().unwrap_or_default(),
                        release.namespace,
                        id.release_name,
                        ns_display(id.storage_namespace.as_deref()),
                        release_id(release),
                        release_id(release),
                    ),
                    written: None,
                    ignored: false,
                });
            }
        }
    }
    out
}

/// The proof that Flux's adoption of each `handover` release changes
/// nothing (docs/design.md#handover): exactly one HelmRelease manages it,
/// with the chart, version and values bootstrap installs. helm-controller
/// finds the release `Unmanaged` (no history of its own) and upgrades it with
/// the HelmRelease's chart and values (fluxcd/helm-controller
/// `internal/reconcile/state.go`, `internal/reconcile/atomic_release.go`,
/// `ResetValues` in `internal/action/upgrade.go`): equal chart, version and
/// values make that upgrade a new revision of the same objects, plus the
/// origin labels `internal/postrender/build.go` always adds.
pub fn handover(objects: &[Object], releases: &[BootstrapRelease]) -> Vec<Finding> {
    let mut out = Vec::new();
    for release in releases {
        let Some(handover) = &release.handover else {
            continue;
        };
        let managing =
            super::helmrelease_source::managing(objects, &release.namespace, &release.name);
        let finding = |severity, code, hr, message| about(release, severity, code, hr, message);
        let hr = match managing.as_slice() {
            [] => {
                out.push(finding(
                    Severity::Warning,
                    HANDOVER_NEVER_ADOPTED,
                    None,
                    format!(
                        "no HelmRelease in the tree manages handover release {} (release name `{}`, storage namespace `{}`): Flux never adopts it, and bootstrap stops at installing it once; add the HelmRelease to the tree, or make the release `ownership: bootstrap`",
                        release_id(release),
                        release.name,
                        release.namespace
                    ),
                ));
                continue;
            }
            [hr] => *hr,
            many => {
                for hr in many {
                    out.push(finding(
                        Severity::Error,
                        HANDOVER_MANAGED_TWICE,
                        Some(hr),
                        format!(
                            "{} HelmReleases manage handover release {} ({}): each would upgrade it with its own chart and values; keep one",
                            many.len(),
                            release_id(release),
                            many.iter()
                                .map(|h| format!("{}/{} in {}", ns_display(h.namespace.as_deref()), h.name, h.file))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ));
                }
                continue;
            }
        };
        out.extend(adoption(objects, release, handover, hr));
    }
    out
}

/// A handover finding about `release`, at the HelmRelease `hr` if any.
fn about(
    release: &BootstrapRelease,
    severity: Severity,
    code: &'static str,
    hr: Option<&Object>,
    message: String,
) -> Finding {
    let chain = hr.map(|h| h.chain.clone()).unwrap_or_default();
    let object = hr.map(Object::reference);
    Finding::tree(
        severity,
        code,
        Some(release_id(release)),
        object,
        chain,
        message,
    )
}

/// What the adoption of handover `release` by its one HelmRelease `hr`
/// would do: an HelmRelease that cannot be resolved, values not compared,
/// and what its upgrade would change.
fn adoption(
    objects: &[Object],
    release: &BootstrapRelease,
    handover: &super::Handover,
    hr: &Object,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let finding = |severity, code, hr, message| about(release, severity, code, hr, message);
    let name = format!(
        "HelmRelease {}/{}",
        ns_display(hr.namespace.as_deref()),
        hr.name
    );
    let origin = match super::helmrelease_source::resolve(hr, objects) {
        Ok(origin) => origin,
        Err(why) => {
            out.push(finding(
                Severity::Error,
                HANDOVER_DRIFT,
                Some(hr),
                format!(
                    "{name}, which adopts handover release {}, cannot be resolved ({why}): nothing proves its adoption leaves the release unchanged",
                    release_id(release)
                ),
            ));
            return out;
        }
    };
    for missing in &origin.unresolved {
        out.push(finding(
            Severity::Warning,
            HANDOVER_VALUES_UNKNOWN,
            Some(hr),
            format!(
                "{name}, which adopts handover release {}, takes values from {}, but {}: those values are not compared",
                release_id(release),
                missing.what,
                missing.why
            ),
        ));
    }
    let differences = differences(release, handover, &origin);
    if !differences.is_empty() {
        out.push(finding(
            Severity::Error,
            HANDOVER_DRIFT,
            Some(hr),
            format!(
                "{name} would change handover release {} when it adopts it (helm-controller upgrades an existing release with the HelmRelease's chart and values): {}. Make both the same: move the value into the HelmRelease, or drop it from bootstrap",
                release_id(release),
                differences.join("; ")
            ),
        ));
    }
    out
}

/// What the adoption upgrade of `origin` would change in handover `release`
/// as bootstrap installed it: chart, version, each value (and which of the
/// release's files set it).
fn differences(
    release: &BootstrapRelease,
    handover: &super::Handover,
    origin: &super::helmrelease_source::Origin,
) -> Vec<String> {
    let mut differences = Vec::new();
    if release.chart.as_deref() != Some(origin.chart.name().as_str()) {
        differences.push(format!(
            "chart: bootstrap {}, Flux {}",
            release.chart.as_deref().unwrap_or("-"),
            origin.chart.name()
        ));
    }
    if handover.version != origin.chart.version {
        differences.push(format!(
            "version: bootstrap {}, Flux {}",
            handover.version, origin.chart.version
        ));
    }
    for d in crate::values::diff(&handover.values, &origin.values) {
        // A value a `valuesFrom` source outside the tree may set (a Secret
        // external-secrets makes, at its `targetPath`) is unknown here, not
        // different: HANDOVER_VALUES_UNKNOWN says so; no config could make
        // this finding go away.
        if origin
            .unresolved
            .iter()
            .any(|u| u.may_set(&d.path, &origin.values))
        {
            continue;
        }
        let cause = handover
            .overrides
            .iter()
            .rev()
            .find(|(_, v)| crate::values::sets(v, &d.path))
            .map(|(label, _)| format!(" (set by {label})"))
            .unwrap_or_default();
        differences.push(format!("{}{cause}", d.describe_with(&handover.secrets)));
    }
    differences
}

/// The kinds a chart render is searched for when a health check names one.
pub const WORKLOAD_KINDS: [&str; 7] = [
    "Deployment",
    "DaemonSet",
    "StatefulSet",
    "ReplicaSet",
    "Job",
    "CronJob",
    "Pod",
];

/// One `spec.healthChecks` entry of a Flux Kustomization.
struct HealthCheck<'a> {
    kustomization: &'a Object,
    kind: &'a str,
    name: &'a str,
    /// The entry's namespace, else the Kustomization's `targetNamespace`,
    /// else its own.
    namespace: Option<&'a str>,
}

fn health_checks(objects: &[Object]) -> impl Iterator<Item = HealthCheck<'_>> {
    objects
        .iter()
        .filter(|o| o.is_flux("kustomize", "Kustomization"))
        .flat_map(|ks| {
            let default_ns = ks
                .body
                .pointer("/spec/targetNamespace")
                .and_then(Value::as_str)
                .or(ks.namespace.as_deref());
            ks.body
                .pointer("/spec/healthChecks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(move |check| {
                    let field = |k: &str| check.get(k).and_then(Value::as_str);
                    Some(HealthCheck {
                        kustomization: ks,
                        kind: field("kind")?,
                        name: field("name")?,
                        namespace: field("namespace").or(default_ns),
                    })
                })
        })
}

/// Whether a release's hooks name the workload.
fn named_by_hooks(release: &BootstrapRelease, check: &HealthCheck) -> bool {
    release.workloads.iter().any(|w| {
        w.kind == check.kind
            && w.name == check.name
            && Some(w.namespace.as_str()) == check.namespace
    })
}

/// The releases (indices into `releases`) whose chart render would decide a
/// health check: an entry names a workload in the release's namespace that
/// none of its hooks names. Handover releases are left out, as in
/// [`health_checks_on_bootstrap`].
pub fn releases_to_render(objects: &[Object], releases: &[BootstrapRelease]) -> Vec<usize> {
    let mut wanted = std::collections::BTreeSet::new();
    for check in health_checks(objects).filter(|c| WORKLOAD_KINDS.contains(&c.kind)) {
        for (i, release) in releases.iter().enumerate() {
            if release.handover.is_none()
                && check.namespace == Some(release.namespace.as_str())
                && !named_by_hooks(release, &check)
            {
                wanted.insert(i);
            }
        }
    }
    wanted.into_iter().collect()
}

/// Flux Kustomization health checks on workloads a bootstrap release owns:
/// Flux would report (and block dependents on) objects it does not manage.
/// A release owns what its hooks name; beyond that, what its chart renders
/// when `check` rendered it ([`BootstrapRelease::rendered`]), else what the
/// names its chart conventionally gives suggest (said to be inferred).
pub fn health_checks_on_bootstrap(
    objects: &[Object],
    releases: &[BootstrapRelease],
) -> Vec<Finding> {
    let mut out = Vec::new();
    for check in health_checks(objects) {
        let HealthCheck {
            kustomization: ks,
            kind,
            name,
            namespace,
        } = check;
        // Flux health-checking what it adopts is what a handover leads to.
        for release in releases.iter().filter(|r| r.handover.is_none()) {
            let owns = if named_by_hooks(release, &check) {
                "owns"
            } else if let Some(rendered) = &release.rendered {
                if !rendered.iter().any(|w| {
                    w.kind == kind && w.name == name && Some(w.namespace.as_str()) == namespace
                }) {
                    continue;
                }
                "owns (its chart renders it, though no hook names it)"
            } else if inferred_workload(release, kind, name, namespace) {
                "most likely owns (inferred from the names its chart conventionally gives: no hook names this workload)"
            } else {
                continue;
            };
            out.push(Finding {
                severity: Severity::Warning,
                code: HEALTHCHECK_ON_BOOTSTRAP_WORKLOAD,
                release: Some(release_id(release)),
                object: Some(ks.reference()),
                chain: ks.chain.clone(),
                message: format!(
                    "Kustomization {}/{} health-checks {kind} {}/{name}, which bootstrap release {} {owns}; \
                     Flux would stall this Kustomization and everything that depends on it on a workload it does not manage. \
                     Remove the entry from spec.healthChecks",
                    ns_display(ks.namespace.as_deref()),
                    ks.name,
                    ns_display(namespace),
                    release_id(release),
                ),
                written: None,
                ignored: false,
            });
        }
    }
    out
}

/// A release's chart could not be rendered for [`releases_to_render`]: its
/// workloads are inferred from names instead.
pub fn chart_not_rendered(release: &BootstrapRelease, why: &str) -> Finding {
    Finding {
        severity: Severity::Info,
        code: CHART_NOT_RENDERED,
        release: Some(release_id(release)),
        object: None,
        chain: Vec::new(),
        message: format!(
            "the chart of bootstrap release {} could not be rendered to learn which workloads it owns ({why}); \
             health checks in its namespace are matched against the names its chart conventionally gives instead",
            release_id(release)
        ),
        written: None,
        ignored: false,
    }
}

/// The workloads among a release's rendered documents (kinds in
/// [`WORKLOAD_KINDS`]); one without a namespace lands in the release's, as
/// `helm install --namespace` puts it.
pub fn rendered_workloads(release_namespace: &str, documents: &[Value]) -> Vec<super::WorkloadRef> {
    documents
        .iter()
        .filter_map(|doc| {
            let kind = doc.get("kind").and_then(Value::as_str)?;
            if !WORKLOAD_KINDS.contains(&kind) {
                return None;
            }
            Some(super::WorkloadRef {
                kind: kind.to_string(),
                name: doc
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)?
                    .to_string(),
                namespace: doc
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or(release_namespace)
                    .to_string(),
            })
        })
        .collect()
}

/// A workload a release's chart most likely renders though no hook names
/// it: in the release's namespace, named like the release (or its chart),
/// or `<release>-…` — what charts conventionally call their workloads
/// (`cert-manager` renders `cert-manager-webhook` and `cert-manager-cainjector`).
fn inferred_workload(
    release: &BootstrapRelease,
    kind: &str,
    name: &str,
    namespace: Option<&str>,
) -> bool {
    let workload = matches!(kind, "Deployment" | "DaemonSet" | "StatefulSet");
    let prefixes = std::iter::once(release.name.as_str()).chain(release.chart.as_deref());
    workload
        && namespace == Some(release.namespace.as_str())
        && prefixes.into_iter().any(|p| {
            name == p
                || name
                    .strip_prefix(p)
                    .is_some_and(|rest| rest.starts_with('-'))
        })
}

/// `dependsOn` entries naming a Kustomization/HelmRelease absent from the tree:
/// Flux would wait on it forever.
pub fn missing_dependencies(objects: &[Object]) -> Vec<Finding> {
    let mut out = Vec::new();
    let flux_kinds = [("kustomize", "Kustomization"), ("helm", "HelmRelease")];
    for (group, kind) in flux_kinds {
        for obj in objects.iter().filter(|o| o.is_flux(group, kind)) {
            let Some(deps) = obj
                .body
                .pointer("/spec/dependsOn")
                .and_then(Value::as_array)
            else {
                continue;
            };
            for dep in deps {
                let Some(name) = dep.get("name").and_then(Value::as_str) else {
                    continue;
                };
                let namespace = dep
                    .get("namespace")
                    .and_then(Value::as_str)
                    .or(obj.namespace.as_deref());
                let found = objects.iter().any(|o| {
                    o.is_flux(group, kind) && o.name == name && o.namespace.as_deref() == namespace
                });
                if !found {
                    out.push(Finding {
                        severity: Severity::Warning,
                        code: DEPENDSON_MISSING,
                        release: None,
                        object: Some(obj.reference()),
                        chain: obj.chain.clone(),
                        message: format!(
                            "{kind} {}/{} depends on {kind} {}/{name}, which is not in the scanned tree; \
                             Flux would never reconcile it. Remove the dependsOn entry or point it at an existing {kind}",
                            ns_display(obj.namespace.as_deref()),
                            obj.name,
                            ns_display(namespace),
                        ),
                        written: None,
                        ignored: false,
                    });
                }
            }
        }
    }
    out
}

/// A tree that yields no HelmRelease at all cannot vouch for bootstrap's
/// releases: the entrypoint is wrong, or the HelmReleases come from
/// something the scan does not see.
pub fn nothing_reached(objects: &[Object], releases: &[BootstrapRelease]) -> Vec<Finding> {
    if releases.is_empty() || objects.iter().any(|o| o.is_flux("helm", "HelmRelease")) {
        return Vec::new();
    }
    vec![Finding {
        severity: Severity::Warning,
        code: NO_HELMRELEASE_REACHED,
        release: None,
        object: None,
        chain: Vec::new(),
        message: format!(
            "the scan reached no HelmRelease at all ({} objects) while bootstrap has {} release(s); \
             check flux.root and flux.entrypoint, and the other warnings: what Flux really applies was not seen, so this is no proof that Flux leaves bootstrap's releases alone",
            objects.len(),
            releases.len()
        ),
        written: None,
        ignored: false,
    }]
}

/// The file that pulled the object in: the one before it in the chain.
fn referrer(chain: &[String]) -> &str {
    match chain {
        [.., parent, _] => parent,
        [only] => only,
        [] => "",
    }
}
