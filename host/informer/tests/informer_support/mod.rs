//! Shared helpers for the informer tests that run against apisim: start a
//! simulator with a workload, build a client and an informer, recording
//! handlers, and views of server and cache state keyed by resourceVersion.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use apisim::workload::{Workload, WorkloadConfig};
use apisim::{RunningSim, Sim, SimConfig};
use kube_informer::handler::{Delivery, Handler};
use kube_informer::indexer::Indexer;
use kube_informer::informer::{InformerConfig, SharedInformer};
use kube_informer::notification::{EventKind, NotificationRef};
use kube_informer::reflector::ReflectorConfig;
use kube_informer::resource::ResourceSpec;
use parking_lot::Mutex;
use tokio::sync::mpsc;

/// A running simulator seeded with `pods` pods over 4 namespaces.
pub async fn sim_with_pods(pods: usize, seed: u64, config: SimConfig) -> (RunningSim, Workload) {
    let sim = Sim::new(config);
    let wl = Workload::seed(sim.store().clone(), WorkloadConfig::new(pods, 4, seed))
        .expect("seed workload");
    let running = sim
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .expect("start apisim");
    (running, wl)
}

/// A client for the simulator with kube's retry layer and client-side
/// timeouts off (the Reflector owns retries; paused-clock tests need no
/// stray timers).
pub async fn client(sim: &RunningSim) -> kube::Client {
    let kc = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig_yaml()).unwrap();
    let mut cfg =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    cfg.default_retry = false;
    cfg.connect_timeout = None;
    cfg.read_timeout = None;
    cfg.write_timeout = None;
    kube::Client::try_from(cfg).unwrap()
}

/// Reflector settings for tests: fixed seed, paged or streaming as asked,
/// short backoff unless the test is about backoff.
pub fn fast_reflector(seed: u64) -> ReflectorConfig {
    let mut r = ReflectorConfig {
        seed: Some(seed),
        ..ReflectorConfig::default()
    };
    r.backoff.initial = Duration::from_millis(50);
    r.backoff.max = Duration::from_millis(500);
    r
}

/// Starts a pods informer.
pub async fn pods_informer(sim: &RunningSim, reflector: ReflectorConfig) -> Arc<SharedInformer> {
    let spec = ResourceSpec::builtin("v1/pods").unwrap().unwrap();
    SharedInformer::start(
        client(sim).await,
        spec,
        InformerConfig {
            reflector,
            ..InformerConfig::default()
        },
    )
    .unwrap()
}

/// key -> resourceVersion of every pod on the server.
pub fn server_pods(sim: &RunningSim) -> BTreeMap<String, u64> {
    let rid = sim.store().rid("v1", "pods");
    sim.store()
        .list_all(rid)
        .iter()
        .map(|o| (apisim::object::key_of(&o.namespace, &o.name), o.rv))
        .collect()
}

/// key -> resourceVersion of every cached object.
pub fn cache_state(ix: &Indexer) -> BTreeMap<String, u64> {
    ix.snapshot()
        .iter()
        .map(|o| (o.key(), o.meta.resource_version.parse().unwrap()))
        .collect()
}

/// Polls `f` every 10 ms until it holds, failing after `secs` seconds.
pub async fn eventually(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {secs} s waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The view a handler reconstructs from its notifications.
#[derive(Debug, Default, Clone)]
pub struct RecordedView {
    /// key -> resourceVersion.
    pub state: BTreeMap<String, u64>,
    /// Every notification, in order.
    pub log: Vec<NotificationRef>,
    /// Deletes for keys the view did not hold, adds for keys it held.
    pub anomalies: Vec<String>,
}

impl RecordedView {
    pub fn apply(&mut self, n: &NotificationRef) {
        let rv: u64 = n.object.meta.resource_version.parse().unwrap_or(0);
        match n.kind {
            EventKind::Deleted => {
                if self.state.remove(&*n.key).is_none() {
                    self.anomalies.push(format!("delete of unknown {}", n.key));
                }
            }
            EventKind::Added => {
                if self.state.insert(n.key.to_string(), rv).is_some() {
                    self.anomalies.push(format!("add of known {}", n.key));
                }
            }
            _ => {
                if self.state.insert(n.key.to_string(), rv).is_none() {
                    self.anomalies.push(format!("update of unknown {}", n.key));
                }
            }
        }
        self.log.push(n.clone());
    }
}

/// A handler that applies every notification to a shared view, optionally
/// sleeping per event (a slow plugin).
pub struct ViewRecorder {
    pub view: Arc<Mutex<RecordedView>>,
    pub delay: Option<Duration>,
    pub keep_log: bool,
    pub tx: Option<mpsc::UnboundedSender<NotificationRef>>,
}

impl ViewRecorder {
    pub fn new(delay: Option<Duration>) -> (Self, Arc<Mutex<RecordedView>>) {
        let view = Arc::new(Mutex::new(RecordedView::default()));
        (
            Self {
                view: view.clone(),
                delay,
                keep_log: true,
                tx: None,
            },
            view,
        )
    }
}

impl Handler for ViewRecorder {
    async fn handle(&mut self, n: NotificationRef) -> Delivery {
        if let Some(d) = self.delay {
            tokio::time::sleep(d).await;
        }
        {
            let mut v = self.view.lock();
            v.apply(&n);
            if !self.keep_log {
                v.log.clear();
            }
        }
        if let Some(tx) = &self.tx {
            let _ = tx.send(n);
        }
        Delivery::Ok
    }
}

pub mod soak;
