//! The ownership ledger's shards against the loopback API: entries spread
//! over ConfigMaps when one would outgrow its limit, every reader sees all of
//! them, and a shard deleted or rewritten mid-run is put back.

use std::time::Duration;

use bootstrap::ledger::{Entry, Ledger, Repair};
use bootstrap::release::ReleaseId;
use kube_loopback::ApiServer;
use serde_json::{Value, json};

fn client(api: &ApiServer) -> kube::Client {
    let config = kube::Config::new(api.url().parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

fn id(i: usize) -> ReleaseId {
    ReleaseId {
        namespace: "apps".to_string(),
        name: format!("release-{i:03}"),
    }
}

fn entry(i: usize) -> Entry {
    Entry {
        release: id(i).to_string(),
        chart: "podinfo".to_string(),
        version: "6.7.0".to_string(),
        values_digest: format!("sha256:{i:064}"),
        applied_at: "2026-01-01T00:00:00Z".to_string(),
        tool_version: "0.1.0".to_string(),
        policy: "bootstrap".to_string(),
        // As entries written before these fields existed (the shard sizes
        // below are counted for them).
        cluster: None,
        hooks_digest: None,
    }
}

fn shards(api: &ApiServer) -> Vec<Value> {
    let mut shards: Vec<Value> = api
        .list("v1", "ConfigMap")
        .into_iter()
        .filter(|cm| {
            cm["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("bootstrap-ownership"))
        })
        .collect();
    shards.sort_by_key(|cm| cm["metadata"]["name"].as_str().unwrap().len());
    shards
}

fn bytes(shard: &Value) -> usize {
    shard["data"]
        .as_object()
        .map(|d| {
            d.iter()
                .map(|(k, v)| k.len() + v.as_str().unwrap().len())
                .sum()
        })
        .unwrap_or(0)
}

const LIMIT: usize = 2048;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn entries_spread_over_shards_and_read_back_whole() {
    let api = ApiServer::start();
    runtime().block_on(async {
        let ledger = Ledger::with_shard_limit(&client(&api), LIMIT);
        ledger.entries().await.unwrap();
        for i in 0..30 {
            assert_eq!(ledger.record(&entry(i), &id(i)).await.unwrap(), vec![]);
        }
        let shards = shards(&api);
        assert!(shards.len() >= 3, "30 entries of ~250 bytes in 2 KiB shards");
        for shard in &shards {
            assert!(bytes(shard) <= LIMIT, "{}", shard["metadata"]["name"]);
            assert_eq!(
                shard["metadata"]["labels"],
                json!({"app.kubernetes.io/managed-by": "bootstrap", "bootstrap.dev/ledger": "ownership"})
            );
        }
        // A fresh reader (status, the next apply) sees every entry.
        let read = Ledger::new(&client(&api)).entries().await.unwrap();
        assert_eq!(read.len(), 30);
        assert_eq!(read["apps.release-017"], entry(17));

        // Re-recording keeps an entry where it is.
        let before = shards.clone();
        let mut newer = entry(3);
        newer.version = "6.8.0".to_string();
        ledger.record(&newer, &id(3)).await.unwrap();
        let after = self::shards(&api);
        assert_eq!(after.len(), before.len());
        assert!(after[0]["data"]["apps.release-003"].as_str().unwrap().contains("6.8.0"));

        // Removing finds the entry's shard, also from a ledger that never read it.
        Ledger::new(&client(&api)).remove(&id(25)).await.unwrap();
        let read = Ledger::new(&client(&api)).entries().await.unwrap();
        assert_eq!(read.len(), 29);
        assert!(!read.contains_key("apps.release-025"));
    });
}

#[test]
fn a_deleted_or_rewritten_shard_is_put_back() {
    let api = ApiServer::start();
    runtime().block_on(async {
        let ledger = Ledger::with_shard_limit(&client(&api), LIMIT).recheck_every(Duration::ZERO);
        ledger.entries().await.unwrap();
        for i in 0..20 {
            ledger.record(&entry(i), &id(i)).await.unwrap();
        }
        let first: usize = shards(&api)[0]["data"].as_object().unwrap().len();
        api.delete(
            "v1",
            "ConfigMap",
            Some("kube-system"),
            "bootstrap-ownership",
        );
        let repairs = ledger.record(&entry(20), &id(20)).await.unwrap();
        assert_eq!(
            repairs,
            vec![Repair::Recreated {
                shard: "bootstrap-ownership".to_string(),
                entries: first
            }]
        );
        assert_eq!(
            Ledger::new(&client(&api)).entries().await.unwrap().len(),
            21
        );

        // Rewritten: the shard that is written next loses entries.
        let mut last = shards(&api).pop().unwrap();
        let name = last["metadata"]["name"].as_str().unwrap().to_string();
        let kept = last["data"].as_object().unwrap().len();
        last["data"] = json!({});
        api.insert(last);
        let repairs = ledger.record(&entry(21), &id(21)).await.unwrap();
        assert_eq!(
            repairs,
            vec![Repair::Restored {
                shard: name,
                entries: kept
            }]
        );
        assert_eq!(
            Ledger::new(&client(&api)).entries().await.unwrap().len(),
            22
        );
    });
}

/// A shard rewritten behind the run's back is put back with the warning the
/// design promises, also when it is not the shard written next, and also
/// when its entries were changed rather than removed.
#[test]
fn a_rewritten_shard_is_restored_with_a_warning_whichever_shard_is_written() {
    let api = ApiServer::start();
    runtime().block_on(async {
        let ledger = Ledger::with_shard_limit(&client(&api), LIMIT).recheck_every(Duration::ZERO);
        ledger.entries().await.unwrap();
        for i in 0..20 {
            ledger.record(&entry(i), &id(i)).await.unwrap();
        }
        let all = shards(&api);
        assert!(all.len() >= 2);
        // The first shard rewritten: one entry removed, one changed.
        let mut first = all[0].clone();
        let keys: Vec<String> = first["data"].as_object().unwrap().keys().cloned().collect();
        first["data"].as_object_mut().unwrap().remove(&keys[0]);
        first["data"][&keys[1]] = json!("{\"release\":\"forged\"}");
        api.insert(first);
        // The next entry goes to the last shard, not the first.
        let repairs = ledger.record(&entry(20), &id(20)).await.unwrap();
        assert_eq!(
            repairs,
            vec![Repair::Restored {
                shard: "bootstrap-ownership".to_string(),
                entries: 2
            }]
        );
        assert!(
            repairs[0]
                .message()
                .contains("was rewritten during the run")
        );
        let read = Ledger::new(&client(&api)).entries().await.unwrap();
        assert_eq!(read.len(), 21);
        let n1: usize = keys[1].trim_start_matches("apps.release-").parse().unwrap();
        assert_eq!(read[&keys[1]], entry(n1));

        // The written shard itself, an entry changed in place.
        let mut last = shards(&api).pop().unwrap();
        let name = last["metadata"]["name"].as_str().unwrap().to_string();
        let key = last["data"]
            .as_object()
            .unwrap()
            .keys()
            .next()
            .unwrap()
            .clone();
        last["data"][&key] = json!("{}");
        api.insert(last);
        let repairs = ledger.record(&entry(21), &id(21)).await.unwrap();
        assert_eq!(
            repairs,
            vec![Repair::Restored {
                shard: name,
                entries: 1
            }]
        );
    });
}

#[test]
fn a_ledger_written_before_shards_is_read_and_labelled() {
    let api = ApiServer::start();
    api.insert(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "bootstrap-ownership", "namespace": "kube-system",
                     "labels": {"app.kubernetes.io/managed-by": "bootstrap"}},
        "data": {"apps.release-000": serde_json::to_string(&entry(0)).unwrap()},
    }));
    runtime().block_on(async {
        let ledger = Ledger::new(&client(&api));
        assert_eq!(ledger.entries().await.unwrap().len(), 1);
        ledger.record(&entry(1), &id(1)).await.unwrap();
    });
    let shards = shards(&api);
    assert_eq!(shards.len(), 1);
    assert_eq!(
        shards[0]["metadata"]["labels"]["bootstrap.dev/ledger"],
        "ownership"
    );
    assert_eq!(shards[0]["data"].as_object().unwrap().len(), 2);
}
