//! Runs `bootstrap apply` on a described set of releases against the
//! loopback API server and the fake helm, and collects what the benchmarks
//! measure: the JSON event stream, the fake helm's log and process figures.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kube_loopback::Rollout;
use serde_json::{Value, json};
use testkit::builder::Test;
use testkit::cluster::{Cluster, HelmCall, daemonset, deployment};

use super::proc::{self, Measured};
use super::stats::median;

/// One release of a benchmark run.
#[derive(Debug, Clone)]
pub struct Spec {
    pub name: String,
    pub namespace: String,
    /// Indices into the same list.
    pub needs: Vec<usize>,
    /// How long the fake helm's install takes.
    pub delay_ms: u64,
    /// Workloads the install creates, each waited for by a postsync rollout hook.
    pub workloads: Vec<(&'static str, String)>,
    /// When the loopback API marks those workloads rolled out.
    pub rollout: Option<Duration>,
}

impl Spec {
    pub fn new(name: impl Into<String>, namespace: &str, needs: Vec<usize>, delay_ms: u64) -> Spec {
        Spec {
            name: name.into(),
            namespace: namespace.to_string(),
            needs,
            delay_ms,
            workloads: Vec::new(),
            rollout: None,
        }
    }

    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Converts the API server's `Instant`s to the Unix milliseconds the fake
/// helm logs: one (SystemTime, Instant) pair taken together at the start.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    unix_ms: f64,
    at: Instant,
}

impl Clock {
    pub fn now() -> Clock {
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Clock {
            unix_ms: unix.as_secs_f64() * 1000.0,
            at: Instant::now(),
        }
    }

    /// Unix ms when the clock was taken (just before the process started).
    pub fn start_unix_ms(&self) -> f64 {
        self.unix_ms
    }

    pub fn unix_ms(&self, instant: Instant) -> f64 {
        if instant >= self.at {
            self.unix_ms + (instant - self.at).as_secs_f64() * 1000.0
        } else {
            self.unix_ms - (self.at - instant).as_secs_f64() * 1000.0
        }
    }
}

pub struct Run {
    pub cluster: Cluster,
    pub clock: Clock,
    pub measured: Measured,
    pub events: Vec<Value>,
    pub calls: Vec<HelmCall>,
}

impl Run {
    /// Release phase, from its start event to its end event (ms).
    pub fn makespan_ms(&self) -> f64 {
        let at = |name: &str| {
            self.events
                .iter()
                .find(|e| e["event"] == name && e["phase"] == "releases")
                .and_then(|e| e["elapsedMs"].as_f64())
                .expect("release phase events")
        };
        at("phase_finished") - at("phase_started")
    }

    /// Each release's step duration as the scheduler measured it (ms).
    pub fn step_ms(&self) -> HashMap<String, f64> {
        self.events
            .iter()
            .filter(|e| e["event"] == "release_finished")
            .filter_map(|e| Some((e["release"].as_str()?.to_string(), e["duration"].as_f64()?)))
            .collect()
    }

    /// The floor of a run's release phase: the critical path of the chain
    /// with each release taking exactly the time its helm processes took in
    /// this run (their logged times, plus `process` ms each for exec, start-up
    /// and exit), as an ideal runner using the same fake helm and API server
    /// would take it. The fake helm does real work beyond the delay it is told
    /// to take (it writes the release Secret and the chart's objects to the API
    /// server), which is helm's time, not bootstrap's.
    pub fn helm_critical_path(&self, specs: &[Spec], dag: &super::dag::Dag, process: f64) -> f64 {
        let durations: Vec<f64> = specs
            .iter()
            .map(|spec| {
                self.calls
                    .iter()
                    .filter(|c| matches!(c.argv[0].as_str(), "upgrade" | "install" | "status"))
                    .filter(|c| c.positionals().first() == Some(&spec.name))
                    .map(|c| c.end_ms.saturating_sub(c.start_ms) as f64 + process)
                    .sum()
            })
            .collect();
        dag.critical_path(&durations)
    }

    /// Where a release step's time beyond helm goes, per release (ms), from
    /// the run's events alone: before helm (the check, its chart, a slot: from
    /// `release_started` to the `installing` step), around helm (the install
    /// step minus helm's own time: values file, process start and end, its
    /// output read), the hooks (their own durations: the readiness watches
    /// with workloads that roll out at once) and after them (from the last
    /// hook's end, or helm's, to `release_finished`: the ledger record).
    pub fn breakdown(&self, specs: &[Spec]) -> Vec<[f64; 4]> {
        let run = self;
        let at = |release: &str, pick: &dyn Fn(&serde_json::Value) -> bool| -> Vec<f64> {
            run.events
                .iter()
                .filter(|e| e["release"] == release && pick(e))
                .filter_map(|e| e["elapsedMs"].as_f64())
                .collect()
        };
        let mut out = Vec::new();
        for spec in specs {
            let id = spec.id();
            let started = at(&id, &|e| e["event"] == "release_started");
            let installing = at(&id, &|e| {
                e["event"] == "release_step" && e["step"] == "installing"
            });
            let hook_started = at(&id, &|e| {
                e["event"] == "release_step" && e["step"] == "hook"
            });
            let hook_finished = at(&id, &|e| e["event"] == "hook_finished");
            let finished = at(&id, &|e| e["event"] == "release_finished");
            let hooks: f64 = run
                .events
                .iter()
                .filter(|e| e["release"] == id.as_str() && e["event"] == "hook_finished")
                .filter_map(|e| e["duration"].as_f64())
                .sum();
            let helm: f64 = run
                .calls
                .iter()
                .filter(|c| c.argv[0] == "upgrade")
                .filter(|c| c.positionals().first() == Some(&spec.name))
                .map(|c| c.end_ms.saturating_sub(c.start_ms) as f64)
                .sum();
            let (Some(started), Some(installing), Some(finished)) =
                (started.first(), installing.first(), finished.last())
            else {
                continue;
            };
            let helm_done = hook_started.first().copied().unwrap_or(*finished);
            let after_from = hook_finished.last().copied().unwrap_or(helm_done);
            out.push([
                installing - started,
                helm_done - installing - helm,
                hooks,
                finished - after_from,
            ]);
        }
        out
    }

    /// Unix ms when the first helm process of `spec`'s release step (its
    /// `helm status`, or its install) started. The CRD phase's `helm
    /// template` of the release runs long before and is not its step.
    pub fn first_helm_start(&self, spec: &Spec) -> Option<f64> {
        self.calls
            .iter()
            .filter(|c| {
                matches!(
                    c.argv.first().map(String::as_str),
                    Some("status" | "upgrade" | "install")
                )
            })
            .filter(|c| c.argv.contains(&spec.name))
            .map(|c| c.start_ms as f64)
            .reduce(f64::min)
    }
}

pub fn config(specs: &[Spec]) -> Test {
    Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            "name: infra\ncontext: admin@infra\n",
        )
        .file("releases/bench.yaml", &releases(specs))
}

/// The release file of `specs`.
pub fn releases(specs: &[Spec]) -> String {
    let mut releases = String::new();
    for spec in specs {
        let _ = writeln!(
            releases,
            "---\nname: {}\nnamespace: {}\nchart: {{ repo: https://charts.example.com, name: {}, version: 1.0.0 }}\ncrds: chart",
            spec.name, spec.namespace, spec.name
        );
        if !spec.needs.is_empty() {
            let needs: Vec<String> = spec.needs.iter().map(|&n| specs[n].id()).collect();
            let _ = writeln!(releases, "needs: [{}]", needs.join(", "));
        }
        if !spec.workloads.is_empty() {
            releases.push_str("hooks:\n  postsync:\n");
            for (kind, name) in &spec.workloads {
                let _ = writeln!(releases, "    - rollout: {{ kind: {kind}, name: {name} }}");
            }
        }
    }
    releases
}

/// The fake helm's script for `specs` (delays, the workloads each install
/// creates).
pub fn script(specs: &[Spec]) -> Value {
    let mut script = serde_json::Map::new();
    script.insert("*".into(), json!({"delay_ms": 0}));
    for spec in specs {
        let mut knobs = json!({"delay_ms": spec.delay_ms});
        if !spec.workloads.is_empty() {
            let manifests: Vec<Value> = spec
                .workloads
                .iter()
                .map(|(kind, name)| match *kind {
                    "DaemonSet" => daemonset(&spec.namespace, name),
                    _ => deployment(&spec.namespace, name),
                })
                .collect();
            knobs["apply_manifests"] = json!(true);
            knobs["manifests"] = json!(manifests);
        }
        script.insert(spec.id(), knobs);
    }
    Value::Object(script)
}

/// Applies `specs` with `--concurrency concurrency` and waits for the end.
pub fn apply(specs: &[Spec], concurrency: usize) -> Run {
    let concurrency = concurrency.to_string();
    apply_config(
        &config(specs),
        specs,
        script(specs),
        &["--concurrency", &concurrency],
    )
}

/// Applies the config root `test` (whose releases include `specs`) on a
/// fresh loopback cluster with the fake helm's `script`, the rollouts of
/// `specs`, and `args` after `apply infra --output json`.
pub fn apply_config(test: &Test, specs: &[Spec], script: Value, args: &[&str]) -> Run {
    let cluster = Cluster::start();
    for spec in specs {
        if let Some(after) = spec.rollout {
            for (kind, name) in &spec.workloads {
                cluster
                    .api
                    .set_rollout(kind, &spec.namespace, name, Rollout::After(after));
            }
        }
    }
    cluster.script(script);
    let mut argv = vec!["apply", "infra", "--output", "json"];
    argv.extend_from_slice(args);
    let cmd = cluster.command(test, &argv);
    let clock = Clock::now();
    let measured = proc::run(cmd);
    assert_eq!(
        measured.code, 0,
        "apply failed\nstdout:\n{}\nstderr:\n{}",
        measured.stdout, measured.stderr
    );
    let events = measured
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let calls = cluster.helm_calls();
    Run {
        cluster,
        clock,
        measured,
        events,
        calls,
    }
}

/// What a helm process costs beyond the time the fake helm logs (it stamps
/// its start and end inside `main`): exec, start-up, its output and log
/// written, exit. Measured in this run by starting the same fake helm from
/// a plain parent, `helm version` 30 times, wall time minus logged time
/// (median, ms). It belongs to helm, not to bootstrap's step.
pub fn helm_process_overhead() -> f64 {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("helm.log");
    let mut walls = Vec::new();
    for _ in 0..30 {
        let start = std::time::Instant::now();
        let status = std::process::Command::new(testkit::fake_helm())
            .arg("version")
            .env("FAKE_HELM_LOG", &log)
            .env("FAKE_HELM_STATE", dir.path().join("state"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("run the fake helm");
        assert!(status.success(), "fake helm version failed");
        walls.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    let logged: Vec<f64> = std::fs::read_to_string(&log)
        .expect("the fake helm's log")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|e| Some((e["end_ms"].as_f64()? - e["start_ms"].as_f64()?).max(0.0)))
        .collect();
    assert_eq!(logged.len(), walls.len(), "one log line per call");
    let beyond: Vec<f64> = walls.iter().zip(&logged).map(|(w, l)| w - l).collect();
    median(&beyond)
}
