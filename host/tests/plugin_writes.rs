//! Plugins that act on the cluster: every guarantee of the `kube` and
//! `events` capabilities, checked on the server's side. A test plugin
//! (`api-probe`) makes the calls its config lists; the oracle is what the
//! simulator holds (read back with kube-client) and its request log (what was
//! actually sent), never the plugin's own report.

use crate::probe_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, PostParams};
use kube_informer::handler::{Delivery, Handler};
use kube_informer::object::{Object, Transform};
use probe_support::*;
use serde_json::json;
use wasm_informer_runtime::capability::kube::KubeSettings;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undeclared_resource_verb_and_namespace_are_forbidden_and_write_nothing() {
    let w = world().await;
    let a = w.seed_pod("team-a", "web").await;
    let b = w.seed_pod("team-b", "web").await;
    let settings = KubeSettings {
        grants: vec![grant("v1/pods", None, &["patch"], Some(&["team-a"]))],
        ..KubeSettings::default()
    };
    let ops = json!([
        // Undeclared resource.
        { "call": "create", "resource": "v1/configmaps", "namespace": "team-a",
          "body": { "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "x" } } },
        // Undeclared verb.
        { "call": "delete", "resource": "v1/pods", "namespace": "team-a", "name": "web" },
        // Undeclared namespace.
        label_patch("team-b", "web", "no"),
        // Undeclared subresource.
        { "call": "patch-status", "resource": "v1/pods", "namespace": "team-a", "name": "web",
          "patch": "merge", "body": { "status": { "phase": "Failed" } } },
        // Granted: the control that this setup writes when allowed.
        label_patch("team-a", "web", "yes"),
    ]);
    let (mut r, _) = w.probe(ops, settings).await;
    w.sim.request_log().clear();
    let out = trigger(&mut r, &a).await;
    for (i, o) in out[..4].iter().enumerate() {
        assert_eq!(o["error"], "forbidden", "op {i}: {o}");
        assert!(
            o["message"].as_str().unwrap().contains("[[write]]"),
            "op {i}: {o}"
        );
    }
    assert_eq!(out[4]["ok"], true, "{}", out[4]);
    // The server received exactly the granted write, and holds its effect only.
    let writes = w.writes();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(writes[0].method, "PATCH");
    assert_eq!(writes[0].path, "/api/v1/namespaces/team-a/pods/web");
    assert_eq!(
        writes[0].param("fieldManager").as_deref(),
        Some("wasm-informer/probe")
    );
    let a_now = w.pod("team-a", "web").await.unwrap();
    assert_eq!(a_now.metadata.labels.unwrap()["touched"], "yes");
    let b_now = w.pod("team-b", "web").await.unwrap();
    assert_eq!(b_now.metadata.resource_version, b.metadata.resource_version);
    assert!(Api::<ConfigMap>::namespaced(w.client.clone(), "team-a")
        .get_opt("x")
        .await
        .unwrap()
        .is_none());
    assert_eq!(r.status().snapshot().api.denied, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_replace_is_a_conflict_and_changes_nothing() {
    let w = world().await;
    let pod = w.seed_pod("team-a", "web").await;
    // The plugin's copy, then a change on the server that makes it stale.
    let mut stale = serde_json::to_value(&pod).unwrap();
    stale["metadata"]["labels"]["by"] = "plugin".into();
    let mut fresh = pod.clone();
    fresh
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("by".into(), "someone-else".into());
    Api::<Pod>::namespaced(w.client.clone(), "team-a")
        .replace("web", &PostParams::default(), &fresh)
        .await
        .unwrap();
    let mut no_rv = stale.clone();
    no_rv["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let settings = KubeSettings {
        grants: vec![grant("v1/pods", None, &["replace"], None)],
        ..KubeSettings::default()
    };
    let ops = json!([
        { "call": "replace", "resource": "v1/pods", "namespace": "team-a", "name": "web", "body": stale },
        { "call": "replace", "resource": "v1/pods", "namespace": "team-a", "name": "web", "body": no_rv },
    ]);
    let (mut r, _) = w.probe(ops, settings).await;
    w.sim.request_log().clear();
    let out = trigger(&mut r, &pod).await;
    assert_eq!(out[0]["error"], "conflict", "{}", out[0]);
    // A replace without the precondition is refused before it is sent.
    assert_eq!(out[1]["error"], "invalid", "{}", out[1]);
    let now = w.pod("team-a", "web").await.unwrap();
    assert_eq!(now.metadata.labels.unwrap()["by"], "someone-else");
    assert_eq!(
        w.writes().iter().filter(|r| r.method == "PUT").count(),
        1,
        "only the stale replace reached the server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_reach_the_plugin_typed_after_the_documented_retries() {
    let w = world().await;
    let pod = w.seed_pod("team-a", "web").await;
    let settings = KubeSettings {
        grants: vec![grant("v1/pods", None, &["patch"], None)],
        write_timeout: Duration::from_millis(3500),
        ..KubeSettings::default()
    };
    let (mut r, _) = w
        .probe(json!([label_patch("team-a", "web", "1")]), settings)
        .await;
    let patches = |w: &World| w.writes().iter().filter(|r| r.method == "PATCH").count();

    // A 500 without Retry-After: not retried, `unavailable`.
    w.sim.request_log().clear();
    w.sim.faults().fail_next_500(1);
    let out = trigger(&mut r, &pod).await;
    assert_eq!(out[0]["error"], "unavailable", "{}", out[0]);
    assert_eq!(patches(&w), 1, "a 500 is not retried");
    assert_eq!(w.sim.faults().stats().failures_with(500), 1);

    // Two 429s with Retry-After: 1 then success, within the call's time.
    w.sim.request_log().clear();
    w.sim.faults().fail_next_429(2, 1);
    let out = trigger(&mut r, &pod).await;
    assert_eq!(out[0]["ok"], true, "retried through two 429s: {}", out[0]);
    assert_eq!(patches(&w), 3);

    // More 429s than the call's time allows: `rate-limited`, after the retries
    // that fit (3 attempts at 1 s intervals within 3.5 s).
    w.sim.request_log().clear();
    w.sim.faults().fail_next_429(10, 1);
    let out = trigger(&mut r, &pod).await;
    assert_eq!(out[0]["error"], "rate-limited", "{}", out[0]);
    let tried = patches(&w);
    assert!((3..=4).contains(&tried), "{tried} attempts");
    w.sim.faults().reset();
    let now = w.pod("team-a", "web").await.unwrap();
    assert_eq!(
        now.metadata.labels.unwrap()["touched"],
        "1",
        "only the successful patch landed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_persists_nothing_and_returns_the_object() {
    let w = world().await;
    let pod = w.seed_pod("team-a", "web").await;
    let settings = KubeSettings {
        grants: vec![
            // An apply may create, so it needs `create` as well as `patch`.
            grant("v1/pods", None, &["patch", "delete", "create"], None),
            grant("v1/configmaps", None, &["create"], None),
        ],
        dry_run: true,
        ..KubeSettings::default()
    };
    let ops = json!([
        { "call": "dry-run" },
        { "call": "create", "resource": "v1/configmaps", "namespace": "team-a",
          "body": { "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "made" }, "data": { "k": "v" } } },
        label_patch("team-a", "web", "dry"),
        { "call": "patch", "resource": "v1/pods", "namespace": "team-a", "name": "web", "patch": "apply",
          "body": { "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "web", "namespace": "team-a", "labels": { "applied": "dry" } } } },
        { "call": "delete", "resource": "v1/pods", "namespace": "team-a", "name": "web" },
    ]);
    let (mut r, _) = w.probe(ops, settings).await;
    w.sim.request_log().clear();
    let out = trigger(&mut r, &pod).await;
    assert_eq!(out[0]["dry_run"], true);
    // Each write answered with the would-be object.
    assert_eq!(out[1]["object"]["data"]["k"], "v", "{}", out[1]);
    assert_eq!(
        out[2]["object"]["metadata"]["labels"]["touched"], "dry",
        "{}",
        out[2]
    );
    assert_eq!(
        out[3]["object"]["metadata"]["labels"]["applied"], "dry",
        "{}",
        out[3]
    );
    assert_eq!(out[4]["ok"], true, "{}", out[4]);
    // Every write carried dryRun=All, and nothing persisted.
    let writes = w.writes();
    assert_eq!(writes.len(), 4, "{writes:?}");
    for rec in &writes {
        assert_eq!(rec.param("dryRun").as_deref(), Some("All"), "{rec:?}");
    }
    let now = w
        .pod("team-a", "web")
        .await
        .expect("the dry-run delete kept the pod");
    assert_eq!(now.metadata.resource_version, pod.metadata.resource_version);
    assert!(Api::<ConfigMap>::namespaced(w.client.clone(), "team-a")
        .get_opt("made")
        .await
        .unwrap()
        .is_none());
    assert_eq!(r.status().snapshot().api.dry_run, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_grant_is_refused_at_the_next_call() {
    let w = world().await;
    let pod = w.seed_pod("team-a", "web").await;
    let with = KubeSettings {
        grants: vec![grant("v1/pods", None, &["patch"], None)],
        ..KubeSettings::default()
    };
    let (mut r, grants) = w
        .probe(json!([label_patch("team-a", "web", "before")]), with)
        .await;
    let out = trigger(&mut r, &pod).await;
    assert_eq!(out[0]["ok"], true, "{}", out[0]);
    // The reload's revocation: the same handle, replaced in place.
    grants.replace(KubeSettings::default());
    w.sim.request_log().clear();
    let out = trigger(&mut r, &pod).await;
    assert_eq!(out[0]["error"], "forbidden", "{}", out[0]);
    assert!(w.writes().is_empty(), "{:?}", w.writes());
    let now = w.pod("team-a", "web").await.unwrap();
    assert_eq!(now.metadata.labels.unwrap()["touched"], "before");
}

/// A plugin whose every call hangs (the simulator delays every answer) gets
/// `timeout` within its `write_timeout_ms`; it holds only its own thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_api_server_times_out_the_call_within_its_bound() {
    let w = world().await;
    let pod = w.seed_pod("team-a", "web").await;
    let settings = KubeSettings {
        grants: vec![grant("v1/pods", None, &["patch"], None)],
        write_timeout: Duration::from_millis(300),
        ..KubeSettings::default()
    };
    let (mut r, _) = w
        .probe(json!([label_patch("team-a", "web", "x")]), settings)
        .await;
    w.sim.faults().set_delay(Some(Duration::from_secs(5)));
    let started = Instant::now();
    let out = trigger(&mut r, &pod).await;
    let took = started.elapsed();
    w.sim.faults().set_delay(None);
    assert_eq!(out[0]["error"], "timeout", "{}", out[0]);
    assert!(
        w.sim.faults().stats().delayed_responses >= 1,
        "the delay fired"
    );
    // Bounded by the call's timeout, far below the server's 5 s.
    assert!(took < Duration::from_secs(3), "{took:?}");
    // The time blocked in the API call is not charged to the guest's deadline
    // (timeout_ms is 1000 ms by default and was not exceeded by guest code).
    assert_eq!(r.status().snapshot().traps, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_written_as_events_k8s_io_and_repeats_join_the_series() {
    let w = world().await;
    let pod = w.seed_pod("team-a", "web").await;
    let event = json!({ "call": "event", "event": {
        "type": "warning", "reason": "MissingLabel", "action": "Audit", "note": "no team label" } });
    let allowed = KubeSettings {
        events: Some(pod_events()),
        ..KubeSettings::default()
    };
    let (mut r, _) = w.probe(json!([event.clone()]), allowed).await;
    for _ in 0..3 {
        let out = trigger(&mut r, &pod).await;
        assert_eq!(out[0]["ok"], true, "{}", out[0]);
    }
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(w.client.clone(), "team-a");
    let list = events.list(&Default::default()).await.unwrap().items;
    assert_eq!(list.len(), 1, "three records, one Event: {list:?}");
    let e = &list[0];
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(e.reason.as_deref(), Some("MissingLabel"));
    assert_eq!(e.action.as_deref(), Some("Audit"));
    assert_eq!(e.note.as_deref(), Some("no team label"));
    assert_eq!(
        e.reporting_controller.as_deref(),
        Some("wasm-informer/probe")
    );
    assert_eq!(e.reporting_instance.as_deref(), Some("test-host"));
    let regarding = e.regarding.as_ref().unwrap();
    assert_eq!(regarding.kind.as_deref(), Some("Pod"));
    assert_eq!(regarding.name.as_deref(), Some("web"));
    assert_eq!(regarding.uid, pod.metadata.uid);
    assert_eq!(e.series.as_ref().map(|s| s.count), Some(3));

    // Without `events = true`: forbidden, and nothing is written.
    let (mut denied, _) = w.probe(json!([event]), KubeSettings::default()).await;
    w.sim.request_log().clear();
    let out = trigger(&mut denied, &pod).await;
    assert_eq!(out[0]["error"], "forbidden", "{}", out[0]);
    assert!(out[0]["message"]
        .as_str()
        .unwrap()
        .contains("does not grant `events`"));
    assert!(w.writes().is_empty());
}

/// I1 with writes: a plugin whose API calls hang holds only its own thread.
/// A neighbour on the same informer, fed at a fixed rate, keeps at least 95%
/// of what it handles when alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i1_a_plugin_blocked_on_a_hanging_api_server_stalls_no_neighbour() {
    use kube_informer::delta_fifo::DeltaFifo;
    use kube_informer::indexer::Indexer;
    use kube_informer::processor::Processor;
    use kube_informer::HandlerOptions;
    use std::sync::atomic::{AtomicU64, Ordering};

    let w = world().await;
    let seeded = w.seed_pod("team-a", "web").await;
    let settings = KubeSettings {
        grants: vec![grant("v1/pods", None, &["patch"], None)],
        write_timeout: Duration::from_millis(2000),
        write_qps: 0.0,
        ..KubeSettings::default()
    };
    /// Counts what it is given.
    struct Counter(Arc<AtomicU64>);
    impl Handler for Counter {
        async fn handle(&mut self, _n: kube_informer::NotificationRef) -> Delivery {
            self.0.fetch_add(1, Ordering::Relaxed);
            Delivery::Ok
        }
    }
    // One informer pipeline without a Reflector: the test is the source.
    let run = |with_writer: bool| {
        let w = &w;
        let seeded = seeded.clone();
        let settings = settings.clone();
        async move {
            let indexer = Arc::new(Indexer::new());
            let fifo = DeltaFifo::new(indexer.clone());
            let processor = Processor::new("v1/pods", indexer);
            processor.mark_synced();
            let seen = Arc::new(AtomicU64::new(0));
            let _neighbour = processor
                .add_handler(Counter(seen.clone()), HandlerOptions::named("neighbour"))
                .unwrap();
            let _writer = if with_writer {
                let (runner, _) = w
                    .probe(json!([label_patch("team-a", "web", "x")]), settings)
                    .await;
                Some(
                    processor
                        .add_handler(runner, HandlerOptions::named("writer"))
                        .unwrap(),
                )
            } else {
                None
            };
            // 2000 updates at 1000/s; the writer's every call hangs.
            let raw = serde_json::to_vec(&seeded).unwrap();
            let started = Instant::now();
            for i in 0..2000u32 {
                let due = started + Duration::from_millis(u64::from(i));
                tokio::time::sleep_until(due.into()).await;
                let mut o = Object::from_json(&raw, &Transform::default()).unwrap();
                o.meta.resource_version = i.to_string();
                fifo.update(Arc::new(o));
                fifo.pop_process(|p| processor.handle_deltas(p)).await;
            }
            // What the neighbour handled by the end of the offered window.
            tokio::time::sleep(Duration::from_millis(200)).await;
            seen.load(Ordering::Relaxed)
        }
    };
    let alone = run(false).await;
    w.sim.faults().set_delay(Some(Duration::from_secs(30)));
    let beside = run(true).await;
    w.sim.faults().set_delay(None);
    assert!(
        w.sim.faults().stats().delayed_responses >= 1,
        "the writer's calls hung"
    );
    assert!(alone >= 1900, "the neighbour keeps up when alone: {alone}");
    assert!(
        beside as f64 >= 0.95 * alone as f64,
        "neighbour handled {beside} beside the hung writer, {alone} alone"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_granted_verb_and_the_status_subresource_change_the_server() {
    let w = world().await;
    let pod = w.seed_pod("team-a", "web").await;
    let settings = KubeSettings {
        grants: vec![
            grant(
                "v1/pods",
                None,
                &["get", "create", "replace", "patch", "delete"],
                None,
            ),
            grant(
                "v1/pods",
                Some("status"),
                &["get", "replace", "patch"],
                None,
            ),
        ],
        write_qps: 0.0,
        ..KubeSettings::default()
    };
    w.sim.request_log().clear();

    // create
    let made = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "made", "namespace": "team-a" },
        "spec": { "containers": [{ "name": "c", "image": "img:1" }] },
    });
    let out = run_ops(
        &w,
        json!([{ "call": "create", "resource": "v1/pods", "namespace": "team-a", "body": made }]),
        &settings,
        &pod,
    )
    .await;
    assert_ok(&out);
    assert!(
        w.pod("team-a", "made").await.is_some(),
        "created on the server"
    );

    // get and patch
    let out = run_ops(
        &w,
        json!([
            { "call": "get", "resource": "v1/pods", "namespace": "team-a", "name": "web" },
            label_patch("team-a", "web", "patched"),
        ]),
        &settings,
        &pod,
    )
    .await;
    assert_ok(&out);
    assert_eq!(out[0]["object"]["metadata"]["name"], "web");
    let now = w.pod("team-a", "web").await.unwrap();
    assert_eq!(now.metadata.labels.as_ref().unwrap()["touched"], "patched");

    // replace, with the server's current resourceVersion
    let mut body = serde_json::to_value(&now).unwrap();
    body["metadata"]["labels"]["replaced"] = "yes".into();
    let out = run_ops(
        &w,
        json!([{ "call": "replace", "resource": "v1/pods", "namespace": "team-a", "name": "web", "body": body }]),
        &settings,
        &pod,
    )
    .await;
    assert_ok(&out);
    let now = w.pod("team-a", "web").await.unwrap();
    assert_eq!(now.metadata.labels.as_ref().unwrap()["replaced"], "yes");

    // the status subresource: patch, then get and replace
    let out = run_ops(
        &w,
        json!([{ "call": "patch-status", "resource": "v1/pods", "namespace": "team-a", "name": "web",
                 "patch": "merge", "body": { "status": { "message": "patched" } } }]),
        &settings,
        &pod,
    )
    .await;
    assert_ok(&out);
    let now = w.pod("team-a", "web").await.unwrap();
    assert_eq!(
        now.status.as_ref().and_then(|s| s.message.as_deref()),
        Some("patched")
    );
    let mut body = serde_json::to_value(&now).unwrap();
    body["status"]["message"] = "replaced".into();
    let out = run_ops(
        &w,
        json!([
            { "call": "get-status", "resource": "v1/pods", "namespace": "team-a", "name": "web" },
            { "call": "replace-status", "resource": "v1/pods", "namespace": "team-a", "name": "web", "body": body },
        ]),
        &settings,
        &pod,
    )
    .await;
    assert_ok(&out);
    assert_eq!(out[0]["object"]["status"]["message"], "patched");
    let now = w.pod("team-a", "web").await.unwrap();
    assert_eq!(
        now.status.as_ref().and_then(|s| s.message.as_deref()),
        Some("replaced")
    );

    // delete
    let out = run_ops(
        &w,
        json!([{ "call": "delete", "resource": "v1/pods", "namespace": "team-a", "name": "made" }]),
        &settings,
        &pod,
    )
    .await;
    assert_ok(&out);
    assert!(
        w.pod("team-a", "made").await.is_none(),
        "deleted on the server"
    );

    // Each write went out once, the status ones to the subresource.
    let writes: Vec<(String, bool)> = w
        .writes()
        .iter()
        .map(|r| (r.method.clone(), r.path.ends_with("/status")))
        .collect();
    assert_eq!(
        writes,
        vec![
            ("POST".to_string(), false),
            ("PATCH".to_string(), false),
            ("PUT".to_string(), false),
            ("PATCH".to_string(), true),
            ("PUT".to_string(), true),
            ("DELETE".to_string(), false),
        ],
        "{writes:?}"
    );
}

/// A component built against the frozen WIT 0.2.0 (before `kube.apply`)
/// loads into this host unchanged and writes through the 0.2.0 `kube.patch`:
/// the server holds its label.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_built_for_0_2_0_still_loads_and_writes() {
    let w = world().await;
    let pod = w.seed_pod("team-a", "web").await;
    let settings = KubeSettings {
        grants: vec![grant("v1/pods", None, &["patch"], None)],
        ..KubeSettings::default()
    };
    let mut spec = wasm_informer_runtime::PluginSpec::new("echo-v02");
    spec.config_json = json!({ "label": "era" }).to_string();
    spec.kube = settings.clone();
    let plugin = wasm_informer_runtime::LoadedPlugin::from_file(
        &w.engine,
        spec,
        std::path::Path::new(plugin_artifacts::ECHO_V02),
    )
    .unwrap();
    assert_eq!(
        plugin.world(),
        wasm_informer_runtime::World::EventHandlerV02
    );
    let mut runner =
        wasm_informer_runtime::PluginRunner::start(w.engine.clone(), plugin, w.services(&settings))
            .await
            .unwrap();
    let raw = serde_json::to_vec(&pod).unwrap();
    let object = Arc::new(Object::from_json(&raw, &Transform::default()).unwrap());
    let n = Arc::new(kube_informer::notification::Notification {
        kind: kube_informer::notification::EventKind::Added,
        resource: "v1/pods".into(),
        key: object.key().into(),
        object,
        old: None,
        in_initial_list: false,
        final_state_unknown: false,
    });
    assert_eq!(runner.handle(n).await, Delivery::Ok);
    let now = w.pod("team-a", "web").await.unwrap();
    assert_eq!(now.metadata.labels.unwrap()["era"], "v02");
    let patches: Vec<_> = w
        .writes()
        .into_iter()
        .filter(|r| r.method == "PATCH")
        .collect();
    assert_eq!(patches.len(), 1, "{patches:?}");
    assert_eq!(patches[0].path, "/api/v1/namespaces/team-a/pods/web");
}

/// An Event a plugin recorded (events.k8s.io/v1) is what kubectl shows in
/// `get events -A` (core v1) and in `describe pod`: one store, both APIs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_shows_the_event_a_plugin_recorded() {
    let w = world().await;
    let pod = w.seed_pod("team-a", "web").await;
    let settings = KubeSettings {
        events: Some(pod_events()),
        ..KubeSettings::default()
    };
    let event = json!({ "call": "event", "event": {
        "type": "warning", "reason": "MissingLabel", "action": "Audit", "note": "no team label" } });
    let (mut r, _) = w.probe(json!([event]), settings).await;
    let out = trigger(&mut r, &pod).await;
    assert_eq!(out[0]["ok"], true, "{}", out[0]);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    w.sim.write_kubeconfig(&kubeconfig).unwrap();
    let kubectl = |args: &[&str]| {
        let out = tokio::task::block_in_place(|| {
            std::process::Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(args)
                .output()
                .expect("kubectl is needed: apt-get install kubectl (scripts/setup.sh)")
        });
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let events = kubectl(&["get", "events", "-A"]);
    assert!(
        events.contains("MissingLabel")
            && events.contains("pod/web")
            && events.contains("no team label"),
        "{events}"
    );
    let described = kubectl(&["describe", "pod", "web", "-n", "team-a"]);
    let section = described.split("Events:").nth(1).unwrap_or_default();
    assert!(
        section.contains("Warning")
            && section.contains("MissingLabel")
            && section.contains("no team label"),
        "{described}"
    );
}
