//! A release's templated fields (`{{ .Release.Name }}`, `{{ .Values.x }}`
//! in its name, namespace, chart, values, …) rendered the way helmfile
//! renders them, through the file-reading template subset (`gotmpl`).

use std::path::Path;

use serde_json::{Map, Value, json};

use super::{
    Release, State, ValuesEntry, deep_override, find_line, first_line, flux_document, line_of,
};
use crate::import::Issue;
use crate::import::gotmpl::{Engine, Read, normalize};

/// The releases helmfile rendered: every field is final; a values entry
/// naming a plain file is used where it is (as without helmfile), any other
/// is the values helmfile computed. The files a `.gotmpl` values template
/// reads are found by evaluating it with the importer's own subset, when
/// that gives the same values (to recognise a Flux HelmRelease).
pub(super) fn rendered_releases(state: &State, list: &[Value], embedded: &[Value]) -> Vec<Release> {
    let mut out = Vec::new();
    let mut search_from = line_of(&state.text, &["releases"]);
    for (i, raw) in list.iter().enumerate() {
        let Value::Object(spec) = raw else { continue };
        let mut spec = spec.clone();
        // What helmfile adds: where it found a local chart, and the labels
        // every release carries (bootstrap's releases carry the same).
        spec.remove("inherit");
        spec.remove("chartPath");
        if let Some(Value::Object(labels)) = spec.get_mut("labels") {
            for key in ["name", "namespace", "chart"] {
                labels.remove(key);
            }
        }
        let name = spec.get("name").and_then(Value::as_str).unwrap_or("");
        let line = find_line(&state.text, search_from, &format!("name: {name}"))
            .or_else(|| find_line(&state.text, 1, &format!("name: {name}")))
            .unwrap_or(search_from);
        search_from = search_from.max(line + 1);
        let mut release = Release {
            spec: spec.clone(),
            origins: Map::new(),
            line,
            values: Vec::new(),
            chart_reads: Vec::new(),
            issues: Vec::new(),
        };
        let data = release_data(&release.spec);
        let computed = embedded
            .get(i)
            .and_then(|r| r.get("values"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let entries = spec
            .get("values")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (j, entry) in entries.iter().enumerate() {
            let values = match computed.get(j) {
                Some(Value::Object(map)) => map.clone(),
                _ => Map::new(),
            };
            match entry {
                Value::String(rel) => {
                    let path = normalize(&state.dir.join(rel));
                    if path.is_file() && !path.to_string_lossy().ends_with(".gotmpl") {
                        release.values.push(ValuesEntry::File(path));
                        continue;
                    }
                    let reads = subset_reads(&path, &data, &values);
                    release.values.push(ValuesEntry::Computed {
                        values,
                        from: Some(path),
                        reads,
                    });
                }
                _ => release.values.push(ValuesEntry::Computed {
                    values,
                    from: None,
                    reads: Vec::new(),
                }),
            }
        }
        out.push(release);
    }
    out
}

/// The files the subset evaluator reads rendering `template`, when it
/// renders the same values helmfile did; else none.
pub(super) fn subset_reads(
    template: &Path,
    data: &Value,
    values: &Map<String, Value>,
) -> Vec<Read> {
    let Ok(source) = std::fs::read_to_string(template) else {
        return Vec::new();
    };
    let dir = template.parent().map(Path::to_path_buf).unwrap_or_default();
    let engine = Engine::new(data.clone());
    match engine.render(&source, template, 1, &dir) {
        Ok(text) if parse_values(&text).is_ok_and(|v| &v == values) => engine.reads.into_inner(),
        _ => Vec::new(),
    }
}

/// The `.Release` data of a release's current fields.
pub(crate) fn release_data(spec: &Map<String, Value>) -> Value {
    let s = |k: &str| {
        spec.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    json!({
        "Release": {
            "Name": s("name"), "Namespace": s("namespace"), "Chart": s("chart"),
            "ChartVersion": s("version"), "KubeContext": s("kubeContext"),
            "Labels": spec.get("labels").cloned().unwrap_or(json!({})),
        },
        "Environment": {"Name": "default"},
        "Values": {}, "StateValues": {},
        "Namespace": "", "KubeContext": "", "Chart": "",
    })
}

/// Renders name, namespace, chart, version, needs and the values entries.
/// Returns false when the release cannot be imported at all (its name or
/// namespace does not render).
pub(super) fn render_fields(state: &State, release: &mut Release) -> bool {
    let mut issues = std::mem::take(&mut release.issues);
    let ok = render_fields_into(state, release, &mut issues);
    release.issues = issues;
    ok
}

pub(super) fn render_fields_into(
    state: &State,
    release: &mut Release,
    issues: &mut Vec<Issue>,
) -> bool {
    if !render_scalars(state, release, issues) {
        return false;
    }
    boolean_templates(state, release, issues);
    render_values(state, release, issues);
    true
}

/// The scalar fields (`name`, `namespace`, `chart`, `version`, the
/// `*Template` booleans) and `needs`, rendered pass after pass until they
/// settle (a field may use another); `false` when the name or namespace
/// cannot be rendered (the release is then not imported).
fn render_scalars(state: &State, release: &mut Release, issues: &mut Vec<Issue>) -> bool {
    let scalar_keys = [
        "name",
        "namespace",
        "chart",
        "version",
        "installedTemplate",
        "waitTemplate",
    ];
    let original = release.spec.clone();
    let mut current = original.clone();
    let mut reads = Vec::new();
    for _pass in 0..6 {
        let data = release_data(&current);
        let mut next = current.clone();
        let mut pass_issues = Vec::new();
        reads.clear();
        for key in scalar_keys {
            let Some(Value::String(text)) = original.get(key) else {
                continue;
            };
            if !text.contains("{{") {
                continue;
            }
            let at = release.origin(key, state);
            let engine = Engine::new(data.clone());
            match engine.render(text, &at.file, at.line, &state.dir) {
                Ok(rendered) => {
                    next.insert(key.to_string(), Value::String(rendered.trim().to_string()));
                }
                Err(u) => pass_issues.push(Issue::from(u).field(key)),
            }
            reads.extend(engine.reads.into_inner());
        }
        if let Some(Value::Array(needs)) = original.get("needs") {
            let mut rendered_needs = Vec::new();
            for need in needs {
                let Some(text) = need.as_str() else { continue };
                if !text.contains("{{") {
                    rendered_needs.push(Value::String(text.to_string()));
                    continue;
                }
                let at = release.origin("needs", state);
                match Engine::new(data.clone()).render(text, &at.file, at.line, &state.dir) {
                    Ok(r) => rendered_needs.push(Value::String(r.trim().to_string())),
                    Err(u) => pass_issues.push(Issue::from(u).field("needs")),
                }
            }
            next.insert("needs".into(), Value::Array(rendered_needs));
        }
        let done = next == current;
        current = next;
        if done || !pass_issues.is_empty() {
            issues.extend(pass_issues.clone());
            if !pass_issues.is_empty()
                && pass_issues
                    .iter()
                    .any(|i| i.field == "name" || i.field == "namespace")
            {
                return false;
            }
            break;
        }
    }
    release.spec = current;
    release.chart_reads = reads;
    true
}

/// `installedTemplate`/`waitTemplate` as `installed`/`wait`: their text
/// must render `true` or `false`.
fn boolean_templates(state: &State, release: &mut Release, issues: &mut Vec<Issue>) {
    for key in ["installedTemplate", "waitTemplate"] {
        if let Some(Value::String(text)) = release.spec.remove(key) {
            let target = key.trim_end_matches("Template");
            match text.trim() {
                "true" => {
                    release.spec.insert(target.into(), Value::Bool(true));
                }
                "false" => {
                    release.spec.insert(target.into(), Value::Bool(false));
                }
                other => {
                    let at = release.origin(key, state);
                    issues.push(Issue::new(
                        &at.file,
                        at.line,
                        key,
                        format!("renders `{other}`, not true or false"),
                    ));
                }
            }
        }
    }
}

/// The `values:` entries: maps as they are, files (templated names
/// rendered), `.gotmpl` files rendered through the subset.
fn render_values(state: &State, release: &mut Release, issues: &mut Vec<Issue>) {
    let data = release_data(&release.spec);
    let entries = release
        .spec
        .get("values")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let at = release.origin("values", state);
    for entry in entries {
        match entry {
            Value::String(text) => {
                if let Some(entry) = values_file(state, release, &text, &data, issues) {
                    release.values.push(entry);
                }
            }
            Value::Object(values) => release.values.push(ValuesEntry::Computed {
                values,
                from: None,
                reads: Vec::new(),
            }),
            _ => issues.push(Issue::new(
                &at.file,
                at.line,
                "values",
                "an entry is neither a file nor a map",
            )),
        }
    }
}

/// One `values:` entry naming a file: where it is, and for a `.gotmpl`
/// file its rendered values (or the Flux HelmRelease document it reads);
/// `None` with an issue when it cannot be used.
fn values_file(
    state: &State,
    release: &Release,
    text: &str,
    data: &Value,
    issues: &mut Vec<Issue>,
) -> Option<ValuesEntry> {
    let at = release.origin("values", state);
    let rel = if text.contains("{{") {
        match Engine::new(data.clone()).render(text, &at.file, at.line, &state.dir) {
            Ok(r) => r.trim().to_string(),
            Err(u) => {
                issues.push(Issue::from(u).field("values"));
                return None;
            }
        }
    } else {
        text.to_string()
    };
    if crate::import::gotmpl::has_env_mark(&rel) {
        issues.push(env_path_issue(&at, &rel, &state.dir));
        return None;
    }
    let path = normalize(&state.dir.join(&rel));
    if !path.is_file() {
        issues.push(Issue::new(
            &at.file,
            at.line,
            format!("values {rel}"),
            format!(
                "`{}` does not exist (helmfile fails on a missing values file)",
                path.display()
            ),
        ));
        return None;
    }
    if !path.to_string_lossy().ends_with(".gotmpl") {
        return Some(ValuesEntry::File(path));
    }
    let engine = Engine::translating_env(data.clone());
    let source = match std::fs::read_to_string(&path) {
        Ok(s) => s,
        Err(e) => {
            issues.push(Issue::new(
                &path,
                0,
                "values",
                format!("cannot be read: {e}"),
            ));
            return None;
        }
    };
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let rendered = match engine.render(&source, &path, 1, &dir) {
        Ok(r) => r,
        Err(u) => {
            let name = release.spec.get("name").and_then(Value::as_str);
            let ns = release.spec.get("namespace").and_then(Value::as_str);
            let found = match (name, ns) {
                (Some(name), Some(ns)) if u.reason.contains("is not set") => {
                    flux_document(&engine.reads.borrow(), &path, name, ns, &u.reason)
                }
                _ => None,
            };
            if found.is_none() {
                issues.push(u.into());
            }
            return found.map(ValuesEntry::FluxDocument);
        }
    };
    match parse_values(&rendered) {
        Ok(values) => Some(ValuesEntry::Computed {
            values,
            from: Some(path.clone()),
            reads: engine.reads.into_inner(),
        }),
        Err(reason) => {
            issues.push(Issue::new(&path, 1, "values", format!("renders {reason}")));
            None
        }
    }
}

pub(super) fn parse_values(text: &str) -> Result<Map<String, Value>, NotValues> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text)
        .map_err(|e| NotValues::NotYaml(first_line(&e.to_string()).to_string()))?;
    let mut merged = Map::new();
    for doc in docs {
        match doc {
            Value::Object(map) => deep_override(&mut merged, map),
            Value::Null => {}
            _ => return Err(NotValues::NotAMap),
        }
    }
    Ok(merged)
}

/// What a values template rendered instead of values; reads after "renders".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum NotValues {
    /// The YAML parser's first line.
    #[error("text that is not YAML: {0}")]
    NotYaml(String),
    #[error("YAML that is not a map")]
    NotAMap,
}

/// A values path that reads the environment (`values/{{ requiredEnv
/// "CLUSTER" }}.yaml`): which file it names depends on the machine, so the
/// issue names the pattern and the files of the repository it may name.
fn env_path_issue(at: &super::Origin, rel: &str, dir: &Path) -> Issue {
    let names = crate::import::gotmpl::env_mark_names(rel).join("`, `");
    let shown = crate::import::gotmpl::env_marks_to_templates(rel);
    // The files the pattern can name: text before the first mark, after the last.
    let before = &rel[..rel.find("${bootstrap:env").unwrap_or(0)];
    let after = &rel[rel.rfind('}').map_or(rel.len(), |i| i + 1)..];
    let parent = normalize(&dir.join(before)).parent().map(Path::to_path_buf);
    let mut candidates: Vec<String> = Vec::new();
    if let Some(parent) = parent.filter(|p| p.is_dir()) {
        let stem = Path::new(before)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|_| !before.ends_with('/'))
            .unwrap_or_default();
        let search = if before.ends_with('/') {
            normalize(&dir.join(before))
        } else {
            parent
        };
        if let Ok(entries) = std::fs::read_dir(&search) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with(&stem) && name.ends_with(after) && entry.path().is_file() {
                    candidates.push(
                        crate::import::relative(dir, &entry.path())
                            .display()
                            .to_string(),
                    );
                }
            }
        }
    }
    candidates.sort();
    let which = if candidates.is_empty() {
        String::new()
    } else {
        format!(" (it may name {})", candidates.join(", "))
    };
    Issue::new(
        &at.file,
        at.line,
        format!("values {shown}"),
        format!(
            "the values path reads the environment variable `{names}`, so the file it names depends on the machine{which}: write the path of the file this cluster uses, or import with helmfile and `{names}` set"
        ),
    )
}
