//! The registry of running informers: one per resource id, started for its
//! first user and stopped after its last, and the cache of all of them as one
//! [`CacheView`].
//!
//! Job: what a host with many handlers over many resources needs: add a handler
//! to a resource by id (starting its informer on demand), hold an informer
//! running for a resource that is only read ([`InformerLease`]), declare
//! indexes ahead of an informer's start, and answer cache queries by resource.
//!
//! Invariant: at most one informer runs per resource id; it runs exactly while
//! at least one [`InformerLease`] (held directly or inside a [`Registration`])
//! exists.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use kube_informer::{Delivery, Handler, NotificationRef};
//! # struct Plugin;
//! # impl Handler for Plugin {
//! #     async fn handle(&mut self, _n: NotificationRef) -> Delivery { Delivery::Ok }
//! # }
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use kube_informer::{CacheView, HandlerOptions, InformerConfig, InformerRegistry};
//!
//! let client = kube::Client::try_default().await?;
//! let registry = InformerRegistry::new(client, InformerConfig::default());
//! let registration = registry
//!     .add_handler("v1/pods", Plugin, HandlerOptions::named("my-plugin"))
//!     .await?;
//! // A resource that is only read: keep its informer running with a lease.
//! let _lease = registry.acquire("apps/v1/deployments").await?;
//! let cache: Arc<dyn CacheView> = registry.clone();
//! let _pods = cache.list("v1/pods", Some("default"), Some("app in (web,api)"))?;
//! let informers = registry.stats(); // objects, last_sync_resource_version, lists, ...
//! # let _ = informers;
//! registration.remove(); // the last user leaving stops the informer
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::cache_view::{CacheError, CacheView};
use crate::handler::{Handler, HandlerOptions};
use crate::indexer::{IndexSpec, Indexer};
use crate::informer::{InformerConfig, InformerError, InformerStatsSnapshot, SharedInformer};
use crate::object::ObjectRef;
use crate::registration::Registration;
use crate::resource::{ResourceError, ResourceId, ResourceSpec};
use crate::shard::SourceSharding;

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
    sharding: Mutex<Option<Arc<dyn SourceSharding>>>,
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
            sharding: Mutex::new(None),
        })
    }

    /// Decides which informers started from now on are sharded at the
    /// source, and follow which ranges (see [`crate::shard`]).
    pub fn set_source_sharding(&self, sharding: Arc<dyn SourceSharding>) {
        *self.sharding.lock() = Some(sharding);
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
        let sharding = self.sharding.lock().clone();
        config.reflector.shard = sharding.and_then(|s| s.source_for(&spec.id_string()));
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
    pub async fn add_handler<H: Handler>(
        self: &Arc<Self>,
        resource: &str,
        handler: H,
        options: HandlerOptions,
    ) -> Result<Registration, InformerError> {
        options.validate()?;
        let lease = self.acquire(resource).await?;
        let mut handle = lease.informer().add_handler(handler, options)?;
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
