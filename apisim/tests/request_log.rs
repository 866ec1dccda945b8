//! The request log as an oracle: each record names what the router understood the request to
//! address and, for a write the server applied, the resourceVersion it assigned. The verdicts
//! come from the store's own change log, never from the log under test.

use crate::common;

use apisim::{parse_request_path, ChangeType, RequestRecord, SimConfig};
use common::*;
use serde_json::json;

const CM: &str = "/api/v1/namespaces/default/configmaps";

fn last(sim: &apisim::RunningSim, method: &str) -> RequestRecord {
    sim.request_log()
        .entries()
        .into_iter()
        .rev()
        .find(|r| r.method == method)
        .unwrap_or_else(|| panic!("no {method} logged"))
}

/// The resourceVersion and type of the newest change the store committed for `name`.
fn committed(sim: &apisim::RunningSim, name: &str) -> (u64, ChangeType) {
    let c = sim
        .store()
        .changes_since(0, usize::MAX)
        .unwrap()
        .into_iter()
        .rev()
        .find(|c| c.object.name == name)
        .expect("a change for the object");
    (c.rv, c.kind)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn written_rv_is_the_resource_version_the_store_committed() {
    let sim = start(SimConfig::default()).await;
    let a = sim.addr();
    let body = json!({"metadata": {"name": "x"}, "data": {"k": "v"}}).to_string();
    let r = raw(a, "POST", CM, Some(("application/json", &body))).await;
    assert_eq!(r.code, 201, "{}", r.body);
    let rec = last(&sim, "POST");
    assert_eq!(rec.written_rv, Some(committed(&sim, "x").0));

    // A merge patch, then the same patch again: the second changes nothing, so it wrote nothing.
    let p = json!({"data": {"k": "w"}}).to_string();
    for expect_write in [true, false] {
        let r = raw(
            a,
            "PATCH",
            &format!("{CM}/x"),
            Some(("application/merge-patch+json", &p)),
        )
        .await;
        assert_eq!(r.code, 200, "{}", r.body);
        let rec = last(&sim, "PATCH");
        if expect_write {
            let (rv, kind) = committed(&sim, "x");
            assert_eq!((rec.written_rv, kind), (Some(rv), ChangeType::Modified));
            assert_eq!(r.json()["metadata"]["resourceVersion"], rv.to_string());
        } else {
            assert_eq!(rec.written_rv, None, "a no-op applies nothing");
        }
    }

    // A dry run applies nothing.
    let r = raw(
        a,
        "PATCH",
        &format!("{CM}/x?dryRun=All"),
        Some(("application/merge-patch+json", r#"{"data":{"k":"dry"}}"#)),
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(last(&sim, "PATCH").written_rv, None);

    // Server-side apply that creates, then PUT.
    let apply = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y"}, "data": {"a": "1"}})
        .to_string();
    let r = raw(
        a,
        "PATCH",
        &format!("{CM}/y?fieldManager=t"),
        Some(("application/apply-patch+yaml", &apply)),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(last(&sim, "PATCH").written_rv, Some(committed(&sim, "y").0));
    let mut obj = r.json();
    obj["data"]["a"] = json!("2");
    let r = raw(
        a,
        "PUT",
        &format!("{CM}/y"),
        Some(("application/json", &obj.to_string())),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(last(&sim, "PUT").written_rv, Some(committed(&sim, "y").0));

    // A DELETE answered with a Status (configmaps): the deletion's resourceVersion.
    let r = raw(a, "DELETE", &format!("{CM}/x"), None).await;
    assert_eq!((r.code, r.json()["kind"].as_str()), (200, Some("Status")));
    let (rv, kind) = committed(&sim, "x");
    assert_eq!(kind, ChangeType::Deleted);
    assert_eq!(last(&sim, "DELETE").written_rv, Some(rv));

    // A refused write and a read carry none.
    let r = raw(a, "DELETE", &format!("{CM}/x"), None).await;
    assert_eq!(r.code, 404);
    assert_eq!(last(&sim, "DELETE").written_rv, None);
    raw(a, "GET", &format!("{CM}/y"), None).await;
    assert_eq!(last(&sim, "GET").written_rv, None);

    // Every applied write in the log, in resourceVersion order, is exactly the store's history
    // of changes made through the API (one create of the default namespaces came before).
    let logged: Vec<u64> = sim
        .request_log()
        .entries()
        .iter()
        .filter_map(|r| r.written_rv)
        .collect();
    let first = logged[0];
    let store: Vec<u64> = sim
        .store()
        .changes_since(first - 1, usize::MAX)
        .unwrap()
        .iter()
        .map(|c| c.rv)
        .collect();
    assert_eq!(logged, store);
    // The admin endpoint shows the same fields.
    let admin = raw(a, "GET", "/_sim/requests", None).await.json();
    let post = admin
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["method"] == "POST")
        .unwrap()
        .clone();
    assert_eq!(post["writtenResourceVersion"], json!(logged[0]));
    assert_eq!(post["target"]["resource"], "configmaps");
    assert_eq!(post["target"]["verb"], "create");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_carry_the_target_the_router_parsed() {
    let sim = start(SimConfig::default()).await;
    let a = sim.addr();
    for (method, path) in [
        ("GET", "/api/v1/namespaces/default/configmaps?limit=5"),
        (
            "GET",
            "/apis/apps/v1/namespaces/default/deployments/web/status",
        ),
        ("DELETE", "/api/v1/namespaces/default/configmaps"),
        (
            "GET",
            "/api/v1/watch/namespaces/default/pods/web?timeoutSeconds=1",
        ),
        ("GET", "/api/v1/namespaces/default"),
        ("GET", "/version"),
    ] {
        raw(a, method, path, None).await;
        let rec = last(&sim, method);
        let want = parse_request_path(method, path).unwrap();
        assert_eq!(rec.target, want, "{method} {path}");
    }
    let rec = last(&sim, "DELETE");
    assert_eq!(rec.target.verb, "deletecollection");
    assert_eq!(rec.target.resource.as_deref(), Some("configmaps"));
    assert_eq!(rec.target.namespace.as_deref(), Some("default"));
    assert_eq!(rec.user, "", "authentication is off and no token was sent");
    assert_eq!(rec.impersonated_user, "");
    sim.shutdown().await;
}
