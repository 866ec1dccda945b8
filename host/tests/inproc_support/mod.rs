//! Helpers of the in-process host tests: a simulator whose every write is
//! recorded with its resourceVersion (the model of what was sent to the
//! server), a host on a config directory in a temp dir, and the plugin log
//! captured from `tracing`, parsed back into what each version of the `echo`
//! plugin (in log mode) received.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use apisim::workload::{Op, Workload, WorkloadConfig};
use apisim::{RunningSim, Sim, SimConfig};
use wasm_informer::config::{ConfigDir, HostSettings};
use wasm_informer::host::{Host, HostOptions};

#[path = "../../runtime/tests/log_capture/mod.rs"]
mod log_capture;
pub use log_capture::{lines_of, plugin_log};

/// What one version of `echo` (log mode) received, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub kind: String,
    pub key: String,
    pub rv: u64,
    pub initial: bool,
    pub fsu: bool,
}

/// The lines of `plugin` tagged `tag`, parsed.
pub fn received(plugin: &str, tag: &str) -> Vec<Received> {
    let prefix = format!("echo {tag} ");
    lines_of(plugin)
        .iter()
        .filter_map(|m| m.strip_prefix(&prefix).map(parse))
        .collect()
}

fn parse(rest: &str) -> Received {
    let f: Vec<&str> = rest.split_whitespace().collect();
    let val = |s: &str, k: &str| {
        s.strip_prefix(k)
            .unwrap_or_else(|| panic!("{k} in {rest}"))
            .to_string()
    };
    Received {
        kind: f[0].to_string(),
        key: f[1].to_string(),
        rv: val(f[2], "rv=").parse().unwrap_or(0),
        initial: val(f[3], "initial=") == "true",
        fsu: val(f[4], "fsu=") == "true",
    }
}

/// The view a sequence of notifications builds: key -> resourceVersion.
pub fn view_of(events: &[Received]) -> BTreeMap<String, u64> {
    let mut v = BTreeMap::new();
    for e in events {
        if e.kind == "deleted" {
            v.remove(&e.key);
        } else {
            v.insert(e.key.clone(), e.rv);
        }
    }
    v
}

/// key -> resourceVersion of every pod the simulator holds.
pub fn server_pods(sim: &RunningSim) -> BTreeMap<String, u64> {
    let rid = sim.store().rid("v1", "pods");
    sim.store()
        .list_all(rid)
        .iter()
        .map(|o| (apisim::object::key_of(&o.namespace, &o.name), o.rv))
        .collect()
}

/// A running simulator seeded with `pods` pods.
pub async fn sim_with_pods(pods: usize, seed: u64, config: SimConfig) -> (RunningSim, Workload) {
    let sim = Sim::new(config);
    let wl = Workload::seed(sim.store().clone(), WorkloadConfig::new(pods, 3, seed)).unwrap();
    let running = sim.start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    (running, wl)
}

/// One write as the server took it: the model of what was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// `added`, `updated` or `deleted`, as a handler hears of it.
    pub kind: &'static str,
    pub key: String,
    pub rv: u64,
}

/// Performs one churn step and records it (the only writer, so the store's
/// resourceVersion after the step is the step's).
pub fn step(sim: &RunningSim, wl: &mut Workload) -> Option<Write> {
    let before = sim.store().current_rv();
    let op = wl.step().unwrap();
    let rv = sim.store().current_rv();
    if rv == before {
        return None;
    }
    let (kind, key) = match op {
        Op::Create(k) => ("added", k),
        Op::UpdateStatus(k) => ("updated", k),
        Op::Delete(k) => ("deleted", k),
        other => panic!("unexpected op {other:?}"),
    };
    Some(Write { kind, key, rv })
}

/// The pod state after applying `writes` to `base`.
pub fn apply(base: &BTreeMap<String, u64>, writes: &[Write]) -> BTreeMap<String, u64> {
    let mut s = base.clone();
    for w in writes {
        if w.kind == "deleted" {
            s.remove(&w.key);
        } else {
            s.insert(w.key.clone(), w.rv);
        }
    }
    s
}

/// A config directory (host.toml with `extra`, empty plugins/, the echo
/// component in wasm/) and a host on it against `sim`.
pub async fn host_on(dir: &Path, sim: &RunningSim, extra: &str) -> Arc<Host> {
    std::fs::create_dir_all(dir.join("plugins")).unwrap();
    std::fs::create_dir_all(dir.join("wasm")).unwrap();
    std::fs::copy(plugin_artifacts::ECHO, dir.join("wasm/echo.wasm")).unwrap();
    let host_toml = dir.join("host.toml");
    std::fs::write(
        &host_toml,
        format!("metrics_addr = \"127.0.0.1:0\"\ncache_dir = \"cache\"\nshutdown_grace_ms = 5000\n{extra}\n"),
    )
    .unwrap();
    let config = ConfigDir {
        dir: dir.to_path_buf(),
        host: HostSettings::load(&host_toml).unwrap(),
    };
    let client = kube_informer::reflector::client_from_kubeconfig_yaml(&sim.kubeconfig_yaml())
        .await
        .unwrap();
    Host::new(config, client, HostOptions::default())
        .await
        .unwrap()
}

/// An echo manifest in log mode, tagged `tag`.
pub fn echo_manifest(name: &str, tag: &str) -> String {
    format!(
        "name = \"{name}\"\nwasm = \"../wasm/echo.wasm\"\nresources = [\"v1/pods\"]\nqueue_capacity = 100000\n[config]\nlog = true\ntag = \"{tag}\"\n"
    )
}

/// Polls `f` every 10 ms until it holds, failing after `secs`.
pub async fn eventually(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {secs} s waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
