//! Watch and list edge cases of the wire protocol, checked on the raw HTTP exchange and with
//! kube-client: resourceVersions newer than the store (including a simulator replaced on the same
//! address by one with less state, as an etcd restore looks), legacy `/watch/` paths, boolean
//! query parameters, and the generated kubeconfig.

use crate::common;

use std::time::{Duration, Instant};

use apisim::{Sim, SimConfig};
use common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, VersionMatch, WatchEvent, WatchParams};
use serde_json::{json, Value};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

fn assert_too_large(status: &Value, requested: u64, current: u64) {
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["code"], 504);
    assert_eq!(status["reason"], "Timeout");
    assert_eq!(
        status["message"],
        format!("Timeout: Too large resource version: {requested}, current: {current}")
    );
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}])
    );
    assert_eq!(status["details"]["retryAfterSeconds"], 1);
}

#[tokio::test]
async fn watch_from_a_too_large_rv_waits_then_sends_error_504() {
    let sim = start(SimConfig::default()).await;
    let cur = sim.store().current_rv();
    let future = cur + 100;
    for query in [
        format!("watch=true&resourceVersion={future}"),
        format!("watch=1&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion={future}"),
    ] {
        let t = Instant::now();
        let r = raw(sim.addr(), "GET", &format!("{CMS}?{query}"), None).await;
        let waited = t.elapsed();
        assert_eq!(r.code, 200, "a watch error is an event, not an HTTP error: {r:?}");
        let ev = r.events();
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert_eq!(ev[0]["type"], "ERROR");
        assert_too_large(&ev[0]["object"], future, cur);
        assert!(
            waited >= Duration::from_millis(2900),
            "the watch cache waits 3 s first, took {waited:?}"
        );
    }
    assert_eq!(sim.faults().open_watches(), 0, "the stream is closed");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_too_large_rv_that_the_store_reaches_in_time_is_served() {
    let sim = start(SimConfig::default()).await;
    let store = sim.store().clone();
    let cms = store.rid("v1", "configmaps");
    let target = store.current_rv() + 2;
    let api: Api<ConfigMap> = Api::namespaced(client(&sim), "default");
    let s2 = store.clone();
    let writer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        for n in ["a", "b"] {
            s2.create(cms, Some("default"), configmap(n, "default", json!({})))
                .unwrap();
        }
    });
    let mut w = api
        .watch(&WatchParams::default(), &target.to_string())
        .await
        .unwrap()
        .boxed();
    writer.await.unwrap();
    store
        .create(cms, Some("default"), configmap("c", "default", json!({})))
        .unwrap();
    match support_next(&mut w).await {
        WatchEvent::Added(c) => assert_eq!(c.metadata.name.as_deref(), Some("c")),
        other => panic!("expected ADDED c (changes after {target}), got {other:?}"),
    }
    // Lists wait the same way.
    let s3 = store.clone();
    let target = store.current_rv() + 1;
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        s3.create(cms, Some("default"), configmap("d", "default", json!({})))
            .unwrap();
    });
    let l = api
        .list(
            &ListParams::default()
                .at(&target.to_string())
                .matching(VersionMatch::NotOlderThan),
        )
        .await
        .unwrap();
    assert_eq!(l.items.len(), 4);
    sim.shutdown().await;
}

async fn support_next<S>(s: &mut S) -> WatchEvent<ConfigMap>
where
    S: futures::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
{
    tokio::time::timeout(PATIENCE, s.next())
        .await
        .expect("an event in time")
        .expect("stream open")
        .expect("event decodes")
}

#[tokio::test]
async fn kube_client_sees_the_504_error_event_and_the_stream_ends() {
    let sim = start(SimConfig {
        too_large_rv_wait: Duration::from_millis(200),
        ..SimConfig::default()
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(client_once(&sim), "default");
    let cur = sim.store().current_rv();
    let mut w = api
        .watch(&WatchParams::default(), &(cur + 5).to_string())
        .await
        .unwrap()
        .boxed();
    match support_next(&mut w).await {
        WatchEvent::Error(e) => {
            assert_eq!((e.code, e.reason.as_str()), (504, "Timeout"));
            assert!(e.message.contains("Too large resource version"), "{e:?}");
        }
        other => panic!("expected an ERROR event, got {other:?}"),
    }
    assert!(tokio::time::timeout(PATIENCE, w.next())
        .await
        .unwrap()
        .is_none());
    // A list at that version is an HTTP 504 with the same Status.
    let r = raw(
        sim.addr(),
        "GET",
        &format!(
            "{CMS}?resourceVersion={}&resourceVersionMatch=NotOlderThan",
            cur + 5
        ),
        None,
    )
    .await;
    assert_eq!(r.code, 504);
    assert_eq!(r.headers.get("retry-after").map(String::as_str), Some("1"));
    assert_too_large(&r.json(), cur + 5, cur);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_simulator_replaced_on_the_same_address_looks_like_an_etcd_restore() {
    let sim = start(SimConfig::default()).await;
    let addr = sim.addr();
    let cms = sim.store().rid("v1", "configmaps");
    for i in 0..30 {
        sim.store()
            .create(
                cms,
                Some("default"),
                configmap(&format!("old-{i}"), "default", json!({})),
            )
            .unwrap();
    }
    let c = client_once(&sim);
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let seen_rv: u64 = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
        .parse()
        .unwrap();

    // The restored server: fewer writes, so a lower resourceVersion.
    let restored = Sim::new(SimConfig {
        too_large_rv_wait: Duration::from_millis(300),
        ..SimConfig::default()
    });
    restored
        .store()
        .create(
            cms,
            Some("default"),
            configmap("survivor", "default", json!({})),
        )
        .unwrap();
    let current = restored.store().current_rv();
    assert!(current < seen_rv);
    let sim = sim.replace(restored).await.unwrap();
    assert_eq!(sim.addr(), addr, "same address");

    // The same client, on new connections: a watch from the old RV gets the 504 ERROR event...
    let mut w = api
        .watch(&WatchParams::default(), &seen_rv.to_string())
        .await
        .unwrap()
        .boxed();
    match support_next(&mut w).await {
        WatchEvent::Error(e) => assert_eq!(e.code, 504),
        other => panic!("expected ERROR 504, got {other:?}"),
    }
    // ...so does a list not older than it, and a fresh list sees the restored state.
    match api
        .list(
            &ListParams::default()
                .at(&seen_rv.to_string())
                .matching(VersionMatch::NotOlderThan),
        )
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (504, "Timeout")),
        other => panic!("expected 504, got {other:?}"),
    }
    let r = raw(
        addr,
        "GET",
        &format!("{CMS}?watch=true&resourceVersion={seen_rv}"),
        None,
    )
    .await;
    assert_eq!(r.events()[0]["object"]["code"], 504);
    let names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect();
    assert_eq!(names, vec!["survivor"]);
    sim.shutdown().await;
}

#[tokio::test]
async fn legacy_watch_paths_serve_every_resource() {
    let sim = start(SimConfig::default()).await;
    let store = sim.store().clone();
    let from = store.current_rv();
    let cms = store.rid("v1", "configmaps");
    store.create_namespace("other").unwrap();
    for (n, ns) in [("a", "default"), ("b", "default"), ("c", "other")] {
        store
            .create(cms, Some(ns), configmap(n, ns, json!({})))
            .unwrap();
    }
    let leases = store.rid("coordination.k8s.io/v1", "leases");
    store
        .create(
            leases,
            Some("default"),
            json!({"metadata": {"name": "l"}, "spec": {}}),
        )
        .unwrap();
    let deps = store.rid("apps/v1", "deployments");
    store
        .create(
            deps,
            Some("other"),
            json!({"metadata": {"name": "d"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}),
        )
        .unwrap();
    let names = |r: &Raw| -> Vec<String> {
        r.events()
            .iter()
            .map(|e| {
                assert_eq!(e["type"], "ADDED", "{e}");
                e["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    let q = format!("resourceVersion={from}&timeoutSeconds=1");
    for (path, want) in [
        ("/api/v1/watch/configmaps", vec!["a", "b", "c"]),
        (
            "/api/v1/watch/namespaces/default/configmaps",
            vec!["a", "b"],
        ),
        ("/api/v1/watch/namespaces/default/configmaps/b", vec!["b"]),
        ("/api/v1/watch/namespaces/other", vec!["other"]),
        ("/api/v1/watch/namespaces/default", vec![]),
        ("/api/v1/watch/namespaces", vec!["other"]),
        (
            "/apis/coordination.k8s.io/v1/watch/namespaces/default/leases",
            vec!["l"],
        ),
        ("/apis/apps/v1/watch/deployments", vec!["d"]),
        (
            "/apis/apps/v1/watch/namespaces/other/deployments/d",
            vec!["d"],
        ),
    ] {
        let r = raw(sim.addr(), "GET", &format!("{path}?{q}"), None).await;
        assert_eq!(r.code, 200, "{path}: {r:?}");
        assert_eq!(names(&r), want, "{path}");
    }
    // From no resourceVersion: the current state, as with ?watch=true.
    let r = raw(
        sim.addr(),
        "GET",
        "/api/v1/watch/namespaces/other/configmaps?timeoutSeconds=1",
        None,
    )
    .await;
    assert_eq!(names(&r), vec!["c"]);
    // A field selector naming another object is refused, as the apiserver does.
    let r = raw(
        sim.addr(),
        "GET",
        "/api/v1/watch/namespaces/default/configmaps/b?fieldSelector=metadata.name%3Da",
        None,
    )
    .await;
    assert_eq!(r.code, 400);
    assert_eq!(
        r.json()["message"],
        "fieldSelector metadata.name doesn't match requested name"
    );
    let r = raw(
        sim.addr(),
        "DELETE",
        "/api/v1/watch/namespaces/default/configmaps/b",
        None,
    )
    .await;
    assert_eq!(r.code, 405);
    assert!(store.get(cms, "default", "b").is_ok());
    // The request log knows these are watches.
    assert!(sim
        .request_log()
        .for_path("/api/v1/watch/configmaps")
        .iter()
        .all(|r| r.is_watch()));
    sim.shutdown().await;
}

#[tokio::test]
async fn boolean_query_parameters_decode_like_the_apiserver() {
    let sim = start(SimConfig {
        bookmark_interval: Duration::from_millis(100),
        ..SimConfig::default()
    })
    .await;
    let cms = sim.store().rid("v1", "configmaps");
    sim.store()
        .create(cms, Some("default"), configmap("x", "default", json!({})))
        .unwrap();
    // False: absent, 0, false in any case. True: anything else, even empty or "yes".
    for v in ["0", "false", "FALSE", "False"] {
        let r = raw(sim.addr(), "GET", &format!("{CMS}?watch={v}"), None).await;
        assert_eq!(r.json()["kind"], "ConfigMapList", "watch={v}");
    }
    for v in ["true", "1", "True", "yes", ""] {
        let r = raw(
            sim.addr(),
            "GET",
            &format!("{CMS}?watch={v}&timeoutSeconds=1"),
            None,
        )
        .await;
        let ev = r.events();
        assert_eq!(ev[0]["type"], "ADDED", "watch={v}: {ev:?}");
    }
    // allowWatchBookmarks=TRUE gets bookmarks; =0 does not.
    let cur = sim.store().current_rv();
    let r = raw(
        sim.addr(),
        "GET",
        &format!("{CMS}?watch=1&allowWatchBookmarks=TRUE&resourceVersion={cur}&timeoutSeconds=1"),
        None,
    )
    .await;
    assert!(
        r.events().iter().any(|e| e["type"] == "BOOKMARK"),
        "{}",
        r.body
    );
    let r = raw(
        sim.addr(),
        "GET",
        &format!("{CMS}?watch=1&allowWatchBookmarks=0&resourceVersion={cur}&timeoutSeconds=1"),
        None,
    )
    .await;
    assert!(r.events().is_empty(), "{}", r.body);
    // sendInitialEvents=True with bookmarks=yes: the initial events, then the end marker.
    let r = raw(
        sim.addr(),
        "GET",
        &format!("{CMS}?watch=yes&sendInitialEvents=True&allowWatchBookmarks=yes&resourceVersionMatch=NotOlderThan&timeoutSeconds=1"),
        None,
    )
    .await;
    let ev = r.events();
    assert_eq!(ev[0]["type"], "ADDED");
    assert_eq!(
        ev[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    // sendInitialEvents=false without bookmarks is accepted (it is not "true").
    let r = raw(
        sim.addr(),
        "GET",
        &format!("{CMS}?watch=true&sendInitialEvents=FALSE&resourceVersionMatch=NotOlderThan&timeoutSeconds=1"),
        None,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert!(r.events().is_empty());
    sim.shutdown().await;
}

#[tokio::test]
async fn kubeconfig_skips_tls_verification_and_kube_client_uses_it() {
    let sim = start(SimConfig::default()).await;
    let yaml = sim.kubeconfig_yaml();
    let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let cluster = kc.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(cluster.insecure_skip_tls_verify, Some(true));
    assert_eq!(cluster.server.as_deref(), Some(sim.url().as_str()));
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let c = kube::Client::try_from(cfg).unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(c);
    assert!(api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty());
    sim.shutdown().await;
}
