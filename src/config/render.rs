//! Renders one release for one cluster: values (merged in the documented
//! order), CRD-phase values and hook arguments.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::Cluster;
use super::draft::{Draft, Paths};
use super::file::{DefaultsFile, HelmFile, OverrideFile};
use super::origin::Resolved;
use super::sops::{self, Sops};
use crate::error::Problem;
use crate::hooks::Templates;
use crate::release::{CrdPolicy, HelmFlags, Release, Source, ValuesLayer, ValuesSource};
use crate::template::{Located, Renderer, context};
use crate::validate;
use crate::values::{SecretPaths, merge};
use crate::yaml;

/// One layer of `defaults` (docs/design.md#defaults): cluster.yaml's or
/// `releases/defaults.yaml`, with its timeout already checked.
pub(crate) struct Defaults<'a> {
    /// The file as shown in messages.
    pub file: PathBuf,
    pub doc: &'a DefaultsFile,
    pub timeout: Option<std::time::Duration>,
}

/// Values merge order (later wins): the HelmRelease of `from:` (its
/// `valuesFrom`, then `spec.values`) < release `values` < release `valuesFiles`
/// < cluster override `valuesFiles` < cluster override `values`; the CRD
/// render adds `crdValues` last.
/// What renders and reads values for every release of a load: the
/// template engine and sops (which decrypts each file once).
pub(crate) struct Readers {
    pub renderer: Renderer,
    pub sops: Sops,
}

pub(crate) fn render_release(
    readers: &Readers,
    paths: &Paths,
    cluster: &Cluster,
    draft: &Draft,
    overrides: Option<(&str, &OverrideFile)>,
    from: Option<&Resolved>,
    defaults: &[Defaults<'_>],
) -> Result<Release, Vec<Problem>> {
    let Readers { renderer, sops } = readers;
    let root = paths.root.to_string_lossy();
    let ctx = context(
        &cluster.name,
        cluster.context.as_deref(),
        &cluster.values,
        Some((&draft.id.namespace, &draft.id.name)),
        &root,
    );
    let shown_release = paths.show(&draft.file);
    let mut problems = Vec::new();
    let problem =
        |file: &Path, message: String| Problem::new(message).file(file).release(&draft.id);
    let release_dir = draft.file.parent().unwrap_or(&paths.root);

    let mut values = Value::Object(Map::new());
    // Inline templates are found in their file from the release's document
    // on (looked up only when one fails: reading the file for every release
    // made loading a catalog quadratic in the size of its files).
    let inline = |map: &Option<Map<String, Value>>,
                  (path, shown, within): (&Path, &Path, u64),
                  problems: &mut Vec<Problem>|
     -> Value {
        match map {
            Some(map) => renderer
                .render_value(&Value::Object(map.clone()), &ctx)
                .unwrap_or_else(|errors| {
                    for e in &errors {
                        problems.push(located(problem(shown, e.to_string()), path, within, e));
                    }
                    Value::Null
                }),
            None => Value::Null,
        }
    };
    let mut layers: Vec<ValuesLayer> = Vec::new();
    let mut overlay = |values: &mut Value, v: Value, label: String| {
        if v.is_object() {
            layers.push(ValuesLayer {
                label,
                from_flux: false,
                values: v.clone(),
            });
            merge(values, v);
        }
    };
    if let Some(from) = from {
        for layer in &from.layers {
            merge(&mut values, layer.values.clone());
        }
    }

    let mut sources: Vec<ValuesSource> = from.map(|f| f.sources.clone()).unwrap_or_default();
    let mut source = |path: &Path, prefix: &[&str], document_line: Option<u64>| {
        sources.push(ValuesSource {
            path: path.to_path_buf(),
            shown: paths.show(path),
            prefix: prefix.iter().map(|p| p.to_string()).collect(),
            document_line,
        })
    };
    let files = ValuesFiles {
        renderer,
        paths,
        ctx: &ctx,
        id: &draft.id,
        sops,
    };
    let mut secrets = SecretPaths::default();
    let in_release = (draft.file.as_path(), shown_release.as_path(), draft.line);
    let v = inline(&draft.doc.values, in_release, &mut problems);
    if draft.doc.values.is_some() {
        source(&draft.file, &["values"], Some(draft.line));
    }
    overlay(
        &mut values,
        v,
        format!("release values ({})", shown_release.display()),
    );
    for vf in &draft.doc.values_files {
        let path = release_dir.join(&vf.value);
        source(&path, &[], None);
        let v = files.read(&path, &mut problems, &mut secrets);
        overlay(
            &mut values,
            v,
            format!("release valuesFile {}", paths.show(&path).display()),
        );
    }
    let mut timeout = draft
        .timeout
        .or_else(|| defaults.iter().find_map(|d| d.timeout));
    if let Some((key, o)) = overrides {
        let cluster_file = cluster.dir.join("cluster.yaml");
        let shown_cluster = paths.show(&cluster.dir.join("cluster.yaml"));
        for vf in &o.values_files {
            let path = cluster.dir.join(&vf.value);
            if !path.is_file() {
                problems.push(
                    problem(
                        &shown_cluster,
                        format!(
                            "override values file `{}` does not exist (paths are relative to the cluster directory)",
                            vf.value
                        ),
                    )
                    .at(vf.referenced.line(), vf.referenced.column()),
                );
                continue;
            }
            source(&path, &[], None);
            let v = files.read(&path, &mut problems, &mut secrets);
            overlay(
                &mut values,
                v,
                format!(
                    "cluster override valuesFile {}",
                    paths.show(&path).display()
                ),
            );
        }
        if o.values.is_some() {
            source(&cluster_file, &["overrides", key, "values"], None);
        }
        let v = inline(&o.values, (&cluster_file, &shown_cluster, 1), &mut problems);
        overlay(
            &mut values,
            v,
            format!(
                "cluster override values ({} overrides.{key})",
                shown_cluster.display()
            ),
        );
        if let Some(t) = &o.timeout {
            match validate::duration(&t.value) {
                Ok(d) => timeout = Some(d),
                Err(why) => problems.push(
                    problem(&shown_cluster, format!("override timeout {why}"))
                        .at(t.referenced.line(), t.referenced.column()),
                ),
            }
        }
    }
    if let Some(from) = from
        && !from.unresolved.is_empty()
        && layers.is_empty()
    {
        for missing in &from.unresolved {
            problems.push(problem(
                &shown_release,
                format!(
                    "its Flux HelmRelease {} takes values from {}, but {}: bootstrap cannot read it; give those values in the release's own `values`/`valuesFiles` (or a cluster override)",
                    from.from.helm_release, missing.what, missing.why
                ),
            ));
        }
    }
    let mut crd_values = values.clone();
    let v = inline(&draft.doc.crd_values, in_release, &mut problems);
    if v.is_object() {
        merge(&mut crd_values, v);
    }

    let mut hooks = draft.hooks.clone();
    let templates = Templates {
        renderer,
        context: &ctx,
        root: &paths.root,
    };
    // Where each hook is written, in the same order as `hooks`.
    let written: Vec<(u64, u64)> = draft
        .doc
        .hooks
        .presync
        .iter()
        .chain(&draft.doc.hooks.postsync)
        .map(|h| (h.referenced.line(), h.referenced.column()))
        .collect();
    for (i, hook) in hooks
        .presync
        .iter_mut()
        .chain(hooks.postsync.iter_mut())
        .enumerate()
    {
        if let Err(e) = hook.render(&templates) {
            let mut p = problem(&shown_release, e.to_string());
            if let crate::hooks::HookError::Template(t) = &e {
                p = located(p, &draft.file, draft.line, t);
            }
            if p.line.is_none()
                && let Some((line, column)) = written.get(i)
            {
                p = p.at(*line, *column);
            }
            problems.push(p);
            continue;
        }
        // A hook acts on the cluster the run targets: its KUBECONFIG's
        // current context is that one, and naming another would change a
        // different cluster than the one being bootstrapped.
        // Without a context in cluster.yaml or --context, the run uses the
        // kubeconfig's current context, unknown here: nothing to compare.
        let Some(target) = cluster.context.as_deref() else {
            continue;
        };
        for named in hook.action.contexts() {
            if named != target {
                problems.push(problem(
                    &shown_release,
                    format!(
                        "hook {} names kubeconfig context `{named}`, but this run targets `{target}`; use `{{{{cluster.context}}}}` or drop the flag (hooks run with the run's context as current)",
                        hook.action
                    ),
                ));
            }
        }
    }

    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Release {
        id: draft.id.clone(),
        file: paths.show(&draft.file),
        line: draft.line,
        source: match (from, &draft.source) {
            (Some(from), _) => Source::Chart(from.chart.clone()),
            (None, Some(source)) => source.clone(),
            (None, None) => return Err(problems),
        },
        needs: draft.needs.clone(),
        crds: draft
            .doc
            .crds
            .or_else(|| defaults.iter().find_map(|d| d.doc.crds))
            .unwrap_or(CrdPolicy::Bootstrap),
        values,
        crd_values,
        values_sources: sources,
        secrets,
        layers: from
            .map(|f| f.layers.clone())
            .unwrap_or_default()
            .into_iter()
            .chain(layers)
            .collect(),
        from: from.map(|f| f.from.clone()),
        timeout,
        wait: draft
            .doc
            .wait
            .or_else(|| defaults.iter().find_map(|d| d.doc.wait))
            .unwrap_or(false),
        hooks,
        ownership: draft.doc.ownership,
        helm: helm_flags(&shown_release, &draft.doc.helm, defaults),
        labels: draft.doc.labels.clone(),
    })
}

/// Each key of `helm:` from the release, else the first defaults layer
/// that sets it; where it came from is kept for errors.
fn helm_flags(release_file: &Path, own: &HelmFile, defaults: &[Defaults<'_>]) -> HelmFlags {
    let layers: Vec<(&Path, &HelmFile)> = std::iter::once((release_file, own))
        .chain(defaults.iter().map(|d| (d.file.as_path(), &d.doc.helm)))
        .collect();
    let mut origin = Vec::new();
    let mut pick = |key: &str, get: &dyn Fn(&HelmFile) -> bool| -> bool {
        match layers.iter().find(|(_, h)| get(h)) {
            Some((file, _)) => {
                origin.push((format!("helm.{key}"), file.to_path_buf()));
                true
            }
            None => false,
        }
    };
    fn first<T: Copy>(
        layers: &[(&Path, &HelmFile)],
        get: impl Fn(&HelmFile) -> Option<T>,
    ) -> Option<T> {
        layers.iter().find_map(|(_, h)| get(h))
    }
    let cleanup_on_fail = first(&layers, |h| h.cleanup_on_fail).unwrap_or(false);
    let force = first(&layers, |h| h.force).unwrap_or(false);
    let history_max = first(&layers, |h| h.history_max);
    let disable_openapi_validation =
        first(&layers, |h| h.disable_openapi_validation).unwrap_or(false);
    let server_side = first(&layers, |h| h.server_side);
    let force_conflicts = first(&layers, |h| h.force_conflicts).unwrap_or(false);
    // Origins only of keys that add a flag.
    if cleanup_on_fail {
        pick("cleanupOnFail", &|h| h.cleanup_on_fail.is_some());
    }
    if force {
        pick("force", &|h| h.force.is_some());
    }
    if history_max.is_some() {
        pick("historyMax", &|h| h.history_max.is_some());
    }
    if disable_openapi_validation {
        pick("disableOpenAPIValidation", &|h| {
            h.disable_openapi_validation.is_some()
        });
    }
    if server_side.is_some() {
        pick("serverSide", &|h| h.server_side.is_some());
    }
    if force_conflicts {
        pick("forceConflicts", &|h| h.force_conflicts.is_some());
    }
    HelmFlags {
        cleanup_on_fail,
        force,
        history_max,
        disable_openapi_validation,
        server_side,
        force_conflicts,
        origin,
    }
}

/// What reading a release's values files needs.
struct ValuesFiles<'a> {
    renderer: &'a Renderer,
    paths: &'a Paths,
    ctx: &'a Value,
    id: &'a crate::release::ReleaseId,
    sops: &'a Sops,
}

impl ValuesFiles<'_> {
    /// The values of one file; the leaves of a sops-encrypted one are added
    /// to `secrets`.
    fn read(&self, path: &Path, problems: &mut Vec<Problem>, secrets: &mut SecretPaths) -> Value {
        let ValuesFiles {
            renderer,
            paths,
            ctx,
            id,
            sops,
        } = *self;
        let shown = paths.show(path);
        let text = match super::read::text(path) {
            Ok(text) => text,
            Err(unreadable) => {
                problems.push(unreadable.about("values file").problem(&shown).release(id));
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
            .file(&shown)
            .release(id),
        );
            return Value::Null;
        }
        if encrypted {
            return match sops.values(path) {
                Ok(v) => {
                    secrets.add_leaves(&v);
                    v
                }
                Err(failure) => {
                    problems.push(failure.problem().file(&shown).release(id));
                    Value::Null
                }
            };
        }
        let rendered = if template {
            match renderer.render_yaml(&text, ctx) {
                Ok(r) => r,
                Err(e) => {
                    // The whole file is the template: its positions are the file's.
                    let mut p = Problem::new(e.to_string()).file(&shown).release(id);
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
                .file(&shown)
                .at(line, 0)
                .release(id),
            );
                return Value::Null;
            }
            text
        };
        match yaml::document::<Value>(&rendered, &shown) {
            Ok(v @ Value::Object(_)) => v,
            Ok(Value::Null) => Value::Null,
            Ok(other) => {
                problems.push(
                    Problem::new(format!(
                        "a values file must be a YAML map, not {}",
                        crate::yaml::kind_of(&other)
                    ))
                    .file(&shown)
                    .at(crate::yaml::first_content_line(&rendered), 1)
                    .release(id),
                );
                Value::Null
            }
            Err(mut p) => {
                if !template && rendered.contains("{{") {
                    p.message = format!(
                        "{}; values files are plain YAML, and this one holds `{{{{`: rename it to {} to template it",
                        p.message,
                        template_name(path)
                    );
                }
                problems.push(p.release(id));
                Value::Null
            }
        }
    }
}

/// The 1-based line where the YAML document holding line `line` starts.
fn document_start(lines: &[&str], line: u64) -> u64 {
    (0..(line as usize).saturating_sub(1).min(lines.len()))
        .rev()
        .find(|&i| lines[i] == "---" || lines[i].starts_with("--- "))
        .map(|i| i as u64 + 2)
        .unwrap_or(1)
}

/// `problem` at the place in `file` where the failed template is written,
/// when it can be found: its failing line is searched as text from the start
/// of the YAML document holding line `within` on, as written or as escaped inside double quotes, and the
/// position within the template (handlebars') is added to where it starts.
fn located(problem: Problem, file: &Path, within: u64, error: &Located) -> Problem {
    match template_position(file, within, error) {
        Some((line, column)) => problem.at(line, column),
        None => problem,
    }
}

fn template_position(file: &Path, within: u64, error: &Located) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(file).ok()?;
    let (line, column) = error.at.unwrap_or((1, 1));
    let written = error.template.lines().nth(line.checked_sub(1)?)?;
    let needle = written.trim_start();
    if needle.is_empty() {
        return None;
    }
    // Characters of the template's line before the error, past its indentation.
    let into = column
        .saturating_sub(1)
        .saturating_sub(written.len() - needle.len());
    let escaped = serde_json::to_string(needle).ok()?;
    let escaped = &escaped[1..escaped.len() - 1];
    // A template written whole (up to a quote or the line's end) first,
    // so `{{#if x}}a` is not found inside `{{#if x}}a{{/if}}`.
    let whole = |l: &str, n: &str| {
        l.match_indices(n).map(|(at, _)| at).find(|&at| {
            let rest = l[at + n.len()..].trim_end();
            rest.is_empty() || rest.starts_with(['"', '\''])
        })
    };
    let lines: Vec<&str> = text.lines().collect();
    let from = (document_start(&lines, within) as usize).saturating_sub(1);
    let found = |find: &dyn Fn(&str) -> Option<usize>| {
        lines.iter().enumerate().skip(from).find_map(|(i, l)| {
            let at = find(l)?;
            Some((i as u64 + 1, (l[..at].chars().count() + into + 1) as u64))
        })
    };
    found(&|l| whole(l, needle).or_else(|| whole(l, escaped)))
        .or_else(|| found(&|l| l.find(needle).or_else(|| l.find(escaped))))
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
