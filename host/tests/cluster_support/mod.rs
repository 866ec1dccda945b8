//! Helpers of the multi-process cluster tests: one `wasm-informer sim`
//! process, several `wasm-informer run` replicas against it, the simulator's
//! request log, the plugins' event lines, and the oracles the tests share.
//!
//! The oracles are independent of the cluster code: the simulator's request
//! log (who wrote what, when, with what result) and the Lease history in it,
//! judged by the history checker ([`history`]) with an independent model of
//! the ring ([`ring_model`]), its store (what exists), and what each
//! replica's plugin logged it handled (the `event-log` test plugin, one line
//! per event, timestamped by the host's log on one machine clock). [`proxy`]
//! freezes one replica's traffic.

#![allow(dead_code)]

pub mod history;
pub mod proxy;
pub mod ring_model;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::host_support::{http_get, http_request, HostProc, LONG};

/// The `service-exposer` controller's manifest (without `name` and `wasm`):
/// `for` Deployments, `owns` Services, two workers, no rate limit.
pub const SERVICE_EXPOSER_MANIFEST: &str =
    "for = \"apps/v1/deployments\"\nowns = [\"v1/services\"]\nworkers = 2\n\
     write_qps = 0\n\n[[write]]\nresource = \"v1/services\"\n\
     verbs = [\"create\", \"patch\", \"delete\"]\n";

/// Lease timing of the tests: short, so that failovers take seconds.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub lease_ms: u64,
    pub renew_ms: u64,
    pub retry_ms: u64,
    pub margin_ms: u64,
}

/// 3 s / 2 s / 0.5 s, with a 0.5 s fence margin.
pub const FAST: Timing = Timing {
    lease_ms: 3000,
    renew_ms: 2000,
    retry_ms: 500,
    margin_ms: 500,
};

/// Microseconds since the Unix epoch, now.
pub fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// Days from 1970-01-01 to a civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The timestamp a log line starts with (`2026-12-01T10:00:13.049055Z`), in
/// microseconds since the Unix epoch.
pub fn line_time(line: &str) -> Option<u64> {
    let ts = line.split_whitespace().next()?;
    let ts = ts.strip_suffix('Z')?;
    let (date, time) = ts.split_once('T')?;
    let mut d = date.split('-').map(|x| x.parse::<i64>());
    let (y, mo, da) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.split(':').map(|x| x.parse::<i64>());
    let (h, mi, s) = (t.next()?.ok()?, t.next()?.ok()?, t.next()?.ok()?);
    let mut frac = frac.to_string();
    frac.truncate(6);
    while frac.len() < 6 {
        frac.push('0');
    }
    let micros: i64 = frac.parse().ok()?;
    let secs = days_from_civil(y, mo, da) * 86_400 + h * 3600 + mi * 60 + s;
    Some((secs * 1_000_000 + micros) as u64)
}

/// A config directory: host.toml with `[cluster]` in `mode`, no simulator
/// churn (the tests churn through the API themselves), and the `event-log`
/// plugin on `v1/pods`.
pub fn cluster_fixture(mode: &str, t: Timing, pods: usize) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("plugins")).unwrap();
    std::fs::create_dir(tmp.path().join("wasm")).unwrap();
    let host = format!(
        "metrics_addr = \"127.0.0.1:0\"\ncache_dir = \"{cache}\"\nshutdown_grace_ms = 3000\n\n\
         [cluster]\nmode = \"{mode}\"\nnamespace = \"wasm-informer\"\n\
         lease_duration_ms = {}\nrenew_deadline_ms = {}\nretry_period_ms = {}\nclock_skew_margin_ms = {}\n\n\
         [sim]\npods = {pods}\nnamespaces = 3\nchurn_per_second = 0\n",
        t.lease_ms,
        t.renew_ms,
        t.retry_ms,
        t.margin_ms,
        cache = crate::host_support::cache_dir().display()
    );
    std::fs::write(tmp.path().join("host.toml"), host).unwrap();
    std::fs::copy(
        plugin_artifacts::EVENT_LOG,
        tmp.path().join("wasm/event-log.wasm"),
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("plugins/event-log.toml"),
        "name = \"event-log\"\nwasm = \"../wasm/event-log.wasm\"\nresources = [\"v1/pods\"]\nqueue_capacity = 4096\n",
    )
    .unwrap();
    tmp
}

/// A config directory like [`cluster_fixture`]'s, with one plugin instead
/// of `event-log`: `manifest` is its manifest without `name` and `wasm`, and
/// `wasm` its component.
pub fn cluster_fixture_with(
    mode: &str,
    t: Timing,
    pods: usize,
    name: &str,
    wasm: &str,
    manifest: &str,
) -> tempfile::TempDir {
    let tmp = cluster_fixture(mode, t, pods);
    std::fs::remove_file(tmp.path().join("plugins/event-log.toml")).unwrap();
    std::fs::copy(wasm, tmp.path().join(format!("wasm/{name}.wasm"))).unwrap();
    std::fs::write(
        tmp.path().join(format!("plugins/{name}.toml")),
        format!("name = \"{name}\"\nwasm = \"../wasm/{name}.wasm\"\n{manifest}"),
    )
    .unwrap();
    tmp
}

/// Sends `signal` (`STOP`, `CONT`) to process `pid`.
pub fn signal(pid: u32, signal: &str) {
    let ok = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("kill (procps) is needed to signal a replica")
        .success();
    assert!(ok, "kill -{signal} {pid} failed");
}

/// One request of the simulator's log.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: String,
    pub path: String,
    pub user_agent: String,
    pub at_micros: u64,
    pub status: u16,
    pub body: String,
    pub query: String,
    /// The resourceVersion the server assigned to a write it applied.
    pub written_rv: Option<u64>,
}

impl Req {
    /// The replica identity in a `wasm-informer/VERSION (IDENTITY)` agent.
    pub fn replica(&self) -> Option<&str> {
        let rest = self.user_agent.strip_prefix("wasm-informer/")?;
        let open = rest.find('(')?;
        rest[open + 1..].strip_suffix(')')
    }

    /// A write the server accepted.
    pub fn is_accepted_write(&self) -> bool {
        self.method != "GET" && (200..300).contains(&self.status)
    }
}

/// The `wasm-informer sim` process.
pub struct Sim {
    pub proc: HostProc,
    pub addr: SocketAddr,
    pub kubeconfig: PathBuf,
}

impl Sim {
    /// Starts the simulator seeded from `dir`'s `[sim]` table, in the
    /// `wasm-informer` namespace as well.
    pub fn start(dir: &Path) -> Sim {
        let kubeconfig = dir.join("kubeconfig");
        let mut proc = HostProc::spawn(&[
            "sim",
            "--listen",
            "127.0.0.1:0",
            "--kubeconfig-out",
            kubeconfig.to_str().unwrap(),
            "--config",
            dir.to_str().unwrap(),
        ]);
        let line = proc.wait_line(&["simulator at http://"], LONG);
        let url = line.split("http://").nth(1).unwrap();
        let addr: SocketAddr = url.split(';').next().unwrap().trim().parse().unwrap();
        let sim = Sim {
            proc,
            addr,
            kubeconfig,
        };
        let (code, body) = sim.create_namespace("wasm-informer");
        assert!(
            code == 201 || code == 409,
            "creating the namespace: {code} {body}"
        );
        sim
    }

    pub fn request(&self, method: &str, path: &str, json: Option<&str>) -> (u16, String) {
        let ct = if method == "PATCH" {
            "application/merge-patch+json"
        } else {
            "application/json"
        };
        http_request(self.addr, method, path, json.map(|b| (ct, b)))
    }

    /// The request log.
    pub fn requests(&self) -> Vec<Req> {
        let (code, body) = http_get(self.addr, "/_sim/requests");
        assert_eq!(code, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| Req {
                method: r["method"].as_str().unwrap_or("").into(),
                path: r["path"].as_str().unwrap_or("").into(),
                user_agent: r["userAgent"].as_str().unwrap_or("").into(),
                at_micros: r["atMicros"].as_u64().unwrap_or(0),
                status: r["status"].as_u64().unwrap_or(0) as u16,
                body: r["body"].as_str().unwrap_or("").into(),
                query: r["query"].as_str().unwrap_or("").into(),
                written_rv: r["writtenResourceVersion"].as_u64(),
            })
            .collect()
    }

    /// Creates namespace `name`.
    pub fn create_namespace(&self, name: &str) -> (u16, String) {
        self.request(
            "POST",
            "/api/v1/namespaces",
            Some(&format!(
                r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"{name}"}}}}"#
            )),
        )
    }

    /// The `items` of the list at `path`.
    pub fn items(&self, path: &str) -> Vec<Value> {
        let (code, body) = http_get(self.addr, path);
        assert_eq!(code, 200, "GET {path}: {body}");
        let mut v: Value = serde_json::from_str(&body).unwrap();
        match v["items"].take() {
            Value::Array(a) => a,
            other => panic!("GET {path}: items is {other}"),
        }
    }

    /// Every pod: key to resourceVersion.
    pub fn pods(&self) -> BTreeMap<String, String> {
        self.pod_metadata("resourceVersion")
    }

    /// Every pod: key to its `metadata.FIELD` (a string field).
    pub fn pod_metadata(&self, field: &str) -> BTreeMap<String, String> {
        self.items("/api/v1/pods")
            .iter()
            .map(|p| {
                let m = &p["metadata"];
                (
                    format!(
                        "{}/{}",
                        m["namespace"].as_str().unwrap(),
                        m["name"].as_str().unwrap()
                    ),
                    m[field].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    /// Leases in the namespace of the tests.
    pub fn leases(&self) -> Vec<Value> {
        let (_, body) = http_get(
            self.addr,
            "/apis/coordination.k8s.io/v1/namespaces/wasm-informer/leases",
        );
        let v: Value = serde_json::from_str(&body).unwrap();
        v["items"].as_array().cloned().unwrap_or_default()
    }

    /// Sets label `churn` on pod `key`.
    pub fn touch(&self, key: &str, n: u64) -> u16 {
        let (ns, name) = key.split_once('/').unwrap();
        let body = format!(r#"{{"metadata":{{"labels":{{"churn":"{n}"}}}}}}"#);
        self.request(
            "PATCH",
            &format!("/api/v1/namespaces/{ns}/pods/{name}"),
            Some(&body),
        )
        .0
    }

    /// Creates pod `ns/name`.
    pub fn create_pod(&self, ns: &str, name: &str) -> u16 {
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"{ns}","labels":{{"app":"churn"}}}},"spec":{{"containers":[{{"name":"c","image":"busybox"}}]}}}}"#
        );
        self.request(
            "POST",
            &format!("/api/v1/namespaces/{ns}/pods"),
            Some(&body),
        )
        .0
    }

    /// Deletes pod `ns/name`.
    pub fn delete_pod(&self, ns: &str, name: &str) -> u16 {
        self.request(
            "DELETE",
            &format!("/api/v1/namespaces/{ns}/pods/{name}"),
            None,
        )
        .0
    }
}

/// Churns pods through the API from a thread until stopped: label updates
/// of the seeded pods, and creates and deletes of `churn-N` pods.
pub struct Churn {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Churn {
    /// Starts churning `keys` (seeded pods) every `every`.
    pub fn start(addr: SocketAddr, keys: Vec<String>, every: Duration) -> Churn {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::spawn(move || {
            let sim = SimClient(addr);
            let mut n = 0u64;
            let mut live: Vec<String> = Vec::new();
            while !s2.load(std::sync::atomic::Ordering::SeqCst) {
                n += 1;
                // A simple LCG keeps the sequence deterministic.
                let r = n
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407)
                    >> 33;
                match n % 10 {
                    0 => {
                        let name = format!("churn-{n}");
                        if sim.create_pod("ns-0", &name) == 201 {
                            live.push(name);
                        }
                    }
                    5 if !live.is_empty() => {
                        let name = live.remove(r as usize % live.len());
                        sim.delete_pod("ns-0", &name);
                    }
                    _ => {
                        let key = &keys[r as usize % keys.len()];
                        sim.touch(key, n);
                    }
                }
                std::thread::sleep(every);
            }
            n
        });
        Churn {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops and returns the number of operations.
    pub fn stop(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap()
    }
}

struct SimClient(SocketAddr);

impl SimClient {
    fn req(&self, method: &str, path: &str, body: Option<&str>) -> u16 {
        let ct = if method == "PATCH" {
            "application/merge-patch+json"
        } else {
            "application/json"
        };
        http_request(self.0, method, path, body.map(|b| (ct, b))).0
    }
    fn touch(&self, key: &str, n: u64) -> u16 {
        let (ns, name) = key.split_once('/').unwrap();
        let body = format!(r#"{{"metadata":{{"labels":{{"churn":"{n}"}}}}}}"#);
        self.req(
            "PATCH",
            &format!("/api/v1/namespaces/{ns}/pods/{name}"),
            Some(&body),
        )
    }
    fn create_pod(&self, ns: &str, name: &str) -> u16 {
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"{ns}","labels":{{"app":"churn"}}}},"spec":{{"containers":[{{"name":"c","image":"busybox"}}]}}}}"#
        );
        self.req(
            "POST",
            &format!("/api/v1/namespaces/{ns}/pods"),
            Some(&body),
        )
    }
    fn delete_pod(&self, ns: &str, name: &str) -> u16 {
        self.req(
            "DELETE",
            &format!("/api/v1/namespaces/{ns}/pods/{name}"),
            None,
        )
    }
}

/// One event a replica's plugin logged it handled.
#[derive(Debug, Clone)]
pub struct Event {
    pub at_micros: u64,
    pub replica: String,
    pub kind: String,
    pub key: String,
    pub rv: String,
    pub initial: bool,
}

/// A `wasm-informer run` replica.
pub struct Replica {
    pub proc: HostProc,
    pub identity: String,
    pub metrics: SocketAddr,
    pub started_micros: u64,
}

impl Replica {
    /// Starts a replica of config `dir` against `sim`, as `identity`.
    pub fn start(dir: &Path, sim: &Sim, identity: &str) -> Replica {
        Replica::start_with(dir, &sim.kubeconfig, identity, &[])
    }

    /// Starts a replica of config `dir` against the API server of
    /// `kubeconfig`, as `identity`, with `env` added.
    pub fn start_with(
        dir: &Path,
        kubeconfig: &Path,
        identity: &str,
        env: &[(&str, &str)],
    ) -> Replica {
        let started_micros = now_micros();
        let mut all: Vec<(&str, &str)> = vec![("KUBECONFIG", kubeconfig.to_str().unwrap())];
        all.extend_from_slice(env);
        let mut proc = HostProc::spawn_env(
            &[
                "run",
                "--config",
                dir.to_str().unwrap(),
                "--status",
                "never",
                "--identity",
                identity,
                "--metrics-addr",
                "127.0.0.1:0",
            ],
            &all,
        );
        let metrics = proc.metrics_addr();
        Replica {
            proc,
            identity: identity.to_string(),
            metrics,
            started_micros,
        }
    }

    /// `/cluster` (with the keys delivered when `keys`), or `None` when the
    /// replica does not answer.
    pub fn cluster(&self, keys: bool) -> Option<Value> {
        let path = if keys { "/cluster?keys=1" } else { "/cluster" };
        let addr = self.metrics;
        let r = std::panic::catch_unwind(|| http_get(addr, path)).ok()?;
        (r.0 == 200)
            .then(|| serde_json::from_str(&r.1).ok())
            .flatten()
    }

    /// Whether `/readyz` answers 200.
    pub fn ready(&self) -> bool {
        let addr = self.metrics;
        std::panic::catch_unwind(|| http_get(addr, "/readyz").0 == 200).unwrap_or(false)
    }

    /// `/metrics` text, or empty when the replica does not answer.
    pub fn metrics_text(&self) -> String {
        let addr = self.metrics;
        std::panic::catch_unwind(|| http_get(addr, "/metrics").1).unwrap_or_default()
    }

    /// What its plugin logged it handled, in order.
    pub fn events(&self) -> Vec<Event> {
        events_of(&self.identity, &self.proc.log())
    }

    /// Fails the test if the plugin's log lines were rate limited (the oracle
    /// would miss events).
    pub fn assert_no_dropped_lines(&self) {
        let dropped: Vec<String> = self
            .proc
            .log()
            .into_iter()
            .filter(|l| l.contains("log rate limit"))
            .collect();
        assert!(
            dropped.is_empty(),
            "{}: plugin log lines were dropped: {dropped:?}",
            self.identity
        );
    }
}

/// Parses `event kind=K key=KEY rv=RV initial=B fsu=B` lines.
pub fn events_of(replica: &str, lines: &[String]) -> Vec<Event> {
    let mut out = Vec::new();
    for l in lines {
        let Some(i) = l.find("event kind=") else {
            continue;
        };
        let Some(at) = line_time(l) else { continue };
        let mut kv = BTreeMap::new();
        for part in l[i + "event ".len()..].split_whitespace() {
            if let Some((k, v)) = part.split_once('=') {
                kv.entry(k.to_string()).or_insert_with(|| v.to_string());
            }
        }
        out.push(Event {
            at_micros: at,
            replica: replica.to_string(),
            kind: kv.get("kind").cloned().unwrap_or_default(),
            key: kv.get("key").cloned().unwrap_or_default(),
            rv: kv.get("rv").cloned().unwrap_or_default(),
            initial: kv.get("initial").map(|v| v == "true").unwrap_or(false),
        });
    }
    out
}

/// Polls `f` every 100 ms until it holds; panics with `what` after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    loop {
        if f() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The duplicate-handling oracle over the plugins' event lines of every
/// replica that ever ran: for each key, in time order, whenever the replica
/// handling it changes, the new replica's first event must be an add (a
/// replay of a key it gained, or the creation of the object). Anything else
/// means the new replica was delivering the key while the previous one still
/// was: a duplicate handling. Returns one description per violation.
pub fn duplicate_handlings(events: &[Event]) -> Vec<String> {
    let mut by_key: BTreeMap<&str, Vec<&Event>> = BTreeMap::new();
    for e in events {
        by_key.entry(e.key.as_str()).or_default().push(e);
    }
    let mut out = Vec::new();
    for (key, mut evs) in by_key {
        evs.sort_by_key(|e| e.at_micros);
        for w in evs.windows(2) {
            let (a, b) = (w[0], w[1]);
            if a.replica != b.replica && b.kind != "added" {
                out.push(format!(
                    "{key}: {} handled {} rv={} at {} right after {} handled {} rv={} at {}",
                    b.replica, b.kind, b.rv, b.at_micros, a.replica, a.kind, a.rv, a.at_micros
                ));
            }
        }
    }
    out
}

/// Waits until every pod's final state reached a live replica's plugin, then
/// returns every event any replica, live or gone, handled (failing the test
/// if a replica's plugin lines were rate limited, which would blind the
/// oracles).
pub fn final_states_then_every_event(sim: &Sim, live: &[Replica], gone: &[Replica]) -> Vec<Event> {
    let pods = sim.pods();
    wait_until("final states at the live replicas", LONG, || {
        let evs: Vec<Event> = live.iter().flat_map(|r| r.events()).collect();
        final_state_mismatches(&pods, &evs).is_empty()
    });
    for r in live.iter().chain(gone.iter()) {
        r.assert_no_dropped_lines();
    }
    live.iter()
        .chain(gone.iter())
        .flat_map(|r| r.events())
        .collect()
}

/// Of `keys`, those no replica of `live` handled after `after_micros`.
pub fn unhandled_since<'a>(
    live: &[Replica],
    after_micros: u64,
    keys: impl IntoIterator<Item = &'a String>,
) -> Vec<&'a String> {
    let handled: BTreeSet<String> = live
        .iter()
        .flat_map(|r| r.events())
        .filter(|e| e.at_micros > after_micros)
        .map(|e| e.key)
        .collect();
    keys.into_iter().filter(|k| !handled.contains(*k)).collect()
}

/// Waits until every one of `live` is ready and a settled member of one
/// ring of `live.len()`.
pub fn wait_for_one_ring(live: &[Replica]) {
    let n = live.len();
    wait_until(&format!("{n} ready replicas in one ring"), LONG, || {
        live.iter().all(|r| {
            r.ready()
                && r.cluster(false).is_some_and(|c| {
                    c["role"] == "member"
                        && c["view"].as_array().is_some_and(|v| v.len() == n)
                        && c["in_transition"] == false
                })
        })
    });
}

/// Keys that moved: for each key, the number of times the replica handling it
/// changed.
pub fn moves(events: &[Event]) -> u64 {
    let mut by_key: BTreeMap<&str, Vec<&Event>> = BTreeMap::new();
    for e in events {
        by_key.entry(e.key.as_str()).or_default().push(e);
    }
    let mut n = 0;
    for (_, mut evs) in by_key {
        evs.sort_by_key(|e| e.at_micros);
        n += evs
            .windows(2)
            .filter(|w| w[0].replica != w[1].replica)
            .count() as u64;
    }
    n
}

/// I5 across replicas: for every object that exists, the last event any of
/// `current` replicas' plugins handled for it (in time order) carries its
/// current resourceVersion and is not a delete. Returns the mismatches.
pub fn final_state_mismatches(pods: &BTreeMap<String, String>, events: &[Event]) -> Vec<String> {
    let mut last: BTreeMap<&str, &Event> = BTreeMap::new();
    for e in events {
        match last.get(e.key.as_str()) {
            Some(p) if p.at_micros > e.at_micros => {}
            _ => {
                last.insert(e.key.as_str(), e);
            }
        }
    }
    let mut out = Vec::new();
    for (key, rv) in pods {
        match last.get(key.as_str()) {
            None => out.push(format!("{key}: no replica's plugin ever saw it")),
            Some(e) if e.kind == "deleted" => {
                out.push(format!("{key}: last seen as deleted by {}", e.replica))
            }
            Some(e) if &e.rv != rv => out.push(format!(
                "{key}: last seen at rv {} by {}, the store has {rv}",
                e.rv, e.replica
            )),
            _ => {}
        }
    }
    out
}

/// A set of `/cluster?keys=1` answers that held at one moment.
#[derive(Debug, Default)]
pub struct Cut {
    /// Identity to the `v1/pods` keys it delivers.
    pub owned: BTreeMap<String, BTreeSet<String>>,
    /// Every replica is settled on the same view, which is the live set.
    pub settled: bool,
}

/// Samples `/cluster?keys=1` of `live` replicas. The answers form a
/// consistent cut (they all held at the moment the first request was sent)
/// when no replica was in a transition and none changed what it delivers
/// since that moment; otherwise `None`.
pub fn consistent_cut(live: &[&Replica]) -> Option<Cut> {
    let t1_ms = now_micros() / 1000;
    let mut cut = Cut::default();
    let mut views = BTreeSet::new();
    let mut names = BTreeSet::new();
    for r in live {
        let c = r.cluster(true)?;
        if c["in_transition"].as_bool() != Some(false) {
            return None;
        }
        if c["changed_at_unix_ms"].as_u64().unwrap_or(u64::MAX) >= t1_ms {
            return None;
        }
        if c["role"] != "member" {
            return None;
        }
        let keys: BTreeSet<String> = c["owned_keys"]["v1/pods"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|k| k.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let view: Vec<String> = c["view"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|k| k.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        views.insert(view.join(","));
        names.insert(c["lease"].as_str().unwrap_or("").to_string());
        cut.owned.insert(r.identity.clone(), keys);
    }
    let live_view: Vec<String> = names.into_iter().collect();
    cut.settled = views.len() == 1 && views.iter().next() == Some(&live_view.join(","));
    Some(cut)
}

/// Keys delivered by more than one replica in a cut.
pub fn doubly_owned(cut: &Cut) -> Vec<String> {
    let mut count: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (r, keys) in &cut.owned {
        for k in keys {
            count.entry(k.as_str()).or_default().push(r.as_str());
        }
    }
    count
        .into_iter()
        .filter(|(_, rs)| rs.len() > 1)
        .map(|(k, rs)| format!("{k}: {rs:?}"))
        .collect()
}

/// Keys of `stable` that no replica of the cut delivers.
pub fn unowned<'a>(cut: &Cut, stable: &'a [String]) -> Vec<&'a String> {
    stable
        .iter()
        .filter(|k| !cut.owned.values().any(|s| s.contains(*k)))
        .collect()
}

/// What the sampler has seen.
#[derive(Debug, Default)]
pub struct Sampling {
    pub samples: u64,
    pub consistent: u64,
    pub settled: u64,
    /// Keys delivered by two replicas in one consistent cut.
    pub doubly: Vec<String>,
    /// Settled cuts in which a stable key had no owner.
    pub uncovered: Vec<String>,
}

impl Sampling {
    /// Samples once; returns the cut when consistent.
    pub fn sample(&mut self, live: &[&Replica], stable: &[String]) -> Option<Cut> {
        self.samples += 1;
        let cut = consistent_cut(live)?;
        self.consistent += 1;
        self.doubly.extend(doubly_owned(&cut));
        if cut.settled && cut.owned.len() == live.len() {
            self.settled += 1;
            let missing = unowned(&cut, stable);
            if !missing.is_empty() {
                self.uncovered.push(format!(
                    "{} keys unowned, e.g. {}",
                    missing.len(),
                    missing[0]
                ));
            }
        }
        Some(cut)
    }

    /// Samples until every live replica is settled on the live set with
    /// every stable key owned; returns the time it took.
    pub fn until_settled(
        &mut self,
        live: &[&Replica],
        stable: &[String],
        timeout: Duration,
    ) -> Duration {
        let start = Instant::now();
        loop {
            if let Some(cut) = self.sample(live, stable) {
                if cut.settled && cut.owned.len() == live.len() && unowned(&cut, stable).is_empty()
                {
                    return start.elapsed();
                }
            }
            assert!(
                start.elapsed() < timeout,
                "replicas {:?} did not settle within {timeout:?}",
                live.iter().map(|r| &r.identity).collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The holder of the election Lease at `path` after each write the server
/// applied, in resourceVersion order: (resourceVersion, holder), the holder
/// empty after a release. Taken from the request bodies of the accepted
/// writes and ordered by the resourceVersions the server assigned, so it is
/// the Lease history as the server stored it.
pub fn lease_history(reqs: &[Req], path: &str) -> Vec<(u64, String)> {
    let (collection, name) = path.rsplit_once('/').unwrap();
    let mut out: Vec<(u64, String)> = reqs
        .iter()
        .filter(|r| r.is_accepted_write())
        .filter_map(|r| {
            let rv = r.written_rv?;
            let body: Value = serde_json::from_str(&r.body).ok()?;
            let creates =
                r.method == "POST" && r.path == collection && body["metadata"]["name"] == name;
            if r.path != path && !creates {
                return None;
            }
            let holder = body["spec"]["holderIdentity"].as_str().unwrap_or("");
            Some((rv, holder.to_string()))
        })
        .collect();
    out.sort();
    out
}
