use std::time::Duration;

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
    let selected = plan().select(&["coredns".into()], true).unwrap();
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
        .select(&["spegel".into(), "cert-manager".into()], true)
        .unwrap();
    assert!(left_behind(&full, &leaves).is_empty());
}

#[tokio::test(start_paused = true)]
async fn work_finishes_when_nobody_stops_it() {
    let (_tx, stop) = tokio::sync::watch::channel(Stop::Run);
    let work = async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        7
    };
    assert_eq!(until_stopped(work, stop, || {}).await, Some(7));
}

#[tokio::test(start_paused = true)]
async fn a_first_interrupt_leaves_the_grace_period_a_second_stops_at_once() {
    let (tx, stop) = tokio::sync::watch::channel(Stop::Run);
    tx.send(Stop::Graceful).unwrap();
    let mut announced = 0;
    let short = async {
        tokio::time::sleep(GRACE - Duration::from_secs(1)).await;
        "done"
    };
    assert_eq!(
        until_stopped(short, stop.clone(), || {}).await,
        Some("done")
    );

    let long = async {
        tokio::time::sleep(GRACE + Duration::from_secs(1)).await;
        "done"
    };
    let started = Instant::now();
    assert_eq!(
        until_stopped(long, stop.clone(), || announced += 1).await,
        None
    );
    assert_eq!(started.elapsed(), GRACE);
    assert_eq!(announced, 1, "the grace period is announced once");

    let (tx, stop) = tokio::sync::watch::channel(Stop::Run);
    let endless = std::future::pending::<()>();
    let stopper = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        tx.send(Stop::Now).unwrap();
    };
    let started = Instant::now();
    let (stopped, ()) = tokio::join!(until_stopped(endless, stop, || {}), stopper);
    assert_eq!(stopped, None);
    assert_eq!(started.elapsed(), Duration::from_secs(1));
}
