use std::io::Write;
use std::path::PathBuf;

use serde_json::json;

use crate::cli::{Config, OutputFormat};
use crate::error::Error;
use crate::flux::{BootstrapRelease, ScanInput, Severity, WorkloadRef};
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
        })
        .collect()
}

pub fn run(
    config: &Config,
    cluster: &str,
    flux_root: Option<&PathBuf>,
    flux_entrypoint: Option<&PathBuf>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let plan = crate::config::load_for(
        &config.global.dir,
        cluster,
        config.global.context.as_deref(),
    )?;
    let root = flux_root
        .map(|r| config.global.dir.join(r))
        .or_else(|| plan.cluster.flux.as_ref().map(|f| f.root.clone()));
    let entrypoint = flux_entrypoint
        .cloned()
        .or_else(|| plan.cluster.flux.as_ref().map(|f| f.entrypoint.clone()));
    let (Some(root), Some(entrypoint)) = (root, entrypoint) else {
        let message = format!(
            "the config is valid; no GitOps tree was scanned: cluster `{cluster}` has no `flux:` (root, entrypoint) in clusters/{cluster}/cluster.yaml, and no --flux-root/--flux-entrypoint was given"
        );
        return match config.global.output {
            OutputFormat::Json => super::write_json(
                out,
                &json!({
                    "cluster": cluster,
                    "findings": [{"severity": "info", "code": "gitops-tree-not-scanned", "release": null, "object": null, "chain": [], "message": message}],
                }),
            ),
            OutputFormat::Text => super::write(out, &format!("{message}\n")),
        };
    };
    let releases = bootstrap_releases(&plan);
    let scan = crate::flux::scan(&ScanInput {
        root: &root,
        entrypoint: &entrypoint,
        releases: &releases,
    });
    match config.global.output {
        OutputFormat::Json => super::write_json(
            out,
            &json!({
                "cluster": cluster,
                "findings": scan.findings,
                "filesScanned": scan.files_scanned,
                "objectsScanned": scan.objects_scanned,
            }),
        )?,
        OutputFormat::Text => super::write(out, &render(&scan, cluster, &entrypoint))?,
    }
    if scan.has_errors() {
        let errors = scan
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count();
        return Err(Error::Findings(format!(
            "check found {errors} error{} in the GitOps tree of cluster `{cluster}`",
            if errors == 1 { "" } else { "s" }
        )));
    }
    Ok(())
}

fn render(scan: &crate::flux::Scan, cluster: &str, entrypoint: &std::path::Path) -> String {
    let mut text = String::new();
    for f in &scan.findings {
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
    let count = |s: Severity| scan.findings.iter().filter(|f| f.severity == s).count();
    text.push_str(&format!(
        "check {cluster}: {} error(s), {} warning(s); scanned {} files, {} objects from {}\n",
        count(Severity::Error),
        count(Severity::Warning),
        scan.files_scanned,
        scan.objects_scanned,
        entrypoint.display()
    ));
    text
}
