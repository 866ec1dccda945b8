//! The simulator both sides run against: one apisim instance seeded with the
//! deterministic workload, plus the two ways a benchmark writes to it: a held
//! burst (writes queue up while the watch reconnect is held, then drain at full
//! speed) and paced churn at a fixed rate.
//!
//! Invariant: both sides of a benchmark see the same instance and the same
//! objects; every write is one watch event (one create, status update or delete).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use apisim::workload::{Workload, WorkloadConfig};
use apisim::{Faults, RequestLog, RequestRecord, RunningSim, Sim, SimConfig, Store};
use parking_lot::Mutex;

use crate::probe::now_ns;

/// Which writes churn makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    /// 25% creates, 50% status updates, 25% deletes (the workload default).
    Default,
    /// Status updates only.
    UpdatesOnly,
}

/// A running simulator and its workload.
pub struct Fixture {
    store: Arc<Store>,
    faults: Faults,
    log: RequestLog,
    url: String,
    sim: RunningSim,
    workload: Arc<Mutex<Workload>>,
    hold: Duration,
}

impl Fixture {
    /// Seeds `pods` pods over 10 namespaces and starts serving on 127.0.0.1.
    pub fn new(rt: &tokio::runtime::Runtime, pods: usize, mix: Mix) -> Result<Self> {
        let mut wc = WorkloadConfig::new(pods, 10, 7);
        if mix == Mix::UpdatesOnly {
            wc.create_weight = 0;
            wc.delete_weight = 0;
        }
        Self::seeded(rt, wc)
    }

    /// Seeds `deployments` Deployments (and no pods) over 10 namespaces and
    /// starts serving on 127.0.0.1.
    pub fn with_deployments(rt: &tokio::runtime::Runtime, deployments: usize) -> Result<Self> {
        Self::seeded(
            rt,
            WorkloadConfig::new(0, 10, 7).with_deployments(deployments, 0.25),
        )
    }

    /// Seeds `pods` pods over 10 namespaces on a simulator that serves
    /// sharded list and watch (KEP-5866) when `sharding`, and ignores
    /// `shardSelector` as an older server does when not; a namespace
    /// `wasm-informer` holds the replicas' Leases.
    pub fn sharded(rt: &tokio::runtime::Runtime, pods: usize, sharding: bool) -> Result<Self> {
        let fx = Self::seeded_with(rt, WorkloadConfig::new(pods, 10, 7), sharding)?;
        fx.store
            .create_namespace("wasm-informer")
            .map_err(|e| anyhow::anyhow!("creating the Lease namespace: {}", e.message))?;
        Ok(fx)
    }

    /// Writes a kubeconfig for this simulator to `path`.
    pub fn write_kubeconfig(&self, path: &std::path::Path) -> Result<()> {
        self.sim.write_kubeconfig(path)
    }

    fn seeded(rt: &tokio::runtime::Runtime, wc: WorkloadConfig) -> Result<Self> {
        Self::seeded_with(rt, wc, false)
    }

    fn seeded_with(
        rt: &tokio::runtime::Runtime,
        wc: WorkloadConfig,
        sharding: bool,
    ) -> Result<Self> {
        let sim = Sim::new(SimConfig {
            history_window: 400_000,
            sharded_list_and_watch: sharding,
            ..SimConfig::default()
        });
        let what = format!("{} pods and {} deployments", wc.pods, wc.deployments);
        let workload = Workload::seed(sim.store().clone(), wc)
            .map_err(|e| anyhow::anyhow!("seeding {what}: {}", e.message))?;
        let sim = rt
            .block_on(sim.start("127.0.0.1:0".parse()?))
            .context("starting the simulator on 127.0.0.1")?;
        Ok(Fixture {
            store: sim.store().clone(),
            faults: sim.faults().clone(),
            log: sim.request_log().clone(),
            url: sim.url(),
            sim,
            workload: Arc::new(Mutex::new(workload)),
            hold: Duration::from_secs(2),
        })
    }

    /// Base URL of the simulator.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// Latest resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.store.current_rv()
    }

    /// Pods in the store now.
    pub fn pods(&self) -> usize {
        self.store.list_all(self.store.rid("v1", "pods")).len()
    }

    /// Deployments in the store now.
    pub fn deployments(&self) -> usize {
        self.store
            .list_all(self.store.rid("apps/v1", "deployments"))
            .len()
    }

    /// Writes `n` events as fast as possible; returns how long that took.
    pub fn write(&self, n: usize) -> Result<Duration> {
        let t = Instant::now();
        let mut w = self.workload.lock();
        for _ in 0..n {
            w.step()
                .map_err(|e| anyhow::anyhow!("churn write failed: {}", e.message))?;
        }
        Ok(t.elapsed())
    }

    /// Times `n` writes with no watcher connected and sets the hold used by
    /// [`Fixture::held_burst`] to comfortably exceed it.
    pub fn calibrate(&mut self, n: usize) -> Result<()> {
        let w = self.write(n)?;
        self.hold = w * 3 + Duration::from_secs(1);
        Ok(())
    }

    /// A mark in the simulator's request log (see [`Fixture::requests_since`]).
    pub fn request_mark(&self) -> usize {
        self.log.len()
    }

    /// The requests the simulator received since `mark`.
    pub fn requests_since(&self, mark: usize) -> Vec<RequestRecord> {
        self.log.entries().into_iter().skip(mark).collect()
    }

    fn watch_requests(&self) -> usize {
        self.log.entries().iter().filter(|r| r.is_watch()).count()
    }

    /// Drops the side's watch and holds its reconnect while `n` events are
    /// written; when the hold ends the side drains them from history at full
    /// speed. Returns the resourceVersion before the burst and the last one.
    pub fn held_burst(&self, n: usize) -> Result<(u64, u64)> {
        let before = self.watch_requests();
        let faults = &self.faults;
        faults.set_delay(Some(self.hold));
        faults.drop_watches();
        let t = Instant::now();
        while self.watch_requests() == before {
            if t.elapsed() > Duration::from_secs(30) {
                faults.set_delay(None);
                bail!("the side did not re-watch within 30 s of its watch being dropped");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let held_at = Instant::now();
        faults.set_delay(None);
        let start_rv = self.current_rv();
        self.write(n)?;
        if held_at.elapsed() >= self.hold {
            bail!(
                "writing {n} events took longer than the {:?} hold; the drain would overlap the writes",
                self.hold
            );
        }
        Ok((start_rv, self.current_rv()))
    }

    /// Starts churn at `rate` events/s for `dur` on a thread of its own; the
    /// result holds (resourceVersion, written at) of every write when `record`.
    pub fn paced(
        &self,
        rate: f64,
        dur: Duration,
        record: bool,
    ) -> std::thread::JoinHandle<Result<Vec<(u64, u64)>>> {
        let w = self.workload.clone();
        let store = self.store.clone();
        std::thread::spawn(move || {
            let mut out = Vec::new();
            let start = Instant::now();
            let mut done: u64 = 0;
            loop {
                let el = start.elapsed();
                if el >= dur {
                    break;
                }
                let due = (el.as_secs_f64() * rate) as u64;
                let mut w = w.lock();
                while done < due {
                    w.step()
                        .map_err(|e| anyhow::anyhow!("churn write failed: {}", e.message))?;
                    if record {
                        out.push((store.current_rv(), now_ns()));
                    }
                    done += 1;
                }
                drop(w);
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(out)
        })
    }

    /// Stops the simulator.
    pub fn shutdown(self, rt: &tokio::runtime::Runtime) {
        rt.block_on(self.sim.shutdown());
    }
}
