//! Shared informers: one Reflector + DeltaFIFO + Indexer + processor per resource,
//! shared by every listener of that resource, and the registry that starts an
//! informer for the first user and stops it after the last.
//!
//! Job: wire the pipeline (Reflector → DeltaFIFO → HandleDeltas → listeners),
//! run its tasks, expose HasSynced, counters and the cache (as
//! [`CacheView`]) for every running resource.
//!
//! Invariants:
//! - at most one informer runs per resource id; it runs exactly while at least
//!   one [`InformerLease`] (held directly or inside a [`ListenerHandle`]) exists;
//! - the controller loop is the FIFO's only consumer and calls HandleDeltas for
//!   one key at a time, so Indexer updates are applied in FIFO order (I2);
//! - HasSynced becomes true once the first list has been popped and processed.
//!
//! Wiring, as the host does it:
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use wasm_informer::handler::{Delivery, Handler};
//! # use wasm_informer::notification::NotificationRef;
//! # struct Plugin;
//! # impl Handler for Plugin {
//! #     async fn handle(&mut self, _n: NotificationRef) -> Delivery { Delivery::Ok }
//! # }
//! # async fn demo(kubeconfig_yaml: &str) -> Result<(), Box<dyn std::error::Error>> {
//! use wasm_informer::cache_view::CacheView;
//! use wasm_informer::informer::{InformerConfig, InformerRegistry};
//! use wasm_informer::listener::ListenerConfig;
//! use wasm_informer::reflector::client_from_kubeconfig_yaml;
//!
//! let client = client_from_kubeconfig_yaml(kubeconfig_yaml).await?;
//! let registry = InformerRegistry::new(client, InformerConfig::default());
//! let handle = registry
//!     .add_listener(
//!         "v1/pods",
//!         ListenerConfig { name: "my-plugin".into(), capacity: 1024, ..Default::default() },
//!         Plugin,
//!     )
//!     .await?;
//! // A resource a plugin only reads: keep its informer running with a lease.
//! let _lease = registry.acquire("apps/v1/deployments").await?;
//! let cache: Arc<dyn CacheView> = registry.clone();
//! let _pods = cache.list("v1/pods", Some("default"), Some("app in (web,api)"))?;
//! let stats = handle.stats().snapshot(); // delivered by kind, overflowed, coalesced, depth...
//! let informers = registry.stats(); // objects, last_sync_resource_version, lists, ...
//! # let _ = (stats, informers);
//! handle.remove(); // the last user leaving stops the informer
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::cache_view::{CacheError, CacheView};
use crate::delta_fifo::{DeltaFifo, FifoCounts};
use crate::handler::Handler;
use crate::indexer::{IndexError, IndexSpec, Indexer};
use crate::listener::{ListenerConfig, ListenerConfigError};
use crate::object::ObjectRef;
use crate::processor::{ListenerHandle, Processor, ProcessorStatsSnapshot};
use crate::reflector::{Reflector, ReflectorConfig, ReflectorStats, ReflectorStatsSnapshot};
use crate::resource::{ResourceError, ResourceId, ResourceSpec};

/// Settings of one informer.
#[derive(Debug, Clone)]
pub struct InformerConfig {
    /// Reflector settings (paging, timeouts, backoff, transform, streaming).
    pub reflector: ReflectorConfig,
    /// Custom indexes to create before the first list.
    pub indexes: Vec<IndexSpec>,
    /// How often listeners' resync periods are checked.
    pub resync_check: Duration,
}

impl Default for InformerConfig {
    fn default() -> Self {
        Self {
            reflector: ReflectorConfig::default(),
            indexes: Vec::new(),
            resync_check: Duration::from_secs(1),
        }
    }
}

/// Why an informer or listener could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum InformerError {
    /// The resource id is invalid or unknown.
    #[error(transparent)]
    Resource(#[from] ResourceError),
    /// The listener configuration is invalid.
    #[error(transparent)]
    Listener(#[from] ListenerConfigError),
    /// An index definition is invalid.
    #[error("resource {resource}: {source}")]
    Index {
        /// Resource id.
        resource: String,
        /// The index error.
        #[source]
        source: IndexError,
    },
}

/// Counters of one informer, named as in the report JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct InformerStatsSnapshot {
    /// Objects in the cache.
    pub objects: u64,
    /// Last resourceVersion synced to.
    pub last_sync_resource_version: String,
    /// Complete lists.
    pub lists: u64,
    /// Watch restarts.
    pub watch_restarts: u64,
    /// Relists caused by 410.
    pub relists_410: u64,
    /// Whether the first list has been processed.
    pub has_synced: bool,
    /// All Reflector counters.
    pub reflector: ReflectorStatsSnapshot,
    /// Dispatcher counters.
    pub processor: ProcessorStatsSnapshot,
    /// Keys waiting in the DeltaFIFO.
    pub fifo_queued_keys: u64,
}

/// One running shared informer.
pub struct SharedInformer {
    spec: ResourceSpec,
    indexer: Arc<Indexer>,
    fifo: Arc<DeltaFifo>,
    processor: Arc<Processor>,
    reflector_stats: Arc<ReflectorStats>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for SharedInformer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedInformer")
            .field("resource", &self.spec.id_string())
            .finish()
    }
}

impl SharedInformer {
    /// Builds the pipeline for `spec` and starts its tasks (Reflector,
    /// controller loop, resync check). Must be called inside a Tokio runtime.
    pub fn start(
        client: kube::Client,
        spec: ResourceSpec,
        config: InformerConfig,
    ) -> Result<Arc<Self>, InformerError> {
        let resource = spec.id_string();
        let indexer = Arc::new(Indexer::new());
        for ix in &config.indexes {
            indexer
                .add_index(ix.clone())
                .map_err(|source| InformerError::Index {
                    resource: resource.clone(),
                    source,
                })?;
        }
        let fifo = Arc::new(DeltaFifo::new(indexer.clone()));
        let processor = Processor::new(resource.as_str(), indexer.clone());
        let reflector =
            Reflector::new(client, spec.clone(), fifo.clone(), config.reflector.clone());
        let reflector_stats = reflector.stats();
        let tasks = vec![
            tokio::spawn(reflector.run()),
            tokio::spawn(controller_loop(fifo.clone(), processor.clone())),
            tokio::spawn(resync_loop(
                fifo.clone(),
                Arc::downgrade(&processor),
                config.resync_check,
            )),
        ];
        Ok(Arc::new(Self {
            spec,
            indexer,
            fifo,
            processor,
            reflector_stats,
            tasks: Mutex::new(tasks),
        }))
    }

    /// The resource served.
    pub fn spec(&self) -> &ResourceSpec {
        &self.spec
    }

    /// The cache.
    pub fn indexer(&self) -> &Arc<Indexer> {
        &self.indexer
    }

    /// The dispatcher and its listeners.
    pub fn processor(&self) -> &Arc<Processor> {
        &self.processor
    }

    /// Reflector counters and lastSyncResourceVersion.
    pub fn reflector_stats(&self) -> &Arc<ReflectorStats> {
        &self.reflector_stats
    }

    /// Whether the first list has been popped and processed.
    pub fn has_synced(&self) -> bool {
        self.processor.has_synced()
    }

    /// Waits until synced or `timeout` passes; returns whether synced.
    pub async fn wait_synced(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.has_synced() {
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    /// Adds a listener (see [`Processor::add_listener`]). The informer keeps
    /// running regardless; use [`InformerRegistry::add_listener`] for lifetime
    /// management.
    pub fn add_listener<H: Handler>(
        &self,
        config: ListenerConfig,
        handler: H,
    ) -> Result<ListenerHandle, ListenerConfigError> {
        self.processor.add_listener(config, handler)
    }

    /// Counters.
    pub fn stats(&self) -> InformerStatsSnapshot {
        let r = self.reflector_stats.snapshot();
        let FifoCounts { queued_keys, .. } = self.fifo.counts();
        InformerStatsSnapshot {
            objects: self.indexer.len() as u64,
            last_sync_resource_version: r.last_sync_resource_version.clone(),
            lists: r.lists,
            watch_restarts: r.watch_restarts,
            relists_410: r.relists_410,
            has_synced: self.has_synced(),
            reflector: r,
            processor: self.processor.stats(),
            fifo_queued_keys: queued_keys as u64,
        }
    }

    /// Stops every task. Listeners stop receiving events.
    pub fn stop(&self) {
        for t in self.tasks.lock().drain(..) {
            t.abort();
        }
        self.fifo.close();
    }
}

impl Drop for SharedInformer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Pops the FIFO, runs HandleDeltas, and marks the informer synced after the
/// first list has been processed.
async fn controller_loop(fifo: Arc<DeltaFifo>, processor: Arc<Processor>) {
    let mut synced = false;
    if fifo.has_synced() {
        processor.mark_synced();
        synced = true;
    }
    while fifo.pop_process(|p| processor.handle_deltas(p)).await {
        if !synced && fifo.has_synced() {
            processor.mark_synced();
            synced = true;
        }
    }
}

/// Checks listeners' resync periods and enqueues Sync deltas when one is due.
async fn resync_loop(fifo: Arc<DeltaFifo>, processor: Weak<Processor>, every: Duration) {
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(10)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(p) = processor.upgrade() else { return };
        if p.has_synced() && p.should_resync(Instant::now()) {
            fifo.resync();
        }
    }
}

struct RegEntry {
    informer: Arc<SharedInformer>,
    leases: usize,
}

/// Keeps one resource's informer running while held.
pub struct InformerLease {
    registry: Weak<InformerRegistry>,
    resource: String,
    informer: Arc<SharedInformer>,
}

impl std::fmt::Debug for InformerLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InformerLease")
            .field("resource", &self.resource)
            .finish()
    }
}

impl InformerLease {
    /// The informer held.
    pub fn informer(&self) -> &Arc<SharedInformer> {
        &self.informer
    }
}

impl Drop for InformerLease {
    fn drop(&mut self) {
        if let Some(r) = self.registry.upgrade() {
            r.release(&self.resource, &self.informer);
        }
    }
}

/// All running informers, by canonical resource id. Implements [`CacheView`].
pub struct InformerRegistry {
    client: kube::Client,
    config: InformerConfig,
    running: Mutex<HashMap<String, RegEntry>>,
    indexes: Mutex<HashMap<String, Vec<IndexSpec>>>,
    starting: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for InformerRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InformerRegistry")
            .field("resources", &self.resources())
            .finish()
    }
}

impl InformerRegistry {
    /// A registry whose informers use `client` and `config`.
    pub fn new(client: kube::Client, config: InformerConfig) -> Arc<Self> {
        Arc::new(Self {
            client,
            config,
            running: Mutex::new(HashMap::new()),
            indexes: Mutex::new(HashMap::new()),
            starting: tokio::sync::Mutex::new(()),
        })
    }

    fn canonical(resource: &str) -> Result<String, ResourceError> {
        Ok(ResourceId::parse(resource)?.to_string())
    }

    /// Declares a custom index for `resource`: applied now if its informer runs,
    /// and to every informer started for it later.
    pub fn add_index(&self, resource: &str, spec: IndexSpec) -> Result<(), InformerError> {
        let id = Self::canonical(resource)?;
        if let Some(e) = self.running.lock().get(&id) {
            e.informer
                .indexer()
                .add_index(spec.clone())
                .map_err(|source| InformerError::Index {
                    resource: id.clone(),
                    source,
                })?;
        } else {
            // Validate now so the caller hears about a bad path at once.
            Indexer::new()
                .add_index(spec.clone())
                .map_err(|source| InformerError::Index {
                    resource: id.clone(),
                    source,
                })?;
        }
        let mut ix = self.indexes.lock();
        let list = ix.entry(id).or_default();
        if !list.iter().any(|s| s.name == spec.name) {
            list.push(spec);
        }
        Ok(())
    }

    /// Keeps `resource`'s informer running (starting it if needed) while the
    /// lease lives. Resolves the resource (discovery for non-built-ins).
    pub async fn acquire(self: &Arc<Self>, resource: &str) -> Result<InformerLease, InformerError> {
        let id = Self::canonical(resource)?;
        if let Some(lease) = self.try_lease(&id) {
            return Ok(lease);
        }
        let _starting = self.starting.lock().await;
        if let Some(lease) = self.try_lease(&id) {
            return Ok(lease);
        }
        let spec = ResourceSpec::resolve(&self.client, &id).await?;
        let mut config = self.config.clone();
        if let Some(extra) = self.indexes.lock().get(&id) {
            config.indexes.extend(extra.iter().cloned());
        }
        let informer = SharedInformer::start(self.client.clone(), spec, config)?;
        self.running.lock().insert(
            id.clone(),
            RegEntry {
                informer: informer.clone(),
                leases: 1,
            },
        );
        tracing::info!(resource = %id, "informer started");
        Ok(InformerLease {
            registry: Arc::downgrade(self),
            resource: id,
            informer,
        })
    }

    fn try_lease(self: &Arc<Self>, id: &str) -> Option<InformerLease> {
        let mut running = self.running.lock();
        let e = running.get_mut(id)?;
        e.leases += 1;
        Some(InformerLease {
            registry: Arc::downgrade(self),
            resource: id.to_string(),
            informer: e.informer.clone(),
        })
    }

    fn release(&self, id: &str, informer: &Arc<SharedInformer>) {
        let mut running = self.running.lock();
        let Some(e) = running.get_mut(id) else { return };
        if !Arc::ptr_eq(&e.informer, informer) {
            return;
        }
        e.leases -= 1;
        if e.leases == 0 {
            if let Some(e) = running.remove(id) {
                e.informer.stop();
                tracing::info!(resource = %id, "informer stopped (no more users)");
            }
        }
    }

    /// Subscribes `handler` to `resource`, starting its informer if this is the
    /// first user. The handler first receives the cache (I6), then live events.
    /// Dropping the handle unsubscribes, and stops the informer after the last.
    pub async fn add_listener<H: Handler>(
        self: &Arc<Self>,
        resource: &str,
        config: ListenerConfig,
        handler: H,
    ) -> Result<ListenerHandle, InformerError> {
        config.validate()?;
        let lease = self.acquire(resource).await?;
        let mut handle = lease.informer().add_listener(config, handler)?;
        handle.set_on_remove(Box::new(move || drop(lease)));
        Ok(handle)
    }

    /// The running informer of `resource`, if any.
    pub fn informer(&self, resource: &str) -> Option<Arc<SharedInformer>> {
        let id = Self::canonical(resource).ok()?;
        self.running.lock().get(&id).map(|e| e.informer.clone())
    }

    /// Ids of the running informers.
    pub fn resources(&self) -> Vec<String> {
        let mut v: Vec<String> = self.running.lock().keys().cloned().collect();
        v.sort();
        v
    }

    /// Counters of every running informer.
    pub fn stats(&self) -> BTreeMap<String, InformerStatsSnapshot> {
        let infs: Vec<(String, Arc<SharedInformer>)> = self
            .running
            .lock()
            .iter()
            .map(|(k, e)| (k.clone(), e.informer.clone()))
            .collect();
        infs.into_iter().map(|(k, i)| (k, i.stats())).collect()
    }

    /// Stops every informer now (for shutdown). Handles and leases still held
    /// become inert.
    pub fn stop_all(&self) {
        let all: Vec<RegEntry> = self.running.lock().drain().map(|(_, e)| e).collect();
        for e in all {
            e.informer.stop();
        }
    }

    fn cache(&self, resource: &str) -> Result<Arc<SharedInformer>, CacheError> {
        self.informer(resource).ok_or_else(|| {
            CacheError::UnknownResource(format!("{resource} (no informer running for it)"))
        })
    }
}

impl CacheView for InformerRegistry {
    fn get(&self, resource: &str, key: &str) -> Result<Option<ObjectRef>, CacheError> {
        Ok(self.cache(resource)?.indexer().get(key))
    }

    fn list(
        &self,
        resource: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<ObjectRef>, CacheError> {
        self.cache(resource)?
            .indexer()
            .list_selector_str(namespace, label_selector)
    }

    fn by_index(
        &self,
        resource: &str,
        index: &str,
        value: &str,
    ) -> Result<Vec<ObjectRef>, CacheError> {
        self.cache(resource)?.indexer().by_index(index, value)
    }

    fn has_synced(&self, resource: &str) -> Result<bool, CacheError> {
        Ok(self.cache(resource)?.has_synced())
    }
}
