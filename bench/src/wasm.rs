//! WebAssembly handlers for our side: the project's plugin runtime
//! ([`PluginRunner`]) with one engine per process, and the paths of the built
//! example plugins.
//!
//! Invariant: a `WasmHandler` exists only once its plugin instance started
//! (`init` returned); it is driven exactly like a production plugin.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result};
use kube_informer::cache_view::CacheView;
use kube_informer::handler::{Delivery, Handled, Handler};
use kube_informer::notification::NotificationRef;
use wasm_informer_runtime::capability::api::ClusterApi;
use wasm_informer_runtime::capability::kube::{Grants, KubeSettings, WriteGrant, WriteIntents};
use wasm_informer_runtime::{
    EngineConfig, HostServices, LoadedPlugin, PluginEngine, PluginLimits, PluginRunner, PluginSpec,
    PluginStatus,
};

/// A plugin instance driven as a listener's handler.
pub struct WasmHandler(PluginRunner);

static ENGINE: OnceLock<Arc<PluginEngine>> = OnceLock::new();

/// The process's plugin engine (compilation cache under the system temp dir).
pub fn engine() -> Result<Arc<PluginEngine>> {
    if let Some(e) = ENGINE.get() {
        return Ok(e.clone());
    }
    let config = EngineConfig {
        cache_dir: Some(std::env::temp_dir().join("wasm-informer-bench-cache")),
        ..EngineConfig::default()
    };
    let e = PluginEngine::new(config).map_err(|e| anyhow::anyhow!("plugin engine: {e}"))?;
    Ok(ENGINE.get_or_init(|| e).clone())
}

/// What `[[write]] resource = "v1/pods" verbs = ["patch"]` with
/// `write_qps = 0` (no rate limit) grants.
pub fn pod_patch_settings() -> KubeSettings {
    KubeSettings {
        grants: vec![
            WriteGrant::new("v1/pods", None, &["patch".to_string()], None).expect("a valid grant"),
        ],
        write_qps: 0.0,
        ..KubeSettings::default()
    }
}

/// Compiles and links `path` as plugin `name`, with no API grant.
pub fn load(name: &str, path: &str, config: &str, timeout_ms: u64) -> Result<Arc<LoadedPlugin>> {
    load_with(name, path, config, timeout_ms, KubeSettings::default())
}

/// Compiles and links `path` as plugin `name`, with the API grants `kube`.
pub fn load_with(
    name: &str,
    path: &str,
    config: &str,
    timeout_ms: u64,
    kube: KubeSettings,
) -> Result<Arc<LoadedPlugin>> {
    load_reading(name, path, config, timeout_ms, kube, "v1/pods")
}

/// Compiles and links `path` as plugin `name`, allowed to read `resource`
/// from the cache (a controller reads its primary resource).
pub fn load_reading(
    name: &str,
    path: &str,
    config: &str,
    timeout_ms: u64,
    kube: KubeSettings,
    resource: &str,
) -> Result<Arc<LoadedPlugin>> {
    let engine = engine()?;
    let spec = PluginSpec {
        kube,
        config_json: config.to_string(),
        read: vec![resource.to_string()],
        limits: PluginLimits {
            timeout_ms,
            ..PluginLimits::default()
        },
        ..PluginSpec::new(name)
    };
    LoadedPlugin::from_file(&engine, spec, std::path::Path::new(path))
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("loading plugin {name} from {path}"))
}

/// Starts one instance of a loaded plugin; with `api`, its `kube` calls
/// reach that server under the plugin's grants.
pub async fn start(
    name: &str,
    plugin: Arc<LoadedPlugin>,
    cache: Arc<dyn CacheView>,
    api: Option<Arc<dyn ClusterApi>>,
    shadow: Shadowing,
) -> Result<WasmHandler> {
    let services = HostServices {
        api,
        grants: Grants::new(plugin.spec().kube.clone()),
        dry_run: shadow.dry_run,
        intents: shadow.intents,
        ..HostServices::cache_only(cache)
    };
    let runner = PluginRunner::start(engine()?, plugin, services)
        .await
        .map_err(|e| anyhow::anyhow!("starting plugin {name}: {e}"))?;
    Ok(WasmHandler(runner))
}

/// How a handler takes part in a shadow comparison, as the host wires a
/// live plugin and its shadow: each side's intended writes go to its sink
/// of one shadow book, and the shadow's writes are all dry runs.
#[derive(Default)]
pub struct Shadowing {
    /// Every write with `dryRun=All` (the shadow).
    pub dry_run: bool,
    /// The book's sink for this side.
    pub intents: Option<Arc<dyn WriteIntents>>,
}

impl WasmHandler {
    /// Loads `path` and starts one instance whose cache imports read `cache`;
    /// with `api`, it may patch pods there ([`pod_patch_settings`]).
    pub async fn start(
        name: &str,
        path: &str,
        config: &str,
        timeout_ms: u64,
        cache: Arc<dyn CacheView>,
        api: Option<Arc<dyn ClusterApi>>,
        shadow: Shadowing,
    ) -> Result<Self> {
        let kube = if api.is_some() {
            pod_patch_settings()
        } else {
            KubeSettings::default()
        };
        let plugin = load_with(name, path, config, timeout_ms, kube)?;
        start(name, plugin, cache, api, shadow).await
    }

    /// The runtime's counters of this instance (API requests among them).
    pub fn status(&self) -> Arc<PluginStatus> {
        self.0.status().clone()
    }

    /// Hands one event to the plugin.
    pub async fn handle(&mut self, n: NotificationRef) -> Delivery {
        self.0.handle(n).await
    }

    /// The runner's batch size.
    pub fn max_batch(&self) -> usize {
        self.0.max_batch()
    }

    /// The runner's listener thread.
    pub fn own_thread(&self) -> Option<String> {
        self.0.own_thread()
    }

    /// Hands a batch of events to the plugin, as the host's listener does.
    pub async fn handle_batch(&mut self, batch: Vec<NotificationRef>) -> Vec<Handled> {
        self.0.handle_batch(batch).await
    }
}

/// The `.wasm` of the Rust plugin `name`, built by `plugin-artifacts` (so by
/// every `cargo build` of this crate).
pub fn plugin_path(name: &str) -> Result<String> {
    let p = plugin_artifacts::ALL
        .iter()
        .find(|(pkg, _)| *pkg == name)
        .map(|(_, p)| *p)
        .with_context(|| format!("no Rust plugin named {name} in plugin-artifacts"))?;
    anyhow::ensure!(
        std::path::Path::new(p).exists(),
        "the Rust plugin {name} is missing at {p}; rebuild the bench crate"
    );
    Ok(p.to_string())
}

/// The JavaScript, Python or C plugin `plugins/testing/NAME`, built (or
/// found up to date) by `scripts/build-plugins.sh NAME` into
/// `target/plugins/NAME.wasm`.
pub fn built_plugin(name: &str) -> Result<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let st = std::process::Command::new(root.join("scripts/build-plugins.sh"))
        .arg(name)
        .current_dir(&root)
        .stdout(std::process::Stdio::null())
        .status()
        .context("running scripts/build-plugins.sh")?;
    anyhow::ensure!(
        st.success(),
        "scripts/build-plugins.sh {name} failed ({st}); `make plugins` sets up the JavaScript and Python toolchains"
    );
    let p = root.join("target/plugins").join(format!("{name}.wasm"));
    anyhow::ensure!(p.exists(), "{} was not built", p.display());
    Ok(p.display().to_string())
}
