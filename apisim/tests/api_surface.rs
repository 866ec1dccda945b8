//! The rest of the API surface through kube-client: resourceVersion semantics on lists, the status
//! subresource, discovery (including a kind registered by a CRD), deletecollection and dryRun.

use crate::common;

use apisim::SimConfig;
use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, VersionMatch};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::discovery::Discovery;
use serde_json::json;

#[tokio::test]
async fn list_resource_version_semantics() {
    let sim = start(SimConfig::default()).await;
    let store = sim.store().clone();
    let cms = store.rid("v1", "configmaps");
    store
        .create(cms, Some("default"), configmap("a", "default", json!({})))
        .unwrap();
    let at = store.current_rv();
    store
        .create(cms, Some("default"), configmap("b", "default", json!({})))
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client(&sim), "default");
    let names = |l: kube::api::ObjectList<ConfigMap>| {
        l.items
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect::<Vec<_>>()
    };
    // Exact: the snapshot at `at`, reported at that RV.
    let l = api
        .list(
            &ListParams::default()
                .at(&at.to_string())
                .matching(VersionMatch::Exact),
        )
        .await
        .unwrap();
    assert_eq!(l.metadata.resource_version, Some(at.to_string()));
    assert_eq!(names(l), vec!["a"]);
    // NotOlderThan and unset: the latest state.
    let l = api
        .list(
            &ListParams::default()
                .at(&at.to_string())
                .matching(VersionMatch::NotOlderThan),
        )
        .await
        .unwrap();
    assert_eq!(names(l), vec!["a", "b"]);
    let l = api.list(&ListParams::default().match_any()).await.unwrap();
    assert_eq!(
        l.metadata.resource_version,
        Some(store.current_rv().to_string())
    );
    // Too new: 504 Timeout (kube-client would retry it 15 times; this client does not retry).
    let mut cfg = kube::Config::new(sim.url().parse().unwrap());
    cfg.default_retry = false;
    let once: Api<ConfigMap> = Api::namespaced(kube::Client::try_from(cfg).unwrap(), "default");
    let future = (store.current_rv() + 100).to_string();
    match once
        .list(
            &ListParams::default()
                .at(&future)
                .matching(VersionMatch::NotOlderThan),
        )
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 504);
            assert!(
                s.message.starts_with("Timeout: Too large resource version"),
                "{}",
                s.message
            );
        }
        other => panic!("expected 504, got {other:?}"),
    }
    sim.faults().compact();
    match once
        .list(
            &ListParams::default()
                .at(&at.to_string())
                .matching(VersionMatch::Exact),
        )
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (410, "Expired")),
        other => panic!("expected 410, got {other:?}"),
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn status_subresource_is_separate_from_the_main_resource() {
    let sim = start(SimConfig::default()).await;
    let api: Api<Deployment> = Api::namespaced(client(&sim), "default");
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "d"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}
    }))
    .unwrap();
    api.create(&PostParams::default(), &d).await.unwrap();
    let pp = PatchParams::default();
    // Status written through the main resource is ignored...
    let after = api
        .patch(
            "d",
            &pp,
            &Patch::Merge(json!({"spec": {"replicas": 2}, "status": {"replicas": 7}})),
        )
        .await
        .unwrap();
    assert_eq!(after.spec.unwrap().replicas, Some(2));
    assert_eq!(
        after.status.unwrap().replicas,
        Some(2),
        "the status is the simulated controller's, not the 7 sent"
    );
    assert_eq!(after.metadata.generation, Some(2));
    // ...and spec written through /status is ignored.
    let st = api
        .patch_status(
            "d",
            &pp,
            &Patch::Merge(json!({"spec": {"replicas": 9}, "status": {"replicas": 7}})),
        )
        .await
        .unwrap();
    assert_eq!(st.status.unwrap().replicas, Some(7));
    assert_eq!(st.spec.unwrap().replicas, Some(2));
    assert_eq!(
        st.metadata.generation,
        Some(2),
        "status writes do not bump generation"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn discovery_lists_builtins_and_crd_kinds() {
    let sim = start(SimConfig::default()).await;
    let c = client(&sim);
    let v = c.apiserver_version().await.unwrap();
    assert_eq!((v.major.as_str(), v.minor.as_str()), ("1", "33"));
    let crds: Api<DynamicObject> = Api::all_with(
        c.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    let crd: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                 "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "nope.example.com"}, "spec": {"group": "example.com"}
    }))
    .unwrap();
    match crds.create(&PostParams::default(), &bad).await.unwrap_err() {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422);
            assert!(s.message.contains("spec.names.plural"), "{}", s.message);
        }
        other => panic!("expected 422, got {other:?}"),
    }
    let d = Discovery::new(c.clone()).run().await.unwrap();
    let kinds: Vec<String> = d
        .groups()
        .flat_map(|g| {
            g.recommended_resources()
                .into_iter()
                .map(|(ar, _)| format!("{}/{}", ar.api_version, ar.kind))
        })
        .collect();
    for k in [
        "v1/Pod",
        "v1/Namespace",
        "apps/v1/Deployment",
        "coordination.k8s.io/v1/Lease",
        "example.com/v1alpha1/Gadget",
    ] {
        assert!(kinds.contains(&k.to_string()), "{k} missing from {kinds:?}");
    }
    // The new kind is served, cluster-scoped.
    let gadgets: Api<DynamicObject> = Api::all_with(
        c,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("example.com", "v1alpha1", "Gadget"),
            "gadgets",
        ),
    );
    let g: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "example.com/v1alpha1", "kind": "Gadget", "metadata": {"name": "g1"}, "spec": {"x": 1}}),
    )
    .unwrap();
    gadgets.create(&PostParams::default(), &g).await.unwrap();
    assert_eq!(
        gadgets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn delete_collection_and_dry_run() {
    let sim = start(SimConfig::default()).await;
    let api: Api<Pod> = Api::namespaced(client(&sim), "default");
    for (n, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let p: Pod = serde_json::from_value(
            json!({"metadata": {"name": n, "labels": {"app": app}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}),
        )
        .unwrap();
        api.create(&PostParams::default(), &p).await.unwrap();
    }
    let dry: Pod = serde_json::from_value(
        json!({"metadata": {"name": "dry"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}),
    )
    .unwrap();
    let rv = sim.store().current_rv();
    api.create(
        &PostParams {
            dry_run: true,
            ..Default::default()
        },
        &dry,
    )
    .await
    .unwrap();
    assert_eq!(sim.store().current_rv(), rv, "dry run does not write");
    assert!(api.get_opt("dry").await.unwrap().is_none());
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("app=x"),
    )
    .await
    .unwrap();
    let left: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| p.metadata.name.unwrap())
        .collect();
    assert_eq!(left, vec!["c"]);
    sim.shutdown().await;
}

#[tokio::test]
async fn the_request_log_says_who_wrote_what_when_and_with_which_result() {
    let sim = start(SimConfig::default()).await;
    let mut config = kube::Config::new(sim.url().parse().unwrap());
    config.default_retry = false;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static("writer/1 (rep-a)"),
    ));
    let api: Api<ConfigMap> = Api::namespaced(kube::Client::try_from(config).unwrap(), "default");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let cm: ConfigMap =
        serde_json::from_value(configmap("log", "default", json!({"k": "v"}))).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    let err = api.create(&PostParams::default(), &cm).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err}"
    );
    api.get("log").await.unwrap();
    let writes: Vec<_> = sim
        .request_log()
        .entries()
        .into_iter()
        .filter(|r| r.user_agent == "writer/1 (rep-a)")
        .collect();
    assert_eq!(writes.len(), 3, "{writes:?}");
    assert_eq!((writes[0].method.as_str(), writes[0].status), ("POST", 201));
    assert_eq!((writes[1].method.as_str(), writes[1].status), ("POST", 409));
    assert_eq!((writes[2].method.as_str(), writes[2].status), ("GET", 200));
    assert!(writes[0].body.contains("\"k\":\"v\""), "{}", writes[0].body);
    assert!(writes[2].body.is_empty(), "GET bodies are not kept");
    assert!(writes[0].at_micros >= before && writes[0].at_micros <= writes[1].at_micros);
    assert!(writes[0].seq < writes[1].seq && writes[1].seq < writes[2].seq);
}

#[tokio::test]
async fn a_dry_run_server_side_apply_of_a_new_object_answers_it_and_stores_nothing() {
    let sim = start(SimConfig::default()).await;
    let api: Api<ConfigMap> = Api::namespaced(client(&sim), "default");
    let rv = sim.store().current_rv();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "new"}, "data": {"a": "1"}});
    let pp = PatchParams {
        dry_run: true,
        ..PatchParams::apply("test")
    };
    let got = api.patch("new", &pp, &Patch::Apply(&cm)).await.unwrap();
    assert_eq!(got.data.unwrap()["a"], "1");
    assert_eq!(sim.store().current_rv(), rv, "dry run does not write");
    assert!(api.get_opt("new").await.unwrap().is_none());
    // Its namespace must exist, as for a real create.
    let missing: Api<ConfigMap> = Api::namespaced(client(&sim), "nope");
    let err = missing
        .patch("new", &pp, &Patch::Apply(&cm))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404 && s.message.contains("namespaces")),
        "{err}"
    );
}
