//! Every validation rule of the config, as a user meets it: the exact message
//! on stderr and exit code 2, before anything talks to a cluster.

use testkit::builder::Test;

const CILIUM: &str = "name: cilium
namespace: kube-system
chart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }
";

fn with_coredns(extra: &str) -> String {
    format!(
        "{CILIUM}---
name: coredns
namespace: kube-system
chart: {{ repo: https://coredns.github.io/helm, name: coredns, version: 1.44.3 }}
{extra}"
    )
}

fn plan(releases: &str) -> Test {
    Test::with_releases(releases).args(&["plan", "infra"])
}

#[test]
fn yaml_syntax_error_names_file_and_line() {
    plan("name: cilium\nnamespace: [kube-system\n")
        .invalid("error: releases/core.yaml:2:12: `namespace` must be a single text value, not a list or a map\n");
}

#[test]
fn unknown_key_suggests_the_right_one() {
    plan(&format!("{CILIUM}valuesFile: [x.yaml]\n")).invalid(
        "error: releases/core.yaml:4:1: release `kube-system/cilium`: unknown key `valuesFile`; did you mean `valuesFiles`?\n",
    );
}

#[test]
fn missing_required_key() {
    plan("name: cilium\nchart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }\n")
        .invalid("error: releases/core.yaml:2:1: missing required key `namespace`\n");
}

#[test]
fn wrong_type() {
    plan(&format!("{CILIUM}wait: maybe\n"))
        .invalid("error: releases/core.yaml:4:7: release `kube-system/cilium`: `wait: maybe` must be `true` or `false`\n");
}

#[test]
fn release_name_must_be_a_dns_label() {
    plan(&CILIUM.replace("name: cilium\n", "name: Cilium_CNI\n")).invalid(
        "error: releases/core.yaml:1:7: release `kube-system/Cilium_CNI`: name `Cilium_CNI` must consist of lower case letters, digits and '-', and start and end with a letter or digit (a DNS-1123 label)\n",
    );
}

#[test]
fn duplicate_release() {
    plan(&format!("{CILIUM}---\n{CILIUM}")).invalid(
        "error: releases/core.yaml:5: release `kube-system/cilium`: is defined twice; the first definition is at releases/core.yaml:1; rename one or remove it\n",
    );
}

#[test]
fn cluster_name_must_match_directory() {
    Test::new()
        .file("clusters/infra/cluster.yaml", "name: apps\n")
        .file("releases/core.yaml", CILIUM)
        .args(&["plan", "infra"])
        .invalid("error: clusters/infra/cluster.yaml:1:7: `name: apps` does not match its directory `clusters/infra`; they must be equal\n");
}

#[test]
fn unknown_cluster_suggests_a_known_one() {
    Test::with_releases(CILIUM).args(&["plan", "infar"]).invalid(
        "error: clusters/infar/cluster.yaml: unknown cluster `infar`; clusters here: infra; did you mean `infra`?\n",
    );
}

#[test]
fn cluster_lists_an_unknown_release() {
    Test::new()
        .file("clusters/infra/cluster.yaml", "name: infra\nreleases: [cilium, corends]\n")
        .file("releases/core.yaml", &with_coredns(""))
        .args(&["plan", "infra"])
        .invalid("error: clusters/infra/cluster.yaml:2:20: `releases` lists `corends`, which is not a release; did you mean `coredns`?\n");
}

#[test]
fn needs_unknown_release_suggests() {
    plan(&with_coredns("needs: [cilum]\n")).invalid(
        "error: releases/core.yaml:8:9: release `kube-system/coredns`: needs `cilum`, which is not a release; did you mean `cilium`?\n",
    );
}

#[test]
fn ambiguous_short_name() {
    let releases = format!(
        "{CILIUM}---\n{}---\nname: coredns\nnamespace: dns\nchart: {{ repo: https://coredns.github.io/helm, name: coredns, version: 1.44.3 }}\nneeds: [cilium]\n",
        CILIUM.replace("kube-system", "other")
    );
    plan(&releases).invalid(
        "error: releases/core.yaml:12:9: release `dns/coredns`: needs `cilium`, which is ambiguous: `kube-system/cilium`, `other/cilium`; write namespace/name\n",
    );
}

#[test]
fn needing_itself() {
    plan(&format!("{CILIUM}needs: [cilium]\n")).invalid(
        "error: releases/core.yaml:4:9: release `kube-system/cilium`: needs itself; remove it from `needs`\n",
    );
}

#[test]
fn cycle_prints_the_whole_circle() {
    let releases = "name: a\nnamespace: x\nchart: { path: ./c }\nneeds: [b]\n---\nname: b\nnamespace: x\nchart: { path: ./c }\nneeds: [c]\n---\nname: c\nnamespace: x\nchart: { path: ./c }\nneeds: [a]\n";
    Test::with_releases(releases)
        .file("releases/c/Chart.yaml", "name: c\nversion: 1.0.0\n")
        .args(&["plan", "infra"])
        .invalid("error: releases/core.yaml:1: release `x/a`: dependency cycle: x/a -> x/b -> x/c -> x/a; remove one of these `needs`\n");
}

#[test]
fn chart_version_must_be_pinned() {
    plan("name: cilium\nnamespace: kube-system\nchart: { repo: https://helm.cilium.io, name: cilium }\n").invalid(
        "error: releases/core.yaml:3:8: release `kube-system/cilium`: chart has no `version`; pin an exact version so the bootstrap is reproducible\n",
    );
    plan("name: cilium\nnamespace: kube-system\nchart: { repo: https://helm.cilium.io, name: cilium, version: ^1.18 }\n").invalid(
        "error: releases/core.yaml:3:8: release `kube-system/cilium`: chart version `^1.18` is a range, not a pinned version; pin an exact version\n",
    );
}

#[test]
fn url_given_as_chart_name() {
    plan("name: cilium\nnamespace: kube-system\nchart: { repo: https://helm.cilium.io, name: https://helm.cilium.io/cilium, version: 1.18.2 }\n").invalid(
        "error: releases/core.yaml:3:8: release `kube-system/cilium`: chart `name` is a URL (`https://helm.cilium.io/cilium`); `name` is the chart's name in the repository, e.g. `cilium`\n",
    );
}

#[test]
fn repo_and_oci_together() {
    plan("name: cilium\nnamespace: kube-system\nchart: { repo: https://helm.cilium.io, oci: oci://quay.io/cilium/charts/cilium, version: 1.18.2 }\n").invalid(
        "error: releases/core.yaml:3:8: release `kube-system/cilium`: chart has both `repo` and `oci`; an OCI chart needs only `oci: oci://...`\n",
    );
}

#[test]
fn unparsable_duration() {
    plan(&format!("{CILIUM}timeout: five minutes\n")).invalid(
        "error: releases/core.yaml:4:10: release `kube-system/cilium`: timeout `five minutes` is not a duration (expected number at 0); write it like `90s`, `5m` or `1h30m`\n",
    );
}

#[test]
fn missing_values_file() {
    plan(&format!("{CILIUM}valuesFiles: [values/cilium.yaml]\n")).invalid(
        "error: releases/core.yaml:4:15: release `kube-system/cilium`: values file `values/cilium.yaml` does not exist (paths are relative to the release file)\n",
    );
}

#[test]
fn hook_file_missing_in_repo() {
    plan(&format!(
        "{CILIUM}hooks:\n  postsync:\n    - command: [kubectl, apply, -f, \"{{{{root}}}}/flux/sync.yaml\"]\n"
    ))
    .invalid("error: releases/core.yaml:6:7: release `kube-system/cilium`: hook `kubectl` reads `flux/sync.yaml`, which does not exist in the config root; create it or fix the path\n");
}

fn with_hook(hook: &str) -> Test {
    plan(&format!("{CILIUM}hooks:\n  postsync:\n    - {hook}\n"))
}

/// The hook kinds, in the order users see them, as `bootstrap schema
/// release` publishes them (the registry in src/hooks/mod.rs): a new kind
/// changes no test here (docs/design.md#change-recipes).
fn hook_kinds() -> Vec<String> {
    let out = std::process::Command::new(testkit::bootstrap())
        .args(["schema", "release"])
        .output()
        .unwrap();
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    schema["$defs"]["HookFile"]["properties"]
        .as_object()
        .expect("the hook entry's keys in the release schema")
        .keys()
        .filter(|k| *k != "timeout")
        .cloned()
        .collect()
}

#[test]
fn hook_must_name_exactly_one_kind() {
    let kinds = hook_kinds();
    assert!(
        kinds.starts_with(
            &["rollout", "condition", "created", "job", "command", "shell"].map(String::from)
        ),
        "{kinds:?}"
    );
    let one_of = kinds
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    with_hook("{ shell: x, command: [y] }").invalid(&format!(
        "error: releases/core.yaml:6:7: release `kube-system/cilium`: postsync hook must have exactly one of {one_of} (found 2)\n",
    ));
    with_hook("{ timeout: 5m }").invalid(&format!(
        "error: releases/core.yaml:6:7: release `kube-system/cilium`: postsync hook must have exactly one of {one_of} (found 0)\n",
    ));
}

#[test]
fn hook_keys_are_checked_with_suggestions() {
    with_hook("rolout: { kind: DaemonSet, name: cilium }")
        .invalid("error: releases/core.yaml:6:7: release `kube-system/cilium`: unknown key `rolout`; did you mean `rollout`?\n");
    with_hook("wait: x").invalid(&format!(
        "error: releases/core.yaml:6:7: release `kube-system/cilium`: unknown key `wait` in a `postsync:` entry (allowed: {}, timeout)\n",
        hook_kinds().join(", ")
    ));
}

#[test]
fn hook_kinds_check_their_fields() {
    with_hook("rollout: { kind: Daemonset, name: cilium }").invalid(
        "error: releases/core.yaml:6:7: release `kube-system/cilium`: postsync hook `rollout` kind `Daemonset` is not a workload; use Deployment, DaemonSet or StatefulSet; did you mean `DaemonSet`?\n",
    );
    with_hook("command: []").invalid(
        "error: releases/core.yaml:6:7: release `kube-system/cilium`: postsync hook `command` is empty; give the program and its arguments as a list\n",
    );
    with_hook("shell: \"\"")
        .invalid("error: releases/core.yaml:6:7: release `kube-system/cilium`: postsync hook `shell` is empty\n");
    with_hook("{ job: { name: migrate }, timeout: 0s }").invalid(
        "error: releases/core.yaml:6:7: release `kube-system/cilium`: postsync hook timeout `0s` is zero; give a positive duration\n",
    );
    with_hook("condition: { apiVersion: v1, kind: ConfigMap, name: \"{{nope}}\", type: Ready }").invalid(
        "error: releases/core.yaml:6:60: release `kube-system/cilium`: hook: template uses `nope`, which is not defined (defined: cluster.name, cluster.context, cluster.values (empty), root, release.name, release.namespace)\n",
    );
}

#[test]
fn template_unknown_variable_is_named() {
    plan(&format!("{CILIUM}values: {{ host: \"{{{{cluster.values.k8sServiceHost}}}}\" }}\n")).invalid(
        "error: releases/core.yaml:4:18: release `kube-system/cilium`: template uses `cluster.values.k8sServiceHost`, which is not defined (defined: cluster.name, cluster.context, cluster.values (empty), root, release.name, release.namespace)\n",
    );
}

#[test]
fn unset_environment_variable() {
    plan(&format!("{CILIUM}values: {{ token: \"x-{{{{env \\\"BOOTSTRAP_TEST_UNSET\\\"}}}}\" }}\n")).invalid(
        "error: releases/core.yaml:4:21: release `kube-system/cilium`: environment variable `BOOTSTRAP_TEST_UNSET` is not set; set it, or give a default: {{env \"BOOTSTRAP_TEST_UNSET\" \"default\"}}\n",
    );
}

#[test]
fn template_syntax_error() {
    plan(&format!("{CILIUM}values: {{ a: \"{{{{#if}}}}\" }}\n")).invalid(
        "error: releases/core.yaml:4:22: release `kube-system/cilium`: template syntax error: not valid handlebars here: an unclosed `{{`, a block such as `{{#if}}` without its argument or its `{{/if}}`, or a stray `}}`\n",
    );
    plan(&format!(
        "{CILIUM}values:\n  a: \"{{{{#if cluster.name}}}}x{{{{/each}}}}\"\n"
    ))
    .invalid(
        "error: releases/core.yaml:5:28: release `kube-system/cilium`: template syntax error: `{{#if}}` is closed by `{{/each}}`; close it with `{{/if}}`\n",
    );
}

/// A values file is a template as a whole: its errors are at the file's
/// own line and column.
#[test]
fn template_errors_in_a_values_file_are_located() {
    plan(&format!("{CILIUM}valuesFiles: [values/cilium.yaml.hbs]\n"))
        .file(
            "releases/values/cilium.yaml.hbs",
            "ipam:\n  mode: kubernetes\nk8sServiceHost: {{cluster.values.apiHost}}\n",
        )
        .invalid(
            "error: releases/values/cilium.yaml.hbs:3:17: release `kube-system/cilium`: template uses `cluster.values.apiHost`, which is not defined (defined: cluster.name, cluster.context, cluster.values (empty), root, release.name, release.namespace)\n",
        );
}

/// Every failing template of a release is reported, each where it is
/// written: an inline value in a block scalar, a cluster override, a hook.
#[test]
fn every_template_error_is_located() {
    let release = format!(
        "{CILIUM}values:\n  a: ok\n  script: |\n    line one\n    host={{{{cluster.values.host}}}}\n  b: \"{{{{cluster.values.b}}}}\"\nhooks:\n  postsync:\n    - shell: \"echo {{{{release.nme}}}}\"\n"
    );
    Test::with_releases(&release)
        .file(
            "clusters/infra/cluster.yaml",
            "name: infra\noverrides:\n  cilium:\n    values:\n      c: \"x-{{cluster.values.c}}\"\n",
        )
        .args(&["plan", "infra"])
        .invalid(
            "error: releases/core.yaml:8:10: release `kube-system/cilium`: template uses `cluster.values.host`, which is not defined (defined: cluster.name, cluster.context, cluster.values (empty), root, release.name, release.namespace)
error: releases/core.yaml:9:7: release `kube-system/cilium`: template uses `cluster.values.b`, which is not defined (defined: cluster.name, cluster.context, cluster.values (empty), root, release.name, release.namespace)
error: clusters/infra/cluster.yaml:5:13: release `kube-system/cilium`: template uses `cluster.values.c`, which is not defined (defined: cluster.name, cluster.context, cluster.values (empty), root, release.name, release.namespace)
error: releases/core.yaml:12:20: release `kube-system/cilium`: hook: template uses `release.nme`, which is not defined; did you mean `release.name`? (defined: cluster.name, cluster.context, cluster.values (empty), root, release.name, release.namespace)
error: 4 problems in the config; nothing was changed
",
        );
}

/// Parser messages in the user's terms: what the key must look like, and
/// for chart values written one level too far left, where they belong.
#[test]
fn parser_messages_say_what_to_write() {
    plan(&format!("{CILIUM}needs: coredns\n")).invalid(
        "error: releases/core.yaml:4:8: release `kube-system/cilium`: `needs` must be a list, like `needs: [coredns]`\n",
    );
    plan(&format!("{CILIUM}valuesFiles: values.yaml\n")).invalid(
        "error: releases/core.yaml:4:14: release `kube-system/cilium`: `valuesFiles` must be a list, like `valuesFiles: [values.yaml]`\n",
    );
    plan(&format!("{CILIUM}values: [a, b]\n")).invalid(
        "error: releases/core.yaml:4:9: release `kube-system/cilium`: `values` must be a map of keys to values (`key: value` lines indented under `values:`, or `values: {key: value}`)\n",
    );
    plan(&format!("{CILIUM}crds: skip\n")).invalid(
        "error: releases/core.yaml:4:7: release `kube-system/cilium`: `crds: skip` is not one of bootstrap, only, chart, none\n",
    );
    plan(&format!("{CILIUM}crdValues:\ncrds:\n  enabled: true\n")).invalid(
        "error: releases/core.yaml:5:1: release `kube-system/cilium`: `crds` is the release's CRD policy (`bootstrap`, `only`, `chart`, `none`), not chart values; `enabled` under it looks like chart values for the CRD render: indent `crds:` under `crdValues:` (or under `values:` for the install), like `crdValues: {crds: {enabled: true}}`\n",
    );
    plan(&format!("{CILIUM}wait: true\nwait: false\n")).invalid(
        "error: releases/core.yaml:5:1: release `kube-system/cilium`: `wait` is written twice in the same map; keep one\n",
    );
}

/// A file that does not parse hides nothing: every broken key of every
/// document of every file is reported, and a release that failed its own
/// checks is still known to `needs` (no "not a release" follow-ups).
#[test]
fn every_problem_of_every_file_in_one_run() {
    let core = "name: cilium
namespace: kube-system
chart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }
timout: 5m
wait: maybe
---
name: CoreDNS
namespace: kube-system
chart: { repo: https://coredns.github.io/helm, name: coredns, version: 1.44.3 }
needs: cilium
";
    let certs = "name: cert-manager
namespace: cert-manager
chart: { repo: https://charts.jetstack.io, name: cert-manager, version: v1.19.0 }
needs: [coredns]
hooks:
  postsync:
    - rolout: { kind: Deployment, name: cert-manager }
---
name: external-secrets
namespace: external-secrets
chart: { repo: https://charts.external-secrets.io, name: external-secrets, version: 0.20.3 }
needs: [cert-manager, coredns, cilium]
";
    Test::new()
        .file("clusters/infra/cluster.yaml", "name: infra\nguard: sometimes\n")
        .file("releases/core.yaml", core)
        .file("releases/security.yaml", certs)
        .args(&["plan", "infra"])
        .invalid(
            "error: clusters/infra/cluster.yaml:2:8: `guard: sometimes` must be `true` or `false`
error: releases/core.yaml:4:1: release `kube-system/cilium`: unknown key `timout`; did you mean `timeout`?
error: releases/core.yaml:5:7: release `kube-system/cilium`: `wait: maybe` must be `true` or `false`
error: releases/core.yaml:7:7: release `kube-system/CoreDNS`: name `CoreDNS` must consist of lower case letters, digits and '-', and start and end with a letter or digit (a DNS-1123 label)
error: releases/core.yaml:10:8: release `kube-system/CoreDNS`: `needs` must be a list, like `needs: [cilium]`
error: releases/security.yaml:7:7: release `cert-manager/cert-manager`: unknown key `rolout`; did you mean `rollout`?
error: 6 problems in the config; nothing was changed
",
        );
}

#[test]
fn every_problem_is_reported_in_one_run() {
    let releases = format!(
        "{}---\n{}---\nname: coredns\nnamespace: kube-system\nchart: {{ repo: https://coredns.github.io/helm, name: coredns, version: 1.44.3 }}\nneeds: [cilum]\ntimeout: soon\n",
        CILIUM.replace("version: 1.18.2", "version: latest"),
        "name: spegel\nnamespace: Spegel\nchart: { oci: oci://ghcr.io/spegel-org/helm-charts/spegel, version: 0.3.0 }\n"
    );
    plan(&releases).invalid(
        "error: releases/core.yaml:3:8: release `kube-system/cilium`: chart version `latest` is not a pinned version; pin an exact version
error: releases/core.yaml:6:12: release `Spegel/spegel`: namespace `Spegel` must consist of lower case letters, digits and '-', and start and end with a letter or digit (a DNS-1123 label)
error: releases/core.yaml:12:9: release `kube-system/coredns`: needs `cilum`, which is not a release; did you mean `cilium`?
error: releases/core.yaml:13:10: release `kube-system/coredns`: timeout `soon` is not a duration (expected number at 0); write it like `90s`, `5m` or `1h30m`
error: 4 problems in the config; nothing was changed
",
    );
}

#[test]
fn missing_releases_directory() {
    Test::new()
        .file("clusters/infra/cluster.yaml", "name: infra\n")
        .args(&["plan", "infra"])
        .invalid("error: releases: cannot read the release definitions (No such file or directory (os error 2)); a config root holds releases/*.yaml\n");
}

#[test]
fn dir_flag_prefixes_paths() {
    let t = Test::with_releases(&format!("{CILIUM}wait: maybe\n"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bootstrap"))
        .args(["plan", "infra", "--dir"])
        .arg(t.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr.starts_with(&format!(
            "error: {}/releases/core.yaml:4:7:",
            t.path().display()
        )),
        "{stderr}"
    );
}

/// A hook that names another kubeconfig context would act on a different
/// cluster than the one being bootstrapped.
#[test]
fn a_hook_naming_another_context_is_refused() {
    let hooks =
        "hooks:\n  postsync:\n    - command: [kubectl, --context=admin@other, get, nodes]\n";
    Test::with_releases(&format!("{CILIUM}{hooks}"))
        .file("clusters/infra/cluster.yaml", "name: infra\ncontext: admin@infra\n")
        .args(&["plan", "infra"])
        .invalid(
        "error: releases/core.yaml: release `kube-system/cilium`: hook command `kubectl --context=admin@other get nodes` names kubeconfig context `admin@other`, but this run targets `admin@infra`; use `{{cluster.context}}` or drop the flag (hooks run with the run's context as current)\n",
    );
}

/// A release file that is a dangling or looping symlink is reported, never
/// skipped (a plan with fewer releases than written would pass silently).
#[test]
fn a_release_file_that_is_a_broken_symlink_is_reported() {
    let test = Test::with_releases(CILIUM).args(&["plan", "infra"]);
    let releases = test.path().join("releases");
    std::os::unix::fs::symlink(releases.join("gone.yaml"), releases.join("dangling.yaml")).unwrap();
    std::os::unix::fs::symlink(releases.join("loop.yaml"), releases.join("loop.yaml")).unwrap();
    test.invalid(
        "error: releases/dangling.yaml: cannot read: No such file or directory (os error 2); it is a symlink that leads nowhere (dangling, or a loop): fix or remove it\n\
         error: releases/loop.yaml: cannot read: Too many levels of symbolic links (os error 40); it is a symlink that leads nowhere (dangling, or a loop): fix or remove it\n\
         error: 2 problems in the config; nothing was changed\n",
    );
}

fn with_values_file(name: &str, content: &str) -> Test {
    Test::with_releases(&format!("{CILIUM}valuesFiles: [values/{name}]\n"))
        .file(&format!("releases/values/{name}"), content)
        .args(&["plan", "infra"])
}

#[test]
fn a_plain_values_file_using_the_template_context_says_to_rename_it() {
    with_values_file(
        "cilium.yaml",
        "# {{cluster.name}} in a comment is fine\nipam:\n  mode: kubernetes\ncluster:\n  name: \"{{ cluster.name }}\"\n",
    )
    .invalid(
        "error: releases/values/cilium.yaml:5: release `kube-system/cilium`: `{{ cluster.name }}` is not rendered: values files are plain YAML; rename it to cilium.yaml.hbs to template it\n",
    );
}

#[test]
fn a_plain_values_file_that_does_not_parse_because_of_braces_says_to_rename_it() {
    with_values_file("cilium.yaml", "cluster:\n  id: {{ .Values.id }}\n").invalid(
        "error: releases/values/cilium.yaml:2:8: release `kube-system/cilium`: expected string scalar; values files are plain YAML, and this one holds `{{`: rename it to cilium.yaml.hbs to template it\n",
    );
}

#[test]
fn a_template_values_file_reports_template_errors() {
    with_values_file("cilium.yaml.hbs", "cluster:\n  id: {{cluster.values.id}}\n").invalid(
        "error: releases/values/cilium.yaml.hbs:2:7: release `kube-system/cilium`: template uses `cluster.values.id`, which is not defined (defined: cluster.name, cluster.context, cluster.values (empty), root, release.name, release.namespace)\n",
    );
}

/// `graph` prints the DAG (with `-v`, each chart): it renders no values,
/// values files or hooks, which it would not print (docs/design.md#commands),
/// so a values template only `plan` and `check` report is no error of it.
#[test]
fn graph_renders_no_values() {
    let broken = |args: &[&str]| {
        Test::with_releases(&format!(
            "{CILIUM}valuesFiles: [values/cilium.yaml.hbs]\nhooks:\n  postsync:\n    - shell: echo {{{{cluster.values.nope}}}}\n"
        ))
        .file(
            "releases/values/cilium.yaml.hbs",
            "cluster:\n  id: {{cluster.values.id}}\n",
        )
        .args(args)
        .run()
    };
    let plan = broken(&["plan", "infra"]);
    assert_eq!(plan.code, 2, "{}", plan.stderr);
    assert!(plan.stderr.contains("cluster.values.id"), "{}", plan.stderr);
    let graph = broken(&["graph", "infra", "-v"]);
    assert_eq!(graph.code, 0, "{}", graph.stderr);
    assert!(graph.stdout.contains("cilium 1.18.2"), "{}", graph.stdout);
    let json = broken(&["graph", "infra", "--format", "json"]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    assert!(
        json.stdout.contains("\"kube-system/cilium\""),
        "{}",
        json.stdout
    );
}

/// With `--output json`, errors are JSON on stdout as well, with every
/// problem and the same exit code, on every command (docs/design.md#error-json).
#[test]
fn errors_are_json_on_stdout_with_output_json() {
    let broken = format!("{CILIUM}wait: maybe\nneeds: coredns\n");
    for command in [
        "plan", "check", "template", "graph", "apply", "status", "destroy",
    ] {
        let out = Test::with_releases(&broken)
            .args(&[command, "infra", "--output", "json"])
            .run();
        assert_eq!(out.code, 2, "{command}: {}", out.stderr);
        // apply's and destroy's JSON Lines end with an event, `run_failed`:
        // the same fields after `time`, `elapsedMs`, `event` and `schemaVersion`.
        let stdout = if matches!(command, "apply" | "destroy") {
            let (stamp, rest) = out
                .stdout
                .split_once(",\"event\":\"run_failed\",\"schemaVersion\":1,")
                .expect(&out.stdout);
            assert!(stamp.starts_with("{\"time\":\""), "{stamp}");
            format!("{{\"schemaVersion\":1,{rest}")
        } else {
            out.stdout.clone()
        };
        assert_eq!(
            stdout,
            "{\"schemaVersion\":1,\"error\":\"2 problems in the config; nothing was changed\",\"exitCode\":2,\"problems\":[{\"file\":\"releases/core.yaml\",\"line\":4,\"column\":7,\"release\":\"kube-system/cilium\",\"message\":\"`wait: maybe` must be `true` or `false`\",\"causes\":[]},{\"file\":\"releases/core.yaml\",\"line\":5,\"column\":8,\"release\":\"kube-system/cilium\",\"message\":\"`needs` must be a list, like `needs: [coredns]`\",\"causes\":[]}],\"findings\":[],\"causes\":[]}\n",
            "{command}"
        );
        assert!(
            out.stderr
                .ends_with("error: 2 problems in the config; nothing was changed\n")
        );
    }
    let out = Test::with_releases(CILIUM)
        .args(&["plan", "--output", "json", "--bogus"])
        .run();
    assert_eq!(out.code, 2);
    assert_eq!(
        out.stdout,
        "{\"schemaVersion\":1,\"error\":\"unexpected argument '--bogus' found; tip: to pass '--bogus' as a value, use '-- --bogus'; Usage: bootstrap plan --output <OUTPUT> [CLUSTER]\",\"exitCode\":2,\"problems\":[],\"findings\":[],\"causes\":[]}\n"
    );
}

/// A release whose document YAML cannot parse (an unclosed quote) is one
/// error; what `needs` it is not also told it needs an unknown release.
#[test]
fn an_unparsable_release_does_not_cascade_into_false_needs_errors() {
    let releases = format!(
        "{CILIUM}---
name: coredns
namespace: kube-system
chart: {{ repo: https://coredns.github.io/helm, name: coredns, version: \"1.44.3 }}
needs: [cilium]
---
name: spegel
namespace: kube-system
chart: {{ oci: oci://ghcr.io/spegel-org/helm-charts/spegel, version: 0.3.0 }}
needs: [coredns]
---
name: cert-manager
namespace: cert-manager
chart: {{ repo: https://charts.jetstack.io, name: cert-manager, version: v1.18.2 }}
needs: [kube-system/coredns]
"
    );
    let out = plan(&releases).run();
    assert_eq!(out.code, 2, "{}", out.stderr);
    let errors: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{}", out.stderr);
    assert!(
        errors[0].starts_with("error: releases/core.yaml:"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("needs"), "{}", out.stderr);
}

/// A hook that reads a file the config root lacks is located at the hook.
#[test]
fn a_hook_reading_a_missing_file_names_its_line() {
    plan(&format!(
        "{CILIUM}hooks:\n  postsync:\n    - created: {{ apiVersion: v1, kind: Namespace, name: x }}\n    - command: [kubectl, apply, -f, missing.yaml]\n"
    ))
    .invalid("error: releases/core.yaml:7:7: release `kube-system/cilium`: hook `kubectl` reads `missing.yaml`, which does not exist in the config root; create it or fix the path\n");
}

/// What the parser says in its own terms is said in the file's.
#[test]
fn parser_errors_in_the_files_words() {
    // A tab: say it is the tab.
    plan(&format!("{CILIUM}values:\n\tdebug: true\n")).invalid(
        "error: releases/core.yaml:5:2: release `kube-system/cilium`: a tab indents this line; YAML indents with spaces only: replace the tab with spaces\n",
    );
    // A key one level too deep: say which map it is in.
    plan("name: cilium\nnamespace: kube-system\nchart:\n  repo: https://helm.cilium.io\n  name: cilium\n  version: 1.18.2\n  needs: [x]\n").invalid(
        "error: releases/core.yaml:7:3: release `kube-system/cilium`: unknown key `needs` in `chart:` (allowed: repo, name, oci, path, version); if `needs` belongs beside `chart:`, not under it, indent it as `chart:` is\n",
    );
    // A list where a document belongs.
    plan("- a\n- b\n").invalid(
        "error: releases/core.yaml:1:1: this document is not a map of keys to values: a list or a single value was found where `key: value` lines belong\n",
    );
}

/// A Kubernetes object dropped into releases/ is one error saying so, not
/// one per key it has.
#[test]
fn a_kubernetes_object_among_the_releases_is_one_error() {
    plan(&format!(
        "{CILIUM}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: b\n"
    ))
    .invalid("error: releases/core.yaml:5: is a Kubernetes object (ConfigMap), not a release: release files hold `name`, `namespace` and `chart`; move it out of releases/ (a CustomResourceDefinition file can be listed in a release's `manifests:`, for the CRD phase)\n");
}

/// The README's promise, as it prints it: a bad `needs` and a bad
/// `timeout` in one release are both reported in one run, in the order of
/// the file (a release whose own checks fail still has its `needs` checked).
#[test]
fn the_readme_example_reports_every_problem_in_one_run() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let after = readme
        .split("config is reported in one run:\n\n```\n")
        .nth(1)
        .expect("the README's example");
    let expected = &after[..after.find("```").unwrap()];
    plan(&with_coredns(
        "needs: [cilum]\nhooks:\n  postsync:\n    - rollout: { kind: Deployment, name: coredns }\nlabels: { tier: dns }\ntimeout: soon\n",
    ))
    .invalid(expected);
}

#[test]
fn an_empty_list_key_is_named_and_nothing_else_is_blamed() {
    plan(&format!("{CILIUM}valuesFiles:\nneeds: [coredns]\n")).invalid(
        "error: releases/core.yaml:4:12: release `kube-system/cilium`: `valuesFiles` must be a list, like `valuesFiles: [a, b]`\nerror: releases/core.yaml:5:9: release `kube-system/cilium`: needs `coredns`, which is not a release\nerror: 2 problems in the config; nothing was changed\n",
    );
}

/// The scanner's words made the file's: a tab is located at the tab (the
/// scanner names the end of the line above), a line indented to match no
/// map and a `: ` in a plain value say what to do.
#[test]
fn yaml_syntax_errors_in_the_files_words() {
    plan(&format!("{CILIUM}values:\n  a: 1\n\tb: 2\n")).invalid(
        "error: releases/core.yaml:6:1: release `kube-system/cilium`: a tab indents this line; YAML indents with spaces only: replace the tab with spaces\n",
    );
    plan(&format!("{CILIUM}values:\n  a: 1\n b: 2\n")).invalid(
        "error: releases/core.yaml:6:2: release `kube-system/cilium`: this line is indented 1 space, which lines up with no key above it (those are at 0, 2 spaces): indent it as the keys of the map it belongs to\n",
    );
    plan(&format!("{CILIUM}values:\n  motd: a: b\n")).invalid(
        "error: releases/core.yaml:5:10: release `kube-system/cilium`: a value holds `: `, which YAML reads as the start of a key: quote the value (`key: \"a: b\"`)\n",
    );
}

/// Input edges found by a mutation campaign: a timeout too long for helm
/// and the waits (it panicked in apply), and a release name helm refuses.
#[test]
fn an_oversized_timeout_and_a_54_character_name_are_refused_before_anything_runs() {
    plan(&format!("{CILIUM}timeout: 18446744073709551615s\n")).invalid(
        "error: releases/core.yaml:4:10: release `kube-system/cilium`: timeout `18446744073709551615s` is longer than 7 days, more than any bootstrap step or run waits; give a shorter duration\n",
    );
    let long = "a".repeat(54);
    plan(&CILIUM.replace("name: cilium\n", &format!("name: {long}\n"))).invalid(&format!(
        "error: releases/core.yaml:1:7: release `kube-system/{long}`: name `{long}` is 54 characters long; helm allows at most 53 in a release name (it appends suffixes to name objects after it)\n"
    ));
}

/// helmfile's and helm's habits: `sync`/`lint` get a tip naming the command
/// that does their job (exit 2, nothing run), `-f` is `--values`, and
/// `--version` / `version -o json` say which build ran.
#[test]
fn helmfile_verbs_get_a_tip_and_the_version_names_its_build() {
    for (verb, ours) in [("sync", "apply"), ("lint", "check"), ("build", "plan")] {
        let out = Test::new().args(&[verb, "infra"]).run();
        assert_eq!(out.code, 2, "{}", out.stderr);
        assert!(
            out.stderr
                .contains(&format!("tip: a similar subcommand exists: '{ours}'")),
            "{verb}: {}",
            out.stderr
        );
    }
    let values = Test::with_releases(CILIUM)
        .file("extra.yaml", "debug: { enabled: true }\n")
        .args(&["template", "infra", "-f", "extra.yaml"])
        .run();
    assert_eq!(values.code, 0, "{}", values.stderr);
    assert!(values.stdout.contains("debug:"), "{}", values.stdout);
    let long = Test::new().args(&["--version"]).run();
    assert!(
        long.stdout.starts_with("bootstrap 0.") && long.stdout.contains("(commit "),
        "{}",
        long.stdout
    );
    let json = Test::new().args(&["version", "-o", "json"]).run();
    assert_eq!(json.code, 0);
    let document: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(document["version"], env!("CARGO_PKG_VERSION"));
    assert!(document["commit"].as_str().is_some_and(|c| !c.is_empty()));
    assert_eq!(document["helm"]["majors"], serde_json::json!([3, 4]));
}

/// `bootstrap init DIR` writes a config root `plan` and `check` accept at
/// once, with the context given; a second init overwrites nothing (exit 2,
/// naming each file) unless --force.
#[test]
fn init_writes_a_root_plan_and_check_accept_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("new");
    let root_arg = root.to_str().unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(testkit::bootstrap())
            .args(args)
            .current_dir(dir.path())
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stdout, stderr) = run(&[
        "init",
        root_arg,
        "--cluster",
        "lab",
        "--context",
        "kind-lab",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("`bootstrap plan lab --dir "), "{stdout}");
    let cluster = std::fs::read_to_string(root.join("clusters/lab/cluster.yaml")).unwrap();
    assert!(cluster.contains("context: kind-lab\n"), "{cluster}");
    for command in ["plan", "check"] {
        let (code, stdout, stderr) = run(&[command, "lab", "--dir", root_arg]);
        assert_eq!(code, 0, "{command}: {stdout}{stderr}");
    }
    std::fs::write(root.join("releases/core.yaml"), "# mine\n").unwrap();
    let (code, _, stderr) = run(&["init", root_arg, "--cluster", "lab"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("releases/core.yaml: already exists; nothing was written"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("releases/core.yaml")).unwrap(),
        "# mine\n"
    );
    let (code, _, stderr) = run(&["init", root_arg, "--cluster", "lab", "--force"]);
    assert_eq!(code, 0, "{stderr}");
}

/// Dynamic completions (`COMPLETE=SHELL bootstrap`, as the registered
/// shell function calls it): cluster names from the config root, release
/// names for `--only`, contexts from the kubeconfig for `--context`.
#[test]
fn completions_offer_clusters_releases_and_contexts() {
    let test = Test::with_releases(&with_coredns(""))
        .file("clusters/apps/cluster.yaml", "name: apps\ncontext: admin@apps\n")
        .file(
            "kubeconfig",
            "apiVersion: v1\nkind: Config\ncurrent-context: admin@infra\nclusters: []\nusers: []\ncontexts:\n- name: admin@infra\n  context: {cluster: x, user: y}\n- name: kind-lab\n  context: {cluster: x, user: y}\n",
        );
    let complete = |words: &[&str]| {
        let out = test
            .command()
            .env("COMPLETE", "fish")
            .env("KUBECONFIG", test.path().join("kubeconfig"))
            .arg("--")
            .arg("bootstrap")
            .args(words)
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.split('\t').next().unwrap_or_default().to_string())
            .filter(|c| !c.starts_with('-'))
            .collect::<Vec<String>>()
    };
    assert_eq!(complete(&["apply", ""]), ["apps", "infra"]);
    assert_eq!(complete(&["status", "i"]), ["infra"]);
    assert_eq!(
        complete(&["apply", "infra", "--only", "c"]),
        ["cilium", "coredns"]
    );
    assert_eq!(
        complete(&["plan", "infra", "--context", ""]),
        ["admin@infra", "kind-lab"]
    );
}
