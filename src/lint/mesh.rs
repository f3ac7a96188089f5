//! Rules across clusters (docs/design.md#lints): Cilium ClusterMesh needs
//! each cluster to have its own id, its own name, its own pod addresses and
//! its own load-balancer IPs. They run when the config root defines more
//! than one cluster, over the clusters that install Cilium; each cluster in
//! a clash gets its own finding, at its own value.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::cilium::cilium_releases;
use super::locate::{Location, locate};
use super::{Hit, get, text};
use crate::plan::Plan;
use crate::release::Release;

pub(super) const CLUSTER_ID_INVALID: &str = "cilium-cluster-id-invalid";
pub(super) const CLUSTER_ID_DUPLICATE: &str = "cilium-cluster-id-duplicate";
pub(super) const CLUSTER_NAME_MISMATCH: &str = "cilium-cluster-name-mismatch";
pub(super) const NATIVE_ROUTING_CIDR_OVERLAP: &str = "cilium-native-routing-cidr-overlap";
pub(super) const LB_IPAM_IP_REUSED: &str = "cilium-lb-ipam-ip-reused";

const LB_IPAM_ANNOTATION: &str = "io.cilium/lb-ipam-ips";

/// Each cluster's first Cilium release.
fn ciliums<'a>(plans: &[&'a Plan]) -> Vec<(&'a str, &'a Release)> {
    plans
        .iter()
        .filter_map(|p| {
            cilium_releases(p)
                .next()
                .map(|r| (p.cluster.name.as_str(), r))
        })
        .collect()
}

/// Cilium's `cluster.id` (default 0).
fn cluster_id(release: &Release) -> Option<u64> {
    match get(release.values(), &["cluster", "id"]) {
        None | Some(Value::Null) => Some(0),
        v => text(v)?.parse().ok(),
    }
}

fn others(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `cluster.id` within 1–255, or 1–511 with `clustermesh.maxConnectedClusters: 511`.
pub(super) fn cluster_id_invalid(plans: &[&Plan]) -> Vec<(String, Hit)> {
    let all = ciliums(plans);
    if all.len() < 2 {
        return Vec::new();
    }
    let mut hits = Vec::new();
    for (cluster, release) in all {
        let extended = text(get(
            release.values(),
            &["clustermesh", "maxConnectedClusters"],
        ))
        .is_some_and(|v| v == "511");
        let max = if extended { 511 } else { 255 };
        let id = cluster_id(release);
        if id.is_some_and(|id| (1..=max).contains(&id)) {
            continue;
        }
        let shown =
            text(get(release.values(), &["cluster", "id"])).unwrap_or_else(|| "unset (0)".into());
        hits.push((
            cluster.to_string(),
            Hit {
                release: Some(release.id.clone()),
                at: Some(locate(release, &["cluster", "id"])),
                message: format!(
                    "Cilium `cluster.id` is {shown} on cluster `{cluster}`; with more than one cluster it must be a number from 1 to {max}{}, or ClusterMesh cannot tell the clusters' identities apart",
                    if extended { "" } else { " (511 with `clustermesh.maxConnectedClusters: 511`)" }
                ),
                fix: format!("set `cluster.id` to a number from 1 to {max} that no other cluster uses"),
            },
        ));
    }
    hits
}

/// Two clusters with the same `cluster.id`.
pub(super) fn cluster_id_duplicate(plans: &[&Plan]) -> Vec<(String, Hit)> {
    let all = ciliums(plans);
    let mut hits = Vec::new();
    for (cluster, release) in &all {
        let Some(id) = cluster_id(release).filter(|id| *id != 0) else {
            continue;
        };
        let same: Vec<&str> = all
            .iter()
            .filter(|(c, r)| c != cluster && cluster_id(r) == Some(id))
            .map(|(c, _)| *c)
            .collect();
        if same.is_empty() {
            continue;
        }
        hits.push((
            cluster.to_string(),
            Hit {
                release: Some(release.id.clone()),
                at: Some(locate(release, &["cluster", "id"])),
                message: format!(
                    "Cilium `cluster.id: {id}` on cluster `{cluster}` is also the id of {}; identities and pod addresses of meshed clusters would collide",
                    others(&same)
                ),
                fix: "give every cluster its own `cluster.id` (e.g. from `cluster.values` in each cluster.yaml)".into(),
            },
        ));
    }
    hits
}

/// Cilium's `cluster.name` must equal the cluster's name (its directory),
/// which also makes it unique.
pub(super) fn cluster_name_mismatch(plans: &[&Plan]) -> Vec<(String, Hit)> {
    let all = ciliums(plans);
    if all.len() < 2 {
        return Vec::new();
    }
    let name_of = |r: &Release| {
        text(get(r.values(), &["cluster", "name"])).unwrap_or_else(|| "default".into())
    };
    let mut hits = Vec::new();
    for (cluster, release) in &all {
        let name = name_of(release);
        if name == *cluster {
            continue;
        }
        let same: Vec<&str> = all
            .iter()
            .filter(|(c, r)| c != cluster && name_of(r) == name)
            .map(|(c, _)| *c)
            .collect();
        hits.push((
            cluster.to_string(),
            Hit {
                release: Some(release.id.clone()),
                at: Some(locate(release, &["cluster", "name"])),
                message: format!(
                    "Cilium `cluster.name` is `{name}` on cluster `{cluster}`{}; ClusterMesh names each cluster by it, so it must be unique and should be the cluster's own name",
                    if same.is_empty() {
                        String::new()
                    } else {
                        format!(", the same as on {}", others(&same))
                    }
                ),
                fix: "set `cluster.name: \"{{cluster.name}}\"`".into(),
            },
        ));
    }
    hits
}

/// An IPv4 CIDR as (network, prefix length).
pub(super) fn cidr(text: &str) -> Option<(u32, u32)> {
    let (addr, len) = text.trim().split_once('/')?;
    let addr: Ipv4Addr = addr.parse().ok()?;
    let len: u32 = len.parse().ok().filter(|l| *l <= 32)?;
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    Some((u32::from(addr) & mask, len))
}

/// `inner` lies wholly inside `outer`.
pub(super) fn contains(outer: (u32, u32), inner: (u32, u32)) -> bool {
    inner.1 >= outer.1 && overlap(outer, inner)
}

fn overlap(a: (u32, u32), b: (u32, u32)) -> bool {
    let len = a.1.min(b.1);
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    a.0 & mask == b.0 & mask
}

/// The pod address ranges a Cilium release routes: `ipv4NativeRoutingCIDR`
/// and cluster-pool IPAM's `ipam.operator.clusterPoolIPv4PodCIDRList`.
fn pod_cidrs(release: &Release) -> Vec<(String, Vec<&'static str>)> {
    let mut out = Vec::new();
    if let Some(c) = text(release.values().get("ipv4NativeRoutingCIDR")) {
        out.push((c, vec!["ipv4NativeRoutingCIDR"]));
    }
    let pool = ["ipam", "operator", "clusterPoolIPv4PodCIDRList"];
    match get(release.values(), &pool) {
        Some(Value::Array(list)) => out.extend(
            list.iter()
                .filter_map(|v| text(Some(v)))
                .map(|c| (c, pool.to_vec())),
        ),
        Some(Value::String(s)) => {
            out.extend(s.split(',').map(|c| (c.trim().to_string(), pool.to_vec())))
        }
        _ => {}
    }
    out
}

/// Pod CIDRs of two clusters that overlap: routes between meshed clusters
/// would be ambiguous.
pub(super) fn native_routing_cidr_overlap(plans: &[&Plan]) -> Vec<(String, Hit)> {
    let all = ciliums(plans);
    let mut hits = Vec::new();
    for (cluster, release) in &all {
        for (mine, path) in pod_cidrs(release) {
            let Some(a) = cidr(&mine) else { continue };
            let clashes: Vec<String> = all
                .iter()
                .filter(|(c, _)| c != cluster)
                .flat_map(|(c, r)| {
                    pod_cidrs(r)
                        .into_iter()
                        .filter(|(theirs, _)| cidr(theirs).is_some_and(|b| overlap(a, b)))
                        .map(move |(theirs, _)| format!("{theirs} of `{c}`"))
                })
                .collect();
            if clashes.is_empty() {
                continue;
            }
            hits.push((
                cluster.to_string(),
                Hit {
                    release: Some(release.id.clone()),
                    at: Some(locate(release, &path)),
                    message: format!(
                        "pod CIDR {mine} (`{}`) of cluster `{cluster}` overlaps {}; clusters that mesh route each other's pod CIDRs, so they must not overlap",
                        path.join("."),
                        clashes.join(", ")
                    ),
                    fix: "give each cluster its own, non-overlapping pod CIDR (and the same in its nodes' podCIDRs)".into(),
                },
            ));
        }
    }
    hits
}

/// Every `io.cilium/lb-ipam-ips` annotation in the values: (addresses, key path).
fn lb_ips(value: &Value, path: &mut Vec<String>, out: &mut Vec<(String, Vec<String>)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                path.push(k.clone());
                if k == LB_IPAM_ANNOTATION {
                    if let Some(t) = text(Some(v)) {
                        for ip in t.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                            out.push((ip.to_string(), path.clone()));
                        }
                    }
                } else {
                    lb_ips(v, path, out);
                }
                path.pop();
            }
        }
        Value::Array(list) => {
            for v in list {
                lb_ips(v, path, out);
            }
        }
        _ => {}
    }
}

/// Every LB-IPAM address a cluster's releases request: (release, address, key path).
fn ips_of(plan: &Plan) -> Vec<(&Release, String, Vec<String>)> {
    let mut out = Vec::new();
    for release in plan.installed() {
        let mut found = Vec::new();
        lb_ips(release.values(), &mut Vec::new(), &mut found);
        out.extend(found.into_iter().map(|(ip, path)| (release, ip, path)));
    }
    out
}

const POOL_KIND: &str = "CiliumLoadBalancerIPPool";

/// Whether a file under `dir` holds `needle`, or cannot be told: a symbolic
/// link or an unreadable entry answers yes, so the tree is resolved.
fn mentions(dir: &Path, needle: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return true;
    };
    for entry in entries {
        let Ok(entry) = entry else { return true };
        let Ok(kind) = entry.file_type() else {
            return true;
        };
        let path = entry.path();
        let found = if kind.is_dir() {
            mentions(&path, needle)
        } else if kind.is_file() {
            std::fs::read(&path).map_or(true, |bytes| {
                bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
            })
        } else {
            true
        };
        if found {
            return true;
        }
    }
    false
}

/// A CiliumLoadBalancerIPPool block of a cluster's GitOps tree.
struct Pool {
    name: String,
    /// Relative to the config root (approximated: `--dir` as typed is not
    /// prefixed), and the line of the block.
    at: Location,
    range: (u32, u32),
    shown: String,
}

/// The pools of the tree `flux:` points at (docs/design.md#tree-resolution):
/// `spec.blocks` (`cidr`, or `start`/`stop`) and the older `spec.cidrs`.
fn pools(plan: &Plan, spelled: &mut HashMap<PathBuf, bool>) -> Vec<Pool> {
    let Some(flux) = &plan.cluster.flux else {
        return Vec::new();
    };
    // Resolving a tree reads and builds all of it; a root where no file
    // spells the kind has no pool to find (the tree never reads outside its
    // root). Asked once per root: clusters often share one.
    let root = flux.root.clone();
    if !*spelled
        .entry(root)
        .or_insert_with(|| mentions(&flux.root, POOL_KIND))
    {
        return Vec::new();
    }
    let tree = crate::flux::tree::resolve(&flux.root, &flux.entrypoint);
    let mut out = Vec::new();
    for object in tree
        .objects
        .iter()
        .filter(|o| o.kind == POOL_KIND && o.group() == "cilium.io")
    {
        let path = flux.root.join(&object.file);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let file = path.strip_prefix(&plan.root).unwrap_or(&path).to_path_buf();
        let blocks = ["/spec/blocks", "/spec/cidrs"]
            .iter()
            .filter_map(|p| object.body.pointer(p).and_then(Value::as_array))
            .flatten();
        for block in blocks {
            let field = |k: &str| block.get(k).and_then(Value::as_str);
            let (range, shown, needle) = if let Some(c) = field("cidr") {
                let Some((net, len)) = cidr(c) else { continue };
                let size = if len == 0 {
                    u32::MAX
                } else {
                    (1u32 << (32 - len)) - 1
                };
                ((net, net | size), c.to_string(), c)
            } else if let Some(start) = field("start") {
                let stop = field("stop").unwrap_or(start);
                let (Ok(a), Ok(b)) = (start.parse::<Ipv4Addr>(), stop.parse::<Ipv4Addr>()) else {
                    continue;
                };
                (
                    (u32::from(a), u32::from(b)),
                    format!("{start}-{stop}"),
                    start,
                )
            } else {
                continue;
            };
            let line = text
                .lines()
                .position(|l| l.contains(needle))
                .map(|i| i as u64 + 1)
                .unwrap_or(1);
            out.push(Pool {
                name: object.name.clone(),
                at: Location {
                    file: file.clone(),
                    line,
                },
                range,
                shown,
            });
        }
    }
    out
}

/// The same LB-IPAM address in two clusters: requested by both
/// (`io.cilium/lb-ipam-ips`), requested by one from the other's pool, or
/// in the pools (CiliumLoadBalancerIPPool) of both.
pub(super) fn lb_ipam_ip_reused(plans: &[&Plan]) -> Vec<(String, Hit)> {
    let mut spelled = HashMap::new();
    let pools: Vec<Vec<Pool>> = plans.iter().map(|p| pools(p, &mut spelled)).collect();
    let mut hits = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        let others = || {
            plans
                .iter()
                .enumerate()
                .filter(move |(j, p)| *j != i && p.cluster.name != plan.cluster.name)
        };
        for (release, ip, path) in ips_of(plan) {
            let address = ip.parse::<Ipv4Addr>().ok().map(u32::from);
            let users: Vec<String> = others()
                .filter_map(|(j, p)| {
                    if ips_of(p).iter().any(|(_, other, _)| *other == ip) {
                        return Some(format!("`{}` (requested there too)", p.cluster.name));
                    }
                    let pool = pools[j].iter().find(|pool| {
                        address.is_some_and(|a| pool.range.0 <= a && a <= pool.range.1)
                    })?;
                    Some(format!(
                        "`{}` (in its pool {} {})",
                        p.cluster.name, pool.name, pool.shown
                    ))
                })
                .collect();
            if users.is_empty() {
                continue;
            }
            let keys: Vec<&str> = path.iter().map(String::as_str).collect();
            hits.push((
                plan.cluster.name.clone(),
                Hit {
                    release: Some(release.id.clone()),
                    at: Some(locate(release, &keys)),
                    message: format!(
                        "LB-IPAM address {ip} (`{LB_IPAM_ANNOTATION}` at `{}`) of cluster `{}` is also used by cluster {}; two clusters would announce the same address",
                        path.join("."),
                        plan.cluster.name,
                        users.join(", ")
                    ),
                    fix: "take each cluster's load-balancer IPs from its own pool range".into(),
                },
            ));
        }
        for pool in &pools[i] {
            let clashes: Vec<String> = others()
                .flat_map(|(j, p)| {
                    pools[j]
                        .iter()
                        .filter(|o| o.range.0 <= pool.range.1 && pool.range.0 <= o.range.1)
                        .map(move |o| format!("{} {} of `{}`", o.name, o.shown, p.cluster.name))
                })
                .collect();
            if clashes.is_empty() {
                continue;
            }
            hits.push((
                plan.cluster.name.clone(),
                Hit {
                    release: None,
                    at: Some(pool.at.clone()),
                    message: format!(
                        "CiliumLoadBalancerIPPool {} ({}) of cluster `{}` overlaps {}; two clusters would hand out and announce the same addresses",
                        pool.name,
                        pool.shown,
                        plan.cluster.name,
                        clashes.join(", ")
                    ),
                    fix: "give each cluster's pool its own address range".into(),
                },
            ));
        }
    }
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_overlap_by_the_shorter_prefix() {
        let c = |s| cidr(s).unwrap();
        assert!(overlap(c("10.244.0.0/16"), c("10.244.128.0/17")));
        assert!(!overlap(c("10.244.0.0/16"), c("10.246.0.0/16")));
        assert!(overlap(c("10.0.0.0/8"), c("10.246.0.0/16")));
        assert_eq!(
            cidr("10.244.1.2/16"),
            Some((u32::from(Ipv4Addr::new(10, 244, 0, 0)), 16))
        );
        assert_eq!(cidr("nope"), None);
    }
}
