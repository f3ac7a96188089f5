//! What every command shares: the command's inputs ([`Ctx`]) and what it
//! prints ([`Outcome`]). Dispatch (`commands`) and the writing commands
//! (`install`) both build on this; neither imports the other's types.

use serde_json::{Map, Value};

use crate::args::Parsed;
use crate::log::ValuesFile;
use crate::script::Script;
use crate::values::user_values;

/// What a command prints and how it exits.
#[derive(Debug, Default)]
pub struct Outcome {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

impl Outcome {
    pub fn ok(stdout: String) -> Outcome {
        Outcome {
            stdout,
            ..Outcome::default()
        }
    }

    /// Helm's failure: `Error: <message>` on stderr, exit 1.
    pub fn error(message: impl std::fmt::Display) -> Outcome {
        Outcome {
            stderr: format!("Error: {message}\n"),
            code: 1,
            ..Outcome::default()
        }
    }
}

impl From<Result<String, String>> for Outcome {
    fn from(r: Result<String, String>) -> Outcome {
        r.map_or_else(Outcome::error, Outcome::ok)
    }
}

/// Everything a command needs, read once at startup.
pub struct Ctx {
    pub args: Parsed,
    pub values_files: Vec<ValuesFile>,
    pub script: Script,
}

impl Ctx {
    /// `-n`, then `$HELM_NAMESPACE`, then "default" (helm would ask the kubeconfig context).
    pub fn namespace(&self) -> String {
        self.args
            .get("namespace")
            .map(str::to_string)
            .or_else(|| {
                std::env::var("HELM_NAMESPACE")
                    .ok()
                    .filter(|s| !s.is_empty())
            })
            .unwrap_or_else(|| "default".into())
    }

    /// User values from the snapshotted `-f` files and the `--set*` flags.
    pub fn user_values(&self) -> Result<Value, String> {
        let mut files = Vec::new();
        for f in &self.values_files {
            if let Some(e) = &f.error {
                return Err(e.clone());
            }
            files.push(f.content.clone());
        }
        user_values(files, &self.args)
    }
}

/// `NAME CHART`, or just `CHART` with helm's placeholder release name.
pub fn name_and_chart(ctx: &Ctx, command: &str) -> Result<(String, String), String> {
    match ctx.args.positionals.as_slice() {
        [name, chart] => Ok((name.clone(), chart.clone())),
        [chart] if command == "template" => Ok(("release-name".into(), chart.clone())),
        _ => Err(format!(
            "\"helm {command}\" requires 2 arguments\n\nUsage:  helm {command} [NAME] [CHART] [flags]"
        )),
    }
}

/// An empty map of values.
pub fn empty() -> Value {
    Value::Object(Map::new())
}
