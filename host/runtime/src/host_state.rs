//! The per-instance host state (`Store` data): the WASI context with nothing
//! inherited, the resource table, the memory limiter, and what the `cache` and
//! `log` imports need.
//!
//! Invariant: a [`HostState`] grants a guest no file, environment variable,
//! argument, socket or name lookup; its stdout and stderr go to the plugin log.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::limiter::MemoryLimiter;
use super::log_sink::LogSink;
use super::stdio::PluginOutput;
use kube_informer::cache_view::CacheView;

/// Store data of one plugin instance.
pub struct HostState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) cache: Arc<dyn CacheView>,
    /// Resources the manifest's `read` list allows, sorted.
    pub(crate) readable: Arc<[String]>,
    pub(crate) log: Arc<LogSink>,
    pub(crate) plugin: Arc<str>,
}

impl HostState {
    /// A fresh state for one instance.
    pub fn new(
        plugin: Arc<str>,
        cache: Arc<dyn CacheView>,
        readable: Arc<[String]>,
        log: Arc<LogSink>,
        memory_bytes: usize,
    ) -> Self {
        let wasi = WasiCtx::builder()
            .stdout(PluginOutput::stdout(log.clone()))
            .stderr(PluginOutput::stderr(log.clone()))
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }))
            .build();
        Self {
            wasi,
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(memory_bytes),
            cache,
            readable,
            log,
            plugin,
        }
    }

    /// Whether the manifest allows reading `resource`.
    pub fn may_read(&self, resource: &str) -> bool {
        self.readable.iter().any(|r| r == resource)
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
