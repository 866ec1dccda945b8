//! Every world the guest toolchains build, in the production plugin runtime
//! (`wasm_informer_runtime`):
//! - JavaScript and Python plugins of the frozen 0.1 world
//!   (plugins/testing/js-v01, py-v01, built against wit/v0.1 without the SDK)
//!   run unchanged beside 0.2 plugins of the same languages
//!   (plugins/testing/js-probe, py-probe) on the same cache and the same
//!   events, and each sees exactly what the host sent: the 0.1 ones through the
//!   lowered event, the 0.2 ones through their object references;
//! - the controller templates of JavaScript, Python and C load as world
//!   `controller` and reconcile through `PluginInstance::reconcile`.

use crate::runtime_support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kube_informer::cache_view::CacheView;
use kube_informer::handler::{Delivery, Handler};
use kube_informer::notification::{EventKind, Notification};
use kube_informer::object::{Object, ObjectRef, Transform};
use runtime_support::*;
use serde_json::{json, Value};
use wasm_informer_runtime::host_state::Granted;
use wasm_informer_runtime::log_sink::LogSink;
use wasm_informer_runtime::{
    EngineConfig, LoadedPlugin, LogLimits, PluginEngine, PluginInstance, PluginLimits, PluginSpec,
    PluginStatus, ReconcileOutcome, ReconcileRequest, World,
};

fn plugin_path(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../target/plugins/{name}.wasm"));
    assert!(
        p.exists(),
        "{} is missing: build the plugins first with scripts/setup.sh && scripts/build-plugins.sh",
        p.display()
    );
    p
}

/// An engine with the on-disk compilation cache of the tests.
fn cached_engine() -> Arc<PluginEngine> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/wasmtime-cache-tests");
    std::fs::create_dir_all(&dir).unwrap();
    PluginEngine::new(EngineConfig {
        cache_dir: Some(dir),
        ..EngineConfig::default()
    })
    .unwrap()
}

fn load_plugin(engine: &PluginEngine, wasm: &str, config: Value) -> Arc<LoadedPlugin> {
    let mut spec = PluginSpec::new(wasm);
    spec.config_json = config.to_string();
    spec.read = vec!["v1/pods".into()];
    spec.limits = PluginLimits {
        fuel_per_event: 1_000_000_000,
        timeout_ms: 10_000,
        ..PluginLimits::default()
    };
    LoadedPlugin::from_file(engine, spec, &plugin_path(wasm))
        .unwrap_or_else(|e| panic!("load {wasm}: {e}"))
}

fn pod(rv: &str) -> ObjectRef {
    let raw = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": "shop", "uid": "uid-web-0", "resourceVersion": rv,
                     "labels": {"app": "web", "tier": "front"}},
        "spec": {"containers": [{"name": "c", "image": "img:1"}]},
    });
    Arc::new(Object::from_json(raw.to_string().as_bytes(), &Transform::default()).unwrap())
}

fn notification(kind: EventKind, object: &ObjectRef, old: Option<&ObjectRef>) -> Arc<Notification> {
    Arc::new(Notification {
        kind,
        resource: "v1/pods".into(),
        key: object.key().into(),
        object: object.clone(),
        old: old.cloned(),
        in_initial_list: kind == EventKind::Added,
        final_state_unknown: false,
    })
}

/// What the plugin answered (both kinds of plugin answer with an error result).
async fn seen(runner: &mut wasm_informer_runtime::PluginRunner, n: Arc<Notification>) -> Value {
    match runner.handle(n).await {
        Delivery::HandlerError(m) => {
            serde_json::from_str(&m).unwrap_or_else(|e| panic!("{e}: {m}"))
        }
        other => panic!("the plugin answers with what it saw, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v01_js_and_python_plugins_run_unchanged_beside_v02_ones() {
    let engine = cached_engine();
    let cache = Arc::new(FakeCache::default());
    let (old, new) = (pod("7"), pod("8"));
    // The cache is updated before plugins are told: it holds the new state.
    cache.insert("v1/pods", new.clone());
    let mut runners = Vec::new();
    for (wasm, world, config) in [
        ("js-v01", World::EventHandlerV01, json!({"mode": "echo"})),
        ("py-v01", World::EventHandlerV01, json!({"mode": "echo"})),
        (
            "js-probe",
            World::EventHandlerV02,
            json!({"ops": [{"call": "read"}, {"call": "cache-get", "resource": "v1/pods", "key": "shop/web-0"}]}),
        ),
        (
            "py-probe",
            World::EventHandlerV02,
            json!({"ops": [{"call": "read"}, {"call": "cache-get", "resource": "v1/pods", "key": "shop/web-0"}]}),
        ),
    ] {
        let plugin = load_plugin(&engine, wasm, config);
        assert_eq!(plugin.world(), world, "{wasm}");
        let runner =
            wasm_informer_runtime::PluginRunner::start(engine.clone(), plugin, cache.clone())
                .await
                .unwrap_or_else(|e| panic!("{wasm}: {e}"));
        runners.push((wasm, world, runner));
    }
    let events = [
        (EventKind::Added, "added", None),
        (EventKind::Updated, "updated", Some(&old)),
        (EventKind::Synced, "synced", None),
        (EventKind::Deleted, "deleted", None),
    ];
    for (kind, name, old) in events {
        for (wasm, world, runner) in runners.iter_mut() {
            let s = seen(runner, notification(kind, &new, old)).await;
            if *world == World::EventHandlerV01 {
                assert_eq!(s["world"], "0.1", "{wasm}");
                assert_eq!(s["kind"], name, "{wasm}");
                assert_eq!(s["resource"], "v1/pods", "{wasm}");
                assert_eq!(s["key"], "shop/web-0", "{wasm}");
                let m = &s["meta"];
                assert_eq!(m["name"], "web-0", "{wasm}");
                assert_eq!(m["namespace"], "shop", "{wasm}");
                assert_eq!(m["uid"], "uid-web-0", "{wasm}");
                assert_eq!(m["resource_version"], "8", "{wasm}");
                assert_eq!(
                    m["labels"],
                    json!([["app", "web"], ["tier", "front"]]),
                    "{wasm}"
                );
                assert_eq!(m["json_bytes"], new.json_len(), "{wasm}");
                match old {
                    Some(_) => assert_eq!(s["old"]["resource_version"], "7", "{wasm}"),
                    None => assert!(s["old"].is_null(), "{wasm}: {s}"),
                }
                assert_eq!(s["initial"], kind == EventKind::Added, "{wasm}");
                assert_eq!(s["cached_resource_version"], "8", "{wasm}");
            } else {
                let (read, cached) = (&s[0], &s[1]);
                assert_eq!(read["kind"], name, "{wasm}");
                let o = &read["object"];
                assert_eq!(o["key"], "shop/web-0", "{wasm}");
                assert_eq!(o["uid"], "uid-web-0", "{wasm}");
                assert_eq!(o["resource_version"], "8", "{wasm}");
                assert_eq!(
                    o["labels"],
                    json!({"app": "web", "tier": "front"}),
                    "{wasm}"
                );
                assert_eq!(
                    o["body"],
                    serde_json::from_str::<Value>(&new.json()).unwrap(),
                    "{wasm}"
                );
                match old {
                    Some(_) => assert_eq!(read["old"]["resource_version"], "7", "{wasm}"),
                    None => assert!(read["old"].is_null(), "{wasm}"),
                }
                assert_eq!(read["initial"], kind == EventKind::Added, "{wasm}");
                assert_eq!(cached["keys"], json!(["shop/web-0"]), "{wasm}");
            }
        }
    }
    for (wasm, _, runner) in &runners {
        let snap = runner.status().snapshot();
        assert_eq!(snap.traps, 0, "{wasm}: {snap:?}");
        assert_eq!(snap.delivered.added + snap.delivered.updated, 2, "{wasm}");
    }
}

fn labelled(name: &str, label: Option<&str>) -> ObjectRef {
    let mut raw = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "prod", "uid": format!("uid-{name}"), "resourceVersion": "1"}});
    if let Some(v) = label {
        raw["metadata"]["labels"] = json!({"managed-by": v});
    }
    Arc::new(Object::from_json(raw.to_string().as_bytes(), &Transform::default()).unwrap())
}

fn request(name: &str) -> ReconcileRequest {
    ReconcileRequest {
        resource: "v1/pods".into(),
        namespace: Some("prod".into()),
        name: name.into(),
        key: format!("prod/{name}"),
    }
}

#[test]
fn controller_templates_of_every_language_reconcile_in_the_runtime() {
    let engine = cached_engine();
    let cache = Arc::new(FakeCache::default());
    cache.insert("v1/pods", labelled("done", Some("wasm-informer")));
    cache.insert("v1/pods", labelled("todo", None));
    let view: Arc<dyn CacheView> = cache.clone();
    for wasm in [
        "js-controller-template",
        "python-controller-template",
        "c-controller-template",
    ] {
        let plugin = load_plugin(&engine, wasm, json!({"requeue_ms": 250}));
        assert_eq!(plugin.world(), World::ControllerV02, "{wasm}");
        let status = Arc::new(PluginStatus::new(wasm));
        let log = Arc::new(LogSink::new(wasm.into(), LogLimits::default(), status));
        let mut inst = PluginInstance::start(
            &engine,
            &plugin,
            Granted::cache_only(&plugin, view.clone(), log),
        )
        .unwrap_or_else(|e| panic!("{wasm}: {e}"));
        assert_eq!(inst.world(), World::ControllerV02);
        // Already labelled: requeued as configured, nothing written.
        assert_eq!(
            inst.reconcile(&request("done")),
            ReconcileOutcome::RequeueAfter(std::time::Duration::from_millis(250)),
            "{wasm}"
        );
        // Gone: done.
        assert_eq!(
            inst.reconcile(&request("gone")),
            ReconcileOutcome::Done,
            "{wasm}"
        );
        // Needs a write, and this host gives plugins no API server: retried.
        match inst.reconcile(&request("todo")) {
            ReconcileOutcome::Retry(m) => assert!(m.contains("unavailable"), "{wasm}: {m}"),
            other => panic!("{wasm}: {other:?}"),
        }
        // An event is refused by a controller, without a trap.
        let n = notification(EventKind::Added, &labelled("done", None), None);
        assert!(
            matches!(
                inst.handle(&n),
                wasm_informer_runtime::CallOutcome::HandlerError(_)
            ),
            "{wasm}"
        );
    }
}
