//! Soak of sharded mode: replicas against one `wasm-informer sim` for
//! `SOAK_SECS` seconds (default 120) under churn, with replicas killed
//! (`kill -9`), stopped (SIGTERM) and replaced in turn. It reports keys moved,
//! time to reassignment and duplicate handlings, and fails on a key owned by
//! two replicas, a settled ring with an unowned key, a duplicate handling, or a
//! lost final state.
//!
//! Ignored by default (it runs for minutes):
//! `SOAK_SECS=120 cargo test -p wasm-informer --test e2e cluster_soak:: -- --ignored --nocapture`

use crate::cluster_support;
use crate::host_support;

use std::time::{Duration, Instant};

use cluster_support::*;
use host_support::LONG;

fn stats(v: &[Duration]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    let mut s = v.to_vec();
    s.sort();
    format!(
        "n={} min={:.2}s median={:.2}s max={:.2}s",
        s.len(),
        s[0].as_secs_f64(),
        s[s.len() / 2].as_secs_f64(),
        s[s.len() - 1].as_secs_f64()
    )
}

#[test]
#[ignore]
fn soak_sharded_mode_under_churn_with_replicas_killed_and_replaced() {
    let secs: u64 = std::env::var("SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120);
    let t = FAST;
    let lease = Duration::from_millis(t.lease_ms);
    let retry = Duration::from_millis(t.retry_ms);
    let fx = cluster_fixture("sharded", t, 150);
    let sim = Sim::start(fx.path());
    let mut next_id = 0;
    let mut id = || {
        next_id += 1;
        format!("soak-{next_id}")
    };
    let mut live: Vec<Replica> = (0..3)
        .map(|_| Replica::start(fx.path(), &sim, &id()))
        .collect();
    let mut gone: Vec<Replica> = Vec::new();
    let stable: Vec<String> = sim.pods().keys().cloned().collect();
    let mut s = Sampling::default();
    wait_until("ready replicas", LONG, || live.iter().all(Replica::ready));
    s.until_settled(&live.iter().collect::<Vec<_>>(), &stable, LONG);

    let churn = Churn::start(sim.addr, stable.clone(), Duration::from_millis(20));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(secs);
    let (mut kills, mut terms, mut joins) = (Vec::new(), Vec::new(), Vec::new());
    let mut round = 0u64;
    while Instant::now() < deadline {
        // A few seconds of steady state, sampled.
        let until = Instant::now() + Duration::from_secs(4);
        while Instant::now() < until {
            s.sample(&live.iter().collect::<Vec<_>>(), &stable);
            std::thread::sleep(Duration::from_millis(50));
        }
        round += 1;
        let victim = (round as usize * 7) % live.len();
        let mut r = live.remove(victim);
        if round.is_multiple_of(3) {
            r.proc.terminate();
            let t0 = Instant::now();
            r.proc.wait_exit(LONG);
            terms.push(
                t0.elapsed() + s.until_settled(&live.iter().collect::<Vec<_>>(), &stable, LONG),
            );
        } else {
            r.proc.kill9();
            let took = s.until_settled(&live.iter().collect::<Vec<_>>(), &stable, LONG);
            assert!(
                took <= lease + 2 * retry,
                "reassignment after kill -9 took {took:?}"
            );
            kills.push(took);
        }
        gone.push(r);
        let fresh = Replica::start(fx.path(), &sim, &id());
        live.push(fresh);
        let n = live.len() - 1;
        wait_until("the replacement ready", LONG, || live[n].ready());
        joins.push(s.until_settled(&live.iter().collect::<Vec<_>>(), &stable, LONG));
    }
    let ops = churn.stop();
    let pods = sim.pods();
    wait_until("final states at the live replicas", LONG, || {
        let evs: Vec<Event> = live.iter().flat_map(|r| r.events()).collect();
        final_state_mismatches(&pods, &evs).is_empty()
    });
    s.until_settled(&live.iter().collect::<Vec<_>>(), &stable, LONG);

    for r in live.iter().chain(gone.iter()) {
        r.assert_no_dropped_lines();
    }
    let all: Vec<Event> = live
        .iter()
        .chain(gone.iter())
        .flat_map(|r| r.events())
        .collect();
    let dups = duplicate_handlings(&all);
    let gained: u64 = all.iter().filter(|e| e.initial).count() as u64;
    eprintln!(
        "soak: {:.0} s, {} replicas over the run, {ops} churn operations",
        started.elapsed().as_secs_f64(),
        live.len() + gone.len()
    );
    eprintln!(
        "  events handled by plugins: {} (replayed adds: {gained})",
        all.len()
    );
    eprintln!("  key moves (handling replica changed): {}", moves(&all));
    eprintln!("  reassignment after kill -9: {}", stats(&kills));
    eprintln!(
        "  hand-over after SIGTERM (signal to settled): {}",
        stats(&terms)
    );
    eprintln!("  ring settled after a replica joined: {}", stats(&joins));
    eprintln!(
        "  samples: {} ({} consistent, {} settled); keys owned twice: {}; settled cuts with unowned keys: {}",
        s.samples,
        s.consistent,
        s.settled,
        s.doubly.len(),
        s.uncovered.len()
    );
    eprintln!("  duplicate handlings: {}", dups.len());
    assert!(s.doubly.is_empty(), "{:?}", s.doubly);
    assert!(s.uncovered.is_empty(), "{:?}", s.uncovered);
    assert!(dups.is_empty(), "{dups:#?}");
}
