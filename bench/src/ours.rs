//! The wasm-informer side: the informer registry starts one shared informer
//! (Reflector → DeltaFIFO → Indexer → processor) for `v1/pods`, with one listener
//! per handler, each handler wrapped in a probe. WebAssembly handlers read the
//! cache through the registry, as in production.
//!
//! Invariant: the probe runs after the handler returned, so an event counts only
//! once the handler (native or WebAssembly) finished with it.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use kube_informer::cache_view::CacheView;
use kube_informer::handler::{Delivery, Handled, Handler};
use kube_informer::notification::NotificationRef;
use kube_informer::HandlerOptions;
use kube_informer::Registration;
use kube_informer::{InformerConfig, InformerRegistry, SharedInformer};

use crate::probe::{now_ns, parse_rv, Probe};
use crate::spec::{HandlerKind, ListenerCounters, ReloadTiming, SideSpec};
use crate::wasm::{self, WasmHandler};

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

/// A running wasm-informer side.
pub struct OursSide {
    registry: Arc<InformerRegistry>,
    informer: Arc<SharedInformer>,
    handles: Vec<Registration>,
    /// (name, probe, tracked) per handler.
    pub probes: Vec<(String, Arc<Probe>, bool)>,
}

impl OursSide {
    /// Starts the informer and every listener, and waits for sync.
    pub async fn start(spec: &SideSpec, client: kube::Client) -> Result<(Self, Vec<String>)> {
        let mut config = InformerConfig::default();
        config.reflector.transform.strip_managed_fields = spec.strip_managed_fields;
        let registry = InformerRegistry::new(client, config);
        let cache: Arc<dyn CacheView> = registry.clone();
        let mut handles = Vec::new();
        let mut probes = Vec::new();
        for h in &spec.handlers {
            let probe = Arc::new(Probe::default());
            let inner = match &h.kind {
                HandlerKind::NoopNative => Inner::Noop,
                HandlerKind::SleepNative(ms) => Inner::Sleep(Duration::from_millis(*ms)),
                HandlerKind::Wasm {
                    path,
                    config,
                    timeout_ms,
                } => Inner::Wasm(Box::new(
                    WasmHandler::start(&h.name, path, config, *timeout_ms, cache.clone())
                        .await
                        .with_context(|| format!("handler {}", h.name))?,
                )),
            };
            let lc = HandlerOptions {
                name: h.name.clone(),
                queue_capacity: spec.queue_capacity,
                ..HandlerOptions::default()
            };
            let handle = registry
                .add_handler(
                    "v1/pods",
                    Probed {
                        inner,
                        probe: probe.clone(),
                    },
                    lc,
                )
                .await
                .with_context(|| format!("listener {}", h.name))?;
            handles.push(handle);
            probes.push((h.name.clone(), probe, h.tracked));
        }
        let informer = registry
            .informer("v1/pods")
            .context("no informer runs for v1/pods after adding listeners")?;
        let side = OursSide {
            registry,
            informer,
            handles,
            probes,
        };
        let notes = side.wait_synced(spec).await?;
        Ok((side, notes))
    }

    async fn wait_synced(&self, spec: &SideSpec) -> Result<Vec<String>> {
        let timeout = Duration::from_secs(spec.sync_timeout_secs);
        if !self.informer.wait_synced(timeout).await {
            bail!(
                "the informer did not sync within {} s",
                spec.sync_timeout_secs
            );
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let mut notes = Vec::new();
        for (h, (name, _, tracked)) in self.handles.iter().zip(&self.probes) {
            if !tracked {
                continue;
            }
            while !h.has_synced() {
                if tokio::time::Instant::now() >= deadline {
                    notes.push(format!("listener {name} had not synced after {timeout:?}"));
                    break;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        Ok(notes)
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
        let name = self
            .probes
            .first()
            .map(|p| p.0.clone())
            .context("no handler to reload")?;
        let t0 = now_ns();
        let cache: Arc<dyn CacheView> = self.registry.clone();
        let loaded = wasm::load(&name, path, config, timeout_ms)?;
        let load_ms = (now_ns() - t0) as f64 / 1e6;
        let runner = wasm::start(&name, loaded, cache).await?;
        let probe = Arc::new(Probe::default());
        let objects = self.cached_objects();
        let handle = self
            .registry
            .add_handler(
                "v1/pods",
                Probed {
                    inner: Inner::Wasm(Box::new(runner)),
                    probe: probe.clone(),
                },
                HandlerOptions {
                    name: name.clone(),
                    queue_capacity: 1024,
                    ..HandlerOptions::default()
                },
            )
            .await
            .with_context(|| format!("subscribing the new version of {name}"))?;
        let old = std::mem::replace(&mut self.handles[0], handle);
        drop(old);
        self.probes[0].1 = probe.clone();
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
