//! WebAssembly handlers for our side. This build has no plugin runtime yet, so
//! loading one fails with a clear error and the benchmarks that need it say so.
//!
//! Invariant: a `WasmHandler` only exists when a plugin instance was started.

use std::sync::Arc;

use anyhow::{bail, Result};
use wasm_informer::handler::Delivery;
use wasm_informer::informer::SharedInformer;
use wasm_informer::notification::NotificationRef;

/// A plugin instance driven as a listener's handler.
pub struct WasmHandler(std::convert::Infallible);

/// Whether this build can run WebAssembly plugins.
pub const AVAILABLE: bool = false;

impl WasmHandler {
    /// Loads `path` and starts one instance.
    pub async fn start(
        name: &str,
        path: &str,
        _config: &str,
        _timeout_ms: u64,
        _informer: Arc<SharedInformer>,
    ) -> Result<Self> {
        bail!("plugin {name}: cannot load {path}: this build has no WebAssembly plugin runtime")
    }

    /// Hands one event to the plugin.
    pub async fn handle(&mut self, _n: NotificationRef) -> Delivery {
        match self.0 {}
    }
}

/// The built `.wasm` of the example plugin `name`, when this build can run it.
pub fn plugin_path(name: &str) -> Option<String> {
    if !AVAILABLE {
        return None;
    }
    let _ = name;
    None
}
