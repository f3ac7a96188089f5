//! What `apply` and `destroy` share around their engine: the reporter task,
//! the stop signal driven by SIGINT/SIGTERM, and the final summary event.

use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::event::{Emitter, Event, Summary};
use crate::reporter::progress::{ProgressReporter, SharedScreen};
use crate::reporter::{self, Verbosity, tagged};
use crate::stop::{GRACE, Stop, StopSignal};

/// stdout and stderr, shared by the sessions of many clusters.
#[derive(Clone)]
pub(crate) struct Streams {
    pub out: tagged::Shared,
    pub err: tagged::Shared,
}

impl Streams {
    pub(crate) fn standard() -> Streams {
        Streams {
            out: tagged::shared(Box::new(std::io::stdout())),
            err: tagged::shared(Box::new(std::io::stderr())),
        }
    }
}

pub(crate) struct Session {
    pub events: Emitter,
    pub stop: StopSignal,
    stop_tx: Arc<watch::Sender<Stop>>,
    reporting: JoinHandle<Box<dyn reporter::Reporter>>,
    signals: JoinHandle<()>,
}

impl Session {
    /// Starts the reporter (JSON Lines with `json`) and the signal watch.
    /// `no_progress`: `--no-progress`, plain lines even on a terminal.
    /// `record`: the run record to write beside the display.
    pub(crate) fn start(
        structured: Option<crate::output::Format>,
        verbosity: Verbosity,
        no_progress: bool,
        record: Option<super::record::Recorder>,
        begun: std::time::Instant,
    ) -> Session {
        let kind = reporter::detect(structured, no_progress);
        let display = reporter::make(
            kind,
            verbosity,
            Box::new(std::io::stdout()),
            Box::new(std::io::stderr()),
        );
        Session::with_reporter(display, record, begun)
    }

    /// One cluster's session among many in one process (docs/fleet.md):
    /// plain lines or JSON Lines, tagged with the cluster, written to the
    /// streams every cluster shares.
    /// `screen`: the fleet's live display and this cluster's board on it
    /// (a terminal; else plain lines). `(cluster, width)`: its name and
    /// the width every cluster's name is padded to.
    pub(crate) fn for_cluster(
        (cluster, width): (&str, usize),
        structured: Option<crate::output::Format>,
        verbosity: Verbosity,
        streams: &Streams,
        screen: Option<(&SharedScreen, usize)>,
        record: Option<super::record::Recorder>,
        begun: std::time::Instant,
    ) -> Session {
        // JSON lines to the tagging writer, which prints each tagged event
        // as JSON or YAML.
        let kind = match structured {
            Some(_) => reporter::ReporterKind::Structured(crate::output::Format::Json),
            None => reporter::ReporterKind::Plain,
        };
        let tagged = |out: &tagged::Shared| -> Box<tagged::Tagged> {
            Box::new(tagged::Tagged::new(cluster, width, structured, out.clone()))
        };
        let reporter: Box<dyn reporter::Reporter> = match screen {
            Some((screen, index)) if structured.is_none() => Box::new(ProgressReporter::on(
                screen.clone(),
                index,
                verbosity,
                tagged(&streams.out),
                tagged(&streams.err),
                console::colors_enabled_stderr(),
            )),
            _ => reporter::make(kind, verbosity, tagged(&streams.out), tagged(&streams.err)),
        };
        Session::with_reporter(reporter, record, begun)
    }

    /// `begun`: the command's start, which every event's `elapsed` and the
    /// summary's `duration` count from.
    fn with_reporter(
        display: Box<dyn reporter::Reporter>,
        record: Option<super::record::Recorder>,
        begun: std::time::Instant,
    ) -> Session {
        // The run record beside the display (docs/design.md#run-record).
        let reporter: Box<dyn reporter::Reporter> = match record {
            Some(recorder) => Box::new(reporter::Tee(display, Box::new(recorder))),
            None => display,
        };
        let (events, rx) = Emitter::since(begun);
        let reporting = tokio::spawn(reporter::drive(rx, reporter));
        let (stop_tx, stop) = watch::channel(Stop::Run);
        let stop_tx = Arc::new(stop_tx);
        let signals = tokio::spawn(watch_signals(stop_tx.clone(), events.clone()));
        Session {
            events,
            stop,
            stop_tx,
            reporting,
            signals,
        }
    }

    /// For stops that are not signals (`--timeout`).
    pub(crate) fn stopper(&self) -> Arc<watch::Sender<Stop>> {
        self.stop_tx.clone()
    }

    /// Emits the summary (if the run got that far) and waits until the
    /// reporter has written everything.
    pub(crate) async fn finish(self, summary: Option<&Summary>) {
        self.signals.abort();
        if let Some(summary) = summary {
            super::termination::remember(summary);
            self.events.emit(Event::RunFinished {
                summary: summary.clone(),
            });
        }
        drop(self.events);
        let _ = self.reporting.await;
    }
}

/// First SIGINT/SIGTERM/SIGHUP: start nothing new and give running work the
/// grace period (the engine announces what is running), then stop it.
/// Second: stop now. A hangup (the terminal closed, ssh dropped) is a stop
/// like any other, so the lock is released and nothing is left running.
async fn watch_signals(stop: Arc<watch::Sender<Stop>>, events: Emitter) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return;
    };
    for next in [Stop::Graceful, Stop::Now] {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
            _ = hup.recv() => {}
        }
        if next == Stop::Now {
            events.emit(Event::Warning {
                message: "second interrupt: stopping running helm operations now".into(),
            });
            let _ = stop.send(Stop::Now);
            return;
        }
        let _ = stop.send(Stop::Graceful);
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(GRACE).await;
            let _ = stop.send(Stop::Now);
        });
    }
}
