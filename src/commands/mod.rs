//! One module per subcommand; each takes the plain [`Config`] and writes to
//! the given output.

mod apply;
mod check;
mod destroy;
mod diff;
mod graph;
mod import;
mod init;
mod plan;
mod runs;
mod schema;
mod status;
mod template;
pub(crate) mod version;

use std::io::Write;

use std::path::Path;

use crate::cli::{Clusters, Command, Config, Global, ImportSource};
use crate::error::{Error, Failure};
use crate::gate;
use crate::plan::Plan;

pub(crate) fn execute(config: &Config, out: &mut dyn Write) -> Result<(), Error> {
    match &config.command {
        Command::Plan(args) => plan::run(config, args, out),
        Command::Graph(args) => graph::run(config, args, out),
        Command::Template(args) => template::run(config, args, out),
        Command::Check(args) => check::run(config, args, out),
        Command::Apply(args) => apply::run(config, args),
        Command::Diff(args) => diff::run(config, args, out),
        Command::Status(args) => status::run(config, args, out),
        Command::Destroy(args) => destroy::run(config, args),
        Command::Schema(args) => schema::run(args.kind, config.structured(), out),
        Command::Version => version::run(config.global.output, out),
        Command::Init(args) => init::run(args, config.global.context.as_deref(), out),
        Command::Runs(args) => runs::run(config, args, out),
        Command::Import(ImportSource::Helmfile(args)) => import::run(config, args, out),
        Command::Completions(args) => {
            // clap_complete panics on a write error; `| head` closes the pipe.
            let mut script = Vec::new();
            clap_complete::generate(
                args.shell,
                &mut crate::cli::command(),
                "bootstrap",
                &mut script,
            );
            write(out, &String::from_utf8_lossy(&script))
        }
    }
}

/// The run record of `command` on `cluster` (docs/design.md#run-record):
/// none with `--no-record`, or when there is no cache directory or it
/// cannot be written (a run is never stopped for its record).
pub(crate) fn record_for(
    config: &crate::cli::Config,
    cluster: &str,
    command: &str,
) -> Option<crate::run::record::Recorder> {
    if config.global.no_record {
        return None;
    }
    let root = crate::run::record::root(config.global.cache_dir.as_deref())?;
    crate::run::record::open(&root, cluster, command)
}

/// [`write`] of text holding findings: their headings coloured when stdout
/// takes colour (a terminal, no `NO_COLOR`, not `TERM=dumb`).
pub(crate) fn write_findings(out: &mut dyn Write, text: &str) -> Result<(), Error> {
    if console::colors_enabled() {
        write(out, &crate::finding::colour_headings(text))
    } else {
        write(out, text)
    }
}

pub(crate) fn write(out: &mut dyn Write, text: &str) -> Result<(), Error> {
    // A closed pipe (`bootstrap plan infra | head`) is not an error worth a message.
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(source) => Err(Failure::Output { source }.into()),
    }
}

/// Frees `value` on a thread of its own: a 1,000-release plan and the
/// catalog it came from take as long to free as a tenth of the load, time a
/// command that has printed its result need not wait for (the process may
/// exit before the thread is done; the memory goes with it).
pub(crate) fn drop_apart<T: Send + 'static>(value: T) {
    // When no thread can be started, it is freed here.
    let _ = std::thread::Builder::new()
        .name("drop".into())
        .spawn(move || drop(value));
}

/// A command's document (docs/design.md#json-shapes): `schemaVersion`
/// first, as pretty JSON or YAML.
pub(crate) fn write_document(
    out: &mut dyn Write,
    format: crate::output::Format,
    value: &serde_json::Value,
) -> Result<(), Error> {
    let document = crate::output::versioned(value.clone());
    write(out, &crate::output::document(format, &document))
}

/// The plans of `clusters` with their lint findings (docs/design.md#lints).
/// Rules across clusters see every cluster of the config root: with one
/// cluster named, the others are loaded too, and any that do not load are
/// left out (their own `check` reports why).
/// `context` (`--context`) applies to the one cluster named; with `--all`
/// each cluster uses its own.
pub(crate) fn linted(
    global: &Global,
    clusters: &Clusters,
    context: Option<&str>,
) -> Result<Vec<(Plan, gate::Findings)>, Error> {
    linted_with(
        global,
        clusters,
        context,
        &crate::plan::RunValues::default(),
    )
}

/// The parse cache (docs/design.md#parse-cache): `parsed/` in the chart
/// cache's directory (`--cache-dir`, `BOOTSTRAP_CACHE_DIR`, else the
/// user's cache directory); none with `--no-parse-cache` or without a
/// directory to put it in.
pub(crate) fn parse_cache(global: &Global) -> Option<crate::config::ParseCache> {
    if global.no_parse_cache {
        return None;
    }
    Some(crate::config::ParseCache::new(&global.cache_root()?))
}

/// The plan of `cluster` from the config root of `global`, its release
/// files read through the parse cache (`--context` as in
/// [`crate::config::load_for`]).
pub(crate) fn load_plan(global: &Global, cluster: &str) -> Result<Plan, Error> {
    let cache = parse_cache(global);
    crate::config::Catalog::read_cached(&global.dir, cache.as_ref())?
        .plan(cluster, global.context.as_deref())
}

/// The plan of `cluster` as `graph` prints it: no values or hooks rendered
/// (docs/design.md#commands).
pub(crate) fn load_shape(global: &Global, cluster: &str) -> Result<Plan, Error> {
    let cache = parse_cache(global);
    crate::config::Catalog::read_cached(&global.dir, cache.as_ref())?.shape(cluster)
}

/// [`linted`] with the run's `--values`/`--set` merged into each cluster
/// the command runs on, so the lints see what would be installed.
pub(crate) fn linted_with(
    global: &Global,
    clusters: &Clusters,
    context: Option<&str>,
    run: &crate::plan::RunValues,
) -> Result<Vec<(Plan, gate::Findings)>, Error> {
    let dir = &global.dir;
    let cache = parse_cache(global);
    let names = crate::config::cluster_names(dir);
    let plans = match clusters {
        Clusters::One(cluster) => {
            // The release files are read once; the other clusters' plans
            // are made from them for the fleet lints.
            let catalog = crate::config::Catalog::read_cached(dir, cache.as_ref())?;
            let plan = catalog.plan(cluster, context)?.with_run_values(run);
            let others: Vec<Plan> = names
                .iter()
                .filter(|n| *n != cluster)
                .filter_map(|n| catalog.plan(n, None).ok())
                .collect();
            let fleet: Vec<&Plan> = others.iter().collect();
            let findings = gate::Findings::offline(&plan, &fleet);
            drop_apart((catalog, others));
            return Ok(vec![(plan, findings)]);
        }
        Clusters::Named(named) => load_every(dir, cache.as_ref(), named, run)?,
        Clusters::All => {
            if names.is_empty() {
                return Err(Error::config(crate::error::Problem::new(format!(
                    "`{}` has no clusters/<name>/cluster.yaml; pass --dir with your config root",
                    dir.display()
                ))));
            }
            load_every(dir, cache.as_ref(), &names, run)?
        }
    };
    let fleet: Vec<&Plan> = plans.iter().collect();
    let findings = gate::Findings::offline_each(&fleet);
    Ok(plans.into_iter().zip(findings).collect())
}

/// Every named cluster's plan, or every config problem of all of them.
fn load_every(
    dir: &Path,
    cache: Option<&crate::config::ParseCache>,
    names: &[String],
    run: &crate::plan::RunValues,
) -> Result<Vec<Plan>, Error> {
    let catalog = crate::config::Catalog::read_cached(dir, cache)?;
    let mut plans = Vec::new();
    let mut problems = Vec::new();
    for name in names {
        match catalog.plan(name, None) {
            Ok(plan) => plans.push(plan.with_run_values(run)),
            Err(Error::Config(mut more)) => problems.append(&mut more),
            Err(e) => return Err(e),
        }
    }
    if !problems.is_empty() {
        return Err(Error::Config(problems));
    }
    Ok(plans)
}

/// The error of a command whose lints found blocking errors (exit 1).
pub(crate) fn lint_errors(command: &str, findings: &[(String, usize)]) -> Result<(), Error> {
    let blocking: Vec<String> = findings
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(cluster, n)| format!("{n} in cluster `{cluster}`"))
        .collect();
    if blocking.is_empty() {
        return Ok(());
    }
    Err(Error::Findings(format!(
        "{command} found error-level findings: {}",
        blocking.join(", ")
    )))
}
