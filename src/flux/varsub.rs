//! Flux post-build variable substitution (fluxcd/pkg
//! `kustomize/kustomize_varsub.go` `SubstituteVariables`, expanding with
//! fluxcd/pkg `envsubst`).
//!
//! - Only when the Kustomization has variables (`len(vars) > 0`) or
//!   `postBuild.substituteStrategy: Always`; without `postBuild` everything
//!   stays literal.
//! - Variables: `substituteFrom` ConfigMaps/Secrets in the Kustomization's
//!   namespace, in order, then `substitute` over them; newlines are removed
//!   from values. A variable name that is not `^[_[:alpha:]][_[:alpha:][:digit:]]*$`
//!   fails the build.
//! - An object labelled or annotated `kustomize.toolkit.fluxcd.io/substitute:
//!   disabled` is left alone.
//! - Not strict (kustomize-controller's default): an unset variable is set
//!   and empty. Every default form (`=`, `:=`, `:-`, `:+`, `:?`) gives its
//!   word when the value is empty (envsubst `toDefault`), so `${X=d}` is `d`
//!   too; `${X-d}`, `${X+d}` and `${X?d}` do not parse and fail the whole
//!   build. `$$` is a literal `$`, so `$${X}` stays `${X}`; `$X` without braces
//!   is not a variable.
//! - The whole object is substituted as the YAML text kustomize prints for it
//!   and read again (`yaml.YAMLToJSON`, go-yaml v2). kustomize prints a
//!   string holding an expression without quotes unless YAML needs them
//!   (how the file wrote it does not matter), so its new text takes the
//!   type YAML gives it: `replicas: ${N}` and `tag: "${V}"` with `N=3`,
//!   `V=1.10` are the integer 3 and the float 1.1, `yes` is `true`; a
//!   string that needs quotes (`${A}: ${B}`, leading blanks, …) stays one.
//!   Here on the object's string scalars and keys.

use std::collections::BTreeMap;

use serde_json::Value;

pub const DISABLED_KEY: &str = "kustomize.toolkit.fluxcd.io/substitute";

/// An expression Flux's envsubst rejects: the build fails, nothing of it
/// is applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{expression}`, which Flux's envsubst rejects")]
pub struct Rejected {
    /// The expression as written, `${` to its `}` (or to the end).
    pub expression: String,
}

/// Why a substitution fails the build, or a re-read that is not modelled.
#[derive(Debug, Default, PartialEq)]
pub struct Outcome {
    /// Expressions envsubst rejects (the build fails: nothing is applied).
    pub errors: Vec<Rejected>,
    /// Substituted plain scalars whose new text YAML would not read as one
    /// scalar (kept as strings; not modelled).
    pub unmodelled: Vec<String>,
}

/// Substitutes every string of `value` in place.
pub fn substitute(value: &mut Value, vars: &BTreeMap<String, String>) -> Outcome {
    let mut outcome = Outcome::default();
    walk(value, vars, &mut outcome);
    outcome
}

/// Whether go-yaml v3's emitter (which kustomize prints with) quotes the
/// string `s`: empty, surrounding blanks, a leading indicator, `: ` or ` #`
/// inside, a trailing `:`, a line break or a tab.
fn needs_quotes(s: &str) -> bool {
    s.is_empty()
        || s.starts_with(char::is_whitespace)
        || s.ends_with(char::is_whitespace)
        || s.starts_with([
            '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%',
            '@', '`',
        ])
        || s.contains(": ")
        || s.contains(" #")
        || s.ends_with(':')
        || s.contains(['\n', '\r', '\t'])
}

/// The variable names kustomize-controller accepts.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

pub fn is_disabled(body: &Value) -> bool {
    ["/metadata/labels", "/metadata/annotations"]
        .iter()
        .any(|p| {
            body.pointer(p)
                .and_then(|m| m.get(DISABLED_KEY))
                .and_then(Value::as_str)
                == Some("disabled")
        })
}

fn walk(value: &mut Value, vars: &BTreeMap<String, String>, out: &mut Outcome) {
    match value {
        Value::String(s) if s.contains('$') => match expand(s, vars) {
            Ok(text) => {
                *value = if text != *s && !needs_quotes(s) {
                    match reread(&text) {
                        Some(v) => v,
                        None => {
                            out.unmodelled.push(text.clone());
                            Value::String(text)
                        }
                    }
                } else {
                    Value::String(text)
                };
            }
            Err(e) => out.errors.push(e),
        },
        Value::Array(items) => items.iter_mut().for_each(|v| walk(v, vars, out)),
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().filter(|k| k.contains('$')).cloned().collect();
            for key in keys {
                match expand(&key, vars) {
                    Ok(new) => {
                        if let Some(v) = map.remove(&key) {
                            map.insert(new, v);
                        }
                    }
                    Err(e) => out.errors.push(e),
                }
            }
            map.values_mut().for_each(|v| walk(v, vars, out));
        }
        _ => {}
    }
}

/// A plain scalar's text read again as go-yaml v2 resolves it
/// (`resolve.go`): null, booleans of YAML 1.1, integers (decimal, `0x`,
/// `0o`/leading-`0` octal, `0b`), floats; anything else a string. `None`
/// when the text would not be one plain scalar.
pub fn reread(text: &str) -> Option<Value> {
    let t = text.trim();
    if t.contains(": ")
        || t.ends_with(':')
        || t.contains(" #")
        || t.starts_with([
            '[', ']', '{', '}', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`', '#', ',',
        ])
        || t.starts_with("- ")
        || t == "-"
    {
        return None;
    }
    Some(match t {
        "" | "~" | "null" | "Null" | "NULL" => Value::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            Value::Bool(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            Value::Bool(false)
        }
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF"
        | ".nan" | ".NaN" | ".NAN" => Value::String(t.to_string()),
        _ => number(t).unwrap_or_else(|| Value::String(t.to_string())),
    })
}

/// go-yaml v2 `resolve` of a plain scalar that is no keyword: a leading
/// `.` is a float (`strconv.ParseFloat`); a leading digit or sign is a
/// timestamp (`2006-1-2…`, which decodes into a string), an integer
/// (`strconv.ParseInt(s, 0, 64)` with `_` removed: `0x`/`0X`, `0o`/`0O`,
/// `0b`/`0B` and a leading-`0` octal, an optional sign), an unsigned one
/// past `i64`, or a float of YAML's style; anything else a string (`None`).
fn number(t: &str) -> Option<Value> {
    let first = t.chars().next()?;
    if first == '.' {
        return go_float(t);
    }
    if !(first.is_ascii_digit() || first == '+' || first == '-') {
        return None;
    }
    // A timestamp stays a string when decoded into an interface (go-yaml
    // v2 `decode.go`, for backward compatibility).
    if t.len() > 4 && t.as_bytes()[4] == b'-' && t[..4].bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let plain = t.replace('_', "");
    if let Some(v) = go_int(&plain, true) {
        return i64::try_from(v).ok().map(Value::from);
    }
    if let Some(v) = go_int(&plain, false) {
        return u64::try_from(v).ok().map(Value::from);
    }
    if yaml_float_form(&plain) {
        return go_float(&plain);
    }
    None
}

/// go-yaml's `yamlStyleFloat` (v2 and v3):
/// `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`.
pub(crate) fn yaml_float_form(plain: &str) -> bool {
    let body = plain.strip_prefix(['-', '+']).unwrap_or(plain);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => digits(frac),
        Some((int, frac)) => digits(int) && (frac.is_empty() || digits(frac)),
        None => digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e)));
    mantissa_ok && exponent_ok
}

fn go_float(t: &str) -> Option<Value> {
    // Rust reads the decimal forms YAML's regex lets through as Go does.
    let f: f64 = t.parse().ok()?;
    serde_json::Number::from_f64(f).map(Value::Number)
}

/// Go's `strconv.ParseInt(s, 0, 64)` (`signed`) or `ParseUint(s, 0, 64)`.
pub(crate) fn go_int(s: &str, signed: bool) -> Option<i128> {
    let (negative, rest) = match s.as_bytes().first()? {
        b'+' | b'-' if !signed => return None,
        b'+' => (false, &s[1..]),
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    let (radix, digits) = if let Some(d) = rest.strip_prefix("0x").or(rest.strip_prefix("0X")) {
        (16, d)
    } else if let Some(d) = rest.strip_prefix("0b").or(rest.strip_prefix("0B")) {
        (2, d)
    } else if let Some(d) = rest.strip_prefix("0o").or(rest.strip_prefix("0O")) {
        (8, d)
    } else if rest.len() > 1 && rest.starts_with('0') {
        (8, &rest[1..])
    } else {
        (10, rest)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u128::from_str_radix(digits, radix).ok()?;
    let value = if negative {
        -i128::try_from(magnitude).ok()?
    } else {
        i128::try_from(magnitude).ok()?
    };
    let fits = if signed {
        i64::try_from(value).is_ok()
    } else {
        u64::try_from(value).is_ok()
    };
    fits.then_some(value)
}

/// Expands the `${…}` expressions of `text`; an error is the expression
/// envsubst rejects (then Flux applies nothing of the build).
pub fn expand(text: &str, vars: &BTreeMap<String, String>) -> Result<String, Rejected> {
    let chars: Vec<char> = text.chars().collect();
    let mut parser = Parser {
        chars: &chars,
        pos: 0,
        vars,
    };
    let mut out = String::new();
    while parser.pos < chars.len() {
        let c = chars[parser.pos];
        if c == '$' && parser.peek(1) == Some('$') {
            out.push('$');
            parser.pos += 2;
        } else if c == '$' && parser.peek(1) == Some('{') {
            let start = parser.pos;
            parser.pos += 2;
            match parser.function() {
                Ok(v) => out.push_str(&v),
                Err(()) => {
                    let end = chars[start..]
                        .iter()
                        .position(|c| *c == '}')
                        .map_or(chars.len(), |i| start + i + 1);
                    return Err(Rejected {
                        expression: chars[start..end].iter().collect(),
                    });
                }
            }
        } else {
            out.push(c);
            parser.pos += 1;
        }
    }
    Ok(out)
}

struct Parser<'a> {
    chars: &'a [char],
    pos: usize,
    vars: &'a BTreeMap<String, String>,
}

impl Parser<'_> {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    fn ident(&mut self) -> String {
        let start = self.pos;
        while self
            .peek(0)
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            self.pos += 1;
        }
        self.chars[start..self.pos].iter().collect()
    }

    fn value(&self, name: &str) -> String {
        // Not strict: every variable is set, unset ones to "".
        self.vars.get(name).cloned().unwrap_or_default()
    }

    fn close(&mut self) -> Result<(), ()> {
        if self.peek(0) == Some('}') {
            self.pos += 1;
            Ok(())
        } else {
            Err(())
        }
    }

    /// A parameter: text up to a character `stop` rejects, with nested
    /// `${…}` expanded (and, with `escapes`, `\/` and `\\`).
    fn param(&mut self, stop: impl Fn(char) -> bool, escapes: bool) -> Result<String, ()> {
        let mut out = String::new();
        while let Some(c) = self.peek(0) {
            if c == '$' && self.peek(1) == Some('{') {
                self.pos += 2;
                out.push_str(&self.function()?);
            } else if c == '$' && self.peek(1) == Some('$') {
                out.push('$');
                self.pos += 2;
            } else if escapes && c == '\\' && matches!(self.peek(1), Some('/' | '\\')) {
                out.push(self.peek(1).unwrap_or('\\'));
                self.pos += 2;
            } else if stop(c) {
                break;
            } else {
                out.push(c);
                self.pos += 1;
            }
        }
        Ok(out)
    }

    /// After `${`: one function, through its `}`.
    fn function(&mut self) -> Result<String, ()> {
        if self.peek(0) == Some('#') {
            self.pos += 1;
            let name = self.ident();
            if name.is_empty() {
                return Err(());
            }
            self.close()?;
            return Ok(self.value(&name).len().to_string());
        }
        let name = self.ident();
        if name.is_empty() {
            return Err(());
        }
        let value = self.value(&name);
        match self.peek(0) {
            Some('}') => {
                self.pos += 1;
                Ok(value)
            }
            Some(':') if matches!(self.peek(1), Some('=' | '-' | '?' | '+')) => {
                self.pos += 2;
                self.default(value)
            }
            Some('=') => {
                self.pos += 1;
                self.default(value)
            }
            Some(':') => {
                self.pos += 1;
                let offset = self.param(|c| c == ':' || c == '}', false)?;
                let length = if self.peek(0) == Some(':') {
                    self.pos += 1;
                    Some(self.param(|c| c == '}', false)?)
                } else {
                    None
                };
                self.close()?;
                Ok(substring(&value, &offset, length.as_deref()))
            }
            Some(c @ (',' | '^')) => {
                self.pos += 1;
                let double = self.peek(0) == Some(c);
                if double {
                    self.pos += 1;
                }
                self.close()?;
                Ok(match (c, double) {
                    (',', true) => value.to_lowercase(),
                    ('^', true) => value.to_uppercase(),
                    (',', false) => first(&value, char::to_lowercase),
                    _ => first(&value, char::to_uppercase),
                })
            }
            Some('/') => {
                self.pos += 1;
                let mode = match self.peek(0) {
                    Some(m @ ('/' | '#' | '%')) => {
                        self.pos += 1;
                        m
                    }
                    _ => ' ',
                };
                let pattern = self.param(|c| c == '/' || c == '}', true)?;
                let replacement = if self.peek(0) == Some('/') {
                    self.pos += 1;
                    Some(self.param(|c| c == '}', true)?)
                } else {
                    None
                };
                self.close()?;
                let with = replacement.unwrap_or_default();
                Ok(match mode {
                    '/' => value.replace(&pattern, &with),
                    '#' if value.starts_with(&pattern) => value.replacen(&pattern, &with, 1),
                    '%' if value.ends_with(&pattern) => {
                        format!("{}{with}", &value[..value.len() - pattern.len()])
                    }
                    '#' | '%' => value,
                    _ => value.replacen(&pattern, &with, 1),
                })
            }
            Some(c @ ('#' | '%')) => {
                self.pos += 1;
                let longest = self.peek(0) == Some(c);
                if longest {
                    self.pos += 1;
                }
                let pattern = self.param(|c| c == '}', false)?;
                self.close()?;
                Ok(trim(&value, &pattern, c == '#', longest))
            }
            // `${X-d}`, `${X+d}`, `${X?d}` and anything else: envsubst's
            // "missing closing brace".
            _ => Err(()),
        }
    }

    /// The word of a default form, through the `}`: envsubst `toDefault`.
    fn default(&mut self, value: String) -> Result<String, ()> {
        let word = self.param(|c| c == '}', false)?;
        self.close()?;
        Ok(if value.is_empty() { word } else { value })
    }
}

/// `${X:offset}` / `${X:offset:length}` on bytes, as envsubst `toSubstr`.
fn substring(s: &str, offset: &str, length: Option<&str>) -> String {
    let bytes = s.as_bytes();
    let Ok(mut pos) = offset.trim().parse::<i64>() else {
        return s.to_string();
    };
    let len = bytes.len() as i64;
    if pos < 0 {
        pos = (len + pos).max(0);
    }
    let slice =
        |a: i64, b: i64| String::from_utf8_lossy(&bytes[a as usize..b as usize]).into_owned();
    let Some(length) = length else {
        return if pos < len {
            slice(pos, len)
        } else {
            String::new()
        };
    };
    let Ok(length) = length.trim().parse::<i64>() else {
        return s.to_string();
    };
    if pos + length >= len {
        return if pos < len {
            slice(pos, len)
        } else {
            String::new()
        };
    }
    slice(pos, (pos + length).max(pos))
}

/// `#`/`##`/`%`/`%%`: removes the shortest or longest prefix or suffix the
/// glob `pattern` matches.
fn trim(s: &str, pattern: &str, prefix: bool, longest: bool) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut cuts: Vec<usize> = (0..=chars.len()).collect();
    if longest {
        cuts.reverse();
    }
    for cut in cuts {
        let (part, rest): (String, String) = if prefix {
            (chars[..cut].iter().collect(), chars[cut..].iter().collect())
        } else {
            (
                chars[chars.len() - cut..].iter().collect(),
                chars[..chars.len() - cut].iter().collect(),
            )
        };
        if cut > 0 && glob_match(pattern, &part) {
            return rest;
        }
    }
    s.to_string()
}

/// Shell glob (`*`, `?`, literal otherwise) over a whole string.
fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    fn go(p: &[char], t: &[char]) -> bool {
        match p.split_first() {
            None => t.is_empty(),
            Some(('*', rest)) => (0..=t.len()).any(|i| go(rest, &t[i..])),
            Some(('?', rest)) => !t.is_empty() && go(rest, &t[1..]),
            Some((c, rest)) => t.first() == Some(c) && go(rest, &t[1..]),
        }
    }
    go(&p, &t)
}

fn first<I: Iterator<Item = char>>(value: &str, f: impl Fn(char) -> I) -> String {
    let mut chars = value.chars();
    match chars.next() {
        Some(c) => f(c).chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars() -> BTreeMap<String, String> {
        [
            ("A".to_string(), "kube-system".to_string()),
            ("N".to_string(), "3".to_string()),
        ]
        .into()
    }

    #[test]
    fn envsubst_forms() {
        let vars = vars();
        let e = |s: &str| expand(s, &vars);
        assert_eq!(e("${A}").unwrap(), "kube-system");
        assert_eq!(e("x-${B:=cilium}-y").unwrap(), "x-cilium-y");
        assert_eq!(e("${B:-d}").unwrap(), "d");
        assert_eq!(e("${APP=cilium}").unwrap(), "cilium", "= defaults too");
        assert_eq!(e("${A=cilium}").unwrap(), "kube-system");
        assert_eq!(e("${B:+d}").unwrap(), "d", "envsubst's :+ is a default");
        assert_eq!(e("$${A}").unwrap(), "${A}");
        assert_eq!(e("${A^^}").unwrap(), "KUBE-SYSTEM");
        assert_eq!(e("${A^}").unwrap(), "Kube-system");
        assert_eq!(e("$A").unwrap(), "$A");
        assert_eq!(e("${A/-/_}").unwrap(), "kube_system");
        assert_eq!(e("${A:0:4}").unwrap(), "kube");
        assert_eq!(e("${A#*-}").unwrap(), "system");
        assert_eq!(e("${A%-*}").unwrap(), "kube");
        assert_eq!(e("${#A}").unwrap(), "11");
        assert_eq!(e("${B:=${A}}").unwrap(), "kube-system");
    }

    #[test]
    fn forms_envsubst_rejects_fail() {
        let vars = vars();
        assert_eq!(
            expand("a ${X-d} b", &vars).unwrap_err().expression,
            "${X-d}"
        );
        assert!(expand("${X+d}", &vars).is_err());
        assert!(expand("${X?d}", &vars).is_err());
        assert!(expand("${X", &vars).is_err());
        assert!(expand("${-X}", &vars).is_err());
    }

    #[test]
    fn plain_scalars_are_read_again() {
        let vars = vars();
        let mut body = json!({"replicas": "${N}", "on": "${B:=yes}", "name": "x-${A}",
                              "pair": "${A}: ${N}", "kept": "${N"});
        let outcome = substitute(&mut body, &vars);
        assert_eq!(
            outcome.errors,
            [Rejected {
                expression: "${N".into()
            }]
        );
        assert_eq!(
            body,
            json!({"replicas": 3, "on": true, "name": "x-kube-system",
                   "pair": "kube-system: 3", "kept": "${N"})
        );
        assert_eq!(reread("1.5"), Some(json!(1.5)));
        assert_eq!(reread("0x10"), Some(json!(16)));
        assert_eq!(reread("0X10"), Some(json!(16)));
        assert_eq!(reread("-0o17"), Some(json!(-15)));
        assert_eq!(reread("007"), Some(json!(7)));
        assert_eq!(reread("08"), Some(json!(8.0)));
        assert_eq!(reread("1_000"), Some(json!(1000)));
        assert_eq!(reread("1e3"), Some(json!(1000.0)));
        assert_eq!(reread(".5"), Some(json!(0.5)));
        assert_eq!(reread("18446744073709551615"), Some(json!(u64::MAX)));
        assert_eq!(reread("2024-1-2"), Some(json!("2024-1-2")));
        assert_eq!(reread("2024-02-30"), Some(json!("2024-02-30")));
        assert_eq!(reread("1.10"), Some(json!(1.1)));
        assert_eq!(reread("1.2.3"), Some(json!("1.2.3")));
        assert_eq!(reread("v1"), Some(json!("v1")));
        assert_eq!(reread("a: b"), None);
    }
}
