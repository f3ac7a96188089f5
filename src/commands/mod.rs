//! One module per subcommand; each takes the plain [`Config`] and writes to
//! the given output.

mod apply;
mod check;
mod destroy;
mod graph;
mod plan;
mod schema;
mod status;
mod template;

use std::io::Write;

use crate::cli::{Config, Subcommand};
use crate::error::Error;

pub fn execute(config: &Config, out: &mut dyn Write) -> Result<(), Error> {
    match &config.subcommand {
        Subcommand::Plan { cluster } => plan::run(config, cluster, out),
        Subcommand::Graph { cluster, format } => graph::run(config, cluster, *format, out),
        Subcommand::Template {
            cluster,
            release,
            show_secrets,
            crds,
            manifests,
        } => template::run(
            config,
            cluster,
            release.as_deref(),
            template::Options {
                show_secrets: *show_secrets,
                crds: *crds,
                manifests: *manifests,
            },
            out,
        ),
        Subcommand::Check {
            cluster,
            flux_root,
            flux_entrypoint,
        } => check::run(
            config,
            cluster,
            flux_root.as_ref(),
            flux_entrypoint.as_ref(),
            out,
        ),
        Subcommand::Apply(args) => apply::run(config, args),
        Subcommand::Status { cluster } => status::run(config, cluster, out),
        Subcommand::Destroy(args) => destroy::run(config, args),
        Subcommand::Schema(kind) => schema::run(*kind, out),
        Subcommand::Completions(shell) => {
            clap_complete::generate(*shell, &mut crate::cli::command(), "bootstrap", out);
            Ok(())
        }
    }
}

pub(crate) fn write(out: &mut dyn Write, text: &str) -> Result<(), Error> {
    // A closed pipe (`bootstrap plan infra | head`) is not an error worth a message.
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::failed_with("cannot write output", e)),
    }
}

pub(crate) fn write_json(out: &mut dyn Write, value: &serde_json::Value) -> Result<(), Error> {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    write(out, &format!("{text}\n"))
}
