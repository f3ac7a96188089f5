//! The live display as a user sees it (docs/design.md#the-live-display):
//! the real `bootstrap apply` on a pseudo-terminal of 80 and 200 columns,
//! against the loopback cluster and a fake helm slow enough for frames to be
//! seen, its output fed to a terminal emulator whose screen is asserted.
//! Frames are waited for (never a fixed sleep): timing only decides when
//! they show up.

use std::time::Duration;

use serde_json::json;
use testkit::builder::Test;
use testkit::cluster::{CLUSTER, Cluster, RELEASES, crd, daemonset, deployment};
use testkit::pty::Pty;

const WAIT: Duration = Duration::from_secs(30);

/// A release name long enough that 80 columns must cut it.
const LONG: &str = "external-secrets-operator-for-the-whole-fleet";

/// cilium (its DaemonSet reports 1 of 3 pods ready for a while) → coredns
/// → cert-manager (two CRDs, one slow to be Established), spegel and a
/// release with a long name; `--concurrency 1` makes the last three queue
/// for the helm slot.
fn scenario() -> (Cluster, Test) {
    let cluster = Cluster::start();
    let mut ds = daemonset("kube-system", "cilium");
    ds["metadata"]["generation"] = 1.into();
    ds["status"] = json!({"observedGeneration": 1, "desiredNumberScheduled": 3,
        "currentNumberScheduled": 3, "updatedNumberScheduled": 3, "numberReady": 1,
        "numberAvailable": 1, "numberMisscheduled": 0});
    // Scripted before the insert, so the controller stand-in leaves the
    // status above until then.
    cluster.api.set_rollout(
        "DaemonSet",
        "kube-system",
        "cilium",
        kube_loopback::Rollout::After(Duration::from_millis(4500)),
    );
    cluster.api.insert(ds);
    cluster.api.set_crd_establish(
        "issuers.cert-manager.io",
        kube_loopback::Rollout::After(Duration::from_millis(1500)),
    );
    cluster.script(json!({
        "*": {"delay_ms": 700},
        "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
        "cert-manager/cert-manager": {"crds": [
            crd("cert-manager.io", "certificates", "Certificate"),
            crd("cert-manager.io", "issuers", "Issuer")],
            "manifests": [deployment("cert-manager", "cert-manager")]},
    }));
    let releases = format!(
        "{RELEASES}---\nname: {LONG}\nnamespace: external-secrets-system\nchart: {{ oci: oci://example.com/charts/es, version: 1.0.0 }}\nneeds: [coredns]\n"
    );
    let test = Test::new()
        .file("clusters/infra/cluster.yaml", CLUSTER)
        .file("releases/core.yaml", &releases);
    (cluster, test)
}

fn start(cols: u16) -> (Cluster, Test, Pty) {
    let (cluster, test) = scenario();
    let mut cmd = cluster.command(&test, &["apply", "infra", "--concurrency", "1"]);
    // testkit's default for pipes; a terminal user has colour.
    cmd.env_remove("NO_COLOR");
    let pty = Pty::spawn(cmd, 30, cols);
    (cluster, test, pty)
}

/// The lines of the live area in a frame: from the header down.
fn live(frame: &str) -> Vec<&str> {
    let lines: Vec<&str> = frame.lines().collect();
    let top = lines
        .iter()
        .rposition(|l| l.starts_with("infra · "))
        .unwrap_or(lines.len());
    lines[top..]
        .iter()
        .copied()
        .filter(|l| !l.trim().is_empty())
        .collect()
}

/// The column where a line's timer (`12.3s`) ends, if it has one.
fn timer_end(line: &str) -> Option<usize> {
    let trimmed = line.trim_end();
    let last = trimmed.rsplit(' ').next()?;
    let number = last.strip_suffix('s')?;
    number.parse::<f64>().ok().map(|_| trimmed.chars().count())
}

#[test]
fn at_80_columns_the_display_counts_queues_and_cuts_with_an_ellipsis() {
    let (_cluster, _test, pty) = start(80);

    // Preflight over, the CRD phase counts CRDs as they become Established.
    let frame = pty.wait_for(WAIT, |f| f.contains("CRDs 1/2 Established"));
    assert!(live(&frame)[0].contains("5 queued · 0/5 done"), "{frame}");

    // cilium runs, everything else is queued behind it, collapsed on one line.
    let frame = pty.wait_for(WAIT, |f| {
        f.contains("infra · 1 running · 4 queued · 0/5 done")
    });
    let lines = live(&frame);
    assert!(
        lines
            .iter()
            .any(|l| l.trim_start().starts_with("⠋ kube-system/cilium")
                || l.contains("kube-system/cilium")),
        "{frame}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  queued: coredns, cert-manager")
                && l.contains("waiting on cilium")),
        "{frame}"
    );

    // The rollout, counted in pods rather than in controller generations.
    let frame = pty.wait_for(WAIT, |f| f.contains("rollout DaemonSet/cilium 1/3 ready"));
    assert!(!frame.contains("observe generation"), "{frame}");

    // With one helm slot, two of the three releases after coredns wait for it.
    let frame = pty.wait_for(WAIT, |f| {
        f.contains("2 waiting for a helm slot") || f.contains("2 for a slot")
    });
    let lines = live(&frame);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  waiting for a helm slot: ")),
        "{frame}"
    );
    for line in &lines {
        assert!(line.chars().count() < 80, "{line:?} in\n{frame}");
    }

    // The long name is cut, visibly.
    let frame = pty.wait_for(WAIT, |f| f.contains("external-secrets-system/"));
    let line = live(&frame)
        .into_iter()
        .find(|l| l.contains("external-secrets-system/"))
        .unwrap()
        .to_string();
    assert!(
        line.contains('…') && !line.contains(LONG),
        "{line}\n{frame}"
    );

    let (code, text) = pty.finish(WAIT);
    assert_eq!(code, 0, "{text}");
    // What stays: a line per release, then the summary; no live lines.
    assert!(
        text.contains("✓ kube-system/cilium installed in "),
        "{text}"
    );
    // (the terminal wraps it at 80 columns)
    let unwrapped: String = text.lines().collect();
    assert!(
        unwrapped.contains(&format!("✓ external-secrets-system/{LONG} installed in ")),
        "the permanent line keeps the whole name:\n{text}"
    );
    assert!(text.contains("5 installed"), "{text}");
    assert!(!text.contains("infra · "), "the live area is gone:\n{text}");
    assert!(!text.contains("queued: "), "{text}");
}

#[test]
fn at_200_columns_timers_stay_next_to_the_text() {
    let (_cluster, _test, pty) = start(200);
    let frame = pty.wait_for(WAIT, |f| {
        f.contains("rollout DaemonSet/cilium 1/3 ready") && f.contains("queued: ")
    });
    let lines = live(&frame);
    let ends: Vec<usize> = lines.iter().filter_map(|l| timer_end(l)).collect();
    assert!(ends.len() >= 2, "a header and a release, timed:\n{frame}");
    assert!(
        ends.iter().all(|e| *e == ends[0]),
        "one timer column: {ends:?}\n{frame}"
    );
    let longest = lines
        .iter()
        .map(|l| {
            let t = l.trim_end();
            t[..t.rfind(' ').unwrap_or(0)].trim_end().chars().count()
        })
        .max()
        .unwrap();
    assert!(
        ends[0] <= longest + 2 + 6,
        "the timer column is right after the longest text ({longest}), not at the edge: {ends:?}\n{frame}"
    );
    // The long name has room here.
    let frame = pty.wait_for(WAIT, |f| f.contains(LONG));
    assert!(
        live(&frame)
            .iter()
            .any(|l| l.contains(LONG) && !l.contains('…')),
        "{frame}"
    );
    let (code, text) = pty.finish(WAIT);
    assert_eq!(code, 0, "{text}");
}

#[test]
fn no_color_gets_plain_lines_even_on_a_terminal() {
    let (cluster, test) = scenario();
    let mut cmd = cluster.command(&test, &["apply", "infra"]);
    cmd.env("NO_COLOR", "1");
    let pty = Pty::spawn(cmd, 30, 100);
    let (code, text) = pty.finish(WAIT);
    assert_eq!(code, 0, "{text}");
    assert!(!text.contains("infra · "), "no live area:\n{text}");
    assert!(!text.contains('\u{1b}'), "no colour:\n{text}");
    assert!(text.contains("kube-system/cilium: installing"), "{text}");
}
