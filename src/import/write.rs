//! The imported config as files (docs/design.md#file-formats), written by
//! hand so that each carries comments saying where it came from; values
//! are serialized with serde-saphyr. Nothing existing is overwritten
//! without `--force`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::convert::{ChartOut, FluxOut, FoundBy, Imported, ReleaseOut, ValuesOut};
use super::hooks::{self, Phase};
use super::relative;
use crate::error::{Error, Failure, Problem};

/// Files to write, relative to the config root, with their text.
pub(crate) struct Written {
    pub files: Vec<(PathBuf, String)>,
}

/// Renders every file of the import; `root` is the config root.
pub(crate) fn render(imported: &Imported, root: &Path) -> Written {
    let root_abs = hooks::absolute(root);
    let releases_dir = root_abs.join("releases");
    let mut files = Vec::new();
    let all: Vec<&ReleaseOut> = imported.groups.iter().flat_map(|g| &g.releases).collect();
    let mut name_count: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &all {
        *name_count.entry(r.name.as_str()).or_default() += 1;
    }
    let values_stem = |r: &ReleaseOut| {
        if name_count[r.name.as_str()] > 1 {
            format!("{}-{}", r.namespace, r.name)
        } else {
            r.name.clone()
        }
    };
    let shared = shared_helm(imported);
    for group in &imported.groups {
        let mut text = comment(
            &format!(
                "Imported by `bootstrap import helmfile` from {}.",
                group.source.display()
            ),
            "",
        );
        if let Some(why) = &group.crds_only {
            text.push_str(&comment(
                &format!("CRD-only releases (`crds: only`): {why}."),
                "",
            ));
        }
        for release in &group.releases {
            text.push_str("---\n");
            let mut generated = 0;
            let mut values_files = Vec::new();
            for values in &release.values {
                match values {
                    ValuesOut::InPlace(path) => values_files.push((
                        relative(&releases_dir, path).to_string_lossy().into_owned(),
                        None,
                    )),
                    ValuesOut::Generated { values, note, env } => {
                        generated += 1;
                        let ext = if *env { "yaml.hbs" } else { "yaml" };
                        let name = match generated {
                            1 => format!("{}.{ext}", values_stem(release)),
                            n => format!("{}-{n}.{ext}", values_stem(release)),
                        };
                        let body = if *env {
                            env_template_text(values)
                        } else {
                            yaml_text(&Value::Object(values.clone()))
                        };
                        files.push((
                            PathBuf::from("releases/values").join(&name),
                            format!(
                                "{}{body}",
                                comment(
                                    &format!(
                                        "Values of {}, imported by `bootstrap import helmfile`: {}.",
                                        release.id(),
                                        note.text(&releases_dir.join("values"))
                                    ),
                                    ""
                                )
                            ),
                        ));
                        values_files
                            .push((format!("values/{name}"), Some(note.text(&releases_dir))));
                    }
                }
            }
            let mut helm = release.helm.clone();
            if shared.is_none() {
                for (k, v) in &group.helm_defaults {
                    helm.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
            text.push_str(&release_text(
                release,
                imported.flux.as_ref(),
                group.crds_only.is_some(),
                &values_files,
                &releases_dir,
                &imported.cluster,
                &helm,
            ));
        }
        files.push((
            PathBuf::from("releases").join(format!("{}.yaml", group.stem)),
            text,
        ));
    }
    files.push((
        PathBuf::from("clusters")
            .join(&imported.cluster)
            .join("cluster.yaml"),
        cluster_text(imported, &root_abs),
    ));
    Written { files }
}

/// The `helmDefaults` of the files that install releases, when they all
/// agree: written once as cluster.yaml `defaults.helm`; else each release
/// gets its file's under its own `helm:`.
fn shared_helm(imported: &Imported) -> Option<&serde_json::Map<String, Value>> {
    let mut installing = imported
        .groups
        .iter()
        .filter(|g| g.crds_only.is_none() && !g.releases.is_empty());
    let first = installing.next()?;
    installing
        .all(|g| g.helm_defaults == first.helm_defaults)
        .then_some(&first.helm_defaults)
}

fn release_text(
    release: &ReleaseOut,
    flux: Option<&FluxOut>,
    crds_only: bool,
    values_files: &[(String, Option<String>)],
    releases_dir: &Path,
    cluster: &str,
    helm: &serde_json::Map<String, Value>,
) -> String {
    let mut t = format!("# {}:{}\n", release.source.display(), release.line);
    if !release.installed {
        t.push_str(&format!(
            "# `installed: false` in the helmfile: not listed in clusters/{cluster}/cluster.yaml `releases:`, so bootstrap leaves it alone (it never uninstalls).\n"
        ));
    }
    for (file, line) in &release.also {
        t.push_str(&format!(
            "# also {}:{}, the same release\n",
            file.display(),
            line
        ));
    }
    t.push_str(&format!(
        "name: {}\nnamespace: {}\n",
        scalar(&release.name),
        scalar(&release.namespace)
    ));
    if !release.todo.is_empty() {
        t.push_str(&comment(
            "Not converted: `plan`, `check` and `apply` stop on each entry until you have done what it says and removed it",
            "",
        ));
        t.push_str("todo:\n");
        for issue in &release.todo {
            t.push_str(&format!("  - {}\n", scalar(&issue.to_string())));
        }
    }
    t.push_str(&source_text(release, flux, releases_dir));
    t.push_str(&crds_text(release, crds_only));
    if !release.needs.is_empty() {
        t.push_str("needs:\n");
        for (need, note) in &release.needs {
            if let Some(note) = note {
                t.push_str(&comment(note, "  "));
            }
            t.push_str(&format!("  - {}\n", scalar(need)));
        }
    }
    if let Some((timeout, from)) = &release.timeout {
        t.push_str(&format!("timeout: {}  # {from}\n", scalar(timeout)));
    }
    if let Some((wait, from)) = &release.wait
        && !crds_only
    {
        t.push_str(&format!(
            "wait: {wait}  # {from}; includes Jobs, like waitForJobs\n"
        ));
    }
    if !helm.is_empty() && !crds_only {
        t.push_str("# helm flags of the install (helmDefaults and the release's own)\nhelm:\n");
        for line in yaml_text(&Value::Object(helm.clone())).trim_end().lines() {
            t.push_str(&format!("  {line}\n"));
        }
    }
    if !release.labels.is_empty() {
        t.push_str("labels:\n");
        for (k, v) in &release.labels {
            t.push_str(&format!("  {}: {}\n", scalar(k), scalar(v)));
        }
    }
    if !values_files.is_empty() {
        t.push_str("valuesFiles:\n");
        for (path, note) in values_files {
            if let Some(note) = note {
                t.push_str(&comment(note, "  "));
            }
            t.push_str(&format!("  - {}\n", scalar(path)));
        }
    }
    t.push_str(&hooks_text(release));
    t
}

/// Where the release's chart comes from: `from:` a Flux HelmRelease (then
/// `ownership: handover`), or its `chart:` with a note when Flux manages it.
fn source_text(release: &ReleaseOut, flux: Option<&FluxOut>, releases_dir: &Path) -> String {
    let mut t = String::new();
    if let (Some(from), Some(flux)) = (&release.from, flux) {
        let read = match &from.document {
            None => format!(
                "as {} read its spec.values",
                relative(releases_dir, &from.template).display()
            ),
            Some(doc) => format!(
                "document {} of its {}: {} reads it with `fromYaml`, which takes only {}, as helmfile does, so it found no spec.values (helmfile fails the same way)",
                doc.helmrelease,
                doc.total,
                relative(releases_dir, &from.template).display(),
                doc.first
            ),
        };
        t.push_str(&comment(
            &format!(
                "chart, version and values: the Flux HelmRelease {}, {read}; Flux adopts the release once bootstrap installed it",
                relative(releases_dir, &from.helmrelease).display(),
            ),
            "",
        ));
        t.push_str(&format!(
            "from:\n  helmRelease: {}\nownership: handover\n",
            scalar(&relative(&flux.root, &from.helmrelease).to_string_lossy())
        ));
    } else if let Some(chart) = &release.chart {
        if let Some((hr, file)) = release.flux_managed.as_ref().filter(|_| flux.is_some()) {
            t.push_str(&comment(
                &format!(
                    "Flux manages this release (HelmRelease {hr} in {file}): bootstrap installs it once, then Flux adopts it; `check` verifies the HelmRelease installs the same chart, version and values"
                ),
                "",
            ));
            t.push_str("ownership: handover\n");
        }
        if let Some(note) = &release.chart_note {
            t.push_str(&comment(note, ""));
        }
        t.push_str("chart:\n");
        match &chart.chart {
            ChartOut::Repo { repo, name } => t.push_str(&format!(
                "  repo: {}\n  name: {}\n",
                scalar(repo),
                scalar(name)
            )),
            ChartOut::Oci(url) => t.push_str(&format!("  oci: {}\n", scalar(url))),
            ChartOut::Path(path) => t.push_str(&format!(
                "  path: {}\n",
                scalar(&relative(releases_dir, path).to_string_lossy())
            )),
        }
        if let Some(version) = &chart.version {
            t.push_str(&format!("  version: {}\n", scalar(version)));
        }
    }
    t
}

/// `crds:` and why: a CRD-only file, CRDs a CRD stage renders, helm's
/// skipCRDs, or the chart's own.
fn crds_text(release: &ReleaseOut, crds_only: bool) -> String {
    let mut t = String::new();
    if crds_only {
        t.push_str("crds: only\n");
    } else if let Some(stage) = &release.crd_stage {
        t.push_str(&comment(
            &format!(
                "{} renders it for its CRDs too: bootstrap applies them in its CRD phase before any release, and installs with --skip-crds",
                stage.display()
            ),
            "",
        ));
        t.push_str("crds: bootstrap\n");
    } else if release.skip_crds {
        t.push_str(&comment(
            "helmDefaults.skipCRDs: helm skipped the chart's crds/; bootstrap applies them in its CRD phase and installs with --skip-crds",
            "",
        ));
        t.push_str("crds: bootstrap\n");
    } else {
        t.push_str(&comment(
            "helm installs the chart's CRDs, as it did under helmfile; `crds: bootstrap` would apply them in bootstrap's CRD phase before any release",
            "",
        ));
        t.push_str("crds: chart\n");
    }
    t
}

/// `hooks:`, presync then postsync, each run of hooks under the helmfile
/// hook it was converted from.
fn hooks_text(release: &ReleaseOut) -> String {
    let mut t = String::new();
    if !release.hooks.is_empty() {
        t.push_str("hooks:\n");
        for (phase, key) in [(Phase::Presync, "presync"), (Phase::Postsync, "postsync")] {
            let list: Vec<_> = release.hooks.iter().filter(|h| h.phase == phase).collect();
            if list.is_empty() {
                continue;
            }
            t.push_str(&format!("  {key}:\n"));
            let mut last_was = None;
            for hook in list {
                if last_was != Some(&hook.was) {
                    t.push_str(&format!("    # helmfile: {}\n", hook.was));
                    last_was = Some(&hook.was);
                }
                let body = yaml_text(&hook.hook);
                for (i, line) in body.trim_end().lines().enumerate() {
                    let lead = if i == 0 { "    - " } else { "      " };
                    t.push_str(&format!("{lead}{line}\n"));
                }
            }
        }
    }
    t
}

/// cluster.yaml; `root` is the config root, absolute.
fn cluster_text(imported: &Imported, root: &Path) -> String {
    let mut t = format!(
        "# Cluster `{}`, imported by `bootstrap import helmfile` from:\n",
        imported.cluster
    );
    for source in &imported.sources {
        t.push_str(&format!("#   {}\n", source.display()));
    }
    t.push_str(&format!(
        "# `bootstrap plan {0}` shows what `bootstrap apply {0}` would do.\nname: {1}\n",
        imported.cluster,
        scalar(&imported.cluster)
    ));
    if let Some(context) = &imported.context {
        t.push_str(&format!(
            "context: {}  # helmDefaults.kubeContext\n",
            scalar(context)
        ));
    }
    if let Some(flux) = imported.flux.as_ref() {
        let dir = root.join("clusters").join(&imported.cluster);
        let source = relative(&dir, &flux.source);
        let source = source.display();
        let found = match flux.by {
            FoundBy::ReadHelmReleases => format!(
                "the directory of the Flux Kustomization {source}, whose path holds the HelmReleases read"
            ),
            FoundBy::InstanceValues => {
                format!("the FluxInstance's sync path, from the values of {source}")
            }
            FoundBy::Instance => format!("the FluxInstance's sync path in {source}"),
            FoundBy::FluxSystem => {
                format!("the path of the `flux-system` Kustomization in {source}")
            }
            FoundBy::Kustomization => format!(
                "the directory of the Flux Kustomization {source}, which no other Kustomization's path holds"
            ),
            FoundBy::Options => "--flux-root and --flux-entrypoint".to_string(),
        };
        t.push_str(&comment(
            &match flux.by {
                FoundBy::ReadHelmReleases | FoundBy::InstanceValues => {
                    format!("The Flux tree the `from:` releases are read from: {found}")
                }
                _ => format!(
                    "The Flux tree of the repository, which `bootstrap check` scans for HelmReleases that manage these releases: {found}"
                ),
            },
            "",
        ));
        t.push_str(&format!(
            "flux:\n  root: {}\n  entrypoint: {}\n",
            scalar(&relative(root, &flux.root).to_string_lossy()),
            scalar(&flux.entrypoint)
        ));
    }
    if let Some(helm) = shared_helm(imported).filter(|h| !h.is_empty()) {
        let files: Vec<String> = imported
            .groups
            .iter()
            .filter(|g| g.crds_only.is_none() && !g.releases.is_empty())
            .map(|g| g.source.display().to_string())
            .collect();
        t.push_str(&comment(
            &format!(
                "helmDefaults of {}: helm flags of every install",
                files.join(", ")
            ),
            "",
        ));
        t.push_str("defaults:\n  helm:\n");
        for line in yaml_text(&Value::Object(helm.clone())).trim_end().lines() {
            t.push_str(&format!("    {line}\n"));
        }
    }
    if !imported.notes.is_empty() {
        t.push_str("# Not carried over (no effect on a bootstrap):\n");
        for note in &imported.notes {
            t.push_str(&comment(&note.to_string(), ""));
        }
    }
    let all: Vec<&ReleaseOut> = imported.groups.iter().flat_map(|g| &g.releases).collect();
    if all.iter().any(|r| !r.installed) {
        t.push_str("# Every imported release but those with `installed: false`:\nreleases:\n");
        for r in all.iter().filter(|r| r.installed) {
            t.push_str(&format!("  - {}\n", scalar(&r.id())));
        }
    }
    t
}

/// Values whose leaves read the environment (each exactly one
/// `env`/`requiredEnv` mark) as a `.hbs` values file: the marks become
/// `{{env "X"}}` as plain scalars, which bootstrap renders then parses
/// (docs/design.md#values-files).
fn env_template_text(values: &serde_json::Map<String, Value>) -> String {
    fn walk(value: &mut Value, found: &mut Vec<String>) {
        match value {
            Value::String(s) if super::gotmpl::has_env_mark(s) => {
                let token = format!("bootstrap_env_{}_", found.len());
                found.push(super::gotmpl::env_marks_to_templates(s));
                *s = token;
            }
            Value::Array(list) => list.iter_mut().for_each(|v| walk(v, found)),
            Value::Object(map) => map.values_mut().for_each(|v| walk(v, found)),
            _ => {}
        }
    }
    let mut value = Value::Object(values.clone());
    let mut found = Vec::new();
    walk(&mut value, &mut found);
    let mut text = yaml_text(&value);
    for (i, template) in found.iter().enumerate().rev() {
        text = text.replace(&format!("bootstrap_env_{i}_"), template);
    }
    text
}

/// `text` as `#` comment lines of at most about 100 columns.
fn comment(text: &str, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && indent.len() + 2 + line.len() + 1 + word.len() > 100 {
            out.push_str(&format!("{indent}# {line}\n"));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(&format!("{indent}# {line}\n"));
    }
    out
}

/// Block YAML as people write it: lists indented under their key, long
/// strings on one line (not folded), multi-line strings as `|` blocks.
fn yaml_text(value: &Value) -> String {
    let mut options = serde_saphyr::SerializerOptions::default();
    options.compact_list_indent = false;
    options.folded_wrap_chars = usize::MAX / 2;
    serde_saphyr::to_string_with_options(value, options).unwrap_or_default()
}

/// A string as a YAML scalar that reads back as the same string.
fn scalar(text: &str) -> String {
    // One line always: a long text comes out folded (`>-` and a line
    // below), which cannot follow a key inline; a JSON string is a YAML
    // double-quoted scalar.
    serde_saphyr::to_string(&Value::String(text.to_string()))
        .map(|s| s.trim_end_matches('\n').to_string())
        .ok()
        .filter(|s| !s.contains('\n') && !s.starts_with(['>', '|']))
        .unwrap_or_else(|| serde_json::to_string(text).unwrap_or_default())
}

/// `rel` under the config root as the user typed it (`--dir`, default `.`).
fn shown(root: &Path, rel: &Path) -> PathBuf {
    if root == Path::new(".") || root.as_os_str().is_empty() {
        rel.to_path_buf()
    } else {
        root.join(rel)
    }
}

/// Writes the files under `root`; refuses (nothing written) when any
/// exists, unless `force`.
pub(crate) fn write(written: &Written, root: &Path, force: bool) -> Result<Vec<PathBuf>, Error> {
    if !force {
        let existing: Vec<Problem> = written
            .files
            .iter()
            .map(|(rel, _)| shown(root, rel))
            .filter(|path| path.exists())
            .map(|path| {
                Problem::new("already exists; nothing was written (pass --force to overwrite it)")
                    .file(path)
            })
            .collect();
        if !existing.is_empty() {
            return Err(Error::Config(existing));
        }
    }
    let mut paths = Vec::new();
    for (rel, text) in &written.files {
        let path = shown(root, rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| Failure::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        std::fs::write(&path, text).map_err(|source| Failure::WriteFile {
            path: path.clone(),
            source,
        })?;
        paths.push(path);
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_long_scalar_stays_on_the_line_of_its_key() {
        let long = format!(
            "oci://registry.example.com:5000/{}/chart",
            "charts-mirror/".repeat(8)
        );
        let text = format!(
            "chart:\n  oci: {}\n  version: \"1.0.0\"\n",
            super::scalar(&long)
        );
        let parsed: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(parsed["chart"]["oci"], long.as_str(), "{text}");
        assert_eq!(super::scalar("kube-system"), "kube-system");
    }
}
