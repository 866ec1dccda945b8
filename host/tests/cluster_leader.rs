//! Leader election across processes: three `wasm-informer run` replicas in
//! `[cluster] mode = "leader"` against one `wasm-informer sim`. The oracles
//! are the simulator's request log (accepted writes of the election Lease,
//! with their arrival times and the replica that sent them) and what each
//! replica's plugin logged it handled.
//!
//! Durations are short (3 s / 2 s / 0.5 s, margin 0.5 s) and every bound is
//! derived from them.

use crate::cluster_support;
use crate::host_support;

use std::time::Duration;

use cluster_support::*;
use host_support::{sample, LONG};

const LEASE_PATH: &str =
    "/apis/coordination.k8s.io/v1/namespaces/wasm-informer/leases/wasm-informer";

fn leaders(reps: &[&Replica]) -> Vec<String> {
    reps.iter()
        .filter(|r| r.cluster(false).is_some_and(|c| c["role"] == "leader"))
        .map(|r| r.identity.clone())
        .collect()
}

/// The first accepted write of the election lease after `after` that makes
/// someone other than `previous` the holder: (holder, arrival time).
fn next_acquisition(sim: &Sim, after: u64, previous: &str) -> Option<(String, u64)> {
    sim.requests()
        .into_iter()
        .filter(|r| r.path == LEASE_PATH && r.is_accepted_write() && r.at_micros > after)
        .find_map(|r| {
            let v: serde_json::Value = serde_json::from_str(&r.body).ok()?;
            let h = v["spec"]["holderIdentity"].as_str()?.to_string();
            (!h.is_empty() && h != previous).then_some((h, r.at_micros))
        })
}

#[test]
fn one_leader_fails_over_within_lease_plus_retry_and_leadership_never_overlaps() {
    let t = FAST;
    let lease = Duration::from_millis(t.lease_ms);
    let retry = Duration::from_millis(t.retry_ms);
    let fx = cluster_fixture("leader", t, 60);
    let sim = Sim::start(fx.path());
    let mut reps: Vec<Replica> = ["rep-a", "rep-b", "rep-c"]
        .iter()
        .map(|id| Replica::start(fx.path(), &sim, id))
        .collect();

    // Exactly one leader, and it stays the only one.
    wait_until("three ready replicas and one leader", LONG, || {
        let all: Vec<&Replica> = reps.iter().collect();
        all.iter().all(|r| r.ready()) && leaders(&all).len() == 1
    });
    for _ in 0..20 {
        let all: Vec<&Replica> = reps.iter().collect();
        assert_eq!(leaders(&all).len(), 1, "not exactly one leader");
        std::thread::sleep(Duration::from_millis(100));
    }
    let first = leaders(&reps.iter().collect::<Vec<_>>())[0].clone();
    let keys: Vec<String> = sim.pods().keys().cloned().collect();

    // Standbys keep their informers synced and deliver nothing.
    let churn = Churn::start(sim.addr, keys.clone(), Duration::from_millis(40));
    std::thread::sleep(Duration::from_secs(2));
    for r in reps.iter().filter(|r| r.identity != first) {
        let m = r.metrics_text();
        assert_eq!(
            sample(&m, "wasm_informer_informer_synced{resource=\"v1/pods\"}"),
            Some(1.0),
            "{} is not warm",
            r.identity
        );
        assert!(
            sample(&m, "wasm_informer_informer_objects{resource=\"v1/pods\"}").unwrap_or(0.0)
                >= keys.len() as f64
        );
        assert!(
            r.events().is_empty(),
            "standby {} delivered events",
            r.identity
        );
        let series = format!(
            "wasm_informer_leader{{mode=\"leader\",identity=\"{}\"}}",
            r.identity
        );
        assert_eq!(sample(&m, &series), Some(0.0), "{series}");
    }
    let leader = reps.iter().find(|r| r.identity == first).unwrap();
    assert!(!leader.events().is_empty(), "the leader delivered nothing");
    // The plugin's init config carries the replica's identity.
    let init = leader
        .proc
        .log()
        .into_iter()
        .find(|l| l.contains("init config="))
        .expect("init config logged");
    assert!(
        init.contains(&format!("\"identity\":\"{first}\"")),
        "{init}"
    );
    assert!(init.contains("\"mode\":\"leader\""), "{init}");

    // kill -9 of the leader: another replica takes over within lease + retry.
    let t_kill = now_micros();
    reps.iter_mut()
        .find(|r| r.identity == first)
        .unwrap()
        .proc
        .kill9();
    let bound = lease + retry;
    let mut took = None;
    wait_until("a new leader after kill -9", bound * 4, || {
        took = next_acquisition(&sim, t_kill, &first);
        took.is_some()
    });
    let (second, at) = took.unwrap();
    let kill_handover = Duration::from_micros(at - t_kill);
    eprintln!(
        "kill -9 of {first}: {second} acquired the lease after {kill_handover:?} (bound {bound:?})"
    );
    // One retry period of slack for scheduling on a loaded machine.
    assert!(
        kill_handover <= bound + retry,
        "failover took {kill_handover:?}, more than {bound:?} + {retry:?}"
    );

    // The new leader starts with a replay of the whole cache (I6).
    let new_leader = reps.iter().find(|r| r.identity == second).unwrap();
    wait_until("the new leader's replay", LONG, || {
        new_leader.events().iter().filter(|e| e.initial).count() >= keys.len()
    });
    let evs = new_leader.events();
    assert!(
        evs[0].initial,
        "the new leader's first event is not a replay: {:?}",
        evs[0]
    );

    // SIGTERM of the new leader: the lease is released after its plugins
    // drained, and the last standby takes it faster than after a kill.
    std::thread::sleep(Duration::from_secs(1));
    let t_term = now_micros();
    let r = reps.iter_mut().find(|r| r.identity == second).unwrap();
    r.proc.terminate();
    let status = r.proc.wait_exit(LONG);
    assert!(status.success(), "SIGTERM exit: {status}");
    let mut took = None;
    wait_until("a leader after SIGTERM", bound * 4, || {
        took = next_acquisition(&sim, t_term, &second);
        took.is_some()
    });
    let (third, at) = took.unwrap();
    let term_handover = Duration::from_micros(at - t_term);
    eprintln!("SIGTERM of {second}: {third} acquired the lease after {term_handover:?}");
    assert!(
        term_handover < kill_handover,
        "SIGTERM ({term_handover:?}) was not faster than kill -9 ({kill_handover:?})"
    );
    assert!(
        term_handover < lease,
        "after a release the standby must not wait for expiry"
    );

    // A fresh replica joins as a standby; churn stops; the leader's plugin
    // ends with every pod's final state (I5).
    reps.push(Replica::start(fx.path(), &sim, "rep-d"));
    std::thread::sleep(Duration::from_secs(2));
    churn.stop();
    let final_leader = reps.iter().find(|r| r.identity == third).unwrap();
    let pods = sim.pods();
    wait_until("the leader's plugin to see the final state", LONG, || {
        final_state_mismatches(&pods, &final_leader.events()).is_empty()
    });
    for r in &reps {
        r.assert_no_dropped_lines();
    }

    // The server's history: the holders in the order the server applied
    // their acquisitions, and no takeover before the previous holder's last
    // renewal had aged a whole lease duration (or it released the Lease).
    let h =
        cluster_support::history::History::from_log(&sim.requests(), "wasm-informer", t.lease_ms);
    let order: Vec<String> = h
        .acquisitions("wasm-informer")
        .into_iter()
        .map(|(_, holder)| holder)
        .collect();
    assert!(order.len() >= 3, "expected three acquisitions: {order:?}");
    assert_eq!(&order[..3], &[first.clone(), second.clone(), third.clone()]);
    let early = h.early_takeovers("wasm-informer");
    assert!(early.is_empty(), "leadership overlapped: {early:#?}");
    eprintln!(
        "{} versions of the election Lease, acquisitions {order:?}",
        h.leases["wasm-informer"].len()
    );
}

/// The annotation the writing plugin sets on every pod that lacks it.
const SEEN: &str = "test.wasm-informer.dev/seen";

/// Pods of the store without [`SEEN`].
fn unannotated(sim: &Sim) -> Vec<String> {
    let (code, body) = sim.request("GET", "/api/v1/pods", None);
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["metadata"]["annotations"][SEEN].is_null())
        .map(|p| {
            format!(
                "{}/{}",
                p["metadata"]["namespace"].as_str().unwrap(),
                p["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

/// Whether `r` is a write of a pod (the plugin's), not of the Lease.
fn pod_write(r: &Req) -> bool {
    r.method == "PATCH" && r.path.starts_with("/api/v1/namespaces/") && r.path.contains("/pods/")
}

/// A leader whose plugin writes: the writes reach the server even though
/// `write_timeout_ms` (10 s) is longer than anything left of a 3 s lease (a
/// call is cut to the fence's deadline, not refused), and once the leader is
/// stopped (SIGSTOP) past its lease and another replica took over, no write of
/// the old leader is applied after the new one's acquisition, in the
/// resourceVersion order of the server, also after the old leader resumes.
#[test]
fn leader_writes_reach_the_server_and_none_lands_after_a_takeover() {
    let t = FAST;
    let lease = Duration::from_millis(t.lease_ms);
    let manifest = format!(
        "resources = [\"v1/pods\"]\nqueue_capacity = 4096\ntimeout_ms = 20000\n\
         write_qps = 0\nwrite_timeout_ms = 10000\n\n\
         [config]\nkey = \"{SEEN}\"\n\n[[write]]\nresource = \"v1/pods\"\nverbs = [\"patch\"]\n"
    );
    let fx = cluster_fixture_with(
        "leader",
        t,
        40,
        "annotate",
        plugin_artifacts::ANNOTATE,
        &manifest,
    );
    let sim = Sim::start(fx.path());
    let mut reps: Vec<Replica> = ["rep-a", "rep-b"]
        .iter()
        .map(|id| Replica::start(fx.path(), &sim, id))
        .collect();
    wait_until("two ready replicas and one leader", LONG, || {
        let all: Vec<&Replica> = reps.iter().collect();
        all.iter().all(|r| r.ready()) && leaders(&all).len() == 1
    });
    let first = leaders(&reps.iter().collect::<Vec<_>>())[0].clone();
    let keys: Vec<String> = sim.pods().keys().cloned().collect();

    // Item 1: the leader's writes reach the server.
    wait_until("every pod annotated by the leader", LONG, || {
        unannotated(&sim).is_empty()
    });
    let by_first = sim
        .requests()
        .iter()
        .filter(|r| pod_write(r) && r.is_accepted_write() && r.replica() == Some(first.as_str()))
        .count();
    assert!(
        by_first >= keys.len(),
        "{first} had {by_first} pod writes applied, expected at least {}",
        keys.len()
    );

    // Churn: the annotation is taken off pods all the time, and the leader
    // puts it back, so writes are in flight when it is stopped.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (stop, addr, keys) = (stop.clone(), sim.addr, keys.clone());
        std::thread::spawn(move || {
            let mut n = 0usize;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let (ns, name) = keys[n % keys.len()].split_once('/').unwrap();
                let body = format!(r#"{{"metadata":{{"annotations":{{"{SEEN}":null}}}}}}"#);
                host_support::http_request(
                    addr,
                    "PATCH",
                    &format!("/api/v1/namespaces/{ns}/pods/{name}"),
                    Some(("application/merge-patch+json", &body)),
                );
                n += 1;
                std::thread::sleep(Duration::from_millis(15));
            }
            n
        })
    };
    std::thread::sleep(Duration::from_secs(2));

    // SIGSTOP of the leader, for twice the lease: the standby takes over.
    let old_pid = reps
        .iter()
        .find(|r| r.identity == first)
        .unwrap()
        .proc
        .pid();
    let t_stop = now_micros();
    signal(old_pid, "STOP");
    let mut took = None;
    wait_until("a new leader while the old one is stopped", LONG, || {
        took = next_acquisition(&sim, t_stop, &first);
        took.is_some()
    });
    let (second, at) = took.unwrap();
    eprintln!(
        "SIGSTOP of {first}: {second} acquired the lease after {:?}",
        Duration::from_micros(at - t_stop)
    );
    let stopped_for = Duration::from_micros(now_micros() - t_stop);
    std::thread::sleep((lease * 2).saturating_sub(stopped_for));
    signal(old_pid, "CONT");
    // The old leader runs on for a while beside the new one.
    std::thread::sleep(Duration::from_secs(4));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let churned = churn.join().unwrap();
    wait_until("every pod annotated again", LONG, || {
        unannotated(&sim).is_empty()
    });

    // The oracle: the server's request log, in resourceVersion order.
    let reqs = sim.requests();
    let history = lease_history(&reqs, LEASE_PATH);
    let takeover_rv = history
        .iter()
        .find(|(_, h)| h == &second)
        .map(|(rv, _)| *rv)
        .expect("the new leader's acquisition is in the Lease history");
    let new_first_write = reqs
        .iter()
        .filter(|r| pod_write(r) && r.replica() == Some(second.as_str()))
        .filter_map(|r| r.written_rv)
        .min()
        .expect("the new leader's plugin wrote");
    let late: Vec<String> = reqs
        .iter()
        .filter(|r| pod_write(r) && r.replica() == Some(first.as_str()))
        .filter_map(|r| r.written_rv)
        .filter(|rv| *rv > takeover_rv)
        .map(|rv| format!("{first} wrote at rv {rv}"))
        .collect();
    assert!(
        late.is_empty(),
        "writes of the old leader applied after the takeover (rv {takeover_rv}, \
         the new leader's first write at rv {new_first_write}): {late:?}"
    );
    // Every plugin write carried a server-side timeout that ends before the
    // fence closes (lease minus margin).
    let validity_ms = t.lease_ms - t.margin_ms;
    for r in reqs
        .iter()
        .filter(|r| pod_write(r) && r.replica().is_some())
    {
        let ms: Option<u64> = r
            .query
            .split('&')
            .find_map(|p| p.strip_prefix("timeout="))
            .and_then(|v| v.strip_suffix("ms"))
            .and_then(|v| v.parse().ok());
        assert!(
            ms.is_some_and(|ms| ms <= validity_ms),
            "{} {}?{}: no server-side timeout within the fence ({validity_ms} ms)",
            r.method,
            r.path,
            r.query
        );
    }
    // The checker's rules, in the server's order: every pod write lies in
    // its writer's leadership, none after another's acquisition.
    let h = cluster_support::history::History::from_log(&reqs, "wasm-informer", t.lease_ms);
    let judged = |w: &cluster_support::history::Write| {
        w.replica.is_some() && w.method == "PATCH" && w.path.contains("/pods/")
    };
    let verdict = h.check(&cluster_support::history::Rules {
        mode: cluster_support::history::Mode::Leader {
            lease: "wasm-informer",
        },
        judged: &judged,
        children: None,
    });
    eprintln!(
        "checker: writes {}, tenures {}, takeovers {}, violations {}",
        verdict.writes,
        verdict.tenures,
        verdict.takeovers,
        verdict.violations.len()
    );
    assert!(
        verdict.violations.is_empty(),
        "writes outside a leadership: {:#?}",
        verdict.violations
    );
    assert_eq!(verdict.takeovers, 1, "{verdict:?}");
    let applied = |who: &str| {
        reqs.iter()
            .filter(|r| pod_write(r) && r.written_rv.is_some() && r.replica() == Some(who))
            .count()
    };
    eprintln!(
        "{churned} annotations removed; pod writes applied: {first} {}, {second} {}; \
         takeover at rv {takeover_rv}, {second}'s first write at rv {new_first_write}",
        applied(&first),
        applied(&second),
    );
    assert!(applied(&second) > 0, "the new leader's writes never landed");
    for r in &mut reps {
        r.proc.kill9();
    }
}

/// Shutdown's wait for the plugins' hand-over is bounded: a leader whose
/// plugin is inside a 60 s event when SIGTERM arrives still releases its
/// Lease within a lease duration plus `shutdown_grace_ms` (its fence is shut
/// first, so the late handler cannot write). Oracle: the release as the
/// simulator logged it.
#[test]
fn sigterm_releases_the_lease_within_the_bound_while_a_plugin_is_stuck_in_an_event() {
    let t = FAST;
    let lease = Duration::from_millis(t.lease_ms);
    let grace = Duration::from_millis(3000);
    let manifest = "resources = [\"v1/pods\"]\ntimeout_ms = 120000\n\n[config]\nms = 60000\n";
    let fx = cluster_fixture_with("leader", t, 3, "slow", plugin_artifacts::SLOW, manifest);
    let sim = Sim::start(fx.path());
    let mut rep = Replica::start(fx.path(), &sim, "rep-a");
    wait_until("the leader", LONG, || {
        rep.cluster(false).is_some_and(|c| c["role"] == "leader")
    });
    // The plugin is inside its first 60 s event.
    std::thread::sleep(Duration::from_secs(2));
    let t_term = now_micros();
    rep.proc.terminate();
    let mut released = None;
    wait_until("the Lease released", Duration::from_secs(90), || {
        released = sim.requests().into_iter().find_map(|r| {
            let v: serde_json::Value = serde_json::from_str(&r.body).ok()?;
            (r.path == LEASE_PATH
                && r.is_accepted_write()
                && r.at_micros > t_term
                && v["spec"]["holderIdentity"]
                    .as_str()
                    .unwrap_or("")
                    .is_empty())
            .then_some(r.at_micros)
        });
        released.is_some()
    });
    let took = Duration::from_micros(released.unwrap() - t_term);
    let bound = lease + grace + Duration::from_secs(3);
    eprintln!("SIGTERM with a plugin 60 s into an event: the Lease released after {took:?}");
    assert!(
        took <= bound,
        "the Lease was released {took:?} after SIGTERM, more than {bound:?}"
    );
    let status = rep.proc.wait_exit(Duration::from_secs(60));
    eprintln!("exited: {status}");
}
