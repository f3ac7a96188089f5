use super::*;
use crate::config::Cluster;
use crate::release::CrdPolicy;

fn release(name: &str, needs: &[&str], crds: CrdPolicy) -> Release {
    Release::fake(name, needs, crds)
}

/// cilium -> coredns -> {cert-manager, spegel}; crds-only is never installed.
fn plan() -> Plan {
    let cluster = Cluster {
        name: "infra".into(),
        dir: "/x/clusters/infra".into(),
        context: None,
        values: Default::default(),
        flux: None,
        guard: false,
        lints_ignore: Vec::new(),
    };
    Plan::new(
        cluster,
        "/x".into(),
        vec![
            release("spegel", &["coredns"], CrdPolicy::Bootstrap),
            release("cert-manager", &["coredns"], CrdPolicy::Bootstrap),
            release("crds-only", &[], CrdPolicy::Only),
            release("coredns", &["cilium"], CrdPolicy::Bootstrap),
            release("cilium", &[], CrdPolicy::Bootstrap),
        ],
    )
}

fn names(releases: &[&Release]) -> Vec<String> {
    releases.iter().map(|r| r.id.name.clone()).collect()
}

#[test]
fn every_release_comes_before_what_it_needs_and_crd_only_releases_are_left_out() {
    let plan = plan();
    let order = names(&order(&plan));
    assert_eq!(order.len(), 4, "{order:?}");
    let at = |n: &str| order.iter().position(|o| o == n).unwrap();
    assert!(at("spegel") < at("coredns"));
    assert!(at("cert-manager") < at("coredns"));
    assert!(at("coredns") < at("cilium"));
}

#[test]
fn only_names_the_installed_dependents_it_leaves_behind() {
    let full = plan();
    let selected = plan().select(&["coredns".into()], &[], true).unwrap();
    let mut behind = left_behind(&full, &selected);
    behind.sort();
    assert_eq!(
        behind,
        vec![
            (
                ReleaseId::new("ns", "cert-manager"),
                ReleaseId::new("ns", "coredns")
            ),
            (
                ReleaseId::new("ns", "spegel"),
                ReleaseId::new("ns", "coredns")
            ),
        ]
    );
    let leaves = plan()
        .select(&["spegel".into(), "cert-manager".into()], &[], true)
        .unwrap();
    assert!(left_behind(&full, &leaves).is_empty());
}
