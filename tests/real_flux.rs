//! The real tier with Flux (docs/design.md#real-environment): the fleet
//! ResourceSet (examples/fleet) rendered by the real flux-operator CLI
//! (`flux-operator build resourceset`, tool `flux-operator` of
//! `tools/realenv/build`) is what the project's own expander
//! (src/flux/resourceset.rs) makes of it, the expansion
//! tests/fleet_examples.rs asserts.
//!
//! Reported as ignored unless built with cfg(flux_operator) (build.rs: the
//! CLI is linked in tools/realenv/.bin/flux-operator).

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use testkit::builder::repo_root;
use testkit::realflux;

/// The documents of a YAML file.
fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

// ---------------------------------------------------------------------------
// Fleet

/// `flux-operator build resourceset -f FILE`: the objects it renders.
fn build_resourceset(file: &Path) -> Vec<Value> {
    let out = Command::new(realflux::flux_operator())
        .args(["build", "resourceset", "-f"])
        .arg(file)
        .output()
        .expect("running flux-operator");
    assert!(
        out.status.success(),
        "flux-operator build resourceset -f {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_saphyr::from_multiple::<Value>(&String::from_utf8_lossy(&out.stdout))
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

#[test]
#[cfg_attr(
    not(flux_operator),
    ignore = "needs the real flux-operator CLI: run `tools/realenv/build flux-operator`"
)]
fn the_fleet_resourceset_renders_as_the_project_expands_it() {
    let file = repo_root().join("examples/fleet/flux-operator/resourceset.yaml");
    let outer = build_resourceset(&file);
    let dir = tempfile::tempdir().unwrap();
    let mut jobs = Vec::new();
    for (i, child) in outer.iter().enumerate() {
        assert_eq!(child["kind"], "ResourceSet", "{child}");
        let path = dir.path().join(format!("{i}.yaml"));
        std::fs::write(&path, serde_json::to_string(child).unwrap()).unwrap();
        jobs.extend(build_resourceset(&path));
    }
    // The CLI labels every object with the ResourceSet that generated it
    // (as the operator does when it applies them); the project's expander
    // models what is generated, not the labels the apply adds.
    let strip = |objects: Vec<Value>, parents: &[&str]| -> Vec<Value> {
        assert_eq!(objects.len(), parents.len());
        objects
            .into_iter()
            .zip(parents)
            .map(|(mut object, parent)| {
                let labels = object["metadata"]["labels"].as_object_mut().unwrap();
                let name = labels.remove("resourceset.fluxcd.controlplane.io/name");
                let namespace = labels.remove("resourceset.fluxcd.controlplane.io/namespace");
                let empty = labels.is_empty();
                assert_eq!(
                    (name, namespace),
                    (Some(json!(parent)), Some(json!("fleet"))),
                    "{object}"
                );
                if empty {
                    object["metadata"].as_object_mut().unwrap().remove("labels");
                }
                object
            })
            .collect()
    };
    let (expected_outer, expected_jobs) = fleet_expanded(&file);
    assert_eq!(strip(outer, &["bootstrap-fleet"; 2]), expected_outer);
    assert_eq!(
        strip(jobs, &["bootstrap-prod-eu-1", "bootstrap-prod-us-1"]),
        expected_jobs
    );
}

/// The project's own expansion (src/flux/resourceset.rs), as
/// tests/fleet_examples.rs asserts it.
fn fleet_expanded(file: &Path) -> (Vec<Value>, Vec<Value>) {
    use bootstrap::flux::object::Object;
    use bootstrap::flux::resourceset;
    let object = |body: &Value| Object {
        api_version: body["apiVersion"].as_str().unwrap().to_string(),
        kind: body["kind"].as_str().unwrap().to_string(),
        name: body["metadata"]["name"].as_str().unwrap().to_string(),
        namespace: body["metadata"]["namespace"].as_str().map(str::to_string),
        file: file.display().to_string(),
        chain: Vec::new(),
        body: body.clone(),
        previous_ids: Vec::new(),
    };
    let fleet = documents(file);
    let outer = resourceset::expand(&object(&fleet[0]), &[]);
    assert_eq!(outer.problems, Vec::<String>::new());
    let mut jobs = Vec::new();
    for child in &outer.objects {
        let inner = resourceset::expand(&object(child), &[]);
        assert_eq!(inner.problems, Vec::<String>::new());
        jobs.extend(inner.objects);
    }
    (outer.objects, jobs)
}
