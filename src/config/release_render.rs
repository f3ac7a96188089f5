//! Renders one release for one cluster: its values stack (`layers`, in
//! the documented order), its timeout, its hooks and helm flags.

use std::path::{Path, PathBuf};

use super::Cluster;
use super::draft::{Draft, Paths};
use super::file::{DefaultsFile, HelmFile, OverrideFile};
use super::from::Resolved;
use super::layers::{Layers, ValuesFiles};
use super::position::located;
use super::sops::Sops;
use crate::error::Problem;
use crate::handlebars::{Renderer, TemplateContext, context};
use crate::hooks::{Hook, Templates};
use crate::release::{CrdPolicy, HelmFlags, Hooks, Release, Source};
use crate::validate;
use crate::values::stack::ValuesStack;

/// One layer of `defaults` (docs/design.md#defaults): cluster.yaml's or
/// `releases/defaults.yaml`, with its timeout already checked.
pub(crate) struct Defaults<'a> {
    /// The file as shown in messages.
    pub file: PathBuf,
    pub doc: &'a DefaultsFile,
    pub timeout: Option<std::time::Duration>,
}

/// What renders and reads values for every release of a load: the
/// template engine, sops (which decrypts each file once) and the values
/// files (each read, and each text parsed, once).
pub(crate) struct Readers {
    pub renderer: Renderer,
    pub sops: Sops,
    pub files: ValuesFiles,
}

/// The release `draft` on `cluster`: its values stacked layer by layer
/// (docs/design.md#values-merge-order), its timeout, its hooks rendered.
pub(crate) fn render_release(
    readers: &Readers,
    paths: &Paths,
    cluster: &Cluster,
    draft: &Draft,
    overrides: Option<(&str, &OverrideFile)>,
    from: Option<&Resolved>,
    defaults: &[Defaults<'_>],
) -> Result<Release, Vec<Problem>> {
    let root = paths.root.to_string_lossy();
    let ctx = context(
        &cluster.name,
        cluster.context.as_deref(),
        &cluster.values,
        Some((&draft.id.namespace, &draft.id.name)),
        &root,
    );
    let mut problems = Vec::new();
    let layers = Layers {
        renderer: &readers.renderer,
        sops: &readers.sops,
        files: &readers.files,
        paths,
        ctx: &ctx,
        draft,
    };
    let mut stack = from.map(|f| f.layers.clone()).unwrap_or_default();
    let own = stack.len();
    stack.extend(layers.release_values(&mut problems));
    stack.extend(layers.release_files(&mut problems));
    let mut timeout = draft
        .timeout
        .or_else(|| defaults.iter().find_map(|d| d.timeout));
    if let Some((key, o)) = overrides {
        stack.extend(layers.override_files(&cluster.dir, o, &mut problems));
        stack.extend(layers.override_values(&cluster.dir, (key, o), &mut problems));
        timeout = override_timeout(paths, cluster, draft, o, &mut problems).or(timeout);
    }
    if let Some(from) = from {
        layers.check_unresolved(from, &stack[own..], &mut problems);
    }
    stack.extend(layers.crd_values(&mut problems));
    let hooks = render_hooks(readers, paths, cluster, draft, &ctx, &mut problems);
    assemble(
        draft,
        from,
        defaults,
        (ValuesStack::new(stack), hooks, timeout),
        problems,
    )
}

/// The release `draft` on `cluster` as `graph` prints it (docs/design.md#commands):
/// its id, chart, needs and CRD policy; no values, hooks or timeout rendered
/// or read (an empty stack, no hooks, the release's own timeout).
pub(crate) fn shape_release(
    draft: &Draft,
    from: Option<&Resolved>,
    defaults: &[Defaults<'_>],
) -> Result<Release, Vec<Problem>> {
    let unrendered = (ValuesStack::default(), Hooks::default(), draft.timeout);
    assemble(draft, from, defaults, unrendered, Vec::new())
}

/// The release of `draft` with what was rendered for it, or every problem.
fn assemble(
    draft: &Draft,
    from: Option<&Resolved>,
    defaults: &[Defaults<'_>],
    (stack, hooks, timeout): (ValuesStack, Hooks, Option<std::time::Duration>),
    problems: Vec<Problem>,
) -> Result<Release, Vec<Problem>> {
    // Without a chart, the `from:` did not resolve: its problem is the
    // cluster's (`from::resolve_all`), reported with the others.
    let source = match (from, &draft.source) {
        (Some(from), _) => Source::Chart(from.chart.clone()),
        (None, Some(source)) => source.clone(),
        (None, None) => return Err(problems),
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    let shown_release = draft.shown.clone();
    Ok(Release {
        id: draft.id.clone(),
        file: shown_release.clone(),
        line: draft.line,
        source,
        needs: draft.needs.clone(),
        crds: draft
            .doc
            .crds
            .or_else(|| defaults.iter().find_map(|d| d.doc.crds))
            .unwrap_or(CrdPolicy::Bootstrap),
        stack,
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

/// `overrides.KEY.timeout`, which replaces the release's on this cluster.
fn override_timeout(
    paths: &Paths,
    cluster: &Cluster,
    draft: &Draft,
    o: &OverrideFile,
    problems: &mut Vec<Problem>,
) -> Option<std::time::Duration> {
    let t = o.timeout.as_ref()?;
    validate::duration(&t.value)
        .map_err(|why| {
            problems.push(
                Problem::new(format!("override timeout {why}"))
                    .file(paths.show(&cluster.dir.join("cluster.yaml")))
                    .release(&draft.id)
                    .at(t.referenced.line(), t.referenced.column()),
            )
        })
        .ok()
}

/// The release's hooks with their templates rendered; a hook that names a
/// kubeconfig context other than the run's is a problem.
fn render_hooks(
    readers: &Readers,
    paths: &Paths,
    cluster: &Cluster,
    draft: &Draft,
    ctx: &TemplateContext,
    problems: &mut Vec<Problem>,
) -> Hooks {
    let shown_release = draft.shown.clone();
    let problem = |message: String| {
        Problem::new(message)
            .file(&shown_release)
            .release(&draft.id)
    };
    let mut hooks = draft.hooks.clone();
    let templates = Templates {
        renderer: &readers.renderer,
        context: ctx,
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
            let mut p = problem(e.to_string());
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
        problems.extend(other_contexts(hook, cluster).map(problem));
    }
    hooks
}

/// A hook acts on the cluster the run targets: its KUBECONFIG's current
/// context is that one, and naming another would change a different
/// cluster than the one being bootstrapped. Without a context in
/// cluster.yaml or --context, the run uses the kubeconfig's current
/// context, unknown here: nothing to compare.
fn other_contexts<'a>(hook: &'a Hook, cluster: &'a Cluster) -> impl Iterator<Item = String> + 'a {
    let target = cluster.context.as_deref();
    hook.action
        .contexts()
        .into_iter()
        .filter(move |named| target.is_some_and(|target| named != target))
        .map(move |named| {
            format!(
                "hook {} names kubeconfig context `{named}`, but this run targets `{}`; use `{{{{cluster.context}}}}` or drop the flag (hooks run with the run's context as current)",
                hook.action,
                target.unwrap_or_default()
            )
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
