//! A plugin's `init` writes in a cluster mode, judged by the simulator's
//! request log: the replica that leads at start-up sends them (its plugins
//! load once it knows it leads, so `init` begins in its first tenure), and a
//! standby sends none.

use crate::cluster_support;
use crate::host_support;

use std::time::Duration;

use cluster_support::*;
use host_support::LONG;

const MANIFEST: &str = r#"resources = ["v1/pods"]

[[write]]
resource = "v1/configmaps"
verbs = ["create"]

[config]
ops = []

[[config.init_ops]]
call = "create"
resource = "v1/configmaps"
namespace = "default"
body = { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "init-marker" }, data = { by = "init" } }
"#;

/// The plugin's creates of its marker that reached the server, by replica.
fn marker_creates(sim: &Sim) -> Vec<(String, u16)> {
    sim.requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == "/api/v1/namespaces/default/configmaps")
        .map(|r| (r.replica().unwrap_or("?").to_string(), r.status))
        .collect()
}

#[test]
fn init_writes_are_sent_by_the_leader_and_by_no_standby() {
    let dir = cluster_fixture_with(
        "leader",
        FAST,
        3,
        "init-writer",
        plugin_artifacts::API_PROBE,
        MANIFEST,
    );
    let sim = Sim::start(dir.path());
    let a = Replica::start(dir.path(), &sim, "replica-a");
    wait_until("replica-a is ready", LONG, || a.ready());
    wait_until("the leader's init write reached the server", LONG, || {
        !marker_creates(&sim).is_empty()
    });
    let b = Replica::start(dir.path(), &sim, "replica-b");
    wait_until("replica-b is ready", LONG, || b.ready());
    // Give the standby's init every chance to have sent something.
    std::thread::sleep(Duration::from_secs(2));

    let creates = marker_creates(&sim);
    assert_eq!(
        creates,
        vec![("replica-a".to_string(), 201)],
        "exactly one init write, by the leader, applied"
    );
    let (code, body) = sim.request(
        "GET",
        "/api/v1/namespaces/default/configmaps/init-marker",
        None,
    );
    assert_eq!(code, 200, "the server holds the init's ConfigMap: {body}");
    let holders: Vec<String> = sim
        .leases()
        .iter()
        .filter_map(|l| l["spec"]["holderIdentity"].as_str().map(str::to_string))
        .collect();
    assert_eq!(holders, vec!["replica-a".to_string()], "replica-a leads");
    drop(b);
    drop(a);
}
