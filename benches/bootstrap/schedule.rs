//! Section 2, schedule efficiency: the makespan of `bootstrap apply` against the
//! critical path of the same DAG and durations, beside a model of helmfile's
//! level-by-level batching.

use super::applyrun::{self, Spec};
use super::dag::Dag;
use super::rng::Rng;
use super::stats::median;
use super::{Mode, verdict};

/// Far above any DAG's width here: the helm cap must not be what we measure.
const CONCURRENCY: usize = 512;

pub(crate) struct Case {
    name: &'static str,
    pub(crate) dag: Dag,
    pub(crate) specs: Vec<Spec>,
}

impl Case {
    fn new(name: &'static str, dag: Dag, specs: Vec<Spec>) -> Case {
        Case { name, dag, specs }
    }

    fn durations(&self) -> Vec<f64> {
        self.specs.iter().map(|s| s.delay_ms as f64).collect()
    }
}

/// The shipped catalog's DAG (repo's clusters/infra + releases/), with its
/// rollout hooks; its condition and kubectl hooks need a real Flux and are
/// left out. Durations are invented but in the catalog's proportions.
pub(crate) fn infra(scale: f64) -> Case {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let plan = bootstrap::config::load(root, "infra").expect("the shipped infra config loads");
    let installed: Vec<_> = plan.installed().collect();
    let index = |id: &bootstrap::release::ReleaseId| installed.iter().position(|r| &r.id == id);
    let mut specs = Vec::new();
    for r in &installed {
        let base = match r.id.name.as_str() {
            "cilium" => 900.0,
            "coredns" => 250.0,
            "spegel" => 300.0,
            "cert-manager" => 600.0,
            "external-secrets" => 450.0,
            "flux-operator" => 400.0,
            "flux-instance" => 700.0,
            _ => 300.0,
        };
        let mut spec = Spec::new(
            r.id.name.clone(),
            &r.id.namespace,
            r.needs.iter().filter_map(index).collect(),
            (base * scale) as u64,
        );
        for hook in r.hooks.postsync.iter().chain(&r.hooks.presync) {
            if let Some(o) = hook.action.workload()
                && o.namespace.as_deref().is_none_or(|ns| ns == r.id.namespace)
            {
                let kind = if o.kind == "DaemonSet" {
                    "DaemonSet"
                } else {
                    "Deployment"
                };
                spec.workloads.push((kind, o.name.clone()));
            }
        }
        specs.push(spec);
    }
    let dag = Dag {
        needs: specs.iter().map(|s| s.needs.clone()).collect(),
    };
    Case::new("shipped infra catalog", dag, specs)
}

fn random(n: usize, lo: u64, hi: u64) -> Case {
    let mut rng = Rng::new(0x00da_6200);
    let dag = Dag::random(n, &mut rng);
    let specs = (0..n)
        .map(|i| {
            Spec::new(
                format!("r{i:03}"),
                "apps",
                dag.needs[i].clone(),
                rng.between(lo, hi),
            )
        })
        .collect();
    Case::new("random DAG", dag, specs)
}

/// One slow release beside `chains` unrelated chains of fast ones whose
/// total is as long as the slow one: batching by level stalls every chain.
fn skewed(chains: usize, length: usize, fast_ms: u64) -> Case {
    let slow = fast_ms * length as u64;
    let mut specs = vec![Spec::new("slow", "apps", vec![], slow)];
    for c in 0..chains {
        for i in 0..length {
            let needs = if i == 0 {
                vec![]
            } else {
                vec![specs.len() - 1]
            };
            specs.push(Spec::new(
                format!("chain{c}-{i:02}"),
                "apps",
                needs,
                fast_ms,
            ));
        }
    }
    let dag = Dag {
        needs: specs.iter().map(|s| s.needs.clone()).collect(),
    };
    Case::new("skewed (1 slow + fast chains)", dag, specs)
}

pub fn run(mode: Mode) {
    println!("## 2. Schedule efficiency\n");
    let runs = mode.runs(3);
    let cases = if mode.quick {
        vec![infra(0.1), random(30, 10, 60), skewed(2, 4, 50)]
    } else {
        vec![infra(1.0), random(200, 20, 300), skewed(8, 15, 100)]
    };
    println!(
        "`bootstrap apply --concurrency {CONCURRENCY}` against the loopback API; each release's duration is the fake helm's delay_ms"
    );
    println!(
        "critical path and level batching are computed from the same delay_ms; 'level model' is a MODEL of helmfile's DAG batching, not a measurement of helmfile"
    );
    println!(
        "'step CP' is the critical path over each release's step duration as bootstrap measured it (helm status + install + hooks + ledger), i.e. with our per-release overhead in it"
    );
    let process = applyrun::helm_process_overhead();
    println!(
        "'helm CP' is the critical path over each release's helm processes as they ran (logged time + {process:.1} ms a process for exec and exit): an ideal runner's floor with the same fake helm, which writes to the API server beyond its delay; the goal is judged against it\n"
    );
    for case in &cases {
        let d = case.durations();
        let cp = case.dag.critical_path(&d);
        let levels = case.dag.level_batched(&d);
        let (mut makespans, mut step_cps, mut overheads) = (Vec::new(), Vec::new(), Vec::new());
        let mut helm_cps = Vec::new();
        for _ in 0..runs {
            let run = applyrun::apply(&case.specs, CONCURRENCY);
            makespans.push(run.makespan_ms());
            helm_cps.push(run.helm_critical_path(&case.specs, &case.dag, process));
            let steps = run.step_ms();
            let step: Vec<f64> = case
                .specs
                .iter()
                .map(|s| steps.get(&s.id()).copied().unwrap_or(f64::NAN))
                .collect();
            step_cps.push(case.dag.critical_path(&step));
            let extra: Vec<f64> = step.iter().zip(&d).map(|(s, d)| s - d).collect();
            overheads.push(median(&extra));
        }
        let makespan = median(&makespans);
        let step_cp = median(&step_cps);
        let helm_cp = median(&helm_cps);
        println!(
            "{} ({} releases, {} edges, depth {}):",
            case.name,
            case.dag.len(),
            case.dag.edges(),
            case.dag.depth()
        );
        println!("  critical path (lower bound)      {cp:>8.0} ms");
        println!(
            "  bootstrap makespan (measured)    {makespan:>8.0} ms   = {:.3} x critical path, +{:.0} ms",
            makespan / cp,
            makespan - cp
        );
        println!(
            "  level model (helmfile batching)  {levels:>8.0} ms   = {:.3} x critical path",
            levels / cp
        );
        println!(
            "  step CP (measured steps)         {step_cp:>8.0} ms   makespan / step CP = {:.3}",
            makespan / step_cp
        );
        println!(
            "  helm CP (helm as it ran)         {helm_cp:>8.0} ms   makespan / helm CP = {:.3}",
            makespan / helm_cp
        );
        println!(
            "  median per-release overhead      {:>8.1} ms   (step duration - delay_ms)",
            median(&overheads)
        );
        if !mode.quick {
            verdict(
                &format!("{}: makespan <= 1.03 x helm CP + 50 ms", case.name),
                makespan <= 1.03 * helm_cp + 50.0,
                format!("{makespan:.0} ms vs {:.0} ms", 1.03 * helm_cp + 50.0),
            );
        }
        println!();
    }
}
