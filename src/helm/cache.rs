//! The chart cache (docs/design.md#chart-cache): every remote chart is
//! pulled once (`helm pull`) into a content-addressed store reused across
//! runs, and helm installs and renders from the local archive.
//!
//! Layout under the cache directory:
//! - `sha256/<hex>.tgz`: an archive, named by the sha256 of its bytes;
//! - `index/<hex>.json`: what a chart reference (repository URL without
//!   credentials or OCI reference, chart name, version) resolved to:
//!   `{"source", "chart", "version", "sha256"}`, the file named by the sha256
//!   of the reference;
//! - `tmp/`: where `helm pull` writes before the archive is moved in.
//!
//! Every file appears by `rename` from a temporary file in the same
//! directory, so a reader (another cluster of `apply --all`, another
//! process) sees a whole file or none. On reuse the archive's bytes are
//! hashed again: one that does not match its name (a bit flip, a truncated
//! copy, a hand edit) is never used; it is removed and pulled again.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use sha2::{Digest, Sha256};

use super::repos;
use crate::release::{Chart, ChartSource};

/// What one chart reference means to the cache. Local charts and charts
/// without a version have none: a path is used in place, and "the latest
/// version" is not one archive.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    /// The repository URL (credentials removed) or the OCI reference.
    pub source: String,
    pub chart: String,
    pub version: String,
}

impl Key {
    pub fn of(chart: &Chart) -> Option<Key> {
        let version = chart.version.clone()?;
        let (source, name) = match &chart.source {
            ChartSource::Repo { url, name } => {
                let url = repos::split_credentials(url).map_or_else(|| url.clone(), |c| c.url);
                (url, name.clone())
            }
            ChartSource::Oci(reference) => (reference.clone(), chart.name()),
            ChartSource::Path(_) => return None,
        };
        Some(Key {
            source,
            chart: name,
            version,
        })
    }

    /// The name of the key's index entry.
    fn id(&self) -> String {
        hex(&Sha256::digest(format!(
            "{}\n{}\n{}",
            self.source, self.chart, self.version
        )))
    }
}

/// What the cache holds for a key.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    /// A verified archive.
    Hit(PathBuf),
    Miss,
    /// An entry that cannot be used (removed); why, for a warning.
    Corrupt(String),
}

#[derive(Debug, Clone)]
pub struct ChartCache {
    dir: PathBuf,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Entry {
    source: String,
    chart: String,
    version: String,
    sha256: String,
}

impl ChartCache {
    pub fn new(dir: PathBuf) -> ChartCache {
        ChartCache { dir }
    }

    /// Where the cache lives without `--cache-dir`/`BOOTSTRAP_CACHE_DIR`:
    /// `$XDG_CACHE_HOME/bootstrap/charts`, else
    /// `$HOME/.cache/bootstrap/charts`; `None` when neither is set.
    pub fn default_dir(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
        let set = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let base = set("XDG_CACHE_HOME")
            .filter(|p| p.is_absolute())
            .or_else(|| set("HOME").map(|home| home.join(".cache")))?;
        Some(base.join("bootstrap").join("charts"))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn archive(&self, sha256: &str) -> PathBuf {
        self.dir.join("sha256").join(format!("{sha256}.tgz"))
    }

    fn entry(&self, key: &Key) -> PathBuf {
        self.dir.join("index").join(format!("{}.json", key.id()))
    }

    /// The archive of `key`, verified by its digest.
    pub fn lookup(&self, key: &Key) -> Lookup {
        let path = self.entry(key);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Lookup::Miss,
            Err(e) => return Lookup::Corrupt(format!("cannot read {}: {e}", path.display())),
        };
        let entry: Entry = match serde_json::from_str(&text) {
            Ok(entry) => entry,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Lookup::Corrupt(format!("{} is not a cache entry: {e}", path.display()));
            }
        };
        let archive = self.archive(&entry.sha256);
        match std::fs::read(&archive) {
            Ok(bytes) => {
                let found = hex(&Sha256::digest(&bytes));
                if found == entry.sha256 {
                    Lookup::Hit(archive)
                } else {
                    let _ = std::fs::remove_file(&archive);
                    Lookup::Corrupt(format!(
                        "{} does not match its digest (sha256 {found}, expected {})",
                        archive.display(),
                        entry.sha256
                    ))
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Lookup::Miss,
            Err(e) => Lookup::Corrupt(format!("cannot read {}: {e}", archive.display())),
        }
    }

    /// Waits for this process's turn to look up and pull `key` into this
    /// cache: one at a time per chart and cache directory, so the clusters
    /// of `apply --all` share one pull (the second finds the first one's
    /// archive) rather than each pulling the same chart at once. Each
    /// cluster still pulls on its own when the first pull failed (their
    /// credentials may differ).
    pub async fn turn(&self, key: &Key) -> tokio::sync::OwnedMutexGuard<()> {
        type Turns = Mutex<HashMap<(PathBuf, Key), Arc<tokio::sync::Mutex<()>>>>;
        static TURNS: LazyLock<Turns> = LazyLock::new(Mutex::default);
        let turn = TURNS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((self.dir.clone(), key.clone()))
            .or_default()
            .clone();
        turn.lock_owned().await
    }

    /// A new private directory inside the cache for `helm pull
    /// --destination`, on the cache's file system so the archive can be
    /// renamed into place; removed when dropped.
    pub fn staging(&self) -> std::io::Result<tempfile::TempDir> {
        let tmp = self.dir.join("tmp");
        private_dirs(&tmp)?;
        tempfile::Builder::new().prefix("pull-").tempdir_in(tmp)
    }

    /// Moves `downloaded` (a file in a [`Self::staging`] directory) into the
    /// store under its digest and records it for `key`; returns where it is.
    pub fn store(&self, key: &Key, downloaded: &Path) -> std::io::Result<PathBuf> {
        let sha256 = hex(&Sha256::digest(std::fs::read(downloaded)?));
        let archive = self.archive(&sha256);
        private_dirs(archive.parent().unwrap_or(&self.dir))?;
        std::fs::rename(downloaded, &archive)?;
        let entry = Entry {
            source: key.source.clone(),
            chart: key.chart.clone(),
            version: key.version.clone(),
            sha256,
        };
        let path = self.entry(key);
        let index = path.parent().unwrap_or(&self.dir);
        private_dirs(index)?;
        let mut file = tempfile::Builder::new()
            .prefix(".entry-")
            .tempfile_in(index)?;
        file.write_all(serde_json::to_string(&entry)?.as_bytes())?;
        file.flush()?;
        file.persist(&path).map_err(|e| e.error)?;
        Ok(archive)
    }
}

/// Creates `dir` and its missing parents, each only for the current user:
/// charts of private repositories land here.
fn private_dirs(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_chart(url: &str, version: Option<&str>) -> Chart {
        Chart {
            source: ChartSource::Repo {
                url: url.into(),
                name: "cilium".into(),
            },
            version: version.map(str::to_string),
        }
    }

    fn download(cache: &ChartCache, bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let staging = cache.staging().unwrap();
        let file = staging.path().join("cilium-1.18.2.tgz");
        std::fs::write(&file, bytes).unwrap();
        (staging, file)
    }

    #[test]
    fn keys_leave_out_credentials_and_local_charts() {
        let plain = Key::of(&repo_chart("https://helm.cilium.io", Some("1.18.2"))).unwrap();
        let secret = Key::of(&repo_chart(
            "https://u:s3cr3t@helm.cilium.io",
            Some("1.18.2"),
        ))
        .unwrap();
        assert_eq!(plain, secret);
        assert!(!format!("{secret:?}").contains("s3cr3t"));
        assert_ne!(
            plain.id(),
            Key::of(&repo_chart("https://helm.cilium.io", Some("1.18.3")))
                .unwrap()
                .id()
        );
        let oci = Chart {
            source: ChartSource::Oci("oci://ghcr.io/spegel-org/helm-charts/spegel".into()),
            version: Some("0.4.0".into()),
        };
        assert_eq!(Key::of(&oci).unwrap().chart, "spegel");
        assert_eq!(Key::of(&repo_chart("https://x", None)), None);
        let path = Chart {
            source: ChartSource::Path("/charts/coredns".into()),
            version: Some("1.0.0".into()),
        };
        assert_eq!(Key::of(&path), None);
    }

    #[test]
    fn a_stored_archive_is_found_by_its_key_and_named_by_its_digest() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ChartCache::new(dir.path().join("charts"));
        let key = Key::of(&repo_chart("https://helm.cilium.io", Some("1.18.2"))).unwrap();
        assert_eq!(cache.lookup(&key), Lookup::Miss);
        let (_staging, file) = download(&cache, b"chart bytes");
        let stored = cache.store(&key, &file).unwrap();
        assert_eq!(
            stored.file_name().unwrap().to_str().unwrap(),
            format!("{}.tgz", hex(&Sha256::digest(b"chart bytes")))
        );
        assert_eq!(cache.lookup(&key), Lookup::Hit(stored.clone()));
        // Another process with the same cache directory finds it too.
        let again = ChartCache::new(dir.path().join("charts"));
        assert_eq!(again.lookup(&key), Lookup::Hit(stored));
        let other = Key::of(&repo_chart("https://helm.cilium.io", Some("1.18.3"))).unwrap();
        assert_eq!(cache.lookup(&other), Lookup::Miss);
    }

    #[test]
    fn an_archive_that_does_not_match_its_digest_is_never_used() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ChartCache::new(dir.path().to_path_buf());
        let key = Key::of(&repo_chart("https://helm.cilium.io", Some("1.18.2"))).unwrap();
        let (_staging, file) = download(&cache, b"chart bytes");
        let stored = cache.store(&key, &file).unwrap();
        std::fs::write(&stored, b"chart bytez").unwrap();
        match cache.lookup(&key) {
            Lookup::Corrupt(why) => assert!(why.contains("does not match its digest"), "{why}"),
            other => panic!("expected a corrupt entry, got {other:?}"),
        }
        assert!(!stored.exists(), "the bad archive is removed");
        assert_eq!(cache.lookup(&key), Lookup::Miss);
        // A broken index entry is not trusted either.
        std::fs::write(cache.entry(&key), "{not json").unwrap();
        assert!(matches!(cache.lookup(&key), Lookup::Corrupt(_)));
        assert_eq!(cache.lookup(&key), Lookup::Miss);
    }

    #[test]
    fn concurrent_stores_of_one_chart_leave_one_whole_archive() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ChartCache::new(dir.path().to_path_buf());
        let key = Key::of(&repo_chart("https://helm.cilium.io", Some("1.18.2"))).unwrap();
        let body = vec![7u8; 1 << 20];
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    let (_staging, file) = download(&cache, &body);
                    cache.store(&key, &file).unwrap();
                    assert!(matches!(cache.lookup(&key), Lookup::Hit(_)));
                });
            }
        });
        let archives: Vec<_> = std::fs::read_dir(dir.path().join("sha256"))
            .unwrap()
            .collect();
        assert_eq!(archives.len(), 1);
        let index: Vec<_> = std::fs::read_dir(dir.path().join("index"))
            .unwrap()
            .collect();
        assert_eq!(index.len(), 1, "no temporary entry left behind");
    }

    #[test]
    fn default_location_follows_xdg_then_home() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        assert_eq!(
            ChartCache::default_dir(env(&[("XDG_CACHE_HOME", "/xdg"), ("HOME", "/home/me")])),
            Some(PathBuf::from("/xdg/bootstrap/charts"))
        );
        assert_eq!(
            ChartCache::default_dir(env(&[("XDG_CACHE_HOME", ""), ("HOME", "/home/me")])),
            Some(PathBuf::from("/home/me/.cache/bootstrap/charts"))
        );
        // The XDG spec ignores relative paths.
        assert_eq!(
            ChartCache::default_dir(env(&[("XDG_CACHE_HOME", "rel"), ("HOME", "/home/me")])),
            Some(PathBuf::from("/home/me/.cache/bootstrap/charts"))
        );
        assert_eq!(ChartCache::default_dir(env(&[])), None);
    }
}
