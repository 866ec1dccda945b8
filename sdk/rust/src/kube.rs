//! The Kubernetes API, as the plugin's manifest grants it (`[[write]]`
//! tables). Every call blocks only this plugin, is paced by its
//! `write_qps`/`write_burst` and ends within `write_timeout_ms`; writes carry
//! the field manager `wasm-informer/PLUGIN` and, under dry run, `dryRun=All`.
//!
//! The functions here take resource ids (`v1/pods`, `apps/v1/deployments`)
//! and JSON-serializable bodies; with the `k8s-openapi` feature,
//! [`crate::typed::Api`] does the same for typed objects.

use serde::Serialize;

use crate::bindings::wasm_informer::plugin::kube as raw;
use crate::{Error, Object, Result};

pub use raw::Propagation;

/// A patch, in one of the four forms the API server takes.
#[derive(Debug, Clone)]
pub enum Patch<T: Serialize> {
    /// RFC 7386 JSON merge patch: `null` deletes a field.
    Merge(T),
    /// RFC 6902 JSON patch: a list of operations.
    Json(T),
    /// Kubernetes strategic merge patch: lists merge by key (containers by
    /// name, ...).
    Strategic(T),
    /// Server-side apply: the fully specified intent (with `apiVersion`,
    /// `kind` and `metadata.name`), owned by `wasm-informer/PLUGIN`.
    Apply(T),
}

impl<T: Serialize> Patch<T> {
    fn parts(&self) -> Result<(raw::PatchType, String)> {
        let (kind, body) = match self {
            Patch::Merge(b) => (raw::PatchType::Merge, b),
            Patch::Json(b) => (raw::PatchType::Json, b),
            Patch::Strategic(b) => (raw::PatchType::StrategicMerge, b),
            Patch::Apply(b) => (raw::PatchType::Apply, b),
        };
        Ok((kind, to_json(body)?))
    }
}

/// Options of a delete.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteParams {
    /// Delete only if the object still has this uid.
    pub uid: Option<String>,
    /// Delete only if the object is still at this resourceVersion.
    pub resource_version: Option<String>,
    /// What happens to dependents (the server's default when `None`).
    pub propagation: Option<Propagation>,
}

impl DeleteParams {
    /// Delete in the background: the garbage collector deletes dependents.
    pub fn background() -> Self {
        Self {
            propagation: Some(Propagation::Background),
            ..Self::default()
        }
    }

    /// Delete only if the object is still `uid` at `resource_version`.
    pub fn preconditions(uid: impl Into<String>, resource_version: impl Into<String>) -> Self {
        Self {
            uid: Some(uid.into()),
            resource_version: Some(resource_version.into()),
            ..Self::default()
        }
    }
}

fn to_json<T: Serialize>(body: &T) -> Result<String> {
    serde_json::to_string(body).map_err(|e| Error::msg(format!("cannot encode the body: {e}")))
}

fn owned(r: std::result::Result<crate::wit::ObjectRef, crate::ApiError>) -> Result<Object> {
    r.map(Object::from_ref).map_err(Error::from)
}

/// A live read from the API server, bypassing the cache (verb `get`).
pub fn get(resource: &str, namespace: Option<&str>, name: &str) -> Result<Object> {
    owned(raw::get(resource, namespace, name))
}

/// Creates an object (verb `create`).
pub fn create<T: Serialize>(resource: &str, namespace: Option<&str>, object: &T) -> Result<Object> {
    owned(raw::create(resource, namespace, &to_json(object)?))
}

/// Replaces an object (verb `replace`). Its `metadata.resourceVersion` is the
/// precondition: a stale one gives [`crate::ApiError::Conflict`].
pub fn replace<T: Serialize>(
    resource: &str,
    namespace: Option<&str>,
    name: &str,
    object: &T,
) -> Result<Object> {
    owned(raw::replace(resource, namespace, name, &to_json(object)?))
}

/// Patches an object (verb `patch`). `force` applies to [`Patch::Apply`]
/// only: it takes over fields another manager owns.
pub fn patch<T: Serialize>(
    resource: &str,
    namespace: Option<&str>,
    name: &str,
    patch: &Patch<T>,
    force: bool,
) -> Result<Object> {
    let (kind, body) = patch.parts()?;
    owned(raw::patch(resource, namespace, name, kind, &body, force))
}

/// How a server-side [`apply`] may act.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApplyParams {
    /// Take over fields another manager owns instead of failing with
    /// `conflict`.
    pub force: bool,
    /// Never create the object: when the host's cache does not hold it, the
    /// answer is [`crate::ApiError::NotFound`] and nothing is sent. Needs
    /// only `patch` in the grant (an apply that may create needs `create`
    /// too). Use it for writes made from an event: the object may be gone by
    /// the time the event is handled.
    pub must_exist: bool,
}

impl ApplyParams {
    /// Apply to an object that exists, taking over the fields applied:
    /// `force` and `must_exist`.
    pub fn existing() -> Self {
        Self {
            force: true,
            must_exist: true,
        }
    }
}

/// Server-side apply of `intent`, the fully specified object (`apiVersion`,
/// `kind`, `metadata.name` and the fields this plugin owns), as field manager
/// `wasm-informer/PLUGIN` (verb `patch`, and `create` unless
/// [`ApplyParams::must_exist`]). WIT 0.2.1.
pub fn apply<T: Serialize>(
    resource: &str,
    namespace: Option<&str>,
    name: &str,
    intent: &T,
    params: ApplyParams,
) -> Result<Object> {
    let options = raw::ApplyOptions {
        force: params.force,
        must_exist: params.must_exist,
    };
    owned(raw::apply(
        resource,
        namespace,
        name,
        &to_json(intent)?,
        options,
    ))
}

/// Deletes an object (verb `delete`). `Some` while finalizers or foreground
/// deletion hold it, `None` when it is gone at once.
pub fn delete(
    resource: &str,
    namespace: Option<&str>,
    name: &str,
    params: &DeleteParams,
) -> Result<Option<Object>> {
    let options = raw::DeleteOptions {
        uid: params.uid.clone(),
        resource_version: params.resource_version.clone(),
        propagation: params.propagation,
    };
    raw::delete(resource, namespace, name, &options)
        .map(|o| o.map(Object::from_ref))
        .map_err(Error::from)
}

/// Reads the status subresource.
pub fn get_status(resource: &str, namespace: Option<&str>, name: &str) -> Result<Object> {
    owned(raw::get_status(resource, namespace, name))
}

/// Replaces the status subresource (same precondition as [`replace`]).
pub fn replace_status<T: Serialize>(
    resource: &str,
    namespace: Option<&str>,
    name: &str,
    object: &T,
) -> Result<Object> {
    owned(raw::replace_status(
        resource,
        namespace,
        name,
        &to_json(object)?,
    ))
}

/// Patches the status subresource.
pub fn patch_status<T: Serialize>(
    resource: &str,
    namespace: Option<&str>,
    name: &str,
    patch: &Patch<T>,
    force: bool,
) -> Result<Object> {
    let (kind, body) = patch.parts()?;
    owned(raw::patch_status(
        resource, namespace, name, kind, &body, force,
    ))
}

/// Whether this plugin's writes are dry runs (`dry_run = true` in its
/// manifest, or the host's `--dry-run`).
pub fn dry_run() -> bool {
    raw::dry_run()
}
