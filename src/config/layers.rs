//! The layers of one release's values (docs/design.md#values-merge-order),
//! one function per layer: rendered, read and decrypted, each with where it
//! is written and its label. `render` stacks them into the release's
//! [`ValuesStack`](crate::values::stack::ValuesStack); step 0 (`from:`) comes
//! from `from`, the run's `--values`/`--set` from [`super::run_values`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::cache::{Entry, Pack};
use super::draft::{Draft, Paths};
use super::file::{OverrideFile, Values};
use super::from::Resolved;
use super::position::located;
use super::read::Unreadable;
use super::sops::{self, Sops};
use crate::error::Problem;
use crate::handlebars::{Renderer, TemplateContext};
use crate::values::SecretPaths;
use crate::values::stack::{Layer, Step, ValuesSource};
use crate::yaml;

/// The values files of a load, each read once, and each text (a plain
/// file's, or a template's as rendered) parsed once: a catalog names the
/// same few files from many releases, and a template that does not use
/// `release.*` renders the same text for each of them. A text parsed on an
/// earlier run comes from the cluster's parse-cache pack
/// (docs/design.md#parse-cache), and [`ValuesFiles::save`] writes what this
/// plan read back to it.
#[derive(Default)]
pub(crate) struct ValuesFiles {
    texts: Mutex<HashMap<PathBuf, Result<Arc<str>, Unreadable>>>,
    parsed: Mutex<HashMap<PathBuf, ParsedTexts>>,
    pack: Pack,
    /// The pack's entries for the texts this plan parsed or read from it.
    used: Mutex<Vec<Entry>>,
}

/// What each text of one values file parsed to.
type ParsedTexts = HashMap<Arc<str>, Result<Value, Problem>>;

impl ValuesFiles {
    /// Values files whose parses are kept in `pack`.
    pub(super) fn cached(pack: Pack) -> ValuesFiles {
        ValuesFiles {
            pack,
            ..ValuesFiles::default()
        }
    }

    /// Writes the texts this plan parsed to the pack (docs/design.md#parse-cache).
    pub(super) fn save(self) {
        let used = self.used.into_inner().unwrap_or_else(|e| e.into_inner());
        self.pack.save(used);
    }

    /// The text of `path`, as [`super::read::text`] reads it.
    fn text(&self, path: &Path) -> Result<Arc<str>, Unreadable> {
        if let Some(text) = lock(&self.texts).get(path) {
            return text.clone();
        }
        let text = super::read::text(path).map(Arc::from);
        lock(&self.texts).insert(path.to_path_buf(), text.clone());
        text
    }

    /// What `parse` makes of `text` of `path`, made once per text, and on a
    /// later run read from the pack when `keep`: what `parse` gives depends
    /// on nothing but the text. Only a text that parsed is kept.
    fn parsed(
        &self,
        path: &Path,
        (text, keep): (&Arc<str>, bool),
        parse: impl FnOnce() -> Result<Value, Problem>,
    ) -> Result<Value, Problem> {
        if let Some(parsed) = lock(&self.parsed)
            .get(path)
            .and_then(|texts| texts.get(&**text))
        {
            return parsed.clone();
        }
        let key = self.pack.key(text).filter(|_| keep);
        let parsed = match key.and_then(|key| Some((key, self.pack.get::<Value>(&key)?))) {
            Some((key, value)) => {
                lock(&self.used).push((key, None));
                Ok(value)
            }
            None => {
                let parsed = parse();
                if let (Some(key), Ok(value)) = (key, &parsed) {
                    lock(&self.used).push((key, Pack::encode(value)));
                }
                parsed
            }
        };
        lock(&self.parsed)
            .entry(path.to_path_buf())
            .or_default()
            .insert(text.clone(), parsed.clone());
        parsed
    }
}

/// A poisoned cache only means another render panicked; its entries are whole.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// What reading the layers of one release needs.
pub(crate) struct Layers<'a> {
    pub renderer: &'a Renderer,
    pub sops: &'a Sops,
    pub files: &'a ValuesFiles,
    pub paths: &'a Paths,
    /// The template context of the release.
    pub ctx: &'a TemplateContext,
    pub draft: &'a Draft,
}

/// Where an inline map is written: its file, as shown, and a line of the
/// YAML document that holds it.
type Inline<'p> = (&'p Path, &'p Path, u64);

impl Layers<'_> {
    /// 1: the release's inline `values`.
    pub(super) fn release_values(&self, problems: &mut Vec<Problem>) -> Option<Layer> {
        let map = self.draft.doc.values.as_ref()?;
        Some(self.in_release(
            Step::ReleaseValues,
            map,
            ("values", "release values"),
            problems,
        ))
    }

    /// 2: the release's `valuesFiles`, in order.
    pub(super) fn release_files(&self, problems: &mut Vec<Problem>) -> Vec<Layer> {
        let dir = self.draft.file.parent().unwrap_or(&self.paths.root);
        let files = &self.draft.doc.values_files;
        files
            .iter()
            .map(|vf| {
                let path = dir.join(&vf.value);
                let shown = self.paths.show(&path);
                let label = format!("release valuesFile {}", shown.display());
                self.file(Step::ReleaseFile, label, (&path, shown), problems)
            })
            .collect()
    }

    /// 3: the cluster override's `valuesFiles` (relative to the cluster
    /// directory), in order.
    pub(super) fn override_files(
        &self,
        cluster_dir: &Path,
        o: &OverrideFile,
        problems: &mut Vec<Problem>,
    ) -> Vec<Layer> {
        let shown_cluster = self.paths.show(&cluster_dir.join("cluster.yaml"));
        let mut layers = Vec::new();
        for vf in &o.values_files {
            let path = cluster_dir.join(&vf.value);
            if !path.is_file() {
                problems.push(
                    Problem::new(format!(
                        "override values file `{}` does not exist (paths are relative to the cluster directory)",
                        vf.value
                    ))
                    .file(&shown_cluster)
                    .release(&self.draft.id)
                    .at(vf.referenced.line(), vf.referenced.column()),
                );
                continue;
            }
            let shown = self.paths.show(&path);
            let label = format!("cluster override valuesFile {}", shown.display());
            layers.push(self.file(Step::OverrideFile, label, (&path, shown), problems));
        }
        layers
    }

    /// 4: the cluster override's inline `values` (`overrides.KEY.values`).
    pub(super) fn override_values(
        &self,
        cluster_dir: &Path,
        (key, o): (&str, &OverrideFile),
        problems: &mut Vec<Problem>,
    ) -> Option<Layer> {
        let map = o.values.as_ref()?;
        let file = cluster_dir.join("cluster.yaml");
        let shown = self.paths.show(&file);
        let values = self.inline(map, (&file, &shown, 1), problems);
        let label = format!(
            "cluster override values ({} overrides.{key})",
            shown.display()
        );
        let source = self.source((&file, shown.clone()), &["overrides", key, "values"], None);
        Some(Layer::new(Step::OverrideValues, label, values).written_at(source))
    }

    /// `crdValues`, for the CRD-phase render only.
    pub(super) fn crd_values(&self, problems: &mut Vec<Problem>) -> Option<Layer> {
        let map = self.draft.doc.crd_values.as_ref()?;
        Some(self.in_release(Step::CrdValues, map, ("crdValues", "crdValues"), problems))
    }

    /// An inline map of the release's own document: its `key`, labelled
    /// `name (FILE)`.
    fn in_release(
        &self,
        step: Step,
        map: &Values,
        (key, name): (&str, &str),
        problems: &mut Vec<Problem>,
    ) -> Layer {
        let draft = self.draft;
        let shown = &draft.shown;
        let values = self.inline(map, (&draft.file, shown, draft.line), problems);
        let label = format!("{name} ({})", shown.display());
        let source = self.source((&draft.file, shown.clone()), &[key], Some(draft.line));
        Layer::new(step, label, values).written_at(source)
    }

    /// A `from:` HelmRelease's `valuesFrom` objects that are not in git
    /// are an error unless the release gives values of its own (`own`).
    pub(super) fn check_unresolved(
        &self,
        from: &Resolved,
        own: &[Layer],
        problems: &mut Vec<Problem>,
    ) {
        if own.iter().any(|l| l.values.is_object()) {
            return;
        }
        let shown = &self.draft.shown;
        for missing in &from.unresolved {
            problems.push(
                Problem::new(format!(
                    "its Flux HelmRelease {} takes values from {}, but {}: bootstrap cannot read it; give those values in the release's own `values`/`valuesFiles` (or a cluster override)",
                    from.from.helm_release, missing.what, missing.why
                ))
                .file(shown)
                .release(&self.draft.id),
            );
        }
    }

    /// Where a layer is written: `path`, and `shown`, what
    /// [`Paths::show`] makes of it.
    fn source(
        &self,
        (path, shown): (&Path, PathBuf),
        prefix: &[&str],
        document_line: Option<u64>,
    ) -> ValuesSource {
        ValuesSource {
            path: path.to_path_buf(),
            shown,
            prefix: prefix.iter().map(|p| p.to_string()).collect(),
            document_line,
        }
    }

    /// Inline values: every string leaf a template. Found in their file
    /// from the release's document on, and only when one fails: reading
    /// the file for every release made loading a catalog quadratic in the
    /// size of its files.
    fn inline(
        &self,
        map: &Values,
        (path, shown, within): Inline,
        problems: &mut Vec<Problem>,
    ) -> Value {
        self.renderer
            .render_map(map, self.ctx)
            .unwrap_or_else(|errors| {
                for e in &errors {
                    let problem = Problem::new(e.to_string())
                        .file(shown)
                        .release(&self.draft.id);
                    problems.push(located(problem, path, within, e));
                }
                Value::Null
            })
    }

    /// The layer of one values file; the leaves of a sops-encrypted one are
    /// its secrets.
    fn file(
        &self,
        step: Step,
        label: String,
        (path, shown): (&Path, PathBuf),
        problems: &mut Vec<Problem>,
    ) -> Layer {
        let mut secrets = SecretPaths::default();
        let values = self.read((path, &shown), problems, &mut secrets);
        let mut layer =
            Layer::new(step, label, values).written_at(self.source((path, shown), &[], None));
        layer.secrets = secrets;
        layer
    }

    /// The values of one file; the leaves of a sops-encrypted one are added
    /// to `secrets`.
    fn read(
        &self,
        (path, shown): (&Path, &Path),
        problems: &mut Vec<Problem>,
        secrets: &mut SecretPaths,
    ) -> Value {
        let id = &self.draft.id;
        let text = match self.files.text(path) {
            Ok(text) => text,
            Err(unreadable) => {
                problems.push(unreadable.about("values file").problem(shown).release(id));
                return Value::Null;
            }
        };
        let template = is_template(path);
        let encrypted = sops::named(path) || sops::has_metadata(&text);
        if encrypted && template {
            problems.push(
            Problem::new(format!(
                "is encrypted with sops, and an encrypted file is never a template: rename it to {}",
                path.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            ))
            .file(shown)
            .release(id),
        );
            return Value::Null;
        }
        if encrypted {
            return match self.sops.values(path) {
                Ok(v) => {
                    secrets.add_leaves(&v);
                    v
                }
                Err(failure) => {
                    problems.push(failure.problem().file(shown).release(id));
                    Value::Null
                }
            };
        }
        // A template that reads the environment renders its values (a
        // token): that text is never written to the parse cache.
        let keep = !(template && crate::handlebars::reads_environment(&text));
        let rendered: Arc<str> = if template {
            match self.renderer.render_yaml(&text, self.ctx) {
                Ok(r) => Arc::from(r),
                Err(e) => {
                    // The whole file is the template: its positions are the file's.
                    let mut p = Problem::new(e.to_string()).file(shown).release(id);
                    if let Some((line, column)) = e.at {
                        p = p.at(line as u64, column as u64);
                    }
                    problems.push(p);
                    return Value::Null;
                }
            }
        } else {
            if let Some((line, expression)) = template_use(&text) {
                problems.push(
                Problem::new(format!(
                    "`{expression}` is not rendered: values files are plain YAML; rename it to {} to template it",
                    template_name(path)
                ))
                .file(shown)
                .at(line, 0)
                .release(id),
            );
                return Value::Null;
            }
            text
        };
        self.files
            .parsed(path, (&rendered, keep), || {
                parsed(&rendered, shown, template, path)
            })
            .map_err(|p| problems.push(p.release(id)))
            .unwrap_or(Value::Null)
    }
}

/// A values file's text, rendered if it is a template, as a map (`Null`
/// when empty).
fn parsed(rendered: &str, shown: &Path, template: bool, path: &Path) -> Result<Value, Problem> {
    match yaml::document::<Value>(rendered, shown) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(Value::Null) => Ok(Value::Null),
        Ok(other) => Err(Problem::new(format!(
            "a values file must be a YAML map, not {}",
            crate::yaml::kind_of(&other)
        ))
        .file(shown)
        .at(crate::yaml::first_content_line(rendered), 1)),
        Err(mut p) => {
            if !template && rendered.contains("{{") {
                p.message = format!(
                    "{}; values files are plain YAML, and this one holds `{{{{`: rename it to {} to template it",
                    p.message,
                    template_name(path)
                );
            }
            Err(p)
        }
    }
}

/// Values files are plain YAML; only a file whose name ends in `.hbs`
/// (`cilium.yaml.hbs`) is a handlebars template (docs/design.md#values-files),
/// so a Corefile's `{{ .Zone }}` or a Go template in a chart value stays text.
pub(crate) fn is_template(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "hbs")
}

/// What to rename a plain values file to so it is rendered as a template.
fn template_name(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{name}.hbs")
}

/// The first line (1-based) and expression of a plain values file that uses
/// bootstrap's template context (`{{cluster.…}}`, `{{release.…}}`,
/// `{{root}}`, `{{env …}}`): text that was meant to be rendered and would
/// reach the chart as it is. Other `{{…}}` (Go templates, `{{ .Zone }}`) are
/// values in their own right. Comment lines are not looked at.
fn template_use(text: &str) -> Option<(u64, String)> {
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with('#') {
            continue;
        }
        let mut rest = line;
        while let Some(start) = rest.find("{{") {
            let after = &rest[start + 2..];
            let inner = after.trim_start_matches(['~', '#', ' ']);
            let ours = ["cluster.", "release.", "root", "env "]
                .iter()
                .any(|p| inner.starts_with(p));
            if ours {
                let end = after.find("}}").map_or(after.len(), |e| e + 2);
                return Some((n as u64 + 1, format!("{{{{{}", &after[..end])));
            }
            rest = after;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_values_file_text_is_parsed_once_and_another_text_anew() {
        let files = ValuesFiles::default();
        let path = Path::new("values/common.yaml.hbs");
        let parse = |text: &str| {
            let text: Arc<str> = Arc::from(text);
            let mut calls = 0;
            let value = files.parsed(path, (&text, true), || {
                calls += 1;
                Ok(serde_json::json!({ "text": &*text }))
            });
            (value.unwrap(), calls)
        };
        assert_eq!(parse("a: 1").1, 1);
        assert_eq!(parse("a: 1"), (serde_json::json!({"text": "a: 1"}), 0));
        assert_eq!(parse("a: 2"), (serde_json::json!({"text": "a: 2"}), 1));
        // The same text of another file is that file's own.
        let other: Arc<str> = Arc::from("a: 1");
        let mut called = false;
        let _ = files.parsed(Path::new("values/other.yaml"), (&other, true), || {
            called = true;
            Ok(Value::Null)
        });
        assert!(called);
    }

    #[test]
    fn only_hbs_names_are_templates() {
        assert!(is_template(Path::new("values/cilium.yaml.hbs")));
        assert!(is_template(Path::new("x.yml.hbs")));
        assert!(!is_template(Path::new("values/cilium.yaml")));
        assert!(!is_template(Path::new("hbs.yaml")));
        assert_eq!(
            template_name(Path::new("a/b/cilium.yaml")),
            "cilium.yaml.hbs"
        );
    }

    #[test]
    fn template_context_is_found_outside_comments() {
        assert_eq!(
            template_use("a: 1\nb: \"{{cluster.name}}\"\n"),
            Some((2, "{{cluster.name}}".into()))
        );
        assert_eq!(
            template_use("x: {{~ release.name ~}}"),
            Some((1, "{{~ release.name ~}}".into()))
        );
        assert_eq!(
            template_use("x: '{{env \"A\"}}'"),
            Some((1, "{{env \"A\"}}".into()))
        );
        assert_eq!(template_use("x: {{root}}/a"), Some((1, "{{root}}".into())));
        assert_eq!(template_use("x: '{{root'"), Some((1, "{{root'".into())));
        // Go templates and comments are values or text of their own.
        assert_eq!(template_use("authority \"{{ .Zone }}\"\n"), None);
        assert_eq!(template_use("  # uses {{cluster.name}}\n"), None);
        assert_eq!(template_use("x: {{ .Values.cluster.name }}"), None);
        assert_eq!(template_use("clusterName: x"), None);
    }
}
