//! Section 6, fleets: `bootstrap apply --all` of N clusters, each the shipped
//! infra catalog's DAG against its own loopback API server, in one process
//! (docs/fleet.md). Measured: the makespan against one cluster's alone (the
//! clusters are alike, so the slowest cluster is about one cluster's run),
//! and the process's peak RSS against the 200 MB target.

use super::applyrun::{releases, script};
use super::proc;
use super::stats::ms;
use super::{Mode, verdict};
use testkit::fleet::Fleet;

/// Peak RSS `apply --all` must stay under with 50 clusters.
const RSS_TARGET: u64 = 200 * 1024 * 1024;

fn apply(clusters: usize, catalog: &str, specs: &[super::applyrun::Spec]) -> proc::Measured {
    let names: Vec<String> = (0..clusters).map(|i| format!("c{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let fleet = Fleet::start(&refs);
    fleet.script(script(specs));
    let test = fleet.config(catalog);
    let args: Vec<&str> = if clusters == 1 {
        vec!["apply", "c00", "--output", "json"]
    } else {
        vec!["apply", "--all", "--output", "json"]
    };
    let measured = proc::run(fleet.command(&test, &args));
    assert_eq!(
        measured.code, 0,
        "apply failed\nstdout:\n{}\nstderr:\n{}",
        measured.stdout, measured.stderr
    );
    measured
}

/// The release file of `specs` for a fleet: each cluster's Cilium gets its
/// own ClusterMesh identity (the fleet lints refuse clusters that share one).
pub fn catalog(specs: &[super::applyrun::Spec]) -> String {
    releases(specs).replacen(
        "name: cilium\nnamespace: kube-system\n",
        "name: cilium\nnamespace: kube-system\nvalues: { cluster: { name: \"{{cluster.name}}\", id: \"{{cluster.values.clusterId}}\" } }\n",
        1,
    )
}

pub fn run(mode: Mode) {
    let n = if mode.quick { 3 } else { 50 };
    println!("## 6. Fleets: apply --all\n");
    let specs = super::schedule::infra(0.3).specs;
    let catalog = catalog(&specs);
    println!(
        "{n} clusters x the shipped infra catalog ({} releases, its DAG and rollout hooks; helm times 0.3x the schedule section's), one loopback API server each, all in one process",
        specs.len()
    );
    let single = apply(1, &catalog, &specs);
    let fleet = apply(n, &catalog, &specs);
    let ratio = fleet.wall.as_secs_f64() / single.wall.as_secs_f64();
    println!(
        "  one cluster:   makespan {:.0} ms, peak RSS {:.1} MB, bootstrap CPU {:.0} ms",
        ms(single.wall),
        single.max_rss as f64 / 1e6,
        ms(single.cpu_own)
    );
    println!(
        "  {n} clusters:  makespan {:.0} ms, peak RSS {:.1} MB, bootstrap CPU {:.0} ms, helm CPU {:.0} ms",
        ms(fleet.wall),
        fleet.max_rss as f64 / 1e6,
        ms(fleet.cpu_own),
        ms(fleet.cpu_children)
    );
    println!("  makespan ratio ({n} clusters / one): {ratio:.2}");
    if !mode.quick {
        verdict(
            "peak RSS of apply --all with 50 clusters < 200 MB",
            fleet.max_rss < RSS_TARGET,
            format!("{:.1} MB", fleet.max_rss as f64 / 1e6),
        );
    }
    println!();
}
