//! `bootstrap apply --all` / `--clusters a,b`: many clusters from one process
//! (docs/fleet.md). Each cluster runs exactly as `apply CLUSTER` would, with
//! its own kube context, lock, ledger and helm state; a failure in one never
//! stops another; `--cluster-concurrency` caps how many run at once. Output
//! is one stream, every line tagged with its cluster. The exit code is the
//! worst of the clusters'.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Semaphore;

use super::{preflight, run_async};
use crate::cli::{ApplyArgs, Config};
use crate::error::{EXIT_OK, Error, Failure};
use crate::gate;
use crate::plan::Plan;
use crate::reporter::{
    self,
    progress::{self, Screen, SharedScreen},
};
use crate::run::session::Streams;

/// A cluster's place in the fleet's output.
pub(super) struct Slot {
    /// Width the cluster names are padded to.
    pub width: usize,
    pub streams: Streams,
    /// On a terminal: the live display every cluster draws its board on,
    /// and the clusters' names in board order.
    pub screen: Option<(SharedScreen, Vec<String>)>,
}

pub(super) async fn run(
    config: &Config,
    args: &ApplyArgs,
    linted: Vec<(Plan, gate::Findings)>,
    begun: std::time::Instant,
) -> Result<(), Error> {
    let width = linted
        .iter()
        .map(|(p, _)| p.cluster.name.len())
        .max()
        .unwrap_or(0);
    let streams = Streams::standard();
    // Grouped live progress on a terminal (docs/design.md#the-live-display);
    // one board per cluster, in the order they were named.
    let live = reporter::detect(config.structured(), config.global.no_progress)
        == reporter::ReporterKind::Progress
        && config.verbosity != reporter::Verbosity::Quiet;
    let screen = live.then(|| {
        let screen = Screen::new(
            reporter::stderr_target(),
            true,
            console::colors_enabled_stderr(),
        );
        let names: Vec<String> = linted.iter().map(|(p, _)| p.cluster.name.clone()).collect();
        for name in &names {
            progress::lock(&screen).add(name);
        }
        (screen, names)
    });
    let slot = Slot {
        width,
        streams: streams.clone(),
        screen,
    };
    let slots = Arc::new(Semaphore::new(
        args.cluster_concurrency.unwrap_or(linted.len()).max(1),
    ));
    // A cluster still waiting for its turn never starts after an interrupt
    // (the clusters already running stop through their own sessions).
    let interrupted = Arc::new(AtomicBool::new(false));
    let watcher = tokio::spawn(watch_interrupt(interrupted.clone()));

    let runs = linted.into_iter().map(|(plan, findings)| {
        let slots = slots.clone();
        let interrupted = interrupted.clone();
        let slot = &slot;
        async move {
            let cluster = plan.cluster.name.clone();
            let result = async {
                let notices = preflight(&plan, findings)?;
                let plan = args.selection.apply(plan)?;
                let _turn = slots
                    .acquire()
                    .await
                    .map_err(|_| Error::from(Failure::FleetClosed))?;
                if interrupted.load(Ordering::SeqCst) {
                    return Err(Error::Interrupted);
                }
                let begun = std::time::Instant::now();
                run_async(config, args, plan, notices, begun, Some(slot)).await
            }
            .await;
            if let Some((screen, names)) = &slot.screen
                && let Some(index) = names.iter().position(|n| *n == cluster)
            {
                progress::lock(screen).close(index, result.is_ok());
            }
            (cluster, result)
        }
    });
    let results = futures::future::join_all(runs).await;
    watcher.abort();
    if let Some((screen, _)) = &slot.screen {
        progress::lock(screen).clear();
    }

    let mut failed = Vec::new();
    for (cluster, result) in &results {
        if let Err(e) = result {
            let rendered = e.render();
            let mut err = streams.err.lock().unwrap_or_else(|e| e.into_inner());
            for line in rendered.lines() {
                let _ = writeln!(err, "{cluster:<width$} │ {line}");
            }
            failed.push(format!("{cluster} (exit {})", e.exit_code()));
        }
    }
    let code = crate::error::worst(
        results
            .iter()
            .map(|(_, r)| r.as_ref().map_or_else(Error::exit_code, |_| EXIT_OK)),
    );
    summary(config, &streams, &results, code, begun);
    if code == EXIT_OK {
        return Ok(());
    }
    Err(Error::Clusters {
        message: format!(
            "apply failed on {} of {} clusters: {}",
            failed.len(),
            results.len(),
            failed.join(", ")
        ),
        code,
    })
}

/// One line per cluster at the end (text), or one `fleet_finished` event
/// (`elapsedMs` from the command's start).
fn summary(
    config: &Config,
    streams: &Streams,
    results: &[(String, Result<(), Error>)],
    code: i32,
    begun: std::time::Instant,
) {
    let mut out = streams.out.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(format) = config.structured() {
        let clusters: Vec<serde_json::Value> = results
            .iter()
            .map(|(cluster, r)| {
                let code = r.as_ref().map_or_else(Error::exit_code, |_| EXIT_OK);
                serde_json::json!({"cluster": cluster, "exitCode": code})
            })
            .collect();
        let line = serde_json::json!({
            "time": humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            "elapsedMs": crate::event::as_millis(begun.elapsed()),
            "event": "fleet_finished",
            crate::output::SCHEMA_VERSION_KEY: crate::output::SCHEMA_VERSION,
            "clusters": clusters,
            "exitCode": code,
        });
        let _ = write!(out, "{}", crate::output::event(format, &line));
        let _ = out.flush();
        return;
    }
    let ok = results.iter().filter(|(_, r)| r.is_ok()).count();
    let _ = writeln!(out, "\n{ok} of {} clusters applied", results.len());
    for (cluster, result) in results {
        let _ = match result {
            Ok(()) => writeln!(out, "  ✓ {cluster}"),
            Err(e) => writeln!(out, "  ✗ {cluster}: exit {}: {e}", e.exit_code()),
        };
    }
    let _ = out.flush();
}

/// Sets `interrupted` on the first SIGINT/SIGTERM/SIGHUP.
async fn watch_interrupt(interrupted: Arc<AtomicBool>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
        _ = hup.recv() => {}
    }
    interrupted.store(true, Ordering::SeqCst);
}
