//! The template text read: `{{ … }}` actions split from the text
//! (`lex`), an action's tokens (`tokenize`) and its commands and
//! pipelines (`Parser`), each failing with what the subset does not read.

use super::{Origin, Unsupported};

/// An action the importer's template subset does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum SyntaxError {
    #[error("`||` is not Go template syntax")]
    Or,
    #[error("unterminated string")]
    UnterminatedString,
    #[error("string escape `\\{0}` is not evaluated by the importer")]
    Escape(String),
    #[error("unterminated raw string")]
    UnterminatedRawString,
    #[error("number `{0}` is not evaluated by the importer")]
    Number(String),
    #[error("`{0}` is not evaluated by the importer")]
    Character(char),
    #[error(
        "`{0}` (control flow) is not evaluated by the importer; the result depends on values it would have to guess"
    )]
    ControlFlow(String),
    #[error("`{0}` (control flow) is not evaluated by the importer")]
    ControlWord(String),
    #[error("cannot assign to a field")]
    AssignToField,
    #[error("unexpected text after the pipeline")]
    TrailingText,
    #[error("empty command")]
    EmptyCommand,
    #[error("`(` without `)`")]
    Unclosed,
    #[error("unexpected punctuation")]
    Punctuation,
}

pub(super) enum Node {
    Text(String),
    Action {
        line: usize,
        source: String,
        body: String,
    },
}

/// Splits text and actions, applying `{{-` / `-}}` trimming.
pub(super) fn lex(text: &str, at: &Origin) -> Result<Vec<Node>, Unsupported> {
    let mut nodes = Vec::new();
    let mut rest = text;
    let mut offset = 0usize;
    let mut trim_next = false;
    while let Some(start) = rest.find("{{") {
        let mut before = &rest[..start];
        if trim_next {
            before = before.trim_start();
        }
        let after_open = &rest[start + 2..];
        let left_trim = after_open.starts_with("- ")
            || after_open.starts_with("-\t")
            || after_open.starts_with("-\n");
        if left_trim {
            before = before.trim_end();
        }
        nodes.push(Node::Text(before.to_string()));
        let line = at.first_line + text[..offset + start].matches('\n').count();
        let Some(end) = find_close(after_open) else {
            return Err(Unsupported {
                file: at.file.to_path_buf(),
                line,
                construct: after_open.lines().next().unwrap_or("").to_string(),
                reason: "`{{` without a closing `}}`".into(),
            });
        };
        let inner = &after_open[..end];
        let source = format!("{{{{{inner}}}}}");
        let mut body = inner;
        if left_trim {
            body = &body[1..];
        }
        trim_next = body.ends_with(" -") || body.ends_with("\t-") || body.ends_with("\n-");
        if trim_next {
            body = &body[..body.len() - 1];
        }
        let body = body.trim();
        if !(body.starts_with("/*") && body.ends_with("*/")) {
            nodes.push(Node::Action {
                line,
                source,
                body: body.to_string(),
            });
        }
        let consumed = start + 2 + end + 2;
        offset += consumed;
        rest = &rest[consumed..];
    }
    let tail = if trim_next { rest.trim_start() } else { rest };
    nodes.push(Node::Text(tail.to_string()));
    Ok(nodes)
}

/// The index of the `}}` closing an action, skipping string literals.
pub(super) fn find_close(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i + 1 < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'`' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'`' {
                    i += 1;
                }
            }
            b'}' if bytes[i + 1] == b'}' => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Token {
    Open,
    /// `)` and whether a field chain follows without a space.
    Close,
    Pipe,
    Declare,
    Assign,
    Str(String),
    Num(serde_json::Number),
    Ident(String),
    /// `.a.b` (an empty path is `.` itself); `glued` when it follows `)` directly.
    Field {
        path: Vec<String>,
        glued: bool,
    },
    Var(String, Vec<String>),
}

/// An action's tokens.
// One piece (tests/it/architecture.rs lists it): one pass over the
// characters, whose state (quotes, parentheses, the token being read) lives
// across the loop.
pub(super) fn tokenize(body: &str) -> Result<Vec<Token>, SyntaxError> {
    let chars: Vec<char> = body.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    let ident_char = |c: char| c.is_alphanumeric() || c == '_';
    let path_at = |i: &mut usize| -> Vec<String> {
        let mut path = Vec::new();
        while *i < chars.len() && chars[*i] == '.' {
            let start = *i + 1;
            let mut j = start;
            while j < chars.len() && ident_char(chars[j]) {
                j += 1;
            }
            if j == start {
                *i += 1;
                break;
            }
            path.push(chars[start..j].iter().collect());
            *i = j;
        }
        path
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\n' | '\r' => i += 1,
            '(' => {
                tokens.push(Token::Open);
                i += 1;
            }
            ')' => {
                tokens.push(Token::Close);
                i += 1;
                if i < chars.len() && chars[i] == '.' {
                    let path = path_at(&mut i);
                    tokens.push(Token::Field { path, glued: true });
                }
            }
            '|' => {
                if chars.get(i + 1) == Some(&'|') {
                    return Err(SyntaxError::Or);
                }
                tokens.push(Token::Pipe);
                i += 1;
            }
            ':' if chars.get(i + 1) == Some(&'=') => {
                tokens.push(Token::Declare);
                i += 2;
            }
            '=' => {
                tokens.push(Token::Assign);
                i += 1;
            }
            '"' => {
                let mut s = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err(SyntaxError::UnterminatedString),
                        Some('"') => break,
                        Some('\\') => {
                            i += 1;
                            match chars.get(i) {
                                Some('n') => s.push('\n'),
                                Some('t') => s.push('\t'),
                                Some('\\') => s.push('\\'),
                                Some('"') => s.push('"'),
                                other => {
                                    return Err(SyntaxError::Escape(
                                        other.map(|c| c.to_string()).unwrap_or_default(),
                                    ));
                                }
                            }
                        }
                        Some(&other) => s.push(other),
                    }
                    i += 1;
                }
                i += 1;
                tokens.push(Token::Str(s));
            }
            '`' => {
                let start = i + 1;
                let end = chars[start..]
                    .iter()
                    .position(|&c| c == '`')
                    .ok_or(SyntaxError::UnterminatedRawString)?;
                tokens.push(Token::Str(chars[start..start + end].iter().collect()));
                i = start + end + 1;
            }
            '.' => {
                let path = path_at(&mut i);
                tokens.push(Token::Field { path, glued: false });
            }
            '$' => {
                let start = i;
                i += 1;
                while i < chars.len() && ident_char(chars[i]) {
                    i += 1;
                }
                let name: String = chars[start..i].iter().collect();
                let path = path_at(&mut i);
                tokens.push(Token::Var(name, path));
            }
            c if c.is_ascii_digit()
                || (c == '-' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit())) =>
            {
                let start = i;
                i += 1;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                    i += 1;
                }
                let text: String = chars[start..i].iter().collect();
                let number = text
                    .parse::<i64>()
                    .ok()
                    .map(serde_json::Number::from)
                    .or_else(|| {
                        text.parse::<f64>()
                            .ok()
                            .and_then(serde_json::Number::from_f64)
                    })
                    .ok_or_else(|| SyntaxError::Number(text.clone()))?;
                tokens.push(Token::Num(number));
            }
            c if ident_char(c) => {
                let start = i;
                while i < chars.len() && ident_char(chars[i]) {
                    i += 1;
                }
                tokens.push(Token::Ident(chars[start..i].iter().collect()));
            }
            other => return Err(SyntaxError::Character(other)),
        }
    }
    Ok(tokens)
}

pub(super) type Cmd = Vec<Arg>;

#[derive(Debug, Clone)]
pub(super) enum Arg {
    Str(String),
    Num(serde_json::Number),
    Bool(bool),
    Nil,
    Func(String),
    Field(Vec<String>),
    Var(String, Vec<String>),
    Sub(Vec<Cmd>, Vec<String>),
}

pub(super) struct Parser {
    tokens: Vec<Token>,
    at: usize,
}

pub(super) const CONTROL: &[&str] = &[
    "if", "else", "end", "range", "with", "define", "template", "block", "break", "continue",
];

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    pub(super) fn new(tokens: Vec<Token>) -> Parser {
        Parser { tokens, at: 0 }
    }

    pub(super) fn action(&mut self) -> Result<(Option<String>, Vec<Cmd>), SyntaxError> {
        if let Some(Token::Ident(word)) = self.peek()
            && CONTROL.contains(&word.as_str())
        {
            return Err(SyntaxError::ControlFlow(word.clone()));
        }
        let mut decl = None;
        if let (Some(Token::Var(name, path)), Some(Token::Declare | Token::Assign)) =
            (self.tokens.first(), self.tokens.get(1))
        {
            if !path.is_empty() {
                return Err(SyntaxError::AssignToField);
            }
            decl = Some(name.clone());
            self.at = 2;
        }
        let pipe = self.pipeline()?;
        if self.at != self.tokens.len() {
            return Err(SyntaxError::TrailingText);
        }
        Ok((decl, pipe))
    }

    fn pipeline(&mut self) -> Result<Vec<Cmd>, SyntaxError> {
        let mut cmds = vec![self.command()?];
        while self.peek() == Some(&Token::Pipe) {
            self.at += 1;
            cmds.push(self.command()?);
        }
        Ok(cmds)
    }

    fn command(&mut self) -> Result<Cmd, SyntaxError> {
        let mut args = Vec::new();
        while let Some(token) = self.peek() {
            if matches!(token, Token::Pipe | Token::Close) {
                break;
            }
            args.push(self.operand()?);
        }
        if args.is_empty() {
            return Err(SyntaxError::EmptyCommand);
        }
        Ok(args)
    }

    fn operand(&mut self) -> Result<Arg, SyntaxError> {
        let token = self.tokens[self.at].clone();
        self.at += 1;
        Ok(match token {
            Token::Str(s) => Arg::Str(s),
            Token::Num(n) => Arg::Num(n),
            Token::Field { path, .. } => Arg::Field(path),
            Token::Var(name, path) => Arg::Var(name, path),
            Token::Ident(word) => match word.as_str() {
                "true" => Arg::Bool(true),
                "false" => Arg::Bool(false),
                "nil" => Arg::Nil,
                w if CONTROL.contains(&w) => {
                    return Err(SyntaxError::ControlWord(w.to_string()));
                }
                _ => Arg::Func(word),
            },
            Token::Open => {
                let pipe = self.pipeline()?;
                if self.peek() != Some(&Token::Close) {
                    return Err(SyntaxError::Unclosed);
                }
                self.at += 1;
                let mut path = Vec::new();
                if let Some(Token::Field {
                    path: p,
                    glued: true,
                }) = self.peek()
                {
                    path = p.clone();
                    self.at += 1;
                }
                Arg::Sub(pipe, path)
            }
            Token::Close | Token::Pipe | Token::Declare | Token::Assign => {
                return Err(SyntaxError::Punctuation);
            }
        })
    }
}
