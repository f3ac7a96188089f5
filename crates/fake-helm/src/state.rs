//! Release state: one JSON file per release in `$FAKE_HELM_STATE`, written
//! atomically (temp file + rename) because several fake-helm processes run at once.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const DEPLOYED: &str = "deployed";
pub const FAILED: &str = "failed";
pub const PENDING_INSTALL: &str = "pending-install";
pub const PENDING_UPGRADE: &str = "pending-upgrade";
pub const UNINSTALLING: &str = "uninstalling";
pub const UNINSTALLED: &str = "uninstalled";
pub const SUPERSEDED: &str = "superseded";

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Release {
    pub name: String,
    pub namespace: String,
    pub revision: u64,
    pub status: String,
    pub chart: String,
    pub version: String,
    pub app_version: String,
    pub values: Value,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    pub updated: String,
    #[serde(default)]
    pub manifest: String,
    #[serde(default)]
    pub first_deployed: String,
    #[serde(default)]
    pub description: String,
    /// Earlier revisions, oldest first, for `helm history`.
    #[serde(default)]
    pub history: Vec<Revision>,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Revision {
    pub revision: u64,
    pub updated: String,
    pub status: String,
    pub chart: String,
    pub version: String,
    pub app_version: String,
    pub description: String,
}

impl Release {
    pub fn is_pending(&self) -> bool {
        self.status.starts_with("pending-")
    }

    /// Helm's `chart` column: `<name>-<version>`.
    pub fn chart_ref(&self) -> String {
        format!("{}-{}", self.chart, self.version)
    }

    pub fn as_revision(&self) -> Revision {
        Revision {
            revision: self.revision,
            updated: self.updated.clone(),
            status: self.status.clone(),
            chart: self.chart.clone(),
            version: self.version.clone(),
            app_version: self.app_version.clone(),
            description: self.description.clone(),
        }
    }
}

/// `--kube-context` of this helm call, if any.
fn kube_context() -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--kube-context")
        .and_then(|i| args.get(i + 1).cloned())
        .or_else(|| {
            args.iter()
                .find_map(|a| a.strip_prefix("--kube-context=").map(str::to_string))
        })
}

pub struct Store {
    dir: PathBuf,
}

impl Store {
    pub fn from_env() -> Result<Store, String> {
        match std::env::var_os("FAKE_HELM_STATE") {
            Some(dir) if !dir.is_empty() => {
                let mut dir = PathBuf::from(dir);
                // Many clusters behind one fake helm (a fleet test): the
                // state of each kube context is its own, as each cluster
                // stores its own releases.
                if std::env::var_os("FAKE_HELM_STATE_BY_CONTEXT").is_some()
                    && let Some(context) = kube_context()
                {
                    dir = dir.join(context);
                }
                std::fs::create_dir_all(&dir).map_err(|e| {
                    format!(
                        "fake-helm: cannot create FAKE_HELM_STATE {}: {e}",
                        dir.display()
                    )
                })?;
                Ok(Store { dir })
            }
            _ => Err(
                "fake-helm: FAKE_HELM_STATE is not set; this command needs a state directory"
                    .into(),
            ),
        }
    }

    fn path(&self, namespace: &str, name: &str, ext: &str) -> PathBuf {
        self.dir.join(format!("{namespace}__{name}.{ext}"))
    }

    pub fn load(&self, namespace: &str, name: &str) -> Result<Option<Release>, String> {
        read_release(&self.path(namespace, name, "json"))
    }

    pub fn save(&self, release: &Release) -> Result<(), String> {
        let text = serde_json::to_vec_pretty(release).map_err(|e| format!("fake-helm: {e}"))?;
        self.write_atomic(&self.path(&release.namespace, &release.name, "json"), &text)
    }

    pub fn remove(&self, namespace: &str, name: &str) -> Result<(), String> {
        match std::fs::remove_file(self.path(namespace, name, "json")) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(format!("fake-helm: {e}")),
            _ => Ok(()),
        }
    }

    /// Every stored release, sorted by name then namespace like helm's default list order.
    pub fn list(&self) -> Result<Vec<Release>, String> {
        let entries = std::fs::read_dir(&self.dir).map_err(|e| format!("fake-helm: {e}"))?;
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || !name.ends_with(".json") {
                continue;
            }
            if let Some(release) = read_release(&path)? {
                out.push(release);
            }
        }
        out.sort_by(|a, b| (&a.name, &a.namespace).cmp(&(&b.name, &b.namespace)));
        Ok(out)
    }

    /// Marks the release as being worked on by this process until the
    /// returned guard drops. A mark left by a process that is still alive
    /// means two helm operations on one release overlap: that is appended
    /// to `overlaps.log` in the state directory (a test's invariant; real
    /// helm's only guard is the `pending-*` status, which a takeover may
    /// clear). A mark left by a process that is gone (killed) is taken over.
    pub fn busy(&self, namespace: &str, name: &str, command: &str) -> Busy {
        let path = self.path(namespace, name, "busy");
        let me = std::process::id();
        if let Some(other) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
            && other != me
            && std::path::Path::new(&format!("/proc/{other}")).exists()
            && !is_zombie(other)
        {
            let line = format!(
                "{{\"release\":\"{namespace}/{name}\",\"command\":\"{command}\",\"pid\":{me},\"overlaps\":{other}}}\n"
            );
            let _ = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.dir.join("overlaps.log"))
                .and_then(|mut f| f.write_all(line.as_bytes()));
        }
        let _ = self.write_atomic(&path, format!("{me} {command}\n").as_bytes());
        Busy { path, pid: me }
    }

    /// Counts install/upgrade attempts of a release across processes; returns this attempt's number.
    pub fn next_attempt(&self, namespace: &str, name: &str) -> Result<u64, String> {
        let path = self.path(namespace, name, "attempts");
        let previous = std::fs::read_to_string(&path)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(0);
        let n = previous + 1;
        self.write_atomic(&path, n.to_string().as_bytes())?;
        Ok(n)
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> Result<(), String> {
        let fail = |e: std::io::Error| format!("fake-helm: writing {}: {e}", path.display());
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(&self.dir)
            .map_err(fail)?;
        tmp.write_all(bytes).map_err(fail)?;
        tmp.persist(path).map_err(|e| fail(e.error))?;
        Ok(())
    }
}

/// A release marked busy by this process; the mark is removed on drop
/// (a killed process leaves it, and the next operation takes it over).
pub struct Busy {
    path: PathBuf,
    pid: u32,
}

impl Drop for Busy {
    fn drop(&mut self) {
        let ours = std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
            == Some(self.pid);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

fn read_release(path: &Path) -> Result<Option<Release>, String> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| format!("fake-helm: corrupt state {}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("fake-helm: reading {}: {e}", path.display())),
    }
}

/// RFC 3339 with nanoseconds, the form helm writes in `status`/`history` JSON.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_nanos(std::time::SystemTime::now()).to_string()
}

/// Go's `time.Time.String()` form that `helm list -o json` prints in `updated`,
/// e.g. `2025-10-01 12:00:00.123456789 +0000 UTC`.
pub fn go_time_string(rfc3339: &str) -> String {
    let trimmed = rfc3339.trim_end_matches('Z');
    let (date_time, frac) = match trimmed.split_once('.') {
        Some((dt, f)) => (dt, f.trim_end_matches('0')),
        None => (trimmed, ""),
    };
    let date_time = date_time.replacen('T', " ", 1);
    if frac.is_empty() {
        format!("{date_time} +0000 UTC")
    } else {
        format!("{date_time}.{frac} +0000 UTC")
    }
}

pub fn unix_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_time_trims_trailing_zeros() {
        assert_eq!(
            go_time_string("2025-10-01T12:00:00.120000000Z"),
            "2025-10-01 12:00:00.12 +0000 UTC"
        );
        assert_eq!(
            go_time_string("2025-10-01T12:00:00Z"),
            "2025-10-01 12:00:00 +0000 UTC"
        );
    }
}
