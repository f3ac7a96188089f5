use std::io::Write;

use serde_json::json;

use crate::cli::{Clusters, Config, OutputFormat, PlanArgs, Verbosity};
use crate::error::Error;

/// Prints each plan with its lint findings (docs/design.md#lints); exit 1
/// when a finding is an error `lints.ignore` does not list. `-q`: only the
/// counts and the findings; `-v`: each release's values sources, digest,
/// timeout and wait too (docs/design.md#global-flags).
///
/// `--only`/`--selector` narrow what is shown: the chosen releases (with
/// what they need unless `--no-needs`) and the findings about them or about
/// no release in particular; the lints still see the whole cluster.
pub(super) fn run(config: &Config, args: &PlanArgs, out: &mut dyn Write) -> Result<(), Error> {
    let clusters = &args.clusters.clusters();
    let linted = super::linted(&config.global, clusters, config.global.context.as_deref())?
        .into_iter()
        .map(|(plan, mut findings)| {
            let plan = args.selection.apply(plan)?;
            findings.lints.retain(|f| {
                f.release
                    .as_ref()
                    .is_none_or(|id| plan.releases.iter().any(|r| r.id.to_string() == *id))
            });
            Ok((plan, findings))
        })
        .collect::<Result<Vec<_>, Error>>()?;
    let mut documents = Vec::new();
    let mut text = String::new();
    let mut blocking = Vec::new();
    for (plan, findings) in &linted {
        // The CRDs each CRD-phase release carries, where its chart can be
        // rendered here (docs/design.md#commands).
        // `-q` text shows none of it.
        let carried =
            if config.verbosity == Verbosity::Quiet && config.global.output == OutputFormat::Text {
                crate::plan::Carried::default()
            } else {
                crate::chart_render::carried_crds(config.global.helm.as_deref(), plan)
            };
        // Built only when asked for: the values digests it holds cost a
        // fifth of a 1,000-release plan.
        if config.structured().is_some() {
            let mut doc = plan.to_json(&carried);
            doc["lints"] = json!(findings.lints);
            documents.push(doc);
        }
        if !text.is_empty() {
            text.push('\n');
        }
        match config.verbosity {
            // `-q`: the one-line count, then only what needs attention.
            Verbosity::Quiet => {
                let full = plan.render_text(&carried);
                text.push_str(full.lines().next().unwrap_or_default());
                text.push('\n');
            }
            Verbosity::Normal => text.push_str(&plan.render_text(&carried)),
            Verbosity::Verbose => text.push_str(&plan.render_text_detailed(true, &carried)),
        }
        if !findings.lints.is_empty() {
            text.push('\n');
            text.push_str(&findings.lints_text());
        }
        blocking.push((plan.cluster.name.clone(), findings.errors()));
    }
    super::drop_apart(linted);
    match (config.structured(), clusters) {
        (Some(format), Clusters::One(_)) => super::write_document(out, format, &documents[0])?,
        (Some(format), Clusters::All | Clusters::Named(_)) => {
            super::write_document(out, format, &json!({ "clusters": documents }))?
        }
        (None, _) => super::write_findings(out, &text)?,
    }
    super::lint_errors("plan", &blocking)
}
