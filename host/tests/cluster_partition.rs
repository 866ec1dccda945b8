//! A replica cut off from the API server, in one process: the cluster layer
//! of several replicas against an in-process apisim, one of them sending its
//! Lease traffic through a TCP proxy the test can cut, while its informer's
//! watch keeps flowing and the pods change all along, so that the cut-off
//! replica always has changes it could deliver. The guarantee under test: a
//! replica that cannot renew its lease closes its fence and stops delivering
//! before any other replica can take its keys over, and delivers nothing
//! after.
//!
//! Oracles: the simulator's request log (arrival times of each replica's
//! accepted Lease writes), and recording handlers registered with each
//! replica's ownership predicate (what each would hand its plugins, and when,
//! on this process's one clock).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use apisim::workload::{Workload, WorkloadConfig};
use apisim::{RunningSim, Sim, SimConfig};
use kube_informer::handler::{Delivery, Handler};
use kube_informer::notification::{EventKind, NotificationRef};
use kube_informer::{HandlerOptions, InformerConfig, InformerRegistry, Registration};
use parking_lot::Mutex;
use wasm_informer::cluster::Cluster;
use wasm_informer::config::{ClusterMode, ClusterSettings};

const LEASE_MS: u64 = 3000;
const RENEW_MS: u64 = 2000;
const RETRY_MS: u64 = 500;
const MARGIN_MS: u64 = 500;

fn settings(mode: ClusterMode) -> ClusterSettings {
    ClusterSettings {
        mode,
        namespace: Some("wasm-informer".into()),
        lease_duration_ms: LEASE_MS,
        renew_deadline_ms: RENEW_MS,
        retry_period_ms: RETRY_MS,
        clock_skew_margin_ms: MARGIN_MS,
        ..ClusterSettings::default()
    }
}

/// A TCP proxy in front of the simulator that can be cut (every connection
/// dropped, new ones refused) and healed.
struct Proxy {
    addr: SocketAddr,
    cut: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Proxy {
    async fn start(upstream: SocketAddr) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let (c2, k2) = (cut.clone(), conns.clone());
        tokio::spawn(async move {
            while let Ok((mut down, _)) = listener.accept().await {
                if c2.load(Ordering::SeqCst) {
                    continue;
                }
                let task = tokio::spawn(async move {
                    if let Ok(mut up) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                    }
                });
                k2.lock().push(task);
            }
        });
        Proxy { addr, cut, conns }
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for c in self.conns.lock().drain(..) {
            c.abort();
        }
    }

    fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

fn client(addr: SocketAddr, identity: &str) -> kube::Client {
    let mut config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    config.default_retry = false;
    config.read_timeout = Some(Duration::from_secs(5));
    config.headers.push((
        http::header::USER_AGENT,
        format!("wasm-informer/test ({identity})").parse().unwrap(),
    ));
    kube::Client::try_from(config).unwrap()
}

/// One event a replica would hand its plugins.
#[derive(Debug, Clone)]
struct Rec {
    at: Instant,
    replica: String,
    key: String,
    kind: EventKind,
}

struct Recorder {
    replica: String,
    out: Arc<Mutex<Vec<Rec>>>,
}

impl Handler for Recorder {
    async fn handle(&mut self, n: NotificationRef) -> Delivery {
        self.out.lock().push(Rec {
            at: Instant::now(),
            replica: self.replica.clone(),
            key: n.key.to_string(),
            kind: n.kind,
        });
        Delivery::Ok
    }
}

/// One replica's cluster layer, informer and recording handler.
struct Replica {
    cluster: Arc<Cluster>,
    _registration: Registration,
    _registry: Arc<InformerRegistry>,
}

/// A replica whose informers watch through `watch_addr` and whose cluster
/// layer (its Leases) talks through `lease_addr`.
async fn replica(
    identity: &str,
    watch_addr: SocketAddr,
    lease_addr: SocketAddr,
    mode: ClusterMode,
    out: &Arc<Mutex<Vec<Rec>>>,
) -> Replica {
    let c = client(watch_addr, identity);
    let registry = InformerRegistry::new(c.clone(), InformerConfig::default());
    let cluster = Cluster::new(
        &settings(mode),
        identity.into(),
        client(lease_addr, identity),
    )
    .unwrap();
    let registration = registry
        .add_handler(
            "v1/pods",
            Recorder {
                replica: identity.into(),
                out: out.clone(),
            },
            HandlerOptions::named("recorder").ownership(cluster.ownership().clone()),
        )
        .await
        .unwrap();
    cluster.start(&registry);
    Replica {
        cluster,
        _registration: registration,
        _registry: registry,
    }
}

async fn sim(pods: usize) -> RunningSim {
    let s = Sim::new(SimConfig::default());
    s.store().create_namespace("wasm-informer").unwrap();
    Workload::seed(s.store().clone(), WorkloadConfig::new(pods, 3, 7)).unwrap();
    s.start("127.0.0.1:0".parse().unwrap()).await.unwrap()
}

fn sim_addr(s: &RunningSim) -> SocketAddr {
    s.url().trim_start_matches("http://").parse().unwrap()
}

/// Arrival times (µs since the epoch) of `identity`'s accepted Lease writes.
fn lease_writes(s: &RunningSim, identity: &str) -> Vec<u64> {
    s.request_log()
        .entries()
        .into_iter()
        .filter(|r| r.user_agent.contains(&format!("({identity})")))
        .filter(|r| {
            r.method != "GET" && (200..300).contains(&r.status) && r.path.contains("/leases")
        })
        .map(|r| r.at_micros)
        .collect()
}

fn unix_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// Changes the pods (a label on each, in turn, every 10 ms) through their
/// own client until the returned flag is set; returns the number of changes.
fn churn(addr: SocketAddr) -> (Arc<AtomicBool>, tokio::task::JoinHandle<u64>) {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, ListParams, Patch, PatchParams};
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let task = tokio::spawn(async move {
        let c = client(addr, "churn");
        let all: Api<Pod> = Api::all(c.clone());
        let pods: Vec<(String, String)> = all
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|p| Some((p.metadata.namespace?, p.metadata.name?)))
            .collect();
        let mut n = 0u64;
        while !s2.load(Ordering::SeqCst) {
            let (ns, name) = &pods[n as usize % pods.len()];
            let api: Api<Pod> = Api::namespaced(c.clone(), ns);
            let patch = serde_json::json!({"metadata": {"labels": {"churn": n.to_string()}}});
            if api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .is_ok()
            {
                n += 1;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        n
    });
    (stop, task)
}

async fn until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The duplicate-handling oracle (see the multi-process tests): when the
/// replica handling a key changes, the new one's first event must be an add.
fn duplicates(recs: &[Rec]) -> Vec<String> {
    let mut by_key: BTreeMap<&str, Vec<&Rec>> = BTreeMap::new();
    for r in recs {
        by_key.entry(r.key.as_str()).or_default().push(r);
    }
    let mut out = Vec::new();
    for (k, mut v) in by_key {
        v.sort_by_key(|r| r.at);
        for w in v.windows(2) {
            if w[0].replica != w[1].replica && w[1].kind != EventKind::Added {
                out.push(format!("{k}: {:?} then {:?}", w[0], w[1]));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_cut_off_stops_delivering_and_closes_its_fence_before_a_standby_takes_over() {
    let s = sim(40).await;
    let proxy = Proxy::start(sim_addr(&s)).await;
    let recs: Arc<Mutex<Vec<Rec>>> = Arc::default();
    let a = replica(
        "rep-a",
        sim_addr(&s),
        proxy.addr,
        ClusterMode::Leader,
        &recs,
    )
    .await;
    until(
        "rep-a leads and delivered the cache",
        Duration::from_secs(60),
        || a.cluster.report().role == "leader" && recs.lock().len() >= 40,
    )
    .await;
    let b = replica(
        "rep-b",
        sim_addr(&s),
        sim_addr(&s),
        ClusterMode::Leader,
        &recs,
    )
    .await;
    until("rep-b is a standby", Duration::from_secs(30), || {
        b.cluster.report().leader.as_deref() == Some("rep-a")
    })
    .await;
    assert!(a.cluster.fence().check(Duration::from_millis(100)).is_ok());
    assert!(
        b.cluster.fence().check(Duration::ZERO).is_err(),
        "a standby's fence is open"
    );

    let (stop_churn, churned) = churn(sim_addr(&s));
    until("rep-a delivers the churn", Duration::from_secs(30), || {
        recs.lock().len() >= 80
    })
    .await;
    proxy.cut();
    let cut_at = Instant::now();
    // rep-a's fence closes and it stops delivering; only then does rep-b lead.
    let mut fence_closed = None;
    let mut a_stopped = None;
    let mut b_leads = None;
    until("rep-b leads", Duration::from_secs(30), || {
        let now = Instant::now();
        if fence_closed.is_none() && a.cluster.fence().check(Duration::ZERO).is_err() {
            fence_closed = Some(now);
        }
        if a_stopped.is_none() && a.cluster.report().owned_fraction == 0.0 {
            a_stopped = Some(now);
        }
        if b_leads.is_none() && b.cluster.report().role == "leader" {
            b_leads = Some((now, unix_micros()));
        }
        b_leads.is_some()
    })
    .await;
    let (fence_closed, a_stopped) = (fence_closed.unwrap(), a_stopped.unwrap());
    let (b_leads, b_leads_unix) = b_leads.unwrap();
    eprintln!(
        "cut at 0: rep-a fence closed at {:?}, delivery stopped at {:?}, rep-b leads at {:?}",
        fence_closed - cut_at,
        a_stopped - cut_at,
        b_leads - cut_at
    );
    assert!(
        fence_closed <= a_stopped,
        "delivery stopped before the fence closed"
    );
    assert!(
        a_stopped < b_leads,
        "rep-b led before rep-a stopped delivering"
    );
    // rep-a gave up within the renew deadline of its last renewal, and rep-b
    // took over no earlier than a lease duration after that renewal arrived.
    let last_a = *lease_writes(&s, "rep-a").last().unwrap();
    let first_b = lease_writes(&s, "rep-b")[0];
    assert!(
        first_b >= last_a + LEASE_MS * 1000,
        "rep-b acquired {} µs after rep-a's last renewal",
        first_b - last_a
    );
    assert!(b_leads_unix >= first_b);
    let a_last_event = recs
        .lock()
        .iter()
        .filter(|r| r.replica == "rep-a")
        .map(|r| r.at)
        .max()
        .unwrap();
    let b_first_event = recs
        .lock()
        .iter()
        .filter(|r| r.replica == "rep-b")
        .map(|r| r.at)
        .min();
    assert!(
        b_first_event.is_none_or(|t| t > a_last_event),
        "rep-b handled an event before rep-a's last one"
    );
    // The pods went on changing, and rep-a went on seeing them: it
    // delivered none after it stopped, rep-b delivers them.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let a_after: Vec<Rec> = recs
        .lock()
        .iter()
        .filter(|r| r.replica == "rep-a" && r.at > a_stopped)
        .cloned()
        .collect();
    assert!(
        a_after.is_empty(),
        "rep-a delivered after it stopped: {a_after:?}"
    );
    let b_updates = recs
        .lock()
        .iter()
        .filter(|r| r.replica == "rep-b" && r.kind == EventKind::Updated)
        .count();
    assert!(
        b_updates > 0,
        "rep-b delivered no change made during the cut"
    );
    stop_churn.store(true, Ordering::SeqCst);
    let changes = churned.await.unwrap();
    eprintln!("{changes} pod changes; rep-b delivered {b_updates} updates while rep-a was cut off");

    // Healed, rep-a comes back as a standby of rep-b.
    proxy.heal();
    until("rep-a follows rep-b", Duration::from_secs(30), || {
        let r = a.cluster.report();
        r.role == "standby" && r.leader.as_deref() == Some("rep-b")
    })
    .await;
    assert!(a.cluster.fence().check(Duration::ZERO).is_err());
    assert!(duplicates(&recs.lock()).is_empty());
    drop((a, b));
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_ring_member_cut_off_releases_its_keys_before_the_others_take_them_and_gets_them_back() {
    let s = sim(90).await;
    let proxy = Proxy::start(sim_addr(&s)).await;
    let recs: Arc<Mutex<Vec<Rec>>> = Arc::default();
    let direct = sim_addr(&s);
    let a = replica("rep-a", direct, direct, ClusterMode::Sharded, &recs).await;
    let b = replica("rep-b", direct, direct, ClusterMode::Sharded, &recs).await;
    let c = replica("rep-c", direct, proxy.addr, ClusterMode::Sharded, &recs).await;
    let settled = |r: &Replica| {
        let rep = r.cluster.report();
        rep.role == "member" && !rep.in_transition
    };
    until("three settled members", Duration::from_secs(60), || {
        [&a, &b, &c]
            .iter()
            .all(|r| settled(r) && r.cluster.report().members.len() == 3)
    })
    .await;
    let c_share = c.cluster.report().owned_fraction;
    assert!(c_share > 0.1, "rep-c owns {c_share}");
    let (stop_churn, churned) = churn(direct);
    let before = recs.lock().iter().filter(|r| r.replica == "rep-c").count();
    until("rep-c delivers the churn", Duration::from_secs(30), || {
        recs.lock().iter().filter(|r| r.replica == "rep-c").count() >= before + 10
    })
    .await;
    let c_keys: std::collections::BTreeSet<String> = recs
        .lock()
        .iter()
        .filter(|r| r.replica == "rep-c")
        .map(|r| r.key.clone())
        .collect();

    proxy.cut();
    let cut_at = Instant::now();
    let mut c_stopped = None;
    let mut others_took = None;
    until(
        "rep-a and rep-b own the whole ring",
        Duration::from_secs(30),
        || {
            let now = Instant::now();
            if c_stopped.is_none() && c.cluster.report().owned_fraction == 0.0 {
                c_stopped = Some(now);
            }
            let total = a.cluster.report().owned_fraction + b.cluster.report().owned_fraction;
            if others_took.is_none() && total > 1.0 - c_share / 2.0 {
                others_took = Some(now);
            }
            (total - 1.0).abs() < 1e-9
        },
    )
    .await;
    let (c_stopped, others_took) = (c_stopped.unwrap(), others_took.unwrap());
    eprintln!(
        "cut at 0: rep-c stopped delivering at {:?}, the others took its share at {:?}",
        c_stopped - cut_at,
        others_took - cut_at
    );
    assert!(
        c_stopped < others_took,
        "the others took rep-c's keys while it still delivered them"
    );
    assert!(c.cluster.fence().check(Duration::ZERO).is_err());
    assert!(
        others_took - cut_at <= Duration::from_millis(LEASE_MS + 2 * RETRY_MS),
        "took {:?}",
        others_took - cut_at
    );
    // The pods went on changing and rep-c went on seeing them: it delivered
    // none after it stopped, and rep-a and rep-b deliver changes of its keys.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let c_after: Vec<Rec> = recs
        .lock()
        .iter()
        .filter(|r| r.replica == "rep-c" && r.at > c_stopped)
        .cloned()
        .collect();
    assert!(
        c_after.is_empty(),
        "rep-c delivered after it stopped: {c_after:?}"
    );
    let moved_updates = recs
        .lock()
        .iter()
        .filter(|r| {
            r.replica != "rep-c"
                && r.at > others_took
                && r.kind == EventKind::Updated
                && c_keys.contains(&r.key)
        })
        .count();
    assert!(
        moved_updates > 0,
        "no change of rep-c's keys made during the cut reached rep-a or rep-b"
    );

    proxy.heal();
    until("rep-c back in the ring", Duration::from_secs(30), || {
        [&a, &b, &c]
            .iter()
            .all(|r| settled(r) && r.cluster.report().members.len() == 3)
    })
    .await;
    assert!(
        (c.cluster.report().owned_fraction - c_share).abs() < 1e-9,
        "rep-c's share changed"
    );
    stop_churn.store(true, Ordering::SeqCst);
    let changes = churned.await.unwrap();
    eprintln!("{changes} pod changes; {moved_updates} updates of rep-c's keys delivered by the others during the cut");
    let dups = duplicates(&recs.lock());
    assert!(dups.is_empty(), "{dups:#?}");
    drop((a, b, c));
    s.shutdown().await;
}

/// An election Lease deleted under its holder (by an operator, a namespace
/// cleanup) is not free: the holder cannot know until its next renewal, and
/// acts until then. A standby that saw it held takes the missing Lease only
/// a lease duration after it first found it missing; the holder's next
/// renewal recreates it. Oracle: the outcomes of each
/// replica's attempts against the simulator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_does_not_take_an_election_lease_deleted_under_its_holder() {
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::api::{Api, DeleteParams};
    use wasm_informer::cluster::lease::{Attempt, LeaseLock};
    let s = sim(0).await;
    let api = |id: &str| Api::<Lease>::namespaced(client(sim_addr(&s), id), "wasm-informer");
    let lease = Duration::from_millis(LEASE_MS);
    let lock = |id: &str| LeaseLock::new(api(id), "election", id, lease, Default::default());
    let (mut a, mut b) = (lock("rep-a"), lock("rep-b"));
    let delete = || async {
        api("operator")
            .delete("election", &DeleteParams::default())
            .await
            .unwrap();
    };
    assert!(matches!(
        a.try_acquire_or_renew().await,
        Attempt::Held { acquired: true, .. }
    ));
    assert!(matches!(
        b.try_acquire_or_renew().await,
        Attempt::Taken { .. }
    ));
    delete().await;
    let r = b.try_acquire_or_renew().await;
    assert!(
        matches!(r, Attempt::Taken { ref holder, .. } if holder.starts_with("rep-a")),
        "the standby took a Lease whose holder does not know it is gone: {r:?}"
    );
    // The holder's next renewal recreates it, and goes on holding it.
    assert!(matches!(
        a.try_acquire_or_renew().await,
        Attempt::Held { .. }
    ));
    assert!(matches!(
        b.try_acquire_or_renew().await,
        Attempt::Taken { .. }
    ));
    // Deleted and never recreated (the holder died): free a lease duration
    // after the standby first found it missing (the holder's last renewal
    // was sent before the deletion, which came before that; the standby's
    // last sight of a change may be older than the holder's last renewal).
    delete().await;
    tokio::time::sleep(lease + Duration::from_millis(100)).await;
    assert!(
        matches!(b.try_acquire_or_renew().await, Attempt::Taken { .. }),
        "taken before a lease duration since it was found missing"
    );
    tokio::time::sleep(lease + Duration::from_millis(100)).await;
    assert!(matches!(
        b.try_acquire_or_renew().await,
        Attempt::Held { acquired: true, .. }
    ));
    s.shutdown().await;
}
