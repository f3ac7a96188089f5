//! `bootstrap destroy CLUSTER`: confirmation, prerequisites, reporter and
//! signals around [`crate::destroy::run`].
//!
//! Exit codes: 0 when every release was uninstalled (or was absent); 1 when
//! an uninstall failed, the lock is held by another run, or the question was
//! answered with no; 2 without `--yes` when stdin is not a terminal in the foreground (nothing
//! is asked, nothing changes) and for the usual prerequisites; 130 on
//! interrupt.

use std::io::{BufRead, IsTerminal, Write};

use crate::cli::{Config, DestroyArgs};
use crate::destroy;
use crate::error::{Error, Failure};
use crate::event::{Event, Summary, Verdict};
use crate::plan::Plan;
use crate::run::{self, Session};

/// Whether to ask before uninstalling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Confirm {
    Skip,
    Ask,
    /// Nobody can answer: stdin is not a terminal and there is no `--yes`.
    Refuse,
}

pub(super) fn confirmation(yes: bool, dry_run: bool, stdin_is_terminal: bool) -> Confirm {
    match (yes || dry_run, stdin_is_terminal) {
        (true, _) => Confirm::Skip,
        (false, true) => Confirm::Ask,
        (false, false) => Confirm::Refuse,
    }
}

pub(super) fn run(config: &Config, args: &DestroyArgs) -> Result<(), Error> {
    // Every event's `elapsedMs` counts from here, as apply's do.
    let begun = std::time::Instant::now();
    let full = super::load_plan(&config.global, &args.cluster)?;
    let plan = full.clone().select(&args.only, &args.selector, true)?;
    let confirm = confirmation(
        args.yes,
        args.options().dry_run,
        // Reading a terminal from a background process group (`&`,
        // `timeout` in a script) stops the process (SIGTTIN): nobody can
        // answer there either.
        std::io::stdin().is_terminal() && crate::reporter::in_foreground(0),
    );
    if confirm == Confirm::Refuse {
        return Err(Error::Usage(format!(
            "destroy asks before it uninstalls anything, and stdin is not a terminal in the foreground; pass --yes to uninstall the releases of cluster `{}` without asking (nothing was changed)",
            args.cluster
        )));
    }
    run::block_on(run_async(config, args, &full, plan, confirm, begun))
}

async fn run_async(
    config: &Config,
    args: &DestroyArgs,
    full: &Plan,
    plan: Plan,
    confirm: Confirm,
    begun: std::time::Instant,
) -> Result<(), Error> {
    let run::Prepared {
        helm, connection, ..
    } = run::prerequisites(config.target(), &plan).await?;
    if confirm == Confirm::Ask {
        let question = question(&plan, connection.target.context.as_deref(), args);
        let answer = tokio::task::spawn_blocking(move || ask(&question))
            .await
            .unwrap_or(false);
        if !answer {
            return Err(Failure::Cancelled.into());
        }
    }

    let session = Session::start(
        config.structured(),
        config.verbosity,
        config.global.no_progress,
        super::record_for(config, &plan.cluster.name, "destroy"),
        begun,
    );
    let events = session.events.clone();
    for (dependent, need) in destroy::left_behind(full, &plan) {
        events.emit(Event::Warning {
            message: format!(
                "{dependent} needs {need} and stays installed (not selected with --only)"
            ),
        });
    }

    let context = run::Run {
        plan: &plan,
        helm: std::sync::Arc::new(helm),
        connection: &connection,
        events: events.clone(),
        stop: session.stop.clone(),
        deadline: None,
    };
    let result = destroy::run(&context, args.options()).await;
    drop(context);
    let whole = plan.releases.len() == full.releases.len();
    if whole && !args.options().dry_run && result.as_ref().is_ok_and(|s| s.ok) {
        events.emit(left_behind(&plan, args.options().crds));
    }
    drop(events);
    session.finish(result.as_ref().ok()).await;
    outcome(&result?).map_err(|e| Error::Summarized(Box::new(e)))
}

/// What a destroy of the whole cluster leaves on purpose, and how to
/// remove it (docs/design.md#destroy).
fn left_behind(plan: &Plan, crds: bool) -> Event {
    use crate::ledger::{DIGEST_KEY_SECRET, LEDGER_NAMESPACE, SHARD_LABEL, SHARD_LABEL_VALUE};
    let ns = LEDGER_NAMESPACE;
    let policy = crate::flux::policy::POLICY_NAME;
    let lease = crate::kube::lock::LEASE_NAME;
    let record = crate::crds::record::RECORD_NAME;
    let mut objects = vec![
        format!("the admission guard (ValidatingAdmissionPolicy and binding {policy})"),
        format!(
            "the ownership ledger (ConfigMaps {ns}/{SHARD_LABEL}={SHARD_LABEL_VALUE}, Secret {ns}/{DIGEST_KEY_SECRET})"
        ),
        format!("the CRD record (ConfigMap {ns}/{record})"),
        format!("the lock (Lease {ns}/{lease})"),
    ];
    if !crds && plan.crd_releases().next().is_some() {
        objects.push("the CRDs of the CRD phase (`destroy --crds` deletes them)".to_string());
    }
    Event::LeftBehind {
        objects,
        remove: format!(
            "kubectl delete validatingadmissionpolicybinding,validatingadmissionpolicy {policy}; kubectl -n {ns} delete configmap -l {SHARD_LABEL}={SHARD_LABEL_VALUE}; kubectl -n {ns} delete configmap/{record} secret/{DIGEST_KEY_SECRET} lease/{lease}"
        ),
    }
}

fn question(plan: &Plan, context: Option<&str>, args: &DestroyArgs) -> String {
    let order = destroy::order(plan);
    let mut text = format!(
        "This uninstalls {} release(s) of cluster `{}` (context `{}`), in this order:\n",
        order.len(),
        plan.cluster.name,
        context.unwrap_or("current")
    );
    for release in order {
        text.push_str(&format!("  {}\n", release.id));
    }
    if args.options().crds {
        text.push_str(&format!(
            "then deletes the CRDs of {} release(s), and with them every object of those kinds.\n",
            plan.crd_releases().count()
        ));
    } else {
        text.push_str("CRDs stay (pass --crds to delete them).\n");
    }
    text.push_str("Continue? Type `yes`: ");
    text
}

/// Asks on stderr, reads one line from stdin.
fn ask(question: &str) -> bool {
    let mut err = std::io::stderr();
    let _ = err
        .write_all(question.as_bytes())
        .and_then(|()| err.flush());
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_lowercase().as_str(), "y" | "yes")
}

fn outcome(summary: &Summary) -> Result<(), Error> {
    match summary.verdict() {
        Verdict::Ok => Ok(()),
        Verdict::Interrupted => Err(Error::Interrupted),
        Verdict::LockLost(why) => Err(crate::run::lock_lost("destroy", &summary.cluster, &why)),
        Verdict::Failed { releases } => Err(Failure::DestroyFailed {
            cluster: summary.cluster.clone(),
            releases,
        }
        .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asks_only_on_a_terminal_and_refuses_without_one() {
        assert_eq!(confirmation(false, false, true), Confirm::Ask);
        assert_eq!(confirmation(false, false, false), Confirm::Refuse);
        assert_eq!(confirmation(true, false, false), Confirm::Skip);
        assert_eq!(confirmation(true, false, true), Confirm::Skip);
        assert_eq!(confirmation(false, true, false), Confirm::Skip);
    }
}
