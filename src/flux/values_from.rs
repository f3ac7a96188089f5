//! A HelmRelease's values as helm-controller composes them
//! (docs/design.md#from-a-flux-helmrelease): fluxcd/pkg `chartutil/values.go`
//! `ChartValuesFromReferences`, called by helm-controller with
//! `HelmRelease.GetValues()` and `spec.valuesFrom`.
//!
//! Each `valuesFrom` entry in order: its ConfigMap/Secret in the
//! HelmRelease's namespace, key `valuesKey` (default `values.yaml`);
//! `optional` ones that are missing are skipped. Without `targetPath` its
//! text is read as a values file and merged over the values so far
//! (`MergeMaps`: maps key by key, anything else replaced). With one,
//! `spec.values` is merged in first and the text set at the path by helm's
//! `--set` parser ([`super::strvals`]), which writes into the maps it took
//! from `spec.values`; an error there fails the HelmRelease. `spec.values`
//! is merged last.

use serde_json::{Map, Value};

use super::object::Object;
use super::strvals::{self, GoMap, GoValue, StrvalsError};

/// One source of a HelmRelease's values, in merge order.
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    /// `HelmRelease kube-system/cilium spec.values`, `ConfigMap kube-system/x key values.yaml`.
    pub label: String,
    /// The file it is written in, relative to `flux.root` (`None`: not in git).
    pub file: Option<String>,
    pub values: Value,
}

/// A `valuesFrom` entry whose object is not in the GitOps tree (created in
/// the cluster, e.g. by external-secrets) or cannot be read (SOPS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    /// `Secret kube-system/cilium-values`.
    pub what: String,
    pub why: Unreadable,
    /// Its `targetPath`: the one path whose value it sets; `None`: it is
    /// merged at the top, so any value `spec.values` does not set may be
    /// its.
    pub target_path: Option<String>,
}

impl Unresolved {
    /// Whether the value at the dotted `path` may come from this source
    /// (so that what the HelmRelease's known values say there is not the
    /// whole story).
    pub fn may_set(&self, path: &str, known: &Value) -> bool {
        match &self.target_path {
            Some(target) => {
                path == target
                    || path.starts_with(&format!("{target}."))
                    || target.starts_with(&format!("{path}."))
            }
            None => !crate::values::sets(known, path),
        }
    }
}

/// Why the values of a `valuesFrom` entry cannot be read offline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    #[error("it is not in the GitOps tree (created in the cluster, e.g. by external-secrets)")]
    NotInTree,
    #[error("it is SOPS-encrypted")]
    SopsEncrypted,
    #[error("its data is not base64")]
    NotBase64,
}

/// Why a HelmRelease's values cannot be composed as helm-controller
/// composes them.
#[derive(Debug, thiserror::Error)]
pub enum ValuesError {
    #[error("`spec.values` is not a map")]
    SpecValuesNotAMap,
    #[error("`spec.valuesFrom` names {what}: only ConfigMap and Secret exist")]
    ValuesFromKind { what: String },
    #[error("`spec.valuesFrom` names key `{key}` of {what} ({file}), which has no such key")]
    NoSuchKey {
        key: String,
        what: String,
        file: String,
    },
    /// `release`: the HelmRelease and its file; `entry`: the `valuesFrom`
    /// entry, `index` its place in the list.
    #[error(
        "`spec.valuesFrom[{index}]` of {release} ({entry}) fails in helm-controller, which then installs nothing (ValuesError): helm's `--set` parser reads `targetPath: {path}` with the text as `{path}=TEXT`: {source}; escape a `,` in the text as `\\,`, or set `literal: true` (quotes around the text do not keep its commas)"
    )]
    TargetPath {
        release: String,
        index: usize,
        entry: String,
        path: String,
        #[source]
        source: StrvalsError,
    },
    #[error("{label} ({file}) is not YAML: {error}")]
    NotYaml {
        label: String,
        file: String,
        #[source]
        error: super::kyaml::KyamlError,
    },
    #[error("{label} ({file}) is not a YAML map")]
    NotAMap { label: String, file: String },
    /// Not expected: the layers merged in order cannot give what
    /// helm-controller composes.
    #[error(
        "its values, as helm-controller composes them, cannot be given as layers merged in order (`{path}`); give the release its own `chart:` and values instead of `from:`"
    )]
    NotLayered { path: String },
}

/// A HelmRelease's values: the layers in merge order, what helm-controller
/// gives helm (their merge), and the entries that could not be read.
pub struct Composed {
    pub layers: Vec<Layer>,
    pub values: Value,
    pub unresolved: Vec<Unresolved>,
}

/// What one `spec.valuesFrom` entry gives.
enum Entry {
    /// Its text, the file it is written in and the layer's label.
    Text {
        text: String,
        file: String,
        label: String,
    },
    /// Its object is not in git, or cannot be read offline.
    Unresolved(Unresolved),
    /// `optional` and absent.
    Skipped,
}

/// Composes the values of `release` (a HelmRelease among `objects`).
pub fn compose(
    release: &Object,
    spec: &Value,
    objects: &[Object],
) -> Result<Composed, ValuesError> {
    let namespace = release.namespace.as_deref();
    let spec_values = match spec.get("values") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(_) => return Err(ValuesError::SpecValuesNotAMap),
    };
    // Go's maps: `values` is written into through what `result` shares.
    let values = strvals::go_map(&spec_values);
    let mut result = strvals::go_map(&Map::new());
    let mut layers = Vec::new();
    let mut unresolved = Vec::new();
    let entries = spec.get("valuesFrom").and_then(Value::as_array);
    for (index, entry) in entries.into_iter().flatten().enumerate() {
        let target_path = entry
            .get("targetPath")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty());
        let (text, file, label) = match read(entry, namespace, objects, target_path)? {
            Entry::Text { text, file, label } => (text, file, label),
            Entry::Unresolved(missing) => {
                if target_path.is_some() {
                    result = strvals::merge_maps(&result, &values);
                }
                unresolved.push(missing);
                continue;
            }
            Entry::Skipped => continue,
        };
        let Some(path) = target_path else {
            let parsed = values_file(&text, &label, &file)?;
            result = strvals::merge_maps(&result, &strvals::go_map(&parsed));
            layers.push(Layer {
                label,
                file: Some(file),
                values: Value::Object(parsed),
            });
            continue;
        };
        let literal = entry.get("literal").and_then(Value::as_bool) == Some(true);
        let set = |into: &GoMap| {
            if literal {
                strvals::replace_path_literal_value(into, path, &text)
            } else {
                strvals::replace_path_value(into, path, &text)
            }
        };
        result = strvals::merge_maps(&result, &values);
        set(&result).map_err(|source| ValuesError::TargetPath {
            release: format!(
                "HelmRelease {}/{} ({})",
                namespace.unwrap_or("-"),
                release.name,
                release.file
            ),
            index,
            entry: format!("{label}, in {file}"),
            path: path.into(),
            source,
        })?;
        // What the entry sets, on its own: the layer bootstrap shows.
        let alone = strvals::go_map(&Map::new());
        let _ = set(&alone);
        layers.push(Layer {
            label: format!("{label} at {path}"),
            file: Some(file),
            values: strvals::to_json(&GoValue::Map(alone)),
        });
    }
    let composed = strvals::to_json(&GoValue::Map(strvals::merge_maps(&result, &values)));
    layers.push(Layer {
        label: format!(
            "HelmRelease {}/{} spec.values",
            namespace.unwrap_or("-"),
            release.name
        ),
        file: Some(release.file.clone()),
        values: Value::Object(spec_values),
    });
    if let Some(rest) = rest_of(&layers, &composed)? {
        // A `targetPath` that wrote into `spec.values` (so it wins over
        // it), or into a list: what merging the layers misses.
        layers.push(Layer {
            label: format!(
                "HelmRelease {}/{} valuesFrom targetPath values as helm-controller composes them",
                namespace.unwrap_or("-"),
                release.name
            ),
            file: Some(release.file.clone()),
            values: rest,
        });
    }
    Ok(Composed {
        layers,
        values: composed,
        unresolved,
    })
}

/// The overlay that, merged over the layers, gives `composed`; `None` when
/// they already do.
fn rest_of(layers: &[Layer], composed: &Value) -> Result<Option<Value>, ValuesError> {
    let mut merged = Value::Object(Map::new());
    for layer in layers {
        crate::values::merge(&mut merged, layer.values.clone());
    }
    overlay(&merged, composed, "")
}

fn overlay(merged: &Value, wanted: &Value, at: &str) -> Result<Option<Value>, ValuesError> {
    match (merged, wanted) {
        (Value::Object(have), Value::Object(want)) => {
            if let Some(extra) = have.keys().find(|k| !want.contains_key(*k)) {
                return Err(ValuesError::NotLayered {
                    path: format!("{at}{extra}"),
                });
            }
            let mut out = Map::new();
            for (k, w) in want {
                let d = match have.get(k) {
                    Some(h) => overlay(h, w, &format!("{at}{k}."))?,
                    None => Some(w.clone()),
                };
                if let Some(d) = d {
                    out.insert(k.clone(), d);
                }
            }
            Ok((!out.is_empty()).then_some(Value::Object(out)))
        }
        (have, want) if have == want => Ok(None),
        _ => Ok(Some(wanted.clone())),
    }
}

/// A values file's text as helm reads it (`common.ReadValues`, YAML 1.1:
/// [`super::kyaml::values_file`]): empty is no values, anything but a map
/// an error.
fn values_file(text: &str, label: &str, file: &str) -> Result<Map<String, Value>, ValuesError> {
    let parsed = super::kyaml::values_file(text).map_err(|error| ValuesError::NotYaml {
        label: label.into(),
        file: file.into(),
        error,
    })?;
    match parsed {
        Value::Null => Ok(Map::new()),
        Value::Object(map) => Ok(map),
        _ => Err(ValuesError::NotAMap {
            label: label.into(),
            file: file.into(),
        }),
    }
}

/// The text one `spec.valuesFrom` entry names, or why there is none.
fn read(
    entry: &Value,
    namespace: Option<&str>,
    objects: &[Object],
    target_path: Option<&str>,
) -> Result<Entry, ValuesError> {
    let kind = entry.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = entry.get("name").and_then(Value::as_str).unwrap_or("");
    let key = entry
        .get("valuesKey")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
        .unwrap_or("values.yaml");
    let optional = entry.get("optional").and_then(Value::as_bool) == Some(true);
    let what = format!("{kind} {}/{name}", namespace.unwrap_or("-"));
    if kind != "ConfigMap" && kind != "Secret" {
        return Err(ValuesError::ValuesFromKind { what });
    }
    // A missing `optional` source is skipped; any other is unresolved.
    let skip_or = |what, why| {
        if optional {
            Entry::Skipped
        } else {
            Entry::Unresolved(Unresolved {
                what,
                why,
                target_path: target_path.map(String::from),
            })
        }
    };
    let source = objects.iter().find(|o| {
        o.kind == kind
            && o.group().is_empty()
            && o.name == name
            && o.namespace.as_deref() == namespace
    });
    let Some(source) = source else {
        return Ok(skip_or(what, Unreadable::NotInTree));
    };
    match data(source, key) {
        Ok(Some(text)) => Ok(Entry::Text {
            text,
            file: source.file.clone(),
            label: format!("{what} key {key}"),
        }),
        Ok(None) if optional => Ok(Entry::Skipped),
        Ok(None) => Err(ValuesError::NoSuchKey {
            key: key.into(),
            what,
            file: source.file.clone(),
        }),
        Err(why) => Ok(skip_or(what, why)),
    }
}

/// `key` of a ConfigMap or Secret as written in git: `data` (base64 for a
/// Secret), a Secret's `stringData`, or a configMapGenerator's output.
fn data(source: &Object, key: &str) -> Result<Option<String>, Unreadable> {
    if source.body.get("sops").is_some() {
        return Err(Unreadable::SopsEncrypted);
    }
    if source.kind == "Secret"
        && let Some(v) = source.body.pointer(&format!("/stringData/{}", escape(key)))
    {
        return Ok(Some(text(v)));
    }
    let Some(v) = source.body.pointer(&format!("/data/{}", escape(key))) else {
        return Ok(None);
    };
    if source.kind == "Secret" {
        super::object::decode_base64(&text(v))
            .map(Some)
            .ok_or(Unreadable::NotBase64)
    } else {
        Ok(Some(text(v)))
    }
}

/// A data value as helm-controller reads it: a null (`k: ${UNSET}` after
/// the post-build) is decoded into Go's string as the empty string.
fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        _ => v.as_str().map_or_else(|| v.to_string(), str::to_string),
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(kind: &str, name: &str, body: Value) -> Object {
        let api_version = if kind == "ConfigMap" {
            "v1"
        } else {
            "helm.toolkit.fluxcd.io/v2"
        };
        Object::of(
            (api_version, kind, name),
            Some("ns"),
            &format!("{name}.yaml"),
            body,
        )
    }

    /// `spec.values` and one ConfigMap per entry `(text, targetPath)`,
    /// composed; the layers merged in order must give the values.
    fn composed(values: Value, entries: &[(&str, &str)]) -> Result<Value, ValuesError> {
        let mut objects = Vec::new();
        let mut refs = Vec::new();
        for (i, (text, path)) in entries.iter().enumerate() {
            let name = format!("cm{i}");
            objects.push(object(
                "ConfigMap",
                &name,
                json!({"data": {"values.yaml": text}}),
            ));
            refs.push(json!({"kind": "ConfigMap", "name": name, "targetPath": path}));
        }
        let spec = json!({"values": values, "valuesFrom": refs});
        let release = object("HelmRelease", "app", json!({"spec": spec.clone()}));
        let composed = compose(&release, &spec, &objects)?;
        let mut merged = Value::Object(Map::new());
        for layer in &composed.layers {
            crate::values::merge(&mut merged, layer.values.clone());
        }
        assert_eq!(merged, composed.values, "{:#?}", composed.layers);
        Ok(composed.values)
    }

    // Each expected value is what fluxcd/pkg chartutil v1.27.2 composes
    // (MergeMaps and ReplacePathValue, helm v4.2.4 strvals) for the same
    // input.
    #[test]
    fn target_path_writes_into_the_maps_taken_from_spec_values() {
        let v = |values: Value, entries: &[(&str, &str)]| composed(values, entries).unwrap();
        // `a` taken from spec.values: the target path wins over it.
        assert_eq!(
            v(json!({"a": {"b": 1}}), &[("2", "a.b")]),
            json!({"a": {"b": 2}})
        );
        assert_eq!(
            v(json!({"a": {"b": {"c": 1}}}), &[("2", "a.b")]),
            json!({"a": {"b": 2}})
        );
        // `a` merged into a new map: spec.values wins.
        assert_eq!(
            v(
                json!({"a": {"b": 1}}),
                &[("a:\n  c: 1\n", ""), ("2", "a.b")]
            ),
            json!({"a": {"b": 1, "c": 1}})
        );
        // At the top (always a new map): spec.values wins.
        assert_eq!(v(json!({"b": 1}), &[("2", "b")]), json!({"b": 1}));
        // Written into spec.values: a later values file does not win.
        assert_eq!(
            v(
                json!({"a": {"b": 1}}),
                &[("x", "a.c"), ("a:\n  c: y\n", "")]
            ),
            json!({"a": {"b": 1, "c": "x"}})
        );
        // The second target path writes into a new map; the first wins.
        assert_eq!(
            v(json!({"a": {"b": 1}}), &[("2", "a.b"), ("3", "a.b")]),
            json!({"a": {"b": 2}})
        );
        assert_eq!(
            v(json!({"a": {"b": 1}}), &[("x,c=3", "a.d")]),
            json!({"a": {"b": 1, "d": "x"}, "c": 3})
        );
    }

    #[test]
    fn target_path_list_indexes() {
        let v = |values: Value, entries: &[(&str, &str)]| composed(values, entries).unwrap();
        assert_eq!(
            v(json!({}), &[("l: [x, y, z]\n", ""), ("foo", "l[1]")]),
            json!({"l": ["x", "foo", "z"]})
        );
        assert_eq!(
            v(json!({"l": ["x"]}), &[("1", "l[0].b")]),
            json!({"l": [{"b": 1}]})
        );
        // In place in spec.values' list, or into a longer copy of it.
        assert_eq!(
            v(json!({"l": ["x", "y"]}), &[("q", "l[1]")]),
            json!({"l": ["x", "q"]})
        );
        assert_eq!(
            v(json!({"l": ["x", "y"]}), &[("q", "l[3]")]),
            json!({"l": ["x", "y"]})
        );
        assert_eq!(
            v(json!({"l": ["x", "y"]}), &[("l: [p]\n", ""), ("q", "l[1]")]),
            json!({"l": ["x", "q"]})
        );
    }

    #[test]
    fn a_values_file_is_read_as_helm_reads_it() {
        // fluxcd/pkg chartutil v1.27.2 with helm v4.2.4's ReadValues gives
        // exactly this JSON for the same text.
        let text = "a: yes\nb: 0644\nc: 2024-01-01\nd: 1e3\ne: on\nf: 0x1F\ng: 1_000\nh: ~\ni: 12:30\nj: 0o14\nk: y\n";
        assert_eq!(
            composed(json!({}), &[(text, "")]).unwrap(),
            json!({"a": true, "b": 420, "c": "2024-01-01", "d": 1000, "e": true, "f": 31,
                "g": 1000, "h": null, "i": "12:30", "j": 12, "k": true})
        );
    }

    #[test]
    fn a_values_file_key_is_resolved_as_helm_resolves_it() {
        // As fluxcd/pkg chartutil v1.27.2 with helm v4.2.4 (sigs.k8s.io/yaml
        // v1.6.0) composes it.
        let text = "on: 1\nyes: 2\nn: 3\n1e3: 4\n1.5: 5\n1e7: 6\n0x10: 7\n0.00001: 8\n\"on\": 9\n2024-01-01: 10\n1_0: 11\n";
        assert_eq!(
            composed(json!({}), &[(text, "")]).unwrap(),
            json!({"1.5": 5, "10": 11, "1000": 4, "16": 7, "1e+07": 6, "1e-05": 8,
                "2024-01-01": 10, "false": 3, "on": 9, "true": 2})
        );
    }

    #[test]
    fn a_target_path_helm_refuses_names_the_entry() {
        let err = composed(
            json!({}),
            &[("a: 1\n", ""), ("kafka01:9092,kafka02:9092", "brokers")],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("`spec.valuesFrom[1]` of HelmRelease ns/app (app.yaml)")
                && err.contains("ConfigMap ns/cm1 key values.yaml, in cm1.yaml")
                && err.contains("key \"kafka02:9092\" has no value"),
            "{err}"
        );
        let err = composed(json!({"a": "text"}), &[("1", "a.b")]).unwrap_err();
        assert!(
            matches!(
                err,
                ValuesError::TargetPath {
                    source: StrvalsError::NotAMap(_),
                    ..
                }
            ),
            "{err}"
        );
    }
}
