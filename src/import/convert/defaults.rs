//! helmfile's `helmDefaults` and `repositories` as bootstrap's defaults and chart
//! sources: what has a bootstrap key, what has no effect, what has none.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::import::helmfile::State;
use crate::import::{Issue, helmfile};

/// The defaults `helmDefaults` sets for every release of a file.
#[derive(Default)]
pub(super) struct Defaults {
    pub(super) wait: Option<bool>,
    pub(super) skip_crds: bool,
    /// `helm.*` keys (docs/design.md#defaults).
    pub(super) helm: Map<String, Value>,
    pub(super) timeout: Option<String>,
    pub(super) notes: Vec<Issue>,
}

pub(super) struct Repo {
    pub(super) url: String,
    pub(super) oci: bool,
}

pub(super) fn repositories(state: &State, issues: &mut Vec<Issue>) -> BTreeMap<String, Repo> {
    let mut repos = BTreeMap::new();
    let list = state
        .doc
        .get("repositories")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for repo in list {
        let name = repo
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let url = repo
            .get("url")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let line =
            helmfile::find_key_between(&state.text, 1, usize::MAX, "repositories").unwrap_or(0);
        for key in [
            "username",
            "password",
            "caFile",
            "certFile",
            "keyFile",
            "registryConfig",
        ] {
            if repo.get(key).is_some_and(|v| !v.is_null()) {
                issues.push(Issue::new(
                    &state.path,
                    line,
                    format!("repositories {name} {key}"),
                    "repository credentials are not passed by bootstrap; log in with `helm registry login` or a credentials helper before `apply`",
                ));
            }
        }
        let oci =
            repo.get("oci").and_then(Value::as_bool).unwrap_or(false) || url.starts_with("oci://");
        repos.insert(name, Repo { url, oci });
    }
    repos
}

/// Reads `helmDefaults`; what has no bootstrap equivalent becomes an issue.
pub(super) fn helm_defaults(
    state: &State,
    crds_only: bool,
    context: &mut Option<String>,
    issues: &mut Vec<Issue>,
) -> Defaults {
    let mut defaults = Defaults::default();
    let Some(Value::Object(map)) = state.doc.get("helmDefaults") else {
        return defaults;
    };
    let section = helmfile::line_of(&state.text, &["helmDefaults"]);
    for (key, value) in map {
        let line =
            helmfile::find_key_between(&state.text, section, usize::MAX, key).unwrap_or(section);
        let issue = |reason: String| {
            Issue::new(
                &state.path,
                line,
                format!("helmDefaults.{key}: {}", short(value)),
                reason,
            )
        };
        match key.as_str() {
            "wait" => defaults.wait = value.as_bool(),
            "skipCRDs" => defaults.skip_crds = value.as_bool().unwrap_or(false),
            "timeout" => match value.as_u64() {
                Some(seconds) if seconds > 0 => defaults.timeout = Some(seconds_text(seconds)),
                // helmfile passes no --timeout then (its `build` prints 0 for unset).
                Some(0) => {}
                _ => issues.push(issue("is not a positive number of seconds".into())),
            },
            "args" => {
                for arg in value.as_array().into_iter().flatten() {
                    let arg = arg.as_str().unwrap_or("");
                    if crds_only && matches!(arg, "--include-crds" | "--no-hooks") {
                        continue;
                    }
                    issues.push(Issue::new(
                        &state.path,
                        line,
                        format!("helmDefaults.args {arg}"),
                        "extra helm arguments have no bootstrap equivalent",
                    ));
                }
            }
            "kubeContext" => match value.as_str() {
                Some(c) if context.as_deref().is_none_or(|known| known == c) => {
                    *context = Some(c.to_string())
                }
                Some(c) => issues.push(issue(format!(
                    "a second kubeconfig context (`{c}` after `{}`); one cluster has one context",
                    context.as_deref().unwrap_or("")
                ))),
                None => {}
            },
            other => {
                if let Some((key, value)) = helm_key(other, value) {
                    defaults.helm.insert(key.to_string(), value);
                } else if let Some(why) = no_effect(other, value) {
                    defaults.notes.push(issue(why));
                } else if let Some(reason) = helm_flag(other, value) {
                    issues.push(issue(reason));
                }
            }
        }
    }
    defaults
}

/// A helm setting bootstrap passes per release (docs/design.md#defaults:
/// `helm.*` of a release or of `defaults`), as `(key, value)`; `None` when
/// it has no such key. `serverSide: auto` (helmfile decides) has none.
pub(super) fn helm_key(key: &str, value: &Value) -> Option<(&'static str, Value)> {
    let flag = |name: &'static str| value.as_bool().map(|b| (name, Value::Bool(b)));
    match key {
        "cleanupOnFail" => flag("cleanupOnFail"),
        "force" => flag("force"),
        "forceConflicts" => flag("forceConflicts"),
        "disableOpenAPIValidation" => flag("disableOpenAPIValidation"),
        "historyMax" => value.as_u64().map(|n| ("historyMax", Value::from(n))),
        "serverSide" => match value {
            Value::Bool(b) => Some(("serverSide", Value::Bool(*b))),
            Value::String(s) if s == "true" || s == "false" => {
                Some(("serverSide", Value::Bool(s == "true")))
            }
            _ => None,
        },
        _ => None,
    }
}

/// Why a helm setting (in `helmDefaults` or a release) that is on has no
/// effect on a bootstrap, so that nothing is lost by not carrying it over.
pub(super) fn no_effect(key: &str, value: &Value) -> Option<String> {
    match key {
        // helmfile passes `--recreate-pods`: helm 3 deletes the pods of an
        // upgraded release with it (pkg/action/upgrade.go, never on an
        // install); helm 4 has no such flag (helmfile fails with it there).
        "recreatePods" if value.as_bool() == Some(true) => Some(
            "helm 3 recreates pods only when it upgrades a release with it and helm 4 has no such flag, while bootstrap installs the releases of a new cluster".into(),
        ),
        // helm uninstalls a failed first install and rolls a failed upgrade
        // back; bootstrap stops the release's dependents instead, and the
        // next apply resumes it: the same release in the end.
        "atomic" | "rollbackOnFailure" if value.as_bool() == Some(true) => Some(
            "bootstrap never rolls a release back: a release that fails stops its dependents, and the next apply resumes it from where it stopped".into(),
        ),
        _ => None,
    }
}

/// Why a helm setting (in `helmDefaults` or a release) is not converted;
/// `None` when bootstrap already behaves that way or it is off.
pub(super) fn helm_flag(key: &str, value: &Value) -> Option<String> {
    let off = matches!(value, Value::Null | Value::Bool(false))
        || value.as_array().is_some_and(|a| a.is_empty())
        || value.as_str() == Some("");
    match key {
        // helm --wait waits for Jobs only with --wait-for-jobs; bootstrap's
        // `wait` includes Jobs, so it covers both.
        "waitForJobs" | "skipDeps" | "skipRefresh" | "waitRetries" => None,
        "createNamespace" if value.as_bool() != Some(false) => None,
        "createNamespace" => Some("bootstrap always installs with --create-namespace".into()),
        "skipCRDs" if value.as_bool() == Some(true) => None,
        _ if off => None,
        "cleanupOnFail"
        | "forceConflicts"
        | "force"
        | "recreatePods"
        | "atomic"
        | "rollbackOnFailure"
        | "historyMax"
        | "serverSide"
        | "takeOwnership"
        | "reuseValues"
        | "disableValidation"
        | "disableOpenAPIValidation"
        | "skipSchemaValidation"
        | "postRenderer"
        | "postRendererArgs"
        | "verify"
        | "devel"
        | "enableDNS"
        | "insecureSkipTLSVerify"
        | "plainHttp"
        | "keyring"
        | "cascade"
        | "deleteWait"
        | "deleteTimeout"
        | "syncArgs"
        | "diffArgs"
        | "templateArgs"
        | "kubeContext"
        | "description"
        | "suppressOutputLineRegex"
        | "trackMode" => Some(format!(
            "the helm setting `{key}` has no bootstrap equivalent (its `helm:` keys are cleanupOnFail, force, historyMax, disableOpenAPIValidation, serverSide, forceConflicts)"
        )),
        _ => Some(format!("`{key}` has no bootstrap equivalent")),
    }
}

pub(super) fn short(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Seconds the way bootstrap durations read: `10m`, `90s`.
pub(super) fn seconds_text(seconds: u64) -> String {
    if seconds.is_multiple_of(3600) {
        format!("{}h", seconds / 3600)
    } else if seconds.is_multiple_of(60) {
        format!("{}m", seconds / 60)
    } else {
        format!("{seconds}s")
    }
}
