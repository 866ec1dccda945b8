//! One token bucket per plugin name, end to end: a plugin that watches three
//! resources (three runners) and is hot-reloaded mid-run still writes at most
//! `write_burst + write_qps * t` over the whole run, as the simulator's
//! request log times the writes it received; a reload does not refill the
//! bucket.

use crate::host_support;

use std::time::{Duration, Instant};

use host_support::*;
use serde_json::Value;

const SIM: &str = "[sim]\npods = 30\nnamespaces = 2\ndeployments = 6\nchurn_per_second = 0\n";

const QPS: f64 = 2.0;
const BURST: u32 = 3;

fn manifest(generation: u32) -> String {
    format!(
        r#"name = "probe"
wasm = "{}"
resources = ["v1/pods", "v1/namespaces", "apps/v1/deployments"]
queue_capacity = 100000
write_qps = {QPS}
write_burst = {BURST}
write_timeout_ms = 120000
api_time_per_event_ms = 120000

[[write]]
resource = "v1/pods"
verbs = ["patch"]

[config]
generation = {generation}
ops = [{{ call = "patch", resource = "v1/pods", namespace = "ns-0", name = "target", patch = "merge", body = {{ metadata = {{ labels = {{ touched = "yes" }} }} }} }}]
"#,
        plugin_artifacts::API_PROBE
    )
}

/// A simulator holding the pod `ns-0/target` the probe patches, and an empty
/// host config directory beside it.
fn seeded(dir: &std::path::Path) -> (HostProc, std::path::PathBuf, std::path::PathBuf) {
    let (sim, kubeconfig) = simulator(dir, SIM);
    let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"target","namespace":"ns-0"},"spec":{"containers":[{"name":"c","image":"img:1"}]}}"#;
    kubectl_raw(&kubeconfig, &["create", "-f", "-"], Some(pod));
    let config = dir.join("config");
    std::fs::create_dir_all(config.join("plugins")).unwrap();
    std::fs::write(
        config.join("host.toml"),
        format!(
            "metrics_addr = \"127.0.0.1:0\"\ncache_dir = \"{}\"\n",
            cache_dir().display()
        ),
    )
    .unwrap();
    (sim, kubeconfig, config)
}

#[test]
fn one_bucket_per_plugin_name_across_its_runners_and_a_reload() {
    let tmp = tempfile::tempdir().unwrap();
    let (_sim, kubeconfig, config) = seeded(tmp.path());
    let file = config.join("plugins/probe.toml");
    std::fs::write(&file, manifest(1)).unwrap();
    let mut host = run_against(&config, &kubeconfig);
    host.wait_line(&["running 1 plugin(s)"], LONG);
    let run = Duration::from_secs(10);
    let started = Instant::now();
    std::thread::sleep(run / 2);
    // A reload: a new version under the same name.
    std::fs::write(&file, manifest(2)).unwrap();
    host.wait_line(&["plugin reloaded: new version took over"], LONG);
    std::thread::sleep(run.saturating_sub(started.elapsed()));
    host.terminate();
    host.wait_exit(LONG);

    let log: Vec<Value> = serde_json::from_slice(&kubectl_raw(
        &kubeconfig,
        &["get", "--raw", "/_sim/requests"],
        None,
    ))
    .unwrap();
    let mut at: Vec<u64> = log
        .iter()
        .filter(|r| r["method"] == "PATCH")
        .filter(|r| {
            r["query"]
                .as_str()
                .unwrap_or("")
                .contains("fieldManager=wasm-informer%2Fprobe")
        })
        .map(|r| r["atMicros"].as_u64().unwrap())
        .collect();
    at.sort();
    // 3 resources' worth of events would be far more than the bucket allows.
    assert!(
        at.len() >= 10,
        "only {} writes reached the server",
        at.len()
    );
    let first = at[0];
    for (i, t) in at.iter().enumerate() {
        let secs = (t - first) as f64 / 1e6;
        let allowed = BURST as f64 + QPS * secs + 1.0;
        assert!(
            (i + 1) as f64 <= allowed,
            "write {} at {secs:.2} s: more than burst + qps * t = {allowed:.1} (a runner or a version with a bucket of its own)",
            i + 1
        );
    }
}

/// A plugin held back by its own write rate says so: while its calls wait
/// for tokens its `/readyz` reason names `write_qps`, and once its queue
/// overflows meanwhile, the host logs a WARN naming `write_qps`.
#[test]
fn a_plugin_held_back_by_its_write_rate_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let (_sim, kubeconfig, config) = seeded(tmp.path());
    let manifest = manifest(1)
        .replace("queue_capacity = 100000", "queue_capacity = 4")
        .replace(
            "resources = [\"v1/pods\", \"v1/namespaces\", \"apps/v1/deployments\"]",
            "resources = [\"v1/pods\"]",
        );
    std::fs::write(config.join("plugins/probe.toml"), manifest).unwrap();
    let mut host = run_against(&config, &kubeconfig);
    let addr = host.metrics_addr();
    // Its replay of 31 pods at 2 calls a second: the reason says why it lasts.
    let started = Instant::now();
    loop {
        let (code, why) = http_get(addr, "/readyz");
        assert_ne!(code, 200, "ready before its replay could be done");
        if why.contains("write_qps = 2") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no word of write_qps: {why}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Live changes overflow its tiny queue while it waits for tokens.
    for i in 0..20 {
        let p = format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"extra-{i}","namespace":"ns-0"}},"spec":{{"containers":[{{"name":"c","image":"img:1"}}]}}}}"#
        );
        kubectl_raw(&kubeconfig, &["create", "-f", "-"], Some(&p));
    }
    let line = host.wait_line(
        &[
            "WARN",
            "plugin probe is held back by its write rate",
            "write_qps = 2",
        ],
        LONG,
    );
    assert!(line.contains("raise write_qps"), "{line}");
    host.terminate();
    host.wait_exit(LONG);
}
