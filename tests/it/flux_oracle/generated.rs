//! Random GitOps trees over every construct `check` models, written the way
//! real repositories write them, for the differential test against the Flux
//! oracle:
//!
//! - Flux Kustomizations (`clusters/test`): targetNamespace, namePrefix,
//!   nameSuffix, inline patches, components, postBuild (`substitute`,
//!   `substituteFrom` a ConfigMap, `substituteStrategy: Always`), the same
//!   path reconciled by two Kustomizations;
//! - kustomizations (`apps/appN`), nested (a sub-kustomization, shared bases
//!   reached from several apps, components): namespace, namePrefix,
//!   nameSuffix, patches (strategic merge and JSON 6902, every target form:
//!   by original or current name, name regex, kind, group/version,
//!   namespace, equality and set-based label selectors, annotation
//!   selectors), the legacy `patchesStrategicMerge`/`patchesJson6902`,
//!   replacements (source and targets by original or current name),
//!   configMapGenerator with and without the name hash and a
//!   kustomizeconfig `nameReference`; labels and annotations transformers
//!   (`labels` with `includeSelectors`/`includeTemplates`, `commonLabels`,
//!   `commonAnnotations`, in kustomizations, sub-kustomizations, bases and
//!   components) that outer patches select by; or none (Flux's generated
//!   one);
//! - Flux's marks on objects (`kustomize.toolkit.fluxcd.io/substitute:
//!   disabled`, `reconcile: disabled`, `ssa: Ignore`/`IfNotPresent`, as
//!   labels, annotations, through `commonAnnotations`/`commonLabels` or a
//!   Flux Kustomization's `spec.commonMetadata`);
//! - HelmReleases whose names, release names and values hold every envsubst
//!   form (`${X}`, `${X:=d}`, `${X=d}`, `${X:-d}`, `${X-d}`, which fails the
//!   build, `${X:+d}`, case and substring operators, `$${X}` escapes), and
//!   `valuesFrom` entries with a `targetPath` into a ConfigMap or Secret of
//!   the tree whose values helm's `--set` parser types (`042`, `True`,
//!   `{a,b}`, `a\,b`, the failing `a,b`), compared as helm-controller
//!   composes them;
//! - the artifact: a GitRepository `spec.ignore` and `.sourceignore` files
//!   with re-includes, source-controller's default patterns, symlinked files
//!   and directories;
//! - flux-operator ResourceSets with templating functions (`slugify`,
//!   `lower`, `upper`, `trim`, `replace`, `default`, `quote`) over non-ASCII
//!   inputs and a Static input provider.
//!
//! The count and the seed: `FLUX_ORACLE_CASES` (default [`CI_CASES`]) and
//! `FLUX_ORACLE_SEED` (default [`CI_SEED`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

/// What CI runs: this many trees, from this seed.
pub const CI_CASES: u32 = 1000;
pub const CI_SEED: u64 = 7;

#[derive(Debug, Clone)]
pub struct Release {
    name: &'static str,
    tier: &'static str,
    annotated: bool,
    replicas: &'static str,
    release_name: Option<&'static str>,
    target_namespace: Option<&'static str>,
    values_from: bool,
    /// A Flux mark in its metadata ([`flux_mark`]): substitution disabled,
    /// reconcile disabled, `ssa: Ignore` or `IfNotPresent`.
    mark: Option<u8>,
    /// A `valuesFrom` entry with a `targetPath` ([`TARGET_PATHS`]) reading
    /// a key of the `tp` ConfigMap (or Secret) beside it ([`TP_VALUES`]):
    /// (path, key, Secret, `literal`).
    target_path: Option<(usize, usize, bool, bool)>,
    /// What the API server would make of it (docs/design.md#tree-resolution,
    /// the staged apply): served as written, or refused.
    shape: Shape,
}

/// A HelmRelease the apply accepts, or one the API server refuses.
#[derive(Debug, Clone, Copy)]
pub enum Shape {
    Served,
    /// `helm.toolkit.fluxcd.io/v2beta2`, which Flux v2.9's CRDs do not serve.
    Unserved,
    /// `spec.foo`, a field the CRD does not declare.
    Undeclared,
    /// No `spec.interval`, which the CRD requires.
    NoInterval,
}

#[derive(Debug, Clone)]
pub enum Target {
    /// No target: a strategic merge patch names its object itself.
    None,
    /// By the name before any prefix or suffix.
    OriginalName,
    /// By the name after this kustomization's prefix and suffix.
    CurrentName,
    NameRegex,
    Kind,
    GroupVersion,
    Namespace,
    LabelEquals,
    LabelIn,
    LabelNotIn,
    LabelExists,
    Annotation,
    /// By a label a transformer adds (`stage`, [`meta`]).
    StageLabel,
    StageSet,
    /// By an annotation a transformer adds (`owner`).
    Owner,
}

#[derive(Debug, Clone)]
pub struct Patch {
    json6902: bool,
    target: Target,
    op: u8,
}

#[derive(Debug, Clone)]
pub struct Replacement {
    /// The source by its original name (else by its current one).
    source_original: bool,
    /// The source is the generated ConfigMap (else a HelmRelease).
    from_config_map: bool,
    /// The targets by name (else by kind).
    target_by_name: bool,
    create: bool,
    /// The target field is `spec.values.replicas` (any type), else
    /// `spec.releaseName`; the ConfigMap source is then its `n` (`5`).
    into_values: bool,
}

#[derive(Debug, Clone)]
pub struct Kustomize {
    namespace: Option<&'static str>,
    prefix: Option<&'static str>,
    suffix: Option<&'static str>,
    bases: Vec<usize>,
    components: Vec<usize>,
    patches: Vec<Patch>,
    /// `patchesStrategicMerge` (true) or `patchesJson6902` (false).
    legacy: Option<bool>,
    replacement: Option<Replacement>,
    /// A configMapGenerator: (hash kept, nameReference configured).
    generator: Option<(bool, bool)>,
    /// Its labels or annotations transformers ([`meta`]).
    meta: Option<u8>,
}

#[derive(Debug, Clone)]
pub struct Sub {
    namespace: Option<&'static str>,
    prefix: Option<&'static str>,
    release: Release,
    meta: Option<u8>,
}

#[derive(Debug, Clone)]
pub struct Ks {
    target_ns: Option<&'static str>,
    prefix: Option<&'static str>,
    suffix: Option<&'static str>,
    vars: Vec<(&'static str, &'static str)>,
    always: bool,
    /// `substituteFrom` the ConfigMap `vars`: Some(optional).
    from: Option<bool>,
    patch: Option<Patch>,
    component: Option<usize>,
    /// `spec.commonMetadata` ([`common_metadata`]).
    common_metadata: Option<u8>,
}

#[derive(Debug, Clone)]
pub struct App {
    ks: Ks,
    twice: bool,
    releases: Vec<Release>,
    kustomize: Option<Kustomize>,
    sub: Option<Sub>,
    /// 1: a symlinked file, 2: a symlinked directory, 3: a Kustomization
    /// whose path is a symlink to this app.
    symlink: u8,
    /// A `skip/` directory (an ignored HelmRelease and a re-included one).
    skip: bool,
    /// A `cloudbuild.yaml` HelmRelease (a source-controller default ignore).
    cloudbuild: bool,
    /// A `.sourceignore` in the app directory.
    local_ignore: bool,
    /// A Flux Kustomization in the app directory (`flux.yaml`) that
    /// reconciles the app of this index (modulo the number of apps), with
    /// its own targetNamespace when set.
    nested: Option<(usize, bool)>,
    /// The kustomization's patches are files (`patches: - path:`).
    patch_files: bool,
}

#[derive(Debug, Clone)]
pub struct Base {
    prefix: Option<&'static str>,
    release: Release,
    meta: Option<u8>,
}

#[derive(Debug, Clone)]
pub struct Component {
    /// 0: adds a HelmRelease, 1: patches by label, 2: namePrefix, 3 and
    /// 4: labels and annotations ([`meta`]).
    kind: u8,
}

#[derive(Debug, Clone)]
pub struct ResourceSet {
    inputs: Vec<(&'static str, &'static str)>,
    template: &'static str,
    provider: bool,
    /// Renders a Kustomization (of apps/app0) rather than a HelmRelease.
    kustomization: bool,
    multi_doc: bool,
}

#[derive(Debug, Clone)]
pub struct Tree {
    apps: Vec<App>,
    bases: Vec<Base>,
    components: Vec<Component>,
    /// The GitRepository with `spec.ignore` (and the Kustomization that
    /// reconciles the entrypoint): the ignore rules by number.
    repo: Option<u8>,
    /// A `.sourceignore` at the root: its rules by number.
    sourceignore: Option<u8>,
    entry_kustomization: bool,
    /// The variables `substituteFrom` reads: a ConfigMap (0), a Secret's
    /// `stringData` (1) or its base64 `data` (2).
    vars: Option<(u8, Vec<(&'static str, &'static str)>)>,
    resource_set: Option<ResourceSet>,
}

fn release() -> impl Strategy<Value = Release> {
    (
        prop::sample::select(vec![
            "cilium",
            "coredns",
            "spegel",
            "${APP}",
            "${APP:=cilium}",
            "${APP=coredns}",
            "${MISSING:-spegel}",
            "${MISSING-spegel}",
            "${MISSING:=spegel}",
            "${MISSING=spegel}",
            "${MISSING:+spegel}",
            "${APP:+x}cilium",
            "x-${APP,,}",
            "${APP^^}",
            "${APP^}",
            "a${APP/i/o}",
            "${APP:0:3}",
            "${#APP}x",
            "$${APP}",
            "${APP-bad}",
            "${MISSING}",
            "cilium-${N}",
        ]),
        prop::sample::select(vec!["core", "edge", "none"]),
        any::<bool>(),
        prop::sample::select(vec![
            "${N}",
            "${N:=1}",
            "\"${N}\"",
            "v${N}",
            "'${N}'",
            "${N}: x",
            "3",
            "${N:-2}",
            "${N=4}",
            "[${N}]",
            "{a: ${N}}",
            "${APP}",
            // YAML 1.1 literals, which kyaml (YAML 1.2) reads otherwise.
            "yes",
            "on",
            "0o14",
            "0x1F",
            "1_000",
            "~",
        ]),
        prop::option::of(prop::sample::select(vec![
            "cilium",
            "${APP}-rel",
            "${APP:=net}",
            // Unset: a null the CRD's validation rejects.
            "${UNSET}",
        ])),
        prop::option::of(prop::sample::select(vec!["monitoring", "${NS:=net}"])),
        prop::bool::weighted(0.3),
        prop::option::weighted(0.15, 0u8..6),
        prop::option::weighted(
            0.3,
            (
                0..TARGET_PATHS.len(),
                0..TP_VALUES.len(),
                any::<bool>(),
                prop::bool::weighted(0.2),
            ),
        ),
        prop_oneof![
            8 => Just(Shape::Served),
            1 => Just(Shape::Unserved),
            1 => Just(Shape::Undeclared),
            1 => Just(Shape::NoInterval),
        ],
    )
        .prop_map(
            |(
                name,
                tier,
                annotated,
                replicas,
                release_name,
                target_namespace,
                values_from,
                mark,
                target_path,
                shape,
            )| {
                Release {
                    name,
                    tier,
                    annotated,
                    replicas,
                    release_name,
                    target_namespace,
                    values_from,
                    mark,
                    target_path,
                    shape,
                }
            },
        )
}

fn target() -> impl Strategy<Value = Target> {
    prop::sample::select(vec![
        Target::None,
        Target::OriginalName,
        Target::CurrentName,
        Target::NameRegex,
        Target::Kind,
        Target::GroupVersion,
        Target::Namespace,
        Target::LabelEquals,
        Target::LabelIn,
        Target::LabelNotIn,
        Target::LabelExists,
        Target::Annotation,
        Target::StageLabel,
        Target::StageSet,
        Target::Owner,
    ])
}

fn patch() -> impl Strategy<Value = Patch> {
    (any::<bool>(), target(), 0u8..6).prop_map(|(json6902, target, op)| Patch {
        json6902,
        target,
        op,
    })
}

fn kustomize() -> impl Strategy<Value = Kustomize> {
    (
        prop::option::of(prop::sample::select(vec!["kube-system", "apps"])),
        prop::option::of(prop::sample::select(vec!["team-", "x-"])),
        prop::option::of(prop::sample::select(vec!["-v1", "-b"])),
        prop::collection::vec(0usize..2, 0..2),
        prop::collection::vec(0usize..2, 0..2),
        prop::collection::vec(patch(), 0..3),
        prop::option::weighted(0.2, any::<bool>()),
        prop::option::weighted(
            0.3,
            (
                any::<bool>(),
                any::<bool>(),
                any::<bool>(),
                any::<bool>(),
                any::<bool>(),
            )
                .prop_map(
                    |(source_original, from_config_map, target_by_name, create, into_values)| {
                        Replacement {
                            into_values,
                            source_original,
                            from_config_map,
                            target_by_name,
                            create,
                        }
                    },
                ),
        ),
        prop::option::weighted(0.4, (any::<bool>(), any::<bool>())),
        prop::option::weighted(0.3, 0u8..META),
    )
        .prop_map(
            |(
                namespace,
                prefix,
                suffix,
                bases,
                components,
                patches,
                legacy,
                replacement,
                generator,
                meta,
            )| {
                Kustomize {
                    namespace,
                    prefix,
                    suffix,
                    bases,
                    components,
                    patches,
                    legacy,
                    replacement,
                    generator,
                    meta,
                }
            },
        )
}

fn ks() -> impl Strategy<Value = Ks> {
    (
        prop::option::of(prop::sample::select(vec![
            "kube-system",
            "flux-system",
            "${NS:=kube-system}",
        ])),
        prop::option::weighted(0.3, prop::sample::select(vec!["p-", "${P:=q}-"])),
        prop::option::weighted(0.2, prop::sample::select(vec!["-s", "-${APP:=z}"])),
        prop::collection::vec(
            (
                prop::sample::select(vec!["APP", "N", "NS", "P"]),
                prop::sample::select(vec![
                    "cilium", "coredns", "3", "1.10", "yes", "on", "0x10", "0X10", "007", "08",
                    "text", "", "~", "null", "1e3", "+5", "1_000", ".5", "2024-1-2", "0b101",
                ]),
            ),
            0..3,
        ),
        prop::bool::weighted(0.3),
        prop::option::weighted(0.2, any::<bool>()),
        prop::option::weighted(0.2, patch()),
        prop::option::weighted(0.15, 0usize..2),
        prop::option::weighted(0.15, 0u8..4),
    )
        .prop_map(
            |(target_ns, prefix, suffix, vars, always, from, patch, component, common_metadata)| {
                Ks {
                    target_ns,
                    prefix,
                    suffix,
                    vars,
                    always,
                    from,
                    patch,
                    component,
                    common_metadata,
                }
            },
        )
}

fn app() -> impl Strategy<Value = App> {
    (
        ks(),
        prop::bool::weighted(0.2),
        prop::collection::vec(release(), 1..3),
        prop::option::weighted(0.6, kustomize()),
        prop::option::weighted(
            0.25,
            (
                prop::option::of(prop::sample::select(vec!["apps", "kube-system"])),
                prop::option::of(prop::sample::select(vec!["sub-"])),
                release(),
                prop::option::weighted(0.3, 0u8..META),
            )
                .prop_map(|(namespace, prefix, release, meta)| Sub {
                    namespace,
                    prefix,
                    release,
                    meta,
                }),
        ),
        prop::sample::select(vec![0u8, 0, 0, 1, 2, 3]),
        prop::bool::weighted(0.3),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.1),
        prop::option::weighted(0.2, (0usize..4, any::<bool>())),
        any::<bool>(),
    )
        .prop_map(
            |(
                ks,
                twice,
                releases,
                kustomize,
                sub,
                symlink,
                skip,
                cloudbuild,
                local_ignore,
                nested,
                patch_files,
            )| App {
                ks,
                twice,
                releases,
                kustomize,
                sub,
                symlink,
                skip,
                cloudbuild,
                local_ignore,
                nested,
                patch_files,
            },
        )
}

fn resource_set() -> impl Strategy<Value = ResourceSet> {
    (
        prop::collection::vec(
            (
                prop::sample::select(vec![
                    "Spégel",
                    "Kube & VIP",
                    "Ünïcødé Ñame",
                    "  Trim Me  ",
                    "CamelCase",
                    "a_b.c",
                    "日本語",
                    "rocket 🚀 app",
                    "ÆØÅ straße",
                    "cilium",
                    "--dash--",
                    "a-very-long-application-name-that-goes-on-and-on-beyond-the-limit-of-sixty-three",
                ]),
                prop::sample::select(vec!["1", "3", "x"]),
            ),
            0..3,
        ),
        prop::sample::select(vec![
            "<< inputs.app | slugify >>",
            "<< inputs.app | lower >>",
            "<< inputs.app | upper | slugify >>",
            "<< inputs.app | trim | slugify >>",
            "<< inputs.app | replace \" \" \"-\" | lower >>",
            "<< inputs.missing | default \"fallback\" >>",
            "<< inputs.app | slugify | quote >>",
            "rs-<< inputs.n >>",
            "<< slugify inputs.app >>",
        ]),
        prop::bool::weighted(0.4),
        prop::bool::weighted(0.3),
        any::<bool>(),
    )
        .prop_map(
            |(inputs, template, provider, kustomization, multi_doc)| ResourceSet {
                inputs,
                template,
                provider,
                kustomization,
                multi_doc,
            },
        )
}

pub fn trees() -> impl Strategy<Value = Tree> {
    (
        prop::collection::vec(app(), 1..4),
        prop::collection::vec(
            (
                prop::option::of(prop::sample::select(vec!["base-"])),
                release(),
                prop::option::weighted(0.3, 0u8..META),
            )
                .prop_map(|(prefix, release, meta)| Base {
                    prefix,
                    release,
                    meta,
                }),
            2,
        ),
        prop::collection::vec((0u8..5).prop_map(|kind| Component { kind }), 2),
        prop::option::weighted(0.3, 0u8..4),
        prop::option::weighted(0.2, 0u8..3),
        prop::bool::weighted(0.3),
        prop::option::weighted(
            0.3,
            (
                0u8..3,
                prop::collection::vec(
                    (
                        prop::sample::select(vec!["APP", "N", "NS"]),
                        prop::sample::select(vec!["spegel", "5", "true", "kube-public"]),
                    ),
                    1..3,
                ),
            ),
        ),
        prop::option::weighted(0.25, resource_set()),
    )
        .prop_map(
            |(
                apps,
                bases,
                components,
                repo,
                sourceignore,
                entry_kustomization,
                vars,
                resource_set,
            )| {
                Tree {
                    apps,
                    bases,
                    components,
                    repo,
                    sourceignore,
                    entry_kustomization,
                    vars,
                    resource_set,
                }
            },
        )
}

/// A file of the tree: text, or a symlink to a relative path.
#[derive(Debug, Clone)]
pub enum File {
    Text(String),
    Symlink(&'static str),
}

fn indent(text: &str, by: usize) -> String {
    let pad = " ".repeat(by);
    text.lines()
        .map(|l| {
            if l.is_empty() {
                String::new()
            } else {
                format!("{pad}{l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// How many labels and annotations transformers [`meta`] writes.
const META: u8 = 8;

/// A kustomization's (or component's) labels and annotations transformers
/// (docs/design.md#tree-resolution: `labels` with `includeSelectors` or
/// `includeTemplates`, `commonLabels`, `commonAnnotations`), which an outer
/// kustomization's or the Flux Kustomization's patches select by
/// (`stage`, `owner`, [`Target::StageLabel`]), or that carry Flux's marks.
fn meta(kind: u8) -> &'static str {
    match kind {
        0 => "labels:\n  - pairs:\n      stage: blue\n",
        1 => "labels:\n  - pairs:\n      stage: blue\n    includeSelectors: true\n",
        2 => "labels:\n  - pairs:\n      stage: 1\n    includeTemplates: true\n",
        3 => "commonLabels:\n  stage: blue\n  tier: edge\n",
        4 => "commonAnnotations:\n  owner: ops\n",
        5 => "commonAnnotations:\n  kustomize.toolkit.fluxcd.io/substitute: disabled\n",
        6 => "commonLabels:\n  kustomize.toolkit.fluxcd.io/reconcile: disabled\n",
        _ => "commonAnnotations:\n  kustomize.toolkit.fluxcd.io/ssa: ignore\n  owner: ops\n",
    }
}

/// A Flux mark on an object: (label or annotation, key, value).
fn flux_mark(kind: u8) -> (bool, &'static str, &'static str) {
    match kind {
        0 => (false, "kustomize.toolkit.fluxcd.io/substitute", "disabled"),
        1 => (true, "kustomize.toolkit.fluxcd.io/substitute", "disabled"),
        2 => (false, "kustomize.toolkit.fluxcd.io/reconcile", "disabled"),
        3 => (true, "kustomize.toolkit.fluxcd.io/reconcile", "Disabled"),
        4 => (false, "kustomize.toolkit.fluxcd.io/ssa", "Ignore"),
        _ => (false, "kustomize.toolkit.fluxcd.io/ssa", "IfNotPresent"),
    }
}

/// A Flux Kustomization's `spec.commonMetadata`, set after the post-build
/// (so a substitution mark there disables nothing) and before the apply's
/// exclusion selector.
fn common_metadata(kind: u8) -> &'static str {
    match kind {
        0 => "  commonMetadata:\n    labels:\n      stage: green\n",
        1 => {
            "  commonMetadata:\n    annotations:\n      kustomize.toolkit.fluxcd.io/reconcile: disabled\n"
        }
        2 => {
            "  commonMetadata:\n    labels:\n      kustomize.toolkit.fluxcd.io/substitute: disabled\n"
        }
        _ => "  commonMetadata:\n    annotations:\n      kustomize.toolkit.fluxcd.io/ssa: Ignore\n",
    }
}

fn helm_release(name: &str, r: &Release) -> String {
    let version = match r.shape {
        Shape::Unserved => "v2beta2",
        _ => "v2",
    };
    let mut text = format!(
        "apiVersion: helm.toolkit.fluxcd.io/{version}\nkind: HelmRelease\nmetadata:\n  name: {name}\n  namespace: kube-system\n  labels:\n    tier: {}\n",
        r.tier
    );
    let mark = r.mark.map(flux_mark);
    if let Some((true, key, value)) = mark {
        text.push_str(&format!("    {key}: {value}\n"));
    }
    let annotation = mark.filter(|m| !m.0);
    if r.annotated || annotation.is_some() {
        text.push_str("  annotations:\n");
    }
    if r.annotated {
        text.push_str("    team: net\n");
    }
    if let Some((_, key, value)) = annotation {
        text.push_str(&format!("    {key}: {value}\n"));
    }
    text.push_str("spec:\n");
    match r.shape {
        Shape::NoInterval => {}
        Shape::Undeclared => text.push_str("  interval: 1h\n  foo: bar\n"),
        _ => text.push_str("  interval: 1h\n"),
    }
    if let Some(n) = r.release_name {
        text.push_str(&format!("  releaseName: {n}\n"));
    }
    if let Some(ns) = r.target_namespace {
        text.push_str(&format!("  targetNamespace: {ns}\n"));
    }
    text.push_str(&format!(
        "  chart:\n    spec:\n      chart: cilium\n      sourceRef:\n        kind: HelmRepository\n        name: charts\n  values:\n    replicas: {}\n",
        r.replicas
    ));
    if r.values_from || r.target_path.is_some() {
        text.push_str("  valuesFrom:\n");
    }
    if let Some((path, key, secret, literal)) = r.target_path {
        let kind = if secret { "Secret" } else { "ConfigMap" };
        text.push_str(&format!(
            "    - kind: {kind}\n      name: tp\n      valuesKey: k{key}\n      targetPath: {}\n",
            TARGET_PATHS[path]
        ));
        if literal {
            text.push_str("      literal: true\n");
        }
    }
    // Last: it may name a ConfigMap no build makes (helm-controller stops
    // at the first entry that fails).
    if r.values_from {
        text.push_str("    - kind: ConfigMap\n      name: values\n");
    }
    text
}

/// The `targetPath`s of the generated `valuesFrom` entries: over
/// `spec.values`, new, into a list, nested.
const TARGET_PATHS: [&str; 4] = ["replicas", "tp.x", "list[1]", "deep.a.b"];

/// The values of the `tp` ConfigMap and Secret (keys `k0`, `k1`, …), as
/// helm's `--set` parser reads them (docs/design.md#from-a-flux-helmrelease):
/// a leading zero kept as text, `True`, a list, an escaped comma, an
/// unescaped one (which fails), a variable the post-build substitutes.
const TP_VALUES: [&str; 8] = [
    "042", "True", "{a,b}", "a\\,b", "a,b", "${N}", "1e3", "null",
];

/// The `tp` ConfigMap and Secret the `targetPath` entries read.
fn tp_objects() -> String {
    let mut cm = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tp\n  namespace: kube-system\ndata:\n",
    );
    let mut secret = String::from(
        "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: tp\n  namespace: kube-system\nstringData:\n",
    );
    for (i, v) in TP_VALUES.iter().enumerate() {
        cm.push_str(&format!("  k{i}: '{v}'\n"));
        secret.push_str(&format!("  k{i}: '{v}'\n"));
    }
    cm + &secret
}

/// The HelmRelease name a patch or replacement aims at (the first release
/// of the directory), before and after `prefix`/`suffix`.
fn names(first: &str, prefix: Option<&str>, suffix: Option<&str>) -> (String, String) {
    (
        first.to_string(),
        format!(
            "{}{first}{}",
            prefix.unwrap_or_default(),
            suffix.unwrap_or_default()
        ),
    )
}

/// A patch entry (`- target: … patch: |`) for kustomize's or Flux's
/// `patches`, aimed at `name` (original) / `current`; with `file`, the
/// patch is that file (`path:`), whose content is returned too.
fn patch_entry(p: &Patch, name: &str, current: &str, file: Option<&str>) -> (String, String) {
    let target = match p.target {
        Target::None => None,
        Target::OriginalName => Some(format!("kind: HelmRelease\nname: {name}")),
        Target::CurrentName => Some(format!("kind: HelmRelease\nname: {current}")),
        Target::NameRegex => Some("name: \"c.*\"".to_string()),
        Target::Kind => Some("kind: HelmRelease".to_string()),
        Target::GroupVersion => {
            Some("group: helm.toolkit.fluxcd.io\nversion: v2\nkind: HelmRelease".to_string())
        }
        Target::Namespace => Some("kind: HelmRelease\nnamespace: kube-system".to_string()),
        Target::LabelEquals => Some("labelSelector: tier=core".to_string()),
        Target::LabelIn => Some("labelSelector: tier in (core,edge)".to_string()),
        Target::LabelNotIn => {
            Some("kind: HelmRelease\nlabelSelector: tier notin (core)".to_string())
        }
        Target::LabelExists => Some("labelSelector: \"!tier\"".to_string()),
        Target::Annotation => Some("annotationSelector: team=net".to_string()),
        Target::StageLabel => Some("labelSelector: stage=blue".to_string()),
        Target::StageSet => Some("kind: HelmRelease\nlabelSelector: stage in (blue,1)".to_string()),
        Target::Owner => Some("annotationSelector: owner=ops".to_string()),
    };
    let body = if p.json6902 {
        match p.op {
            0 => "- op: add\n  path: /spec/releaseName\n  value: patched\n".to_string(),
            1 => "- op: replace\n  path: /spec/values/replicas\n  value: 5\n".to_string(),
            2 => "- op: remove\n  path: /spec/values\n".to_string(),
            3 => "- op: replace\n  path: /metadata/name\n  value: renamed\n".to_string(),
            4 => "- op: add\n  path: /metadata/labels/tier\n  value: edge\n".to_string(),
            _ => "- op: remove\n  path: /spec/missing\n".to_string(),
        }
    } else {
        let head = format!(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: {name}\n"
        );
        match p.op {
            0 => format!("{head}spec:\n  releaseName: patched\n"),
            1 => format!("{head}spec:\n  values:\n    replicas: 5\n"),
            2 => format!("{head}  labels:\n    tier: edge\n"),
            3 => format!("$patch: delete\n{head}"),
            4 => format!("{head}spec:\n  values:\n    $patch: replace\n    other: 1\n"),
            _ => format!("{head}  namespace: patched-ns\n"),
        }
    };
    let mut entry = String::from("- ");
    if let Some(t) = target {
        entry.push_str(&format!("target:\n{}\n  ", indent(&t, 4)));
    }
    match file {
        Some(f) => entry.push_str(&format!("path: {f}\n")),
        None => entry.push_str(&format!("patch: |\n{}\n", indent(&body, 4))),
    }
    (entry, body)
}

/// Writes the tree as files (path relative to the root → content); the
/// entrypoint is `clusters/test`.
pub fn files(tree: &Tree) -> BTreeMap<String, File> {
    let mut out = BTreeMap::new();
    let mut entry = String::new();
    let mut entry_files = vec!["kustomizations.yaml".to_string()];
    for (i, app) in tree.apps.iter().enumerate() {
        let ks = &app.ks;
        let copies = if app.twice { 2 } else { 1 };
        for copy in 0..copies {
            let path = if app.symlink == 3 && copy == 1 {
                format!("./apps/alias{i}")
            } else {
                format!("./apps/app{i}")
            };
            entry.push_str(&format!(
                "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: app{i}-{copy}\n  namespace: flux-system\nspec:\n  interval: 1h\n  path: {path}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n"
            ));
            if let Some(ns) = ks.target_ns {
                entry.push_str(&format!("  targetNamespace: \"{ns}\"\n"));
            }
            if let Some(p) = ks.prefix {
                entry.push_str(&format!("  namePrefix: \"{p}\"\n"));
            }
            if let Some(s) = ks.suffix {
                entry.push_str(&format!("  nameSuffix: \"{s}\"\n"));
            }
            if let Some(c) = ks.component {
                entry.push_str(&format!("  components:\n    - ../../components/comp{c}\n"));
            }
            if let Some(m) = ks.common_metadata {
                entry.push_str(common_metadata(m));
            }
            if let Some(p) = &ks.patch {
                let first = app.releases[0].name;
                let (name, current) = names(first, ks.prefix, ks.suffix);
                entry.push_str(&format!(
                    "  patches:\n{}\n",
                    indent(&patch_entry(p, &name, &current, None).0, 4)
                ));
            }
            if !ks.vars.is_empty() || ks.always || ks.from.is_some() {
                entry.push_str("  postBuild:\n");
                if ks.always {
                    entry.push_str("    substituteStrategy: Always\n");
                }
                if !ks.vars.is_empty() {
                    entry.push_str("    substitute:\n");
                    for (k, v) in &ks.vars {
                        entry.push_str(&format!("      {k}: \"{v}\"\n"));
                    }
                }
                if let Some(optional) = ks.from {
                    let kind = match tree.vars {
                        Some((1 | 2, _)) => "Secret",
                        _ => "ConfigMap",
                    };
                    entry.push_str(&format!(
                        "    substituteFrom:\n      - kind: {kind}\n        name: vars\n        optional: {optional}\n"
                    ));
                }
            }
        }
        let dir = format!("apps/app{i}");
        let mut resources = Vec::new();
        for (j, r) in app.releases.iter().enumerate() {
            put(
                &mut out,
                format!("{dir}/hr{j}.yaml"),
                helm_release(r.name, r),
            );
            resources.push(format!("hr{j}.yaml"));
        }
        if app.releases.iter().any(|r| r.target_path.is_some()) {
            put(&mut out, format!("{dir}/tp.yaml"), tp_objects());
            resources.push("tp.yaml".to_string());
        }
        if let Some(sub) = &app.sub {
            let mut k = String::from(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - hr.yaml\n",
            );
            if let Some(ns) = sub.namespace {
                k.push_str(&format!("namespace: {ns}\n"));
            }
            if let Some(p) = sub.prefix {
                k.push_str(&format!("namePrefix: {p}\n"));
            }
            if let Some(m) = sub.meta {
                k.push_str(meta(m));
            }
            put(&mut out, format!("{dir}/sub/kustomization.yaml"), k);
            put(
                &mut out,
                format!("{dir}/sub/hr.yaml"),
                helm_release(sub.release.name, &sub.release),
            );
            resources.push("sub".to_string());
        }
        if app.skip {
            let skipped = Release {
                name: "skipped",
                ..app.releases[0].clone()
            };
            let kept = Release {
                name: "kept",
                ..app.releases[0].clone()
            };
            put(
                &mut out,
                format!("{dir}/skip/hr.yaml"),
                helm_release("skipped", &skipped),
            );
            put(
                &mut out,
                format!("{dir}/skip/keep.yaml"),
                helm_release("kept", &kept),
            );
            resources.push("skip/keep.yaml".to_string());
        }
        if app.cloudbuild {
            let cloud = Release {
                name: "cloud",
                ..app.releases[0].clone()
            };
            put(
                &mut out,
                format!("{dir}/cloudbuild.yaml"),
                helm_release("cloud", &cloud),
            );
        }
        if let Some((to, target_ns)) = app.nested {
            let mut ks = format!(
                "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: nested{i}\n  namespace: flux-system\nspec:\n  interval: 1h\n  path: ./apps/app{}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n",
                to % tree.apps.len()
            );
            if target_ns {
                ks.push_str("  targetNamespace: nested-ns\n");
            }
            put(&mut out, format!("{dir}/flux.yaml"), ks);
            resources.push("flux.yaml".to_string());
        }
        if app.local_ignore {
            put(
                &mut out,
                format!("{dir}/.sourceignore"),
                "skip/\n!skip/keep.yaml\n".to_string(),
            );
        }
        if let Some(k) = &app.kustomize {
            let mut doc = String::from(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n",
            );
            for r in &resources {
                doc.push_str(&format!("  - {r}\n"));
            }
            for b in &k.bases {
                doc.push_str(&format!("  - ../../bases/base{b}\n"));
            }
            if !k.components.is_empty() {
                doc.push_str("components:\n");
                for c in &k.components {
                    doc.push_str(&format!("  - ../../components/comp{c}\n"));
                }
            }
            if let Some(ns) = k.namespace {
                doc.push_str(&format!("namespace: {ns}\n"));
            }
            if let Some(p) = k.prefix {
                doc.push_str(&format!("namePrefix: {p}\n"));
            }
            if let Some(s) = k.suffix {
                doc.push_str(&format!("nameSuffix: {s}\n"));
            }
            if let Some(m) = k.meta {
                doc.push_str(meta(m));
            }
            let first = app.releases[0].name;
            let (name, current) = names(first, k.prefix, k.suffix);
            if !k.patches.is_empty() {
                doc.push_str("patches:\n");
                for (n, p) in k.patches.iter().enumerate() {
                    let file = format!("patch{n}.yaml");
                    let (entry, body) =
                        patch_entry(p, &name, &current, app.patch_files.then_some(&file));
                    if app.patch_files {
                        put(&mut out, format!("{dir}/{file}"), body);
                    }
                    doc.push_str(&format!("{}\n", indent(&entry, 2)));
                }
            }
            match k.legacy {
                Some(true) => {
                    doc.push_str("patchesStrategicMerge:\n  - legacy.yaml\n");
                    put(
                        &mut out,
                        format!("{dir}/legacy.yaml"),
                        format!(
                            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: {name}\n  namespace: kube-system\nspec:\n  releaseName: legacy\n"
                        ),
                    );
                }
                Some(false) => {
                    doc.push_str(&format!(
                        "patchesJson6902:\n  - target:\n      group: helm.toolkit.fluxcd.io\n      version: v2\n      kind: HelmRelease\n      name: {name}\n      namespace: kube-system\n    path: legacy.yaml\n"
                    ));
                    put(
                        &mut out,
                        format!("{dir}/legacy.yaml"),
                        "- op: add\n  path: /spec/releaseName\n  value: legacy\n".to_string(),
                    );
                }
                None => {}
            }
            if let Some(r) = &k.replacement {
                let (kind, source_name, field) = if r.from_config_map {
                    let cm = if r.source_original {
                        "values".to_string()
                    } else {
                        names("values", k.prefix, k.suffix).1
                    };
                    let key = if r.into_values {
                        "data.n"
                    } else {
                        "data.release"
                    };
                    ("ConfigMap", cm, key)
                } else {
                    let n = if r.source_original { &name } else { &current };
                    ("HelmRelease", n.clone(), "metadata.name")
                };
                let select = if r.target_by_name {
                    format!("kind: HelmRelease\n        name: {name}")
                } else {
                    "kind: HelmRelease".to_string()
                };
                let target = if r.into_values {
                    "spec.values.replicas"
                } else {
                    "spec.releaseName"
                };
                doc.push_str(&format!(
                    "replacements:\n  - source:\n      kind: {kind}\n      name: {source_name}\n      fieldPath: {field}\n    targets:\n      - select:\n          {}\n        fieldPaths:\n          - {target}\n",
                    select.replace("\n        ", "\n          ")
                ));
                if r.create {
                    doc.push_str("        options:\n          create: true\n");
                }
            }
            let generated = k.generator.or(k
                .replacement
                .as_ref()
                .filter(|r| r.from_config_map)
                .map(|_| (false, false)));
            if let Some((hash, nameref)) = generated {
                doc.push_str(
                    "configMapGenerator:\n  - name: values\n    literals:\n      - values.yaml=a\n      - release=from-config\n      - n=5\n",
                );
                if !hash {
                    doc.push_str("    options:\n      disableNameSuffixHash: true\n");
                }
                if nameref {
                    doc.push_str("configurations:\n  - kustomizeconfig.yaml\n");
                    put(&mut out,
                        format!("{dir}/kustomizeconfig.yaml"),
                        "nameReference:\n  - kind: ConfigMap\n    version: v1\n    fieldSpecs:\n      - path: spec/valuesFrom/name\n        kind: HelmRelease\n".to_string(),
                    );
                }
            }
            put(&mut out, format!("{dir}/kustomization.yaml"), doc);
        }
        match app.symlink {
            1 => {
                out.insert(format!("{dir}/link.yaml"), File::Symlink("hr0.yaml"));
            }
            2 => {
                out.insert(format!("{dir}/linked"), File::Symlink("../../bases/base0"));
            }
            3 => {
                out.insert(format!("apps/alias{i}"), File::Symlink("app0"));
            }
            _ => {}
        }
    }
    // Only the bases and components something refers to.
    let used_base = |j: usize| {
        tree.apps.iter().any(|a| {
            (a.symlink == 2 && j == 0) || a.kustomize.as_ref().is_some_and(|k| k.bases.contains(&j))
        })
    };
    let used_component = |c: usize| {
        tree.apps.iter().any(|a| {
            a.ks.component == Some(c)
                || a.kustomize
                    .as_ref()
                    .is_some_and(|k| k.components.contains(&c))
        })
    };
    for (j, b) in tree.bases.iter().enumerate() {
        if !used_base(j) {
            continue;
        }
        let mut k = String::from(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - hr.yaml\n",
        );
        if let Some(p) = b.prefix {
            k.push_str(&format!("namePrefix: {p}\n"));
        }
        if let Some(m) = b.meta {
            k.push_str(meta(m));
        }
        put(&mut out, format!("bases/base{j}/kustomization.yaml"), k);
        let name = format!("{}-b{j}", b.release.name);
        put(
            &mut out,
            format!("bases/base{j}/hr.yaml"),
            helm_release(&name, &b.release),
        );
    }
    for (c, comp) in tree.components.iter().enumerate() {
        if !used_component(c) {
            continue;
        }
        let dir = format!("components/comp{c}");
        let mut k = String::from("apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n");
        match comp.kind {
            0 => {
                k.push_str("resources:\n  - hr.yaml\n");
                let r = Release {
                    name: "from-component",
                    tier: "core",
                    annotated: false,
                    replicas: "1",
                    release_name: None,
                    target_namespace: None,
                    values_from: false,
                    mark: None,
                    target_path: None,
                    shape: Shape::Served,
                };
                put(&mut out, format!("{dir}/hr.yaml"), helm_release(&format!("comp{c}"), &r));
            }
            1 => k.push_str(
                "patches:\n  - target:\n      kind: HelmRelease\n      labelSelector: tier in (core)\n    patch: |\n      - op: add\n        path: /spec/releaseName\n        value: from-component\n",
            ),
            2 => k.push_str("namePrefix: comp-\n"),
            3 => k.push_str(&format!("{}{}", meta(1), meta(4))),
            _ => k.push_str(meta(5)),
        }
        put(&mut out, format!("{dir}/kustomization.yaml"), k);
    }
    if let Some(rules) = tree.repo {
        let ignore = match rules {
            0 => "/apps/*/skip/\n!/apps/*/skip/keep.yaml",
            1 => "/apps/app0/\n!/apps/app0/hr0.yaml\n!/apps/app0/kustomization.yaml",
            2 => "*.md\n/bases/base1/",
            _ => "# nothing ignored\n/apps/**/cloudbuild.yaml",
        };
        put(
            &mut out,
            "clusters/test/repo.yaml".to_string(),
            format!(
                "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 1h\n  url: https://example.com/repo\n  ref:\n    branch: main\n  ignore: |\n{}\n---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 1h\n  path: ./clusters/test\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n",
                indent(ignore, 4)
            ),
        );
        entry_files.push("repo.yaml".to_string());
    }
    if let Some(rules) = tree.sourceignore {
        let content = match rules {
            0 => "# only comments: the defaults are dropped all the same\n",
            1 => "apps/*/skip/\n!apps/*/skip/keep.yaml\n",
            _ => "/bases/base0/hr.yaml\n",
        };
        put(&mut out, ".sourceignore".to_string(), content.to_string());
    }
    if let Some((kind, vars)) = &tree.vars {
        let (object, field) = match kind {
            0 => ("ConfigMap", "data"),
            1 => ("Secret", "stringData"),
            _ => ("Secret", "data"),
        };
        let mut cm = format!(
            "apiVersion: v1\nkind: {object}\nmetadata:\n  name: vars\n  namespace: flux-system\n{field}:\n"
        );
        for (k, v) in vars {
            let v = if *kind == 2 { base64(v) } else { v.to_string() };
            cm.push_str(&format!("  {k}: \"{v}\"\n"));
        }
        put(&mut out, "clusters/test/vars.yaml".to_string(), cm);
        entry_files.push("vars.yaml".to_string());
    }
    if let Some(rs) = &tree.resource_set {
        let mut doc = String::from(
            "apiVersion: fluxcd.controlplane.io/v1\nkind: ResourceSet\nmetadata:\n  name: rs\n  namespace: flux-system\nspec:\n",
        );
        if !rs.inputs.is_empty() {
            doc.push_str("  inputs:\n");
            for (app, n) in &rs.inputs {
                doc.push_str(&format!("    - app: \"{app}\"\n      n: \"{n}\"\n"));
            }
        }
        if rs.provider {
            doc.push_str(
                "  inputsFrom:\n    - kind: ResourceSetInputProvider\n      name: static\n",
            );
        }
        let resource = if rs.kustomization {
            format!(
                "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {}\n  namespace: flux-system\nspec:\n  interval: 1h\n  path: ./apps/app0\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n  targetNamespace: rs-ns\n",
                rs.template
            )
        } else {
            format!(
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: {}\n  namespace: kube-system\nspec:\n  interval: 1h\n  chart:\n    spec:\n      chart: cilium\n      sourceRef:\n        kind: HelmRepository\n        name: charts\n  values:\n    replicas: << inputs.n | default 1 >>\n",
                rs.template
            )
        };
        if rs.multi_doc {
            doc.push_str(&format!(
                "  resourcesTemplate: |\n{}\n",
                indent(&resource, 4)
            ));
        } else {
            doc.push_str(&format!("  resources:\n{}", list_item(&resource, 4)));
        }
        if rs.provider {
            doc.push_str("---\napiVersion: fluxcd.controlplane.io/v1\nkind: ResourceSetInputProvider\nmetadata:\n  name: static\n  namespace: flux-system\nspec:\n  type: Static\n  defaultValues:\n    app: \"Provided Ünicode\"\n    n: \"2\"\n");
        }
        put(&mut out, "clusters/test/rset.yaml".to_string(), doc);
        entry_files.push("rset.yaml".to_string());
    }
    put(
        &mut out,
        "clusters/test/kustomizations.yaml".to_string(),
        entry,
    );
    if tree.entry_kustomization {
        let mut k = String::from(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n",
        );
        for f in &entry_files {
            k.push_str(&format!("  - {f}\n"));
        }
        put(&mut out, "clusters/test/kustomization.yaml".to_string(), k);
    }
    out
}

/// Standard base64, as a Secret's `data` holds it.
fn base64(text: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in text.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn put(out: &mut BTreeMap<String, File>, path: String, content: String) {
    out.insert(path, File::Text(content));
}

/// `text` as an item of a YAML block sequence indented by `by`.
fn list_item(text: &str, by: usize) -> String {
    let pad = " ".repeat(by);
    let mut lines = text.lines();
    let mut out = format!("{pad}- {}\n", lines.next().unwrap_or_default());
    for l in lines {
        out.push_str(&format!("{pad}  {l}\n"));
    }
    out
}

fn materialize(root: &Path, files: &BTreeMap<String, File>) -> std::io::Result<()> {
    for (rel, file) in files {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().expect("a parent"))?;
        match file {
            File::Text(t) => std::fs::write(&path, t)?,
            File::Symlink(to) => std::os::unix::fs::symlink(to, &path)?,
        }
    }
    Ok(())
}

/// The tree as text: each file with its path (a symlink as `path -> target`).
pub fn show(files: &BTreeMap<String, File>) -> String {
    let mut out = String::new();
    for (rel, file) in files {
        match file {
            File::Text(t) => out.push_str(&format!("==> {rel}\n{t}\n")),
            File::Symlink(to) => out.push_str(&format!("==> {rel} -> {to}\n")),
        }
    }
    out
}

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn seed_bytes(seed: u64) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&(seed.wrapping_add(i as u64)).to_le_bytes());
    }
    bytes
}

/// Compares `check` with the oracle on `FLUX_ORACLE_CASES` trees from
/// `FLUX_ORACLE_SEED`; a divergence fails with the shrunk tree.
pub fn run(divergences: impl Fn(&Path) -> Result<Vec<String>, String>) {
    let cases = env("FLUX_ORACLE_CASES", CI_CASES);
    let seed = env("FLUX_ORACLE_SEED", CI_SEED);
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 1024,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes(seed));
    let mut runner = TestRunner::new_with_rng(config, rng);
    let started = Instant::now();
    let result = runner.run(&trees(), |tree| {
        let dir = tempfile::tempdir().expect("a temporary directory");
        materialize(dir.path(), &files(&tree)).expect("the tree is written");
        let found = divergences(dir.path()).map_err(TestCaseError::fail)?;
        if !found.is_empty() {
            return Err(TestCaseError::fail(found.join("\n")));
        }
        Ok(())
    });
    match result {
        Ok(()) => eprintln!(
            "{cases} generated trees (seed {seed}): check agrees with Flux ({:.1} s)",
            started.elapsed().as_secs_f64()
        ),
        Err(TestError::Fail(why, tree)) => panic!(
            "check diverges from Flux on a generated tree (FLUX_ORACLE_SEED={seed}, FLUX_ORACLE_CASES={cases}; shrunk):\n{why}\n\n{}\n{tree:#?}",
            show(&files(&tree))
        ),
        Err(e) => panic!("the generated trees (seed {seed}) did not run: {e}"),
    }
}
