//! The API server as the runtime sees it: one blocking request at a time,
//! made on a plugin's own thread, through a trait the host implements.
//!
//! Job: the trait through which the `kube` and `events` capabilities reach
//! the cluster (a typed [`ApiRequest`] in, the server's answer and the
//! request line actually sent out), without this crate knowing HTTP or
//! credentials; and the lease [`Tenure`] a call into the guest runs under.
//!
//! Invariant: a [`ClusterApi`] call returns by its deadline, with the server's
//! status code and body, or with [`Transport`] when no answer came, and says
//! which request line it sent (none when it sent nothing); it never panics on
//! a server error and never retries by itself (the caller's policy decides,
//! see `kube/client.rs`).

use std::time::{Duration, Instant};

use crate::stop::Stop;
use kube_informer::names::quoted;
use kube_informer::resource::{ResourceId, ResourceSpec};

pub use super::request::{
    ApiRequest, DeleteOptions, Malformed, PatchType, Propagation, RequestLine, Target, Verb,
};

/// The server's answer, whatever its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiResponse {
    /// HTTP status code.
    pub code: u16,
    /// `Retry-After`, when the server sent one.
    pub retry_after: Option<Duration>,
    /// The body: the object, or a `Status`.
    pub body: String,
}

/// No answer came from the server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Transport {
    /// The deadline passed first.
    #[error("no answer before the deadline")]
    Timeout,
    /// The request could not be made or the connection failed.
    #[error("{0}")]
    Failed(String),
    /// The plugin version stopped while the request was in flight: the host
    /// gave up on the answer (the server may still have applied it).
    #[error("cancelled in flight: the plugin is stopping")]
    Cancelled,
}

/// One lease tenure of this replica: the term in which it holds the lease
/// its writes are fenced by. The runtime takes the current tenure when a call
/// into the guest starts (an event, a reconcile, `init`) and hands it to every
/// request of that call, so a write is sent only under the tenure its event
/// began in: a replica that lost its lease and won it back does not let an
/// event of the old tenure write under the new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tenure(pub u64);

/// The API server, as the host lets the runtime reach it.
///
/// Called on a plugin's own thread (never on an async worker), so an
/// implementation may block until `deadline`, or until `stop` is raised.
pub trait ClusterApi: Send + Sync + 'static {
    /// Sends one request and returns the server's answer by `deadline`.
    /// `tenure` is the tenure the calling event or reconcile began in (see
    /// [`ClusterApi::tenure`]); a fenced implementation sends nothing unless
    /// that tenure is still current and lasts past the request's deadline.
    /// An implementation that waits on the network gives up with
    /// [`Transport::Cancelled`] as soon as `stop` is raised
    /// ([`Stop::raised`]).
    fn call(
        &self,
        request: &ApiRequest,
        deadline: Instant,
        tenure: Option<Tenure>,
        stop: &Stop,
    ) -> Exchange;

    /// The tenure a call into the guest that starts now begins in: `None`
    /// when this host has no leases (always allowed) or holds none now.
    fn tenure(&self) -> Option<Tenure> {
        None
    }

    /// The resource `id` as the server serves it (its kind and scope): the
    /// built-in table, or the server's discovery. `Err` says why it cannot
    /// be used (the server does not serve it, or discovery failed).
    fn resolve(&self, id: &ResourceId) -> Result<ResourceSpec, String> {
        ResourceSpec::builtin(&id.to_string())
            .ok()
            .flatten()
            .ok_or_else(|| unknown_resource(id))
    }
}

/// The message for a resource the server does not serve.
pub fn unknown_resource(id: &ResourceId) -> String {
    format!(
        "unknown resource {}: the API server does not serve it",
        quoted(&id.to_string())
    )
}

/// One exchange with the API server: the request line that was sent (none
/// when nothing was, for example when the fence refused it) and what came
/// back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    /// What was sent.
    pub sent: Option<RequestLine>,
    /// The answer.
    pub result: Result<ApiResponse, Transport>,
}

impl Exchange {
    /// Nothing was sent, because of `why`.
    pub fn refused(why: impl Into<String>) -> Self {
        Self {
            sent: None,
            result: Err(Transport::Failed(why.into())),
        }
    }
}
