//! The HTTP surface: request logging and fault injection, then routing of
//! Kubernetes API paths to discovery, the store and watches.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::discovery;
use super::openapi;
use super::patch::{json_patch, merge_patch};
use super::protobuf;
use super::resources::ResourceType;
use super::select::Selector;
use super::status::ApiError;
use super::store::WriteOpts;
use super::watch::{self, WatchParams};
use super::{Request, Shared};

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .fallback(handle)
        .layer(DefaultBodyLimit::disable())
        .with_state(shared)
}

struct Call {
    method: Method,
    params: HashMap<String, String>,
    content_type: String,
    body: Bytes,
    aggregated_discovery: bool,
    accept: Option<String>,
}

impl Call {
    fn param(&self, name: &str) -> Option<&str> {
        self.params
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    fn flag(&self, name: &str) -> bool {
        matches!(self.param(name), Some("true" | "1"))
    }

    /// JSON, or YAML (server-side apply bodies may be either).
    fn body(&self) -> Result<Value, ApiError> {
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Null);
        }
        if self.content_type.starts_with(protobuf::CONTENT_TYPE) {
            return protobuf::decode(&self.body);
        }
        if self.content_type.contains("cbor") {
            return Err(ApiError::unsupported_media_type(
                &self.content_type,
                "application/json, application/yaml",
            ));
        }
        serde_json::from_slice(&self.body)
            .or_else(|_| serde_saphyr::from_slice::<Value>(&self.body))
            .map_err(|e| {
                ApiError::bad_request(format!("the request body could not be decoded: {e}"))
            })
    }

    fn dry_run(&self, body: &Value) -> bool {
        let in_body = body["dryRun"]
            .as_array()
            .is_some_and(|a| a.iter().any(|v| v == "All"));
        self.param("dryRun") == Some("All") || in_body
    }
}

fn json_response(code: u16, body: &Value) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn error_response(e: &ApiError) -> Response {
    json_response(e.code, &e.to_status())
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header_str = |name: header::HeaderName| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    };
    let content_type = header_str(header::CONTENT_TYPE);
    // A remote server: half the round trip before the request arrives,
    // half after it is served.
    let delay = shared.delay();
    let there = delay / 2;
    tokio::time::sleep(there).await;
    let request = Request {
        method: method.to_string(),
        path: uri.path().to_string(),
        query: uri.query().unwrap_or_default().to_string(),
        content_type: content_type.clone(),
        accept: header_str(header::ACCEPT),
        body: body.clone(),
        seq: 0,
        received: std::time::Instant::now(),
        answered: None,
    };
    let (index, fault) = shared.admit(request);
    let response = match fault {
        Some(code) => error_response(&ApiError::injected(code)),
        None => {
            let call = Call {
                method,
                params: Query::<HashMap<String, String>>::try_from_uri(&uri)
                    .map(|q| q.0)
                    .unwrap_or_default(),
                content_type: content_type.unwrap_or_default(),
                body,
                aggregated_discovery: header_str(header::ACCEPT)
                    .is_some_and(|a| a.contains("as=APIGroupDiscoveryList")),
                accept: header_str(header::ACCEPT),
            };
            let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
            dispatch(&shared, &segments, &call).unwrap_or_else(|e| error_response(&e))
        }
    };
    tokio::time::sleep(delay - there).await;
    shared.answered(index);
    response
}

fn dispatch(shared: &Arc<Shared>, segments: &[&str], call: &Call) -> Result<Response, ApiError> {
    let types = || shared.lock().store.types().to_vec();
    let ok = |doc: Value| Ok(json_response(200, &doc));
    let aggregated = |core: bool| {
        let doc = discovery::aggregated(&types(), core);
        let headers = [(header::CONTENT_TYPE, discovery::AGGREGATED_CONTENT_TYPE)];
        Ok((StatusCode::OK, headers, doc.to_string()).into_response())
    };
    match segments {
        ["version"] => ok(discovery::version()),
        ["healthz" | "readyz" | "livez"] => Ok("ok".into_response()),
        ["api"] if call.aggregated_discovery => aggregated(true),
        ["api"] => ok(discovery::core_versions(&shared.addr.to_string())),
        ["apis"] if call.aggregated_discovery => aggregated(false),
        ["apis"] => ok(discovery::group_list(&types())),
        ["api", "v1"] => discovery::resource_list(&types(), "", "v1")
            .map_or_else(|| Err(ApiError::no_such_resource()), ok),
        ["apis", group] => {
            discovery::group(&types(), group).map_or_else(|| Err(ApiError::no_such_resource()), ok)
        }
        ["apis", group, version] => discovery::resource_list(&types(), group, version)
            .map_or_else(|| Err(ApiError::no_such_resource()), ok),
        ["openapi", "v3"] => ok(openapi::root(&types())),
        ["openapi", "v3", gv @ ..] => openapi::group_version(&types(), &gv.join("/"))
            .map_or_else(|| Err(ApiError::no_such_resource()), ok),
        ["api", version, rest @ ..] => resource(shared, "", version, rest, call),
        ["apis", group, version, rest @ ..] => resource(shared, group, version, rest, call),
        _ => Err(ApiError::no_such_resource()),
    }
}

/// Where a resource path points.
struct Target {
    rt: ResourceType,
    namespace: Option<String>,
    name: Option<String>,
    status: bool,
}

fn parse_target(
    shared: &Shared,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Result<Target, ApiError> {
    let st = shared.lock();
    let resolve = |plural: &str| st.store.resolve(group, version, plural);
    let (rt, namespace, tail) = match rest {
        ["namespaces", ns, plural, tail @ ..]
            if resolve(plural).is_some_and(|rt| rt.namespaced) =>
        {
            (resolve(plural), Some(ns.to_string()), tail)
        }
        [plural, tail @ ..] => (resolve(plural), None, tail),
        [] => (None, None, rest),
    };
    let rt = rt.ok_or_else(ApiError::no_such_resource)?;
    let (name, status) = match tail {
        [] => (None, false),
        [name] => (Some(name.to_string()), false),
        [name, "status"] if rt.has_status => (Some(name.to_string()), true),
        _ => return Err(ApiError::no_such_resource()),
    };
    if rt.namespaced && namespace.is_none() && name.is_some() {
        return Err(ApiError::no_such_resource());
    }
    Ok(Target {
        rt,
        namespace,
        name,
        status,
    })
}

fn resource(
    shared: &Arc<Shared>,
    group: &str,
    version: &str,
    rest: &[&str],
    call: &Call,
) -> Result<Response, ApiError> {
    let target = parse_target(shared, group, version, rest)?;
    let metadata = negotiate(call.accept.as_deref())?;
    let rt = &target.rt;
    let ns = target.namespace.as_deref();
    let Some(name) = target.name.as_deref() else {
        let (code, list) = match call.method {
            Method::GET if call.flag("watch") => {
                return start_watch(shared, &target, call, metadata);
            }
            Method::GET => list(shared, rt, ns, call)?,
            Method::POST if ns.is_some() || !rt.namespaced => {
                let (code, obj) = create(shared, rt, ns.unwrap_or_default(), call)?;
                return Ok(json_response(
                    code,
                    &transform(obj, metadata.as_ref(), false)?,
                ));
            }
            Method::DELETE => delete_collection(shared, rt, ns, call)?,
            _ => return Err(ApiError::method_not_allowed()),
        };
        return Ok(json_response(
            code,
            &transform(list, metadata.as_ref(), true)?,
        ));
    };
    let ns = ns.unwrap_or_default();
    let (code, obj) = match call.method {
        Method::GET => {
            let obj = shared.lock().store.get(rt, ns, name);
            (200, obj.ok_or_else(|| ApiError::not_found(rt, name))?)
        }
        Method::PUT => {
            let body = call.body()?;
            let opts = write_opts(call, &body, false);
            let obj =
                shared.mutate(|st| st.store.update(rt, ns, name, body, target.status, &opts))?;
            (200, obj)
        }
        Method::PATCH => patch(shared, &target, ns, name, call)?,
        Method::DELETE if !target.status => {
            let body = call.body()?;
            let dry_run = call.dry_run(&body);
            let obj = shared.mutate(|st| {
                st.store
                    .delete(rt, ns, name, &body["preconditions"], dry_run)
            })?;
            (200, obj)
        }
        _ => return Err(ApiError::method_not_allowed()),
    };
    Ok(json_response(
        code,
        &transform(obj, metadata.as_ref(), false)?,
    ))
}

/// What a client asked for with `Accept: application/json;as=…;g=meta.k8s.io;v=…`:
/// only the metadata of the object (`PartialObjectMetadata`) or of each
/// object of a list (`PartialObjectMetadataList`), in that group version.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Metadata {
    /// `PartialObjectMetadata` or `PartialObjectMetadataList`.
    kind: String,
    /// `meta.k8s.io/v1` or `meta.k8s.io/v1beta1`.
    api_version: String,
}

/// The Accept header's media ranges in order, as kube-apiserver negotiates
/// them (`handlers/negotiation`, `RequestScope.AllowsMediaTypeTransform`):
/// the first range without `as=` gets the object itself; the first asking
/// for `PartialObjectMetadata` or `PartialObjectMetadataList` in
/// `meta.k8s.io` `v1`/`v1beta1` gets the metadata only; a range naming any
/// other transform is passed over (`Table` too: this server renders no
/// tables, so a client asking for one falls back to its next range, as
/// kubectl always offers plain JSON after it); none left is 406.
fn negotiate(accept: Option<&str>) -> Result<Option<Metadata>, ApiError> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(None);
    };
    for range in accept.split(',') {
        let params: HashMap<&str, &str> = range
            .split(';')
            .skip(1)
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim(), v.trim()))
            .collect();
        let Some(kind) = params.get("as") else {
            return Ok(None);
        };
        let group = params.get("g").copied().unwrap_or_default();
        let version = params.get("v").copied().unwrap_or_default();
        if matches!(*kind, "PartialObjectMetadata" | "PartialObjectMetadataList")
            && group == "meta.k8s.io"
            && matches!(version, "v1" | "v1beta1")
        {
            return Ok(Some(Metadata {
                kind: kind.to_string(),
                api_version: format!("{group}/{version}"),
            }));
        }
    }
    Err(ApiError::not_acceptable(
        "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
    ))
}

/// `obj` as the negotiated transform has it (kube-apiserver's
/// `handlers/response.go`: `asPartialObjectMetadata`,
/// `asPartialObjectMetadataList`): every object's whole `metadata` under the
/// kind `PartialObjectMetadata`; a list keeps its own `metadata`
/// (resourceVersion, continue). A `Status` passes as it is; a list asked for
/// as one object, or an object asked for as a list, is 406.
pub(crate) fn transform(
    obj: Value,
    metadata: Option<&Metadata>,
    is_list: bool,
) -> Result<Value, ApiError> {
    let Some(metadata) = metadata else {
        return Ok(obj);
    };
    if obj["kind"] == "Status" {
        return Ok(obj);
    }
    let partial = |o: &Value| {
        json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": metadata.api_version,
            "metadata": o["metadata"].clone(),
        })
    };
    match (metadata.kind.as_str(), is_list) {
        ("PartialObjectMetadata", false) => Ok(partial(&obj)),
        ("PartialObjectMetadataList", true) => Ok(json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": metadata.api_version,
            "metadata": obj["metadata"].clone(),
            "items": obj["items"].as_array().map(|items| items.iter().map(partial).collect::<Vec<_>>()).unwrap_or_default(),
        })),
        ("PartialObjectMetadata", true) => Err(ApiError::not_acceptable(
            "you requested PartialObjectMetadata, but the requested object is a list",
        )),
        _ => Err(ApiError::not_acceptable(
            "you requested PartialObjectMetadataList, but the requested object is not a list",
        )),
    }
}

fn write_opts(call: &Call, body: &Value, apply: bool) -> WriteOpts {
    WriteOpts {
        dry_run: call.dry_run(body),
        manager: call.param("fieldManager").map(String::from),
        apply,
        keep_status: false,
    }
}

fn selector(call: &Call) -> Result<Selector, ApiError> {
    Selector::parse(call.param("labelSelector"), call.param("fieldSelector"))
        .map_err(ApiError::bad_request)
}

fn list(
    shared: &Shared,
    rt: &ResourceType,
    ns: Option<&str>,
    call: &Call,
) -> Result<(u16, Value), ApiError> {
    let selector = selector(call)?;
    let st = shared.lock();
    let items = st.store.list(rt, ns, &selector);
    let doc = json!({
        "kind": format!("{}List", rt.kind),
        "apiVersion": rt.api_version(),
        "metadata": { "resourceVersion": st.store.rv().to_string() },
        "items": items,
    });
    Ok((200, doc))
}

fn create(
    shared: &Arc<Shared>,
    rt: &ResourceType,
    ns: &str,
    call: &Call,
) -> Result<(u16, Value), ApiError> {
    let body = call.body()?;
    let opts = write_opts(call, &body, false);
    let obj = shared.mutate(|st| st.store.create(rt, ns, body, &opts))?;
    Ok((201, obj))
}

fn delete_collection(
    shared: &Arc<Shared>,
    rt: &ResourceType,
    ns: Option<&str>,
    call: &Call,
) -> Result<(u16, Value), ApiError> {
    let selector = selector(call)?;
    let body = call.body()?;
    let dry_run = call.dry_run(&body);
    let deleted = shared.mutate(|st| {
        let doomed = st.store.list(rt, ns, &selector);
        doomed
            .iter()
            .filter_map(|o| {
                let ns = o["metadata"]["namespace"].as_str().unwrap_or_default();
                let name = o["metadata"]["name"].as_str().unwrap_or_default();
                st.store.delete(rt, ns, name, &Value::Null, dry_run).ok()
            })
            .collect::<Vec<_>>()
    });
    let doc = json!({ "kind": format!("{}List", rt.kind), "apiVersion": rt.api_version(), "metadata": {}, "items": deleted });
    Ok((200, doc))
}

fn start_watch(
    shared: &Arc<Shared>,
    target: &Target,
    call: &Call,
    metadata: Option<Metadata>,
) -> Result<Response, ApiError> {
    // Each event's object is transformed as a GET's would be; a watch asked
    // for as a list is refused before it starts (the real server fails its
    // first event).
    if metadata
        .as_ref()
        .is_some_and(|m| m.kind != "PartialObjectMetadata")
    {
        return Err(ApiError::not_acceptable(
            "you requested PartialObjectMetadataList, but the requested object is not a list",
        ));
    }
    let since = match call.param("resourceVersion") {
        None | Some("0") => None,
        Some(rv) => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version {rv:?}")))?,
        ),
    };
    let timeout = call
        .param("timeoutSeconds")
        .and_then(|t| t.parse().ok())
        .map(Duration::from_secs);
    let params = WatchParams {
        since,
        timeout,
        bookmarks: call.flag("allowWatchBookmarks"),
        send_initial_events: call.flag("sendInitialEvents"),
        namespace: target.namespace.clone(),
        selector: selector(call)?,
        metadata,
    };
    Ok(watch::respond(shared.clone(), target.rt.clone(), params))
}

enum PatchKind {
    Apply,
    Merge,
    Json,
}

fn patch(
    shared: &Arc<Shared>,
    target: &Target,
    ns: &str,
    name: &str,
    call: &Call,
) -> Result<(u16, Value), ApiError> {
    let rt = &target.rt;
    let media_type = call
        .content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim();
    let kind = match media_type {
        "application/apply-patch+yaml" => PatchKind::Apply,
        "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
            PatchKind::Merge
        }
        "application/json-patch+json" => PatchKind::Json,
        other => {
            let accepted = "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";
            return Err(ApiError::unsupported_media_type(other, accepted));
        }
    };
    let body = call.body()?;
    let apply = matches!(kind, PatchKind::Apply);
    if apply && call.param("fieldManager").is_none() {
        return Err(ApiError::invalid(
            rt,
            name,
            "fieldManager: Required value: is required for apply patch",
        ));
    }
    let opts = write_opts(call, &Value::Null, apply);
    shared.mutate(|st| {
        let Some(existing) = st.store.get(rt, ns, name) else {
            if !apply || target.status {
                return Err(ApiError::not_found(rt, name));
            }
            // Server-side apply creates what does not exist yet.
            if body["metadata"]["name"].as_str().is_some_and(|n| n != name) {
                return Err(ApiError::bad_request(
                    "the name of the object does not match the name on the URL",
                ));
            }
            let mut obj = body;
            obj["metadata"]["name"] = json!(name);
            return st.store.create(rt, ns, obj, &opts).map(|o| (201, o));
        };
        let mut candidate = existing;
        match kind {
            PatchKind::Apply | PatchKind::Merge => merge_patch(&mut candidate, &body),
            PatchKind::Json => json_patch(&mut candidate, &body)
                .map_err(|why| ApiError::invalid(rt, name, &why))?,
        }
        st.store
            .update(rt, ns, name, candidate, target.status, &opts)
            .map(|o| (200, o))
    })
}
