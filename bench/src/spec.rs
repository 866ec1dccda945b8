//! What one measured side runs: the contract between the benchmark driver and the
//! child process that hosts the side (serialised as JSON on the command line),
//! the commands the driver sends it and the reports it prints.
//!
//! Invariant: a spec fully determines the side's setup; nothing else is read from
//! the environment. Settings that only one implementation has live in that
//! side's part ([`OursConfig`], [`PeerConfig`]); settings both sides have
//! ([`ManagedFields`], [`InitialList`]) are shared, so a comparison cannot give
//! them different values by accident.
//!
//! Extension point: a new knob of one side (for example another event encoding
//! for our plugins) is a field of that side's config with a serde default, read
//! in `ours.rs` or `peer.rs`; a new resource is a [`SideSpec::resource`] value the
//! sides accept.

use serde::{Deserialize, Serialize};

/// Which implementation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Side {
    /// The wasm-informer pipeline: Reflector, DeltaFIFO, Indexer, listeners.
    Ours,
    /// kube-runtime 5.0: watcher + reflector + `Store<K>`, with subscribers or
    /// controllers.
    Peer,
    /// The simulator's ceiling: watch lines scanned for their resourceVersion only.
    Raw,
}

impl Side {
    /// The name the tables and error messages use.
    pub fn label(self) -> &'static str {
        match self {
            Side::Ours => "wasm-informer",
            Side::Peer => "kube-runtime",
            Side::Raw => "raw-watch",
        }
    }
}

/// What happens to `metadata.managedFields` before an object is cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ManagedFields {
    /// Dropped: our transform (the default), kube-runtime's `.modify()`.
    Strip,
    /// Cached as received.
    Keep,
}

/// How the first list is fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum InitialList {
    /// A streaming list (`sendInitialEvents=true`): our Reflector's default,
    /// kube-runtime's `watcher::Config::streaming_lists()`.
    Streaming,
    /// Pages of 500: kube-runtime's default, our `StreamingList::Off`.
    Paged,
}

/// What a handler does with each event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HandlerKind {
    /// A native handler that does nothing.
    NoopNative,
    /// A native handler that sleeps this many milliseconds per event.
    SleepNative(u64),
    /// A WebAssembly component loaded from this file (ours only).
    Wasm {
        /// Path of the `.wasm` file.
        path: String,
        /// `[config]` table handed to `init`, as JSON.
        config: String,
        /// Per-event deadline in milliseconds.
        timeout_ms: u64,
    },
    /// A WebAssembly component of the `controller` world (ours only), run
    /// as the host runs a controller plugin: triggers on the side's
    /// resource feed one work queue, drained by `workers` instances.
    WasmController {
        /// Path of the `.wasm` file.
        path: String,
        /// Per-reconcile deadline in milliseconds.
        timeout_ms: u64,
        /// Instances, each with its own Store (the manifest's `workers`).
        workers: usize,
    },
}

/// How a handler is attached to kube-runtime's shared reflector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerAttach {
    /// A `ReflectHandle` from `Writer::subscribe`, consumed with `for_each`.
    Subscriber,
    /// `Controller::for_shared_stream(subscriber, store)` whose reconciler is
    /// the handler (default `controller::Config`).
    Controller,
}

/// One handler of the side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandlerSpec {
    /// Name (listener / plugin name).
    pub name: String,
    /// Behaviour.
    pub kind: HandlerKind,
    /// Measured: the side is synced only once this handler has seen the initial
    /// list, and `Wait` waits for it.
    pub tracked: bool,
    /// `Settle` waits until this handler has handled the initial list (for a
    /// neighbour that is slow but not measured).
    #[serde(default)]
    pub settle: bool,
    /// How the peer attaches it (ignored by our side).
    #[serde(default = "subscriber")]
    pub peer_attach: PeerAttach,
    /// Ours only: this WebAssembly handler is the shadow of the named one,
    /// as `shadow_of` makes it in a manifest: every write a dry run, its
    /// intended writes and the live one's compared by a shadow book.
    #[serde(default)]
    pub shadow_of: Option<String>,
}

fn subscriber() -> PeerAttach {
    PeerAttach::Subscriber
}

/// How our side is wired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OursApi {
    /// Through `InformerRegistry`, as the host runs plugins (WebAssembly
    /// handlers read the cache through it).
    Registry,
    /// `SharedInformer::builder(client, "v1/pods")` and `add_handler`, the
    /// informer crate's public API as a native program uses it
    /// (`examples/native-informer`). Native handlers only.
    Informer,
}

/// Settings only our side has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OursConfig {
    /// How the informer is built.
    pub api: OursApi,
    /// Listener queue capacity.
    pub queue_capacity: usize,
    /// WebAssembly handlers may patch `v1/pods` through the `kube`
    /// capability, over kube-client, with the write rate limit off
    /// (`write_qps = 0`), as a manifest with that `[[write]]` grant gets.
    #[serde(default)]
    pub writes: bool,
    /// With `writes`: the plugins' API server accepts connections and never
    /// answers (a hanging API server), while the informer watches the
    /// simulator as usual.
    #[serde(default)]
    pub writes_hang: bool,
    /// Records what the informer sees into this file, as `run --record`
    /// does (`wasm_informer::record::Recorder`), started before the
    /// listeners; at exit the child finishes the file and writes the
    /// recording's summary to `FILE.summary.json`.
    #[serde(default)]
    pub record: Option<String>,
}

/// The type kube-runtime caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerCache {
    /// k8s-openapi's `Pod`, fully deserialised.
    TypedPod,
    /// `ObjectMeta` plus `spec` and `status` kept as `Box<RawValue>`
    /// (see `peer_raw.rs`).
    RawPod,
    /// k8s-openapi's `Deployment` (for `apps/v1/deployments`).
    TypedDeployment,
}

/// How the kube-runtime side fans out to several handlers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerFanout {
    /// One watcher + reflector + Store per handler (what independent
    /// controllers, each with its own `Controller::new`, amount to).
    Separate,
    /// One watcher and `store_shared(buffer)`; each handler attaches as its
    /// [`HandlerSpec::peer_attach`] says (`unstable-runtime-subscribe`).
    Shared {
        /// Subscriber buffer size.
        buffer: usize,
    },
    /// One `Controller::new(api, watcher_config)` whose reconciler is the
    /// single handler (default `controller::Config`: unbounded concurrency),
    /// as every kube-runtime controller example starts one.
    Controller,
}

/// Settings only the peer has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerConfig {
    /// Cached type.
    pub cache: PeerCache,
    /// Fan-out.
    pub fanout: PeerFanout,
}

/// The whole setup of one side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideSpec {
    /// Implementation.
    pub side: Side,
    /// Simulator base URL.
    pub url: String,
    /// The resource watched (both sides support `v1/pods`).
    pub resource: String,
    /// Handlers.
    pub handlers: Vec<HandlerSpec>,
    /// managedFields before caching (both sides).
    pub managed_fields: ManagedFields,
    /// First list (both sides).
    pub initial_list: InitialList,
    /// Our side's settings.
    pub ours: OursConfig,
    /// The peer's settings.
    pub peer: PeerConfig,
    /// Objects the initial list holds (sync is complete when tracked handlers saw them).
    pub expect_objects: u64,
    /// Longest wait for sync, in seconds.
    pub sync_timeout_secs: u64,
    /// A controller side: the change the child makes as soon as the cache
    /// synced, while the initial keys wait to be reconciled.
    #[serde(default)]
    pub fresh: Option<FreshChange>,
}

/// A Deployment the child creates right after sync (see [`SideSpec::fresh`]);
/// the child then waits until every initial object and it were reconciled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FreshChange {
    pub namespace: String,
    pub name: String,
}

/// When the fresh change was reconciled, as the child saw it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FreshTiming {
    /// From the create's answer to the end of the fresh key's reconcile.
    pub latency_ms: f64,
    /// Reconciles done (initial keys) when the create was answered.
    pub reconciled_at_create: u64,
    /// Reconciles done when the fresh key's reconcile ended.
    pub reconciled_at_fresh: u64,
    /// Reconciles per second over the whole drain (first to last).
    pub drain_per_sec: f64,
}

/// A command from the driver to the child, one JSON line on stdin.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Command {
    /// Wait until every handler marked `settle` handled the initial list (or
    /// `timeout_ms` passes), then report.
    Settle { timeout_ms: u64 },
    /// Start measuring events above `rv`; `record` keeps per-event times.
    Arm { rv: u64, record: bool },
    /// Wait until every tracked handler handled `rv` (or `timeout_ms` passes),
    /// then report.
    Wait { rv: u64, timeout_ms: u64 },
    /// Report now.
    Report,
    /// Hot reload (ours): load the component at `path` with `config` as a new
    /// version of the first handler, subscribe it (replaying the cache), then
    /// drop the old version; report the timing.
    Reload {
        path: String,
        config: String,
        timeout_ms: u64,
    },
    /// Stop and exit.
    Exit,
}

/// What the side observed about its own configuration, checked by the driver
/// against the spec (`verify.rs`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SideFacts {
    /// Whether any cached object still holds `metadata.managedFields`
    /// (`None`: the side has no cache).
    pub managed_fields_cached: Option<bool>,
    /// Reflectors (watch streams with a cache) the side runs.
    pub reflectors: u64,
    /// Handlers attached as shared-reflector subscribers (peer).
    pub subscribers: u64,
    /// Handlers attached as `Controller::for_shared_stream` (peer).
    pub controllers: u64,
    /// Streaming lists our Reflector completed (ours).
    pub streaming_lists: Option<u64>,
    /// How our informer was built (`registry` or `informer`).
    pub ours_api: Option<String>,
}

/// What the child prints (one JSON line each).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ChildReport {
    /// Time from start to sync, in milliseconds (0 in later reports).
    pub sync_ms: f64,
    /// Whether the awaited condition (`Wait`, `Settle`) was reached.
    pub reached: bool,
    /// Resident set size now, and before the side started.
    pub rss_bytes: u64,
    pub rss_base_bytes: u64,
    /// The kernel's high-water mark of the child's RSS (`VmHWM`) when the
    /// report was made: the true peak since the child started.
    #[serde(default)]
    pub rss_peak_bytes: u64,
    /// Live heap bytes now, and before the side started.
    pub heap_bytes: i64,
    pub heap_base_bytes: i64,
    /// Objects in the side's cache(s), summed.
    pub cached_objects: u64,
    /// Per handler: probe counters.
    pub probes: Vec<(String, crate::probe::ProbeReport)>,
    /// Per listener (ours): overflowed and coalesced notifications, max depth.
    pub listeners: Vec<ListenerCounters>,
    /// The side's configuration as it observed it (sync report only).
    pub facts: Option<SideFacts>,
    /// Anything that went wrong, for the table notes.
    pub notes: Vec<String>,
    /// Timing of a `Reload` command.
    pub reload: Option<ReloadTiming>,
    /// Per WebAssembly handler (ours): its API requests and their times.
    #[serde(default)]
    pub api: Vec<ApiTiming>,
    /// A controller side with [`SideSpec::fresh`]: how the fresh change fared.
    #[serde(default)]
    pub fresh: Option<FreshTiming>,
    /// Ours, sync report only: the cache as synced, before the compactor
    /// packed it (live heap bytes), and how long packing took after sync.
    #[serde(default)]
    pub packing: Option<PackingReport>,
}

/// How our cache was packed after sync (see `kube_informer::pack`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PackingReport {
    /// Live heap bytes at sync, before waiting for the compactor.
    pub heap_at_sync_bytes: i64,
    /// Milliseconds from sync until the compactor had packed the cache.
    pub packed_ms: f64,
    /// Objects packed, and the cached bodies' bytes against their text's.
    pub packed_objects: u64,
    pub body_bytes: u64,
    pub text_bytes: u64,
    /// Mean nanoseconds to read one cached object's JSON (`Object::json`),
    /// over the whole cache once packed.
    pub read_ns: f64,
}

/// The API requests of one of our WebAssembly handlers, as its runtime
/// counted and timed them (grant check to answer).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ApiTiming {
    pub name: String,
    /// Requests sent.
    pub requests: u64,
    /// Calls refused by the grants.
    pub denied: u64,
    pub p50_us: u64,
    pub p99_us: u64,
}

/// How long a hot reload took, from the moment the new component is read.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReloadTiming {
    /// Reading, compiling and linking the component.
    pub load_ms: f64,
    /// Until the new version handled its first event.
    pub first_event_ms: f64,
    /// Until the new version handled the whole replay.
    pub replayed_ms: f64,
    /// Objects replayed.
    pub objects: u64,
}

/// Overflow counters of one of our listeners.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ListenerCounters {
    pub name: String,
    pub overflowed: u64,
    pub coalesced: u64,
    pub max_depth: u64,
    pub restarts: u64,
}
