//! DeltaFIFO: the queue between the Reflector (sole producer) and HandleDeltas
//! (sole consumer), holding per-key lists of deltas.
//!
//! Job: accumulate deltas per object key, hand all of one key's deltas over as a
//! unit on pop, deduplicate repeated deletes, turn a list (Replace) into Replaced
//! deltas plus deletes for keys that vanished, and enqueue Sync deltas on resync.
//!
//! Invariants:
//! - a key is in the queue at most once, and it is in the queue iff it has deltas;
//! - deltas of one key stay in arrival order, and are never split across pops;
//! - after a Replace, every key known (in the Indexer, or queued) but absent from
//!   the list gets a final `Deleted` delta flagged `final_state_unknown` (I8: no
//!   phantoms);
//! - [`DeltaFifo::has_synced`] turns true only once every item queued by the first
//!   Replace has been popped *and* reported processed with [`DeltaFifo::done`];
//! - [`DeltaFifo::barrier`] resolves only once every key queued before it has
//!   been popped and processed.

#![warn(missing_docs)]

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::indexer::Indexer;
use crate::object::ObjectRef;

/// The kind of change a delta records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeltaType {
    /// Seen for the first time by a watch.
    Added,
    /// Changed, from a watch.
    Updated,
    /// Gone.
    Deleted,
    /// Present in a (re)list.
    Replaced,
    /// Periodic resync of a cached object.
    Sync,
    /// Dropped from the cache because its shard range was lost (see
    /// [`DeltaFifo::evict`]): the object still exists, and no handler is
    /// told.
    Evicted,
}

impl DeltaType {
    /// Whether the key leaves the cache (a delete or an eviction).
    pub fn removes(self) -> bool {
        matches!(self, DeltaType::Deleted | DeltaType::Evicted)
    }
}

/// One recorded change.
#[derive(Debug, Clone)]
pub struct Delta {
    /// What happened.
    pub kind: DeltaType,
    /// The object after the change (for a delete, the last known state).
    pub object: ObjectRef,
    /// A delete the Reflector inferred from a relist rather than observed
    /// (client-go's `DeletedFinalStateUnknown`).
    pub final_state_unknown: bool,
}

impl Delta {
    fn new(kind: DeltaType, object: ObjectRef) -> Self {
        Self {
            kind,
            object,
            final_state_unknown: false,
        }
    }
}

/// What [`DeltaFifo::pop_process`] hands over: every queued delta of one key.
#[derive(Debug)]
pub struct Popped {
    /// The object key.
    pub key: Arc<str>,
    /// Oldest first; never empty.
    pub deltas: Vec<Delta>,
    /// Part of the first list's population (counts towards HasSynced).
    pub initial: bool,
}

#[derive(Default)]
struct State {
    items: HashMap<Arc<str>, Vec<Delta>>,
    queue: VecDeque<Arc<str>>,
    populated: bool,
    initial_remaining: usize,
    initial_in_flight: usize,
    /// An empty first list was reported by [`DeltaFifo::pop_process`].
    empty_list_reported: bool,
    closed: bool,
    /// Queue entries ever appended (for [`DeltaFifo::barrier`]).
    enqueued: u64,
}

impl State {
    /// Appends a delta to `key`, deduplicating a repeated delete.
    fn queue_action(&mut self, key: &Arc<str>, delta: Delta) {
        let deltas = self.items.entry(key.clone()).or_default();
        let was_empty = deltas.is_empty();
        match deltas.last_mut() {
            // A key already leaving the cache is not evicted again.
            Some(last) if last.kind.removes() && delta.kind == DeltaType::Evicted => {}
            Some(last) if last.kind == DeltaType::Deleted && delta.kind == DeltaType::Deleted => {
                // Keep the observed delete over an inferred one; otherwise the newer.
                if !delta.final_state_unknown || last.final_state_unknown {
                    *last = delta;
                }
            }
            _ => deltas.push(delta),
        }
        if was_empty {
            self.queue.push_back(key.clone());
            self.enqueued += 1;
        }
    }
}

fn take_next(s: &mut State, processed: &tokio::sync::watch::Sender<u64>) -> Option<Popped> {
    while let Some(key) = s.queue.pop_front() {
        let Some(deltas) = s.items.remove(&key) else {
            processed.send_modify(|p| *p = p.saturating_add(1));
            continue;
        };
        let initial = s.initial_remaining > 0;
        if initial {
            s.initial_remaining -= 1;
            s.initial_in_flight += 1;
        }
        return Some(Popped {
            key,
            deltas,
            initial,
        });
    }
    None
}

/// Counters of a [`DeltaFifo`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FifoCounts {
    /// Keys currently queued.
    pub queued_keys: usize,
    /// Deltas currently queued.
    pub queued_deltas: usize,
}

/// The per-key delta queue of one informer.
pub struct DeltaFifo {
    state: Mutex<State>,
    notify: Notify,
    known: Arc<Indexer>,
    /// Pops waiting for an item (a consumer parked on an empty queue).
    waiting: std::sync::atomic::AtomicUsize,
    /// Queue entries popped and processed (for [`DeltaFifo::barrier`]).
    processed: tokio::sync::watch::Sender<u64>,
}

impl std::fmt::Debug for DeltaFifo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeltaFifo")
            .field("counts", &self.counts())
            .finish()
    }
}

impl DeltaFifo {
    /// A FIFO whose Replace and Resync consult `known` (the informer's Indexer).
    pub fn new(known: Arc<Indexer>) -> Self {
        Self {
            state: Mutex::new(State::default()),
            notify: Notify::new(),
            known,
            waiting: std::sync::atomic::AtomicUsize::new(0),
            processed: tokio::sync::watch::channel(0).0,
        }
    }

    fn push(&self, kind: DeltaType, obj: ObjectRef) {
        let key: Arc<str> = Arc::from(obj.key());
        let mut s = self.state.lock();
        s.queue_action(&key, Delta::new(kind, obj));
        drop(s);
        self.notify.notify_one();
    }

    /// Records an object added by a watch.
    pub fn add(&self, obj: ObjectRef) {
        self.push(DeltaType::Added, obj);
    }

    /// Records an object modified by a watch.
    pub fn update(&self, obj: ObjectRef) {
        self.push(DeltaType::Updated, obj);
    }

    /// Records an object deleted by a watch. A delete for a key that is neither
    /// cached nor queued is dropped (there is nothing to delete).
    pub fn delete(&self, obj: ObjectRef) {
        let key: Arc<str> = Arc::from(obj.key());
        let mut s = self.state.lock();
        if !s.items.contains_key(&key) && !self.known.contains(&key) {
            return;
        }
        s.queue_action(&key, Delta::new(DeltaType::Deleted, obj));
        drop(s);
        self.notify.notify_one();
    }

    /// Replaces the whole state with `list` (a complete list from the server):
    /// a Replaced delta per listed object, and a `final_state_unknown` Deleted for
    /// every key cached or queued that the list no longer has.
    pub fn replace(&self, list: Vec<ObjectRef>) {
        let mut s = self.state.lock();
        let mut keys: HashSet<Arc<str>> = HashSet::with_capacity(list.len());
        for obj in list {
            let key: Arc<str> = Arc::from(obj.key());
            keys.insert(key.clone());
            s.queue_action(&key, Delta::new(DeltaType::Replaced, obj));
        }
        // Vanished keys that are still queued (possibly never popped into the cache).
        let queued_gone: Vec<(Arc<str>, ObjectRef)> = s
            .items
            .iter()
            .filter(|(k, _)| !keys.contains(*k))
            .filter_map(|(k, d)| d.last().map(|l| (k.clone(), l.clone())))
            .filter(|(_, last)| !last.kind.removes())
            .map(|(k, last)| (k, last.object))
            .collect();
        let mut inferred: HashSet<Arc<str>> = HashSet::new();
        for (k, obj) in queued_gone {
            inferred.insert(k.clone());
            s.queue_action(
                &k,
                Delta {
                    kind: DeltaType::Deleted,
                    object: obj,
                    final_state_unknown: true,
                },
            );
        }
        // Vanished keys in the cache that have no delete queued yet.
        for (k, obj) in self.known.snapshot_entries() {
            if keys.contains(&k) || inferred.contains(&k) {
                continue;
            }
            if s.items
                .get(&k)
                .and_then(|d| d.last())
                .is_some_and(|l| l.kind.removes())
            {
                continue;
            }
            s.queue_action(
                &k,
                Delta {
                    kind: DeltaType::Deleted,
                    object: obj,
                    final_state_unknown: true,
                },
            );
        }
        if !s.populated {
            s.populated = true;
            s.initial_remaining = s.queue.len();
            // A non-empty list is reported by popping it.
            s.empty_list_reported = !s.queue.is_empty();
        }
        drop(s);
        self.notify.notify_one();
    }

    /// Enqueues a Sync delta for every cached key that has nothing queued.
    /// Returns how many were enqueued.
    pub fn resync(&self) -> usize {
        let mut s = self.state.lock();
        let mut n = 0;
        for (k, obj) in self.known.snapshot_entries() {
            if s.items.contains_key(&k) {
                continue;
            }
            s.queue_action(&k, Delta::new(DeltaType::Sync, obj));
            n += 1;
        }
        drop(s);
        if n > 0 {
            self.notify.notify_one();
        }
        n
    }

    /// Waits for the next key, takes all its deltas and runs `process` on them
    /// while holding the FIFO's lock (as client-go's Pop does), so a concurrent
    /// Replace never diffs against an Indexer that is missing a popped key.
    /// `process` must not call back into the FIFO. Returns `false` once the FIFO
    /// is closed. When the first list is empty it returns `true` once without
    /// calling `process`, so that the caller sees [`DeltaFifo::has_synced`]
    /// without waiting for a first live event.
    pub async fn pop_process(&self, process: impl FnOnce(&Popped)) -> bool {
        let mut process = Some(process);
        loop {
            let notified = self.notify.notified();
            {
                let mut s = self.state.lock();
                if let Some(p) = take_next(&mut s, &self.processed) {
                    if let Some(f) = process.take() {
                        f(&p);
                    }
                    if p.initial {
                        s.initial_in_flight = s.initial_in_flight.saturating_sub(1);
                    }
                    self.processed.send_modify(|n| *n = n.saturating_add(1));
                    return true;
                }
                if s.closed {
                    return false;
                }
                if s.populated && s.initial_remaining == 0 && !s.empty_list_reported {
                    s.empty_list_reported = true;
                    return true;
                }
            }
            self.waiting
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            notified.await;
            self.waiting
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Keys queued and not yet popped.
    pub fn queued(&self) -> usize {
        self.state.lock().queue.len()
    }

    /// Pops parked on an empty queue right now.
    pub fn waiting_pops(&self) -> usize {
        self.waiting.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Takes the next key's deltas if any are queued. The caller processes them
    /// and then calls [`DeltaFifo::done`]; prefer [`DeltaFifo::pop_process`]
    /// when a Replace may run concurrently.
    pub fn try_pop(&self) -> Option<Popped> {
        let p = take_next(&mut self.state.lock(), &self.processed);
        if p.is_some() {
            self.processed.send_modify(|n| *n = n.saturating_add(1));
        }
        p
    }

    /// Queues an [`DeltaType::Evicted`] delta for every key, cached or
    /// queued, whose latest object `lost` selects (its shard range was
    /// given up). Returns how many were queued.
    pub fn evict(&self, lost: impl Fn(&crate::object::Object) -> bool) -> usize {
        let mut s = self.state.lock();
        let mut victims: Vec<(Arc<str>, ObjectRef)> = s
            .items
            .iter()
            .filter_map(|(k, d)| d.last().map(|l| (k.clone(), l)))
            .filter(|(_, l)| !l.kind.removes() && lost(&l.object))
            .map(|(k, l)| (k, l.object.clone()))
            .collect();
        for (k, obj) in self.known.snapshot_entries() {
            if !s.items.contains_key(&k) && lost(&obj) {
                victims.push((k, obj));
            }
        }
        let n = victims.len();
        for (k, obj) in victims {
            s.queue_action(&k, Delta::new(DeltaType::Evicted, obj));
        }
        drop(s);
        if n > 0 {
            self.notify.notify_one();
        }
        n
    }

    /// Resolves once every key queued before this call has been popped and
    /// processed (at once when the queue is empty), or the FIFO is closed.
    pub fn barrier(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let target = self.state.lock().enqueued;
        let mut rx = self.processed.subscribe();
        async move {
            let _ = rx.wait_for(|p| *p >= target).await;
        }
    }

    /// Reports that a popped item has been fully processed (Indexer updated and
    /// listeners notified).
    pub fn done(&self, popped: &Popped) {
        if popped.initial {
            let mut s = self.state.lock();
            s.initial_in_flight = s.initial_in_flight.saturating_sub(1);
        }
    }

    /// Whether the first list has been popped and processed.
    pub fn has_synced(&self) -> bool {
        let s = self.state.lock();
        s.populated && s.initial_remaining == 0 && s.initial_in_flight == 0
    }

    /// Stops the FIFO: pending and future pops return `None`.
    pub fn close(&self) {
        self.state.lock().closed = true;
        // Wakes barriers: nothing queued will be processed any more.
        self.processed.send_modify(|n| *n = u64::MAX);
        self.notify.notify_waiters();
        self.notify.notify_one();
    }

    /// Current sizes.
    pub fn counts(&self) -> FifoCounts {
        let s = self.state.lock();
        FifoCounts {
            queued_keys: s.queue.len(),
            queued_deltas: s.items.values().map(Vec::len).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::{Object, Transform};

    fn obj(name: &str, rv: u32) -> ObjectRef {
        let raw = format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}}}}"#
        );
        Arc::new(Object::from_json(raw.as_bytes(), &Transform::default()).unwrap())
    }

    type Seen = Vec<(DeltaType, String, bool)>;

    /// Pops everything queued: (key, deltas) in key order.
    fn pop_all_sorted(f: &DeltaFifo) -> Vec<(String, Seen)> {
        let mut all = Vec::new();
        while let Some(p) = f.try_pop() {
            all.push((p.key.to_string(), kinds(&p)));
        }
        all.sort();
        all
    }

    fn kinds(p: &Popped) -> Seen {
        p.deltas
            .iter()
            .map(|d| {
                (
                    d.kind,
                    d.object.meta.resource_version.clone(),
                    d.final_state_unknown,
                )
            })
            .collect()
    }

    fn fifo() -> (Arc<Indexer>, DeltaFifo) {
        let ix = Arc::new(Indexer::new());
        (ix.clone(), DeltaFifo::new(ix))
    }

    #[test]
    fn merges_deltas_per_key_and_pops_them_as_a_unit() {
        let (_ix, f) = fifo();
        f.add(obj("a", 1));
        f.add(obj("b", 2));
        f.update(obj("a", 3));
        f.delete(obj("a", 4));
        assert_eq!(
            f.counts(),
            FifoCounts {
                queued_keys: 2,
                queued_deltas: 4
            }
        );
        let p = f.try_pop().unwrap();
        assert_eq!(&*p.key, "ns/a");
        assert_eq!(
            kinds(&p),
            vec![
                (DeltaType::Added, "1".into(), false),
                (DeltaType::Updated, "3".into(), false),
                (DeltaType::Deleted, "4".into(), false)
            ]
        );
        let p = f.try_pop().unwrap();
        assert_eq!(&*p.key, "ns/b");
        assert!(f.try_pop().is_none());
    }

    #[test]
    fn deduplicates_repeated_deletes_keeping_the_observed_one() {
        let (ix, f) = fifo();
        ix.upsert(&Arc::from("ns/a"), obj("a", 1));
        f.delete(obj("a", 2));
        f.replace(vec![]); // inferred delete for the same key: deduplicated
        f.delete(obj("a", 3));
        let p = f.try_pop().unwrap();
        assert_eq!(kinds(&p), vec![(DeltaType::Deleted, "3".into(), false)]);
        // An inferred delete does not replace an observed one.
        ix.upsert(&Arc::from("ns/b"), obj("b", 1));
        f.delete(obj("b", 5));
        let mut s = f.state.lock();
        s.queue_action(
            &Arc::from("ns/b"),
            Delta {
                kind: DeltaType::Deleted,
                object: obj("b", 6),
                final_state_unknown: true,
            },
        );
        drop(s);
        assert_eq!(
            kinds(&f.try_pop().unwrap()),
            vec![(DeltaType::Deleted, "5".into(), false)]
        );
    }

    #[test]
    fn delete_of_unknown_key_is_ignored() {
        let (_ix, f) = fifo();
        f.delete(obj("ghost", 1));
        assert!(f.try_pop().is_none());
    }

    #[test]
    fn replace_is_diffed_against_the_indexer_and_the_queue() {
        let (ix, f) = fifo();
        ix.upsert(&Arc::from("ns/kept"), obj("kept", 1));
        ix.upsert(&Arc::from("ns/gone"), obj("gone", 2));
        f.add(obj("queued-gone", 3)); // never reached the cache
        f.replace(vec![obj("kept", 4), obj("new", 5)]);
        let all = pop_all_sorted(&f);
        assert_eq!(
            all,
            vec![
                (
                    "ns/gone".into(),
                    vec![(DeltaType::Deleted, "2".into(), true)]
                ),
                (
                    "ns/kept".into(),
                    vec![(DeltaType::Replaced, "4".into(), false)]
                ),
                (
                    "ns/new".into(),
                    vec![(DeltaType::Replaced, "5".into(), false)]
                ),
                (
                    "ns/queued-gone".into(),
                    vec![
                        (DeltaType::Added, "3".into(), false),
                        (DeltaType::Deleted, "3".into(), true)
                    ]
                ),
            ]
        );
    }

    #[test]
    fn resync_only_enqueues_keys_not_already_queued() {
        let (ix, f) = fifo();
        ix.upsert(&Arc::from("ns/a"), obj("a", 1));
        ix.upsert(&Arc::from("ns/b"), obj("b", 1));
        f.update(obj("a", 2));
        assert_eq!(f.resync(), 1);
        let all = pop_all_sorted(&f);
        assert_eq!(
            all,
            vec![
                ("ns/a".into(), vec![(DeltaType::Updated, "2".into(), false)]),
                ("ns/b".into(), vec![(DeltaType::Sync, "1".into(), false)]),
            ]
        );
    }

    #[test]
    fn has_synced_needs_the_first_list_popped_and_processed() {
        let (_ix, f) = fifo();
        assert!(!f.has_synced());
        f.replace(vec![obj("a", 1), obj("b", 1)]);
        assert!(!f.has_synced());
        let p1 = f.try_pop().unwrap();
        let p2 = f.try_pop().unwrap();
        assert!(p1.initial && p2.initial);
        assert!(!f.has_synced(), "popped but not processed");
        f.done(&p1);
        assert!(!f.has_synced());
        f.done(&p2);
        assert!(f.has_synced());
        f.add(obj("c", 2));
        assert!(!f.try_pop().unwrap().initial);
    }

    #[test]
    fn empty_first_list_is_synced_at_once() {
        let (_ix, f) = fifo();
        f.replace(vec![]);
        assert!(f.has_synced());
    }

    /// The informer marks itself synced after a pop; an empty first list
    /// must not leave it waiting for a first live event.
    #[tokio::test]
    async fn empty_first_list_wakes_the_popper_once() {
        let (_ix, f) = fifo();
        let f = Arc::new(f);
        let f2 = f.clone();
        let h = tokio::spawn(async move {
            let mut called = false;
            let more = f2.pop_process(|_| called = true).await;
            (more, called)
        });
        tokio::task::yield_now().await;
        f.replace(vec![]);
        let (more, called) = tokio::time::timeout(std::time::Duration::from_secs(5), h)
            .await
            .expect("the popper returned")
            .unwrap();
        assert!(more && !called && f.has_synced());
        // Afterwards it waits for items as before.
        let f3 = f.clone();
        let h = tokio::spawn(async move {
            let mut key = String::new();
            f3.pop_process(|p| key = p.key.to_string()).await;
            key
        });
        tokio::task::yield_now().await;
        f.add(obj("y", 1));
        assert_eq!(h.await.unwrap(), "ns/y");
    }

    /// I8: a Replace that races with processing of a popped key still sees
    /// that key (processing holds the FIFO lock, as in client-go), so an object
    /// missing from the list gets its delete instead of becoming a phantom.
    #[test]
    fn replace_racing_with_processing_leaves_no_phantom() {
        let (ix, f) = fifo();
        let f = Arc::new(f);
        f.add(obj("racer", 1));
        let (f2, ix2) = (f.clone(), ix.clone());
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let popper = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            rt.block_on(f2.pop_process(|p| {
                started_tx.send(()).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(100));
                for d in &p.deltas {
                    ix2.upsert(&p.key, d.object.clone());
                }
            }));
        });
        started_rx.recv().unwrap();
        f.replace(vec![]); // the list no longer has "racer"
        popper.join().unwrap();
        let p = f.try_pop().expect("a delete for the vanished key");
        assert_eq!(kinds(&p), vec![(DeltaType::Deleted, "1".into(), true)]);
    }

    /// Waits until a pop is parked on the empty queue (the positive signal
    /// that it is waiting, not yet finished).
    async fn parked(f: &DeltaFifo, h: &tokio::task::JoinHandle<impl Sized>) {
        while f.waiting_pops() == 0 {
            assert!(!h.is_finished(), "the pop returned with nothing queued");
            tokio::task::yield_now().await;
        }
        assert!(!h.is_finished());
    }

    #[tokio::test]
    async fn pop_waits_for_items_and_ends_on_close() {
        let (_ix, f) = fifo();
        let f = Arc::new(f);
        let f2 = f.clone();
        let h = tokio::spawn(async move {
            let mut key = String::new();
            f2.pop_process(|p| key = p.key.to_string()).await;
            key
        });
        parked(&f, &h).await;
        f.add(obj("x", 1));
        assert_eq!(h.await.unwrap(), "ns/x");
        let f3 = f.clone();
        let h = tokio::spawn(async move { !f3.pop_process(|_| ()).await });
        parked(&f, &h).await;
        f.close();
        assert!(h.await.unwrap());
    }

    #[test]
    fn an_eviction_removes_cached_and_queued_keys_and_a_relist_does_not_delete_them_again() {
        let (ix, f) = fifo();
        for n in ["a", "b", "c"] {
            ix.upsert(&Arc::from(format!("ns/{n}").as_str()), obj(n, 1));
        }
        f.add(obj("d", 2));
        let n = f.evict(|o| o.meta.name == "a" || o.meta.name == "d");
        assert_eq!(n, 2);
        // A second eviction of the same keys queues nothing more.
        assert_eq!(f.evict(|o| o.meta.name == "a"), 0);
        // A relist of what remains infers no delete for the evicted keys.
        f.replace(vec![obj("b", 1), obj("c", 1)]);
        let popped = pop_all_sorted(&f);
        assert_eq!(
            popped,
            vec![
                ("ns/a".into(), vec![(DeltaType::Evicted, "1".into(), false)]),
                (
                    "ns/b".into(),
                    vec![(DeltaType::Replaced, "1".into(), false)]
                ),
                (
                    "ns/c".into(),
                    vec![(DeltaType::Replaced, "1".into(), false)]
                ),
                (
                    "ns/d".into(),
                    vec![
                        (DeltaType::Added, "2".into(), false),
                        (DeltaType::Evicted, "2".into(), false)
                    ]
                ),
            ]
        );
    }

    #[tokio::test]
    async fn a_barrier_resolves_once_every_key_queued_before_it_was_processed() {
        let (_ix, f) = fifo();
        let f = Arc::new(f);
        f.add(obj("a", 1));
        f.add(obj("b", 1));
        let barrier = tokio::spawn(f.barrier());
        tokio::task::yield_now().await;
        assert!(!barrier.is_finished());
        assert!(f.pop_process(|_| {}).await);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!barrier.is_finished(), "one key is still queued");
        f.add(obj("c", 1)); // queued after the barrier: not waited for
        assert!(f.pop_process(|_| {}).await);
        tokio::time::timeout(std::time::Duration::from_secs(5), barrier)
            .await
            .expect("the barrier resolves")
            .unwrap();
        // On an empty queue it resolves at once.
        f.pop_process(|_| {}).await;
        tokio::time::timeout(std::time::Duration::from_secs(5), f.barrier())
            .await
            .unwrap();
    }
}
