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
    let request = Request {
        method: method.to_string(),
        path: uri.path().to_string(),
        query: uri.query().unwrap_or_default().to_string(),
        content_type: content_type.clone(),
        body: body.clone(),
    };
    if let Some(code) = shared.admit(request) {
        return error_response(&ApiError::injected(code));
    }
    let call = Call {
        method,
        params: Query::<HashMap<String, String>>::try_from_uri(&uri)
            .map(|q| q.0)
            .unwrap_or_default(),
        content_type: content_type.unwrap_or_default(),
        body,
        aggregated_discovery: header_str(header::ACCEPT)
            .is_some_and(|a| a.contains("as=APIGroupDiscoveryList")),
    };
    let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
    dispatch(&shared, &segments, &call).unwrap_or_else(|e| error_response(&e))
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
    let rt = &target.rt;
    let ns = target.namespace.as_deref();
    let Some(name) = target.name.as_deref() else {
        return match call.method {
            Method::GET if call.flag("watch") => Ok(start_watch(shared, &target, call)?),
            Method::GET => list(shared, rt, ns, call),
            Method::POST if ns.is_some() || !rt.namespaced => {
                create(shared, rt, ns.unwrap_or_default(), call)
            }
            Method::DELETE => delete_collection(shared, rt, ns, call),
            _ => Err(ApiError::method_not_allowed()),
        };
    };
    let ns = ns.unwrap_or_default();
    match call.method {
        Method::GET => {
            let obj = shared.lock().store.get(rt, ns, name);
            obj.map(|o| json_response(200, &o))
                .ok_or_else(|| ApiError::not_found(rt, name))
        }
        Method::PUT => {
            let body = call.body()?;
            let opts = write_opts(call, &body, false);
            let obj =
                shared.mutate(|st| st.store.update(rt, ns, name, body, target.status, &opts))?;
            Ok(json_response(200, &obj))
        }
        Method::PATCH => patch(shared, &target, ns, name, call),
        Method::DELETE if !target.status => {
            let body = call.body()?;
            let dry_run = call.dry_run(&body);
            let obj = shared.mutate(|st| {
                st.store
                    .delete(rt, ns, name, &body["preconditions"], dry_run)
            })?;
            Ok(json_response(200, &obj))
        }
        _ => Err(ApiError::method_not_allowed()),
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
) -> Result<Response, ApiError> {
    let selector = selector(call)?;
    let st = shared.lock();
    let items = st.store.list(rt, ns, &selector);
    let doc = json!({
        "kind": format!("{}List", rt.kind),
        "apiVersion": rt.api_version(),
        "metadata": { "resourceVersion": st.store.rv().to_string() },
        "items": items,
    });
    Ok(json_response(200, &doc))
}

fn create(
    shared: &Arc<Shared>,
    rt: &ResourceType,
    ns: &str,
    call: &Call,
) -> Result<Response, ApiError> {
    let body = call.body()?;
    let opts = write_opts(call, &body, false);
    let obj = shared.mutate(|st| st.store.create(rt, ns, body, &opts))?;
    Ok(json_response(201, &obj))
}

fn delete_collection(
    shared: &Arc<Shared>,
    rt: &ResourceType,
    ns: Option<&str>,
    call: &Call,
) -> Result<Response, ApiError> {
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
    Ok(json_response(200, &doc))
}

fn start_watch(shared: &Arc<Shared>, target: &Target, call: &Call) -> Result<Response, ApiError> {
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
) -> Result<Response, ApiError> {
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
            return st
                .store
                .create(rt, ns, obj, &opts)
                .map(|o| json_response(201, &o));
        };
        let mut candidate = existing;
        match kind {
            PatchKind::Apply | PatchKind::Merge => merge_patch(&mut candidate, &body),
            PatchKind::Json => json_patch(&mut candidate, &body)
                .map_err(|why| ApiError::invalid(rt, name, &why))?,
        }
        st.store
            .update(rt, ns, name, candidate, target.status, &opts)
            .map(|o| json_response(200, &o))
    })
}
