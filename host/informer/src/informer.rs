//! One shared informer: a Reflector, a DeltaFIFO, an Indexer and a processor
//! for one resource, shared by every handler added to it.
//!
//! Job: wire the pipeline (Reflector → DeltaFIFO → HandleDeltas → listeners),
//! run its tasks, and expose HasSynced, the cache and the counters. Built with
//! [`SharedInformer::builder`] (or [`SharedInformer::for_type`] for a
//! k8s-openapi type).
//!
//! Invariants:
//! - the controller loop is the FIFO's only consumer and calls HandleDeltas for
//!   one key at a time, so Indexer updates are applied in FIFO order (I2);
//! - HasSynced becomes true once the first list has been popped and processed;
//! - indexes are declared before the first list, so every object is indexed
//!   from its first insert.

#![warn(missing_docs)]

use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::delta_fifo::{DeltaFifo, FifoCounts};
use crate::handler::{Handler, HandlerOptions, HandlerOptionsError};
use crate::indexer::{IndexError, IndexSpec, Indexer};
use crate::pack::{Compactor, PackStats};
use crate::processor::{Processor, ProcessorStatsSnapshot};
use crate::reflector::{
    Reflector, ReflectorConfig, ReflectorStats, ReflectorStatsSnapshot, StreamingList,
};
use crate::registration::Registration;
use crate::resource::{ResourceError, ResourceId, ResourceSpec};

/// How often the compactor looks for objects to pack once it has caught up.
const PACK_POLL: Duration = Duration::from_millis(200);

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
    Listener(#[from] HandlerOptionsError),
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
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
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
    /// How much of the cache is packed, and its bytes against the text's.
    pub pack: PackStats,
    /// When sharded at the source: the ranges asked for and covered, and
    /// whether the server or this replica filters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::shard::SourceShardStatus>,
}

/// Builds a [`SharedInformer`]: the resource, its indexes, and how its
/// Reflector lists and watches. Every setting has the design's default.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use kube_informer::SharedInformer;
///
/// let client = kube::Client::try_default().await?;
/// let pods = SharedInformer::builder(client, "v1/pods")
///     .index("node", "spec.nodeName")
///     .label_index("app", "app.kubernetes.io/name")
///     .start()
///     .await?;
/// # let _ = pods;
/// # Ok(()) }
/// ```
#[must_use = "an informer builder does nothing until `start` is called"]
pub struct InformerBuilder {
    client: kube::Client,
    resource: String,
    config: InformerConfig,
}

impl std::fmt::Debug for InformerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InformerBuilder")
            .field("resource", &self.resource)
            .field("config", &self.config)
            .finish()
    }
}

impl InformerBuilder {
    /// Adds an index named `name` on the dotted field path `path`, for
    /// example `spec.nodeName`, `metadata.ownerReferences.uid` or
    /// `metadata.annotations.KEY` (see [`IndexSpec`]). Query it with
    /// [`Indexer::by_index`].
    pub fn index(mut self, name: impl Into<String>, path: impl Into<String>) -> Self {
        self.config.indexes.push(IndexSpec::new(name, path));
        self
    }

    /// Adds an index named `name` on the value of the label `key`.
    pub fn label_index(self, name: impl Into<String>, key: &str) -> Self {
        self.index(name, format!("metadata.labels.{key}"))
    }

    /// `limit` of each list page (default 500).
    pub fn page_size(mut self, n: u32) -> Self {
        self.config.reflector.page_size = n;
        self
    }

    /// Whether to try a streaming list before a paged one (default: try it,
    /// falling back when the server does not support it).
    pub fn streaming_list(mut self, mode: StreamingList) -> Self {
        self.config.reflector.streaming_list = mode;
        self
    }

    /// Keeps `metadata.managedFields` in the cache (stripped by default: it is
    /// often half of an object and almost no handler reads it).
    pub fn keep_managed_fields(mut self) -> Self {
        self.config.reflector.transform.strip_managed_fields = false;
        self
    }

    /// Keeps the cached JSON as text: no background packing (see
    /// [`crate::pack`]), no unpacking on reads.
    pub fn no_packing(mut self) -> Self {
        self.config.reflector.transform.pack = false;
        self
    }

    /// Every Reflector setting at once (page size, watch timeouts, backoff,
    /// streaming list, transform).
    pub fn reflector(mut self, config: ReflectorConfig) -> Self {
        self.config.reflector = config;
        self
    }

    /// How often handlers' resync periods are checked (default 1 s).
    pub fn resync_check(mut self, every: Duration) -> Self {
        self.config.resync_check = every;
        self
    }

    /// Resolves the resource (a built-in, or through API discovery for a CRD)
    /// and starts the informer's tasks on the current Tokio runtime. Handlers
    /// may be added before it has synced: each gets the first list as its
    /// initial state once it is complete.
    pub async fn start(self) -> Result<Arc<SharedInformer>, InformerError> {
        ResourceId::parse(&self.resource)?;
        let spec = ResourceSpec::resolve(&self.client, &self.resource).await?;
        SharedInformer::start(self.client, spec, self.config)
    }
}

/// One running shared informer.
pub struct SharedInformer {
    spec: ResourceSpec,
    indexer: Arc<Indexer>,
    fifo: Arc<DeltaFifo>,
    processor: Arc<Processor>,
    reflector_stats: Arc<ReflectorStats>,
    shard: Option<Arc<crate::shard::SourceShard>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// The background packer of the cache, when packing is on.
    compactor: Mutex<Option<Compactor>>,
}

impl std::fmt::Debug for SharedInformer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedInformer")
            .field("resource", &self.spec.id_string())
            .finish()
    }
}

impl SharedInformer {
    /// A builder for an informer on `resource`, a resource id such as
    /// `v1/pods`, `apps/v1/deployments` or `example.com/v1/widgets`.
    pub fn builder(client: kube::Client, resource: impl Into<String>) -> InformerBuilder {
        InformerBuilder {
            client,
            resource: resource.into(),
            config: InformerConfig::default(),
        }
    }

    /// A builder for an informer on the resource of the k8s-openapi type `K`,
    /// for example `SharedInformer::for_type::<Pod>(client)`.
    pub fn for_type<K: k8s_openapi::Resource>(client: kube::Client) -> InformerBuilder {
        Self::builder(client, ResourceId::of::<K>().to_string())
    }

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
        let compactor = config
            .reflector
            .transform
            .pack
            .then(|| Compactor::start(&indexer, &resource, PACK_POLL));
        Ok(Arc::new(Self {
            spec,
            compactor: Mutex::new(compactor),
            indexer,
            fifo,
            processor,
            reflector_stats,
            shard: config.reflector.shard.clone(),
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

    /// The shard handle this informer follows, when sharded at the source.
    pub fn source_shard(&self) -> Option<&Arc<crate::shard::SourceShard>> {
        self.shard.as_ref()
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

    /// Registers `handler` with its own bounded queue (see [`HandlerOptions`]).
    /// It first receives the current cache as adds flagged
    /// `in_initial_list`, then live events, with no gap and no duplicate (I6);
    /// before the informer has synced it gets nothing until the first list is
    /// complete, then that list as its initial state. A handler that falls
    /// behind holds at most its queue capacity and then only the keys that
    /// changed, and still ends with each object's final state (I4, I5); it
    /// never slows the dispatcher or another handler (I1). Drop or
    /// [`Registration::remove`] the registration to unsubscribe.
    pub fn add_handler<H: Handler>(
        &self,
        handler: H,
        options: HandlerOptions,
    ) -> Result<Registration, HandlerOptionsError> {
        self.processor.add_handler(handler, options)
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
            pack: self.indexer.pack_stats(),
            shard: self.shard.as_ref().map(|s| s.status()),
        }
    }

    /// Stops every task. Listeners stop receiving events.
    pub fn stop(&self) {
        for t in self.tasks.lock().drain(..) {
            t.abort();
        }
        if let Some(mut c) = self.compactor.lock().take() {
            c.stop();
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
    let mut unwoken = 0;
    while fifo
        .pop_process(|p| processor.handle_deltas_unwoken(p))
        .await
    {
        // Listeners are woken when the FIFO runs dry, and at least every
        // WAKE_EVERY keys: a handler that keeps up with a burst takes it in
        // batches instead of a wake-up (a thread switch) per event.
        unwoken += 1;
        if unwoken >= WAKE_EVERY || fifo.queued() == 0 {
            processor.wake_listeners();
            unwoken = 0;
        }
        if !synced && fifo.has_synced() {
            processor.mark_synced();
            synced = true;
        }
    }
    processor.wake_listeners();
}

/// The most keys the dispatcher hands out before it wakes the listeners.
const WAKE_EVERY: usize = 32;

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
