//! `bootstrap import helmfile` hands over to Flux by default
//! (docs/design.md#import, docs/coming-from-helmfile.md), end to end: a
//! helmfile whose values come from the Flux HelmReleases of the GitOps tree
//! is imported as `from:` + `ownership: handover`, the tree found from where
//! the templates read (here through its Flux Kustomization: no FluxInstance
//! says it); `plan` and `check` accept it; `apply` against the loopback API
//! and the fake helm installs each release with the HelmRelease's chart and
//! values and records it as Flux's to adopt.

use serde_json::{Value, json};
use testkit::builder::Test;
use testkit::cluster::Cluster;

/// The helmfile: `app`'s values template reads a file whose first document
/// is the OCIRepository and whose second is the HelmRelease (`fromYaml`
/// takes the first: `.spec.values` is not set there, under helmfile too);
/// `dns` names its chart and a values file, and a HelmRelease of the tree
/// manages it.
const HELMFILE: &str = "releases:
  - name: app
    namespace: apps
    chart: oci://ghcr.io/example/charts/app
    version: 1.2.3
    values:
      - values.yaml.gotmpl
  - name: dns
    namespace: kube-system
    chart: oci://ghcr.io/example/charts/dns
    version: 1.0.0
    needs:
      - apps/app
    values:
      - dns-values.yaml
";

const VALUES_TEMPLATE: &str =
    "{{ (fromYaml (readFile \"../kubernetes/apps/apps/app/app.yaml\")).spec.values | toYaml }}\n";

const DNS_VALUES: &str = "replicaCount: 2\n";

/// The Flux tree: the cluster's Kustomization over kubernetes/apps.
const SYNC: &str = "apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: cluster-apps
  namespace: flux-system
spec:
  interval: 1h
  path: ./kubernetes/apps
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
";

const APP: &str = "---
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata:
  name: app
  namespace: apps
spec:
  interval: 1h
  url: oci://ghcr.io/example/charts/app
  ref:
    tag: 1.2.3
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: app
  namespace: apps
spec:
  interval: 1h
  chartRef:
    kind: OCIRepository
    name: app
  values:
    replicas: 3
    image:
      tag: v2
";

const DNS: &str = "---
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata:
  name: dns
  namespace: kube-system
spec:
  interval: 1h
  url: oci://ghcr.io/example/charts/dns
  ref:
    tag: 1.0.0
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: dns
  namespace: kube-system
spec:
  interval: 1h
  chartRef:
    kind: OCIRepository
    name: dns
  values:
    replicaCount: 2
";

/// The repository: the helmfile under bootstrap/, the Flux tree under
/// kubernetes/.
pub(crate) fn repository() -> Test {
    repository_with(CHARTS)
}

/// Where the charts are: `oci://ghcr.io/example/charts`.
pub(crate) const CHARTS: &str = "oci://ghcr.io/example/charts";

/// [`repository`] with its charts at `charts` (`oci://HOST/PATH`) instead.
pub(crate) fn repository_with(charts: &str) -> Test {
    let at = |text: &str| text.replace(CHARTS, charts);
    Test::new()
        .file("bootstrap/helmfile.yaml", &at(HELMFILE))
        .file("bootstrap/values.yaml.gotmpl", VALUES_TEMPLATE)
        .file("bootstrap/dns-values.yaml", DNS_VALUES)
        .file("kubernetes/flux/cluster/ks.yaml", SYNC)
        .file("kubernetes/apps/apps/app/app.yaml", &at(APP))
        .file("kubernetes/apps/kube-system/dns/dns.yaml", &at(DNS))
}

/// What the import says of `app`'s template, in its output.
pub(crate) const READ_DOCUMENT: &str = "  `apps/app`: bootstrap/values.yaml.gotmpl reads kubernetes/apps/apps/app/app.yaml with `fromYaml`, which takes only document 1 (OCIRepository apps/app) of its 2 documents, as helmfile does; its HelmRelease is document 2: written as `from: { helmRelease }` with `ownership: handover`\n";

/// The release `app` as the import writes it.
pub(crate) const APP_RELEASE: &str = "# bootstrap/helmfile.yaml:2
name: app
namespace: apps
# chart, version and values: the Flux HelmRelease ../../../kubernetes/apps/apps/app/app.yaml,
# document 2 of its 2: ../../values.yaml.gotmpl reads it with `fromYaml`, which takes only document
# 1 (OCIRepository apps/app), as helmfile does, so it found no spec.values (helmfile fails the same
# way); Flux adopts the release once bootstrap installed it
from:
  helmRelease: kubernetes/apps/apps/app/app.yaml
ownership: handover
";

fn import(test: &Test) -> testkit::builder::Output {
    test_with(
        test,
        &[
            "--dir",
            "bootstrap/config",
            "import",
            "helmfile",
            "bootstrap/helmfile.yaml",
            "--cluster",
            "infra",
            "--no-helmfile",
        ],
    )
}

fn test_with(test: &Test, args: &[&str]) -> testkit::builder::Output {
    let mut command = test.command();
    command.args(args);
    let out = command.output().unwrap();
    testkit::builder::Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn a_template_reading_a_later_document_is_read_with_from_and_handed_over() {
    let test = repository();
    let run = import(&test);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{}", run.stdout);
    assert!(run.stdout.contains(READ_DOCUMENT), "{}", run.stdout);
    let releases =
        std::fs::read_to_string(test.path().join("bootstrap/config/releases/helmfile.yaml"))
            .unwrap();
    let app = releases.split("---\n").nth(1).unwrap();
    assert!(app.starts_with(APP_RELEASE), "{app}");
    // No copied values, no chart: the HelmRelease is the one place.
    assert!(
        !app.contains("valuesFiles") && !app.contains("chart:"),
        "{app}"
    );
    assert!(
        !test
            .path()
            .join("bootstrap/config/releases/values/app.yaml")
            .exists()
    );
}

#[test]
fn handover_by_default_from_import_to_apply() {
    let test = repository();
    let run = import(&test);
    assert_eq!((run.code, run.stderr.as_str()), (0, ""), "{}", run.stdout);

    // The Flux tree, found from the HelmRelease the template read: the
    // Kustomization whose path holds it.
    let cluster_yaml = std::fs::read_to_string(
        test.path()
            .join("bootstrap/config/clusters/infra/cluster.yaml"),
    )
    .unwrap();
    assert!(
        cluster_yaml.contains(
            "# The Flux tree the `from:` releases are read from: the directory of the Flux Kustomization\n\
             # ../../../../kubernetes/flux/cluster/ks.yaml, whose path holds the HelmReleases read\n\
             flux:\n  root: ../..\n  entrypoint: kubernetes/flux/cluster\n"
        ),
        "{cluster_yaml}"
    );
    // `dns` keeps its chart and values, and is Flux's to adopt: a
    // HelmRelease of the tree manages it.
    let releases =
        std::fs::read_to_string(test.path().join("bootstrap/config/releases/helmfile.yaml"))
            .unwrap();
    let dns = releases.split("---\n").nth(2).unwrap();
    assert!(
        dns.contains(
            "# Flux manages this release (HelmRelease kube-system/dns in\n# kubernetes/apps/kube-system/dns/dns.yaml)"
        ) && dns.contains("ownership: handover\n")
            && dns.contains("oci: oci://ghcr.io/example/charts/dns\n"),
        "{dns}"
    );

    // plan: both handed over, `app` read from document 2.
    let plan = test_with(
        &test,
        &[
            "--dir",
            "bootstrap/config",
            "--output",
            "json",
            "plan",
            "infra",
        ],
    );
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let plan: Value = serde_json::from_str(&plan.stdout).unwrap();
    let planned = |id: &str| {
        plan["releases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .unwrap()
            .clone()
    };
    let app = planned("apps/app");
    assert_eq!(
        (
            &app["ownership"],
            &app["from"]["file"],
            &app["chart"],
            &app["version"]
        ),
        (
            &json!("handover"),
            &json!("kubernetes/apps/apps/app/app.yaml"),
            &json!("app"),
            &json!("1.2.3")
        ),
        "{app}"
    );
    assert_eq!(planned("kube-system/dns")["ownership"], "handover");

    // check: the tree is scanned, both HelmReleases manage releases that
    // are bootstrap's to hand over, and they install what bootstrap does.
    let check = test_with(&test, &["--dir", "bootstrap/config", "check", "infra"]);
    assert_eq!(check.code, 0, "{}{}", check.stdout, check.stderr);
    assert!(
        check.stdout.contains("from kubernetes/flux/cluster"),
        "{}",
        check.stdout
    );

    // apply: installed from the HelmReleases, recorded as handover.
    let cluster = Cluster::start();
    let applied = cluster.run(&test, &["--dir", "bootstrap/config", "apply", "infra"]);
    assert_eq!(applied.code, 0, "{}\n{}", applied.stdout, applied.stderr);
    let pull = cluster
        .helm_calls()
        .into_iter()
        .find(|c| c.argv[0] == "pull" && c.positionals() == ["oci://ghcr.io/example/charts/app"])
        .expect("app's chart pulled from its OCIRepository");
    assert_eq!(pull.flag("--version"), Some("1.2.3"));
    let installs = cluster.installs();
    let installed = |name: &str| {
        installs
            .iter()
            .find(|c| c.release() == Some(name))
            .unwrap_or_else(|| panic!("{name} installed"))
    };
    assert_eq!(
        installed("app").values_files[0]["content"],
        json!({"replicas": 3, "image": {"tag": "v2"}})
    );
    assert_eq!(
        installed("dns").values_files[0]["content"],
        json!({"replicaCount": 2})
    );
    let ledger = cluster.ledger();
    for key in ["apps.app", "kube-system.dns"] {
        let entry: Value = serde_json::from_str(ledger[key].as_str().unwrap()).unwrap();
        assert_eq!(entry["policy"], "handover", "{key}");
    }
}
