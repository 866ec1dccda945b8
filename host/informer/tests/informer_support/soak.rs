//! The I5 + I8 convergence scenario, shared by the CI test (fixed seed) and the
//! soak example (seed from the command line): random churn, random API faults,
//! a fast recording listener and a slow one that overflows; at the end the
//! cache and both reconstructed views must equal the server's state exactly,
//! as a fresh list through kube-client (and the simulator's store) shows it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use apisim::workload::{Workload, WorkloadConfig};
use apisim::{Sim, SimConfig};
use kube_informer::informer::InformerStatsSnapshot;
use kube_informer::listener::ListenerStatsSnapshot;
use kube_informer::HandlerOptions;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{cache_state, fast_reflector, pods_informer, server_pods, ViewRecorder};

/// Scenario size.
#[derive(Debug, Clone)]
pub struct SoakConfig {
    /// Seed for the workload, the faults and the Reflector's jitter.
    pub seed: u64,
    /// Pods at the start.
    pub pods: usize,
    /// How long churn and faults run.
    pub duration: Duration,
    /// Churn operations per second.
    pub rate: f64,
    /// Capacity of the slow listener's queue.
    pub slow_capacity: usize,
    /// Time the slow listener spends per event.
    pub slow_delay: Duration,
    /// Use streaming lists (else paged lists, where continue tokens can expire).
    pub streaming: bool,
}

/// What happened.
#[derive(Debug)]
pub struct SoakReport {
    pub seed: u64,
    pub churn_ops: u64,
    pub faults: BTreeMap<&'static str, u64>,
    pub objects: usize,
    pub informer: InformerStatsSnapshot,
    pub fast: ListenerStatsSnapshot,
    pub slow: ListenerStatsSnapshot,
    pub converged_in: Duration,
}

fn diff(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> String {
    let missing: Vec<_> = b.keys().filter(|k| !a.contains_key(*k)).take(5).collect();
    let extra: Vec<_> = a.keys().filter(|k| !b.contains_key(*k)).take(5).collect();
    let stale: Vec<_> = a
        .iter()
        .filter(|(k, v)| b.get(*k).is_some_and(|w| w != *v))
        .take(5)
        .collect();
    format!(
        "{} vs {} objects; missing {missing:?}; phantoms {extra:?}; stale {stale:?}",
        a.len(),
        b.len()
    )
}

async fn wait_equal(
    what: &str,
    limit: Duration,
    mut got: impl FnMut() -> BTreeMap<String, u64>,
    want: &BTreeMap<String, u64>,
) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    loop {
        let g = got();
        if &g == want {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{what} did not converge: {}", diff(&g, want)));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// key -> resourceVersion of every pod, from a fresh list through kube-client.
async fn fresh_list(sim: &apisim::RunningSim) -> BTreeMap<String, u64> {
    use k8s_openapi::api::core::v1::Pod;
    let api: kube::Api<Pod> = kube::Api::all(super::client(sim).await);
    api.list(&kube::api::ListParams::default())
        .await
        .expect("list pods")
        .items
        .iter()
        .map(|p| {
            (
                format!(
                    "{}/{}",
                    p.metadata.namespace.as_deref().unwrap_or_default(),
                    p.metadata.name.as_deref().unwrap_or_default()
                ),
                p.metadata
                    .resource_version
                    .as_deref()
                    .unwrap_or_default()
                    .parse()
                    .unwrap_or(0),
            )
        })
        .collect()
}

/// Runs the scenario; `Err` describes the first divergence.
pub async fn run(cfg: SoakConfig) -> Result<SoakReport, String> {
    let sim = Sim::new(SimConfig {
        bookmark_interval: Duration::from_millis(500),
        ..SimConfig::default()
    });
    let wl = Workload::seed(
        sim.store().clone(),
        WorkloadConfig::new(cfg.pods, 4, cfg.seed),
    )
    .map_err(|e| format!("seeding: {e:?}"))?;
    let sim = sim
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .map_err(|e| e.to_string())?;
    let mut reflector = fast_reflector(cfg.seed);
    if !cfg.streaming {
        reflector.streaming_list = kube_informer::reflector::StreamingList::Off;
        // Small pages so relists span several continue tokens.
        reflector.page_size = 100;
    }
    let inf = pods_informer(&sim, reflector).await;
    let (fast_h, fast_view) = ViewRecorder::new(None);
    let (mut slow_h, slow_view) = ViewRecorder::new(Some(cfg.slow_delay));
    slow_h.keep_log = false;
    let mut fast_h = fast_h;
    fast_h.keep_log = false;
    let fast = inf
        .add_handler(
            fast_h,
            HandlerOptions {
                name: "fast".into(),
                queue_capacity: 1 << 20,
                ..HandlerOptions::default()
            },
        )
        .map_err(|e| e.to_string())?;
    let slow = inf
        .add_handler(
            slow_h,
            HandlerOptions {
                name: "slow".into(),
                queue_capacity: cfg.slow_capacity,
                ..HandlerOptions::default()
            },
        )
        .map_err(|e| e.to_string())?;
    if !inf.wait_synced(Duration::from_secs(60)).await {
        return Err("informer never synced".into());
    }

    let churn = wl.churn(cfg.rate);
    let mut rng = StdRng::seed_from_u64(cfg.seed ^ 0x5eed);
    let mut faults: BTreeMap<&'static str, u64> = BTreeMap::new();
    let end = Instant::now() + cfg.duration;
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(rng.random_range(50..400))).await;
        let f = sim.faults();
        let name = match rng.random_range(0..7) {
            0 => {
                f.drop_watches();
                "drop_watches"
            }
            1 => {
                f.compact();
                f.drop_watches();
                "compact+drop (410)"
            }
            2 => {
                f.fail_next_500(rng.random_range(1..4));
                f.drop_watches();
                "500s"
            }
            3 => {
                f.fail_next_429(1, 1);
                f.drop_watches();
                "429"
            }
            4 => {
                f.cut_next_watch_event();
                "truncated line"
            }
            5 => {
                f.expire_continue_tokens();
                "expire continue"
            }
            _ => {
                f.compact();
                "compact"
            }
        };
        *faults.entry(name).or_default() += 1;
    }
    let churn_ops = churn.ops();
    churn.stop().await;
    sim.faults().reset();
    let t0 = Instant::now();
    // What a client lists from the server now (and the server's own store,
    // which must agree) is what every view must end with.
    let want = fresh_list(&sim).await;
    let stored = server_pods(&sim);
    if stored != want {
        return Err(format!(
            "a fresh list differs from the simulator's store: {}",
            diff(&want, &stored)
        ));
    }
    wait_equal(
        "cache",
        Duration::from_secs(120),
        || cache_state(inf.indexer()),
        &want,
    )
    .await?;
    wait_equal(
        "fast listener",
        Duration::from_secs(120),
        || fast_view.lock().state.clone(),
        &want,
    )
    .await?;
    wait_equal(
        "slow listener",
        Duration::from_secs(300),
        || slow_view.lock().state.clone(),
        &want,
    )
    .await?;
    let converged_in = t0.elapsed();
    for (name, v) in [("fast", &fast_view), ("slow", &slow_view)] {
        let a = &v.lock().anomalies;
        if !a.is_empty() {
            return Err(format!(
                "{name} listener anomalies: {:?}",
                &a[..a.len().min(5)]
            ));
        }
    }
    let report = SoakReport {
        seed: cfg.seed,
        churn_ops,
        faults,
        objects: want.len(),
        informer: inf.stats(),
        fast: fast.stats().snapshot(),
        slow: slow.stats().snapshot(),
        converged_in,
    };
    drop(fast);
    drop(slow);
    inf.stop();
    sim.shutdown().await;
    Ok(report)
}
