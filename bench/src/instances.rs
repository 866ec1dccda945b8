//! The child process that measures what idle plugin instances cost: it loads
//! one component, starts one runner of it (the first instance, which also maps
//! the compiled code), then `count` more, each as the host starts a plugin
//! (its `init` ran, it waits for events; no informer, no events), and reports
//! the RSS and live heap each step added, read after both allocators returned
//! free pages.
//!
//! Invariant: every instance counted is running (its `init` returned) when
//! memory is read, and nothing but those instances was started between the
//! two readings of a step.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use kube_informer::cache_view::{CacheError, CacheView};
use kube_informer::object::ObjectRef;
use serde::{Deserialize, Serialize};
use wasm_informer_runtime::engine::PoolSizing;
use wasm_informer_runtime::limits::DEFAULT_MEMORY_MB;
use wasm_informer_runtime::{
    EngineConfig, HostServices, LoadedPlugin, PluginEngine, PluginRunner, PluginSpec,
};

use crate::{alloc, mem};

/// What to start.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstancesSpec {
    /// The component.
    pub path: String,
    /// Instances started after the first.
    pub count: usize,
    /// The pooling allocator (sized for `count + 1` instances) instead of
    /// on-demand allocation.
    pub pooling: bool,
}

/// Process memory at one step.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Reading {
    pub rss: u64,
    pub heap: i64,
}

/// What the child read.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstancesReport {
    /// After the component was loaded (compiled or read from the cache).
    pub loaded: Reading,
    /// After the first instance started.
    pub first: Reading,
    /// After `count` more started.
    pub all: Reading,
    pub count: usize,
}

impl InstancesReport {
    /// RSS each instance after the first added, on average.
    pub fn rss_per_instance(&self) -> f64 {
        (self.all.rss as f64 - self.first.rss as f64) / self.count.max(1) as f64
    }

    /// Live heap each instance after the first added, on average.
    pub fn heap_per_instance(&self) -> f64 {
        (self.all.heap - self.first.heap) as f64 / self.count.max(1) as f64
    }

    /// RSS the first instance added (compiled code mapped, engine state).
    pub fn rss_first(&self) -> f64 {
        self.first.rss as f64 - self.loaded.rss as f64
    }
}

/// A cache with no resources: an idle instance reads nothing.
struct NoCache;

impl CacheView for NoCache {
    fn get(&self, resource: &str, _key: &str) -> Result<Option<ObjectRef>, CacheError> {
        Err(CacheError::UnknownResource(resource.into()))
    }

    fn list(
        &self,
        resource: &str,
        _namespace: Option<&str>,
        _label_selector: Option<&str>,
    ) -> Result<Vec<ObjectRef>, CacheError> {
        Err(CacheError::UnknownResource(resource.into()))
    }

    fn by_index(
        &self,
        resource: &str,
        _index: &str,
        _value: &str,
    ) -> Result<Vec<ObjectRef>, CacheError> {
        Err(CacheError::UnknownResource(resource.into()))
    }

    fn has_synced(&self, resource: &str) -> Result<bool, CacheError> {
        Err(CacheError::UnknownResource(resource.into()))
    }
}

async fn reading() -> Result<Reading> {
    // Let threads the runners started settle before memory is read.
    tokio::time::sleep(Duration::from_millis(300)).await;
    mem::trim();
    Ok(Reading {
        rss: mem::rss_bytes()?,
        heap: alloc::live_bytes(),
    })
}

/// Runs the child: `spec_json` is an [`InstancesSpec`]; prints one
/// [`InstancesReport`] line.
pub fn main(spec_json: &str) -> Result<()> {
    let spec: InstancesSpec =
        serde_json::from_str(spec_json).context("instances child: bad spec")?;
    // The host's memory policy (no transparent huge pages), on both sides.
    mem::apply_huge_page_policy()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = rt.block_on(async {
        let engine = PluginEngine::new(EngineConfig {
            cache_dir: Some(std::env::temp_dir().join("wasm-informer-bench-cache")),
            pooling: spec.pooling,
            pool: PoolSizing::for_plugins(spec.count as u32 + 1, DEFAULT_MEMORY_MB),
            ..EngineConfig::default()
        })
        .map_err(|e| anyhow::anyhow!("plugin engine: {e}"))?;
        let plugin = LoadedPlugin::from_file(
            &engine,
            PluginSpec::new("idle"),
            std::path::Path::new(&spec.path),
        )
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("loading {}", spec.path))?;
        let cache: Arc<dyn CacheView> = Arc::new(NoCache);
        let start = |i: usize| {
            let (engine, plugin, cache) = (engine.clone(), plugin.clone(), cache.clone());
            async move {
                PluginRunner::start(engine, plugin, HostServices::cache_only(cache))
                    .await
                    .map_err(|e| anyhow::anyhow!("starting instance {i}: {e}"))
            }
        };
        let loaded = reading().await?;
        let mut runners = vec![start(0).await?];
        let first = reading().await?;
        for i in 1..=spec.count {
            runners.push(start(i).await?);
        }
        let all = reading().await?;
        drop(runners);
        Ok::<_, anyhow::Error>(InstancesReport {
            loaded,
            first,
            all,
            count: spec.count,
        })
    })?;
    println!("{}", serde_json::to_string(&report)?);
    rt.shutdown_timeout(Duration::from_secs(1));
    Ok(())
}

/// Runs `spec` in a fresh child process and returns its report.
pub fn measure(spec: &InstancesSpec) -> Result<InstancesReport> {
    let exe = std::env::current_exe().context("locating the bench executable")?;
    let out = std::process::Command::new(&exe)
        .arg("instances")
        .arg(serde_json::to_string(spec)?)
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("spawning {} for idle instances", exe.display()))?;
    anyhow::ensure!(
        out.status.success(),
        "the idle-instances child failed ({}); see its stderr above",
        out.status
    );
    let line = String::from_utf8_lossy(&out.stdout);
    let line = line.lines().last().unwrap_or_default();
    serde_json::from_str(line).with_context(|| format!("idle-instances child: bad report {line:?}"))
}
