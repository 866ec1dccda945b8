//! Kubernetes Events (events.k8s.io/v1) about objects, recorded as
//! `reportingController` `wasm-informer/PLUGIN`. Needs `events = true` in the
//! manifest. A repeat (same type, reason and action about the same object
//! within six minutes) increments the first Event's `series` instead of
//! creating a new object.

use crate::bindings::wasm_informer::plugin::events as raw;
use crate::{Error, Object, ObjectReference, Result};

pub use raw::EventType;

/// Records an Event about `regarding`.
pub fn publish(
    regarding: &ObjectReference,
    event_type: EventType,
    reason: &str,
    action: &str,
    note: &str,
) -> Result<()> {
    raw::publish(&raw::Event {
        regarding: regarding.clone(),
        type_: event_type,
        reason: reason.to_string(),
        action: action.to_string(),
        note: note.to_string(),
    })
    .map_err(Error::from)
}

/// Records a `Normal` Event about `object`.
pub fn normal(object: &Object, reason: &str, action: &str, note: &str) -> Result<()> {
    publish(&object.reference(), EventType::Normal, reason, action, note)
}

/// Records a `Warning` Event about `object`.
pub fn warning(object: &Object, reason: &str, action: &str, note: &str) -> Result<()> {
    publish(
        &object.reference(),
        EventType::Warning,
        reason,
        action,
        note,
    )
}
