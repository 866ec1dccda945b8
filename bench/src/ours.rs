//! The wasm-informer side: one shared informer (Reflector → DeltaFIFO →
//! Indexer → processor) for the spec's resource, with one listener per
//! handler, each handler wrapped in a probe; a controller plugin is run as
//! the host runs one (trigger → work queue → workers), its probe after each
//! reconcile. It is built one of two ways
//! ([`OursApi`]): through the informer registry, as the host runs plugins (and
//! WebAssembly handlers read the cache through it), or with the informer
//! crate's public builder, `SharedInformer::builder(..).start()` and
//! `add_handler`, as a native program does (`examples/native-informer`).
//!
//! Invariant: the probe runs after the handler returned, so an event counts only
//! once the handler (native or WebAssembly) finished with it; the informer's
//! transform and list strategy are exactly the spec's [`ManagedFields`] and
//! [`InitialList`].

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use kube_informer::cache_view::CacheView;
use kube_informer::handler::{Delivery, Handled, Handler};
use kube_informer::notification::NotificationRef;
use kube_informer::reflector::StreamingList;
use kube_informer::workqueue::triggers::{Enqueue, KeyMap};
use kube_informer::workqueue::{
    Outcome, RateLimiterConfig, Reconcile, StartGate, WorkQueue, WorkerOptions, Workers,
};
use kube_informer::{HandlerOptions, Registration};
use kube_informer::{InformerConfig, InformerRegistry, SharedInformer};

use crate::probe::{now_ns, parse_rv, HandlerProbe, Probe};
use wasm_informer::kube_api::KubeApi;
use wasm_informer_runtime::capability::api::ClusterApi;
use wasm_informer_runtime::{HostServices, PluginStatus, ReconcileWorker};

use crate::spec::{
    ApiTiming, HandlerKind, InitialList, ListenerCounters, ManagedFields, OursApi, ReloadTiming,
    SideFacts, SideSpec,
};
use crate::wasm::{self, Shadowing, WasmHandler};
use wasm_informer::shadow::{ShadowBook, Side};

enum Inner {
    Noop,
    Sleep(Duration),
    Wasm(Box<WasmHandler>),
}

/// A handler followed by its probe.
struct Probed {
    inner: Inner,
    probe: Arc<Probe>,
}

impl Handler for Probed {
    async fn handle(&mut self, n: NotificationRef) -> Delivery {
        let rv = parse_rv(Some(&n.object.meta.resource_version));
        let d = match &mut self.inner {
            Inner::Noop => Delivery::Ok,
            Inner::Sleep(d) => {
                tokio::time::sleep(*d).await;
                Delivery::Ok
            }
            Inner::Wasm(w) => w.handle(n).await,
        };
        self.probe.observe(rv);
        d
    }

    fn max_batch(&self) -> usize {
        match &self.inner {
            Inner::Wasm(w) => w.max_batch(),
            _ => 1,
        }
    }

    fn own_thread(&self) -> Option<String> {
        match &self.inner {
            Inner::Wasm(w) => w.own_thread(),
            _ => None,
        }
    }

    /// A WebAssembly handler takes the batch as the host does; each event is
    /// stamped with the time the guest returned from it.
    async fn handle_batch(&mut self, batch: Vec<NotificationRef>) -> Vec<Handled> {
        let Inner::Wasm(w) = &mut self.inner else {
            let mut out = Vec::with_capacity(batch.len());
            for n in batch {
                let delivery = self.handle(n).await;
                out.push(Handled {
                    delivery,
                    at: std::time::Instant::now(),
                });
            }
            return out;
        };
        let rvs: Vec<u64> = batch
            .iter()
            .map(|n| parse_rv(Some(&n.object.meta.resource_version)))
            .collect();
        let handled = w.handle_batch(batch).await;
        let (now, now_wall) = (std::time::Instant::now(), now_ns());
        for (rv, h) in rvs.into_iter().zip(&handled) {
            let ago = now.saturating_duration_since(h.at).as_nanos() as u64;
            self.probe.observe_at(rv, now_wall.saturating_sub(ago));
        }
        handled
    }
}

/// A controller worker followed by its probe: after each reconcile the
/// probe counts it, with the cached object's resourceVersion and name.
struct ProbedReconcile {
    inner: ReconcileWorker,
    probe: Arc<Probe>,
    cache: Arc<dyn CacheView>,
    resource: String,
}

impl Reconcile<Arc<str>> for ProbedReconcile {
    async fn reconcile(&mut self, key: &Arc<str>) -> Outcome {
        let outcome = self.inner.reconcile(key).await;
        let rv = self
            .cache
            .get(&self.resource, key)
            .ok()
            .flatten()
            .map_or(0, |o| parse_rv(Some(&o.meta.resource_version)));
        let name = key.rsplit('/').next().unwrap_or(key);
        self.probe.observe_named(rv, name);
        outcome
    }

    async fn ready(&mut self) {
        self.inner.ready().await;
    }

    fn own_thread(&self) -> Option<String> {
        self.inner.own_thread()
    }
}

/// A controller plugin as the host runs one (`host/src/controller.rs`): a
/// `Primary` trigger on the side's resource feeding one work queue with
/// client-go's default rate limiter, and workers behind a gate that opens
/// once the informer has synced.
struct RunningController {
    _workers: Workers<Arc<str>>,
    gate: Arc<StartGate>,
}

/// Starts an HTTP server on 127.0.0.1 that accepts every connection and
/// never answers (the process keeps the sockets open until it exits), and
/// returns its URL.
fn hanging_server() -> Result<String> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").context("binding the hanging server")?;
    let url = format!("http://{}", listener.local_addr()?);
    std::thread::Builder::new()
        .name("hanging-api".into())
        .spawn(move || {
            let mut held = Vec::new();
            for s in listener.incoming().flatten() {
                held.push(s);
            }
        })
        .context("starting the hanging server")?;
    Ok(url)
}

/// A running wasm-informer side.
pub struct OursSide {
    /// Present when built through the registry (plugins read the cache here).
    registry: Option<Arc<InformerRegistry>>,
    informer: Arc<SharedInformer>,
    handles: Vec<Registration>,
    api: OursApi,
    /// One per handler, in spec order.
    pub probes: Vec<HandlerProbe>,
    /// The runtime's counters of each WebAssembly handler.
    statuses: Vec<(String, Arc<PluginStatus>)>,
    /// Controller plugins, released when the informer has synced.
    controllers: Vec<RunningController>,
    /// The recording under way, with `ours.record`.
    recorder: Option<wasm_informer::record::Recorder>,
}

/// Where the child writes the summary of recording `file` at exit.
pub fn summary_path(file: &std::path::Path) -> std::path::PathBuf {
    let mut path = file.as_os_str().to_owned();
    path.push(".summary.json");
    path.into()
}

fn streaming(spec: &SideSpec) -> StreamingList {
    match spec.initial_list {
        InitialList::Streaming => StreamingList::Auto,
        InitialList::Paged => StreamingList::Off,
    }
}

fn options(name: &str, spec: &SideSpec) -> HandlerOptions {
    HandlerOptions::named(name).queue_capacity(spec.ours.queue_capacity)
}

impl OursSide {
    /// Starts the informer and every listener, and waits for sync.
    pub async fn start(spec: &SideSpec, client: kube::Client) -> Result<(Self, Vec<String>)> {
        let side = match spec.ours.api {
            OursApi::Registry => Self::start_registry(spec, client).await?,
            OursApi::Informer => Self::start_informer(spec, client).await?,
        };
        let notes = side.wait_synced(spec).await?;
        Ok((side, notes))
    }

    /// As the host does: the registry starts the informer for the first
    /// handler; WebAssembly handlers read the cache through the registry.
    async fn start_registry(spec: &SideSpec, client: kube::Client) -> Result<Self> {
        let mut config = InformerConfig::default();
        config.reflector.transform.strip_managed_fields =
            spec.managed_fields == ManagedFields::Strip;
        config.reflector.streaming_list = streaming(spec);
        // Plugin writes go out as the host sends them: over kube-client.
        let api: Option<Arc<dyn ClusterApi>> = if spec.ours.writes {
            let to = if spec.ours.writes_hang {
                crate::child::client(&hanging_server()?)?
            } else {
                client.clone()
            };
            Some(KubeApi::new(to, tokio::runtime::Handle::current()))
        } else {
            None
        };
        let registry = InformerRegistry::new(client, config);
        let cache: Arc<dyn CacheView> = registry.clone();
        // As `run --record` starts it: before the plugins, so that it holds
        // their whole stream.
        let recorder = match &spec.ours.record {
            Some(file) => Some(
                wasm_informer::record::Recorder::start(
                    &registry,
                    std::slice::from_ref(&spec.resource),
                    std::path::Path::new(file),
                )
                .await
                .map_err(|e| anyhow::anyhow!("recording: {e}"))?,
            ),
            None => None,
        };
        let mut handles = Vec::new();
        let mut probes = Vec::new();
        let mut statuses = Vec::new();
        let mut controllers = Vec::new();
        // One shadow book per live handler that has a shadow, as the host
        // keeps one per live plugin.
        let books: Vec<(String, String, Arc<ShadowBook>)> = spec
            .handlers
            .iter()
            .filter_map(|h| {
                let live = h.shadow_of.as_ref()?;
                let book = ShadowBook::new(live, wasm_informer::shadow::DEFAULT_WINDOW);
                book.attach(&h.name);
                Some((live.clone(), h.name.clone(), book))
            })
            .collect();
        let shadowing = |name: &str| -> Shadowing {
            for (live, shadow, book) in &books {
                if live == name {
                    return Shadowing {
                        dry_run: false,
                        intents: Some(book.sink(Side::Live)),
                    };
                }
                if shadow == name {
                    return Shadowing {
                        dry_run: true,
                        intents: Some(book.sink(Side::Shadow)),
                    };
                }
            }
            Shadowing::default()
        };
        for h in &spec.handlers {
            let probe = HandlerProbe::new(h);
            if let HandlerKind::WasmController {
                path,
                timeout_ms,
                workers,
            } = &h.kind
            {
                let (c, reg) = Self::start_controller(
                    &registry,
                    spec,
                    &h.name,
                    path,
                    *timeout_ms,
                    *workers,
                    probe.probe.clone(),
                )
                .await
                .with_context(|| format!("controller {}", h.name))?;
                controllers.push(c);
                handles.push(reg);
                probes.push(probe);
                continue;
            }
            let inner = match &h.kind {
                HandlerKind::NoopNative => Inner::Noop,
                HandlerKind::SleepNative(ms) => Inner::Sleep(Duration::from_millis(*ms)),
                HandlerKind::WasmController { .. } => unreachable!("started above"),
                HandlerKind::Wasm {
                    path,
                    config,
                    timeout_ms,
                } => {
                    let w = WasmHandler::start(
                        &h.name,
                        path,
                        config,
                        *timeout_ms,
                        cache.clone(),
                        api.clone(),
                        shadowing(&h.name),
                    )
                    .await
                    .with_context(|| format!("handler {}", h.name))?;
                    statuses.push((h.name.clone(), w.status()));
                    Inner::Wasm(Box::new(w))
                }
            };
            let handler = Probed {
                inner,
                probe: probe.probe.clone(),
            };
            let handle = registry
                .add_handler(&spec.resource, handler, options(&h.name, spec))
                .await
                .with_context(|| format!("listener {}", h.name))?;
            handles.push(handle);
            probes.push(probe);
        }
        let informer = registry.informer(&spec.resource).with_context(|| {
            format!(
                "no informer runs for {} after adding listeners",
                spec.resource
            )
        })?;
        Ok(OursSide {
            registry: Some(registry),
            informer,
            handles,
            api: OursApi::Registry,
            probes,
            statuses,
            controllers,
            recorder,
        })
    }

    /// Finishes the recording, if one is under way, and writes its summary
    /// beside the file (`FILE.summary.json`).
    pub async fn finish_recording(&mut self) -> Result<()> {
        let Some(recorder) = self.recorder.take() else {
            return Ok(());
        };
        let summary = recorder
            .finish()
            .await
            .map_err(|e| anyhow::anyhow!("recording: {e}"))?;
        let path = summary_path(&summary.file);
        std::fs::write(&path, serde_json::to_vec(&summary)?)
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(())
    }

    /// Starts `workers` instances of the controller component at `path`
    /// reconciling keys of the side's resource, held until
    /// [`OursSide::wait_synced`] opens their gate, and subscribes their
    /// trigger.
    async fn start_controller(
        registry: &Arc<InformerRegistry>,
        spec: &SideSpec,
        name: &str,
        path: &str,
        timeout_ms: u64,
        workers: usize,
        probe: Arc<Probe>,
    ) -> Result<(RunningController, Registration)> {
        let cache: Arc<dyn CacheView> = registry.clone();
        let loaded = wasm::load_reading(
            name,
            path,
            "{}",
            timeout_ms,
            Default::default(),
            &spec.resource,
        )?;
        let reconcilers = ReconcileWorker::start_all(
            wasm::engine()?,
            loaded,
            HostServices::cache_only(cache.clone()),
            &spec.resource,
            workers,
            None,
        )
        .await
        .map_err(|e| anyhow::anyhow!("starting the workers: {e}"))?;
        let queue = WorkQueue::<Arc<str>>::new(RateLimiterConfig::default());
        let gate = StartGate::new();
        let probed = reconcilers
            .into_iter()
            .map(|inner| ProbedReconcile {
                inner,
                probe: probe.clone(),
                cache: cache.clone(),
                resource: spec.resource.clone(),
            })
            .collect();
        let workers = Workers::spawn_with(
            queue.clone(),
            probed,
            WorkerOptions {
                name: name.to_string(),
                gate: gate.clone(),
                admit: None,
            },
        );
        let trigger = Enqueue::new(queue, &spec.resource, KeyMap::Primary);
        let reg = registry
            .add_handler(
                &spec.resource,
                trigger,
                HandlerOptions::named(name)
                    .queue_capacity(wasm_informer::controller::TRIGGER_QUEUE),
            )
            .await
            .context("subscribing the trigger")?;
        Ok((
            RunningController {
                _workers: workers,
                gate,
            },
            reg,
        ))
    }

    /// As a native program does: `SharedInformer::builder` and `add_handler`.
    async fn start_informer(spec: &SideSpec, client: kube::Client) -> Result<Self> {
        let mut builder =
            SharedInformer::builder(client, spec.resource.clone()).streaming_list(streaming(spec));
        if spec.managed_fields == ManagedFields::Keep {
            builder = builder.keep_managed_fields();
        }
        if spec.ours.record.is_some() {
            bail!("a recording reads the informers through the registry, as in the host");
        }
        let informer = builder.start().await.context("starting the informer")?;
        let mut handles = Vec::new();
        let mut probes = Vec::new();
        for h in &spec.handlers {
            let probe = HandlerProbe::new(h);
            let inner = match &h.kind {
                HandlerKind::NoopNative => Inner::Noop,
                HandlerKind::SleepNative(ms) => Inner::Sleep(Duration::from_millis(*ms)),
                HandlerKind::Wasm { path, .. } | HandlerKind::WasmController { path, .. } => bail!(
                    "handler {}: WebAssembly handlers ({path}) run through the registry, as in the host",
                    h.name
                ),
            };
            let handler = Probed {
                inner,
                probe: probe.probe.clone(),
            };
            let handle = informer
                .add_handler(handler, options(&h.name, spec))
                .with_context(|| format!("listener {}", h.name))?;
            handles.push(handle);
            probes.push(probe);
        }
        Ok(OursSide {
            registry: None,
            informer,
            handles,
            api: OursApi::Informer,
            probes,
            statuses: Vec::new(),
            controllers: Vec::new(),
            recorder: None,
        })
    }

    async fn wait_synced(&self, spec: &SideSpec) -> Result<Vec<String>> {
        let timeout = Duration::from_secs(spec.sync_timeout_secs);
        if !self.informer.wait_synced(timeout).await {
            bail!(
                "the informer did not sync within {} s",
                spec.sync_timeout_secs
            );
        }
        // As the host releases a controller: once its informer has synced.
        for c in &self.controllers {
            c.gate.open();
        }
        let deadline = tokio::time::Instant::now() + timeout;
        for (h, p) in self.handles.iter().zip(&self.probes) {
            if !p.tracked {
                continue;
            }
            while !h.has_synced() {
                if tokio::time::Instant::now() >= deadline {
                    bail!("listener {} had not synced after {timeout:?}", p.name);
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        Ok(Vec::new())
    }

    /// Replaces the first handler by a new version loaded from `path`: the new
    /// listener is subscribed (it replays the cache), then the old one removed,
    /// as a reload does. Times are from the moment the component is read.
    pub async fn reload(
        &mut self,
        path: &str,
        config: &str,
        timeout_ms: u64,
    ) -> Result<ReloadTiming> {
        let registry = self
            .registry
            .clone()
            .context("a reload goes through the registry, as in the host")?;
        let name = self
            .probes
            .first()
            .map(|p| p.name.clone())
            .context("no handler to reload")?;
        let t0 = now_ns();
        let cache: Arc<dyn CacheView> = registry.clone();
        let loaded = wasm::load(&name, path, config, timeout_ms)?;
        let load_ms = (now_ns() - t0) as f64 / 1e6;
        let runner = wasm::start(&name, loaded, cache, None, Default::default()).await?;
        let probe = Arc::new(Probe::default());
        let objects = self.cached_objects();
        let handle = registry
            .add_handler(
                "v1/pods",
                Probed {
                    inner: Inner::Wasm(Box::new(runner)),
                    probe: probe.clone(),
                },
                HandlerOptions::named(name.clone()).queue_capacity(1024),
            )
            .await
            .with_context(|| format!("subscribing the new version of {name}"))?;
        let old = std::mem::replace(&mut self.handles[0], handle);
        drop(old);
        self.probes[0].probe = probe.clone();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
        while probe.total.load(std::sync::atomic::Ordering::Relaxed) < objects {
            if tokio::time::Instant::now() >= deadline {
                bail!("the new version of {name} had not handled the replay after 600 s");
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let r = probe.report();
        Ok(ReloadTiming {
            load_ms,
            first_event_ms: (r.first_ns.saturating_sub(t0)) as f64 / 1e6,
            replayed_ms: (r.last_ns.saturating_sub(t0)) as f64 / 1e6,
            objects,
        })
    }

    /// Objects in the cache.
    pub fn cached_objects(&self) -> u64 {
        self.informer.indexer().len() as u64
    }

    /// Waits until the compactor has packed the cache (every object, or no
    /// progress for a second), at most `timeout`.
    pub async fn wait_packed(
        &self,
        synced_at: std::time::Instant,
        timeout: Duration,
    ) -> crate::spec::PackingReport {
        let t0 = std::time::Instant::now();
        let ix = self.informer.indexer();
        let mut last = (ix.pack_stats().packed_objects, t0);
        loop {
            let s = ix.pack_stats();
            let done = s.packed_objects >= ix.len() as u64;
            if s.packed_objects != last.0 {
                last = (s.packed_objects, std::time::Instant::now());
            }
            if done || last.1.elapsed() > Duration::from_secs(1) || t0.elapsed() > timeout {
                // Done: now (within one 20 ms poll); stalled: the last progress.
                let until = if done {
                    std::time::Instant::now()
                } else {
                    last.1
                };
                let packed_ms = until.duration_since(synced_at).as_secs_f64() * 1000.0;
                let all = ix.snapshot();
                let t = std::time::Instant::now();
                let bytes: usize = all.iter().map(|o| o.json().len()).sum();
                let read_ns = t.elapsed().as_nanos() as f64 / all.len().max(1) as f64;
                std::hint::black_box(bytes);
                return crate::spec::PackingReport {
                    heap_at_sync_bytes: 0,
                    packed_ms,
                    read_ns,
                    packed_objects: s.packed_objects,
                    body_bytes: s.body_bytes,
                    text_bytes: s.text_bytes,
                };
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// How the side is configured, as observed: whether the cache holds
    /// managedFields, and how many streaming lists the Reflector completed.
    pub fn facts(&self) -> SideFacts {
        let managed = self
            .informer
            .indexer()
            .snapshot()
            .iter()
            .any(|o| o.json().contains("\"managedFields\""));
        SideFacts {
            managed_fields_cached: Some(managed),
            reflectors: 1,
            subscribers: 0,
            controllers: self.controllers.len() as u64,
            streaming_lists: Some(self.informer.reflector_stats().snapshot().streaming_lists),
            ours_api: Some(
                match self.api {
                    OursApi::Registry => "registry",
                    OursApi::Informer => "informer",
                }
                .into(),
            ),
        }
    }

    /// API requests and their times, per WebAssembly handler.
    pub fn api_timings(&self) -> Vec<ApiTiming> {
        self.statuses
            .iter()
            .map(|(name, s)| {
                let a = s.api().snapshot();
                ApiTiming {
                    name: name.clone(),
                    requests: a.requests,
                    denied: a.denied,
                    p50_us: a.latency_p50_us,
                    p99_us: a.latency_p99_us,
                }
            })
            .collect()
    }

    /// Overflow counters of every listener.
    pub fn listener_counters(&self) -> Vec<ListenerCounters> {
        self.handles
            .iter()
            .map(|h| {
                let s = h.stats().snapshot();
                ListenerCounters {
                    name: h.name().to_string(),
                    overflowed: s.overflowed,
                    coalesced: s.coalesced,
                    max_depth: s.max_depth,
                    restarts: s.restarts,
                }
            })
            .collect()
    }

    /// Stops every listener and the informer.
    pub fn stop(self) {
        drop(self.handles);
        self.informer.stop();
        drop(self.registry);
    }
}
