//! B13: sharding at the source (ours only). The same pods and churn served
//! to one `wasm-informer run` replica holding everything, and to four
//! replicas in one ring with `shard_by = "uid"`; each replica is a process
//! of its own, the real binary with its Lease membership, running the Rust
//! no-op plugin on `v1/pods`. Per replica: the resident set at the end and
//! its peak (`VmRSS`, `VmHWM` from `/proc/PID/status`), the response bytes
//! its informer received (its `/metrics`), and its CPU time during the churn
//! (`/proc/PID/stat`); the time for a fourth replica to be serving its shard
//! once three are; and the cached keys it gained, against the 1/N consistent
//! hashing promises. A third arm repeats the four replicas on a server that
//! ignores `shardSelector`, where each replica filters what it receives.
//!
//! Invariant: a replica counts as serving only when the ring agrees on every
//! member, it delivers a non-empty share, and its cache covers every range it
//! asks for; the four shares must add up to the whole ring.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use parking_lot::Mutex;

use super::{Bench, Ctx};
use crate::fixture::Fixture;
use crate::rounds::{self, Arm};
use crate::stats::{show, show_in, Spread};
use crate::table::{bytes, Row, Verdict};
use crate::target::Target;

/// The registry entry.
pub const BENCH: Bench = Bench {
    id: "B13",
    title: "sharded at the source",
    target: "each of 4 replicas <= 0.3x the single replica's RSS, bytes received and CPU per event",
    doc: DOC,
    run,
};

const DOC: &str = "\
Ours only: the release `wasm-informer` binary, each replica a process of its own, against one \
simulator that serves server-side sharded list and watch (KEP-5866). One replica in a ring of \
its own holds everything (it owns the whole space and lists with no selector); four replicas \
in one ring with `shard_by = \"uid\"` each list, watch and cache their ranges. Every replica \
runs the Rust no-op plugin on `v1/pods` (managedFields stripped, the host's defaults), with \
Leases of 3 s / 2 s / 0.5 s. The three replicas start first; the time to serve is from the \
fourth's spawn until every member agrees on the four-member ring, the fourth delivers a share \
and its cache covers its ranges. Then status, create and delete churn at a fixed rate; CPU is \
each replica's user + system time during the churn (from `/proc/PID/stat`), bytes are the \
response bytes its informers received during the churn (the watch traffic: \
`wasm_informer_informer_bytes_received_total` read before and after it) and, for the fourth \
replica, all it received from its start (its ranges' list and the watch), RSS is `VmRSS` \
after the churn and the peak `VmHWM`. A third arm runs the four \
replicas against a simulator that ignores `shardSelector`: each replica still caches only its \
shard, but receives everything. Ratios are each replica's figure over the single replica's in \
the same round; the row shows the largest of the four.";

/// What one replica measured.
#[derive(Debug, Clone, Default)]
struct Figures {
    rss: f64,
    peak: f64,
    /// All response bytes, the initial list included.
    bytes: f64,
    /// Response bytes during the churn (the watch traffic).
    churn_bytes: f64,
    cpu_secs: f64,
    objects: f64,
}

/// One arm's round.
#[derive(Debug, Clone, Default)]
struct Sample {
    replicas: Vec<Figures>,
    /// The fourth replica: spawn to serving, s.
    join_secs: f64,
    /// Share of the pods whose delivering replica changed when the fourth
    /// joined.
    moved: f64,
    /// Of those, pods that moved between two of the first three replicas.
    moved_between_old: f64,
    events: f64,
}

/// The `wasm-informer` binary beside the bench's own (the same profile),
/// or `WASM_INFORMER_BIN`.
fn host_binary() -> Result<PathBuf> {
    if let Ok(p) = std::env::var("WASM_INFORMER_BIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("locating the bench binary")?;
    let dirs = exe.ancestors().skip(1).take(2);
    for d in dirs {
        let p = d.join("wasm-informer");
        if p.is_file() {
            return Ok(p);
        }
    }
    bail!(
        "B13 runs the host binary, which is missing beside {}: build it with `cargo build --release -p wasm-informer` (or set WASM_INFORMER_BIN)",
        exe.display()
    )
}

/// One `wasm-informer run` process.
struct Replica {
    child: Child,
    metrics: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
}

impl Replica {
    fn spawn(bin: &Path, dir: &Path, kubeconfig: &Path, identity: &str) -> Result<Replica> {
        let mut child = Command::new(bin)
            .args(["run", "--config"])
            .arg(dir)
            .args([
                "--status",
                "never",
                "--identity",
                identity,
                "--metrics-addr",
                "127.0.0.1:0",
            ])
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let stderr = child.stderr.take().context("the replica's stderr")?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let l2 = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("metrics at http://").nth(1) {
                    let addr = rest.split('/').next().unwrap_or("").to_string();
                    let _ = tx.send(addr);
                }
                let mut l = l2.lock();
                if l.len() < 2000 {
                    l.push(line);
                }
            }
        });
        let addr = rx.recv_timeout(Duration::from_secs(60)).with_context(|| {
            format!(
                "{identity} printed no metrics address: {}",
                log.lock().join("\n")
            )
        })?;
        Ok(Replica {
            child,
            metrics: addr.parse().context("the metrics address")?,
            log,
        })
    }

    fn get(&self, path: &str) -> Result<String> {
        let mut s = TcpStream::connect_timeout(&self.metrics, Duration::from_secs(5))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(
            s,
            "GET {path} HTTP/1.0\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.metrics
        )?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        let body = out
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        anyhow::ensure!(
            out.starts_with("HTTP/1.1 200") || out.starts_with("HTTP/1.0 200"),
            "GET {path}: {}",
            out.lines().next().unwrap_or("")
        );
        Ok(body)
    }

    fn cluster(&self) -> Option<serde_json::Value> {
        serde_json::from_str(&self.get("/cluster").ok()?).ok()
    }

    /// The pods it delivers now.
    fn owned_pods(&self) -> Result<Vec<String>> {
        let c: serde_json::Value = serde_json::from_str(&self.get("/cluster?keys=1")?)?;
        Ok(c["owned_keys"]["v1/pods"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|k| k.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default())
    }

    /// The sum of the samples of `name` (a counter or gauge with any labels).
    fn metric(&self, name: &str) -> Result<f64> {
        let text = self.get("/metrics")?;
        Ok(text
            .lines()
            .filter(|l| l.starts_with(name) && !l.starts_with('#'))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum())
    }

    fn status_kb(&self, key: &str) -> Result<f64> {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        let line = s
            .lines()
            .find(|l| l.starts_with(key))
            .with_context(|| format!("{key} in /proc/PID/status"))?;
        let kb: f64 = line.split_whitespace().nth(1).context("a value")?.parse()?;
        Ok(kb * 1024.0)
    }

    /// User + system CPU time so far, in seconds.
    fn cpu_secs(&self) -> Result<f64> {
        let s = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))?;
        // Fields after the command name (which may hold spaces) start at 3.
        let rest = s.rsplit_once(')').context("/proc/PID/stat")?.1;
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks: f64 = f[11].parse::<f64>()? + f[12].parse::<f64>()?;
        // USER_HZ is 100 on Linux.
        Ok(ticks / 100.0)
    }

    fn bytes(&self) -> Result<f64> {
        self.metric("wasm_informer_informer_bytes_received_total")
    }

    fn figures(&self, (cpu_before, bytes_before): (f64, f64)) -> Result<Figures> {
        let c = self.cluster().context("/cluster")?;
        let bytes = self.bytes()?;
        Ok(Figures {
            rss: self.status_kb("VmRSS:")?,
            peak: self.status_kb("VmHWM:")?,
            bytes,
            churn_bytes: bytes - bytes_before,
            cpu_secs: self.cpu_secs()? - cpu_before,
            objects: c["caches"]["v1/pods"]["objects"].as_f64().unwrap_or(0.0),
        })
    }

    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let until = Instant::now() + Duration::from_secs(15);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `live` form one ring of `live.len()` members, each
/// delivering a share whose ranges its pods cache covers, the shares adding
/// up to the whole ring.
fn wait_serving(live: &[Replica], timeout: Duration) -> Result<Duration> {
    let t = Instant::now();
    loop {
        let views: Option<Vec<serde_json::Value>> = live.iter().map(Replica::cluster).collect();
        if let Some(vs) = views {
            let all = vs.iter().all(|c| {
                let pods = &c["caches"]["v1/pods"];
                let covered = match pods.get("source") {
                    Some(s) if !s.is_null() => {
                        s["covered_fraction"].as_f64() == s["target_fraction"].as_f64()
                    }
                    _ => true,
                };
                c["role"] == "member"
                    && c["in_transition"] == false
                    && c["view"].as_array().map(Vec::len) == Some(live.len())
                    && c["owned_fraction"].as_f64().unwrap_or(0.0) > 0.0
                    && covered
            });
            let total: f64 = vs
                .iter()
                .map(|c| c["owned_fraction"].as_f64().unwrap_or(0.0))
                .sum();
            if all && (total - 1.0).abs() < 1e-6 {
                return Ok(t.elapsed());
            }
        }
        if t.elapsed() > timeout {
            let last: Vec<String> = live
                .iter()
                .map(|r| {
                    format!(
                        "{:?} / {}",
                        r.cluster(),
                        r.log
                            .lock()
                            .iter()
                            .rev()
                            .take(5)
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(" | ")
                    )
                })
                .collect();
            bail!(
                "the ring of {} did not settle in {timeout:?}: {last:#?}",
                live.len()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A config directory: the cluster table, the no-op plugin on pods.
fn config_dir(root: &Path, cache: &Path) -> Result<PathBuf> {
    let dir = root.join("config");
    std::fs::create_dir_all(dir.join("plugins"))?;
    std::fs::write(
        dir.join("host.toml"),
        format!(
            "metrics_addr = \"127.0.0.1:0\"\ncache_dir = \"{}\"\nshutdown_grace_ms = 2000\n\n\
             [cluster]\nmode = \"sharded\"\nnamespace = \"wasm-informer\"\nshard_by = \"uid\"\n\
             lease_duration_ms = 3000\nrenew_deadline_ms = 2000\nretry_period_ms = 500\nclock_skew_margin_ms = 500\n",
            cache.display()
        ),
    )?;
    let noop = crate::wasm::plugin_path("noop")?;
    std::fs::write(
        dir.join("plugins/noop.toml"),
        format!("name = \"noop\"\nwasm = \"{noop}\"\nresources = [\"v1/pods\"]\n"),
    )?;
    Ok(dir)
}

/// One round of one arm: `n` replicas (the last one joining the others).
fn one(ctx: &Ctx, fx: &Fixture, bin: &Path, n: usize, tag: &str) -> Result<Sample> {
    let p = &ctx.plan;
    let tmp = tempfile::tempdir()?;
    let kubeconfig = tmp.path().join("kubeconfig");
    fx.write_kubeconfig(&kubeconfig)?;
    let cache = std::env::temp_dir().join("wasm-informer-bench-b13-cache");
    std::fs::create_dir_all(&cache)?;
    let dir = config_dir(tmp.path(), &cache)?;
    let settle = Duration::from_secs(300);
    let mut live = Vec::new();
    let first = n.saturating_sub(1).max(1);
    for i in 0..first {
        live.push(Replica::spawn(
            bin,
            &dir,
            &kubeconfig,
            &format!("{tag}-{i}"),
        )?);
    }
    wait_serving(&live, settle)?;
    let (mut join_secs, mut moved, mut moved_between_old) = (0.0, 0.0, 0.0);
    if n > first {
        let owners = |live: &[Replica]| -> Result<std::collections::HashMap<String, usize>> {
            let mut m = std::collections::HashMap::new();
            for (i, r) in live.iter().enumerate() {
                for k in r.owned_pods()? {
                    m.insert(k, i);
                }
            }
            Ok(m)
        };
        let old = owners(&live)?;
        let t = Instant::now();
        live.push(Replica::spawn(
            bin,
            &dir,
            &kubeconfig,
            &format!("{tag}-{first}"),
        )?);
        wait_serving(&live, settle)?;
        join_secs = t.elapsed().as_secs_f64();
        let new = owners(&live)?;
        let total = old.len().max(1) as f64;
        let changed: Vec<(&String, &usize)> = old
            .iter()
            .filter(|(k, i)| new.get(*k).is_some_and(|j| j != *i))
            .collect();
        moved = changed.len() as f64 / total;
        moved_between_old = changed.iter().filter(|(k, _)| new[*k] != first).count() as f64 / total;
    }
    let before: Vec<(f64, f64)> = live
        .iter()
        .map(|r| Ok((r.cpu_secs()?, r.bytes()?)))
        .collect::<Result<_>>()?;
    let rv0 = fx.current_rv();
    fx.paced(p.b13_rate, Duration::from_secs(p.b13_secs), false)
        .join()
        .map_err(|_| anyhow::anyhow!("churn thread panicked"))??;
    let events = (fx.current_rv() - rv0) as f64;
    // Every replica has applied the churn to its cache.
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let cached: f64 = live
            .iter()
            .filter_map(|r| r.cluster())
            .map(|c| c["caches"]["v1/pods"]["objects"].as_f64().unwrap_or(0.0))
            .sum();
        if (cached - fx.pods() as f64).abs() < 0.5 {
            break;
        }
        anyhow::ensure!(
            Instant::now() < until,
            "the caches hold {cached} pods, the server {}",
            fx.pods()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let replicas = live
        .iter()
        .zip(&before)
        .map(|(r, b)| r.figures(*b))
        .collect::<Result<Vec<_>>>()?;
    for r in live {
        r.stop();
    }
    Ok(Sample {
        replicas,
        join_secs,
        moved,
        moved_between_old,
        events,
    })
}

/// The largest of the replicas' ratios to the single replica, per round.
fn worst(s4: &[Sample], s1: &[Sample], f: fn(&Figures) -> f64) -> Vec<f64> {
    s4.iter()
        .zip(s1)
        .map(|(four, one)| {
            let base = f(&one.replicas[0]);
            four.replicas
                .iter()
                .map(|r| f(r) / base)
                .fold(0.0, f64::max)
        })
        .collect()
}

/// Runs B13.
pub fn run(ctx: &Ctx) -> Result<Vec<Row>> {
    let p = &ctx.plan;
    let bin = host_binary()?;
    let fx = Fixture::sharded(&ctx.rt, p.b13_pods, true)?;
    let arms = [
        Arm {
            name: "one replica",
            it: 1usize,
        },
        Arm {
            name: "four replicas",
            it: 4usize,
        },
    ];
    let s = rounds::run("B13", p.rounds, &arms, |a| {
        one(ctx, &fx, &bin, a.it, &format!("r{}", a.it))
    });
    fx.shutdown(&ctx.rt);
    let s = s?;
    // The same four on a server that ignores the selector.
    let fx = Fixture::sharded(&ctx.rt, p.b13_pods, false)?;
    let client = rounds::run(
        "B13",
        p.rounds,
        &[Arm {
            name: "four replicas, server ignores shardSelector",
            it: 4usize,
        }],
        |a| one(ctx, &fx, &bin, a.it, "c4"),
    );
    fx.shutdown(&ctx.rt);
    let client = client?;
    let (one_s, four_s) = (s.of("one replica"), s.of("four replicas"));
    let client_s = client.of("four replicas, server ignores shardSelector");
    let per_event = |x: &Figures, events: f64| x.cpu_secs / events;
    let cpu_ratio: Vec<f64> = four_s
        .iter()
        .zip(one_s)
        .map(|(four, one)| {
            let base = per_event(&one.replicas[0], one.events);
            four.replicas
                .iter()
                .map(|r| per_event(r, four.events) / base)
                .fold(0.0, f64::max)
        })
        .collect();
    let rss = worst(four_s, one_s, |x| x.rss);
    let peak = worst(four_s, one_s, |x| x.peak);
    let bytes_r = worst(four_s, one_s, |x| x.churn_bytes);
    let c_bytes = worst(client_s, one_s, |x| x.churn_bytes);
    // The replica that joined a running ring listed only its ranges.
    let joiner = |f: fn(&Figures) -> f64| {
        four_s
            .iter()
            .zip(one_s)
            .map(|(four, one)| f(&four.replicas[3]) / f(&one.replicas[0]))
            .collect::<Vec<f64>>()
    };
    let joiner_bytes = joiner(|x| x.bytes);
    let joiner_rss = joiner(|x| x.rss);
    let c_rss = worst(client_s, one_s, |x| x.rss);
    let single = |f: fn(&Figures) -> f64| {
        one_s
            .iter()
            .map(|x| f(&x.replicas[0]))
            .collect::<Vec<f64>>()
    };
    let four_max = |f: fn(&Figures) -> f64| {
        four_s
            .iter()
            .map(|x| x.replicas.iter().map(f).fold(0.0, f64::max))
            .collect::<Vec<f64>>()
    };
    let join: Vec<f64> = four_s.iter().map(|x| x.join_secs).collect();
    let moved: Vec<f64> = four_s.iter().map(|x| x.moved).collect();
    let moved_old: Vec<f64> = four_s.iter().map(|x| x.moved_between_old).collect();
    let objects_share: Vec<f64> = four_s
        .iter()
        .map(|x| {
            let total: f64 = x.replicas.iter().map(|r| r.objects).sum();
            x.replicas.iter().map(|r| r.objects).fold(0.0, f64::max) / total
        })
        .collect();
    let times = |xs: &[f64]| show(xs, |v| format!("{v:.2}x"));
    let judge = |xs: &[f64]| Target::AtMost(0.3).judge(Spread::of(xs).as_ref());
    let what = format!(
        "{} pods, {} events/s for {} s, Rust no-op plugin",
        p.b13_pods, p.b13_rate, p.b13_secs
    );
    let rows = vec![
        Row {
            id: "B13",
            what: format!("RSS per replica, 4 replicas vs 1 ({what})"),
            ours: format!(
                "largest of 4: RSS {} (peak {}); one replica: RSS {} (peak {})",
                show(&four_max(|x| x.rss), bytes),
                show(&four_max(|x| x.peak), bytes),
                show(&single(|x| x.rss), bytes),
                show(&single(|x| x.peak), bytes)
            ),
            peer: "-".into(),
            ratio: format!(
                "RSS {}, peak {}; the replica that joined the running ring: RSS {}",
                times(&rss),
                times(&peak),
                times(&joiner_rss)
            ),
            target: "<= 0.3x".into(),
            verdict: judge(&rss),
            note: format!(
                "largest replica's share of the cached pods {}. The first three start together; one that starts alone owns everything until the others' Leases appear, so it lists the whole resource once, then evicts down to its share",
                show(&objects_share, |v| format!("{:.0}%", v * 100.0))
            ),
        },
        Row {
            id: "B13",
            what: "bytes received per replica: the watch during the churn".into(),
            ours: format!(
                "largest of 4: {}; one replica: {}",
                show(&four_max(|x| x.churn_bytes), bytes),
                show(&single(|x| x.churn_bytes), bytes)
            ),
            peer: "-".into(),
            ratio: format!(
                "{}; the joining replica's bytes from its start (its ranges' list and watch): {}",
                times(&bytes_r),
                times(&joiner_bytes)
            ),
            target: "<= 0.3x".into(),
            verdict: judge(&bytes_r),
            note: "wasm_informer_informer_bytes_received_total of each replica, read before and after the churn".into(),
        },
        Row {
            id: "B13",
            what: "CPU per churn event per replica".into(),
            ours: format!(
                "largest of 4: {} CPU s; one replica: {} CPU s",
                show(&four_max(|x| x.cpu_secs), |v| format!("{v:.2}")),
                show(&single(|x| x.cpu_secs), |v| format!("{v:.2}"))
            ),
            peer: "-".into(),
            ratio: times(&cpu_ratio),
            target: "<= 0.3x".into(),
            verdict: judge(&cpu_ratio),
            note: "user + system time during the churn, over the events written".into(),
        },
        Row {
            id: "B13",
            what: "a fourth replica joins three: spawn to serving its shard".into(),
            ours: show_in(&join, 1, "s"),
            peer: "-".into(),
            ratio: format!(
                "pods whose replica changed: {} (1/N = 25%), of which between two of the first three: {}",
                show(&moved, |v| format!("{:.1}%", v * 100.0)),
                show(&moved_old, |v| format!("{:.1}%", v * 100.0))
            ),
            target: "-".into(),
            verdict: Verdict::Info,
            note: "serving: one ring of four agreed by all, its share delivered and its ranges covered; 3 s leases".into(),
        },
        Row {
            id: "B13",
            what: "four replicas, server ignores shardSelector (client-side filter)".into(),
            ours: format!(
                "largest of 4: bytes {}, RSS {}",
                show(
                    &client_s
                        .iter()
                        .map(|x| x.replicas.iter().map(|r| r.churn_bytes).fold(0.0, f64::max))
                        .collect::<Vec<_>>(),
                    bytes
                ),
                show(
                    &client_s
                        .iter()
                        .map(|x| x.replicas.iter().map(|r| r.rss).fold(0.0, f64::max))
                        .collect::<Vec<_>>(),
                    bytes
                )
            ),
            peer: "-".into(),
            ratio: format!("bytes {}, RSS {}", times(&c_bytes), times(&c_rss)),
            target: "RSS <= 0.3x (bytes do not split)".into(),
            verdict: judge(&c_rss),
            note: "against the single replica of the gated server's rounds".into(),
        },
    ];
    Ok(rows)
}
