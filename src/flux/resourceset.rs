//! flux-operator ResourceSets, expanded offline.
//!
//! controlplaneio-fluxcd/flux-operator `internal/builder/resourceset.go`
//! (`BuildResourceSet`): every entry of `spec.resources` (and the documents
//! of `spec.resourcesTemplate`) is rendered once per input set as a Go
//! `text/template` with `<<`/`>>` delimiters, `inputs` as a function
//! returning the input set, `missingkey=error`; objects annotated
//! `fluxcd.controlplane.io/reconcile: disabled` are dropped, duplicates
//! (group, kind, namespace, name) kept once. With no inputs each resource is
//! rendered once. Input sets (`internal/controller/resourceset_controller.go`
//! `getInputs`, `internal/inputs/combine.go`): the ResourceSet's own
//! `spec.inputs`, then each `inputsFrom` provider (same namespace, sorted),
//! each input given a `provider` map; `Flatten` concatenates them.
//!
//! Modelled template actions: `inputs.a.b` paths, string/number literals and
//! the functions `quote`, `squote`, `default`, `lower`, `upper`, `trim`,
//! `trimPrefix`, `trimSuffix`, `replace`, `toString`, `slugify`, in calls and
//! pipelines. Anything else (`if`, `range`, other functions) is reported as
//! not modelled. `ResourceSetInputProvider`s are resolved only for
//! `type: Static` (`spec.defaultValues`); the others read the cluster or an
//! external API.

use std::io::Read;
use std::sync::OnceLock;

use serde_json::{Map, Value};

use super::object::Object;

/// The objects a ResourceSet generates, and what could not be modelled.
#[derive(Debug, Default)]
pub struct Expansion {
    pub objects: Vec<Value>,
    pub problems: Vec<String>,
}

pub fn is_resource_set(obj: &Object) -> bool {
    obj.group() == "fluxcd.controlplane.io" && obj.kind == "ResourceSet"
}

/// Expands `rs`; `providers` are the scanned ResourceSetInputProviders.
pub fn expand(rs: &Object, providers: &[&Object]) -> Expansion {
    let mut out = Expansion::default();
    let spec = rs.body.get("spec").cloned().unwrap_or(Value::Null);
    let inputs = input_sets(rs, &spec, providers, &mut out.problems);
    let groups = resource_groups(&spec);
    let sets: Vec<Option<&Map<String, Value>>> = if inputs.is_empty() {
        vec![None]
    } else {
        inputs.iter().map(Some).collect()
    };
    let mut keys = std::collections::HashSet::new();
    for (resources, template) in groups {
        for resource in &resources {
            for set in &sets {
                let mut rendered = resource.clone();
                match render_value(&mut rendered, *set) {
                    Ok(()) => push(&mut out, &mut keys, rendered),
                    Err(e) => out.problems.push(e.to_string()),
                }
            }
        }
        if let Some(template) = &template {
            for set in &sets {
                match render(template, *set) {
                    Ok(text) => match serde_saphyr::from_multiple::<Value>(&text) {
                        Ok(docs) => {
                            for doc in docs.into_iter().filter(|d| !d.is_null()) {
                                push(&mut out, &mut keys, doc);
                            }
                        }
                        Err(e) => out.problems.push(format!(
                            "resourcesTemplate does not render to YAML: {}",
                            e.without_snippet()
                        )),
                    },
                    Err(e) => out.problems.push(e.to_string()),
                }
            }
        }
    }
    out
}

/// The input sets a ResourceSet renders with: its own `spec.inputs`, then
/// each `inputsFrom` provider's (Static ones only), flattened; what cannot
/// be known offline goes to `problems`.
fn input_sets(
    rs: &Object,
    spec: &Value,
    providers: &[&Object],
    problems: &mut Vec<String>,
) -> Vec<Map<String, Value>> {
    let mut inputs: Vec<Map<String, Value>> = Vec::new();
    let provider_map = |obj: &Object| {
        serde_json::json!({"apiVersion": obj.api_version, "kind": obj.kind, "name": obj.name,
                           "namespace": obj.namespace.clone().unwrap_or_default()})
    };
    for input in spec
        .get("inputs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let mut map = input.as_object().cloned().unwrap_or_default();
        map.insert("provider".into(), provider_map(rs));
        inputs.push(map);
    }
    let mut resolved: Vec<&Object> = Vec::new();
    for source in spec
        .get("inputsFrom")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(name) = source.get("name").and_then(Value::as_str) else {
            problems.push(format!(
                "inputsFrom selects providers by label ({}); the providers that exist in the cluster are not known",
                source.get("selector").unwrap_or(&Value::Null)
            ));
            continue;
        };
        match providers
            .iter()
            .find(|p| p.name == name && p.namespace == rs.namespace)
        {
            Some(p) if !resolved.iter().any(|r| std::ptr::eq(*r, *p)) => resolved.push(p),
            Some(_) => {}
            None => problems.push(format!(
                "inputsFrom ResourceSetInputProvider `{name}` is not in the scanned tree"
            )),
        }
    }
    resolved.sort_by(|a, b| a.name.cmp(&b.name));
    for p in &resolved {
        let kind = p.body.pointer("/spec/type").and_then(Value::as_str);
        if kind != Some("Static") {
            problems.push(format!(
                "ResourceSetInputProvider `{}` has type `{}`; its inputs come from the cluster or an external API",
                p.name,
                kind.unwrap_or("<none>")
            ));
            continue;
        }
        let mut map = p
            .body
            .pointer("/spec/defaultValues")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        map.insert("provider".into(), provider_map(p));
        inputs.push(map);
    }
    let strategy = spec
        .pointer("/inputStrategy/name")
        .and_then(Value::as_str)
        .unwrap_or("Flatten");
    if strategy != "Flatten" {
        problems.push(format!(
            "inputStrategy `{strategy}` is not modelled; inputs are flattened"
        ));
    }
    inputs
}

/// `spec.resources` with `spec.resourcesTemplate`, then each step's.
fn resource_groups(spec: &Value) -> Vec<(Vec<Value>, Option<String>)> {
    let mut groups: Vec<(Vec<Value>, Option<String>)> = vec![(
        spec.get("resources")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        spec.get("resourcesTemplate")
            .and_then(Value::as_str)
            .map(str::to_string),
    )];
    for step in spec
        .get("steps")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        groups.push((
            step.get("resources")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            step.get("resourcesTemplate")
                .and_then(Value::as_str)
                .map(str::to_string),
        ));
    }
    groups
}

fn push(out: &mut Expansion, keys: &mut std::collections::HashSet<String>, obj: Value) {
    let text = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or_default();
    if text("/metadata/annotations/fluxcd.controlplane.io~1reconcile") == "disabled" {
        return;
    }
    let group = text("/apiVersion").rsplit_once('/').map_or("", |(g, _)| g);
    let key = format!(
        "{group}/{}/{}/{}",
        text("/kind"),
        text("/metadata/namespace"),
        text("/metadata/name")
    );
    if keys.insert(key) {
        out.objects.push(obj);
    }
}

/// Why a template cannot be rendered here: flux-operator fails on it, or it
/// uses what this scan does not model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("unterminated template action in `{text}`")]
    Unterminated { text: String },
    #[error("empty command in `<< {action} >>`")]
    EmptyCommand { action: String },
    #[error("`<< {action} >>`: function `{function}` with these arguments is not modelled")]
    Function { action: String, function: String },
    #[error("`<< {action} >>` is not modelled")]
    Action { action: String },
    /// A control action (`if`, `range`, …): what it encloses is rendered
    /// conditionally or repeatedly.
    #[error(
        "`<< {action} >>`, a text/template `{keyword}` action, is not modelled: the resources it makes conditional or repeats are not known"
    )]
    Control { action: String, keyword: String },
    #[error("parenthesised template expressions in `{command}` are not modelled")]
    Parenthesised { command: String },
    /// `missingkey=error`: flux-operator fails on it too.
    #[error("template: map has no entry for key \"{key}\" (inputs{path})")]
    MissingKey { key: String, path: String },
    #[error("template operand `{token}` is not modelled")]
    Operand { token: String },
}

/// Renders every string (keys and values) of a structured resource; a
/// rendered scalar is re-read as YAML, as the controller renders YAML text.
fn render_value(
    value: &mut Value,
    inputs: Option<&Map<String, Value>>,
) -> Result<(), TemplateError> {
    match value {
        Value::String(s) if s.contains("<<") => {
            let text = render(s, inputs)?;
            *value = match serde_saphyr::from_str::<Value>(&text) {
                Ok(v @ (Value::String(_) | Value::Number(_) | Value::Bool(_))) => v,
                _ => Value::String(text),
            };
        }
        Value::Array(items) => {
            for item in items {
                render_value(item, inputs)?;
            }
        }
        Value::Object(map) => {
            let old = std::mem::take(map);
            for (k, mut v) in old {
                let k = if k.contains("<<") {
                    render(&k, inputs)?
                } else {
                    k
                };
                render_value(&mut v, inputs)?;
                map.insert(k, v);
            }
        }
        _ => {}
    }
    Ok(())
}

/// Renders `<< … >>` actions in `text`.
pub fn render(text: &str, inputs: Option<&Map<String, Value>>) -> Result<String, TemplateError> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("<<") {
        let mut before = &rest[..start];
        let after = &rest[start + 2..];
        let end = after
            .find(">>")
            .ok_or_else(|| TemplateError::Unterminated { text: text.into() })?;
        let mut action = &after[..end];
        let mut tail = &after[end + 2..];
        if let Some(a) = action.strip_prefix("- ") {
            before = before.trim_end();
            action = a;
        }
        if let Some(a) = action.strip_suffix(" -") {
            tail = tail.trim_start();
            action = a;
        }
        out.push_str(before);
        out.push_str(&eval(action.trim(), inputs)?);
        rest = tail;
    }
    out.push_str(rest);
    Ok(out)
}

fn eval(action: &str, inputs: Option<&Map<String, Value>>) -> Result<String, TemplateError> {
    if action.starts_with("/*") {
        return Ok(String::new());
    }
    let mut piped: Option<Value> = None;
    for command in split_outside_quotes(action, '|') {
        let tokens = tokens(command.trim())?;
        let Some((head, args)) = tokens.split_first() else {
            return Err(TemplateError::EmptyCommand {
                action: action.into(),
            });
        };
        if CONTROL.contains(&head.as_str()) {
            return Err(TemplateError::Control {
                action: action.into(),
                keyword: head.clone(),
            });
        }
        let mut values = args
            .iter()
            .map(|t| operand(t, inputs))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(p) = piped.take() {
            values.push(p);
        }
        let result = if is_function(head) {
            call(head, &values).ok_or_else(|| TemplateError::Function {
                action: action.into(),
                function: head.clone(),
            })?
        } else if values.is_empty() {
            operand(head, inputs)?
        } else {
            return Err(TemplateError::Action {
                action: action.into(),
            });
        };
        piped = Some(result);
    }
    Ok(piped.map(|v| to_text(&v)).unwrap_or_default())
}

/// text/template's control actions.
const CONTROL: [&str; 9] = [
    "if", "else", "end", "range", "with", "define", "template", "block", "break",
];

fn split_outside_quotes(text: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut quoted = None;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match (quoted, c) {
            (None, '"' | '`') => quoted = Some(c),
            (Some(q), c) if c == q => quoted = None,
            (None, c) if c == sep => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn tokens(command: &str) -> Result<Vec<String>, TemplateError> {
    let mut out = Vec::new();
    let mut chars = command.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '"' || c == '`' {
            chars.next();
            let mut s = String::from("\"");
            let mut escaped = false;
            for c in chars.by_ref() {
                if escaped {
                    s.push(c);
                    escaped = false;
                } else if c == '\\' && c != '`' {
                    escaped = true;
                } else if c == '"' || c == '`' {
                    break;
                } else {
                    s.push(c);
                }
            }
            out.push(s);
        } else if c == '(' {
            return Err(TemplateError::Parenthesised {
                command: command.into(),
            });
        } else {
            let mut s = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                s.push(c);
                chars.next();
            }
            out.push(s);
        }
    }
    Ok(out)
}

fn operand(token: &str, inputs: Option<&Map<String, Value>>) -> Result<Value, TemplateError> {
    if let Some(s) = token.strip_prefix('"') {
        return Ok(Value::String(s.to_string()));
    }
    if let Ok(n) = token.parse::<i64>() {
        return Ok(Value::from(n));
    }
    if let Some(path) = token.strip_prefix("inputs") {
        let empty = Map::new();
        let mut at = Value::Object(inputs.unwrap_or(&empty).clone());
        for key in path.split('.').filter(|k| !k.is_empty()) {
            at = at
                .get(key)
                .cloned()
                .ok_or_else(|| TemplateError::MissingKey {
                    key: key.into(),
                    path: path.into(),
                })?;
        }
        return Ok(at);
    }
    Err(TemplateError::Operand {
        token: token.into(),
    })
}

fn is_function(name: &str) -> bool {
    matches!(
        name,
        "quote"
            | "squote"
            | "default"
            | "lower"
            | "upper"
            | "trim"
            | "trimPrefix"
            | "trimSuffix"
            | "replace"
            | "toString"
            | "slugify"
    ) || !(name.starts_with("inputs") || name.starts_with('"') || name.parse::<i64>().is_ok())
}

fn call(name: &str, args: &[Value]) -> Option<Value> {
    let s = |i: usize| args.get(i).map(to_text);
    let text = match (name, args.len()) {
        ("quote", 1) => format!("{:?}", s(0)?),
        ("squote", 1) => format!("'{}'", s(0)?),
        ("default", 2) => {
            let empty = match &args[1] {
                Value::Null => true,
                Value::String(v) => v.is_empty(),
                Value::Bool(b) => !b,
                Value::Array(a) => a.is_empty(),
                Value::Object(o) => o.is_empty(),
                Value::Number(n) => n.as_f64() == Some(0.0),
            };
            return Some(if empty {
                args[0].clone()
            } else {
                args[1].clone()
            });
        }
        ("lower", 1) => s(0)?.to_lowercase(),
        ("upper", 1) => s(0)?.to_uppercase(),
        ("trim", 1) => s(0)?.trim().to_string(),
        ("trimPrefix", 2) => {
            let v = s(1)?;
            v.strip_prefix(&s(0)?).unwrap_or(&v).to_string()
        }
        ("trimSuffix", 2) => {
            let v = s(1)?;
            v.strip_suffix(&s(0)?).unwrap_or(&v).to_string()
        }
        ("replace", 3) => s(2)?.replace(&s(0)?, &s(1)?),
        ("toString", 1) => s(0)?,
        ("slugify", 1) => slugify(&s(0)?)?,
        _ => return None,
    };
    Some(Value::String(text))
}

/// gosimple/slug `Make` as flux-operator configures it (`MaxLength` 63,
/// smart truncation): trimmed; `"`, `'`, `’` dropped, dashes made `-`, `&`
/// `and`, `@` `at`; transliterated by gosimple/unidecode (here for Latin
/// text up to U+024F: `None` for anything beyond, which is reported as not
/// modelled); lower case; runs of anything but letters, digits, `-` and `_`
/// become one `-`; `-` and `_` trimmed; cut at the last `-` within 63
/// characters.
fn slugify(s: &str) -> Option<String> {
    let mut ascii = String::new();
    for c in s.trim().chars() {
        match c {
            '"' | '\'' | '\u{2019}' => {}
            '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2015}' => ascii.push('-'),
            '&' => ascii.push_str("and"),
            '@' => ascii.push_str("at"),
            c if c.is_ascii() => ascii.push(c),
            c => ascii.push_str(unidecode(c)),
        }
    }
    let mut out = String::new();
    for c in ascii.to_lowercase().chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_matches(['-', '_']);
    if out.len() <= 63 {
        return Some(out.to_string());
    }
    let cut = (0..=63)
        .rev()
        .find(|&i| out.as_bytes()[i] == b'-')
        .unwrap_or(63);
    Some(out[..cut].to_string())
}

fn to_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "<no value>".into(),
        other => other.to_string(),
    }
}

/// gosimple/unidecode's transliteration of every code point of the Basic
/// Multilingual Plane from U+0080 (it keeps ASCII and drops the rest):
/// `unidecode.bin`, written by running gosimple/unidecode v1.0.1, the
/// version flux-operator pins, on each (tools/unidecode-table). For each
/// code point in order, zlib-compressed: a length byte, that many bytes.
fn unidecode_table() -> &'static [String] {
    static TABLE: OnceLock<Vec<String>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut raw = Vec::new();
        // The table ships in the binary: it always inflates.
        let _ = flate2::read::ZlibDecoder::new(&include_bytes!("unidecode.bin")[..])
            .read_to_end(&mut raw);
        let mut table = Vec::with_capacity(0x10000 - 0x80);
        let mut at = 0;
        while let Some(&len) = raw.get(at) {
            let end = (at + 1 + usize::from(len)).min(raw.len());
            table.push(String::from_utf8_lossy(&raw[at + 1..end]).into_owned());
            at = end;
        }
        table
    })
}

/// gosimple/unidecode `Unidecode` of one character.
fn unidecode(c: char) -> &'static str {
    (c as usize)
        .checked_sub(0x80)
        .and_then(|i| unidecode_table().get(i))
        .map_or("", String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn templates() {
        let inputs = json!({"name": "cilium", "ns": "kube-system", "empty": ""});
        let inputs = inputs.as_object();
        assert_eq!(render("<< inputs.name >>-x", inputs).unwrap(), "cilium-x");
        assert_eq!(
            render("<< inputs.name | quote >>", inputs).unwrap(),
            "\"cilium\""
        );
        assert_eq!(
            render("<< inputs.empty | default \"d\" >>", inputs).unwrap(),
            "d"
        );
        assert_eq!(
            render("<< default \"d\" inputs.ns >>", inputs).unwrap(),
            "kube-system"
        );
        assert!(render("<< inputs.missing >>", inputs).is_err());
        assert!(render("<< if inputs.name >>x<< end >>", inputs).is_err());
    }

    #[test]
    fn slugify_like_gosimple_slug() {
        // Each expectation is gosimple/slug v1.15.0's own output.
        for (input, slug) in [
            ("Spégel", "spegel"),
            ("Kube & VIP", "kube-and-vip"),
            ("Ærø straße", "aero-strasse"),
            ("a@b", "aatb"),
            ("  Über--Größe  ", "uber-grosse"),
            ("x'y\"z", "xyz"),
            ("a—b", "a-b"),
            ("Ça_va", "ca_va"),
        ] {
            assert_eq!(slugify(input).as_deref(), Some(slug), "{input}");
        }
        // The whole Basic Multilingual Plane is transliterated; what lies
        // above it (emoji) is dropped.
        assert_eq!(slugify("東京").as_deref(), Some("dong-jing"));
        assert_eq!(slugify("日本語").as_deref(), Some("ri-ben-yu"));
        assert_eq!(slugify("rocket 🚀 app").as_deref(), Some("rocket-app"));
    }
}
