//! `bootstrap`: brings a fresh Kubernetes cluster to the point where Flux owns
//! everything else, and makes sure Flux never manages what bootstrap installed.
//!
//! `run` is the whole program; `main` only exits with its code.

// Crate-private by default: only what the integration tests, the benches and
// the test crates use is `pub` (docs/design.md#module-map).
#![warn(unreachable_pub)]

pub(crate) mod apply;
pub(crate) mod change;
pub(crate) mod chart_render;
pub(crate) mod child;
pub mod cli;
pub(crate) mod commands;
pub(crate) mod complete;
pub mod config;
pub(crate) mod crds;
pub(crate) mod destroy;
pub mod duration;
pub(crate) mod error;
pub(crate) mod event;
pub(crate) mod finding;
pub mod flux;
pub(crate) mod gate;
pub(crate) mod graph;
pub(crate) mod handlebars;
pub mod helm;
pub(crate) mod hooks;
pub(crate) mod import;
pub mod kube;
pub mod ledger;
pub(crate) mod lexical;
pub(crate) mod lint;
pub(crate) mod output;
pub(crate) mod ownership;
pub(crate) mod plan;
pub(crate) mod plural;
pub mod release;
pub mod reporter;
pub(crate) mod run;
pub(crate) mod scheduler;
pub(crate) mod select;
pub(crate) mod status;
pub mod stop;
pub(crate) mod validate;
pub(crate) mod values;
pub(crate) mod yaml;

use std::ffi::OsString;

use crate::error::{EXIT_INVALID, EXIT_OK};

pub fn run<I: IntoIterator<Item = OsString>>(args: I) -> i32 {
    let begun = std::time::Instant::now();
    let args: Vec<OsString> = args.into_iter().collect();
    // `COMPLETE=bash bootstrap …`: the shell asks for completions
    // (src/complete.rs); answered here, and nothing else runs.
    if let Ok(true) = clap_complete::CompleteEnv::with_factory(cli::command)
        .try_complete(args.clone(), std::env::current_dir().ok().as_deref())
    {
        return EXIT_OK;
    }
    let arguments = match cli::parse(&args) {
        Ok(arguments) => arguments,
        Err(e) => {
            let code = if e.use_stderr() {
                EXIT_INVALID
            } else {
                EXIT_OK
            };
            let _ = e.print();
            if code != EXIT_OK
                && let Some(format) = cli::asks_for_structured(&args)
            {
                let text = e.render().to_string();
                let error = error::Error::Usage(cli::usage_error_line(&text));
                print!("{}", error_document(&error, format));
            }
            return code;
        }
    };
    if !reporter::colour_allowed(
        std::env::var_os("NO_COLOR").as_deref(),
        std::env::var_os("TERM").as_deref(),
    ) {
        console::set_colors_enabled(false);
        console::set_colors_enabled_stderr(false);
    }
    let structured = arguments.structured();
    let termination = run::termination::destination(arguments.termination_log());
    let subcommand = arguments.subcommand_name().to_string();
    let result = arguments
        .into_config()
        .and_then(|config| commands::execute(&config, &mut std::io::stdout()));
    // Every child still running (none, unless a path above forgot one).
    child::terminate_all();
    let code = match &result {
        Ok(()) => EXIT_OK,
        Err(e) => {
            use std::io::Write;
            // Written, not printed: after a hangup the terminal is gone and
            // a failed print would panic.
            let _ = write!(std::io::stderr(), "{}", e.render());
            // docs/design.md#error-json: scripts read errors where they read results.
            if let Some(format) = structured
                && !e.already_reported()
            {
                // apply's and destroy's events end with an event:
                // `run_finished`, or this (docs/design.md#run_failed).
                let text = if matches!(subcommand.as_str(), "apply" | "destroy") {
                    output::event(format, &run_failed(e.to_json(), begun.elapsed()))
                } else {
                    error_document(e, format)
                };
                let _ = write!(std::io::stdout(), "{text}");
            }
            e.exit_code()
        }
    };
    // The run record's last line: how the command exited (with the error
    // JSON when it failed), in every record this process opened.
    run::record::close(code, result.as_ref().err().map(|e| e.to_json()));
    if let Some(path) = termination {
        run::termination::write(&path, &subcommand, code, result.err().as_ref());
    }
    code
}

/// The error JSON as a document of its own: one line of JSON (so it is
/// also a line a JSON Lines reader takes), or YAML.
fn error_document(error: &error::Error, format: output::Format) -> String {
    let document = output::versioned(error.to_json());
    match format {
        output::Format::Json => format!("{document}\n"),
        output::Format::Yaml => output::document(format, &document),
    }
}

/// The error JSON as the last event of a run: `time`, `elapsedMs`,
/// `event` and `schemaVersion` first, as every event has them.
fn run_failed(error: serde_json::Value, elapsed: std::time::Duration) -> serde_json::Value {
    let mut line = serde_json::Map::new();
    line.insert(
        "time".into(),
        humantime::format_rfc3339_millis(std::time::SystemTime::now())
            .to_string()
            .into(),
    );
    line.insert("elapsedMs".into(), event::as_millis(elapsed).into());
    line.insert("event".into(), "run_failed".into());
    line.insert(
        output::SCHEMA_VERSION_KEY.into(),
        output::SCHEMA_VERSION.into(),
    );
    if let serde_json::Value::Object(fields) = error {
        line.extend(fields);
    }
    serde_json::Value::Object(line)
}
