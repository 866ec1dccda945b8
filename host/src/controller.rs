//! A running controller plugin: its work queue, the listeners that feed it
//! (the manifest's `for`, `owns` and `[[watches]]`), and its workers.
//!
//! Job: [`ControllerPart::start`] starts `workers` instances of the component
//! (each runs `init`), subscribes one [`Enqueue`] trigger per watched
//! resource to its shared informer, and holds the workers behind a gate.
//! [`ControllerPart::release`] opens the gate once every trigger's informer
//! has synced (so a reconcile never acts on a partial cache, as
//! controller-runtime's `WaitForCacheSync`); the supervisor releases a new
//! version only after the previous version's workers have stopped, so two
//! versions never reconcile one key at once. [`ControllerPart::stop`] lets
//! the reconciles in progress finish and starts no other.
//!
//! In leader or sharded mode (`[cluster]`), the controller follows the
//! cluster's ownership predicate, routed by the primary's own key
//! ([`OwnedKeys`]): the `for` listener owns a primary, and an `owns` listener
//! a child, exactly when this replica owns the primary key it triggers (a
//! primary with a controller owner of its own is routed by its own key, not
//! its owner's, and so is its delete); `[[watches]]` triggers and the workers
//! check each primary key the same way. On a change the listeners replay the
//! objects of gained keys, the queue drops the keys it lost and the hand-over
//! waits for their reconciles in progress (I10).
//!
//! A hot reload hands the work queue over ([`ControllerPart::hand_over`]):
//! the new version subscribes its triggers to the old version's queue, with
//! its pending keys, requeue-after timers and failure counts (kept unless the
//! new manifest changes the retry settings), and the keys of objects deleted
//! meanwhile. The old workers stop without shutting the queue down, so a
//! reconcile that ends after the stop still files its retry or requeue; the
//! new workers start only once the old ones are idle, however long that
//! takes ([`ControllerPart::wait_stopped`] reports the wait every few
//! seconds), so no key runs in two versions at once.
//!
//! Invariants:
//! - The queue's only input is the triggers; in a cluster mode each key they
//!   queue is one this replica owns.
//! - Nothing of a version is left running if any step of its start fails.
//! - A queue handed over is never shut down by the version that handed it.

use std::sync::Arc;
use std::time::Duration;

use kube_informer::workqueue::triggers::{Enqueue, KeyMap};
use kube_informer::workqueue::{
    Admit, KeyFilter, OwnedKeys, RateLimiterConfig, Route, StartGate, WorkQueue, WorkerOptions,
    Workers,
};
use kube_informer::{HandlerOptions, InformerRegistry, Registration};
use wasm_informer_runtime::{
    HostServices, LoadedPlugin, PluginEngine, PluginStatus, ReconcileWorker,
};

use crate::cluster::Cluster;
use crate::config::{ControllerSpec, PluginManifest};
use crate::report::ControllerReport;

/// The listener queue in front of each trigger. The trigger empties it into
/// the work queue at once, so it only ever holds a batch in flight; it is
/// large so that a burst never needs the overflow path.
pub const TRIGGER_QUEUE: usize = 4096;

/// How often the gate checks whether the triggers' informers have synced.
const SYNC_POLL: Duration = Duration::from_millis(20);

/// How often a new version that waits for the old one's reconciles says so.
pub const HANDOVER_WARN_EVERY: Duration = Duration::from_secs(5);

/// Where a controller version starts: the cluster it shares keys with, and
/// the queue the previous version hands over.
#[derive(Debug, Default)]
pub struct Placement<'a> {
    /// In leader or sharded mode: the cluster, whose ownership the
    /// controller follows.
    pub cluster: Option<&'a Arc<Cluster>>,
    /// The previous version's queue, if it reconciled the same primary.
    pub handed: Option<HandedQueue>,
}

/// A controller's work queue on its way from one version to the next.
#[derive(Clone)]
pub struct HandedQueue {
    queue: Arc<WorkQueue<Arc<str>>>,
    primary: String,
    rate_limiter: RateLimiterConfig,
}

impl std::fmt::Debug for HandedQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandedQueue")
            .field("primary", &self.primary)
            .field("queued", &self.queue.queued())
            .finish()
    }
}

/// One version of a controller plugin, running.
pub struct ControllerPart {
    spec: ControllerSpec,
    queue: Arc<WorkQueue<Arc<str>>>,
    workers: Workers<Arc<str>>,
    gate: Arc<StartGate>,
    triggers: Vec<Registration>,
    registry: Arc<InformerRegistry>,
    opener: Option<tokio::task::JoinHandle<()>>,
    /// In a cluster mode: the keys this replica owns (followed on change).
    _owned: Option<Arc<OwnedKeys>>,
    /// The queue came from the previous version (its counters are in it).
    inherited: bool,
}

impl std::fmt::Debug for ControllerPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerPart")
            .field("primary", &self.spec.primary.value)
            .field("workers", &self.workers.len())
            .finish()
    }
}

impl ControllerPart {
    /// Starts the workers (held) and subscribes the triggers. With
    /// `cluster`, only the keys this replica owns are queued and reconciled.
    pub async fn start(
        registry: &Arc<InformerRegistry>,
        engine: Arc<PluginEngine>,
        loaded: Arc<LoadedPlugin>,
        services: HostServices,
        manifest: &PluginManifest,
        status: Arc<PluginStatus>,
        place: Placement<'_>,
    ) -> Result<Self, String> {
        let Placement { cluster, handed } = place;
        let spec = manifest
            .controller
            .clone()
            .ok_or_else(|| format!("{}: not a controller manifest", manifest.file.display()))?;
        let primary = spec.primary.value.clone();
        if let Some(c) = cluster {
            let owns: Vec<String> = spec.owns.iter().map(|o| o.value.clone()).collect();
            let watches: Vec<String> = spec
                .watches
                .iter()
                .map(|w| w.resource.value.clone())
                .collect();
            c.check_controller(&primary, &owns, &watches)
                .map_err(|e| format!("{}: {e}", manifest.file.display()))?;
        }
        let reconcilers = ReconcileWorker::start_all(
            engine,
            loaded,
            services,
            &primary,
            spec.workers,
            Some(status),
        )
        .await
        .map_err(|e| format!("{}: {e}", manifest.wasm.display()))?;
        // The previous version's queue, if it reconciled the same primary.
        let handed = handed.filter(|h| h.primary == primary);
        let inherited = handed.is_some();
        let queue = match handed {
            Some(h) => {
                if h.rate_limiter != spec.rate_limiter {
                    tracing::info!(plugin = %manifest.name, "the retry settings changed: failure counts start again from zero");
                    h.queue.set_rate_limiter(spec.rate_limiter.build());
                }
                h.queue
            }
            None => WorkQueue::<Arc<str>>::new(spec.rate_limiter),
        };
        queue.set_max_low_priority_wait(spec.max_low_priority_wait);
        // Sharding hashes objects with their resource's kind: learn every
        // trigger's before subscribing (the leases keep the informers up
        // until then).
        let mut _kinds = Vec::new();
        if let Some(c) = cluster {
            for r in spec.resource_ids() {
                _kinds.push(c.learn_resource(registry, &r).await);
            }
        }
        let owned = cluster.map(|c| OwnedKeys::follow(c.ownership().clone(), &primary, &queue));
        let filter: Option<Arc<dyn KeyFilter>> = owned.clone().map(|o| o as Arc<dyn KeyFilter>);
        let admit: Option<Admit<Arc<str>>> = filter.clone().map(|f| {
            let primary = primary.clone();
            Arc::new(move |k: &Arc<str>| f.admits(&primary, k)) as Admit<Arc<str>>
        });
        let gate = StartGate::new();
        let workers = Workers::spawn_with(
            queue.clone(),
            reconcilers,
            WorkerOptions {
                name: manifest.name.clone(),
                gate: gate.clone(),
                admit,
            },
        );
        // `for` and `owns` listeners carry a predicate routed by the primary
        // key their objects trigger; `watches` objects name their primary by
        // a label or annotation, so their keys are filtered instead.
        let routed = |map: &KeyMap| {
            owned
                .as_ref()
                .zip(Route::of(map))
                .map(|(o, route)| o.route(route))
        };
        let options = |resync: bool, selector: bool, map: &KeyMap| HandlerOptions {
            name: manifest.name.clone(),
            queue_capacity: TRIGGER_QUEUE,
            resync: (resync && manifest.limits.resync_seconds > 0)
                .then(|| Duration::from_secs(manifest.limits.resync_seconds)),
            namespace: manifest.namespace.clone(),
            label_selector: if selector {
                manifest.label_selector.clone()
            } else {
                None
            },
            ownership: routed(map),
        };
        let trigger = |map: KeyMap, filtered: bool| {
            let t = Enqueue::new(queue.clone(), &primary, map);
            match (&filter, filtered) {
                (Some(f), true) => t.with_filter(f.clone()),
                _ => t,
            }
        };
        let mut triggers = Vec::new();
        let reg = registry
            .add_handler(
                &primary,
                trigger(KeyMap::Primary, false),
                options(true, true, &KeyMap::Primary),
            )
            .await
            .map_err(|e| {
                manifest
                    .error_at(spec.primary.position, "for", e.to_string())
                    .to_string()
            })?;
        triggers.push(reg);
        let primary_spec = registry
            .informer(&primary)
            .map(|i| i.spec().clone())
            .ok_or_else(|| {
                format!("{primary}: its informer stopped while the controller started")
            })?;
        // The primary's own trigger is above; then `owns`, then `watches`.
        let maps = spec.key_maps(
            &primary_spec.id.group,
            &primary_spec.kind,
            primary_spec.namespaced,
        );
        let (owns_maps, watch_maps) = maps[1..].split_at(spec.owns.len());
        for (owned, (_, map)) in spec.owns.iter().zip(owns_maps) {
            let reg = registry
                .add_handler(
                    &owned.value,
                    trigger(map.clone(), false),
                    options(false, false, map),
                )
                .await
                .map_err(|e| {
                    manifest
                        .error_at(owned.position, "owns", e.to_string())
                        .to_string()
                })?;
            triggers.push(reg);
        }
        for (i, (w, (_, map))) in spec.watches.iter().zip(watch_maps).enumerate() {
            let reg = registry
                .add_handler(
                    &w.resource.value,
                    trigger(map.clone(), true),
                    options(false, false, map),
                )
                .await
                .map_err(|e| {
                    manifest
                        .error_at(
                            w.resource.position,
                            &format!("watches[{i}].resource"),
                            e.to_string(),
                        )
                        .to_string()
                })?;
            triggers.push(reg);
        }
        Ok(Self {
            spec,
            queue,
            workers,
            gate,
            triggers,
            registry: registry.clone(),
            opener: None,
            _owned: owned,
            inherited,
        })
    }

    /// The queue, for the next version to take over (see the module doc).
    /// Nothing changes for this version until [`ControllerPart::keep_queue`].
    pub fn hand_over(&self) -> HandedQueue {
        HandedQueue {
            queue: self.queue.clone(),
            primary: self.spec.primary.value.clone(),
            rate_limiter: self.spec.rate_limiter,
        }
    }

    /// The next version took the queue: stopping this one leaves it up.
    pub fn keep_queue(&self) {
        self.workers.keep_queue();
    }

    /// Whether this version's queue came from the previous version.
    pub fn inherited_queue(&self) -> bool {
        self.inherited
    }

    /// Waits, after [`ControllerPart::stop`], until no reconcile of this
    /// version runs any more, saying every [`HANDOVER_WARN_EVERY`] which keys
    /// it still reconciles. Returns how long it waited.
    pub async fn wait_stopped(&mut self, plugin: &str) -> Duration {
        let since = tokio::time::Instant::now();
        while !self.workers.stop(HANDOVER_WARN_EVERY).await {
            let keys: Vec<String> = self
                .queue
                .processing_keys()
                .iter()
                .take(5)
                .map(|k| k.to_string())
                .collect();
            tracing::warn!(
                plugin = %plugin,
                waited_ms = since.elapsed().as_millis() as u64,
                keys = %keys.join(","),
                "the new version waits: the previous one still reconciles; no key runs in two versions at once"
            );
        }
        since.elapsed()
    }

    /// Lets the workers start as soon as every trigger's informer has synced.
    pub fn release(&mut self) {
        if self.opener.is_some() || self.gate.is_open() {
            return;
        }
        let gate = self.gate.clone();
        let registry = self.registry.clone();
        let resources = self.spec.resource_ids();
        self.opener = Some(tokio::spawn(async move {
            loop {
                let synced = resources
                    .iter()
                    .all(|r| registry.informer(r).is_some_and(|i| i.has_synced()));
                if synced {
                    gate.open();
                    return;
                }
                tokio::time::sleep(SYNC_POLL).await;
            }
        }));
    }

    /// Stops the workers (reconciles in progress finish, none starts) and
    /// unsubscribes the triggers. Returns whether every worker was idle
    /// within `grace`.
    pub async fn stop(&mut self, grace: Duration) -> bool {
        if let Some(t) = self.opener.take() {
            t.abort();
        }
        let idle = self.workers.stop(grace).await;
        self.triggers.clear();
        idle
    }

    /// The work queue (for embedders and tests).
    pub fn queue(&self) -> &Arc<WorkQueue<Arc<str>>> {
        &self.queue
    }

    /// The queue, the workers and the reconciles, as in the report.
    pub fn report(&self) -> ControllerReport {
        ControllerReport {
            primary: self.spec.primary.value.clone(),
            workers: self.workers.len() as u64,
            reconciles: self.workers.stats().snapshot(),
            queue: self.queue.metrics(),
        }
    }
}
