//! Shared helpers of the runtime tests: an in-memory [`CacheView`], pod
//! objects and notifications, plugin loading with test-sized limits, and the
//! "fault plugin beside a healthy plugin" harness of the containment tests.
//!
//! Invariant: nothing here talks to the network or depends on timing.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kube_informer::cache_view::{CacheError, CacheView};
use kube_informer::handler::{Delivery, Handler};
use kube_informer::notification::{EventKind, Notification, NotificationRef};
use kube_informer::object::{Object, ObjectRef, Transform};
use parking_lot::RwLock;
use wasm_informer_runtime::{
    EngineConfig, LoadedPlugin, PluginEngine, PluginLimits, PluginRunner, PluginSpec, PluginState,
    StatusSnapshot, TrapKind,
};

/// An in-memory cache: resource -> key -> object.
#[derive(Default)]
pub struct FakeCache {
    pub objects: RwLock<BTreeMap<String, BTreeMap<String, ObjectRef>>>,
    pub synced: RwLock<BTreeSet<String>>,
}

impl FakeCache {
    pub fn insert(&self, resource: &str, o: ObjectRef) {
        self.objects
            .write()
            .entry(resource.to_string())
            .or_default()
            .insert(o.key(), o);
        self.synced.write().insert(resource.to_string());
    }
}

fn matches(o: &Object, selector: &str) -> Result<bool, CacheError> {
    for term in selector.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (k, v) = term.split_once('=').ok_or_else(|| {
            CacheError::InvalidSelector(format!("fake cache supports k=v only: {term}"))
        })?;
        if o.meta.labels.get(k.trim()) != Some(v.trim()) {
            return Ok(false);
        }
    }
    Ok(true)
}

impl CacheView for FakeCache {
    fn get(&self, resource: &str, key: &str) -> Result<Option<ObjectRef>, CacheError> {
        let g = self.objects.read();
        let r = g
            .get(resource)
            .ok_or_else(|| CacheError::UnknownResource(resource.to_string()))?;
        Ok(r.get(key).cloned())
    }

    fn list(
        &self,
        resource: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<ObjectRef>, CacheError> {
        let g = self.objects.read();
        let r = g
            .get(resource)
            .ok_or_else(|| CacheError::UnknownResource(resource.to_string()))?;
        let mut out = Vec::new();
        for o in r.values() {
            if namespace.is_some_and(|ns| o.meta.namespace.as_deref() != Some(ns)) {
                continue;
            }
            if let Some(s) = label_selector {
                if !matches(o, s)? {
                    continue;
                }
            }
            out.push(o.clone());
        }
        Ok(out)
    }

    fn by_index(
        &self,
        resource: &str,
        index: &str,
        value: &str,
    ) -> Result<Vec<ObjectRef>, CacheError> {
        match index {
            "namespace" => self.list(resource, Some(value), None),
            _ => Err(CacheError::UnknownIndex(index.to_string())),
        }
    }

    fn has_synced(&self, resource: &str) -> Result<bool, CacheError> {
        Ok(self.synced.read().contains(resource))
    }
}

/// A pod of about 1.5 KB with a Ready condition.
pub fn pod(ns: &str, name: &str, ready: bool) -> ObjectRef {
    let json = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": format!("uid-{ns}-{name}"),
            "resourceVersion": "1",
            "labels": {"app": "web", "tier": "frontend"},
            "annotations": {"note": "x".repeat(512)},
        },
        "spec": {
            "nodeName": "node-1",
            "containers": [{"name": "app", "image": "registry.local/app:1.0", "ports": [{"containerPort": 8080}]}],
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
        },
    });
    Arc::new(Object::from_json(json.to_string().as_bytes(), &Transform::default()).unwrap())
}

/// An `added` notification for a pod.
pub fn added(o: &ObjectRef) -> NotificationRef {
    Arc::new(Notification {
        kind: EventKind::Added,
        resource: "v1/pods".into(),
        key: o.key().into(),
        object: o.clone(),
        old: None,
        in_initial_list: false,
        final_state_unknown: false,
    })
}

/// A cache holding `n` pods in namespace `ns` (every other one Ready).
pub fn cache_with_pods(ns: &str, n: usize) -> (Arc<FakeCache>, Vec<ObjectRef>) {
    let cache = Arc::new(FakeCache::default());
    let pods: Vec<ObjectRef> = (0..n)
        .map(|i| pod(ns, &format!("p{i}"), i % 2 == 0))
        .collect();
    for p in &pods {
        cache.insert("v1/pods", p.clone());
    }
    (cache, pods)
}

/// An engine for tests (default configuration, no disk cache).
pub fn engine() -> Arc<PluginEngine> {
    PluginEngine::new(EngineConfig::default()).unwrap()
}

/// Limits for fault tests: quick restarts, 3 failures to quarantine, 1 s
/// quarantine.
pub fn fast_limits() -> PluginLimits {
    PluginLimits {
        max_failures: 3,
        quarantine_seconds: 1,
        backoff_initial_ms: 1,
        backoff_max_ms: 10,
        ..PluginLimits::default()
    }
}

/// Loads a plugin from the artifacts crate.
pub fn load(
    engine: &PluginEngine,
    name: &str,
    wasm: &str,
    config: serde_json::Value,
    read: &[&str],
    limits: PluginLimits,
) -> Arc<LoadedPlugin> {
    let spec = PluginSpec {
        name: name.to_string(),
        config_json: config.to_string(),
        read: read.iter().map(|s| s.to_string()).collect(),
        limits,
        kube: Default::default(),
    };
    LoadedPlugin::from_file(engine, spec, std::path::Path::new(wasm)).unwrap()
}

/// Starts a runner.
pub async fn runner(
    engine: &Arc<PluginEngine>,
    plugin: Arc<LoadedPlugin>,
    cache: Arc<FakeCache>,
) -> PluginRunner {
    PluginRunner::start(engine.clone(), plugin, cache)
        .await
        .unwrap()
}

/// Loads a plugin from the artifacts crate and starts a runner for it.
pub async fn start(
    engine: &Arc<PluginEngine>,
    cache: Arc<FakeCache>,
    name: &str,
    wasm: &str,
    config: serde_json::Value,
    read: &[&str],
    limits: PluginLimits,
) -> PluginRunner {
    let plugin = load(engine, name, wasm, config, read, limits);
    runner(engine, plugin, cache).await
}

/// What [`beside_healthy`] observed.
pub struct BesideHealthy {
    /// The healthy plugin's delivery for each of its events.
    pub healthy: Vec<Delivery>,
    /// The healthy plugin's status after its last event.
    pub healthy_snap: StatusSnapshot,
    /// The faulty plugin's delivery for each of its events.
    pub faulty: Vec<Delivery>,
    /// The faulty plugin's status after its last event.
    pub faulty_snap: StatusSnapshot,
}

/// Runs `healthy` over `healthy_events` events on its own task while `faulty`
/// handles `faulty_events` events, both cycling through `pods`; waits at most
/// `patience` for the healthy task and returns both plugins' deliveries and
/// statuses.
pub async fn beside_healthy(
    mut healthy: PluginRunner,
    mut faulty: PluginRunner,
    pods: &[ObjectRef],
    healthy_events: usize,
    faulty_events: usize,
    patience: Duration,
) -> BesideHealthy {
    let healthy_pods = pods.to_vec();
    let healthy_task = tokio::spawn(async move {
        let mut results = Vec::new();
        for i in 0..healthy_events {
            results.push(
                healthy
                    .handle(added(&healthy_pods[i % healthy_pods.len()]))
                    .await,
            );
        }
        (results, healthy.status().snapshot())
    });

    let mut deliveries = Vec::new();
    for i in 0..faulty_events {
        deliveries.push(faulty.handle(added(&pods[i % pods.len()])).await);
    }

    let (results, healthy_snap) = tokio::time::timeout(patience, healthy_task)
        .await
        .expect("healthy plugin finished")
        .expect("healthy task did not panic");
    BesideHealthy {
        healthy: results,
        healthy_snap,
        faulty: deliveries,
        faulty_snap: faulty.status().snapshot(),
    }
}

/// Checks a plugin that trapped with `kind` on each of its `max` events: every
/// delivery restarted it, and it ended quarantined with `max` traps of that
/// kind, `max - 1` restarts, one quarantine and nothing delivered.
pub fn assert_quarantined(
    label: &str,
    deliveries: &[Delivery],
    snap: &StatusSnapshot,
    max: u64,
    kind: TrapKind,
) {
    assert!(
        deliveries.iter().all(|d| *d == Delivery::Restarted),
        "{label}: {deliveries:?}"
    );
    assert_eq!(snap.state, PluginState::Quarantined, "{label}: {snap:?}");
    assert_eq!(
        snap.traps_by_kind[kind.as_str()],
        max,
        "{label}: wrong trap kind: {snap:?}"
    );
    assert_eq!(snap.traps, max, "{label}: {snap:?}");
    assert_eq!(snap.restarts, max - 1, "{label}: {snap:?}");
    assert_eq!(snap.quarantines, 1);
    assert_eq!(snap.delivered.total(), 0);
    assert!(snap.last_error.as_deref().unwrap().contains(kind.as_str()));
}

/// The deliveries of a plugin that traps on every `n`-th event of an instance,
/// over `events` events: `Restarted` on each trap, `Ok` otherwise.
pub fn every_nth_restarted(n: usize, events: usize) -> Vec<Delivery> {
    (0..events)
        .map(|i| {
            if i % n == n - 1 {
                Delivery::Restarted
            } else {
                Delivery::Ok
            }
        })
        .collect()
}
