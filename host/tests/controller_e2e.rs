//! The `service-exposer` controller end to end, against apisim, with churn of
//! Deployments (create, relabel, change ports, delete) and API faults
//! injected: dropped watches, compacted history (410 and relists), and the
//! controller's own writes failing with 500 and 429. Afterwards, `kubectl get`
//! on the simulator must show exactly one correct Service for every
//! Deployment labelled `expose: "true"` (with ports), and no other Service
//! owned by a Deployment. Then, so that every path is taken whatever the
//! race between churn and controller left, one Deployment that has its
//! Service is un-exposed, one gets new ports and one is deleted, and the
//! same must hold again. The oracle is computed by this test from the
//! Deployments the server holds; it shares no code with the plugin.

use crate::host_support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use apisim::faults::{FailMode, RequestMatch};
use apisim::workload::{Op, Workload, WorkloadConfig};
use apisim::{Sim, SimConfig};
use host_support::*;
use serde_json::Value;
use wasm_informer::config::ConfigDir;
use wasm_informer::host::{Host, HostOptions};
use wasm_informer::metrics::Observe;

/// What the cluster should hold: for each exposed Deployment with ports, its
/// Service's owner uid, (port, targetPort, protocol) set and selector.
type Expected = BTreeMap<String, (String, BTreeSet<(u64, u64, String)>, Value)>;

fn key_of(o: &Value) -> String {
    format!(
        "{}/{}",
        o["metadata"]["namespace"].as_str().unwrap_or(""),
        o["metadata"]["name"].as_str().unwrap_or("")
    )
}

/// The Services the Deployments on the server call for.
fn expected(deployments: &Value) -> Expected {
    let mut out = BTreeMap::new();
    for d in deployments["items"].as_array().unwrap() {
        if d["metadata"]["labels"]["expose"] != "true" {
            continue;
        }
        let mut ports = BTreeSet::new();
        for c in d["spec"]["template"]["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
        {
            for p in c["ports"].as_array().into_iter().flatten() {
                let port = p["containerPort"].as_u64().unwrap();
                let proto = p["protocol"].as_str().unwrap_or("TCP").to_string();
                ports.insert((port, port, proto));
            }
        }
        if ports.is_empty() {
            continue;
        }
        let uid = d["metadata"]["uid"].as_str().unwrap().to_string();
        out.insert(
            key_of(d),
            (uid, ports, d["spec"]["selector"]["matchLabels"].clone()),
        );
    }
    out
}

/// Services owned by a Deployment (controller reference), as the oracle sees
/// them: key → (owner uid, ports, selector), plus every problem found.
fn actual(services: &Value) -> (Expected, Vec<String>) {
    let mut out = BTreeMap::new();
    let mut problems = Vec::new();
    for s in services["items"].as_array().unwrap() {
        let owners: Vec<&Value> = s["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|o| o["kind"] == "Deployment")
            .collect();
        if owners.is_empty() {
            continue;
        }
        let controllers: Vec<&&Value> = owners.iter().filter(|o| o["controller"] == true).collect();
        if controllers.len() != 1 {
            problems.push(format!(
                "{}: {} controller references",
                key_of(s),
                controllers.len()
            ));
            continue;
        }
        let ports: BTreeSet<(u64, u64, String)> = s["spec"]["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                (
                    p["port"].as_u64().unwrap_or(0),
                    p["targetPort"].as_u64().unwrap_or(0),
                    p["protocol"].as_str().unwrap_or("TCP").to_string(),
                )
            })
            .collect();
        let uid = controllers[0]["uid"].as_str().unwrap_or("").to_string();
        out.insert(key_of(s), (uid, ports, s["spec"]["selector"].clone()));
    }
    (out, problems)
}

/// Compares the cluster with the oracle; `None` when they agree.
fn disagreement(kubeconfig: &Path) -> Option<String> {
    let deployments = kubectl_json(kubeconfig, &["get", "deployments", "-A", "-o", "json"]);
    let services = kubectl_json(kubeconfig, &["get", "services", "-A", "-o", "json"]);
    let want = expected(&deployments);
    let (have, problems) = actual(&services);
    if !problems.is_empty() {
        return Some(problems.join("; "));
    }
    let mut diff = Vec::new();
    for (k, w) in &want {
        match have.get(k) {
            None => diff.push(format!("{k}: no Service")),
            Some(h) if h != w => diff.push(format!("{k}: have {h:?}, want {w:?}")),
            _ => {}
        }
    }
    for k in have.keys().filter(|k| !want.contains_key(*k)) {
        diff.push(format!("{k}: orphan Service"));
    }
    (!diff.is_empty()).then(|| {
        format!(
            "{} of {} exposed: {}",
            diff.len(),
            want.len(),
            diff.join("; ")
        )
    })
}

fn kubectl(kubeconfig: &Path, args: &[&str]) {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("kubectl is installed (scripts/setup.sh)");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The kind of a workload operation, for the churn's coverage.
fn workload_op(op: &Op) -> &'static str {
    match op {
        Op::CreateDeployment(_) => "CreateDeployment",
        Op::RelabelDeployment(_) => "RelabelDeployment",
        Op::ChangeDeploymentPorts(_) => "ChangeDeploymentPorts",
        Op::DeleteDeployment(_) => "DeleteDeployment",
        _ => "pod",
    }
}

/// Waits until the cluster agrees with the oracle (at most 120 s).
async fn converge(host: &Host, plugin: &str, kubeconfig: &Path, when: &str) {
    let started = Instant::now();
    loop {
        let k = kubeconfig.to_path_buf();
        let d = tokio::task::spawn_blocking(move || disagreement(&k))
            .await
            .unwrap();
        match d {
            None => return,
            Some(why) => {
                assert!(
                    started.elapsed() < Duration::from_secs(120),
                    "never converged {when}: {why}\nplugin: {:?}",
                    host.report().plugins.get(plugin)
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// Runs `plugin` (at `wasm`) as the service-exposer over churn and faults.
pub async fn exposer_converges_under_churn_and_faults(plugin: &str, wasm: &Path) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let sim = Sim::new(SimConfig::default());
    let wc = WorkloadConfig::new(20, 3, 11)
        .with_deployments(40, 0.5)
        .with_deployment_churn(40);
    let mut workload = Workload::seed(sim.store().clone(), wc).unwrap();
    let running = sim.start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig.yaml");
    running.write_kubeconfig(&kubeconfig).unwrap();
    let dir = tmp.path().join("config");
    std::fs::create_dir_all(dir.join("plugins")).unwrap();
    std::fs::write(
        dir.join("host.toml"),
        format!(
            "metrics_addr = \"127.0.0.1:0\"\ncache_dir = \"{}\"\nshutdown_grace_ms = 5000\n",
            cache_dir().display()
        ),
    )
    .unwrap();
    let manifest = |workers: u32| {
        format!(
            r#"name = "{plugin}"
wasm = "{}"
for = "apps/v1/deployments"
owns = ["v1/services"]
workers = {workers}
resync_seconds = 30
# Room for the Python interpreter.
memory_mb = 64
fuel_per_event = 200_000_000
timeout_ms = 2000

[[write]]
resource = "v1/services"
verbs = ["create", "patch", "delete"]
"#,
            wasm.display()
        )
    };
    let manifest_path = dir.join(format!("plugins/{plugin}.toml"));
    std::fs::write(&manifest_path, manifest(2)).unwrap();
    let config = ConfigDir::open(&dir).unwrap();
    let client = kube_informer::reflector::client_from_kubeconfig_yaml(&running.kubeconfig_yaml())
        .await
        .unwrap();
    let host = Host::new(config, client, HostOptions::default())
        .await
        .unwrap();
    let loaded = host.reconcile().await;
    assert_eq!(loaded.len(), 1, "{loaded:?}");
    assert_eq!(loaded[0].action, "added", "{loaded:?}");

    // Churn, with a fault every 20 steps.
    let faults = running.faults();
    let services_write = |m: &str| RequestMatch::method(m).path("/services");
    let mut ops: Vec<&'static str> = Vec::new();
    for step in 0..400 {
        ops.push(workload_op(&workload.step().unwrap()));
        match step % 100 {
            10 => faults.fail_matching(3, FailMode::Internal, services_write("PATCH")),
            30 => {
                faults.drop_watches();
            }
            50 => faults.fail_matching(
                2,
                FailMode::TooManyRequests {
                    retry_after_secs: 1,
                },
                services_write("PATCH"),
            ),
            70 => faults.compact(),
            90 => faults.fail_matching(2, FailMode::Internal, services_write("DELETE")),
            _ => {}
        }
        // Hot reloads in the middle of the churn and the write failures: the
        // new version takes the queue over (keys in backoff included) and
        // starts only once the old one is idle.
        if step == 150 || step == 250 {
            std::fs::write(&manifest_path, manifest(if step == 150 { 3 } else { 2 })).unwrap();
            let events = host.reconcile().await;
            assert!(
                events.iter().any(|e| e.action == "changed"),
                "the reload was not taken: {events:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    // Let the injected write failures be taken (they fire on the next
    // matching request), then converge.
    converge(&host, plugin, &kubeconfig, "after the churn").await;
    let counts: BTreeMap<&str, u32> = ops.iter().fold(BTreeMap::new(), |mut m, k| {
        *m.entry(*k).or_insert(0) += 1;
        m
    });
    for kind in [
        "CreateDeployment",
        "RelabelDeployment",
        "ChangeDeploymentPorts",
        "DeleteDeployment",
    ] {
        assert!(
            counts.get(kind).copied().unwrap_or(0) >= 10,
            "the churn did {kind}: {counts:?}"
        );
    }

    // Then, on Deployments that have their Service now (whatever the race
    // between churn and controller left): un-expose one, give one new ports,
    // delete one (its Service goes by garbage collection), and converge again.
    let k = kubeconfig.clone();
    let exposed: Vec<String> = tokio::task::spawn_blocking(move || {
        let d = kubectl_json(&k, &["get", "deployments", "-A", "-o", "json"]);
        expected(&d).into_keys().collect()
    })
    .await
    .unwrap();
    assert!(exposed.len() >= 3, "{exposed:?}");
    let k = kubeconfig.clone();
    let picked = exposed.clone();
    tokio::task::spawn_blocking(move || {
        let ns_name = |key: &str| {
            let (ns, name) = key.split_once('/').unwrap();
            (ns.to_string(), name.to_string())
        };
        let (ns, name) = ns_name(&picked[0]);
        kubectl(&k, &["label", "deployment", "-n", &ns, &name, "expose-"]);
        let (ns, name) = ns_name(&picked[1]);
        kubectl(
            &k,
            &[
                "patch", "deployment", "-n", &ns, &name, "--type=json", "-p",
                r#"[{"op":"replace","path":"/spec/template/spec/containers/0/ports","value":[{"name":"alt","containerPort":7443,"protocol":"TCP"}]}]"#,
            ],
        );
        let (ns, name) = ns_name(&picked[2]);
        kubectl(&k, &["delete", "deployment", "-n", &ns, &name]);
    })
    .await
    .unwrap();
    converge(
        &host,
        plugin,
        &kubeconfig,
        "after un-exposing, re-porting and deleting",
    )
    .await;
    let k = kubeconfig.clone();
    let after = tokio::task::spawn_blocking(move || {
        kubectl_json(&k, &["get", "services", "-A", "-o", "json"])
    })
    .await
    .unwrap();
    let (have, _) = actual(&after);
    assert!(
        !have.contains_key(&exposed[0]),
        "the un-exposed Deployment's Service is gone"
    );
    assert!(
        !have.contains_key(&exposed[2]),
        "the deleted Deployment's Service is gone"
    );
    assert!(
        have[&exposed[1]]
            .1
            .contains(&(7443, 7443, "TCP".to_string()))
            && have[&exposed[1]].1.len() == 1,
        "the re-ported Deployment's Service has exactly the new port: {:?}",
        have[&exposed[1]]
    );
    let report = host.report();
    let r = &report.plugins[plugin];
    let c = r.controller.as_ref().expect("a controller's report");
    eprintln!(
        "{plugin}: {:?} queue {:?} faults {:?}",
        c.reconciles,
        c.queue.adds,
        faults.stats()
    );
    assert!(c.reconciles.ok > 0, "{c:?}");
    assert_eq!(c.reconciles.trap, 0, "{r:?}");
    assert!(
        c.reconciles.retry > 0 && c.queue.retries > 0,
        "the injected write failures were retried: {c:?}"
    );
    let stats = faults.stats();
    assert!(
        stats.failures_with(500) >= 1 && stats.failures_with(429) >= 1,
        "{stats:?}"
    );
    assert!(
        stats.watches_dropped >= 1 && stats.compactions >= 1,
        "{stats:?}"
    );
    let final_report = host.shutdown().await;
    assert_eq!(final_report.plugins[plugin].state, "stopped");
    drop(running);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_service_exposer_keeps_one_correct_service_per_exposed_deployment() {
    exposer_converges_under_churn_and_faults(
        "service-exposer",
        Path::new(plugin_artifacts::SERVICE_EXPOSER),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_service_exposer_keeps_one_correct_service_per_exposed_deployment() {
    exposer_converges_under_churn_and_faults(
        "py-service-exposer",
        &plugin_wasm("py-service-exposer"),
    )
    .await;
}
