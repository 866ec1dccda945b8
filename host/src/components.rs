//! One compilation per distinct component within a reload pass: the plugins
//! loaded together (a fleet of manifests naming one `.wasm`) share the
//! compiled component instead of each reading, hashing and deserializing it.
//!
//! Job: read a plugin's component file, key it by its bytes, and compile it
//! (through the engine's cache) once per distinct content, off the async
//! workers; concurrent loads of the same bytes wait for the one compilation.
//!
//! Invariant: two plugins share a compilation only when their files hold
//! identical bytes (compared in full, not only by hash); a pass's components
//! are dropped with the pass, so nothing outlives the reload that needed it.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::OnceCell;
use wasm_informer_runtime::{CompiledComponent as Component, PluginEngine};

/// Why a component could not be had.
#[derive(Debug, Clone)]
pub enum ComponentError {
    /// The file could not be read.
    Read(String),
    /// It does not compile (wasmtime's error, printed with its chain).
    Compile(String),
}

type Slot = Arc<OnceCell<Result<Component, ComponentError>>>;

/// Components by the hash of their bytes: (the bytes, the compilation).
type ByContent = HashMap<u64, Vec<(Arc<[u8]>, Slot)>>;

/// The components of one reload pass.
#[derive(Default)]
pub struct PassComponents {
    by_content: Mutex<ByContent>,
}

impl std::fmt::Debug for PassComponents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassComponents")
            .field("distinct", &self.by_content.lock().len())
            .finish()
    }
}

impl PassComponents {
    /// The compiled component in `path`, compiled at most once per distinct
    /// content in this pass.
    pub async fn get(
        &self,
        engine: &Arc<PluginEngine>,
        path: &Path,
    ) -> Result<Component, ComponentError> {
        let p = path.to_path_buf();
        let bytes: Arc<[u8]> = tokio::task::spawn_blocking(move || std::fs::read(&p))
            .await
            .map_err(|e| ComponentError::Read(format!("read task failed: {e}")))?
            .map_err(|e| ComponentError::Read(e.to_string()))?
            .into();
        let label = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.get_labelled(engine, &label, bytes).await
    }

    /// The compiled component of `bytes` (a component pulled from a
    /// registry), compiled at most once per distinct content in this pass.
    pub async fn get_bytes(
        &self,
        engine: &Arc<PluginEngine>,
        bytes: Arc<[u8]>,
    ) -> Result<Component, ComponentError> {
        self.get_labelled(engine, "a pulled component", bytes).await
    }

    async fn get_labelled(
        &self,
        engine: &Arc<PluginEngine>,
        label: &str,
        bytes: Arc<[u8]>,
    ) -> Result<Component, ComponentError> {
        let label = label.to_string();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        bytes.hash(&mut h);
        let slot = {
            let mut map = self.by_content.lock();
            let same = map.entry(h.finish()).or_default();
            match same.iter().find(|(b, _)| **b == *bytes) {
                Some((_, slot)) => slot.clone(),
                None => {
                    let slot = Slot::default();
                    same.push((bytes.clone(), slot.clone()));
                    slot
                }
            }
        };
        slot.get_or_init(|| async move {
            let engine = engine.clone();
            tokio::task::spawn_blocking(move || {
                engine
                    .compile_labelled(&label, &bytes)
                    .map_err(|e| ComponentError::Compile(format!("{e:?}")))
            })
            .await
            .unwrap_or_else(|e| Err(ComponentError::Compile(format!("compile task failed: {e}"))))
        })
        .await
        .clone()
    }
}
