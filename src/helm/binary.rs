//! [`Helm`] implemented by running the helm binary.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tempfile::NamedTempFile;
use tokio::sync::OnceCell;

use super::args::ChartArg;
use super::cache::{ChartCache, Key, Lookup};
use super::process::{self, Finished, Invocation, RunError};
use super::redact::Redactor;
use super::repos::{self, LocalRepo, RepoDir};
use super::{
    DeployedRelease, Helm, HelmError, HelmVersion, InstallRequest, TemplateRequest, Warn, args,
    output,
};
use crate::kube::KubeTarget;
use crate::release::{Chart, ChartSource, ReleaseId};
use crate::stop::StopSignal;
use crate::values::SecretPaths;

/// The oldest helm with `--labels` on install/upgrade.
pub const MIN_VERSION: (u64, u64) = (3, 13);

/// How many `helm pull`s [`Helm::prefetch`] runs at once: enough for every
/// chart of the shipped clusters (ten), so none waits behind another.
pub const PARALLEL_PULLS: usize = 16;

/// One chart's fetch in this run: done once, shared by every command that
/// uses the chart (an error too, so a failed pull is not retried per use).
type Fetch = Arc<OnceCell<Result<PathBuf, HelmError>>>;

pub struct HelmCli {
    program: PathBuf,
    grace: Duration,
    query_timeout: Duration,
    env: Vec<(OsString, OsString)>,
    version: OnceCell<HelmVersion>,
    /// The private repository config of credentialed repositories
    /// ([`repos`]), made on first need, removed with this value.
    repo_dir: OnceCell<RepoDir>,
    /// Each credentialed repository is added once per run.
    repos_added: tokio::sync::Mutex<std::collections::HashMap<String, Arc<OnceCell<()>>>>,
    /// The chart cache; `None`: helm downloads each chart at each use.
    cache: Option<ChartCache>,
    /// Each remote chart is fetched once per run.
    fetches: std::sync::Mutex<std::collections::HashMap<Key, Fetch>>,
    warn: std::sync::Mutex<Option<Warn>>,
}

impl HelmCli {
    /// `None` runs `helm` from PATH.
    pub fn new(path: Option<PathBuf>) -> HelmCli {
        HelmCli {
            program: process::program(path),
            grace: Duration::from_secs(30),
            query_timeout: Duration::from_secs(300),
            env: Vec::new(),
            version: OnceCell::new(),
            repo_dir: OnceCell::new(),
            repos_added: tokio::sync::Mutex::default(),
            cache: None,
            fetches: std::sync::Mutex::default(),
            warn: std::sync::Mutex::new(None),
        }
    }

    /// Remote charts are pulled once into `cache` and used from there
    /// (docs/design.md#chart-cache).
    pub fn with_cache(mut self, cache: Option<ChartCache>) -> HelmCli {
        self.cache = cache;
        self
    }

    fn warning(&self, message: String) {
        let sink = self.warn.lock().ok().and_then(|sink| sink.clone());
        match sink {
            Some(sink) => sink(message),
            None => eprintln!("warning: {message}"),
        }
    }

    /// Where helm takes `chart` from: the cached archive of a remote chart
    /// (pulled now, or by a [`Helm::prefetch`] already under way), else the
    /// chart as configured.
    async fn locate(&self, chart: &Chart) -> Result<Located, HelmError> {
        if let (Some(cache), Some(key)) = (&self.cache, Key::of(chart)) {
            let fetch = self
                .fetches
                .lock()
                .map_err(|_| HelmError::Io("the chart cache's lock is poisoned".into()))?
                .entry(key.clone())
                .or_default()
                .clone();
            let archive = fetch
                .get_or_init(|| self.fetch(cache, &key, chart))
                .await
                .clone()?;
            return Ok(Located::Archive(archive));
        }
        Ok(Located::Remote(self.local_repo(chart).await?))
    }

    /// The archive of `chart` from `cache`, verified, or pulled into it.
    async fn fetch(
        &self,
        cache: &ChartCache,
        key: &Key,
        chart: &Chart,
    ) -> Result<PathBuf, HelmError> {
        let io = |what: &str, e: std::io::Error| {
            HelmError::Io(format!(
                "chart cache {}: {what}: {e} (choose another with --cache-dir, or run with --no-chart-cache)",
                cache.dir().display()
            ))
        };
        // Another cluster of this process pulling the same chart: wait for
        // it, then find its archive.
        let _turn = cache.turn(key).await;
        let found = {
            let (cache, key) = (cache.clone(), key.clone());
            tokio::task::spawn_blocking(move || cache.lookup(&key))
                .await
                .map_err(|e| HelmError::Io(format!("the chart cache task failed: {e}")))?
        };
        match found {
            Lookup::Hit(archive) => return Ok(archive),
            Lookup::Miss => {}
            Lookup::Corrupt(why) => self.warning(format!(
                "chart cache: {why}; pulling {} {} again",
                key.chart, key.version
            )),
        }
        let staging = cache
            .staging()
            .map_err(|e| io("cannot create a directory to pull into", e))?;
        let local = self.local_repo(chart).await?;
        let argv = args::pull(chart, local.as_ref(), staging.path());
        self.exec(argv.clone(), self.query_timeout, None, None)
            .await?;
        let pulled = std::fs::read_dir(staging.path())
            .map_err(|e| io("cannot read what helm pulled", e))?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .find(|path| path.extension().is_some_and(|ext| ext == "tgz"))
            .ok_or_else(|| self.bad_output(&argv, "helm pull wrote no chart archive (*.tgz)"))?;
        let (cache, key) = (cache.clone(), key.clone());
        tokio::task::spawn_blocking(move || {
            let stored = cache.store(&key, &pulled);
            drop(staging);
            stored
        })
        .await
        .map_err(|e| HelmError::Io(format!("the chart cache task failed: {e}")))?
        .map_err(|e| io("cannot store the pulled chart", e))
    }

    /// How long a running install may continue after the first interrupt.
    pub fn with_grace(mut self, grace: Duration) -> HelmCli {
        self.grace = grace;
        self
    }

    /// How long a query (`template`, `status`, `get`…) may run before helm
    /// is stopped.
    pub fn with_query_timeout(mut self, timeout: Duration) -> HelmCli {
        self.query_timeout = timeout;
        self
    }

    /// An environment variable for every helm process, on top of bootstrap's
    /// own (e.g. `HELM_CACHE_HOME`).
    pub fn with_env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> HelmCli {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn program(&self) -> &Path {
        &self.program
    }

    async fn exec(
        &self,
        args: Vec<String>,
        timeout: Duration,
        stop: Option<StopSignal>,
        values: Option<(&Value, &SecretPaths)>,
    ) -> Result<Finished, HelmError> {
        self.exec_input(args, timeout, stop, values, None).await
    }

    async fn exec_input(
        &self,
        args: Vec<String>,
        timeout: Duration,
        stop: Option<StopSignal>,
        values: Option<(&Value, &SecretPaths)>,
        stdin: Option<&[u8]>,
    ) -> Result<Finished, HelmError> {
        let result = process::run(Invocation {
            program: &self.program,
            args: &args,
            env: &self.env,
            timeout,
            grace: self.grace,
            stop,
            stdin,
        })
        .await;
        let redactor = Redactor::new(&args, values);
        let argv = || {
            let mut argv = vec![process::display(&self.program)];
            argv.extend(redactor.argv(&args));
            argv
        };
        match result {
            Ok(finished) if finished.success() => Ok(finished),
            Ok(finished) => Err(HelmError::Failed {
                argv: argv(),
                status: finished.code,
                stderr: redactor.text(&finished.stderr),
            }),
            Err(RunError::Spawn(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(HelmError::NotFound {
                    path: process::display(&self.program),
                })
            }
            Err(RunError::Spawn(e)) | Err(RunError::Wait(e)) => Err(HelmError::Io(format!(
                "`{}`: {e}",
                process::display(&self.program)
            ))),
            Err(RunError::Output(e)) => Err(HelmError::Io(format!(
                "`{}`: cannot keep its output in the temporary directory ({}): {e}",
                process::display(&self.program),
                std::env::temp_dir().display()
            ))),
            Err(RunError::NotStarted) => Err(HelmError::NotStarted { argv: argv() }),
            Err(RunError::Stopped(reason)) => Err(HelmError::Stopped {
                argv: argv(),
                reason,
            }),
            Err(RunError::TimedOut(after)) => Err(HelmError::TimedOut {
                argv: argv(),
                after,
            }),
        }
    }

    /// Runs a read-only command, retrying (1 s, then 2 s) when helm failed
    /// because the API server blipped: reads are safe to repeat, and the API
    /// server is flaky exactly while the CNI comes up.
    async fn exec_read(&self, args: Vec<String>) -> Result<Finished, HelmError> {
        let mut delay = Duration::from_secs(1);
        for _ in 0..2 {
            match self
                .exec(args.clone(), self.query_timeout, None, None)
                .await
            {
                Err(HelmError::Failed { stderr, .. }) if is_transient(&stderr) => {
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                }
                other => return other,
            }
        }
        self.exec(args, self.query_timeout, None, None).await
    }

    /// Runs a read-only command; `Ok(None)` when helm says the release does
    /// not exist.
    async fn query(&self, args: Vec<String>) -> Result<Option<Finished>, HelmError> {
        match self.exec_read(args).await {
            Ok(finished) => Ok(Some(finished)),
            Err(HelmError::Failed { stderr, .. }) if output::is_not_found(&stderr) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn bad_output(&self, args: &[String], message: impl std::fmt::Display) -> HelmError {
        let mut argv = vec![process::display(&self.program)];
        argv.extend(Redactor::new(args, None).argv(args));
        HelmError::BadOutput {
            argv,
            message: message.to_string(),
        }
    }

    /// For a chart whose repository URL has credentials: the repository,
    /// added (once per run) to the private repository config with the
    /// password on stdin, under which helm is to find the chart. `None` for
    /// every other chart.
    async fn local_repo(&self, chart: &Chart) -> Result<Option<LocalRepo>, HelmError> {
        let ChartSource::Repo { url, .. } = &chart.source else {
            return Ok(None);
        };
        let Some(repo) = repos::split_credentials(url) else {
            return Ok(None);
        };
        let dir = self
            .repo_dir
            .get_or_try_init(|| async {
                RepoDir::new().map_err(|e| {
                    HelmError::Io(format!(
                        "cannot create a private directory for helm's repository config: {e}"
                    ))
                })
            })
            .await?;
        let local = dir.local(repos::repo_name(&repo));
        let added = self
            .repos_added
            .lock()
            .await
            .entry(local.name.clone())
            .or_default()
            .clone();
        added
            .get_or_try_init(|| async {
                let password = format!("{}\n", repo.password);
                self.exec_input(
                    args::repo_add(&repo, &local),
                    self.query_timeout,
                    None,
                    None,
                    Some(password.as_bytes()),
                )
                .await
                .map(drop)
            })
            .await?;
        Ok(Some(local))
    }

    async fn detect_version(&self) -> Result<HelmVersion, HelmError> {
        let finished = self
            .exec(args::version(), self.query_timeout, None, None)
            .await?;
        let version =
            output::version(&finished.stdout).ok_or_else(|| HelmError::UnknownVersion {
                output: finished.stdout.trim().to_string(),
            })?;
        if (version.major, version.minor) < MIN_VERSION {
            return Err(HelmError::TooOld { found: version.raw });
        }
        Ok(version)
    }
}

/// Where one command takes its chart from (see [`HelmCli::locate`]).
enum Located {
    Archive(PathBuf),
    /// As configured, with the credentialed repository it is named through.
    Remote(Option<LocalRepo>),
}

impl Located {
    fn arg<'a>(&'a self, chart: &'a Chart) -> ChartArg<'a> {
        match self {
            Located::Archive(path) => ChartArg::Local(path),
            Located::Remote(local) => ChartArg::Remote(chart, local.as_ref()),
        }
    }
}

/// The release's values in a file only the user can read, removed when the
/// returned guard drops — on success, failure, and when the caller's future is
/// cancelled mid-await. YAML, quoted by serde-saphyr so helm's YAML 1.1 reader
/// never turns strings like `on` or `0o17` into other types.
fn values_file(values: &Value) -> Result<NamedTempFile, HelmError> {
    use std::os::unix::fs::PermissionsExt;
    let yaml = serde_saphyr::to_string(values)
        .map_err(|e| HelmError::Io(format!("cannot write the values as YAML: {e}")))?;
    let io = |e: std::io::Error| HelmError::Io(format!("cannot write the values file: {e}"));
    let mut file = tempfile::Builder::new()
        .prefix(&crate::child::temp_prefix("values"))
        .suffix(".yaml")
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile()
        .map_err(io)?;
    file.write_all(yaml.as_bytes()).map_err(io)?;
    file.flush().map_err(io)?;
    Ok(file)
}

impl Helm for HelmCli {
    async fn version(&self) -> Result<HelmVersion, HelmError> {
        self.version
            .get_or_try_init(|| self.detect_version())
            .await
            .cloned()
    }

    async fn upgrade_install(
        &self,
        target: &KubeTarget,
        request: &InstallRequest<'_>,
        stop: StopSignal,
    ) -> Result<(), HelmError> {
        // Only `helm:` flags depend on the version; without them no
        // `helm version` runs here (apply detected it up front anyway).
        let major = if args::helm_flags(request.flags, 4).is_empty() {
            4
        } else {
            self.version().await?.major
        };
        let located = self.locate(request.chart).await?;
        let file = values_file(request.values)?;
        let argv = args::upgrade_install(
            target,
            request,
            file.path(),
            major,
            located.arg(request.chart),
        );
        // The release's budget bounds helm itself, not only helm's own waits
        // (`--timeout` limits each Kubernetes operation, not the command): a
        // helm that hangs on a lost API connection is stopped at the deadline.
        let result = self
            .exec(
                argv,
                request.timeout,
                Some(stop),
                Some((request.values, request.secrets)),
            )
            .await;
        drop(file);
        result.map(|_| ())
    }

    async fn template(&self, request: &TemplateRequest<'_>) -> Result<String, HelmError> {
        let located = self.locate(request.chart).await?;
        let file = values_file(request.values)?;
        let argv = args::template(request, file.path(), located.arg(request.chart));
        let result = self
            .exec(
                argv,
                self.query_timeout,
                None,
                Some((request.values, request.secrets)),
            )
            .await;
        drop(file);
        result.map(|finished| finished.stdout)
    }

    async fn status(
        &self,
        target: &KubeTarget,
        release: &ReleaseId,
    ) -> Result<Option<DeployedRelease>, HelmError> {
        let argv = args::history(target, release);
        let Some(finished) = self.query(argv.clone()).await? else {
            return Ok(None);
        };
        output::history(&finished.stdout, release)
            .map_err(|message| self.bad_output(&argv, message))
    }

    async fn list(&self, target: &KubeTarget) -> Result<Vec<DeployedRelease>, HelmError> {
        let major = self.version().await?.major;
        let argv = args::list(target, major);
        let finished = self.exec_read(argv.clone()).await?;
        output::list(&finished.stdout).map_err(|message| self.bad_output(&argv, message))
    }

    async fn get_values(
        &self,
        target: &KubeTarget,
        release: &ReleaseId,
    ) -> Result<Value, HelmError> {
        let argv = args::get_values(target, release);
        let finished = self.exec_read(argv.clone()).await?;
        output::values(&finished.stdout).map_err(|message| self.bad_output(&argv, message))
    }

    async fn get_manifest(
        &self,
        target: &KubeTarget,
        release: &ReleaseId,
    ) -> Result<String, HelmError> {
        let argv = args::get_manifest(target, release);
        let finished = self.exec_read(argv.clone()).await?;
        Ok(finished.stdout)
    }

    async fn rollback(
        &self,
        target: &KubeTarget,
        release: &ReleaseId,
        timeout: Duration,
    ) -> Result<(), HelmError> {
        let argv = args::rollback(target, release, timeout);
        self.exec(argv, timeout, None, None).await.map(|_| ())
    }

    async fn uninstall(
        &self,
        target: &KubeTarget,
        release: &ReleaseId,
        timeout: Duration,
    ) -> Result<(), HelmError> {
        let argv = args::uninstall(target, release, timeout);
        match self.exec(argv, timeout, None, None).await {
            Err(HelmError::Failed { stderr, .. }) if output::is_not_found(&stderr) => Ok(()),
            other => other.map(|_| ()),
        }
    }

    async fn prefetch(&self, charts: Vec<Chart>) {
        use futures::StreamExt;
        if self.cache.is_none() {
            return;
        }
        // By index: a closure over `&Chart` would not be `Send` for every
        // lifetime (a limit of rustc).
        futures::stream::iter(0..charts.len())
            .map(|i| self.locate(&charts[i]))
            .buffer_unordered(PARALLEL_PULLS)
            .for_each(|_| async {})
            .await;
    }

    fn on_warning(&self, sink: Option<Warn>) {
        if let Ok(mut slot) = self.warn.lock() {
            *slot = sink;
        }
    }
}

/// helm's wording for failures that a retry can fix: the API server was
/// unreachable, overloaded or restarting.
pub fn is_transient(stderr: &str) -> bool {
    const SIGNS: &[&str] = &[
        "connection refused",
        "connection reset",
        "i/o timeout",
        "tls handshake timeout",
        "the server is currently unable to handle the request",
        "etcdserver: request timed out",
        "http2: client connection lost",
        "unexpected eof",
        "context deadline exceeded",
        "too many requests",
        "service unavailable",
        "internal error occurred",
    ];
    let text = stderr.to_ascii_lowercase();
    SIGNS.iter().any(|sign| text.contains(sign))
}

#[cfg(test)]
mod transient_tests {
    use super::is_transient;

    #[test]
    fn api_blips_are_transient_and_real_answers_are_not() {
        assert!(is_transient(
            "Error: Kubernetes cluster unreachable: Get \"https://10.0.0.1:6443/version\": dial tcp 10.0.0.1:6443: connect: connection refused"
        ));
        assert!(is_transient(
            "Error: the server is currently unable to handle the request (get secrets)"
        ));
        assert!(!is_transient("Error: release: not found"));
        assert!(!is_transient(
            "Error: secrets is forbidden: User \"x\" cannot list resource"
        ));
    }
}
