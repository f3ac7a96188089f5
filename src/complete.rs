//! Dynamic shell completions (clap_complete's engine, `COMPLETE=SHELL
//! bootstrap`; README "Shell completions"): cluster names from the config
//! root in the current directory, release names from its `releases/*.yaml`,
//! kube contexts from the kubeconfig ($KUBECONFIG, else ~/.kube/config).
//! Each reads what it can and offers nothing when it cannot: a completion
//! never fails.

use std::path::Path;

use clap_complete::CompletionCandidate;

/// `clusters/*/cluster.yaml` under the current directory.
pub(crate) fn clusters() -> Vec<CompletionCandidate> {
    crate::config::cluster_names(Path::new("."))
        .into_iter()
        .map(CompletionCandidate::new)
        .collect()
}

/// The `name` (and `namespace/name`) of every release in
/// `releases/*.yaml` under the current directory.
pub(crate) fn releases() -> Vec<CompletionCandidate> {
    let mut names = std::collections::BTreeSet::new();
    let files = std::fs::read_dir("releases")
        .into_iter()
        .flatten()
        .flatten();
    for file in files {
        let path = file.path();
        if !path.extension().is_some_and(|x| x == "yaml" || x == "yml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap_or_default();
        for doc in docs {
            if let Some(name) = doc["name"].as_str() {
                names.insert(name.to_string());
                if let Some(ns) = doc["namespace"].as_str() {
                    names.insert(format!("{ns}/{name}"));
                }
            }
        }
    }
    names.into_iter().map(CompletionCandidate::new).collect()
}

/// The contexts of the kubeconfig, the current one described as such.
pub(crate) fn contexts() -> Vec<CompletionCandidate> {
    let Ok(config) = ::kube::config::Kubeconfig::read() else {
        return Vec::new();
    };
    let current = config.current_context.clone().unwrap_or_default();
    config
        .contexts
        .iter()
        .map(|c| {
            let candidate = CompletionCandidate::new(&c.name);
            if c.name == current {
                candidate.help(Some("current context".into()))
            } else {
                candidate
            }
        })
        .collect()
}
