//! The `kube` capability: a plugin's writes to the cluster (and live reads),
//! exactly as its manifest grants them.
//!
//! Job: check each call against the plugin's grants (resource, subresource,
//! verb, namespace), pace it through the plugin's token bucket, send it with
//! the plugin's field manager (and `dryRun=All` when dry run is on), retry
//! what the server asks to be retried (429 or 5xx with `Retry-After`, at most
//! [`MAX_RETRIES`] times, while the call's time allows), map the answer to a
//! typed result, and record every write as one audit line and in the
//! plugin's counters.
//!
//! Invariants:
//! - nothing reaches the API server that the current grants do not allow; a
//!   refused call returns [`KubeError::Forbidden`], is counted, and is never
//!   a trap. Grants are read at each call from a shared [`Grants`] handle, so
//!   replacing them (a hot reload) takes effect for the very next call of
//!   every running instance;
//! - a call takes at most the plugin's `write_timeout` (token wait, retries
//!   and the requests together), and never more than what is left of the
//!   event's API time budget ([`ApiBudget`]); past either, it returns
//!   [`KubeError::Timeout`] or [`KubeError::RateLimited`];
//! - with dry run on, every write carries `dryRun=All`: the server validates
//!   and answers, and nothing persists.
//!
//! # How a plugin's time per event is bounded
//!
//! Fuel and the wall deadline (`fuel_per_event`, `timeout_ms`) bound the
//! guest's own work. Time the guest spends blocked in an API call is not
//! charged to `timeout_ms`, because it is the server's time, not the
//! plugin's: it is bounded separately, per call by `write_timeout_ms` and per
//! event by `api_time_per_event_ms`. So one event holds its plugin's thread
//! for at most `timeout_ms + api_time_per_event_ms`, and only that plugin's
//! thread: the dispatcher and every other plugin go on (I1).

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;

mod client;
mod grant;
mod intents;
mod quota;

pub use client::{
    ApiBudget, Cause, KubeClient, KubeError, KubeResult, ProtectedLeases, Refusal, LEASES_RESOURCE,
};
pub use grant::{GrantError, WriteGrant};
pub use intents::WriteIntents;
pub use quota::{Quota, QuotaStats, Ticket, REFUSAL_LINES_PER_SEC, REFUSAL_LINE_BURST};

use std::collections::BTreeSet;

use kube_informer::names::Namespace;

use crate::capability::api::ApiRequest;

/// Most retries of one call that the server asked to be retried.
pub const MAX_RETRIES: u32 = 10;
/// Default sustained write rate per plugin (client-go's default QPS).
pub const DEFAULT_WRITE_QPS: f64 = 5.0;
/// Default burst of writes per plugin (client-go's default burst).
pub const DEFAULT_WRITE_BURST: u32 = 10;
/// Default time one call may take, retries included.
pub const DEFAULT_WRITE_TIMEOUT_MS: u64 = 10_000;
/// Default time one event may spend blocked in API calls.
pub const DEFAULT_API_TIME_PER_EVENT_MS: u64 = 30_000;
/// Default largest request body a plugin may send (1 MiB).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 1 << 20;
/// Default largest answer the host reads back for a plugin (4 MiB; the API
/// server stores objects of at most about 1.5 MiB).
pub const DEFAULT_MAX_ANSWER_BYTES: usize = crate::capability::request::DEFAULT_MAX_ANSWER_BYTES;

/// Where a plugin may record Events, and about what: `events = true` (the
/// namespaces it can read or write in) or `events = { namespaces = [...] }`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventsGrant {
    /// The namespaces Events may be written to; `None`: any (a plugin that
    /// reads cluster-wide).
    pub namespaces: Option<BTreeSet<Namespace>>,
    /// The resources whose objects Events may be about: the ones the plugin
    /// watches, reads or writes.
    pub regarding: BTreeSet<String>,
}

/// What a manifest grants a plugin on the API server, and how its calls are
/// paced and bounded.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeSettings {
    /// The `[[write]]` grants.
    pub grants: Vec<WriteGrant>,
    /// `events`: the plugin may record Events, where and about what.
    pub events: Option<EventsGrant>,
    /// Every write is sent with `dryRun=All`.
    pub dry_run: bool,
    /// Sustained calls per second (0: no limit).
    pub write_qps: f64,
    /// Calls allowed at once after a quiet period.
    pub write_burst: u32,
    /// Longest time of one call, retries included.
    pub write_timeout: Duration,
    /// Longest time one event may spend blocked in API calls.
    pub api_time_per_event: Duration,
    /// Largest request body, in bytes.
    pub max_request_bytes: usize,
    /// Largest answer read back, in bytes.
    pub max_answer_bytes: usize,
}

impl Default for KubeSettings {
    fn default() -> Self {
        Self {
            grants: Vec::new(),
            events: None,
            dry_run: false,
            write_qps: DEFAULT_WRITE_QPS,
            write_burst: DEFAULT_WRITE_BURST,
            write_timeout: Duration::from_millis(DEFAULT_WRITE_TIMEOUT_MS),
            api_time_per_event: Duration::from_millis(DEFAULT_API_TIME_PER_EVENT_MS),
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_answer_bytes: DEFAULT_MAX_ANSWER_BYTES,
        }
    }
}

impl KubeSettings {
    /// The grant that allows `request`, if any.
    pub fn allowing(&self, request: &ApiRequest) -> Option<&WriteGrant> {
        self.grants.iter().find(|g| g.allows(request))
    }
}

/// A plugin's current settings, shared by every instance of the plugin and
/// replaced in place by a reload (so a revoked grant is refused at the next
/// call, even by a version that is still draining).
#[derive(Debug, Clone, Default)]
pub struct Grants(Arc<RwLock<Arc<KubeSettings>>>);

impl Grants {
    /// A handle holding `settings`.
    pub fn new(settings: KubeSettings) -> Self {
        Self(Arc::new(RwLock::new(Arc::new(settings))))
    }

    /// The settings now.
    pub fn current(&self) -> Arc<KubeSettings> {
        self.0.read().clone()
    }

    /// Replaces the settings for every holder of this handle.
    pub fn replace(&self, settings: KubeSettings) {
        *self.0.write() = Arc::new(settings);
    }
}

// The WIT bindings (0.2 `kube`).

use kube_informer::object::{Object, Transform};
use wasmtime::component::HasData;

use kube_informer::names::Subresource;

use crate::capability::api::{DeleteOptions, Malformed, PatchType, Propagation, Verb};
use crate::capability::cache::CacheState;
use crate::capability::clock::CallClock;
use crate::limiter::MemoryLimiter;
use crate::objects::ObjectTable;
use crate::world::v0_2;

/// The kube capability of one instance: the plugin's client, shared by its
/// instances, or `None` when the host gives plugins no API server.
#[derive(Clone, Debug, Default)]
pub struct KubeState {
    client: Option<Arc<KubeClient>>,
}

impl KubeState {
    /// Calls through `client`.
    pub fn new(client: Option<Arc<KubeClient>>) -> Self {
        Self { client }
    }

    /// The lease tenure a call into the guest that starts now begins in
    /// (`None` without an API server).
    pub fn tenure(&self) -> Option<crate::capability::api::Tenure> {
        self.client.as_ref().and_then(|c| c.tenure())
    }
}

/// The kube capability as the bindings see it: the state, the call's object
/// references (where answered objects are kept) and the call's clock.
pub struct KubeView<'a> {
    /// The capability.
    pub state: &'a KubeState,
    /// The call's object references.
    pub objects: &'a mut ObjectTable,
    /// The clock of the call in progress.
    pub clock: &'a mut CallClock,
    /// The instance's memory, which API answers count against.
    pub memory: &'a MemoryLimiter,
    /// The host's cache, which `must-exist` is checked against.
    pub cache: &'a CacheState,
}

/// `HasData` of [`KubeView`].
pub struct Kube02;

impl HasData for Kube02 {
    type Data<'a> = KubeView<'a>;
}

type WitError = v0_2::types::ApiError;
type Handle = u32;

/// The WIT form of an error.
pub fn to_wit(e: KubeError) -> WitError {
    match e {
        KubeError::Forbidden(m) => WitError::Forbidden(m),
        KubeError::NotFound(m) => WitError::NotFound(m),
        KubeError::Conflict(m) => WitError::Conflict(m),
        KubeError::AlreadyExists(m) => WitError::AlreadyExists(m),
        KubeError::Invalid { message, causes } => WitError::Invalid(v0_2::types::InvalidDetails {
            message,
            causes: causes
                .into_iter()
                .map(|c| v0_2::types::Cause {
                    field: c.field,
                    reason: c.reason,
                    message: c.message,
                })
                .collect(),
        }),
        KubeError::RateLimited(m) => WitError::RateLimited(m),
        KubeError::Timeout(m) => WitError::Timeout(m),
        KubeError::Unavailable(m) => WitError::Unavailable(m),
    }
}

fn patch_type(k: v0_2::kube::PatchType) -> PatchType {
    use v0_2::kube::PatchType as K;
    match k {
        K::Merge => PatchType::Merge,
        K::Json => PatchType::Json,
        K::StrategicMerge => PatchType::StrategicMerge,
        K::Apply => PatchType::Apply,
    }
}

/// The `metadata.resourceVersion` of a JSON object, if it has one.
fn resource_version_of(body: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(rename = "resourceVersion")]
        resource_version: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Obj {
        metadata: Option<Meta>,
    }
    serde_json::from_str::<Obj>(body)
        .ok()?
        .metadata?
        .resource_version
        .filter(|rv| !rv.is_empty())
}

impl KubeView<'_> {
    fn client(&self) -> Result<&Arc<KubeClient>, WitError> {
        self.state
            .client
            .as_ref()
            .ok_or_else(|| WitError::Unavailable("this host gives plugins no API server".into()))
    }

    /// The typed request of a guest's call: `verb` on the target its
    /// arguments name, or why they name none.
    fn request(
        &self,
        verb: Verb,
        resource: &str,
        namespace: Option<&str>,
        name: Option<&str>,
        status: bool,
    ) -> Result<Result<ApiRequest, Malformed>, WitError> {
        let client = self.client()?;
        let sub = status.then_some(Subresource::Status);
        Ok(client
            .target(resource, namespace, name, sub)
            .and_then(|t| ApiRequest::new(verb, t)))
    }

    /// Sends `request`, counting the time blocked against the call's clock,
    /// and hands the answer back as an object reference. The answer counts
    /// against the plugin's memory: the guest's linear memory and the answers
    /// this call holds stay within `memory_mb` together.
    fn send(&mut self, request: Result<ApiRequest, Malformed>) -> Result<Option<Handle>, WitError> {
        let client = self.client()?.clone();
        let resource: Arc<str> = match &request {
            Ok(r) => r.resource().into(),
            Err(_) => "".into(),
        };
        let started = std::time::Instant::now();
        let answer = client.call(request, self.clock.budget());
        self.clock.blocked_for(started.elapsed());
        let Some(body) = answer.map_err(to_wit)? else {
            return Ok(None);
        };
        let held = self.objects.answer_bytes() + body.len();
        let room = self
            .memory
            .max_bytes()
            .saturating_sub(self.memory.largest_memory());
        if held > room {
            client.status_api().record_answer_refused();
            return Err(WitError::Unavailable(format!(
                "the answer ({} bytes) does not fit: with the {} bytes of answers this call \
                 already holds it would take the plugin past its memory_mb ({} bytes, {} of \
                 them in use); read fewer objects per call",
                body.len(),
                self.objects.answer_bytes(),
                self.memory.max_bytes(),
                self.memory.largest_memory()
            )));
        }
        let keep = Transform {
            strip_managed_fields: false,
            ..Transform::default()
        };
        let object = Object::from_json(body.as_bytes(), &keep).map_err(|e| {
            WitError::Unavailable(format!("the API server answered with no object: {e}"))
        })?;
        let r = self
            .objects
            .push_answer(&resource, Arc::new(object), body.len())
            .map_err(|e| WitError::Unavailable(format!("cannot hand out the answer: {e}")))?;
        Ok(Some(r))
    }

    fn object(&mut self, request: Result<ApiRequest, Malformed>) -> Result<Handle, WitError> {
        self.send(request)?.ok_or_else(|| {
            WitError::Unavailable("the API server answered with a Status, not an object".into())
        })
    }

    fn replace_any(
        &mut self,
        resource: String,
        namespace: Option<String>,
        name: String,
        body: String,
        status: bool,
    ) -> Result<Handle, WitError> {
        if resource_version_of(&body).is_none() {
            return Err(WitError::Invalid(v0_2::types::InvalidDetails {
                message: "replace needs metadata.resourceVersion in the body: it is the \
                          precondition that makes a stale replace a conflict"
                    .into(),
                causes: vec![v0_2::types::Cause {
                    field: "metadata.resourceVersion".into(),
                    reason: "FieldValueRequired".into(),
                    message: "Required value".into(),
                }],
            }));
        }
        let r = self
            .request(
                Verb::Replace,
                &resource,
                namespace.as_deref(),
                Some(&name),
                status,
            )?
            .map(|mut r| {
                r.body = Some(body);
                r
            });
        self.object(r)
    }

    #[allow(clippy::too_many_arguments)]
    fn patch_any(
        &mut self,
        resource: String,
        namespace: Option<String>,
        name: String,
        kind: PatchType,
        body: String,
        force: bool,
        must_exist: bool,
        status: bool,
    ) -> Result<Handle, WitError> {
        let r = self
            .request(
                Verb::Patch,
                &resource,
                namespace.as_deref(),
                Some(&name),
                status,
            )?
            .map(|mut r| {
                r.patch = Some(kind);
                r.force = force && kind == PatchType::Apply;
                r.must_exist = must_exist && kind == PatchType::Apply;
                r.body = Some(body);
                r
            });
        if let Ok(r) = &r {
            // Only for a call the grants allow: the refusal of any other one
            // must not depend on what the cache holds.
            let granted = self.client()?.settings().allowing(r).is_some();
            if r.must_exist && granted {
                self.check_exists(r)?;
            }
        }
        self.object(r)
    }

    /// An apply that must not create is sent only while the host's cache
    /// holds the object. The cache lags the server by the watch's latency;
    /// where each plugin acts as its own identity, the API server refuses
    /// the create of a plugin without `create` even in that window.
    fn check_exists(&self, r: &ApiRequest) -> Result<(), WitError> {
        let resource = r.resource();
        match self.cache.holds(&resource, &r.key()) {
            Some(true) => Ok(()),
            Some(false) => Err(WitError::NotFound(format!(
                "{resource} {} is not in the host's cache: an apply with must-exist does not \
                 create it (nothing was sent)",
                r.key()
            ))),
            None => Err(WitError::Invalid(v0_2::types::InvalidDetails {
                message: format!(
                    "must-exist is checked against the host's cache, and no informer of the \
                     host serves {resource}: add it to the plugin's `resources` or `read`"
                ),
                causes: Vec::new(),
            })),
        }
    }
}

impl v0_2::kube::Host for KubeView<'_> {
    fn get(
        &mut self,
        resource: String,
        namespace: Option<String>,
        name: String,
    ) -> Result<Handle, WitError> {
        let r = self.request(
            Verb::Get,
            &resource,
            namespace.as_deref(),
            Some(&name),
            false,
        )?;
        self.object(r)
    }

    fn create(
        &mut self,
        resource: String,
        namespace: Option<String>,
        body: String,
    ) -> Result<Handle, WitError> {
        let r = self
            .request(Verb::Create, &resource, namespace.as_deref(), None, false)?
            .map(|mut r| {
                r.body = Some(body);
                r
            });
        self.object(r)
    }

    fn replace(
        &mut self,
        resource: String,
        namespace: Option<String>,
        name: String,
        body: String,
    ) -> Result<Handle, WitError> {
        self.replace_any(resource, namespace, name, body, false)
    }

    fn patch(
        &mut self,
        resource: String,
        namespace: Option<String>,
        name: String,
        kind: v0_2::kube::PatchType,
        body: String,
        force: bool,
    ) -> Result<Handle, WitError> {
        self.patch_any(
            resource,
            namespace,
            name,
            patch_type(kind),
            body,
            force,
            false,
            false,
        )
    }

    fn delete(
        &mut self,
        resource: String,
        namespace: Option<String>,
        name: String,
        options: v0_2::kube::DeleteOptions,
    ) -> Result<Option<Handle>, WitError> {
        let r = self
            .request(
                Verb::Delete,
                &resource,
                namespace.as_deref(),
                Some(&name),
                false,
            )?
            .map(|mut r| {
                r.delete = DeleteOptions {
                    uid: options.uid,
                    resource_version: options.resource_version,
                    propagation: options.propagation.map(|p| match p {
                        v0_2::kube::Propagation::Orphan => Propagation::Orphan,
                        v0_2::kube::Propagation::Background => Propagation::Background,
                        v0_2::kube::Propagation::Foreground => Propagation::Foreground,
                    }),
                };
                r
            });
        self.send(r)
    }

    fn get_status(
        &mut self,
        resource: String,
        namespace: Option<String>,
        name: String,
    ) -> Result<Handle, WitError> {
        let r = self.request(
            Verb::Get,
            &resource,
            namespace.as_deref(),
            Some(&name),
            true,
        )?;
        self.object(r)
    }

    fn replace_status(
        &mut self,
        resource: String,
        namespace: Option<String>,
        name: String,
        body: String,
    ) -> Result<Handle, WitError> {
        self.replace_any(resource, namespace, name, body, true)
    }

    fn patch_status(
        &mut self,
        resource: String,
        namespace: Option<String>,
        name: String,
        kind: v0_2::kube::PatchType,
        body: String,
        force: bool,
    ) -> Result<Handle, WitError> {
        self.patch_any(
            resource,
            namespace,
            name,
            patch_type(kind),
            body,
            force,
            false,
            true,
        )
    }

    fn apply(
        &mut self,
        resource: String,
        namespace: Option<String>,
        name: String,
        body: String,
        options: v0_2::kube::ApplyOptions,
    ) -> Result<Handle, WitError> {
        self.patch_any(
            resource,
            namespace,
            name,
            PatchType::Apply,
            body,
            options.force,
            options.must_exist,
            false,
        )
    }

    fn dry_run(&mut self) -> bool {
        self.state.client.as_ref().is_some_and(|c| c.dry_run())
    }
}

/// Links the kube capability (0.2).
pub fn add_to_linker(
    linker: &mut wasmtime::component::Linker<crate::host_state::HostState>,
) -> wasmtime::Result<()> {
    v0_2::kube::add_to_linker::<_, Kube02>(linker, crate::host_state::HostState::kube)
}
