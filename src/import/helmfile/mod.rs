//! Reads helmfile state files the way helmfile does, up to the point where
//! each release's fields are known: which files (`pkg/app/app.go`
//! `findDesiredStateFiles`: a directory means its `*.y*ml` and
//! `*.y*ml.gotmpl` in name order; `helmfile.yaml`, `helmfile.yaml.gotmpl` or
//! `helmfile.d/`), whole-file rendering of `.gotmpl` files only
//! (`pkg/app/desired_state_file_loader.go`), `bases:` layered under the
//! file, release `templates:` with `inherit:` and `defaultInherit:`
//! (`pkg/state/state_exec_tmpl.go` `releaseWithInheritedTemplate`: mergo
//! without override, so a template's field wins over the release's and
//! lists are appended), and the release fields rendered as templates with
//! `.Release` until they stop changing (`ExecuteTemplates`, at most six
//! passes; `pkg/state/release.go` `ExecuteTemplateExpressions`).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::Issue;
use super::gotmpl::{Engine, Read, normalize};

mod fields;

pub(super) use fields::release_data;
use fields::{render_fields, rendered_releases};

/// One helmfile state file after bases and rendering.
pub(super) struct State {
    /// As shown to the user (the PATH typed, joined with what was found).
    pub path: PathBuf,
    /// The directory relative paths start from (helmfile's `basePath`).
    pub dir: PathBuf,
    pub text: String,
    pub doc: Map<String, Value>,
    /// `templates:` with the file and text each came from (bases included).
    pub templates: Vec<(String, Map<String, Value>, PathBuf, String)>,
    /// helmfile rendered it (`doc` is its rendering): the releases with
    /// their values embedded, index by index.
    pub embedded: Option<Vec<Value>>,
}

impl State {
    /// A state file as helmfile rendered it; `text` is the file as written
    /// (for the lines the import names).
    pub(super) fn rendered(path: &Path, rendered: super::rendered::RenderedState) -> State {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mut doc = rendered.doc;
        // Inheritance and bases are applied already; the rest is what
        // helmfile adds to the state it prints (its binaries, the file).
        for key in [
            "templates",
            "defaultInherit",
            "bases",
            "filepath",
            "helmBinary",
            "kustomizeBinary",
            "renderedvalues",
        ] {
            doc.remove(key);
        }
        // helmfile prints every helmDefaults field, set or not: the ones
        // off (false, 0) that the file does not write are its defaults.
        if let Some(Value::Object(defaults)) = doc.get_mut("helmDefaults") {
            defaults.retain(|key, value| {
                let off = matches!(value, Value::Bool(false))
                    || value.as_u64() == Some(0)
                    || value.is_null();
                !off || text.contains(&format!("{key}:"))
            });
        }
        State {
            path: path.to_path_buf(),
            dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
            text,
            doc,
            templates: Vec::new(),
            embedded: Some(rendered.embedded),
        }
    }
}

/// The state files PATH names, in helmfile's order.
pub(super) fn state_files(path: &Path) -> Result<Vec<PathBuf>, NoStateFiles> {
    if path.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    if !path.is_dir() {
        return Err(NoStateFiles::Missing(path.to_path_buf()));
    }
    let plain = path.join("helmfile.yaml");
    let gotmpl = path.join("helmfile.yaml.gotmpl");
    let dir_d = path.join("helmfile.d");
    let dir = if dir_d.is_dir() {
        dir_d
    } else if plain.is_file() {
        return Ok(vec![plain]);
    } else if gotmpl.is_file() {
        return Ok(vec![gotmpl]);
    } else {
        path.to_path_buf()
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|error| NoStateFiles::Unreadable {
            dir: dir.clone(),
            error,
        })?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            [".yaml", ".yml", ".yaml.gotmpl", ".yml.gotmpl"]
                .iter()
                .any(|ext| name.ends_with(ext))
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(NoStateFiles::Empty(dir));
    }
    Ok(files)
}

/// Why a path given to `import helmfile` names no state file.
#[derive(Debug, thiserror::Error)]
pub(super) enum NoStateFiles {
    #[error(
        "`{}` does not exist; give a helmfile (helmfile.yaml, helmfile.yaml.gotmpl) or a directory holding one or helmfile.d/",
        .0.display()
    )]
    Missing(PathBuf),
    #[error("`{}` cannot be read: {error}", .dir.display())]
    Unreadable { dir: PathBuf, error: std::io::Error },
    #[error("`{}` holds no helmfile (*.yaml, *.yaml.gotmpl)", .0.display())]
    Empty(PathBuf),
}

/// A release a state file defines, as far as its text tells without
/// rendering it: when the file as a whole cannot be read, its releases are
/// still named (and written, each saying why it is incomplete).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Declared {
    pub name: String,
    pub namespace: Option<String>,
    pub line: usize,
}

/// Reads one state file with its bases; problems become issues. When the
/// file cannot be read at all, `Err` holds the releases its text declares.
pub(super) fn load(path: &Path, issues: &mut Vec<Issue>) -> Result<State, Vec<Declared>> {
    load_depth(path, issues, 0).ok_or_else(|| {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        declared(&text)
    })
}

/// The `- name:` entries of the top-level `releases:` list, with the
/// `namespace:` of each where it is written literally.
pub(super) fn declared(text: &str) -> Vec<Declared> {
    let mut out: Vec<Declared> = Vec::new();
    let mut in_releases = false;
    let mut item_indent: Option<usize> = None;
    for (i, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with("{{") {
            continue;
        }
        if indent == 0 && !trimmed.starts_with('-') {
            in_releases = trimmed.starts_with("releases:");
            item_indent = None;
            continue;
        }
        if !in_releases {
            continue;
        }
        let value = |t: &str, key: &str| {
            t.strip_prefix(key)
                .map(|v| v.trim().trim_matches(['"', '\'']).to_string())
        };
        if let Some(rest) = trimmed.strip_prefix("- ") {
            let first = item_indent.get_or_insert(indent);
            if indent == *first {
                if let Some(name) = value(rest.trim_start(), "name:") {
                    out.push(Declared {
                        name,
                        namespace: None,
                        line: i + 1,
                    });
                } else {
                    out.push(Declared {
                        name: String::new(),
                        namespace: None,
                        line: i + 1,
                    });
                }
                continue;
            }
        }
        if let (Some(first), Some(last)) = (item_indent, out.last_mut())
            && indent == first + 2
        {
            if let Some(name) = value(trimmed, "name:") {
                last.name = name;
            } else if let Some(ns) = value(trimmed, "namespace:") {
                last.namespace = Some(ns);
            }
        }
    }
    out.retain(|d| !d.name.is_empty());
    out
}

fn load_depth(path: &Path, issues: &mut Vec<Issue>, depth: usize) -> Option<State> {
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let raw = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            issues.push(Issue::new(path, 0, "file", format!("cannot be read: {e}")));
            return None;
        }
    };
    let text = if path.to_string_lossy().ends_with(".gotmpl") {
        // helmfile renders a .gotmpl state file with the environment; with
        // no `--environment` that is `default` and no values.
        let engine = Engine::translating_env(json!({
            "Environment": {"Name": "default"},
            "Values": {}, "StateValues": {},
        }));
        match engine.render(&raw, path, 1, &dir) {
            Ok(text) => text,
            Err(u) => {
                issues.push(u.into());
                return None;
            }
        }
    } else {
        raw
    };
    let docs: Vec<Value> = match serde_saphyr::from_multiple(&text) {
        Ok(docs) => docs,
        Err(e) => {
            let line = e.location().map(|l| l.line() as usize).unwrap_or(0);
            issues.push(Issue::new(
                path,
                line,
                "YAML",
                format!(
                    "is not YAML helmfile could read: {}",
                    first_line(&e.to_string())
                ),
            ));
            return None;
        }
    };
    let mut own = Map::new();
    for doc in docs {
        match doc {
            Value::Object(map) => merge_state(&mut own, map),
            Value::Null => {}
            _ => {
                issues.push(Issue::new(
                    path,
                    1,
                    "document",
                    "is not a map of helmfile keys",
                ));
                return None;
            }
        }
    }
    let mut merged = Map::new();
    let mut templates = Vec::new();
    if let Some(Value::Array(bases)) = own.get("bases") {
        for base in bases {
            let Some(rel) = base.as_str() else { continue };
            let base_path = normalize(&dir.join(rel));
            if depth > 8 {
                issues.push(Issue::new(
                    path,
                    line_of(&text, &["bases"]),
                    "bases",
                    "nest deeper than 8 files (a cycle?)",
                ));
                continue;
            }
            if let Some(state) = load_depth(&base_path, issues, depth + 1) {
                templates.extend(state.templates);
                merge_state(&mut merged, state.doc);
            }
        }
    }
    if let Some(Value::Object(own_templates)) = own.get("templates") {
        for (name, spec) in own_templates {
            if let Value::Object(spec) = spec {
                templates.push((name.clone(), spec.clone(), path.to_path_buf(), text.clone()));
            }
        }
    }
    merge_state(&mut merged, own);
    Some(State {
        path: path.to_path_buf(),
        dir,
        text,
        doc: merged,
        templates,
        embedded: None,
    })
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// Layers `over` on `under` the way a file layers on its bases: releases and
/// repositories are appended, maps merged, anything else replaced.
fn merge_state(under: &mut Map<String, Value>, over: Map<String, Value>) {
    for (key, value) in over {
        match (under.get_mut(&key), value) {
            (Some(Value::Array(a)), Value::Array(b))
                if key == "releases" || key == "repositories" =>
            {
                a.extend(b)
            }
            (Some(Value::Object(a)), Value::Object(b)) => deep_override(a, b),
            (_, value) => {
                under.insert(key, value);
            }
        }
    }
}

fn deep_override(under: &mut Map<String, Value>, over: Map<String, Value>) {
    for (key, value) in over {
        match (under.get_mut(&key), value) {
            (Some(Value::Object(a)), Value::Object(b)) => deep_override(a, b),
            (_, value) => {
                under.insert(key, value);
            }
        }
    }
}

/// mergo.Merge(dst, src, WithAppendSlice) without override: fields `dst`
/// lacks (or holds empty) are taken from `src`, lists are appended.
fn mergo(dst: &mut Map<String, Value>, src: &Map<String, Value>) {
    for (key, value) in src {
        match dst.get_mut(key) {
            None => {
                dst.insert(key.clone(), value.clone());
            }
            Some(Value::Array(a)) => {
                if let Value::Array(b) = value {
                    a.extend(b.iter().cloned());
                }
            }
            Some(Value::Object(a)) => {
                if let Value::Object(b) = value {
                    mergo(a, b);
                }
            }
            Some(slot) => {
                let empty =
                    matches!(slot, Value::Null) || matches!(slot, Value::String(s) if s.is_empty());
                if empty {
                    *slot = value.clone();
                }
            }
        }
    }
}

/// Where a release field was written: the file, its text and the line.
#[derive(Clone)]
pub(super) struct Origin {
    pub file: PathBuf,
    pub line: usize,
}

/// A release with inheritance applied, fields rendered.
pub(super) struct Release {
    pub spec: Map<String, Value>,
    /// Where each top-level key was written (a template's keys point into
    /// the template).
    pub origins: Map<String, Value>,
    pub line: usize,
    /// Values entries: a file to reference, or values helmfile computed.
    pub values: Vec<ValuesEntry>,
    /// Files templates read while computing chart and version.
    pub chart_reads: Vec<Read>,
    /// What could not be converted in this release.
    pub issues: Vec<Issue>,
}

pub(super) enum ValuesEntry {
    /// A plain values file, used as it is.
    File(PathBuf),
    /// Values computed by helmfile (a .gotmpl file, or inline); the files
    /// the template read, to recognise a Flux HelmRelease among them.
    Computed {
        values: Map<String, Value>,
        from: Option<PathBuf>,
        reads: Vec<Read>,
    },
    /// A values template that reads a file of several YAML documents with
    /// `fromYaml`, which takes only the first, where a later one is the
    /// Flux HelmRelease of this release: `.spec.values` is not set on the
    /// first (helmfile fails the same way), and what was meant is the
    /// HelmRelease, which `from:` reads.
    FluxDocument(FluxDocument),
}

/// See [`ValuesEntry::FluxDocument`].
#[derive(Debug, Clone)]
pub(crate) struct FluxDocument {
    /// The values template.
    pub template: PathBuf,
    /// The file of several documents, absolute.
    pub file: PathBuf,
    /// Which documents: `document 1 (OCIRepository apps/app)`, the
    /// HelmRelease's number, and how many there are.
    pub first: String,
    pub helmrelease: usize,
    pub total: usize,
    /// Why the template failed (the importer's words).
    pub failure: String,
}

/// The [`FluxDocument`] behind a values template that failed: among the
/// files it read, one of several documents whose first is not a
/// HelmRelease and a later one is the HelmRelease `namespace/name`.
fn flux_document(
    reads: &[Read],
    template: &Path,
    name: &str,
    namespace: &str,
    failure: &str,
) -> Option<FluxDocument> {
    let str_at = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_string);
    let is_hr = |d: &Value| {
        d.get("kind").and_then(Value::as_str) == Some("HelmRelease")
            && str_at(d, "/apiVersion").is_some_and(|a| a.starts_with("helm.toolkit.fluxcd.io/"))
    };
    reads.iter().rev().find_map(|read| {
        let docs: Vec<Value> = serde_saphyr::from_multiple::<Value>(&read.text)
            .ok()?
            .into_iter()
            .filter(|d| !d.is_null())
            .collect();
        let first = docs.first()?;
        if docs.len() < 2 || is_hr(first) {
            return None;
        }
        let at = docs.iter().position(|d| {
            is_hr(d)
                && str_at(d, "/metadata/name").as_deref() == Some(name)
                && str_at(d, "/metadata/namespace")
                    .as_deref()
                    .is_none_or(|ns| ns == namespace)
        })?;
        let label = |d: &Value| {
            let kind = d.get("kind").and_then(Value::as_str).unwrap_or("(no kind)");
            match (
                str_at(d, "/metadata/namespace"),
                str_at(d, "/metadata/name"),
            ) {
                (Some(ns), Some(n)) => format!("{kind} {ns}/{n}"),
                (None, Some(n)) => format!("{kind} {n}"),
                _ => kind.to_string(),
            }
        };
        Some(FluxDocument {
            template: template.to_path_buf(),
            file: read.path.clone(),
            first: format!("document 1 ({})", label(first)),
            helmrelease: at + 1,
            total: docs.len(),
            failure: failure.to_string(),
        })
    })
}

impl Release {
    pub(super) fn origin(&self, key: &str, state: &State) -> Origin {
        match self.origins.get(key).and_then(Value::as_array) {
            Some(pair) => Origin {
                file: PathBuf::from(pair[0].as_str().unwrap_or("")),
                line: pair[1].as_u64().unwrap_or(0) as usize,
            },
            None => Origin {
                file: state.path.clone(),
                line: self.line,
            },
        }
    }
}

/// Every release of a state, inherited and rendered.
pub(super) fn releases(state: &State, issues: &mut Vec<Issue>) -> Vec<Release> {
    let Some(Value::Array(list)) = state.doc.get("releases") else {
        return Vec::new();
    };
    if let Some(embedded) = &state.embedded {
        return rendered_releases(state, list, embedded);
    }
    let default_inherit: Vec<String> = match state.doc.get("defaultInherit") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    };
    let mut out = Vec::new();
    let mut search_from = line_of(&state.text, &["releases"]);
    for raw in list {
        let Value::Object(raw) = raw else {
            issues.push(Issue::new(
                &state.path,
                search_from,
                "releases",
                "an entry is not a map",
            ));
            continue;
        };
        let name = raw.get("name").and_then(Value::as_str).unwrap_or("");
        let line = find_line(&state.text, search_from, &format!("name: {name}"))
            .or_else(|| find_line(&state.text, search_from, "name:"))
            .unwrap_or(search_from);
        search_from = line + 1;
        let next_release = find_line(&state.text, line + 1, "- name:").unwrap_or(usize::MAX);
        let mut origins = Map::new();
        let inherits = inherits(&default_inherit, raw);
        let mut spec = Map::new();
        let mut failed = false;
        for (template, except) in &inherits {
            let Some((_, body, file, text)) =
                state.templates.iter().rev().find(|t| &t.0 == template)
            else {
                issues.push(Issue::new(
                    &state.path,
                    line,
                    format!("inherit {template}"),
                    "names a release template that is not defined (helmfile fails too)",
                ));
                failed = true;
                break;
            };
            let mut body = body.clone();
            for key in except {
                body.remove(key);
            }
            body.remove("inherit");
            let tline = line_of(text, &["templates", template]);
            for key in body.keys() {
                if !spec.contains_key(key) {
                    let at = find_key_between(text, tline, usize::MAX, key).unwrap_or(tline);
                    origins.insert(key.clone(), json!([file.to_string_lossy(), at]));
                }
            }
            mergo(&mut spec, &body);
        }
        if failed {
            continue;
        }
        let mut own = raw.clone();
        own.remove("inherit");
        for key in own.keys() {
            // A template's field wins (mergo without override); lists are
            // appended and shown where the release writes them.
            if spec.get(key).is_some_and(|v| !v.is_null()) && !own[key].is_array() {
                continue;
            }
            let at = find_key_between(&state.text, line, next_release, key).unwrap_or(line);
            origins.insert(key.clone(), json!([state.path.to_string_lossy(), at]));
        }
        mergo(&mut spec, &own);
        let mut release = Release {
            spec,
            origins,
            line,
            values: Vec::new(),
            chart_reads: Vec::new(),
            issues: Vec::new(),
        };
        if render_fields(state, &mut release) {
            out.push(release);
        } else {
            issues.append(&mut release.issues);
        }
    }
    out
}

/// The templates a release inherits, each with the keys it `except`s:
/// those named by `inherit:`, after those of `defaultInherit:`.
fn inherits(default_inherit: &[String], raw: &Map<String, Value>) -> Vec<(String, Vec<String>)> {
    let mut inherits: Vec<(String, Vec<String>)> = default_inherit
        .iter()
        .map(|n| (n.trim().to_string(), Vec::new()))
        .filter(|(n, _)| !n.is_empty())
        .collect();
    if let Some(Value::Array(list)) = raw.get("inherit") {
        for item in list {
            let template = item.get("template").and_then(Value::as_str).unwrap_or("");
            let except: Vec<String> = item
                .get("except")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            if template.is_empty() {
                continue;
            }
            match inherits.iter_mut().find(|(n, _)| n == template) {
                Some(slot) => slot.1 = except,
                None => inherits.push((template.to_string(), except)),
            }
        }
    }
    inherits
}

/// The 1-based line of `path` (keys nested by indentation), or 0.
pub(super) fn line_of(text: &str, path: &[&str]) -> usize {
    let mut from = 0;
    let mut found = 0;
    for key in path {
        match find_key_between(text, from, usize::MAX, key) {
            Some(line) => {
                found = line;
                from = line + 1;
            }
            None => return found,
        }
    }
    found
}

/// The first line at or after `from` (1-based) whose text contains `needle`
/// after its indentation and list marker.
fn find_line(text: &str, from: usize, needle: &str) -> Option<usize> {
    text.lines()
        .enumerate()
        .skip(from.saturating_sub(1))
        .find(|(_, l)| {
            let l = l.trim_start().trim_start_matches("- ").trim_start();
            l.starts_with(needle)
                && (l.len() == needle.len()
                    || !needle.ends_with(|c: char| c.is_alphanumeric())
                    || !l[needle.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '-'))
        })
        .map(|(i, _)| i + 1)
}

/// The line of `key:` from line `from` up to (not including) `until`.
pub(super) fn find_key_between(text: &str, from: usize, until: usize, key: &str) -> Option<usize> {
    let at = find_line(text, from.max(1), &format!("{key}:"))?;
    (at < until).then_some(at)
}
