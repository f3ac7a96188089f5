//! Where a failed template is written in its file: handlebars knows the
//! line and column within the template, the user wants them in the file
//! (inline values and hook arguments are templates inside YAML).

use std::path::Path;

use crate::error::Problem;
use crate::handlebars::Located;

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
pub(crate) fn located(problem: Problem, file: &Path, within: u64, error: &Located) -> Problem {
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
