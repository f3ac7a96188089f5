//! Scripted stand-ins for the workload, Job, Pod (kubelet) and CRD controllers: after a
//! create or spec change they write the status a healthy (or failed)
//! rollout ends with, after a scripted delay.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::resources::{CRD_GROUP, CRD_KIND};
use super::store::{Change, WriteOpts, now_rfc3339};
use super::{Shared, object_ref};

/// How a scripted controller answers a create or spec change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rollout {
    /// Status is written before the write's response is sent.
    Immediately,
    After(Duration),
    Never,
    /// Deployments report ProgressDeadlineExceeded, Jobs fail, CRDs get
    /// NamesAccepted=False, run-to-completion Pods end Failed, other Pods
    /// crash-loop; DaemonSets and StatefulSets never finish.
    FailAfter(Duration),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Success,
    Failure,
}

pub fn react(shared: &Arc<Shared>, change: &Change) {
    if change.deleted || !change.spec_changed {
        return;
    }
    let is_crd = change.group == CRD_GROUP && change.kind == CRD_KIND;
    let controlled = matches!(
        (change.group.as_str(), change.kind.as_str()),
        ("apps", "Deployment" | "DaemonSet" | "StatefulSet") | ("batch", "Job") | ("", "Pod")
    );
    if !controlled && !is_crd {
        return;
    }
    // A Pod inserted as a fixture with its status (a stuck init container,
    // a crash loop) keeps it: only the API drops status on create, and the
    // kubelet stand-in must not overwrite what the test set up.
    if change.kind == "Pod"
        && change.object["status"]
            .as_object()
            .is_some_and(|s| !s.is_empty())
    {
        return;
    }
    let script = {
        let st = shared.lock();
        if is_crd {
            st.crd_establish
                .get(&change.name)
                .copied()
                .unwrap_or(Rollout::Immediately)
        } else {
            let key = object_ref(&change.kind, &change.namespace, &change.name);
            st.rollouts.get(&key).copied().unwrap_or(st.default_rollout)
        }
    };
    let (delay, outcome) = match script {
        Rollout::Never => return,
        Rollout::Immediately => (None, Outcome::Success),
        Rollout::After(d) => (Some(d), Outcome::Success),
        Rollout::FailAfter(d) => (Some(d), Outcome::Failure),
    };
    let generation = change.object["metadata"]["generation"].as_i64();
    match delay {
        None => settle(shared, change, generation, outcome),
        Some(delay) => {
            let (shared, change) = (shared.clone(), change.clone());
            shared.runtime.clone().spawn(async move {
                tokio::time::sleep(delay).await;
                settle(&shared, &change, generation, outcome);
            });
        }
    }
}

fn settle(shared: &Arc<Shared>, change: &Change, generation: Option<i64>, outcome: Outcome) {
    shared.mutate(|st| {
        let rt = st
            .store
            .types()
            .iter()
            .find(|t| t.is(&change.group, &change.kind) && t.preferred)
            .cloned();
        let Some(rt) = rt else { return };
        let Some(obj) = st.store.get(&rt, &change.namespace, &change.name) else {
            return;
        };
        // A newer spec has its own pending rollout.
        if obj["metadata"]["generation"].as_i64() != generation {
            return;
        }
        let Some(status) = status_for(&obj, outcome) else {
            return;
        };
        let opts = WriteOpts {
            manager: Some(format!("{}-controller", change.kind.to_lowercase())),
            ..WriteOpts::default()
        };
        let body = json!({ "status": status });
        if st
            .store
            .update(&rt, &change.namespace, &change.name, body, true, &opts)
            .is_ok()
            && outcome == Outcome::Success
        {
            let key = object_ref(&change.kind, &change.namespace, &change.name);
            st.completed_at.insert(key, Instant::now());
        }
    });
}

fn condition(kind: &str, status: &str, reason: &str, message: &str) -> Value {
    let now = now_rfc3339();
    json!({
        "type": kind, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": now, "lastUpdateTime": now,
    })
}

fn revision(obj: &Value) -> String {
    let mut hasher = DefaultHasher::new();
    obj["spec"].to_string().hash(&mut hasher);
    format!(
        "{}-{:010x}",
        obj["metadata"]["name"].as_str().unwrap_or_default(),
        hasher.finish() & 0xff_ffff_ffff
    )
}

/// The loopback cluster has one node: DaemonSets are scheduled once.
const NODES: u32 = 1;

fn status_for(obj: &Value, outcome: Outcome) -> Option<Value> {
    let generation = obj["metadata"]["generation"].clone();
    let replicas = obj["spec"]["replicas"].as_i64().unwrap_or(1);
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let status = match (obj["kind"].as_str().unwrap_or_default(), outcome) {
        ("Deployment", Outcome::Success) => json!({
            "observedGeneration": generation, "replicas": replicas, "updatedReplicas": replicas,
            "readyReplicas": replicas, "availableReplicas": replicas,
            "conditions": [
                condition("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."),
                condition("Progressing", "True", "NewReplicaSetAvailable", &format!("ReplicaSet \"{name}\" has successfully progressed.")),
            ],
        }),
        ("Deployment", Outcome::Failure) => json!({
            "observedGeneration": generation, "replicas": replicas, "updatedReplicas": replicas,
            "unavailableReplicas": replicas,
            "conditions": [
                condition("Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability."),
                condition("Progressing", "False", "ProgressDeadlineExceeded", &format!("ReplicaSet \"{name}\" has timed out progressing.")),
            ],
        }),
        ("DaemonSet", Outcome::Success) => json!({
            "observedGeneration": generation, "currentNumberScheduled": NODES, "desiredNumberScheduled": NODES,
            "numberAvailable": NODES, "numberReady": NODES, "updatedNumberScheduled": NODES,
            "numberMisscheduled": 0,
        }),
        ("StatefulSet", Outcome::Success) => {
            let rev = revision(obj);
            json!({
                "observedGeneration": generation, "replicas": replicas, "readyReplicas": replicas,
                "currentReplicas": replicas, "updatedReplicas": replicas, "availableReplicas": replicas,
                "currentRevision": rev, "updateRevision": rev, "collisionCount": 0,
            })
        }
        ("Job", Outcome::Success) => json!({
            "startTime": obj["metadata"]["creationTimestamp"], "completionTime": now_rfc3339(),
            "succeeded": 1, "active": 0, "ready": 0,
            "conditions": [
                condition("SuccessCriteriaMet", "True", "CompletionsReached", "Reached expected number of succeeded pods"),
                condition("Complete", "True", "CompletionsReached", "Reached expected number of succeeded pods"),
            ],
        }),
        ("Job", Outcome::Failure) => json!({
            "startTime": obj["metadata"]["creationTimestamp"], "failed": 1, "active": 0, "ready": 0,
            "conditions": [
                condition("FailureTarget", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
                condition("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
            ],
        }),
        ("Pod", outcome) => pod_status(obj, outcome),
        (CRD_KIND, outcome) => crd_status(obj, outcome),
        _ => return None,
    };
    Some(status)
}

fn crd_status(crd: &Value, outcome: Outcome) -> Value {
    let mut names = crd["spec"]["names"].clone();
    let kind = names["kind"].as_str().unwrap_or_default().to_string();
    if names.get("singular").is_none() {
        names["singular"] = json!(kind.to_lowercase());
    }
    if names.get("listKind").is_none() {
        names["listKind"] = json!(format!("{kind}List"));
    }
    let storage: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .map(|v| v["name"].clone())
        .collect();
    let conditions = match outcome {
        Outcome::Success => json!([
            condition("NamesAccepted", "True", "NoConflicts", "no conflicts found"),
            condition(
                "Established",
                "True",
                "InitialNamesAccepted",
                "the initial names have been accepted"
            ),
        ]),
        Outcome::Failure => json!([
            condition(
                "NamesAccepted",
                "False",
                "ListKindConflict",
                "the list kind is already in use"
            ),
            condition(
                "Established",
                "False",
                "NotAccepted",
                "not all names are accepted"
            ),
        ]),
    };
    json!({ "conditions": conditions, "acceptedNames": names, "storedVersions": storage })
}

/// A Pod on the one node: one that runs to completion (`restartPolicy`
/// Never or OnFailure, as Helm's hook Pods do: spegel's post-delete
/// cleanup-wait) ends `Succeeded` (or `Failed`); any other runs and is Ready
/// (or crash-loops, never Ready). Helm waits for a hook Pod's phase
/// (helm pkg/kube/ready.go, statuswait.go).
fn pod_status(pod: &Value, outcome: Outcome) -> Value {
    let completes = matches!(
        pod["spec"]["restartPolicy"].as_str(),
        Some("Never" | "OnFailure")
    );
    let now = now_rfc3339();
    let containers = |state: Value, ready: bool| -> Vec<Value> {
        pod["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                json!({
                    "name": c["name"], "image": c["image"], "ready": ready,
                    "restartCount": 0, "state": state.clone(),
                })
            })
            .collect()
    };
    let terminated = |code: i32, reason: &str| json!({ "terminated": { "exitCode": code, "reason": reason, "startedAt": now, "finishedAt": now } });
    let (phase, ready, states) = match (completes, outcome) {
        (true, Outcome::Success) => (
            "Succeeded",
            false,
            containers(terminated(0, "Completed"), false),
        ),
        (true, Outcome::Failure) => ("Failed", false, containers(terminated(1, "Error"), false)),
        (false, Outcome::Success) => (
            "Running",
            true,
            containers(json!({ "running": { "startedAt": now } }), true),
        ),
        (false, Outcome::Failure) => (
            "Running",
            false,
            containers(
                json!({ "waiting": { "reason": "CrashLoopBackOff" } }),
                false,
            ),
        ),
    };
    let ready = if ready { "True" } else { "False" };
    json!({
        "phase": phase,
        "startTime": pod["metadata"]["creationTimestamp"],
        "conditions": [
            condition("PodScheduled", "True", "", ""),
            condition("Ready", ready, "", ""),
            condition("ContainersReady", ready, "", ""),
        ],
        "containerStatuses": states,
    })
}
