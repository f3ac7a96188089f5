use super::*;
use pretty_assertions::assert_eq;

fn fixture<T: serde::de::DeserializeOwned>(name: &str) -> T {
    let path = format!(
        "{}/tests/fixtures/objects/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn pending(reason: &str) -> Readiness {
    Readiness::Pending(reason.to_string())
}

#[test]
fn daemonset_fully_rolled_out_is_ready() {
    assert_eq!(
        daemonset(&fixture("daemonset-cilium-rolled-out.yaml")),
        Readiness::Ready
    );
}

#[test]
fn daemonset_stale_generation_is_not_mistaken_for_done() {
    // Every counter says "done", but they describe generation 2.
    assert_eq!(
        daemonset(&fixture("daemonset-cilium-stale-generation.yaml")),
        pending("waiting for the controller to observe generation 3")
    );
}

#[test]
fn daemonset_mid_rollout_counts_updated_pods() {
    assert_eq!(
        daemonset(&fixture("daemonset-cilium-mid-rollout.yaml")),
        pending("1 of 3 pods updated")
    );
}

#[test]
fn daemonset_stuck_in_init_waits_for_available_pods() {
    assert_eq!(
        daemonset(&fixture("daemonset-cilium-stuck-init.yaml")),
        pending("0 of 3 updated pods available")
    );
}

#[test]
fn daemonset_on_delete_ignores_pods_not_yet_updated() {
    assert_eq!(
        daemonset(&fixture("daemonset-cilium-ondelete.yaml")),
        Readiness::Ready
    );
}

#[test]
fn daemonset_on_delete_still_needs_available_pods() {
    let mut ds: DaemonSet = fixture("daemonset-cilium-ondelete.yaml");
    ds.status.as_mut().unwrap().number_available = Some(1);
    assert_eq!(daemonset(&ds), pending("1 of 3 pods available"));
}

#[test]
fn daemonset_without_status_waits_for_the_controller() {
    let mut ds: DaemonSet = fixture("daemonset-cilium-rolled-out.yaml");
    ds.status = None;
    assert_eq!(
        daemonset(&ds),
        pending("waiting for the controller to observe generation 2")
    );
}

#[test]
fn deployment_available_is_ready() {
    assert_eq!(
        deployment(&fixture("deployment-coredns-available.yaml")),
        Readiness::Ready
    );
}

#[test]
fn deployment_with_pending_pods_waits_for_availability() {
    assert_eq!(
        deployment(&fixture("deployment-coredns-pending.yaml")),
        pending("0 of 2 updated pods available")
    );
}

#[test]
fn deployment_waits_for_old_pods_to_go() {
    assert_eq!(
        deployment(&fixture("deployment-coredns-old-replicas.yaml")),
        pending("1 old pod pending termination")
    );
}

#[test]
fn deployment_past_its_progress_deadline_fails() {
    assert_eq!(
        deployment(&fixture("deployment-coredns-progress-deadline.yaml")),
        Readiness::Failed(
            "progress deadline exceeded: ReplicaSet \"coredns-6b8f4c7d9f\" has timed out progressing."
                .into()
        )
    );
}

#[test]
fn deployment_stale_generation_is_pending_even_with_a_deadline_condition() {
    // The deadline belongs to the previous spec; the new one may well succeed.
    let mut d: Deployment = fixture("deployment-coredns-progress-deadline.yaml");
    d.metadata.generation = Some(3);
    assert_eq!(
        deployment(&d),
        pending("waiting for the controller to observe generation 3")
    );
}

#[test]
fn deployment_partly_updated_counts_new_pods() {
    let mut d: Deployment = fixture("deployment-coredns-old-replicas.yaml");
    d.status.as_mut().unwrap().updated_replicas = Some(1);
    assert_eq!(deployment(&d), pending("1 of 2 pods updated"));
}

#[test]
fn statefulset_rolled_out_is_ready() {
    assert_eq!(
        statefulset(&fixture("statefulset-rolled-out.yaml")),
        Readiness::Ready
    );
}

#[test]
fn statefulset_mid_rollout_counts_updated_pods() {
    assert_eq!(
        statefulset(&fixture("statefulset-mid-rollout.yaml")),
        pending("2 of 3 pods updated")
    );
}

#[test]
fn statefulset_waits_for_revisions_to_converge() {
    let mut sts: StatefulSet = fixture("statefulset-mid-rollout.yaml");
    sts.status.as_mut().unwrap().updated_replicas = Some(3);
    assert_eq!(
        statefulset(&sts),
        pending("waiting for the rolling update to revision dragonfly-58f7c9b6d4 to complete")
    );
}

#[test]
fn statefulset_partition_is_done_when_pods_above_it_are_updated() {
    assert_eq!(
        statefulset(&fixture("statefulset-partition-done.yaml")),
        Readiness::Ready
    );
}

#[test]
fn statefulset_partition_waits_for_pods_above_it() {
    assert_eq!(
        statefulset(&fixture("statefulset-partition-pending.yaml")),
        pending("0 of 1 pods updated (partition 2)")
    );
}

#[test]
fn statefulset_waits_for_ready_pods() {
    assert_eq!(
        statefulset(&fixture("statefulset-not-ready.yaml")),
        pending("1 of 3 pods ready")
    );
}

#[test]
fn job_complete_is_ready() {
    assert_eq!(job(&fixture("job-complete.yaml")), Readiness::Ready);
}

#[test]
fn job_failed_fails_with_reason_and_message() {
    assert_eq!(
        job(&fixture("job-failed.yaml")),
        Readiness::Failed(
            "BackoffLimitExceeded: Job has reached the specified backoff limit".into()
        )
    );
}

#[test]
fn job_running_reports_progress() {
    assert_eq!(
        job(&fixture("job-running.yaml")),
        pending("0 of 1 completions, 1 active, 1 failed")
    );
}

#[test]
fn crd_established_condition_is_ready() {
    let crd: Value = fixture("crd-gateways-established.yaml");
    assert_eq!(condition(&crd, "Established", "True"), Readiness::Ready);
}

#[test]
fn conditions_compare_without_case_as_kubectl_wait_does() {
    // `kubectl wait --for condition=established` (imported as written)
    // waits for `Established`, and `=true` for `True`.
    let crd: Value = fixture("crd-gateways-established.yaml");
    assert_eq!(condition(&crd, "established", "true"), Readiness::Ready);
    assert_eq!(condition(&crd, "ESTABLISHED", "True"), Readiness::Ready);
    let Readiness::Pending(why) = condition(&crd, "established", "false") else {
        panic!("True is not false")
    };
    assert!(why.starts_with("condition established is True"), "{why}");
}

#[test]
fn crd_not_yet_established_is_pending() {
    let crd: Value = fixture("crd-gateways-names-only.yaml");
    assert_eq!(
        condition(&crd, "Established", "True"),
        pending("condition Established not reported yet")
    );
}

#[test]
fn condition_with_other_status_explains_itself() {
    let d: Value = fixture("deployment-coredns-pending.yaml");
    assert_eq!(
        condition(&d, "Available", "True"),
        pending(
            "condition Available is False (MinimumReplicasUnavailable: Deployment does not have minimum availability.)"
        )
    );
}

#[test]
fn condition_can_wait_for_false() {
    let d: Value = fixture("deployment-coredns-pending.yaml");
    assert_eq!(condition(&d, "Available", "False"), Readiness::Ready);
}

#[test]
fn condition_from_an_older_generation_is_pending() {
    // Flux objects carry observedGeneration per condition (metav1.Condition).
    let obj = serde_json::json!({
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": { "name": "flux-system", "generation": 4 },
        "status": { "conditions": [
            { "type": "Ready", "status": "True", "observedGeneration": 3,
              "reason": "ReconciliationSucceeded", "message": "Applied revision: main@sha1:abc" }
        ] }
    });
    assert_eq!(
        condition(&obj, "Ready", "True"),
        pending("condition Ready has not observed generation 4 yet")
    );
}

#[test]
fn condition_behind_status_observed_generation_is_pending() {
    let mut d: Value = fixture("deployment-coredns-available.yaml");
    d["metadata"]["generation"] = 2.into();
    assert_eq!(
        condition(&d, "Available", "True"),
        pending("waiting for the controller to observe generation 2")
    );
}

#[test]
fn for_kind_dispatches_dynamic_objects() {
    let ds: Value = fixture("daemonset-cilium-mid-rollout.yaml");
    assert_eq!(
        for_kind("DaemonSet", &ds).unwrap(),
        pending("1 of 3 pods updated")
    );
    let job: Value = fixture("job-failed.yaml");
    assert!(matches!(for_kind("Job", &job), Ok(Readiness::Failed(_))));
    assert!(matches!(judge("Job", &job), Readiness::Failed(_)));
}

#[test]
fn for_kind_rejects_kinds_without_a_rollout() {
    let err = for_kind("ConfigMap", &serde_json::json!({})).unwrap_err();
    assert!(matches!(&err, ReadyError::NoRolloutCheck(kind) if kind == "ConfigMap"));
    assert_eq!(
        err.to_string(),
        "no rollout check for kind ConfigMap (expected one of Deployment, DaemonSet, StatefulSet, Job); use a condition hook"
    );
}

#[test]
fn for_kind_reports_objects_it_cannot_read() {
    let err = for_kind("Deployment", &serde_json::json!({"spec": 3})).unwrap_err();
    assert!(matches!(&err, ReadyError::Unreadable { kind, .. } if kind == "Deployment"));
    assert!(
        err.to_string().starts_with("cannot read Deployment: "),
        "{err}"
    );
    assert!(matches!(
        judge("Deployment", &serde_json::json!({"spec": 3})),
        Readiness::Failed(why) if why.starts_with("cannot read Deployment: ")
    ));
}

#[test]
fn rollout_check_validates_kind_up_front() {
    assert!(matches!(
        rollout_check("Service"),
        Err(ReadyError::NoRolloutCheck(_))
    ));
    let check = rollout_check("StatefulSet").unwrap();
    assert_eq!(check(None), pending("StatefulSet does not exist yet"));
    let sts: Value = fixture("statefulset-rolled-out.yaml");
    assert_eq!(check(Some(&sts)), Readiness::Ready);
}

#[test]
fn condition_check_and_exists_handle_absent_objects() {
    let check = condition_check("Established", "True");
    assert_eq!(check(None), pending("object does not exist yet"));
    let crd: Value = fixture("crd-gateways-established.yaml");
    assert_eq!(check(Some(&crd)), Readiness::Ready);
    assert_eq!(exists(Some(&crd)), Readiness::Ready);
    assert_eq!(exists(None), pending("object does not exist yet"));
}

#[test]
fn crd_with_clashing_names_fails_at_once() {
    let crd = serde_json::json!({"metadata": {"name": "x", "generation": 1}, "status": {"conditions": [
        {"type": "NamesAccepted", "status": "False", "message": "\"widgets\" is already in use"},
        {"type": "Established", "status": "False"}]}});
    assert!(
        matches!(super::crd_established(Some(&crd)), super::Readiness::Failed(m) if m.contains("already in use"))
    );
    let ok = serde_json::json!({"metadata": {"name": "x"}, "status": {"conditions": [{"type": "Established", "status": "True"}]}});
    assert_eq!(super::crd_established(Some(&ok)), super::Readiness::Ready);
    assert!(matches!(
        super::crd_established(None),
        super::Readiness::Pending(_)
    ));
}

fn object(name: &str) -> Value {
    fixture(name)
}

#[test]
fn a_rollout_is_counted_in_pods_of_the_current_template() {
    // 2 pods available, 1 pod runs the new template, and 2 nodes still run
    // the old one: the available pods may all be old ones, so none of the
    // new template is counted (`1/3` showed the old pods' readiness).
    assert_eq!(
        tally("DaemonSet", &[object("daemonset-cilium-mid-rollout.yaml")]),
        Some((0, 3))
    );
    // A Deployment of 1 replica mid-rollout: the old ReplicaSet's pod is
    // the available one, the only new pod is not ready yet: 0/1, not 1/1.
    let rolling = serde_json::json!({
        "metadata": {"generation": 2}, "spec": {"replicas": 1},
        "status": {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1,
                   "availableReplicas": 1, "readyReplicas": 1, "unavailableReplicas": 1}
    });
    assert_eq!(
        tally("Deployment", std::slice::from_ref(&rolling)),
        Some((0, 1))
    );
    // Once the old pod is gone and the new one available: 1/1.
    let mut done = rolling;
    done["status"] = serde_json::json!({"observedGeneration": 2, "replicas": 1,
        "updatedReplicas": 1, "availableReplicas": 1, "readyReplicas": 1});
    assert_eq!(tally("Deployment", &[done]), Some((1, 1)));
    assert_eq!(
        tally("DaemonSet", &[object("daemonset-cilium-rolled-out.yaml")]),
        Some((3, 3))
    );
    assert_eq!(
        tally("Deployment", &[object("deployment-coredns-pending.yaml")]),
        Some((0, 2))
    );
    assert_eq!(
        tally("Job", &[object("job-running.yaml")]).map(|(_, total)| total),
        Some(1)
    );
}

#[test]
fn a_status_of_an_older_generation_counts_nothing_done() {
    // Every counter says 3 of 3, for generation 2 of 3.
    assert_eq!(
        tally(
            "DaemonSet",
            &[object("daemonset-cilium-stale-generation.yaml")]
        ),
        Some((0, 3))
    );
    // A fresh Deployment without status: 0 of its replicas.
    let fresh = serde_json::json!({"metadata": {"generation": 1}, "spec": {"replicas": 3}});
    assert_eq!(tally("Deployment", &[fresh]), Some((0, 3)));
}

#[test]
fn nothing_to_count_is_no_tally_or_nothing_wanted_yet() {
    assert_eq!(tally("Deployment", &[]), None);
    // A DaemonSet not scheduled yet: how many pods it wants is unknown.
    let fresh = serde_json::json!({"metadata": {"generation": 1}, "spec": {}});
    assert_eq!(tally("DaemonSet", &[fresh]), Some((0, 0)));
    assert_eq!(tally("Service", &[object("job-running.yaml")]), None);
}

#[test]
fn a_label_selected_set_is_summed() {
    let both = [
        object("daemonset-cilium-mid-rollout.yaml"),
        object("daemonset-cilium-rolled-out.yaml"),
    ];
    assert_eq!(tally("DaemonSet", &both), Some((3, 6)));
}

#[test]
fn tallies_read_as_the_display_shows_them() {
    let tally = |unit| Tally {
        subject: "DaemonSet/cilium".into(),
        done: 1,
        total: 3,
        unit,
    };
    assert_eq!(tally("ready").label(), "rollout DaemonSet/cilium 1/3 ready");
    assert_eq!(tally("complete").label(), "DaemonSet/cilium 1/3 complete");
    let mut starting = tally("ready");
    starting.total = 0;
    starting.done = 0;
    assert_eq!(starting.label(), "rollout DaemonSet/cilium starting");
}
