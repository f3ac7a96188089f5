//! `bootstrap apply CLUSTER`: wiring of prerequisites, reporter, signals and
//! the global timeout around [`crate::apply::run`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::apply::{self, Options};
use crate::cli::Config;
use crate::error::Error;
use crate::event::{Event, Summary};
use crate::helm::cli::HelmCli;
use crate::helm::{Helm, Stop};
use crate::plan::Plan;

#[derive(Debug, Clone)]
pub struct ApplyArgs {
    pub cluster: String,
    pub only: Vec<String>,
    pub no_needs: bool,
    pub options: Options,
    pub timeout: Option<Duration>,
}

pub fn run(config: &Config, args: &ApplyArgs) -> Result<(), Error> {
    let plan =
        crate::config::load(&config.dir, &args.cluster)?.select(&args.only, args.no_needs)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::failed_with("cannot start the async runtime", e))?;
    runtime.block_on(run_async(config, args, plan))
}

/// Prerequisites every cluster command checks before anything else: helm
/// (when needed) and a usable kubeconfig context. Failures exit 2.
pub async fn prerequisites(
    config: &Config,
    plan: &Plan,
    need_helm: bool,
) -> Result<(HelmCli, crate::kube::client::Connection), Error> {
    let helm = HelmCli::new(config.helm.clone()).with_grace(apply::GRACE);
    if need_helm {
        helm.version()
            .await
            .map_err(|e| Error::prerequisite(e.to_string()))?;
    }
    let context = config
        .context
        .clone()
        .or_else(|| plan.cluster.context.clone());
    let connection =
        crate::kube::client::connect(config.kubeconfig.as_deref(), context.as_deref()).await?;
    let reachable = crate::kube::retry::retry(Duration::from_secs(30), || {
        connection.client.apiserver_version()
    })
    .await;
    if let Err(e) = reachable {
        return Err(Error::failed_with(
            format!(
                "cannot reach the Kubernetes API server of context `{}`; nothing was changed",
                connection.target.context.clone().unwrap_or_default()
            ),
            e,
        ));
    }
    Ok((helm, connection))
}

async fn run_async(config: &Config, args: &ApplyArgs, plan: Plan) -> Result<(), Error> {
    let (helm, connection) = prerequisites(config, &plan, true).await?;

    let session = super::session::Session::start(config);
    let events = session.events.clone();
    let timed_out = Arc::new(AtomicBool::new(false));
    let deadline = args.timeout.map(|timeout| {
        let stop_tx = session.stopper();
        let timed_out = timed_out.clone();
        let events = events.clone();
        tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            timed_out.store(true, Ordering::SeqCst);
            events.emit(Event::Warning {
                message: format!(
                    "--timeout {} reached; stopping",
                    humantime::format_duration(timeout)
                ),
            });
            let _ = stop_tx.send(Stop::Now);
        })
    });

    let result = apply::run(
        &plan,
        Arc::new(helm),
        &connection,
        &args.options,
        &events,
        session.stop.clone(),
    )
    .await;
    if let Some(deadline) = deadline {
        deadline.abort();
    }
    drop(events);
    session.finish(result.as_ref().ok()).await;

    match result {
        Ok(summary) => outcome(&summary, timed_out.load(Ordering::SeqCst), args.timeout),
        Err(Error::Interrupted) if timed_out.load(Ordering::SeqCst) => Err(Error::failed(format!(
            "--timeout {} reached before any release ran; nothing was changed by releases",
            args.timeout
                .map(|t| humantime::format_duration(t).to_string())
                .unwrap_or_default()
        ))),
        Err(e) => Err(e),
    }
}

fn outcome(summary: &Summary, timed_out: bool, timeout: Option<Duration>) -> Result<(), Error> {
    if summary.ok {
        return Ok(());
    }
    if timed_out {
        return Err(Error::failed(format!(
            "apply timed out after {} (--timeout)",
            timeout
                .map(|t| humantime::format_duration(t).to_string())
                .unwrap_or_default()
        )));
    }
    if summary.interrupted {
        return Err(Error::Interrupted);
    }
    let failed: Vec<String> = summary
        .root_failures
        .iter()
        .map(ToString::to_string)
        .collect();
    Err(Error::failed(format!(
        "apply of cluster `{}` failed: {}",
        summary.cluster,
        if failed.is_empty() {
            "see the summary above".to_string()
        } else {
            format!("{} failed", failed.join(", "))
        }
    )))
}
