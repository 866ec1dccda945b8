//! Sharding across processes: replicas in `[cluster] mode = "sharded"`
//! against one `wasm-informer sim`, with pods churned through the API.
//!
//! Oracles: the history checker over the simulator's request log (every
//! pod write of the `annotate` plugin judged against its writer's claimed
//! arcs, rebuilt from the Lease history with an independent ring model),
//! the simulator's store (which pods exist, at which resourceVersion), and
//! what each replica's plugin logged it handled (the duplicate-handling and
//! final-state oracles). Consistent cuts of the replicas' `/cluster?keys=1`
//! serve to wait until the ring has settled and to see that a settled ring
//! leaves no key unowned.

use crate::cluster_support;
use crate::host_support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use cluster_support::*;
use host_support::LONG;

#[test]
fn each_key_has_one_owner_a_killed_replicas_keys_move_within_the_lease_and_final_states_survive_a_rolling_restart(
) {
    let t = FAST;
    let lease = Duration::from_millis(t.lease_ms);
    let retry = Duration::from_millis(t.retry_ms);
    let fx = cluster_fixture("sharded", t, 90);
    // A writing plugin beside event-log: it annotates every pod that lacks
    // the annotation, so each replica writes the keys it delivers.
    std::fs::copy(
        plugin_artifacts::ANNOTATE,
        fx.path().join("wasm/annotate.wasm"),
    )
    .unwrap();
    std::fs::write(
        fx.path().join("plugins/annotate.toml"),
        format!(
            "name = \"annotate\"\nwasm = \"../wasm/annotate.wasm\"\nresources = [\"v1/pods\"]\n\
             queue_capacity = 4096\ntimeout_ms = 20000\nwrite_qps = 0\nwrite_timeout_ms = 10000\n\n\
             [config]\nkey = \"{SEEN}\"\n\n[[write]]\nresource = \"v1/pods\"\nverbs = [\"patch\"]\n"
        ),
    )
    .unwrap();
    let sim = Sim::start(fx.path());
    let mut gone: Vec<Replica> = Vec::new();
    let mut live: Vec<Replica> = ["rep-a", "rep-b", "rep-c"]
        .iter()
        .map(|id| Replica::start(fx.path(), &sim, id))
        .collect();
    let stable: Vec<String> = sim.pods().keys().cloned().collect();
    let mut s = Sampling::default();
    wait_until("three ready replicas", LONG, || {
        live.iter().all(Replica::ready)
    });
    let settle = s.until_settled(&live.iter().collect::<Vec<_>>(), &stable, LONG);
    eprintln!("three replicas settled in {settle:?}");

    // Each replica holds its own Lease in the ring, labelled with its name.
    let leases = sim.leases();
    let names: BTreeSet<&str> = leases
        .iter()
        .filter(|l| l["metadata"]["labels"]["wasm-informer.dev/ring"] == "wasm-informer")
        .filter_map(|l| l["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, BTreeSet::from(["rep-a", "rep-b", "rep-c"]));
    // The plugin's init config names the replica's shard.
    let init = live[1]
        .proc
        .log()
        .into_iter()
        .find(|l| l.contains("init config="))
        .unwrap();
    assert!(
        init.contains("\"shard\":\"rep-b\"") && init.contains("\"ring\":\"wasm-informer\""),
        "{init}"
    );

    let churn = Churn::start(sim.addr, stable.clone(), Duration::from_millis(30));
    let unmark = Unmark::start(sim.addr, stable.clone());
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        s.sample(&live.iter().collect::<Vec<_>>(), &stable);
        std::thread::sleep(Duration::from_millis(50));
    }

    // kill -9 of rep-c: its keys reach the others within the lease duration
    // (plus one retry period for the observation, and one for scheduling).
    let cut = s.sample(&live.iter().collect::<Vec<_>>(), &stable);
    let c_keys: BTreeSet<String> = cut
        .and_then(|c| c.owned.get("rep-c").cloned())
        .unwrap_or_default()
        .into_iter()
        .filter(|k| stable.contains(k))
        .collect();
    let t_kill = now_micros();
    let mut c = live.remove(2);
    c.proc.kill9();
    gone.push(c);
    let moved_in = s.until_settled(&live.iter().collect::<Vec<_>>(), &stable, LONG);
    // Its last accepted renewal, from the simulator's request log: others may
    // take over a lease duration after it.
    let last_renewal = sim
        .requests()
        .into_iter()
        .filter(|r| r.replica() == Some("rep-c") && r.is_accepted_write() && r.at_micros <= t_kill)
        .map(|r| r.at_micros)
        .max()
        .unwrap();
    let since_renewal = Duration::from_micros(t_kill - last_renewal) + moved_in;
    eprintln!(
        "kill -9 of rep-c: its {} keys owned by others {moved_in:?} after the kill, {since_renewal:?} after its last renewal (lease {lease:?})",
        c_keys.len()
    );
    // The lease duration, plus one retry period of slack for scheduling and
    // the sampling interval.
    assert!(
        since_renewal <= lease + retry,
        "reassignment took {since_renewal:?} after the last renewal"
    );
    assert!(
        moved_in <= lease + retry,
        "reassignment took {moved_in:?} after the kill"
    );
    // ... and were handled there: each reached a survivor's plugin.
    let missing = unhandled_since(&live, t_kill, &c_keys);
    assert!(
        missing.is_empty(),
        "keys of the killed replica never handled by the others: {missing:?}"
    );

    // A replacement joins, then a rolling restart of all three (SIGTERM,
    // start the successor, wait until the ring settles), under churn.
    live.push(Replica::start(fx.path(), &sim, "rep-d"));
    wait_until("rep-d ready", LONG, || live[2].ready());
    s.until_settled(&live.iter().collect::<Vec<_>>(), &stable, LONG);
    for (old, new) in [("rep-a", "rep-e"), ("rep-b", "rep-f"), ("rep-d", "rep-g")] {
        let i = live.iter().position(|r| r.identity == old).unwrap();
        let mut r = live.remove(i);
        let t_term = Instant::now();
        r.proc.terminate();
        let status = r.proc.wait_exit(LONG);
        assert!(status.success(), "{old} exit: {status}");
        let took = s.until_settled(&live.iter().collect::<Vec<_>>(), &stable, LONG);
        eprintln!(
            "SIGTERM of {old}: the others settled {:?} after it exited ({:?} after the signal)",
            took,
            t_term.elapsed()
        );
        gone.push(r);
        live.push(Replica::start(fx.path(), &sim, new));
        let n = live.len() - 1;
        wait_until("the successor ready", LONG, || live[n].ready());
        let joined = s.until_settled(&live.iter().collect::<Vec<_>>(), &stable, LONG);
        eprintln!("{new} joined: the ring settled {joined:?} after it was ready");
    }

    // Churn stops; every pod's final state reached some live replica's plugin.
    let ops = churn.stop();
    let unmarked = unmark.stop();
    // The oracles over everything every replica ever handled.
    let all = final_states_then_every_event(&sim, &live, &gone);
    s.until_settled(&live.iter().collect::<Vec<_>>(), &stable, LONG);
    let dups = duplicate_handlings(&all);
    eprintln!(
        "churn ops {ops}, events {}, key moves {}, samples {} ({} consistent, {} settled), duplicate handlings {}",
        all.len(),
        moves(&all),
        s.samples,
        s.consistent,
        s.settled,
        dups.len()
    );
    // The server's verdict: no pod written by a replica outside its claimed
    // arcs, after another's acquisition, or by two in overlapping tenures.
    let verdict = pod_write_verdict(&sim, t.lease_ms);
    eprintln!(
        "{unmarked} annotations removed; checker: writes {}, tenures {}, takeovers {}, keys moved {}, violations {}",
        verdict.writes,
        verdict.tenures,
        verdict.takeovers,
        verdict.keys_moved,
        verdict.violations.len()
    );
    assert!(
        verdict.violations.is_empty(),
        "pod writes of two replicas' tenures: {:#?}",
        verdict.violations
    );
    assert!(verdict.takeovers > 0, "no key changed hands: {verdict:?}");
    assert!(verdict.writes > stable.len(), "too few writes: {verdict:?}");
    assert!(
        s.uncovered.is_empty(),
        "settled cuts with unowned keys: {:?}",
        s.uncovered
    );
    assert!(s.settled >= 5, "too few settled samples: {s:?}");
    assert!(dups.is_empty(), "duplicate handlings: {dups:#?}");
}

/// The annotation the `annotate` plugin keeps on every pod.
const SEEN: &str = "test.wasm-informer.dev/seen";

/// Takes [`SEEN`] off the stable pods in turn, every 20 ms, so that their
/// owners keep writing them.
struct Unmark {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl Unmark {
    fn start(addr: std::net::SocketAddr, keys: Vec<String>) -> Unmark {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut n = 0u64;
            while !s2.load(std::sync::atomic::Ordering::SeqCst) {
                let (ns, name) = keys[n as usize * 7 % keys.len()].split_once('/').unwrap();
                let body = format!(r#"{{"metadata":{{"annotations":{{"{SEEN}":null}}}}}}"#);
                host_support::http_request(
                    addr,
                    "PATCH",
                    &format!("/api/v1/namespaces/{ns}/pods/{name}"),
                    Some(("application/merge-patch+json", &body)),
                );
                n += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            n
        });
        Unmark { stop, thread }
    }

    fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.thread.join().unwrap()
    }
}

/// The history checker over the replicas' pod writes. A pod's shard key is
/// its controller owner's (`group/Kind/namespace/name`), else its own, as
/// the simulator stores it; a pod gone by now (the churn's, which have no
/// owner) is keyed by itself.
fn pod_write_verdict(sim: &Sim, lease_ms: u64) -> cluster_support::history::Verdict {
    use cluster_support::history::{History, Mode, Rules, Write};
    let (code, body) = sim.request("GET", "/api/v1/pods", None);
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let mut keys = std::collections::BTreeMap::new();
    for p in v["items"].as_array().unwrap() {
        let m = &p["metadata"];
        let (ns, name) = (
            m["namespace"].as_str().unwrap(),
            m["name"].as_str().unwrap(),
        );
        let owner = m["ownerReferences"]
            .as_array()
            .and_then(|a| a.iter().find(|o| o["controller"] == true));
        let key = match owner {
            Some(o) => {
                let api = o["apiVersion"].as_str().unwrap_or("");
                let group = api.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
                format!(
                    "{group}/{}/{ns}/{}",
                    o["kind"].as_str().unwrap(),
                    o["name"].as_str().unwrap()
                )
            }
            None => format!("/Pod/{ns}/{name}"),
        };
        keys.insert(format!("/api/v1/namespaces/{ns}/pods/{name}"), key);
    }
    let key_of = |w: &Write| -> Option<String> {
        let rest = w.path.strip_prefix("/api/v1/namespaces/")?;
        let (ns, name) = rest.split_once("/pods/")?;
        Some(
            keys.get(&w.path)
                .cloned()
                .unwrap_or_else(|| format!("/Pod/{ns}/{name}")),
        )
    };
    let judged =
        |w: &Write| w.replica.is_some() && w.method == "PATCH" && w.path.contains("/pods/");
    let h = History::from_log(&sim.requests(), "wasm-informer", lease_ms);
    h.check(&Rules {
        mode: Mode::Sharded { key_of: &key_of },
        judged: &judged,
        children: None,
    })
}

/// The namespace of the controller test's objects.
const CTL_NS: &str = "ctl";

/// A Deployment `d-i` labelled `expose: "true"`, with one container port,
/// controlled (as a ReplicaSet is by its Deployment) by a `Rollout` of a
/// group the simulator does not serve, so nothing collects it.
fn controlled_deployment(i: usize) -> String {
    serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": format!("d-{i}"), "namespace": CTL_NS,
            "labels": {"expose": "true"},
            "ownerReferences": [{"apiVersion": "rollouts.example.com/v1", "kind": "Rollout",
                "name": format!("r-{i}"), "uid": format!("rollout-uid-{i}"), "controller": true}]},
        "spec": {"replicas": 0,
            "selector": {"matchLabels": {"app": format!("d-{i}")}},
            "template": {"metadata": {"labels": {"app": format!("d-{i}")}},
                "spec": {"containers": [{"name": "c", "image": "busybox",
                    "ports": [{"containerPort": 8080}]}]}}}
    })
    .to_string()
}

/// Services of the controller namespace: name to `spec.selector`.
fn service_selectors(sim: &Sim) -> std::collections::BTreeMap<String, serde_json::Value> {
    let (code, body) = sim.request(
        "GET",
        &format!("/api/v1/namespaces/{CTL_NS}/services"),
        None,
    );
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["metadata"]["name"].as_str().unwrap().to_string(),
                s["spec"]["selector"].clone(),
            )
        })
        .collect()
}

/// Sharded controllers route every trigger by the primary's own key: three
/// replicas run `service-exposer` (`for` Deployments, `owns` Services) on
/// Deployments that have controller owners of their own. Each Service is
/// then patched away from what its Deployment wants; every one must be put
/// back, which only a reconcile of its Deployment does. Oracle: the
/// simulator's store (the selectors) and its request log (who applied).
#[test]
fn sharded_controllers_reconcile_every_owner_after_its_child_changes() {
    const N: usize = 30;
    let t = FAST;
    let fx = cluster_fixture_with(
        "sharded",
        t,
        0,
        "service-exposer",
        plugin_artifacts::SERVICE_EXPOSER,
        SERVICE_EXPOSER_MANIFEST,
    );
    let sim = Sim::start(fx.path());
    let (code, body) = sim.create_namespace(CTL_NS);
    assert_eq!(code, 201, "{body}");
    for i in 0..N {
        let (code, body) = sim.request(
            "POST",
            &format!("/apis/apps/v1/namespaces/{CTL_NS}/deployments"),
            Some(&controlled_deployment(i)),
        );
        assert_eq!(code, 201, "{body}");
    }
    let live: Vec<Replica> = ["rep-a", "rep-b", "rep-c"]
        .iter()
        .map(|id| Replica::start(fx.path(), &sim, id))
        .collect();
    wait_for_one_ring(&live);
    wait_until("a Service for every Deployment", LONG, || {
        service_selectors(&sim).len() == N
    });
    let wanted = service_selectors(&sim);

    // Drift every Service; only a reconcile of its Deployment repairs it.
    let t_drift = now_micros();
    for i in 0..N {
        let (code, body) = sim.request(
            "PATCH",
            &format!("/api/v1/namespaces/{CTL_NS}/services/d-{i}"),
            Some(r#"{"spec":{"selector":{"app":"drifted"}}}"#),
        );
        assert_eq!(code, 200, "{body}");
    }
    let repaired = || {
        let now = service_selectors(&sim);
        wanted
            .iter()
            .filter(|(k, v)| now.get(*k) == Some(*v))
            .count()
    };
    let waited = std::panic::catch_unwind(|| {
        wait_until("every Service repaired", Duration::from_secs(60), || {
            repaired() == N
        })
    });
    let reqs = sim.requests();
    let mut by: std::collections::BTreeMap<String, usize> = Default::default();
    for r in reqs.iter().filter(|r| {
        r.at_micros > t_drift
            && r.method == "PATCH"
            && r.path.contains("/services/")
            && r.is_accepted_write()
            && r.replica().is_some()
    }) {
        *by.entry(r.replica().unwrap().to_string()).or_default() += 1;
    }
    eprintln!(
        "{} of {N} Services repaired after the drift; repairs by replica: {by:?}",
        repaired()
    );
    assert!(
        waited.is_ok(),
        "only {} of {N} Deployments were reconciled after their Service changed",
        repaired()
    );
    assert_eq!(
        by.values().sum::<usize>(),
        N,
        "one repair per Service: {by:?}"
    );
    assert!(
        by.len() > 1,
        "the repairs should spread over the ring: {by:?}"
    );
}
