//! A controller's queue handed from one version's workers to the next (a hot
//! reload): pending keys, requeue-after timers and failure counts carry over,
//! a reconcile that outlives the stop files its requeue into the same queue,
//! and the two versions never reconcile at once. Time is tokio's paused
//! clock; the oracle is each version's own journal of calls, compared with a
//! model of the timers and of the exponential backoff.

use std::sync::Arc;
use std::time::Duration;

use kube_informer::workqueue::{reconcile_fn, Outcome, RateLimiterConfig, WorkQueue, Workers};
use parking_lot::Mutex;
use tokio::time::Instant;

/// (version, key, start, end) of every reconcile.
type Journal = Arc<Mutex<Vec<(u8, String, Instant, Instant)>>>;

fn version(
    v: u8,
    journal: &Journal,
    work: Duration,
) -> impl kube_informer::workqueue::Reconcile<Arc<str>> {
    let journal = journal.clone();
    reconcile_fn(move |key: Arc<str>| {
        let journal = journal.clone();
        async move {
            let start = Instant::now();
            if &*key == "slow" && v == 1 {
                tokio::time::sleep(Duration::from_secs(5)).await;
            } else {
                tokio::time::sleep(work).await;
            }
            journal
                .lock()
                .push((v, key.to_string(), start, Instant::now()));
            match &*key {
                "every-10s" => Outcome::RequeueAfter(Duration::from_secs(10)),
                "failing" => Outcome::Retry("still failing".into()),
                "slow" if v == 1 => Outcome::RequeueAfter(Duration::from_secs(1)),
                _ => Outcome::Done,
            }
        }
    })
}

fn starts(journal: &Journal, v: u8, key: &str) -> Vec<Instant> {
    journal
        .lock()
        .iter()
        .filter(|(ver, k, ..)| *ver == v && k == key)
        .map(|(_, _, s, _)| *s)
        .collect()
}

/// No reconcile of version 1 ends after a reconcile of version 2 starts.
fn assert_never_both(journal: &Journal) {
    let j = journal.lock();
    let last_v1_end = j.iter().filter(|e| e.0 == 1).map(|e| e.3).max();
    let first_v2_start = j.iter().filter(|e| e.0 == 2).map(|e| e.2).min();
    if let (Some(end), Some(start)) = (last_v1_end, first_v2_start) {
        assert!(
            end <= start,
            "version 1 still reconciled after version 2 began"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_handed_over_queue_keeps_pending_keys_timers_and_failure_counts() {
    let q = WorkQueue::<Arc<str>>::new(RateLimiterConfig {
        qps: 0.0,
        ..RateLimiterConfig::default()
    });
    let journal: Journal = Arc::default();
    let v1 = Workers::spawn(q.clone(), vec![version(1, &journal, Duration::ZERO)]);
    q.add("every-10s".into());
    q.add("failing".into());
    q.add("once".into());
    // Run long enough for several failures (5, 10, 20, 40, 80 ms backoff).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t_handover = Instant::now();
    q.add_after("later".into(), Duration::from_secs(30));
    let fails_v1 = starts(&journal, 1, "failing");
    assert!(fails_v1.len() >= 5, "only {} failures", fails_v1.len());
    let first_every = starts(&journal, 1, "every-10s")[0];

    v1.keep_queue();
    assert!(v1.stop(Duration::from_secs(1)).await, "version 1 is idle");
    drop(v1);
    let v2 = Workers::spawn(q.clone(), vec![version(2, &journal, Duration::ZERO)]);
    tokio::time::sleep(Duration::from_secs(40)).await;

    // The requeue-after timer carried over: on time, not early, not lost.
    let every_v2 = starts(&journal, 2, "every-10s");
    assert!(!every_v2.is_empty(), "the requeue-after timer was lost");
    assert!(
        every_v2[0] >= first_every + Duration::from_secs(10),
        "requeued early"
    );
    assert!(every_v2[0] < first_every + Duration::from_secs(11));
    // The key waiting 30 s came when due.
    let later = starts(&journal, 2, "later");
    assert_eq!(later.len(), 1, "the delayed key was lost");
    assert!(later[0] >= t_handover + Duration::from_secs(30));
    // The backoff went on doubling from where version 1 left it: the first
    // gap of version 2 is twice the last gap of version 1, not the base.
    let last_gap_v1 = fails_v1[fails_v1.len() - 1] - fails_v1[fails_v1.len() - 2];
    let mut all: Vec<Instant> = fails_v1.clone();
    all.extend(starts(&journal, 2, "failing"));
    let i = fails_v1.len();
    let first_gap_v2 = all[i] - all[i - 1];
    assert!(
        first_gap_v2 >= last_gap_v1 * 2 - Duration::from_millis(2),
        "the failure count was reset: {first_gap_v2:?} after {last_gap_v1:?}"
    );
    // Nothing done by version 1 came back.
    assert!(starts(&journal, 2, "once").is_empty());
    assert_never_both(&journal);
    v2.stop(Duration::from_secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn a_reconcile_that_outlives_the_grace_is_waited_for_and_its_requeue_kept() {
    let q = WorkQueue::<Arc<str>>::new(RateLimiterConfig::default());
    let journal: Journal = Arc::default();
    let v1 = Workers::spawn(q.clone(), vec![version(1, &journal, Duration::ZERO)]);
    q.add("slow".into());
    tokio::time::sleep(Duration::from_millis(10)).await;
    v1.keep_queue();
    let stopping = Instant::now();
    assert!(
        !v1.stop(Duration::from_secs(1)).await,
        "the 5 s reconcile finished within a 1 s grace"
    );
    // The next version waits until the old one is idle.
    while !v1.stop(Duration::from_secs(1)).await {}
    assert!(Instant::now() >= stopping + Duration::from_secs(4));
    let v2 = Workers::spawn(q.clone(), vec![version(2, &journal, Duration::ZERO)]);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let v1_end = journal.lock()[0].3;
    let again = starts(&journal, 2, "slow");
    assert_eq!(again.len(), 1, "the requeue filed after the stop was lost");
    assert!(
        again[0] >= v1_end + Duration::from_secs(1),
        "requeued early"
    );
    assert_never_both(&journal);
    v2.stop(Duration::from_secs(1)).await;
}

#[tokio::test(start_paused = true)]
async fn workers_that_do_not_hand_over_shut_their_queue_down() {
    let q = WorkQueue::<Arc<str>>::new(RateLimiterConfig::default());
    let journal: Journal = Arc::default();
    let v1 = Workers::spawn(q.clone(), vec![version(1, &journal, Duration::ZERO)]);
    assert!(v1.stop(Duration::from_secs(1)).await);
    assert!(
        q.is_shut_down(),
        "a controller removed for good frees its queue"
    );
}
