//! Reflector semantics against apisim, one test per semantic (design.md
//! "Reflector semantics"; I8 for the 410 and error paths).

use crate::informer_support;

use std::time::Duration;

use apisim::SimConfig;
use informer_support::*;
use kube_informer::notification::EventKind;
use kube_informer::reflector::{ReflectorConfig, StreamingList, WaitReason};
use kube_informer::HandlerOptions;

/// How long a wait on the simulator's state may take on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(60);

fn paged(seed: u64) -> ReflectorConfig {
    ReflectorConfig {
        streaming_list: StreamingList::Off,
        ..fast_reflector(seed)
    }
}

fn list_requests(sim: &apisim::RunningSim) -> Vec<apisim::RequestRecord> {
    sim.request_log()
        .for_path("/api/v1/pods")
        .into_iter()
        .filter(|r| !r.is_watch())
        .collect()
}

fn watch_requests(sim: &apisim::RunningSim) -> Vec<apisim::RequestRecord> {
    sim.request_log()
        .for_path("/api/v1/pods")
        .into_iter()
        .filter(|r| r.is_watch())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_pages_lists_at_500() {
    let (sim, _wl) = sim_with_pods(1200, 1, SimConfig::default()).await;
    let inf = pods_informer(&sim, paged(1)).await;
    assert!(inf.wait_synced(Duration::from_secs(60)).await);
    let lists = list_requests(&sim);
    assert_eq!(lists.len(), 3, "1200 objects in pages of 500: {lists:?}");
    for r in &lists {
        assert_eq!(r.param("limit").as_deref(), Some("500"));
    }
    assert!(lists[0].param("continue").is_none());
    assert!(lists[1].param("continue").is_some_and(|c| !c.is_empty()));
    assert!(lists[2].param("continue").is_some_and(|c| !c.is_empty()));
    assert_eq!(inf.indexer().len(), 1200);
    assert_eq!(inf.stats().reflector.list_pages, 3);
    assert_eq!(cache_state(inf.indexer()), server_pods(&sim));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_first_list_uses_resource_version_0() {
    let (sim, _wl) = sim_with_pods(10, 2, SimConfig::default()).await;
    let inf = pods_informer(&sim, paged(2)).await;
    assert!(inf.wait_synced(Duration::from_secs(60)).await);
    let lists = list_requests(&sim);
    assert_eq!(lists[0].param("resourceVersion").as_deref(), Some("0"));
    assert_eq!(
        inf.stats().last_sync_resource_version,
        sim.store().current_rv().to_string(),
        "lastSyncResourceVersion is the list's RV"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_watch_parameters() {
    let (sim, _wl) = sim_with_pods(10, 3, SimConfig::default()).await;
    let inf = pods_informer(&sim, paged(3)).await;
    assert!(inf.wait_synced(Duration::from_secs(60)).await);
    eventually("a watch", 30, || !watch_requests(&sim).is_empty()).await;
    let list_rv = inf.stats().last_sync_resource_version;
    // Restart the watch a few times to see several random timeouts. Each drop
    // waits for a watch that is open (subscribed to the drop signal), and
    // counts as done once the simulator has closed it.
    for i in 0..4 {
        sim.faults().wait_open_watches(1, PATIENCE).await.unwrap();
        sim.faults().drop_watches();
        sim.faults()
            .wait_for("the watch dropped", PATIENCE, |s| {
                s.watches_dropped > i as u64
            })
            .await
            .unwrap();
        eventually("re-watch", 30, || watch_requests(&sim).len() > i + 1).await;
    }
    let watches = watch_requests(&sim);
    let mut timeouts = std::collections::BTreeSet::new();
    for w in &watches {
        assert_eq!(w.param("watch").as_deref(), Some("true"));
        assert_eq!(w.param("allowWatchBookmarks").as_deref(), Some("true"));
        assert_eq!(
            w.param("resourceVersion").as_deref(),
            Some(list_rv.as_str())
        );
        let t: u64 = w.param("timeoutSeconds").unwrap().parse().unwrap();
        assert!(
            (300..=600).contains(&t),
            "timeoutSeconds {t} outside [300, 600]"
        );
        timeouts.insert(t);
    }
    assert!(timeouts.len() > 1, "timeouts are not random: {timeouts:?}");
    assert_eq!(
        list_requests(&sim).len(),
        1,
        "a dropped watch never causes a relist"
    );
    assert!(inf.stats().watch_restarts >= 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_bookmark_advances_rv_without_delta() {
    let cfg = SimConfig {
        bookmark_interval: Duration::from_millis(100),
        ..SimConfig::default()
    };
    let (sim, _wl) = sim_with_pods(20, 4, cfg).await;
    let inf = pods_informer(&sim, paged(4)).await;
    assert!(inf.wait_synced(Duration::from_secs(60)).await);
    let (rec, view) = ViewRecorder::new(None);
    let _l = inf.add_handler(rec, HandlerOptions::default()).unwrap();
    eventually("replay", 30, || view.lock().state.len() == 20).await;
    let deltas_before = inf.stats().processor.deltas;
    let bookmarks_before = inf.stats().reflector.bookmarks;
    // Writes to another resource move the global RV; the pods watch sees only
    // bookmarks.
    for i in 0..5 {
        sim.store().create_namespace(&format!("extra-{i}")).unwrap();
    }
    let target = sim.store().current_rv().to_string();
    eventually("bookmark at the new RV", 30, || {
        inf.stats().last_sync_resource_version == target
    })
    .await;
    let s = inf.stats();
    assert!(s.reflector.bookmarks > bookmarks_before);
    assert_eq!(
        s.processor.deltas, deltas_before,
        "a bookmark produced a delta"
    );
    assert_eq!(view.lock().log.len(), 20, "a bookmark reached a listener");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_relists_after_410_with_deletes_for_vanished_objects() {
    let (sim, _wl) = sim_with_pods(50, 5, SimConfig::default()).await;
    let mut rc = paged(5);
    rc.backoff.initial = Duration::from_millis(200);
    rc.backoff.jitter = 0.0;
    let inf = pods_informer(&sim, rc).await;
    assert!(inf.wait_synced(Duration::from_secs(60)).await);
    let (rec, view) = ViewRecorder::new(None);
    let _l = inf.add_handler(rec, HandlerOptions::default()).unwrap();
    eventually("replay", 30, || view.lock().state.len() == 50).await;
    sim.faults().wait_open_watches(1, PATIENCE).await.unwrap();

    // Keep every re-watch failing while objects vanish and history is
    // compacted, so no watch can see the deletes and the next one gets a 410.
    sim.faults().fail_next_500(1_000_000);
    sim.faults().drop_watches();
    sim.faults()
        .wait_for("a re-watch refused", PATIENCE, |s| {
            s.failures_with(500) >= 1
        })
        .await
        .unwrap();
    let rid = sim.store().rid("v1", "pods");
    let victims: Vec<String> = server_pods(&sim).keys().take(7).cloned().collect();
    for k in &victims {
        let (ns, name) = k.split_once('/').unwrap();
        sim.store().delete(rid, ns, name, None).unwrap();
    }
    sim.faults().compact();
    sim.faults().reset();

    eventually("cache converges", 60, || {
        cache_state(inf.indexer()) == server_pods(&sim)
    })
    .await;
    let s = inf.stats();
    assert_eq!(s.relists_410, 1);
    assert_eq!(s.lists, 2);
    let lists = list_requests(&sim);
    assert_eq!(lists.len(), 2);
    assert!(
        lists[1].param("resourceVersion").is_none(),
        "relist after 410 must use resourceVersion \"\": {:?}",
        lists[1]
    );
    eventually("listener converges", 30, || {
        view.lock().state == server_pods(&sim)
    })
    .await;
    let v = view.lock();
    let deletes: Vec<_> = v
        .log
        .iter()
        .filter(|n| n.kind == EventKind::Deleted)
        .collect();
    assert_eq!(deletes.len(), 7);
    for d in deletes {
        assert!(
            d.final_state_unknown,
            "inferred delete must be final_state_unknown"
        );
        assert!(victims.contains(&d.key.to_string()));
    }
    assert!(v.anomalies.is_empty(), "{:?}", v.anomalies);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_non_410_errors_resume_watch_without_relist() {
    let (sim, mut wl) = sim_with_pods(50, 6, SimConfig::default()).await;
    let inf = pods_informer(&sim, paged(6)).await;
    assert!(inf.wait_synced(Duration::from_secs(60)).await);
    sim.faults().wait_open_watches(1, PATIENCE).await.unwrap();
    let list_rv: u64 = inf.stats().last_sync_resource_version.parse().unwrap();

    // 500s on the re-watch.
    sim.faults().fail_next_500(3);
    sim.faults().drop_watches();
    for _ in 0..20 {
        wl.step().unwrap();
    }
    eventually("cache converges after 500s", 60, || {
        cache_state(inf.indexer()) == server_pods(&sim)
    })
    .await;
    // A watch line cut in the middle.
    sim.faults().cut_next_watch_event();
    for _ in 0..20 {
        wl.step().unwrap();
    }
    eventually("cache converges after a cut line", 60, || {
        cache_state(inf.indexer()) == server_pods(&sim)
    })
    .await;
    let f = sim.faults().stats();
    assert_eq!(f.cuts_fired, 1, "the cut fired: {f:?}");
    assert_eq!(f.failures_with(500), 3, "the 500s fired: {f:?}");

    let s = inf.stats();
    assert_eq!(s.lists, 1, "non-410 errors must never relist");
    assert_eq!(s.relists_410, 0);
    assert!(s.reflector.errors >= 4, "{:?}", s.reflector);
    assert_eq!(list_requests(&sim).len(), 1);
    // Every re-watch resumed from a version at or after the list's.
    let watches = watch_requests(&sim);
    assert!(watches.len() >= 5);
    for w in &watches {
        let rv: u64 = w.param("resourceVersion").unwrap().parse().unwrap();
        assert!(rv >= list_rv, "watch from {rv} < list RV {list_rv}");
    }
    let waits = inf.reflector_stats().recent_waits();
    assert!(
        waits
            .iter()
            .filter(|(r, _)| *r == WaitReason::Backoff)
            .count()
            >= 4
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_expired_continue_token_relists() {
    let (sim, _wl) = sim_with_pods(1200, 7, SimConfig::default()).await;
    // The second page's continue token is answered 410 Expired.
    sim.faults().expire_next_continue(1);
    let inf = pods_informer(&sim, paged(7)).await;
    assert!(inf.wait_synced(Duration::from_secs(60)).await);
    assert_eq!(
        sim.faults().stats().continue_expiries,
        1,
        "the expiry fired"
    );
    let s = inf.stats();
    assert_eq!(s.relists_410, 1, "{:?}", s.reflector);
    let lists = list_requests(&sim);
    // page 1 (RV 0), page 2 (410), then a full relist with RV "".
    assert!(lists[2].param("resourceVersion").is_none() && lists[2].param("continue").is_none());
    assert_eq!(cache_state(inf.indexer()), server_pods(&sim));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_streaming_list_used_when_supported() {
    let (sim, _wl) = sim_with_pods(700, 8, SimConfig::default()).await;
    let inf = pods_informer(&sim, fast_reflector(8)).await;
    assert!(inf.wait_synced(Duration::from_secs(60)).await);
    let s = inf.stats();
    assert_eq!(s.reflector.streaming_lists, 1);
    assert_eq!(s.reflector.streaming_fallbacks, 0);
    assert!(
        list_requests(&sim).is_empty(),
        "no paged list when streaming works"
    );
    let w = &watch_requests(&sim)[0];
    assert_eq!(w.param("sendInitialEvents").as_deref(), Some("true"));
    assert_eq!(
        w.param("resourceVersionMatch").as_deref(),
        Some("NotOlderThan")
    );
    assert_eq!(w.param("allowWatchBookmarks").as_deref(), Some("true"));
    assert_eq!(w.param("resourceVersion").as_deref(), Some("0"));
    assert_eq!(cache_state(inf.indexer()), server_pods(&sim));
    assert_eq!(
        s.last_sync_resource_version,
        sim.store().current_rv().to_string()
    );
}

/// How a server without streaming lists answers `sendInitialEvents=true`.
#[derive(Clone, Copy, PartialEq)]
enum NoStreaming {
    /// 422, as an apiserver without the WatchList feature does.
    Refuse,
    /// A plain watch: ADDED events, then an ordinary bookmark.
    Ignore,
    /// ADDED events, then the stream ends.
    EndEarly,
}

/// A one-resource server without streaming lists, recording query strings.
async fn no_streaming_server(
    mode: NoStreaming,
) -> (String, std::sync::Arc<parking_lot::Mutex<Vec<String>>>) {
    use axum::body::Body;
    use axum::extract::RawQuery;
    use axum::http::StatusCode;
    use axum::response::Response;
    use futures::StreamExt;
    let log = std::sync::Arc::new(parking_lot::Mutex::new(Vec::<String>::new()));
    let log2 = log.clone();
    let pod = |name: &str, rv: u32| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}","managedFields":[{{"manager":"m"}}]}}}}"#
        )
    };
    let list = format!(
        r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"10"}},"items":[{},{}]}}"#,
        pod("a", 5),
        pod("b", 6)
    );
    let added = format!("{{\"type\":\"ADDED\",\"object\":{}}}\n", pod("a", 5));
    let app = axum::Router::new().route(
        "/api/v1/pods",
        axum::routing::get(move |RawQuery(q): RawQuery| {
            let q = q.unwrap_or_default();
            log2.lock().push(q.clone());
            let (list, added) = (list.clone(), added.clone());
            async move {
                let json = |code: StatusCode, body: Body| {
                    Response::builder()
                        .status(code)
                        .header("content-type", "application/json")
                        .body(body)
                        .unwrap()
                };
                if q.contains("sendInitialEvents=true") {
                    if mode == NoStreaming::Refuse {
                        return json(
                            StatusCode::UNPROCESSABLE_ENTITY,
                            Body::from(r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled","reason":"Invalid","code":422}"#),
                        );
                    }
                    if mode == NoStreaming::EndEarly {
                        return json(StatusCode::OK, Body::from(added));
                    }
                    let bookmark = "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"10\"}}}\n";
                    let lines = futures::stream::iter(vec![
                        Ok::<_, std::io::Error>(bytes::Bytes::from(added)),
                        Ok(bytes::Bytes::from_static(bookmark.as_bytes())),
                    ])
                    .chain(futures::stream::pending());
                    return json(StatusCode::OK, Body::from_stream(lines));
                }
                if q.contains("watch=true") {
                    let never = futures::stream::pending::<Result<bytes::Bytes, std::io::Error>>();
                    return json(StatusCode::OK, Body::from_stream(never));
                }
                json(StatusCode::OK, Body::from(list))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), log)
}

async fn fallback_case(mode: NoStreaming) {
    let (url, log) = no_streaming_server(mode).await;
    let attempts = if mode == NoStreaming::EndEarly { 3 } else { 1 };
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster:\n    server: {url}\ncontexts:\n- name: s\n  context:\n    cluster: s\n    user: u\ncurrent-context: s\nusers:\n- name: u\n  user: {{}}\n"
    );
    let client = kube_informer::reflector::client_from_kubeconfig_yaml(&yaml)
        .await
        .unwrap();
    let inf = kube_informer::informer::SharedInformer::start(
        client,
        kube_informer::resource::ResourceSpec::builtin("v1/pods")
            .unwrap()
            .unwrap(),
        kube_informer::informer::InformerConfig {
            reflector: fast_reflector(9),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(inf.wait_synced(Duration::from_secs(60)).await);
    let s = inf.stats();
    assert_eq!(s.reflector.streaming_fallbacks, 1);
    assert_eq!(s.reflector.streaming_lists, 0);
    assert_eq!(s.lists, 1);
    assert_eq!(s.last_sync_resource_version, "10");
    assert_eq!(inf.indexer().len(), 2);
    // Transform: managedFields stripped before caching.
    assert!(!inf
        .indexer()
        .get("ns/a")
        .unwrap()
        .json()
        .contains("managedFields"));
    eventually("watch after the paged list", 30, || {
        log.lock().len() > attempts + 1
    })
    .await;
    let log = log.lock().clone();
    for l in &log[..attempts] {
        assert!(l.contains("sendInitialEvents=true"), "{log:?}");
    }
    let (list, watch) = (&log[attempts], &log[attempts + 1]);
    assert!(
        list.contains("limit=500") && list.contains("resourceVersion=0"),
        "{log:?}"
    );
    assert!(
        watch.contains("watch=true") && watch.contains("resourceVersion=10"),
        "{log:?}"
    );
    assert_eq!(log.len(), attempts + 2, "fallback is remembered: {log:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_streaming_list_falls_back_when_refused() {
    fallback_case(NoStreaming::Refuse).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_streaming_list_falls_back_when_ignored() {
    fallback_case(NoStreaming::Ignore).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_streaming_list_retries_then_falls_back_when_it_keeps_ending_early() {
    fallback_case(NoStreaming::EndEarly).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_transform_strips_managed_fields_by_default() {
    let (sim, _wl) = sim_with_pods(20, 14, SimConfig::default()).await;
    let rid = sim.store().rid("v1", "pods");
    assert!(
        std::str::from_utf8(&sim.store().list_all(rid)[0].json)
            .unwrap()
            .contains("managedFields"),
        "workload pods carry managedFields"
    );
    let inf = pods_informer(&sim, paged(14)).await;
    assert!(inf.wait_synced(Duration::from_secs(60)).await);
    assert!(inf
        .indexer()
        .snapshot()
        .iter()
        .all(|o| !o.json().contains("managedFields")));
    let mut keep = paged(15);
    keep.transform.strip_managed_fields = false;
    let inf2 = pods_informer(&sim, keep).await;
    assert!(inf2.wait_synced(Duration::from_secs(60)).await);
    assert!(inf2
        .indexer()
        .snapshot()
        .iter()
        .all(|o| o.json().contains("managedFields")));
}

/// Item "a resourceVersion that goes backwards": the API server is replaced,
/// on the same address, by one holding a different and smaller state (an
/// etcd restore, or a lagging replica). The re-watch from our resourceVersion
/// is answered "Too large resource version" (an ERROR event with the 504
/// Status); the Reflector relists from resourceVersion "" and the informer,
/// and a handler's view, end with exactly the new server's objects: vanished
/// ones deleted (final-state-unknown), those whose resourceVersion went down
/// updated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_relists_when_the_server_is_replaced_by_a_smaller_one() {
    let cfg = SimConfig {
        too_large_rv_wait: Duration::from_millis(300),
        ..SimConfig::default()
    };
    let (sim, mut wl) = sim_with_pods(120, 40, cfg.clone()).await;
    for _ in 0..200 {
        wl.step().unwrap();
    }
    let inf = pods_informer(&sim, paged(40)).await;
    assert!(inf.wait_synced(Duration::from_secs(60)).await);
    let (rec, view) = ViewRecorder::new(None);
    let _l = inf.add_handler(rec, HandlerOptions::default()).unwrap();
    eventually("replay", 30, || view.lock().state == server_pods(&sim)).await;
    sim.faults().wait_open_watches(1, PATIENCE).await.unwrap();
    let old = server_pods(&sim);
    let old_rv = sim.store().current_rv();

    // The replacement: the same seed with fewer pods, so some keys come back
    // at a lower resourceVersion, and the rest are gone.
    let next = apisim::Sim::new(cfg);
    apisim::workload::Workload::seed(
        next.store().clone(),
        apisim::workload::WorkloadConfig::new(40, 4, 40),
    )
    .unwrap();
    assert!(next.store().current_rv() < old_rv);
    let sim = sim.replace(next).await.unwrap();
    let new = server_pods(&sim);
    let lowered: Vec<&String> = new
        .iter()
        .filter(|(k, rv)| old.get(*k).is_some_and(|o| o > rv))
        .map(|(k, _)| k)
        .collect();
    let vanished: Vec<&String> = old.keys().filter(|k| !new.contains_key(*k)).collect();
    assert!(!lowered.is_empty() && !vanished.is_empty());

    eventually("the cache is the new server's state", 60, || {
        cache_state(inf.indexer()) == new
    })
    .await;
    eventually("the handler's view is the new server's state", 60, || {
        view.lock().state == new
    })
    .await;
    let s = inf.stats();
    assert_eq!(s.reflector.relists_too_large, 1, "{:?}", s.reflector);
    assert_eq!(s.relists_410, 0);
    assert_eq!(
        s.last_sync_resource_version,
        sim.store().current_rv().to_string()
    );
    let relist = list_requests(&sim);
    assert_eq!(relist.len(), 1, "one relist on the new server: {relist:?}");
    assert!(
        relist[0].param("resourceVersion").is_none(),
        "the relist is a quorum read from resourceVersion \"\": {:?}",
        relist[0]
    );
    let v = view.lock();
    assert!(v.anomalies.is_empty(), "{:?}", v.anomalies);
    for k in &vanished {
        let d = v
            .log
            .iter()
            .rev()
            .find(|n| &*n.key == k.as_str())
            .unwrap_or_else(|| panic!("nothing for vanished {k}"));
        assert!(
            d.kind == EventKind::Deleted && d.final_state_unknown,
            "{k} ends with {:?} (final_state_unknown {})",
            d.kind,
            d.final_state_unknown
        );
    }
    for k in &lowered {
        let u = v.log.iter().rev().find(|n| &*n.key == k.as_str()).unwrap();
        assert_eq!(u.kind, EventKind::Updated, "{k}");
        assert_eq!(u.object.meta.resource_version, new[*k].to_string(), "{k}");
    }
}

/// How the one-resource server below breaks its watch.
#[derive(Clone, Copy, PartialEq)]
enum Backwards {
    /// The watch sends an event older than the list it follows.
    OlderEvent,
    /// The watch request is answered HTTP 504 "Too large resource version".
    TooLarge504,
}

/// A server whose first watch shows that its history went backwards; the
/// second list (from resourceVersion "") holds only `a`, at a lower
/// resourceVersion. Records query strings.
async fn backwards_server(
    mode: Backwards,
) -> (String, std::sync::Arc<parking_lot::Mutex<Vec<String>>>) {
    use axum::body::Body;
    use axum::extract::RawQuery;
    use axum::http::StatusCode;
    use axum::response::Response;
    use futures::StreamExt;
    let log = std::sync::Arc::new(parking_lot::Mutex::new(Vec::<String>::new()));
    let log2 = log.clone();
    let pod = |name: &str, rv: u32| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}}}}"#
        )
    };
    let first = format!(
        r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"10"}},"items":[{},{}]}}"#,
        pod("a", 8),
        pod("b", 9)
    );
    let second = format!(
        r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"6"}},"items":[{}]}}"#,
        pod("a", 5)
    );
    let older = format!("{{\"type\":\"MODIFIED\",\"object\":{}}}\n", pod("b", 4));
    let app = axum::Router::new().route(
        "/api/v1/pods",
        axum::routing::get(move |RawQuery(q): RawQuery| {
            let q = q.unwrap_or_default();
            let n = {
                let mut l = log2.lock();
                l.push(q.clone());
                l.len()
            };
            let (first, second, older) = (first.clone(), second.clone(), older.clone());
            async move {
                let json = |code: StatusCode, body: Body| {
                    Response::builder()
                        .status(code)
                        .header("content-type", "application/json")
                        .body(body)
                        .unwrap()
                };
                if q.contains("watch=true") {
                    // The first watch (request 2) breaks; later ones idle.
                    if n == 2 {
                        return match mode {
                            Backwards::OlderEvent => {
                                let lines = futures::stream::iter(vec![Ok::<_, std::io::Error>(
                                    bytes::Bytes::from(older),
                                )])
                                .chain(futures::stream::pending());
                                json(StatusCode::OK, Body::from_stream(lines))
                            }
                            Backwards::TooLarge504 => json(
                                StatusCode::GATEWAY_TIMEOUT,
                                Body::from(r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: Too large resource version: 10, current: 6","reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1},"code":504}"#),
                            ),
                        };
                    }
                    let never = futures::stream::pending::<Result<bytes::Bytes, std::io::Error>>();
                    return json(StatusCode::OK, Body::from_stream(never));
                }
                json(StatusCode::OK, Body::from(if n == 1 { first } else { second }))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), log)
}

async fn backwards_case(mode: Backwards) -> kube_informer::reflector::ReflectorStatsSnapshot {
    let (url, log) = backwards_server(mode).await;
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster:\n    server: {url}\ncontexts:\n- name: s\n  context:\n    cluster: s\n    user: u\ncurrent-context: s\nusers:\n- name: u\n  user: {{}}\n"
    );
    let client = kube_informer::reflector::client_from_kubeconfig_yaml(&yaml)
        .await
        .unwrap();
    let inf = kube_informer::informer::SharedInformer::start(
        client,
        kube_informer::resource::ResourceSpec::builtin("v1/pods")
            .unwrap()
            .unwrap(),
        kube_informer::informer::InformerConfig {
            reflector: paged(41),
            ..Default::default()
        },
    )
    .unwrap();
    // Subscribed before the first list completes: it gets that list, then
    // what the relist changed.
    let (rec, view) = ViewRecorder::new(None);
    let _l = inf.add_handler(rec, HandlerOptions::default()).unwrap();
    assert!(inf.wait_synced(Duration::from_secs(60)).await);
    let want: std::collections::BTreeMap<String, u64> = [("ns/a".to_string(), 5)].into();
    eventually("the cache is the second list", 30, || {
        cache_state(inf.indexer()) == want
    })
    .await;
    eventually("the view is the second list", 30, || {
        view.lock().state == want
    })
    .await;
    let log = log.lock().clone();
    assert!(log.len() >= 3, "{log:?}");
    assert!(log[0].contains("resourceVersion=0"), "{log:?}");
    assert!(
        log[1].contains("watch=true") && log[1].contains("resourceVersion=10"),
        "{log:?}"
    );
    assert!(
        !log[2].contains("watch=true") && !log[2].contains("resourceVersion"),
        "the relist is from resourceVersion \"\": {log:?}"
    );
    // The handler may have been given the first list (then b is deleted,
    // final-state-unknown, and a updated down to 5) or, when the relist came
    // before the first list was processed, only the second.
    let v = view.lock();
    assert!(v.anomalies.is_empty(), "{:?}", v.anomalies);
    if let Some(b) = v.log.iter().rev().find(|n| &*n.key == "ns/b") {
        assert!(b.kind == EventKind::Deleted && b.final_state_unknown);
        let a = v.log.iter().rev().find(|n| &*n.key == "ns/a").unwrap();
        assert_eq!(
            (a.kind, a.object.meta.resource_version.as_str()),
            (EventKind::Updated, "5"),
            "a came back at a lower resourceVersion"
        );
    }
    // The older event itself never reached the cache.
    assert!(!v.log.iter().any(|n| n.object.meta.resource_version == "4"));
    assert_eq!(inf.stats().last_sync_resource_version, "6");
    inf.stats().reflector
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_relists_when_a_watch_event_is_older_than_the_list() {
    let s = backwards_case(Backwards::OlderEvent).await;
    assert_eq!(s.relists_rv_regressed, 1, "{s:?}");
    assert_eq!(s.relists_410 + s.relists_too_large, 0, "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_relists_when_a_watch_is_answered_too_large_resource_version() {
    let s = backwards_case(Backwards::TooLarge504).await;
    assert_eq!(s.relists_too_large, 1, "{s:?}");
    assert_eq!(s.relists_410 + s.relists_rv_regressed, 0, "{s:?}");
}
