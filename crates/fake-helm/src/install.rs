//! install, upgrade (--install) and uninstall: the commands that change state.
//!
//! A release is saved as pending-* before the scripted delay and finished after
//! it. Like helm 3 and 4 (`upgrade`/`install` cancel their context on
//! SIGINT/SIGTERM, and the action's `failRelease` records the release as
//! failed: helm's pkg/cmd/upgrade.go, pkg/cmd/install.go,
//! pkg/action/install.go), a SIGINT/SIGTERM during that delay marks the
//! release `failed`, prints `Release NAME has been cancelled.` and exits 1
//! with `Error: … FAILED: context canceled`. Only SIGKILL (or a signal before
//! the operation started) leaves a pending release behind, or, as with helm,
//! a stdout whose reader is gone: helm prints that line before it cancels,
//! and a Go program dies of SIGPIPE on a write to a broken stdout.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::ctx::{Ctx, Outcome, empty, name_and_chart};
use crate::kube::Kube;
use crate::output::{self, release_json};
use crate::script::Knobs;
use crate::state::{self, Release, Store};
use crate::values::deep_merge;

pub struct ChartInfo {
    pub name: String,
    pub version: String,
    pub app_version: String,
}

/// The chart name and version helm would record for `chart_arg`.
pub fn chart_info(chart_arg: &str, ctx: &Ctx, knobs: &Knobs) -> ChartInfo {
    let flag_version = ctx.args.get("version").map(str::to_string);
    let last_segment = |s: &str| {
        s.trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or(s)
            .to_string()
    };
    let (name, version, app_version) = if let Some(reference) = chart_arg.strip_prefix("oci://") {
        let last = last_segment(reference);
        match last.split_once(':') {
            Some((n, tag)) => (
                n.to_string(),
                flag_version.unwrap_or_else(|| tag.to_string()),
                None,
            ),
            None => (last, flag_version.unwrap_or_else(latest), None),
        }
    } else if ctx.args.get("repo").is_some() {
        (
            chart_arg.to_string(),
            flag_version.unwrap_or_else(latest),
            None,
        )
    } else if let Some(meta) = read_chart_yaml(Path::new(chart_arg)) {
        let field = |k: &str| meta.get(k).and_then(Value::as_str).map(str::to_string);
        let name = field("name").unwrap_or_else(|| last_segment(chart_arg));
        (
            name,
            field("version").unwrap_or_else(latest),
            field("appVersion"),
        )
    } else {
        // A `repo/chart` reference or a local directory: both are named by their last segment.
        (
            last_segment(chart_arg),
            flag_version.unwrap_or_else(latest),
            None,
        )
    };
    let app_version = knobs
        .app_version
        .clone()
        .or(app_version)
        .unwrap_or_else(|| version.clone());
    ChartInfo {
        name,
        version,
        app_version,
    }
}

/// What fake-helm records when no version was asked for ("latest").
fn latest() -> String {
    "0.0.0".into()
}

/// `Chart.yaml` of a chart directory or archive.
fn read_chart_yaml(dir: &Path) -> Option<Value> {
    if dir.is_file() {
        return crate::chart::chart_yaml_in_archive(dir);
    }
    let text = std::fs::read_to_string(dir.join("Chart.yaml")).ok()?;
    serde_saphyr::from_str(&text).ok()
}

/// `--labels k=v,k2=v2` (repeatable) layered over `base`; helm unsets a label given as `null`.
fn labels(
    ctx: &Ctx,
    mut base: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    for pair in ctx.args.slice("labels") {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| format!("invalid argument \"{pair}\" for \"-l, --labels\" flag: {pair} must be formatted as key=value"))?;
        if v == "null" {
            base.remove(k);
        } else {
            base.insert(k.to_string(), v.to_string());
        }
    }
    Ok(base)
}

fn sleep_ms(ms: Option<u64>) {
    if let Some(ms) = ms.filter(|ms| *ms > 0) {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// Set by SIGINT/SIGTERM once [`catch_cancel`] ran.
static CANCELLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_cancel(_: libc::c_int) {
    CANCELLED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// From here on SIGINT/SIGTERM cancel the operation, as helm's context does.
fn catch_cancel() {
    let handler = on_cancel as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic (async-signal-safe).
    unsafe {
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGINT, handler);
    }
}

/// What helm's signal handler does before it cancels the action
/// (pkg/cmd/install.go, pkg/cmd/upgrade.go): print `Release NAME has been
/// cancelled.` to stdout. Go's runtime kills a program whose write to stdout
/// or stderr finds a broken pipe with SIGPIPE (os's `epipecheck`), so helm
/// whose reader is gone dies here and never records the release failed.
/// (Rust ignores SIGPIPE and returns the error instead: raised here by hand.)
fn say_cancelled(name: &str) {
    use std::io::Write;
    let mut out = std::io::stdout();
    let written = out
        .write_all(format!("Release {name} has been cancelled.\n").as_bytes())
        .and_then(|()| out.flush());
    if written.is_err_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe) {
        // SAFETY: restoring the default action and raising a signal touch no
        // memory of ours.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::raise(libc::SIGPIPE);
        }
    }
}

/// The scripted working time; `true` when it was cancelled by a signal.
fn work_ms(ms: Option<u64>) -> bool {
    let until = std::time::Instant::now() + Duration::from_millis(ms.unwrap_or(0));
    loop {
        if CANCELLED.load(std::sync::atomic::Ordering::SeqCst) {
            return true;
        }
        let now = std::time::Instant::now();
        if now >= until {
            return false;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(10)));
    }
}

pub fn install_or_upgrade(ctx: &Ctx, upgrade: bool) -> Outcome {
    match try_install_or_upgrade(ctx, upgrade) {
        Ok(outcome) => outcome,
        Err(message) => Outcome::error(message),
    }
}

fn try_install_or_upgrade(ctx: &Ctx, upgrade: bool) -> Result<Outcome, String> {
    let command = if upgrade { "upgrade" } else { "install" };
    let failed_prefix = if upgrade {
        "UPGRADE FAILED"
    } else {
        "INSTALLATION FAILED"
    };
    let (name, chart_arg) = name_and_chart(ctx, command)?;
    let ns = ctx.namespace();
    let store = Store::from_env()?;
    let _busy = store.busy(&ns, &name, command);
    let knobs = ctx.script.knobs(&ns, &name);
    let mut values = ctx.user_values()?;
    crate::repos::check_reference(&chart_arg, ctx).map_err(|e| format!("{failed_prefix}: {e}"))?;
    let chart = chart_info(&chart_arg, ctx, &knobs);
    if crate::chart::is_remote(&chart_arg) {
        crate::chart::download_delay();
    }

    let previous = store
        .load(&ns, &name)?
        .filter(|r| r.status != state::UNINSTALLED);
    match (&previous, upgrade) {
        (Some(_), false) => {
            return Err(format!(
                "{failed_prefix}: cannot re-use a name that is still in use"
            ));
        }
        (None, true) if !ctx.args.on("install") => {
            return Err(format!(
                "{failed_prefix}: \"{name}\" has no deployed releases"
            ));
        }
        (Some(p), true) if p.is_pending() => {
            return Err(format!(
                "{failed_prefix}: another operation (install/upgrade/rollback) is in progress"
            ));
        }
        _ => {}
    }
    let is_install = previous.is_none();
    if let Some(p) = previous
        .as_ref()
        .filter(|_| ctx.args.on("reuse-values") || ctx.args.on("reset-then-reuse-values"))
    {
        let mut merged = p.values.clone();
        deep_merge(&mut merged, values);
        values = merged;
    }
    let now = state::now_rfc3339();
    let kept = store.load(&ns, &name)?;
    let objects = {
        let mut all = knobs.chart_values.clone().unwrap_or_else(empty);
        deep_merge(&mut all, values.clone());
        crate::values::render_manifests(
            knobs.manifests.as_deref().unwrap_or(&[]),
            &all,
            &chart.version,
        )
    };
    let release = Release {
        name: name.clone(),
        namespace: ns.clone(),
        revision: kept.as_ref().map_or(0, |r| r.revision) + 1,
        status: if is_install {
            state::PENDING_INSTALL
        } else {
            state::PENDING_UPGRADE
        }
        .into(),
        chart: chart.name.clone(),
        version: chart.version.clone(),
        app_version: chart.app_version.clone(),
        values,
        labels: labels(
            ctx,
            previous
                .as_ref()
                .map(|p| p.labels.clone())
                .unwrap_or_default(),
        )?,
        updated: now.clone(),
        manifest: output::render_documents(&chart.name, "templates", &objects),
        first_deployed: previous.as_ref().map_or(now, |p| p.first_deployed.clone()),
        description: if is_install {
            "Initial install underway"
        } else {
            "Preparing upgrade"
        }
        .into(),
        history: kept
            .map(|k| {
                let mut h = k.history.clone();
                h.push(k.as_revision());
                h
            })
            .unwrap_or_default(),
    };
    let chart_values = knobs.chart_values.clone().unwrap_or_else(empty);

    if ctx.args.get("dry-run").is_some_and(|v| v != "false") {
        return Ok(Outcome::ok(output::summary(&release)));
    }

    let kube = if knobs.apply_manifests == Some(true) {
        Kube::connect(ctx)?
    } else {
        None
    };
    // Cluster calls come first, so an unreachable API server fails before any state changes.
    if let Some(k) = &kube {
        if ctx.args.on("create-namespace") {
            k.ensure_namespace(&ns)?;
        }
        k.write_release_secret(&release, &release_json(&release, &chart_values))?;
    }
    let attempt = store.next_attempt(&ns, &name)?;
    catch_cancel();
    store.save(&release)?;

    let cancelled = work_ms(knobs.delay_ms);
    if cancelled {
        say_cancelled(&name);
    }

    let scripted_failure = (knobs.fail.is_some() || knobs.fail_times.is_some())
        && knobs.fail_times.is_none_or(|n| attempt <= n);
    let deployed = deployed(release.clone(), is_install);
    let failure = if cancelled {
        Some(format!("Error: {failed_prefix}: context canceled"))
    } else if scripted_failure {
        Some(
            knobs
                .fail
                .clone()
                .unwrap_or_else(|| format!("Error: {failed_prefix}: fake-helm scripted failure")),
        )
    } else if let Some(k) = &kube {
        k.apply(&ns, &objects)
            .and_then(|()| publish(k, &deployed, &chart_values))
            .err()
            .map(|e| format!("Error: {failed_prefix}: {e}"))
    } else {
        None
    };

    if let Some(message) = failure {
        fail(
            ctx,
            &store,
            kube.as_ref(),
            release,
            previous,
            &chart_values,
            &message,
        )?;
        let stderr = if message.ends_with('\n') {
            message
        } else {
            format!("{message}\n")
        };
        return Ok(Outcome {
            stdout: String::new(),
            stderr,
            code: 1,
        });
    }
    let release = deployed;
    store.save(&release)?;

    let stdout = match ctx.args.get("output") {
        Some("json") => format!("{}\n", release_json(&release, &chart_values)),
        Some("yaml") => output::to_yaml(&release_json(&release, &chart_values)),
        _ if !upgrade => output::summary(&release),
        _ if is_install => format!(
            "Release \"{name}\" does not exist. Installing it now.\n{}",
            output::summary(&release)
        ),
        _ => format!(
            "Release \"{name}\" has been upgraded. Happy Helming!\n{}",
            output::summary(&release)
        ),
    };
    Ok(Outcome::ok(stdout))
}

fn deployed(mut release: Release, is_install: bool) -> Release {
    release.status = state::DEPLOYED.into();
    release.description = if is_install {
        "Install complete"
    } else {
        "Upgrade complete"
    }
    .into();
    for h in &mut release.history {
        if h.status == state::DEPLOYED {
            h.status = state::SUPERSEDED.into();
        }
    }
    release
}

/// Writes the deployed revision's Secret and relabels the ones it supersedes.
fn publish(k: &Kube, release: &Release, chart_values: &Value) -> Result<(), String> {
    k.write_release_secret(release, &release_json(release, chart_values))?;
    for h in release
        .history
        .iter()
        .filter(|h| h.status == state::SUPERSEDED)
    {
        k.mark_secret(
            &release.namespace,
            &release.name,
            h.revision,
            state::SUPERSEDED,
        )?;
    }
    Ok(())
}

/// Records a failed operation; with --atomic/--rollback-on-failure, undoes it like helm.
fn fail(
    ctx: &Ctx,
    store: &Store,
    kube: Option<&Kube>,
    mut release: Release,
    previous: Option<Release>,
    chart_values: &Value,
    message: &str,
) -> Result<(), String> {
    let atomic = ctx.args.on("atomic") || ctx.args.on("rollback-on-failure");
    release.status = state::FAILED.into();
    release.description = format!(
        "Release \"{}\" failed: {}",
        release.name,
        message.trim_end()
    );
    match (atomic, previous) {
        (true, None) => {
            if let Some(k) = kube {
                k.delete_release_secrets(&release.namespace, &release.name)?;
            }
            store.remove(&release.namespace, &release.name)
        }
        (true, Some(prev)) => {
            let mut history = release.history.clone();
            history.push(release.as_revision());
            let mut rolled = Release {
                revision: release.revision + 1,
                status: state::DEPLOYED.into(),
                description: format!("Rollback to {}", prev.revision),
                updated: state::now_rfc3339(),
                history,
                ..prev
            };
            for h in &mut rolled.history {
                if h.status == state::DEPLOYED {
                    h.status = state::SUPERSEDED.into();
                }
            }
            if let Some(k) = kube {
                k.mark_secret(
                    &release.namespace,
                    &release.name,
                    release.revision,
                    state::FAILED,
                )?;
                k.write_release_secret(&rolled, &release_json(&rolled, chart_values))?;
            }
            store.save(&rolled)
        }
        (false, _) => {
            if let Some(k) = kube {
                k.write_release_secret(&release, &release_json(&release, chart_values))?;
            }
            store.save(&release)
        }
    }
}

pub fn uninstall(ctx: &Ctx) -> Outcome {
    let names = &ctx.args.positionals;
    if names.is_empty() {
        return Outcome::error(
            "\"helm uninstall\" requires at least 1 argument\n\nUsage:  helm uninstall RELEASE_NAME [...] [flags]",
        );
    }
    let mut stdout = String::new();
    for name in names {
        match uninstall_one(ctx, name) {
            Ok(line) => stdout.push_str(&line),
            Err(e) => {
                let mut outcome = Outcome::error(e);
                outcome.stdout = stdout;
                return outcome;
            }
        }
    }
    Outcome::ok(stdout)
}

fn uninstall_one(ctx: &Ctx, name: &str) -> Result<String, String> {
    let ns = ctx.namespace();
    let store = Store::from_env()?;
    let _busy = store.busy(&ns, name, "uninstall");
    let Some(mut release) = store
        .load(&ns, name)?
        .filter(|r| r.status != state::UNINSTALLED)
    else {
        if ctx.args.on("ignore-not-found") {
            return Ok(String::new());
        }
        return Err(format!(
            "uninstall: Release not loaded: {name}: release: not found"
        ));
    };
    if ctx.args.get("dry-run").is_some_and(|v| v != "false") {
        return Ok(format!("release \"{name}\" uninstalled\n"));
    }
    let knobs = ctx.script.knobs(&ns, name);
    let kube = if knobs.apply_manifests == Some(true) {
        Kube::connect(ctx)?
    } else {
        None
    };
    if let Some(k) = &kube {
        // Helm marks the release uninstalling in the cluster first; this also fails fast when unreachable.
        k.mark_secret(&ns, name, release.revision, state::UNINSTALLING)?;
    }
    release.status = state::UNINSTALLING.into();
    release.description = "Deletion in progress (or silently failed)".into();
    store.save(&release)?;
    sleep_ms(knobs.delay_ms);
    if let Some(k) = &kube {
        let objects: Vec<Value> = serde_saphyr::from_multiple(&release.manifest)
            .map_err(|e| format!("uninstall: failed to parse the stored manifest: {e}"))?;
        let objects: Vec<Value> = objects.into_iter().filter(Value::is_object).collect();
        k.delete(&ns, &objects)?;
        k.delete_release_secrets(&ns, name)?;
    }
    if ctx.args.on("keep-history") {
        release.status = state::UNINSTALLED.into();
        release.description = "Uninstallation complete".into();
        store.save(&release)?;
    } else {
        store.remove(&ns, name)?;
    }
    Ok(format!("release \"{name}\" uninstalled\n"))
}

/// `rollback NAME`: back to the revision before the latest, as a new
/// deployed revision (helm's default target). The fake keeps no values per
/// revision, so the chart and version are the earlier revision's and the
/// values stay as they are. Like helm, a pending latest revision is no
/// obstacle: this is how one is recovered.
pub fn rollback(ctx: &Ctx) -> Outcome {
    match rollback_one(ctx) {
        Ok(stdout) => Outcome::ok(stdout),
        Err(message) => Outcome::error(message),
    }
}

fn rollback_one(ctx: &Ctx) -> Result<String, String> {
    let Some(name) = ctx.args.positionals.first() else {
        return Err("\"helm rollback\" requires at least 1 argument".into());
    };
    let ns = ctx.namespace();
    let store = Store::from_env()?;
    let _busy = store.busy(&ns, name, "rollback");
    let Some(mut release) = store
        .load(&ns, name)?
        .filter(|r| r.status != state::UNINSTALLED)
    else {
        return Err("release: not found".into());
    };
    let Some(previous) = release.history.last().cloned() else {
        return Err(format!(
            "release has no {} version",
            release.revision.saturating_sub(1)
        ));
    };
    let mut current = release.as_revision();
    current.status = state::SUPERSEDED.into();
    release.history.push(current);
    for h in &mut release.history {
        if h.status == state::DEPLOYED {
            h.status = state::SUPERSEDED.into();
        }
    }
    release.revision += 1;
    release.status = state::DEPLOYED.into();
    release.chart = previous.chart.clone();
    release.version = previous.version.clone();
    release.app_version = previous.app_version.clone();
    release.description = format!("Rollback to {}", previous.revision);
    release.updated = state::now_rfc3339();
    store.save(&release)?;
    Ok("Rollback was a success! Happy Helming!\n".into())
}
