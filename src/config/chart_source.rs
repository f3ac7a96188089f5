//! A release's `chart:` checked into a [`Chart`]: one source, a pinned
//! version, names helm takes.

use std::path::Path;

use super::file::ChartFile;
use crate::release::{Chart, ChartSource};
use crate::validate;
use crate::validate::VersionError;

/// Why a `chart:` cannot be used; each reads as a whole sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ChartError {
    #[error("chart has both `repo` and `oci`; an OCI chart needs only `oci: oci://...`")]
    RepoAndOci,
    #[error(
        "chart `name` is a URL (`{0}`); put the repository URL in `repo` (or `oci`) and the chart's name in `name`"
    )]
    UrlAsName(String),
    #[error("chart needs one of `repo` (with `name`), `oci` or `path`")]
    NoSource,
    #[error("chart must have exactly one of `repo`, `oci` or `path`")]
    SeveralSources,
    #[error("chart has no `version`; pin an exact version so the bootstrap is reproducible")]
    NoVersion,
    #[error("chart version {0}; pin an exact version")]
    NotPinned(#[source] VersionError),
    #[error("chart with `repo` needs `name`, the chart's name in that repository")]
    RepoWithoutName,
    #[error(
        "chart `name` is a URL (`{0}`); `name` is the chart's name in the repository, e.g. `cilium`"
    )]
    RepoNameIsUrl(String),
    #[error(
        "chart `name: {0}` looks like `repo/chart`; bootstrap does not use `helm repo add`: give the repository URL in `repo` and the bare chart name in `name`"
    )]
    RepoSlashChart(String),
    #[error(
        "chart `name: {0}` is not a chart name: it must start with a letter or digit and hold only letters, digits, `.`, `_` and `-` (helm would read a leading `-` as a flag)"
    )]
    BadName(String),
    #[error("chart `repo: {0}` is not an http(s) URL; OCI registries go in `oci: oci://...`")]
    RepoNotHttp(String),
    #[error("chart with `oci` takes no `name`; the chart is the last path segment of the URL")]
    OciWithName,
    #[error("chart `oci: {0}` must start with oci://")]
    NotOci(String),
    #[error("chart `{field}: {text}` is not a reference helm can use: {why}")]
    Unparsable {
        field: &'static str,
        text: String,
        why: validate::UrlError,
    },
    #[error("chart path `{0}` has no Chart.yaml (paths are relative to the release file)")]
    NoChartYaml(String),
    /// A local chart's version is optional, but when given it must be exact.
    #[error("chart version {0}")]
    PathVersion(#[source] VersionError),
}

pub(super) fn check_chart(chart: &ChartFile, base: &Path) -> Result<Chart, ChartError> {
    let forms = [
        chart.repo.is_some(),
        chart.oci.is_some(),
        chart.path.is_some(),
    ];
    if forms.iter().filter(|f| **f).count() != 1 {
        return Err(if chart.repo.is_some() && chart.oci.is_some() {
            ChartError::RepoAndOci
        } else if forms.iter().all(|f| !f) {
            match &chart.name {
                Some(name) if validate::is_url(name) => ChartError::UrlAsName(name.clone()),
                _ => ChartError::NoSource,
            }
        } else {
            ChartError::SeveralSources
        });
    }
    let pinned = |v: &Option<String>| -> Result<String, ChartError> {
        match v {
            None => Err(ChartError::NoVersion),
            Some(v) => validate::pinned_version(v)
                .map(|_| v.clone())
                .map_err(ChartError::NotPinned),
        }
    };
    if let Some(repo) = &chart.repo {
        let name = match &chart.name {
            None => return Err(ChartError::RepoWithoutName),
            Some(name) if validate::is_url(name) => {
                return Err(ChartError::RepoNameIsUrl(name.clone()));
            }
            Some(name) if name.contains('/') => {
                return Err(ChartError::RepoSlashChart(name.clone()));
            }
            Some(name) if !validate::chart_name(name) => {
                return Err(ChartError::BadName(name.clone()));
            }
            Some(name) => name.clone(),
        };
        if !(repo.starts_with("https://") || repo.starts_with("http://")) {
            return Err(ChartError::RepoNotHttp(repo.clone()));
        }
        validate::repository_url(repo).map_err(|why| ChartError::Unparsable {
            field: "repo",
            text: repo.clone(),
            why,
        })?;
        let version = pinned(&chart.version)?;
        return Ok(Chart {
            source: ChartSource::Repo {
                url: repo.clone(),
                name,
            },
            version: Some(version),
        });
    }
    if let Some(oci) = &chart.oci {
        if chart.name.is_some() {
            return Err(ChartError::OciWithName);
        }
        if !oci.starts_with("oci://") {
            return Err(ChartError::NotOci(oci.clone()));
        }
        validate::oci_reference(oci).map_err(|why| ChartError::Unparsable {
            field: "oci",
            text: oci.clone(),
            why,
        })?;
        let version = pinned(&chart.version)?;
        return Ok(Chart {
            source: ChartSource::Oci(oci.clone()),
            version: Some(version),
        });
    }
    let path = chart.path.as_deref().unwrap_or_default();
    let dir = base.join(path);
    if !dir.join("Chart.yaml").is_file() {
        return Err(ChartError::NoChartYaml(path.to_string()));
    }
    if let Some(v) = &chart.version {
        validate::pinned_version(v).map_err(ChartError::PathVersion)?;
    }
    // Unpinned, a local chart is the version its Chart.yaml says: what helm
    // records for the release, so `apply`, `status` and `diff` compare the
    // deployed version with it (helm ignores `--version` for a directory).
    let version = chart
        .version
        .clone()
        .or_else(|| chart_yaml_version(&dir.join("Chart.yaml")));
    Ok(Chart {
        source: ChartSource::Path(dir),
        version,
    })
}

/// The `version:` of a local chart's Chart.yaml (`None` if unreadable:
/// helm reports that chart itself).
fn chart_yaml_version(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let meta: serde_json::Value = serde_saphyr::from_str(&text).ok()?;
    match meta.get("version")? {
        serde_json::Value::String(v) => Some(v.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
