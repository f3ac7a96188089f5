use std::io::Write;
use std::path::PathBuf;

use serde_json::json;

use crate::cli::{CheckArgs, Clusters, Config, Verbosity};
use crate::error::Error;
use crate::finding::Finding;
use crate::flux::{BootstrapRelease, Severity};
use crate::gate::{Scanned, Tree, blocking, scan};
use crate::lint;
use crate::plan::Plan;
use crate::plural::count as counted;

pub(super) fn run(config: &Config, args: &CheckArgs, out: &mut dyn Write) -> Result<(), Error> {
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
        let mut findings: Vec<Finding> = lints.to_vec();
        findings.push(Finding::tree(
            Severity::Info,
            "gitops-tree-not-scanned",
            None,
            None,
            Vec::new(),
            message.clone(),
        ));
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
    let mut findings: Vec<&Finding> = lints.iter().chain(&scan.findings).collect();
    // Stable: each list keeps its own order within a code.
    findings.sort_by_key(|f| (f.severity, f.code));
    let scan_errors = blocking(&scan.findings).count();
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
        "findings": findings,
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
    let shown: Vec<Finding> = scan
        .findings
        .iter()
        .filter(|f| verbosity != Verbosity::Quiet || f.blocks())
        .cloned()
        .collect();
    text.push_str(&crate::finding::render_text(&shown));
    text.push_str(&reached.unwrap_or_default());
    let count = |s: Severity| {
        scan.findings
            .iter()
            .filter(|f| f.severity == s && !f.ignored)
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
        .filter(|f| f.ignored)
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
