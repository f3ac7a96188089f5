//! Loading and validating a config root (docs/design.md#file-formats) into a [`Plan`]. Everything
//! here is synchronous and pure apart from reading files: every problem in the
//! whole config is found before any command talks to a cluster.

mod cache;
mod chart_source;
mod cluster_file;
mod draft;
pub mod file;
mod from;
mod layers;
mod load;
mod par;
mod position;
pub(crate) mod read;
mod reference;
mod release_render;
mod releases;
pub(crate) mod sops;
mod spanned;

pub use cache::ParseCache;
pub use cluster_file::cluster_names;
pub use load::{Catalog, load, load_for};

pub use crate::plan::{Cluster, Flux};

use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::error::{Error, Problem};
use crate::plan::RunValues;
use crate::values::stack::{Layer, Step, ValuesSource};

/// The run's `--values FILE`s (plain YAML maps, paths from the working
/// directory) then its `--set`s, in that order, as helm applies `-f` then
/// `--set`; docs/design.md#values-merge-order.
pub fn run_values(files: &[PathBuf], sets: &[String]) -> Result<RunValues, Error> {
    let mut overlay = Value::Object(Map::new());
    let mut sources = Vec::new();
    let mut problems = Vec::new();
    let mut secrets = crate::values::SecretPaths::default();
    let sops = sops::Sops::from_env();
    for file in files {
        let text = match read::text(file) {
            Ok(text) => text,
            Err(unreadable) => {
                problems.push(unreadable.about("--values file").problem(file));
                continue;
            }
        };
        let encrypted = sops::named(file) || sops::has_metadata(&text);
        let read = if encrypted {
            sops.values(file)
                .inspect(|v| secrets.add_leaves(v))
                .map_err(|failure| failure.problem().file(file))
        } else {
            crate::yaml::document::<Value>(&text, file)
        };
        match read {
            Ok(v @ Value::Object(_)) => crate::values::merge(&mut overlay, v),
            Ok(Value::Null) => {}
            Ok(other) => problems.push(
                Problem::new(format!(
                    "a --values file must be a YAML map, not {}",
                    crate::yaml::kind_of(&other)
                ))
                .file(file)
                .at(crate::yaml::first_content_line(&text), 1),
            ),
            Err(p) => problems.push(p),
        }
        sources.push(ValuesSource {
            path: std::path::absolute(file).unwrap_or_else(|_| file.clone()),
            shown: file.clone(),
            prefix: Vec::new(),
            document_line: None,
        });
    }
    for set in sets {
        if let Err(why) = crate::values::set_path(&mut overlay, set) {
            problems.push(Problem::new(format!("--set {why}")));
        }
        sources.push(ValuesSource {
            path: PathBuf::new(),
            shown: PathBuf::from(format!("--set {}", shown_set(set))),
            prefix: Vec::new(),
            document_line: None,
        });
    }
    if !problems.is_empty() {
        return Err(Error::Config(problems));
    }
    if sources.is_empty() {
        return Ok(RunValues(None));
    }
    let mut layer = Layer::new(Step::Run, "the run's --values and --set".into(), overlay);
    layer.sources = sources;
    layer.secrets = secrets;
    Ok(RunValues(Some(layer)))
}

/// A `--set` as `template -v` shows it: the value of a secret-looking key redacted.
fn shown_set(set: &str) -> String {
    set.split(',')
        .map(|assignment| match assignment.split_once('=') {
            Some((path, _))
                if path
                    .rsplit('.')
                    .next()
                    .is_some_and(crate::values::is_secret_key) =>
            {
                format!("{path}={}", crate::values::REDACTED)
            }
            _ => assignment.to_string(),
        })
        .collect::<Vec<_>>()
        .join(",")
}
