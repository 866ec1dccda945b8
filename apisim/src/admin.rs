//! The `/_sim/` admin endpoints: HTTP access to the fault switches, the request log and counters,
//! for kubectl-driven tests and manual experiments.
//!
//! Invariant: admin requests are never recorded, delayed or failed by faults, and every endpoint
//! either acts and answers 200 with a JSON summary, or answers a `Status` naming the bad parameter.
//!
//! | endpoint | effect |
//! |---|---|
//! | `POST /_sim/faults/drop-watches` | close every open watch |
//! | `POST /_sim/faults/compact` | compact history (old RVs get 410) |
//! | `POST /_sim/faults/fail?count=N&code=500` | fail the next N requests with 500 |
//! | `POST /_sim/faults/fail?count=N&code=429&retryAfter=S` | ... with 429 and Retry-After |
//! | `POST /_sim/faults/fail?count=N&code=C&method=M&path=P` | fail the next N requests with method M whose path contains P (any code 400-599) |
//! | `GET /_sim/faults` | how often each fault fired (`FaultStats`) and the failures still armed |
//! | `POST /_sim/faults/cut-watch` | cut the next watch event mid-line |
//! | `POST /_sim/faults/delay?ms=N` | delay every response (0 disables) |
//! | `POST /_sim/faults/expire-continue[?next=N]` | expire every continue token [and the next N] |
//! | `POST /_sim/faults/reset` | disarm all faults |
//! | `GET /_sim/requests`, `DELETE /_sim/requests` | read or clear the request log |
//! | `GET /_sim/stats` | resourceVersion, compaction point, open watches, fault counters, object counts |

use axum::response::Response;
use http::{header, HeaderValue, Method, StatusCode};
use serde_json::{json, Value};
use std::time::Duration;

use crate::faults::FailMode;
use crate::query::Query;
use crate::server::App;
use crate::status::ApiError;

fn ok(v: Value) -> Response {
    let mut r = Response::new(serde_json::to_vec(&v).expect("JSON serializes").into());
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn err(e: ApiError) -> Response {
    let mut r = Response::new(e.body().into());
    *r.status_mut() = StatusCode::from_u16(e.code).unwrap_or(StatusCode::BAD_REQUEST);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn num(q: &Query, key: &str, default: Option<u64>) -> Result<u64, ApiError> {
    match q.get(key) {
        Some(v) => v.parse().map_err(|_| {
            ApiError::bad_request(format!(
                "/_sim/: query parameter {key} must be a non-negative integer, got {v:?}"
            ))
        }),
        None => default.ok_or_else(|| {
            ApiError::bad_request(format!("/_sim/: query parameter {key} is required"))
        }),
    }
}

/// The fault counters plus the failures still armed.
fn fault_stats(f: &crate::faults::Faults) -> Value {
    let mut v = serde_json::to_value(f.stats()).expect("stats serialize");
    v["pendingFailures"] = f
        .pending_failures()
        .into_iter()
        .map(|(n, mode, m)| {
            json!({"remaining": n, "code": mode.code(), "method": m.method, "path": m.path_contains})
        })
        .collect();
    v
}

/// Serves one admin request; `path` is the part after `/_sim/`.
pub fn handle(app: &App, method: &Method, path: &str, q: &Query, _body: &[u8]) -> Response {
    match run(app, method, path, q) {
        Ok(v) => ok(v),
        Err(e) => err(e),
    }
}

fn run(app: &App, method: &Method, path: &str, q: &Query) -> Result<Value, ApiError> {
    let f = &app.faults;
    let post = |m: &Method| {
        if m == Method::POST {
            Ok(())
        } else {
            Err(ApiError::method_not_allowed(format!(
                "/_sim/{path} needs POST, got {m}"
            )))
        }
    };
    match path.trim_end_matches('/') {
        "faults/drop-watches" => {
            post(method)?;
            let n = f.open_watches();
            f.drop_watches();
            Ok(json!({"dropped": n}))
        }
        "faults/compact" => {
            post(method)?;
            f.compact();
            Ok(json!({"compactedTo": app.store.compacted_rv()}))
        }
        "faults/fail" => {
            post(method)?;
            let count = num(q, "count", Some(1))? as usize;
            let mode = match num(q, "code", Some(500))? {
                500 => FailMode::Internal,
                429 => FailMode::TooManyRequests {
                    retry_after_secs: num(q, "retryAfter", Some(1))?,
                },
                c @ 400..=599 => FailMode::Code(c as u16),
                other => {
                    return Err(ApiError::bad_request(format!(
                        "/_sim/faults/fail: code must be an HTTP error code (400-599), got {other}"
                    )))
                }
            };
            let matcher = crate::faults::RequestMatch {
                method: q
                    .get("method")
                    .filter(|m| !m.is_empty())
                    .map(str::to_string),
                path_contains: q.get("path").filter(|p| !p.is_empty()).map(str::to_string),
            };
            f.fail_matching(count, mode, matcher);
            Ok(json!({"armed": count}))
        }
        "faults/cut-watch" => {
            post(method)?;
            f.cut_next_watch_event();
            Ok(json!({"armed": 1}))
        }
        "faults/delay" => {
            post(method)?;
            let ms = num(q, "ms", None)?;
            f.set_delay((ms > 0).then(|| Duration::from_millis(ms)));
            Ok(json!({"delayMs": ms}))
        }
        "faults/expire-continue" => {
            post(method)?;
            f.expire_continue_tokens();
            if let Some(n) = q.get("next") {
                let n: usize = n.parse().map_err(|_| {
                    ApiError::bad_request(format!("/_sim/faults/expire-continue: next must be a non-negative integer, got {n:?}"))
                })?;
                f.expire_next_continue(n);
            }
            Ok(json!({"expired": true}))
        }
        "faults/reset" => {
            post(method)?;
            f.reset();
            Ok(json!({"reset": true}))
        }
        "requests" => match *method {
            Method::GET => Ok(Value::Array(
                app.log
                    .entries()
                    .into_iter()
                    .map(|r| {
                        json!({
                            "method": r.method,
                            "path": r.path,
                            "query": r.query,
                            "contentType": r.content_type,
                            "userAgent": r.user_agent,
                            "atMicros": r.at_micros,
                            "status": r.status,
                            "body": r.body,
                            "seq": r.seq,
                            "user": r.user,
                            "impersonatedUser": r.impersonated_user,
                            "target": {
                                "verb": r.target.verb,
                                "group": r.target.group,
                                "version": r.target.version,
                                "resource": r.target.resource,
                                "namespace": r.target.namespace,
                                "name": r.target.name,
                                "subresource": r.target.subresource,
                            },
                            "writtenResourceVersion": r.written_rv,
                        })
                    })
                    .collect(),
            )),
            Method::DELETE => {
                app.log.clear();
                Ok(json!({"cleared": true}))
            }
            _ => Err(ApiError::method_not_allowed(format!(
                "/_sim/requests needs GET or DELETE, got {method}"
            ))),
        },
        "faults" => match *method {
            Method::GET => Ok(fault_stats(f)),
            _ => Err(ApiError::method_not_allowed(format!(
                "/_sim/faults needs GET, got {method}"
            ))),
        },
        "stats" => {
            let mut objects = serde_json::Map::new();
            for (rid, rt) in app.store.registry().all() {
                objects.insert(rt.display_name(), json!(app.store.list_all(rid).len()));
            }
            Ok(json!({
                "resourceVersion": app.store.current_rv(),
                "compactedResourceVersion": app.store.compacted_rv(),
                "openWatches": f.open_watches(),
                "failedRequests": f.failed_requests(),
                "faults": fault_stats(f),
                "objects": objects,
            }))
        }
        other => Err(ApiError::no_route(&format!("/_sim/{other}"))),
    }
}
