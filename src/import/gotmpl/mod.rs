//! The part of Go's `text/template` that helmfiles use to read Flux
//! manifests, evaluated exactly or not at all: `{{ … }}` actions with `-`
//! trim markers and comments, variables (`$x := …`), field chains on `.`,
//! `$x` and `( … )`, pipelines, and the functions helmfile registers that
//! only read files (helmfile `pkg/tmpl/context_funcs.go`: `readFile`,
//! `fromYaml`, `toYaml`, `tpl`; files are read relative to the renderer's
//! base directory, `Context.ReadFile`) plus a few pure sprig ones
//! (`printf`, `quote`, `squote`, `lower`, `upper`, `trim`, `trimPrefix`,
//! `trimSuffix`, `replace`, `default`, `required`, `indent`, `nindent`,
//! `toString`, `list`). Anything else — control structures, `env`, `exec`, a field
//! that is not there — is an [`Unsupported`] naming the line and the action,
//! never a guess.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

mod syntax;

use syntax::{Arg, Cmd, Node, Parser, lex, tokenize};

/// An action this evaluator does not (or may not) evaluate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unsupported {
    pub file: PathBuf,
    pub line: usize,
    /// The action as written, e.g. `{{ env "DOMAIN" }}`.
    pub construct: String,
    pub reason: String,
}

impl Unsupported {
    /// helmfile evaluates it (a function, control structure or value this
    /// evaluator leaves alone), as opposed to something helmfile fails on too.
    pub(crate) fn helmfile_renders(&self) -> bool {
        [
            "not evaluated by the importer",
            "depends on the machine",
            "state or environment values",
            "environments become",
        ]
        .iter()
        .any(|s| self.reason.contains(s))
    }
}

/// A file a template read with `readFile`.
#[derive(Debug, Clone)]
pub(crate) struct Read {
    pub path: PathBuf,
    pub text: String,
}

/// One rendering: the data `.` stands for, where relative paths start, and
/// every file read on the way (the importer looks at them to recognise Flux
/// manifests).
pub(crate) struct Engine {
    pub data: Value,
    pub reads: RefCell<Vec<Read>>,
    /// `env "X"` and `requiredEnv "X"` become [`env_mark`]s instead of
    /// failing.
    translate_env: bool,
    /// What `fromYaml` read of a text holding several YAML documents: only
    /// the first, as helmfile does; said when a field is then missing.
    multi_doc: RefCell<Vec<String>>,
}

/// What `env "X"` / `requiredEnv "X"` render to in a translating
/// [`Engine`]: a mark that reads the same in any YAML context (plain,
/// single- or double-quoted), turned into bootstrap's own template by
/// [`env_marks_to_templates`] where bootstrap templates the text.
pub(crate) fn env_mark(name: &str, required: bool) -> String {
    format!(
        "${{bootstrap:env{}:{name}}}",
        if required { "" } else { "?" }
    )
}

/// `mark` (one whole [`env_mark`]) as the mark of a value that stays a
/// string whatever it reads as (`setString`): `${bootstrap:envs:X}`, whose
/// template is `{{toJson (env "X")}}`; anything else as it is.
pub(crate) fn as_string_mark(mark: &str) -> String {
    match mark.strip_prefix("${bootstrap:env") {
        Some(rest) if !rest.starts_with('s') && env_mark_names(mark).len() == 1 => {
            format!("${{bootstrap:envs{rest}")
        }
        _ => mark.to_string(),
    }
}

/// Whether `text` holds an [`env_mark`].
pub(crate) fn has_env_mark(text: &str) -> bool {
    text.contains("${bootstrap:env")
}

/// `text` with every [`env_mark`] as bootstrap's template reading that
/// variable (docs/design.md#templates): `requiredEnv` is `{{env "X"}}`
/// (an error when unset), helmfile's `env` is `{{env "X" ""}}` (empty when
/// unset).
pub(crate) fn env_marks_to_templates(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${bootstrap:env") {
        out.push_str(&rest[..start]);
        let tail = &rest[start + "${bootstrap:env".len()..];
        let (string, tail) = match tail.strip_prefix('s') {
            Some(t) => (true, t),
            None => (false, tail),
        };
        let (required, tail) = match tail.strip_prefix('?') {
            Some(t) => (false, t),
            None => (true, tail),
        };
        let Some(end) = tail.strip_prefix(':').and_then(|t| t.find('}')) else {
            out.push_str(&rest[start..]);
            return out;
        };
        let name = &tail[1..=end];
        let call = if required {
            format!("env {name:?}")
        } else {
            format!("env {name:?} \"\"")
        };
        if string {
            out.push_str(&format!("{{{{toJson ({call})}}}}"));
        } else {
            out.push_str(&format!("{{{{{call}}}}}"));
        }
        rest = &tail[end + 2..];
    }
    out.push_str(rest);
    out
}

/// The variable names of the marks in `text`, as helmfile wrote them.
pub(crate) fn env_mark_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${bootstrap:env") {
        let tail = rest[start + "${bootstrap:env".len()..]
            .trim_start_matches('s')
            .trim_start_matches('?');
        let Some(end) = tail.strip_prefix(':').and_then(|t| t.find('}')) else {
            break;
        };
        names.push(tail[1..=end].to_string());
        rest = &tail[end + 2..];
    }
    names
}

impl Engine {
    pub(crate) fn new(data: Value) -> Engine {
        Engine {
            data,
            reads: RefCell::new(Vec::new()),
            translate_env: false,
            multi_doc: RefCell::new(Vec::new()),
        }
    }

    /// An engine that renders `env`/`requiredEnv` as [`env_mark`]s.
    pub(crate) fn translating_env(data: Value) -> Engine {
        Engine {
            translate_env: true,
            ..Engine::new(data)
        }
    }

    /// Renders `text`, which starts at line `first_line` of `file`;
    /// `base` is the directory `readFile` resolves relative paths from.
    pub(crate) fn render(
        &self,
        text: &str,
        file: &Path,
        first_line: usize,
        base: &Path,
    ) -> Result<String, Unsupported> {
        let at = Origin {
            file,
            first_line,
            base,
        };
        let nodes = lex(text, &at)?;
        let mut vars: Vec<(String, Value)> = vec![("$".to_string(), self.data.clone())];
        let mut out = String::new();
        for node in nodes {
            match node {
                Node::Text(t) => out.push_str(&t),
                Node::Action { line, source, body } => {
                    let fail = |reason: String| Unsupported {
                        file: file.to_path_buf(),
                        line,
                        construct: source.clone(),
                        reason,
                    };
                    let tokens = tokenize(&body).map_err(|e| fail(e.to_string()))?;
                    let mut parser = Parser::new(tokens);
                    let (decl, pipe) = parser.action().map_err(|e| fail(e.to_string()))?;
                    let value = self.pipe(&pipe, &vars, &at).map_err(|e| match e {
                        Failure::Here(reason) if reason.contains("is not set") => {
                            match self.multi_doc.borrow().last() {
                                Some(note) => fail(format!("{reason}; {note}")),
                                None => fail(reason),
                            }
                        }
                        Failure::Here(reason) => fail(reason),
                        Failure::Inner(inner) => inner,
                    })?;
                    match decl {
                        Some(name) => vars.push((name, value)),
                        None => out.push_str(&print(&value).map_err(|e| fail(e.to_string()))?),
                    }
                }
            }
        }
        Ok(out)
    }

    fn pipe(&self, pipe: &[Cmd], vars: &[(String, Value)], at: &Origin) -> Result<Value, Failure> {
        let mut piped: Option<Value> = None;
        for cmd in pipe {
            piped = Some(self.cmd(cmd, piped.take(), vars, at)?);
        }
        piped.ok_or_else(|| Failure::Here("empty pipeline".into()))
    }

    fn cmd(
        &self,
        cmd: &Cmd,
        piped: Option<Value>,
        vars: &[(String, Value)],
        at: &Origin,
    ) -> Result<Value, Failure> {
        match cmd.first() {
            Some(Arg::Func(name)) => {
                // Say what depends on the machine before judging its arguments.
                if MACHINE.contains(&name.as_str())
                    && !(self.translate_env && matches!(name.as_str(), "env" | "requiredEnv"))
                {
                    return self.call(name, Vec::new(), at);
                }
                let mut args = Vec::new();
                for arg in &cmd[1..] {
                    args.push(self.arg(arg, vars, at)?);
                }
                if let Some(value) = piped {
                    args.push(value);
                }
                self.call(name, args, at)
            }
            Some(arg) if cmd.len() == 1 && piped.is_none() => self.arg(arg, vars, at),
            Some(_) if piped.is_some() => Err(Failure::Here(
                "a value is piped into something that is not a function".into(),
            )),
            _ => Err(Failure::Here("arguments given to a value".into())),
        }
    }

    fn arg(&self, arg: &Arg, vars: &[(String, Value)], at: &Origin) -> Result<Value, Failure> {
        match arg {
            Arg::Str(s) => Ok(Value::String(s.clone())),
            Arg::Num(n) => Ok(Value::Number(n.clone())),
            Arg::Bool(b) => Ok(Value::Bool(*b)),
            Arg::Nil => Ok(Value::Null),
            Arg::Func(name) => self.call(name, Vec::new(), at),
            Arg::Field(path) => field(&self.data, path, "."),
            Arg::Var(name, path) => {
                let value = vars
                    .iter()
                    .rev()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v)
                    .ok_or_else(|| Failure::Here(format!("variable `{name}` is not defined")))?;
                field(value, path, name)
            }
            Arg::Sub(pipe, path) => {
                let value = self.pipe(pipe, vars, at)?;
                field(&value, path, "(…)")
            }
        }
    }

    // One piece (tests/it/architecture.rs lists it): one match over the
    // functions the subset evaluates, a few lines per function.
    fn call(&self, name: &str, args: Vec<Value>, at: &Origin) -> Result<Value, Failure> {
        let want = |n: usize| -> Result<(), Failure> {
            if args.len() == n {
                Ok(())
            } else {
                Err(Failure::Here(format!(
                    "`{name}` takes {n} argument(s), got {}",
                    args.len()
                )))
            }
        };
        let text = |i: usize| -> Result<String, Failure> {
            match args.get(i) {
                Some(Value::String(s)) => Ok(s.clone()),
                Some(other) => print(other).map_err(|e| Failure::Here(e.to_string())),
                None => Err(Failure::Here(format!("`{name}` is missing an argument"))),
            }
        };
        match name {
            "readFile" => {
                want(1)?;
                let rel = text(0)?;
                let path = normalize(&at.base.join(&rel));
                let content = std::fs::read_to_string(&path)
                    .map_err(|e| Failure::Here(format!("readFile `{}`: {e}", path.display())))?;
                self.reads.borrow_mut().push(Read {
                    path,
                    text: content.clone(),
                });
                Ok(Value::String(content))
            }
            "fromYaml" => {
                want(1)?;
                let source = text(0)?;
                let docs: Vec<Value> = serde_saphyr::from_multiple(&source)
                    .map_err(|e| Failure::Here(format!("fromYaml: {e}")))?;
                let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
                if docs.len() > 1 {
                    let file = self
                        .reads
                        .borrow()
                        .iter()
                        .rev()
                        .find(|r| r.text == source)
                        .map(|r| format!(" of {}", r.path.display()))
                        .unwrap_or_default();
                    let kinds: Vec<String> = docs
                        .iter()
                        .enumerate()
                        .map(|(i, d)| {
                            format!(
                                "{} {}",
                                i + 1,
                                d.get("kind").and_then(Value::as_str).unwrap_or("(no kind)")
                            )
                        })
                        .collect();
                    self.multi_doc.borrow_mut().push(format!(
                        "fromYaml read document 1 of the {} documents{file} ({}), as helmfile does",
                        docs.len(),
                        kinds.join(", ")
                    ));
                }
                Ok(docs.into_iter().next().unwrap_or(Value::Object(Map::new())))
            }
            "toYaml" => {
                want(1)?;
                let value = &args[0];
                if value.is_null() {
                    return Ok(Value::String("null".into()));
                }
                let yaml = serde_saphyr::to_string(value)
                    .map_err(|e| Failure::Here(format!("toYaml: {e}")))?;
                Ok(Value::String(yaml.trim_end_matches('\n').to_string()))
            }
            "tpl" => {
                want(2)?;
                let template = text(0)?;
                // The text usually comes from `readFile`: report problems in that file.
                let source = self
                    .reads
                    .borrow()
                    .iter()
                    .rev()
                    .find(|r| r.text == template)
                    .map(|r| r.path.clone());
                let inner = Engine {
                    data: args[1].clone(),
                    reads: RefCell::new(Vec::new()),
                    translate_env: self.translate_env,
                    multi_doc: RefCell::new(Vec::new()),
                };
                let (file, line) = match &source {
                    Some(path) => (path.as_path(), 1),
                    None => (at.file, at.first_line),
                };
                let rendered = inner
                    .render(&template, file, line, at.base)
                    .map_err(Failure::Inner)?;
                self.reads.borrow_mut().extend(inner.reads.into_inner());
                Ok(Value::String(rendered))
            }
            "printf" => {
                if args.is_empty() {
                    return Err(Failure::Here("`printf` needs a format".into()));
                }
                printf(&text(0)?, &args[1..]).map(Value::String)
            }
            "quote" => {
                want(1)?;
                Ok(Value::String(format!("{:?}", text(0)?)))
            }
            "squote" => {
                want(1)?;
                Ok(Value::String(format!("'{}'", text(0)?)))
            }
            "lower" => {
                want(1)?;
                Ok(Value::String(text(0)?.to_lowercase()))
            }
            "upper" => {
                want(1)?;
                Ok(Value::String(text(0)?.to_uppercase()))
            }
            "trim" => {
                want(1)?;
                Ok(Value::String(text(0)?.trim().to_string()))
            }
            "toString" => {
                want(1)?;
                Ok(Value::String(text(0)?))
            }
            "trimPrefix" => {
                want(2)?;
                let (prefix, s) = (text(0)?, text(1)?);
                Ok(Value::String(
                    s.strip_prefix(prefix.as_str()).unwrap_or(&s).to_string(),
                ))
            }
            "trimSuffix" => {
                want(2)?;
                let (suffix, s) = (text(0)?, text(1)?);
                Ok(Value::String(
                    s.strip_suffix(suffix.as_str()).unwrap_or(&s).to_string(),
                ))
            }
            "replace" => {
                want(3)?;
                Ok(Value::String(text(2)?.replace(&text(0)?, &text(1)?)))
            }
            "default" => {
                want(2)?;
                Ok(if empty(&args[1]) {
                    args[0].clone()
                } else {
                    args[1].clone()
                })
            }
            "required" => {
                want(2)?;
                if args[1].is_null() {
                    Err(Failure::Here(format!("required: {}", text(0)?)))
                } else {
                    Ok(args[1].clone())
                }
            }
            "indent" | "nindent" => {
                want(2)?;
                let width = args[0]
                    .as_u64()
                    .ok_or_else(|| Failure::Here(format!("`{name}` needs a width")))?;
                let pad = " ".repeat(width as usize);
                let body = text(1)?
                    .split('\n')
                    .map(|l| format!("{pad}{l}"))
                    .collect::<Vec<_>>()
                    .join("\n");
                Ok(Value::String(if name == "nindent" {
                    format!("\n{body}")
                } else {
                    body
                }))
            }
            "env" | "requiredEnv" if self.translate_env => {
                want(1)?;
                Ok(Value::String(env_mark(&text(0)?, name == "requiredEnv")))
            }
            "list" => Ok(Value::Array(args)),
            _ if MACHINE.contains(&name) => Err(Failure::Here(format!(
                "`{name}` depends on the machine helmfile runs on; bootstrap reads the environment only through `{{{{env \"NAME\"}}}}` in its own templates"
            ))),
            other => Err(Failure::Here(format!(
                "the function `{other}` is not evaluated by the importer"
            ))),
        }
    }
}

/// helmfile's functions whose result depends on the machine it runs on.
const MACHINE: &[&str] = &[
    "env",
    "requiredEnv",
    "exec",
    "envExec",
    "fetchSecretValue",
    "expandSecretRefs",
];

/// Where a template text lives.
struct Origin<'a> {
    file: &'a Path,
    first_line: usize,
    base: &'a Path,
}

enum Failure {
    /// Wrong in this action.
    Here(String),
    /// Wrong inside a template this action rendered (`tpl`).
    Inner(Unsupported),
}

pub(crate) use crate::lexical::normalize;

fn empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
    }
}

/// A value as `{{ }}` prints it. Maps and lists print as Go's `map[…]`,
/// which no helmfile means to write; a missing value prints `<no value>`.
fn print(value: &Value) -> Result<String, Unprintable> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Null => Err(Unprintable::Empty),
        Value::Array(_) | Value::Object(_) => Err(Unprintable::Collection),
    }
}

/// A value `{{ }}` does not print the way a helmfile means it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum Unprintable {
    #[error("the value is empty (Go prints `<no value>`)")]
    Empty,
    #[error("prints a map or list the way Go does (`map[…]`); pipe it to `toYaml`")]
    Collection,
}

fn field(value: &Value, path: &[String], from: &str) -> Result<Value, Failure> {
    let mut current = value;
    let mut walked = from.trim_end_matches('.').to_string();
    for key in path {
        walked.push('.');
        walked.push_str(key);
        current = match current {
            Value::Object(map) => map.get(key).ok_or_else(|| {
                Failure::Here(format!("`{walked}` is not set{}", hint_for(&walked)))
            })?,
            _ => {
                return Err(Failure::Here(format!(
                    "`{walked}`: not a map, so it has no field `{key}`"
                )));
            }
        };
    }
    Ok(current.clone())
}

fn hint_for(path: &str) -> &'static str {
    if path.starts_with(".Values") || path.starts_with(".StateValues") {
        " (helmfile state or environment values; bootstrap keeps per-cluster values in clusters/NAME/cluster.yaml `values:`)"
    } else if path.starts_with(".Environment") {
        " (helmfile environments become bootstrap clusters: one clusters/NAME/cluster.yaml each)"
    } else {
        ""
    }
}

/// Go's `fmt.Sprintf` for the verbs templates use: `%s`, `%v`, `%d`, `%q`, `%%`.
fn printf(format: &str, args: &[Value]) -> Result<String, Failure> {
    let mut out = String::new();
    let mut next = args.iter();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some(verb @ ('s' | 'v' | 'd' | 'q')) => {
                let arg = next.next().ok_or_else(|| {
                    Failure::Here(format!("printf `{format}`: too few arguments"))
                })?;
                let text = print(arg).map_err(|e| Failure::Here(e.to_string()))?;
                match verb {
                    'q' => out.push_str(&format!("{text:?}")),
                    'd' if !arg.is_number() => {
                        return Err(Failure::Here(format!(
                            "printf `{format}`: %d of a non-number"
                        )));
                    }
                    _ => out.push_str(&text),
                }
            }
            other => {
                return Err(Failure::Here(format!(
                    "printf verb `%{}` is not evaluated by the importer",
                    other.map(String::from).unwrap_or_default()
                )));
            }
        }
    }
    if next.next().is_some() {
        return Err(Failure::Here(format!(
            "printf `{format}`: more arguments than verbs (Go would print %!(EXTRA …))"
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(text: &str, data: Value, base: &Path) -> Result<String, Unsupported> {
        Engine::new(data).render(text, Path::new("t.gotmpl"), 1, base)
    }

    fn release() -> Value {
        json!({"Release": {"Name": "cilium", "Namespace": "kube-system"}})
    }

    #[test]
    fn the_flux_reading_pattern_of_the_corpus() {
        let dir = tempfile::tempdir().unwrap();
        let app = dir.path().join("apps/kube-system/cilium/app");
        std::fs::create_dir_all(&app).unwrap();
        std::fs::write(
            app.join("ocirepository.yaml"),
            "---\nkind: OCIRepository\nspec:\n  url: oci://quay.io/cilium/charts/cilium\n  ref:\n    tag: 1.20.1\n",
        )
        .unwrap();
        std::fs::write(
            app.join("helmrelease.yaml"),
            "kind: HelmRelease\nspec:\n  values:\n    a: {b: 1}\n    c: \"{{ .Zone }}\"\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.path().join("helmfile/templates")).unwrap();
        std::fs::write(
            dir.path().join("helmfile/templates/release.yaml.gotmpl"),
            "{{- $oci := fromYaml (readFile (printf \"../apps/%s/%s/app/ocirepository.yaml\" .Release.Namespace .Release.Name)) -}}\nchart: {{ $oci.spec.url }}\nversion: {{ $oci.spec.ref.tag }}\n",
        )
        .unwrap();
        let base = dir.path().join("helmfile");
        let chart = render(
            r#"{{ (fromYaml (tpl (readFile "./templates/release.yaml.gotmpl") .)).chart }}"#,
            release(),
            &base,
        )
        .unwrap();
        assert_eq!(chart, "oci://quay.io/cilium/charts/cilium");
        let version = render(
            r#"{{ (fromYaml (tpl (readFile "./templates/release.yaml.gotmpl") .)).version }}"#,
            release(),
            &base,
        )
        .unwrap();
        assert_eq!(version, "1.20.1");
        let values = render(
            r#"{{ (fromYaml (readFile (printf "../../apps/%s/%s/app/helmrelease.yaml" .Release.Namespace .Release.Name))).spec.values | toYaml }}"#,
            release(),
            &base.join("templates"),
        )
        .unwrap();
        let parsed: Value = serde_saphyr::from_str(&values).unwrap();
        assert_eq!(parsed, json!({"a": {"b": 1}, "c": "{{ .Zone }}"}));
    }

    #[test]
    fn trim_markers_and_comments() {
        let out = render(
            "a  {{- /* c */ -}}  b {{ \"x\" }}\n",
            json!({}),
            Path::new("."),
        );
        assert_eq!(out.unwrap(), "ab x\n");
    }

    #[test]
    fn control_flow_environment_and_missing_fields_are_never_guessed() {
        let cases = [
            ("x\n{{ if .Values.a }}y{{ end }}", 2, "control flow"),
            ("{{ env \"DOMAIN\" }}", 1, "depends on the machine"),
            ("{{ .Values.domain }}", 1, "`.Values` is not set"),
            ("{{ .Release.Chart }}", 1, "`.Release.Chart` is not set"),
            ("{{ sha256sum \"x\" }}", 1, "`sha256sum` is not evaluated"),
            ("{{ .Release }}", 1, "map or list"),
        ];
        for (text, line, reason) in cases {
            let err = render(text, release(), Path::new(".")).unwrap_err();
            assert_eq!(err.line, line, "{text}");
            assert!(err.reason.contains(reason), "{text}: {}", err.reason);
        }
    }

    #[test]
    fn printf_and_pipes() {
        let out = render(
            r#"{{ printf "%s/%s" .Release.Namespace .Release.Name | upper | quote }}"#,
            release(),
            Path::new("."),
        );
        assert_eq!(out.unwrap(), "\"KUBE-SYSTEM/CILIUM\"");
        let out = render(
            r#"{{ default "x" "" }}-{{ "a" | default "b" }}"#,
            release(),
            Path::new("."),
        );
        assert_eq!(out.unwrap(), "x-a");
    }

    #[test]
    fn normalize_is_lexical() {
        assert_eq!(normalize(Path::new("a/./b/../c")), PathBuf::from("a/c"));
        assert_eq!(
            normalize(Path::new("../a/../../b")),
            PathBuf::from("../../b")
        );
    }
}
