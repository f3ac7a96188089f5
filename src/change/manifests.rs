//! The rendered manifests against the deployed ones, object by object: a
//! unified diff of each object's YAML, Secret data redacted on both sides.
//!
//! The deployed side is `helm get manifest` (the release's `Manifest`: the
//! chart's templates without hooks and without `crds/`); the desired side is
//! `helm template --no-hooks` without `--include-crds`, which prints the same
//! parts (helm `pkg/cmd/template.go` appends `rel.Hooks` to `rel.Manifest`
//! only without `--no-hooks`).

use serde::Serialize;
use serde_json::Value;

use super::values::Op;
use crate::helm::redact::Redactor;
use crate::values::REDACTED;

/// What a changed Secret value shows on bootstrap's side: the value stays
/// hidden, the change does not.
pub(crate) const REDACTED_CHANGED: &str = "<redacted, changed>";

/// One object that would change.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ObjectChange {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    pub op: Op,
    /// The unified diff of the object's YAML (deployed → bootstrap's),
    /// secrets redacted.
    pub diff: String,
}

impl ObjectChange {
    /// `DaemonSet kube-system/cilium`, `ClusterRole cilium`.
    pub(crate) fn label(&self) -> String {
        label(&self.kind, self.namespace.as_deref(), &self.name)
    }
}

fn label(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// What identifies an object in a release: kind, namespace, name (the API
/// group is left out so that an apiVersion bump reads as a change, not as a
/// removal and an addition).
type Key = (String, Option<String>, String);

fn key(doc: &Value) -> Key {
    let text = |pointer: &str| doc.pointer(pointer).and_then(Value::as_str);
    (
        text("/kind").unwrap_or("object").to_string(),
        text("/metadata/namespace").map(str::to_string),
        text("/metadata/name").unwrap_or("unnamed").to_string(),
    )
}

/// Every object that differs between `deployed` and `desired`, in the order
/// bootstrap renders them, then the removed ones in deployed order.
/// `redactors` scrub the secret values of the release's values (deployed and
/// bootstrap's) wherever a chart copied them (a ConfigMap, an env var).
pub(crate) fn diff(
    deployed: &[Value],
    desired: &[Value],
    redactors: &[Redactor],
) -> Vec<ObjectChange> {
    let old: Vec<(Key, &Value)> = deployed.iter().map(|d| (key(d), d)).collect();
    let find = |k: &Key| old.iter().find(|(o, _)| o == k).map(|(_, d)| *d);
    let mut changes = Vec::new();
    let mut seen = Vec::new();
    for doc in desired {
        let k = key(doc);
        let before = find(&k);
        seen.push(k.clone());
        if before == Some(doc) {
            continue;
        }
        let op = if before.is_some() {
            Op::Change
        } else {
            Op::Add
        };
        changes.push(change(k, doc, before, Some(doc), op, redactors));
    }
    for (k, doc) in &old {
        if !seen.contains(k) {
            changes.push(change(
                k.clone(),
                doc,
                Some(doc),
                None,
                Op::Remove,
                redactors,
            ));
        }
    }
    changes
}

fn change(
    (kind, namespace, name): Key,
    doc: &Value,
    before: Option<&Value>,
    after: Option<&Value>,
    op: Op,
    redactors: &[Redactor],
) -> ObjectChange {
    let (before, after) = redact_secret_pair(before, after);
    let text = |v: &Option<Value>| v.as_ref().map(crate::yaml::to_string).unwrap_or_default();
    let shown = label(&kind, namespace.as_deref(), &name);
    let unified = similar::TextDiff::from_lines(&text(&before), &text(&after))
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("{shown} (deployed)"),
            &format!("{shown} (bootstrap)"),
        )
        .to_string();
    ObjectChange {
        api_version: doc
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        kind,
        namespace,
        name,
        op,
        diff: redactors.iter().fold(unified, |text, r| r.text(&text)),
    }
}

/// Both sides of a Secret with every `data`/`stringData` value replaced by
/// `<redacted>`; on bootstrap's side a value that differs from the deployed
/// one reads [`REDACTED_CHANGED`], so the hunk still says which key changes.
fn redact_secret_pair(
    before: Option<&Value>,
    after: Option<&Value>,
) -> (Option<Value>, Option<Value>) {
    let is_secret = |v: &Value| v.get("kind").and_then(Value::as_str) == Some("Secret");
    let mut old = before.cloned();
    let mut new = after.cloned();
    for field in ["data", "stringData"] {
        let old_values = before
            .filter(|v| is_secret(v))
            .and_then(|v| v.get(field))
            .and_then(Value::as_object);
        if let Some(Value::Object(map)) = new
            .as_mut()
            .filter(|v| is_secret(v))
            .and_then(|v| v.get_mut(field))
        {
            for (k, value) in map.iter_mut() {
                let same = old_values.and_then(|o| o.get(k)) == Some(value);
                let unchanged = same || before.is_none();
                *value = Value::String(
                    if unchanged {
                        REDACTED
                    } else {
                        REDACTED_CHANGED
                    }
                    .to_string(),
                );
            }
        }
        if let Some(Value::Object(map)) = old
            .as_mut()
            .filter(|v| is_secret(v))
            .and_then(|v| v.get_mut(field))
        {
            for value in map.values_mut() {
                *value = Value::String(REDACTED.to_string());
            }
        }
    }
    (old, new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm(name: &str, value: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"},
               "data": {"port": value}})
    }

    fn secret(token: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
               "stringData": {"token": token, "user": "admin"}})
    }

    #[test]
    fn identical_objects_are_no_change() {
        let docs = [cm("a", "1"), cm("b", "2")];
        assert!(diff(&docs, &docs, &[]).is_empty());
    }

    #[test]
    fn a_changed_object_is_one_hunk_with_headers() {
        let changes = diff(&[cm("a", "6443")], &[cm("a", "7445")], &[]);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].op, Op::Change);
        assert_eq!(changes[0].label(), "ConfigMap ns/a");
        assert_eq!(
            changes[0].diff,
            "--- ConfigMap ns/a (deployed)\n+++ ConfigMap ns/a (bootstrap)\n@@ -4,4 +4,4 @@\n   name: a\n   namespace: ns\n data:\n-  port: \"6443\"\n+  port: \"7445\"\n"
        );
    }

    #[test]
    fn added_and_removed_objects_come_whole() {
        let changes = diff(&[cm("old", "1")], &[cm("new", "1")], &[]);
        let ops: Vec<(String, Op)> = changes.iter().map(|c| (c.name.clone(), c.op)).collect();
        assert_eq!(
            ops,
            [
                ("new".to_string(), Op::Add),
                ("old".to_string(), Op::Remove)
            ]
        );
        assert!(
            changes[0].diff.contains("+kind: ConfigMap"),
            "{}",
            changes[0].diff
        );
        assert!(
            changes[1].diff.contains("-kind: ConfigMap"),
            "{}",
            changes[1].diff
        );
    }

    #[test]
    fn secret_data_is_redacted_on_both_sides_and_the_changed_key_named() {
        let changes = diff(&[secret("old-token-1")], &[secret("new-token-2")], &[]);
        let text = &changes[0].diff;
        assert!(!text.contains("token-"), "{text}");
        assert!(text.contains("-  token: <redacted>\n"), "{text}");
        assert!(text.contains("+  token: <redacted, changed>\n"), "{text}");
        assert!(text.contains("   user: <redacted>\n"), "{text}");
    }

    #[test]
    fn secret_values_copied_into_other_objects_are_scrubbed() {
        let values = json!({"auth": {"password": "hunter2-pw"}});
        let redactor = Redactor::new(&[], Some((&values, &Default::default())));
        let changes = diff(&[], &[cm("a", "hunter2-pw")], &[redactor]);
        assert!(!changes[0].diff.contains("hunter2"), "{}", changes[0].diff);
    }
}
