//! The API server's validation of an object's `metadata`
//! (apimachinery `ValidateObjectMetaAccessor`, which every kind's create
//! runs, a CRD's before its schema; docs/design.md#tree-resolution): the
//! name (an RFC 1123 subdomain, a label for a Namespace) and the label
//! values; label keys are not checked. A namespace that is no RFC 1123
//! label never exists: the NamespaceLifecycle admission refuses the object
//! before its validation ([`impossible_namespace`]).

use regex::Regex;
use std::sync::OnceLock;

use super::Invalid;
use crate::flux::object::Object;

const LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

fn subdomain_fmt() -> String {
    format!("{LABEL_FMT}(\\.{LABEL_FMT})*")
}

fn matches(fmt: &str, value: &str) -> bool {
    static CACHE: OnceLock<std::sync::Mutex<Vec<(String, Regex)>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, re)) = cache.iter().find(|(f, _)| f == fmt) {
        return re.is_match(value);
    }
    let re = Regex::new(&format!("^{fmt}$")).expect("a valid pattern");
    let found = re.is_match(value);
    cache.push((fmt.to_string(), re));
    found
}

/// apimachinery's `RegexError`.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let shown: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{fmt}')",
        shown.join(" or ")
    )
}

/// `IsDNS1123Subdomain`.
fn subdomain(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    if value.len() > 253 {
        out.push("must be no more than 253 characters".to_string());
    }
    if !matches(&subdomain_fmt(), value) {
        out.push(regex_error(
            SUBDOMAIN_MSG,
            &subdomain_fmt(),
            &["example.com"],
        ));
    }
    out
}

/// `IsDNS1123Label`.
fn label(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    if value.len() > 63 {
        out.push("must be no more than 63 characters".to_string());
    }
    if !matches(LABEL_FMT, value) {
        if matches(&subdomain_fmt(), value) {
            out.push("must not contain dots".to_string());
        } else {
            out.push(regex_error(LABEL_MSG, LABEL_FMT, &["my-name", "123-abc"]));
        }
    }
    out
}

/// `IsValidLabelValue`.
fn label_value(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    if value.len() > 63 {
        out.push("must be no more than 63 characters".to_string());
    }
    if !matches(VALUE_FMT, value) {
        out.push(regex_error(
            VALUE_MSG,
            VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    out
}

fn invalid(field: &str, value: &str, msg: String) -> Invalid {
    Invalid {
        text: format!("{field}: Invalid value: {value:?}: {msg}"),
        blocking: false,
    }
}

/// The namespace of a namespaced `obj` when no Namespace can have that
/// name (`check` takes every other namespace as existing).
pub(super) fn impossible_namespace(obj: &Object, namespaced: bool) -> Option<&str> {
    let ns = obj.namespace.as_deref()?;
    (namespaced && !label(ns).is_empty()).then_some(ns)
}

/// The errors of `obj`'s metadata, in the order the API server lists them.
pub(super) fn errors(obj: &Object) -> Vec<Invalid> {
    let mut out = Vec::new();
    let name_rule = if obj.kind == "Namespace" && obj.group().is_empty() {
        label
    } else {
        subdomain
    };
    for msg in name_rule(&obj.name) {
        out.push(invalid("metadata.name", &obj.name, msg));
    }
    let labels = obj
        .body
        .get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(serde_json::Value::as_object);
    for value in labels.into_iter().flat_map(|l| l.values()) {
        let text = value.as_str().unwrap_or_default();
        for msg in label_value(text) {
            out.push(invalid("metadata.labels", text, msg));
        }
    }
    out
}
