//! `bootstrap import helmfile` always looks for the repository's Flux tree
//! (docs/design.md#import), also when no values template reads a
//! HelmRelease: a release that a HelmRelease of the tree manages is written
//! `ownership: handover`, never bootstrap-owned unseen (applied that way,
//! bootstrap's own admission guard would deny the repository's HelmRelease),
//! and `check` then scans the tree the import found. Without a tree, the
//! import says where it looked and how to point it at one.

use testkit::builder::{Output, Test};

/// Plain releases: chart, version and a values file each; nothing read
/// from the Flux tree.
const HELMFILE: &str = "releases:
  - name: cilium
    namespace: kube-system
    chart: oci://ghcr.io/example/charts/cilium
    version: 1.18.0
    values:
      - cilium-values.yaml
  - name: coredns
    namespace: kube-system
    chart: oci://ghcr.io/example/charts/coredns
    version: 1.43.0
    needs:
      - kube-system/cilium
";

const CILIUM_VALUES: &str =
    "kubeProxyReplacement: true\nk8sServiceHost: 10.0.0.10\nk8sServicePort: 6443\n";

/// The tree as `flux bootstrap` writes it: the `flux-system` Kustomization
/// over clusters/infra, which reaches the apps through another one.
const SYNC: &str = "apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 10m
  path: ./clusters/infra
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
";

const APPS: &str = "apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 10m
  path: ./apps
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
";

/// Flux's HelmRelease for the release the helmfile installs: the same
/// chart, version and values, so the adoption changes nothing.
const CILIUM_HR: &str = "---
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata:
  name: cilium
  namespace: kube-system
spec:
  interval: 1h
  url: oci://ghcr.io/example/charts/cilium
  ref:
    tag: 1.18.0
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: cilium
  namespace: kube-system
spec:
  interval: 1h
  chartRef:
    kind: OCIRepository
    name: cilium
  values:
    kubeProxyReplacement: true
    k8sServiceHost: 10.0.0.10
    k8sServicePort: 6443
";

fn repository() -> Test {
    Test::new()
        .file(".git/HEAD", "ref: refs/heads/main\n")
        .file("bootstrap/helmfile.yaml", HELMFILE)
        .file("bootstrap/cilium-values.yaml", CILIUM_VALUES)
        .file("clusters/infra/flux-system/gotk-sync.yaml", SYNC)
        .file("clusters/infra/apps.yaml", APPS)
        .file("apps/cilium/helmrelease.yaml", CILIUM_HR)
}

fn run(test: &Test, args: &[&str]) -> Output {
    let mut command = test.command();
    command.args(["--dir", "bootstrap/config"]).args(args);
    Output::from(command.output().unwrap())
}

fn import(test: &Test, extra: &[&str]) -> Output {
    let mut args = vec![
        "import",
        "helmfile",
        "bootstrap/helmfile.yaml",
        "--cluster",
        "infra",
        "--no-helmfile",
    ];
    args.extend_from_slice(extra);
    run(test, &args)
}

fn read(test: &Test, path: &str) -> String {
    std::fs::read_to_string(test.path().join(path)).unwrap()
}

#[test]
fn a_release_a_helmrelease_manages_is_handed_over_and_check_scans_the_tree() {
    let test = repository();
    let out = import(&test, &[]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{}", out.stdout);
    assert!(
        out.stdout.contains("Flux tree: ")
            && out.stdout.contains("(entrypoint clusters/infra)")
            && out.stdout.contains(
                "1 release that its HelmReleases manage, written `ownership: handover` (Flux adopts it after the bootstrap): kube-system/cilium"
            ),
        "{}",
        out.stdout
    );
    let cluster = read(&test, "bootstrap/config/clusters/infra/cluster.yaml");
    assert!(
        cluster.contains("flux:\n  root: ../..\n  entrypoint: clusters/infra\n")
            && cluster.contains("the path of the `flux-system` Kustomization in"),
        "{cluster}"
    );
    let releases = read(&test, "bootstrap/config/releases/helmfile.yaml");
    let cilium = releases.split("---\n").nth(1).unwrap();
    let coredns = releases.split("---\n").nth(2).unwrap();
    assert!(
        cilium.contains("ownership: handover\n")
            && cilium.contains("HelmRelease kube-system/cilium"),
        "{cilium}"
    );
    assert!(!coredns.contains("ownership:"), "{coredns}");

    // check scans what the import found: cilium is Flux's to adopt with
    // the same values, coredns is bootstrap's and no HelmRelease targets it.
    let check = run(&test, &["check", "infra"]);
    assert_eq!(check.code, 0, "{}\n{}", check.stdout, check.stderr);
    assert!(
        !check.stdout.contains("no GitOps tree was scanned"),
        "{}",
        check.stdout
    );
}

#[test]
fn the_same_tree_written_bootstrap_owned_is_what_check_refuses() {
    // Why the handover matters: with cilium bootstrap's, the tree's
    // HelmRelease is dual management (and the admission guard would deny
    // it). Taking the import's `ownership: handover` away shows it.
    let test = repository();
    assert_eq!(import(&test, &[]).code, 0);
    let path = test.path().join("bootstrap/config/releases/helmfile.yaml");
    let releases = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, releases.replace("ownership: handover\n", "")).unwrap();
    let check = run(&test, &["check", "infra"]);
    assert_eq!(check.code, 1, "{}\n{}", check.stdout, check.stderr);
    assert!(
        check.stdout.contains("kube-system/cilium") || check.stderr.contains("kube-system/cilium"),
        "{}\n{}",
        check.stdout,
        check.stderr
    );
}

#[test]
fn flux_root_points_the_import_at_a_tree_outside_the_repository() {
    // No .git: the search stays between the helmfile and the working
    // directory, and the tree lives elsewhere.
    let test = Test::new()
        .file("bootstrap/helmfile.yaml", HELMFILE)
        .file("bootstrap/cilium-values.yaml", CILIUM_VALUES)
        .file("gitops/clusters/infra/flux-system/gotk-sync.yaml", SYNC)
        .file("gitops/clusters/infra/apps.yaml", APPS)
        .file("gitops/apps/cilium/helmrelease.yaml", CILIUM_HR);
    let out = import(&test, &["--flux-root", "gitops"]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{}", out.stdout);
    let cluster = read(&test, "bootstrap/config/clusters/infra/cluster.yaml");
    assert!(
        cluster.contains("flux:\n  root: ../../gitops\n  entrypoint: clusters/infra\n"),
        "{cluster}"
    );
    assert!(
        read(&test, "bootstrap/config/releases/helmfile.yaml").contains("ownership: handover\n")
    );
}

#[test]
fn without_a_tree_the_import_says_where_it_looked_and_how_to_point_it() {
    let test = Test::new()
        .file(".git/HEAD", "ref: refs/heads/main\n")
        .file("bootstrap/helmfile.yaml", HELMFILE)
        .file("bootstrap/cilium-values.yaml", CILIUM_VALUES);
    let out = import(&test, &[]);
    assert_eq!((out.code, out.stderr.as_str()), (0, ""), "{}", out.stdout);
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("no Flux tree found"))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(
        line.starts_with("no Flux tree found (searched .): ") && line.contains("--flux-root DIR"),
        "{line}"
    );
    let cluster = read(&test, "bootstrap/config/clusters/infra/cluster.yaml");
    assert!(!cluster.contains("flux:"), "{cluster}");
}

/// A HelmRelease that takes a value from a Secret outside the tree (one
/// external-secrets makes) at a `targetPath`: what it sets there is unknown
/// offline, not "unset", so the handover release that sets that path is no
/// drift (which no config could fix) but a warning that it is not compared.
#[test]
fn a_target_path_from_a_secret_outside_the_tree_is_unknown_not_drift() {
    let test = repository().file(
        "apps/cilium/helmrelease.yaml",
        &CILIUM_HR.replace(
            "  values:\n",
            "  valuesFrom:\n    - kind: Secret\n      name: cilium-clustermesh\n      valuesKey: token\n      targetPath: clustermesh.token\n  values:\n",
        ),
    );
    let out = import(&test, &[]);
    assert_eq!(out.code, 0, "{}", out.stdout);
    // bootstrap sets the value the Secret gives Flux.
    let values = test.path().join("bootstrap/cilium-values.yaml");
    std::fs::write(
        &values,
        format!("{CILIUM_VALUES}clustermesh:\n  token: from-the-vault\n"),
    )
    .unwrap();
    let check = run(&test, &["check", "infra"]);
    assert_eq!(check.code, 0, "{}\n{}", check.stdout, check.stderr);
    assert!(
        check.stdout.contains("handover-values-unknown")
            && check
                .stdout
                .contains("Secret kube-system/cilium-clustermesh")
            && !check.stdout.contains("handover-drift"),
        "{}",
        check.stdout
    );
}
