//! One test per fault type: kube-runtime's watcher (with a reflector and the default backoff)
//! recovers and ends with exactly the server's state, and the fault's counter shows that it fired.

use crate::common;
use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use apisim::{FailMode, FaultStats, RequestMatch, RunningSim, SimConfig, Store};
use common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube_runtime::reflector::Store as Reader;
use kube_runtime::watcher;
use serde_json::json;
use support::*;

const PATH: &str = "/api/v1/namespaces/default/configmaps";

struct Harness {
    sim: RunningSim,
    store: Arc<Store>,
    reader: Reader<ConfigMap>,
    task: tokio::task::JoinHandle<()>,
}

fn server_state(store: &Store) -> BTreeMap<String, String> {
    store
        .list_all(store.rid("v1", "configmaps"))
        .iter()
        .filter(|o| o.namespace == "default")
        .map(|o| (o.name.clone(), o.rv.to_string()))
        .collect()
}

fn client_state(reader: &Reader<ConfigMap>) -> BTreeMap<String, String> {
    reader
        .state()
        .iter()
        .map(|c| {
            (
                c.metadata.name.clone().unwrap(),
                c.metadata.resource_version.clone().unwrap(),
            )
        })
        .collect()
}

async fn harness(objects: usize, config: SimConfig) -> Harness {
    Harness::on(start(config).await, objects)
}

impl Harness {
    /// Seeds `objects` configmaps into `sim` and starts the watcher (with the
    /// default backoff) into a reflector.
    fn on(sim: RunningSim, objects: usize) -> Harness {
        let store = sim.store().clone();
        seed_configmaps(
            &store,
            "default",
            (0..objects).map(|i| format!("cm-{i:04}")),
        );
        let api: Api<ConfigMap> = Api::namespaced(client(&sim), "default");
        let Reflected { reader, task } = reflect(api, watcher::Config::default(), true);
        Harness {
            sim,
            store,
            reader,
            task,
        }
    }

    async fn ready(&self) {
        support::ready(&self.reader).await;
    }

    async fn watching(&self, n: usize) {
        let log = self.sim.request_log().clone();
        eventually(&format!("{n} watch requests"), || {
            let log = log.clone();
            async move { log.for_path(PATH).iter().filter(|r| r.is_watch()).count() >= n }
        })
        .await;
        self.sim
            .faults()
            .wait_open_watches(1, PATIENCE)
            .await
            .unwrap();
    }

    async fn stats_reach(&self, what: &str, pred: impl Fn(&FaultStats) -> bool) -> FaultStats {
        self.sim
            .faults()
            .wait_for(what, PATIENCE, pred)
            .await
            .unwrap()
    }

    /// Creates, updates and deletes a few objects.
    fn churn(&self, tag: &str) {
        let cms = self.store.rid("v1", "configmaps");
        for i in 0..3 {
            self.store
                .create(
                    cms,
                    Some("default"),
                    configmap(&format!("{tag}-{i}"), "default", json!({})),
                )
                .unwrap();
        }
        let victim = self
            .store
            .list_all(cms)
            .into_iter()
            .find(|o| o.namespace == "default")
            .unwrap();
        self.store
            .delete(cms, "default", &victim.name, None)
            .unwrap();
        let other = self
            .store
            .list_all(cms)
            .into_iter()
            .rfind(|o| o.namespace == "default")
            .unwrap();
        self.store
            .update_with(
                cms,
                "default",
                &other.name,
                apisim::Subresource::Main,
                |mut v| {
                    v["data"]["k"] = json!(tag);
                    Ok(v)
                },
            )
            .unwrap();
    }

    async fn converged(&self) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let (s, c) = (server_state(&self.store), client_state(&self.reader));
            if s == c {
                return;
            }
            if tokio::time::Instant::now() > deadline {
                let missing: Vec<_> = s.keys().filter(|k| !c.contains_key(*k)).collect();
                let phantom: Vec<_> = c.keys().filter(|k| !s.contains_key(*k)).collect();
                panic!("reflector did not converge: missing {missing:?}, phantoms {phantom:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn list_requests(&self) -> usize {
        self.sim
            .request_log()
            .for_path(PATH)
            .iter()
            .filter(|r| !r.is_watch())
            .count()
    }

    async fn finish(self) {
        self.task.abort();
        self.sim.shutdown().await;
    }
}

#[tokio::test]
async fn recovers_from_dropped_watches() {
    let h = harness(20, SimConfig::default()).await;
    h.ready().await;
    h.watching(1).await;
    assert_eq!(h.sim.faults().drop_watches(), 1);
    h.stats_reach("the watch dropped", |s| s.watches_dropped == 1)
        .await;
    h.churn("drop");
    h.converged().await;
    h.watching(2).await;
    assert_eq!(h.sim.faults().stats().drop_calls, 1);
    assert_eq!(
        h.list_requests(),
        1,
        "a dropped watch resumes without relisting"
    );
    h.finish().await;
}

#[tokio::test]
async fn recovers_from_compaction_with_relist() {
    let h = harness(20, SimConfig::default()).await;
    h.ready().await;
    h.watching(1).await;
    // Keep the watcher away (one failed re-watch), change things, then compact past its RV.
    h.sim.faults().fail_next_500(1);
    h.sim.faults().drop_watches();
    h.churn("gone");
    h.sim.faults().compact();
    h.converged().await;
    assert!(h.list_requests() >= 2, "410 must lead to a relist");
    let s = h.sim.faults().stats();
    assert_eq!((s.compactions, s.failures_with(500)), (1, 1), "{s:?}");
    h.finish().await;
}

#[tokio::test]
async fn recovers_from_500s() {
    let h = harness(20, SimConfig::default()).await;
    h.ready().await;
    h.watching(1).await;
    h.sim.faults().fail_next_500(2);
    h.sim.faults().drop_watches();
    h.churn("five-hundred");
    h.converged().await;
    assert_eq!(h.sim.faults().failed_requests(), 2);
    assert_eq!(h.sim.faults().stats().failures_with(500), 2);
    assert_eq!(h.list_requests(), 1, "5xx must not cause a relist");
    h.finish().await;
}

#[tokio::test]
async fn recovers_from_429_with_retry_after() {
    let h = harness(20, SimConfig::default()).await;
    h.ready().await;
    h.watching(1).await;
    h.sim.faults().fail_next_429(2, 1);
    h.sim.faults().drop_watches();
    h.churn("throttled");
    h.converged().await;
    assert_eq!(h.sim.faults().stats().failures_with(429), 2);
    h.finish().await;
}

#[tokio::test]
async fn recovers_from_a_watch_cut_mid_line() {
    let h = harness(20, SimConfig::default()).await;
    h.ready().await;
    h.watching(1).await;
    h.sim.faults().cut_next_watch_event();
    h.churn("cut");
    h.converged().await;
    h.watching(2).await;
    assert_eq!(h.sim.faults().stats().cuts_fired, 1);
    h.finish().await;
}

#[tokio::test]
async fn recovers_from_slow_responses() {
    let h = harness(20, SimConfig::default()).await;
    h.ready().await;
    h.watching(1).await;
    h.sim.faults().set_delay(Some(Duration::from_millis(300)));
    h.sim.faults().drop_watches();
    h.churn("slow");
    h.converged().await;
    h.sim.faults().set_delay(None);
    assert!(h.sim.faults().stats().delayed_responses >= 1);
    h.finish().await;
}

#[tokio::test]
async fn recovers_from_expired_continue_token() {
    let sim = start(SimConfig::default()).await;
    sim.faults().expire_next_continue(1);
    let h = Harness::on(sim, 1100);
    h.ready().await;
    h.converged().await;
    // page 1, page 2 (410), then a fresh list of 3 pages.
    let lists: Vec<_> = h
        .sim
        .request_log()
        .for_path(PATH)
        .into_iter()
        .filter(|r| !r.is_watch())
        .collect();
    assert_eq!(lists.len(), 5, "{lists:?}");
    assert!(
        lists[2].param("continue").is_none(),
        "the list restarts from the beginning"
    );
    assert_eq!(h.sim.faults().stats().continue_expiries, 1);
    h.finish().await;
}

#[tokio::test]
async fn admin_endpoints_arm_faults() {
    let sim = start(SimConfig::default()).await;
    let http = reqwest_like(&sim);
    let r = http("POST", "/_sim/faults/fail?count=1&code=429&retryAfter=7").await;
    assert_eq!(r.0, 200);
    let r = http("GET", "/api/v1/namespaces").await;
    assert_eq!(r.0, 429);
    assert_eq!(r.1.get("retry-after").map(String::as_str), Some("7"));
    assert!(r.2.contains("\"code\":429"));
    let r = http("GET", "/api/v1/namespaces").await;
    assert_eq!(r.0, 200);
    // Targeted: only DELETEs of configmaps fail, with the code asked for.
    let r = http(
        "POST",
        "/_sim/faults/fail?count=1&code=403&method=DELETE&path=/configmaps/",
    )
    .await;
    assert_eq!(r.0, 200);
    assert_eq!(
        http("GET", "/api/v1/namespaces/default/configmaps").await.0,
        200
    );
    let r = http("DELETE", "/api/v1/namespaces/default/configmaps/nope").await;
    assert_eq!(r.0, 403);
    assert!(r.2.contains("\"reason\":\"Forbidden\""), "{}", r.2);
    assert_eq!(
        http("DELETE", "/api/v1/namespaces/default/configmaps/nope")
            .await
            .0,
        404
    );
    let r = http("GET", "/_sim/faults").await;
    let stats: serde_json::Value = serde_json::from_str(&r.2).unwrap();
    assert_eq!(stats["failures"], json!({"403": 1, "429": 1}), "{stats}");
    assert_eq!(stats["pendingFailures"], json!([]));
    let r = http("POST", "/_sim/faults/fail?count=x").await;
    assert_eq!(r.0, 400);
    assert!(r.2.contains("count"));
    let r = http("GET", "/_sim/requests").await;
    let reqs: serde_json::Value = serde_json::from_str(&r.2).unwrap();
    assert_eq!(
        reqs.as_array().unwrap().len(),
        5,
        "admin requests are not recorded"
    );
    sim.shutdown().await;
}

type HttpResult = (u16, BTreeMap<String, String>, String);

/// A tiny HTTP/1.1 client over a TCP socket (enough for the admin endpoints).
fn reqwest_like(
    sim: &RunningSim,
) -> impl Fn(
    &'static str,
    &'static str,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = HttpResult>>> {
    let addr = sim.addr();
    move |method, path| {
        Box::pin(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            let req = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            s.write_all(req.as_bytes()).await.unwrap();
            let mut buf = Vec::new();
            s.read_to_end(&mut buf).await.unwrap();
            let text = String::from_utf8_lossy(&buf).to_string();
            let (head, body) = text.split_once("\r\n\r\n").unwrap();
            let mut lines = head.lines();
            let code = lines
                .next()
                .unwrap()
                .split(' ')
                .nth(1)
                .unwrap()
                .parse()
                .unwrap();
            let headers = lines
                .filter_map(|l| l.split_once(": "))
                .map(|(k, v)| (k.to_lowercase(), v.to_string()))
                .collect();
            (code, headers, body.to_string())
        })
    }
}

async fn admin_get(client: &kube::Client, path: &str) -> serde_json::Value {
    let text = client
        .request_text(http::Request::get(path).body(Vec::new()).unwrap())
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    serde_json::from_str(&text).unwrap()
}

async fn admin(client: &kube::Client, path: &str) -> serde_json::Value {
    let text = client
        .request_text(http::Request::post(path).body(Vec::new()).unwrap())
        .await
        .unwrap_or_else(|e| panic!("POST {path}: {e}"));
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn admin_endpoints_drive_every_watch_and_list_fault() {
    use futures::TryStreamExt;
    use kube::api::{ListParams, WatchParams};
    let sim = start(SimConfig::default()).await;
    let c = client(&sim);
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let store = sim.store().clone();
    let cms = store.rid("v1", "configmaps");

    // drop-watches: the open stream ends with an error.
    let mut s = api
        .watch(&WatchParams::default(), &store.current_rv().to_string())
        .await
        .unwrap()
        .boxed();
    sim.faults().wait_open_watches(1, PATIENCE).await.unwrap();
    assert_eq!(admin(&c, "/_sim/faults/drop-watches").await["dropped"], 1);
    let ended = tokio::time::timeout(PATIENCE, async {
        loop {
            match s.try_next().await {
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => return,
            }
        }
    })
    .await;
    assert!(ended.is_ok());

    // cut-watch: the next event arrives cut and the stream fails.
    let mut s = api
        .watch(&WatchParams::default(), &store.current_rv().to_string())
        .await
        .unwrap()
        .boxed();
    admin(&c, "/_sim/faults/cut-watch").await;
    store
        .create(cms, Some("default"), configmap("cut", "default", json!({})))
        .unwrap();
    let first = tokio::time::timeout(PATIENCE, s.try_next()).await.unwrap();
    assert!(
        !matches!(first, Ok(Some(kube::api::WatchEvent::Added(_)))),
        "a cut event must not decode: {first:?}"
    );
    let stats = admin_get(&c, "/_sim/stats").await;
    assert_eq!(stats["faults"]["cutsFired"], 1, "{stats}");
    assert_eq!(stats["faults"]["watchesDropped"], 1, "{stats}");

    // compact: stats report the compaction point at the current RV.
    admin(&c, "/_sim/faults/compact").await;
    assert_eq!(store.compacted_rv(), store.current_rv());

    // expire-continue: an issued token gets 410.
    for i in 0..3 {
        store
            .create(
                cms,
                Some("default"),
                configmap(&format!("p{i}"), "default", json!({})),
            )
            .unwrap();
    }
    let page = api.list(&ListParams::default().limit(1)).await.unwrap();
    admin(&c, "/_sim/faults/expire-continue").await;
    let tok = page.metadata.continue_.unwrap();
    match api
        .list(&ListParams::default().limit(1).continue_token(&tok))
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => assert_eq!(s.code, 410),
        other => panic!("expected 410, got {other:?}"),
    }

    // delay: responses take at least the delay; reset removes it.
    assert_eq!(admin(&c, "/_sim/faults/delay?ms=300").await["delayMs"], 300);
    let t = std::time::Instant::now();
    api.list(&ListParams::default()).await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(300));
    admin(&c, "/_sim/faults/reset").await;
    assert_eq!(sim.faults().delay(), None);
    sim.shutdown().await;
}

#[tokio::test]
async fn targeted_failures_hit_writes_and_spare_the_informer() {
    use kube::api::{Patch, PatchParams};
    let h = harness(5, SimConfig::default()).await;
    h.ready().await;
    h.watching(1).await;
    h.sim.faults().fail_matching(
        2,
        FailMode::Code(409),
        RequestMatch::method("PATCH").path("/configmaps/"),
    );
    let api: Api<ConfigMap> = Api::namespaced(client(&h.sim), "default");
    let patch = Patch::Merge(json!({"data": {"k": "patched"}}));
    for _ in 0..2 {
        match api
            .patch("cm-0001", &PatchParams::default(), &patch)
            .await
            .unwrap_err()
        {
            kube::Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (409, "Conflict")),
            other => panic!("expected the injected 409, got {other:?}"),
        }
    }
    api.patch("cm-0001", &PatchParams::default(), &patch)
        .await
        .unwrap();
    h.converged().await;
    let s = h.sim.faults().stats();
    assert_eq!(s.failures_with(409), 2);
    assert_eq!(s.failures_total(), 2, "nothing else failed: {s:?}");
    assert_eq!(h.list_requests(), 1, "the informer never relisted");
    assert_eq!(
        h.sim
            .request_log()
            .for_path(PATH)
            .iter()
            .filter(|r| r.is_watch())
            .count(),
        1,
        "its watch was never broken"
    );
    h.finish().await;
}

#[tokio::test]
async fn a_drop_right_after_the_watch_request_is_logged_is_never_missed() {
    // The test waits on the subscription count, not the log: the drop must reach the watch.
    for round in 0..5 {
        let sim = start(SimConfig::default()).await;
        let api: Api<ConfigMap> = Api::namespaced(client(&sim), "default");
        let rv = sim.store().current_rv().to_string();
        let watch = tokio::spawn(async move {
            let mut s = api
                .watch(&kube::api::WatchParams::default(), &rv)
                .await
                .unwrap()
                .boxed();
            // Ends (error or end of stream) only because of the drop.
            tokio::time::timeout(PATIENCE, s.next()).await
        });
        sim.request_log()
            .wait_for(PATIENCE, |r| r.is_watch())
            .await
            .unwrap();
        sim.faults().wait_open_watches(1, PATIENCE).await.unwrap();
        assert_eq!(sim.faults().drop_watches(), 1, "round {round}");
        let ended = watch.await.unwrap();
        assert!(ended.is_ok(), "round {round}: the watch was not dropped");
        sim.faults()
            .wait_for("the drop counted", PATIENCE, |s| s.watches_dropped == 1)
            .await
            .unwrap();
        sim.shutdown().await;
    }
}
