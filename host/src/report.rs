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
    /// Extra: the first list has been processed.
    #[serde(default)]
    pub synced: bool,
    /// Extra: the informer is still running (false once its last user went).
    #[serde(default)]
    pub running: bool,
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
