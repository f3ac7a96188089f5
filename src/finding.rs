//! What the checks report, shared by the lints (`lint`), the Flux scan
//! (`flux`) and the gate that judges both (`gate`): one [`Finding`] type,
//! its text and JSON (docs/design.md#check-json), and the [`Refusal`]
//! apply's preflight makes of blocking ones. Below `lint`, `flux` and
//! `error`, whose `Failure::Refused` carries a [`Refusal`].

use std::path::PathBuf;

use serde::Serialize;
use serde::ser::SerializeMap;

/// How much a finding matters: an error stops `apply` (unless
/// `lints.ignore` lists it) and makes `check`/`plan` exit 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

/// A Kubernetes object as found in git.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GitObject {
    pub kind: String,
    pub name: String,
    /// Effective namespace after kustomize `namespace:` and Flux
    /// `targetNamespace`; `None` when nothing sets one (Flux would refuse it).
    pub namespace: Option<String>,
    /// Relative to `flux.root`, `/`-separated.
    pub file: String,
}

/// What a check found: a lint's (about the config, [`Written`]) or the Flux
/// scan's (about the GitOps tree: the `object` and the `chain` of files by
/// which Flux reaches it). Its JSON is check's (docs/design.md#check-json):
/// `severity`, `code`, `release`, `object`, `chain`, `message`; a config
/// finding adds `file`, `line`, `fix` and `ignored`, a tree finding adds
/// `ignored: true` only when `lints.ignore` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub severity: Severity,
    pub code: &'static str,
    /// The bootstrap release concerned, as `namespace/name`.
    pub release: Option<String>,
    /// The object in the GitOps tree the finding is about.
    pub object: Option<GitObject>,
    /// Files, relative to `flux.root`, by which Flux reaches the object (or
    /// the reference the finding is about), from the entrypoint down.
    pub chain: Vec<String>,
    pub message: String,
    /// A config finding's place and fix; `None` for the tree's.
    pub written: Option<Written>,
    /// Error-level, and `lints.ignore` lists it: reported, not blocking.
    pub ignored: bool,
}

/// Where a config finding's value is written and what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Relative to `--dir`.
    pub file: Option<PathBuf>,
    pub line: Option<u64>,
    pub fix: String,
}

impl Serialize for Finding {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("severity", &self.severity)?;
        map.serialize_entry("code", self.code)?;
        map.serialize_entry("release", &self.release)?;
        map.serialize_entry("object", &self.object)?;
        map.serialize_entry("chain", &self.chain)?;
        map.serialize_entry("message", &self.message)?;
        match &self.written {
            Some(written) => {
                map.serialize_entry("file", &written.file)?;
                map.serialize_entry("line", &written.line)?;
                map.serialize_entry("fix", &written.fix)?;
                map.serialize_entry("ignored", &self.ignored)?;
            }
            None if self.ignored => map.serialize_entry("ignored", &true)?,
            None => {}
        }
        map.end()
    }
}

impl Finding {
    /// A finding of the Flux scan (not judged against `lints.ignore` yet).
    pub fn tree(
        severity: Severity,
        code: &'static str,
        release: Option<String>,
        object: Option<GitObject>,
        chain: Vec<String>,
        message: String,
    ) -> Finding {
        Finding {
            severity,
            code,
            release,
            object,
            chain,
            message,
            written: None,
            ignored: false,
        }
    }

    /// Error-level and not ignored: stops `apply`, makes `check`/`plan` exit 1.
    pub fn blocks(&self) -> bool {
        self.severity == Severity::Error && !self.ignored
    }

    pub(crate) fn sort_key(&self) -> impl Ord + '_ {
        let (file, line) = self
            .written
            .as_ref()
            .map_or((None, None), |w| (w.file.as_ref(), w.line));
        (
            self.severity,
            self.code,
            &self.release,
            &self.object,
            &self.chain,
            file,
            line,
            &self.message,
        )
    }
}

/// Findings as text, as `check` prints them (docs/design.md#finding-codes):
/// `severity[code]: message`, then for a tree finding its object and the
/// chain of files that reaches it, for a config finding where it is
/// written, its release and the fix.
pub(crate) fn render_text(findings: &[Finding]) -> String {
    findings.iter().map(render_one).collect()
}

fn render_one(f: &Finding) -> String {
    let severity = match f.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "info",
    };
    let ignored = if f.ignored {
        " (ignored: listed in lints.ignore)"
    } else {
        ""
    };
    let mut text = format!("{severity}[{}]{ignored}: {}\n", f.code, f.message);
    if let Some(o) = &f.object {
        text.push_str(&format!(
            "  object: {} {}{} in {}\n",
            o.kind,
            o.namespace
                .as_deref()
                .map(|n| format!("{n}/"))
                .unwrap_or_default(),
            o.name,
            o.file
        ));
    }
    if !f.chain.is_empty() {
        text.push_str("  reached by:\n");
        for (i, file) in f.chain.iter().enumerate() {
            text.push_str(&format!("    {}{file}\n", if i == 0 { "" } else { "-> " }));
        }
    }
    if let Some(written) = &f.written {
        if let Some(file) = &written.file {
            match written.line {
                Some(line) => text.push_str(&format!("  at: {}:{line}\n", file.display())),
                None => text.push_str(&format!("  at: {}\n", file.display())),
            }
        }
        if let Some(release) = &f.release {
            text.push_str(&format!("  release: {release}\n"));
        }
        text.push_str(&format!("  fix: {}\n", written.fix));
    }
    text.push('\n');
    text
}

/// Rendered findings with each `severity[code]` heading coloured as rustc
/// and cargo colour theirs (bold; error red, warning yellow, info cyan):
/// what `check`, `plan` and `status` print when their output takes colour.
pub(crate) fn colour_headings(text: &str) -> String {
    let styles = [
        ("error[", console::Style::new().red().bold()),
        ("warning[", console::Style::new().yellow().bold()),
        ("info[", console::Style::new().cyan().bold()),
    ];
    text.split_inclusive('\n')
        .map(|line| {
            let heading = styles.iter().find_map(|(start, style)| {
                let end = line.find(']').filter(|_| line.starts_with(start))?;
                Some((style, end))
            });
            match heading {
                Some((style, end)) => format!(
                    "{}{}",
                    style.apply_to(&line[..=end]).force_styling(true),
                    &line[end + 1..]
                ),
                None => line.to_string(),
            }
        })
        .collect()
}

/// `apply` of `cluster` refused before anything changed: the error-level
/// findings that `lints.ignore` does not list, of the config's lints or of
/// the Flux scan of its GitOps tree.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub cluster: String,
    pub of: Refused,
    pub blocking: Vec<Finding>,
}

/// What a [`Refusal`]'s findings are about.
#[derive(Debug, Clone)]
pub enum Refused {
    /// The config, by the lints.
    Lints,
    /// The GitOps tree Flux applies (its root and entrypoint, as resolved).
    Tree { root: PathBuf, entrypoint: PathBuf },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (cluster, n) = (&self.cluster, self.blocking.len());
        let s = if n == 1 { "" } else { "s" };
        let them = if n == 1 { "it" } else { "them" };
        let text = render_text(&self.blocking);
        match &self.of {
            Refused::Lints => write!(
                f,
                "apply of cluster `{cluster}` refused: {n} error-level lint finding{s}; nothing was changed. Fix {them}, or list the code in `lints.ignore` in clusters/{cluster}/cluster.yaml to go ahead anyway\n\n{}",
                text.trim_end()
            ),
            Refused::Tree { root, entrypoint } => write!(
                f,
                "apply of cluster `{cluster}` refused: the GitOps tree Flux applies ({}, entrypoint {}) conflicts with bootstrap's releases ({n} error-level finding{s} of the Flux scan); nothing was changed. Fix {them} as said below, or list `{{code: CODE, release: NAMESPACE/NAME}}` in `lints.ignore` in clusters/{cluster}/cluster.yaml to go ahead anyway\n\n{}",
                root.display(),
                entrypoint.display(),
                text.trim_end()
            ),
        }
    }
}

impl std::error::Error for Refusal {}
