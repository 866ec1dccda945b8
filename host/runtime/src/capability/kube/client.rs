//! One plugin's connection to the API server: the grant check, the token
//! bucket, the retry policy, the typed errors and the audit line of every
//! call.
//!
//! Invariant: see the capability's documentation (`kube/mod.rs`): nothing is
//! sent that the current grants do not allow, a call ends within its time,
//! and a dry run persists nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::Deserialize;

use super::{Grants, KubeSettings, MAX_RETRIES};
use crate::capability::api::{ApiRequest, ApiResponse, ClusterApi, Transport};
use crate::rate::TokenBucket;
use crate::status::PluginStatus;

/// One cause of an `invalid` answer (`details.causes` of the Status).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default)]
pub struct Cause {
    /// The field at fault, for example `spec.containers[0].image`.
    pub field: String,
    /// Machine-readable reason, for example `FieldValueRequired`.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

/// Why a call failed (mirrors the WIT `api-error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KubeError {
    /// The manifest does not grant the call, or the server's RBAC refused it.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// No such object.
    #[error("not found: {0}")]
    NotFound(String),
    /// A precondition (resourceVersion, uid) failed, or an apply conflict.
    #[error("conflict: {0}")]
    Conflict(String),
    /// A create of an object that exists.
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// The server refused the object or the patch.
    #[error("invalid: {message}")]
    Invalid {
        /// The server's message.
        message: String,
        /// The server's causes.
        causes: Vec<Cause>,
    },
    /// The plugin's rate limit, or the server's (429 after the retries).
    #[error("rate limited: {0}")]
    RateLimited(String),
    /// No answer within the call's time.
    #[error("timeout: {0}")]
    Timeout(String),
    /// The server failed (5xx) or could not be reached.
    #[error("unavailable: {0}")]
    Unavailable(String),
}

impl KubeError {
    /// The outcome's name in audit lines.
    pub fn outcome(&self) -> &'static str {
        match self {
            KubeError::Forbidden(_) => "forbidden",
            KubeError::NotFound(_) => "not-found",
            KubeError::Conflict(_) => "conflict",
            KubeError::AlreadyExists(_) => "already-exists",
            KubeError::Invalid { .. } => "invalid",
            KubeError::RateLimited(_) => "rate-limited",
            KubeError::Timeout(_) => "timeout",
            KubeError::Unavailable(_) => "unavailable",
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct StatusBody {
    kind: String,
    reason: String,
    message: String,
    details: Option<StatusDetails>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct StatusDetails {
    causes: Vec<Cause>,
}

/// Maps a non-2xx answer to its typed error, from the code and the Status.
fn classify(resp: &ApiResponse) -> KubeError {
    let status: StatusBody = serde_json::from_str(&resp.body).unwrap_or_default();
    let message = if status.message.is_empty() {
        format!("HTTP {}", resp.code)
    } else {
        status.message.clone()
    };
    match resp.code {
        401 | 403 => KubeError::Forbidden(message),
        404 | 410 => KubeError::NotFound(message),
        409 if status.reason == "AlreadyExists" => KubeError::AlreadyExists(message),
        409 => KubeError::Conflict(message),
        400 | 415 | 422 => KubeError::Invalid {
            message,
            causes: status.details.map(|d| d.causes).unwrap_or_default(),
        },
        429 => KubeError::RateLimited(message),
        408 | 504 => KubeError::Timeout(message),
        _ => KubeError::Unavailable(message),
    }
}

/// What is left of one event's time for API calls. The runtime makes one per
/// event and hands it to every call the event makes.
#[derive(Debug, Clone, Copy)]
pub struct ApiBudget {
    ends: Instant,
}

impl ApiBudget {
    /// A budget of `d` from now.
    pub fn new(d: Duration) -> Self {
        Self {
            ends: Instant::now() + d,
        }
    }

    /// When the budget is spent.
    pub fn ends(&self) -> Instant {
        self.ends
    }
}

/// A successful call: the object the server answered with, as JSON, or
/// `None` when it answered with a `Status` (a delete that completed at once).
pub type KubeResult = Result<Option<String>, KubeError>;

/// One plugin's connection to the API server: its grants, its token bucket
/// and the host's [`ClusterApi`]. Shared by every instance of the plugin, so
/// a restart does not refill the bucket.
pub struct KubeClient {
    plugin: Arc<str>,
    field_manager: String,
    grants: Grants,
    host_dry_run: bool,
    api: Arc<dyn ClusterApi>,
    bucket: Mutex<TokenBucket>,
    status: Arc<PluginStatus>,
}

impl std::fmt::Debug for KubeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClient")
            .field("plugin", &self.plugin)
            .field("settings", &self.grants.current())
            .finish()
    }
}

impl KubeClient {
    /// A client for `plugin`. `host_dry_run` (the host's `--dry-run`) makes
    /// every write a dry run whatever the manifest says.
    pub fn new(
        plugin: Arc<str>,
        grants: Grants,
        host_dry_run: bool,
        api: Arc<dyn ClusterApi>,
        status: Arc<PluginStatus>,
    ) -> Self {
        let s = grants.current();
        Self {
            field_manager: format!("wasm-informer/{plugin}"),
            plugin,
            bucket: Mutex::new(TokenBucket::new(s.write_qps, s.write_burst as f64)),
            grants,
            host_dry_run,
            api,
            status,
        }
    }

    /// The field manager of every write: `wasm-informer/PLUGIN`.
    pub fn field_manager(&self) -> &str {
        &self.field_manager
    }

    /// The plugin's current settings.
    pub fn settings(&self) -> Arc<KubeSettings> {
        self.grants.current()
    }

    /// Whether writes are dry runs now.
    pub fn dry_run(&self) -> bool {
        self.host_dry_run || self.grants.current().dry_run
    }

    /// Makes one call, if the grants allow it. `allowed` is the capability's
    /// own check (the `kube` grants, or `events = true` for Events).
    pub fn call_checked(
        &self,
        mut request: ApiRequest,
        budget: &ApiBudget,
        allowed: impl FnOnce(&KubeSettings, &ApiRequest) -> Result<(), String>,
    ) -> KubeResult {
        let started = Instant::now();
        let settings = self.grants.current();
        request.dry_run = request.verb.writes() && (self.host_dry_run || settings.dry_run);
        if request.verb.writes() {
            request.field_manager = Some(self.field_manager.clone());
        }
        if let Err(why) = allowed(&settings, &request) {
            self.status.api().record_denied();
            self.audit(&request, "forbidden", None, started);
            return Err(KubeError::Forbidden(why));
        }
        let deadline = (started + settings.write_timeout).min(budget.ends());
        let result = self.send(&request, deadline, started);
        let (outcome, code) = match &result {
            Ok((code, _)) => ("ok", Some(*code)),
            Err((e, code)) => (e.outcome(), *code),
        };
        self.status.api().record(
            request.verb.as_str(),
            code.map(|c| c.to_string()).as_deref().unwrap_or(outcome),
            request.dry_run,
            started.elapsed(),
        );
        self.audit(&request, outcome, code, started);
        result.map(|(_, body)| body).map_err(|(e, _)| e)
    }

    /// Makes one call under the `[[write]]` grants.
    pub fn call(&self, request: ApiRequest, budget: &ApiBudget) -> KubeResult {
        let plugin = self.plugin.clone();
        self.call_checked(request, budget, |s, r| match s.allowing(r) {
            Some(_) => Ok(()),
            None => Err(refusal(&plugin, r)),
        })
    }

    /// The token wait and the requests, with the retry policy.
    #[allow(clippy::type_complexity)]
    fn send(
        &self,
        request: &ApiRequest,
        deadline: Instant,
        started: Instant,
    ) -> Result<(u16, Option<String>), (KubeError, Option<u16>)> {
        let wait = self.bucket.lock().reserve(
            Instant::now(),
            deadline.saturating_duration_since(Instant::now()),
        );
        match wait {
            None => {
                let s = self.grants.current();
                return Err((
                    KubeError::RateLimited(format!(
                        "plugin {}: write_qps {} (burst {}) leaves no request before the call's deadline",
                        self.plugin, s.write_qps, s.write_burst
                    )),
                    None,
                ));
            }
            Some(w) if !w.is_zero() => std::thread::sleep(w),
            Some(_) => {}
        }
        let mut attempt = 0;
        loop {
            let resp = match self.api.call(request, deadline) {
                Ok(r) => r,
                Err(Transport::Timeout) => {
                    return Err((
                        KubeError::Timeout(format!(
                            "no answer from the API server within {} ms",
                            started.elapsed().as_millis()
                        )),
                        None,
                    ))
                }
                Err(Transport::Failed(m)) => return Err((KubeError::Unavailable(m), None)),
            };
            if (200..300).contains(&resp.code) {
                let body = (!is_status(&resp.body)).then_some(resp.body);
                return Ok((resp.code, body));
            }
            let retryable = resp.code == 429 || resp.code >= 500;
            if let (true, Some(after)) = (retryable, resp.retry_after) {
                if attempt < MAX_RETRIES && Instant::now() + after < deadline {
                    attempt += 1;
                    std::thread::sleep(after);
                    continue;
                }
            }
            return Err((classify(&resp), Some(resp.code)));
        }
    }

    fn audit(&self, r: &ApiRequest, outcome: &str, code: Option<u16>, started: Instant) {
        if !r.verb.writes() {
            return;
        }
        tracing::info!(
            target: "audit",
            plugin = %self.plugin,
            verb = r.verb.as_str(),
            patch = r.patch.map(|p| p.as_str()).unwrap_or(""),
            resource = %r.resource,
            subresource = r.subresource.as_deref().unwrap_or(""),
            key = %r.key(),
            dry_run = r.dry_run,
            outcome,
            code = code.unwrap_or(0),
            latency_ms = started.elapsed().as_secs_f64() * 1e3,
            "write"
        );
    }
}

/// Why a request is refused, in the words a plugin author needs.
fn refusal(plugin: &str, r: &ApiRequest) -> String {
    let what = match &r.subresource {
        Some(s) => format!("{} {}/{s}", r.verb.as_str(), r.resource),
        None => format!("{} {}", r.verb.as_str(), r.resource),
    };
    let ns = match &r.namespace {
        Some(ns) => format!(" in namespace {ns}"),
        None => String::new(),
    };
    format!("plugin {plugin} may not {what}{ns}: no [[write]] grant in its manifest allows it")
}

/// Whether a 2xx body is a `Status` rather than an object.
fn is_status(body: &str) -> bool {
    serde_json::from_str::<StatusBody>(body).is_ok_and(|s| s.kind == "Status")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_answers_map_to_typed_errors() {
        let resp = |code, reason: &str| ApiResponse {
            code,
            retry_after: None,
            body: format!(
                r#"{{"kind":"Status","status":"Failure","reason":"{reason}","message":"m","details":{{"causes":[{{"field":"spec.x","reason":"FieldValueRequired","message":"Required value"}}]}}}}"#
            ),
        };
        assert_eq!(
            classify(&resp(409, "AlreadyExists")).outcome(),
            "already-exists"
        );
        assert_eq!(classify(&resp(409, "Conflict")).outcome(), "conflict");
        assert_eq!(classify(&resp(404, "NotFound")).outcome(), "not-found");
        assert_eq!(classify(&resp(403, "Forbidden")).outcome(), "forbidden");
        assert_eq!(
            classify(&resp(429, "TooManyRequests")).outcome(),
            "rate-limited"
        );
        assert_eq!(
            classify(&resp(500, "InternalError")).outcome(),
            "unavailable"
        );
        assert_eq!(classify(&resp(504, "Timeout")).outcome(), "timeout");
        match classify(&resp(422, "Invalid")) {
            KubeError::Invalid { message, causes } => {
                assert_eq!(message, "m");
                assert_eq!(causes[0].field, "spec.x");
                assert_eq!(causes[0].reason, "FieldValueRequired");
            }
            other => panic!("{other:?}"),
        }
    }
}
