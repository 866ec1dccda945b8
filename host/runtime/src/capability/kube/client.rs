//! One plugin's connection to the API server: the grant check, the quota,
//! the retry policy, the typed errors and the audit line of every call.
//!
//! Invariant: see the capability's documentation (`kube/mod.rs`): nothing is
//! sent that is malformed or that the current grants do not allow, no plugin
//! writes the host's own Leases, a call ends within its time, a dry run
//! persists nothing, and the audit line says what was sent.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;

use kube_informer::names::{quoted, Namespace, Subresource};

use super::quota::{Quota, Ticket};
use super::{Grants, KubeSettings, MAX_RETRIES};
use crate::capability::api::{
    ApiRequest, ApiResponse, ClusterApi, Exchange, Malformed, PatchType, RequestLine, Target,
    Tenure, Transport, Verb,
};
use crate::capability::HostServices;
use crate::status::PluginStatus;
use crate::stop::Stop;

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

/// What is left of one event's time for API calls, and the lease tenure the
/// event began in. The runtime makes one per event and hands it to every call
/// the event makes.
#[derive(Debug, Clone, Copy)]
pub struct ApiBudget {
    ends: Instant,
    tenure: Option<Tenure>,
}

impl ApiBudget {
    /// A budget of `d` from now, outside any tenure.
    pub fn new(d: Duration) -> Self {
        Self::within(d, None)
    }

    /// A budget of `d` from now, for an event that began in `tenure`.
    pub fn within(d: Duration, tenure: Option<Tenure>) -> Self {
        Self {
            ends: Instant::now() + d,
            tenure,
        }
    }

    /// When the budget is spent.
    pub fn ends(&self) -> Instant {
        self.ends
    }

    /// The tenure the event began in.
    pub fn tenure(&self) -> Option<Tenure> {
        self.tenure
    }
}

/// A successful call: the object the server answered with, as JSON, or
/// `None` when it answered with a `Status` (a delete that completed at once).
pub type KubeResult = Result<Option<String>, KubeError>;

/// Leases the host itself holds (its election Lease, its ring members): in
/// cluster modes every Lease in the host's lease namespace. No plugin writes
/// there, whatever its grants say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtectedLeases {
    /// The namespace of the host's Leases.
    pub namespace: Namespace,
}

/// The resource of Leases.
pub const LEASES_RESOURCE: &str = "coordination.k8s.io/v1/leases";

impl ProtectedLeases {
    /// Whether `request` would write one of the host's Leases.
    pub fn covers(&self, request: &ApiRequest) -> bool {
        request.verb.writes()
            && request.target.resource_id() == LEASES_RESOURCE
            && request.target.namespace() == Some(&self.namespace)
    }
}

/// One plugin's connection to the API server: its grants, its quota (shared
/// by every runner, worker and version of the plugin) and the host's
/// [`ClusterApi`]. Shared by every instance of one version, so a restart
/// does not refill the bucket either.
pub struct KubeClient {
    plugin: Arc<str>,
    field_manager: String,
    grants: Grants,
    host_dry_run: bool,
    act_as: Option<String>,
    protected: Option<ProtectedLeases>,
    enforce_grants: bool,
    api: Arc<dyn ClusterApi>,
    quota: Arc<Quota>,
    status: Arc<PluginStatus>,
    /// The version's stop signal: a raise ends its waits at once.
    stop: Arc<Stop>,
    /// Sees every write about to be sent.
    intents: Option<Arc<dyn super::WriteIntents>>,
}

impl std::fmt::Debug for KubeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClient")
            .field("plugin", &self.plugin)
            .field("settings", &self.grants.current())
            .field("act_as", &self.act_as)
            .finish()
    }
}

/// Why a call was refused before anything was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// An argument breaks the API server's rules (answered `invalid`).
    Malformed(Malformed),
    /// No grant allows it (answered `forbidden`).
    Forbidden(String),
}

impl KubeClient {
    /// A client for `plugin` under `services` (its grants, quota, identity,
    /// the host's `--dry-run`), through `api`.
    pub fn new(
        plugin: Arc<str>,
        services: &HostServices,
        api: Arc<dyn ClusterApi>,
        status: Arc<PluginStatus>,
    ) -> Self {
        let s = services.grants.current();
        services.quota.configure(s.write_qps, s.write_burst);
        Self {
            field_manager: format!("wasm-informer/{plugin}"),
            plugin,
            grants: services.grants.clone(),
            host_dry_run: services.dry_run,
            act_as: services.act_as.clone(),
            protected: services.protected.clone(),
            enforce_grants: services.enforce_grants,
            api,
            quota: services.quota.clone(),
            status,
            stop: services.stop.clone(),
            intents: services.intents.clone(),
        }
    }

    /// The field manager of every write: `wasm-informer/PLUGIN`.
    pub fn field_manager(&self) -> &str {
        &self.field_manager
    }

    /// The lease tenure a call into the guest that starts now begins in.
    pub fn tenure(&self) -> Option<Tenure> {
        self.api.tenure()
    }

    /// The plugin's current settings.
    pub fn settings(&self) -> Arc<KubeSettings> {
        self.grants.current()
    }

    /// Whether the host checks the grants before sending (always, but for
    /// tests of the API server's own authorization).
    pub fn enforces_grants(&self) -> bool {
        self.enforce_grants
    }

    /// The plugin's API counters.
    pub(crate) fn status_api(&self) -> &crate::status::ApiStats {
        self.status.api()
    }

    /// The plugin's quota.
    pub fn quota(&self) -> &Arc<Quota> {
        &self.quota
    }

    /// Whether writes are dry runs now.
    pub fn dry_run(&self) -> bool {
        self.host_dry_run || self.grants.current().dry_run
    }

    /// Parses a guest's arguments into the target of a request (see
    /// [`Target::parse`]).
    pub fn target(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: Option<&str>,
        subresource: Option<Subresource>,
    ) -> Result<Target, Malformed> {
        Target::parse(&*self.api, resource, namespace, name, subresource)
    }

    /// Makes one call, if the grants allow it. `request` is the parsed call,
    /// or why the guest's arguments do not make one; `allowed` is the
    /// capability's own check (the `kube` grants, or the events grant).
    pub fn call_checked(
        &self,
        request: Result<ApiRequest, Malformed>,
        budget: &ApiBudget,
        allowed: impl FnOnce(&KubeSettings, &ApiRequest) -> Result<(), String>,
    ) -> KubeResult {
        let started = Instant::now();
        let settings = self.grants.current();
        let deadline = (started + settings.write_timeout).min(budget.ends());
        let mut request = match request {
            Ok(r) => r,
            Err(m) => return Err(self.refuse(None, Refusal::Malformed(m), deadline, started)),
        };
        request.dry_run = request.verb.writes() && (self.host_dry_run || settings.dry_run);
        if request.verb.writes() {
            request.field_manager = Some(self.field_manager.clone());
        }
        request.impersonate = self.act_as.clone();
        request.max_answer_bytes = settings.max_answer_bytes;
        if let Some(why) = self.refusal(&settings, &request, allowed) {
            return Err(self.refuse(Some(&request), why, deadline, started));
        }
        if let Some(i) = self.intents.as_ref().filter(|_| request.verb.writes()) {
            i.intended(&request);
        }
        let (exchange, result) = self.send(&request, deadline, budget.tenure(), started);
        let (outcome, code) = match &result {
            Ok((code, _)) => ("ok", Some(*code)),
            Err((e, code)) => (e.outcome(), *code),
        };
        let dry_run = exchange.as_ref().map_or(request.dry_run, |l| l.dry_run());
        self.status.api().record(
            request.verb.as_str(),
            code.map(|c| c.to_string()).as_deref().unwrap_or(outcome),
            dry_run,
            started.elapsed(),
        );
        self.audit(&request, exchange.as_ref(), outcome, code, started);
        result.map(|(_, body)| body).map_err(|(e, _)| e)
    }

    /// What stops `request` before it is sent, if anything: its size, the
    /// host's own Leases, the grants.
    fn refusal(
        &self,
        settings: &KubeSettings,
        request: &ApiRequest,
        allowed: impl FnOnce(&KubeSettings, &ApiRequest) -> Result<(), String>,
    ) -> Option<Refusal> {
        let size = request.body.as_ref().map_or(0, String::len);
        if size > settings.max_request_bytes {
            return Some(Refusal::Malformed(Malformed::new(
                "body",
                format!(
                    "the request body is {size} bytes, more than the plugin's \
                     max_request_bytes ({})",
                    settings.max_request_bytes
                ),
            )));
        }
        if let Some(p) = &self.protected {
            if p.covers(request) {
                return Some(Refusal::Forbidden(format!(
                    "plugin {} may not write Leases in namespace {}: the host keeps its own \
                     Leases there, whatever the grants say",
                    self.plugin, p.namespace
                )));
            }
        }
        if !self.enforce_grants {
            return None;
        }
        allowed(settings, request).err().map(Refusal::Forbidden)
    }

    /// Makes one call under the `[[write]]` grants.
    pub fn call(&self, request: Result<ApiRequest, Malformed>, budget: &ApiBudget) -> KubeResult {
        let plugin = self.plugin.clone();
        self.call_checked(request, budget, |s, r| match s.allowing(r) {
            Some(_) => Ok(()),
            None => Err(refusal(&plugin, s, r)),
        })
    }

    /// Refuses a call before sending, for a capability's own reason (the
    /// events grant): paced, counted and audited as every refusal.
    pub fn refused(
        &self,
        request: Option<&ApiRequest>,
        why: Refusal,
        budget: &ApiBudget,
    ) -> KubeError {
        let started = Instant::now();
        let deadline = (started + self.grants.current().write_timeout).min(budget.ends());
        self.refuse(request, why, deadline, started)
    }

    /// The resource `id` as the server serves it.
    pub fn resolve(
        &self,
        id: &kube_informer::resource::ResourceId,
    ) -> Result<kube_informer::resource::ResourceSpec, String> {
        self.api.resolve(id)
    }

    /// A call refused before sending: it takes a token like a request (so a
    /// flood of refusals is paced as requests are), is counted, and is
    /// audited within the refusal-line budget.
    fn refuse(
        &self,
        request: Option<&ApiRequest>,
        why: Refusal,
        deadline: Instant,
        started: Instant,
    ) -> KubeError {
        self.status.api().record_denied();
        let error = match why {
            Refusal::Malformed(m) => KubeError::Invalid {
                causes: vec![Cause {
                    field: m.field.to_string(),
                    reason: "FieldValueInvalid".into(),
                    message: m.message.clone(),
                }],
                message: m.message,
            },
            Refusal::Forbidden(m) => KubeError::Forbidden(m),
        };
        let throttled = self.quota.take(deadline, &self.stop) == Ticket::TooLate;
        if let Some(suppressed) = self.quota.refusal() {
            self.audit_refusal(request, &error, suppressed, started);
        }
        if throttled {
            let s = self.grants.current();
            return KubeError::RateLimited(format!(
                "plugin {}: refused calls count against write_qps {} (burst {}), and none is \
                 left before the call's deadline ({})",
                self.plugin, s.write_qps, s.write_burst, error
            ));
        }
        error
    }

    /// The token waits and the requests, with the retry policy: every
    /// attempt takes a token.
    #[allow(clippy::type_complexity)]
    fn send(
        &self,
        request: &ApiRequest,
        deadline: Instant,
        tenure: Option<Tenure>,
        started: Instant,
    ) -> (
        Option<RequestLine>,
        Result<(u16, Option<String>), (KubeError, Option<u16>)>,
    ) {
        let mut attempt = 0;
        let mut last_line = None;
        let stopping = |last_line: Option<RequestLine>| {
            (
                last_line,
                Err((
                    KubeError::Unavailable(format!("not sent: plugin {} is stopping", self.plugin)),
                    None,
                )),
            )
        };
        loop {
            match self.quota.take(deadline, &self.stop) {
                Ticket::After(_) => {}
                Ticket::Stopped => return stopping(last_line),
                Ticket::TooLate => {
                    let s = self.grants.current();
                    return (
                        last_line,
                        Err((
                            KubeError::RateLimited(format!(
                                "plugin {}: write_qps {} (burst {}) leaves no request before the \
                                 call's deadline",
                                self.plugin, s.write_qps, s.write_burst
                            )),
                            None,
                        )),
                    );
                }
            }
            if self.stop.is_raised() {
                return stopping(last_line);
            }
            let Exchange { sent, result } = {
                let line = request.line(None);
                let _w = self
                    .stop
                    .waiting_on(format!("an API call: {} {}", line.method, line.path));
                self.api.call(request, deadline, tenure, &self.stop)
            };
            if sent.is_some() {
                last_line = sent;
            }
            let resp = match result {
                Ok(r) => r,
                Err(Transport::Timeout) => {
                    return (
                        last_line,
                        Err((
                            KubeError::Timeout(format!(
                                "no answer from the API server within {} ms",
                                started.elapsed().as_millis()
                            )),
                            None,
                        )),
                    )
                }
                Err(Transport::Failed(m)) => {
                    return (last_line, Err((KubeError::Unavailable(m), None)))
                }
                Err(Transport::Cancelled) => {
                    return (
                        last_line,
                        Err((
                            KubeError::Unavailable(format!(
                                "cancelled in flight after {} ms: plugin {} is stopping (the \
                                 server may have applied the request)",
                                started.elapsed().as_millis(),
                                self.plugin
                            )),
                            None,
                        )),
                    )
                }
            };
            if (200..300).contains(&resp.code) {
                let body = (!is_status(&resp.body)).then_some(resp.body);
                return (last_line, Ok((resp.code, body)));
            }
            let retryable = resp.code == 429 || resp.code >= 500;
            if let (true, Some(after)) = (retryable, resp.retry_after) {
                if attempt < MAX_RETRIES && Instant::now() + after < deadline {
                    attempt += 1;
                    let paused = {
                        let _w = self.stop.waiting_on(format!(
                            "Retry-After {} s of the API server",
                            after.as_secs()
                        ));
                        self.stop.sleep(after)
                    };
                    if paused.is_err() {
                        return stopping(last_line);
                    }
                    continue;
                }
            }
            return (last_line, Err((classify(&resp), Some(resp.code))));
        }
    }

    /// The audit line of a call that was sent (or that the fence stopped):
    /// rendered from the request line as sent, so it shows the method, the
    /// real path and the query, and dry run as the query says.
    fn audit(
        &self,
        r: &ApiRequest,
        sent: Option<&RequestLine>,
        outcome: &str,
        code: Option<u16>,
        started: Instant,
    ) {
        if !r.verb.writes() {
            return;
        }
        let line = sent.cloned().unwrap_or_else(|| r.line(None));
        // The outcome first: a line cut to a terminal's width keeps it.
        tracing::info!(
            target: "audit",
            plugin = %self.plugin,
            outcome,
            code = code.unwrap_or(0),
            verb = r.verb.as_str(),
            method = line.method,
            path = %line.path,
            query = %line.query_string(),
            sent = sent.is_some(),
            patch = r.patch.map(|p| p.as_str()).unwrap_or(""),
            resource = %r.resource(),
            subresource = r.target.subresource().map(|s| s.as_str()).unwrap_or(""),
            key = %r.key(),
            as_user = r.impersonate.as_deref().unwrap_or(""),
            dry_run = line.dry_run(),
            latency_ms = started.elapsed().as_secs_f64() * 1e3,
            "write"
        );
    }

    /// The audit line of a refused call: every part either typed or quoted.
    fn audit_refusal(
        &self,
        r: Option<&ApiRequest>,
        error: &KubeError,
        suppressed: u64,
        started: Instant,
    ) {
        let (verb, path, resource, subresource, key) = match r {
            Some(r) => (
                r.verb.as_str(),
                r.target.path(),
                r.resource(),
                r.target.subresource().map(|s| s.as_str()).unwrap_or(""),
                r.key(),
            ),
            None => ("", String::new(), String::new(), "", String::new()),
        };
        tracing::info!(
            target: "audit",
            plugin = %self.plugin,
            outcome = error.outcome(),
            verb,
            path = %path,
            sent = false,
            resource = %resource,
            subresource,
            key = %key,
            reason = %quoted(&error.to_string()),
            suppressed_before = suppressed,
            latency_ms = started.elapsed().as_secs_f64() * 1e3,
            "refused"
        );
    }
}

/// Why a request is refused, in the words a plugin author needs.
fn refusal(plugin: &str, settings: &KubeSettings, r: &ApiRequest) -> String {
    let t = &r.target;
    let what = match t.subresource() {
        Some(s) => format!("{} {}/{s}", r.verb.as_str(), t.resource_id()),
        None => format!("{} {}", r.verb.as_str(), t.resource_id()),
    };
    let ns = match t.namespace() {
        Some(ns) => format!(" in namespace {ns}"),
        None => String::new(),
    };
    let creating_apply = r.verb == Verb::Patch
        && r.patch == Some(PatchType::Apply)
        && !r.must_exist
        && settings.grants.iter().any(|g| {
            let mut as_merge = r.clone();
            as_merge.must_exist = true;
            g.allows(&as_merge)
        });
    if creating_apply {
        return format!(
            "plugin {plugin} may not {what}{ns} by server-side apply: an apply creates the \
             object when it is missing, so it needs `create` in the [[write]] grant as well \
             as `patch` (or apply with must-exist)"
        );
    }
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
