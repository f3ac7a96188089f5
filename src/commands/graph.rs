use std::io::Write;

use std::collections::HashMap;

use crate::cli::{Config, GraphArgs, GraphFormat, Verbosity};
use crate::error::Error;

pub(super) fn run(config: &Config, args: &GraphArgs, out: &mut dyn Write) -> Result<(), Error> {
    let format = args.format(config.global.output)?;
    // The DAG and, with `-v`, each chart: nothing else is rendered.
    let plan = super::load_shape(&config.global, &args.cluster)?;
    // `-v`: each node also says what it installs (docs/design.md#global-flags).
    let details: HashMap<_, _> = match config.verbosity {
        Verbosity::Verbose => plan
            .releases
            .iter()
            .map(|r| {
                let what = format!("{} {}", r.chart_label(), r.version_label());
                let detail = if r.is_installed() {
                    what.trim_end().to_string()
                } else {
                    format!("{} (CRDs only)", what.trim_end())
                };
                (r.id.clone(), detail)
            })
            .collect(),
        _ => HashMap::new(),
    };
    match format {
        GraphFormat::Dot => super::write(out, &plan.graph.to_dot(&args.cluster, &details)),
        GraphFormat::Mermaid => super::write(out, &plan.graph.to_mermaid(&details)),
        GraphFormat::Json => super::write_document(
            out,
            config.structured().unwrap_or(crate::output::Format::Json),
            &plan.graph.to_json(&args.cluster),
        ),
    }
}
