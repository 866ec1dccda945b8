//! Cost of each guest language in the production plugin runtime
//! (`wasm_informer_runtime`): first compile and cached load through
//! [`PluginEngine`] with its on-disk compilation cache, instantiate + `init`,
//! and per-event time and fuel through [`PluginInstance::handle`] (conversion
//! of the cached object into the WIT event included) for a ~2 KB Pod.
//!
//! Run with `cargo test -p wasm-informer --test polyglot_runtime_cost -- --ignored --nocapture`.
//! Ignored by default: it measures. It asserts that every event succeeded and
//! that a cached load beats a compile.

#[path = "runtime_support/mod.rs"]
mod runtime_support;

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
    println!("event object: {} bytes of JSON", pods[0].json.len());
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
}
