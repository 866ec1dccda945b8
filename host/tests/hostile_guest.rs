//! The capability boundary against a hostile plugin: every attempt to get
//! more than the manifest grants, made by a real guest (`api-probe`, driven
//! by a list of calls whose every string is passed to the host as given).
//!
//! Each case names the grant it tries to escape and the rule that stops it.
//! The verdict comes from the simulator: its request log (what reached the
//! server, as the server's own router parsed it) and its objects (what
//! changed), never from the host's or the plugin's account.

use crate::probe_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace as NsObject, Pod};
use kube::api::{Api, PostParams};
use kube_informer::names::Namespace;
use probe_support::*;
use serde_json::{json, Value};
use wasm_informer_runtime::capability::kube::{
    EventsGrant, KubeSettings, ProtectedLeases, Quota, WriteGrant, REFUSAL_LINE_BURST,
};

/// What the server must have seen of a case.
#[derive(Debug, Clone, Copy)]
enum Reached {
    /// No request at all.
    Nothing,
}

/// One escape attempt.
struct Case {
    /// What it tries.
    name: &'static str,
    /// The grant it tries to escape.
    grants: Vec<WriteGrant>,
    /// The call, with every string as a hostile plugin would pass it.
    op: Value,
    /// The error the plugin must get.
    error: &'static str,
    /// Part of the message: the rule that stopped it.
    rule: &'static str,
    /// What the server must have seen.
    reached: Reached,
}

fn patch_op(resource: &str, ns: Option<&str>, name: &str) -> Value {
    json!({ "call": "patch", "resource": resource, "namespace": ns, "name": name,
            "patch": "merge", "body": { "metadata": { "labels": { "owned": "yes" } } } })
}

fn cm_patch_anywhere() -> Vec<WriteGrant> {
    vec![grant("v1/configmaps", None, &["patch"], None)]
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "a fragment in the namespace cuts off the query and reaches a Pod",
            grants: cm_patch_anywhere(),
            op: patch_op("v1/configmaps", Some("team-b/pods/web#"), "x"),
            error: "invalid",
            rule: "RFC 1123 label",
            reached: Reached::Nothing,
        },
        Case {
            name: "a query in the namespace",
            grants: cm_patch_anywhere(),
            op: patch_op("v1/configmaps", Some("team-b/pods/web?x="), "x"),
            error: "invalid",
            rule: "RFC 1123 label",
            reached: Reached::Nothing,
        },
        Case {
            name: "a fragment in the name",
            grants: cm_patch_anywhere(),
            op: patch_op("v1/configmaps", Some("team-b"), "x#"),
            error: "invalid",
            rule: "RFC 1123 subdomain",
            reached: Reached::Nothing,
        },
        Case {
            name: "a query in the name",
            grants: cm_patch_anywhere(),
            op: patch_op("v1/configmaps", Some("team-b"), "x?dryRun=None"),
            error: "invalid",
            rule: "RFC 1123 subdomain",
            reached: Reached::Nothing,
        },
        Case {
            name: "an empty name addresses the collection",
            grants: vec![grant("v1/pods", None, &["delete"], Some(&["team-a"]))],
            op: json!({ "call": "delete", "resource": "v1/pods", "namespace": "team-a", "name": "" }),
            error: "invalid",
            rule: "may not be empty",
            reached: Reached::Nothing,
        },
        Case {
            name: "a name of '.'",
            grants: vec![grant("v1/pods", None, &["patch"], Some(&["team-a"]))],
            op: patch_op("v1/pods", Some("team-a"), "."),
            error: "invalid",
            rule: "may not be '.'",
            reached: Reached::Nothing,
        },
        Case {
            name: "a name of '..' climbs to the namespace",
            grants: vec![grant("v1/pods", None, &["patch"], Some(&["team-a"]))],
            op: patch_op("v1/pods", Some("team-a"), ".."),
            error: "invalid",
            rule: "may not be '..'",
            reached: Reached::Nothing,
        },
        Case {
            name: "%2F in a name, which the server decodes into a subresource",
            grants: vec![grant("v1/pods", None, &["patch"], Some(&["team-a"]))],
            op: patch_op("v1/pods", Some("team-a"), "web%2Fstatus"),
            error: "invalid",
            rule: "may not contain '%'",
            reached: Reached::Nothing,
        },
        Case {
            name: "a '/' in a name reaches the status subresource",
            grants: vec![grant("v1/pods", None, &["patch"], Some(&["team-a"]))],
            op: patch_op("v1/pods", Some("team-a"), "web/status"),
            error: "invalid",
            rule: "may not contain '/'",
            reached: Reached::Nothing,
        },
        Case {
            name: "a unicode name",
            grants: vec![grant("v1/pods", None, &["patch"], Some(&["team-a"]))],
            op: patch_op("v1/pods", Some("team-a"), "wéb"),
            error: "invalid",
            rule: "RFC 1123 subdomain",
            reached: Reached::Nothing,
        },
        Case {
            name: "a namespace on a cluster-scoped resource slips past a namespace-limited grant",
            grants: vec![grant("v1/namespaces", None, &["patch"], None)],
            op: patch_op("v1/namespaces", Some("wa"), "wb"),
            error: "invalid",
            rule: "cluster-scoped",
            reached: Reached::Nothing,
        },
        Case {
            name: "server-side apply creates under a patch-only grant",
            grants: cm_patch_anywhere(),
            op: json!({ "call": "patch", "resource": "v1/configmaps", "namespace": "team-a",
                        "name": "made", "patch": "apply",
                        "body": { "apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": { "name": "made", "namespace": "team-a" } } }),
            error: "forbidden",
            rule: "needs `create`",
            reached: Reached::Nothing,
        },
        Case {
            name: "a body larger than max_request_bytes",
            grants: cm_patch_anywhere(),
            op: json!({ "call": "patch", "resource": "v1/configmaps", "namespace": "team-a",
                        "name": "cfg", "patch": "merge",
                        "body": { "data": { "big": "x".repeat(1 << 20) } } }),
            error: "invalid",
            rule: "max_request_bytes",
            reached: Reached::Nothing,
        },
        Case {
            name: "a resource the server does not serve",
            grants: cm_patch_anywhere(),
            op: patch_op("v1/configmapz", Some("team-a"), "cfg"),
            error: "invalid",
            rule: "does not serve it",
            reached: Reached::Nothing,
        },
        Case {
            name: "a resource id with a path in it",
            grants: cm_patch_anywhere(),
            op: patch_op("v1/configmaps/../pods", Some("team-a"), "web"),
            error: "invalid",
            rule: "VERSION/PLURAL",
            reached: Reached::Nothing,
        },
    ]
}

/// The world every case starts from: Pods `web` in team-a and team-b, a
/// ConfigMap `cfg` in team-a, Namespaces wa and wb.
async fn seeded() -> World {
    let w = world().await;
    for ns in ["wa", "wb"] {
        w.sim.store().create_namespace(ns).unwrap();
    }
    w.seed_pod("team-a", "web").await;
    w.seed_pod("team-b", "web").await;
    let cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "cfg" }, "data": { "k": "v" }
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(w.client.clone(), "team-a")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    w
}

/// The simulator's global resourceVersion: every write it applies moves it.
fn snapshot(w: &World) -> u64 {
    w.sim.store().current_rv()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_escape_attempt_is_refused_and_nothing_reaches_the_server() {
    let w = seeded().await;
    let web = w.pod("team-a", "web").await.unwrap();
    for case in cases() {
        let settings = KubeSettings {
            grants: case.grants.clone(),
            write_qps: 0.0,
            ..KubeSettings::default()
        };
        let (mut r, _) = w.probe(json!([case.op.clone()]), settings).await;
        let before = snapshot(&w);
        w.sim.request_log().clear();
        let out = trigger(&mut r, &web).await;
        assert_eq!(out[0]["ok"], false, "{}: {}", case.name, out[0]);
        assert_eq!(out[0]["error"], case.error, "{}: {}", case.name, out[0]);
        let message = out[0]["message"].as_str().unwrap();
        assert!(message.contains(case.rule), "{}: {message}", case.name);
        match case.reached {
            Reached::Nothing => {
                // Discovery (the host resolving a resource) is not the plugin's request.
                let seen: Vec<_> = w
                    .sim
                    .request_log()
                    .entries()
                    .into_iter()
                    .filter(|r| r.target.resource.is_some())
                    .collect();
                assert!(seen.is_empty(), "{}: the server saw {seen:?}", case.name);
            }
        }
        assert_eq!(
            snapshot(&w),
            before,
            "{}: the server's objects changed",
            case.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_limited_grant_on_a_cluster_scoped_resource_cannot_be_made() {
    let verbs = vec!["patch".to_string()];
    let e = WriteGrant::new("v1/namespaces", None, &verbs, Some(&["wa".to_string()])).unwrap_err();
    assert_eq!(e.field, "namespaces");
    // The grant that can be made is cluster-wide, and says so.
    let w = seeded().await;
    let web = w.pod("team-a", "web").await.unwrap();
    let settings = KubeSettings {
        grants: vec![grant("v1/namespaces", None, &["patch"], None)],
        ..KubeSettings::default()
    };
    let (mut r, _) = w
        .probe(json!([patch_op("v1/namespaces", None, "wb")]), settings)
        .await;
    w.sim.request_log().clear();
    let out = trigger(&mut r, &web).await;
    assert_eq!(out[0]["ok"], true, "{}", out[0]);
    let seen = w.sim.request_log().entries();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/api/v1/namespaces/wb");
    let wb = Api::<NsObject>::all(w.client.clone())
        .get("wb")
        .await
        .unwrap();
    assert_eq!(wb.metadata.labels.unwrap()["owned"], "yes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writes_that_are_granted_reach_exactly_their_object() {
    let w = seeded().await;
    let web = w.pod("team-a", "web").await.unwrap();
    let settings = KubeSettings {
        grants: vec![
            grant(
                "v1/configmaps",
                None,
                &["patch", "create"],
                Some(&["team-a"]),
            ),
            grant("v1/pods", None, &["delete"], Some(&["team-a"])),
        ],
        dry_run: true,
        ..KubeSettings::default()
    };
    let ops = json!([
        patch_op("v1/configmaps", Some("team-a"), "cfg"),
        { "call": "patch", "resource": "v1/configmaps", "namespace": "team-a",
          "name": "made", "patch": "apply",
          "body": { "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": { "name": "made", "namespace": "team-a" } } },
        { "call": "delete", "resource": "v1/pods", "namespace": "team-a", "name": "web" },
    ]);
    let (mut r, _) = w.probe(ops, settings).await;
    w.sim.request_log().clear();
    let out = trigger(&mut r, &web).await;
    assert_ok(&out);
    let seen = w.sim.request_log().entries();
    let paths: Vec<(&str, &str, String)> = seen
        .iter()
        .map(|r| {
            (
                r.method.as_str(),
                r.path.as_str(),
                r.param("dryRun").unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        paths,
        vec![
            (
                "PATCH",
                "/api/v1/namespaces/team-a/configmaps/cfg",
                "All".to_string()
            ),
            (
                "PATCH",
                "/api/v1/namespaces/team-a/configmaps/made",
                "All".to_string()
            ),
            (
                "DELETE",
                "/api/v1/namespaces/team-a/pods/web",
                "All".to_string()
            ),
        ]
    );
    for r in &seen {
        assert_eq!(
            r.param("fieldManager").filter(|_| r.method != "DELETE"),
            (r.method != "DELETE").then(|| "wasm-informer/probe".to_string())
        );
        assert!(
            r.param("timeout").is_some_and(|t| t.ends_with("ms")),
            "{r:?}"
        );
    }
}

fn events_op(regarding: Value, note: &str) -> Value {
    json!({ "call": "event", "event": {
        "type": "warning", "reason": "Probe", "action": "Audit", "note": note,
        "regarding": regarding } })
}

fn pod_ref(ns: &str, name: &str) -> Value {
    json!({ "api_version": "v1", "kind": "Pod", "namespace": ns, "name": name })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_go_only_where_the_events_grant_says_and_are_checked_as_the_server_would() {
    let w = seeded().await;
    let web = w.pod("team-a", "web").await.unwrap();
    let settings = KubeSettings {
        events: Some(EventsGrant {
            namespaces: Some([Namespace::parse("team-a").unwrap()].into()),
            regarding: ["v1/pods".to_string()].into(),
        }),
        write_qps: 0.0,
        ..KubeSettings::default()
    };
    let secret =
        json!({ "api_version": "v1", "kind": "Secret", "namespace": "team-a", "name": "db" });
    let ops = json!([
        // Outside the grant's namespaces.
        events_op(pod_ref("kube-system", "etcd"), "x"),
        // About an object of a resource it does not read.
        events_op(secret, "x"),
        // A note over the 1 kB the API server accepts.
        events_op(pod_ref("team-a", "web"), &"n".repeat(5000)),
        // A hostile name in the reference.
        events_op(pod_ref("team-a", "web/../../x"), "x"),
        // The control: allowed.
        events_op(pod_ref("team-a", "web"), "fine"),
    ]);
    let (mut r, _) = w.probe(ops, settings).await;
    w.sim.request_log().clear();
    let out = trigger(&mut r, &web).await;
    assert_eq!(out[0]["error"], "forbidden", "{}", out[0]);
    assert!(out[0]["message"]
        .as_str()
        .unwrap()
        .contains("namespace kube-system"));
    assert_eq!(out[1]["error"], "forbidden", "{}", out[1]);
    assert_eq!(out[2]["error"], "invalid", "{}", out[2]);
    assert!(
        out[2]["message"].as_str().unwrap().contains("1024"),
        "{}",
        out[2]
    );
    assert_eq!(out[3]["error"], "invalid", "{}", out[3]);
    assert_eq!(out[4]["ok"], true, "{}", out[4]);
    let seen = w.sim.request_log().entries();
    assert_eq!(seen.len(), 1, "only the allowed Event was sent: {seen:?}");
    assert_eq!(
        seen[0].path,
        "/apis/events.k8s.io/v1/namespaces/team-a/events"
    );
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(w.client.clone());
    let all = events.list(&Default::default()).await.unwrap().items;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].metadata.namespace.as_deref(), Some("team-a"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosts_own_leases_are_refused_whatever_the_grant() {
    let w = seeded().await;
    for ns in ["wasm-informer", "apps"] {
        w.sim.store().create_namespace(ns).unwrap();
    }
    let web = w.pod("team-a", "web").await.unwrap();
    let lease = |ns: &str, name: &str| {
        json!({ "call": "create", "resource": "coordination.k8s.io/v1/leases", "namespace": ns,
                "body": { "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                          "metadata": { "name": name },
                          "spec": { "holderIdentity": "probe" } } })
    };
    let settings = KubeSettings {
        grants: vec![grant(
            "coordination.k8s.io/v1/leases",
            None,
            &["create", "patch", "delete", "replace"],
            None,
        )],
        ..KubeSettings::default()
    };
    let ops = json!([
        lease("wasm-informer", "wasm-informer"),
        patch_op("coordination.k8s.io/v1/leases", Some("wasm-informer"), "replica-0"),
        { "call": "delete", "resource": "coordination.k8s.io/v1/leases",
          "namespace": "wasm-informer", "name": "replica-0" },
        // Its own Leases elsewhere are its business.
        lease("apps", "mine"),
    ]);
    let (mut r, _) = w
        .probe_with(ops, settings, |s| {
            s.protected = Some(ProtectedLeases {
                namespace: Namespace::parse("wasm-informer").unwrap(),
            })
        })
        .await;
    w.sim.request_log().clear();
    let out = trigger(&mut r, &web).await;
    for o in &out[..3] {
        assert_eq!(o["error"], "forbidden", "{o}");
        assert!(o["message"].as_str().unwrap().contains("Leases"), "{o}");
    }
    assert_eq!(out[3]["ok"], true, "{}", out[3]);
    let seen = w.sim.request_log().entries();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        seen[0].path,
        "/apis/coordination.k8s.io/v1/namespaces/apps/leases"
    );
}

/// A plugin with no grants at all that calls a thousand times: each
/// refusal takes a token, so the flood is paced at `write_qps`, and at most
/// the burst of refusal lines reaches the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_flood_is_throttled_and_its_lines_are_bounded() {
    let w = seeded().await;
    let web = w.pod("team-a", "web").await.unwrap();
    let qps = 50.0;
    let calls = 100u32;
    let settings = KubeSettings {
        write_qps: qps,
        write_burst: 10,
        write_timeout: Duration::from_secs(30),
        ..KubeSettings::default()
    };
    let mut op = patch_op(
        "v1/pods",
        Some("team-a"),
        "web\nINFO audit: write plugin=other outcome=\"ok\"",
    );
    op["repeat"] = calls.into();
    let services = w.services(&settings);
    let quota = services.quota.clone();
    services.grants.replace(settings.clone());
    let (mut r, _) = w.probe_in(json!([op]), settings, services).await;
    w.sim.request_log().clear();
    let started = Instant::now();
    let out = trigger(&mut r, &web).await;
    let took = started.elapsed();
    let outcomes = out[0].as_array().unwrap();
    assert_eq!(outcomes.len(), calls as usize);
    assert!(outcomes.iter().all(|o| o["ok"] == false));
    // Paced: the burst at once, the rest at `qps`.
    let least = Duration::from_secs_f64((calls as f64 - 10.0) / qps * 0.9);
    assert!(
        took >= least,
        "{calls} refusals in {took:?}, at least {least:?}"
    );
    let stats = quota.stats();
    assert_eq!(stats.refused, calls as u64);
    assert!(stats.throttled > 0);
    // Audited: the burst of lines, then one a second; the rest counted.
    let most = REFUSAL_LINE_BURST as u64 + took.as_secs_f64().ceil() as u64;
    assert!(
        stats.audited <= most,
        "{} refusal lines in {took:?}",
        stats.audited
    );
    assert!(stats.audited >= REFUSAL_LINE_BURST as u64);
    assert!(stats.suppressed > 0);
    assert!(w.sim.request_log().entries().is_empty());
}

/// Three runners of one plugin (three watched resources) and a reload share
/// one bucket: the server sees at most `burst + qps * t` of the plugin's
/// writes, and a new version does not get a fresh burst.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bucket_per_plugin_whatever_its_runners_and_versions() {
    let w = seeded().await;
    let web = w.pod("team-a", "web").await.unwrap();
    let (qps, burst) = (4.0, 4u32);
    let settings = KubeSettings {
        grants: vec![grant("v1/pods", None, &["patch"], Some(&["team-a"]))],
        write_qps: qps,
        write_burst: burst,
        write_timeout: Duration::from_secs(20),
        ..KubeSettings::default()
    };
    let quota = Quota::new(qps, burst);
    let mut op = label_patch("team-a", "web", "x");
    op["repeat"] = 4.into();
    let mut runners = Vec::new();
    for _ in 0..3 {
        let q = quota.clone();
        let (r, _) = w
            .probe_with(json!([op.clone()]), settings.clone(), move |s| s.quota = q)
            .await;
        runners.push(r);
    }
    w.sim.request_log().clear();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for mut r in runners.drain(..) {
        let web = web.clone();
        tasks.push(tokio::spawn(async move { trigger(&mut r, &web).await }));
    }
    for t in tasks {
        for o in t.await.unwrap()[0].as_array().unwrap() {
            assert_eq!(o["ok"], true, "{o}");
        }
    }
    // A reload: a new version under the same name gets the same bucket.
    let q = quota.clone();
    let (mut v2, _) = w
        .probe_with(json!([op.clone()]), settings.clone(), move |s| s.quota = q)
        .await;
    for o in trigger(&mut v2, &web).await[0].as_array().unwrap() {
        assert_eq!(o["ok"], true, "{o}");
    }
    let took = started.elapsed().as_secs_f64();
    let sent: Vec<u64> = w
        .sim
        .request_log()
        .entries()
        .iter()
        .filter(|r| r.method == "PATCH")
        .map(|r| r.at_micros)
        .collect();
    assert_eq!(sent.len(), 16);
    // Over the whole run, never more than the bucket allows.
    let first = sent[0];
    for (i, at) in sent.iter().enumerate() {
        let t = (at - first) as f64 / 1e6;
        let allowed = burst as f64 + qps * t + 1.0;
        assert!(
            (i + 1) as f64 <= allowed,
            "write {} at {t:.2}s: more than {allowed:.1}",
            i + 1
        );
    }
    assert!(took >= (16.0 - burst as f64) / qps * 0.9, "{took}");
    let _ = Arc::strong_count(&quota);
}

// Layer 2: the API server's RBAC for each plugin's own identity.

/// The host's ServiceAccount and the plugin's, as `[identity] impersonate =
/// true` names them for plugin `probe`.
const HOST_USER: &str = "system:serviceaccount:wasm-informer:wasm-informer";
const PROBE_USER: &str = "system:serviceaccount:wasm-informer:wasm-informer-probe";

/// A simulator that enforces RBAC, loaded with what `wasm-informer rbac`
/// derives for a config directory with `manifest` as plugin `probe`; and a
/// world whose API calls carry the host's own identity.
async fn rbac_world(manifest: &str) -> World {
    let mut w = world_with(apisim::SimConfig {
        rbac: true,
        ..apisim::SimConfig::default()
    })
    .await;
    for ns in ["wasm-informer", "wa", "wb", "wd", "apps"] {
        w.sim.store().create_namespace(ns).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("plugins")).unwrap();
    std::fs::write(
        dir.path().join("host.toml"),
        "[identity]\nimpersonate = true\nnamespace = \"wasm-informer\"\n",
    )
    .unwrap();
    std::fs::copy(plugin_artifacts::API_PROBE, dir.path().join("probe.wasm")).unwrap();
    std::fs::write(
        dir.path().join("plugins/probe.toml"),
        format!(
            "name = \"probe\"\nwasm = \"../probe.wasm\"\nresources = [\"v1/pods\"]\n{manifest}"
        ),
    )
    .unwrap();
    let config = wasm_informer::config::ConfigDir::open(dir.path()).unwrap();
    let yaml =
        wasm_informer::rbac::for_config_dir(&config, &wasm_informer::rbac::RbacNames::default())
            .unwrap();
    load_yaml(&w, &yaml);
    w.sim.tokens().add("host-token", HOST_USER, &[]);
    let client = kube_informer::reflector::client_from_kubeconfig_yaml(
        &w.sim.kubeconfig_yaml_for("host-token"),
    )
    .await
    .unwrap();
    w.api = wasm_informer::kube_api::KubeApi::new(client, tokio::runtime::Handle::current());
    w
}

/// Stores every object of a multi-document YAML stream as the admin.
fn load_yaml(w: &World, yaml: &str) {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).unwrap();
    let store = w.sim.store();
    for d in docs.into_iter().filter(|d| d.is_object()) {
        let (gv, kind) = (
            d["apiVersion"].as_str().unwrap(),
            d["kind"].as_str().unwrap(),
        );
        let plural = match kind {
            "ServiceAccount" => "serviceaccounts",
            "ClusterRole" => "clusterroles",
            "ClusterRoleBinding" => "clusterrolebindings",
            "Role" => "roles",
            "RoleBinding" => "rolebindings",
            other => panic!("unexpected {other} in the rbac output"),
        };
        let ns = d["metadata"]["namespace"].as_str().map(str::to_string);
        store
            .create(store.rid(gv, plural), ns.as_deref(), d.clone())
            .unwrap_or_else(|e| panic!("{kind}: {}", e.message));
    }
}

/// With the host's own grant check switched off, every well-formed escape
/// attempt reaches the server as the plugin's ServiceAccount, and the
/// server's RBAC refuses it with its 403; nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_hosts_check_off_the_servers_rbac_refuses_every_escape() {
    let manifest = r#"
events = { namespaces = ["team-a"] }
[[write]]
resource = "v1/pods"
verbs = ["patch"]
namespaces = ["team-a"]
[[write]]
resource = "v1/configmaps"
verbs = ["patch"]
[[write]]
resource = "coordination.k8s.io/v1/leases"
verbs = ["create"]
namespaces = ["apps"]
"#;
    let w = rbac_world(manifest).await;
    w.seed_pod("team-a", "web").await;
    let web = w.seed_pod("team-b", "web").await;
    let settings = KubeSettings {
        grants: vec![
            grant("v1/pods", None, &["patch"], Some(&["team-a"])),
            grant("v1/configmaps", None, &["patch"], None),
            grant(
                "coordination.k8s.io/v1/leases",
                None,
                &["create"],
                Some(&["apps"]),
            ),
        ],
        events: Some(EventsGrant {
            namespaces: Some([Namespace::parse("team-a").unwrap()].into()),
            regarding: ["v1/pods".to_string()].into(),
        }),
        write_qps: 0.0,
        ..KubeSettings::default()
    };
    let lease = |ns: &str| {
        json!({ "call": "create", "resource": "coordination.k8s.io/v1/leases", "namespace": ns,
                "body": { "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                          "metadata": { "name": "l" } } })
    };
    let escapes = json!([
        // Another namespace of a granted resource (what the pasted namespace reached).
        patch_op("v1/pods", Some("team-b"), "web"),
        // A resource no grant names.
        patch_op("v1/secrets", Some("team-a"), "db"),
        // A subresource no grant names.
        { "call": "patch-status", "resource": "v1/pods", "namespace": "team-a", "name": "web",
          "patch": "merge", "body": { "status": { "phase": "Failed" } } },
        // A verb no grant names.
        { "call": "delete", "resource": "v1/pods", "namespace": "team-a", "name": "web" },
        // An apply that creates, under a patch-only grant.
        { "call": "patch", "resource": "v1/configmaps", "namespace": "team-a", "name": "made",
          "patch": "apply", "body": { "apiVersion": "v1", "kind": "ConfigMap",
          "metadata": { "name": "made", "namespace": "team-a" } } },
        // An Event outside the events grant.
        events_op(pod_ref("team-b", "web"), "x"),
        // The host's lease namespace.
        lease("wasm-informer"),
        // The controls: allowed by the grants and by the server.
        patch_op("v1/pods", Some("team-a"), "web"),
        lease("apps"),
    ]);
    let (mut r, _) = w
        .probe_with(escapes, settings, |s| {
            s.enforce_grants = false;
            s.act_as = Some(PROBE_USER.to_string());
        })
        .await;
    let before = snapshot(&w);
    w.sim.request_log().clear();
    let out = trigger(&mut r, &web).await;
    let n = out.len();
    for (i, o) in out[..n - 2].iter().enumerate() {
        assert_eq!(o["error"], "forbidden", "escape {i}: {o}");
        let m = o["message"].as_str().unwrap();
        assert!(
            m.contains(&format!("User \"{PROBE_USER}\" cannot")),
            "escape {i}: the server's 403, not the host's: {m}"
        );
    }
    assert_ok(&out[n - 2..]);
    let seen = w.sim.request_log().entries();
    assert_eq!(seen.len(), n, "every call reached the server: {seen:?}");
    for (i, rec) in seen.iter().enumerate() {
        assert_eq!(rec.user, HOST_USER, "{rec:?}");
        assert_eq!(rec.impersonated_user, PROBE_USER, "{rec:?}");
        let want = if i < n - 2 { 403 } else { 201 };
        assert!(
            rec.status == want || (i == n - 2 && rec.status == 200),
            "{i}: {rec:?}"
        );
    }
    // Only the two controls changed the server.
    assert_eq!(
        seen.iter().filter(|r| r.written_rv.is_some()).count(),
        2,
        "{seen:?}"
    );
    assert!(snapshot(&w) > before);
    let b = w.pod("team-b", "web").await.unwrap();
    assert!(!b.metadata.labels.unwrap().contains_key("owned"));
}

/// The requests the host used to paste together from hostile strings
/// (`team-b/pods/web#` as a namespace, an empty name): sent as they were, as
/// the plugin's identity, the server's RBAC refuses each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pasted_paths_of_old_are_refused_by_the_servers_rbac() {
    let manifest = r#"
[[write]]
resource = "v1/configmaps"
verbs = ["patch"]
[[write]]
resource = "v1/pods"
verbs = ["delete"]
namespaces = ["wd"]
"#;
    let w = rbac_world(manifest).await;
    w.seed_pod("team-b", "web").await;
    w.seed_pod("wd", "a").await;
    let client = reqwest_free_client(&w).await;
    for (method, path, body) in [
        // `patch("v1/configmaps", "team-b/pods/web#", "x")` pasted: the `#` cut the query.
        (
            "PATCH",
            "/api/v1/namespaces/team-b/pods/web",
            r#"{"metadata":{"labels":{"owned":"yes"}}}"#,
        ),
        // `delete("v1/pods", "wd", "")` pasted: the collection.
        ("DELETE", "/api/v1/namespaces/wd/pods/", ""),
        // `patch("v1/pods", "team-a", "web/status")` with the `/` encoded.
        (
            "PATCH",
            "/api/v1/namespaces/team-b/pods/web%2Fstatus",
            r#"{"status":{"phase":"Failed"}}"#,
        ),
    ] {
        let before = snapshot(&w);
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("Impersonate-User", PROBE_USER)
            .header("Content-Type", "application/merge-patch+json")
            .body(kube::client::Body::from(body.as_bytes().to_vec()))
            .unwrap();
        let resp = client.send(req).await.unwrap();
        assert_eq!(resp.status().as_u16(), 403, "{method} {path}");
        assert_eq!(snapshot(&w), before, "{method} {path} changed the server");
    }
    assert_eq!(
        Api::<Pod>::namespaced(w.client.clone(), "wd")
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}

/// A client with the host's token, for raw requests.
async fn reqwest_free_client(w: &World) -> kube::Client {
    kube_informer::reflector::client_from_kubeconfig_yaml(&w.sim.kubeconfig_yaml_for("host-token"))
        .await
        .unwrap()
}

/// Answers are bounded twice: one answer by `max_answer_bytes` (the host
/// reads no further), and the answers one call holds by the plugin's
/// `memory_mb` together with its linear memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_bounded_by_max_answer_bytes_and_count_against_memory_mb() {
    let w = seeded().await;
    let web = w.pod("team-a", "web").await.unwrap();
    let big: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "big" },
        "data": { "k": "v".repeat(400 << 10) }
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(w.client.clone(), "team-a")
        .create(&PostParams::default(), &big)
        .await
        .unwrap();
    let get =
        json!({ "call": "get", "resource": "v1/configmaps", "namespace": "team-a", "name": "big" });
    let grants = vec![grant("v1/configmaps", None, &["get"], None)];
    // One answer larger than max_answer_bytes.
    let small = KubeSettings {
        grants: grants.clone(),
        max_answer_bytes: 64 << 10,
        write_qps: 0.0,
        ..KubeSettings::default()
    };
    let (mut r, _) = w.probe(json!([get.clone()]), small).await;
    let out = trigger(&mut r, &web).await;
    assert_eq!(out[0]["error"], "unavailable", "{}", out[0]);
    assert!(
        out[0]["message"]
            .as_str()
            .unwrap()
            .contains("max_answer_bytes"),
        "{}",
        out[0]
    );
    // Many answers in one call, against a small memory_mb.
    let settings = KubeSettings {
        grants,
        write_qps: 0.0,
        ..KubeSettings::default()
    };
    let mut op = get.clone();
    op["repeat"] = 40.into();
    op["unread"] = true.into();
    let spec_limits = wasm_informer_runtime::PluginLimits {
        memory_mb: 8,
        ..Default::default()
    };
    let (mut r, _) = w.probe_limited(json!([op]), settings, spec_limits).await;
    let out = trigger(&mut r, &web).await;
    let outcomes = out[0].as_array().unwrap();
    let ok = outcomes.iter().filter(|o| o["ok"] == true).count();
    let refused: Vec<_> = outcomes.iter().filter(|o| o["ok"] == false).collect();
    assert!(ok >= 1, "{outcomes:?}");
    assert!(!refused.is_empty(), "40 answers of 400 KiB fit in 8 MiB?");
    for o in &refused {
        assert_eq!(o["error"], "unavailable", "{o}");
        assert!(o["message"].as_str().unwrap().contains("memory_mb"), "{o}");
    }
    assert!(ok * (400 << 10) <= 8 << 20, "{ok} answers held");
    assert_eq!(
        r.status().snapshot().api.answers_refused,
        refused.len() as u64
    );
}
