//! The Flux oracle as one long-lived process (`flux-oracle -serve`): each
//! tree is one request line and one answer line, so a thousand generated
//! trees cost one Go process, not a thousand.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

use serde_json::{Value, json};

pub const ORACLE: &str = "tools/realenv/.bin/flux-oracle/flux-oracle";
/// flux-operator's CLI (`tools/realenv/build flux-operator`): the oracle
/// builds ResourceSets with it.
pub const FLUX_OPERATOR: &str = "tools/realenv/.bin/flux-operator/cli";

struct Process {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Drop for Process {
    fn drop(&mut self) {
        // Closing stdin ends the serve loop; wait so no zombie is left.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

static PROCESS: Mutex<Option<Process>> = Mutex::new(None);

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Whether the oracle builds ResourceSets (flux-operator's CLI is built).
pub fn has_flux_operator() -> bool {
    manifest().join(FLUX_OPERATOR).is_file()
}

fn start() -> Result<Process, String> {
    let mut command = Command::new(manifest().join(ORACLE));
    command.arg("-serve");
    if has_flux_operator() {
        command
            .arg("-flux-operator")
            .arg(manifest().join(FLUX_OPERATOR));
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| {
            format!("cannot run the oracle ({ORACLE}; tools/realenv/build flux-oracle): {e}")
        })?;
    let stdin = child.stdin.take().ok_or("the oracle has no stdin")?;
    let stdout = BufReader::new(child.stdout.take().ok_or("the oracle has no stdout")?);
    Ok(Process {
        child,
        stdin,
        stdout,
    })
}

/// The oracle's builds for `root/entry`; with `kubeconfig`, each also
/// applied to that API server (its `apply`, [`super::apply`]).
pub fn builds(root: &Path, entry: &str, kubeconfig: Option<&Path>) -> Result<Vec<Value>, String> {
    let mut guard = PROCESS.lock().unwrap_or_else(|e| e.into_inner());
    if guard.is_none() {
        *guard = Some(start()?);
    }
    let process = guard.as_mut().expect("started above");
    let root: PathBuf = std::path::absolute(root).map_err(|e| e.to_string())?;
    let request = json!({"root": root, "entrypoint": entry, "kubeconfig": kubeconfig}).to_string();
    let mut line = String::new();
    let answered = writeln!(process.stdin, "{request}")
        .and_then(|()| process.stdin.flush())
        .and_then(|()| process.stdout.read_line(&mut line));
    match answered {
        Ok(n) if n > 0 => {}
        Ok(_) => {
            *guard = None;
            return Err(format!("the oracle exited on {}", root.display()));
        }
        Err(e) => {
            *guard = None;
            return Err(format!("the oracle failed on {}: {e}", root.display()));
        }
    }
    let doc: Value = serde_json::from_str(&line).map_err(|e| e.to_string())?;
    if let Some(error) = doc["error"].as_str() {
        return Err(format!("the oracle failed on {}: {error}", root.display()));
    }
    Ok(doc["builds"].as_array().cloned().unwrap_or_default())
}
