//! Just enough OpenAPI v3 for kubectl: it reads the PATCH operations to learn
//! that the server validates fields itself (`fieldValidation`), and then
//! skips client-side schema validation, which would need the full schema.

use std::hash::{DefaultHasher, Hash, Hasher};

use serde_json::{Map, Value, json};

use super::resources::ResourceType;

/// `api/v1` or `apis/{group}/{version}`, as the v3 root names them.
fn gv_path(rt: &ResourceType) -> String {
    if rt.group.is_empty() {
        format!("api/{}", rt.version)
    } else {
        format!("apis/{}/{}", rt.group, rt.version)
    }
}

/// `/openapi/v3`: one entry per group-version, its URL changing whenever the
/// group-version's kinds do, so kubectl's cache never serves a stale one.
pub fn root(types: &[ResourceType]) -> Value {
    let mut paths = Map::new();
    for rt in types {
        let path = gv_path(rt);
        if !paths.contains_key(&path) {
            let mut hasher = DefaultHasher::new();
            group_version(types, &path)
                .map(|doc| doc.to_string())
                .hash(&mut hasher);
            let url = format!("/openapi/v3/{path}?hash={:016X}", hasher.finish());
            paths.insert(path, json!({ "serverRelativeURL": url }));
        }
    }
    json!({ "paths": paths })
}

/// `/openapi/v3/{gv_path}`: the item paths of each kind with their PATCH
/// operation; no schemas.
pub fn group_version(types: &[ResourceType], path: &str) -> Option<Value> {
    let query = |name: &str| json!({ "name": name, "in": "query", "schema": { "type": "string" } });
    let mut paths = Map::new();
    for rt in types.iter().filter(|rt| gv_path(rt) == path) {
        let scope = if rt.namespaced {
            "namespaces/{namespace}/"
        } else {
            ""
        };
        let item = format!("/{path}/{scope}{}/{{name}}", rt.plural);
        let patch = json!({
            "operationId": format!("patch{}", rt.kind),
            "parameters": [query("dryRun"), query("fieldManager"), query("fieldValidation"), query("force")],
            "responses": { "200": { "description": "OK" } },
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": { "group": rt.group, "version": rt.version, "kind": rt.kind },
        });
        paths.insert(item, json!({ "patch": patch }));
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": "v1.33.0" },
        "paths": paths,
        "components": { "schemas": {} },
    }))
}
