//! The kube-runtime 5.0 side, configured as a competent kube-runtime user
//! configures it for the job at hand:
//!
//! - the root stream is `watcher(api, config).default_backoff()`, with
//!   `.modify()` dropping `metadata.managedFields` before the reflector caches
//!   the object whenever the spec strips them (the optimisation kube-rs
//!   documents in `reflector`'s docs and at kube.rs/controllers/optimization);
//! - `watcher::Config::streaming_lists()` when the spec streams the first list,
//!   else the default paged list (pages of 500);
//! - the cached type is `Pod` or [`RawPod`] (metadata decoded, body kept raw);
//! - one handler: `reflect(writer).touched_objects().for_each(handler)`;
//!   several handlers: either one reflector each ([`PeerFanout::Separate`]) or
//!   one `store_shared` reflector whose subscribers are consumed directly
//!   ([`PeerAttach::Subscriber`]) or drive `Controller::for_shared_stream` with
//!   the default controller config ([`PeerAttach::Controller`]); the root
//!   stream is driven on a task of its own, as kube-runtime requires.
//!
//! - one controller on its own ([`PeerFanout::Controller`]):
//!   `Controller::new(api, config)` with the default `controller::Config`
//!   (unbounded concurrency), as kube-runtime's examples start one.
//!
//! Invariant: each handler feeds the same probe type as our side, after it
//! ran; a controller's probe counts reconciles (of the store's current object).

use std::convert::Infallible;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube_runtime::controller::Action;
use kube_runtime::reflector::{self, Store};
use kube_runtime::{watcher, Controller, WatchStreamExt};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use crate::peer_raw::RawPod;
use crate::probe::{parse_rv, HandlerProbe, Probe};
use crate::spec::{
    HandlerKind, InitialList, ManagedFields, PeerAttach, PeerCache, PeerFanout, SideFacts, SideSpec,
};

/// What a type must be for kube's watcher, reflector and `Controller`.
pub trait Cached:
    kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

impl<K> Cached for K where
    K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

/// A store seen without its type: size and whether it holds managedFields.
trait StoreView: Send + Sync {
    fn len(&self) -> usize;
    fn managed_fields_cached(&self) -> bool;
}

impl<K: Cached> StoreView for Store<K> {
    fn len(&self) -> usize {
        Store::len(self)
    }

    fn managed_fields_cached(&self) -> bool {
        self.find(|o| o.meta().managed_fields.is_some()).is_some()
    }
}

/// A running kube-runtime side.
pub struct PeerSide {
    stores: Vec<Box<dyn StoreView>>,
    tasks: Vec<JoinHandle<()>>,
    subscribers: u64,
    controllers: u64,
    /// One per handler, in spec order.
    pub probes: Vec<HandlerProbe>,
}

fn sleep_of(kind: &HandlerKind) -> Result<Option<Duration>> {
    match kind {
        HandlerKind::NoopNative => Ok(None),
        HandlerKind::SleepNative(ms) => Ok(Some(Duration::from_millis(*ms))),
        HandlerKind::Wasm { path, .. } | HandlerKind::WasmController { path, .. } => {
            bail!("kube-runtime side cannot run a WebAssembly handler ({path})")
        }
    }
}

async fn handle<K: Cached>(obj: &K, sleep: Option<Duration>, probe: &Probe) {
    if let Some(d) = sleep {
        tokio::time::sleep(d).await;
    }
    let rv = parse_rv(obj.meta().resource_version.as_deref());
    probe.observe_named(rv, obj.meta().name.as_deref().unwrap_or_default());
}

/// The `.modify()` of a user who does not read managedFields.
fn strip<K: Cached>(o: &mut K) {
    o.meta_mut().managed_fields = None;
}

fn watch_config(spec: &SideSpec) -> watcher::Config {
    let wc = watcher::Config::default();
    match spec.initial_list {
        InitialList::Streaming => wc.streaming_lists(),
        InitialList::Paged => wc,
    }
}

/// What a controller's reconciler does: the handler's behaviour, then the probe.
struct Reconciler {
    probe: Arc<Probe>,
    sleep: Option<Duration>,
}

async fn reconcile<K: Cached>(obj: Arc<K>, ctx: Arc<Reconciler>) -> Result<Action, Infallible> {
    handle(&*obj, ctx.sleep, &ctx.probe).await;
    Ok(Action::await_change())
}

fn error_policy<K: Cached>(_: Arc<K>, _: &Infallible, _: Arc<Reconciler>) -> Action {
    Action::await_change()
}

/// Binds `$s` to the side's root stream and evaluates `$body`: `watcher` with
/// the default backoff, plus `.modify(strip)` when the spec strips
/// managedFields. (The two streams have different types, hence a macro: the
/// side that keeps managedFields runs no `.modify()` at all.)
macro_rules! with_root_stream {
    ($api:expr, $spec:expr, $k:ty, |$s:ident| $body:expr) => {
        match $spec.managed_fields {
            ManagedFields::Strip => {
                let $s = watcher($api, watch_config($spec))
                    .default_backoff()
                    .modify(strip::<$k>);
                $body
            }
            ManagedFields::Keep => {
                let $s = watcher($api, watch_config($spec)).default_backoff();
                $body
            }
        }
    };
}

/// Waits until `store` holds `want` objects, polling `Store::len()` every 2 ms
/// (as our side's sync wait polls), or fails at `deadline`.
///
/// `Store::wait_until_ready()` is not used: in kube-runtime 5.0 its readiness
/// (`DelayedInit` over a oneshot receiver) keeps the waker of the last task
/// that polled it only, so polling it here could take the wake-up from a
/// controller waiting on the same Store. `len()` takes a read lock and
/// registers no waker; the writer swaps the whole initial list into the store
/// at `InitDone`, so the count reaches the fixture's size exactly when the
/// store becomes ready.
async fn store_filled<K: Cached>(
    store: &Store<K>,
    want: u64,
    deadline: tokio::time::Instant,
    timeout: Duration,
) -> Result<()> {
    while (store.len() as u64) < want {
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "a Store held {} of {want} initial objects after {timeout:?}",
                store.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(())
}

impl PeerSide {
    /// Starts the reflector(s) and waits for sync.
    pub async fn start(spec: &SideSpec, client: kube::Client) -> Result<(Self, Vec<String>)> {
        let resource = match spec.peer.cache {
            PeerCache::TypedPod | PeerCache::RawPod => "v1/pods",
            PeerCache::TypedDeployment => "apps/v1/deployments",
        };
        if spec.resource != resource {
            bail!(
                "the kube-runtime side caches {:?} for {resource} (asked for {})",
                spec.peer.cache,
                spec.resource
            );
        }
        match spec.peer.cache {
            PeerCache::TypedPod => Self::start_as::<Pod>(spec, client).await,
            PeerCache::RawPod => Self::start_as::<RawPod>(spec, client).await,
            PeerCache::TypedDeployment => Self::start_as::<Deployment>(spec, client).await,
        }
    }

    async fn start_as<K: Cached>(
        spec: &SideSpec,
        client: kube::Client,
    ) -> Result<(Self, Vec<String>)> {
        let mut stores: Vec<Store<K>> = Vec::new();
        let mut tasks = Vec::new();
        let mut probes = Vec::new();
        let (mut subscribers, mut controllers) = (0, 0);
        match spec.peer.fanout {
            PeerFanout::Separate => {
                for h in &spec.handlers {
                    if h.peer_attach != PeerAttach::Subscriber {
                        bail!(
                            "handler {}: separate reflectors take plain handlers, not controllers",
                            h.name
                        );
                    }
                    let hp = HandlerProbe::new(h);
                    let sleep = sleep_of(&h.kind)?;
                    let (reader, writer) = reflector::store::<K>();
                    let api: Api<K> = Api::all(client.clone());
                    let p = hp.probe.clone();
                    let f = move |r: Result<K, watcher::Error>| {
                        let p = p.clone();
                        async move {
                            match r {
                                Ok(o) => handle(&o, sleep, &p).await,
                                Err(e) => tracing::warn!(error = %e, "watcher error"),
                            }
                        }
                    };
                    let task = with_root_stream!(api, spec, K, |s| tokio::spawn(
                        s.reflect(writer).touched_objects().for_each(f)
                    ));
                    stores.push(reader);
                    tasks.push(task);
                    probes.push(hp);
                }
            }
            PeerFanout::Controller => {
                let [h] = spec.handlers.as_slice() else {
                    bail!("a Controller side has exactly one handler (its reconciler)");
                };
                let hp = HandlerProbe::new(h);
                let sleep = sleep_of(&h.kind)?;
                let ctx = Arc::new(Reconciler {
                    probe: hp.probe.clone(),
                    sleep,
                });
                let api: Api<K> = Api::all(client.clone());
                let controller = Controller::new(api, watch_config(spec));
                stores.push(controller.store());
                controllers += 1;
                let run = controller
                    .run(reconcile::<K>, error_policy::<K>, ctx)
                    .for_each(|_| futures::future::ready(()));
                tasks.push(tokio::spawn(run));
                probes.push(hp);
            }
            PeerFanout::Shared { buffer } => {
                let (reader, writer) = reflector::store_shared::<K>(buffer);
                for h in &spec.handlers {
                    let hp = HandlerProbe::new(h);
                    let sleep = sleep_of(&h.kind)?;
                    let sub = writer
                        .subscribe()
                        .context("store_shared gave no subscriber")?;
                    let p = hp.probe.clone();
                    match h.peer_attach {
                        PeerAttach::Subscriber => {
                            subscribers += 1;
                            tasks.push(tokio::spawn(sub.for_each(move |o: Arc<K>| {
                                let p = p.clone();
                                async move { handle(&*o, sleep, &p).await }
                            })));
                        }
                        PeerAttach::Controller => {
                            controllers += 1;
                            let ctx = Arc::new(Reconciler { probe: p, sleep });
                            let run = Controller::for_shared_stream(sub, reader.clone())
                                .run(reconcile::<K>, error_policy::<K>, ctx)
                                .for_each(|_| futures::future::ready(()));
                            tasks.push(tokio::spawn(run));
                        }
                    }
                    probes.push(hp);
                }
                let api: Api<K> = Api::all(client.clone());
                let root = |r: Result<K, watcher::Error>| async move {
                    if let Err(e) = r {
                        tracing::warn!(error = %e, "watcher error");
                    }
                };
                let task = with_root_stream!(api, spec, K, |s| tokio::spawn(
                    s.reflect_shared(writer).applied_objects().for_each(root)
                ));
                tasks.push(task);
                stores.push(reader);
            }
        }
        let notes = Self::wait_synced(spec, &stores, &probes).await?;
        let side = PeerSide {
            stores: stores
                .into_iter()
                .map(|s| Box::new(s) as Box<dyn StoreView>)
                .collect(),
            tasks,
            subscribers,
            controllers,
            probes,
        };
        Ok((side, notes))
    }

    async fn wait_synced<K: Cached>(
        spec: &SideSpec,
        stores: &[Store<K>],
        probes: &[HandlerProbe],
    ) -> Result<Vec<String>> {
        let timeout = Duration::from_secs(spec.sync_timeout_secs);
        let deadline = tokio::time::Instant::now() + timeout;
        for s in stores {
            store_filled(s, spec.expect_objects, deadline, timeout).await?;
        }
        for p in probes.iter().filter(|p| p.tracked) {
            while p.total() < spec.expect_objects {
                if tokio::time::Instant::now() >= deadline {
                    bail!(
                        "handler {} had seen {} of {} initial objects after {timeout:?}",
                        p.name,
                        p.total(),
                        spec.expect_objects
                    );
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        Ok(Vec::new())
    }

    /// Objects in the cache(s), summed.
    pub fn cached_objects(&self) -> u64 {
        self.stores.iter().map(|s| s.len() as u64).sum()
    }

    /// How the side is configured, as observed.
    pub fn facts(&self) -> SideFacts {
        SideFacts {
            managed_fields_cached: Some(self.stores.iter().any(|s| s.managed_fields_cached())),
            reflectors: self.stores.len() as u64,
            subscribers: self.subscribers,
            controllers: self.controllers,
            streaming_lists: None,
            ours_api: None,
        }
    }

    /// Stops every task.
    pub fn stop(self) {
        for t in self.tasks {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_runtime::watcher::Event;

    fn pod(name: &str) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.metadata.namespace = Some("default".into());
        p
    }

    /// The harness's sync wait registers no waker on the Store's readiness, so
    /// a task already awaiting `wait_until_ready()` on the same Store (as a
    /// controller does) is still woken when the initial list is done.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sync_wait_leaves_the_store_readiness_to_its_other_waiters() {
        let (store, mut writer) = reflector::store::<Pod>();
        let waiter = {
            let store = store.clone();
            tokio::spawn(async move { store.wait_until_ready().await.is_ok() })
        };
        // Let the waiter poll first and park its waker.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let timeout = Duration::from_secs(30);
        let deadline = tokio::time::Instant::now() + timeout;
        let wait = {
            let store = store.clone();
            tokio::spawn(async move { store_filled(&store, 3, deadline, timeout).await })
        };
        // The harness's wait polls for a while before the list is done.
        tokio::time::sleep(Duration::from_millis(50)).await;
        writer.apply_watcher_event(&Event::Init);
        for n in ["a", "b", "c"] {
            writer.apply_watcher_event(&Event::InitApply(pod(n)));
        }
        writer.apply_watcher_event(&Event::InitDone);
        wait.await.unwrap().unwrap();
        let woken = tokio::time::timeout(Duration::from_secs(10), waiter).await;
        assert!(
            matches!(woken, Ok(Ok(true))),
            "the task awaiting wait_until_ready() was not woken: {woken:?}"
        );
    }

    /// The wait ends only when the store holds every initial object: a store
    /// still in its initial list (objects buffered, not yet swapped in) is not
    /// synced.
    #[tokio::test]
    async fn sync_wait_ends_only_when_the_store_holds_every_initial_object() {
        let (store, mut writer) = reflector::store::<Pod>();
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(pod("a")));
        let timeout = Duration::from_millis(100);
        let deadline = tokio::time::Instant::now() + timeout;
        let early = store_filled(&store, 1, deadline, timeout).await;
        assert!(early.is_err(), "synced before InitDone");
        writer.apply_watcher_event(&Event::InitDone);
        let deadline = tokio::time::Instant::now() + timeout;
        store_filled(&store, 1, deadline, timeout).await.unwrap();
    }
}
