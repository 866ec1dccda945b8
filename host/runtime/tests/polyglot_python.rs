//! The Python example plugin `image-policy` (plugins/image-policy, built by
//! scripts/build-plugins.sh with componentize-py) running in wasmtime: it
//! reports exactly the containers whose image registry is not allowed, with the
//! blast radius from a cache `by-index` query, forgets deleted pods, and turns a
//! bad config into an `init` error.

mod polyglot_support;

use polyglot_support::*;
use serde_json::json;

const PODS: &str = "v1/pods";
const CONFIG: &str = r#"{
    "allowed_registries": ["registry.corp.example", "docker.io/library"],
    "exempt_namespaces": ["kube-system"]
}"#;

fn pod(ns: &str, name: &str, rv: &str, containers: &[(&str, &str)]) -> Cached {
    let cs: Vec<_> = containers
        .iter()
        .map(|(n, i)| json!({"name": n, "image": i}))
        .collect();
    cached(
        PODS,
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{name}"), "resourceVersion": rv},
            "spec": {"containers": cs}
        }),
    )
}

fn seed() -> Vec<Cached> {
    vec![
        pod(
            "shop",
            "web-1",
            "1",
            &[("main", "registry.corp.example/shop/web:1.2")],
        ),
        pod("shop", "cache-1", "2", &[("main", "redis:7")]),
        pod(
            "shop",
            "bad-1",
            "3",
            &[("main", "evil.example/miner:latest")],
        ),
        pod(
            "shop",
            "bad-2",
            "4",
            &[
                ("main", "evil.example/miner"),
                ("sidecar", "mirror.example:5000/tools/debug@sha256:0123"),
            ],
        ),
        pod("shop", "hub-1", "5", &[("main", "someone/tool:2")]),
        pod(
            "kube-system",
            "proxy",
            "6",
            &[("main", "evil.example/proxy")],
        ),
    ]
}

fn start(cache: Vec<Cached>) -> Guest {
    let mut g = Example::load("image-policy").guest(cache, &[PODS]);
    g.init(CONFIG).expect("init");
    assert_eq!(
        g.messages(),
        vec!["policy allowed-registries=registry.corp.example,docker.io/library"]
    );
    g.clear_logs();
    g
}

#[test]
fn image_policy_reports_exactly_the_disallowed_images() {
    let objects = seed();
    let mut g = start(objects.clone());
    g.on_events(EventKind::Added, &objects, true);
    assert_eq!(
        g.messages(),
        vec![
            "violation pod=shop/bad-1 container=main image=evil.example/miner:latest registry=evil.example same-image-in-namespace=2",
            "violation pod=shop/bad-2 container=main image=evil.example/miner registry=evil.example same-image-in-namespace=2",
            "violation pod=shop/bad-2 container=sidecar image=mirror.example:5000/tools/debug@sha256:0123 registry=mirror.example:5000 same-image-in-namespace=1",
            "violation pod=shop/hub-1 container=main image=someone/tool:2 registry=docker.io same-image-in-namespace=1",
        ]
    );
}

#[test]
fn image_policy_is_quiet_on_resync_and_reports_fixes_and_recreations() {
    let objects = seed();
    let mut g = start(objects.clone());
    g.replay_then_quiet_resync(&objects);

    let fixed = pod(
        "shop",
        "bad-1",
        "9",
        &[("main", "registry.corp.example/miner:1")],
    );
    g.on_event(&event(EventKind::Updated, &fixed, false))
        .unwrap();
    assert_eq!(g.messages(), vec!["compliant pod=shop/bad-1"]);
    g.clear_logs();

    g.on_event(&event(EventKind::Deleted, &objects[4], false))
        .unwrap();
    g.on_event(&event(EventKind::Added, &objects[4], false))
        .unwrap();
    assert_eq!(
        g.messages(),
        vec!["violation pod=shop/hub-1 container=main image=someone/tool:2 registry=docker.io same-image-in-namespace=1"]
    );
}

#[test]
fn image_policy_rejects_a_bad_config_with_a_clear_error() {
    let example = Example::load("image-policy");
    let mut g = example.guest(vec![], &[PODS]);
    let err = g
        .init(r#"{"allowed_registries": "docker.io"}"#)
        .unwrap_err();
    assert_eq!(
        err,
        "ValueError: config.allowed_registries must be an array of strings"
    );
    let mut g = example.guest(vec![], &[PODS]);
    let err = g.init("{}").unwrap_err();
    assert_eq!(
        err,
        "ValueError: config.allowed_registries must name at least one registry"
    );
}

#[test]
fn image_policy_cache_errors_are_handler_errors_not_traps() {
    let objects = seed();
    let mut g = Example::load("image-policy").guest(objects.clone(), &[]);
    g.init(CONFIG).unwrap();
    let err = g
        .on_event(&event(EventKind::Added, &objects[2], false))
        .unwrap_err();
    assert_eq!(
        err,
        "CacheError: cache by-index v1/pods namespace: forbidden: v1/pods"
    );
    // Same instance carries on once the read is allowed.
    g.store.data_mut().readable.push(PODS.to_string());
    g.clear_logs();
    g.on_event(&event(EventKind::Added, &objects[2], false))
        .unwrap();
    assert_eq!(
        g.messages(),
        vec!["violation pod=shop/bad-1 container=main image=evil.example/miner:latest registry=evil.example same-image-in-namespace=2"]
    );
}
