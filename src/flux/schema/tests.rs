use super::*;
use serde_json::json;

/// Where the real tier keeps the Flux CRDs (tools/realenv/flux-crds).
fn real_crds() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/realenv/.bin/flux-crds/../share")
}

/// The table as the real CRDs give it.
fn table_from_real_crds() -> Value {
    let mut kinds = Vec::new();
    for dir in CRD_DIRS {
        let mut files: Vec<_> = std::fs::read_dir(real_crds().join(dir))
            .expect("the real tier's CRDs")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).expect("a CRD file");
            let crd: Value = serde_saphyr::from_str(&text).expect("a CRD's YAML");
            kinds.push(compact_crd(&crd));
        }
    }
    kinds.sort_by_key(|k| format!("{}/{}", k["group"], k["kind"]));
    json!({
        "source": "fluxcd/helm-controller v1.6.4, fluxcd/kustomize-controller v1.9.5, fluxcd/source-controller v1.9.5: config/crd/bases (src/flux/crds/README.md)",
        "kinds": kinds,
    })
}

/// The embedded table is what the real CRDs say (`BOOTSTRAP_WRITE_FLUX_CRDS=1`
/// writes it from them).
#[test]
#[cfg_attr(
    not(realenv),
    ignore = "needs the real tier's Flux CRDs: tools/realenv/build flux-crds"
)]
fn the_table_is_what_the_real_crds_say() {
    let real = table_from_real_crds();
    if std::env::var_os("BOOTSTRAP_WRITE_FLUX_CRDS").is_some() {
        let text = serde_json::to_string_pretty(&real).expect("JSON") + "\n";
        std::fs::write(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/flux/crds/flux-crds.json"),
            text,
        )
        .expect("write the table");
        return;
    }
    assert!(
        &real == table(),
        "src/flux/crds/flux-crds.json differs from the real CRDs: run with BOOTSTRAP_WRITE_FLUX_CRDS=1"
    );
}

fn object(body: Value) -> Object {
    let text = |p: &str| body.pointer(p).and_then(Value::as_str).map(str::to_string);
    let (api_version, kind, name, namespace) = (
        text("/apiVersion").unwrap_or_default(),
        text("/kind").unwrap_or_default(),
        text("/metadata/name").unwrap_or_default(),
        text("/metadata/namespace"),
    );
    Object::of(
        (&api_version, &kind, &name),
        namespace.as_deref(),
        "f.yaml",
        body,
    )
}

fn helm_release(spec: Value) -> Object {
    let mut base = json!({
        "interval": "1h",
        "chart": {"spec": {"chart": "cilium", "sourceRef": {"kind": "HelmRepository", "name": "cilium"}}},
    });
    for (k, v) in spec.as_object().into_iter().flatten() {
        base[k] = v.clone();
    }
    object(json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "cilium", "namespace": "kube-system"},
        "spec": base,
    }))
}

// Each expected text is what kube-apiserver v1.34 with the Flux v2.9.5 CRDs
// answered a dry-run server-side apply of the same object, in ssa's words.
#[test]
fn dry_run_errors_as_the_api_server_words_them() {
    let cases = [
        (
            json!({"releaseName": null}),
            "HelmRelease/kube-system/cilium dry-run failed (Invalid): HelmRelease.helm.toolkit.fluxcd.io \"cilium\" is invalid: [spec.releaseName: Invalid value: \"null\": spec.releaseName in body must be of type string: \"null\", <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]",
        ),
        (
            json!({"releaseName": 5}),
            "HelmRelease/kube-system/cilium dry-run failed: failed to create typed patch object (kube-system/cilium; helm.toolkit.fluxcd.io/v2, Kind=HelmRelease): .spec.releaseName: expected string, got &value.valueUnstructured{Value:5}",
        ),
        (
            json!({"releaseName": {"a": 1}}),
            "HelmRelease/kube-system/cilium dry-run failed: failed to create typed patch object (kube-system/cilium; helm.toolkit.fluxcd.io/v2, Kind=HelmRelease): .spec.releaseName: expected string, got &value.valueUnstructured{Value:map[string]interface {}{\"a\":1}}",
        ),
        (
            json!({"install": {"remediation": {"retries": true}}}),
            "HelmRelease/kube-system/cilium dry-run failed: failed to create typed patch object (kube-system/cilium; helm.toolkit.fluxcd.io/v2, Kind=HelmRelease): .spec.install.remediation.retries: expected numeric (int or float), got bool",
        ),
        (
            json!({"install": {"disableWait": "x"}}),
            "HelmRelease/kube-system/cilium dry-run failed: failed to create typed patch object (kube-system/cilium; helm.toolkit.fluxcd.io/v2, Kind=HelmRelease): .spec.install.disableWait: expected boolean, got &{x}",
        ),
        (
            json!({"dependsOn": {"a": 1}}),
            "HelmRelease/kube-system/cilium dry-run failed: failed to create typed patch object (kube-system/cilium; helm.toolkit.fluxcd.io/v2, Kind=HelmRelease): .spec.dependsOn: expected list, got &{map[a:1]}",
        ),
        (
            json!({"foo": 1}),
            "HelmRelease/kube-system/cilium dry-run failed: failed to create typed patch object (kube-system/cilium; helm.toolkit.fluxcd.io/v2, Kind=HelmRelease): .spec.foo: field not declared in schema",
        ),
        (
            json!({"interval": "1 hour"}),
            "HelmRelease/kube-system/cilium dry-run failed (Invalid): HelmRelease.helm.toolkit.fluxcd.io \"cilium\" is invalid: spec.interval: Invalid value: \"1 hour\": spec.interval in body should match '^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$'",
        ),
        (
            json!({"releaseName": ""}),
            "HelmRelease/kube-system/cilium dry-run failed (Invalid): HelmRelease.helm.toolkit.fluxcd.io \"cilium\" is invalid: spec.releaseName: Invalid value: \"\": spec.releaseName in body should be at least 1 chars long",
        ),
        (
            json!({"install": {"strategy": {"name": "Foo"}}}),
            "HelmRelease/kube-system/cilium dry-run failed (Invalid): HelmRelease.helm.toolkit.fluxcd.io \"cilium\" is invalid: [spec.install.strategy.name: Unsupported value: \"Foo\": supported values: \"RemediateOnFailure\", \"RetryOnFailure\", <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]",
        ),
        (
            json!({"releaseName": "a".repeat(60)}),
            "HelmRelease/kube-system/cilium dry-run failed (Invalid): HelmRelease.helm.toolkit.fluxcd.io \"cilium\" is invalid: [spec.releaseName: Too long: may not be more than 53 bytes, <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]",
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(dry_run_error(&helm_release(spec)).as_deref(), Some(want));
    }
    assert_eq!(dry_run_error(&helm_release(json!({}))), None);
    let mut missing = helm_release(json!({}));
    missing.body["spec"]
        .as_object_mut()
        .unwrap()
        .remove("interval");
    assert_eq!(
        dry_run_error(&missing).as_deref(),
        Some(
            "HelmRelease/kube-system/cilium dry-run failed (Invalid): HelmRelease.helm.toolkit.fluxcd.io \"cilium\" is invalid: [spec.interval: Required value, <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"
        )
    );
}

#[test]
fn versions_namespaces_and_other_kinds() {
    let mut hr = helm_release(json!({}));
    hr.api_version = "helm.toolkit.fluxcd.io/v2beta2".into();
    assert_eq!(
        dry_run_error(&hr).as_deref(),
        Some(
            "HelmRelease/kube-system/cilium dry-run failed: no matches for kind \"HelmRelease\" in version \"helm.toolkit.fluxcd.io/v2beta2\""
        )
    );
    let mut hr = helm_release(json!({}));
    hr.namespace = None;
    assert_eq!(
        dry_run_error(&hr).as_deref(),
        Some(
            // A custom resource's 404 has no Status body: client-go names
            // the request (the oracle's apply step, docs/design.md#flux-oracle).
            "HelmRelease/cilium namespace not specified: the server could not find the requested resource (patch helmreleases.helm.toolkit.fluxcd.io cilium)"
        )
    );
    let repo = object(json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository",
        "metadata": {"name": "c", "namespace": "kube-system"}, "spec": {"interval": "1h"}}));
    assert_eq!(
        dry_run_error(&repo).as_deref(),
        Some(
            "HelmRepository/kube-system/c dry-run failed (Invalid): HelmRepository.source.toolkit.fluxcd.io \"c\" is invalid: spec.url: Required value"
        )
    );
    let deployment =
        object(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}}));
    assert_eq!(
        dry_run_error(&deployment).as_deref(),
        Some(
            "Deployment/x namespace not specified: the server could not find the requested resource"
        )
    );
    let unknown = object(
        json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "x"}, "spec": {"any": 1}}),
    );
    assert_eq!(dry_run_error(&unknown), None);
    let values = helm_release(json!({"values": {"anything": [1, null, {"x": "y"}]}}));
    assert_eq!(dry_run_error(&values), None);
}
