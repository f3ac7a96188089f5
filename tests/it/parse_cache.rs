//! The parse cache (docs/design.md#parse-cache) as a user meets it: a run
//! with a warm cache prints what a run without one prints, to the byte,
//! errors and their file:line:column included; an edited file (a release
//! file or a values file) is read again; each cluster keeps the values
//! files it read; a broken cache is ignored; `--no-parse-cache` and
//! `BOOTSTRAP_NO_PARSE_CACHE` turn it off.

use std::path::{Path, PathBuf};

use testkit::builder::{Output, Test};

const RELEASES: &str = "name: cilium
namespace: kube-system
chart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }
values:
  ipam: { mode: kubernetes }
---
name: coredns
namespace: kube-system
chart: { repo: https://coredns.github.io/helm, name: coredns, version: 1.44.3 }
needs: [cilium]
timeout: 5m
";

/// Problems found after the parse, each at its line and column: they come
/// from the cached parse on a warm run.
const CHECKED: &str = "name: cilium
namespace: kube-system
chart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }
timeout: soon
---
name: coredns
namespace: kube-system
chart: { repo: https://coredns.github.io/helm, name: coredns, version: 1.44.3 }
valuesFiles: [missing.yaml]
---
name: web
namespace: apps
chart: { repo: https://charts.example.com, name: web, version: 1.0.0 }
needs: [coredns, cilum]
";

/// Release files that read values files, a plain one and a template that
/// renders another text for each release and cluster. The floats are ones
/// serde_json's fast parser reads back one unit off.
const WITH_VALUES: &str = "name: web
namespace: apps
chart: { repo: https://charts.example.com, name: web, version: 1.0.0 }
valuesFiles: [values/common.yaml, values/release.yaml.hbs]
---
name: api
namespace: apps
chart: { repo: https://charts.example.com, name: api, version: 2.0.0 }
valuesFiles: [values/common.yaml, values/release.yaml.hbs]
";
const COMMON: &str =
    "ratio: 1.0715660391465826e-75\nscale: -1.81996730402717e-179\nlist: [a, 0.1]\n";
const PER_RELEASE: &str = "who: \"{{cluster.name}}/{{release.name}}\"\nreplicas: 2\n";

fn with_values() -> Test {
    Test::with_releases(WITH_VALUES)
        .file("releases/values/common.yaml", COMMON)
        .file("releases/values/release.yaml.hbs", PER_RELEASE)
        .file("clusters/apps/cluster.yaml", "name: apps\n")
}

fn packs(test: &Test) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(test.cache_dir().join("parsed")) else {
        return Vec::new();
    };
    let mut packs: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pack"))
        .collect();
    packs.sort();
    packs
}

fn same(a: &Output, b: &Output) {
    assert_eq!(a.stdout, b.stdout);
    assert_eq!(a.stderr, b.stderr);
    assert_eq!(a.code, b.code);
}

/// The run of `test` with `args` added: cold (an empty cache), warm, and
/// without the cache, all alike; the warm run read the pack and left it as
/// it was.
fn warm_is_cold(test: Test, args: &[&str]) -> Output {
    let off = test
        .command()
        .args(args)
        .arg("--no-parse-cache")
        .output()
        .unwrap();
    let run = |test: &Test| -> Output { test.command().args(args).output().unwrap().into() };
    assert!(packs(&test).is_empty(), "--no-parse-cache wrote a pack");
    let cold = run(&test);
    let written = packs(&test);
    // One for the config root's release files, and one for the values
    // files of each cluster planned (the fleet lints plan every cluster).
    assert!(!written.is_empty());
    let state = || {
        written
            .iter()
            .map(|p| {
                let modified = std::fs::metadata(p).unwrap().modified().unwrap();
                (std::fs::read(p).unwrap(), modified)
            })
            .collect::<Vec<_>>()
    };
    let before = state();
    let warm = run(&test);
    assert_eq!(packs(&test), written);
    assert!(
        state() == before,
        "a warm run with nothing changed writes nothing"
    );
    same(&cold, &warm);
    assert_eq!(cold.stdout, String::from_utf8_lossy(&off.stdout));
    assert_eq!(cold.stderr, String::from_utf8_lossy(&off.stderr));
    assert_eq!(Some(cold.code), off.status.code());
    warm
}

#[test]
fn a_warm_plan_prints_what_a_cold_one_prints() {
    for args in [
        &["plan", "infra"][..],
        &["plan", "infra", "-v"],
        &["plan", "infra", "-q"],
        &["plan", "infra", "-o", "json"],
    ] {
        let out = warm_is_cold(Test::with_releases(RELEASES), args);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    }
}

/// Every command that reads the config root goes through the cache, and
/// prints the same warm as cold.
#[test]
fn graph_and_template_read_through_the_cache_too() {
    for args in [&["graph", "infra"][..], &["template", "infra", "cilium"]] {
        let out = warm_is_cold(Test::with_releases(RELEASES), args);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    }
}

/// Values files come from the cluster's pack on a warm run, floats to the
/// last bit, and each release and cluster gets its own rendering.
#[test]
fn values_files_read_through_the_cache_print_the_same() {
    for args in [
        &["plan", "infra", "-v"][..],
        &["plan", "infra", "-o", "json"],
    ] {
        let test = with_values();
        let out = warm_is_cold(test, args);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    }
    let out = warm_is_cold(with_values(), &["template", "apps", "api"]);
    assert!(
        out.stdout
            .contains("ratio: 1.0715660391465826e-75\nscale: -1.81996730402717e-179\n"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("who: apps/api\n"), "{}", out.stdout);
}

#[test]
fn an_edited_values_file_is_read_again() {
    let test = with_values().args(&["template", "infra", "web"]);
    assert_eq!(test.run().code, 0);
    let test = test.file(
        "releases/values/common.yaml",
        &COMMON.replace("0.1]", "0.25]"),
    );
    let edited = test.run();
    assert_eq!(edited.code, 0, "{}", edited.stderr);
    assert!(edited.stdout.contains("- 0.25\n"), "{}", edited.stdout);
    // An edit that breaks it is reported at its line, not hidden by the cache.
    let test = test.file("releases/values/common.yaml", "list: [a\n");
    let broken = test.run();
    assert_eq!(broken.code, 2, "{}", broken.stdout);
    assert!(
        broken.stderr.contains("releases/values/common.yaml:"),
        "{}",
        broken.stderr
    );
}

/// A values template that reads the environment renders a token: its text
/// is never written to the cache, and a changed variable is seen.
#[test]
fn a_template_that_reads_the_environment_is_never_kept() {
    let test = with_values().file(
        "releases/values/release.yaml.hbs",
        "token: {{env \"BOOTSTRAP_TEST_TOKEN\"}}\n",
    );
    let template = |token: &str| {
        let out: Output = test
            .command()
            .args(["template", "infra", "web", "--show-secrets"])
            .env("BOOTSTRAP_TEST_TOKEN", token)
            .output()
            .unwrap()
            .into();
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.stdout
    };
    assert!(template("s3cr3t-one").contains("token: s3cr3t-one\n"));
    assert!(template("s3cr3t-two").contains("token: s3cr3t-two\n"));
    let written = packs(&test);
    assert!(!written.is_empty());
    for pack in written {
        let bytes = std::fs::read(&pack).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("s3cr3t"), "{}: {text}", pack.display());
    }
}

/// Planning one cluster does not drop what another cluster's plan keeps:
/// `plan infra`, `plan apps`, `plan infra` writes no pack the third time.
#[test]
fn each_cluster_keeps_its_own_values_pack() {
    let test = with_values();
    let plan = |cluster: &str| {
        let out: Output = test
            .command()
            .args(["plan", cluster])
            .output()
            .unwrap()
            .into();
        assert_eq!(out.code, 0, "{}", out.stderr);
    };
    plan("infra");
    plan("apps");
    let written = packs(&test);
    assert_eq!(written.len(), 3, "{written:?}");
    let state = || {
        written
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().modified().unwrap())
            .collect::<Vec<_>>()
    };
    let before = state();
    plan("infra");
    plan("apps");
    assert_eq!(state(), before, "a pack was written again");
}

#[test]
fn errors_after_the_parse_keep_their_positions_warm() {
    let out = warm_is_cold(Test::with_releases(CHECKED), &["plan", "infra"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("releases/core.yaml:4:10: release `kube-system/cilium`: timeout"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("releases/core.yaml:14:18: release `apps/web`: needs"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("releases/core.yaml:9:15: release `kube-system/coredns`: values file `missing.yaml` does not exist"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_parse_error_is_reported_alike_warm() {
    // The good file is cached, the broken one never is: each run parses it.
    let test =
        Test::with_releases(RELEASES).file("releases/zz.yaml", "name: web\nnamespace: [apps\n");
    let out = warm_is_cold(test, &["plan", "infra"]);
    assert_eq!(
        out.stderr,
        "error: releases/zz.yaml:2:12: `namespace` must be a single text value, not a list or a map\n"
    );
}

#[test]
fn an_edited_file_is_read_again() {
    let test = Test::with_releases(RELEASES).args(&["plan", "infra"]);
    let first = test.run();
    assert!(first.stdout.contains("1.18.2"), "{}", first.stdout);
    let test = test.file("releases/core.yaml", &RELEASES.replace("1.18.2", "1.18.3"));
    let second = test.run();
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(second.stdout.contains("1.18.3"), "{}", second.stdout);
    assert!(!second.stdout.contains("1.18.2"), "{}", second.stdout);
    // And an edit that breaks it is reported, not hidden by the cache.
    let test = test.file(
        "releases/core.yaml",
        &RELEASES.replace("timeout: 5m", "timeout: [5m"),
    );
    let third = test.run();
    assert_eq!(third.code, 2);
    assert!(
        third.stderr.starts_with("error: releases/core.yaml:11:"),
        "{}",
        third.stderr
    );
}

#[test]
fn a_broken_cache_is_ignored_and_written_again() {
    let test = Test::with_releases(RELEASES).args(&["plan", "infra"]);
    let cold = test.run();
    let pack = packs(&test).pop().unwrap();
    let good = std::fs::read(&pack).unwrap();
    let mut flipped = good.clone();
    let at = good.len() - 20;
    flipped[at] ^= 0x20;
    for broken in [
        flipped,
        good[..good.len() / 3].to_vec(),
        b"\0\0garbage".to_vec(),
        Vec::new(),
    ] {
        std::fs::write(&pack, &broken).unwrap();
        let out = test.run();
        same(&cold, &out);
        assert_eq!(
            std::fs::read(&pack).unwrap(),
            good,
            "the pack is written again"
        );
    }
    // A pack that is not a file at all.
    std::fs::remove_file(&pack).unwrap();
    std::fs::create_dir(&pack).unwrap();
    same(&cold, &test.run());
}

#[test]
fn the_cache_can_be_turned_off() {
    let test = Test::with_releases(RELEASES).args(&["plan", "infra"]);
    let off = test
        .command()
        .env("BOOTSTRAP_NO_PARSE_CACHE", "1")
        .output()
        .unwrap();
    assert_eq!(off.status.code(), Some(0));
    assert!(packs(&test).is_empty());
    assert!(!Path::new(&test.cache_dir().join("parsed")).exists());
    let on = test
        .command()
        .env("BOOTSTRAP_NO_PARSE_CACHE", "0")
        .output()
        .unwrap();
    assert_eq!(on.stdout, off.stdout);
    assert_eq!(packs(&test).len(), 1);
}
