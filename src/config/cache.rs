//! The parse cache (docs/design.md#parse-cache): the release files of a
//! config root as serde-saphyr parsed them, kept in one pack per config
//! root and build, and the values files each cluster's plan read (as
//! rendered for it) in one pack per config root, cluster and build, so a
//! run whose files did not change reads a file or two and decodes JSON
//! instead of parsing YAML. An entry is keyed by the
//! sha256 of the build's identity and the file's bytes; only files that
//! parsed without a problem are kept, and every check after the parse runs
//! on what the cache gives as it runs on what the parse gives. A pack that
//! cannot be read or does not match its digest is ignored: the files are
//! parsed and the pack written again.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

/// The sha256 of the sources this binary was built from (build.rs).
const BUILD_ID: &str = env!("BOOTSTRAP_BUILD_ID");
/// A pack's first line starts with this, then the build's identity.
const MAGIC: &str = "bootstrap parse cache 2";
/// Packs kept: the most recently written ones, none older than [`MAX_AGE`].
/// Each cluster has its own values pack: a fleet of 100 clusters keeps
/// every pack of its config root.
const KEEP_PACKS: usize = 128;
const MAX_AGE: Duration = Duration::from_secs(30 * 24 * 3600);
/// A temporary file older than this is a write that never finished.
const STALE_TEMP: Duration = Duration::from_secs(3600);

/// An entry's key: sha256 of the build's identity and a file's bytes.
pub(super) type Key = [u8; 32];

/// Where parsed release files are kept: `parsed/` in the chart cache's
/// directory.
#[derive(Debug, Clone)]
pub struct ParseCache {
    dir: PathBuf,
}

impl ParseCache {
    /// The parse cache beside the chart cache in `chart_cache_dir`.
    pub fn new(chart_cache_dir: &Path) -> ParseCache {
        ParseCache {
            dir: chart_cache_dir.join("parsed"),
        }
    }

    /// The pack of the release files of the config root `root`, read with
    /// one read: empty when there is none yet or it cannot be used.
    pub(super) fn open(&self, root: &Path) -> Pack {
        self.open_named(root.as_os_str().as_encoded_bytes())
    }

    /// The pack of the values files `cluster`'s plan reads in the config
    /// root `root`: one per cluster, since a template renders another text
    /// for each, and planning one cluster must not drop another's entries.
    pub(super) fn open_values(&self, root: &Path, cluster: &str) -> Pack {
        let mut name = root.as_os_str().as_encoded_bytes().to_vec();
        name.extend_from_slice(b"\0values\0");
        name.extend_from_slice(cluster.as_bytes());
        self.open_named(&name)
    }

    fn open_named(&self, name: &[u8]) -> Pack {
        let path = self.dir.join(format!("{}.pack", hex(&digest(name))));
        let (bytes, entries) = std::fs::read(&path)
            .ok()
            .and_then(|bytes| index(&bytes).map(|entries| (bytes, entries)))
            .unwrap_or_default();
        Pack {
            at: Some((self.dir.clone(), path)),
            bytes,
            entries,
        }
    }
}

/// sha256 of the build's identity and `bytes`.
fn digest(bytes: &[u8]) -> Key {
    let mut hash = Sha256::new();
    hash.update(BUILD_ID.as_bytes());
    hash.update([0]);
    hash.update(bytes);
    hash.finalize().into()
}

/// The CRC-32 of a pack's body, as its second line spells it.
fn checksum(body: &[u8]) -> String {
    format!("{:08x}", crc32fast::hash(body))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &[u8]) -> Option<Key> {
    let mut key = [0; 32];
    if text.len() != 64 {
        return None;
    }
    for (i, pair) in text.chunks(2).enumerate() {
        let pair = std::str::from_utf8(pair).ok()?;
        key[i] = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(key)
}

/// The entries of a pack: `MAGIC BUILD_ID`, the CRC-32 of the rest, then
/// per entry a line `KEY LENGTH` and its JSON. `None` when any of it is not
/// so. The CRC finds a pack damaged on disk (what the temporary file and
/// rename do not rule out); the keys are sha256, what is under them needs
/// no second digest.
fn index(bytes: &[u8]) -> Option<HashMap<Key, Range<usize>>> {
    let line = |from: usize| -> Option<(&[u8], usize)> {
        let end = from + bytes.get(from..)?.iter().position(|b| *b == b'\n')?;
        Some((&bytes[from..end], end + 1))
    };
    let (first, next) = line(0)?;
    if first != format!("{MAGIC} {BUILD_ID}").as_bytes() {
        return None;
    }
    let (sum, body) = line(next)?;
    if sum != checksum(&bytes[body..]).as_bytes() {
        return None;
    }
    let mut entries = HashMap::new();
    let mut at = body;
    while at < bytes.len() {
        let (head, start) = line(at)?;
        let space = head.iter().position(|b| *b == b' ')?;
        let key = unhex(&head[..space])?;
        let len: usize = std::str::from_utf8(&head[space + 1..]).ok()?.parse().ok()?;
        let end = start.checked_add(len)?;
        if bytes.get(end) != Some(&b'\n') {
            return None;
        }
        entries.insert(key, start..end);
        at = end + 1;
    }
    Some(entries)
}

/// One config root's pack as read at the start of a run.
pub(super) struct Pack {
    /// The cache directory and the pack's path; `None`: no cache.
    at: Option<(PathBuf, PathBuf)>,
    bytes: Vec<u8>,
    entries: HashMap<Key, Range<usize>>,
}

/// What a run gives the pack for one release file: its key and, when it
/// was parsed rather than read from the pack, its parse as JSON.
pub(super) type Entry = (Key, Option<Vec<u8>>);

impl Default for Pack {
    fn default() -> Pack {
        Pack::none()
    }
}

impl Pack {
    /// No cache: nothing is read or written.
    pub(super) fn none() -> Pack {
        Pack {
            at: None,
            bytes: Vec::new(),
            entries: HashMap::new(),
        }
    }

    /// The key of a release file's text; `None` without a cache.
    pub(super) fn key(&self, text: &str) -> Option<Key> {
        self.at.as_ref().map(|_| digest(text.as_bytes()))
    }

    /// The parse of the text whose key is `key`, when the pack holds it and
    /// it decodes.
    pub(super) fn get<T: DeserializeOwned>(&self, key: &Key) -> Option<T> {
        let range = self.entries.get(key)?;
        serde_json::from_slice(&self.bytes[range.clone()]).ok()
    }

    /// A parse as the pack keeps it.
    pub(super) fn encode<T: Serialize + ?Sized>(parsed: &T) -> Option<Vec<u8>> {
        serde_json::to_vec(parsed).ok()
    }

    /// Writes the pack of this run's files, unless it is the one read: the
    /// entries of files read from it are copied, those parsed added, those
    /// of files gone or changed dropped. Failing to write is not an error
    /// (the next run parses again).
    pub(super) fn save(&self, entries: Vec<Entry>) {
        let Some((dir, path)) = &self.at else { return };
        let mut kept: BTreeMap<Key, &[u8]> = BTreeMap::new();
        let mut changed = false;
        for (key, json) in &entries {
            match json {
                Some(json) => {
                    changed = true;
                    kept.insert(*key, json);
                }
                None => {
                    if let Some(range) = self.entries.get(key) {
                        kept.insert(*key, &self.bytes[range.clone()]);
                    }
                }
            }
        }
        if !changed && kept.len() == self.entries.len() {
            return;
        }
        let mut body = Vec::new();
        for (key, json) in &kept {
            body.extend_from_slice(format!("{} {}\n", hex(key), json.len()).as_bytes());
            body.extend_from_slice(json);
            body.push(b'\n');
        }
        let head = format!("{MAGIC} {BUILD_ID}\n{}\n", checksum(&body));
        if write(dir, path, &[head.as_bytes(), &body]).is_ok() {
            clean(dir);
        }
    }
}

/// Writes `parts` to `path` whole or not at all: into a temporary file in
/// `dir`, then renamed over it, so two runs writing at once leave one of
/// their packs and a reader sees a whole pack or the one before.
fn write(dir: &Path, path: &Path, parts: &[&[u8]]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    for part in parts {
        file.write_all(part)?;
    }
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Removes packs beyond the [`KEEP_PACKS`] most recently written and those
/// written more than [`MAX_AGE`] ago (other config roots, other builds),
/// and temporary files of writes that never finished.
fn clean(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    let age = |path: &Path| {
        std::fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default()
    };
    let mut packs = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".pack") {
            packs.push((age(&path), path));
        } else if name.starts_with(".tmp") && age(&path) > STALE_TEMP {
            let _ = std::fs::remove_file(&path);
        }
    }
    packs.sort();
    for (i, (age, path)) in packs.iter().enumerate() {
        if i >= KEEP_PACKS || *age > MAX_AGE {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::file::ReleaseFile;

    type Docs = Vec<ReleaseFile>;

    /// Everything parsed but the character spans, which the cache does not
    /// keep (nothing uses them).
    fn without_spans(docs: &[ReleaseFile]) -> String {
        let spans = regex::Regex::new(r"span: Span \{[^}]*\}, ").unwrap();
        spans.replace_all(&format!("{docs:?}"), "").into_owned()
    }

    fn release(text: &str) -> Vec<ReleaseFile> {
        serde_saphyr::from_multiple(text).unwrap()
    }

    #[test]
    fn a_pack_gives_back_what_was_parsed() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ParseCache::new(dir.path());
        let text = "name: a\nnamespace: n\nchart: {path: ./c}\nneeds: [b]\n---\nname: b\nnamespace: n\nchart: {path: ./c}\n";
        let docs = release(text);
        let pack = cache.open(Path::new("/root"));
        let key = pack.key(text).unwrap();
        assert!(pack.get::<Docs>(&key).is_none());
        let json = Pack::encode(&docs.iter().collect::<Vec<_>>()).unwrap();
        pack.save(vec![(key, Some(json))]);
        let pack = cache.open(Path::new("/root"));
        let back = pack.get::<Docs>(&key).unwrap();
        assert_eq!(without_spans(&back), without_spans(&docs));
        // Another config root has its own pack.
        assert!(cache.open(Path::new("/other")).get::<Docs>(&key).is_none());
    }

    #[test]
    fn a_corrupt_pack_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ParseCache::new(dir.path());
        let text = "name: a\nnamespace: n\nchart: {path: ./c}\n";
        let pack = cache.open(Path::new("/root"));
        let key = pack.key(text).unwrap();
        let json = Pack::encode(&release(text).iter().collect::<Vec<_>>()).unwrap();
        pack.save(vec![(key, Some(json))]);
        let file = std::fs::read_dir(dir.path().join("parsed"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let good = std::fs::read(&file).unwrap();
        // A byte changed inside the JSON: the digest no longer matches.
        let mut bad = good.clone();
        let at = bad.len() - 10;
        bad[at] ^= 1;
        std::fs::write(&file, &bad).unwrap();
        assert!(cache.open(Path::new("/root")).get::<Docs>(&key).is_none());
        // Truncated, and garbage.
        std::fs::write(&file, &good[..good.len() / 2]).unwrap();
        assert!(cache.open(Path::new("/root")).get::<Docs>(&key).is_none());
        std::fs::write(&file, b"\xff\xfe not a pack").unwrap();
        assert!(cache.open(Path::new("/root")).get::<Docs>(&key).is_none());
        std::fs::write(&file, &good).unwrap();
        assert!(cache.open(Path::new("/root")).get::<Docs>(&key).is_some());
    }

    #[test]
    fn only_recent_packs_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ParseCache::new(dir.path());
        let text = "name: a\nnamespace: n\nchart: {path: ./c}\n";
        for i in 0..KEEP_PACKS + 3 {
            let pack = cache.open(Path::new(&format!("/root{i}")));
            let key = pack.key(text).unwrap();
            let json = Pack::encode(&release(text).iter().collect::<Vec<_>>()).unwrap();
            pack.save(vec![(key, Some(json))]);
        }
        let packs = std::fs::read_dir(dir.path().join("parsed"))
            .unwrap()
            .count();
        assert_eq!(packs, KEEP_PACKS);
    }
}
