//! Section 3, readiness latency: from the loopback API marking a DaemonSet rolled out
//! to `bootstrap` starting the release that needs it.
//!
//! Both ends are on one clock: the rollout time is an `Instant` in this
//! process (the API server runs here), converted to Unix ms with a
//! (SystemTime, Instant) pair taken together; the start is the Unix ms the
//! dependent's first helm process logged on entry (its `helm status`), so
//! the figure includes that process's exec as well.

use std::time::Duration;

use super::applyrun::{self, Spec};
use super::stats::{median, percentile};
use super::{Mode, verdict};

pub fn run(mode: Mode) {
    println!("## 3. Readiness latency\n");
    let (pairs, runs) = if mode.quick { (3, 1) } else { (12, 2) };
    // Pairs `ds-i` (a DaemonSet, postsync rollout hook) <- `user-i`; the
    // rollouts finish at staggered times so each sample is mostly alone.
    let mut specs = Vec::new();
    for i in 0..pairs {
        let mut ds = Spec::new(format!("ds-{i:02}"), "kube-system", vec![], 0);
        ds.workloads.push(("DaemonSet", format!("ds-{i:02}")));
        ds.rollout = Some(Duration::from_millis(150 + 45 * i as u64));
        specs.push(ds);
        specs.push(Spec::new(
            format!("user-{i:02}"),
            "apps",
            vec![specs.len() - 1],
            0,
        ));
    }
    let mut samples = Vec::new();
    for _ in 0..runs {
        let run = applyrun::apply(&specs, 64);
        for pair in specs.chunks(2) {
            let (ds, user) = (&pair[0], &pair[1]);
            let done = run
                .cluster
                .api
                .rollout_completed_at("DaemonSet", &ds.namespace, &ds.name)
                .expect("the DaemonSet rolled out");
            let started = run.first_helm_start(user).expect("the dependent ran helm");
            samples.push(started - run.clock.unix_ms(done));
        }
    }
    let (p50, p99) = (median(&samples), percentile(&samples, 99.0));
    println!(
        "{} samples ({pairs} DaemonSet -> dependent pairs x {runs} runs): p50 {p50:.1} ms, p99 {p99:.1} ms, min {:.1} ms, max {:.1} ms",
        samples.len(),
        percentile(&samples, 0.0),
        percentile(&samples, 100.0)
    );
    if !mode.quick {
        verdict(
            "readiness p50 < 100 ms",
            p50 < 100.0,
            format!("{p50:.1} ms"),
        );
        verdict(
            "readiness p99 < 500 ms",
            p99 < 500.0,
            format!("{p99:.1} ms"),
        );
    }
    println!();
}
