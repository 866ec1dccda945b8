//! What one measured side runs: the contract between the benchmark driver and the
//! child process that hosts the side (serialised as JSON on the command line).
//!
//! Invariant: a spec fully determines the side's setup; nothing else is read from
//! the environment.

use serde::{Deserialize, Serialize};

/// Which implementation runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Side {
    /// The wasm-informer pipeline: Reflector, DeltaFIFO, Indexer, listeners.
    Ours,
    /// kube-runtime 5.0: watcher + reflector + `Store<Pod>`.
    Peer,
    /// The simulator's ceiling: watch lines scanned for their resourceVersion only.
    Raw,
}

/// What a handler does with each event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HandlerKind {
    /// A native closure / `Handler` that does nothing.
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
}

/// One handler of the side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandlerSpec {
    /// Name (listener / plugin name).
    pub name: String,
    /// Behaviour.
    pub kind: HandlerKind,
    /// Measured: the side is synced only once this handler has seen the initial
    /// list, and `wait` waits for it.
    pub tracked: bool,
}

/// How the kube-runtime side fans out to several handlers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerFanout {
    /// One watcher + reflector + Store per handler (what separate controllers do).
    Separate,
    /// One watcher and `store_shared(buffer)`; each handler is a subscriber
    /// (`unstable-runtime-subscribe`).
    Shared {
        /// Subscriber buffer size.
        buffer: usize,
    },
}

/// The whole setup of one side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideSpec {
    /// Implementation.
    pub side: Side,
    /// Simulator base URL.
    pub url: String,
    /// Handlers.
    pub handlers: Vec<HandlerSpec>,
    /// Listener queue capacity (ours).
    pub queue_capacity: usize,
    /// Drop `metadata.managedFields` before caching.
    pub strip_managed_fields: bool,
    /// Fan-out of the peer.
    pub peer_fanout: PeerFanout,
    /// Objects the initial list holds (sync is complete when tracked handlers saw them).
    pub expect_objects: u64,
    /// Longest wait for sync, in seconds.
    pub sync_timeout_secs: u64,
}

/// A command from the driver to the child, one JSON line on stdin.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Command {
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

/// What the child prints (one JSON line each).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ChildReport {
    /// Time from start to sync, in milliseconds (0 in later reports).
    pub sync_ms: f64,
    /// Whether every tracked handler reached the awaited resourceVersion.
    pub reached: bool,
    /// Resident set size now, and before the side started.
    pub rss_bytes: u64,
    pub rss_base_bytes: u64,
    /// Live heap bytes now, and before the side started.
    pub heap_bytes: i64,
    pub heap_base_bytes: i64,
    /// Objects in the side's cache(s), summed.
    pub cached_objects: u64,
    /// Per handler: probe counters.
    pub probes: Vec<(String, crate::probe::ProbeReport)>,
    /// Per listener (ours): overflowed and coalesced notifications, max depth.
    pub listeners: Vec<ListenerCounters>,
    /// Anything that went wrong, for the table notes.
    pub notes: Vec<String>,
    /// Timing of a `Reload` command.
    pub reload: Option<ReloadTiming>,
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
