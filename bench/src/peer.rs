//! The kube-runtime 5.0 side: `watcher` + `reflector` + `Store<Pod>` with native
//! closures as handlers, either one reflector per handler or one shared reflector
//! with subscribers (`unstable-runtime-subscribe`).
//!
//! Invariant: each closure feeds the same probe type as our side, after it ran.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube_runtime::reflector::{self, Store};
use kube_runtime::{watcher, WatchStreamExt};
use tokio::task::JoinHandle;

use crate::probe::{parse_rv, Probe};
use crate::spec::{HandlerKind, PeerFanout, SideSpec};

/// A running kube-runtime side.
pub struct PeerSide {
    stores: Vec<Store<Pod>>,
    tasks: Vec<JoinHandle<()>>,
    /// (name, probe, tracked) per handler.
    pub probes: Vec<(String, Arc<Probe>, bool)>,
}

fn sleep_of(kind: &HandlerKind) -> Result<Option<Duration>> {
    match kind {
        HandlerKind::NoopNative => Ok(None),
        HandlerKind::SleepNative(ms) => Ok(Some(Duration::from_millis(*ms))),
        HandlerKind::Wasm { path, .. } => {
            anyhow::bail!("kube-runtime side cannot run a WebAssembly handler ({path})")
        }
    }
}

async fn handle(pod: &Pod, sleep: Option<Duration>, probe: &Probe) {
    if let Some(d) = sleep {
        tokio::time::sleep(d).await;
    }
    probe.observe(parse_rv(pod.metadata.resource_version.as_deref()));
}

fn strip(p: &mut Pod) {
    p.metadata.managed_fields = None;
}

impl PeerSide {
    /// Starts the reflector(s) and waits for sync.
    pub async fn start(spec: &SideSpec, client: kube::Client) -> Result<(Self, Vec<String>)> {
        let mut stores = Vec::new();
        let mut tasks = Vec::new();
        let mut probes = Vec::new();
        let wc = watcher::Config::default();
        match spec.peer_fanout {
            PeerFanout::Separate => {
                for h in &spec.handlers {
                    let probe = Arc::new(Probe::default());
                    let sleep = sleep_of(&h.kind)?;
                    let (reader, writer) = reflector::store::<Pod>();
                    let api: Api<Pod> = Api::all(client.clone());
                    let p = probe.clone();
                    let f = move |r: Result<Pod, watcher::Error>| {
                        let p = p.clone();
                        async move {
                            match r {
                                Ok(pod) => handle(&pod, sleep, &p).await,
                                Err(e) => tracing::warn!(error = %e, "watcher error"),
                            }
                        }
                    };
                    let task = if spec.strip_managed_fields {
                        tokio::spawn(
                            watcher(api, wc.clone())
                                .default_backoff()
                                .modify(strip)
                                .reflect(writer)
                                .touched_objects()
                                .for_each(f),
                        )
                    } else {
                        tokio::spawn(
                            watcher(api, wc.clone())
                                .default_backoff()
                                .reflect(writer)
                                .touched_objects()
                                .for_each(f),
                        )
                    };
                    stores.push(reader);
                    tasks.push(task);
                    probes.push((h.name.clone(), probe, h.tracked));
                }
            }
            PeerFanout::Shared { buffer } => {
                let (reader, writer) = reflector::store_shared::<Pod>(buffer);
                for h in &spec.handlers {
                    let probe = Arc::new(Probe::default());
                    let sleep = sleep_of(&h.kind)?;
                    let sub = writer
                        .subscribe()
                        .ok_or_else(|| anyhow::anyhow!("store_shared gave no subscriber"))?;
                    let p = probe.clone();
                    tasks.push(tokio::spawn(sub.for_each(move |pod: Arc<Pod>| {
                        let p = p.clone();
                        async move { handle(&pod, sleep, &p).await }
                    })));
                    probes.push((h.name.clone(), probe, h.tracked));
                }
                let api: Api<Pod> = Api::all(client.clone());
                let root = |r: Result<Pod, watcher::Error>| async move {
                    if let Err(e) = r {
                        tracing::warn!(error = %e, "watcher error");
                    }
                };
                let task = if spec.strip_managed_fields {
                    tokio::spawn(
                        watcher(api, wc.clone())
                            .default_backoff()
                            .modify(strip)
                            .reflect_shared(writer)
                            .touched_objects()
                            .for_each(root),
                    )
                } else {
                    tokio::spawn(
                        watcher(api, wc.clone())
                            .default_backoff()
                            .reflect_shared(writer)
                            .touched_objects()
                            .for_each(root),
                    )
                };
                tasks.push(task);
                stores.push(reader);
            }
        }
        let side = PeerSide {
            stores,
            tasks,
            probes,
        };
        let notes = side.wait_synced(spec).await?;
        Ok((side, notes))
    }

    async fn wait_synced(&self, spec: &SideSpec) -> Result<Vec<String>> {
        let timeout = Duration::from_secs(spec.sync_timeout_secs);
        for s in &self.stores {
            if tokio::time::timeout(timeout, s.wait_until_ready())
                .await
                .is_err()
            {
                anyhow::bail!("a Store did not become ready within {timeout:?}");
            }
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let mut notes = Vec::new();
        for (name, probe, tracked) in &self.probes {
            if !tracked {
                continue;
            }
            while probe.total.load(std::sync::atomic::Ordering::Relaxed) < spec.expect_objects {
                if tokio::time::Instant::now() >= deadline {
                    notes.push(format!(
                        "subscriber {name} had seen {} of {} initial objects after {timeout:?}",
                        probe.total.load(std::sync::atomic::Ordering::Relaxed),
                        spec.expect_objects
                    ));
                    break;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        Ok(notes)
    }

    /// Objects in the cache(s), summed.
    pub fn cached_objects(&self) -> u64 {
        self.stores.iter().map(|s| s.len() as u64).sum()
    }

    /// Stops every task.
    pub fn stop(self) {
        for t in self.tasks {
            t.abort();
        }
    }
}
