//! The in-memory object store: one object per (group, kind, namespace,
//! name) whatever version it is read or written through, a global
//! resourceVersion counter and a bounded history that watches replay from.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::defaults;
use super::resources::{self, CRD_GROUP, CRD_KIND, ResourceType};
use super::select::Selector;
use super::status::ApiError;

type ObjKey = (String, String, String, String);

/// One entry of the watch history.
#[derive(Debug)]
pub struct Event {
    pub rv: u64,
    pub kind: &'static str,
    pub group: String,
    pub res_kind: String,
    pub object: Value,
}

/// What a committed write did, for the controllers.
#[derive(Debug, Clone)]
pub struct Change {
    pub group: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// Created, or its generation moved: the cases a controller acts on.
    pub spec_changed: bool,
    pub deleted: bool,
    pub object: Value,
}

#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    pub dry_run: bool,
    pub manager: Option<String>,
    pub apply: bool,
    /// Test fixtures may seed `status`, which API writes to kinds with a
    /// status subresource cannot.
    pub keep_status: bool,
}

pub struct Store {
    objects: BTreeMap<ObjKey, Value>,
    rv: u64,
    history: VecDeque<Arc<Event>>,
    history_capacity: usize,
    /// Highest resourceVersion no longer in `history`.
    compacted: u64,
    builtins: Vec<ResourceType>,
    types: Vec<ResourceType>,
    changes: Vec<Change>,
    uid_seed: RandomState,
}

pub fn now_rfc3339() -> String {
    use jiff::{Timestamp, Unit};
    let now = Timestamp::now();
    now.round(Unit::Second).unwrap_or(now).to_string()
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?
        .get(field)?
        .as_str()
        .filter(|s| !s.is_empty())
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        _ => unreachable!("metadata was just made an object"),
    }
}

/// The parts of an object whose change bumps `metadata.generation`.
fn spec_part(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        for k in ["metadata", "status", "apiVersion", "kind"] {
            m.remove(k);
        }
    }
    v
}

/// An object minus what every write changes, to recognise no-op writes.
fn content(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("apiVersion");
    }
    let meta = meta_mut(&mut v);
    meta.remove("resourceVersion");
    meta.remove("managedFields");
    v
}

fn touch_managed_fields(obj: &mut Value, opts: &WriteOpts, api_version: &str, status_only: bool) {
    let Some(manager) = opts.manager.as_deref() else {
        return;
    };
    let operation = if opts.apply { "Apply" } else { "Update" };
    let subresource = if status_only { Some("status") } else { None };
    let meta = meta_mut(obj);
    let mut entries = meta
        .get("managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    entries.retain(|e| {
        !(e["manager"] == manager
            && e["operation"] == operation
            && e["subresource"].as_str() == subresource)
    });
    let mut entry = json!({
        "manager": manager, "operation": operation, "apiVersion": api_version,
        "time": now_rfc3339(), "fieldsType": "FieldsV1", "fieldsV1": {},
    });
    if let Some(sub) = subresource {
        entry["subresource"] = json!(sub);
    }
    entries.push(entry);
    meta.insert("managedFields".into(), Value::Array(entries));
}

impl Store {
    pub fn new(validating_admission_policy: bool, history_capacity: usize) -> Self {
        let builtins = resources::builtins(validating_admission_policy);
        Store {
            objects: BTreeMap::new(),
            rv: 1,
            history: VecDeque::new(),
            history_capacity: history_capacity.max(1),
            compacted: 0,
            types: builtins.clone(),
            builtins,
            changes: Vec::new(),
            uid_seed: RandomState::new(),
        }
    }

    fn rebuild_types(&mut self) {
        let mut types = self.builtins.clone();
        for ((group, kind, _, _), crd) in &self.objects {
            if group == CRD_GROUP && kind == CRD_KIND {
                for rt in resources::from_crd(crd) {
                    let taken = types.iter().any(|t| {
                        t.group == rt.group && t.version == rt.version && t.plural == rt.plural
                    });
                    if !taken {
                        types.push(rt);
                    }
                }
            }
        }
        self.types = types;
    }

    pub fn types(&self) -> &[ResourceType] {
        &self.types
    }

    pub fn resolve(&self, group: &str, version: &str, plural: &str) -> Option<ResourceType> {
        self.types
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
            .cloned()
    }

    pub fn resolve_kind(&self, api_version: &str, kind: &str) -> Option<ResourceType> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.types
            .iter()
            .find(|t| t.group == group && t.version == version && t.kind == kind)
            .cloned()
    }

    pub fn rv(&self) -> u64 {
        self.rv
    }

    pub fn take_changes(&mut self) -> Vec<Change> {
        std::mem::take(&mut self.changes)
    }

    /// Events after `since`, or `None` when some were already evicted and
    /// the caller must re-list (410 Gone).
    pub fn events_since(&self, since: u64) -> Option<Vec<Arc<Event>>> {
        if since < self.compacted {
            return None;
        }
        Some(
            self.history
                .iter()
                .filter(|e| e.rv > since)
                .cloned()
                .collect(),
        )
    }

    fn key(rt: &ResourceType, namespace: &str, name: &str) -> ObjKey {
        let ns = if rt.namespaced { namespace } else { "" };
        (
            rt.group.clone(),
            rt.kind.clone(),
            ns.to_string(),
            name.to_string(),
        )
    }

    /// The stored object as seen through `rt`'s version.
    pub fn present(rt: &ResourceType, obj: &Value) -> Value {
        let mut v = obj.clone();
        v["apiVersion"] = json!(rt.api_version());
        v["kind"] = json!(rt.kind);
        v
    }

    pub fn get(&self, rt: &ResourceType, namespace: &str, name: &str) -> Option<Value> {
        self.objects
            .get(&Self::key(rt, namespace, name))
            .map(|o| Self::present(rt, o))
    }

    /// `namespace: None` lists across all namespaces.
    pub fn list(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|((g, k, ns, _), obj)| {
                *g == rt.group
                    && *k == rt.kind
                    && namespace.is_none_or(|want| want == ns)
                    && selector.matches(obj)
            })
            .map(|(_, obj)| Self::present(rt, obj))
            .collect()
    }

    fn record(&mut self, kind: &'static str, rt: &ResourceType, object: Value) {
        self.history.push_back(Arc::new(Event {
            rv: self.rv,
            kind,
            group: rt.group.clone(),
            res_kind: rt.kind.clone(),
            object,
        }));
        while self.history.len() > self.history_capacity {
            if let Some(old) = self.history.pop_front() {
                self.compacted = old.rv;
            }
        }
    }

    fn new_uid(&mut self) -> String {
        let a = self.uid_seed.hash_one((self.rv, 1u8));
        let b = self.uid_seed.hash_one((self.rv, 2u8));
        let hex = format!("{a:016x}{b:016x}");
        format!(
            "{}-{}-4{}-a{}-{}",
            &hex[0..8],
            &hex[8..12],
            &hex[13..16],
            &hex[17..20],
            &hex[20..32]
        )
    }

    fn generated_name(&self, prefix: &str) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut n = self.uid_seed.hash_one((self.rv, prefix));
        let suffix: String = (0..5)
            .map(|_| {
                let c = ALPHABET[(n % ALPHABET.len() as u64) as usize] as char;
                n /= ALPHABET.len() as u64;
                c
            })
            .collect();
        format!("{prefix}{suffix}")
    }

    pub fn create(
        &mut self,
        rt: &ResourceType,
        namespace: &str,
        mut obj: Value,
        opts: &WriteOpts,
    ) -> Result<Value, ApiError> {
        let namespace = if rt.namespaced { namespace } else { "" };
        if !obj.is_object() {
            return Err(ApiError::bad_request("the request body must be an object"));
        }
        if let Some(kind) = obj["kind"].as_str().filter(|k| *k != rt.kind) {
            return Err(ApiError::bad_request(format!(
                "the kind of the provided object ({kind}) does not match the resource ({})",
                rt.kind
            )));
        }
        if meta_str(&obj, "resourceVersion").is_some() {
            return Err(ApiError::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let name = match (meta_str(&obj, "name"), meta_str(&obj, "generateName")) {
            (Some(name), _) => name.to_string(),
            (None, Some(prefix)) => self.generated_name(prefix),
            (None, None) => {
                return Err(ApiError::invalid(
                    rt,
                    "",
                    "metadata.name: Required value: name or generateName is required",
                ));
            }
        };
        if rt.namespaced {
            if meta_str(&obj, "namespace").is_some_and(|ns| ns != namespace) {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            meta_mut(&mut obj).insert("namespace".into(), json!(namespace));
        } else {
            meta_mut(&mut obj).remove("namespace");
        }
        meta_mut(&mut obj).insert("name".into(), json!(name));
        let key = Self::key(rt, namespace, &name);
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(rt, &name));
        }
        let is_crd = rt.is(CRD_GROUP, CRD_KIND);
        if is_crd {
            resources::validate_crd(&obj).map_err(|why| ApiError::invalid(rt, &name, &why))?;
        }
        if let Some(m) = obj
            .as_object_mut()
            .filter(|_| rt.has_status && !opts.keep_status)
        {
            m.remove("status");
        }
        if rt.is("", "Namespace") && obj.get("status").is_none() {
            obj["status"] = json!({"phase": "Active"});
        }
        obj["apiVersion"] = json!(rt.api_version());
        obj["kind"] = json!(rt.kind);
        defaults::apply(rt, &mut obj);
        let uid = self.new_uid();
        let meta = meta_mut(&mut obj);
        meta.insert("uid".into(), json!(uid));
        meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
        meta.insert("generation".into(), json!(1));
        touch_managed_fields(&mut obj, opts, &rt.api_version(), false);
        if opts.dry_run {
            return Ok(obj);
        }
        self.rv += 1;
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.objects.insert(key, obj.clone());
        self.record("ADDED", rt, obj.clone());
        self.changes.push(Change {
            group: rt.group.clone(),
            kind: rt.kind.clone(),
            namespace: namespace.to_string(),
            name,
            spec_changed: true,
            deleted: false,
            object: obj.clone(),
        });
        if is_crd {
            self.rebuild_types();
        }
        Ok(obj)
    }

    /// Replaces an object (or only its status), honouring a
    /// `metadata.resourceVersion` precondition in `candidate`.
    pub fn update(
        &mut self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        candidate: Value,
        status_only: bool,
        opts: &WriteOpts,
    ) -> Result<Value, ApiError> {
        let key = Self::key(rt, namespace, name);
        let existing = self
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(rt, name))?;
        if !candidate.is_object() {
            return Err(ApiError::bad_request("the request body must be an object"));
        }
        if let Some(other) = meta_str(&candidate, "name").filter(|n| *n != name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({other}) does not match the name on the URL ({name})"
            )));
        }
        if meta_str(&candidate, "resourceVersion")
            .is_some_and(|rv| Some(rv) != meta_str(&existing, "resourceVersion"))
        {
            return Err(ApiError::conflict(rt, name));
        }
        let mut next = if status_only {
            let mut next = existing.clone();
            match candidate.get("status") {
                Some(status) => next["status"] = status.clone(),
                None => {
                    next.as_object_mut().map(|m| m.remove("status"));
                }
            }
            next
        } else {
            let mut next = candidate;
            if rt.has_status && !opts.keep_status {
                match existing.get("status") {
                    Some(status) => next["status"] = status.clone(),
                    None => {
                        next.as_object_mut().map(|m| m.remove("status"));
                    }
                }
            }
            let old_meta = existing["metadata"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            let meta = meta_mut(&mut next);
            for field in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "name",
                "namespace",
                "generation",
                "managedFields",
                "resourceVersion",
            ] {
                match old_meta.get(field) {
                    Some(v) => meta.insert(field.into(), v.clone()),
                    None => meta.remove(field),
                };
            }
            defaults::apply(rt, &mut next);
            next
        };
        next["apiVersion"] = json!(rt.api_version());
        next["kind"] = json!(rt.kind);
        let is_crd = rt.is(CRD_GROUP, CRD_KIND);
        if is_crd {
            resources::validate_crd(&next).map_err(|why| ApiError::invalid(rt, name, &why))?;
        }
        if rt.is("", "Service") {
            immutable_cluster_ip(&existing, &next)
                .map_err(|why| ApiError::invalid(rt, name, &why))?;
        }
        let spec_changed = !status_only && spec_part(&next) != spec_part(&existing);
        if spec_changed {
            let generation = existing["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            meta_mut(&mut next).insert("generation".into(), json!(generation));
        }
        touch_managed_fields(&mut next, opts, &rt.api_version(), status_only);
        // A write that changes nothing is not a write: no new
        // resourceVersion, no watch event (as the real server does).
        if content(&next) == content(&existing) {
            return Ok(Self::present(rt, &existing));
        }
        if opts.dry_run {
            return Ok(next);
        }
        let next = self.modified(rt, key, next, spec_changed);
        if is_crd {
            self.rebuild_types();
        }
        // The last finalizer of an object being deleted taken off: it goes.
        if terminating(&next) && !has_finalizers(&next) {
            return self.delete(rt, namespace, name, &Value::Null, false);
        }
        Ok(next)
    }

    /// Stores `object` as the new state of `key` under a new
    /// resourceVersion: a MODIFIED watch event and a recorded change.
    fn modified(
        &mut self,
        rt: &ResourceType,
        key: ObjKey,
        mut object: Value,
        spec_changed: bool,
    ) -> Value {
        self.rv += 1;
        meta_mut(&mut object).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.objects.insert(key.clone(), object.clone());
        self.record("MODIFIED", rt, object.clone());
        self.changes.push(Change {
            group: rt.group.clone(),
            kind: rt.kind.clone(),
            namespace: key.2,
            name: key.3,
            spec_changed,
            deleted: false,
            object: object.clone(),
        });
        object
    }

    /// Create or replace, for test fixtures: keeps the given status.
    pub fn upsert(&mut self, rt: &ResourceType, mut obj: Value) -> Result<Value, ApiError> {
        meta_mut(&mut obj).remove("resourceVersion");
        let namespace = meta_str(&obj, "namespace").unwrap_or("default").to_string();
        let name = meta_str(&obj, "name").unwrap_or_default().to_string();
        let opts = WriteOpts {
            keep_status: true,
            ..WriteOpts::default()
        };
        if self.objects.contains_key(&Self::key(rt, &namespace, &name)) {
            self.update(rt, &namespace, &name, obj, false, &opts)
        } else {
            self.create(rt, &namespace, obj, &opts)
        }
    }

    pub fn delete(
        &mut self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        preconditions: &Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let key = Self::key(rt, namespace, name);
        let existing = self
            .objects
            .get(&key)
            .ok_or_else(|| ApiError::not_found(rt, name))?;
        for field in ["uid", "resourceVersion"] {
            if preconditions[field]
                .as_str()
                .is_some_and(|want| Some(want) != meta_str(existing, field))
            {
                return Err(ApiError::conflict(rt, name));
            }
        }
        if dry_run {
            return Ok(Self::present(rt, existing));
        }
        // An object with finalizers is only marked (as the real server
        // does): it stays, terminating, until its finalizers are removed.
        if has_finalizers(existing) {
            if terminating(existing) {
                return Ok(Self::present(rt, existing));
            }
            let mut marked = existing.clone();
            meta_mut(&mut marked).insert("deletionTimestamp".into(), json!(now_rfc3339()));
            let marked = self.modified(rt, key, marked, false);
            return Ok(Self::present(rt, &marked));
        }
        let Some(mut gone) = self.objects.remove(&key) else {
            return Err(ApiError::not_found(rt, name));
        };
        self.rv += 1;
        meta_mut(&mut gone).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.record("DELETED", rt, gone.clone());
        self.changes.push(Change {
            group: rt.group.clone(),
            kind: rt.kind.clone(),
            namespace: key.2.clone(),
            name: name.to_string(),
            spec_changed: false,
            deleted: true,
            object: gone.clone(),
        });
        if rt.is(CRD_GROUP, CRD_KIND) {
            self.delete_custom_resources(&gone);
            self.rebuild_types();
        }
        Ok(Self::present(rt, &gone))
    }

    /// Deleting a CRD deletes every object of its kind.
    fn delete_custom_resources(&mut self, crd: &Value) {
        let Some(rt) = resources::from_crd(crd).into_iter().next() else {
            return;
        };
        let doomed: Vec<ObjKey> = self
            .objects
            .keys()
            .filter(|(g, k, _, _)| *g == rt.group && *k == rt.kind)
            .cloned()
            .collect();
        for (_, _, ns, name) in doomed {
            let _ = self.delete(&rt, &ns, &name, &Value::Null, false);
        }
    }
}

/// Whether the object is being deleted (`metadata.deletionTimestamp`).
fn terminating(obj: &Value) -> bool {
    !obj["metadata"]["deletionTimestamp"].is_null()
}

/// Whether `metadata.finalizers` holds any.
fn has_finalizers(obj: &Value) -> bool {
    obj["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty())
}

/// A Service's `spec.clusterIP` cannot change once set, as the real API
/// server rules (an update that leaves it out keeps it there; here it is
/// only compared when both sides have one).
fn immutable_cluster_ip(existing: &Value, next: &Value) -> Result<(), String> {
    let ip = |o: &Value| {
        o["spec"]["clusterIP"]
            .as_str()
            .filter(|ip| !ip.is_empty())
            .map(str::to_string)
    };
    match (ip(existing), ip(next)) {
        (Some(old), Some(new)) if old != new => Err(format!(
            "spec.clusterIPs[0]: Invalid value: [\"{new}\"]: may not change once set"
        )),
        _ => Ok(()),
    }
}
