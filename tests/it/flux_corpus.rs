//! The scan against real repositories that bootstrap with helmfile and then
//! hand the same releases to Flux (tests/fixtures/corpus, copied unchanged).
//! Under bootstrap's exclusive ownership every handed-over release must be
//! reported, with the route Flux takes to it.

use std::path::Path;

use bootstrap::flux::{BootstrapRelease, Scan, ScanInput, Severity, scan};
use pretty_assertions::assert_eq;

/// (namespace, name, chart) of a bootstrap release.
type Declared = (&'static str, &'static str, &'static str);

fn run(repo: &str, declared: &[Declared]) -> Scan {
    let releases: Vec<BootstrapRelease> = declared
        .iter()
        .map(|(namespace, name, chart)| BootstrapRelease {
            name: name.to_string(),
            namespace: namespace.to_string(),
            chart: Some(chart.to_string()),
            workloads: vec![],
            rendered: None,
            handover: None,
        })
        .collect();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/corpus")
        .join(repo);
    // Their flux-instance HelmRelease syncs `kubernetes/flux/cluster`.
    scan(&ScanInput {
        root: &root,
        entrypoint: Path::new("kubernetes/flux/cluster"),
        releases: &releases,
    })
}

/// Every repository lays its apps out as
/// `kubernetes/apps/<namespace>/<app>/{ks.yaml,app/}`, reached from the root
/// Kustomization `cluster-apps` (path ./kubernetes/apps, generated) through
/// the namespace directory's kustomization.yaml.
fn expected_chain(namespace: &str, app: &str) -> Vec<String> {
    let dir = format!("kubernetes/apps/{namespace}");
    vec![
        "kubernetes/flux/cluster/ks.yaml".to_string(),
        format!("{dir}/kustomization.yaml"),
        format!("{dir}/{app}/ks.yaml"),
        format!("{dir}/{app}/app/kustomization.yaml"),
        format!("{dir}/{app}/app/helmrelease.yaml"),
    ]
}

fn assert_every_release_adopted(repo: &str, declared: &[Declared]) {
    let scan = run(repo, declared);
    let errors: Vec<_> = scan
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| {
            let object = f.object.as_ref().expect("conflicts name the HelmRelease");
            (
                f.code,
                f.release.clone().unwrap(),
                object.kind.as_str(),
                object.namespace.clone().unwrap(),
                object.name.clone(),
                f.chain.clone(),
            )
        })
        .collect();
    let mut expected: Vec<_> = declared
        .iter()
        .map(|(namespace, name, _)| {
            (
                "flux-manages-bootstrap-release",
                format!("{namespace}/{name}"),
                "HelmRelease",
                namespace.to_string(),
                name.to_string(),
                expected_chain(namespace, name),
            )
        })
        .collect();
    expected.sort();
    assert_eq!(errors, expected, "{repo}");
    // The copies hold only part of each repository: the rest of the findings
    // are references into the parts left out, never a crash or bad YAML.
    for f in scan
        .findings
        .iter()
        .filter(|f| f.severity != Severity::Error)
    {
        assert!(
            ["path-not-found", "flux-dependson-missing"].contains(&f.code),
            "{repo}: unexpected {f:?}"
        );
    }
}

#[test]
fn onedr0p_home_ops() {
    // bootstrap/helmfile/apps.yaml
    assert_every_release_adopted(
        "onedr0p__home-ops",
        &[
            ("kube-system", "cilium", "cilium"),
            ("kube-system", "coredns", "coredns"),
            ("kube-system", "spegel", "spegel"),
            ("cert-manager", "cert-manager", "cert-manager"),
            ("external-secrets", "external-secrets", "external-secrets"),
            ("external-secrets", "onepassword-connect", "connect"),
            ("flux-system", "flux-operator", "flux-operator"),
            ("flux-system", "flux-instance", "flux-instance"),
        ],
    );
}

#[test]
fn buroa_k8s_gitops() {
    // bootstrap/helmfile/apps.yaml
    assert_every_release_adopted(
        "buroa__k8s-gitops",
        &[
            ("kube-system", "cilium", "cilium"),
            ("kube-system", "coredns", "coredns"),
            ("kube-system", "spegel", "spegel"),
            ("cert-manager", "cert-manager", "cert-manager"),
            ("external-secrets", "external-secrets", "external-secrets"),
            ("flux-system", "flux-operator", "flux-operator"),
            ("flux-system", "flux-instance", "flux-instance"),
        ],
    );
}

#[test]
fn bjw_s_labs_home_ops() {
    // kubernetes/bootstrap/helmfile/apps.yaml (no spegel here)
    assert_every_release_adopted(
        "bjw-s-labs__home-ops",
        &[
            ("kube-system", "cilium", "cilium"),
            ("kube-system", "coredns", "coredns"),
            ("cert-manager", "cert-manager", "cert-manager"),
            (
                "cert-manager",
                "cert-manager-webhook-ovh",
                "cert-manager-webhook-ovh",
            ),
            ("external-secrets", "external-secrets", "external-secrets"),
            ("external-secrets", "onepassword-connect", "connect"),
            ("flux-system", "flux-operator", "flux-operator"),
            ("flux-system", "flux-instance", "flux-instance"),
        ],
    );
}

#[test]
fn chart_refs_to_oci_repositories_find_the_same_chart_under_another_name() {
    // Had bootstrap installed Cilium as `cni`, the Flux HelmRelease `cilium`
    // (chartRef -> OCIRepository oci://quay.io/cilium/charts/cilium) would
    // install the same chart beside it.
    let scan = run("onedr0p__home-ops", &[("kube-system", "cni", "cilium")]);
    let errors: Vec<_> = scan
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| {
            (
                f.code,
                f.object.as_ref().unwrap().name.as_str(),
                f.chain.clone(),
            )
        })
        .collect();
    assert_eq!(
        errors,
        [(
            "flux-duplicates-bootstrap-chart",
            "cilium",
            expected_chain("kube-system", "cilium")
        )]
    );
}
