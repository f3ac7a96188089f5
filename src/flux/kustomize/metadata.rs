//! kustomize's label and annotation transformers (`api/internal/builtins`
//! `LabelTransformer.go`, `AnnotationsTransformer.go` over
//! `api/filters/fieldspec`), with the field specs of
//! `api/internal/konfig/builtinpluginconsts` (`commonlabels.go`,
//! `metadatalabels.go`, `templatelabels.go`, `commonannotations.go`) and
//! the transformers a kustomization configures (`kusttarget_configplugin.go`):
//! one per `labels` entry, in order, then `commonLabels`, then
//! `commonAnnotations`.
//!
//! - A `labels` entry sets `metadata/labels`; with `includeTemplates` also
//!   the pod templates (`templateLabels`); with `includeSelectors` the
//!   selectors and templates (`commonLabels`'s specs) instead; its own
//!   `fields` are added.
//! - `commonLabels` goes into metadata, selectors and templates;
//!   `commonAnnotations` into metadata and templates.
//! - A `configurations` file's `commonLabels`, `labels`, `templateLabels`
//!   and `commonAnnotations` field specs are added to the same lists.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::group_version;
use crate::flux::object::Object;

/// A kustomize `types.FieldSpec`: where a transformer writes, for the
/// objects its group, version and kind (each empty for any) select.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSpec {
    pub group: String,
    pub version: String,
    pub kind: String,
    /// `/`-separated; a step ending in `[]` is a list.
    pub path: String,
    pub create: bool,
}

/// (group, version, kind, path, create) as builtinpluginconsts writes them.
type Spec = (&'static str, &'static str, &'static str, &'static str, bool);

/// `metadatalabels.go`: metadata and the pod (and claim) templates; also
/// `templateLabels`.
const METADATA_LABELS: &[Spec] = &[
    ("", "", "", "metadata/labels", true),
    (
        "",
        "v1",
        "ReplicationController",
        "spec/template/metadata/labels",
        true,
    ),
    ("", "", "Deployment", "spec/template/metadata/labels", true),
    ("", "", "ReplicaSet", "spec/template/metadata/labels", true),
    ("", "", "DaemonSet", "spec/template/metadata/labels", true),
    (
        "apps",
        "",
        "StatefulSet",
        "spec/template/metadata/labels",
        true,
    ),
    (
        "apps",
        "",
        "StatefulSet",
        "spec/volumeClaimTemplates[]/metadata/labels",
        true,
    ),
    ("batch", "", "Job", "spec/template/metadata/labels", true),
    (
        "batch",
        "",
        "CronJob",
        "spec/jobTemplate/metadata/labels",
        true,
    ),
    (
        "batch",
        "",
        "CronJob",
        "spec/jobTemplate/spec/template/metadata/labels",
        true,
    ),
];

const AFFINITY: [&str; 5] = [
    "spec/template/spec/affinity/podAffinity/preferredDuringSchedulingIgnoredDuringExecution/podAffinityTerm/labelSelector/matchLabels",
    "spec/template/spec/affinity/podAffinity/requiredDuringSchedulingIgnoredDuringExecution/labelSelector/matchLabels",
    "spec/template/spec/affinity/podAntiAffinity/preferredDuringSchedulingIgnoredDuringExecution/podAffinityTerm/labelSelector/matchLabels",
    "spec/template/spec/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution/labelSelector/matchLabels",
    "spec/template/spec/topologySpreadConstraints/labelSelector/matchLabels",
];

/// `commonlabels.go` before the metadata specs: the selectors.
fn selector_specs() -> Vec<Spec> {
    let mut out: Vec<Spec> = vec![
        ("", "v1", "Service", "spec/selector", true),
        ("", "v1", "ReplicationController", "spec/selector", true),
        ("", "", "Deployment", "spec/selector/matchLabels", true),
    ];
    out.extend(
        AFFINITY
            .iter()
            .map(|p| ("apps", "", "Deployment", *p, false)),
    );
    out.extend([
        ("", "", "ReplicaSet", "spec/selector/matchLabels", true),
        ("", "", "DaemonSet", "spec/selector/matchLabels", true),
        ("apps", "", "StatefulSet", "spec/selector/matchLabels", true),
    ]);
    out.extend(
        AFFINITY
            .iter()
            .map(|p| ("apps", "", "StatefulSet", *p, false)),
    );
    out.extend([
        ("batch", "", "Job", "spec/selector/matchLabels", false),
        (
            "batch",
            "",
            "CronJob",
            "spec/jobTemplate/spec/selector/matchLabels",
            false,
        ),
        (
            "policy",
            "",
            "PodDisruptionBudget",
            "spec/selector/matchLabels",
            false,
        ),
        (
            "networking.k8s.io",
            "",
            "NetworkPolicy",
            "spec/podSelector/matchLabels",
            false,
        ),
        (
            "networking.k8s.io",
            "",
            "NetworkPolicy",
            "spec/ingress/from/podSelector/matchLabels",
            false,
        ),
        (
            "networking.k8s.io",
            "",
            "NetworkPolicy",
            "spec/egress/to/podSelector/matchLabels",
            false,
        ),
    ]);
    out
}

/// `commonannotations.go`.
const COMMON_ANNOTATIONS: &[Spec] = &[
    ("", "", "", "metadata/annotations", true),
    (
        "",
        "v1",
        "ReplicationController",
        "spec/template/metadata/annotations",
        true,
    ),
    (
        "",
        "",
        "Deployment",
        "spec/template/metadata/annotations",
        true,
    ),
    (
        "",
        "",
        "ReplicaSet",
        "spec/template/metadata/annotations",
        true,
    ),
    (
        "",
        "",
        "DaemonSet",
        "spec/template/metadata/annotations",
        true,
    ),
    (
        "",
        "",
        "StatefulSet",
        "spec/template/metadata/annotations",
        true,
    ),
    (
        "batch",
        "",
        "Job",
        "spec/template/metadata/annotations",
        true,
    ),
    (
        "batch",
        "",
        "CronJob",
        "spec/jobTemplate/metadata/annotations",
        true,
    ),
    (
        "batch",
        "",
        "CronJob",
        "spec/jobTemplate/spec/template/metadata/annotations",
        true,
    ),
];

fn specs(list: &[Spec]) -> Vec<FieldSpec> {
    list.iter()
        .map(|(group, version, kind, path, create)| FieldSpec {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
            path: path.to_string(),
            create: *create,
        })
        .collect()
}

/// The field specs a kustomization's `configurations` files add to the
/// label and annotation transformers (kustomize `TransformerConfig`).
#[derive(Debug, Clone, Default)]
pub struct Configured {
    pub common_labels: Vec<FieldSpec>,
    pub labels: Vec<FieldSpec>,
    pub template_labels: Vec<FieldSpec>,
    pub common_annotations: Vec<FieldSpec>,
}

impl Configured {
    /// Adds the field specs of one `configurations` document's `key`;
    /// false when `key` is none of the four.
    pub fn add(&mut self, key: &str, value: &Value) -> bool {
        let list = match key {
            "commonLabels" => &mut self.common_labels,
            "labels" => &mut self.labels,
            "templateLabels" => &mut self.template_labels,
            "commonAnnotations" => &mut self.common_annotations,
            _ => return false,
        };
        merge(list, field_specs(value));
        true
    }
}

/// Field specs written in YAML (`fields:` of a `labels` entry, a
/// `configurations` list).
pub fn field_specs(value: &Value) -> Vec<FieldSpec> {
    let text = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    value
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| FieldSpec {
            group: text(v, "group"),
            version: text(v, "version"),
            kind: text(v, "kind"),
            path: text(v, "path"),
            create: v.get("create").and_then(Value::as_bool) == Some(true),
        })
        .filter(|s| !s.path.is_empty())
        .collect()
}

/// kustomize `FsSlice.MergeAll`: a spec already there (same group,
/// version, kind and path) is not added again.
fn merge(list: &mut Vec<FieldSpec>, more: Vec<FieldSpec>) {
    for spec in more {
        if !list.iter().any(|s| {
            (&s.group, &s.version, &s.kind, &s.path)
                == (&spec.group, &spec.version, &spec.kind, &spec.path)
        }) {
            list.push(spec);
        }
    }
}

/// One label or annotation transformer: what it sets, and where.
#[derive(Debug, Clone)]
pub struct Transformer {
    pub pairs: BTreeMap<String, String>,
    pub specs: Vec<FieldSpec>,
}

/// A value of a kustomization's string map: sigs.k8s.io/yaml gives a
/// scalar written without quotes to a Go string as its text.
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn pairs(value: Option<&Value>) -> BTreeMap<String, String> {
    value
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), text_of(v)))
        .collect()
}

/// The label transformers of a kustomization, in kustomize's order: one per
/// `labels` entry, then `commonLabels`.
pub fn label_transformers(doc: &Value, configured: &Configured) -> Vec<Transformer> {
    let mut out = Vec::new();
    for entry in doc
        .get("labels")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let flag = |k: &str| entry.get(k).and_then(Value::as_bool) == Some(true);
        let mut list = field_specs(entry.get("fields").unwrap_or(&Value::Null));
        merge(&mut list, configured.labels.clone());
        if flag("includeSelectors") {
            merge(&mut list, common_label_specs(configured));
        } else {
            if flag("includeTemplates") {
                let mut templates = specs(METADATA_LABELS);
                merge(&mut templates, configured.template_labels.clone());
                merge(&mut list, templates);
            }
            merge(&mut list, specs(&METADATA_LABELS[..1]));
        }
        out.push(Transformer {
            pairs: pairs(entry.get("pairs")),
            specs: list,
        });
    }
    out.push(Transformer {
        pairs: pairs(doc.get("commonLabels")),
        specs: common_label_specs(configured),
    });
    out.retain(|t| !t.pairs.is_empty());
    out
}

fn common_label_specs(configured: &Configured) -> Vec<FieldSpec> {
    let mut list = specs(&selector_specs());
    merge(&mut list, specs(METADATA_LABELS));
    merge(&mut list, configured.common_labels.clone());
    list
}

/// The annotation transformer of a kustomization (`commonAnnotations`).
pub fn annotation_transformer(doc: &Value, configured: &Configured) -> Option<Transformer> {
    let pairs = pairs(doc.get("commonAnnotations"));
    let mut list = specs(COMMON_ANNOTATIONS);
    merge(&mut list, configured.common_annotations.clone());
    (!pairs.is_empty()).then_some(Transformer { pairs, specs: list })
}

/// Why kustomize fails a label or annotation transformer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    /// A field on the way is a scalar (kustomize: "expected sequence or
    /// mapping node").
    #[error("considering field '{path}' of {kind} {name}: `{at}` is neither a map nor a list")]
    NotAMapping {
        path: String,
        kind: String,
        name: String,
        at: String,
    },
}

/// Applies `transformer` to every object (kustomize `fsslice.Filter` with a
/// `SetEntry` per pair): each field spec whose group, version and kind
/// select the object is walked, maps created where `create` says.
pub fn apply(objects: &mut [Object], transformer: &Transformer) -> Result<(), MetadataError> {
    for obj in objects.iter_mut() {
        let (group, version) = group_version(obj);
        let (group, version) = (group.to_string(), version.to_string());
        for spec in &transformer.specs {
            let selected = (spec.kind.is_empty() || spec.kind == obj.kind)
                && (spec.group.is_empty() || spec.group == group)
                && (spec.version.is_empty() || spec.version == version);
            if !selected {
                continue;
            }
            let steps: Vec<&str> = spec.path.split('/').filter(|s| !s.is_empty()).collect();
            set(&mut obj.body, &steps, spec.create, &transformer.pairs).map_err(
                |ScalarStep(at)| MetadataError::NotAMapping {
                    path: spec.path.clone(),
                    kind: obj.kind.clone(),
                    name: obj.name.clone(),
                    at,
                },
            )?;
        }
    }
    Ok(())
}

/// The step of a field spec's path that is a scalar where a map or list is
/// wanted.
struct ScalarStep(String);

/// kustomize `fieldspec.Filter.filter`: `Err` names the step that is a
/// scalar.
fn set(
    node: &mut Value,
    steps: &[&str],
    create: bool,
    pairs: &BTreeMap<String, String>,
) -> Result<(), ScalarStep> {
    let Some((first, rest)) = steps.split_first() else {
        let Value::Object(map) = node else {
            return Err(ScalarStep("the last field".to_string()));
        };
        for (k, v) in pairs {
            map.insert(k.clone(), Value::String(v.clone()));
        }
        return Ok(());
    };
    match node {
        Value::Null => Ok(()),
        Value::Array(items) => items
            .iter_mut()
            .try_for_each(|item| set(item, steps, create, pairs)),
        Value::Object(map) => {
            let (name, is_list) = match first.strip_suffix("[]") {
                Some(name) => (name, true),
                None => (*first, false),
            };
            if create && !is_list && !map.contains_key(name) {
                map.insert(name.to_string(), Value::Object(Map::new()));
            }
            let Some(field) = map.get_mut(name) else {
                return Ok(());
            };
            // A null field is made the kind of node the step wants.
            if field.is_null() && is_list {
                *field = Value::Array(Vec::new());
            } else if field.is_null() && create {
                *field = Value::Object(Map::new());
            }
            set(field, rest, create, pairs)
        }
        _ => Err(ScalarStep(first.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(body: Value) -> Object {
        let text = |p: &str| {
            body.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Object {
            api_version: text("/apiVersion"),
            kind: text("/kind"),
            name: text("/metadata/name"),
            namespace: None,
            file: String::new(),
            chain: Vec::new(),
            body,
            previous_ids: Vec::new(),
            applier: None,
            quoted: Default::default(),
            bare_nulls: Default::default(),
        }
    }

    fn deployment() -> Object {
        object(json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"app": "d"}},
                     "template": {"metadata": {"labels": {"app": "d"}},
                                  "spec": {"affinity": {"podAntiAffinity": {
                                      "requiredDuringSchedulingIgnoredDuringExecution": [
                                          {"labelSelector": {"matchLabels": {"app": "d"}}},
                                          {"topologyKey": "zone"}]}}}}}
        }))
    }

    fn run(doc: Value, obj: &mut Object) {
        let configured = Configured::default();
        for t in label_transformers(&doc, &configured)
            .into_iter()
            .chain(annotation_transformer(&doc, &configured))
        {
            apply(std::slice::from_mut(obj), &t).unwrap();
        }
    }

    #[test]
    fn common_labels_go_into_selectors_templates_and_existing_affinity_terms() {
        let mut d = deployment();
        run(json!({"commonLabels": {"team": "net"}}), &mut d);
        let b = &d.body;
        assert_eq!(b["metadata"]["labels"], json!({"team": "net"}));
        assert_eq!(b["spec"]["selector"]["matchLabels"]["team"], "net");
        assert_eq!(b["spec"]["template"]["metadata"]["labels"]["team"], "net");
        let terms = &b["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
        // `create: false`: a term with a selector gets the label, one
        // without gets none.
        assert_eq!(terms[0]["labelSelector"]["matchLabels"]["team"], "net");
        assert_eq!(terms[1], json!({"topologyKey": "zone"}));
    }

    #[test]
    fn labels_entries_reach_selectors_and_templates_only_when_told() {
        let mut plain = deployment();
        run(json!({"labels": [{"pairs": {"a": "1"}}]}), &mut plain);
        assert_eq!(plain.body["metadata"]["labels"]["a"], "1");
        assert!(
            plain.body["spec"]["template"]["metadata"]["labels"]
                .get("a")
                .is_none()
        );
        assert!(
            plain.body["spec"]["selector"]["matchLabels"]
                .get("a")
                .is_none()
        );

        let mut templates = deployment();
        run(
            json!({"labels": [{"pairs": {"a": "1"}, "includeTemplates": true}]}),
            &mut templates,
        );
        assert_eq!(
            templates.body["spec"]["template"]["metadata"]["labels"]["a"],
            "1"
        );
        assert!(
            templates.body["spec"]["selector"]["matchLabels"]
                .get("a")
                .is_none()
        );

        let mut selectors = deployment();
        run(
            json!({"labels": [{"pairs": {"a": "1"}, "includeSelectors": true}]}),
            &mut selectors,
        );
        assert_eq!(selectors.body["spec"]["selector"]["matchLabels"]["a"], "1");
        assert_eq!(
            selectors.body["spec"]["template"]["metadata"]["labels"]["a"],
            "1"
        );
    }

    #[test]
    fn a_labels_entry_writes_its_own_fields_and_numbers_are_text() {
        let mut hr = object(json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "cilium"}, "spec": {"values": {}}
        }));
        run(
            json!({"labels": [{"pairs": {"v": 2}, "fields": [
                {"kind": "HelmRelease", "path": "spec/values/podLabels", "create": true},
                {"kind": "Other", "path": "spec/values/other", "create": true}]}]}),
            &mut hr,
        );
        assert_eq!(hr.body["metadata"]["labels"], json!({"v": "2"}));
        assert_eq!(hr.body["spec"]["values"], json!({"podLabels": {"v": "2"}}));
    }

    #[test]
    fn common_annotations_go_into_metadata_and_templates_not_selectors() {
        let mut d = deployment();
        run(json!({"commonAnnotations": {"x": "y"}}), &mut d);
        assert_eq!(d.body["metadata"]["annotations"], json!({"x": "y"}));
        assert_eq!(
            d.body["spec"]["template"]["metadata"]["annotations"],
            json!({"x": "y"})
        );
        assert!(d.body["spec"]["selector"]["matchLabels"].get("x").is_none());
        let mut svc =
            object(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}));
        run(json!({"commonLabels": {"a": "b"}}), &mut svc);
        // `spec/selector` of a v1 Service is created.
        assert_eq!(svc.body["spec"]["selector"], json!({"a": "b"}));
    }

    #[test]
    fn a_scalar_on_the_way_fails_and_null_is_left_or_made_a_map() {
        let mut bad = object(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": "x"}));
        let t =
            &label_transformers(&json!({"commonLabels": {"a": "b"}}), &Configured::default())[0];
        assert!(apply(std::slice::from_mut(&mut bad), t).is_err());
        let mut null = object(json!({"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "c", "labels": null}}));
        apply(std::slice::from_mut(&mut null), t).unwrap();
        assert_eq!(null.body["metadata"]["labels"], json!({"a": "b"}));
    }

    #[test]
    fn configured_field_specs_are_merged() {
        let mut configured = Configured::default();
        assert!(configured.add(
            "commonLabels",
            &json!([{"kind": "HelmRelease", "path": "spec/values/labels", "create": true}])
        ));
        assert!(!configured.add("images", &json!([])));
        let t = &label_transformers(&json!({"commonLabels": {"a": "b"}}), &configured)[0];
        assert!(t.specs.iter().any(|s| s.path == "spec/values/labels"));
        assert_eq!(
            t.specs
                .iter()
                .filter(|s| s.path == "metadata/labels")
                .count(),
            1
        );
    }
}
