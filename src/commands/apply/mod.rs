//! `bootstrap apply CLUSTER`: wiring of prerequisites, reporter, signals and
//! the global timeout around [`crate::apply::run`].

use std::sync::Arc;
use std::time::Duration;

use crate::apply;
use crate::cli::{ApplyArgs, Clusters, Config};
use crate::error::{Error, Failure};
use crate::event::{Event, Summary, Verdict};
use crate::gate;
use crate::plan::Plan;
use crate::run::{self, Session};

mod fleet;

pub(super) fn run(config: &Config, args: &ApplyArgs) -> Result<(), Error> {
    // The summary's duration is the whole run, from here.
    let begun = std::time::Instant::now();
    let run_values = crate::config::run_values(&args.values.files, &args.values.sets)?;
    // Every cluster's config is read and validated before the first change
    // to any cluster: a config error (exit 2) stops them all.
    let linted = super::linted_with(
        &config.global,
        &args.clusters.clusters(),
        config.global.context.as_deref(),
        &run_values,
    )?;
    if let Clusters::One(cluster) = &args.clusters.clusters() {
        let (plan, findings) = linted
            .into_iter()
            .next()
            .ok_or_else(|| Failure::NotLoaded {
                cluster: cluster.to_string(),
            })?;
        let notices = preflight(&plan, findings)?;
        let plan = args.selection.apply(plan)?;
        return run::block_on(run_async(config, args, plan, notices, begun, None));
    }
    run::block_on(fleet::run(config, args, linted, begun))
}

/// The offline checks of apply's preflight (docs/design.md#phases-of-apply),
/// on the whole cluster whatever `--only` selects: the lints
/// (docs/design.md#lints), then, when the cluster has `flux:`, the Flux
/// ownership scan (`check`'s, charts not rendered: that sharpens a warning
/// only). An error-level finding that `lints.ignore` does not list refuses
/// the run before helm or the cluster is touched, a lint's before the tree
/// is read. Returns what the run shows: the warnings and the
/// `gitops_scanned` event.
fn preflight(plan: &Plan, mut findings: gate::Findings) -> Result<Vec<Event>, Error> {
    findings.refusal().map_err(Failure::Refused)?;
    if let Some(tree) = gate::Tree::configured(plan) {
        findings = findings.with_tree(plan, tree, gate::Charts::Inferred)?;
        findings.refusal().map_err(Failure::Refused)?;
    }
    Ok(findings.notices())
}

/// The run's session: the process's own, or its cluster's place among
/// many (tagged lines, a board of the shared screen).
fn session(
    config: &Config,
    plan: &Plan,
    fleet: Option<&fleet::Slot>,
    begun: std::time::Instant,
) -> Session {
    match fleet {
        None => Session::start(
            config.structured(),
            config.verbosity,
            config.global.no_progress,
            super::record_for(config, &plan.cluster.name, "apply"),
            begun,
        ),
        Some(slot) => Session::for_cluster(
            (&plan.cluster.name, slot.width),
            config.structured(),
            config.verbosity,
            &slot.streams,
            slot.screen.as_ref().map(|(screen, boards)| {
                let index = boards
                    .iter()
                    .position(|c| *c == plan.cluster.name)
                    .unwrap_or(0);
                (screen, index)
            }),
            super::record_for(config, &plan.cluster.name, "apply"),
            begun,
        ),
    }
}

/// One cluster's apply. `fleet`: its place among many clusters in one
/// process (output tagged with its name); `None` for a single cluster.
async fn run_async(
    config: &Config,
    args: &ApplyArgs,
    plan: Plan,
    notices: Vec<Event>,
    begun: std::time::Instant,
    fleet: Option<&fleet::Slot>,
) -> Result<(), Error> {
    // `--timeout` bounds the whole run, the wait for the API server included.
    let run::Prepared {
        helm,
        connection,
        version,
    } = run::prerequisites(config.target().timed(args.timeout), &plan).await?;
    helm_flags_supported(&plan, &version)?;

    let session = session(config, &plan, fleet, begun);
    // What the prerequisites found, shown once the run has started
    // (`run_started` is the first event).
    let mut earlier = vec![
        Event::PreflightStep {
            step: format!("helm {}", version.raw),
        },
        Event::PreflightStep {
            step: format!(
                "API server of context `{}` answers",
                connection.target.context.as_deref().unwrap_or("(current)")
            ),
        },
    ];
    earlier.extend(notices);
    let timeout = run::Timeout::start(args.timeout, begun, &session);
    let before = begun.elapsed();
    let context = run::Run {
        plan: &plan,
        helm: Arc::new(helm),
        connection: &connection,
        events: session.events.clone(),
        stop: session.stop.clone(),
        deadline: timeout.deadline(),
    };
    let result = apply::run(&context, &args.options(config.verbosity), earlier)
        .await
        .map(|mut summary| {
            // Loading, linting and the prerequisites are preflight too.
            if let Some(phases) = &mut summary.phases {
                phases.preflight += before;
            }
            summary.duration = begun.elapsed();
            summary
        });
    let timed_out = timeout.reached();
    drop((timeout, context));
    session.finish(result.as_ref().ok()).await;

    match result {
        Ok(summary) => {
            outcome(&summary, timed_out, args.timeout).map_err(|e| Error::Summarized(Box::new(e)))
        }
        Err(Error::Interrupted) if timed_out => Err(Failure::TimeoutBeforeStart {
            timeout: args.timeout,
        }
        .into()),
        Err(e) => Err(e),
    }
}

/// Every `helm:` key of the releases of the run must map to a flag the
/// detected helm has (docs/design.md#defaults): exit 2 before anything
/// changes, one error per key and file that set it.
fn helm_flags_supported(plan: &Plan, version: &crate::helm::HelmVersion) -> Result<(), Error> {
    let mut unsupported: std::collections::BTreeMap<
        (String, std::path::PathBuf),
        (String, Vec<String>),
    > = Default::default();
    for release in plan.installed() {
        for (key, flag) in crate::helm::args::unsupported(&release.helm, version.major) {
            let key = format!("helm.{key}");
            let file = release
                .helm
                .origin
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, file)| file.clone())
                .unwrap_or_else(|| release.file.clone());
            unsupported
                .entry((key, file))
                .or_insert_with(|| (flag, Vec::new()))
                .1
                .push(release.id.to_string());
        }
    }
    if unsupported.is_empty() {
        return Ok(());
    }
    Err(Error::Config(
        unsupported
            .into_iter()
            .map(|((key, file), (flag, releases))| {
                crate::error::Problem::new(format!(
                    "`{key}` (for {}) needs helm's `{flag}`, which helm {} does not have; remove it, or run with a helm that has it (Helm 4: --helm PATH)",
                    releases.join(", "),
                    version.raw
                ))
                .file(file)
            })
            .collect(),
    ))
}

fn outcome(summary: &Summary, timed_out: bool, timeout: Option<Duration>) -> Result<(), Error> {
    match summary.verdict() {
        Verdict::Ok => Ok(()),
        _ if timed_out => Err(Failure::TimedOut { timeout }.into()),
        Verdict::Interrupted => Err(Error::Interrupted),
        Verdict::LockLost(why) => Err(crate::run::lock_lost("apply", &summary.cluster, &why)),
        Verdict::Failed { releases } => Err(Failure::ApplyFailed {
            cluster: summary.cluster.clone(),
            releases,
        }
        .into()),
    }
}
