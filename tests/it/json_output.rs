//! One style for everything `--output json|yaml` prints
//! (docs/design.md#json-shapes): camelCase keys, `schemaVersion` on every
//! document and event, the events as `bootstrap schema events` describes
//! them, a refusal's findings structured, and YAML the same documents.
//! Every check here runs the real binary (the loopback API server and the
//! fake helm for the cluster commands).

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};
use testkit::builder::Test;
use testkit::cluster::{CLUSTER, Cluster, RELEASES, daemonset, dead_lease};
use testkit::fleet::{Fleet, fleet_releases};

fn config() -> Test {
    Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file("releases/core.yaml", RELEASES)
}

/// `test`'s config root with `args` (no cluster).
fn run(test: &Test, args: &[&str]) -> testkit::builder::Output {
    let mut command = test.command();
    command.args(args);
    command.output().unwrap().into()
}

/// Every line of a JSON Lines output, parsed.
fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}\n{stdout}")))
        .collect()
}

/// `bootstrap schema events`: the schema the binary ships.
fn events_schema() -> Value {
    let out = Test::new().args(&["schema", "events"]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

/// The event kinds the schema describes: its `oneOf`, each `$defs` entry
/// with the kind as the `event` constant.
fn schema_kinds(schema: &Value) -> BTreeSet<String> {
    schema["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let name = r["$ref"].as_str().unwrap().trim_start_matches("#/$defs/");
            let kind = schema["$defs"][name]["properties"]["event"]["const"]
                .as_str()
                .unwrap();
            assert_eq!(kind, name);
            kind.to_string()
        })
        .collect()
}

fn validate_all(validator: &jsonschema::Validator, events: &[Value]) {
    for event in events {
        let errors: Vec<String> = validator
            .iter_errors(event)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{event}\nbreaks the schema: {errors:#?}");
    }
}

/// `apply` and `destroy` of one cluster, every event kind they have but
/// the interrupt's and the failures': the CRD phase, a lock taken over (a
/// warning), a rollout waited for (progress, a hook), then `destroy
/// --crds` of the whole cluster (CRDs deleted, what is left behind).
fn apply_then_destroy() -> Vec<Value> {
    let cluster = Cluster::start();
    cluster.script_standard(20);
    cluster.api.insert(dead_lease("bob@ci pid 7"));
    cluster.api.set_rollout(
        "DaemonSet",
        "kube-system",
        "cilium",
        kube_loopback::Rollout::After(Duration::from_millis(800)),
    );
    let test = config();
    let apply = cluster.run(&test, &["apply", "infra", "-o", "json"]);
    assert_eq!(apply.code, 0, "{}\n{}", apply.stdout, apply.stderr);
    let destroy = cluster.run(
        &test,
        &["destroy", "infra", "--yes", "--crds", "-o", "json"],
    );
    assert_eq!(destroy.code, 0, "{}\n{}", destroy.stdout, destroy.stderr);
    let mut events = lines(&apply.stdout);
    events.extend(lines(&destroy.stdout));
    events
}

/// A rollout that never finishes: `release_finished` with diagnostics, a
/// failed `run_finished`.
fn a_rollout_that_times_out() -> Vec<Value> {
    let cluster = Cluster::start();
    cluster.script_standard(20);
    cluster.api.set_rollout(
        "DaemonSet",
        "kube-system",
        "cilium",
        kube_loopback::Rollout::Never,
    );
    cluster.api.insert(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "cilium-4xk2p", "namespace": "kube-system", "labels": {"app": "cilium"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "cilium-agent", "image": "cilium"}]},
        "status": {"phase": "Pending",
                   "containerStatuses": [{"name": "cilium-agent", "ready": false, "restartCount": 3, "image": "cilium", "imageID": "",
                                          "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}}}]}
    }));
    let test = Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file(
            "releases/core.yaml",
            &RELEASES.replace("hooks:\n  postsync:", "timeout: 2s\nhooks:\n  postsync:"),
        );
    let out = cluster.run(&test, &["apply", "infra", "-o", "json"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let events = lines(&out.stdout);
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "release_finished" && e["diagnostics"]["pods"].is_array()),
        "{}",
        out.stdout
    );
    events
}

/// Ctrl-C while helm installs cilium: `interrupting`.
fn an_interrupted_apply() -> Vec<Value> {
    let cluster = Cluster::start();
    cluster.script(json!({
        "*": {"delay_ms": 20},
        "kube-system/cilium": {"delay_ms": 1500, "apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
    }));
    let test = config();
    let mut child = cluster
        .command(&test, &["apply", "infra", "-o", "json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let state = cluster.path().join("helm-state/kube-system__cilium.json");
    let mut exited = false;
    testkit::wait_until("cilium's install to start", || {
        exited = matches!(child.try_wait(), Ok(Some(_)));
        exited || state.exists()
    });
    if exited {
        let out = child.wait_with_output().unwrap();
        panic!(
            "apply ended before cilium's install started:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    lines(&String::from_utf8_lossy(&out.stdout))
}

/// The lock held by another run: `run_failed`.
fn a_locked_apply() -> Vec<Value> {
    let cluster = Cluster::start();
    cluster.script_standard(20);
    cluster
        .api
        .insert(testkit::cluster::live_lease("job-infra-1 pid 1"));
    let out = cluster.run(&config(), &["apply", "infra", "-o", "json"]);
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    lines(&out.stdout)
}

/// Two clusters from one process: every event tagged with its cluster,
/// then `fleet_finished`.
fn a_fleet_apply() -> Vec<Value> {
    let fleet = Fleet::start(&["apps", "infra"]);
    fleet.script(json!({
        "*": {"delay_ms": 20},
        "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
    }));
    let out = fleet.run(
        &fleet.config(&fleet_releases()),
        &["apply", "--all", "-o", "json"],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let events = lines(&out.stdout);
    assert!(
        events[..events.len() - 1]
            .iter()
            .all(|e| e["cluster"].is_string()),
        "{}",
        out.stdout
    );
    events
}

/// A config whose GitOps tree hands `apps/r`, a release bootstrap owns,
/// to a Flux HelmRelease: `apply` refuses before anything changes.
fn flux_conflict() -> Test {
    let release = "name: r\nnamespace: apps\nchart: { oci: oci://example.com/charts/r, version: 1.0.0 }\ncrds: none\n";
    // The Flux Kustomization that reconciles ./apps (the apply suite's).
    let kustomization = super::apply::GITOPS_KS;
    let helm_release = "apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: r
  namespace: apps
spec:
  interval: 10m
  chart:
    spec:
      chart: r
      sourceRef:
        kind: HelmRepository
        name: charts
";
    Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            &format!("{CLUSTER}flux:\n  root: gitops\n  entrypoint: clusters/infra\n"),
        )
        .file("releases/r.yaml", release)
        .file("gitops/clusters/infra/apps.yaml", kustomization)
        .file("gitops/apps/r.yaml", helm_release)
}

fn a_flux_refusal(cluster: &Cluster) -> Vec<Value> {
    let out = cluster.run(&flux_conflict(), &["apply", "infra", "-o", "json"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    lines(&out.stdout)
}

/// Every event kind the schema has is printed by some real run here, and
/// every event printed is valid against the schema (`additionalProperties:
/// false` each): a new event kind, or a new field, without its schema fails.
#[test]
fn every_event_kind_of_real_runs_is_valid_against_the_shipped_schema() {
    let schema = events_schema();
    let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
    let mut events = apply_then_destroy();
    events.extend(a_rollout_that_times_out());
    events.extend(an_interrupted_apply());
    events.extend(a_locked_apply());
    events.extend(a_fleet_apply());
    events.extend(a_flux_refusal(&Cluster::start()));
    validate_all(&validator, &events);
    let seen: BTreeSet<String> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(seen, schema_kinds(&schema));
    // Every event line: `time`, `elapsedMs`, `event`, `schemaVersion` first
    // (after the fleet's `cluster`).
    for event in &events {
        let keys: Vec<&str> = event
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .filter(|k| *k != "cluster" || event["event"] == "run_started")
            .collect();
        assert_eq!(
            keys[..4],
            ["time", "elapsedMs", "event", "schemaVersion"],
            "{event}"
        );
    }
}

/// The summary's `duration` counts from the command's start, and so does
/// every event's `elapsedMs`: the run cannot have taken longer than the
/// time at which its last line says it ended. (It once counted the events
/// from the reporter's start, after loading and the prerequisites.)
#[test]
fn the_summary_never_lasts_longer_than_the_elapsed_time_of_its_line() {
    let cluster = Cluster::start();
    cluster.script_standard(20);
    let out = cluster.run(&config(), &["apply", "infra", "-o", "json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let events = lines(&out.stdout);
    let last = events.last().unwrap();
    assert_eq!(last["event"], "run_finished");
    let duration = last["summary"]["duration"].as_u64().unwrap();
    let elapsed = last["elapsedMs"].as_u64().unwrap();
    assert!(
        duration <= elapsed,
        "duration {duration} > elapsedMs {elapsed}"
    );
    // And the phases add up to no more than the whole.
    let phases = &last["summary"]["phases"];
    let parts: u64 = ["preflight", "crds", "releases"]
        .iter()
        .map(|p| phases[p].as_u64().unwrap())
        .sum();
    assert!(parts <= duration + 2, "{phases} vs {duration}");
}

/// The refusal of the Flux scan keeps its finding as `check -o json`
/// shapes it, in the error JSON's `findings`, and `run_failed` carries it.
#[test]
fn a_flux_refusal_carries_its_findings_structured() {
    let cluster = Cluster::start();
    let events = a_flux_refusal(&cluster);
    let [failed] = &events[..] else {
        panic!("{events:#?}")
    };
    assert_eq!(failed["event"], "run_failed");
    assert_eq!(failed["exitCode"], 1);
    assert_eq!(failed["problems"], json!([]));
    let findings = failed["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{failed}");
    let finding = &findings[0];
    assert_eq!(finding["severity"], "error");
    assert_eq!(finding["code"], "flux-manages-bootstrap-release");
    assert_eq!(finding["release"], "apps/r");
    assert_eq!(
        finding["object"],
        json!({"kind": "HelmRelease", "name": "r", "namespace": "apps", "file": "apps/r.yaml"})
    );
    assert_eq!(
        finding["chain"],
        json!(["clusters/infra/apps.yaml", "apps/r.yaml"])
    );
    // The same finding `check` reports.
    let check = cluster.run(&flux_conflict(), &["check", "infra", "-o", "json"]);
    assert_eq!(check.code, 1, "{}", check.stderr);
    let check: Value = serde_json::from_str(&check.stdout).unwrap();
    let same = check["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "flux-manages-bootstrap-release")
        .unwrap();
    assert_eq!(same, finding);
    // Nothing was installed.
    assert!(cluster.installs().is_empty());
}

/// Keys whose values are data, not shapes of bootstrap's: the user's
/// values, rendered manifests, release ids as keys, a diff's old and new
/// values.
const DATA: [&str; 5] = ["values", "manifests", "needs", "from", "to"];

/// Every key of `value` that holds `_`, with where it is.
fn snake_keys(value: &Value, at: &str, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let here = format!("{at}.{key}");
                if key.contains('_') {
                    found.push(here.clone());
                }
                if !(DATA.contains(&key.as_str()) && inner.is_object()) {
                    snake_keys(inner, &here, found);
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                snake_keys(item, &format!("{at}[{i}]"), found);
            }
        }
        _ => {}
    }
}

/// Every document a command prints with `-o json`, by command line.
fn documents() -> Vec<(String, Value)> {
    let cluster = Cluster::start();
    cluster.script_standard(20);
    let test = config();
    let applied = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(applied.code, 0, "{}\n{}", applied.stdout, applied.stderr);
    let mut documents = Vec::new();
    let commands: [&[&str]; 10] = [
        &["plan", "infra"],
        &["plan", "--all"],
        &["check", "infra", "-v"],
        &["template", "infra"],
        &["graph", "infra"],
        &["diff", "infra"],
        &["status", "infra"],
        &["version"],
        &["runs"],
        &["plan", "nowhere"],
    ];
    for args in commands {
        let mut argv = args.to_vec();
        argv.extend(["-o", "json"]);
        let out = cluster.run(&test, &argv);
        let value: Value = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("{argv:?}: {e}\n{}\n{}", out.stdout, out.stderr));
        documents.push((argv.join(" "), value));
    }
    // With a GitOps tree: the scan's findings and, with -v, its builds.
    let args = ["check", "infra", "-v", "-o", "json"];
    let out = cluster.run(&flux_conflict(), &args);
    documents.push((args.join(" "), serde_json::from_str(&out.stdout).unwrap()));
    documents
}

/// camelCase everywhere (Kubernetes', Flux's and kubectl's convention): no
/// key of any document or event holds `_`, and every document starts with
/// `schemaVersion`.
#[test]
fn no_key_of_any_document_or_event_is_snake_case() {
    let mut found = Vec::new();
    for (command, document) in documents() {
        snake_keys(&document, &command, &mut found);
        let first = document.as_object().unwrap().keys().next().unwrap();
        assert_eq!(first, "schemaVersion", "{command}: {document}");
        assert_eq!(document["schemaVersion"], 1, "{command}");
    }
    let mut events = apply_then_destroy();
    events.extend(a_locked_apply());
    events.extend(a_flux_refusal(&Cluster::start()));
    for event in &events {
        snake_keys(event, &format!("{}", event["event"]), &mut found);
    }
    assert!(found.is_empty(), "snake_case keys: {found:#?}");
}

/// `-o yaml` prints the document `-o json` prints, as YAML: the plan, the
/// error document, and each event of apply as a YAML document of its own.
#[test]
fn yaml_is_the_same_document_as_json() {
    let test = config();
    for args in [["plan", "infra"], ["plan", "nowhere"]] {
        let json = run(&test, &[args[0], args[1], "-o", "json"]);
        let yaml = run(&test, &[args[0], args[1], "-o", "yaml"]);
        assert_eq!(json.code, yaml.code, "{args:?}");
        let from_json: Value = serde_json::from_str(&json.stdout).unwrap();
        let from_yaml: Value = serde_saphyr::from_str(&yaml.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}\n{}", yaml.stdout));
        assert_eq!(from_yaml, from_json, "{args:?}\n{}", yaml.stdout);
    }
    // A usage error too.
    let bad = run(&test, &["plan", "infra", "--bogus", "-o", "yaml"]);
    assert_eq!(bad.code, 2);
    let error: Value = serde_saphyr::from_str(&bad.stdout).unwrap();
    assert_eq!(error["exitCode"], 2, "{}", bad.stdout);

    // apply: one YAML document per event, each valid against the schema.
    let cluster = Cluster::start();
    cluster.script_standard(20);
    let out = cluster.run(&test, &["apply", "infra", "-o", "yaml"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.starts_with("---\n"), "{}", out.stdout);
    let events: Vec<Value> =
        serde_saphyr::from_multiple(&out.stdout).unwrap_or_else(|e| panic!("{e}\n{}", out.stdout));
    assert_eq!(events.first().unwrap()["event"], "run_started");
    assert_eq!(events.last().unwrap()["event"], "run_finished");
    let validator = jsonschema::validator_for(&events_schema()).unwrap();
    validate_all(&validator, &events);
}
