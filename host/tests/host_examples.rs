//! The isolation example (examples/isolation): a slow plugin beside a fast one
//! on one shared informer. The fast one never waits for the slow one (I1), the
//! slow one's queue stays bounded and overflow is coalesced (I4), and the cache
//! matches the simulator at the end (I5, I8).

mod host_support;

use std::time::Duration;

use host_support::*;

#[test]
fn slow_plugin_does_not_hold_back_fast_plugin() {
    plugin_wasm("slow");
    plugin_wasm("pod-ready-counter");
    let tmp = tempfile::tempdir().unwrap();
    let report = tmp.path().join("r.json");
    let mut host = HostProc::run_sim(
        "examples/isolation",
        &[
            "--duration",
            "15",
            "--report",
            report.to_str().unwrap(),
            "--metrics-addr",
            "127.0.0.1:0",
        ],
    );
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
    // The fast plugin kept up: many more events, never near its capacity, and
    // no event waited behind the slow plugin's 200 ms handler.
    assert!(
        total(fast) > 5 * total(slow),
        "fast {} vs slow {}",
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
    let pods = &r["informers"]["v1/pods"];
    assert_eq!(pods["objects"], r["simulator_objects"]["v1/pods"]);
}
