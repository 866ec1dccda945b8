//! The wasm-informer plugin runtime: WebAssembly components as Kubernetes
//! event handlers and controllers, each sandboxed with its own fuel budget,
//! wall-clock deadline and memory cap per call, restarted with backoff after
//! a trap and quarantined after repeated failures, and able to act on the
//! cluster only through the capabilities its manifest grants.
//!
//! The flow for one plugin: [`PluginEngine`] (shared) compiles and links a
//! component into a [`LoadedPlugin`], detecting its [`World`] (0.1 or 0.2
//! event handler, 0.2 controller); a [`PluginRunner`] owns one
//! [`PluginInstance`] on the plugin's own thread and implements
//! [`kube_informer::Handler`] for the plugin's listener, and a controller's
//! [`ReconcileWorker`]s (one instance each) drain its work queue; every call
//! ends in a [`CallOutcome`] or a [`ReconcileOutcome`]; [`PluginStatus`] exposes counters and state; [`check`]
//! validates a component file without running it.
//!
//! What a plugin may reach is one [`capability`] each: the cache (`read`),
//! the log, the Kubernetes API (`[[write]]`) and Events (`events = true`).
//! The runtime knows nothing of HTTP: it reaches the cache through
//! [`kube_informer::CacheView`] and the API server through
//! [`capability::api::ClusterApi`], both implemented by the host.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # fn demo(cache: Arc<dyn kube_informer::CacheView>, pods: Arc<kube_informer::processor::Processor>) -> Result<(), Box<dyn std::error::Error>> {
//! use kube_informer::HandlerOptions;
//! use wasm_informer_runtime::{EngineConfig, LoadedPlugin, PluginEngine, PluginRunner, PluginSpec};
//!
//! let engine = PluginEngine::new(EngineConfig::default())?;
//! let mut spec = PluginSpec::new("pod-counter");
//! spec.read = vec!["v1/pods".into()];
//! let plugin = LoadedPlugin::from_file(&engine, spec, "pod-counter.wasm".as_ref())?;
//! # let rt = tokio::runtime::Runtime::new()?;
//! # rt.block_on(async {
//! // Runs `init`, then handles events on the plugin's own thread.
//! let runner = PluginRunner::start(engine, plugin, cache).await?;
//! let registration = pods.add_handler(runner, HandlerOptions::named("pod-counter"))?;
//! # let _ = registration; Ok::<_, Box<dyn std::error::Error>>(()) })?;
//! # Ok(()) }
//! ```
//!
//! Invariant (I7): nothing a plugin does — trap, loop, exhaust memory,
//! overflow its stack, flood its log, sleep, wait on a slow API server —
//! affects the host or another plugin beyond the plugin's own thread and caps.

#![warn(missing_docs)]

// What a plugin is built against, and how it is compiled and loaded.
pub mod world;
pub mod engine;
pub mod incremental;
pub mod plugin;
pub mod limits;
pub mod memory_floor;
pub mod check;

// One instance and what its calls may reach.
pub mod host_state;
pub mod objects;
pub mod capability;
pub mod limiter;
pub mod log_sink;
pub mod stdio;
pub mod rate;
pub mod instance;
pub mod outcome;

// Running a plugin: behind a listener (event handlers), or as the workers
// of a work queue (controllers); both under one restart policy.
mod restart;
pub mod runner;
pub mod reconciler;
pub mod status;
pub mod stop;

pub use capability::HostServices;
pub use check::{check_bytes, check_file, CheckError, CheckReport};
pub use engine::{CompileStats, EngineConfig, EngineError, PluginEngine};
pub use instance::{PluginInstance, ReconcileOutcome, ReconcileRequest, StartError};
pub use limits::PluginLimits;
pub use log_sink::LogLimits;
pub use memory_floor::MemoryFloorError;
pub use outcome::{CallOutcome, PluginTrap, TrapKind};
pub use plugin::{LoadError, LoadedPlugin, PluginSpec};
pub use reconciler::{ReconcileWorker, WorkersError};
pub use runner::PluginRunner;
pub use status::{PluginState, PluginStatus, StatusSnapshot};
pub use stop::{Stop, Stopped, Waiting};
/// A compiled component, as [`PluginEngine::compile`] returns it (cheap to
/// clone; one can back many [`LoadedPlugin`]s).
pub use wasmtime::component::Component as CompiledComponent;
pub use world::World;
