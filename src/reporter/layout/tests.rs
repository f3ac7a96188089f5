use std::time::Duration;

use pretty_assertions::assert_eq;

use super::*;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn row(name: &str, step: &str, elapsed: f64) -> Row {
    Row {
        name: name.into(),
        step: step.into(),
        elapsed: secs(elapsed),
    }
}

fn queued(name: &str, on: &[&str]) -> Queued {
    Queued {
        name: name.into(),
        waiting_on: on.iter().map(|s| s.to_string()).collect(),
    }
}

/// The 13-release catalog mid-run.
fn infra() -> Board {
    Board {
        cluster: "infra".into(),
        elapsed: secs(12.3),
        total: 11,
        done: 4,
        running: vec![
            row(
                "kube-system/cilium",
                "rollout DaemonSet/cilium 1/3 ready",
                8.1,
            ),
            row("cert-manager/cert-manager", "installing", 2.0),
        ],
        slot: vec!["spegel".into()],
        queued: vec![
            queued("coredns", &["cilium"]),
            queued("flux-operator", &["coredns", "cert-manager"]),
            queued("flux-instance", &["flux-operator"]),
            queued("external-secrets", &["cert-manager"]),
        ],
        ..Board::default()
    }
}

fn widths(lines: &[String]) -> Vec<usize> {
    lines.iter().map(|l| l.chars().count()).collect()
}

#[test]
fn a_wide_terminal_keeps_the_timers_next_to_the_text() {
    let lines = single(&infra(), 200, 40, 0);
    assert_eq!(
        lines,
        [
            "infra · 2 running · 4 queued · 1 waiting for a helm slot · 4/11 done  12.3s",
            "  ⠋ kube-system/cilium        rollout DaemonSet/cilium 1/3 ready       8.1s",
            "  ⠋ cert-manager/cert-manager installing                               2.0s",
            "  waiting for a helm slot: spegel",
            "  queued: coredns, flux-operator, flux-instance, external-secrets · waiting on cilium, cert-manager",
        ]
    );
}

#[test]
fn at_80_columns_names_and_steps_are_cut_with_an_ellipsis() {
    let mut board = infra();
    board.running[1].step =
        "hook command kubectl wait --for=condition=Ready certificate/webhook -n cert-manager"
            .into();
    let lines = single(&board, 80, 40, 3);
    for (line, width) in lines.iter().zip(widths(&lines)) {
        assert!(width <= 79, "{width}: {line}");
    }
    assert_eq!(
        lines,
        [
            "infra · 2 running · 4 queued · 1 waiting for a helm slot · 4/11 done      12.3s",
            "  ⠸ kube-system/cilium        rollout DaemonSet/cilium 1/3 ready           8.1s",
            "  ⠸ cert-manager/cert-manager hook command kubectl wait --for=condition…   2.0s",
            "  waiting for a helm slot: spegel",
            "  queued: coredns, flux-operator +2 more · waiting on cilium, cert-manager",
        ]
    );
}

#[test]
fn at_80_columns_a_rollout_keeps_its_count_and_loses_its_subject() {
    let mut board = infra();
    board.running[0].name = "external-secrets/external-secrets".into();
    board.running[0].step =
        "rollout Deployment external-secrets/external-secrets-cert-controller 0/1 ready".into();
    let lines = single(&board, 80, 40, 0);
    assert_eq!(
        lines[1],
        "  ⠋ external-secrets/external-secrets rollout Deployment exte… 0/1 ready   8.1s"
    );
    // Where there is no room even for the count, the step is cut at its end.
    assert_eq!(truncate_step("CRDs 1/2 Established", 8), "CRDs 1/…");
    assert_eq!(
        truncate_step("CRDs 1/2 Established", 19),
        "CR… 1/2 Established"
    );
    assert_eq!(truncate_step("installing the chart", 12), "installing…");
}

#[test]
fn long_names_are_cut_before_they_squeeze_the_step_to_nothing() {
    let board = Board {
        cluster: "infra".into(),
        total: 1,
        running: vec![row(
            "a-very-long-namespace-name/an-even-longer-release-name-for-the-test",
            "upgrading",
            1.0,
        )],
        ..Board::default()
    };
    let lines = single(&board, 40, 10, 0);
    assert_eq!(
        lines,
        [
            "infra · 1 running · 0/1 done       0.0s",
            "  ⠋ a-very-long-namesp… upgrading  1.0s",
        ]
    );
    assert!(lines[1].contains('…') && lines[1].contains("upgrading"));
}

#[test]
fn many_queued_releases_collapse_into_one_line() {
    let mut board = infra();
    board.queued = (1..=12)
        .map(|i| queued(&format!("release-{i:02}"), &["cilium"]))
        .collect();
    let lines = single(&board, 80, 40, 0);
    assert_eq!(
        lines.last().unwrap(),
        "  queued: release-01, release-02, release-03 +9 more · waiting on cilium"
    );
    let lines = single(&board, 120, 40, 0);
    assert_eq!(
        lines.last().unwrap(),
        "  queued: release-01, release-02, release-03, release-04, release-05, release-06 +6 more · waiting on cilium"
    );
}

#[test]
fn the_queue_waits_on_what_is_not_itself_queued() {
    let board = Board {
        cluster: "c".into(),
        total: 3,
        queued: vec![queued("b", &["a"]), queued("c", &["b"])],
        running: vec![row("ns/a", "installing", 1.0)],
        ..Board::default()
    };
    let lines = single(&board, 80, 10, 0);
    assert_eq!(lines[2], "  queued: b, c · waiting on a");
}

#[test]
fn the_phase_runs_above_the_releases() {
    let board = Board {
        cluster: "infra".into(),
        dry_run: true,
        elapsed: secs(3.0),
        total: 2,
        phase: Some(row("crds", "CRDs 4/10 Established", 0.5)),
        queued: vec![queued("a", &[]), queued("b", &["a"])],
        ..Board::default()
    };
    assert_eq!(
        single(&board, 100, 10, 1),
        [
            "infra (dry run) · 2 queued · 0/2 done  3.0s",
            "  ⠙ crds CRDs 4/10 Established         0.5s",
            "  queued: a, b",
        ]
    );
}

#[test]
fn a_short_terminal_counts_the_running_releases_it_cannot_show() {
    let mut board = infra();
    board.running = (1..=10)
        .map(|i| row(&format!("ns/r{i}"), "installing", 1.0))
        .collect();
    let lines = single(&board, 80, 8, 0);
    assert_eq!(lines.len(), 7, "{lines:#?}");
    assert_eq!(lines[4], "  … 7 more running");
    assert!(lines[6].starts_with("  queued: "));
}

#[test]
fn a_finished_run_is_its_header_alone() {
    let mut board = infra();
    board.finished = Some(false);
    board.failed = 1;
    let lines = single(&board, 80, 10, 0);
    assert_eq!(
        lines,
        ["infra  ✗ 2 running · 4 queued · 1 for a slot · 4/11 done · 1 failed  12.3s"]
    );
}

fn fleet_board(name: &str, done: usize, running: Vec<Row>) -> Board {
    Board {
        cluster: name.into(),
        elapsed: secs(5.0),
        total: 4,
        done,
        running,
        ..Board::default()
    }
}

#[test]
fn two_clusters_get_a_block_each() {
    let boards = [
        fleet_board(
            "infra",
            1,
            vec![row(
                "kube-system/cilium",
                "rollout DaemonSet/cilium 1/3 ready",
                2.0,
            )],
        ),
        fleet_board(
            "apps-eu",
            3,
            vec![row("kube-system/spegel", "installing", 0.4)],
        ),
    ];
    assert_eq!(
        fleet(&boards, &[], 100, 30, 0),
        [
            "infra    ▸ 1 running · 1/4 done                            5.0s",
            "  ⠋ kube-system/cilium rollout DaemonSet/cilium 1/3 ready  2.0s",
            "apps-eu  ▸ 1 running · 3/4 done                            5.0s",
            "  ⠋ kube-system/spegel installing                          0.4s",
        ]
    );
}

#[test]
fn many_clusters_get_one_line_each() {
    let boards: Vec<Board> = (1..=12)
        .map(|i| {
            let mut b = fleet_board(
                &format!("cluster-{i:02}"),
                i % 4,
                vec![row("kube-system/cilium", "installing", 1.0)],
            );
            if i == 3 {
                b.running.push(row(
                    "kube-system/coredns",
                    "rollout Deployment/coredns 0/2 ready",
                    1.0,
                ));
                b.running.swap(0, 1);
            }
            if i == 4 {
                b.finished = Some(true);
                b.done = 4;
            }
            b
        })
        .collect();
    let lines = fleet(&boards, &[], 80, 40, 0);
    assert_eq!(lines.len(), 12);
    assert_eq!(
        lines[0],
        "cluster-01  ▸ 1/4 done · installing cilium                             5.0s"
    );
    assert_eq!(
        lines[2],
        "cluster-03  ▸ 3/4 done · rollout Deployment/coredns 0/2 ready +1 more  5.0s"
    );
    assert_eq!(
        lines[3],
        "cluster-04  ✓ 4/4 done                                                 5.0s"
    );
    // Not enough rows for a line each: the running ones first, the rest counted.
    let lines = fleet(&boards, &[], 80, 6, 0);
    assert_eq!(lines.len(), 5, "{lines:#?}");
    assert!(lines[..4].iter().all(|l| l.contains('▸')), "{lines:#?}");
    assert_eq!(lines[4], "… 8 more clusters: 7 running · 1 done");
}

#[test]
fn nothing_is_ever_wider_than_the_terminal() {
    let mut board = infra();
    board.cluster = "a-cluster-with-a-name-longer-than-the-terminal-is-wide".into();
    for width in [0, 1, 10, 20, 33, 57, 80, 81, 132, 200] {
        for lines in [
            single(&board, width, 30, 0),
            fleet(&[board.clone(), infra()], &["x".into()], width, 30, 0),
            fleet(&vec![board.clone(); 20], &[], width, 30, 0),
        ] {
            for line in &lines {
                assert!(
                    line.chars().count() < width.max(MIN_WIDTH + 1),
                    "{width}: {line:?}"
                );
            }
        }
    }
}

#[test]
fn truncation_marks_the_cut() {
    assert_eq!(truncate("cert-manager", 12), "cert-manager");
    assert_eq!(truncate("cert-manager", 11), "cert-manag…");
    // No space before the ellipsis.
    assert_eq!(truncate("rollout of DaemonSet", 9), "rollout…");
    assert_eq!(truncate("abc", 0), "");
}

#[test]
fn clusters_waiting_for_their_turn_are_listed_last() {
    let boards = [fleet_board("apps", 1, vec![row("ns/a", "installing", 1.0)])];
    let waiting: Vec<String> = (1..=9).map(|i| format!("edge-{i}")).collect();
    let lines = fleet(&boards, &waiting, 60, 30, 0);
    assert_eq!(
        lines.last().unwrap(),
        "  waiting for their turn: edge-1, edge-2, edge-3 +6 more"
    );
    // Its line counts against the rows: 6 rows leave 4 for the clusters.
    let many: Vec<Board> = (1..=9)
        .map(|i| fleet_board(&format!("c{i}"), 0, vec![]))
        .collect();
    let lines = fleet(&many, &waiting, 60, 6, 0);
    assert_eq!(lines.len(), 5, "{lines:#?}");
    assert!(lines[3].starts_with("… 6 more clusters"), "{lines:#?}");
}

/// Before the release phase the releases wait for the phase, not in a
/// queue behind a release.
#[test]
fn releases_before_the_release_phase_wait_for_the_phase() {
    let board = Board {
        cluster: "infra".into(),
        elapsed: secs(1.0),
        total: 7,
        pending: 7,
        phase: Some(row("crds", "CRDs 1/2 Established", 0.4)),
        ..Board::default()
    };
    let lines = single(&board, 80, 24, 0);
    assert!(
        lines[0].starts_with("infra · 7 waiting for the CRD phase · 0/7 done"),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.contains("queued")), "{lines:?}");
    let board = Board {
        phase: Some(row("preflight", "ledger: 7 entries", 0.4)),
        ..board
    };
    assert!(single(&board, 80, 24, 0)[0].contains("7 waiting for preflight"));
}
