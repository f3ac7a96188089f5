//! A small builder that writes a config root into a temp dir, runs the real
//! `bootstrap` binary on it and compares what a user sees.

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Test {
    dir: tempfile::TempDir,
    /// The chart cache of every run of this test (`BOOTSTRAP_CACHE_DIR`):
    /// runs of one `Test` share it, tests never do, nothing lands in ~/.cache.
    cache: tempfile::TempDir,
    args: Vec<String>,
    env: Vec<(String, String)>,
    env_remove: Vec<String>,
}

#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// A finished command's exit code (-1 for a signal) and its output as text.
impl From<std::process::Output> for Output {
    fn from(out: std::process::Output) -> Output {
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

const CLUSTER: &str = "name: infra\n";

impl Default for Test {
    fn default() -> Self {
        Self::new()
    }
}

impl Test {
    pub fn new() -> Self {
        Test {
            dir: tempfile::tempdir().expect("tempdir"),
            cache: tempfile::tempdir().expect("tempdir"),
            args: Vec::new(),
            env: Vec::new(),
            env_remove: vec!["KUBECONFIG".into()],
        }
    }

    /// A config root with cluster `infra` and the given release file.
    pub fn with_releases(releases: &str) -> Self {
        Test::new()
            .file("clusters/infra/cluster.yaml", CLUSTER)
            .file("releases/core.yaml", releases)
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The chart cache directory the runs use.
    pub fn cache_dir(&self) -> &Path {
        self.cache.path()
    }

    pub fn file(self, path: &str, content: &str) -> Self {
        let full = self.dir.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, content).unwrap();
        self
    }

    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn command(&self) -> Command {
        let mut cmd = Command::new(crate::bootstrap());
        cmd.current_dir(self.dir.path())
            .args(&self.args)
            .env("NO_COLOR", "1")
            .env("BOOTSTRAP_CACHE_DIR", self.cache.path())
            .env_remove("CI");
        for key in &self.env_remove {
            cmd.env_remove(key);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    pub fn run(&self) -> Output {
        self.command().output().expect("run bootstrap").into()
    }

    /// Runs and asserts exit code 2 with exactly `stderr` and nothing on stdout.
    pub fn invalid(&self, stderr: &str) {
        let out = self.run();
        assert_eq!(out.stderr, stderr, "stderr differs; stdout: {}", out.stdout);
        assert_eq!(out.code, 2, "exit code");
        assert_eq!(out.stdout, "");
    }
}

/// The repository root (the bootstrap package's directory).
pub fn repo_root() -> PathBuf {
    crate::bins::workspace_root()
}

/// Copies the directory `from` (with everything below it) to `to`, for
/// tests that work on a copy of a fixture or example tree.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}
