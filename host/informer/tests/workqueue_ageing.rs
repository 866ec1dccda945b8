//! The work queue's ageing: live churn above the workers' capacity does not
//! starve the keys of an initial list. One worker, 10 ms per reconcile, live
//! changes on three keys at twice its capacity, 300 initial-list keys. On
//! tokio's paused clock, so every bound is exact. Oracle: the reconciler's
//! own record of which key it reconciled when (what the queue handed out),
//! against the schedule of adds the test made.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kube_informer::workqueue::{
    reconcile_fn, Outcome, Priority, RateLimiterConfig, WorkQueue, Workers,
};
use parking_lot::Mutex;
use tokio::time::Instant;

const INITIAL: usize = 300;
const WORK: Duration = Duration::from_millis(10);
/// One live change every 5 ms: twice what one 10 ms worker can do.
const CHURN_EVERY: Duration = Duration::from_millis(5);
const CHURN_KEYS: usize = 3;
const CHURN_FOR: Duration = Duration::from_secs(20);

/// Reconciles of each key, as instants.
type Journal = Arc<Mutex<HashMap<String, Vec<Instant>>>>;

/// Runs the starvation case with the queue's ageing bound `bound`; returns
/// the journal, the start, and the latency of a fresh change made `fresh_at`
/// after the start (`None`: not reconciled while the churn lasted).
async fn starvation(
    bound: Option<Duration>,
    fresh_at: Duration,
) -> (Journal, Instant, Option<Duration>) {
    let q = WorkQueue::<Arc<str>>::new(RateLimiterConfig::default());
    q.set_max_low_priority_wait(bound);
    let journal: Journal = Arc::default();
    let j = journal.clone();
    let workers = Workers::spawn(
        q.clone(),
        vec![reconcile_fn(move |key: Arc<str>| {
            let j = j.clone();
            async move {
                tokio::time::sleep(WORK).await;
                j.lock()
                    .entry(key.to_string())
                    .or_default()
                    .push(Instant::now());
                Outcome::Done
            }
        })],
    );
    let start = Instant::now();
    for i in 0..INITIAL {
        q.add_with_priority(Arc::from(format!("initial-{i}")), Priority::LOW);
    }
    let mut n = 0usize;
    let mut fresh_added = None;
    while start.elapsed() < CHURN_FOR {
        q.add(Arc::from(format!("churn-{}", n % CHURN_KEYS)));
        n += 1;
        if fresh_added.is_none() && start.elapsed() >= fresh_at {
            q.add(Arc::from("fresh"));
            fresh_added = Some(Instant::now());
        }
        tokio::time::sleep(CHURN_EVERY).await;
    }
    let fresh = fresh_added.and_then(|at| {
        journal
            .lock()
            .get("fresh")
            .and_then(|v| v.first().copied())
            .map(|done| done - at)
    });
    q.shut_down();
    drop(workers);
    (journal, start, fresh)
}

/// When the last initial-list key was first reconciled, after the start.
fn last_initial(journal: &Journal, start: Instant) -> Option<Duration> {
    let j = journal.lock();
    (0..INITIAL)
        .map(|i| {
            j.get(&format!("initial-{i}"))
                .and_then(|v| v.first())
                .map(|t| *t - start)
        })
        .collect::<Option<Vec<_>>>()
        .map(|v| v.into_iter().max().unwrap())
}

#[tokio::test(start_paused = true)]
async fn an_initial_list_key_waits_at_most_the_bound_while_live_churn_goes_on() {
    let bound = Duration::from_secs(5);
    // The fresh change arrives while the overdue initial-list keys are
    // being handed out: the hardest moment for it.
    let (journal, start, fresh) = starvation(Some(bound), Duration::from_secs(7)).await;
    let last = last_initial(&journal, start).expect("every initial-list key reconciled");
    // Overdue from the bound on, the initial-list keys take every other
    // turn: the last one waits the bound plus two turns per key ahead of it.
    let limit = bound + WORK * 2 * INITIAL as u32 + WORK * 2;
    eprintln!(
        "last initial-list key reconciled after {last:?} (limit {limit:?}), \
         a fresh change after {fresh:?}"
    );
    assert!(
        last <= limit,
        "the last initial-list key took {last:?}, more than {limit:?}"
    );
    assert!(last < CHURN_FOR, "reconciled while the churn went on");
    let fresh = fresh.expect("the fresh change was reconciled");
    assert!(
        fresh < Duration::from_millis(100),
        "a fresh change took {fresh:?} behind the overdue keys"
    );
    // Live keys kept every turn until the bound: no initial-list key ran
    // before it (the churn alone fills the worker).
    let first = {
        let j = journal.lock();
        (0..INITIAL)
            .filter_map(|i| {
                j.get(&format!("initial-{i}"))
                    .and_then(|v| v.first())
                    .copied()
            })
            .min()
            .unwrap()
    };
    assert!(
        first - start >= bound,
        "an initial-list key ran after {:?}, before the bound",
        first - start
    );
    // The churn went on meanwhile: the live keys were reconciled throughout.
    let churned = journal.lock().get("churn-0").map_or(0, Vec::len);
    assert!(churned > 100, "churn-0 reconciled only {churned} times");
}

#[tokio::test(start_paused = true)]
async fn without_ageing_live_churn_starves_the_initial_list() {
    // The case the ageing exists for (controller-runtime#3496): with no
    // bound, not one initial-list key runs while the churn lasts.
    let (journal, start, fresh) = starvation(None, Duration::from_secs(7)).await;
    assert_eq!(last_initial(&journal, start), None);
    let ran = {
        let j = journal.lock();
        (0..INITIAL)
            .filter(|i| j.contains_key(&format!("initial-{i}")))
            .count()
    };
    assert_eq!(ran, 0, "{ran} initial-list keys ran behind the churn");
    assert!(fresh.is_some_and(|f| f < Duration::from_millis(100)));
}

#[tokio::test(start_paused = true)]
async fn the_oldest_waiting_low_priority_key_is_in_the_metrics() {
    let q = WorkQueue::<Arc<str>>::new(RateLimiterConfig::default());
    q.add_with_priority(Arc::from("initial"), Priority::LOW);
    tokio::time::sleep(Duration::from_secs(3)).await;
    q.add(Arc::from("live"));
    let m = q.metrics();
    assert_eq!(m.oldest_low_priority_seconds, 3.0);
    assert_eq!(q.try_get().unwrap().key.as_ref(), "live");
    tokio::time::sleep(Duration::from_secs(2)).await;
    q.add(Arc::from("live-2"));
    // Overdue now: handed out ahead of the live key, and counted.
    assert_eq!(q.try_get().unwrap().key.as_ref(), "initial");
    let m = q.metrics();
    assert_eq!(m.aged, 1);
    assert_eq!(m.oldest_low_priority_seconds, 0.0);
}
