//! Kubeconfig files pointing kubectl and kube-rs at loopback servers.

use std::path::{Path, PathBuf};

/// Writes `path` with one context (and a same-named cluster and user) per
/// `(context, server_url)` entry; `current` becomes current-context.
pub fn write(path: &Path, contexts: &[(&str, &str)], current: &str) -> PathBuf {
    // JSON strings are valid YAML scalars and need no further escaping.
    let q = |s: &str| serde_json::Value::from(s).to_string();
    let mut out = String::from("apiVersion: v1\nkind: Config\nclusters:\n");
    for (name, server) in contexts {
        out += &format!(
            "- name: {}\n  cluster:\n    server: {}\n",
            q(name),
            q(server)
        );
    }
    out += "users:\n";
    for (name, _) in contexts {
        out += &format!(
            "- name: {}\n  user:\n    token: {}\n",
            q(name),
            q("loopback-test-token")
        );
    }
    out += "contexts:\n";
    for (name, _) in contexts {
        out += &format!(
            "- name: {n}\n  context:\n    cluster: {n}\n    user: {n}\n    namespace: default\n",
            n = q(name)
        );
    }
    out += &format!("current-context: {}\n", q(current));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    }
    std::fs::write(path, out).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    path.to_path_buf()
}
