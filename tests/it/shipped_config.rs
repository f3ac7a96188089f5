//! The config shipped at the repository root is the embedded default: every
//! offline command works on it from the repository root.

use std::process::Command;

use testkit::builder::repo_root;

fn bootstrap(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_bootstrap"))
        .args(args)
        .current_dir(repo_root())
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn plan_json(cluster: &str) -> serde_json::Value {
    json_of(&["plan", cluster, "--output", "json"])
}

/// The JSON document `bootstrap ARGS` prints, exiting 0.
fn json_of(args: &[&str]) -> serde_json::Value {
    let out = bootstrap(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn plans_list_every_release_after_its_needs() {
    for cluster in ["infra", "apps"] {
        let plan = plan_json(cluster);
        assert_eq!(plan["cluster"], cluster);
        let releases = plan["releases"].as_array().unwrap();
        let ids: Vec<&str> = releases.iter().map(|r| r["id"].as_str().unwrap()).collect();
        for (i, r) in releases.iter().enumerate() {
            for need in r["needs"].as_array().unwrap() {
                let at = ids
                    .iter()
                    .position(|id| id == &need.as_str().unwrap())
                    .expect("need is in the plan");
                assert!(at < i, "{} comes after its need {need}", ids[i]);
            }
        }
        // The replaced helmfile's chain with its exact versions
        // (docs/design.md#the-replaced-helmfile-catalog).
        let version = |id: &str| {
            releases
                .iter()
                .find(|r| r["id"] == id)
                .map(|r| r["version"].as_str().unwrap().to_string())
        };
        assert_eq!(version("kube-system/cilium").as_deref(), Some("1.18.2"));
        assert_eq!(version("kube-system/coredns").as_deref(), Some("1.44.3"));
        assert_eq!(
            version("cert-manager/cert-manager").as_deref(),
            Some("v1.19.0")
        );
        assert_eq!(
            version("external-secrets/external-secrets").as_deref(),
            Some("0.20.3")
        );
        assert_eq!(
            version("flux-system/flux-operator").as_deref(),
            Some("0.32.0")
        );
        assert_eq!(
            version("flux-system/flux-instance").as_deref(),
            Some("0.32.0")
        );
        let crds: Vec<&str> = plan["crds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["release"].as_str().unwrap())
            .collect();
        assert!(crds.contains(&"kube-system/gateway-api"));
        assert!(crds.contains(&"observability/prometheus-operator-crds"));
    }
}

#[test]
fn plan_is_deterministic() {
    assert_eq!(
        bootstrap(&["plan", "infra", "--output", "json"]).stdout,
        bootstrap(&["plan", "infra", "--output", "json"]).stdout
    );
}

#[test]
fn per_cluster_values_differ() {
    let values = |cluster: &str| {
        let out = bootstrap(&["template", cluster, "cilium", "--output", "json"]);
        assert_eq!(out.status.code(), Some(0));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["releases"][0]["values"].clone()
    };
    let (infra, apps) = (values("infra"), values("apps"));
    assert_eq!(infra["cluster"]["id"], 1);
    assert_eq!(apps["cluster"]["id"], 2);
    assert_eq!(infra["ipv4NativeRoutingCIDR"], "10.244.0.0/16");
    assert_eq!(apps["ipv4NativeRoutingCIDR"], "10.246.0.0/16");
}

/// Needs graphviz, which a machine with only the Rust toolchain lacks; `.ci/run`
/// installs it and runs the ignored tests too, so the count never claims a
/// pass that did not happen.
#[test]
#[ignore = "needs graphviz's `dot`: cargo test --test it shipped_config:: -- --ignored"]
fn graph_dot_renders_with_graphviz() {
    let out = bootstrap(&["graph", "infra", "--format", "dot"]);
    assert_eq!(out.status.code(), Some(0));
    let mut dot = Command::new("dot")
        .arg("-Tsvg")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("graphviz `dot` is installed (.ci/run installs it)");
    use std::io::Write;
    dot.stdin.take().unwrap().write_all(&out.stdout).unwrap();
    let svg = dot.wait_with_output().unwrap();
    assert!(svg.status.success());
    // Graphviz escapes '-' in SVG text.
    assert!(String::from_utf8_lossy(&svg.stdout).contains("system/cilium"));
}

#[test]
fn graph_json_and_mermaid() {
    let out = bootstrap(&["graph", "infra", "--format", "json"]);
    let g: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let edges = g["edges"].as_array().unwrap();
    assert!(
        edges
            .iter()
            .any(|e| e["from"] == "kube-system/cilium" && e["to"] == "kube-system/coredns")
    );
    let mermaid =
        String::from_utf8(bootstrap(&["graph", "apps", "--format", "mermaid"]).stdout).unwrap();
    assert!(mermaid.starts_with("flowchart LR\n"));
}

#[test]
fn check_passes_on_the_shipped_clusters() {
    for cluster in ["infra", "apps"] {
        let out = bootstrap(&["check", cluster, "--output", "json"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            report["findings"]
                .as_array()
                .unwrap()
                .iter()
                .all(|f| f["severity"] != "error")
        );
    }
}

#[test]
fn check_on_the_dual_management_tree_prints_the_chain_and_fails() {
    let out = bootstrap(&[
        "check",
        "infra",
        "--dir",
        "examples/flux-dual-management/broken",
        "--output",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let finding = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "flux-manages-bootstrap-release")
        .unwrap();
    assert_eq!(finding["release"], "kube-system/cilium");
    assert_eq!(
        finding["object"]["file"],
        "kubernetes/bases/cilium/helmrelease.yaml"
    );
    let chain: Vec<&str> = finding["chain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(
        chain.first(),
        Some(&"kubernetes/clusters/infra/infrastructure.yaml")
    );
    assert_eq!(
        chain.last(),
        Some(&"kubernetes/bases/cilium/helmrelease.yaml")
    );
    assert!(chain.contains(&"kubernetes/infrastructure/networking/cilium/ks.yaml"));
    assert!(chain.contains(&"kubernetes/infrastructure/networking/cilium/kustomization.yaml"));
    let fixed = bootstrap(&[
        "check",
        "infra",
        "--dir",
        "examples/flux-dual-management/fixed",
    ]);
    assert_eq!(fixed.status.code(), Some(0));
}

#[test]
fn check_without_flux_says_nothing_was_scanned() {
    let t = testkit::builder::Test::with_releases(
        "name: a\nnamespace: b\nchart: { oci: oci://x/a, version: 1.0.0 }\n",
    );
    let out = t.args(&["check", "infra"]).run();
    assert_eq!(out.code, 0);
    assert!(
        out.stdout
            .contains("ownership not checked: no GitOps tree was scanned"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("valid"), "{}", out.stdout);
}

#[test]
fn schema_describes_both_file_formats() {
    for kind in ["cluster", "release"] {
        let out = bootstrap(&["schema", kind]);
        let schema: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(schema["properties"]["name"].is_object(), "{kind}");
    }
    let release: serde_json::Value =
        serde_json::from_slice(&bootstrap(&["schema", "release"]).stdout).unwrap();
    assert!(release["properties"]["crdValues"].is_object());
}

#[test]
fn completions_are_generated() {
    let out = bootstrap(&["completions", "bash"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("bootstrap"));
}

/// `bootstrap completions fish | head -2`: the reader has gone when the
/// writer writes; it must end quietly, not panic (exit 101).
#[test]
fn completions_into_a_closed_pipe_end_quietly() {
    for shell in ["fish", "bash", "zsh"] {
        let (reader, writer) = std::io::pipe().unwrap();
        // The read end closed before bootstrap writes: every write is EPIPE.
        drop(reader);
        let out = Command::new(testkit::bootstrap())
            .args(["completions", shell])
            .stdout(writer)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{shell}: {stderr}");
        assert!(!stderr.contains("panicked"), "{shell}: {stderr}");
    }
}

#[test]
fn kind_example_plans() {
    let out = bootstrap(&["plan", "kind", "--dir", "examples/kind", "--output", "json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let values = bootstrap(&[
        "template",
        "kind",
        "cilium",
        "--dir",
        "examples/kind",
        "--output",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&values.stdout).unwrap();
    let cilium = &v["releases"][0]["values"];
    assert_eq!(cilium["kubeProxyReplacement"], true);
    assert!(
        cilium["k8sServiceHost"]
            .as_str()
            .unwrap()
            .ends_with("control-plane")
    );
}

/// `--context` reaches templates: the flux-instance hook's
/// `--context={{cluster.context}}` names the context the run targets, not
/// cluster.yaml's.
#[test]
fn context_flag_reaches_templates_and_hooks() {
    let hooks = |args: &[&str]| -> String {
        json_of(args)["releases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "flux-instance")
            .map(|r| r["hooks"].to_string())
            .unwrap()
    };
    assert!(hooks(&["plan", "infra", "--output", "json"]).contains("--context=admin@infra"));
    let other = hooks(&[
        "plan",
        "infra",
        "--output",
        "json",
        "--context",
        "kind-infra",
    ]);
    assert!(other.contains("--context=kind-infra"), "{other}");
    assert!(!other.contains("admin@infra"), "{other}");
}

/// `-o json` is `--output json` (as in kubectl, helm and flux), and a usage
/// error in JSON keeps clap's tip and usage line, not only its first line.
#[test]
fn short_output_flag_and_whole_usage_errors_in_json() {
    let long = bootstrap(&["plan", "infra", "--output", "json"]);
    let short = bootstrap(&["plan", "infra", "-o", "json"]);
    assert_eq!(short.status.code(), Some(0));
    assert_eq!(short.stdout, long.stdout);
    let out = bootstrap(&["plan", "infra", "-o", "json", "--colour"]);
    assert_eq!(out.status.code(), Some(2));
    let error: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let message = error["error"].as_str().unwrap();
    assert!(
        message.starts_with("unexpected argument '--colour' found"),
        "{message}"
    );
    assert!(message.contains("Usage: bootstrap plan"), "{message}");
    assert!(!message.contains('\n'), "{message}");
}

/// The exit codes in the top-level help are the ones docs/design.md lists.
#[test]
fn help_lists_every_exit_code() {
    let out = bootstrap(&["--help"]);
    // Wrapped at the terminal's width: compare words.
    let help = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for code in [
        "0 success",
        "1 operation failed",
        "2 invalid input",
        "3 another run holds the cluster lock",
        "130 interrupted",
    ] {
        assert!(help.contains(code), "{code}: {help}");
    }
}

/// `--output json` means JSON on stdout for `graph` too, never DOT; asking
/// for both DOT and JSON is a usage error.
#[test]
fn graph_follows_output_json() {
    let out = bootstrap(&["graph", "infra", "--output", "json"]);
    assert_eq!(out.status.code(), Some(0));
    let graph: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(graph.is_object(), "{graph}");
    let out = bootstrap(&["graph", "infra", "--output", "json", "--format", "dot"]);
    assert_eq!(out.status.code(), Some(2));
    // The error is JSON on stdout too (docs/design.md#error-json).
    let error: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        error["error"],
        "`--output json` prints the graph as JSON; drop `--format dot` or `--output json`"
    );
    assert_eq!(error["exitCode"], 2);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("drop `--format dot` or `--output json`"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = bootstrap(&["graph", "infra"]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("digraph"));
}

/// examples/handover: Cilium and CoreDNS handed over with `from:`,
/// flux-operator bootstrap-owned; plan, template and check pass, and the
/// values bootstrap installs are the HelmReleases' (docs/design.md#handover).
#[test]
fn the_handover_example_plans_templates_and_checks() {
    let dir = "examples/handover";
    let plan = bootstrap(&["plan", "infra", "--dir", dir, "--output", "json"]);
    assert_eq!(
        plan.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&plan.stderr)
    );
    let plan: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    let ownership: Vec<(&str, &str)> = plan["releases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_str().unwrap(), r["ownership"].as_str().unwrap()))
        .collect();
    assert_eq!(
        ownership,
        [
            ("kube-system/cilium", "handover"),
            ("kube-system/coredns", "handover"),
            ("flux-system/flux-operator", "bootstrap")
        ]
    );
    assert_eq!(
        plan["releases"][0]["from"]["file"],
        "kubernetes/apps/kube-system/cilium/app/helmrelease.yaml"
    );
    let template = bootstrap(&[
        "template", "infra", "cilium", "--dir", dir, "--output", "json",
    ]);
    assert_eq!(template.status.code(), Some(0));
    let template: serde_json::Value = serde_json::from_slice(&template.stdout).unwrap();
    let cilium = &template["releases"][0];
    assert_eq!(cilium["version"], "1.18.2");
    // valuesFrom (a configMapGenerator file), then spec.values with the
    // Kustomization's postBuild substitution applied.
    assert_eq!(cilium["values"]["ipv4NativeRoutingCIDR"], "10.244.0.0/16");
    assert_eq!(cilium["values"]["k8sServiceHost"], "10.25.11.10");
    let sources: Vec<&str> = cilium["valuesSources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["source"].as_str().unwrap())
        .collect();
    assert_eq!(
        sources,
        [
            "ConfigMap kube-system/cilium-values key values.yaml (kubernetes/apps/kube-system/cilium/app/kustomization.yaml)",
            "HelmRelease kube-system/cilium spec.values (kubernetes/apps/kube-system/cilium/app/helmrelease.yaml)"
        ]
    );
    let check = bootstrap(&["check", "infra", "--dir", dir]);
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("check infra: 0 errors, 0 warnings"),
        "{stdout}"
    );
}

/// `-q` and `-v` on `check` (docs/design.md#global-flags): quiet keeps the
/// errors, verbose shows what the verdict rests on.
#[test]
fn check_quiet_keeps_errors_and_verbose_shows_what_flux_reaches() {
    let dir = "examples/flux-dual-management/broken";
    let normal = bootstrap(&["--dir", dir, "check", "infra"]);
    let normal = String::from_utf8(normal.stdout).unwrap();
    assert!(normal.contains("warning[flux-healthcheck-on-bootstrap-workload]"));

    let quiet = bootstrap(&["--dir", dir, "check", "infra", "-q"]);
    assert_eq!(quiet.status.code(), Some(1));
    let quiet = String::from_utf8(quiet.stdout).unwrap();
    assert!(
        quiet.contains("error[flux-manages-bootstrap-release]"),
        "{quiet}"
    );
    assert!(!quiet.contains("warning["), "{quiet}");
    assert!(
        quiet.ends_with(
            "check infra: 1 error, 2 warnings; scanned 10 files, 8 objects from kubernetes/clusters/infra\n"
        ),
        "{quiet}"
    );

    let verbose = bootstrap(&["--dir", dir, "check", "infra", "-v"]);
    assert_eq!(verbose.status.code(), Some(1));
    let verbose = String::from_utf8(verbose.stdout).unwrap();
    assert!(
        verbose.contains(
            "Flux reaches 1 HelmRelease:
  HelmRelease kube-system/cilium -> Helm release kube-system/cilium (in kubernetes/bases/cilium/helmrelease.yaml)
bootstrap installs 1 release:
  kube-system/cilium: managed by HelmRelease kube-system/cilium (see the errors above)
"
        ),
        "{verbose}"
    );
    let fixed = bootstrap(&[
        "--dir",
        "examples/flux-dual-management/fixed",
        "check",
        "infra",
        "-v",
    ]);
    let fixed = String::from_utf8(fixed.stdout).unwrap();
    assert!(
        fixed.contains("  kube-system/cilium: not managed by Flux\n"),
        "{fixed}"
    );
}

#[test]
fn graph_verbose_labels_each_node_with_its_chart() {
    let plain = String::from_utf8(bootstrap(&["graph", "infra"]).stdout).unwrap();
    assert!(plain.contains("  \"kube-system/cilium\";\n"));
    let verbose = String::from_utf8(bootstrap(&["graph", "infra", "-v"]).stdout).unwrap();
    assert!(
        verbose
            .contains("  \"kube-system/cilium\" [label=\"kube-system/cilium\\ncilium 1.18.2\"];\n"),
        "{verbose}"
    );
    assert!(
        verbose.contains("prometheus-operator-crds 24.0.1 (CRDs only)"),
        "{verbose}"
    );
}

/// Every `-l SELECTOR` the README quotes selects shipped releases: a
/// selector that matches nothing exits 2, which a newcomer copying the
/// line would hit first.
#[test]
fn readme_selectors_match_shipped_releases() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let selectors: Vec<(String, String)> = readme
        .lines()
        .filter_map(|line| {
            let rest = line.trim_start().strip_prefix("bootstrap ")?;
            let words: Vec<&str> = rest.split_whitespace().collect();
            let cluster = words.get(1)?.to_string();
            let at = words
                .iter()
                .position(|w| *w == "-l" || *w == "--selector")?;
            Some((cluster, words.get(at + 1)?.to_string()))
        })
        .collect();
    assert!(!selectors.is_empty(), "the README quotes no -l example");
    for (cluster, selector) in selectors {
        let out = bootstrap(&["template", &cluster, "-l", &selector, "-o", "json"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "README: `-l {selector}` on {cluster}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("\"release\""),
            "README: `-l {selector}` selected nothing: {text}"
        );
    }
}

/// The README's mermaid graph is what `graph infra --format mermaid` prints.
#[test]
fn readme_graph_is_the_commands_output() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let start = readme.find("```mermaid\n").expect("a mermaid block") + "```mermaid\n".len();
    let end = start + readme[start..].find("```\n").unwrap();
    let out = bootstrap(&["graph", "infra", "--format", "mermaid"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), &readme[start..end]);
}

/// Each subcommand's help lists the global flags it uses, not all of them;
/// the others are still accepted (a script passing one more keeps working).
#[test]
fn subcommand_help_shows_the_global_flags_it_uses() {
    let help = |args: &[&str]| String::from_utf8_lossy(&bootstrap(args).stdout).into_owned();
    let schema = help(&["schema", "--help"]);
    assert!(
        !schema.contains("--helm") && !schema.contains("--dir"),
        "{schema}"
    );
    let graph = help(&["graph", "--help"]);
    assert!(
        !graph.contains("--wait-for-api") && !graph.contains("--kubeconfig"),
        "{graph}"
    );
    assert!(
        graph.contains("--dir") && graph.contains("--output"),
        "{graph}"
    );
    let apply = help(&["apply", "--help"]);
    for flag in [
        "--helm",
        "--kubeconfig",
        "--context",
        "--wait-for-api",
        "--no-progress",
        "--termination-log",
    ] {
        assert!(apply.contains(flag), "{flag}: {apply}");
    }
    let out = bootstrap(&[
        "schema",
        "release",
        "--helm",
        "/nowhere",
        "--wait-for-api",
        "1s",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The charts `scripts/pull-test-charts` pulls, as its table lists them:
/// (name, source, chart, version).
fn test_chart_table() -> Vec<[String; 4]> {
    let script = std::fs::read_to_string(repo_root().join("scripts/pull-test-charts")).unwrap();
    let start = script.find("charts=(").expect("the script's chart table");
    let table = &script[start..];
    let table = &table[..table.find("\n)").expect("the table's end")];
    table
        .lines()
        .skip(1)
        .map(|line| {
            let fields: Vec<String> = line
                .trim()
                .trim_matches('"')
                .split_whitespace()
                .map(str::to_string)
                .collect();
            fields.try_into().expect("four fields a line")
        })
        .collect()
}

#[test]
fn the_test_chart_script_pulls_the_versions_the_catalog_pins() {
    let table = test_chart_table();
    assert_eq!(table.len(), 5, "{table:?}");
    let plan = plan_json("infra");
    let releases = plan["releases"].as_array().unwrap();
    for [name, source, _, version] in &table {
        let pinned: Vec<&str> = releases
            .iter()
            .filter(|release| release["chart"] == name.as_str())
            .map(|release| release["version"].as_str().unwrap())
            .collect();
        assert_eq!(
            pinned,
            [version.as_str()],
            "{name} from {source}: the catalog's releases of that chart"
        );
    }
    let script = std::fs::read_to_string(repo_root().join("scripts/pull-test-charts")).unwrap();
    let catalog = std::fs::read_to_string(repo_root().join("releases/crds.yaml")).unwrap();
    let gateway = script
        .lines()
        .find_map(|line| line.strip_prefix("gateway_version="))
        .unwrap();
    assert!(
        catalog.contains(&format!("gateway-api/releases/download/{gateway}/")),
        "the catalog's Gateway API is not {gateway}"
    );
}

#[test]
fn the_test_chart_check_names_what_differs() {
    // A directory that looks like a chart mirror but holds other files: the
    // check fails, naming the version and the files, never passes quietly.
    let dir = tempfile::tempdir().unwrap();
    for [name, ..] in test_chart_table() {
        std::fs::create_dir_all(dir.path().join(&name).join("templates")).unwrap();
        std::fs::write(
            dir.path().join(&name).join("Chart.yaml"),
            "version: 0.0.1\n",
        )
        .unwrap();
    }
    std::fs::write(dir.path().join("cilium/values.yaml"), "{}\n").unwrap();
    std::fs::write(dir.path().join("cilium/templates/extra.yaml"), "{}\n").unwrap();
    let out = Command::new(repo_root().join("scripts/pull-test-charts"))
        .arg("--check")
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cilium/Chart.yaml: version '0.0.1', the catalog pins 1.18.2"),
        "{stderr}"
    );
    assert!(
        stderr.contains("  cilium/templates/extra.yaml\n"),
        "{stderr}"
    );
    assert!(stderr.contains("  cilium/values.yaml\n"), "{stderr}");
}

#[test]
#[cfg_attr(
    not(shared_charts),
    ignore = "needs the real charts: ../shared/charts beside the repository, BOOTSTRAP_TEST_CHARTS=DIR (unpacked charts by name), or scripts/pull-test-charts"
)]
fn the_test_charts_found_are_the_ones_the_tests_were_written_against() {
    let Some(charts) = option_env!("BOOTSTRAP_TEST_CHARTS_DIR") else {
        panic!("build.rs found no charts")
    };
    let out = Command::new(repo_root().join("scripts/pull-test-charts"))
        .args(["--check", charts])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A command run without its cluster names the clusters of the config root
/// (`--dir`), or says there are none and how to get one.
#[test]
fn a_missing_cluster_is_answered_with_the_clusters_there_are() {
    for command in [
        "plan", "check", "template", "graph", "apply", "diff", "status", "destroy",
    ] {
        let out = bootstrap(&[command]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {err}");
        assert!(
            err.contains("tip: the clusters under `.`: apps, infra"),
            "{command}: {err}"
        );
    }
    let out = bootstrap(&["plan", "--dir", "examples"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("there is no clusters/<name>/cluster.yaml under `examples`")
            && err.contains("bootstrap init"),
        "{err}"
    );
}

/// `plan` takes the selection flags of the commands it previews: `-l`
/// with what the chosen releases need, `--no-needs` for exactly them.
#[test]
fn plan_shows_the_releases_a_selection_chooses() {
    let ids = |args: &[&str]| -> Vec<String> {
        json_of(&[&["plan", "infra", "-o", "json"], args].concat())["releases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        ids(&["-l", "tier=security", "--no-needs"]),
        [
            "cert-manager/cert-manager",
            "external-secrets/external-secrets"
        ]
    );
    assert_eq!(
        ids(&["--only", "spegel"]),
        [
            "kube-system/cilium",
            "kube-system/coredns",
            "kube-system/spegel"
        ]
    );
}

/// `check` on a terminal colours each finding's `severity[code]` as rustc
/// and cargo do; piped or with `NO_COLOR`, it prints no escape.
#[test]
fn findings_are_coloured_only_on_a_terminal() {
    let args = [
        "check",
        "infra",
        "--dir",
        "examples/flux-dual-management/broken",
    ];
    let on_tty = |no_color: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_bootstrap"));
        cmd.args(args)
            .current_dir(repo_root())
            .env_remove("NO_COLOR");
        if no_color {
            cmd.env("NO_COLOR", "1");
        }
        let pty = testkit::pty::Pty::spawn(cmd, 40, 200);
        let bytes = pty.bytes();
        let (code, _) = pty.finish(std::time::Duration::from_secs(60));
        assert_eq!(code, 1);
        String::from_utf8_lossy(&bytes.lock().unwrap()).into_owned()
    };
    let coloured = on_tty(false);
    let heading = "error[flux-manages-bootstrap-release]";
    let at = coloured.find(heading).expect("the finding is printed");
    assert!(
        coloured[..at].ends_with("\u{1b}[31m\u{1b}[1m"),
        "{:?}",
        &coloured[at.saturating_sub(20)..at + heading.len() + 10]
    );
    assert!(
        coloured.contains("\u{1b}[33m\u{1b}[1mwarning["),
        "{coloured:?}"
    );
    let plain = on_tty(true);
    assert!(
        plain.contains(heading) && !plain.contains('\u{1b}'),
        "{plain:?}"
    );
    let piped = bootstrap(&args);
    let stdout = String::from_utf8_lossy(&piped.stdout);
    assert!(
        stdout.contains(heading) && !stdout.contains('\u{1b}'),
        "{stdout}"
    );
}
