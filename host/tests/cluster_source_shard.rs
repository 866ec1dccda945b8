//! Sharding at the source across processes: three `wasm-informer run`
//! replicas in `[cluster] mode = "sharded"` with `shard_by = "uid"`, against
//! one `wasm-informer sim` with server-side sharded list and watch
//! (KEP-5866) on, and again with it off (each replica then filters what it
//! receives).
//!
//! Oracles, all independent of the replicas' own view of themselves:
//! - the simulator's store: which pods exist, with which uid;
//! - an independent ring model (`cluster_support::ring_model`) placing each
//!   pod at the FNV-1a hash of its uid, hashed here by apisim's own
//!   implementation, over the live members;
//! - the simulator's request log: which `shardSelector` each replica's lists
//!   and watches carried, parsed by apisim's parser, and which lists it
//!   sent after a membership change;
//! - what each replica's `event-log` plugin logged it handled (the
//!   duplicate-handling and final-state oracles).
//!
//! What a replica caches is read from its `/cluster?keys=1` (`cached_keys`)
//! and compared with those oracles; its own report of its ranges is not
//! trusted for any verdict.

use crate::cluster_support;
use crate::host_support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use cluster_support::ring_model::RingModel;
use cluster_support::*;
use host_support::LONG;

/// Virtual nodes per member (the host's default).
const VNODES: u32 = 100;

/// Adds `cluster` and `sim` lines to the fixture's `[cluster]` and `[sim]`.
fn extend_host_toml(fx: &tempfile::TempDir, cluster: &str, sim: &str) {
    let path = fx.path().join("host.toml");
    let toml = std::fs::read_to_string(&path)
        .unwrap()
        .replace("[cluster]\n", &format!("[cluster]\n{cluster}"))
        .replace("[sim]\n", &format!("[sim]\n{sim}"));
    std::fs::write(&path, toml).unwrap();
}

/// A fixture of `pods` pods placed by uid, the simulator's gate as given.
fn fixture(gate: bool, pods: usize) -> tempfile::TempDir {
    let fx = cluster_fixture("sharded", FAST, pods);
    extend_host_toml(
        &fx,
        "shard_by = \"uid\"\n",
        &format!("sharded_list_and_watch = {gate}\n"),
    );
    fx
}

/// The replica the independent ring model gives the pod of `uid` to.
fn owner_of(ring: &RingModel, uid: &str) -> String {
    ring.owner_at(apisim::fnv1a_64(uid.as_bytes()))
        .unwrap()
        .to_string()
}

/// What `r` caches of `v1/pods`, from its `/cluster?keys=1`.
fn cached(r: &Replica) -> Option<BTreeSet<String>> {
    let c = r.cluster(true)?;
    Some(
        c["cached_keys"]["v1/pods"]
            .as_array()?
            .iter()
            .filter_map(|k| k.as_str().map(str::to_string))
            .collect(),
    )
}

/// Percent-decodes a query string value (`+` is a space).
fn decode(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let h = std::str::from_utf8(&b[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(h, 16).unwrap());
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap()
}

fn param(q: &str, key: &str) -> Option<String> {
    q.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| decode(v))
    })
}

/// `r`'s requests for the pods collection (lists and watches), in order.
fn pod_reads<'a>(reqs: &'a [Req], r: &str) -> Vec<&'a Req> {
    reqs.iter()
        .filter(|q| q.replica() == Some(r) && q.method == "GET" && q.path == "/api/v1/pods")
        .collect()
}

/// Waits until every live replica caches exactly the stable pods the ring
/// model gives it (and no stable pod of another), then checks that its
/// last watch asked the server for exactly those ranges.
fn check_stable_shards(sim: &Sim, live: &[Replica], stable: &BTreeMap<String, String>, what: &str) {
    let members: Vec<String> = live.iter().map(|r| r.identity.clone()).collect();
    let ring = RingModel::new(&members, VNODES);
    let want: BTreeMap<String, BTreeSet<String>> = members
        .iter()
        .map(|m| {
            let keys = stable
                .iter()
                .filter(|(_, uid)| owner_of(&ring, uid) == *m)
                .map(|(k, _)| k.clone())
                .collect();
            (m.clone(), keys)
        })
        .collect();
    let mut last = BTreeMap::new();
    let took = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_until(
            &format!("{what}: each replica caches its stable shard"),
            LONG,
            || {
                last = live
                    .iter()
                    .map(|r| {
                        let mine: BTreeSet<String> = cached(r)
                            .unwrap_or_default()
                            .into_iter()
                            .filter(|k| stable.contains_key(k))
                            .collect();
                        (r.identity.clone(), mine)
                    })
                    .collect();
                last == want
            },
        )
    }));
    if took.is_err() {
        for (m, keys) in &want {
            let got = last.get(m).cloned().unwrap_or_default();
            eprintln!(
                "{m}: want {} got {}; missing {:?}; extra {:?}",
                keys.len(),
                got.len(),
                keys.difference(&got).take(5).collect::<Vec<_>>(),
                got.difference(keys).take(5).collect::<Vec<_>>()
            );
        }
        panic!("{what}: the replicas' caches are not their shards");
    }
    for (m, keys) in &want {
        assert!(!keys.is_empty(), "{what}: {m} owns no stable pod");
    }
    // The server was asked for exactly those ranges: the last watch of each
    // replica carries a selector that selects a stable pod iff the ring
    // gives that pod to it. (A replica alone in the ring owns the whole
    // space and asks with no selector.)
    let reqs = sim.requests();
    for r in live {
        let reads = pod_reads(&reqs, &r.identity);
        assert!(!reads.is_empty(), "{what}: {} never read pods", r.identity);
        let watch = reads
            .iter()
            .rev()
            .find(|q| param(&q.query, "watch").as_deref() == Some("true"))
            .expect("a watch");
        let sel = apisim::ShardSelector::parse(&param(&watch.query, "shardSelector").unwrap())
            .expect("a selector the server accepts");
        assert_eq!(sel.field(), apisim::ShardField::Uid);
        for (key, uid) in stable {
            let h = apisim::fnv1a_64(uid.as_bytes());
            let selected = sel.ranges().iter().any(|rg| rg.contains(h));
            assert_eq!(
                selected,
                owner_of(&ring, uid) == r.identity,
                "{what}: {}'s watch selector and the ring disagree on {key}",
                r.identity
            );
        }
    }
}

/// What the replica says of its pods cache in `/cluster`.
fn source_of(r: &Replica) -> serde_json::Value {
    r.cluster(false).unwrap()["caches"]["v1/pods"].clone()
}

fn three_replicas_split_the_cache_and_keys_move_by_range(gate: bool) {
    let fx = fixture(gate, 90);
    let sim = Sim::start(fx.path());
    let stable: BTreeMap<String, String> = sim.pod_metadata("uid");
    let stable_keys: Vec<String> = stable.keys().cloned().collect();
    let mut live: Vec<Replica> = ["rep-a", "rep-b", "rep-c"]
        .iter()
        .map(|id| Replica::start(fx.path(), &sim, id))
        .collect();
    let mut gone: Vec<Replica> = Vec::new();
    let mut s = Sampling::default();
    wait_until("three ready replicas", LONG, || {
        live.iter().all(Replica::ready)
    });
    s.until_settled(&live.iter().collect::<Vec<_>>(), &stable_keys, LONG);
    check_stable_shards(&sim, &live, &stable, "three replicas");
    // A plugin learns from its init config that its cache is a shard.
    let init = live[0]
        .proc
        .log()
        .into_iter()
        .find(|l| l.contains("init config="))
        .unwrap();
    assert!(init.contains("\"shard_by\":\"uid\""), "{init}");
    let want = if gate { "server" } else { "client" };
    for r in &live {
        let c = source_of(r);
        assert_eq!(c["shard_by"], "uid", "{c}");
        assert_eq!(c["source"]["filtering"], want, "{}: {c}", r.identity);
        let m = r.metrics_text();
        assert!(
            m.contains(&format!(
                "wasm_informer_informer_shard_ratio{{resource=\"v1/pods\",filtering=\"{want}\"}}"
            )),
            "{}",
            m.lines()
                .filter(|l| l.contains("shard"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        assert!(m.contains("wasm_informer_informer_bytes_received_total{resource=\"v1/pods\"}"));
    }

    // kill -9 of rep-c under churn: its ranges move to the survivors, who
    // list only what they gained.
    let churn = Churn::start(sim.addr, stable_keys.clone(), Duration::from_millis(30));
    std::thread::sleep(Duration::from_secs(2));
    let c_keys: BTreeSet<String> = cached(&live[2]).unwrap();
    let t_kill = now_micros();
    let mut c = live.remove(2);
    c.proc.kill9();
    gone.push(c);
    s.until_settled(&live.iter().collect::<Vec<_>>(), &stable_keys, LONG);
    let ops = churn.stop();
    check_stable_shards(&sim, &live, &stable, "after rep-c was killed");
    // The churn touched every replica's pods: a server that shards sent each
    // replica only its own; one that does not sent everything.
    for r in &live {
        let c = source_of(r);
        let filtered = c["source"]["filtered_out"].as_u64().unwrap();
        if gate {
            assert_eq!(
                filtered, 0,
                "{}: the server sent only its shard: {c}",
                r.identity
            );
        } else {
            assert!(
                filtered > 0,
                "{}: everything arrives and is filtered: {c}",
                r.identity
            );
        }
    }
    let reqs = sim.requests();
    for r in &live {
        let gained: Vec<&Req> = pod_reads(&reqs, &r.identity)
            .into_iter()
            .filter(|q| q.at_micros > t_kill && param(&q.query, "watch").is_none())
            .collect();
        assert!(
            gained
                .iter()
                .any(|q| param(&q.query, "resourceVersionMatch").as_deref() == Some("Exact")),
            "{}: no list of its gained ranges at the resourceVersion reached: {:?}",
            r.identity,
            gained.iter().map(|q| &q.query).collect::<Vec<_>>()
        );
    }
    let missing = unhandled_since(
        &live,
        t_kill,
        c_keys.iter().filter(|k| stable.contains_key(*k)),
    );
    assert!(
        missing.is_empty(),
        "keys rep-c cached that no survivor handled after the kill: {missing:?}"
    );

    // A new replica joins: its ranges come from the others, who evict them.
    let churn = Churn::start(sim.addr, stable_keys.clone(), Duration::from_millis(30));
    live.push(Replica::start(fx.path(), &sim, "rep-d"));
    wait_until("rep-d ready", LONG, || live[2].ready());
    s.until_settled(&live.iter().collect::<Vec<_>>(), &stable_keys, LONG);
    let ops = ops + churn.stop();
    check_stable_shards(&sim, &live, &stable, "after rep-d joined");
    for r in &live[..2] {
        let evicted = source_of(r)["source"]["evicted"].as_u64().unwrap();
        assert!(evicted > 0, "{} gave rep-d nothing", r.identity);
    }

    // Without churn, the union of the caches is exactly the server's pods,
    // each in one cache only, and every pod's final state reached a live
    // replica's plugin exactly as the server holds it.
    let everything: BTreeSet<String> = sim.pod_metadata("uid").into_keys().collect();
    wait_until("the caches partition the server's pods", LONG, || {
        let caches: Vec<BTreeSet<String>> = live.iter().filter_map(cached).collect();
        let total: usize = caches.iter().map(BTreeSet::len).sum();
        let union: BTreeSet<String> = caches.into_iter().flatten().collect();
        union == everything && total == everything.len()
    });
    let all = final_states_then_every_event(&sim, &live, &gone);
    let dups = duplicate_handlings(&all);
    eprintln!(
        "gate {gate}: churn ops {ops}, events {}, key moves {}, settled samples {}, duplicate handlings {}",
        all.len(),
        moves(&all),
        s.settled,
        dups.len()
    );
    assert!(dups.is_empty(), "duplicate handlings: {dups:#?}");
    assert!(moves(&all) > 0, "no key changed hands");
    let started = Instant::now();
    for mut r in live {
        r.proc.terminate();
        r.proc.wait_exit(LONG);
    }
    eprintln!("stopped in {:?}", started.elapsed());
}

#[test]
fn sharded_at_the_source_each_replica_caches_its_ranges_and_keys_move_by_range() {
    three_replicas_split_the_cache_and_keys_move_by_range(true);
}

#[test]
fn on_a_server_without_sharded_watches_each_replica_filters_to_its_ranges() {
    three_replicas_split_the_cache_and_keys_move_by_range(false);
}

/// A Deployment `d-i` in `ns`, labelled `expose: "true"`, with one
/// container port (what `service-exposer` exposes as Service `d-i`).
fn exposed_deployment(ns: &str, i: usize) -> String {
    serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": format!("d-{i}"), "namespace": ns, "labels": {"expose": "true"}},
        "spec": {"replicas": 0,
            "selector": {"matchLabels": {"app": format!("d-{i}")}},
            "template": {"metadata": {"labels": {"app": format!("d-{i}")}},
                "spec": {"containers": [{"name": "c", "image": "busybox",
                    "ports": [{"containerPort": 8080}]}]}}}
    })
    .to_string()
}

/// Services of every namespace: `ns/name` to `spec.selector`.
fn all_service_selectors(sim: &Sim) -> BTreeMap<String, serde_json::Value> {
    sim.items("/api/v1/services")
        .iter()
        .map(|s| {
            let m = &s["metadata"];
            (
                format!(
                    "{}/{}",
                    m["namespace"].as_str().unwrap(),
                    m["name"].as_str().unwrap()
                ),
                s["spec"]["selector"].clone(),
            )
        })
        .collect()
}

/// A controller sharded at the source by namespace: three replicas run
/// `service-exposer` (`for` Deployments, `owns` Services) with both
/// resources placed by namespace, over Deployments in six namespaces. Each
/// replica caches only the Deployments and Services of the namespaces the
/// ring gives it, and each Service, patched away from what its Deployment
/// wants, is put back by exactly that replica. Oracles: an independent ring
/// model over the FNV-1a hash of each namespace, the simulator's store (the
/// selectors) and its request log (who patched, and which selectors the
/// replicas' watches carried).
#[test]
fn a_controller_sharded_by_namespace_caches_and_reconciles_only_its_namespaces() {
    const N: usize = 36;
    const NAMESPACES: usize = 6;
    let fx = cluster_fixture_with(
        "sharded",
        FAST,
        0,
        "service-exposer",
        plugin_artifacts::SERVICE_EXPOSER,
        SERVICE_EXPOSER_MANIFEST,
    );
    extend_host_toml(
        &fx,
        "shard_by = \"namespace\"\n",
        "sharded_list_and_watch = true\ndeployments = 0\n",
    );
    let sim = Sim::start(fx.path());
    // Names that differ early: FNV-1a's high bits barely change with a
    // name's last byte, so `team-0` ... `team-5` would sit side by side on
    // the ring (see RUNNING-IN-A-CLUSTER.md).
    let namespaces: Vec<String> = [
        "payments",
        "checkout",
        "search",
        "inventory",
        "auth",
        "frontend",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(namespaces.len(), NAMESPACES);
    let ours = |k: &String| namespaces.iter().any(|ns| k.starts_with(&format!("{ns}/")));
    for ns in &namespaces {
        let (code, body) = sim.create_namespace(ns);
        assert_eq!(code, 201, "{body}");
    }
    for i in 0..N {
        let ns = &namespaces[i % NAMESPACES];
        let (code, body) = sim.request(
            "POST",
            &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
            Some(&exposed_deployment(ns, i)),
        );
        assert_eq!(code, 201, "{body}");
    }
    let live: Vec<Replica> = ["rep-a", "rep-b", "rep-c"]
        .iter()
        .map(|id| Replica::start(fx.path(), &sim, id))
        .collect();
    let members: Vec<String> = live.iter().map(|r| r.identity.clone()).collect();
    let ring = RingModel::new(&members, VNODES);
    let owner_of_ns = |ns: &str| {
        ring.owner_at(apisim::fnv1a_64(ns.as_bytes()))
            .unwrap()
            .to_string()
    };
    let owners: BTreeSet<String> = namespaces.iter().map(|ns| owner_of_ns(ns)).collect();
    assert!(
        owners.len() > 1,
        "the six namespaces should spread: {owners:?}"
    );
    wait_for_one_ring(&live);
    wait_until("a Service for every Deployment", LONG, || {
        all_service_selectors(&sim)
            .keys()
            .filter(|k| ours(k))
            .count()
            == N
    });
    // Each replica caches the Deployments and Services of its namespaces
    // only, and between them every one.
    for resource in ["apps/v1/deployments", "v1/services"] {
        wait_until(&format!("{resource} cached by namespace"), LONG, || {
            let mut union = BTreeSet::new();
            let ok = live.iter().all(|r| {
                let keys: Vec<String> = r
                    .cluster(true)
                    .and_then(|c| {
                        c["cached_keys"][resource].as_array().map(|a| {
                            a.iter()
                                .filter_map(|k| k.as_str().map(str::to_string))
                                .collect()
                        })
                    })
                    .unwrap_or_default();
                let mine = keys.iter().all(|k| {
                    let ns = k.split('/').next().unwrap();
                    owner_of_ns(ns) == r.identity
                });
                union.extend(keys.into_iter().filter(|k| ours(k)));
                mine
            });
            ok && union.len() == N
        });
    }
    let reqs = sim.requests();
    for r in &live {
        for path in ["/apis/apps/v1/deployments", "/api/v1/services"] {
            let watch = reqs
                .iter()
                .rev()
                .find(|q| {
                    q.replica() == Some(r.identity.as_str())
                        && q.method == "GET"
                        && q.path == path
                        && param(&q.query, "watch").as_deref() == Some("true")
                })
                .unwrap_or_else(|| panic!("{} never watched {path}", r.identity));
            let sel = apisim::ShardSelector::parse(&param(&watch.query, "shardSelector").unwrap())
                .expect("a selector the server accepts");
            assert_eq!(sel.field(), apisim::ShardField::Namespace);
            for ns in &namespaces {
                let h = apisim::fnv1a_64(ns.as_bytes());
                assert_eq!(
                    sel.ranges().iter().any(|rg| rg.contains(h)),
                    owner_of_ns(ns) == r.identity,
                    "{}'s watch of {path} and the ring disagree on {ns}",
                    r.identity
                );
            }
        }
    }

    // Drift every Service; only a reconcile of its Deployment, on the
    // replica of its namespace, repairs it.
    let wanted = all_service_selectors(&sim);
    let t_drift = now_micros();
    for i in 0..N {
        let ns = &namespaces[i % NAMESPACES];
        let (code, body) = sim.request(
            "PATCH",
            &format!("/api/v1/namespaces/{ns}/services/d-{i}"),
            Some(r#"{"spec":{"selector":{"app":"drifted"}}}"#),
        );
        assert_eq!(code, 200, "{body}");
    }
    wait_until("every Service repaired", Duration::from_secs(60), || {
        let now = all_service_selectors(&sim);
        wanted
            .iter()
            .filter(|(k, _)| ours(k))
            .all(|(k, v)| now.get(k) == Some(v))
    });
    let mut repairs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for q in sim.requests().iter().filter(|q| {
        q.at_micros > t_drift
            && q.method == "PATCH"
            && q.path.contains("/services/")
            && q.is_accepted_write()
            && q.replica().is_some()
    }) {
        let ns = q.path.split('/').nth(4).unwrap().to_string();
        repairs
            .entry(ns)
            .or_default()
            .push(q.replica().unwrap().to_string());
    }
    let total: usize = repairs.values().map(Vec::len).sum();
    assert_eq!(total, N, "one repair per Service: {repairs:?}");
    for (ns, by) in &repairs {
        let owner = owner_of_ns(ns);
        assert!(
            by.iter().all(|r| *r == owner),
            "{ns} belongs to {owner}, repaired by {by:?}"
        );
    }
    for mut r in live {
        r.proc.terminate();
        r.proc.wait_exit(LONG);
    }
}
