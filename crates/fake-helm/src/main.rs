//! fake-helm: a stand-in for `helm` 3/4 in binary tests and benchmarks. It
//! records each invocation and answers the commands bootstrap uses the way helm
//! does (same stdout shapes, "Error: ..." on stderr, exit 1), keeping releases in
//! a state directory instead of a cluster.
//!
//! Commands: `version`, `install`, `upgrade [--install]`, `uninstall`,
//! `rollback` (to the revision before the latest; values kept), `template`,
//! `list`, `status`, `get values`, `get manifest`, `history`, `pull` (a real
//! `NAME-VERSION.tgz` with the chart's `Chart.yaml`, which install and
//! template read back when given the archive's path), `repo add`
//! (entries in `--repository-config`, written 0600 as helm does; the
//! password from `--password` or, with `--password-stdin`, from stdin). A
//! `REPO/CHART` reference must name a repository in that config (helm's
//! `repo REPO not found` otherwise).
//!
//! Environment:
//! - `FAKE_HELM_STATE` (directory; required by every command but `version` and
//!   `template`): one JSON file per release, `<namespace>__<name>.json`, with
//!   name, namespace, revision, status (deployed | failed | pending-install |
//!   pending-upgrade | uninstalling | uninstalled), chart, version, app_version,
//!   values (user values: `-f` files deep-merged in order, then `--set*`),
//!   labels, updated (RFC 3339), manifest, plus first_deployed, description and
//!   history. `<namespace>__<name>.attempts` counts install/upgrade attempts.
//!   `<namespace>__<name>.busy` holds the pid of the process working on the
//!   release; an install, upgrade or uninstall that finds it held by a live
//!   process appends `{release, command, pid, overlaps}` to `overlaps.log`.
//!   Files are replaced atomically, so concurrent processes are safe.
//! - `FAKE_HELM_LOG` (file): one JSON line per finished invocation:
//!   {argv (arguments after the program name), pid, start_ms, end_ms (Unix ms),
//!   exit_code, values_files: [{path, mode ("600"), content (parsed YAML)}]}.
//!   Values files are read before any work starts. SIGINT/SIGTERM during an
//!   install or upgrade mark the release failed, as helm does (exit 1, a
//!   line is written); a process killed by SIGKILL writes no line (its
//!   release stays pending-* in the state).
//! - `FAKE_HELM_SCRIPT` (JSON file): knobs per release under "namespace/name",
//!   "name" or "*" (layered, most specific wins): delay_ms, template_delay_ms,
//!   template_fail (`template` fails: `Error: <it>`), fail (stderr text
//!   printed verbatim, exit 1, release failed), fail_times (fail only the
//!   first n attempts), crds, manifests, apply_manifests,
//!   version_output, app_version, chart_values. See `script.rs`.
//! - `FAKE_HELM_PULL_DELAY_MS`: the modelled download time of one chart,
//!   charged by `pull` and by install/upgrade/template given a remote chart
//!   (helm downloads it then), not when given a local archive or directory.
//! - `FAKE_HELM_VERSION` (default "v4.2.4"): the helm it impersonates: what
//!   `version` reports and which flags it accepts (helm's flag table for that
//!   major version, `bootstrap::helm::flags`); an unknown flag fails as cobra
//!   fails it (`Error: unknown flag: --all`, exit 1).
//! - `KUBECONFIG`, `HELM_NAMESPACE`: as for helm. With `apply_manifests` and a
//!   kubeconfig (`--kubeconfig` or `KUBECONFIG`), install/upgrade server-side
//!   apply the manifests and write helm's release Secrets; uninstall deletes them.
//!
//! Exit codes: 0 success, 1 helm-like failure, 97 fake-helm itself is misconfigured
//! (bad FAKE_HELM_SCRIPT, missing FAKE_HELM_STATE): a test bug, not a helm answer.

mod args;
mod chart;
mod commands;
mod ctx;
mod install;
mod kube;
mod log;
mod output;
mod repos;
mod script;
mod state;
mod values;

use std::io::Write;

use ctx::{Ctx, Outcome};

/// Exit code for a broken test setup, distinct from anything helm returns.
const MISCONFIGURED: i32 = 97;

fn main() {
    let start_ms = state::unix_ms();
    let argv: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let (outcome, values_files) = run(&argv);
    let _ = std::io::stdout().write_all(outcome.stdout.as_bytes());
    let _ = std::io::stderr().write_all(outcome.stderr.as_bytes());
    log::append(&log::Entry {
        argv: &argv,
        pid: std::process::id(),
        start_ms,
        end_ms: state::unix_ms(),
        exit_code: outcome.code,
        values_files: &values_files,
    });
    std::process::exit(outcome.code);
}

fn run(argv: &[String]) -> (Outcome, Vec<log::ValuesFile>) {
    let major = commands::impersonated_major();
    let (words, rest) = args::split_command(argv, &bootstrap::helm::flags::global(major));
    let (cmd, flags) = match commands::resolve(&words, major) {
        Ok(found) => found,
        Err(e) => return (Outcome::error(e), Vec::new()),
    };
    let parsed = match args::parse(&rest, &flags) {
        Ok(p) => p,
        Err(e) => return (Outcome::error(e), Vec::new()),
    };
    let values_files = log::snapshot(&parsed.slice("values"));
    let script = match script::Script::from_env() {
        Ok(s) => s,
        Err(e) => return (misconfigured(e), values_files),
    };
    let ctx = Ctx {
        args: parsed,
        values_files,
        script,
    };
    let mut outcome = commands::run(cmd, &ctx);
    if outcome.stderr.starts_with("Error: fake-helm:") {
        outcome.code = MISCONFIGURED;
    }
    (outcome, ctx.values_files)
}

fn misconfigured(message: String) -> Outcome {
    Outcome {
        stderr: format!("{message}\n"),
        code: MISCONFIGURED,
        ..Outcome::default()
    }
}
