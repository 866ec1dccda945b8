//! Per-kind behaviour through kube-client, checked against the store: which kinds keep
//! `metadata.generation`, the status a Deployment reports, events.k8s.io/v1 Events, the RBAC,
//! ServiceAccount and PodDisruptionBudget kinds, and what a DELETE answers.

use crate::common;

use apisim::SimConfig;
use common::*;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{json, Value};

fn dynamic(
    c: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    match ns {
        Some(ns) => Api::namespaced_with(c.clone(), ns, &ar),
        None => Api::all_with(c.clone(), &ar),
    }
}

async fn create(api: &Api<DynamicObject>, body: Value) -> Value {
    let o: DynamicObject = serde_json::from_value(body).unwrap();
    serde_json::to_value(api.create(&PostParams::default(), &o).await.unwrap()).unwrap()
}

fn deployment(name: &str, replicas: Option<i32>) -> Value {
    let mut d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
    });
    if let Some(r) = replicas {
        d["spec"]["replicas"] = json!(r);
    }
    d
}

#[tokio::test]
async fn generation_is_kept_only_where_the_apiserver_keeps_it() {
    let sim = start(SimConfig::default()).await;
    let c = client(&sim);
    let cases: Vec<(Api<DynamicObject>, Value, bool)> = vec![
        (
            dynamic(&c, "", "v1", "ConfigMap", "configmaps", Some("default")),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "g"}, "data": {"a": "1"}}),
            false,
        ),
        (
            dynamic(&c, "", "v1", "Secret", "secrets", Some("default")),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "g"}, "data": {}}),
            false,
        ),
        (
            dynamic(&c, "", "v1", "Service", "services", Some("default")),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "g"}, "spec": {"ports": [{"port": 80}]}}),
            false,
        ),
        (
            dynamic(&c, "", "v1", "Namespace", "namespaces", None),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "g"}}),
            false,
        ),
        (
            dynamic(
                &c,
                "coordination.k8s.io",
                "v1",
                "Lease",
                "leases",
                Some("default"),
            ),
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "g"}, "spec": {"holderIdentity": "a"}}),
            false,
        ),
        (
            dynamic(&c, "", "v1", "Event", "events", Some("default")),
            json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "g"}, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "R"}),
            false,
        ),
        (
            dynamic(
                &c,
                "",
                "v1",
                "ServiceAccount",
                "serviceaccounts",
                Some("default"),
            ),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "g"}}),
            false,
        ),
        (
            dynamic(
                &c,
                "rbac.authorization.k8s.io",
                "v1",
                "Role",
                "roles",
                Some("default"),
            ),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "g"}, "rules": []}),
            false,
        ),
        (
            dynamic(&c, "", "v1", "Pod", "pods", Some("default")),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "g"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}),
            true,
        ),
        (
            dynamic(
                &c,
                "apps",
                "v1",
                "Deployment",
                "deployments",
                Some("default"),
            ),
            deployment("g", Some(1)),
            true,
        ),
        (
            dynamic(
                &c,
                "policy",
                "v1",
                "PodDisruptionBudget",
                "poddisruptionbudgets",
                Some("default"),
            ),
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "g"}, "spec": {"minAvailable": 1}}),
            true,
        ),
    ];
    for (api, body, keeps) in cases {
        let kind = body["kind"].as_str().unwrap().to_string();
        let created = create(&api, body).await;
        let stored = {
            let s = sim.store();
            let rt_rid = s
                .registry()
                .find_kind(created["apiVersion"].as_str().unwrap(), &kind)
                .unwrap();
            let ns = created["metadata"]["namespace"].as_str().unwrap_or("");
            s.get(rt_rid, ns, "g").unwrap().value()
        };
        if keeps {
            assert_eq!(stored["metadata"]["generation"], 1, "{kind}");
        } else {
            assert!(
                stored["metadata"].get("generation").is_none(),
                "{kind}: {stored}"
            );
        }
        // A label change never bumps it.
        let after = api
            .patch(
                "g",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
            )
            .await
            .unwrap();
        assert_eq!(after.metadata.generation, keeps.then_some(1), "{kind}");
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn deployments_report_a_completed_rollout_of_every_spec_change() {
    let sim = start(SimConfig::default()).await;
    let c = client(&sim);
    let api: Api<Deployment> = Api::namespaced(c.clone(), "default");
    let d: Deployment = serde_json::from_value(deployment("web", None)).unwrap();
    api.create(&PostParams::default(), &d).await.unwrap();
    let store = sim.store();
    let rid = store.rid("apps/v1", "deployments");
    let check = |replicas: i64, generation: i64| {
        let v = store.get(rid, "default", "web").unwrap().value();
        assert_eq!(v["spec"]["replicas"], replicas, "defaulted or set");
        assert_eq!(v["metadata"]["generation"], generation);
        let st = &v["status"];
        assert_eq!(st["observedGeneration"], generation, "{st}");
        for k in [
            "replicas",
            "updatedReplicas",
            "readyReplicas",
            "availableReplicas",
        ] {
            assert_eq!(st[k], replicas, "{k}: {st}");
        }
        let conds: Vec<(String, String)> = st["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["type"].as_str().unwrap().into(),
                    c["status"].as_str().unwrap().into(),
                )
            })
            .collect();
        assert_eq!(
            conds,
            vec![
                ("Available".into(), "True".into()),
                ("Progressing".into(), "True".into())
            ]
        );
    };
    check(1, 1);
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .unwrap();
    check(3, 2);
    // /scale goes through the same rule.
    api.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await
    .unwrap();
    check(5, 3);
    // A status written through /status stays until the spec changes again.
    api.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"availableReplicas": 2}})),
    )
    .await
    .unwrap();
    assert_eq!(
        store.get(rid, "default", "web").unwrap().value()["status"]["availableReplicas"],
        2
    );
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
    )
    .await
    .unwrap();
    assert_eq!(
        store.get(rid, "default", "web").unwrap().value()["status"]["availableReplicas"],
        2
    );
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}}})),
    )
    .await
    .unwrap();
    check(5, 4);
    // Seeded through the Rust store: the same status.
    store
        .create(rid, Some("default"), deployment("seeded", Some(2)))
        .unwrap();
    let v = store.get(rid, "default", "seeded").unwrap().value();
    assert_eq!(
        (
            v["status"]["availableReplicas"].clone(),
            v["status"]["observedGeneration"].clone()
        ),
        (json!(2), json!(1))
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn events_k8s_io_v1_events_are_served() {
    let sim = start(SimConfig::default()).await;
    let c = client(&sim);
    let api: Api<Event> = Api::namespaced(c.clone(), "default");
    let rv = sim.store().current_rv().to_string();
    let mut w = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let ev: Event = serde_json::from_value(json!({
        "metadata": {"name": "web.1"},
        "regarding": {"kind": "Pod", "name": "web", "namespace": "default", "apiVersion": "v1"},
        "note": "pulled image", "reason": "Pulled", "action": "Pulling", "type": "Normal",
        "reportingController": "example.com/ctl", "reportingInstance": "ctl-1",
        "eventTime": "2026-01-01T00:00:00.000000Z"
    }))
    .unwrap();
    api.create(&PostParams::default(), &ev).await.unwrap();
    let patched = api
        .patch(
            "web.1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"series": {"count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(patched.series.unwrap().count, 2);
    let stored = sim
        .store()
        .get(
            sim.store().rid("events.k8s.io/v1", "events"),
            "default",
            "web.1",
        )
        .unwrap()
        .value();
    assert_eq!(stored["apiVersion"], "events.k8s.io/v1");
    assert_eq!(stored["regarding"]["name"], "web");
    assert_eq!(stored["note"], "pulled image");
    assert_eq!(stored["reportingController"], "example.com/ctl");
    assert_eq!(
        stored["series"]["lastObservedTime"],
        "2026-01-01T00:01:00.000000Z"
    );
    match tokio::time::timeout(PATIENCE, w.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        WatchEvent::Added(e) => assert_eq!(e.note.as_deref(), Some("pulled image")),
        other => panic!("{other:?}"),
    }
    let l = api
        .list(&ListParams::default().fields("reason=Pulled,regarding.name=web"))
        .await
        .unwrap();
    assert_eq!(l.items.len(), 1);
    // One store: the same Event through core v1, with the core field names.
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(c.clone(), "default");
    let core_items = core.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(core_items.len(), 1);
    assert_eq!(core_items[0].message.as_deref(), Some("pulled image"));
    assert_eq!(core_items[0].involved_object.name.as_deref(), Some("web"));
    // Discovery and OpenAPI know the group.
    let r = raw(sim.addr(), "GET", "/apis/events.k8s.io/v1", None).await;
    assert_eq!(r.json()["resources"][0]["kind"], "Event");
    let r = raw(sim.addr(), "GET", "/openapi/v3", None).await;
    assert!(r.json()["paths"]["apis/events.k8s.io/v1"].is_object());
    sim.shutdown().await;
}

#[tokio::test]
async fn delete_answers_the_object_or_a_success_status_as_the_kind_does() {
    let sim = start(SimConfig::default()).await;
    let c = client(&sim);
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let p: Pod = serde_json::from_value(
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}),
    )
    .unwrap();
    pods.create(&PostParams::default(), &p).await.unwrap();
    let r = raw(
        sim.addr(),
        "DELETE",
        "/api/v1/namespaces/default/pods/p",
        None,
    )
    .await;
    assert_eq!(r.json()["kind"], "Pod");
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(configmap("x", "default", json!({}))).unwrap();
    let uid = cms
        .create(&PostParams::default(), &cm)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let r = raw(
        sim.addr(),
        "DELETE",
        "/api/v1/namespaces/default/configmaps/x",
        None,
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(
        r.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
               "details": {"name": "x", "kind": "configmaps", "uid": uid}})
    );
    // kube-client takes either answer.
    let deps: Api<Deployment> = Api::namespaced(c.clone(), "default");
    let d: Deployment = serde_json::from_value(deployment("d", Some(1))).unwrap();
    deps.create(&PostParams::default(), &d).await.unwrap();
    let out = deps.delete("d", &DeleteParams::default()).await.unwrap();
    let status = out.right().expect("a Status for deployments");
    let details = status.details.unwrap();
    assert_eq!(
        (details.group.as_str(), details.kind.as_str()),
        ("apps", "deployments")
    );
    // A deletion held by a finalizer answers the object, which still exists.
    let mut held = configmap("held", "default", json!({}));
    held["metadata"]["finalizers"] = json!(["example.com/x"]);
    let held: ConfigMap = serde_json::from_value(held).unwrap();
    cms.create(&PostParams::default(), &held).await.unwrap();
    let out = cms.delete("held", &DeleteParams::default()).await.unwrap();
    let obj = out.left().expect("the object while deletion is pending");
    assert!(obj.metadata.deletion_timestamp.is_some());
    sim.shutdown().await;
}

#[tokio::test]
async fn timestamps_are_stored_in_the_apiservers_canonical_form() {
    // The Python client writes MicroTime as "...+00:00"; the apiserver stores "...Z".
    let sim = start(SimConfig::default()).await;
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
        "spec": {"holderIdentity": "a", "acquireTime": "2026-12-01T09:16:30.462743+00:00", "renewTime": "2026-12-01T11:16:31+02:00"}
    });
    let r = raw(
        sim.addr(),
        "POST",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        Some(("application/json", &lease.to_string())),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(
        r.json()["spec"]["acquireTime"],
        "2026-12-01T09:16:30.462743Z"
    );
    assert_eq!(r.json()["spec"]["renewTime"], "2026-12-01T09:16:31.000000Z");
    let ev = json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
        "eventTime": "2026-12-01T09:16:30.5+00:00", "reportingController": "a/b", "reportingInstance": "i",
        "action": "A", "reason": "R", "type": "Normal",
        "series": {"count": 2, "lastObservedTime": "2026-12-01T09:16:31.25-01:00"}
    });
    let r = raw(
        sim.addr(),
        "POST",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        Some(("application/json", &ev.to_string())),
    )
    .await;
    let stored = sim
        .store()
        .get(
            sim.store().rid("events.k8s.io/v1", "events"),
            "default",
            "e",
        )
        .unwrap()
        .value();
    assert_eq!(r.json(), stored);
    assert_eq!(stored["eventTime"], "2026-12-01T09:16:30.500000Z");
    assert_eq!(
        stored["series"]["lastObservedTime"],
        "2026-12-01T10:16:31.250000Z"
    );
    // metav1.Time has whole seconds.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]},
                     "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-01T09:16:30.999+00:00"}]}});
    let r = raw(
        sim.addr(),
        "POST",
        "/api/v1/namespaces/default/pods",
        Some(("application/json", &pod.to_string())),
    )
    .await;
    assert_eq!(
        r.json()["status"]["conditions"][0]["lastTransitionTime"],
        "2026-12-01T09:16:30Z"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn status_subresource_for_every_kind_that_has_one() {
    let sim = start(SimConfig::default()).await;
    let c = client(&sim);
    let crds = dynamic(
        &c,
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        None,
    );
    for (plural, kind, status) in [("widgets", "Widget", true), ("gizmos", "Gizmo", false)] {
        let mut version = json!({"name": "v1", "served": true, "storage": true,
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}});
        if status {
            version["subresources"] = json!({"status": {}});
        }
        create(
            &crds,
            json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{plural}.example.com")},
                "spec": {"group": "example.com", "scope": "Namespaced",
                         "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
                         "versions": [version]}
            }),
        )
        .await;
    }
    let cases: Vec<(Api<DynamicObject>, Value)> = vec![
        (
            dynamic(&c, "", "v1", "Pod", "pods", Some("default")),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "s"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}),
        ),
        (
            dynamic(&c, "", "v1", "Service", "services", Some("default")),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}),
        ),
        (
            dynamic(&c, "", "v1", "Namespace", "namespaces", None),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "s"}, "spec": {}}),
        ),
        (
            dynamic(
                &c,
                "apps",
                "v1",
                "Deployment",
                "deployments",
                Some("default"),
            ),
            deployment("s", Some(1)),
        ),
        (
            dynamic(
                &c,
                "policy",
                "v1",
                "PodDisruptionBudget",
                "poddisruptionbudgets",
                Some("default"),
            ),
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "s"}, "spec": {"minAvailable": 1}}),
        ),
        (
            dynamic(
                &c,
                "example.com",
                "v1",
                "Widget",
                "widgets",
                Some("default"),
            ),
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "s"}, "spec": {"size": 1}}),
        ),
        (crds.clone(), json!(null)),
    ];
    for (api, body) in cases {
        let name = if body.is_null() {
            "widgets.example.com".to_string()
        } else {
            create(&api, body).await;
            "s".to_string()
        };
        let before = serde_json::to_value(api.get(&name).await.unwrap()).unwrap();
        let pp = PatchParams::default();
        // Through /status: status changes, the rest does not.
        let after = api
            .patch_status(&name, &pp, &Patch::Merge(json!({"metadata": {"labels": {"via": "status"}}, "spec": {"changed": true}, "status": {"observed": "yes"}})))
            .await
            .unwrap();
        let after = serde_json::to_value(after).unwrap();
        assert_eq!(after["status"]["observed"], "yes", "{name}: {after}");
        assert_eq!(after["spec"], before["spec"], "{name}");
        assert_ne!(
            after["metadata"]["resourceVersion"],
            before["metadata"]["resourceVersion"]
        );
        // Through the main resource: status is ignored.
        let main = api
            .patch(
                &name,
                &pp,
                &Patch::Merge(json!({"status": {"observed": "main"}})),
            )
            .await
            .unwrap();
        assert_eq!(
            serde_json::to_value(main).unwrap()["status"]["observed"],
            "yes",
            "{name}"
        );
    }
    // Kinds without one: 404 on /status, and the main resource writes status.
    let r = raw(
        sim.addr(),
        "GET",
        "/api/v1/namespaces/default/configmaps/x/status",
        None,
    )
    .await;
    assert_eq!(r.code, 404);
    let gizmos = dynamic(&c, "example.com", "v1", "Gizmo", "gizmos", Some("default"));
    create(&gizmos, json!({"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": "g"}, "status": {"a": 1}})).await;
    let r = raw(
        sim.addr(),
        "GET",
        "/apis/example.com/v1/namespaces/default/gizmos/g/status",
        None,
    )
    .await;
    assert_eq!(r.code, 404);
    let g = gizmos
        .patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"a": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(serde_json::to_value(g).unwrap()["status"]["a"], 2);
    sim.shutdown().await;
}
