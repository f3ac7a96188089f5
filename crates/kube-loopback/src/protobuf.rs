//! Request bodies in Kubernetes' protobuf encoding
//! (`application/vnd.kubernetes.protobuf`), as client-go's typed clients send
//! them for built-in kinds (Helm 4's release storage writes its Secrets and
//! ConfigMaps this way, and deletes them with protobuf `DeleteOptions`).
//!
//! The wire format (k8s.io/apimachinery pkg/runtime/serializer/protobuf/
//! protobuf.go): the four bytes `k8s\0`, then a `runtime.Unknown` whose
//! `typeMeta` names the kind and whose `raw` holds the object's own message.
//! Decoded here: Secret, ConfigMap and DeleteOptions, into the JSON shape the
//! store keeps. Any other kind is refused with the 415 a server that cannot
//! decode it would give, naming the kind, so a test never passes on a body
//! the server did not understand.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;
use serde_json::{Map, Value, json};

use super::status::ApiError;

pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
const MAGIC: &[u8] = b"k8s\0";

/// The JSON form of a protobuf-encoded request body.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let bad = |why: String| {
        ApiError::bad_request(format!("the protobuf body could not be decoded: {why}"))
    };
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("it does not start with the protobuf magic number".into()))?;
    let unknown = Unknown::decode(envelope).map_err(|e| bad(e.to_string()))?;
    let type_meta = unknown.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    let raw = unknown.raw.unwrap_or_default();
    let mut doc = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Secret") => {
            secret(core::Secret::decode(raw.as_slice()).map_err(|e| bad(e.to_string()))?)
        }
        ("v1", "ConfigMap") => {
            config_map(core::ConfigMap::decode(raw.as_slice()).map_err(|e| bad(e.to_string()))?)
        }
        // client-go encodes DeleteOptions in the group version of the
        // resource it deletes (or meta.k8s.io/v1).
        (_, "DeleteOptions") => delete_options(
            meta::DeleteOptions::decode(raw.as_slice()).map_err(|e| bad(e.to_string()))?,
        ),
        _ => {
            return Err(ApiError::unsupported_media_type(
                &format!("{CONTENT_TYPE} ({api_version} {kind})"),
                "application/json, application/yaml; protobuf only for v1 Secret, v1 ConfigMap \
                 and DeleteOptions",
            ));
        }
    };
    if let Some(obj) = doc.as_object_mut() {
        let mut typed = Map::new();
        typed.insert("apiVersion".into(), json!(api_version));
        typed.insert("kind".into(), json!(kind));
        typed.extend(std::mem::take(obj));
        *obj = typed;
    }
    Ok(doc)
}

fn set<T: Into<Value>>(out: &mut Map<String, Value>, key: &str, value: Option<T>) {
    if let Some(v) = value {
        out.insert(key.into(), v.into());
    }
}

fn strings(map: BTreeMap<String, String>) -> Option<Value> {
    (!map.is_empty()).then(|| json!(map))
}

fn bytes(map: BTreeMap<String, Vec<u8>>) -> Option<Value> {
    (!map.is_empty()).then(|| {
        Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, json!(STANDARD.encode(v))))
                .collect(),
        )
    })
}

/// What a client may set in metadata; server-owned fields (uid,
/// creationTimestamp, generation, managedFields) are the store's.
fn object_meta(m: Option<meta::ObjectMeta>) -> Value {
    let m = m.unwrap_or_default();
    let mut out = Map::new();
    set(&mut out, "name", m.name);
    set(&mut out, "generateName", m.generate_name);
    set(&mut out, "namespace", m.namespace);
    set(&mut out, "uid", m.uid);
    set(&mut out, "resourceVersion", m.resource_version);
    set(&mut out, "labels", strings(m.labels));
    set(&mut out, "annotations", strings(m.annotations));
    if !m.finalizers.is_empty() {
        out.insert("finalizers".into(), json!(m.finalizers));
    }
    if !m.owner_references.is_empty() {
        let refs: Vec<Value> = m
            .owner_references
            .into_iter()
            .map(|r| {
                let mut o = Map::new();
                set(&mut o, "apiVersion", r.api_version);
                set(&mut o, "kind", r.kind);
                set(&mut o, "name", r.name);
                set(&mut o, "uid", r.uid);
                set(&mut o, "controller", r.controller);
                set(&mut o, "blockOwnerDeletion", r.block_owner_deletion);
                Value::Object(o)
            })
            .collect();
        out.insert("ownerReferences".into(), json!(refs));
    }
    Value::Object(out)
}

fn secret(s: core::Secret) -> Value {
    let mut out = Map::new();
    out.insert("metadata".into(), object_meta(s.metadata));
    set(&mut out, "immutable", s.immutable);
    set(&mut out, "data", bytes(s.data));
    set(&mut out, "stringData", strings(s.string_data));
    set(&mut out, "type", s.r#type);
    Value::Object(out)
}

fn config_map(c: core::ConfigMap) -> Value {
    let mut out = Map::new();
    out.insert("metadata".into(), object_meta(c.metadata));
    set(&mut out, "immutable", c.immutable);
    set(&mut out, "data", strings(c.data));
    set(&mut out, "binaryData", bytes(c.binary_data));
    Value::Object(out)
}

fn delete_options(d: meta::DeleteOptions) -> Value {
    let mut out = Map::new();
    set(&mut out, "gracePeriodSeconds", d.grace_period_seconds);
    if let Some(p) = d.preconditions {
        let mut pre = Map::new();
        set(&mut pre, "uid", p.uid);
        set(&mut pre, "resourceVersion", p.resource_version);
        out.insert("preconditions".into(), Value::Object(pre));
    }
    set(&mut out, "orphanDependents", d.orphan_dependents);
    set(&mut out, "propagationPolicy", d.propagation_policy);
    if !d.dry_run.is_empty() {
        out.insert("dryRun".into(), json!(d.dry_run));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let unknown = Unknown {
            type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        [MAGIC.to_vec(), unknown.encode_to_vec()].concat()
    }

    #[test]
    fn a_secret_decodes_to_its_json_form() {
        let secret = core::Secret {
            metadata: Some(meta::ObjectMeta {
                name: Some("sh.helm.release.v1.coredns.v1".into()),
                namespace: Some("kube-system".into()),
                labels: BTreeMap::from([("owner".into(), "helm".into())]),
                ..Default::default()
            }),
            data: BTreeMap::from([("release".into(), b"H4sI\x00\xff".to_vec())]),
            r#type: Some("helm.sh/release.v1".into()),
            ..Default::default()
        };
        let doc = decode(&envelope("v1", "Secret", secret.encode_to_vec())).unwrap();
        assert_eq!(
            doc,
            json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": "sh.helm.release.v1.coredns.v1",
                    "namespace": "kube-system",
                    "labels": { "owner": "helm" },
                },
                "data": { "release": STANDARD.encode(b"H4sI\x00\xff") },
                "type": "helm.sh/release.v1",
            })
        );
    }

    #[test]
    fn delete_options_keep_preconditions_and_dry_run() {
        let options = meta::DeleteOptions {
            preconditions: Some(meta::Preconditions {
                uid: None,
                resource_version: Some("7".into()),
            }),
            propagation_policy: Some("Background".into()),
            dry_run: vec!["All".into()],
            ..Default::default()
        };
        let doc = decode(&envelope("v1", "DeleteOptions", options.encode_to_vec())).unwrap();
        assert_eq!(doc["preconditions"], json!({ "resourceVersion": "7" }));
        assert_eq!(doc["dryRun"], json!(["All"]));
        assert_eq!(doc["propagationPolicy"], "Background");
    }

    #[test]
    fn other_kinds_and_garbage_are_refused() {
        let pod = envelope("v1", "Pod", Vec::new());
        assert_eq!(decode(&pod).unwrap_err().code, 415);
        assert_eq!(decode(b"{\"kind\":\"Secret\"}").unwrap_err().code, 400);
        assert_eq!(decode(b"k8s\0\xff\xff\xff").unwrap_err().code, 400);
    }
}
