//! A resourceVersion that goes backwards, end to end in process: the host runs
//! against a simulator that is then replaced, on the same address, by one
//! holding a smaller state (an etcd restore). The host relists from
//! resourceVersion "" and ends with exactly the new server's objects, in the
//! informer's cache and in a plugin's own view (rebuilt from what the plugin
//! logged it received): vanished objects deleted as final-state-unknown,
//! objects that came back at a lower resourceVersion updated.

use crate::inproc_support;

use std::time::Duration;

use apisim::SimConfig;
use inproc_support::*;
use kube_informer::cache_view::CacheView;
use wasm_informer::metrics::Observe;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_whose_server_is_restored_to_a_smaller_state_ends_with_exactly_that_state() {
    plugin_log();
    let cfg = SimConfig {
        too_large_rv_wait: Duration::from_millis(500),
        ..SimConfig::default()
    };
    let (sim, mut wl) = sim_with_pods(150, 71, cfg.clone()).await;
    for _ in 0..300 {
        step(&sim, &mut wl);
    }
    let tmp = tempfile::tempdir().unwrap();
    let host = host_on(tmp.path(), &sim, "").await;
    std::fs::write(
        tmp.path().join("plugins/echo.toml"),
        echo_manifest("echo", "v1"),
    )
    .unwrap();
    host.reconcile().await;
    let old = server_pods(&sim);
    eventually("the plugin's view is the first server's state", 120, || {
        view_of(&received("echo", "v1")) == old
    })
    .await;
    sim.faults()
        .wait_open_watches(1, Duration::from_secs(60))
        .await
        .unwrap();

    // The restore: the same seed, fewer pods, no churn: a smaller state at
    // a lower resourceVersion, on the same address.
    let next = apisim::Sim::new(cfg);
    apisim::workload::Workload::seed(
        next.store().clone(),
        apisim::workload::WorkloadConfig::new(50, 3, 71),
    )
    .unwrap();
    assert!(next.store().current_rv() < sim.store().current_rv());
    let sim = sim.replace(next).await.unwrap();
    let new = server_pods(&sim);
    assert!(new.len() < old.len());

    let cache = host.registry().clone();
    let cached = || -> std::collections::BTreeMap<String, u64> {
        cache
            .list("v1/pods", None, None)
            .unwrap_or_default()
            .iter()
            .map(|o| (o.key(), o.meta.resource_version.parse().unwrap()))
            .collect()
    };
    eventually("the informer holds exactly the new state", 120, || {
        cached() == new
    })
    .await;
    eventually("the plugin's view is exactly the new state", 120, || {
        view_of(&received("echo", "v1")) == new
    })
    .await;
    let got = received("echo", "v1");
    for k in old.keys().filter(|k| !new.contains_key(*k)) {
        let last = got.iter().rev().find(|e| &e.key == k).unwrap();
        assert!(
            last.kind == "deleted" && last.fsu,
            "{k}: vanished, ends with {last:?}"
        );
    }
    let lowered: Vec<&String> = new
        .iter()
        .filter(|(k, rv)| old.get(*k).is_some_and(|o| o > rv))
        .map(|(k, _)| k)
        .collect();
    assert!(!lowered.is_empty(), "some objects came back older");
    for k in lowered {
        let last = got.iter().rev().find(|e| &e.key == k).unwrap();
        assert_eq!(
            (last.kind.as_str(), last.rv),
            ("updated", new[k]),
            "{k}: came back at a lower resourceVersion"
        );
    }
    let r = host.report();
    let pods = &r.informers["v1/pods"];
    assert_eq!(pods.relists_too_large, 1, "{pods:?}");
    assert_eq!(pods.objects, new.len() as u64);
    assert_eq!(
        pods.last_sync_resource_version,
        sim.store().current_rv().to_string()
    );
    host.shutdown().await;
}
