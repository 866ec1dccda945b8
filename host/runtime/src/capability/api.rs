//! The API server as the runtime sees it: one blocking request at a time,
//! made on a plugin's own thread, through a trait the host implements.
//!
//! Job: describe a request a plugin's grant allows (verb, resource, namespace,
//! name, subresource, body, dry run, field manager, preconditions) and the
//! answer, so that the `kube` and `events` capabilities can talk to the
//! cluster without this crate knowing HTTP, URLs or credentials.
//!
//! Invariant: a [`ClusterApi`] call returns by its deadline, with the server's
//! status code and body, or with [`Transport`] when no answer came; it never
//! panics on a server error and never retries by itself (the caller's policy
//! decides, see `kube.rs`).

use std::time::{Duration, Instant};

/// What a request does. The names are the manifest's verbs; each maps to one
/// RBAC verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// A live read that bypasses the cache (RBAC `get`).
    Get,
    /// POST (RBAC `create`).
    Create,
    /// PUT with the object's resourceVersion as precondition (RBAC `update`).
    Replace,
    /// PATCH in any of its forms, server-side apply included (RBAC `patch`).
    Patch,
    /// DELETE (RBAC `delete`).
    Delete,
}

impl Verb {
    /// Every verb, in manifest order.
    pub const ALL: [Verb; 5] = [
        Verb::Get,
        Verb::Create,
        Verb::Replace,
        Verb::Patch,
        Verb::Delete,
    ];

    /// The manifest's name for the verb.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::Create => "create",
            Verb::Replace => "replace",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
        }
    }

    /// The RBAC verb that allows it.
    pub fn rbac(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::Create => "create",
            Verb::Replace => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
        }
    }

    /// Parses a manifest verb.
    pub fn parse(s: &str) -> Option<Verb> {
        Verb::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Whether the verb changes the cluster (and so is sent as a dry run
    /// when dry run is on).
    pub fn writes(self) -> bool {
        self != Verb::Get
    }
}

/// The form of a PATCH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// RFC 7386 JSON merge patch.
    Merge,
    /// RFC 6902 JSON patch.
    Json,
    /// Kubernetes strategic merge patch.
    StrategicMerge,
    /// Server-side apply.
    Apply,
}

impl PatchType {
    /// The request's `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Merge => "application/merge-patch+json",
            PatchType::Json => "application/json-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }

    /// Name used in logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            PatchType::Merge => "merge",
            PatchType::Json => "json",
            PatchType::StrategicMerge => "strategic-merge",
            PatchType::Apply => "apply",
        }
    }
}

/// What happens to a deleted object's dependents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Dependents are kept, their owner reference removed.
    Orphan,
    /// The object goes at once; the garbage collector deletes dependents.
    Background,
    /// Dependents go first, then the object.
    Foreground,
}

impl Propagation {
    /// The `propagationPolicy` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Propagation::Orphan => "Orphan",
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
        }
    }
}

/// Options of a DELETE.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// Delete only if the object still has this uid.
    pub uid: Option<String>,
    /// Delete only if the object is still at this resourceVersion.
    pub resource_version: Option<String>,
    /// What happens to dependents (the server's default when `None`).
    pub propagation: Option<Propagation>,
}

/// One request to the API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiRequest {
    /// What it does.
    pub verb: Verb,
    /// Resource id, for example `v1/pods` or `apps/v1/deployments`.
    pub resource: String,
    /// Namespace, for namespaced resources.
    pub namespace: Option<String>,
    /// Object name; `None` for a create.
    pub name: Option<String>,
    /// `status` for the status subresource.
    pub subresource: Option<String>,
    /// Request body: the object (create, replace), or the patch.
    pub body: Option<String>,
    /// The form of a patch.
    pub patch: Option<PatchType>,
    /// Sent with `dryRun=All`: validated and answered, nothing persisted.
    pub dry_run: bool,
    /// `fieldManager` of a write.
    pub field_manager: Option<String>,
    /// `force` of a server-side apply.
    pub force: bool,
    /// Options of a delete.
    pub delete: DeleteOptions,
}

impl ApiRequest {
    /// A request for `verb` on `resource` with every option unset.
    pub fn new(verb: Verb, resource: impl Into<String>) -> Self {
        Self {
            verb,
            resource: resource.into(),
            namespace: None,
            name: None,
            subresource: None,
            body: None,
            patch: None,
            dry_run: false,
            field_manager: None,
            force: false,
            delete: DeleteOptions::default(),
        }
    }

    /// The object's key, `namespace/name` or `name` (empty for a create
    /// whose name the server generates).
    pub fn key(&self) -> String {
        let name = self.name.as_deref().unwrap_or("");
        match &self.namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name.to_string(),
        }
    }
}

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
}

/// The API server, as the host lets the runtime reach it.
///
/// Called on a plugin's own thread (never on an async worker), so an
/// implementation may block until `deadline`.
pub trait ClusterApi: Send + Sync + 'static {
    /// Sends one request and returns the server's answer by `deadline`.
    fn call(&self, request: &ApiRequest, deadline: Instant) -> Result<ApiResponse, Transport>;
}
