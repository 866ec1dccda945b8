//! Controller plugins (world `controller`) behind a work queue: every
//! outcome of `reconcile` across the WIT boundary, traps retried on a fresh
//! instance, terminal errors not retried, and N workers (N instances) that
//! never reconcile one key at once. The guest is `reconcile-probe`, which
//! answers as the cached object's annotation says; oracles are the host-side
//! journal of calls, the cache the test scripted, and the plugin's status.

use crate::runtime_support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube_informer::cache_view::{CacheError, CacheView};
use kube_informer::object::{Object, ObjectRef, Transform};
use kube_informer::workqueue::{Outcome, RateLimiterConfig, Reconcile, WorkQueue, Workers};
use parking_lot::Mutex;
use runtime_support::*;
use wasm_informer_runtime::{PluginLimits, ReconcileWorker, WorkersError};

const PRIMARY: &str = "apps/v1/deployments";

fn deployment(ns: &str, name: &str, outcome: &str) -> ObjectRef {
    let json = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}"), "resourceVersion": "1",
                     "annotations": {"probe.wasm-informer.dev/outcome": outcome}},
        "spec": {"replicas": 1},
    });
    Arc::new(Object::from_json(json.to_string().as_bytes(), &Transform::default()).unwrap())
}

/// A cache that answers the first `n` reads of a key with one object and
/// later reads with another (a state change the queue is never told of).
#[derive(Default)]
struct Scripted {
    base: FakeCache,
    script: Mutex<HashMap<String, (usize, ObjectRef, ObjectRef)>>,
    reads: Mutex<HashMap<String, usize>>,
}

impl Scripted {
    fn first_then(&self, key: &str, n: usize, first: ObjectRef, then: ObjectRef) {
        self.base.insert(PRIMARY, then.clone());
        self.script.lock().insert(key.into(), (n, first, then));
    }
}

impl CacheView for Scripted {
    fn get(&self, resource: &str, key: &str) -> Result<Option<ObjectRef>, CacheError> {
        let read = {
            let mut r = self.reads.lock();
            let c = r.entry(key.to_string()).or_default();
            *c += 1;
            *c
        };
        if let Some((n, first, then)) = self.script.lock().get(key) {
            return Ok(Some(if read <= *n {
                first.clone()
            } else {
                then.clone()
            }));
        }
        self.base.get(resource, key)
    }

    fn list(
        &self,
        resource: &str,
        namespace: Option<&str>,
        selector: Option<&str>,
    ) -> Result<Vec<ObjectRef>, CacheError> {
        self.base.list(resource, namespace, selector)
    }

    fn by_index(&self, r: &str, i: &str, v: &str) -> Result<Vec<ObjectRef>, CacheError> {
        self.base.by_index(r, i, v)
    }

    fn has_synced(&self, resource: &str) -> Result<bool, CacheError> {
        self.base.has_synced(resource)
    }
}

fn limits() -> PluginLimits {
    PluginLimits {
        backoff_initial_ms: 1,
        backoff_max_ms: 10,
        ..PluginLimits::default()
    }
}

async fn workers(cache: Arc<dyn CacheView>, n: usize) -> Vec<ReconcileWorker> {
    let engine = engine();
    let plugin = load(
        &engine,
        "probe",
        plugin_artifacts::RECONCILE_PROBE,
        serde_json::json!({}),
        &[PRIMARY],
        limits(),
    );
    ReconcileWorker::start_all(engine, plugin, cache, PRIMARY, n, None)
        .await
        .unwrap()
}

async fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(30), "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_outcomes_cross_the_wit_boundary() {
    let cache = Arc::new(FakeCache::default());
    for (name, outcome) in [
        ("done", "done"),
        ("requeue", "requeue:250"),
        ("retry", "retry"),
        ("terminal", "terminal"),
    ] {
        cache.insert(PRIMARY, deployment("ns", name, outcome));
    }
    let mut w = workers(cache, 1).await.remove(0);
    assert_eq!(w.reconcile_key("ns/done").await, Outcome::Done);
    assert_eq!(
        w.reconcile_key("ns/requeue").await,
        Outcome::RequeueAfter(Duration::from_millis(250))
    );
    assert_eq!(
        w.reconcile_key("ns/retry").await,
        Outcome::Retry("retry call=3".into())
    );
    assert_eq!(
        w.reconcile_key("ns/terminal").await,
        Outcome::Terminal("terminal call=4".into())
    );
    // The object is gone: the reconciler is still called, and cleans up.
    assert_eq!(w.reconcile_key("ns/gone").await, Outcome::Done);
    let s = w.status().snapshot();
    assert_eq!((s.traps, s.restarts, s.errors), (0, 0, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trap_in_reconcile_retries_the_key_with_a_fresh_instance() {
    let cache = Arc::new(Scripted::default());
    // The first read of ns/a traps the instance; every later one asks the
    // probe how many calls its instance has had.
    cache.first_then(
        "ns/a",
        1,
        deployment("ns", "a", "trap"),
        deployment("ns", "a", "calls"),
    );
    let ws = workers(cache.clone(), 2).await;
    let status = ws[0].status().clone();
    let q = WorkQueue::<Arc<str>>::new(RateLimiterConfig::default());
    let workers = Workers::spawn(q.clone(), ws);
    q.add(Arc::from("ns/a"));
    wait_until("the retry ended", || {
        workers.stats().snapshot().terminal == 1
    })
    .await;
    let counts = workers.stats().snapshot();
    assert_eq!((counts.trap, counts.terminal, counts.total()), (1, 1, 2));
    let s = status.snapshot();
    assert_eq!(s.traps, 1);
    assert_eq!(s.traps_by_kind["panic"], 1);
    assert_eq!(s.restarts, 1, "only the trapped worker's instance restarts");
    assert_eq!(
        s.last_error.as_deref(),
        Some("calls=1"),
        "the retry ran on a fresh instance (its first call)"
    );
    assert_eq!(
        q.metrics().retries,
        1,
        "the retry went through the rate limiter"
    );
    assert!(workers.stop(Duration::from_secs(5)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_error_is_not_retried() {
    let cache = Arc::new(FakeCache::default());
    cache.insert(PRIMARY, deployment("ns", "bad", "terminal"));
    let q = WorkQueue::<Arc<str>>::new(RateLimiterConfig::default());
    let workers = Workers::spawn(q.clone(), self::workers(cache, 1).await);
    q.add(Arc::from("ns/bad"));
    wait_until("reconciled", || workers.stats().snapshot().total() == 1).await;
    // Well past the first retry delays (5, 10, 20, ... ms).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let counts = workers.stats().snapshot();
    assert_eq!((counts.terminal, counts.total()), (1, 1), "not retried");
    assert_eq!(q.queued(), 0);
    assert_eq!(q.num_requeues(&Arc::from("ns/bad")), 0);
    assert_eq!(q.metrics().retries, 0);
}

/// One reconcile: key, worker, start, end.
type Call = (String, usize, Instant, Instant);

/// Records, on the host side, when each worker starts and ends each key.
struct Journaled {
    inner: ReconcileWorker,
    calls: Arc<Mutex<Vec<Call>>>,
    in_progress: Arc<Mutex<HashMap<String, usize>>>,
    overlaps: Arc<Mutex<Vec<String>>>,
    in_flight: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

impl Reconcile<Arc<str>> for Journaled {
    async fn reconcile(&mut self, key: &Arc<str>) -> Outcome {
        let me = self.inner.index();
        if let Some(other) = self.in_progress.lock().insert(key.to_string(), me) {
            self.overlaps
                .lock()
                .push(format!("{key}: workers {other} and {me}"));
        }
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        let start = Instant::now();
        let out = self.inner.reconcile_key(key).await;
        let end = Instant::now();
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.in_progress.lock().remove(&**key);
        self.calls.lock().push((key.to_string(), me, start, end));
        out
    }

    async fn ready(&mut self) {
        self.inner.ready().await
    }

    fn own_thread(&self) -> Option<String> {
        self.inner.own_thread()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_4_workers_no_key_is_ever_reconciled_by_two_workers_at_once() {
    let cache = Arc::new(FakeCache::default());
    let keys: Vec<String> = (0..8).map(|i| format!("ns/k{i}")).collect();
    for k in &keys {
        cache.insert(PRIMARY, deployment("ns", &k[3..], "sleep:2"));
    }
    let calls = Arc::new(Mutex::new(Vec::new()));
    let in_progress = Arc::new(Mutex::new(HashMap::new()));
    let overlaps = Arc::new(Mutex::new(Vec::new()));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let ws: Vec<Journaled> = workers(cache, 4)
        .await
        .into_iter()
        .map(|inner| Journaled {
            inner,
            calls: calls.clone(),
            in_progress: in_progress.clone(),
            overlaps: overlaps.clone(),
            in_flight: in_flight.clone(),
            most: most.clone(),
        })
        .collect();
    assert!(
        ws.iter().all(|w| w.own_thread().is_some()),
        "one thread per instance"
    );
    let q = WorkQueue::<Arc<str>>::new(RateLimiterConfig::default());
    let workers = Workers::spawn(q.clone(), ws);
    let mut last_add: HashMap<String, Instant> = HashMap::new();
    for round in 0..60 {
        for k in &keys {
            q.add(Arc::from(k.as_str()));
            last_add.insert(k.clone(), Instant::now());
        }
        if round % 4 == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    wait_until("drained", || q.queued() == 0 && q.processing() == 0).await;
    assert!(workers.stop(Duration::from_secs(5)).await);

    assert!(overlaps.lock().is_empty(), "{:?}", overlaps.lock());
    let calls = calls.lock().clone();
    for k in &keys {
        let mut mine: Vec<_> = calls.iter().filter(|c| &c.0 == k).collect();
        mine.sort_by_key(|c| c.2);
        for w in mine.windows(2) {
            assert!(
                w[1].2 >= w[0].3,
                "{k}: worker {} started before worker {} ended",
                w[1].1,
                w[0].1
            );
        }
        assert!(
            mine.last().unwrap().2 >= last_add[k],
            "{k}: its last add was never reconciled"
        );
    }
    let used: std::collections::BTreeSet<usize> = calls.iter().map(|c| c.1).collect();
    assert!(used.len() >= 2, "keys spread over the workers: {used:?}");
    assert!(
        most.load(Ordering::SeqCst) >= 2,
        "instances ran side by side"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_handler_component_cannot_run_as_a_controller() {
    let engine = engine();
    let plugin = load(
        &engine,
        "noop",
        plugin_artifacts::NOOP,
        serde_json::json!({}),
        &[],
        PluginLimits::default(),
    );
    let cache = Arc::new(FakeCache::default());
    let err = ReconcileWorker::start_all(engine, plugin, cache, PRIMARY, 1, None)
        .await
        .unwrap_err();
    assert!(matches!(err, WorkersError::NotAController(_)), "{err}");
    assert!(err.to_string().contains("event-handler@0.2."), "{err}");
}
