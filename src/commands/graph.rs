use std::io::Write;

use crate::cli::{Config, GraphFormat};
use crate::error::Error;

pub fn run(
    config: &Config,
    cluster: &str,
    format: GraphFormat,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let plan = crate::config::load_for(
        &config.global.dir,
        cluster,
        config.global.context.as_deref(),
    )?;
    match format {
        GraphFormat::Dot => super::write(out, &plan.graph.to_dot(cluster)),
        GraphFormat::Mermaid => super::write(out, &plan.graph.to_mermaid()),
        GraphFormat::Json => super::write_json(out, &plan.graph.to_json(cluster)),
    }
}
