//! `bootstrap status`: the live state of each release of a plan, read once
//! and never written (no lock, no mutating request). Helm says what is
//! deployed, the ledger who owns it, a one-shot GET of each rollout hook's
//! workload whether it is ready now, and the preflight checks what would make
//! `apply` refuse.

use futures::StreamExt;
use serde::Serialize;

use crate::error::{Error, Failure};
use crate::helm::{DeployedRelease, Helm};
use crate::kube::client::Connection;
use crate::kube::ready::{self, Readiness};
use crate::ledger::{self, DigestKey, Entry, Ledger};
use crate::ownership::{self, Conflict};
use crate::plan::Plan;
use crate::release::{ObjectRef, Ownership, Release, ReleaseId};

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Report {
    pub cluster: String,
    pub releases: Vec<ReleaseStatus>,
    /// The admission guard in the cluster (docs/design.md#admission-guard).
    pub guard: Guard,
}

/// Whether the admission guard that denies Flux HelmReleases for
/// bootstrap's releases is in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Guard {
    /// The ValidatingAdmissionPolicy and its binding are there.
    InPlace,
    /// Either is missing: `apply` installs it.
    Missing,
    /// `guard: false` in cluster.yaml.
    Off,
    /// The cluster does not serve ValidatingAdmissionPolicy.
    Unsupported,
}

impl Guard {
    /// The words of `status`'s `admission guard:` line.
    pub(crate) fn describe(self) -> String {
        let policy = crate::flux::policy::POLICY_NAME;
        match self {
            Guard::InPlace => format!(
                "in place (ValidatingAdmissionPolicy {policy} and its binding): Flux HelmReleases for bootstrap's releases are denied"
            ),
            Guard::Missing => format!(
                "missing (ValidatingAdmissionPolicy {policy} or its binding): nothing in the cluster denies a Flux HelmRelease for bootstrap's releases; `bootstrap apply` installs it"
            ),
            Guard::Off => "off (`guard: false` in cluster.yaml)".to_string(),
            Guard::Unsupported => {
                "not available: the cluster does not serve ValidatingAdmissionPolicy (Kubernetes < 1.30)".to_string()
            }
        }
    }
}

/// Reads whether the guard's policy and binding exist.
async fn guard(plan: &Plan, client: &::kube::Client) -> Result<Guard, Error> {
    if !plan.cluster.guard {
        return Ok(Guard::Off);
    }
    const API: &str = "admissionregistration.k8s.io/v1";
    let name = crate::flux::policy::POLICY_NAME;
    let read = |kind: &'static str| crate::kube::apply::get(client, API, kind, None, name);
    let (policy, binding) = tokio::join!(
        read("ValidatingAdmissionPolicy"),
        read("ValidatingAdmissionPolicyBinding")
    );
    let failed =
        |e: crate::kube::apply::ApplyError| Error::from(Failure::Guard { source: e.into() });
    let (policy, binding) = (policy.map_err(failed)?, binding.map_err(failed)?);
    if policy.is_none()
        && !crate::kube::apply::serves(client, API, "ValidatingAdmissionPolicy").await
    {
        return Ok(Guard::Unsupported);
    }
    Ok(if policy.is_some() && binding.is_some() {
        Guard::InPlace
    } else {
        Guard::Missing
    })
}

impl Report {
    pub(crate) fn conflicts(&self) -> impl Iterator<Item = &Conflict> {
        self.releases.iter().flat_map(|r| &r.conflicts)
    }

    /// Releases helm has that the ledger does not record (deleted or
    /// rewritten since they were installed): the admission guard denies
    /// nothing for them (docs/design.md#ledger).
    pub(crate) fn unrecorded(&self) -> Vec<&ReleaseId> {
        self.releases
            .iter()
            .filter(|r| r.deployed.is_some() && r.owner == UNRECORDED)
            .map(|r| &r.release)
            .collect()
    }
}

/// The owner column of a release helm has and the ledger lacks.
pub(crate) const UNRECORDED: &str = "unrecorded";

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReleaseStatus {
    pub release: ReleaseId,
    pub chart: String,
    pub desired: Desired,
    pub deployed: Option<Deployed>,
    pub ready: Ready,
    pub owner: String,
    pub drift: String,
    /// For a `handover` release: `adopted by Flux (HelmRelease …)`,
    /// `awaiting adoption…` or `drifted: …` (docs/design.md#handover);
    /// `None` for releases bootstrap owns.
    pub handover: Option<String>,
    pub conflicts: Vec<Conflict>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Desired {
    pub version: String,
    /// The keyed digest the ledger records for these values
    /// (docs/design.md#ledger); `None` without the ledger's key. Never a
    /// plain hash, which would let guesses of a secret be tested.
    pub values_digest: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Deployed {
    pub version: String,
    /// Helm's status: deployed, failed, pending-install, ...
    pub status: String,
    pub revision: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Ready {
    pub ok: bool,
    pub message: String,
    /// Each workload a rollout hook names, judged now (`status -v` lists
    /// them; docs/design.md#status-json).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<WorkloadReady>,
}

/// One workload's readiness now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WorkloadReady {
    /// `DaemonSet kube-system/cilium`.
    pub object: String,
    pub ready: bool,
    /// `ready`, or why not (`1/3 pods ready`, `does not exist`).
    pub message: String,
}

/// How many releases' readiness (and a handover release's values) are read
/// at once.
const RELEASES_AT_ONCE: usize = 16;

/// Reads everything `status` shows. Fails (exit 1) only when helm, the
/// ledger or the conflict checks cannot be read; a workload that cannot be
/// read is shown as not ready instead.
///
/// Nothing is read once per release in turn (docs/design.md#commands): the
/// conflict checks (docs/design.md#preflight-requests), the ledger, its key
/// and the guard at once; what helm deploys comes from the checks' one
/// `helm list`, as apply's release steps take it; then each release's
/// rollout hooks (and a handover release's deployed values), up to 16
/// releases at once. Errors are judged in that order, releases in plan
/// order, whatever came back first.
pub(crate) async fn collect<H: Helm>(
    plan: &Plan,
    helm: &H,
    connection: &Connection,
) -> Result<Report, Error> {
    let ledger = Ledger::new(&connection.client);
    let (live, recorded, key, guard) = tokio::join!(
        ownership::gather(plan, helm, connection),
        ledger.entries(),
        ledger.digest_key(false),
        guard(plan, &connection.client),
    );
    let (live, recorded, key) = (live?, recorded?, key?);
    let conflicts = &live.conflicts;
    let releases: Vec<Result<ReleaseStatus, Error>> =
        futures::stream::iter(plan.installed().map(|release| {
            let deployed = live.listed.get(&release.id);
            let (live, recorded, key) = (&live, &recorded, &key);
            async move {
                let ready = match deployed {
                    None => Ready {
                        ok: false,
                        message: "not installed".into(),
                        workloads: Vec::new(),
                    },
                    Some(_) => readiness(&connection.client, release).await,
                };
                let mut status = status_of(
                    release,
                    deployed,
                    recorded.get(&ledger::key(&release.id)),
                    key.as_ref(),
                    ready,
                    conflicts
                        .iter()
                        .filter(|c| c.release == release.id)
                        .cloned()
                        .collect(),
                );
                if release.ownership == Ownership::Handover {
                    let managed_by = live
                        .managed_by
                        .get(&release.id)
                        .map(Vec::as_slice)
                        .unwrap_or_default();
                    let deployed_values = match deployed {
                        Some(_) if !managed_by.is_empty() => Some(
                            helm.get_values(&connection.target, &release.id)
                                .await
                                .map_err(|e| Failure::ReadValues {
                                    release: release.id.to_string(),
                                    source: e.into(),
                                })?,
                        ),
                        _ => None,
                    };
                    status.handover = Some(handover_state(
                        managed_by,
                        deployed_values.as_ref(),
                        release.secrets(),
                    ));
                }
                Ok(status)
            }
        }))
        .buffered(RELEASES_AT_ONCE)
        .collect()
        .await;
    Ok(Report {
        cluster: plan.cluster.name.clone(),
        releases: releases.into_iter().collect::<Result<_, _>>()?,
        guard: guard?,
    })
}

/// Everything but the reads: pure, so each column's rule has a unit test.
pub(crate) fn status_of(
    release: &Release,
    deployed: Option<&DeployedRelease>,
    entry: Option<&Entry>,
    key: Option<&DigestKey>,
    ready: Ready,
    conflicts: Vec<Conflict>,
) -> ReleaseStatus {
    ReleaseStatus {
        release: release.id.clone(),
        chart: release.chart_label(),
        desired: Desired {
            version: release.version_label(),
            values_digest: key.map(|k| k.digest(release.values())),
        },
        deployed: deployed.map(|d| Deployed {
            version: d.version.clone(),
            status: d.status.clone(),
            revision: d.revision,
        }),
        ready,
        owner: owner(deployed.is_some(), entry),
        drift: drift(release, deployed, entry, key),
        handover: None,
        conflicts,
    }
}

/// A handover release's state: adopted once a HelmRelease's history holds
/// it; before that, drifted when the values of the HelmRelease that will
/// adopt it differ from the deployed ones (its adoption upgrade would change
/// the release), else awaiting adoption.
pub(crate) fn handover_state(
    managed_by: &[ownership::LiveHelmRelease],
    deployed_values: Option<&serde_json::Value>,
    secrets: &crate::values::SecretPaths,
) -> String {
    if let Some(hr) = managed_by.iter().find(|hr| hr.adopted) {
        return format!("adopted by Flux (HelmRelease {})", hr.name);
    }
    let [hr] = managed_by else {
        return if managed_by.is_empty() {
            "awaiting adoption (no Flux HelmRelease manages it yet)".into()
        } else {
            format!(
                "awaiting adoption by {} HelmReleases (a conflict)",
                managed_by.len()
            )
        };
    };
    let Some(deployed) = deployed_values else {
        return format!("awaiting adoption by HelmRelease {}", hr.name);
    };
    if hr
        .spec
        .get("valuesFrom")
        .is_some_and(|v| v.as_array().is_some_and(|a| !a.is_empty()))
    {
        return format!(
            "awaiting adoption by HelmRelease {} (its valuesFrom is not compared here; `bootstrap check` compares them)",
            hr.name
        );
    }
    let flux = hr
        .spec
        .get("values")
        .cloned()
        .unwrap_or_else(|| serde_json::json!({}));
    let differences = crate::values::diff(deployed, &flux);
    if differences.is_empty() {
        return format!("awaiting adoption by HelmRelease {}", hr.name);
    }
    format!(
        "drifted: HelmRelease {} would change {}",
        hr.name,
        differences
            .iter()
            .map(|d| d.describe_with(secrets))
            .collect::<Vec<_>>()
            .join("; ")
    )
}

/// The ledger's policy (`bootstrap` or `handover`) when it records the release.
pub(crate) fn owner(installed: bool, entry: Option<&Entry>) -> String {
    match (installed, entry) {
        (false, _) => "-".into(),
        (true, Some(entry)) => entry.policy.clone(),
        (true, None) => UNRECORDED.into(),
    }
}

/// What `apply` would change, in a few words. Helm's deployed chart and
/// version come first (they are the truth in the cluster); the ledger's
/// digest tells whether the values changed, since helm's stored values
/// would cost one more call per release.
pub(crate) fn drift(
    release: &Release,
    deployed: Option<&DeployedRelease>,
    entry: Option<&Entry>,
    key: Option<&DigestKey>,
) -> String {
    let Some(deployed) = deployed else {
        return "not installed".into();
    };
    let (chart, version) = (release.chart_label(), release.version_label());
    if deployed.chart != chart {
        return format!("chart {} -> {chart}", deployed.chart);
    }
    if deployed.version != version {
        return format!("version {} -> {version}", deployed.version);
    }
    let Some(entry) = entry else {
        return "not recorded".into();
    };
    if entry.version != version {
        return format!("version {} -> {version}", entry.version);
    }
    if !entry.values_match(release, key) {
        return "values changed".into();
    }
    "up to date".into()
}

/// The rollout hooks of a release: the workloads whose readiness `status` shows.
pub(crate) fn rollout_targets(release: &Release) -> Vec<&ObjectRef> {
    release
        .hooks
        .presync
        .iter()
        .chain(&release.hooks.postsync)
        .filter_map(|h| h.action.workload())
        .collect()
}

/// Readiness now: one GET per rollout hook, all at once, judged by the same
/// pure functions the waits use.
async fn readiness(client: &::kube::Client, release: &Release) -> Ready {
    let targets = rollout_targets(release);
    let states = futures::future::join_all(targets.iter().map(|target| async move {
        let found = crate::kube::apply::get(
            client,
            &target.api_version,
            &target.kind,
            target.namespace.as_deref(),
            &target.name,
        )
        .await;
        match found {
            Ok(Some(obj)) => ready::judge(&target.kind, &obj),
            Ok(None) => Readiness::Pending("does not exist".into()),
            Err(e) => Readiness::Pending(format!("cannot be read: {e}")),
        }
    }))
    .await;
    let judged: Vec<(&ObjectRef, Readiness)> = targets.into_iter().zip(states).collect();
    summarize(&judged)
}

/// One verdict for all rollout hooks: the first workload not ready names why.
pub(crate) fn summarize(judged: &[(&ObjectRef, Readiness)]) -> Ready {
    if judged.is_empty() {
        return Ready {
            ok: true,
            message: "no rollout hooks".into(),
            workloads: Vec::new(),
        };
    }
    let not_ready: Vec<String> = judged
        .iter()
        .filter_map(|(target, state)| match state {
            Readiness::Ready => None,
            Readiness::Pending(why) | Readiness::Failed(why) => Some(format!("{target}: {why}")),
        })
        .collect();
    let workloads = judged
        .iter()
        .map(|(target, state)| WorkloadReady {
            object: target.to_string(),
            ready: matches!(state, Readiness::Ready),
            message: match state {
                Readiness::Ready => "ready".into(),
                Readiness::Pending(why) | Readiness::Failed(why) => why.clone(),
            },
        })
        .collect();
    if not_ready.is_empty() {
        Ready {
            ok: true,
            message: "ready".into(),
            workloads,
        }
    } else {
        Ready {
            ok: false,
            message: format!("not ready: {}", not_ready.join("; ")),
            workloads,
        }
    }
}

/// The text table's cell for readiness: `-` when there is nothing to judge.
pub(crate) fn ready_cell(status: &ReleaseStatus) -> &str {
    if status.deployed.is_none() || (status.ready.ok && status.ready.message != "ready") {
        "-"
    } else {
        &status.ready.message
    }
}

#[cfg(test)]
mod tests;
