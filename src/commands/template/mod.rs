//! `bootstrap template CLUSTER [RELEASE]`: the rendered values of each
//! release and, with `--manifests`, what helm renders from them. Values need
//! nothing but the config; manifests need helm (and possibly the network), so
//! they are asked for explicitly.

mod manifests;

use std::io::Write;

use serde_json::{Value, json};

use crate::cli::{Config, TemplateArgs, Verbosity};
use crate::error::{Error, Failure, Problem, did_you_mean};
use crate::helm::Helm;
use crate::release::Release;
use crate::values::stack::Step;

use manifests::Rendered;

pub(super) fn run(config: &Config, args: &TemplateArgs, out: &mut dyn Write) -> Result<(), Error> {
    let (cluster, options) = (&args.cluster, args);
    let run = crate::config::run_values(&args.values.files, &args.values.sets)?;
    let plan = args
        .selection
        .apply(crate::commands::load_plan(&config.global, cluster)?)?
        .with_run_values(&run);
    let chosen = choose(&plan.releases, cluster, args.release.as_deref())?;
    let rendered = if options.manifests {
        Some(render_all(config, &plan, &chosen, options)?)
    } else {
        None
    };
    let api_versions = rendered.as_ref().map(|r| r.api_versions.as_slice());
    let values = |r: &Release| {
        let v = if options.crds {
            r.crd_values()
        } else {
            r.values()
        };
        if options.show_secrets {
            v.clone()
        } else {
            r.redacted(v)
        }
    };
    match config.structured() {
        Some(format) => {
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
                        "valuesSources": r.stack.provenance().into_iter().map(|(layer, paths)| json!({
                            "source": layer.label,
                            "fromFlux": layer.step == Step::HelmRelease,
                            "paths": paths,
                        })).collect::<Vec<_>>(),
                    });
                    if let Some(rendered) = rendered.as_ref().and_then(|all| all.releases.get(i)) {
                        add_manifests_json(&mut entry, rendered);
                    }
                    entry
                })
                .collect();
            let mut doc = json!({ "cluster": cluster, "releases": list });
            if let Some(api_versions) = api_versions {
                doc["apiVersions"] = json!(api_versions);
            }
            super::write_document(out, format, &doc)
        }
        None => {
            let mut text = String::new();
            if let Some(api_versions) = api_versions {
                text.push_str(&api_versions_note(api_versions));
            }
            for (i, r) in chosen.iter().enumerate() {
                text.push_str("---\n");
                text.push_str(&header(r, options.crds, config.verbosity));
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
                if let Some(rendered) = rendered.as_ref().and_then(|all| all.releases.get(i)) {
                    push_manifests_text(&mut text, r, rendered);
                }
            }
            super::write(out, &text)
        }
    }
}

/// The comments above a release's values: `-q` none; the release and its
/// chart; `-v` where the values come from.
fn header(r: &Release, crds: bool, verbosity: Verbosity) -> String {
    let mut text = String::new();
    // `-q`: the documents only; `-v`: where the values come from.
    if verbosity != Verbosity::Quiet {
        text.push_str(&format!(
            "# release: {}  chart: {} {}{}\n",
            r.id,
            r.chart_label(),
            r.version_label(),
            if crds { "  (CRD-phase values)" } else { "" }
        ));
    }
    if verbosity == Verbosity::Verbose {
        let crd_sources = r.stack.crd_sources().filter(|_| crds);
        for source in r.stack.sources().chain(crd_sources) {
            text.push_str(&format!("# values from: {}\n", source.describe()));
        }
    }
    text
}

/// Where each value came from, as YAML comments: the sources in merge order
/// with the values each decides (docs/design.md#values-merge-order).
fn provenance_text(release: &Release) -> String {
    let provenance = release.stack.provenance();
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

/// What `--manifests` rendered: one [`Rendered`] per chosen release, in the
/// same order, and the API versions helm was told the cluster serves.
struct RenderedAll {
    releases: Vec<Rendered>,
    api_versions: Vec<String>,
}

/// Renders the chosen releases. An install renders on a cluster where the
/// CRD phase has already applied every CRD, and charts test
/// `.Capabilities.APIVersions` (cilium's GatewayClass, ServiceMonitors):
/// so unless this is the CRD-phase render itself (`--crds`), the CRD phase
/// of the whole cluster is rendered first and helm is given the API versions
/// its CRDs serve (`--api-versions`), making the output what `apply`
/// installs.
fn render_all(
    config: &Config,
    plan: &crate::plan::Plan,
    chosen: &[&Release],
    options: &TemplateArgs,
) -> Result<RenderedAll, Error> {
    let helm = std::sync::Arc::new(config.target().helm());
    crate::run::block_on(async {
        manifests::check_helm(helm.as_ref()).await?;
        // Every chart this renders, fetched in the background meanwhile
        // (docs/design.md#chart-cache).
        let mut charts: Vec<crate::release::Chart> = Vec::new();
        let crd_phase = plan.crd_releases().filter(|_| !options.crds);
        for chart in crd_phase
            .chain(chosen.iter().copied())
            .filter_map(Release::chart)
        {
            if !charts.contains(chart) {
                charts.push(chart.clone());
            }
        }
        let prefetch = tokio::spawn({
            let helm = helm.clone();
            async move { helm.prefetch(charts).await }
        });
        let helm = helm.as_ref();
        let api_versions = if options.crds {
            Vec::new()
        } else {
            let crds = crate::crds::render(helm, plan)
                .await
                .map_err(|e| Error::from(Failure::ApiVersions { source: e.into() }))?;
            crate::crds::api_versions(&crds)
        };
        let render_options = manifests::Options {
            crds: options.crds,
            show_secrets: options.show_secrets,
            api_versions,
        };
        let mut releases = Vec::with_capacity(chosen.len());
        for release in chosen {
            releases.push(manifests::render(helm, release, &render_options).await?);
        }
        prefetch.abort();
        Ok(RenderedAll {
            releases,
            api_versions: render_options.api_versions,
        })
    })
}

/// The header line of `--manifests` text output saying what helm was told.
fn api_versions_note(api_versions: &[String]) -> String {
    let group_versions: Vec<&str> = api_versions
        .iter()
        .map(String::as_str)
        .filter(|v| v.matches('/').count() == 1)
        .collect();
    if group_versions.is_empty() {
        return "# manifests rendered with helm's default API versions: the CRD phase serves none\n".into();
    }
    let count = match group_versions.len() {
        1 => "1 API version".to_string(),
        n => format!("{n} API versions"),
    };
    format!(
        "# manifests rendered as on the cluster after the CRD phase: helm --api-versions for the \
         {count} it serves ({}) and their kinds\n",
        group_versions.join(", ")
    )
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
