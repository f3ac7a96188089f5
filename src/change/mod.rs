//! What `apply` would change in one release: chart and version, the values
//! as key paths, and the rendered manifests against the deployed release
//! (docs/design.md#diff). `diff` prints it whole; `apply --dry-run` prints
//! its summary ([`ReleaseChange::describe`]).

pub(crate) mod manifests;
pub(crate) mod values;

use std::path::Path;

use serde::Serialize;
use serde_json::{Value, json};

use crate::helm::redact::Redactor;
use crate::helm::{DeployedRelease, Helm, HelmError, TemplateRequest};
use crate::kube::KubeTarget;
use crate::release::{Release, ReleaseId};

pub(crate) use manifests::ObjectChange;
pub(crate) use values::{Op, ValueChange};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Kind {
    Install,
    Upgrade,
    Unchanged,
}

/// A chart and its version, as helm names them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChartVersion {
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
#[serde(rename_all = "camelCase")]
pub(crate) struct ReleaseChange {
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
    /// Objects the chart renders differently each time from the same values
    /// (generated certificates, random passwords), by label, when they were
    /// the only difference: not a change, since `apply` would not upgrade
    /// the release (see [`compare`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub regenerated: Vec<String>,
}

/// The deployed release as helm keeps it.
pub(crate) struct Deployed<'a> {
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
    pub(crate) fn new(
        release: &Release,
        deployed: Option<Deployed<'_>>,
        rendered: &[Value],
        reasons: Vec<String>,
    ) -> ReleaseChange {
        let empty = json!({});
        let deployed_values = deployed.as_ref().map_or(&empty, |d| d.values);
        let secrets = release.secrets();
        let redactors = [
            Redactor::new(&[], Some((deployed_values, secrets))),
            Redactor::new(&[], Some((release.values(), secrets))),
        ];
        let values = values::diff(deployed_values, release.values(), secrets);
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
            && crate::values::digest(d.values) != crate::values::digest(release.values())
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
            regenerated: Vec::new(),
        }
    }

    /// An upgrade only because objects differ: same chart and version, same
    /// values, no other reason, and every object one that exists on both
    /// sides.
    fn only_objects_differ(&self) -> bool {
        self.change == Kind::Upgrade
            && self.deployed.as_ref() == Some(&self.desired)
            && self.values.is_empty()
            && self.reasons.is_empty()
            && self.objects.iter().all(|o| o.op == Op::Change)
    }

    /// When every changed object is one of `unstable` (objects two renders
    /// of the same values disagree on), the release is unchanged: those
    /// objects move to [`ReleaseChange::regenerated`].
    fn set_aside_regenerated(&mut self, unstable: &[ObjectChange]) {
        let labels: Vec<String> = unstable.iter().map(ObjectChange::label).collect();
        if self.objects.iter().all(|o| labels.contains(&o.label())) {
            self.regenerated = self.objects.drain(..).map(|o| o.label()).collect();
            self.change = Kind::Unchanged;
        }
    }

    /// What would change, in a few words: `cilium 1.18.1 → 1.18.2, 2 values
    /// changed, 3 objects changed` (the `message` of `apply --dry-run`).
    pub(crate) fn describe(&self) -> String {
        let mut parts = Vec::new();
        match (&self.deployed, self.change) {
            (_, Kind::Unchanged) if self.reasons.is_empty() && self.regenerated.is_empty() => {
                return "unchanged".into();
            }
            (_, Kind::Unchanged) if self.reasons.is_empty() => {
                return format!(
                    "unchanged ({} the chart renders anew each time, not compared)",
                    crate::plural::count(self.regenerated.len(), "object")
                );
            }
            (_, Kind::Unchanged) => return self.reasons.join(", "),
            (None, _) => {
                parts.push(format!("install {}", self.desired));
                if !self.values.is_empty() {
                    parts.push(crate::plural::count(self.values.len(), "value"));
                }
                parts.push(crate::plural::count(self.objects.len(), "object"));
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
                crate::plural::count(self.values.len(), "value")
            ));
        }
        for (op, word) in [
            (Op::Add, "added"),
            (Op::Change, "changed"),
            (Op::Remove, "removed"),
        ] {
            let n = self.objects.iter().filter(|o| o.op == op).count();
            if n > 0 {
                parts.push(format!("{} {word}", crate::plural::count(n, "object")));
            }
        }
        parts.extend(self.reasons.iter().cloned());
        parts.join(", ")
    }

    /// `+ ns/name: install …`, `~ ns/name: …`, `  ns/name: unchanged`.
    pub(crate) fn summary_line(&self) -> String {
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
pub(crate) enum CompareError {
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
///
/// When only objects differ (same chart, version and values), the chart is
/// rendered a second time: objects the two renders disagree on are
/// generated anew by every render (a chart's `genCA`, `randAlphaNum`), and
/// when they are all that differs the release is unchanged, as `apply`
/// sees it (it would not upgrade).
pub(crate) async fn compare<H: Helm>(
    helm: &H,
    target: &KubeTarget,
    release: &Release,
    deployed: Option<&DeployedRelease>,
    api_versions: &[String],
    reasons: Vec<String>,
) -> Result<ReleaseChange, CompareError> {
    let rendered = render(helm, release, api_versions).await?;
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
    let mut change = ReleaseChange::new(
        release,
        Some(Deployed {
            release: deployed,
            values: &values,
            manifest: &manifest,
        }),
        &rendered,
        reasons,
    );
    if change.only_objects_differ() {
        let again = render(helm, release, api_versions).await?;
        change.set_aside_regenerated(&manifests::diff(&rendered, &again, &[]));
    }
    Ok(change)
}

/// The chart's manifests as `apply` would install them now (no hooks, no
/// CRDs); none for a release without a chart.
async fn render<H: Helm>(
    helm: &H,
    release: &Release,
    api_versions: &[String],
) -> Result<Vec<Value>, CompareError> {
    let Some(chart) = release.chart() else {
        return Ok(Vec::new());
    };
    let text = helm
        .template(&TemplateRequest {
            release: &release.id,
            chart,
            values: release.values(),
            secrets: release.secrets(),
            include_crds: false,
            api_versions,
        })
        .await
        .map_err(CompareError::Render)?;
    documents(&text, "helm template")
}

fn documents(text: &str, what: &'static str) -> Result<Vec<Value>, CompareError> {
    crate::yaml::manifests(text, Path::new(what))
        .map_err(|e| CompareError::Yaml(what, e.to_string()))
}

#[cfg(test)]
mod tests;
