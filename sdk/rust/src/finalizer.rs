//! Finalizers for controllers, as kube-runtime's `finalizer` does them: a
//! controller that must clean up outside the object (or in objects it does not
//! own) adds a finalizer on its first reconcile, runs its cleanup when the
//! object is being deleted, then removes the finalizer so the deletion
//! completes.
//!
//! Invariant: the finalizer is removed only after a cleanup that finished
//! ([`Action::done`]): a cleanup that failed or asked for a requeue keeps it,
//! and the delete waits for the next try. Both patches are JSON patches that
//! `test` the object's uid, so they never touch another object re-created
//! under the same name; the add also tests the resourceVersion (a stale view
//! gets a conflict), the removal tests the finalizer's position (so it removes
//! this finalizer and no other).
//!
//! Under dry run ([`kube::dry_run`]) no patch persists, so the helper does in
//! one reconcile what a live run would spread over several, and a dry run
//! shows the writes a live run would make:
//! - an object without the finalizer gets the (dry-run) add, then
//!   [`Step::Apply`] in the same reconcile (a live run applies on the
//!   reconcile the add's change queues);
//! - an object being deleted without the finalizer gets [`Step::Cleanup`], as
//!   it would have had the finalizer in a live run; no removal is sent (there
//!   is nothing to remove: its `test` would fail). A cleanup with effects
//!   outside the cluster checks [`kube::dry_run`] itself.
//!
//! What a dry run cannot show: an object deleted while no other finalizer
//! held it is gone at once (its finalizer was never added), so no reconcile
//! sees it being deleted and there is no object to hand to the cleanup.
//!
//! Needs `patch` on the resource in the manifest's `[[write]]` grants.

use crate::kube::{self, Patch};
use crate::{Action, Error, Object, ReconcileError, Request};

/// What the finalizer asks the reconciler to do.
pub enum Step {
    /// The object exists and is not being deleted: make the world match it.
    Apply(Object),
    /// The object is being deleted and still has the finalizer (or, under dry
    /// run, would have it): clean up. Return [`Action::done`] when the cleanup
    /// is finished, so the finalizer is removed; [`Action::requeue`] (cleanup
    /// still under way) or an error keeps the finalizer.
    Cleanup(Object),
}

/// Runs `reconcile` under the finalizer `name` (for example
/// `example.com/cleanup`) for the object of `request`:
/// - object gone: nothing to do (the finalizer guaranteed the cleanup ran);
/// - no finalizer yet and not being deleted: add it, and reconcile again
///   (under dry run: add it, then [`Step::Apply`] at once);
/// - being deleted with the finalizer: [`Step::Cleanup`]; when that is done,
///   remove the finalizer; when it asks for a requeue, keep the finalizer and
///   return the requeue;
/// - being deleted without the finalizer: nothing to do (under dry run:
///   [`Step::Cleanup`], and no removal);
/// - otherwise: [`Step::Apply`].
///
/// See the module doc for the patches sent and the dry-run semantics.
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
            let add = if meta.finalizers.is_empty() {
                serde_json::json!({ "op": "add", "path": "/metadata/finalizers", "value": [name] })
            } else {
                serde_json::json!({ "op": "add", "path": "/metadata/finalizers/-", "value": name })
            };
            let ops = serde_json::json!([
                { "op": "test", "path": "/metadata/uid", "value": meta.uid },
                { "op": "test", "path": "/metadata/resourceVersion", "value": meta.resource_version },
                add,
            ]);
            kube::patch(
                &request.resource,
                ns,
                &request.name,
                &Patch::Json(ops),
                false,
            )?;
            if kube::dry_run() {
                // The add did not persist: no change will queue the key, and
                // the next reconcile would only add it again.
                return reconcile(Step::Apply(object));
            }
            // The patch is a change the queue sees: the next reconcile applies.
            Ok(Action::done())
        }
        (false, Some(_)) => reconcile(Step::Apply(object)),
        (true, Some(i)) => {
            let action = reconcile(Step::Cleanup(object))?;
            if action.requeue_after().is_some() {
                // Cleanup is not finished: the finalizer holds the delete.
                return Ok(action);
            }
            let ops = serde_json::json!([
                { "op": "test", "path": "/metadata/uid", "value": meta.uid },
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
        // Under dry run the finalizer was never added, so a live run would
        // hold this object and clean up now; there is nothing to remove.
        (true, None) if kube::dry_run() => reconcile(Step::Cleanup(object)),
        // Being deleted, and our finalizer already gone: nothing left to do.
        (true, None) => Ok(Action::done()),
    }
}

impl From<&Error> for ReconcileError {
    fn from(e: &Error) -> Self {
        ReconcileError::Retry(e.message().to_string())
    }
}
