//! Nothing outlives a dead run, the lock is checked before each step, and a
//! takeover never races a helm that may still be working
//! (docs/design.md#children-and-temporary-files, #cluster-lock,
//! #live-refusal-rules): the real binary against the loopback API server and
//! the fake helm.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::builder::Test;
use testkit::cluster::{CLUSTER, Cluster, RELEASES, daemonset, dead_lease, live_lease};

fn config() -> Test {
    Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file("releases/core.yaml", RELEASES)
}

/// `apply infra --output json` with cilium's helm taking `cilium_ms` and
/// the temporary directory in `tmp`; returns once cilium's helm runs.
fn apply_while_cilium_installs(
    cluster: &Cluster,
    test: &Test,
    tmp: &Path,
    cilium_ms: u64,
) -> Child {
    cluster.script(json!({
        "*": {"delay_ms": 20},
        "kube-system/cilium": {"delay_ms": cilium_ms, "apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
    }));
    let child = cluster
        .command(test, &["apply", "infra", "--output", "json"])
        .env("TMPDIR", tmp)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("cilium's helm to start", || {
        cluster
            .path()
            .join("helm-state/kube-system__cilium.json")
            .exists()
    });
    child
}

fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn signal(child: &Child, name: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Processes (not zombies) whose environment names this cluster's fake-helm
/// state: the fake helms of this test.
fn fake_helms(cluster: &Cluster) -> Vec<u32> {
    let needle = format!(
        "FAKE_HELM_STATE={}",
        cluster.path().join("helm-state").display()
    );
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let named = environ
            .split(|b| *b == 0)
            .any(|var| var == needle.as_bytes());
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        // bootstrap itself carries the variable too: only fake helms count.
        let exe = std::fs::read_link(entry.path().join("exe")).unwrap_or_default();
        let fake = std::fs::canonicalize(testkit::fake_helm()).unwrap_or_default();
        if named && !zombie && exe == fake {
            found.push(pid);
        }
    }
    found
}

/// The values files of bootstrap runs in `tmp`.
fn values_files(tmp: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("bootstrap-") && n.contains(".values-"))
        })
        .collect()
}

fn the_lease(cluster: &Cluster) -> Option<Value> {
    cluster.api.get(
        "coordination.k8s.io/v1",
        "Lease",
        Some("kube-system"),
        "bootstrap-lock",
    )
}

fn outcome_of(stdout: &str, release: &str) -> Option<String> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["event"] == "run_finished")
        .and_then(|e| {
            e["summary"]["releases"]
                .as_array()?
                .iter()
                .find(|r| r["release"] == release)
                .map(|r| r["outcome"].as_str().unwrap_or_default().to_string())
        })
}

/// kill -9 of bootstrap mid-install: its helm gets the parent-death signal
/// and stops instead of working on as an orphan, and the values file the
/// killed run could not remove (it holds secrets) is removed by the next run.
#[test]
fn helm_dies_with_a_killed_run_and_the_next_run_sweeps_its_values_file() {
    let cluster = Cluster::start();
    let test = config();
    let tmp = tempfile::tempdir().unwrap();
    let mut child = apply_while_cilium_installs(&cluster, &test, tmp.path(), 20_000);
    wait_until("cilium's values file", || {
        !values_files(tmp.path()).is_empty()
    });
    assert!(!fake_helms(&cluster).is_empty(), "helm runs");
    signal(&child, "KILL");
    child.wait().unwrap();
    let killed = Instant::now();
    wait_until("the orphaned helm to stop", || {
        fake_helms(&cluster).is_empty()
    });
    assert!(killed.elapsed() < Duration::from_secs(10));
    // The parent-death signal is SIGTERM: helm cancels its operation and
    // records the release failed, so the next run can upgrade it.
    assert_eq!(
        cluster.release_state("kube-system", "cilium").unwrap()["status"],
        "failed"
    );
    assert_eq!(values_files(tmp.path()).len(), 1, "left by the killed run");

    // The Lease is still held (nobody released it): this run stops at the
    // lock, after its prerequisites swept the dead run's files.
    let out = cluster.run(
        &test.env("TMPDIR", &tmp.path().display().to_string()),
        &["apply", "infra"],
    );
    assert_eq!(out.code, 3, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(values_files(tmp.path()), Vec::<PathBuf>::new());
}

/// A closed terminal (SIGHUP) stops the run like SIGTERM: running helm gets
/// its grace period, nothing new starts, the lock is released, no values
/// file is left, exit 130.
#[test]
fn sighup_stops_the_run_like_sigterm() {
    let cluster = Cluster::start();
    let test = config();
    let tmp = tempfile::tempdir().unwrap();
    let child = apply_while_cilium_installs(&cluster, &test, tmp.path(), 1500);
    signal(&child, "HUP");
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stdout}\n{stderr}");
    assert_eq!(
        outcome_of(&stdout, "kube-system/cilium").as_deref(),
        Some("installed"),
        "{stdout}"
    );
    // Never started: skipped (`interrupted` is for what was stopped).
    assert_eq!(
        outcome_of(&stdout, "kube-system/coredns").as_deref(),
        Some("skipped")
    );
    assert!(the_lease(&cluster).is_none(), "lock released");
    assert_eq!(values_files(tmp.path()), Vec::<PathBuf>::new());
    assert!(fake_helms(&cluster).is_empty());
}

/// Another run takes the Lease while cilium installs. The next step (the
/// ledger write of cilium, the start of coredns) checks the lock first and
/// finds it gone, so nothing more is written or started: before, the run
/// noticed only at its next renewal, up to 5 s later, and went on.
#[test]
fn a_lost_lock_is_found_before_the_next_ledger_write_and_release() {
    let cluster = Cluster::start();
    let test = config();
    let tmp = tempfile::tempdir().unwrap();
    let child = apply_while_cilium_installs(&cluster, &test, tmp.path(), 1500);
    wait_until("the lock", || the_lease(&cluster).is_some());
    cluster.api.insert(live_lease("thief@elsewhere pid 1"));
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("it is now held by thief@elsewhere pid 1"),
        "{stderr}"
    );
    assert!(
        !cluster.ledger().contains_key("kube-system.cilium"),
        "no ledger write without the lock"
    );
    assert!(
        cluster.release_state("kube-system", "coredns").is_none(),
        "nothing new started"
    );
}

/// A takeover finds a release the dead run left `pending-install` only
/// seconds ago: a helm of that run could still be working on it, so it is
/// refused with the time to wait, and nothing is uninstalled.
#[test]
fn a_takeover_refuses_a_pending_install_a_helm_may_still_be_working_on() {
    let cluster = after_a_dead_run(10);
    let out = cluster.run(&config(), &["apply", "infra", "--timeout", "60s"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(
        said.contains("was left pending-install at ")
            && said.contains(
                "by job-infra-1 pid 1, whose expired lock this run took over; a helm of that run may still be working on it for up to 10m"
            )
            && said.contains("(its helm timeout 10m plus 1m): run `bootstrap apply` again after that"),
        "{said}"
    );
    assert!(
        !cluster
            .helm_calls()
            .iter()
            .any(|c| c.command() == "uninstall coredns"),
        "nothing uninstalled"
    );
    assert_eq!(
        cluster.release_state("kube-system", "coredns").unwrap()["status"],
        "pending-install"
    );

    // The refusal said to run again later. That next run takes a released
    // Lease, not an expired one: the refusing run passed the dead run on in
    // it, so the next run still knows whose pending release it is (before,
    // it refused it as anyone's, asking for `helm uninstall` by hand).
    assert_passed_on(&cluster);
    // Later: the record is older than the dead run's helm timeout plus 1m.
    let record = cluster.path().join("helm-state/kube-system__coredns.json");
    let mut state: Value =
        serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    state["updated"] = json!(k8s_now_minus(3600));
    std::fs::write(&record, state.to_string()).unwrap();
    the_next_run_installs_coredns_afresh(&cluster);
}

/// A run whose machine's clock is behind this one's (by 30 s, 40 s and an
/// hour) keeps renewing its Lease: its `renewTime`, written by its own
/// clock, looks expired here. The second run watches the Lease, sees it
/// renewed, and refuses (exit 3) naming the holder, with no helm call: two
/// runs never both hold the lock, whatever the clocks say.
#[test]
fn a_live_run_whose_clock_is_behind_keeps_its_lock() {
    for behind in [30, 40, 3600].map(Duration::from_secs) {
        let cluster = Cluster::start();
        cilium_installs(&cluster);
        let renewing = std::sync::atomic::AtomicBool::new(true);
        let out = std::thread::scope(|scope| {
            scope.spawn(|| {
                while renewing.load(std::sync::atomic::Ordering::Relaxed) {
                    let skewed = testkit::cluster::rfc3339(std::time::SystemTime::now() - behind);
                    let holder = testkit::cluster::lease("alice@laptop pid 4242", &skewed);
                    cluster.api.insert(holder);
                    std::thread::sleep(Duration::from_millis(500));
                }
            });
            // The renewer has written once before the run starts.
            wait_until("the first renewal", || the_lease(&cluster).is_some());
            let out = cluster.run(&config(), &["apply", "infra"]);
            renewing.store(false, std::sync::atomic::Ordering::Relaxed);
            out
        });
        let said = format!("{}{}", out.stdout, out.stderr);
        assert_eq!(out.code, 3, "{behind:?} behind: {said}");
        assert!(
            out.stderr.contains(
                "another bootstrap apply holds the lock on this cluster: alice@laptop pid 4242"
            ),
            "{said}"
        );
        // Not renewed within 30 s by this clock: watched, not taken.
        if behind > Duration::from_secs(30) {
            assert!(said.contains("watching it for 30s"), "{said}");
        }
        assert!(cluster.installs().is_empty(), "{behind:?} behind: {said}");
        assert!(cluster.ledger().is_empty());
    }
}

/// A run whose machine's clock was an hour ahead died: its Lease's
/// `renewTime` is in this machine's future. The next run does not wait for
/// the hour; it watches the Lease unchanged for its declared duration and
/// takes it over.
#[test]
fn a_dead_run_whose_clock_was_ahead_is_taken_over_after_its_duration() {
    let cluster = Cluster::start();
    cilium_installs(&cluster);
    let ahead = testkit::cluster::rfc3339(std::time::SystemTime::now() + Duration::from_secs(3600));
    let mut dead = testkit::cluster::lease("bob@ci pid 7", &ahead);
    dead["spec"]["leaseDurationSeconds"] = json!(2);
    cluster.api.insert(dead);
    let started = Instant::now();
    let out = cluster.run(&config(), &["apply", "infra"]);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(out.code, 0, "{said}");
    assert!(
        said.contains("took over the bootstrap lock of bob@ci pid 7: it went unrenewed for 2s"),
        "{said}"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "watched for its 2 s"
    );
    assert_eq!(the_lease(&cluster), None, "released at the end");
}

/// A cluster after the dead run of the takeover tests: its Lease expired
/// long ago (helm timeout 10m recorded), coredns left `pending-install`
/// `ago` seconds ago; the fake helm installs cilium's DaemonSet.
fn after_a_dead_run(ago: u64) -> Cluster {
    let cluster = Cluster::start();
    cilium_installs(&cluster);
    std::fs::write(
        cluster.path().join("helm-state/kube-system__coredns.json"),
        serde_json::to_string(&json!({"name": "coredns", "namespace": "kube-system", "revision": 1,
            "status": "pending-install", "chart": "coredns", "version": "1.44.3", "app_version": "1.12.0",
            "values": {}, "labels": {}, "updated": k8s_now_minus(ago), "manifest": ""}))
        .unwrap(),
    )
    .unwrap();
    let mut dead = dead_lease("job-infra-1 pid 1");
    dead["metadata"]["annotations"]["bootstrap/helm-timeout-seconds"] = json!("600");
    cluster.api.insert(dead);
    cluster
}

/// The fake helm installs cilium's DaemonSet, the others at once.
fn cilium_installs(cluster: &Cluster) {
    cluster.script(json!({
        "*": {"delay_ms": 20},
        "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
    }));
}

/// The Lease is released with no holder and the dead run recorded in it,
/// and coredns is still as the dead run left it.
fn assert_passed_on(cluster: &Cluster) {
    let released = the_lease(cluster).expect("the released Lease is kept");
    assert_eq!(released["spec"]["holderIdentity"], Value::Null);
    assert_eq!(
        released["metadata"]["annotations"]["bootstrap/left-by"],
        "job-infra-1 pid 1"
    );
    assert_eq!(
        released["metadata"]["annotations"]["bootstrap/left-by-helm-timeout-seconds"],
        "600"
    );
    assert_eq!(
        cluster.release_state("kube-system", "coredns").unwrap()["status"],
        "pending-install"
    );
}

/// The run after the one that passed the dead run on: it takes the
/// released Lease with that run in it, installs coredns afresh (its record
/// is older than the dead run's helm timeout plus 1m), and, with nothing
/// of the dead run left, deletes the Lease.
fn the_next_run_installs_coredns_afresh(cluster: &Cluster) {
    let out = cluster.run(&config(), &["apply", "infra", "--timeout", "60s"]);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(out.code, 0, "{said}");
    assert!(
        said.contains(
            "kube-system/coredns was left pending-install by job-infra-1 pid 1, whose expired lock an earlier run took over; uninstalled it to install it afresh"
        ),
        "{said}"
    );
    assert_eq!(
        cluster.release_state("kube-system", "coredns").unwrap()["status"],
        "deployed"
    );
    assert!(the_lease(cluster).is_none(), "nothing left to pass on");
}

/// A takeover run that does not select the dead run's pending release
/// (`--only` another) passes the dead run on, as one that refused it does:
/// before, it deleted the Lease, and the next run refused the release as
/// anyone's, asking for `helm uninstall` by hand.
#[test]
fn a_takeover_that_does_not_select_the_pending_release_passes_the_dead_run_on() {
    let cluster = after_a_dead_run(3600);
    let out = cluster.run(&config(), &["apply", "infra", "--only", "cilium"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        !cluster
            .helm_calls()
            .iter()
            .any(|c| c.command().contains("coredns")),
        "coredns touched"
    );
    assert_passed_on(&cluster);
    the_next_run_installs_coredns_afresh(&cluster);
}

/// A takeover run stopped before the dead run's pending release (cilium,
/// which coredns needs, fails; `--fail-fast`) passes the dead run on too.
#[test]
fn a_takeover_stopped_before_the_pending_release_passes_the_dead_run_on() {
    let cluster = after_a_dead_run(3600);
    cluster.script(json!({
        "*": {"delay_ms": 20},
        "kube-system/cilium": {"fail": "Error: context deadline exceeded"},
    }));
    let out = cluster.run(&config(), &["apply", "infra", "--fail-fast"]);
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert_passed_on(&cluster);
    cilium_installs(&cluster);
    the_next_run_installs_coredns_afresh(&cluster);
}

/// A takeover finds a release the dead run left `pending-upgrade` long ago
/// (older than its helm timeout plus the margin): no helm can be working on
/// it, so it is rolled back to the revision before and upgraded again, and
/// the run converges. Before, it was refused until someone ran
/// `helm rollback` by hand.
#[test]
fn a_takeover_rolls_back_an_abandoned_pending_upgrade_and_upgrades_it() {
    let cluster = Cluster::start();
    cilium_installs(&cluster);
    std::fs::write(
        cluster.path().join("helm-state/kube-system__coredns.json"),
        serde_json::to_string(&json!({"name": "coredns", "namespace": "kube-system", "revision": 2,
            "status": "pending-upgrade", "chart": "coredns", "version": "1.44.3", "app_version": "1.12.0",
            "values": {}, "labels": {}, "updated": k8s_now_minus(3600), "manifest": "",
            "history": [{"revision": 1, "updated": k8s_now_minus(7200), "status": "deployed",
                         "chart": "coredns", "version": "1.44.2", "app_version": "1.12.0",
                         "description": "Install complete"}]}))
        .unwrap(),
    )
    .unwrap();
    let mut dead = dead_lease("job-infra-1 pid 1");
    dead["metadata"]["annotations"]["bootstrap/helm-timeout-seconds"] = json!("600");
    cluster.api.insert(dead);
    let out = cluster.run(&config(), &["apply", "infra", "--timeout", "60s"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(
        said.contains(
            "kube-system/coredns was left pending-upgrade by job-infra-1 pid 1, whose expired lock this run took over; rolled it back to the revision before to upgrade it again"
        ),
        "{said}"
    );
    let commands: Vec<String> = cluster.helm_calls().iter().map(|c| c.command()).collect();
    let rollback = commands
        .iter()
        .position(|c| c == "rollback coredns")
        .expect("rolled back");
    assert!(
        commands[rollback..]
            .iter()
            .any(|c| c.starts_with("upgrade coredns")),
        "{commands:?}"
    );
    let state = cluster.release_state("kube-system", "coredns").unwrap();
    assert_eq!(state["status"], "deployed");
    assert_eq!(state["revision"], 4, "rollback, then the upgrade");
    assert!(cluster.ledger().contains_key("kube-system.coredns"));
}

/// `destroy` after a takeover does not read which releases the dead run
/// left pending, so it passes that run on; the next `apply` recovers
/// coredns and, with nothing left, lets the dead run go.
#[test]
fn a_destroy_that_took_over_passes_the_dead_run_on() {
    let cluster = after_a_dead_run(3600);
    let out = cluster.run(
        &config(),
        &["destroy", "infra", "--yes", "--only", "spegel"],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_passed_on(&cluster);
    the_next_run_installs_coredns_afresh(&cluster);
}

/// RFC 3339 for `secs` seconds ago.
fn k8s_now_minus(secs: u64) -> String {
    let t = std::time::SystemTime::now() - Duration::from_secs(secs);
    bootstrap::duration::timestamp(t)
}

const CILIUM: &str = "name: cilium
namespace: kube-system
chart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }
";

/// Runs `plan infra` in `test`, killed (and failed) if it takes 20 s.
fn plan_bounded(test: &Test) -> (i32, String) {
    let mut child = test
        .command()
        .args(["plan", "infra"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("plan hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

/// A FIFO named like a release file used to hang every command (reading it
/// waits for a writer), and a directory by such a name was skipped
/// silently: both are config errors naming the file, exit 2, at once.
#[test]
fn a_fifo_or_directory_named_like_a_release_file_is_an_error_not_a_hang() {
    let test = Test::with_releases(CILIUM);
    mkfifo(&test.path().join("releases/x.yaml"));
    std::fs::create_dir(test.path().join("releases/d.yaml")).unwrap();
    let (code, stderr) = plan_bounded(&test);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(
        stderr,
        "error: releases/d.yaml: is a directory, not a file: a config file must be a regular file or a symlink to one\n\
         error: releases/x.yaml: is a FIFO (named pipe), not a file: a config file must be a regular file or a symlink to one\n\
         error: 2 problems in the config; nothing was changed\n"
    );
    // A FIFO as a values file, and as cluster.yaml.
    let test = Test::with_releases(&format!("{CILIUM}valuesFiles: [values/v.yaml]\n"))
        .file("releases/values/keep", "");
    mkfifo(&test.path().join("releases/values/v.yaml"));
    let (code, stderr) = plan_bounded(&test);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("releases/core.yaml:4:15: release `kube-system/cilium`: values file `values/v.yaml` is a FIFO (named pipe), not a file"),
        "{stderr}"
    );
    let test = Test::new().file("releases/core.yaml", CILIUM);
    std::fs::create_dir_all(test.path().join("clusters/infra")).unwrap();
    mkfifo(&test.path().join("clusters/infra/cluster.yaml"));
    let (code, stderr) = plan_bounded(&test);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("clusters/infra/cluster.yaml: is a FIFO"),
        "{stderr}"
    );
}

/// A chart `name` beginning with `-` would reach helm's argv as a flag
/// (`--dry-run` was seen): it is refused, at its line.
#[test]
fn a_chart_name_that_looks_like_a_flag_is_refused() {
    let test = Test::with_releases(
        "name: cilium\nnamespace: kube-system\nchart: { repo: https://helm.cilium.io, name: --dry-run, version: 1.18.2 }\n",
    );
    let (code, stderr) = plan_bounded(&test);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.starts_with("error: releases/core.yaml:3:")
            && stderr.contains("chart `name: --dry-run` is not a chart name"),
        "{stderr}"
    );
}

/// Broken inputs are reported at their line: text that is not UTF-8,
/// `overrides` naming an unknown release, a values file that is not a map.
#[test]
fn broken_inputs_are_reported_at_their_line() {
    let test = Test::new()
        .file("clusters/infra/cluster.yaml", "name: infra\n")
        .file("releases/core.yaml", CILIUM);
    std::fs::write(
        test.path().join("releases/bin.yaml"),
        b"name: x\nnamespace: y\n\x00\xff\xfe garbage\n",
    )
    .unwrap();
    let (_, stderr) = plan_bounded(&test);
    assert!(
        stderr.contains(
            "error: releases/bin.yaml:3:2: is not UTF-8 text (byte 0xff at line 3, column 2)"
        ),
        "{stderr}"
    );

    let test = Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            "name: infra\noverrides:\n  cilium:\n    timeout: 1m\n  ciliun:\n    timeout: 2m\n",
        )
        .file("releases/core.yaml", CILIUM);
    let (code, stderr) = plan_bounded(&test);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.starts_with("error: clusters/infra/cluster.yaml:5:3: `overrides` names"),
        "{stderr}"
    );

    let test = Test::with_releases(&format!("{CILIUM}valuesFiles: [values/v.yaml]\n"))
        .file("releases/values/v.yaml", "# a list, not a map\n- a\n- b\n");
    let (code, stderr) = plan_bounded(&test);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains(
            "error: releases/values/v.yaml:2:1: release `kube-system/cilium`: a values file must be a YAML map, not a list"
        ),
        "{stderr}"
    );
}

/// The API server answers 503 to everything from the middle of the run on,
/// with `--timeout 6s`: every retry (the ledger write of the release that
/// was installing included) ends by the deadline, the wait says why it goes
/// on, and the error is in words. Before, the ledger write alone retried for
/// about 60 s without a line, and the error carried Rust debug output.
#[test]
fn an_api_that_goes_away_mid_run_ends_the_run_by_its_timeout() {
    let cluster = Cluster::start();
    // One release without hooks: what follows its helm is the ledger write.
    let test = Test::with_releases(CILIUM);
    let tmp = tempfile::tempdir().unwrap();
    cluster.script(json!({"*": {"delay_ms": 1500}}));
    let started = Instant::now();
    let child = cluster
        .command(&test, &["apply", "infra", "--timeout", "6s"])
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("cilium's helm to start", || {
        cluster
            .path()
            .join("helm-state/kube-system__cilium.json")
            .exists()
    });
    cluster.api.fail_next(usize::MAX / 2, 503);
    let out = child.wait_with_output().unwrap();
    let took = started.elapsed();
    let stderr = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(took < Duration::from_secs(6 + 6), "took {took:?}\n{stderr}");
    assert!(
        stderr.contains("waiting for the Kubernetes API server (for "),
        "{stderr}"
    );
    assert!(
        !stderr.contains("Status {") && !stderr.contains("ApiError:"),
        "{stderr}"
    );
}

/// helm killed outright mid-install (the OOM killer, say) leaves its
/// release pending-install. This run holds the lock and its helm is gone,
/// so nobody can be working on the release: it is uninstalled at once, the
/// release fails saying so, and the next run installs it. Before, every
/// later run refused it until someone ran `helm uninstall` by hand.
#[test]
fn a_release_whose_helm_was_killed_is_recovered_for_the_next_run() {
    let cluster = Cluster::start();
    let test = config();
    let tmp = tempfile::tempdir().unwrap();
    let child = apply_while_cilium_installs(&cluster, &test, tmp.path(), 5_000);
    for pid in fake_helms(&cluster) {
        let status = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(
            "helm install exited with a signal; the release was left pending-install and no helm is working on it any more: uninstalled it, so the next run installs it afresh"
        ),
        "{stdout}"
    );
    assert!(cluster.release_state("kube-system", "cilium").is_none());

    cilium_installs(&cluster);
    let out = cluster.run(&test, &["apply", "infra"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
}
