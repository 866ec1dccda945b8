//! Server-side sharded list and watch (KEP-5866) with `SimConfig::sharded_list_and_watch`.
//!
//! The oracle is independent of the simulator's own hash: an FNV-1a 64 model written here
//! (checked against the published test vectors), the store's objects and change log, and the
//! request log.

use crate::common;
use crate::support;

use std::collections::{BTreeMap, BTreeSet};

use apisim::{RunningSim, SimConfig};
use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ListParams;
use serde_json::{json, Value};
use support::*;

// ---- the model -------------------------------------------------------------------------------

/// FNV-1a 64 written from its definition, independently of the simulator's: multiplying by
/// the FNV prime 2^40 + 2^8 + 0xb3 is done as shifts and adds in 128 bits, then reduced.
fn model_fnv1a_64(bytes: &[u8]) -> u64 {
    let mut h: u128 = 14_695_981_039_346_656_037; // the 64-bit offset basis
    for b in bytes {
        h ^= u128::from(*b);
        h = ((h << 40) + (h << 8) + h * 0xb3) % (1u128 << 64);
    }
    h as u64
}

const END: u128 = 1 << 64;

/// A selector string for `field` over `ranges`, written out by hand.
fn selector(field: &str, ranges: &[(u128, u128)]) -> String {
    ranges
        .iter()
        .map(|(s, e)| format!("shardRange(object.metadata.{field}, '0x{s:016x}', '0x{e:016x}')"))
        .collect::<Vec<_>>()
        .join(" || ")
}

fn in_ranges(h: u64, ranges: &[(u128, u128)]) -> bool {
    ranges
        .iter()
        .any(|(s, e)| u128::from(h) >= *s && u128::from(h) < *e)
}

/// Three shards tiling [0, 2^64) unevenly; the second owns two ranges.
fn three_shards() -> Vec<Vec<(u128, u128)>> {
    vec![
        vec![(0, 0x3000_0000_0000_0000)],
        vec![
            (0x3000_0000_0000_0000, 0x8000_0000_0000_0000),
            (0xa000_0000_0000_0000, END),
        ],
        vec![(0x8000_0000_0000_0000, 0xa000_0000_0000_0000)],
    ]
}

/// Three shards tiling [0, 2^64) that split the namespaces `ns-0`..`ns-5`. FNV-1a of names that
/// differ only in the last byte agree in their top 16 bits (all `0x4a82…`), so an even split of
/// the space would put every one of them in the same shard.
fn namespace_shards() -> Vec<Vec<(u128, u128)>> {
    vec![
        vec![(0, 0x4a82_b8ba_0000_0000), (0x4a82_bc00_0000_0000, END)],
        vec![(0x4a82_b8ba_0000_0000, 0x4a82_bb00_0000_0000)],
        vec![(0x4a82_bb00_0000_0000, 0x4a82_bc00_0000_0000)],
    ]
}

/// Percent-encodes a query value (everything but ASCII alphanumerics).
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn gate_on() -> SimConfig {
    SimConfig {
        sharded_list_and_watch: true,
        ..SimConfig::default()
    }
}

/// 40 ConfigMaps in each of 6 namespaces; returns uid -> (namespace, name) from the store.
fn seed(sim: &RunningSim) -> BTreeMap<String, (String, String)> {
    let store = sim.store();
    let nsr = store.rid("v1", "namespaces");
    for n in 0..6 {
        let name = format!("ns-{n}");
        store
            .create(
                nsr,
                None,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
            )
            .unwrap();
        seed_configmaps(
            store,
            &format!("ns-{n}"),
            (0..40).map(|i| format!("cm-{i}")),
        );
    }
    all_configmaps(sim)
}

fn all_configmaps(sim: &RunningSim) -> BTreeMap<String, (String, String)> {
    let cms = sim.store().rid("v1", "configmaps");
    sim.store()
        .list_all(cms)
        .iter()
        .map(|o| (o.uid.clone(), (o.namespace.clone(), o.name.clone())))
        .collect()
}

fn uids(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .expect("a list has items")
        .iter()
        .map(|o| o["metadata"]["uid"].as_str().unwrap().to_string())
        .collect()
}

async fn get(sim: &RunningSim, path: &str) -> Raw {
    raw(sim.addr(), "GET", path, None).await
}

// ---- the hash --------------------------------------------------------------------------------

#[test]
fn the_hash_is_fnv1a_64_by_the_published_vectors() {
    let vectors: [(&str, u64); 5] = [
        ("", 0xcbf29ce484222325),
        ("a", 0xaf63dc4c8601ec8c),
        ("foobar", 0x85944171f73967e8),
        ("b", 0xaf63df4c8601f1a5),
        ("foo", 0xdcb27518fed9d577),
    ];
    for (input, want) in vectors {
        assert_eq!(model_fnv1a_64(input.as_bytes()), want, "model on {input:?}");
        assert_eq!(
            apisim::fnv1a_64(input.as_bytes()),
            want,
            "apisim on {input:?}"
        );
    }
    for i in 0..2000 {
        let uid = uuid::Uuid::new_v4().to_string();
        let s = format!("{uid}-{i}");
        assert_eq!(apisim::fnv1a_64(s.as_bytes()), model_fnv1a_64(s.as_bytes()));
    }
}

// ---- lists -----------------------------------------------------------------------------------

#[tokio::test]
async fn shards_that_tile_the_hash_space_list_every_object_exactly_once_in_the_range_the_model_predicts(
) {
    let sim = start(gate_on()).await;
    let all = seed(&sim);
    for field in ["uid", "namespace"] {
        let shards = if field == "uid" {
            three_shards()
        } else {
            namespace_shards()
        };
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for ranges in &shards {
            let ranges = ranges.as_slice();
            let sel = selector(field, ranges);
            let r = get(
                &sim,
                &format!("/api/v1/configmaps?shardSelector={}", enc(&sel)),
            )
            .await;
            assert_eq!(r.code, 200, "{}", r.body);
            let list = r.json();
            for uid in uids(&list) {
                let (ns, _) = &all[&uid];
                let key = if field == "uid" { &uid } else { ns };
                assert!(
                    in_ranges(model_fnv1a_64(key.as_bytes()), ranges),
                    "{field} shard {sel} listed {uid} ({ns}), whose hash is outside it"
                );
                *seen.entry(uid).or_default() += 1;
            }
        }
        assert_eq!(
            seen.keys().cloned().collect::<BTreeSet<_>>(),
            all.keys().cloned().collect::<BTreeSet<_>>(),
            "by {field}: the union of the shards is the whole collection"
        );
        assert!(
            seen.values().all(|n| *n == 1),
            "by {field}: an object was listed by two shards: {seen:?}"
        );
        // The split is not degenerate: every shard holds some of the 240 objects.
        for ranges in &shards {
            let n = all
                .iter()
                .filter(|(u, (ns, _))| {
                    let key = if field == "uid" {
                        u.as_str()
                    } else {
                        ns.as_str()
                    };
                    in_ranges(model_fnv1a_64(key.as_bytes()), ranges)
                })
                .count();
            assert!(
                n > 0 && n < all.len(),
                "by {field}: shard {ranges:x?} holds {n}"
            );
        }
    }
}

#[tokio::test]
async fn a_list_carries_shard_info_echoing_the_selector_it_applied() {
    let sim = start(gate_on()).await;
    seed(&sim);
    let sel = selector("uid", &three_shards()[1]);
    let r = get(
        &sim,
        &format!(
            "/api/v1/namespaces/ns-1/configmaps?shardSelector={}",
            enc(&sel)
        ),
    )
    .await;
    assert_eq!(r.json()["metadata"]["shardInfo"], json!({"selector": sel}));
    // Spacing and quotes as the client wrote them are not echoed: the applied selector is, in
    // its canonical form.
    let loose =
        "  shardRange( object.metadata.namespace,\"0x0000000000000000\",'0x10000000000000000' )";
    let r = get(
        &sim,
        &format!("/api/v1/configmaps?shardSelector={}", enc(loose)),
    )
    .await;
    assert_eq!(
        r.json()["metadata"]["shardInfo"]["selector"],
        "shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')"
    );
    assert_eq!(
        uids(&r.json()).len(),
        240,
        "the full range holds everything"
    );
    // Without the parameter (or with it empty) there is no shardInfo.
    for q in ["", "?shardSelector="] {
        let r = get(&sim, &format!("/api/v1/configmaps{q}")).await;
        assert!(
            r.json()["metadata"].get("shardInfo").is_none(),
            "{q}: {}",
            r.body
        );
        assert_eq!(uids(&r.json()).len(), 240);
    }
}

#[tokio::test]
async fn paged_sharded_lists_return_exactly_the_shard_without_a_remaining_count() {
    let sim = start(gate_on()).await;
    let all = seed(&sim);
    let ranges = &three_shards()[1];
    let sel = selector("uid", ranges);
    let want: BTreeSet<String> = all
        .keys()
        .filter(|u| in_ranges(model_fnv1a_64(u.as_bytes()), ranges))
        .cloned()
        .collect();
    let mut got = Vec::new();
    let mut cont = String::new();
    let mut pages = 0;
    loop {
        let mut path = format!("/api/v1/configmaps?limit=17&shardSelector={}", enc(&sel));
        if !cont.is_empty() {
            path.push_str(&format!("&continue={}", enc(&cont)));
        }
        let list = get(&sim, &path).await.json();
        pages += 1;
        assert!(uids(&list).len() <= 17);
        assert!(
            list["metadata"].get("remainingItemCount").is_none(),
            "a filtered list has no remainingItemCount"
        );
        assert_eq!(list["metadata"]["shardInfo"]["selector"], sel.as_str());
        got.extend(uids(&list));
        match list["metadata"]["continue"].as_str() {
            Some(c) if !c.is_empty() => cont = c.to_string(),
            _ => break,
        }
    }
    assert!(pages > 1, "the shard spans several pages");
    assert_eq!(got.len(), want.len(), "no object twice across pages");
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), want);
}

// ---- watches ---------------------------------------------------------------------------------

#[tokio::test]
async fn a_streaming_list_sends_initial_events_for_the_shard_only_then_its_bookmark() {
    let sim = start(gate_on()).await;
    let all = seed(&sim);
    let ranges = &three_shards()[0];
    let sel = selector("uid", ranges);
    let want: BTreeSet<String> = all
        .keys()
        .filter(|u| in_ranges(model_fnv1a_64(u.as_bytes()), ranges))
        .cloned()
        .collect();
    for q in [
        "watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan",
        "watch=true&resourceVersion=0",
    ] {
        let r = get(
            &sim,
            &format!("/api/v1/configmaps?{q}&timeoutSeconds=1&shardSelector={}", enc(&sel)),
        )
        .await;
        let events = r.events();
        let added: Vec<String> = events
            .iter()
            .filter(|e| e["type"] == "ADDED")
            .map(|e| e["object"]["metadata"]["uid"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(added.len(), want.len(), "{q}: each object once");
        assert_eq!(added.into_iter().collect::<BTreeSet<_>>(), want, "{q}");
        if q.contains("sendInitialEvents") {
            let end = events
                .iter()
                .find(|e| e["type"] == "BOOKMARK")
                .expect("the initial-events-end bookmark");
            assert_eq!(
                end["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
                "true"
            );
        }
    }
}

/// Creates, updates and deletes ConfigMaps in `ns-0` and returns the resourceVersion before.
fn churn(sim: &RunningSim) -> u64 {
    let store = sim.store();
    let cms = store.rid("v1", "configmaps");
    let before = store.current_rv();
    for i in 0..30 {
        store
            .create(
                cms,
                Some("ns-0"),
                configmap(&format!("new-{i}"), "ns-0", json!({})),
            )
            .unwrap();
    }
    for i in 0..20 {
        store
            .update_with(
                cms,
                "ns-0",
                &format!("cm-{i}"),
                apisim::Subresource::Main,
                |mut v| {
                    v["data"]["k"] = json!("changed");
                    Ok(v)
                },
            )
            .unwrap();
    }
    for i in 20..35 {
        store.delete(cms, "ns-0", &format!("cm-{i}"), None).unwrap();
    }
    before
}

/// The changes after `rv` of objects in `ranges` (by the model), from the store's change log:
/// (type, uid, resourceVersion) in order.
fn expected_events(
    sim: &RunningSim,
    rv: u64,
    ranges: &[(u128, u128)],
) -> Vec<(String, String, u64)> {
    let cms = sim.store().rid("v1", "configmaps");
    sim.store()
        .changes_since(rv, usize::MAX)
        .unwrap()
        .iter()
        .filter(|c| c.resource == cms)
        .filter(|c| in_ranges(model_fnv1a_64(c.object.uid.as_bytes()), ranges))
        .map(|c| (c.kind.as_str().to_string(), c.object.uid.clone(), c.rv))
        .collect()
}

fn event_triples(events: &[Value]) -> Vec<(String, String, u64)> {
    events
        .iter()
        .filter(|e| e["type"] != "BOOKMARK")
        .map(|e| {
            let m = &e["object"]["metadata"];
            (
                e["type"].as_str().unwrap().to_string(),
                m["uid"].as_str().unwrap().to_string(),
                m["resourceVersion"].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_resumed_watch_replays_only_the_changes_of_objects_in_its_shard() {
    let sim = start(gate_on()).await;
    seed(&sim);
    let rv = churn(&sim);
    let mut total = 0;
    for ranges in three_shards() {
        let want = expected_events(&sim, rv, &ranges);
        let sel = selector("uid", &ranges);
        let r = get(
            &sim,
            &format!(
                "/api/v1/namespaces/ns-0/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=1&shardSelector={}",
                enc(&sel)
            ),
        )
        .await;
        assert_eq!(event_triples(&r.events()), want, "shard {sel}");
        total += want.len();
    }
    assert_eq!(
        total, 65,
        "the three shards together saw each of the 65 changes once"
    );
}

#[tokio::test]
async fn a_live_watch_sends_only_the_changes_of_objects_in_its_shard() {
    let sim = start(gate_on()).await;
    seed(&sim);
    let ranges = three_shards()[1].clone();
    let sel = selector("uid", &ranges);
    let rv = sim.store().current_rv();
    let addr = sim.addr();
    let path = format!(
        "/api/v1/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=10&shardSelector={}",
        enc(&sel)
    );
    let watch = tokio::spawn(async move { raw(addr, "GET", &path, None).await });
    sim.faults()
        .wait_open_watches(1, PATIENCE)
        .await
        .expect("the watch opens");
    let before = churn(&sim);
    assert_eq!(before, rv);
    let r = watch.await.unwrap();
    let want = expected_events(&sim, rv, &ranges);
    assert!(!want.is_empty());
    assert_eq!(event_triples(&r.events()), want);
}

// ---- deletecollection ------------------------------------------------------------------------

#[tokio::test]
async fn deletecollection_with_a_shard_selector_deletes_exactly_the_shard() {
    let sim = start(gate_on()).await;
    let all = seed(&sim);
    let ranges = &three_shards()[2];
    let sel = selector("uid", ranges);
    let r = raw(
        sim.addr(),
        "DELETE",
        &format!(
            "/api/v1/namespaces/ns-3/configmaps?shardSelector={}",
            enc(&sel)
        ),
        None,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.json()["metadata"]["shardInfo"]["selector"], sel.as_str());
    let in_shard = |uid: &str| in_ranges(model_fnv1a_64(uid.as_bytes()), ranges);
    let want_deleted: BTreeSet<String> = all
        .iter()
        .filter(|(u, (ns, _))| ns == "ns-3" && in_shard(u))
        .map(|(u, _)| u.clone())
        .collect();
    assert!(!want_deleted.is_empty());
    assert_eq!(
        uids(&r.json()).into_iter().collect::<BTreeSet<_>>(),
        want_deleted
    );
    let left = all_configmaps(&sim);
    for (u, (ns, _)) in &all {
        let gone = !left.contains_key(u);
        assert_eq!(gone, ns == "ns-3" && in_shard(u), "{ns}/{u}");
    }
}

// ---- malformed selectors ---------------------------------------------------------------------

#[tokio::test]
async fn a_malformed_selector_is_a_400_naming_the_parameter_and_the_reason() {
    let sim = start(gate_on()).await;
    let all = seed(&sim);
    let cases = [
        (
            "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
            "hexStart must be a 0x-prefixed 16-digit hex value, got \"0x0\" (did you mean \"0x0000000000000000\"?)",
        ),
        (
            "shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
            "unsupported field path \"object.metadata.name\"; supported: object.metadata.uid, object.metadata.namespace",
        ),
        (
            "shardRange(object.metadata.uid, '0x8000000000000000', '0x0000000000000000')",
            "shard range start 0x8000000000000000 must be less than end 0x0000000000000000",
        ),
        (
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') && shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
            "unsupported function \"_&&_\"; only shardRange() and || are allowed",
        ),
        (
            "  ",
            "empty shard selector is not allowed; omit the parameter for unfiltered lists",
        ),
    ];
    for (sel, reason) in cases {
        for (method, path) in [
            ("GET", "/api/v1/configmaps?"),
            (
                "GET",
                "/api/v1/namespaces/ns-0/configmaps?watch=true&timeoutSeconds=1&",
            ),
            ("GET", "/api/v1/watch/configmaps?timeoutSeconds=1&"),
            ("DELETE", "/api/v1/namespaces/ns-0/configmaps?"),
        ] {
            let r = raw(
                sim.addr(),
                method,
                &format!("{path}shardSelector={}", enc(sel)),
                None,
            )
            .await;
            assert_eq!(r.code, 400, "{method} {path} {sel}: {}", r.body);
            let s = r.json();
            assert_eq!(s["kind"], "Status");
            assert_eq!(s["status"], "Failure");
            assert_eq!(s["reason"], "BadRequest");
            assert_eq!(s["code"], 400);
            assert_eq!(
                s["message"].as_str().unwrap(),
                format!("invalid shardSelector: {reason}"),
                "{method} {path}"
            );
        }
    }
    assert_eq!(
        all_configmaps(&sim),
        all,
        "a refused deletecollection deletes nothing"
    );
}

// ---- the gate off ----------------------------------------------------------------------------

#[tokio::test]
async fn with_the_gate_off_the_selector_is_ignored_and_no_shard_info_appears() {
    let sim = start(SimConfig::default()).await;
    assert!(!sim.config().sharded_list_and_watch, "off by default");
    let all = seed(&sim);
    let every: BTreeSet<String> = all.keys().cloned().collect();
    for sel in [
        selector("uid", &three_shards()[0]),
        "shardRange(object.metadata.uid, '0x0', 'nonsense')".to_string(),
    ] {
        let list = get(
            &sim,
            &format!("/api/v1/configmaps?shardSelector={}", enc(&sel)),
        )
        .await
        .json();
        assert_eq!(
            uids(&list).into_iter().collect::<BTreeSet<_>>(),
            every,
            "{sel}"
        );
        assert!(list["metadata"].get("shardInfo").is_none(), "{sel}");
        let r = get(
            &sim,
            &format!(
                "/api/v1/configmaps?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1&shardSelector={}",
                enc(&sel)
            ),
        )
        .await;
        let added: BTreeSet<String> = r
            .events()
            .iter()
            .filter(|e| e["type"] == "ADDED")
            .map(|e| e["object"]["metadata"]["uid"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(added, every, "{sel}");
    }
    let rv = churn(&sim);
    let r = get(
        &sim,
        &format!(
            "/api/v1/namespaces/ns-0/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=1&shardSelector={}",
            enc(&selector("uid", &three_shards()[0]))
        ),
    )
    .await;
    assert_eq!(
        event_triples(&r.events()),
        expected_events(&sim, rv, &[(0, END)]),
        "every change, as a server without the feature sends"
    );
}

// ---- a real client ---------------------------------------------------------------------------

#[tokio::test]
async fn kube_client_lists_one_shard_with_the_parameter() {
    let sim = start(gate_on()).await;
    let all = seed(&sim);
    let client = client(&sim);
    let ranges = &namespace_shards()[0];
    let sel = selector("namespace", ranges);
    // kube 5 has no shardSelector in ListParams: the request kube builds gets the parameter
    // appended, as a client adds a parameter its library does not know yet.
    let request = || {
        let lp = ListParams::default().limit(500);
        let req = kube::core::Request::new("/api/v1/configmaps")
            .list(&lp)
            .unwrap();
        let (mut parts, body) = req.into_parts();
        parts.uri = format!("{}&shardSelector={}", parts.uri, enc(&sel))
            .parse()
            .unwrap();
        http::Request::from_parts(parts, body)
    };
    let text = client
        .request_text(request())
        .await
        .expect("the list succeeds");
    let list: kube::core::ObjectList<ConfigMap> =
        serde_json::from_str(&text).expect("kube decodes the list");
    let raw_list: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(raw_list["metadata"]["shardInfo"]["selector"], sel.as_str());
    let got: BTreeSet<String> = list
        .items
        .iter()
        .map(|c| c.metadata.uid.clone().unwrap())
        .collect();
    let want: BTreeSet<String> = all
        .iter()
        .filter(|(_, (ns, _))| in_ranges(model_fnv1a_64(ns.as_bytes()), ranges))
        .map(|(u, _)| u.clone())
        .collect();
    assert!(!want.is_empty() && want.len() < all.len());
    assert_eq!(got, want);
    let typed: kube::core::ObjectList<ConfigMap> = client.request(request()).await.unwrap();
    assert_eq!(typed.items.len(), want.len());
    // The server saw the parameter on the list kube sent.
    let seen = sim.request_log().matching(|r| {
        r.path == "/api/v1/configmaps"
            && r.param("shardSelector").as_deref() == Some(sel.as_str())
            && r.param("limit").as_deref() == Some("500")
    });
    assert_eq!(seen.len(), 2, "both lists carried the selector");
}

// ---- discovery -------------------------------------------------------------------------------

/// Whether the server's OpenAPI v3 document for core v1 offers `shardSelector` on pod lists.
async fn openapi_offers_shard_selector(sim: &RunningSim) -> bool {
    let root = get(sim, "/openapi/v3").await.json();
    let url = root["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .expect("core v1 is published")
        .to_string();
    let doc = get(sim, &url).await.json();
    doc["paths"]["/api/v1/namespaces/{namespace}/pods"]["get"]["parameters"]
        .as_array()
        .is_some_and(|ps| ps.iter().any(|p| p["name"] == "shardSelector"))
}

#[tokio::test]
async fn openapi_v3_offers_the_shard_selector_exactly_when_the_gate_is_on() {
    let on = start(gate_on()).await;
    assert!(openapi_offers_shard_selector(&on).await);
    let off = start(SimConfig::default()).await;
    assert!(!openapi_offers_shard_selector(&off).await);
}

// ---- kubectl ---------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_raw_reads_one_shard_and_prints_the_refusal_of_a_malformed_one() {
    let sim = start(gate_on()).await;
    let all = seed(&sim);
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kc).unwrap();
    let kubectl = |path: String| {
        let mut cmd = tokio::process::Command::new(kubectl_path());
        cmd.arg("--kubeconfig")
            .arg(&kc)
            .args(["get", "--raw", &path]);
        cmd.kill_on_drop(true);
        cmd
    };
    let ranges = &three_shards()[2];
    let sel = selector("uid", ranges);
    let path = format!("/api/v1/configmaps?shardSelector={}", enc(&sel));
    let o = kubectl_output(kubectl(path.clone()), &["get", "--raw", &path]).await;
    assert!(o.ok, "{}", o.stderr);
    let list: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(list["metadata"]["shardInfo"]["selector"], sel.as_str());
    let want: BTreeSet<String> = all
        .keys()
        .filter(|u| in_ranges(model_fnv1a_64(u.as_bytes()), ranges))
        .cloned()
        .collect();
    assert_eq!(uids(&list).into_iter().collect::<BTreeSet<_>>(), want);

    let bad = "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')";
    let path = format!("/api/v1/configmaps?shardSelector={}", enc(bad));
    let o = kubectl_output(kubectl(path.clone()), &["get", "--raw", &path]).await;
    assert!(!o.ok);
    assert_eq!(
        o.stderr,
        "Error from server (BadRequest): invalid shardSelector: hexStart must be a 0x-prefixed 16-digit hex value, got \"0x0\" (did you mean \"0x0000000000000000\"?)\n"
    );
}
