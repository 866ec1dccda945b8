//! I7 fault containment for JavaScript and Python plugins in the production
//! plugin runtime (`wasm_informer_runtime`). The fault guests of
//! plugins/testing/ (built by scripts/build-plugins.sh) loop forever, throw, or
//! crash, each beside a healthy JavaScript plugin handling its own events
//! concurrently. The host stays up; the healthy plugin handles every event;
//! a throw is a handler error (the instance lives on); a loop or crash is a
//! trap of the right kind, re-instantiated with backoff and then quarantined.

use crate::log_capture;
use crate::runtime_support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kube_informer::handler::Delivery;
use runtime_support::*;
use serde_json::json;
use wasm_informer_runtime::{
    EngineConfig, LoadedPlugin, PluginEngine, PluginLimits, PluginSpec, PluginState, TrapKind,
};

const HEALTHY_EVENTS: usize = 30;

fn plugin_path(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../target/plugins/{name}.wasm"));
    assert!(
        p.exists(),
        "{} is missing: build the plugins first with scripts/setup.sh && scripts/build-plugins.sh",
        p.display()
    );
    p
}

/// An engine with the on-disk compilation cache: JS and Python components take
/// 10-20 s to compile, about 0.1 s to load from the cache.
fn cached_engine() -> Arc<PluginEngine> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/wasmtime-cache-tests");
    std::fs::create_dir_all(&dir).unwrap();
    PluginEngine::new(EngineConfig {
        cache_dir: Some(dir),
        ..EngineConfig::default()
    })
    .unwrap()
}

fn load_guest(
    engine: &PluginEngine,
    name: &str,
    wasm: &str,
    config: serde_json::Value,
    limits: PluginLimits,
) -> Arc<LoadedPlugin> {
    let spec = PluginSpec {
        name: name.to_string(),
        config_json: config.to_string(),
        read: vec!["v1/pods".to_string()],
        limits,
        kube: Default::default(),
    };
    LoadedPlugin::from_file(engine, spec, &plugin_path(wasm))
        .unwrap_or_else(|e| panic!("load {wasm}: {e}"))
}

/// JS and Python calls are heavy: limits for fault tests that leave a healthy
/// call plenty of room, with quick restarts and a 3-failure quarantine.
fn guest_limits() -> PluginLimits {
    PluginLimits {
        fuel_per_event: 500_000_000,
        timeout_ms: 10_000,
        memory_mb: 128,
        ..fast_limits()
    }
}

/// Runs `faulty` over `events` events beside a healthy JS plugin and returns the
/// faulty plugin's deliveries. Checks that the healthy plugin handled all of its
/// events.
async fn beside_healthy_js(
    engine: &Arc<PluginEngine>,
    faulty: Arc<LoadedPlugin>,
    events: usize,
) -> (Vec<Delivery>, wasm_informer_runtime::StatusSnapshot) {
    log_capture::plugin_log();
    let (cache, pods) = cache_with_pods("default", 8);
    // Named after the test: tests run concurrently, and its lines are told
    // apart by name.
    let healthy_name = format!(
        "healthy-in-{}",
        std::thread::current().name().unwrap_or("test")
    );
    let healthy_plugin = load_guest(
        engine,
        &healthy_name,
        "js-faulty",
        json!({"mode": "ok"}),
        guest_limits(),
    );
    let healthy = runner(engine, healthy_plugin, cache.clone()).await;
    let faulty = runner(engine, faulty, cache.clone()).await;

    let run = beside_healthy(
        healthy,
        faulty,
        &pods,
        HEALTHY_EVENTS,
        events,
        Duration::from_secs(300),
    )
    .await;

    let (results, snap) = (&run.healthy, &run.healthy_snap);
    assert!(
        results.iter().all(|d| *d == Delivery::Ok),
        "healthy: {results:?}"
    );
    assert_eq!(snap.delivered.added, HEALTHY_EVENTS as u64);
    assert_eq!(snap.traps, 0);
    assert_eq!(snap.errors, 0);
    assert_eq!(snap.state, PluginState::Running);
    // What it said it handled is exactly what it was sent, in order.
    let handled: Vec<String> = log_capture::lines_of(&healthy_name)
        .into_iter()
        .filter(|l| l.starts_with("handled "))
        .collect();
    let sent: Vec<String> = (0..HEALTHY_EVENTS)
        .map(|i| format!("handled key={} n={}", pods[i % pods.len()].key(), i + 1))
        .collect();
    assert_eq!(handled, sent, "the healthy plugin's own account");
    (run.faulty, run.faulty_snap)
}

/// Every event traps until quarantine: checks the trap kind and the counters.
async fn quarantined(wasm: &str, config: serde_json::Value, limits: PluginLimits, kind: TrapKind) {
    let engine = cached_engine();
    let max = limits.max_failures as usize;
    let faulty = load_guest(&engine, wasm, wasm, config, limits);
    let (deliveries, snap) = beside_healthy_js(&engine, faulty, max).await;
    assert_quarantined(wasm, &deliveries, &snap, max as u64, kind);
    assert_eq!(snap.errors, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_infinite_loop_runs_out_of_fuel_and_is_quarantined() {
    let limits = PluginLimits {
        fuel_per_event: 50_000_000,
        ..guest_limits()
    };
    quarantined(
        "js-faulty",
        json!({"mode": "spin"}),
        limits,
        TrapKind::OutOfFuel,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_infinite_loop_hits_the_deadline_when_fuel_is_plentiful() {
    let limits = PluginLimits {
        fuel_per_event: u64::MAX / 4,
        timeout_ms: 200,
        ..guest_limits()
    };
    quarantined(
        "js-faulty",
        json!({"mode": "spin"}),
        limits,
        TrapKind::Deadline,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_infinite_loop_runs_out_of_fuel_and_is_quarantined() {
    let limits = PluginLimits {
        fuel_per_event: 50_000_000,
        ..guest_limits()
    };
    quarantined(
        "py-faulty",
        json!({"mode": "spin"}),
        limits,
        TrapKind::OutOfFuel,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_infinite_loop_hits_the_deadline_when_fuel_is_plentiful() {
    let limits = PluginLimits {
        fuel_per_event: u64::MAX / 4,
        timeout_ms: 200,
        ..guest_limits()
    };
    quarantined(
        "py-faulty",
        json!({"mode": "spin"}),
        limits,
        TrapKind::Deadline,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_uncaught_exception_is_a_panic_trap_and_is_quarantined() {
    quarantined(
        "py-faulty",
        json!({"mode": "crash"}),
        guest_limits(),
        TrapKind::Panic,
    )
    .await;
}

/// A throw is a handler error: no trap, no restart, the instance keeps its state.
async fn throws_are_handler_errors(wasm: &str) {
    let engine = cached_engine();
    let faulty = load_guest(
        &engine,
        wasm,
        wasm,
        json!({"mode": "throw", "every": 2}),
        guest_limits(),
    );
    let (deliveries, snap) = beside_healthy_js(&engine, faulty, 6).await;
    let pods = ["p0", "p1", "p2", "p3", "p4", "p5"];
    let want: Vec<Delivery> = (0..6)
        .map(|i| {
            if i % 2 == 1 {
                Delivery::HandlerError(format!("boom key=default/{} n={}", pods[i], i + 1))
            } else {
                Delivery::Ok
            }
        })
        .collect();
    assert_eq!(deliveries, want, "{wasm}");
    assert_eq!(snap.state, PluginState::Running);
    assert_eq!(snap.errors, 3);
    assert_eq!(snap.traps, 0);
    assert_eq!(snap.restarts, 0);
    // Every event was delivered; three of them ended in a handler error.
    assert_eq!(snap.delivered.added, 6, "{snap:?}");
    assert_eq!(
        snap.log_lines, 3,
        "one `handled` line per successful event: {snap:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_throw_is_a_handler_error_not_a_trap() {
    throws_are_handler_errors("js-faulty").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_throw_is_a_handler_error_not_a_trap() {
    throws_are_handler_errors("py-faulty").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn occasional_python_crashes_restart_without_quarantine() {
    let engine = cached_engine();
    let faulty = load_guest(
        &engine,
        "py-crash-3",
        "py-faulty",
        json!({"mode": "crash", "every": 3}),
        guest_limits(),
    );
    let (deliveries, snap) = beside_healthy_js(&engine, faulty, 9).await;
    // Each fresh instance handles two events and crashes on its third.
    assert_eq!(deliveries, every_nth_restarted(3, 9));
    // The 9th event trapped: the runner waits out its backoff before the next
    // instance; it is not quarantined.
    assert_eq!(snap.state, PluginState::BackingOff, "{snap:?}");
    assert_eq!(snap.traps_by_kind["panic"], 3);
    assert_eq!(snap.restarts, 2, "{snap:?}");
    assert_eq!(snap.quarantines, 0);
    assert_eq!(snap.delivered.added, 6);
}
