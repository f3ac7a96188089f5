//! Section 11, at a distance: apply's preflight and `status` against an API
//! server 0, 20 and 100 ms away (the loopback server's latency, ±10 %
//! jitter: half of each round trip before a request is served, half after),
//! for 20, 200 and 1,000 releases spread over 10 namespaces, every release
//! installed (at no latency, not counted) and none with CRDs of its own to
//! render (`crds: chart`), so preflight is its API reads and one `helm list`.
//!
//! Each row counts the API requests and how many of them the run waited
//! for one after another (`kube_loopback::serial_depth`: the round trips on
//! the critical path). Those counts do not depend on the machine; the times
//! do (a shared machine: docs/BENCHMARKS.md says the load). Preflight is
//! timed by its own phase events and its requests are those the server
//! received between them (the events' `time`, to the millisecond); the run
//! is stopped once preflight has finished and its Lease deleted. `status` is
//! the whole command; its helm processes are counted apart (the fake helm
//! answers from files: a real helm's `history` or `list` is one API round
//! trip or more of its own).
//!
//! Then a `needs` edge at the same distances: chains of 10 and 20 releases, each
//! needing the one before, installed by an instant fake helm on a fresh
//! cluster; the release phase (its own events) divided by the chain's
//! length gives each step's time and its requests, serial ones apart, and
//! the difference between the two chains what one more edge costs, free of
//! what a run pays once: what a dependent waits for after the release it
//! needs has finished in helm (the ledger record, the lock checks, the next
//! step's start).

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use kube_loopback::{Request, serial_depth};
use serde_json::{Value, json};
use testkit::builder::Test;
use testkit::cluster::Cluster;

use super::applyrun::Clock;
use super::stats::median;
use super::{Mode, verdict};

const SIZES: [usize; 3] = [20, 200, 1_000];
const RTTS_MS: [u64; 3] = [0, 20, 100];
const NAMESPACES: usize = 10;

/// `count` releases of one chart, round-robin over the namespaces, no needs,
/// CRDs left to helm.
fn catalog(count: usize) -> Test {
    let releases: String = (0..count)
        .map(|i| {
            format!(
                "---\nname: r{i:04}\nnamespace: ns{}\nchart: {{ repo: https://charts.example.com, name: app, version: 1.0.0 }}\ncrds: chart\n",
                i % NAMESPACES
            )
        })
        .collect();
    Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            "name: infra\ncontext: admin@infra\n",
        )
        .file("releases/many.yaml", &releases)
}

/// Unix ms of an event's `time` (RFC 3339, ms).
fn event_unix_ms(event: &Value) -> f64 {
    let time = event["time"].as_str().expect("an event's time");
    let at: k8s_openapi::jiff::Timestamp = time.parse().expect("RFC 3339");
    at.as_millisecond() as f64
}

/// What one measured command did.
struct Figures {
    ms: f64,
    requests: usize,
    serial: usize,
    helm: usize,
}

/// Apply's preflight on the installed cluster: its phase's duration, and
/// the requests received while it ran.
fn preflight(cluster: &Cluster, test: &Test) -> Figures {
    cluster.api.clear_request_log();
    let helm_before = cluster.helm_calls().len();
    let mut cmd = cluster.command(
        test,
        &["apply", "infra", "--output", "json", "--concurrency", "16"],
    );
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    let clock = Clock::now();
    let mut child = cmd.spawn().expect("start bootstrap");
    let stdout = child.stdout.take().expect("its stdout");
    let (mut started, mut finished) = (None, None);
    for line in BufReader::new(stdout).lines() {
        let Ok(event) = serde_json::from_str::<Value>(&line.expect("a line")) else {
            continue;
        };
        if event["phase"] != "preflight" {
            continue;
        }
        match event["event"].as_str() {
            Some("phase_started") => started = Some(event),
            Some("phase_finished") => {
                finished = Some(event);
                break;
            }
            _ => {}
        }
    }
    // Our own child, stopped by its id; its helm processes get SIGTERM from
    // the kernel (their parent-death signal).
    let _ = child.kill();
    let _ = child.wait();
    let (started, finished) = (
        started.expect("preflight started"),
        finished.expect("preflight finished"),
    );
    cluster.api.delete(
        "coordination.k8s.io/v1",
        "Lease",
        Some("kube-system"),
        "bootstrap-lock",
    );
    let (ms, requests, (from, to)) = between(cluster, &clock, &started, &finished);
    let helm = cluster.helm_calls()[helm_before..]
        .iter()
        .filter(|c| c.argv[0] != "version")
        .filter(|c| {
            let at = c.start_ms as f64;
            at >= from && at <= to
        })
        .count();
    Figures {
        ms,
        requests: requests.len(),
        serial: serial_depth(&requests),
        helm,
    }
}

/// `bootstrap status infra`, the whole command.
fn status(cluster: &Cluster, test: &Test) -> Figures {
    cluster.api.clear_request_log();
    let helm_before = cluster.helm_calls().len();
    let started = Instant::now();
    let out = cluster.run(test, &["status", "infra", "--output", "json"]);
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(out.code, 0, "status: {}\n{}", out.stdout, out.stderr);
    let requests = cluster.api.request_log();
    let helm = cluster.helm_calls()[helm_before..]
        .iter()
        .filter(|c| c.argv[0] != "version")
        .count();
    Figures {
        ms,
        requests: requests.len(),
        serial: serial_depth(&requests),
        helm,
    }
}

/// The milliseconds between two events of a run and the API requests the
/// server received between them (whole milliseconds: the window is widened
/// by one at each end), and that window in Unix milliseconds.
fn between(
    cluster: &Cluster,
    clock: &Clock,
    started: &Value,
    finished: &Value,
) -> (f64, Vec<Request>, (f64, f64)) {
    let ms = finished["elapsedMs"].as_f64().unwrap() - started["elapsedMs"].as_f64().unwrap();
    let (from, to) = (event_unix_ms(started) - 1.0, event_unix_ms(finished) + 1.0);
    let requests = cluster
        .api
        .request_log()
        .into_iter()
        .filter(|r| {
            let at = clock.unix_ms(r.received);
            at >= from && at <= to
        })
        .collect();
    (ms, requests, (from, to))
}

/// Releases in the `needs` chain; the longer one is measured too, so the
/// cost of one more edge is the difference, free of what a run pays once
/// (the ledger's creation by the first record, the end-of-run check).
const CHAIN: usize = 10;
const LONGER: usize = 20;

/// The chain `c0 <- c1 <- …` of `n` releases, one namespace, CRDs left to helm.
fn chain_catalog(n: usize) -> Test {
    let releases: String = (0..n)
        .map(|i| {
            let needs = if i == 0 {
                String::new()
            } else {
                format!("needs: [c{}]\n", i - 1)
            };
            format!(
                "---\nname: c{i}\nnamespace: chain\nchart: {{ repo: https://charts.example.com, name: app, version: 1.0.0 }}\ncrds: chart\n{needs}"
            )
        })
        .collect();
    Test::new()
        .file(
            "clusters/infra/cluster.yaml",
            "name: infra\ncontext: admin@infra\n",
        )
        .file("releases/chain.yaml", &releases)
}

/// A whole apply of the chain at `rtt`: its release phase's ms, requests
/// and serial requests.
fn chain(test: &Test, rtt: Duration) -> (f64, f64, f64) {
    let cluster = Cluster::start();
    cluster.script(json!({"*": {"delay_ms": 0}}));
    cluster.api.set_latency(rtt, rtt / 10);
    let clock = Clock::now();
    let out = cluster.run(test, &["apply", "infra", "--output", "json"]);
    assert_eq!(out.code, 0, "chain: {}\n{}", out.stdout, out.stderr);
    let events: Vec<Value> = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let at = |name: &str| {
        events
            .iter()
            .find(|e| e["event"] == name && e["phase"] == "releases")
            .expect("release phase events")
            .clone()
    };
    let (started, finished) = (at("phase_started"), at("phase_finished"));
    let (ms, requests, _) = between(&cluster, &clock, &started, &finished);
    (ms, requests.len() as f64, serial_depth(&requests) as f64)
}

fn median_of(figures: &[Figures]) -> Figures {
    let pick = |f: &dyn Fn(&Figures) -> f64| median(&figures.iter().map(f).collect::<Vec<_>>());
    Figures {
        ms: pick(&|f| f.ms),
        requests: pick(&|f| f.requests as f64) as usize,
        serial: pick(&|f| f.serial as f64) as usize,
        helm: pick(&|f| f.helm as f64) as usize,
    }
}

pub fn run(mode: Mode) {
    println!("## 11. At a distance: preflight and status with API latency\n");
    let runs = mode.runs(3);
    println!(
        "{NAMESPACES} namespaces, every release installed, RTT ±10 % jitter; medians of {runs} run(s); requests / serial = API requests / those waited for one after another"
    );
    println!(
        "{:>9} {:>6} | {:>13} {:>8} {:>6} {:>4} | {:>10} {:>8} {:>6} {:>4}",
        "releases",
        "RTT",
        "preflight ms",
        "requests",
        "serial",
        "helm",
        "status ms",
        "requests",
        "serial",
        "helm"
    );
    let mut goal = None;
    let mut serial_by_size: Vec<(usize, u64, usize)> = Vec::new();
    for &size in &SIZES {
        let test = catalog(size);
        let cluster = Cluster::start();
        cluster.api.set_latency(Duration::ZERO, Duration::ZERO);
        cluster.script(json!({"*": {"delay_ms": 0}}));
        let out = cluster.run(&test, &["apply", "infra", "--concurrency", "16"]);
        assert_eq!(out.code, 0, "install: {}\n{}", out.stdout, out.stderr);
        for &rtt in &RTTS_MS {
            let rtt_d = Duration::from_millis(rtt);
            cluster.api.set_latency(rtt_d, rtt_d / 10);
            let pre: Vec<Figures> = (0..runs).map(|_| preflight(&cluster, &test)).collect();
            let st: Vec<Figures> = (0..runs).map(|_| status(&cluster, &test)).collect();
            let (pre, st) = (median_of(&pre), median_of(&st));
            println!(
                "{:>9} {:>3} ms | {:>13.0} {:>8} {:>6} {:>4} | {:>10.0} {:>8} {:>6} {:>4}",
                size,
                rtt,
                pre.ms,
                pre.requests,
                pre.serial,
                pre.helm,
                st.ms,
                st.requests,
                st.serial,
                st.helm
            );
            serial_by_size.push((size, rtt, pre.serial));
            if size == 200 && rtt == 100 {
                goal = Some(pre);
            }
        }
        cluster.api.set_latency(Duration::ZERO, Duration::ZERO);
    }
    if let Some(pre) = goal {
        verdict(
            "preflight < 0.5 s at 200 releases and 100 ms RTT",
            pre.ms < 500.0,
            format!(
                "{:.0} ms, {} requests, {} serial",
                pre.ms, pre.requests, pre.serial
            ),
        );
    }
    let at = |size: usize| {
        serial_by_size
            .iter()
            .find(|(s, r, _)| *s == size && *r == 100)
            .map_or(0, |(_, _, n)| *n)
    };
    let (few, many) = (at(SIZES[0]), at(SIZES[2]));
    verdict(
        "preflight's serial requests do not grow with the releases (100 ms RTT)",
        many <= few,
        format!("{few} at {} releases, {many} at {}", SIZES[0], SIZES[2]),
    );

    println!(
        "\na needs edge: chains of {CHAIN} and {LONGER} releases, instant fake helm, fresh cluster; per step = release phase / {CHAIN}; per edge = ({LONGER}-chain - {CHAIN}-chain) / {}, what one more edge costs; medians of {runs} run(s)",
        LONGER - CHAIN
    );
    println!(
        "{:>6} | {:>8} {:>9} {:>7} | {:>8} {:>9} {:>7}",
        "RTT", "step ms", "requests", "serial", "edge ms", "requests", "serial"
    );
    let (short, long) = (chain_catalog(CHAIN), chain_catalog(LONGER));
    let mut edge_at_100 = f64::NAN;
    for &rtt in &RTTS_MS {
        let rtt_d = Duration::from_millis(rtt);
        let measure = |test: &Test| -> (f64, f64, f64) {
            let measured: Vec<(f64, f64, f64)> = (0..runs).map(|_| chain(test, rtt_d)).collect();
            let pick = |f: fn(&(f64, f64, f64)) -> f64| {
                median(&measured.iter().map(f).collect::<Vec<_>>())
            };
            (pick(|m| m.0), pick(|m| m.1), pick(|m| m.2))
        };
        let (a, b) = (measure(&short), measure(&long));
        let step = |x: f64| x / CHAIN as f64;
        let edge = |x: f64, y: f64| (y - x) / (LONGER - CHAIN) as f64;
        println!(
            "{rtt:>3} ms | {:>8.1} {:>9.1} {:>7.1} | {:>8.1} {:>9.1} {:>7.1}",
            step(a.0),
            step(a.1),
            step(a.2),
            edge(a.0, b.0),
            edge(a.1, b.1),
            edge(a.2, b.2)
        );
        if rtt == 100 {
            edge_at_100 = edge(a.2, b.2);
        }
    }
    verdict(
        "a needs edge costs at most one round trip at 100 ms RTT (serial requests per edge)",
        edge_at_100 <= 1.0 + 1e-9,
        format!("{edge_at_100:.1}"),
    );
    println!();
}
