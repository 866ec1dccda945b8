//! The `cache` capability: read-only queries against the host's shared cache,
//! for the resources the manifest's `read` list names.
//!
//! Job: gate each query by the `read` list, answer it from the [`CacheView`],
//! and hand the results to the guest: as records in 0.1, as object
//! references in 0.2 (the guest then copies only the fields it reads).
//!
//! Invariant: a query never traps the guest. A read of a resource outside the
//! `read` list returns `forbidden`; a key or namespace the API server's name
//! rules refuse is `invalid-selector` naming the rule (it could match
//! nothing); every other failure is a `cache-error`. Guest strings appear in
//! messages only quoted and bounded.

use std::sync::Arc;

use kube_informer::cache_view::{CacheError, CacheView};
use kube_informer::names::{quoted, split_key, Namespace};
use kube_informer::object::ObjectRef;
use wasmtime::component::{HasData, HasSelf, Linker};

use crate::host_state::HostState;

use crate::objects::{ObjectTable, MAX_OBJECTS_PER_CALL};
use crate::world::v0_1;
use crate::world::v0_2;

/// The cache capability of one instance.
#[derive(Clone)]
pub struct CacheState {
    plugin: Arc<str>,
    view: Arc<dyn CacheView>,
    /// Resources the manifest's `read` list allows, sorted.
    readable: Arc<[String]>,
}

impl CacheState {
    /// Queries through `view`, allowing the resources in `readable`.
    pub fn new(plugin: Arc<str>, view: Arc<dyn CacheView>, readable: Arc<[String]>) -> Self {
        Self {
            plugin,
            view,
            readable,
        }
    }

    /// Whether the manifest allows reading `resource`.
    pub fn may_read(&self, resource: &str) -> bool {
        self.readable.iter().any(|r| r == resource)
    }

    fn gate(&self, resource: &str) -> Result<&dyn CacheView, CacheError> {
        if self.may_read(resource) {
            Ok(&*self.view)
        } else {
            Err(CacheError::Forbidden(format!(
                "plugin {} may not read {}: it is not in the manifest's `read` list",
                self.plugin,
                quoted(resource)
            )))
        }
    }

    fn get(&self, resource: &str, key: &str) -> Result<Option<ObjectRef>, CacheError> {
        let view = self.gate(resource)?;
        // A key the API server could not have named matches nothing; say why.
        split_key(key).map_err(|e| CacheError::InvalidSelector(format!("invalid key: {e}")))?;
        view.get(resource, key)
    }

    fn list(
        &self,
        resource: &str,
        namespace: Option<&str>,
        selector: Option<&str>,
    ) -> Result<Vec<ObjectRef>, CacheError> {
        let view = self.gate(resource)?;
        if let Some(ns) = namespace {
            Namespace::parse(ns).map_err(|e| CacheError::InvalidSelector(e.to_string()))?;
        }
        view.list(resource, namespace, selector)
    }

    /// Whether the host's cache holds `key` of `resource`, whatever the
    /// plugin's `read` list: `None` when no informer of the host serves the
    /// resource.
    pub fn holds(&self, resource: &str, key: &str) -> Option<bool> {
        match self.view.get(resource, key) {
            Ok(o) => Some(o.is_some()),
            Err(_) => None,
        }
    }

    fn by_index(
        &self,
        resource: &str,
        index: &str,
        value: &str,
    ) -> Result<Vec<ObjectRef>, CacheError> {
        self.gate(resource)?.by_index(resource, index, value)
    }

    fn has_synced(&self, resource: &str) -> Result<bool, CacheError> {
        self.gate(resource)?.has_synced(resource)
    }
}

// 0.1: records.

fn to_v01(e: CacheError) -> v0_1::wit::CacheError {
    use v0_1::wit::CacheError as W;
    match e {
        CacheError::Forbidden(m) => W::Forbidden(m),
        CacheError::UnknownResource(m) => W::UnknownResource(m),
        CacheError::InvalidSelector(m) => W::InvalidSelector(m),
        CacheError::UnknownIndex(m) => W::UnknownIndex(m),
    }
}

impl v0_1::cache_iface::Host for CacheState {
    fn get(
        &mut self,
        resource: String,
        key: String,
    ) -> Result<Option<v0_1::wit::ObjectView>, v0_1::wit::CacheError> {
        CacheState::get(self, &resource, &key)
            .map(|o| o.as_deref().map(v0_1::object_view))
            .map_err(to_v01)
    }

    fn list(
        &mut self,
        resource: String,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<v0_1::wit::ObjectView>, v0_1::wit::CacheError> {
        CacheState::list(
            self,
            &resource,
            namespace.as_deref(),
            label_selector.as_deref(),
        )
        .map(|v| v.iter().map(|o| v0_1::object_view(o)).collect())
        .map_err(to_v01)
    }

    fn by_index(
        &mut self,
        resource: String,
        index_name: String,
        value: String,
    ) -> Result<Vec<v0_1::wit::ObjectView>, v0_1::wit::CacheError> {
        CacheState::by_index(self, &resource, &index_name, &value)
            .map(|v| v.iter().map(|o| v0_1::object_view(o)).collect())
            .map_err(to_v01)
    }

    fn has_synced(&mut self, resource: String) -> Result<bool, v0_1::wit::CacheError> {
        CacheState::has_synced(self, &resource).map_err(to_v01)
    }
}

impl v0_1::wit::Host for CacheState {}

// 0.2: object references.

/// The cache capability as the 0.2 bindings see it: the state and the call's
/// object references, where results are kept.
pub struct CacheView02<'a> {
    /// The capability.
    pub state: &'a CacheState,
    /// The call's object references.
    pub objects: &'a mut ObjectTable,
}

/// `HasData` of [`CacheView02`].
pub struct Cache02;

impl HasData for Cache02 {
    type Data<'a> = CacheView02<'a>;
}

type WitCacheError = v0_2::types::CacheError;

fn to_v02(e: CacheError) -> WitCacheError {
    match e {
        CacheError::Forbidden(m) => WitCacheError::Forbidden(m),
        CacheError::UnknownResource(m) => WitCacheError::UnknownResource(m),
        CacheError::InvalidSelector(m) => WitCacheError::InvalidSelector(m),
        CacheError::UnknownIndex(m) => WitCacheError::UnknownIndex(m),
    }
}

impl CacheView02<'_> {
    fn refs(&mut self, resource: &str, objects: Vec<ObjectRef>) -> Result<Vec<u32>, WitCacheError> {
        self.objects
            .push_all(resource, objects)
            .map_err(|_| WitCacheError::TooManyObjects(MAX_OBJECTS_PER_CALL))
    }
}

impl v0_2::cache::Host for CacheView02<'_> {
    fn get(&mut self, resource: String, key: String) -> Result<Option<u32>, WitCacheError> {
        match self.state.get(&resource, &key).map_err(to_v02)? {
            Some(o) => Ok(self.refs(&resource, vec![o])?.pop()),
            None => Ok(None),
        }
    }

    fn list(
        &mut self,
        resource: String,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<u32>, WitCacheError> {
        let objects = self
            .state
            .list(&resource, namespace.as_deref(), label_selector.as_deref())
            .map_err(to_v02)?;
        self.refs(&resource, objects)
    }

    fn by_index(
        &mut self,
        resource: String,
        index_name: String,
        value: String,
    ) -> Result<Vec<u32>, WitCacheError> {
        let objects = self
            .state
            .by_index(&resource, &index_name, &value)
            .map_err(to_v02)?;
        self.refs(&resource, objects)
    }

    fn has_synced(&mut self, resource: String) -> Result<bool, WitCacheError> {
        self.state.has_synced(&resource).map_err(to_v02)
    }
}

/// Links the cache capability (0.1 and 0.2) for instances whose store data is
/// [`HostState`].
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    v0_1::wasm_informer::plugin::types::add_to_linker::<HostState, HasSelf<CacheState>>(
        linker,
        |s| &mut s.cache,
    )?;
    v0_1::cache_iface::add_to_linker::<HostState, HasSelf<CacheState>>(linker, |s| &mut s.cache)?;
    v0_2::cache::add_to_linker::<HostState, Cache02>(linker, HostState::cache02)
}
