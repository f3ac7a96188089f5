//! Differential tests: every kustomize fixture is also built by the real
//! kustomize (`kubectl kustomize`, which carries it), and the objects the
//! scan derives must be the same: kind, name and namespace, and the fields
//! the scan reads. `.ci/run` installs kubectl; without it these tests are
//! reported as ignored (build.rs: `cfg(kubectl)`), never as passed.

use std::path::{Path, PathBuf};
use std::process::Command;

use bootstrap::flux::tree;
use pretty_assertions::assert_eq;
use serde_json::Value;

/// The fields the scan reads from an object.
const FIELDS: &[&str] = &[
    "/apiVersion",
    "/kind",
    "/metadata/namespace",
    "/metadata/name",
    "/spec/releaseName",
    "/spec/targetNamespace",
    "/spec/storageNamespace",
    "/spec/path",
    "/spec/chart/spec/chart",
    "/spec/chartRef/name",
    "/spec/sourceRef/name",
    "/spec/postBuild",
    "/data",
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/flux")
}

fn digest(body: &Value) -> String {
    FIELDS
        .iter()
        .map(|p| {
            let v = body.pointer(p).cloned().unwrap_or(Value::Null);
            // kustomize prints ConfigMap data values as YAML scalars; compare text.
            format!("{p}={}", v.to_string().trim_matches('"'))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn kubectl_kustomize(dir: &Path) -> Vec<String> {
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "kubectl is required for the differential kustomize tests (.ci/run installs it): {e}"
            )
        });
    assert!(
        output.status.success(),
        "kubectl kustomize {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&String::from_utf8_lossy(&output.stdout)).unwrap();
    let mut out: Vec<String> = docs.iter().filter(|d| !d.is_null()).map(digest).collect();
    out.sort();
    out
}

fn scanned(case: &str, dir: &str) -> Vec<String> {
    let built = tree::build(&fixtures().join(case), Path::new(dir));
    assert_eq!(
        built.findings,
        Vec::new(),
        "the built-in build of {case}/{dir} has findings"
    );
    let mut out: Vec<String> = built.objects.iter().map(|o| digest(&o.body)).collect();
    out.sort();
    out
}

fn same_as_kustomize(case: &str, dir: &str) {
    let expected = kubectl_kustomize(&fixtures().join(case).join(dir));
    assert!(
        !expected.is_empty(),
        "{case}/{dir}: kustomize built nothing"
    );
    assert_eq!(scanned(case, dir), expected, "{case}/{dir}");
}

#[test]
#[cfg_attr(not(kubectl), ignore = "needs kubectl on PATH (.ci/run installs it)")]
fn resources_bases_and_components() {
    same_as_kustomize("kustomize-resources", "apps");
}

#[test]
#[cfg_attr(not(kubectl), ignore = "needs kubectl on PATH (.ci/run installs it)")]
fn outermost_namespace() {
    same_as_kustomize("kustomize-namespace", "clusters/test");
}

#[test]
#[cfg_attr(not(kubectl), ignore = "needs kubectl on PATH (.ci/run installs it)")]
fn kustomization_file_names() {
    same_as_kustomize("kustomization-filenames", "clusters/test");
}

#[test]
#[cfg_attr(not(kubectl), ignore = "needs kubectl on PATH (.ci/run installs it)")]
fn patches_strategic_merge_json6902_and_delete() {
    same_as_kustomize("kustomize-patches", "clusters/test");
}

#[test]
#[cfg_attr(not(kubectl), ignore = "needs kubectl on PATH (.ci/run installs it)")]
fn replacements_from_a_component() {
    same_as_kustomize("kustomize-replacements", "clusters/test");
}

#[test]
#[cfg_attr(not(kubectl), ignore = "needs kubectl on PATH (.ci/run installs it)")]
fn prefix_suffix_namespace_generators_lists_and_component_order() {
    same_as_kustomize("kustomize-transformers", "clusters/test");
}

#[test]
#[cfg_attr(not(kubectl), ignore = "needs kubectl on PATH (.ci/run installs it)")]
fn patches_with_regex_targets() {
    // flux-patches/apps is the kustomization Flux patches; its own build.
    same_as_kustomize("flux-patches", "apps");
}

#[test]
#[cfg_attr(not(kubectl), ignore = "needs kubectl on PATH (.ci/run installs it)")]
fn patches_naming_objects_before_a_rename() {
    same_as_kustomize("kustomize-original-names", "over");
}

/// What kustomize-controller writes before building (fluxcd/pkg
/// kustomize/kustomize_generator.go GenerateManifest), done here on a copy of
/// the fixture: the kustomization file (or one listing the directory's
/// manifests), with the Kustomization's targetNamespace, namePrefix,
/// nameSuffix and patches written in.
fn flux_generated_copy(case: &str, ks: &Value) -> (tempfile::TempDir, PathBuf) {
    let copy = tempfile::tempdir().unwrap();
    let status = Command::new("cp")
        .arg("-a")
        .arg(fixtures().join(case).join("."))
        .arg(copy.path())
        .status()
        .unwrap();
    assert!(status.success());
    let dir = copy.path().join(ks["spec"]["path"].as_str().unwrap());
    let kfile = dir.join("kustomization.yaml");
    let mut doc: Value = match std::fs::read_to_string(&kfile) {
        Ok(text) => serde_saphyr::from_str(&text).unwrap(),
        Err(_) => {
            let mut files: Vec<String> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".yaml"))
                .collect();
            files.sort();
            serde_json::json!({ "resources": files })
        }
    };
    let spec = &ks["spec"];
    for (from, to) in [
        ("targetNamespace", "namespace"),
        ("namePrefix", "namePrefix"),
        ("nameSuffix", "nameSuffix"),
    ] {
        if let Some(v) = spec.get(from) {
            doc[to] = v.clone();
        }
    }
    if let Some(patches) = spec.get("patches").and_then(Value::as_array) {
        let mut all = doc["patches"].as_array().cloned().unwrap_or_default();
        all.extend(patches.iter().cloned());
        doc["patches"] = Value::Array(all);
    }
    std::fs::write(&kfile, serde_json::to_string(&doc).unwrap()).unwrap();
    (copy, dir)
}

fn flux_same_as_kustomize(case: &str, ks_file: &str, ks_name: &str) {
    let text = std::fs::read_to_string(fixtures().join(case).join(ks_file)).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let ks = docs
        .into_iter()
        .find(|d| d["metadata"]["name"] == ks_name)
        .expect("the Kustomization is in the file");
    let (_copy, dir) = flux_generated_copy(case, &ks);
    let expected = kubectl_kustomize(&dir);
    let built = tree::build_flux_kustomization(&fixtures().join(case), ks);
    assert_eq!(built.findings, Vec::new(), "{case}: {ks_name} has findings");
    let mut got: Vec<String> = built.objects.iter().map(|o| digest(&o.body)).collect();
    got.sort();
    assert_eq!(got, expected, "{case}: {ks_name}");
}

#[test]
#[cfg_attr(not(kubectl), ignore = "needs kubectl on PATH (.ci/run installs it)")]
fn flux_patches_written_into_the_kustomization() {
    flux_same_as_kustomize("flux-patches", "clusters/test/apps.yaml", "apps");
}

#[test]
#[cfg_attr(not(kubectl), ignore = "needs kubectl on PATH (.ci/run installs it)")]
fn flux_name_prefix_suffix_and_target_namespace() {
    flux_same_as_kustomize("flux-name-prefix-suffix", "clusters/test/apps.yaml", "core");
    flux_same_as_kustomize(
        "flux-name-prefix-suffix",
        "clusters/test/apps.yaml",
        "canary",
    );
}

/// A kustomization with a construct the scan does not model (a builtin
/// transformer plugin renaming a HelmRelease) is built by `kubectl
/// kustomize` when kubectl is given: the HelmRelease is found under its real
/// name, attributed to its file through kustomize's origin annotations, and
/// Flux's targetNamespace applies on top; the not-modelled warning becomes
/// an info saying so. Without kubectl, the built-in build warns and misses.
#[test]
#[cfg_attr(not(kubectl), ignore = "needs kubectl on PATH (.ci/run installs it)")]
fn constructs_not_modelled_are_delegated_to_kubectl_kustomize() {
    let root = fixtures().join("delegated");
    let entry = Path::new("clusters/test");
    let helm_releases = |tree: &tree::Tree| -> Vec<String> {
        tree.objects
            .iter()
            .filter(|o| o.kind == "HelmRelease" || o.kind == "ConfigMap")
            .map(|o| {
                format!(
                    "{} {}/{} @{} | {}",
                    o.kind,
                    o.namespace.as_deref().unwrap_or("~"),
                    o.name,
                    o.file,
                    o.chain.join(" > ")
                )
            })
            .collect()
    };
    let delegated = tree::resolve_with(&root, entry, Some(Path::new("kubectl")));
    assert_eq!(
        helm_releases(&delegated),
        [
            "ConfigMap kube-system/settings @apps/kustomization.yaml | \
             clusters/test/kustomization.yaml > clusters/test/apps.yaml > apps/kustomization.yaml",
            "HelmRelease kube-system/coredns @apps/hr.yaml | \
             clusters/test/kustomization.yaml > clusters/test/apps.yaml > apps/kustomization.yaml > apps/hr.yaml",
        ]
    );
    let hr = delegated
        .objects
        .iter()
        .find(|o| o.kind == "HelmRelease")
        .unwrap();
    assert_eq!(
        hr.body["metadata"]["annotations"],
        serde_json::json!({"team": "platform"}),
        "kustomize's origin annotation is removed, the object's own kept"
    );
    let notes: Vec<(String, &str)> = delegated
        .findings
        .iter()
        .map(|f| (format!("{:?}", f.severity), f.message.as_str()))
        .collect();
    assert_eq!(notes.len(), 1, "{notes:#?}");
    assert_eq!(notes[0].0, "Info");
    assert!(
        notes[0].1.starts_with("apps/kustomization.yaml uses `transformers`, which this scan does not model; it was built with `kubectl kustomize` instead"),
        "{}",
        notes[0].1
    );

    let built_in = tree::resolve(&root, entry);
    assert_eq!(
        helm_releases(&built_in)
            .iter()
            .filter(|l| l.starts_with("HelmRelease"))
            .collect::<Vec<_>>(),
        ["HelmRelease kube-system/dns @apps/hr.yaml | \
          clusters/test/kustomization.yaml > clusters/test/apps.yaml > apps/kustomization.yaml > apps/hr.yaml"]
    );
    assert!(
        built_in
            .findings
            .iter()
            .any(|f| f.code == "flux-construct-not-modelled"
                && format!("{:?}", f.severity) == "Warning"),
        "{:#?}",
        built_in.findings
    );
}

/// What `kubectl kustomize` cannot build either (`helmCharts` without
/// `--enable-helm`, which bootstrap never passes, a missing generator file)
/// keeps the built-in build and its warnings, plus an info with kubectl's
/// reason.
#[test]
#[cfg_attr(not(kubectl), ignore = "needs kubectl on PATH (.ci/run installs it)")]
fn a_failed_delegation_keeps_the_warnings() {
    let root = fixtures().join("not-modelled");
    let tree = tree::resolve_with(
        &root,
        Path::new("clusters/test"),
        Some(Path::new("kubectl")),
    );
    let by_severity = |s: &str| {
        tree.findings
            .iter()
            .filter(|f| f.code == "flux-construct-not-modelled" && format!("{:?}", f.severity) == s)
            .count()
    };
    assert_eq!(by_severity("Warning"), 3, "{:#?}", tree.findings);
    assert_eq!(by_severity("Info"), 1, "{:#?}", tree.findings);
    let info = tree
        .findings
        .iter()
        .find(|f| format!("{:?}", f.severity) == "Info")
        .unwrap();
    assert!(
        info.message.starts_with("clusters/test/kustomization.yaml uses `helmCharts`, `generators`, `vars`, which this scan does not model, and `kubectl kustomize` could not build it ("),
        "{}",
        info.message
    );
    assert!(tree.objects.iter().any(|o| o.name == "coredns"));
}

/// Every object of a build, whole, sorted by kind and name (maps compare
/// whatever their keys' order).
fn whole_objects(docs: impl Iterator<Item = Value>) -> Vec<Value> {
    let mut out: Vec<Value> = docs.filter(|d| !d.is_null()).collect();
    out.sort_by_key(|d| format!("{} {}", d["kind"], d["metadata"]["name"]));
    out
}

#[test]
#[cfg_attr(not(kubectl), ignore = "needs kubectl on PATH (.ci/run installs it)")]
fn labels_and_annotations_land_where_kustomize_puts_them() {
    // Whole objects, not the digest: labels, annotations, selectors, pod and
    // claim templates, affinity terms, a `labels` entry's own fields and a
    // `configurations` file's annotation field spec.
    let case = "kustomize-labels-fieldspecs";
    let dir = fixtures().join(case).join("clusters/test");
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(output.status.success());
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&String::from_utf8_lossy(&output.stdout)).unwrap();
    let expected = whole_objects(docs.into_iter());
    let built = tree::build(&fixtures().join(case), Path::new("clusters/test"));
    assert_eq!(built.findings, Vec::new());
    let got = whole_objects(built.objects.into_iter().map(|o| o.body));
    assert_eq!(got.len(), 7);
    assert_eq!(got, expected);
}
