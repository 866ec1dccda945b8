//! The shared Wasm engine: cranelift, component model, fuel metering, epoch
//! interruption driven by a ticker thread, an optional on-disk compilation cache
//! and an optional pooling allocator; plus the one [`Linker`] every plugin is
//! instantiated against.
//!
//! Invariant: the linker provides exactly WASI 0.2 (`wasi:cli/imports`: cli,
//! clocks, filesystem, io, random, sockets) and the imports of every world of
//! ours (0.1: `cache`, `log`; 0.2: `types`, `cache`, `log`, `kube`, `events`),
//! nothing else. WASI resources are granted per instance by
//! [`HostState`], which grants none. The epoch advances every
//! [`EngineConfig::epoch_tick`] for as long as the engine lives.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::component::{Component, Linker};
use wasmtime::{
    Cache, CacheConfig, Config, Engine, InstanceAllocationStrategy, OptLevel,
    PoolingAllocationConfig, Strategy,
};

use super::host_state::HostState;
use super::log_sink::LogLimits;

/// How the engine is built.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Directory of wasmtime's compilation cache; `None` disables it. JavaScript
    /// and Python components take 10-14 s to compile and about 0.15 s to load
    /// from the cache.
    pub cache_dir: Option<PathBuf>,
    /// Use the pooling instance allocator instead of on-demand allocation.
    /// Off by default. Measured with `examples/runtime_bench.rs` (no-op Rust
    /// plugin): instantiation takes about 20 us pooled against 30-70 us on
    /// demand, but the per-event cost is the same (about 2.5 us of CPU for a
    /// 3 KB event either way), instances are only built at load and after a
    /// failure (when a backoff of at least 100 ms follows anyway), and the pool
    /// reserves address space for every slot and caps instances, memories and
    /// tables per component, which large JavaScript and Python components
    /// could exceed.
    pub pooling: bool,
    /// Epoch period: the resolution of per-event deadlines. Default 10 ms.
    pub epoch_tick: Duration,
    /// Rate limit of each plugin's log.
    pub log: LogLimits,
    /// With a `cache_dir`: also keep cranelift's incremental compilation
    /// cache, beside it (see [`crate::incremental`]), so a component that
    /// changed in a few functions recompiles only those. Default on.
    pub incremental: bool,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            cache_dir: None,
            pooling: false,
            epoch_tick: Duration::from_millis(10),
            log: LogLimits::default(),
            incremental: true,
        }
    }
}

/// Why the engine could not be built, or a component not compiled.
// Each variant's message says what it means; the fields are named in it.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("cannot configure the Wasm engine: {0:?}")]
    Config(wasmtime::Error),
    #[error("cannot use compilation cache directory {dir}: {source:?}")]
    Cache {
        dir: PathBuf,
        source: wasmtime::Error,
    },
}

struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// How many components the engine was asked to compile, and how the
/// compilation cache answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompileStats {
    /// Calls of [`PluginEngine::compile`].
    pub requests: u64,
    /// Of those, served from the compilation cache (no compilation).
    pub cache_hits: u64,
    /// Of those, compiled (and written to the cache when there is one).
    pub compiled: u64,
}

/// Components at least this large get a line when they are compiled.
pub const LARGE_COMPONENT_BYTES: usize = 1 << 20;

/// The engine, its epoch ticker and the plugin linker.
pub struct PluginEngine {
    engine: Engine,
    linker: Linker<HostState>,
    config: EngineConfig,
    cache: Option<Cache>,
    requests: AtomicU64,
    _ticker: Ticker,
}

impl std::fmt::Debug for PluginEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginEngine")
            .field("config", &self.config)
            .finish()
    }
}

impl PluginEngine {
    /// Builds the engine and starts its epoch ticker.
    pub fn new(config: EngineConfig) -> Result<Arc<Self>, EngineError> {
        let mut c = Config::new();
        c.strategy(Strategy::Cranelift)
            .cranelift_opt_level(OptLevel::Speed)
            .wasm_component_model(true)
            .consume_fuel(true)
            .epoch_interruption(true)
            .parallel_compilation(true);
        let mut cache_handle = None;
        if let Some(dir) = &config.cache_dir {
            std::fs::create_dir_all(dir).map_err(|e| EngineError::Cache {
                dir: dir.clone(),
                source: wasmtime::Error::msg(e.to_string()),
            })?;
            let mut cc = CacheConfig::new();
            cc.with_directory(dir.clone());
            let cache = Cache::new(cc).map_err(|source| EngineError::Cache {
                dir: dir.clone(),
                source,
            })?;
            cache_handle = Some(cache.clone());
            c.cache(Some(cache));
            if config.incremental {
                let dir = crate::incremental::dir_beside(dir);
                let store =
                    crate::incremental::IncrementalStore::open(dir.clone()).map_err(|e| {
                        EngineError::Cache {
                            dir: dir.clone(),
                            source: wasmtime::Error::msg(e.to_string()),
                        }
                    })?;
                c.enable_incremental_compilation(store)
                    .map_err(EngineError::Config)?;
            }
        }
        if config.pooling {
            let mut p = PoolingAllocationConfig::default();
            p.total_component_instances(64)
                .total_core_instances(512)
                .total_memories(128)
                .total_tables(512)
                .max_memory_size(4 << 30);
            c.allocation_strategy(InstanceAllocationStrategy::Pooling(p));
        }
        let engine = Engine::new(&c).map_err(EngineError::Config)?;

        let mut linker = Linker::<HostState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(EngineError::Config)?;
        crate::capability::add_to_linker(&mut linker).map_err(EngineError::Config)?;

        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let engine = engine.clone();
            let stop = stop.clone();
            let tick = config.epoch_tick;
            std::thread::Builder::new()
                .name("wasm-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Acquire) {
                        std::thread::sleep(tick);
                        engine.increment_epoch();
                    }
                })
                .map_err(|e| EngineError::Config(wasmtime::Error::msg(e.to_string())))?
        };
        Ok(Arc::new(Self {
            engine,
            linker,
            config,
            cache: cache_handle,
            requests: AtomicU64::new(0),
            _ticker: Ticker {
                stop,
                thread: Some(thread),
            },
        }))
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The linker every plugin is instantiated against.
    pub fn linker(&self) -> &Linker<HostState> {
        &self.linker
    }

    /// The configuration the engine was built with.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Epoch ticks covering `timeout`, rounded up, plus one for the partly
    /// elapsed current tick.
    pub fn deadline_ticks(&self, timeout: Duration) -> u64 {
        let tick = self.config.epoch_tick.as_nanos().max(1);
        (timeout.as_nanos().div_ceil(tick) as u64).saturating_add(1)
    }

    /// Compiles a component (through the cache when configured).
    pub fn compile(&self, bytes: &[u8]) -> wasmtime::Result<Component> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        Component::new(&self.engine, bytes)
    }

    /// Compiles the component `label` names (a plugin, a file), and says so
    /// when it takes long: a large component (a JavaScript or Python one)
    /// takes seconds to compile when the cache does not hold it, and the host
    /// would otherwise be silent meanwhile.
    pub fn compile_labelled(&self, label: &str, bytes: &[u8]) -> wasmtime::Result<Component> {
        let mb = bytes.len() as f64 / (1 << 20) as f64;
        let large = bytes.len() >= LARGE_COMPONENT_BYTES;
        if large {
            tracing::info!(
                "loading {label} ({mb:.1} MB){}",
                if self.cache.is_some() {
                    ": it compiles for seconds unless the compilation cache holds it"
                } else {
                    ": no compilation cache (cache_dir), so it compiles for seconds every time"
                }
            );
        }
        let started = std::time::Instant::now();
        let component = self.compile(bytes)?;
        let took = started.elapsed();
        if took >= std::time::Duration::from_secs(1) {
            tracing::info!(
                "compiled {label} ({mb:.1} MB) in {:.1} s{}",
                took.as_secs_f64(),
                if self.cache.is_some() {
                    " (not cached before; the next load reads it from the cache)"
                } else {
                    " (set cache_dir in host.toml to compile it once)"
                }
            );
        } else if large {
            tracing::info!("loaded {label} ({mb:.1} MB) in {:.2} s", took.as_secs_f64());
        }
        Ok(component)
    }

    /// Compilations so far. With a cache, hits and misses are the cache's
    /// own count; without one, every request compiles.
    pub fn compile_stats(&self) -> CompileStats {
        let requests = self.requests.load(Ordering::Relaxed);
        match &self.cache {
            Some(c) => CompileStats {
                requests,
                cache_hits: c.cache_hits() as u64,
                compiled: c.cache_misses() as u64,
            },
            None => CompileStats {
                requests,
                cache_hits: 0,
                compiled: requests,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_ticks_round_up_plus_one() {
        let e = PluginEngine::new(EngineConfig::default()).unwrap();
        assert_eq!(e.deadline_ticks(Duration::from_millis(1000)), 101);
        assert_eq!(e.deadline_ticks(Duration::from_millis(1)), 2);
        assert_eq!(e.deadline_ticks(Duration::from_millis(15)), 3);
    }

    #[test]
    fn core_modules_do_not_compile_as_components() {
        let e = PluginEngine::new(EngineConfig::default()).unwrap();
        assert!(e.compile(b"\0asm\x01\0\0\0").is_err());
    }
}
