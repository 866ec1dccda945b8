//! A small, self-contained wasmtime host for the example plugins of every guest
//! language (JavaScript, Python, C, Rust): it loads a built component of world
//! `event-handler`, serves its `cache` imports from an in-memory object list and
//! records its `log` calls and stdout/stderr.
//!
//! Invariant: the harness is independent of the production plugin runtime; it
//! checks what each guest toolchain produced (exports, imports, results, log
//! output) and measures its cost, with fuel and an epoch deadline armed so a
//! misbehaving guest cannot hang a test.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

wasmtime::component::bindgen!({
    path: "../wit",
    world: "event-handler",
});

pub use wasm_informer::plugin::log::Level;
pub use wasm_informer::plugin::types::{
    CacheError, Event, EventKind, KeyValue, ObjectMeta, ObjectView,
};

/// Fuel given to each call; generous enough for the first call of a JS guest.
pub const FUEL_PER_CALL: u64 = 2_000_000_000;

/// One object in the harness cache.
#[derive(Clone)]
pub struct Cached {
    pub resource: String,
    pub key: String,
    pub view: ObjectView,
}

/// Per-instance state: WASI context, the cache the guest may read, and its log.
pub struct GuestState {
    wasi: WasiCtx,
    table: ResourceTable,
    /// Objects the `cache` import serves.
    pub cache: Vec<Cached>,
    /// Resources the guest may read; others give `forbidden`.
    pub readable: Vec<String>,
    /// Every `log` call, in order.
    pub logs: Vec<(Level, String)>,
    /// Number of cache calls made.
    pub cache_calls: u64,
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl wasm_informer::plugin::types::Host for GuestState {}

impl wasm_informer::plugin::log::Host for GuestState {
    fn log(&mut self, level: Level, message: String) {
        self.logs.push((level, message));
    }
}

fn matches_selector(meta: &ObjectMeta, selector: &str) -> Result<bool, CacheError> {
    for term in selector.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let Some((k, v)) = term.split_once('=') else {
            return Err(CacheError::InvalidSelector(format!(
                "harness supports only k=v terms, got {term:?}"
            )));
        };
        let (k, v) = (k.trim_end_matches('='), v.trim());
        if !meta.labels.iter().any(|kv| kv.key == k && kv.value == v) {
            return Ok(false);
        }
    }
    Ok(true)
}

impl GuestState {
    fn check(&mut self, resource: &str) -> Result<(), CacheError> {
        self.cache_calls += 1;
        if self.readable.iter().any(|r| r == resource) {
            Ok(())
        } else {
            Err(CacheError::Forbidden(resource.to_string()))
        }
    }
}

impl wasm_informer::plugin::cache::Host for GuestState {
    fn get(&mut self, resource: String, key: String) -> Result<Option<ObjectView>, CacheError> {
        self.check(&resource)?;
        Ok(self
            .cache
            .iter()
            .find(|c| c.resource == resource && c.key == key)
            .map(|c| c.view.clone()))
    }

    fn list(
        &mut self,
        resource: String,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<ObjectView>, CacheError> {
        self.check(&resource)?;
        let mut out = Vec::new();
        for c in self.cache.iter().filter(|c| c.resource == resource) {
            if namespace.is_some() && c.view.meta.namespace != namespace {
                continue;
            }
            if let Some(sel) = &label_selector {
                if !matches_selector(&c.view.meta, sel)? {
                    continue;
                }
            }
            out.push(c.view.clone());
        }
        Ok(out)
    }

    fn by_index(
        &mut self,
        resource: String,
        index_name: String,
        value: String,
    ) -> Result<Vec<ObjectView>, CacheError> {
        self.check(&resource)?;
        if index_name != "namespace" {
            return Err(CacheError::UnknownIndex(index_name));
        }
        Ok(self
            .cache
            .iter()
            .filter(|c| c.resource == resource && c.view.meta.namespace.as_deref() == Some(&value))
            .map(|c| c.view.clone())
            .collect())
    }

    fn has_synced(&mut self, resource: String) -> Result<bool, CacheError> {
        self.check(&resource)?;
        Ok(true)
    }
}

/// Where `scripts/build-plugins.sh` puts the built plugins.
pub fn plugins_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/plugins")
}

/// The path of a built plugin; panics with the build command when it is missing.
pub fn plugin_path(name: &str) -> PathBuf {
    let p = plugins_dir().join(format!("{name}.wasm"));
    assert!(
        p.exists(),
        "{} is missing: build the plugins first with scripts/setup.sh && scripts/build-plugins.sh",
        p.display()
    );
    p
}

/// An engine configured like the production runtime: fuel, epoch interruption,
/// and (optionally) wasmtime's on-disk compilation cache.
pub fn engine(cache_dir: Option<&Path>) -> Engine {
    let mut config = Config::new();
    config.consume_fuel(true);
    config.epoch_interruption(true);
    if let Some(dir) = cache_dir {
        let cache = wasmtime::Cache::new(wasmtime::CacheConfig::new().with_directory(dir))
            .expect("compilation cache");
        config.cache(Some(cache));
    }
    Engine::new(&config).expect("engine")
}

/// The shared on-disk compilation cache for tests, under the workspace target dir.
pub fn test_cache_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/wasmtime-cache-tests");
    std::fs::create_dir_all(&dir).expect("create cache dir");
    dir
}

/// Loads (compiles or fetches from the cache) a component, timing it.
pub fn load(engine: &Engine, path: &Path) -> (Component, Duration) {
    let started = Instant::now();
    let c = Component::from_file(engine, path)
        .unwrap_or_else(|e| panic!("compile {}: {e:?}", path.display()));
    (c, started.elapsed())
}

/// A running plugin instance.
pub struct Guest {
    pub store: Store<GuestState>,
    bindings: EventHandler,
    /// Fuel set before each call.
    pub fuel_per_call: u64,
    /// Epoch ticks allowed per call (the engine's epoch is advanced by the test).
    pub epoch_ticks_per_call: u64,
}

impl Guest {
    /// Instantiates `component` with a cache holding `cache` and read access to `readable`.
    pub fn new(engine: &Engine, component: &Component, cache: Vec<Cached>, readable: &[&str]) -> Self {
        let mut linker: Linker<GuestState> = Linker::new(engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).expect("wasi linker");
        EventHandler::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).expect("plugin linker");
        let stdout = MemoryOutputPipe::new(1 << 20);
        let stderr = MemoryOutputPipe::new(1 << 20);
        let wasi = WasiCtx::builder()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .build();
        let state = GuestState {
            wasi,
            table: ResourceTable::new(),
            cache,
            readable: readable.iter().map(|s| s.to_string()).collect(),
            logs: Vec::new(),
            cache_calls: 0,
            stdout,
            stderr,
        };
        let mut store = Store::new(engine, state);
        store.set_fuel(FUEL_PER_CALL).unwrap();
        store.set_epoch_deadline(u64::MAX / 2);
        let bindings = EventHandler::instantiate(&mut store, component, &linker)
            .unwrap_or_else(|e| panic!("instantiate: {e:?}"));
        Guest {
            store,
            bindings,
            fuel_per_call: FUEL_PER_CALL,
            epoch_ticks_per_call: u64::MAX / 2,
        }
    }

    /// Calls `init(config)`; returns the guest's result, panicking on a trap.
    pub fn init(&mut self, config: &str) -> Result<(), String> {
        self.arm();
        self.bindings
            .wasm_informer_plugin_handler()
            .call_init(&mut self.store, config)
            .unwrap_or_else(|e| panic!("init trapped: {e:?}\nstderr: {}", self.stderr()))
    }

    /// Calls `on-event`; the outer error is a trap.
    pub fn try_on_event(&mut self, event: &Event) -> wasmtime::Result<Result<(), String>> {
        self.arm();
        self.bindings
            .wasm_informer_plugin_handler()
            .call_on_event(&mut self.store, event)
    }

    /// Calls `on-event`; panics on a trap.
    pub fn on_event(&mut self, event: &Event) -> Result<(), String> {
        match self.try_on_event(event) {
            Ok(r) => r,
            Err(e) => panic!("on-event trapped: {e:?}\nstderr: {}", self.stderr()),
        }
    }

    fn arm(&mut self) {
        self.store.set_fuel(self.fuel_per_call).unwrap();
        self.store.set_epoch_deadline(self.epoch_ticks_per_call);
        self.store.epoch_deadline_trap();
    }

    /// Fuel consumed by the last call.
    pub fn fuel_used(&self) -> u64 {
        self.fuel_per_call - self.store.get_fuel().unwrap()
    }

    /// The messages logged at `info` or above, in order.
    pub fn messages(&self) -> Vec<String> {
        self.store.data().logs.iter().map(|(_, m)| m.clone()).collect()
    }

    /// Forgets the log so far.
    pub fn clear_logs(&mut self) {
        self.store.data_mut().logs.clear();
    }

    /// What the guest wrote to stderr.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.store.data().stderr.contents()).into_owned()
    }

    /// What the guest wrote to stdout.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.store.data().stdout.contents()).into_owned()
    }
}

fn kvs(v: Option<&serde_json::Value>) -> Vec<KeyValue> {
    v.and_then(|v| v.as_object())
        .map(|m| {
            m.iter()
                .map(|(k, v)| KeyValue {
                    key: k.clone(),
                    value: v.as_str().unwrap_or_default().to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// An object view built from a Kubernetes object in JSON, as the host would.
pub fn view(json: &serde_json::Value) -> ObjectView {
    let m = &json["metadata"];
    let s = |k: &str| m[k].as_str().map(str::to_string);
    ObjectView {
        meta: ObjectMeta {
            namespace: s("namespace"),
            name: s("name").expect("metadata.name"),
            uid: s("uid").unwrap_or_default(),
            resource_version: s("resourceVersion").unwrap_or_default(),
            generation: m["generation"].as_i64(),
            labels: kvs(m.get("labels")),
            annotations: kvs(m.get("annotations")),
            creation_timestamp: s("creationTimestamp"),
            deletion_timestamp: s("deletionTimestamp"),
            owner_uids: m["ownerReferences"]
                .as_array()
                .map(|a| a.iter().filter_map(|o| o["uid"].as_str().map(str::to_string)).collect())
                .unwrap_or_default(),
        },
        json: serde_json::to_string(json).unwrap(),
    }
}

/// The cache key of an object view.
pub fn key(view: &ObjectView) -> String {
    match &view.meta.namespace {
        Some(ns) => format!("{ns}/{}", view.meta.name),
        None => view.meta.name.clone(),
    }
}

/// A cache entry for `json` under `resource`.
pub fn cached(resource: &str, json: &serde_json::Value) -> Cached {
    let v = view(json);
    Cached {
        resource: resource.to_string(),
        key: key(&v),
        view: v,
    }
}

/// An event of `kind` for a cached object.
pub fn event(kind: EventKind, c: &Cached, initial: bool) -> Event {
    Event {
        kind,
        resource: c.resource.clone(),
        key: c.key.clone(),
        object: c.view.clone(),
        old_object: None,
        is_in_initial_list: initial,
        final_state_unknown: false,
    }
}
