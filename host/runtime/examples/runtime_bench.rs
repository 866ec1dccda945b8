//! Benchmark of the plugin call path: events per second into a no-op Rust
//! plugin of each world (0.2, which gets object handles, and 0.1, into which
//! the host lowers the whole event), with a 3 KB pod event, fuel metering and
//! the epoch deadline on.
//!
//! Run: `cargo run --release -p wasm-informer-runtime --example runtime_bench`
//! (optionally `-- EVENTS`). It reports:
//! - sync: `PluginInstance::handle` on this thread, for an add, an update
//!   (two objects) and a tiny object;
//! - runner: through `PluginRunner` (the plugin's own thread), as a listener
//!   drives it;
//! - instantiation time with the on-demand and the pooling allocator.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube_informer::cache_view::{CacheError, CacheView};
use kube_informer::handler::{Delivery, Handler};
use kube_informer::notification::{EventKind, Notification};
use kube_informer::object::{Object, ObjectRef, Transform};
use wasm_informer_runtime::host_state::Granted;
use wasm_informer_runtime::log_sink::LogSink;
use wasm_informer_runtime::{
    CallOutcome, EngineConfig, LoadedPlugin, LogLimits, PluginEngine, PluginInstance, PluginRunner,
    PluginSpec, PluginStatus,
};

struct EmptyCache;

impl CacheView for EmptyCache {
    fn get(&self, r: &str, _: &str) -> Result<Option<ObjectRef>, CacheError> {
        Err(CacheError::UnknownResource(r.into()))
    }
    fn list(
        &self,
        r: &str,
        _: Option<&str>,
        _: Option<&str>,
    ) -> Result<Vec<ObjectRef>, CacheError> {
        Err(CacheError::UnknownResource(r.into()))
    }
    fn by_index(&self, r: &str, _: &str, _: &str) -> Result<Vec<ObjectRef>, CacheError> {
        Err(CacheError::UnknownResource(r.into()))
    }
    fn has_synced(&self, r: &str) -> Result<bool, CacheError> {
        Err(CacheError::UnknownResource(r.into()))
    }
}

/// A pod whose JSON is about 3 KB after the transform.
fn pod_3kb() -> ObjectRef {
    let containers: Vec<_> = (0..3)
        .map(|i| {
            serde_json::json!({
                "name": format!("container-{i}"),
                "image": format!("registry.local/team/app-{i}:1.2.3"),
                "ports": [{"containerPort": 8080 + i, "protocol": "TCP"}],
                "env": [{"name": "MODE", "value": "production"}, {"name": "LEVEL", "value": "info"}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            })
        })
        .collect();
    let json = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-7d9f8c6b5-abcde",
            "namespace": "production",
            "uid": "0b6f7c1e-8a8e-4d0e-9f3a-2c5d7e9f1a2b",
            "resourceVersion": "123456",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "web", "tier": "frontend", "pod-template-hash": "7d9f8c6b5", "team": "payments"},
            "annotations": {"checksum/config": "a".repeat(64), "prometheus.io/scrape": "true",
                            "deployment.kubernetes.io/revision": "12", "description": "d".repeat(700)},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8c6b5", "uid": "5c1d2e3f-0000-1111-2222-333344445555", "controller": true}],
        },
        "spec": {"nodeName": "node-17", "serviceAccountName": "web", "containers": containers,
                 "volumes": [{"name": "data", "emptyDir": {}}], "restartPolicy": "Always"},
        "status": {"phase": "Running", "podIP": "10.1.2.3", "hostIP": "192.168.0.17",
                   "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"},
                                  {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}],
                   "containerStatuses": [{"name": "container-0", "ready": true, "restartCount": 0, "image": "registry.local/team/app-0:1.2.3", "imageID": format!("sha256:{}", "b".repeat(64)), "started": true}]},
    });
    Arc::new(Object::from_json(json.to_string().as_bytes(), &Transform::default()).unwrap())
}

/// Nanoseconds this thread has spent on a CPU (Linux `schedstat`), so a rate
/// can be stated per CPU-second even when the machine is shared.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Times `f` (which handles `n` events) by this thread's CPU time and by the
/// wall clock.
fn measure(n: u64, f: impl FnOnce()) -> String {
    let cpu0 = thread_cpu_ns();
    let t = Instant::now();
    f();
    let wall = t.elapsed();
    let cpu = cpu0.and_then(|c0| thread_cpu_ns().map(|c1| Duration::from_nanos(c1 - c0)));
    let per = |d: Duration| n as f64 / d.as_secs_f64();
    match cpu {
        Some(c) => format!(
            "{:>9.0} events/s per CPU-second ({:.3} us CPU/event); wall {:>9.0}/s",
            per(c),
            c.as_secs_f64() * 1e6 / n as f64,
            per(wall)
        ),
        None => format!("wall {:>9.0} events/s", per(wall)),
    }
}

fn rate(n: u64, d: Duration) -> String {
    format!(
        "{:>10.0} events/s ({:.3} us/event)",
        n as f64 / d.as_secs_f64(),
        d.as_secs_f64() * 1e6 / n as f64
    )
}

fn main() {
    let events: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let obj = pod_3kb();
    println!(
        "event object: {} bytes of JSON, fuel + epoch deadline on",
        obj.json_len()
    );
    let n = Notification {
        kind: EventKind::Updated,
        resource: "v1/pods".into(),
        key: obj.key().into(),
        object: obj.clone(),
        old: None,
        in_initial_list: false,
        final_state_unknown: false,
    };
    let wasm = std::fs::read(plugin_artifacts::NOOP).unwrap();
    let wasm_v01 = std::fs::read(plugin_artifacts::NOOP_V01).unwrap();
    // An update carries the old object too: 0.1 lowers both, 0.2 lends both.
    let update = Notification {
        old: Some(obj.clone()),
        ..n.clone()
    };
    let tiny = Arc::new(
        Object::from_json(
            br#"{"metadata":{"name":"t","namespace":"n"}}"#,
            &Transform::default(),
        )
        .unwrap(),
    );
    let tiny = Notification {
        object: tiny,
        ..n.clone()
    };

    for pooling in [false, true] {
        let engine = PluginEngine::new(EngineConfig {
            pooling,
            ..EngineConfig::default()
        })
        .unwrap();
        let label = if pooling { "pooling" } else { "on-demand" };
        for (world, bytes) in [("0.2", &wasm), ("0.1", &wasm_v01)] {
            let plugin = LoadedPlugin::from_bytes(&engine, PluginSpec::new("noop"), bytes).unwrap();
            let status = Arc::new(PluginStatus::new("noop"));
            let log = Arc::new(LogSink::new("noop".into(), LogLimits::default(), status));
            let cache: Arc<dyn CacheView> = Arc::new(EmptyCache);
            let granted = || Granted::cache_only(&plugin, cache.clone(), log.clone());

            let k = 200;
            let t = Instant::now();
            for _ in 0..k {
                drop(PluginInstance::start(&engine, &plugin, granted()).unwrap());
            }
            let inst = t.elapsed() / k;
            println!(
                "[{label} {world}] instantiate + init: {:.1} us",
                inst.as_secs_f64() * 1e6
            );

            let mut i = PluginInstance::start(&engine, &plugin, granted()).unwrap();
            for (what, ev) in [
                ("3 KB added", &n),
                ("3 KB updated", &update),
                ("tiny", &tiny),
            ] {
                for _ in 0..10_000 {
                    assert_eq!(i.handle(ev), CallOutcome::Ok);
                }
                let r = measure(events, || {
                    for _ in 0..events {
                        if i.handle(ev) != CallOutcome::Ok {
                            panic!("noop failed");
                        }
                    }
                });
                println!("[{label} {world}] sync handle, {what:<12}: {r}");
                println!(
                    "[{label} {world}] fuel per event, {what}: {}",
                    i.fuel_consumed()
                );
            }
        }
    }

    let engine = PluginEngine::new(EngineConfig::default()).unwrap();
    let plugin = LoadedPlugin::from_bytes(&engine, PluginSpec::new("noop"), &wasm).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut r = PluginRunner::start(engine.clone(), plugin, Arc::new(EmptyCache))
            .await
            .unwrap();
        let nref = Arc::new(n);
        let m = (events / 5).max(1);
        let t = Instant::now();
        for _ in 0..m {
            assert_eq!(r.handle(nref.clone()).await, Delivery::Ok);
        }
        println!(
            "[runner] handle via plugin thread:      {}",
            rate(m, t.elapsed())
        );
    });
}
