use serde_json::{Value, json};

use super::*;
use crate::plan::Cluster;
use crate::release::{Chart, ChartSource, CrdPolicy, Release, Source};
use crate::values::stack::{Layer, Step, ValuesStack};

fn cilium(version: &str, values: Value) -> Release {
    let mut r = Release::fake("cilium", &[], CrdPolicy::Bootstrap);
    r.id = ReleaseId::new("kube-system", "cilium");
    r.source = Source::Chart(Chart {
        source: ChartSource::Repo {
            url: "https://helm.cilium.io".into(),
            name: "cilium".into(),
        },
        version: Some(version.into()),
    });
    r.stack = ValuesStack::of(values);
    r
}

pub(crate) fn plan(cluster: &str, releases: Vec<Release>) -> Plan {
    Plan::new(
        Cluster {
            name: cluster.into(),
            dir: format!("/x/clusters/{cluster}").into(),
            context: None,
            values: Default::default(),
            flux: None,
            guard: true,
            lints_ignore: Vec::new(),
        },
        "/x".into(),
        releases,
    )
}

fn codes(findings: &[Finding]) -> Vec<&'static str> {
    findings.iter().map(|f| f.code).collect()
}

fn one(values: Value) -> Vec<&'static str> {
    codes(&run(&plan("infra", vec![cilium("1.18.2", values)]), &[]))
}

#[test]
fn kpr_without_api_host() {
    let host =
        json!({"kubeProxyReplacement": true, "k8sServiceHost": "10.0.0.1", "k8sServicePort": 6443});
    assert_eq!(one(host), Vec::<&str>::new());
    assert_eq!(
        one(json!({"kubeProxyReplacement": true})),
        vec![cilium::KPR_WITHOUT_API_HOST]
    );
    assert_eq!(
        one(
            json!({"kubeProxyReplacement": "true", "k8sServiceHost": "10.0.0.1", "k8sServicePort": ""})
        ),
        vec![cilium::KPR_WITHOUT_API_HOST]
    );
    assert_eq!(
        one(json!({"kubeProxyReplacement": false})),
        Vec::<&str>::new()
    );
    let f = &run(
        &plan(
            "infra",
            vec![cilium("1.18.2", json!({"kubeProxyReplacement": true}))],
        ),
        &[],
    )[0];
    assert_eq!(f.severity, Severity::Error);
    assert_eq!(f.release.as_deref(), Some("kube-system/cilium"));
    assert!(
        f.message
            .contains("`k8sServiceHost` and `k8sServicePort` are not set"),
        "{}",
        f.message
    );
    assert!(f.written.as_ref().unwrap().fix.contains("k8sServiceHost"));
    // Without sources, the location is the release's own line.
    assert_eq!(
        f.written.as_ref().unwrap().file.as_deref(),
        Some(std::path::Path::new("releases/r.yaml"))
    );
    assert_eq!(f.written.as_ref().unwrap().line, Some(1));
}

#[test]
fn kpr_partial_only_on_charts_from_1_14() {
    let values =
        json!({"kubeProxyReplacement": "partial", "k8sServiceHost": "h", "k8sServicePort": 6443});
    assert_eq!(one(values.clone()), vec![cilium::KPR_PARTIAL]);
    let old = plan("infra", vec![cilium("1.13.4", values)]);
    assert_eq!(codes(&run(&old, &[])), Vec::<&str>::new());
    // `strict` is both: an old spelling, and without the API host a deadlock.
    assert_eq!(
        one(json!({"kubeProxyReplacement": "strict"})),
        vec![cilium::KPR_PARTIAL, cilium::KPR_WITHOUT_API_HOST]
    );
    let disabled = &run(
        &plan(
            "infra",
            vec![cilium(
                "v1.18.2",
                json!({"kubeProxyReplacement": "disabled"}),
            )],
        ),
        &[],
    )[0];
    assert_eq!(
        disabled.written.as_ref().unwrap().fix,
        "write `kubeProxyReplacement: false`"
    );
}

#[test]
fn crd_values_inverted() {
    let mut cm = Release::fake("cert-manager", &[], CrdPolicy::Bootstrap);
    cm.stack = ValuesStack::of(json!({"crds": {"enabled": true}}));
    assert_eq!(
        codes(&run(&plan("infra", vec![cm.clone()]), &[])),
        vec![crd_ownership::CRD_VALUES_INVERTED]
    );
    // The right way round: off for the install, on for the CRD render.
    cm.stack = ValuesStack::new(vec![
        Layer::new(
            Step::ReleaseValues,
            "release values".into(),
            json!({"crds": {"enabled": false}}),
        ),
        Layer::new(
            Step::CrdValues,
            "crdValues".into(),
            json!({"crds": {"enabled": true}}),
        ),
    ]);
    assert_eq!(
        codes(&run(&plan("infra", vec![cm.clone()]), &[])),
        Vec::<&str>::new()
    );
    // `crds: chart` leaves CRDs to Helm on purpose.
    let mut es = Release::fake("external-secrets", &[], CrdPolicy::Chart);
    es.stack = ValuesStack::of(json!({"installCRDs": true}));
    assert_eq!(
        codes(&run(&plan("infra", vec![es.clone()]), &[])),
        Vec::<&str>::new()
    );
    es.crds = CrdPolicy::Bootstrap;
    es.stack = ValuesStack::of(json!({"installCRDs": "true"}));
    assert_eq!(
        codes(&run(&plan("infra", vec![es]), &[])),
        vec![crd_ownership::CRD_VALUES_INVERTED]
    );
}

fn mesh(id: Value, name: &str, cidr: &str, ip: &str) -> Release {
    cilium(
        "1.18.2",
        json!({
            "cluster": {"id": id, "name": name},
            "ipv4NativeRoutingCIDR": cidr,
            "clustermesh": {"apiserver": {"service": {"annotations": {"io.cilium/lb-ipam-ips": ip}}}},
        }),
    )
}

fn fleet_codes(a: &Plan, b: &Plan) -> (Vec<&'static str>, Vec<&'static str>) {
    (codes(&run(a, &[a, b])), codes(&run(b, &[a, b])))
}

#[test]
fn fleet_rules_pass_on_distinct_clusters() {
    let infra = plan(
        "infra",
        vec![mesh(json!(1), "infra", "10.244.0.0/16", "10.25.11.100")],
    );
    let apps = plan(
        "apps",
        vec![mesh(json!(2), "apps", "10.246.0.0/16", "10.25.12.100")],
    );
    assert_eq!(fleet_codes(&infra, &apps), (vec![], vec![]));
    // A single cluster does not need a mesh identity.
    let alone = plan("infra", vec![cilium("1.18.2", json!({}))]);
    assert_eq!(codes(&run(&alone, &[&alone])), Vec::<&str>::new());
}

#[test]
fn fleet_rules_report_each_cluster_of_a_clash() {
    let infra = plan(
        "infra",
        vec![mesh(json!(1), "infra", "10.244.0.0/16", "10.25.11.100")],
    );
    let apps = plan(
        "apps",
        vec![mesh(json!("1"), "infra", "10.244.128.0/17", "10.25.11.100")],
    );
    let (a, b) = fleet_codes(&infra, &apps);
    assert_eq!(
        a,
        vec![
            mesh::CLUSTER_ID_DUPLICATE,
            mesh::LB_IPAM_IP_REUSED,
            mesh::NATIVE_ROUTING_CIDR_OVERLAP
        ]
    );
    assert_eq!(
        b,
        vec![
            mesh::CLUSTER_ID_DUPLICATE,
            mesh::CLUSTER_NAME_MISMATCH,
            mesh::LB_IPAM_IP_REUSED,
            mesh::NATIVE_ROUTING_CIDR_OVERLAP
        ]
    );
    let name = run(&apps, &[&infra, &apps])
        .into_iter()
        .find(|f| f.code == mesh::CLUSTER_NAME_MISMATCH)
        .unwrap();
    assert!(
        name.message.contains("the same as on `infra`"),
        "{}",
        name.message
    );
}

#[test]
fn cluster_id_range_and_extended_mesh() {
    let with = |id: Value, max: Option<u64>| {
        let mut r = mesh(id, "x", "10.1.0.0/16", "1.1.1.1");
        let mut values = r.values().clone();
        values["cluster"]["name"] = json!("infra");
        if let Some(max) = max {
            values["clustermesh"]["maxConnectedClusters"] = json!(max);
        }
        r.stack = ValuesStack::of(values);
        r
    };
    let apps = plan(
        "apps",
        vec![mesh(json!(2), "apps", "10.2.0.0/16", "2.2.2.2")],
    );
    let check = |r: Release| {
        let p = plan("infra", vec![r]);
        codes(&run(&p, &[&p, &apps]))
    };
    assert_eq!(check(with(json!(0), None)), vec![mesh::CLUSTER_ID_INVALID]);
    assert_eq!(
        check(with(json!(256), None)),
        vec![mesh::CLUSTER_ID_INVALID]
    );
    assert_eq!(check(with(json!(256), Some(511))), Vec::<&str>::new());
    assert_eq!(
        check(with(json!(512), Some(511))),
        vec![mesh::CLUSTER_ID_INVALID]
    );
    assert_eq!(check(with(json!(255), None)), Vec::<&str>::new());
}

#[test]
fn ignored_findings_do_not_block() {
    let mut p = plan(
        "infra",
        vec![cilium("1.18.2", json!({"kubeProxyReplacement": true}))],
    );
    assert!(run(&p, &[]).iter().any(Finding::blocks));
    p.cluster.lints_ignore = vec![crate::plan::Ignore::code(cilium::KPR_WITHOUT_API_HOST)];
    let findings = run(&p, &[]);
    assert!(!findings.iter().any(Finding::blocks));
    let ignored: Vec<&str> = findings
        .iter()
        .filter(|f| f.ignored)
        .map(|f| f.code)
        .collect();
    assert_eq!(ignored, vec![cilium::KPR_WITHOUT_API_HOST]);
    assert!(
        crate::finding::render_text(&findings)
            .starts_with("error[cilium-kpr-without-api-host] (ignored: listed in lints.ignore): ")
    );
}

#[test]
fn json_is_a_check_finding_with_location_and_fix() {
    let p = plan(
        "infra",
        vec![cilium("1.18.2", json!({"kubeProxyReplacement": true}))],
    );
    let v = serde_json::to_value(&run(&p, &[])[0]).unwrap();
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "chain", "code", "file", "fix", "ignored", "line", "message", "object", "release",
            "severity"
        ]
    );
    assert_eq!(v["object"], Value::Null);
    assert_eq!(v["severity"], "error");
}

/// Every code is documented: docs/design.md#lints and README.md's table.
#[test]
fn docs_name_every_code() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let design = std::fs::read_to_string(root.join("docs/design.md")).unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    for rule in RULES {
        let cell = format!("| `{}` |", rule.code);
        assert!(design.contains(&cell), "docs/design.md#lints lacks {cell}");
        assert!(
            readme.contains(&cell),
            "README.md's lint table lacks {cell}"
        );
    }
}

/// The real charts shared for tests (never copied into the project):
/// build.rs sets `cfg(shared_charts)` where they are.
fn shared_chart(name: &str) -> Release {
    let Some(charts) = option_env!("BOOTSTRAP_TEST_CHARTS_DIR") else {
        panic!("{SHARED_CHARTS}")
    };
    let dir = std::path::Path::new(charts).join(name);
    assert!(
        dir.join("Chart.yaml").is_file(),
        "{} missing",
        dir.display()
    );
    let mut r = Release::fake(name, &[], CrdPolicy::Bootstrap);
    r.source = Source::Chart(Chart {
        source: ChartSource::Path(dir),
        version: None,
    });
    r
}

/// Why a test that needs the real charts is ignored, and how to get them.
const SHARED_CHARTS: &str = "needs the real charts: ../shared/charts beside the repository, BOOTSTRAP_TEST_CHARTS=DIR (unpacked charts by name), or scripts/pull-test-charts";

#[test]
#[cfg_attr(
    not(shared_charts),
    ignore = "needs the real charts: ../shared/charts beside the repository, BOOTSTRAP_TEST_CHARTS=DIR (unpacked charts by name), or scripts/pull-test-charts"
)]
fn values_unknown_key_by_the_charts_schema() {
    let mut cm = shared_chart("cert-manager");
    cm.stack = ValuesStack::of(
        json!({"crds": {"enabled": false}, "global": {"leaderElection": {"namespace": "x"}}, "replicaCount": 2}),
    );
    assert_eq!(
        codes(&run(&plan("infra", vec![cm.clone()]), &[])),
        Vec::<&str>::new()
    );
    cm.stack = ValuesStack::of(json!({"crds": {"enabeld": false}, "replicaCont": 2}));
    let findings = run(&plan("infra", vec![cm]), &[]);
    assert_eq!(
        codes(&findings),
        vec![chart::VALUES_UNKNOWN_KEY, chart::VALUES_UNKNOWN_KEY]
    );
    assert_eq!(findings[0].severity, Severity::Warning);
    let messages: Vec<&str> = findings.iter().map(|f| f.message.as_str()).collect();
    assert!(messages[0].starts_with("values key `crds.enabeld` is not one chart `cert-manager` knows; did you mean `enabled`?"), "{messages:?}");
    assert!(messages[1].starts_with("values key `replicaCont` is not one chart `cert-manager` knows; did you mean `replicaCount`?"), "{messages:?}");
}

#[test]
#[cfg_attr(
    not(shared_charts),
    ignore = "needs the real charts: ../shared/charts beside the repository, BOOTSTRAP_TEST_CHARTS=DIR (unpacked charts by name), or scripts/pull-test-charts"
)]
fn values_unknown_key_without_a_schema_uses_the_default_values() {
    let mut coredns = shared_chart("coredns");
    coredns.stack = ValuesStack::of(json!({"replicaCount": 2, "servers": [], "zoneFiles": []}));
    assert_eq!(
        codes(&run(&plan("infra", vec![coredns.clone()]), &[])),
        Vec::<&str>::new()
    );
    coredns.stack = ValuesStack::of(json!({"replicaCont": 2, "service": {"anything": 1}}));
    // Only top-level keys: below them the defaults do not say what is allowed.
    assert_eq!(
        codes(&run(&plan("infra", vec![coredns]), &[])),
        vec![chart::VALUES_UNKNOWN_KEY]
    );
    // A chart from a repository is not on disk: nothing to check against.
    let mut remote = Release::fake("coredns", &[], CrdPolicy::Bootstrap);
    remote.stack = ValuesStack::of(json!({"replicaCont": 2}));
    assert_eq!(
        codes(&run(&plan("infra", vec![remote]), &[])),
        Vec::<&str>::new()
    );
}

#[test]
fn needs_missing_for_kind() {
    let mut es = Release::fake("external-secrets", &[], CrdPolicy::Bootstrap);
    es.stack = ValuesStack::of(json!({"serviceMonitor": {"enabled": true}}));
    // No release provides ServiceMonitor at all.
    let findings = run(&plan("infra", vec![es.clone()]), &[]);
    assert_eq!(codes(&findings), vec![kinds::NEEDS_MISSING_FOR_KIND]);
    assert_eq!(findings[0].severity, Severity::Warning);
    assert!(
        findings[0]
            .written
            .as_ref()
            .unwrap()
            .fix
            .contains("`prometheus-operator-crds`"),
        "{}",
        findings[0].written.as_ref().unwrap().fix
    );
    // From the CRD phase: always there before any release.
    let crds = Release::fake("prometheus-operator-crds", &[], CrdPolicy::Only);
    assert_eq!(
        codes(&run(&plan("infra", vec![es.clone(), crds]), &[])),
        Vec::<&str>::new()
    );
    // From a release that installs its CRDs itself: only fine when needed.
    let stack = Release::fake("kube-prometheus-stack", &[], CrdPolicy::Chart);
    let findings = run(&plan("infra", vec![es.clone(), stack.clone()]), &[]);
    assert_eq!(codes(&findings), vec![kinds::NEEDS_MISSING_FOR_KIND]);
    assert!(
        findings[0]
            .message
            .contains("comes from release ns/kube-prometheus-stack"),
        "{}",
        findings[0].message
    );
    assert_eq!(
        findings[0].written.as_ref().unwrap().fix,
        "add `ns/kube-prometheus-stack` to `needs`, or give it `crds: bootstrap`"
    );
    es.needs = vec![stack.id.clone()];
    assert_eq!(
        codes(&run(&plan("infra", vec![es, stack]), &[])),
        Vec::<&str>::new()
    );
}

fn kpr_cilium(extra: Value) -> Release {
    let mut values = json!({"kubeProxyReplacement": true, "k8sServiceHost": "10.0.0.1", "k8sServicePort": 6443, "ipv4NativeRoutingCIDR": "10.244.0.0/16"});
    if let (Some(v), Some(e)) = (values.as_object_mut(), extra.as_object()) {
        v.extend(e.clone());
    }
    cilium("1.18.2", values)
}

fn live_codes(release: Release, state: &live::LiveState) -> Vec<&'static str> {
    codes(&run_live(&plan("infra", vec![release]), state))
}

#[test]
fn native_routing_cidr_mismatch() {
    let nodes = |cidrs: &[&str]| live::LiveState {
        nodes: cidrs
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("node-{i}"), vec![c.to_string(), "fd00::/64".into()]))
            .collect(),
        ..Default::default()
    };
    let inside = nodes(&["10.244.0.0/24", "10.244.1.0/24"]);
    assert_eq!(
        live_codes(kpr_cilium(json!({})), &inside),
        Vec::<&str>::new()
    );
    let outside = nodes(&["10.244.0.0/24", "10.245.1.0/24"]);
    let findings = run_live(&plan("infra", vec![kpr_cilium(json!({}))]), &outside);
    assert_eq!(codes(&findings), vec![live::NATIVE_ROUTING_CIDR_MISMATCH]);
    assert_eq!(findings[0].severity, Severity::Error);
    assert!(
        findings[0].message.contains("node-1 (10.245.1.0/24)"),
        "{}",
        findings[0].message
    );
    assert!(
        !findings[0].message.contains("node-0"),
        "{}",
        findings[0].message
    );
    // Offline runs never report live rules.
    assert_eq!(
        codes(&run(&plan("infra", vec![kpr_cilium(json!({}))]), &[])),
        Vec::<&str>::new()
    );
}

#[test]
fn kube_proxy_and_api_host() {
    let state = live::LiveState {
        kube_proxy: true,
        api_probe: Some((
            "10.0.0.1:6443".into(),
            Some(live::TlsProbeError::Timeout(
                std::time::Duration::from_secs(3),
            )),
        )),
        ..Default::default()
    };
    assert_eq!(
        live_codes(kpr_cilium(json!({})), &state),
        vec![
            live::API_HOST_UNREACHABLE,
            live::KUBE_PROXY_PRESENT_WITH_KPR
        ]
    );
    let findings = run_live(&plan("infra", vec![kpr_cilium(json!({}))]), &state);
    assert!(findings.iter().all(|f| f.severity == Severity::Warning));
    assert!(
        findings[0].message.contains(
            "(10.0.0.1:6443) does not answer TLS from where bootstrap runs (no answer within 3s)"
        ),
        "{}",
        findings[0].message
    );
    // Without kube-proxy replacement neither matters.
    assert_eq!(
        live_codes(kpr_cilium(json!({"kubeProxyReplacement": false})), &state),
        Vec::<&str>::new()
    );
    let p = plan(
        "infra",
        vec![kpr_cilium(json!({"k8sServiceHost": "fd00::1"}))],
    );
    assert_eq!(live::api_target(&p).as_deref(), Some("[fd00::1]:6443"));
}

#[tokio::test]
async fn the_tls_probe_tells_tls_from_anything_else() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    async fn server(answer: &'static [u8]) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut hello = [0u8; 52];
            s.read_exact(&mut hello).await.unwrap();
            assert_eq!(hello[0], 0x16);
            s.write_all(answer).await.unwrap();
        });
        addr
    }
    let timeout = std::time::Duration::from_secs(2);
    let tls = server(&[0x16, 0x03, 0x03, 0x00, 0x02]).await;
    assert_eq!(live::probe_tls(&tls, timeout).await, Ok(()));
    let alert = server(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28]).await;
    assert_eq!(live::probe_tls(&alert, timeout).await, Ok(()));
    let http = server(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
    assert_eq!(
        live::probe_tls(&http, timeout).await,
        Err(live::TlsProbeError::NotTls)
    );
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    assert!(matches!(
        live::probe_tls(&closed, timeout).await,
        Err(live::TlsProbeError::Connect(_))
    ));
}
