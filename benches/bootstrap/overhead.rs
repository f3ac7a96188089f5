//! Section 4, orchestration overhead: CPU time of the `bootstrap` process
//! itself per release, with helm's CPU excluded and waits costing nothing.
//!
//! Method: `proc::run` reads the child's own utime+stime from
//! `/proc/<pid>/stat` while it is an unreaped zombie, so the fake helm
//! processes it ran (its children, counted in cutime/cstime and in any
//! RUSAGE_CHILDREN figure) are not in it. Helm runs with zero delay and the
//! workloads roll out immediately: waiting costs no CPU anyway, this only
//! keeps the run short. The fixed cost of a run (start-up, kube client,
//! preflight, lock) is separated by running two sizes: the marginal figure
//! (difference of CPU / difference of releases) is the per-release cost.

use super::applyrun::{self, Spec};
use super::dag::Dag;
use super::rng::Rng;
use super::stats::{median, ms};
use super::{Mode, verdict};

fn specs(n: usize) -> Vec<Spec> {
    let mut rng = Rng::new(0x0cb0_0000 + n as u64);
    let dag = Dag::random(n, &mut rng);
    (0..n)
        .map(|i| {
            let mut spec = Spec::new(format!("r{i:03}"), "apps", dag.needs[i].clone(), 0);
            // Half of them wait for a workload, as most real releases do.
            if i % 2 == 0 {
                spec.workloads.push(("Deployment", format!("r{i:03}")));
            }
            spec
        })
        .collect()
}

pub fn run(mode: Mode) {
    println!("## 4. Orchestration overhead\n");
    let (small, large) = if mode.quick { (10, 30) } else { (50, 250) };
    let runs = mode.runs(3);
    let mut own = Vec::new();
    for n in [small, large] {
        let specs = specs(n);
        let (mut cpu, mut helm, mut wall) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            let run = applyrun::apply(&specs, 512);
            cpu.push(ms(run.measured.cpu_own));
            helm.push(ms(run.measured.cpu_children));
            wall.push(ms(run.measured.wall));
        }
        let cpu = median(&cpu);
        println!(
            "{n:>4} releases: bootstrap CPU {cpu:>7.0} ms ({:.2} ms/release incl. fixed cost); helm processes' CPU {:>7.0} ms (excluded); wall {:.0} ms",
            cpu / n as f64,
            median(&helm),
            median(&wall)
        );
        own.push((n, cpu));
    }
    let marginal = (own[1].1 - own[0].1) / (own[1].0 - own[0].0) as f64;
    println!(
        "marginal CPU per release: {marginal:.2} ms  (CPU clock-tick resolution: {:.0} ms per run)",
        1000.0 / clk_tck()
    );
    if !mode.quick {
        verdict(
            "CPU per release < 5 ms",
            marginal < 5.0,
            format!("{marginal:.2} ms"),
        );
    }
    println!();
}

fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64
}
