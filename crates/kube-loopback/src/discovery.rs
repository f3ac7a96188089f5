//! Discovery documents, both the legacy per-group-version form and the
//! aggregated `APIGroupDiscoveryList` that kubectl and kube's
//! `run_aggregated` ask for by `Accept` header.

use serde_json::{Value, json};

use super::resources::{ResourceType, groups};

pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
const STATUS_VERBS: [&str; 3] = ["get", "patch", "update"];

pub fn version() -> Value {
    json!({
        "major": "1", "minor": "33", "gitVersion": "v1.33.0",
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2025-04-23T00:00:00Z", "goVersion": "go1.24.2", "compiler": "gc",
        "platform": "linux/amd64",
    })
}

pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn group_doc(group: &str, versions: &[String]) -> Value {
    let gv = |v: &String| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    json!({
        "name": group,
        "versions": versions.iter().map(gv).collect::<Vec<_>>(),
        "preferredVersion": versions.first().map(gv).unwrap_or(Value::Null),
    })
}

pub fn group_list(types: &[ResourceType]) -> Value {
    let groups: Vec<Value> = groups(types)
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, versions)| group_doc(&g, &versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn group(types: &[ResourceType], name: &str) -> Option<Value> {
    let (g, versions) = groups(types)
        .into_iter()
        .find(|(g, _)| g == name && !g.is_empty())?;
    let mut doc = group_doc(&g, &versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

pub fn resource_list(types: &[ResourceType], group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for rt in types
        .iter()
        .filter(|t| t.group == group && t.version == version)
    {
        resources.push(json!({
            "name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
            "kind": rt.kind, "verbs": VERBS, "shortNames": rt.short_names, "categories": rt.categories,
        }));
        if rt.has_status {
            resources.push(json!({
                "name": format!("{}/status", rt.plural), "singularName": "", "namespaced": rt.namespaced,
                "kind": rt.kind, "verbs": STATUS_VERBS,
            }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}

fn aggregated_resource(rt: &ResourceType) -> Value {
    let response_kind = json!({"group": rt.group, "version": rt.version, "kind": rt.kind});
    let mut doc = json!({
        "resource": rt.plural,
        "responseKind": response_kind,
        "scope": if rt.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": rt.singular,
        "verbs": VERBS,
        "shortNames": rt.short_names,
        "categories": rt.categories,
    });
    if rt.has_status {
        doc["subresources"] = json!([{"subresource": "status", "responseKind": response_kind, "verbs": STATUS_VERBS}]);
    }
    doc
}

/// `/api` (`core == true`) or `/apis` in aggregated form.
pub fn aggregated(types: &[ResourceType], core: bool) -> Value {
    let items: Vec<Value> = groups(types)
        .into_iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(g, versions)| {
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = types
                        .iter()
                        .filter(|t| t.group == g && t.version == *v)
                        .map(aggregated_resource)
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": g}, "versions": versions})
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}
