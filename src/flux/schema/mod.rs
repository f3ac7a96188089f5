//! What the API server answers when kustomize-controller server-side applies
//! an object (dry-run first, fluxcd/pkg `ssa` `ApplyAll`), for the kinds
//! `check` can tell offline: the Flux kinds, from their CRDs, and the
//! namespace of the namespaced built-in kinds (docs/design.md#tree-resolution).
//!
//! The Flux CRDs (source-, kustomize- and helm-controller at the versions
//! Flux v2.9.5 pins, `src/flux/crds/README.md`) are embedded as a compact
//! table ([`compact_crd`]): each kind's group, scope and served versions, and
//! for each version the structural schema without descriptions. A test of
//! the real tier checks the table equals what the real CRDs say.
//!
//! The answers, in the order the API server gives them:
//!
//! - a version no CRD serves: the client's REST mapping fails, `no matches
//!   for kind "HelmRelease" in version "helm.toolkit.fluxcd.io/v2beta2"`;
//! - a namespaced object without a namespace: the request goes to a path
//!   that does not exist (404), which `ssa` words `namespace not specified`;
//! - the apply patch made typed against the schema (structured-merge-diff):
//!   a field the schema does not declare, or a value of another type (a
//!   null is accepted here), fails it: `failed to create typed patch object
//!   (…): .spec.foo: field not declared in schema`;
//! - then the CRD's validation of the result: a required field missing, a
//!   null where the schema does not allow one, a number that is not an
//!   integer, an enum, a pattern, a length or a minimum (`Kind.group "name"
//!   is invalid: …`); CEL rules are not evaluated, but the note the API
//!   server adds when it skips them is.

use std::sync::OnceLock;

use serde_json::{Map, Value, json};

use super::object::Object;

mod meta;

/// The compact table of the Flux CRDs ([`compact_crd`] of each).
const TABLE: &str = include_str!("../crds/flux-crds.json");

/// Where the real tier has the CRDs the table is made from, below
/// `tools/realenv/.bin/flux-crds/../share/` (tools/realenv/flux-crds).
pub const CRD_DIRS: [&str; 3] = [
    "github.com/fluxcd/helm-controller/config/crd/bases",
    "github.com/fluxcd/kustomize-controller/config/crd/bases",
    "github.com/fluxcd/source-controller/config/crd/bases",
];

/// The schema keywords the table keeps.
const KEPT: [&str; 8] = [
    "type",
    "required",
    "enum",
    "pattern",
    "maxLength",
    "minLength",
    "minimum",
    "x-kubernetes-preserve-unknown-fields",
];

/// A CRD as the table holds it: group, kind, scope, and each served
/// version with its schema reduced to what the apply checks, and whether
/// it has CEL rules (`x-kubernetes-validations`).
pub fn compact_crd(crd: &Value) -> Value {
    let spec = &crd["spec"];
    let versions: Vec<Value> = spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"] == Value::Bool(true))
        .map(|v| {
            let schema = &v["schema"]["openAPIV3Schema"];
            json!({
                "name": v["name"],
                "cel": has_cel(schema),
                "schema": compact_schema(schema),
            })
        })
        .collect();
    json!({
        "group": spec["group"],
        "kind": spec["names"]["kind"],
        "scope": spec["scope"],
        "versions": versions,
    })
}

fn has_cel(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => {
            map.contains_key("x-kubernetes-validations") || map.values().any(has_cel)
        }
        Value::Array(items) => items.iter().any(has_cel),
        _ => false,
    }
}

fn compact_schema(schema: &Value) -> Value {
    let mut out = Map::new();
    for key in KEPT {
        if let Some(v) = schema.get(key) {
            out.insert(key.to_string(), v.clone());
        }
    }
    if schema.get("default").is_some() {
        out.insert("default".into(), Value::Bool(true));
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        let props: Map<String, Value> = props
            .iter()
            .map(|(k, v)| (k.clone(), compact_schema(v)))
            .collect();
        out.insert("properties".into(), Value::Object(props));
    }
    if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
        out.insert("items".into(), compact_schema(items));
    }
    match schema.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            out.insert("additionalProperties".into(), Value::Bool(*b));
        }
        Some(a @ Value::Object(_)) => {
            out.insert("additionalProperties".into(), compact_schema(a));
        }
        _ => {}
    }
    Value::Object(out)
}

/// The embedded table.
pub fn table() -> &'static Value {
    static PARSED: OnceLock<Value> = OnceLock::new();
    PARSED.get_or_init(|| serde_json::from_str(TABLE).unwrap_or(Value::Null))
}

fn crd_of(group: &str, kind: &str) -> Option<&'static Value> {
    table()["kinds"]
        .as_array()?
        .iter()
        .find(|k| k["group"] == group && k["kind"] == kind)
}

/// Namespaced built-in kinds by group: an object of one without a namespace
/// is refused (the kinds a GitOps tree commonly holds; others are not
/// checked).
const NAMESPACED_BUILTINS: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "ConfigMap",
            "Secret",
            "Service",
            "ServiceAccount",
            "Pod",
            "PersistentVolumeClaim",
            "Endpoints",
            "LimitRange",
            "ResourceQuota",
        ],
    ),
    (
        "apps",
        &["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"],
    ),
    ("batch", &["Job", "CronJob"]),
    ("rbac.authorization.k8s.io", &["Role", "RoleBinding"]),
    ("networking.k8s.io", &["Ingress", "NetworkPolicy"]),
    ("policy", &["PodDisruptionBudget"]),
    ("autoscaling", &["HorizontalPodAutoscaler"]),
    ("coordination.k8s.io", &["Lease"]),
    (
        "fluxcd.controlplane.io",
        &["ResourceSet", "ResourceSetInputProvider"],
    ),
];

/// Whether `check` can tell the object is namespaced.
fn known_namespaced(group: &str, kind: &str) -> bool {
    if let Some(crd) = crd_of(group, kind) {
        return crd["scope"] == "Namespaced";
    }
    NAMESPACED_BUILTINS
        .iter()
        .any(|(g, kinds)| *g == group && kinds.contains(&kind))
}

/// A kind's resource (apimachinery `UnsafeGuessKindToResource`, which the
/// Flux and built-in kinds follow but Endpoints).
fn resource_of(kind: &str) -> String {
    let lower = kind.to_lowercase();
    if lower == "endpoints" {
        return lower;
    }
    match lower.strip_suffix('y') {
        Some(stem) => format!("{stem}ies"),
        None if lower.ends_with('s') => format!("{lower}es"),
        None => format!("{lower}s"),
    }
}

/// `ssa`'s `FmtUnstructured`: `Kind/namespace/name`, the namespace left
/// out when empty.
pub fn fmt_object(obj: &Object) -> String {
    match obj.namespace.as_deref() {
        Some(ns) => format!("{}/{ns}/{}", obj.kind, obj.name),
        None => format!("{}/{}", obj.kind, obj.name),
    }
}

/// The error kustomize-controller gets from the API server for `obj`'s
/// dry-run apply, as `ssa` words it (`errors.DryRunErr`); `None` when
/// nothing `check` knows refuses it.
pub fn dry_run_error(obj: &Object) -> Option<String> {
    let (group, version) = match obj.api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", obj.api_version.as_str()),
    };
    let what = fmt_object(obj);
    let crd = crd_of(group, &obj.kind);
    if let Some(crd) = crd
        && !crd["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| v["name"] == version)
    {
        return Some(format!(
            "{what} dry-run failed: no matches for kind \"{}\" in version \"{}\"",
            obj.kind, obj.api_version
        ));
    }
    if obj.name.is_empty() {
        // client-go's request builder refuses it before sending anything.
        return Some(format!(
            "{what} dry-run failed: resource name may not be empty"
        ));
    }
    // And a name that cannot be a URL path segment (`IsValidPathSegmentName`).
    let segment: Vec<String> = if obj.name == "." || obj.name == ".." {
        vec![format!("may not be '{}'", obj.name)]
    } else {
        ["/", "%"]
            .iter()
            .filter(|c| obj.name.contains(**c))
            .map(|c| format!("may not contain '{c}'"))
            .collect()
    };
    if !segment.is_empty() {
        return Some(format!(
            "{what} dry-run failed: invalid resource name {:?}: [{}]",
            obj.name,
            segment.join(" ")
        ));
    }
    let namespaced = known_namespaced(group, &obj.kind);
    if obj.namespace.is_none() && namespaced {
        // A custom resource's 404 has no Status body: client-go words it
        // with the request (`patch RESOURCE.GROUP NAME`).
        let custom = crd.is_some() || (group.contains('.') && !group.ends_with(".k8s.io"));
        let request = if custom {
            format!(" (patch {}.{group} {})", resource_of(&obj.kind), obj.name)
        } else {
            String::new()
        };
        return Some(format!(
            "{what} namespace not specified: the server could not find the requested resource{request}"
        ));
    }
    let Some(crd) = crd else {
        // A built-in kind `check` knows: its metadata is validated.
        if !(namespaced || (group.is_empty() && obj.kind == "Namespace")) {
            return None;
        }
        if let Some(e) = core_data_error(obj, group) {
            return Some(typed_patch_error(&what, obj, &e));
        }
        if let Some(ns) = meta::impossible_namespace(obj, namespaced) {
            return Some(format!("{what} not found: namespaces \"{ns}\" not found"));
        }
        return invalid(&what, obj, group, meta::errors(obj), false);
    };
    let served = crd["versions"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == version)?;
    let schema = &served["schema"];
    let body = without_identity(&obj.body);
    if let Some(e) = typed_error(&body, schema, "") {
        return Some(typed_patch_error(&what, obj, &e));
    }
    if let Some(ns) = meta::impossible_namespace(obj, namespaced) {
        return Some(format!("{what} not found: namespaces \"{ns}\" not found"));
    }
    let mut errors = meta::errors(obj);
    validate(&body, schema, "", &mut errors);
    invalid(
        &what,
        obj,
        group,
        errors,
        served["cel"] == Value::Bool(true),
    )
}

/// The API server's `Invalid` answer listing `errors` (none: `None`); with
/// `cel`, the note that CEL rules were skipped after a blocking error.
fn invalid(
    what: &str,
    obj: &Object,
    group: &str,
    errors: Vec<Invalid>,
    cel: bool,
) -> Option<String> {
    if errors.is_empty() {
        return None;
    }
    let blocking = errors.iter().any(|e| e.blocking);
    let mut texts: Vec<String> = errors.into_iter().map(|e| e.text).collect();
    if blocking && cel {
        texts.push("<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into());
    }
    let list = match texts.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let kind = if group.is_empty() {
        obj.kind.clone()
    } else {
        format!("{}.{group}", obj.kind)
    };
    Some(format!(
        "{what} dry-run failed (Invalid): {kind} \"{}\" is invalid: {list}",
        obj.name
    ))
}

/// The body without `apiVersion`, `kind` and `metadata`, which the
/// schema leaves to the API server's own checks.
fn without_identity(body: &Value) -> Value {
    let mut body = body.clone();
    if let Some(map) = body.as_object_mut() {
        for key in ["apiVersion", "kind", "metadata"] {
            map.remove(key);
        }
    }
    body
}

fn type_of(schema: &Value) -> &str {
    schema["type"].as_str().unwrap_or_default()
}

/// A number as the API server decodes it: kustomize-controller sends a
/// float with no fraction (`1e3`) as `1000`, which decodes as an int64.
fn go_number(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(x) if n.is_f64() && x.fract() == 0.0 && x.abs() < 1e15 => format!("{}", x as i64),
        _ => n.to_string(),
    }
}

/// Go's `%v` of a decoded JSON value, as structured-merge-diff prints it.
fn go_v(v: &Value) -> String {
    match v {
        Value::Number(n) => go_number(n),
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            format!("[{}]", items.iter().map(go_v).collect::<Vec<_>>().join(" "))
        }
        Value::Object(map) => format!(
            "map[{}]",
            map.iter()
                .map(|(k, v)| format!("{k}:{}", go_v(v)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        other => other.to_string(),
    }
}

/// Go's `%#v` of a decoded JSON value.
fn go_sharp_v(v: &Value) -> String {
    match v {
        Value::Number(n) => go_number(n),
        Value::Null => "interface {}(nil)".into(),
        Value::Array(items) => format!(
            "[]interface {{}}{{{}}}",
            items.iter().map(go_sharp_v).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(map) => format!(
            "map[string]interface {{}}{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{k:?}:{}", go_sharp_v(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// Go's `%T` of a decoded JSON value.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() && go_number(n).contains(['.', 'e']) => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// The API server's words for an apply patch it cannot type (`failed to
/// create typed patch object (namespace/name; group/version, Kind=…)`), the
/// core group's version written `/v1`.
fn typed_patch_error(what: &str, obj: &Object, e: &str) -> String {
    let version = if obj.api_version.contains('/') {
        obj.api_version.clone()
    } else {
        format!("/{}", obj.api_version)
    };
    format!(
        "{what} dry-run failed: failed to create typed patch object ({}/{}; {version}, Kind={}): {e}",
        obj.namespace.as_deref().unwrap_or_default(),
        obj.name,
        obj.kind
    )
}

/// A v1 ConfigMap's or Secret's data that is not text (a number a
/// post-build substitution read back, `k: ${N}` with N=5): its type error,
/// as structured-merge-diff gives it against the built-in schema (their
/// `data`, `stringData`, `binaryData` maps of strings; the rest of the
/// schema is not modelled).
fn core_data_error(obj: &Object, group: &str) -> Option<String> {
    if !group.is_empty() || obj.api_version != "v1" {
        return None;
    }
    let fields: &[&str] = match obj.kind.as_str() {
        "ConfigMap" => &["binaryData", "data"],
        "Secret" => &["data", "stringData"],
        _ => return None,
    };
    let strings = json!({"type": "object", "additionalProperties": {"type": "string"}});
    let properties: Map<String, Value> = fields
        .iter()
        .map(|f| (f.to_string(), strings.clone()))
        .collect();
    let schema = json!({"type": "object", "properties": properties,
                        "x-kubernetes-preserve-unknown-fields": true});
    typed_error(&without_identity(&obj.body), &schema, "")
}

/// The error structured-merge-diff gives making `value` typed against
/// `schema`: every type error, one per line after `errors:` when there are
/// several (sigs.k8s.io/structured-merge-diff `ValidationErrors.Error`).
fn typed_error(value: &Value, schema: &Value, path: &str) -> Option<String> {
    let mut errors = Vec::new();
    typed_errors(value, schema, path, &mut errors);
    match errors.len() {
        0 => None,
        1 => errors.pop(),
        _ => Some(format!("errors:\n  {}", errors.join("\n  "))),
    }
}

/// The type errors structured-merge-diff collects (`validatingObjectWalker`):
/// every one, but a map's walk stops at its first field the schema does not
/// declare. It walks a map in Go's map order, so which errors come before
/// that field varies from one request to the next; here, fields in key
/// order (a null is accepted anywhere).
fn typed_errors(value: &Value, schema: &Value, path: &str, out: &mut Vec<String>) {
    if value.is_null() {
        return;
    }
    match type_of(schema) {
        "object" => {
            let Value::Object(map) = value else {
                out.push(format!("{path}: expected map, got &{{{}}}", go_v(value)));
                return;
            };
            let props = schema["properties"].as_object();
            let extra = &schema["additionalProperties"];
            let open = schema["x-kubernetes-preserve-unknown-fields"] == Value::Bool(true)
                || extra == &Value::Bool(true);
            for (key, v) in map {
                let at = format!("{path}.{key}");
                let field = props
                    .and_then(|p| p.get(key))
                    .or_else(|| Some(extra).filter(|a| a.is_object()));
                match field {
                    Some(field) => typed_errors(v, field, &at, out),
                    None if open => {}
                    None => {
                        out.push(format!("{at}: field not declared in schema"));
                        return;
                    }
                }
            }
        }
        "array" => {
            let Value::Array(items) = value else {
                out.push(format!("{path}: expected list, got &{{{}}}", go_v(value)));
                return;
            };
            for (i, v) in items.iter().enumerate() {
                typed_errors(v, &schema["items"], &format!("{path}[{i}]"), out);
            }
        }
        "string" if !value.is_string() => out.push(format!(
            "{path}: expected string, got &value.valueUnstructured{{Value:{}}}",
            go_sharp_v(value)
        )),
        "integer" | "number" if !value.is_number() => out.push(format!(
            "{path}: expected numeric (int or float), got {}",
            go_type(value)
        )),
        "boolean" if !value.is_boolean() => out.push(format!(
            "{path}: expected boolean, got &{{{}}}",
            go_v(value)
        )),
        _ => {}
    }
}

/// One error of the CRD's validation; `blocking` errors make the API
/// server skip the CEL rules (and say so).
struct Invalid {
    text: String,
    blocking: bool,
}

/// The validation of the typed result against the structural schema
/// (apiextensions-apiserver's OpenAPI validation).
fn validate(value: &Value, schema: &Value, path: &str, out: &mut Vec<Invalid>) {
    let field = path.trim_start_matches('.');
    let kind = type_of(schema);
    if value.is_null() {
        if !kind.is_empty() {
            out.push(Invalid {
                text: format!(
                    "{field}: Invalid value: \"null\": {field} in body must be of type {kind}: \"null\""
                ),
                blocking: true,
            });
        }
        return;
    }
    match value {
        Value::Object(map) if kind == "object" => {
            let props = schema["properties"].as_object();
            // kube-openapi's object validator: the properties (in its map's
            // order), then the required ones.
            for (key, v) in map {
                let sub = props
                    .and_then(|p| p.get(key))
                    .or_else(|| Some(&schema["additionalProperties"]).filter(|a| a.is_object()));
                if let Some(sub) = sub {
                    validate(v, sub, &format!("{path}.{key}"), out);
                }
            }
            for r in schema["required"].as_array().into_iter().flatten() {
                let Some(r) = r.as_str() else { continue };
                let defaulted = props
                    .and_then(|p| p.get(r))
                    .is_some_and(|p| p["default"] == Value::Bool(true));
                if !map.contains_key(r) && !defaulted {
                    out.push(Invalid {
                        text: format!(
                            "{}: Required value",
                            format!("{path}.{r}").trim_start_matches('.')
                        ),
                        blocking: true,
                    });
                }
            }
        }
        Value::Array(items) if kind == "array" => {
            for (i, v) in items.iter().enumerate() {
                validate(v, &schema["items"], &format!("{path}[{i}]"), out);
            }
        }
        Value::Number(n) => {
            if kind == "integer" && !(n.is_i64() || n.is_u64()) {
                out.push(Invalid {
                    text: format!(
                        "{field}: Invalid value: \"number\": {field} in body must be of type integer: \"number\""
                    ),
                    blocking: true,
                });
            } else if let (Some(min), Some(x)) = (schema["minimum"].as_f64(), n.as_f64())
                && x < min
            {
                out.push(Invalid {
                    text: format!(
                        "{field}: Invalid value: {n}: {field} in body should be greater than or equal to {}",
                        schema["minimum"]
                    ),
                    blocking: false,
                });
            }
        }
        Value::String(s) => validate_string(s, schema, field, out),
        _ => {}
    }
}

fn validate_string(s: &str, schema: &Value, field: &str, out: &mut Vec<Invalid>) {
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.iter().any(|a| a == s)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        out.push(Invalid {
            text: format!(
                "{field}: Unsupported value: {:?}: supported values: {}",
                s,
                list.join(", ")
            ),
            blocking: true,
        });
        return;
    }
    if let Some(max) = schema["maxLength"].as_u64()
        && s.len() as u64 > max
    {
        out.push(Invalid {
            text: format!("{field}: Too long: may not be more than {max} bytes"),
            blocking: true,
        });
    }
    if let Some(min) = schema["minLength"].as_u64()
        && (s.chars().count() as u64) < min
    {
        out.push(Invalid {
            text: format!(
                "{field}: Invalid value: {s:?}: {field} in body should be at least {min} chars long"
            ),
            blocking: false,
        });
    }
    if let Some(pattern) = schema["pattern"].as_str()
        && regex::Regex::new(pattern).is_ok_and(|re| !re.is_match(s))
    {
        out.push(Invalid {
            text: format!(
                "{field}: Invalid value: {s:?}: {field} in body should match '{pattern}'"
            ),
            blocking: false,
        });
    }
}

#[cfg(test)]
mod tests;
