//! A listener: one consumer's bounded queue between the dispatcher and its
//! [`Handler`], with O(keys) overflow bookkeeping.
//!
//! Job: accept notifications from the dispatcher without ever blocking it, feed
//! them in order to the handler from the listener's own task (one at a time, or
//! in batches of what is already queued when the handler takes batches; see
//! [`Handler::max_batch`]), and, when the
//! handler falls behind, stop storing notifications and remember only which keys
//! changed, so that it later receives the final state of each such key.
//!
//! Invariants:
//! - I1: `ListenerShared::push` is O(1) (one map or queue operation under the
//!   listener's own mutex) and never awaits anything.
//! - I3: while the queue has room and no key is pending, real changes (adds,
//!   updates, deletes) are queued in dispatch order; per-key order always holds
//!   (a pending key is resolved only after every notification queued before it
//!   was taken).
//! - Resync never delays a real change: a Synced notification is not queued but
//!   recorded as a key due a sync (one entry per key, merged into a pending
//!   change of the same key, and dropped when a real change for the key
//!   follows). Syncs are delivered only when nothing else is waiting (no
//!   replay, no queued notification, no pending key), resolved against the
//!   Indexer like pending keys. So after churn stops a handler converges
//!   within about (pending keys) / (its event rate), whatever its resync
//!   period; one whose resync period is shorter than the time it needs to go
//!   through the cache keeps getting syncs in the gaps, and each resync that
//!   comes due while the previous one's syncs are still waiting is counted in
//!   `resync_overruns`.
//! - I4: at most `capacity` full notifications are held, counting those queued
//!   and the batch in the handler's hands; on overflow the only growth is one
//!   `DirtyEntry` per distinct key, and syncs due cost one key each.
//! - I5: a pending key is resolved against the Indexer while the dispatcher is
//!   excluded, to the current object (`Added` if the handler never knew the key,
//!   `Updated` if it did) or, for a key it knew that is gone, a `Deleted` flagged
//!   `final_state_unknown`.
//! - I6: a replay (on subscribe or after [`Delivery::Restarted`]) is a snapshot
//!   taken while the dispatcher is excluded; it supersedes everything queued or
//!   pending, and every later notification follows it. A listener that exists
//!   before the informer's first list is complete gets that list the same way:
//!   as one snapshot when the informer syncs (adds flagged `in_initial_list`,
//!   in cache order rather than list order).
//! - Ownership (see [`crate::ownership`]): a listener registered with an
//!   [`crate::ownership::Ownership`] queues only notifications of objects its
//!   predicate owns, and a change of predicate is applied while the dispatcher
//!   is excluded, so that a gained key's replay and its live events neither
//!   overlap nor leave a gap. Syncs follow the predicate too: a resync
//!   delivers only owned keys, and a batch of syncs counts as the batch in the
//!   handler's hands, which a hand-over waits for.

#![warn(missing_docs)]

use std::collections::hash_map::Entry as MapEntry;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::latency::LatencyHistogram;

use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use tokio::sync::Notify;
use wasm_informer_selector::LabelSelector;

use crate::handler::{Delivery, Handler, HandlerOptions, HandlerOptionsError};
use crate::indexer::Indexer;
use crate::notification::{EventKind, Notification, NotificationRef};
use crate::object::{Object, ObjectMeta, ObjectRef};
use crate::ownership::Owns;

/// Live counters of one listener; plain atomics, readable at any time.
#[derive(Debug, Default)]
pub struct ListenerStats {
    /// Handled notifications of kind added.
    pub added: AtomicU64,
    /// Handled notifications of kind updated.
    pub updated: AtomicU64,
    /// Handled notifications of kind deleted.
    pub deleted: AtomicU64,
    /// Handled notifications of kind synced.
    pub synced: AtomicU64,
    /// Of those, replayed adds (`in_initial_list` from a snapshot).
    pub replayed: AtomicU64,
    /// Notifications that did not fit in the queue.
    pub overflowed: AtomicU64,
    /// Overflowed notifications merged into a key already pending.
    pub coalesced: AtomicU64,
    /// Current queue depth: full notifications held, queued or in the
    /// handler's hands (at most the capacity, I4).
    pub queue_depth: AtomicU64,
    /// Largest queue depth seen.
    pub max_depth: AtomicU64,
    /// Keys currently pending after overflow (the O(keys) bookkeeping).
    pub pending_keys: AtomicU64,
    /// Largest number of pending keys seen.
    pub max_pending_keys: AtomicU64,
    /// Keys due a sync, waiting behind real changes.
    pub pending_syncs: AtomicU64,
    /// Resyncs that came due while syncs of the previous one were still
    /// waiting: the handler cannot keep up with its resync period.
    pub resync_overruns: AtomicU64,
    /// Handler error results.
    pub handler_errors: AtomicU64,
    /// `Delivery::Restarted` results (each followed by a replay).
    pub restarts: AtomicU64,
    /// Handler panics (the listener closes after one).
    pub panics: AtomicU64,
    /// Time from a notification entering the listener (queued, resolved or
    /// snapshotted) to its handler returning.
    pub latency: LatencyHistogram,
}

/// A copy of [`ListenerStats`] at one moment.
/// Field names follow the report JSON where they overlap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ListenerStatsSnapshot {
    /// See [`ListenerStats::added`].
    pub added: u64,
    /// See [`ListenerStats::updated`].
    pub updated: u64,
    /// See [`ListenerStats::deleted`].
    pub deleted: u64,
    /// See [`ListenerStats::synced`].
    pub synced: u64,
    /// See [`ListenerStats::replayed`].
    pub replayed: u64,
    /// See [`ListenerStats::overflowed`].
    pub overflowed: u64,
    /// See [`ListenerStats::coalesced`].
    pub coalesced: u64,
    /// See [`ListenerStats::queue_depth`].
    pub queue_depth: u64,
    /// See [`ListenerStats::max_depth`].
    pub max_depth: u64,
    /// See [`ListenerStats::pending_keys`].
    pub pending_keys: u64,
    /// See [`ListenerStats::max_pending_keys`].
    pub max_pending_keys: u64,
    /// See [`ListenerStats::pending_syncs`].
    pub pending_syncs: u64,
    /// See [`ListenerStats::resync_overruns`].
    pub resync_overruns: u64,
    /// See [`ListenerStats::handler_errors`].
    pub handler_errors: u64,
    /// See [`ListenerStats::restarts`].
    pub restarts: u64,
    /// See [`ListenerStats::panics`].
    pub panics: u64,
    /// Median latency from entering the listener to the handler returning, µs.
    pub latency_p50_us: u64,
    /// 99th percentile of that latency, µs.
    pub latency_p99_us: u64,
}

impl ListenerStats {
    /// Reads every counter.
    pub fn snapshot(&self) -> ListenerStatsSnapshot {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ListenerStatsSnapshot {
            added: r(&self.added),
            updated: r(&self.updated),
            deleted: r(&self.deleted),
            synced: r(&self.synced),
            replayed: r(&self.replayed),
            overflowed: r(&self.overflowed),
            coalesced: r(&self.coalesced),
            queue_depth: r(&self.queue_depth),
            max_depth: r(&self.max_depth),
            pending_keys: r(&self.pending_keys),
            max_pending_keys: r(&self.max_pending_keys),
            pending_syncs: r(&self.pending_syncs),
            resync_overruns: r(&self.resync_overruns),
            handler_errors: r(&self.handler_errors),
            restarts: r(&self.restarts),
            panics: r(&self.panics),
            latency_p50_us: self.latency.quantile_us(0.5),
            latency_p99_us: self.latency.quantile_us(0.99),
        }
    }

    fn delivered(&self, kind: EventKind) {
        let c = match kind {
            EventKind::Added => &self.added,
            EventKind::Updated => &self.updated,
            EventKind::Deleted => &self.deleted,
            EventKind::Synced => &self.synced,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// What the listener remembers about a key whose notifications overflowed.
#[derive(Debug)]
pub(crate) struct DirtyEntry {
    /// The handler knew the key (had been told it exists) before the first
    /// overflowed notification.
    known: bool,
    /// The object of the last overflowed delete, if any.
    tomb: Option<ObjectRef>,
}

/// The dispatcher's exclusion: held while the Indexer is updated and a
/// notification distributed, and by a listener while it takes a snapshot or
/// resolves pending keys, so both see the cache exactly between two dispatches.
pub(crate) struct DispatchGate {
    pub(crate) lock: Mutex<()>,
    pub(crate) indexer: Arc<Indexer>,
    /// The informer's first list has been popped and processed.
    pub(crate) synced: AtomicBool,
}

#[derive(Default)]
struct State {
    replay: VecDeque<ObjectRef>,
    queue: VecDeque<(NotificationRef, Instant)>,
    /// Queued notifications in the batch the handler holds (there is one
    /// batch at a time); they count against the capacity (I4). Replayed ones
    /// do not: they are built from the snapshot a batch at a time.
    in_flight: usize,
    /// When the pending replay was snapshotted.
    replay_since: Option<Instant>,
    dirty: HashMap<Arc<str>, DirtyEntry>,
    /// Keys due a sync, in the order they became due (with stale entries for
    /// keys since taken out of `sync_set`, skipped when popped).
    sync_order: VecDeque<Arc<str>>,
    /// Keys due a sync: one entry per key.
    sync_set: HashSet<Arc<str>>,
    closed: bool,
    /// Items made available (replay + queued), and items handled.
    accepted: u64,
    consumed: u64,
    /// Set when the informer has synced and the listener got the cache:
    /// HasSynced needs `consumed >= target`.
    sync_target: Option<u64>,
    /// Objects of the batch in the handler's hands (empty when idle), so that
    /// an ownership change knows whether it must wait for that batch.
    in_hand: Vec<ObjectRef>,
    /// Batches taken, and the number of the last one finished.
    batch_seq: u64,
    done_seq: u64,
    /// An ownership change whose predicates are being called on the cache.
    walk: Option<Walk>,
}

/// An ownership change under way (see [`ListenerShared::rebase`]).
struct Walk {
    previous: Arc<dyn Owns>,
    /// Gained keys that had an event since the snapshot: not replayed.
    seen: HashSet<String>,
    /// A replay of the whole cache replaced everything meanwhile.
    superseded: bool,
}

/// What an ownership change did to one listener.
pub(crate) struct Rebased {
    /// Cached keys queued as a replay.
    pub(crate) gained: u64,
    /// Cached keys no longer delivered.
    pub(crate) released: u64,
    /// The batch in the handler's hands holds a key no longer owned: the
    /// change is complete once batch number `wait_for` is finished.
    pub(crate) wait_for: Option<u64>,
}

/// The part of a listener shared between the dispatcher and its task.
pub(crate) struct ListenerShared {
    pub(crate) id: u64,
    pub(crate) config: HandlerOptions,
    resource: Arc<str>,
    selector: Option<LabelSelector>,
    state: Mutex<State>,
    notify: Notify,
    /// The dispatcher queued something since its last wake-up of this
    /// listener's task; [`ListenerShared::flush_wake`] wakes it once for all.
    wake_pending: AtomicBool,
    pub(crate) stats: Arc<ListenerStats>,
    gate: Arc<DispatchGate>,
    synced: AtomicBool,
    /// Set by the processor when this listener is due a resync.
    pub(crate) resync_due: AtomicBool,
    pub(crate) next_resync: Mutex<Option<tokio::time::Instant>>,
    /// The ownership predicate this listener applies (`None`: owns
    /// everything). Changed only with the dispatcher excluded.
    owns: RwLock<Option<Arc<dyn Owns>>>,
    /// Signalled when a batch is finished or the listener closes.
    finished: Notify,
    /// A hand-over walk is under way (its state is in `State::walk`).
    walking: AtomicBool,
}

impl ListenerShared {
    pub(crate) fn new(
        id: u64,
        resource: Arc<str>,
        config: HandlerOptions,
        gate: Arc<DispatchGate>,
    ) -> Result<Self, HandlerOptionsError> {
        let selector = config.validate()?;
        Ok(Self {
            id,
            resource,
            selector,
            state: Mutex::new(State::default()),
            notify: Notify::new(),
            wake_pending: AtomicBool::new(false),
            stats: Arc::new(ListenerStats::default()),
            gate,
            synced: AtomicBool::new(false),
            resync_due: AtomicBool::new(false),
            next_resync: Mutex::new(None),
            owns: RwLock::new(None),
            finished: Notify::new(),
            walking: AtomicBool::new(false),
            config,
        })
    }

    /// Installs the ownership predicate of a listener not yet registered with
    /// the processor.
    pub(crate) fn install_owns(&self, p: Arc<dyn Owns>) {
        *self.owns.write() = Some(p);
    }

    /// Whether this listener's ownership predicate owns `o`.
    fn owned(&self, o: &Object) -> bool {
        self.owns
            .read()
            .as_ref()
            .is_none_or(|p| p.owns(&self.resource, o))
    }

    /// Drops a notification of a key this listener does not own. An update
    /// that brings an object into ownership (its controller changed) becomes
    /// an add; one that takes it out is dropped, like any released key.
    fn keep_owned(&self, n: NotificationRef) -> Option<NotificationRef> {
        let guard = self.owns.read();
        let Some(p) = guard.as_ref() else {
            return Some(n);
        };
        let new_in = p.owns(&self.resource, &n.object);
        if n.kind != EventKind::Updated {
            return new_in.then_some(n);
        }
        let old_in = n.old.as_ref().map_or(new_in, |o| p.owns(&self.resource, o));
        match (old_in, new_in) {
            (_, false) => None,
            (true, true) => Some(n),
            (false, true) => Some(Arc::new(Notification {
                kind: EventKind::Added,
                old: None,
                ..(*n).clone()
            })),
        }
    }

    /// Applies a new ownership predicate (the caller holds no gate). With the
    /// dispatcher excluded, and in time O(what the listener holds, not the
    /// cache): installs `next`, drops what is queued, pending or replayed for
    /// keys `next` does not own, takes a snapshot of the cache and starts a
    /// walk. Then, with the dispatcher running, it calls the predicates on
    /// the snapshot (the O(cache) part) and queues as a replay the cached
    /// objects of keys `next` owns and `previous` did not. A gained key that
    /// had an event since the snapshot is not replayed: its first event is
    /// delivered as its add (see [`ListenerShared::note_walked`]), so it still
    /// reaches the handler as one add of its current state, then its live
    /// events.
    pub(crate) fn rebase(&self, previous: &Arc<dyn Owns>, next: &Arc<dyn Owns>) -> Rebased {
        let res: &str = &self.resource;
        let (snapshot, wait_for) = {
            let _gate = self.gate.lock.lock();
            *self.owns.write() = Some(next.clone());
            let informer_synced = self.gate.synced.load(Ordering::Acquire);
            let mut st = self.state.lock();
            if st.closed {
                return Rebased {
                    gained: 0,
                    released: 0,
                    wait_for: None,
                };
            }
            let before = st.queue.len() + st.replay.len();
            st.queue.retain(|(n, _)| next.owns(res, &n.object));
            st.replay.retain(|o| next.owns(res, o));
            let dropped = before - (st.queue.len() + st.replay.len());
            st.consumed += dropped as u64;
            let indexer = &self.gate.indexer;
            st.dirty.retain(|key, e| {
                let obj = indexer
                    .get(key)
                    .or_else(|| e.tomb.clone())
                    .unwrap_or_else(|| tombstone(key));
                next.owns(res, &obj)
            });
            // Syncs due for released keys are never delivered: resolve_syncs
            // checks the predicate in force.
            let wait_for = st
                .in_hand
                .iter()
                .any(|o| !next.owns(res, o))
                .then_some(st.batch_seq);
            let snapshot = informer_synced.then(|| {
                st.walk = Some(Walk {
                    previous: previous.clone(),
                    seen: HashSet::new(),
                    superseded: false,
                });
                self.walking.store(true, Ordering::Release);
                self.gate.indexer.snapshot()
            });
            self.check_synced(&st);
            self.set_depth(&st);
            (snapshot, wait_for)
        };
        // The dispatcher runs again: the predicates on the whole cache.
        let mut gained = Vec::new();
        let mut released = 0u64;
        for o in snapshot.unwrap_or_default() {
            if !self.wants(&o) {
                continue;
            }
            match (previous.owns(res, &o), next.owns(res, &o)) {
                (false, true) => gained.push(o),
                (true, false) => released += 1,
                _ => {}
            }
        }
        let mut st = self.state.lock();
        let walk = st.walk.take();
        self.walking.store(false, Ordering::Release);
        let Some(walk) = walk.filter(|w| !w.superseded && !st.closed) else {
            // Closed, or a replay of the whole cache replaced everything.
            drop(st);
            self.notify.notify_one();
            return Rebased {
                gained: 0,
                released,
                wait_for,
            };
        };
        gained.retain(|o| !walk.seen.contains(o.key().as_str()));
        let n_gained = gained.len() as u64;
        if !gained.is_empty() {
            if st.replay.is_empty() {
                st.replay_since = Some(Instant::now());
            }
            st.accepted += n_gained;
            st.replay.extend(gained);
        }
        self.check_synced(&st);
        self.set_depth(&st);
        drop(st);
        self.notify.notify_one();
        Rebased {
            gained: n_gained,
            released,
            wait_for,
        }
    }

    /// During a hand-over walk: records the first event since the snapshot
    /// of a key the walk will find gained (its cached state then was in this
    /// listener's view, owned by the new predicate and not the previous one),
    /// so that the walk does not replay that stale state. Returns whether
    /// this is that event: the caller delivers it as the key's add (or drops
    /// it, a delete of a key the handler never knew).
    fn note_walked(&self, n: &Notification) -> bool {
        let mut st = self.state.lock();
        let Some(walk) = st.walk.as_mut() else {
            return false;
        };
        if walk.seen.contains(&*n.key) {
            return false;
        }
        let at_snapshot = match n.kind {
            EventKind::Added => None,
            EventKind::Updated => n.old.as_ref(),
            EventKind::Deleted | EventKind::Synced => Some(&n.object),
        };
        let res: &str = &self.resource;
        let owned_now = self.owns.read().clone();
        let gained = at_snapshot.is_some_and(|o| {
            self.wants(o)
                && owned_now.as_ref().is_none_or(|p| p.owns(res, o))
                && !walk.previous.owns(res, o)
        });
        if gained {
            walk.seen.insert(n.key.to_string());
        }
        gained
    }

    /// Resolves once batch number `seq` is finished or the listener closed.
    pub(crate) async fn batch_finished(&self, seq: u64) {
        loop {
            let finished = self.finished.notified();
            {
                let st = self.state.lock();
                if st.closed || st.done_seq >= seq {
                    return;
                }
            }
            finished.await;
        }
    }

    /// Whether the listener is closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.state.lock().closed
    }

    fn wants(&self, o: &Object) -> bool {
        if let Some(ns) = &self.config.namespace {
            if o.meta.namespace.as_deref() != Some(ns.as_str()) {
                return false;
            }
        }
        self.selector
            .as_ref()
            .is_none_or(|s| s.matches(&o.meta.labels))
    }

    /// Maps a notification onto this listener's filtered view: an update that
    /// leaves the view becomes a delete, one that enters it an add.
    fn filter(&self, n: &NotificationRef) -> Option<NotificationRef> {
        if self.config.namespace.is_none() && self.selector.is_none() {
            return Some(n.clone());
        }
        let new_in = self.wants(&n.object);
        match n.kind {
            EventKind::Added | EventKind::Deleted | EventKind::Synced => new_in.then(|| n.clone()),
            EventKind::Updated => {
                let old_in = n.old.as_ref().map(|o| self.wants(o)).unwrap_or(new_in);
                match (old_in, new_in) {
                    (true, true) => Some(n.clone()),
                    (false, false) => None,
                    (false, true) => Some(Arc::new(Notification {
                        kind: EventKind::Added,
                        old: None,
                        ..(**n).clone()
                    })),
                    (true, false) => Some(Arc::new(Notification {
                        kind: EventKind::Deleted,
                        old: None,
                        ..(**n).clone()
                    })),
                }
            }
        }
    }

    fn set_depth(&self, st: &State) {
        // Every queued notification held: waiting, and in the handler's hands.
        let d = (st.queue.len() + st.in_flight) as u64;
        self.stats.queue_depth.store(d, Ordering::Relaxed);
        self.stats.max_depth.fetch_max(d, Ordering::Relaxed);
        let p = st.dirty.len() as u64;
        self.stats.pending_keys.store(p, Ordering::Relaxed);
        self.stats.max_pending_keys.fetch_max(p, Ordering::Relaxed);
        self.stats
            .pending_syncs
            .store(st.sync_set.len() as u64, Ordering::Relaxed);
    }

    /// Hands a notification to this listener. Called by the dispatcher with the
    /// gate held. Never blocks on the consumer (I1). Until the informer's first
    /// list is complete nothing is taken: the listener gets that list as one
    /// snapshot when the informer syncs, instead of one notification per
    /// listed object through a queue it could only overflow. The task is woken
    /// by the dispatcher's next [`ListenerShared::flush_wake`].
    pub(crate) fn push(&self, n: &NotificationRef, is_sync: bool) {
        if !self.gate.synced.load(Ordering::Acquire) {
            return;
        }
        if is_sync && !self.resync_due.load(Ordering::Relaxed) {
            return;
        }
        let first_of_gained = self.walking.load(Ordering::Acquire) && self.note_walked(n);
        let Some(n) = self.filter(n) else { return };
        let Some(mut n) = self.keep_owned(n) else {
            return;
        };
        let mut is_sync = is_sync;
        if first_of_gained {
            // The handler never knew this key: its first event is its add.
            match n.kind {
                EventKind::Added => {}
                EventKind::Deleted => return,
                EventKind::Updated | EventKind::Synced => {
                    n = Arc::new(Notification {
                        kind: EventKind::Added,
                        old: None,
                        in_initial_list: true,
                        ..(*n).clone()
                    });
                    is_sync = false;
                }
            }
        }
        let mut st = self.state.lock();
        if st.closed {
            return;
        }
        if is_sync && n.kind == EventKind::Synced {
            // Deferred behind real changes, merged into a pending change of
            // the same key, one entry per key.
            if !st.dirty.contains_key(&n.key) && st.sync_set.insert(n.key.clone()) {
                st.sync_order.push_back(n.key.clone());
                compact_syncs(&mut st);
            }
            self.set_depth(&st);
            drop(st);
            self.wake_pending.store(true, Ordering::Release);
            return;
        }
        if !st.sync_set.is_empty() {
            // A real change supersedes a sync of the same key.
            st.sync_set.remove(&n.key);
        }
        if st.dirty.is_empty() && st.queue.len() + st.in_flight < self.config.queue_capacity {
            st.queue.push_back((n, Instant::now()));
            st.accepted += 1;
        } else {
            self.stats.overflowed.fetch_add(1, Ordering::Relaxed);
            let deleted = n.kind == EventKind::Deleted;
            match st.dirty.entry(n.key.clone()) {
                MapEntry::Occupied(mut e) => {
                    self.stats.coalesced.fetch_add(1, Ordering::Relaxed);
                    if deleted {
                        if e.get().known {
                            e.get_mut().tomb = Some(n.object.clone());
                        } else {
                            // Added and deleted while pending: the handler never
                            // needs to hear of it.
                            e.remove();
                        }
                    }
                }
                MapEntry::Vacant(v) => {
                    v.insert(DirtyEntry {
                        known: n.kind != EventKind::Added,
                        tomb: deleted.then(|| n.object.clone()),
                    });
                }
            }
        }
        self.set_depth(&st);
        drop(st);
        self.wake_pending.store(true, Ordering::Release);
    }

    /// Wakes the listener's task if [`ListenerShared::push`] queued anything
    /// since the last call. The dispatcher calls it once per run of deltas,
    /// so a handler that keeps up is woken once per run, not once per event.
    pub(crate) fn flush_wake(&self) {
        if self.wake_pending.swap(false, Ordering::AcqRel) {
            self.notify.notify_one();
        }
    }

    /// Replaces whatever is queued or pending with a snapshot of the cache (I6).
    /// Before the informer's first list is complete the snapshot is empty: the
    /// whole list follows as one snapshot when the informer syncs
    /// ([`ListenerShared::mark_informer_synced_locked`]). The caller holds the
    /// gate.
    pub(crate) fn load_snapshot_locked(&self) {
        let informer_synced = self.gate.synced.load(Ordering::Acquire);
        let snap: Vec<ObjectRef> = if informer_synced {
            self.gate
                .indexer
                .snapshot()
                .into_iter()
                .filter(|o| self.wants(o) && self.owned(o))
                .collect()
        } else {
            Vec::new()
        };
        let mut st = self.state.lock();
        if let Some(w) = st.walk.as_mut() {
            w.superseded = true;
        }
        // Queued items are superseded by the snapshot: count them as consumed.
        st.consumed += st.queue.len() as u64 + st.replay.len() as u64;
        st.queue.clear();
        st.dirty.clear();
        st.sync_set.clear();
        st.sync_order.clear();
        st.accepted += snap.len() as u64;
        st.replay = snap.into();
        st.replay_since = Some(Instant::now());
        if informer_synced && !self.synced.load(Ordering::Relaxed) {
            st.sync_target = Some(st.accepted);
        }
        self.check_synced(&st);
        self.set_depth(&st);
        drop(st);
        self.notify.notify_one();
    }

    /// Records that the informer has synced: the listener, which was given
    /// nothing while the first list was processed, now gets the whole cache as
    /// its initial state, and is synced once it has handled it. The caller
    /// holds the gate.
    pub(crate) fn mark_informer_synced_locked(&self) {
        self.load_snapshot_locked();
    }

    fn check_synced(&self, st: &State) {
        if let Some(t) = st.sync_target {
            if st.consumed >= t {
                self.synced.store(true, Ordering::Release);
            }
        }
    }

    /// Whether the informer has synced and this listener has handled the initial
    /// state.
    pub(crate) fn has_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Stops delivery: [`ListenerShared::next`] returns `None`.
    pub(crate) fn close(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        st.queue.clear();
        st.dirty.clear();
        st.replay.clear();
        st.sync_set.clear();
        st.sync_order.clear();
        self.set_depth(&st);
        drop(st);
        self.notify.notify_one();
        self.finished.notify_waiters();
    }

    /// The next notifications for the handler, in order: at least one (waiting
    /// if there is none) and at most `max`, never more than already available.
    /// `None` once closed. They count against the capacity until
    /// [`ListenerShared::batch_done`].
    pub(crate) async fn next_batch(&self, max: usize) -> Option<Vec<(NotificationRef, Instant)>> {
        loop {
            let notified = self.notify.notified();
            {
                let mut st = self.state.lock();
                if st.closed {
                    return None;
                }
                let mut batch = Vec::new();
                let mut from_queue = 0;
                while batch.len() < max.max(1) {
                    match self.pop_locked(&mut st) {
                        Some((item, queued)) => {
                            batch.push(item);
                            from_queue += usize::from(queued);
                        }
                        None => break,
                    }
                }
                if !batch.is_empty() {
                    st.in_flight = from_queue;
                    st.batch_seq += 1;
                    st.in_hand = batch.iter().map(|(n, _)| n.object.clone()).collect();
                    self.set_depth(&st);
                    return Some(batch);
                }
                if !st.dirty.is_empty() {
                    drop(st);
                    self.resolve_pending();
                    continue;
                }
                if !st.sync_set.is_empty() {
                    drop(st);
                    let syncs = self.resolve_syncs(max.max(1));
                    if !syncs.is_empty() {
                        return Some(syncs);
                    }
                    continue;
                }
            }
            notified.await;
        }
    }

    /// Takes the next replayed object (as an add) or queued notification, and
    /// says whether it was queued.
    fn pop_locked(&self, st: &mut State) -> Option<((NotificationRef, Instant), bool)> {
        if let Some(obj) = st.replay.pop_front() {
            if st.replay.is_empty() {
                // A replay holds the whole cache once; its buffer is not kept
                // for the listener's life.
                st.replay = VecDeque::new();
            }
            let since = st.replay_since.unwrap_or_else(Instant::now);
            let n = Arc::new(Notification {
                kind: EventKind::Added,
                resource: self.resource.clone(),
                key: Arc::from(obj.key()),
                object: obj,
                old: None,
                in_initial_list: true,
                final_state_unknown: false,
            });
            return Some(((n, since), false));
        }
        st.queue.pop_front().map(|item| (item, true))
    }

    /// Turns pending keys into final-state notifications, at most `capacity` at a
    /// time, with the dispatcher excluded so the cache read is exactly the state
    /// after the last notification dispatched (I5).
    fn resolve_pending(&self) {
        let _gate = self.gate.lock.lock();
        let mut st = self.state.lock();
        if st.closed || !st.queue.is_empty() || !st.replay.is_empty() {
            return;
        }
        let now = Instant::now();
        // A key may resolve to two notifications (a delete and a re-create).
        let budget = (self.config.queue_capacity / 2).max(1);
        let keys: Vec<Arc<str>> = st.dirty.keys().take(budget).cloned().collect();
        for key in keys {
            let Some(entry) = st.dirty.remove(&key) else {
                continue;
            };
            let current = self.gate.indexer.get(&key).filter(|o| self.wants(o));
            if current.as_ref().is_some_and(|o| !self.owned(o)) {
                // Its controller changed while pending: no longer this
                // listener's key.
                continue;
            }
            let mk = |kind, object: ObjectRef, fsu| {
                Arc::new(Notification {
                    kind,
                    resource: self.resource.clone(),
                    key: key.clone(),
                    object,
                    old: None,
                    // The initial list never overflows (it arrives as a
                    // snapshot), so nothing resolved here is part of it.
                    in_initial_list: false,
                    final_state_unknown: fsu,
                })
            };
            match (current, entry.known) {
                (Some(obj), true) => {
                    let replaced = entry
                        .tomb
                        .as_ref()
                        .is_some_and(|t| t.meta.uid != obj.meta.uid);
                    if replaced {
                        let tomb = entry.tomb.clone().expect("checked");
                        st.queue
                            .push_back((mk(EventKind::Deleted, tomb, true), now));
                        st.queue.push_back((mk(EventKind::Added, obj, false), now));
                        st.accepted += 2;
                    } else {
                        st.queue
                            .push_back((mk(EventKind::Updated, obj, false), now));
                        st.accepted += 1;
                    }
                }
                (Some(obj), false) => {
                    st.queue.push_back((mk(EventKind::Added, obj, false), now));
                    st.accepted += 1;
                }
                (None, true) => {
                    let tomb = entry.tomb.unwrap_or_else(|| tombstone(&key));
                    st.queue
                        .push_back((mk(EventKind::Deleted, tomb, true), now));
                    st.accepted += 1;
                }
                (None, false) => {}
            }
        }
        self.set_depth(&st);
    }

    /// Takes up to `max` keys due a sync, when nothing else is waiting, and
    /// turns them into Synced notifications of the current cached objects,
    /// with the dispatcher excluded (as [`ListenerShared::resolve_pending`]).
    /// A key no longer cached, or no longer in this listener's view, has a
    /// real change of its own and gets no sync; a key the ownership predicate
    /// no longer owns gets none either.
    fn resolve_syncs(&self, max: usize) -> Vec<(NotificationRef, Instant)> {
        let _gate = self.gate.lock.lock();
        let mut st = self.state.lock();
        let mut out = Vec::new();
        if st.closed
            || !st.queue.is_empty()
            || !st.replay.is_empty()
            || !st.dirty.is_empty()
            || st.walk.is_some()
        {
            return out;
        }
        let now = Instant::now();
        while out.len() < max {
            let Some(key) = st.sync_order.pop_front() else {
                break;
            };
            if !st.sync_set.remove(&key) {
                continue;
            }
            let Some(obj) = self
                .gate
                .indexer
                .get(&key)
                .filter(|o| self.wants(o) && self.owned(o))
            else {
                continue;
            };
            out.push((
                Arc::new(Notification {
                    kind: EventKind::Synced,
                    resource: self.resource.clone(),
                    key,
                    object: obj.clone(),
                    old: Some(obj),
                    in_initial_list: false,
                    final_state_unknown: false,
                }),
                now,
            ));
        }
        if st.sync_set.is_empty() {
            // A resync's keys are the whole cache; their buffers are not kept
            // between resyncs.
            st.sync_order = VecDeque::new();
            st.sync_set = HashSet::new();
        }
        // Handed over directly: count them as accepted, as batch_done will
        // count them as consumed.
        st.accepted += out.len() as u64;
        st.in_flight = 0;
        if !out.is_empty() {
            // A batch like any other: an ownership change that releases one
            // of its keys waits for it (see `rebase`).
            st.batch_seq += 1;
            st.in_hand = out.iter().map(|(n, _)| n.object.clone()).collect();
        }
        self.set_depth(&st);
        out
    }

    /// Keys due a sync that have not been delivered yet.
    pub(crate) fn sync_backlog(&self) -> u64 {
        self.stats.pending_syncs.load(Ordering::Relaxed)
    }

    /// Counts one handled notification in the stats.
    fn record(&self, n: &Notification, delivery: &Delivery) {
        match delivery {
            Delivery::Restarted => {
                self.stats.restarts.fetch_add(1, Ordering::Relaxed);
            }
            Delivery::HandlerError(_) => {
                self.stats.handler_errors.fetch_add(1, Ordering::Relaxed);
                self.stats.delivered(n.kind);
            }
            Delivery::Ok => self.stats.delivered(n.kind),
        }
        if n.in_initial_list
            && n.kind == EventKind::Added
            && !matches!(delivery, Delivery::Restarted)
        {
            self.stats.replayed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Records that the handler is done with a batch of `len` notifications
    /// taken by [`ListenerShared::next_batch`] (handled, or superseded by a
    /// replay).
    fn batch_done(&self, len: usize) {
        let mut st = self.state.lock();
        st.in_flight = 0;
        st.in_hand.clear();
        st.done_seq = st.batch_seq;
        st.consumed += len as u64;
        self.set_depth(&st);
        self.check_synced(&st);
        drop(st);
        self.finished.notify_waiters();
    }

    /// Number of pending keys (the overflow bookkeeping), for tests.
    pub(crate) fn pending_keys(&self) -> usize {
        self.state.lock().dirty.len()
    }

    /// Number of full notifications held, for tests.
    pub(crate) fn queued(&self) -> usize {
        self.state.lock().queue.len()
    }

    /// Number of keys due a sync, for tests.
    pub(crate) fn pending_syncs(&self) -> usize {
        self.state.lock().sync_set.len()
    }
}

/// Drops the stale entries of `sync_order` once they outnumber the live ones,
/// so that it stays O(keys) however often syncs are superseded.
fn compact_syncs(st: &mut State) {
    if st.sync_order.len() <= 2 * st.sync_set.len() + 1024 {
        return;
    }
    let mut seen = HashSet::with_capacity(st.sync_set.len());
    let live = &st.sync_set;
    st.sync_order
        .retain(|k| live.contains(k) && seen.insert(k.clone()));
}

/// A minimal object standing for a deleted key whose last state was not kept.
fn tombstone(key: &str) -> ObjectRef {
    let (namespace, name) = match key.split_once('/') {
        Some((ns, n)) => (Some(ns.to_string()), n.to_string()),
        None => (None, key.to_string()),
    };
    let mut meta = serde_json::Map::new();
    meta.insert("name".into(), name.clone().into());
    if let Some(ns) = &namespace {
        meta.insert("namespace".into(), ns.clone().into());
    }
    let json = serde_json::json!({ "metadata": meta }).to_string();
    Arc::new(Object::new(
        ObjectMeta {
            namespace,
            name,
            ..ObjectMeta::default()
        },
        json.into_boxed_str(),
    ))
}

/// The listener's task: feeds notifications to the handler in order (in
/// batches of up to [`Handler::max_batch`]) and replays the cache into it after
/// [`Delivery::Restarted`].
/// A handler that panics is not called again: the listener closes (its queue is
/// freed and it stops accepting notifications) and `panics` counts it.
pub(crate) async fn run_listener<H: Handler>(shared: Arc<ListenerShared>, mut handler: H) {
    use futures::FutureExt;
    let max = handler.max_batch().max(1);
    while let Some(batch) = shared.next_batch(max).await {
        let notes: Vec<NotificationRef> = batch.iter().map(|(n, _)| n.clone()).collect();
        let handled = match std::panic::AssertUnwindSafe(handler.handle_batch(notes))
            .catch_unwind()
            .await
        {
            Ok(h) => h,
            Err(_) => {
                tracing::error!(listener = %shared.config.name, key = %batch[0].0.key, "handler panicked; listener closed");
                shared.stats.panics.fetch_add(1, Ordering::Relaxed);
                shared.close();
                return;
            }
        };
        for ((n, since), h) in batch.iter().zip(&handled) {
            shared
                .stats
                .latency
                .record(h.at.saturating_duration_since(*since));
            shared.record(n, &h.delivery);
        }
        let restarted = handled
            .last()
            .is_some_and(|h| h.delivery == Delivery::Restarted);
        let short = handled.len() < batch.len();
        if short && !restarted {
            // A handler that drops part of a batch without saying why is
            // treated as restarted: the replay restores what it missed (I5).
            tracing::warn!(
                listener = %shared.config.name,
                taken = batch.len(),
                handled = handled.len(),
                "handler returned early from a batch; replaying the cache"
            );
        }
        shared.batch_done(batch.len());
        if restarted || short {
            let _gate = shared.gate.lock.lock();
            shared.load_snapshot_locked();
        }
    }
}
