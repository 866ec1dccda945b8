//! Writes that plugins acting on the cluster rely on, checked against the store afterwards:
//! `dryRun=All` on every verb, field managers and server-side apply conflicts, DELETE
//! preconditions and propagation policies, and garbage collection through ownerReferences.

use crate::common;

use apisim::{RunningSim, SimConfig};
use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{
    Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy,
};
use serde_json::{json, Value};

const CM: &str = "/api/v1/namespaces/default/configmaps";
const DEP: &str = "/apis/apps/v1/namespaces/default/deployments";

fn deployment(name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "main", "image": "nginx:1", "ports": [{"containerPort": 80}]}]}}}
    })
}

/// Every stored object of the default namespace plus the resourceVersion: what a dry run must
/// leave exactly as it was.
fn snapshot(sim: &RunningSim) -> (u64, Vec<String>) {
    let s = sim.store();
    let mut all = Vec::new();
    for (rid, _) in s.registry().all() {
        for o in s.list_all(rid) {
            all.push(String::from_utf8(o.json.to_vec()).unwrap());
        }
    }
    (s.current_rv(), all)
}

#[tokio::test]
async fn dry_run_on_every_verb_validates_answers_and_persists_nothing() {
    let sim = start(SimConfig::default()).await;
    let store = sim.store().clone();
    let cms = store.rid("v1", "configmaps");
    let deps = store.rid("apps/v1", "deployments");
    store
        .create(cms, Some("default"), configmap("cm", "default", json!({})))
        .unwrap();
    store
        .create(deps, Some("default"), deployment("web"))
        .unwrap();
    let before = snapshot(&sim);
    let rv = store.current_rv();
    let cm = store.get(cms, "default", "cm").unwrap().value();
    let a = sim.addr();
    let j = |v: &Value| v.to_string();

    // POST: the would-be object, with server fields but no resourceVersion.
    let r = raw(
        a,
        "POST",
        &format!("{CM}?dryRun=All"),
        Some((
            "application/json",
            &j(&configmap("new", "default", json!({}))),
        )),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    let v = r.json();
    assert!(v["metadata"]["uid"].is_string() && v["metadata"]["creationTimestamp"].is_string());
    assert!(v["metadata"].get("resourceVersion").is_none(), "{v}");
    // ...validated like a real create.
    let r = raw(
        a,
        "POST",
        &format!("{CM}?dryRun=All"),
        Some((
            "application/json",
            &j(&configmap("cm", "default", json!({}))),
        )),
    )
    .await;
    assert_eq!(
        (r.code, r.json()["reason"].clone()),
        (409, json!("AlreadyExists"))
    );
    let r = raw(
        a,
        "POST",
        "/api/v1/namespaces/nowhere/configmaps?dryRun=All",
        Some(("application/json", &j(&configmap("x", "", json!({}))))),
    )
    .await;
    assert_eq!(r.code, 404);
    // PUT, including a stale one.
    let mut put = cm.clone();
    put["data"] = json!({"k": "put"});
    let r = raw(
        a,
        "PUT",
        &format!("{CM}/cm?dryRun=All"),
        Some(("application/json", &j(&put))),
    )
    .await;
    assert_eq!((r.code, r.json()["data"]["k"].clone()), (200, json!("put")));
    put["metadata"]["resourceVersion"] = json!("1");
    let r = raw(
        a,
        "PUT",
        &format!("{CM}/cm?dryRun=All"),
        Some(("application/json", &j(&put))),
    )
    .await;
    assert_eq!(r.code, 409);
    // PATCH of every type, apply included (on an existing and on an absent object).
    for (ct, body, want) in [
        (
            "application/merge-patch+json",
            json!({"data": {"k": "merge"}}),
            "merge",
        ),
        (
            "application/strategic-merge-patch+json",
            json!({"data": {"k": "smp"}}),
            "smp",
        ),
        (
            "application/json-patch+json",
            json!([{"op": "replace", "path": "/data/k", "value": "jp"}]),
            "jp",
        ),
        (
            "application/apply-patch+yaml",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"k": "ssa"}}),
            "ssa",
        ),
    ] {
        let r = raw(
            a,
            "PATCH",
            &format!("{CM}/cm?dryRun=All&fieldManager=t"),
            Some((ct, &j(&body))),
        )
        .await;
        assert_eq!(r.code, 200, "{ct}: {}", r.body);
        assert_eq!(r.json()["data"]["k"], want, "{ct}");
    }
    let r = raw(
        a,
        "PATCH",
        &format!("{CM}/absent?dryRun=All&fieldManager=t"),
        Some(("application/apply-patch+yaml", &j(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "absent"}, "data": {"a": "b"}})))),
    )
    .await;
    assert_eq!((r.code, r.json()["data"]["a"].clone()), (201, json!("b")));
    let r = raw(
        a,
        "PATCH",
        &format!("{CM}/absent?dryRun=All"),
        Some(("application/merge-patch+json", "{}")),
    )
    .await;
    assert_eq!(r.code, 404);
    // The status and scale subresources.
    let mut dep = store.get(deps, "default", "web").unwrap().value();
    dep["status"]["availableReplicas"] = json!(0);
    let r = raw(
        a,
        "PUT",
        &format!("{DEP}/web/status?dryRun=All"),
        Some(("application/json", &j(&dep))),
    )
    .await;
    assert_eq!(
        (r.code, r.json()["status"]["availableReplicas"].clone()),
        (200, json!(0))
    );
    let r = raw(
        a,
        "PATCH",
        &format!("{DEP}/web/status?dryRun=All"),
        Some((
            "application/merge-patch+json",
            r#"{"status":{"readyReplicas":0}}"#,
        )),
    )
    .await;
    assert_eq!(
        (r.code, r.json()["status"]["readyReplicas"].clone()),
        (200, json!(0))
    );
    let r = raw(
        a,
        "PATCH",
        &format!("{DEP}/web/scale?dryRun=All"),
        Some(("application/merge-patch+json", r#"{"spec":{"replicas":9}}"#)),
    )
    .await;
    assert_eq!(
        (r.code, r.json()["spec"]["replicas"].clone()),
        (200, json!(9))
    );
    // DELETE, one and a collection, with a body as kubectl sends it.
    let r = raw(a, "DELETE", &format!("{CM}/cm?dryRun=All"), None).await;
    assert_eq!(r.code, 200, "{}", r.body);
    let r = raw(
        a,
        "DELETE",
        &format!("{DEP}/web"),
        Some((
            "application/json",
            r#"{"dryRun":["All"],"propagationPolicy":"Foreground"}"#,
        )),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let r = raw(a, "DELETE", &format!("{CM}?dryRun=All"), None).await;
    assert_eq!(r.json()["items"].as_array().unwrap().len(), 1);
    // An unknown dryRun value is refused.
    let r = raw(a, "DELETE", &format!("{CM}/cm?dryRun=Yes"), None).await;
    assert_eq!(r.code, 400);

    assert_eq!(
        snapshot(&sim),
        before,
        "nothing was persisted and no resourceVersion moved"
    );
    let w = raw(
        a,
        "GET",
        &format!("/api/v1/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=1"),
        None,
    )
    .await;
    assert!(w.events().is_empty(), "no watch event: {}", w.body);
    let w = raw(
        a,
        "GET",
        &format!("/apis/apps/v1/deployments?watch=1&resourceVersion={rv}&timeoutSeconds=1"),
        None,
    )
    .await;
    assert!(w.events().is_empty(), "no watch event: {}", w.body);
    sim.shutdown().await;
}

fn fields_of(obj: &Value, manager: &str) -> Vec<Value> {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["manager"] == manager)
        .cloned()
        .collect()
}

#[tokio::test]
async fn field_managers_are_recorded_for_every_write_that_names_one() {
    let sim = start(SimConfig::default()).await;
    let api: Api<ConfigMap> = Api::namespaced(client(&sim), "default");
    let cm: ConfigMap =
        serde_json::from_value(configmap("m", "default", json!({"team": "a"}))).unwrap();
    api.create(
        &PostParams {
            field_manager: Some("creator".into()),
            ..Default::default()
        },
        &cm,
    )
    .await
    .unwrap();
    let store = sim.store();
    let get = || {
        store
            .get(store.rid("v1", "configmaps"), "default", "m")
            .unwrap()
            .value()
    };
    let v = get();
    let c = fields_of(&v, "creator");
    assert_eq!(c.len(), 1, "{v}");
    assert_eq!(c[0]["operation"], "Update");
    assert_eq!(c[0]["apiVersion"], "v1");
    assert_eq!(c[0]["fieldsType"], "FieldsV1");
    assert!(c[0]["time"].is_string());
    assert_eq!(
        c[0]["fieldsV1"],
        json!({"f:data": {".": {}, "f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:team": {}}}})
    );
    // Another manager changes one field: it owns that field, the creator keeps the rest.
    api.patch(
        "m",
        &PatchParams {
            field_manager: Some("editor".into()),
            ..Default::default()
        },
        &Patch::Merge(json!({"data": {"k": "edited"}})),
    )
    .await
    .unwrap();
    let v = get();
    assert_eq!(
        fields_of(&v, "editor")[0]["fieldsV1"],
        json!({"f:data": {"f:k": {}}})
    );
    assert_eq!(
        fields_of(&v, "creator")[0]["fieldsV1"],
        json!({"f:data": {}, "f:metadata": {"f:labels": {".": {}, "f:team": {}}}}),
        "the map itself, without the field taken"
    );
    // A write that changes nothing records nothing and keeps the resourceVersion.
    let rv = v["metadata"]["resourceVersion"].clone();
    api.patch(
        "m",
        &PatchParams {
            field_manager: Some("idle".into()),
            ..Default::default()
        },
        &Patch::Merge(json!({"data": {"k": "edited"}})),
    )
    .await
    .unwrap();
    let v2 = get();
    assert_eq!(v2["metadata"]["resourceVersion"], rv);
    assert!(fields_of(&v2, "idle").is_empty());
    // A status write is recorded against the status subresource.
    let deps: Api<Deployment> = Api::namespaced(client(&sim), "default");
    deps.create(
        &PostParams::default(),
        &serde_json::from_value(deployment("d")).unwrap(),
    )
    .await
    .unwrap();
    deps.patch_status(
        "d",
        &PatchParams {
            field_manager: Some("ctl".into()),
            ..Default::default()
        },
        &Patch::Merge(json!({"status": {"readyReplicas": 1}})),
    )
    .await
    .unwrap();
    let d = store
        .get(store.rid("apps/v1", "deployments"), "default", "d")
        .unwrap()
        .value();
    let e = &fields_of(&d, "ctl")[0];
    assert_eq!(e["subresource"], "status");
    assert_eq!(e["fieldsV1"], json!({"f:status": {"f:readyReplicas": {}}}));
    sim.shutdown().await;
}

#[tokio::test]
async fn server_side_apply_conflicts_name_the_field_and_manager_and_force_takes_over() {
    let sim = start(SimConfig::default()).await;
    let api: Api<Deployment> = Api::namespaced(client(&sim), "default");
    let store = sim.store();
    let get = || {
        store
            .get(store.rid("apps/v1", "deployments"), "default", "web")
            .unwrap()
            .value()
    };
    let cfg: Deployment = serde_json::from_value(deployment("web")).unwrap();
    api.patch("web", &PatchParams::apply("team-a"), &Patch::Apply(&cfg))
        .await
        .unwrap();
    let v = get();
    let a = &fields_of(&v, "team-a")[0];
    assert_eq!(a["operation"], "Apply");
    assert_eq!(a["fieldsV1"]["f:spec"]["f:replicas"], json!({}));
    assert!(
        a["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"main\"}"]
            ["f:image"]
            .is_object(),
        "{a}"
    );
    assert!(
        a["fieldsV1"].get("f:status").is_none(),
        "status is not owned through the main resource"
    );

    // team-b changes replicas and the image without force: 409 naming both fields.
    let mut other = deployment("web");
    other["spec"]["replicas"] = json!(5);
    other["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
    let other: Deployment = serde_json::from_value(other).unwrap();
    let rv = store.current_rv();
    match api
        .patch("web", &PatchParams::apply("team-b"), &Patch::Apply(&other))
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
            assert_eq!(
                s.message,
                "Apply failed with 2 conflicts: conflicts with \"team-a\":\n- .spec.replicas\n- .spec.template.spec.containers[name=\"main\"].image"
            );
        }
        other => panic!("expected 409, got {other:?}"),
    }
    let r = raw(
        sim.addr(),
        "PATCH",
        &format!("{DEP}/web?fieldManager=team-b"),
        Some((
            "application/apply-patch+yaml",
            &serde_json::to_string(&other).unwrap(),
        )),
    )
    .await;
    assert_eq!(
        r.json()["details"]["causes"],
        json!([
            {"reason": "FieldManagerConflict", "message": "conflict with \"team-a\"", "field": ".spec.replicas"},
            {"reason": "FieldManagerConflict", "message": "conflict with \"team-a\"", "field": ".spec.template.spec.containers[name=\"main\"].image"}
        ])
    );
    assert_eq!(store.current_rv(), rv, "a conflict writes nothing");
    assert_eq!(get()["spec"]["replicas"], 2);
    // Same values as team-a: shared ownership, no conflict.
    api.patch("web", &PatchParams::apply("team-c"), &Patch::Apply(&cfg))
        .await
        .unwrap();
    // force=true takes the fields over.
    api.patch(
        "web",
        &PatchParams::apply("team-b").force(),
        &Patch::Apply(&other),
    )
    .await
    .unwrap();
    let v = get();
    assert_eq!(v["spec"]["replicas"], 5);
    assert_eq!(
        v["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:2"
    );
    let a = &fields_of(&v, "team-a")[0]["fieldsV1"];
    assert!(
        a["f:spec"].get("f:replicas").is_none(),
        "team-a lost replicas: {a}"
    );
    assert!(
        a["f:spec"]["f:selector"].is_object(),
        "team-a keeps what was not taken"
    );
    assert!(fields_of(&v, "team-b")[0]["fieldsV1"]["f:spec"]["f:replicas"].is_object());
    // Now team-a is the one in conflict; an Update manager conflicts too, printed with its version.
    match api
        .patch("web", &PatchParams::apply("team-a"), &Patch::Apply(&cfg))
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => assert!(
            s.message.contains("conflicts with \"team-b\":"),
            "{}",
            s.message
        ),
        other => panic!("{other:?}"),
    }
    api.patch(
        "web",
        &PatchParams {
            field_manager: Some("scaler".into()),
            ..Default::default()
        },
        &Patch::Merge(json!({"spec": {"replicas": 7}})),
    )
    .await
    .unwrap();
    match api
        .patch("web", &PatchParams::apply("team-b"), &Patch::Apply(&other))
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => assert_eq!(
            s.message,
            "Apply failed with 1 conflict: conflict with \"scaler\" using apps/v1: .spec.replicas"
        ),
        other => panic!("{other:?}"),
    }
    // Apply needs a field manager; force is for apply only.
    let r = raw(
        sim.addr(),
        "PATCH",
        &format!("{DEP}/web"),
        Some(("application/apply-patch+yaml", "{}")),
    )
    .await;
    assert_eq!(r.code, 422);
    assert!(r.json()["message"]
        .as_str()
        .unwrap()
        .contains("fieldManager: Required value"));
    let r = raw(
        sim.addr(),
        "PATCH",
        &format!("{DEP}/web?force=true"),
        Some(("application/merge-patch+json", "{}")),
    )
    .await;
    assert_eq!(r.code, 422);
    sim.shutdown().await;
}

#[tokio::test]
async fn an_applier_removes_the_fields_it_no_longer_applies() {
    let sim = start(SimConfig::default()).await;
    let api: Api<ConfigMap> = Api::namespaced(client(&sim), "default");
    let full: ConfigMap = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "1", "b": "2"}}, "data": {"x": "1", "y": "2"}})).unwrap();
    api.patch("c", &PatchParams::apply("me"), &Patch::Apply(&full))
        .await
        .unwrap();
    // Someone else also sets y (same value): shared.
    let y: ConfigMap = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"y": "2"}})).unwrap();
    api.patch("c", &PatchParams::apply("you"), &Patch::Apply(&y))
        .await
        .unwrap();
    let less: ConfigMap = serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "1"}}, "data": {"x": "1"}})).unwrap();
    api.patch("c", &PatchParams::apply("me"), &Patch::Apply(&less))
        .await
        .unwrap();
    let v = sim
        .store()
        .get(sim.store().rid("v1", "configmaps"), "default", "c")
        .unwrap()
        .value();
    assert_eq!(
        v["metadata"]["labels"],
        json!({"a": "1"}),
        "b was only mine: removed"
    );
    assert_eq!(
        v["data"],
        json!({"x": "1", "y": "2"}),
        "y is still yours: kept"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn delete_preconditions_on_uid_and_resource_version() {
    let sim = start(SimConfig::default()).await;
    let api: Api<ConfigMap> = Api::namespaced(client(&sim), "default");
    let cm: ConfigMap = serde_json::from_value(configmap("p", "default", json!({}))).unwrap();
    let created = api.create(&PostParams::default(), &cm).await.unwrap();
    let (uid, rv) = (
        created.metadata.uid.clone().unwrap(),
        created.metadata.resource_version.clone().unwrap(),
    );
    let with = |uid: Option<&str>, rv: Option<&str>| DeleteParams {
        preconditions: Some(Preconditions {
            uid: uid.map(String::from),
            resource_version: rv.map(String::from),
        }),
        ..Default::default()
    };
    match api
        .delete("p", &with(Some("not-the-uid"), None))
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
            assert_eq!(
                s.message,
                format!("Operation cannot be fulfilled on configmaps \"p\": StorageError: invalid object, Code: 4, Key: /registry/configmaps/default/p, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: not-the-uid, UID in object meta: {uid}")
            );
        }
        other => panic!("{other:?}"),
    }
    match api
        .delete("p", &with(Some(&uid), Some("1")))
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert!(
                s.message.ends_with(&format!("Precondition failed: ResourceVersion in precondition: 1, ResourceVersion in object meta: {rv}")),
                "{}",
                s.message
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        api.get_opt("p").await.unwrap().is_some(),
        "a failed precondition deletes nothing"
    );
    api.delete("p", &with(Some(&uid), Some(&rv))).await.unwrap();
    assert!(api.get_opt("p").await.unwrap().is_none());
    sim.shutdown().await;
}

fn owned_service(name: &str, owner: &Deployment, block: bool) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": name, "ownerReferences": [{
            "apiVersion": "apps/v1", "kind": "Deployment", "name": owner.metadata.name,
            "uid": owner.metadata.uid, "controller": true, "blockOwnerDeletion": block
        }]},
        "spec": {"ports": [{"port": 80}]}
    }))
    .unwrap()
}

#[tokio::test]
async fn garbage_collection_follows_owner_references_for_every_policy() {
    let sim = start(SimConfig::default()).await;
    let c = client(&sim);
    let deps: Api<Deployment> = Api::namespaced(c.clone(), "default");
    let svcs: Api<Service> = Api::namespaced(c.clone(), "default");
    let store = sim.store().clone();
    let svc_rid = store.rid("v1", "services");
    let exists = |n: &str| store.get(svc_rid, "default", n).is_ok();
    let mk = |name: &str| {
        let d: Deployment = serde_json::from_value(deployment(name)).unwrap();
        let deps = deps.clone();
        async move { deps.create(&PostParams::default(), &d).await.unwrap() }
    };

    // Background (the default): the Deployment goes, then its Services.
    let web = mk("web").await;
    for n in ["web-a", "web-b"] {
        svcs.create(&PostParams::default(), &owned_service(n, &web, false))
            .await
            .unwrap();
    }
    let rv = store.current_rv();
    deps.delete("web", &DeleteParams::default()).await.unwrap();
    assert!(!exists("web-a") && !exists("web-b"), "dependents collected");
    let order: Vec<(String, String)> = store
        .changes_since(rv, 100)
        .unwrap()
        .iter()
        .map(|c| (c.kind.as_str().to_string(), c.object.name.clone()))
        .collect();
    assert_eq!(
        order[0],
        ("DELETED".to_string(), "web".to_string()),
        "the owner first: {order:?}"
    );
    assert_eq!(order.len(), 3, "{order:?}");

    // Orphan: the Services stay, without the reference.
    let api = mk("api").await;
    svcs.create(&PostParams::default(), &owned_service("api-a", &api, true))
        .await
        .unwrap();
    deps.delete(
        "api",
        &DeleteParams {
            propagation_policy: Some(PropagationPolicy::Orphan),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(deps.get_opt("api").await.unwrap().is_none());
    let orphan = store.get(svc_rid, "default", "api-a").unwrap().value();
    assert!(
        orphan["metadata"].get("ownerReferences").is_none(),
        "{orphan}"
    );

    // A dependent with another live owner stays and loses only the dangling reference.
    let one = mk("one").await;
    let two = mk("two").await;
    let mut shared = serde_json::to_value(owned_service("shared", &one, false)).unwrap();
    let mut second = serde_json::to_value(owned_service("x", &two, false)).unwrap()["metadata"]
        ["ownerReferences"][0]
        .clone();
    // At most one reference is the controller (ValidateOwnerReferences).
    second["controller"] = json!(false);
    shared["metadata"]["ownerReferences"]
        .as_array_mut()
        .unwrap()
        .push(second);
    svcs.create(
        &PostParams::default(),
        &serde_json::from_value(shared).unwrap(),
    )
    .await
    .unwrap();
    deps.delete("one", &DeleteParams::default()).await.unwrap();
    let s = store.get(svc_rid, "default", "shared").unwrap().value();
    assert_eq!(
        s["metadata"]["ownerReferences"].as_array().unwrap().len(),
        1
    );
    assert_eq!(
        s["metadata"]["ownerReferences"][0]["uid"],
        json!(two.metadata.uid)
    );
    deps.delete("two", &DeleteParams::default()).await.unwrap();
    assert!(!exists("shared"), "its last owner is gone");

    // Foreground: the owner waits, with the finalizer, for its blocking dependents.
    let fg = mk("fg").await;
    let mut held = serde_json::to_value(owned_service("fg-held", &fg, true)).unwrap();
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    svcs.create(
        &PostParams::default(),
        &serde_json::from_value(held).unwrap(),
    )
    .await
    .unwrap();
    svcs.create(
        &PostParams::default(),
        &owned_service("fg-free", &fg, false),
    )
    .await
    .unwrap();
    let answer = deps
        .delete("fg", &DeleteParams::foreground())
        .await
        .unwrap();
    let marked = answer.left().expect("the owner, still there");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(marked
        .metadata
        .finalizers
        .unwrap()
        .contains(&"foregroundDeletion".to_string()));
    assert!(!exists("fg-free"));
    let d = deps.get("fg").await.unwrap();
    assert!(d
        .metadata
        .finalizers
        .unwrap()
        .contains(&"foregroundDeletion".to_string()));
    assert!(exists("fg-held"), "held by its own finalizer");
    svcs.patch(
        "fg-held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(!exists("fg-held"));
    assert!(
        deps.get_opt("fg").await.unwrap().is_none(),
        "the owner goes once its dependents are gone"
    );
    sim.shutdown().await;
}

/// A writer that had not seen the owner's deletion creates a dependent of
/// it: the collector deletes that dependent at once, as a real cluster's
/// does. A reference to a kind this server does not serve (the workload's
/// ReplicaSets) is never judged dangling.
#[tokio::test]
async fn garbage_collection_takes_a_dependent_created_after_its_owner_went() {
    let sim = start(SimConfig::default()).await;
    let c = client(&sim);
    let deps: Api<Deployment> = Api::namespaced(c.clone(), "default");
    let svcs: Api<Service> = Api::namespaced(c.clone(), "default");
    let d: Deployment = serde_json::from_value(deployment("late")).unwrap();
    let owner = deps.create(&PostParams::default(), &d).await.unwrap();
    deps.delete("late", &DeleteParams::default()).await.unwrap();
    let created = svcs
        .create(
            &PostParams::default(),
            &owned_service("late-svc", &owner, false),
        )
        .await
        .unwrap();
    assert_eq!(created.metadata.name.as_deref(), Some("late-svc"));
    assert!(
        svcs.get_opt("late-svc").await.unwrap().is_none(),
        "a dependent whose only owner is gone is collected"
    );

    // A live owner keeps it; an owner kind the server does not serve too.
    let d: Deployment = serde_json::from_value(deployment("alive")).unwrap();
    let alive = deps.create(&PostParams::default(), &d).await.unwrap();
    svcs.create(
        &PostParams::default(),
        &owned_service("alive-svc", &alive, false),
    )
    .await
    .unwrap();
    assert!(svcs.get_opt("alive-svc").await.unwrap().is_some());
    let unknown: Service = serde_json::from_value(json!({
        "metadata": {"name": "rs-svc", "ownerReferences": [{
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc",
            "uid": "no-such-uid", "controller": true
        }]},
        "spec": {"ports": [{"port": 80}]}
    }))
    .unwrap();
    svcs.create(&PostParams::default(), &unknown).await.unwrap();
    assert!(svcs.get_opt("rs-svc").await.unwrap().is_some());
    sim.shutdown().await;
}

#[tokio::test]
async fn propagation_policy_in_the_query_and_bad_values() {
    let sim = start(SimConfig::default()).await;
    let store = sim.store().clone();
    let deps = store.rid("apps/v1", "deployments");
    let d = store
        .create(deps, Some("default"), deployment("q"))
        .unwrap();
    let cms = store.rid("v1", "configmaps");
    let mut cm = configmap("dep", "default", json!({}));
    cm["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "q", "uid": d.uid}]);
    store.create(cms, Some("default"), cm).unwrap();
    let r = raw(
        sim.addr(),
        "DELETE",
        &format!("{DEP}/q?propagationPolicy=Sideways"),
        None,
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.body);
    let r = raw(
        sim.addr(),
        "DELETE",
        &format!("{DEP}/q?propagationPolicy=Orphan"),
        None,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert!(store.get(cms, "default", "dep").is_ok(), "orphaned");
    sim.shutdown().await;
}
