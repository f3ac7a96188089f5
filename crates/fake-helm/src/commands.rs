//! Command dispatch and the read-only commands (version, template, list,
//! status, get, history). Install, upgrade and uninstall live in `install`.

use serde_json::Value;

use bootstrap::helm::flags::{self, Command};

use crate::args::Flag;
use crate::ctx::{Ctx, Outcome, empty, name_and_chart};
use crate::output::{self, format, release_json};
use crate::state::{self, Release, Store};
use crate::values::deep_merge;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Cmd {
    Version,
    Install,
    Upgrade,
    Uninstall,
    Template,
    List,
    Status,
    GetValues,
    GetManifest,
    History,
    Pull,
    RepoAdd,
    Rollback,
}

/// The helm version this fake impersonates: `FAKE_HELM_VERSION`, default the
/// newest Helm 4 release.
pub fn impersonated_version() -> String {
    std::env::var("FAKE_HELM_VERSION")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "v4.2.4".into())
}

/// The major version of [`impersonated_version`]; its flag table decides
/// which flags are accepted.
pub fn impersonated_major() -> u64 {
    let version = impersonated_version();
    let digits: String = version
        .trim_start_matches('v')
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap_or(4)
}

/// Resolves the command words (with helm's aliases) to a command and the
/// flags helm `major` accepts for it.
pub fn resolve(words: &[String], major: u64) -> Result<(Cmd, Vec<Flag>), String> {
    let first = words.first().map(String::as_str).unwrap_or("");
    let cmd = match first {
        "version" => Cmd::Version,
        "install" => Cmd::Install,
        "upgrade" => Cmd::Upgrade,
        "uninstall" | "delete" | "del" | "un" => Cmd::Uninstall,
        "template" => Cmd::Template,
        "list" | "ls" => Cmd::List,
        "status" => Cmd::Status,
        "history" | "hist" => Cmd::History,
        "pull" | "fetch" => Cmd::Pull,
        "rollback" => Cmd::Rollback,
        "get" => match words.get(1).map(String::as_str) {
            Some("values") => Cmd::GetValues,
            Some("manifest") => Cmd::GetManifest,
            Some(other) => return Err(format!("unknown command \"{other}\" for \"helm get\"")),
            None => {
                return Err("fake-helm: `helm get` needs a subcommand (values, manifest)".into());
            }
        },
        "repo" => match words.get(1).map(String::as_str) {
            Some("add") => Cmd::RepoAdd,
            Some(other) => return Err(format!("unknown command \"{other}\" for \"helm repo\"")),
            None => return Err("fake-helm: `helm repo` needs a subcommand (add)".into()),
        },
        "" => return Err("fake-helm: no command given".into()),
        other => {
            return Err(format!(
                "unknown command \"{other}\" for \"helm\"\nRun 'helm --help' for usage."
            ));
        }
    };
    let command = match cmd {
        Cmd::Version => Command::Version,
        Cmd::Install => Command::Install,
        Cmd::Upgrade => Command::Upgrade,
        Cmd::Template => Command::Template,
        Cmd::Uninstall => Command::Uninstall,
        Cmd::List => Command::List,
        Cmd::Status => Command::Status,
        Cmd::GetValues => Command::GetValues,
        Cmd::GetManifest => Command::GetManifest,
        Cmd::History => Command::History,
        Cmd::Pull => Command::Pull,
        Cmd::RepoAdd => Command::RepoAdd,
        Cmd::Rollback => Command::Rollback,
    };
    Ok((cmd, flags::accepted(major, command)))
}

pub fn run(cmd: Cmd, ctx: &Ctx) -> Outcome {
    match cmd {
        Cmd::Version => version(ctx).into(),
        Cmd::Install => crate::install::install_or_upgrade(ctx, false),
        Cmd::Upgrade => crate::install::install_or_upgrade(ctx, true),
        Cmd::Uninstall => crate::install::uninstall(ctx),
        Cmd::Rollback => crate::install::rollback(ctx),
        Cmd::Template => template(ctx).into(),
        Cmd::List => list(ctx).into(),
        Cmd::Status => status(ctx).into(),
        Cmd::GetValues => get_values(ctx).into(),
        Cmd::GetManifest => get_manifest(ctx).into(),
        Cmd::History => history(ctx).into(),
        Cmd::Pull => pull(ctx).into(),
        Cmd::RepoAdd => crate::repos::add(ctx).into(),
    }
}

fn version(ctx: &Ctx) -> Result<String, String> {
    if let Some(out) = ctx.script.defaults().version_output {
        return Ok(if out.ends_with('\n') {
            out
        } else {
            format!("{out}\n")
        });
    }
    let v = impersonated_version();
    let commit = "1234567890abcdef1234567890abcdef12345678";
    if let Some(t) = ctx.args.get("template") {
        let out = t
            .replace("{{.Version}}", &v)
            .replace("{{ .Version }}", &v)
            .replace("{{.GitCommit}}", commit)
            .replace("{{.GoVersion}}", "go1.24.7");
        return Ok(out);
    }
    if ctx.args.on("short") {
        return Ok(format!("{v}+g{}\n", &commit[..7]));
    }
    let kube = if v.starts_with("v4") {
        ", KubeClientVersion:\"v1.34\""
    } else {
        ""
    };
    Ok(format!(
        "version.BuildInfo{{Version:\"{v}\", GitCommit:\"{commit}\", GitTreeState:\"clean\", GoVersion:\"go1.24.7\"{kube}}}\n"
    ))
}

fn template(ctx: &Ctx) -> Result<String, String> {
    let (name, chart_arg) = name_and_chart(ctx, "template")?;
    let ns = ctx.namespace();
    let user = ctx.user_values()?;
    let knobs = ctx.script.knobs(&ns, &name);
    crate::repos::check_reference(&chart_arg, ctx)?;
    let chart = crate::install::chart_info(&chart_arg, ctx, &knobs);
    if crate::chart::is_remote(&chart_arg) {
        crate::chart::download_delay();
    }
    if let Some(ms) = knobs.template_delay_ms {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
    if let Some(stderr) = knobs.template_fail {
        return Err(stderr);
    }
    let mut out = String::new();
    if ctx.args.on("include-crds") && !ctx.args.on("skip-crds") {
        out.push_str(&output::render_documents(
            &chart.name,
            "crds",
            knobs.crds.as_deref().unwrap_or(&[]),
        ));
    }
    let mut values = knobs.chart_values.clone().unwrap_or_else(empty);
    deep_merge(&mut values, user);
    out.push_str(&output::render_documents(
        &chart.name,
        "templates",
        &crate::values::render_manifests(
            knobs.manifests.as_deref().unwrap_or(&[]),
            &values,
            &chart.version,
        ),
    ));
    Ok(out)
}

/// `helm pull CHART... [--destination DIR]`: each chart's archive,
/// `NAME-VERSION.tgz`, written to the destination (default: the working
/// directory), after the modelled download time. Helm prints nothing for a
/// repository chart.
fn pull(ctx: &Ctx) -> Result<String, String> {
    if ctx.args.positionals.is_empty() {
        return Err("\"helm pull\" requires at least 1 argument\n\nUsage:  helm pull [chart URL | repo/chartname] [...] [flags]".into());
    }
    let destination = std::path::PathBuf::from(ctx.args.get("destination").unwrap_or("."));
    for chart_arg in &ctx.args.positionals {
        crate::repos::check_reference(chart_arg, ctx)?;
        let chart = crate::install::chart_info(chart_arg, ctx, &Default::default());
        crate::chart::download_delay();
        let file = destination.join(format!("{}-{}.tgz", chart.name, chart.version));
        crate::chart::write_archive(&file, &chart.name, &chart.version)
            .map_err(|e| format!("failed to save {}: {e}", file.display()))?;
    }
    Ok(String::new())
}

fn list(ctx: &Ctx) -> Result<String, String> {
    let store = Store::from_env()?;
    let a = &ctx.args;
    let explicit: Vec<&str> = [
        "deployed",
        "failed",
        "pending",
        "superseded",
        "uninstalled",
        "uninstalling",
    ]
    .into_iter()
    .filter(|f| a.on(f))
    .collect();
    // Helm 3's default state mask is deployed|failed and `--all` lifts it;
    // Helm 4 shows every state unless states are named (`SetStateMask` in
    // helm's pkg/action/list.go).
    let every_state = impersonated_major() >= 4 && explicit.is_empty();
    let shown = |r: &Release| {
        if a.on("all") || every_state {
            return true;
        }
        let wanted = if explicit.is_empty() {
            vec!["deployed", "failed"]
        } else {
            explicit.clone()
        };
        wanted.iter().any(|w| match *w {
            "pending" => r.is_pending(),
            w => r.status == w,
        })
    };
    let filter = match a.get("filter") {
        Some(f) => Some(regex::Regex::new(f).map_err(|e| format!("error parsing regexp: {e}"))?),
        None => None,
    };
    let ns = ctx.namespace();
    let mut rows: Vec<Release> = store
        .list()?
        .into_iter()
        .filter(|r| a.on("all-namespaces") || r.namespace == ns)
        .filter(|r| shown(r))
        .filter(|r| filter.as_ref().is_none_or(|f| f.is_match(&r.name)))
        .collect();
    if a.on("date") {
        rows.sort_by(|x, y| x.updated.cmp(&y.updated));
    }
    if a.on("reverse") {
        rows.reverse();
    }
    if let Some(max) = a
        .get("max")
        .and_then(|m| m.parse::<usize>().ok())
        .filter(|m| *m > 0)
    {
        rows.truncate(max);
    }
    if a.on("short") {
        return Ok(rows.iter().map(|r| format!("{}\n", r.name)).collect());
    }
    let json = Value::Array(rows.iter().map(output::list_row).collect());
    format(&json, a.get("output"), || {
        let mut t =
            String::from("NAME\tNAMESPACE\tREVISION\tUPDATED\tSTATUS\tCHART\tAPP VERSION\n");
        for r in &rows {
            let updated = state::go_time_string(&r.updated);
            t.push_str(&format!(
                "{}\t{}\t{}\t{updated}\t{}\t{}\t{}\n",
                r.name,
                r.namespace,
                r.revision,
                r.status,
                r.chart_ref(),
                r.app_version
            ));
        }
        t
    })
}

/// The release named by the single positional argument, or helm's not-found error.
fn one_release(ctx: &Ctx, command: &str) -> Result<Release, String> {
    let [name] = ctx.args.positionals.as_slice() else {
        return Err(format!(
            "\"helm {command}\" requires 1 argument\n\nUsage:  helm {command} RELEASE_NAME [flags]"
        ));
    };
    Store::from_env()?
        .load(&ctx.namespace(), name)?
        .ok_or_else(|| "release: not found".to_string())
}

fn status(ctx: &Ctx) -> Result<String, String> {
    let r = one_release(ctx, "status")?;
    let chart_values = ctx
        .script
        .knobs(&r.namespace, &r.name)
        .chart_values
        .unwrap_or_else(empty);
    // Like helm (pkg/cmd/status.go: `rel.Chart = nil`), status never shows
    // the chart; `helm history` and `helm list` do.
    let mut json = release_json(&r, &chart_values);
    if let Some(release) = json.as_object_mut() {
        release.remove("chart");
    }
    format(&json, ctx.args.get("output"), || output::summary(&r))
}

fn get_values(ctx: &Ctx) -> Result<String, String> {
    let r = one_release(ctx, "get values")?;
    let (values, header) = if ctx.args.on("all") {
        let mut all = ctx
            .script
            .knobs(&r.namespace, &r.name)
            .chart_values
            .unwrap_or_else(empty);
        deep_merge(&mut all, r.values.clone());
        (all, "COMPUTED VALUES:")
    } else {
        (r.values.clone(), "USER-SUPPLIED VALUES:")
    };
    format(&values, ctx.args.get("output"), || {
        format!("{header}\n{}", output::to_yaml(&values))
    })
}

fn get_manifest(ctx: &Ctx) -> Result<String, String> {
    Ok(one_release(ctx, "get manifest")?.manifest)
}

fn history(ctx: &Ctx) -> Result<String, String> {
    let r = one_release(ctx, "history")?;
    let rows = output::history_rows(&r);
    format(&rows, ctx.args.get("output"), || {
        let mut t = String::from("REVISION\tUPDATED\tSTATUS\tCHART\tAPP VERSION\tDESCRIPTION\n");
        for row in rows.as_array().into_iter().flatten() {
            let field = |k: &str| {
                row.get(k)
                    .map(|v| v.as_str().map_or(v.to_string(), str::to_string))
                    .unwrap_or_default()
            };
            t.push_str(&format!(
                "{}\t{}\t{}\t{}\t{}\t{}\n",
                field("revision"),
                field("updated"),
                field("status"),
                field("chart"),
                field("app_version"),
                field("description")
            ));
        }
        t
    })
}
