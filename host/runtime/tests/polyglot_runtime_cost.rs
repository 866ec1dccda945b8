//! Cost of each guest language in the production plugin runtime
//! (`wasm_informer_runtime`): first compile and cached load through
//! [`PluginEngine`] with its on-disk compilation cache, instantiate + `init`,
//! and per-event time and fuel through [`PluginInstance::handle`] (conversion
//! of the cached object into the WIT event included) for a ~2 KB Pod.
//!
//! The second measurement compares the per-event cost of no-op plugins of WIT
//! 0.2 (plugins/noop, testing/js-noop, testing/py-noop: the Rust, JS and Python
//! SDKs, reading nothing) with their 0.1 counterparts (testing/noop-v01,
//! js-v01, py-v01) in the same run: rounds interleave the plugins, each round
//! times a batch of `updated` events with an old object (what 0.1 lowers as two
//! whole objects) and of `synced` events, and the table gives the median and
//! the min–max of the rounds' means, and the fuel per event.
//!
//! Run with `cargo test -p wasm-informer-runtime --test integration polyglot_runtime_cost:: -- --ignored --nocapture --test-threads 1`.
//! Ignored by default: it measures. It asserts that every event succeeded,
//! that a cached load beats a compile, and that a 0.2 no-op JS or Python event
//! costs at most half of a 0.1 one (the goal of 0.2's encoding).

use crate::runtime_support;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use kube_informer::cache_view::CacheView;
use kube_informer::notification::{EventKind, Notification};
use kube_informer::object::{Object, ObjectRef, Transform};
use runtime_support::FakeCache;
use serde_json::json;
use wasm_informer_runtime::host_state::Granted;
use wasm_informer_runtime::log_sink::LogSink;
use wasm_informer_runtime::{
    CallOutcome, EngineConfig, LoadedPlugin, LogLimits, PluginEngine, PluginInstance, PluginLimits,
    PluginSpec, PluginStatus,
};

const EVENTS: u32 = 2000;

fn pod(i: usize) -> ObjectRef {
    let containers: Vec<_> = (0..3)
        .map(|c| {
            json!({"name": format!("c{c}"), "image": format!("registry.corp.example/team/app-{c}:1.{i}"),
                   "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                   "ports": [{"containerPort": 8080 + c, "protocol": "TCP"}],
                   "env": [{"name": "MODE", "value": "production"}, {"name": "LOG_LEVEL", "value": "info"}]})
        })
        .collect();
    let statuses: Vec<_> = (0..3)
        .map(|c| {
            json!({"name": format!("c{c}"), "ready": true, "restartCount": c,
                        "state": {"running": {"startedAt": "2026-11-30T10:00:00Z"}}})
        })
        .collect();
    let json = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": "prod", "name": format!("app-{i}"), "uid": format!("uid-{i}"),
                     "resourceVersion": format!("{}", 1000 + i), "creationTimestamp": "2026-11-30T10:00:00Z",
                     "labels": {"app": "app", "team": "payments", "pod-template-hash": "7d9f8c6b5"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "app-7d9f8c6b5",
                                          "uid": "11111111-2222-4333-8444-555555555555", "controller": true}]},
        "spec": {"containers": containers, "nodeName": "node-3"},
        "status": {"phase": "Running", "podIP": "10.0.3.17",
                   "conditions": [{"type": "Ready", "status": "True"}], "containerStatuses": statuses}
    });
    Arc::new(Object::from_json(json.to_string().as_bytes(), &Transform::default()).unwrap())
}

fn measure(
    wasm: &str,
    lang: &str,
    config: serde_json::Value,
    cache: &Arc<FakeCache>,
    pods: &[ObjectRef],
) {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../target/plugins/{wasm}.wasm"));
    assert!(
        path.exists(),
        "{} missing: run scripts/build-plugins.sh",
        path.display()
    );
    let size = std::fs::metadata(&path).unwrap().len();
    let spec = PluginSpec {
        name: wasm.to_string(),
        config_json: config.to_string(),
        read: vec!["v1/pods".into()],
        limits: PluginLimits {
            fuel_per_event: 1_000_000_000,
            timeout_ms: 60_000,
            ..PluginLimits::default()
        },
        kube: Default::default(),
    };
    let dir = tempfile::tempdir().unwrap();
    let new_engine = || {
        PluginEngine::new(EngineConfig {
            cache_dir: Some(dir.path().to_path_buf()),
            ..EngineConfig::default()
        })
        .unwrap()
    };
    let t = Instant::now();
    drop(LoadedPlugin::from_file(&new_engine(), spec.clone(), &path).unwrap());
    let compile = t.elapsed();
    let engine = new_engine();
    let t = Instant::now();
    let plugin = LoadedPlugin::from_file(&engine, spec, &path).unwrap();
    let cached = t.elapsed();

    let status = Arc::new(PluginStatus::new(wasm));
    let log = Arc::new(LogSink::new(wasm.into(), LogLimits::default(), status));
    let view: Arc<dyn CacheView> = cache.clone();
    let t = Instant::now();
    let mut inst =
        PluginInstance::start(&engine, &plugin, Granted::cache_only(&plugin, view, log)).unwrap();
    let start = t.elapsed();

    let notes: Vec<Notification> = pods
        .iter()
        .map(|o| Notification {
            kind: EventKind::Synced,
            resource: "v1/pods".into(),
            key: o.key().into(),
            object: o.clone(),
            old: None,
            in_initial_list: false,
            final_state_unknown: false,
        })
        .collect();
    let t = Instant::now();
    assert_eq!(inst.handle(&notes[0]), CallOutcome::Ok);
    let first = t.elapsed();
    let first_fuel = inst.fuel_consumed();
    let t = Instant::now();
    for i in 0..EVENTS as usize {
        assert_eq!(
            inst.handle(&notes[i % notes.len()]),
            CallOutcome::Ok,
            "{wasm}"
        );
    }
    let per = t.elapsed() / EVENTS;
    let fuel = inst.fuel_consumed();
    println!(
        "| {wasm} | {lang} | {:.2} MB | {:.2} s | {:.3} s | {:.1} ms | {:.2} ms | {:.1} µs | {first_fuel} / {fuel} |",
        size as f64 / 1e6,
        compile.as_secs_f64(),
        cached.as_secs_f64(),
        start.as_secs_f64() * 1e3,
        first.as_secs_f64() * 1e3,
        per.as_secs_f64() * 1e6,
    );
    assert!(
        cached < compile,
        "{wasm}: a cached load must beat a compile"
    );
}

#[test]
#[ignore = "measurement; run with --ignored --nocapture"]
fn runtime_cost_per_guest_language() {
    let cache = Arc::new(FakeCache::default());
    let pods: Vec<ObjectRef> = (0..50).map(pod).collect();
    for p in &pods {
        cache.insert("v1/pods", p.clone());
    }
    println!("event object: {} bytes of JSON", pods[0].json_len());
    println!("| plugin | language | .wasm | first compile | cached load | instantiate+init | first event | per event | fuel first/last |");
    println!("|---|---|---|---|---|---|---|---|---|");
    measure("noop", "Rust (no-op)", json!({}), &cache, &pods);
    measure("pod-ready-counter", "Rust", json!({}), &cache, &pods);
    measure("restart-alarm", "C", json!({"threshold": 5}), &cache, &pods);
    measure(
        "js-faulty",
        "JavaScript (one log line)",
        json!({"mode": "ok"}),
        &cache,
        &pods,
    );
    measure(
        "py-faulty",
        "Python (one log line)",
        json!({"mode": "ok"}),
        &cache,
        &pods,
    );
    measure(
        "image-policy",
        "Python",
        json!({"allowed_registries": ["registry.corp.example"]}),
        &cache,
        &pods,
    );
    measure(
        "js-noop",
        "JavaScript (no-op, 0.2)",
        json!({}),
        &cache,
        &pods,
    );
    measure(
        "js-v01",
        "JavaScript (no-op, 0.1)",
        json!({}),
        &cache,
        &pods,
    );
    measure("py-noop", "Python (no-op, 0.2)", json!({}), &cache, &pods);
    measure("py-v01", "Python (no-op, 0.1)", json!({}), &cache, &pods);
}

/// One plugin of the 0.1 / 0.2 comparison, started once and timed per round.
struct Noop {
    wasm: &'static str,
    inst: PluginInstance,
    /// Per-event means of each round, updates and resyncs.
    updated: Vec<f64>,
    synced: Vec<f64>,
    fuel_updated: u64,
    fuel_synced: u64,
}

fn start_noop(engine: &PluginEngine, cache: &Arc<FakeCache>, wasm: &'static str) -> Noop {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../target/plugins/{wasm}.wasm"));
    assert!(
        path.exists(),
        "{} missing: run scripts/build-plugins.sh",
        path.display()
    );
    let spec = PluginSpec {
        name: wasm.to_string(),
        config_json: "{}".into(),
        read: vec!["v1/pods".into()],
        limits: PluginLimits {
            fuel_per_event: 1_000_000_000,
            timeout_ms: 60_000,
            ..PluginLimits::default()
        },
        kube: Default::default(),
    };
    let plugin = LoadedPlugin::from_file(engine, spec, &path).unwrap();
    let status = Arc::new(PluginStatus::new(wasm));
    let log = Arc::new(LogSink::new(wasm.into(), LogLimits::default(), status));
    let view: Arc<dyn CacheView> = cache.clone();
    let inst = PluginInstance::start(engine, &plugin, Granted::cache_only(&plugin, view, log))
        .unwrap_or_else(|e| panic!("{wasm}: {e}"));
    Noop {
        wasm,
        inst,
        updated: Vec::new(),
        synced: Vec::new(),
        fuel_updated: 0,
        fuel_synced: 0,
    }
}

/// Mean µs per event over `notes`, and the fuel of the last event.
fn time_batch(inst: &mut PluginInstance, notes: &[Notification], events: usize) -> (f64, u64) {
    let t = Instant::now();
    for i in 0..events {
        assert_eq!(inst.handle(&notes[i % notes.len()]), CallOutcome::Ok);
    }
    (
        t.elapsed().as_secs_f64() * 1e6 / events as f64,
        inst.fuel_consumed(),
    )
}

fn median_range(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (s[s.len() / 2], s[0], s[s.len() - 1])
}

#[test]
#[ignore = "measurement; run with --ignored --nocapture"]
fn noop_per_event_cost_v02_against_v01() {
    const ROUNDS: usize = 7;
    const PER_ROUND: usize = 1000;
    let cache = Arc::new(FakeCache::default());
    let pods: Vec<ObjectRef> = (0..50).map(pod).collect();
    for p in &pods {
        cache.insert("v1/pods", p.clone());
    }
    let note = |kind: EventKind, i: usize| Notification {
        kind,
        resource: "v1/pods".into(),
        key: pods[i].key().into(),
        object: pods[i].clone(),
        old: (kind == EventKind::Updated).then(|| pods[(i + 1) % pods.len()].clone()),
        in_initial_list: false,
        final_state_unknown: false,
    };
    let updated: Vec<Notification> = (0..pods.len())
        .map(|i| note(EventKind::Updated, i))
        .collect();
    let synced: Vec<Notification> = (0..pods.len())
        .map(|i| note(EventKind::Synced, i))
        .collect();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/wasmtime-cache-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let engine = PluginEngine::new(EngineConfig {
        cache_dir: Some(dir),
        ..EngineConfig::default()
    })
    .unwrap();
    let pairs = [
        ("Rust", "noop", "noop-v01"),
        ("JavaScript", "js-noop", "js-v01"),
        ("Python", "py-noop", "py-v01"),
    ];
    let mut plugins: Vec<Noop> = pairs
        .iter()
        .flat_map(|(_, v02, v01)| [*v02, *v01])
        .map(|w| start_noop(&engine, &cache, w))
        .collect();
    // Warm up every instance (the first calls of JS and Python are heavier).
    for p in plugins.iter_mut() {
        time_batch(&mut p.inst, &updated, 200);
        time_batch(&mut p.inst, &synced, 200);
    }
    for _ in 0..ROUNDS {
        for p in plugins.iter_mut() {
            let (u, fu) = time_batch(&mut p.inst, &updated, PER_ROUND);
            let (s, fs) = time_batch(&mut p.inst, &synced, PER_ROUND);
            p.updated.push(u);
            p.synced.push(s);
            p.fuel_updated = fu;
            p.fuel_synced = fs;
        }
    }
    println!(
        "{} rounds of {} events each; object {} bytes of JSON; µs per event: median (min–max of the rounds)",
        ROUNDS,
        PER_ROUND,
        pods[0].json_len()
    );
    println!("| language | plugin | WIT | updated (with old) | synced | fuel updated / synced |");
    println!("|---|---|---|---|---|---|");
    for (lang, v02, v01) in pairs {
        let row = |w: &str| plugins.iter().find(|p| p.wasm == w).unwrap();
        let mut med = Vec::new();
        for (p, wit) in [(row(v02), "0.2"), (row(v01), "0.1")] {
            let (um, ulo, uhi) = median_range(&p.updated);
            let (sm, slo, shi) = median_range(&p.synced);
            med.push((um, sm));
            println!(
                "| {lang} | {} | {wit} | {um:.1} ({ulo:.1}–{uhi:.1}) | {sm:.1} ({slo:.1}–{shi:.1}) | {} / {} |",
                p.wasm, p.fuel_updated, p.fuel_synced
            );
        }
        let (r_u, r_s) = (med[0].0 / med[1].0, med[0].1 / med[1].1);
        println!("| {lang} | 0.2 / 0.1 | | {r_u:.2} | {r_s:.2} | |");
        if lang != "Rust" {
            assert!(
                r_u <= 0.5 && r_s <= 0.5,
                "{lang}: a 0.2 no-op event should cost at most half of a 0.1 one ({r_u:.2}, {r_s:.2})"
            );
        }
    }
}
