//! Resync never delays a real change: a handler slower than its own resync
//! period (1.5 ms per event, 4,000 objects, a resync every 4 s, so one resync
//! alone is 6 s of work) still converges to the server's state soon after
//! churn stops, within the documented bound of about (pending keys) / (its
//! event rate), and its lag behind the resync period is reported.
//!
//! The oracle is the simulator's store; the bound is computed from what the
//! test wrote (the keys it changed) and from the handler's own measured time
//! per event, never from the listener's counters.

use crate::informer_support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use apisim::workload::Op;
use apisim::SimConfig;
use informer_support::*;
use kube_informer::handler::{Delivery, Handler};
use kube_informer::notification::{EventKind, NotificationRef};
use kube_informer::reflector::StreamingList;
use kube_informer::HandlerOptions;
use parking_lot::Mutex;

/// A handler on its own thread (as a plugin runner is) that spends
/// `per_event` on each notification and keeps the view it reconstructs.
struct SlowView {
    per_event: Duration,
    view: Arc<Mutex<BTreeMap<String, u64>>>,
    handled: Arc<AtomicU64>,
    busy_ns: Arc<AtomicU64>,
}

impl Handler for SlowView {
    async fn handle(&mut self, n: NotificationRef) -> Delivery {
        let t = Instant::now();
        std::thread::sleep(self.per_event);
        {
            let mut v = self.view.lock();
            match n.kind {
                EventKind::Deleted => {
                    v.remove(&*n.key);
                }
                _ => {
                    let rv = n.object.meta.resource_version.parse().unwrap_or(0);
                    v.insert(n.key.to_string(), rv);
                }
            }
        }
        self.busy_ns
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.handled.fetch_add(1, Ordering::Relaxed);
        Delivery::Ok
    }

    fn max_batch(&self) -> usize {
        32
    }

    fn own_thread(&self) -> Option<String> {
        Some("slow-view".into())
    }
}

/// Keys whose state differs between `a` and `b`.
fn differing(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> usize {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter().filter(|k| a.get(*k) != b.get(*k)).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resync_slower_than_its_period_never_starves_real_changes() {
    const OBJECTS: usize = 4000;
    const CAPACITY: usize = 1024;
    const CHURN_RATE: f64 = 100.0;
    const CHURN: Duration = Duration::from_secs(8);
    let per_event = Duration::from_micros(1500);

    let (sim, mut wl) = sim_with_pods(OBJECTS, 31, SimConfig::default()).await;
    let rc = kube_informer::reflector::ReflectorConfig {
        streaming_list: StreamingList::Off,
        ..fast_reflector(31)
    };
    let inf = pods_informer(&sim, rc).await;
    assert!(inf.wait_synced(Duration::from_secs(120)).await);
    let view = Arc::new(Mutex::new(BTreeMap::new()));
    let handled = Arc::new(AtomicU64::new(0));
    let busy_ns = Arc::new(AtomicU64::new(0));
    let reg = inf
        .add_handler(
            SlowView {
                per_event,
                view: view.clone(),
                handled: handled.clone(),
                busy_ns: busy_ns.clone(),
            },
            HandlerOptions::named("slow")
                .queue_capacity(CAPACITY)
                .resync(Duration::from_secs(4)),
        )
        .unwrap();
    // The replay alone (4,000 x 1.5 ms) outlasts the resync period.
    eventually("the replay is handled", 120, || reg.has_synced()).await;

    // Churn, remembering every key written and sampling how stale the view is.
    let mut changed: BTreeSet<String> = BTreeSet::new();
    let mut max_stale = 0usize;
    let start = Instant::now();
    let mut done = 0u64;
    let mut next_sample = start;
    while start.elapsed() < CHURN {
        let due = (start.elapsed().as_secs_f64() * CHURN_RATE) as u64;
        while done < due {
            let key = match wl.step().unwrap() {
                Op::Create(k) | Op::UpdateStatus(k) | Op::Delete(k) => k,
                other => panic!("unexpected op {other:?}"),
            };
            changed.insert(key);
            done += 1;
        }
        if Instant::now() >= next_sample {
            max_stale = max_stale.max(differing(&view.lock(), &server_pods(&sim)));
            next_sample += Duration::from_millis(500);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stopped = Instant::now();
    let want = server_pods(&sim);
    let stale_at_stop = differing(&view.lock(), &want);

    // The bound: everything that can be pending at the stop (a full queue plus
    // one entry per changed key) at the handler's own measured rate, with
    // room for the batch in hand and the polling.
    let per_event_measured = Duration::from_nanos(
        busy_ns.load(Ordering::Relaxed) / handled.load(Ordering::Relaxed).max(1),
    );
    let pending_bound = (CAPACITY + changed.len()) as u32;
    let bound = per_event_measured * pending_bound * 3 / 2 + Duration::from_secs(1);
    let limit = std::env::var("RESYNC_MEASURE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map(Duration::from_secs)
        .unwrap_or(bound);
    let mut converged_after = None;
    let mut trace = Vec::new();
    let mut next_trace = stopped;
    while stopped.elapsed() < limit {
        let d = differing(&view.lock(), &want);
        if d == 0 {
            converged_after = Some(stopped.elapsed());
            break;
        }
        if Instant::now() >= next_trace {
            trace.push((stopped.elapsed().as_secs(), d));
            next_trace += Duration::from_secs(2);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let s = reg.stats().snapshot();
    eprintln!(
        "resync: {OBJECTS} objects, {done} writes over {} keys in {CHURN:?}; handler {per_event_measured:?} per event; \
         view stale by at most {max_stale} keys during churn, {stale_at_stop} at the stop; \
         converged after {converged_after:?} (bound {bound:?}); stale keys over time {trace:?}; \
         synced events {}, listener stats {s:?}",
        changed.len(),
        s.synced,
    );
    let took = converged_after.unwrap_or_else(|| {
        panic!(
            "the view still differs from the server by {} keys {:?} after churn stopped (bound {bound:?})",
            differing(&view.lock(), &want),
            stopped.elapsed()
        )
    });
    assert!(took <= bound, "converged after {took:?}, bound {bound:?}");
    // It cannot keep up with its period (4,000 x 1.5 ms > 4 s), and says so.
    assert!(
        reg.stats().snapshot().resync_overruns > 0,
        "the lag behind the resync period is reported: {s:?}"
    );
}
