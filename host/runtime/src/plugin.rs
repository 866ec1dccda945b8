//! A plugin ready to be instantiated: its manifest-level description
//! ([`PluginSpec`]) and its compiled, pre-linked component ([`LoadedPlugin`]).
//!
//! Invariant: a [`LoadedPlugin`] has valid limits, a component whose memories
//! start within its memory cap, and whose every import the engine's linker
//! satisfies, so instantiating it can only fail by running guest code (a trap
//! or an `init` error).

use std::path::Path;
use std::sync::Arc;

use wasmtime::component::Component;

use super::bindings::EventHandlerPre;
use super::engine::PluginEngine;
use super::host_state::HostState;
use super::limits::{LimitsError, PluginLimits};
use super::memory_floor::{check_memory_floor, MemoryFloorError};

/// What the runtime needs from a plugin manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginSpec {
    /// Unique plugin name; tags its log lines (`plugin=NAME`).
    pub name: String,
    /// The manifest's `[config]` table as JSON (`{}` when absent), handed to `init`.
    pub config_json: String,
    /// Resources the plugin may query through the `cache` import.
    pub read: Vec<String>,
    /// Fuel, deadline, memory and restart policy.
    pub limits: PluginLimits,
}

impl PluginSpec {
    /// A spec with default limits, no readable resources and an empty config.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            config_json: "{}".into(),
            read: Vec::new(),
            limits: PluginLimits::default(),
        }
    }
}

/// Why a plugin could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("plugin {name}: cannot read {path}: {source}")]
    Read {
        name: String,
        path: String,
        source: std::io::Error,
    },
    #[error("plugin {name}: {source}")]
    Limits { name: String, source: LimitsError },
    #[error("plugin {name}: [config] is not valid JSON: {detail}")]
    Config { name: String, detail: String },
    #[error("plugin {name}: cannot compile component: {detail}")]
    Compile { name: String, detail: String },
    #[error("plugin {name}: component does not fit the host: {detail}")]
    Link { name: String, detail: String },
    #[error("plugin {name}: {source}")]
    MemoryFloor {
        name: String,
        source: MemoryFloorError,
    },
}

/// A compiled and pre-linked plugin.
pub struct LoadedPlugin {
    pub(crate) spec: Arc<PluginSpec>,
    pub(crate) readable: Arc<[String]>,
    pub(crate) pre: EventHandlerPre<HostState>,
}

impl std::fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("spec", &self.spec)
            .finish()
    }
}

impl LoadedPlugin {
    /// Reads, compiles and links the component at `path`.
    pub fn from_file(
        engine: &PluginEngine,
        spec: PluginSpec,
        path: &Path,
    ) -> Result<Arc<Self>, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
            name: spec.name.clone(),
            path: path.display().to_string(),
            source,
        })?;
        Self::from_bytes(engine, spec, &bytes)
    }

    /// Compiles and links a component.
    pub fn from_bytes(
        engine: &PluginEngine,
        spec: PluginSpec,
        bytes: &[u8],
    ) -> Result<Arc<Self>, LoadError> {
        Self::validate_spec(&spec)?;
        let component = engine.compile(bytes).map_err(|e| LoadError::Compile {
            name: spec.name.clone(),
            detail: format!("{e:?}"),
        })?;
        Self::from_component(engine, spec, &component)
    }

    fn validate_spec(spec: &PluginSpec) -> Result<(), LoadError> {
        let name = || spec.name.clone();
        spec.limits.validate().map_err(|source| LoadError::Limits {
            name: name(),
            source,
        })?;
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(&spec.config_json) {
            return Err(LoadError::Config {
                name: name(),
                detail: e.to_string(),
            });
        }
        Ok(())
    }

    /// Links a component already compiled (one compilation can serve every
    /// plugin built from the same bytes). Refuses a component whose memory
    /// floor is above the plugin's `memory_mb` before anything runs.
    pub fn from_component(
        engine: &PluginEngine,
        spec: PluginSpec,
        component: &Component,
    ) -> Result<Arc<Self>, LoadError> {
        Self::validate_spec(&spec)?;
        let name = spec.name.clone();
        check_memory_floor(component, &spec.limits).map_err(|source| LoadError::MemoryFloor {
            name: name.clone(),
            source,
        })?;
        let pre = engine
            .linker()
            .instantiate_pre(component)
            .and_then(EventHandlerPre::new)
            .map_err(|e| LoadError::Link {
                name: name.clone(),
                detail: format!("{e:?}"),
            })?;
        let mut read = spec.read.clone();
        read.sort();
        read.dedup();
        Ok(Arc::new(Self {
            spec: Arc::new(spec),
            readable: read.into(),
            pre,
        }))
    }

    /// The plugin's spec.
    pub fn spec(&self) -> &PluginSpec {
        &self.spec
    }
}
