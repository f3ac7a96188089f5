//! The ownership ledger (docs/design.md#ledger): ConfigMap `bootstrap-ownership` in
//! kube-system, one data key per release, written after each release
//! succeeds so an interruption never loses what was recorded.
//!
//! Key: `<namespace>.<name>` (ConfigMap keys allow `[-._a-zA-Z0-9]`, and
//! neither part may contain a dot, so the key is unambiguous). Value: a JSON
//! [`Entry`]. The admission policy reads the same keys through `paramRef`.
//! `policy` is the release's ownership policy: `bootstrap` or `handover`.

use std::collections::BTreeMap;

use ::kube::api::{Api, Patch, PatchParams, PostParams};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::kube::apply::API_RETRY_BUDGET;
use crate::kube::retry::{self, retry};
use crate::release::{Ownership, Release, ReleaseId};

pub const LEDGER_NAME: &str = "bootstrap-ownership";
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
}

impl Entry {
    pub fn for_release(release: &Release) -> Entry {
        Entry {
            release: release.id.to_string(),
            chart: release.chart_label(),
            version: release.version_label(),
            values_digest: release.values_digest(),
            applied_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            policy: release.ownership.as_str().to_string(),
        }
    }

    /// The release as recorded matches what is desired now.
    pub fn matches(&self, release: &Release) -> bool {
        self.version == release.version_label()
            && self.chart == release.chart_label()
            && self.values_digest == release.values_digest()
            && self.policy == release.ownership.as_str()
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
}

impl From<LedgerError> for Error {
    fn from(e: LedgerError) -> Error {
        let message = e.to_string();
        match e {
            LedgerError::Read(source)
            | LedgerError::Record(_, source)
            | LedgerError::Remove(_, source) => Error::failed_with(message, source),
        }
    }
}

#[derive(Clone)]
pub struct Ledger {
    api: Api<ConfigMap>,
    /// Every entry this run has read or written (raw JSON by key): what a
    /// ledger deleted or rewritten mid-run is restored from.
    known: std::sync::Arc<std::sync::Mutex<BTreeMap<String, String>>>,
}

/// What a record found and put right on the way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repair {
    None,
    /// The ledger was gone; it was created again with every known entry.
    Recreated {
        entries: usize,
    },
    /// Entries recorded earlier were missing (the ledger was rewritten).
    Restored {
        entries: usize,
    },
}

impl Ledger {
    pub fn new(client: &::kube::Client) -> Ledger {
        Ledger {
            api: Api::namespaced(client.clone(), LEDGER_NAMESPACE),
            known: Default::default(),
        }
    }

    fn known(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every entry; empty when the ledger does not exist yet. Unreadable
    /// entries are skipped (they are rewritten on the next apply).
    pub async fn entries(&self) -> Result<BTreeMap<String, Entry>, LedgerError> {
        let cm = retry(API_RETRY_BUDGET, || self.api.get_opt(LEDGER_NAME))
            .await
            .map_err(LedgerError::Read)?;
        let data = cm.and_then(|cm| cm.data).unwrap_or_default();
        self.known().extend(data.clone());
        Ok(data
            .into_iter()
            .filter_map(|(k, v)| Some((k, serde_json::from_str(&v).ok()?)))
            .collect())
    }

    /// Creates the ledger holding every known entry and `id`'s (a conflict: someone
    /// else created it first, fine).
    async fn create(&self, id: &ReleaseId, value: &str) -> Result<(), ::kube::Error> {
        let mut data = self.known().clone();
        data.insert(key(id), value.to_string());
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(LEDGER_NAME.into()),
                namespace: Some(LEDGER_NAMESPACE.into()),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/managed-by".to_string(),
                    "bootstrap".to_string(),
                )])),
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

    /// Records one release: a merge patch of its own key. The patched
    /// ledger comes back whole, so a ledger that was deleted or rewritten
    /// since (losing what this run and earlier ones recorded) is noticed
    /// and put right at once, not at the next apply.
    pub async fn record(&self, entry: &Entry, id: &ReleaseId) -> Result<Repair, LedgerError> {
        let value = serde_json::to_string(entry).unwrap_or_default();
        let repair = self.write(id, &value).await?;
        // Known once written: a write that never happened restores nothing.
        self.known().insert(key(id), value);
        Ok(repair)
    }

    async fn write(&self, id: &ReleaseId, value: &str) -> Result<Repair, LedgerError> {
        let patch = serde_json::json!({ "data": { key(id): value } });
        let params = PatchParams::default();
        let patch = Patch::Merge(&patch);
        let record_error = |e| LedgerError::Record(id.clone(), e);
        let patched = retry(API_RETRY_BUDGET, || {
            self.api.patch(LEDGER_NAME, &params, &patch)
        })
        .await;
        let cm = match patched {
            Ok(cm) => cm,
            Err(e) if retry::is_not_found(&e) => {
                let had = self.known().len();
                retry(API_RETRY_BUDGET, || self.create(id, value))
                    .await
                    .map_err(record_error)?;
                // Created by us with every entry, or by a concurrent writer.
                retry(API_RETRY_BUDGET, || {
                    self.api.patch(LEDGER_NAME, &params, &patch)
                })
                .await
                .map_err(record_error)?;
                return Ok(if had > 0 {
                    Repair::Recreated { entries: had }
                } else {
                    Repair::None
                });
            }
            Err(e) => return Err(record_error(e)),
        };
        let present = cm.data.unwrap_or_default();
        let missing: BTreeMap<String, String> = self
            .known()
            .iter()
            .filter(|(k, _)| !present.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if missing.is_empty() {
            return Ok(Repair::None);
        }
        let restore = serde_json::json!({ "data": missing });
        let restore = Patch::Merge(&restore);
        retry(API_RETRY_BUDGET, || {
            self.api.patch(LEDGER_NAME, &params, &restore)
        })
        .await
        .map_err(record_error)?;
        Ok(Repair::Restored {
            entries: missing.len(),
        })
    }

    pub async fn remove(&self, id: &ReleaseId) -> Result<(), LedgerError> {
        self.known().remove(&key(id));
        let patch = serde_json::json!({ "data": { key(id): null } });
        let params = PatchParams::default();
        let patch = Patch::Merge(&patch);
        match retry(API_RETRY_BUDGET, || {
            self.api.patch(LEDGER_NAME, &params, &patch)
        })
        .await
        {
            Ok(_) => Ok(()),
            Err(e) if retry::is_not_found(&e) => Ok(()),
            Err(e) => Err(LedgerError::Remove(id.clone(), e)),
        }
    }
}
