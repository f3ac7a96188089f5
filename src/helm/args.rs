//! helm command lines built from typed requests. Every command that reads
//! state asks for `-o json`; every command that talks to a cluster carries the
//! kube target, so a stray `KUBECONFIG`/current-context can never redirect one
//! call of a run to another cluster.

use std::path::Path;
use std::time::Duration;

use super::repos::{Credentialed, LocalRepo};
use super::{InstallRequest, TemplateRequest};
use crate::kube::KubeTarget;
use crate::release::{Chart, ChartSource, HelmFlags, ReleaseId};

/// An argv under construction (without the program name). Positional
/// arguments (release names, chart references, repository names and URLs)
/// are kept apart and passed after `--`, so none can ever be read as a flag
/// (docs/design.md#file-formats validates them too).
#[derive(Debug, Default)]
struct Argv(Vec<String>, Vec<String>);

impl Argv {
    fn new(words: &[&str]) -> Argv {
        Argv(words.iter().map(|w| w.to_string()).collect(), Vec::new())
    }

    fn positional(mut self, value: impl Into<String>) -> Argv {
        self.1.push(value.into());
        self
    }

    /// The whole argv: command words and flags, then `--` and the
    /// positional arguments.
    fn finish(self) -> Vec<String> {
        let Argv(mut args, positionals) = self;
        if !positionals.is_empty() {
            args.push("--".into());
            args.extend(positionals);
        }
        args
    }

    fn arg(mut self, value: impl Into<String>) -> Argv {
        self.0.push(value.into());
        self
    }

    fn args(mut self, values: impl IntoIterator<Item = String>) -> Argv {
        self.0.extend(values);
        self
    }

    fn flag(self, name: &str, on: bool) -> Argv {
        if on { self.arg(name) } else { self }
    }

    fn opt(self, name: &str, value: impl Into<String>) -> Argv {
        self.arg(name).arg(value)
    }

    fn opt_some(self, name: &str, value: Option<impl Into<String>>) -> Argv {
        match value {
            Some(value) => self.opt(name, value),
            None => self,
        }
    }

    fn target(self, target: &KubeTarget) -> Argv {
        self.opt_some("--kube-context", target.context.clone())
            .opt_some("--kubeconfig", target.kubeconfig.as_deref().map(path_arg))
    }

    fn release(self, release: &ReleaseId) -> Argv {
        self.positional(release.name.clone())
            .opt("--namespace", release.namespace.clone())
    }

    /// The chart reference and the flags that locate it. A repository
    /// added under `local` (its URL has credentials, see [`super::repos`])
    /// is named by `NAME/CHART` in that repository config, never by URL.
    fn chart(self, chart: ChartArg<'_>) -> Argv {
        let (chart, local) = match chart {
            ChartArg::Local(path) => return self.positional(path_arg(path)),
            ChartArg::Remote(chart, local) => (chart, local),
        };
        match &chart.source {
            ChartSource::Repo { name, .. } if let Some(local) = local => self
                .positional(format!("{}/{name}", local.name))
                .opt_some("--version", chart.version.clone())
                .opt("--repository-config", path_arg(&local.config))
                .opt("--repository-cache", path_arg(&local.cache)),
            ChartSource::Repo { url, name } => self
                .positional(name.clone())
                .opt("--repo", url.clone())
                .opt_some("--version", chart.version.clone()),
            ChartSource::Oci(url) => self
                .positional(url.clone())
                .opt_some("--version", chart.version.clone()),
            // A local chart is whatever is in the directory; helm ignores --version.
            ChartSource::Path(path) => self.positional(path_arg(path)),
        }
    }
}

/// Where helm takes a chart from on one command line.
#[derive(Debug, Clone, Copy)]
pub enum ChartArg<'a> {
    /// As the config names it, for helm to download (`--repo URL`,
    /// `oci://`, or `NAME/CHART` of a credentialed repository added under
    /// the `LocalRepo`); a local chart directory is passed as its path.
    Remote(&'a Chart, Option<&'a LocalRepo>),
    /// A chart archive from the chart cache (docs/design.md#chart-cache),
    /// used in place: no `--repo`, no `--version`.
    Local(&'a Path),
}

fn path_arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// helm's `--timeout` takes a Go duration; whole seconds, rounded up so a
/// sub-second timeout never becomes helm's "0s".
pub fn go_duration(duration: Duration) -> String {
    let secs = duration.as_secs() + u64::from(duration.subsec_nanos() > 0);
    format!("{}s", secs.max(1))
}

pub fn version() -> Vec<String> {
    Argv::new(&["version", "--short"]).finish()
}

/// `helm upgrade --install`. No `--wait`: bootstrap's hooks do the waiting, with
/// readiness checks helm does not have (observedGeneration, CRDs Established).
/// Neither `--atomic` (Helm 3) nor `--rollback-on-failure` (its Helm 4 name) is
/// passed. The release's `helm:` flags ([`helm_flags`]) are the only part
/// that depends on helm's major version.
pub fn upgrade_install(
    target: &KubeTarget,
    request: &InstallRequest<'_>,
    values_file: &Path,
    helm_major: u64,
    chart: ChartArg<'_>,
) -> Vec<String> {
    let labels = request
        .labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    Argv::new(&["upgrade", "--install"])
        .release(request.release)
        .arg("--create-namespace")
        .chart(chart)
        .opt("--values", path_arg(values_file))
        .flag("--skip-crds", request.skip_crds)
        .opt("--timeout", go_duration(request.timeout))
        .target(target)
        .opt_some("--labels", (!labels.is_empty()).then_some(labels))
        .args(
            helm_flags(request.flags, helm_major)
                .into_iter()
                .flat_map(|(_, argv)| argv),
        )
        .opt("--output", "json")
        .finish()
}

/// The helm flags of a release's `helm:` keys (docs/design.md#defaults) on
/// helm `major`, each with its key. Helm 4 renamed `--force` to
/// `--force-replace` (pkg/cmd/upgrade.go marks `--force` deprecated) and
/// added `--server-side` and `--force-conflicts` (pkg/cmd/flags.go); Helm 3
/// has neither, which [`unsupported`] reports before anything runs.
pub fn helm_flags(flags: &HelmFlags, major: u64) -> Vec<(&'static str, Vec<String>)> {
    let mut out: Vec<(&'static str, Vec<String>)> = Vec::new();
    if flags.cleanup_on_fail {
        out.push(("cleanupOnFail", vec!["--cleanup-on-fail".into()]));
    }
    if flags.force {
        let flag = if major >= 4 {
            "--force-replace"
        } else {
            "--force"
        };
        out.push(("force", vec![flag.into()]));
    }
    if let Some(max) = flags.history_max {
        out.push(("historyMax", vec!["--history-max".into(), max.to_string()]));
    }
    if flags.disable_openapi_validation {
        out.push((
            "disableOpenAPIValidation",
            vec!["--disable-openapi-validation".into()],
        ));
    }
    if let Some(on) = flags.server_side {
        out.push(("serverSide", vec![format!("--server-side={on}")]));
    }
    if flags.force_conflicts {
        out.push(("forceConflicts", vec!["--force-conflicts".into()]));
    }
    out
}

/// The `helm:` keys whose flag helm `major`'s `upgrade` does not have (by
/// the tables in [`super::flags`]), each with that flag.
pub fn unsupported(flags: &HelmFlags, major: u64) -> Vec<(&'static str, String)> {
    helm_flags(flags, major)
        .into_iter()
        .filter_map(|(key, argv)| {
            super::flags::unknown_flag(major, super::flags::Command::Upgrade, &argv)
                .map(|flag| (key, flag))
        })
        .collect()
}

/// `helm template` for the CRD phase and `bootstrap template`: the chart's
/// `crds/` directory only with `include_crds`, never hooks or test pods (they
/// are not part of what gets applied). Offline, `.Capabilities.APIVersions`
/// holds only helm's defaults; each of `api_versions` is added with
/// `--api-versions` (a string slice in helm 3 and 4, pkg/cmd/template.go:
/// `f.StringSliceVarP(&extraAPIs, "api-versions", "a", ...)`, appended to the
/// capabilities in pkg/action/install.go), one flag per version.
pub fn template(
    request: &TemplateRequest<'_>,
    values_file: &Path,
    chart: ChartArg<'_>,
) -> Vec<String> {
    let mut argv = Argv::new(&["template"])
        .release(request.release)
        .chart(chart)
        .opt("--values", path_arg(values_file))
        .flag("--include-crds", request.include_crds)
        .arg("--skip-tests")
        .arg("--no-hooks");
    for api_version in request.api_versions {
        argv = argv.opt("--api-versions", api_version.as_str());
    }
    argv.finish()
}

/// `helm pull` of a remote chart into `destination` (a directory of the
/// chart cache), as the archive helm names `NAME-VERSION.tgz`. Flags per
/// version: helm v3 `cmd/helm/pull.go`, v4 `pkg/cmd/pull.go` (both
/// `--destination` plus `addChartPathOptionsFlags`; see [`super::flags`]).
/// A credentialed repository is named through `local`, as for install.
pub fn pull(chart: &Chart, local: Option<&LocalRepo>, destination: &Path) -> Vec<String> {
    Argv::new(&["pull"])
        .chart(ChartArg::Remote(chart, local))
        .opt("--destination", path_arg(destination))
        .finish()
}

/// `helm repo add` of a credentialed repository into `local`'s private
/// repository config; the password goes to helm's stdin (`--password-stdin`).
pub fn repo_add(repo: &Credentialed, local: &LocalRepo) -> Vec<String> {
    Argv::new(&["repo", "add"])
        .positional(local.name.clone())
        .positional(repo.url.clone())
        .opt("--username", repo.username.clone())
        .arg("--password-stdin")
        .opt("--repository-config", path_arg(&local.config))
        .opt("--repository-cache", path_arg(&local.cache))
        .finish()
}

/// The latest revision of a release: `helm history --max 1`. Not `helm
/// status`, whose JSON leaves the chart out (`rel.Chart = nil` in helm's
/// pkg/cmd/status.go, Helm 3 and 4), so chart and version could not be
/// compared with what bootstrap would install.
pub fn history(target: &KubeTarget, release: &ReleaseId) -> Vec<String> {
    Argv::new(&["history"])
        .release(release)
        .opt("--max", "1")
        .target(target)
        .opt("--output", "json")
        .finish()
}

/// Every release in every namespace and state; `--max 0` lifts helm's default
/// limit of 256 (helm treats 0 as "no limit"). Helm 3 lists only deployed and
/// failed releases unless given `--all`; Helm 4 removed the flag and lists
/// every state by default (see [`super::flags`]).
pub fn list(target: &KubeTarget, helm_major: u64) -> Vec<String> {
    Argv::new(&["list", "--all-namespaces"])
        .flag("--all", helm_major < 4)
        .opt("--max", "0")
        .target(target)
        .opt("--output", "json")
        .finish()
}

pub fn get_values(target: &KubeTarget, release: &ReleaseId) -> Vec<String> {
    Argv::new(&["get", "values"])
        .release(release)
        .target(target)
        .opt("--output", "json")
        .finish()
}

/// `helm get manifest` has no `-o`: it prints the manifest as YAML.
pub fn get_manifest(target: &KubeTarget, release: &ReleaseId) -> Vec<String> {
    Argv::new(&["get", "manifest"])
        .release(release)
        .target(target)
        .finish()
}

/// `helm rollback NAME`: back to the revision before the latest (helm's
/// default), which recovers a release left `pending-upgrade`.
pub fn rollback(target: &KubeTarget, release: &ReleaseId, timeout: Duration) -> Vec<String> {
    Argv::new(&["rollback"])
        .release(release)
        .opt("--timeout", go_duration(timeout))
        .target(target)
        .finish()
}

pub fn uninstall(target: &KubeTarget, release: &ReleaseId, timeout: Duration) -> Vec<String> {
    Argv::new(&["uninstall"])
        .release(release)
        .opt("--timeout", go_duration(timeout))
        .target(target)
        .finish()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use serde_json::json;

    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    fn target() -> KubeTarget {
        KubeTarget {
            kubeconfig: Some(PathBuf::from("/home/me/.kube/infra")),
            context: Some("admin@infra".into()),
        }
    }

    fn install_argv_from(chart: Chart, arg: ChartArg<'_>) -> Vec<String> {
        let id = ReleaseId::new("kube-system", "cilium");
        let (values, labels) = (json!({}), BTreeMap::new());
        let request = InstallRequest {
            release: &id,
            chart: &chart,
            values: &values,
            secrets: &Default::default(),
            skip_crds: false,
            timeout: Duration::from_secs(300),
            labels: &labels,
            flags: &Default::default(),
        };
        upgrade_install(&target(), &request, Path::new("/tmp/v.yaml"), 4, arg)
    }

    fn install_argv(chart: Chart, skip_crds: bool, labels: &[(&str, &str)]) -> Vec<String> {
        let id = ReleaseId::new("kube-system", "cilium");
        let labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let values = json!({});
        let request = InstallRequest {
            release: &id,
            chart: &chart,
            values: &values,
            secrets: &Default::default(),
            skip_crds,
            timeout: Duration::from_secs(300),
            labels: &labels,
            flags: &Default::default(),
        };
        upgrade_install(
            &target(),
            &request,
            Path::new("/tmp/v.yaml"),
            4,
            ChartArg::Remote(request.chart, None),
        )
    }

    #[test]
    fn install_from_a_repo_uses_repo_flag_not_a_repo_add() {
        let chart = Chart {
            source: ChartSource::Repo {
                url: "https://helm.cilium.io".into(),
                name: "cilium".into(),
            },
            version: Some("1.18.2".into()),
        };
        assert_eq!(
            install_argv(
                chart,
                true,
                &[("bootstrap.io/owner", "bootstrap"), ("a", "b")]
            ),
            words(
                "upgrade --install --namespace kube-system --create-namespace --repo \
                 https://helm.cilium.io --version 1.18.2 --values /tmp/v.yaml \
                 --skip-crds --timeout 300s --kube-context admin@infra --kubeconfig \
                 /home/me/.kube/infra --labels a=b,bootstrap.io/owner=bootstrap \
                 --output json -- cilium cilium"
            )
        );
    }

    #[test]
    fn install_from_oci_passes_the_url_as_chart() {
        let chart = Chart {
            source: ChartSource::Oci("oci://ghcr.io/spegel-org/helm-charts/spegel".into()),
            version: Some("0.3.0".into()),
        };
        let argv = install_argv(chart, false, &[]);
        assert_eq!(
            argv,
            words(
                "upgrade --install --namespace kube-system --create-namespace --version \
                 0.3.0 --values /tmp/v.yaml --timeout 300s --kube-context admin@infra \
                 --kubeconfig /home/me/.kube/infra --output json -- cilium \
                 oci://ghcr.io/spegel-org/helm-charts/spegel"
            )
        );
    }

    #[test]
    fn install_from_a_path_passes_the_directory_and_no_version() {
        let chart = Chart {
            source: ChartSource::Path(PathBuf::from("/repo/charts/coredns")),
            version: Some("1.0.0".into()),
        };
        assert_eq!(
            install_argv(chart, false, &[]),
            words(
                "upgrade --install --namespace kube-system --create-namespace --values \
                 /tmp/v.yaml --timeout 300s --kube-context admin@infra --kubeconfig \
                 /home/me/.kube/infra --output json -- cilium /repo/charts/coredns"
            )
        );
    }

    #[test]
    fn no_wait_and_no_kube_flags_without_a_target() {
        let id = ReleaseId::new("flux-system", "flux-operator");
        let chart = Chart {
            source: ChartSource::Oci("oci://ghcr.io/x/flux-operator".into()),
            version: None,
        };
        let (values, labels) = (json!({}), BTreeMap::new());
        let request = InstallRequest {
            release: &id,
            chart: &chart,
            values: &values,
            secrets: &Default::default(),
            skip_crds: false,
            timeout: Duration::from_millis(1500),
            labels: &labels,
            flags: &Default::default(),
        };
        let argv = upgrade_install(
            &KubeTarget::default(),
            &request,
            Path::new("/v"),
            4,
            ChartArg::Remote(request.chart, None),
        );
        assert_eq!(
            argv,
            words(
                "upgrade --install --namespace flux-system --create-namespace --values \
                 /v --timeout 2s --output json -- flux-operator \
                 oci://ghcr.io/x/flux-operator"
            )
        );
    }

    #[test]
    fn template_renders_crds_without_hooks_or_tests() {
        let id = ReleaseId::new("cert-manager", "cert-manager");
        let chart = Chart {
            source: ChartSource::Repo {
                url: "https://charts.jetstack.io".into(),
                name: "cert-manager".into(),
            },
            version: Some("v1.19.0".into()),
        };
        let values = json!({});
        let request = TemplateRequest {
            release: &id,
            chart: &chart,
            values: &values,
            secrets: &Default::default(),
            include_crds: true,
            api_versions: &[],
        };
        assert_eq!(
            template(
                &request,
                Path::new("/tmp/v.yaml"),
                ChartArg::Remote(request.chart, None)
            ),
            words(
                "template --namespace cert-manager --repo https://charts.jetstack.io \
                 --version v1.19.0 --values /tmp/v.yaml --include-crds --skip-tests \
                 --no-hooks -- cert-manager cert-manager"
            )
        );
        let request = TemplateRequest {
            include_crds: false,
            ..request
        };
        assert!(
            !template(
                &request,
                Path::new("/v"),
                ChartArg::Remote(request.chart, None)
            )
            .contains(&"--include-crds".to_string())
        );
        // One --api-versions per version the cluster will serve.
        let served = [
            "gateway.networking.k8s.io/v1".to_string(),
            "gateway.networking.k8s.io/v1/GatewayClass".to_string(),
        ];
        let request = TemplateRequest {
            api_versions: &served,
            ..request
        };
        assert!(
            template(
                &request,
                Path::new("/v"),
                ChartArg::Remote(request.chart, None)
            )
            .ends_with(&words(
                "--skip-tests --no-hooks --api-versions gateway.networking.k8s.io/v1 \
             --api-versions gateway.networking.k8s.io/v1/GatewayClass -- cert-manager \
             cert-manager"
            ))
        );
    }

    #[test]
    fn read_commands_ask_for_json_and_carry_the_target() {
        let id = ReleaseId::new("kube-system", "coredns");
        let t = target();
        let kube = "--kube-context admin@infra --kubeconfig /home/me/.kube/infra";
        assert_eq!(
            history(&t, &id),
            words(&format!(
                "history --namespace kube-system --max 1 {kube} --output json -- coredns"
            ))
        );
        assert_eq!(
            list(&t, 3),
            words(&format!(
                "list --all-namespaces --all --max 0 {kube} --output json"
            ))
        );
        assert_eq!(
            list(&t, 4),
            words(&format!(
                "list --all-namespaces --max 0 {kube} --output json"
            ))
        );
        assert_eq!(
            get_values(&t, &id),
            words(&format!(
                "get values --namespace kube-system {kube} --output json -- coredns"
            ))
        );
        assert_eq!(
            get_manifest(&t, &id),
            words(&format!(
                "get manifest --namespace kube-system {kube} -- coredns"
            ))
        );
        assert_eq!(
            rollback(&t, &id, Duration::from_secs(120)),
            words(&format!(
                "rollback --namespace kube-system --timeout 120s {kube} -- coredns"
            ))
        );
        assert_eq!(
            uninstall(&t, &id, Duration::from_secs(120)),
            words(&format!(
                "uninstall --namespace kube-system --timeout 120s {kube} -- coredns"
            ))
        );
    }

    /// A repository URL with credentials: the chart is named through the
    /// private repository config, and no argv holds the secret.
    #[test]
    fn credentials_never_reach_argv() {
        let url = "https://robot:s3cr3t-t0ken@charts.example.com/stable";
        let repo = super::super::repos::split_credentials(url).unwrap();
        let local = LocalRepo {
            name: "bootstrap-0123".into(),
            config: "/tmp/r/repositories.yaml".into(),
            cache: "/tmp/r/cache".into(),
        };
        assert_eq!(
            repo_add(&repo, &local),
            words(
                "repo add --username robot --password-stdin --repository-config \
                 /tmp/r/repositories.yaml --repository-cache /tmp/r/cache -- \
                 bootstrap-0123 https://charts.example.com/stable"
            )
        );
        let id = ReleaseId::new("apps", "demo");
        let chart = Chart {
            source: ChartSource::Repo {
                url: url.into(),
                name: "demo".into(),
            },
            version: Some("1.2.3".into()),
        };
        let values = json!({});
        let request = TemplateRequest {
            release: &id,
            chart: &chart,
            values: &values,
            secrets: &Default::default(),
            include_crds: false,
            api_versions: &[],
        };
        let argv = template(
            &request,
            Path::new("/v"),
            ChartArg::Remote(request.chart, Some(&local)),
        );
        assert_eq!(
            argv,
            words(
                "template --namespace apps --version 1.2.3 --repository-config \
                 /tmp/r/repositories.yaml --repository-cache /tmp/r/cache --values /v \
                 --skip-tests --no-hooks -- demo bootstrap-0123/demo"
            )
        );
        assert!(!argv.iter().any(|a| a.contains("s3cr3t")));
    }

    /// The chart cache pulls each chart by its reference, and install and
    /// template then name only the archive.
    #[test]
    fn pull_then_install_and_template_from_the_archive() {
        let chart = Chart {
            source: ChartSource::Oci("oci://ghcr.io/spegel-org/helm-charts/spegel".into()),
            version: Some("0.4.0".into()),
        };
        assert_eq!(
            pull(&chart, None, Path::new("/cache/tmp/pull-1")),
            words(
                "pull --version 0.4.0 --destination /cache/tmp/pull-1 -- \
                 oci://ghcr.io/spegel-org/helm-charts/spegel"
            )
        );
        let url = "https://robot:s3cr3t-t0ken@charts.example.com/stable";
        let credentialed = Chart {
            source: ChartSource::Repo {
                url: url.into(),
                name: "demo".into(),
            },
            version: Some("1.2.3".into()),
        };
        let local = LocalRepo {
            name: "bootstrap-0123".into(),
            config: "/tmp/r/repositories.yaml".into(),
            cache: "/tmp/r/cache".into(),
        };
        let argv = pull(&credentialed, Some(&local), Path::new("/d"));
        assert_eq!(
            argv,
            words(
                "pull --version 1.2.3 --repository-config /tmp/r/repositories.yaml \
                 --repository-cache /tmp/r/cache --destination /d -- \
                 bootstrap-0123/demo"
            )
        );
        assert!(!argv.iter().any(|a| a.contains("s3cr3t")));
        let archive = Path::new("/cache/sha256/ab.tgz");
        let argv = install_argv_from(chart.clone(), ChartArg::Local(archive));
        assert_eq!(
            argv,
            words(
                "upgrade --install --namespace kube-system --create-namespace --values \
                 /tmp/v.yaml --timeout 300s --kube-context admin@infra --kubeconfig \
                 /home/me/.kube/infra --output json -- cilium /cache/sha256/ab.tgz"
            )
        );
        let id = ReleaseId::new("kube-system", "spegel");
        let values = json!({});
        let request = TemplateRequest {
            release: &id,
            chart: &chart,
            values: &values,
            secrets: &Default::default(),
            include_crds: true,
            api_versions: &[],
        };
        assert_eq!(
            template(&request, Path::new("/v"), ChartArg::Local(archive)),
            words(
                "template --namespace kube-system --values /v --include-crds \
                 --skip-tests --no-hooks -- spegel /cache/sha256/ab.tgz"
            )
        );
    }

    /// Every command line bootstrap builds, checked against helm's own flag
    /// definitions for each major version it supports.
    #[test]
    fn every_command_line_is_accepted_by_helm_3_and_4() {
        use super::super::flags::{Command, unknown_flag};
        let id = ReleaseId::new("kube-system", "coredns");
        let t = target();
        let repo = Chart {
            source: ChartSource::Repo {
                url: "https://charts.jetstack.io".into(),
                name: "cert-manager".into(),
            },
            version: Some("v1.19.0".into()),
        };
        let (values, labels) = (json!({}), BTreeMap::from([("a".into(), "b".into())]));
        let install = InstallRequest {
            release: &id,
            chart: &repo,
            values: &values,
            secrets: &Default::default(),
            skip_crds: true,
            timeout: Duration::from_secs(60),
            labels: &labels,
            flags: &Default::default(),
        };
        let served = ["monitoring.coreos.com/v1".to_string()];
        let credentialed =
            super::super::repos::split_credentials("https://u:p@charts.example.com").unwrap();
        let local = LocalRepo {
            name: "bootstrap-0123".into(),
            config: "/tmp/r/repositories.yaml".into(),
            cache: "/tmp/r/cache".into(),
        };
        let render = TemplateRequest {
            release: &id,
            chart: &repo,
            values: &values,
            secrets: &Default::default(),
            include_crds: true,
            api_versions: &served,
        };
        for major in [3, 4] {
            let lines = [
                (Command::Version, version()),
                (
                    Command::Upgrade,
                    upgrade_install(
                        &t,
                        &install,
                        Path::new("/v"),
                        major,
                        ChartArg::Remote(install.chart, None),
                    ),
                ),
                (
                    Command::Template,
                    template(
                        &render,
                        Path::new("/v"),
                        ChartArg::Remote(render.chart, None),
                    ),
                ),
                (
                    Command::Template,
                    template(
                        &render,
                        Path::new("/v"),
                        ChartArg::Remote(render.chart, Some(&local)),
                    ),
                ),
                (
                    Command::Upgrade,
                    upgrade_install(
                        &t,
                        &install,
                        Path::new("/v"),
                        major,
                        ChartArg::Remote(install.chart, Some(&local)),
                    ),
                ),
                (Command::RepoAdd, repo_add(&credentialed, &local)),
                (Command::Pull, pull(&repo, None, Path::new("/c/tmp"))),
                (
                    Command::Pull,
                    pull(&repo, Some(&local), Path::new("/c/tmp")),
                ),
                (
                    Command::Upgrade,
                    upgrade_install(
                        &t,
                        &install,
                        Path::new("/v"),
                        major,
                        ChartArg::Local(Path::new("/c/a.tgz")),
                    ),
                ),
                (
                    Command::Template,
                    template(
                        &render,
                        Path::new("/v"),
                        ChartArg::Local(Path::new("/c/a.tgz")),
                    ),
                ),
                (Command::History, history(&t, &id)),
                (Command::List, list(&t, major)),
                (Command::GetValues, get_values(&t, &id)),
                (Command::GetManifest, get_manifest(&t, &id)),
                (
                    Command::Uninstall,
                    uninstall(&t, &id, Duration::from_secs(5)),
                ),
            ];
            for (command, argv) in lines {
                let words = command.words().split(' ').count();
                assert_eq!(argv[..words].join(" "), command.words());
                assert_eq!(
                    unknown_flag(major, command, &argv[words..]),
                    None,
                    "helm {major} rejects `helm {}`",
                    argv.join(" ")
                );
            }
        }
    }

    #[test]
    fn helm_flags_per_version_and_what_helm_3_lacks() {
        let all = HelmFlags {
            cleanup_on_fail: true,
            force: true,
            history_max: Some(3),
            disable_openapi_validation: true,
            server_side: Some(false),
            force_conflicts: true,
            origin: Vec::new(),
        };
        let flat = |major| -> Vec<String> {
            helm_flags(&all, major)
                .into_iter()
                .flat_map(|(_, argv)| argv)
                .collect()
        };
        assert_eq!(
            flat(4),
            words(
                "--cleanup-on-fail --force-replace --history-max 3 --disable-openapi-validation --server-side=false --force-conflicts"
            )
        );
        assert_eq!(flat(3)[1], "--force");
        assert!(unsupported(&all, 4).is_empty());
        assert_eq!(
            unsupported(&all, 3),
            [
                ("serverSide", "--server-side".to_string()),
                ("forceConflicts", "--force-conflicts".to_string())
            ]
        );
        assert!(helm_flags(&HelmFlags::default(), 4).is_empty());
    }

    #[test]
    fn go_durations_round_up_to_whole_seconds() {
        assert_eq!(go_duration(Duration::from_secs(300)), "300s");
        assert_eq!(go_duration(Duration::from_millis(300_001)), "301s");
        assert_eq!(go_duration(Duration::ZERO), "1s");
    }
}
