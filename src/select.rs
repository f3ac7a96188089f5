//! `--selector/-l` on release labels, in helmfile's syntax
//! (docs/design.md#selection): `key=value` and `key!=value`, a comma
//! between them meaning AND, several `-l` meaning OR. Every release also
//! carries the labels `name`, `namespace` and `chart`, as in helmfile.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    key: String,
    equal: bool,
    value: String,
}

/// One `-l` argument: every term must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    text: String,
    terms: Vec<Term>,
}

impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl Selector {
    pub fn parse(text: &str) -> Result<Selector, SelectorError> {
        let mut terms = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            let (key, equal, value) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(SelectorError::NotATerm(part.to_string()));
            };
            let (key, value) = (key.trim(), value.trim());
            if key.is_empty() {
                return Err(SelectorError::NoKey(part.to_string()));
            }
            terms.push(Term {
                key: key.to_string(),
                equal,
                value: value.to_string(),
            });
        }
        Ok(Selector {
            text: text.to_string(),
            terms,
        })
    }

    /// Whether a release with `labels` is selected. `key!=value` holds when
    /// the label is missing, as in helmfile.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.terms.iter().all(|t| {
            let found = labels.get(&t.key).map(String::as_str);
            (found == Some(t.value.as_str())) == t.equal
        })
    }
}

/// Why a `-l` argument is not a selector.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error(
        "`{0}` is not `key=value` or `key!=value` (a comma between terms means AND; repeat -l for OR)"
    )]
    NotATerm(String),
    #[error("`{0}` has no label key before `=`")]
    NoKey(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn comma_is_and_not_equal_holds_when_missing() {
        let cni = labels(&[("tier", "network"), ("name", "cilium")]);
        let dns = labels(&[("tier", "network"), ("name", "coredns")]);
        let s = Selector::parse("tier=network,name!=cilium").unwrap();
        assert!(!s.matches(&cni));
        assert!(s.matches(&dns));
        assert!(Selector::parse("team!=x").unwrap().matches(&cni));
        assert!(!Selector::parse("team=x").unwrap().matches(&cni));
    }

    #[test]
    fn malformed_selectors_say_the_syntax() {
        assert_eq!(
            Selector::parse("tier"),
            Err(SelectorError::NotATerm("tier".into()))
        );
        assert!(Selector::parse("=x").is_err());
        assert!(
            Selector::parse("a=")
                .unwrap()
                .matches(&labels(&[("a", "")]))
        );
    }
}
