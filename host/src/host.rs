//! The supervisor: wires plugins to listeners and keeps the running set equal to
//! the config directory.
//!
//! Job: for each valid manifest, compile its component off the dispatch path
//! (spawn_blocking, with the compilation cache), start one runner per subscribed
//! resource, and subscribe it to that resource's shared informer (which starts
//! the informer for its first user and replays the cache into the new listener,
//! I6). Hot reload applies the [`ReloadAction`]s the reload planner derives from
//! file changes; shutdown drains every plugin and stops every informer. It also
//! assembles the [`Report`] that `/metrics`, the status view and `--report` use.
//!
//! Invariants:
//! - I9: a file that fails to parse, compile, link, initialise or resolve its
//!   resources changes nothing that runs; the previous version of the same plugin
//!   keeps running, and the error names the file and the reason.
//! - Switch-over has no gap: the new version is subscribed (replay, then live)
//!   before the old one is drained and removed.
//! - One reconcile applies independent actions concurrently, at most
//!   [`MAX_CONCURRENT_LOADS`] at a time: removals first (a name they free may be
//!   taken in the same pass), then every add and change. Each plugin has at most
//!   one action per pass, so its versions still switch over one at a time and
//!   all or nothing; plugins of one component share its compilation.
//! - Ready (`/readyz`) means: the config directory has been loaded, every
//!   informer has synced, every plugin version has had its replay, and no file
//!   was rejected.
//! - An informer runs exactly while a plugin subscribes to or reads its resource,
//!   or host.toml pre-warms it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use parking_lot::Mutex;

use crate::components::{ComponentError, PassComponents};
use crate::config::{ConfigDir, ConfigError, PluginManifest};
use crate::controller::ControllerPart;
use crate::drain::{Drain, DrainGate};
use crate::kube_api::KubeApi;
use crate::metrics::{Observe, PluginDurations, PluginLatency};
use crate::reload::{scan, FileHasher, ReloadAction, ReloadState};
use crate::report::{ApiReport, InformerReport, LatencyUs, PluginReport, ReloadEvent, Report};
use kube_informer::cache_view::CacheView;
use kube_informer::indexer::IndexSpec;
use kube_informer::latency::{LatencyHistogram, TimedHandler};
use kube_informer::listener::{ListenerStats, ListenerStatsSnapshot};
use kube_informer::names::Namespace;
use kube_informer::reflector::ReflectorConfig;
use kube_informer::HandlerOptions;
use kube_informer::Registration;
use kube_informer::{InformerConfig, InformerError, InformerLease, InformerRegistry};
use wasm_informer_runtime::capability::api::ClusterApi;
use wasm_informer_runtime::capability::kube::{Grants, KubeSettings, ProtectedLeases, Quota};
use wasm_informer_runtime::{
    EngineConfig, HostServices, LoadedPlugin, PluginEngine, PluginLimits, PluginRunner, PluginSpec,
    PluginStatus, Stop,
};

/// Most adds and changes one reconcile applies at once. Each compiles (once
/// per distinct component), instantiates and subscribes off the async workers;
/// the bound keeps a fleet of heavy (JavaScript, Python) components from
/// instantiating all at once.
pub const MAX_CONCURRENT_LOADS: usize = 16;

/// One subscription of a plugin version: a runner behind a listener.
struct Part {
    handle: Option<Registration>,
    stats: Arc<ListenerStats>,
    drain: Arc<Drain>,
}

/// One running version of a plugin.
struct Slot {
    manifest: PluginManifest,
    /// For a component pulled from a registry: the manifest digest it
    /// resolved to.
    digest: Option<String>,
    status: Arc<PluginStatus>,
    parts: Vec<Part>,
    /// A controller's queue, triggers and workers (instead of `parts`).
    controller: Option<ControllerPart>,
    read_leases: Vec<InformerLease>,
    latency: Arc<LatencyHistogram>,
    /// Counters of the plugin's earlier versions (hot reloads).
    carried: PluginReport,
    versions: u64,
    /// The plugin name's API quota (shared with every version).
    quota: Arc<Quota>,
    /// This version's stop signal (ends its waits on the server, on write
    /// tokens and in quarantine when the version stops).
    stop: Arc<Stop>,
}

/// What a plugin's new version takes over from the one it replaces.
struct Previous {
    /// The counters of every earlier version.
    report: PluginReport,
    versions: u64,
    /// Handler durations, shared by every version.
    latency: Arc<LatencyHistogram>,
    /// API request durations, shared by every version.
    api_latency: Arc<LatencyHistogram>,
    /// A controller's work queue, for the next version to take over.
    queue: Option<crate::controller::HandedQueue>,
}

fn listener_sum(parts: &[Part]) -> ListenerStatsSnapshot {
    let mut s = ListenerStatsSnapshot::default();
    for p in parts {
        let x = p.stats.snapshot();
        s.overflowed += x.overflowed;
        s.coalesced += x.coalesced;
        s.replayed += x.replayed;
        s.queue_depth += x.queue_depth;
        s.max_depth = s.max_depth.max(x.max_depth);
        s.pending_syncs += x.pending_syncs;
        s.resync_overruns += x.resync_overruns;
    }
    s
}

impl Slot {
    /// This version's counters plus the earlier versions'.
    fn report(&self) -> PluginReport {
        let st = self.status.snapshot();
        let l = listener_sum(&self.parts);
        let c = &self.carried;
        let mut r = PluginReport {
            state: st.state.as_str().to_string(),
            errors: c.errors + st.errors,
            traps: c.traps + st.traps,
            restarts: c.restarts + st.restarts,
            coalesced: c.coalesced + l.coalesced,
            overflowed: c.overflowed + l.overflowed,
            queue_depth_max: c.queue_depth_max.max(l.max_depth),
            latency_us: LatencyUs {
                p50: self.latency.quantile_us(0.5),
                p99: self.latency.quantile_us(0.99),
            },
            replayed: c.replayed + l.replayed,
            quarantines: c.quarantines + st.quarantines,
            queue_depth: l.queue_depth,
            resync_overruns: c.resync_overruns + l.resync_overruns,
            resync_behind: l.resync_overruns > 0 && l.pending_syncs > 0,
            versions: self.versions,
            version_events: st.returned,
            digest: self.digest.clone(),
            resources: self.manifest.resource_ids(),
            manifest: self.manifest.file.display().to_string(),
            last_error: st.last_error.or_else(|| c.last_error.clone()),
            api: {
                let mut api = c.api.plus(&ApiReport {
                    requests: st.api.requests,
                    denied: st.api.denied,
                    dry_run: st.api.dry_run,
                    answers_refused: st.api.answers_refused,
                    by_verb: st.api.by_verb.clone(),
                    ..Default::default()
                });
                // The quota is the name's, across versions already.
                let q = self.quota.stats();
                api.throttled = q.throttled;
                api.token_wait_ms = q.waited.as_millis() as u64;
                api.refusals_unlogged = q.refused.saturating_sub(q.audited);
                api.write_qps = self.quota.rate().0;
                api
            },
            ..Default::default()
        };
        r.delivered.added = c.delivered.added + st.delivered.added;
        r.delivered.updated = c.delivered.updated + st.delivered.updated;
        r.delivered.deleted = c.delivered.deleted + st.delivered.deleted;
        r.delivered.synced = c.delivered.synced + st.delivered.synced;
        if let Some(ctl) = &self.controller {
            let mut cr = ctl.report();
            if let Some(earlier) = &c.controller {
                if ctl.inherited_queue() {
                    // The queue's counters already hold the earlier versions'.
                    cr.carry_reconciles(earlier);
                } else {
                    cr.carry(earlier);
                }
            }
            r.queue_depth = cr.queue.depth;
            r.controller = Some(cr);
        }
        r
    }

    /// Lets a controller's workers start (once its caches have synced). The
    /// supervisor calls it when no other version of the plugin reconciles
    /// any more; event handlers need nothing.
    fn release(&mut self) {
        if let Some(c) = &mut self.controller {
            c.release();
        }
    }

    /// Drains every runner (current event finishes, no new one starts), then
    /// unsubscribes. Dropping the read leases may stop informers. A wait on
    /// the server, on a write token or in quarantine is not waited out: the
    /// stop signal ends it at once (the guest's call returns `unavailable`),
    /// and the WARN names it.
    async fn stop(&mut self, grace: Duration) {
        let cut = self.stop.raise();
        for w in &cut {
            tracing::warn!(
                plugin = %self.manifest.name,
                waited_ms = w.since.elapsed().as_millis() as u64,
                "plugin stopped while it waited for {}; the wait was cancelled",
                w.what
            );
        }
        let waits = self.parts.iter().map(|p| {
            let d = p.drain.clone();
            async move { d.close_and_wait(grace).await }
        });
        let mut idle = futures::future::join_all(waits).await;
        if let Some(c) = &mut self.controller {
            idle.push(c.stop(grace).await);
        }
        if idle.iter().any(|i| !i) {
            tracing::warn!(plugin = %self.manifest.name, grace_ms = grace.as_millis() as u64, "plugin did not finish its event within the grace period; stopping it anyway");
        }
        for p in &mut self.parts {
            p.handle.take();
        }
        self.read_leases.clear();
    }
}

/// A plugin that could not be loaded from a file (and whether an older version
/// of it still runs).
#[derive(Debug, Clone)]
struct Failure {
    plugin: Option<String>,
    message: String,
}

/// State readable by the report at any time.
#[derive(Default)]
struct Shared {
    slots: BTreeMap<String, Arc<tokio::sync::Mutex<Slot>>>,
    /// Last reports of the current slots (refreshed by `report`), for readers that
    /// cannot lock a slot being reloaded.
    last: BTreeMap<String, PluginReport>,
    /// Final reports of plugins no longer running.
    gone: BTreeMap<String, PluginReport>,
    failures: BTreeMap<PathBuf, Failure>,
    events: Vec<ReloadEvent>,
    informers: BTreeMap<String, InformerReport>,
}

/// Options of a host run beyond the config directory.
#[derive(Debug, Clone, Default)]
pub struct HostOptions {
    /// How often the plugins directory is rescanned even without a file-system
    /// event (a safety net for file systems that drop notifications).
    pub rescan_every: Option<Duration>,
    /// File-watch debounce.
    pub debounce: Option<Duration>,
    /// Every write of every plugin is a dry run (`run --dry-run`).
    pub dry_run: bool,
    /// The host's identity, reported as the `reportingInstance` of Events
    /// (default: the hostname and the process id).
    pub identity: Option<String>,
    /// Leader election or sharding: plugins receive only the keys this
    /// replica delivers, and their `init` config says who they are.
    pub cluster: Option<Arc<crate::cluster::Cluster>>,
}

/// The running host.
pub struct Host {
    started: Instant,
    config: ConfigDir,
    registry: Arc<InformerRegistry>,
    engine: Arc<PluginEngine>,
    shared: Mutex<Shared>,
    apply: tokio::sync::Mutex<(ReloadState, FileHasher)>,
    _prewarm: Mutex<Vec<InformerLease>>,
    watch: Mutex<Option<crate::reload::ConfigWatcher>>,
    reload_task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Says when a plugin is held back by its write rate (`throttle.rs`).
    throttle_task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    options: HostOptions,
    /// Plugin API calls, with the host's credentials.
    api: Arc<dyn ClusterApi>,
    /// The same, for what the host itself asks of it (discovery at load).
    kube_api: Arc<KubeApi>,
    /// Each plugin's API grants, by plugin name: shared by every version of a
    /// plugin, so a reload that changes them applies at once to the version
    /// still draining too.
    grants: Mutex<BTreeMap<String, Grants>>,
    /// Each plugin's API quota, by plugin name: one token bucket for every
    /// runner, worker and version of a plugin, never refilled by a reload.
    quotas: Mutex<BTreeMap<String, Arc<Quota>>>,
    /// Each live plugin's comparison with its shadow, by the live plugin's
    /// name (`shadow.rs`).
    shadows: Mutex<BTreeMap<String, Arc<crate::shadow::ShadowBook>>>,
    identity: String,
    /// The config directory has been read and applied once.
    loaded: AtomicBool,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("config", &self.config.dir)
            .finish()
    }
}

/// Why the host could not start.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// host.toml is invalid (or names something the cluster does not serve).
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// The Wasm engine could not be built.
    #[error("cannot build the Wasm engine: {0}")]
    Engine(String),
}

fn host_toml_error(config: &ConfigDir, key: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        file: config.host.file.clone(),
        position: None,
        key: Some(key.to_string()),
        reason: reason.into(),
    }
}

impl Host {
    /// The running plugins' slots, by name, copied out of the shared state
    /// (so that none of them is locked while it is held).
    fn slots(&self) -> Vec<(String, Arc<tokio::sync::Mutex<Slot>>)> {
        self.shared
            .lock()
            .slots
            .iter()
            .map(|(n, s)| (n.clone(), s.clone()))
            .collect()
    }

    /// Builds the host: engine, informer registry, indexes and pre-warmed
    /// informers. Plugins are loaded by [`Host::reconcile`].
    pub async fn new(
        config: ConfigDir,
        client: kube::Client,
        options: HostOptions,
    ) -> Result<Arc<Self>, HostError> {
        let engine = PluginEngine::new(EngineConfig {
            // The default every command shares: host.toml's, else the user's.
            cache_dir: crate::commands::cache_dir(None, config.host.cache_dir.clone()),
            ..EngineConfig::default()
        })
        .map_err(|e| HostError::Engine(e.to_string()))?;
        let informer_config = InformerConfig {
            reflector: ReflectorConfig {
                transform: config.host.transform.to_transform(),
                ..ReflectorConfig::default()
            },
            ..InformerConfig::default()
        };
        let kube_api = KubeApi::fenced(
            client.clone(),
            tokio::runtime::Handle::current(),
            options.cluster.as_ref().map(|c| c.fence().clone()),
        );
        let api: Arc<dyn ClusterApi> = kube_api.clone();
        let registry = InformerRegistry::new(client, informer_config);
        if let Some(c) = &options.cluster {
            c.shard_at_source(&registry);
        }
        for (resource, indexes) in &config.host.indexers {
            for ix in indexes {
                registry
                    .add_index(resource, IndexSpec::new(&ix.name, &ix.path))
                    .map_err(|e| {
                        host_toml_error(
                            &config,
                            &format!("indexers.{resource}.{}", ix.name),
                            e.to_string(),
                        )
                    })?;
            }
        }
        let mut prewarm = Vec::new();
        for r in &config.host.prewarm {
            let lease = registry
                .acquire(r)
                .await
                .map_err(|e| host_toml_error(&config, "resources", e.to_string()))?;
            prewarm.push(lease);
        }
        Ok(Arc::new(Self {
            started: Instant::now(),
            config,
            registry,
            engine,
            shared: Mutex::new(Shared::default()),
            apply: tokio::sync::Mutex::new((ReloadState::default(), FileHasher::default())),
            _prewarm: Mutex::new(prewarm),
            watch: Mutex::new(None),
            reload_task: Mutex::new(None),
            throttle_task: Mutex::new(None),
            identity: options
                .identity
                .clone()
                .unwrap_or_else(|| crate::cluster::resolve_identity(None)),
            options,
            api,
            kube_api,
            grants: Mutex::new(BTreeMap::new()),
            quotas: Mutex::new(BTreeMap::new()),
            shadows: Mutex::new(BTreeMap::new()),
            loaded: AtomicBool::new(false),
        }))
    }

    /// The informer registry (the plugins' cache).
    pub fn registry(&self) -> &Arc<InformerRegistry> {
        &self.registry
    }

    /// The config directory.
    pub fn config(&self) -> &ConfigDir {
        &self.config
    }

    /// Reads the plugins directory and applies every change (the first call loads
    /// every plugin). Returns the actions taken.
    pub async fn reconcile(self: &Arc<Self>) -> Vec<ReloadEvent> {
        let mut guard = self.apply.lock().await;
        let (state, hasher) = &mut *guard;
        let config = self.config.clone();
        let mut h = std::mem::take(hasher);
        let scanned = tokio::task::spawn_blocking(move || {
            let r = scan(&config, &mut h);
            (r, h)
        })
        .await;
        let (scanned, h) = match scanned {
            Ok(x) => x,
            Err(e) => {
                tracing::error!(error = %e, "config scan task failed");
                return Vec::new();
            }
        };
        *hasher = h;
        let scanned = match scanned {
            Ok(s) => s,
            Err(e) => {
                tracing::error!("{e}");
                return Vec::new();
            }
        };
        // Failures of files that are gone no longer apply.
        self.shared
            .lock()
            .failures
            .retain(|f, _| scanned.contains_key(f));
        let actions = state.plan(&scanned);
        let running = state.running();
        let (removes, loads): (Vec<_>, Vec<_>) = actions
            .into_iter()
            .partition(|a| matches!(a, ReloadAction::Remove { .. }));
        // Shadows load after the live plugins they name; their comparison
        // starts now, so that the live plugin's first writes (its replay,
        // if it loads in this pass too) are compared.
        let (shadows, loads): (Vec<_>, Vec<_>) = loads.into_iter().partition(|a| match a {
            ReloadAction::Add { manifest, .. } | ReloadAction::Change { manifest, .. } => {
                manifest.shadow_of.is_some()
            }
            _ => false,
        });
        for a in &shadows {
            if let ReloadAction::Add { manifest, .. } | ReloadAction::Change { manifest, .. } = a {
                if let Some(live) = &manifest.shadow_of {
                    self.shadow_book(&live.value).attach(&manifest.name);
                }
            }
        }
        let components = PassComponents::default();
        let mut done = Vec::new();
        {
            let state = Mutex::new(&mut *state);
            for phase in [removes, loads, shadows] {
                let events: Vec<ReloadEvent> = futures::stream::iter(phase)
                    .map(|a| self.apply_action(&state, &running, &components, a))
                    .buffered(MAX_CONCURRENT_LOADS)
                    .collect()
                    .await;
                self.shared.lock().events.extend(events.iter().cloned());
                done.extend(events);
            }
        }
        self.loaded.store(true, Ordering::Release);
        if !done.is_empty() {
            let dirs = state.component_dirs();
            if let Some(w) = self.watch.lock().as_mut() {
                w.watch_dirs(&dirs);
            }
        }
        done
    }

    fn event(
        &self,
        action: &str,
        plugin: Option<&str>,
        file: &Path,
        error: Option<String>,
    ) -> ReloadEvent {
        ReloadEvent {
            at_ms: self.started.elapsed().as_millis() as u64,
            action: action.to_string(),
            plugin: plugin.map(str::to_string),
            file: file.display().to_string(),
            error,
        }
    }

    /// Applies one action. `state` is locked only to record the outcome, so
    /// actions for different plugins run concurrently; `running` is what ran
    /// when the pass was planned.
    async fn apply_action(
        self: &Arc<Self>,
        state: &Mutex<&mut ReloadState>,
        running: &BTreeMap<PathBuf, String>,
        components: &PassComponents,
        action: ReloadAction,
    ) -> ReloadEvent {
        match action {
            ReloadAction::Add {
                manifest,
                fingerprint,
            } => {
                let file = manifest.file.clone();
                let name = manifest.name.clone();
                match self.load(&manifest, None, components).await {
                    Ok(slot) => {
                        state.lock().commit_running(&manifest, fingerprint);
                        let mut slot = slot;
                        slot.release();
                        let mut sh = self.shared.lock();
                        sh.failures.remove(&file);
                        sh.gone.remove(&name);
                        sh.slots
                            .insert(name.clone(), Arc::new(tokio::sync::Mutex::new(slot)));
                        drop(sh);
                        tracing::info!(plugin = %name, file = %file.display(), "plugin loaded");
                        self.event("added", Some(&name), &file, None)
                    }
                    Err(msg) => {
                        state.lock().commit_rejected(&file, fingerprint);
                        tracing::error!(plugin = %name, "plugin not loaded: {msg}");
                        if let Some(live) = &manifest.shadow_of {
                            self.shadow_book(&live.value).detach(&name);
                        }
                        self.rejected(&file, Some(&name), msg)
                    }
                }
            }
            ReloadAction::Change {
                old_name,
                manifest,
                fingerprint,
            } => {
                let file = manifest.file.clone();
                let name = manifest.name.clone();
                let old = self.shared.lock().slots.get(&old_name).cloned();
                let previous = match &old {
                    Some(o) => {
                        let o = o.lock().await;
                        Some(Previous {
                            report: o.report(),
                            versions: o.versions,
                            latency: o.latency.clone(),
                            api_latency: o.status.api().latency_handle(),
                            queue: o.controller.as_ref().map(|c| c.hand_over()),
                        })
                    }
                    None => None,
                };
                match self
                    .load(&manifest, previous.filter(|_| old_name == name), components)
                    .await
                {
                    Ok(slot) => {
                        state.lock().commit_running(&manifest, fingerprint);
                        let slot = Arc::new(tokio::sync::Mutex::new(slot));
                        {
                            let mut sh = self.shared.lock();
                            sh.failures.remove(&file);
                            sh.slots.insert(name.clone(), slot.clone());
                            if old_name != name {
                                sh.slots.remove(&old_name);
                            }
                        }
                        // The new version is subscribed (replay, then live); now drain the old.
                        if let Some(o) = old {
                            let took_queue = slot
                                .lock()
                                .await
                                .controller
                                .as_ref()
                                .is_some_and(|c| c.inherited_queue());
                            let mut o = o.lock().await;
                            if took_queue {
                                if let Some(c) = &o.controller {
                                    c.keep_queue();
                                }
                            }
                            o.stop(self.grace()).await;
                            // A controller's new workers wait for every
                            // reconcile of the old version, past the grace.
                            if let Some(c) = o.controller.as_mut() {
                                let waited = c.wait_stopped(&name).await;
                                if waited >= crate::controller::HANDOVER_WARN_EVERY {
                                    tracing::info!(plugin = %name, waited_ms = waited.as_millis() as u64, "the previous version's last reconcile ended; the new version starts");
                                }
                            }
                            // A shadow that now shadows another plugin (or none,
                            // or goes by another name) leaves its old comparison.
                            if let Some(was) = &o.manifest.shadow_of {
                                let still = manifest.shadow_of.as_ref().map(|l| &l.value)
                                    == Some(&was.value)
                                    && old_name == name;
                                if !still {
                                    self.shadow_book(&was.value).detach(&old_name);
                                }
                            }
                            if old_name != name {
                                let mut r = o.report();
                                r.state = "removed".into();
                                self.shared.lock().gone.insert(old_name.clone(), r);
                            }
                        }
                        // A controller's new workers start only now: no key is
                        // reconciled by two versions at once.
                        slot.lock().await.release();
                        self.refresh_informers();
                        tracing::info!(plugin = %name, file = %file.display(), "plugin reloaded: new version took over");
                        self.event("changed", Some(&name), &file, None)
                    }
                    Err(msg) => {
                        state.lock().commit_rejected(&file, fingerprint);
                        tracing::error!(plugin = %name, "reload rejected, previous version keeps running: {msg}");
                        self.rejected(&file, Some(&name), msg)
                    }
                }
            }
            ReloadAction::Remove { file, name } => {
                let slot = self.shared.lock().slots.remove(&name);
                if let Some(s) = slot {
                    let mut s = s.lock().await;
                    // Visible as removed while it drains, not missing from the report.
                    let mut provisional = s.report();
                    provisional.state = "removed".into();
                    self.shared.lock().gone.insert(name.clone(), provisional);
                    s.stop(self.grace()).await;
                    let mut r = s.report();
                    r.state = "removed".into();
                    self.shared.lock().gone.insert(name.clone(), r);
                    if let Some(live) = &s.manifest.shadow_of {
                        self.shadow_book(&live.value).detach(&name);
                    }
                }
                state.lock().commit_removed(&file);
                self.shared.lock().failures.remove(&file);
                self.refresh_informers();
                tracing::info!(plugin = %name, file = %file.display(), "plugin removed");
                self.event("removed", Some(&name), &file, None)
            }
            ReloadAction::Reject {
                file,
                fingerprint,
                error,
            } => {
                state.lock().commit_rejected(&file, fingerprint);
                let msg = error.to_string();
                let running = running.get(&file).cloned();
                match &running {
                    Some(n) => {
                        tracing::error!(plugin = %n, "config rejected, previous version keeps running: {msg}")
                    }
                    None => tracing::error!("config rejected: {msg}"),
                }
                self.rejected(&file, running.as_deref(), msg)
            }
        }
    }

    /// Records a rejected file (the failure shown in the report and
    /// `/readyz`) and the reload event saying so.
    fn rejected(&self, file: &Path, plugin: Option<&str>, message: String) -> ReloadEvent {
        self.shared.lock().failures.insert(
            file.to_path_buf(),
            Failure {
                plugin: plugin.map(str::to_string),
                message: message.clone(),
            },
        );
        self.event("rejected", plugin, file, Some(message))
    }

    /// Where pulled components are kept: `cache_dir`, else the user's cache
    /// directory, else the temporary directory.
    fn oci_cache_dir(&self) -> PathBuf {
        crate::commands::cache_dir(None, self.config.host.cache_dir.clone())
            .unwrap_or_else(|| std::env::temp_dir().join("wasm-informer"))
    }

    fn grace(&self) -> Duration {
        Duration::from_millis(self.config.host.shutdown_grace_ms)
    }

    /// The comparison of live plugin `live` with its shadow (made on first use).
    fn shadow_book(&self, live: &str) -> Arc<crate::shadow::ShadowBook> {
        self.shadows
            .lock()
            .entry(live.to_string())
            .or_insert_with(|| crate::shadow::ShadowBook::new(live, crate::shadow::DEFAULT_WINDOW))
            .clone()
    }

    /// The API settings of shadow `manifest` of live plugin `live`: the live
    /// plugin's grants, in dry run, without Events. The live plugin must run,
    /// with the same subscription.
    async fn shadow_settings(
        &self,
        manifest: &PluginManifest,
        live: &str,
    ) -> Result<KubeSettings, String> {
        let (line, col) = manifest.shadow_of.as_ref().map_or((1, 1), |l| l.position);
        let at = |why: String| {
            format!(
                "{}:{line}:{col}: key `shadow_of`: {why}",
                manifest.file.display()
            )
        };
        let slot = self.shared.lock().slots.get(live).cloned();
        let Some(slot) = slot else {
            return Err(at(format!(
                "no plugin `{live}` is running: a shadow runs beside the live plugin it names"
            )));
        };
        let slot = slot.lock().await;
        let theirs = &slot.manifest;
        if theirs.shadow_of.is_some() {
            return Err(at(format!("`{live}` is itself a shadow")));
        }
        let mut differs = Vec::new();
        if theirs.resource_ids() != manifest.resource_ids() {
            differs.push(format!(
                "resources {:?} against {:?}",
                manifest.resource_ids(),
                theirs.resource_ids()
            ));
        }
        if theirs.namespace != manifest.namespace {
            differs.push(format!(
                "namespace {:?} against {:?}",
                manifest.namespace, theirs.namespace
            ));
        }
        if theirs.label_selector != manifest.label_selector {
            differs.push(format!(
                "label_selector {:?} against {:?}",
                manifest.label_selector, theirs.label_selector
            ));
        }
        if theirs.controller.is_some() != manifest.controller.is_some() {
            differs.push("one is a controller, the other an event handler".to_string());
        }
        if !differs.is_empty() {
            return Err(at(format!(
                "a shadow gets exactly the events of `{live}`, but its subscription differs: {}",
                differs.join("; ")
            )));
        }
        let mut settings = (*self
            .grants
            .lock()
            .get(live)
            .map(|g| g.current())
            .unwrap_or_default())
        .clone();
        settings.dry_run = true;
        settings.events = None;
        Ok(settings)
    }

    /// Every shadow's comparison (with the per-key views when `keys`).
    pub fn shadow_reports(&self, keys: bool) -> Vec<crate::shadow::ShadowReport> {
        let now = Instant::now();
        let books: Vec<_> = self.shadows.lock().values().cloned().collect();
        books.iter().filter_map(|b| b.report(keys, now)).collect()
    }

    /// Compiles, instantiates and subscribes one plugin version. Nothing of it
    /// remains if any step fails.
    async fn load(
        self: &Arc<Self>,
        manifest: &PluginManifest,
        previous: Option<Previous>,
        components: &PassComponents,
    ) -> Result<Slot, String> {
        let config_json = match &self.options.cluster {
            Some(c) => c.plugin_config(&manifest.config_json),
            None => manifest.config_json.clone(),
        };
        let spec = PluginSpec {
            name: manifest.name.clone(),
            config_json,
            read: manifest.readable(),
            limits: PluginLimits {
                fuel_per_event: manifest.limits.fuel_per_event,
                timeout_ms: manifest.limits.timeout_ms,
                memory_mb: manifest.limits.memory_mb,
                quarantine_seconds: manifest.limits.quarantine_seconds,
                ..PluginLimits::default()
            },
            kube: manifest.kube.clone(),
        };
        let started = Instant::now();
        let wasm = manifest.wasm.display();
        // An OCI reference is resolved (a tag to a digest) once per load.
        let mut digest = None;
        let component = match &manifest.oci {
            Some(r) => {
                let store = crate::oci::store::Store::new(&self.oci_cache_dir());
                let pulled = crate::oci::pull::pull(r, &store).await.map_err(|e| {
                    let (line, col) = manifest.wasm_position;
                    one_line(&format!(
                        "{}:{line}:{col}: key `wasm`: {e}",
                        manifest.file.display()
                    ))
                })?;
                tracing::info!(plugin = %manifest.name, reference = %r, digest = %pulled.digest, cached = pulled.from_cache, "component pulled");
                digest = Some(pulled.digest);
                components
                    .get_bytes(&self.engine, pulled.bytes.into())
                    .await
            }
            None => components.get(&self.engine, &manifest.wasm).await,
        }
        .map_err(|e| {
            one_line(&match e {
                ComponentError::Read(why) => {
                    format!(
                        "{wasm}: plugin {}: cannot read {wasm}: {why}",
                        manifest.name
                    )
                }
                ComponentError::Compile(detail) => format!(
                    "{wasm}: plugin {}: cannot compile component: {detail}",
                    manifest.name
                ),
            })
        })?;
        let engine = self.engine.clone();
        let loaded: Arc<LoadedPlugin> = tokio::task::spawn_blocking(move || {
            LoadedPlugin::from_component(&engine, spec, &component)
        })
        .await
        .map_err(|e| format!("{wasm}: link task failed: {e}"))?
        .map_err(|e| one_line(&format!("{wasm}: {e}")))?;
        tracing::debug!(plugin = %manifest.name, ms = started.elapsed().as_millis() as u64, "component compiled");
        manifest
            .check_world(loaded.world())
            .map_err(|e| e.to_string())?;

        // Every granted resource exists on the server, and a grant limited to
        // namespaces is on a namespaced one.
        for (i, g) in manifest.kube.grants.iter().enumerate() {
            let id = kube_informer::resource::ResourceId::parse(&g.resource)
                .map_err(|e| e.to_string())?;
            let key = format!("write[{i}]");
            let spec = self.kube_api.resolve_async(&id).await.map_err(|e| {
                manifest
                    .error_at(manifest.name_position, &format!("{key}.resource"), e)
                    .to_string()
            })?;
            g.check_scope(&spec).map_err(|e| {
                manifest
                    .error_at(
                        manifest.name_position,
                        &format!("{key}.{}", e.field),
                        e.reason,
                    )
                    .to_string()
            })?;
        }
        let mut read_leases = Vec::new();
        for r in &manifest.read {
            if manifest.resources.iter().any(|x| x.value == r.value) {
                continue;
            }
            let lease = self.registry.acquire(&r.value).await.map_err(|e| {
                manifest
                    .error_at(r.position, "read", informer_reason(&e))
                    .to_string()
            })?;
            read_leases.push(lease);
        }

        let (carried, versions, latency, api_latency, handed) = match previous {
            Some(p) => (p.report, p.versions + 1, p.latency, p.api_latency, p.queue),
            None => (
                PluginReport::default(),
                1,
                Arc::default(),
                Arc::default(),
                None,
            ),
        };
        let status = Arc::new(PluginStatus::with_api_latency(&manifest.name, api_latency));
        let cache: Arc<dyn CacheView> = self.registry.clone();
        // The new grants apply from here on, to every version of the plugin
        // (so a revoked grant is refused before the new version's first
        // event, even to the old version while it drains); a version that
        // fails to load puts the old grants back.
        // A shadow runs under its live plugin's grants, in dry run, with no
        // Events; its writes and the live plugin's are compared.
        let (kube_settings, intents, act_as) = match &manifest.shadow_of {
            Some(live) => {
                let settings = self.shadow_settings(manifest, &live.value).await?;
                let book = self.shadow_book(&live.value);
                book.attach(&manifest.name);
                (
                    settings,
                    book.sink(crate::shadow::Side::Shadow),
                    self.config.host.identity.user_of(&live.value),
                )
            }
            None => (
                manifest.kube.clone(),
                self.shadow_book(&manifest.name)
                    .sink(crate::shadow::Side::Live),
                self.config.host.identity.user_of(&manifest.name),
            ),
        };
        let grants = self
            .grants
            .lock()
            .entry(manifest.name.clone())
            .or_default()
            .clone();
        let before = grants.current();
        grants.replace(kube_settings.clone());
        let restore = |e: String| {
            grants.replace((*before).clone());
            e
        };
        let quota = self
            .quotas
            .lock()
            .entry(manifest.name.clone())
            .or_insert_with(|| Quota::new(kube_settings.write_qps, kube_settings.write_burst))
            .clone();
        let services = HostServices {
            cache,
            api: Some(self.api.clone()),
            grants: grants.clone(),
            dry_run: self.options.dry_run || manifest.shadow_of.is_some(),
            identity: self.identity.clone(),
            quota,
            act_as,
            protected: self
                .options
                .cluster
                .as_ref()
                .and_then(|c| Namespace::parse(c.lease_namespace()).ok())
                .map(|namespace| ProtectedLeases { namespace }),
            enforce_grants: true,
            stop: Stop::new(),
            intents: Some(intents),
        };
        let mut controller = None;
        if manifest.controller.is_some() {
            let part = ControllerPart::start(
                &self.registry,
                self.engine.clone(),
                loaded.clone(),
                services.clone(),
                manifest,
                status.clone(),
                crate::controller::Placement {
                    cluster: self.options.cluster.as_ref(),
                    handed,
                },
            )
            .await
            .map_err(&restore)?;
            controller = Some(part);
        }
        let mut parts = Vec::new();
        for r in &manifest.resources {
            let runner = PluginRunner::start_with_status(
                self.engine.clone(),
                loaded.clone(),
                services.clone(),
                Some(status.clone()),
            )
            .await
            .map_err(|e| restore(one_line(&format!("{}: {e}", manifest.wasm.display()))))?;
            // Sharding needs the resource's kind before the listener's first
            // snapshot; the lease keeps the informer up until it subscribes.
            let _kind = match &self.options.cluster {
                Some(c) => c.learn_resource(&self.registry, &r.value).await,
                None => None,
            };
            let drain = Drain::new();
            let handler = TimedHandler::new(DrainGate::new(runner, drain.clone()), latency.clone());
            let lc = HandlerOptions {
                name: manifest.name.clone(),
                queue_capacity: manifest.limits.queue_capacity,
                resync: (manifest.limits.resync_seconds > 0)
                    .then(|| Duration::from_secs(manifest.limits.resync_seconds)),
                namespace: manifest.namespace.clone(),
                label_selector: manifest.label_selector.clone(),
                ownership: self.options.cluster.as_ref().map(|c| c.ownership().clone()),
            };
            let handle = self
                .registry
                .add_handler(&r.value, handler, lc)
                .await
                .map_err(|e| {
                    restore(
                        manifest
                            .error_at(r.position, "resources", informer_reason(&e))
                            .to_string(),
                    )
                })?;
            parts.push(Part {
                stats: handle.stats(),
                handle: Some(handle),
                drain,
            });
        }
        Ok(Slot {
            manifest: manifest.clone(),
            digest,
            status,
            parts,
            controller,
            read_leases,
            latency,
            carried,
            versions,
            quota: services.quota.clone(),
            stop: services.stop.clone(),
        })
    }

    /// Starts watching the config directory and applying changes, with a
    /// periodic rescan as a safety net.
    pub fn start_reload(self: &Arc<Self>) -> anyhow::Result<()> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let debounce = self.options.debounce.unwrap_or(Duration::from_millis(300));
        let mut watcher = crate::reload::ConfigWatcher::start(&self.config.dir, debounce, tx)?;
        let dirs = {
            // Components of plugins already loaded.
            let sh = self.shared.lock();
            let mut d: Vec<PathBuf> = Vec::new();
            for s in sh.slots.values() {
                if let Ok(s) = s.try_lock() {
                    if let Some(p) = s.manifest.wasm.parent() {
                        d.push(p.to_path_buf());
                    }
                }
            }
            d
        };
        watcher.watch_dirs(&dirs);
        *self.watch.lock() = Some(watcher);
        let every = self.options.rescan_every.unwrap_or(Duration::from_secs(5));
        let me = Arc::downgrade(self);
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tokio::select! {
                    got = rx.recv() => if got.is_none() { return },
                    _ = tick.tick() => {}
                }
                // Coalesce a burst of signals into one rescan.
                while rx.try_recv().is_ok() {}
                let Some(host) = me.upgrade() else { return };
                host.reconcile().await;
            }
        });
        *self.reload_task.lock() = Some(task);
        let me = Arc::downgrade(self);
        *self.throttle_task.lock() = Some(tokio::spawn(async move {
            let mut watch = crate::throttle::ThrottleWatch::default();
            let mut tick = tokio::time::interval(THROTTLE_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(host) = me.upgrade() else { return };
                let plugins = host.report().plugins;
                for t in watch.observe(&plugins, std::time::Instant::now()) {
                    tracing::warn!(plugin = %t.plugin, write_qps = t.write_qps, "{}", t.message());
                }
            }
        }));
        Ok(())
    }

    /// Updates the remembered informer stats: running informers from the
    /// registry, stopped ones keep their last values with `running = false`.
    fn refresh_informers(&self) {
        let stats = self.registry.stats();
        let mut sh = self.shared.lock();
        for i in sh.informers.values_mut() {
            i.running = false;
        }
        for (id, s) in stats {
            sh.informers.insert(
                id,
                InformerReport {
                    objects: s.objects,
                    last_sync_resource_version: s.last_sync_resource_version,
                    lists: s.lists,
                    watch_restarts: s.watch_restarts,
                    relists_410: s.relists_410,
                    relists_too_large: s.reflector.relists_too_large,
                    relists_rv_regressed: s.reflector.relists_rv_regressed,
                    synced: s.has_synced,
                    running: true,
                    bytes_received: s.reflector.bytes_received,
                    events_received: s.reflector.events,
                    shard: s.shard.as_ref().map(crate::report::SourceShardReport::of),
                    packed_objects: s.pack.packed_objects,
                    body_bytes: s.pack.body_bytes,
                    text_bytes: s.pack.text_bytes,
                },
            );
        }
    }

    /// Stops hot reload, drains every plugin (each finishes its current event),
    /// stops every informer, and returns the final report.
    pub async fn shutdown(self: &Arc<Self>) -> Report {
        if let Some(t) = self.reload_task.lock().take() {
            t.abort();
        }
        if let Some(t) = self.throttle_task.lock().take() {
            t.abort();
        }
        self.watch.lock().take();
        // Wait for a reconcile in progress, and keep others out.
        let _apply = self.apply.lock().await;
        self.refresh_informers();
        let slots = self.slots();
        let grace = self.grace();
        let stops = slots.iter().map(|(name, s)| async move {
            let mut s = s.lock().await;
            // A plugin resting in quarantine or backoff at exit keeps that state
            // in the report; one that was working is reported as stopped.
            let state = s.report().state;
            s.stop(grace).await;
            let mut r = s.report();
            r.state = match state.as_str() {
                "quarantined" | "backing-off" => state,
                _ => "stopped".into(),
            };
            (name.clone(), r)
        });
        let finals = futures::future::join_all(stops).await;
        {
            let mut sh = self.shared.lock();
            sh.slots.clear();
            for (n, r) in finals {
                sh.last.insert(n.clone(), r.clone());
                sh.gone.insert(n, r);
            }
        }
        self._prewarm.lock().clear();
        let mut report = self.report();
        for i in report.informers.values_mut() {
            i.running = false;
        }
        report
    }

    /// Names of the running plugins.
    pub fn plugin_names(&self) -> Vec<String> {
        self.shared.lock().slots.keys().cloned().collect()
    }
}

/// How often the host looks for plugins held back by their write rate.
const THROTTLE_EVERY: Duration = Duration::from_secs(5);

/// Folds a multi-line error (wasmtime's `Caused by:` chains) into one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn informer_reason(e: &InformerError) -> String {
    e.to_string()
}

impl Observe for Host {
    fn report(&self) -> Report {
        self.refresh_informers();
        let slots = self.slots();
        let mut plugins = BTreeMap::new();
        for (name, s) in slots {
            // A slot being reloaded or stopped is locked: show its last report.
            let r = match s.try_lock() {
                Ok(s) => Some(s.report()),
                Err(_) => self.shared.lock().last.get(&name).cloned(),
            };
            if let Some(r) = r {
                plugins.insert(name, r);
            }
        }
        let mut sh = self.shared.lock();
        for (n, r) in &plugins {
            sh.last.insert(n.clone(), r.clone());
        }
        for (n, r) in &sh.gone {
            plugins.entry(n.clone()).or_insert_with(|| r.clone());
        }
        for f in sh.failures.values() {
            if let Some(n) = &f.plugin {
                let e = plugins.entry(n.clone()).or_insert_with(|| PluginReport {
                    state: "failed".into(),
                    ..Default::default()
                });
                if e.state == "failed" {
                    e.last_error = Some(f.message.clone());
                }
            }
        }
        Report {
            plugins,
            informers: sh.informers.clone(),
            duration_seconds: self.started.elapsed().as_secs_f64(),
            simulator_objects: BTreeMap::new(),
            reloads: sh.events.clone(),
            config_errors: sh.failures.values().map(|f| f.message.clone()).collect(),
            cluster: self.options.cluster.as_ref().map(|c| c.report()),
            shadows: self.shadow_reports(false),
        }
    }

    fn not_ready(&self) -> Vec<String> {
        let mut reasons = Vec::new();
        if !self.loaded.load(Ordering::Acquire) {
            reasons.push(format!(
                "the config directory {} has not been loaded yet",
                self.config.dir.display()
            ));
        }
        for (id, s) in self.registry.stats() {
            if !s.has_synced {
                reasons.push(format!("informer {id} has not synced"));
            }
        }
        let slots = self.slots();
        for (name, slot) in slots {
            // A slot locked by a reload or a stop is judged by the reload.
            let Ok(slot) = slot.try_lock() else { continue };
            let status = slot.status.snapshot();
            if status.state == wasm_informer_runtime::PluginState::Quarantined {
                reasons.push(format!(
                    "plugin {name} is quarantined after repeated failures (it retries by \
                     itself){}",
                    status
                        .last_error
                        .as_deref()
                        .map(|e| format!("; last error: {e}"))
                        .unwrap_or_default()
                ));
                continue;
            }
            // Why a replay takes long, when the plugin's own write rate is why.
            let q = slot.quota.stats();
            let throttled = if q.waiting > 0 {
                let (qps, burst) = slot.quota.rate();
                format!(
                    ": its API calls wait for tokens of write_qps = {qps} (burst {burst}; {} \
                     calls waited {:.1} s so far): raise write_qps, or make fewer calls per event",
                    q.throttled,
                    q.waited.as_secs_f64()
                )
            } else {
                String::new()
            };
            for (part, r) in slot.parts.iter().zip(&slot.manifest.resources) {
                if part.handle.as_ref().is_some_and(|h| !h.has_synced()) {
                    reasons.push(format!(
                        "plugin {name} has not had its replay of {} yet{throttled}",
                        r.value
                    ));
                }
            }
        }
        for f in self.shared.lock().failures.values() {
            reasons.push(format!("plugin failed to load: {}", f.message));
        }
        if let Some(c) = &self.options.cluster {
            reasons.extend(c.not_ready());
        }
        reasons
    }

    fn cluster_lines(&self) -> Vec<String> {
        self.options
            .cluster
            .as_ref()
            .map(|c| c.status_lines())
            .unwrap_or_default()
    }

    fn shadow_reports(&self) -> Vec<crate::shadow::ShadowReport> {
        Host::shadow_reports(self, true)
    }

    fn cluster_json(&self, with_keys: bool) -> Option<serde_json::Value> {
        let c = self.options.cluster.as_ref()?;
        let mut v = serde_json::to_value(c.report()).ok()?;
        if with_keys {
            v["owned_keys"] = serde_json::to_value(c.owned_keys()).ok()?;
            v["cached_keys"] = serde_json::to_value(c.cached_keys()).ok()?;
        }
        Some(v)
    }

    fn plugin_latency(&self) -> Vec<(String, PluginDurations)> {
        let slots = self.slots();
        slots
            .into_iter()
            .filter_map(|(name, slot)| {
                let slot = slot.try_lock().ok()?;
                Some((
                    name,
                    PluginDurations {
                        handler: PluginLatency::of(&slot.latency),
                        api: PluginLatency::of(slot.status.api().latency()),
                    },
                ))
            })
            .collect()
    }
}
