//! The shipped catalog as the real tier runs it ([`infra_root`]) and a
//! chart repository over loopback HTTP ([`ChartRepo`]).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The Gateway API manifest file of `../shared/charts`, which the shipped
/// catalog downloads from its GitHub release.
pub const GATEWAY_API: &str = "gateway-api-v1.2.1-standard-install.yaml";

/// The shipped `infra` cluster and catalog in a temporary config root,
/// limited to `releases`, as the real tier runs it: every chart repository
/// the catalog names replaced by `repo_url` (a [`ChartRepo`]; spegel, an OCI
/// chart in the catalog, is served from it too) and the Gateway API's URL by
/// its file in `charts`. The cluster's `flux:` section is left out.
pub fn infra_root(repo_url: &str, charts: &Path, releases: &[&str]) -> tempfile::TempDir {
    use crate::builder::{copy_dir, repo_root};
    let root = tempfile::tempdir().expect("tempdir");
    copy_dir(&repo_root().join("releases"), &root.path().join("releases"));
    let repo = format!("repo: {repo_url}");
    rewrite(
        root.path(),
        "releases/core.yaml",
        &[
            ("repo: https://helm.cilium.io", repo.clone()),
            ("repo: https://coredns.github.io/helm", repo.clone()),
            ("repo: https://charts.jetstack.io", repo.clone()),
            (
                "  oci: oci://ghcr.io/spegel-org/helm-charts/spegel",
                format!("  repo: {repo_url}\n  name: spegel"),
            ),
        ],
    );
    rewrite(
        root.path(),
        "releases/crds.yaml",
        &[
            (
                "repo: https://prometheus-community.github.io/helm-charts",
                repo,
            ),
            (
                "https://github.com/kubernetes-sigs/gateway-api/releases/download/v1.2.1/standard-install.yaml",
                charts.join(GATEWAY_API).display().to_string(),
            ),
        ],
    );
    let shipped = repo_root().join("clusters/infra");
    let dir = root.path().join("clusters/infra");
    copy_dir(&shipped, &dir);
    let cluster = std::fs::read_to_string(shipped.join("cluster.yaml")).expect("cluster.yaml");
    let cluster = cluster
        .split("\nflux:")
        .next()
        .unwrap_or_default()
        .to_string()
        + &format!("\nreleases: [{}]\n", releases.join(", "));
    std::fs::write(dir.join("cluster.yaml"), cluster).expect("write cluster.yaml");
    root
}

/// The shipped `infra` cluster as a user applies it (the journey): every
/// release and its `flux:` tree, in a temporary config root holding
/// `releases/`, `clusters/infra/` and `examples/gitops/`. What stands in for
/// the internet is the only change: each chart repository and OCI chart is
/// `repo_url` (a [`ChartRepo`] serving all eleven charts), the Gateway API's
/// URL its file in `charts`, the FluxInstance's distribution artifact
/// `artifact` (the same manifests, from a loopback registry), and the
/// GitRepository of `sync.yaml` the loopback `git_url`.
pub fn journey_root(
    repo_url: &str,
    charts: &Path,
    git_url: &str,
    artifact: &str,
) -> tempfile::TempDir {
    use crate::builder::{copy_dir, repo_root};
    let root = tempfile::tempdir().expect("tempdir");
    copy_dir(&repo_root().join("releases"), &root.path().join("releases"));
    copy_dir(&repo_root().join("clusters"), &root.path().join("clusters"));
    copy_dir(
        &repo_root().join("examples/gitops"),
        &root.path().join("examples/gitops"),
    );
    let repo = format!("repo: {repo_url}");
    let oci = |chart: &str, name: &str| {
        (
            format!("  oci: oci://{chart}"),
            format!("  repo: {repo_url}\n  name: {name}"),
        )
    };
    let (spegel, spegel_to) = oci("ghcr.io/spegel-org/helm-charts/spegel", "spegel");
    let (operator, operator_to) = oci(
        "ghcr.io/controlplaneio-fluxcd/charts/flux-operator",
        "flux-operator",
    );
    let (instance, instance_to) = oci(
        "ghcr.io/controlplaneio-fluxcd/charts/flux-instance",
        "flux-instance",
    );
    rewrite(
        root.path(),
        "releases/core.yaml",
        &[
            ("repo: https://helm.cilium.io", repo.clone()),
            ("repo: https://coredns.github.io/helm", repo.clone()),
            ("repo: https://charts.jetstack.io", repo.clone()),
            ("repo: https://charts.external-secrets.io", repo.clone()),
            (&spegel, spegel_to),
            (&operator, operator_to),
            (&instance, instance_to),
        ],
    );
    rewrite(
        root.path(),
        "releases/crds.yaml",
        &[
            (
                "repo: https://prometheus-community.github.io/helm-charts",
                repo.clone(),
            ),
            (
                "repo: https://victoriametrics.github.io/helm-charts",
                repo.clone(),
            ),
            ("repo: https://cloudnative-pg.github.io/charts", repo),
            (
                "https://github.com/kubernetes-sigs/gateway-api/releases/download/v1.2.1/standard-install.yaml",
                charts.join(GATEWAY_API).display().to_string(),
            ),
        ],
    );
    rewrite(
        root.path(),
        "releases/values/flux-instance.yaml",
        &[(
            "    artifact: oci://ghcr.io/controlplaneio-fluxcd/flux-operator-manifests",
            format!("    artifact: {artifact}"),
        )],
    );
    rewrite(
        root.path(),
        "examples/gitops/clusters/infra/flux-system/sync.yaml",
        &[(
            "url: https://github.com/example/bootstrap",
            format!("url: {git_url}"),
        )],
    );
    root
}

/// Replaces, in `file` under `root`, each `from` by its `to`; a `from` the
/// file no longer holds fails the test (the shipped file changed).
pub fn rewrite(root: &Path, file: &str, pairs: &[(&str, String)]) {
    let path = root.join(file);
    let mut text = std::fs::read_to_string(&path).expect("a shipped release file");
    for (from, to) in pairs {
        assert!(
            text.contains(from),
            "the shipped {file} changed: no `{from}` in it"
        );
        text = text.replace(from, to);
    }
    std::fs::write(&path, text).expect("write");
}

/// A Helm chart repository over loopback HTTP: the given chart directories
/// packaged by the real `helm package`, indexed by `helm repo index`, served
/// by a thread until dropped. Charts are pulled from it the way users pull
/// them (`--repo URL NAME --version V`: index, archive, chart cache).
///
/// Its directory, `realenv-charts-PID-*` in the temporary directory, goes
/// when it is dropped, and otherwise when the process exits: a test binary
/// keeps its repository in a `static`, which is never dropped (one such
/// directory was left per test process). One left by a process that was
/// killed is removed by the next repository served.
pub struct ChartRepo {
    /// `http://127.0.0.1:PORT`
    pub url: String,
    dir: tempfile::TempDir,
    stop: Arc<AtomicBool>,
    port: u16,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ChartRepo {
    /// Packages `charts` with `helm` and serves them.
    pub fn serve(helm: &Path, charts: &[PathBuf]) -> ChartRepo {
        sweep_chart_dirs(&std::env::temp_dir());
        let dir = tempfile::Builder::new()
            .prefix(&format!("{CHART_DIR_PREFIX}{}-", std::process::id()))
            .tempdir()
            .expect("tempdir");
        remove_at_exit(dir.path());
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the chart repository");
        let port = listener.local_addr().expect("address").port();
        let url = format!("http://127.0.0.1:{port}");
        let home = dir.path().join(".helm");
        let run = |args: &[&std::ffi::OsStr]| {
            let out = Command::new(helm)
                .args(args)
                .env("HELM_CACHE_HOME", home.join("cache"))
                .env("HELM_CONFIG_HOME", home.join("config"))
                .env("HELM_DATA_HOME", home.join("data"))
                .output()
                .expect("running helm");
            assert!(
                out.status.success(),
                "helm {:?}: {}",
                args,
                String::from_utf8_lossy(&out.stderr)
            );
        };
        for chart in charts {
            run(&[
                "package".as_ref(),
                chart.as_os_str(),
                "-d".as_ref(),
                dir.path().as_os_str(),
            ]);
        }
        run(&[
            "repo".as_ref(),
            "index".as_ref(),
            dir.path().as_os_str(),
            "--url".as_ref(),
            url.as_ref(),
        ]);
        let stop = Arc::new(AtomicBool::new(false));
        let root = dir.path().to_path_buf();
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(stream) = stream {
                    let root = root.clone();
                    std::thread::spawn(move || serve_file(stream, &root));
                }
            }
        });
        ChartRepo {
            url,
            dir,
            stop,
            port,
            thread: Some(thread),
        }
    }

    /// The directory served (the archives and index.yaml).
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for ChartRepo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop up so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

const CHART_DIR_PREFIX: &str = "realenv-charts-";

/// Directories this process removes when it exits.
static AT_EXIT: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn remove_at_exit(dir: &Path) {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        // SAFETY: registers a plain function; it runs at exit(3).
        unsafe { libc::atexit(remove_registered) };
    });
    AT_EXIT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(dir.to_path_buf());
}

/// Runs at exit(3), when the test harness returns from main: removes the
/// registered directories. A thread that holds the list at that moment
/// leaves them to the next [`sweep_chart_dirs`].
extern "C" fn remove_registered() {
    if let Ok(mut dirs) = AT_EXIT.try_lock() {
        for dir in dirs.drain(..) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Removes the chart repository directories under `tmp` of processes that
/// no longer run (killed before they could remove their own).
fn sweep_chart_dirs(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(CHART_DIR_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // SAFETY: signal 0 only asks whether the process exists.
        let gone = unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Answers one HTTP/1.1 GET with the file under `root` (404 otherwise) and
/// closes the connection.
fn serve_file(stream: TcpStream, root: &Path) {
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => break,
            Ok(_) if header == "\r\n" || header == "\n" => break,
            Ok(_) => {}
        }
    }
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default();
    let target = parts.next().unwrap_or_default();
    let path = target
        .split('?')
        .next()
        .unwrap_or_default()
        .trim_start_matches('/');
    let file = (!path.contains("..") && !path.is_empty())
        .then(|| root.join(path))
        .filter(|p| p.is_file());
    let mut stream = stream;
    let (status, body) = match (method, file) {
        ("GET" | "HEAD", Some(file)) => {
            let mut body = Vec::new();
            match std::fs::File::open(&file).and_then(|mut f| f.read_to_end(&mut body)) {
                Ok(_) => ("200 OK", body),
                Err(_) => ("500 Internal Server Error", Vec::new()),
            }
        }
        ("GET" | "HEAD", None) => ("404 Not Found", b"not found\n".to_vec()),
        _ => ("405 Method Not Allowed", Vec::new()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    if method != "HEAD" {
        let _ = stream.write_all(&body);
    }
    let _ = stream.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pid no process has: a child that has been reaped.
    fn dead_pid() -> u32 {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    #[test]
    fn chart_dirs_of_dead_processes_are_swept_and_ours_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let ours = tmp
            .path()
            .join(format!("{CHART_DIR_PREFIX}{}-abc", std::process::id()));
        let dead = tmp
            .path()
            .join(format!("{CHART_DIR_PREFIX}{}-def", dead_pid()));
        let other = tmp.path().join("realenv-abc");
        for dir in [&ours, &dead, &other] {
            std::fs::create_dir_all(dir.join("sub")).unwrap();
        }
        sweep_chart_dirs(tmp.path());
        assert!(ours.is_dir() && other.is_dir());
        assert!(!dead.exists());
    }

    /// What runs at exit removes every registered directory: the one of a
    /// repository kept in a `static`.
    #[test]
    fn registered_dirs_are_removed_at_exit() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("repo");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        remove_at_exit(&dir);
        remove_registered();
        assert!(!dir.exists());
    }
}
