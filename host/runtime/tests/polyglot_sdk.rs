//! The JavaScript, Python and C SDKs against WIT 0.2, through one probe
//! plugin per language (plugins/testing/{js,py,c}-probe) that runs the SDK
//! calls its `[config] ops` list and reports each outcome. The oracle is what
//! the harness host saw (the calls recorded by its fake API server, the
//! Events published, the handles still held), never the probe's own report
//! alone:
//! - each getter of the object wrapper returns the field of the object the
//!   host lent;
//! - each `kube` call reaches the host exactly as written (verb, resource,
//!   namespace, name, patch form, body, force, delete preconditions and
//!   propagation), and each `api-error` case comes back as its kind;
//! - Events are published about the event's object with the given type,
//!   reason, action and note;
//! - cache queries answer with references for the call, and a query beyond
//!   the call's reference limit is the `too-many-objects` error;
//! - an object (or an event) kept past its call is a clear error in JS and
//!   Python, raised before the SDK touches the stale reference (which would
//!   trap the instance);
//! - the finalizer helpers of the JS, Python and Rust SDKs (the Rust one
//!   through plugins/testing/api-probe) add their finalizer with a JSON patch
//!   that tests the uid and the resourceVersion, run `apply` while it is
//!   there, run `cleanup` and remove it (testing the uid and its position)
//!   when the object is being deleted, and do nothing for an object that is
//!   gone or done;
//! - a cleanup that asks for a requeue keeps the finalizer (no removal is
//!   sent) and its requeue is the answer; one that fails keeps it too;
//! - under dry run the helpers send the writes a live run would: the add and
//!   then `apply` in the same reconcile, and `cleanup` for an object being
//!   deleted that never got the finalizer (with no removal).

use crate::polyglot_support;

use polyglot_support::*;
use serde_json::{json, Value};

const PROBES: [&str; 3] = ["js-probe", "py-probe", "c-probe"];
const PODS: &str = "v1/pods";

fn pod(name: &str, rv: &str) -> Cached {
    cached(
        PODS,
        &json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "namespace": "shop", "name": name, "uid": format!("uid-{name}"),
                "resourceVersion": rv, "generation": 4,
                "labels": {"app": "web", "tier": "front"},
                "annotations": {"note": "ünïcode ✓", "owner": "x"},
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "finalizers": ["example.com/f"],
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                     "uid": "owner-1", "controller": true}],
            },
            "spec": {"containers": [{"name": "c", "image": "img:1"}]},
        }),
    )
}

/// A fresh probe with `ops`, reading v1/pods.
fn probe(name: &str, ops: Value, cache: Vec<Cached>) -> Guest {
    let mut g = Example::load(name).guest(cache, &[PODS]);
    g.init(&json!({ "ops": ops }).to_string())
        .unwrap_or_else(|e| panic!("{name}: init: {e}"));
    g
}

/// Runs one event through the probe and returns its outcomes.
fn outcomes(g: &mut Guest, ev: &Event) -> Vec<Value> {
    match g.on_event(ev) {
        Err(m) => serde_json::from_str(&m).unwrap_or_else(|e| panic!("{e}: {m}")),
        Ok(()) => panic!("the probe answers with its outcomes"),
    }
}

#[test]
fn object_getters_return_the_fields_of_the_event_object() {
    let new = pod("web-0", "8");
    let old = pod("web-0", "7");
    for name in PROBES {
        let mut g = probe(name, json!([{"call": "read"}]), vec![]);
        let out = outcomes(
            &mut g,
            &event(EventKind::Updated, &new, false).with_old(&old),
        );
        let seen = &out[0];
        assert_eq!(seen["ok"], true, "{name}: {seen}");
        assert_eq!(seen["kind"], "updated", "{name}");
        let o = &seen["object"];
        assert_eq!(o["resource"], PODS, "{name}");
        assert_eq!(o["key"], "shop/web-0", "{name}");
        assert_eq!(o["namespace"], "shop", "{name}");
        assert_eq!(o["name"], "web-0", "{name}");
        assert_eq!(o["uid"], "uid-web-0", "{name}");
        assert_eq!(o["resource_version"], "8", "{name}");
        assert_eq!(o["generation"], 4, "{name}");
        assert_eq!(o["label_app"], "web", "{name}");
        assert_eq!(o["annotation_note"], "ünïcode ✓", "{name}");
        assert_eq!(
            o["labels"],
            json!({"app": "web", "tier": "front"}),
            "{name}"
        );
        assert_eq!(
            o["annotations"],
            json!({"note": "ünïcode ✓", "owner": "x"}),
            "{name}"
        );
        assert_eq!(
            o["reference"],
            json!({"apiVersion": "v1", "kind": "Pod", "namespace": "shop", "name": "web-0", "uid": "uid-web-0"}),
            "{name}"
        );
        assert_eq!(o["body"], new.value, "{name}");
        assert_eq!(seen["old"]["resource_version"], "7", "{name}");
        if name != "c-probe" {
            let m = &o["meta"];
            assert_eq!(m["finalizers"], json!(["example.com/f"]), "{name}");
            assert_eq!(m["creationTimestamp"], "2026-01-01T00:00:00Z", "{name}");
            assert_eq!(m["ownerReferences"][0]["uid"], "owner-1", "{name}");
            assert_eq!(m["ownerReferences"][0]["controller"], true, "{name}");
            assert_eq!(m["labels"]["tier"], "front", "{name}");
        }
        // An add has no old object.
        let out = outcomes(&mut g, &event(EventKind::Added, &new, true));
        assert!(out[0]["old"].is_null(), "{name}: {}", out[0]);
        assert_eq!(out[0]["initial"], true, "{name}");
    }
}

#[test]
fn kube_calls_reach_the_host_exactly_as_written() {
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "1"}});
    let ops = json!([
        {"call": "get", "resource": "v1/configmaps", "namespace": "shop", "name": "cm"},
        {"call": "create", "resource": "v1/configmaps", "namespace": "shop", "body": body},
        {"call": "replace", "resource": "v1/configmaps", "namespace": "shop", "name": "cm", "body": body},
        {"call": "patch", "resource": "v1/pods", "namespace": "shop", "name": "web-0", "patch": "merge",
         "body": {"metadata": {"labels": {"x": "1"}}}},
        {"call": "patch", "resource": "v1/pods", "namespace": "shop", "name": "web-0", "patch": "json",
         "body": [{"op": "remove", "path": "/metadata/labels/x"}]},
        {"call": "patch", "resource": "v1/pods", "namespace": "shop", "name": "web-0", "patch": "strategic-merge",
         "body": {"spec": {"containers": [{"name": "c", "image": "img:2"}]}}},
        {"call": "patch", "resource": "v1/pods", "namespace": "shop", "name": "web-0", "patch": "apply",
         "force": true, "body": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0"}}},
        {"call": "delete", "resource": "v1/pods", "namespace": "shop", "name": "web-0",
         "delete": {"uid": "uid-web-0", "resource_version": "8", "propagation": "foreground"}},
        {"call": "delete", "resource": "v1/namespaces", "name": "old"},
        {"call": "get-status", "resource": "apps/v1/deployments", "namespace": "shop", "name": "d"},
        {"call": "replace-status", "resource": "apps/v1/deployments", "namespace": "shop", "name": "d",
         "body": {"status": {"replicas": 1}}},
        {"call": "patch-status", "resource": "apps/v1/deployments", "namespace": "shop", "name": "d",
         "patch": "merge", "body": {"status": {"replicas": 2}}},
        {"call": "dry-run"},
    ]);
    for name in PROBES {
        let mut g = probe(name, ops.clone(), vec![]);
        g.store.data_mut().dry_run = true;
        let out = outcomes(&mut g, &event(EventKind::Added, &pod("web-0", "8"), false));
        assert!(out.iter().all(|o| o["ok"] == true), "{name}: {out:?}");
        // The default answer is the named object.
        assert_eq!(out[0]["object"]["metadata"]["name"], "cm", "{name}");
        assert_eq!(out[1]["object"]["data"]["a"], "1", "{name}");
        assert!(out[7]["object"].is_null(), "{name}: delete answered none");
        assert_eq!(out[12]["dry_run"], true, "{name}");

        let calls = g.kube_calls();
        let summary: Vec<Value> = calls
            .iter()
            .map(|c| {
                json!([
                    c.verb,
                    c.resource,
                    c.namespace,
                    c.name,
                    c.patch,
                    c.body,
                    c.force,
                    c.delete.as_ref().map(|(u, r, p)| json!([u, r, p]))
                ])
            })
            .collect();
        let want = vec![
            json!([
                "get",
                "v1/configmaps",
                "shop",
                "cm",
                null,
                null,
                false,
                null
            ]),
            json!([
                "create",
                "v1/configmaps",
                "shop",
                null,
                null,
                body,
                false,
                null
            ]),
            json!([
                "replace",
                "v1/configmaps",
                "shop",
                "cm",
                null,
                body,
                false,
                null
            ]),
            json!(["patch", "v1/pods", "shop", "web-0", "merge", {"metadata": {"labels": {"x": "1"}}}, false, null]),
            json!(["patch", "v1/pods", "shop", "web-0", "json", [{"op": "remove", "path": "/metadata/labels/x"}], false, null]),
            json!(["patch", "v1/pods", "shop", "web-0", "strategic-merge",
                   {"spec": {"containers": [{"name": "c", "image": "img:2"}]}}, false, null]),
            json!(["patch", "v1/pods", "shop", "web-0", "apply",
                   {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0"}}, true, null]),
            json!([
                "delete",
                "v1/pods",
                "shop",
                "web-0",
                null,
                null,
                false,
                ["uid-web-0", "8", "foreground"]
            ]),
            json!([
                "delete",
                "v1/namespaces",
                null,
                "old",
                null,
                null,
                false,
                [null, null, null]
            ]),
            json!([
                "get-status",
                "apps/v1/deployments",
                "shop",
                "d",
                null,
                null,
                false,
                null
            ]),
            json!(["replace-status", "apps/v1/deployments", "shop", "d", null, {"status": {"replicas": 1}}, false, null]),
            json!(["patch-status", "apps/v1/deployments", "shop", "d", "merge", {"status": {"replicas": 2}}, false, null]),
        ];
        assert_eq!(summary, want, "{name}");
    }
}

#[test]
fn every_api_error_comes_back_as_its_kind() {
    let errors = [
        (
            "forbidden",
            ApiError::Forbidden("no [[write]] grant".into()),
        ),
        (
            "not-found",
            ApiError::NotFound("pods \"x\" not found".into()),
        ),
        (
            "conflict",
            ApiError::Conflict("the object has been modified".into()),
        ),
        ("already-exists", ApiError::AlreadyExists("exists".into())),
        (
            "invalid",
            ApiError::Invalid(InvalidDetails {
                message: "Pod is invalid".into(),
                causes: vec![Cause {
                    field: "metadata.labels".into(),
                    reason: "FieldValueInvalid".into(),
                    message: "bad value".into(),
                }],
            }),
        ),
        ("rate-limited", ApiError::RateLimited("write_qps".into())),
        ("timeout", ApiError::Timeout("10000 ms".into())),
        ("unavailable", ApiError::Unavailable("503".into())),
    ];
    let patch = json!({"call": "patch", "resource": "v1/pods", "namespace": "shop", "name": "web-0",
                       "patch": "merge", "body": {}});
    let ops: Vec<Value> = errors.iter().map(|_| patch.clone()).collect();
    for name in PROBES {
        let mut g = probe(name, json!(ops), vec![]);
        for (_, e) in &errors {
            g.answer_kube(Err(e.clone()));
        }
        let out = outcomes(&mut g, &event(EventKind::Added, &pod("web-0", "8"), false));
        for ((kind, _), o) in errors.iter().zip(&out) {
            assert_eq!(o["ok"], false, "{name}: {o}");
            assert_eq!(o["error"], *kind, "{name}: {o}");
            let m = o["message"].as_str().unwrap();
            assert!(m.contains(kind), "{name}: the message names the kind: {m}");
        }
        let invalid = &out[4]["message"].as_str().unwrap();
        assert!(
            invalid.contains("Pod is invalid") && invalid.contains("metadata.labels"),
            "{name}: the message has the cause: {invalid}"
        );
    }
}

#[test]
fn events_are_published_about_the_event_object() {
    let ops = json!([
        {"call": "event", "event": {"type": "warning", "reason": "BadImage", "action": "Audit", "note": "evil.example"}},
        {"call": "event", "event": {"type": "normal", "reason": "Fixed", "action": "Audit", "note": ""}},
        {"call": "event", "event": {"type": "warning", "reason": "BadImage", "action": "Audit", "note": "again"}},
    ]);
    let object = pod("web-0", "8");
    for name in PROBES {
        let mut g = probe(name, ops.clone(), vec![]);
        g.answer_event(Ok(()));
        g.answer_event(Ok(()));
        g.answer_event(Err(ApiError::Forbidden("events = true is not set".into())));
        let out = outcomes(&mut g, &event(EventKind::Added, &object, false));
        assert_eq!(out[0]["ok"], true, "{name}: {out:?}");
        assert_eq!(out[1]["ok"], true, "{name}: {out:?}");
        assert_eq!(out[2]["error"], "forbidden", "{name}: {out:?}");
        let got: Vec<_> = g
            .published()
            .iter()
            .map(|p| {
                (
                    p.regarding.clone(),
                    p.type_.clone(),
                    p.reason.clone(),
                    p.action.clone(),
                    p.note.clone(),
                )
            })
            .collect();
        let r = reference_of(&object);
        assert_eq!(
            got,
            vec![
                (
                    r.clone(),
                    "warning".into(),
                    "BadImage".into(),
                    "Audit".into(),
                    "evil.example".into()
                ),
                (
                    r,
                    "normal".into(),
                    "Fixed".into(),
                    "Audit".into(),
                    String::new()
                ),
            ],
            "{name}"
        );
    }
}

#[test]
fn cache_queries_answer_with_references_for_the_call() {
    let pods: Vec<Cached> = (0..40).map(|i| pod(&format!("p{i:02}"), "1")).collect();
    let ops = json!([
        {"call": "cache-list", "resource": PODS, "namespace": "shop"},
        {"call": "by-index", "resource": PODS, "index": "namespace", "value": "shop"},
        {"call": "cache-get", "resource": PODS, "key": "shop/p07"},
        {"call": "cache-get", "resource": PODS, "key": "shop/missing"},
        {"call": "cache-list", "resource": PODS, "selector": "app=nope"},
        {"call": "cache-list", "resource": "v1/secrets"},
    ]);
    let keys: Vec<String> = pods.iter().map(|p| p.key.clone()).collect();
    for name in PROBES {
        let mut g = probe(name, ops.clone(), pods.clone());
        for round in 0..3 {
            let out = outcomes(&mut g, &event(EventKind::Synced, &pods[0], false));
            assert_eq!(out[0]["keys"], json!(keys), "{name}");
            assert_eq!(out[1]["keys"], json!(keys), "{name}");
            assert_eq!(out[2]["keys"], json!(["shop/p07"]), "{name}");
            assert_eq!(out[3]["keys"], json!([]), "{name}");
            assert_eq!(out[4]["keys"], json!([]), "{name}");
            assert_eq!(out[5]["error"], "cache:forbidden", "{name}: {}", out[5]);
            // One call referenced every object of both queries.
            assert!(
                g.store.data().max_refs >= 81,
                "{name} round {round}: {}",
                g.store.data().max_refs
            );
        }
        // Beyond the call's limit, a query is refused with `too-many-objects`.
        g.store.data_mut().max_refs_per_call = 10;
        let out = outcomes(&mut g, &event(EventKind::Synced, &pods[0], false));
        assert_eq!(
            out[0]["error"], "cache:too-many-objects",
            "{name}: {}",
            out[0]
        );
        let m = out[0]["message"].as_str().unwrap();
        assert!(m.contains("at most 10 objects"), "{name}: {m}");
        assert_eq!(out[2]["keys"], json!(["shop/p07"]), "{name}");
    }
}

#[test]
fn an_object_kept_past_its_call_is_a_clear_error_not_a_trap() {
    for op in ["use-after", "use-event-after"] {
        for name in ["js-probe", "py-probe"] {
            let mut g = probe(name, json!([{ "call": op }]), vec![]);
            let first = outcomes(&mut g, &event(EventKind::Added, &pod("a", "1"), false));
            assert_eq!(first[0]["ok"], true, "{name} {op}");
            let second = outcomes(&mut g, &event(EventKind::Added, &pod("b", "1"), false));
            assert_eq!(second[0]["ok"], false, "{name} {op}: {second:?}");
            let m = second[0]["message"].as_str().unwrap();
            assert!(m.contains("after the call"), "{name} {op}: {m}");
            // The instance carries on: the error was raised, not a trap.
            let third = outcomes(&mut g, &event(EventKind::Added, &pod("c", "1"), false));
            assert_eq!(third[0]["ok"], false, "{name} {op}: {third:?}");
        }
    }
}

#[test]
fn a_c_plugin_that_keeps_a_reference_past_its_call_traps() {
    // What the JS and Python SDKs guard against and the C guide forbids: the
    // host (like this harness) refuses a reference from an earlier call.
    let mut g = probe("c-probe", json!([{"call": "use-after"}]), vec![]);
    let first = outcomes(&mut g, &event(EventKind::Added, &pod("a", "1"), false));
    assert_eq!(first[0]["ok"], true);
    let trap = g
        .try_on_event(&event(EventKind::Added, &pod("b", "1"), false))
        .expect_err("a stale reference traps");
    assert!(
        format!("{trap:?}").contains("not valid in this call"),
        "{trap:?}"
    );
}

fn with_meta(name: &str, finalizers: &[&str], deleting: bool) -> Cached {
    let mut v = pod(name, "5").value.clone();
    v["metadata"]["finalizers"] = json!(finalizers);
    if deleting {
        v["metadata"]["deletionTimestamp"] = json!("2026-01-02T00:00:00Z");
    }
    cached(PODS, &v)
}

/// The probes whose SDK has a finalizer helper (api-probe is the Rust SDK's).
const FINALIZER_PROBES: [&str; 3] = ["js-probe", "py-probe", "api-probe"];
const F: &str = "example.com/cleanup";

/// The objects of the finalizer tests, in every state the helper tells apart.
fn finalizer_cache() -> Vec<Cached> {
    vec![
        with_meta("fresh", &[], false),
        with_meta("other", &["x"], false),
        with_meta("live", &["x", F], false),
        with_meta("dying", &["x", F], true),
        with_meta("done", &["x"], true),
    ]
}

/// A `finalizer` op for the pod `name`, with `extra` fields.
fn finalizer_op(name: &str, extra: Value) -> Value {
    let mut op = json!({"call": "finalizer", "resource": PODS, "namespace": "shop", "name": name,
                        "key": format!("shop/{name}"), "finalizer": F});
    if let Value::Object(m) = extra {
        op.as_object_mut().unwrap().extend(m);
    }
    op
}

/// Runs `ops` through a fresh probe over `finalizer_cache()` and returns each
/// op's (step, action) and every patch sent, as `[name, body]`.
fn run_finalizer(name: &str, ops: &[Value], dry_run: bool) -> (Vec<(String, String)>, Vec<Value>) {
    let cache = finalizer_cache();
    let mut g = probe(name, json!(ops), cache.clone());
    g.store.data_mut().dry_run = dry_run;
    let out = outcomes(&mut g, &event(EventKind::Added, &cache[0], false));
    let steps = out
        .iter()
        .map(|o| {
            assert_eq!(o["ok"], true, "{name}: {o}");
            (
                o["step"].as_str().unwrap().into(),
                o["action"].as_str().unwrap().into(),
            )
        })
        .collect();
    let patches = g
        .kube_calls()
        .iter()
        .map(|c| {
            assert_eq!(
                (c.verb.as_str(), c.patch.as_deref()),
                ("patch", Some("json")),
                "{name}"
            );
            json!([c.name, c.body])
        })
        .collect();
    (steps, patches)
}

fn step(a: &str, b: &str) -> (String, String) {
    (a.to_string(), b.to_string())
}

/// The add patch the helpers send for the pod `name` (uid `uid-NAME`,
/// resourceVersion 5) that has no finalizer (`first`) or others.
fn add_patch(name: &str, first: bool) -> Value {
    let add = if first {
        json!({"op": "add", "path": "/metadata/finalizers", "value": [F]})
    } else {
        json!({"op": "add", "path": "/metadata/finalizers/-", "value": F})
    };
    json!([name, [{"op": "test", "path": "/metadata/uid", "value": format!("uid-{name}")},
                  {"op": "test", "path": "/metadata/resourceVersion", "value": "5"},
                  add]])
}

/// The removal patch for the pod `name` whose finalizer is at `at`.
fn remove_patch(name: &str, at: usize) -> Value {
    json!([name, [{"op": "test", "path": "/metadata/uid", "value": format!("uid-{name}")},
                  {"op": "test", "path": format!("/metadata/finalizers/{at}"), "value": F},
                  {"op": "remove", "path": format!("/metadata/finalizers/{at}")}]])
}

#[test]
fn finalizer_helpers_add_run_and_remove_their_finalizer() {
    let ops: Vec<Value> = ["fresh", "other", "live", "dying", "done", "gone"]
        .iter()
        .map(|n| finalizer_op(n, json!({})))
        .collect();
    for name in FINALIZER_PROBES {
        let (steps, patches) = run_finalizer(name, &ops, false);
        assert_eq!(
            steps,
            vec![
                step("none", "done"),
                step("none", "done"),
                step("apply", "requeue 1000"),
                step("cleanup", "done"),
                step("none", "done"),
                step("none", "done"),
            ],
            "{name}"
        );
        assert_eq!(
            patches,
            vec![
                add_patch("fresh", true),
                add_patch("other", false),
                remove_patch("dying", 1)
            ],
            "{name}"
        );
        // The object went away before the finalizer's removal: still done.
        let cache = finalizer_cache();
        let mut g = probe(
            name,
            json!([finalizer_op("dying", json!({}))]),
            cache.clone(),
        );
        g.answer_kube(Err(ApiError::NotFound("gone".into())));
        let out = outcomes(&mut g, &event(EventKind::Added, &cache[0], false));
        assert_eq!(
            (out[0]["ok"].clone(), out[0]["step"].clone()),
            (json!(true), json!("cleanup")),
            "{name}"
        );
    }
}

#[test]
fn finalizer_patches_test_the_uid_so_a_recreated_object_keeps_its_finalizer() {
    // Every patch a helper sends starts with a test of the uid of the object
    // it read, whatever the state (live or dry run).
    let ops: Vec<Value> = ["fresh", "other", "dying"]
        .iter()
        .map(|n| finalizer_op(n, json!({})))
        .collect();
    for name in FINALIZER_PROBES {
        for dry_run in [false, true] {
            let (_, patches) = run_finalizer(name, &ops, dry_run);
            assert_eq!(patches.len(), 3, "{name} dry_run={dry_run}: {patches:?}");
            for p in &patches {
                let object = p[0].as_str().unwrap();
                assert_eq!(
                    p[1][0],
                    json!({"op": "test", "path": "/metadata/uid", "value": format!("uid-{object}")}),
                    "{name} dry_run={dry_run}: {p}"
                );
            }
        }
    }
}

#[test]
fn a_cleanup_that_asks_for_a_requeue_keeps_the_finalizer() {
    let ops = [finalizer_op("dying", json!({"cleanup_requeue_ms": 2000}))];
    for name in FINALIZER_PROBES {
        for dry_run in [false, true] {
            let (steps, patches) = run_finalizer(name, &ops, dry_run);
            assert_eq!(
                steps,
                vec![step("cleanup", "requeue 2000")],
                "{name} dry_run={dry_run}"
            );
            assert_eq!(
                patches,
                Vec::<Value>::new(),
                "{name} dry_run={dry_run}: no removal"
            );
        }
    }
}

#[test]
fn a_cleanup_that_fails_keeps_the_finalizer() {
    let cache = finalizer_cache();
    for name in FINALIZER_PROBES {
        let ops = json!([finalizer_op("dying", json!({"cleanup_fails": true}))]);
        let mut g = probe(name, ops, cache.clone());
        let out = outcomes(&mut g, &event(EventKind::Added, &cache[0], false));
        assert_eq!(out[0]["ok"], false, "{name}: {}", out[0]);
        assert!(
            out[0]["message"]
                .as_str()
                .unwrap()
                .contains("cleanup failed"),
            "{name}: {}",
            out[0]
        );
        assert_eq!(g.kube_calls(), &[], "{name}: no removal");
    }
}

#[test]
fn under_dry_run_the_finalizer_helpers_send_what_a_live_run_would() {
    let ops: Vec<Value> = ["fresh", "other", "live", "dying", "done", "gone"]
        .iter()
        .map(|n| finalizer_op(n, json!({})))
        .collect();
    for name in FINALIZER_PROBES {
        let (steps, patches) = run_finalizer(name, &ops, true);
        assert_eq!(
            steps,
            vec![
                // The add does not persist: apply at once, as the next
                // reconcile of a live run would.
                step("apply", "requeue 1000"),
                step("apply", "requeue 1000"),
                step("apply", "requeue 1000"),
                step("cleanup", "done"),
                // Being deleted without the finalizer, which a live run
                // would have added: clean up.
                step("cleanup", "done"),
                step("none", "done"),
            ],
            "{name}"
        );
        assert_eq!(
            patches,
            vec![
                add_patch("fresh", true),
                add_patch("other", false),
                remove_patch("dying", 1)
            ],
            "{name}: no removal for an object that lacks the finalizer"
        );
    }
}
