use std::io::Write;

use crate::cli::{Config, OutputFormat};
use crate::error::Error;

pub fn run(config: &Config, cluster: &str, out: &mut dyn Write) -> Result<(), Error> {
    let plan = crate::config::load_for(
        &config.global.dir,
        cluster,
        config.global.context.as_deref(),
    )?;
    match config.global.output {
        OutputFormat::Json => super::write_json(out, &plan.to_json()),
        OutputFormat::Text => super::write(out, &plan.render_text()),
    }
}
