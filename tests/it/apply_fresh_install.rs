//! `apply` never asks Helm about one release at a time: the preflight `helm
//! list` (every state, with chart and version) is what each step compares
//! with, so a release costs one helm process when it changes and none when
//! it does not.

use serde_json::json;
use testkit::builder::Test;
use testkit::cluster::Cluster;

const RELEASES: &str = "name: cilium
namespace: kube-system
chart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }
crds: chart
---
name: coredns
namespace: kube-system
chart: { repo: https://coredns.github.io/helm, name: coredns, version: 1.44.3 }
crds: chart
needs: [cilium]
";

fn statuses(cluster: &Cluster) -> usize {
    cluster
        .helm_calls()
        .iter()
        .filter(|c| c.argv[0] == "history")
        .count()
}

#[test]
fn releases_helm_does_not_list_are_installed_without_helm_status() {
    let cluster = Cluster::start();
    cluster.script(json!({"*": {"delay_ms": 0}}));
    let test = Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            "name: infra\ncontext: admin@infra\n",
        )
        .file("releases/core.yaml", RELEASES);

    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(cluster.installs().len(), 2);
    assert_eq!(statuses(&cluster), 0, "{:?}", cluster.helm_calls());

    // Now Helm lists both, with their charts and versions: each is compared
    // with what `helm list` said, found current, and left alone; no release
    // asks helm about itself again.
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(statuses(&cluster), 0);
    assert_eq!(cluster.installs().len(), 2, "nothing was upgraded");
}
