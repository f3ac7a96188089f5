//! The file formats exactly as users write them (docs/design.md#file-formats). These types only
//! describe shape: unknown keys are rejected here, everything semantic is
//! checked in `validate`. `bootstrap schema` derives its JSON Schema from them.
//! A hook entry's shape, [`HookFile`], is generated from the list of hook
//! kinds in `crate::hooks`.

use std::collections::BTreeMap;

pub use super::spanned::Spanned;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::hooks::HookFile;
use crate::release::{CrdPolicy, Ownership};

pub type Values = Map<String, Value>;

/// `clusters/<cluster>/cluster.yaml`
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(title = "bootstrap cluster definition")]
pub struct ClusterFile {
    /// Must equal the directory name.
    #[schemars(with = "String")]
    pub name: Spanned<String>,
    /// kubeconfig context; default: `--context`, else the current context.
    pub context: Option<String>,
    /// Free variables for templates: `{{cluster.values.NAME}}`.
    #[serde(default)]
    pub values: Values,
    /// The releases this cluster gets (names or namespace/name); default: all.
    #[schemars(with = "Option<Vec<String>>")]
    pub releases: Option<Vec<Spanned<String>>>,
    /// Per-release changes for this cluster, keyed by release name or namespace/name.
    #[serde(default)]
    pub overrides: BTreeMap<String, OverrideFile>,
    /// Where this cluster's GitOps tree starts (used by `check`).
    pub flux: Option<FluxFile>,
    /// Install the admission policy that keeps Flux off bootstrap releases (default true).
    pub guard: Option<bool>,
    /// Lint settings (docs/design.md#lints).
    #[serde(default)]
    pub lints: LintsFile,
    /// Settings every release of this cluster takes unless it sets its own
    /// (docs/design.md#defaults); over those of `releases/defaults.yaml`.
    #[serde(default)]
    pub defaults: DefaultsFile,
}

/// `defaults:` in cluster.yaml, and `releases/defaults.yaml`: what a release
/// takes when it does not set the key itself (helmfile's `helmDefaults`).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(title = "bootstrap release defaults")]
pub struct DefaultsFile {
    /// Bounds each release's helm operation plus hooks, e.g. `5m`.
    #[schemars(with = "Option<String>")]
    pub timeout: Option<Spanned<String>>,
    /// Also wait for every workload in each release's manifest.
    pub wait: Option<bool>,
    pub crds: Option<CrdPolicy>,
    /// Helm flags for each release's install.
    #[serde(default)]
    pub helm: HelmFile,
}

/// Helm flags of an install (`helm upgrade --install`) that a release may
/// set, as helmfile's `helmDefaults` spell them; docs/design.md#defaults.
#[derive(Debug, Default, Clone, Deserialize, JsonSchema, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HelmFile {
    /// `--cleanup-on-fail`: delete resources a failed upgrade created.
    pub cleanup_on_fail: Option<bool>,
    /// `--force` (Helm 3), `--force-replace` (Helm 4): replace resources that cannot be patched.
    pub force: Option<bool>,
    /// `--history-max N`: revisions helm keeps per release (0: no limit).
    pub history_max: Option<u32>,
    /// `--disable-openapi-validation`.
    #[serde(rename = "disableOpenAPIValidation")]
    pub disable_openapi_validation: Option<bool>,
    /// `--server-side=true|false` (Helm 4 only): server-side apply of the manifests.
    pub server_side: Option<bool>,
    /// `--force-conflicts` (Helm 4 only): take fields other managers own with server-side apply.
    pub force_conflicts: Option<bool>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LintsFile {
    /// Finding codes whose error-level findings do not stop `apply`, `check`
    /// or `plan` on this cluster; they are still reported, marked ignored. A
    /// code alone ignores it everywhere; `{code, release}` only for one
    /// release (the only form the Flux scan's codes take).
    #[serde(default)]
    #[schemars(with = "Vec<IgnoreEntry>")]
    pub ignore: Vec<Spanned<IgnoreEntry>>,
}

/// One entry of `lints.ignore` (docs/design.md#lints).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum IgnoreEntry {
    /// `- cilium-kpr-without-api-host`: the code, for every release.
    Code(String),
    /// `- {code: flux-manages-bootstrap-release, release: kube-system/cilium}`.
    Release(ReleaseIgnore),
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseIgnore {
    pub code: String,
    /// `namespace/name`, or a name that is unique among the releases.
    pub release: String,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OverrideFile {
    /// Merged over every values file; string leaves are templates.
    pub values: Option<Values>,
    /// Relative to the cluster directory; plain YAML unless the name ends in `.hbs` (a template).
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub values_files: Vec<Spanned<String>>,
    /// Replaces the release's timeout on this cluster.
    #[schemars(with = "Option<String>")]
    pub timeout: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FluxFile {
    /// The directory Flux's GitRepository points at, relative to the config root.
    #[serde(default = "dot")]
    pub root: String,
    /// The path Flux's root Kustomization reconciles, relative to `root`.
    pub entrypoint: String,
}

fn dot() -> String {
    ".".to_string()
}

/// One document of `releases/*.yaml`.
#[derive(Debug, Deserialize, JsonSchema, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(title = "bootstrap release definition")]
pub struct ReleaseFile {
    #[schemars(with = "String")]
    pub name: Spanned<String>,
    #[schemars(with = "String")]
    pub namespace: Spanned<String>,
    #[schemars(with = "Option<ChartFile>")]
    pub chart: Option<Spanned<ChartFile>>,
    /// Take chart, version and values from a Flux HelmRelease in the GitOps
    /// tree (docs/design.md#from-a-flux-helmrelease), in place of `chart`.
    #[schemars(with = "Option<FromFile>")]
    pub from: Option<Spanned<FromFile>>,
    /// URLs or paths of manifests applied with server-side apply, in place of `chart`.
    #[schemars(with = "Option<Vec<String>>")]
    pub manifests: Option<Vec<Spanned<String>>>,
    /// Release names, or namespace/name where a name is ambiguous.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub needs: Vec<Spanned<String>>,
    /// Labels for `--selector/-l` (besides `name`, `namespace` and `chart`, which every release has).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Default: `defaults.crds`, else `bootstrap`.
    pub crds: Option<CrdPolicy>,
    /// Inline values; every string leaf is a handlebars template.
    pub values: Option<Values>,
    /// Relative to the release file; plain YAML unless the name ends in `.hbs` (a template).
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub values_files: Vec<Spanned<String>>,
    /// Merged last, only for the CRD-phase render (e.g. `crds.enabled: true`).
    pub crd_values: Option<Values>,
    /// Bounds the helm operation plus hooks, e.g. `5m`.
    #[schemars(with = "Option<String>")]
    pub timeout: Option<Spanned<String>>,
    /// Also wait for every workload in the release's manifest (default: `defaults.wait`, else false).
    pub wait: Option<bool>,
    /// Helm flags of the install; each unset key comes from `defaults.helm`.
    #[serde(default)]
    pub helm: HelmFile,
    #[serde(default)]
    pub hooks: HooksFile,
    #[serde(default)]
    pub ownership: Ownership,
    /// What `bootstrap import helmfile` could not convert in this release
    /// (docs/design.md#import): each entry is a validation error until a
    /// person has done what it says and removed it.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub todo: Vec<Spanned<String>>,
}

/// `from:` of a release.
#[derive(Debug, Clone, Deserialize, JsonSchema, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FromFile {
    /// A file relative to the cluster's `flux.root`
    /// (`kubernetes/apps/kube-system/cilium/app/helmrelease.yaml`), or the
    /// `namespace/name` of a HelmRelease the scan from `flux.entrypoint` reaches.
    pub helm_release: String,
}

#[derive(Debug, Deserialize, JsonSchema, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ChartFile {
    /// Classic chart repository URL (passed as `helm --repo`), with `name`.
    pub repo: Option<String>,
    /// Chart name in `repo`.
    pub name: Option<String>,
    /// `oci://registry/path/chart`.
    pub oci: Option<String>,
    /// A local chart directory, relative to the release file.
    pub path: Option<String>,
    /// Exact chart version; required for `repo` and `oci` charts.
    pub version: Option<String>,
}

#[derive(Debug, Default, Deserialize, JsonSchema, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HooksFile {
    #[serde(default)]
    #[schemars(with = "Vec<HookFile>")]
    pub presync: Vec<Spanned<HookFile>>,
    #[serde(default)]
    #[schemars(with = "Vec<HookFile>")]
    pub postsync: Vec<Spanned<HookFile>>,
}
