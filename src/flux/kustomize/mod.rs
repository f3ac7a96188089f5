//! kustomize's built-in transformers, on objects already loaded.
//!
//! A kustomization runs them in the order of kubernetes-sigs/kustomize
//! `api/internal/target/kusttarget_configplugin.go`
//! (`configureBuiltinTransformers`): `patchesStrategicMerge`, `patches`,
//! `namespace`, `namePrefix`, `nameSuffix`, (labels, annotations),
//! `patchesJson6902`, (replicas, images), `replacements`; after its
//! `resources` and `components` were accumulated (`kusttarget.go`
//! `accumulateTarget`). Labels and annotations ([`metadata`]) are applied:
//! later patch targets select by them, and Flux reads its annotations.
//! Replicas and images change no name and nothing the scan reads, so they
//! are not applied.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

use regex::Regex;
use serde_json::{Map, Value};

use super::object::Object;

mod json_patch;
pub mod metadata;
mod replacement;

pub use json_patch::{PatchError, json6902};
#[cfg(test)]
use replacement::set_field;
pub use replacement::{ReplacementError, get_field, replace};

thread_local! {
    /// Selector patterns, compiled once (a patch's target is tried on every object).
    static REGEXES: RefCell<HashMap<String, Option<Regex>>> = RefCell::new(HashMap::new());
}

/// Whether `value` matches the anchored regex `pattern` (kustomize
/// `types.SelectorRegex`: `^(?:pattern)$`, Go's RE2 syntax). A name is a
/// regex even when it reads as a literal: `${APP}` selects nothing (`$` ends
/// the text), so it is never compared as text first.
fn regex_match(pattern: &str, value: &str) -> bool {
    REGEXES.with(|cache| {
        cache
            .borrow_mut()
            .entry(pattern.to_string())
            .or_insert_with(|| Regex::new(&format!("^(?:{})$", go_regex(pattern))).ok())
            .as_ref()
            .is_some_and(|re| re.is_match(value))
    })
}

/// `pattern` in Go's regexp syntax, rewritten where Rust's reads it
/// otherwise: Go takes a `{` that opens no repetition (`{APP}`, `{`) and
/// a `}` outside one as literal characters, Rust rejects them.
fn go_regex(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len());
    let mut i = 0;
    let mut in_class = false;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                out.push(c);
                if let Some(next) = chars.get(i + 1) {
                    out.push(*next);
                }
                i += 2;
                continue;
            }
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            '{' if !in_class => {
                let rest: String = chars[i..].iter().collect();
                let repetition = rest
                    .find('}')
                    .map(|end| &rest[1..end])
                    .is_some_and(|inner| {
                        let (min, max) = inner.split_once(',').unwrap_or((inner, "0"));
                        !min.is_empty()
                            && min.chars().all(|c| c.is_ascii_digit())
                            && max.chars().all(|c| c.is_ascii_digit())
                    });
                if repetition {
                    let end = i + rest.find('}').unwrap_or(0);
                    out.extend(&chars[i..=end]);
                    i = end + 1;
                    continue;
                }
                out.push_str("\\{");
                i += 1;
                continue;
            }
            '}' if !in_class => {
                out.push_str("\\}");
                i += 1;
                continue;
            }
            _ => {}
        }
        out.push(c);
        i += 1;
    }
    out
}

fn non_empty<'a>(selector: &'a Value, key: &str) -> Option<&'a str> {
    selector
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// kustomize `resid.EffectiveNamespace`: cluster-scoped kinds have none,
/// an empty namespace is `default`.
fn effective_namespace<'a>(kind: &str, namespace: Option<&'a str>) -> &'a str {
    if is_cluster_scoped(kind) {
        "_non_namespaceable_"
    } else {
        match namespace {
            None | Some("") => "default",
            Some(ns) => ns,
        }
    }
}

/// The object's group and version.
fn group_version(obj: &Object) -> (&str, &str) {
    match obj.api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", obj.api_version.as_str()),
    }
}

/// Group, version and kind as regexes (kustomize `SelectorRegex.MatchGvk`).
fn gvk_matches(obj: &Object, selector: &Value) -> bool {
    let (group, version) = group_version(obj);
    non_empty(selector, "group").is_none_or(|g| regex_match(g, group))
        && non_empty(selector, "version").is_none_or(|v| regex_match(v, version))
        && non_empty(selector, "kind").is_none_or(|k| regex_match(k, &obj.kind))
}

fn labels_match(obj: &Object, selector: &Value) -> bool {
    non_empty(selector, "labelSelector")
        .is_none_or(|s| label_selector(s, obj.body.pointer("/metadata/labels")))
        && non_empty(selector, "annotationSelector")
            .is_none_or(|s| label_selector(s, obj.body.pointer("/metadata/annotations")))
}

/// The object's original (name, namespace), before any kustomize rename.
fn original_id(obj: &Object) -> (&str, Option<&str>) {
    match obj.previous_ids.first() {
        Some((name, ns)) => (name, ns.as_deref()),
        None => (&obj.name, obj.namespace.as_deref()),
    }
}

/// Every (name, namespace) the object had: current first, then previous.
fn all_ids(obj: &Object) -> Vec<(&str, Option<&str>)> {
    std::iter::once((obj.name.as_str(), obj.namespace.as_deref()))
        .chain(
            obj.previous_ids
                .iter()
                .map(|(n, ns)| (n.as_str(), ns.as_deref())),
        )
        .collect()
}

/// A patch's `target:` (kustomize `resWrangler.Select`): name and
/// namespace are anchored regexes matched against the original or the
/// current id (effective namespaces), group, version and kind are regexes
/// too, and label and annotation selectors are Kubernetes selectors.
pub fn selected(obj: &Object, selector: &Value) -> bool {
    let (org_name, org_ns) = original_id(obj);
    let ns_ok = non_empty(selector, "namespace").is_none_or(|n| {
        regex_match(n, effective_namespace(&obj.kind, org_ns))
            || regex_match(n, effective_namespace(&obj.kind, obj.namespace.as_deref()))
    });
    let name_ok = non_empty(selector, "name")
        .is_none_or(|n| regex_match(n, org_name) || regex_match(n, &obj.name));
    ns_ok && name_ok && gvk_matches(obj, selector) && labels_match(obj, selector)
}

/// A replacement's `source:` (kustomize `resid.IsSelectedBy` on every id the
/// object had): exact name, effective namespace, group, version and kind.
pub fn replacement_source(obj: &Object, selector: &Value) -> bool {
    let (group, version) = group_version(obj);
    non_empty(selector, "group").is_none_or(|g| g == group)
        && non_empty(selector, "version").is_none_or(|v| v == version)
        && non_empty(selector, "kind").is_none_or(|k| k == obj.kind)
        && all_ids(obj).into_iter().any(|(name, ns)| {
            non_empty(selector, "name").is_none_or(|n| n == name)
                && non_empty(selector, "namespace").is_none_or(|n| {
                    effective_namespace(&obj.kind, Some(n)) == effective_namespace(&obj.kind, ns)
                })
        })
}

/// A replacement target's `select:` and `reject:` (kustomize
/// `TargetSelectorRegex`): regexes on every id the object had, namespaces as
/// written.
pub fn replacement_target(obj: &Object, select: &Value, rejects: &[&Value]) -> bool {
    let id_matches = |selector: &Value, (name, ns): (&str, Option<&str>)| {
        gvk_matches(obj, selector)
            && non_empty(selector, "name").is_none_or(|n| regex_match(n, name))
            && non_empty(selector, "namespace")
                .is_none_or(|n| regex_match(n, ns.unwrap_or_default()))
    };
    let ids = all_ids(obj);
    let empty = |r: &Value| {
        ["group", "version", "kind", "name", "namespace"]
            .iter()
            .all(|k| non_empty(r, k).is_none())
    };
    labels_match(obj, select)
        && !rejects
            .iter()
            .any(|r| !empty(r) && ids.iter().any(|id| id_matches(r, *id)))
        && ids.iter().any(|id| id_matches(select, *id))
}

/// A Kubernetes label selector (`k8s.io/apimachinery` `labels.Parse`):
/// comma-separated requirements `k`, `!k`, `k=v`, `k==v`, `k!=v`,
/// `k in (a,b)`, `k notin (a,b)`, `k>n`, `k<n`. One that does not parse
/// selects nothing.
pub fn label_selector(selector: &str, labels: Option<&Value>) -> bool {
    let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let Some(terms) = split_requirements(selector) else {
        return false;
    };
    terms.iter().all(|term| {
        let term = term.trim();
        let set = |op: &str| -> Option<(String, Vec<String>)> {
            let (k, rest) = term
                .split_once(&format!(" {op} "))
                .or_else(|| term.split_once(&format!(" {op}(")))?;
            let rest = rest.trim();
            let rest = rest.strip_prefix('(').unwrap_or(rest);
            let inner = rest.strip_suffix(')')?;
            Some((
                k.trim().to_string(),
                inner.split(',').map(|v| v.trim().to_string()).collect(),
            ))
        };
        if let Some((k, values)) = set("notin") {
            get(&k).is_none_or(|v| !values.iter().any(|x| x == v))
        } else if let Some((k, values)) = set("in") {
            get(&k).is_some_and(|v| values.iter().any(|x| x == v))
        } else if let Some((k, v)) = term.split_once("!=") {
            get(k.trim()) != Some(v.trim())
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            get(k.trim()) == Some(v.trim())
        } else if let Some((k, v)) = term.split_once('>') {
            compare(get(k.trim()), v, |a, b| a > b)
        } else if let Some((k, v)) = term.split_once('<') {
            compare(get(k.trim()), v, |a, b| a < b)
        } else if let Some(k) = term.strip_prefix('!') {
            get(k.trim()).is_none()
        } else if term.contains(' ') || term.is_empty() {
            false
        } else {
            get(term).is_some()
        }
    })
}

fn compare(label: Option<&str>, bound: &str, op: impl Fn(i64, i64) -> bool) -> bool {
    match (
        label.and_then(|l| l.parse::<i64>().ok()),
        bound.trim().parse::<i64>(),
    ) {
        (Some(a), Ok(b)) => op(a, b),
        _ => false,
    }
}

/// Splits a selector at the commas outside parentheses.
fn split_requirements(selector: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut current = String::new();
    for c in selector.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        if depth < 0 {
            return None;
        }
        current.push(c);
    }
    (depth == 0).then(|| {
        out.push(current);
        out
    })
}

/// Re-reads kind, name and namespace from the body after a transformer.
pub fn sync(obj: &mut Object) {
    let before = (obj.name.clone(), obj.namespace.clone());
    let text = |p: &str| {
        obj.body
            .pointer(p)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    obj.api_version = text("/apiVersion").unwrap_or_default();
    if let Some(kind) = text("/kind") {
        obj.kind = kind;
    }
    // A substitution can leave it empty or null.
    obj.name = text("/metadata/name").unwrap_or_default();
    obj.namespace = text("/metadata/namespace").filter(|n| !n.is_empty());
    if (&obj.name, &obj.namespace) != (&before.0, &before.1) && !obj.previous_ids.contains(&before)
    {
        obj.previous_ids.push(before);
    }
}

/// A strategic-merge patch as kustomize applies it to a kind without a Go
/// schema (custom resources), kyaml `merge2` (`kyaml/yaml/merge2/merge2.go`
/// on the walker of `kyaml/yaml/walk`): maps merge, lists and scalars
/// replace, a null deletes, and the nulls of a map the patch adds (or
/// puts with `$patch: replace`) are dropped; `$patch: delete` deletes the
/// map it is in (at the top: the object, returns false).
pub fn strategic_merge(body: &mut Value, patch: &Value) -> bool {
    strategic_merge_styled(body, &mut BTreeSet::new(), &mut BTreeSet::new(), patch)
}

/// [`strategic_merge`] onto an object whose scalars at `quoted` (JSON
/// pointers, [`crate::flux::yaml_style`]) are written quoted or as blocks:
/// a scalar patched onto one of them keeps that style (kyaml
/// `FieldSetter`), so kustomize prints it quoted and it is applied as the
/// string of its text.
///
/// The walk visits every field of the object reached through maps, patched
/// or not, and a null the patch does not set there is kept only when it was
/// written (`null`, `~`: kyaml `MakePersistentNullNode`); one written as
/// nothing (at `bare_nulls`, which lose those) is dropped (`FieldSetter`
/// clears a null field): any patch on the object drops them, so helm sees
/// the chart's default there, not a null. The same walk quotes every plain
/// string a YAML 1.1 reader would read as something else (kyaml
/// `FieldSetter`, `IsYaml1_1NonString`: `yes`, `on`, `0x1F`), so a later
/// patch onto one of them is a string too; they join `quoted`.
pub fn strategic_merge_styled(
    body: &mut Value,
    quoted: &mut BTreeSet<String>,
    bare_nulls: &mut BTreeSet<String>,
    patch: &Value,
) -> bool {
    if patch.get("$patch").and_then(Value::as_str) == Some("delete") {
        return false;
    }
    bare_nulls.retain(|pointer| !drop_bare_null(body, pointer));
    merge(body, patch, &mut String::new(), quoted);
    quoted_by_walk(body, &mut String::new(), quoted);
    true
}

/// The strings kyaml's merge walk quotes in `body`: reached through maps
/// (it does not go into lists), plain in the object (`quoted` holds the
/// others already) and read by YAML 1.1 as something else.
fn quoted_by_walk(body: &Value, at: &mut String, quoted: &mut BTreeSet<String>) {
    match body {
        Value::Object(map) => {
            for (k, v) in map {
                let len = at.len();
                at.push('/');
                at.push_str(&k.replace('~', "~0").replace('/', "~1"));
                quoted_by_walk(v, at, quoted);
                at.truncate(len);
            }
        }
        Value::String(s)
            if !at.is_empty()
                && !s.is_empty()
                && !s.contains('\n')
                && crate::flux::varsub::reread(s).is_some_and(|r| !r.is_string()) =>
        {
            quoted.insert(at.clone());
        }
        _ => {}
    }
}

/// Removes the null at `pointer` when only maps lead to it (the walk does
/// not go into lists it does not merge); whether it did.
fn drop_bare_null(body: &mut Value, pointer: &str) -> bool {
    let mut steps: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect();
    let Some(last) = steps.pop() else {
        return false;
    };
    let mut at = body;
    for step in &steps {
        match at.get_mut(step.as_str()) {
            Some(next @ Value::Object(_)) => at = next,
            _ => return false,
        }
    }
    match at.as_object_mut() {
        Some(map) if map.get(&last).is_some_and(Value::is_null) => {
            map.remove(&last);
            true
        }
        _ => false,
    }
}

/// The scalars go-yaml quotes when it prints `body` (kyaml reading an
/// object back from JSON): the strings that would not read back as the same
/// string unquoted, and those with line breaks (printed as blocks).
pub fn canonical_quoted(body: &Value) -> BTreeSet<String> {
    fn walk(v: &Value, at: &mut String, out: &mut BTreeSet<String>) {
        let step = |at: &mut String, key: &str, v: &Value, out: &mut BTreeSet<String>| {
            let len = at.len();
            at.push('/');
            at.push_str(&key.replace('~', "~0").replace('/', "~1"));
            walk(v, at, out);
            at.truncate(len);
        };
        match v {
            Value::Object(map) => map.iter().for_each(|(k, v)| step(at, k, v, out)),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .for_each(|(i, v)| step(at, &i.to_string(), v, out)),
            Value::String(s) => {
                let plain = !s.contains('\n')
                    && crate::flux::varsub::reread(s)
                        .is_some_and(|r| r == Value::String(s.clone()));
                if !plain && !at.is_empty() {
                    out.insert(at.clone());
                }
            }
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    walk(body, &mut String::new(), &mut out);
    out
}

fn merge(target: &mut Value, patch: &Value, at: &mut String, quoted: &BTreeSet<String>) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            if p.get("$patch").and_then(Value::as_str) == Some("replace") {
                let mut replaced = p.clone();
                replaced.remove("$patch");
                if let Value::Object(fresh) = added(&Value::Object(replaced)) {
                    *t = fresh;
                }
                return;
            }
            for (k, v) in p {
                if k.starts_with('$') {
                    continue;
                }
                let deletes = v.get("$patch").and_then(Value::as_str) == Some("delete");
                match t.get_mut(k) {
                    _ if v.is_null() || deletes => {
                        t.remove(k);
                    }
                    // Onto a map: merged. Onto a null: added as if absent.
                    Some(existing) if existing.is_object() || !v.is_object() => {
                        let len = at.len();
                        at.push('/');
                        at.push_str(&k.replace('~', "~0").replace('/', "~1"));
                        merge(existing, v, at, quoted);
                        at.truncate(len);
                    }
                    _ => {
                        t.insert(k.clone(), added(v));
                    }
                }
            }
        }
        (t, p) if quoted.contains(at.as_str()) && !t.is_object() && !t.is_array() => {
            *t = match p {
                Value::Object(_) | Value::Array(_) | Value::String(_) => p.clone(),
                other => Value::String(other.to_string()),
            };
        }
        (t, p) => *t = p.clone(),
    }
}

/// A patch's value where the object has none (or a null): its maps without
/// their nulls and `$patch: delete` entries (kyaml walks the added map as
/// its own destination).
fn added(patch: &Value) -> Value {
    if !patch.is_object() {
        return patch.clone();
    }
    let mut fresh = Value::Object(Map::new());
    merge(&mut fresh, patch, &mut String::new(), &BTreeSet::new());
    fresh
}

/// The namespace transformer (`api/filters/namespace/namespace.go`
/// `metaNamespaceHack`): every namespaced object (unknown kinds count as
/// namespaced, as in kustomize) gets `namespace`; and a `Namespace` object is
/// renamed to it (the `metadata/name` of kind Namespace among the namespace
/// field specs, `api/konfig/builtinpluginconsts/namespace.go`).
pub fn set_namespace(objects: &mut [Object], namespace: &str) {
    for obj in objects.iter_mut() {
        // kustomize's NamespaceTransformer records every object's id as a
        // previous one (`StorePreviousId`), changed or not.
        obj.previous_ids
            .push((obj.name.clone(), obj.namespace.clone()));
        let key = if obj.kind == "Namespace" && obj.group().is_empty() {
            "name"
        } else if is_cluster_scoped(&obj.kind) {
            continue;
        } else {
            "namespace"
        };
        if let Some(meta) = obj.body.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert(key.into(), Value::String(namespace.into()));
        }
        sync(obj);
    }
}

/// namePrefix/nameSuffix: `metadata.name` of every object but the kinds
/// kustomize skips (`api/filters/prefixsuffix`, builtins `PrefixTransformer`
/// `prefixFieldSpecsToSkip`: CustomResourceDefinition, APIService, Namespace).
pub fn add_prefix_suffix(objects: &mut [Object], prefix: &str, suffix: &str) {
    for obj in objects.iter_mut().filter(|o| {
        !matches!(
            o.kind.as_str(),
            "CustomResourceDefinition" | "APIService" | "Namespace"
        )
    }) {
        // Two transformers (kustomize `PrefixTransformer`, then
        // `SuffixTransformer`), each recording the name it changed: the
        // prefixed name is an id of its own that a replacement can select.
        for (p, s) in [(prefix, ""), ("", suffix)] {
            if p.is_empty() && s.is_empty() {
                continue;
            }
            let name = format!("{p}{}{s}", obj.name);
            if let Some(meta) = obj.body.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.insert("name".into(), Value::String(name));
            }
            sync(obj);
        }
    }
}

/// Kinds kustomize's namespace transformer leaves alone (built-in cluster-scoped
/// kinds; like kustomize, unknown custom kinds are treated as namespaced).
pub fn is_cluster_scoped(kind: &str) -> bool {
    matches!(
        kind,
        "Namespace"
            | "CustomResourceDefinition"
            | "ClusterRole"
            | "ClusterRoleBinding"
            | "PersistentVolume"
            | "StorageClass"
            | "PriorityClass"
            | "IngressClass"
            | "RuntimeClass"
            | "CSIDriver"
            | "APIService"
            | "MutatingWebhookConfiguration"
            | "ValidatingWebhookConfiguration"
            | "ValidatingAdmissionPolicy"
            | "ValidatingAdmissionPolicyBinding"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_patch_and_field_paths() {
        let mut body =
            json!({"metadata": {"name": "a"}, "spec": {"list": [{"name": "x", "v": 1}]}});
        json6902(
            &mut body,
            &[
                json!({"op": "replace", "path": "/metadata/name", "value": "b"}),
                json!({"op": "add", "path": "/spec/releaseName", "value": "r"}),
            ],
        )
        .unwrap();
        assert_eq!(body["metadata"]["name"], "b");
        assert_eq!(get_field(&body, "spec.list.[name=x].v"), Some(&json!(1)));
        assert!(set_field(
            &mut body,
            "spec.list.[name=x].v",
            json!(2),
            false
        ));
        assert!(!set_field(&mut body, "spec.missing.x", json!(2), false));
        assert!(set_field(&mut body, "spec.missing.x", json!(2), true));
        assert_eq!(body["spec"]["missing"]["x"], 2);
    }

    #[test]
    fn selector_names_are_go_regexes() {
        // `$` ends the text: a name written `${APP}` selects nothing, even
        // an object named `${APP}`.
        assert!(!regex_match("${APP}", "${APP}"));
        assert!(regex_match("c.*", "cilium"));
        assert!(regex_match("a{2}", "aa"));
        assert!(regex_match("x{APP}", "x{APP}"));
        assert!(regex_match("cilium", "cilium") && !regex_match("cil", "cilium"));
    }

    #[test]
    fn label_selectors_equality_and_set_based() {
        let labels = json!({"tier": "core", "app": "cilium", "n": "5"});
        let m = |s: &str| label_selector(s, Some(&labels));
        assert!(m("tier in (core,edge)"));
        assert!(m("tier in (core, edge),app=cilium"));
        assert!(!m("tier notin (core,edge)"));
        assert!(m("zone notin (a)"));
        assert!(m("tier,!zone"));
        assert!(m("app==cilium,tier!=edge"));
        assert!(m("n>4") && !m("n<4"));
        assert!(!m("tier in (edge"));
    }

    #[test]
    fn a_merge_walk_quotes_yaml_1_1_words_for_the_next_patch() {
        // What kustomize v0.21.1 makes of `replicas: yes` patched with 5:
        // the int 5 by a first patch; "5" once an earlier patch's walk has
        // quoted `yes` (kyaml FieldSetter, IsYaml1_1NonString). `${N}` is a
        // string to YAML 1.1 too: never quoted.
        let object =
            json!({"spec": {"values": {"replicas": "yes", "other": "${N}", "list": ["on"]}}});
        let five = json!({"spec": {"values": {"replicas": 5, "other": 5}}});
        let mut once = object.clone();
        let mut quoted = BTreeSet::new();
        strategic_merge_styled(&mut once, &mut quoted, &mut BTreeSet::new(), &five);
        assert_eq!(once["spec"]["values"]["replicas"], json!(5));
        let mut twice = object.clone();
        let mut quoted = BTreeSet::new();
        let unrelated = json!({"spec": {"releaseName": "legacy"}});
        strategic_merge_styled(&mut twice, &mut quoted, &mut BTreeSet::new(), &unrelated);
        assert_eq!(
            quoted,
            BTreeSet::from(["/spec/values/replicas".to_string()]),
            "lists are not walked, `${{N}}` reads as a string"
        );
        strategic_merge_styled(&mut twice, &mut quoted, &mut BTreeSet::new(), &five);
        assert_eq!(twice["spec"]["values"]["replicas"], json!("5"));
        assert_eq!(twice["spec"]["values"]["other"], json!(5));
    }

    #[test]
    fn strategic_merge_on_custom_resources() {
        let mut body = json!({"spec": {"a": 1, "b": [1, 2], "c": {"d": 1}}});
        assert!(strategic_merge(
            &mut body,
            &json!({"spec": {"a": null, "b": [3], "c": {"e": 2}}})
        ));
        assert_eq!(body, json!({"spec": {"b": [3], "c": {"d": 1, "e": 2}}}));
        assert!(!strategic_merge(&mut body, &json!({"$patch": "delete"})));
    }

    #[test]
    fn strategic_merge_drops_nulls_as_kyaml_does() {
        let object = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: app\n  annotations:\n\
            spec:\n  values:\n    resources:\n      limits:\n      requests: ~\n      other: null\n      tagged: !!null\n\
            \x20   list:\n      - a:\n        b: 1\n    keep:\n    nulled: 1\n    overmap:\n    overscalar:\n\
            \x20   replaced:\n      x: 1\n";
        let patch = "spec:\n  values:\n    keep: 1\n    nulled:\n    overmap:\n      a: 1\n      b: null\n      c:\n\
            \x20     d:\n        e:\n    overscalar: 2\n    added:\n      f: 1\n      g:\n      h: ~\n\
            \x20     gone:\n        $patch: delete\n    replaced:\n      $patch: replace\n      y: 2\n      z:\n";
        let mut body = crate::flux::kyaml::from_multiple(object).unwrap().remove(0);
        let styles = crate::flux::yaml_style::styles(object).remove(0);
        let mut bare = styles.bare_nulls.clone();
        let patch = crate::flux::kyaml::from_multiple(patch).unwrap().remove(0);
        let mut quoted = styles.quoted.clone();
        assert!(strategic_merge_styled(
            &mut body,
            &mut quoted,
            &mut bare,
            &patch
        ));
        // What kustomize v0.21.1's patchstrategicmerge filter makes of them.
        assert_eq!(
            body,
            json!({"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                "metadata": {"name": "app"},
                "spec": {"values": {"added": {"f": 1}, "keep": 1, "list": [{"a": null, "b": 1}],
                    "overmap": {"a": 1, "d": {}}, "overscalar": 2, "replaced": {"y": 2},
                    "resources": {"other": null, "requests": null}}}})
        );
        // Only the null inside the list is left written as nothing.
        assert_eq!(
            bare.into_iter().collect::<Vec<_>>(),
            ["/spec/values/list/0/a"]
        );
        // Without a patch nothing is dropped.
        let untouched = crate::flux::kyaml::from_multiple(object).unwrap().remove(0);
        assert!(
            untouched
                .pointer("/spec/values/resources/limits")
                .is_some_and(Value::is_null)
        );
    }
}
