//! A plugin ready to be instantiated: its manifest-level description
//! ([`PluginSpec`]), the world its component targets, and its compiled,
//! pre-linked component ([`LoadedPlugin`]).
//!
//! Invariant: a [`LoadedPlugin`] has valid limits and a component of exactly
//! one of our worlds whose memories start within its memory cap, and whose
//! every import the engine's linker
//! satisfies, so instantiating it can only fail by running guest code (a trap
//! or an `init` error).

use std::path::Path;
use std::sync::Arc;

use super::capability::kube::KubeSettings;
use super::engine::PluginEngine;
use super::host_state::HostState;
use super::limits::{LimitsError, PluginLimits};
use super::memory_floor::{check_memory_floor, MemoryFloorError};
use super::world::{v0_1, v0_2, World};
use wasmtime::component::Component;

/// What the runtime needs from a plugin manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginSpec {
    /// Unique plugin name; tags its log lines (`plugin=NAME`).
    pub name: String,
    /// The manifest's `[config]` table as JSON (`{}` when absent), handed to `init`.
    pub config_json: String,
    /// Resources the plugin may query through the `cache` import.
    pub read: Vec<String>,
    /// Fuel, deadline, memory and restart policy.
    pub limits: PluginLimits,
    /// What the plugin may do on the API server, and how its calls are paced.
    pub kube: KubeSettings,
}

impl PluginSpec {
    /// A spec with default limits, no readable resources, no API grants and
    /// an empty config.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            config_json: "{}".into(),
            read: Vec::new(),
            limits: PluginLimits::default(),
            kube: KubeSettings::default(),
        }
    }
}

/// Why a plugin could not be loaded.
// Each variant's message says what it means; the fields are named in it.
#[allow(missing_docs)]
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

/// The pre-linked component, by world.
pub(crate) enum Pre {
    HandlerV01(v0_1::EventHandlerPre<HostState>),
    HandlerV02(v0_2::EventHandlerPre<HostState>),
    ControllerV02(v0_2::ControllerPre<HostState>),
}

/// A compiled and pre-linked plugin.
pub struct LoadedPlugin {
    pub(crate) spec: Arc<PluginSpec>,
    pub(crate) readable: Arc<[String]>,
    pub(crate) world: World,
    pub(crate) pre: Pre,
}

impl std::fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("spec", &self.spec)
            .field("world", &self.world)
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
        let component =
            engine
                .compile_labelled(&spec.name, bytes)
                .map_err(|e| LoadError::Compile {
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
        let link = |e: wasmtime::Error| LoadError::Link {
            name: name.clone(),
            detail: format!("{e:?}"),
        };
        let exports: Vec<String> = component
            .component_type()
            .exports(engine.engine())
            .map(|(n, _)| n.to_string())
            .collect();
        let world = World::detect(&exports).ok_or_else(|| LoadError::Link {
            name: name.clone(),
            detail: format!(
                "it exports none of {} (its exports: {})",
                World::ALL
                    .iter()
                    .map(|w| w.export())
                    .collect::<Vec<_>>()
                    .join(", "),
                if exports.is_empty() {
                    "none".to_string()
                } else {
                    exports.join(", ")
                }
            ),
        })?;
        let pre = engine.linker().instantiate_pre(component).map_err(link)?;
        let pre = match world {
            World::EventHandlerV01 => {
                Pre::HandlerV01(v0_1::EventHandlerPre::new(pre).map_err(link)?)
            }
            World::EventHandlerV02 => {
                Pre::HandlerV02(v0_2::EventHandlerPre::new(pre).map_err(link)?)
            }
            World::ControllerV02 => {
                Pre::ControllerV02(v0_2::ControllerPre::new(pre).map_err(link)?)
            }
        };
        let mut read = spec.read.clone();
        read.sort();
        read.dedup();
        Ok(Arc::new(Self {
            spec: Arc::new(spec),
            readable: read.into(),
            world,
            pre,
        }))
    }

    /// The plugin's spec.
    pub fn spec(&self) -> &PluginSpec {
        &self.spec
    }

    /// The world its component targets.
    pub fn world(&self) -> World {
        self.world
    }
}
