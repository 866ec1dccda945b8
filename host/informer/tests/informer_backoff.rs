//! Reflector backoff and Retry-After against apisim, under a paused Tokio
//! clock: waits are checked from the Reflector's record and against virtual
//! elapsed time, never against wall-clock speed.

use crate::informer_support;

use std::time::Duration;

use apisim::SimConfig;
use informer_support::*;
use kube_informer::reflector::{ReflectorConfig, StreamingList, WaitReason};
use tokio::time::Instant;

fn default_backoff(seed: u64) -> ReflectorConfig {
    ReflectorConfig {
        streaming_list: StreamingList::Off,
        seed: Some(seed),
        ..ReflectorConfig::default()
    }
}

async fn wait_for_waits(inf: &kube_informer::informer::SharedInformer, n: usize) {
    for _ in 0..100_000 {
        if inf.reflector_stats().recent_waits().len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("only {:?} waits", inf.reflector_stats().recent_waits());
}

/// Backoff 800 ms → 30 s, factor 2, jitter within one step, reset after 2 min
/// of health.
#[tokio::test(start_paused = true)]
async fn reflector_backoff_timings_under_paused_clock() {
    let (sim, _wl) = sim_with_pods(5, 9, SimConfig::default()).await;
    sim.faults().fail_next_500(7);
    let t0 = Instant::now();
    let inf = pods_informer(&sim, default_backoff(9)).await;
    assert!(inf.wait_synced(Duration::from_secs(3600)).await);
    let elapsed = t0.elapsed();
    let waits = inf.reflector_stats().recent_waits();
    assert_eq!(waits.len(), 7, "{waits:?}");
    let steps = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0];
    let mut total = Duration::ZERO;
    for ((reason, d), step) in waits.iter().zip(steps) {
        assert_eq!(*reason, WaitReason::Backoff);
        let s = d.as_secs_f64();
        assert!(
            s >= step - 1e-6 && s <= 2.0 * step + 1e-6,
            "wait {s} s not in [{step}, {}]",
            2.0 * step
        );
        total += *d;
    }
    assert!(
        elapsed >= total,
        "synced after {elapsed:?}, before the {total:?} of backoff"
    );
    assert_eq!(inf.stats().lists, 1);

    // Two minutes of health: the next failure starts again from 800 ms.
    tokio::time::sleep(Duration::from_secs(150)).await;
    sim.faults().fail_next_500(2);
    sim.faults().drop_watches();
    wait_for_waits(&inf, 9).await;
    let waits = inf.reflector_stats().recent_waits();
    let a = waits[7].1.as_secs_f64();
    let b = waits[8].1.as_secs_f64();
    assert!(
        (0.8..=1.6).contains(&a),
        "after 2 min healthy the backoff resets: {a}"
    );
    assert!((1.6..=3.2).contains(&b), "and grows again: {b}");
    assert_eq!(inf.stats().lists, 1, "errors on the watch never relist");
}

/// A 429 with Retry-After waits exactly that long, on a list and on a watch.
#[tokio::test(start_paused = true)]
async fn reflector_honours_retry_after() {
    let (sim, _wl) = sim_with_pods(5, 10, SimConfig::default()).await;
    sim.faults().fail_next_429(1, 7);
    let t0 = Instant::now();
    let inf = pods_informer(&sim, default_backoff(10)).await;
    assert!(inf.wait_synced(Duration::from_secs(3600)).await);
    assert!(t0.elapsed() >= Duration::from_secs(7));
    assert_eq!(
        inf.reflector_stats().recent_waits(),
        vec![(WaitReason::RetryAfter, Duration::from_secs(7))]
    );
    eventually("watching", 30, || sim.faults().open_watches() == 1).await;
    sim.faults().fail_next_429(1, 11);
    let t1 = Instant::now();
    sim.faults().drop_watches();
    // The dropped stream may itself count as an error (one backoff wait);
    // the 429 on the re-watch must then wait exactly its Retry-After.
    for _ in 0..100_000 {
        if inf.reflector_stats().recent_waits().len() >= 2
            && inf.reflector_stats().recent_waits().last().unwrap().0 == WaitReason::RetryAfter
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let waits = inf.reflector_stats().recent_waits();
    assert_eq!(
        waits.last(),
        Some(&(WaitReason::RetryAfter, Duration::from_secs(11))),
        "{waits:?}"
    );
    assert!(waits[1..waits.len() - 1]
        .iter()
        .all(|(r, _)| *r == WaitReason::Backoff));
    eventually("watching again", 30, || sim.faults().open_watches() == 1).await;
    assert!(t1.elapsed() >= Duration::from_secs(11));
    assert_eq!(inf.stats().lists, 1);
}
