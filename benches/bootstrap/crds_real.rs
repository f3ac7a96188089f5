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

    use serde_json::Value;
    use testkit::realenv::{self, ChartRepo, ControlPlane};

    use crate::verdict;

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
        let cold = setup.crd_phase("apply");
        let unchanged = setup.crd_phase("apply");
        setup.destroy_crds();
        let fresh = setup.crd_phase("apply");
        println!(
            "releases {}: 21 CRDs; real helm 4, kube-apiserver (load average {})",
            RELEASES.join(", "),
            crate::load_average()
        );
        println!("  cold chart cache, fresh cluster          {cold:>8.0} ms");
        println!("  warm chart cache, every CRD unchanged    {unchanged:>8.0} ms");
        println!("  warm chart cache, every CRD created      {fresh:>8.0} ms");
        verdict(
            "CRD phase with a warm chart cache < 0.3 s (CRDs unchanged)",
            unchanged < 300.0,
            format!("{unchanged:.0} ms"),
        );
        verdict(
            "CRD phase with a warm chart cache < 0.3 s (CRDs created)",
            fresh < 300.0,
            format!("{fresh:.0} ms"),
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

        /// Milliseconds of the CRD phase of `COMMAND infra --output json`.
        fn crd_phase(&self, command: &str) -> f64 {
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
                    .and_then(|e| e["elapsed_ms"].as_f64())
                    .unwrap_or_else(|| panic!("no {event} of the CRD phase in:\n{stdout}"))
            };
            let last = |event: &str| {
                events
                    .iter()
                    .filter(|e| e["event"] == event)
                    .filter_map(|e| e["elapsed_ms"].as_f64())
                    .fold(0.0, f64::max)
            };
            let start = at("phase_started");
            println!(
                "    ({command}: last CRD applied at {:.0} ms, last Established at {:.0} ms into the phase)",
                last("crd_applied") - start,
                last("crd_established") - start
            );
            at("phase_finished") - start
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
