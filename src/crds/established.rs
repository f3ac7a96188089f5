//! One watch on every CustomResourceDefinition, opened before the CRD
//! phase's first write, from which the phase learns when each CRD it
//! applied is Established (docs/design.md#phases-of-apply). A wait per CRD
//! would start with a list of that CRD: the whole object, a megabyte for
//! the large ones, read from an API server that is busy setting each new
//! CRD up; the watch sends each object once per change, as the API server's
//! own clients get it.
//!
//! It only speeds the wait up: a CRD it has not seen Established when the
//! stream ends (an API server restart, an expired resourceVersion) is left
//! to the wait of that one CRD, which reads it again.

use std::collections::BTreeMap;

use ::kube::api::{Api, ApiResource, DynamicObject, ListParams, WatchEvent, WatchParams};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use tokio::time::Instant;

use crate::kube::ready::{self, Readiness};

/// What the watch knows of a CRD it waits for.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Seen {
    Established,
    /// Its names were refused (`NamesAccepted` False): waiting cannot help.
    Failed(String),
}

pub(super) struct EstablishedWatch {
    stream: BoxStream<'static, Result<WatchEvent<DynamicObject>, ::kube::Error>>,
}

impl EstablishedWatch {
    /// Opens the watch at the CRDs' current resourceVersion, read from a
    /// list of one CRD's metadata (a list's resourceVersion is that of the
    /// whole collection, however many items it returns; a CRD's metadata
    /// alone can be large, its managedFields mirroring its schema). `None`
    /// when it cannot be opened: the wait per CRD does all the work then.
    pub(super) async fn open(
        client: &::kube::Client,
        timeout: std::time::Duration,
    ) -> Option<Self> {
        let api: Api<DynamicObject> = Api::all_with(
            client.clone(),
            &ApiResource::erase::<CustomResourceDefinition>(&()),
        );
        let version = api
            .list_metadata(&ListParams::default().limit(1))
            .await
            .ok()?
            .metadata
            .resource_version?;
        // The API server ends a watch after its timeoutSeconds (at most
        // 290 s here); the phase's own deadline ends it sooner.
        let seconds = u32::try_from(timeout.as_secs().clamp(1, 290)).unwrap_or(290);
        let params = WatchParams::default().timeout(seconds);
        let stream = api.watch(&params, &version).await.ok()?.boxed();
        Some(Self { stream })
    }

    /// Reads the watch until every CRD of `waiting` (its name, and the uid
    /// the apply returned) has been seen Established or Failed, the stream
    /// ends or fails, or `deadline` passes. Only the object with that uid
    /// counts: a CRD deleted just before the apply created it again shows
    /// up in the stream first, still Established as it goes. `seen` is
    /// called once per CRD of `waiting`, as it is seen; the names not seen
    /// are returned, in order.
    pub(super) async fn until(
        &mut self,
        waiting: &[(&str, Option<&str>)],
        deadline: Instant,
        mut seen: impl FnMut(&str, Seen),
    ) -> Vec<String> {
        let mut left: BTreeMap<&str, Option<&str>> = waiting.iter().copied().collect();
        while !left.is_empty() {
            let event = match tokio::time::timeout_at(deadline, self.stream.try_next()).await {
                Ok(Ok(Some(event))) => event,
                // The deadline, the end of the stream or an error of it.
                Err(_) | Ok(Ok(None) | Err(_)) => break,
            };
            let crd = match event {
                WatchEvent::Added(crd) | WatchEvent::Modified(crd) => crd,
                WatchEvent::Deleted(_) | WatchEvent::Bookmark(_) => continue,
                // 410 Gone and the like: this stream is over.
                WatchEvent::Error(_) => break,
            };
            let Some(name) = crd.metadata.name.as_deref() else {
                continue;
            };
            let Some((&key, &uid)) = left.get_key_value(name) else {
                continue;
            };
            if uid.is_some_and(|uid| crd.metadata.uid.as_deref() != Some(uid)) {
                continue;
            }
            // `data` holds the object's spec and status.
            match ready::crd_established(Some(&crd.data)) {
                Readiness::Ready => seen(key, Seen::Established),
                Readiness::Failed(reason) => seen(key, Seen::Failed(reason)),
                Readiness::Pending(_) => continue,
            }
            left.remove(key);
        }
        waiting
            .iter()
            .filter(|(n, _)| left.contains_key(n))
            .map(|(n, _)| (*n).to_string())
            .collect()
    }
}
