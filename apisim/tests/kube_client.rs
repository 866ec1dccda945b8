//! kube-client and kube-runtime against the simulator: paged list + watch, bookmarks, timeouts,
//! streaming lists, 410 handling, conflicts and selector translation.

use crate::common;
use crate::support;

use std::time::Duration;

use apisim::SimConfig;
use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube_runtime::watcher;
use serde_json::json;
use support::*;

#[tokio::test]
async fn paged_list_then_watch_with_kube_runtime_watcher() {
    let sim = start(SimConfig::default()).await;
    let store = sim.store().clone();
    let cms = store.rid("v1", "configmaps");
    seed_configmaps(&store, "default", (0..1234).map(|i| format!("cm-{i:04}")));
    let list_rv = store.current_rv();
    let api: Api<ConfigMap> = Api::namespaced(client(&sim), "default");
    let Reflected { reader, task } = reflect(api, watcher::Config::default(), true);
    ready(&reader).await;
    assert_eq!(reader.state().len(), 1234);

    let path = "/api/v1/namespaces/default/configmaps";
    let lists: Vec<_> = sim
        .request_log()
        .for_path(path)
        .into_iter()
        .filter(|r| !r.is_watch())
        .collect();
    assert_eq!(lists.len(), 3, "1234 objects in pages of 500: {lists:?}");
    assert!(lists
        .iter()
        .all(|r| r.param("limit").as_deref() == Some("500")));
    assert!(lists[0].param("continue").is_none());
    assert!(lists[1].param("continue").is_some() && lists[2].param("continue").is_some());

    let log = sim.request_log().clone();
    eventually("watch from the list resourceVersion", || {
        let log = log.clone();
        async move {
            log.for_path(path).iter().any(|r| {
                r.is_watch()
                    && r.param("resourceVersion") == Some(list_rv.to_string())
                    && r.param("allowWatchBookmarks").as_deref() == Some("true")
            })
        }
    })
    .await;

    // Live changes made by another client reach the reflector.
    store
        .create(
            cms,
            Some("default"),
            configmap("fresh", "default", json!({})),
        )
        .unwrap();
    store.delete(cms, "default", "cm-0000", None).unwrap();
    store
        .update_with(
            cms,
            "default",
            "cm-0001",
            apisim::Subresource::Main,
            |mut v| {
                v["data"]["k"] = json!("changed");
                Ok(v)
            },
        )
        .unwrap();
    let r = reader.clone();
    eventually("reflector sees create, delete and update", || {
        let r = r.clone();
        async move {
            let names: Vec<String> = r
                .state()
                .iter()
                .map(|c| c.metadata.name.clone().unwrap())
                .collect();
            let updated = r.state().iter().any(|c| {
                c.metadata.name.as_deref() == Some("cm-0001")
                    && c.data.as_ref().unwrap()["k"] == "changed"
            });
            names.contains(&"fresh".to_string())
                && !names.contains(&"cm-0000".to_string())
                && updated
        }
    })
    .await;
    assert_eq!(reader.state().len(), 1234);
    task.abort();
    sim.shutdown().await;
}

#[tokio::test]
async fn bookmarks_advance_and_timeout_closes_cleanly() {
    let sim = start(SimConfig {
        bookmark_interval: Duration::from_millis(200),
        ..SimConfig::default()
    })
    .await;
    let store = sim.store().clone();
    let api: Api<ConfigMap> = Api::namespaced(client(&sim), "default");
    let rv = store.current_rv();
    let mut s = api
        .watch(&WatchParams::default().timeout(60), &rv.to_string())
        .await
        .unwrap()
        .boxed();
    // A write to another resource advances the global resourceVersion; bookmarks carry it.
    store.create_namespace("elsewhere").unwrap();
    let target = store.current_rv();
    let got = tokio::time::timeout(PATIENCE, async {
        while let Some(ev) = s.try_next().await.unwrap() {
            match ev {
                WatchEvent::Bookmark(b) => {
                    let brv: u64 = b.metadata.resource_version.parse().unwrap();
                    assert!(brv <= store.current_rv());
                    if brv >= target {
                        return brv;
                    }
                }
                other => panic!("unexpected event {other:?}"),
            }
        }
        panic!("stream ended before a bookmark");
    })
    .await
    .unwrap();
    assert_eq!(got, target);

    // Without allowWatchBookmarks there are none, and timeoutSeconds ends the stream cleanly.
    let s = api
        .watch(
            &WatchParams::default().disable_bookmarks().timeout(1),
            &store.current_rv().to_string(),
        )
        .await
        .unwrap();
    let events: Vec<_> = tokio::time::timeout(PATIENCE, s.collect::<Vec<_>>())
        .await
        .unwrap();
    assert!(events.is_empty(), "no events expected, got {events:?}");
    sim.shutdown().await;
}

#[tokio::test]
async fn streaming_list_sends_initial_events_end_bookmark() {
    let sim = start(SimConfig::default()).await;
    let store = sim.store().clone();
    seed_configmaps(&store, "default", (0..30).map(|i| format!("s{i}")));
    let api: Api<ConfigMap> = Api::namespaced(client(&sim), "default");
    // Raw: ADDED for every object, then the initial-events-end bookmark at the snapshot RV.
    let mut s = api
        .watch(&WatchParams::default().initial_events().timeout(30), "0")
        .await
        .unwrap()
        .boxed();
    let mut added = 0;
    let snapshot = store.current_rv();
    loop {
        match next_event(&mut s).await {
            WatchEvent::Added(_) => added += 1,
            WatchEvent::Bookmark(b) => {
                assert_eq!(
                    b.metadata
                        .annotations
                        .get("k8s.io/initial-events-end")
                        .map(String::as_str),
                    Some("true")
                );
                assert_eq!(b.metadata.resource_version, snapshot.to_string());
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(added, 30);

    // kube-runtime's streaming-list watcher converges.
    let Reflected { reader, task } =
        reflect(api, watcher::Config::default().streaming_lists(), false);
    ready(&reader).await;
    assert_eq!(reader.state().len(), 30);
    let streaming = sim.request_log().entries().into_iter().any(|r| {
        r.param("sendInitialEvents").as_deref() == Some("true")
            && r.param("resourceVersionMatch").as_deref() == Some("NotOlderThan")
    });
    assert!(streaming);
    task.abort();
    sim.shutdown().await;
}

#[tokio::test]
async fn watch_from_compacted_rv_is_200_with_error_410() {
    let sim = start(SimConfig::default()).await;
    let store = sim.store().clone();
    let old = store.current_rv();
    store.create_namespace("a").unwrap();
    sim.faults().compact();
    let api: Api<ConfigMap> = Api::namespaced(client(&sim), "default");
    let mut s = api
        .watch(&WatchParams::default(), &old.to_string())
        .await
        .unwrap()
        .boxed();
    match next_event(&mut s).await {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
            assert_eq!(
                e.message,
                format!("too old resource version: {old} ({})", store.current_rv())
            );
        }
        other => panic!("expected ERROR 410, got {other:?}"),
    }
    assert!(tokio::time::timeout(PATIENCE, s.try_next())
        .await
        .unwrap()
        .unwrap()
        .is_none());

    // Exact list at a compacted RV, and expired continue tokens, are HTTP 410.
    seed_configmaps(&store, "default", (0..5).map(|i| format!("c{i}")));
    let page1 = api.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(page1.items.len(), 2);
    assert_eq!(page1.metadata.remaining_item_count, Some(3));
    sim.faults().expire_continue_tokens();
    let tok = page1.metadata.continue_.clone().unwrap();
    let err = api
        .list(&ListParams::default().limit(2).continue_token(&tok))
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 410);
            assert_eq!(s.reason, "Expired");
            assert!(s
                .message
                .starts_with("The provided continue parameter is too old"));
        }
        other => panic!("expected 410, got {other:?}"),
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn conflicts_and_status_errors() {
    let sim = start(SimConfig::default()).await;
    let api: Api<ConfigMap> = Api::namespaced(client(&sim), "default");
    let cm: ConfigMap = serde_json::from_value(configmap("x", "default", json!({}))).unwrap();
    let created = api.create(&PostParams::default(), &cm).await.unwrap();
    assert_eq!(
        created.metadata.generation, None,
        "configmaps keep no generation"
    );
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    let mut stale = created.clone();
    let mut fresh = created.clone();
    fresh.data = Some([("k".to_string(), "1".to_string())].into());
    let updated = api
        .replace("x", &PostParams::default(), &fresh)
        .await
        .unwrap();
    assert_ne!(
        updated.metadata.resource_version,
        created.metadata.resource_version
    );
    stale.data = Some([("k".to_string(), "2".to_string())].into());
    match api
        .replace("x", &PostParams::default(), &stale)
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert_eq!(s.reason, "Conflict");
            assert_eq!(
                s.message,
                "Operation cannot be fulfilled on configmaps \"x\": the object has been modified; please apply your changes to the latest version and try again"
            );
        }
        other => panic!("expected 409, got {other:?}"),
    }
    match api.create(&PostParams::default(), &cm).await.unwrap_err() {
        kube::Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists")),
        other => panic!("expected 409 AlreadyExists, got {other:?}"),
    }
    let nowhere: Api<ConfigMap> = Api::namespaced(client(&sim), "nowhere");
    let mut elsewhere = cm.clone();
    elsewhere.metadata.namespace = None;
    match nowhere
        .create(&PostParams::default(), &elsewhere)
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 404);
            assert_eq!(s.message, "namespaces \"nowhere\" not found");
        }
        other => panic!("expected 404, got {other:?}"),
    }
    // DELETE of a configmap answers a Success Status naming it (the registry does not return
    // deleted configmaps).
    let deleted = api.delete("x", &Default::default()).await.unwrap();
    let status = deleted.right().expect("a Status");
    assert_eq!(
        status.status,
        Some(kube::core::response::StatusSummary::Success)
    );
    assert_eq!(status.details.unwrap().uid, created.metadata.uid.unwrap());
    sim.shutdown().await;
}

fn name_of(ev: &WatchEvent<ConfigMap>) -> (String, String) {
    match ev {
        WatchEvent::Added(c) => ("ADDED".into(), c.metadata.name.clone().unwrap()),
        WatchEvent::Modified(c) => ("MODIFIED".into(), c.metadata.name.clone().unwrap()),
        WatchEvent::Deleted(c) => ("DELETED".into(), c.metadata.name.clone().unwrap()),
        WatchEvent::Bookmark(_) => ("BOOKMARK".into(), String::new()),
        WatchEvent::Error(e) => ("ERROR".into(), e.message.clone()),
    }
}

#[tokio::test]
async fn label_selector_watch_translates_moves() {
    let sim = start(SimConfig::default()).await;
    let api: Api<ConfigMap> = Api::namespaced(client(&sim), "default");
    let rv = sim.store().current_rv();
    let mut s = api
        .watch(
            &WatchParams::default()
                .labels("team in (a),!legacy")
                .disable_bookmarks(),
            &rv.to_string(),
        )
        .await
        .unwrap()
        .boxed();
    let pp = PostParams::default();
    let mk = |n: &str, team: &str| {
        serde_json::from_value::<ConfigMap>(configmap(n, "default", json!({"team": team}))).unwrap()
    };
    api.create(&pp, &mk("x", "a")).await.unwrap();
    api.create(&pp, &mk("y", "b")).await.unwrap();
    let label = |team: &str| Patch::Merge(json!({"metadata":{"labels":{"team":team}}}));
    api.patch("y", &PatchParams::default(), &label("a"))
        .await
        .unwrap();
    api.patch(
        "x",
        &PatchParams::default(),
        &Patch::Merge(json!({"data":{"k":"2"}})),
    )
    .await
    .unwrap();
    let moved_out = api
        .patch("x", &PatchParams::default(), &label("b"))
        .await
        .unwrap();
    api.delete("y", &Default::default()).await.unwrap();
    api.delete("x", &Default::default()).await.unwrap();
    let mut got = Vec::new();
    let mut deleted_x_rv = None;
    while got.len() < 5 {
        let ev = next_event(&mut s).await;
        if let WatchEvent::Deleted(c) = &ev {
            if c.metadata.name.as_deref() == Some("x") {
                deleted_x_rv = c.metadata.resource_version.clone();
                assert_eq!(
                    c.metadata.labels.as_ref().unwrap()["team"],
                    "a",
                    "DELETED carries the previous content"
                );
            }
        }
        got.push(name_of(&ev));
    }
    let expected: Vec<(String, String)> = [
        ("ADDED", "x"),
        ("ADDED", "y"),
        ("MODIFIED", "x"),
        ("DELETED", "x"),
        ("DELETED", "y"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(got, expected);
    assert_eq!(
        deleted_x_rv, moved_out.metadata.resource_version,
        "DELETED has the move's RV"
    );

    // List with label selectors.
    api.create(&pp, &mk("p", "a")).await.unwrap();
    api.create(&pp, &mk("q", "c")).await.unwrap();
    let l = api
        .list(&ListParams::default().labels("team notin (a)"))
        .await
        .unwrap();
    assert_eq!(
        l.items
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect::<Vec<_>>(),
        vec!["q"]
    );
    let l = api
        .list(&ListParams::default().labels("team"))
        .await
        .unwrap();
    assert_eq!(l.items.len(), 2);
    match api
        .list(&ListParams::default().labels("team in ("))
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => assert_eq!(s.code, 400),
        other => panic!("expected 400, got {other:?}"),
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn field_selectors_on_name_namespace_and_node() {
    let sim = start(SimConfig::default()).await;
    let store = sim.store().clone();
    let pods = store.rid("v1", "pods");
    store.create_namespace("other").unwrap();
    for (ns, name, node) in [
        ("default", "a", "n1"),
        ("default", "b", "n2"),
        ("other", "c", "n1"),
    ] {
        store
            .create(pods, Some(ns), json!({"metadata":{"name":name},"spec":{"nodeName":node,"containers":[{"name":"c","image":"i"}]}}))
            .unwrap();
    }
    let all: Api<Pod> = Api::all(client(&sim));
    let names = |l: kube::api::ObjectList<Pod>| {
        l.items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(
            all.list(&ListParams::default().fields("spec.nodeName=n1"))
                .await
                .unwrap()
        ),
        vec!["a", "c"]
    );
    assert_eq!(
        names(
            all.list(&ListParams::default().fields("metadata.namespace=other"))
                .await
                .unwrap()
        ),
        vec!["c"]
    );
    assert_eq!(
        names(
            all.list(&ListParams::default().fields("metadata.name!=a,spec.nodeName==n1"))
                .await
                .unwrap()
        ),
        vec!["c"]
    );
    match all
        .list(&ListParams::default().fields("spec.bogus=1"))
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 400);
            assert!(s.message.contains("spec.bogus"));
        }
        other => panic!("expected 400, got {other:?}"),
    }

    // A field-selected watch sees a pod move into the selection as ADDED and out of it as
    // DELETED. (A pod's spec.nodeName cannot change by an update, so its phase moves.)
    let mut s = all
        .watch(
            &WatchParams::default()
                .fields("status.phase=Running")
                .disable_bookmarks(),
            &store.current_rv().to_string(),
        )
        .await
        .unwrap()
        .boxed();
    for phase in ["Running", "Succeeded"] {
        store
            .update_with(
                pods,
                "default",
                "a",
                apisim::Subresource::Status,
                |mut v| {
                    v["status"]["phase"] = json!(phase);
                    Ok(v)
                },
            )
            .unwrap();
    }
    let mut kinds = Vec::new();
    for _ in 0..2 {
        match next_event(&mut s).await {
            WatchEvent::Added(p) => kinds.push(("ADDED", p.metadata.name.unwrap())),
            WatchEvent::Deleted(p) => kinds.push(("DELETED", p.metadata.name.unwrap())),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        kinds,
        vec![("ADDED", "a".to_string()), ("DELETED", "a".to_string())]
    );

    // kube-runtime's watcher with a name field selector (as kubectl delete --wait uses).
    let api: Api<Pod> = Api::namespaced(client(&sim), "default");
    let Reflected { reader, task } = reflect(
        api,
        watcher::Config::default().fields("metadata.name=b"),
        false,
    );
    ready(&reader).await;
    assert_eq!(reader.state().len(), 1);
    store.delete(pods, "default", "b", None).unwrap();
    let r = reader.clone();
    eventually("the watched pod's deletion", || {
        let r = r.clone();
        async move { r.state().is_empty() }
    })
    .await;
    task.abort();
    sim.shutdown().await;
}
