//! A chart registry on the loopback for tests that pull charts by `oci://`
//! (and from classic `https://` chart repositories) without the network:
//! `tools/realenv/build oci-registry` builds distribution's registry
//! (github.com/distribution/distribution/v3) into `oci-registry`, which
//! serves the OCI distribution API at `/v2/` and the files of a directory at
//! `/files/`, over TLS with a certificate of its own.
//!
//! Programs find it the way they find any registry: helm, helmfile and
//! bootstrap's helm read `SSL_CERT_FILE` ([`Registry::ca`]), so an
//! `oci://127.0.0.1:PORT/...` reference is pulled as a public one would be.
//! Charts are put there with the real `helm push` ([`Registry::push`]) and
//! `helm repo index` ([`Registry::publish`]).
//!
//! Dropping it stops the server (its standard input closes, and it is
//! killed).

use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// The command that builds the registry.
pub const BUILD: &str = "tools/realenv/build oci-registry";

/// `tools/realenv/.bin/oci-registry/oci-registry`.
pub fn binary() -> PathBuf {
    crate::realenv::tool_dir("oci-registry").join("oci-registry")
}

/// A running registry.
pub struct Registry {
    child: Child,
    stdin: Option<ChildStdin>,
    dir: tempfile::TempDir,
    addr: String,
    helm: PathBuf,
}

impl Registry {
    /// Starts the registry; `helm` is the helm CLI that pushes and indexes.
    /// A missing binary fails the test with the command that builds it.
    pub fn start(helm: &Path) -> Registry {
        let bin = binary();
        assert!(
            bin.is_file(),
            "{} is missing: build it with `{BUILD}`",
            bin.display()
        );
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(&bin)
            .arg(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
        let stdin = child.stdin.take();
        let addr_file = dir.path().join("addr");
        let deadline = Instant::now() + Duration::from_secs(30);
        let addr = loop {
            if let Ok(text) = std::fs::read_to_string(&addr_file) {
                break text.trim().to_string();
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("oci-registry exited with {status} before it listened");
            }
            assert!(
                Instant::now() < deadline,
                "oci-registry did not listen within 30 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        Registry {
            child,
            stdin,
            dir,
            addr,
            helm: helm.to_path_buf(),
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The certificate the registry serves (give it as `SSL_CERT_FILE`).
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// The environment every program that talks to the registry needs:
    /// `SSL_CERT_FILE`.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![("SSL_CERT_FILE".into(), self.ca().display().to_string())]
    }

    /// `https://ADDR/files/PATH`: a chart repository published with
    /// [`Registry::publish`].
    pub fn files_url(&self, path: &str) -> String {
        format!("https://{}/files/{}", self.addr, path.trim_matches('/'))
    }

    fn helm(&self, args: &[&str]) -> String {
        let out = Command::new(&self.helm)
            .args(args)
            .env("HOME", self.dir.path().join("home"))
            .env("SSL_CERT_FILE", self.ca())
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", self.helm.display()));
        assert!(
            out.status.success(),
            "helm {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `helm package` of a chart directory into the registry's work area;
    /// returns the .tgz.
    pub fn package(&self, chart: &Path) -> PathBuf {
        let out = self.dir.path().join("packages");
        std::fs::create_dir_all(&out).unwrap();
        let text = self.helm(&[
            "package",
            chart.to_str().unwrap(),
            "--destination",
            out.to_str().unwrap(),
        ]);
        let path = text
            .trim()
            .rsplit(": ")
            .next()
            .map(PathBuf::from)
            .unwrap_or_default();
        assert!(path.is_file(), "helm package printed {text}");
        path
    }

    /// Pushes a chart directory to `oci://ADDR/REPOSITORY/NAME:VERSION`
    /// (NAME and VERSION from its Chart.yaml) with `helm push`.
    pub fn push(&self, chart: &Path, repository: &str) {
        let tgz = self.package(chart);
        self.helm(&[
            "push",
            tgz.to_str().unwrap(),
            &format!("oci://{}/{}", self.addr, repository.trim_matches('/')),
        ]);
    }

    /// Publishes a chart directory in the classic chart repository at
    /// [`Registry::files_url`]`(path)`: its .tgz and an index.yaml that
    /// `helm repo index` writes (again) for every chart there.
    pub fn publish(&self, chart: &Path, path: &str) {
        let dir = self.dir.path().join("files").join(path.trim_matches('/'));
        std::fs::create_dir_all(&dir).unwrap();
        let tgz = self.package(chart);
        std::fs::copy(&tgz, dir.join(tgz.file_name().unwrap())).unwrap();
        self.helm(&[
            "repo",
            "index",
            dir.to_str().unwrap(),
            "--url",
            &self.files_url(path),
        ]);
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
