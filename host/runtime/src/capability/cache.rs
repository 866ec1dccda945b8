//! The `cache` capability: read-only queries against the host's shared cache,
//! for the resources the manifest's `read` list names.
//!
//! Job: gate each query by the `read` list, answer it from the [`CacheView`],
//! and hand the results to the guest: as records in 0.1, as `object` handles
//! in 0.2 (the guest then copies only the fields it reads).
//!
//! Invariant: a query never traps the guest. A read of a resource outside the
//! `read` list returns `forbidden`; every other failure is a `cache-error`.

use std::sync::Arc;

use kube_informer::cache_view::{CacheError, CacheView};
use kube_informer::object::ObjectRef;
use wasmtime::component::{HasData, HasSelf, Linker, Resource, ResourceTable};

use crate::host_state::HostState;

use crate::world::v0_1;
use crate::world::v0_2::{self, ObjectHandle};

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
                "plugin {} may not read {resource}: it is not in the manifest's `read` list",
                self.plugin
            )))
        }
    }

    fn get(&self, resource: &str, key: &str) -> Result<Option<ObjectRef>, CacheError> {
        self.gate(resource)?.get(resource, key)
    }

    fn list(
        &self,
        resource: &str,
        namespace: Option<&str>,
        selector: Option<&str>,
    ) -> Result<Vec<ObjectRef>, CacheError> {
        self.gate(resource)?.list(resource, namespace, selector)
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

// 0.2: object handles.

/// The cache capability as the 0.2 bindings see it: the state and the
/// instance's resource table, where returned objects are kept.
pub struct CacheView02<'a> {
    /// The capability.
    pub state: &'a CacheState,
    /// The instance's resource table.
    pub table: &'a mut ResourceTable,
}

/// `HasData` of [`CacheView02`].
pub struct Cache02;

impl HasData for Cache02 {
    type Data<'a> = CacheView02<'a>;
}

fn to_v02(e: CacheError) -> v0_2::types::CacheError {
    use v0_2::types::CacheError as W;
    match e {
        CacheError::Forbidden(m) => W::Forbidden(m),
        CacheError::UnknownResource(m) => W::UnknownResource(m),
        CacheError::InvalidSelector(m) => W::InvalidSelector(m),
        CacheError::UnknownIndex(m) => W::UnknownIndex(m),
    }
}

/// Puts `object` in `table` as a handle the guest owns.
pub fn own_handle(
    table: &mut ResourceTable,
    resource: &Arc<str>,
    object: ObjectRef,
) -> Result<Resource<ObjectHandle>, wasmtime::component::ResourceTableError> {
    table.push(ObjectHandle {
        resource: resource.clone(),
        object,
    })
}

impl CacheView02<'_> {
    fn handles(
        &mut self,
        resource: &str,
        objects: Vec<ObjectRef>,
    ) -> Result<Vec<Resource<ObjectHandle>>, CacheError> {
        let resource: Arc<str> = resource.into();
        objects
            .into_iter()
            .map(|object| own_handle(self.table, &resource, object))
            .collect::<Result<_, _>>()
            .map_err(|e| CacheError::UnknownResource(format!("cannot hand out an object: {e}")))
    }
}

impl v0_2::cache::Host for CacheView02<'_> {
    fn get(
        &mut self,
        resource: String,
        key: String,
    ) -> Result<Option<Resource<ObjectHandle>>, v0_2::types::CacheError> {
        match self.state.get(&resource, &key).map_err(to_v02)? {
            Some(o) => Ok(self.handles(&resource, vec![o]).map_err(to_v02)?.pop()),
            None => Ok(None),
        }
    }

    fn list(
        &mut self,
        resource: String,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<Resource<ObjectHandle>>, v0_2::types::CacheError> {
        let objects = self
            .state
            .list(&resource, namespace.as_deref(), label_selector.as_deref())
            .map_err(to_v02)?;
        self.handles(&resource, objects).map_err(to_v02)
    }

    fn by_index(
        &mut self,
        resource: String,
        index_name: String,
        value: String,
    ) -> Result<Vec<Resource<ObjectHandle>>, v0_2::types::CacheError> {
        let objects = self
            .state
            .by_index(&resource, &index_name, &value)
            .map_err(to_v02)?;
        self.handles(&resource, objects).map_err(to_v02)
    }

    fn has_synced(&mut self, resource: String) -> Result<bool, v0_2::types::CacheError> {
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
