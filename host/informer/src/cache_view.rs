//! Read-only queries a plugin makes against the host's cache, behind a trait so
//! the plugin runtime does not depend on the Indexer.
//!
//! Invariant: a query never traps a plugin; every failure is a [`CacheError`].

use crate::object::ObjectRef;

/// Why a cache query failed (mirrors the WIT `cache-error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    /// The consumer may not read this resource.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// No informer runs for this resource.
    #[error("unknown resource: {0}")]
    UnknownResource(String),
    /// The label selector does not parse.
    #[error("invalid label selector: {0}")]
    InvalidSelector(String),
    /// No index of that name exists for the resource.
    #[error("unknown index: {0}")]
    UnknownIndex(String),
}

/// The host's cache as plugins see it.
pub trait CacheView: Send + Sync + 'static {
    /// One object by resource id and key.
    fn get(&self, resource: &str, key: &str) -> Result<Option<ObjectRef>, CacheError>;
    /// Objects of a resource, optionally in one namespace and matching a label
    /// selector (full Kubernetes syntax).
    fn list(
        &self,
        resource: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<ObjectRef>, CacheError>;
    /// Objects whose value for `index` equals `value`.
    fn by_index(
        &self,
        resource: &str,
        index: &str,
        value: &str,
    ) -> Result<Vec<ObjectRef>, CacheError>;
    /// Whether the resource's informer has finished its first list.
    fn has_synced(&self, resource: &str) -> Result<bool, CacheError>;
}
