//! Flux on the real test environment (docs/design.md#real-environment):
//! the real source-controller, helm-controller and kustomize-controller as
//! processes against a [`ControlPlane`], a git server over loopback HTTP
//! for their GitRepository, and the real flux-operator CLI.
//!
//! The binaries come from `tools/realenv/build` (tools `flux-controllers`
//! and `flux-operator`); the controllers' CRDs are their own `config/crd`,
//! copied from the controllers' Go modules at the pinned versions into the
//! tool's `share` directory by the same build.
//!
//! [`Flux::start`] installs the CRDs, starts the three controllers (no
//! leader election, metrics and health endpoints on free loopback ports,
//! source-controller's artifact server on 127.0.0.1) and waits until each
//! reports ready. Dropping it stops them; their logs go to the control
//! plane's log directory, which is kept when the test fails.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::realenv::{BUILD, ControlPlane, free_port, tail, tool_dir};

/// The tools of this front end (on top of [`crate::realenv::TOOLS`]).
pub const TOOLS: [&str; 2] = ["flux-controllers", "flux-operator"];

/// The tools of the environment and of [`TOOLS`] not built yet.
pub fn missing() -> Vec<&'static str> {
    let mut missing = crate::realenv::missing();
    missing.extend(TOOLS.iter().copied().filter(|t| !tool_dir(t).is_dir()));
    missing
}

/// The flux-operator CLI (`flux-operator build resourceset ...`).
pub fn flux_operator() -> PathBuf {
    crate::realenv::bin("flux-operator", "cli")
}

/// The Go modules of the three controllers, as `share` names them.
const CONTROLLERS: [&str; 3] = [
    "github.com/fluxcd/source-controller",
    "github.com/fluxcd/kustomize-controller",
    "github.com/fluxcd/helm-controller",
];

/// A controller process, in its own process group.
struct Proc {
    name: &'static str,
    child: Child,
    log: PathBuf,
    health: u16,
}

impl Proc {
    fn stop(&mut self) {
        let pgid = self.child.id() as libc::pid_t;
        // SAFETY: plain syscalls on a process group this struct started.
        unsafe { libc::kill(-pgid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: as above.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = self.child.wait();
    }

    /// Panics with the end of the log when the process has exited.
    fn check_alive(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "{} exited ({status}); the end of its log {}:\n{}",
                self.name,
                self.log.display(),
                tail(&self.log, 40)
            );
        }
    }
}

/// The three Flux controllers running against a control plane.
pub struct Flux {
    procs: Vec<Proc>,
    /// Their HOME and storage directories.
    _dir: tempfile::TempDir,
    /// source-controller's artifact server, `http://127.0.0.1:PORT`.
    pub artifacts: String,
}

impl Flux {
    /// Installs the controllers' CRDs and namespace `flux-system` on
    /// `plane`, starts the controllers and waits until they are ready.
    pub fn start(plane: &ControlPlane) -> Flux {
        for module in CONTROLLERS {
            plane.api().install_crds(&crate::realenv::share(
                "flux-controllers",
                &format!("{module}/config/crd/bases"),
            ));
        }
        Self::start_controllers(plane)
    }

    /// The three controllers on a cluster where Flux is installed already
    /// (its CRDs and namespace, by flux-operator): they stand in for the
    /// pods of its Deployments.
    pub fn start_controllers(plane: &ControlPlane) -> Flux {
        let missing = missing();
        assert!(
            missing.is_empty(),
            "the real test environment lacks {missing:?}: build it with `{BUILD}`"
        );
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "flux-system"}});
        match plane.api().create("/api/v1/namespaces", &namespace) {
            Ok(_) => {}
            Err(e) if e.code == 409 => {}
            Err(e) => panic!("creating namespace flux-system: {e}"),
        }

        let dir = tempfile::Builder::new()
            .prefix("realflux-")
            .tempdir()
            .expect("tempdir");
        let storage = free_port();
        let artifacts = format!("http://127.0.0.1:{storage}");
        let mut flux = Flux {
            procs: Vec::new(),
            _dir: dir,
            artifacts,
        };
        let root = flux._dir.path().to_path_buf();
        // source-controller refuses a storage path that does not exist.
        std::fs::create_dir_all(root.join("storage")).expect("the artifact storage");
        let source_args = vec![
            format!("--storage-path={}", root.join("storage").display()),
            format!("--storage-addr=127.0.0.1:{storage}"),
            format!("--storage-adv-addr=127.0.0.1:{storage}"),
        ];
        for (name, extra) in [
            ("source-controller", source_args),
            ("kustomize-controller", Vec::new()),
            ("helm-controller", Vec::new()),
        ] {
            flux.spawn(plane, name, &root, extra);
        }
        for i in 0..flux.procs.len() {
            let (name, port) = (flux.procs[i].name, flux.procs[i].health);
            flux.wait(
                plane,
                &format!("{name} ready"),
                Duration::from_secs(120),
                |_| http_get(port, "/readyz").filter(|(code, _)| *code == 200),
            );
        }
        flux
    }

    fn spawn(&mut self, plane: &ControlPlane, name: &'static str, root: &Path, extra: Vec<String>) {
        use std::os::unix::process::CommandExt;
        let log = plane.logs().join(format!("{name}.log"));
        let file = std::fs::File::create(&log).expect("create the log file");
        let home = root.join(name);
        std::fs::create_dir_all(&home).expect("the controller's home");
        let health = free_port();
        let child = Command::new(crate::realenv::bin("flux-controllers", name))
            .arg(format!("--metrics-addr=127.0.0.1:{}", free_port()))
            .arg(format!("--health-addr=127.0.0.1:{health}"))
            .arg("--enable-leader-election=false")
            .arg("--log-encoding=console")
            // Dependencies not ready yet are retried soon, not in 30 s.
            .arg("--requeue-dependency=2s")
            .args(extra)
            .env("KUBECONFIG", &plane.kubeconfig)
            .env("RUNTIME_NAMESPACE", "flux-system")
            .env("HOME", &home)
            .env("TMPDIR", &home)
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        self.procs.push(Proc {
            name,
            child,
            log,
            health,
        });
    }

    /// Polls `probe` every 250 ms until it answers, failing after `timeout`
    /// or at once when a controller died.
    pub fn wait<T>(
        &mut self,
        plane: &ControlPlane,
        what: &str,
        timeout: Duration,
        mut probe: impl FnMut(&ControlPlane) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(value) = probe(plane) {
                return value;
            }
            for proc in &mut self.procs {
                proc.check_alive();
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {timeout:?} waiting for {what} (logs: {})",
                plane.logs().display()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Flux {
    fn drop(&mut self) {
        for proc in self.procs.iter_mut().rev() {
            proc.stop();
        }
    }
}

/// flux-operator's controller (its `cmd/operator`, built by
/// `tools/realenv/build flux-operator`) running against a control plane as
/// a process, as its Deployment runs it in a cluster: it reconciles
/// FluxInstances (installing Flux from the distribution manifests of its
/// module's `config/data`, the `/data` of its image) and ResourceSets.
/// Dropping it stops it.
pub struct Operator {
    proc: Proc,
    _dir: tempfile::TempDir,
}

impl Operator {
    /// Starts the operator on `plane` and waits until it reports ready. The
    /// flux-operator CRDs must be installed already (a release's CRD phase
    /// does it in the tests; the operator only watches them).
    pub fn start(plane: &ControlPlane) -> Operator {
        Self::start_with(plane, &[])
    }

    /// [`Operator::start`] with `env` added to its environment (a
    /// registry's `SSL_CERT_FILE`).
    pub fn start_with(plane: &ControlPlane, env: &[(String, String)]) -> Operator {
        use std::os::unix::process::CommandExt;
        let missing = missing();
        assert!(
            missing.is_empty(),
            "the real test environment lacks {missing:?}: build it with `{BUILD}`"
        );
        let dir = tempfile::Builder::new()
            .prefix("flux-operator-")
            .tempdir()
            .expect("tempdir");
        let log = plane.logs().join("flux-operator.log");
        let file = std::fs::File::create(&log).expect("create the log file");
        let health = free_port();
        // Canonical: the share directory is reached through the tool's
        // symlink, and Go cleans `bin/../share` lexically.
        let data = crate::realenv::share(
            "flux-operator",
            "github.com/controlplaneio-fluxcd/flux-operator/config/data",
        )
        .canonicalize()
        .expect("the operator's data directory");
        let child = Command::new(crate::realenv::bin("flux-operator", "operator"))
            .arg(format!("--metrics-addr=127.0.0.1:{}", free_port()))
            .arg(format!("--health-addr=127.0.0.1:{health}"))
            .arg(format!("--web-server-port={}", free_port()))
            .arg(format!("--storage-path={}", data.display()))
            .arg("--enable-leader-election=false")
            .arg("--log-encoding=console")
            .arg("--requeue-dependency=2s")
            .env("KUBECONFIG", &plane.kubeconfig)
            .env("RUNTIME_NAMESPACE", "flux-system")
            // The operator refuses to run outside FIPS 140-3 mode; its image
            // is built with GOFIPS140, this binary turns it on at run time.
            .env("GODEBUG", "fips140=on")
            .env("HOME", dir.path())
            .env("TMPDIR", dir.path())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("starting flux-operator: {e}"));
        let mut operator = Operator {
            proc: Proc {
                name: "flux-operator",
                child,
                log,
                health,
            },
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        while http_get(health, "/readyz").is_none_or(|(code, _)| code != 200) {
            operator.proc.check_alive();
            assert!(
                Instant::now() < deadline,
                "flux-operator not ready after 120 s (log: {})",
                operator.proc.log.display()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        operator
    }

    /// Panics with the end of its log when the operator has exited.
    pub fn check_alive(&mut self) {
        self.proc.check_alive();
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.proc.stop();
    }
}

/// Serves the Flux distribution manifests the operator ships (its module's
/// `config/data/flux`, every Flux version's manifests) from `registry` as
/// the OCI artifact a FluxInstance's `spec.distribution.artifact` names,
/// in the place of `oci://ghcr.io/controlplaneio-fluxcd/flux-operator-manifests`.
/// The operator reads the first layer of the artifact as a tar.gz holding
/// `flux/VERSION/...` (`internal/builder/pull.go`); a chart named `flux`
/// pushed by the real `helm push` is such an artifact: its one layer is the
/// `.tgz` of `flux/`. Returns the `oci://` reference.
pub fn manifests_artifact(registry: &crate::registry::Registry) -> String {
    let data = crate::realenv::share(
        "flux-operator",
        "github.com/controlplaneio-fluxcd/flux-operator/config/data",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let flux = dir.path().join("flux");
    crate::builder::copy_dir(&data.join("flux"), &flux);
    std::fs::write(
        flux.join("Chart.yaml"),
        "apiVersion: v2\nname: flux\nversion: 1.0.0\ndescription: the Flux distribution manifests flux-operator ships, as its manifests artifact\n",
    )
    .expect("Chart.yaml");
    registry.push(&flux, "controlplaneio-fluxcd");
    format!("oci://{}/controlplaneio-fluxcd/flux:1.0.0", registry.addr())
}

/// The status, reason and message of a Flux object's `Ready` condition.
pub fn ready(object: &Value) -> Option<(String, String, String)> {
    let conditions = object["status"]["conditions"].as_array()?;
    let c = conditions.iter().find(|c| c["type"] == "Ready")?;
    let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    Some((text("status"), text("reason"), text("message")))
}

/// A plain HTTP GET on 127.0.0.1:`port`: the status code and body.
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let code = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string());
    Some((code, body.unwrap_or_default()))
}

/// A git repository served over smart HTTP on loopback by `git
/// http-backend` (as CGI), for a Flux GitRepository: one repository
/// `repo.git` whose branch `main` has one commit holding a directory tree.
pub struct GitServer {
    /// `http://127.0.0.1:PORT/repo.git`
    pub url: String,
    dir: tempfile::TempDir,
    stop: Arc<AtomicBool>,
    port: u16,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl GitServer {
    /// Commits the files of `tree` (recursively) to branch `main` and
    /// serves the repository.
    pub fn serve(tree: &Path) -> GitServer {
        Self::serve_made(|_| tree.to_path_buf())
    }

    /// [`GitServer::serve`] of the tree `make` writes once it knows the
    /// repository's URL (a tree whose GitRepository names its own URL).
    pub fn serve_made(make: impl FnOnce(&str) -> PathBuf) -> GitServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the git server");
        let port = listener.local_addr().expect("address").port();
        let url = format!("http://127.0.0.1:{port}/repo.git");
        let tree = make(&url);
        let dir = tempfile::Builder::new()
            .prefix("realflux-git-")
            .tempdir()
            .expect("tempdir");
        let work = dir.path().join("work");
        crate::builder::copy_dir(&tree, &work);
        git(&work, &["init", "-q", "-b", "main"]);
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-q", "-m", "tree"]);
        let served = dir.path().join("served");
        std::fs::create_dir_all(&served).expect("served dir");
        git(
            dir.path(),
            &["clone", "-q", "--bare", "work", "served/repo.git"],
        );

        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(stream) = stream {
                    let root = served.clone();
                    std::thread::spawn(move || serve_git(stream, &root));
                }
            }
        });
        GitServer {
            url,
            dir,
            stop,
            port,
            thread: Some(thread),
        }
    }

    /// The repository's work tree (what was committed).
    pub fn tree(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// A new commit on `main`: `edit` changes the work tree, and the
    /// served repository gets the commit (what a `git push` does).
    pub fn commit(&self, message: &str, edit: impl FnOnce(&Path)) {
        let work = self.tree();
        edit(&work);
        for args in [
            &["add", "-A"][..],
            &["commit", "-q", "-m", message],
            &["push", "-q", "../served/repo.git", "main"],
        ] {
            git(&work, args);
        }
    }
}

/// `git ARGS` in `cwd` as the served repository's author, never a user's
/// own git settings; fails the test when git does.
fn git(cwd: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(cwd)
        .args([
            "-c",
            "user.name=realflux",
            "-c",
            "user.email=realflux@127.0.0.1",
        ])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .expect("running git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Drop for GitServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop up so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Answers one HTTP/1.1 request with `git http-backend` run as a CGI
/// program (RFC 3875) on the repositories under `root`, then closes the
/// connection.
fn serve_git(stream: TcpStream, root: &Path) {
    let Ok(read) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) if line.trim().is_empty() => break,
            Ok(_) => {
                if let Some((k, v)) = line.split_once(':') {
                    headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                }
            }
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if let Some(length) = header("content-length").and_then(|l| l.parse::<usize>().ok()) {
        body.resize(length, 0);
        if reader.read_exact(&mut body).is_err() {
            return;
        }
    } else if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        match read_chunked(&mut reader) {
            Some(b) => body = b,
            None => return,
        }
    }
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default();
    let (path, query) = target.split_once('?').unwrap_or((target, ""));

    let mut cmd = Command::new("git");
    cmd.arg("http-backend")
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("REQUEST_METHOD", &method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("CONTENT_LENGTH", body.len().to_string())
        .env_remove("GIT_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(t) = header("content-type") {
        cmd.env("CONTENT_TYPE", t);
    }
    if let Some(e) = header("content-encoding") {
        cmd.env("HTTP_CONTENT_ENCODING", e);
    }
    if let Some(p) = header("git-protocol") {
        cmd.env("GIT_PROTOCOL", p);
    }
    let mut stream = stream;
    let Ok(mut child) = cmd.spawn() else {
        let _ = stream.write_all(
            b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        return;
    };
    // The body is written from another thread: the backend may answer
    // before it has read all of it.
    let mut stdin = child.stdin.take().expect("piped stdin");
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let mut output = Vec::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_end(&mut output);
    }
    let _ = writer.join();
    let _ = child.wait();

    // A CGI response: header lines, an empty line, the body.
    let split = find(&output, b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| find(&output, b"\n\n").map(|i| (i, 2)));
    let (head, body) = match split {
        Some((i, n)) => (
            String::from_utf8_lossy(&output[..i]).into_owned(),
            &output[i + n..],
        ),
        None => (String::new(), &output[..]),
    };
    let mut status = "200 OK".to_string();
    let mut response = Vec::new();
    for line in head.lines() {
        match line.split_once(':') {
            Some((k, v)) if k.eq_ignore_ascii_case("status") => status = v.trim().to_string(),
            Some(_) => {
                response.extend_from_slice(line.as_bytes());
                response.extend_from_slice(b"\r\n");
            }
            None => {}
        }
    }
    let start = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    let _ = stream.write_all(start.as_bytes());
    let _ = stream.write_all(&response);
    let _ = stream.write_all(b"\r\n");
    if method != "HEAD" {
        let _ = stream.write_all(body);
    }
    let _ = stream.flush();
}

/// A chunked request body (`Transfer-Encoding: chunked`), decoded.
fn read_chunked(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size).ok()?;
        let size = usize::from_str_radix(size.trim().split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            // Trailers, up to the empty line.
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).ok()? == 0 || line.trim().is_empty() {
                    return Some(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..]).ok()?;
        let mut crlf = String::new();
        reader.read_line(&mut crlf).ok()?;
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real git client clones the served tree over smart HTTP.
    #[test]
    fn git_clones_the_served_tree() {
        let tree = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tree.path().join("kubernetes/apps")).unwrap();
        std::fs::write(tree.path().join("kubernetes/apps/a.yaml"), "kind: A\n").unwrap();
        let server = GitServer::serve(tree.path());
        let clone = tempfile::tempdir().unwrap();
        let out = Command::new("git")
            .args(["clone", "-q", "--branch", "main", &server.url])
            .arg(clone.path().join("repo"))
            .env("GIT_TERMINAL_PROMPT", "0")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let file = std::fs::read_to_string(clone.path().join("repo/kubernetes/apps/a.yaml"));
        assert_eq!(file.unwrap(), "kind: A\n");
    }

    #[test]
    fn a_chunked_body_is_decoded() {
        let mut input = &b"4\r\nWiki\r\n6;x=y\r\npedia \r\n0\r\nTrailer: t\r\n\r\n"[..];
        assert_eq!(read_chunked(&mut input).unwrap(), b"Wikipedia ");
    }
}
