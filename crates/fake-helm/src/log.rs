//! `$FAKE_HELM_LOG`: one JSON line per invocation, appended with a single
//! `write` on an `O_APPEND` file so concurrent processes never interleave.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;

use serde::Serialize;
use serde_json::Value;

use crate::values::parse_values_text;

/// A values file as it was when helm was started (the caller deletes it afterwards).
#[derive(Serialize, Clone, Debug)]
pub struct ValuesFile {
    pub path: String,
    /// Permission bits in octal, e.g. "600"; null for stdin or an unreadable file.
    pub mode: Option<String>,
    /// The parsed YAML; null when it could not be read or parsed.
    pub content: Value,
    /// Why the file could not be used; helm fails the command with this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

pub fn snapshot(paths: &[String]) -> Vec<ValuesFile> {
    paths.iter().map(|p| snapshot_one(p)).collect()
}

fn snapshot_one(path: &str) -> ValuesFile {
    let (mode, text) = if path == "-" {
        let mut text = String::new();
        let read = std::io::stdin().read_to_string(&mut text).map(|_| text);
        (None, read)
    } else {
        let mode = std::fs::metadata(path)
            .ok()
            .map(|m| format!("{:o}", m.permissions().mode() & 0o7777));
        (mode, std::fs::read_to_string(path))
    };
    let parsed = match text {
        Ok(text) => parse_values_text(&text, path),
        Err(e) => Err(format!("open {path}: {}", io_message(&e))),
    };
    match parsed {
        Ok(content) => ValuesFile {
            path: path.to_string(),
            mode,
            content,
            error: None,
        },
        Err(e) => ValuesFile {
            path: path.to_string(),
            mode,
            content: Value::Null,
            error: Some(e),
        },
    }
}

/// Go's wording for the common open errors, which is what helm prints.
fn io_message(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

#[derive(Serialize)]
pub struct Entry<'a> {
    pub argv: &'a [String],
    pub pid: u32,
    pub start_ms: u128,
    pub end_ms: u128,
    pub exit_code: i32,
    pub values_files: &'a [ValuesFile],
}

pub fn append(entry: &Entry<'_>) {
    let Some(path) = std::env::var_os("FAKE_HELM_LOG").filter(|p| !p.is_empty()) else {
        return;
    };
    let Ok(mut line) = serde_json::to_vec(entry) else {
        return;
    };
    line.push(b'\n');
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path);
    let written = file.and_then(|mut f| f.write_all(&line));
    if let Err(e) = written {
        eprintln!(
            "fake-helm: cannot write FAKE_HELM_LOG {}: {e}",
            path.to_string_lossy()
        );
    }
}
