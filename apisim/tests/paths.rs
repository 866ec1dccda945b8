//! The path is decoded before routing, as Go's net/http decodes `URL.Path` before the apiserver
//! splits it: `%2F` separates segments, `%2e%2e` is `..`, and names that cannot be one path
//! segment are refused as the registry refuses them. Verdicts come from the store's objects and
//! the HTTP answer.

use crate::common;

use apisim::SimConfig;
use common::*;
use serde_json::{json, Value};

const PODS: &str = "/api/v1/namespaces/default/pods";
const CM: &str = "/api/v1/namespaces/default/configmaps";

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
}

fn cm_names(sim: &apisim::RunningSim) -> Vec<String> {
    let s = sim.store();
    let mut v: Vec<String> = s
        .list_all(s.rid("v1", "configmaps"))
        .iter()
        .map(|o| o.name.clone())
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_encoded_slash_addresses_the_subresource_as_a_real_server_routes_it() {
    let sim = start(SimConfig::default()).await;
    let s = sim.store();
    s.create(s.rid("v1", "pods"), Some("default"), pod("web"))
        .unwrap();
    let patch = json!({"metadata": {"labels": {"x": "y"}}, "status": {"phase": "Running"}});
    let r = raw(
        sim.addr(),
        "PATCH",
        &format!("{PODS}/web%2Fstatus"),
        Some(("application/merge-patch+json", &patch.to_string())),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let v = s
        .get(s.rid("v1", "pods"), "default", "web")
        .unwrap()
        .value();
    assert_eq!(
        v["status"]["phase"], "Running",
        "the status subresource was written"
    );
    assert!(
        v["metadata"]["labels"]["x"].is_null(),
        "a /status write leaves the main resource alone"
    );
    let rec = sim.request_log().entries().pop().unwrap();
    assert_eq!(
        rec.path,
        format!("{PODS}/web%2Fstatus"),
        "the raw path is logged"
    );
    assert_eq!(rec.target.name.as_deref(), Some("web"));
    assert_eq!(rec.target.subresource.as_deref(), Some("status"));
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_are_not_one_path_segment_are_refused_and_change_nothing() {
    let sim = start(SimConfig::default()).await;
    let s = sim.store();
    s.create(
        s.rid("v1", "configmaps"),
        Some("default"),
        configmap("x", "default", json!({})),
    )
    .unwrap();
    let rv = s.current_rv();
    // (method, path, body, code, message)
    let cases: &[(&str, String, Option<Value>, u16, &str)] = &[
        (
            "GET",
            format!("{CM}/%2e%2e"),
            None,
            400,
            r#"Name parameter invalid: "..": may not be '..'"#,
        ),
        (
            "GET",
            format!("{CM}/."),
            None,
            400,
            r#"Name parameter invalid: ".": may not be '.'"#,
        ),
        (
            "DELETE",
            format!("{CM}/x%25"),
            None,
            400,
            r#"Name parameter invalid: "x%": may not contain '%'"#,
        ),
        (
            "PATCH",
            format!("{CM}/%2E%2E"),
            Some(json!({"data": {"a": "b"}})),
            400,
            r#"Name parameter invalid: "..": may not be '..'"#,
        ),
        (
            "POST",
            CM.to_string(),
            Some(json!({"metadata": {"name": "a/b"}})),
            422,
            r#"ConfigMap "a/b" is invalid: metadata.name: Invalid value: "a/b": may not contain '/'"#,
        ),
        (
            "POST",
            CM.to_string(),
            Some(json!({"metadata": {"name": ".."}})),
            422,
            r#"ConfigMap ".." is invalid: metadata.name: Invalid value: "..": may not be '..'"#,
        ),
        (
            "POST",
            CM.to_string(),
            Some(json!({"metadata": {"name": "a%/"}})),
            422,
            r#"ConfigMap "a%/" is invalid: [metadata.name: Invalid value: "a%/": may not contain '/', metadata.name: Invalid value: "a%/": may not contain '%'"#,
        ),
        (
            "POST",
            CM.to_string(),
            Some(json!({"metadata": {"generateName": "g/"}})),
            422,
            r#"ConfigMap "" is invalid: metadata.generateName: Invalid value: "g/": may not contain '/'"#,
        ),
        (
            "GET",
            "/api/v1/namespaces//configmaps/x".into(),
            None,
            400,
            "Namespace parameter required.",
        ),
        (
            "GET",
            format!("{CM}//status"),
            None,
            404,
            "the server could not find the requested resource",
        ),
        (
            "DELETE",
            format!("{CM}/x%2F.."),
            None,
            404,
            "the server could not find the requested resource",
        ),
    ];
    for (method, path, body, code, msg) in cases {
        let body = body.as_ref().map(|b| b.to_string());
        let ct = if *method == "PATCH" {
            "application/merge-patch+json"
        } else {
            "application/json"
        };
        let r = raw(sim.addr(), method, path, body.as_deref().map(|b| (ct, b))).await;
        assert_eq!(r.code, *code, "{method} {path}: {}", r.body);
        let st = r.json();
        assert!(
            st["message"].as_str().unwrap_or("").starts_with(msg),
            "{method} {path}: {}",
            st["message"]
        );
        assert_eq!(st["code"], *code);
    }
    assert_eq!(s.current_rv(), rv, "no refused request wrote anything");
    assert_eq!(cm_names(&sim), vec!["x".to_string()]);
    // An apply that would create `..` is refused by its URL name before it could.
    let r = raw(
        sim.addr(),
        "PATCH",
        &format!("{CM}/%2e%2e?fieldManager=t"),
        Some((
            "application/apply-patch+yaml",
            r#"{"apiVersion":"v1","kind":"ConfigMap"}"#,
        )),
    )
    .await;
    assert_eq!(r.code, 400, "{}", r.body);
    assert_eq!(s.current_rv(), rv);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_paths_get_go_net_https_plain_400() {
    let sim = start(SimConfig::default()).await;
    for path in [
        "/api/v1/namespaces/default/configmaps/%zz",
        "/api/v1/pods%4",
    ] {
        let r = raw(sim.addr(), "GET", path, None).await;
        assert_eq!(
            (r.code, r.body.as_str()),
            (400, "400 Bad Request"),
            "{path}"
        );
        assert!(r.headers["content-type"].starts_with("text/plain"));
    }
    // `namespaces//pods` lists across namespaces, as an empty namespace parameter does.
    let s = sim.store();
    s.create(s.rid("v1", "pods"), Some("default"), pod("a"))
        .unwrap();
    let r = raw(sim.addr(), "GET", "/api/v1/namespaces//pods", None).await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.json()["items"].as_array().unwrap().len(), 1);
    sim.shutdown().await;
}
