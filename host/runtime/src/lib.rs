//! The plugin runtime: sandboxed WebAssembly components for the WIT world
//! `wasm-informer:plugin/event-handler@0.1.0`, each with its own fuel budget,
//! wall-clock deadline and memory cap per event, restarted with backoff after a
//! trap and quarantined after repeated failures.
//!
//! The flow for one plugin: [`PluginEngine`] (shared) compiles and links a
//! component into a [`LoadedPlugin`]; a [`PluginRunner`] owns a dedicated
//! thread with one [`PluginInstance`] and implements
//! [`kube_informer::handler::Handler`] for the plugin's listener; every call ends in a
//! [`CallOutcome`]; [`PluginStatus`] exposes counters and state;
//! [`check`] validates a component file without running it.
//!
//! Invariant (I7): nothing a plugin does — trap, loop, exhaust memory, overflow
//! its stack, flood its log, sleep — affects the host or another plugin beyond
//! the plugin's own thread and caps.

pub mod bindings;
pub mod check;
pub mod convert;
pub mod engine;
pub mod host_imports;
pub mod host_state;
pub mod instance;
pub mod limiter;
pub mod limits;
pub mod log_sink;
pub mod memory_floor;
pub mod outcome;
pub mod plugin;
pub mod runner;
pub mod status;
pub mod stdio;

pub use check::{check_bytes, check_file, CheckError, CheckReport};
pub use engine::{CompileStats, EngineConfig, EngineError, PluginEngine};
pub use instance::{PluginInstance, StartError};
pub use limits::PluginLimits;
pub use log_sink::LogLimits;
pub use memory_floor::MemoryFloorError;
pub use outcome::{CallOutcome, PluginTrap, TrapKind};
pub use plugin::{LoadError, LoadedPlugin, PluginSpec};
pub use runner::PluginRunner;
pub use status::{PluginState, PluginStatus, StatusSnapshot};
/// A compiled component, as [`PluginEngine::compile`] returns it (cheap to
/// clone; one can back many [`LoadedPlugin`]s).
pub use wasmtime::component::Component as CompiledComponent;
