//! Random release DAGs and the two schedule figures computed from them: the
//! critical path (a lower bound for any scheduler) and the makespan of
//! helmfile's level-by-level batching (a model of its documented algorithm).

use super::rng::Rng;

/// Node `i` may only need nodes `< i`, so every generated graph is acyclic.
#[derive(Debug, Clone)]
pub struct Dag {
    pub needs: Vec<Vec<usize>>,
}

impl Dag {
    /// About two needs per node on average, mixing three shapes: the previous
    /// node (long chains), one of a few hubs (wide fans) and any earlier node.
    pub fn random(n: usize, rng: &mut Rng) -> Dag {
        let hub_every = 40;
        let mut needs = Vec::with_capacity(n);
        for i in 0..n {
            let count = match rng.below(100) {
                0..10 => 0,
                10..35 => 1,
                35..70 => 2,
                70..90 => 3,
                _ => 4 + rng.below(2),
            };
            let mut mine: Vec<usize> = Vec::new();
            if i > 0 {
                for _ in 0..count {
                    let need = match rng.below(100) {
                        0..30 => i - 1,
                        30..50 => (rng.below(i.div_ceil(hub_every)) * hub_every).min(i - 1),
                        _ => rng.below(i),
                    };
                    mine.push(need);
                }
            }
            mine.sort_unstable();
            mine.dedup();
            needs.push(mine);
        }
        Dag { needs }
    }

    pub fn len(&self) -> usize {
        self.needs.len()
    }

    pub fn edges(&self) -> usize {
        self.needs.iter().map(Vec::len).sum()
    }

    /// Nodes in an order where needs come first (the generators all produce
    /// one already, but hand-built DAGs need not).
    fn topo(&self) -> Vec<usize> {
        let n = self.len();
        let mut indegree: Vec<usize> = self.needs.iter().map(Vec::len).collect();
        let mut dependents = vec![Vec::new(); n];
        for (i, needs) in self.needs.iter().enumerate() {
            for &need in needs {
                dependents[need].push(i);
            }
        }
        let mut order: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
        let mut next = 0;
        while next < order.len() {
            let node = order[next];
            next += 1;
            for &d in &dependents[node] {
                indegree[d] -= 1;
                if indegree[d] == 0 {
                    order.push(d);
                }
            }
        }
        assert_eq!(order.len(), n, "the DAG has a cycle");
        order
    }

    /// Level of each node: 0 without needs, else 1 + the deepest need.
    pub fn levels(&self) -> Vec<usize> {
        let mut level = vec![0; self.len()];
        for node in self.topo() {
            level[node] = self.needs[node]
                .iter()
                .map(|&n| level[n] + 1)
                .max()
                .unwrap_or(0);
        }
        level
    }

    /// Longest path, summing each node's duration.
    pub fn critical_path(&self, duration: &[f64]) -> f64 {
        let mut finish = vec![0.0f64; self.len()];
        for node in self.topo() {
            let start = self.needs[node]
                .iter()
                .map(|&n| finish[n])
                .fold(0.0, f64::max);
            finish[node] = start + duration[node];
        }
        finish.into_iter().fold(0.0, f64::max)
    }

    /// helmfile's DAG mode: releases are grouped by level and each group
    /// starts only when the whole previous group is done.
    pub fn level_batched(&self, duration: &[f64]) -> f64 {
        let levels = self.levels();
        let depth = levels.iter().copied().max().map_or(0, |d| d + 1);
        let mut slowest = vec![0.0f64; depth];
        for (node, &level) in levels.iter().enumerate() {
            slowest[level] = slowest[level].max(duration[node]);
        }
        slowest.iter().sum()
    }

    pub fn depth(&self) -> usize {
        self.levels().into_iter().max().map_or(0, |d| d + 1)
    }
}

/// Checks the two figures on a DAG small enough to work out by hand; run
/// at the start of every benchmark run so a broken model cannot go unnoticed.
pub fn self_check() {
    // a(3) -> b(1) -> d(1); c(4) alone.
    let dag = Dag {
        needs: vec![vec![], vec![0], vec![], vec![1]],
    };
    let d = [3.0, 1.0, 4.0, 1.0];
    assert_eq!(dag.critical_path(&d), 5.0);
    // Levels: {a, c} = 4, {b} = 1, {d} = 1.
    assert_eq!(dag.level_batched(&d), 6.0);
    assert_eq!(dag.depth(), 3);
}
