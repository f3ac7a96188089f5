use std::io::Write;
use std::path::PathBuf;

use serde_json::json;

use crate::cli::{Clusters, Config, OutputFormat, Verbosity};
use crate::duration::count as counted;
use crate::error::Error;
use crate::flux::{BootstrapRelease, Finding, Handover, Severity, WorkloadRef};
use crate::lint;
use crate::plan::Plan;

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
                values: r.values.clone(),
                overrides: r
                    .layers
                    .iter()
                    .filter(|l| !l.from_flux)
                    .map(|l| (l.label.clone(), l.values.clone()))
                    .collect(),
                secrets: r.secrets.clone(),
            }),
        })
        .collect()
}

pub fn run(
    config: &Config,
    clusters: &Clusters,
    flux_root: Option<&PathBuf>,
    flux_entrypoint: Option<&PathBuf>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let linted = super::linted(
        &config.global.dir,
        clusters,
        config.global.context.as_deref(),
    )?;
    let mut documents = Vec::new();
    let mut text = String::new();
    let mut errors = Vec::new();
    for (plan, findings) in &linted {
        let checked = check(config, plan, findings, flux_root, flux_entrypoint);
        documents.push(checked.json);
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&checked.text);
        errors.push((plan.cluster.name.clone(), checked.errors));
    }
    match (config.global.output, clusters) {
        (OutputFormat::Json, Clusters::One(_)) => super::write_json(out, &documents[0])?,
        (OutputFormat::Json, Clusters::All | Clusters::Named(_)) => {
            super::write_json(out, &json!({ "clusters": documents }))?
        }
        (OutputFormat::Text, _) => super::write(out, &text)?,
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
) -> Checked {
    let cluster = plan.cluster.name.as_str();
    let root = flux_root
        .map(|r| config.global.dir.join(r))
        .or_else(|| plan.cluster.flux.as_ref().map(|f| f.root.clone()));
    let entrypoint = flux_entrypoint
        .cloned()
        .or_else(|| plan.cluster.flux.as_ref().map(|f| f.entrypoint.clone()));
    let lint_errors = lints.iter().filter(|f| f.blocks()).count();
    let quiet = config.verbosity == Verbosity::Quiet;
    // `-q`: only what blocks, then the count lines.
    let shown: Vec<lint::Finding> = lints
        .iter()
        .filter(|f| !quiet || f.blocks())
        .cloned()
        .collect();
    let lint_text = lint::render_text(&shown);
    let (Some(root), Some(entrypoint)) = (root, entrypoint) else {
        let message = format!(
            "the config is valid; no GitOps tree was scanned: cluster `{cluster}` has no `flux:` (root, entrypoint) in clusters/{cluster}/cluster.yaml, and no --flux-root/--flux-entrypoint was given"
        );
        let mut findings: Vec<serde_json::Value> = lints.iter().map(|f| json!(f)).collect();
        findings.push(json!({"severity": "info", "code": "gitops-tree-not-scanned", "release": null, "object": null, "chain": [], "message": message}));
        let mut text = lint_text;
        if !lints.is_empty() {
            text.push_str(&lint::summary(cluster, lints));
        }
        text.push_str(&format!("{message}\n"));
        return Checked {
            json: json!({ "cluster": cluster, "findings": findings }),
            text,
            errors: lint_errors,
        };
    };
    let mut releases = bootstrap_releases(plan);
    // kubectl on PATH builds what the scan does not model (docs/design.md#tree-resolution).
    let kubectl = on_path("kubectl");
    let tree = crate::flux::tree::resolve_with(&root, &entrypoint, kubectl.as_deref());
    let notes = render_workloads(config, plan, &tree.objects, &mut releases);
    let mut scan = crate::flux::scan_resolved(tree, &releases);
    scan.findings.extend(notes);
    crate::flux::findings::normalize(&mut scan.findings);
    // Lint findings and scan findings in one list, in check's order
    // (docs/design.md#check-json): errors, then warnings, then info.
    let mut findings: Vec<((Severity, &str), serde_json::Value)> = lints
        .iter()
        .map(|f| ((f.severity, f.code), json!(f)))
        .chain(
            scan.findings
                .iter()
                .map(|f| ((f.severity, f.code), json!(f))),
        )
        .collect();
    // Stable: each list keeps its own order within a code.
    findings.sort_by_key(|(key, _)| *key);
    let scan_errors = scan
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    let mut text = lint_text;
    text.push_str(&render(
        &scan,
        cluster,
        &entrypoint,
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
    Checked {
        json: document,
        text,
        errors: lint_errors + scan_errors,
    }
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
    config: &Config,
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
        .map(|(_, r)| (*r, crate::render::Phase::Install))
        .collect();
    let outcomes = crate::render::render_blocking(config.global.helm.as_deref(), &requests);
    let mut notes = Vec::new();
    for ((i, release), outcome) in chosen.iter().zip(outcomes) {
        match outcome {
            crate::render::Outcome::Rendered(docs) => {
                releases[*i].rendered = Some(crate::flux::findings::rendered_workloads(
                    &release.id.namespace,
                    &docs,
                ));
            }
            crate::render::Outcome::Failed(why) => {
                notes.push(crate::flux::findings::chart_not_rendered(
                    &releases[*i],
                    &why,
                ));
            }
            crate::render::Outcome::Unavailable(_) => {}
        }
    }
    notes
}

fn render(
    scan: &crate::flux::Scan,
    cluster: &str,
    entrypoint: &std::path::Path,
    lints: &[lint::Finding],
    reached: Option<String>,
    verbosity: Verbosity,
) -> String {
    let mut text = String::new();
    for f in &scan.findings {
        if verbosity == Verbosity::Quiet && f.severity != Severity::Error {
            continue;
        }
        let severity = match f.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        };
        text.push_str(&format!("{severity}[{}]: {}\n", f.code, f.message));
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
    }
    text.push_str(&reached.unwrap_or_default());
    let count = |s: Severity| {
        scan.findings.iter().filter(|f| f.severity == s).count() + lint::count(lints, s)
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
