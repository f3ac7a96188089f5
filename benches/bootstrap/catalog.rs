//! Writes generated config roots for the plan-at-scale benchmark: release
//! files shaped like real ones (templated values, shared values files, hooks,
//! `namespace/name` needs), clusters with overrides, and a small GitOps tree
//! for `check` to walk.

use std::fmt::Write as _;
use std::path::Path;

use super::dag::Dag;
use super::rng::Rng;

const PER_FILE: usize = 50;
const NAMESPACES: usize = 12;

pub struct Generated {
    pub releases: usize,
    pub edges: usize,
    pub depth: usize,
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn release_name(cluster: usize, i: usize) -> String {
    format!("c{cluster:02}-r{i:05}")
}

fn namespace(cluster: usize, i: usize) -> String {
    format!("team-{}", (cluster * 7 + i) % NAMESPACES)
}

/// `n` releases split evenly over `clusters` clusters; each cluster gets its
/// own DAG and lists its releases, so `plan c00` parses and validates the
/// whole catalog but renders only its share.
pub fn config(root: &Path, n: usize, clusters: usize, seed: u64) -> Generated {
    let mut rng = Rng::new(seed);
    let per_cluster = n / clusters;
    let (mut edges, mut depth) = (0, 0);
    write(
        root,
        "releases/values/common.yaml.hbs",
        "podAnnotations:\n  cluster: \"{{cluster.name}}\"\n  release: \"{{release.namespace}}/{{release.name}}\"\nresources:\n  requests: { cpu: 50m, memory: 64Mi }\n",
    );
    for t in 0..NAMESPACES {
        write(
            root,
            &format!("releases/values/team-{t}.yaml.hbs"),
            &format!(
                "team: team-{t}\nregistry: \"registry.{{{{cluster.values.domain}}}}/team-{t}\"\nnodeSelector: {{ pool: general }}\n"
            ),
        );
    }
    for c in 0..clusters {
        let dag = Dag::random(per_cluster, &mut rng);
        edges += dag.edges();
        depth = depth.max(dag.depth());
        let mut file = String::new();
        let mut file_no = 0;
        for i in 0..per_cluster {
            release(&mut file, c, i, &dag.needs[i], &mut rng);
            if (i + 1) % PER_FILE == 0 || i + 1 == per_cluster {
                write(root, &format!("releases/c{c:02}-{file_no:03}.yaml"), &file);
                file.clear();
                file_no += 1;
            }
        }
        let name = format!("c{c:02}");
        write(
            root,
            &format!("clusters/{name}/cluster.yaml"),
            &cluster_file(c, per_cluster, clusters > 1, &mut rng),
        );
        write(
            root,
            &format!("clusters/{name}/override.yaml.hbs"),
            "replicas: 3\nextraArgs: [\"--cluster={{cluster.name}}\"]\n",
        );
        gitops(root, &name, per_cluster.div_ceil(10).max(5));
    }
    Generated {
        releases: per_cluster * clusters,
        edges,
        depth,
    }
}

fn release(out: &mut String, c: usize, i: usize, needs: &[usize], rng: &mut Rng) {
    let name = release_name(c, i);
    let ns = namespace(c, i);
    let _ = writeln!(out, "---\nname: {name}\nnamespace: {ns}");
    match rng.below(3) {
        0 => {
            let _ = writeln!(
                out,
                "chart: {{ oci: oci://ghcr.io/example/charts/app-{}, version: 1.{}.{} }}",
                i % 97,
                i % 13,
                i % 7
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "chart: {{ repo: https://charts.example.com/{ns}, name: app-{}, version: 2.{}.0 }}",
                i % 89,
                i % 11
            );
        }
    }
    if !needs.is_empty() {
        let refs: Vec<String> = needs
            .iter()
            .map(|&n| {
                // A quarter of the references spell out namespace/name.
                if rng.chance(25) {
                    format!("{}/{}", namespace(c, n), release_name(c, n))
                } else {
                    release_name(c, n)
                }
            })
            .collect();
        let _ = writeln!(out, "needs: [{}]", refs.join(", "));
    }
    let _ = writeln!(
        out,
        "values:\n  image:\n    repository: \"registry.{{{{cluster.values.domain}}}}/{ns}/app\"\n    tag: \"1.{}.0\"\n  replicas: {}\n  clusterName: \"{{{{cluster.name}}}}\"\n  apiServer: \"https://{{{{cluster.values.apiHost}}}}:6443\"\n  labels: {{ team: {ns}, release: \"{{{{release.name}}}}\" }}\n  region: \"{{{{cluster.values.region}}}}\"",
        i % 20,
        1 + i % 3
    );
    let mut files = Vec::new();
    if rng.chance(30) {
        files.push("values/common.yaml.hbs".to_string());
    }
    if rng.chance(20) {
        files.push(format!("values/{ns}.yaml.hbs"));
    }
    if !files.is_empty() {
        let _ = writeln!(out, "valuesFiles: [{}]", files.join(", "));
    }
    if rng.chance(10) {
        let _ = writeln!(
            out,
            "crds: bootstrap\ncrdValues: {{ crds: {{ enabled: true }} }}"
        );
    }
    let _ = writeln!(out, "timeout: {}m", 2 + i % 8);
    if rng.chance(40) {
        let _ = writeln!(
            out,
            "hooks:\n  postsync:\n    - rollout: {{ kind: Deployment, name: app-{i} }}"
        );
        if rng.chance(20) {
            let _ = writeln!(
                out,
                "    - condition: {{ apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, name: things{i}.example.com, type: Established }}"
            );
        }
    }
}

fn cluster_file(c: usize, per_cluster: usize, list: bool, rng: &mut Rng) -> String {
    let name = format!("c{c:02}");
    let mut out = format!(
        "name: {name}\ncontext: admin@{name}\nvalues:\n  apiHost: 10.{c}.0.10\n  domain: {name}.example.net\n  region: region-{}\n  clusterId: {c}\nflux:\n  root: gitops\n  entrypoint: clusters/{name}\n",
        c % 4
    );
    if list {
        out.push_str("releases:\n");
        for i in 0..per_cluster {
            let _ = writeln!(out, "  - {}", release_name(c, i));
        }
    }
    let mut overrides = String::new();
    for i in 0..per_cluster {
        if rng.chance(5) {
            let _ = writeln!(
                overrides,
                "  {}:\n    valuesFiles: [override.yaml.hbs]\n    values: {{ zone: \"{{{{cluster.values.region}}}}-a\" }}",
                release_name(c, i)
            );
        }
    }
    if overrides.is_empty() {
        out.push_str("overrides: {}\n");
    } else {
        out.push_str("overrides:\n");
        out.push_str(&overrides);
    }
    out
}

/// A kustomize tree with `apps` HelmReleases that are not bootstrap releases
/// (so `check` walks it and finds nothing to report).
fn gitops(root: &Path, cluster: &str, apps: usize) {
    let mut resources = String::from(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n",
    );
    for a in 0..apps {
        let _ = writeln!(resources, "  - ../../apps/{cluster}-app-{a}");
        write(
            root,
            &format!("gitops/apps/{cluster}-app-{a}/kustomization.yaml"),
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: apps\nresources:\n  - helmrelease.yaml\n",
        );
        write(
            root,
            &format!("gitops/apps/{cluster}-app-{a}/helmrelease.yaml"),
            &format!(
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: {cluster}-app-{a}\nspec:\n  interval: 10m\n  chart:\n    spec:\n      chart: app\n      sourceRef: {{ kind: HelmRepository, name: apps }}\n"
            ),
        );
    }
    write(
        root,
        &format!("gitops/clusters/{cluster}/kustomization.yaml"),
        &resources,
    );
}
