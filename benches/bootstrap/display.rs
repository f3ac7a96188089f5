//! The live display's cost per frame: the pure layout
//! (`bootstrap::reporter::layout`, docs/design.md#the-live-display) of one
//! cluster and of fleets, at 80 and 200 columns. The display redraws every
//! 100 ms, so a frame must cost a small fraction of that.

use std::time::{Duration, Instant};

use bootstrap::reporter::layout::{self, Board, Queued, Row};

use crate::Mode;

/// A cluster mid-run: `releases` releases, a third done, 4 running (one
/// counting a rollout), one waiting for a slot, the rest queued.
fn board(name: &str, releases: usize) -> Board {
    let running = 4.min(releases);
    let done = releases / 3;
    Board {
        cluster: name.to_string(),
        elapsed: Duration::from_millis(12_300),
        total: releases,
        done,
        running: (0..running)
            .map(|i| Row {
                name: format!("kube-system/release-with-a-name-{i}"),
                step: if i == 0 {
                    "rollout DaemonSet/cilium 1/3 ready".into()
                } else {
                    "installing".into()
                },
                elapsed: Duration::from_millis(800 * i as u64),
            })
            .collect(),
        slot: vec!["spegel".into()],
        queued: (done + running..releases)
            .map(|i| Queued {
                name: format!("release-{i}"),
                waiting_on: vec!["release-with-a-name-0".into()],
            })
            .collect(),
        ..Board::default()
    }
}

/// Median microseconds per call of `f` over `n` calls.
fn per_call(n: usize, mut f: impl FnMut() -> usize) -> f64 {
    let mut sink = 0;
    let start = Instant::now();
    for _ in 0..n {
        sink += f();
    }
    std::hint::black_box(sink);
    start.elapsed().as_secs_f64() * 1e6 / n as f64
}

pub fn run(mode: Mode) {
    println!("## Live display: layout per frame\n");
    let n = if mode.quick { 50 } else { 2_000 };
    let single = board("infra", 13);
    let mut worst: f64 = 0.0;
    for cols in [80, 200] {
        let us = per_call(n, || layout::single(&single, cols, 40, 1).len());
        worst = worst.max(us);
        println!("  one cluster, 13 releases, {cols} columns: {us:.1} µs");
    }
    for clusters in [2, 12, 50] {
        let boards: Vec<Board> = (0..clusters)
            .map(|i| board(&format!("cluster-{i:02}"), 13))
            .collect();
        for cols in [80, 200] {
            let us = per_call(n, || layout::fleet(&boards, &[], cols, 40, 1).len());
            worst = worst.max(us);
            println!("  {clusters} clusters × 13 releases, {cols} columns: {us:.1} µs");
        }
    }
    crate::verdict(
        "a frame's layout under 1 ms (1% of the 100 ms redraw interval)",
        worst < 1_000.0,
        format!("worst {worst:.1} µs"),
    );
    println!();
}
