//! The processor: HandleDeltas plus the set of listeners of one informer.
//!
//! Job: apply each popped key's deltas to the Indexer, turn them into
//! notifications and hand each to every listener; add and remove listeners at
//! runtime; decide which listeners are due a resync.
//!
//! Invariants:
//! - I2: for every delta the Indexer is updated before any listener is told.
//! - I1: distribution only calls `ListenerShared::push`, which never waits for a
//!   consumer; the dispatcher never awaits anything while holding the gate.
//! - I6: adding a listener takes its snapshot and registers it under the gate,
//!   so it sees every change exactly once: in the snapshot or as a live event.
//!   A listener with an ownership predicate takes that predicate in the same
//!   step, so its snapshot and its live events follow one predicate.

#![warn(missing_docs)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::delta_fifo::{DeltaType, Popped};
use crate::handler::{Handler, HandlerOptions, HandlerOptionsError};
use crate::indexer::Indexer;
use crate::listener::{run_listener, DispatchGate, ListenerShared, ListenerStatsSnapshot};
use crate::notification::{EventKind, Notification};
use crate::registration::Registration;

/// Counters of the dispatcher.
#[derive(Debug, Default)]
pub struct ProcessorStats {
    /// Deltas applied to the Indexer.
    pub deltas: AtomicU64,
    /// Notifications built and distributed.
    pub notifications: AtomicU64,
}

/// A copy of [`ProcessorStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ProcessorStatsSnapshot {
    /// See [`ProcessorStats::deltas`].
    pub deltas: u64,
    /// See [`ProcessorStats::notifications`].
    pub notifications: u64,
    /// Listeners registered now.
    pub listeners: u64,
}

/// HandleDeltas and the listeners of one informer.
pub struct Processor {
    resource: Arc<str>,
    gate: Arc<DispatchGate>,
    listeners: RwLock<Vec<Arc<ListenerShared>>>,
    next_id: AtomicU64,
    stats: ProcessorStats,
}

impl std::fmt::Debug for Processor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Processor")
            .field("resource", &self.resource)
            .field("listeners", &self.listeners.read().len())
            .finish()
    }
}

impl Processor {
    /// A processor for `resource` whose cache is `indexer`.
    pub fn new(resource: impl Into<Arc<str>>, indexer: Arc<Indexer>) -> Arc<Self> {
        Arc::new(Self {
            resource: resource.into(),
            gate: Arc::new(DispatchGate {
                lock: Mutex::new(()),
                indexer,
                synced: AtomicBool::new(false),
            }),
            listeners: RwLock::new(Vec::new()),
            next_id: AtomicU64::new(1),
            stats: ProcessorStats::default(),
        })
    }

    /// The resource id.
    pub fn resource(&self) -> &Arc<str> {
        &self.resource
    }

    /// The cache this processor writes.
    pub fn indexer(&self) -> &Arc<Indexer> {
        &self.gate.indexer
    }

    /// HandleDeltas: applies one popped key's deltas to the Indexer, then
    /// notifies every listener, delta by delta (I2, I1), and wakes the
    /// listeners that got something.
    pub fn handle_deltas(&self, popped: &Popped) {
        self.handle_deltas_unwoken(popped);
        self.wake_listeners();
    }

    /// [`Processor::handle_deltas`] without waking the listeners: the
    /// informer's loop runs several keys, then calls
    /// [`Processor::wake_listeners`] once for them.
    pub fn handle_deltas_unwoken(&self, popped: &Popped) {
        let _g = self.gate.lock.lock();
        let listeners = self.listeners.read();
        let ix = &self.gate.indexer;
        for d in &popped.deltas {
            self.stats.deltas.fetch_add(1, Ordering::Relaxed);
            let n = match d.kind {
                DeltaType::Added | DeltaType::Updated | DeltaType::Replaced | DeltaType::Sync => {
                    let old = ix.upsert(&popped.key, d.object.clone());
                    let (kind, initial) = match (&old, d.kind) {
                        (Some(_), DeltaType::Sync) => (EventKind::Synced, false),
                        (Some(_), _) => (EventKind::Updated, false),
                        (None, _) => (EventKind::Added, popped.initial),
                    };
                    Notification {
                        kind,
                        resource: self.resource.clone(),
                        key: popped.key.clone(),
                        object: d.object.clone(),
                        old,
                        in_initial_list: initial,
                        final_state_unknown: false,
                    }
                }
                DeltaType::Evicted => {
                    // Out of this replica's shard: gone from the cache, and
                    // no handler is told (the object still exists).
                    ix.remove(&popped.key);
                    continue;
                }
                DeltaType::Deleted => {
                    // A delete for a key not cached was never announced: drop it.
                    if ix.remove(&popped.key).is_none() {
                        continue;
                    }
                    Notification {
                        kind: EventKind::Deleted,
                        resource: self.resource.clone(),
                        key: popped.key.clone(),
                        object: d.object.clone(),
                        old: None,
                        in_initial_list: false,
                        final_state_unknown: d.final_state_unknown,
                    }
                }
            };
            let n = Arc::new(n);
            let is_sync = d.kind == DeltaType::Sync && n.kind == EventKind::Synced;
            self.stats.notifications.fetch_add(1, Ordering::Relaxed);
            for l in listeners.iter() {
                l.push(&n, is_sync);
            }
        }
    }

    /// Wakes every listener that was handed a notification since its last
    /// wake-up.
    pub fn wake_listeners(&self) {
        for l in self.listeners.read().iter() {
            l.flush_wake();
        }
    }

    /// Records that the informer has synced (first list popped and processed).
    pub fn mark_synced(&self) {
        let _g = self.gate.lock.lock();
        self.gate.synced.store(true, Ordering::Release);
        for l in self.listeners.read().iter() {
            l.mark_informer_synced_locked();
        }
    }

    /// Whether [`Processor::mark_synced`] has been called.
    pub fn has_synced(&self) -> bool {
        self.gate.synced.load(Ordering::Acquire)
    }

    /// Adds a listener whose notifications go to `handler`, on a task of its own
    /// (or on the dedicated thread the handler asks for, see
    /// [`Handler::own_thread`]). It first receives the current cache as `Added`
    /// with `in_initial_list`, then live events, with no gap and no duplicate
    /// (I6).
    pub fn add_handler<H: Handler>(
        self: &Arc<Self>,
        handler: H,
        options: HandlerOptions,
    ) -> Result<Registration, HandlerOptionsError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::new(ListenerShared::new(
            id,
            self.resource.clone(),
            options,
            self.gate.clone(),
        )?);
        if let Some(p) = shared.config.resync {
            *shared.next_resync.lock() = Some(Instant::now() + p);
        }
        let register = |owns: Option<Arc<dyn crate::ownership::Owns>>| {
            let _g = self.gate.lock.lock();
            if let Some(p) = owns {
                shared.install_owns(p);
            }
            shared.load_snapshot_locked();
            self.listeners.write().push(shared.clone());
        };
        match shared.config.ownership.clone() {
            // Attached under the ownership's change lock, so a change cannot
            // slip between the predicate it starts with and its attachment.
            Some(o) => o.attach(&shared, |p| register(Some(p))),
            None => register(None),
        }
        let task = spawn_listener(shared.clone(), handler);
        Ok(Registration::new(shared, Arc::downgrade(self), task))
    }

    pub(crate) fn remove(&self, id: u64) {
        let _g = self.gate.lock.lock();
        self.listeners.write().retain(|l| l.id != id);
    }

    /// Number of listeners.
    pub fn listener_count(&self) -> usize {
        self.listeners.read().len()
    }

    /// Marks which listeners are due a resync at `now` (only those receive the
    /// Sync notifications that follow). Returns whether any is due.
    pub fn should_resync(&self, now: Instant) -> bool {
        let mut any = false;
        for l in self.listeners.read().iter() {
            let Some(period) = l.config.resync else {
                l.resync_due.store(false, Ordering::Relaxed);
                continue;
            };
            let mut next = l.next_resync.lock();
            let due = match *next {
                Some(t) => now >= t,
                None => false,
            };
            if due || next.is_none() {
                *next = Some(now + period);
            }
            if due && l.sync_backlog() > 0 {
                // The previous resync's syncs are still waiting: this
                // handler cannot keep up with its period. Its syncs merge
                // (one per key) and still wait behind real changes.
                l.stats.resync_overruns.fetch_add(1, Ordering::Relaxed);
            }
            l.resync_due.store(due, Ordering::Relaxed);
            any |= due;
        }
        any
    }

    /// Counters.
    pub fn stats(&self) -> ProcessorStatsSnapshot {
        ProcessorStatsSnapshot {
            deltas: self.stats.deltas.load(Ordering::Relaxed),
            notifications: self.stats.notifications.load(Ordering::Relaxed),
            listeners: self.listeners.read().len() as u64,
        }
    }

    /// Stats of every listener, by listener name.
    pub fn listener_stats(&self) -> Vec<(String, ListenerStatsSnapshot)> {
        self.listeners
            .read()
            .iter()
            .map(|l| (l.config.name.clone(), l.stats.snapshot()))
            .collect()
    }
}

/// A running listener loop: a task on the async runtime, or a dedicated thread
/// driving it.
pub(crate) enum ListenerTask {
    Task(JoinHandle<()>),
    Thread(futures::future::AbortHandle),
}

impl ListenerTask {
    /// Stops the loop; a handler call in progress finishes first.
    pub(crate) fn abort(self) {
        match self {
            ListenerTask::Task(t) => t.abort(),
            ListenerTask::Thread(a) => a.abort(),
        }
    }
}

/// Starts the listener loop where the handler wants it.
fn spawn_listener<H: Handler>(shared: Arc<ListenerShared>, handler: H) -> ListenerTask {
    let Some(name) = handler.own_thread() else {
        return ListenerTask::Task(tokio::spawn(run_listener(shared, handler)));
    };
    let (abort, registration) = futures::future::AbortHandle::new_pair();
    // The handler moves to the thread through this slot, so that it is still
    // here to fall back on if the thread cannot be started.
    let slot = Arc::new(Mutex::new(Some((shared.clone(), handler))));
    let theirs = slot.clone();
    let started = std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let Some((shared, handler)) = theirs.lock().take() else {
                return;
            };
            let run = futures::future::Abortable::new(run_listener(shared, handler), registration);
            let _ = futures::executor::block_on(run);
        });
    match started {
        Ok(_) => ListenerTask::Thread(abort),
        Err(e) => {
            tracing::warn!(listener = %name, error = %e, "cannot start the listener's thread; running it as a task");
            let (shared, handler) = slot.lock().take().expect("the thread never started");
            ListenerTask::Task(tokio::spawn(run_listener(shared, handler)))
        }
    }
}
