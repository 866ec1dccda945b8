//! The third-party client conformance suite (`apisim/conformance/run.sh`: the official Python
//! client and @kubernetes/client-node) against an in-process simulator.
//!
//! The tools come from `scripts/setup.sh` (`scripts/setup.sh conformance`). Missing tools fail
//! this test with the install command; it never passes without running.

use crate::common;

use std::path::Path;
use std::time::Duration;

use apisim::SimConfig;
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_node_clients_conform() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/run.sh");
    let sim = start(SimConfig {
        // Short enough for the bookmark checks to see one quickly.
        bookmark_interval: Duration::from_millis(500),
        ..SimConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    sim.write_kubeconfig(&kc).unwrap();
    let run = tokio::process::Command::new("bash")
        .arg(&script)
        .arg(&kc)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("the conformance suite finishes within 5 minutes")
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => {
            assert!(stdout.contains("python: 8 passed, 0 failed"), "{stdout}");
            assert!(stdout.contains("node: 3 passed, 0 failed"), "{stdout}");
        }
        Some(3) => panic!(
            "\n\n*** the conformance suite's tools are missing: run scripts/setup.sh conformance ***\n{stderr}\n"
        ),
        code => panic!("conformance suite failed ({code:?}):\n{stdout}\n{stderr}"),
    }
    // The suite drove faults through the admin endpoints; they fired.
    let s = sim.faults().stats();
    assert!(s.watches_dropped >= 1 && s.compactions >= 1, "{s:?}");
    sim.shutdown().await;
}
