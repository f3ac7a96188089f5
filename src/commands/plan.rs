use std::io::Write;

use serde_json::json;

use crate::cli::{Clusters, Config, OutputFormat};
use crate::error::Error;
use crate::lint;

/// Prints each plan with its lint findings (docs/design.md#lints); exit 1
/// when a finding is an error `lints.ignore` does not list.
pub fn run(config: &Config, clusters: &Clusters, out: &mut dyn Write) -> Result<(), Error> {
    let linted = super::linted(
        &config.global.dir,
        clusters,
        config.global.context.as_deref(),
    )?;
    let mut documents = Vec::new();
    let mut text = String::new();
    let mut blocking = Vec::new();
    for (plan, findings) in &linted {
        let mut doc = plan.to_json();
        doc["lints"] = json!(findings);
        documents.push(doc);
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&plan.render_text());
        if !findings.is_empty() {
            text.push('\n');
            text.push_str(&lint::render_text(findings));
            text.push_str(&format!(
                "lints {}: {} error(s), {} warning(s)\n",
                plan.cluster.name,
                lint::count(findings, lint::Severity::Error),
                lint::count(findings, lint::Severity::Warning),
            ));
        }
        blocking.push((
            plan.cluster.name.clone(),
            findings.iter().filter(|f| f.blocks()).count(),
        ));
    }
    match (config.global.output, clusters) {
        (OutputFormat::Json, Clusters::One(_)) => super::write_json(out, &documents[0])?,
        (OutputFormat::Json, Clusters::All) => {
            super::write_json(out, &json!({ "clusters": documents }))?
        }
        (OutputFormat::Text, _) => super::write(out, &text)?,
    }
    super::lint_errors("plan", &blocking)
}
