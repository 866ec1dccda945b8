//! The cache a plugin under `wasm-informer test` queries: one Indexer per
//! resource, filled from the fixture's objects and changed by its events,
//! with the indexes of the config directory's `host.toml` (when the manifest
//! lives in one) and the host's transform.
//!
//! Invariant: the cache holds exactly the fixture's current objects, as the
//! host's informers would after the same list and watch events (managedFields
//! stripped unless the transform keeps them); it is changed before the plugin
//! hears of a change (I2), and every resource of the fixture, the plugin's
//! `resources` and its `read` list is known and synced.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube_informer::cache_view::{CacheError, CacheView};
use kube_informer::indexer::{IndexSpec, Indexer};
use kube_informer::object::{Object, ObjectRef, Transform};
use parking_lot::RwLock;

/// The fixture's cache.
pub struct FixtureCache {
    indexers: RwLock<BTreeMap<String, Arc<Indexer>>>,
    indexes: BTreeMap<String, Vec<IndexSpec>>,
    transform: Transform,
}

impl std::fmt::Debug for FixtureCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FixtureCache")
            .field(
                "resources",
                &self.indexers.read().keys().collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl FixtureCache {
    /// An empty cache with `indexes` per resource.
    pub fn new(indexes: BTreeMap<String, Vec<IndexSpec>>, transform: Transform) -> Self {
        Self {
            indexers: RwLock::new(BTreeMap::new()),
            indexes,
            transform,
        }
    }

    /// The resource's Indexer, created (with its indexes) on first use.
    pub fn resource(&self, resource: &str) -> Result<Arc<Indexer>, String> {
        if let Some(i) = self.indexers.read().get(resource) {
            return Ok(i.clone());
        }
        let ix = Indexer::new();
        for spec in self.indexes.get(resource).into_iter().flatten() {
            ix.add_index(spec.clone())
                .map_err(|e| format!("index {} of {resource}: {e}", spec.name))?;
        }
        let ix = Arc::new(ix);
        self.indexers
            .write()
            .entry(resource.to_string())
            .or_insert(ix.clone());
        Ok(ix)
    }

    /// Parses an object as the informer caches it.
    pub fn object(&self, value: &serde_json::Value) -> Result<ObjectRef, String> {
        let raw = serde_json::to_vec(value).map_err(|e| e.to_string())?;
        Object::from_json(&raw, &self.transform)
            .map(Arc::new)
            .map_err(|e| e.to_string())
    }

    /// Stores `object` under its key, returning the previous state.
    pub fn upsert(&self, resource: &str, object: ObjectRef) -> Result<Option<ObjectRef>, String> {
        let key: Arc<str> = object.key().into();
        Ok(self.resource(resource)?.upsert(&key, object))
    }

    /// Removes `key`, returning its last state.
    pub fn remove(&self, resource: &str, key: &str) -> Result<Option<ObjectRef>, String> {
        Ok(self.resource(resource)?.remove(key))
    }

    /// The current state of `key`.
    pub fn current(&self, resource: &str, key: &str) -> Option<ObjectRef> {
        self.indexers.read().get(resource)?.get(key)
    }

    fn known(&self, resource: &str) -> Result<Arc<Indexer>, CacheError> {
        self.indexers
            .read()
            .get(resource)
            .cloned()
            .ok_or_else(|| CacheError::UnknownResource(resource.to_string()))
    }
}

impl CacheView for FixtureCache {
    fn get(&self, resource: &str, key: &str) -> Result<Option<ObjectRef>, CacheError> {
        Ok(self.known(resource)?.get(key))
    }

    fn list(
        &self,
        resource: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<ObjectRef>, CacheError> {
        self.known(resource)?
            .list_selector_str(namespace, label_selector)
    }

    fn by_index(
        &self,
        resource: &str,
        index: &str,
        value: &str,
    ) -> Result<Vec<ObjectRef>, CacheError> {
        self.known(resource)?.by_index(index, value)
    }

    fn has_synced(&self, resource: &str) -> Result<bool, CacheError> {
        self.known(resource).map(|_| true)
    }
}
