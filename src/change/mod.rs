//! What `apply` would change in one release: chart and version, the values
//! as key paths, and the rendered manifests against the deployed release
//! (docs/design.md#diff). `diff` prints it whole; `apply --dry-run` prints
//! its summary ([`ReleaseChange::describe`]).

pub mod manifests;
pub mod values;

use std::path::Path;

use serde::Serialize;
use serde_json::{Value, json};

use crate::helm::redact::Redactor;
use crate::helm::{DeployedRelease, Helm, HelmError, TemplateRequest};
use crate::kube::KubeTarget;
use crate::release::{Release, ReleaseId};

pub use manifests::ObjectChange;
pub use values::{Op, ValueChange};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Install,
    Upgrade,
    Unchanged,
}

/// A chart and its version, as helm names them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChartVersion {
    pub chart: String,
    pub version: String,
}

impl std::fmt::Display for ChartVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.chart, self.version)
    }
}

/// Everything `apply` would change in one release.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReleaseChange {
    pub release: ReleaseId,
    pub change: Kind,
    /// What is deployed (`None`: not installed).
    pub deployed: Option<ChartVersion>,
    pub desired: ChartVersion,
    /// Why `apply` would upgrade besides chart, values and manifests (helm
    /// status not `deployed`, the ledger).
    pub reasons: Vec<String>,
    pub values: Vec<ValueChange>,
    pub objects: Vec<ObjectChange>,
}

/// The deployed release as helm keeps it.
pub struct Deployed<'a> {
    pub release: &'a DeployedRelease,
    /// `helm get values` (user-supplied).
    pub values: &'a Value,
    /// `helm get manifest`.
    pub manifest: &'a [Value],
}

impl ReleaseChange {
    /// Compares one release: `rendered` is what helm renders from its values
    /// now, `deployed` what helm has (`None`: not installed); `reasons`
    /// are the other reasons `apply` would upgrade.
    pub fn new(
        release: &Release,
        deployed: Option<Deployed<'_>>,
        rendered: &[Value],
        reasons: Vec<String>,
    ) -> ReleaseChange {
        let empty = json!({});
        let deployed_values = deployed.as_ref().map_or(&empty, |d| d.values);
        let secrets = &release.secrets;
        let redactors = [
            Redactor::new(&[], Some((deployed_values, secrets))),
            Redactor::new(&[], Some((&release.values, secrets))),
        ];
        let values = values::diff(deployed_values, &release.values, secrets);
        let objects = manifests::diff(
            deployed.as_ref().map_or(&[][..], |d| d.manifest),
            rendered,
            &redactors,
        );
        let desired = ChartVersion {
            chart: release.chart_label(),
            version: release.version_label(),
        };
        let mut reasons = reasons;
        if let Some(d) = &deployed
            && values.is_empty()
            && crate::values::digest(d.values) != crate::values::digest(&release.values)
        {
            // `a: {}` against no `a`: no leaf differs, but helm stores what it is given.
            reasons.push("the values differ only in empty maps".into());
        }
        let deployed = deployed.map(|d| ChartVersion {
            chart: d.release.chart.clone(),
            version: d.release.version.clone(),
        });
        let change = match &deployed {
            None => Kind::Install,
            Some(d)
                if *d == desired
                    && values.is_empty()
                    && objects.is_empty()
                    && reasons.is_empty() =>
            {
                Kind::Unchanged
            }
            Some(_) => Kind::Upgrade,
        };
        ReleaseChange {
            release: release.id.clone(),
            change,
            deployed,
            desired,
            reasons,
            values,
            objects,
        }
    }

    /// What would change, in a few words: `cilium 1.18.1 → 1.18.2, 2 values
    /// changed, 3 objects changed` (the `message` of `apply --dry-run`).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        match (&self.deployed, self.change) {
            (_, Kind::Unchanged) if self.reasons.is_empty() => return "unchanged".into(),
            (_, Kind::Unchanged) => return self.reasons.join(", "),
            (None, _) => {
                parts.push(format!("install {}", self.desired));
                if !self.values.is_empty() {
                    parts.push(crate::duration::count(self.values.len(), "value"));
                }
                parts.push(crate::duration::count(self.objects.len(), "object"));
                return parts.join(", ");
            }
            (Some(d), _) if d.chart != self.desired.chart => {
                parts.push(format!("{d} → {}", self.desired));
            }
            (Some(d), _) if d.version != self.desired.version => {
                parts.push(format!(
                    "{} {} → {}",
                    d.chart, d.version, self.desired.version
                ));
            }
            _ => {}
        }
        if !self.values.is_empty() {
            parts.push(format!(
                "{} changed",
                crate::duration::count(self.values.len(), "value")
            ));
        }
        for (op, word) in [
            (Op::Add, "added"),
            (Op::Change, "changed"),
            (Op::Remove, "removed"),
        ] {
            let n = self.objects.iter().filter(|o| o.op == op).count();
            if n > 0 {
                parts.push(format!("{} {word}", crate::duration::count(n, "object")));
            }
        }
        parts.extend(self.reasons.iter().cloned());
        parts.join(", ")
    }

    /// `+ ns/name: install …`, `~ ns/name: …`, `  ns/name: unchanged`.
    pub fn summary_line(&self) -> String {
        let mark = match self.change {
            Kind::Install => '+',
            Kind::Upgrade => '~',
            Kind::Unchanged => ' ',
        };
        format!("{mark} {}: {}", self.release, self.describe())
    }
}

/// Why a release could not be compared.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("cannot read the deployed release from helm: {0}")]
    Deployed(HelmError),
    #[error("helm could not render the chart: {0}")]
    Render(HelmError),
    #[error("{0} printed invalid YAML: {1}")]
    Yaml(&'static str, String),
}

/// Reads what helm has deployed (values, manifest) and renders the chart as
/// `apply` would install it now (`api_versions`: what the CRD phase
/// serves), then compares. `deployed` is the release as `helm list` showed
/// it; `reasons` the other reasons apply would upgrade.
pub async fn compare<H: Helm>(
    helm: &H,
    target: &KubeTarget,
    release: &Release,
    deployed: Option<&DeployedRelease>,
    api_versions: &[String],
    reasons: Vec<String>,
) -> Result<ReleaseChange, CompareError> {
    let rendered = match release.chart() {
        Some(chart) => {
            let text = helm
                .template(&TemplateRequest {
                    release: &release.id,
                    chart,
                    values: &release.values,
                    secrets: &release.secrets,
                    include_crds: false,
                    api_versions,
                })
                .await
                .map_err(CompareError::Render)?;
            documents(&text, "helm template")?
        }
        None => Vec::new(),
    };
    let Some(deployed) = deployed else {
        return Ok(ReleaseChange::new(release, None, &rendered, reasons));
    };
    let values = helm
        .get_values(target, &release.id)
        .await
        .map_err(CompareError::Deployed)?;
    let manifest = helm
        .get_manifest(target, &release.id)
        .await
        .map_err(CompareError::Deployed)?;
    let manifest = documents(&manifest, "helm get manifest")?;
    Ok(ReleaseChange::new(
        release,
        Some(Deployed {
            release: deployed,
            values: &values,
            manifest: &manifest,
        }),
        &rendered,
        reasons,
    ))
}

fn documents(text: &str, what: &'static str) -> Result<Vec<Value>, CompareError> {
    crate::yaml::manifests(text, Path::new(what))
        .map_err(|e| CompareError::Yaml(what, e.to_string()))
}

#[cfg(test)]
mod tests;
