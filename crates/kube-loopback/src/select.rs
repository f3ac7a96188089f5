//! Label and field selectors, in the string forms clients put on the query.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Term {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selector {
    labels: Vec<Term>,
    /// Field terms name a dotted path into the object, e.g. `metadata.name`.
    fields: Vec<Term>,
}

/// Splits on commas that are not inside `in (a,b)` parentheses.
fn split_terms(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect()
}

fn parse_set(s: &str) -> Option<Vec<String>> {
    let inner = s.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

fn parse_term(t: &str) -> Result<Term, String> {
    let bad = || format!("unable to parse requirement: {t:?}");
    if let Some((k, v)) = t.split_once("!=") {
        return Ok(Term::NotEq(k.trim().into(), v.trim().into()));
    }
    if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
        return Ok(Term::Eq(k.trim().into(), v.trim().into()));
    }
    if let Some((k, set)) = t.split_once(" notin ") {
        return Ok(Term::NotIn(
            k.trim().into(),
            parse_set(set).ok_or_else(bad)?,
        ));
    }
    if let Some((k, set)) = t.split_once(" in ") {
        return Ok(Term::In(k.trim().into(), parse_set(set).ok_or_else(bad)?));
    }
    if let Some(k) = t.strip_prefix('!') {
        return Ok(Term::NotExists(k.trim().into()));
    }
    if t.contains(|c: char| c.is_whitespace() || c == '(' || c == ')') {
        return Err(bad());
    }
    Ok(Term::Exists(t.into()))
}

impl Selector {
    pub fn parse(
        label_selector: Option<&str>,
        field_selector: Option<&str>,
    ) -> Result<Self, String> {
        let parse_all = |s: Option<&str>| -> Result<Vec<Term>, String> {
            split_terms(s.unwrap_or(""))
                .into_iter()
                .map(parse_term)
                .collect()
        };
        Ok(Selector {
            labels: parse_all(label_selector)?,
            fields: parse_all(field_selector)?,
        })
    }

    pub fn matches(&self, obj: &Value) -> bool {
        let label = |k: &str| {
            obj.pointer("/metadata/labels")
                .and_then(|l| l.get(k))
                .and_then(Value::as_str)
        };
        let field = |k: &str| {
            let ptr = format!("/{}", k.replace('.', "/"));
            obj.pointer(&ptr).map(|v| {
                v.as_str()
                    .map(String::from)
                    .unwrap_or_else(|| v.to_string())
            })
        };
        self.labels
            .iter()
            .all(|t| holds(t, |k| label(k).map(String::from)))
            && self
                .fields
                .iter()
                .all(|t| holds(t, |k| Some(field(k).unwrap_or_default())))
    }
}

fn holds(term: &Term, lookup: impl Fn(&str) -> Option<String>) -> bool {
    match term {
        Term::Eq(k, v) => lookup(k).as_deref() == Some(v.as_str()),
        Term::NotEq(k, v) => lookup(k).as_deref() != Some(v.as_str()),
        Term::In(k, set) => lookup(k).is_some_and(|v| set.contains(&v)),
        Term::NotIn(k, set) => lookup(k).is_none_or(|v| !set.contains(&v)),
        Term::Exists(k) => lookup(k).is_some(),
        Term::NotExists(k) => lookup(k).is_none(),
    }
}
