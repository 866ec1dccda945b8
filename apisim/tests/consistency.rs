//! Consistency under concurrent writes: watches deliver every change once, in resourceVersion
//! order, and paged lists read one snapshot even while the store changes between pages.

use crate::common;
use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;

use apisim::{ListRequest, ListVersion, SimConfig, Store, Subresource};
use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use serde_json::json;
use support::*;

/// Deterministic mixed writes on configmaps in `ns`.
fn writer(store: Arc<Store>, ns: &'static str, ops: usize) {
    let cms = store.rid("v1", "configmaps");
    for i in 0..ops {
        let name = format!("w-{}", i % 50);
        match i % 3 {
            0 => {
                let _ = store.create(
                    cms,
                    Some(ns),
                    configmap(&name, ns, json!({"i": i.to_string()})),
                );
            }
            1 => {
                let _ = store.update_with(cms, ns, &name, Subresource::Main, |mut v| {
                    v["data"]["k"] = json!(i.to_string());
                    Ok(v)
                });
            }
            _ => {
                if i % 2 == 0 {
                    let _ = store.delete(cms, ns, &name, None);
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_sees_every_change_in_order_under_concurrent_writes() {
    let sim = start(SimConfig::default()).await;
    let store = sim.store().clone();
    store.create_namespace("busy").unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client(&sim), "busy");
    let start_rv = store.current_rv();
    let mut s = api
        .watch(&WatchParams::default().timeout(300), &start_rv.to_string())
        .await
        .unwrap()
        .boxed();
    let (a, b) = (store.clone(), store.clone());
    let w1 = std::thread::spawn(move || writer(a, "busy", 3000));
    let w2 = std::thread::spawn(move || writer(b, "default", 3000));
    w1.join().unwrap();
    w2.join().unwrap();
    let end_rv = store.current_rv();

    let expected: BTreeMap<String, String> = store
        .list(
            store.rid("v1", "configmaps"),
            &ListRequest::all(Some("busy")),
        )
        .unwrap()
        .items
        .iter()
        .map(|o| (o.name.clone(), o.rv.to_string()))
        .collect();
    let expected_changes = store
        .changes_since(start_rv, usize::MAX)
        .unwrap()
        .iter()
        .filter(|c| c.object.namespace == "busy" && c.object.name.starts_with("w-"))
        .count();

    let mut state = BTreeMap::new();
    let mut last = start_rv;
    let mut changes = 0;
    tokio::time::timeout(PATIENCE, async {
        while last < end_rv {
            let ev = s.try_next().await.unwrap().expect("stream stays open");
            let (obj, deleted) = match ev {
                WatchEvent::Added(o) | WatchEvent::Modified(o) => (o, false),
                WatchEvent::Deleted(o) => (o, true),
                WatchEvent::Bookmark(b) => {
                    last = b.metadata.resource_version.parse().unwrap();
                    continue;
                }
                WatchEvent::Error(e) => panic!("watch error {e:?}"),
            };
            let rv: u64 = obj
                .metadata
                .resource_version
                .clone()
                .unwrap()
                .parse()
                .unwrap();
            assert!(
                rv > last,
                "resourceVersions must increase: {rv} after {last}"
            );
            last = rv;
            changes += 1;
            let name = obj.metadata.name.unwrap();
            if deleted {
                state.remove(&name);
            } else {
                state.insert(name, rv.to_string());
            }
            if rv == end_rv {
                break;
            }
        }
    })
    .await
    .expect("watch caught up");
    if last < end_rv {
        panic!("watch stopped at {last}, expected {end_rv}");
    }
    assert_eq!(
        changes, expected_changes,
        "each change of the namespace exactly once"
    );
    assert_eq!(state, expected);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paged_list_is_one_snapshot_while_writes_continue() {
    let sim = start(SimConfig::default()).await;
    let store = sim.store().clone();
    let cms = store.rid("v1", "configmaps");
    seed_configmaps(&store, "default", (0..400).map(|i| format!("w-{i:03}")));
    let api: Api<ConfigMap> = Api::namespaced(client(&sim), "default");
    let mut lp = ListParams::default().limit(37);
    let mut got = Vec::new();
    let mut snapshot = None;
    let mut round = 0;
    loop {
        let l = api.list(&lp).await.unwrap();
        let rv = l.metadata.resource_version.clone().unwrap();
        assert_eq!(
            *snapshot.get_or_insert(rv.clone()),
            rv,
            "every page reports the snapshot RV"
        );
        got.extend(l.items.into_iter().map(|c| {
            (
                c.metadata.name.unwrap(),
                c.metadata.resource_version.unwrap(),
            )
        }));
        // Write between pages.
        writer(store.clone(), "default", 40 + round);
        round += 1;
        match l.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => lp = lp.continue_token(&c),
            None => break,
        }
    }
    let rv: u64 = snapshot.unwrap().parse().unwrap();
    let mut req = ListRequest::all(Some("default"));
    req.version = ListVersion::Exact(rv);
    let expected: Vec<(String, String)> = store
        .list(cms, &req)
        .unwrap()
        .items
        .iter()
        .map(|o| (o.name.clone(), o.rv.to_string()))
        .collect();
    assert_eq!(got, expected);
    assert_eq!(got.len(), 400);
    assert_ne!(
        store.current_rv(),
        rv,
        "the store did change during the list"
    );
    sim.shutdown().await;
}
