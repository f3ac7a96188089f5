//! The gate: the Flux ownership scan of a cluster's GitOps tree against the
//! releases bootstrap owns (docs/design.md#flux-ownership-scan), as `check`
//! reports it and `apply` refuses on it before any change; one home for
//! what both run, so that neither command uses the other.

use std::path::PathBuf;

use crate::error::Error;
use crate::flux::{BootstrapRelease, Finding, Handover, Severity, WorkloadRef};
use crate::plan::Plan;
use crate::values::stack::Step;

/// What bootstrap owns, as the scan needs it: each installed release with
/// its chart and the workloads its rollout hooks name.
pub(crate) fn bootstrap_releases(plan: &Plan) -> Vec<BootstrapRelease> {
    plan.installed()
        .map(|r| BootstrapRelease {
            name: r.id.name.clone(),
            namespace: r.id.namespace.clone(),
            chart: r.chart().map(|c| c.name()),
            workloads: r
                .hooks
                .postsync
                .iter()
                .chain(&r.hooks.presync)
                .filter_map(|h| h.action.workload())
                .map(|o| WorkloadRef {
                    kind: o.kind.clone(),
                    namespace: o
                        .namespace
                        .clone()
                        .unwrap_or_else(|| r.id.namespace.clone()),
                    name: o.name.clone(),
                })
                .collect(),
            rendered: None,
            handover: (r.ownership == crate::release::Ownership::Handover).then(|| Handover {
                version: r.version_label(),
                values: r.values().clone(),
                overrides: r
                    .stack
                    .named()
                    .filter(|l| l.step != Step::HelmRelease)
                    .map(|l| (l.label.clone(), l.values.clone()))
                    .collect(),
                secrets: r.secrets().clone(),
            }),
        })
        .collect()
}

/// Where a cluster's Flux scan starts: the GitRepository's checkout and the
/// path its root Kustomization builds, both as resolved.
pub(crate) struct Tree {
    /// Absolute.
    pub root: PathBuf,
    /// Relative to `root`, as given.
    pub entrypoint: PathBuf,
}

/// A cluster's Flux scan and the bootstrap releases it was run against.
pub(crate) struct Scanned {
    pub scan: crate::flux::Scan,
    pub releases: Vec<BootstrapRelease>,
}

/// The Flux ownership scan of `tree` against `plan`'s releases
/// (docs/design.md#flux-ownership-scan), as `check` and `apply`'s preflight
/// run it. `render`: render the charts a health check concerns (`check`);
/// `apply` leaves that to name inference, as it concerns warnings only. A
/// tree that yields no file is an error: a scan of nothing proves nothing.
pub(crate) fn scan(
    helm: Option<&std::path::Path>,
    plan: &Plan,
    tree: &Tree,
    render: bool,
) -> Result<Scanned, Error> {
    let mut releases = bootstrap_releases(plan);
    // kubectl on PATH builds what the scan does not model (docs/design.md#tree-resolution).
    let kubectl = on_path("kubectl");
    let resolved =
        crate::flux::tree::resolve_with(&tree.root, &tree.entrypoint, kubectl.as_deref());
    if resolved.files_scanned == 0 {
        let at = tree.root.join(&tree.entrypoint);
        return Err(Error::config(crate::error::Problem::new(format!(
            "the Flux scan of cluster `{}` read no file at `{}`: nothing there is in the GitRepository artifact (no YAML file, or each is a symlink or ignored by .sourceignore, the GitRepository's spec.ignore or source-controller's defaults), so nothing can be said about what Flux manages; point `flux.entrypoint` (or --flux-entrypoint) at the directory Flux's root Kustomization builds",
            plan.cluster.name,
            at.display()
        ))));
    }
    let notes = if render {
        render_workloads(helm, plan, &resolved.objects, &mut releases)
    } else {
        Vec::new()
    };
    let mut scan = crate::flux::scan_resolved(resolved, &releases);
    scan.findings.extend(notes);
    crate::flux::findings::normalize(&mut scan.findings);
    // Judged once against `lints.ignore`, as the lints' findings are.
    for finding in &mut scan.findings {
        finding.ignored = finding.severity == Severity::Error
            && plan
                .cluster
                .ignores(finding.code, finding.release.as_deref());
    }
    Ok(Scanned { scan, releases })
}

/// The scan's error-level findings that `lints.ignore` does not list.
pub(crate) fn blocking(findings: &[Finding]) -> impl Iterator<Item = &Finding> {
    findings.iter().filter(|f| f.blocks())
}

/// `program` in a PATH directory, as a shell would find it.
fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    })
}

/// Renders the charts of the releases a health check may concern
/// ([`crate::flux::findings::releases_to_render`]) where helm and the chart
/// are at hand, and records the workloads each renders on its
/// [`BootstrapRelease`]; nothing is rendered for a tree without such health
/// checks. A failing render leaves the release to name-convention inference,
/// with an info finding saying why.
fn render_workloads(
    helm: Option<&std::path::Path>,
    plan: &Plan,
    objects: &[crate::flux::object::Object],
    releases: &mut [BootstrapRelease],
) -> Vec<Finding> {
    let wanted = crate::flux::findings::releases_to_render(objects, releases);
    let chosen: Vec<(usize, &crate::release::Release)> = wanted
        .into_iter()
        .filter_map(|i| {
            let id = crate::release::ReleaseId::new(&releases[i].namespace, &releases[i].name);
            plan.release(&id).map(|r| (i, r))
        })
        .collect();
    if chosen.is_empty() {
        return Vec::new();
    }
    let requests: Vec<_> = chosen
        .iter()
        .map(|(_, r)| (*r, crate::chart_render::Phase::Install))
        .collect();
    let outcomes = crate::chart_render::render_blocking(helm, &requests);
    let mut notes = Vec::new();
    for ((i, release), outcome) in chosen.iter().zip(outcomes) {
        match outcome {
            crate::chart_render::Outcome::Rendered(docs) => {
                releases[*i].rendered = Some(crate::flux::findings::rendered_workloads(
                    &release.id.namespace,
                    &docs,
                ));
            }
            crate::chart_render::Outcome::Failed(why) => {
                notes.push(crate::flux::findings::chart_not_rendered(
                    &releases[*i],
                    &why,
                ));
            }
            crate::chart_render::Outcome::Unavailable(_) => {}
        }
    }
    notes
}
