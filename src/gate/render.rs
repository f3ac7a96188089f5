//! What the commands show of a cluster's [`Findings`]: `check`'s text and
//! JSON (docs/design.md#check-json), the lint block of `plan` and `status`,
//! and the warnings `apply` goes ahead with. Every finding is written by
//! [`crate::finding::render_text`]; these are the lines around them.

use serde_json::{Value, json};

use super::{Findings, TreeScan};
use crate::event::Event;
use crate::finding::{Finding, Severity, render_text};
use crate::flux::BootstrapRelease;
use crate::plural::count as counted;

/// How much a command shows (`-q`, default, `-v`; docs/design.md#global-flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shown {
    /// `-q`: only what blocks, then the count lines.
    Blocking,
    All,
    /// `-v`: also what the verdict rests on.
    Explained,
}

impl Shown {
    fn keeps(self, finding: &Finding) -> bool {
        self != Shown::Blocking || finding.blocks()
    }
}

/// The line under the lint findings: `lints infra: 1 error, 2 warnings`,
/// and the error codes `lints.ignore` let through.
fn lint_summary(cluster: &str, findings: &[Finding]) -> String {
    format!(
        "lints {cluster}: {}, {}{}\n",
        counted(count(findings, Severity::Error), "error"),
        counted(count(findings, Severity::Warning), "warning"),
        match ignored_errors(findings).as_slice() {
            [] => String::new(),
            codes => format!("; ignored by lints.ignore: {}", codes.join(", ")),
        }
    )
}

/// How many findings of a severity, blocking errors only.
fn count(findings: &[Finding], severity: Severity) -> usize {
    findings
        .iter()
        .filter(|f| f.severity == severity && !(f.severity == Severity::Error && f.ignored))
        .count()
}

/// The codes of error-level findings that `lints.ignore` let through.
pub(super) fn ignored_errors(findings: &[Finding]) -> Vec<&'static str> {
    let mut codes: Vec<&'static str> = findings
        .iter()
        .filter(|f| f.severity == Severity::Error && f.ignored)
        .map(|f| f.code)
        .collect();
    codes.dedup();
    codes
}

/// The code of the info finding `check` adds when no tree was scanned.
const NOT_SCANNED: &str = "gitops-tree-not-scanned";

impl Findings {
    /// The lint block of `plan`: the findings, then the count line; empty
    /// without findings.
    pub(crate) fn lints_text(&self) -> String {
        if self.lints.is_empty() {
            return String::new();
        }
        let mut text = render_text(&self.lints);
        text.push_str(&lint_summary(&self.cluster, &self.lints));
        text
    }

    /// `check`'s text: the lint findings, the scan's, and the count lines;
    /// without a tree, why ownership was not checked.
    pub(crate) fn check_text(&self, shown: Shown) -> String {
        let kept: Vec<Finding> = self
            .lints
            .iter()
            .filter(|f| shown.keeps(f))
            .cloned()
            .collect();
        let mut text = render_text(&kept);
        let Some(scanned) = &self.tree else {
            if !self.lints.is_empty() {
                text.push_str(&lint_summary(&self.cluster, &self.lints));
            }
            text.push_str(&format!("{}\n", self.not_scanned()));
            return text;
        };
        let kept: Vec<Finding> = scanned
            .scan
            .findings
            .iter()
            .filter(|f| shown.keeps(f))
            .cloned()
            .collect();
        text.push_str(&render_text(&kept));
        if shown == Shown::Explained {
            text.push_str(&reached(scanned));
        }
        text.push_str(&self.count_lines(scanned));
        text
    }

    /// `check`'s count line, then the lint summary and the scan's findings
    /// that `lints.ignore` let through, each when there are some.
    fn count_lines(&self, scanned: &TreeScan) -> String {
        let (cluster, scan) = (&self.cluster, &scanned.scan);
        let severity = |s: Severity| count(&scan.findings, s) + count(&self.lints, s);
        let mut text = format!(
            "check {cluster}: {}, {}; scanned {}, {} from {}\n",
            counted(severity(Severity::Error), "error"),
            counted(severity(Severity::Warning), "warning"),
            counted(scan.files_scanned, "file"),
            counted(scan.objects_scanned, "object"),
            scanned.tree.entrypoint.display()
        );
        if !ignored_errors(&self.lints).is_empty() {
            text.push_str(&lint_summary(cluster, &self.lints));
        }
        let ignored: Vec<String> = scan
            .findings
            .iter()
            .filter(|f| f.ignored)
            .map(|f| format!("{} ({})", f.code, f.release.as_deref().unwrap_or("-")))
            .collect();
        if !ignored.is_empty() {
            text.push_str(&format!(
                "flux scan {cluster}: ignored by lints.ignore: {}\n",
                ignored.join(", ")
            ));
        }
        text
    }

    /// Why `check` says nothing about ownership: never "valid", as what
    /// `check` exists for, that Flux manages no release of bootstrap's, was
    /// not checked.
    fn not_scanned(&self) -> String {
        let cluster = &self.cluster;
        format!(
            "ownership not checked: no GitOps tree was scanned, so nothing proves that Flux manages none of these releases; cluster `{cluster}` has no `flux:` (root, entrypoint) in clusters/{cluster}/cluster.yaml, and no --flux-root/--flux-entrypoint was given"
        )
    }

    /// `check`'s JSON document of the cluster (docs/design.md#check-json):
    /// the lint and scan findings in one list, errors first.
    pub(crate) fn check_json(&self, shown: Shown) -> Value {
        let Some(scanned) = &self.tree else {
            let mut findings = self.lints.clone();
            findings.push(Finding::tree(
                Severity::Info,
                NOT_SCANNED,
                None,
                None,
                Vec::new(),
                self.not_scanned(),
            ));
            return json!({ "cluster": self.cluster, "findings": findings });
        };
        let scan = &scanned.scan;
        let mut findings: Vec<&Finding> = self.lints.iter().chain(&scan.findings).collect();
        // Stable: each list keeps its own order within a code.
        findings.sort_by_key(|f| (f.severity, f.code));
        let mut document = json!({
            "cluster": self.cluster,
            "findings": findings,
            "filesScanned": scan.files_scanned,
            "objectsScanned": scan.objects_scanned,
        });
        if shown == Shown::Explained {
            // What the verdict rests on, comparable with Flux's own build
            // (docs/design.md#check-json).
            document["builds"] = crate::flux::builds_json(&scan.builds);
        }
        document
    }

    /// What `apply` goes ahead with, once [`Findings::refusal`] let it: a
    /// warning for each lint finding (an ignored error says so), then the
    /// `gitops_scanned` event and a warning for each scan finding above
    /// info level. Without a tree, what the event says of none.
    pub(crate) fn notices(&self) -> Vec<Event> {
        let mut notices: Vec<Event> = self
            .lints
            .iter()
            .map(|f| Event::Warning {
                message: lint_warning(f),
            })
            .collect();
        let Some(scanned) = &self.tree else {
            notices.push(Event::GitopsScanned {
                root: None,
                entrypoint: None,
                files: 0,
                kustomizations: 0,
                helm_releases: 0,
            });
            return notices;
        };
        let scan = &scanned.scan;
        notices.push(Event::GitopsScanned {
            root: Some(scanned.tree.root.clone()),
            entrypoint: Some(scanned.tree.entrypoint.display().to_string()),
            files: scan.files_scanned,
            kustomizations: scan
                .builds
                .iter()
                .filter(|b| {
                    b.by.as_deref()
                        .is_some_and(|by| by.starts_with("Kustomization/"))
                })
                .count(),
            helm_releases: scan.helm_releases.len(),
        });
        notices.extend(
            scan.findings
                .iter()
                .filter(|f| f.severity != Severity::Info)
                .map(|f| Event::Warning {
                    message: tree_warning(f),
                }),
        );
        notices
    }

    /// The warnings of live lints that do not refuse the run.
    pub(crate) fn lint_warnings(&self) -> impl Iterator<Item = String> + '_ {
        self.lints.iter().map(lint_warning)
    }
}

/// A lint finding as `apply` warns about it.
fn lint_warning(f: &Finding) -> String {
    let (file, line, fix) = f.written.as_ref().map_or((None, None, ""), |w| {
        (w.file.as_ref(), w.line, w.fix.as_str())
    });
    let at = match (file, line) {
        (Some(file), Some(line)) => format!(" ({}:{line})", file.display()),
        _ => String::new(),
    };
    if f.ignored && f.severity == Severity::Error {
        format!(
            "lint {} ignored (listed in lints.ignore): {}{at}",
            f.code, f.message
        )
    } else {
        format!("lint {}: {}{at}; fix: {fix}", f.code, f.message)
    }
}

/// A scan finding as `apply` warns about it.
fn tree_warning(f: &Finding) -> String {
    if f.severity == Severity::Error && f.code != crate::flux::findings::HANDOVER_DRIFT {
        format!(
            "flux scan {} ignored (listed in lints.ignore): {}",
            f.code, f.message
        )
    } else {
        format!("flux scan {}: {}", f.code, f.message)
    }
}

/// `check -v`: what the verdict rests on. Every HelmRelease the tree reaches
/// with the Helm release it would manage, then each bootstrap release and
/// whether Flux reaches it.
fn reached(scanned: &TreeScan) -> String {
    let (scan, releases) = (&scanned.scan, &scanned.releases);
    let mut text = format!(
        "Flux reaches {}:\n",
        counted(scan.helm_releases.len(), "HelmRelease")
    );
    for reached in &scan.helm_releases {
        let o = &reached.object;
        text.push_str(&format!(
            "  HelmRelease {}/{} -> Helm release {} (in {})\n",
            o.namespace.as_deref().unwrap_or("(no namespace)"),
            o.name,
            reached.release,
            o.file
        ));
    }
    text.push_str(&format!(
        "bootstrap installs {}:\n",
        counted(releases.len(), "release")
    ));
    for release in releases {
        text.push_str(&format!("  {}\n", verdict(scanned, release)));
    }
    text.push('\n');
    text
}

/// One bootstrap release and whether Flux reaches it, for [`reached`].
fn verdict(scanned: &TreeScan, release: &BootstrapRelease) -> String {
    let id = format!("{}/{}", release.namespace, release.name);
    let managers: Vec<String> = scanned
        .scan
        .helm_releases
        .iter()
        .filter(|r| r.release == id)
        .map(|r| {
            format!(
                "HelmRelease {}/{}",
                r.object.namespace.as_deref().unwrap_or_default(),
                r.object.name
            )
        })
        .collect();
    let verdict = match (release.handover.is_some(), managers.is_empty()) {
        (false, true) => "not managed by Flux".to_string(),
        (false, false) => format!("managed by {} (see the errors above)", managers.join(", ")),
        (true, true) => "handover: no HelmRelease adopts it yet".to_string(),
        (true, false) => format!("handover: adopted by {}", managers.join(", ")),
    };
    format!("{id}: {verdict}")
}
