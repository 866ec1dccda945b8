//! Server-side `?timeout=` on writes: a write not done in time is answered 504 `Timeout` and is
//! never applied, also when the slow-responses fault holds it past its deadline. Verdicts come
//! from the store's state, read after the write's delay would have ended.

use crate::common;

use std::time::{Duration, Instant};

use apisim::{DeleteOptions, SimConfig, Subresource, WriteOptions};
use common::*;
use serde_json::json;

const CM: &str = "/api/v1/namespaces/default/configmaps";

const TIMEOUT_STATUS: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: request did not complete within requested timeout - context deadline exceeded","reason":"Timeout","details":{},"code":504}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_held_past_its_timeout_gets_504_and_is_never_applied() {
    let sim = start(SimConfig::default()).await;
    let s = sim.store().clone();
    let cms = s.rid("v1", "configmaps");
    s.create(cms, Some("default"), configmap("x", "default", json!({})))
        .unwrap();
    let rv = s.current_rv();
    sim.faults().set_delay(Some(Duration::from_millis(800)));
    let patch = r#"{"data":{"k":"late"}}"#;
    let create = json!({"metadata": {"name": "new"}}).to_string();
    let cases = [
        (
            "PATCH",
            format!("{CM}/x?timeout=150ms"),
            Some(("application/merge-patch+json", patch)),
        ),
        (
            "POST",
            format!("{CM}?timeout=150ms"),
            Some(("application/json", create.as_str())),
        ),
        ("DELETE", format!("{CM}/x?timeout=0.15s"), None),
        ("DELETE", format!("{CM}?timeout=150ms"), None),
    ];
    for (method, path, body) in &cases {
        let t0 = Instant::now();
        let r = raw(sim.addr(), method, path, *body).await;
        assert_eq!(r.code, 504, "{method} {path}: {}", r.body);
        assert_eq!(r.body, TIMEOUT_STATUS);
        assert!(
            t0.elapsed() < Duration::from_millis(700),
            "answered at the deadline, not after the delay"
        );
    }
    // Wait until every delayed request would have finished, then read the store.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(s.current_rv(), rv, "no timed-out write was applied later");
    let x = s.get(cms, "default", "x").unwrap().value();
    assert_eq!(x["data"]["k"], "v");
    assert!(s.get(cms, "default", "new").is_err());
    assert!(sim
        .request_log()
        .entries()
        .iter()
        .all(|r| r.written_rv.is_none()));

    // Within its timeout the same delayed write is applied.
    let r = raw(
        sim.addr(),
        "PATCH",
        &format!("{CM}/x?timeout=10s"),
        Some(("application/merge-patch+json", patch)),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(
        s.get(cms, "default", "x").unwrap().value()["data"]["k"],
        "late"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_timeout_is_400_with_the_apiservers_message() {
    let sim = start(SimConfig::default()).await;
    let rv = sim.store().current_rv();
    for (q, want) in [
        (
            "timeout=soon",
            r#"invalid timeout specified in the request URL - time: invalid duration "soon""#,
        ),
        (
            "timeout=10",
            r#"invalid timeout specified in the request URL - time: missing unit in duration "10""#,
        ),
    ] {
        let body = json!({"metadata": {"name": "y"}}).to_string();
        let r = raw(
            sim.addr(),
            "POST",
            &format!("{CM}?{q}"),
            Some(("application/json", &body)),
        )
        .await;
        assert_eq!((r.code, r.json()["message"].as_str()), (400, Some(want)));
    }
    assert_eq!(sim.store().current_rv(), rv);
    sim.shutdown().await;
}

#[test]
fn the_store_refuses_a_write_whose_deadline_passed_before_it_commits() {
    let s = apisim::Store::new(1000);
    let cms = s.rid("v1", "configmaps");
    s.create(cms, Some("default"), configmap("x", "default", json!({})))
        .unwrap();
    let rv = s.current_rv();
    let past = WriteOptions {
        deadline: Some(Instant::now()),
        ..WriteOptions::default()
    };
    let e = s
        .create_with(
            cms,
            Some("default"),
            configmap("y", "default", json!({})),
            &past,
        )
        .unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (504, "Timeout"));
    let e = s
        .update_with_opts(cms, "default", "x", Subresource::Main, &past, |mut v| {
            v["data"]["k"] = json!("w");
            Ok(v)
        })
        .unwrap_err();
    assert_eq!(e.code, 504);
    let del = DeleteOptions {
        deadline: Some(Instant::now()),
        ..DeleteOptions::default()
    };
    assert_eq!(
        s.delete_with(cms, "default", "x", &del).unwrap_err().code,
        504
    );
    assert_eq!(s.current_rv(), rv, "nothing was committed");
    let future = WriteOptions {
        deadline: Some(Instant::now() + Duration::from_secs(60)),
        ..WriteOptions::default()
    };
    s.create_with(
        cms,
        Some("default"),
        configmap("y", "default", json!({})),
        &future,
    )
    .unwrap();
    assert_eq!(s.current_rv(), rv + 1);
}
