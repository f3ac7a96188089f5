//! Which scalars a YAML document writes quoted (`'…'`, `"…"`) or as a block
//! (`|`, `>`): kustomize keeps each field's style (kyaml), and a
//! strategic-merge patch writes its value with the style of the field it
//! replaces (kyaml `FieldSetter` keeps "the original style"), so a number
//! patched onto a quoted string is printed quoted and applied as a string.
//! The JSON values the scan holds lose the style; this keeps it beside them
//! as the JSON pointers of those scalars.

use std::collections::BTreeSet;

use granit_parser::{Event, Parser, ScalarStyle};

/// An open collection: a mapping (`None` while a key is awaited, else the
/// key whose value comes next) or a sequence (the next index).
enum Open {
    Map(Option<String>),
    Seq(usize),
}

/// The scalars of one document whose style kustomize keeps, as JSON
/// pointers (map values and sequence items).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Styles {
    /// Written quoted or as blocks.
    pub quoted: BTreeSet<String>,
    /// Nulls written as nothing (`key:`), which kyaml's strategic merge
    /// drops (see [`crate::flux::kustomize::strategic_merge_styled`]); a
    /// null written `null` or `~` is kept.
    pub bare_nulls: BTreeSet<String>,
}

impl Styles {
    /// The styles of the item at `prefix` (a pointer) of the document.
    pub fn under(&self, prefix: &str) -> Styles {
        let under = |set: &BTreeSet<String>| {
            set.iter()
                .filter_map(|p| p.strip_prefix(prefix))
                .filter(|p| p.starts_with('/'))
                .map(str::to_string)
                .collect()
        };
        Styles {
            quoted: under(&self.quoted),
            bare_nulls: under(&self.bare_nulls),
        }
    }
}

/// The quoted or block scalars of each document of `text` (map values and
/// sequence items, as JSON pointers), in document order; empty where the
/// text does not parse.
pub fn quoted_scalars(text: &str) -> Vec<BTreeSet<String>> {
    styles(text).into_iter().map(|s| s.quoted).collect()
}

/// The [`Styles`] of each document of `text`, in document order; empty
/// where the text does not parse.
pub fn styles(text: &str) -> Vec<Styles> {
    let mut docs = Vec::new();
    let mut stack: Vec<Open> = Vec::new();
    let mut path: Vec<String> = Vec::new();
    let mut current = Styles::default();
    for event in Parser::new_from_str(text) {
        let Ok((event, span)) = event else {
            return Vec::new();
        };
        match event {
            Event::DocumentStart(..) => {
                stack.clear();
                path.clear();
                current = Styles::default();
            }
            Event::DocumentEnd => docs.push(std::mem::take(&mut current)),
            Event::Scalar(value, style, _, tag) => {
                if let Some(Open::Map(key @ None)) = stack.last_mut() {
                    *key = Some(value.into_owned());
                    continue;
                }
                enter(&mut stack, &mut path);
                // go-yaml v3: a value written as nothing (this parser gives
                // it as `~` spanning no text), or only as `!!null`, is a null
                // node whose value is "".
                let null_tag = tag
                    .as_deref()
                    .is_none_or(|t| t.is_yaml_core_schema() && t.suffix() == "null");
                let bare_null = style == ScalarStyle::Plain && span.is_empty() && null_tag;
                if bare_null && !stack.is_empty() {
                    current.bare_nulls.insert(pointer(&path));
                } else if style != ScalarStyle::Plain && !stack.is_empty() {
                    current.quoted.insert(pointer(&path));
                }
                leave(&mut stack, &mut path);
            }
            Event::Alias(..) => {
                if let Some(Open::Map(key @ None)) = stack.last_mut() {
                    *key = Some(String::new());
                    continue;
                }
                enter(&mut stack, &mut path);
                leave(&mut stack, &mut path);
            }
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                if let Some(Open::Map(key @ None)) = stack.last_mut() {
                    // A collection as a key: not a field kustomize patches.
                    *key = Some(String::new());
                }
                enter(&mut stack, &mut path);
                stack.push(if matches!(event, Event::MappingStart(..)) {
                    Open::Map(None)
                } else {
                    Open::Seq(0)
                });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
                leave(&mut stack, &mut path);
            }
            _ => {}
        }
    }
    docs
}

/// A node starts in the open collection: its step joins the path.
fn enter(stack: &mut [Open], path: &mut Vec<String>) {
    match stack.last_mut() {
        Some(Open::Map(Some(k))) => path.push(k.clone()),
        Some(Open::Seq(i)) => {
            path.push(i.to_string());
            *i += 1;
        }
        _ => {}
    }
}

/// A node ended: its step leaves the path, a mapping awaits its next key.
fn leave(stack: &mut [Open], path: &mut Vec<String>) {
    match stack.last_mut() {
        Some(Open::Map(key @ Some(_))) => {
            *key = None;
            path.pop();
        }
        Some(Open::Seq(_)) => {
            path.pop();
        }
        _ => {}
    }
}

fn pointer(path: &[String]) -> String {
    path.iter()
        .map(|p| format!("/{}", p.replace('~', "~0").replace('/', "~1")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_and_block_scalars_by_pointer() {
        let docs = quoted_scalars(
            "a: \"x\"\nb: y\nc:\n  d: '1'\n  e: [\"f\", g]\nh: |\n  text\n---\nk: \"v\"\n",
        );
        let want = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(docs, [want(&["/a", "/c/d", "/c/e/0", "/h"]), want(&["/k"])]);
    }

    #[test]
    fn nulls_written_as_nothing_by_pointer() {
        let docs = styles(
            "a:
b: null
c: ~
d:
  e:
  f: !!null
  g: !!str
h: [1, ]
i:
  -
",
        );
        let want = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(docs[0].bare_nulls, want(&["/a", "/d/e", "/d/f", "/i/0"]));
        assert_eq!(docs[0].quoted, want(&[]));
    }
}
