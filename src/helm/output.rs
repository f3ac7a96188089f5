//! Reading what helm prints: `version --short`, and the JSON of `list`,
//! `history` and `get values`. The shapes are helm's own (pkg/cmd/list.go
//! `releaseElement`, pkg/cmd/history.go `releaseInfo`), the same in Helm 3
//! and 4. Not `status -o json`: it leaves the chart out.

use serde::Deserialize;
use serde_json::Value;

use super::{DeployedRelease, HelmVersion};
use crate::release::ReleaseId;

/// Parses `helm version --short` (`v3.19.0+g3d8990f`, `v4.0.0`). Helm 2 printed
/// `Client: v2.16.1+g...`, so the version is looked for as a word, not a line.
pub fn version(output: &str) -> Option<HelmVersion> {
    output.split_whitespace().find_map(|word| {
        let raw = word.split('+').next().unwrap_or(word);
        let core = raw.strip_prefix('v')?;
        let core = core.split('-').next().unwrap_or(core);
        let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
        let (major, minor, patch) = (parts.next()??, parts.next()??, parts.next()??);
        parts.next().is_none().then(|| HelmVersion {
            major,
            minor,
            patch,
            raw: raw.to_string(),
        })
    })
}

/// `helm list -o json`: revision is a string there, and chart name and version
/// come joined as `name-version`.
#[derive(Debug, Deserialize)]
struct ListElement {
    name: String,
    namespace: String,
    revision: String,
    status: String,
    chart: String,
    #[serde(default)]
    app_version: String,
    #[serde(default)]
    updated: String,
}

/// helm printed something other than what its own code writes.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// Not JSON, or not the shape helm's `-o json` has.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// `helm list` gives revisions as strings; this one is not a number.
    #[error("release {release}: revision `{revision}` is not a number")]
    Revision {
        release: ReleaseId,
        revision: String,
    },
    /// `helm get values` printed JSON that is neither `null` nor an object.
    #[error("expected an object, got `{0}`")]
    NotAnObject(Value),
}

pub fn list(stdout: &str) -> Result<Vec<DeployedRelease>, OutputError> {
    let elements = serde_json::from_str::<Option<Vec<ListElement>>>(stdout)?.unwrap_or_default();
    elements
        .into_iter()
        .map(|e| {
            let revision = e
                .revision
                .parse::<u64>()
                .map_err(|_| OutputError::Revision {
                    release: ReleaseId::new(&e.namespace, &e.name),
                    revision: e.revision.clone(),
                })?;
            let (chart, version) = split_chart(&e.chart);
            Ok(DeployedRelease {
                id: ReleaseId::new(e.namespace, e.name),
                revision,
                status: e.status,
                chart: chart.to_string(),
                version: version.to_string(),
                app_version: e.app_version,
                updated: time(&e.updated),
            })
        })
        .collect()
}

/// helm's `updated`: Go's `time.Time` text in `list`
/// (`2025-10-02 10:11:12.123456789 +0000 UTC`), RFC 3339 in `history`.
pub fn time(text: &str) -> Option<std::time::SystemTime> {
    use k8s_openapi::jiff::{Timestamp, fmt::strtime};
    let text = text.trim();
    let timestamp = text.parse::<Timestamp>().ok().or_else(|| {
        // The zone's abbreviation after the offset says nothing more.
        let mut words: Vec<&str> = text.split_whitespace().collect();
        if words.len() == 4 {
            words.pop();
        }
        strtime::parse("%Y-%m-%d %H:%M:%S%.f %z", words.join(" "))
            .ok()?
            .to_timestamp()
            .ok()
    })?;
    Some(std::time::SystemTime::from(timestamp))
}

/// Splits helm's `name-version` at the first `-` that starts a semantic version
/// (`cert-manager-v1.19.0`, `flux-operator-0.32.0`, `app-1.0.0-rc.1`); chart
/// names may contain `-` and digits (`oauth2-proxy`), versions may contain `-`.
pub fn split_chart(joined: &str) -> (&str, &str) {
    joined
        .match_indices('-')
        .map(|(i, _)| i)
        .find(|&i| looks_like_version(&joined[i + 1..]))
        .map_or((joined, ""), |i| (&joined[..i], &joined[i + 1..]))
}

fn looks_like_version(s: &str) -> bool {
    let s = s.strip_prefix('v').unwrap_or(s);
    let core = s.split(['-', '+']).next().unwrap_or(s);
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() >= 2
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// One revision of `helm history -o json` (helm's pkg/cmd/history.go
/// `releaseInfo`): revision is a number here, chart is `name-version`.
#[derive(Debug, Deserialize)]
struct HistoryElement {
    revision: u64,
    status: String,
    chart: String,
    #[serde(default)]
    app_version: String,
    #[serde(default)]
    updated: String,
}

/// `helm history --max 1 -o json`: the latest revision of `id`.
pub fn history(stdout: &str, id: &ReleaseId) -> Result<Option<DeployedRelease>, OutputError> {
    let elements = serde_json::from_str::<Option<Vec<HistoryElement>>>(stdout)?.unwrap_or_default();
    Ok(elements.into_iter().max_by_key(|e| e.revision).map(|e| {
        let (chart, version) = split_chart(&e.chart);
        DeployedRelease {
            id: id.clone(),
            revision: e.revision,
            status: e.status,
            chart: chart.to_string(),
            version: version.to_string(),
            app_version: e.app_version,
            updated: time(&e.updated),
        }
    }))
}

/// `helm get values -o json` prints `null` for a release installed without values.
pub fn values(stdout: &str) -> Result<Value, OutputError> {
    match serde_json::from_str::<Value>(stdout)? {
        Value::Null => Ok(Value::Object(Default::default())),
        value @ Value::Object(_) => Ok(value),
        other => Err(OutputError::NotAnObject(other)),
    }
}

/// helm's message for a release that does not exist (storage driver's
/// `ErrReleaseNotFound`), wrapped differently by each command.
pub fn is_not_found(stderr: &str) -> bool {
    stderr.contains("release: not found")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_of_helm_3_and_4_parse() {
        let v = version("v3.19.0+g3d8990f\n").unwrap();
        assert_eq!(
            (v.major, v.minor, v.patch, v.raw.as_str()),
            (3, 19, 0, "v3.19.0")
        );
        let v = version("v4.0.0").unwrap();
        assert_eq!((v.major, v.minor, v.patch), (4, 0, 0));
        let v = version("v3.13.0-rc.1+gabc").unwrap();
        assert_eq!(
            (v.major, v.minor, v.patch, v.raw.as_str()),
            (3, 13, 0, "v3.13.0-rc.1")
        );
    }

    #[test]
    fn helm_2_client_line_and_noise_are_understood() {
        let v = version("Client: v2.16.1+gbbdfe5e\n").unwrap();
        assert_eq!((v.major, v.minor), (2, 16));
        let v = version("WARNING: something\nv3.14.4+g81c902a\n").unwrap();
        assert_eq!(v.minor, 14);
    }

    #[test]
    fn garbage_is_not_a_version() {
        assert_eq!(version("helm: command not found"), None);
        assert_eq!(version("v3.x"), None);
        assert_eq!(version(""), None);
    }

    #[test]
    fn chart_names_with_dashes_split_at_the_version() {
        assert_eq!(split_chart("cilium-1.18.2"), ("cilium", "1.18.2"));
        assert_eq!(
            split_chart("cert-manager-v1.19.0"),
            ("cert-manager", "v1.19.0")
        );
        assert_eq!(
            split_chart("flux-operator-0.32.0"),
            ("flux-operator", "0.32.0")
        );
        assert_eq!(
            split_chart("oauth2-proxy-7.12.1"),
            ("oauth2-proxy", "7.12.1")
        );
        assert_eq!(split_chart("app-2fa-1.0.0-rc.1"), ("app-2fa", "1.0.0-rc.1"));
        assert_eq!(split_chart("x-1.0.0+build.5"), ("x", "1.0.0+build.5"));
        assert_eq!(split_chart("MISSING"), ("MISSING", ""));
    }

    // Shaped like `helm list -A -a -o json` from a cluster mid-bootstrap.
    const LIST: &str = r#"[
      {"name":"cert-manager","namespace":"cert-manager","revision":"2","updated":"2025-10-02 10:11:12.123456789 +0000 UTC","status":"deployed","chart":"cert-manager-v1.19.0","app_version":"v1.19.0"},
      {"name":"cilium","namespace":"kube-system","revision":"1","updated":"2025-10-02 10:01:02.5 +0000 UTC","status":"deployed","chart":"cilium-1.18.2","app_version":"1.18.2"},
      {"name":"flux-operator","namespace":"flux-system","revision":"3","updated":"2025-10-02 10:20:00 +0000 UTC","status":"pending-upgrade","chart":"flux-operator-0.32.0","app_version":"v0.32.0"}
    ]"#;

    #[test]
    fn list_parses_every_release_with_split_chart_and_numeric_revision() {
        let releases = list(LIST).unwrap();
        assert_eq!(releases.len(), 3);
        assert_eq!(
            releases[0],
            DeployedRelease {
                id: ReleaseId::new("cert-manager", "cert-manager"),
                revision: 2,
                status: "deployed".into(),
                chart: "cert-manager".into(),
                version: "v1.19.0".into(),
                app_version: "v1.19.0".into(),
                updated: time("2025-10-02T10:11:12.123456789Z"),
            }
        );
        assert!(releases[0].updated.is_some());
        assert!(releases[2].is_pending());
        assert_eq!(
            (releases[2].chart.as_str(), releases[2].version.as_str()),
            ("flux-operator", "0.32.0")
        );
    }

    #[test]
    fn helm_times_read_in_both_forms() {
        let unix =
            |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
        assert_eq!(
            time("2025-10-02 10:01:02.5 +0000 UTC").map(unix),
            Some(1_759_399_262_500)
        );
        assert_eq!(
            time("2025-10-02 12:01:02 +0200 CEST").map(unix),
            Some(1_759_399_262_000)
        );
        assert_eq!(
            time("2025-10-02T10:01:02.5Z").map(unix),
            Some(1_759_399_262_500)
        );
        assert_eq!(time(""), None);
        assert_eq!(time("yesterday"), None);
    }

    #[test]
    fn empty_list_and_bad_list() {
        assert_eq!(list("[]\n").unwrap(), vec![]);
        assert_eq!(list("null").unwrap(), vec![]);
        assert!(matches!(
            list("NAME NAMESPACE REVISION"),
            Err(OutputError::Json(_))
        ));
        let bad = r#"[{"name":"a","namespace":"b","revision":"x","status":"deployed","chart":"c-1.0.0"}]"#;
        let err = list(bad).unwrap_err();
        assert!(
            matches!(&err, OutputError::Revision { release, revision } if release == &ReleaseId::new("b", "a") && revision == "x")
        );
        assert_eq!(err.to_string(), "release b/a: revision `x` is not a number");
    }

    /// `helm history --max 1 -o json` as helm 3.19 and 4.2 print it.
    const HISTORY: &str = r#"[{"revision":4,"updated":"2025-10-02T10:01:02.5Z","status":"deployed",
      "chart":"cilium-1.18.2","app_version":"1.18.2","description":"Upgrade complete"}]"#;

    #[test]
    fn history_gives_the_latest_revision_with_its_chart() {
        let id = ReleaseId::new("kube-system", "cilium");
        assert_eq!(
            history(HISTORY, &id).unwrap(),
            Some(DeployedRelease {
                id: id.clone(),
                revision: 4,
                status: "deployed".into(),
                chart: "cilium".into(),
                version: "1.18.2".into(),
                app_version: "1.18.2".into(),
                updated: time("2025-10-02 10:01:02.5 +0000 UTC"),
            })
        );
        assert_eq!(history("[]", &id).unwrap(), None);
    }

    #[test]
    fn values_null_is_an_empty_object() {
        assert_eq!(values("null\n").unwrap(), serde_json::json!({}));
        assert_eq!(values(r#"{"a":1}"#).unwrap(), serde_json::json!({"a":1}));
        let err = values("[1]").unwrap_err();
        assert!(matches!(err, OutputError::NotAnObject(_)));
        assert_eq!(err.to_string(), "expected an object, got `[1]`");
    }
}
