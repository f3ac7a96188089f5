//! The little defaulting clients depend on: `kubectl rollout status` refuses
//! workloads without a RollingUpdate strategy, which the real server fills in.

use serde_json::{Value, json};

use super::resources::ResourceType;

pub fn apply(rt: &ResourceType, obj: &mut Value) {
    if rt.group != "apps" || !obj["spec"].is_object() {
        return;
    }
    let spec = &mut obj["spec"];
    let (field, rolling) = match rt.kind.as_str() {
        "Deployment" => (
            "strategy",
            json!({ "maxUnavailable": "25%", "maxSurge": "25%" }),
        ),
        "DaemonSet" => (
            "updateStrategy",
            json!({ "maxUnavailable": 1, "maxSurge": 0 }),
        ),
        "StatefulSet" => ("updateStrategy", json!({ "partition": 0 })),
        _ => return,
    };
    if rt.kind != "DaemonSet" && spec.get("replicas").is_none() {
        spec["replicas"] = json!(1);
    }
    if spec.get(field).is_none() {
        spec[field] = json!({ "type": "RollingUpdate" });
    }
    if spec[field]["type"] == "RollingUpdate" && spec[field].get("rollingUpdate").is_none() {
        spec[field]["rollingUpdate"] = rolling;
    }
}
