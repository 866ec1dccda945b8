//! A registration: what [`crate::SharedInformer::add_handler`] returns, the
//! owner of one handler's listener.
//!
//! Job: report whether the handler has synced (the informer's first list is
//! processed and the handler has handled its initial state), expose the
//! listener's counters, and unsubscribe the handler when removed or dropped.
//!
//! Invariant: once [`Registration::remove`] returns (or the registration is
//! dropped), the dispatcher no longer hands the listener anything, the listener
//! loop is stopped after the call in progress, and the informer's lease (if the
//! registry manages it) is released.

#![warn(missing_docs)]

use std::sync::{Arc, Weak};

use crate::listener::{ListenerShared, ListenerStats};
use crate::processor::{ListenerTask, Processor};

/// Owner of one listener: dropping it (or calling [`Registration::remove`])
/// unsubscribes the listener and stops its task.
pub struct Registration {
    shared: Arc<ListenerShared>,
    processor: Weak<Processor>,
    task: Option<ListenerTask>,
    on_remove: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("name", &self.shared.config.name)
            .field("id", &self.shared.id)
            .finish()
    }
}

impl Registration {
    pub(crate) fn new(
        shared: Arc<ListenerShared>,
        processor: Weak<Processor>,
        task: ListenerTask,
    ) -> Self {
        Self {
            shared,
            processor,
            task: Some(task),
            on_remove: None,
        }
    }

    /// The listener's name.
    pub fn name(&self) -> &str {
        &self.shared.config.name
    }

    /// The listener's live counters.
    pub fn stats(&self) -> Arc<ListenerStats> {
        self.shared.stats.clone()
    }

    /// Whether the informer has synced and this listener has handled its initial
    /// state.
    pub fn has_synced(&self) -> bool {
        self.shared.has_synced()
    }

    /// Keys currently pending after overflow (the O(keys) bookkeeping).
    pub fn pending_keys(&self) -> usize {
        self.shared.pending_keys()
    }

    /// Full notifications currently queued.
    pub fn queued(&self) -> usize {
        self.shared.queued()
    }

    /// Keys due a sync, waiting until no real change is (see
    /// [`crate::listener`]).
    pub fn pending_syncs(&self) -> usize {
        self.shared.pending_syncs()
    }

    /// Runs `f` once the listener has been removed (used to release the informer).
    #[cfg(feature = "client")]
    pub(crate) fn set_on_remove(&mut self, f: Box<dyn FnOnce() + Send + Sync>) {
        self.on_remove = Some(f);
    }

    /// Unsubscribes the listener and stops its task.
    pub fn remove(self) {
        drop(self);
    }

    fn detach(&mut self) {
        if let Some(p) = self.processor.upgrade() {
            p.remove(self.shared.id);
        }
        self.shared.close();
        if let Some(t) = self.task.take() {
            t.abort();
        }
        if let Some(f) = self.on_remove.take() {
            f();
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.detach();
    }
}
