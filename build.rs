//! Sets `cfg(bootstrap_e2e)` when `BOOTSTRAP_E2E=1`, so the end-to-end suite
//! against a real cluster is reported as ignored, never as passed, unless it
//! was asked for (tests/e2e_kind/main.rs).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(bootstrap_e2e)");
    println!("cargo::rerun-if-env-changed=BOOTSTRAP_E2E");
    if std::env::var("BOOTSTRAP_E2E").as_deref() == Ok("1") {
        println!("cargo::rustc-cfg=bootstrap_e2e");
    }
}
