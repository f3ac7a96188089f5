//! Cilium's kube-proxy replacement (docs/design.md#lints,
//! docs/design.md#kind-kube-proxy-free-deadlock).

use super::locate::locate;
use super::{Hit, text};
use crate::plan::Plan;
use crate::release::{ChartSource, Release};

pub(super) const KPR_WITHOUT_API_HOST: &str = "cilium-kpr-without-api-host";
pub(super) const KPR_PARTIAL: &str = "cilium-kpr-partial";

/// The installed Cilium releases of a plan (the chart named `cilium`).
pub(super) fn cilium_releases(plan: &Plan) -> impl Iterator<Item = &Release> {
    plan.installed()
        .filter(|r| r.chart().is_some_and(|c| c.name() == "cilium"))
}

/// `kubeProxyReplacement: true` (or `"true"`, or the pre-1.14 `strict`)
/// without both `k8sServiceHost` and `k8sServicePort`: nothing serves the
/// `kubernetes` Service VIP until Cilium runs, so Cilium's init containers
/// never reach the API server.
pub(super) fn kpr_without_api_host(plan: &Plan) -> Vec<Hit> {
    let mut hits = Vec::new();
    for release in cilium_releases(plan) {
        let kpr = text(release.values().get("kubeProxyReplacement"));
        if !matches!(kpr.as_deref(), Some("true" | "strict")) {
            continue;
        }
        let set =
            |key: &str| text(release.values().get(key)).is_some_and(|v| !v.is_empty() && v != "0");
        let missing: Vec<&str> = ["k8sServiceHost", "k8sServicePort"]
            .into_iter()
            .filter(|k| !set(k))
            .collect();
        if missing.is_empty() {
            continue;
        }
        hits.push(Hit {
            release: Some(release.id.clone()),
            at: Some(locate(release, &["kubeProxyReplacement"])),
            message: format!(
                "Cilium replaces kube-proxy (`kubeProxyReplacement: {}`) but {} not set: with no kube-proxy, nothing serves the `kubernetes` Service VIP until Cilium runs, so Cilium's init containers cannot reach the API server and the pods hang at `Init:0/N`",
                kpr.unwrap_or_default(),
                match missing.as_slice() {
                    [one] => format!("`{one}` is"),
                    _ => "`k8sServiceHost` and `k8sServicePort` are".to_string(),
                }
            ),
            fix: "set `k8sServiceHost` and `k8sServicePort` to the API server itself (a control-plane address or load balancer and its port, e.g. 6443), not the Service VIP".into(),
        });
    }
    hits
}

/// `kubeProxyReplacement: partial|strict|probe|disabled` on chart >= 1.14,
/// where only `true` and `false` exist.
pub(super) fn kpr_partial(plan: &Plan) -> Vec<Hit> {
    let mut hits = Vec::new();
    for release in cilium_releases(plan) {
        let Some(kpr) = text(release.values().get("kubeProxyReplacement")) else {
            continue;
        };
        if !matches!(kpr.as_str(), "partial" | "strict" | "probe" | "disabled") {
            continue;
        }
        let version = chart_version(release);
        if version.as_ref().is_some_and(|v| *v < (1, 14)) {
            continue;
        }
        let replacement = if kpr == "disabled" { "false" } else { "true" };
        hits.push(Hit {
            release: Some(release.id.clone()),
            at: Some(locate(release, &["kubeProxyReplacement"])),
            message: format!(
                "`kubeProxyReplacement: {kpr}` does not exist in Cilium {} (since 1.14 only `true` and `false` do); the chart rejects or ignores it, and no mode of it makes the API server reachable before Cilium runs",
                version
                    .map(|(a, b)| format!("{a}.{b}"))
                    .unwrap_or_else(|| "charts of unknown version".into())
            ),
            fix: format!(
                "write `kubeProxyReplacement: {replacement}`{}",
                if replacement == "true" {
                    " and set `k8sServiceHost`/`k8sServicePort` to the API server"
                } else {
                    ""
                }
            ),
        });
    }
    hits
}

/// `(major, minor)` of the release's chart: the pinned version, or a local
/// chart's `Chart.yaml` `version:`.
fn chart_version(release: &Release) -> Option<(u64, u64)> {
    let chart = release.chart()?;
    let version = match (&chart.version, &chart.source) {
        (Some(v), _) => v.clone(),
        (None, ChartSource::Path(dir)) => std::fs::read_to_string(dir.join("Chart.yaml"))
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("version:"))
            .map(|v| v.trim().trim_matches('"').to_string())?,
        (None, _) => return None,
    };
    let mut parts = version.trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()?;
    Some((major, minor))
}
