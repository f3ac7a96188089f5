//! The run record (docs/design.md#run-record): every `apply` and `destroy`
//! writes its events as JSON Lines, exactly as `--output json` prints them
//! (secrets redacted as on screen), to a file under the cache directory,
//! one directory per cluster, the newest [`KEEP`] kept; the last line says
//! how the command exited. `bootstrap runs` lists and shows them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::event::Stamped;
use crate::reporter::Reporter;

/// Records kept per cluster; older ones are removed when a run starts.
pub(crate) const KEEP: usize = 20;

/// The records of this process's runs still open: the exit line is
/// appended to each once the command's exit code is known.
static OPEN: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Where the records live: `DIR/runs` with `--cache-dir DIR`, else
/// `$XDG_CACHE_HOME/bootstrap/runs`, else `~/.cache/bootstrap/runs`.
pub(crate) fn root(cache_dir: Option<&Path>) -> Option<PathBuf> {
    if let Some(dir) = cache_dir {
        return Some(dir.join("runs"));
    }
    let set = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let base = set("XDG_CACHE_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| set("HOME").map(|home| home.join(".cache")))?;
    Some(base.join("bootstrap").join("runs"))
}

/// A reporter that writes every event to the record as a JSON line.
pub(crate) struct Recorder {
    file: std::fs::File,
    /// A write failed (a full disk): stop writing, the run goes on.
    broken: bool,
}

impl Reporter for Recorder {
    fn report(&mut self, event: &Stamped) {
        if self.broken {
            return;
        }
        let Ok(line) = serde_json::to_string(event) else {
            return;
        };
        self.broken = writeln!(self.file, "{line}").is_err();
    }
}

/// Opens a new record for `command` on `cluster` under `root` (removing
/// all but the newest [`KEEP`] - 1 older ones), private to the user. `None`
/// when it cannot be written: a run is never stopped for its record.
pub(crate) fn open(root: &Path, cluster: &str, command: &str) -> Option<Recorder> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = root.join(cluster);
    std::fs::create_dir_all(&dir).ok()?;
    rotate(&dir, KEEP - 1);
    let stamp = crate::duration::timestamp(std::time::SystemTime::now()).replace(':', "-");
    let path = dir.join(format!("{stamp}-{command}-{}.jsonl", std::process::id()));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .ok()?;
    OPEN.lock().unwrap_or_else(|e| e.into_inner()).push(path);
    Some(Recorder {
        file,
        broken: false,
    })
}

/// Appends how the command exited to every record this process opened:
/// `{"event":"exited","schemaVersion":1,"exitCode":N}`, with the error's
/// JSON when it failed;
/// then names each on stderr, after the error (`run record: PATH`).
pub(crate) fn close(code: i32, error: Option<serde_json::Value>) {
    let paths = std::mem::take(&mut *OPEN.lock().unwrap_or_else(|e| e.into_inner()));
    let mut line = serde_json::json!({
        "event": "exited",
        crate::output::SCHEMA_VERSION_KEY: crate::output::SCHEMA_VERSION,
        "exitCode": code,
    });
    if let Some(error) = error {
        line["error"] = error;
    }
    for path in paths {
        if let Ok(mut file) = std::fs::OpenOptions::new().append(true).open(&path) {
            let _ = writeln!(file, "{line}");
        }
        let _ = writeln!(std::io::stderr(), "run record: {}", path.display());
    }
}

/// The records of `dir`, newest first.
pub(crate) fn records(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    // The names start with the UTC time: newest last by name.
    found.sort();
    found.reverse();
    found
}

/// Removes all but the newest `keep` records of `dir`.
fn rotate(dir: &Path, keep: usize) {
    for old in records(dir).into_iter().skip(keep) {
        let _ = std::fs::remove_file(old);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_kept_newest_first_and_rotated() {
        let dir = tempfile::tempdir().unwrap();
        let cluster = dir.path().join("infra");
        std::fs::create_dir_all(&cluster).unwrap();
        for i in 0..25 {
            std::fs::write(
                cluster.join(format!("2026-11-29T03-00-{i:02}Z-apply-1.jsonl")),
                "",
            )
            .unwrap();
        }
        std::fs::write(cluster.join("notes.txt"), "").unwrap();
        rotate(&cluster, KEEP);
        let kept = records(&cluster);
        assert_eq!(kept.len(), KEEP);
        assert!(kept[0].ends_with("2026-11-29T03-00-24Z-apply-1.jsonl"));
        assert!(kept[KEEP - 1].ends_with("2026-11-29T03-00-05Z-apply-1.jsonl"));
        assert!(cluster.join("notes.txt").exists());
    }
}
