//! Section 10, the CRD phase of the shipped catalog, judged by the real
//! components: the real helm 4 renders the charts (from a loopback chart
//! repository of `../shared/charts`, through bootstrap's chart cache), the
//! real kube-apiserver takes the CustomResourceDefinitions and its
//! apiextensions controller marks them Established (the control plane of
//! `tools/realenv`). The releases are the shipped config's CRD-phase
//! releases whose charts the mirror holds: cert-manager (6 CRDs, its `needs`
//! dropped so it can be applied alone), prometheus-operator-crds (10) and
//! the Gateway API (5); the others' charts are not on this machine.
//!
//! Three applies on one control plane, the CRD phase read off each run's
//! phase events: a cold chart cache on a fresh cluster; the same again
//! (warm cache, every CRD unchanged, the common re-run); and after
//! `destroy --crds`, a warm cache creating every CRD again (a fresh
//! cluster whose charts were already fetched).
//!
//! The floor of that last one is the API server's own time, taken in the
//! same run, alternately with bootstrap's, each after a `destroy --crds`:
//! the same CRDs written all at once straight through the API under one
//! watch opened beforehand, until it has seen each Established. Written by
//! server-side apply, as bootstrap writes them (it owns their fields, so a
//! field a chart drops is removed), which is the judged floor; and by
//! POST, which kube-apiserver does faster, printed for comparison.

#[cfg(all(realenv, shared_charts))]
pub fn run(mode: super::Mode) {
    real::run(mode)
}

#[cfg(not(all(realenv, shared_charts)))]
pub fn run(_: super::Mode) {
    println!("## 10. CRD phase of the shipped catalog, real helm and API server\n");
    println!(
        "  not measured: it needs the real control plane and helm (tools/realenv/build kube kwok helm4) and the charts (../shared/charts, or scripts/pull-test-charts)\n"
    );
}

#[cfg(all(realenv, shared_charts))]
mod real {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use futures::{StreamExt, TryStreamExt};
    use kube::api::{
        Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
        WatchParams,
    };
    use serde_json::Value;
    use testkit::realenv::{self, ChartRepo, ControlPlane};

    use crate::stats::median;
    use crate::verdict;

    fn crd_resource() -> ApiResource {
        ApiResource {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            plural: "customresourcedefinitions".into(),
        }
    }

    /// How the floor writes the CRDs.
    #[derive(Debug, Clone, Copy)]
    enum Write {
        Create,
        Apply,
    }

    /// Samples of each way of creating the CRDs, taken alternately.
    const SAMPLES: usize = 3;

    const RELEASES: [&str; 3] = ["prometheus-operator-crds", "gateway-api", "cert-manager"];

    struct Setup {
        plane: ControlPlane,
        root: tempfile::TempDir,
        home: tempfile::TempDir,
        helm: PathBuf,
        _repo: ChartRepo,
    }

    pub fn run(mode: crate::Mode) {
        println!("## 10. CRD phase of the shipped catalog, real helm and API server\n");
        if mode.quick {
            println!("  not run in quick mode (it starts a control plane)\n");
            return;
        }
        let missing = realenv::missing();
        if !missing.is_empty() {
            println!(
                "  not measured: tools/realenv has not built {} (tools/realenv/build TOOL)\n",
                missing.join(", ")
            );
            return;
        }
        let charts = PathBuf::from(env!("BOOTSTRAP_TEST_CHARTS_DIR"));
        let helm = realenv::helm(4);
        let repo = ChartRepo::serve(
            &helm,
            &[
                charts.join("cert-manager"),
                charts.join("prometheus-operator-crds"),
            ],
        );
        let setup = Setup {
            plane: ControlPlane::start(),
            root: config_root(&repo.url, &charts),
            home: tempfile::tempdir().expect("tempdir"),
            helm,
            _repo: repo,
        };
        let (cold, names) = setup.crd_phase("apply");
        let (unchanged, _) = setup.crd_phase("apply");
        let manifests = setup.live_crds(&names);
        // Created by bootstrap, then straight through the API (the floor),
        // alternately, each after a `destroy --crds`.
        let (mut fresh, mut floor, mut applied) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..SAMPLES {
            setup.destroy_crds();
            fresh.push(setup.crd_phase("apply").0);
            setup.destroy_crds();
            floor.push(setup.floor(&manifests, Write::Create));
            setup.destroy_crds();
            applied.push(setup.floor(&manifests, Write::Apply));
        }
        let (fresh, floor, applied) = (median(&fresh), median(&floor), median(&applied));
        println!(
            "releases {}: {} CRDs; real helm 4, kube-apiserver (load average {})",
            RELEASES.join(", "),
            names.len(),
            crate::load_average()
        );
        println!("  cold chart cache, fresh cluster          {cold:>8.0} ms");
        println!("  warm chart cache, every CRD unchanged    {unchanged:>8.0} ms");
        println!(
            "  warm chart cache, every CRD created      {fresh:>8.0} ms    (median of {SAMPLES})"
        );
        println!(
            "  floor: the same CRDs created at once     {floor:>8.0} ms    (POST, straight through the API, watched until Established; median of {SAMPLES})"
        );
        println!(
            "  floor: the same CRDs applied at once     {applied:>8.0} ms    (server-side apply, as bootstrap writes them; median of {SAMPLES})"
        );
        verdict(
            "CRD phase with a warm chart cache < 0.3 s (CRDs unchanged)",
            unchanged < 300.0,
            format!("{unchanged:.0} ms"),
        );
        println!(
            "  created / POST floor                     {:>8.2}    (informative: bootstrap server-side applies, which the API server does more slowly)",
            fresh / floor
        );
        let ratio = fresh / applied;
        verdict(
            "CRD phase creating every CRD / the API server's own time (server-side apply) <= 1.10",
            ratio <= 1.10,
            format!("{ratio:.2} ({fresh:.0} / {applied:.0} ms)"),
        );
        println!();
    }

    impl Setup {
        fn command(&self, args: &[&str]) -> Command {
            let home = self.home.path();
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_bootstrap"));
            cmd.args(args)
                .arg("--dir")
                .arg(self.root.path())
                .arg("--helm")
                .arg(&self.helm)
                .env("KUBECONFIG", &self.plane.kubeconfig)
                .env("HELM_CACHE_HOME", home.join("helm/cache"))
                .env("HELM_CONFIG_HOME", home.join("helm/config"))
                .env("HELM_DATA_HOME", home.join("helm/data"))
                .env("BOOTSTRAP_CACHE_DIR", home.join("charts"))
                .env("NO_COLOR", "1")
                .env_remove("HELM_NAMESPACE")
                .env_remove("HELM_KUBECONTEXT");
            cmd
        }

        /// Milliseconds of the CRD phase of `COMMAND infra --output json`,
        /// and the CRDs it applied.
        fn crd_phase(&self, command: &str) -> (f64, Vec<String>) {
            let out = realenv::output_within(
                &mut self.command(&[command, "infra", "--output", "json"]),
                realenv::COMMAND_LIMIT,
            );
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "bootstrap {command} failed (logs: {}):\n{}\n{stdout}",
                self.plane.logs().display(),
                String::from_utf8_lossy(&out.stderr)
            );
            let events: Vec<Value> = stdout
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            let at = |event: &str| {
                events
                    .iter()
                    .find(|e| e["event"] == event && e["phase"] == "crds")
                    .and_then(|e| e["elapsedMs"].as_f64())
                    .unwrap_or_else(|| panic!("no {event} of the CRD phase in:\n{stdout}"))
            };
            let last = |event: &str| {
                events
                    .iter()
                    .filter(|e| e["event"] == event)
                    .filter_map(|e| e["elapsedMs"].as_f64())
                    .fold(0.0, f64::max)
            };
            let start = at("phase_started");
            println!(
                "    ({command}: last CRD applied at {:.0} ms, last Established at {:.0} ms into the phase)",
                last("crd_applied") - start,
                last("crd_established") - start
            );
            let names = events
                .iter()
                .filter(|e| e["event"] == "crd_applied")
                .filter_map(|e| e["crd"].as_str().map(str::to_string))
                .collect();
            (at("phase_finished") - start, names)
        }

        fn client(&self) -> (tokio::runtime::Runtime, kube::Client) {
            let runtime = tokio::runtime::Runtime::new().expect("a runtime");
            let client = runtime.block_on(async {
                let kubeconfig = kube::config::Kubeconfig::read_from(&self.plane.kubeconfig)
                    .expect("kubeconfig");
                let config = kube::Config::from_custom_kubeconfig(
                    kubeconfig,
                    &kube::config::KubeConfigOptions::default(),
                )
                .await
                .expect("a client config");
                kube::Client::try_from(config).expect("a client")
            });
            (runtime, client)
        }

        /// The CRDs `names` as the cluster has them, as manifests to create
        /// again (name, labels, annotations and spec).
        fn live_crds(&self, names: &[String]) -> Vec<Value> {
            let (runtime, client) = self.client();
            let api: Api<DynamicObject> = Api::all_with(client, &crd_resource());
            runtime.block_on(async {
                let mut out = Vec::new();
                for name in names {
                    let live =
                        serde_json::to_value(api.get(name).await.expect("a CRD bootstrap applied"))
                            .expect("JSON");
                    out.push(serde_json::json!({
                        "apiVersion": "apiextensions.k8s.io/v1",
                        "kind": "CustomResourceDefinition",
                        "metadata": {
                            "name": name,
                            "labels": live["metadata"]["labels"],
                            "annotations": live["metadata"]["annotations"],
                        },
                        "spec": live["spec"],
                    }));
                }
                out
            })
        }

        /// Milliseconds for the API server alone to create `manifests`, all
        /// at once, until a watch has seen each one Established.
        fn floor(&self, manifests: &[Value], write: Write) -> f64 {
            let (runtime, client) = self.client();
            let api: Api<DynamicObject> = Api::all_with(client, &crd_resource());
            runtime.block_on(async {
                let version = api
                    .list_metadata(&ListParams::default())
                    .await
                    .expect("list CRDs")
                    .metadata
                    .resource_version
                    .unwrap_or_default();
                let mut watch = api
                    .watch(&WatchParams::default().timeout(290), &version)
                    .await
                    .expect("watch CRDs")
                    .boxed();
                let start = std::time::Instant::now();
                let objects: Vec<DynamicObject> = manifests
                    .iter()
                    .map(|m| serde_json::from_value(m.clone()).expect("a CRD"))
                    .collect();
                match write {
                    Write::Create => {
                        let params = PostParams::default();
                        futures::future::try_join_all(
                            objects.iter().map(|o| api.create(&params, o)),
                        )
                        .await
                        .expect("create the CRDs");
                    }
                    Write::Apply => {
                        let params = PatchParams::apply("bootstrap-floor").force();
                        futures::future::try_join_all(objects.iter().map(|o| {
                            let name = o.metadata.name.clone().unwrap_or_default();
                            let api = api.clone();
                            let params = params.clone();
                            async move { api.patch(&name, &params, &Patch::Apply(o)).await }
                        }))
                        .await
                        .expect("apply the CRDs");
                    }
                }
                eprintln!(
                    "    ({write:?}: last written at {:.0} ms)",
                    start.elapsed().as_secs_f64() * 1000.0
                );
                let mut waiting: std::collections::BTreeSet<&str> = manifests
                    .iter()
                    .filter_map(|m| m["metadata"]["name"].as_str())
                    .collect();
                while !waiting.is_empty() {
                    let event = watch
                        .try_next()
                        .await
                        .expect("the watch")
                        .expect("the watch ended before every CRD was Established");
                    if let WatchEvent::Added(crd) | WatchEvent::Modified(crd) = event {
                        let crd = serde_json::to_value(crd).expect("JSON");
                        let established = crd["status"]["conditions"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|c| c["type"] == "Established" && c["status"] == "True");
                        if established && let Some(name) = crd["metadata"]["name"].as_str() {
                            waiting.remove(name);
                        }
                    }
                }
                start.elapsed().as_secs_f64() * 1000.0
            })
        }

        fn destroy_crds(&self) {
            let out = realenv::output_within(
                &mut self.command(&["destroy", "infra", "--crds", "--yes"]),
                realenv::COMMAND_LIMIT,
            );
            assert!(
                out.status.success(),
                "bootstrap destroy --crds failed:\n{}\n{}",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }

    /// The shipped `infra` cluster limited to [`RELEASES`] on the loopback
    /// chart repository ([`realenv::infra_root`]), cert-manager's `needs`
    /// dropped so it is applied without coredns.
    fn config_root(url: &str, charts: &Path) -> tempfile::TempDir {
        let root = realenv::infra_root(url, charts, &RELEASES);
        realenv::rewrite(
            root.path(),
            "releases/core.yaml",
            &[(
                "needs: [kube-system/coredns]\ncrds: bootstrap",
                "crds: bootstrap".to_string(),
            )],
        );
        root
    }
}
