//! `helm repo add` and the repository config it writes (helm's
//! pkg/cmd/repo_add.go and pkg/repo/repo.go): the file at
//! `--repository-config` (else `$HELM_REPOSITORY_CONFIG`), YAML with a
//! `repositories` list of `{name, url, username, password}`, written 0600.
//! The password comes from `--password`, or with `--password-stdin` from
//! stdin (read only when `--username` is given, the trailing newline
//! dropped), never echoed or logged.

use std::io::Read;
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::ctx::Ctx;

fn config_path(ctx: &Ctx) -> Option<PathBuf> {
    ctx.args
        .get("repository-config")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HELM_REPOSITORY_CONFIG")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
}

fn read_config(path: &PathBuf) -> Result<Vec<Value>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let doc: Value =
                serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(doc["repositories"].as_array().cloned().unwrap_or_default())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

pub fn add(ctx: &Ctx) -> Result<String, String> {
    let [name, url] = ctx.args.positionals.as_slice() else {
        return Err(
            "\"helm repo add\" requires 2 arguments\n\nUsage:  helm repo add [NAME] [URL] [flags]"
                .into(),
        );
    };
    let path = config_path(ctx).ok_or(
        "fake-helm: `repo add` needs --repository-config or HELM_REPOSITORY_CONFIG (the fake never writes ~/.config)",
    )?;
    let username = ctx.args.get("username").unwrap_or_default().to_string();
    let mut password = ctx.args.get("password").unwrap_or_default().to_string();
    if ctx.args.on("password-stdin") {
        if username.is_empty() {
            return Err(
                "fake-helm: --password-stdin without --username: helm would not read stdin".into(),
            );
        }
        let mut input = String::new();
        std::io::stdin()
            .read_to_string(&mut input)
            .map_err(|e| e.to_string())?;
        password = input
            .strip_suffix('\n')
            .unwrap_or(&input)
            .trim_end_matches('\r')
            .to_string();
    }
    let mut repositories = read_config(&path)?;
    if let Some(existing) = repositories.iter().find(|r| r["name"] == name.as_str())
        && existing["url"] != url.as_str()
        && !ctx.args.on("force-update")
    {
        return Err(format!(
            "repository name ({name}) already exists, please specify a different name"
        ));
    }
    repositories.retain(|r| r["name"] != name.as_str());
    repositories
        .push(json!({ "name": name, "url": url, "username": username, "password": password }));
    let text = serde_saphyr::to_string(&json!({ "apiVersion": "", "repositories": repositories }))
        .map_err(|e| e.to_string())?;
    write_private(&path, &text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(format!("\"{name}\" has been added to your repositories\n"))
}

fn write_private(path: &PathBuf, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())
}

/// For a `REPO/CHART` reference (not a path, not oci, no `--repo`): the
/// repository must be in the repository config, as helm requires.
pub fn check_reference(chart_arg: &str, ctx: &Ctx) -> Result<(), String> {
    if ctx.args.get("repo").is_some()
        || chart_arg.starts_with("oci://")
        || std::path::Path::new(chart_arg).exists()
    {
        return Ok(());
    }
    let Some((repo, _)) = chart_arg.split_once('/') else {
        return Ok(());
    };
    let Some(path) = config_path(ctx) else {
        return Ok(());
    };
    let repositories = read_config(&path)?;
    if repositories.iter().any(|r| r["name"] == repo) {
        Ok(())
    } else {
        Err(format!("repo {repo} not found"))
    }
}
