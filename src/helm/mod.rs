//! Helm behind a domain trait (what bootstrap asks of helm) with a process
//! runner under it. Typed arguments in, helm's JSON output (`-o json`) out.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::kube::KubeTarget;
use crate::release::{Chart, ReleaseId};
use crate::stop::StopSignal;

pub mod args;
pub mod binary;
pub mod cache;
pub mod flags;
pub mod output;
pub mod process;
pub mod redact;
pub mod repos;

pub use binary::HelmCli;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelmVersion {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    /// As helm printed it, e.g. `v3.19.0`.
    pub raw: String,
}

#[derive(Debug, Clone)]
pub struct InstallRequest<'a> {
    pub release: &'a ReleaseId,
    pub chart: &'a Chart,
    /// Written to a temp file readable only by the user, removed afterwards.
    pub values: &'a Value,
    /// Where `values` holds secrets beyond secret-looking keys (sops files):
    /// scrubbed from what a failure reports.
    pub secrets: &'a crate::values::SecretPaths,
    pub skip_crds: bool,
    /// Passed as `--timeout` so helm's own waits stop in time.
    pub timeout: Duration,
    /// Ownership labels on the Helm release (`--labels`, Helm >= 3.13).
    pub labels: &'a BTreeMap<String, String>,
    /// The release's `helm:` flags (docs/design.md#defaults).
    pub flags: &'a crate::release::HelmFlags,
}

#[derive(Debug, Clone)]
pub struct TemplateRequest<'a> {
    pub release: &'a ReleaseId,
    pub chart: &'a Chart,
    pub values: &'a Value,
    /// As [`InstallRequest::secrets`].
    pub secrets: &'a crate::values::SecretPaths,
    pub include_crds: bool,
    /// `--api-versions`: what `.Capabilities.APIVersions` holds beyond
    /// helm's built-in defaults (the API versions the CRD phase serves).
    pub api_versions: &'a [String],
}

/// A release as helm reports it (`helm list -o json` / `helm status -o json`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeployedRelease {
    pub id: ReleaseId,
    pub revision: u64,
    /// deployed, failed, pending-install, pending-upgrade, pending-rollback, uninstalling, superseded
    pub status: String,
    pub chart: String,
    pub version: String,
    pub app_version: String,
    /// When this revision's operation started (helm's `updated`); `None`
    /// when helm did not say or it could not be read.
    pub updated: Option<std::time::SystemTime>,
}

impl DeployedRelease {
    pub fn is_pending(&self) -> bool {
        self.status.starts_with("pending-")
    }

    /// How to recover a release left `pending-*` by an operation that never
    /// finished: a first install has no revision to roll back to, so it is
    /// uninstalled; anything later is rolled back to the revision before.
    pub fn recovery(&self) -> String {
        recovery(
            &self.id,
            self.status == "pending-install" || self.revision <= 1,
        )
    }
}

/// [`DeployedRelease::recovery`] when only the operation is known (`install`:
/// a first install was interrupted).
pub fn recovery(id: &ReleaseId, install: bool) -> String {
    if install {
        format!(
            "`helm uninstall {} -n {}` (a first install that never finished has nothing to roll back to), then `bootstrap apply` again",
            id.name, id.namespace
        )
    } else {
        format!(
            "`helm rollback {} -n {}` (back to the last finished revision), then `bootstrap apply` again",
            id.name, id.namespace
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HelmError {
    #[error("helm was not found at `{path}`; install helm 3.13 or newer, or pass --helm PATH")]
    NotFound { path: String },
    #[error("helm {found} is too old; bootstrap needs helm 3.13 or newer (for --labels)")]
    TooOld { found: String },
    #[error("cannot understand `helm version` output `{output}`")]
    UnknownVersion { output: String },
    /// helm ran and failed. argv and stderr are already redacted.
    #[error("`{}` exited with {}: {}", .argv.join(" "), status.map(|s| s.to_string()).unwrap_or_else(|| "a signal".into()), stderr.trim())]
    Failed {
        argv: Vec<String>,
        status: Option<i32>,
        stderr: String,
    },
    #[error("`{}` was stopped: {reason}", .argv.join(" "))]
    Stopped { argv: Vec<String>, reason: String },
    /// The run was being stopped before helm started; nothing was changed.
    #[error("`{}` was not started: the run is being stopped", .argv.join(" "))]
    NotStarted { argv: Vec<String> },
    /// helm ran past its hard limit (its own `--timeout` plus a margin) and was
    /// stopped; a failure of the release, not an interrupt.
    #[error("`{}` did not finish within {} and was stopped", .argv.join(" "), crate::duration::span(*.after))]
    TimedOut { argv: Vec<String>, after: Duration },
    #[error("cannot read helm's output of `{}`: {message}", .argv.join(" "))]
    BadOutput { argv: Vec<String>, message: String },
    #[error("cannot run helm: {0}")]
    Io(String),
}

/// What bootstrap asks of helm. The process implementation is
/// [`binary::HelmCli`]; tests use a fake helm binary behind the same runner.
pub trait Helm: Send + Sync {
    /// Detects the version; fails with NotFound / TooOld before anything runs.
    fn version(&self) -> impl Future<Output = Result<HelmVersion, HelmError>> + Send;
    fn upgrade_install(
        &self,
        target: &KubeTarget,
        request: &InstallRequest<'_>,
        stop: StopSignal,
    ) -> impl Future<Output = Result<(), HelmError>> + Send;
    /// Rendered manifests (multi-document YAML).
    fn template(
        &self,
        request: &TemplateRequest<'_>,
    ) -> impl Future<Output = Result<String, HelmError>> + Send;
    /// `None` when the release does not exist.
    fn status(
        &self,
        target: &KubeTarget,
        release: &ReleaseId,
    ) -> impl Future<Output = Result<Option<DeployedRelease>, HelmError>> + Send;
    /// Every release in every namespace, in every state.
    fn list(
        &self,
        target: &KubeTarget,
    ) -> impl Future<Output = Result<Vec<DeployedRelease>, HelmError>> + Send;
    /// The user-supplied values of the deployed release.
    fn get_values(
        &self,
        target: &KubeTarget,
        release: &ReleaseId,
    ) -> impl Future<Output = Result<Value, HelmError>> + Send;
    /// The rendered manifest of the deployed release.
    fn get_manifest(
        &self,
        target: &KubeTarget,
        release: &ReleaseId,
    ) -> impl Future<Output = Result<String, HelmError>> + Send;
    fn uninstall(
        &self,
        target: &KubeTarget,
        release: &ReleaseId,
        timeout: Duration,
    ) -> impl Future<Output = Result<(), HelmError>> + Send;
    /// `helm rollback`: the release back to the revision before its latest
    /// (how a release left `pending-upgrade` is recovered).
    fn rollback(
        &self,
        target: &KubeTarget,
        release: &ReleaseId,
        timeout: Duration,
    ) -> impl Future<Output = Result<(), HelmError>> + Send;
    /// Fetches `charts` ahead of their use, several at a time (with the
    /// chart cache, docs/design.md#chart-cache: each remote chart pulled
    /// once per run, or taken from the cache); done when every one is
    /// fetched or failed. A command that uses a chart waits only for that
    /// chart; a failed fetch is reported by the command that uses it.
    fn prefetch(&self, charts: Vec<Chart>) -> impl Future<Output = ()> + Send;
    /// Where the helm layer's warnings go (a damaged cache entry pulled
    /// again); stderr when `None`, as before the first call.
    fn on_warning(&self, sink: Option<Warn>);
}

/// Receives a warning, one line without the `warning:` prefix.
pub type Warn = std::sync::Arc<dyn Fn(String) + Send + Sync>;
