//! `bootstrap template CLUSTER [RELEASE]`: the rendered values of each
//! release and, with `--manifests`, what helm renders from them. Values need
//! nothing but the config; manifests need helm (and possibly the network), so
//! they are asked for explicitly.

mod manifests;

use std::io::Write;

use serde_json::{Value, json};

use crate::cli::{Config, OutputFormat, Verbosity};
use crate::error::{Error, Problem, did_you_mean};
use crate::helm::cli::HelmCli;
use crate::release::Release;
use crate::values::redact;

use manifests::Rendered;

#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Print secret-looking values (and Secret data) instead of redacting them.
    pub show_secrets: bool,
    /// The CRD-phase render: `crdValues` merged in, CRDs included.
    pub crds: bool,
    /// Also render the chart with `helm template`.
    pub manifests: bool,
}

pub fn run(
    config: &Config,
    cluster: &str,
    release: Option<&str>,
    options: Options,
    (only, selectors, values): (
        &[String],
        &[crate::select::Selector],
        &crate::cli::RunValuesArgs,
    ),
    out: &mut dyn Write,
) -> Result<(), Error> {
    let run = crate::config::run_values(&values.files, &values.sets)?;
    let plan = crate::config::load_for(
        &config.global.dir,
        cluster,
        config.global.context.as_deref(),
    )?
    .select(only, selectors, true)?
    .with_run_values(&run);
    let chosen = choose(&plan.releases, cluster, release)?;
    let rendered = if options.manifests {
        Some(render_all(config, &chosen, options)?)
    } else {
        None
    };
    let shown = |v: &Value| {
        if options.show_secrets {
            v.clone()
        } else {
            redact(v)
        }
    };
    let values = |r: &Release| {
        shown(if options.crds {
            &r.crd_values
        } else {
            &r.values
        })
    };
    match config.global.output {
        OutputFormat::Json => {
            let list: Vec<_> = chosen
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let mut entry = json!({
                        "release": r.id,
                        "chart": r.chart_label(),
                        "version": r.version_label(),
                        "values": values(r),
                        "valuesDigest": r.values_digest(),
                        "valuesSources": r.provenance().into_iter().map(|(layer, paths)| json!({
                            "source": layer.label,
                            "fromFlux": layer.from_flux,
                            "paths": paths,
                        })).collect::<Vec<_>>(),
                    });
                    if let Some(rendered) = rendered.as_ref().and_then(|all| all.get(i)) {
                        add_manifests_json(&mut entry, rendered);
                    }
                    entry
                })
                .collect();
            super::write_json(out, &json!({ "cluster": cluster, "releases": list }))
        }
        OutputFormat::Text => {
            let mut text = String::new();
            for (i, r) in chosen.iter().enumerate() {
                text.push_str("---\n");
                // `-q`: the documents only; `-v`: where the values come from.
                if config.verbosity != Verbosity::Quiet {
                    text.push_str(&format!(
                        "# release: {}  chart: {} {}{}\n",
                        r.id,
                        r.chart_label(),
                        r.version_label(),
                        if options.crds {
                            "  (CRD-phase values)"
                        } else {
                            ""
                        }
                    ));
                }
                if config.verbosity == Verbosity::Verbose {
                    for source in &r.values_sources {
                        text.push_str(&format!(
                            "# values from: {}{}\n",
                            source.shown.display(),
                            match source.prefix.as_slice() {
                                [] => String::new(),
                                keys => format!(" ({})", keys.join(".")),
                            }
                        ));
                    }
                    if options.crds && r.crd_values != r.values {
                        text.push_str(&format!(
                            "# values from: {} (crdValues)\n",
                            r.file.display()
                        ));
                    }
                }
                // Which source decides each value, for a release with
                // `from:` (its values come first from the GitOps tree).
                if config.verbosity != Verbosity::Quiet && r.from.is_some() {
                    text.push_str(&provenance_text(r));
                }
                let values = values(r);
                if values.as_object().is_some_and(|m| m.is_empty()) {
                    text.push_str("{}\n");
                } else {
                    text.push_str(&crate::yaml::to_string(&values));
                }
                if let Some(rendered) = rendered.as_ref().and_then(|all| all.get(i)) {
                    push_manifests_text(&mut text, r, rendered);
                }
            }
            super::write(out, &text)
        }
    }
}

/// Where each value came from, as YAML comments: the sources in merge order
/// with the values each decides (docs/design.md#values-merge-order).
fn provenance_text(release: &Release) -> String {
    let provenance = release.provenance();
    if provenance.is_empty() {
        return String::new();
    }
    let mut text = String::from("# each value decided by (later wins):\n");
    for (layer, paths) in provenance {
        let decided = match paths.len() {
            0 => "nothing (every value it sets is set again later)".to_string(),
            1..=6 => paths.join(", "),
            n => format!("{n} values ({}, …)", paths[..4].join(", ")),
        };
        text.push_str(&format!("#   {}: {decided}\n", layer.label));
    }
    text
}

fn choose<'a>(
    releases: &'a [Release],
    cluster: &str,
    release: Option<&str>,
) -> Result<Vec<&'a Release>, Error> {
    let Some(name) = release else {
        return Ok(releases.iter().collect());
    };
    let found: Vec<_> = releases
        .iter()
        .filter(|r| r.id.name == name || r.id.to_string() == name)
        .collect();
    if found.is_empty() {
        let names: Vec<String> = releases.iter().map(|r| r.id.name.clone()).collect();
        return Err(Error::config(Problem::new(format!(
            "`{name}` is not a release of cluster `{cluster}`{}",
            did_you_mean(name, names.iter().map(String::as_str))
        ))));
    }
    Ok(found)
}

/// One [`Rendered`] per chosen release, in the same order.
fn render_all(
    config: &Config,
    chosen: &[&Release],
    options: Options,
) -> Result<Vec<Rendered>, Error> {
    let helm = HelmCli::new(config.global.helm.clone());
    let render_options = manifests::Options {
        crds: options.crds,
        show_secrets: options.show_secrets,
    };
    crate::run::block_on(async {
        manifests::check_helm(&helm).await?;
        let mut all = Vec::with_capacity(chosen.len());
        for release in chosen {
            all.push(manifests::render(&helm, release, &render_options).await?);
        }
        Ok(all)
    })
}

fn add_manifests_json(entry: &mut Value, rendered: &Rendered) {
    match rendered {
        Rendered::Documents {
            documents,
            crds_omitted,
        } => {
            entry["manifests"] = Value::Array(documents.clone());
            entry["crdsOmitted"] = json!(crds_omitted);
        }
        Rendered::Note(note) => entry["manifestsNote"] = json!(note),
    }
}

fn push_manifests_text(text: &mut String, release: &Release, rendered: &Rendered) {
    match rendered {
        Rendered::Documents {
            documents,
            crds_omitted,
        } => {
            text.push_str(&format!(
                "# manifests of {}: {} document(s){}\n",
                release.id,
                documents.len(),
                match crds_omitted {
                    0 => String::new(),
                    n => format!(", {n} CustomResourceDefinition(s) omitted (--crds shows them)"),
                }
            ));
            for doc in documents {
                text.push_str("---\n");
                text.push_str(&crate::yaml::to_string(doc));
            }
        }
        Rendered::Note(note) => text.push_str(&format!("# manifests of {}: {note}\n", release.id)),
    }
}
