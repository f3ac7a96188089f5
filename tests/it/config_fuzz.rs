//! The config schema under random mutation, as a mutation campaign tried
//! it by hand: a valid config root (a cluster with overrides, releases
//! with needs, values, templates, hooks and timeouts) is mutated a few
//! edits at a time (a value swapped for an edge value, a line deleted,
//! duplicated, swapped or re-indented, a stray character inserted) and
//! `plan` (every case) and `check` (every fourth) run on it. Whatever the
//! input: exit 0, 1 or 2 only, no panic, an error line first on failure,
//! never an empty cause, and an answer within 20 s. The seed is fixed, so
//! every run draws the same cases (docs/design.md#validation).

use std::time::{Duration, Instant};

use testkit::Rng;
use testkit::builder::Test;

const CASES: usize = 400;

const CLUSTER: &str = "name: infra
context: admin@infra
overrides:
  cilium:
    values:
      k8sServicePort: 6443
      ipam: { mode: kubernetes }
  coredns:
    timeout: 5m
";

const RELEASES: &str = "name: cilium
namespace: kube-system
chart: { repo: https://helm.cilium.io, name: cilium, version: 1.18.2 }
timeout: 10m
values:
  k8sServiceHost: 10.0.0.1
  cluster: { name: \"{{ cluster.name }}\" }
  kubeProxyReplacement: true
hooks:
  postsync:
    - rollout: { kind: DaemonSet, name: cilium }
    - condition: { apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, name: ciliumnetworkpolicies.cilium.io, type: Established }
---
name: coredns
namespace: kube-system
chart: { repo: https://coredns.github.io/helm, name: coredns, version: 1.44.3 }
needs: [cilium]
labels: { tier: core }
values:
  replicaCount: 2
---
name: cert-manager
namespace: cert-manager
chart: { repo: https://charts.jetstack.io, name: cert-manager, version: v1.19.0 }
needs: [coredns]
values: { crds: { enabled: false } }
crdValues: { crds: { enabled: true } }
---
name: spegel
namespace: kube-system
chart: { oci: oci://ghcr.io/spegel-org/helm-charts/spegel, version: 0.4.0 }
needs: [coredns]
hooks:
  postsync:
    - command: [sh, -c, 'true']
";

/// Values a mutation puts where a scalar was: the edges of every type the
/// schema reads (durations, names, URLs, versions, templates, YAML's own
/// literals and tags).
const EDGES: &[&str] = &[
    "",
    "~",
    "null",
    "[]",
    "{}",
    "-1",
    "0",
    "18446744073709551615",
    "1e309",
    "18446744073709551615s",
    "99999999999999999999h",
    "0s",
    "1ns",
    "-5m",
    "\"a b\"",
    "--dry-run",
    "oci://ghcr.io/x y/z",
    "oci://",
    "https://",
    "http://h:0/x",
    "yes",
    "0644",
    "2024-01-01",
    "{{",
    "\"{{ nope }}\"",
    "\"{{#each cluster}}{{/each}}\"",
    "kube-system/cilium",
    "../../../etc/passwd",
    "/",
    "&anchor x",
    "*missing",
    "!!binary aGk=",
    "!!map {}",
    "[a, [b, [c]]]",
    "\"\\u0000\"",
    "é",
    "\"\u{feff}x\"",
    "v1.2.3-rc.1+build",
    ">=1.0.0",
    "cilium",
    "[cilium, cilium]",
    "[coredns]",
    "[spegel]",
];

/// Characters a mutation inserts anywhere.
const STRAYS: &[&str] = &[
    "{", "}", "[", "]", ":", ": ", "'", "\"", "&", "*", "!", "%", "#", "\t", "-", "? ", "|", ">",
    "\u{0}", "é", "\u{feff}", "\r", "@", "`",
];

/// A draw in `0..n` as an index.
fn pick(rng: &mut Rng, n: usize) -> usize {
    rng.below(n as u64) as usize
}

/// One edit of `text`, described for the failure message.
fn mutate(rng: &mut Rng, text: &str) -> (String, String) {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let at = pick(rng, lines.len());
    let what = match pick(rng, 6) {
        0 => {
            let edge = EDGES[pick(rng, EDGES.len())];
            let line = &lines[at];
            match line.find(": ") {
                Some(colon) => lines[at] = format!("{}: {edge}", &line[..colon]),
                None => lines[at] = format!("{line} {edge}"),
            }
            format!("line {} value → `{edge}`", at + 1)
        }
        1 => {
            lines.remove(at);
            format!("line {} deleted", at + 1)
        }
        2 => {
            let line = lines[at].clone();
            lines.insert(at, line);
            format!("line {} duplicated", at + 1)
        }
        3 => {
            let other = pick(rng, lines.len());
            lines.swap(at, other);
            format!("lines {} and {} swapped", at + 1, other + 1)
        }
        4 => {
            let indent = [" ", "  ", "   ", "\t"][pick(rng, 4)];
            lines[at] = if pick(rng, 2) == 0 {
                format!("{indent}{}", lines[at])
            } else {
                lines[at].trim_start().to_string()
            };
            format!("line {} re-indented", at + 1)
        }
        _ => {
            let stray = STRAYS[pick(rng, STRAYS.len())];
            let line = &lines[at];
            let mut cut = pick(rng, line.len() + 1);
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            lines[at] = format!("{}{stray}{}", &line[..cut], &line[cut..]);
            format!("line {} gets {stray:?} at column {}", at + 1, cut + 1)
        }
    };
    let mut out = lines.join("\n");
    out.push('\n');
    (out, what)
}

/// Runs `bootstrap ARGS` in `test`, killed (and failed) after 20 s.
fn run_bounded(test: &Test, args: &[&str], case: &str) -> (i32, String, String) {
    let mut child = test
        .command()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("`bootstrap {}` hung on {case}", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn mutated_configs_get_an_answer_never_a_panic() {
    let mut rng = Rng(0x5eed_b007_c0ff_ee42);
    let mut codes = std::collections::BTreeMap::new();
    for case in 0..CASES {
        let (mut cluster, mut releases) = (CLUSTER.to_string(), RELEASES.to_string());
        let mut edits = Vec::new();
        for _ in 0..1 + pick(&mut rng, 3) {
            let (file, text) = if pick(&mut rng, 4) == 0 {
                ("cluster.yaml", &mut cluster)
            } else {
                ("releases/core.yaml", &mut releases)
            };
            let (mutated, what) = mutate(&mut rng, text);
            *text = mutated;
            edits.push(format!("{file}: {what}"));
        }
        let described = format!("case {case} ({})", edits.join("; "));
        let test = Test::new()
            .file("clusters/infra/cluster.yaml", &cluster)
            .file("releases/core.yaml", &releases);
        let commands: &[&[&str]] = if case % 4 == 0 {
            &[&["plan", "infra"], &["check", "infra"]]
        } else {
            &[&["plan", "infra"]]
        };
        for args in commands {
            let (code, stdout, stderr) = run_bounded(&test, args, &described);
            let said = || {
                format!(
                    "{described}, `{}`: exit {code}\n--- cluster.yaml\n{cluster}--- releases/core.yaml\n{releases}--- stdout\n{stdout}--- stderr\n{stderr}",
                    args.join(" ")
                )
            };
            assert!(matches!(code, 0..=2), "{}", said());
            assert!(
                !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
                "{}",
                said()
            );
            if code != 0 {
                assert!(
                    stderr.lines().any(|l| l.starts_with("error: ")),
                    "{}",
                    said()
                );
            }
            let lines: Vec<&str> = stderr.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                if *line == "Caused by:" {
                    let next = lines.get(i + 1).map_or("", |l| l.trim());
                    assert!(!next.is_empty(), "an empty cause: {}", said());
                }
            }
            *codes.entry((args[0], code)).or_insert(0usize) += 1;
        }
    }
    // The campaign reaches every answer: accepted, refused by a lint or
    // check, and invalid.
    eprintln!("exit codes by command: {codes:?}");
    assert!(
        codes.get(&("plan", 0)).is_some_and(|n| *n > 10),
        "{codes:?}"
    );
    assert!(
        codes.get(&("plan", 2)).is_some_and(|n| *n > 100),
        "{codes:?}"
    );
}
