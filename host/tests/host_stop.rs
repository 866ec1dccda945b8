//! Stopping is prompt: a plugin blocked in an API call, or asleep in
//! quarantine, does not hold a shutdown or a hot reload for the grace period.
//! Its wait is cancelled at once and a WARN names what it waited for.
//!
//! The oracle is the clock of this test: how long the host process takes to
//! exit after SIGTERM (and a reload to take over), against a grace period of
//! 60 s that the host would otherwise wait out; and the simulator's request
//! log, which shows the call the plugin was blocked in.

use crate::host_support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use host_support::*;

/// What "at once" means on a loaded 2-core machine: far below the grace.
const PROMPT: Duration = Duration::from_secs(15);
const GRACE_MS: u64 = 60_000;

/// A standalone simulator whose pods churn (inside the simulator, so the
/// events keep coming while its API answers are held back).
const SIM: &str = "[sim]\npods = 20\nnamespaces = 1\ndeployments = 0\ndeployment_churn = 0\nchurn_per_second = 5\n";

fn host_dir(dir: &Path, manifest: &str) -> PathBuf {
    let config = dir.join("config");
    std::fs::create_dir_all(config.join("plugins")).unwrap();
    std::fs::write(
        config.join("host.toml"),
        format!(
            "metrics_addr = \"127.0.0.1:0\"\ncache_dir = \"{}\"\nshutdown_grace_ms = {GRACE_MS}\n",
            cache_dir().display()
        ),
    )
    .unwrap();
    std::fs::write(config.join("plugins/p.toml"), manifest).unwrap();
    config
}

fn sim_post(kubeconfig: &Path, path: &str) {
    kubectl_raw(
        kubeconfig,
        &["create", "--raw", path, "-f", "-"],
        Some("{}"),
    );
}

/// The simulator's request log.
fn requests(kubeconfig: &Path) -> Vec<serde_json::Value> {
    serde_json::from_slice(&kubectl_raw(
        kubeconfig,
        &["get", "--raw", "/_sim/requests"],
        None,
    ))
    .unwrap()
}

fn patches_of_target(kubeconfig: &Path) -> usize {
    requests(kubeconfig)
        .iter()
        .filter(|r| r["method"] == "PATCH" && r["path"] == "/api/v1/namespaces/ns-0/pods/target")
        .count()
}

#[test]
fn a_stop_cancels_an_api_call_in_flight_at_once_and_names_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (_sim, kubeconfig) = simulator(tmp.path(), SIM);
    let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"target","namespace":"ns-0"},"spec":{"containers":[{"name":"c","image":"img:1"}]}}"#;
    kubectl_raw(&kubeconfig, &["create", "-f", "-"], Some(pod));
    // Every pod event patches `target`; a call may wait two minutes.
    let manifest = format!(
        r#"name = "p"
wasm = "{}"
resources = ["v1/pods"]
queue_capacity = 100000
write_qps = 1000
write_burst = 1000
write_timeout_ms = 120000
api_time_per_event_ms = 120000

[[write]]
resource = "v1/pods"
verbs = ["patch"]

[config]
ops = [{{ call = "patch", resource = "v1/pods", namespace = "ns-0", name = "target", patch = "merge", body = {{ metadata = {{ labels = {{ touched = "yes" }} }} }} }}]
"#,
        plugin_artifacts::API_PROBE
    );
    let config = host_dir(tmp.path(), &manifest);
    let mut host = run_against(&config, &kubeconfig);
    host.wait_line(&["running 1 plugin(s)"], LONG);
    let started = Instant::now();
    while patches_of_target(&kubeconfig) == 0 {
        assert!(started.elapsed() < LONG, "the plugin never patched");
        std::thread::sleep(Duration::from_millis(200));
    }
    // From now on the server holds every answer back for 100 s; the churn
    // goes on, so the plugin's next patch blocks.
    sim_post(&kubeconfig, "/_sim/faults/delay?ms=100000");
    let before = patches_of_target(&kubeconfig);
    let started = Instant::now();
    while patches_of_target(&kubeconfig) == before {
        assert!(
            started.elapsed() < LONG,
            "no patch reached the server after the delay began"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The request arrived and is held: the plugin is blocked in it.
    std::thread::sleep(Duration::from_secs(1));
    let stopped = Instant::now();
    host.terminate();
    let status = host.wait_exit(LONG);
    let took = stopped.elapsed();
    sim_post(&kubeconfig, "/_sim/faults/reset");
    assert!(status.success(), "exit {status:?}");
    assert!(
        took < PROMPT,
        "the host took {took:?} to stop (grace {GRACE_MS} ms): it waited out the call"
    );
    let log = host.log();
    let warn = log
        .iter()
        .find(|l| l.contains("plugin stopped while it waited for"))
        .unwrap_or_else(|| panic!("no WARN names the wait:\n{}", log.join("\n")));
    assert!(
        warn.contains("an API call: PATCH /api/v1/namespaces/ns-0/pods/target"),
        "{warn}"
    );
    assert!(
        !log.iter().any(|l| l.contains("did not finish its event")),
        "the host waited for the grace period:\n{}",
        log.join("\n")
    );
}

#[test]
fn a_reload_and_a_stop_end_a_quarantine_at_once_and_name_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (_sim, kubeconfig) = simulator(tmp.path(), SIM);
    // Traps on every event: five failures, then a quarantine of 300 s.
    let manifest = |generation: u32| {
        format!(
            "name = \"p\"\nwasm = \"{}\"\nresources = [\"v1/pods\"]\nqueue_capacity = 100000\n\
             [config]\nn = 1\ngeneration = {generation}\n",
            plugin_artifacts::PANIC_EVERY_N
        )
    };
    let config = host_dir(tmp.path(), &manifest(1));
    let mut host = run_against(&config, &kubeconfig);
    host.wait_line(&["plugin quarantined after consecutive failures"], LONG);

    // A reload: the old version, asleep in quarantine, steps aside at once.
    let reloaded = Instant::now();
    std::fs::write(config.join("plugins/p.toml"), manifest(2)).unwrap();
    host.wait_line(&["plugin reloaded: new version took over"], LONG);
    let took = reloaded.elapsed();
    assert!(
        took < PROMPT,
        "the reload took {took:?} (grace {GRACE_MS} ms): it waited out the quarantine"
    );

    // The new version fails the same way; then a stop ends its quarantine.
    let started = Instant::now();
    while host
        .log()
        .iter()
        .filter(|l| l.contains("plugin quarantined after consecutive failures"))
        .count()
        < 2
    {
        assert!(
            started.elapsed() < LONG,
            "the new version never quarantined"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(500));
    let stopped = Instant::now();
    host.terminate();
    let status = host.wait_exit(LONG);
    let took = stopped.elapsed();
    assert!(status.success(), "exit {status:?}");
    assert!(
        took < PROMPT,
        "the host took {took:?} to stop (grace {GRACE_MS} ms): it waited out the quarantine"
    );
    let log = host.log();
    let named = log
        .iter()
        .filter(|l| {
            l.contains("plugin stopped while it waited for the end of its quarantine (300 s")
        })
        .count();
    assert_eq!(
        named,
        2,
        "the reload and the stop each name the quarantine:\n{}",
        log.join("\n")
    );
}
