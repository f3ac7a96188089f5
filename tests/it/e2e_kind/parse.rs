//! Pure helpers of the e2e suite: reading bootstrap's and helm's output and
//! retargeting the example config root. Unit-tested without a cluster.

use serde_json::Value;

/// What the example's cluster.yaml is written for; rewritten for other names.
pub const EXAMPLE_CLUSTER_NAME: &str = "bootstrap-e2e";
pub const MIN_HELM: (u64, u64) = (3, 13);

/// A release the plan installs, with what the ledger must record for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub id: String,
    pub name: String,
    pub namespace: String,
    pub chart: String,
    pub version: String,
    pub values_digest: String,
}

/// The installed releases of `plan --output json`, in execution order.
pub fn installed_releases(plan: &Value) -> Vec<Planned> {
    let text = |r: &Value, key: &str| r[key].as_str().unwrap_or_default().to_string();
    plan["releases"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["installs"] != false)
        .map(|r| Planned {
            id: text(r, "id"),
            name: text(r, "name"),
            namespace: text(r, "namespace"),
            chart: text(r, "chart"),
            version: text(r, "version"),
            values_digest: text(r, "valuesDigest"),
        })
        .collect()
}

/// (release id, outcome) from the last `run_finished` event of apply's JSON Lines.
pub fn final_outcomes(json_lines: &str) -> Option<Vec<(String, String)>> {
    let finished = json_lines
        .lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|event| event["event"] == "run_finished")?;
    let releases = finished["summary"]["releases"].as_array()?;
    Some(
        releases
            .iter()
            .map(|r| {
                (
                    r["release"].as_str().unwrap_or_default().to_string(),
                    r["outcome"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect(),
    )
}

/// Subcommand names from clap's `--help` (the indented words under `Commands:`).
pub fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| line.trim() != "Commands:")
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// `v3.19.0` -> (3, 19).
pub fn helm_version(text: &str) -> Option<(u64, u64)> {
    let mut parts = text.trim().trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The example's cluster.yaml pointed at kind cluster `name`: its kubeconfig
/// context (`kind-NAME`) and its control-plane container (`NAME-control-plane`,
/// the address Cilium uses for the API server). Errors if the example no
/// longer has the values this rewrites, rather than testing the wrong thing.
pub fn retarget(cluster_yaml: &str, name: &str) -> Result<String, String> {
    let context = format!("context: kind-{EXAMPLE_CLUSTER_NAME}\n");
    let host = format!("{EXAMPLE_CLUSTER_NAME}-control-plane");
    for needle in [&context, &host] {
        if !cluster_yaml.contains(needle.as_str()) {
            return Err(format!(
                "examples/kind/clusters/kind/cluster.yaml no longer contains `{}`; update tests/it/e2e_kind.rs",
                needle.trim()
            ));
        }
    }
    Ok(cluster_yaml
        .replace(&context, &format!("context: kind-{name}\n"))
        .replace(&host, &format!("{name}-control-plane")))
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;
    use crate::e2e_kind::{BOOTSTRAP, repo};

    #[test]
    pub fn retarget_rewrites_the_shipped_example_for_another_cluster_name() {
        let original =
            std::fs::read_to_string(repo().join("examples/kind/clusters/kind/cluster.yaml"))
                .unwrap();
        let rewritten = retarget(&original, "bootstrap-e2e-abc123").unwrap();
        let doc: Value = serde_saphyr::from_str(&rewritten).unwrap();
        assert_eq!(doc["context"], "kind-bootstrap-e2e-abc123");
        assert_eq!(
            doc["values"]["k8sServiceHost"],
            "bootstrap-e2e-abc123-control-plane"
        );
        assert!(retarget("name: kind\n", "x").is_err());
    }

    #[test]
    fn kind_config_name_matches_the_example_cluster_yaml() {
        let config =
            std::fs::read_to_string(repo().join("examples/kind/kind-config.yaml")).unwrap();
        let doc: Value = serde_saphyr::from_str(&config).unwrap();
        assert_eq!(doc["name"], EXAMPLE_CLUSTER_NAME);
    }

    #[test]
    pub fn final_outcomes_read_the_last_run_finished_event() {
        let lines = r#"{"event":"run_started","cluster":"kind"}
not json
{"event":"run_finished","summary":{"releases":[{"release":"kube-system/cilium","outcome":"installed"}]}}
{"event":"run_finished","summary":{"releases":[{"release":"kube-system/cilium","outcome":"unchanged"}]}}
"#;
        assert_eq!(
            final_outcomes(lines),
            Some(vec![("kube-system/cilium".into(), "unchanged".into())])
        );
        assert_eq!(final_outcomes("{\"event\":\"run_started\"}\n"), None);
    }

    #[test]
    pub fn subcommands_are_read_from_help() {
        let help = "about\n\nUsage: bootstrap [OPTIONS] <COMMAND>\n\nCommands:\n  plan      Validate\n  status    Live state\n  help      Print\n\nOptions:\n  --dir <DIR>\n";
        assert_eq!(subcommands(help), ["plan", "status", "help"]);
    }

    #[test]
    pub fn helm_versions_are_compared_by_major_and_minor() {
        assert_eq!(helm_version("v3.19.0\n"), Some((3, 19)));
        assert_eq!(helm_version("v4.0.1"), Some((4, 0)));
        assert!(helm_version("v3.12.3").unwrap() < MIN_HELM);
        assert!(helm_version("v4.0.1").unwrap() >= MIN_HELM);
        assert_eq!(helm_version("garbage"), None);
    }

    #[test]
    fn planned_releases_come_from_the_example_plan() {
        let out = Command::new(BOOTSTRAP)
            .args(["plan", "kind", "--output", "json", "--dir"])
            .arg(repo().join("examples/kind"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
        let planned = installed_releases(&plan);
        let ids: Vec<&str> = planned.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["kube-system/cilium", "cert-manager/cert-manager"]);
        assert_eq!(planned[0].chart, "cilium");
        assert_eq!(planned[0].version, "1.18.2");
        assert!(planned[0].values_digest.starts_with("sha256:"));
    }
}
