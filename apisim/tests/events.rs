//! One Event store, two APIs: events.k8s.io/v1 and core v1 read and write the same objects with
//! the field mapping of `pkg/apis/events/v1/conversion.go`, share resourceVersions, field
//! selectors (core `involvedObject.*`, events.k8s.io `regarding.*`, as the field label
//! conversion maps them) and watch streams. The oracle is what each API serves over HTTP.

use crate::common;

use apisim::SimConfig;
use common::*;
use serde_json::{json, Value};

const CORE: &str = "/api/v1/namespaces/default/events";
const NEW: &str = "/apis/events.k8s.io/v1/namespaces/default/events";

fn new_event(name: &str, pod: &str, uid: &str) -> Value {
    json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "example.com/ctl",
        "reportingInstance": "ctl-0", "action": "Reconcile", "reason": "Synced", "type": "Normal",
        "note": "all good", "series": {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"},
        "regarding": {"apiVersion": "v1", "kind": "Pod", "name": pod, "namespace": "default", "uid": uid},
        "related": {"kind": "Node", "name": "n1"}, "deprecatedSource": {}})
}

async fn post(sim: &apisim::RunningSim, path: &str, body: &Value) -> Value {
    let r = raw(
        sim.addr(),
        "POST",
        path,
        Some(("application/json", &body.to_string())),
    )
    .await;
    assert_eq!(r.code, 201, "POST {path}: {}", r.body);
    r.json()
}

async fn get(sim: &apisim::RunningSim, path: &str) -> Value {
    let r = raw(sim.addr(), "GET", path, None).await;
    assert_eq!(r.code, 200, "GET {path}: {}", r.body);
    r.json()
}

fn names(list: &Value) -> Vec<String> {
    let mut n: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    n.sort();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_written_through_one_api_is_read_through_the_other_with_the_field_mapping() {
    let sim = start(SimConfig::default()).await;
    let created = post(&sim, NEW, &new_event("e1", "web", "u-1")).await;
    let core = get(&sim, &format!("{CORE}/e1")).await;
    assert_eq!(core["apiVersion"], "v1");
    assert_eq!(
        core["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    assert_eq!(core["metadata"]["uid"], created["metadata"]["uid"]);
    assert_eq!(core["message"], "all good");
    assert_eq!(core["involvedObject"]["name"], "web");
    assert_eq!(core["involvedObject"]["uid"], "u-1");
    assert_eq!(core["reportingComponent"], "example.com/ctl");
    assert_eq!(core["reportingInstance"], "ctl-0");
    assert_eq!(core["series"]["count"], 2);
    assert_eq!(core["related"]["name"], "n1");
    assert_eq!(core["source"], json!({}));
    for absent in [
        "note",
        "regarding",
        "reportingController",
        "deprecatedSource",
    ] {
        assert!(core.get(absent).is_none(), "core has no {absent}: {core}");
    }

    // Core v1 Event (legacy fields) read through events.k8s.io/v1.
    post(
        &sim,
        CORE,
        &json!({"metadata": {"name": "legacy"}, "reason": "Pulled", "message": "pulled image",
            "type": "Normal", "count": 3, "firstTimestamp": "2026-01-01T00:00:00Z",
            "lastTimestamp": "2026-01-01T00:05:00Z", "source": {"component": "kubelet", "host": "n1"},
            "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"}}),
    )
    .await;
    let new = get(&sim, &format!("{NEW}/legacy")).await;
    assert_eq!(new["apiVersion"], "events.k8s.io/v1");
    assert_eq!(new["note"], "pulled image");
    assert_eq!(new["regarding"]["name"], "web");
    assert_eq!(new["deprecatedCount"], 3);
    assert_eq!(new["deprecatedFirstTimestamp"], "2026-01-01T00:00:00Z");
    assert_eq!(new["deprecatedLastTimestamp"], "2026-01-01T00:05:00Z");
    assert_eq!(
        new["deprecatedSource"],
        json!({"component": "kubelet", "host": "n1"})
    );

    assert_eq!(names(&get(&sim, CORE).await), ["e1", "legacy"]);
    assert_eq!(names(&get(&sim, NEW).await), ["e1", "legacy"]);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_and_deletes_through_one_api_are_seen_through_the_other() {
    let sim = start(SimConfig::default()).await;
    post(&sim, NEW, &new_event("e1", "web", "u-1")).await;
    let patched = raw(
        sim.addr(),
        "PATCH",
        &format!("{NEW}/e1"),
        Some((
            "application/merge-patch+json",
            &json!({"series": {"count": 3, "lastObservedTime": "2026-01-01T00:02:00.000000Z"}})
                .to_string(),
        )),
    )
    .await;
    assert_eq!(patched.code, 200, "{}", patched.body);
    let core = get(&sim, &format!("{CORE}/e1")).await;
    assert_eq!(core["series"]["count"], 3);
    assert_eq!(
        core["metadata"]["resourceVersion"],
        patched.json()["metadata"]["resourceVersion"]
    );
    // A no-op PUT through events.k8s.io keeps the stored Event (and its resourceVersion).
    let same = get(&sim, &format!("{NEW}/e1")).await;
    let put = raw(
        sim.addr(),
        "PUT",
        &format!("{NEW}/e1"),
        Some(("application/json", &same.to_string())),
    )
    .await;
    assert_eq!(put.code, 200, "{}", put.body);
    assert_eq!(
        put.json()["metadata"]["resourceVersion"],
        same["metadata"]["resourceVersion"]
    );
    // The note is immutable through events.k8s.io (ValidateEventUpdate), reported on `message`.
    let changed = raw(
        sim.addr(),
        "PATCH",
        &format!("{NEW}/e1"),
        Some((
            "application/merge-patch+json",
            &json!({"note": "other"}).to_string(),
        )),
    )
    .await;
    assert_eq!(changed.code, 422, "{}", changed.body);
    assert_eq!(
        changed.json()["message"],
        "Event \"e1\" is invalid: message: Invalid value: \"other\": field is immutable"
    );
    let gone = raw(sim.addr(), "DELETE", &format!("{CORE}/e1"), None).await;
    assert_eq!(gone.code, 200);
    let missing = raw(sim.addr(), "GET", &format!("{NEW}/e1"), None).await;
    assert_eq!(missing.code, 404);
    assert_eq!(
        missing.json()["message"],
        "events.events.k8s.io \"e1\" not found"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn field_selectors_of_both_apis_select_the_same_events() {
    let sim = start(SimConfig::default()).await;
    post(&sim, NEW, &new_event("for-web", "web", "u-web")).await;
    post(&sim, NEW, &new_event("for-api", "api", "u-api")).await;
    // kubectl describe pod's search (client-go events.GetFieldSelector).
    let core = get(
        &sim,
        &format!("{CORE}?fieldSelector=involvedObject.name%3Dweb%2CinvolvedObject.namespace%3Ddefault%2CinvolvedObject.uid%3Du-web"),
    )
    .await;
    assert_eq!(names(&core), ["for-web"]);
    let by_kind = get(
        &sim,
        &format!("{CORE}?fieldSelector=involvedObject.kind%3DPod%2Csource%3Dexample.com%2Fctl"),
    )
    .await;
    assert_eq!(names(&by_kind), ["for-api", "for-web"]);
    let new = get(
        &sim,
        &format!(
            "{NEW}?fieldSelector=regarding.uid%3Du-api%2CreportingController%3Dexample.com%2Fctl"
        ),
    )
    .await;
    assert_eq!(names(&new), ["for-api"]);
    let refused = raw(
        sim.addr(),
        "GET",
        &format!("{NEW}?fieldSelector=involvedObject.name%3Dweb"),
        None,
    )
    .await;
    assert_eq!(
        refused.code, 400,
        "core labels are not events.k8s.io labels"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_through_either_api_see_changes_made_through_the_other() {
    let sim = start(SimConfig::default()).await;
    let rv = sim.store().current_rv();
    post(&sim, NEW, &new_event("via-new", "web", "u-1")).await;
    post(
        &sim,
        CORE,
        &json!({"metadata": {"name": "via-core"}, "reason": "R", "message": "m",
            "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"}}),
    )
    .await;
    let core = raw(
        sim.addr(),
        "GET",
        &format!("{CORE}?watch=true&resourceVersion={rv}&timeoutSeconds=1"),
        None,
    )
    .await;
    let core_events = core.events();
    assert_eq!(core_events.len(), 2, "{}", core.body);
    assert_eq!(core_events[0]["object"]["metadata"]["name"], "via-new");
    assert_eq!(core_events[0]["object"]["message"], "all good");
    assert_eq!(core_events[1]["object"]["apiVersion"], "v1");
    let new = raw(
        sim.addr(),
        "GET",
        &format!("{NEW}?watch=true&resourceVersion={rv}&timeoutSeconds=1&fieldSelector=regarding.name%3Dweb"),
        None,
    )
    .await;
    let new_events = new.events();
    assert_eq!(new_events.len(), 2, "{}", new.body);
    assert_eq!(new_events[1]["type"], "ADDED");
    assert_eq!(new_events[1]["object"]["apiVersion"], "events.k8s.io/v1");
    assert_eq!(new_events[1]["object"]["metadata"]["name"], "via-core");
    assert_eq!(new_events[1]["object"]["note"], "m");
    assert_eq!(
        new_events[1]["object"]["metadata"]["resourceVersion"],
        core_events[1]["object"]["metadata"]["resourceVersion"]
    );
    sim.shutdown().await;
}
