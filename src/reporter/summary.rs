//! The table printed when a run ends, shared by the plain and progress
//! reporters. Pure: a [`Summary`] in, text out.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Duration;

use crate::event::{Outcome, ReleaseResult, Summary};
use crate::release::ReleaseId;

/// `63.0s`, `2m31s`, `1h02m03s`: tenths only while they still matter.
pub fn fmt_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 100 {
        format!("{:.1}s", d.as_secs_f64())
    } else if secs < 3600 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{}h{:02}m{:02}s", secs / 3600, secs % 3600 / 60, secs % 60)
    }
}

/// How long a release worked, and how long it waited for a helm slot when
/// it did (`4.1s (+2.0s waiting for a helm slot)`): the wait is `--concurrency`'s,
/// not the release's.
pub fn took(result: &ReleaseResult) -> String {
    let slot = result.timing.queued_slot;
    let run = fmt_duration(result.duration.saturating_sub(slot));
    if slot >= Duration::from_millis(50) {
        format!("{run} (+{} waiting for a helm slot)", fmt_duration(slot))
    } else {
        run
    }
}

/// `interrupted_in_helm`: releases whose helm operation was stopped (see
/// [`super::Tracker`]); they may be left `pending-*` in Helm.
pub fn render_summary(summary: &Summary, interrupted_in_helm: &BTreeSet<ReleaseId>) -> String {
    render_summary_for(summary, interrupted_in_helm, false, None)
}

/// The width of the terminal stdout is, when it is one: a summary printed
/// there is fitted to it; one piped to a file or a log keeps its lines
/// whole.
pub fn stdout_width() -> Option<usize> {
    let term = console::Term::stdout();
    term.is_term()
        .then(|| term.size_checked())
        .flatten()
        .map(|(_, cols)| usize::from(cols))
}

/// [`render_summary`]; `quiet` (`-q`): only the releases that did not
/// succeed in the table (and how many did), no critical path. `width`: the
/// terminal's, to fit (lines broken between words and between the items of
/// a list, never inside a name; a table too wide becomes a block per
/// release).
pub fn render_summary_for(
    summary: &Summary,
    interrupted_in_helm: &BTreeSet<ReleaseId>,
    quiet: bool,
    width: Option<usize>,
) -> String {
    let mut out = String::new();
    let shown: Vec<ReleaseResult> = summary
        .releases
        .iter()
        .filter(|r| !quiet || !r.outcome.is_success())
        .cloned()
        .collect();
    if !shown.is_empty() {
        table(&mut out, &shown, width);
        let hidden = summary.releases.len() - shown.len();
        if hidden > 0 {
            let _ = writeln!(
                out,
                "(and {} that succeeded)",
                crate::plural::count(hidden, "release")
            );
        }
        out.push('\n');
    }
    if !quiet && !summary.critical_path.is_empty() {
        critical_path(&mut out, summary, width);
    }
    totals(&mut out, summary, width);
    if summary.interrupted {
        if summary.releases.iter().all(|r| r.outcome.is_success()) {
            // The interrupt came while the last releases finished in their
            // grace period: there is nothing to continue.
            let _ = writeln!(
                out,
                "interrupted, but every release had finished; nothing is left to do"
            );
        } else {
            interruption(&mut out, summary, interrupted_in_helm, width);
        }
    }
    root_failures(&mut out, summary, width);
    out
}

/// `text` broken at spaces into lines of at most `width` columns (none:
/// one line), each line after the first indented by `indent` spaces. A
/// word longer than a line stays whole.
fn wrap(text: &str, width: Option<usize>, indent: usize) -> String {
    let words: Vec<&str> = text.split(' ').collect();
    join_fitted(&words, " ", width, indent)
}

/// `items` joined by `separator`, broken after a separator where the next
/// item would pass `width` columns; continuation lines indented by `indent`.
fn join_fitted(items: &[&str], separator: &str, width: Option<usize>, indent: usize) -> String {
    let Some(width) = width else {
        return items.join(separator);
    };
    let columns = |s: &str| console::measure_text_width(s);
    let mut out = String::new();
    let mut line = 0;
    for (i, item) in items.iter().enumerate() {
        let sep = if i + 1 < items.len() {
            separator.trim_end()
        } else {
            ""
        };
        if i > 0 {
            let space = separator.len() - separator.trim_end().len();
            if line > indent && line + space + columns(item) + columns(sep) > width {
                out.push('\n');
                out.push_str(&" ".repeat(indent));
                line = indent;
            } else {
                out.push_str(&" ".repeat(space));
                line += space;
            }
        }
        out.push_str(item);
        out.push_str(sep);
        line += columns(item) + columns(sep);
    }
    out
}

/// One row per release: how long it worked (`run`), how long it waited
/// for its needs (`queued`) and, when any release waited for one, for a
/// helm slot (`slot`, apart: `--concurrency`), and why it failed.
fn table(out: &mut String, releases: &[ReleaseResult], fit: Option<usize>) {
    let slots = releases.iter().any(|r| !r.timing.queued_slot.is_zero());
    let rows: Vec<Vec<String>> = releases
        .iter()
        .map(|r| {
            let ran = r.outcome != Outcome::Skipped && !r.duration.is_zero();
            let time = |d: Duration| {
                if ran {
                    fmt_duration(d)
                } else {
                    "-".to_string()
                }
            };
            let message = r
                .message
                .as_deref()
                .and_then(|m| m.lines().next())
                .unwrap_or("");
            let mut row = vec![
                r.release.to_string(),
                r.outcome.label().to_string(),
                time(r.duration.saturating_sub(r.timing.queued_slot)),
                time(r.timing.queued_needs),
            ];
            if slots {
                row.push(time(r.timing.queued_slot));
            }
            row.push(message.to_string());
            row
        })
        .collect();
    let mut header: Vec<String> = ["release", "outcome", "run", "queued"]
        .map(String::from)
        .into();
    if slots {
        header.push("slot".to_string());
    }
    header.push("message".to_string());
    let columns = header.len();
    let width = |i: usize| {
        rows.iter()
            .chain(std::iter::once(&header))
            .map(|row| row[i].chars().count())
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..columns - 1).map(width).collect();
    // The columns before the message, and room for some of it.
    let fixed: usize = widths.iter().map(|w| w + 2).sum();
    if let Some(fit) = fit
        && fixed + MESSAGE_ROOM.min(width(columns - 1)) > fit
    {
        return blocks(out, &header, &rows, fit);
    }
    let message_width = fit.map(|fit| fit.saturating_sub(fixed));
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            let w = widths.get(i).copied().unwrap_or(0);
            match i {
                // Names left, times right, the message as it is.
                0 | 1 => line.push_str(&format!("{cell:<w$}  ")),
                i if i + 1 < columns => line.push_str(&format!("{cell:>w$}  ")),
                // The message wrapped in its column.
                _ => line.push_str(
                    &wrap(cell, message_width, 0)
                        .replace('\n', &format!("\n{}", " ".repeat(fixed))),
                ),
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// The columns a message keeps beside the others before the table turns
/// into blocks.
const MESSAGE_ROOM: usize = 24;

/// The table as a block per release, for a terminal too narrow for its
/// columns: the release on its own line, then its outcome and times, then
/// its message, each wrapped.
fn blocks(out: &mut String, header: &[String], rows: &[Vec<String>], width: usize) {
    let message = header.len() - 1;
    for row in rows {
        let _ = writeln!(out, "{}", row[0]);
        let mut facts = vec![row[1].clone()];
        for (name, value) in header.iter().zip(row).take(message).skip(2) {
            facts.push(format!("{name} {value}"));
        }
        let facts = format!("  {}", facts.join(" · "));
        let _ = writeln!(out, "{}", wrap(&facts, Some(width), 4));
        if !row[message].is_empty() {
            let text = format!("  {}", row[message]);
            let _ = writeln!(out, "{}", wrap(&text, Some(width), 4));
        }
    }
}

fn critical_path(out: &mut String, summary: &Summary, width: Option<usize>) {
    let mut total = Duration::ZERO;
    let steps: Vec<String> = summary
        .critical_path
        .iter()
        .map(
            |id| match summary.releases.iter().find(|r| &r.release == id) {
                Some(r) => {
                    let run = r.duration.saturating_sub(r.timing.queued_slot);
                    total += run;
                    format!("{id} ({})", fmt_duration(run))
                }
                None => id.to_string(),
            },
        )
        .collect();
    let mut items: Vec<String> = vec![format!("critical path: {}", steps[0])];
    items.extend(steps.iter().skip(1).map(|s| format!("→ {s}")));
    let last = items.len() - 1;
    items[last].push_str(&format!(" = {}", fmt_duration(total)));
    let items: Vec<&str> = items.iter().map(String::as_str).collect();
    let _ = writeln!(out, "{}", join_fitted(&items, " ", width, 2));
}

/// Where an outcome sits in the totals line; exhaustive so that a new outcome
/// cannot silently vanish from it.
fn rank(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Installed => 0,
        Outcome::Upgraded => 1,
        Outcome::Unchanged => 2,
        Outcome::Adopted => 3,
        Outcome::WouldInstall => 4,
        Outcome::WouldUpgrade => 5,
        Outcome::Uninstalled => 6,
        Outcome::Absent => 7,
        Outcome::WouldUninstall => 8,
        Outcome::Failed => 9,
        Outcome::Skipped => 10,
        Outcome::Interrupted => 11,
    }
}

/// `infra: 5 installed, 1 failed, 1 skipped in 2m40s`.
fn totals(out: &mut String, summary: &Summary, width: Option<usize>) {
    let mut outcomes: Vec<Outcome> = summary.releases.iter().map(|r| r.outcome).collect();
    outcomes.sort_by_key(|&o| rank(o));
    outcomes.dedup();
    let counts: Vec<String> = outcomes
        .iter()
        .map(|&outcome| {
            let n = summary
                .releases
                .iter()
                .filter(|r| r.outcome == outcome)
                .count();
            format!("{n} {}", outcome.label())
        })
        .collect();
    let counts = if counts.is_empty() {
        "no releases".to_string()
    } else {
        counts.join(", ")
    };
    let dry_run = if summary.dry_run { " (dry run)" } else { "" };
    // The whole run, and where it went (apply).
    let phases = match &summary.phases {
        Some(p) => format!(
            " (preflight {}, CRDs {}, releases {})",
            fmt_duration(p.preflight),
            fmt_duration(p.crds),
            fmt_duration(p.releases)
        ),
        None => String::new(),
    };
    let line = format!(
        "{}{dry_run}: {counts} in {}{phases}",
        summary.cluster,
        fmt_duration(summary.duration)
    );
    let _ = writeln!(out, "{}", wrap(&line, width, 2));
}

fn interruption(
    out: &mut String,
    summary: &Summary,
    in_helm: &BTreeSet<ReleaseId>,
    width: Option<usize>,
) {
    let names = |pick: &dyn Fn(Outcome) -> bool| -> Vec<String> {
        summary
            .releases
            .iter()
            .filter(|r| pick(r.outcome))
            .map(|r| r.release.to_string())
            .collect()
    };
    let groups = [
        (
            "finished",
            names(&|o| o.is_success() || o == Outcome::Failed),
        ),
        ("interrupted", names(&|o| o == Outcome::Interrupted)),
        ("not started", names(&|o| o == Outcome::Skipped)),
    ];
    for (label, group) in groups {
        if !group.is_empty() {
            let mut items: Vec<String> = group.clone();
            items[0] = format!("{label}: {}", items[0]);
            let items: Vec<&str> = items.iter().map(String::as_str).collect();
            let _ = writeln!(out, "{}", join_fitted(&items, ", ", width, 2));
        }
    }
    let attention: Vec<&ReleaseId> = summary
        .releases
        .iter()
        .filter(|r| r.outcome == Outcome::Interrupted && in_helm.contains(&r.release))
        .map(|r| &r.release)
        .collect();
    if attention.is_empty() {
        let _ = writeln!(out, "{}", continue_hint(summary));
        return;
    }
    let _ = writeln!(out, "may need attention (stopped during a helm operation):");
    for id in attention {
        let text = format!(
            "  {id}: may be pending-install or pending-upgrade: run `bootstrap apply` again; \
             if helm reports another operation in progress, `helm uninstall {} -n {}` \
             when it is pending-install (a first install), `helm rollback {0} -n {1}` \
             when it is pending-upgrade",
            id.name, id.namespace
        );
        let _ = writeln!(out, "{}", wrap(&text, width, 4));
    }
}

/// Which command to run again. Told from the outcomes, because a summary
/// does not name its command; when nothing finished, naming the wrong one
/// would be harmful (`apply` after an interrupted `destroy` reinstalls).
fn continue_hint(summary: &Summary) -> &'static str {
    let finished = summary
        .releases
        .iter()
        .filter(|r| !matches!(r.outcome, Outcome::Interrupted | Outcome::Skipped));
    let (mut removal, mut install) = (false, false);
    for r in finished {
        match r.outcome {
            Outcome::Failed => {}
            o if o.is_removal() => removal = true,
            _ => install = true,
        }
    }
    match (removal, install) {
        (true, false) => "run `bootstrap destroy` again to continue",
        (false, true) => "run `bootstrap apply` again to continue",
        _ => "run the interrupted command again to continue",
    }
}

fn root_failures(out: &mut String, summary: &Summary, width: Option<usize>) {
    for id in &summary.root_failures {
        let message = summary
            .releases
            .iter()
            .find(|r| &r.release == id)
            .and_then(|r| r.message.as_deref())
            .and_then(|m| m.lines().next());
        let line = match message {
            Some(message) => format!("root failure: {id}: {message}"),
            None => format!("root failure: {id}"),
        };
        let _ = writeln!(out, "{}", wrap(&line, width, 2));
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn result(name: &str, outcome: Outcome, secs: f64, message: Option<&str>) -> ReleaseResult {
        let (namespace, name) = name.split_once('/').unwrap();
        ReleaseResult {
            release: ReleaseId::new(namespace, name),
            outcome,
            duration: Duration::from_secs_f64(secs),
            timing: crate::event::Timing {
                run: Duration::from_secs_f64(secs),
                ..Default::default()
            },
            message: message.map(str::to_string),
        }
    }

    fn id(s: &str) -> ReleaseId {
        let (namespace, name) = s.split_once('/').unwrap();
        ReleaseId::new(namespace, name)
    }

    fn summary(releases: Vec<ReleaseResult>, path: &[&str], roots: &[&str]) -> Summary {
        Summary {
            phases: None,
            cluster: "infra".into(),
            ok: roots.is_empty(),
            dry_run: false,
            duration: Duration::from_secs(160),
            releases,
            critical_path: path.iter().map(|s| id(s)).collect(),
            root_failures: roots.iter().map(|s| id(s)).collect(),
            interrupted: false,
            lock_lost: None,
        }
    }

    /// The longest line of `text`, in columns.
    fn widest(text: &str) -> usize {
        text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
    }

    #[test]
    fn on_a_narrow_terminal_lines_break_between_words_and_list_items() {
        let long = "external-secrets-system/external-secrets-operator-for-the-whole-fleet";
        let releases = vec![
            result("kube-system/cilium", Outcome::Installed, 63.0, None),
            result(
                long,
                Outcome::Failed,
                5.0,
                Some(
                    "timed out waiting for the rollout of Deployment external-secrets-system/webhook: 0/1 ready",
                ),
            ),
            result(
                "kube-system/coredns",
                Outcome::Skipped,
                0.0,
                Some("needs a release that failed"),
            ),
        ];
        let mut s = summary(releases, &["kube-system/cilium", long], &[long]);
        s.interrupted = true;
        let whole = render_summary_for(&s, &BTreeSet::new(), false, None);
        for width in [60, 80] {
            let fitted = render_summary_for(&s, &BTreeSet::new(), false, Some(width));
            // Nothing longer than the terminal but a line holding the long
            // release id, which is never cut.
            for line in fitted.lines() {
                assert!(
                    line.chars().count() <= width || line.contains(long),
                    "{width}: `{line}`\n{fitted}"
                );
            }
            // The same words, only broken differently.
            let words = |t: &str| t.split_whitespace().map(String::from).collect::<Vec<_>>();
            let (a, b) = (words(&whole), words(&fitted));
            for word in &a {
                if !["release", "outcome", "run", "queued", "message"].contains(&word.as_str()) {
                    assert!(b.contains(word), "{width}: `{word}` lost\n{fitted}");
                }
            }
            // Lists break after a separator, never inside a name.
            assert!(
                fitted.contains("critical path: kube-system/cilium (63.0s)\n  → "),
                "{fitted}"
            );
            assert!(fitted.contains(&format!("→ {long}")), "{fitted}");
        }
        // Too narrow for the table's columns: a block per release.
        let narrow = render_summary_for(&s, &BTreeSet::new(), false, Some(60));
        assert!(
            narrow.contains(&format!("{long}\n  failed · run 5.0s")),
            "{narrow}"
        );
        assert!(widest(&whole) > 120, "{whole}");
        // Wide enough: the table, as when piped.
        let wide = render_summary_for(&s, &BTreeSet::new(), false, Some(300));
        assert_eq!(wide, whole);
    }

    #[test]
    fn a_wait_for_a_helm_slot_is_shown_apart_from_queued() {
        let mut a = result("kube-system/a", Outcome::Installed, 2.0, None);
        a.timing.queued_needs = Duration::from_secs(1);
        a.timing.queued_slot = Duration::from_millis(500);
        let b = result("kube-system/b", Outcome::Installed, 1.0, None);
        let text = render_summary(&summary(vec![a, b], &[], &[]), &BTreeSet::new());
        let lines: Vec<&str> = text.lines().take(3).collect();
        assert_eq!(
            lines,
            [
                "release        outcome     run  queued  slot  message",
                "kube-system/a  installed  1.5s    1.0s  0.5s",
                "kube-system/b  installed  1.0s    0.0s  0.0s",
            ],
            "{text}"
        );
        // No slot waited for: no slot column.
        let c = result("kube-system/c", Outcome::Installed, 1.0, None);
        let text = render_summary(&summary(vec![c], &[], &[]), &BTreeSet::new());
        assert!(
            text.starts_with("release        outcome     run  queued  message\n"),
            "{text}"
        );
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(fmt_duration(Duration::from_millis(0)), "0.0s");
        assert_eq!(fmt_duration(Duration::from_millis(63_040)), "63.0s");
        assert_eq!(fmt_duration(Duration::from_millis(99_940)), "99.9s");
        assert_eq!(fmt_duration(Duration::from_secs(100)), "1m40s");
        assert_eq!(fmt_duration(Duration::from_secs(151)), "2m31s");
        assert_eq!(fmt_duration(Duration::from_secs(3723)), "1h02m03s");
    }

    #[test]
    fn successful_run() {
        let s = summary(
            vec![
                result("kube-system/cilium", Outcome::Installed, 63.0, None),
                result("kube-system/coredns", Outcome::Unchanged, 1.2, None),
                result("spegel/spegel", Outcome::Upgraded, 12.1, None),
            ],
            &["kube-system/cilium", "spegel/spegel"],
            &[],
        );
        assert_eq!(
            render_summary(&s, &BTreeSet::new()),
            "\
release              outcome      run  queued  message
kube-system/cilium   installed  63.0s    0.0s
kube-system/coredns  unchanged   1.2s    0.0s
spegel/spegel        upgraded   12.1s    0.0s

critical path: kube-system/cilium (63.0s) → spegel/spegel (12.1s) = 75.1s
infra: 1 installed, 1 upgraded, 1 unchanged in 2m40s
"
        );
    }

    #[test]
    fn failure_names_the_reason_the_skips_and_the_root() {
        let s = summary(
            vec![
                result("kube-system/cilium", Outcome::Installed, 63.0, None),
                result(
                    "kube-system/coredns",
                    Outcome::Failed,
                    300.0,
                    Some(
                        "hook rollout of Deployment kube-system/coredns timed out after 5m\n0 of 2 pods ready",
                    ),
                ),
                result(
                    "flux-system/flux-operator",
                    Outcome::Skipped,
                    0.0,
                    Some("needs kube-system/coredns, which failed"),
                ),
            ],
            &["kube-system/cilium", "kube-system/coredns"],
            &["kube-system/coredns"],
        );
        assert_eq!(
            render_summary(&s, &BTreeSet::new()),
            "\
release                    outcome      run  queued  message
kube-system/cilium         installed  63.0s    0.0s
kube-system/coredns        failed     5m00s    0.0s  hook rollout of Deployment kube-system/coredns timed out after 5m
flux-system/flux-operator  skipped        -       -  needs kube-system/coredns, which failed

critical path: kube-system/cilium (63.0s) → kube-system/coredns (5m00s) = 6m03s
infra: 1 installed, 1 failed, 1 skipped in 2m40s
root failure: kube-system/coredns: hook rollout of Deployment kube-system/coredns timed out after 5m
"
        );
    }

    #[test]
    fn an_interrupt_after_the_last_release_finished_asks_for_nothing() {
        let mut s = summary(
            vec![result("kube-system/cilium", Outcome::Installed, 63.0, None)],
            &["kube-system/cilium"],
            &[],
        );
        s.interrupted = true;
        let text = render_summary(&s, &BTreeSet::new());
        assert!(text.contains("every release had finished"), "{text}");
        assert!(!text.contains("again to continue"), "{text}");
    }

    #[test]
    fn interruption_says_what_finished_and_what_needs_attention() {
        let mut s = summary(
            vec![
                result("kube-system/cilium", Outcome::Installed, 63.0, None),
                result("kube-system/coredns", Outcome::Interrupted, 4.0, None),
                result("spegel/spegel", Outcome::Interrupted, 9.5, None),
                result(
                    "flux-system/flux-operator",
                    Outcome::Skipped,
                    0.0,
                    Some("not started: interrupted"),
                ),
            ],
            &[],
            &[],
        );
        s.interrupted = true;
        s.ok = false;
        let in_helm = BTreeSet::from([id("kube-system/coredns")]);
        assert_eq!(
            render_summary(&s, &in_helm),
            "\
release                    outcome        run  queued  message
kube-system/cilium         installed    63.0s    0.0s
kube-system/coredns        interrupted   4.0s    0.0s
spegel/spegel              interrupted   9.5s    0.0s
flux-system/flux-operator  skipped          -       -  not started: interrupted

infra: 1 installed, 1 skipped, 2 interrupted in 2m40s
finished: kube-system/cilium
interrupted: kube-system/coredns, spegel/spegel
not started: flux-system/flux-operator
may need attention (stopped during a helm operation):
  kube-system/coredns: may be pending-install or pending-upgrade: run `bootstrap apply` again; if helm reports another operation in progress, `helm uninstall coredns -n kube-system` when it is pending-install (a first install), `helm rollback coredns -n kube-system` when it is pending-upgrade
"
        );
    }

    #[test]
    fn interruption_outside_helm_only_asks_for_a_rerun() {
        let mut s = summary(
            vec![
                result("kube-system/cilium", Outcome::Unchanged, 1.0, None),
                result("spegel/spegel", Outcome::Interrupted, 9.5, None),
            ],
            &[],
            &[],
        );
        s.interrupted = true;
        let text = render_summary(&s, &BTreeSet::new());
        assert!(
            text.ends_with("interrupted: spegel/spegel\nrun `bootstrap apply` again to continue\n")
        );
        assert!(!text.contains("rollback"));
    }

    #[test]
    fn an_interrupted_destroy_asks_for_destroy_and_an_unknown_run_names_no_command() {
        let mut s = summary(
            vec![
                result("spegel/spegel", Outcome::Uninstalled, 1.0, None),
                result("kube-system/cilium", Outcome::Interrupted, 2.0, None),
            ],
            &[],
            &[],
        );
        s.interrupted = true;
        let text = render_summary(&s, &BTreeSet::new());
        assert!(
            text.ends_with("run `bootstrap destroy` again to continue\n"),
            "{text}"
        );

        s.releases.remove(0);
        let text = render_summary(&s, &BTreeSet::new());
        assert!(
            text.ends_with("run the interrupted command again to continue\n"),
            "{text}"
        );
    }

    #[test]
    fn a_run_without_releases_is_one_line() {
        let s = summary(vec![], &[], &[]);
        assert_eq!(
            render_summary(&s, &BTreeSet::new()),
            "infra: no releases in 2m40s\n"
        );
    }

    #[test]
    fn dry_run_totals_say_so() {
        let mut s = summary(
            vec![result(
                "kube-system/cilium",
                Outcome::WouldUpgrade,
                0.3,
                Some("chart 1.18.1 → 1.18.2"),
            )],
            &[],
            &[],
        );
        s.dry_run = true;
        assert_eq!(
            render_summary(&s, &BTreeSet::new()),
            "\
release             outcome         run  queued  message
kube-system/cilium  would upgrade  0.3s    0.0s  chart 1.18.1 → 1.18.2

infra (dry run): 1 would upgrade in 2m40s
"
        );
    }
}
