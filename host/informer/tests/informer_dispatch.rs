//! Dispatcher and listener invariants without a network: the DeltaFIFO, Indexer
//! and processor driven directly, with handlers that record, block or never
//! return. Each test names the invariant it checks.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube_informer::delta_fifo::DeltaFifo;
use kube_informer::handler::{Delivery, Handled, Handler};
use kube_informer::indexer::Indexer;
use kube_informer::notification::{EventKind, NotificationRef};
use kube_informer::object::{Object, ObjectRef, Transform};
use kube_informer::processor::Processor;
use kube_informer::HandlerOptions;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::{mpsc, Semaphore};

/// DeltaFIFO + Indexer + processor, popped by hand.
struct Pipeline {
    fifo: DeltaFifo,
    processor: Arc<Processor>,
    indexer: Arc<Indexer>,
}

impl Pipeline {
    fn new() -> Self {
        let indexer = Arc::new(Indexer::new());
        Self {
            fifo: DeltaFifo::new(indexer.clone()),
            processor: Processor::new("v1/pods", indexer.clone()),
            indexer,
        }
    }

    /// Pops and handles everything queued; marks synced after the first list.
    fn drain(&self) -> usize {
        let mut n = 0;
        while let Some(p) = self.fifo.try_pop() {
            self.processor.handle_deltas(&p);
            self.fifo.done(&p);
            n += 1;
        }
        if self.fifo.has_synced() && !self.processor.has_synced() {
            self.processor.mark_synced();
        }
        n
    }
}

fn pod(name: &str, rv: u64, extra: &str) -> ObjectRef {
    let raw = format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"ns{}","uid":"uid-{name}","resourceVersion":"{rv}","labels":{{"app":"a{}"}}}},"spec":{{"x":"{extra}"}}}}"#,
        name.len() % 3,
        rv % 2
    );
    Arc::new(Object::from_json(raw.as_bytes(), &Transform::default()).unwrap())
}

fn rv(o: &ObjectRef) -> u64 {
    o.meta.resource_version.parse().unwrap()
}

/// Sends every notification (with its arrival time) to a channel.
struct Recorder {
    tx: mpsc::UnboundedSender<(NotificationRef, Instant)>,
}

impl Handler for Recorder {
    async fn handle(&mut self, n: NotificationRef) -> Delivery {
        let _ = self.tx.send((n, Instant::now()));
        Delivery::Ok
    }
}

/// Never finishes handling its first notification.
struct Stuck;

impl Handler for Stuck {
    async fn handle(&mut self, _n: NotificationRef) -> Delivery {
        std::future::pending::<()>().await;
        Delivery::Ok
    }
}

/// Consumes and forgets every notification.
struct Discard;

impl Handler for Discard {
    async fn handle(&mut self, _n: NotificationRef) -> Delivery {
        Delivery::Ok
    }
}

/// Handles one notification per permit, recording each.
struct Gated {
    permits: Arc<Semaphore>,
    tx: mpsc::UnboundedSender<NotificationRef>,
}

impl Handler for Gated {
    async fn handle(&mut self, n: NotificationRef) -> Delivery {
        self.permits.acquire().await.unwrap().forget();
        let _ = self.tx.send(n);
        Delivery::Ok
    }
}

fn recorder() -> (
    Recorder,
    mpsc::UnboundedReceiver<(NotificationRef, Instant)>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    (Recorder { tx }, rx)
}

fn cfg(name: &str, capacity: usize) -> HandlerOptions {
    HandlerOptions {
        name: name.into(),
        queue_capacity: capacity,
        ..HandlerOptions::default()
    }
}

/// A plugin's view rebuilt from the notifications it received.
#[derive(Default)]
struct View(BTreeMap<String, u64>);

impl View {
    fn apply(&mut self, n: &NotificationRef) {
        match n.kind {
            EventKind::Deleted => {
                self.0.remove(&*n.key);
            }
            _ => {
                self.0.insert(n.key.to_string(), rv(&n.object));
            }
        }
    }
}

fn cache_view(ix: &Indexer) -> BTreeMap<String, u64> {
    ix.snapshot().iter().map(|o| (o.key(), rv(o))).collect()
}

/// Dispatches an update of pod `name` at resourceVersion `at` and checks that
/// it is the next notification the listener hands on, as a live event.
async fn live_update_arrives(
    p: &Pipeline,
    rx: &mut mpsc::UnboundedReceiver<NotificationRef>,
    name: &str,
    at: u64,
) {
    p.fifo.update(pod(name, at, "live"));
    p.drain();
    let n = recv(rx).await;
    assert!(!n.in_initial_list, "{} came as part of a replay", n.key);
    assert_eq!(rv(&n.object), at, "live events follow the replay");
}

/// The next message on `rx`, waiting at most 30 s.
async fn recv<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("nothing received within 30 s")
        .expect("channel closed")
}

async fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// What one I1 round measured.
struct I1Round {
    /// Time the dispatcher spent on each notification (FIFO pop, Indexer
    /// update, distribution), sorted.
    dispatch: Vec<Duration>,
    /// The recording listener's latencies from dispatch to handling, sorted.
    latencies: Vec<Duration>,
    /// The stuck listener's queue and pending keys, from its structures.
    stuck: Option<(usize, usize)>,
}

fn pct(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

/// One I1 round: dispatches `objs` to a recording listener, beside either a
/// never-consuming neighbour or one that keeps up. The dispatcher runs on a
/// thread of its own; a dispatcher that waited for the stuck neighbour would
/// not finish within `limit`, and the round fails.
async fn i1_round(objs: &Arc<Vec<ObjectRef>>, with_stuck: bool, limit: Duration) -> I1Round {
    let p = Arc::new(Pipeline::new());
    p.fifo.replace(vec![]);
    p.drain();
    // The neighbour is either stuck (capacity 64) or a consumer that keeps up.
    let stuck = with_stuck.then(|| p.processor.add_handler(Stuck, cfg("stuck", 64)).unwrap());
    let _other = (!with_stuck).then(|| {
        p.processor
            .add_handler(Discard, cfg("discard", 1 << 20))
            .unwrap()
    });
    let (rec, mut rx) = recorder();
    let _h = p.processor.add_handler(rec, cfg("rec", 1 << 20)).unwrap();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    {
        let (p, objs) = (p.clone(), objs.clone());
        std::thread::spawn(move || {
            let mut sent_at = Vec::with_capacity(objs.len());
            let mut dispatch = Vec::with_capacity(objs.len());
            for o in objs.iter() {
                let t = Instant::now();
                sent_at.push(t);
                p.fifo.update(o.clone());
                p.drain();
                dispatch.push(t.elapsed());
            }
            let _ = done_tx.send((sent_at, dispatch));
        });
    }
    let Ok(done) = tokio::time::timeout(limit, done_rx).await else {
        // The dispatcher is blocked holding the gate: dropping the listeners
        // would wait for it forever, so they are leaked with the pipeline.
        std::mem::forget((stuck, _other, _h, p));
        panic!(
            "I1: the dispatcher did not get through {} events within {limit:?} (stuck neighbour: {with_stuck})",
            objs.len()
        );
    };
    let (sent_at, mut dispatch) = done.unwrap();
    dispatch.sort();
    let mut latencies = Vec::with_capacity(objs.len());
    let mut last_rv = 0;
    for sent in &sent_at {
        let (n, at) = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("recording listener stalled")
            .unwrap();
        // Every notification arrives, in dispatch order (I3 below capacity).
        assert!(rv(&n.object) > last_rv);
        last_rv = rv(&n.object);
        latencies.push(at.saturating_duration_since(*sent));
    }
    latencies.sort();
    I1Round {
        dispatch,
        latencies,
        stuck: stuck.map(|h| (h.queued(), h.pending_keys())),
    }
}

/// I1: a listener that never consumes does not delay delivery to another one,
/// and does not slow the dispatcher: the dispatcher's time per notification
/// and the recording neighbour's latency stay within a small factor of a
/// baseline (a neighbour that keeps up) measured in the same test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i1_stuck_listener_does_not_delay_others() {
    const N: u64 = 20_000;
    let objs: Arc<Vec<ObjectRef>> = Arc::new(
        (0..N)
            .map(|i| pod(&format!("p{}", i % 500), i + 1, ""))
            .collect(),
    );
    // Alternate rounds and compare the best of each, so a burst of load from
    // elsewhere on the machine does not decide the outcome.
    let first = i1_round(&objs, false, Duration::from_secs(600)).await;
    let base_total: Duration = first.dispatch.iter().sum();
    // A dispatcher that waits for the stuck listener never finishes; one that
    // merely slows down by more than the factors below fails the ratios.
    let limit = base_total * 50 + Duration::from_secs(10);
    let mut base = [Duration::MAX; 3];
    let mut stuck = [Duration::MAX; 3];
    let mut held = (0, 0);
    let fold = |best: &mut [Duration; 3], r: &I1Round| {
        best[0] = best[0].min(pct(&r.dispatch, 50));
        best[1] = best[1].min(pct(&r.dispatch, 99));
        best[2] = best[2].min(pct(&r.latencies, 99));
    };
    fold(&mut base, &first);
    for round in 0..3 {
        if round > 0 {
            let r = i1_round(&objs, false, limit).await;
            fold(&mut base, &r);
        }
        let r = i1_round(&objs, true, limit).await;
        fold(&mut stuck, &r);
        held = r.stuck.unwrap();
    }
    eprintln!(
        "I1: {N} events, best of 3; dispatch per notification p50/p99: beside a consuming listener {:?}/{:?}, \
         beside a stuck one {:?}/{:?}; recording neighbour latency p99: {:?} vs {:?}; stuck listener holds {} queued, {} pending keys",
        base[0], base[1], stuck[0], stuck[1], base[2], stuck[2], held.0, held.1
    );
    assert!(
        stuck[0] <= base[0] * 3,
        "dispatch p50 slowed by the stuck listener: {:?} -> {:?}",
        base[0],
        stuck[0]
    );
    assert!(
        stuck[1] <= base[1] * 5,
        "dispatch p99 slowed by the stuck listener: {:?} -> {:?}",
        base[1],
        stuck[1]
    );
    assert!(
        stuck[2] <= base[2] * 5,
        "the recording neighbour's p99 latency grew beside the stuck listener: {:?} -> {:?}",
        base[2],
        stuck[2]
    );
    // The stuck listener holds its capacity (less the one in its hands) and
    // one entry per key, whatever it was sent.
    assert_eq!(held.0, 63, "stuck listener's queue");
    assert!(
        held.1 <= 500,
        "one pending entry per key at most: {}",
        held.1
    );
}

/// Reads the Indexer inside its callback: the object of the notification it
/// is handling must be there, at that resourceVersion or a later one (I2).
struct CacheReader {
    indexer: Arc<Indexer>,
    tx: mpsc::UnboundedSender<Option<String>>,
}

impl Handler for CacheReader {
    async fn handle(&mut self, n: NotificationRef) -> Delivery {
        let seen = self.indexer.get(&n.key).map(|o| rv(&o));
        let wrong = match n.kind {
            EventKind::Deleted => None,
            _ => (seen.is_none_or(|s| s < rv(&n.object))).then(|| {
                format!(
                    "{} {:?} at rv {}: the cache holds {seen:?}",
                    n.key,
                    n.kind,
                    rv(&n.object)
                )
            }),
        };
        let _ = self.tx.send(wrong);
        Delivery::Ok
    }

    fn own_thread(&self) -> Option<String> {
        Some("cache-reader".into())
    }
}

/// I2: a handler that queries the cache while handling a notification sees
/// that notification's object. The reader is the first of many listeners, so
/// a dispatcher that told listeners before updating the Indexer would leave
/// the reader a long window (the pushes to the thousands of listeners after
/// it) in which the cache does not hold the object yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i2_a_handler_reading_the_cache_sees_its_own_notifications_object() {
    const EVENTS: u64 = 300;
    let p = Arc::new(Pipeline::new());
    p.fifo.replace(vec![]);
    p.drain();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let _reader = p
        .processor
        .add_handler(
            CacheReader {
                indexer: p.indexer.clone(),
                tx,
            },
            cfg("reader", 1 << 16),
        )
        .unwrap();
    let _others: Vec<_> = (0..5000)
        .map(|i| {
            p.processor
                .add_handler(Stuck, cfg(&format!("stuck-{i}"), 1))
                .unwrap()
        })
        .collect();
    let dispatcher = {
        let p = p.clone();
        std::thread::spawn(move || {
            for i in 0..EVENTS {
                let name = format!("p{}", i % 50);
                if i % 50 == i {
                    p.fifo.add(pod(&name, i + 1, ""));
                } else {
                    p.fifo.update(pod(&name, i + 1, "u"));
                }
                p.drain();
                // Give the reader's thread time to run between events.
                std::thread::sleep(Duration::from_micros(200));
            }
        })
    };
    let mut wrong = Vec::new();
    for _ in 0..EVENTS {
        if let Some(w) = recv(&mut rx).await {
            wrong.push(w);
        }
    }
    dispatcher.join().unwrap();
    assert!(
        wrong.is_empty(),
        "I2: {} of {EVENTS} notifications reached the handler before the cache had their object, e.g. {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(3)]
    );
}

/// I4: 1M events through a stuck listener of capacity 1024 over a 10k-object
/// cache: what its structures hold, sampled while the events go through, is
/// at most 1024 notifications plus one bookkeeping entry per key. (The heap
/// measured with a counting allocator is `informer_memory.rs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i4_stuck_listener_memory_is_bounded_by_keys() {
    const KEYS: usize = 10_000;
    const EVENTS: usize = 1_000_000;
    let p = Pipeline::new();
    let initial: Vec<ObjectRef> = (0..KEYS)
        .map(|i| pod(&format!("p{i}"), i as u64 + 1, ""))
        .collect();
    p.fifo.replace(initial);
    p.drain();
    assert!(p.processor.has_synced());
    let stuck = p.processor.add_handler(Stuck, cfg("stuck", 1024)).unwrap();
    // Pre-built versions, cycled, so the test measures dispatch, not JSON parsing.
    let versions: Vec<ObjectRef> = (0..KEYS * 4)
        .map(|i| pod(&format!("p{}", i % KEYS), (KEYS + i) as u64 + 1, "v"))
        .collect();
    let mut rng = StdRng::seed_from_u64(4);
    let (mut max_pending, mut max_queued) = (0, 0);
    let t0 = Instant::now();
    for i in 0..EVENTS {
        let o = versions[rng.random_range(0..versions.len())].clone();
        p.fifo.update(o);
        p.drain();
        if i % 10_000 == 0 || i == EVENTS - 1 {
            max_pending = max_pending.max(stuck.pending_keys());
            max_queued = max_queued.max(stuck.queued());
        }
    }
    let took = t0.elapsed();
    eprintln!(
        "I4: {EVENTS} events over {KEYS} keys in {took:?} ({:.0} events/s through FIFO + Indexer + dispatch); \
         stuck listener held at most {max_queued} queued notifications and {max_pending} pending keys",
        EVENTS as f64 / took.as_secs_f64(),
    );
    assert!(max_queued <= 1024, "queue exceeded capacity: {max_queued}");
    assert_eq!(max_queued, 1024, "the queue filled up before overflowing");
    assert!(
        max_pending <= KEYS,
        "bookkeeping grew past the key count: {max_pending}"
    );
    assert!(
        max_pending > KEYS / 2,
        "after a million events most keys are pending: {max_pending}"
    );
}

/// I3 + I5: a listener blocked long enough to overflow, then released, ends with
/// exactly the state that was written (a model kept from the writes, not the
/// Indexer under test); per-key order holds throughout; a fast listener beside
/// it ends with the same state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i5_overflowing_listener_converges_to_the_cache() {
    let p = Pipeline::new();
    let mut rng = StdRng::seed_from_u64(5);
    let mut next_rv = 1u64;
    let mut initial = Vec::new();
    // The model: key -> resourceVersion of every write, applied as written.
    let mut model: BTreeMap<String, u64> = BTreeMap::new();
    for i in 0..200 {
        let o = pod(&format!("p{i}"), next_rv, "");
        model.insert(o.key(), next_rv);
        initial.push(o);
        next_rv += 1;
    }
    p.fifo.replace(initial);
    p.drain();
    let permits = Arc::new(Semaphore::new(0));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let slow = p
        .processor
        .add_handler(
            Gated {
                permits: permits.clone(),
                tx,
            },
            cfg("slow", 32),
        )
        .unwrap();
    let (rec, mut rec_rx) = recorder();
    let _fast = p.processor.add_handler(rec, cfg("fast", 1 << 20)).unwrap();

    let mut live: Vec<String> = (0..200).map(|i| format!("p{i}")).collect();
    let mut dispatched = 200u64;
    for round in 0..20 {
        for _ in 0..500 {
            let r: f64 = rng.random();
            if r < 0.15 || live.is_empty() {
                let name = format!("n{round}-{}", rng.random_range(0..100_000));
                let o = pod(&name, next_rv, "");
                model.insert(o.key(), next_rv);
                p.fifo.add(o);
                live.push(name);
            } else if r < 0.3 {
                let i = rng.random_range(0..live.len());
                let name = live.swap_remove(i);
                let o = pod(&name, next_rv, "");
                model.remove(&o.key());
                p.fifo.delete(o);
            } else {
                let name = &live[rng.random_range(0..live.len())];
                let o = pod(name, next_rv, "u");
                model.insert(o.key(), next_rv);
                p.fifo.update(o);
            }
            next_rv += 1;
            dispatched += 1;
            p.drain();
        }
        // Let the slow listener handle a few, so it is behind but moving.
        permits.add_permits(10);
    }
    assert!(
        slow.stats().snapshot().overflowed > 0,
        "the slow listener must overflow"
    );
    permits.add_permits(1 << 24);

    let mut view = View::default();
    let mut last_rv: HashMap<String, u64> = HashMap::new();
    let mut fsu_deletes = 0;
    while view.0 != model {
        let n = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "slow listener never caught up: {} keys of {} differ from the writes",
                    model
                        .iter()
                        .filter(|(k, v)| view.0.get(*k) != Some(v))
                        .count()
                        + view.0.keys().filter(|k| !model.contains_key(*k)).count(),
                    model.len()
                )
            })
            .unwrap();
        // I3: per-key order.
        let r = rv(&n.object);
        if let Some(prev) = last_rv.insert(n.key.to_string(), r) {
            assert!(r >= prev, "key {} went back from rv {prev} to {r}", n.key);
        }
        // Deletes only for keys the listener knew; adds only for keys it did not.
        match n.kind {
            EventKind::Deleted => {
                assert!(
                    view.0.contains_key(&*n.key),
                    "delete for unknown key {}",
                    n.key
                );
                fsu_deletes += n.final_state_unknown as u32;
            }
            EventKind::Added => {
                assert!(!view.0.contains_key(&*n.key), "add for known key {}", n.key)
            }
            _ => assert!(
                view.0.contains_key(&*n.key),
                "update for unknown key {}",
                n.key
            ),
        }
        view.apply(&n);
    }
    // Nothing follows the final state: a marker written after everything is
    // the next thing the slow listener receives.
    let marker = pod("marker", next_rv, "");
    model.insert(marker.key(), next_rv);
    p.fifo.add(marker);
    p.drain();
    let n = recv(&mut rx).await;
    assert_eq!(
        (n.key.as_ref(), n.kind),
        ("ns0/marker", EventKind::Added),
        "an event after the final state"
    );
    view.apply(&n);
    assert_eq!(view.0, model, "I5: final state differs from the writes");
    let s = slow.stats().snapshot();
    eprintln!(
        "I5: dispatched {dispatched}; slow listener delivered a{} u{} d{} (fsu deletes {fsu_deletes}), overflowed {}, coalesced {}, max depth {}",
        s.added, s.updated, s.deleted, s.overflowed, s.coalesced, s.max_depth
    );
    assert!(s.max_depth <= 32);
    // The fast listener saw everything, in order, and agrees too.
    let mut fast_view = View::default();
    while fast_view.0 != model {
        let (n, _) = tokio::time::timeout(Duration::from_secs(60), rec_rx.recv())
            .await
            .expect("fast listener never reached the written state")
            .unwrap();
        fast_view.apply(&n);
    }
    assert_eq!(fast_view.0, model);
}

/// I6: a listener added in the middle of churn gets the cache as
/// `in_initial_list` adds, then exactly the events dispatched after its
/// snapshot: no gap and no duplicate, checked by resourceVersion against a
/// listener that was there from the start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i6_listener_added_mid_churn_gets_replay_then_live_without_gap_or_duplicate() {
    let p = Arc::new(Pipeline::new());
    p.fifo
        .replace((0..300).map(|i| pod(&format!("p{i}"), i + 1, "")).collect());
    p.drain();
    let (rec, mut ref_rx) = recorder();
    let _reference = p
        .processor
        .add_handler(rec, cfg("reference", 1 << 22))
        .unwrap();

    let counter = Arc::new(AtomicU64::new(301));
    let churn = {
        let p = p.clone();
        let counter = counter.clone();
        std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(6);
            for _ in 0..40_000 {
                let v = counter.fetch_add(1, Ordering::SeqCst);
                let name = format!("p{}", rng.random_range(0..400));
                if rng.random_range(0..10) == 0 {
                    p.fifo.delete(pod(&name, v, ""));
                } else {
                    p.fifo.update(pod(&name, v, "c"));
                }
                p.drain();
            }
        })
    };
    // Subscribe mid-churn.
    while counter.load(Ordering::SeqCst) < 10_000 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let (rec, mut new_rx) = recorder();
    let late = p.processor.add_handler(rec, cfg("late", 1 << 22)).unwrap();
    churn.join().unwrap();
    // A marker written after the churn: each listener has received everything
    // dispatched before it once the marker arrives.
    let marker_rv = counter.fetch_add(1, Ordering::SeqCst);
    p.fifo.add(pod("marker", marker_rv, ""));
    p.drain();
    let mut reference: Vec<NotificationRef> = Vec::new();
    let mut late_log: Vec<NotificationRef> = Vec::new();
    for (rx, log, who) in [
        (&mut ref_rx, &mut reference, "reference"),
        (&mut new_rx, &mut late_log, "late"),
    ] {
        loop {
            let (n, _) = tokio::time::timeout(Duration::from_secs(60), rx.recv())
                .await
                .unwrap_or_else(|_| panic!("{who} listener stalled before the marker"))
                .unwrap();
            if &*n.key == "ns0/marker" {
                break;
            }
            log.push(n);
        }
    }
    let want = cache_view(&p.indexer);
    let mut ref_view = View::default();
    for n in &reference {
        ref_view.apply(n);
    }
    let mut late_view = View::default();
    for n in &late_log {
        late_view.apply(n);
    }
    let mut want_before_marker = want.clone();
    want_before_marker.remove("ns0/marker");
    assert_eq!(
        ref_view.0, want_before_marker,
        "the reference view is the cache"
    );
    assert_eq!(
        late_view.0, want_before_marker,
        "the late view is the cache"
    );
    let mut replay = BTreeMap::new();
    let mut live: Vec<NotificationRef> = Vec::new();
    for n in late_log {
        if n.in_initial_list && live.is_empty() {
            assert_eq!(n.kind, EventKind::Added);
            assert!(
                replay.insert(n.key.to_string(), rv(&n.object)).is_none(),
                "duplicate in replay"
            );
        } else {
            assert!(!n.in_initial_list, "replay item after a live event");
            live.push(n);
        }
    }
    assert!(
        !live.is_empty(),
        "churn ended before the listener was added"
    );
    // Locate the first live event in the reference stream.
    let first = &live[0];
    let pos = reference
        .iter()
        .position(|n| {
            n.key == first.key && rv(&n.object) == rv(&first.object) && n.kind == first.kind
        })
        .expect("first live event is not in the reference stream");
    // Replay == state after reference[..pos].
    let mut before = View::default();
    for n in &reference[..pos] {
        before.apply(n);
    }
    assert_eq!(
        replay, before.0,
        "replay is not the state just before the first live event"
    );
    // Live == reference[pos..], exactly.
    let tail: Vec<(String, u64, EventKind)> = reference[pos..]
        .iter()
        .map(|n| (n.key.to_string(), rv(&n.object), n.kind))
        .collect();
    let got: Vec<(String, u64, EventKind)> = live
        .iter()
        .map(|n| (n.key.to_string(), rv(&n.object), n.kind))
        .collect();
    assert_eq!(
        got.len(),
        tail.len(),
        "gap or duplicate between replay and live"
    );
    assert_eq!(got, tail);
    assert!(late.has_synced());
    eprintln!(
        "I6: replay {} objects, then {} live events",
        replay.len(),
        live.len()
    );
}

/// Delivery::Restarted: the listener replays the cache into the handler before
/// any further live event (I6/I7), and the view is again the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_handler_gets_a_replay_before_live_events() {
    struct FailOnce {
        failed: bool,
        tx: mpsc::UnboundedSender<NotificationRef>,
    }
    impl Handler for FailOnce {
        async fn handle(&mut self, n: NotificationRef) -> Delivery {
            if !self.failed && !n.in_initial_list {
                self.failed = true;
                return Delivery::Restarted;
            }
            let _ = self.tx.send(n);
            Delivery::Ok
        }
    }
    let p = Pipeline::new();
    p.fifo
        .replace((0..50).map(|i| pod(&format!("p{i}"), i + 1, "")).collect());
    p.drain();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let h = p
        .processor
        .add_handler(FailOnce { failed: false, tx }, cfg("r", 1024))
        .unwrap();
    let mut got = Vec::new();
    for _ in 0..50 {
        got.push(rx.recv().await.unwrap());
    }
    assert!(got.iter().all(|n| n.in_initial_list));
    p.fifo.update(pod("p7", 100, "x")); // handler "dies" on this one
    p.drain();
    let mut replay = BTreeMap::new();
    for _ in 0..50 {
        let n = recv(&mut rx).await;
        assert!(n.in_initial_list && n.kind == EventKind::Added);
        replay.insert(n.key.to_string(), rv(&n.object));
    }
    assert_eq!(
        replay,
        cache_view(&p.indexer),
        "replay after restart is the current cache"
    );
    assert_eq!(replay["ns2/p7"], 100);
    live_update_arrives(&p, &mut rx, "p8", 101).await;
    assert_eq!(h.stats().snapshot().restarts, 1);
}

/// Per-listener resync: only the listener that is due receives Synced, and
/// only for keys not already queued in the FIFO.
#[tokio::test(start_paused = true)]
async fn resync_goes_only_to_listeners_that_are_due() {
    let p = Pipeline::new();
    p.fifo
        .replace((0..10).map(|i| pod(&format!("p{i}"), i + 1, "")).collect());
    p.drain();
    let (rec_a, mut rx_a) = recorder();
    let (rec_b, mut rx_b) = recorder();
    let mut ca = cfg("a", 1024);
    ca.resync = Some(Duration::from_secs(10));
    let mut cb = cfg("b", 1024);
    cb.resync = Some(Duration::from_secs(60));
    let _a = p.processor.add_handler(rec_a, ca).unwrap();
    let _b = p.processor.add_handler(rec_b, cb).unwrap();
    for _ in 0..10 {
        rx_a.recv().await.unwrap();
        rx_b.recv().await.unwrap();
    }
    tokio::time::advance(Duration::from_secs(11)).await;
    p.fifo.update(pod("p3", 50, "queued")); // queued: must not also get a Sync
    assert!(p.processor.should_resync(tokio::time::Instant::now()));
    assert_eq!(p.fifo.resync(), 9);
    p.drain();
    let mut synced_a = 0;
    let mut updated_a = 0;
    for _ in 0..10 {
        let (n, _) = rx_a.recv().await.unwrap();
        match n.kind {
            EventKind::Synced => synced_a += 1,
            EventKind::Updated => updated_a += 1,
            k => panic!("unexpected {k:?}"),
        }
    }
    assert_eq!((synced_a, updated_a), (9, 1));
    let (n, _) = rx_b.recv().await.unwrap();
    assert_eq!(
        n.kind,
        EventKind::Updated,
        "listener b is not due and gets no Sync"
    );
    // A marker dispatched after the resync: b receives it next, so no Sync
    // reached b in between.
    p.fifo.update(pod("p4", 51, "marker"));
    p.drain();
    let (n, _) = rx_b.recv().await.unwrap();
    assert_eq!(
        (n.kind, rv(&n.object)),
        (EventKind::Updated, 51),
        "listener b got {:?} for {} before the marker",
        n.kind,
        n.key
    );
}

/// Per-listener filters: a namespace/label-filtered listener sees an update that
/// leaves its selector as a delete and one that enters it as an add.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filtered_listener_sees_its_view_only() {
    let p = Pipeline::new();
    p.fifo.replace(vec![]);
    p.drain();
    let (rec, mut rx) = recorder();
    let mut c = cfg("f", 1024);
    c.label_selector = Some("app=a1".into());
    let _h = p.processor.add_handler(rec, c).unwrap();
    // rv odd => label app=a1, rv even => app=a0 (see `pod`).
    p.fifo.add(pod("x", 1, ""));
    p.drain();
    p.fifo.update(pod("x", 2, ""));
    p.drain();
    p.fifo.update(pod("x", 3, ""));
    p.drain();
    p.fifo.add(pod("y", 4, ""));
    p.drain();
    // A marker in the selection, dispatched after y: y (app=a0) is not
    // delivered if the marker comes right after the three events for x.
    p.fifo.add(pod("z", 5, ""));
    p.drain();
    let mut kinds = Vec::new();
    for _ in 0..4 {
        let (n, _) = recv(&mut rx).await;
        kinds.push((n.key.to_string(), n.kind, rv(&n.object)));
    }
    assert_eq!(
        kinds,
        vec![
            ("ns1/x".into(), EventKind::Added, 1),
            ("ns1/x".into(), EventKind::Deleted, 2),
            ("ns1/x".into(), EventKind::Added, 3),
            ("ns1/z".into(), EventKind::Added, 5),
        ]
    );
}

/// HasSynced per listener: true only after the informer synced and the listener
/// handled the initial state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listener_has_synced_after_handling_the_initial_list() {
    let p = Pipeline::new();
    let permits = Arc::new(Semaphore::new(0));
    let (tx, _rx) = mpsc::unbounded_channel();
    let h = p
        .processor
        .add_handler(
            Gated {
                permits: permits.clone(),
                tx,
            },
            cfg("g", 1024),
        )
        .unwrap();
    p.fifo
        .replace((0..5).map(|i| pod(&format!("p{i}"), i + 1, "")).collect());
    p.drain();
    assert!(p.processor.has_synced());
    assert!(
        !h.has_synced(),
        "listener has not handled the initial list yet"
    );
    permits.add_permits(4);
    // Four of the five handled (and counted after their handler returned):
    // not synced yet.
    wait_until("four handled", || h.stats().snapshot().added == 4).await;
    assert!(!h.has_synced());
    permits.add_permits(1);
    wait_until("listener synced", || h.has_synced()).await;
}

/// I4/I6: a listener that exists before the informer's first list completes
/// gets that list as one snapshot when the informer syncs: every object once,
/// as an add flagged `in_initial_list`, none through its (tiny) queue, so
/// nothing overflows however long the list is; it syncs once it has them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_list_reaches_early_listeners_as_one_snapshot() {
    let p = Pipeline::new();
    let permits = Arc::new(Semaphore::new(1 << 20));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let h = p
        .processor
        .add_handler(
            Gated {
                permits: permits.clone(),
                tx,
            },
            cfg("small", 4),
        )
        .unwrap();
    p.fifo
        .replace((0..50).map(|i| pod(&format!("p{i}"), i + 1, "")).collect());
    // Half the list processed: the informer has not synced, the listener has
    // been given nothing.
    for _ in 0..25 {
        let popped = p.fifo.try_pop().unwrap();
        p.processor.handle_deltas(&popped);
        p.fifo.done(&popped);
    }
    // Nothing is queued for it; what it receives first, below, is the whole
    // list flagged in_initial_list, with nothing before it.
    assert_eq!(h.queued(), 0);
    assert!(!h.has_synced());
    p.drain();
    assert!(p.processor.has_synced());
    let mut keys = std::collections::BTreeSet::new();
    for _ in 0..50 {
        let n = recv(&mut rx).await;
        assert_eq!(n.kind, EventKind::Added);
        assert!(n.in_initial_list, "{} lost in_initial_list", n.key);
        assert!(keys.insert(n.key.to_string()), "{} delivered twice", n.key);
    }
    assert_eq!(keys.len(), 50);
    wait_until("listener synced", || h.has_synced()).await;
    let s = h.stats().snapshot();
    assert_eq!(s.overflowed, 0, "the list never went through the queue");
    assert_eq!(s.replayed, 50);
    // Live events follow through the queue as usual.
    live_update_arrives(&p, &mut rx, "p3", 100).await;
}

/// I7 at the listener level: a handler that panics only closes its own
/// listener; the dispatcher and other listeners carry on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panicking_handler_closes_only_its_listener() {
    struct Panics;
    impl Handler for Panics {
        async fn handle(&mut self, _n: NotificationRef) -> Delivery {
            panic!("handler bug");
        }
    }
    let p = Pipeline::new();
    p.fifo.replace(vec![]);
    p.drain();
    let bad = p.processor.add_handler(Panics, cfg("bad", 8)).unwrap();
    let (rec, mut rx) = recorder();
    let _good = p.processor.add_handler(rec, cfg("good", 1024)).unwrap();
    for i in 0..100 {
        p.fifo.add(pod(&format!("p{i}"), i + 1, ""));
        p.drain();
    }
    for _ in 0..100 {
        recv(&mut rx).await;
    }
    wait_until("panic counted", || bad.stats().snapshot().panics == 1).await;
    assert_eq!(bad.queued(), 0, "a closed listener holds nothing");
    assert_eq!(bad.pending_keys(), 0);
}

/// Takes batches of up to `max`, waits for one permit per batch, then sends the
/// batch on and handles all of it.
struct BatchGated {
    max: usize,
    permits: Arc<Semaphore>,
    /// Size of the batch in the handler's hands (0 when idle).
    holding: Arc<AtomicU64>,
    tx: mpsc::UnboundedSender<Vec<NotificationRef>>,
}

impl Handler for BatchGated {
    async fn handle(&mut self, n: NotificationRef) -> Delivery {
        self.handle_batch(vec![n]).await[0].delivery.clone()
    }

    fn max_batch(&self) -> usize {
        self.max
    }

    async fn handle_batch(&mut self, batch: Vec<NotificationRef>) -> Vec<Handled> {
        self.holding.store(batch.len() as u64, Ordering::SeqCst);
        self.permits.acquire().await.unwrap().forget();
        self.holding.store(0, Ordering::SeqCst);
        let out = batch
            .iter()
            .map(|_| Handled {
                delivery: Delivery::Ok,
                at: Instant::now(),
            })
            .collect();
        let _ = self.tx.send(batch);
        out
    }
}

/// I3 + I4 with a batching handler: a batch is only what is already queued,
/// at most `max_batch`, in dispatch order; the batch in the handler's hands
/// counts against the capacity; after the overflow the handler still ends with
/// the cache's final state (I5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i3_i4_batches_keep_order_and_count_against_capacity() {
    const CAP: usize = 64;
    const MAX: usize = 8;
    let p = Pipeline::new();
    p.fifo.replace(Vec::new());
    p.drain();
    let permits = Arc::new(Semaphore::new(0));
    let holding = Arc::new(AtomicU64::new(0));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let h = p
        .processor
        .add_handler(
            BatchGated {
                max: MAX,
                permits: permits.clone(),
                holding: holding.clone(),
                tx,
            },
            cfg("batched", CAP),
        )
        .unwrap();
    let mut next_rv = 1;
    let mut dispatched = Vec::new();
    let mut dispatch = |name: String| {
        let o = pod(&name, next_rv, "");
        next_rv += 1;
        dispatched.push(rv(&o));
        p.fifo.update(o);
        p.drain();
    };
    dispatch("p0".into());
    wait_until("the first batch is taken", || {
        holding.load(Ordering::SeqCst) > 0
    })
    .await;
    for i in 1..300 {
        dispatch(format!("p{}", i % 50));
    }
    let held = holding.load(Ordering::SeqCst) as usize;
    assert_eq!(
        h.queued() + held,
        CAP,
        "queued ({}) plus the batch in hand ({held}) fill the capacity exactly",
        h.queued()
    );
    let s = h.stats().snapshot();
    assert!(s.overflowed > 0);
    assert!(s.max_depth as usize <= CAP);

    permits.add_permits(1 << 20);
    let mut view = View::default();
    let mut received = Vec::new();
    let mut sizes = Vec::new();
    while view.0 != cache_view(&p.indexer) || h.queued() > 0 || h.pending_keys() > 0 {
        let batch = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("batches keep coming until the view is the cache")
            .unwrap();
        sizes.push(batch.len());
        for n in &batch {
            view.apply(n);
            received.push(rv(&n.object));
        }
    }
    assert!(sizes.iter().all(|&k| (1..=MAX).contains(&k)), "{sizes:?}");
    assert!(
        sizes.contains(&MAX),
        "a backlog goes over in full batches: {sizes:?}"
    );
    // Everything taken before the overflow arrives in dispatch order (I3).
    let before_overflow = CAP;
    assert_eq!(
        &received[..before_overflow],
        &dispatched[..before_overflow],
        "dispatch order within and across batches"
    );
    assert_eq!(view.0, cache_view(&p.indexer), "final state (I5)");
}

/// I6 with batches: when a handler says Restarted in the middle of a batch
/// (or returns early from it without saying why), the rest of the batch is
/// not delivered; the cache is replayed, then live events continue.
async fn mid_batch_failure(say_restarted: bool) {
    struct FailMidBatch {
        failed: bool,
        say_restarted: bool,
        tx: mpsc::UnboundedSender<NotificationRef>,
    }
    impl Handler for FailMidBatch {
        async fn handle(&mut self, n: NotificationRef) -> Delivery {
            self.handle_batch(vec![n]).await[0].delivery.clone()
        }
        fn max_batch(&self) -> usize {
            8
        }
        async fn handle_batch(&mut self, batch: Vec<NotificationRef>) -> Vec<Handled> {
            let ok = || Handled {
                delivery: Delivery::Ok,
                at: Instant::now(),
            };
            if !self.failed && batch.len() >= 3 && !batch[0].in_initial_list {
                self.failed = true;
                for n in &batch[..2] {
                    let _ = self.tx.send(n.clone());
                }
                let mut out = vec![ok(), ok()];
                if self.say_restarted {
                    out.push(Handled {
                        delivery: Delivery::Restarted,
                        at: Instant::now(),
                    });
                }
                return out;
            }
            for n in &batch {
                let _ = self.tx.send(n.clone());
            }
            batch.iter().map(|_| ok()).collect()
        }
    }
    let p = Pipeline::new();
    p.fifo
        .replace((0..20).map(|i| pod(&format!("p{i}"), i + 1, "")).collect());
    p.drain();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let h = p
        .processor
        .add_handler(
            FailMidBatch {
                failed: false,
                say_restarted,
                tx,
            },
            cfg("mid", 1024),
        )
        .unwrap();
    for _ in 0..20 {
        assert!(recv(&mut rx).await.in_initial_list);
    }
    // Ten updates dispatched while the listener task cannot run (this runtime
    // has one thread): it takes them as one batch of 8, then one of 2.
    for i in 0..10 {
        p.fifo.update(pod(&format!("p{i}"), 100 + i, "x"));
    }
    p.drain();
    for i in 0..2 {
        let n = recv(&mut rx).await;
        assert!(!n.in_initial_list);
        assert_eq!(rv(&n.object), 100 + i);
    }
    let mut replay = BTreeMap::new();
    for _ in 0..20 {
        let n = recv(&mut rx).await;
        assert!(
            n.in_initial_list && n.kind == EventKind::Added,
            "the rest of the batch is superseded by the replay, got {} rv {}",
            n.key,
            rv(&n.object)
        );
        replay.insert(n.key.to_string(), rv(&n.object));
    }
    assert_eq!(
        replay,
        cache_view(&p.indexer),
        "the replay is the current cache"
    );
    live_update_arrives(&p, &mut rx, "p15", 500).await;
    let s = h.stats().snapshot();
    assert_eq!(s.restarts, u64::from(say_restarted));
    assert_eq!(s.replayed, 40);
    wait_until("listener synced", || h.has_synced()).await;
}

#[tokio::test]
async fn restarted_mid_batch_supersedes_the_rest_with_a_replay() {
    mid_batch_failure(true).await;
}

#[tokio::test]
async fn a_batch_cut_short_is_treated_as_a_restart() {
    mid_batch_failure(false).await;
}

/// A handler that asks for its own thread (as a plugin runner does) gets its
/// listener loop there, outside any async runtime, with the same replay and
/// live delivery; removing the listener stops the loop and drops the handler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_can_run_its_listener_on_its_own_thread() {
    struct OnThread {
        tx: mpsc::UnboundedSender<(NotificationRef, Option<String>, bool)>,
        dropped: Arc<std::sync::atomic::AtomicBool>,
    }
    impl Handler for OnThread {
        async fn handle(&mut self, n: NotificationRef) -> Delivery {
            let thread = std::thread::current().name().map(str::to_string);
            let in_runtime = tokio::runtime::Handle::try_current().is_ok();
            let _ = self.tx.send((n, thread, in_runtime));
            Delivery::Ok
        }
        fn own_thread(&self) -> Option<String> {
            Some("listener-own".into())
        }
    }
    impl Drop for OnThread {
        fn drop(&mut self) {
            self.dropped.store(true, Ordering::SeqCst);
        }
    }
    let p = Pipeline::new();
    p.fifo
        .replace((0..3).map(|i| pod(&format!("p{i}"), i + 1, "")).collect());
    p.drain();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let h = p
        .processor
        .add_handler(
            OnThread {
                tx,
                dropped: dropped.clone(),
            },
            cfg("own", 16),
        )
        .unwrap();
    for _ in 0..3 {
        let (n, thread, in_runtime) = recv(&mut rx).await;
        assert!(n.in_initial_list);
        assert_eq!(thread.as_deref(), Some("listener-own"));
        assert!(!in_runtime, "no tokio context on the handler's own thread");
    }
    p.fifo.update(pod("p1", 10, "x"));
    p.drain();
    let (n, thread, _) = recv(&mut rx).await;
    assert_eq!(rv(&n.object), 10);
    assert_eq!(thread.as_deref(), Some("listener-own"));
    wait_until("listener synced", || h.has_synced()).await;
    assert!(!dropped.load(Ordering::SeqCst));
    h.remove();
    wait_until("the handler is dropped with its listener", || {
        dropped.load(Ordering::SeqCst)
    })
    .await;
}
