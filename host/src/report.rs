//! The run report: the JSON document `run --report FILE` writes at exit, and the
//! snapshot the metrics endpoint and the terminal status view render.
//!
//! Job: define the report's shape exactly as the design's contract says
//! (`plugins.NAME.{state, delivered.{added,updated,deleted,synced}, errors, traps,
//! restarts, coalesced, overflowed, queue_depth_max, latency_us.{p50,p99}}` and
//! `informers.RESOURCE.{objects, last_sync_resource_version, lists, watch_restarts,
//! relists_410}`), plus a few extra fields, and write it atomically.
//!
//! Invariant: the contract's keys are always present with those names; extra keys
//! only add information. A written report file is never half-written: it is renamed
//! into place.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Events handed to a plugin, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveredCounts {
    pub added: u64,
    pub updated: u64,
    pub deleted: u64,
    pub synced: u64,
}

impl DeliveredCounts {
    /// Sum over all kinds.
    pub fn total(&self) -> u64 {
        self.added + self.updated + self.deleted + self.synced
    }
}

/// Handler latency quantiles, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyUs {
    pub p50: u64,
    pub p99: u64,
}

/// One plugin's line of the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PluginReport {
    /// `starting`, `running`, `backing-off`, `quarantined`, `stopped`, `removed` or
    /// `failed` (could not load).
    pub state: String,
    pub delivered: DeliveredCounts,
    /// Handler error results.
    pub errors: u64,
    /// Traps of any kind (fuel, deadline, memory, stack, panic, other).
    pub traps: u64,
    /// Instances replaced after a trap.
    pub restarts: u64,
    /// Overflowed notifications merged into a pending key (I4/I5).
    pub coalesced: u64,
    /// Notifications that did not fit in the queue.
    pub overflowed: u64,
    /// Largest listener queue depth seen.
    pub queue_depth_max: u64,
    pub latency_us: LatencyUs,
    /// Extra: replayed initial-list adds (I6).
    #[serde(default)]
    pub replayed: u64,
    /// Extra: times the plugin entered quarantine.
    #[serde(default)]
    pub quarantines: u64,
    /// Extra: current listener queue depth.
    #[serde(default)]
    pub queue_depth: u64,
    /// Extra: resyncs that came due while the previous one's syncs were still
    /// waiting behind real changes (the plugin is slower than its
    /// `resync_seconds`).
    #[serde(default)]
    pub resync_overruns: u64,
    /// Extra: the plugin is behind its resync period now (syncs of an
    /// overrun resync are still waiting).
    #[serde(default)]
    pub resync_behind: bool,
    /// Extra: versions loaded (1 + successful hot reloads).
    #[serde(default)]
    pub versions: u64,
    /// Extra: events handled by the version running now (the others'
    /// are in `delivered` too).
    #[serde(default)]
    pub version_events: u64,
    /// Extra: for `wasm = "oci://..."`, the manifest digest the running
    /// version was pulled by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Extra: subscribed resources.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Extra: manifest file.
    #[serde(default)]
    pub manifest: String,
    /// Extra: the last error (load failure, trap or handler error), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Extra: the plugin's API calls (the `kube` and `events` capabilities).
    #[serde(default)]
    pub api: ApiReport,
    /// Extra, for a controller plugin only: its work queue and reconciles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<ControllerReport>,
}

/// One plugin's API calls, all versions of it together.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApiReport {
    /// Requests sent to the API server.
    pub requests: u64,
    /// Calls refused before sending: malformed, or not granted.
    pub denied: u64,
    /// Requests sent as dry runs.
    pub dry_run: u64,
    /// Answers refused because they would take the plugin past `memory_mb`.
    pub answers_refused: u64,
    /// Calls (and refusals) that waited for a token of the plugin's bucket.
    pub throttled: u64,
    /// Time spent waiting for tokens, in total.
    pub token_wait_ms: u64,
    /// Refused calls not audited line by line (the refusal-line limit).
    pub refusals_unlogged: u64,
    /// The bucket's sustained rate now (`write_qps`; 0: no limit).
    pub write_qps: f64,
    /// Requests by verb, then by outcome: the HTTP status code, or
    /// `timeout`, `unavailable`, `rate-limited` when no answer came.
    pub by_verb: BTreeMap<String, BTreeMap<String, u64>>,
}

impl ApiReport {
    /// The sum of two reports (a plugin's earlier versions and its current one).
    pub fn plus(&self, other: &ApiReport) -> ApiReport {
        let mut by_verb = self.by_verb.clone();
        for (verb, codes) in &other.by_verb {
            let v = by_verb.entry(verb.clone()).or_default();
            for (code, n) in codes {
                *v.entry(code.clone()).or_default() += n;
            }
        }
        ApiReport {
            requests: self.requests + other.requests,
            denied: self.denied + other.denied,
            dry_run: self.dry_run + other.dry_run,
            answers_refused: self.answers_refused + other.answers_refused,
            by_verb,
            // The quota's counters belong to the name: the later one holds them all.
            throttled: self.throttled.max(other.throttled),
            token_wait_ms: self.token_wait_ms.max(other.token_wait_ms),
            refusals_unlogged: self.refusals_unlogged.max(other.refusals_unlogged),
            write_qps: other.write_qps,
        }
    }
}

/// A controller plugin's work queue and reconciles (`plugins.NAME.controller`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ControllerReport {
    /// The primary resource (`for`).
    pub primary: String,
    /// Workers (instances) reconciling side by side.
    pub workers: u64,
    /// Reconciles by outcome: `ok`, `requeue`, `retry`, `terminal`, `trap`.
    pub reconciles: kube_informer::workqueue::ReconcileCounts,
    /// The work queue, with client-go's workqueue metrics.
    pub queue: kube_informer::workqueue::QueueMetricsSnapshot,
}

impl ControllerReport {
    /// Adds the reconciles of earlier versions only: this version's queue
    /// was handed over from them, so its counters already hold theirs.
    pub fn carry_reconciles(&mut self, earlier: &ControllerReport) {
        self.reconciles.add(&earlier.reconciles);
    }

    /// Adds the counters of an earlier version of the plugin (gauges are
    /// this version's).
    pub fn carry(&mut self, earlier: &ControllerReport) {
        self.reconciles.add(&earlier.reconciles);
        self.queue.adds += earlier.queue.adds;
        self.queue.retries += earlier.queue.retries;
        self.queue
            .queue_duration
            .merge(&earlier.queue.queue_duration);
        self.queue.work_duration.merge(&earlier.queue.work_duration);
    }
}

/// One informer's line of the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InformerReport {
    /// Objects in the cache.
    pub objects: u64,
    pub last_sync_resource_version: String,
    /// Completed lists (the first and every relist).
    pub lists: u64,
    /// Watches re-established.
    pub watch_restarts: u64,
    /// Relists caused by 410 Expired.
    pub relists_410: u64,
    /// Extra: relists because the server was behind our resourceVersion (504
    /// Too large resource version).
    #[serde(default)]
    pub relists_too_large: u64,
    /// Extra: relists because a watch event was older than one already seen
    /// (the server's history went backwards).
    #[serde(default)]
    pub relists_rv_regressed: u64,
    /// Extra: the first list has been processed.
    #[serde(default)]
    pub synced: bool,
    /// Extra: the informer is still running (false once its last user went).
    #[serde(default)]
    pub running: bool,
    /// Extra: response bytes received (list pages and watch streams).
    #[serde(default)]
    pub bytes_received: u64,
    /// Extra: watch events applied to the cache.
    #[serde(default)]
    pub events_received: u64,
    /// Extra: when sharded at the source, its ranges and who filters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<SourceShardReport>,
    /// Extra: cached objects whose JSON the background compactor packed.
    #[serde(default)]
    pub packed_objects: u64,
    /// Extra: bytes the cached JSON bodies hold (packed or text).
    #[serde(default)]
    pub body_bytes: u64,
    /// Extra: bytes the same bodies would hold as text.
    #[serde(default)]
    pub text_bytes: u64,
}

/// One informer's cache in a sharded replica.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterCache {
    /// `owner` (cached in full, delivered by the owner's hash), `uid` or
    /// `namespace` (sharded at the source).
    pub shard_by: String,
    /// Objects in the cache.
    pub objects: u64,
    /// Present when sharded at the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceShardReport>,
}

/// A source-sharded informer's shard, as the report and `/cluster` show it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceShardReport {
    /// `uid` or `namespace`.
    pub shard_by: String,
    /// `server` (the API server applied the `shardSelector`: the watch
    /// traffic splits), `client` (it ignored it: everything is received and
    /// filtered here, the traffic does not split) or `unknown` (no list yet).
    pub filtering: String,
    /// The ranges asked for, inclusive, in hex.
    pub ranges: Vec<(String, String)>,
    /// The share of the hash space asked for.
    pub target_fraction: f64,
    /// The share of the hash space whose objects are all cached.
    pub covered_fraction: f64,
    /// Objects received outside the ranges and dropped before the cache.
    pub filtered_out: u64,
    /// Cached objects dropped with a lost range (no plugin is told).
    pub evicted: u64,
    /// Lists of gained ranges only.
    pub range_lists: u64,
}

impl SourceShardReport {
    /// From the informer's handle.
    pub fn of(s: &kube_informer::shard::SourceShardStatus) -> Self {
        let filtering = match s.filtering {
            kube_informer::shard::Filtering::Server => "server",
            kube_informer::shard::Filtering::Client => "client",
            kube_informer::shard::Filtering::Unknown => "unknown",
        };
        Self {
            shard_by: s.field.as_str().into(),
            filtering: filtering.into(),
            ranges: s.target.clone(),
            target_fraction: s.target_fraction,
            covered_fraction: s.covered_fraction,
            filtered_out: s.filtered_out,
            evicted: s.evicted,
            range_lists: s.range_lists,
        }
    }
}

/// One hot-reload or load decision, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReloadEvent {
    /// Milliseconds since the host started.
    pub at_ms: u64,
    /// `added`, `changed`, `removed` or `rejected`.
    pub action: String,
    /// The plugin, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// The file that caused it.
    pub file: String,
    /// Why it was rejected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The whole report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub plugins: BTreeMap<String, PluginReport>,
    pub informers: BTreeMap<String, InformerReport>,
    /// Extra: seconds the host ran.
    #[serde(default)]
    pub duration_seconds: f64,
    /// Extra: with `--sim`, objects per resource in the simulator at exit.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub simulator_objects: BTreeMap<String, u64>,
    /// Extra: loads, reloads, removals and rejections, in order.
    #[serde(default)]
    pub reloads: Vec<ReloadEvent>,
    /// Extra: configuration errors still in effect (file, position, key, reason).
    #[serde(default)]
    pub config_errors: Vec<String>,
    /// Extra: this replica's role and shard, in leader or sharded mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterReport>,
    /// Extra: each shadow version's comparison with its live plugin
    /// (counts only; `/shadow` has the per-object views).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shadows: Vec<crate::shadow::ShadowReport>,
}

/// This replica in a cluster (`[cluster]` mode `leader` or `sharded`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterReport {
    /// `leader` or `sharded`.
    pub mode: String,
    /// This replica's identity (holder identity in its Leases).
    pub identity: String,
    /// Namespace of the Leases.
    pub namespace: String,
    /// Leader mode: the election's Lease; sharded mode: this replica's Lease.
    pub lease: String,
    /// Sharded mode: the ring's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ring: Option<String>,
    /// `leader`, `standby` (leader mode); `member`, `joining`, `settling`,
    /// `lost` (sharded mode); `stopped` once shut down.
    pub role: String,
    /// Leader mode: the holder last seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    /// Sharded mode: the live members seen (this replica included while it
    /// holds its lease).
    #[serde(default)]
    pub members: Vec<String>,
    /// Sharded mode: the member list this replica's Lease claims under.
    #[serde(default)]
    pub view: Vec<String>,
    /// Share of the keys delivered, from 0 to 1.
    pub owned_fraction: f64,
    /// Cached keys delivered now, per resource.
    #[serde(default)]
    pub shard_keys: BTreeMap<String, u64>,
    /// Leader mode: times this replica became the leader.
    #[serde(default)]
    pub leader_acquisitions: u64,
    /// Changes of what is delivered.
    #[serde(default)]
    pub handovers: u64,
    /// Cached keys gained (replayed to the plugins) over all changes.
    #[serde(default)]
    pub keys_gained: u64,
    /// Cached keys released over all changes.
    #[serde(default)]
    pub keys_released: u64,
    /// Time from a change until no plugin handled a released key, ms (last,
    /// and longest).
    #[serde(default)]
    pub last_handover_ms: u64,
    #[serde(default)]
    pub max_handover_ms: u64,
    /// A change is under way.
    #[serde(default)]
    pub in_transition: bool,
    /// Wall-clock time of the last change of what is delivered, ms since the
    /// Unix epoch.
    #[serde(default)]
    pub changed_at_unix_ms: u64,
    /// Whether the fence lets writes through now.
    #[serde(default)]
    pub fence_open: bool,
    /// The last failed Lease request, if the last one failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Sharded mode: per running informer, what places its objects on the
    /// ring, the objects it caches, and, when it is sharded at the source,
    /// the ranges it holds and whether the server or this replica filters.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub caches: BTreeMap<String, ClusterCache>,
}

impl Report {
    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("report serialises")
    }

    /// Writes the report to `path` atomically (temporary file, then rename).
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "report.json".into());
        let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(self.to_json().as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Report {
        let mut r = Report::default();
        r.plugins.insert(
            "p".into(),
            PluginReport {
                state: "running".into(),
                delivered: DeliveredCounts {
                    added: 3,
                    updated: 2,
                    deleted: 1,
                    synced: 0,
                },
                latency_us: LatencyUs { p50: 5, p99: 90 },
                queue_depth_max: 7,
                ..Default::default()
            },
        );
        r.informers.insert(
            "v1/pods".into(),
            InformerReport {
                objects: 10,
                last_sync_resource_version: "42".into(),
                lists: 1,
                ..Default::default()
            },
        );
        r
    }

    #[test]
    fn contract_keys_are_present() {
        let v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
        let p = &v["plugins"]["p"];
        for k in [
            "state",
            "delivered",
            "errors",
            "traps",
            "restarts",
            "coalesced",
            "overflowed",
            "queue_depth_max",
            "latency_us",
        ] {
            assert!(p.get(k).is_some(), "plugin key {k} missing");
        }
        for k in ["added", "updated", "deleted", "synced"] {
            assert!(p["delivered"][k].is_u64(), "delivered.{k} missing");
        }
        assert_eq!(p["latency_us"]["p50"], 5);
        assert_eq!(p["latency_us"]["p99"], 90);
        let i = &v["informers"]["v1/pods"];
        for k in [
            "objects",
            "last_sync_resource_version",
            "lists",
            "watch_restarts",
            "relists_410",
        ] {
            assert!(i.get(k).is_some(), "informer key {k} missing");
        }
        assert_eq!(i["last_sync_resource_version"], "42");
    }

    #[test]
    fn writes_atomically_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let r = sample();
        r.write(&path).unwrap();
        let back: Report = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(back, r);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "temporary file left behind");
    }
}
