//! Finalizers for controllers, as kube-runtime's `finalizer` does them: a
//! controller that must clean up outside the object (or in objects it does not
//! own) adds a finalizer on its first reconcile, runs its cleanup when the
//! object is being deleted, then removes the finalizer so the deletion
//! completes.
//!
//! Invariant: the cleanup runs only while the object still carries the
//! finalizer, so it runs before the object is gone, and again after a failure
//! (a failed cleanup leaves the finalizer, and the delete waits); the
//! finalizer is added and removed with JSON patches that `test` the
//! resourceVersion, so a stale view gets a conflict, never a lost finalizer.
//!
//! Needs `patch` on the resource in the manifest's `[[write]]` grants.

use crate::kube::{self, Patch};
use crate::{Action, Error, Object, ReconcileError, Request};

/// What the finalizer asks the reconciler to do.
pub enum Step {
    /// The object exists and is not being deleted: make the world match it.
    Apply(Object),
    /// The object is being deleted and still has the finalizer: clean up.
    Cleanup(Object),
}

/// Runs `reconcile` under the finalizer `name` (for example
/// `example.com/cleanup`) for the object of `request`:
/// - object gone: nothing to do (the finalizer guaranteed the cleanup ran);
/// - no finalizer yet and not being deleted: add it, and reconcile again;
/// - being deleted with the finalizer: [`Step::Cleanup`], then remove it;
/// - otherwise: [`Step::Apply`].
pub fn finalizer(
    request: &Request,
    name: &str,
    reconcile: impl FnOnce(Step) -> Result<Action, ReconcileError>,
) -> Result<Action, ReconcileError> {
    let Some(object) = request.object()? else {
        return Ok(Action::done());
    };
    let meta = object.meta();
    let position = meta.finalizers.iter().position(|f| f == name);
    let ns = request.namespace.as_deref();
    match (meta.deletion_timestamp.is_some(), position) {
        (false, None) => {
            let ops = if meta.finalizers.is_empty() {
                serde_json::json!([
                    { "op": "test", "path": "/metadata/resourceVersion", "value": meta.resource_version },
                    { "op": "add", "path": "/metadata/finalizers", "value": [name] },
                ])
            } else {
                serde_json::json!([
                    { "op": "test", "path": "/metadata/resourceVersion", "value": meta.resource_version },
                    { "op": "add", "path": "/metadata/finalizers/-", "value": name },
                ])
            };
            kube::patch(
                &request.resource,
                ns,
                &request.name,
                &Patch::Json(ops),
                false,
            )?;
            // The patch is a change the queue sees: the next reconcile applies.
            Ok(Action::done())
        }
        (false, Some(_)) => reconcile(Step::Apply(object)),
        (true, Some(i)) => {
            let action = reconcile(Step::Cleanup(object))?;
            let ops = serde_json::json!([
                { "op": "test", "path": format!("/metadata/finalizers/{i}"), "value": name },
                { "op": "remove", "path": format!("/metadata/finalizers/{i}") },
            ]);
            match kube::patch(
                &request.resource,
                ns,
                &request.name,
                &Patch::Json(ops),
                false,
            ) {
                Ok(_) => Ok(action),
                Err(e) if e.is_not_found() => Ok(action),
                Err(e) => Err(ReconcileError::from(e)),
            }
        }
        // Being deleted, and our finalizer already gone: nothing left to do.
        (true, None) => Ok(Action::done()),
    }
}

impl From<&Error> for ReconcileError {
    fn from(e: &Error) -> Self {
        ReconcileError::Retry(e.message().to_string())
    }
}
