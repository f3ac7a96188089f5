//! `bootstrap check`: a view of each cluster's [`gate::Findings`], its
//! lints and the Flux ownership scan of its GitOps tree
//! (docs/design.md#check-json); exit 1 on an error-level finding that
//! `lints.ignore` does not list.

use std::io::Write;

use serde_json::json;

use crate::cli::{CheckArgs, Clusters, Config, Verbosity};
use crate::error::Error;
use crate::gate::{Charts, Shown, Tree};

pub(super) fn run(config: &Config, args: &CheckArgs, out: &mut dyn Write) -> Result<(), Error> {
    let clusters = &args.clusters.clusters();
    let shown = shown(config.verbosity);
    let linted = super::linted(&config.global, clusters, config.global.context.as_deref())?;
    let mut documents = Vec::new();
    let mut text = String::new();
    let mut errors = Vec::new();
    for (plan, mut findings) in linted {
        let tree = Tree::given(
            &plan,
            &config.global.dir,
            args.flux_root.as_ref(),
            args.flux_entrypoint.as_ref(),
        )?;
        if let Some(tree) = tree {
            let helm = config.global.helm.as_deref();
            findings = findings.with_tree(&plan, tree, Charts::Rendered { helm })?;
        }
        documents.push(findings.check_json(shown));
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&findings.check_text(shown));
        errors.push((findings.cluster.clone(), findings.errors()));
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

/// What `-q`, the default and `-v` show of findings.
fn shown(verbosity: Verbosity) -> Shown {
    match verbosity {
        Verbosity::Quiet => Shown::Blocking,
        Verbosity::Normal => Shown::All,
        Verbosity::Verbose => Shown::Explained,
    }
}
