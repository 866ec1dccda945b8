//! The Python example plugin `image-policy` (plugins/image-policy, built by
//! scripts/build-plugins.sh with componentize-py) running in wasmtime: it
//! reports exactly the containers whose image registry is not allowed, with the
//! blast radius from a cache `by-index` query, forgets deleted pods, and turns a
//! bad config into an `init` error. In enforce mode it annotates exactly the
//! violating pods (a merge patch, sent only when the annotation differs, and
//! removed when the pod complies) and records one Warning Event per offending
//! container.

use crate::polyglot_support;

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

const ANNOTATION: &str = "image-policy.wasm-informer.dev/violation";
const ENFORCE: &str = r#"{
    "allowed_registries": ["registry.corp.example", "docker.io/library"],
    "exempt_namespaces": ["kube-system"],
    "mode": "enforce"
}"#;

/// (pod key, patch body) of every `kube` call, which must all be pod merge patches.
fn patches(g: &Guest) -> Vec<(String, serde_json::Value)> {
    g.kube_calls()
        .iter()
        .map(|c| {
            assert_eq!(
                (
                    c.verb.as_str(),
                    c.resource.as_str(),
                    c.patch.as_deref(),
                    c.force
                ),
                ("patch", PODS, Some("merge"), false)
            );
            (
                format!(
                    "{}/{}",
                    c.namespace.clone().unwrap(),
                    c.name.clone().unwrap()
                ),
                c.body.clone().unwrap(),
            )
        })
        .collect()
}

fn annotate(value: serde_json::Value) -> serde_json::Value {
    json!({"metadata": {"annotations": {ANNOTATION: value}}})
}

#[test]
fn enforce_mode_annotates_exactly_the_violating_pods_and_records_warnings() {
    let objects = seed();
    let mut g = Example::load("image-policy").guest(objects.clone(), &[PODS]);
    g.init(ENFORCE).expect("init");
    assert_eq!(
        g.messages(),
        vec!["policy allowed-registries=registry.corp.example,docker.io/library mode=enforce"]
    );
    g.on_events(EventKind::Added, &objects, true);
    assert_eq!(
        patches(&g),
        vec![
            ("shop/bad-1".to_string(), annotate(json!("evil.example"))),
            (
                "shop/bad-2".to_string(),
                annotate(json!("evil.example,mirror.example:5000"))
            ),
            ("shop/hub-1".to_string(), annotate(json!("docker.io"))),
        ]
    );
    let events: Vec<(String, String, String, String, String)> = g
        .published()
        .iter()
        .map(|p| {
            (
                format!(
                    "{}/{}",
                    p.regarding.namespace.clone().unwrap(),
                    p.regarding.name
                ),
                p.type_.clone(),
                p.reason.clone(),
                p.action.clone(),
                p.note.clone(),
            )
        })
        .collect();
    let w = |pod: &str, note: &str| {
        (
            pod.to_string(),
            "warning".to_string(),
            "DisallowedRegistry".to_string(),
            "Annotate".to_string(),
            note.to_string(),
        )
    };
    assert_eq!(
        events,
        vec![
            w("shop/bad-1", "container main image evil.example/miner:latest: registry evil.example is not allowed"),
            w("shop/bad-2", "container main image evil.example/miner: registry evil.example is not allowed"),
            w(
                "shop/bad-2",
                "container sidecar image mirror.example:5000/tools/debug@sha256:0123: registry mirror.example:5000 is not allowed"
            ),
            w("shop/hub-1", "container main image someone/tool:2: registry docker.io is not allowed"),
        ]
    );
    assert_eq!(g.published()[0].regarding, reference_of(&objects[2]));
}

fn with_annotation(p: &Cached, value: &str) -> Cached {
    let mut v = p.value.clone();
    v["metadata"]["annotations"] = json!({ ANNOTATION: value });
    cached(PODS, &v)
}

#[test]
fn enforce_mode_patches_only_what_differs_and_removes_the_annotation_on_a_fix() {
    let objects = seed();
    let mut g = Example::load("image-policy").guest(objects.clone(), &[PODS]);
    g.init(ENFORCE).unwrap();
    // Already annotated as it should be (as after its own patch): no write, and
    // a first report still logs and records.
    let bad1 = with_annotation(&objects[2], "evil.example");
    g.on_event(&event(EventKind::Updated, &bad1, false).with_old(&objects[2]))
        .unwrap();
    assert_eq!(patches(&g), vec![]);
    assert_eq!(g.published().len(), 1);
    // Resyncs change nothing.
    g.on_event(&event(EventKind::Synced, &bad1, false)).unwrap();
    assert_eq!(patches(&g), vec![]);
    assert_eq!(g.published().len(), 1);
    // A stale annotation is corrected.
    let stale = with_annotation(&objects[3], "evil.example");
    g.on_event(&event(EventKind::Added, &stale, false)).unwrap();
    assert_eq!(
        patches(&g),
        vec![(
            "shop/bad-2".to_string(),
            annotate(json!("evil.example,mirror.example:5000"))
        )]
    );
    // Fixed: the annotation goes (null in a merge patch), and nothing is recorded.
    let fixed = with_annotation(
        &pod(
            "shop",
            "bad-1",
            "9",
            &[("main", "registry.corp.example/miner:1")],
        ),
        "evil.example",
    );
    g.clear_logs();
    g.on_event(&event(EventKind::Updated, &fixed, false).with_old(&bad1))
        .unwrap();
    assert_eq!(g.messages(), vec!["compliant pod=shop/bad-1"]);
    assert_eq!(
        patches(&g)[1],
        ("shop/bad-1".to_string(), annotate(json!(null)))
    );
    assert_eq!(g.published().len(), 3);
    // Exempt namespaces are left alone.
    g.on_event(&event(EventKind::Added, &objects[5], false))
        .unwrap();
    assert_eq!(patches(&g).len(), 2);
}

#[test]
fn enforce_mode_ignores_a_pod_gone_since_and_reports_other_refusals() {
    let objects = seed();
    let mut g = Example::load("image-policy").guest(objects.clone(), &[PODS]);
    g.init(ENFORCE).unwrap();
    g.answer_kube(Err(ApiError::NotFound("pods \"bad-1\" not found".into())));
    g.on_event(&event(EventKind::Added, &objects[2], false))
        .unwrap();
    g.answer_kube(Err(ApiError::Forbidden(
        "no [[write]] grant for v1/pods".into(),
    )));
    let err = g
        .on_event(&event(EventKind::Added, &objects[3], false))
        .unwrap_err();
    assert!(
        err.starts_with("ApiError: patch v1/pods shop/bad-2: forbidden: "),
        "{err}"
    );
    // Not reported yet: the next event tries again.
    g.on_event(&event(EventKind::Synced, &objects[3], false))
        .unwrap();
    assert_eq!(patches(&g).len(), 3);
    let err = Example::load("image-policy")
        .guest(vec![], &[PODS])
        .init(r#"{"allowed_registries": ["x"], "mode": "block"}"#)
        .unwrap_err();
    assert_eq!(
        err,
        "ValueError: config.mode must be \"audit\" or \"enforce\""
    );
}
