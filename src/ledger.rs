//! The ownership ledger (docs/design.md#ledger): ConfigMaps in kube-system,
//! one data key per release, written after each release succeeds so an
//! interruption never loses what was recorded.
//!
//! Key: `<namespace>.<name>` (ConfigMap keys allow `[-._a-zA-Z0-9]`, and
//! neither part may contain a dot, so the key is unambiguous). Value: a JSON
//! [`Entry`]. The admission policy reads the same keys through `paramRef`.
//! `policy` is the release's ownership policy: `bootstrap` or `handover`.
//!
//! Shards: a ConfigMap holds at most 1 MiB, about 2,300 entries with long
//! names. The ledger is therefore a set of shards, `bootstrap-ownership`,
//! `bootstrap-ownership-1`, `-2`, … all labelled [`SHARD_LABEL`], each filled
//! to [`SHARD_BYTES`]; an entry stays in the shard that holds it, a new entry
//! goes to the first shard with room. Readers (status, the admission guard
//! through `paramRef.selector`) read every shard. Only one apply or destroy
//! writes at a time (the cluster lock), so placement needs no coordination.

use std::collections::BTreeMap;

use ::kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::error::{Cause, Error, Failure};
use crate::kube::retry::API_RETRY_BUDGET;
use crate::kube::retry::{self, retry};
use crate::release::{Ownership, Release, ReleaseId};

/// The first shard's name; further shards append `-1`, `-2`, …
pub const LEDGER_NAME: &str = "bootstrap-ownership";
/// Label on every shard (value [`SHARD_LABEL_VALUE`]): what the admission
/// guard's `paramRef.selector` and the readers select.
pub const SHARD_LABEL: &str = "bootstrap.dev/ledger";
pub const SHARD_LABEL_VALUE: &str = "ownership";
/// Bytes of keys and values a shard is filled to: half the API server's
/// 1 MiB object limit, leaving room for metadata and for entries that grow
/// when rewritten (a longer chart or version label).
pub const SHARD_BYTES: usize = 512 * 1024;
pub const LEDGER_NAMESPACE: &str = "kube-system";

/// Labels put on every Helm release bootstrap installs (`helm --labels`).
pub const OWNER_LABEL: &str = "bootstrap.dev/owner";
pub const POLICY_LABEL: &str = "bootstrap.dev/policy";

pub fn key(id: &ReleaseId) -> String {
    format!("{}.{}", id.namespace, id.name)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub release: String,
    pub chart: String,
    pub version: String,
    pub values_digest: String,
    pub applied_at: String,
    pub tool_version: String,
    /// `bootstrap` (exclusive) or `handover` (docs/design.md#ownership); the
    /// admission guard lets Flux adopt a `handover` entry's release.
    pub policy: String,
    /// The cluster config (`clusters/NAME`) that installed it; absent in
    /// entries written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Keyed digest of the release's command hooks as they last ran
    /// (docs/design.md#hooks): a changed definition runs them again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hooks_digest: Option<String>,
}

impl Entry {
    /// Written with the run's [`DigestKey`]: the values digest is keyed, so
    /// the ledger, readable by anyone who may read ConfigMaps in kube-system,
    /// gives away nothing about secret values.
    pub fn for_release(release: &Release, cluster: &str, key: &DigestKey) -> Entry {
        Entry {
            release: release.id.to_string(),
            chart: release.chart_label(),
            version: release.version_label(),
            values_digest: key.digest(release.values()),
            applied_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            policy: release.ownership.as_str().to_string(),
            cluster: Some(cluster.to_string()),
            hooks_digest: hooks_digest(release, key),
        }
    }

    /// The release's command hooks are the ones that last ran (an entry
    /// without a hooks digest predates it: they are taken as changed).
    pub fn hooks_match(&self, release: &Release, key: Option<&DigestKey>) -> bool {
        match key {
            Some(key) => self.hooks_digest == hooks_digest(release, key),
            None => false,
        }
    }

    /// The release as recorded matches what is desired now. An entry
    /// written before digests were keyed (`sha256:`) is compared the old
    /// way; a keyed one needs the key (without it, nothing matches).
    pub fn matches(&self, release: &Release, key: Option<&DigestKey>) -> bool {
        self.version == release.version_label()
            && self.chart == release.chart_label()
            && self.values_match(release, key)
            && self.policy == release.ownership.as_str()
    }

    pub fn values_match(&self, release: &Release, key: Option<&DigestKey>) -> bool {
        if self.is_unkeyed() {
            return self.values_digest == crate::values::digest(release.values());
        }
        key.is_some_and(|key| self.values_digest == key.digest(release.values()))
    }

    /// Written by a bootstrap that stored plain SHA-256 digests of values:
    /// rewritten on the next apply.
    pub fn is_unkeyed(&self) -> bool {
        self.values_digest.starts_with("sha256:")
    }
}

/// Keyed digest of a release's command hooks (presync and postsync, in
/// order, as bootstrap reads them: command, arguments, timeout); `None` when
/// it has none. Keyed like the values digest: a command may carry a secret.
pub fn hooks_digest(release: &Release, key: &DigestKey) -> Option<String> {
    let commands: Vec<serde_json::Value> = [
        ("presync", &release.hooks.presync),
        ("postsync", &release.hooks.postsync),
    ]
    .into_iter()
    .flat_map(|(phase, hooks)| {
        hooks
            .iter()
            .filter(|h| !h.action.is_readiness())
            .map(move |h| serde_json::json!([phase, format!("{h:?}")]))
    })
    .collect();
    (!commands.is_empty()).then(|| key.digest(&serde_json::Value::Array(commands)))
}

/// Secret `kube-system/bootstrap-ledger-key`, data key `key`: 32 random
/// bytes, created by the first apply. Ledger digests are HMAC-SHA256 under it.
pub const DIGEST_KEY_SECRET: &str = "bootstrap-ledger-key";

/// The key the ledger's values digests are computed with.
#[derive(Clone)]
pub struct DigestKey(Vec<u8>);

impl std::fmt::Debug for DigestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DigestKey(..)")
    }
}

impl DigestKey {
    pub fn new(bytes: Vec<u8>) -> DigestKey {
        DigestKey(bytes)
    }

    /// `hmac-sha256:<hex>` of the values' canonical JSON.
    pub fn digest(&self, values: &serde_json::Value) -> String {
        use hmac::Mac;
        // HMAC accepts keys of any length; this cannot fail.
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
        mac.update(crate::values::canonical(values).as_bytes());
        let bytes = mac.finalize().into_bytes();
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        format!("hmac-sha256:{hex}")
    }
}

pub fn owner_labels(policy: Ownership) -> BTreeMap<String, String> {
    BTreeMap::from([
        (OWNER_LABEL.to_string(), "bootstrap".to_string()),
        (POLICY_LABEL.to_string(), policy.as_str().to_string()),
    ])
}

/// The ledger could not be read or written; the release it was about is named.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("cannot read the ownership ledger (ConfigMap kube-system/bootstrap-ownership)")]
    Read(#[source] ::kube::Error),
    #[error("cannot record {0} in the ownership ledger")]
    Record(ReleaseId, #[source] ::kube::Error),
    #[error("cannot remove {0} from the ownership ledger")]
    Remove(ReleaseId, #[source] ::kube::Error),
    #[error(
        "cannot check the ownership ledger at the end of the run (ConfigMaps kube-system/bootstrap-ownership*); until it holds every release, the admission guard may admit a Flux HelmRelease for one: run `bootstrap apply` again"
    )]
    Verify(#[source] ::kube::Error),
    #[error(
        "cannot read or create the ledger's digest key (Secret kube-system/{DIGEST_KEY_SECRET})"
    )]
    Key(#[source] ::kube::Error),
    #[error("cannot generate the ledger's digest key: the system's random source failed ({0})")]
    Random(String),
}

impl From<LedgerError> for Error {
    fn from(e: LedgerError) -> Error {
        Failure::Cluster(Cause(Box::new(e))).into()
    }
}

/// The name of shard `index`.
pub fn shard_name(index: usize) -> String {
    if index == 0 {
        LEDGER_NAME.to_string()
    } else {
        format!("{LEDGER_NAME}-{index}")
    }
}

/// The shard index a ConfigMap name stands for, `None` for any other name.
pub fn shard_index(name: &str) -> Option<usize> {
    if name == LEDGER_NAME {
        return Some(0);
    }
    let suffix = name.strip_prefix(LEDGER_NAME)?.strip_prefix('-')?;
    // `-01` would alias `-1`: only canonical numbers are shards.
    if suffix.starts_with('0') {
        return None;
    }
    suffix.parse().ok().filter(|i| *i > 0)
}

/// Bytes an entry takes in a shard.
fn entry_bytes(key: &str, value: &str) -> usize {
    key.len() + value.len()
}

/// Where a new entry goes: the first shard whose entries plus this one fit
/// in `limit` bytes, else a new shard after the last. `sizes` holds the bytes
/// of each existing shard by index.
pub fn place(sizes: &BTreeMap<usize, usize>, bytes: usize, limit: usize) -> usize {
    sizes
        .iter()
        .find(|(_, used)| *used + bytes <= limit)
        .map(|(index, _)| *index)
        .unwrap_or_else(|| {
            // The first free index: a shard deleted from the middle is reused.
            (0..).find(|i| !sizes.contains_key(i)).unwrap_or(0)
        })
}

/// What this run knows of the ledger: every entry read or written, and the
/// shard that holds it. What a ledger deleted or rewritten mid-run is
/// restored from.
#[derive(Debug, Default)]
struct Known {
    entries: BTreeMap<String, (usize, String)>,
}

impl Known {
    fn sizes(&self) -> BTreeMap<usize, usize> {
        let mut sizes = BTreeMap::new();
        for (key, (shard, value)) in &self.entries {
            *sizes.entry(*shard).or_default() += entry_bytes(key, value);
        }
        sizes
    }

    fn of_shard(&self, shard: usize) -> BTreeMap<String, String> {
        self.entries
            .iter()
            .filter(|(_, (s, _))| *s == shard)
            .map(|(k, (_, v))| (k.clone(), v.clone()))
            .collect()
    }
}

#[derive(Clone)]
pub struct Ledger {
    api: Api<ConfigMap>,
    known: std::sync::Arc<std::sync::Mutex<Known>>,
    limit: usize,
    recheck: std::time::Duration,
    /// When the other shards were last checked for deletion.
    checked: std::sync::Arc<std::sync::Mutex<Option<std::time::Instant>>>,
    /// One record at a time: a shard read back by one record then holds
    /// every entry an earlier record wrote, so an entry missing from it was
    /// really lost (two records in flight made a missing entry look
    /// rewritten when the other's patch had simply landed later).
    recording: std::sync::Arc<tokio::sync::Mutex<()>>,
}

/// What a record found and put right on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repair {
    /// The shard was gone; it was created again with every known entry.
    Recreated { shard: String, entries: usize },
    /// Entries recorded earlier were missing (the shard was rewritten).
    Restored { shard: String, entries: usize },
}

impl Repair {
    /// The warning a run prints for it.
    pub fn message(&self) -> String {
        match self {
            Repair::Recreated { shard, entries } => format!(
                "the ownership ledger (ConfigMap {LEDGER_NAMESPACE}/{shard}) was deleted during the run; \
                 it was created again with all {entries} entries this run and earlier runs recorded"
            ),
            Repair::Restored { shard, entries } => format!(
                "the ownership ledger (ConfigMap {LEDGER_NAMESPACE}/{shard}) was rewritten during the run; \
                 {entries} entries recorded earlier were restored"
            ),
        }
    }
}

/// How often a record also checks that the shards it does not write still
/// exist (the shard it writes is checked on every write).
const OTHER_SHARDS_CHECK: std::time::Duration = std::time::Duration::from_secs(5);

fn shard_labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "app.kubernetes.io/managed-by".to_string(),
            "bootstrap".to_string(),
        ),
        (SHARD_LABEL.to_string(), SHARD_LABEL_VALUE.to_string()),
    ])
}

impl Ledger {
    pub fn new(client: &::kube::Client) -> Ledger {
        Ledger::with_shard_limit(client, SHARD_BYTES)
    }

    /// A ledger whose shards are filled to `limit` bytes (tests use a small one).
    pub fn with_shard_limit(client: &::kube::Client, limit: usize) -> Ledger {
        Ledger {
            api: Api::namespaced(client.clone(), LEDGER_NAMESPACE),
            known: Default::default(),
            limit,
            recheck: OTHER_SHARDS_CHECK,
            checked: Default::default(),
            recording: Default::default(),
        }
    }

    /// How often a record checks that the shards it does not write still
    /// exist (tests check on every record).
    pub fn recheck_every(mut self, every: std::time::Duration) -> Ledger {
        self.recheck = every;
        self
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The ledger's digest key: read from its Secret, created there when
    /// `create` (apply, not a dry run) and absent. `None` when absent and not
    /// created: keyed entries then compare as changed.
    pub async fn digest_key(&self, create: bool) -> Result<Option<DigestKey>, LedgerError> {
        let secrets: Api<Secret> =
            Api::namespaced(self.api.clone().into_client(), LEDGER_NAMESPACE);
        let read = |secret: Option<Secret>| {
            secret
                .and_then(|s| s.data)
                .and_then(|mut d| d.remove("key"))
                .filter(|k| !k.0.is_empty())
                .map(|k| DigestKey(k.0))
        };
        let existing = retry(API_RETRY_BUDGET, || secrets.get_opt(DIGEST_KEY_SECRET))
            .await
            .map_err(LedgerError::Key)?;
        if let Some(key) = read(existing) {
            return Ok(Some(key));
        }
        if !create {
            return Ok(None);
        }
        let mut bytes = vec![0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| LedgerError::Random(e.to_string()))?;
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(DIGEST_KEY_SECRET.into()),
                namespace: Some(LEDGER_NAMESPACE.into()),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/managed-by".to_string(),
                    "bootstrap".to_string(),
                )])),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(
                "key".to_string(),
                k8s_openapi::ByteString(bytes.clone()),
            )])),
            type_: Some("Opaque".into()),
            ..Secret::default()
        };
        match secrets.create(&PostParams::default(), &secret).await {
            Ok(_) => Ok(Some(DigestKey(bytes))),
            // Created by someone else (or an earlier unseen key without data).
            Err(e) if retry::is_conflict(&e) => {
                let existing = retry(API_RETRY_BUDGET, || secrets.get_opt(DIGEST_KEY_SECRET))
                    .await
                    .map_err(LedgerError::Key)?;
                Ok(read(existing))
            }
            Err(e) => Err(LedgerError::Key(e)),
        }
    }

    /// Every shard, by index. A shard written by an older bootstrap has only
    /// the managed-by label, so that label selects them.
    async fn shards(&self) -> Result<BTreeMap<usize, ConfigMap>, ::kube::Error> {
        let params = ListParams::default().labels("app.kubernetes.io/managed-by=bootstrap");
        let list = retry(API_RETRY_BUDGET, || self.api.list(&params)).await?;
        let mut shards: BTreeMap<usize, ConfigMap> = list
            .items
            .into_iter()
            .filter_map(|cm| Some((shard_index(cm.metadata.name.as_deref()?)?, cm)))
            .collect();
        // The first shard by name, whatever its labels (written by hand, or
        // its labels edited away): the admission guard learns of it again
        // on the next write, which labels it.
        if !shards.contains_key(&0)
            && let Some(cm) = retry(API_RETRY_BUDGET, || self.api.get_opt(LEDGER_NAME)).await?
        {
            shards.insert(0, cm);
        }
        Ok(shards)
    }

    /// Every entry of every shard; empty when the ledger does not exist yet.
    /// Unreadable entries are skipped (they are rewritten on the next apply).
    /// A key found in two shards (a repair raced a rewrite) is taken from the
    /// first.
    pub async fn entries(&self) -> Result<BTreeMap<String, Entry>, LedgerError> {
        let shards = self.shards().await.map_err(LedgerError::Read)?;
        let mut raw: BTreeMap<String, (usize, String)> = BTreeMap::new();
        for (index, cm) in shards {
            for (key, value) in cm.data.unwrap_or_default() {
                raw.entry(key).or_insert((index, value));
            }
        }
        let entries = raw
            .iter()
            .filter_map(|(k, (_, v))| Some((k.clone(), serde_json::from_str(v).ok()?)))
            .collect();
        self.known().entries.extend(raw);
        Ok(entries)
    }

    /// Records one release: a merge patch of its own key in its shard. The
    /// patched shard comes back whole, so a shard that was deleted or
    /// rewritten since (losing what this run and earlier ones recorded) is
    /// noticed and put right at once, not at the next apply; the other shards
    /// are checked for deletion every few seconds.
    pub async fn record(&self, entry: &Entry, id: &ReleaseId) -> Result<Vec<Repair>, LedgerError> {
        let key = key(id);
        let value = serde_json::to_string(entry).unwrap_or_default();
        let _turn = self.recording.lock().await;
        let shard = {
            let known = self.known();
            match known.entries.get(&key) {
                Some((shard, _)) => *shard,
                None => place(&known.sizes(), entry_bytes(&key, &value), self.limit),
            }
        };
        let record_error = |e| LedgerError::Record(id.clone(), e);
        let mut repairs = Vec::new();
        if let Some(repair) = self
            .write(shard, &key, &value)
            .await
            .map_err(record_error)?
        {
            repairs.push(repair);
        }
        // Known once written: a write that never happened restores nothing.
        self.known().entries.insert(key, (shard, value));
        repairs.extend(self.check_others(shard).await.map_err(record_error)?);
        Ok(repairs)
    }

    /// Writes `key` into shard `index`, restoring the shard's known entries
    /// when they are gone.
    async fn write(
        &self,
        index: usize,
        key: &str,
        value: &str,
    ) -> Result<Option<Repair>, ::kube::Error> {
        let name = shard_name(index);
        // The labels ride along, so a shard written by an older bootstrap
        // becomes visible to the guard's selector.
        let patch = serde_json::json!({
            "metadata": { "labels": shard_labels() },
            "data": { key: value },
        });
        let params = PatchParams::default();
        let patch = Patch::Merge(&patch);
        let patched = retry(API_RETRY_BUDGET, || self.api.patch(&name, &params, &patch)).await;
        let cm = match patched {
            Ok(cm) => cm,
            Err(e) if retry::is_not_found(&e) => {
                let had = self.known().of_shard(index).len();
                let mut data = self.known().of_shard(index);
                data.insert(key.to_string(), value.to_string());
                retry(API_RETRY_BUDGET, || self.create(&name, data.clone())).await?;
                // Created by us with every entry, or by a concurrent writer.
                retry(API_RETRY_BUDGET, || self.api.patch(&name, &params, &patch)).await?;
                return Ok((had > 0).then(|| Repair::Recreated {
                    shard: name.clone(),
                    entries: had,
                }));
            }
            Err(e) => return Err(e),
        };
        let present = cm.data.unwrap_or_default();
        self.restore(index, &present, Some(key)).await
    }

    /// Puts back the entries this run knows in shard `index` that `present`
    /// (the shard as read) lacks or holds otherwise (rewritten); `except`:
    /// the entry just written.
    async fn restore(
        &self,
        index: usize,
        present: &BTreeMap<String, String>,
        except: Option<&str>,
    ) -> Result<Option<Repair>, ::kube::Error> {
        let name = shard_name(index);
        let missing: BTreeMap<String, String> = self
            .known()
            .of_shard(index)
            .into_iter()
            .filter(|(k, v)| Some(k.as_str()) != except && present.get(k) != Some(v))
            .collect();
        if missing.is_empty() {
            return Ok(None);
        }
        let restore = serde_json::json!({ "data": missing });
        let restore = Patch::Merge(&restore);
        let params = PatchParams::default();
        retry(API_RETRY_BUDGET, || {
            self.api.patch(&name, &params, &restore)
        })
        .await?;
        Ok(Some(Repair::Restored {
            shard: name,
            entries: missing.len(),
        }))
    }

    /// Creates shard `name` holding `data` (a conflict: someone else created
    /// it first, fine).
    async fn create(
        &self,
        name: &str,
        data: BTreeMap<String, String>,
    ) -> Result<(), ::kube::Error> {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(LEDGER_NAMESPACE.into()),
                labels: Some(shard_labels()),
                ..ObjectMeta::default()
            },
            data: Some(data),
            ..ConfigMap::default()
        };
        match self.api.create(&PostParams::default(), &cm).await {
            Ok(_) => Ok(()),
            Err(e) if retry::is_conflict(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Recreates known shards other than `written` that were deleted, and
    /// restores the entries of those that were rewritten, at most every
    /// `recheck` ([`OTHER_SHARDS_CHECK`] by default). Most ledgers have one shard, and
    /// then this costs nothing.
    async fn check_others(&self, written: usize) -> Result<Vec<Repair>, ::kube::Error> {
        let others: Vec<usize> = self
            .known()
            .sizes()
            .into_keys()
            .filter(|s| *s != written)
            .collect();
        if others.is_empty() {
            return Ok(Vec::new());
        }
        {
            let mut checked = self.checked.lock().unwrap_or_else(|e| e.into_inner());
            if checked.is_some_and(|at| at.elapsed() < self.recheck) {
                return Ok(Vec::new());
            }
            *checked = Some(std::time::Instant::now());
        }
        self.put_right(others).await
    }

    /// The check at the end of a run (docs/design.md#ledger): every entry
    /// this run knows, read at its start or recorded by it, is in the
    /// ledger as it knows it. A shard deleted or rewritten since (which no
    /// record noticed: a run whose releases were all unchanged records
    /// nothing) is put right, and said so.
    pub async fn verify(&self) -> Result<Vec<Repair>, LedgerError> {
        let _turn = self.recording.lock().await;
        let shards: Vec<usize> = self.known().sizes().into_keys().collect();
        if shards.is_empty() {
            return Ok(Vec::new());
        }
        self.put_right(shards).await.map_err(LedgerError::Verify)
    }

    /// Recreates the known shards of `indexes` that are gone and restores
    /// the known entries the others lack or hold otherwise.
    async fn put_right(&self, indexes: Vec<usize>) -> Result<Vec<Repair>, ::kube::Error> {
        let present = self.shards().await?;
        let mut repairs = Vec::new();
        for index in indexes {
            if let Some(cm) = present.get(&index) {
                // There, but perhaps rewritten.
                let data = cm.data.clone().unwrap_or_default();
                repairs.extend(self.restore(index, &data, None).await?);
                continue;
            }
            let data = self.known().of_shard(index);
            let entries = data.len();
            let name = shard_name(index);
            retry(API_RETRY_BUDGET, || self.create(&name, data.clone())).await?;
            repairs.push(Repair::Recreated {
                shard: name,
                entries,
            });
        }
        Ok(repairs)
    }

    /// Removes a release's entry from whichever shard holds it (every shard
    /// when this run never saw it).
    pub async fn remove(&self, id: &ReleaseId) -> Result<(), LedgerError> {
        let key = key(id);
        let known = self.known().entries.remove(&key).map(|(shard, _)| shard);
        let shards: Vec<usize> = match known {
            Some(shard) => vec![shard],
            None => self
                .shards()
                .await
                .map_err(|e| LedgerError::Remove(id.clone(), e))?
                .into_iter()
                .filter(|(_, cm)| cm.data.as_ref().is_some_and(|d| d.contains_key(&key)))
                .map(|(index, _)| index)
                .collect(),
        };
        let patch = serde_json::json!({ "data": { key.as_str(): null } });
        let params = PatchParams::default();
        let patch = Patch::Merge(&patch);
        for shard in shards {
            let name = shard_name(shard);
            match retry(API_RETRY_BUDGET, || self.api.patch(&name, &params, &patch)).await {
                Ok(_) => {}
                Err(e) if retry::is_not_found(&e) => {}
                Err(e) => return Err(LedgerError::Remove(id.clone(), e)),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_names_round_trip() {
        for index in [0, 1, 2, 10, 123] {
            assert_eq!(shard_index(&shard_name(index)), Some(index));
        }
        assert_eq!(shard_name(0), "bootstrap-ownership");
        assert_eq!(shard_name(3), "bootstrap-ownership-3");
        for other in [
            "bootstrap-ownership-guard",
            "bootstrap-ownership-0",
            "bootstrap-ownership-01",
            "bootstrap-ownership-",
            "bootstrap-ownershipx",
            "kube-root-ca.crt",
        ] {
            assert_eq!(shard_index(other), None, "{other}");
        }
    }

    #[test]
    fn a_new_entry_goes_to_the_first_shard_with_room() {
        let sizes = BTreeMap::from([(0, 90), (1, 50)]);
        assert_eq!(place(&sizes, 10, 100), 0);
        assert_eq!(place(&sizes, 11, 100), 1);
        assert_eq!(place(&sizes, 60, 100), 2);
        assert_eq!(place(&BTreeMap::new(), 10, 100), 0);
        // A shard deleted from the middle is filled again before a new one.
        assert_eq!(place(&BTreeMap::from([(0, 100), (2, 100)]), 10, 100), 1);
    }
}
