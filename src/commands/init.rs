//! `bootstrap init [DIR]`: a minimal working config root, one cluster with
//! a CNI and a DNS release, that `plan` and `check` accept at once
//! (docs/design.md#commands). Nothing existing is overwritten without
//! `--force`.

use std::io::Write;
use std::path::PathBuf;

use crate::cli::InitArgs;
use crate::error::{Error, Problem};
use crate::import::Written;

/// `context`: the global `--context`, written as the cluster's context
/// (`kind-CLUSTER` without it).
pub(super) fn run(
    args: &InitArgs,
    context: Option<&str>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    crate::validate::dns_label(&args.cluster).map_err(|why| {
        Error::config(Problem::new(format!(
            "--cluster `{}` is not a cluster name: {why}",
            args.cluster
        )))
    })?;
    let context = context
        .map(str::to_string)
        .unwrap_or_else(|| format!("kind-{}", args.cluster));
    let written = files(&args.cluster, &context);
    let paths = crate::import::write(&written, &args.root, args.force)?;
    let dir = args.root.display();
    let mut text = String::new();
    for path in &paths {
        text.push_str(&format!("wrote {}\n", path.display()));
    }
    let flag = if args.root == std::path::Path::new(".") {
        String::new()
    } else {
        format!(" --dir {dir}")
    };
    text.push_str(&format!(
        "next: set the context and the API server's address in {}, then `bootstrap plan {}{flag}` and `bootstrap apply {}{flag}`\n",
        args.root
            .join("clusters")
            .join(&args.cluster)
            .join("cluster.yaml")
            .display(),
        args.cluster,
        args.cluster
    ));
    super::write(out, &text)
}

/// The files of a new config root for cluster `cluster`.
fn files(cluster: &str, context: &str) -> Written {
    let cluster_yaml = format!(
        "\
# The cluster `bootstrap apply {cluster}` brings up (docs/design.md#file-formats).
name: {cluster}
# The kubeconfig context of this cluster; `--context` overrides it.
context: {context}
# Values the releases' templates read as {{{{cluster.values.NAME}}}}.
values:
  # The API server as the nodes reach it. Cilium replaces kube-proxy, so
  # it cannot use the kubernetes Service (which only works once Cilium
  # runs): without these it deadlocks at bootstrap.
  k8sServiceHost: 10.0.0.10
  k8sServicePort: 6443
# Where the GitOps tree that takes over after bootstrap lives. With it,
# `check` and `apply` scan the tree Flux will apply and refuse a release
# that a Flux HelmRelease would also manage (two owners of one release is
# an outage waiting to happen); `apply` also installs an admission guard
# that denies such HelmReleases in the cluster.
# flux:
#   root: .                          # the repository holding the Flux tree
#   entrypoint: clusters/{cluster}/flux   # the directory Flux starts from
"
    );
    let releases = "\
# The releases bootstrap installs, each as soon as what it `needs` is done,
# and owns for its whole life: the GitOps tree must never carry a
# HelmRelease for one of them.
---
name: cilium
namespace: kube-system
chart:
  repo: https://helm.cilium.io
  name: cilium
  version: 1.18.2
valuesFiles: [values/cilium.yaml.hbs]
# Nothing schedules until the CNI is up; image pulls on fresh nodes are slow.
timeout: 10m
hooks:
  postsync:
    - rollout: { kind: DaemonSet, name: cilium }
---
name: coredns
namespace: kube-system
chart:
  repo: https://coredns.github.io/helm
  name: coredns
  version: 1.44.3
needs: [kube-system/cilium]
values:
  # The names kubelets already point pods at.
  fullnameOverride: coredns
  k8sAppLabelOverride: kube-dns
  service:
    name: kube-dns
timeout: 5m
hooks:
  postsync:
    - rollout: { kind: Deployment, name: coredns }
";
    let cilium = "\
# Rendered as a template (the name ends in .hbs): cluster.* come from
# clusters/<name>/cluster.yaml. Numbers are unquoted: the chart's schema
# wants integers.
kubeProxyReplacement: true
k8sServiceHost: \"{{cluster.values.k8sServiceHost}}\"
k8sServicePort: {{cluster.values.k8sServicePort}}
ipam:
  mode: kubernetes
";
    Written {
        files: vec![
            (
                PathBuf::from("clusters").join(cluster).join("cluster.yaml"),
                cluster_yaml,
            ),
            (PathBuf::from("releases/core.yaml"), releases.to_string()),
            (
                PathBuf::from("releases/values/cilium.yaml.hbs"),
                cilium.to_string(),
            ),
        ],
    }
}
