//! The native example runs against the simulator and its handler ends with
//! exactly the pods the server holds: the same keys at the same
//! resourceVersions, after churn that created, changed and deleted pods while
//! it ran. The oracle is a list from the server through kube-client.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use apisim::workload::{Workload, WorkloadConfig};
use apisim::{Sim, SimConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_view_equals_the_servers_pods_after_churn() {
    let sim = Sim::new(SimConfig::default());
    let workload = Workload::seed(sim.store().clone(), WorkloadConfig::new(600, 4, 7)).unwrap();
    let running = sim.start("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let dir = tempfile_dir();
    let kubeconfig = dir.join("kubeconfig");
    let summary = dir.join("summary.json");
    running.write_kubeconfig(&kubeconfig).unwrap();

    let churn = workload.churn(300.0);
    let bin = env!("CARGO_BIN_EXE_native-informer");
    let child = std::thread::spawn({
        let (kubeconfig, summary) = (kubeconfig.clone(), summary.clone());
        move || {
            Command::new(bin)
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(["--duration", "4", "--summary"])
                .arg(&summary)
                .output()
                .expect("run native-informer")
        }
    });
    // Churn while the example is synced and running, then stop well before it
    // ends, so its final view must match the server's final state.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let ops = churn.ops();
    churn.stop().await;
    assert!(ops > 100, "churn ran: {ops} operations");
    let out = tokio::task::spawn_blocking(move || child.join().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let client = kube::Client::try_from(kube::Config::new(running.url().parse().unwrap())).unwrap();
    let server: BTreeMap<String, String> = Api::<Pod>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|p| {
            let m = p.metadata;
            (
                format!("{}/{}", m.namespace.unwrap(), m.name.unwrap()),
                m.resource_version.unwrap(),
            )
        })
        .collect();
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    let view: BTreeMap<String, String> = serde_json::from_value(summary["view"].clone()).unwrap();
    assert_eq!(view.len(), server.len(), "pod count");
    assert_eq!(view, server, "the handler's view is the server's state");
    assert!(summary["updated"].as_u64().unwrap() > 0, "{summary}");
    assert!(summary["deleted"].as_u64().unwrap() > 0, "{summary}");
    assert_eq!(summary["not_pods"].as_u64(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(" pods in view"), "{stdout}");
    running.shutdown().await;
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("native-informer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
