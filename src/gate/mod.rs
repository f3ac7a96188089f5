//! The gate (docs/design.md#lints, docs/design.md#flux-ownership-scan): one
//! cluster's [`Findings`], the config's lints and the Flux ownership scan of
//! its GitOps tree judged once against `lints.ignore`, and what each command
//! makes of them: `check` and `plan` show them, `apply` refuses on them
//! before any change ([`Findings::refusal`]) and warns about the rest,
//! `status` reports the live ones. One home for what those commands run, so
//! that none uses another.

use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::finding::{Finding, Refusal, Refused, Severity};
use crate::flux::{BootstrapRelease, Handover, WorkloadRef};
use crate::plan::Plan;
use crate::values::stack::Step;

mod render;

pub(crate) use render::Shown;

/// One cluster's findings: its lints (offline or live) and, when its GitOps
/// tree was scanned, the Flux scan's.
pub(crate) struct Findings {
    pub cluster: String,
    /// The lints' findings, judged against `lints.ignore` by the lints.
    pub lints: Vec<Finding>,
    /// The Flux scan, when a tree was scanned.
    pub tree: Option<TreeScan>,
}

/// The Flux scan of one tree and what it was run against.
pub(crate) struct TreeScan {
    pub tree: Tree,
    pub scan: crate::flux::Scan,
    pub releases: Vec<BootstrapRelease>,
}

/// Whether the scan renders the charts a health check concerns (`check`)
/// or leaves that to name inference (`apply`: it sharpens a warning only).
#[derive(Clone, Copy)]
pub(crate) enum Charts<'a> {
    Rendered { helm: Option<&'a Path> },
    Inferred,
}

impl Findings {
    fn new(plan: &Plan, lints: Vec<Finding>) -> Findings {
        Findings {
            cluster: plan.cluster.name.clone(),
            lints,
            tree: None,
        }
    }

    /// The config's lints of `plan` (docs/design.md#lints), before any tree
    /// is scanned; `fleet` is every cluster of the config root that loaded,
    /// for the rules across clusters.
    pub(crate) fn offline(plan: &Plan, fleet: &[&Plan]) -> Findings {
        Findings::new(plan, crate::lint::run(plan, fleet))
    }

    /// [`Findings::offline`] of each of `plans` (the clusters of one config
    /// root, each once), the rules across clusters run once for all.
    pub(crate) fn offline_each(plans: &[&Plan]) -> Vec<Findings> {
        let lints = crate::lint::run_each(plans);
        plans
            .iter()
            .zip(lints)
            .map(|(plan, lints)| Findings::new(plan, lints))
            .collect()
    }

    /// The live lints of `plan` on what the cluster holds, read once
    /// (docs/design.md#lints), as `apply`'s preflight and `status` run them.
    pub(crate) async fn live(plan: &Plan, client: &::kube::Client) -> Findings {
        let state = crate::lint::live::gather(plan, client).await;
        Findings::new(plan, crate::lint::run_live(plan, &state))
    }

    /// These findings with the Flux scan of `tree` against `plan`'s
    /// releases, judged against `lints.ignore`.
    pub(crate) fn with_tree(
        mut self,
        plan: &Plan,
        tree: Tree,
        charts: Charts<'_>,
    ) -> Result<Findings, Error> {
        let (scan, releases) = scan(plan, &tree, charts)?;
        self.tree = Some(TreeScan {
            tree,
            scan,
            releases,
        });
        Ok(self)
    }

    /// The scan's findings, none when no tree was scanned.
    pub(crate) fn scanned(&self) -> &[Finding] {
        self.tree.as_ref().map_or(&[], |t| &t.scan.findings)
    }

    /// How many findings block: error-level ones `lints.ignore` does not
    /// list (`check`'s and `plan`'s exit 1).
    pub(crate) fn errors(&self) -> usize {
        self.lints
            .iter()
            .chain(self.scanned())
            .filter(|f| f.blocks())
            .count()
    }

    /// What `apply` refuses on, before anything changes: the blocking lint
    /// findings, else the blocking findings of the scan. `handover-drift`
    /// is no dual management: Flux is meant to adopt the release, and its
    /// adoption upgrade then changes the values named (a warning for
    /// `apply`; `check` fails on it). Once adopted, bootstrap no longer
    /// touches the release at all.
    pub(crate) fn refusal(&self) -> Result<(), Refusal> {
        let refused = |of: Refused, blocking: Vec<Finding>| Refusal {
            cluster: self.cluster.clone(),
            of,
            blocking,
        };
        let lints: Vec<Finding> = self.lints.iter().filter(|f| f.blocks()).cloned().collect();
        if !lints.is_empty() {
            return Err(refused(Refused::Lints, lints));
        }
        let Some(scanned) = &self.tree else {
            return Ok(());
        };
        let tree: Vec<Finding> = scanned
            .scan
            .findings
            .iter()
            .filter(|f| f.blocks() && f.code != crate::flux::findings::HANDOVER_DRIFT)
            .cloned()
            .collect();
        if tree.is_empty() {
            return Ok(());
        }
        let of = Refused::Tree {
            root: scanned.tree.root.clone(),
            entrypoint: scanned.tree.entrypoint.clone(),
        };
        Err(refused(of, tree))
    }
}

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

impl Tree {
    /// The tree of the cluster's `flux:`, as `apply` scans it; `None`
    /// without one.
    pub(crate) fn configured(plan: &Plan) -> Option<Tree> {
        plan.cluster.flux.as_ref().map(|flux| Tree {
            root: flux.root.clone(),
            entrypoint: flux.entrypoint.clone(),
        })
    }

    /// The tree `check` scans: `root` (`--flux-root`, relative to `dir`,
    /// the config root) and `entrypoint` (`--flux-entrypoint`) over the
    /// cluster's `flux:`; `None` when neither names one. A root or
    /// entrypoint that does not exist is an error naming the path as
    /// resolved, never an empty scan.
    pub(crate) fn given(
        plan: &Plan,
        dir: &Path,
        root: Option<&PathBuf>,
        entrypoint: Option<&PathBuf>,
    ) -> Result<Option<Tree>, Error> {
        let configured = plan.cluster.flux.as_ref();
        let root = match root {
            Some(given) => Some(given_root(dir, given)?),
            None => configured.map(|f| f.root.clone()),
        };
        let entrypoint = entrypoint
            .cloned()
            .or_else(|| configured.map(|f| f.entrypoint.clone()));
        let (Some(root), Some(entrypoint)) = (root, entrypoint) else {
            return Ok(None);
        };
        if !root.join(&entrypoint).exists() {
            return Err(Error::config(crate::error::Problem::new(format!(
                "the Flux entrypoint `{}` resolves to `{}`, which does not exist; pass --flux-entrypoint (or set `flux.entrypoint`) relative to the Flux root `{}`",
                entrypoint.display(),
                root.join(&entrypoint).display(),
                root.display()
            ))));
        }
        Ok(Some(Tree { root, entrypoint }))
    }
}

/// `--flux-root` resolved against `dir`: a directory, or an error naming it.
fn given_root(dir: &Path, given: &Path) -> Result<PathBuf, Error> {
    let joined = dir.join(given);
    let resolved = std::path::absolute(&joined).unwrap_or(joined);
    match std::fs::canonicalize(&resolved) {
        Ok(root) if root.is_dir() => Ok(root),
        _ => Err(Error::config(crate::error::Problem::new(format!(
            "--flux-root `{}` resolves to `{}` (relative to --dir `{}`), which is not a directory; pass the directory Flux's GitRepository checks out",
            given.display(),
            resolved.display(),
            dir.display()
        )))),
    }
}

/// The Flux ownership scan of `tree` against `plan`'s releases
/// (docs/design.md#flux-ownership-scan), its findings judged against
/// `lints.ignore`, with the releases it was run against. A tree that yields
/// no file is an error: a scan of nothing proves nothing.
fn scan(
    plan: &Plan,
    tree: &Tree,
    charts: Charts<'_>,
) -> Result<(crate::flux::Scan, Vec<BootstrapRelease>), Error> {
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
    let notes = match charts {
        Charts::Rendered { helm } => render_workloads(helm, plan, &resolved.objects, &mut releases),
        Charts::Inferred => Vec::new(),
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
    Ok((scan, releases))
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
    helm: Option<&Path>,
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
