//! The unit that flows from the processor to each listener and on into a plugin.
//!
//! Invariant: a [`Notification`] is built once by the dispatcher and shared by
//! [`Arc`] across every listener; it is copied only when it enters a plugin's
//! linear memory.

use std::sync::Arc;

use crate::object::ObjectRef;

/// What happened to an object (mirrors the WIT `event-kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// The object appeared: created, first listed, part of a replay, or moved
    /// into a handler's namespace or label selector.
    Added,
    /// The object changed; `old` holds the previous state when known.
    Updated,
    /// The object is gone; `object` holds its last known state.
    Deleted,
    /// A periodic resync re-delivered the cached state; nothing changed.
    Synced,
}

impl EventKind {
    /// Lower-case name used in metrics and the report.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Added => "added",
            EventKind::Updated => "updated",
            EventKind::Deleted => "deleted",
            EventKind::Synced => "synced",
        }
    }
}

/// One event for one object, as a plugin will see it.
#[derive(Debug, Clone)]
pub struct Notification {
    /// What happened.
    pub kind: EventKind,
    /// Resource id, for example `v1/pods`.
    pub resource: Arc<str>,
    /// `namespace/name` or `name`.
    pub key: Arc<str>,
    /// New state; for a delete, the last known state.
    pub object: ObjectRef,
    /// Previous state for an update, when known.
    pub old: Option<ObjectRef>,
    /// Part of the replay into a new, reloaded or restarted plugin.
    pub in_initial_list: bool,
    /// A delete synthesised because the real one was missed.
    pub final_state_unknown: bool,
}

/// Shared handle to a notification.
pub type NotificationRef = Arc<Notification>;
