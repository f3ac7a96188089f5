use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::release::{Chart, ChartSource, CrdPolicy, Hook, HookAction, Hooks, Source};

fn release(values: serde_json::Value) -> Release {
    Release {
        id: ReleaseId::new("kube-system", "cilium"),
        file: "releases/core.yaml".into(),
        source: Source::Chart(Chart {
            source: ChartSource::Repo {
                url: "https://helm.cilium.io".into(),
                name: "cilium".into(),
            },
            version: Some("1.18.2".into()),
        }),
        stack: crate::values::stack::ValuesStack::of(values),
        ..Release::fake("cilium", &[], CrdPolicy::Bootstrap)
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
        updated: None,
    }
}

fn key() -> DigestKey {
    DigestKey::new(b"test key".to_vec())
}

fn entry_for(release: &Release) -> Entry {
    Entry::for_release(release, "infra", &key())
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
        drift(
            &r,
            Some(&deployed("1.18.2", "deployed")),
            Some(&e),
            Some(&key())
        ),
        "up to date"
    );
}

#[test]
fn drift_values_changed_when_the_ledger_digest_differs() {
    let before = release(json!({"a": 1}));
    let e = entry_for(&before);
    let now = release(json!({"a": 2}));
    assert_eq!(
        drift(
            &now,
            Some(&deployed("1.18.2", "deployed")),
            Some(&e),
            Some(&key())
        ),
        "values changed"
    );
}

#[test]
fn drift_names_the_deployed_and_desired_versions() {
    let r = release(json!({}));
    let e = entry_for(&r);
    assert_eq!(
        drift(
            &r,
            Some(&deployed("1.17.0", "deployed")),
            Some(&e),
            Some(&key())
        ),
        "version 1.17.0 -> 1.18.2"
    );
}

#[test]
fn drift_not_installed_and_not_recorded() {
    let r = release(json!({}));
    assert_eq!(drift(&r, None, None, Some(&key())), "not installed");
    assert_eq!(
        drift(
            &r,
            Some(&deployed("1.18.2", "deployed")),
            None,
            Some(&key())
        ),
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
            message: "not ready: DaemonSet kube-system/cilium: 1 of 3 pods updated".into(),
            workloads: vec![WorkloadReady {
                object: "DaemonSet kube-system/cilium".into(),
                ready: false,
                message: "1 of 3 pods updated".into(),
            }],
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
        None,
        Ready {
            ok: false,
            message: "not installed".into(),
            workloads: vec![],
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

#[test]
fn the_ledger_digest_is_keyed_and_needs_the_key() {
    let r = release(json!({"password": "hunter2"}));
    let e = entry_for(&r);
    assert!(
        e.values_digest.starts_with("hmac-sha256:"),
        "{}",
        e.values_digest
    );
    assert_ne!(e.values_digest, crate::values::digest(r.values()));
    let up = deployed("1.18.2", "deployed");
    assert_eq!(drift(&r, Some(&up), Some(&e), Some(&key())), "up to date");
    // Another key (the Secret recreated) or none: the values cannot be
    // confirmed, so they count as changed.
    let other = DigestKey::new(b"other".to_vec());
    assert_eq!(
        drift(&r, Some(&up), Some(&e), Some(&other)),
        "values changed"
    );
    assert_eq!(drift(&r, Some(&up), Some(&e), None), "values changed");
}

#[test]
fn an_entry_from_before_keyed_digests_still_compares() {
    let r = release(json!({"a": 1}));
    let mut e = entry_for(&r);
    e.values_digest = crate::values::digest(r.values());
    assert!(e.is_unkeyed());
    let up = deployed("1.18.2", "deployed");
    assert_eq!(drift(&r, Some(&up), Some(&e), None), "up to date");
}

/// The digest status shows is the ledger's keyed one (or none without the
/// key), never a plain SHA-256 of values that may hold secrets.
#[test]
fn the_desired_digest_is_keyed_or_none() {
    let r = release(json!({"users": [{"user": {"client-key-data": "c2VjcmV0"}}]}));
    let keyed = status_of(&r, None, None, Some(&key()), ready(), vec![]);
    let digest = keyed.desired.values_digest.unwrap();
    assert!(digest.starts_with("hmac-sha256:"), "{digest}");
    assert_eq!(Some(digest), Some(key().digest(r.values())));
    let unkeyed = status_of(&r, None, None, None, ready(), vec![]);
    assert_eq!(unkeyed.desired.values_digest, None);
}

fn ready() -> Ready {
    Ready {
        ok: true,
        message: "ready".into(),
        workloads: vec![],
    }
}
