//! Steps the real tiers share (docs/design.md#test-map): how a command runs
//! against a real control plane, and what `status` says of each release.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Sets what `cmd` (bootstrap, helm or kubectl) reads to reach a real
/// control plane through `kubeconfig`, with helm's, kubectl's and the chart
/// cache's files under `home`, never the user's; unsets what would point
/// helm elsewhere or change how bootstrap reports (`CI`).
pub(crate) fn isolate<'a>(cmd: &'a mut Command, kubeconfig: &Path, home: &Path) -> &'a mut Command {
    cmd.env("KUBECONFIG", kubeconfig)
        .env("HELM_CACHE_HOME", home.join("helm/cache"))
        .env("HELM_CONFIG_HOME", home.join("helm/config"))
        .env("HELM_DATA_HOME", home.join("helm/data"))
        .env("BOOTSTRAP_CACHE_DIR", home.join("charts"))
        .env("KUBECACHEDIR", home.join("kube"))
        .env("NO_COLOR", "1")
        .env_remove("HELM_NAMESPACE")
        .env_remove("HELM_DRIVER")
        .env_remove("HELM_KUBECONTEXT")
        .env_remove("BOOTSTRAP_HELMFILE")
        .env_remove("CI")
}

/// One release as `status -o json` reports it: its helm status, its owner,
/// its drift and whether it is ready.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Row {
    pub status: String,
    pub owner: String,
    pub drift: String,
    pub ready: bool,
}

impl Row {
    /// Deployed by bootstrap, up to date and ready: a release as a
    /// successful apply leaves it.
    pub(crate) fn applied() -> Row {
        Row {
            status: "deployed".into(),
            owner: "bootstrap".into(),
            drift: "up to date".into(),
            ready: true,
        }
    }
}

/// `status -o json`'s releases by name (`namespace/name`).
pub(crate) fn status_rows(stdout: &str) -> BTreeMap<String, Row> {
    let status: Value = serde_json::from_str(stdout).expect("status JSON");
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    status["releases"]
        .as_array()
        .expect("status releases")
        .iter()
        .map(|r| {
            (
                text(&r["release"]),
                Row {
                    status: text(&r["deployed"]["status"]),
                    owner: text(&r["owner"]),
                    drift: text(&r["drift"]),
                    ready: r["ready"]["ok"].as_bool().unwrap_or(false),
                },
            )
        })
        .collect()
}
