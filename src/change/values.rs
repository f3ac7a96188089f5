//! Values as key paths: what `apply` would change in a release's
//! user-supplied values (`helm get values`), with secrets redacted the way
//! `template` redacts them (docs/design.md#secrets).

use serde::Serialize;
use serde_json::Value;

use crate::values::{REDACTED, SecretPaths, is_secret_key, redact};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Op {
    Add,
    Change,
    Remove,
}

impl Op {}

/// One value that would change, already redacted: `from` is the deployed
/// value, `to` bootstrap's (`None` where it is not set).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ValueChange {
    pub path: String,
    pub op: Op,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<Value>,
}

impl ValueChange {
    /// `+ hubble.relay.enabled: true`, `~ k8sServicePort: 6443 → 7445`, `- foo: 1`.
    pub(crate) fn line(&self) -> String {
        let shown = |v: &Option<Value>| v.as_ref().map(scalar).unwrap_or_default();
        match self.op {
            Op::Add => format!("+ {}: {}", self.path, shown(&self.to)),
            Op::Remove => format!("- {}: {}", self.path, shown(&self.from)),
            Op::Change => format!(
                "~ {}: {} → {}",
                self.path,
                shown(&self.from),
                shown(&self.to)
            ),
        }
    }
}

/// A value on one line: strings bare unless they would read as something
/// else, everything else as JSON.
fn scalar(value: &Value) -> String {
    match value {
        Value::String(s)
            if !s.is_empty()
                && s.trim() == s
                && !s.contains('\n')
                && serde_json::from_str::<Value>(s).is_err() =>
        {
            s.clone()
        }
        other => other.to_string(),
    }
}

/// Every leaf where the deployed values and bootstrap's differ, in path
/// order. The comparison is of the real values (a changed password is a
/// change); what is shown is redacted: any value under a secret-looking key
/// or at one of `secrets` (sops-encrypted files) prints as `<redacted>` on
/// both sides.
pub(crate) fn diff(deployed: &Value, desired: &Value, secrets: &SecretPaths) -> Vec<ValueChange> {
    crate::values::diff(deployed, desired)
        .into_iter()
        .map(|d| {
            // As `template` shows values: under a secret-looking key
            // booleans stay (`auth.enabled: true`); a sops file hides all.
            let sops = secrets.covers(&d.path);
            let named = d.path.split('.').any(is_secret_key);
            let show = |v: Option<Value>| {
                v.map(|v| {
                    if sops || named {
                        redact_all(&v, sops)
                    } else {
                        redact(&v)
                    }
                })
            };
            let op = match (&d.left, &d.right) {
                (None, _) => Op::Add,
                (_, None) => Op::Remove,
                _ => Op::Change,
            };
            ValueChange {
                path: d.path,
                op,
                from: show(d.left),
                to: show(d.right),
            }
        })
        .collect()
}

/// Every scalar replaced; booleans and nulls kept unless `booleans`.
fn redact_all(value: &Value, booleans: bool) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), redact_all(v, booleans)))
                .collect(),
        ),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| redact_all(v, booleans)).collect())
        }
        Value::Null => Value::Null,
        Value::Bool(_) if !booleans => value.clone(),
        _ => Value::String(REDACTED.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lines(deployed: Value, desired: Value) -> Vec<String> {
        diff(&deployed, &desired, &SecretPaths::default())
            .iter()
            .map(|c| c.line())
            .collect()
    }

    #[test]
    fn additions_changes_and_removals_by_key_path() {
        assert_eq!(
            lines(
                json!({"k8sServicePort": 6443, "foo": 1, "hubble": {"enabled": true}}),
                json!({"k8sServicePort": 7445, "hubble": {"enabled": true, "relay": {"enabled": true}}}),
            ),
            [
                "- foo: 1",
                "+ hubble.relay.enabled: true",
                "~ k8sServicePort: 6443 → 7445"
            ]
        );
    }

    #[test]
    fn strings_print_bare_unless_they_would_read_as_another_type() {
        assert_eq!(
            lines(json!({"a": "x", "b": "1"}), json!({"a": "y z", "b": "2"})),
            ["~ a: x → y z", "~ b: \"1\" → \"2\""]
        );
    }

    #[test]
    fn a_changed_secret_is_a_change_whose_values_never_show() {
        let changes = diff(
            &json!({"auth": {"password": "old-hunter2"}, "env": [{"name": "X", "token": "t-123456"}]}),
            &json!({"auth": {"password": "new-hunter2"}, "env": [{"name": "X", "token": "t-654321"}]}),
            &SecretPaths::default(),
        );
        let text: Vec<String> = changes.iter().map(|c| c.line()).collect();
        assert_eq!(
            text,
            [
                "~ auth.password: <redacted> → <redacted>",
                "~ env: [{\"name\":\"X\",\"token\":\"<redacted>\"}] → [{\"name\":\"X\",\"token\":\"<redacted>\"}]"
            ]
        );
        let json = serde_json::to_string(&changes).unwrap();
        assert!(
            !json.contains("hunter2") && !json.contains("t-123456"),
            "{json}"
        );
    }

    #[test]
    fn values_from_sops_files_are_redacted_whatever_their_key() {
        let mut secrets = SecretPaths::default();
        secrets.add_leaves(&json!({"relay": {"url": "x"}}));
        assert_eq!(
            diff(
                &json!({"relay": {"url": "https://old-host"}}),
                &json!({"relay": {"url": "https://new-host"}}),
                &secrets
            )[0]
            .line(),
            "~ relay.url: <redacted> → <redacted>"
        );
    }

    #[test]
    fn a_switch_under_a_secret_looking_key_stays_readable() {
        assert_eq!(
            lines(
                json!({}),
                json!({"auth": {"enabled": true, "token": "abcdef"}})
            ),
            ["+ auth.enabled: true", "+ auth.token: <redacted>"]
        );
    }

    #[test]
    fn a_whole_secret_subtree_added_is_redacted() {
        assert_eq!(
            lines(
                json!({}),
                json!({"credentials": {"user": "u", "pass": "p"}})
            ),
            [
                "+ credentials.pass: <redacted>",
                "+ credentials.user: <redacted>"
            ]
        );
    }
}
