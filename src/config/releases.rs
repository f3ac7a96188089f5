//! The release files, `releases/*.yaml`: each read (in parallel), each
//! document checked on its own into a [`Draft`], and `releases/defaults.yaml`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::file::Spanned;

use super::cache::{Entry, Pack};
use super::chart_source::check_chart;
use super::draft::{Draft, Paths};
use super::file::{DefaultsFile, ReleaseFile};
use super::reference::Broken;
use crate::error::Problem;
use crate::release::{Hooks, ReleaseId, Source};
use crate::validate;
use crate::yaml;

/// `releases/defaults.yaml`: the defaults every cluster's releases take
/// (docs/design.md#defaults); not a release file.
pub(super) const DEFAULTS_FILE: &str = "defaults.yaml";

pub(super) fn read_defaults(paths: &Paths, problems: &mut Vec<Problem>) -> Option<DefaultsFile> {
    let path = paths.root.join("releases").join(DEFAULTS_FILE);
    std::fs::symlink_metadata(&path).ok()?;
    let text = match super::read::text(&path) {
        Ok(text) => text,
        Err(unreadable) => {
            problems.push(unreadable.problem(&paths.show(&path)));
            return None;
        }
    };
    match yaml::document::<Option<DefaultsFile>>(&text, &paths.show(&path)) {
        Ok(doc) => doc,
        Err(mut problem) => {
            if problem.message.contains("unknown key `name`") {
                problem.message.push_str(
                    "; releases/defaults.yaml holds the defaults of every release, not releases: move the releases to another file",
                );
            }
            problems.push(problem);
            None
        }
    }
}

/// Just enough of a release document to know which release it means.
#[derive(serde::Deserialize)]
struct Identity {
    name: Option<String>,
    namespace: Option<String>,
}

pub(super) fn read_releases(
    paths: &Paths,
    pack: &Pack,
    problems: &mut Vec<Problem>,
    broken: &mut Vec<Broken>,
) -> Result<Vec<Draft>, Problem> {
    let dir = paths.root.join("releases");
    let entries = std::fs::read_dir(&dir).map_err(|e| {
        Problem::new(format!(
            "cannot read the release definitions ({e}); a config root holds releases/*.yaml"
        ))
        .file(paths.show(&dir))
    })?;
    // Every `*.yaml`/`*.yml` entry: a symlink that leads nowhere (dangling,
    // or a loop), a directory, FIFO or socket by such a name is a file the
    // user meant to be read, so it is reported below, never skipped.
    let mut files: Vec<PathBuf> = Vec::new();
    for entry in entries {
        match entry {
            Ok(entry) => {
                let path = entry.path();
                let yaml = matches!(
                    path.extension().and_then(|e| e.to_str()),
                    Some("yaml" | "yml")
                );
                let defaults = path.file_name().is_some_and(|n| n == DEFAULTS_FILE);
                if yaml && !defaults {
                    files.push(path);
                }
            }
            Err(e) => problems
                .push(Problem::new(format!("cannot list an entry: {e}")).file(paths.show(&dir))),
        }
    }
    files.sort();
    // Each file on its own (in parallel), gathered in file order.
    let mut drafts = Vec::new();
    let mut entries = Vec::new();
    for mut read in super::par::map(&files, |file| read_release_file(paths, pack, file)) {
        drafts.append(&mut read.drafts);
        problems.append(&mut read.problems);
        broken.append(&mut read.broken);
        entries.extend(read.entry);
    }
    pack.save(entries);
    Ok(drafts)
}

/// What one release file holds: its releases, its problems and the names
/// of its releases too broken to use.
#[derive(Default)]
struct FileRead {
    drafts: Vec<Draft>,
    problems: Vec<Problem>,
    broken: Vec<Broken>,
    /// Its entry in the parse cache, when it parsed without a problem.
    entry: Option<Entry>,
}

impl FileRead {
    /// A document that parsed, checked.
    fn parsed(&mut self, paths: &Paths, (file, shown): (&Path, &Path), doc: ReleaseFile) {
        let id = ReleaseId::new(doc.namespace.value.clone(), doc.name.value.clone());
        let needs = needs_written(&doc);
        match check_release(paths, (file, shown), doc, &mut self.problems) {
            Some(draft) => self.drafts.push(draft),
            None => self.broken.push(Broken {
                namespace: Some(id.namespace),
                name: id.name,
                needs,
                file: shown.to_path_buf(),
            }),
        }
    }
}

/// One release file, from the parse cache when it holds the file's bytes
/// (docs/design.md#parse-cache), else parsed; checked the same either way.
fn read_release_file(paths: &Paths, pack: &Pack, file: &Path) -> FileRead {
    let mut read = FileRead::default();
    let shown = paths.show(file);
    let text = match super::read::text(file) {
        Ok(text) => text,
        Err(unreadable) => {
            read.problems.push(unreadable.problem(&shown));
            return read;
        }
    };
    let key = pack.key(&text);
    if let Some((key, docs)) = key.and_then(|key| Some((key, pack.get::<Vec<ReleaseFile>>(&key)?)))
    {
        read.entry = Some((key, None));
        for doc in docs {
            read.parsed(paths, (file, &shown), doc);
        }
        return read;
    }
    let parsed = yaml::each_document::<ReleaseFile>(&text, &shown);
    if let Some(key) = key
        && parsed.iter().all(|p| p.problems.is_empty())
    {
        let docs: Vec<&ReleaseFile> = parsed.iter().filter_map(|p| p.value.as_ref()).collect();
        read.entry = Pack::encode(&docs).map(|json| (key, Some(json)));
    }
    for parsed in parsed {
        if parsed.problems.is_empty() {
            if let Some(doc) = parsed.value {
                read.parsed(paths, (file, &shown), doc);
            }
            continue;
        }
        not_read(parsed, &shown, &mut read);
    }
    read
}

/// The problems of a document that did not parse, and its name, when it
/// can be told, as a broken release.
fn not_read(mut parsed: yaml::Parsed<ReleaseFile>, shown: &Path, read: &mut FileRead) {
    let FileRead {
        problems, broken, ..
    } = read;
    // A Kubernetes object dropped among the release files: one
    // error saying so, not one per key it has.
    if let Some((kind, kind_line)) = kubernetes_object(&parsed.text) {
        problems.push(
                Problem::new(format!(
                    "is a Kubernetes object ({kind}), not a release: release files hold `name`, `namespace` and `chart`; move it out of releases/ (a CustomResourceDefinition file can be listed in a release's `manifests:`, for the CRD phase)"
                ))
                .file(shown)
                .at(kind_line, 0),
            );
        return;
    }
    // What the rest of the document says is not checked: keys were
    // taken out of it to read it. Its names are whole.
    if let Some(doc) = &parsed.value {
        check_names(doc, shown, &mut parsed.problems);
        parsed.problems.sort_by_key(|p| (p.line, p.column));
    }
    let needs = parsed.value.as_ref().map(needs_written).unwrap_or_default();
    let identity = match parsed.value {
        Some(doc) => Some(Identity {
            name: Some(doc.name.into_value()),
            namespace: Some(doc.namespace.into_value()),
        }),
        None => serde_saphyr::from_str::<Identity>(&parsed.text)
            .ok()
            .or_else(|| identity_by_lines(&parsed.text)),
    };
    if let Some(Identity {
        name: Some(name),
        namespace,
    }) = identity
    {
        if let Some(namespace) = &namespace {
            let id = ReleaseId::new(namespace.clone(), name.clone());
            for p in &mut parsed.problems {
                p.release = Some(id.to_string());
            }
        }
        broken.push(Broken {
            namespace,
            name,
            needs,
            file: shown.to_path_buf(),
        });
    }
    problems.append(&mut parsed.problems);
}

/// A release's `needs` as written: (name, line, column).
fn needs_written(doc: &ReleaseFile) -> Vec<(String, u64, u64)> {
    doc.needs
        .iter()
        .map(|n| (n.value.clone(), n.referenced.line(), n.referenced.column()))
        .collect()
}

/// `kind` of a document that is a Kubernetes object (top-level
/// `apiVersion:` and `kind:`), read off its lines.
/// With the 1-based line of its `apiVersion:` (`text` keeps the document at
/// its place in the file).
fn kubernetes_object(text: &str) -> Option<(String, u64)> {
    let top = |key: &str| {
        text.lines().enumerate().find_map(|(i, line)| {
            let value = line.strip_prefix(key)?.strip_prefix(':')?;
            let value = value.split(" #").next().unwrap_or_default().trim();
            Some((value.to_string(), i as u64 + 1))
        })
    };
    let (_, line) = top("apiVersion")?;
    let (kind, _) = top("kind").filter(|(k, _)| !k.is_empty())?;
    Some((kind, line))
}

/// The top-level `name:` and `namespace:` of a document YAML cannot parse
/// (an unclosed quote, a tab): read off its lines, so that what `needs` it
/// is not reported as needing an unknown release as well.
fn identity_by_lines(text: &str) -> Option<Identity> {
    let field = |key: &str| {
        text.lines().find_map(|line| {
            let value = line.strip_prefix(key)?.strip_prefix(':')?;
            let value = value.split(" #").next()?.trim().trim_matches(['"', '\'']);
            // Only a plain name: what else the line holds is what broke it.
            let plain = !value.is_empty()
                && value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
            plain.then(|| value.to_string())
        })
    };
    Some(Identity {
        name: Some(field("name")?),
        namespace: field("namespace"),
    })
}

/// `name` and `namespace` are DNS-1123 labels.
fn check_names(doc: &ReleaseFile, shown: &Path, problems: &mut Vec<Problem>) {
    let id = ReleaseId::new(doc.namespace.value.clone(), doc.name.value.clone());
    for (what, field, check) in [
        ("name", &doc.name, validate::release_name as fn(&str) -> _),
        ("namespace", &doc.namespace, validate::dns_label),
    ] {
        if let Err(why) = check(&field.value) {
            problems.push(
                Problem::new(format!("{what} `{}` {why}", field.value))
                    .file(shown)
                    .at(field.referenced.line(), field.referenced.column())
                    .release(&id),
            );
        }
    }
}

/// Static checks of one release document; `None` when it is too broken to use.
fn check_release(
    paths: &Paths,
    (file, shown): (&Path, &Path),
    doc: ReleaseFile,
    problems: &mut Vec<Problem>,
) -> Option<Draft> {
    let id = ReleaseId::new(doc.namespace.value.clone(), doc.name.value.clone());
    let before = problems.len();
    let checks = Checks {
        shown,
        base: file.parent().unwrap_or(&paths.root),
        id: &id,
        line: doc.name.referenced.line(),
        before,
    };
    check_names(&doc, shown, problems);
    checks.todo(&doc, problems);
    let source = checks.source(&doc, problems);
    let timeout = checks.timeout(&doc, problems);
    checks.values_files(&doc, problems);
    let hooks = checks.hooks(&doc, problems);
    if problems.len() > before {
        return None;
    }
    let line = checks.line;
    Some(Draft {
        id,
        file: file.to_path_buf(),
        shown: shown.to_path_buf(),
        line,
        doc,
        source,
        needs: Vec::new(),
        timeout,
        hooks,
    })
}

/// The static checks of one release document, one function per part of it.
struct Checks<'a> {
    /// The release file as shown.
    shown: &'a Path,
    /// Its directory: what relative paths in it are relative to.
    base: &'a Path,
    id: &'a ReleaseId,
    /// The line of its `name:`.
    line: u64,
    /// How many problems there were before its checks.
    before: usize,
}

impl Checks<'_> {
    fn problem(&self, message: String, at: Option<(u64, u64)>) -> Problem {
        let mut p = Problem::new(message).file(self.shown).release(self.id);
        if let Some((l, c)) = at {
            p = p.at(l, c);
        }
        p
    }

    /// Each `todo:` entry the import left is a problem until done.
    fn todo(&self, doc: &ReleaseFile, problems: &mut Vec<Problem>) {
        for todo in &doc.todo {
            problems.push(self.problem(
                format!(
                    "not fully imported: {}; do it, then remove this entry from `todo:`",
                    todo.value.trim_end_matches(['.', ';', ' '])
                ),
                Some((todo.referenced.line(), todo.referenced.column())),
            ));
        }
    }

    /// Exactly one of `chart`, `manifests` and `from`; `None` with `from:`
    /// (the chart comes with the cluster's GitOps tree) or when it is wrong.
    fn source(&self, doc: &ReleaseFile, problems: &mut Vec<Problem>) -> Option<Source> {
        let line = self.line;
        match (&doc.chart, &doc.manifests) {
            // The import could not tell the chart: the `todo` entries say why.
            (None, None) if !doc.todo.is_empty() && doc.from.is_none() => None,
            _ if doc.from.is_some() && (doc.chart.is_some() || doc.manifests.is_some()) => {
                problems.push(self.problem(
                    "has `from` and `chart`/`manifests`; `from:` takes the chart from the Flux HelmRelease: keep one".into(),
                    Some((line, 0)),
                ));
                None
            }
            (None, None) if doc.from.is_some() => None,
            (Some(_), Some(_)) => {
                problems.push(self.problem(
                    "has both `chart` and `manifests`; keep one".into(),
                    Some((line, 0)),
                ));
                None
            }
            (None, None) => {
                problems.push(self.problem(
                    "has neither `chart` nor `manifests`; add `chart: {repo: URL, name: NAME, version: X.Y.Z}` (or `from: {helmRelease: PATH}`)".into(),
                    Some((line, 0)),
                ));
                None
            }
            (Some(chart), None) => {
                let at = (chart.referenced.line(), chart.referenced.column());
                match check_chart(&chart.value, self.base) {
                    Ok(chart) => Some(Source::Chart(chart)),
                    Err(e) => {
                        problems.push(self.problem(e.to_string(), Some(at)));
                        None
                    }
                }
            }
            (None, Some(manifests)) => Some(Source::Manifests(self.manifests(manifests, problems))),
        }
    }

    /// `manifests:`: http(s) URLs, or files relative to the release file.
    fn manifests(&self, manifests: &[Spanned<String>], problems: &mut Vec<Problem>) -> Vec<String> {
        let mut list = Vec::new();
        for m in manifests {
            let at = Some((m.referenced.line(), m.referenced.column()));
            if validate::is_url(&m.value) {
                if m.value.starts_with("https://") || m.value.starts_with("http://") {
                    list.push(m.value.clone());
                } else {
                    problems.push(self.problem(
                        format!("manifest `{}` is not an http(s) URL or a path", m.value),
                        at,
                    ));
                }
            } else {
                let path = self.base.join(&m.value);
                if path.is_file() {
                    list.push(path.to_string_lossy().into_owned());
                } else {
                    problems.push(self.problem(
                        format!("manifest file `{}` does not exist (paths are relative to the release file)", m.value),
                        at,
                    ));
                }
            }
        }
        // Said only when nothing else is wrong with the release so far.
        if list.is_empty() && problems.len() == self.before {
            problems.push(self.problem("`manifests` is empty".into(), Some((self.line, 0))));
        }
        list
    }

    fn timeout(&self, doc: &ReleaseFile, problems: &mut Vec<Problem>) -> Option<Duration> {
        let t = doc.timeout.as_ref()?;
        validate::duration(&t.value)
            .map_err(|why| {
                problems.push(self.problem(
                    format!("timeout {why}"),
                    Some((t.referenced.line(), t.referenced.column())),
                ))
            })
            .ok()
    }

    /// Each of `valuesFiles` is a regular file (read when the release is
    /// rendered).
    fn values_files(&self, doc: &ReleaseFile, problems: &mut Vec<Problem>) {
        for vf in &doc.values_files {
            let path = self.base.join(&vf.value);
            let at = Some((vf.referenced.line(), vf.referenced.column()));
            match std::fs::metadata(&path) {
                Ok(meta) if meta.is_file() => {}
                // There, but a FIFO, directory or socket: say what it is (the
                // read would otherwise hang on a FIFO).
                Ok(meta) => problems.push(self.problem(
                    format!(
                        "values file `{}` is {}, not a file: a values file must be a regular file or a symlink to one",
                        vf.value,
                        super::read::kind(meta.file_type())
                    ),
                    at,
                )),
                Err(_) => problems.push(self.problem(
                    format!(
                        "values file `{}` does not exist (paths are relative to the release file)",
                        vf.value
                    ),
                    at,
                )),
            }
        }
    }

    /// `hooks:`, each checked by its kind.
    fn hooks(&self, doc: &ReleaseFile, problems: &mut Vec<Problem>) -> Hooks {
        let mut hooks = Hooks::default();
        for (phase, list, out) in [
            ("presync", &doc.hooks.presync, &mut hooks.presync),
            ("postsync", &doc.hooks.postsync, &mut hooks.postsync),
        ] {
            for hook in list {
                let at = Some((hook.referenced.line(), hook.referenced.column()));
                match hook.value.check(&self.id.namespace) {
                    Ok(h) => out.push(h),
                    Err(e) => problems.push(self.problem(format!("{phase} hook {e}"), at)),
                }
            }
        }
        hooks
    }
}
