//! Benchmarks that print figures (no timing assertions): planning at scale,
//! schedule efficiency against the critical path, readiness latency and
//! orchestration overhead. Results and method: docs/BENCHMARKS.md.
//!
//! `cargo bench --bench bootstrap` runs everything; `-- --quick` runs small
//! sizes once (what .ci/run does to prove the benchmarks still work); other
//! arguments select sections: `plan`, `flux`, `schedule`, `readiness`, `overhead`,
//! `fleet`, `display`, `chart-cache`, `fixed`, `crds-real`, `latency`.

mod alloc;
mod applyrun;
mod catalog;
mod chart_cache;
mod crds_real;
mod dag;
mod display;
mod fixed;
mod fleet;
mod flux_scan;
mod latency;
mod overhead;
mod plan_scale;
mod proc;
mod readiness;
mod rng;
mod schedule;
mod stats;

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;

#[derive(Debug, Clone, Copy)]
pub struct Mode {
    pub quick: bool,
}

impl Mode {
    /// Repetitions for medians; one in quick mode.
    pub fn runs(self, full: usize) -> usize {
        if self.quick { 1 } else { full }
    }
}

/// The 1, 5 and 15 minute load averages, as /proc/loadavg gives them.
pub fn load_average() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    load.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Prints a target's outcome; never fails the run (the machines are noisy).
pub fn verdict(target: &str, met: bool, figure: String) {
    println!(
        "  [{}] {target}: {figure}",
        if met { "met" } else { "MISSED" }
    );
}

const SECTIONS: [&str; 11] = [
    "plan",
    "flux",
    "schedule",
    "readiness",
    "overhead",
    "fleet",
    "display",
    "chart-cache",
    "fixed",
    "crds-real",
    "latency",
];

fn main() {
    // `cargo bench` passes `--bench`; anything else unknown is a typo.
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some(plan_scale::LOAD_FLAG) => return plan_scale::load_child(&args[1..]),
        Some("--generate") => return generate(&args[1..]),
        _ => {}
    }
    let mode = Mode {
        quick: args.iter().any(|a| a == "--quick"),
    };
    let chosen: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with("--"))
        .collect();
    if let Some(bad) = chosen.iter().find(|a| !SECTIONS.contains(a)) {
        eprintln!("unknown section `{bad}`; sections: {}", SECTIONS.join(", "));
        std::process::exit(2);
    }
    let wanted = |s: &str| chosen.is_empty() || chosen.contains(&s);

    dag::self_check();
    println!(
        "# bootstrap benchmarks ({} mode)\n",
        if mode.quick { "quick" } else { "full" }
    );
    machine();
    if wanted("plan") {
        plan_scale::run(mode);
    }
    if wanted("flux") {
        flux_scan::run(mode);
        flux_scan::check_render(mode);
    }
    if wanted("schedule") {
        schedule::run(mode);
    }
    if wanted("readiness") {
        readiness::run(mode);
    }
    if wanted("overhead") {
        overhead::run(mode);
    }
    if wanted("fleet") {
        fleet::run(mode);
    }
    if wanted("display") {
        display::run(mode);
    }
    if wanted("chart-cache") {
        chart_cache::run(mode);
    }
    if wanted("fixed") {
        fixed::run(mode);
    }
    if wanted("crds-real") {
        crds_real::run(mode);
    }
    if wanted("latency") {
        latency::run(mode);
    }
}

/// `--generate DIR RELEASES CLUSTERS`: writes one generated catalog, e.g.
/// to profile `bootstrap plan c00 --dir DIR` by hand.
fn generate(args: &[String]) {
    let [dir, n, clusters] = args else {
        eprintln!("usage: --generate DIR RELEASES CLUSTERS");
        std::process::exit(2);
    };
    let n: usize = n.parse().expect("RELEASES is a number");
    let clusters: usize = clusters.parse().expect("CLUSTERS is a number");
    let g = catalog::config(std::path::Path::new(dir), n, clusters, plan_scale::seed(n));
    println!(
        "{dir}: {} releases, {} edges, depth {}",
        g.releases, g.edges, g.depth
    );
}

fn machine() {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, m)| m.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gb = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0 / 1024.0);
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let rustc =
        std::process::Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
    println!(
        "machine: {cpus} CPUs, {model}, {mem_gb:.1} GiB RAM; {rustc}; load average {}",
        load_average()
    );
    println!("binaries: {}\n", env!("CARGO_BIN_EXE_bootstrap"));
}
