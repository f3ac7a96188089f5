//! The fleet examples (examples/fleet/, docs/fleet.md) checked offline: the
//! flux-operator ResourceSet expanded with the project's own expander
//! (src/flux/resourceset.rs) into one ResourceSet and one Job per cluster;
//! the Job's exact argv, with its volumes laid out as the kubelet would, run
//! against a loopback API; the exit codes matched to the Job's
//! `podFailurePolicy`; every `bootstrap` command line of the GitHub Actions
//! workflow and the Argo template parsed by the real CLI and run; the plain
//! Kubernetes objects sent to the loopback API with `kubectl apply
//! --dry-run=server`. What is only checked on paper is listed in
//! examples/fleet/README.md.

use std::path::{Path, PathBuf};
use std::process::Command;

use bootstrap::flux::object::Object;
use bootstrap::flux::resourceset;
use clap::Parser;
use serde_json::{Value, json};
use testkit::builder::repo_root;
use testkit::cluster::{Cluster, daemonset, deployment};

const CLUSTERS: [&str; 2] = ["prod-eu-1", "prod-us-1"];

fn example(path: &str) -> PathBuf {
    repo_root().join("examples/fleet").join(path)
}

fn documents(path: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(example(path)).unwrap();
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

fn object(body: &Value) -> Object {
    let text = |p: &str| body.pointer(p).and_then(Value::as_str).map(str::to_string);
    Object {
        api_version: text("/apiVersion").unwrap(),
        kind: text("/kind").unwrap(),
        name: text("/metadata/name").unwrap(),
        namespace: text("/metadata/namespace"),
        file: "examples/fleet/flux-operator/resourceset.yaml".into(),
        chain: Vec::new(),
        body: body.clone(),
        previous_ids: Vec::new(),
        applier: None,
        quoted: Default::default(),
        bare_nulls: Default::default(),
    }
}

/// The ResourceSets the fleet ResourceSet generates, then the Jobs those
/// generate, by cluster.
fn expanded() -> (Vec<Value>, Vec<Value>) {
    let fleet = documents("flux-operator/resourceset.yaml");
    assert_eq!(fleet.len(), 1);
    let outer = resourceset::expand(&object(&fleet[0]), &[]);
    assert_eq!(outer.problems, Vec::<String>::new());
    let mut jobs = Vec::new();
    for child in &outer.objects {
        assert!(resourceset::is_resource_set(&object(child)), "{child}");
        let inner = resourceset::expand(&object(child), &[]);
        assert_eq!(inner.problems, Vec::<String>::new());
        jobs.extend(inner.objects);
    }
    (outer.objects, jobs)
}

fn job_for(cluster: &str) -> Value {
    expanded()
        .1
        .into_iter()
        .find(|j| j["metadata"]["name"] == format!("bootstrap-{cluster}"))
        .unwrap()
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_resourceset_waits_for_each_control_plane_then_creates_one_job_per_cluster() {
    let (children, jobs) = expanded();
    let names: Vec<_> = children
        .iter()
        .map(|c| c["metadata"]["name"].clone())
        .collect();
    assert_eq!(
        names,
        json!(["bootstrap-prod-eu-1", "bootstrap-prod-us-1"])
            .as_array()
            .unwrap()
            .clone()
    );
    for (child, cluster) in children.iter().zip(CLUSTERS) {
        let dep = &child["spec"]["dependsOn"][0];
        assert_eq!(dep["kind"], "Cluster");
        assert_eq!(dep["name"], cluster);
        assert_eq!(dep["namespace"], "fleet");
        // flux-operator evaluates readyExpr only with ready: true.
        assert_eq!(dep["ready"], true);
        assert!(
            dep["readyExpr"]
                .as_str()
                .unwrap()
                .contains("status.controlPlaneReady == true")
        );
        assert_eq!(child["spec"]["wait"], true);
    }
    assert_eq!(jobs.len(), 2);
    for cluster in CLUSTERS {
        let job = job_for(cluster);
        assert_eq!(job["kind"], "Job");
        assert_eq!(job["metadata"]["namespace"], "fleet");
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Never", "podFailurePolicy needs it");
        // More than the 30 s bootstrap gives helm after SIGTERM.
        assert!(pod["terminationGracePeriodSeconds"].as_u64().unwrap() > 30);
        let container = &pod["containers"][0];
        assert_eq!(container["name"], "bootstrap");
        let args = strings(&container["args"]);
        assert_eq!(&args[..2], &["apply".to_string(), cluster.to_string()]);
        let volumes = pod["volumes"].as_array().unwrap();
        let kubeconfig = volumes.iter().find(|v| v["name"] == "kubeconfig").unwrap();
        assert_eq!(
            kubeconfig["secret"]["secretName"],
            format!("{cluster}-kubeconfig")
        );
        assert_eq!(
            kubeconfig["secret"]["items"],
            json!([{"key": "value", "path": "value"}])
        );
        let config = volumes.iter().find(|v| v["name"] == "config").unwrap();
        assert_eq!(config["configMap"]["name"], "bootstrap-config");
        assert_eq!(
            config["configMap"]["items"][0],
            json!({"key": format!("clusters_{cluster}_cluster.yaml"), "path": format!("clusters/{cluster}/cluster.yaml")})
        );
    }
}

#[test]
fn the_configmap_holds_exactly_the_example_config_root() {
    let docs = documents("flux-operator/config.yaml");
    let data = docs[0]["data"].as_object().unwrap();
    let root = example("config");
    let mut files = Vec::new();
    collect(&root, &root, &mut files);
    files.sort();
    let keys: Vec<String> = files.iter().map(|f| f.replace('/', "_")).collect();
    assert_eq!(
        data.keys().cloned().collect::<Vec<_>>(),
        keys,
        "regenerate flux-operator/config.yaml"
    );
    for (file, key) in files.iter().zip(&keys) {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        assert_eq!(
            data[key], text,
            "{file}: regenerate flux-operator/config.yaml"
        );
    }
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(root, &path, out);
        } else {
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            out.push(rel);
        }
    }
}

/// A Pod's filesystem as the kubelet lays it out: the ConfigMap and Secret
/// volumes with their `items`, mapped under a temp dir.
struct Pod {
    dir: tempfile::TempDir,
    mounts: Vec<(String, PathBuf)>,
}

impl Pod {
    fn new(cluster: &Cluster, context: &str, pod: &Value, container: &Value) -> Pod {
        let dir = tempfile::tempdir().unwrap();
        let configmap = &documents("flux-operator/config.yaml")[0]["data"];
        let kubeconfig =
            std::fs::read_to_string(cluster.api.write_kubeconfig(dir.path(), context)).unwrap();
        let mut mounts = Vec::new();
        for mount in container["volumeMounts"].as_array().unwrap() {
            let name = mount["name"].as_str().unwrap();
            let at = dir.path().join(format!("volume-{name}"));
            std::fs::create_dir_all(&at).unwrap();
            let volume = pod["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == name)
                .unwrap();
            let (items, source) = if let Some(cm) = volume.get("configMap") {
                (&cm["items"], configmap)
            } else if let Some(secret) = volume.get("secret") {
                // The `<cluster>-kubeconfig` Secret CAPI writes, key `value`.
                assert!(
                    secret["secretName"]
                        .as_str()
                        .unwrap()
                        .ends_with("-kubeconfig")
                );
                (&secret["items"], &json!({"value": kubeconfig}))
            } else {
                (&Value::Null, &Value::Null)
            };
            for item in items.as_array().into_iter().flatten() {
                let text = source[item["key"].as_str().unwrap()]
                    .as_str()
                    .unwrap_or_else(|| panic!("volume {name}: no key {}", item["key"]));
                let file = at.join(item["path"].as_str().unwrap());
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(file, text).unwrap();
            }
            mounts.push((mount["mountPath"].as_str().unwrap().to_string(), at));
        }
        mounts.push((
            "/dev/termination-log".into(),
            dir.path().join("termination-log"),
        ));
        Pod { dir, mounts }
    }

    /// `arg` with a mounted path replaced by where it is here.
    fn map(&self, arg: &str) -> String {
        for (path, at) in &self.mounts {
            if let Some(rest) = arg.strip_prefix(path.as_str()) {
                return format!("{}{rest}", at.display());
            }
        }
        arg.to_string()
    }

    fn termination_message(&self) -> Value {
        let text = std::fs::read_to_string(self.dir.path().join("termination-log")).unwrap();
        assert!(!text.contains('\n') && text.len() <= 4096, "{text}");
        serde_json::from_str(&text).unwrap()
    }
}

/// Runs `args` (a container's argv, paths mapped into `pod`) against
/// `cluster`, with helm resolved like the image's PATH would: the fake helm.
fn run(cluster: &Cluster, pod: &Pod, args: &[String], env: &Value) -> testkit::builder::Output {
    let mut cmd = Command::new(testkit::bootstrap());
    cmd.args(args.iter().map(|a| pod.map(a)))
        .current_dir(pod.dir.path())
        .env_remove("KUBECONFIG")
        .env_remove("CI")
        .env("NO_COLOR", "1")
        .env("BOOTSTRAP_HELM", testkit::fake_helm())
        .env("FAKE_HELM_STATE", cluster.path().join("helm-state"))
        .env("FAKE_HELM_LOG", cluster.path().join("helm.log"))
        .env("FAKE_HELM_SCRIPT", cluster.path().join("script.json"))
        .env("KUBECACHEDIR", cluster.path().join("kubecache"));
    for var in env.as_array().into_iter().flatten() {
        let value = var["value"].as_str().unwrap();
        // HOME=/tmp is the Pod's emptyDir.
        let value = if value == "/tmp" {
            pod.map(value)
        } else {
            value.to_string()
        };
        cmd.env(var["name"].as_str().unwrap(), value);
    }
    let out = cmd.output().unwrap();
    testkit::builder::Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn healthy(cluster: &Cluster) {
    cluster.script(json!({
        "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
        "kube-system/coredns": {"apply_manifests": true, "manifests": [deployment("kube-system", "coredns")]},
    }));
}

/// The action of the Job's podFailurePolicy rule for `code`, if one matches.
fn pod_failure_action(job: &Value, code: i32) -> Option<String> {
    job["spec"]["podFailurePolicy"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|rule| {
            let on = &rule["onExitCodes"];
            on["operator"] == "In" && on["values"].as_array().unwrap().contains(&json!(code))
        })
        .map(|rule| rule["action"].as_str().unwrap().to_string())
}

#[test]
fn the_jobs_argv_bootstraps_a_healthy_cluster_and_a_rerun_converges() {
    let job = job_for("prod-eu-1");
    let pod_spec = &job["spec"]["template"]["spec"];
    let container = &pod_spec["containers"][0];
    let cluster = Cluster::start();
    healthy(&cluster);
    let pod = Pod::new(&cluster, "prod-eu-1-admin@prod-eu-1", pod_spec, container);
    let args = strings(&container["args"]);

    let out = run(&cluster, &pod, &args, &container["env"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let message = pod.termination_message();
    assert_eq!(message["exitCode"], 0);
    assert_eq!(message["clusters"][0]["cluster"], "prod-eu-1");
    assert_eq!(message["clusters"][0]["outcomes"], json!({"installed": 2}));
    let installs = cluster.installs();
    assert_eq!(installs.len(), 2);
    assert!(
        installs
            .iter()
            .all(|c| c.flag("--kube-context") == Some("prod-eu-1-admin@prod-eu-1"))
    );
    // --output json: every stdout line is one JSON event.
    assert!(
        out.stdout
            .lines()
            .all(|l| serde_json::from_str::<Value>(l).is_ok()),
        "{}",
        out.stdout
    );

    // The Job recreated (recreateOnFailure, force) runs the same argv again.
    let again = run(&cluster, &pod, &args, &container["env"]);
    assert_eq!(again.code, 0, "{}\n{}", again.stdout, again.stderr);
    assert_eq!(pod.termination_message()["clusters"][0]["ok"], true);
    assert_eq!(pod_failure_action(&job, 0), None);
}

#[test]
fn a_held_lock_is_retried_and_a_config_error_fails_the_job() {
    let job = job_for("prod-us-1");
    let pod_spec = &job["spec"]["template"]["spec"];
    let container = &pod_spec["containers"][0];
    let args = strings(&container["args"]);

    let cluster = Cluster::start();
    healthy(&cluster);
    cluster.api.insert(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "bootstrap-lock", "namespace": "kube-system",
                     "annotations": {"bootstrap/operation": "apply"}},
        "spec": {"holderIdentity": "bootstrap-prod-us-1-x7k2p pid 1", "leaseDurationSeconds": 30,
                 "acquireTime": testkit::cluster::rfc3339(std::time::SystemTime::now()),
                 "renewTime": testkit::cluster::rfc3339(std::time::SystemTime::now())}
    }));
    let pod = Pod::new(&cluster, "prod-us-1-admin@prod-us-1", pod_spec, container);
    let out = run(&cluster, &pod, &args, &container["env"]);
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(pod.termination_message()["exitCode"], 3);
    assert_eq!(pod_failure_action(&job, 3).as_deref(), Some("Ignore"));
    assert!(cluster.installs().is_empty());

    // A cluster with no directory in the config root: a config error.
    let mut wrong = args.clone();
    wrong[1] = "prod-ap-1".into();
    let out = run(&cluster, &pod, &wrong, &container["env"]);
    assert_eq!(out.code, 2, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(pod.termination_message()["exitCode"], 2);
    assert_eq!(pod_failure_action(&job, 2).as_deref(), Some("FailJob"));
    // 1 is left to backoffLimit.
    assert_eq!(pod_failure_action(&job, 1), None);
}

/// The `bootstrap …` command lines of the workflow's `run:` scripts, with
/// the matrix cluster and the runner's paths substituted.
fn workflow_commands(cluster: &str, temp: &Path) -> Vec<Vec<String>> {
    let docs = documents("github-actions/bootstrap-fleet.yaml");
    let job = &docs[0]["jobs"]["bootstrap"];
    assert_eq!(job["strategy"]["matrix"]["cluster"], json!(CLUSTERS));
    assert_eq!(job["strategy"]["fail-fast"], false);
    assert!(job["strategy"]["max-parallel"].as_u64().is_some());
    let mut commands = Vec::new();
    for step in job["steps"].as_array().unwrap() {
        let Some(script) = step["run"].as_str() else {
            continue;
        };
        for line in script.lines() {
            let line = line.trim();
            if !line.starts_with("bootstrap ") {
                continue;
            }
            let line = line.split(" || ").next().unwrap();
            let line = line
                .replace("\"$CLUSTER\"", cluster)
                .replace("$RUNNER_TEMP", &temp.display().to_string());
            assert!(
                !line.contains('$') && !line.contains('\''),
                "not modelled: {line}"
            );
            commands.push(
                line.split_whitespace()
                    .map(|w| w.trim_matches('"').to_string())
                    .collect(),
            );
        }
    }
    commands
}

#[test]
fn the_workflow_checks_then_applies_each_matrix_cluster() {
    for cluster in CLUSTERS {
        let temp = tempfile::tempdir().unwrap();
        let commands = workflow_commands(cluster, temp.path());
        let names: Vec<_> = commands
            .iter()
            .map(|c| format!("{} {}", c[0], c[1]))
            .collect();
        assert_eq!(names, ["bootstrap check", "bootstrap apply"]);
        for command in &commands {
            bootstrap::cli::Arguments::try_parse_from(command)
                .unwrap_or_else(|e| panic!("{command:?}: {e}"));
        }
    }
    // Run them, the checkout being the example config root.
    let cluster = Cluster::start();
    healthy(&cluster);
    let temp = tempfile::tempdir().unwrap();
    let context = "prod-eu-1-admin@prod-eu-1";
    // Where the workflow's `kubeconfig` step writes it.
    cluster.api.write_kubeconfig(temp.path(), context);
    for command in workflow_commands("prod-eu-1", temp.path()) {
        let out = Command::new(testkit::bootstrap())
            .args(&command[1..])
            .current_dir(example("config"))
            .env_remove("KUBECONFIG")
            .env("NO_COLOR", "1")
            .env("CI", "true")
            .env("BOOTSTRAP_CACHE_DIR", temp.path().join("charts"))
            .env("BOOTSTRAP_HELM", testkit::fake_helm())
            .env("FAKE_HELM_STATE", cluster.path().join("helm-state"))
            .env("FAKE_HELM_LOG", cluster.path().join("helm.log"))
            .env("FAKE_HELM_SCRIPT", cluster.path().join("script.json"))
            .env("KUBECACHEDIR", cluster.path().join("kubecache"))
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{command:?}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(temp.path().join("result.json")).unwrap())
            .unwrap();
    assert_eq!(result["clusters"][0]["outcomes"], json!({"installed": 2}));
}

#[test]
fn the_argo_template_runs_the_job_contract_and_retries_only_1_and_3() {
    let docs = documents("argo/workflowtemplate.yaml");
    let template = docs[0]["spec"]["templates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "bootstrap")
        .unwrap();
    assert_eq!(
        template["retryStrategy"]["expression"],
        "asInt(lastRetry.exitCode) == 1 || asInt(lastRetry.exitCode) == 3"
    );
    // Argo substitutes the parameter in the whole template (volumes included).
    let text = serde_json::to_string(template)
        .unwrap()
        .replace("{{inputs.parameters.cluster}}", "prod-eu-1");
    assert!(!text.contains("{{"), "{text}");
    let pod: Value = serde_json::from_str(&text).unwrap();
    let container = &pod["container"];
    let args = strings(&container["args"]);
    let mut argv = vec!["bootstrap".to_string()];
    argv.extend(args.iter().cloned());
    bootstrap::cli::Arguments::try_parse_from(&argv).unwrap();

    let cluster = Cluster::start();
    healthy(&cluster);
    let fs = Pod::new(&cluster, "prod-eu-1-admin@prod-eu-1", &pod, container);
    let out = run(&cluster, &fs, &args, &container["env"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(fs.termination_message()["clusters"][0]["ok"], true);
}

/// The plain Kubernetes objects (ServiceAccounts, RBAC, the ConfigMap and
/// the Jobs the ResourceSets generate) accepted by the API server's dry run.
#[test]
#[cfg_attr(not(kubectl), ignore = "needs kubectl on PATH (.ci/run installs it)")]
fn the_plain_objects_pass_a_server_side_dry_run() {
    let cluster = Cluster::start();
    let dir = tempfile::tempdir().unwrap();
    let mut objects = documents("flux-operator/rbac.yaml");
    objects.extend(documents("flux-operator/config.yaml"));
    objects.extend(expanded().1);
    let file = dir.path().join("objects.json");
    let stream: Vec<String> = objects.iter().map(Value::to_string).collect();
    std::fs::write(&file, stream.join("\n")).unwrap();
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(["apply", "--dry-run=server", "-f"])
        .arg(&file)
        .output()
        .expect("kubectl");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for expected in [
        "serviceaccount/bootstrap-fleet created (server dry run)",
        "role.rbac.authorization.k8s.io/bootstrap-fleet created (server dry run)",
        "rolebinding.rbac.authorization.k8s.io/bootstrap-fleet created (server dry run)",
        "serviceaccount/bootstrap created (server dry run)",
        "configmap/bootstrap-config created (server dry run)",
        "job.batch/bootstrap-prod-eu-1 created (server dry run)",
        "job.batch/bootstrap-prod-us-1 created (server dry run)",
    ] {
        assert!(stdout.contains(expected), "{expected}\n{stdout}");
    }
    assert!(
        cluster.api.list("batch/v1", "Job").is_empty(),
        "a dry run stores nothing"
    );
}

/// The Containerfile cannot be built here (no container runtime); what it
/// pins is checked against the project: the Rust it builds with is the
/// minimum the workspace declares, the helm it ships is one bootstrap
/// accepts (3.13 or later), and the entrypoint is the binary.
#[test]
fn the_containerfile_pins_what_the_project_requires() {
    let text = std::fs::read_to_string(example("Containerfile")).unwrap();
    let arg = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("ARG {name}=")))
            .unwrap_or_else(|| panic!("ARG {name}"))
            .to_string()
    };
    let manifest = std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap();
    let rust = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .unwrap()
        .trim_matches('"');
    assert_eq!(arg("RUST_VERSION"), rust);
    let helm: Vec<u32> = arg("HELM_VERSION")
        .split('.')
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(helm[0] > 3 || (helm[0] == 3 && helm[1] >= 13), "{helm:?}");
    assert!(text.contains("cargo build --release --locked --bin bootstrap"));
    assert!(text.contains(r#"ENTRYPOINT ["/usr/local/bin/bootstrap"]"#));
    for tool in ["helm", "kubectl", "bootstrap"] {
        assert!(
            text.contains(&format!("/usr/local/bin/{tool} /usr/local/bin/{tool}")),
            "{tool} is not copied into the runtime stage"
        );
    }
}
