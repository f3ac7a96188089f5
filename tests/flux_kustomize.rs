//! Differential tests: every kustomize fixture is also built by the real
//! kustomize (`kubectl kustomize`, which carries it), and the objects the
//! scan derives must be the same: kind, name and namespace, and the fields
//! the scan reads. `.ci/run` installs kubectl; without it these tests fail
//! rather than pass unchecked.

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
fn resources_bases_and_components() {
    same_as_kustomize("kustomize-resources", "apps");
}

#[test]
fn outermost_namespace() {
    same_as_kustomize("kustomize-namespace", "clusters/test");
}

#[test]
fn kustomization_file_names() {
    same_as_kustomize("kustomization-filenames", "clusters/test");
}

#[test]
fn patches_strategic_merge_json6902_and_delete() {
    same_as_kustomize("kustomize-patches", "clusters/test");
}

#[test]
fn replacements_from_a_component() {
    same_as_kustomize("kustomize-replacements", "clusters/test");
}

#[test]
fn prefix_suffix_namespace_generators_lists_and_component_order() {
    same_as_kustomize("kustomize-transformers", "clusters/test");
}

#[test]
fn patches_with_regex_targets() {
    // flux-patches/apps is the kustomization Flux patches; its own build.
    same_as_kustomize("flux-patches", "apps");
}

#[test]
fn patches_naming_objects_before_a_rename() {
    same_as_kustomize("kustomize-original-names", "over");
}
