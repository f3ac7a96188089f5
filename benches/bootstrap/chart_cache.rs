//! Section `chart-cache`: how much of a run's makespan chart downloads add
//! beyond the critical path of (install + readiness), on the shipped infra
//! DAG with the fake helm modelling a 1.5 s download
//! (`FAKE_HELM_PULL_DELAY_MS`) and a 1 s install, each workload rolled out
//! 0.3 s after it is written. The shipped CRD phase is kept: cert-manager,
//! external-secrets and flux-operator carry CRDs (`crds: bootstrap`), and
//! three CRD-only charts stand for prometheus-operator-crds,
//! victoria-metrics-operator-crds and cloudnative-pg (the Gateway API
//! release reads a URL and is left out: no network here).
//!
//! Three runs per repetition, each on a fresh cluster:
//! - no cache (`--no-chart-cache`): helm downloads the chart in every
//!   `helm template` and `helm upgrade --install` (the fake charges the
//!   download when given a remote chart), as bootstrap did before the cache;
//! - cold cache: every chart pulled once, in parallel, from preflight on;
//! - warm cache: the same cache again (`--force`, so every release is
//!   installed again): no pull at all.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{Value, json};
use testkit::builder::Test;
use testkit::cluster::crd;

use super::applyrun::{self, Spec};
use super::dag::Dag;
use super::stats::{median, ms};
use super::{Mode, verdict};

const PULL_MS: u64 = 1500;
const INSTALL_MS: u64 = 1000;
const READY_MS: u64 = 300;
const CRD_CARRIERS: [&str; 3] = ["cert-manager", "external-secrets", "flux-operator"];
const CRD_ONLY: [&str; 3] = [
    "prometheus-operator-crds",
    "victoria-metrics-operator-crds",
    "cloudnative-pg",
];

fn specs() -> Vec<Spec> {
    let mut specs = super::schedule::infra(1.0).specs;
    for spec in &mut specs {
        spec.delay_ms = INSTALL_MS;
        spec.rollout = Some(Duration::from_millis(READY_MS));
    }
    specs
}

/// The release file: the infra DAG, each release its own chart, the CRD
/// phase as shipped.
fn releases(specs: &[Spec]) -> String {
    let mut text = applyrun::releases(specs);
    for carrier in CRD_CARRIERS {
        text = text.replace(
            &format!("name: {carrier}, version: 1.0.0 }}\ncrds: chart"),
            &format!("name: {carrier}, version: 1.0.0 }}\ncrds: bootstrap"),
        );
    }
    for name in CRD_ONLY {
        let _ = writeln!(
            text,
            "---\nname: {name}\nnamespace: kube-system\nchart: {{ repo: https://charts.example.com, name: {name}, version: 1.0.0 }}\ncrds: only"
        );
    }
    text
}

fn script(specs: &[Spec]) -> Value {
    let mut script = applyrun::script(specs);
    let carriers = specs
        .iter()
        .filter(|s| CRD_CARRIERS.contains(&s.name.as_str()))
        .map(|s| s.id())
        .chain(CRD_ONLY.iter().map(|name| format!("kube-system/{name}")));
    for (i, id) in carriers.enumerate() {
        let group = format!("g{i}.example.com");
        let crds = json!([crd(&group, "things", "Thing")]);
        match script.get_mut(&id) {
            Some(knobs) => knobs["crds"] = crds,
            None => {
                script[id.as_str()] = json!({ "crds": crds });
            }
        }
    }
    script
}

struct Figures {
    makespan: Vec<f64>,
    pulls: Vec<usize>,
}

fn measure(test: &Test, specs: &[Spec], args: &[&str]) -> (f64, usize) {
    let mut argv = vec!["--concurrency", "16"];
    argv.extend_from_slice(args);
    let run = applyrun::apply_config(test, specs, script(specs), &argv);
    let pulls = run.calls.iter().filter(|c| c.argv[0] == "pull").count();
    (ms(run.measured.wall), pulls)
}

pub fn run(mode: Mode) {
    println!("## chart-cache: downloads off the critical path\n");
    let specs = specs();
    let dag = Dag {
        needs: specs.iter().map(|s| s.needs.clone()).collect(),
    };
    let step: Vec<f64> = specs
        .iter()
        .map(|s| {
            let ready = if s.workloads.is_empty() { 0 } else { READY_MS };
            (s.delay_ms + ready) as f64
        })
        .collect();
    let critical = dag.critical_path(&step);
    let text = releases(&specs);
    let config = || {
        Test::new()
            .file(
                "clusters/infra/cluster.yaml",
                "name: infra\ncontext: admin@infra\n",
            )
            .file("releases/bench.yaml", &text)
            .env("FAKE_HELM_PULL_DELAY_MS", &PULL_MS.to_string())
    };
    let mut none = Figures {
        makespan: Vec::new(),
        pulls: Vec::new(),
    };
    let mut cold = Figures {
        makespan: Vec::new(),
        pulls: Vec::new(),
    };
    let mut warm = Figures {
        makespan: Vec::new(),
        pulls: Vec::new(),
    };
    for _ in 0..mode.runs(3) {
        let (m, p) = measure(&config(), &specs, &["--no-chart-cache"]);
        none.makespan.push(m);
        none.pulls.push(p);
        // One config root, one cache: the warm run reuses the cold run's.
        let test = config();
        let (m, p) = measure(&test, &specs, &[]);
        cold.makespan.push(m);
        cold.pulls.push(p);
        let (m, p) = measure(&test, &specs, &["--force"]);
        warm.makespan.push(m);
        warm.pulls.push(p);
    }
    println!(
        "shipped infra DAG: {} installed releases + {} CRD-only charts, {} charts; pull {PULL_MS} ms, install {INSTALL_MS} ms, readiness {READY_MS} ms",
        specs.len(),
        CRD_ONLY.len(),
        specs.len() + CRD_ONLY.len()
    );
    println!("critical path of (install + readiness): {critical:.0} ms\n");
    println!("| run | makespan (median) | makespan − critical path | / one pull | pulls |");
    println!("|---|---|---|---|---|");
    for (name, f) in [
        ("no cache (--no-chart-cache)", &none),
        ("cold cache", &cold),
        ("warm cache", &warm),
    ] {
        let makespan = median(&f.makespan);
        let gap = makespan - critical;
        println!(
            "| {name} | {makespan:.0} ms | {gap:.0} ms | {:.2} | {} |",
            gap / PULL_MS as f64,
            f.pulls.last().copied().unwrap_or(0)
        );
    }
    println!();
    let gap = median(&cold.makespan) - critical;
    verdict(
        "cold cache: makespan − critical path < one pull + 500 ms",
        gap < (PULL_MS + 500) as f64,
        format!("{gap:.0} ms (limit {} ms)", PULL_MS + 500),
    );
    println!();
}
