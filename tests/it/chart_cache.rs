//! The chart cache (docs/design.md#chart-cache): every remote chart is
//! pulled once per run, in parallel at preflight, into a content-addressed
//! cache reused by later runs; install and template name the local archive.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use testkit::builder::Test;
use testkit::cluster::{CLUSTER, Cluster, HelmCall, RELEASES, crd, daemonset};

/// The fake cluster's workloads, so the readiness hooks pass.
fn cluster() -> Cluster {
    let cluster = Cluster::start();
    cluster.script(json!({
        "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
        "cert-manager/cert-manager": {"crds": [crd("cert-manager.io", "certificates", "Certificate")]},
    }));
    cluster
}

fn config() -> Test {
    Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file("releases/core.yaml", RELEASES)
}

fn pulls(cluster: &Cluster) -> Vec<HelmCall> {
    cluster
        .helm_calls()
        .into_iter()
        .filter(|c| c.argv[0] == "pull")
        .collect()
}

/// The chart positional of `upgrade --install NAME CHART ...` or
/// `template NAME CHART ...`.
fn chart_arg(call: &HelmCall) -> PathBuf {
    // After `--`: the release name, the chart.
    PathBuf::from(&call.positionals()[1])
}

fn archives(cache: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(cache.join("sha256"))
        .map(|dir| dir.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    found.sort();
    found
}

/// The archive the cache index records for `chart`.
fn archive_of(cache: &Path, chart: &str) -> PathBuf {
    for entry in std::fs::read_dir(cache.join("index")).unwrap() {
        let entry: Value =
            serde_json::from_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap()).unwrap();
        if entry["chart"] == chart {
            let sha = entry["sha256"].as_str().unwrap();
            return cache.join("sha256").join(format!("{sha}.tgz"));
        }
    }
    panic!("no cache entry for {chart}");
}

#[test]
fn each_chart_is_pulled_once_and_a_second_run_pulls_none() {
    let cluster = cluster();
    let test = config();
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);

    // Four remote charts, four pulls, one archive each in the cache.
    let mut pulled: Vec<String> = pulls(&cluster)
        .iter()
        .map(|c| c.positionals()[0].clone())
        .collect();
    pulled.sort();
    assert_eq!(
        pulled,
        [
            "cert-manager",
            "cilium",
            "coredns",
            "oci://ghcr.io/spegel-org/helm-charts/spegel"
        ]
    );
    assert_eq!(archives(test.cache_dir()).len(), 4);

    // Install and the CRD phase's template name the cached archive, never
    // the repository.
    let uses: Vec<HelmCall> = cluster
        .helm_calls()
        .into_iter()
        .filter(|c| c.argv[0] == "upgrade" || c.argv[0] == "template")
        .collect();
    assert_eq!(uses.len(), 8, "4 CRD-phase renders and 4 installs");
    for call in &uses {
        assert!(!call.has("--repo"), "{:?}", call.argv);
        let chart = chart_arg(call);
        assert!(
            chart.starts_with(test.cache_dir().join("sha256")),
            "{:?}",
            call.argv
        );
        assert!(chart.is_file());
    }
    let cilium = cluster
        .installs()
        .into_iter()
        .find(|c| c.release() == Some("cilium"))
        .unwrap();
    assert_eq!(chart_arg(&cilium), archive_of(test.cache_dir(), "cilium"));
    // helm recorded the chart and version the archive holds.
    let state = cluster.release_state("kube-system", "cilium").unwrap();
    assert_eq!(
        (state["chart"].as_str(), state["version"].as_str()),
        (Some("cilium"), Some("1.18.2"))
    );

    // The next run finds every chart in the cache: no pull at all.
    let before = cluster.helm_calls().len();
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let again: Vec<HelmCall> = cluster.helm_calls().split_off(before);
    assert!(
        again.iter().all(|c| c.argv[0] != "pull"),
        "{:?}",
        again.iter().map(|c| c.command()).collect::<Vec<_>>()
    );
    assert_eq!(archives(test.cache_dir()).len(), 4);
}

#[test]
fn an_archive_that_does_not_match_its_digest_is_pulled_again_with_a_warning() {
    let cluster = cluster();
    let test = config();
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let spegel = archive_of(test.cache_dir(), "spegel");
    std::fs::write(&spegel, b"not the archive that was pulled").unwrap();

    let before = pulls(&cluster).len();
    let out = cluster.run(&test, &["apply", "infra", "--force"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let again = pulls(&cluster).split_off(before);
    assert_eq!(again.len(), 1, "only the damaged chart");
    assert_eq!(
        again[0].positionals()[0],
        "oci://ghcr.io/spegel-org/helm-charts/spegel"
    );
    assert!(
        out.stdout.contains("does not match its digest")
            && out.stdout.contains("pulling spegel 0.4.0 again"),
        "{}",
        out.stdout
    );
    // The damaged bytes were never handed to helm: the install used the
    // archive pulled again, whose content matches its name.
    let install = cluster
        .installs()
        .into_iter()
        .rev()
        .find(|c| c.release() == Some("spegel"))
        .unwrap();
    let used = std::fs::read(chart_arg(&install)).unwrap();
    assert_ne!(used, b"not the archive that was pulled");
    assert_eq!(chart_arg(&install), archive_of(test.cache_dir(), "spegel"));
}

#[test]
fn pulls_run_at_once_and_each_install_waits_only_for_its_chart() {
    let cluster = cluster();
    let test = config().env("FAKE_HELM_PULL_DELAY_MS", "600");
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let pulls = pulls(&cluster);
    assert_eq!(pulls.len(), 4);
    let last_start = pulls.iter().map(|c| c.start_ms).max().unwrap();
    let first_end = pulls.iter().map(|c| c.end_ms).min().unwrap();
    assert!(
        last_start < first_end,
        "every pull started before the first ended: {:?}",
        pulls
            .iter()
            .map(|c| (c.start_ms, c.end_ms))
            .collect::<Vec<_>>()
    );
    // With the archive local, no install pays for a download.
    for install in cluster.installs() {
        assert!(
            install.end_ms - install.start_ms < 600,
            "{:?}",
            install.argv
        );
    }
}

#[test]
fn cache_dir_flag_and_no_chart_cache() {
    let cluster = cluster();
    let test = config();
    let elsewhere = tempfile::tempdir().unwrap();
    let dir = elsewhere.path().join("charts");
    let out = cluster.run(
        &test,
        &["apply", "infra", "--cache-dir", dir.to_str().unwrap()],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(archives(&dir).len(), 4);
    assert!(
        archives(test.cache_dir()).is_empty(),
        "BOOTSTRAP_CACHE_DIR lost to --cache-dir"
    );

    // Without the cache helm is given the repository, as before.
    let before = cluster.helm_calls().len();
    let out = cluster.run(&test, &["apply", "infra", "--force", "--no-chart-cache"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let calls = cluster.helm_calls().split_off(before);
    assert!(calls.iter().all(|c| c.argv[0] != "pull"));
    let cilium = calls
        .iter()
        .find(|c| c.release() == Some("cilium"))
        .unwrap();
    assert_eq!(cilium.flag("--repo"), Some("https://helm.cilium.io"));
}

#[test]
fn local_charts_are_used_in_place_and_credentials_never_reach_a_pull() {
    let cluster = cluster();
    let test = Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file("charts/local/Chart.yaml", "apiVersion: v2\nname: local\nversion: 0.1.0\n")
        .file(
            "releases/core.yaml",
            "name: local\nnamespace: apps\nchart: { path: ../charts/local }\n---\n\
             name: private\nnamespace: apps\n\
             chart: { repo: 'https://robot:s3cr3t-t0ken@charts.example.com/stable', name: demo, version: 1.2.3 }\n",
        );
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let calls = cluster.helm_calls();
    for call in &calls {
        assert!(
            !call.argv.iter().any(|a| a.contains("s3cr3t")),
            "{:?}",
            call.argv
        );
    }
    let pulls = pulls(&cluster);
    assert_eq!(pulls.len(), 1, "the local chart is not pulled");
    assert!(
        pulls[0].positionals()[0].starts_with("bootstrap-")
            && pulls[0].positionals()[0].ends_with("/demo")
    );
    assert!(pulls[0].has("--repository-config"));
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.argv[..2] == ["repo", "add"])
            .count(),
        1
    );
    let local = cluster
        .installs()
        .into_iter()
        .find(|c| c.release() == Some("local"))
        .unwrap();
    assert_eq!(
        chart_arg(&local).canonicalize().unwrap(),
        test.path().join("charts/local").canonicalize().unwrap()
    );
    let private = cluster
        .installs()
        .into_iter()
        .find(|c| c.release() == Some("private"))
        .unwrap();
    assert!(chart_arg(&private).starts_with(test.cache_dir()));
    // The index holds the repository without its credentials.
    for entry in std::fs::read_dir(test.cache_dir().join("index")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(!text.contains("s3cr3t"), "{text}");
        assert!(text.contains("https://charts.example.com/stable"), "{text}");
    }
}

#[test]
fn template_manifests_render_from_the_cache() {
    let cluster = cluster();
    let test = config();
    let out = cluster.run(&test, &["template", "infra", "coredns", "--manifests"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let coredns = cluster
        .helm_calls()
        .into_iter()
        .find(|c| c.argv[0] == "template" && c.positionals()[0] == "coredns")
        .unwrap();
    assert_eq!(chart_arg(&coredns), archive_of(test.cache_dir(), "coredns"));
}
