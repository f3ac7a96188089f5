use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::release::{Chart, ChartSource, CrdPolicy, Hook, HookAction, Hooks, Ownership, Source};

fn release(values: serde_json::Value) -> Release {
    Release {
        id: ReleaseId::new("kube-system", "cilium"),
        file: "releases/core.yaml".into(),
        line: 1,
        source: Source::Chart(Chart {
            source: ChartSource::Repo {
                url: "https://helm.cilium.io".into(),
                name: "cilium".into(),
            },
            version: Some("1.18.2".into()),
        }),
        needs: vec![],
        crds: CrdPolicy::Bootstrap,
        values,
        crd_values: json!({}),
        values_sources: Vec::new(),
        layers: Vec::new(),
        from: None,
        timeout: None,
        wait: false,
        hooks: Hooks::default(),
        ownership: Ownership::Bootstrap,
    }
}

fn deployed(version: &str, status: &str) -> DeployedRelease {
    DeployedRelease {
        id: ReleaseId::new("kube-system", "cilium"),
        revision: 3,
        status: status.into(),
        chart: "cilium".into(),
        version: version.into(),
        app_version: version.into(),
    }
}

fn entry_for(release: &Release) -> Entry {
    Entry::for_release(release)
}

fn daemonset() -> ObjectRef {
    ObjectRef {
        api_version: "apps/v1".into(),
        kind: "DaemonSet".into(),
        namespace: Some("kube-system".into()),
        name: "cilium".into(),
    }
}

#[test]
fn owner_is_the_ledger_policy_unrecorded_or_dash() {
    let r = release(json!({}));
    assert_eq!(owner(true, Some(&entry_for(&r))), "bootstrap");
    assert_eq!(owner(true, None), "unrecorded");
    assert_eq!(owner(false, Some(&entry_for(&r))), "-");
    assert_eq!(owner(false, None), "-");
}

#[test]
fn drift_up_to_date_when_helm_and_ledger_match_the_config() {
    let r = release(json!({"a": 1}));
    let e = entry_for(&r);
    assert_eq!(
        drift(&r, Some(&deployed("1.18.2", "deployed")), Some(&e)),
        "up to date"
    );
}

#[test]
fn drift_values_changed_when_the_ledger_digest_differs() {
    let before = release(json!({"a": 1}));
    let e = entry_for(&before);
    let now = release(json!({"a": 2}));
    assert_eq!(
        drift(&now, Some(&deployed("1.18.2", "deployed")), Some(&e)),
        "values changed"
    );
}

#[test]
fn drift_names_the_deployed_and_desired_versions() {
    let r = release(json!({}));
    let e = entry_for(&r);
    assert_eq!(
        drift(&r, Some(&deployed("1.17.0", "deployed")), Some(&e)),
        "version 1.17.0 -> 1.18.2"
    );
}

#[test]
fn drift_not_installed_and_not_recorded() {
    let r = release(json!({}));
    assert_eq!(drift(&r, None, None), "not installed");
    assert_eq!(
        drift(&r, Some(&deployed("1.18.2", "deployed")), None),
        "not recorded"
    );
}

#[test]
fn readiness_without_rollout_hooks_is_ok_and_shown_as_dash() {
    let ready = summarize(&[]);
    assert!(ready.ok);
    let r = release(json!({}));
    let s = status_of(
        &r,
        Some(&deployed("1.18.2", "deployed")),
        None,
        ready,
        vec![],
    );
    assert_eq!(ready_cell(&s), "-");
}

#[test]
fn readiness_names_the_first_workload_that_is_not_ready() {
    let ds = daemonset();
    let ready = summarize(&[(&ds, Readiness::Pending("1 of 3 pods updated".into()))]);
    assert_eq!(
        ready,
        Ready {
            ok: false,
            message: "not ready: DaemonSet kube-system/cilium: 1 of 3 pods updated".into()
        }
    );
    assert_eq!(
        summarize(&[(&ds, Readiness::Ready)]).message,
        "ready".to_string()
    );
}

#[test]
fn not_installed_shows_dashes() {
    let r = release(json!({}));
    let s = status_of(
        &r,
        None,
        None,
        Ready {
            ok: false,
            message: "not installed".into(),
        },
        vec![],
    );
    assert!(s.deployed.is_none());
    assert_eq!(ready_cell(&s), "-");
    assert_eq!(s.owner, "-");
}

#[test]
fn rollout_targets_come_from_both_hook_phases_and_only_rollouts() {
    let mut r = release(json!({}));
    r.hooks = Hooks {
        presync: vec![Hook {
            action: HookAction::Command(vec!["true".into()]),
            timeout: None,
        }],
        postsync: vec![Hook {
            action: HookAction::Rollout(daemonset()),
            timeout: None,
        }],
    };
    assert_eq!(rollout_targets(&r), vec![&daemonset()]);
}
