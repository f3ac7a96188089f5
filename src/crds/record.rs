//! What the CRD phase last applied (docs/design.md#crd-record): ConfigMap
//! `kube-system/bootstrap-crds`, one data key per CRD name, whose value
//! says which manifest was applied (its digest) to which object (its `uid`)
//! and at which `metadata.generation` the API server left it.
//!
//! A CRD whose rendered manifest has the recorded digest, and whose live
//! object still has the recorded uid and generation and carries the
//! manifest's labels and annotations, is exactly as the last apply left it:
//! nobody has changed its spec since (every spec change moves the
//! generation; a delete and create changes the uid), so applying it again
//! would change nothing, and the CRD phase skips it. Anything else — a new
//! chart, a CRD edited or recreated by hand, a record from before this
//! existed — is applied as always.

use std::collections::BTreeMap;

use ::kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::kube::apply::FIELD_MANAGER;
use crate::kube::retry::{API_RETRY_BUDGET, is_not_found, retry};
use crate::ledger::LEDGER_NAMESPACE;

/// The record's ConfigMap, beside the ledger (never labelled as a ledger
/// shard: the admission guard reads only those).
pub(crate) const RECORD_NAME: &str = "bootstrap-crds";

/// One CRD as the CRD phase last left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Applied {
    /// [`digest`] of the manifest applied.
    pub digest: String,
    /// The CRD object it was applied to.
    pub uid: String,
    /// Its `metadata.generation` after the apply.
    pub generation: i64,
}

/// A CRD as the API server has it now (its metadata only).
#[derive(Debug, Clone, Default)]
pub(crate) struct Live {
    pub uid: String,
    pub generation: i64,
    pub deleting: bool,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

impl Live {
    fn of(meta: ObjectMeta) -> Option<(String, Live)> {
        Some((
            meta.name?,
            Live {
                uid: meta.uid?,
                generation: meta.generation?,
                deleting: meta.deletion_timestamp.is_some(),
                labels: meta.labels.unwrap_or_default(),
                annotations: meta.annotations.unwrap_or_default(),
            },
        ))
    }
}

/// What the CRD phase knows before it applies: the record and the live CRDs.
#[derive(Debug, Default)]
pub(crate) struct Known {
    pub recorded: BTreeMap<String, Applied>,
    pub live: BTreeMap<String, Live>,
}

/// The digest a manifest is recorded under.
pub(crate) fn digest(manifest: &Value) -> String {
    crate::values::digest(manifest)
}

impl Known {
    /// The CRD `manifest` (named `name`) is as the last apply left it.
    pub(crate) fn unchanged(&self, name: &str, manifest: &Value) -> bool {
        let (Some(recorded), Some(live)) = (self.recorded.get(name), self.live.get(name)) else {
            return false;
        };
        recorded.uid == live.uid
            && recorded.generation == live.generation
            && !live.deleting
            && recorded.digest == digest(manifest)
            && carries(manifest, "labels", &live.labels)
            && carries(manifest, "annotations", &live.annotations)
    }
}

/// Every `metadata.<field>` entry of the manifest is on the live object
/// (labels and annotations do not move the generation).
fn carries(manifest: &Value, field: &str, live: &BTreeMap<String, String>) -> bool {
    manifest
        .pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_object)
        .is_none_or(|wanted| {
            wanted
                .iter()
                .all(|(k, v)| live.get(k).map(String::as_str) == v.as_str())
        })
}

/// Why the record or the live CRDs could not be read or the record written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RecordError {
    #[error("cannot read ConfigMap {LEDGER_NAMESPACE}/{RECORD_NAME}")]
    Read(#[source] ::kube::Error),
    #[error("cannot list the cluster's CustomResourceDefinitions")]
    List(#[source] ::kube::Error),
    #[error("cannot write ConfigMap {LEDGER_NAMESPACE}/{RECORD_NAME}")]
    Write(#[source] ::kube::Error),
}

/// Reads the record and the live CRDs' metadata, side by side.
pub(crate) async fn read(client: &::kube::Client) -> Result<Known, RecordError> {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), LEDGER_NAMESPACE);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = ListParams::default();
    let (record, live) = tokio::join!(
        retry(API_RETRY_BUDGET, || maps.get_opt(RECORD_NAME)),
        retry(API_RETRY_BUDGET, || crds.list_metadata(&params)),
    );
    let record = record.map_err(RecordError::Read)?;
    let live = live.map_err(RecordError::List)?;
    Ok(Known {
        recorded: parse(record.and_then(|m| m.data).unwrap_or_default()),
        live: live
            .items
            .into_iter()
            .filter_map(|o| Live::of(o.metadata))
            .collect(),
    })
}

/// The record's entries; one that does not parse (written by hand, or by a
/// later bootstrap) is left out, so its CRD is applied.
fn parse(data: BTreeMap<String, String>) -> BTreeMap<String, Applied> {
    data.into_iter()
        .filter_map(|(name, text)| Some((name, serde_json::from_str(&text).ok()?)))
        .collect()
}

/// `Applied` of an object the API server returned from an apply.
pub(crate) fn applied(manifest: &Value, returned: &Value) -> Option<Applied> {
    Some(Applied {
        digest: digest(manifest),
        uid: returned.pointer("/metadata/uid")?.as_str()?.to_string(),
        generation: returned.pointer("/metadata/generation")?.as_i64()?,
    })
}

/// Writes the record: the entries read before the phase, with `fresh`
/// (what this run applied) in place of theirs. One server-side apply of the
/// whole ConfigMap, which also creates it.
pub(crate) async fn write(
    client: &::kube::Client,
    mut entries: BTreeMap<String, Applied>,
    fresh: BTreeMap<String, Applied>,
) -> Result<(), RecordError> {
    entries.extend(fresh);
    let data: BTreeMap<String, String> = entries
        .into_iter()
        .filter_map(|(name, a)| Some((name, serde_json::to_string(&a).ok()?)))
        .collect();
    let map = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": RECORD_NAME,
            "namespace": LEDGER_NAMESPACE,
            "labels": {"app.kubernetes.io/managed-by": "bootstrap"},
        },
        "data": data,
    });
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), LEDGER_NAMESPACE);
    if data.is_empty() {
        let params = DeleteParams::default();
        return match retry(API_RETRY_BUDGET, || api.delete(RECORD_NAME, &params)).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(RecordError::Write(e)),
        };
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let patch = Patch::Apply(&map);
    retry(API_RETRY_BUDGET, || api.patch(RECORD_NAME, &params, &patch))
        .await
        .map_err(RecordError::Write)?;
    Ok(())
}

/// Takes the CRDs `names` (deleted by `destroy --crds`) out of the record;
/// the ConfigMap goes with its last entry.
pub(crate) async fn forget(client: &::kube::Client, names: &[&str]) -> Result<(), RecordError> {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), LEDGER_NAMESPACE);
    let Some(map) = retry(API_RETRY_BUDGET, || maps.get_opt(RECORD_NAME))
        .await
        .map_err(RecordError::Read)?
    else {
        return Ok(());
    };
    let mut entries = parse(map.data.unwrap_or_default());
    let before = entries.len();
    entries.retain(|name, _| !names.contains(&name.as_str()));
    if entries.len() == before {
        return Ok(());
    }
    write(client, entries, BTreeMap::new()).await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn manifest() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "certificates.cert-manager.io", "labels": {"app": "cert-manager"}},
            "spec": {"group": "cert-manager.io"},
        })
    }

    fn known(live: Live) -> Known {
        let name = "certificates.cert-manager.io".to_string();
        Known {
            recorded: BTreeMap::from([(
                name.clone(),
                Applied {
                    digest: digest(&manifest()),
                    uid: "u1".into(),
                    generation: 3,
                },
            )]),
            live: BTreeMap::from([(name, live)]),
        }
    }

    fn as_left() -> Live {
        Live {
            uid: "u1".into(),
            generation: 3,
            deleting: false,
            labels: BTreeMap::from([("app".into(), "cert-manager".into())]),
            annotations: BTreeMap::new(),
        }
    }

    const NAME: &str = "certificates.cert-manager.io";

    #[test]
    fn a_crd_as_the_last_apply_left_it_is_unchanged() {
        assert!(known(as_left()).unchanged(NAME, &manifest()));
    }

    #[test]
    fn any_difference_means_it_is_applied_again() {
        let mut other = manifest();
        other["spec"]["group"] = json!("cert-manager.io.example");
        assert!(!known(as_left()).unchanged(NAME, &other), "a new manifest");
        let edited = Live {
            generation: 4,
            ..as_left()
        };
        assert!(!known(edited).unchanged(NAME, &manifest()), "spec edited");
        let recreated = Live {
            uid: "u2".into(),
            ..as_left()
        };
        assert!(
            !known(recreated).unchanged(NAME, &manifest()),
            "deleted and created again"
        );
        let deleting = Live {
            deleting: true,
            ..as_left()
        };
        assert!(
            !known(deleting).unchanged(NAME, &manifest()),
            "being deleted"
        );
        let relabelled = Live {
            labels: BTreeMap::from([("app".into(), "other".into())]),
            ..as_left()
        };
        assert!(
            !known(relabelled).unchanged(NAME, &manifest()),
            "its label changed (no generation change)"
        );
        let mut gone = known(as_left());
        gone.live.clear();
        assert!(!gone.unchanged(NAME, &manifest()), "not there");
        let mut unrecorded = known(as_left());
        unrecorded.recorded.clear();
        assert!(!unrecorded.unchanged(NAME, &manifest()), "never recorded");
    }

    #[test]
    fn labels_added_by_others_do_not_count() {
        let mut live = as_left();
        live.labels.insert("team".into(), "platform".into());
        live.annotations
            .insert("cert-manager.io/inject-ca-from".into(), "x".into());
        assert!(known(live).unchanged(NAME, &manifest()));
    }

    #[test]
    fn an_entry_that_does_not_parse_is_left_out() {
        let good = serde_json::to_string(&Applied {
            digest: "sha256:x".into(),
            uid: "u".into(),
            generation: 1,
        })
        .unwrap();
        let parsed = parse(BTreeMap::from([
            ("a.example.com".to_string(), good),
            ("b.example.com".to_string(), "{not json".to_string()),
        ]));
        assert_eq!(parsed.keys().collect::<Vec<_>>(), ["a.example.com"]);
    }

    #[test]
    fn applied_reads_uid_and_generation_from_the_returned_object() {
        let returned = json!({"metadata": {"uid": "u9", "generation": 2}});
        assert_eq!(
            applied(&manifest(), &returned),
            Some(Applied {
                digest: digest(&manifest()),
                uid: "u9".into(),
                generation: 2
            })
        );
        assert_eq!(applied(&manifest(), &json!({"metadata": {}})), None);
    }
}
