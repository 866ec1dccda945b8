//! HTTP front end: routes Kubernetes API paths to the store, streams watches, applies faults and
//! records requests.
//!
//! Invariant: every API response is either the JSON the apiserver would send (object, list,
//! discovery document, watch stream, the Success `Status` of a DELETE) or a Failure `Status` whose
//! `code` equals the HTTP status; faults and the request log see every API request and no `/_sim/`
//! admin request; query options (dry run, field manager, delete options) are decoded here and
//! carried out by the store.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::{BufMut, Bytes, BytesMut};
use http::{header, HeaderValue, Method, StatusCode};
use serde_json::{json, Value};
use std::sync::Arc;

use crate::discovery;
use crate::faults::Faults;
use crate::patch::{self, PatchType};
use crate::query::Query;
use crate::request_info::RequestInfo;
pub use crate::request_info::{parse_request_path, RequestTarget};
use crate::request_log::{RequestLog, RequestRecord};
use crate::resource::{ResourceId, ResourceType};
use crate::status::ApiError;
use crate::store::{
    DeleteOptions, ListPage, ListRequest, ListVersion, Propagation, Store, Subresource,
    WriteOptions,
};
use crate::watch::{Watch, WatchRequest, WatchStart};
use crate::SimConfig;

/// Shared state of the HTTP server.
#[derive(Debug, Clone)]
pub struct App {
    /// The storage.
    pub store: Arc<Store>,
    /// Fault switches.
    pub faults: Faults,
    /// Request log.
    pub log: RequestLog,
    /// Accepted bearer tokens.
    pub tokens: crate::authn::Tokens,
    /// Configuration.
    pub config: SimConfig,
    /// `host:port` the server listens on (for `/api`).
    pub address: String,
}

/// Builds the axum router serving the whole API.
pub fn router(app: App) -> axum::Router {
    axum::Router::new()
        .fallback(handle)
        .with_state(Arc::new(app))
        .layer(axum::extract::DefaultBodyLimit::max(64 << 20))
}

fn json_response(code: u16, body: impl Into<Body>) -> Response {
    let mut r = Response::new(body.into());
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn value_response(code: u16, v: &Value) -> Response {
    json_response(code, serde_json::to_vec(v).expect("JSON value serializes"))
}

fn error_response(e: &ApiError) -> Response {
    let mut r = json_response(e.code, e.body());
    // As the apiserver does: details.retryAfterSeconds becomes a Retry-After header.
    if let Some(secs) = e
        .details
        .as_ref()
        .and_then(|d| d["retryAfterSeconds"].as_u64())
    {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    r
}

async fn handle(State(app): State<Arc<App>>, req: Request) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let raw_query = req.uri().query().unwrap_or("").to_string();
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let user_agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let impersonation = crate::authz::Impersonation::from_headers(req.headers());
    let credentials = app.tokens.credentials(
        req.headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok()),
    );
    let request_uri = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let body = match axum::body::to_bytes(req.into_body(), 64 << 20).await {
        Ok(b) => b,
        Err(e) => {
            return error_response(&ApiError::bad_request(format!(
                "could not read the request body of {method} {path}: {e}"
            )))
        }
    };
    if let Some(admin) = path.strip_prefix("/_sim/") {
        return crate::admin::handle(&app, &method, admin, &Query::parse(&raw_query), &body);
    }
    let received = std::time::Instant::now();
    let at_micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    let logged_body = if method == Method::GET {
        String::new()
    } else {
        String::from_utf8_lossy(&body[..body.len().min(crate::request_log::MAX_BODY)]).into_owned()
    };
    let q = Query::parse(&raw_query);
    // As Go's net/http: the path is percent-decoded before anything routes on it; a path that
    // does not decode is answered `400 Bad Request` in plain text before any handler runs.
    let decoded = crate::request_info::decode_path(&path);
    let info = match &decoded {
        Ok(p) => RequestInfo::parse(method.as_str(), p, &q),
        Err(_) => RequestInfo::default(),
    };
    // With authentication on: the token's user, `system:anonymous`, or None (401).
    let authenticated = if app.config.authenticates() {
        crate::authn::authenticated(&credentials)
    } else {
        None
    };
    let seq = app.log.record(RequestRecord {
        method: method.to_string(),
        path: path.clone(),
        query: raw_query.clone(),
        content_type: content_type.clone(),
        user_agent: user_agent.clone(),
        at_micros,
        status: 0,
        body: logged_body,
        seq: 0,
        user: match (&authenticated, &credentials) {
            (Some(u), _) => u.name.clone(),
            (None, crate::authn::Credentials::User(u)) if !app.config.authenticates() => {
                u.name.clone()
            }
            _ => String::new(),
        },
        impersonated_user: impersonation.user.clone(),
        target: info.target(),
        written_rv: None,
    });
    let response = match decoded {
        Err(e) => {
            tracing::debug!(%method, %path, error = %e, "undecodable path");
            let mut r = Response::new(Body::from("400 Bad Request"));
            *r.status_mut() = StatusCode::BAD_REQUEST;
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            r
        }
        Ok(_) => {
            serve(
                &app,
                &Ctx {
                    method: &method,
                    info: &info,
                    path: &path,
                    q: &q,
                    content_type: &content_type,
                    user_agent: &user_agent,
                    table: crate::table::wants_table(&accept),
                    deadline: None,
                    received,
                    user: authenticated.as_ref(),
                    impersonation: &impersonation,
                    request_uri: &request_uri,
                },
                body,
            )
            .await
        }
    };
    let written_rv = response.extensions().get::<Written>().map(|w| w.0);
    app.log
        .set_outcome(seq, response.status().as_u16(), written_rv);
    response
}

/// Serves one API request (recorded already).
async fn serve(app: &Arc<App>, ctx: &Ctx<'_>, body: Bytes) -> Response {
    let (method, path) = (ctx.method, ctx.path);
    // Authentication, then impersonation, as the apiserver's filters run them.
    let impersonated;
    let mut ctx = Ctx { ..*ctx };
    if app.config.authenticates() {
        let Some(requestor) = ctx.user else {
            return error_response(&unauthorized());
        };
        if !ctx.impersonation.is_empty() {
            match crate::authz::impersonate(
                &app.store,
                app.config.rbac,
                requestor,
                ctx.impersonation,
                ctx.request_uri,
            ) {
                crate::authz::Impersonated::As(u) => impersonated = u,
                crate::authz::Impersonated::Refused(e) if e.code == 500 => {
                    return plain_response(500, &e.message)
                }
                crate::authz::Impersonated::Refused(e) => return error_response(&e),
            }
            ctx.user = Some(&impersonated);
        }
    }
    // The deadline of every request that is not long-running (watches are), as the
    // apiserver's WithRequestDeadline filter sets it; only writes act on it.
    if ctx.info.verb != "watch" {
        let max = app.config.request_timeout_max;
        match crate::deadline::request_deadline(ctx.q, ctx.received, max) {
            Ok(d) if is_write(&ctx.info.verb) => ctx.deadline = Some(d),
            Ok(_) => {}
            Err(e) => return error_response(&e),
        }
    }
    if let Some(d) = app.faults.delay() {
        app.faults.note_delayed();
        match ctx.deadline {
            // A write still held back at its deadline is answered 504 then, and never applied.
            Some(at) => {
                let held = tokio::time::sleep(d);
                if tokio::time::timeout_at(at.into(), held).await.is_err() {
                    return error_response(&crate::deadline::timeout_error());
                }
            }
            None => tokio::time::sleep(d).await,
        }
    }
    if let Err(e) = crate::deadline::check(ctx.deadline) {
        return error_response(&e);
    }
    let ctx = &ctx;
    if let Some(f) = app.faults.take_failure_for(method.as_str(), path) {
        tracing::debug!(%method, %path, ?f, "injected failure");
        return error_response(&f.error());
    }
    if app.config.rbac {
        if let Some(user) = ctx.user {
            let a = attributes(ctx.info, user);
            if let Err(reason) = crate::authz::authorize(&app.store, true, &a) {
                return error_response(&crate::authz::forbidden(&a, &reason));
            }
        }
    }
    match route(app, ctx, body).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(%method, %path, code = e.code, message = %e.message, "request failed");
            error_response(&e)
        }
    }
}

/// A resource URL resolved against the registry.
struct Target {
    rid: ResourceId,
    rt: Arc<ResourceType>,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

/// Resolves what `info` addresses to a served resource, as the apiserver's routes do: 404 for
/// a resource this server does not serve, for a namespaced resource addressed by name outside
/// `namespaces/{namespace}/`, for a cluster-scoped one inside it, and for more path parts than
/// resource, name and subresource.
fn resolve(store: &Store, info: &RequestInfo) -> Result<Target, ApiError> {
    if !info.resource_request || info.verb_via_path && info.verb != "watch" {
        return Err(ApiError::no_route(&info.path));
    }
    let rid = store.resource(&info.group, &info.version, &info.resource)?;
    let rt = store.registry().get(rid);
    if info.parts.len() > 3 {
        return Err(ApiError::no_route(&info.path));
    }
    let in_path = info.name_in_path();
    if in_path {
        if info.name.is_empty() {
            return Err(ApiError::no_route(&info.path));
        }
        // As the registry's key functions (`NamespaceKeyFunc`, `NoNamespaceKeyFunc`) refuse it.
        let why = crate::path_segment::is_valid_name(&info.name);
        if !why.is_empty() {
            return Err(ApiError::bad_request(format!(
                "Name parameter invalid: {}: {}",
                crate::go_fmt::quote(&info.name),
                why.join(";")
            )));
        }
    }
    let name = in_path.then(|| info.name.clone());
    let sub = (info.parts.len() == 3).then(|| info.subresource.clone());
    let is_namespace_kind = rt.group.is_empty() && rt.plural == "namespaces";
    let namespace = if is_namespace_kind || !rt.namespaced {
        if info.namespace_segment {
            return Err(ApiError::no_route(&info.path));
        }
        None
    } else {
        if in_path && !info.namespace_segment {
            return Err(ApiError::no_route(&info.path));
        }
        if in_path && info.namespace.is_empty() {
            return Err(ApiError::bad_request("Namespace parameter required."));
        }
        // `namespaces//pods` lists every namespace, as the apiserver does with an empty
        // namespace parameter.
        Some(info.namespace.clone())
            .filter(|n| info.namespace_segment && (in_path || !n.is_empty()))
    };
    Ok(Target {
        rid,
        rt,
        namespace,
        name,
        sub,
    })
}

/// What a handler needs to know about the request besides its body.
struct Ctx<'a> {
    method: &'a Method,
    info: &'a RequestInfo,
    path: &'a str,
    q: &'a Query,
    content_type: &'a str,
    user_agent: &'a str,
    table: bool,
    /// When a write must be done by (`?timeout=`, capped by `SimConfig::request_timeout_max`);
    /// None for reads and watches.
    deadline: Option<std::time::Instant>,
    /// When the request arrived.
    received: std::time::Instant,
    /// The user the request acts as (after impersonation); None when authentication is off.
    user: Option<&'a crate::authn::UserInfo>,
    /// The impersonation headers.
    impersonation: &'a crate::authz::Impersonation,
    /// The request URI as sent (for the impersonation filter's internal error).
    request_uri: &'a str,
}

/// The authorizer's view of a request acting as `user`.
fn attributes(info: &RequestInfo, user: &crate::authn::UserInfo) -> crate::rbac::Attributes {
    crate::rbac::Attributes {
        user: user.clone(),
        verb: info.verb.clone(),
        resource_request: info.resource_request,
        group: info.group.clone(),
        version: info.version.clone(),
        resource: info.resource.clone(),
        subresource: info.subresource.clone(),
        namespace: info.namespace.clone(),
        name: info.name.clone(),
        path: info.path.clone(),
    }
}

/// The 401 of a request whose credentials do not authenticate (`NewUnauthorized("Unauthorized")`).
fn unauthorized() -> ApiError {
    ApiError {
        code: 401,
        reason: "Unauthorized".into(),
        message: "Unauthorized".into(),
        details: None,
        continue_token: None,
    }
}

/// A plain-text answer, as net/http's `http.Error` writes one.
fn plain_response(code: u16, text: &str) -> Response {
    let mut r = Response::new(Body::from(format!("{text}\n")));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Whether a request verb writes.
fn is_write(verb: &str) -> bool {
    matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
}

impl Ctx<'_> {
    /// The field manager of a non-apply write: `fieldManager`, else the User-Agent up to its
    /// first `/`, as the apiserver derives it; None when neither is there.
    fn manager(&self) -> Option<String> {
        match self.q.get("fieldManager").filter(|m| !m.is_empty()) {
            Some(m) => Some(m.to_string()),
            None => {
                let ua = self.user_agent.split('/').next().unwrap_or("").trim();
                (!ua.is_empty()).then(|| ua.chars().take(128).collect())
            }
        }
    }

    /// Options of a create, update or non-apply patch.
    fn write_options(&self) -> Result<WriteOptions, ApiError> {
        Ok(WriteOptions {
            dry_run: self.q.dry_run()?,
            field_manager: self.manager(),
            deadline: self.deadline,
        })
    }

    /// Options of a DELETE: the DeleteOptions body, overridden by query parameters.
    fn delete_options(&self, body: &[u8]) -> Result<DeleteOptions, ApiError> {
        let opts: Value = if body.iter().all(u8::is_ascii_whitespace) {
            json!({})
        } else {
            serde_json::from_slice(body).map_err(|e| {
                ApiError::bad_request(format!("the DeleteOptions body is not valid JSON: {e}"))
            })?
        };
        let mut d = DeleteOptions {
            dry_run: self.q.dry_run()?
                || opts["dryRun"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|x| x == "All")),
            precondition_uid: opts["preconditions"]["uid"].as_str().map(str::to_string),
            precondition_rv: opts["preconditions"]["resourceVersion"]
                .as_str()
                .filter(|r| !r.is_empty())
                .map(str::to_string),
            propagation: Propagation::Background,
            deadline: self.deadline,
        };
        // The deprecated orphanDependents, then propagationPolicy (which wins).
        let orphan = self
            .q
            .opt_flag("orphanDependents")
            .or(opts["orphanDependents"].as_bool());
        if orphan == Some(true) {
            d.propagation = Propagation::Orphan;
        }
        let policy = self
            .q
            .get("propagationPolicy")
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .or(opts["propagationPolicy"].as_str().map(str::to_string));
        if let Some(p) = policy {
            d.propagation = Propagation::parse(&p)?;
        }
        Ok(d)
    }
}

async fn route(app: &App, ctx: &Ctx<'_>, body: Bytes) -> Result<Response, ApiError> {
    let (method, path, q, content_type, table) =
        (ctx.method, ctx.path, ctx.q, ctx.content_type, ctx.table);
    let segs: Vec<&str> = ctx
        .info
        .path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let registry = app.store.registry();
    let get_only = |v: Option<Value>| -> Result<Response, ApiError> {
        if method != Method::GET {
            return Err(ApiError::method_not_allowed(format!(
                "{method} is not supported on {path}"
            )));
        }
        v.map(|v| value_response(200, &v))
            .ok_or_else(|| ApiError::no_route(path))
    };
    match segs.as_slice() {
        ["version"] => return get_only(Some(discovery::version())),
        ["healthz"] | ["readyz"] | ["livez"] => {
            return Ok(Response::new(Body::from("ok")));
        }
        ["api"] => return get_only(Some(discovery::core_versions(&app.address))),
        ["apis"] => return get_only(Some(discovery::group_list(registry))),
        ["api", v] => return get_only(discovery::resource_list(registry, "", v)),
        ["apis", g] => return get_only(discovery::group(registry, g)),
        ["apis", g, v] => return get_only(discovery::resource_list(registry, g, v)),
        ["openapi", "v3"] => {
            return get_only(Some(discovery::openapi_root(
                registry,
                app.config.sharded_list_and_watch,
            )))
        }
        ["openapi", "v3", rest @ ..] => {
            return get_only(discovery::openapi_group_version(
                registry,
                &rest.join("/"),
                app.config.sharded_list_and_watch,
            ))
        }
        _ => {}
    }
    // kubectl's typed clientset sends protobuf for a few kinds; decode those to JSON.
    let body = if matches!(*method, Method::POST | Method::PUT) && content_type.contains("protobuf")
    {
        Bytes::from(serde_json::to_vec(&crate::protobuf::decode(&body)?).expect("JSON serializes"))
    } else {
        body
    };
    // Legacy watch paths: `/api/v1/watch/...` and `/apis/G/V/watch/...` watch what the path
    // without `watch` names; a trailing object name becomes a `metadata.name` field selector.
    if ctx.info.resource_request
        && ctx.info.group == crate::access_review::GROUP
        && ctx.info.version == "v1"
    {
        return access_review(app, ctx, &body);
    }
    let mut t = resolve(&app.store, ctx.info)?;
    if ctx.info.verb_via_path {
        if method != Method::GET || t.sub.is_some() {
            return Err(ApiError::method_not_allowed(format!(
                "{method} is not supported on {path}"
            )));
        }
        let q = legacy_watch_query(q, t.name.take())?;
        return watch(app, &t, &q, table).await;
    }
    let ns = t.namespace.clone();
    // Writes committed by this request get resourceVersions above this one; a dry run or a
    // no-op answers an object at or below it.
    let rv0 = app.store.current_rv();
    let applied = |r: Response, rv: u64| written(r, rv, rv0);
    match (method.clone(), &t.name, t.sub.as_deref()) {
        (Method::GET, None, None) => {
            if q.flag("watch") {
                watch(app, &t, q, table).await
            } else {
                let req = q.list_request(ns.as_deref(), app.config.sharded_list_and_watch)?;
                if let Some(tok) = &req.continue_token {
                    if app.faults.take_continue_expiry() {
                        app.faults.note_continue_expiry();
                        return Err(ApiError::expired_continue(tok));
                    }
                } else if let ListVersion::NotOlderThan(x) | ListVersion::Exact(x) = req.version {
                    // As the watch cache does: wait a little for a newer resourceVersion to arrive.
                    wait_fresh(app, x).await;
                }
                let page = match app.store.list(t.rid, &req) {
                    Err(e) if e.code == 410 && req.continue_token.is_some() => {
                        app.faults.note_continue_expiry();
                        return Err(e);
                    }
                    r => r?,
                };
                if table {
                    let objs: Vec<Value> = page.items.iter().map(|o| o.value()).collect();
                    let mut meta = json!({"resourceVersion": page.rv.to_string()});
                    if let Some(c) = &page.continue_token {
                        meta["continue"] = json!(c);
                    }
                    if let Some(r) = page.remaining {
                        meta["remainingItemCount"] = json!(r);
                    }
                    return Ok(value_response(
                        200,
                        &crate::table::table(&t.rt, &objs, meta),
                    ));
                }
                Ok(json_response(200, list_body(&t.rt, &page)))
            }
        }
        (Method::POST, None, None) => {
            let obj = parse_json(&body, "create", &t.rt)?;
            check_new_name(&t.rt, &obj)?;
            let opts = ctx.write_options()?;
            let o = app.store.create_with(t.rid, ns.as_deref(), obj, &opts)?;
            if !opts.dry_run {
                app.store.collect_if_orphaned(t.rid, &o);
            }
            Ok(applied(json_response(201, o.json.clone()), o.rv))
        }
        (Method::DELETE, None, None) => {
            let req = q.list_request(ns.as_deref(), app.config.sharded_list_and_watch)?;
            let req_shard = req.shard.as_ref().map(ToString::to_string);
            let page = app.store.list(
                t.rid,
                &ListRequest {
                    limit: None,
                    continue_token: None,
                    ..req
                },
            )?;
            // All or nothing with respect to the deadline: checked once, before the first item.
            crate::deadline::check(ctx.deadline)?;
            let opts = DeleteOptions {
                deadline: None,
                ..ctx.delete_options(&body)?
            };
            let mut deleted = Vec::new();
            for o in page.items {
                if let Ok(d) = app.store.delete_with(t.rid, &o.namespace, &o.name, &opts) {
                    deleted.push(d);
                }
            }
            let last = deleted.iter().map(|d| d.rv).max().unwrap_or(0);
            let page = ListPage {
                rv: app.store.current_rv(),
                items: deleted,
                continue_token: None,
                remaining: None,
                shard_info: req_shard,
            };
            Ok(applied(json_response(200, list_body(&t.rt, &page)), last))
        }
        (m, Some(name), sub) => {
            if sub == Some("scale") && crate::scale::has_scale(&t.rt) {
                let ns = ns.unwrap_or_default();
                let v = match m {
                    Method::GET => crate::scale::get(&app.store, t.rid, &ns, name)?,
                    Method::PUT => {
                        let body = parse_json(&body, "update", &t.rt)?;
                        let opts = ctx.write_options()?;
                        crate::scale::put_with(&app.store, t.rid, &ns, name, &body, &opts)?
                    }
                    Method::PATCH => {
                        let pt = PatchType::from_content_type(content_type)?;
                        let p = patch::parse_body(pt, &body)?;
                        let opts = ctx.write_options()?;
                        crate::scale::patch_with(&app.store, t.rid, &ns, name, pt, &p, &opts)?
                    }
                    _ => {
                        return Err(ApiError::method_not_allowed(format!(
                            "{method} is not supported on {path}"
                        )))
                    }
                };
                let rv = v["metadata"]["resourceVersion"]
                    .as_str()
                    .and_then(|r| r.parse().ok())
                    .unwrap_or(0);
                return Ok(applied(value_response(200, &v), rv));
            }
            let sub = match sub {
                None => Subresource::Main,
                Some("status") if t.rt.status_subresource => Subresource::Status,
                Some(other) => {
                    return Err(ApiError::no_route(&format!(
                        "{path} (subresource {other:?} is not served for {})",
                        t.rt.qualified_plural()
                    )))
                }
            };
            let ns = ns.unwrap_or_default();
            match m {
                Method::GET => {
                    let o = app.store.get(t.rid, &ns, name)?;
                    if table && sub == Subresource::Main {
                        let meta = json!({"resourceVersion": o.rv.to_string()});
                        return Ok(value_response(
                            200,
                            &crate::table::table(&t.rt, &[o.value()], meta),
                        ));
                    }
                    Ok(json_response(200, o.json.clone()))
                }
                Method::PUT => {
                    let obj = parse_json(&body, "update", &t.rt)?;
                    let o =
                        app.store
                            .update_opts(t.rid, &ns, name, sub, obj, &ctx.write_options()?)?;
                    Ok(applied(json_response(200, o.json.clone()), o.rv))
                }
                Method::PATCH => {
                    let (r, rv) = patch_object(app, ctx, &t, &ns, name, sub, &body)?;
                    Ok(applied(r, rv))
                }
                Method::DELETE if sub == Subresource::Main => {
                    let opts = ctx.delete_options(&body)?;
                    let o = app.store.delete_with(t.rid, &ns, name, &opts)?;
                    Ok(applied(delete_response(&t.rt, &o), o.rv))
                }
                _ => Err(ApiError::method_not_allowed(format!(
                    "{method} is not supported on {path}"
                ))),
            }
        }
        _ => Err(ApiError::method_not_allowed(format!(
            "{method} is not supported on {path}"
        ))),
    }
}

/// The resourceVersion of the write a response answers, carried to the request log.
#[derive(Debug, Clone, Copy)]
struct Written(u64);

/// Marks `r` as answering a write applied at `rv`, when `rv` is newer than `rv0` (the store's
/// resourceVersion before the request acted): a dry run or a no-op answers an older one.
fn written(mut r: Response, rv: u64, rv0: u64) -> Response {
    if rv > rv0 {
        r.extensions_mut().insert(Written(rv));
    }
    r
}

/// The answer to a DELETE: the object while its deletion is pending (finalizers) or when the
/// kind returns deleted objects, otherwise a `Status` with `status: Success` naming it.
fn delete_response(rt: &ResourceType, o: &crate::object::StoredObject) -> Response {
    let v = o.value();
    let pending = v["metadata"]["deletionTimestamp"].is_string()
        && v["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
    if pending || rt.returns_deleted_object {
        return json_response(200, o.json.clone());
    }
    let mut details = serde_json::Map::new();
    details.insert("name".into(), json!(o.name));
    if !rt.group.is_empty() {
        details.insert("group".into(), json!(rt.group));
    }
    details.insert("kind".into(), json!(rt.plural));
    details.insert("uid".into(), json!(o.uid));
    value_response(
        200,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}),
    )
}

/// Refuses a new object whose name (or `generateName`) cannot be one path segment, as the
/// apiserver's object-meta validation does with `path.ValidatePathSegmentName` (422; kinds whose
/// own name rule is stricter refuse these names too, with that rule's message).
fn check_new_name(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    let meta = &obj["metadata"];
    let name = meta["name"].as_str().unwrap_or("");
    let mut errs = Vec::new();
    if !name.is_empty() {
        for why in crate::path_segment::is_valid_name(name) {
            errs.push(("metadata.name", name.to_string(), why));
        }
    } else if let Some(prefix) = meta["generateName"].as_str() {
        for why in crate::path_segment::is_valid_prefix(prefix) {
            errs.push(("metadata.generateName", prefix.to_string(), why));
        }
    }
    if errs.is_empty() {
        return Ok(());
    }
    let q = crate::go_fmt::quote;
    let fields: Vec<String> = errs
        .iter()
        .map(|(f, v, why)| format!("{f}: Invalid value: {}: {why}", q(v)))
        .collect();
    let agg = if fields.len() == 1 {
        fields[0].clone()
    } else {
        format!("[{}]", fields.join(", "))
    };
    let kind = if rt.group.is_empty() {
        rt.kind.clone()
    } else {
        format!("{}.{}", rt.kind, rt.group)
    };
    let mut e = ApiError::invalid("", name, format!("{kind} {} is invalid: {agg}", q(name)));
    let causes: Vec<Value> = errs
        .iter()
        .map(|(f, v, why)| json!({"reason": "FieldValueInvalid", "message": format!("Invalid value: {}: {why}", q(v)), "field": f}))
        .collect();
    let mut details = json!({"name": name, "kind": rt.kind, "causes": causes});
    if !rt.group.is_empty() {
        details["group"] = json!(rt.group);
    }
    e.details = Some(details);
    Err(e)
}

fn parse_json(body: &[u8], verb: &str, rt: &ResourceType) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request(format!(
            "the {verb} request for {} has an empty body",
            rt.qualified_plural()
        )));
    }
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the {verb} request body for {} is not valid JSON: {e}",
            rt.qualified_plural()
        ))
    })
}

fn patch_object(
    app: &App,
    ctx: &Ctx<'_>,
    t: &Target,
    ns: &str,
    name: &str,
    sub: Subresource,
    body: &[u8],
) -> Result<(Response, u64), ApiError> {
    let pt = PatchType::from_content_type(ctx.content_type)?;
    let p = patch::parse_body(pt, body)?;
    let force = ctx.q.opt_flag("force");
    if pt != PatchType::Apply {
        if force.is_some() {
            return Err(ApiError::invalid(
                "",
                "",
                "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch",
            ));
        }
        let o = app
            .store
            .update_with_opts(t.rid, ns, name, sub, &ctx.write_options()?, |cur| {
                patch::apply(pt, cur, &p)
            })?;
        return Ok((json_response(200, o.json.clone()), o.rv));
    }
    // Server-side apply: the manager must be named; ownership is computed under the store lock.
    let Some(manager) = ctx.q.get("fieldManager").filter(|m| !m.is_empty()) else {
        return Err(ApiError::invalid(
            "",
            "",
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        ));
    };
    let force = force.unwrap_or(false);
    let opts = WriteOptions {
        dry_run: ctx.q.dry_run()?,
        field_manager: None,
        deadline: ctx.deadline,
    };
    let now = crate::store::now_timestamp();
    let res = app
        .store
        .update_with_opts(t.rid, ns, name, sub, &opts, |cur| {
            crate::managed::apply(&t.rt, sub, Some(&cur), &p, manager, force, &now)
        });
    match res {
        Ok(o) => Ok((json_response(200, o.json.clone()), o.rv)),
        Err(e) if e.code == 404 && sub == Subresource::Main => {
            let mut obj = crate::managed::apply(&t.rt, sub, None, &p, manager, force, &now)?;
            if !obj.get("metadata").is_some_and(|m| m.is_object()) {
                obj["metadata"] = json!({});
            }
            obj["metadata"]["name"] = json!(name);
            check_new_name(&t.rt, &obj)?;
            // The patch handler authorizes the create an apply makes (`withAuthorization`).
            if let (true, Some(user)) = (app.config.rbac, ctx.user) {
                let a = crate::rbac::Attributes {
                    verb: "create".into(),
                    ..attributes(ctx.info, user)
                };
                if let Err(reason) = crate::authz::authorize(&app.store, true, &a) {
                    return Err(crate::authz::forbidden(&a, &reason));
                }
            }
            let nsopt = if t.rt.namespaced { Some(ns) } else { None };
            let o = app.store.create_with(t.rid, nsopt, obj, &opts)?;
            if !opts.dry_run {
                app.store.collect_if_orphaned(t.rid, &o);
            }
            Ok((json_response(201, o.json.clone()), o.rv))
        }
        Err(e) => Err(e),
    }
}

/// `authorization.k8s.io/v1`: SelfSubjectAccessReview and SelfSubjectRulesReview (create only).
fn access_review(app: &App, ctx: &Ctx<'_>, body: &[u8]) -> Result<Response, ApiError> {
    let info = ctx.info;
    let kind = match info.resource.as_str() {
        "selfsubjectaccessreviews" => "SelfSubjectAccessReview",
        "selfsubjectrulesreviews" => "SelfSubjectRulesReview",
        _ => return Err(ApiError::no_route(&info.path)),
    };
    if info.parts.len() != 1 || !info.namespace.is_empty() {
        return Err(ApiError::no_route(&info.path));
    }
    if *ctx.method != Method::POST {
        return Err(ApiError::method_not_allowed(format!(
            "{} is not supported on {}",
            ctx.method, ctx.path
        )));
    }
    let review: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the {kind} body is not valid JSON: {e}")))?;
    let anonymous = crate::authn::UserInfo::anonymous();
    let user = ctx.user.unwrap_or(&anonymous);
    let v = if kind == "SelfSubjectAccessReview" {
        crate::access_review::self_subject_access_review(&app.store, app.config.rbac, user, review)?
    } else {
        crate::access_review::self_subject_rules_review(&app.store, user, review)?
    };
    Ok(value_response(201, &v))
}

/// Serializes a list page without re-parsing the stored objects.
pub fn list_body(rt: &ResourceType, page: &ListPage) -> Bytes {
    let total: usize = page.items.iter().map(|o| o.json.len() + 1).sum();
    let mut b = BytesMut::with_capacity(total + 256);
    b.put_slice(b"{\"kind\":\"");
    b.put_slice(rt.list_kind().as_bytes());
    b.put_slice(b"\",\"apiVersion\":\"");
    b.put_slice(rt.api_version().as_bytes());
    b.put_slice(b"\",\"metadata\":{\"resourceVersion\":\"");
    b.put_slice(page.rv.to_string().as_bytes());
    b.put_slice(b"\"");
    if let Some(c) = &page.continue_token {
        b.put_slice(b",\"continue\":\"");
        b.put_slice(c.as_bytes());
        b.put_slice(b"\"");
    }
    if let Some(r) = page.remaining {
        b.put_slice(b",\"remainingItemCount\":");
        b.put_slice(r.to_string().as_bytes());
    }
    if let Some(s) = &page.shard_info {
        b.put_slice(b",\"shardInfo\":{\"selector\":");
        b.put_slice(&serde_json::to_vec(s).expect("a string serializes"));
        b.put_slice(b"}");
    }
    b.put_slice(b"},\"items\":[");
    for (i, o) in page.items.iter().enumerate() {
        if i > 0 {
            b.put_u8(b',');
        }
        b.put_slice(&o.json);
    }
    b.put_slice(b"]}");
    b.freeze()
}

/// The query of a legacy watch path: `watch=true`, and the name from the path as a
/// `metadata.name` field selector (a selector already given must name the same object, as the
/// apiserver requires).
fn legacy_watch_query(q: &Query, name: Option<String>) -> Result<Query, ApiError> {
    let mut q = q.clone();
    q.pairs.retain(|(k, _)| k != "watch");
    q.pairs.push(("watch".into(), "true".into()));
    if let Some(name) = name {
        let given = q.field_selector()?;
        if given.is_empty() {
            q.pairs.retain(|(k, _)| k != "fieldSelector");
            q.pairs
                .push(("fieldSelector".into(), format!("metadata.name={name}")));
        } else {
            let names = given
                .requirements
                .iter()
                .any(|r| r.field == "metadata.name" && !r.negated && r.value == name);
            if !names {
                return Err(ApiError::bad_request(
                    "fieldSelector metadata.name doesn't match requested name",
                ));
            }
        }
    }
    Ok(q)
}

/// Waits (at most `SimConfig::too_large_rv_wait`) until the store reaches `rv`, as the apiserver's
/// watch cache does before answering "Too large resource version". True when it did.
async fn wait_fresh(app: &App, rv: u64) -> bool {
    let mut rx = app.store.subscribe();
    let deadline = tokio::time::Instant::now() + app.config.too_large_rv_wait;
    loop {
        if app.store.current_rv() >= rv {
            return true;
        }
        match tokio::time::timeout_at(deadline, rx.changed()).await {
            Ok(Ok(())) => continue,
            _ => return app.store.current_rv() >= rv,
        }
    }
}

async fn watch(app: &App, t: &Target, q: &Query, table: bool) -> Result<Response, ApiError> {
    let rv = q.resource_version()?;
    let shard = q.shard_selector(app.config.sharded_list_and_watch)?;
    let send_initial = q.opt_flag("sendInitialEvents");
    let rv_match = q.get("resourceVersionMatch").unwrap_or("");
    let bookmarks = q.flag("allowWatchBookmarks");
    if send_initial.is_some() {
        if rv_match != "NotOlderThan" {
            return Err(ApiError::invalid(
                &t.rt.qualified_plural(),
                "",
                "resourceVersionMatch: Unsupported value: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if send_initial == Some(true) && !bookmarks {
            return Err(ApiError::invalid(
                &t.rt.qualified_plural(),
                "",
                "allowWatchBookmarks: Required value: sendInitialEvents requires setting allowWatchBookmarks to true",
            ));
        }
    } else if !rv_match.is_empty() {
        return Err(ApiError::bad_request(
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ));
    }
    if let Some(x) = rv.filter(|x| *x > app.store.current_rv()) {
        // The watch cache waits for the store to catch up, then answers HTTP 200 with one
        // ERROR event carrying the 504 "Too large resource version" Status, and closes.
        if !wait_fresh(app, x).await {
            let e = ApiError::too_large_rv(x, app.store.current_rv());
            let w = Watch::failed(app.store.clone(), app.faults.clone(), t.rid, e);
            return Ok(watch_response(w));
        }
    }
    let start = match (send_initial, rv) {
        (Some(true), _) => WatchStart::CurrentState,
        (Some(false), None) | (Some(false), Some(0)) => WatchStart::Now,
        (Some(false), Some(x)) | (None, Some(x)) if x != 0 => WatchStart::After(x),
        _ => WatchStart::CurrentState,
    };
    let timeout = q.timeout()?.unwrap_or(app.config.default_watch_timeout);
    let req = WatchRequest {
        resource: t.rid,
        namespace: t.namespace.clone(),
        labels: q.label_selector()?,
        fields: q.field_selector()?,
        shard,
        start,
        initial_events_end: send_initial == Some(true),
        bookmarks,
        timeout,
        table,
    };
    let w = Watch::open(
        app.store.clone(),
        app.faults.clone(),
        req,
        app.config.bookmark_interval,
    )?;
    Ok(watch_response(w))
}

fn watch_response(w: Watch) -> Response {
    let mut r = json_response(200, Body::from_stream(w.into_stream()));
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    r
}
