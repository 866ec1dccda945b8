//! Sharding at the source against apisim (KEP-5866): the cache holds exactly
//! the server's objects whose FNV-1a hash of uid (or namespace) falls in the
//! ranges asked for, whether the server applies `shardSelector` (the gate on)
//! or ignores it (the gate off, filtered here); a change of the ranges lists
//! only the gained ranges, at the resourceVersion reached, and tells no
//! handler of the objects it evicts. The oracle is the simulator's store,
//! hashed by apisim's own FNV-1a, and its request log.

use crate::informer_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use apisim::SimConfig;
use informer_support::*;
use kube_informer::notification::EventKind;
use kube_informer::reflector::{ReflectorConfig, StreamingList};
use kube_informer::shard::{ArcSet, Filtering, ShardField, SourceShard};
use kube_informer::HandlerOptions;

const HALF: u64 = 0x8000_0000_0000_0000;

fn gate(on: bool) -> SimConfig {
    SimConfig {
        sharded_list_and_watch: on,
        ..SimConfig::default()
    }
}

fn sharded(shard: &Arc<SourceShard>, seed: u64) -> ReflectorConfig {
    ReflectorConfig {
        shard: Some(shard.clone()),
        // Asked for, and overridden: a sharded Reflector pages.
        streaming_list: StreamingList::Auto,
        ..fast_reflector(seed)
    }
}

/// key -> resourceVersion of the server's pods whose uid hashes into `arcs`.
fn server_shard(
    sim: &apisim::RunningSim,
    field: ShardField,
    arcs: &ArcSet,
) -> BTreeMap<String, u64> {
    let rid = sim.store().rid("v1", "pods");
    sim.store()
        .list_all(rid)
        .iter()
        .filter(|o| {
            let bytes = match field {
                ShardField::Uid => o.uid.as_bytes(),
                ShardField::Namespace => o.namespace.as_bytes(),
            };
            arcs.contains(apisim::fnv1a_64(bytes))
        })
        .map(|o| (apisim::object::key_of(&o.namespace, &o.name), o.rv))
        .collect()
}

fn pod_requests(sim: &apisim::RunningSim) -> Vec<apisim::RequestRecord> {
    sim.request_log().for_path("/api/v1/pods")
}

async fn a_shard_change_lists_only_the_gained_ranges_and_evicts_the_lost_silently(gate_on: bool) {
    let (sim, _wl) = sim_with_pods(400, 7, gate(gate_on)).await;
    let first = ArcSet::from_ranges(vec![(0, HALF - 1)]);
    let shard = SourceShard::new(ShardField::Uid, first.clone());
    let inf = pods_informer(&sim, sharded(&shard, 7)).await;
    let (rec, view) = ViewRecorder::new(None);
    let _reg = inf.add_handler(rec, HandlerOptions::named("h")).unwrap();
    eventually("the first shard covered", 60, || shard.covered() == first).await;
    let expected = server_shard(&sim, ShardField::Uid, &first);
    assert!(
        expected.len() > 100 && expected.len() < 300,
        "the half holds {} of 400 pods",
        expected.len()
    );
    assert_eq!(
        cache_state(inf.indexer()),
        expected,
        "the cache is the shard"
    );

    let reqs = pod_requests(&sim);
    let sel = reqs[0]
        .param("shardSelector")
        .expect("the list names its shard");
    assert_eq!(
        sel,
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
    );
    assert!(reqs
        .iter()
        .all(|r| r.param("shardSelector").as_deref() == Some(&sel)));
    eventually("a watch with the selector", 60, || {
        pod_requests(&sim)
            .iter()
            .any(|r| r.is_watch() && r.param("shardSelector").as_deref() == Some(&sel))
    })
    .await;
    let want = if gate_on {
        Filtering::Server
    } else {
        Filtering::Client
    };
    assert_eq!(shard.filtering(), want);
    if gate_on {
        assert_eq!(
            shard.status().filtered_out,
            0,
            "the server sent only the shard"
        );
    } else {
        assert!(shard.status().filtered_out >= 100, "{:?}", shard.status());
    }

    // Move to [1/4, 3/4): gain [1/2, 3/4), lose [0, 1/4).
    let before = pod_requests(&sim).len();
    let lists_before = inf.stats().reflector.lists;
    let second = ArcSet::from_ranges(vec![(HALF / 2, HALF + HALF / 2 - 1)]);
    shard.set_target(second.clone());
    eventually("the second shard covered", 60, || shard.covered() == second).await;
    assert_eq!(
        cache_state(inf.indexer()),
        server_shard(&sim, ShardField::Uid, &second),
        "the cache is the new shard"
    );
    let after: Vec<_> = pod_requests(&sim).into_iter().skip(before).collect();
    let gained_list = after
        .iter()
        .find(|r| !r.is_watch())
        .expect("the gained ranges were listed");
    assert_eq!(
        gained_list.param("shardSelector").as_deref(),
        Some("shardRange(object.metadata.uid, '0x8000000000000000', '0xc000000000000000')"),
        "only the gained range is listed"
    );
    assert_eq!(
        gained_list.param("resourceVersionMatch").as_deref(),
        Some("Exact")
    );
    assert_eq!(inf.stats().reflector.lists, lists_before, "no full relist");
    eventually("the watch resumed with the new selector", 60, || {
        pod_requests(&sim).iter().skip(before).any(|r| {
            r.is_watch()
                && r.param("shardSelector").as_deref()
                    == Some("shardRange(object.metadata.uid, '0x4000000000000000', '0xc000000000000000')")
        })
    })
    .await;

    // Live changes after the move reach the cache for the new shard only.
    let mut wl = _wl;
    for _ in 0..200 {
        wl.step().unwrap();
    }
    eventually("the cache follows the churn in its shard", 60, || {
        cache_state(inf.indexer()) == server_shard(&sim, ShardField::Uid, &second)
    })
    .await;

    // The handler heard of no delete for the evicted objects: every delete
    // it saw is of a pod the server no longer has.
    let server_now = server_pods(&sim);
    let v = view.lock();
    for n in v.log.iter().filter(|n| n.kind == EventKind::Deleted) {
        assert!(
            !server_now.contains_key(&*n.key),
            "{} was announced deleted but still exists (an eviction leaked)",
            n.key
        );
    }
    assert!(shard.status().evicted > 50, "{:?}", shard.status());
    assert_eq!(shard.status().range_lists, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_cache_is_exactly_its_shard_when_the_server_shards() {
    a_shard_change_lists_only_the_gained_ranges_and_evicts_the_lost_silently(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_cache_is_exactly_its_shard_when_the_server_ignores_the_selector() {
    a_shard_change_lists_only_the_gained_ranges_and_evicts_the_lost_silently(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_shard_is_synced_and_requests_nothing_until_it_gets_a_range() {
    let (sim, _wl) = sim_with_pods(50, 3, gate(true)).await;
    let shard = SourceShard::new(ShardField::Namespace, ArcSet::empty());
    let inf = pods_informer(&sim, sharded(&shard, 3)).await;
    assert!(inf.wait_synced(Duration::from_secs(30)).await);
    assert_eq!(inf.indexer().len(), 0);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        pod_requests(&sim).is_empty(),
        "nothing is requested for no range"
    );
    shard.set_target(ArcSet::full());
    eventually("everything covered", 60, || {
        shard.covered() == ArcSet::full()
    })
    .await;
    assert_eq!(cache_state(inf.indexer()), server_pods(&sim));
    assert!(
        pod_requests(&sim)
            .iter()
            .all(|r| r.param("shardSelector").is_none()),
        "the whole space needs no selector"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_resource_list_stops_at_the_page_where_the_ranges_shrink() {
    // Replicas starting together each own everything until they see each
    // other: the list of everything must not run to its end once the
    // replica's ranges shrink.
    let (sim, _wl) = sim_with_pods(3000, 11, gate(true)).await;
    sim.faults().set_delay(Some(Duration::from_millis(150)));
    let shard = SourceShard::new(ShardField::Uid, ArcSet::full());
    let inf = pods_informer(&sim, sharded(&shard, 11)).await;
    eventually("the first page requested", 30, || {
        !pod_requests(&sim).is_empty()
    })
    .await;
    let half = ArcSet::from_ranges(vec![(0, HALF - 1)]);
    shard.set_target(half.clone());
    eventually("the half covered", 60, || shard.covered() == half).await;
    sim.faults().set_delay(None);
    assert_eq!(
        cache_state(inf.indexer()),
        server_shard(&sim, ShardField::Uid, &half)
    );
    let whole: Vec<_> = pod_requests(&sim)
        .into_iter()
        .filter(|r| !r.is_watch() && r.param("shardSelector").is_none())
        .collect();
    assert!(
        whole.len() < 6,
        "the list of everything went on after the ranges shrank: {} of its 6 pages",
        whole.len()
    );
}
