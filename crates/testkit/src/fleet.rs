//! Several clusters behind one `bootstrap` process (docs/fleet.md): one
//! loopback API server per cluster, one kubeconfig with a context
//! `admin@<cluster>` for each, and one fake helm whose release state is kept
//! per kube context.

use std::path::{Path, PathBuf};
use std::process::Command;

use kube_loopback::ApiServer;
use serde_json::Value;

use crate::builder::{Output, Test};

pub struct Fleet {
    pub clusters: Vec<(String, ApiServer)>,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Fleet {
    pub fn start(names: &[&str]) -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        let clusters: Vec<(String, ApiServer)> = names
            .iter()
            .map(|n| (n.to_string(), ApiServer::start()))
            .collect();
        let contexts: Vec<(String, String)> = clusters
            .iter()
            .map(|(n, api)| (format!("admin@{n}"), api.url()))
            .collect();
        let refs: Vec<(&str, &str)> = contexts
            .iter()
            .map(|(c, u)| (c.as_str(), u.as_str()))
            .collect();
        let kubeconfig =
            kube_loopback::write_kubeconfig(&dir.path().join("kubeconfig"), &refs, refs[0].0);
        std::fs::write(dir.path().join("script.json"), "{}").unwrap();
        Fleet {
            clusters,
            dir,
            kubeconfig,
        }
    }

    pub fn api(&self, cluster: &str) -> &ApiServer {
        &self
            .clusters
            .iter()
            .find(|(n, _)| n == cluster)
            .unwrap_or_else(|| panic!("no cluster {cluster}"))
            .1
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Knobs for the fake helm (FAKE_HELM_SCRIPT), shared by every cluster.
    pub fn script(&self, script: Value) {
        std::fs::write(
            self.dir.path().join("script.json"),
            serde_json::to_string_pretty(&script).unwrap(),
        )
        .unwrap();
    }

    /// A config root whose clusters are this fleet's, each with `releases`
    /// and a distinct `clusterId` value (1, 2, …) for Cilium's ClusterMesh
    /// identity (see [`fleet_releases`]).
    pub fn config(&self, releases: &str) -> Test {
        let mut test = Test::new().file("releases/core.yaml", releases);
        for (i, (name, _)) in self.clusters.iter().enumerate() {
            test = test.file(
                &format!("clusters/{name}/cluster.yaml"),
                &format!(
                    "name: {name}\ncontext: admin@{name}\nvalues: {{ clusterId: {} }}\n",
                    i + 1
                ),
            );
        }
        test
    }

    pub fn command(&self, test: &Test, args: &[&str]) -> Command {
        let mut cmd =
            crate::cluster::behind_fake_helm(test, args, &self.kubeconfig, self.dir.path());
        cmd.env("FAKE_HELM_STATE_BY_CONTEXT", "1");
        cmd
    }

    pub fn run(&self, test: &Test, args: &[&str]) -> Output {
        crate::cluster::output(self.command(test, args))
    }

    /// Every cluster's helm calls (one fake helm serves them all), in order.
    pub fn helm_calls(&self) -> Vec<crate::cluster::HelmCall> {
        crate::cluster::helm_calls_in(self.dir.path())
    }

    /// The fake helm's state of a release in one cluster.
    pub fn release_state(&self, cluster: &str, namespace: &str, name: &str) -> Option<Value> {
        let text = std::fs::read_to_string(
            self.dir
                .path()
                .join("helm-state")
                .join(format!("admin@{cluster}"))
                .join(format!("{namespace}__{name}.json")),
        )
        .ok()?;
        serde_json::from_str(&text).ok()
    }
}

/// testkit's standard releases with Cilium's cluster identity per cluster,
/// as a fleet needs it.
pub fn fleet_releases() -> String {
    crate::cluster::RELEASES.replace(
        "values: { k8sServiceHost: 10.0.0.1 }",
        "values: { k8sServiceHost: 10.0.0.1, cluster: { name: \"{{cluster.name}}\", id: \"{{cluster.values.clusterId}}\" } }",
    )
}
