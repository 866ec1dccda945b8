//! host.toml wiring of the cache, in process: pre-warmed informers start with
//! the host, the configured secondary indexes answer `by-index` from the real
//! Indexer, and the transform option reaches the cached objects.

use std::collections::BTreeSet;
use std::time::Duration;

use kube_informer::cache_view::{CacheError, CacheView};
use wasm_informer::config::{ConfigDir, HostSettings};
use wasm_informer::host::{Host, HostOptions};
use wasm_informer::metrics::Observe;
use wasm_informer::sim::EmbeddedSim;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prewarm_indexers_and_transform_from_host_toml() {
    let tmp = tempfile::tempdir().unwrap();
    let host_toml = tmp.path().join("host.toml");
    std::fs::write(
        &host_toml,
        "metrics_addr = \"127.0.0.1:0\"\nresources = [\"v1/pods\"]\n[transform]\nstrip_managed_fields = false\n[indexers.\"v1/pods\"]\nnode = \"spec.nodeName\"\napp = \"metadata.labels.app\"\n[sim]\npods = 80\nnamespaces = 2\nnodes = 4\nchurn_per_second = 0\n",
    )
    .unwrap();
    let config = ConfigDir {
        dir: tmp.path().to_path_buf(),
        host: HostSettings::load(&host_toml).unwrap(),
    };
    let sim = EmbeddedSim::start(
        &config.host.sim,
        "127.0.0.1:0".parse().unwrap(),
        &tmp.path().join("kc"),
    )
    .await
    .unwrap();
    let host = Host::new(config, sim.client().await.unwrap(), HostOptions::default())
        .await
        .unwrap();

    // Pre-warmed: the informer runs with no plugin at all, and syncs.
    let informer = host
        .registry()
        .informer("v1/pods")
        .expect("pre-warmed informer");
    assert!(
        informer.wait_synced(Duration::from_secs(120)).await,
        "never synced"
    );
    // Ready once the config directory (no plugins here) has been loaded too.
    assert!(
        !host.not_ready().is_empty(),
        "ready before the config is loaded"
    );
    host.reconcile().await;
    assert!(host.not_ready().is_empty(), "{:?}", host.not_ready());
    let cache: &dyn CacheView = host.registry().as_ref();
    assert_eq!(cache.has_synced("v1/pods"), Ok(true));

    // by-index answers exactly what the simulator holds.
    let store = sim.running().unwrap().store();
    let all = store.list_all(store.rid("v1", "pods"));
    assert_eq!(all.len(), 80);
    let node_of = |v: &serde_json::Value| {
        v["spec"]["nodeName"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let nodes: BTreeSet<String> = all.iter().map(|o| node_of(&o.value())).collect();
    assert!(nodes.len() > 1);
    by_node_agrees(cache, &all, &nodes, &node_of);
    let web = cache.by_index("v1/pods", "app", "web").unwrap();
    assert!(web.iter().all(|o| o.meta.labels.get("app") == Some("web")));
    assert_eq!(
        cache.list("v1/pods", None, Some("app=web")).unwrap().len(),
        web.len(),
        "label selector and label index agree"
    );
    assert!(matches!(
        cache.by_index("v1/pods", "nope", "x"),
        Err(CacheError::UnknownIndex(_))
    ));

    // strip_managed_fields = false keeps managedFields in the cached JSON.
    let any = cache.list("v1/pods", None, None).unwrap();
    assert!(any[0].json().contains("managedFields"));

    let report = host.shutdown().await;
    assert_eq!(report.informers["v1/pods"].objects, 80);
    assert!(
        host.registry().informer("v1/pods").is_none(),
        "shutdown stops pre-warmed informers"
    );
    sim.shutdown().await;
}

/// With `[transform] pack` (the default), the compactor packs the whole cache in
/// the background, and every read still returns the JSON the server holds
/// (managedFields stripped), with the field indexes answering as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_packed_cache_serves_exactly_what_the_server_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let host_toml = tmp.path().join("host.toml");
    std::fs::write(
        &host_toml,
        "metrics_addr = \"127.0.0.1:0\"\nresources = [\"v1/pods\"]\n[indexers.\"v1/pods\"]\nnode = \"spec.nodeName\"\n[sim]\npods = 200\nnamespaces = 3\nnodes = 5\nchurn_per_second = 0\n",
    )
    .unwrap();
    let config = ConfigDir {
        dir: tmp.path().to_path_buf(),
        host: HostSettings::load(&host_toml).unwrap(),
    };
    assert!(config.host.transform.pack, "packing is on by default");
    let sim = EmbeddedSim::start(
        &config.host.sim,
        "127.0.0.1:0".parse().unwrap(),
        &tmp.path().join("kc"),
    )
    .await
    .unwrap();
    let host = Host::new(config, sim.client().await.unwrap(), HostOptions::default())
        .await
        .unwrap();
    let informer = host.registry().informer("v1/pods").unwrap();
    assert!(informer.wait_synced(Duration::from_secs(120)).await);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while informer.stats().pack.packed_objects < 200 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not packed: {:?}",
            informer.stats().pack
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pack = informer.stats().pack;
    assert!(pack.body_bytes * 3 < pack.text_bytes, "{pack:?}");

    // The oracle is the simulator's store: each object less managedFields.
    let cache: &dyn CacheView = host.registry().as_ref();
    let store = sim.running().unwrap().store();
    let all = store.list_all(store.rid("v1", "pods"));
    assert_eq!(all.len(), 200);
    for o in &all {
        let mut want = o.value();
        want["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        let cached = cache.get("v1/pods", &o.key()).unwrap().expect("cached");
        assert!(cached.is_packed(), "{} not packed", o.key());
        let got: serde_json::Value = serde_json::from_str(&cached.json()).unwrap();
        assert_eq!(got, want, "{}", o.key());
    }
    // A field index computed from the text still answers from the packed cache.
    let node_of = |v: &serde_json::Value| v["spec"]["nodeName"].as_str().unwrap().to_string();
    let nodes: BTreeSet<String> = all.iter().map(|o| node_of(&o.value())).collect();
    by_node_agrees(cache, &all, &nodes, &node_of);
    let report = host.shutdown().await;
    assert_eq!(report.informers["v1/pods"].packed_objects, 200);
    sim.shutdown().await;
}

/// `by-index node=N` answers, for every node, exactly the keys of the pods the
/// simulator holds on it.
fn by_node_agrees(
    cache: &dyn CacheView,
    all: &[apisim::ObjectRef],
    nodes: &BTreeSet<String>,
    node_of: &dyn Fn(&serde_json::Value) -> String,
) {
    for node in nodes {
        let want: BTreeSet<String> = all
            .iter()
            .filter(|o| node_of(&o.value()) == *node)
            .map(|o| o.key())
            .collect();
        let got: BTreeSet<String> = cache
            .by_index("v1/pods", "node", node)
            .unwrap()
            .iter()
            .map(|o| o.key())
            .collect();
        assert_eq!(got, want, "by-index node={node}");
    }
}
