//! What the checks report, shared by the lints (`lint`) and the Flux scan
//! (`flux`): the severity of a finding, a lint finding and its text, and
//! the refusal apply's preflight makes of blocking ones. Below both, and
//! below `error`, whose `Failure::LintRefused` carries a [`Refusal`].

use std::path::PathBuf;

use serde::Serialize;

/// How much a finding matters: an error stops `apply` (unless
/// `lints.ignore` lists it) and makes `check`/`plan` exit 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

/// A lint finding. Its JSON is a superset of a `check` finding
/// (docs/design.md#check-json): `object` is `null` and `chain` empty; `file`
/// and `line` say where the value is written; `fix` what to change;
/// `ignored` that `lints.ignore` lists the code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub severity: Severity,
    pub code: &'static str,
    pub release: Option<String>,
    pub object: Option<()>,
    pub chain: Vec<String>,
    pub message: String,
    pub file: Option<PathBuf>,
    pub line: Option<u64>,
    pub fix: String,
    pub ignored: bool,
}

impl Finding {
    /// Error-level and not ignored: stops `apply`, makes `check`/`plan` exit 1.
    pub fn blocks(&self) -> bool {
        self.severity == Severity::Error && !self.ignored
    }

    pub(crate) fn sort_key(&self) -> impl Ord + '_ {
        (
            self.severity,
            self.code,
            &self.release,
            &self.file,
            self.line,
            &self.message,
        )
    }
}

/// Findings as text, like `check`'s (docs/design.md#finding-codes):
/// `severity[code]: message`, then where, the release and the fix.
pub fn render_text(findings: &[Finding]) -> String {
    let mut text = String::new();
    for f in findings {
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
        text.push_str(&format!("{severity}[{}]{ignored}: {}\n", f.code, f.message));
        if let Some(file) = &f.file {
            match f.line {
                Some(line) => text.push_str(&format!("  at: {}:{line}\n", file.display())),
                None => text.push_str(&format!("  at: {}\n", file.display())),
            }
        }
        if let Some(release) = &f.release {
            text.push_str(&format!("  release: {release}\n"));
        }
        text.push_str(&format!("  fix: {}\n\n", f.fix));
    }
    text
}

/// Rendered findings with each `severity[code]` heading coloured as rustc
/// and cargo colour theirs (bold; error red, warning yellow, info cyan):
/// what `check`, `plan` and `status` print when their output takes colour.
pub fn colour_headings(text: &str) -> String {
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

/// `apply` of `cluster` refused before anything changed: its error-level
/// findings that `lints.ignore` does not list.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub cluster: String,
    pub blocking: Vec<Finding>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (cluster, n) = (&self.cluster, self.blocking.len());
        write!(
            f,
            "apply of cluster `{cluster}` refused: {n} error-level lint finding{}; nothing was changed. Fix {}, or list the code in `lints.ignore` in clusters/{cluster}/cluster.yaml to go ahead anyway\n\n{}",
            if n == 1 { "" } else { "s" },
            if n == 1 { "it" } else { "them" },
            render_text(&self.blocking).trim_end()
        )
    }
}

impl std::error::Error for Refusal {}
