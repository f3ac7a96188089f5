//! Readiness as pure functions of an object, so every state can be unit-tested
//! against YAML of a real object and the async wait stays a thin watch loop.
//!
//! The rollout rules mirror `kubectl rollout status`, with one deliberate
//! difference: `metadata.generation` is always compared with
//! `status.observedGeneration` first, so the status left behind by the previous
//! rollout is never reported as this rollout's success.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde_json::Value;

/// Where an object stands, with a reason a user can act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", content = "reason", rename_all = "lowercase")]
pub enum Readiness {
    Ready,
    /// Not there yet; the reason reads like "2 of 3 updated pods available".
    Pending(String),
    /// Will not get there without someone changing something.
    Failed(String),
}

/// How far a rollout is, counted for a progress display: `done` of `total`
/// pods (`unit` `ready`), or completions of a Job (`unit` `complete`).
/// `subject` names what is counted, `DaemonSet/cilium`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Tally {
    pub subject: String,
    pub done: i64,
    pub total: i64,
    pub unit: &'static str,
}

impl Tally {
    /// `rollout DaemonSet/cilium 1/3 ready`, `Job/migrate 0/1 complete`;
    /// `rollout DaemonSet/cilium starting` while it wants no pods yet.
    pub fn label(&self) -> String {
        let verb = if self.unit == "complete" {
            ""
        } else {
            "rollout "
        };
        if self.total == 0 {
            return format!("{verb}{} starting", self.subject);
        }
        format!(
            "{verb}{} {}/{} {}",
            self.subject, self.done, self.total, self.unit
        )
    }
}

/// Counts a rollout of `kind` over the selected `objects`: pods of the
/// current template that are available (Deployment, DaemonSet), ready
/// (StatefulSet) or Job completions, summed over the objects. `None` when
/// there is no object; a DaemonSet its controller has not scheduled yet
/// wants 0 pods so far (the number is unknown until then). A status the controller has not caught up with counts as none done, so a
/// fresh Deployment of 3 replicas reads `0/3`, not the previous rollout's
/// figures.
pub fn tally(kind: &str, objects: &[Value]) -> Option<(i64, i64)> {
    let int = |o: &Value, path: &str| o.pointer(path).and_then(Value::as_i64);
    let mut sum = None;
    for o in objects {
        let generation = int(o, "/metadata/generation").unwrap_or(1).max(1);
        let current = int(o, "/status/observedGeneration").is_some_and(|g| g >= generation);
        let (done, total) = match kind {
            "Deployment" => {
                // `availableReplicas` counts the old ReplicaSets' pods too:
                // only what is left after every old pod is counted
                // available is surely the new template's, as `kubectl
                // rollout status` sees it (its "N of M updated replicas are
                // available" once no old pod is left).
                let updated = int(o, "/status/updatedReplicas").unwrap_or(0);
                let old = (int(o, "/status/replicas").unwrap_or(0) - updated).max(0);
                let available = int(o, "/status/availableReplicas").unwrap_or(0);
                (
                    (available - old).clamp(0, updated.max(0)),
                    int(o, "/spec/replicas").unwrap_or(1),
                )
            }
            "StatefulSet" => (
                int(o, "/status/readyReplicas").unwrap_or(0),
                int(o, "/spec/replicas").unwrap_or(1),
            ),
            "DaemonSet" => {
                // Unknown until the controller has scheduled it: 0.
                let total = int(o, "/status/desiredNumberScheduled").unwrap_or(0);
                let available = int(o, "/status/numberAvailable").unwrap_or(0);
                let on_delete = o
                    .pointer("/spec/updateStrategy/type")
                    .and_then(Value::as_str)
                    == Some("OnDelete");
                let updated = int(o, "/status/updatedNumberScheduled").unwrap_or(0);
                // The nodes not updated yet may run an old pod, counted in
                // `numberAvailable`: only what is left without them is
                // surely new.
                let old = (total - updated).max(0);
                (
                    if on_delete {
                        available
                    } else {
                        (available - old).clamp(0, updated.max(0))
                    },
                    total,
                )
            }
            "Job" => (
                int(o, "/status/succeeded").unwrap_or(0),
                int(o, "/spec/completions").unwrap_or(1),
            ),
            _ => return None,
        };
        // A Job has no observedGeneration: its counts are always its own.
        let done = if current || kind == "Job" { done } else { 0 };
        let (d, t) = sum.unwrap_or((0, 0));
        sum = Some((d + done.min(total), t + total));
    }
    sum
}

/// The kinds [`for_kind`] knows how to judge.
pub const ROLLOUT_KINDS: [&str; 4] = ["Deployment", "DaemonSet", "StatefulSet", "Job"];

/// The controller has not caught up with the latest spec yet.
fn stale(meta: &ObjectMeta, observed: Option<i64>) -> Option<Readiness> {
    let generation = meta.generation.unwrap_or(0);
    let observed = observed.unwrap_or(0);
    (observed == 0 || observed < generation).then(|| {
        Readiness::Pending(format!(
            "waiting for the controller to observe generation {}",
            generation.max(1)
        ))
    })
}

pub fn deployment(d: &Deployment) -> Readiness {
    let status = d.status.clone().unwrap_or_default();
    if let Some(pending) = stale(&d.metadata, status.observed_generation) {
        return pending;
    }
    let spec = d.spec.as_ref();
    let deadline = status.conditions.iter().flatten().find(|c| {
        c.type_ == "Progressing" && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
    });
    if let Some(c) = deadline {
        return Readiness::Failed(format!(
            "progress deadline exceeded: {}",
            c.message
                .as_deref()
                .unwrap_or("the rollout made no progress")
        ));
    }
    let want = spec.and_then(|s| s.replicas).unwrap_or(1);
    let updated = status.updated_replicas.unwrap_or(0);
    let total = status.replicas.unwrap_or(0);
    let available = status.available_replicas.unwrap_or(0);
    if updated < want {
        return Readiness::Pending(format!("{updated} of {want} pods updated"));
    }
    if total > updated {
        let old = total - updated;
        let pods = if old == 1 { "pod" } else { "pods" };
        return Readiness::Pending(format!("{old} old {pods} pending termination"));
    }
    if available < want {
        return Readiness::Pending(format!("{available} of {want} updated pods available"));
    }
    Readiness::Ready
}

pub fn daemonset(ds: &DaemonSet) -> Readiness {
    let status = ds.status.clone().unwrap_or_default();
    if let Some(pending) = stale(&ds.metadata, status.observed_generation) {
        return pending;
    }
    let desired = status.desired_number_scheduled;
    let available = status.number_available.unwrap_or(0);
    let on_delete = ds
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.type_.as_deref())
        == Some("OnDelete");
    // With OnDelete, pods only move to a new template when someone deletes them,
    // so "updated" never converges; availability of whatever runs still matters.
    if !on_delete {
        let updated = status.updated_number_scheduled.unwrap_or(0);
        if updated < desired {
            return Readiness::Pending(format!("{updated} of {desired} pods updated"));
        }
    }
    if available < desired {
        let which = if on_delete { "pods" } else { "updated pods" };
        return Readiness::Pending(format!("{available} of {desired} {which} available"));
    }
    Readiness::Ready
}

pub fn statefulset(sts: &StatefulSet) -> Readiness {
    let status = sts.status.clone().unwrap_or_default();
    if let Some(pending) = stale(&sts.metadata, status.observed_generation) {
        return pending;
    }
    let spec = sts.spec.as_ref();
    let want = spec.and_then(|s| s.replicas).unwrap_or(1);
    let ready = status.ready_replicas.unwrap_or(0);
    if ready < want {
        return Readiness::Pending(format!("{ready} of {want} pods ready"));
    }
    let strategy = spec.and_then(|s| s.update_strategy.as_ref());
    if strategy.and_then(|u| u.type_.as_deref()) == Some("OnDelete") {
        return Readiness::Ready;
    }
    let updated = status.updated_replicas.unwrap_or(0);
    let partition = strategy
        .and_then(|u| u.rolling_update.as_ref())
        .and_then(|r| r.partition)
        .unwrap_or(0);
    // Pods below the partition stay on the old revision on purpose, so the
    // revisions never converge: only the pods at or above it must be updated.
    if partition > 0 {
        let target = (want - partition).max(0);
        if updated < target {
            return Readiness::Pending(format!(
                "{updated} of {target} pods updated (partition {partition})"
            ));
        }
        return Readiness::Ready;
    }
    if updated < want {
        return Readiness::Pending(format!("{updated} of {want} pods updated"));
    }
    let update_revision = status.update_revision.unwrap_or_default();
    if status.current_revision.unwrap_or_default() != update_revision {
        return Readiness::Pending(format!(
            "waiting for the rolling update to revision {update_revision} to complete"
        ));
    }
    Readiness::Ready
}

pub fn job(j: &Job) -> Readiness {
    let status = j.status.clone().unwrap_or_default();
    let conditions = status.conditions.unwrap_or_default();
    let holds = |t: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == t && c.status == "True")
    };
    if holds("Complete").is_some() {
        return Readiness::Ready;
    }
    if let Some(c) = holds("Failed") {
        let reason = c.reason.as_deref().unwrap_or("Failed");
        return Readiness::Failed(match c.message.as_deref() {
            Some(m) if !m.is_empty() => format!("{reason}: {m}"),
            _ => reason.to_string(),
        });
    }
    if holds("Suspended").is_some() {
        return Readiness::Pending("job is suspended".into());
    }
    let want = j.spec.as_ref().and_then(|s| s.completions).unwrap_or(1);
    let succeeded = status.succeeded.unwrap_or(0);
    let active = status.active.unwrap_or(0);
    let failed = status.failed.unwrap_or(0);
    let mut reason = format!("{succeeded} of {want} completions, {active} active");
    if failed > 0 {
        reason.push_str(&format!(", {failed} failed"));
    }
    Readiness::Pending(reason)
}

/// `status.conditions[type == type_].status == status`, for any object
/// (CRD `Established`, Deployment `Available`, a Flux custom resource `Ready`).
/// Type and status compare as `kubectl wait --for=condition=…` compares
/// them, without regard to case (`condition=established` waits for
/// `Established`; kubectl's `strings.EqualFold`).
pub fn condition(obj: &Value, type_: &str, status: &str) -> Readiness {
    let generation = obj.pointer("/metadata/generation").and_then(Value::as_i64);
    let observed = obj
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64);
    if let (Some(g), Some(o)) = (generation, observed)
        && o < g
    {
        return Readiness::Pending(format!(
            "waiting for the controller to observe generation {g}"
        ));
    }
    let found = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| {
            c.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.eq_ignore_ascii_case(type_))
        });
    let Some(c) = found else {
        return Readiness::Pending(format!("condition {type_} not reported yet"));
    };
    // A condition may carry its own observedGeneration (metav1.Condition).
    let cond_observed = c.get("observedGeneration").and_then(Value::as_i64);
    if let (Some(g), Some(o)) = (generation, cond_observed)
        && o < g
    {
        return Readiness::Pending(format!(
            "condition {type_} has not observed generation {g} yet"
        ));
    }
    let actual = c.get("status").and_then(Value::as_str).unwrap_or("Unknown");
    if actual.eq_ignore_ascii_case(status) {
        return Readiness::Ready;
    }
    let text = |k: &str| c.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
    let mut reason = format!("condition {type_} is {actual}");
    match (text("reason"), text("message")) {
        (Some(r), Some(m)) => reason.push_str(&format!(" ({r}: {m})")),
        (Some(s), None) | (None, Some(s)) => reason.push_str(&format!(" ({s})")),
        (None, None) => {}
    }
    Readiness::Pending(reason)
}

/// A CRD is usable once `Established`; `NamesAccepted=False` (its names
/// clash with another CRD's) never resolves by waiting, so it fails at once.
pub fn crd_established(obj: Option<&Value>) -> Readiness {
    let Some(obj) = obj else {
        return Readiness::Pending("the CRD does not exist yet".into());
    };
    let names = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("NamesAccepted"));
    if let Some(c) = names
        && c.get("status").and_then(Value::as_str) == Some("False")
    {
        let message = c
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("names not accepted");
        return Readiness::Failed(format!("NamesAccepted is False: {message}"));
    }
    condition(obj, "Established", "True")
}

/// Why an object cannot be judged by [`for_kind`].
#[derive(Debug, thiserror::Error)]
pub enum ReadyError {
    /// The object does not have the shape of its kind.
    #[error("cannot read {kind}: {source}")]
    Unreadable {
        kind: String,
        source: serde_json::Error,
    },
    /// A kind without a rollout (a Service, a ConfigMap, a custom resource).
    #[error(
        "no rollout check for kind {0} (expected one of {list}); use a condition hook",
        list = ROLLOUT_KINDS.join(", ")
    )]
    NoRolloutCheck(String),
}

/// Judges a rollout kind from JSON, so objects read through a dynamic API work.
pub fn for_kind(kind: &str, obj: &Value) -> Result<Readiness, ReadyError> {
    fn typed<T: serde::de::DeserializeOwned>(kind: &str, obj: &Value) -> Result<T, ReadyError> {
        T::deserialize(obj).map_err(|source| ReadyError::Unreadable {
            kind: kind.to_string(),
            source,
        })
    }
    match kind {
        "Deployment" => Ok(deployment(&typed(kind, obj)?)),
        "DaemonSet" => Ok(daemonset(&typed(kind, obj)?)),
        "StatefulSet" => Ok(statefulset(&typed(kind, obj)?)),
        "Job" => Ok(job(&typed(kind, obj)?)),
        other => Err(ReadyError::NoRolloutCheck(other.to_string())),
    }
}

/// [`for_kind`], with an object that cannot be judged counting as Failed.
pub fn judge(kind: &str, obj: &Value) -> Readiness {
    for_kind(kind, obj).unwrap_or_else(|e| Readiness::Failed(e.to_string()))
}

/// A ready-made check for `wait::wait_for`: the rollout of `kind`.
/// Fails up front for kinds without a rollout check.
pub fn rollout_check(
    kind: &str,
) -> Result<impl Fn(Option<&Value>) -> Readiness + use<>, ReadyError> {
    if !ROLLOUT_KINDS.contains(&kind) {
        return Err(ReadyError::NoRolloutCheck(kind.to_string()));
    }
    let kind = kind.to_string();
    Ok(move |obj: Option<&Value>| match obj {
        None => Readiness::Pending(format!("{kind} does not exist yet")),
        Some(v) => judge(&kind, v),
    })
}

/// A ready-made check for `wait::wait_for`: a condition on any object.
pub fn condition_check(type_: &str, status: &str) -> impl Fn(Option<&Value>) -> Readiness + use<> {
    let (type_, status) = (type_.to_string(), status.to_string());
    move |obj: Option<&Value>| match obj {
        None => Readiness::Pending("object does not exist yet".into()),
        Some(v) => condition(v, &type_, &status),
    }
}

/// A ready-made check for `wait::wait_for`: the object exists.
pub fn exists(obj: Option<&Value>) -> Readiness {
    match obj {
        Some(_) => Readiness::Ready,
        None => Readiness::Pending("object does not exist yet".into()),
    }
}

#[cfg(test)]
mod tests;
