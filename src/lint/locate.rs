//! Where a value is written: the file and line of a key of a release's
//! merged values (docs/design.md#lints).
//!
//! Approximated: the sources are searched as text, not re-parsed. The last
//! source (in merge order) that writes the whole key path wins; a key is
//! matched at the indentation of its parent's first child, so block-style
//! YAML is located exactly; in a flow map (`crds: { enabled: true }`) the
//! line of the flow map is taken; keys spelled through templates are not
//! seen. When no source writes the key, the line of the deepest parent key
//! found is used, and failing that the release's `name:` line.

use std::path::PathBuf;

use crate::release::Release;
use crate::values::stack::ValuesSource;
use crate::yaml::find_key as find;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Location {
    /// As errors show it: relative to `--dir` as typed.
    pub file: PathBuf,
    pub line: u64,
}

/// The best location of `path` (a key path into the release's values).
pub(crate) fn locate(release: &Release, path: &[&str]) -> Location {
    let mut best: Option<(usize, Location)> = None;
    for source in release.stack.sources().rev() {
        let Ok(text) = std::fs::read_to_string(&source.path) else {
            continue;
        };
        let mut keys: Vec<&str> = source.prefix.iter().map(String::as_str).collect();
        let prefix = keys.len();
        keys.extend_from_slice(path);
        let (matched, line) = find(&text, &keys, document(&text, source));
        if matched == keys.len() {
            return Location {
                file: source.shown.clone(),
                line,
            };
        }
        if matched > prefix && best.as_ref().is_none_or(|(m, _)| matched - prefix > *m) {
            best = Some((
                matched - prefix,
                Location {
                    file: source.shown.clone(),
                    line,
                },
            ));
        }
    }
    best.map(|(_, l)| l).unwrap_or_else(|| Location {
        file: release.file.clone(),
        line: release.line,
    })
}

/// The 1-based line range of the YAML document holding `source.document_line`.
fn document(text: &str, source: &ValuesSource) -> (usize, usize) {
    let lines: Vec<&str> = text.lines().collect();
    let Some(at) = source.document_line else {
        return (1, lines.len());
    };
    let at = at as usize;
    let is_separator = |l: &&str| l.trim_end() == "---" || l.starts_with("--- ");
    let start = lines
        .iter()
        .enumerate()
        .take(at.saturating_sub(1))
        .rev()
        .find(|(_, l)| is_separator(l))
        .map(|(i, _)| i + 2)
        .unwrap_or(1);
    let end = lines
        .iter()
        .enumerate()
        .skip(at)
        .find(|(_, l)| is_separator(l))
        .map(|(i, _)| i)
        .unwrap_or(lines.len());
    (start, end)
}

/// How many keys of `keys` were found in order, and the line of the last one.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nested_keys_at_the_child_level() {
        let text = "a:\n  x:\n    b: 1\n  b:\n    c: 2\n";
        assert_eq!(find(text, &["a", "b", "c"], (1, 5)), (3, 5));
        assert_eq!(find(text, &["a", "b", "d"], (1, 5)), (2, 4));
        assert_eq!(find(text, &["b"], (1, 5)), (0, 1));
    }

    #[test]
    fn flow_maps_and_quoted_keys() {
        let text = "crds: { enabled: true }\n\"io.cilium/x\": 1\n";
        assert_eq!(find(text, &["crds", "enabled"], (1, 2)), (2, 1));
        assert_eq!(find(text, &["io.cilium/x"], (1, 2)), (1, 2));
    }

    #[test]
    fn only_the_release_document() {
        let text = "name: a\nvalues:\n  k: 1\n---\nname: b\nvalues:\n  k: 2\n";
        let source = |line| ValuesSource {
            path: PathBuf::new(),
            shown: PathBuf::new(),
            prefix: vec![],
            document_line: Some(line),
        };
        let doc = document(text, &source(5));
        assert_eq!(doc, (5, 7));
        assert_eq!(find(text, &["values", "k"], doc), (2, 7));
        assert_eq!(
            find(text, &["values", "k"], document(text, &source(1))),
            (2, 3)
        );
    }
}
