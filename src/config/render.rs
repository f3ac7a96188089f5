//! Renders one release for one cluster: values (merged in the documented
//! order), CRD-phase values and hook arguments.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::Cluster;
use super::draft::{Draft, Paths};
use super::file::OverrideFile;
use super::validate;
use crate::error::Problem;
use crate::release::{Hook, HookAction, ObjectRef, Release};
use crate::template::{Renderer, context};
use crate::values::merge;
use crate::yaml;

/// Values merge order (later wins): release `values` < release `valuesFiles`
/// < cluster override `valuesFiles` < cluster override `values`; the CRD
/// render adds `crdValues` last.
pub(crate) fn render_release(
    renderer: &Renderer,
    paths: &Paths,
    cluster: &Cluster,
    draft: &Draft,
    overrides: Option<&OverrideFile>,
) -> Result<Release, Vec<Problem>> {
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
    let inline =
        |map: &Option<Map<String, Value>>, file: &Path, problems: &mut Vec<Problem>| -> Value {
            match map {
                Some(map) => renderer
                    .render_value(&Value::Object(map.clone()), &ctx)
                    .unwrap_or_else(|e| {
                        problems.push(problem(file, e.to_string()));
                        Value::Null
                    }),
                None => Value::Null,
            }
        };
    let overlay = |values: &mut Value, v: Value| {
        if v.is_object() {
            merge(values, v);
        }
    };

    let v = inline(&draft.doc.values, &shown_release, &mut problems);
    overlay(&mut values, v);
    for vf in &draft.doc.values_files {
        let path = release_dir.join(&vf.value);
        let v = values_file(renderer, &path, paths, &ctx, &draft.id, &mut problems);
        overlay(&mut values, v);
    }
    let mut timeout = draft.timeout;
    if let Some(o) = overrides {
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
            let v = values_file(renderer, &path, paths, &ctx, &draft.id, &mut problems);
            overlay(&mut values, v);
        }
        let v = inline(&o.values, &shown_cluster, &mut problems);
        overlay(&mut values, v);
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
    let mut crd_values = values.clone();
    let v = inline(&draft.doc.crd_values, &shown_release, &mut problems);
    overlay(&mut crd_values, v);

    let mut hooks = draft.hooks.clone();
    for hook in hooks.presync.iter_mut().chain(hooks.postsync.iter_mut()) {
        if let Err(message) = render_hook(renderer, hook, &ctx, &paths.root) {
            problems.push(problem(&shown_release, message));
        }
    }

    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Release {
        id: draft.id.clone(),
        file: paths.show(&draft.file),
        line: draft.line,
        source: draft.source.clone(),
        needs: draft.needs.clone(),
        crds: draft.doc.crds,
        values,
        crd_values,
        timeout,
        wait: draft.doc.wait,
        hooks,
        ownership: draft.doc.ownership,
    })
}

fn values_file(
    renderer: &Renderer,
    path: &Path,
    paths: &Paths,
    ctx: &Value,
    id: &crate::release::ReleaseId,
    problems: &mut Vec<Problem>,
) -> Value {
    let shown = paths.show(path);
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            problems.push(
                Problem::new(format!("cannot read values file: {e}"))
                    .file(&shown)
                    .release(id),
            );
            return Value::Null;
        }
    };
    let rendered = match renderer.render_str(&text, ctx) {
        Ok(r) => r,
        Err(e) => {
            problems.push(Problem::new(e.to_string()).file(&shown).release(id));
            return Value::Null;
        }
    };
    match yaml::document::<Value>(&rendered, &shown) {
        Ok(v @ Value::Object(_)) => v,
        Ok(Value::Null) => Value::Null,
        Ok(_) => {
            problems.push(
                Problem::new("a values file must be a YAML map")
                    .file(&shown)
                    .release(id),
            );
            Value::Null
        }
        Err(p) => {
            problems.push(p.release(id));
            Value::Null
        }
    }
}

fn render_hook(
    renderer: &Renderer,
    hook: &mut Hook,
    ctx: &Value,
    root: &Path,
) -> Result<(), String> {
    let render = |s: &mut String| -> Result<(), String> {
        *s = renderer
            .render_str(s, ctx)
            .map_err(|e| format!("hook: {e}"))?;
        Ok(())
    };
    let render_object = |o: &mut ObjectRef| -> Result<(), String> {
        render(&mut o.name)?;
        if let Some(ns) = o.namespace.as_mut() {
            render(ns)?;
        }
        Ok(())
    };
    match &mut hook.action {
        HookAction::Rollout(o) | HookAction::Created(o) | HookAction::Job(o) => render_object(o)?,
        HookAction::Condition { object, .. } => render_object(object)?,
        HookAction::Command(argv) => {
            for arg in argv.iter_mut() {
                render(arg)?;
            }
            check_hook_files(argv, root)?;
        }
        HookAction::Shell(script) => render(script)?,
    }
    Ok(())
}

/// `kubectl apply -f FILE` in a hook: a file inside the repo that does not
/// exist would fail only after the releases before it were installed.
fn check_hook_files(argv: &[String], root: &Path) -> Result<(), String> {
    let mut files: Vec<&str> = Vec::new();
    let mut iter = argv.iter().skip(1).peekable();
    while let Some(arg) = iter.next() {
        if arg == "-f" || arg == "--filename" {
            if let Some(next) = iter.next() {
                files.push(next);
            }
        } else if let Some(v) = arg
            .strip_prefix("--filename=")
            .or_else(|| arg.strip_prefix("-f="))
        {
            files.push(v);
        }
    }
    for file in files {
        if file == "-" || validate::is_url(file) {
            continue;
        }
        let path = if Path::new(file).is_absolute() {
            PathBuf::from(file)
        } else {
            root.join(file)
        };
        if path.starts_with(root) && !path.exists() {
            let shown = path.strip_prefix(root).unwrap_or(&path);
            return Err(format!(
                "hook `{}` reads `{}`, which does not exist in the config root; create it or fix the path",
                argv.first().map(String::as_str).unwrap_or_default(),
                shown.display()
            ));
        }
    }
    Ok(())
}
