//! The release DAG (petgraph). Edges point from a release to the releases that
//! need it, so a topological order is an execution order.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};

use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};
use serde_json::json;

use crate::release::ReleaseId;

#[derive(Debug, Clone)]
pub struct ReleaseGraph {
    graph: DiGraph<ReleaseId, ()>,
    index: HashMap<ReleaseId, NodeIndex>,
}

/// A dependency circle, in `needs` order, first element repeated at the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle(pub Vec<ReleaseId>);

impl std::fmt::Display for Cycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        write!(f, "{}", names.join(" -> "))
    }
}

impl ReleaseGraph {
    /// `releases`: each release with what it needs. Needs must name releases in
    /// the list (validation guarantees it); unknown ones are ignored here.
    pub fn new<'a>(releases: impl IntoIterator<Item = (&'a ReleaseId, &'a [ReleaseId])>) -> Self {
        let releases: Vec<_> = releases.into_iter().collect();
        let mut graph = DiGraph::with_capacity(releases.len(), releases.len() * 2);
        let mut index = HashMap::with_capacity(releases.len());
        for (id, _) in &releases {
            index.insert((*id).clone(), graph.add_node((*id).clone()));
        }
        for (id, needs) in &releases {
            for need in needs.iter() {
                if let (Some(&from), Some(&to)) = (index.get(need), index.get(*id)) {
                    graph.update_edge(from, to, ());
                }
            }
        }
        ReleaseGraph { graph, index }
    }

    pub fn len(&self) -> usize {
        self.graph.node_count()
    }

    pub fn is_empty(&self) -> bool {
        self.graph.node_count() == 0
    }

    /// Every dependency circle, each reported once, smallest id first.
    pub fn cycles(&self) -> Vec<Cycle> {
        let mut cycles = Vec::new();
        for scc in petgraph::algo::tarjan_scc(&self.graph) {
            let self_loop = scc.len() == 1 && self.graph.contains_edge(scc[0], scc[0]);
            if scc.len() < 2 && !self_loop {
                continue;
            }
            let members: BTreeSet<NodeIndex> = scc.iter().copied().collect();
            let Some(&start) = scc.iter().min_by_key(|&&n| &self.graph[n]) else {
                continue;
            };
            if let Some(path) = self.circle_from(start, &members) {
                cycles.push(Cycle(
                    path.into_iter().map(|n| self.graph[n].clone()).collect(),
                ));
            }
        }
        cycles.sort_by(|a, b| a.0.cmp(&b.0));
        cycles
    }

    /// Walks `needs` edges inside one strongly connected component back to
    /// `start`, preferring the smallest id at each step so output is stable.
    fn circle_from(
        &self,
        start: NodeIndex,
        members: &BTreeSet<NodeIndex>,
    ) -> Option<Vec<NodeIndex>> {
        let mut path = vec![start];
        let mut visited = BTreeSet::from([start]);
        self.dfs(start, start, members, &mut path, &mut visited)
            .then(|| {
                path.push(start);
                path
            })
    }

    fn dfs(
        &self,
        node: NodeIndex,
        start: NodeIndex,
        members: &BTreeSet<NodeIndex>,
        path: &mut Vec<NodeIndex>,
        visited: &mut BTreeSet<NodeIndex>,
    ) -> bool {
        let mut needs: Vec<NodeIndex> = self
            .graph
            .neighbors_directed(node, Direction::Incoming)
            .filter(|n| members.contains(n))
            .collect();
        needs.sort_by_key(|&n| &self.graph[n]);
        for need in needs {
            if need == start {
                return true;
            }
            if visited.insert(need) {
                path.push(need);
                if self.dfs(need, start, members, path, visited) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }

    /// A deterministic execution order: Kahn's algorithm, ties broken by id.
    /// Releases on a cycle are left out (validation rejects cycles first).
    pub fn order(&self) -> Vec<ReleaseId> {
        let mut remaining: Vec<usize> = self
            .graph
            .node_indices()
            .map(|n| {
                self.graph
                    .neighbors_directed(n, Direction::Incoming)
                    .count()
            })
            .collect();
        let mut ready: BinaryHeap<Reverse<(&ReleaseId, NodeIndex)>> = self
            .graph
            .node_indices()
            .filter(|n| remaining[n.index()] == 0)
            .map(|n| Reverse((&self.graph[n], n)))
            .collect();
        let mut order = Vec::with_capacity(self.graph.node_count());
        while let Some(Reverse((id, node))) = ready.pop() {
            order.push(id.clone());
            for next in self.graph.neighbors_directed(node, Direction::Outgoing) {
                remaining[next.index()] -= 1;
                if remaining[next.index()] == 0 {
                    ready.push(Reverse((&self.graph[next], next)));
                }
            }
        }
        order
    }

    /// `ids` plus everything they need, transitively.
    pub fn with_needs<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a ReleaseId>,
    ) -> BTreeSet<ReleaseId> {
        self.closure(ids, Direction::Incoming)
    }

    /// `ids` plus everything that needs them, transitively.
    pub fn with_dependents<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a ReleaseId>,
    ) -> BTreeSet<ReleaseId> {
        self.closure(ids, Direction::Outgoing)
    }

    fn closure<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a ReleaseId>,
        direction: Direction,
    ) -> BTreeSet<ReleaseId> {
        let mut stack: Vec<NodeIndex> = ids
            .into_iter()
            .filter_map(|id| self.index.get(id).copied())
            .collect();
        let mut seen = BTreeSet::new();
        while let Some(node) = stack.pop() {
            if seen.insert(node) {
                stack.extend(self.graph.neighbors_directed(node, direction));
            }
        }
        seen.into_iter().map(|n| self.graph[n].clone()).collect()
    }

    fn edges(&self) -> Vec<(&ReleaseId, &ReleaseId)> {
        let mut edges: Vec<_> = self
            .graph
            .edge_indices()
            .filter_map(|e| self.graph.edge_endpoints(e))
            .map(|(need, dependent)| (&self.graph[need], &self.graph[dependent]))
            .collect();
        edges.sort();
        edges
    }

    /// Graphviz: arrows point from a release to what needs it (execution flow).
    /// DOT; `details` (from `graph -v`) adds a second label line to a node,
    /// e.g. its chart and version.
    pub fn to_dot(&self, cluster: &str, details: &HashMap<ReleaseId, String>) -> String {
        let mut out = format!("digraph \"{cluster}\" {{\n  rankdir=LR;\n  node [shape=box];\n");
        for id in self.order() {
            match details.get(&id) {
                Some(detail) => out.push_str(&format!(
                    "  \"{id}\" [label=\"{id}\\n{}\"];\n",
                    detail.replace('\\', "\\\\").replace('"', "\\\"")
                )),
                None => out.push_str(&format!("  \"{id}\";\n")),
            }
        }
        for (need, dependent) in self.edges() {
            out.push_str(&format!("  \"{need}\" -> \"{dependent}\";\n"));
        }
        out.push_str("}\n");
        out
    }

    /// Mermaid; `details` as for [`Self::to_dot`].
    pub fn to_mermaid(&self, details: &HashMap<ReleaseId, String>) -> String {
        let order = self.order();
        let node_id: HashMap<&ReleaseId, usize> =
            order.iter().enumerate().map(|(i, id)| (id, i)).collect();
        let mut out = String::from("flowchart LR\n");
        for (i, id) in order.iter().enumerate() {
            match details.get(id) {
                Some(detail) => out.push_str(&format!(
                    "  r{i}[\"{id}<br/>{}\"]\n",
                    detail.replace('"', "#quot;")
                )),
                None => out.push_str(&format!("  r{i}[\"{id}\"]\n")),
            }
        }
        for (need, dependent) in self.edges() {
            out.push_str(&format!(
                "  r{} --> r{}\n",
                node_id[need], node_id[dependent]
            ));
        }
        out
    }

    pub fn to_json(&self, cluster: &str) -> serde_json::Value {
        let nodes: Vec<_> = self
            .order()
            .iter()
            .map(|id| json!({"id": id, "name": id.name, "namespace": id.namespace}))
            .collect();
        let edges: Vec<_> = self
            .edges()
            .into_iter()
            .map(|(need, dependent)| json!({"from": need, "to": dependent}))
            .collect();
        json!({"cluster": cluster, "nodes": nodes, "edges": edges})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> ReleaseId {
        ReleaseId::new("ns", name)
    }

    fn graph(spec: &[(&str, &[&str])]) -> ReleaseGraph {
        let owned: Vec<(ReleaseId, Vec<ReleaseId>)> = spec
            .iter()
            .map(|(n, needs)| (id(n), needs.iter().map(|x| id(x)).collect()))
            .collect();
        ReleaseGraph::new(owned.iter().map(|(i, n)| (i, n.as_slice())))
    }

    #[test]
    fn order_respects_needs_and_breaks_ties_by_id() {
        let g = graph(&[
            ("d", &["b", "c"]),
            ("c", &["a"]),
            ("b", &["a"]),
            ("a", &[]),
            ("e", &[]),
        ]);
        let names: Vec<String> = g.order().into_iter().map(|i| i.name).collect();
        assert_eq!(names, ["a", "b", "c", "d", "e"]);
    }

    #[test]
    fn cycle_is_reported_as_the_whole_circle() {
        let g = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"]), ("x", &[])]);
        let cycles = g.cycles();
        assert_eq!(cycles.len(), 1);
        assert_eq!(cycles[0].to_string(), "ns/a -> ns/b -> ns/c -> ns/a");
    }

    #[test]
    fn self_need_is_a_cycle() {
        let g = graph(&[("a", &["a"])]);
        assert_eq!(g.cycles()[0].to_string(), "ns/a -> ns/a");
    }

    #[test]
    fn closures() {
        let g = graph(&[("a", &[]), ("b", &["a"]), ("c", &["b"]), ("x", &[])]);
        let needs: Vec<String> = g
            .with_needs([&id("c")])
            .into_iter()
            .map(|i| i.name)
            .collect();
        assert_eq!(needs, ["a", "b", "c"]);
        let deps: Vec<String> = g
            .with_dependents([&id("a")])
            .into_iter()
            .map(|i| i.name)
            .collect();
        assert_eq!(deps, ["a", "b", "c"]);
    }

    #[test]
    fn dot_and_mermaid_list_every_edge() {
        let g = graph(&[("a", &[]), ("b", &["a"])]);
        let none = HashMap::new();
        assert!(g.to_dot("infra", &none).contains("\"ns/a\" -> \"ns/b\";"));
        assert!(g.to_mermaid(&none).contains("r0 --> r1"));
        let details = HashMap::from([(id("a"), "cilium 1.18.2".to_string())]);
        assert!(
            g.to_dot("infra", &details)
                .contains("\"ns/a\" [label=\"ns/a\\ncilium 1.18.2\"];")
        );
        assert!(
            g.to_mermaid(&details)
                .contains("r0[\"ns/a<br/>cilium 1.18.2\"]")
        );
    }
}
