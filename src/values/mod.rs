//! Values trees: deep merge, digests and redaction of secrets; `stack`: a
//! release's values as the layers of the merge order.

pub(crate) mod shape;
pub(crate) mod stack;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Merges `overlay` into `base`: maps merge key by key, everything else
/// (scalars and lists) is replaced, as Helm merges values files.
pub(crate) fn merge(base: &mut Value, overlay: Value) {
    match (base, overlay) {
        (Value::Object(base), Value::Object(overlay)) => {
            for (key, value) in overlay {
                match base.get_mut(&key) {
                    Some(existing) if existing.is_object() && value.is_object() => {
                        merge(existing, value)
                    }
                    _ => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, overlay) => *base = overlay,
    }
}

/// [`merge`] of a borrowed overlay: only what lands in `base` is copied.
pub(crate) fn merge_from(base: &mut Value, overlay: &Value) {
    let (Value::Object(base), Value::Object(overlay)) = (&mut *base, overlay) else {
        *base = overlay.clone();
        return;
    };
    if base.is_empty() {
        // The first layer of a stack: a copy keeps its keys' hashes.
        base.clone_from(overlay);
        return;
    }
    for (key, value) in overlay {
        match base.get_mut(key) {
            Some(existing) if existing.is_object() && value.is_object() => {
                merge_from(existing, value)
            }
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// SHA-256 over a canonical JSON form (keys sorted), so the digest does not
/// depend on the order keys were written in.
pub(crate) fn digest(value: &Value) -> String {
    let mut hasher = Sha256::new();
    hasher.update(canonical(value).as_bytes());
    let bytes = hasher.finalize();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

pub(crate) fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&map[k])))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

/// Applies one `--set` argument to `target`: `a.b=c`, several separated by
/// commas (`a=1,b=2`), `\\.` and `\\,` for a literal dot or comma. Values are
/// typed as helm's `--set` types them (helm pkg/strvals/parser.go `typedVal`):
/// `true`/`false`, `null`, and integers without a leading zero become those;
/// everything else stays a string. Lists (`a[0]`, `{a,b}`) are not taken:
/// put them in a `--values` file.
pub(crate) fn set_path(target: &mut Value, assignments: &str) -> Result<(), SetError> {
    for assignment in split_unescaped(assignments, ',') {
        let Some((path, value)) = assignment.split_once('=') else {
            return Err(SetError::NotAssignment(assignment));
        };
        if path.contains('[') || value.starts_with('{') {
            return Err(SetError::List(assignment));
        }
        let keys: Vec<String> = split_unescaped(path, '.');
        if keys.iter().any(String::is_empty) {
            return Err(SetError::EmptyKey {
                path: path.to_string(),
                assignment,
            });
        }
        let mut overlay = typed(&value.replace("\\,", ","));
        for key in keys.into_iter().rev() {
            overlay = Value::Object(Map::from_iter([(key, overlay)]));
        }
        merge(target, overlay);
    }
    Ok(())
}

/// Why a `--set` argument was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SetError {
    #[error("`{0}` is not `path=value`")]
    NotAssignment(String),
    #[error("`{0}`: lists are not taken by --set; put them in a --values file")]
    List(String),
    #[error("`{assignment}` has an empty key in `{path}`")]
    EmptyKey { assignment: String, path: String },
}

fn split_unescaped(text: &str, separator: char) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek() == Some(&separator) {
            parts
                .last_mut()
                .unwrap_or(&mut String::new())
                .push(separator);
            chars.next();
        } else if c == separator {
            parts.push(String::new());
        } else if let Some(last) = parts.last_mut() {
            last.push(c);
        }
    }
    parts
}

fn typed(text: &str) -> Value {
    match text {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        "null" => Value::Null,
        _ => {
            let digits = text.strip_prefix('-').unwrap_or(text);
            let leading_zero = digits.len() > 1 && digits.starts_with('0');
            match text.parse::<i64>() {
                Ok(n) if !leading_zero => Value::from(n),
                _ => Value::String(text.to_string()),
            }
        }
    }
}

pub(crate) const REDACTED: &str = "<redacted>";

/// Key names whose values are treated as secrets wherever values are shown.
const SECRET_WORDS: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "credential",
    "privatekey",
    "private_key",
    "apikey",
    "api_key",
    "accesskey",
    "access_key",
    "auth",
    "kubeconfig",
    // kubeconfig's credentials (`client-key-data`, `client-certificate-data`;
    // `token` and `certificate-authority-data` are caught above) and other
    // common names of keys and credentials.
    "keydata",
    "certificatedata",
    "clientkey",
    "clientcert",
    "privkey",
    "signingkey",
    "encryptionkey",
    "sessionkey",
    "sharedkey",
    "masterkey",
    "sshkey",
    "bearer",
    "cookie",
    "connectionstring",
    "tlskey",
    // Reported missing by a redaction campaign: short and compound names of
    // passwords, keys and tokens, and webhook URLs (their path is a token).
    "pwd",
    "passphrase",
    "jwt",
    "cakey",
    "licensekey",
    "licencekey",
    "webhookurl",
    "dsn",
];

pub(crate) fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase().replace(['-', '_'], "");
    // `existingSecret: name` and `secretName` hold names of Secrets, not secrets.
    if key.ends_with("name") || key.starts_with("existing") || key.ends_with("ref") {
        return false;
    }
    key == "key" || key.ends_with(".key") || SECRET_WORDS.iter().any(|word| key.contains(word))
}

/// [`is_secret_key`] for `key` inside `map`: a bare `key` next to
/// `operator`, `effect`, `value(s)`, `name` or `path` names something (a
/// toleration's taint, a selector's label, the entry of a Secret or
/// ConfigMap a `secretKeyRef`/`items` picks), and holds no secret.
pub(crate) fn is_secret_entry(key: &str, map: &Map<String, Value>) -> bool {
    const NAMING: &[&str] = &["operator", "effect", "value", "values", "name", "path"];
    if key.eq_ignore_ascii_case("key") && NAMING.iter().any(|k| map.contains_key(*k)) {
        return false;
    }
    is_secret_key(key)
}

/// Where a release's values hold secrets whatever their key is called: the
/// leaves of sops-encrypted values files (docs/design.md#secrets), as dotted
/// paths the way [`leaves`] writes them. A path covers everything under it,
/// so a later layer that puts a map where the file had a scalar stays hidden.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretPaths(std::collections::BTreeSet<String>);

/// Shorter strings are too common to scrub from free text without mangling
/// it ("true", "1"); trees are still redacted by path.
pub(crate) const MIN_SCRUBBED_LEN: usize = 4;

impl SecretPaths {
    /// Every leaf of `values` (a decrypted file) is a secret.
    pub fn add_leaves(&mut self, values: &Value) {
        self.0.extend(leaves(values));
    }

    pub fn extend(&mut self, other: &SecretPaths) {
        self.0.extend(other.0.iter().cloned());
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the dotted `path` is, or is under, a secret path.
    pub fn covers(&self, path: &str) -> bool {
        let mut at = path;
        loop {
            if self.0.contains(at) {
                return true;
            }
            match at.rfind('.') {
                Some(dot) => at = &at[..dot],
                None => return false,
            }
        }
    }

    /// The scalars of `values` at secret paths (at least
    /// [`MIN_SCRUBBED_LEN`] long), for scrubbing free text that may quote
    /// them (helm's errors, rendered manifests).
    pub fn strings(&self, values: &Value) -> Vec<String> {
        let mut out = Vec::new();
        if !self.is_empty() {
            self.strings_at("", values, false, &mut out);
        }
        out.retain(|s| s.len() >= MIN_SCRUBBED_LEN);
        out.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        out.dedup();
        out
    }

    fn strings_at(&self, path: &str, value: &Value, secret: bool, out: &mut Vec<String>) {
        let secret = secret || (!path.is_empty() && self.covers(path));
        match value {
            Value::Object(map) => {
                for (key, v) in map {
                    self.strings_at(&join(path, key), v, secret, out);
                }
            }
            Value::Array(items) => items
                .iter()
                .for_each(|v| self.strings_at(path, v, secret, out)),
            Value::String(s) if secret => out.push(s.clone()),
            Value::Number(n) if secret => out.push(n.to_string()),
            _ => {}
        }
    }
}

/// `text` with each of `secrets` (longest first, as
/// [`SecretPaths::strings`] gives them) replaced.
pub(crate) fn scrub(text: &str, secrets: &[String]) -> String {
    let mut text = text.to_string();
    for secret in secrets {
        if text.contains(secret.as_str()) {
            text = text.replace(secret.as_str(), REDACTED);
        }
    }
    text
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// A copy of `value` with every scalar under a secret-looking key replaced.
pub(crate) fn redact(value: &Value) -> Value {
    redact_with(value, &SecretPaths::default())
}

/// [`redact`], and every value at a path of `secrets` replaced too (booleans
/// included: the whole of a decrypted file is secret).
pub(crate) fn redact_with(value: &Value, secrets: &SecretPaths) -> Value {
    redact_at("", value, secrets)
}

fn redact_at(path: &str, value: &Value, secrets: &SecretPaths) -> Value {
    if !path.is_empty() && secrets.covers(path) {
        return redact_all(value, true);
    }
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = if is_secret_entry(k, map) {
                        redact_all(v, false)
                    } else {
                        redact_at(&join(path, k), v, secrets)
                    };
                    (k.clone(), v)
                })
                .collect::<Map<_, _>>(),
        ),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| redact_at(path, v, secrets)).collect())
        }
        Value::String(text) if holds_credentials(text) => Value::String(REDACTED.into()),
        Value::String(text) => Value::String(shape::redact_shapes(text).into_owned()),
        other => other.clone(),
    }
}

/// A string that is a credential whatever its key: a PEM private key, or a
/// kubeconfig (or a piece of one) carrying a client key or token.
pub(crate) fn holds_credentials(text: &str) -> bool {
    (text.contains("-----BEGIN") && text.contains("PRIVATE KEY"))
        || ["client-key-data:", "client-key:", "token:", "password:"]
            .iter()
            .any(|k| text.contains(k) && (text.contains("users:") || text.contains("user:")))
}

/// Every scalar replaced; booleans and nulls kept unless `booleans`.
fn redact_all(value: &Value, booleans: bool) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), redact_all(v, booleans)))
                .collect::<Map<_, _>>(),
        ),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| redact_all(v, booleans)).collect())
        }
        Value::Null => Value::Null,
        Value::Bool(_) if !booleans => value.clone(),
        _ => Value::String(REDACTED.to_string()),
    }
}

/// One value that differs between two values trees: its dotted path and
/// the value on each side (`None`: not set there). Maps are compared key by
/// key, everything else as a whole (as Helm replaces lists).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Difference {
    pub path: String,
    pub left: Option<Value>,
    pub right: Option<Value>,
}

impl Difference {
    /// [`Difference::describe`], values at `secrets` redacted too.
    pub(crate) fn describe_with(&self, secrets: &SecretPaths) -> String {
        let secret =
            is_secret_key(self.path.rsplit('.').next().unwrap_or("")) || secrets.covers(&self.path);
        // A secret-looking key holding `false` or null (a switch such as
        // `createClusterSecretStore`) holds no secret, as `redact` keeps it;
        // a path of a decrypted file hides everything.
        let show = |v: &Option<Value>| match v {
            None => "unset".to_string(),
            Some(Value::Bool(_) | Value::Null) if !secrets.covers(&self.path) => {
                v.as_ref().map(Value::to_string).unwrap_or_default()
            }
            Some(_) if secret => REDACTED.to_string(),
            Some(v) => v.to_string(),
        };
        format!(
            "{}: bootstrap {}, Flux {}",
            self.path,
            show(&self.left),
            show(&self.right)
        )
    }
}

/// Every leaf where `left` and `right` differ, in path order.
pub(crate) fn diff(left: &Value, right: &Value) -> Vec<Difference> {
    let mut out = Vec::new();
    diff_at(String::new(), Some(left), Some(right), &mut out);
    out
}

fn diff_at(path: String, left: Option<&Value>, right: Option<&Value>, out: &mut Vec<Difference>) {
    let empty = Value::Object(Map::new());
    let (left, right) = match (left, right) {
        (None, Some(r @ Value::Object(_))) => (Some(&empty), Some(r)),
        (Some(l @ Value::Object(_)), None) => (Some(l), Some(&empty)),
        other => other,
    };
    match (left, right) {
        (Some(Value::Object(l)), Some(Value::Object(r))) => {
            let mut keys: Vec<&String> = l.keys().chain(r.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let at = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                diff_at(at, l.get(key), r.get(key), out);
            }
        }
        (l, r) if l == r => {}
        (l, r) => out.push(Difference {
            path,
            left: l.cloned(),
            right: r.cloned(),
        }),
    }
}

/// The dotted path of every leaf of `values` (a list is a leaf).
pub(crate) fn leaves(values: &Value) -> Vec<String> {
    let mut out = Vec::new();
    diff_at(
        String::new(),
        Some(&Value::Object(Map::new())),
        Some(values),
        &mut out,
    );
    out.into_iter().map(|d| d.path).collect()
}

/// Whether `values` sets `path` (dotted, as [`diff`] writes it).
pub(crate) fn sets(values: &Value, path: &str) -> bool {
    let mut at = values;
    for part in path.split('.') {
        match at.get(part) {
            Some(v) => at = v,
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_merge_and_lists_are_replaced() {
        let mut base = json!({"a": {"b": 1, "c": [1, 2]}, "d": 1});
        merge(
            &mut base,
            json!({"a": {"c": [3], "e": true}, "d": {"x": 1}}),
        );
        assert_eq!(
            base,
            json!({"a": {"b": 1, "c": [3], "e": true}, "d": {"x": 1}})
        );
    }

    #[test]
    fn set_paths_are_typed_as_helm_types_them() {
        let mut v = json!({"a": {"keep": 1, "b": 0}});
        set_path(&mut v, "a.b=2,on=true,off=false,n=null,s=0755,t=v1.2").unwrap();
        set_path(&mut v, r"anno.io\.cilium/ip=10.0.0.1,list=a\,b").unwrap();
        assert_eq!(
            v,
            json!({"a": {"keep": 1, "b": 2}, "on": true, "off": false, "n": null,
                   "s": "0755", "t": "v1.2", "anno": {"io.cilium/ip": "10.0.0.1"}, "list": "a,b"})
        );
        assert_eq!(
            set_path(&mut v, "x").unwrap_err().to_string(),
            "`x` is not `path=value`"
        );
        assert_eq!(
            set_path(&mut v, "a[0]=1"),
            Err(SetError::List("a[0]=1".into()))
        );
        assert!(matches!(
            set_path(&mut v, "a..b=1"),
            Err(SetError::EmptyKey { .. })
        ));
    }

    #[test]
    fn digest_ignores_key_order() {
        let a: Value = serde_json::from_str(r#"{"a":1,"b":{"c":2,"d":3}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"b":{"d":3,"c":2},"a":1}"#).unwrap();
        assert_eq!(digest(&a), digest(&b));
        assert_ne!(digest(&a), digest(&json!({"a": 2})));
    }

    /// The names a redaction campaign found shown, case-insensitive, are
    /// secret; the names of the charts this tool installs that look close
    /// are not; a secret of a recognised shape is redacted under any key.
    #[test]
    fn short_and_compound_secret_names_and_shapes_are_redacted() {
        let values = json!({
            "db": {"pwd": "hunter2-pw", "PASSPHRASE": "correct horse", "dsn": "x"},
            "auth0": {"jwtSigning": "eyJhbGciOi"},
            "tls": {"caKey": "-----", "ca_key": "-----"},
            "enterprise": {"licenseKey": "LIC-123", "licence-key": "LIC-456"},
            "alerting": {"webhookUrl": "https://example.com/hook"},
            "sentry": {"endpoint": "https://abc123@o1.ingest.sentry.io/2"},
            "notify": {"slack": "https://hooks.slack.com/services/T0/B0/xyz"},
            "affinity": {"topologyKey": "kubernetes.io/hostname"},
            "webhook": {"enabled": true, "port": 10250},
            "publicKey": "ssh-ed25519 AAAA",
        });
        assert_eq!(
            redact(&values),
            json!({
                "db": {"pwd": REDACTED, "PASSPHRASE": REDACTED, "dsn": REDACTED},
                "auth0": {"jwtSigning": REDACTED},
                "tls": {"caKey": REDACTED, "ca_key": REDACTED},
                "enterprise": {"licenseKey": REDACTED, "licence-key": REDACTED},
                "alerting": {"webhookUrl": REDACTED},
                "sentry": {"endpoint": "https://<redacted>@o1.ingest.sentry.io/2"},
                "notify": {"slack": "https://hooks.slack.com/<redacted>"},
                "affinity": {"topologyKey": "kubernetes.io/hostname"},
                "webhook": {"enabled": true, "port": 10250},
                "publicKey": "ssh-ed25519 AAAA",
            })
        );
    }

    #[test]
    fn kubeconfig_credentials_and_common_credential_keys_are_secret() {
        for key in [
            "client-key-data",
            "client-certificate-data",
            "certificate-authority-data",
            "token",
            "clientKey",
            "client_key",
            "private_key",
            "signingKey",
            "bearerToken",
            "sessionCookie",
            "connectionString",
            "sshKey",
            "tls_key",
        ] {
            assert!(is_secret_key(key), "{key}");
        }
        for key in [
            "server",
            "insecure-skip-tls-verify",
            "keyName",
            "secretRef",
            "tolerations",
        ] {
            assert!(!is_secret_key(key), "{key}");
        }
        let kubeconfig = json!({"users": [{"name": "admin", "user": {
            "client-key-data": "LS0tLS1CRUdJTiBQUklWQVRF", "client-certificate-data": "LS0tLS1C"}}]});
        let shown = redact(&kubeconfig).to_string();
        assert!(!shown.contains("LS0tLS1C"), "{shown}");
        // A whole kubeconfig or a PEM key as a string value, under any key.
        let embedded = json!({"config": "apiVersion: v1\nkind: Config\nusers:\n- name: a\n  user:\n    token: abc.def\n",
            "pem": "-----BEGIN EC PRIVATE KEY-----\nMHcC\n-----END EC PRIVATE KEY-----\n",
            "plain": "users: 3"});
        assert_eq!(
            redact(&embedded),
            json!({"config": REDACTED, "pem": REDACTED, "plain": "users: 3"})
        );
    }

    #[test]
    fn secrets_are_redacted_but_names_of_secrets_are_not() {
        let v = json!({
            "auth": {"password": "hunter2", "enabled": true},
            "apiToken": "abc",
            "existingSecret": "my-secret",
            "tls": {"secretName": "x"},
            "image": {"tag": "v1"}
        });
        assert_eq!(
            redact(&v),
            json!({
                "auth": {"password": REDACTED, "enabled": true},
                "apiToken": REDACTED,
                "existingSecret": "my-secret",
                "tls": {"secretName": "x"},
                "image": {"tag": "v1"}
            })
        );
    }

    #[test]
    fn every_leaf_of_a_decrypted_file_is_redacted_and_scrubbable() {
        let decrypted = json!({"db": {"host": "db.internal", "port": 5432, "tls": true},
                               "users": ["alice-admin", "bob"], "note": null});
        let mut secrets = SecretPaths::default();
        secrets.add_leaves(&decrypted);
        // A later layer adds a plain value next to them and replaces one.
        let mut values = json!({"image": {"tag": "v1"}, "db": {"tls": {"ca": "later-ca"}}});
        merge(&mut values, decrypted.clone());
        merge(
            &mut values,
            json!({"db": {"tls": {"ca": "later-ca"}}, "replicas": 2}),
        );
        assert_eq!(
            redact_with(&values, &secrets),
            json!({"image": {"tag": "v1"}, "replicas": 2,
                   "db": {"host": REDACTED, "port": REDACTED, "tls": {"ca": REDACTED}},
                   "users": [REDACTED, REDACTED], "note": null})
        );
        assert!(secrets.covers("db.tls.ca") && !secrets.covers("dbx") && !secrets.covers("db"));
        assert_eq!(
            secrets.strings(&values),
            ["alice-admin", "db.internal", "later-ca", "5432"]
        );
        let d = Difference {
            path: "db.host".into(),
            left: Some(json!("db.internal")),
            right: None,
        };
        assert_eq!(
            d.describe_with(&secrets),
            "db.host: bootstrap <redacted>, Flux unset"
        );
        assert_eq!(
            d.describe_with(&SecretPaths::default()),
            "db.host: bootstrap \"db.internal\", Flux unset"
        );
    }

    #[test]
    fn a_switch_under_a_secret_looking_key_is_shown() {
        let d = Difference {
            path: "createClusterSecretStore".into(),
            left: Some(json!(false)),
            right: Some(json!(true)),
        };
        assert_eq!(
            d.describe_with(&SecretPaths::default()),
            "createClusterSecretStore: bootstrap false, Flux true"
        );
        let d = Difference {
            path: "auth.password".into(),
            left: Some(json!("hunter2")),
            right: None,
        };
        assert_eq!(
            d.describe_with(&SecretPaths::default()),
            "auth.password: bootstrap <redacted>, Flux unset"
        );
    }

    #[test]
    fn diff_names_each_differing_leaf() {
        let a = serde_json::json!({"hubble": {"enabled": true, "relay": {"enabled": true}}, "l": [1, 2], "only": 1});
        let b =
            serde_json::json!({"hubble": {"enabled": false, "relay": {"enabled": true}}, "l": [1]});
        let d = diff(&a, &b);
        let paths: Vec<&str> = d.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["hubble.enabled", "l", "only"]);
        assert_eq!(d[2].right, None);
        assert!(sets(&a, "hubble.relay.enabled"));
        assert!(!sets(&b, "only"));
    }
}
