//! A validated, rendered, ordered plan for one cluster: what `plan` prints and
//! what `apply` executes.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::{Map, Value, json};

use crate::error::{Error, Problem, did_you_mean};
use crate::graph::ReleaseGraph;
use crate::release::{Release, ReleaseId};
use crate::values::stack::Layer;

/// A cluster after loading.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub name: String,
    /// Absolute path of `clusters/<name>`.
    pub dir: PathBuf,
    pub context: Option<String>,
    pub values: Map<String, Value>,
    pub flux: Option<Flux>,
    pub guard: bool,
    /// What `lints.ignore` lets through (docs/design.md#lints).
    pub lints_ignore: Vec<Ignore>,
}

/// One `lints.ignore` entry: a finding code, for every release or for one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ignore {
    pub code: String,
    pub release: Option<ReleaseId>,
}

impl Ignore {
    pub fn code(code: impl Into<String>) -> Self {
        Ignore {
            code: code.into(),
            release: None,
        }
    }
}

impl std::fmt::Display for Ignore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.release {
            None => write!(f, "{}", self.code),
            Some(release) => write!(f, "{} (release {release})", self.code),
        }
    }
}

impl Cluster {
    /// Whether `lints.ignore` lets an error of `code` about `release`
    /// (`namespace/name`) through.
    pub fn ignores(&self, code: &str, release: Option<&str>) -> bool {
        self.lints_ignore.iter().any(|i| {
            i.code == code
                && i.release
                    .as_ref()
                    .is_none_or(|r| release == Some(r.to_string().as_str()))
        })
    }
}

/// What `plan` learnt of the CRDs a CRD-phase release carries, from its
/// CRD-phase render (docs/design.md#plan-json).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CarriedCrds {
    /// The render's CustomResourceDefinitions, by name, sorted.
    Rendered(Vec<String>),
    /// Not rendered here: why, and whether a render was tried and failed.
    NotRendered { why: String, failed: bool },
}

/// [`CarriedCrds`] per CRD-phase release; a release missing here was not
/// looked at.
pub(crate) type Carried = std::collections::HashMap<ReleaseId, CarriedCrds>;

#[derive(Debug, Clone)]
pub struct Flux {
    /// Absolute path of the directory Flux's GitRepository points at.
    pub root: PathBuf,
    /// Relative to `root`.
    pub entrypoint: PathBuf,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub cluster: Cluster,
    /// Absolute config root.
    pub root: PathBuf,
    /// Every release of the cluster, in execution order.
    pub releases: Vec<Release>,
    pub graph: ReleaseGraph,
}

/// `--values FILE` and `--set` of one run (docs/design.md#values-merge-order):
/// one layer over every release's values, after everything in the config;
/// `None` when the run gives neither.
#[derive(Debug, Clone, Default)]
pub struct RunValues(pub Option<Layer>);

impl Plan {
    /// Every release with the run's `--values`/`--set` merged over its
    /// values (install and CRD-phase alike).
    pub fn with_run_values(mut self, run: &RunValues) -> Plan {
        let Some(layer) = &run.0 else {
            return self;
        };
        for release in &mut self.releases {
            release.stack.push(layer.clone());
        }
        self
    }

    pub fn new(cluster: Cluster, root: PathBuf, mut releases: Vec<Release>) -> Plan {
        let graph = ReleaseGraph::new(releases.iter().map(|r| (&r.id, r.needs.as_slice())));
        let position: std::collections::HashMap<ReleaseId, usize> = graph
            .order()
            .into_iter()
            .enumerate()
            .map(|(i, id)| (id, i))
            .collect();
        // Each key looked up once, not once per comparison.
        releases.sort_by_cached_key(|r| position.get(&r.id).copied().unwrap_or(usize::MAX));
        Plan {
            cluster,
            root,
            releases,
            graph,
        }
    }

    pub fn release(&self, id: &ReleaseId) -> Option<&Release> {
        self.releases.iter().find(|r| &r.id == id)
    }

    /// Releases whose CRDs are applied in the CRD phase.
    pub fn crd_releases(&self) -> impl Iterator<Item = &Release> {
        self.releases.iter().filter(|r| r.has_crd_phase())
    }

    /// Every chart the run uses, each once, in the order they are needed:
    /// the CRD phase's first, then the installed releases' in execution
    /// order (what [`crate::helm::Helm::prefetch`] fetches).
    pub fn charts(&self) -> Vec<crate::release::Chart> {
        let mut charts: Vec<crate::release::Chart> = Vec::new();
        for release in self.crd_releases().chain(self.installed()) {
            if let Some(chart) = release.chart()
                && !charts.contains(chart)
            {
                charts.push(chart.clone());
            }
        }
        charts
    }

    /// Releases installed in the release phase, in execution order.
    pub fn installed(&self) -> impl Iterator<Item = &Release> {
        self.releases.iter().filter(|r| r.is_installed())
    }

    /// Narrows the plan to `only` (names or namespace/name), plus what they
    /// need unless `exact`.
    /// The releases `--only` names and `--selector` matches (either adds),
    /// plus what they need unless `exact`; docs/design.md#selection.
    pub fn select(
        self,
        only: &[String],
        selectors: &[crate::select::Selector],
        exact: bool,
    ) -> Result<Plan, Error> {
        if only.is_empty() && selectors.is_empty() {
            return Ok(self);
        }
        let mut chosen = BTreeSet::new();
        let mut problems = Vec::new();
        for selector in selectors {
            let matched: Vec<&Release> = self
                .releases
                .iter()
                .filter(|r| selector.matches(&r.selector_labels()))
                .collect();
            if matched.is_empty() {
                problems.push(Problem::new(format!(
                    "--selector `{selector}` matches no release of cluster `{}`; releases carry their `labels:` and `name`, `namespace`, `chart`",
                    self.cluster.name
                )));
            }
            chosen.extend(matched.into_iter().map(|r| r.id.clone()));
        }
        for name in only {
            let matches: Vec<&Release> = self
                .releases
                .iter()
                .filter(|r| r.id.name == *name || r.id.to_string() == *name)
                .collect();
            match matches.as_slice() {
                [one] => {
                    chosen.insert(one.id.clone());
                }
                [] => {
                    let names: Vec<String> =
                        self.releases.iter().map(|r| r.id.name.clone()).collect();
                    problems.push(Problem::new(format!(
                        "--only `{name}` is not a release of cluster `{}`{}",
                        self.cluster.name,
                        did_you_mean(name, names.iter().map(String::as_str))
                    )));
                }
                many => problems.push(Problem::new(format!(
                    "--only `{name}` is ambiguous: {}; write namespace/name",
                    many.iter()
                        .map(|r| r.id.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))),
            }
        }
        if !problems.is_empty() {
            return Err(Error::Config(problems));
        }
        let keep = if exact {
            chosen
        } else {
            self.graph.with_needs(chosen.iter())
        };
        let releases = self
            .releases
            .into_iter()
            .filter(|r| keep.contains(&r.id))
            .map(|mut r| {
                // With --no-needs a need outside the selection is assumed done.
                r.needs.retain(|n| keep.contains(n));
                r
            })
            .collect();
        Ok(Plan::new(self.cluster, self.root, releases))
    }

    /// `plan` JSON (docs/design.md#plan-json), with what `carried` knows of
    /// each CRD-phase release's CRDs.
    pub fn to_json(&self, carried: &Carried) -> Value {
        let crds: Vec<Value> = self
            .crd_releases()
            .map(|r| match carried.get(&r.id) {
                Some(CarriedCrds::Rendered(names)) => {
                    json!({ "release": r.id, "carried": names, "notRendered": null })
                }
                Some(CarriedCrds::NotRendered { why, .. }) => {
                    json!({ "release": r.id, "carried": null, "notRendered": why })
                }
                None => json!({ "release": r.id, "carried": null, "notRendered": null }),
            })
            .collect();
        let releases: Vec<Value> = self
            .releases
            .iter()
            .map(|r| {
                json!({
                    "id": r.id,
                    "name": r.id.name,
                    "namespace": r.id.namespace,
                    "chart": r.chart_label(),
                    "version": r.version_label(),
                    "needs": r.needs,
                    "crds": r.crds,
                    "installs": r.is_installed(),
                    "valuesDigest": r.values_digest(),
                    "ownership": r.ownership,
                    "from": r.from.as_ref().map(|f| json!({"helmRelease": f.helm_release, "file": f.file})),
                    "valuesSources": r.stack.named().map(|l| l.label.clone()).collect::<Vec<_>>(),
                    "hooks": {
                        "presync": r.hooks.presync.iter().map(|h| h.action.to_string()).collect::<Vec<_>>(),
                        "postsync": r.hooks.postsync.iter().map(|h| h.action.to_string()).collect::<Vec<_>>(),
                    },
                })
            })
            .collect();
        let ignore: Vec<Value> = self
            .cluster
            .lints_ignore
            .iter()
            .map(|i| json!({ "code": i.code, "release": i.release }))
            .collect();
        json!({ "cluster": self.cluster.name, "crds": crds, "releases": releases, "lintsIgnore": ignore })
    }

    pub fn render_text(&self, carried: &Carried) -> String {
        self.render_text_detailed(false, carried)
    }

    /// [`Self::render_text`]; with `detail` (`plan -v`) each release also
    /// shows where its values come from (in merge order), their digest, its
    /// timeout and whether it waits for its workloads. Each CRD-phase
    /// release says which CRDs it carries when `carried` has its render.
    pub fn render_text_detailed(&self, detail: bool, carried: &Carried) -> String {
        let mut out = format!(
            "Plan for cluster `{}`: {} ({} installed)\n\n",
            self.cluster.name,
            crate::plural::count(self.releases.len(), "release"),
            self.installed().count()
        );
        let crds: Vec<&Release> = self.crd_releases().collect();
        out.push_str(&format!(
            "Phase 1: CRDs from {}\n",
            crate::plural::count(crds.len(), "release")
        ));
        for r in &crds {
            let only = r.crds == crate::release::CrdPolicy::Only;
            let mut note = None;
            let what = match carried.get(&r.id) {
                Some(CarriedCrds::Rendered(names)) => carried_text(names, only),
                Some(CarriedCrds::NotRendered { why, failed: true }) => {
                    note = Some(format!("      not rendered here: {why}\n"));
                    not_rendered_text(r)
                }
                _ => not_rendered_text(r),
            };
            let _ = writeln!(
                out,
                "  {:<45} {:<32} {what}",
                r.id.to_string(),
                format!("{} {}", r.chart_label(), r.version_label()).trim_end()
            );
            out.push_str(note.as_deref().unwrap_or_default());
        }
        out.push_str(
            "
Phase 2: releases, each as soon as its needs are done
",
        );
        for (i, r) in self.installed().enumerate() {
            let needs = if r.needs.is_empty() {
                "-".to_string()
            } else {
                r.needs
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let _ = writeln!(
                out,
                "  {:>2}. {:<40} {:<28} needs: {needs}",
                i + 1,
                r.id.to_string(),
                format!("{} {}", r.chart_label(), r.version_label())
            );
            if r.ownership == crate::release::Ownership::Handover {
                out.push_str("      ownership: handover (installed once, then adopted by Flux)\n");
            }
            if let Some(from) = &r.from {
                out.push_str(&format!(
                    "      from:     HelmRelease {} ({})\n",
                    from.helm_release, from.file
                ));
            }
            // A `from:` release's values come from the GitOps tree first.
            if r.from.is_some() && !detail {
                let labels: Vec<&str> = r.stack.named().map(|l| l.label.as_str()).collect();
                out.push_str(&format!(
                    "      values:   {}\n",
                    labels.join("\n              < ")
                ));
            }
            for hook in &r.hooks.presync {
                let _ = writeln!(out, "      presync:  {}", hook.action);
            }
            for hook in &r.hooks.postsync {
                let _ = writeln!(out, "      postsync: {}", hook.action);
            }
            if detail {
                out.push_str(&detail_text(r));
            }
        }
        if !self.cluster.lints_ignore.is_empty() {
            let ignored: Vec<String> = self
                .cluster
                .lints_ignore
                .iter()
                .map(ToString::to_string)
                .collect();
            out.push_str(&format!(
                "\nlints.ignore (errors reported, not blocking): {}\n",
                ignored.join(", ")
            ));
        }
        out
    }
}

/// A CRD-phase release whose render is known: `CRDs: 6 (a, b, …)` or `no CRDs`.
fn carried_text(names: &[String], only: bool) -> String {
    let what = match names {
        [] => return "no CRDs".into(),
        [a] => format!("CRDs: 1 ({a})"),
        [a, b] => format!("CRDs: 2 ({a}, {b})"),
        [a, b, ..] => format!("CRDs: {} ({a}, {b}, …)", names.len()),
    };
    if only {
        format!("{what}; never installed")
    } else {
        format!("{what}; installed with --skip-crds")
    }
}

/// A CRD-phase release plan could not render: what it can tell without
/// helm (the files of a local chart's `crds/`), else that apply renders it.
fn not_rendered_text(r: &Release) -> String {
    let carried = match &r.source {
        crate::release::Source::Chart(crate::release::Chart {
            source: crate::release::ChartSource::Path(dir),
            ..
        }) => crd_files(dir),
        _ => None,
    };
    match (r.crds, carried) {
        (crate::release::CrdPolicy::Only, _) => "CRDs only, never installed".to_string(),
        (_, Some(n)) if n > 0 => format!(
            "{} in crds/, applied here; installed with --skip-crds",
            crate::plural::count(n, "CRD file")
        ),
        _ if matches!(r.source, crate::release::Source::Manifests(_)) => {
            "CRDs from its manifests, applied here".to_string()
        }
        _ => "CRDs: rendered at apply; installed with --skip-crds".to_string(),
    }
}

/// How many YAML files a local chart's `crds/` holds (`None`: no such directory).
fn crd_files(chart: &std::path::Path) -> Option<usize> {
    let entries = std::fs::read_dir(chart.join("crds")).ok()?;
    Some(
        entries
            .flatten()
            .filter(|e| {
                matches!(
                    e.path().extension().and_then(|x| x.to_str()),
                    Some("yaml" | "yml")
                )
            })
            .count(),
    )
}

/// `plan -v`'s lines under a release: where its values come from (in merge
/// order), their digest, its timeout and whether it waits for workloads.
fn detail_text(r: &Release) -> String {
    let mut text = String::new();
    let sources: Vec<String> = if r.from.is_some() {
        r.stack.named().map(|l| l.label.clone()).collect()
    } else {
        r.stack.sources().map(|s| s.describe()).collect()
    };
    text.push_str(&format!(
        "      values:   {}\n",
        if sources.is_empty() {
            "none".to_string()
        } else {
            sources.join(", ")
        }
    ));
    text.push_str(&format!("      digest:   {}\n", r.values_digest()));
    text.push_str(&format!(
        "      timeout:  {}{}\n",
        crate::duration::span(r.budget()),
        if r.wait {
            ", waits for every workload"
        } else {
            ""
        }
    ));
    text
}
