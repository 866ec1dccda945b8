//! Hot reload end to end, through the real binary against the embedded
//! simulator, checked through the log, /metrics and the report:
//! add (with replay, I6) → change (new version takes over) → garbage .wasm
//! (rejected naming the file, old version keeps running, I9) → remove (plugin
//! and its informer stop) → SIGTERM (graceful, report written, exit 0).

use crate::host_support;

use std::time::Duration;

use host_support::*;

fn manifest(threshold: u32) -> String {
    format!(
        "name = \"alarm\"\nwasm = \"../wasm/alarm.wasm\"\nresources = [\"v1/pods\"]\nqueue_capacity = 256\n[config]\nthreshold = {threshold}\n"
    )
}

fn events_total(text: &str) -> f64 {
    ["added", "updated", "deleted", "synced"]
        .iter()
        .filter_map(|k| {
            sample(
                text,
                &format!("wasm_informer_plugin_events_total{{plugin=\"alarm\",kind=\"{k}\"}}"),
            )
        })
        .sum()
}

#[test]
fn add_change_garbage_remove_then_graceful_shutdown() {
    let fx = Fixture::new("");
    fx.copy_plugin("restart-alarm", "alarm");
    let report = fx.path("report.json");
    let mut host = HostProc::run_sim(
        fx.dir().to_str().unwrap(),
        &["--report", report.to_str().unwrap()],
    );
    let addr = host.metrics_addr();
    host.wait_line(&["running 0 plugin(s)"], LONG);
    let (code, _) = http_get(addr, "/healthz");
    assert_eq!(code, 200);

    // Add: the plugin starts, its informer starts, and it gets the replay.
    fx.write("plugins/alarm.toml", manifest(5));
    host.wait_line(&["informer started", "resource=v1/pods"], LONG);
    host.wait_line(&["plugin loaded", "plugin=alarm"], LONG);
    let m = wait_metrics(addr, LONG, "the replay into alarm", |t| {
        sample(t, "wasm_informer_plugin_replayed_total{plugin=\"alarm\"}").unwrap_or(0.0) >= 100.0
    });
    assert_eq!(running_plugins(&m), vec!["alarm"]);

    // Change: the new version takes over.
    fx.write("plugins/alarm.toml", manifest(3));
    // The new instance's init logs its policy before the switch-over completes.
    host.wait_line(&["policy threshold=3", "plugin=alarm"], LONG);
    host.wait_line(
        &["plugin reloaded: new version took over", "plugin=alarm"],
        LONG,
    );
    let after_change = wait_metrics(addr, LONG, "alarm running after the change", |t| {
        running_plugins(t) == vec!["alarm".to_string()]
    });
    let replayed_after_change = sample(
        &after_change,
        "wasm_informer_plugin_replayed_total{plugin=\"alarm\"}",
    )
    .unwrap();

    // Garbage .wasm: rejected, the error names the file, the old version runs on.
    let wasm = fx.write("wasm/alarm.wasm", b"this is not a component");
    let line = host.wait_line(&["reload rejected, previous version keeps running"], LONG);
    assert!(
        line.contains(&format!(
            "{}: plugin alarm: cannot compile component",
            wasm.display()
        )),
        "{line}"
    );
    let before = events_total(&http_get(addr, "/metrics").1);
    let m = wait_metrics(
        addr,
        LONG,
        "alarm still handling events after the garbage",
        |t| events_total(t) > before,
    );
    assert_eq!(running_plugins(&m), vec!["alarm"]);
    assert_eq!(sample(&m, "wasm_informer_config_errors"), Some(1.0));
    let (code, body) = http_get(addr, "/readyz");
    assert_eq!(
        code, 503,
        "a rejected file makes the host not ready: {body}"
    );
    assert!(body.contains(&wasm.display().to_string()), "{body}");

    // Remove: the plugin stops, and so does the informer nobody else uses.
    fx.remove("plugins/alarm.toml");
    // The informer stops as the plugin's last listener goes, just before the
    // removal is logged.
    host.wait_line(
        &["informer stopped (no more users)", "resource=v1/pods"],
        LONG,
    );
    host.wait_line(&["plugin removed", "plugin=alarm"], LONG);
    let m = wait_metrics(addr, LONG, "alarm removed", |t| {
        sample(
            t,
            "wasm_informer_plugin_state{plugin=\"alarm\",state=\"removed\"}",
        ) == Some(1.0)
    });
    assert_eq!(
        sample(&m, "wasm_informer_informer_running{resource=\"v1/pods\"}"),
        Some(0.0)
    );
    let (code, _) = http_get(addr, "/readyz");
    assert_eq!(
        code, 200,
        "the rejected file is gone, so the host is ready again"
    );

    // Graceful shutdown writes the report and exits 0.
    host.terminate();
    let status = host.wait_exit(Duration::from_secs(120));
    assert!(
        status.success(),
        "exit status {status}; log:\n{}",
        host.log().join("\n")
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let actions: Vec<&str> = r["reloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, vec!["added", "changed", "rejected", "removed"]);
    let rejected = &r["reloads"][2];
    assert!(rejected["error"]
        .as_str()
        .unwrap()
        .starts_with(&wasm.display().to_string()));
    let alarm = &r["plugins"]["alarm"];
    assert_eq!(alarm["state"], "removed");
    assert_eq!(alarm["versions"], 2);
    assert!(alarm["replayed"].as_u64().unwrap() as f64 >= replayed_after_change);
    assert!(
        alarm["delivered"]["added"].as_u64().unwrap() >= 200,
        "two replays of >= 100 pods: {alarm}"
    );
    assert_eq!(r["informers"]["v1/pods"]["running"], false);
}
