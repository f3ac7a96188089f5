//! The arguments of each subcommand, declared once: what `commands::` runs,
//! with methods for what they derive (the clusters chosen, the engine's
//! options, the helmfile of an import), and the selections several share.

use std::path::PathBuf;
use std::time::Duration;

use clap::Subcommand as ClapSubcommand;

use super::{
    Command, GraphFormat, OutputFormat, RunValuesArgs, SchemaKind, parse_concurrency,
    parse_duration_arg, parse_selector,
};
use crate::error::Error;
use crate::reporter::Verbosity;

/// `CLUSTER`, `--all` or `--clusters A,B`: the clusters of `plan`, `check`,
/// `apply` and `status`, declared once. `--context` names one cluster's
/// context, so it goes with `CLUSTER` only.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterSelection {
    /// The cluster: `clusters/<CLUSTER>/cluster.yaml` under --dir.
    #[arg(required_unless_present_any = ["all", "clusters"], conflicts_with_all = ["all", "clusters"], add = clap_complete::ArgValueCandidates::new(crate::complete::clusters))]
    cluster: Option<String>,
    /// Every cluster of the config root, each with its own kube context (and
    /// the lints across clusters); `apply` runs them concurrently, each with
    /// its own lock and ledger (docs/fleet.md).
    #[arg(long, conflicts_with_all = ["clusters", "context"])]
    all: bool,
    /// These clusters, e.g. `--clusters infra,apps`.
    #[arg(
        long,
        value_name = "NAMES",
        value_delimiter = ',',
        conflicts_with = "context"
    )]
    clusters: Vec<String>,
}

impl ClusterSelection {
    /// The clusters chosen (clap makes the three exclusive and requires one).
    pub fn clusters(&self) -> Clusters {
        match (&self.cluster, self.all) {
            (Some(cluster), false) => Clusters::One(cluster.clone()),
            (None, false) if !self.clusters.is_empty() => Clusters::Named(self.clusters.clone()),
            _ => Clusters::All,
        }
    }
}

/// `bootstrap plan`.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub clusters: ClusterSelection,
    #[command(flatten)]
    pub selection: Selection,
}

/// `bootstrap graph`.
#[derive(Debug, Clone, clap::Args)]
pub struct GraphArgs {
    /// The cluster: `clusters/<CLUSTER>/cluster.yaml` under --dir.
    #[arg(add = clap_complete::ArgValueCandidates::new(crate::complete::clusters))]
    pub cluster: String,
    /// dot, mermaid or json (default: json with `--output json`, else dot).
    #[arg(long, value_enum)]
    format: Option<GraphFormat>,
}

impl GraphArgs {
    /// The format printed: `--format`, else what `--output` asks for.
    pub fn format(&self, output: OutputFormat) -> Result<GraphFormat, Error> {
        let asked = if output == OutputFormat::Yaml {
            "yaml"
        } else {
            "json"
        };
        match (self.format, output.structured().is_some()) {
            (None, true) | (Some(GraphFormat::Json), _) => Ok(GraphFormat::Json),
            (None, false) => Ok(GraphFormat::Dot),
            (Some(other), true) => Err(Error::Usage(format!(
                "`--output {asked}` prints the graph as {}; drop `--format {}` or `--output {asked}`",
                asked.to_uppercase(),
                match other {
                    GraphFormat::Mermaid => "mermaid",
                    _ => "dot",
                }
            ))),
            (Some(other), false) => Ok(other),
        }
    }
}

/// `bootstrap template`.
#[derive(Debug, Clone, clap::Args)]
pub struct TemplateArgs {
    /// The cluster: `clusters/<CLUSTER>/cluster.yaml` under --dir.
    #[arg(add = clap_complete::ArgValueCandidates::new(crate::complete::clusters))]
    pub cluster: String,
    /// Only this release (name or namespace/name).
    pub release: Option<String>,
    /// Print values that look like secrets, and Secret data in manifests, instead of redacting them.
    #[arg(long)]
    pub show_secrets: bool,
    /// The CRD-phase render: values with `crdValues`; with --manifests, CRDs included.
    #[arg(long)]
    pub crds: bool,
    /// Also render each chart with `helm template` (needs helm 3.13+, may download charts).
    #[arg(long)]
    pub manifests: bool,
    #[command(flatten)]
    pub selection: Selection,
    #[command(flatten)]
    pub values: RunValuesArgs,
}

/// `bootstrap apply`.
#[derive(Debug, Clone, clap::Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub clusters: ClusterSelection,
    /// With --all or --clusters: how many clusters run at once (default: all).
    #[arg(long, value_name = "N", value_parser = parse_concurrency)]
    pub cluster_concurrency: Option<usize>,
    /// Do everything except change the cluster; say what would change.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    pub selection: Selection,
    #[command(flatten)]
    pub values: RunValuesArgs,
    /// Parallel helm operations.
    #[arg(long, value_name = "N", default_value_t = crate::apply::DEFAULT_CONCURRENCY, value_parser = parse_concurrency)]
    concurrency: usize,
    /// Bound the whole run, e.g. 30m.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_arg)]
    pub timeout: Option<Duration>,
    /// Start no new release after the first failure.
    #[arg(long)]
    fail_fast: bool,
    /// Upgrade releases even when they are unchanged.
    #[arg(long)]
    force: bool,
}

impl ApplyArgs {
    /// The engine's options; `-v` streams hook output.
    pub fn options(&self, verbosity: Verbosity) -> crate::apply::Options {
        crate::apply::Options {
            dry_run: self.dry_run,
            concurrency: self.concurrency,
            fail_fast: self.fail_fast,
            force: self.force,
            verbose: verbosity == Verbosity::Verbose,
        }
    }
}

/// `bootstrap diff`.
#[derive(Debug, Clone, clap::Args)]
pub struct DiffArgs {
    /// The cluster: `clusters/<CLUSTER>/cluster.yaml` under --dir.
    #[arg(add = clap_complete::ArgValueCandidates::new(crate::complete::clusters))]
    pub cluster: String,
    /// Only these releases (name or namespace/name); default: every release.
    #[arg(value_name = "RELEASE")]
    releases: Vec<String>,
    /// Exit 1 when anything would change, 0 when nothing would (like `git diff --exit-code`).
    #[arg(long)]
    pub exit_code: bool,
    #[command(flatten)]
    selection: Selection,
    #[command(flatten)]
    pub values: RunValuesArgs,
}

impl DiffArgs {
    /// `RELEASE…` and `--only`, plus what they need unless `--no-needs`:
    /// releases named as arguments are exactly those.
    pub fn selection(&self) -> Selection {
        Selection {
            no_needs: self.selection.no_needs || !self.releases.is_empty(),
            only: self
                .releases
                .iter()
                .chain(&self.selection.only)
                .cloned()
                .collect(),
            selector: self.selection.selector.clone(),
        }
    }
}

/// `bootstrap status`.
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub clusters: ClusterSelection,
    #[command(flatten)]
    pub selection: Selection,
}

/// `bootstrap destroy`.
#[derive(Debug, Clone, clap::Args)]
pub struct DestroyArgs {
    /// The cluster: `clusters/<CLUSTER>/cluster.yaml` under --dir.
    #[arg(add = clap_complete::ArgValueCandidates::new(crate::complete::clusters))]
    pub cluster: String,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Also delete the CRDs the CRD phase applies, once every release is gone.
    #[arg(long)]
    crds: bool,
    /// Only this release (repeatable); what it needs stays installed.
    #[arg(long, value_name = "NAME", add = clap_complete::ArgValueCandidates::new(crate::complete::releases))]
    pub only: Vec<String>,
    /// Releases whose labels match (helmfile syntax: `key=value`, `key!=value`; comma = AND; repeat for OR).
    #[arg(long, short = 'l', value_name = "SELECTOR", value_parser = parse_selector)]
    pub selector: Vec<crate::select::Selector>,
    /// Say what would be removed; change nothing.
    #[arg(long)]
    dry_run: bool,
}

impl DestroyArgs {
    pub fn options(&self) -> crate::destroy::Options {
        crate::destroy::Options {
            dry_run: self.dry_run,
            crds: self.crds,
        }
    }
}

/// `bootstrap check`.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub clusters: ClusterSelection,
    /// The directory Flux's GitRepository points at (overrides `flux.root`).
    #[arg(long, value_name = "DIR", conflicts_with = "all")]
    pub flux_root: Option<PathBuf>,
    /// The path the root Flux Kustomization reconciles, relative to the root.
    #[arg(long, value_name = "PATH", conflicts_with = "all")]
    pub flux_entrypoint: Option<PathBuf>,
}

/// `bootstrap schema`.
#[derive(Debug, Clone, clap::Args)]
pub struct SchemaArgs {
    /// Which format: `cluster` (clusters/<name>/cluster.yaml), `release`
    /// (releases/*.yaml), or `events` (apply's and destroy's `--output json|yaml`).
    #[arg(value_enum, default_value_t = SchemaKind::Release)]
    pub kind: SchemaKind,
}

/// `bootstrap runs`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunsArgs {
    /// Only this cluster's runs.
    #[arg(add = clap_complete::ArgValueCandidates::new(crate::complete::clusters))]
    pub cluster: Option<String>,
    /// Print the Nth newest run's record (1: the last run) as it was
    /// written: its events as JSON Lines, then how it exited.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "1")]
    pub show: Option<usize>,
}

/// `bootstrap init`.
#[derive(Debug, Clone, clap::Args)]
pub struct InitArgs {
    /// The config root to write (created if missing).
    #[arg(value_name = "DIR", default_value = ".")]
    pub root: PathBuf,
    /// The cluster's name: `clusters/<NAME>/cluster.yaml`.
    #[arg(long, default_value = "dev")]
    pub cluster: String,
    /// Overwrite files that exist.
    #[arg(long)]
    pub force: bool,
}

/// `bootstrap completions`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete for, e.g. bash, zsh or fish.
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Clone, ClapSubcommand)]
pub enum ImportSource {
    /// Convert helmfile state files (helmfile.yaml, helmfile.yaml.gotmpl, helmfile.d/) into
    /// releases/*.yaml and clusters/CLUSTER/cluster.yaml under --dir; exit 1 when something
    /// was not converted (listed with file and line).
    Helmfile(ImportHelmfileArgs),
}

/// `bootstrap import helmfile`.
#[derive(Debug, Clone, clap::Args)]
pub struct ImportHelmfileArgs {
    /// helmfiles or directories, in the order helmfile would run them.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// The cluster to write: clusters/<CLUSTER>/cluster.yaml under --dir.
    #[arg(long, value_name = "NAME")]
    pub cluster: String,
    /// Overwrite files that already exist.
    #[arg(long)]
    pub force: bool,
    /// The helmfile that renders the state files (default: `helmfile` on PATH when there
    /// is one; without helmfile the importer evaluates its own template subset).
    #[arg(long, value_name = "PATH", env = "BOOTSTRAP_HELMFILE")]
    helmfile: Option<PathBuf>,
    /// Evaluate the templates with the importer's own subset even when helmfile is installed.
    #[arg(long, conflicts_with = "helmfile")]
    no_helmfile: bool,
    /// Never run the repository's commands: when rendering with helmfile would (an `exec`
    /// template call, a `prepare` hook), the importer's own subset reads the files instead.
    #[arg(long)]
    pub no_exec: bool,
    /// helmfile's --environment to render with (needs helmfile).
    #[arg(long, value_name = "NAME")]
    pub environment: Option<String>,
    /// The directory Flux's GitRepository points at (default: found in the repository
    /// of the helmfiles); the releases its HelmReleases manage are written `ownership: handover`.
    #[arg(long, value_name = "DIR")]
    pub flux_root: Option<PathBuf>,
    /// The path the root Flux Kustomization reconciles, relative to --flux-root (default:
    /// found there).
    #[arg(long, value_name = "PATH", requires = "flux_root")]
    pub flux_entrypoint: Option<PathBuf>,
}

impl ImportHelmfileArgs {
    /// Which helmfile renders the import.
    pub fn helmfile(&self) -> HelmfileChoice {
        if self.no_helmfile {
            return HelmfileChoice::No;
        }
        match &self.helmfile {
            Some(p) if !p.as_os_str().is_empty() => HelmfileChoice::At(p.clone()),
            _ => HelmfileChoice::Find,
        }
    }
}

/// `--only`, `--selector` and `--no-needs` of plan, apply, diff, template
/// and status, declared once (docs/design.md#selection).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Selection {
    /// Only this release (repeatable), plus what it needs unless --no-needs.
    #[arg(long, value_name = "NAME", add = clap_complete::ArgValueCandidates::new(crate::complete::releases))]
    pub only: Vec<String>,
    /// Releases whose labels match (helmfile syntax: `key=value`, `key!=value`; comma = AND; repeat for OR).
    #[arg(long, short = 'l', value_name = "SELECTOR", value_parser = parse_selector)]
    pub selector: Vec<crate::select::Selector>,
    /// With --only or --selector: exactly those releases, not what they need.
    #[arg(long)]
    pub no_needs: bool,
}

impl Selection {
    /// `--no-needs` narrows what `--only`/`--selector` choose: alone it
    /// means nothing, which is a usage error.
    pub(super) fn check(&self) -> Result<(), Error> {
        if self.no_needs && self.only.is_empty() && self.selector.is_empty() {
            return Err(Error::Usage(
                "--no-needs runs exactly the releases --only or --selector chooses; add one of them"
                    .into(),
            ));
        }
        Ok(())
    }

    /// `plan` narrowed to the selection (all of it when nothing is chosen).
    pub fn apply(&self, plan: crate::plan::Plan) -> Result<crate::plan::Plan, Error> {
        plan.select(&self.only, &self.selector, self.no_needs)
    }
}

/// The clusters a command runs on: one, `--all`, or `--clusters a,b`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clusters {
    One(String),
    All,
    Named(Vec<String>),
}

/// Which helmfile renders an import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HelmfileChoice {
    /// `helmfile` on PATH, when there is one.
    Find,
    /// `--helmfile PATH` / `BOOTSTRAP_HELMFILE`: it must run.
    At(PathBuf),
    /// `--no-helmfile`: the importer's own template subset.
    No,
}

impl Command {
    /// What clap cannot say about the arguments: checked before the
    /// command runs, so a usage error changes nothing.
    pub(super) fn check(&self, output: OutputFormat) -> Result<(), Error> {
        match self {
            Command::Graph(args) => args.format(output).map(drop),
            Command::Template(TemplateArgs { selection, .. })
            | Command::Plan(PlanArgs { selection, .. })
            | Command::Apply(ApplyArgs { selection, .. })
            | Command::Diff(DiffArgs { selection, .. })
            | Command::Status(StatusArgs { selection, .. }) => selection.check(),
            _ => Ok(()),
        }
    }
}
