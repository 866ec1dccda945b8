//! I5 + I8 convergence property test against apisim, with a fixed seed: random
//! churn, random API faults (dropped watches, 410s, 500s, 429s, truncated
//! lines, expired continue tokens) and a slow listener that overflows. At the
//! end the cache and every listener's reconstructed view equal the server's
//! state exactly. The longer soak is `cargo run --example informer_soak -- SEED`.

use crate::informer_support;

use std::time::Duration;

use informer_support::soak::{run, SoakConfig};

async fn converge(streaming: bool) {
    let report = run(SoakConfig {
        seed: 20261130,
        pods: 400,
        duration: Duration::from_secs(8),
        rate: 300.0,
        slow_capacity: 64,
        slow_delay: Duration::from_millis(2),
        streaming,
    })
    .await
    .unwrap_or_else(|e| panic!("I5/I8 violated: {e}"));
    eprintln!("{report:#?}");
    assert!(report.churn_ops > 0);
    assert!(
        report.faults.values().sum::<u64>() >= 10,
        "too few faults injected"
    );
    assert!(
        report.informer.relists_410 >= 1,
        "no 410 relist exercised: {:?}",
        report.informer
    );
    assert!(
        report.slow.overflowed > 0,
        "the slow listener never overflowed: {:?}",
        report.slow
    );
    assert!(report.slow.max_depth <= 64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i5_i8_converges_under_random_churn_faults_and_overflow_paged_lists() {
    converge(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i5_i8_converges_under_random_churn_faults_and_overflow_streaming_lists() {
    converge(true).await;
}
