//! The per-instance host state (`Store` data): the WASI context with nothing
//! inherited, the resource table, the object references of the call in
//! progress, the memory limiter, its clock, and each capability's
//! per-instance state.
//!
//! Invariant: a [`HostState`] grants a guest no file, environment variable,
//! argument, socket or name lookup; its stdout and stderr go to the plugin
//! log; it reaches the cache and the API server only through its
//! capabilities, which check the manifest's grants on every call.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::capability::cache::{CacheState, CacheView02};
use super::capability::clock::CallClock;
use super::capability::events::{EventsState, EventsView};
use super::capability::kube::{KubeState, KubeView};
use super::capability::log::LogState;
use super::limiter::MemoryLimiter;
use super::log_sink::LogSink;
use super::objects::ObjectTable;
use super::stdio::PluginOutput;

/// Store data of one plugin instance.
pub struct HostState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) objects: ObjectTable,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) clock: CallClock,
    pub(crate) cache: CacheState,
    pub(crate) log: LogState,
    pub(crate) kube: KubeState,
    pub(crate) events: EventsState,
}

/// What one instance's capabilities are made of.
pub struct Granted {
    /// Cache queries.
    pub cache: CacheState,
    /// The plugin's log.
    pub log: Arc<LogSink>,
    /// API calls.
    pub kube: KubeState,
    /// Events.
    pub events: EventsState,
}

impl Granted {
    /// The capabilities of a plugin that only reads the cache and logs (no
    /// API server).
    pub fn cache_only(
        plugin: &crate::plugin::LoadedPlugin,
        cache: Arc<dyn kube_informer::CacheView>,
        log: Arc<LogSink>,
    ) -> Self {
        Self {
            cache: CacheState::new(
                plugin.spec().name.as_str().into(),
                cache,
                plugin.readable.clone(),
            ),
            log,
            kube: KubeState::default(),
            events: EventsState::default(),
        }
    }
}

impl HostState {
    /// A fresh state for one instance, with calls of at most `timeout` of
    /// guest time and `api_time` blocked in API calls.
    pub fn new(
        granted: Granted,
        memory_bytes: usize,
        timeout: Duration,
        api_time: Duration,
    ) -> Self {
        let wasi = WasiCtx::builder()
            .stdout(PluginOutput::stdout(granted.log.clone()))
            .stderr(PluginOutput::stderr(granted.log.clone()))
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }))
            .build();
        Self {
            wasi,
            table: ResourceTable::new(),
            objects: ObjectTable::default(),
            limiter: MemoryLimiter::new(memory_bytes),
            clock: CallClock::new(timeout, api_time),
            cache: granted.cache,
            log: LogState::new(granted.log),
            kube: granted.kube,
            events: granted.events,
        }
    }

    /// Whether the manifest allows reading `resource`.
    pub fn may_read(&self, resource: &str) -> bool {
        self.cache.may_read(resource)
    }

    /// The 0.2 cache capability's view of this state.
    pub(crate) fn cache02(&mut self) -> CacheView02<'_> {
        CacheView02 {
            state: &self.cache,
            objects: &mut self.objects,
        }
    }

    /// The kube capability's view of this state.
    pub(crate) fn kube(&mut self) -> KubeView<'_> {
        KubeView {
            state: &self.kube,
            objects: &mut self.objects,
            clock: &mut self.clock,
            memory: &self.limiter,
            cache: &self.cache,
        }
    }

    /// The events capability's view of this state.
    pub(crate) fn events(&mut self) -> EventsView<'_> {
        EventsView {
            state: &self.events,
            clock: &mut self.clock,
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}
