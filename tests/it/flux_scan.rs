//! The GitOps ownership scan, one small fixture per resolution rule
//! (tests/fixtures/flux/<case>/, entrypoint `clusters/test`).

use std::path::{Path, PathBuf};

use bootstrap::flux::{BootstrapRelease, Finding, Scan, ScanInput, Severity, WorkloadRef, scan};
use pretty_assertions::assert_eq;

fn workload(kind: &str, name: &str) -> WorkloadRef {
    WorkloadRef {
        kind: kind.into(),
        namespace: "kube-system".into(),
        name: name.into(),
    }
}

fn release(
    name: &str,
    namespace: &str,
    chart: &str,
    workloads: Vec<WorkloadRef>,
) -> BootstrapRelease {
    BootstrapRelease {
        name: name.into(),
        namespace: namespace.into(),
        chart: Some(chart.into()),
        workloads,
        rendered: None,
        handover: None,
    }
}

fn bootstrap() -> Vec<BootstrapRelease> {
    vec![
        release(
            "cilium",
            "kube-system",
            "cilium",
            vec![workload("DaemonSet", "cilium")],
        ),
        release(
            "coredns",
            "kube-system",
            "coredns",
            vec![workload("Deployment", "coredns")],
        ),
        release("spegel", "kube-system", "spegel", vec![]),
    ]
}

fn fixture(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/flux")
        .join(case)
}

fn run(case: &str, releases: &[BootstrapRelease]) -> Scan {
    scan(&ScanInput {
        root: &fixture(case),
        entrypoint: Path::new("clusters/test"),
        releases,
    })
}

/// One line per finding: severity, code, release, object and chain, which is
/// everything but the prose.
fn line(f: &Finding) -> String {
    let severity = match f.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "info",
    };
    let object = f.object.as_ref().map_or("-".to_string(), |o| {
        format!(
            "{} {}/{} @{}",
            o.kind,
            o.namespace.as_deref().unwrap_or("~"),
            o.name,
            o.file
        )
    });
    format!(
        "{severity} {} {} | {object} | {}",
        f.code,
        f.release.as_deref().unwrap_or("-"),
        f.chain.join(" > ")
    )
}

fn lines(scan: &Scan) -> Vec<String> {
    scan.findings.iter().map(line).collect()
}

#[test]
fn kustomization_resources_files_dirs_nested_and_components_but_not_patches() {
    let scan = run("kustomize-resources", &bootstrap());
    // patch.yaml (named coredns, patching cilium through its target) is only a patch, and unlisted.yaml sits
    // next to a kustomization that does not list it: neither is applied.
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium @apps/core/nested/helmrelease.yaml | \
             clusters/test/apps.yaml > apps/kustomization.yaml > apps/core/kustomization.yaml > apps/core/nested/kustomization.yaml > apps/core/nested/helmrelease.yaml",
            "error flux-manages-bootstrap-release kube-system/spegel | HelmRelease kube-system/spegel @apps/components/extra/spegel.yaml | \
             clusters/test/apps.yaml > apps/kustomization.yaml > apps/components/extra/kustomization.yaml > apps/components/extra/spegel.yaml",
        ]
    );
    // patch.yaml is read (a patch), not applied as an object.
    assert_eq!((scan.files_scanned, scan.objects_scanned), (9, 4));
}

#[test]
fn every_kustomization_file_name_kustomize_accepts() {
    let scan = run("kustomization-filenames", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium @a/hr.yaml | \
             clusters/test/kustomization.yml > a/Kustomization > a/hr.yaml",
            "error flux-manages-bootstrap-release kube-system/coredns | HelmRelease kube-system/coredns @b/hr.yaml | \
             clusters/test/kustomization.yml > b/kustomization.yml > b/hr.yaml",
        ]
    );
}

#[test]
fn outermost_kustomize_namespace_wins() {
    // The HelmRelease says `somewhere-else`, its kustomization `inner-ns`, the
    // one above `other`, the entrypoint's `kube-system`: kustomize applies the
    // outermost last.
    let scan = run("kustomize-namespace", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium @outer/inner/hr.yaml | \
          clusters/test/kustomization.yaml > outer/kustomization.yaml > outer/inner/kustomization.yaml > outer/inner/hr.yaml"
        ]
    );
}

#[test]
fn remote_resources_are_reported_and_the_rest_is_still_scanned() {
    let scan = run("remote-resource", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium @clusters/test/hr.yaml | \
             clusters/test/kustomization.yaml > clusters/test/hr.yaml",
            "warning remote-resource-not-followed - | - | clusters/test/kustomization.yaml",
            "warning remote-resource-not-followed - | - | clusters/test/kustomization.yaml",
        ]
    );
    assert!(
        scan.findings[1]
            .message
            .contains("github.com/fluxcd/flux2/manifests/install?ref=v2.4.0")
    );
    assert!(
        scan.findings[2]
            .message
            .contains("https://github.com/kubernetes-sigs/gateway-api")
    );
}

#[test]
fn directory_without_kustomization_is_generated_like_flux() {
    // apps/deep has no kustomization: every YAML below it (not notes.txt).
    // clusters/test/kdir has one: it is built from its resources only, so
    // not-listed.yaml (a spegel HelmRelease) is not applied.
    let scan = run("generated-dir", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium @apps/deep/deeper/cilium.yml | \
             clusters/test/infra.yaml > apps/deep/deeper/cilium.yml",
            "error flux-manages-bootstrap-release kube-system/coredns | HelmRelease kube-system/coredns @clusters/test/kdir/listed.yaml | \
             clusters/test/kdir/kustomization.yaml > clusters/test/kdir/listed.yaml",
        ]
    );
}

#[test]
fn flux_target_namespace_and_helm_release_naming_rules() {
    let scan = run("flux-namespaces", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            // HelmRelease flux-system/coredns with spec.targetNamespace kube-system:
            // Helm release kube-system-coredns stored in flux-system, same chart, same target.
            "error flux-duplicates-bootstrap-chart kube-system/coredns | HelmRelease flux-system/coredns @apps/coredns/hr.yaml | \
             clusters/test/kustomization.yaml > clusters/test/ks.yaml > apps/coredns/hr.yaml",
            // No namespace of its own; the Flux Kustomization's targetNamespace
            // sets it, the entrypoint's kustomize `namespace: outer-ns` does not.
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium @apps/cilium/hr.yaml | \
             clusters/test/kustomization.yaml > clusters/test/ks.yaml > apps/cilium/hr.yaml",
            // releaseName + storageNamespace point a flux-system HelmRelease at kube-system/spegel.
            "error flux-manages-bootstrap-release kube-system/spegel | HelmRelease flux-system/spegel-flux @apps/spegel/hr.yaml | \
             clusters/test/kustomization.yaml > clusters/test/ks.yaml > apps/spegel/hr.yaml",
        ]
    );
    let coredns = &scan.findings[0].message;
    assert!(coredns.contains("kube-system-coredns"), "{coredns}");
}

#[test]
fn multi_document_files() {
    let scan = run("multi-doc", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium @apps/releases.yaml | \
             clusters/test/all.yaml > apps/releases.yaml",
            "error flux-manages-bootstrap-release kube-system/coredns | HelmRelease kube-system/coredns @apps/releases.yaml | \
             clusters/test/all.yaml > apps/releases.yaml",
            // The bare values document fails Flux's build of apps/ (its
            // generated kustomization decodes every document).
            "warning flux-build-fails - | - | clusters/test/all.yaml > apps/releases.yaml",
        ]
    );
    // Kustomization + ConfigMap + two HelmReleases; the comment-only and empty
    // documents and the bare values document are not objects.
    assert_eq!(scan.objects_scanned, 4);
}

#[test]
fn cycles_terminate_and_still_find_everything() {
    // a -> b -> a (and b -> the entrypoint again) between Flux Kustomizations,
    // k1 -> k2 -> k1 between kustomizations.
    let scan = run("cycle", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium @a/ks.yaml | \
             clusters/test/a.yaml > a/ks.yaml",
            "error flux-manages-bootstrap-release kube-system/coredns | HelmRelease kube-system/coredns @k1/hr.yaml | \
             clusters/test/loop.yaml > k1/kustomization.yaml > k1/hr.yaml",
            // kustomize rejects the k1 -> k2 -> k1 cycle: Flux fails that build.
            "warning flux-build-fails - | - | clusters/test/loop.yaml > k1/kustomization.yaml > k2/kustomization.yaml",
        ]
    );
}

#[test]
fn missing_paths_name_the_file_that_referenced_them() {
    let scan = run("missing-path", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "warning no-helmrelease-reached - | - | ",
            "warning path-not-found - | - | clusters/test/apps.yaml > apps/kustomization.yaml",
            "warning path-not-found - | - | clusters/test/apps.yaml > apps/kustomization.yaml",
            "warning path-not-found - | Kustomization flux-system/gone @clusters/test/gone.yaml | clusters/test/gone.yaml",
        ]
    );
    assert!(scan.findings[1].message.contains("`missing.yaml`"));
    assert!(
        scan.findings[2]
            .message
            .contains("`nokust`, which has no kustomization.yaml")
    );
    assert!(scan.findings[3].message.contains("`./apps/gone`"));
    assert!(!scan.has_errors());
}

#[test]
fn missing_entrypoint_is_a_finding_not_a_failure() {
    let scan = scan(&ScanInput {
        root: &fixture("multi-doc"),
        entrypoint: Path::new("clusters/nope"),
        releases: &bootstrap(),
    });
    assert_eq!(
        lines(&scan),
        [
            "warning no-helmrelease-reached - | - | ",
            "warning path-not-found - | - | "
        ]
    );
    assert_eq!((scan.files_scanned, scan.objects_scanned), (0, 0));
}

#[test]
fn postbuild_substitution_expands_names_and_namespaces() {
    // fluxcd/pkg kustomize/kustomize_varsub.go: targetNamespace ${APP_NS} comes
    // from postBuild.substitute, ${RELEASE:=cilium} takes its default, and the
    // unset ${STORAGE_NS} is empty (not strict): `storageNamespace:` reads
    // back as a null, which the HelmRelease CRD rejects, so the stage of both
    // HelmReleases is not applied (flux-apply-fails), an error because, once
    // that is fixed, both manage bootstrap releases.
    let scan = run("substitution", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-apply-fails kube-system/cilium | HelmRelease kube-system/coredns @apps/hr2.yaml | \
          clusters/test/apps.yaml > apps/hr2.yaml",
        ]
    );
    let message = &scan.findings[0].message;
    assert!(
        message.contains("spec.storageNamespace in body must be of type string: \"null\"")
            && message
                .contains("HelmRelease kube-system/cilium manages Helm release kube-system/cilium")
            && message.contains(
                "HelmRelease kube-system/coredns manages Helm release kube-system/coredns"
            ),
        "{message}"
    );
    assert_eq!(scan.objects_scanned, 1);
}

#[test]
fn invalid_yaml_is_a_finding_and_other_files_are_scanned() {
    let scan = run("yaml-invalid", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium @clusters/test/good.yaml | clusters/test/good.yaml",
            "warning yaml-invalid - | - | clusters/test/broken.yaml",
        ]
    );
    assert!(
        scan.findings[1].message.contains("line 3"),
        "{}",
        scan.findings[1].message
    );
}

#[test]
fn chart_ref_resolves_chart_names_through_scanned_sources() {
    // cni: OCIRepository url .../charts/cilium; dns: HelmChart ./charts/coredns
    // with targetNamespace kube-system; unknown-source: chart unknown, no finding.
    let scan = run("chart-ref", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-duplicates-bootstrap-chart kube-system/cilium | HelmRelease kube-system/cni @clusters/test/cilium.yaml | clusters/test/cilium.yaml",
            "error flux-duplicates-bootstrap-chart kube-system/coredns | HelmRelease flux-system/dns @clusters/test/cilium.yaml | clusters/test/cilium.yaml",
        ]
    );
}

#[test]
fn health_checks_on_bootstrap_workloads_and_missing_dependencies() {
    let scan = run("healthchecks-dependson", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            // HelmRelease kube-system/tool depends on kube-system/base (its own namespace by default).
            "warning flux-dependson-missing - | HelmRelease kube-system/tool @apps/tool.yaml | clusters/test/config.yaml > apps/tool.yaml",
            // `cilium` (default namespace flux-system) exists; kube-system/gateway-api does not.
            "warning flux-dependson-missing - | Kustomization flux-system/cilium-config @clusters/test/config.yaml | clusters/test/config.yaml",
            "warning flux-healthcheck-on-bootstrap-workload kube-system/cilium | Kustomization flux-system/cilium-config @clusters/test/config.yaml | clusters/test/config.yaml",
            // No namespace on the entry: the Kustomization's targetNamespace.
            "warning flux-healthcheck-on-bootstrap-workload kube-system/coredns | Kustomization flux-system/cilium-config @clusters/test/config.yaml | clusters/test/config.yaml",
        ]
    );
    assert!(scan.findings[1].message.contains("kube-system/gateway-api"));
    assert!(
        scan.findings[2]
            .message
            .contains("DaemonSet kube-system/cilium")
    );
}

#[test]
fn findings_serialize_to_the_check_json_shape() {
    let scan = run("multi-doc", &bootstrap());
    let json = serde_json::to_value(&scan.findings[0]).unwrap();
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["severity", "code", "release", "object", "chain", "message"]
    );
    assert_eq!(json["severity"], "error");
    assert_eq!(
        json["object"],
        serde_json::json!({"kind": "HelmRelease", "name": "cilium", "namespace": "kube-system", "file": "apps/releases.yaml"})
    );
    let missing = run("missing-path", &bootstrap());
    let json = serde_json::to_value(&missing.findings[0]).unwrap();
    assert_eq!(json["severity"], "warning");
    assert_eq!(json["release"], serde_json::Value::Null);
    assert_eq!(json["object"], serde_json::Value::Null);
}

fn example(variant: &str) -> Scan {
    let cilium = release(
        "cilium",
        "kube-system",
        "cilium",
        vec![workload("DaemonSet", "cilium")],
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/flux-dual-management")
        .join(variant);
    scan(&ScanInput {
        root: &root,
        entrypoint: Path::new("kubernetes/clusters/infra"),
        releases: &[cilium],
    })
}

#[test]
fn dual_management_tree_reports_the_dual_managed_cilium_with_its_chain() {
    let scan = example("broken");
    let health_check = "warning flux-healthcheck-on-bootstrap-workload kube-system/cilium | Kustomization flux-system/cilium @kubernetes/infrastructure/networking/cilium/ks.yaml | \
             kubernetes/clusters/infra/infrastructure.yaml > kubernetes/infrastructure/kustomization.yaml > kubernetes/infrastructure/networking/cilium/ks.yaml";
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium @kubernetes/bases/cilium/helmrelease.yaml | \
             kubernetes/clusters/infra/infrastructure.yaml > kubernetes/infrastructure/kustomization.yaml > \
             kubernetes/infrastructure/networking/cilium/ks.yaml > kubernetes/infrastructure/networking/cilium/kustomization.yaml > \
             kubernetes/bases/cilium/kustomization.yaml > kubernetes/bases/cilium/helmrelease.yaml",
            health_check,
            health_check,
        ]
    );
    // DaemonSet cilium is named by the release's rollout hook; Deployment
    // cilium-operator by no hook: it is found by the name the chart gives
    // it, and the message says the ownership is inferred.
    let messages: Vec<&str> = scan
        .findings
        .iter()
        .filter(|f| f.code == "flux-healthcheck-on-bootstrap-workload")
        .map(|f| f.message.as_str())
        .collect();
    assert!(
        messages[0].contains(
            "DaemonSet kube-system/cilium, which bootstrap release kube-system/cilium owns;"
        ),
        "{messages:?}"
    );
    assert!(
        messages[1].contains("Deployment kube-system/cilium-operator, which bootstrap release kube-system/cilium most likely owns (inferred"),
        "{messages:?}"
    );
    // The route the dual-management outage was traced along
    // (docs/design.md#dual-management-outage) is contained in the chain; the
    // scan also names the two kustomization files it passes through.
    let spec_chain = [
        "kubernetes/clusters/infra/infrastructure.yaml",
        "kubernetes/infrastructure/networking/cilium/ks.yaml",
        "kubernetes/infrastructure/networking/cilium/kustomization.yaml",
        "kubernetes/bases/cilium/helmrelease.yaml",
    ];
    let mut rest = scan.findings[0].chain.iter();
    assert!(spec_chain.iter().all(|want| rest.any(|have| have == want)));
    assert!(scan.has_errors());
}

#[test]
fn dual_management_fix_passes() {
    let scan = example("fixed");
    // No error; the fixed tree holds no HelmRelease at all, which is said (a
    // tree without any cannot vouch for bootstrap's releases).
    assert_eq!(lines(&scan), ["warning no-helmrelease-reached - | - | "]);
    assert!(!scan.has_errors());
    // The day-2 objects are still scanned: GitRepository, 3 Kustomizations in
    // clusters/infra and infrastructure, PrometheusRule, IPAM Kustomization and pool.
    assert_eq!(scan.objects_scanned, 7);
}

#[test]
fn flux_name_prefix_and_suffix_rename_helm_releases() {
    // fluxcd/pkg kustomize/kustomize_generator.go GenerateManifest: spec.namePrefix
    // and spec.nameSuffix become the kustomization's; `dns` becomes `coredns`
    // and `cilium` becomes `cilium-canary` (same chart, another release).
    let scan = run("flux-name-prefix-suffix", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-duplicates-bootstrap-chart kube-system/cilium | HelmRelease kube-system/cilium-canary @apps/canary/hr.yaml | \
             clusters/test/apps.yaml > apps/canary/hr.yaml",
            "error flux-manages-bootstrap-release kube-system/coredns | HelmRelease kube-system/coredns @apps/core/hr.yaml | \
             clusters/test/apps.yaml > apps/core/hr.yaml",
        ]
    );
}

#[test]
fn flux_patches_set_release_names() {
    // GenerateManifest appends spec.patches to the kustomization's patches: a
    // JSON 6902 patch with a regex target and a strategic-merge patch by name.
    let scan = run("flux-patches", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/network @apps/hr.yaml | \
             clusters/test/apps.yaml > apps/kustomization.yaml > apps/hr.yaml",
            "error flux-manages-bootstrap-release kube-system/coredns | HelmRelease kube-system/dns @apps/hr.yaml | \
             clusters/test/apps.yaml > apps/kustomization.yaml > apps/hr.yaml",
        ]
    );
}

#[test]
fn kustomize_patches_in_kustomize_order() {
    // kusttarget_configplugin.go: patchesStrategicMerge ($patch: delete drops
    // spegel), patches (releaseName: cilium on app-net, the patch's own name
    // ignored for its target), namespace, patchesJson6902 (app-dns renamed
    // coredns); the base's namePrefix came first.
    let scan = run("kustomize-patches", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/app-net @base/hr.yaml | \
             clusters/test/kustomization.yaml > base/kustomization.yaml > base/hr.yaml",
            "error flux-manages-bootstrap-release kube-system/coredns | HelmRelease kube-system/coredns @base/hr.yaml | \
             clusters/test/kustomization.yaml > base/kustomization.yaml > base/hr.yaml",
        ]
    );
    assert_eq!(scan.objects_scanned, 2);
}

#[test]
fn kustomize_replacements_set_target_namespaces() {
    // api/filters/replacement: a component copies the Namespace's name into
    // the Flux Kustomization's spec.targetNamespace (create: true).
    let scan = run("kustomize-replacements", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium @apps/hr.yaml | \
             clusters/test/kustomization.yaml > clusters/test/ks.yaml > apps/hr.yaml",
        ]
    );
}

#[test]
fn postbuild_substitute_from_tree_config_maps_and_secrets() {
    // kustomize_varsub.go: CLUSTER/APP_NS from the ConfigMap, DNS_NAME from the
    // Secret's stringData; the nested Kustomization's spec.path and namespace
    // are substituted by its parent; $${DNS_NAME} stays literal, and the object
    // annotated substitute: disabled keeps ${DNS_NAME:=spegel}. The SOPS Secret
    // cannot be read: a warning.
    let scan = run("postbuild", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium @nested/test/hr.yaml | \
             clusters/test/apps.yaml > apps/nested.yaml > nested/test/hr.yaml",
            "error flux-manages-bootstrap-release kube-system/coredns | HelmRelease kube-system/coredns @apps/hr.yaml | \
             clusters/test/apps.yaml > apps/hr.yaml",
            "warning substitute-from-unresolved - | Kustomization flux-system/apps @clusters/test/apps.yaml | clusters/test/apps.yaml",
        ]
    );
    assert!(
        scan.findings[2].message.contains("SOPS"),
        "{}",
        scan.findings[2].message
    );
}

#[test]
fn a_substitution_that_gives_two_objects_one_id_fails_the_build() {
    // kustomize-controller puts each substituted object back by its id:
    // `${APP}` becoming cilium beside a HelmRelease cilium fails the build
    // (`in Replace: id matched 2 resources`), and Flux applies neither.
    let scan = run("substitute-id-collision", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "warning flux-build-fails - | HelmRelease kube-system/${APP} @apps/hr.yaml | \
             clusters/test/apps.yaml > apps/hr.yaml",
            "warning no-helmrelease-reached - | - | ",
        ]
    );
    assert!(
        scan.findings[0].message.contains("id matched 2 resources"),
        "{}",
        scan.findings[0].message
    );
}

#[test]
fn resource_sets_generate_kustomizations_per_input() {
    // flux-operator internal/builder/resourceset.go: one Kustomization per input
    // (its own, then the Static provider's defaultValues); the GitHubPullRequest
    // provider needs the API: a warning naming it. The `extras` ResourceSet's
    // resourcesTemplate renders a HelmRelease itself.
    let scan = run("resourceset", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium @apps/cilium/hr.yaml | \
             clusters/test/resourceset.yaml > apps/cilium/hr.yaml",
            "error flux-manages-bootstrap-release kube-system/coredns | HelmRelease kube-system/coredns @apps/coredns/hr.yaml | \
             clusters/test/resourceset.yaml > apps/coredns/hr.yaml",
            "error flux-manages-bootstrap-release kube-system/spegel | HelmRelease kube-system/spegel @clusters/test/resourceset.yaml | \
             clusters/test/resourceset.yaml",
            "warning flux-construct-not-modelled - | ResourceSet flux-system/apps @clusters/test/resourceset.yaml | clusters/test/resourceset.yaml",
        ]
    );
    assert!(scan.findings[3].message.contains("pull-requests"));
}

#[test]
fn the_artifact_leaves_out_ignored_paths_and_symlinks() {
    // fluxcd/pkg sourceignore: .sourceignore (apps/ignored/); with a
    // .sourceignore, source-controller's defaults (`.github/`) are dropped
    // (artifact/storage SourceIgnoreFilter), so apps/.github/hr.yaml is
    // applied; the archiver skips the symlink apps/kept/link.yaml.
    let root = fixture("artifact");
    assert!(
        root.join("apps/kept/link.yaml").is_symlink(),
        "the fixture's symlink is missing"
    );
    let scan = run("artifact", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/coredns | HelmRelease kube-system/coredns @apps/kept/hr.yaml | \
             clusters/test/apps.yaml > apps/kept/hr.yaml",
            "error flux-manages-bootstrap-release kube-system/spegel | HelmRelease kube-system/spegel @apps/.github/hr.yaml | \
             clusters/test/apps.yaml > apps/.github/hr.yaml",
        ]
    );
}

#[test]
fn the_root_git_repositorys_spec_ignore_shapes_the_artifact() {
    // fluxcd/source-controller internal/controller/gitrepository_controller.go
    // (reconcileArtifact) appends spec.ignore after the defaults and the
    // .sourceignore files: `!/apps/.github/` re-includes cilium's HelmRelease
    // the default `.github/` leaves out; `/apps/drafts/` leaves out a spegel
    // HelmRelease, `/*` the directory `outside`.
    let scan = run("git-repository-ignore", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium @apps/.github/hr.yaml | \
             clusters/test/apps.yaml > apps/.github/hr.yaml",
            "error flux-manages-bootstrap-release kube-system/coredns | HelmRelease kube-system/coredns @apps/kept/hr.yaml | \
             clusters/test/apps.yaml > apps/kept/hr.yaml",
            "warning path-not-found - | Kustomization flux-system/outside @clusters/test/apps.yaml | clusters/test/apps.yaml",
        ]
    );
    assert!(
        scan.findings[2].message.contains("spec.ignore"),
        "{}",
        scan.findings[2].message
    );
}

#[test]
fn only_the_root_git_repository_is_followed() {
    let scan = run("other-source", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium @apps/hr.yaml | \
             clusters/test/apps.yaml > apps/hr.yaml",
            // Another GitRepository may hold HelmReleases (or be this
            // repository at another ref): a warning, not a note.
            "warning source-not-followed - | Kustomization flux-system/vendor @clusters/test/apps.yaml | clusters/test/apps.yaml",
        ]
    );
    assert!(scan.findings[1].message.contains("vendor-repo"));
}

#[test]
fn constructs_not_modelled_are_warnings_naming_file_and_construct() {
    let scan = run("not-modelled", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/coredns | HelmRelease kube-system/coredns @clusters/test/hr.yaml | \
             clusters/test/kustomization.yaml > clusters/test/hr.yaml",
            "warning flux-construct-not-modelled - | - | clusters/test/kustomization.yaml",
            "warning flux-construct-not-modelled - | - | clusters/test/kustomization.yaml",
            "warning flux-construct-not-modelled - | - | clusters/test/kustomization.yaml",
        ]
    );
    let messages: Vec<&str> = scan.findings[1..]
        .iter()
        .map(|f| f.message.as_str())
        .collect();
    for construct in ["`generators`", "`helmCharts`", "`vars`"] {
        assert!(
            messages
                .iter()
                .any(|m| m.contains(construct) && m.contains("clusters/test/kustomization.yaml")),
            "{construct}: {messages:?}"
        );
    }
}

#[test]
fn the_kustomization_reconciling_the_entrypoint_builds_it() {
    // gotk-sync's flux-system Kustomization (path ./clusters/test) has a
    // postBuild: APP_NS reaches apps' targetNamespace. Its missing component
    // is ignored (spec.ignoreMissingComponents), and the entrypoint is built
    // once.
    let scan = run("root-kustomization", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-manages-bootstrap-release kube-system/cilium | HelmRelease kube-system/cilium @apps/hr.yaml | \
             clusters/test/apps.yaml > apps/hr.yaml",
        ]
    );
    // GitRepository, two Kustomizations, the HelmRelease.
    assert_eq!(scan.objects_scanned, 4);
}

#[test]
fn a_name_substituted_to_a_number_is_its_own_id_and_the_apply_fails() {
    // kustomize's resmap reads `name: 3` (a number once substituted) as the
    // id `3`, not as the empty name of `${MISSING}`: Flux builds both, and
    // the apply refuses them (a name that is not a string, and an empty
    // one, are both empty to client-go).
    let scan = run("substitute-numeric-name", &bootstrap());
    assert_eq!(
        lines(&scan),
        [
            "error flux-apply-fails kube-system/cilium | HelmRelease kube-system/ @apps/hr.yaml | \
          clusters/test/apps.yaml > apps/hr.yaml"
        ]
    );
    assert!(
        scan.findings[0]
            .message
            .contains("resource name may not be empty"),
        "{}",
        scan.findings[0].message
    );
}
