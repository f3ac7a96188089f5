//! Every YAML read in the project goes through here, on `serde-saphyr`: a
//! maintained, panic-free YAML parser that reports line and column for both
//! syntax and type errors (the same crate kube 5 uses; `serde_yaml` is archived).

use std::path::Path;

use serde::de::DeserializeOwned;

use crate::error::{Problem, did_you_mean};

/// Parses a single-document YAML text.
pub(crate) fn document<T: DeserializeOwned>(text: &str, file: &Path) -> Result<T, Problem> {
    serde_saphyr::from_str::<T>(text).map_err(|e| problem(&e, file, text))
}

/// Parses a Kubernetes-style manifest stream into JSON values, skipping empty
/// documents and nulls. A chart's rendered output is far bigger than any
/// config file (thousands of documents, CRD schemas nested deep), so its
/// limits are raised; they still bound a runaway input.
pub(crate) fn manifests(text: &str, file: &Path) -> Result<Vec<serde_json::Value>, Problem> {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_documents = 100_000;
    budget.max_nodes = 20_000_000;
    budget.max_events = 50_000_000;
    budget.max_depth = 256;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    Ok(
        serde_saphyr::from_multiple_with_options::<serde_json::Value>(text, options)
            .map_err(|e| problem(&e, file, text))?
            .into_iter()
            .filter(|doc| !doc.is_null())
            .collect(),
    )
}

/// A parser limit in the user's words (its Debug text read like
/// `budget breached: Documents { documents: 1025 }`).
fn breach(breach: &serde_saphyr::budget::BudgetBreach) -> String {
    use serde_saphyr::budget::BudgetBreach as B;
    let what = match breach {
        B::Documents { documents } => format!("more than {} YAML documents", documents - 1),
        B::Depth { depth } => format!("nesting deeper than {} levels", depth - 1),
        B::Nodes { .. } => "too many values (maps, lists and scalars)".to_string(),
        B::Events { .. } => "too much YAML".to_string(),
        B::Aliases { .. } | B::Anchors { .. } | B::AliasAnchorRatio { .. } => {
            "too many YAML anchors or aliases (an alias bomb?)".to_string()
        }
        B::ScalarBytes { .. } | B::InputBytes { .. } => "too many bytes of text".to_string(),
        other => format!("a YAML limit ({other:?})"),
    };
    format!("holds {what}, more than bootstrap reads; split it into smaller files")
}

pub(crate) fn to_string<T: serde::Serialize>(value: &T) -> String {
    serde_saphyr::to_string(value).unwrap_or_else(|e| format!("# cannot render as YAML: {e}\n"))
}

fn problem(error: &serde_saphyr::Error, file: &Path, text: &str) -> Problem {
    let error = error.without_snippet();
    let location = error.location().map(|l| (l.line(), l.column()));
    let lines: Vec<&str> = text.lines().collect();
    let (message, at) = match explain(error, &lines, location) {
        Some((message, at)) => (message, at),
        None => (raw_message(error), location),
    };
    let message = in_context(error, message, &lines, location);
    let (message, at) = in_words(message, &lines, at);
    let mut problem = Problem::new(message).file(file);
    if let Some((line, column)) = at {
        problem = problem.at(line, column);
    }
    problem
}

/// The scanner's words for a few syntax errors made the file's: a tab
/// (reported by the scanner at the end of the line above it) is located
/// at the tab; a line indented to match no map, and a `: ` inside a plain
/// value, say what to do.
fn in_words(
    message: String,
    lines: &[&str],
    at: Option<(u64, u64)>,
) -> (String, Option<(u64, u64)>) {
    let index = at.and_then(|(l, _)| usize::try_from(l).ok()?.checked_sub(1));
    if message.contains("found a tab") || message.contains("tabs disallowed") {
        let tab = index.and_then(|i| {
            (i..lines.len().min(i + 3)).find_map(|l| {
                let indent: String = lines[l].chars().take_while(|c| c.is_whitespace()).collect();
                let column = indent.find('\t')?;
                Some((l as u64 + 1, indent[..column].chars().count() as u64 + 1))
            })
        });
        return (
            "a tab indents this line; YAML indents with spaces only: replace the tab with spaces"
                .to_string(),
            tab.or(at),
        );
    }
    let Some(index) = index.filter(|i| *i < lines.len()) else {
        return (message, at);
    };
    if message.contains("did not find expected key") {
        let text = lines[index];
        let indent = indentation(text);
        let mut above: Vec<usize> = lines[..index]
            .iter()
            .filter(|l| {
                let t = l.trim_start();
                !t.is_empty() && !t.starts_with('#') && last_key(l, l.len(), 0).is_some()
            })
            .map(|l| indentation(l))
            .collect();
        above.sort_unstable();
        above.dedup();
        if !above.contains(&indent) {
            let spaces = |n: usize| crate::plural::count(n, "space");
            let listed: Vec<String> = above.iter().map(|n| n.to_string()).collect();
            return (
                format!(
                    "this line is indented {}, which lines up with no key above it (those are at {} spaces): indent it as the keys of the map it belongs to",
                    spaces(indent),
                    listed.join(", ")
                ),
                Some((index as u64 + 1, indent as u64 + 1)),
            );
        }
        return (
            "a line here does not continue the map above it (a missing `:`, or a value that spans lines without quotes): check this line and the one above".to_string(),
            at,
        );
    }
    if message.contains("mapping values are not allowed in this context") {
        return (
            "a value holds `: `, which YAML reads as the start of a key: quote the value (`key: \"a: b\"`)"
                .to_string(),
            at,
        );
    }
    (message, at)
}

/// The parser's words made the file's: a key unknown inside a nested map
/// says which map (and that it may belong further left), a tab says it is
/// the tab, a document that is no map says what a document must be.
fn in_context(
    error: &serde_saphyr::Error,
    message: String,
    lines: &[&str],
    at: Option<(u64, u64)>,
) -> String {
    use serde_saphyr::Error as E;
    if message.contains("tabs disallowed") {
        return "a tab indents this line; YAML indents with spaces only: replace the tab with spaces".to_string();
    }
    match error {
        // A near miss already says what was meant.
        E::SerdeUnknownField { .. } if message.contains("did you mean") => message,
        E::SerdeUnknownField { field, .. } => {
            let Some((line, _)) = at else { return message };
            let Some(index) = usize::try_from(line).ok().and_then(|l| l.checked_sub(1)) else {
                return message;
            };
            let Some(text) = lines.get(index) else { return message };
            let indent = indentation(text);
            if indent == 0 {
                return message;
            }
            // The map the key was written in: the nearest line above indented less.
            let parent = (0..index).rev().find_map(|i| {
                let l = lines[i];
                let trimmed = l.trim_start();
                if trimmed.is_empty() || trimmed.starts_with('#') || indentation(l) >= indent {
                    return None;
                }
                last_key(l, l.len(), i)
            });
            // `- key:` is a key of a list entry, the list being the parent's.
            let entry = text.trim_start().starts_with("- ");
            match parent {
                Some(parent) if entry => message.replacen(
                    &format!("unknown key `{field}`"),
                    &format!("unknown key `{field}` in a `{}:` entry", parent.name),
                    1,
                ),
                Some(parent) => {
                    let message = message.replacen(
                        &format!("unknown key `{field}`"),
                        &format!("unknown key `{field}` in `{}:`", parent.name),
                        1,
                    );
                    format!(
                        "{message}; if `{field}` belongs beside `{}:`, not under it, indent it as `{}:` is",
                        parent.name, parent.name
                    )
                }
                None => message,
            }
        }
        E::Unexpected { expected, .. }
            if *expected == "mapping start" && message.starts_with("expected mapping start") =>
        {
            "this document is not a map of keys to values: a list or a single value was found where `key: value` lines belong".to_string()
        }
        _ => message,
    }
}

/// The parser's own text, for what [`explain`] has no words for.
fn raw_message(error: &serde_saphyr::Error) -> String {
    match error {
        serde_saphyr::Error::SerdeUnknownField {
            field, expected, ..
        } => format!(
            "unknown key `{field}`{}",
            match did_you_mean(field, expected.iter().copied()) {
                hint if hint.is_empty() => format!(" (allowed: {})", expected.join(", ")),
                hint => hint,
            }
        ),
        serde_saphyr::Error::SerdeMissingField { field, .. } => {
            format!("missing required key `{field}`")
        }
        serde_saphyr::Error::Budget { breach: b, .. } => breach(b),
        other => {
            let options =
                serde_saphyr::render_options! { snippets: serde_saphyr::SnippetMode::Off };
            let text = other.render_with_options(options);
            // The renderer appends " at line L, column C"; we print the location
            // ourselves in the `file:line:col` prefix.
            let text = match text.rfind(" at line ") {
                Some(cut) => text[..cut].to_string(),
                None => text,
            };
            // Advice meant for the programmer, not the user of the file.
            match text.find(", set DuplicateKeyPolicy") {
                Some(cut) => text[..cut].to_string(),
                None => text,
            }
        }
    }
}

/// A type error in the words of the file: which key, what it must look
/// like, and for a value written at the wrong indentation, where it belongs.
/// `None` leaves the parser's message.
fn explain(
    error: &serde_saphyr::Error,
    lines: &[&str],
    at: Option<(u64, u64)>,
) -> Option<(String, Option<(u64, u64)>)> {
    use serde_saphyr::Error as E;
    let (line, column) = at?;
    if let E::DuplicateMappingKey { key: Some(dup), .. } = error {
        return Some((
            format!("`{dup}` is written twice in the same map; keep one"),
            at,
        ));
    }
    let key = key_at(lines, line, column)?;
    let here = Some((key.line as u64 + 1, key.column as u64 + 1));
    let name = &key.name;
    let message = match error {
        E::Unexpected { expected, .. } if *expected == "sequence start" => match &key.scalar {
            Some(value) => format!("`{name}` must be a list, like `{name}: [{value}]`"),
            None => format!("`{name}` must be a list, like `{name}: [a, b]`"),
        },
        E::Unexpected { expected, .. } if *expected == "mapping start" => format!(
            "`{name}` must be a map of keys to values (`key: value` lines indented under `{name}:`, or `{name}: {{key: value}}`)"
        ),
        E::Unexpected { expected, .. } if *expected == "string scalar" && key.whole => {
            format!("`{name}` must be a single text value, not a list or a map")
        }
        E::InvalidScalar { ty, .. } if ty.contains("bool") => match &key.scalar {
            Some(value) => format!("`{name}: {value}` must be `true` or `false`"),
            None => format!("`{name}` must be `true` or `false`"),
        },
        E::InvalidBooleanStrict { .. } => format!("`{name}` must be `true` or `false`"),
        E::SerdeUnknownVariant {
            variant, expected, ..
        } => {
            if key.scalar.is_none() && name == "crds" {
                // `crds:` at the top level with a map under it: chart values
                // (cert-manager's `crds.enabled`) meant for `crdValues:`,
                // written one indentation level too far left.
                return Some((
                    format!(
                        "`crds` is the release's CRD policy (`{}`), not chart values; `{variant}` under it looks like chart values for the CRD render: indent `crds:` under `crdValues:` (or under `values:` for the install), like `crdValues: {{crds: {{{variant}: true}}}}`",
                        expected.join("`, `"),
                    ),
                    here,
                ));
            }
            format!(
                "`{name}: {variant}` is not one of {}{}",
                expected.join(", "),
                did_you_mean(variant, expected.iter().copied())
            )
        }
        _ => return None,
    };
    let at = if key.line + 1 == line as usize {
        at
    } else {
        here
    };
    Some((message, at))
}

/// The key a value belongs to.
#[derive(Debug, PartialEq, Eq)]
struct Key {
    name: String,
    /// 0-based line and column of the key.
    line: usize,
    column: usize,
    /// The plain scalar written after `key:` on its line, if any.
    scalar: Option<String>,
    /// The location is the key's whole value (not something inside it).
    whole: bool,
}

/// The key whose value is at (`line`, `column`) (1-based): the `key:`
/// written before that column on its line, else the nearest line above
/// indented less (the key a block value hangs under).
fn key_at(lines: &[&str], line: u64, column: u64) -> Option<Key> {
    let index = usize::try_from(line).ok()?.checked_sub(1)?;
    let text = lines.get(index)?;
    let before: String = text
        .chars()
        .take(usize::try_from(column).ok()?.saturating_sub(1))
        .collect();
    if let Some(mut key) = last_key(text, before.len(), index) {
        key.whole = before.trim_end().ends_with(':');
        return Some(key);
    }
    // At a key's own colon with nothing after it (`valuesFiles:` left
    // empty): that key, not one of the lines above.
    let rest = text[before.len().min(text.len())..].trim();
    if rest == ":" || (rest.starts_with(':') && rest[1..].trim_start().starts_with('#')) {
        return last_key(text, text.len(), index);
    }
    let indent = before.chars().count();
    (0..index).rev().find_map(|i| {
        let l = lines[i];
        let trimmed = l.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') || indentation(l) >= indent {
            return None;
        }
        last_key(l, l.len(), i).filter(|k| k.column == indentation(l) || trimmed.starts_with("- "))
    })
}

/// The last `key:` in the first `limit` bytes of `text`, line `index`.
fn last_key(text: &str, limit: usize, index: usize) -> Option<Key> {
    let bytes = &text.as_bytes()[..limit.min(text.len())];
    let colon = (0..bytes.len())
        .rev()
        .find(|&i| bytes[i] == b':' && bytes.get(i + 1).is_none_or(|b| b.is_ascii_whitespace()))?;
    let head = &text[..colon];
    let start = head
        .rfind(|c: char| c.is_whitespace() || matches!(c, '{' | '[' | ',' | '-'))
        .map(|i| i + 1)
        .unwrap_or(0);
    let name = head[start..].trim_matches(['"', '\'']).to_string();
    if name.is_empty() {
        return None;
    }
    let rest = text[colon + 1..].trim();
    let rest = rest.split(" #").next().unwrap_or_default().trim();
    let plain = !rest.is_empty() && !rest.starts_with(['[', '{', '|', '>', '&', '*', '!', '#']);
    Some(Key {
        name,
        line: index,
        column: text[..start].chars().count(),
        scalar: plain.then(|| rest.to_string()),
        whole: true,
    })
}

fn indentation(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// One document of a multi-document text, parsed on its own.
#[derive(Debug)]
pub(crate) struct Parsed<T> {
    /// `None` when nothing could be read. With problems, it is what was
    /// left once the broken keys were taken out: good for telling what the
    /// document defines, not for using it.
    pub value: Option<T>,
    pub problems: Vec<Problem>,
    /// The document's text at its place (earlier lines blank) when it had
    /// problems, for a lenient second look; empty otherwise.
    pub text: String,
}

/// [`each_document`] for a file of exactly one document.
pub(crate) fn one_document<T: DeserializeOwned>(text: &str, file: &Path) -> Parsed<T> {
    match serde_saphyr::from_str::<T>(text) {
        Ok(value) => Parsed {
            value: Some(value),
            problems: Vec::new(),
            text: String::new(),
        },
        Err(_) => {
            let lines: Vec<&str> = text.lines().collect();
            repair(&lines, 0, lines.len(), file)
        }
    }
}

/// Every document of `text` (empty ones skipped, as kubectl and helm do),
/// each parsed on its own so a broken document hides none of the others,
/// and every broken key of a document reported, not only the first: the
/// key at fault is taken out and the document read again.
pub(crate) fn each_document<T: DeserializeOwned>(text: &str, file: &Path) -> Vec<Parsed<T>> {
    if let Ok(values) = serde_saphyr::from_multiple::<T>(text) {
        // The common case: one parse, no copies. Lines are only needed for
        // problems, and there are none.
        return values
            .into_iter()
            .map(|value| Parsed {
                value: Some(value),
                problems: Vec::new(),
                text: String::new(),
            })
            .collect();
    }
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut start = 0;
    while start < lines.len() {
        let end = (start + 1..lines.len())
            .find(|&i| is_document_start(lines[i]))
            .unwrap_or(lines.len());
        let body = &lines[start..end];
        let empty = body.iter().all(|l| {
            let t = l.trim();
            t.is_empty() || t.starts_with('#') || t == "..." || is_document_start(l)
        });
        if !empty {
            out.push(repair(&lines, start, end, file));
        }
        start = end;
    }
    out
}

fn is_document_start(line: &str) -> bool {
    line == "---" || line.starts_with("--- ") || line.starts_with("---\t")
}

/// Parses lines `start..end` of `lines` (kept at their place, so locations
/// stay those of the file), taking out each key at fault until it reads.
fn repair<T: DeserializeOwned>(lines: &[&str], start: usize, end: usize, file: &Path) -> Parsed<T> {
    use serde_saphyr::Error as E;
    let mut doc: Vec<&str> = vec![""; start];
    doc.extend_from_slice(&lines[start..end]);
    let original = doc.join("\n");
    let mut problems = Vec::new();
    // Keys taken out, and the lines whose errors may only follow from that.
    let mut removed: Vec<String> = Vec::new();
    let mut shadows: Vec<std::ops::RangeInclusive<usize>> = Vec::new();
    for _ in 0..64 {
        let text = doc.join("\n");
        let error = match serde_saphyr::from_str::<T>(&text) {
            Ok(value) => {
                return Parsed {
                    value: Some(value),
                    problems,
                    text: original,
                };
            }
            Err(error) => error,
        };
        let error = error.without_snippet();
        let location = error.location().map(|l| (l.line(), l.column()));
        let follow_up = match error {
            E::SerdeMissingField { field, .. } => removed.iter().any(|r| r == field),
            E::SerdeUnknownField { .. } => false,
            _ => location.is_some_and(|(l, _)| {
                let l = (l as usize).saturating_sub(1);
                shadows.iter().any(|r| r.contains(&l))
            }),
        };
        if follow_up {
            break;
        }
        problems.push(problem(error, file, &text));
        let repairable = matches!(
            error,
            E::SerdeUnknownField { .. }
                | E::SerdeUnknownVariant { .. }
                | E::SerdeInvalidType { .. }
                | E::SerdeInvalidValue { .. }
                | E::Unexpected { .. }
                | E::InvalidScalar { .. }
                | E::InvalidBooleanStrict { .. }
                | E::NullIntoString { .. }
                | E::DuplicateMappingKey { .. }
        );
        let key = match (repairable, location) {
            (true, Some((line, column))) => {
                // An unknown key is located at the key itself.
                let on_key = matches!(error, E::SerdeUnknownField { .. })
                    || matches!(error, E::DuplicateMappingKey { .. });
                let column = if on_key {
                    // Just past the key's colon, so `key_at` finds it.
                    doc.get((line as usize).saturating_sub(1))
                        .and_then(|l| l.find(": ").or_else(|| l.rfind(':')))
                        .map(|c| c as u64 + 2)
                        .unwrap_or(column)
                } else {
                    column
                };
                key_at(&doc, line, column)
            }
            _ => None,
        };
        let Some(key) = key.filter(|k| k.line >= start && k.line < end) else {
            break;
        };
        let indent = indentation(doc[key.line]);
        let mut last = key.line;
        while last + 1 < doc.len() {
            let next = doc[last + 1];
            if next.trim().is_empty() || indentation(next) > indent {
                last += 1;
            } else {
                break;
            }
        }
        let parent = (start..key.line)
            .rev()
            .find(|&i| !doc[i].trim().is_empty() && indentation(doc[i]) < indent);
        if let Some(parent) = parent {
            shadows.push(parent..=last + 1);
        }
        removed.push(key.name);
        for l in &mut doc[key.line..=last] {
            *l = "";
        }
    }
    Parsed {
        value: None,
        problems,
        text: original,
    }
}

/// How far the key path `keys` is written in lines `start..=end` of
/// `text` (block-style YAML, searched as text; a flow map on a matched key's
/// line counts for the rest): the number of keys matched and the line of the
/// last one matched (`start` when none).
pub(crate) fn find_key(text: &str, keys: &[&str], (start, end): (usize, usize)) -> (usize, u64) {
    let mut matched = 0;
    let mut line_of_last = start as u64;
    // Indentation of the last matched key, and of its children once seen.
    let mut parent: Option<usize> = None;
    let mut child: Option<usize> = None;
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        if number < start || number > end || matched == keys.len() {
            continue;
        }
        let content = line.trim_start();
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        let indent = line.len() - content.len();
        if let Some(p) = parent
            && indent <= p
        {
            break; // left the block of the last matched key
        }
        let level = match (parent, child) {
            (None, _) => 0,
            (Some(_), Some(c)) => c,
            (Some(_), None) => {
                child = Some(indent);
                indent
            }
        };
        if indent != level {
            continue;
        }
        let Some(rest) = key_rest(content, keys[matched]) else {
            continue;
        };
        matched += 1;
        line_of_last = number as u64;
        parent = Some(indent);
        child = None;
        // A flow map on the same line: take its line for the remaining keys.
        if rest.trim_start().starts_with('{')
            && keys[matched..]
                .iter()
                .all(|k| rest.contains(&format!("{k}:")))
        {
            matched = keys.len();
        }
    }
    (matched, line_of_last)
}

/// `key: rest` (the key plain or quoted): the text after the colon.
fn key_rest<'a>(content: &'a str, key: &str) -> Option<&'a str> {
    for quoted in [key.to_string(), format!("\"{key}\""), format!("'{key}'")] {
        if let Some(rest) = content.strip_prefix(&quoted)
            && let Some(rest) = rest.strip_prefix(':')
            && (rest.is_empty() || rest.starts_with(' '))
        {
            return Some(rest);
        }
    }
    None
}

/// The first line holding YAML content (not blank, not a comment, not a
/// `---`): where a document that is the wrong kind of thing starts.
pub(crate) fn first_content_line(text: &str) -> u64 {
    text.lines()
        .position(|l| {
            let t = l.trim();
            !t.is_empty() && !t.starts_with('#') && t != "---"
        })
        .map_or(1, |i| i as u64 + 1)
}

/// What a YAML value is, in words: `a list`, `a string`, …
pub(crate) fn kind_of(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "nothing",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "a map",
    }
}

/// The line where the key path `keys` is written in `text`, if it is.
pub(crate) fn key_line(text: &str, keys: &[&str]) -> Option<u64> {
    let lines = text.lines().count().max(1);
    let (matched, line) = find_key(text, keys, (1, lines));
    (matched == keys.len()).then_some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every document of a multi-document text, errors in our words.
    fn documents<T: DeserializeOwned>(text: &str, file: &Path) -> Result<Vec<T>, Problem> {
        serde_saphyr::from_multiple::<T>(text).map_err(|e| problem(&e, file, text))
    }

    #[test]
    fn keys_and_content_are_found_by_line() {
        let text =
            "# c\nname: infra\noverrides:\n  cilium:\n    values: {}\n  typo:\n    timeout: 1m\n";
        assert_eq!(key_line(text, &["overrides", "typo"]), Some(6));
        assert_eq!(key_line(text, &["overrides", "nope"]), None);
        assert_eq!(first_content_line("# c\n\n---\n- a\n"), 4);
        assert_eq!(kind_of(&serde_json::json!([1])), "a list");
    }

    #[test]
    fn limits_read_in_words_and_manifests_may_be_large() {
        let many = "a: 1\n---\n".repeat(1100);
        let problem = documents::<serde_json::Value>(&many, Path::new("r.yaml")).unwrap_err();
        assert_eq!(
            problem.message,
            "holds more than 1024 YAML documents, more than bootstrap reads; split it into smaller files"
        );
        assert_eq!(manifests(&many, Path::new("m.yaml")).unwrap().len(), 1100);
    }
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Doc {
        name: String,
        values_files: Option<Vec<String>>,
    }

    #[test]
    fn unknown_key_suggests_the_closest() {
        let err = documents::<Doc>("name: a\nvaluesFile: [x]\n", Path::new("r.yaml")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "r.yaml:2:1: unknown key `valuesFile`; did you mean `valuesFiles`?"
        );
    }

    #[test]
    fn missing_key_is_named() {
        let err = documents::<Doc>("---\nvaluesFiles: []\n", Path::new("r.yaml")).unwrap_err();
        assert!(
            err.to_string().contains("missing required key `name`"),
            "{err}"
        );
    }

    #[test]
    fn syntax_error_has_a_location() {
        let err = documents::<Doc>("name: [a\n", Path::new("r.yaml")).unwrap_err();
        assert_eq!(err.line, Some(1));
    }

    #[test]
    fn empty_documents_are_skipped() {
        let docs = manifests("---\n---\na: 1\n---\n", Path::new("m.yaml")).unwrap();
        assert_eq!(docs.len(), 1);
    }
}

#[cfg(test)]
mod repair_tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Doc {
        name: String,
        #[serde(default)]
        needs: Vec<String>,
        #[serde(default)]
        wait: bool,
    }

    #[test]
    fn the_key_of_a_value_is_found_on_its_line_or_above() {
        let lines = ["name: a", "needs: b # why", "values:", "  x: [1]"];
        let key = key_at(&lines, 2, 8).unwrap();
        assert_eq!((key.name.as_str(), key.line), ("needs", 1));
        assert_eq!(key.scalar.as_deref(), Some("b"));
        let key = key_at(&lines, 4, 3).unwrap();
        assert_eq!((key.name.as_str(), key.scalar), ("values", None));
    }

    #[test]
    fn each_broken_key_and_document_is_reported_in_place() {
        let text =
            "name: a\nnedds: [b]\nwait: maybe\n---\n# only a comment\n---\nname: c\nneeds: d\n";
        let docs = each_document::<Doc>(text, Path::new("r.yaml"));
        let shown: Vec<Vec<String>> = docs
            .iter()
            .map(|d| d.problems.iter().map(ToString::to_string).collect())
            .collect();
        assert_eq!(
            shown,
            [
                vec![
                    "r.yaml:2:1: unknown key `nedds`; did you mean `needs`?".to_string(),
                    "r.yaml:3:7: `wait: maybe` must be `true` or `false`".to_string(),
                ],
                vec!["r.yaml:8:8: `needs` must be a list, like `needs: [d]`".to_string()],
            ]
        );
        assert_eq!(docs[1].value.as_ref().unwrap().name, "c");
    }

    #[test]
    fn a_key_taken_out_is_not_reported_missing() {
        let docs = each_document::<Doc>("name: [a\nwait: true\n", Path::new("r.yaml"));
        assert_eq!(docs.len(), 1);
        assert_eq!(docs[0].problems.len(), 1, "{:?}", docs[0].problems);
        assert!(docs[0].value.is_none());
    }
}
