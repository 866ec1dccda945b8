//! Faulty plugins wired through the host (I6, I7): a plugin that panics on every
//! third event is re-instantiated and gets a replay each time; a plugin that
//! always panics is quarantined, visibly in the log, /metrics and the report; a
//! healthy plugin beside them is unaffected.

use crate::host_support;

use std::time::Duration;

use host_support::*;

#[test]
fn traps_restart_with_replay_and_repeated_failure_quarantines_only_that_plugin() {
    let fx = Fixture::new("");
    fx.copy_wasm(plugin_artifacts::PANIC_EVERY_N, "panic");
    fx.copy_wasm(plugin_artifacts::POD_READY_COUNTER, "counter");
    fx.write(
        "plugins/flaky.toml",
        "name = \"flaky\"\nwasm = \"../wasm/panic.wasm\"\nresources = [\"v1/pods\"]\n[config]\nn = 50\n",
    );
    fx.write(
        "plugins/broken.toml",
        "name = \"broken\"\nwasm = \"../wasm/panic.wasm\"\nresources = [\"v1/pods\"]\n[config]\nn = 1\n",
    );
    fx.write(
        "plugins/healthy.toml",
        "name = \"healthy\"\nwasm = \"../wasm/counter.wasm\"\nresources = [\"v1/pods\"]\nread = [\"v1/pods\"]\n",
    );
    let report = fx.path("r.json");
    let mut host = HostProc::run_sim(
        fx.dir().to_str().unwrap(),
        &["--report", report.to_str().unwrap()],
    );
    let addr = host.metrics_addr();
    host.wait_line(&["running 3 plugin(s)"], LONG);

    // The always-failing plugin ends in quarantine, and says so in the log.
    host.wait_line(
        &[
            "plugin quarantined after consecutive failures",
            "plugin=broken",
        ],
        LONG,
    );
    let m = wait_metrics(
        addr,
        LONG,
        "broken quarantined, flaky restarted twice",
        |t| {
            sample(
                t,
                "wasm_informer_plugin_state{plugin=\"broken\",state=\"quarantined\"}",
            ) == Some(1.0)
                && sample(t, "wasm_informer_plugin_restarts_total{plugin=\"flaky\"}").unwrap_or(0.0)
                    >= 2.0
        },
    );
    assert!(
        sample(
            &m,
            "wasm_informer_plugin_quarantines_total{plugin=\"broken\"}"
        )
        .unwrap()
            >= 1.0
    );
    // Each restart of the flaky plugin replays the cache (I6): more replayed adds
    // than one initial list.
    let replayed = sample(&m, "wasm_informer_plugin_replayed_total{plugin=\"flaky\"}").unwrap();
    let objects = sample(&m, "wasm_informer_informer_objects{resource=\"v1/pods\"}").unwrap();
    assert!(
        replayed > objects,
        "replayed {replayed} must exceed one list of {objects}"
    );
    // The healthy neighbour is untouched (I7).
    assert_eq!(
        sample(&m, "wasm_informer_plugin_traps_total{plugin=\"healthy\"}"),
        Some(0.0)
    );
    assert!(running_plugins(&m).contains(&"healthy".to_string()));
    // The flaky plugin recovers each time (it may be mid-backoff at any scrape),
    // but is never quarantined: its failures are not consecutive.
    assert_eq!(
        sample(
            &m,
            "wasm_informer_plugin_state{plugin=\"flaky\",state=\"quarantined\"}"
        ),
        Some(0.0)
    );
    let before = sample(
        &m,
        "wasm_informer_plugin_events_total{plugin=\"healthy\",kind=\"updated\"}",
    )
    .unwrap();
    wait_metrics(addr, LONG, "healthy keeps handling events", |t| {
        sample(
            t,
            "wasm_informer_plugin_events_total{plugin=\"healthy\",kind=\"updated\"}",
        )
        .unwrap_or(0.0)
            > before
    });

    host.terminate();
    assert!(host.wait_exit(Duration::from_secs(120)).success());
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["plugins"]["broken"]["state"], "quarantined");
    assert!(
        r["plugins"]["broken"]["last_error"]
            .as_str()
            .unwrap()
            .contains("panic"),
        "{}",
        r["plugins"]["broken"]
    );
    assert!(r["plugins"]["flaky"]["traps"].as_u64().unwrap() >= 2);
    assert!(r["plugins"]["flaky"]["restarts"].as_u64().unwrap() >= 2);
    assert_eq!(r["plugins"]["healthy"]["traps"], 0);
    assert_eq!(r["plugins"]["healthy"]["state"], "stopped");
}

#[test]
fn quarantine_seconds_sets_how_long_a_quarantined_plugin_rests() {
    let fx = Fixture::new("");
    fx.copy_wasm(plugin_artifacts::PANIC_EVERY_N, "panic");
    fx.write(
        "plugins/broken.toml",
        "name = \"broken\"\nwasm = \"../wasm/panic.wasm\"\nresources = [\"v1/pods\"]\nquarantine_seconds = 1\n[config]\nn = 1\n",
    );
    let mut host = HostProc::run_sim(fx.dir().to_str().unwrap(), &[]);
    let addr = host.metrics_addr();
    host.wait_line(&["running 1 plugin(s)"], LONG);
    // With the default 300 s it would rest for five minutes; with 1 s it is
    // tried again (and quarantined again, its every event panicking) within
    // seconds.
    wait_metrics(addr, Duration::from_secs(60), "a second quarantine", |t| {
        sample(
            t,
            "wasm_informer_plugin_quarantines_total{plugin=\"broken\"}",
        )
        .unwrap_or(0.0)
            >= 2.0
    });
}
