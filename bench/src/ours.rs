//! The wasm-informer side: one shared informer (Reflector → DeltaFIFO → Indexer →
//! processor) with one listener per handler, each handler wrapped in a probe.
//!
//! Invariant: the probe runs after the handler returned, so an event counts only
//! once the handler (native or WebAssembly) finished with it.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use wasm_informer::handler::{Delivery, Handler};
use wasm_informer::informer::{InformerConfig, SharedInformer};
use wasm_informer::listener::ListenerConfig;
use wasm_informer::notification::NotificationRef;
use wasm_informer::processor::ListenerHandle;
use wasm_informer::resource::ResourceSpec;

use crate::probe::{parse_rv, Probe};
use crate::spec::{HandlerKind, ListenerCounters, SideSpec};
use crate::wasm::WasmHandler;

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
}

/// A running wasm-informer side.
pub struct OursSide {
    informer: Arc<SharedInformer>,
    handles: Vec<ListenerHandle>,
    /// (name, probe, tracked) per handler.
    pub probes: Vec<(String, Arc<Probe>, bool)>,
}

impl OursSide {
    /// Starts the informer and every listener, and waits for sync.
    pub async fn start(spec: &SideSpec, client: kube::Client) -> Result<(Self, Vec<String>)> {
        let mut config = InformerConfig::default();
        config.reflector.transform.strip_managed_fields = spec.strip_managed_fields;
        let rs = ResourceSpec::builtin("v1/pods")
            .context("resource v1/pods")?
            .context("v1/pods is not a built-in resource")?;
        let informer =
            SharedInformer::start(client, rs, config).context("starting the informer")?;
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
                    WasmHandler::start(&h.name, path, config, *timeout_ms, informer.clone())
                        .await
                        .with_context(|| format!("handler {}: loading {path}", h.name))?,
                )),
            };
            let lc = ListenerConfig {
                name: h.name.clone(),
                capacity: spec.queue_capacity,
                ..ListenerConfig::default()
            };
            let handle = informer
                .add_listener(
                    lc,
                    Probed {
                        inner,
                        probe: probe.clone(),
                    },
                )
                .with_context(|| format!("listener {}", h.name))?;
            handles.push(handle);
            probes.push((h.name.clone(), probe, h.tracked));
        }
        let side = OursSide {
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
    }
}
