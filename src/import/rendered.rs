//! helmfile's own rendering of a state file (docs/coming-from-helmfile.md):
//! `helmfile --file F [--environment E] build` prints each state file
//! after helmfile has rendered it (`pkg/app/app.go` `PrintState`: the whole
//! `.gotmpl` file with its environment and state values, `bases:`,
//! release templates, and every release field), one YAML document per
//! file after a `#  Source: PATH` line; `--embed-values` replaces each
//! values entry by the values helmfile computes from it
//! (`LoadYAMLForEmbedding`). The importer converts that state, so `exec`,
//! `range`, environments and everything else mean exactly what they mean
//! to helmfile; without helmfile it evaluates its own template subset
//! (`gotmpl`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Map, Value};

use super::gotmpl::normalize;
use super::hooks::absolute;

/// The helmfile binary the import renders with.
#[derive(Debug, Clone)]
pub(crate) struct Helmfile {
    pub program: PathBuf,
    /// As `helmfile version` prints it, e.g. `v1.8.0`.
    pub version: String,
}

/// How the import rendered the helmfiles, said in its output.
#[derive(Debug, Clone)]
pub(crate) enum Renderer {
    Helmfile(Helmfile),
    /// The importer's own template subset, and why helmfile was not used.
    Subset(String),
}

/// The helmfile to render with: `explicit` (`--helmfile PATH`, else
/// `BOOTSTRAP_HELMFILE`) must run, else it is an error; without it,
/// `helmfile` on PATH when there is one that runs. `Ok(Err(why))` when
/// there is none.
pub(crate) fn find(
    explicit: Option<&Path>,
) -> Result<Result<Helmfile, NoHelmfile>, BrokenHelmfile> {
    if let Some(program) = explicit {
        return version(program)
            .map(|version| {
                Ok(Helmfile {
                    program: program.to_path_buf(),
                    version,
                })
            })
            .map_err(|why| BrokenHelmfile {
                program: program.to_path_buf(),
                why,
            });
    }
    let Some(program) = on_path("helmfile") else {
        return Ok(Err(NoHelmfile::NotOnPath));
    };
    Ok(match version(&program) {
        Ok(version) => Ok(Helmfile { program, version }),
        Err(why) => Err(NoHelmfile::DoesNotRun { program, why }),
    })
}

/// Why there is no helmfile to render with (the importer's own template
/// subset reads the files then).
#[derive(Debug, thiserror::Error)]
pub(crate) enum NoHelmfile {
    #[error("no `helmfile` on PATH")]
    NotOnPath,
    #[error("`{}` does not run: {why}", .program.display())]
    DoesNotRun { program: PathBuf, why: NoVersion },
}

/// The helmfile given with `--helmfile` (or `BOOTSTRAP_HELMFILE`) does not run.
#[derive(Debug, thiserror::Error)]
#[error(
    "helmfile `{}` does not run ({why}); give a working helmfile with --helmfile (or BOOTSTRAP_HELMFILE), or leave both unset to use helmfile on PATH or the importer's own template subset",
    .program.display()
)]
pub(crate) struct BrokenHelmfile {
    pub program: PathBuf,
    pub why: NoVersion,
}

/// Why `helmfile version -o short` said no version.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NoVersion {
    #[error("{0}")]
    Spawn(std::io::Error),
    #[error("`version -o short` exited with {status}: {stderr}")]
    Exit {
        status: std::process::ExitStatus,
        /// The last line of its stderr.
        stderr: String,
    },
}

fn on_path(name: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// `helmfile version -o short`.
fn version(program: &Path) -> Result<String, NoVersion> {
    let out = Command::new(program)
        .args(["version", "-o", "short"])
        // No upgrade notice: it asks GitHub for the latest release.
        .env("HELMFILE_UPGRADE_NOTICE_DISABLED", "1")
        .stdin(Stdio::null())
        .output()
        .map_err(NoVersion::Spawn)?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || text.is_empty() {
        return Err(NoVersion::Exit {
            status: out.status,
            stderr: last_line(&String::from_utf8_lossy(&out.stderr)),
        });
    }
    Ok(text.lines().next().unwrap_or("").trim().to_string())
}

fn last_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("")
        .to_string()
}

/// A place where rendering with helmfile runs one of the repository's
/// commands: an `exec` template call, or a hook on `prepare` (helmfile runs
/// `prepare` hooks while it loads the state, `build` included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Runs {
    pub file: PathBuf,
    pub line: usize,
    pub what: &'static str,
}

impl std::fmt::Display for Runs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at {}:{}", self.what, self.file.display(), self.line)
    }
}

/// What rendering `files` (state files, and the `.gotmpl` files beside
/// them) with helmfile would execute.
pub(crate) fn commands(files: &[PathBuf]) -> Vec<Runs> {
    let mut texts: Vec<PathBuf> = files.to_vec();
    for file in files {
        let Some(dir) = file.parent() else { continue };
        if let Ok(entries) = std::fs::read_dir(dir) {
            let mut beside: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().ends_with(".gotmpl") && !texts.contains(p))
                .collect();
            beside.sort();
            texts.extend(beside);
        }
    }
    let mut out = Vec::new();
    for file in texts {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let mut after_events = false;
        for (i, line) in text.lines().enumerate() {
            let code = line.split(" #").next().unwrap_or(line);
            let exec = code.contains("{{")
                && code.match_indices("exec").any(|(at, _)| {
                    let before = code[..at].chars().next_back();
                    let after = code[at + 4..].chars().next();
                    !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
                        && after.is_some_and(|c| c == ' ' || c == '\t')
                });
            if exec {
                out.push(Runs {
                    file: file.clone(),
                    line: i + 1,
                    what: "an `exec` template call",
                });
            }
            let raw = code.trim();
            let item = raw.strip_prefix('-').map(str::trim_start);
            let body = item.unwrap_or(raw);
            let events = body.starts_with("events:");
            let listed =
                after_events && item.is_some_and(|i| i.trim_matches(['"', '\'', ' ']) == "prepare");
            if (events && body.contains("prepare")) || listed {
                out.push(Runs {
                    file: file.clone(),
                    line: i + 1,
                    what: "a `prepare` hook",
                });
            }
            if events {
                after_events = true;
            } else if body.contains(':') || (item.is_none() && !raw.is_empty()) {
                after_events = false;
            }
        }
    }
    out
}

/// One state file as helmfile rendered it: its fields with values files
/// as paths (`doc`), and the same releases with each values entry replaced
/// by the values helmfile computed from it (`embedded`, index by index).
pub(crate) struct RenderedState {
    /// Absolute and normalized, to match the files the importer lists.
    pub source: PathBuf,
    pub doc: Map<String, Value>,
    pub embedded: Vec<Value>,
}

/// Runs `helmfile build` (twice: with values files as paths, and with
/// their values embedded) on `file` in the user's environment.
pub(crate) fn build(
    helmfile: &Helmfile,
    file: &Path,
    environment: Option<&str>,
) -> Result<Vec<RenderedState>, BuildError> {
    let plain = run_build(helmfile, file, environment, false)?;
    let embedded = run_build(helmfile, file, environment, true)?;
    let mut out = Vec::new();
    for (source, doc) in plain {
        let releases = embedded
            .iter()
            .find(|(s, _)| *s == source)
            .and_then(|(_, d)| d.get("releases"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        out.push(RenderedState {
            source,
            doc,
            embedded: releases,
        });
    }
    Ok(out)
}

/// One state `build` printed: its source file and the state.
type Printed = (PathBuf, Map<String, Value>);

fn run_build(
    helmfile: &Helmfile,
    file: &Path,
    environment: Option<&str>,
    embed: bool,
) -> Result<Vec<Printed>, BuildError> {
    let mut command = Command::new(&helmfile.program);
    command.arg("--file").arg(file);
    if let Some(env) = environment {
        command.args(["--environment", env]);
    }
    command.arg("build");
    if embed {
        command.arg("--embed-values");
    }
    let out = command
        .stdin(Stdio::null())
        .output()
        .map_err(|error| BuildError::Spawn {
            program: helmfile.program.clone(),
            error,
        })?;
    if !out.status.success() {
        return Err(BuildError::Exit {
            file: file.to_path_buf(),
            environment: environment.map(String::from),
            embed,
            code: out.status.code(),
            error: first_error(&String::from_utf8_lossy(&out.stderr)),
        });
    }
    parse(&String::from_utf8_lossy(&out.stdout))
}

/// Why `helmfile build` gave no state to import.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BuildError {
    #[error("cannot run `{}`: {error}", .program.display())]
    Spawn {
        program: PathBuf,
        error: std::io::Error,
    },
    /// `error`: helmfile's own, without its log lines.
    #[error(
        "`helmfile --file {}{} build{}` exited with {}: {error}",
        .file.display(),
        .environment.as_deref().map(|e| format!(" --environment {e}")).unwrap_or_default(),
        if *.embed { " --embed-values" } else { "" },
        .code.map(|c| c.to_string()).unwrap_or_else(|| "a signal".into())
    )]
    Exit {
        file: PathBuf,
        environment: Option<String>,
        embed: bool,
        /// `None`: ended by a signal.
        code: Option<i32>,
        error: String,
    },
    #[error("helmfile printed a state of {path} that is not YAML: {error}")]
    NotYaml { path: String, error: String },
    #[error("helmfile printed a state of {0} that is not a map")]
    NotAMap(String),
    #[error("helmfile printed no state")]
    NoState,
}

/// helmfile's error without its log lines: the line that says what failed,
/// and for a helm command that failed, the command and helm's own error
/// (helmfile lists its `ARGS:` one per line and then its `STDERR:`).
fn first_error(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let mut text = lines
        .iter()
        .find(|l| l.contains("err:") || l.starts_with("in ") || l.contains("error"))
        .or(lines.last())
        .map(|l| l.to_string())
        .unwrap_or_else(|| "no message".into());
    if text.ends_with("exited with non-zero status:") {
        let section = |name: &str| -> Vec<&str> {
            lines
                .iter()
                .skip_while(|l| **l != name)
                .skip(1)
                .take_while(|l| !l.ends_with(':') || l.contains(": "))
                .copied()
                .collect()
        };
        // `  1: pull (4 bytes)`: the argument between the index and its size.
        let args: Vec<&str> = section("ARGS:")
            .iter()
            .filter_map(|l| l.split_once(": "))
            .map(|(_, a)| a.rsplit_once(" (").map_or(a, |(a, _)| a))
            .collect();
        let error = section("STDERR:")
            .first()
            .map(|l| l.trim_end_matches(']').to_string());
        text = text.trim_end_matches(':').to_string();
        if !args.is_empty() {
            text.push_str(&format!(": `{}`", args.join(" ")));
        }
        if let Some(error) = error {
            text.push_str(&format!(": {error}"));
        }
        if args.get(1) == Some(&"pull") {
            text.push_str(" (helmfile pulls every oci:// chart before it prints the state: the registry must be reachable, or import with --no-helmfile)");
        }
    }
    text
}

/// Splits `build`'s output at its `#  Source: PATH` lines.
fn parse(stdout: &str) -> Result<Vec<Printed>, BuildError> {
    const MARK: &str = "---\n#  Source: ";
    let mut out = Vec::new();
    for chunk in stdout.split(MARK).skip(1) {
        let (path, yaml) = chunk.split_once('\n').unwrap_or((chunk, ""));
        let doc: Value = serde_saphyr::from_str(yaml).map_err(|e| BuildError::NotYaml {
            path: path.trim().to_string(),
            error: e.to_string(),
        })?;
        let doc = match doc {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            _ => {
                return Err(BuildError::NotAMap(path.trim().to_string()));
            }
        };
        out.push((normalize(&absolute(Path::new(path.trim()))), doc));
    }
    if out.is_empty() {
        return Err(BuildError::NoState);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commands_helmfile_would_run_are_found_with_their_lines() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("helmfile.yaml.gotmpl");
        std::fs::write(
            &state,
            "releases:\n  - name: a\n    version: {{ exec \"git\" (list \"describe\") }}\n    hooks:\n      - events: [\"prepare\"]\n        command: ./x.sh\n      - events:\n          - presync\n          - prepare\n        command: y\n# exec is mentioned here\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("v.yaml.gotmpl"),
            "a: {{ .Values.executor }}\n",
        )
        .unwrap();
        let found = commands(std::slice::from_ref(&state));
        let at: Vec<(usize, &str)> = found.iter().map(|r| (r.line, r.what)).collect();
        assert_eq!(
            at,
            [
                (3, "an `exec` template call"),
                (5, "a `prepare` hook"),
                (9, "a `prepare` hook")
            ]
        );
    }

    #[test]
    fn build_output_is_split_per_source() {
        let text = "---\n#  Source: /a/helmfile.yaml\n\nreleases:\n- name: x\n  namespace: y\n---\n#  Source: /a/b.yaml\n\nhelmDefaults: {}\n";
        let docs = parse(text).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].0, PathBuf::from("/a/helmfile.yaml"));
        assert_eq!(docs[0].1["releases"][0]["name"], "x");
        assert_eq!(docs[1].0, PathBuf::from("/a/b.yaml"));
    }

    #[test]
    fn a_helm_command_helmfile_ran_is_named_with_its_error() {
        let stderr = "Pulling ghcr.io/example/charts/app:1.2.3\nin ./helmfile.yaml: [release \"app\": command \"/bin/helm\" exited with non-zero status:\n\nPATH:\n  /bin/helm\n\nARGS:\n  0: helm (4 bytes)\n  1: pull (4 bytes)\n  2: oci://ghcr.io/example/charts/app (32 bytes)\n  3: --version (9 bytes)\n  4: 1.2.3 (5 bytes)\n\nERROR:\n  exit status 1\n\nEXIT STATUS\n  1\n\nSTDERR:\n  Error: no such host\n\nCOMBINED OUTPUT:\n  Error: no such host]\n";
        assert_eq!(
            first_error(stderr),
            "in ./helmfile.yaml: [release \"app\": command \"/bin/helm\" exited with non-zero status: `helm pull oci://ghcr.io/example/charts/app --version 1.2.3`: Error: no such host (helmfile pulls every oci:// chart before it prints the state: the registry must be reachable, or import with --no-helmfile)"
        );
    }

    #[test]
    fn the_failing_line_of_helmfile_s_log() {
        assert_eq!(
            first_error(
                "in ./helmfile.yaml: failed to render\n  err: env var CLUSTER is not set\n"
            ),
            "in ./helmfile.yaml: failed to render"
        );
    }
}
