//! `bootstrap diff CLUSTER [RELEASE…]`: what `apply` would change, per
//! release: chart and version, values as key paths, and the manifests helm
//! renders now against the deployed ones (docs/design.md#diff). Read-only:
//! no lock, no write; the CRD phase is rendered (not applied) so charts see
//! the API versions they will see at install.
//!
//! Exit codes: 0, or with `--exit-code` 1 when anything would change (like
//! `git diff --exit-code`); 2 for config and prerequisites; 1 when helm or
//! the cluster cannot be read.

use futures::StreamExt;
use serde_json::json;

use crate::change::{self, Kind, Op, ReleaseChange};
use crate::cli::{Config, DiffArgs, Verbosity};
use crate::error::{Error, Failure};
use crate::helm::{DeployedRelease, Helm};
use crate::kube::client::Connection;
use crate::ledger::{self, Ledger};
use crate::plan::Plan;
use crate::release::{Ownership, Release};
use crate::reporter::paint;

/// Releases compared at once (each is a `helm template` and two `helm get`).
const CONCURRENCY: usize = 4;

/// What `diff` found in one cluster.
struct Found {
    changes: Vec<ReleaseChange>,
    api_versions: Vec<String>,
    /// Live conflicts: `apply` would refuse before changing anything.
    conflicts: Vec<String>,
}

pub(super) fn run(
    config: &Config,
    args: &DiffArgs,
    out: &mut dyn std::io::Write,
) -> Result<(), Error> {
    let run = crate::config::run_values(&args.values.files, &args.values.sets)?;
    let whole = super::load_plan(&config.global, &args.cluster)?.with_run_values(&run);
    let chosen = args.selection().apply(whole.clone())?;
    let found = crate::run::block_on(read(config, &whole, &chosen))?;
    for conflict in &found.conflicts {
        eprintln!("warning: apply would refuse: {conflict}");
    }
    match config.structured() {
        Some(format) => super::write_document(out, format, &document(&args.cluster, &found)),
        None => super::write(
            out,
            &text(
                &args.cluster,
                &found.changes,
                config.verbosity,
                console::colors_enabled(),
            ),
        ),
    }?;
    let changed = found.changes.iter().filter(|c| changes(c)).count();
    if args.exit_code && changed > 0 {
        return Err(Error::Changes(format!(
            "{} of cluster `{}` would change",
            crate::plural::count(changed, "release"),
            args.cluster
        )));
    }
    Ok(())
}

fn changes(change: &ReleaseChange) -> bool {
    matches!(change.change, Kind::Install | Kind::Upgrade)
}

/// Reads the cluster and compares every chosen release. `whole` is the
/// cluster's whole plan: its CRD phase decides the API versions.
async fn read(config: &Config, whole: &Plan, chosen: &Plan) -> Result<Found, Error> {
    let crate::run::Prepared {
        helm, connection, ..
    } = crate::run::prerequisites(config.target(), whole).await?;
    let live = crate::ownership::gather(chosen, &helm, &connection).await?;
    let crds = crate::crds::render(&helm, whole)
        .await
        .map_err(|e| Error::from(Failure::ApiVersions { source: e.into() }))?;
    let api_versions = crate::crds::api_versions(&crds);
    let ledger = Ledger::new(&connection.client);
    let recorded = ledger.entries().await?;
    let key = ledger.digest_key(false).await?;
    let compared: Vec<Result<ReleaseChange, Error>> =
        futures::stream::iter(chosen.installed().map(|release| {
            let deployed = live.listed.get(&release.id);
            let adopted = (release.ownership == Ownership::Handover)
                .then(|| live.adopted_by(&release.id).map(|hr| hr.name.clone()))
                .flatten();
            let entry = recorded.get(&ledger::key(&release.id));
            let (helm, connection, api_versions, key) = (&helm, &connection, &api_versions, &key);
            async move {
                let mut found = compare(helm, connection, release, deployed, api_versions).await?;
                if let Some(by) = adopted {
                    // Flux's now: apply never upgrades it (docs/design.md#handover).
                    found.change = Kind::Unchanged;
                    found.reasons = vec![format!(
                        "adopted by Flux (HelmRelease {by}); apply leaves it to Flux"
                    )];
                } else if found.change == Kind::Unchanged
                    && !entry.is_some_and(|e| e.matches(release, key.as_ref()))
                {
                    found.change = Kind::Upgrade;
                    found.reasons.push(match entry {
                        Some(_) => "the ledger records another version or values".into(),
                        None => "not recorded in the ownership ledger".into(),
                    });
                }
                Ok(found)
            }
        }))
        .buffered(CONCURRENCY)
        .collect()
        .await;
    Ok(Found {
        changes: compared.into_iter().collect::<Result<_, _>>()?,
        api_versions,
        conflicts: live
            .conflicts
            .iter()
            .map(|c| format!("{}: {}: {}", c.release, c.object, c.message))
            .collect(),
    })
}

async fn compare<H: Helm>(
    helm: &H,
    connection: &Connection,
    release: &Release,
    deployed: Option<&DeployedRelease>,
    api_versions: &[String],
) -> Result<ReleaseChange, Error> {
    let reasons = match deployed {
        Some(d) if d.is_pending() => vec![format!(
            "is {} in Helm: apply refuses it until it is recovered with {}",
            d.status,
            d.recovery()
        )],
        Some(d) if d.status != "deployed" => vec![format!("helm status is {}", d.status)],
        _ => Vec::new(),
    };
    change::compare(
        helm,
        &connection.target,
        release,
        deployed,
        api_versions,
        reasons,
    )
    .await
    .map_err(|e| {
        Failure::Diff {
            release: release.id.to_string(),
            source: e.into(),
        }
        .into()
    })
}

/// docs/design.md#diff-json.
fn document(cluster: &str, found: &Found) -> serde_json::Value {
    let releases: Vec<serde_json::Value> = found
        .changes
        .iter()
        .map(|c| {
            let mut entry = json!(c);
            entry["summary"] = json!(c.describe());
            entry
        })
        .collect();
    json!({
        "cluster": cluster,
        "changed": found.changes.iter().any(changes),
        "releases": releases,
        "apiVersions": found.api_versions,
    })
}

/// The text output: per changed release its summary line, its values and
/// its objects' diffs; unchanged releases only with `-v`; `-q` prints the
/// summary lines alone. The last line counts what would change.
fn text(cluster: &str, changes: &[ReleaseChange], verbosity: Verbosity, color: bool) -> String {
    let green = || console::Style::new().green();
    let red = || console::Style::new().red();
    let yellow = || console::Style::new().yellow();
    let mut out = String::new();
    for change in changes {
        let shown = self::changes(change) || !change.reasons.is_empty();
        if !shown && verbosity != Verbosity::Verbose {
            continue;
        }
        let style = match change.change {
            Kind::Install => green().bold(),
            Kind::Upgrade => yellow().bold(),
            Kind::Unchanged => console::Style::new(),
        };
        out.push_str(&paint(color, style, &change.summary_line()));
        out.push('\n');
        if verbosity == Verbosity::Quiet || !self::changes(change) {
            continue;
        }
        if !change.values.is_empty() {
            out.push_str("  values:\n");
            for value in &change.values {
                let style = match value.op {
                    Op::Add => green(),
                    Op::Remove => red(),
                    Op::Change => yellow(),
                };
                out.push_str(&format!("    {}\n", paint(color, style, &value.line())));
            }
        }
        for object in &change.objects {
            for line in object.diff.lines() {
                let style = if line.starts_with("+++") || line.starts_with("---") {
                    console::Style::new().bold()
                } else if line.starts_with('+') {
                    green()
                } else if line.starts_with('-') {
                    red()
                } else if line.starts_with("@@") {
                    console::Style::new().cyan()
                } else {
                    console::Style::new()
                };
                out.push_str(&paint(color, style, line));
                out.push('\n');
            }
        }
    }
    out.push_str(&totals(cluster, changes));
    out
}

/// `infra: 1 to install, 2 to upgrade, 4 unchanged`, or `infra: no changes (7 releases)`.
fn totals(cluster: &str, changes: &[ReleaseChange]) -> String {
    let count = |kind: Kind| changes.iter().filter(|c| c.change == kind).count();
    let (install, upgrade, unchanged) = (
        count(Kind::Install),
        count(Kind::Upgrade),
        count(Kind::Unchanged),
    );
    if install + upgrade == 0 {
        return format!(
            "{cluster}: no changes ({})\n",
            crate::plural::count(unchanged, "release")
        );
    }
    let mut parts = Vec::new();
    if install > 0 {
        parts.push(format!("{install} to install"));
    }
    if upgrade > 0 {
        parts.push(format!("{upgrade} to upgrade"));
    }
    if unchanged > 0 {
        parts.push(format!("{unchanged} unchanged"));
    }
    format!("{cluster}: {}\n", parts.join(", "))
}
