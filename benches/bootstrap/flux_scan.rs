//! The `check` scan on a Flux tree shaped like a large GitOps repository:
//! Flux Kustomizations with `targetNamespace`, `namePrefix`, `patches` and
//! `postBuild.substituteFrom`, each building a kustomization with a
//! replacement and its HelmReleases. In-process (`bootstrap::flux::scan`),
//! so the figure is the scan's alone.

use std::path::Path;
use std::time::Instant;

use bootstrap::flux::{BootstrapRelease, ScanInput, scan};

use super::stats::{median, ms};
use super::{Mode, verdict};

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// `kustomizations` Flux Kustomizations of `per` HelmReleases each.
fn tree(root: &Path, kustomizations: usize, per: usize) {
    write(
        root,
        "clusters/bench/settings.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-settings\n  namespace: flux-system\ndata:\n  CLUSTER: bench\n",
    );
    for k in 0..kustomizations {
        write(
            root,
            &format!("clusters/bench/ks-{k}.yaml"),
            &format!(
                "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: ks-{k}\n  namespace: flux-system\n\
                 spec:\n  interval: 1h\n  path: ./apps/app-{k}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n\
                 \x20 targetNamespace: ns-{k}\n  namePrefix: p-\n  patches:\n    - target:\n        kind: HelmRelease\n      patch: |\n\
                 \x20       - op: add\n          path: /spec/timeout\n          value: 5m\n\
                 \x20 postBuild:\n    substituteFrom:\n      - kind: ConfigMap\n        name: cluster-settings\n"
            ),
        );
        let mut kustomization = String::from(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n",
        );
        for h in 0..per {
            kustomization.push_str(&format!("  - hr-{h}.yaml\n"));
            write(
                root,
                &format!("apps/app-{k}/hr-{h}.yaml"),
                &format!(
                    "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: app-{h}-${{CLUSTER}}\n\
                     spec:\n  interval: 10m\n  chart:\n    spec:\n      chart: app\n      sourceRef: {{ kind: HelmRepository, name: apps }}\n"
                ),
            );
        }
        kustomization.push_str(
            "replacements:\n  - source:\n      kind: HelmRelease\n      name: app-0-${CLUSTER}\n      fieldPath: metadata.name\n    targets:\n\
             \x20     - select:\n          kind: HelmRelease\n        fieldPaths:\n          - spec.chart.spec.sourceRef.namespace\n        options:\n          create: true\n",
        );
        write(
            root,
            &format!("apps/app-{k}/kustomization.yaml"),
            &kustomization,
        );
    }
}

pub fn run(mode: Mode) {
    let (kustomizations, per) = if mode.quick { (10, 10) } else { (100, 50) };
    let runs = mode.runs(5);
    let dir = tempfile::tempdir().expect("tempdir");
    tree(dir.path(), kustomizations, per);
    let releases = vec![BootstrapRelease {
        name: "cilium".into(),
        namespace: "kube-system".into(),
        chart: Some("cilium".into()),
        workloads: vec![],
        rendered: None,
        handover: None,
    }];
    let mut times = Vec::new();
    let mut objects = 0;
    for _ in 0..runs {
        let start = Instant::now();
        let result = scan(&ScanInput {
            root: dir.path(),
            entrypoint: Path::new("clusters/bench"),
            releases: &releases,
        });
        times.push(ms(start.elapsed()));
        objects = result.objects_scanned;
        assert!(!result.has_errors(), "the generated tree has no conflicts");
    }
    let helm_releases = kustomizations * per;
    let took = median(&times);
    println!(
        "flux scan: {helm_releases} HelmReleases across {kustomizations} Flux Kustomizations (targetNamespace, namePrefix, patches, postBuild, replacements): {objects} objects, {took:.1} ms (median of {runs})"
    );
    if !mode.quick {
        verdict(
            "check 5,000 HelmReleases / 100 Kustomizations < 1 s",
            took < 1000.0,
            format!("{took:.1} ms"),
        );
    }
    println!();
}

/// `bootstrap check` as a process on a tree whose Flux Kustomization
/// health-checks workloads of a bootstrap release with a local chart: the
/// cost of learning them from the chart render (fake helm, no render
/// delay), of finding helm absent (name-convention inference), and of a
/// tree without health checks (nothing rendered).
pub fn check_render(mode: Mode) {
    let runs = mode.runs(9);
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "clusters/infra/cluster.yaml", "name: infra\n");
    write(
        root,
        "releases/core.yaml",
        "name: webhooks\nnamespace: certs\nchart: { path: ./webhooks }\n",
    );
    write(
        root,
        "releases/webhooks/Chart.yaml",
        "name: webhooks\nversion: 1.0.0\n",
    );
    write(
        root,
        "gitops/clusters/infra/kustomization.yaml",
        "resources: [ks.yaml]\n",
    );
    write(root, "gitops/apps/kustomization.yaml", "resources: []\n");
    let ks = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: { name: certs, namespace: flux-system }\n\
              spec:\n  interval: 10m\n  path: ./apps\n  prune: true\n  sourceRef: { kind: GitRepository, name: flux-system }\n";
    let checks = "  healthChecks:\n    - { apiVersion: apps/v1, kind: Deployment, name: webhooks-webhook, namespace: certs }\n";
    write(
        root,
        "script.json",
        r#"{"certs/webhooks": {"manifests": [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "webhooks-webhook"}}]}}"#,
    );
    let time = |helm: &str| {
        let mut times = Vec::new();
        for _ in 0..runs {
            let start = Instant::now();
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_bootstrap"))
                .args([
                    "check",
                    "infra",
                    "--flux-root",
                    "gitops",
                    "--flux-entrypoint",
                    "clusters/infra",
                ])
                .arg("--dir")
                .arg(root)
                .args(["--helm", helm])
                .env("FAKE_HELM_SCRIPT", root.join("script.json"))
                .env("NO_COLOR", "1")
                .output()
                .expect("run bootstrap check");
            times.push(ms(start.elapsed()));
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        median(&times)
    };
    write(
        root,
        "gitops/clusters/infra/ks.yaml",
        &format!("{ks}{checks}"),
    );
    let rendered = time(testkit::fake_helm());
    let absent = time("/nonexistent/helm");
    write(root, "gitops/clusters/infra/ks.yaml", ks);
    let unchecked = time("/nonexistent/helm");
    println!(
        "check with a health check on a local-chart release's workload: {rendered:.1} ms rendering it (fake helm), \
         {absent:.1} ms with helm absent (inferred), {unchecked:.1} ms without health checks (median of {runs})"
    );
    println!();
}
