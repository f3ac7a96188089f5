//! The builds of flux-operator ResourceSets ([`crate::flux::resourceset`]):
//! each is expanded, its objects applied in stages as flux-operator's
//! controller does ([`super::stage`]) and followed like a build's.

use super::{Walker, ns_display, object, stage};
use crate::flux::findings::NOT_MODELLED;
use crate::flux::object::Object;
use crate::flux::resourceset;

impl Walker {
    pub(super) fn expand_resource_set(&mut self, rs: &Object, depth: usize) {
        if depth >= 8 {
            return;
        }
        let providers: Vec<&Object> = self
            .tree
            .objects
            .iter()
            .filter(|o| {
                o.group() == "fluxcd.controlplane.io" && o.kind == "ResourceSetInputProvider"
            })
            .collect();
        let expansion = resourceset::expand(rs, &providers);
        for problem in expansion.problems {
            let message = format!(
                "ResourceSet {}/{} in {}: {problem}; the objects it would generate from this are not checked",
                ns_display(rs.namespace.as_deref()),
                rs.name,
                self.action_line(&rs.file, &problem),
            );
            self.warn(NOT_MODELLED, Some(rs.reference()), &rs.chain, message);
        }
        let by = format!(
            "ResourceSet/{}/{}",
            rs.namespace.as_deref().unwrap_or_default(),
            rs.name
        );
        let objects: Vec<Object> = expansion
            .objects
            .into_iter()
            .filter_map(|body| object(body, &rs.file, &rs.chain))
            .map(|mut o| {
                o.applier = Some(by.clone());
                o
            })
            .collect();
        let (applied, refused) = stage::staged_apply(objects.clone(), stage::RESOURCE_SET_CUSTOM);
        self.record(Some(by), rs.file.clone(), objects, false, refused);
        self.emit(applied, depth + 1);
    }

    /// `file:line` of the first line of `file` holding the `<< … >>` action
    /// a problem quotes, else `file`.
    fn action_line(&self, file: &str, problem: &str) -> String {
        let action = problem
            .split_once("`<< ")
            .and_then(|(_, rest)| rest.split_once(" >>`"))
            .map(|(action, _)| action.trim());
        let text = std::fs::read_to_string(self.root.join(file)).unwrap_or_default();
        let line = action.and_then(|a| text.lines().position(|l| l.contains(a)));
        match line {
            Some(n) => format!("{file}:{}", n + 1),
            None => file.to_string(),
        }
    }
}
