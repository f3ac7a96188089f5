//! HelmCli against the fake helm binary: the command lines it builds, what it
//! reads back, how failures are reported, and how it stops.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bootstrap::helm::{Helm, HelmCli, HelmError, InstallRequest, TemplateRequest};
use bootstrap::kube::KubeTarget;
use bootstrap::release::{Chart, ChartSource, ReleaseId};
use bootstrap::stop::Stop;
use serde_json::{Value, json};
use testkit::fake_helm;
use tokio::sync::watch;

struct Fake {
    dir: tempfile::TempDir,
}

impl Fake {
    fn new() -> Fake {
        let fake = Fake {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir(fake.state()).unwrap();
        fake
    }

    fn with_script(self, script: Value) -> Fake {
        std::fs::write(self.path("script.json"), script.to_string()).unwrap();
        self
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn state(&self) -> PathBuf {
        self.path("state")
    }

    fn helm(&self) -> HelmCli {
        let mut helm = HelmCli::new(Some(PathBuf::from(fake_helm())))
            .with_env("FAKE_HELM_STATE", self.state())
            .with_env("FAKE_HELM_LOG", self.path("log.jsonl"));
        if self.path("script.json").exists() {
            helm = helm.with_env("FAKE_HELM_SCRIPT", self.path("script.json"));
        }
        helm
    }

    /// One entry per finished fake-helm process.
    fn log(&self) -> Vec<Value> {
        std::fs::read_to_string(self.path("log.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn release_state(&self, id: &ReleaseId) -> Option<Value> {
        let file = self
            .state()
            .join(format!("{}__{}.json", id.namespace, id.name));
        let text = std::fs::read_to_string(file).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Waits (bounded) until fake-helm has saved the release, i.e. it is
    /// mid-operation with the release pending.
    async fn wait_pending(&self, id: &ReleaseId) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(state) = self.release_state(id) {
                assert!(state["status"].as_str().unwrap().starts_with("pending-"));
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("fake helm never started installing {id}");
    }
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

fn argv_of(entry: &Value) -> Vec<String> {
    serde_json::from_value(entry["argv"].clone()).unwrap()
}

fn cilium() -> (ReleaseId, Chart) {
    (
        ReleaseId::new("kube-system", "cilium"),
        Chart {
            source: ChartSource::Repo {
                url: "https://helm.cilium.io".into(),
                name: "cilium".into(),
            },
            version: Some("1.18.2".into()),
        },
    )
}

fn target() -> KubeTarget {
    KubeTarget {
        kubeconfig: Some(PathBuf::from("/nonexistent/kubeconfig")),
        context: Some("admin@infra".into()),
    }
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "bootstrap.dev/managed-by".to_string(),
            "bootstrap".to_string(),
        ),
        ("bootstrap.dev/cluster".to_string(), "infra".to_string()),
    ])
}

#[tokio::test]
async fn version_is_detected_once_and_helm_4_is_accepted() {
    let fake = Fake::new();
    let helm = fake.helm().with_env("FAKE_HELM_VERSION", "v4.0.0");
    let v = helm.version().await.unwrap();
    assert_eq!(
        (v.major, v.minor, v.patch, v.raw.as_str()),
        (4, 0, 0, "v4.0.0")
    );
    assert_eq!(helm.version().await.unwrap(), v);
    let log = fake.log();
    assert_eq!(log.len(), 1, "the version is cached");
    assert_eq!(argv_of(&log[0]), words("version --short"));
}

#[tokio::test]
async fn helm_older_than_3_13_is_refused() {
    let fake = Fake::new();
    let helm = fake.helm().with_env("FAKE_HELM_VERSION", "v3.12.3");
    match helm.version().await {
        Err(HelmError::TooOld { found }) => assert_eq!(found, "v3.12.3"),
        other => panic!("expected TooOld, got {other:?}"),
    }
    let helm = fake.helm().with_env("FAKE_HELM_VERSION", "v3.13.0");
    assert_eq!(helm.version().await.unwrap().minor, 13);
}

#[tokio::test]
async fn a_missing_helm_is_named_in_the_error() {
    let helm = HelmCli::new(Some(PathBuf::from("/nonexistent/bin/helm")));
    let err = helm.version().await.unwrap_err();
    assert_eq!(
        err,
        HelmError::NotFound {
            path: "/nonexistent/bin/helm".into()
        }
    );
    assert!(err.to_string().contains("`/nonexistent/bin/helm`"));
}

#[tokio::test]
async fn install_passes_a_private_values_file_that_is_gone_afterwards() {
    let fake = Fake::new();
    let helm = fake.helm();
    let (id, chart) = cilium();
    let values = json!({"k8sServiceHost": "10.0.0.1", "ipam": {"mode": "kubernetes"}, "on": "on"});
    let labels = labels();
    let request = InstallRequest {
        release: &id,
        chart: &chart,
        values: &values,
        secrets: &Default::default(),
        skip_crds: true,
        timeout: Duration::from_secs(300),
        labels: &labels,
        flags: &Default::default(),
    };
    let (_tx, stop) = watch::channel(Stop::Run);
    helm.upgrade_install(&KubeTarget::default(), &request, stop)
        .await
        .unwrap();

    let log = fake.log();
    assert_eq!(log.len(), 1);
    let file = &log[0]["values_files"][0];
    let path = file["path"].as_str().unwrap();
    assert_eq!(
        argv_of(&log[0]),
        words(&format!(
            "upgrade --install --namespace kube-system --create-namespace \
             --repo https://helm.cilium.io --version 1.18.2 --values {path} --skip-crds \
             --timeout 300s --labels bootstrap.dev/cluster=infra,bootstrap.dev/managed-by=bootstrap \
             --output json -- cilium cilium"
        ))
    );
    assert_eq!(file["mode"], "600");
    assert_eq!(
        file["content"], values,
        "YAML round-trips, `on` stays a string"
    );
    assert!(!Path::new(path).exists(), "values file left behind");

    let state = fake.release_state(&id).unwrap();
    assert_eq!(state["labels"]["bootstrap.dev/managed-by"], "bootstrap");
}

#[tokio::test]
async fn status_list_and_values_read_back_what_was_installed() {
    let fake = Fake::new();
    let helm = fake.helm();
    let (id, chart) = cilium();
    let values = json!({"k8sServiceHost": "10.0.0.1"});
    let labels = BTreeMap::new();
    let request = InstallRequest {
        release: &id,
        chart: &chart,
        values: &values,
        secrets: &Default::default(),
        skip_crds: false,
        timeout: Duration::from_secs(60),
        labels: &labels,
        flags: &Default::default(),
    };
    let t = target();
    let (_tx, stop) = watch::channel(Stop::Run);
    assert_eq!(helm.status(&t, &id).await.unwrap(), None);
    helm.upgrade_install(&t, &request, stop.clone())
        .await
        .unwrap();
    helm.upgrade_install(&t, &request, stop).await.unwrap();

    let status = helm.status(&t, &id).await.unwrap().unwrap();
    assert_eq!(status.id, id);
    assert_eq!(status.revision, 2);
    assert_eq!(status.status, "deployed");
    assert_eq!(
        (status.chart.as_str(), status.version.as_str()),
        ("cilium", "1.18.2")
    );

    let listed = helm.list(&t).await.unwrap();
    assert_eq!(listed, vec![status]);
    assert_eq!(helm.get_values(&t, &id).await.unwrap(), values);

    for entry in fake.log() {
        let argv = argv_of(&entry);
        if argv[0] == "version" {
            continue; // asked once, to shape the other command lines
        }
        let at = argv.iter().position(|a| a == "--kube-context").unwrap();
        assert_eq!(argv[at + 1], "admin@infra", "{argv:?}");
        assert!(argv.contains(&"--kubeconfig".to_string()), "{argv:?}");
    }
    let list_argv = fake
        .log()
        .iter()
        .map(argv_of)
        .find(|argv| argv[0] == "list")
        .unwrap();
    let expected = match helm.version().await.unwrap().major {
        3 => "list --all-namespaces --all --max 0",
        _ => "list --all-namespaces --max 0",
    };
    assert_eq!(list_argv[..expected.split(' ').count()], words(expected));
}

/// A helm that hangs is stopped at the release's deadline, not half a minute
/// later, and the message reads like a person wrote it.
#[tokio::test]
async fn a_hung_helm_is_stopped_at_the_release_deadline() {
    let fake = Fake::new().with_script(json!({"*": {"delay_ms": 60000}}));
    let helm = fake.helm();
    let (id, chart) = cilium();
    let (values, labels) = (json!({}), BTreeMap::new());
    let request = InstallRequest {
        release: &id,
        chart: &chart,
        values: &values,
        secrets: &Default::default(),
        skip_crds: false,
        timeout: Duration::from_secs(2),
        labels: &labels,
        flags: &Default::default(),
    };
    let (_tx, stop) = watch::channel(Stop::Run);
    let started = std::time::Instant::now();
    let result = helm
        .upgrade_install(&KubeTarget::default(), &request, stop)
        .await;
    let took = started.elapsed();
    let error = result.unwrap_err();
    assert!(matches!(error, HelmError::TimedOut { .. }), "{error}");
    assert!(
        error
            .to_string()
            .ends_with("did not finish within 2s and was stopped"),
        "{error}"
    );
    assert!(took < Duration::from_secs(3), "stopped after {took:?}");
}

#[tokio::test]
async fn pending_releases_are_listed_and_uninstall_of_a_missing_release_succeeds() {
    let fake = Fake::new().with_script(json!({"*": {"delay_ms": 60000}}));
    let helm = fake.helm();
    let (id, chart) = cilium();
    let (values, labels) = (json!({}), BTreeMap::new());
    let request = InstallRequest {
        release: &id,
        chart: &chart,
        values: &values,
        secrets: &Default::default(),
        skip_crds: false,
        timeout: Duration::from_secs(60),
        labels: &labels,
        flags: &Default::default(),
    };
    let (tx, stop) = watch::channel(Stop::Run);
    let t = KubeTarget::default();
    let install = helm.upgrade_install(&t, &request, stop);
    let observe = async {
        fake.wait_pending(&id).await;
        let listed = helm.list(&t).await.unwrap();
        tx.send(Stop::Now).unwrap();
        listed
    };
    let (installed, listed) = tokio::join!(install, observe);
    assert!(matches!(installed, Err(HelmError::Stopped { .. })));
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].status, "pending-install");
    assert!(listed[0].is_pending());

    let other = ReleaseId::new("default", "nothing-here");
    helm.uninstall(&t, &other, Duration::from_secs(10))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_failure_keeps_argv_status_and_stderr_without_secrets() {
    let fake = Fake::new().with_script(json!({"cilium": {"fail":
        "Error: INSTALLATION FAILED: pulling https://bot:s3cr3t@charts.example.com/cilium-1.18.2.tgz: \
         401; value hunter2222 rejected"}}));
    let helm = fake.helm();
    let id = ReleaseId::new("kube-system", "cilium");
    let chart = Chart {
        source: ChartSource::Repo {
            url: "https://bot:s3cr3t@charts.example.com".into(),
            name: "cilium".into(),
        },
        version: Some("1.18.2".into()),
    };
    let values = json!({"clustermesh": {"password": "hunter2222"}});
    let labels = BTreeMap::new();
    let request = InstallRequest {
        release: &id,
        chart: &chart,
        values: &values,
        secrets: &Default::default(),
        skip_crds: false,
        timeout: Duration::from_secs(60),
        labels: &labels,
        flags: &Default::default(),
    };
    let (_tx, stop) = watch::channel(Stop::Run);
    let err = helm
        .upgrade_install(&KubeTarget::default(), &request, stop)
        .await
        .unwrap_err();
    let HelmError::Failed {
        argv,
        status,
        stderr,
    } = &err
    else {
        panic!("expected Failed, got {err:?}");
    };
    assert_eq!(*status, Some(1));
    assert_eq!(argv[0], fake_helm());
    // The credentialed repository is named through a private repository
    // config (added with the password on stdin), never by its URL.
    assert!(
        argv.iter()
            .any(|a| a.ends_with("/cilium") && a.starts_with("bootstrap-"))
            && argv.contains(&"--repository-config".to_string())
            && !argv
                .iter()
                .any(|a| a.contains("s3cr3t") || a.contains("charts.example.com")),
        "{argv:?}"
    );
    assert_eq!(
        stderr.trim(),
        "Error: INSTALLATION FAILED: pulling https://<redacted>@charts.example.com/cilium-1.18.2.tgz: \
         401; value <redacted> rejected"
    );
    let shown = err.to_string();
    assert!(
        !shown.contains("s3cr3t") && !shown.contains("hunter2222"),
        "{shown}"
    );

    let log = fake.log();
    let upgrade = log
        .iter()
        .find(|entry| entry["argv"][0] == "upgrade")
        .expect("the upgrade call");
    let values_path = upgrade["values_files"][0]["path"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(argv.contains(&values_path), "the values file is named");
    assert!(
        !Path::new(&values_path).exists(),
        "and removed after a failure"
    );
}

#[tokio::test]
async fn template_renders_crds_without_hooks() {
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                     "metadata": {"name": "certificates.cert-manager.io"}});
    let fake = Fake::new().with_script(json!({"cert-manager": {"crds": [crd]}}));
    let helm = fake.helm();
    let id = ReleaseId::new("cert-manager", "cert-manager");
    let chart = Chart {
        source: ChartSource::Oci("oci://quay.io/jetstack/charts/cert-manager".into()),
        version: Some("v1.19.0".into()),
    };
    let values = json!({"crds": {"enabled": true}});
    let request = TemplateRequest {
        release: &id,
        chart: &chart,
        values: &values,
        secrets: &Default::default(),
        include_crds: true,
        api_versions: &[],
    };
    let rendered = helm.template(&request).await.unwrap();
    assert!(
        rendered.contains("name: certificates.cert-manager.io"),
        "{rendered}"
    );
    let argv = argv_of(&fake.log()[0]);
    assert!(
        argv.join(" ")
            .contains("--include-crds --skip-tests --no-hooks -- cert-manager "),
        "{argv:?}"
    );
    assert!(
        !argv.contains(&"--kube-context".to_string()),
        "template needs no cluster"
    );
}

async fn install_then_stop(
    fake: &Fake,
    helm: &HelmCli,
    signal: Stop,
) -> (Result<(), HelmError>, Duration) {
    let (id, chart) = cilium();
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
    let (tx, stop) = watch::channel(Stop::Run);
    let t = KubeTarget::default();
    let install = helm.upgrade_install(&t, &request, stop);
    let stopper = async {
        fake.wait_pending(&id).await;
        tx.send(signal).unwrap();
        Instant::now()
    };
    let (result, stopped_at) = tokio::join!(install, stopper);
    (result, stopped_at.elapsed())
}

#[tokio::test]
async fn a_graceful_stop_lets_a_short_operation_finish() {
    let fake = Fake::new().with_script(json!({"*": {"delay_ms": 700}}));
    let helm = fake.helm().with_grace(Duration::from_secs(30));
    let (result, _) = install_then_stop(&fake, &helm, Stop::Graceful).await;
    result.unwrap();
    let (id, _) = cilium();
    assert_eq!(fake.release_state(&id).unwrap()["status"], "deployed");
    assert_eq!(fake.log()[0]["exit_code"], 0);
}

#[tokio::test]
async fn a_graceful_stop_ends_an_operation_that_outlasts_the_grace_period() {
    let fake = Fake::new().with_script(json!({"*": {"delay_ms": 60000}}));
    let helm = fake.helm().with_grace(Duration::from_millis(300));
    let (result, after) = install_then_stop(&fake, &helm, Stop::Graceful).await;
    match result {
        Err(HelmError::Stopped { reason, argv }) => {
            assert!(reason.contains("300ms after the interrupt"), "{reason}");
            assert_eq!(argv[1..3], words("upgrade --install"));
        }
        other => panic!("expected Stopped, got {other:?}"),
    }
    assert!(after >= Duration::from_millis(300), "{after:?}");
    assert!(after < Duration::from_secs(5), "{after:?}");
}

#[tokio::test]
async fn a_stop_now_ends_the_operation_at_once() {
    let fake = Fake::new().with_script(json!({"*": {"delay_ms": 60000}}));
    let helm = fake.helm().with_grace(Duration::from_secs(30));
    let (result, after) = install_then_stop(&fake, &helm, Stop::Now).await;
    assert!(
        matches!(&result, Err(HelmError::Stopped { reason, .. }) if reason.contains("at once")),
        "{result:?}"
    );
    assert!(after < Duration::from_secs(5), "{after:?}");
    let (id, _) = cilium();
    // SIGTERM, not SIGKILL: like helm, the fake records the release failed
    // (not pending-*, which would block every later operation).
    assert_eq!(fake.release_state(&id).unwrap()["status"], "failed");
}
