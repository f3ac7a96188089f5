//! Constructs real repositories write that the scan once read wrong, each
//! settled by Flux's, kustomize's or flux-operator's own code
//! (tests/fixtures/flux/<case>/, entrypoint `clusters/test`; the Flux oracle
//! tier, tests/it/flux_oracle.rs, builds the same fixtures with that code).

use std::path::{Path, PathBuf};

use bootstrap::flux::{
    BootstrapRelease, Finding, Scan, ScanInput, Severity, helmrelease_source, scan, tree,
};
use pretty_assertions::assert_eq;
use serde_json::json;

fn release(name: &str, chart: &str) -> BootstrapRelease {
    BootstrapRelease {
        name: name.into(),
        namespace: "kube-system".into(),
        chart: Some(chart.into()),
        workloads: vec![],
        rendered: None,
        handover: None,
    }
}

fn bootstrap() -> Vec<BootstrapRelease> {
    vec![
        release("cilium", "cilium"),
        release("coredns", "coredns"),
        release("spegel", "spegel"),
    ]
}

fn fixture(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/flux")
        .join(case)
}

fn run(case: &str) -> Scan {
    scan(&ScanInput {
        root: &fixture(case),
        entrypoint: Path::new("clusters/test"),
        releases: &bootstrap(),
    })
}

fn resolve(case: &str) -> tree::Tree {
    tree::resolve(&fixture(case), Path::new("clusters/test"))
}

/// severity, code, release and object of a finding.
fn line(f: &Finding) -> String {
    let severity = match f.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "info",
    };
    let object = f.object.as_ref().map_or("-".to_string(), |o| {
        format!(
            "{} {}/{}",
            o.kind,
            o.namespace.as_deref().unwrap_or("~"),
            o.name
        )
    });
    format!(
        "{severity} {} {} | {object}",
        f.code,
        f.release.as_deref().unwrap_or("-")
    )
}

fn lines(scan: &Scan) -> Vec<String> {
    scan.findings.iter().map(line).collect()
}

#[test]
fn envsubst_defaults_unparsable_forms_and_substitute_strategy_always() {
    let scan = run("envsubst");
    assert_eq!(
        lines(&scan),
        [
            // `${APP=cilium}` is cilium; `substituteStrategy: Always` substitutes
            // `${RELEASE:=spegel}` without any variable.
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium",
            "error flux-manages-bootstrap-release kube-system/spegel | HelmRelease kube-system/spegel",
            // `${SUFFIX-d}` fails the build: nothing of it is applied.
            "warning flux-build-fails - | HelmRelease kube-system/coredns${SUFFIX-d}",
        ]
    );
    assert!(
        scan.findings[2].message.contains("`${SUFFIX-d}`")
            && scan.findings[2]
                .message
                .contains("Kustomization flux-system/unparsed"),
        "{}",
        scan.findings[2].message
    );
    let tree = resolve("envsubst");
    let failed: Vec<_> = tree
        .builds
        .iter()
        .filter(|b| b.failed)
        .map(|b| b.by.clone().unwrap_or_default())
        .collect();
    assert_eq!(failed, ["Kustomization/flux-system/unparsed"]);
}

#[test]
fn patch_targets_and_replacements_name_objects_by_any_id_and_set_based_selectors_match() {
    let scan = run("kustomize-original-ids");
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/team-network",
            "error flux-manages-bootstrap-release kube-system/coredns | HelmRelease kube-system/team-dns",
            "error flux-manages-bootstrap-release kube-system/spegel | HelmRelease kube-system/team-mirror",
        ]
    );
}

#[test]
fn a_file_re_included_inside_an_ignored_directory_is_in_the_artifact() {
    let scan = run("ignore-reinclude");
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium"
        ]
    );
}

#[test]
fn any_sourceignore_drops_source_controllers_default_patterns() {
    let scan = run("sourceignore-defaults");
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium"
        ]
    );
}

#[test]
fn slugify_transliterates_like_gosimple_slug() {
    let tree = resolve("resourceset-slugify");
    let mut names: Vec<&str> = tree
        .objects
        .iter()
        .filter(|o| o.kind == "HelmRelease")
        .map(|o| o.name.as_str())
        .collect();
    names.sort();
    assert_eq!(names, ["kube-and-vip", "spegel"]);
}

#[test]
fn substituted_plain_scalars_take_their_yaml_type() {
    let tree = resolve("postbuild-types");
    let hr = tree
        .objects
        .iter()
        .find(|o| o.kind == "HelmRelease")
        .expect("the HelmRelease is reached");
    assert_eq!(
        hr.body["spec"]["values"],
        json!({
            "operator": {"replicas": 3},
            "podDisruptionBudget": {"enabled": true},
            "image": {"tag": 1.1},
            "label": "v1.10",
        })
    );
}

#[test]
fn one_file_reached_by_two_builds_is_one_object() {
    let scan = run("reached-twice");
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium"
        ]
    );
    assert_eq!(scan.helm_releases.len(), 1);
    let tree = resolve("reached-twice");
    let found = helmrelease_source::find(&tree.objects, "kube-system/cilium");
    assert!(found.is_ok(), "{found:?}");
    // Both builds apply it: the entrypoint's and Kustomization cilium's.
    let appliers: Vec<_> = tree
        .builds
        .iter()
        .filter(|b| b.objects.iter().any(|o| o.kind == "HelmRelease"))
        .map(|b| b.by.clone())
        .collect();
    assert_eq!(
        appliers,
        [None, Some("Kustomization/flux-system/cilium".to_string())]
    );
}

#[test]
fn generated_config_maps_keep_their_hash_and_name_references_follow() {
    let tree = resolve("generator-name-reference");
    let cm = tree
        .objects
        .iter()
        .find(|o| o.kind == "ConfigMap")
        .expect("the generated ConfigMap");
    assert!(
        cm.name.starts_with("cilium-values-") && cm.name.len() == "cilium-values-".len() + 10,
        "{}",
        cm.name
    );
    let hr = helmrelease_source::find(&tree.objects, "kube-system/cilium").unwrap();
    assert_eq!(hr.body["spec"]["valuesFrom"][0]["name"], json!(cm.name));
    let resolved = helmrelease_source::resolve(hr, &tree.objects).unwrap();
    assert_eq!(
        resolved.unresolved,
        Vec::<helmrelease_source::Unresolved>::new()
    );
    assert_eq!(resolved.values, json!({"operator": {"replicas": 1}}));
}

#[test]
fn chart_ref_to_a_helm_chart_is_resolved() {
    let tree = resolve("chart-ref-helmchart");
    let hr = helmrelease_source::find(&tree.objects, "kube-system/cilium").unwrap();
    let resolved = helmrelease_source::resolve(hr, &tree.objects).unwrap();
    assert_eq!(
        resolved.chart,
        helmrelease_source::OriginChart {
            location: helmrelease_source::ChartLocation::Repo {
                url: "https://helm.cilium.io".into(),
                name: "cilium".into()
            },
            version: "1.16.0".into(),
        }
    );
}

#[test]
#[cfg_attr(not(kubectl), ignore = "needs kubectl on PATH (.ci/run installs it)")]
fn delegated_builds_load_files_above_the_kustomization_like_flux() {
    let kubectl = which("kubectl").expect("kubectl on PATH");
    let tree = tree::resolve_with(
        &fixture("delegated-above"),
        Path::new("clusters/test"),
        Some(&kubectl),
    );
    let names: Vec<&str> = tree
        .objects
        .iter()
        .filter(|o| o.kind == "HelmRelease")
        .map(|o| o.name.as_str())
        .collect();
    assert_eq!(names, ["kube-vip"]);
    assert!(
        tree.findings
            .iter()
            .any(|f| f.message.contains("built with `kubectl kustomize`")),
        "{:?}",
        tree.findings
    );
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

// Found by the generated trees of the Flux oracle tier (tests/flux_oracle),
// each settled by the oracle's own build of the fixture.

#[test]
fn a_patch_target_name_is_a_regex_so_a_variable_selects_nothing() {
    let scan = run("kustomize-target-regex");
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium"
        ]
    );
}

#[test]
fn components_transform_the_generated_objects() {
    let tree = resolve("component-after-generator");
    let mut names: Vec<String> = tree
        .objects
        .iter()
        .filter(|o| o.kind == "ConfigMap" || o.kind == "HelmRelease")
        .map(|o| format!("{} {}", o.kind, o.name))
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["ConfigMap team-cilium-values", "HelmRelease team-cilium"]
    );
}

#[test]
fn the_prefixed_name_before_the_suffix_is_an_id_a_replacement_selects() {
    let scan = run("replacement-prefixed-id");
    let releases: Vec<&str> = scan
        .helm_releases
        .iter()
        .map(|r| r.release.as_str())
        .collect();
    assert_eq!(releases, ["kube-system/team-cilium-prod"]);
    assert_eq!(
        lines(&scan),
        [
            "error flux-duplicates-bootstrap-chart kube-system/cilium | HelmRelease kube-system/team-cilium-prod"
        ]
    );
}

#[test]
fn a_replacement_target_field_that_is_missing_fails_the_build() {
    let scan = run("replacement-missing-field");
    assert!(
        lines(&scan).contains(&"warning flux-build-fails - | -".to_string()),
        "{:?}",
        lines(&scan)
    );
    assert!(
        scan.findings.iter().any(|f| f
            .message
            .contains("unable to find field `spec.releaseName`")),
        "{:?}",
        scan.findings
    );
}

#[test]
fn slugify_transliterates_the_whole_basic_multilingual_plane() {
    let tree = resolve("resourceset-slugify-unicode");
    let mut names: Vec<&str> = tree
        .objects
        .iter()
        .filter(|o| o.kind == "HelmRelease")
        .map(|o| o.name.as_str())
        .collect();
    names.sort();
    assert_eq!(names, ["dong-jing", "nandu", "ri-ben-yu"]);
}

#[test]
fn substituted_integers_read_as_go_yaml_v2_parses_them() {
    let tree = resolve("postbuild-int-forms");
    let hr = helmrelease_source::find(&tree.objects, "kube-system/cilium").unwrap();
    assert_eq!(
        hr.body["spec"]["values"],
        json!({"hex": 16, "underscore": 1000, "binary": 5, "octal": 8.0, "date": "2024-1-2"})
    );
}

#[test]
fn a_strategic_merge_patch_keeps_the_quotes_of_the_field_it_replaces() {
    let tree = resolve("smp-keeps-quotes");
    let hr = helmrelease_source::find(&tree.objects, "kube-system/cilium").unwrap();
    assert_eq!(
        hr.body["spec"]["values"],
        json!({"operator": {"replicas": "3"}, "agent": {"replicas": 3}})
    );
}

#[test]
fn a_replacement_keeps_the_type_of_its_target_or_fails_the_build() {
    let scan = run("replacement-keeps-type");
    let tree = resolve("replacement-keeps-type");
    let hr = helmrelease_source::find(&tree.objects, "kube-system/cilium").unwrap();
    assert_eq!(
        hr.body["spec"]["values"],
        json!({"operator": {"replicas": 5}, "label": "5", "created": 5})
    );
    assert!(
        scan.findings.iter().any(|f| f.code == "flux-build-fails"
            && f.message.contains("cannot decode `coredns` as the number")),
        "{:?}",
        scan.findings
    );
}

#[test]
fn a_replacement_onto_a_null_fails_the_build() {
    // `replicas: ~` and `replicas:` (no value) are both tagged !!null, and
    // a replacement keeps the tag: kustomize fails both builds.
    let scan = run("replacement-onto-null");
    let failing: Vec<&str> = scan
        .findings
        .iter()
        .filter(|f| {
            f.code == "flux-build-fails" && f.message.contains("cannot decode `cilium` as the null")
        })
        .filter_map(|f| f.chain.get(1).map(String::as_str))
        .collect();
    assert_eq!(
        failing,
        ["bare/kustomization.yaml", "tilde/kustomization.yaml"],
        "{:?}",
        scan.findings
    );
}

#[test]
fn a_name_with_a_comma_fails_the_build_once_its_id_is_recorded() {
    let scan = run("comma-name-previous-id");
    let failing: Vec<&str> = scan
        .findings
        .iter()
        .filter(|f| f.code == "flux-build-fails" && f.message.contains("has a comma in its name"))
        .filter_map(|f| f.object.as_ref().map(|o| o.name.as_str()))
        .collect();
    assert_eq!(failing, ["cilium,x", "coredns,x"]);
}

#[test]
fn a_patch_that_renames_two_objects_onto_one_id_fails_the_build() {
    let scan = run("patch-rename-collision");
    assert!(
        scan.findings
            .iter()
            .any(|f| f.code == "flux-build-fails" && f.message.contains("already registered id")),
        "{:?}",
        scan.findings
    );
}

#[test]
fn a_json_patch_replace_sets_a_missing_key_as_kustomize_does() {
    let scan = run("json-patch-replace-missing-key");
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/spegel | HelmRelease kube-system/mirror"
        ]
    );
}

// kustomize's label and annotation transformers (issue 40): labels set
// inside are in place before the outer patches select by them, and Flux
// reads the annotations they set.

#[test]
fn labels_and_annotations_set_inside_are_selected_by_outer_patches() {
    let scan = run("kustomize-labels-select");
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease networking/network",
            "error flux-manages-bootstrap-release kube-system/spegel | HelmRelease registry/mirror",
        ]
    );
}

#[test]
fn common_annotations_disable_substitution_for_every_object() {
    let scan = run("common-annotations-substitute-disabled");
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium"
        ]
    );
    let tree = resolve("common-annotations-substitute-disabled");
    let hr = helmrelease_source::find(&tree.objects, "kube-system/cilium").unwrap();
    assert_eq!(
        hr.body["spec"]["values"],
        json!({"cluster": {"name": "test"}})
    );
    let dashboard = tree
        .objects
        .iter()
        .find(|o| o.name == "cilium-dashboard")
        .unwrap();
    assert!(
        dashboard.body["data"]["cilium.json"]
            .as_str()
            .unwrap()
            .contains("${__field.labels.pod}")
    );
    assert_eq!(
        dashboard.body["metadata"]["labels"],
        json!({"grafana_dashboard": "1"})
    );
}

#[test]
fn objects_kustomize_controller_skips_at_apply_are_not_applied() {
    let scan = run("flux-apply-excluded");
    let mut found = lines(&scan);
    found.sort();
    assert_eq!(
        found,
        [
            "error flux-manages-bootstrap-release kube-system/spegel | HelmRelease kube-system/spegel",
            "warning flux-apply-skipped - | HelmRelease kube-system/cilium",
            "warning flux-apply-skipped - | HelmRelease kube-system/coredns",
            "warning flux-apply-skipped - | Kustomization flux-system/more",
        ]
    );
    let tree = resolve("flux-apply-excluded");
    let builds: Vec<String> = tree
        .builds
        .iter()
        .map(|b| b.by.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        builds,
        [
            "",
            "Kustomization/flux-system/apps",
            "Kustomization/flux-system/legacy"
        ]
    );
    assert!(
        scan.findings[1..]
            .iter()
            .all(|f| f.message.contains("never applies it")),
        "{:?}",
        scan.findings
    );
}

#[test]
fn a_strategic_merge_patch_drops_the_nulls_written_as_nothing() {
    let tree = resolve("smp-drops-bare-nulls");
    let values = |name: &str| {
        let reference = format!("kube-system/{name}");
        helmrelease_source::find(&tree.objects, &reference)
            .unwrap()
            .body["spec"]["values"]
            .clone()
    };
    let written = json!({
        "resources": {"limits": null, "requests": null, "other": null},
        "tolerations": [{"key": null, "operator": "Exists"}],
        "nodeSelector": null,
    });
    assert_eq!(values("untouched"), written);
    let dropped = json!({
        "resources": {"requests": null, "other": null},
        "tolerations": [{"key": null, "operator": "Exists"}],
        "replicas": 2,
    });
    assert_eq!(values("smp"), dropped);
    assert_eq!(values("flux-patched"), dropped);
    let mut kept = written.clone();
    kept["replicas"] = json!(2);
    assert_eq!(values("json-then-smp"), kept);
}

/// The findings of `case` whose code is `code`.
fn with_code<'a>(scan: &'a Scan, code: &str) -> Vec<&'a Finding> {
    scan.findings.iter().filter(|f| f.code == code).collect()
}

#[test]
fn versions_flux_does_not_serve_fail_the_apply_of_their_stage() {
    // Flux v2.9's CRDs (src/flux/crds) serve helm.toolkit.fluxcd.io/v2 and
    // source.toolkit.fluxcd.io/v1 only: the REST mapping of the dry-run
    // fails, and fluxcd/pkg ssa ApplyAll applies nothing of the stage.
    let scan = run("apply-unserved-version");
    assert_eq!(
        lines(&scan),
        [
            "error flux-apply-fails kube-system/cilium | HelmRelease kube-system/cilium",
            "error flux-apply-fails kube-system/coredns | OCIRepository kube-system/coredns-chart",
            "error flux-manages-bootstrap-release kube-system/spegel | HelmRelease kube-system/spegel",
        ]
    );
    let messages: Vec<&str> = with_code(&scan, "flux-apply-fails")
        .iter()
        .map(|f| f.message.as_str())
        .collect();
    assert!(
        messages[0].starts_with("Kustomization flux-system/cilium fails: its server-side apply stops at the stage of other objects, `HelmRelease/kube-system/cilium dry-run failed: no matches for kind \"HelmRelease\" in version \"helm.toolkit.fluxcd.io/v2beta2\"`"),
        "{}",
        messages[0]
    );
    assert!(
        messages[1].contains("`OCIRepository/kube-system/coredns-chart dry-run failed: no matches for kind \"OCIRepository\" in version \"source.toolkit.fluxcd.io/v1beta2\"`")
            && messages[1].contains("Once that is fixed: HelmRelease kube-system/coredns manages Helm release kube-system/coredns"),
        "{}",
        messages[1]
    );
    // The refused stage's objects are built, not applied.
    let tree = resolve("apply-unserved-version");
    assert!(
        !tree
            .objects
            .iter()
            .any(|o| o.kind != "Kustomization" && (o.name == "cilium" || o.name == "coredns"))
    );
    let cilium = tree
        .builds
        .iter()
        .find(|b| b.by.as_deref() == Some("Kustomization/flux-system/cilium"))
        .unwrap();
    assert_eq!(cilium.objects.len(), 1);
    assert_eq!(cilium.not_applied.len(), 1);
    assert!(cilium.apply_error.is_some());
}

#[test]
fn a_field_the_crd_does_not_declare_fails_the_apply_and_its_build_is_not_done() {
    // kustomize-controller's v1 Kustomization has no patchesStrategicMerge:
    // structured-merge-diff rejects the apply patch, so Kustomization
    // `legacy` is never applied and its build (whose patch would make
    // `mirror` manage spegel) never runs.
    let scan = run("apply-undeclared-field");
    assert_eq!(
        lines(&scan),
        [
            "warning flux-apply-fails - | Kustomization flux-system/legacy",
            "warning no-helmrelease-reached - | -",
        ]
    );
    let message = &with_code(&scan, "flux-apply-fails")[0].message;
    assert!(
        message.contains("`Kustomization/flux-system/legacy dry-run failed: failed to create typed patch object (flux-system/legacy; kustomize.toolkit.fluxcd.io/v1, Kind=Kustomization): .spec.patchesStrategicMerge: field not declared in schema`")
            && message.contains("the builds of Kustomization flux-system/legacy are not done"),
        "{message}"
    );
    assert!(
        !resolve("apply-undeclared-field")
            .builds
            .iter()
            .any(|b| b.by.as_deref() == Some("Kustomization/flux-system/legacy"))
    );
}

#[test]
fn every_type_error_of_the_apply_patch_is_reported_as_structured_merge_diff_does() {
    // `releaseName: 5` and `targetNamespace: ${NS}` with NS `0X10` (read
    // back as 16): both fields are in the error, one a line after
    // `errors:` (found by the Flux oracle's generated trees, where check
    // named the first alone).
    let scan = run("apply-typed-errors");
    assert_eq!(
        lines(&scan),
        ["error flux-apply-fails kube-system/coredns | HelmRelease kube-system/coredns"]
    );
    let message = &scan.findings[0].message;
    assert!(
        message.contains("HelmRelease/kube-system/coredns dry-run failed: failed to create typed patch object (kube-system/coredns; helm.toolkit.fluxcd.io/v2, Kind=HelmRelease): errors:\n  .spec.releaseName: expected string, got &value.valueUnstructured{Value:5}\n  .spec.targetNamespace: expected string, got &value.valueUnstructured{Value:16}"),
        "{message}"
    );
}

#[test]
fn a_config_map_value_substituted_into_a_number_fails_the_apply() {
    // Found by the Flux oracle's generated trees: check did not type a
    // ConfigMap's data, the API server refuses a number there.
    let scan = run("apply-config-map-data");
    assert_eq!(
        lines(&scan),
        ["error flux-apply-fails kube-system/spegel | ConfigMap kube-system/values"]
    );
    let message = &scan.findings[0].message;
    assert!(
        message.contains("ConfigMap/kube-system/values dry-run failed: failed to create typed patch object (kube-system/values; /v1, Kind=ConfigMap): .data.replicas: expected string, got &value.valueUnstructured{Value:5}"),
        "{message}"
    );
}

#[test]
fn a_null_config_map_value_is_the_empty_string_helm_controller_reads() {
    // Found by the Flux oracle's generated trees: check read the null as
    // the text `null`, which helm's `--set` parser makes a null.
    let tree = resolve("values-from-null-data");
    let builds = bootstrap::flux::builds_json(&tree.builds);
    let hr = builds
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|b| b["helmReleases"].as_array().cloned().unwrap_or_default())
        .next()
        .expect("the HelmRelease");
    assert_eq!(hr["composed"], json!({"replicas": ""}));
}

#[test]
fn a_missing_required_field_or_a_null_from_an_unset_variable_fails_the_apply() {
    let scan = run("apply-required-field");
    assert_eq!(
        lines(&scan),
        ["error flux-apply-fails kube-system/cilium | HelmRelease kube-system/cilium"]
    );
    assert!(
        scan.findings[0].message.contains("HelmRelease.helm.toolkit.fluxcd.io \"cilium\" is invalid: [spec.interval: Required value, <nil>: Invalid value: null: some validation rules were not checked"),
        "{}",
        scan.findings[0].message
    );
    // `releaseName: ${RELEASE}` with RELEASE unset reads back as a null,
    // which the CRD's validation rejects (kube-apiserver prunes nulls only
    // when decoding a create or update body, not an apply patch).
    let scan = run("apply-null-substitution");
    assert_eq!(
        lines(&scan),
        ["error flux-apply-fails kube-system/coredns | HelmRelease kube-system/coredns"]
    );
    assert!(
        scan.findings[0].message.contains("spec.releaseName: Invalid value: \"null\": spec.releaseName in body must be of type string: \"null\""),
        "{}",
        scan.findings[0].message
    );
}

#[test]
fn a_namespaced_object_without_a_namespace_fails_the_apply_of_its_stage() {
    let scan = run("apply-namespace-missing");
    assert_eq!(
        lines(&scan),
        ["error flux-apply-fails kube-system/cilium | ConfigMap ~/cilium-values"]
    );
    assert!(
        scan.findings[0].message.contains("`ConfigMap/cilium-values namespace not specified: the server could not find the requested resource`; nothing of that stage nor of a later one is applied (2 objects, from apps/cm.yaml)"),
        "{}",
        scan.findings[0].message
    );
}

#[test]
fn an_untargeted_patch_matches_its_object_by_api_version_too() {
    // kustomize PatchTransformer: GetById(patch.OrgId()) with Gvk.Equals.
    let scan = run("smp-apiversion-mismatch");
    assert_eq!(lines(&scan), ["warning flux-build-fails - | -"]);
    assert!(
        scan.findings[0]
            .message
            .contains("(apiVersion `helm.toolkit.fluxcd.io/v2beta2`) matches 0 objects"),
        "{}",
        scan.findings[0].message
    );
}

#[test]
fn a_resource_set_control_action_is_named_with_its_line() {
    let scan = run("resourceset-control-action");
    let found = with_code(&scan, "flux-construct-not-modelled");
    assert_eq!(found.len(), 1);
    assert!(
        found[0].message.starts_with("ResourceSet flux-system/apps in clusters/test/resourceset.yaml:13: `<< if inputs.enabled >>`, a text/template `if` action, is not modelled"),
        "{}",
        found[0].message
    );
}

#[test]
fn object_metadata_the_api_server_refuses_fails_the_apply() {
    // What the Flux oracle's apply step found the real API server refuses
    // (docs/design.md#flux-oracle): each Kustomization of the fixture
    // applies one HelmRelease, and each refusal is worded as Flux prints it.
    let scan = run("apply-object-metadata");
    let subdomain = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    let expected = [
        (
            "name",
            format!(
                "HelmRelease/kube-system/Cilium_Agent dry-run failed (Invalid): HelmRelease.helm.toolkit.fluxcd.io \"Cilium_Agent\" is invalid: metadata.name: Invalid value: \"Cilium_Agent\": {subdomain}"
            ),
        ),
        (
            "namespace",
            "HelmRelease/team.a/coredns not found: namespaces \"team.a\" not found".to_string(),
        ),
        (
            "slash",
            "HelmRelease/kube-system/x-${APP/i/o} dry-run failed: invalid resource name \"x-${APP/i/o}\": [may not contain '/']".to_string(),
        ),
        (
            "empty",
            "HelmRelease/kube-system/ dry-run failed: resource name may not be empty".to_string(),
        ),
        (
            "label",
            "HelmRelease/kube-system/spegel dry-run failed (Invalid): HelmRelease.helm.toolkit.fluxcd.io \"spegel\" is invalid: metadata.labels: Invalid value: \"core edge\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_string(),
        ),
        (
            "unscoped",
            "HelmRelease/metrics namespace not specified: the server could not find the requested resource (patch helmreleases.helm.toolkit.fluxcd.io metrics)".to_string(),
        ),
        (
            "float",
            "HelmRelease/kube-system/podinfo dry-run failed: failed to create typed patch object (kube-system/podinfo; helm.toolkit.fluxcd.io/v2, Kind=HelmRelease): .spec.targetNamespace: expected string, got &value.valueUnstructured{Value:1000}".to_string(),
        ),
    ];
    let failures = with_code(&scan, "flux-apply-fails");
    assert_eq!(failures.len(), expected.len(), "{:#?}", lines(&scan));
    for (ks, error) in expected {
        let who = format!("Kustomization flux-system/{ks} fails:");
        let finding = failures
            .iter()
            .find(|f| f.message.starts_with(&who))
            .unwrap_or_else(|| panic!("no flux-apply-fails for {ks}: {:#?}", lines(&scan)));
        assert!(
            finding.message.contains(&format!("`{error}`")),
            "{ks}: {}",
            finding.message
        );
    }
}
