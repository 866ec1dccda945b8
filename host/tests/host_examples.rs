//! The isolation example (examples/isolation): a slow plugin beside a fast one
//! on one shared informer. The fast one never waits for the slow one (I1), the
//! slow one's queue stays bounded and overflow is coalesced (I4), and at the
//! end what the plugins hold is what the server holds (I5, I8): the fast
//! plugin's findings (Ready pods per namespace) and an observer's view (keys
//! and resourceVersions) equal a fresh list from the simulator.

use crate::host_support;

use std::time::Duration;

use host_support::content::*;
use host_support::*;

#[test]
fn slow_plugin_does_not_hold_back_fast_plugin() {
    plugin_wasm("slow");
    plugin_wasm("pod-ready-counter");
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    // The example as shipped, with the simulator's own churn replaced by the
    // test's writes, and an observer beside the two plugins.
    copy_config(
        &repo_root().join("examples/isolation"),
        &config,
        0.0,
        &[("observer.toml", echo_observer("observer", "v1/pods", "obs"))],
    );
    let report = tmp.path().join("r.json");
    let kubeconfig = tmp.path().join("kc");
    let mut host = HostProc::run_sim(
        config.to_str().unwrap(),
        &[
            "--report",
            report.to_str().unwrap(),
            "--kubeconfig-out",
            kubeconfig.to_str().unwrap(),
        ],
    );
    let addr = host.metrics_addr();
    host.wait_line(&["running 3 plugin(s)"], LONG);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(client(&kubeconfig));
    // The observer has had its replay (the slow plugin takes minutes for its
    // own: 600 pods at 200 ms, which is the point).
    let before = rt.block_on(list_pods(&client));
    let deadline = std::time::Instant::now() + LONG;
    while echo_view(&host.log(), "observer", "obs") != before {
        assert!(
            std::time::Instant::now() < deadline,
            "no replay for the observer"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = addr;
    // Churn through the API, far faster than the slow plugin's 200 ms.
    let (flips, deletes, creates) = rt.block_on(churn_pods(&client, 300, 7));
    eprintln!("wrote {flips} Ready flips, {deletes} deletes, {creates} creates");
    let want_pods = rt.block_on(list_pods(&client));
    let want_ready = rt.block_on(ready_per_namespace(&client));
    // Positive signal: the observer and the fast plugin reach the server's
    // state (the fast plugin recounts from the cache on each event).
    let deadline = std::time::Instant::now() + LONG;
    loop {
        let log = host.log();
        let seen = echo_view(&log, "observer", "obs");
        let counted = ready_counter_findings(&log, "fast");
        if seen == want_pods && want_ready.iter().all(|(ns, c)| counted.get(ns) == Some(c)) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never converged: observer differs on {} keys; fast says {counted:?}, the server {want_ready:?}",
            want_pods
                .iter()
                .filter(|(k, v)| seen.get(*k) != Some(v))
                .count()
                + seen.keys().filter(|k| !want_pods.contains_key(*k)).count()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    host.terminate();
    let status = host.wait_exit(Duration::from_secs(400));
    assert!(
        status.success(),
        "exit {status}; log:\n{}",
        host.log().join("\n")
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let slow = &r["plugins"]["slow"];
    let fast = &r["plugins"]["fast"];
    let total = |p: &serde_json::Value| -> u64 {
        ["added", "updated", "deleted", "synced"]
            .iter()
            .map(|k| p["delivered"][k].as_u64().unwrap())
            .sum()
    };
    // Bounded queue, overflow merged per key.
    assert_eq!(slow["queue_depth_max"], 64, "{slow}");
    assert!(slow["overflowed"].as_u64().unwrap() > 0, "{slow}");
    assert!(slow["coalesced"].as_u64().unwrap() > 0, "{slow}");
    // The fast plugin kept up: it converged to the server's state (above)
    // with no notification merged or overflowed, so it handled each one the
    // informer delivered (the server emits no event for a write that changes
    // nothing, so the count of writes is not the oracle), never near its
    // capacity, and no event waited behind the slow plugin's 200 ms handler;
    // the slow one fell behind (its overflow was coalesced above) and handled
    // fewer.
    assert_eq!(fast["coalesced"], 0, "{fast}");
    assert!(
        total(fast) >= before.len() as u64 && total(fast) > total(slow),
        "fast {} vs slow {}: {fast}",
        total(fast),
        total(slow)
    );
    assert!(fast["overflowed"] == 0, "{fast}");
    assert!(
        fast["latency_us"]["p50"].as_u64().unwrap() < 200_000,
        "{fast}"
    );
    assert!(
        slow["latency_us"]["p50"].as_u64().unwrap() >= 190_000,
        "{slow}"
    );
}
