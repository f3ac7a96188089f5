//! One helmfile release as a bootstrap release: its chart, values, hooks,
//! labels, `needs` and what has no equivalent (as issues).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use super::chart::{chart, chart_source};
use super::defaults::{Defaults, Repo, helm_flag, helm_key, no_effect, seconds_text, short};
use super::flux::{candidate, from_candidate};
use super::hook::convert_hooks;
use super::values::{env_issue, env_leaves, flux_values, secrets_file, set_values};
use super::{ReleaseOut, ValuesNote, ValuesOut};
use crate::import::Issue;
use crate::import::helmfile::{FluxDocument, Release as HelmfileRelease, State, ValuesEntry};

/// The release's `wait`, else `helmDefaults.wait` (with the key it came from).
fn wait(spec: &Map<String, Value>, defaults: &Defaults) -> Option<(bool, String)> {
    match spec.get("wait").and_then(Value::as_bool) {
        Some(w) => Some((w, "wait".to_string())),
        None => defaults.wait.map(|w| (w, "helmDefaults.wait".to_string())),
    }
}

/// The release's `timeout`, else `helmDefaults.timeout` (with the key it
/// came from).
fn timeout(spec: &Map<String, Value>, defaults: &Defaults) -> Option<(String, String)> {
    match spec.get("timeout").and_then(Value::as_u64) {
        Some(s) if s > 0 => Some((seconds_text(s), "timeout".to_string())),
        _ => defaults
            .timeout
            .clone()
            .map(|t| (t, "helmDefaults.timeout".to_string())),
    }
}

/// What every release of one helmfile state is converted with: the state
/// it is declared in and what that state sets for all of its releases.
pub(super) struct InState<'a> {
    pub state: &'a State,
    /// Its `repositories:`, by name.
    pub repos: &'a BTreeMap<String, Repo>,
    /// Its `helmDefaults:`.
    pub defaults: &'a Defaults,
    /// Its top-level `namespace:`, which overrides every release's.
    pub override_namespace: Option<&'a str>,
    /// Whether helmfile only renders its releases for their CRDs.
    pub crds_only: bool,
}

/// `release` of the state `in_state` as a bootstrap release written under
/// the config root `root`; `None` when it has no name (said in `all_issues`).
pub(super) fn convert_release(
    in_state: &InState<'_>,
    release: &HelmfileRelease,
    root: &Path,
    all_issues: &mut Vec<Issue>,
) -> Option<ReleaseOut> {
    let InState {
        state,
        repos,
        defaults,
        override_namespace,
        crds_only,
    } = *in_state;
    let spec = &release.spec;
    // Everything not converted in this release is also its `todo:`.
    let mut own = release.issues.clone();
    let issues = &mut own;
    let text = |k: &str| {
        spec.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .unwrap_or("")
            .to_string()
    };
    let name = text("name");
    let at = |key: &str| release.origin(key, state);
    if name.is_empty() {
        all_issues.push(Issue::new(
            &state.path,
            release.line,
            "releases",
            "a release has no name",
        ));
        return None;
    }
    let namespace = namespace(release, state, &name, override_namespace, issues);
    let (helm, notes) = other_keys(release, state, issues);
    let chart = chart(release, state, repos, issues);
    // Notes name files the way a release file does: from releases/.
    let notes_dir = root.join("releases");
    let chart_note = chart
        .as_ref()
        .and_then(|_| chart_source(release, &notes_dir));
    let installed = spec
        .get("installed")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let wait = wait(spec, defaults);
    let timeout = timeout(spec, defaults);
    let needs = spec
        .get("needs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(|s| (s.trim().to_string(), None)))
                .collect()
        })
        .unwrap_or_default();
    let (values, flux_document) = release_values(release, state, issues);
    for key in ["chart", "version", "namespace"] {
        if let Some(text) = spec.get(key).and_then(Value::as_str)
            && crate::import::gotmpl::has_env_mark(text)
        {
            let o = at(key);
            issues.push(env_issue(&o, key, text));
        }
    }
    let hooks = convert_hooks(state, release, &namespace, crds_only, root, issues);
    let labels = labels(release, state, issues);
    let from_candidate = match (&chart, crds_only, &flux_document) {
        // The HelmRelease is all the values the template meant.
        (Some(chart), false, Some(doc)) if values.is_empty() => {
            candidate(release, &doc.file, chart, &name, &namespace)
        }
        (Some(chart), false, None) => from_candidate(release, &values, chart, &name, &namespace),
        _ => None,
    };
    Some(ReleaseOut {
        name,
        namespace,
        source: state.path.clone(),
        line: release.line,
        chart,
        chart_note,
        needs,
        wait,
        timeout,
        values,
        hooks,
        installed,
        skip_crds: defaults.skip_crds,
        helm,
        from_candidate,
        from: None,
        labels,
        todo: {
            all_issues.extend(own.iter().cloned());
            own
        },
        also: Vec::new(),
        crd_stage: None,
        flux_managed: None,
        notes,
        flux_document,
    })
}

/// helmfile's release `labels` (what `--selector` matches) as bootstrap's
/// `labels:` (docs/design.md#selection), which are strings.
pub(super) fn labels(
    release: &HelmfileRelease,
    state: &State,
    issues: &mut Vec<Issue>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (key, value) in release
        .spec
        .get("labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        match value {
            Value::String(s) if !s.contains("{{") => {
                out.insert(key.clone(), s.clone());
            }
            Value::Bool(_) | Value::Number(_) => {
                out.insert(key.clone(), value.to_string());
            }
            other => {
                let at = release.origin("labels", state);
                issues.push(Issue::new(
                    &at.file,
                    at.line,
                    format!("labels {key}: {}", short(other)),
                    "is not a plain string; write the label's value",
                ));
            }
        }
    }
    out
}

/// The release's keys other than those converted one by one: helm flags
/// (into `helm:`), keys with no effect on a bootstrap (`notes`), the rest
/// issues.
fn other_keys(
    release: &HelmfileRelease,
    state: &State,
    issues: &mut Vec<Issue>,
) -> (Map<String, Value>, Vec<Issue>) {
    let spec = &release.spec;
    let at = |key: &str| release.origin(key, state);
    let mut helm = Map::new();
    let mut notes = Vec::new();
    for key in spec.keys() {
        let reason = match key.as_str() {
            "name" | "namespace" | "chart" | "version" | "needs" | "values" | "set" | "setString"
            | "secrets" | "hooks" | "installed" | "wait" | "timeout" => continue,
            "labels" => continue,
            "condition" => "a condition on helmfile state values; list the release in clusters/NAME/cluster.yaml `releases:` for the clusters that get it".to_string(),
            "valuesTemplate" | "setTemplate" => format!("`{key}` is evaluated with helmfile state values; write the values it produces into a values file"),
            "kubeContext" => "a per-release kubeconfig context; bootstrap installs each cluster's releases in its own context".to_string(),
            other => {
                if let Some((k, v)) = helm_key(other, &spec[key]) {
                    helm.insert(k.to_string(), v);
                    continue;
                }
                if let Some(why) = no_effect(other, &spec[key]) {
                    let o = at(key);
                    notes.push(Issue::new(
                        &o.file,
                        o.line,
                        format!("{key}: {}", short(&spec[key])),
                        why,
                    ));
                    continue;
                }
                match helm_flag(other, &spec[key]) {
                    Some(reason) => reason,
                    None => continue,
                }
            }
        };
        let o = at(key);
        issues.push(Issue::new(
            &o.file,
            o.line,
            format!("{key}: {}", short(&spec[key])),
            reason,
        ));
    }
    (helm, notes)
}

/// The release's values in helmfile's order: `values:` entries, then
/// `secrets:`, then `set:`/`setString:`; a Flux HelmRelease document its
/// values template read, when there is one.
fn release_values(
    release: &HelmfileRelease,
    state: &State,
    issues: &mut Vec<Issue>,
) -> (Vec<ValuesOut>, Option<FluxDocument>) {
    let spec = &release.spec;
    let at = |key: &str| release.origin(key, state);
    let mut values = Vec::new();
    let mut flux_document = None;
    for entry in &release.values {
        match entry {
            ValuesEntry::File(path) => values.push(ValuesOut::InPlace(path.clone())),
            ValuesEntry::FluxDocument(doc) => flux_document = Some(doc.clone()),
            ValuesEntry::Computed {
                values: map,
                from,
                reads,
            } => {
                let note = match (from, flux_values(map, reads)) {
                    (Some(from), Some(hr)) => ValuesNote::Flux {
                        helmrelease: hr,
                        template: from.clone(),
                    },
                    (Some(from), None) => ValuesNote::Rendered(from.clone()),
                    (None, _) => {
                        ValuesNote::Text(format!("inline values of {}", state.path.display()))
                    }
                };
                if !map.is_empty() {
                    values.push(ValuesOut::Generated {
                        values: map.clone(),
                        note,
                        env: false,
                    });
                }
            }
        }
    }
    // helmfile gives helm the `secrets:` (decrypted) after `values:` and
    // before `set:` (helmfile pkg/state/state.go, namespaceAndValuesFlags).
    for entry in spec
        .get("secrets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match secrets_file(state, entry) {
            Ok(path) => values.push(ValuesOut::InPlace(path)),
            Err(reason) => {
                let o = at("secrets");
                issues.push(Issue::new(
                    &o.file,
                    o.line,
                    format!("secrets: {}", short(entry)),
                    reason.to_string(),
                ));
            }
        }
    }
    if let Some(set) = set_values(release, state, issues) {
        values.push(set);
    }
    for entry in &mut values {
        if let ValuesOut::Generated {
            values: map, env, ..
        } = entry
        {
            match env_leaves(map) {
                Ok(found) => *env = found,
                Err(mixed) => {
                    let o = at("values");
                    issues.push(Issue::new(
                        &o.file,
                        o.line,
                        mixed.0.clone(),
                        mixed.to_string(),
                    ));
                }
            }
        }
    }
    (values, flux_document)
}

/// The release's namespace: its own, else the state's override, else
/// `default` with an issue (helm would use the kubeconfig's).
fn namespace(
    release: &HelmfileRelease,
    state: &State,
    name: &str,
    override_namespace: Option<&str>,
    issues: &mut Vec<Issue>,
) -> String {
    let mut namespace = release
        .spec
        .get("namespace")
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or("")
        .to_string();
    if namespace.is_empty() {
        namespace = override_namespace.unwrap_or("").to_string();
    }
    if namespace.is_empty() {
        issues.push(Issue::new(
            &state.path,
            release.line,
            format!("name: {name}"),
            "has no namespace (helm would use the kubeconfig's); bootstrap needs one: written as `default`",
        ));
        namespace = "default".into();
    }
    namespace
}
