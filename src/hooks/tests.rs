use super::*;
use pretty_assertions::assert_eq;

fn hook(yaml: &str) -> Result<Hook, HookError> {
    let file: HookFile = serde_saphyr::from_str(yaml).unwrap();
    file.check("kube-system")
}

#[test]
fn docs_name_every_kind() {
    let readme = include_str!("../../README.md");
    let design = include_str!("../../docs/design.md");
    for key in KINDS {
        assert!(
            readme.contains(&format!("- {key}:")),
            "README.md's release example has no `- {key}:` hook"
        );
        assert!(
            design.contains(&format!("| `{key}: ")),
            "docs/design.md's hook table has no `{key}:` row"
        );
    }
}

#[test]
fn every_kind_is_a_key_of_a_hook_entry() {
    let schema = schemars::schema_for!(HookFile).to_value();
    let mut keys: Vec<&str> = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys.pop(), Some("timeout"));
    assert_eq!(keys, KINDS);
    assert_eq!(
        schema["description"],
        format!("Exactly one of {}.", one_of())
    );
}

#[test]
fn the_kinds_users_know_keep_their_order() {
    // New kinds go at the end: the order is in serde's unknown-key message,
    // the "exactly one of" message and the schema.
    let known = ["rollout", "condition", "created", "job", "command", "shell"];
    assert!(KINDS.starts_with(&known), "{KINDS:?}");
}

#[test]
fn an_entry_names_exactly_one_kind() {
    let err = hook("{shell: x, command: [y]}").unwrap_err();
    assert!(matches!(err, HookError::NotExactlyOne { found: 2 }));
    assert_eq!(
        err.to_string(),
        format!("must have exactly one of {} (found 2)", one_of())
    );
    assert!(err.to_string().starts_with(
        "must have exactly one of `rollout`, `condition`, `created`, `job`, `command`, `shell`"
    ));
    assert!(matches!(
        hook("{timeout: 5m}"),
        Err(HookError::NotExactlyOne { found: 0 })
    ));
}

#[test]
fn kinds_check_their_own_fields() {
    let err = hook("rollout: {kind: Daemonset, name: cilium}").unwrap_err();
    assert!(matches!(
        &err,
        HookError::Kind(KindError::Rollout(rollout::Error::NotAWorkload(kind))) if kind == "Daemonset"
    ));
    assert_eq!(
        err.to_string(),
        "`rollout` kind `Daemonset` is not a workload; use Deployment, DaemonSet or StatefulSet; did you mean `DaemonSet`?"
    );
    assert!(matches!(
        hook("command: []"),
        Err(HookError::Kind(KindError::Command(command::Error::Empty)))
    ));
    assert!(matches!(
        hook("shell: ' '"),
        Err(HookError::Kind(KindError::Shell(shell::Error::Empty)))
    ));
    assert!(matches!(
        hook("{job: {name: x}, timeout: 0s}"),
        Err(HookError::Timeout(DurationError::Zero(_)))
    ));
}

#[test]
fn namespaces_default_to_the_release_except_for_cluster_scoped_kinds() {
    let h = hook("{rollout: {kind: DaemonSet, name: cilium}, timeout: 2m}").unwrap();
    assert_eq!(h.timeout, Some(Duration::from_secs(120)));
    assert_eq!(
        h.action.to_string(),
        "rollout of DaemonSet kube-system/cilium"
    );
    let crd = hook("condition: {apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, name: a.b, type: Established}").unwrap();
    assert_eq!(
        crd.action.to_string(),
        "CustomResourceDefinition a.b Established=True"
    );
    let created = hook("created: {apiVersion: v1, kind: Secret, name: x, namespace: y}").unwrap();
    assert_eq!(created.action.to_string(), "Secret y/x exists");
    let job = hook("job: {name: migrate}").unwrap();
    assert_eq!(job.action.to_string(), "Job kube-system/migrate complete");
}

#[test]
fn only_waits_are_readiness_hooks_and_only_rollouts_name_a_workload() {
    let cases = [
        ("rollout: {kind: Deployment, name: a}", true, true),
        (
            "condition: {apiVersion: v1, kind: Pod, name: a, type: Ready}",
            true,
            false,
        ),
        (
            "created: {apiVersion: v1, kind: Secret, name: a}",
            true,
            false,
        ),
        ("job: {name: a}", true, false),
        ("command: [kubectl, get, nodes]", false, false),
        ("shell: 'true'", false, false),
    ];
    for (yaml, readiness, workload) in cases {
        let action = hook(yaml).unwrap().action;
        assert_eq!(action.is_readiness(), readiness, "{yaml}");
        assert_eq!(action.workload().is_some(), workload, "{yaml}");
        assert!(yaml.starts_with(action.key()), "{yaml}");
    }
}

#[test]
fn rendering_fills_names_namespaces_and_arguments_and_checks_files() {
    let renderer = Renderer::new();
    let context = crate::handlebars::TemplateContext::from(
        serde_json::json!({"cluster": {"name": "infra"}, "root": "/nowhere"}),
    );
    let root = tempfile::tempdir().unwrap();
    let templates = Templates {
        renderer: &renderer,
        context: &context,
        root: root.path(),
    };
    let mut h = hook(
        "rollout: {kind: Deployment, name: '{{cluster.name}}-x', namespace: '{{cluster.name}}'}",
    )
    .unwrap();
    h.render(&templates).unwrap();
    assert_eq!(h.action.to_string(), "rollout of Deployment infra/infra-x");

    let mut h = hook("command: [echo, '{{cluster.nope}}']").unwrap();
    let err = h.render(&templates).unwrap_err();
    assert!(matches!(err, HookError::Template(_)));
    assert!(
        err.to_string()
            .starts_with("hook: template uses `cluster.nope`"),
        "{err}"
    );

    let mut h = hook("command: [kubectl, apply, -f, missing.yaml]").unwrap();
    let err = h.render(&templates).unwrap_err();
    assert!(matches!(
        &err,
        HookError::Kind(KindError::Command(command::Error::MissingFile { program, .. })) if program == "kubectl"
    ));
    assert_eq!(
        err.to_string(),
        "hook `kubectl` reads `missing.yaml`, which does not exist in the config root; create it or fix the path"
    );
}
