//! A release's chart reference: a repository chart, an OCI one, a local
//! directory.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::defaults::Repo;
use super::{Chart, ChartOut};
use crate::import::helmfile::{Release as HelmfileRelease, State};
use crate::import::{Issue, relative};

/// The chart reference in bootstrap's terms (docs/design.md#release-file).
pub(super) fn chart(
    release: &HelmfileRelease,
    state: &State,
    repos: &BTreeMap<String, Repo>,
    issues: &mut Vec<Issue>,
) -> Option<Chart> {
    let spec = &release.spec;
    let chart = spec
        .get("chart")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim()
        .to_string();
    let version = spec
        .get("version")
        .and_then(|v| match v {
            Value::String(s) => Some(s.trim().to_string()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .filter(|v| !v.is_empty());
    let at = release.origin("chart", state);
    if chart.contains("{{") && issues.iter().any(|i| i.field == "chart") {
        // Its template was not evaluated (listed already): the text is no
        // chart reference to judge.
        return None;
    }
    if chart.is_empty() {
        if !issues
            .iter()
            .any(|i| i.field == "chart" && i.file == at.file && i.line == at.line)
        {
            issues.push(Issue::new(
                &at.file,
                at.line,
                "chart",
                "the release has no chart (helmfile fails too)",
            ));
        }
        return None;
    }
    let local = state.dir.join(&chart);
    let reference = if let Some(rest) = chart.strip_prefix("oci://") {
        ChartOut::Oci(format!("oci://{rest}"))
    } else if chart.starts_with("./")
        || chart.starts_with("../")
        || chart.starts_with('/')
        || local.is_dir()
    {
        ChartOut::Path(crate::import::hooks::absolute(
            &crate::import::gotmpl::normalize(&local),
        ))
    } else if let Some((repo, name)) = chart.split_once('/') {
        match repos.get(repo) {
            Some(Repo { url, oci: true }) => ChartOut::Oci(format!(
                "oci://{}/{name}",
                url.trim_start_matches("oci://").trim_end_matches('/')
            )),
            Some(Repo { url, oci: false }) => ChartOut::Repo {
                repo: url.clone(),
                name: name.to_string(),
            },
            None => {
                issues.push(Issue::new(
                    &at.file,
                    at.line,
                    format!("chart: {chart}"),
                    format!(
                        "the repository `{repo}` is not in `repositories:`, so its URL is unknown"
                    ),
                ));
                return None;
            }
        }
    } else {
        issues.push(Issue::new(
            &at.file,
            at.line,
            format!("chart: {chart}"),
            "is neither `repo/chart`, `oci://…` nor a chart directory",
        ));
        return None;
    };
    let needs_pin = !matches!(reference, ChartOut::Path(_));
    check_version(
        release,
        state,
        &chart,
        version.as_deref(),
        needs_pin,
        issues,
    );
    Some(Chart {
        chart: reference,
        version,
    })
}

/// A chart's version as bootstrap needs it: pinned (a chart directory
/// needs none); an issue otherwise, unless its template already failed.
fn check_version(
    release: &HelmfileRelease,
    state: &State,
    chart: &str,
    version: Option<&str>,
    needs_pin: bool,
    issues: &mut Vec<Issue>,
) {
    let version_failed = issues
        .iter()
        .any(|i| i.field == "version" && i.file == release.origin("version", state).file);
    match version {
        _ if version_failed => {}
        None if needs_pin => {
            let at = release.origin("version", state);
            issues.push(Issue::new(
                &at.file,
                at.line,
                format!("chart: {chart}"),
                "has no `version` (helm would take the latest); bootstrap installs pinned versions: add the version to the release file",
            ));
        }
        Some(v) if crate::validate::pinned_version(v).is_err() => {
            let at = release.origin("version", state);
            issues.push(Issue::new(
                &at.file,
                at.line,
                format!("version: {v}"),
                "is a range; bootstrap installs pinned versions: write the exact version in the release file",
            ));
        }
        _ => {}
    }
}

/// "read from …ocirepository.yaml" when the chart and version came from a
/// Flux OCIRepository a template read.
pub(super) fn chart_source(release: &HelmfileRelease, root: &Path) -> Option<String> {
    let chart = release.spec.get("chart")?.as_str()?;
    for read in &release.chart_reads {
        let docs: Vec<Value> = serde_saphyr::from_multiple(&read.text).unwrap_or_default();
        for doc in docs {
            if doc.get("kind").and_then(Value::as_str) == Some("OCIRepository")
                && doc.pointer("/spec/url").and_then(Value::as_str) == Some(chart)
            {
                return Some(format!(
                    "chart and version: spec.url and spec.ref.tag of the Flux OCIRepository {}, as the helmfile reads them; copied at import time, so keep the two in step",
                    relative(root, &read.path).display()
                ));
            }
        }
    }
    None
}
