//! The STATUS, READY and RESTARTS columns of `kubectl get pods`, computed the
//! way kubectl's printPod does, because that is what users already read and
//! search for ("Init:0/6", "Init:CrashLoopBackOff", "Terminating").

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

pub(super) struct PodRow {
    pub status: String,
    pub ready: usize,
    pub total: usize,
    pub restarts: i32,
}

/// Sidecars are init containers with `restartPolicy: Always`; they count as
/// regular containers once started.
pub(super) fn is_sidecar(pod: &Pod, name: &str) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == name))
        .and_then(|c| c.restart_policy.as_deref())
        == Some("Always")
}

pub(super) fn has_condition(pod: &Pod, type_: &str) -> bool {
    conditions(pod).any(|c| c.type_ == type_ && c.status == "True")
}

fn conditions(pod: &Pod) -> impl Iterator<Item = &k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
}

fn nonempty(s: Option<&String>) -> Option<&str> {
    s.map(String::as_str).filter(|s| !s.is_empty())
}

pub(super) fn pod_row(pod: &Pod) -> PodRow {
    let status = pod.status.clone().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let phase = status.phase.clone().unwrap_or_default();
    let mut reason = nonempty(status.reason.as_ref())
        .unwrap_or(&phase)
        .to_string();
    if conditions(pod)
        .any(|c| c.type_ == "PodScheduled" && c.reason.as_deref() == Some("SchedulingGated"))
    {
        reason = "SchedulingGated".into();
    }

    let init_specs = spec.init_containers.unwrap_or_default();
    let sidecars = init_specs
        .iter()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .count();
    let mut row = PodRow {
        status: String::new(),
        ready: 0,
        total: spec.containers.len() + sidecars,
        restarts: 0,
    };

    let mut sidecar_restarts = 0;
    let mut initializing = false;
    for (i, c) in status.init_container_statuses.iter().flatten().enumerate() {
        row.restarts += c.restart_count;
        let sidecar = is_sidecar(pod, &c.name);
        if sidecar {
            sidecar_restarts += c.restart_count;
        }
        let state = c.state.clone().unwrap_or_default();
        if state.terminated.as_ref().is_some_and(|t| t.exit_code == 0) {
            continue;
        }
        if sidecar && c.started == Some(true) {
            row.ready += usize::from(c.ready);
            continue;
        }
        initializing = true;
        let waiting = state
            .waiting
            .as_ref()
            .and_then(|w| nonempty(w.reason.as_ref()));
        reason = match (&state.terminated, waiting) {
            (Some(t), _) => match (nonempty(t.reason.as_ref()), t.signal) {
                (Some(r), _) => format!("Init:{r}"),
                (None, Some(sig)) if sig != 0 => format!("Init:Signal:{sig}"),
                _ => format!("Init:ExitCode:{}", t.exit_code),
            },
            (None, Some(w)) if w != "PodInitializing" => format!("Init:{w}"),
            _ => format!("Init:{i}/{}", init_specs.len()),
        };
        break;
    }

    if !initializing || has_condition(pod, "Initialized") {
        row.restarts = sidecar_restarts;
        let mut has_running = false;
        for c in status.container_statuses.iter().flatten().rev() {
            row.restarts += c.restart_count;
            if let Some(r) = container_reason(c) {
                reason = r;
            } else if c.ready && c.state.as_ref().is_some_and(|s| s.running.is_some()) {
                has_running = true;
                row.ready += 1;
            }
        }
        // A pod whose last container completed but another still runs is not done.
        if reason == "Completed" && has_running {
            reason = if has_condition(pod, "Ready") {
                "Running"
            } else {
                "NotReady"
            }
            .into();
        }
    }

    if pod.metadata.deletion_timestamp.is_some() {
        if status.reason.as_deref() == Some("NodeLost") {
            reason = "Unknown".into();
        } else if phase != "Succeeded" && phase != "Failed" {
            reason = "Terminating".into();
        }
    }
    row.status = reason;
    row
}

/// A container's own word for why it is not running, if it has one.
fn container_reason(c: &ContainerStatus) -> Option<String> {
    let state = c.state.as_ref()?;
    if let Some(w) = state
        .waiting
        .as_ref()
        .and_then(|w| nonempty(w.reason.as_ref()))
    {
        return Some(w.to_string());
    }
    let t = state.terminated.as_ref()?;
    Some(match (nonempty(t.reason.as_ref()), t.signal) {
        (Some(r), _) => r.to_string(),
        (None, Some(sig)) if sig != 0 => format!("Signal:{sig}"),
        _ => format!("ExitCode:{}", t.exit_code),
    })
}
