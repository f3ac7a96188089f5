//! What to show under a release whose workload did not become ready: its pods
//! as `kubectl get pods` would show them, why each one is stuck, and the last
//! events. Pure, so a stuck cluster can be replayed from YAML in a test.

mod pod_status;

use std::fmt;

use k8s_openapi::api::core::v1::{ContainerState, ContainerStatus, Event, Pod};
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

/// How many events a diagnosis keeps by default (the most recent ones).
pub const DEFAULT_EVENT_LIMIT: usize = 10;
/// How many pods the text rendering lists before summarising the rest.
const SHOWN_PODS: usize = 10;
/// Container messages can be whole log tails; keep a diagnosis readable.
const MAX_MESSAGE: usize = 300;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnosis {
    /// Unhealthy pods first, then by name.
    pub pods: Vec<PodDiagnosis>,
    /// Oldest first, at most the limit given to [`Diagnosis::build_with_limit`].
    pub events: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodDiagnosis {
    pub name: String,
    pub phase: String,
    /// The STATUS column of `kubectl get pods`.
    pub status: String,
    /// The READY column: "1/2".
    pub ready: String,
    pub restarts: i32,
    pub node: Option<String>,
    /// Why the pod is not ready, naming the container that holds it up.
    pub reason: Option<String>,
}

impl PodDiagnosis {
    pub fn from_pod(pod: &Pod) -> Self {
        let row = pod_status::pod_row(pod);
        PodDiagnosis {
            name: pod.metadata.name.clone().unwrap_or_default(),
            phase: pod
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_else(|| "Unknown".into()),
            status: row.status,
            ready: format!("{}/{}", row.ready, row.total),
            restarts: row.restarts,
            node: pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty()),
            reason: explain(pod),
        }
    }

    /// Running with every container ready, or finished successfully.
    pub fn is_healthy(&self) -> bool {
        let all_ready = self
            .ready
            .split_once('/')
            .is_some_and(|(ready, total)| ready == total);
        self.status == "Completed" || (self.status == "Running" && all_ready)
    }
}

impl Diagnosis {
    pub fn build(pods: &[Pod], events: &[Event]) -> Self {
        Self::build_with_limit(pods, events, DEFAULT_EVENT_LIMIT)
    }

    pub fn build_with_limit(pods: &[Pod], events: &[Event], limit: usize) -> Self {
        let mut pods: Vec<PodDiagnosis> = pods.iter().map(PodDiagnosis::from_pod).collect();
        pods.sort_by(|a, b| (a.is_healthy(), &a.name).cmp(&(b.is_healthy(), &b.name)));

        let mut seen = std::collections::HashSet::new();
        let mut dated: Vec<(Option<Timestamp>, String)> = events
            .iter()
            .filter(|e| match e.metadata.uid.as_deref() {
                Some(uid) => seen.insert(uid.to_string()),
                None => true,
            })
            .map(|e| (event_time(e), event_line(e)))
            .collect();
        dated.sort_by_key(|a| a.0);
        let skip = dated.len().saturating_sub(limit);
        let events = dated.into_iter().skip(skip).map(|(_, line)| line).collect();
        Diagnosis { pods, events }
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty() && self.events.is_empty()
    }
}

fn event_time(e: &Event) -> Option<Timestamp> {
    e.last_timestamp
        .as_ref()
        .map(|t| t.0)
        .or_else(|| e.event_time.as_ref().map(|t| t.0))
        .or_else(|| {
            e.series
                .as_ref()
                .and_then(|s| s.last_observed_time.as_ref())
                .map(|t| t.0)
        })
        .or_else(|| e.first_timestamp.as_ref().map(|t| t.0))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

fn event_line(e: &Event) -> String {
    let when = event_time(e).map_or_else(
        || "-".to_string(),
        |t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    );
    let obj = &e.involved_object;
    let mut line = format!(
        "{when} {} {} {}/{}: {}",
        e.type_.as_deref().unwrap_or("Normal"),
        e.reason.as_deref().unwrap_or("-"),
        obj.kind.as_deref().unwrap_or("?"),
        obj.name.as_deref().unwrap_or("?"),
        one_line(e.message.as_deref().unwrap_or("")),
    );
    let count = e
        .count
        .or_else(|| e.series.as_ref().and_then(|s| s.count))
        .unwrap_or(1);
    if count > 1 {
        line.push_str(&format!(" (x{count})"));
    }
    line
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The last non-empty line of a message: for a log tail kept by
/// `FallbackToLogsOnError`, that is where the error is.
fn summarize(msg: &str) -> Option<String> {
    let line = msg.lines().map(str::trim).rfind(|l| !l.is_empty())?;
    if line.chars().count() <= MAX_MESSAGE {
        return Some(line.to_string());
    }
    let cut: String = line.chars().take(MAX_MESSAGE).collect();
    Some(format!("{cut}…"))
}

fn explain(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    let conditions = status.conditions.iter().flatten();
    if let Some(c) = conditions
        .clone()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
    {
        let what = if c.reason.as_deref() == Some("SchedulingGated") {
            "scheduling gated"
        } else {
            "unschedulable"
        };
        let detail = c.message.as_deref().or(c.reason.as_deref()).unwrap_or("");
        return Some(format!("{what}: {}", one_line(detail)));
    }

    if !pod_status::has_condition(pod, "Initialized") {
        let stuck = status.init_container_statuses.iter().flatten().find(|c| {
            let done = c
                .state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .is_some_and(|t| t.exit_code == 0);
            let sidecar_up = pod_status::is_sidecar(pod, &c.name) && c.started == Some(true);
            !done && !sidecar_up
        });
        if let Some(c) = stuck {
            return Some(describe("init container", c, true));
        }
    }

    let unready: Vec<String> = status
        .container_statuses
        .iter()
        .flatten()
        .filter(|c| !c.ready && !terminated_ok(c.state.as_ref()))
        .map(|c| describe("container", c, false))
        .collect();
    if !unready.is_empty() {
        return Some(unready.join("; "));
    }

    let why = [status.reason.as_deref(), status.message.as_deref()];
    match why {
        [Some(r), Some(m)] => Some(format!("{r}: {}", one_line(m))),
        [Some(s), None] | [None, Some(s)] => Some(one_line(s)),
        [None, None] => None,
    }
}

fn terminated_ok(state: Option<&ContainerState>) -> bool {
    state
        .and_then(|s| s.terminated.as_ref())
        .is_some_and(|t| t.exit_code == 0)
}

/// "init container config waiting: CrashLoopBackOff (back-off 5m0s ...); last exit code 1: ..."
fn describe(what: &str, c: &ContainerStatus, init: bool) -> String {
    let mut out = format!("{what} {}", c.name);
    let state = c.state.clone().unwrap_or_default();
    let restarted = match c.restart_count {
        0 => String::new(),
        1 => " (restarted once)".into(),
        n => format!(" (restarted {n} times)"),
    };
    if let Some(t) = &state.terminated {
        out.push_str(&format!(" terminated with {}", exit_detail(t)));
        return out;
    }
    if let Some(w) = &state.waiting {
        out.push_str(" waiting");
        if let Some(r) = w.reason.as_deref().filter(|r| !r.is_empty()) {
            out.push_str(&format!(": {r}"));
        }
        if let Some(m) = w.message.as_deref().and_then(summarize) {
            out.push_str(&format!(" ({m})"));
        }
    } else if state.running.is_some() {
        out.push_str(" running");
        if !init {
            out.push_str(" but not ready");
        } else if c.restart_count == 0 {
            out.push_str(", not finished yet");
        }
    } else {
        out.push_str(" has no state yet");
    }
    out.push_str(&restarted);
    if let Some(t) = c.last_state.as_ref().and_then(|s| s.terminated.as_ref()) {
        out.push_str(&format!("; last {}", exit_detail(t)));
    }
    out
}

/// The label selector of a workload (`spec.selector`) in the string form the
/// API takes: "app=x,tier in (a,b),!legacy". `None` when the workload has no
/// usable selector: an empty one would select every pod in the namespace.
pub fn pod_selector(workload: &Value) -> Option<String> {
    let selector = workload.pointer("/spec/selector")?.as_object()?;
    let mut parts = Vec::new();
    let structured =
        selector.contains_key("matchLabels") || selector.contains_key("matchExpressions");
    // Services and ReplicationControllers use a plain map.
    let labels = if structured {
        selector.get("matchLabels").and_then(Value::as_object)
    } else {
        Some(selector)
    };
    let mut pairs = labels
        .into_iter()
        .flatten()
        .map(|(k, v)| Some(format!("{k}={}", v.as_str()?)))
        .collect::<Option<Vec<_>>>()?;
    pairs.sort();
    parts.extend(pairs);

    let exprs = selector.get("matchExpressions").and_then(Value::as_array);
    let mut requirements = Vec::new();
    for expr in exprs.into_iter().flatten() {
        let key = expr.get("key")?.as_str()?;
        let mut values = expr
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()?;
        values.sort();
        let values = values.join(",");
        requirements.push(match expr.get("operator")?.as_str()? {
            "In" => format!("{key} in ({values})"),
            "NotIn" => format!("{key} notin ({values})"),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => return None,
        });
    }
    parts.extend(requirements);
    (!parts.is_empty()).then(|| parts.join(","))
}

impl fmt::Display for Diagnosis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pods.is_empty() {
            writeln!(f, "  pods: none found")?;
        } else {
            let name_w = self.pods.iter().map(|p| p.name.len()).max().unwrap_or(0);
            let status_w = self.pods.iter().map(|p| p.status.len()).max().unwrap_or(0);
            let (name_w, status_w) = (name_w.max(3), status_w.max(6));
            writeln!(
                f,
                "  {:name_w$}  {:status_w$}  READY  RESTARTS  NODE",
                "POD", "STATUS"
            )?;
            for p in self.pods.iter().take(SHOWN_PODS) {
                writeln!(
                    f,
                    "  {:name_w$}  {:status_w$}  {:5}  {:<8}  {}",
                    p.name,
                    p.status,
                    p.ready,
                    p.restarts,
                    p.node.as_deref().unwrap_or("<none>")
                )?;
                if let Some(reason) = &p.reason {
                    writeln!(f, "      {reason}")?;
                }
            }
            let hidden = self.pods.len().saturating_sub(SHOWN_PODS);
            if hidden > 0 {
                let healthy = self.pods[SHOWN_PODS..]
                    .iter()
                    .filter(|p| p.is_healthy())
                    .count();
                writeln!(
                    f,
                    "  ... and {hidden} more pods ({healthy} of them healthy)"
                )?;
            }
        }
        if self.events.is_empty() {
            writeln!(f, "  events: none")?;
        } else {
            writeln!(f, "  events (oldest first):")?;
            for e in &self.events {
                writeln!(f, "    {e}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

/// `exit code N: message` (or `exit code N (reason)`) of a terminated container.
fn exit_detail(t: &k8s_openapi::api::core::v1::ContainerStateTerminated) -> String {
    let mut out = format!("exit code {}", t.exit_code);
    match (
        t.message.as_deref().and_then(summarize),
        t.reason.as_deref(),
    ) {
        (Some(m), _) => out.push_str(&format!(": {m}")),
        (None, Some(r)) => out.push_str(&format!(" ({r})")),
        (None, None) => {}
    }
    out
}
