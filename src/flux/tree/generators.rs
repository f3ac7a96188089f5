//! kustomize's `configMapGenerator` and `secretGenerator`, with the
//! content-hash suffix, and the name references (`configurations:`
//! `nameReference`) that follow a rename.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::{Walker, label_file, normalize, object};
use crate::flux::findings::{BUILD_FAILS, NOT_MODELLED, PATH_NOT_FOUND};
use crate::flux::kustomize;
use crate::flux::kustomize::metadata;
use crate::flux::object::Object;

impl Walker {
    /// `configMapGenerator`/`secretGenerator` (kustomize `api/kv`,
    /// `api/internal/generators`): the ConfigMaps and Secrets with their data
    /// (env files, then literals, then files), marked for the content-hash
    /// suffix unless `disableNameSuffixHash`; [`Walker::finish`] appends it
    /// once the whole build is done, as kustomize does.
    pub(super) fn generators(
        &mut self,
        doc: &Value,
        dir: &Path,
        label: &str,
        chain: &[String],
        objects: &mut Vec<Object>,
    ) {
        let global_disable = doc
            .pointer("/generatorOptions/disableNameSuffixHash")
            .and_then(Value::as_bool)
            == Some(true);
        for (key, kind) in [
            ("configMapGenerator", "ConfigMap"),
            ("secretGenerator", "Secret"),
        ] {
            for generator in doc.get(key).and_then(Value::as_array).into_iter().flatten() {
                let disable = generator
                    .pointer("/options/disableNameSuffixHash")
                    .and_then(Value::as_bool)
                    .unwrap_or(global_disable);
                let Some(name) = generator.get("name").and_then(Value::as_str) else {
                    let message =
                        format!("{label}: a {key} entry without a name; kustomize fails the build");
                    self.warn(BUILD_FAILS, None, chain, message);
                    continue;
                };
                for field in generator.as_object().into_iter().flat_map(|g| g.keys()) {
                    if !GENERATOR_FIELDS.contains(&field.as_str()) {
                        let message = format!(
                            "{label}: {key} `{name}` sets `{field}`, a generator field this scan does not know; what it changes is not modelled"
                        );
                        self.warn(NOT_MODELLED, None, chain, message);
                    }
                }
                let pairs = self.generator_data(generator, dir, label, chain, key, name);
                let mut data = Map::new();
                for (k, v) in pairs {
                    let v = if kind == "Secret" {
                        encode_base64(v.as_bytes())
                    } else {
                        v
                    };
                    data.insert(k, Value::String(v));
                }
                let mut meta = json!({ "name": name });
                if let Some(ns) = generator.get("namespace").and_then(Value::as_str) {
                    meta["namespace"] = json!(ns);
                }
                if !disable {
                    meta["annotations"] = json!({ NEEDS_HASH: "enabled" });
                }
                let mut body = json!({ "apiVersion": "v1", "kind": kind, "metadata": meta });
                if !data.is_empty() {
                    body["data"] = Value::Object(data);
                }
                if kind == "Secret" {
                    let kind = generator
                        .get("type")
                        .and_then(Value::as_str)
                        .unwrap_or("Opaque");
                    body["type"] = json!(kind);
                }
                let behavior = generator.get("behavior").and_then(Value::as_str);
                if (behavior == Some("merge") || behavior == Some("replace"))
                    && let Some(existing) = objects
                        .iter_mut()
                        .find(|o| o.kind == kind && o.name == name)
                {
                    if behavior == Some("replace") {
                        existing.body["data"] = json!({});
                    }
                    let data = body.get("data").cloned().unwrap_or_else(|| json!({}));
                    kustomize::strategic_merge(&mut existing.body, &json!({ "data": data }));
                    continue;
                }
                if let Some(obj) = object(body, &label_file(label, chain), chain) {
                    objects.push(obj);
                }
            }
        }
    }

    /// A generator's key/value pairs, in kustomize's order: env files,
    /// then literals, then files; what it cannot read is warned about.
    fn generator_data(
        &mut self,
        generator: &Value,
        dir: &Path,
        label: &str,
        chain: &[String],
        key: &str,
        name: &str,
    ) -> Vec<(String, String)> {
        let strings = |k: &str| -> Vec<String> {
            generator
                .get(k)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        };
        let mut pairs: Vec<(String, String)> = Vec::new();
        for env in strings("envs").into_iter().chain(strings("env")) {
            let path = normalize(&dir.join(&env));
            self.files.insert(path.clone());
            match std::fs::read_to_string(&path) {
                Ok(text) if self.artifact.is_file(&path) => {
                    pairs.extend(env_pairs(&text));
                }
                _ => {
                    let message = format!(
                        "{label}: {key} `{name}` reads `{env}`, which is not in the GitRepository artifact; kustomize fails the build"
                    );
                    self.warn(PATH_NOT_FOUND, None, chain, message);
                }
            }
        }
        for literal in strings("literals") {
            match literal.split_once('=') {
                Some((k, v)) if !k.is_empty() => {
                    pairs.push((k.to_string(), remove_quotes(v).to_string()));
                }
                _ => {
                    let message = format!(
                        "{label}: {key} `{name}` has the literal `{literal}`, not key=value; kustomize fails the build"
                    );
                    self.warn(BUILD_FAILS, None, chain, message);
                }
            }
        }
        for file in strings("files") {
            let (k, path) = match file.split_once('=') {
                Some((k, p)) => (k.to_string(), p.to_string()),
                None => (
                    file.rsplit('/').next().unwrap_or(&file).to_string(),
                    file.clone(),
                ),
            };
            let path = normalize(&dir.join(&path));
            self.files.insert(path.clone());
            match std::fs::read_to_string(&path) {
                Ok(text) if self.artifact.is_file(&path) => pairs.push((k, text)),
                _ => {
                    let message = format!(
                        "{label}: {key} `{name}` reads `{file}`, which is not a text file in the GitRepository artifact; kustomize fails the build or its data is binary (not modelled)"
                    );
                    self.warn(PATH_NOT_FOUND, None, chain, message);
                }
            }
        }
        pairs
    }

    /// The `nameReference` field specs of a kustomization's
    /// `configurations` files (kustomize `builtinconfig.TransformerConfig`),
    /// merged into the build's; the label and annotation field specs, which
    /// this kustomization's transformers use, are returned; other
    /// transformer configurations that could rename objects are reported.
    pub(super) fn configurations(
        &mut self,
        doc: &Value,
        dir: &Path,
        label: &str,
        chain: &[String],
    ) -> metadata::Configured {
        let mut configured = metadata::Configured::default();
        for entry in doc
            .get("configurations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            let path = normalize(&dir.join(entry));
            if !path.starts_with(&self.root) || !self.artifact.is_file(&path) {
                let message = format!(
                    "{label} lists configurations file `{entry}`, which is not in the GitRepository artifact; kustomize fails the build"
                );
                self.warn(PATH_NOT_FOUND, None, chain, message);
                continue;
            }
            self.files.insert(path.clone());
            for config in self.read_documents(&path, chain).unwrap_or_default() {
                for (key, value) in config.as_object().into_iter().flatten() {
                    if key == "nameReference" {
                        for reference in value.as_array().into_iter().flatten() {
                            let text = |k: &str| {
                                reference.get(k).and_then(Value::as_str).unwrap_or_default()
                            };
                            for spec in reference
                                .get("fieldSpecs")
                                .and_then(Value::as_array)
                                .into_iter()
                                .flatten()
                            {
                                let field = |k: &str| {
                                    spec.get(k).and_then(Value::as_str).unwrap_or_default()
                                };
                                self.name_references.push(NameReference {
                                    kind: text("kind").to_string(),
                                    group: text("group").to_string(),
                                    referrer_kind: field("kind").to_string(),
                                    referrer_group: field("group").to_string(),
                                    path: field("path").to_string(),
                                });
                            }
                        }
                    } else if configured.add(key, value) {
                        // Label and annotation field specs: returned.
                    } else if matches!(key.as_str(), "namePrefix" | "nameSuffix" | "namespace") {
                        let message = format!(
                            "{label}: configurations file `{entry}` sets `{key}` field specs, which can rename objects and are not modelled"
                        );
                        self.warn(NOT_MODELLED, None, chain, message);
                    }
                }
            }
        }
        configured
    }

    /// What kustomize does once a whole build is accumulated
    /// (`kusttarget.go` `makeCustomizedResMap`): the content-hash suffix of
    /// generated ConfigMaps and Secrets, then the name references
    /// (`FixBackReferences`) of every configured field to an object that was
    /// renamed (prefix, suffix, hash).
    pub(super) fn finish(&mut self, objects: &mut [Object]) {
        for obj in objects.iter_mut() {
            let needs = obj
                .body
                .pointer_mut("/metadata/annotations")
                .and_then(Value::as_object_mut)
                .and_then(|a| a.remove(NEEDS_HASH))
                .is_some();
            if let Some(meta) = obj.body.get_mut("metadata").and_then(Value::as_object_mut)
                && meta
                    .get("annotations")
                    .and_then(Value::as_object)
                    .is_some_and(|a| a.is_empty())
            {
                meta.remove("annotations");
            }
            if needs {
                let hashed = format!("{}-{}", obj.name, content_hash(&obj.body));
                obj.body["metadata"]["name"] = Value::String(hashed);
                kustomize::sync(obj);
            }
        }
        let references = std::mem::take(&mut self.name_references);
        for reference in &references {
            // Renamed objects of the referenced kind: (previous names, namespace, new name).
            let renamed: Vec<(Vec<String>, Option<String>, String)> = objects
                .iter()
                .filter(|o| {
                    o.kind == reference.kind
                        && (reference.group.is_empty() || o.group() == reference.group)
                })
                .filter(|o| !o.previous_ids.is_empty())
                .map(|o| {
                    (
                        o.previous_ids.iter().map(|(n, _)| n.clone()).collect(),
                        o.namespace.clone(),
                        o.name.clone(),
                    )
                })
                .collect();
            if renamed.is_empty() {
                continue;
            }
            for obj in objects.iter_mut().filter(|o| {
                (reference.referrer_kind.is_empty() || o.kind == reference.referrer_kind)
                    && (reference.referrer_group.is_empty()
                        || o.group() == reference.referrer_group)
            }) {
                let namespace = obj.namespace.clone();
                let parts: Vec<&str> = reference
                    .path
                    .split('/')
                    .filter(|p| !p.is_empty())
                    .collect();
                rewrite_names(&mut obj.body, &parts, &|old: &str| {
                    let found: Vec<&String> = renamed
                        .iter()
                        .filter(|(previous, ns, _)| {
                            previous.iter().any(|p| p == old) && *ns == namespace
                        })
                        .map(|(_, _, new)| new)
                        .collect();
                    match found[..] {
                        [new] => Some(new.clone()),
                        _ => None,
                    }
                });
            }
        }
    }
}

/// The fields of a generator entry (kustomize `types.GeneratorArgs`,
/// `SecretArgs`) the scan reads or that change no name.
const GENERATOR_FIELDS: &[&str] = &[
    "name",
    "namespace",
    "behavior",
    "envs",
    "env",
    "literals",
    "files",
    "options",
    "type",
];

/// The annotation kustomize's generators put on what gets the hash suffix.
const NEEDS_HASH: &str = "internal.config.kubernetes.io/needsHashSuffix";

/// A `nameReference` field spec: fields at `path` of `referrer_kind`
/// objects name an object of `kind`.
#[derive(Debug, Clone)]
pub(super) struct NameReference {
    kind: String,
    group: String,
    referrer_kind: String,
    referrer_group: String,
    path: String,
}

/// Rewrites the names at `path` (a kustomize field spec path: `/`-separated,
/// lists entered element by element; a map with `name` is a reference).
fn rewrite_names(value: &mut Value, path: &[&str], new_name: &dyn Fn(&str) -> Option<String>) {
    match value {
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| rewrite_names(v, path, new_name)),
        Value::Object(map) => match path.split_first() {
            Some((first, rest)) => {
                if let Some(v) = map.get_mut(*first) {
                    rewrite_names(v, rest, new_name);
                }
            }
            None => {
                if let Some(Value::String(name)) = map.get("name")
                    && let Some(new) = new_name(name)
                {
                    map.insert("name".into(), Value::String(new));
                }
            }
        },
        Value::String(name) if path.is_empty() => {
            if let Some(new) = new_name(name) {
                *name = new;
            }
        }
        _ => {}
    }
}

/// kustomize's content hash of a ConfigMap or Secret (`api/hasher`): the
/// SHA-256 of the JSON of kind, name and data (and a Secret's type), its
/// first ten hex digits with `0 1 3 a e` turned into `g h k m t`. The name
/// is always empty: the hasher looks it up as the one field
/// `metadata/name`, which no object has (as the Flux oracle shows).
fn content_hash(body: &Value) -> String {
    use sha2::{Digest, Sha256};
    let field = |k: &str| body.get(k).cloned().unwrap_or(Value::String(String::new()));
    let name = Value::String(String::new());
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or_default();
    let mut map = std::collections::BTreeMap::new();
    map.insert("kind", Value::String(kind.to_string()));
    map.insert("name", name);
    map.insert("data", field("data"));
    if kind == "Secret" {
        map.insert("type", field("type"));
        if let Some(v @ Value::Object(_)) = body.get("stringData") {
            map.insert("stringData", v.clone());
        }
    } else if let Some(v @ Value::Object(_)) = body.get("binaryData") {
        map.insert("binaryData", v.clone());
    }
    let json = go_json(&Value::Object(
        map.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    ));
    let digest = Sha256::digest(json.as_bytes());
    digest
        .iter()
        .flat_map(|b| [b >> 4, b & 0xf])
        .take(10)
        .map(|n| match n {
            0 => 'g',
            1 => 'h',
            3 => 'k',
            0xa => 'm',
            0xe => 't',
            n => char::from_digit(u32::from(n), 16).unwrap_or('0'),
        })
        .collect()
}

/// Go's `json.Marshal` of a map: keys sorted, `<`, `>`, `&` escaped as
/// `\u003c`, `\u003e`, `\u0026` (and U+2028, U+2029).
fn go_json(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .into_iter()
                .map(|k| {
                    format!(
                        "{}:{}",
                        go_json(&Value::String(k.clone())),
                        go_json(&map[k])
                    )
                })
                .collect();
            format!("{{{}}}", items.join(","))
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(go_json).collect::<Vec<_>>().join(",")
        ),
        Value::String(s) => serde_json::to_string(s)
            .unwrap_or_default()
            .replace('<', "\\u003c")
            .replace('>', "\\u003e")
            .replace('&', "\\u0026")
            .replace('\u{2028}', "\\u2028")
            .replace('\u{2029}', "\\u2029"),
        other => other.to_string(),
    }
}

/// An env file's pairs (kustomize `kv.keyValuesFromLine`): leading blanks
/// and a BOM dropped, blank and `#` lines skipped, split at the first `=`,
/// a line without `=` an empty value.
fn env_pairs(text: &str) -> Vec<(String, String)> {
    text.trim_start_matches('\u{feff}')
        .lines()
        .map(str::trim_start)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect()
}

/// kustomize `kv.removeQuotes`: one pair of matching `"` or `'` around a literal's value.
fn remove_quotes(v: &str) -> &str {
    let b = v.as_bytes();
    if b.len() >= 2 && b[0] == b[b.len() - 1] && (b[0] == b'"' || b[0] == b'\'') {
        &v[1..v.len() - 1]
    } else {
        v
    }
}

/// Standard base64 with padding.
fn encode_base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kustomize_hashes() {
        // kustomize's own hasher_test.go expectations.
        let cm = json!({"kind": "ConfigMap"});
        assert_eq!(content_hash(&cm), "6ct58987ht");
        let cm = json!({"kind": "ConfigMap", "data": {"one": ""}});
        assert_eq!(content_hash(&cm), "9g67k2htb6");
        let cm = json!({"kind": "ConfigMap", "data": {"two": 2, "one": "", "three": 3}});
        assert_eq!(content_hash(&cm), "7757f9kkct");
        let secret = json!({"kind": "Secret", "type": "my-type"});
        assert_eq!(content_hash(&secret), "5gmgkf8578");
        let secret = json!({"kind": "Secret", "type": "my-type", "data": {"one": ""}, "stringData": {"two": 2}});
        assert_eq!(content_hash(&secret), "c4h4264gdb");
    }

    #[test]
    fn generator_inputs() {
        assert_eq!(encode_base64(b"kube-system"), "a3ViZS1zeXN0ZW0=");
        assert_eq!(encode_base64(b"ab"), "YWI=");
        assert_eq!(remove_quotes("\"x\""), "x");
        assert_eq!(remove_quotes("'x"), "'x");
        assert_eq!(
            env_pairs("\u{feff}A=1\n  # c\n\nB= 2 \nC\n"),
            [
                ("A".into(), "1".into()),
                ("B".into(), " 2 ".into()),
                ("C".into(), String::new())
            ]
        );
    }
}
