//! The shared, lock-light status of one plugin: what the runner is doing and
//! counters of everything that happened to it, readable at any time by the
//! metrics endpoint and the report.
//!
//! Invariant: counters only grow; `state` is written only by the plugin's
//! runner; readers never block the runner for longer than copying one string.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kube_informer::latency::LatencyHistogram;

use parking_lot::Mutex;
use serde::Serialize;

use super::outcome::TrapKind;
use kube_informer::notification::EventKind;

/// What a plugin's runner is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PluginState {
    /// Being instantiated (first load or restart).
    Starting,
    /// An instance is live and handling events.
    Running,
    /// The instance died; waiting out the restart delay.
    BackingOff,
    /// Too many consecutive failures; resting for the quarantine period.
    Quarantined,
    /// The runner has stopped.
    Stopped,
}

impl PluginState {
    fn from_u8(v: u8) -> Self {
        match v {
            0 => PluginState::Starting,
            1 => PluginState::Running,
            2 => PluginState::BackingOff,
            3 => PluginState::Quarantined,
            _ => PluginState::Stopped,
        }
    }

    /// Kebab-case name, as in the report.
    pub fn as_str(self) -> &'static str {
        match self {
            PluginState::Starting => "starting",
            PluginState::Running => "running",
            PluginState::BackingOff => "backing-off",
            PluginState::Quarantined => "quarantined",
            PluginState::Stopped => "stopped",
        }
    }
}

/// Live status of one plugin.
#[derive(Debug)]
pub struct PluginStatus {
    name: String,
    state: AtomicU8,
    delivered: [AtomicU64; 4],
    errors: AtomicU64,
    traps: [AtomicU64; 6],
    restarts: AtomicU64,
    quarantines: AtomicU64,
    consecutive_failures: AtomicU32,
    log_lines: AtomicU64,
    log_dropped: AtomicU64,
    /// Event calls into the guest that returned without a trap, counted as
    /// each returns rather than when its batch is settled.
    returned: AtomicU64,
    last_error: Mutex<Option<String>>,
    api: ApiStats,
}

/// Counters of a plugin's API calls (the `kube` and `events` capabilities).
#[derive(Debug, Default)]
pub struct ApiStats {
    /// Requests by (verb, outcome code): the HTTP status code, or `timeout`
    /// / `unavailable` / `rate-limited` when no answer came.
    by_code: Mutex<BTreeMap<(String, String), u64>>,
    /// Calls refused by the plugin's grants (nothing was sent).
    denied: AtomicU64,
    /// Requests sent as dry runs.
    dry_run: AtomicU64,
    /// API answers refused because they would not fit the plugin's memory.
    answers_refused: AtomicU64,
    /// Time of each call, grant check to answer (token wait and retries
    /// included); shared by every version of a plugin.
    latency: Arc<LatencyHistogram>,
}

impl ApiStats {
    pub(crate) fn record_denied(&self) {
        self.denied.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_answer_refused(&self) {
        self.answers_refused.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record(&self, verb: &str, code: &str, dry_run: bool, took: Duration) {
        *self
            .by_code
            .lock()
            .entry((verb.to_string(), code.to_string()))
            .or_default() += 1;
        if dry_run {
            self.dry_run.fetch_add(1, Ordering::Relaxed);
        }
        self.latency.record(took);
    }

    /// The latency histogram of calls that were sent.
    pub fn latency(&self) -> &LatencyHistogram {
        &self.latency
    }

    /// The same histogram, to be shared with a later version of the plugin
    /// ([`PluginStatus::with_api_latency`]).
    pub fn latency_handle(&self) -> Arc<LatencyHistogram> {
        self.latency.clone()
    }

    /// A copy of the counters.
    pub fn snapshot(&self) -> ApiSnapshot {
        let mut requests: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        let mut total = 0;
        for ((verb, code), n) in self.by_code.lock().iter() {
            *requests
                .entry(verb.clone())
                .or_default()
                .entry(code.clone())
                .or_default() += n;
            total += n;
        }
        ApiSnapshot {
            requests: total,
            by_verb: requests,
            denied: self.denied.load(Ordering::Relaxed),
            dry_run: self.dry_run.load(Ordering::Relaxed),
            answers_refused: self.answers_refused.load(Ordering::Relaxed),
            latency_p50_us: self.latency.quantile_us(0.5),
            latency_p99_us: self.latency.quantile_us(0.99),
        }
    }
}

/// A copy of [`ApiStats`], as in the report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ApiSnapshot {
    /// Requests sent.
    pub requests: u64,
    /// Requests by verb, then by outcome code.
    pub by_verb: BTreeMap<String, BTreeMap<String, u64>>,
    /// Calls refused before sending: malformed, or not granted.
    pub denied: u64,
    /// Answers refused because they would take the plugin past `memory_mb`.
    pub answers_refused: u64,
    /// Requests sent as dry runs.
    pub dry_run: u64,
    /// Median call latency, µs.
    pub latency_p50_us: u64,
    /// 99th percentile call latency, µs.
    pub latency_p99_us: u64,
}

fn kind_index(k: EventKind) -> usize {
    match k {
        EventKind::Added => 0,
        EventKind::Updated => 1,
        EventKind::Deleted => 2,
        EventKind::Synced => 3,
    }
}

impl PluginStatus {
    /// A fresh status in state `starting`.
    pub fn new(name: impl Into<String>) -> Self {
        Self::with_api_latency(name, Arc::default())
    }

    /// A fresh status in state `starting` whose API latency histogram is
    /// `api_latency` (an earlier version's, so that the histogram a metrics
    /// scrape sees only grows across hot reloads).
    pub fn with_api_latency(name: impl Into<String>, api_latency: Arc<LatencyHistogram>) -> Self {
        Self {
            name: name.into(),
            state: AtomicU8::new(0),
            delivered: Default::default(),
            errors: AtomicU64::new(0),
            traps: Default::default(),
            restarts: AtomicU64::new(0),
            quarantines: AtomicU64::new(0),
            consecutive_failures: AtomicU32::new(0),
            log_lines: AtomicU64::new(0),
            log_dropped: AtomicU64::new(0),
            returned: AtomicU64::new(0),
            last_error: Mutex::new(None),
            api: ApiStats {
                latency: api_latency,
                ..ApiStats::default()
            },
        }
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Current state.
    pub fn state(&self) -> PluginState {
        PluginState::from_u8(self.state.load(Ordering::Acquire))
    }

    pub(crate) fn set_state(&self, s: PluginState) {
        self.state.store(s as u8, Ordering::Release);
    }

    pub(crate) fn record_delivered(&self, kind: EventKind) {
        self.delivered[kind_index(kind)].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_error(&self, message: &str) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        *self.last_error.lock() = Some(message.to_string());
    }

    pub(crate) fn record_trap(&self, kind: TrapKind, message: &str) {
        self.traps[kind.index()].fetch_add(1, Ordering::Relaxed);
        *self.last_error.lock() = Some(format!("trap ({kind}): {message}"));
    }

    pub(crate) fn record_failure_message(&self, message: &str) {
        *self.last_error.lock() = Some(message.to_string());
    }

    pub(crate) fn record_restart(&self) {
        self.restarts.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_quarantine(&self) {
        self.quarantines.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn set_consecutive_failures(&self, n: u32) {
        self.consecutive_failures.store(n, Ordering::Relaxed);
    }

    pub(crate) fn record_log_line(&self) {
        self.log_lines.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_returned(&self) {
        self.returned.fetch_add(1, Ordering::Relaxed);
    }

    /// Event calls into the guest that have returned without a trap so far,
    /// each counted the moment it returns (the `delivered` counters follow
    /// when the batch it belongs to is settled).
    pub fn returned(&self) -> u64 {
        self.returned.load(Ordering::Relaxed)
    }

    pub(crate) fn record_log_dropped(&self) {
        self.log_dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// Counters of the plugin's API calls.
    pub fn api(&self) -> &ApiStats {
        &self.api
    }

    /// Events handled (ok or handler error) of one kind.
    pub fn delivered(&self, kind: EventKind) -> u64 {
        self.delivered[kind_index(kind)].load(Ordering::Relaxed)
    }

    /// Traps of one kind.
    pub fn traps(&self, kind: TrapKind) -> u64 {
        self.traps[kind.index()].load(Ordering::Relaxed)
    }

    /// A consistent-enough copy of every counter.
    pub fn snapshot(&self) -> StatusSnapshot {
        let d = |k| self.delivered(k);
        let traps_by_kind: BTreeMap<String, u64> = TrapKind::ALL
            .iter()
            .map(|k| (k.as_str().to_string(), self.traps(*k)))
            .collect();
        StatusSnapshot {
            name: self.name.clone(),
            state: self.state(),
            delivered: Delivered {
                added: d(EventKind::Added),
                updated: d(EventKind::Updated),
                deleted: d(EventKind::Deleted),
                synced: d(EventKind::Synced),
            },
            errors: self.errors.load(Ordering::Relaxed),
            traps: traps_by_kind.values().sum(),
            traps_by_kind,
            restarts: self.restarts.load(Ordering::Relaxed),
            quarantines: self.quarantines.load(Ordering::Relaxed),
            consecutive_failures: self.consecutive_failures.load(Ordering::Relaxed),
            log_lines: self.log_lines.load(Ordering::Relaxed),
            log_dropped: self.log_dropped.load(Ordering::Relaxed),
            returned: self.returned(),
            last_error: self.last_error.lock().clone(),
            api: self.api.snapshot(),
        }
    }
}

/// Events handled per kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Delivered {
    /// `added` events.
    pub added: u64,
    /// `updated` events.
    pub updated: u64,
    /// `deleted` events.
    pub deleted: u64,
    /// `synced` events.
    pub synced: u64,
}

impl Delivered {
    /// Sum over every kind.
    pub fn total(&self) -> u64 {
        self.added + self.updated + self.deleted + self.synced
    }
}

/// A copy of a plugin's status, shaped like the report's per-plugin entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatusSnapshot {
    /// The plugin's name.
    pub name: String,
    /// What its runner is doing.
    pub state: PluginState,
    /// Events handled, by kind.
    pub delivered: Delivered,
    /// Handler errors (the plugin returned `err`).
    pub errors: u64,
    /// Traps of every kind.
    pub traps: u64,
    /// Traps by kind (`out_of_fuel`, `deadline`, ...).
    pub traps_by_kind: BTreeMap<String, u64>,
    /// Re-instantiations after a failure.
    pub restarts: u64,
    /// Times the plugin entered quarantine.
    pub quarantines: u64,
    /// Failures in a row now (reset by a successful event).
    pub consecutive_failures: u32,
    /// Log lines emitted (log import, stdout, stderr).
    pub log_lines: u64,
    /// Log lines dropped by the rate limit.
    pub log_dropped: u64,
    /// Event calls that returned (see [`PluginStatus::returned`]).
    pub returned: u64,
    /// The last error or trap message.
    pub last_error: Option<String>,
    /// The plugin's API calls.
    pub api: ApiSnapshot,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_reflects_counters() {
        let s = PluginStatus::new("p");
        assert_eq!(s.state(), PluginState::Starting);
        s.set_state(PluginState::Quarantined);
        s.record_delivered(EventKind::Added);
        s.record_delivered(EventKind::Added);
        s.record_delivered(EventKind::Synced);
        s.record_error("bad");
        s.record_trap(TrapKind::OutOfFuel, "fuel");
        s.record_trap(TrapKind::Panic, "boom");
        s.record_restart();
        let snap = s.snapshot();
        assert_eq!(snap.state, PluginState::Quarantined);
        assert_eq!(snap.delivered.added, 2);
        assert_eq!(snap.delivered.synced, 1);
        assert_eq!(snap.delivered.total(), 3);
        assert_eq!(snap.errors, 1);
        assert_eq!(snap.traps, 2);
        assert_eq!(snap.traps_by_kind["out_of_fuel"], 1);
        assert_eq!(snap.traps_by_kind["panic"], 1);
        assert_eq!(snap.restarts, 1);
        assert!(snap.last_error.unwrap().contains("boom"));
        let json = serde_json::to_value(s.snapshot()).unwrap();
        assert_eq!(json["state"], "quarantined");
    }
}
