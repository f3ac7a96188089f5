//! Objects of CRD-served kinds and the releases that provide the CRDs
//! (docs/design.md#lints). Offline, a release's manifests are not rendered,
//! so what a release creates is read from known value switches and chart
//! names (approximated: a chart that creates such objects unconditionally,
//! or behind another switch, is not seen), and what provides a CRD from
//! known charts plus the CRDs found in local charts' `crds/` and local
//! `manifests:` files.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use super::locate::locate;
use super::{Hit, get, is_true};
use crate::plan::Plan;
use crate::release::{ChartSource, Release, ReleaseId, Source};

pub(super) const NEEDS_MISSING_FOR_KIND: &str = "needs-missing-for-kind";

/// Value switches (true) that make a chart create objects of a kind.
const SWITCHES: &[(&[&str], &str)] = &[
    (&["serviceMonitor", "enabled"], "ServiceMonitor"),
    (&["serviceMonitor", "create"], "ServiceMonitor"),
    (&["metrics", "serviceMonitor", "enabled"], "ServiceMonitor"),
    (
        &["prometheus", "serviceMonitor", "enabled"],
        "ServiceMonitor",
    ),
    (
        &["prometheus", "servicemonitor", "enabled"],
        "ServiceMonitor",
    ),
    (
        &["operator", "prometheus", "serviceMonitor", "enabled"],
        "ServiceMonitor",
    ),
    (
        &["hubble", "metrics", "serviceMonitor", "enabled"],
        "ServiceMonitor",
    ),
    (&["podMonitor", "enabled"], "PodMonitor"),
    (&["prometheusRule", "enabled"], "PrometheusRule"),
    (&["prometheusRule", "create"], "PrometheusRule"),
];

/// Charts whose every install creates an object of a kind.
const CHART_KINDS: &[(&str, &str)] = &[("flux-instance", "FluxInstance")];

/// Charts and manifests known to carry CRDs: (chart name or URL fragment, kinds).
const PROVIDERS: &[(&str, &[&str])] = &[
    (
        "prometheus-operator-crds",
        &[
            "ServiceMonitor",
            "PodMonitor",
            "PrometheusRule",
            "Probe",
            "Prometheus",
            "Alertmanager",
            "AlertmanagerConfig",
            "ScrapeConfig",
            "PrometheusAgent",
            "ThanosRuler",
        ],
    ),
    (
        "kube-prometheus-stack",
        &["ServiceMonitor", "PodMonitor", "PrometheusRule"],
    ),
    (
        "cert-manager",
        &[
            "Certificate",
            "CertificateRequest",
            "Issuer",
            "ClusterIssuer",
            "Order",
            "Challenge",
        ],
    ),
    (
        "flux-operator",
        &["FluxInstance", "FluxReport", "ResourceSet"],
    ),
    (
        "gateway-api",
        &[
            "GatewayClass",
            "Gateway",
            "HTTPRoute",
            "GRPCRoute",
            "ReferenceGrant",
        ],
    ),
];

/// What the chart would be suggested as when no release provides a kind.
fn known_provider(kind: &str) -> Option<&'static str> {
    PROVIDERS
        .iter()
        .find(|(_, kinds)| kinds.contains(&kind))
        .map(|(name, _)| *name)
}

/// `/NAME/` of each of [`PROVIDERS`], in its order: a chart path or
/// manifest URL that holds it names the provider. Made once, not once per
/// release and provider.
fn provider_segments() -> &'static [String] {
    static SEGMENTS: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
        PROVIDERS
            .iter()
            .map(|(name, _)| format!("/{name}/"))
            .collect()
    });
    &SEGMENTS
}

/// The CRD kinds a release provides.
fn provides(release: &Release) -> BTreeSet<String> {
    let mut kinds = BTreeSet::new();
    let mut names = vec![release.id.name.clone()];
    match &release.source {
        Source::Chart(chart) => {
            names.push(chart.name());
            if let ChartSource::Path(dir) = &chart.source {
                crds_in_dir(dir, 0, &mut kinds);
            }
        }
        Source::Manifests(list) => {
            for m in list {
                names.push(m.clone());
                if !m.starts_with("http") {
                    crds_in_file(Path::new(m), &mut kinds);
                }
            }
        }
    }
    for ((name, provided), segment) in PROVIDERS.iter().zip(provider_segments()) {
        if names
            .iter()
            .any(|n| n == name || n.contains(segment.as_str()))
        {
            kinds.extend(provided.iter().map(|k| k.to_string()));
        }
    }
    kinds
}

/// CRDs in a chart's `crds/` and its subcharts' (`charts/*/crds/`).
fn crds_in_dir(chart: &Path, depth: usize, kinds: &mut BTreeSet<String>) {
    if depth > 3 {
        return;
    }
    for entry in std::fs::read_dir(chart.join("crds"))
        .into_iter()
        .flatten()
        .flatten()
    {
        crds_in_file(&entry.path(), kinds);
    }
    for entry in std::fs::read_dir(chart.join("charts"))
        .into_iter()
        .flatten()
        .flatten()
    {
        crds_in_dir(&entry.path(), depth + 1, kinds);
    }
}

fn crds_in_file(path: &Path, kinds: &mut BTreeSet<String>) {
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    let Ok(docs) = crate::yaml::manifests(&text, path) else {
        return;
    };
    for doc in docs {
        if doc.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition")
            && let Some(kind) = doc.pointer("/spec/names/kind").and_then(Value::as_str)
        {
            kinds.insert(kind.to_string());
        }
    }
}

/// A release that creates objects of a CRD-served kind whose CRD neither
/// comes from the CRD phase nor from a release it (transitively) needs.
pub(super) fn needs_missing_for_kind(plan: &Plan) -> Vec<Hit> {
    let providers: Vec<(&Release, BTreeSet<String>)> =
        plan.releases.iter().map(|r| (r, provides(r))).collect();
    let mut hits = Vec::new();
    for release in plan.installed() {
        let mut uses: Vec<(String, Option<Vec<&str>>)> = Vec::new();
        for (path, kind) in SWITCHES {
            if is_true(get(release.values(), path)) && !uses.iter().any(|(k, _)| k == kind) {
                uses.push((kind.to_string(), Some(path.to_vec())));
            }
        }
        for (chart, kind) in CHART_KINDS {
            if release.chart().is_some_and(|c| c.name() == *chart) {
                uses.push((kind.to_string(), None));
            }
        }
        if uses.is_empty() {
            continue;
        }
        let needed: BTreeSet<ReleaseId> = plan.graph.with_needs(std::iter::once(&release.id));
        for (kind, path) in uses {
            let from: Vec<&Release> = providers
                .iter()
                .filter(|(r, kinds)| r.id != release.id && kinds.contains(&kind))
                .map(|(r, _)| *r)
                .collect();
            if from
                .iter()
                .any(|p| p.has_crd_phase() || needed.contains(&p.id))
            {
                continue;
            }
            // The chart itself may carry the CRD (`crds: chart`).
            if provides(release).contains(&kind) {
                continue;
            }
            let at = match &path {
                Some(p) => locate(release, p),
                None => super::Location {
                    file: release.file.clone(),
                    line: release.line,
                },
            };
            let why = path
                .as_ref()
                .map(|p| format!(" (`{}: true`)", p.join(".")))
                .unwrap_or_default();
            let (message, fix) = match from.first() {
                Some(p) => (
                    format!(
                        "release {} creates {kind} objects{why}, whose CRD comes from release {}, which it does not need and whose CRDs are not applied in the CRD phase; the install can run before the CRD exists",
                        release.id, p.id
                    ),
                    format!("add `{}` to `needs`, or give it `crds: bootstrap`", p.id),
                ),
                None => (
                    format!(
                        "release {} creates {kind} objects{why}, but no release of cluster `{}` provides the {kind} CRD; the install fails (or the objects are dropped) unless something else installs it",
                        release.id, plan.cluster.name
                    ),
                    match known_provider(&kind) {
                        Some(chart) => format!(
                            "add a release of `{chart}` (e.g. with `crds: only`) to the cluster, or turn the switch off"
                        ),
                        None => {
                            "add the release that provides the CRD, or turn the switch off".into()
                        }
                    },
                ),
            };
            hits.push(Hit {
                release: Some(release.id.clone()),
                at: Some(at),
                message,
                fix,
            });
        }
    }
    hits
}
