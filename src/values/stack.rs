//! A release's values as the ordered layers of
//! docs/design.md#values-merge-order, each with where it is written, its
//! secret paths and the label `plan` and `template` show, merged once when
//! the stack is built: the install values, the CRD-phase values, the
//! sources the lints locate keys in and the provenance `template` prints
//! are all views of one stack. `config` builds it, one function per layer.
//!
//! It lives here, below `release`, because a `Release` holds it and
//! `release` sits below `config`.

use std::path::PathBuf;

use serde_json::{Map, Value};

use super::{SecretPaths, leaves, merge_from, sets};

/// Which step of the merge order a layer is (docs/design.md#values-merge-order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// 0: a `valuesFrom` entry or the `spec.values` of the `from:` HelmRelease.
    HelmRelease,
    /// 1: the release's inline `values`.
    ReleaseValues,
    /// 2: one of the release's `valuesFiles`.
    ReleaseFile,
    /// 3: one of the cluster override's `valuesFiles`.
    OverrideFile,
    /// 4: the cluster override's inline `values`.
    OverrideValues,
    /// `crdValues`: only the CRD-phase values take it, over the config's
    /// values and under the run's.
    CrdValues,
    /// 5 and 6: the run's `--values` files, then its `--set`s, merged among
    /// themselves in that order, then over every release's values as one
    /// layer.
    Run,
}

/// Where part of a release's values was written, so a lint can point at the
/// line of a key (docs/design.md#lints).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValuesSource {
    /// Absolute path of the file.
    pub path: PathBuf,
    /// The path as errors show it (relative to `--dir` as typed).
    pub shown: PathBuf,
    /// Keys above the values in that file: `["values"]` for a release's inline
    /// values, `["overrides", KEY, "values"]` in cluster.yaml, none in a values file.
    pub prefix: Vec<String>,
    /// In a multi-document file, a line of the document that holds the values.
    pub document_line: Option<u64>,
}

impl ValuesSource {
    /// As `plan -v` and `template -v` name it: the file, and the keys above
    /// the values in it.
    pub fn describe(&self) -> String {
        match self.prefix.as_slice() {
            [] => self.shown.display().to_string(),
            keys => format!("{} ({})", self.shown.display(), keys.join(".")),
        }
    }
}

/// One layer of a release's values.
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    pub step: Step,
    /// `HelmRelease kube-system/cilium spec.values (kubernetes/…/helmrelease.yaml)`,
    /// `release values (releases/cilium.yaml)`, `cluster override values (clusters/infra/cluster.yaml overrides.cilium)`.
    pub label: String,
    /// Where it is written (several for the run's layer: each `--values`
    /// file and `--set`); none for a `valuesFrom` object.
    pub sources: Vec<ValuesSource>,
    /// What it gives. A layer of bootstrap's own that is not a map (an
    /// empty values file) gives nothing.
    pub values: Value,
    /// The leaves of the sops-encrypted files it was read from.
    pub secrets: SecretPaths,
}

impl Layer {
    pub fn new(step: Step, label: String, values: Value) -> Layer {
        Layer {
            step,
            label,
            sources: Vec::new(),
            values,
            secrets: SecretPaths::default(),
        }
    }

    pub fn written_at(mut self, source: ValuesSource) -> Layer {
        self.sources.push(source);
        self
    }

    /// Whether it is merged: the HelmRelease's layers always (as
    /// helm-controller merges them), bootstrap's own only when they are a map.
    fn gives(&self) -> bool {
        self.step == Step::HelmRelease || self.values.is_object()
    }

    /// Whether `plan` and `template` name it among the sources of a
    /// release's values: the config's layers that give values (the run's
    /// and `crdValues` are listed apart).
    fn named(&self) -> bool {
        !matches!(self.step, Step::CrdValues | Step::Run) && self.gives()
    }
}

/// The layers of one release's values, in merge order, and their merge.
#[derive(Debug, Clone, PartialEq)]
pub struct ValuesStack {
    layers: Vec<Layer>,
    /// Every layer but `crdValues`, merged: what the release installs with.
    install: Value,
    /// With `crdValues` merged in its place; `None` without `crdValues`
    /// (the CRD phase then renders with the install values).
    crd: Option<Value>,
    /// Every layer's secret paths.
    secrets: SecretPaths,
}

impl Default for ValuesStack {
    fn default() -> Self {
        ValuesStack {
            layers: Vec::new(),
            install: Value::Object(Map::new()),
            crd: None,
            secrets: SecretPaths::default(),
        }
    }
}

impl ValuesStack {
    /// The stack of `layers`, given in merge order.
    pub fn new(layers: Vec<Layer>) -> ValuesStack {
        let mut stack = ValuesStack::default();
        for layer in layers {
            stack.push(layer);
        }
        stack
    }

    /// `layer` merged over the stack (a `crdValues` layer only into the
    /// CRD-phase values).
    pub fn push(&mut self, layer: Layer) {
        self.secrets.extend(&layer.secrets);
        if layer.gives() {
            if layer.step == Step::CrdValues {
                let crd = self.crd.get_or_insert_with(|| self.install.clone());
                merge_from(crd, &layer.values);
            } else {
                if let Some(crd) = &mut self.crd {
                    merge_from(crd, &layer.values);
                }
                merge_from(&mut self.install, &layer.values);
            }
        }
        self.layers.push(layer);
    }

    /// The merged values the release installs with.
    pub fn install(&self) -> &Value {
        &self.install
    }

    /// The values of the CRD-phase render: the install values with
    /// `crdValues` merged.
    pub fn crd(&self) -> &Value {
        self.crd.as_ref().unwrap_or(&self.install)
    }

    /// Where the values hold the leaves of sops-encrypted files: redacted
    /// wherever values are shown.
    pub fn secrets(&self) -> &SecretPaths {
        &self.secrets
    }

    pub fn layers(&self) -> &[Layer] {
        &self.layers
    }

    /// Where the install values are written, in merge order (the last
    /// source that sets a key is the one that wins).
    pub fn sources(&self) -> impl DoubleEndedIterator<Item = &ValuesSource> {
        self.layers
            .iter()
            .filter(|l| l.step != Step::CrdValues)
            .flat_map(|l| &l.sources)
    }

    /// Where `crdValues` is written, when it gives the CRD phase other
    /// values than the install's.
    pub fn crd_sources(&self) -> impl Iterator<Item = &ValuesSource> {
        let differs = self.crd() != self.install();
        self.layers
            .iter()
            .filter(move |l| differs && l.step == Step::CrdValues)
            .flat_map(|l| &l.sources)
    }

    /// The config's layers that give values, in merge order: what `plan`
    /// names as a release's values sources.
    pub fn named(&self) -> impl Iterator<Item = &Layer> {
        self.layers.iter().filter(|l| l.named())
    }

    /// Each named layer with the leaf paths it decides (no later named
    /// layer sets them): where each value came from.
    pub fn provenance(&self) -> Vec<(&Layer, Vec<String>)> {
        let named: Vec<&Layer> = self.named().collect();
        named
            .iter()
            .enumerate()
            .map(|(i, layer)| {
                let decided = leaves(&layer.values)
                    .into_iter()
                    .filter(|p| !named[i + 1..].iter().any(|later| sets(&later.values, p)))
                    .collect();
                (*layer, decided)
            })
            .collect()
    }
}

#[cfg(test)]
impl ValuesStack {
    /// A stack of one layer of release values, for unit tests.
    pub(crate) fn of(values: Value) -> ValuesStack {
        ValuesStack::new(vec![Layer::new(
            Step::ReleaseValues,
            "release values".into(),
            values,
        )])
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn layer(step: Step, values: Value) -> Layer {
        Layer::new(step, format!("{step:?}"), values)
    }

    #[test]
    fn crd_values_sit_under_the_run_and_only_in_the_crd_phase() {
        let mut stack = ValuesStack::new(vec![
            layer(
                Step::ReleaseValues,
                json!({"crds": {"enabled": false}, "a": 1}),
            ),
            layer(Step::CrdValues, json!({"crds": {"enabled": true}, "a": 2})),
        ]);
        assert_eq!(
            stack.install(),
            &json!({"crds": {"enabled": false}, "a": 1})
        );
        assert_eq!(stack.crd(), &json!({"crds": {"enabled": true}, "a": 2}));
        stack.push(layer(Step::Run, json!({"a": 3})));
        assert_eq!(
            stack.install(),
            &json!({"crds": {"enabled": false}, "a": 3})
        );
        assert_eq!(stack.crd(), &json!({"crds": {"enabled": true}, "a": 3}));
    }

    #[test]
    fn without_crd_values_the_crd_phase_takes_the_install_values() {
        let stack = ValuesStack::of(json!({"a": 1}));
        assert!(std::ptr::eq(stack.crd(), stack.install()));
        assert_eq!(stack.crd_sources().count(), 0);
    }

    #[test]
    fn own_layers_that_are_not_maps_give_nothing_and_are_not_named() {
        let stack = ValuesStack::new(vec![
            layer(Step::ReleaseValues, json!({"a": 1})),
            layer(Step::ReleaseFile, Value::Null),
            layer(Step::OverrideValues, json!({"a": 2, "b": 1})),
        ]);
        assert_eq!(stack.install(), &json!({"a": 2, "b": 1}));
        let provenance: Vec<(Step, Vec<String>)> = stack
            .provenance()
            .into_iter()
            .map(|(l, paths)| (l.step, paths))
            .collect();
        assert_eq!(
            provenance,
            vec![
                (Step::ReleaseValues, vec![]),
                (Step::OverrideValues, vec!["a".to_string(), "b".to_string()])
            ]
        );
    }

    #[test]
    fn secrets_of_every_layer_are_kept() {
        let mut file = layer(Step::ReleaseFile, json!({"password": "x"}));
        file.secrets.add_leaves(&file.values.clone());
        let stack = ValuesStack::new(vec![file, layer(Step::OverrideValues, json!({"b": 1}))]);
        assert!(stack.secrets().covers("password"));
        assert!(!stack.secrets().covers("b"));
    }
}
