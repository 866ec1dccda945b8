//! Typed access with k8s-openapi types: the resource id (for example
//! `v1/pods` or `apps/v1/deployments`) comes from the type. Needs the
//! `k8s-openapi` feature.
//!
//! ```ignore
//! use k8s_openapi::api::core::v1::Pod;
//! let pods: Vec<Pod> = wasm_informer_sdk::typed::list(Some("default"), Some("app=web"))?;
//! let api = wasm_informer_sdk::typed::Api::<Pod>::namespaced("default");
//! api.delete("web-0", &Default::default())?;
//! ```

use std::marker::PhantomData;

use k8s_openapi::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::kube::{self, DeleteParams, Patch};
use crate::Result;

/// The host's resource id of `K`: `API_VERSION/URL_PATH_SEGMENT`.
pub fn resource_id<K: Resource>() -> String {
    format!("{}/{}", K::API_VERSION, K::URL_PATH_SEGMENT)
}

/// One cached object by key (`namespace/name` or `name`).
pub fn get<K: Resource + DeserializeOwned>(key: &str) -> Result<Option<K>> {
    crate::cache::get(&resource_id::<K>(), key)
}

/// Cached objects, optionally in one namespace and matching a label selector.
pub fn list<K: Resource + DeserializeOwned>(
    namespace: Option<&str>,
    label_selector: Option<&str>,
) -> Result<Vec<K>> {
    crate::cache::list(&resource_id::<K>(), namespace, label_selector)
}

/// Cached objects whose value for the named index equals `value`.
pub fn by_index<K: Resource + DeserializeOwned>(index: &str, value: &str) -> Result<Vec<K>> {
    crate::cache::by_index(&resource_id::<K>(), index, value)
}

/// Whether `K`'s informer has finished its first list.
pub fn has_synced<K: Resource>() -> Result<bool> {
    crate::cache::has_synced(&resource_id::<K>()).map_err(Into::into)
}

/// The API for objects of type `K`, in one namespace or cluster-wide, as
/// kube-rs's `Api<K>` reads.
#[derive(Debug, Clone)]
pub struct Api<K> {
    namespace: Option<String>,
    resource: String,
    _k: PhantomData<fn() -> K>,
}

impl<K: Resource + Serialize + DeserializeOwned> Api<K> {
    /// Objects in `namespace`.
    pub fn namespaced(namespace: &str) -> Self {
        Self {
            namespace: Some(namespace.to_string()),
            resource: resource_id::<K>(),
            _k: PhantomData,
        }
    }

    /// Cluster-scoped objects.
    pub fn cluster() -> Self {
        Self {
            namespace: None,
            resource: resource_id::<K>(),
            _k: PhantomData,
        }
    }

    fn ns(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// A live read, bypassing the cache.
    pub fn get(&self, name: &str) -> Result<K> {
        kube::get(&self.resource, self.ns(), name)?.decode()
    }

    /// Creates `object`; the server's answer.
    pub fn create(&self, object: &K) -> Result<K> {
        kube::create(&self.resource, self.ns(), object)?.decode()
    }

    /// Replaces `name` with `object` (its resourceVersion is the precondition).
    pub fn replace(&self, name: &str, object: &K) -> Result<K> {
        kube::replace(&self.resource, self.ns(), name, object)?.decode()
    }

    /// Patches `name`.
    pub fn patch<P: Serialize>(&self, name: &str, patch: &Patch<P>, force: bool) -> Result<K> {
        kube::patch(&self.resource, self.ns(), name, patch, force)?.decode()
    }

    /// Deletes `name`: `Some` while finalizers hold it, `None` when it is gone.
    pub fn delete(&self, name: &str, params: &DeleteParams) -> Result<Option<K>> {
        kube::delete(&self.resource, self.ns(), name, params)?
            .map(|o| o.decode())
            .transpose()
    }

    /// Patches the status subresource of `name`.
    pub fn patch_status<P: Serialize>(
        &self,
        name: &str,
        patch: &Patch<P>,
        force: bool,
    ) -> Result<K> {
        kube::patch_status(&self.resource, self.ns(), name, patch, force)?.decode()
    }

    /// Replaces the status subresource of `name`.
    pub fn replace_status(&self, name: &str, object: &K) -> Result<K> {
        kube::replace_status(&self.resource, self.ns(), name, object)?.decode()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_ids_match_the_host() {
        assert_eq!(resource_id::<k8s_openapi::api::core::v1::Pod>(), "v1/pods");
        assert_eq!(
            resource_id::<k8s_openapi::api::apps::v1::Deployment>(),
            "apps/v1/deployments"
        );
    }
}
