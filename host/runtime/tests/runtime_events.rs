//! What a plugin receives is exactly what the host sent: every field of the
//! event, for every kind, in both worlds: a 0.1 plugin (built before 0.2 and
//! unchanged) through the borrowed lowering that copies the cached object
//! straight into the guest's memory, a 0.2 plugin through the object handles
//! it reads field by field.

use crate::runtime_support;

use std::sync::Arc;

use kube_informer::handler::{Delivery, Handler};
use kube_informer::notification::{EventKind, Notification};
use kube_informer::object::{Object, Transform};
use runtime_support::*;
use serde_json::{json, Value};
use wasm_informer_runtime::PluginLimits;

fn full_object(rv: &str) -> Arc<Object> {
    let raw = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-0",
            "namespace": "shop",
            "uid": "uid-web-0",
            "resourceVersion": rv,
            "generation": 3,
            "labels": {"app": "web", "tier": "front"},
            "annotations": {"a": "1", "note": "ünïcode ✓"},
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "deletionTimestamp": "2026-01-02T00:00:00Z",
            "finalizers": ["example.com/cleanup"],
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-rs", "uid": "owner-1", "controller": true},
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "cfg", "uid": "owner-2"},
            ],
        },
        "spec": {"nodeName": "n1"},
    });
    Arc::new(Object::from_json(raw.to_string().as_bytes(), &Transform::default()).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v01_plugins_run_unchanged_and_see_every_field_the_host_sent() {
    let engine = engine();
    let (cache, _) = cache_with_pods("shop", 1);
    let plugin = load(
        &engine,
        "echo-v01",
        plugin_artifacts::ECHO_V01,
        json!({}),
        &[],
        PluginLimits::default(),
    );
    let mut r = runner(&engine, plugin, cache).await;
    let new = full_object("8");
    let old = full_object("7");
    for (kind, name) in [
        (EventKind::Added, "added"),
        (EventKind::Updated, "updated"),
        (EventKind::Deleted, "deleted"),
        (EventKind::Synced, "synced"),
    ] {
        let n = Arc::new(Notification {
            kind,
            resource: "v1/pods".into(),
            key: "shop/web-0".into(),
            object: new.clone(),
            old: (kind == EventKind::Updated).then(|| old.clone()),
            in_initial_list: kind == EventKind::Added,
            final_state_unknown: kind == EventKind::Deleted,
        });
        let seen: Value = match r.handle(n).await {
            Delivery::HandlerError(m) => serde_json::from_str(&m).unwrap(),
            other => panic!("echo answers with an error result, got {other:?}"),
        };
        assert_eq!(seen["kind"], name);
        assert_eq!(seen["resource"], "v1/pods");
        assert_eq!(seen["key"], "shop/web-0");
        assert_eq!(seen["json"], &*new.json());
        let m = &seen["meta"];
        assert_eq!(m["namespace"], "shop");
        assert_eq!(m["name"], "web-0");
        assert_eq!(m["uid"], "uid-web-0");
        assert_eq!(m["resource_version"], "8");
        assert_eq!(m["generation"], 3);
        assert_eq!(m["labels"], json!([["app", "web"], ["tier", "front"]]));
        assert_eq!(m["annotations"], json!([["a", "1"], ["note", "ünïcode ✓"]]));
        assert_eq!(m["creation_timestamp"], "2026-01-01T00:00:00Z");
        assert_eq!(m["deletion_timestamp"], "2026-01-02T00:00:00Z");
        assert_eq!(m["owner_uids"], json!(["owner-1", "owner-2"]));
        if kind == EventKind::Updated {
            assert_eq!(seen["old_meta"]["resource_version"], "7");
        } else {
            assert!(seen["old_meta"].is_null());
        }
        assert_eq!(seen["is_in_initial_list"], kind == EventKind::Added);
        assert_eq!(seen["final_state_unknown"], kind == EventKind::Deleted);
    }
    // A cluster-scoped object without optional fields.
    let bare = Arc::new(
        Object::from_json(br#"{"metadata":{"name":"node-1"}}"#, &Transform::default()).unwrap(),
    );
    let n = Arc::new(Notification {
        kind: EventKind::Added,
        resource: "v1/nodes".into(),
        key: "node-1".into(),
        object: bare,
        old: None,
        in_initial_list: false,
        final_state_unknown: false,
    });
    let seen: Value = match r.handle(n).await {
        Delivery::HandlerError(m) => serde_json::from_str(&m).unwrap(),
        other => panic!("{other:?}"),
    };
    assert!(seen["meta"]["namespace"].is_null());
    assert!(seen["meta"]["generation"].is_null());
    assert_eq!(seen["meta"]["labels"], json!([]));
    assert_eq!(seen["meta"]["owner_uids"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v02_guest_reads_every_field_through_its_handles() {
    let engine = engine();
    let (cache, _) = cache_with_pods("shop", 1);
    let plugin = load(
        &engine,
        "echo",
        plugin_artifacts::ECHO,
        json!({}),
        &[],
        PluginLimits::default(),
    );
    assert_eq!(
        plugin.world(),
        wasm_informer_runtime::World::EventHandlerV02
    );
    let mut r = runner(&engine, plugin, cache).await;
    let new = full_object("8");
    let old = full_object("7");
    for (kind, name) in [
        (EventKind::Added, "added"),
        (EventKind::Updated, "updated"),
        (EventKind::Deleted, "deleted"),
        (EventKind::Synced, "synced"),
    ] {
        let n = Arc::new(Notification {
            kind,
            resource: "v1/pods".into(),
            key: "shop/web-0".into(),
            object: new.clone(),
            old: (kind == EventKind::Updated).then(|| old.clone()),
            in_initial_list: kind == EventKind::Added,
            final_state_unknown: kind == EventKind::Deleted,
        });
        let seen: Value = match r.handle(n).await {
            Delivery::HandlerError(m) => serde_json::from_str(&m).unwrap(),
            other => panic!("echo answers with an error result, got {other:?}"),
        };
        assert_eq!(seen["kind"], name);
        let o = &seen["object"];
        assert_eq!(o["resource"], "v1/pods");
        assert_eq!(o["key"], "shop/web-0");
        assert_eq!(o["json"], &*new.json());
        assert_eq!(o["namespace"], "shop");
        assert_eq!(o["name"], "web-0");
        assert_eq!(o["uid"], "uid-web-0");
        assert_eq!(o["resource_version"], "8");
        assert_eq!(o["generation"], 3);
        assert_eq!(o["label_app"], "web");
        assert_eq!(o["annotation_note"], "ünïcode ✓");
        assert_eq!(o["labels"], json!([["app", "web"], ["tier", "front"]]));
        assert_eq!(o["annotations"], json!([["a", "1"], ["note", "ünïcode ✓"]]));
        let m = &o["meta"];
        assert_eq!(m["namespace"], "shop");
        assert_eq!(m["resource_version"], "8");
        assert_eq!(m["labels"], o["labels"]);
        assert_eq!(m["creation_timestamp"], "2026-01-01T00:00:00Z");
        assert_eq!(m["deletion_timestamp"], "2026-01-02T00:00:00Z");
        assert_eq!(m["finalizers"], json!(["example.com/cleanup"]));
        assert_eq!(
            m["owner_references"],
            json!([
                {"api_version": "apps/v1", "kind": "ReplicaSet", "name": "web-rs", "uid": "owner-1", "controller": true},
                {"api_version": "v1", "kind": "ConfigMap", "name": "cfg", "uid": "owner-2", "controller": false},
            ])
        );
        assert_eq!(
            o["reference"],
            json!({"api_version": "v1", "kind": "Pod", "namespace": "shop", "name": "web-0", "uid": "uid-web-0"})
        );
        if kind == EventKind::Updated {
            assert_eq!(seen["old"]["resource_version"], "7");
            assert_eq!(seen["old"]["json"], &*old.json());
        } else {
            assert!(seen["old"].is_null());
        }
        assert_eq!(seen["is_in_initial_list"], kind == EventKind::Added);
        assert_eq!(seen["final_state_unknown"], kind == EventKind::Deleted);
    }
    // A cluster-scoped object without optional fields.
    let bare = Arc::new(
        Object::from_json(br#"{"metadata":{"name":"node-1"}}"#, &Transform::default()).unwrap(),
    );
    let n = Arc::new(Notification {
        kind: EventKind::Added,
        resource: "v1/nodes".into(),
        key: "node-1".into(),
        object: bare,
        old: None,
        in_initial_list: false,
        final_state_unknown: false,
    });
    let seen: Value = match r.handle(n).await {
        Delivery::HandlerError(m) => serde_json::from_str(&m).unwrap(),
        other => panic!("{other:?}"),
    };
    let o = &seen["object"];
    assert_eq!(o["key"], "node-1");
    assert!(o["namespace"].is_null());
    assert!(o["generation"].is_null());
    assert!(o["label_app"].is_null());
    assert_eq!(o["labels"], json!([]));
    assert_eq!(o["meta"]["owner_references"], json!([]));
    assert!(o["reference"]["uid"].is_null());
}
