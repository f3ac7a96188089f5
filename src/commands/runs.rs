//! `bootstrap runs [CLUSTER] [--show [N]]`: the run records of `apply` and
//! `destroy` (docs/design.md#run-record).

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::cli::{Config, RunsArgs};
use crate::error::{Error, Problem};
use crate::run::record;

pub(super) fn run(config: &Config, args: &RunsArgs, out: &mut dyn Write) -> Result<(), Error> {
    let Some(root) = record::root(config.global.cache_dir.as_deref()) else {
        return Err(Error::config(Problem::new(
            "no cache directory (neither XDG_CACHE_HOME nor HOME is set), so no run was recorded; give one with --cache-dir",
        )));
    };
    let runs = all(&root, args.cluster.as_deref());
    if let Some(n) = args.show {
        let Some(path) = runs.get(n.saturating_sub(1)).map(|r| &r.path) else {
            return Err(Error::config(Problem::new(format!(
                "there is no run {n} to show: {} recorded under {}",
                crate::plural::count(runs.len(), "run"),
                root.display()
            ))));
        };
        let text = std::fs::read_to_string(path).unwrap_or_default();
        return super::write(out, &text);
    }
    if let Some(format) = config.structured() {
        let list: Vec<Value> = runs.iter().map(Run::to_json).collect();
        let document = crate::output::versioned(serde_json::json!({ "runs": list }));
        let text = match format {
            // One line, as it always was.
            crate::output::Format::Json => format!("{document}\n"),
            crate::output::Format::Yaml => crate::output::document(format, &document),
        };
        return super::write(out, &text);
    }
    if runs.is_empty() {
        return super::write(out, &format!("no runs recorded under {}\n", root.display()));
    }
    let mut text = String::new();
    for (i, run) in runs.iter().enumerate() {
        text.push_str(&format!(
            "{:>2}  {}  {:<8} {:<12} {:<10} {}\n",
            i + 1,
            run.started.as_deref().unwrap_or("?"),
            run.command,
            run.cluster,
            run.exit
                .map(|c| format!("exit {c}"))
                .unwrap_or_else(|| "unfinished".into()),
            run.path.display()
        ));
    }
    text.push_str("(`bootstrap runs --show N` prints run N's events)\n");
    super::write(out, &text)
}

/// One recorded run.
struct Run {
    path: PathBuf,
    cluster: String,
    command: String,
    /// The `time` of its first event.
    started: Option<String>,
    /// Its exit code, from the last line; `None` for a run that was killed.
    exit: Option<i64>,
}

impl Run {
    fn read(path: &Path, cluster: &str) -> Run {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let name = path
            .file_stem()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let command = ["apply", "destroy"]
            .into_iter()
            .find(|c| name.contains(&format!("-{c}-")))
            .unwrap_or("?");
        Run {
            path: path.to_path_buf(),
            cluster: cluster.to_string(),
            command: command.to_string(),
            started: lines
                .first()
                .and_then(|e| e["time"].as_str())
                .map(String::from),
            exit: lines
                .last()
                .filter(|e| e["event"] == "exited")
                .and_then(|e| e["exitCode"].as_i64()),
        }
    }

    fn to_json(&self) -> Value {
        serde_json::json!({
            "cluster": self.cluster,
            "command": self.command,
            "started": self.started,
            "exitCode": self.exit,
            "path": self.path,
        })
    }
}

/// Every run under `root` (or `cluster`'s only), newest first.
fn all(root: &Path, cluster: Option<&str>) -> Vec<Run> {
    let clusters: Vec<String> = match cluster {
        Some(cluster) => vec![cluster.to_string()],
        None => std::fs::read_dir(root)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().to_str().map(String::from))
            .collect(),
    };
    let mut runs: Vec<Run> = clusters
        .iter()
        .flat_map(|c| {
            record::records(&root.join(c))
                .into_iter()
                .map(move |p| Run::read(&p, c))
        })
        .collect();
    runs.sort_by(|a, b| b.path.file_name().cmp(&a.path.file_name()));
    runs
}
