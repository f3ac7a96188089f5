//! helmfile hooks (`pkg/event/bus.go`: `events`, `command`, `args`,
//! `kubectlApply`; commands run in the helmfile's directory, args rendered
//! with `.Release`) as bootstrap hooks (docs/design.md#hooks): the kubectl
//! waits bootstrap has a typed hook for become that hook (`kubectl wait
//! --for=create` → `created`, `--for=condition=…` → `condition`, `kubectl
//! rollout status` → `rollout`); every other command becomes a `command:`
//! hook, its file arguments rebased onto the config root, where bootstrap
//! runs commands.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

/// When a bootstrap hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Presync,
    Postsync,
}

/// One converted hook: its YAML and the helmfile command it came from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Converted {
    pub phase: Phase,
    pub hook: Value,
    pub was: String,
}

/// helmfile's events as bootstrap phases; `None` for events bootstrap has
/// no moment for. `prepare` and `preapply` come before the helm operation
/// like `presync` (pkg/app/run.go triggers them first).
pub(crate) fn phase(event: &str) -> Option<Phase> {
    match event {
        "prepare" | "preapply" | "presync" => Some(Phase::Presync),
        "postsync" => Some(Phase::Postsync),
        _ => None,
    }
}

/// Converts a rendered command line. `helmfile_dir` is where helmfile ran it,
/// `root` the config root bootstrap runs it in (both absolute).
pub(crate) fn convert(argv: &[String], namespace: &str, helmfile_dir: &Path, root: &Path) -> Value {
    if argv.first().map(String::as_str) == Some("kubectl")
        && let Some(hook) = typed(&argv[1..], namespace)
    {
        return hook;
    }
    let rebased: Vec<String> = argv
        .iter()
        .enumerate()
        .map(|(i, arg)| {
            if i == 0 {
                arg.clone()
            } else {
                rebase(arg, helmfile_dir, root)
            }
        })
        .collect();
    json!({ "command": rebased })
}

/// An argument naming a file or directory relative to where helmfile ran
/// the hook, rewritten relative to the config root (`--flag=PATH` too).
fn rebase(arg: &str, from: &Path, root: &Path) -> String {
    let (flag, value) = match arg.split_once('=') {
        Some((flag, value)) if flag.starts_with('-') => (Some(flag), value),
        _ => (None, arg),
    };
    if value.is_empty()
        || value.starts_with('-')
        || Path::new(value).is_absolute()
        || value.contains("://")
    {
        return arg.to_string();
    }
    let target = super::gotmpl::normalize(&from.join(value));
    if !target.exists() {
        return arg.to_string();
    }
    let mut rel = super::relative(root, &target)
        .to_string_lossy()
        .into_owned();
    if value.ends_with('/') && !rel.ends_with('/') {
        rel.push('/');
    }
    match flag {
        Some(flag) => format!("{flag}={rel}"),
        None => rel,
    }
}

/// `(apiVersion, kind)` of the resource names kubectl accepts for the kinds
/// hooks wait on; unknown kinds stay commands.
fn kind(resource: &str) -> Option<(&'static str, &'static str)> {
    let base = resource
        .split('.')
        .next()
        .unwrap_or(resource)
        .to_ascii_lowercase();
    Some(match base.as_str() {
        "crd" | "crds" | "customresourcedefinition" | "customresourcedefinitions" => {
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
        }
        "deployment" | "deployments" | "deploy" => ("apps/v1", "Deployment"),
        "daemonset" | "daemonsets" | "ds" => ("apps/v1", "DaemonSet"),
        "statefulset" | "statefulsets" | "sts" => ("apps/v1", "StatefulSet"),
        "job" | "jobs" => ("batch/v1", "Job"),
        "pod" | "pods" | "po" => ("v1", "Pod"),
        "service" | "services" | "svc" => ("v1", "Service"),
        "namespace" | "namespaces" | "ns" => ("v1", "Namespace"),
        "apiservice" | "apiservices" => ("apiregistration.k8s.io/v1", "APIService"),
        _ => return None,
    })
}

/// A `kubectl wait`/`rollout status` command line, read: its positional
/// arguments and the flags the typed hooks express.
struct KubectlArgs {
    positional: Vec<String>,
    namespace: Option<String>,
    /// Validated as a duration.
    timeout: Option<String>,
    wait_for: Option<String>,
}

/// `None` for a flag the typed hooks do not express, or a timeout that is
/// none (`0`, negative, not a duration).
fn kubectl_args(args: &[String]) -> Option<KubectlArgs> {
    let mut positional = Vec::new();
    let mut namespace = None;
    let mut timeout = None;
    let mut wait_for = None;
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with('-') => (f, Some(v.to_string())),
            _ => (arg, None),
        };
        let mut value = || -> Option<String> {
            if let Some(v) = &inline {
                return Some(v.clone());
            }
            i += 1;
            args.get(i).cloned()
        };
        match flag {
            "-n" | "--namespace" => namespace = Some(value()?),
            "--timeout" => timeout = Some(value()?),
            "--for" => wait_for = Some(value()?),
            "-w" | "--watch" => {}
            f if f.starts_with('-') => return None,
            _ => positional.push(arg.to_string()),
        }
        i += 1;
    }
    let timeout = match timeout {
        Some(t) if t == "0" || t.starts_with('-') => return None,
        Some(t) => {
            crate::validate::duration(&t).ok()?;
            Some(t)
        }
        None => None,
    };
    Some(KubectlArgs {
        positional,
        namespace,
        timeout,
        wait_for,
    })
}

/// `kubectl wait` and `kubectl rollout status` as typed hooks, or `None`
/// when any flag or form is one the typed hooks do not express exactly.
fn typed(args: &[String], release_namespace: &str) -> Option<Value> {
    let KubectlArgs {
        positional,
        namespace,
        timeout,
        wait_for,
    } = kubectl_args(args)?;
    let namespace = namespace.unwrap_or_else(|| release_namespace.to_string());
    let objects = |names: &[String]| -> Option<Vec<(&'static str, &'static str, String)>> {
        names
            .iter()
            .map(|n| {
                let (resource, name) = n.split_once('/')?;
                let (api, kind) = kind(resource)?;
                (!name.is_empty()).then(|| (api, kind, name.to_string()))
            })
            .collect()
    };
    let object = |api: &str, kind: &str, name: &str| {
        let mut o = Map::new();
        o.insert("apiVersion".into(), json!(api));
        o.insert("kind".into(), json!(kind));
        o.insert("name".into(), json!(name));
        if !matches!(
            kind,
            "CustomResourceDefinition" | "Namespace" | "APIService"
        ) {
            o.insert("namespace".into(), json!(namespace));
        }
        o
    };
    let with_timeout = |key: &str, body: Map<String, Value>| {
        let mut hook = Map::new();
        hook.insert(key.into(), Value::Object(body));
        if let Some(t) = &timeout {
            hook.insert("timeout".into(), json!(t));
        }
        Value::Object(hook)
    };
    match positional.first().map(String::as_str) {
        Some("wait") => {
            let objects = objects(&positional[1..])?;
            if objects.is_empty() {
                return None;
            }
            let wait_for = wait_for?;
            let hooks: Vec<Value> = if wait_for == "create" {
                objects
                    .iter()
                    .map(|(api, kind, name)| with_timeout("created", object(api, kind, name)))
                    .collect()
            } else if let Some(condition) = wait_for.strip_prefix("condition=") {
                let (kind_of, status) = match condition.split_once('=') {
                    Some((t, s)) => (t, Some(s)),
                    None => (condition, None),
                };
                objects
                    .iter()
                    .map(|(api, kind, name)| {
                        let mut body = object(api, kind, name);
                        body.insert("type".into(), json!(kind_of));
                        if let Some(status) = status {
                            body.insert("status".into(), json!(status));
                        }
                        with_timeout("condition", body)
                    })
                    .collect()
            } else {
                return None;
            };
            Some(Value::Array(hooks))
        }
        Some("rollout") if positional.get(1).map(String::as_str) == Some("status") => {
            let objects = objects(&positional[2..])?;
            let [(_, kind, name)] = objects.as_slice() else {
                return None;
            };
            if !matches!(*kind, "Deployment" | "DaemonSet" | "StatefulSet") || wait_for.is_some() {
                return None;
            }
            let mut body = Map::new();
            body.insert("kind".into(), json!(kind));
            body.insert("name".into(), json!(name));
            body.insert("namespace".into(), json!(namespace));
            Some(with_timeout("rollout", body))
        }
        _ => None,
    }
}

/// The hooks one converted value stands for (a `kubectl wait` on several
/// objects is one hook per object).
pub(crate) fn flatten(value: Value) -> Vec<Value> {
    match value {
        Value::Array(list) => list,
        other => vec![other],
    }
}

/// The directory helmfile ran hooks in, absolute.
pub(crate) fn absolute(dir: &Path) -> PathBuf {
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    fn conv(line: &str) -> Value {
        convert(
            &argv(line),
            "kube-system",
            Path::new("/nowhere"),
            Path::new("/root"),
        )
    }

    #[test]
    fn kubectl_wait_for_create_is_one_created_hook_per_object() {
        let hook = conv("kubectl wait --for=create crd/a.cilium.io crd/b.cilium.io --timeout=2m");
        assert_eq!(
            hook,
            json!([
                {"created": {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "name": "a.cilium.io"}, "timeout": "2m"},
                {"created": {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "name": "b.cilium.io"}, "timeout": "2m"},
            ])
        );
    }

    #[test]
    fn kubectl_wait_for_condition_and_rollout_status() {
        assert_eq!(
            conv(
                "kubectl wait --for=condition=Available=True deployment/cert-manager-webhook -n cert-manager"
            ),
            json!([{"condition": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "cert-manager-webhook",
                                  "namespace": "cert-manager", "type": "Available", "status": "True"}}])
        );
        assert_eq!(
            conv("kubectl -n kube-system rollout status ds/cilium --timeout 5m"),
            json!({"rollout": {"kind": "DaemonSet", "name": "cilium", "namespace": "kube-system"}, "timeout": "5m"})
        );
    }

    #[test]
    fn anything_the_typed_hooks_cannot_say_stays_a_command() {
        for line in [
            "kubectl wait --for=delete pod/x",
            "kubectl wait --for=condition=Ready pods --all",
            "kubectl wait --for=create widget/x",
            "kubectl wait --for=create crd/x --context other",
            "kubectl rollout status deployment/a deployment/b",
            "kubectl apply -f x.yaml",
        ] {
            assert_eq!(conv(line), json!({"command": argv(line)}), "{line}");
        }
    }

    #[test]
    fn file_arguments_move_to_the_config_root() {
        let dir = tempfile::tempdir().unwrap();
        let helmfile = dir.path().join("bootstrap/helmfile");
        let config = dir.path().join("kubernetes/apps/x/config");
        std::fs::create_dir_all(&helmfile).unwrap();
        std::fs::create_dir_all(&config).unwrap();
        let root = dir.path().join("bootstrap");
        let hook = convert(
            &argv("kubectl apply --server-side --kustomize=../../kubernetes/apps/x/config/ -n x"),
            "x",
            &helmfile,
            &root,
        );
        assert_eq!(
            hook,
            json!({"command": ["kubectl", "apply", "--server-side", "--kustomize=../kubernetes/apps/x/config/", "-n", "x"]})
        );
    }
}
