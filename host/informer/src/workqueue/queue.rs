//! The work queue: keys that need processing, handed to workers with
//! client-go's workqueue guarantees and controller-runtime's priorities.
//!
//! Job: [`WorkQueue`] holds one entry per key that needs processing. A key
//! is either ready (in the [`ReadySet`], by priority then arrival) or waiting
//! for an instant (in the [`Timers`]: requeue-after, a rate-limited retry).
//! [`WorkQueue::get`] hands the next ready key to one worker and marks it
//! processing until [`WorkQueue::done`]. Retries go through the queue's
//! [`RateLimiter`]; [`WorkQueue::forget`] resets a key's failures.
//!
//! Invariants (each has a test in this module or in
//! `host/informer/tests/workqueue_*.rs`):
//! - Dirty set: a key is queued at most once. Adding a key already queued
//!   only raises its priority (to the higher of the two) and brings its
//!   ready instant forward (to the earlier of the two); it is never queued
//!   twice.
//! - Processing set: a key is never handed to two workers at once. A key
//!   added while it is processed is queued and held back until `done`, then
//!   handed out again (so a change during a reconcile is never lost).
//! - Memory is O(number of keys): one entry per queued key, one per key in
//!   progress, and the rate limiter's per-key failure counts. Nothing is
//!   bounded by a capacity and nothing overflows.
//! - Timers never fire early, and a waiting worker wakes for the earliest
//!   one (the clock is tokio's, so tests run on a paused clock).
//! - After [`WorkQueue::shut_down`] nothing is added and `get` returns
//!   `None`; keys in progress may still be marked done.
//! - Ageing: a key below [`Priority::LIVE`] that has been ready for
//!   [`WorkQueue::max_low_priority_wait`] (5 s by default) is *overdue*.
//!   While any key is overdue, every other key handed out is the oldest
//!   overdue one; the others go by priority as before. So live churn,
//!   whatever its rate, never holds a low-priority key back for more than
//!   the bound plus one turn in two of the overdue keys older than it, and a
//!   fresh change waits behind at most one overdue key per live key ahead of
//!   it.
//!
//! # Why a time bound, alternating once overdue
//!
//! Without ageing, churn above the workers' capacity starves the keys of an
//! initial list for as long as it lasts (controller-runtime#3496). The other
//! common fix, every Kth pop taken from the low level, gives low keys 1/K of
//! the workers from the first moment, also when they have only just arrived:
//! a restart of a busy controller then slows every live change by the same
//! share, for no benefit while the low keys are young. A time bound costs live
//! changes nothing for the first `max_low_priority_wait`; past it, alternating
//! (rather than serving every overdue key first) keeps a fresh change fast
//! even when hundreds of initial-list keys become overdue at once: it waits
//! for at most one overdue key per live key ahead of it, and the overdue keys
//! get half the workers until they are gone. When no live key is ready,
//! overdue or not, the low keys take every worker as before.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::delaying::Timers;
use super::metrics::{QueueMetrics, QueueMetricsSnapshot};
use super::priority::{Priority, ReadySet};
use super::rate_limiter::{RateLimiter, RateLimiterConfig};

/// How long a low-priority key may wait ready before it is overdue (see the
/// module documentation), unless set otherwise.
pub const DEFAULT_MAX_LOW_PRIORITY_WAIT: Duration = Duration::from_secs(5);

/// What a key must be to be queued: cheap to clone (an `Arc<str>`, a small
/// struct), ordered, hashable and printable (in log lines).
pub trait QueueKey: Clone + Eq + Hash + Ord + std::fmt::Debug + Send + Sync + 'static {}

impl<T: Clone + Eq + Hash + Ord + std::fmt::Debug + Send + Sync + 'static> QueueKey for T {}

/// How a key is added.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddOpts {
    /// Its priority (the higher of this and any it is already queued with).
    pub priority: Priority,
    /// Ready only after this long (`None` or zero: ready now).
    pub after: Option<Duration>,
    /// Ready after the rate limiter's delay for it (counted as a retry).
    pub rate_limited: bool,
}

impl AddOpts {
    /// Ready now, at `priority`.
    pub fn priority(priority: Priority) -> Self {
        Self {
            priority,
            ..Self::default()
        }
    }
}

/// A key handed to a worker, with the priority it was queued at (a retry or
/// a requeue of it keeps that priority, as in controller-runtime).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item<K> {
    /// The key.
    pub key: K,
    /// Its priority when it was taken.
    pub priority: Priority,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    priority: Priority,
    /// `None`: ready; else the instant it becomes ready.
    ready_at: Option<Instant>,
    /// Arrival number: order among equals, and the entry's identity in the
    /// ready set or the timers.
    seq: u64,
    /// When it became ready (for the queue-duration histogram).
    since: Instant,
}

struct State<K> {
    /// The ageing bound; `None`: low keys wait behind live ones forever.
    max_low_wait: Option<Duration>,
    /// The last key handed out was an overdue low one (the next goes by
    /// priority).
    aged_last: bool,
    items: HashMap<K, Entry>,
    ready: ReadySet<K>,
    timers: Timers<K>,
    processing: HashMap<K, Instant>,
    limiter: Box<dyn RateLimiter<K>>,
    next_seq: u64,
    shut_down: bool,
}

/// A work queue of keys of type `K` (see the module documentation).
pub struct WorkQueue<K: QueueKey> {
    state: Mutex<State<K>>,
    notify: Notify,
    /// Woken by every `done` (for waits on keys in progress).
    finished: Notify,
    metrics: QueueMetrics,
}

impl<K: QueueKey> std::fmt::Debug for WorkQueue<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.state.lock();
        f.debug_struct("WorkQueue")
            .field("queued", &st.items.len())
            .field("processing", &st.processing.len())
            .field("shut_down", &st.shut_down)
            .finish()
    }
}

impl<K: QueueKey> Default for WorkQueue<K> {
    fn default() -> Self {
        Self::with_limiter(RateLimiterConfig::default().build())
    }
}

impl<K: QueueKey> WorkQueue<K> {
    /// A queue whose retries follow `config`.
    pub fn new(config: RateLimiterConfig) -> Arc<Self> {
        Arc::new(Self::with_limiter(config.build()))
    }

    /// A queue whose retries follow `limiter`.
    pub fn with_limiter(limiter: Box<dyn RateLimiter<K>>) -> Self {
        Self {
            state: Mutex::new(State {
                max_low_wait: Some(DEFAULT_MAX_LOW_PRIORITY_WAIT),
                aged_last: false,
                items: HashMap::new(),
                ready: ReadySet::default(),
                timers: Timers::default(),
                processing: HashMap::new(),
                limiter,
                next_seq: 0,
                shut_down: false,
            }),
            notify: Notify::new(),
            finished: Notify::new(),
            metrics: QueueMetrics::default(),
        }
    }

    /// Sets the ageing bound: a key below [`Priority::LIVE`] ready for this
    /// long is overdue and handed out every other turn (`None`: never).
    pub fn set_max_low_priority_wait(&self, bound: Option<Duration>) {
        self.state.lock().max_low_wait = bound;
    }

    /// Replaces the retry limiter (a controller's new version with other
    /// retry settings took the queue over): failure counts start again from
    /// zero; queued keys and their timers are kept.
    pub fn set_rate_limiter(&self, limiter: Box<dyn RateLimiter<K>>) {
        self.state.lock().limiter = limiter;
    }

    /// The ageing bound.
    pub fn max_low_priority_wait(&self) -> Option<Duration> {
        self.state.lock().max_low_wait
    }

    /// Queues `key`, ready now, at [`Priority::LIVE`].
    pub fn add(&self, key: K) {
        self.add_with_opts(key, AddOpts::default());
    }

    /// Queues `key`, ready now, at `priority`.
    pub fn add_with_priority(&self, key: K, priority: Priority) {
        self.add_with_opts(key, AddOpts::priority(priority));
    }

    /// Queues `key`, ready after `delay` (client-go's `AddAfter`).
    pub fn add_after(&self, key: K, delay: Duration) {
        self.add_with_opts(
            key,
            AddOpts {
                after: Some(delay),
                ..AddOpts::default()
            },
        );
    }

    /// Queues `key` after the rate limiter's delay for it, and counts a
    /// retry (client-go's `AddRateLimited`).
    pub fn add_rate_limited(&self, key: K) {
        self.add_with_opts(
            key,
            AddOpts {
                rate_limited: true,
                ..AddOpts::default()
            },
        );
    }

    /// Queues `key` as `opts` say. Under the dirty-set rule a key already
    /// queued keeps one entry, with the higher priority and the earlier ready
    /// instant.
    pub fn add_with_opts(&self, key: K, opts: AddOpts) {
        let mut st = self.state.lock();
        if st.shut_down {
            return;
        }
        let now = Instant::now();
        let mut after = opts.after.unwrap_or(Duration::ZERO);
        if opts.rate_limited {
            after = after.max(st.limiter.when(&key, now));
            self.metrics.retries.fetch_add(1, Ordering::Relaxed);
        }
        let ready_at = (!after.is_zero()).then(|| now + after);
        let wake = match st.items.get(&key).copied() {
            None => {
                let seq = st.next_seq;
                st.next_seq += 1;
                let entry = Entry {
                    priority: opts.priority,
                    ready_at,
                    seq,
                    since: now,
                };
                st.items.insert(key.clone(), entry);
                match ready_at {
                    None => self.became_ready(&mut st, key, entry),
                    Some(at) => {
                        let earliest = st.timers.next_deadline().is_none_or(|t| at < t);
                        st.timers.insert(key, at, seq);
                        earliest.then_some(Wake::All)
                    }
                }
            }
            Some(mut e) => {
                let mut wake = None;
                let in_ready = e.ready_at.is_none() && !st.processing.contains_key(&key);
                if opts.priority > e.priority {
                    if in_ready {
                        st.ready.remove(&key, e.priority, e.seq);
                        st.ready.insert(key.clone(), opts.priority, e.seq);
                    }
                    e.priority = opts.priority;
                }
                if let Some(at) = e.ready_at {
                    match ready_at {
                        None => {
                            st.timers.remove(&key, at, e.seq);
                            e.ready_at = None;
                            e.seq = st.next_seq;
                            st.next_seq += 1;
                            e.since = now;
                            st.items.insert(key.clone(), e);
                            return self.notify_after(self.became_ready(&mut st, key, e), st);
                        }
                        Some(new) if new < at => {
                            st.timers.remove(&key, at, e.seq);
                            st.timers.insert(key.clone(), new, e.seq);
                            e.ready_at = Some(new);
                            if st.timers.next_deadline() == Some(new) {
                                wake = Some(Wake::All);
                            }
                        }
                        Some(_) => {}
                    }
                }
                st.items.insert(key, e);
                wake
            }
        };
        self.notify_after(wake, st);
    }

    /// Counts a key that just became ready and puts it in the ready set,
    /// unless a worker is processing it (it waits for `done` then).
    fn became_ready(&self, st: &mut State<K>, key: K, e: Entry) -> Option<Wake> {
        self.metrics.adds.fetch_add(1, Ordering::Relaxed);
        self.metrics.depth.fetch_add(1, Ordering::Relaxed);
        if st.processing.contains_key(&key) {
            return None;
        }
        st.ready.insert(key, e.priority, e.seq);
        Some(Wake::One)
    }

    fn notify_after(&self, wake: Option<Wake>, st: parking_lot::MutexGuard<'_, State<K>>) {
        drop(st);
        match wake {
            Some(Wake::One) => self.notify.notify_one(),
            Some(Wake::All) => self.notify.notify_waiters(),
            None => {}
        }
    }

    /// Moves every key whose instant has come into the ready set.
    fn promote(&self, st: &mut State<K>, now: Instant) {
        while let Some((key, at)) = st.timers.pop_due(now) {
            let Some(e) = st.items.get_mut(&key) else {
                continue;
            };
            e.ready_at = None;
            e.seq = st.next_seq;
            st.next_seq += 1;
            e.since = at;
            let e = *e;
            self.became_ready(st, key, e);
        }
    }

    /// Takes the next ready key if there is one, without waiting.
    pub fn try_get(&self) -> Option<Item<K>> {
        let mut st = self.state.lock();
        if st.shut_down {
            return None;
        }
        self.take(&mut st, Instant::now())
    }

    /// Whether the oldest ready low-priority key is overdue at `now`.
    fn overdue(&self, st: &State<K>, now: Instant) -> bool {
        let Some(bound) = st.max_low_wait else {
            return false;
        };
        st.ready
            .oldest_low()
            .and_then(|k| st.items.get(k))
            .is_some_and(|e| now.saturating_duration_since(e.since) >= bound)
    }

    fn take(&self, st: &mut State<K>, now: Instant) -> Option<Item<K>> {
        self.promote(st, now);
        let aged = !st.aged_last && st.ready.has_live() && self.overdue(st, now);
        let (key, priority, _) = if aged {
            self.metrics.aged.fetch_add(1, Ordering::Relaxed);
            st.ready.pop_oldest_low()?
        } else {
            st.ready.pop()?
        };
        st.aged_last = aged;
        let e = st.items.remove(&key).expect("a ready key has an entry");
        self.metrics.depth.fetch_sub(1, Ordering::Relaxed);
        self.metrics
            .queue_duration
            .observe(now.saturating_duration_since(e.since));
        st.processing.insert(key.clone(), now);
        Some(Item { key, priority })
    }

    /// Waits for the next ready key and marks it processing; `None` once the
    /// queue is shut down. The caller must call [`WorkQueue::done`] with the
    /// key when it has finished with it.
    pub async fn get(&self) -> Option<Item<K>> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let deadline = {
                let mut st = self.state.lock();
                if st.shut_down {
                    return None;
                }
                if let Some(item) = self.take(&mut st, Instant::now()) {
                    return Some(item);
                }
                st.timers.next_deadline()
            };
            match deadline {
                Some(at) => {
                    tokio::select! {
                        _ = &mut notified => {}
                        _ = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Marks `key` no longer processing. If it was added meanwhile, it is
    /// handed out again (when ready).
    pub fn done(&self, key: &K) {
        let mut st = self.state.lock();
        let Some(started) = st.processing.remove(key) else {
            return;
        };
        self.metrics
            .work_duration
            .observe(Instant::now().saturating_duration_since(started));
        let wake = match st.items.get(key).copied() {
            Some(e) if e.ready_at.is_none() => {
                st.ready.insert(key.clone(), e.priority, e.seq);
                Some(Wake::One)
            }
            _ => None,
        };
        self.notify_after(wake, st);
        self.finished.notify_waiters();
    }

    /// The keys being processed now.
    pub fn processing_keys(&self) -> Vec<K> {
        self.state.lock().processing.keys().cloned().collect()
    }

    /// Waits until none of `keys` is being processed.
    pub async fn wait_finished(&self, keys: Vec<K>) {
        loop {
            let n = self.finished.notified();
            tokio::pin!(n);
            n.as_mut().enable();
            {
                let st = self.state.lock();
                if !keys.iter().any(|k| st.processing.contains_key(k)) {
                    return;
                }
            }
            n.await;
        }
    }

    /// Every queued key (ready, waiting or held back), for a follower that
    /// must decide which to drop.
    pub fn queued_keys(&self) -> Vec<K> {
        self.state.lock().items.keys().cloned().collect()
    }

    /// Forgets `key`'s failures: its next retry starts from the base delay
    /// (client-go's `Forget`, called on success).
    pub fn forget(&self, key: &K) {
        self.state.lock().limiter.forget(key);
    }

    /// Failures of `key` counted by the rate limiter.
    pub fn num_requeues(&self, key: &K) -> u32 {
        self.state.lock().limiter.retries(key)
    }

    /// Drops every queued key for which `keep` is false, and forgets its
    /// failures; keys in progress finish normally. This is how a key filter
    /// that changed (a shard that lost keys) empties the queue of what it no
    /// longer owns.
    pub fn retain(&self, mut keep: impl FnMut(&K) -> bool) -> usize {
        let mut st = self.state.lock();
        let gone: Vec<K> = st.items.keys().filter(|k| !keep(k)).cloned().collect();
        for k in &gone {
            let e = st.items.remove(k).expect("listed above");
            match e.ready_at {
                Some(at) => {
                    st.timers.remove(k, at, e.seq);
                }
                None => {
                    st.ready.remove(k, e.priority, e.seq);
                    self.metrics.depth.fetch_sub(1, Ordering::Relaxed);
                }
            }
            st.limiter.forget(k);
        }
        gone.len()
    }

    /// Stops the queue: nothing more is added, and every `get` returns
    /// `None`.
    pub fn shut_down(&self) {
        self.state.lock().shut_down = true;
        self.notify.notify_waiters();
    }

    /// Whether [`WorkQueue::shut_down`] was called.
    pub fn is_shut_down(&self) -> bool {
        self.state.lock().shut_down
    }

    /// Keys ready and not yet taken (the depth).
    pub fn len(&self) -> usize {
        self.metrics.depth.load(Ordering::Relaxed) as usize
    }

    /// Whether no key is ready.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys queued in any state (ready, waiting for a timer, or held back
    /// behind their own processing).
    pub fn queued(&self) -> usize {
        self.state.lock().items.len()
    }

    /// Keys being processed.
    pub fn processing(&self) -> usize {
        self.state.lock().processing.len()
    }

    /// Whether `key` is queued (in any state).
    pub fn contains(&self, key: &K) -> bool {
        self.state.lock().items.contains_key(key)
    }

    /// The metrics, with the in-progress figures as of now.
    pub fn metrics(&self) -> QueueMetricsSnapshot {
        let now = Instant::now();
        let (waiting, processing, unfinished, longest, oldest_low) = {
            let st = self.state.lock();
            let mut sum = Duration::ZERO;
            let mut max = Duration::ZERO;
            for started in st.processing.values() {
                let d = now.saturating_duration_since(*started);
                sum += d;
                max = max.max(d);
            }
            let oldest_low = st
                .ready
                .oldest_low()
                .and_then(|k| st.items.get(k))
                .map_or(Duration::ZERO, |e| now.saturating_duration_since(e.since));
            (st.timers.len(), st.processing.len(), sum, max, oldest_low)
        };
        let m = &self.metrics;
        QueueMetricsSnapshot {
            depth: m.depth.load(Ordering::Relaxed),
            waiting: waiting as u64,
            processing: processing as u64,
            adds: m.adds.load(Ordering::Relaxed),
            retries: m.retries.load(Ordering::Relaxed),
            queue_duration: m.queue_duration.snapshot(),
            work_duration: m.work_duration.snapshot(),
            unfinished_work_seconds: unfinished.as_secs_f64(),
            longest_running_processor_seconds: longest.as_secs_f64(),
            oldest_low_priority_seconds: oldest_low.as_secs_f64(),
            aged: m.aged.load(Ordering::Relaxed),
        }
    }
}

/// Whom an add wakes: one worker for one ready key, every waiting worker
/// when the earliest timer moved (each recomputes its sleep).
enum Wake {
    One,
    All,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q() -> Arc<WorkQueue<&'static str>> {
        WorkQueue::new(RateLimiterConfig::default())
    }

    #[test]
    fn a_key_is_queued_at_most_once() {
        let q = q();
        for _ in 0..10 {
            q.add("a");
        }
        q.add("b");
        assert_eq!(q.len(), 2);
        assert_eq!(q.try_get().unwrap().key, "a");
        assert_eq!(q.try_get().unwrap().key, "b");
        assert!(q.try_get().is_none());
        assert_eq!(q.metrics().adds, 2);
    }

    #[test]
    fn a_key_added_while_processing_waits_for_done() {
        let q = q();
        q.add("a");
        let a = q.try_get().unwrap();
        q.add("a");
        q.add("a");
        assert!(q.try_get().is_none(), "held back while processing");
        assert_eq!(q.len(), 1);
        q.done(&a.key);
        assert_eq!(q.try_get().unwrap().key, "a");
        q.done(&"a");
        assert!(q.try_get().is_none());
        assert_eq!(q.processing(), 0);
    }

    #[test]
    fn priority_is_raised_never_lowered() {
        let q = q();
        q.add_with_priority("initial", Priority::LOW);
        q.add_with_priority("live", Priority::LIVE);
        q.add_with_priority("live", Priority::LOW);
        let first = q.try_get().unwrap();
        assert_eq!((first.key, first.priority), ("live", Priority::LIVE));
        q.add_with_priority("raised", Priority::LOW);
        q.add_with_priority("raised", Priority::LIVE);
        assert_eq!(q.try_get().unwrap().key, "raised");
        assert_eq!(q.try_get().unwrap().key, "initial");
    }

    #[test]
    fn retain_drops_queued_keys_and_their_failures() {
        let q = q();
        q.add("keep");
        q.add("drop");
        q.add_rate_limited("drop-later");
        assert_eq!(q.retain(|k| k.starts_with("keep")), 2);
        assert_eq!(q.queued(), 1);
        assert_eq!(q.num_requeues(&"drop-later"), 0);
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn shut_down_refuses_adds_and_gets() {
        let q = q();
        q.add("a");
        q.shut_down();
        q.add("b");
        assert!(q.try_get().is_none());
        assert_eq!(q.queued(), 1);
    }
}
