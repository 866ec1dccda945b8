//! Shared informers against apisim: one informer per resource shared by every
//! listener, started by the first and stopped after the last; the CacheView;
//! CRDs through discovery; and I6 (a listener added mid-churn gets the replay
//! then live events, no gap, no duplicate, checked by resourceVersion).

use crate::informer_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use apisim::workload::WorkloadConfig;
use apisim::SimConfig;
use informer_support::*;
use kube_informer::cache_view::{CacheError, CacheView};
use kube_informer::indexer::IndexSpec;
use kube_informer::notification::{EventKind, NotificationRef};
use kube_informer::HandlerOptions;
use kube_informer::{InformerConfig, InformerError, InformerRegistry};
use serde_json::json;

fn lcfg(name: &str) -> HandlerOptions {
    HandlerOptions {
        name: name.into(),
        queue_capacity: 1 << 20,
        ..HandlerOptions::default()
    }
}

async fn registry(sim: &apisim::RunningSim, seed: u64) -> Arc<InformerRegistry> {
    InformerRegistry::new(
        client(sim).await,
        InformerConfig {
            reflector: fast_reflector(seed),
            ..InformerConfig::default()
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_shares_one_informer_and_stops_it_after_the_last_listener() {
    let (sim, _wl) = sim_with_pods(60, 11, SimConfig::default()).await;
    let reg = registry(&sim, 11).await;
    let (ra, view_a) = ViewRecorder::new(None);
    let (rb, view_b) = ViewRecorder::new(None);
    let a = reg.add_handler("v1/pods", ra, lcfg("a")).await.unwrap();
    let mut cb = lcfg("b");
    cb.namespace = Some("ns-1".into());
    let b = reg.add_handler("v1/pods", rb, cb).await.unwrap();
    eventually("both listeners synced", 60, || {
        a.has_synced() && b.has_synced()
    })
    .await;
    assert_eq!(reg.resources(), vec!["v1/pods".to_string()]);
    eventually("one watch", 30, || sim.faults().open_watches() == 1).await;
    let inf = reg.informer("v1/pods").unwrap();
    assert_eq!(inf.stats().lists, 1, "two listeners share one list");
    assert_eq!(
        inf.stats().reflector.watches,
        1,
        "two listeners share one watch"
    );
    drop(inf);

    let server = server_pods(&sim);
    assert_eq!(view_a.lock().state, server);
    let ns1: BTreeMap<String, u64> = server
        .iter()
        .filter(|(k, _)| k.starts_with("ns-1/"))
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    assert!(!ns1.is_empty());
    assert_eq!(
        view_b.lock().state,
        ns1,
        "namespace-filtered listener sees only ns-1"
    );

    // CacheView.
    let key = server.keys().next().unwrap().clone();
    assert_eq!(reg.get("v1/pods", &key).unwrap().unwrap().key(), key);
    assert!(reg.get("v1/pods", "nope/nope").unwrap().is_none());
    assert_eq!(
        reg.list("v1/pods", Some("ns-1"), None).unwrap().len(),
        ns1.len()
    );
    let web = reg.list("v1/pods", None, Some("app=web")).unwrap();
    assert!(web.iter().all(|o| o.meta.labels.get("app") == Some("web")));
    let not_web = reg.list("v1/pods", None, Some("app!=web")).unwrap();
    assert_eq!(web.len() + not_web.len(), server.len());
    assert_eq!(
        reg.by_index("v1/pods", "namespace", "ns-1").unwrap().len(),
        ns1.len()
    );
    assert!(reg.has_synced("v1/pods").unwrap());
    assert!(matches!(
        reg.get("v1/nodes", "x"),
        Err(CacheError::UnknownResource(_))
    ));
    assert!(matches!(
        reg.list("v1/pods", None, Some("app in (")),
        Err(CacheError::InvalidSelector(_))
    ));
    assert!(matches!(
        reg.by_index("v1/pods", "node", "x"),
        Err(CacheError::UnknownIndex(_))
    ));
    reg.add_index("v1/pods", IndexSpec::new("node", "spec.nodeName"))
        .unwrap();
    let all = reg.list("v1/pods", None, None).unwrap();
    let node = {
        let v: serde_json::Value = serde_json::from_str(&all[0].json()).unwrap();
        v["spec"]["nodeName"].as_str().unwrap().to_string()
    };
    let by_node = reg.by_index("v1/pods", "node", &node).unwrap();
    let expect = all
        .iter()
        .filter(|o| {
            serde_json::from_str::<serde_json::Value>(&o.json()).unwrap()["spec"]["nodeName"]
                == node.as_str()
        })
        .count();
    assert_eq!(by_node.len(), expect);
    assert!(expect > 0);

    // Stats are readable.
    let stats = reg.stats();
    assert_eq!(stats["v1/pods"].objects, server.len() as u64);
    assert_eq!(a.stats().snapshot().added, server.len() as u64);
    assert_eq!(
        a.stats().latency.count(),
        server.len() as u64,
        "one latency sample per handled event"
    );
    assert!(a.stats().snapshot().latency_p99_us >= a.stats().snapshot().latency_p50_us);

    drop(a);
    assert_eq!(
        reg.resources(),
        vec!["v1/pods".to_string()],
        "still used by b"
    );
    b.remove();
    assert!(
        reg.resources().is_empty(),
        "stopped after the last listener"
    );
    eventually("watch closed", 30, || sim.faults().open_watches() == 0).await;
    assert!(matches!(
        reg.get("v1/pods", &key),
        Err(CacheError::UnknownResource(_))
    ));

    // The next listener starts a fresh informer and gets the replay.
    let (rc, view_c) = ViewRecorder::new(None);
    let c = reg.add_handler("v1/pods", rc, lcfg("c")).await.unwrap();
    eventually("c synced", 60, || c.has_synced()).await;
    assert_eq!(view_c.lock().state, server_pods(&sim));
    reg.stop_all();
    assert!(reg.resources().is_empty());
    eventually("watch closed after stop_all", 30, || {
        sim.faults().open_watches() == 0
    })
    .await;
    drop(c); // releasing after stop_all is harmless
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_resolves_crds_through_discovery_and_rejects_unknown_resources() {
    let (sim, _wl) = sim_with_pods(1, 12, SimConfig::default()).await;
    let store = sim.store();
    store
        .create(
            store.rid("apiextensions.k8s.io/v1", "customresourcedefinitions"),
            None,
            json!({
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": "widgets.example.com"},
                "spec": {
                    "group": "example.com",
                    "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
                }
            }),
        )
        .unwrap();
    let wid = store.rid("example.com/v1", "widgets");
    store
        .create(
            wid,
            Some("ns-0"),
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1", "namespace": "ns-0"}, "spec": {"size": 3}}),
        )
        .unwrap();
    let reg = registry(&sim, 12).await;
    let (rw, view) = ViewRecorder::new(None);
    let h = reg
        .add_handler("example.com/v1/widgets", rw, lcfg("w"))
        .await
        .unwrap();
    eventually("widget synced", 60, || h.has_synced()).await;
    assert_eq!(
        view.lock().state.keys().cloned().collect::<Vec<_>>(),
        vec!["ns-0/w1".to_string()]
    );
    let inf = reg.informer("example.com/v1/widgets").unwrap();
    assert!(inf.spec().namespaced);
    assert_eq!(inf.spec().kind, "Widget");
    assert_eq!(inf.spec().collection_path(), "/apis/example.com/v1/widgets");

    let err = reg
        .add_handler(
            "example.com/v1/gadgets",
            ViewRecorder::new(None).0,
            lcfg("g"),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, InformerError::Resource(_)));
    assert!(err.to_string().contains("example.com/v1/gadgets"), "{err}");
    let err = reg
        .add_handler("pods", ViewRecorder::new(None).0, lcfg("g"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("\"pods\""), "{err}");
    let mut bad = lcfg("bad");
    bad.label_selector = Some("app in (".into());
    let err = reg
        .add_handler("v1/pods", ViewRecorder::new(None).0, bad)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("bad") && err.to_string().contains("label_selector"),
        "{err}"
    );
    assert_eq!(
        reg.resources(),
        vec!["example.com/v1/widgets".to_string()],
        "failed adds start nothing"
    );
}

fn ident(n: &NotificationRef) -> (String, u64, EventKind) {
    (
        n.key.to_string(),
        n.object.meta.resource_version.parse().unwrap(),
        n.kind,
    )
}

/// I6 against a live server: a listener added mid-churn receives the cache as
/// `in_initial_list` adds, then exactly the events that followed its snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i6_listener_added_mid_churn_gets_replay_then_live_without_gap_or_duplicate() {
    let sim = apisim::Sim::new(SimConfig::default());
    let wl = apisim::workload::Workload::seed(sim.store().clone(), WorkloadConfig::new(300, 4, 13))
        .unwrap();
    let sim = sim.start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let inf = pods_informer(&sim, fast_reflector(13)).await;
    let (rr, reference) = ViewRecorder::new(None);
    let _r = inf.add_handler(rr, lcfg("reference")).unwrap();
    assert!(inf.wait_synced(Duration::from_secs(60)).await);

    let churn = wl.churn(400.0);
    eventually("churn under way", 30, || churn.ops() > 200).await;
    let (rl, late_view) = ViewRecorder::new(None);
    let late = inf.add_handler(rl, lcfg("late")).unwrap();
    let at = churn.ops();
    eventually("more churn after subscribing", 30, || {
        churn.ops() > at + 300
    })
    .await;
    churn.stop().await;
    eventually("cache converged", 60, || {
        cache_state(inf.indexer()) == server_pods(&sim)
    })
    .await;
    eventually("late listener caught up", 60, || {
        late_view.lock().state == server_pods(&sim)
    })
    .await;
    eventually("reference caught up", 60, || {
        reference.lock().state == server_pods(&sim)
    })
    .await;
    assert!(late.has_synced());

    let reference = reference.lock().log.clone();
    let late_log = late_view.lock().log.clone();
    let split = late_log
        .iter()
        .position(|n| !n.in_initial_list)
        .expect("live events after the replay");
    let (replay, live) = late_log.split_at(split);
    assert!(replay.iter().all(|n| n.kind == EventKind::Added));
    assert!(
        live.iter().all(|n| !n.in_initial_list),
        "replay item after a live event"
    );
    let replay_state: BTreeMap<String, u64> =
        replay.iter().map(|n| (ident(n).0, ident(n).1)).collect();
    assert_eq!(
        replay_state.len(),
        replay.len(),
        "duplicate key in the replay"
    );

    let first = ident(&live[0]);
    let pos = reference
        .iter()
        .position(|n| ident(n) == first)
        .expect("first live event in reference");
    let mut before = RecordedView::default();
    for n in &reference[..pos] {
        before.apply(n);
    }
    assert_eq!(
        replay_state, before.state,
        "replay != state just before the first live event"
    );
    let want: Vec<_> = reference[pos..].iter().map(ident).collect();
    let got: Vec<_> = live.iter().map(ident).collect();
    assert_eq!(
        got.len(),
        want.len(),
        "gap or duplicate between replay and live"
    );
    assert_eq!(got, want);
    eprintln!(
        "I6: replay {} objects, then {} live events",
        replay.len(),
        live.len()
    );
}
