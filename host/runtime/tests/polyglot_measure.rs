//! Cost of each guest language in wasmtime 48, measured on the example
//! plugins in the standalone harness (WIT 0.2: events as object references):
//! component size, first compile (no cache), cached load (wasmtime's on-disk
//! compilation cache, as the host uses it), instantiate + init, and the
//! per-event time and fuel for a realistic ~3 KB object.
//!
//! Run with `cargo test -p wasm-informer-runtime --test integration polyglot_measure:: -- --ignored --nocapture`
//! (dependencies, wasmtime and cranelift included, are optimised in the test profile).
//! Ignored by default: it measures, the other polyglot tests check behaviour.
//! It still asserts that every guest handled every event without error.

use crate::polyglot_support;

use std::time::{Duration, Instant};

use polyglot_support::*;
use serde_json::json;

const EVENTS: usize = 2000;

fn pod(i: usize) -> Cached {
    let containers: Vec<_> = (0..3)
        .map(|c| {
            json!({"name": format!("c{c}"), "image": format!("registry.corp.example/team/app-{c}:1.{i}"),
                   "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                   "ports": [{"containerPort": 8080 + c, "protocol": "TCP"}],
                   "env": [{"name": "MODE", "value": "production"}, {"name": "LOG_LEVEL", "value": "info"}],
                   "volumeMounts": [{"name": "data", "mountPath": "/var/data"}]})
        })
        .collect();
    let statuses: Vec<_> = (0..3)
        .map(|c| {
            json!({"name": format!("c{c}"), "ready": true, "restartCount": c,
                        "image": format!("registry.corp.example/team/app-{c}:1.{i}"),
                        "state": {"running": {"startedAt": "2026-11-30T10:00:00Z"}}})
        })
        .collect();
    cached(
        "v1/pods",
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": "prod", "name": format!("app-{i}"), "uid": format!("8d5c0b1e-0000-4000-8000-{i:012}"),
                         "resourceVersion": format!("{}", 1000 + i), "creationTimestamp": "2026-11-30T10:00:00Z",
                         "labels": {"app": "app", "team": "payments", "pod-template-hash": "7d9f8c6b5"},
                         "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-30T09:59:00Z"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "app-7d9f8c6b5",
                                              "uid": "11111111-2222-4333-8444-555555555555", "controller": true}]},
            "spec": {"containers": containers, "nodeName": "node-3", "serviceAccountName": "app",
                     "volumes": [{"name": "data", "emptyDir": {}}]},
            "status": {"phase": "Running", "podIP": "10.0.3.17", "hostIP": "192.0.2.3",
                       "conditions": [{"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"}],
                       "containerStatuses": statuses}
        }),
    )
}

fn deployment(i: usize) -> Cached {
    cached(
        "apps/v1/deployments",
        &json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"namespace": "prod", "name": format!("app-{i}"), "uid": format!("uid-{i}"),
                         "resourceVersion": format!("{}", 1000 + i), "generation": 3,
                         "labels": {"app": "app", "team": "payments", "tier": "backend"},
                         "annotations": {"owner": "payments@corp.example", "deployment.kubernetes.io/revision": "3"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "app"}},
                     "template": {"metadata": {"labels": {"app": "app"}},
                                  "spec": {"containers": [{"name": "app", "image": "registry.corp.example/team/app:1.0",
                                           "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}}},
            "status": {"replicas": 3, "readyReplicas": 3, "availableReplicas": 3, "observedGeneration": 3}
        }),
    )
}

struct Row {
    name: &'static str,
    lang: &'static str,
    size: u64,
    compile: Duration,
    cached: Duration,
    instantiate: Duration,
    first_event: Duration,
    per_event: Duration,
    first_fuel: u64,
    fuel: u64,
}

fn measure(
    name: &'static str,
    lang: &'static str,
    config: &str,
    objects: Vec<Cached>,
    readable: &[&str],
) -> Row {
    let path = plugin_path(name);
    let size = std::fs::metadata(&path).unwrap().len();

    // First compile: a fresh, empty compilation cache.
    let cache_dir = tempfile::tempdir().unwrap();
    let (_, compile) = load(&engine(Some(cache_dir.path())), &path);
    // Cached load: a new engine (as after a host restart) over the same cache.
    let engine = engine(Some(cache_dir.path()));
    let (component, cached) = load(&engine, &path);

    let started = Instant::now();
    let mut g = Guest::new(&engine, &component, objects.clone(), readable);
    g.init(config).expect("init");
    let instantiate = started.elapsed();

    let events: Vec<Event> = objects
        .iter()
        .map(|o| event(EventKind::Synced, o, false))
        .collect();
    let started = Instant::now();
    g.on_event(&events[0]).expect("first event");
    let first_event = started.elapsed();
    let first_fuel = g.fuel_used();
    g.on_event(&events[1]).expect("event");
    let fuel = g.fuel_used();

    let started = Instant::now();
    for i in 0..EVENTS {
        g.on_event(&events[i % events.len()]).expect("event");
    }
    let per_event = started.elapsed() / EVENTS as u32;
    Row {
        name,
        lang,
        size,
        compile,
        cached,
        instantiate,
        first_event,
        per_event,
        first_fuel,
        fuel,
    }
}

#[test]
#[ignore = "measurement; run with --ignored --nocapture"]
fn measure_every_guest_language() {
    let pods: Vec<Cached> = (0..50).map(pod).collect();
    let deployments: Vec<Cached> = (0..50).map(deployment).collect();
    println!(
        "event object sizes: pod {} B, deployment {} B",
        pods[0].json.len(),
        deployments[0].json.len()
    );
    let mut rows = vec![
        measure(
            "deployment-auditor",
            "JavaScript",
            r#"{"required_labels":["team","app"],"required_annotations":["owner"]}"#,
            deployments,
            &["apps/v1/deployments"],
        ),
        measure(
            "image-policy",
            "Python",
            r#"{"allowed_registries":["registry.corp.example"]}"#,
            pods.clone(),
            &["v1/pods"],
        ),
        measure(
            "restart-alarm",
            "C",
            r#"{"threshold":5}"#,
            pods.clone(),
            &["v1/pods"],
        ),
    ];
    // The trivial guests isolate the language runtime's fixed cost per call.
    rows.push(measure(
        "js-faulty",
        "JavaScript (trivial)",
        r#"{"mode":"ok"}"#,
        pods.clone(),
        &["v1/pods"],
    ));
    rows.push(measure(
        "py-faulty",
        "Python (trivial)",
        r#"{"mode":"ok"}"#,
        pods.clone(),
        &["v1/pods"],
    ));
    // The SDKs' fixed cost: plugins that read nothing.
    rows.push(measure(
        "js-noop",
        "JavaScript (no-op)",
        "{}",
        pods.clone(),
        &["v1/pods"],
    ));
    rows.push(measure(
        "py-noop",
        "Python (no-op)",
        "{}",
        pods,
        &["v1/pods"],
    ));

    println!(
        "| plugin | language | .wasm | first compile | cached load | instantiate+init | first event | per event | fuel first/steady |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {:.1} MB | {:.2} s | {:.3} s | {:.1} ms | {:.2} ms | {:.1} µs | {} / {} |",
            r.name,
            r.lang,
            r.size as f64 / 1e6,
            r.compile.as_secs_f64(),
            r.cached.as_secs_f64(),
            r.instantiate.as_secs_f64() * 1e3,
            r.first_event.as_secs_f64() * 1e3,
            r.per_event.as_secs_f64() * 1e6,
            r.first_fuel,
            r.fuel
        );
        assert!(
            r.cached < r.compile,
            "{}: the cached load must be faster than compiling",
            r.name
        );
    }
}
