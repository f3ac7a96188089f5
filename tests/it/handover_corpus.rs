//! The bootstrap of three public home-ops repositories
//! (tests/fixtures/corpus) expressed in bootstrap's format: each release of
//! their helmfile `apps.yaml` becomes a release with
//! `from: { helmRelease: kubernetes/apps/<namespace>/<name>/app/helmrelease.yaml }`
//! and `ownership: handover` (docs/design.md#handover). `check` must pass —
//! every adoption is proven a no-op — and what bootstrap would install must
//! equal what their helmfile read from the same files: their
//! `templates/release.yaml.gotmpl` takes the chart from the OCIRepository's
//! `spec.url` and the version from its `spec.ref.tag`, and
//! `templates/values.yaml.gotmpl` the values from the HelmRelease's
//! `spec.values`, both at `kubernetes/apps/<namespace>/<name>/app/`.

use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use serde_json::Value;
use testkit::builder::Test;

fn corpus(repo: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/corpus")
        .join(repo)
}

fn yaml_documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_multiple::<Value>(&text).unwrap()
}

/// (namespace, name, needs) of each release of the helmfile.
fn helmfile_releases(helmfile: &Path) -> Vec<(String, String, Vec<String>)> {
    let doc = yaml_documents(helmfile)
        .into_iter()
        .find(|d| d.get("releases").is_some())
        .expect("apps.yaml has releases");
    doc["releases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["namespace"].as_str().unwrap().to_string(),
                r["name"].as_str().unwrap().to_string(),
                r["needs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|n| n.as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect()
}

/// What the helmfile's templates read: (chart URL, version, values).
fn helmfile_read(repo: &Path, namespace: &str, name: &str) -> (String, String, Value) {
    let app = repo.join(format!("kubernetes/apps/{namespace}/{name}/app"));
    let oci = yaml_documents(&app.join("ocirepository.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "OCIRepository")
        .unwrap();
    let hr = yaml_documents(&app.join("helmrelease.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "HelmRelease")
        .unwrap();
    (
        oci["spec"]["url"].as_str().unwrap().to_string(),
        oci["spec"]["ref"]["tag"].as_str().unwrap().to_string(),
        hr["spec"]["values"].clone(),
    )
}

fn express(repo_name: &str, helmfile: &str) {
    let repo = corpus(repo_name);
    let releases = helmfile_releases(&repo.join(helmfile));
    assert!(releases.len() >= 6, "{releases:?}");
    let mut text = String::new();
    for (namespace, name, needs) in &releases {
        text.push_str(&format!(
            "---\nname: {name}\nnamespace: {namespace}\n\
             from: {{ helmRelease: kubernetes/apps/{namespace}/{name}/app/helmrelease.yaml }}\n\
             ownership: handover\n\
             # helmfile's apps stage installs the CRDs with the chart\n\
             crds: chart\n\
             needs: [{}]\n",
            needs.join(", ")
        ));
    }
    let cluster = format!(
        "name: home\nflux:\n  root: {}\n  entrypoint: kubernetes/flux/cluster\n",
        repo.display()
    );
    let test = Test::new()
        .file("clusters/home/cluster.yaml", &cluster)
        .file("releases/apps.yaml", &text);

    let check = test
        .command()
        .args(["check", "home", "--output", "json"])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&check.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&check.stderr)));
    let errors: Vec<&Value> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "error")
        .collect();
    assert_eq!(errors, Vec::<&Value>::new(), "{repo_name}");
    assert_eq!(check.status.code(), Some(0), "{repo_name}");
    let handover: Vec<&Value> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"].as_str().unwrap().starts_with("handover-"))
        .collect();
    assert_eq!(
        handover,
        Vec::<&Value>::new(),
        "{repo_name}: every release is adopted, unchanged"
    );

    let template = test
        .command()
        .args(["template", "home", "--show-secrets", "--output", "json"])
        .output()
        .unwrap();
    assert_eq!(
        template.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&template.stderr)
    );
    let doc: Value = serde_json::from_slice(&template.stdout).unwrap();
    for (namespace, name, _) in &releases {
        let id = format!("{namespace}/{name}");
        let rendered = doc["releases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["release"] == id.as_str())
            .unwrap_or_else(|| panic!("{id}"));
        let (url, version, values) = helmfile_read(&repo, namespace, name);
        assert_eq!(rendered["version"], version.as_str(), "{repo_name} {id}");
        assert_eq!(
            rendered["chart"],
            url.rsplit('/').next().unwrap(),
            "{repo_name} {id}"
        );
        let values = if values.is_null() {
            Value::Object(Default::default())
        } else {
            values
        };
        assert_eq!(
            rendered["values"], values,
            "{repo_name} {id}: values differ from the helmfile's"
        );
    }
}

#[test]
fn bjw_s_labs_home_ops() {
    express(
        "bjw-s-labs__home-ops",
        "kubernetes/bootstrap/helmfile/apps.yaml",
    );
}

#[test]
fn buroa_k8s_gitops() {
    express("buroa__k8s-gitops", "bootstrap/helmfile/apps.yaml");
}

#[test]
fn onedr0p_home_ops() {
    express("onedr0p__home-ops", "bootstrap/helmfile/apps.yaml");
}
