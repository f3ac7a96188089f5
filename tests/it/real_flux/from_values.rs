//! The real tier with Flux: a `from:` release's values, as bootstrap
//! composes them from the HelmRelease (src/flux/values_from.rs,
//! src/flux/strvals.rs, the tree read by src/flux/kyaml.rs and patched by
//! src/flux/kustomize), are byte for byte what the real helm-controller
//! gives the real helm (`helm get values -o json`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use testkit::realenv;

use super::{Real, repo, sync_tree};

/// A config root whose one release takes its values `from:` a HelmRelease
/// written with the forms where a YAML or `--set` reading could differ:
/// YAML 1.1 literals in `spec.values` (kyaml) and in a `valuesFrom` values
/// file (helm's values reader), `targetPath` texts helm's strvals types
/// (`042`, `True`, `{a,b}`, `a\,b`, quoted, list indexes, literal, an
/// escaped dot), target
/// paths that write into the maps taken from `spec.values` and that do not,
/// and an empty key (`limits:`) in a HelmRelease a strategic-merge patch
/// changes.
fn from_values_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let full = root.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    };
    let url = &repo().url;
    write(
        "clusters/infra/cluster.yaml",
        "name: infra\nflux:\n  root: .\n  entrypoint: kubernetes/clusters/infra\n",
    );
    write(
        "releases/core.yaml",
        "name: coredns\nnamespace: kube-system\nfrom: { helmRelease: kube-system/coredns }\n",
    );
    write(
        "kubernetes/clusters/infra/flux-system/charts.yaml",
        &format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: charts\n  namespace: flux-system\n\
             spec:\n  interval: 1h\n  url: {url}\n"
        ),
    );
    write(
        "kubernetes/clusters/infra/apps.yaml",
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: cluster-apps\n  namespace: flux-system\n\
         spec:\n  interval: 1h\n  path: ./kubernetes/apps\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n",
    );
    write(
        "kubernetes/apps/kustomization.yaml",
        r#"apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: kube-system
resources:
  - ./coredns/helmrelease.yaml
  - ./coredns/values.yaml
patches:
  - target:
      kind: HelmRelease
      name: coredns
    patch: |
      apiVersion: helm.toolkit.fluxcd.io/v2
      kind: HelmRelease
      metadata:
        name: coredns
      spec:
        values:
          replicaCount: 1
"#,
    );
    write(
        "kubernetes/apps/coredns/values.yaml",
        r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: coredns-values
data:
  values.yaml: |
    probe:
      fromFile:
        mode: 0644
        enabled: yes
        on: on
        day: 2024-01-01
        count: 1e3
  zero: "042"
  truth: "True"
  nothing: "NULL"
  negative: "-042"
  float: "1.5"
  list: "{a,True,042}"
  escaped: 'a\,b'
  quoted: '"07"'
  two: "2"
  three: "3"
  index: "B"
"#,
    );
    let entry = |key: &str, path: &str| {
        format!(
            "    - kind: ConfigMap\n      name: coredns-values\n      valuesKey: {key}\n      targetPath: {path}\n"
        )
    };
    let entries = [
        // The first target path: `probe.fromSpec` is taken from spec.values
        // as it is, and written into: the text wins over spec.values.
        entry("two", "probe.fromSpec.wins"),
        entry("zero", "probe.zero"),
        entry("truth", "probe.truth"),
        entry("nothing", "probe.nothing"),
        entry("negative", "probe.negative"),
        entry("float", "probe.float"),
        entry("list", "probe.list"),
        entry("escaped", "probe.escaped"),
        entry("quoted", "probe.quoted"),
        entry("escaped", "probe.literal") + "      literal: true\n",
        entry("index", "probe.items[1]"),
        entry("index", "probe.nested[1].name"),
        // Merged into a new map by now: spec.values wins.
        entry("three", "probe.fromSpec.loses"),
        entry("three", "probe.dotted\\.name"),
    ]
    .concat();
    write(
        "kubernetes/apps/coredns/helmrelease.yaml",
        &format!(
            r#"apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: coredns
spec:
  interval: 1h
  install:
    disableWait: true
  chart:
    spec:
      chart: coredns
      version: 1.44.3
      sourceRef:
        kind: HelmRepository
        name: charts
        namespace: flux-system
  valuesFrom:
    - kind: ConfigMap
      name: coredns-values
{entries}  values:
    fullnameOverride: coredns
    replicaCount: 2
    resources:
      limits:
      requests:
        cpu: 50m
    probe:
      inline:
        enabled: yes
        mode: 0644
        day: 2024-01-01
        count: 1e3
        tilde: ~
        written: null
      fromSpec:
        wins: 1
        loses: 1
      items: [a, b, c]
      nested:
        - name: x
"#
        ),
    );
    root
}

/// `value` as Go's JSON encoder writes it: keys sorted, no spaces.
fn go_json(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let sorted: BTreeMap<&String, Value> =
                    map.iter().map(|(k, v)| (k, sorted(v))).collect();
                serde_json::to_value(sorted).unwrap()
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_string(&sorted(value)).unwrap()
}

#[test]
#[cfg_attr(
    not(all(real_flux, shared_charts)),
    ignore = "needs the real test environment with Flux (`tools/realenv/build`, with flux-controllers and flux-operator) and the real charts (../shared/charts, BOOTSTRAP_TEST_CHARTS=DIR or scripts/pull-test-charts)"
)]
fn from_values_are_the_values_helm_controller_gives_helm() {
    let _slot = realenv::one_at_a_time();
    let mut real = Real::start(from_values_root());
    let template = real.run(&["template", "infra", "--output", "json"]);
    assert_eq!(template.code, 0, "{}\n{}", template.stdout, template.stderr);
    let template: Value = serde_json::from_str(&template.stdout).unwrap();
    let ours = &template["releases"][0]["values"];

    sync_tree(&mut real);
    let path = "/apis/helm.toolkit.fluxcd.io/v2/namespaces/kube-system/helmreleases/coredns";
    real.wait_released(path, Duration::from_secs(300));
    let theirs = real.helm(&[
        "get",
        "values",
        "coredns",
        "-n",
        "kube-system",
        "-o",
        "json",
    ]);
    let theirs = theirs.trim();
    assert_eq!(
        go_json(ours),
        theirs,
        "bootstrap's from: values (left) are not what helm-controller gave helm (right)"
    );
    // What they agree on, spelled out.
    let values: Value = serde_json::from_str(theirs).unwrap();
    let probe = &values["probe"];
    assert_eq!(probe["zero"], "042");
    assert_eq!(probe["truth"], true);
    assert_eq!(probe["list"], json!(["a", true, "042"]));
    assert_eq!(probe["escaped"], "a,b");
    assert_eq!(probe["literal"], "a\\,b");
    assert_eq!(probe["items"], json!(["a", "B", "c"]));
    assert_eq!(probe["fromSpec"], json!({"wins": 2, "loses": 1}));
    assert_eq!(probe["fromFile"]["mode"], 420);
    // A values file's key `on` is YAML 1.1's true, made the text "true".
    assert_eq!(probe["fromFile"]["true"], true);
    assert_eq!(probe["dotted.name"], 3);
    assert_eq!(probe["inline"]["enabled"], "yes");
    assert_eq!(values["resources"], json!({"requests": {"cpu": "50m"}}));
}
