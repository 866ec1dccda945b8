//! I7 fault containment: every fault plugin runs beside a healthy plugin in one
//! host process. The host stays up, the healthy plugin handles every one of its
//! events, the faulty one is re-instantiated with backoff and then
//! quarantined, and the trap kind is the right one.

use crate::runtime_support;

use std::sync::Arc;
use std::time::Duration;

use kube_informer::handler::{Delivery, Handler};
use kube_informer::notification::EventKind;
use runtime_support::*;
use serde_json::json;
use wasm_informer_runtime::{PluginLimits, PluginState, TrapKind};

const HEALTHY_EVENTS: usize = 40;

/// The healthy neighbour of the fault tests: pod-ready-counter with read
/// access to pods and default limits.
async fn healthy_counter(
    engine: &Arc<wasm_informer_runtime::PluginEngine>,
    cache: Arc<FakeCache>,
) -> wasm_informer_runtime::PluginRunner {
    start(
        engine,
        cache,
        "pod-ready-counter",
        plugin_artifacts::POD_READY_COUNTER,
        json!({}),
        &["v1/pods"],
        PluginLimits::default(),
    )
    .await
}

/// Runs `faulty` for `max_failures` events next to pod-ready-counter handling
/// HEALTHY_EVENTS events, concurrently, and checks both.
async fn contain(
    name: &str,
    wasm: &str,
    config: serde_json::Value,
    limits: PluginLimits,
    kind: TrapKind,
) {
    let engine = engine();
    let (cache, pods) = cache_with_pods("default", 8);
    let healthy = healthy_counter(&engine, cache.clone()).await;
    let max = limits.max_failures as u64;
    let faulty = start(&engine, cache.clone(), name, wasm, config, &[], limits).await;

    // The faulty plugin: every event traps, until quarantine.
    let run = beside_healthy(
        healthy,
        faulty,
        &pods,
        HEALTHY_EVENTS,
        max as usize,
        Duration::from_secs(120),
    )
    .await;

    let results = &run.healthy;
    assert!(
        results.iter().all(|d| *d == Delivery::Ok),
        "healthy plugin results: {results:?}"
    );
    assert_eq!(run.healthy_snap.delivered.added, HEALTHY_EVENTS as u64);
    assert_eq!(run.healthy_snap.traps, 0);
    assert_eq!(run.healthy_snap.state, PluginState::Running);

    assert_quarantined(name, &run.faulty, &run.faulty_snap, max, kind);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_forever_runs_out_of_fuel_and_is_quarantined() {
    let limits = PluginLimits {
        fuel_per_event: 2_000_000,
        ..fast_limits()
    };
    contain(
        "spin-fuel",
        plugin_artifacts::SPIN_FOREVER,
        json!({}),
        limits,
        TrapKind::OutOfFuel,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spin_forever_hits_the_deadline_when_fuel_is_plentiful() {
    let limits = PluginLimits {
        fuel_per_event: u64::MAX / 4,
        timeout_ms: 50,
        ..fast_limits()
    };
    contain(
        "spin-deadline",
        plugin_artifacts::SPIN_FOREVER,
        json!({}),
        limits,
        TrapKind::Deadline,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_bomb_hits_the_memory_cap() {
    let limits = PluginLimits {
        memory_mb: 16,
        ..fast_limits()
    };
    contain(
        "memory-bomb",
        plugin_artifacts::MEMORY_BOMB,
        json!({}),
        limits,
        TrapKind::MemoryLimit,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stack_overflow_is_reported_as_such() {
    contain(
        "stack-overflow",
        plugin_artifacts::STACK_OVERFLOW,
        json!({}),
        fast_limits(),
        TrapKind::StackOverflow,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panic_on_every_event_is_quarantined() {
    contain(
        "panic-1",
        plugin_artifacts::PANIC_EVERY_N,
        json!({"n": 1}),
        fast_limits(),
        TrapKind::Panic,
    )
    .await;
}

/// panic-every-n with n = 3 and fast limits, and four pods to send it.
async fn panics_every_third_event() -> (
    wasm_informer_runtime::PluginRunner,
    Vec<kube_informer::object::ObjectRef>,
) {
    let engine = engine();
    let (cache, pods) = cache_with_pods("default", 4);
    let r = start(
        &engine,
        cache,
        "panic-3",
        plugin_artifacts::PANIC_EVERY_N,
        json!({"n": 3}),
        &[],
        fast_limits(),
    )
    .await;
    (r, pods)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn occasional_panics_restart_without_quarantine() {
    let (mut r, pods) = panics_every_third_event().await;
    let mut got = Vec::new();
    for i in 0..9 {
        got.push(r.handle(added(&pods[i % pods.len()])).await);
    }
    // Each instance handles two events and panics on its third.
    assert_eq!(got, every_nth_restarted(3, 9));
    // The ninth event trapped: the runner waits out a backoff, not a quarantine.
    assert_eq!(r.status().state(), PluginState::BackingOff);
    assert_eq!(r.handle(added(&pods[0])).await, Delivery::Ok);
    let snap = r.status().snapshot();
    assert_eq!(snap.state, PluginState::Running);
    assert_eq!(snap.traps_by_kind["panic"], 3);
    assert_eq!(snap.restarts, 3);
    assert_eq!(snap.quarantines, 0);
    assert_eq!(snap.consecutive_failures, 0);
    assert_eq!(snap.delivered.added, 7);
}

/// A batch stops at the event that trapped: the events after it are not
/// delivered to the dead instance (the listener's replay supersedes them), and
/// the next batch goes to a fresh instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trap_ends_the_batch_and_the_next_batch_gets_a_fresh_instance() {
    let (mut r, pods) = panics_every_third_event().await;
    assert!(r.max_batch() > 1, "the runner takes batches");
    let batch = |k: usize| (0..k).map(|i| added(&pods[i % pods.len()])).collect();
    let first = r.handle_batch(batch(10)).await;
    let got: Vec<Delivery> = first.iter().map(|h| h.delivery.clone()).collect();
    assert_eq!(
        got,
        vec![Delivery::Ok, Delivery::Ok, Delivery::Restarted],
        "the batch ends at the trap"
    );
    assert!(first.windows(2).all(|w| w[0].at <= w[1].at));
    assert_eq!(r.status().state(), PluginState::BackingOff);
    let second = r.handle_batch(batch(2)).await;
    assert!(
        second.iter().all(|h| h.delivery == Delivery::Ok),
        "a fresh instance handles the next batch"
    );
    let snap = r.status().snapshot();
    assert_eq!(snap.delivered.added, 4);
    assert_eq!(snap.traps_by_kind["panic"], 1);
    assert_eq!(snap.restarts, 1);
}

/// CPU time (user + system) the calling thread has used, from
/// `/proc/thread-self/stat`, in clock ticks.
fn thread_cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    // Fields after the command name (which is in parentheses): state is
    // field 3, utime 14 and stime 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux).
fn ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// I7: a quarantined plugin uses no CPU while it rests. The runner is driven
/// from a thread of its own (as its listener drives it), whose CPU time is
/// measured over the quarantine: it waits the whole period, then retries
/// once (a fresh instance, which panics again and is quarantined again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quarantine_ends_with_a_retry_that_uses_no_cpu_meanwhile() {
    let engine = engine();
    let (cache, pods) = cache_with_pods("default", 2);
    let mut r = start(
        &engine,
        cache,
        "panic",
        plugin_artifacts::PANIC_EVERY_N,
        json!({"n": 1}),
        &[],
        fast_limits(),
    )
    .await;
    for _ in 0..3 {
        assert_eq!(r.handle(added(&pods[0])).await, Delivery::Restarted);
    }
    let status = r.status().clone();
    assert_eq!(status.state(), PluginState::Quarantined);
    let restarts_before = status.snapshot().restarts;
    let event = added(&pods[1]);
    // The baseline, in the same window: what a thread that spins gets of
    // this (possibly busy) machine.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spinner = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let ticks0 = thread_cpu_ticks();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::hint::spin_loop();
            }
            thread_cpu_ticks() - ticks0
        })
    };
    let measured = std::thread::spawn(move || {
        let ticks0 = thread_cpu_ticks();
        let t0 = std::time::Instant::now();
        let d = futures::executor::block_on(r.handle(event));
        (d, t0.elapsed(), thread_cpu_ticks() - ticks0, r)
    });
    let (d, wall, ticks, _r) = tokio::task::spawn_blocking(move || measured.join().unwrap())
        .await
        .unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let spun = spinner.join().unwrap();
    let tps = ticks_per_second();
    eprintln!(
        "quarantine: the call waited {wall:?} and used {:.3} s of CPU on its thread; a spinning thread got {:.3} s meanwhile",
        ticks as f64 / tps,
        spun as f64 / tps
    );
    assert_eq!(d, Delivery::Restarted);
    assert!(
        wall >= Duration::from_millis(900),
        "the retry waited out the 1 s quarantine: {wall:?}"
    );
    assert!(spun >= 5, "the baseline spinner ran: {spun} ticks");
    // One instantiation and one call after the wait: a tick or two at most,
    // a tenth of what a busy thread got.
    assert!(
        ticks <= (spun / 10).max(2),
        "{ticks} ticks of CPU over {wall:?} of quarantine, against {spun} for a spinning thread"
    );
    // One retry after the quarantine, no more: back in quarantine.
    let snap = status.snapshot();
    assert_eq!(snap.restarts, restarts_before + 1);
    assert_eq!(snap.quarantines, 2);
    assert_eq!(snap.state, PluginState::Quarantined);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_flood_is_rate_limited_and_harms_no_one() {
    // A limit of 100 lines with (practically) no refill makes the count exact
    // however slow the machine is.
    let engine = wasm_informer_runtime::PluginEngine::new(wasm_informer_runtime::EngineConfig {
        log: wasm_informer_runtime::LogLimits {
            lines_per_second: 1e-6,
            burst: 100.0,
        },
        ..Default::default()
    })
    .unwrap();
    let (cache, pods) = cache_with_pods("default", 4);
    let mut f = start(
        &engine,
        cache.clone(),
        "log-flood",
        plugin_artifacts::LOG_FLOOD,
        json!({"lines": 1000}),
        &[],
        PluginLimits::default(),
    )
    .await;
    let mut h = healthy_counter(&engine, cache.clone()).await;
    let hp = pods.clone();
    let healthy_task = tokio::spawn(async move {
        let mut ok = 0;
        for i in 0..HEALTHY_EVENTS {
            if h.handle(added(&hp[i % hp.len()])).await == Delivery::Ok {
                ok += 1;
            }
        }
        ok
    });
    for p in pods.iter().take(3) {
        assert_eq!(f.handle(added(p)).await, Delivery::Ok);
    }
    assert_eq!(healthy_task.await.unwrap(), HEALTHY_EVENTS);
    let snap = f.status().snapshot();
    // 3 events x 1000 lines x 3 streams were written; 100 got through.
    assert_eq!(snap.log_lines, 100, "{snap:?}");
    assert_eq!(snap.log_dropped, 8900, "{snap:?}");
    assert_eq!(snap.traps, 0);
    assert_eq!(snap.delivered.added, 3);
}

/// Counts 10 ms timer ticks on the current-thread runtime while `fut` runs.
async fn ticks_during<F: std::future::Future>(fut: F) -> (F::Output, u32) {
    let ticks = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let t = ticks.clone();
    let ticker = tokio::spawn(async move {
        let mut iv = tokio::time::interval(Duration::from_millis(10));
        loop {
            iv.tick().await;
            t.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });
    let out = fut.await;
    ticker.abort();
    (out, ticks.load(std::sync::atomic::Ordering::Relaxed))
}

#[tokio::test(flavor = "current_thread")]
async fn a_sleeping_plugin_does_not_block_the_async_runtime() {
    let engine = engine();
    let (cache, pods) = cache_with_pods("default", 1);
    let mut s = start(
        &engine,
        cache,
        "slow",
        plugin_artifacts::SLOW,
        json!({"ms": 400}),
        &[],
        PluginLimits::default(),
    )
    .await;
    // On a single-threaded runtime, a plugin sleeping on that thread would
    // freeze the ticker for the whole 400 ms.
    let (d, ticks) = ticks_during(s.handle(added(&pods[0]))).await;
    assert_eq!(d, Delivery::Ok);
    assert!(
        ticks >= 10,
        "only {ticks} ticks of 10 ms during a 400 ms sleep"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_spinning_plugin_does_not_block_the_async_runtime() {
    let engine = engine();
    let (cache, pods) = cache_with_pods("default", 1);
    let limits = PluginLimits {
        fuel_per_event: u64::MAX / 4,
        timeout_ms: 400,
        ..fast_limits()
    };
    let mut s = start(
        &engine,
        cache,
        "spin",
        plugin_artifacts::SPIN_FOREVER,
        json!({}),
        &[],
        limits,
    )
    .await;
    let (d, ticks) = ticks_during(s.handle(added(&pods[0]))).await;
    assert_eq!(d, Delivery::Restarted);
    assert_eq!(s.status().traps(TrapKind::Deadline), 1);
    assert!(
        ticks >= 10,
        "only {ticks} ticks of 10 ms during a 400 ms spin"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sleeping_past_the_deadline_is_a_deadline_trap() {
    let engine = engine();
    let (cache, pods) = cache_with_pods("default", 1);
    let limits = PluginLimits {
        timeout_ms: 50,
        ..fast_limits()
    };
    let mut s = start(
        &engine,
        cache,
        "slow",
        plugin_artifacts::SLOW,
        json!({"ms": 300}),
        &[],
        limits,
    )
    .await;
    assert_eq!(s.handle(added(&pods[0])).await, Delivery::Restarted);
    assert_eq!(s.status().traps(TrapKind::Deadline), 1);
    assert_eq!(s.status().state(), PluginState::BackingOff);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_errors_are_counted_and_do_not_restart() {
    let engine = engine();
    let (cache, pods) = cache_with_pods("default", 2);
    // pod-ready-counter without `read` permission: every event fails with a
    // forbidden cache read, which is a handler error, not a trap.
    let mut r = start(
        &engine,
        cache,
        "counter",
        plugin_artifacts::POD_READY_COUNTER,
        json!({}),
        &[],
        fast_limits(),
    )
    .await;
    for _ in 0..5 {
        match r.handle(added(&pods[0])).await {
            Delivery::HandlerError(m) => assert!(m.contains("forbidden"), "{m}"),
            other => panic!("expected a handler error, got {other:?}"),
        }
    }
    let snap = r.status().snapshot();
    assert_eq!(snap.errors, 5);
    assert_eq!(snap.traps, 0);
    assert_eq!(snap.restarts, 0);
    assert_eq!(snap.state, PluginState::Running);
    assert_eq!(r.status().delivered(EventKind::Added), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_errors_and_bad_limits_refuse_to_start() {
    let engine = engine();
    let (cache, _) = cache_with_pods("default", 1);
    let plugin = load(
        &engine,
        "panic",
        plugin_artifacts::PANIC_EVERY_N,
        json!({"n": 0}),
        &[],
        fast_limits(),
    );
    let e = wasm_informer_runtime::PluginRunner::start(engine.clone(), plugin, cache)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("n must be at least 1"), "{e}");

    let spec = wasm_informer_runtime::PluginSpec {
        limits: PluginLimits {
            memory_mb: 0,
            ..PluginLimits::default()
        },
        ..wasm_informer_runtime::PluginSpec::new("zero-mem")
    };
    let e = wasm_informer_runtime::LoadedPlugin::from_file(
        &engine,
        spec,
        std::path::Path::new(plugin_artifacts::NOOP),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("zero-mem") && e.to_string().contains("memory_mb"),
        "{e}"
    );
}
