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
//! [`EngineConfig::epoch_tick`] for as long as the engine lives. Linear
//! memories start from copy-on-write images of their modules' data (on with
//! either allocator), so an instance's untouched pages stay shared with the
//! compiled module; with pooling, the pool holds [`PoolSizing::instances`]
//! component instances, each memory up to [`PoolSizing::memory_mb`].

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
    /// tables per component (see the `POOL_*` constants), which large
    /// JavaScript and Python components could exceed. The pool holds
    /// [`EngineConfig::pool`] instances; an instance beyond that fails to
    /// start.
    pub pooling: bool,
    /// With `pooling`: how many instances the pool holds and how large each
    /// of their memories may grow (see [`PoolSizing::for_plugins`]).
    pub pool: PoolSizing,
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
            pool: PoolSizing::default(),
            epoch_tick: Duration::from_millis(10),
            log: LogLimits::default(),
            incremental: true,
        }
    }
}

/// Core instances the pool reserves per component instance: a Rust or C
/// component has 3-6 (the program, the WASI adapter, shims), a JavaScript or
/// Python one up to about 15 (the interpreter's libraries).
pub const POOL_CORE_INSTANCES_PER_COMPONENT: u32 = 24;
/// Linear memories the pool reserves per component instance (a component has
/// one for its program, one for the WASI adapter's state at most).
pub const POOL_MEMORIES_PER_COMPONENT: u32 = 4;
/// Tables the pool reserves per component instance.
pub const POOL_TABLES_PER_COMPONENT: u32 = 16;
/// Elements per pooled table: a Python component's interpreter table has tens
/// of thousands of functions (wasmtime's default is 20 000).
pub const POOL_TABLE_ELEMENTS: usize = 100_000;
/// Most component instances one pool may hold.
pub const POOL_MAX_INSTANCES: u32 = 10_000;

/// How large the pooling allocator's pool is: sized from the configuration
/// (the plugins and controller workers it will run, and the largest
/// `memory_mb` among them), not a fixed count.
///
/// Each pooled memory reserves the same virtual address space as an on-demand
/// one (4 GiB plus guard pages, so that bounds checks stay elided); nothing of
/// it is resident until a guest touches it, and a slot's pages are returned to
/// the kernel when its instance is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSizing {
    /// Component instances alive at once: one per event-handler plugin, one
    /// per controller worker, plus the instances a reload or a restart
    /// starts while the old one still runs.
    pub instances: u32,
    /// Cap of each pooled linear memory, in MiB: the largest `memory_mb` of
    /// the plugins it will run.
    pub memory_mb: u64,
}

impl Default for PoolSizing {
    /// 64 instances, each memory up to the default `memory_mb`.
    fn default() -> Self {
        Self {
            instances: 64,
            memory_mb: crate::limits::DEFAULT_MEMORY_MB,
        }
    }
}

impl PoolSizing {
    /// A pool for `running` instances at once (plugins plus controller
    /// workers) whose largest memory cap is `max_memory_mb`: twice the running
    /// instances (a reload or a restart starts the new instance before the old
    /// one is dropped), at least 8.
    pub fn for_plugins(running: u32, max_memory_mb: u64) -> Self {
        Self {
            instances: running.saturating_mul(2).max(8),
            memory_mb: max_memory_mb,
        }
    }

    /// The wasmtime pool configuration, or why this sizing is out of range.
    pub fn pooling_config(&self) -> Result<PoolingAllocationConfig, String> {
        if self.instances == 0 || self.instances > POOL_MAX_INSTANCES {
            return Err(format!(
                "pool of {} instances: must be between 1 and {POOL_MAX_INSTANCES}",
                self.instances
            ));
        }
        if self.memory_mb == 0 || self.memory_mb > crate::limits::MAX_MEMORY_MB {
            return Err(format!(
                "pool memory cap of {} MiB: must be between 1 and {}",
                self.memory_mb,
                crate::limits::MAX_MEMORY_MB
            ));
        }
        let n = self.instances;
        let mut p = PoolingAllocationConfig::default();
        p.total_component_instances(n)
            .max_core_instances_per_component(POOL_CORE_INSTANCES_PER_COMPONENT)
            .total_core_instances(n * POOL_CORE_INSTANCES_PER_COMPONENT)
            .max_memories_per_component(POOL_MEMORIES_PER_COMPONENT)
            .total_memories(n * POOL_MEMORIES_PER_COMPONENT)
            .max_tables_per_component(POOL_TABLES_PER_COMPONENT)
            .total_tables(n * POOL_TABLES_PER_COMPONENT)
            .table_elements(POOL_TABLE_ELEMENTS)
            .total_stacks(n)
            .max_memory_size((self.memory_mb as usize) << 20);
        Ok(p)
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
            .parallel_compilation(true)
            // The default, stated: memories start as copy-on-write mappings
            // of the module's data image, not as copies.
            .memory_init_cow(true);
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
            let p = config
                .pool
                .pooling_config()
                .map_err(|e| EngineError::Config(wasmtime::Error::msg(e)))?;
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

    /// A cache with nothing in it: the no-op plugin reads nothing.
    struct NoCache;

    impl kube_informer::CacheView for NoCache {
        fn get(
            &self,
            r: &str,
            _: &str,
        ) -> Result<Option<kube_informer::ObjectRef>, kube_informer::CacheError> {
            Err(kube_informer::CacheError::UnknownResource(r.into()))
        }
        fn list(
            &self,
            r: &str,
            _: Option<&str>,
            _: Option<&str>,
        ) -> Result<Vec<kube_informer::ObjectRef>, kube_informer::CacheError> {
            Err(kube_informer::CacheError::UnknownResource(r.into()))
        }
        fn by_index(
            &self,
            r: &str,
            _: &str,
            _: &str,
        ) -> Result<Vec<kube_informer::ObjectRef>, kube_informer::CacheError> {
            Err(kube_informer::CacheError::UnknownResource(r.into()))
        }
        fn has_synced(&self, r: &str) -> Result<bool, kube_informer::CacheError> {
            Err(kube_informer::CacheError::UnknownResource(r.into()))
        }
    }

    /// Starts up to `n` instances of the Rust no-op plugin at once under
    /// `pool`; returns how many started and the first refusal.
    fn start_pooled(pool: PoolSizing, n: usize) -> (usize, Option<String>) {
        use crate::host_state::Granted;
        use crate::instance::PluginInstance;
        use crate::log_sink::LogSink;
        use crate::plugin::{LoadedPlugin, PluginSpec};
        use crate::status::PluginStatus;
        let engine = PluginEngine::new(EngineConfig {
            pooling: true,
            pool,
            ..EngineConfig::default()
        })
        .unwrap();
        let plugin = LoadedPlugin::from_file(
            &engine,
            PluginSpec::new("noop"),
            std::path::Path::new(plugin_artifacts::NOOP),
        )
        .unwrap();
        let cache: Arc<dyn kube_informer::CacheView> = Arc::new(NoCache);
        let mut running = Vec::new();
        for _ in 0..n {
            let status = Arc::new(PluginStatus::new("noop"));
            let log = Arc::new(LogSink::new("noop".into(), LogLimits::default(), status));
            match PluginInstance::start(
                &engine,
                &plugin,
                Granted::cache_only(&plugin, cache.clone(), log),
            ) {
                Ok(i) => running.push(i),
                Err(e) => return (running.len(), Some(e.to_string())),
            }
        }
        (running.len(), None)
    }

    #[test]
    fn a_pool_sized_for_200_plugins_runs_200_instances_at_once() {
        let pool = PoolSizing::for_plugins(200, crate::limits::DEFAULT_MEMORY_MB);
        assert!(pool.instances >= 200, "{pool:?}");
        let (started, refused) = start_pooled(pool, 200);
        assert_eq!((started, refused), (200, None));
    }

    #[test]
    fn a_pool_refuses_the_instance_beyond_its_size() {
        let pool = PoolSizing {
            instances: 3,
            memory_mb: crate::limits::DEFAULT_MEMORY_MB,
        };
        let (started, refused) = start_pooled(pool, 4);
        assert_eq!(started, 3, "{refused:?}");
        assert!(refused.is_some());
    }

    #[test]
    fn a_pool_out_of_range_is_refused_with_its_size() {
        for pool in [
            PoolSizing {
                instances: 0,
                memory_mb: 256,
            },
            PoolSizing {
                instances: POOL_MAX_INSTANCES + 1,
                memory_mb: 256,
            },
            PoolSizing {
                instances: 8,
                memory_mb: crate::limits::MAX_MEMORY_MB + 1,
            },
        ] {
            let e = PluginEngine::new(EngineConfig {
                pooling: true,
                pool,
                ..EngineConfig::default()
            })
            .unwrap_err()
            .to_string();
            assert!(e.contains("pool"), "{e}");
        }
    }

    #[test]
    fn core_modules_do_not_compile_as_components() {
        let e = PluginEngine::new(EngineConfig::default()).unwrap();
        assert!(e.compile(b"\0asm\x01\0\0\0").is_err());
    }
}
