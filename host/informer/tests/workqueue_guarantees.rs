//! The work queue's guarantees, each test named after one: dedup, one worker
//! per key, retries paced by the rate limiter, requeue-after on time, owned
//! objects queueing their owner, live keys ahead of initial-list keys, and
//! the handling of terminal errors and crashes. The informer side is the
//! in-process pipeline (no network); time is tokio's paused clock where the
//! test is about instants, and a multi-threaded runtime where it is about
//! concurrency. Oracles are the reconciler's own journal of calls and the
//! changes the test made, never the queue's counters alone.

use crate::workqueue_support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kube_informer::workqueue::triggers::{Enqueue, KeyMap};
use kube_informer::workqueue::{
    reconcile_fn, Outcome, Priority, RateLimiterConfig, StartGate, WorkQueue, Workers,
};
use kube_informer::HandlerOptions;
use parking_lot::Mutex;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use workqueue_support::*;

const MS: Duration = Duration::from_millis(1);

fn queue() -> Arc<WorkQueue<Arc<str>>> {
    WorkQueue::new(RateLimiterConfig::default())
}

fn recorders(n: usize, journal: &Arc<Journal>) -> Vec<Recorder> {
    (0..n).map(|i| Recorder::new(i, journal.clone())).collect()
}

/// Waits until the queue holds nothing and no worker is busy, then lets the
/// paused clock run on a little to show nothing else is coming.
async fn quiet(q: &WorkQueue<Arc<str>>) {
    wait_until("queue drained", || q.queued() == 0 && q.processing() == 0).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(q.queued() + q.processing(), 0, "nothing came back");
}

#[tokio::test(start_paused = true)]
async fn dedup_1000_updates_to_one_key_during_a_slow_reconcile_give_at_most_2_reconciles() {
    let p = Pipeline::new("apps/v1/deployments");
    p.list(vec![deployment("ns", "web", 1)]);
    let q = queue();
    let reg = p
        .processor
        .add_handler(
            Enqueue::new(q.clone(), "apps/v1/deployments", KeyMap::Primary),
            HandlerOptions::named("dedup"),
        )
        .unwrap();
    wait_until("listener synced", || reg.has_synced()).await;
    let journal = Arc::new(Journal::default());
    let slow = Arc::new(Semaphore::new(0));
    let workers = Workers::spawn(
        q.clone(),
        vec![Recorder::new(0, journal.clone()).gated(slow.clone())],
    );
    wait_until("first reconcile started", || journal.count("ns/web") == 1).await;
    for rv in 2..1002 {
        p.update(deployment("ns", "web", rv));
    }
    wait_until("all 1000 updates reached the trigger", || {
        reg.stats().snapshot().updated == 1000
    })
    .await;
    let last_update = Instant::now();
    assert_eq!(q.queued(), 1, "1000 updates are one queued key");
    slow.add_permits(1_000_000);
    quiet(&q).await;
    let starts = journal.starts_of("ns/web");
    assert!(
        starts.len() <= 2,
        "1000 updates during one slow reconcile gave {} reconciles",
        starts.len()
    );
    assert_eq!(
        starts.len(),
        2,
        "the updates during the reconcile must not be lost"
    );
    assert!(
        starts[1] >= last_update,
        "the second reconcile follows the updates"
    );
    assert!(journal.overlaps.lock().is_empty());
    drop(workers);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_4_workers_no_key_is_ever_reconciled_by_two_workers_at_once() {
    let q = queue();
    let journal = Arc::new(Journal::default());
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let reconcilers: Vec<_> = (0..4)
        .map(|i| {
            let (inf, most) = (in_flight.clone(), most.clone());
            let inner = Arc::new(tokio::sync::Mutex::new(Recorder::new(i, journal.clone())));
            reconcile_fn(move |key: Arc<str>| {
                let (inf, most, inner) = (inf.clone(), most.clone(), inner.clone());
                async move {
                    let now = inf.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    let out = {
                        let mut r = inner.lock().await;
                        kube_informer::workqueue::Reconcile::reconcile(&mut *r, &key).await
                    };
                    for _ in 0..(key.len() % 4) {
                        tokio::task::yield_now().await;
                    }
                    inf.fetch_sub(1, Ordering::SeqCst);
                    out
                }
            })
        })
        .collect();
    let workers = Workers::spawn(q.clone(), reconcilers);
    // Producers add 20 keys over and over while the workers drain them.
    let last_add: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let producers: Vec<_> = (0..3)
        .map(|p| {
            let (q, last_add) = (q.clone(), last_add.clone());
            tokio::spawn(async move {
                for round in 0..400 {
                    let key = format!("ns/k{}", (round * 7 + p) % 20);
                    {
                        // The time is taken before the add: a worker may pick
                        // the key up before `add` returns.
                        let mut l = last_add.lock();
                        let at = Instant::now();
                        q.add(Arc::from(key.as_str()));
                        l.insert(key, at);
                    }
                    if round % 5 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.await.unwrap();
    }
    wait_until("queue drained", || q.queued() == 0 && q.processing() == 0).await;
    workers.stop(Duration::from_secs(5)).await;

    assert!(
        journal.overlaps.lock().is_empty(),
        "two workers on one key: {:?}",
        journal.overlaps.lock()
    );
    // The same, from the recorded intervals: per key, each call starts after
    // the previous one ended.
    let calls = journal.calls.lock().clone();
    let mut by_key: HashMap<&str, Vec<_>> = HashMap::new();
    for c in &calls {
        by_key.entry(c.key.as_str()).or_default().push(c);
    }
    for (key, mut cs) in by_key {
        cs.sort_by_key(|c| c.start);
        for w in cs.windows(2) {
            assert!(
                w[1].start >= w[0].end,
                "{key}: call by worker {} started before worker {}'s ended",
                w[1].worker,
                w[0].worker
            );
        }
        // No add was lost: the key's last reconcile began after its last add.
        let last = last_add.lock()[key];
        assert!(
            cs.last().unwrap().start >= last,
            "{key}: last add not reconciled"
        );
    }
    assert!(
        most.load(Ordering::SeqCst) >= 2,
        "the workers did run side by side"
    );
    let used: std::collections::BTreeSet<usize> = calls.iter().map(|c| c.worker).collect();
    assert!(used.len() >= 2, "keys spread over the workers: {used:?}");
}

#[tokio::test(start_paused = true)]
async fn retry_delays_follow_the_rate_limiter_on_a_paused_clock() {
    // Per key: 5 ms doubling (the bucket's burst of 100 is not reached).
    let q = queue();
    let journal = Arc::new(Journal::default());
    let workers = Workers::spawn(
        q.clone(),
        vec![Recorder::new(0, journal.clone()).answering(|_, nth| {
            if nth < 8 {
                Outcome::Retry("not yet".into())
            } else {
                Outcome::Done
            }
        })],
    );
    let t0 = Instant::now();
    q.add(Arc::from("ns/a"));
    quiet(&q).await;
    let starts: Vec<Duration> = journal.starts_of("ns/a").iter().map(|s| *s - t0).collect();
    let mut expected = vec![Duration::ZERO];
    let mut at = Duration::ZERO;
    for i in 0..8 {
        at += 5 * MS * (1 << i);
        expected.push(at);
    }
    assert_eq!(starts, expected, "5, 10, 20, ... ms apart");
    assert_eq!(
        q.num_requeues(&Arc::from("ns/a")),
        0,
        "forgotten on success"
    );
    assert_eq!(q.metrics().retries, 8);
    drop(workers);

    // Many keys at once: the overall bucket (here 10/s, burst 3) paces them.
    let cfg = RateLimiterConfig {
        base_delay: MS,
        max_delay: Duration::from_secs(1),
        qps: 10.0,
        burst: 3,
    };
    let q = WorkQueue::<Arc<str>>::new(cfg);
    let journal = Arc::new(Journal::default());
    let _workers = Workers::spawn(
        q.clone(),
        vec![Recorder::new(0, journal.clone()).answering(|_, nth| {
            if nth == 0 {
                Outcome::Retry("once".into())
            } else {
                Outcome::Done
            }
        })],
    );
    let t0 = Instant::now();
    for i in 0..6 {
        q.add(Arc::from(format!("ns/k{i}").as_str()));
    }
    quiet(&q).await;
    let mut retried: Vec<Duration> = (0..6)
        .map(|i| journal.starts_of(&format!("ns/k{i}"))[1] - t0)
        .collect();
    retried.sort();
    assert_eq!(
        retried,
        vec![MS, MS, MS, 100 * MS, 200 * MS, 300 * MS],
        "three from the burst, then one per 100 ms"
    );
}

#[tokio::test(start_paused = true)]
async fn requeue_after_fires_on_time() {
    let q = queue();
    let journal = Arc::new(Journal::default());
    let _workers = Workers::spawn(
        q.clone(),
        vec![
            Recorder::new(0, journal.clone()).answering(|key, nth| match (key, nth) {
                ("ns/a", 0) => Outcome::RequeueAfter(Duration::from_secs(30)),
                ("ns/b", 0) => Outcome::RequeueAfter(Duration::from_secs(60)),
                _ => Outcome::Done,
            }),
        ],
    );
    let t0 = Instant::now();
    q.add(Arc::from("ns/a"));
    q.add(Arc::from("ns/b"));
    // A change to b before its requeue time reconciles it at once; its
    // pending requeue is superseded (one entry per key, earliest wins).
    tokio::time::sleep(Duration::from_secs(10)).await;
    q.add(Arc::from("ns/b"));
    tokio::time::sleep(Duration::from_secs(120)).await;
    let a: Vec<Duration> = journal.starts_of("ns/a").iter().map(|s| *s - t0).collect();
    let b: Vec<Duration> = journal.starts_of("ns/b").iter().map(|s| *s - t0).collect();
    assert_eq!(a, vec![Duration::ZERO, Duration::from_secs(30)]);
    assert_eq!(b, vec![Duration::ZERO, Duration::from_secs(10)]);
    assert_eq!(q.queued(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_terminal_error_is_not_retried() {
    let q = queue();
    let journal = Arc::new(Journal::default());
    let workers = Workers::spawn(
        q.clone(),
        vec![Recorder::new(0, journal.clone()).answering(|_, nth| {
            if nth == 0 {
                Outcome::Terminal("the spec can never be satisfied".into())
            } else {
                Outcome::Done
            }
        })],
    );
    q.add(Arc::from("ns/a"));
    // Longer than the longest retry delay.
    tokio::time::sleep(Duration::from_secs(2000)).await;
    assert_eq!(journal.count("ns/a"), 1, "a terminal error is not retried");
    assert_eq!(q.num_requeues(&Arc::from("ns/a")), 0);
    assert_eq!(workers.stats().snapshot().terminal, 1);
    // The next change queues it again.
    q.add(Arc::from("ns/a"));
    quiet(&q).await;
    assert_eq!(journal.count("ns/a"), 2);
    assert_eq!(workers.stats().snapshot().ok, 1);
}

#[tokio::test(start_paused = true)]
async fn a_panic_in_reconcile_is_a_trap_retried_with_backoff() {
    let q = queue();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let c2 = calls.clone();
    let workers = Workers::spawn(
        q.clone(),
        vec![reconcile_fn(move |key: Arc<str>| {
            let calls = c2.clone();
            async move {
                let n = {
                    let mut c = calls.lock();
                    c.push((key.to_string(), Instant::now()));
                    c.len()
                };
                if n == 1 {
                    panic!("boom");
                }
                Outcome::Done
            }
        })],
    );
    let t0 = Instant::now();
    q.add(Arc::from("ns/a"));
    quiet(&q).await;
    let at: Vec<Duration> = calls.lock().iter().map(|(_, t)| *t - t0).collect();
    assert_eq!(
        at,
        vec![Duration::ZERO, 5 * MS],
        "retried after the first backoff"
    );
    let s = workers.stats().snapshot();
    assert_eq!((s.trap, s.ok), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn a_change_to_an_owned_service_queues_its_deployment() {
    let deploys = Pipeline::new("apps/v1/deployments");
    let services = Pipeline::new("v1/services");
    deploys.list(vec![deployment("ns", "web", 1), deployment("ns", "api", 1)]);
    services.list(vec![owned_service("ns", "web", "web", 1)]);
    let q = queue();
    let primary = "apps/v1/deployments";
    let r1 = deploys
        .processor
        .add_handler(
            Enqueue::new(q.clone(), primary, KeyMap::Primary),
            HandlerOptions::named("for"),
        )
        .unwrap();
    let r2 = services
        .processor
        .add_handler(
            Enqueue::new(
                q.clone(),
                primary,
                KeyMap::ControllerOwner {
                    group: "apps".into(),
                    kind: "Deployment".into(),
                    namespaced: true,
                },
            ),
            HandlerOptions::named("owns"),
        )
        .unwrap();
    wait_until("synced", || r1.has_synced() && r2.has_synced()).await;
    let journal = Arc::new(Journal::default());
    let _workers = Workers::spawn(q.clone(), recorders(1, &journal));
    quiet(&q).await;
    assert_eq!(journal.count("ns/web"), 1);
    assert_eq!(journal.count("ns/api"), 1);
    journal.calls.lock().clear();

    services.update(owned_service("ns", "web", "web", 2));
    quiet(&q).await;
    assert_eq!(
        journal.keys(),
        vec!["ns/web"],
        "the Service's change queues its Deployment"
    );
    journal.calls.lock().clear();

    // A Service controlled by something else queues nothing.
    let other = object(serde_json::json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "rs-svc", "namespace": "ns", "uid": "u9", "resourceVersion": "3",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                 "uid": "u8", "controller": true}]}}));
    services.fifo.add(other);
    services.drain();
    quiet(&q).await;
    assert!(journal.keys().is_empty(), "{:?}", journal.keys());

    // Moving a Service to another owner queues both; deleting it queues its
    // last owner.
    services.update(owned_service("ns", "web", "api", 4));
    quiet(&q).await;
    let mut keys = journal.keys();
    keys.sort();
    assert_eq!(keys, vec!["ns/api", "ns/web"]);
    journal.calls.lock().clear();
    services.fifo.delete(owned_service("ns", "web", "api", 4));
    services.drain();
    quiet(&q).await;
    assert_eq!(journal.keys(), vec!["ns/api"]);
}

#[tokio::test(start_paused = true)]
async fn live_keys_overtake_initial_list_keys() {
    let p = Pipeline::new("apps/v1/deployments");
    let q = queue();
    let reg = p
        .processor
        .add_handler(
            Enqueue::new(q.clone(), "apps/v1/deployments", KeyMap::Primary),
            HandlerOptions::named("pq"),
        )
        .unwrap();
    p.list(
        (0..200)
            .map(|i| deployment("ns", &format!("d{i:03}"), 1))
            .collect(),
    );
    wait_until("initial list queued", || reg.has_synced()).await;
    assert_eq!(q.len(), 200);
    let journal = Arc::new(Journal::default());
    let permits = Arc::new(Semaphore::new(0));
    let gate = StartGate::new();
    let _workers = Workers::spawn_gated(
        q.clone(),
        vec![Recorder::new(0, journal.clone()).gated(permits.clone())],
        "pq",
        gate.clone(),
    );
    gate.open();
    wait_until("first initial key taken", || {
        journal.calls.lock().len() == 1
    })
    .await;
    let first = journal.keys()[0].clone();
    // A live change to a key still waiting behind 198 others.
    let live = (0..200)
        .map(|i| format!("ns/d{i:03}"))
        .rev()
        .find(|k| *k != first)
        .unwrap();
    let name = live.split_once('/').unwrap().1.to_string();
    p.update(deployment("ns", &name, 2));
    wait_until("live change queued", || reg.stats().snapshot().updated == 1).await;
    permits.add_permits(1);
    wait_until("second reconcile", || journal.calls.lock().len() == 2).await;
    assert_eq!(
        journal.keys()[1],
        live,
        "the live key overtook 198 initial keys"
    );
    permits.add_permits(1_000_000);
    quiet(&q).await;
    let keys = journal.keys();
    assert_eq!(
        keys.len(),
        200,
        "each key once: the live change raised the queued key"
    );
    let unique: std::collections::BTreeSet<&String> = keys.iter().collect();
    assert_eq!(unique.len(), 200);
}

#[tokio::test(start_paused = true)]
async fn resyncs_and_unchanged_relists_are_low_priority() {
    use kube_informer::notification::{EventKind, Notification};
    let d1 = deployment("ns", "a", 1);
    let d2 = deployment("ns", "a", 2);
    let n = |kind,
             object: &kube_informer::ObjectRef,
             old: Option<&kube_informer::ObjectRef>,
             initial| Notification {
        kind,
        resource: "apps/v1/deployments".into(),
        key: "ns/a".into(),
        object: object.clone(),
        old: old.cloned(),
        in_initial_list: initial,
        final_state_unknown: false,
    };
    let p = Enqueue::priority_of;
    assert_eq!(p(&n(EventKind::Added, &d1, None, true)), Priority::LOW);
    assert_eq!(
        p(&n(EventKind::Synced, &d1, Some(&d1), false)),
        Priority::LOW
    );
    assert_eq!(
        p(&n(EventKind::Updated, &d1, Some(&d1), false)),
        Priority::LOW
    );
    assert_eq!(
        p(&n(EventKind::Updated, &d2, Some(&d1), false)),
        Priority::LIVE
    );
    assert_eq!(p(&n(EventKind::Added, &d1, None, false)), Priority::LIVE);
    assert_eq!(p(&n(EventKind::Deleted, &d1, None, false)), Priority::LIVE);
}
