//! The main job end to end: `wasm-informer run --config DIR --sim --duration 45
//! --report r.json` with the example plugins of `config/` (copied, with the
//! simulator's own churn replaced by writes the test makes through the API).
//! It exits 0; the report shows every plugin delivered events and every
//! informer synced. What the host holds is checked by content against a fresh
//! list from the simulator: an observer plugin per informer (keys and
//! resourceVersions) and pod-ready-counter's findings (Ready pods per
//! namespace). While it runs, `/metrics` is parsed by a Prometheus text parser
//! (and `promtool check metrics` when installed; required when CI=true), and
//! `/healthz` and `/readyz` answer.

use crate::host_support;

use std::time::Duration;

use host_support::content::*;
use host_support::*;

/// Example plugin names, from config/plugins/*.toml: event handlers, then
/// controllers.
fn configured_plugins() -> (Vec<String>, Vec<String>) {
    let dir = repo_root().join("config");
    let scan = wasm_informer::config::ConfigDir::open(&dir).unwrap().scan();
    assert!(
        scan.errors.is_empty(),
        "config/ has errors: {:?}",
        scan.errors
    );
    for m in &scan.manifests {
        assert!(
            m.wasm.is_file(),
            "{} is missing: build the example plugins first with scripts/build-plugins.sh",
            m.wasm.display()
        );
    }
    let (controllers, handlers): (Vec<_>, Vec<_>) =
        scan.manifests.iter().partition(|m| m.controller.is_some());
    let names = |v: Vec<&wasm_informer::config::PluginManifest>| {
        v.into_iter().map(|m| m.name.clone()).collect::<Vec<_>>()
    };
    (names(handlers), names(controllers))
}

fn check_metrics_text(text: &str) {
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
    // A histogram's bucket lines parse into one sample per series.
    let histograms: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" histogram"))
        .collect();
    let is_bucket = |l: &str| {
        histograms
            .iter()
            .any(|h| l.starts_with(&format!("{h}_bucket")))
    };
    let sample_lines = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty() && !is_bucket(l))
        .count();
    let histogram_series = scrape
        .samples
        .iter()
        .filter(|s| matches!(s.value, prometheus_parse::Value::Histogram(_)))
        .count();
    assert_eq!(
        scrape.samples.len(),
        sample_lines + histogram_series,
        "every sample line must parse"
    );
    assert_eq!(
        histograms,
        vec![
            "wasm_informer_plugin_handler_duration_seconds",
            "wasm_informer_plugin_api_request_duration_seconds",
            "workqueue_queue_duration_seconds",
            "workqueue_work_duration_seconds"
        ],
        "handler, API request and work queue durations are histograms"
    );
    assert!(histogram_series > 0, "a duration histogram per plugin");
    for s in &scrape.samples {
        if s.metric.ends_with("_total") {
            assert!(
                matches!(s.value, prometheus_parse::Value::Counter(_)),
                "{} must be typed as a counter",
                s.metric
            );
        }
    }
    assert!(scrape
        .docs
        .contains_key("wasm_informer_plugin_events_total"));
    for name in [
        "wasm_informer_informer_objects",
        "wasm_informer_plugin_state",
        "wasm_informer_ready",
    ] {
        assert!(
            scrape.samples.iter().any(|s| s.metric == name),
            "{name} missing"
        );
    }

    wasm_informer::metrics::assert_promtool_accepts(text);
}

#[test]
fn run_sim_reports_every_plugin_and_holds_what_the_simulator_holds() {
    let (mut plugins, controllers) = configured_plugins();
    assert!(
        plugins.len() >= 3,
        "expected the example plugins in config/plugins: {plugins:?}"
    );
    plugins.extend(["obs-pods".to_string(), "obs-deployments".to_string()]);
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    copy_config(
        &repo_root().join("config"),
        &config,
        0.0,
        &[
            (
                "obs-pods.toml",
                echo_observer("obs-pods", "v1/pods", "pods"),
            ),
            (
                "obs-deployments.toml",
                echo_observer("obs-deployments", "apps/v1/deployments", "deployments"),
            ),
        ],
    );
    let report = tmp.path().join("r.json");
    let kubeconfig = tmp.path().join("kc");
    let mut host = HostProc::run_sim(
        config.to_str().unwrap(),
        &[
            // A bound only: the test stops the host with SIGTERM once its
            // content checks pass, however long two busy cores make them.
            "--duration",
            "900",
            "--report",
            report.to_str().unwrap(),
            "--metrics-addr",
            "127.0.0.1:0",
            "--kubeconfig-out",
            kubeconfig.to_str().unwrap(),
        ],
    );
    let addr = host.metrics_addr();
    assert_eq!(http_get(addr, "/healthz").0, 200);
    host.wait_line(&["wasm-informer: running"], LONG);
    // Ready: informers synced and no plugin failed to load.
    let deadline = std::time::Instant::now() + LONG;
    loop {
        let (code, body) = http_get(addr, "/readyz");
        if code == 200 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never ready: {body}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let text = wait_metrics(addr, LONG, "events for every plugin", |t| {
        plugins.iter().all(|p| {
            sample(
                t,
                &format!("wasm_informer_plugin_events_total{{plugin=\"{p}\",kind=\"added\"}}"),
            )
            .unwrap_or(0.0)
                > 0.0
        }) && controllers.iter().all(|p| {
            sample(
                t,
                &format!("wasm_informer_plugin_reconciles_total{{plugin=\"{p}\",outcome=\"ok\"}}"),
            )
            .unwrap_or(0.0)
                > 0.0
        })
    });
    check_metrics_text(&text);

    // Content: writes through the API, then what the host holds is what the
    // simulator holds.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(client(&kubeconfig));
    rt.block_on(churn_pods(&client, 60, 3));
    let deadline = std::time::Instant::now() + LONG;
    loop {
        // The server's state now (the example controller may still be
        // updating Deployments it reconciles, so a list taken once could go
        // stale).
        let want_pods = rt.block_on(list_pods(&client));
        let want_deployments = rt.block_on(list_deployments(&client));
        let want_ready = rt.block_on(ready_per_namespace(&client));
        let log = host.log();
        let pods = echo_view(&log, "obs-pods", "pods");
        let deployments = echo_view(&log, "obs-deployments", "deployments");
        let counted = ready_counter_findings(&log, "pod-ready-counter");
        if pods == want_pods
            && deployments == want_deployments
            && want_ready.iter().all(|(ns, c)| counted.get(ns) == Some(c))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the host's content never matched the simulator: pods {} vs {}, deployments {} vs {}, ready {counted:?} vs {want_ready:?}",
            pods.len(),
            want_pods.len(),
            deployments.len(),
            want_deployments.len()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // A clean stop writes the report as the end of --duration would.
    host.terminate();
    let status = host.wait_exit(Duration::from_secs(300));
    assert!(
        status.success(),
        "exit status {status}; log:\n{}",
        host.log().join("\n")
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    for p in &plugins {
        let pr = &r["plugins"][p];
        let delivered: u64 = ["added", "updated", "deleted", "synced"]
            .iter()
            .map(|k| pr["delivered"][k].as_u64().unwrap())
            .sum();
        assert!(delivered > 0, "plugin {p} delivered nothing: {pr}");
        assert_eq!(pr["state"], "stopped", "{p}");
        assert_eq!(pr["traps"], 0, "{p}: {pr}");
        assert!(
            pr["latency_us"]["p99"].as_u64().unwrap() >= pr["latency_us"]["p50"].as_u64().unwrap()
        );
    }
    // The simulator validates every write as the API server does: the example
    // plugins made none it refused (422 invalid, 400 bad request), and none
    // the host refused as malformed.
    for p in plugins.iter().chain(&controllers) {
        let api = &r["plugins"][p]["api"];
        for (verb, codes) in api["by_verb"].as_object().into_iter().flatten() {
            for bad in ["400", "422"] {
                assert!(
                    codes.get(bad).is_none(),
                    "{p}: {verb} answered {bad} by the server: {api}"
                );
            }
        }
        assert_eq!(api["denied"], 0, "{p}: calls refused before sending: {api}");
    }
    // Controllers reconcile keys instead of receiving events.
    for p in &controllers {
        let pr = &r["plugins"][p];
        let c = &pr["controller"];
        assert!(
            c["reconciles"]["ok"].as_u64().unwrap() > 0,
            "controller {p} reconciled nothing: {pr}"
        );
        assert_eq!(c["reconciles"]["trap"], 0, "{p}: {pr}");
        assert_eq!(pr["state"], "stopped", "{p}");
    }
    let informers = r["informers"].as_object().unwrap();
    assert!(
        informers.contains_key("v1/pods") && informers.contains_key("apps/v1/deployments"),
        "{informers:?}"
    );
    for (id, i) in informers {
        assert_eq!(i["synced"], true, "{id}");
        assert!(i["lists"].as_u64().unwrap() >= 1, "{id}");
        let want = r["simulator_objects"][id]
            .as_u64()
            .unwrap_or_else(|| panic!("simulator has no count for {id}"));
        assert!(want > 0, "{id}");
        assert_eq!(
            i["objects"].as_u64().unwrap(),
            want,
            "{id}: informer objects must match the simulator"
        );
    }
    assert!(r["config_errors"].as_array().unwrap().is_empty());
    assert!(host.log().iter().any(|l| l.contains("reason=\"SIGTERM\"")));
}
