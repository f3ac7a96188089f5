use std::io::Write;

use crate::cli::{Config, OutputFormat};
use crate::error::Error;

pub fn run(config: &Config, cluster: &str, out: &mut dyn Write) -> Result<(), Error> {
    let plan = crate::config::load(&config.global.dir, cluster)?;
    match config.global.output {
        OutputFormat::Json => super::write_json(out, &plan.to_json()),
        OutputFormat::Text => super::write(out, &plan.render_text()),
    }
}
