//! Rendering a release's chart when it can be done here and now: helm runs
//! and the chart is at hand without the network (a local chart directory).
//! What `plan` (the CRDs a release carries) and `check` (the workloads a
//! release owns) learn from a render; neither ever fails because of one: a
//! chart not at hand, a missing helm or a failing render is an
//! [`Outcome`] they degrade from (docs/design.md#plan-json,
//! docs/design.md#health-checks-and-the-chart-render).

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use crate::helm::{Helm, HelmCli, TemplateRequest};
use crate::release::{Chart, ChartSource, Release, Source};

/// Renders at once at most this many charts (each is a helm process).
pub(crate) const PARALLEL_RENDERS: usize = 4;

/// How long one render may take before it is given up (helm is stopped).
pub(crate) const RENDER_TIMEOUT: Duration = Duration::from_secs(60);

/// Which render of a release, with which of its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// What the install renders: the release's values, no CRDs (as
    /// `template --manifests` without `--crds`, but with helm's default API
    /// versions: the CRD phase of the whole cluster is not rendered first).
    Install,
    /// The CRD-phase render ([`crate::crds::render`]): `crdValues` merged in,
    /// `--include-crds`.
    Crds,
}

/// What came of rendering one release.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// The documents helm rendered.
    Rendered(Vec<Value>),
    /// Not rendered, and no failure: why (the chart is not at hand, helm is
    /// not usable).
    Unavailable(String),
    /// helm ran and failed, or printed what is not YAML: the reason, one line.
    Failed(String),
}

/// Why a chart cannot be rendered without downloading it, if it cannot.
/// At hand: a local chart directory (or packaged chart) that exists.
pub(crate) fn at_hand(release: &Release) -> Result<&Chart, NotAtHand> {
    let Source::Chart(chart) = &release.source else {
        return Err(NotAtHand::NoChart);
    };
    match &chart.source {
        ChartSource::Path(path) if path.exists() => Ok(chart),
        ChartSource::Path(path) => Err(NotAtHand::Missing(path.clone())),
        ChartSource::Repo { .. } | ChartSource::Oci(_) => Err(NotAtHand::Remote),
    }
}

/// Why a release's chart cannot be rendered without downloading it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotAtHand {
    #[error("a `manifests:` release has no chart")]
    NoChart,
    #[error("the chart {} does not exist", .0.display())]
    Missing(std::path::PathBuf),
    #[error("the chart is not local: rendering it would download it")]
    Remote,
}

/// Renders each `(release, phase)` whose chart is [`at_hand`], at most
/// [`PARALLEL_RENDERS`] at a time; one [`Outcome`] per request, in order.
/// helm is asked for its version only when some chart is at hand, so a
/// config of remote charts (or no helm at all) costs nothing.
pub(crate) async fn render<H: Helm>(helm: &H, requests: &[(&Release, Phase)]) -> Vec<Outcome> {
    let charts: Vec<Result<&Chart, NotAtHand>> = requests.iter().map(|(r, _)| at_hand(r)).collect();
    if charts.iter().all(Result::is_err) {
        return charts
            .into_iter()
            .map(|c| Outcome::Unavailable(c.err().map(|e| e.to_string()).unwrap_or_default()))
            .collect();
    }
    if let Err(e) = helm.version().await {
        let why = format!("helm is not usable ({e})");
        return charts
            .into_iter()
            .map(|c| Outcome::Unavailable(c.err().map_or_else(|| why.clone(), |e| e.to_string())))
            .collect();
    }
    futures::stream::iter(requests.iter().zip(charts))
        .map(|((release, phase), chart)| async move {
            match chart {
                Ok(chart) => render_one(helm, release, chart, *phase).await,
                Err(why) => Outcome::Unavailable(why.to_string()),
            }
        })
        .buffered(PARALLEL_RENDERS)
        .collect()
        .await
}

async fn render_one<H: Helm>(helm: &H, release: &Release, chart: &Chart, phase: Phase) -> Outcome {
    let request = TemplateRequest {
        release: &release.id,
        chart,
        values: match phase {
            Phase::Install => release.values(),
            Phase::Crds => release.crd_values(),
        },
        secrets: release.secrets(),
        include_crds: phase == Phase::Crds,
        api_versions: &[],
    };
    let text = match helm.template(&request).await {
        Ok(text) => text,
        // helm's own words; the argv names only a temporary values file.
        Err(crate::helm::HelmError::Failed { stderr, .. }) => {
            return Outcome::Failed(format!("helm template failed: {}", first_line(&stderr)));
        }
        Err(e) => return Outcome::Failed(first_line(&e.to_string())),
    };
    match crate::yaml::manifests(&text, Path::new("helm template output")) {
        Ok(docs) => Outcome::Rendered(docs),
        Err(e) => Outcome::Failed(format!(
            "helm template printed invalid YAML: {}",
            first_line(&e.to_string())
        )),
    }
}

/// [`render`] from synchronous code (`plan`, `check`), through the helm at
/// `helm` (`None`: helm from PATH), each render stopped after
/// [`RENDER_TIMEOUT`].
pub(crate) fn render_blocking(helm: Option<&Path>, requests: &[(&Release, Phase)]) -> Vec<Outcome> {
    if requests.iter().all(|(r, _)| at_hand(r).is_err()) {
        // No runtime, no helm: nothing here can be rendered.
        return requests
            .iter()
            .map(|(r, _)| {
                Outcome::Unavailable(at_hand(r).err().map(|e| e.to_string()).unwrap_or_default())
            })
            .collect();
    }
    let helm = HelmCli::new(helm.map(Path::to_path_buf)).with_query_timeout(RENDER_TIMEOUT);
    let rendered = crate::run::block_on(async { Ok(render(&helm, requests).await) });
    rendered.unwrap_or_else(|e| {
        let why = format!("cannot render: {e}");
        requests
            .iter()
            .map(|_| Outcome::Unavailable(why.clone()))
            .collect()
    })
}

fn first_line(text: &str) -> String {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or_default().to_string();
    if lines.next().is_some() {
        format!("{first} …")
    } else {
        first
    }
}

/// The CRDs each CRD-phase release of `plan` carries, from its CRD-phase
/// render where one is possible here (what `plan` shows).
pub(crate) fn carried_crds(helm: Option<&Path>, plan: &crate::plan::Plan) -> crate::plan::Carried {
    use crate::plan::CarriedCrds;
    let releases: Vec<&Release> = plan.crd_releases().collect();
    let requests: Vec<(&Release, Phase)> = releases.iter().map(|r| (*r, Phase::Crds)).collect();
    let outcomes = render_blocking(helm, &requests);
    releases
        .into_iter()
        .zip(outcomes)
        .map(|(release, outcome)| {
            let carried = match outcome {
                Outcome::Rendered(docs) => {
                    let mut names: Vec<String> = crate::crds::carried(&release.id, docs)
                        .map(|crd| crd.name)
                        .collect();
                    names.sort();
                    names.dedup();
                    CarriedCrds::Rendered(names)
                }
                Outcome::Unavailable(why) => CarriedCrds::NotRendered { why, failed: false },
                Outcome::Failed(why) => CarriedCrds::NotRendered { why, failed: true },
            };
            (release.id.clone(), carried)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_its_first_non_empty_line_marked_when_cut() {
        assert_eq!(first_line("Error: boom\n"), "Error: boom");
        assert_eq!(
            first_line("\n  Error: execution error at (x.yaml:3:1)\n\nUse --debug\n"),
            "Error: execution error at (x.yaml:3:1) …"
        );
        assert_eq!(first_line(""), "");
    }
}
