//! Connecting to the cluster a command targets, and the [`KubeTarget`] that
//! helm and command hooks get so they talk to the same cluster.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ::kube::config::{KubeConfigOptions, Kubeconfig};

use crate::error::{Error, Prerequisite};

/// Which cluster a command talks to; passed to helm on every call (`--kubeconfig`, `--kube-context`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeTarget {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
}

/// kubeconfig and context resolved from flags, cluster.yaml and environment.
#[derive(Clone)]
pub struct Connection {
    pub client: ::kube::Client,
    pub target: KubeTarget,
    /// The merged kubeconfig with `current-context` set to our context,
    /// written for command hooks (kubectl has no env var for a context).
    pub hook_kubeconfig: Option<PathBuf>,
    _hook_kubeconfig_dir: Option<std::sync::Arc<tempfile::TempDir>>,
    /// The API server's URL, as the context names it (for messages).
    pub server: String,
}

/// How long a read from the API server may go without a byte before the
/// client gives up on it. A watch asks the server to end it sooner
/// (`kube::wait`), since the API server sends nothing on an idle watch.
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);

pub async fn connect(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Connection, Error> {
    let explicit = kubeconfig.map(Path::to_path_buf).or_else(|| {
        std::env::var_os("KUBECONFIG")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    let config_file = match &explicit {
        Some(path) => {
            Kubeconfig::read_from(path).map_err(|source| Prerequisite::KubeconfigUnreadable {
                path: path.clone(),
                source,
            })?
        }
        None => Kubeconfig::read().map_err(|source| Prerequisite::NoKubeconfig { source })?,
    };
    let context = context
        .map(str::to_string)
        .or_else(|| config_file.current_context.clone());
    let Some(context) = context else {
        return Err(Prerequisite::NoContext.into());
    };
    if !config_file.contexts.iter().any(|c| c.name == context) {
        return Err(Prerequisite::UnknownContext {
            known: config_file
                .contexts
                .iter()
                .map(|c| c.name.clone())
                .collect(),
            context,
        }
        .into());
    }
    let options = KubeConfigOptions {
        context: Some(context.clone()),
        ..KubeConfigOptions::default()
    };
    let mut config = ::kube::Config::from_custom_kubeconfig(config_file.clone(), &options)
        .await
        .map_err(|source| Prerequisite::UnusableContext {
            context: context.clone(),
            source,
        })?;
    let server = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_string();
    config.connect_timeout = Some(Duration::from_secs(10));
    config.read_timeout = Some(READ_TIMEOUT);
    // kube's own retry layer retries 429/503/504 with growing gaps and no
    // overall bound (an API server answering 503 to everything kept one
    // request busy for minutes); every call here goes through
    // `retry::retry`, which has a budget.
    config.default_retry = false;
    let client = ::kube::Client::try_from(config).map_err(|source| Prerequisite::Client {
        context: context.clone(),
        source,
    })?;

    let (hook_kubeconfig, dir) = write_hook_kubeconfig(config_file, &context);
    Ok(Connection {
        client,
        target: KubeTarget {
            kubeconfig: explicit,
            context: Some(context),
        },
        hook_kubeconfig,
        _hook_kubeconfig_dir: dir.map(std::sync::Arc::new),
        server,
    })
}

fn write_hook_kubeconfig(
    mut config: Kubeconfig,
    context: &str,
) -> (Option<PathBuf>, Option<tempfile::TempDir>) {
    config.current_context = Some(context.to_string());
    let Ok(dir) = tempfile::Builder::new()
        .prefix(&crate::child::temp_prefix("kubeconfig"))
        .tempdir()
    else {
        return (None, None);
    };
    let path = dir.path().join("config");
    let Ok(text) = serde_json::to_string(&config) else {
        return (None, None);
    };
    if write_private(&path, text.as_bytes()).is_err() {
        return (None, None);
    }
    (Some(path), Some(dir))
}

/// Writes a file only the current user can read (it holds credentials).
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}
