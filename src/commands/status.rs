//! `bootstrap status CLUSTER`: live state of each release, read-only.
//!
//! Exit codes: 0 when the cluster could be read, even when releases are not
//! installed, not ready or drifted (status is informational; `apply` fixes
//! those). 1 when a live conflict exists (a Flux HelmRelease targets a
//! bootstrap release, its Helm secret carries Flux's labels, or it is
//! pending-*): `apply` would refuse, so scripts should stop too. The report is
//! printed in full either way. 1 too for an error-level live lint
//! (docs/design.md#lints) not in `lints.ignore`. 1 also when helm, the ledger or the conflict
//! checks cannot be read; 2 for the usual prerequisites (helm, context).

use crate::cli::{Clusters, Config, StatusArgs, Verbosity};
use crate::error::Error;
use crate::gate::Findings;
use crate::plural::count;
use crate::status::{self, Report};

pub(super) fn run(
    config: &Config,
    args: &StatusArgs,
    out: &mut dyn std::io::Write,
) -> Result<(), Error> {
    let (clusters, selection) = (&args.clusters.clusters(), &args.selection);
    if let Clusters::One(cluster) = clusters {
        let plan = selection.apply(super::load_plan(&config.global, cluster)?)?;
        let (report, lints) = crate::run::block_on(read(config, &plan))?;
        write(config, out, &report, &lints)?;
        return verdict(&report, &lints);
    }
    // Many clusters (docs/fleet.md): every config first, then every cluster
    // read concurrently; one cluster that cannot be read never hides another.
    let plans: Vec<crate::plan::Plan> = super::linted(&config.global, clusters, None)?
        .into_iter()
        .map(|(plan, _)| selection.apply(plan))
        .collect::<Result<_, _>>()?;
    let results = crate::run::block_on(async {
        Ok::<_, Error>(futures::future::join_all(plans.iter().map(|plan| read(config, plan))).await)
    })?;
    let mut documents = Vec::new();
    let mut codes = Vec::new();
    let mut failed = Vec::new();
    for (plan, result) in plans.iter().zip(results) {
        let cluster = &plan.cluster.name;
        let outcome = match result {
            Ok((report, lints)) => {
                match config.structured() {
                    Some(_) => documents.push(document(&report, &lints)),
                    None => {
                        super::write(out, &format!("cluster `{cluster}`:\n"))?;
                        write(config, out, &report, &lints)?;
                        super::write(out, "\n")?;
                    }
                }
                verdict(&report, &lints)
            }
            Err(e) => {
                if config.structured().is_some() {
                    let mut error = e.to_json();
                    error["cluster"] = serde_json::json!(cluster);
                    documents.push(error);
                }
                Err(e)
            }
        };
        if let Err(e) = outcome {
            eprint!(
                "{}",
                e.render()
                    .lines()
                    .map(|l| format!("{cluster}: {l}\n"))
                    .collect::<String>()
            );
            failed.push(format!("{cluster} (exit {})", e.exit_code()));
            codes.push(e.exit_code());
        }
    }
    if let Some(format) = config.structured() {
        super::write_document(out, format, &serde_json::json!({ "clusters": documents }))?;
    }
    let code = crate::error::worst(codes);
    if code == crate::error::EXIT_OK {
        return Ok(());
    }
    Err(Error::Clusters {
        message: format!(
            "status of {} of {} clusters needs attention: {}",
            failed.len(),
            plans.len(),
            failed.join(", ")
        ),
        code,
    })
}

/// One cluster's report and its live lints.
async fn read(config: &Config, plan: &crate::plan::Plan) -> Result<(Report, Findings), Error> {
    let crate::run::Prepared {
        helm, connection, ..
    } = crate::run::prerequisites(config.target(), plan).await?;
    let report = status::collect(plan, &helm, &connection).await?;
    // The live lints (docs/design.md#lints), as apply's preflight runs them.
    Ok((report, Findings::live(plan, &connection.client).await))
}

fn document(report: &Report, lints: &Findings) -> serde_json::Value {
    let mut doc = serde_json::json!(report);
    doc["lints"] = serde_json::json!(lints.lints);
    doc
}

fn write(
    config: &Config,
    out: &mut dyn std::io::Write,
    report: &Report,
    lints: &Findings,
) -> Result<(), Error> {
    match config.structured() {
        Some(format) => super::write_document(out, format, &document(report, lints)),
        None => {
            let mut text = render(report, config.verbosity);
            if !lints.lints.is_empty() {
                text.push_str("\nlive lints:\n\n");
                text.push_str(&crate::finding::render_text(&lints.lints));
            }
            super::write_findings(out, &text)
        }
    }
}

/// Exit 1 when `apply` would refuse: a live conflict or a blocking live lint.
fn verdict(report: &Report, lints: &Findings) -> Result<(), Error> {
    let conflicts = report.conflicts().count();
    let blocking = lints.errors();
    if blocking > 0 && conflicts == 0 {
        return Err(Error::Findings(format!(
            "{blocking} error-level live lint finding{} in cluster `{}`: `bootstrap apply` would refuse; see above",
            if blocking == 1 { "" } else { "s" },
            report.cluster
        )));
    }
    if conflicts > 0 {
        return Err(Error::Findings(format!(
            "{conflicts} live conflict{} in cluster `{}`: `bootstrap apply` would refuse; see the conflicts above",
            if conflicts == 1 { "" } else { "s" },
            report.cluster
        )));
    }
    Ok(())
}

/// Nothing to do for this release: deployed, up to date, ready, no conflict
/// and, for a handover release, no drift (what `status -q` leaves out).
fn settled(r: &status::ReleaseStatus) -> bool {
    r.deployed.as_ref().is_some_and(|d| d.status == "deployed")
        && r.drift == "up to date"
        && r.ready.ok
        && r.conflicts.is_empty()
        && !r
            .handover
            .as_deref()
            .is_some_and(|h| h.starts_with("drifted"))
}

/// The table; `-q` keeps only the releases that need attention, `-v` adds
/// each release's values digest and every workload judged.
pub(super) fn render(report: &Report, verbosity: Verbosity) -> String {
    let header = [
        "release", "chart", "desired", "deployed", "helm", "rev", "owner", "drift", "ready",
    ]
    .map(String::from);
    let quiet = verbosity == Verbosity::Quiet;
    let shown: Vec<&status::ReleaseStatus> = report
        .releases
        .iter()
        .filter(|r| !quiet || !settled(r))
        .collect();
    let rows: Vec<[String; 9]> = shown
        .iter()
        .map(|r| {
            let deployed = r.deployed.as_ref();
            [
                r.release.to_string(),
                r.chart.clone(),
                dash(&r.desired.version),
                deployed.map_or("-".into(), |d| dash(&d.version)),
                deployed.map_or("not installed".into(), |d| d.status.clone()),
                deployed.map_or("-".into(), |d| d.revision.to_string()),
                r.owner.clone(),
                r.drift.clone(),
                status::ready_cell(r).to_string(),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .chain(std::iter::once(&header))
                .map(|row| row[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut text = format!("cluster {}\n\n", report.cluster);
    let hidden = report.releases.len() - shown.len();
    if quiet && rows.is_empty() {
        text.push_str(&format!(
            "{} deployed, up to date and ready\n",
            count(hidden, "release")
        ));
    }
    for row in std::iter::once(&header)
        .filter(|_| !rows.is_empty())
        .chain(&rows)
    {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        text.push_str(line.join("  ").trim_end());
        text.push('\n');
    }
    if quiet && hidden > 0 && !rows.is_empty() {
        text.push_str(&format!(
            "(and {} deployed, up to date and ready)\n",
            count(hidden, "more release")
        ));
    }
    if verbosity == Verbosity::Verbose {
        text.push_str(&details(&shown));
    }
    let handover: Vec<_> = report
        .releases
        .iter()
        .filter_map(|r| Some((&r.release, r.handover.as_ref()?)))
        .collect();
    if !handover.is_empty() {
        text.push_str("\nhandover (installed by bootstrap, adopted by Flux):\n");
        for (release, state) in handover {
            text.push_str(&format!("  {release}: {state}\n"));
        }
    }
    text.push_str(&guard_lines(report, quiet));
    let conflicts: Vec<_> = report.conflicts().collect();
    if conflicts.is_empty() {
        text.push_str("\nno conflicts\n");
    } else {
        text.push_str("\nconflicts (`bootstrap apply` refuses until they are resolved):\n");
        for c in conflicts {
            text.push_str(&format!("  {}: {}\n", c.release, c.message));
        }
    }
    text
}

/// The admission guard's line (with `-q`, only a guard that needs
/// attention), then the releases the ledger lacks, which it cannot guard.
fn guard_lines(report: &Report, quiet: bool) -> String {
    let mut text = String::new();
    // `-q`: only a guard that needs attention.
    if !quiet || matches!(report.guard, status::Guard::Missing) {
        text.push_str(&format!("\nadmission guard: {}\n", report.guard.describe()));
    }
    let unrecorded = report.unrecorded();
    if !unrecorded.is_empty() && report.guard != status::Guard::Off {
        let names: Vec<String> = unrecorded.iter().map(ToString::to_string).collect();
        text.push_str(&format!(
            "ownership ledger: does not record {} helm has ({}): the guard denies no Flux HelmRelease for {}; `bootstrap apply {}` records {}\n",
            count(unrecorded.len(), "release"),
            names.join(", "),
            if unrecorded.len() == 1 { "it" } else { "them" },
            report.cluster,
            if unrecorded.len() == 1 { "it" } else { "them" },
        ));
    }
    text
}

/// `-v`'s details: each release's values digest and deployed revision,
/// and every workload its readiness judged.
fn details(shown: &[&status::ReleaseStatus]) -> String {
    let mut text = "\ndetails:\n".to_string();
    for r in shown {
        text.push_str(&format!(
            "  {}: values {}{}\n",
            r.release,
            r.desired
                .values_digest
                .as_deref()
                .unwrap_or("digest unknown (no ledger key)"),
            r.deployed
                .as_ref()
                .map(|d| format!(", revision {}", d.revision))
                .unwrap_or_default()
        ));
        for w in &r.ready.workloads {
            text.push_str(&format!("    {}: {}\n", w.object, w.message));
        }
    }
    text
}

fn dash(s: &str) -> String {
    if s.is_empty() { "-".into() } else { s.into() }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::ownership::Conflict;
    use crate::release::ReleaseId;
    use crate::status::{Deployed, Desired, Ready, ReleaseStatus};

    fn row(name: &str, deployed: Option<(&str, &str)>, ready: &str) -> ReleaseStatus {
        ReleaseStatus {
            release: ReleaseId::new("kube-system", name),
            chart: name.into(),
            desired: Desired {
                version: "1.0.0".into(),
                values_digest: Some("hmac-sha256:x".into()),
            },
            deployed: deployed.map(|(version, status)| Deployed {
                version: version.into(),
                status: status.into(),
                revision: 2,
            }),
            ready: Ready {
                ok: ready == "ready",
                message: ready.into(),
                workloads: vec![],
            },
            owner: if deployed.is_some() { "bootstrap" } else { "-" }.into(),
            drift: if deployed.is_some() {
                "up to date"
            } else {
                "not installed"
            }
            .into(),
            handover: None,
            conflicts: vec![],
        }
    }

    /// A release helm has and the ledger lacks (the ledger deleted or
    /// rewritten since): the guard line is followed by what it leaves
    /// unguarded and what to run, also with `-q`.
    #[test]
    fn a_ledger_that_lacks_an_installed_release_is_named_after_the_guard() {
        let mut cilium = row("cilium", Some(("1.0.0", "deployed")), "ready");
        cilium.owner = status::UNRECORDED.into();
        let report = Report {
            guard: status::Guard::InPlace,
            cluster: "infra".into(),
            releases: vec![cilium, row("coredns", Some(("1.0.0", "deployed")), "ready")],
        };
        let said = "ownership ledger: does not record 1 release helm has (kube-system/cilium): the guard denies no Flux HelmRelease for it; `bootstrap apply infra` records it\n";
        for verbosity in [Verbosity::Normal, Verbosity::Quiet] {
            let text = render(&report, verbosity);
            assert!(text.contains(said), "{text}");
        }
    }

    #[test]
    fn table_is_aligned_and_conflicts_follow_it() {
        let mut cilium = row("cilium", Some(("1.0.0", "pending-upgrade")), "ready");
        cilium.conflicts.push(Conflict {
            release: cilium.release.clone(),
            object: "Helm release kube-system/cilium".into(),
            message: "Helm release kube-system/cilium is pending-upgrade".into(),
        });
        let report = Report {
            guard: status::Guard::InPlace,
            cluster: "infra".into(),
            releases: vec![cilium, row("coredns", None, "not installed")],
        };
        assert_eq!(
            render(&report, Verbosity::Normal),
            "\
cluster infra

release              chart    desired  deployed  helm             rev  owner      drift          ready
kube-system/cilium   cilium   1.0.0    1.0.0     pending-upgrade  2    bootstrap  up to date     ready
kube-system/coredns  coredns  1.0.0    -         not installed    -    -          not installed  -

admission guard: in place (ValidatingAdmissionPolicy bootstrap-ownership-guard and its binding): Flux HelmReleases for bootstrap's releases are denied

conflicts (`bootstrap apply` refuses until they are resolved):
  kube-system/cilium: Helm release kube-system/cilium is pending-upgrade
"
        );
    }

    #[test]
    fn quiet_leaves_out_what_needs_nothing_and_says_how_many() {
        let report = Report {
            guard: status::Guard::InPlace,
            cluster: "infra".into(),
            releases: vec![
                row("cilium", Some(("1.0.0", "deployed")), "ready"),
                row("coredns", None, "not installed"),
                row("spegel", Some(("1.0.0", "deployed")), "ready"),
            ],
        };
        assert_eq!(
            render(&report, Verbosity::Quiet),
            "\
cluster infra

release              chart    desired  deployed  helm           rev  owner  drift          ready
kube-system/coredns  coredns  1.0.0    -         not installed  -    -      not installed  -
(and 2 more releases deployed, up to date and ready)

no conflicts
"
        );
        let settled = Report {
            guard: status::Guard::InPlace,
            cluster: "infra".into(),
            releases: vec![row("cilium", Some(("1.0.0", "deployed")), "ready")],
        };
        assert_eq!(
            render(&settled, Verbosity::Quiet),
            "cluster infra\n\n1 release deployed, up to date and ready\n\nno conflicts\n"
        );
    }

    #[test]
    fn verbose_lists_each_workload_judged() {
        let mut cilium = row("cilium", Some(("1.0.0", "deployed")), "ready");
        cilium.ready.workloads = vec![
            crate::status::WorkloadReady {
                object: "DaemonSet kube-system/cilium".into(),
                ready: true,
                message: "ready".into(),
            },
            crate::status::WorkloadReady {
                object: "Deployment kube-system/cilium-operator".into(),
                ready: false,
                message: "1/2 pods ready".into(),
            },
        ];
        let report = Report {
            guard: status::Guard::InPlace,
            cluster: "infra".into(),
            releases: vec![cilium],
        };
        let text = render(&report, Verbosity::Verbose);
        assert!(
            text.contains(
                "details:
  kube-system/cilium: values hmac-sha256:x, revision 2
    DaemonSet kube-system/cilium: ready
    Deployment kube-system/cilium-operator: 1/2 pods ready
"
            ),
            "{text}"
        );
    }
}
