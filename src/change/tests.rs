use serde_json::json;

use super::*;
use crate::release::{Chart, ChartSource, CrdPolicy, Source};

fn release(version: &str, values: Value) -> Release {
    Release {
        id: ReleaseId::new("kube-system", "cilium"),
        file: "releases/core.yaml".into(),
        source: Source::Chart(Chart {
            source: ChartSource::Repo {
                url: "https://helm.cilium.io".into(),
                name: "cilium".into(),
            },
            version: Some(version.into()),
        }),
        stack: crate::values::stack::ValuesStack::of(values),
        ..Release::fake("cilium", &[], CrdPolicy::Bootstrap)
    }
}

fn deployed(version: &str) -> DeployedRelease {
    DeployedRelease {
        id: ReleaseId::new("kube-system", "cilium"),
        revision: 3,
        status: "deployed".into(),
        chart: "cilium".into(),
        version: version.into(),
        app_version: version.into(),
        updated: None,
    }
}

fn ds(image: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
           "metadata": {"name": "cilium", "namespace": "kube-system"},
           "spec": {"template": {"spec": {"containers": [{"name": "agent", "image": image}]}}}})
}

fn cm(port: u64) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "cilium-config", "namespace": "kube-system"},
           "data": {"k8s-service-port": port.to_string()}})
}

#[test]
fn same_chart_values_and_objects_is_unchanged() {
    let r = release("1.18.2", json!({"k8sServicePort": 6443}));
    let d = deployed("1.18.2");
    let manifest = [ds("v1.18.2"), cm(6443)];
    let change = ReleaseChange::new(
        &r,
        Some(Deployed {
            release: &d,
            values: &json!({"k8sServicePort": 6443}),
            manifest: &manifest,
        }),
        &manifest,
        vec![],
    );
    assert_eq!(change.change, Kind::Unchanged);
    assert_eq!(change.summary_line(), "  kube-system/cilium: unchanged");
}

#[test]
fn an_upgrade_says_version_values_and_objects() {
    let r = release(
        "1.18.2",
        json!({"k8sServicePort": 7445, "hubble": {"relay": {"enabled": true}}}),
    );
    let d = deployed("1.18.1");
    let change = ReleaseChange::new(
        &r,
        Some(Deployed {
            release: &d,
            values: &json!({"k8sServicePort": 6443}),
            manifest: &[ds("v1.18.1"), cm(6443)],
        }),
        &[ds("v1.18.2"), cm(7445)],
        vec![],
    );
    assert_eq!(change.change, Kind::Upgrade);
    assert_eq!(
        change.summary_line(),
        "~ kube-system/cilium: cilium 1.18.1 → 1.18.2, 2 values changed, 2 objects changed"
    );
}

#[test]
fn a_release_not_installed_is_an_install_of_every_object() {
    let r = release("1.18.2", json!({"k8sServicePort": 7445}));
    let change = ReleaseChange::new(&r, None, &[ds("v1.18.2"), cm(7445)], vec![]);
    assert_eq!(change.change, Kind::Install);
    assert_eq!(
        change.summary_line(),
        "+ kube-system/cilium: install cilium 1.18.2, 1 value, 2 objects"
    );
    assert!(change.objects.iter().all(|o| o.op == Op::Add));
    assert_eq!(change.values[0].line(), "+ k8sServicePort: 7445");
}

#[test]
fn other_reasons_alone_make_an_upgrade() {
    let r = release("1.18.2", json!({}));
    let d = deployed("1.18.2");
    let change = ReleaseChange::new(
        &r,
        Some(Deployed {
            release: &d,
            values: &json!({}),
            manifest: &[],
        }),
        &[],
        vec!["not recorded in the ownership ledger".into()],
    );
    assert_eq!(
        change.summary_line(),
        "~ kube-system/cilium: not recorded in the ownership ledger"
    );
}

fn tls(cert: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": "hubble-server-certs", "namespace": "kube-system"},
           "data": {"tls.crt": cert}})
}

/// The same values rendered again: the certificate a chart generates
/// differs, the rest does not.
fn compared(deployed_manifest: &[Value], rendered: &[Value], again: &[Value]) -> ReleaseChange {
    let r = release("1.18.2", json!({"k8sServicePort": 6443}));
    let d = deployed("1.18.2");
    let mut change = ReleaseChange::new(
        &r,
        Some(Deployed {
            release: &d,
            values: &json!({"k8sServicePort": 6443}),
            manifest: deployed_manifest,
        }),
        rendered,
        vec![],
    );
    if change.only_objects_differ() {
        change.set_aside_regenerated(&manifests::diff(rendered, again, &[]));
    }
    change
}

#[test]
fn objects_a_chart_generates_anew_alone_are_no_change() {
    let change = compared(
        &[ds("v1.18.2"), tls("b2xk")],
        &[ds("v1.18.2"), tls("bmV3")],
        &[ds("v1.18.2"), tls("YWdhaW4=")],
    );
    assert_eq!(change.change, Kind::Unchanged);
    assert_eq!(change.objects, Vec::new());
    assert_eq!(
        change.regenerated,
        vec!["Secret kube-system/hubble-server-certs".to_string()]
    );
    assert_eq!(
        change.summary_line(),
        "  kube-system/cilium: unchanged (1 object the chart renders anew each time, not compared)"
    );
}

#[test]
fn a_stable_object_that_differs_keeps_the_upgrade_whole() {
    // cilium-config differs in both renders alike: a real difference (a
    // cluster capability, a lookup), so the regenerated Secret stays listed.
    let change = compared(
        &[cm(6443), tls("b2xk")],
        &[cm(7445), tls("bmV3")],
        &[cm(7445), tls("YWdhaW4=")],
    );
    assert_eq!(change.change, Kind::Upgrade);
    assert_eq!(change.objects.len(), 2);
    assert_eq!(change.regenerated, Vec::<String>::new());
}

#[test]
fn a_values_change_is_never_rendered_twice() {
    let r = release("1.18.2", json!({"k8sServicePort": 7445}));
    let d = deployed("1.18.2");
    let change = ReleaseChange::new(
        &r,
        Some(Deployed {
            release: &d,
            values: &json!({"k8sServicePort": 6443}),
            manifest: &[tls("b2xk")],
        }),
        &[tls("bmV3")],
        vec![],
    );
    assert!(!change.only_objects_differ());
}
