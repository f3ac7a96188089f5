use std::io::Write;
use std::path::PathBuf;

use serde_json::json;

use crate::cli::{CheckArgs, Clusters, Config, Verbosity};
use crate::error::Error;
use crate::flux::{BootstrapRelease, Finding, Handover, Severity, WorkloadRef};
use crate::lint;
use crate::plan::Plan;
use crate::plural::count as counted;
use crate::values::stack::Step;

/// What bootstrap owns, as the scan needs it: each installed release with
/// its chart and the workloads its rollout hooks name.
pub fn bootstrap_releases(plan: &Plan) -> Vec<BootstrapRelease> {
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

pub fn run(config: &Config, args: &CheckArgs, out: &mut dyn Write) -> Result<(), Error> {
    let clusters = &args.clusters.clusters();
    let (flux_root, flux_entrypoint) = (args.flux_root.as_ref(), args.flux_entrypoint.as_ref());
    let linted = super::linted(&config.global, clusters, config.global.context.as_deref())?;
    let mut documents = Vec::new();
    let mut text = String::new();
    let mut errors = Vec::new();
    for (plan, findings) in &linted {
        let checked = check(config, plan, findings, flux_root, flux_entrypoint)?;
        documents.push(checked.json);
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&checked.text);
        errors.push((plan.cluster.name.clone(), checked.errors));
    }
    match (config.structured(), clusters) {
        (Some(format), Clusters::One(_)) => super::write_document(out, format, &documents[0])?,
        (Some(format), Clusters::All | Clusters::Named(_)) => {
            super::write_document(out, format, &json!({ "clusters": documents }))?
        }
        (None, _) => super::write_findings(out, &text)?,
    }
    let blocking: Vec<String> = errors
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(cluster, n)| {
            format!(
                "check found {n} error{} in cluster `{cluster}`",
                if *n == 1 { "" } else { "s" }
            )
        })
        .collect();
    if blocking.is_empty() {
        Ok(())
    } else {
        Err(Error::Findings(blocking.join("; ")))
    }
}

/// One cluster's check: its JSON document, its text and its blocking errors.
struct Checked {
    json: serde_json::Value,
    text: String,
    errors: usize,
}

fn check(
    config: &Config,
    plan: &Plan,
    lints: &[lint::Finding],
    flux_root: Option<&PathBuf>,
    flux_entrypoint: Option<&PathBuf>,
) -> Result<Checked, Error> {
    let cluster = plan.cluster.name.as_str();
    let lint_errors = lints.iter().filter(|f| f.blocks()).count();
    let quiet = config.verbosity == Verbosity::Quiet;
    // `-q`: only what blocks, then the count lines.
    let shown: Vec<lint::Finding> = lints
        .iter()
        .filter(|f| !quiet || f.blocks())
        .cloned()
        .collect();
    let lint_text = lint::render_text(&shown);
    let Some(tree) = tree_of(config, plan, flux_root, flux_entrypoint)? else {
        // Never "valid" here: what `check` exists for, that Flux manages no
        // release of bootstrap's, was not checked.
        let message = format!(
            "ownership not checked: no GitOps tree was scanned, so nothing proves that Flux manages none of these releases; cluster `{cluster}` has no `flux:` (root, entrypoint) in clusters/{cluster}/cluster.yaml, and no --flux-root/--flux-entrypoint was given"
        );
        let mut findings: Vec<serde_json::Value> = lints.iter().map(|f| json!(f)).collect();
        findings.push(json!({"severity": "info", "code": "gitops-tree-not-scanned", "release": null, "object": null, "chain": [], "message": message}));
        let mut text = lint_text;
        if !lints.is_empty() {
            text.push_str(&lint::summary(cluster, lints));
        }
        text.push_str(&format!("{message}\n"));
        return Ok(Checked {
            json: json!({ "cluster": cluster, "findings": findings }),
            text,
            errors: lint_errors,
        });
    };
    let Scanned { scan, releases } = scan(config.global.helm.as_deref(), plan, &tree, true)?;
    // Lint findings and scan findings in one list, in check's order
    // (docs/design.md#check-json): errors, then warnings, then info.
    let mut findings: Vec<((Severity, &str), serde_json::Value)> = lints
        .iter()
        .map(|f| ((f.severity, f.code), json!(f)))
        .chain(scan.findings.iter().map(|f| {
            let mut value = json!(f);
            if ignored(plan, f) {
                value["ignored"] = json!(true);
            }
            ((f.severity, f.code), value)
        }))
        .collect();
    // Stable: each list keeps its own order within a code.
    findings.sort_by_key(|(key, _)| *key);
    let scan_errors = blocking(plan, &scan.findings).count();
    let mut text = lint_text;
    text.push_str(&render(
        &scan,
        plan,
        &tree.entrypoint,
        lints,
        (config.verbosity == Verbosity::Verbose).then(|| render_reached(&scan, &releases)),
        config.verbosity,
    ));
    let mut document = json!({
        "cluster": cluster,
        "findings": findings.into_iter().map(|(_, f)| f).collect::<Vec<_>>(),
        "filesScanned": scan.files_scanned,
        "objectsScanned": scan.objects_scanned,
    });
    if config.verbosity == Verbosity::Verbose {
        // What the verdict rests on, comparable with Flux's own build
        // (docs/design.md#check-json).
        document["builds"] = crate::flux::builds_json(&scan.builds);
    }
    Ok(Checked {
        json: document,
        text,
        errors: lint_errors + scan_errors,
    })
}

/// Where a cluster's Flux scan starts: the GitRepository's checkout and the
/// path its root Kustomization builds, both as resolved.
pub(crate) struct Tree {
    /// Absolute.
    pub root: PathBuf,
    /// Relative to `root`, as given.
    pub entrypoint: PathBuf,
}

/// The tree `check` scans: `--flux-root` (relative to `--dir`) and
/// `--flux-entrypoint` over the cluster's `flux:`; `None` when neither names
/// one. A root or entrypoint that does not exist is an error naming the
/// path as resolved, never an empty scan.
fn tree_of(
    config: &Config,
    plan: &Plan,
    flux_root: Option<&PathBuf>,
    flux_entrypoint: Option<&PathBuf>,
) -> Result<Option<Tree>, Error> {
    let configured = plan.cluster.flux.as_ref();
    let root = match flux_root {
        Some(given) => {
            let joined = config.global.dir.join(given);
            let resolved = std::path::absolute(&joined).unwrap_or(joined);
            let Ok(root) = std::fs::canonicalize(&resolved)
                .map_err(|_| ())
                .and_then(|r| if r.is_dir() { Ok(r) } else { Err(()) })
            else {
                return Err(Error::config(crate::error::Problem::new(format!(
                    "--flux-root `{}` resolves to `{}` (relative to --dir `{}`), which is not a directory; pass the directory Flux's GitRepository checks out",
                    given.display(),
                    resolved.display(),
                    config.global.dir.display()
                ))));
            };
            Some(root)
        }
        None => configured.map(|f| f.root.clone()),
    };
    let entrypoint = flux_entrypoint
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
    Ok(Scanned { scan, releases })
}

/// An error-level scan finding `lints.ignore` lets through.
fn ignored(plan: &Plan, finding: &Finding) -> bool {
    finding.severity == Severity::Error
        && plan
            .cluster
            .ignores(finding.code, finding.release.as_deref())
}

/// The scan's error-level findings that `lints.ignore` does not list.
pub(crate) fn blocking<'a>(
    plan: &'a Plan,
    findings: &'a [Finding],
) -> impl Iterator<Item = &'a Finding> + 'a {
    findings
        .iter()
        .filter(move |f| f.severity == Severity::Error && !ignored(plan, f))
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

fn render(
    scan: &crate::flux::Scan,
    plan: &Plan,
    entrypoint: &std::path::Path,
    lints: &[lint::Finding],
    reached: Option<String>,
    verbosity: Verbosity,
) -> String {
    let cluster = plan.cluster.name.as_str();
    let mut text = String::new();
    for f in &scan.findings {
        if verbosity == Verbosity::Quiet && (f.severity != Severity::Error || ignored(plan, f)) {
            continue;
        }
        text.push_str(&render_finding(plan, f));
    }
    text.push_str(&reached.unwrap_or_default());
    let count = |s: Severity| {
        scan.findings
            .iter()
            .filter(|f| f.severity == s && !ignored(plan, f))
            .count()
            + lint::count(lints, s)
    };
    text.push_str(&format!(
        "check {cluster}: {}, {}; scanned {}, {} from {}\n",
        counted(count(Severity::Error), "error"),
        counted(count(Severity::Warning), "warning"),
        counted(scan.files_scanned, "file"),
        counted(scan.objects_scanned, "object"),
        entrypoint.display()
    ));
    if !lint::ignored_errors(lints).is_empty() {
        text.push_str(&lint::summary(cluster, lints));
    }
    let ignored: Vec<String> = scan
        .findings
        .iter()
        .filter(|f| ignored(plan, f))
        .map(|f| format!("{} ({})", f.code, f.release.as_deref().unwrap_or("-")))
        .collect();
    if !ignored.is_empty() {
        text.push_str(&format!(
            "flux scan {cluster}: ignored by lints.ignore: {}\n",
            ignored.join(", ")
        ));
    }
    text
}

/// One scan finding as text: `severity[code]: message`, the object and the
/// chain of files by which Flux reaches it.
pub(crate) fn render_finding(plan: &Plan, f: &Finding) -> String {
    let severity = match f.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "info",
    };
    let mark = if ignored(plan, f) {
        " (ignored: listed in lints.ignore)"
    } else {
        ""
    };
    let mut text = format!("{severity}[{}]{mark}: {}\n", f.code, f.message);
    if let Some(o) = &f.object {
        text.push_str(&format!(
            "  object: {} {}{} in {}\n",
            o.kind,
            o.namespace
                .as_deref()
                .map(|n| format!("{n}/"))
                .unwrap_or_default(),
            o.name,
            o.file
        ));
    }
    if !f.chain.is_empty() {
        text.push_str("  reached by:\n");
        for (i, file) in f.chain.iter().enumerate() {
            text.push_str(&format!("    {}{file}\n", if i == 0 { "" } else { "-> " }));
        }
    }
    text.push('\n');
    text
}

/// `check -v`: what the verdict rests on. Every HelmRelease the tree reaches
/// with the Helm release it would manage, then each bootstrap release and
/// whether Flux reaches it.
fn render_reached(scan: &crate::flux::Scan, releases: &[BootstrapRelease]) -> String {
    let mut text = format!(
        "Flux reaches {}:\n",
        counted(scan.helm_releases.len(), "HelmRelease")
    );
    for reached in &scan.helm_releases {
        let o = &reached.object;
        text.push_str(&format!(
            "  HelmRelease {}/{} -> Helm release {} (in {})\n",
            o.namespace.as_deref().unwrap_or("(no namespace)"),
            o.name,
            reached.release,
            o.file
        ));
    }
    text.push_str(&format!(
        "bootstrap installs {}:\n",
        counted(releases.len(), "release")
    ));
    for release in releases {
        let id = format!("{}/{}", release.namespace, release.name);
        let managers: Vec<String> = scan
            .helm_releases
            .iter()
            .filter(|r| r.release == id)
            .map(|r| {
                format!(
                    "HelmRelease {}/{}",
                    r.object.namespace.as_deref().unwrap_or_default(),
                    r.object.name
                )
            })
            .collect();
        let verdict = match (release.handover.is_some(), managers.is_empty()) {
            (false, true) => "not managed by Flux".to_string(),
            (false, false) => format!("managed by {} (see the errors above)", managers.join(", ")),
            (true, true) => "handover: no HelmRelease adopts it yet".to_string(),
            (true, false) => format!("handover: adopted by {}", managers.join(", ")),
        };
        text.push_str(&format!("  {id}: {verdict}\n"));
    }
    text.push('\n');
    text
}
