//! Known-pitfall lints over the rendered, merged release values of a cluster
//! (docs/design.md#lints): configuration that validates but breaks the
//! cluster once it is half up. `check` and `plan` report them, `apply`
//! refuses to start on an error-level finding that `lints.ignore` does not
//! list.
//!
//! # Adding a rule
//!
//! 1. A function in the module of its family (`cilium`, `crds`, `mesh`, or a
//!    new one) that takes a [`Plan`] (or, for a rule across clusters, every
//!    cluster's plan) and returns [`Hit`]s: the release, where the value is
//!    written ([`locate`]), what is wrong and the fix.
//! 2. One entry in [`RULES`] below: its stable code, severity and scope.
//! 3. A row in docs/design.md#lints and in README.md's lint table;
//!    `tests::docs_name_every_code` fails until both mention the code.
//!
//! Codes are stable: once shipped, never renamed.

mod chart;
mod cilium;
mod crd_ownership;
mod kinds;
pub(crate) mod live;
pub(crate) mod locate;
mod mesh;

use crate::plan::Plan;
use crate::release::ReleaseId;

pub(crate) use crate::finding::{Finding, Severity, Written};
pub(crate) use locate::Location;

/// What a rule looks at.
pub(crate) enum Scope {
    /// One cluster's plan.
    Cluster(fn(&Plan) -> Vec<Hit>),
    /// Every cluster of the config root; a hit names the cluster it is
    /// reported for. Runs only when more than one cluster is defined.
    Fleet(fn(&[&Plan]) -> Vec<(String, Hit)>),
    /// The live cluster, read once by [`live::gather`] in apply's preflight.
    Live(fn(&Plan, &live::LiveState) -> Vec<Hit>),
}

pub(crate) struct Rule {
    pub code: &'static str,
    pub severity: Severity,
    pub scope: Scope,
}

/// The one list of rules (docs/design.md#lints).
pub(crate) const RULES: &[Rule] = &[
    Rule {
        code: cilium::KPR_WITHOUT_API_HOST,
        severity: Severity::Error,
        scope: Scope::Cluster(cilium::kpr_without_api_host),
    },
    Rule {
        code: cilium::KPR_PARTIAL,
        severity: Severity::Error,
        scope: Scope::Cluster(cilium::kpr_partial),
    },
    Rule {
        code: crd_ownership::CRD_VALUES_INVERTED,
        severity: Severity::Error,
        scope: Scope::Cluster(crd_ownership::crd_values_inverted),
    },
    Rule {
        code: mesh::CLUSTER_ID_INVALID,
        severity: Severity::Error,
        scope: Scope::Fleet(mesh::cluster_id_invalid),
    },
    Rule {
        code: mesh::CLUSTER_ID_DUPLICATE,
        severity: Severity::Error,
        scope: Scope::Fleet(mesh::cluster_id_duplicate),
    },
    Rule {
        code: mesh::CLUSTER_NAME_MISMATCH,
        severity: Severity::Error,
        scope: Scope::Fleet(mesh::cluster_name_mismatch),
    },
    Rule {
        code: mesh::NATIVE_ROUTING_CIDR_OVERLAP,
        severity: Severity::Error,
        scope: Scope::Fleet(mesh::native_routing_cidr_overlap),
    },
    Rule {
        code: mesh::LB_IPAM_IP_REUSED,
        severity: Severity::Error,
        scope: Scope::Fleet(mesh::lb_ipam_ip_reused),
    },
    Rule {
        code: chart::VALUES_UNKNOWN_KEY,
        severity: Severity::Warning,
        scope: Scope::Cluster(chart::values_unknown_key),
    },
    Rule {
        code: kinds::NEEDS_MISSING_FOR_KIND,
        severity: Severity::Warning,
        scope: Scope::Cluster(kinds::needs_missing_for_kind),
    },
    Rule {
        code: live::NATIVE_ROUTING_CIDR_MISMATCH,
        severity: Severity::Error,
        scope: Scope::Live(live::native_routing_cidr_mismatch),
    },
    Rule {
        code: live::API_HOST_UNREACHABLE,
        severity: Severity::Warning,
        scope: Scope::Live(live::api_host_unreachable),
    },
    Rule {
        code: live::KUBE_PROXY_PRESENT_WITH_KPR,
        severity: Severity::Warning,
        scope: Scope::Live(live::kube_proxy_present_with_kpr),
    },
];

/// The value at the key path `path` of `values`, as the families read it.
fn get<'a>(values: &'a serde_json::Value, path: &[&str]) -> Option<&'a serde_json::Value> {
    path.iter().try_fold(values, |v, k| v.get(k))
}

/// A switch that is on: `true`, or the string `"true"` (as `--set` writes it).
fn is_true(value: Option<&serde_json::Value>) -> bool {
    matches!(value, Some(serde_json::Value::Bool(true)))
        || value.and_then(serde_json::Value::as_str) == Some("true")
}

/// A value as text, as the families read it: strings as they are,
/// booleans and numbers printed.
fn text(value: Option<&serde_json::Value>) -> Option<String> {
    match value? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// What a rule found, before the registry adds code, severity and `ignored`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hit {
    pub release: Option<ReleaseId>,
    pub at: Option<Location>,
    pub message: String,
    pub fix: String,
}

/// Runs every rule on `plan`; `fleet` is every cluster of the config root
/// that loaded (it may or may not include `plan` itself). Findings are
/// sorted like `check`'s: severity, code, release, location.
pub(crate) fn run(plan: &Plan, fleet: &[&Plan]) -> Vec<Finding> {
    let mut all: Vec<&Plan> = vec![plan];
    all.extend(
        fleet
            .iter()
            .copied()
            .filter(|p| p.cluster.name != plan.cluster.name),
    );
    let fleet_hits = fleet_hits(&all);
    for_plan(plan, &all, &fleet_hits)
}

/// [`run`] for each of `plans` (clusters of one config root, each named
/// once), in their order. The fleet rules run once for all of them, not
/// once per cluster: each resolves every cluster's GitOps tree.
pub(crate) fn run_each(plans: &[&Plan]) -> Vec<Vec<Finding>> {
    let fleet_hits = fleet_hits(plans);
    plans
        .iter()
        .map(|plan| for_plan(plan, plans, &fleet_hits))
        .collect()
}

/// What each fleet rule found over `all`, by the rule's index in [`RULES`].
fn fleet_hits(all: &[&Plan]) -> Vec<Vec<(String, Hit)>> {
    RULES
        .iter()
        .map(|rule| match rule.scope {
            Scope::Fleet(check) if all.len() > 1 => check(all),
            _ => Vec::new(),
        })
        .collect()
}

/// The findings of `plan`, one of `all`, given what the fleet rules found.
fn for_plan(plan: &Plan, all: &[&Plan], fleet_hits: &[Vec<(String, Hit)>]) -> Vec<Finding> {
    let mut out = Vec::new();
    for (rule, fleet) in RULES.iter().zip(fleet_hits) {
        let hits = match rule.scope {
            Scope::Cluster(check) => check(plan),
            Scope::Fleet(_) => fleet
                .iter()
                .filter(|(cluster, _)| *cluster == plan.cluster.name)
                .map(|(_, hit)| hit.clone())
                .collect(),
            Scope::Live(_) => Vec::new(),
        };
        out.extend(findings(plan, rule, hits));
    }
    scrub(&mut out, all);
    out.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    out.dedup();
    out
}

/// Values of sops-encrypted files that a message quotes (a host, an id)
/// redacted, as everywhere values are shown (docs/design.md#secrets).
fn scrub(findings: &mut [Finding], plans: &[&Plan]) {
    let mut secrets: Vec<String> = plans
        .iter()
        .flat_map(|p| &p.releases)
        .flat_map(|r| r.secrets().strings(r.values()))
        .collect();
    if secrets.is_empty() {
        return;
    }
    secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    secrets.dedup();
    for finding in findings {
        finding.message = crate::values::scrub(&finding.message, &secrets);
        if let Some(written) = &mut finding.written {
            written.fix = crate::values::scrub(&written.fix, &secrets);
        }
    }
}

/// Runs the live rules on what [`live::gather`] read.
pub(crate) fn run_live(plan: &Plan, state: &live::LiveState) -> Vec<Finding> {
    let mut out = Vec::new();
    for rule in RULES {
        if let Scope::Live(check) = rule.scope {
            out.extend(findings(plan, rule, check(plan, state)));
        }
    }
    scrub(&mut out, &[plan]);
    out.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    out
}

fn findings<'a>(
    plan: &'a Plan,
    rule: &'a Rule,
    hits: Vec<Hit>,
) -> impl Iterator<Item = Finding> + 'a {
    hits.into_iter().map(move |hit| {
        let release = hit.release.map(|r| r.to_string());
        Finding {
            severity: rule.severity,
            code: rule.code,
            ignored: plan.cluster.ignores(rule.code, release.as_deref()),
            release,
            object: None,
            chain: Vec::new(),
            message: hit.message,
            written: Some(Written {
                file: hit.at.as_ref().map(|a| a.file.clone()),
                line: hit.at.as_ref().map(|a| a.line),
                fix: hit.fix,
            }),
        }
    })
}

#[cfg(test)]
pub(crate) mod tests;
