//! A release's helmfile hooks as bootstrap hooks (the kubectl waits
//! `crate::import::hooks` recognises), or as issues.

use std::path::Path;

use serde_json::Value;

use super::defaults::short;
use crate::import::helmfile::{Release as HelmfileRelease, State};
use crate::import::hooks::Converted;
use crate::import::{Issue, helmfile, hooks};

pub(super) fn convert_hooks(
    state: &State,
    release: &HelmfileRelease,
    namespace: &str,
    crds_only: bool,
    root: &Path,
    issues: &mut Vec<Issue>,
) -> Vec<Converted> {
    let mut out = Vec::new();
    let Some(list) = release.spec.get("hooks").and_then(Value::as_array) else {
        return out;
    };
    let at = release.origin("hooks", state);
    let data = helmfile::release_data(&release.spec);
    let dir = hooks::absolute(&state.dir);
    for hook in list {
        // bootstrap templates hook commands: `env`/`requiredEnv` stay
        // reads of the environment at apply time.
        let render = |text: &str| -> Result<String, Issue> {
            if !text.contains("{{") {
                return Ok(crate::import::gotmpl::env_marks_to_templates(text));
            }
            crate::import::gotmpl::Engine::translating_env(data.clone())
                .render(text, &at.file, at.line, &state.dir)
                .map(|r| crate::import::gotmpl::env_marks_to_templates(&r))
                .map_err(Issue::from)
        };
        let mut argv = Vec::new();
        let mut failed = false;
        if let Some(apply) = hook.get("kubectlApply").and_then(Value::as_object) {
            argv.push("kubectl".to_string());
            argv.push("apply".to_string());
            if let Some(f) = apply.get("filename").and_then(Value::as_str) {
                argv.extend(["-f".to_string(), f.to_string()]);
            } else if let Some(k) = apply.get("kustomize").and_then(Value::as_str) {
                argv.extend(["-k".to_string(), k.to_string()]);
            }
        } else {
            argv.push(
                hook.get("command")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            );
            for arg in hook
                .get("args")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                argv.push(short(arg));
            }
        }
        for arg in argv.iter_mut() {
            match render(arg) {
                Ok(r) => *arg = r,
                Err(issue) => {
                    issues.push(issue);
                    failed = true;
                }
            }
        }
        let was = argv.join(" ");
        if failed {
            continue;
        }
        if argv[0].trim().is_empty() {
            issues.push(Issue::new(
                &at.file,
                at.line,
                "hooks",
                "a hook without a command",
            ));
            continue;
        }
        let events: Vec<&str> = hook
            .get("events")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if crds_only {
            issues.push(Issue::new(
                &at.file,
                at.line,
                format!("hooks: {was}"),
                "a CRD-only release is never installed, so its hooks never run",
            ));
            continue;
        }
        let converted = hooks::convert(&argv, namespace, &dir, root);
        for event in events {
            match hooks::phase(event) {
                Some(phase) => {
                    for hook in hooks::flatten(converted.clone()) {
                        out.push(Converted { phase, hook, was: was.clone() });
                    }
                }
                None => issues.push(Issue::new(
                    &at.file,
                    at.line,
                    format!("hooks: events [{event}] {was}"),
                    format!("bootstrap has presync and postsync hooks only; `{event}` has no moment in apply"),
                )),
            }
        }
    }
    out
}
