//! Section 9, the fixed costs around the scheduler: what a user waits on in
//! every run besides helm and the workloads. The shipped infra catalog's DAG
//! and rollout hooks with a cheap helm (0.1x the schedule section's times),
//! workloads rolling out at once, a warm chart cache (the first run of the
//! same config root fills it and is not counted). Each figure is taken from
//! the run's own JSON events and the fake helm's log, so helm's time is
//! measured, not assumed:
//! - before the first release: from starting `bootstrap` to its first
//!   `helm upgrade --install` (loading, prerequisites, lock, ownership,
//!   lints, ledger, CRD render, CRD phase, guard: what the user waits on
//!   before anything is installed), and the
//!   preflight and CRD phases alone, from their phase events;
//! - a release step beyond helm: the step's duration minus the time its
//!   helm processes ran (what is left is bootstrap: the ledger write, the
//!   readiness watch set-up, the scheduler). The fake helm stamps its own
//!   start and end inside `main`, so a process's exec, start-up and exit
//!   are measured apart in the same run (the same fake helm started from a
//!   plain parent) and counted as helm's; both figures are printed;
//! - the first ledger write: the first release's step cost beyond helm
//!   minus the median of the others' (it creates the ledger, the others
//!   patch it);
//! - makespan ÷ critical path with the schedule section's helm times (a
//!   2.85 s chain, where the goal was set), judged against the floor of
//!   an ideal runner driving the same fake helm: the critical path of each
//!   release's helm processes as they ran in this run (logged time plus a
//!   process's measured exec and exit), since the fake helm's own API
//!   writes beyond its delay are helm's time. The ratio to the critical
//!   path of the delays asked for is printed too, and for the 0.1x chain,
//!   where each step's few milliseconds of fixed cost weigh ten times as
//!   much;
//! - `apply --all` of three clusters: chart pulls per distinct chart.

use std::collections::{BTreeSet, HashMap};

use testkit::fleet::Fleet;

use super::applyrun::{self, Run};
use super::stats::median;
use super::{Mode, verdict};

/// Milliseconds between a phase's start and end events.
fn phase_ms(run: &Run, phase: &str) -> f64 {
    let at = |event: &str| {
        run.events
            .iter()
            .find(|e| e["event"] == event && e["phase"] == phase)
            .and_then(|e| e["elapsedMs"].as_f64())
            .unwrap_or_else(|| panic!("no {event} of {phase}"))
    };
    at("phase_finished") - at("phase_started")
}

/// Milliseconds from starting `bootstrap` to its first `helm upgrade
/// --install` (the fake helm logs Unix ms).
fn before_first_install(run: &Run) -> f64 {
    run.calls
        .iter()
        .filter(|c| c.argv[0] == "upgrade")
        .map(|c| c.start_ms as f64)
        .reduce(f64::min)
        .expect("an install")
        - run.clock.start_unix_ms()
}

/// Each release's step time beyond its helm processes (ms), and the
/// release that finished first.
fn beyond_helm(run: &Run, specs: &[applyrun::Spec]) -> (HashMap<String, f64>, String) {
    let steps = run.step_ms();
    let mut out = HashMap::new();
    for spec in specs {
        let id = spec.id();
        let Some(step) = steps.get(&id) else { continue };
        let helm: f64 = run
            .calls
            .iter()
            .filter(|c| c.argv[0] != "pull" && c.argv[0] != "template")
            .filter(|c| c.positionals().first() == Some(&spec.name))
            .map(|c| c.end_ms.saturating_sub(c.start_ms) as f64)
            .sum();
        out.insert(id, step - helm);
    }
    let first = run
        .events
        .iter()
        .find(|e| e["event"] == "release_finished")
        .and_then(|e| e["release"].as_str())
        .unwrap_or_default()
        .to_string();
    (out, first)
}

pub fn run(mode: Mode) {
    println!("## 9. Fixed costs around the scheduler\n");
    let case = super::schedule::infra(0.1);
    let specs = case.specs.clone();
    let durations: Vec<f64> = specs.iter().map(|s| s.delay_ms as f64).collect();
    let critical = case.dag.critical_path(&durations);
    let test = applyrun::config(&specs);
    // Fills the chart cache; not counted.
    applyrun::apply_config(
        &test,
        &specs,
        applyrun::script(&specs),
        &["--concurrency", "8"],
    );
    let runs = mode.runs(5);
    let mut before = Vec::new();
    let (mut preflight, mut crds, mut step, mut first, mut ratio) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut parts: [Vec<f64>; 4] = Default::default();
    for _ in 0..runs {
        let run = applyrun::apply_config(
            &test,
            &specs,
            applyrun::script(&specs),
            &["--concurrency", "8"],
        );
        preflight.push(phase_ms(&run, "preflight"));
        before.push(before_first_install(&run));
        crds.push(phase_ms(&run, "crds"));
        let (costs, first_id) = beyond_helm(&run, &specs);
        let others: Vec<f64> = costs
            .iter()
            .filter(|(id, _)| **id != first_id)
            .map(|(_, c)| *c)
            .collect();
        let others = median(&others);
        step.push(others);
        first.push(costs.get(&first_id).copied().unwrap_or(0.0) - others);
        ratio.push(run.makespan_ms() / critical);
        for row in run.breakdown(&specs) {
            for (part, value) in parts.iter_mut().zip(row) {
                part.push(value);
            }
        }
    }
    let (preflight, crds, step, first, ratio) = (
        median(&preflight),
        median(&crds),
        median(&step),
        median(&first),
        median(&ratio),
    );
    println!(
        "shipped infra catalog ({} releases), helm 0.1x, warm chart cache; medians of {runs} run(s)",
        specs.len()
    );
    let before = median(&before);
    println!("  before the first release               {before:>8.0} ms");
    println!("  preflight phase                        {preflight:>8.0} ms");
    println!(
        "  CRD phase                              {crds:>8.0} ms    (this catalog's fake charts carry no CRDs: judged in section 10)"
    );
    let process = applyrun::helm_process_overhead();
    let step_raw = step;
    let step = (step_raw - process).max(0.0);
    println!("  release step beyond helm's logged time {step_raw:>8.1} ms    (median)");
    println!(
        "  a helm process beyond its logged time  {process:>8.1} ms    (exec, start-up, exit: the same fake helm started from a plain parent, median of 30)"
    );
    println!(
        "  release step beyond helm (median)      {step:>8.1} ms    (the two above: what bootstrap adds)"
    );
    println!(
        "    of which (medians over releases): before helm {:.1}, around helm {:.1}, hooks {:.1}, after (ledger) {:.1} ms",
        median(&parts[0]),
        median(&parts[1]),
        median(&parts[2]),
        median(&parts[3])
    );
    println!("  first release's extra (ledger create)  {first:>8.1} ms");
    println!(
        "  makespan / critical path, helm 0.1x     {ratio:>8.3}    (critical path {critical:.0} ms from the helm times asked for; not judged: see the module's comment)"
    );
    verdict(
        "preflight (everything before the first release) < 0.5 s",
        before < 500.0,
        format!("{before:.0} ms"),
    );
    verdict(
        "cost per release step beyond helm and the wait < 5 ms",
        step < 5.0,
        format!("{step:.1} ms"),
    );
    verdict(
        "first ledger write off the critical path (first release's extra < 5 ms)",
        first < 5.0,
        format!("{first:.1} ms"),
    );
    // The ratio where the goal was set: the schedule section's helm times.
    let full = super::schedule::infra(1.0);
    let durations: Vec<f64> = full.specs.iter().map(|s| s.delay_ms as f64).collect();
    let full_critical = full.dag.critical_path(&durations);
    let full_test = applyrun::config(&full.specs);
    let (mut asked, mut measured, mut floors) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..mode.runs(5) {
        let run = applyrun::apply_config(
            &full_test,
            &full.specs,
            applyrun::script(&full.specs),
            &["--concurrency", "8"],
        );
        let floor = run.helm_critical_path(&full.specs, &full.dag, process);
        asked.push(run.makespan_ms() / full_critical);
        measured.push(run.makespan_ms() / floor);
        floors.push(floor);
    }
    let (asked, measured, floor) = (median(&asked), median(&measured), median(&floors));
    println!(
        "  makespan / critical path, helm 1x       {asked:>8.3}    (critical path {full_critical:.0} ms from the helm times asked for)"
    );
    println!(
        "  makespan / helm's own critical path     {measured:>8.3}    (critical path {floor:.0} ms: each release's helm processes as they ran, plus {process:.1} ms a process; medians of {})",
        mode.runs(5)
    );
    verdict(
        "release-phase makespan / critical path <= 1.02 (helm 1x, the helm processes as they ran)",
        measured <= 1.02,
        format!("{measured:.3}"),
    );
    pulls(&specs);
    println!();
}

/// `apply --all` over three clusters of the same catalog: pulls per chart.
fn pulls(specs: &[applyrun::Spec]) {
    let fleet = Fleet::start(&["c00", "c01", "c02"]);
    fleet.script(applyrun::script(specs));
    let catalog = super::fleet::catalog(specs);
    let test = fleet.config(&catalog);
    let out = fleet.run(&test, &["apply", "--all", "--output", "json"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let pulled: Vec<String> = fleet
        .helm_calls()
        .into_iter()
        .filter(|c| c.argv[0] == "pull")
        .filter_map(|c| c.positionals().first().cloned())
        .collect();
    let charts: BTreeSet<&String> = pulled.iter().collect();
    println!(
        "  apply --all, 3 clusters, cold cache: {} pulls of {} charts",
        pulled.len(),
        charts.len()
    );
    verdict(
        "apply --all shares one chart pull between clusters",
        pulled.len() == charts.len(),
        format!("{} pulls / {} charts", pulled.len(), charts.len()),
    );
}
