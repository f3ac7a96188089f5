use std::io::Write;

use serde_json::json;

use crate::cli::{Config, OutputFormat};
use crate::error::{Error, Problem, did_you_mean};
use crate::values::redact;

pub fn run(
    config: &Config,
    cluster: &str,
    release: Option<&str>,
    show_secrets: bool,
    crds: bool,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let plan = crate::config::load(&config.dir, cluster)?;
    let chosen: Vec<_> = match release {
        None => plan.releases.iter().collect(),
        Some(name) => {
            let found: Vec<_> = plan
                .releases
                .iter()
                .filter(|r| r.id.name == name || r.id.to_string() == name)
                .collect();
            if found.is_empty() {
                let names: Vec<String> = plan.releases.iter().map(|r| r.id.name.clone()).collect();
                return Err(Error::config(Problem::new(format!(
                    "`{name}` is not a release of cluster `{cluster}`{}",
                    did_you_mean(name, names.iter().map(String::as_str))
                ))));
            }
            found
        }
    };
    let shown = |v: &serde_json::Value| if show_secrets { v.clone() } else { redact(v) };
    match config.output {
        OutputFormat::Json => {
            let list: Vec<_> = chosen
                .iter()
                .map(|r| {
                    json!({
                        "release": r.id,
                        "chart": r.chart_label(),
                        "version": r.version_label(),
                        "values": shown(if crds { &r.crd_values } else { &r.values }),
                        "valuesDigest": r.values_digest(),
                    })
                })
                .collect();
            super::write_json(out, &json!({ "cluster": cluster, "releases": list }))
        }
        OutputFormat::Text => {
            let mut text = String::new();
            for r in chosen {
                text.push_str(&format!(
                    "---\n# release: {}  chart: {} {}{}\n",
                    r.id,
                    r.chart_label(),
                    r.version_label(),
                    if crds { "  (CRD-phase values)" } else { "" }
                ));
                let values = shown(if crds { &r.crd_values } else { &r.values });
                let body = if values.as_object().is_some_and(|m| m.is_empty()) {
                    "{}\n".to_string()
                } else {
                    crate::yaml::to_string(&values)
                };
                text.push_str(&body);
            }
            super::write(out, &text)
        }
    }
}
