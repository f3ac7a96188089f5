//! The command line, declared once: the clap types of each subcommand are
//! what `commands::` runs, with methods for what they derive (the clusters
//! chosen, the engine's options, the helmfile of an import). [`Config`] is
//! the parsed command line with its verbosity, checked for what clap cannot
//! say.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand as ClapSubcommand, ValueEnum};

use crate::error::Error;
pub use crate::reporter::Verbosity;

mod args;

pub use args::*;

/// `--version`'s text after the name: the version, the commit (marked
/// `-dirty` when the tracked files differed from it; build.rs), the build
/// date and the helm versions supported (a test in `commands::version`
/// keeps the minimum equal to `helm::binary::MIN_VERSION`).
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("BOOTSTRAP_GIT_COMMIT"),
    env!("BOOTSTRAP_GIT_DIRTY_SUFFIX"),
    ", built ",
    env!("BOOTSTRAP_BUILD_DATE"),
    "; helm 3.13 or newer, 3 and 4)"
);

#[derive(Debug, Parser)]
#[command(
    name = "bootstrap",
    version,
    long_version = LONG_VERSION,
    about = "Bring a fresh Kubernetes cluster from \"API server up, no CNI\" to \"Flux owns everything else\".",
    long_about = None,
    after_help = "Exit codes: 0 success, 1 operation failed (or `check` found an error), 2 invalid input or missing prerequisite (nothing changed), 3 another run holds the cluster lock or took it over (retry later), 130 interrupted."
)]
pub struct Arguments {
    #[command(flatten)]
    global: Global,
    /// More output (repeat for more); `apply` and `destroy` also stream
    /// what hooks print.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet", help_heading = GLOBAL)]
    verbose: u8,
    /// Only errors and the final result.
    #[arg(short, long, global = true, help_heading = GLOBAL)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
    /// The subcommand's name, as [`parse`] matched it.
    #[arg(skip)]
    subcommand: String,
}

/// The heading of the global flags in each subcommand's help, apart from
/// the subcommand's own options.
const GLOBAL: &str = "Global options";

/// The global flags, declared once: clap reads them into this struct and
/// [`Config`] carries it as it is.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = GLOBAL)]
pub struct Global {
    /// Config root holding clusters/ and releases/.
    #[arg(long, global = true, default_value = ".", value_name = "DIR")]
    pub dir: PathBuf,
    /// Output format: text for people; json or yaml for programs (one
    /// document; apply and destroy: one event per JSON line or YAML document).
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// The helm binary (default: `helm` from PATH).
    #[arg(long, global = true, value_name = "PATH", env = "BOOTSTRAP_HELM")]
    pub helm: Option<PathBuf>,
    /// kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// kubeconfig context (overrides the cluster's `context`).
    #[arg(long, global = true, value_name = "NAME", add = clap_complete::ArgValueCandidates::new(crate::complete::contexts))]
    pub context: Option<String>,
    /// No live progress display: one line per event, as in CI (also with
    /// NO_COLOR or TERM=dumb).
    #[arg(long, global = true)]
    pub no_progress: bool,
    /// Keep no run record (apply and destroy write their events to
    /// $XDG_CACHE_HOME/bootstrap/runs/CLUSTER/; `bootstrap runs` shows them).
    #[arg(long, global = true)]
    pub no_record: bool,
    /// How long apply, destroy and status wait for the Kubernetes API server
    /// to answer, e.g. 10m for a control plane that is still coming up
    /// (default 30s; apply's --timeout bounds it too).
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_duration_arg)]
    pub wait_for_api: Option<Duration>,
    /// Write a one-line JSON result here when the command ends (default:
    /// /dev/termination-log when it exists, as in a Kubernetes container).
    #[arg(long, global = true, value_name = "FILE")]
    pub termination_log: Option<PathBuf>,
    /// Where remote charts are kept once pulled, reused across runs
    /// (default: $XDG_CACHE_HOME/bootstrap/charts, else
    /// ~/.cache/bootstrap/charts).
    #[arg(long, global = true, value_name = "DIR", env = "BOOTSTRAP_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// No chart cache: helm downloads each chart at each use.
    #[arg(long, global = true)]
    pub no_chart_cache: bool,
    /// No parse cache: every release and values file is parsed at each run
    /// (default: their parses are kept in parsed/ of the chart cache's
    /// directory, keyed by their bytes).
    #[arg(
        long,
        global = true,
        env = "BOOTSTRAP_NO_PARSE_CACHE",
        value_parser = clap::builder::FalseyValueParser::new()
    )]
    pub no_parse_cache: bool,
}

impl Global {
    /// Where the caches live (docs/design.md#chart-cache): `--cache-dir` or
    /// `BOOTSTRAP_CACHE_DIR`, else the user's cache directory; the one place
    /// it is resolved, for the chart cache and the parse cache alike.
    pub fn cache_root(&self) -> Option<PathBuf> {
        self.cache_dir
            .clone()
            .or_else(|| crate::helm::cache::ChartCache::default_dir(|name| std::env::var_os(name)))
    }
}

/// `--values FILE` and `--set PATH=VALUE` of one run: merged over every
/// release's values, last (docs/design.md#values-merge-order).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RunValuesArgs {
    /// A YAML values file merged over every chosen release's values (repeatable; before --set).
    #[arg(short = 'f', long = "values", value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// A value for every chosen release, helm's syntax: `a.b=c`, `a=1,b=2` (repeatable; wins over everything).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    pub sets: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
    Yaml,
}

impl OutputFormat {
    /// JSON or YAML: the same documents and events, for programs
    /// (docs/design.md#json-shapes); `None` for text.
    pub fn structured(self) -> Option<crate::output::Format> {
        match self {
            OutputFormat::Text => None,
            OutputFormat::Json => Some(crate::output::Format::Json),
            OutputFormat::Yaml => Some(crate::output::Format::Yaml),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphFormat {
    Dot,
    Mermaid,
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaKind {
    Cluster,
    Release,
    /// The events of `apply` and `destroy` (`--output json|yaml`).
    Events,
}

/// The subcommands, each declared once: its clap type is what
/// `commands::` runs.
#[derive(Debug, Clone, ClapSubcommand)]
pub enum Command {
    /// Validate everything, lint the rendered values and print the phases and releases in execution order.
    #[command(
        after_help = "Examples:\n  bootstrap plan infra\n  bootstrap plan infra -o json | jq '.releases[].id'\n  bootstrap plan --all --dir ~/src/platform"
    )]
    Plan(PlanArgs),
    /// Print the release DAG.
    #[command(
        after_help = "Examples:\n  bootstrap graph infra | dot -Tsvg > infra.svg\n  bootstrap graph infra --format mermaid"
    )]
    Graph(GraphArgs),
    /// Print the rendered, merged values of a cluster's releases (and, with
    /// --manifests, the chart rendered by `helm template`).
    #[command(
        after_help = "Examples:\n  bootstrap template infra cilium\n  bootstrap template infra --manifests --only coredns\n  bootstrap template infra --crds cert-manager"
    )]
    Template(TemplateArgs),
    /// Apply CRDs, then install releases in DAG order with hooks; record ownership.
    #[command(
        after_help = "Examples:\n  bootstrap apply infra\n  bootstrap apply infra --dry-run\n  bootstrap apply infra --only coredns --timeout 15m\n  bootstrap apply --all -o json > run.jsonl"
    )]
    Apply(ApplyArgs),
    /// What `apply` would change, per release: chart and version, values as key paths, and the
    /// rendered manifests against the deployed release as a unified diff (read-only).
    #[command(
        after_help = "Examples:\n  bootstrap diff infra\n  bootstrap diff infra cilium --exit-code"
    )]
    Diff(DiffArgs),
    /// Live state of each release: helm status, readiness, owner, drift, conflicts (read-only).
    #[command(after_help = "Examples:\n  bootstrap status infra\n  bootstrap status --all -o json")]
    Status(StatusArgs),
    /// Uninstall the releases in reverse DAG order (asks unless --yes); CRDs stay unless --crds.
    #[command(
        after_help = "Examples:\n  bootstrap destroy infra --dry-run\n  bootstrap destroy infra --yes --crds"
    )]
    Destroy(DestroyArgs),
    /// Static validation, the lints, and the Flux ownership scan of the GitOps tree.
    #[command(
        after_help = "Examples:\n  bootstrap check infra\n  bootstrap check --all -o json\n  bootstrap check infra --flux-root ../gitops --flux-entrypoint clusters/infra"
    )]
    Check(CheckArgs),
    /// Write a config root from another tool's files (writes what it can, lists the rest).
    #[command(subcommand)]
    Import(ImportSource),
    /// Print the JSON Schema of cluster.yaml or release files (for editors),
    /// or of the events apply and destroy print.
    #[command(after_help = "Examples:
  bootstrap schema cluster > cluster.schema.json
  bootstrap schema events")]
    Schema(SchemaArgs),
    /// Print shell completions.
    Completions(CompletionsArgs),
    /// List the recorded runs of apply and destroy (newest first), or show one
    /// (`--show`: its events as JSON Lines).
    #[command(
        after_help = "Examples:\n  bootstrap runs infra\n  bootstrap runs infra --show\n  bootstrap runs infra --show 2 | jq 'select(.event == \"release_finished\")'"
    )]
    Runs(RunsArgs),
    /// Write a minimal working config root (one cluster, a CNI and a DNS
    /// release) that `plan` and `check` accept at once; never overwrites
    /// without --force.
    #[command(
        after_help = "Examples:\n  bootstrap init platform --cluster dev --context kind-dev\n  bootstrap plan dev --dir platform"
    )]
    Init(InitArgs),
    /// Print the version, the git commit it was built from, the build date
    /// and the helm versions it supports (`-o json` for scripts and bug reports).
    #[command(after_help = "Examples:\n  bootstrap version -o json")]
    Version,
}

/// Everything a command needs: the global flags, the verbosity and the
/// subcommand as clap read it.
#[derive(Debug, Clone)]
pub struct Config {
    pub global: Global,
    pub verbosity: Verbosity,
    pub command: Command,
}

impl Config {
    /// `--output json` or `--output yaml`: documents and events for programs.
    pub fn structured(&self) -> Option<crate::output::Format> {
        self.global.output.structured()
    }

    /// How long the cluster commands wait for the API server to answer.
    pub fn wait_for_api(&self) -> Duration {
        self.global
            .wait_for_api
            .unwrap_or(crate::run::REACHABILITY_BUDGET)
    }

    /// Where the caches live ([`Global::cache_root`]).
    pub fn cache_dir(&self) -> Option<PathBuf> {
        self.global.cache_root()
    }

    /// Where the cluster commands find helm and the cluster.
    pub fn target(&self) -> crate::run::Target<'_> {
        crate::run::Target {
            helm: self.global.helm.as_deref(),
            kubeconfig: self.global.kubeconfig.as_deref(),
            cache_dir: self.cache_dir(),
            no_chart_cache: self.global.no_chart_cache,
            wait_for_api: self.wait_for_api(),
            timeout: None,
        }
    }
}

fn parse_selector(text: &str) -> Result<crate::select::Selector, crate::select::SelectorError> {
    crate::select::Selector::parse(text)
}

/// A count flag (`--concurrency N`) that is not a positive number.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a positive number")]
struct NotPositive(String);

fn parse_concurrency(text: &str) -> Result<usize, NotPositive> {
    match text.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(NotPositive(text.to_string())),
    }
}

/// Parses a duration flag like `10m`.
fn parse_duration_arg(text: &str) -> Result<Duration, crate::validate::DurationError> {
    crate::validate::duration(text)
}

/// Whether a command line that clap refused asked for `--output json` or
/// `--output yaml`, so its error is printed as that document too.
pub fn asks_for_structured(args: &[std::ffi::OsString]) -> Option<crate::output::Format> {
    let asks = |format: &str| {
        args.iter()
            .zip(args.iter().skip(1))
            .any(|(a, b)| (a == "--output" || a == "-o") && b == format)
            || args.iter().any(|a| {
                [
                    format!("--output={format}"),
                    format!("-o{format}"),
                    format!("-o={format}"),
                ]
                .iter()
                .any(|f| a == f.as_str())
            })
    };
    if asks("json") {
        Some(crate::output::Format::Json)
    } else if asks("yaml") {
        Some(crate::output::Format::Yaml)
    } else {
        None
    }
}

/// clap's usage error as one line: its message, its tips and the usage
/// line, without the "For more information" footer.
pub fn usage_error_line(rendered: &str) -> String {
    rendered
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
        .map(|l| l.trim_start_matches("error: "))
        .collect::<Vec<_>>()
        .join("; ")
}

impl Arguments {
    /// `--output json` or `--output yaml`.
    pub fn structured(&self) -> Option<crate::output::Format> {
        self.global.output.structured()
    }

    /// `--termination-log`.
    pub fn termination_log(&self) -> Option<&std::path::Path> {
        self.global.termination_log.as_deref()
    }

    /// The subcommand's name (`apply`, `status`, …) as clap matched it.
    pub fn subcommand_name(&self) -> &str {
        &self.subcommand
    }

    pub fn into_config(self) -> Result<Config, Error> {
        let verbosity = if self.quiet {
            Verbosity::Quiet
        } else if self.verbose > 0 {
            Verbosity::Verbose
        } else {
            Verbosity::Normal
        };
        self.command.check(self.global.output)?;
        Ok(Config {
            global: self.global,
            verbosity,
            command: self.command,
        })
    }
}

/// The command line as clap declares it, each subcommand's help showing
/// only the global flags it uses (they are accepted everywhere all the same,
/// so a script that passes one more is not broken).
pub fn command() -> clap::Command {
    let mut command = <Arguments as clap::CommandFactory>::command();
    // clap copies each global flag into every subcommand that lacks one of
    // that id when it builds the command: a hidden copy put there first is
    // the one that subcommand gets.
    let globals: Vec<clap::Arg> = command
        .get_arguments()
        .filter(|a| a.is_global_set())
        .cloned()
        .collect();
    let names: Vec<String> = command
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    for name in names {
        let used = global_flags_of(&name);
        command = command.mut_subcommand(&name, |mut sub| {
            for arg in &globals {
                if !used.contains(&arg.get_id().as_str()) {
                    sub = sub.arg(arg.clone().hide(true));
                }
            }
            sub
        });
    }
    command
}

/// The global flags a subcommand uses (docs/design.md#global-flags).
fn global_flags_of(subcommand: &str) -> &'static [&'static str] {
    // The cluster commands' flags; `--no-progress` and `--no-record` (the
    // first two) only where a live display runs and a run is recorded.
    const RUN: &[&str] = &[
        "no_progress",
        "no_record",
        "dir",
        "output",
        "helm",
        "kubeconfig",
        "context",
        "wait_for_api",
        "termination_log",
        "cache_dir",
        "no_chart_cache",
        "verbose",
        "quiet",
    ];
    match subcommand {
        "apply" | "destroy" => RUN,
        "diff" | "status" => RUN.split_at(2).1,
        "plan" | "check" | "template" => &[
            "dir",
            "output",
            "helm",
            "context",
            "cache_dir",
            "no_chart_cache",
            "verbose",
            "quiet",
        ],
        "graph" => &["dir", "output", "verbose", "quiet"],
        "version" => &["output"],
        "init" => &["context"],
        "runs" => &["output", "cache_dir"],
        "import" => &["dir", "verbose", "quiet"],
        _ => &[],
    }
}

/// helmfile's verbs, with the command that does their job here.
const HELMFILE_VERBS: &[(&str, &str)] = &[
    ("sync", "apply"),
    ("lint", "check"),
    ("build", "plan"),
    ("list", "status"),
    ("write-values", "template"),
    ("init", "import"),
];

/// An unknown subcommand that is one of helmfile's verbs gets clap's
/// "did you mean" tip naming the command that does its job here.
fn helmfile_verb_tip(mut e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::InvalidSubcommand {
        return e;
    }
    let used = match e.get(ContextKind::InvalidSubcommand) {
        Some(ContextValue::String(used)) => used.clone(),
        _ => return e,
    };
    if let Some((_, ours)) = HELMFILE_VERBS.iter().find(|(verb, _)| *verb == used) {
        e.insert(
            ContextKind::SuggestedSubcommand,
            ContextValue::String((*ours).to_string()),
        );
    }
    e
}

/// A missing `CLUSTER` gets a tip naming the clusters of the config root
/// (`--dir`, as given on the command line, else `.`), so the user need not
/// go and look.
fn clusters_tip(mut e: clap::Error, args: &[std::ffi::OsString]) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let missing_cluster = e.kind() == ErrorKind::MissingRequiredArgument
        && matches!(e.get(ContextKind::InvalidArg), Some(ContextValue::Strings(missing))
            if missing.iter().any(|a| a.starts_with("<CLUSTER>")));
    if !missing_cluster {
        return e;
    }
    let dir = args
        .iter()
        .zip(args.iter().skip(1))
        .find(|(flag, _)| *flag == "--dir")
        .map(|(_, dir)| PathBuf::from(dir))
        .or_else(|| {
            args.iter().find_map(|a| {
                a.to_str()
                    .and_then(|a| a.strip_prefix("--dir="))
                    .map(PathBuf::from)
            })
        })
        .unwrap_or_else(|| PathBuf::from("."));
    let names = crate::config::cluster_names(&dir);
    let tip = if names.is_empty() {
        format!(
            "there is no clusters/<name>/cluster.yaml under `{}`: pass --dir with your config root, or write one with `bootstrap init`",
            dir.display()
        )
    } else {
        format!(
            "the clusters under `{}`: {}",
            dir.display(),
            names.join(", ")
        )
    };
    e.insert(
        ContextKind::Suggested,
        ContextValue::StyledStrs(vec![tip.into()]),
    );
    e
}

/// Parses `args` with [`command`]'s help.
pub fn parse(args: &[std::ffi::OsString]) -> Result<Arguments, clap::Error> {
    use clap::FromArgMatches;
    let matches = command()
        .try_get_matches_from(args)
        .map_err(helmfile_verb_tip)
        .map_err(|e| clusters_tip(e, args))?;
    let mut arguments = Arguments::from_arg_matches(&matches)?;
    arguments.subcommand = matches.subcommand_name().unwrap_or_default().to_string();
    Ok(arguments)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Config {
        Arguments::try_parse_from(args)
            .unwrap()
            .into_config()
            .unwrap()
    }

    #[test]
    fn global_flags_anywhere() {
        let c = parse(&[
            "bootstrap",
            "plan",
            "infra",
            "--dir",
            "x",
            "--output",
            "json",
        ]);
        assert_eq!(c.global.dir, PathBuf::from("x"));
        assert_eq!(c.global.output, OutputFormat::Json);
        assert!(
            matches!(&c.command, Command::Plan(plan) if plan.clusters.clusters() == Clusters::One("infra".into()))
        );
    }

    /// Every example of every subcommand's help is a command line clap
    /// accepts (what comes after a `|` or a `>` is the shell's).
    #[test]
    fn the_help_examples_parse() {
        let command = command();
        let mut seen = 0;
        for sub in command.get_subcommands() {
            let help = sub
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            let examples = help
                .split_once("Examples:\n")
                .map(|(_, e)| e)
                .unwrap_or_default();
            for line in examples.lines() {
                let line = line.split(['|', '>']).next().unwrap().trim();
                let args: Vec<std::ffi::OsString> =
                    line.split_whitespace().map(Into::into).collect();
                assert_eq!(args[0], "bootstrap", "{line}");
                if let Err(e) = super::parse(&args) {
                    panic!("`{line}` is refused: {e}");
                }
                seen += 1;
            }
        }
        assert!(seen >= 20, "only {seen} examples");
    }

    /// A subcommand's help lists its own options first and the global ones
    /// apart, under their own heading.
    #[test]
    fn global_options_are_listed_apart() {
        let mut command = command();
        command.build();
        let help = command
            .find_subcommand_mut("apply")
            .unwrap()
            .render_help()
            .to_string();
        let (own, global) = help.split_once("Global options:").unwrap();
        // The flags a part lists: the `--flag` each option line starts with.
        let listed = |part: &str| -> Vec<String> {
            part.lines()
                .map(str::trim_start)
                .filter(|l| l.starts_with('-'))
                .filter_map(|l| l.split_once("--"))
                .filter(|(before, _)| before.is_empty() || before.ends_with(", "))
                .map(|(_, flag)| format!("--{}", flag.split([' ', '.']).next().unwrap()))
                .collect()
        };
        let (own, global) = (listed(own), listed(global));
        for flag in ["--dry-run", "--timeout", "--only"] {
            assert!(own.contains(&flag.to_string()), "{flag}: {own:?}");
        }
        for flag in ["--dir", "--output", "--context", "--verbose", "--quiet"] {
            assert!(
                global.contains(&flag.to_string()) && !own.contains(&flag.to_string()),
                "{flag}: {own:?} {global:?}"
            );
        }
    }

    #[test]
    fn clap_definition_is_consistent() {
        command().debug_assert();
    }
}
