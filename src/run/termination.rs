//! The termination message (docs/fleet.md#the-job-contract): one line of JSON
//! a controller reads when the process ends, written where Kubernetes looks
//! for it (`/dev/termination-log`, the container's `terminationMessagePath`)
//! or where `--termination-log` says.
//!
//! Kubernetes keeps at most 4096 bytes of it (the kubelet truncates longer
//! messages), so the message is built to fit: per cluster the counts of each
//! outcome and the releases that failed, and lists are dropped before the
//! message would be cut.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::error::Error;
use crate::event::Summary;

/// Where Kubernetes reads a container's termination message by default.
pub(crate) const KUBERNETES_PATH: &str = "/dev/termination-log";

/// The most bytes of a termination message Kubernetes keeps.
pub(crate) const LIMIT: usize = 4096;

/// The summaries of the runs this process finished (apply and destroy
/// record theirs as their session ends).
static SUMMARIES: Mutex<Vec<Summary>> = Mutex::new(Vec::new());

pub(crate) fn remember(summary: &Summary) {
    SUMMARIES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(summary.clone());
}

fn summaries() -> Vec<Summary> {
    SUMMARIES.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The file to write: `--termination-log`, else Kubernetes' path when it
/// exists (inside a container), else none.
pub(crate) fn destination(flag: Option<&Path>) -> Option<PathBuf> {
    match flag {
        Some(path) => Some(path.to_path_buf()),
        None => Path::new(KUBERNETES_PATH)
            .exists()
            .then(|| PathBuf::from(KUBERNETES_PATH)),
    }
}

/// Writes the message for a process ending with `code` (and `error`).
/// Failing to write is reported on stderr, never changes the exit code.
pub(crate) fn write(path: &Path, command: &str, code: i32, error: Option<&Error>) {
    let text = message(command, code, error, &summaries());
    if let Err(e) = std::fs::write(path, text) {
        eprintln!(
            "warning: cannot write the termination message to {}: {e}",
            path.display()
        );
    }
}

/// The message itself, at most [`LIMIT`] bytes.
pub(crate) fn message(
    command: &str,
    code: i32,
    error: Option<&Error>,
    summaries: &[Summary],
) -> String {
    let clusters = |with_lists: bool| -> Vec<Value> {
        summaries
            .iter()
            .map(|s| {
                let mut counts: BTreeMap<String, usize> = BTreeMap::new();
                for r in &s.releases {
                    let outcome = serde_json::to_value(r.outcome)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default();
                    *counts.entry(outcome).or_default() += 1;
                }
                let mut cluster = json!({
                    "cluster": s.cluster,
                    "ok": s.ok,
                    "dryRun": s.dry_run,
                    "interrupted": s.interrupted,
                    "durationMs": s.duration.as_millis() as u64,
                    "outcomes": counts,
                });
                if let Some(why) = &s.lock_lost {
                    cluster["lockLost"] = json!(why);
                }
                if with_lists {
                    cluster["failed"] = json!(
                        s.releases
                            .iter()
                            .filter(|r| !r.outcome.is_success())
                            .map(|r| r.release.to_string())
                            .collect::<Vec<_>>()
                    );
                }
                cluster
            })
            .collect()
    };
    let build = |with_lists: bool, error_text: Option<String>| -> String {
        let mut value = json!({
            crate::output::SCHEMA_VERSION_KEY: crate::output::SCHEMA_VERSION,
            "command": command,
            "exitCode": code,
            "clusters": clusters(with_lists),
        });
        if let Some(text) = error_text {
            value["error"] = json!(text);
        }
        value.to_string()
    };
    let error_text = error.map(|e| e.to_string());
    let full = build(true, error_text.clone());
    if full.len() <= LIMIT {
        return full;
    }
    let short = build(false, error_text.clone());
    if short.len() <= LIMIT {
        return short;
    }
    // Still too long: the error's text gives way (its first 512 characters).
    let cut = error_text.map(|t| {
        let mut cut: String = t.chars().take(512).collect();
        cut.push('…');
        cut
    });
    let shorter = build(false, cut);
    if shorter.len() <= LIMIT {
        return shorter;
    }
    json!({
        crate::output::SCHEMA_VERSION_KEY: crate::output::SCHEMA_VERSION,
        "command": command,
        "exitCode": code,
        "truncated": true,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::event::{Outcome, ReleaseResult};
    use crate::release::ReleaseId;

    fn summary(cluster: &str, outcomes: &[(&str, Outcome)]) -> Summary {
        Summary {
            cluster: cluster.into(),
            ok: outcomes.iter().all(|(_, o)| o.is_success()),
            dry_run: false,
            duration: Duration::from_millis(8_600),
            releases: outcomes
                .iter()
                .map(|(name, outcome)| ReleaseResult {
                    release: ReleaseId::new("kube-system", *name),
                    outcome: *outcome,
                    duration: Duration::from_secs(1),
                    timing: Default::default(),
                    message: None,
                })
                .collect(),
            critical_path: vec![],
            root_failures: vec![],
            interrupted: false,
            lock_lost: None,
            phases: None,
        }
    }

    #[test]
    fn counts_outcomes_and_names_failures() {
        let s = summary(
            "infra",
            &[
                ("cilium", Outcome::Installed),
                ("coredns", Outcome::Failed),
                ("spegel", Outcome::Skipped),
            ],
        );
        let error = Error::from(crate::error::Failure::ApplyFailed {
            cluster: "infra".into(),
            releases: "1".into(),
        });
        let text = message("apply", 1, Some(&error), &[s]);
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            value,
            json!({
                "schemaVersion": 1, "command": "apply", "exitCode": 1,
                "error": "apply of cluster `infra` failed: 1 failed",
                "clusters": [{
                    "cluster": "infra", "ok": false, "dryRun": false, "interrupted": false,
                    "durationMs": 8600,
                    "outcomes": {"installed": 1, "failed": 1, "skipped": 1},
                    "failed": ["kube-system/coredns", "kube-system/spegel"],
                }],
            })
        );
        assert!(!text.contains('\n'));
    }

    #[test]
    fn a_huge_result_still_fits_what_kubernetes_keeps() {
        let many: Vec<(String, Outcome)> = (0..2_000)
            .map(|i| (format!("release-with-a-long-name-{i}"), Outcome::Failed))
            .collect();
        let refs: Vec<(&str, Outcome)> = many.iter().map(|(n, o)| (n.as_str(), *o)).collect();
        let s = summary("infra", &refs);
        let error = Error::from(crate::error::Failure::OwnershipRefused {
            conflicts: vec!["x".repeat(10_000)],
        });
        let text = message("apply", 1, Some(&error), &[s]);
        assert!(text.len() <= LIMIT, "{}", text.len());
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["clusters"][0]["outcomes"]["failed"], 2_000);
        assert!(value["clusters"][0].get("failed").is_none());
    }

    #[test]
    fn no_run_no_clusters() {
        let error = Error::from(crate::error::Prerequisite::Helm {
            error: "helm not found".into(),
        });
        let value: Value = serde_json::from_str(&message("apply", 2, Some(&error), &[])).unwrap();
        assert_eq!(
            value,
            json!({"schemaVersion": 1, "command": "apply", "exitCode": 2, "clusters": [], "error": "helm not found"})
        );
    }
}
