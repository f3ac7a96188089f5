//! Sets `cfg(kubectl)` when `kubectl` is on PATH, so the self-test that
//! drives the server with kubectl is reported as ignored, never as passed or
//! failed, on a machine without it (.ci/run installs kubectl).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(kubectl)");
    println!("cargo::rerun-if-env-changed=PATH");
    if kubectl_on_path() {
        println!("cargo::rustc-cfg=kubectl");
    }
}

/// Whether `kubectl` is on PATH (checked when the tests are built).
fn kubectl_on_path() -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join("kubectl").is_file()))
}
