//! Shared scenario steps of the client-facing integration tests: seed the
//! simulator's store with configmaps, run kube-runtime's watcher into a
//! reflector until it is ready, and take the next event of a raw watch.
//!
//! Invariant: every step either completes within `common::PATIENCE` or fails
//! the test with a message; nothing here depends on timing being fast.
#![allow(dead_code)]

use std::fmt::Debug;
use std::hash::Hash;

use apisim::Store;
use futures::StreamExt;
use kube::api::Api;
use kube::Resource;
use kube_runtime::reflector::{self, Store as Reader};
use kube_runtime::watcher;
use kube_runtime::WatchStreamExt;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::common::{configmap, PATIENCE};

/// Creates one empty, unlabelled configmap per name in namespace `ns`.
pub fn seed_configmaps(store: &Store, ns: &str, names: impl IntoIterator<Item = String>) {
    let cms = store.rid("v1", "configmaps");
    for name in names {
        store
            .create(cms, Some(ns), configmap(&name, ns, json!({})))
            .unwrap();
    }
}

/// A reflector fed by kube-runtime's watcher on `api`, running on its own task
/// until the handle is aborted.
pub struct Reflected<K: Resource + Clone + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    /// The reflector's cache.
    pub reader: Reader<K>,
    /// The task driving the watch stream.
    pub task: tokio::task::JoinHandle<()>,
}

/// Starts kube-runtime's watcher with `config` into a reflector; with
/// `backoff`, the stream retries errors with the default backoff.
pub fn reflect<K>(api: Api<K>, config: watcher::Config, backoff: bool) -> Reflected<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api, config));
    let task = if backoff {
        tokio::spawn(
            stream
                .default_backoff()
                .for_each(|_| futures::future::ready(())),
        )
    } else {
        tokio::spawn(stream.for_each(|_| futures::future::ready(())))
    };
    Reflected { reader, task }
}

/// Waits (at most PATIENCE) until the reflector has its initial state.
pub async fn ready<K>(reader: &Reader<K>)
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    tokio::time::timeout(PATIENCE, reader.wait_until_ready())
        .await
        .expect("watcher becomes ready")
        .unwrap();
}

/// The next event of a watch stream, waiting at most PATIENCE; panics on a
/// timeout, a stream error or the end of the stream.
pub async fn next_event<K, S>(s: &mut S) -> kube::api::WatchEvent<K>
where
    S: futures::Stream<Item = kube::Result<kube::api::WatchEvent<K>>> + Unpin,
{
    use futures::TryStreamExt;
    tokio::time::timeout(PATIENCE, s.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
}
