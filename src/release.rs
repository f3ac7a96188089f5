//! The domain model after loading, validation and rendering: what a release is
//! once every template has been rendered and every `needs` resolved.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::values::stack::ValuesStack;

/// Hooks are their own domain module (`crate::hooks`), one submodule per kind;
/// re-exported because a release holds them.
pub use crate::hooks::{Hook, HookAction, ObjectRef};

/// A release is identified by namespace and name, as Helm identifies it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReleaseId {
    pub namespace: String,
    pub name: String,
}

impl ReleaseId {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ReleaseId {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ReleaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

impl Serialize for ReleaseId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChartSource {
    /// A classic repository, passed to helm with `--repo` (no `helm repo add`).
    Repo {
        url: String,
        name: String,
    },
    Oci(String),
    /// Absolute path of a local chart directory.
    Path(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chart {
    pub source: ChartSource,
    pub version: Option<String>,
}

impl Chart {
    /// The chart's name as Helm records it (`cilium` for `cilium-1.18.2`).
    pub fn name(&self) -> String {
        match &self.source {
            ChartSource::Repo { name, .. } => name.clone(),
            ChartSource::Oci(url) => url.rsplit('/').next().unwrap_or(url).to_string(),
            ChartSource::Path(path) => path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        }
    }
}

/// What happens to the CRDs a chart carries.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema, Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum CrdPolicy {
    /// Applied in the CRD phase; the release installs with `--skip-crds`.
    #[default]
    Bootstrap,
    /// Applied in the CRD phase; the release itself is never installed.
    Only,
    /// Left to helm.
    Chart,
    /// Ignored.
    None,
}

/// Who owns a release once it is installed (docs/design.md#ownership).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema, Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Ownership {
    /// Exclusive: bootstrap installs and upgrades it; Flux must never manage it.
    #[default]
    Bootstrap,
    /// Installed once by bootstrap, then adopted by the Flux HelmRelease that
    /// manages it; once adopted bootstrap never upgrades or uninstalls it.
    Handover,
}

impl Ownership {
    /// The ledger's `policy` and the `bootstrap.dev/policy` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Ownership::Bootstrap => "bootstrap",
            Ownership::Handover => "handover",
        }
    }
}

/// The Flux HelmRelease a release takes its chart and values from (`from:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FromHelmRelease {
    /// `namespace/name` of the HelmRelease.
    pub helm_release: String,
    /// Its file, relative to `flux.root`.
    pub file: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Chart(Chart),
    /// URLs or absolute paths applied with server-side apply.
    Manifests(Vec<String>),
}

/// A release's hooks, each list run in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hooks {
    pub presync: Vec<Hook>,
    pub postsync: Vec<Hook>,
}

#[derive(Debug, Clone)]
pub struct Release {
    pub id: ReleaseId,
    /// Where it is defined, relative to the config root.
    pub file: PathBuf,
    pub line: u64,
    pub source: Source,
    pub needs: Vec<ReleaseId>,
    pub crds: CrdPolicy,
    /// Its values, layer by layer (docs/design.md#values-merge-order):
    /// [`Release::values`] and [`Release::crd_values`] are its merges.
    pub stack: ValuesStack,
    /// The HelmRelease of `from:`.
    pub from: Option<FromHelmRelease>,
    pub timeout: Option<Duration>,
    pub wait: bool,
    pub hooks: Hooks,
    pub ownership: Ownership,
    /// Flags of the helm install (`helm:` and `defaults.helm`).
    pub helm: HelmFlags,
    /// `labels:` of the release file, for `--selector`.
    pub labels: std::collections::BTreeMap<String, String>,
}

/// Helm flags a release's install adds (docs/design.md#defaults); which
/// helm flag each becomes, per helm version, is `helm::args`'s business.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HelmFlags {
    pub cleanup_on_fail: bool,
    pub force: bool,
    pub history_max: Option<u32>,
    pub disable_openapi_validation: bool,
    pub server_side: Option<bool>,
    pub force_conflicts: bool,
    /// Where each key that is set came from: (`helm.KEY`, file as shown).
    pub origin: Vec<(String, PathBuf)>,
}

impl Release {
    /// `file:line` of the chart's `version:` in the release's definition
    /// (its file read again under `root`, the config root), else of the
    /// release itself: where to fix a version helm cannot find.
    pub fn version_at(&self, root: &std::path::Path) -> String {
        let shown = self.file.display();
        let line = std::fs::read_to_string(root.join(&self.file))
            .ok()
            .and_then(|text| {
                // The release's document: from its line to the next `---`.
                let start = usize::try_from(self.line).ok()?.max(1);
                let end = text
                    .lines()
                    .enumerate()
                    .skip(start)
                    .find(|(_, l)| l.starts_with("---"))
                    .map_or(usize::MAX, |(i, _)| i);
                let keys = ["chart", "version"];
                let (matched, line) = crate::yaml::find_key(&text, &keys, (start, end));
                (matched == keys.len()).then_some(line)
            })
            .unwrap_or(self.line);
        format!("{shown}:{line}")
    }

    pub fn chart(&self) -> Option<&Chart> {
        match &self.source {
            Source::Chart(chart) => Some(chart),
            Source::Manifests(_) => None,
        }
    }

    /// Releases the apply phase installs (CRD-only releases are not).
    pub fn is_installed(&self) -> bool {
        self.crds != CrdPolicy::Only && matches!(self.source, Source::Chart(_))
    }

    /// Releases that contribute CRDs to the CRD phase.
    pub fn has_crd_phase(&self) -> bool {
        match &self.source {
            Source::Chart(_) => matches!(self.crds, CrdPolicy::Bootstrap | CrdPolicy::Only),
            Source::Manifests(_) => self.crds != CrdPolicy::None,
        }
    }

    /// The digest shown in `plan`, `template` and `status` output: SHA-256
    /// of the values with secret-looking values redacted, so output that is
    /// stored or shared gives no way to test guesses of a secret. The ledger
    /// keeps its own keyed digest of the whole values (docs/design.md#ledger).
    pub fn values_digest(&self) -> String {
        crate::values::digest(&self.redacted(self.values()))
    }

    /// The rendered and merged values it installs with.
    pub fn values(&self) -> &Value {
        self.stack.install()
    }

    /// The values of its CRD-phase render: [`Release::values`] with
    /// `crdValues` merged.
    pub fn crd_values(&self) -> &Value {
        self.stack.crd()
    }

    /// Where its values hold the leaves of sops-encrypted values files:
    /// redacted wherever values are shown.
    pub fn secrets(&self) -> &crate::values::SecretPaths {
        self.stack.secrets()
    }

    /// `values` (or `crd_values`) as shown to people: secret-looking keys
    /// and the leaves of sops-encrypted files redacted (docs/design.md#secrets).
    pub fn redacted(&self, values: &serde_json::Value) -> serde_json::Value {
        crate::values::redact_with(values, self.secrets())
    }

    /// What `--selector` matches: `labels:`, plus `name`, `namespace` and
    /// `chart` unless `labels:` sets them (docs/design.md#selection).
    pub fn selector_labels(&self) -> std::collections::BTreeMap<String, String> {
        let mut labels = self.labels.clone();
        for (key, value) in [
            ("name", self.id.name.clone()),
            ("namespace", self.id.namespace.clone()),
            ("chart", self.chart_label()),
        ] {
            labels.entry(key.to_string()).or_insert(value);
        }
        labels
    }

    pub fn chart_label(&self) -> String {
        match &self.source {
            Source::Chart(chart) => chart.name(),
            Source::Manifests(_) => "manifests".to_string(),
        }
    }

    pub fn version_label(&self) -> String {
        match &self.source {
            Source::Chart(chart) => chart.version.clone().unwrap_or_default(),
            Source::Manifests(_) => String::new(),
        }
    }
}

#[cfg(test)]
impl Release {
    /// A minimal OCI release in namespace `ns` for unit tests.
    pub(crate) fn fake(name: &str, needs: &[&str], crds: CrdPolicy) -> Release {
        Release {
            id: ReleaseId::new("ns", name),
            file: "releases/r.yaml".into(),
            line: 1,
            source: Source::Chart(Chart {
                source: ChartSource::Oci(format!("oci://x/{name}")),
                version: Some("1.0.0".into()),
            }),
            needs: needs.iter().map(|n| ReleaseId::new("ns", *n)).collect(),
            crds,
            stack: ValuesStack::default(),
            from: None,
            timeout: None,
            wait: false,
            hooks: Hooks::default(),
            ownership: Ownership::Bootstrap,
            helm: HelmFlags::default(),
            labels: Default::default(),
        }
    }
}

/// Bounds a release step (hooks, helm, waits) when the release sets no
/// `timeout`. `--timeout` bounds the whole run, not a step.
pub const DEFAULT_RELEASE_TIMEOUT: Duration = Duration::from_secs(600);

impl Release {
    /// How long one step of this release (apply: hooks, helm and waits;
    /// destroy: the uninstall) may take: the one place the default lives.
    pub fn budget(&self) -> Duration {
        self.timeout.unwrap_or(DEFAULT_RELEASE_TIMEOUT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_at_finds_the_charts_version_in_the_releases_own_document() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("releases")).unwrap();
        std::fs::write(
            root.path().join("releases/r.yaml"),
            "name: a\nchart:\n  name: a\n  version: 1.0.0\n---\nname: b\nvalues:\n  version: 9\nchart:\n  repo: https://x\n  # version: 0.1\n  version: 2.0.0\n---\nname: c\nchart: { name: c, version: 3.0.0 }\n",
        )
        .unwrap();
        let at = |name: &str, line: u64| {
            let mut release = Release::fake(name, &[], CrdPolicy::Bootstrap);
            release.line = line;
            release.version_at(root.path())
        };
        assert_eq!(at("a", 1), "releases/r.yaml:4");
        // Not `values.version`, not a comment: the chart's.
        assert_eq!(at("b", 6), "releases/r.yaml:12");
        assert_eq!(at("c", 14), "releases/r.yaml:15");
    }
}
