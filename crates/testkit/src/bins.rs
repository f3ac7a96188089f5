//! Where the two binaries the tests run are: `bootstrap` (the product, a bin
//! of the root package) and `fake-helm` (a bin of crates/fake-helm).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

/// The `bootstrap` binary.
///
/// Cargo builds a package's bins before it runs that package's integration
/// tests and benches, and tells them where they are in `CARGO_BIN_EXE_<name>`:
/// at compile time (to the test crate itself, not to this library) and at run
/// time, which is what this reads. A test binary started by hand, without
/// cargo, falls back to cargo's layout: the bin sits in the profile
/// directory, one level above the test binary in its `deps/`.
pub fn bootstrap() -> &'static str {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(|| {
        std::env::var("CARGO_BIN_EXE_bootstrap").unwrap_or_else(|_| {
            let path = profile_dir().join(format!("bootstrap{}", std::env::consts::EXE_SUFFIX));
            utf8(path)
        })
    })
}

/// The `fake-helm` binary, built on first use.
///
/// fake-helm is a bin of another workspace member, and cargo hands a
/// package's tests only the package's own bins (artifact dependencies, which
/// would hand over another package's, are unstable). Making it a bin of the
/// root package again would make `cargo install --path .` install it. So the
/// first call in a test process builds it, once (`OnceLock`, other callers
/// wait), with the cargo that runs the tests (`CARGO`):
///
/// `cargo build --manifest-path <workspace>/Cargo.toml --locked --profile
///  <profile> --workspace --bin fake-helm --examples
///  --message-format=json-render-diagnostics`
///
/// - `--profile`: the running test binary's (`dev` in target/debug, `release`
///   in target/release, where `cargo bench` builds), and the same target
///   directory (the same configuration and environment), so the build reuses
///   what the outer cargo has compiled.
/// - `--workspace ... --examples`: the packages and features `cargo test` and
///   `cargo bench` at the workspace root build with (every member, with
///   dev-dependencies). The workspace has no examples: asking for them only
///   makes cargo resolve features with dev-dependencies, as the outer build
///   did, so fake-helm links the very bootstrap library the tests use and
///   nothing is compiled twice in different feature sets. After a plain
///   `cargo test`, which has already built fake-helm for its own tests, the
///   build is fresh and takes a fraction of a second; after
///   `cargo test --test it apply::` it compiles only fake-helm itself.
/// - `--locked`: the outer cargo has settled Cargo.lock; this never changes it.
/// - The executable's path comes from cargo's JSON messages, not from
///   guessing the layout.
///
/// Cargo releases the build directory's lock before it runs the tests, so
/// this nested build does not wait for the one that started the tests.
pub fn fake_helm() -> &'static str {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(build_fake_helm)
}

fn build_fake_helm() -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_string());
    let manifest = workspace_root().join("Cargo.toml");
    let profile = match profile_dir().file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev".to_string(),
        Some(dir) => dir.to_string(),
    };
    let mut cmd = Command::new(&cargo);
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(set_by_cargo_for_tests) {
            cmd.env_remove(key);
        }
    }
    let out = cmd
        .arg("build")
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--locked")
        .args(["--profile", &profile])
        .args(["--workspace", "--bin", "fake-helm", "--examples"])
        .arg("--message-format=json-render-diagnostics")
        .output()
        .unwrap_or_else(|e| panic!("running {cargo} to build fake-helm: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "building fake-helm failed ({}):\n{stderr}",
        out.status
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|msg| msg["reason"] == "compiler-artifact" && msg["target"]["name"] == "fake-helm")
        .find_map(|msg| msg["executable"].as_str().map(String::from))
        .unwrap_or_else(|| panic!("cargo built no fake-helm executable:\n{stderr}"))
}

/// Variables cargo sets for the test process that describe the test's own
/// package (CARGO_MANIFEST_DIR, CARGO_PKG_NAME, OUT_DIR, ...). Passed on, they
/// would reach the nested cargo's build scripts: ring's, for one, reruns when
/// CARGO_MANIFEST_DIR changes, so the nested build and the next `cargo test`
/// would each make the other rebuild half the dependency graph.
fn set_by_cargo_for_tests(key: &str) -> bool {
    [
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
        "OUT_DIR",
    ]
    .contains(&key)
        || key.starts_with("CARGO_PKG_")
        || key.starts_with("CARGO_BIN_EXE_")
}

/// The repository (workspace) root: this crate is crates/testkit.
pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/testkit has a grandparent")
        .to_path_buf()
}

/// target/<profile>: the running test or bench binary is in its `deps/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut dir = exe.parent().expect("the test binary's directory");
    if dir.ends_with("deps") {
        dir = dir.parent().expect("deps/ has a parent");
    }
    dir.to_path_buf()
}

fn utf8(path: PathBuf) -> String {
    path.into_os_string()
        .into_string()
        .unwrap_or_else(|p| panic!("{} is not UTF-8", p.to_string_lossy()))
}
