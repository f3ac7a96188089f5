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
use testkit::fleet::{Fleet, fleet_releases};
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
    // status above until the test completes the rollout ([`roll_out`]).
    cluster.api.set_rollout(
        "DaemonSet",
        "kube-system",
        "cilium",
        kube_loopback::Rollout::Never,
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

/// Every pod of cilium's DaemonSet available, as its controller would say.
fn roll_out(cluster: &Cluster) {
    let mut ds = cluster
        .api
        .get("apps/v1", "DaemonSet", Some("kube-system"), "cilium")
        .expect("cilium's DaemonSet");
    let generation = ds["metadata"]["generation"].clone();
    ds["status"]["observedGeneration"] = generation;
    ds["status"]["numberReady"] = 3.into();
    ds["status"]["numberAvailable"] = 3.into();
    cluster.api.insert(ds);
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
    let (cluster, _test, pty) = start(80);

    // Preflight over, the CRD phase counts CRDs as they become Established.
    // Before the release phase nothing is "queued" behind a release: the
    // releases wait for the phase.
    let frame = pty.wait_for(WAIT, |f| f.contains("CRDs 1/2 Established"));
    assert!(
        live(&frame)[0].contains("5 waiting for the CRD phase · 0/5 done"),
        "{frame}"
    );
    assert!(!frame.contains("queued"), "{frame}");

    // cilium runs, everything else is queued behind it, collapsed on one line.
    // A frame is written line by line: wait for the whole of it, not only
    // its header.
    let frame = pty.wait_for(WAIT, |f| {
        f.contains("infra · 1 running · 4 queued · 0/5 done") && f.contains("  queued: coredns")
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
    roll_out(&cluster);

    // With one helm slot, two of the three releases after coredns wait for it.
    let frame = pty.wait_for(WAIT, |f| {
        (f.contains("2 waiting for a helm slot") || f.contains("2 for a slot"))
            && f.contains("  waiting for a helm slot: ")
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

    let bytes = pty.bytes();
    let (code, text) = pty.finish(WAIT);
    assert_eq!(code, 0, "{text}");
    // Frames drawn whole (synchronized updates), the cursor hidden while the
    // live area is up and shown again at the end.
    let bytes = String::from_utf8_lossy(&bytes.lock().unwrap()).into_owned();
    assert!(bytes.contains("\x1b[?2026h") && bytes.contains("\x1b[?2026l"));
    let hidden = bytes.find("\x1b[?25l").expect("the cursor is hidden");
    let shown = bytes.rfind("\x1b[?25h").expect("the cursor is shown again");
    assert!(shown > hidden && !bytes[shown..].contains("\x1b[?25l"));
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
    // The summary fits the 80 columns: a block per release (the table's
    // columns do not fit beside the long name), the critical path broken
    // at an arrow; no line the terminal would wrap but one holding the
    // long name, which is never cut.
    let plain = console::strip_ansi_codes(&bytes).replace("\r\n", "\n");
    let start = plain.rfind("\nkube-system/cilium\n");
    let summary = &plain[start.unwrap_or_else(|| panic!("no block per release:\n{plain}"))..];
    for line in summary.lines() {
        assert!(
            line.chars().count() <= 80 || line.contains(LONG),
            "`{line}` is wider than the terminal:\n{summary}"
        );
    }
    assert!(summary.contains("\n  → "), "{summary}");
}

#[test]
fn ctrl_c_on_the_terminal_leaves_no_live_line_behind() {
    let (_cluster, _test, mut pty) = start(80);
    // A frame with the release waiting on its rollout, the line under the
    // header as wide as the display makes it.
    pty.wait_for(WAIT, |f| {
        f.contains("rollout DaemonSet/cilium 1/3 ready") && f.contains("  queued: coredns")
    });
    // Ctrl-C as a user types it: the terminal echoes ^C where the cursor is
    // and signals the foreground process group.
    let modes = pty.local_modes();
    assert_eq!(
        modes.get() & libc::ECHOCTL,
        0,
        "no ^C echo while the live area is up"
    );
    pty.press(b"\x03");
    // The first waits for the running release; the second stops at once.
    pty.wait_for(WAIT, |f| f.contains("Ctrl-C again stops"));
    pty.press(b"\x03");
    let (code, text) = pty.finish(WAIT);
    assert_ne!(
        modes.get() & libc::ECHOCTL,
        0,
        "the terminal's echo of ^C is given back"
    );
    assert_eq!(code, 130, "{text}");
    // The redraws that follow the echo erase the live area whole: no header
    // or queue line left in the scrollback.
    assert!(!text.contains("infra · "), "a stale header stays:\n{text}");
    assert!(!text.contains("queued: "), "{text}");
    assert!(!text.contains("rollout DaemonSet/cilium"), "{text}");
    assert_eq!(
        text.matches("! interrupting: waiting up to ").count(),
        1,
        "{text}"
    );
    assert!(
        text.contains("kube-system/cilium") && text.contains("interrupted"),
        "{text}"
    );
}

#[test]
fn at_200_columns_timers_stay_next_to_the_text() {
    let (cluster, _test, pty) = start(200);
    let frame = pty.wait_for(WAIT, |f| {
        f.contains("rollout DaemonSet/cilium 1/3 ready") && f.contains("queued: ")
    });
    roll_out(&cluster);
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
    // The long name has room here: some frame's live area shows it whole
    // (none does: the wait fails, listing every frame). The first frame
    // that names it anywhere is not that frame on a loaded machine, where a
    // redraw can be read half written.
    pty.wait_for(WAIT, |f| {
        live(f).iter().any(|l| l.contains(LONG) && !l.contains('…'))
    });
    let (code, text) = pty.finish(WAIT);
    assert_eq!(code, 0, "{text}");
}

#[test]
fn no_color_gets_plain_lines_even_on_a_terminal() {
    let (cluster, test) = scenario();
    let mut cmd = cluster.command(&test, &["apply", "infra"]);
    cmd.env("NO_COLOR", "1");
    let pty = Pty::spawn(cmd, 30, 100);
    pty.wait_for(WAIT, |f| f.contains("1 of 3 updated pods"));
    roll_out(&cluster);
    let (code, text) = pty.finish(WAIT);
    assert_eq!(code, 0, "{text}");
    assert!(!text.contains("infra · "), "no live area:\n{text}");
    assert!(!text.contains('\u{1b}'), "no colour:\n{text}");
    assert!(text.contains("kube-system/cilium: installing"), "{text}");
}

/// A cluster's live line (its header, or its one line), not one of its
/// tagged permanent lines: `apps   ▸ 1 running · …`.
fn is_header(line: &str, cluster: &str) -> bool {
    line.strip_prefix(cluster)
        .is_some_and(|rest| rest.trim_start().starts_with("▸ ") && rest.starts_with(' '))
}

/// `apply` of `names` from one process, on a terminal of 40 rows × `cols`.
fn fleet_apply(names: &[&str], cols: u16, args: &[&str]) -> (Fleet, Test, Pty) {
    let fleet = Fleet::start(names);
    fleet.script(json!({
        "*": {"delay_ms": 600},
        "kube-system/cilium": {"apply_manifests": true, "manifests": [daemonset("kube-system", "cilium")]},
    }));
    // The first cluster's cilium takes a while to roll out.
    let first = names[0];
    fleet.api(first).set_rollout(
        "DaemonSet",
        "kube-system",
        "cilium",
        kube_loopback::Rollout::After(Duration::from_millis(2500)),
    );
    let test = fleet.config(&fleet_releases());
    let mut cmd = fleet.command(&test, &[&["apply", "--all"], args].concat());
    cmd.env_remove("NO_COLOR");
    let pty = Pty::spawn(cmd, 40, cols);
    (fleet, test, pty)
}

#[test]
fn two_clusters_get_a_block_each_with_their_releases_beneath() {
    let (_fleet, _test, pty) = fleet_apply(&["apps", "infra"], 100, &[]);
    // Both clusters' headers, each followed by its own running release.
    let frame = pty.wait_for(WAIT, |f| {
        let lines: Vec<&str> = f.lines().collect();
        let header = |name: &str| lines.iter().position(|l| is_header(l, name));
        match (header("apps"), header("infra")) {
            (Some(a), Some(i)) => {
                lines.get(a + 1).is_some_and(|l| l.contains("kube-system/"))
                    && lines.get(i + 1).is_some_and(|l| l.contains("kube-system/"))
            }
            _ => false,
        }
    });
    assert!(frame.contains("/4 done"), "{frame}");
    let frame = pty.wait_for(WAIT, |f| f.contains("infra  ✓ 4/4 done"));
    assert!(frame.lines().any(|l| is_header(l, "apps")), "{frame}");
    let (code, text) = pty.finish(WAIT);
    assert_eq!(code, 0, "{text}");
    // The permanent lines are tagged; the live area is gone.
    assert!(
        text.contains("infra │ ✓ kube-system/cilium installed in "),
        "{text}"
    );
    assert!(
        text.contains("apps  │ ✓ kube-system/spegel installed in "),
        "{text}"
    );
    assert!(text.contains("2 of 2 clusters applied"), "{text}");
    assert!(!text.contains("  ▸ "), "{text}");
}

#[test]
fn many_clusters_get_one_line_each() {
    let names: Vec<String> = (1..=12).map(|i| format!("cluster-{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let (_fleet, _test, pty) = fleet_apply(&refs, 80, &[]);
    let frame = pty.wait_for(WAIT, |f| {
        names.iter().all(|n| f.lines().any(|l| is_header(l, n)))
    });
    let live: Vec<&str> = frame
        .lines()
        .filter(|l| l.starts_with("cluster-") && !l.contains(" │ "))
        .collect();
    assert_eq!(live.len(), 12, "one line per cluster:\n{frame}");
    assert!(
        !frame
            .lines()
            .any(|l| l.starts_with("  ") && l.contains("kube-system/")),
        "no release lines beneath:\n{frame}"
    );
    for line in &live {
        assert!(line.contains("/4 done"), "{line}");
        assert!(line.chars().count() < 80, "{line}");
    }
    // What the first cluster waits on, in its line.
    pty.wait_for(WAIT, |f| {
        f.lines()
            .any(|l| is_header(l, "cluster-01") && l.contains("rollout DaemonSet/cilium"))
    });
    let (code, text) = pty.finish(Duration::from_secs(60));
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("12 of 12 clusters applied"), "{text}");
}

#[test]
fn clusters_waiting_for_their_turn_are_named() {
    let (_fleet, _test, pty) = fleet_apply(
        &["apps", "edge", "infra"],
        100,
        &["--cluster-concurrency", "1"],
    );
    let running = |f: &str| {
        ["apps", "edge", "infra"]
            .iter()
            .any(|c| f.lines().any(|l| is_header(l, c)))
    };
    let frame = pty.wait_for(WAIT, |f| {
        running(f)
            && f.lines()
                .any(|l| l.starts_with("  waiting for their turn: "))
    });
    // One cluster runs; the two others wait, named.
    let waiting = frame
        .lines()
        .find(|l| l.starts_with("  waiting for their turn: "))
        .unwrap();
    assert_eq!(waiting.matches(", ").count(), 1, "two clusters: {waiting}");
    assert_eq!(
        ["apps", "edge", "infra"]
            .iter()
            .filter(|c| frame.lines().any(|l| is_header(l, c)))
            .count(),
        1,
        "{frame}"
    );
    let (code, text) = pty.finish(Duration::from_secs(60));
    assert_eq!(code, 0, "{text}");
    assert!(!text.contains("waiting for their turn"), "{text}");
}

/// `cmd` run by `bash -c script` on the terminal, with `"$@"` in the
/// script standing for the command (its environment and directory kept):
/// bash is the terminal's session leader and foreground group, as a
/// user's shell running a script or a task-runner target is.
fn in_shell(cmd: std::process::Command, script: &str) -> std::process::Command {
    let mut shell = std::process::Command::new("bash");
    shell
        .arg("-c")
        .arg(script)
        .arg("bash")
        .arg(cmd.get_program());
    shell.args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(value) => shell.env(key, value),
            None => shell.env_remove(key),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        shell.current_dir(dir);
    }
    shell
}

/// `apply` started by `script` on a terminal of 100 columns runs to the end
/// once cilium rolls out, and says what happened in plain lines when it is
/// not the terminal's foreground; the terminal's settings are untouched.
fn runs_to_the_end(script: &str, live_display: bool) -> String {
    let (cluster, test) = scenario();
    let mut cmd = cluster.command(&test, &["apply", "infra"]);
    cmd.env_remove("NO_COLOR");
    let pty = Pty::spawn(in_shell(cmd, script), 30, 100);
    let modes = pty.local_modes();
    let before = modes.get();
    // A process stopped by SIGTTOU shows nothing: this wait fails then.
    pty.wait_for(WAIT, |f| {
        f.contains("1 of 3 updated pods") || f.contains("rollout DaemonSet/cilium 1/3 ready")
    });
    if !live_display {
        assert_eq!(modes.get(), before, "the terminal's settings are untouched");
    }
    roll_out(&cluster);
    let (code, text) = pty.finish(WAIT);
    assert_eq!(code, 0, "{script}:\n{text}");
    assert!(text.contains("5 installed"), "{script}:\n{text}");
    assert_eq!(modes.get(), before, "the terminal's settings come back");
    if !live_display {
        assert!(
            text.contains("kube-system/cilium: installing"),
            "plain lines: {script}:\n{text}"
        );
        assert!(
            !text.contains("infra · "),
            "no live area: {script}:\n{text}"
        );
    }
    text
}

#[test]
fn under_timeout_in_a_script_apply_runs_to_the_end() {
    // timeout(1) puts the command in a process group of its own, outside
    // the terminal's foreground: changing the terminal's settings from
    // there stopped the run (SIGTTOU) until timeout killed it.
    runs_to_the_end(r#"timeout 120 "$@"; exit $?"#, false);
}

#[test]
fn in_the_background_apply_runs_to_the_end() {
    // `set -m`: job control, as in an interactive shell: `cmd &` gets a
    // process group of its own, in the background.
    runs_to_the_end(r#"set -m; "$@" & wait $!"#, false);
}

#[test]
fn under_setsid_with_stdin_closed_or_stdout_a_pipe_apply_runs_to_the_end() {
    // A session of its own: the terminal is not its controlling terminal.
    runs_to_the_end(r#"setsid -w "$@""#, false);
    // stdout a pipe: the log gets plain lines.
    runs_to_the_end(r#""$@" | cat; exit "${PIPESTATUS[0]}""#, false);
    // stdin closed, in the foreground: the live display, as on any terminal.
    runs_to_the_end(r#""$@" <&-"#, true);
}

/// The resize test's waits: tmux's server, a capture of the whole
/// scrollback every 50 ms and the run share the machine with every other
/// suite in CI.
const RESIZE_WAIT: Duration = Duration::from_secs(90);

/// Resized mid-run in a terminal that reflows (tmux), wider and narrower
/// (80 → 200 → 80 → 60 → 200 columns), the display keeps every permanent
/// line, in scrollback and on screen, exactly once, and leaves no stale
/// frame behind.
#[test]
#[cfg_attr(
    not(tmux),
    ignore = "needs tmux, a terminal that reflows when resized: apt install tmux"
)]
fn resizing_the_terminal_keeps_every_permanent_line_and_leaves_no_stale_frame() {
    let (cluster, test) = scenario();
    let mut cmd = cluster.command(&test, &["apply", "infra", "--concurrency", "1"]);
    cmd.env_remove("NO_COLOR");
    let tmux = testkit::tmux::Tmux::start(&cmd, 80, 30);
    // cilium waits for its pods: the live area is up, below the lines the
    // CRD phase left.
    let before = tmux.wait_for(RESIZE_WAIT, |t| t.contains("infra · 1 running"));
    let permanent: Vec<String> = before
        .lines()
        .filter(|l| l.starts_with('✓'))
        .map(|l| l.trim_end().to_string())
        .collect();
    assert!(!permanent.is_empty(), "{before}");
    let headers = before.lines().filter(|l| l.starts_with("infra · ")).count();
    assert_eq!(headers, 1, "before any resize, a stale frame:\n{before}");
    for cols in [200, 80, 60, 200] {
        tmux.resize(cols, 30);
        // Two frames drawn at the new size (the timers change every frame).
        for _ in 0..2 {
            let shown = tmux.capture();
            tmux.wait_for(RESIZE_WAIT, |t| t != shown);
        }
        let now = tmux.capture();
        for line in &permanent {
            assert_eq!(
                now.lines().filter(|l| l.trim_end() == line).count(),
                1,
                "at {cols} columns, `{line}` is not shown once:\n{now}"
            );
        }
        let headers = now.lines().filter(|l| l.starts_with("infra · ")).count();
        assert_eq!(headers, 1, "at {cols} columns, a stale frame:\n{now}");
    }
    roll_out(&cluster);
    assert_eq!(tmux.wait_exit(RESIZE_WAIT), 0, "{}", tmux.capture());
    let after = tmux.capture();
    for line in &permanent {
        assert_eq!(
            after.lines().filter(|l| l.trim_end() == line).count(),
            1,
            "`{line}` is not shown once:\n{after}"
        );
    }
    assert!(
        !after.lines().any(|l| l.starts_with("infra · ")),
        "a stale frame:\n{after}"
    );
    for release in [
        "kube-system/cilium",
        "kube-system/coredns",
        "cert-manager/cert-manager",
    ] {
        assert_eq!(
            after
                .lines()
                .filter(|l| l.starts_with('✓') && l.contains(release) && l.contains("installed"))
                .count(),
            1,
            "{release}:\n{after}"
        );
    }
}
