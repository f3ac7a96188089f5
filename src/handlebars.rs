//! Handlebars in strict mode over the context of docs/design.md#templates. A missing variable is
//! an error naming it; environment variables are read only through `env`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ::handlebars::{
    Context, Handlebars, Helper, HelperResult, Output, RenderContext, RenderError,
    RenderErrorReason, Renderable, Template,
};
use serde_json::{Value, json};

/// What went wrong rendering one template, in the user's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateError {
    /// `name` is not in the context; `known`: every path it has (what the
    /// message suggests from and lists).
    UnknownVariable {
        name: String,
        known: Vec<String>,
    },
    UnsetEnv(String),
    Syntax(String),
}

impl std::fmt::Display for TemplateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TemplateError::UnknownVariable { name, known } => {
                write!(f, "template uses `{name}`, which is not defined")?;
                // Never an ancestor of what was asked for (`cluster.values`
                // for `cluster.values.id`): that is where it is missing.
                let candidates = known
                    .iter()
                    .map(String::as_str)
                    .filter(|k| !k.ends_with(" (empty)"))
                    .filter(|k| !name.starts_with(&format!("{k}.")));
                write!(f, "{}", crate::error::did_you_mean(name, candidates))?;
                const SHOWN: usize = 12;
                let mut listed: Vec<&str> = known.iter().take(SHOWN).map(String::as_str).collect();
                let more = known.len().saturating_sub(SHOWN);
                let more = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                if listed.is_empty() {
                    listed.push("nothing");
                }
                write!(f, " (defined: {}{more})", listed.join(", "))
            }
            TemplateError::UnsetEnv(name) => write!(
                f,
                "environment variable `{name}` is not set; set it, or give a default: {{{{env \"{name}\" \"default\"}}}}"
            ),
            TemplateError::Syntax(message) => write!(f, "template syntax error: {message}"),
        }
    }
}

/// A [`TemplateError`] with the template that failed and where in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub error: TemplateError,
    /// The template's text as written.
    pub template: String,
    /// 1-based line and column within `template`.
    pub at: Option<(usize, usize)>,
}

impl std::fmt::Display for Located {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

/// The 1-based line and column of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    (line, before[start..].chars().count() + 1)
}

pub struct Renderer {
    registry: Handlebars<'static>,
    /// For values *files* (YAML text): every inserted value is a YAML scalar
    /// ([`yaml_scalar`]), so a value can never add keys of its own.
    yaml: Handlebars<'static>,
    /// Compiled templates by their text. A catalog repeats the same few
    /// templates (and values files) across every release, and compiling was
    /// most of the cost of planning: 1,000 releases compiled ~4,000 times.
    compiled: Mutex<HashMap<String, Arc<Template>>>,
}

impl Default for Renderer {
    fn default() -> Self {
        Self::new()
    }
}

/// `text` as it may stand in YAML without changing the document around it:
/// as it is when it is a plain scalar on one line that starts and contains
/// nothing YAML reads as structure, otherwise as a double-quoted (JSON)
/// string, which YAML reads back as the same string.
pub(crate) fn yaml_scalar(text: &str) -> String {
    let plain = !text.is_empty()
        && text.trim() == text
        && !text.contains(['\n', '\r', '\t', '"', '\''])
        && !text.starts_with([
            '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '%', '@', '`',
        ])
        && !text.contains(": ")
        && !text.contains(" #")
        && !text.ends_with(':');
    if plain {
        text.to_string()
    } else {
        serde_json::to_string(text).unwrap_or_default()
    }
}

/// What templates read (docs/design.md#templates), made once per release:
/// handlebars renders from its own copy of the data, and copying it for
/// every template was a third of the cost of rendering a catalog.
pub struct TemplateContext(Context);

impl TemplateContext {
    /// The data templates read.
    pub fn value(&self) -> &Value {
        self.0.data()
    }
}

impl From<Value> for TemplateContext {
    fn from(value: Value) -> Self {
        TemplateContext(Context::from(value))
    }
}

/// The template context: `cluster.*`, `release.*`, `root`.
pub(crate) fn context(
    cluster_name: &str,
    cluster_context: Option<&str>,
    cluster_values: &serde_json::Map<String, Value>,
    release: Option<(&str, &str)>,
    root: &str,
) -> TemplateContext {
    let mut ctx = json!({
        "cluster": {
            "name": cluster_name,
            "context": cluster_context.unwrap_or_default(),
            "values": cluster_values,
        },
        "root": root,
    });
    if let Some((namespace, name)) = release {
        ctx["release"] = json!({ "name": name, "namespace": namespace });
    }
    TemplateContext::from(ctx)
}

impl Renderer {
    pub fn new() -> Self {
        let mut registry = Handlebars::new();
        registry.set_strict_mode(true);
        // Values are YAML, not HTML.
        registry.register_escape_fn(::handlebars::no_escape);
        registry.register_helper("env", Box::new(env_helper));
        registry.register_helper("toJson", Box::new(to_json_helper));
        let mut yaml = registry.clone();
        yaml.register_escape_fn(yaml_scalar);
        Renderer {
            registry,
            yaml,
            compiled: Mutex::new(HashMap::new()),
        }
    }

    /// Renders a template string whose result is used as it is (a value in
    /// a values map, a hook argument).
    pub fn render_str(
        &self,
        template: &str,
        ctx: &TemplateContext,
    ) -> Result<String, TemplateError> {
        self.render_with(&self.registry, template, ctx)
            .map_err(|l| l.error)
    }

    /// [`Self::render_str`], saying where in the template it failed.
    pub fn render_str_located(
        &self,
        template: &str,
        ctx: &TemplateContext,
    ) -> Result<String, Located> {
        self.render_with(&self.registry, template, ctx)
    }

    /// Renders YAML text (a values file): each `{{...}}` is inserted as a
    /// YAML scalar, quoted when it would otherwise change the document's
    /// structure (`"1\nhostNetwork: true"` stays one string).
    pub fn render_yaml(&self, template: &str, ctx: &TemplateContext) -> Result<String, Located> {
        match interpolated(template, ctx.value(), yaml_scalar) {
            Some(text) => Ok(text),
            None => self.render_with(&self.yaml, template, ctx),
        }
    }

    fn render_with(
        &self,
        registry: &Handlebars<'static>,
        template: &str,
        ctx: &TemplateContext,
    ) -> Result<String, Located> {
        if !template.contains("{{") {
            return Ok(template.to_string());
        }
        let located = |error: TemplateError, at: Option<(usize, usize)>| Located {
            error,
            template: template.to_string(),
            at,
        };
        let compiled = self.compile(template).map_err(|(e, at)| located(e, at))?;
        let render = || -> Result<String, RenderError> {
            // What `Handlebars::render_template` does, minus the compiling
            // and the copy of the context.
            let mut out = Text(String::new());
            compiled.render(registry, &ctx.0, &mut RenderContext::new(None), &mut out)?;
            Ok(out.0)
        };
        render().map_err(|e| {
            let at = e.line_no.zip(e.column_no).or_else(|| match e.reason() {
                RenderErrorReason::TemplateError(t) => t.pos(),
                _ => None,
            });
            located(classify(&e, ctx.value()), at)
        })
    }

    #[allow(clippy::type_complexity)]
    fn compile(
        &self,
        template: &str,
    ) -> Result<Arc<Template>, (TemplateError, Option<(usize, usize)>)> {
        // A poisoned cache only means another render panicked; its entries are whole.
        let mut cache = self.compiled.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(compiled) = cache.get(template) {
            return Ok(compiled.clone());
        }
        let compiled = Arc::new(
            Template::compile(template)
                .map_err(|e| (TemplateError::Syntax(syntax(&e)), e.pos()))?,
        );
        cache.insert(template.to_string(), compiled.clone());
        Ok(compiled)
    }

    /// Renders every string leaf. A string that is exactly one `{{path}}`
    /// keeps the type of what it names (`id: "{{cluster.values.clusterId}}"`
    /// stays a number), since charts validate types.
    /// Every failing leaf is reported, in document order.
    pub fn render_value(
        &self,
        value: &Value,
        ctx: &TemplateContext,
    ) -> Result<Value, Vec<Located>> {
        collected(|errors| self.render_leaves(value, ctx, errors))
    }

    /// [`Renderer::render_value`] of a map (inline `values`), without
    /// copying it into a `Value` first.
    pub fn render_map(
        &self,
        map: &serde_json::Map<String, Value>,
        ctx: &TemplateContext,
    ) -> Result<Value, Vec<Located>> {
        collected(|errors| self.render_object(map, ctx, errors))
    }

    fn render_object(
        &self,
        map: &serde_json::Map<String, Value>,
        ctx: &TemplateContext,
        errors: &mut Vec<Located>,
    ) -> Value {
        // A copy rendered in place: copying a map keeps its keys' hashes,
        // building one anew hashes every key again.
        let mut out = map.clone();
        for value in out.values_mut() {
            self.render_in_place(value, ctx, errors);
        }
        Value::Object(out)
    }

    fn render_leaves(
        &self,
        value: &Value,
        ctx: &TemplateContext,
        errors: &mut Vec<Located>,
    ) -> Value {
        let mut out = value.clone();
        self.render_in_place(&mut out, ctx, errors);
        out
    }

    /// Every string leaf of `value` rendered where it stands; a leaf that
    /// fails becomes null and its error is kept.
    fn render_in_place(&self, value: &mut Value, ctx: &TemplateContext, errors: &mut Vec<Located>) {
        match value {
            // Without `{{` a string renders as itself.
            Value::String(s) if s.contains("{{") => {
                let rendered = match whole_path(s) {
                    Some(path) => lookup(ctx.value(), path).cloned().ok_or_else(|| Located {
                        error: unknown(path, ctx.value()),
                        template: s.clone(),
                        at: s.find("{{").map(|offset| line_column(s, offset)),
                    }),
                    None => match interpolated(s, ctx.value(), str::to_string) {
                        Some(text) => Ok(Value::String(text)),
                        None => self.render_with(&self.registry, s, ctx).map(Value::String),
                    },
                };
                *value = rendered.unwrap_or_else(|e| {
                    errors.push(e);
                    Value::Null
                });
            }
            Value::Array(items) => {
                for item in items {
                    self.render_in_place(item, ctx, errors);
                }
            }
            Value::Object(map) => {
                for item in map.values_mut() {
                    self.render_in_place(item, ctx, errors);
                }
            }
            _ => {}
        }
    }
}

/// What `render` made, or every error it met on the way.
fn collected(render: impl FnOnce(&mut Vec<Located>) -> Value) -> Result<Value, Vec<Located>> {
    let mut errors = Vec::new();
    let value = render(&mut errors);
    if errors.is_empty() {
        Ok(value)
    } else {
        Err(errors)
    }
}

fn whole_path(s: &str) -> Option<&str> {
    let inner = s.trim().strip_prefix("{{")?.strip_suffix("}}")?.trim();
    let is_path = !inner.is_empty()
        && inner
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !inner.starts_with('.')
        && !inner.contains("{{");
    is_path.then_some(inner)
}

/// Whether `template` calls the `env` helper (or names anything `env`):
/// what it renders holds values of the environment (a token, a password),
/// which the parse cache never writes to disk.
pub(crate) fn reads_environment(template: &str) -> bool {
    template.split("{{").skip(1).any(|block| {
        let inner = block.split("}}").next().unwrap_or(block);
        inner
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|token| token == "env")
    })
}

/// What handlebars renders `s` to, without handlebars, when `s` is text
/// and `{{a.b}}` expressions only, each naming a text: what most values are
/// (`registry.{{cluster.values.domain}}/app`), and a render through
/// handlebars costs ten times this. `None` for anything else (a helper, a
/// block, a number, an unknown path, a backslash): handlebars renders it,
/// and says what is wrong. A path here has a dot, so it is never a helper's
/// name, and segments of letters, digits and `_` that start with a letter
/// or `_`, which handlebars reads as the same path. Each text is inserted
/// as `escape` gives it, as the registry's escape function would.
fn interpolated(s: &str, ctx: &Value, escape: impl Fn(&str) -> String) -> Option<String> {
    if s.contains('\\') {
        return None;
    }
    let mut out = String::with_capacity(s.len() + 16);
    let mut rest = s;
    while let Some(open) = rest.find("{{") {
        let text = &rest[..open];
        let after = &rest[open + 2..];
        let close = after.find("}}")?;
        let path = after[..close].trim();
        let plain = |segment: &str| {
            segment
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && segment
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        if text.contains("}}") || !path.contains('.') || !path.split('.').all(plain) {
            return None;
        }
        let Value::String(value) = lookup(ctx, path)? else {
            return None;
        };
        out.push_str(text);
        out.push_str(&escape(value));
        rest = &after[close + 2..];
    }
    if rest.contains("}}") {
        return None;
    }
    out.push_str(rest);
    Some(out)
}

/// Handlebars' own `StringOutput` starts every result at 8 KiB; rendered
/// values live as long as the plan, and most are a few bytes (1,000 releases
/// held 16 MB of empty capacity).
struct Text(String);

impl Output for Text {
    fn write(&mut self, seg: &str) -> Result<(), std::io::Error> {
        self.0.push_str(seg);
        Ok(())
    }
}

fn lookup<'a>(ctx: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(ctx, |value, segment| match value {
        Value::Object(map) => map.get(segment),
        Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

/// `path` is not in `ctx`: the error, with every path `ctx` does define.
fn unknown(path: &str, ctx: &Value) -> TemplateError {
    let mut known = Vec::new();
    leaf_paths(ctx, "", &mut known);
    TemplateError::UnknownVariable {
        name: path.to_string(),
        known,
    }
}

/// The dotted paths of `value`'s leaves (an empty map or list is a leaf).
fn leaf_paths(value: &Value, prefix: &str, out: &mut Vec<String>) {
    let join = |key: &str| {
        if prefix.is_empty() {
            key.to_string()
        } else {
            format!("{prefix}.{key}")
        }
    };
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                leaf_paths(child, &join(key), out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, child) in items.iter().enumerate() {
                leaf_paths(child, &join(&i.to_string()), out);
            }
        }
        Value::Object(_) | Value::Array(_) if !prefix.is_empty() => {
            out.push(format!("{prefix} (empty)"))
        }
        _ if !prefix.is_empty() => out.push(prefix.to_string()),
        _ => {}
    }
}

fn classify(error: &RenderError, ctx: &Value) -> TemplateError {
    match error.reason() {
        RenderErrorReason::MissingVariable(Some(path)) => unknown(path, ctx),
        RenderErrorReason::MissingVariable(None) => unknown("?", ctx),
        RenderErrorReason::Other(message) if message.starts_with("env:") => {
            TemplateError::UnsetEnv(message.trim_start_matches("env:").to_string())
        }
        RenderErrorReason::TemplateError(e) => TemplateError::Syntax(syntax(e)),
        other => TemplateError::Syntax(other.to_string()),
    }
}

/// A handlebars syntax error in one line, without the parser's list of
/// grammar rules and its drawing of the template (the position is shown as
/// `file:line:column` instead).
fn syntax(error: &::handlebars::TemplateError) -> String {
    use ::handlebars::TemplateErrorReason as R;
    match error.reason() {
        R::MismatchingClosedHelper(open, close) | R::MismatchingClosedDecorator(open, close) => {
            format!("`{{{{#{open}}}}}` is closed by `{{{{/{close}}}}}`; close it with `{{{{/{open}}}}}`")
        }
        R::InvalidSyntax(_) => "not valid handlebars here: an unclosed `{{`, a block such as `{{#if}}` without its argument or its `{{/if}}`, or a stray `}}`".to_string(),
        R::InvalidParam(param) => format!("invalid parameter `{param}`"),
        other => other.to_string(),
    }
}

/// `{{toJson X}}`: X as JSON, which YAML reads back as the same value: a
/// text stays a text (`{{toJson (env "PORT")}}` is the string `"8080"`,
/// where `{{env "PORT"}}` in a values file would be the number 8080).
fn to_json_helper(
    h: &Helper,
    _: &Handlebars,
    _: &Context,
    _: &mut RenderContext,
    out: &mut dyn Output,
) -> HelperResult {
    let value = h
        .param(0)
        .map(|p| p.value())
        .ok_or(RenderErrorReason::ParamNotFoundForIndex("toJson", 0))?;
    out.write(&serde_json::to_string(value).unwrap_or_default())?;
    Ok(())
}

/// `{{env "NAME"}}` or `{{env "NAME" "default"}}`.
fn env_helper(
    h: &Helper,
    _: &Handlebars,
    _: &Context,
    _: &mut RenderContext,
    out: &mut dyn Output,
) -> HelperResult {
    let name = h
        .param(0)
        .and_then(|p| p.value().as_str())
        .ok_or(RenderErrorReason::ParamNotFoundForIndex("env", 0))?;
    let value = match std::env::var(name) {
        Ok(value) => value,
        Err(_) => match h.param(1).map(|p| p.value()) {
            Some(Value::String(default)) => default.clone(),
            Some(other) => other.to_string(),
            None => return Err(RenderErrorReason::Other(format!("env:{name}")).into()),
        },
    };
    out.write(&value)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> TemplateContext {
        let values = json!({"k8sServiceHost": "10.25.11.10", "clusterId": 1, "mesh": {"on": true}});
        context(
            "infra",
            Some("admin@infra"),
            values.as_object().unwrap(),
            Some(("kube-system", "cilium")),
            "/repo",
        )
    }

    #[test]
    fn renders_strings() {
        let r = Renderer::new();
        assert_eq!(
            r.render_str("{{cluster.name}}-{{release.namespace}}", &ctx())
                .unwrap(),
            "infra-kube-system"
        );
    }

    /// The shortcut renders what handlebars renders, to the byte, or
    /// leaves the template to handlebars; handlebars is the judge.
    #[test]
    fn interpolation_renders_what_handlebars_renders() {
        let r = Renderer::new();
        let values = json!({
            "k8sServiceHost": "10.25.11.10",
            "clusterId": 1,
            "mesh": {"on": true},
            "odd": "a: b #c",
            "quoted": "it's \"q\"\nline",
            "dash": "-x",
        });
        let ctx = context(
            "infra",
            Some("admin@infra"),
            values.as_object().unwrap(),
            Some(("kube-system", "cilium")),
            "/repo",
        );
        let by_handlebars = |t: &str| r.render_with(&r.registry, t, &ctx).map_err(|e| e.error);
        let by_yaml = |t: &str| r.render_with(&r.yaml, t, &ctx).map_err(|e| e.error);
        let mut taken = 0;
        for t in [
            "registry.{{cluster.values.k8sServiceHost}}/app",
            "{{cluster.name}}-{{release.namespace}}/{{release.name}}",
            "{{ cluster.name }}{{cluster.context}}",
            "{{\n cluster.name\n}}",
            "a {{cluster.name}}}",
            "{{{cluster.name}}}",
            "{{cluster.name}",
            "x }} {{cluster.name}}",
            "\\{{cluster.name}}",
            "{{~cluster.name}}",
            "{{cluster.values.clusterId}}x",
            "a: {{cluster.values.odd}}\nb: {{cluster.values.quoted}}\nc: {{cluster.values.dash}}",
            "{{cluster.values.mesh}}",
            "{{cluster.values.nope}}",
            "{{root}}",
            "{{env \"HOME\"}}",
            "{{#if cluster.name}}y{{/if}}",
            "{{! a comment }}{{cluster.name}}",
            "{{cluster.name}}{{",
            "héllo {{release.name}} ✓",
        ] {
            let fast = interpolated(t, ctx.value(), str::to_string);
            if let Some(fast) = &fast {
                taken += 1;
                assert_eq!(Ok(fast.clone()), by_handlebars(t), "{t:?}");
            }
            if let Some(fast) = interpolated(t, ctx.value(), yaml_scalar) {
                assert_eq!(Ok(fast), by_yaml(t), "{t:?}");
            }
        }
        assert_eq!(taken, 7, "the templates the shortcut takes");
        // And on templates made of the pieces that matter, at random.
        let pieces = [
            "{{",
            "}}",
            "{",
            "}",
            " ",
            "\\",
            "x",
            ".",
            "~",
            "#",
            "!",
            "\n",
            "cluster.name",
            "{{cluster.name}}",
            "{{ release.name }}",
            "{{cluster.values.clusterId}}",
        ];
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let mut compared = 0;
        for _ in 0..20_000 {
            let len = 1 + next(8);
            let t: String = (0..len).map(|_| pieces[next(pieces.len())]).collect();
            if let Some(fast) = interpolated(&t, ctx.value(), str::to_string) {
                compared += 1;
                assert_eq!(Ok(fast), by_handlebars(&t), "{t:?}");
            }
            if let Some(fast) = interpolated(&t, ctx.value(), yaml_scalar) {
                assert_eq!(Ok(fast), by_yaml(&t), "{t:?}");
            }
        }
        assert!(compared > 1_000, "{compared}");
    }

    #[test]
    fn a_template_that_reads_the_environment_is_known() {
        for t in [
            "token: {{env \"TOKEN\"}}",
            "a: {{ env 'A' \"b\" }}",
            "{{#if (env \"X\")}}x{{/if}}",
            "{{cluster.values.env}}",
        ] {
            assert!(reads_environment(t), "{t}");
        }
        for t in [
            "env: prod\nname: {{cluster.name}}",
            "{{environment}}",
            "a: env",
        ] {
            assert!(!reads_environment(t), "{t}");
        }
    }

    #[test]
    fn a_whole_expression_keeps_its_type() {
        let r = Renderer::new();
        let v = json!({"id": "{{cluster.values.clusterId}}", "mesh": "{{ cluster.values.mesh }}", "s": "id-{{cluster.values.clusterId}}"});
        assert_eq!(
            r.render_value(&v, &ctx()).unwrap(),
            json!({"id": 1, "mesh": {"on": true}, "s": "id-1"})
        );
    }

    #[test]
    fn unknown_variable_is_named() {
        let r = Renderer::new();
        let named = |e: TemplateError| match e {
            TemplateError::UnknownVariable { name, .. } => name,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            r.render_str("x {{cluster.values.nope}}", &ctx())
                .map_err(named),
            Err("cluster.values.nope".to_string())
        );
        assert_eq!(
            r.render_value(&json!("{{cluster.values.nope}}"), &ctx())
                .map_err(|l| named(l[0].error.clone())),
            Err("cluster.values.nope".to_string())
        );
        // A typo: the nearest defined path, and what is defined.
        let e = r.render_str("{{cluster.nme}}", &ctx()).unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("template uses `cluster.nme`, which is not defined; did you mean `cluster.name`? (defined: "),
            "{text}"
        );
        assert!(text.contains("cluster.values."), "{text}");
    }

    #[test]
    fn env_needs_the_variable_or_a_default() {
        let r = Renderer::new();
        assert_eq!(
            r.render_str("{{env \"BOOTSTRAP_TEST_SURELY_UNSET\"}}", &ctx()),
            Err(TemplateError::UnsetEnv(
                "BOOTSTRAP_TEST_SURELY_UNSET".into()
            ))
        );
        assert_eq!(
            r.render_str(
                "{{env \"BOOTSTRAP_TEST_SURELY_UNSET\" \"fallback\"}}",
                &ctx()
            )
            .unwrap(),
            "fallback"
        );
        assert_eq!(
            r.render_str("{{env \"PATH\"}}", &ctx()).unwrap(),
            std::env::var("PATH").unwrap()
        );
    }

    #[test]
    fn bad_syntax_is_reported() {
        let r = Renderer::new();
        assert!(matches!(
            r.render_str("{{#if}}", &ctx()),
            Err(TemplateError::Syntax(_))
        ));
        assert!(matches!(
            r.render_str("{{cluster.name", &ctx()),
            Err(TemplateError::Syntax(_))
        ));
    }

    #[test]
    fn to_json_keeps_a_text_a_text() {
        let r = Renderer::new();
        let text = r
            .render_yaml(
                "p: {{toJson cluster.values.k8sServiceHost}}\nq: {{toJson cluster.values.clusterId}}\nr: {{toJson (env \"BOOTSTRAP_TEST_UNSET\" \"0644\")}}\n",
                &ctx(),
            )
            .unwrap();
        assert_eq!(text, "p: \"10.25.11.10\"\nq: 1\nr: \"0644\"\n");
    }

    #[test]
    fn yaml_scalars_never_add_structure() {
        assert_eq!(yaml_scalar("10.0.0.1"), "10.0.0.1");
        assert_eq!(yaml_scalar("true"), "true");
        assert_eq!(
            yaml_scalar("1\nhostNetwork: true"),
            r#""1\nhostNetwork: true""#
        );
        assert_eq!(yaml_scalar("a: b"), r#""a: b""#);
        assert_eq!(yaml_scalar("- x"), r#""- x""#);
        assert_eq!(yaml_scalar(""), r#""""#);
        assert_eq!(yaml_scalar("x #y"), r#""x #y""#);
    }

    #[test]
    fn a_values_file_template_cannot_inject_keys() {
        let renderer = Renderer::new();
        let values = json!({"note": "1\nhostNetwork: true"});
        let ctx = context("infra", None, values.as_object().unwrap(), None, "/");
        let text = renderer
            .render_yaml("podLabel: {{cluster.values.note}}\n", &ctx)
            .unwrap();
        let parsed: Value = crate::yaml::document(&text, std::path::Path::new("v.yaml")).unwrap();
        assert_eq!(parsed, json!({"podLabel": "1\nhostNetwork: true"}));
    }

    #[test]
    fn a_cached_template_renders_each_context_afresh() {
        let r = Renderer::new();
        let values = json!({});
        let map = values.as_object().unwrap();
        let template = "{{cluster.name}}/{{release.name}}";
        let a = context("infra", None, map, Some(("ns", "a")), "/");
        let b = context("apps", None, map, Some(("ns", "b")), "/");
        assert_eq!(r.render_str(template, &a).unwrap(), "infra/a");
        assert_eq!(r.render_str(template, &b).unwrap(), "apps/b");
        assert!(matches!(
            r.render_str("{{cluster.values.x}}-", &a),
            Err(TemplateError::UnknownVariable { name, .. }) if name == "cluster.values.x"
        ));
    }

    #[test]
    fn no_html_escaping() {
        let r = Renderer::new();
        let values = json!({"q": "a&b<c>"});
        let c = context("x", None, values.as_object().unwrap(), None, "/");
        assert_eq!(r.render_str("{{cluster.values.q}}", &c).unwrap(), "a&b<c>");
    }
}
