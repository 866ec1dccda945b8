//! A probe sits at the end of a handler: it counts the events the handler finished
//! and stamps them, so both sides are measured at the same point (after the
//! handler returned).
//!
//! Invariant: only events whose resourceVersion is above the armed mark count as
//! measured; timestamps are wall-clock nanoseconds, comparable across processes.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use serde::Serialize;

/// Wall-clock nanoseconds since the Unix epoch.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Counters of one handler.
#[derive(Debug, Default)]
pub struct Probe {
    /// Every event handled.
    pub total: AtomicU64,
    /// Highest resourceVersion handled.
    pub max_rv: AtomicU64,
    armed_rv: AtomicU64,
    measured: AtomicU64,
    first_ns: AtomicU64,
    last_ns: AtomicU64,
    record: AtomicBool,
    records: Mutex<Vec<(u64, u64)>>,
    /// The object name [`Probe::observe_named`] looks for, and when (and
    /// after how many events) it was first handled.
    fresh: std::sync::OnceLock<String>,
    fresh_ns: AtomicU64,
    fresh_total: AtomicU64,
}

/// What a probe saw since it was armed.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct ProbeReport {
    /// Events handled in total (initial list included).
    pub total: u64,
    /// Events with a resourceVersion above the armed mark.
    pub measured: u64,
    /// Wall-clock time of the first and last measured event.
    pub first_ns: u64,
    pub last_ns: u64,
    /// Highest resourceVersion handled.
    pub max_rv: u64,
    /// (resourceVersion, handled at) of every measured event, when recording.
    pub records: Vec<(u64, u64)>,
}

impl Probe {
    /// Called by the handler after it handled an object at `rv`.
    pub fn observe(&self, rv: u64) {
        self.observe_at(rv, now_ns());
    }

    /// Like [`Probe::observe`], for an event the handler finished at wall-clock
    /// time `t` (nanoseconds), earlier than now.
    pub fn observe_at(&self, rv: u64, t: u64) {
        self.total.fetch_add(1, Ordering::Relaxed);
        if rv > self.armed_rv.load(Ordering::Relaxed) {
            let _ = self
                .first_ns
                .compare_exchange(0, t, Ordering::Relaxed, Ordering::Relaxed);
            self.last_ns.store(t, Ordering::Relaxed);
            self.measured.fetch_add(1, Ordering::Relaxed);
            if self.record.load(Ordering::Relaxed) {
                self.records.lock().push((rv, t));
            }
        }
        self.max_rv.fetch_max(rv, Ordering::Release);
    }

    /// Like [`Probe::observe`], for a handler that knows the object's name
    /// (a reconciler): the first time `name` is the watched one
    /// ([`Probe::watch_for`]), its time is kept.
    pub fn observe_named(&self, rv: u64, name: &str) {
        self.observe(rv);
        if self.fresh.get().is_some_and(|f| f == name) && self.fresh_ns.load(Ordering::Relaxed) == 0
        {
            self.fresh_total
                .store(self.total.load(Ordering::Relaxed), Ordering::Relaxed);
            self.fresh_ns.store(now_ns(), Ordering::Release);
        }
    }

    /// Watches for the object named `name` (once per probe).
    pub fn watch_for(&self, name: &str) {
        let _ = self.fresh.set(name.to_string());
    }

    /// When the watched object was first handled, and the events handled
    /// by then (its own included), or `None` while it has not been.
    pub fn fresh_seen(&self) -> Option<(u64, u64)> {
        let t = self.fresh_ns.load(Ordering::Acquire);
        (t != 0).then(|| (t, self.fresh_total.load(Ordering::Relaxed)))
    }

    /// Counts only events above `rv` from now on; `record` keeps each one's time.
    pub fn arm(&self, rv: u64, record: bool) {
        self.measured.store(0, Ordering::Relaxed);
        self.first_ns.store(0, Ordering::Relaxed);
        self.last_ns.store(0, Ordering::Relaxed);
        self.records.lock().clear();
        self.record.store(record, Ordering::Relaxed);
        self.armed_rv.store(rv, Ordering::Release);
    }

    /// The counters now (takes the records).
    pub fn report(&self) -> ProbeReport {
        ProbeReport {
            total: self.total.load(Ordering::Relaxed),
            measured: self.measured.load(Ordering::Relaxed),
            first_ns: self.first_ns.load(Ordering::Relaxed),
            last_ns: self.last_ns.load(Ordering::Relaxed),
            max_rv: self.max_rv.load(Ordering::Acquire),
            records: std::mem::take(&mut *self.records.lock()),
        }
    }
}

/// One handler's probe, with what the child waits for on it.
pub struct HandlerProbe {
    /// Handler name.
    pub name: String,
    /// Its counters.
    pub probe: Arc<Probe>,
    /// Sync and `Wait` wait for it.
    pub tracked: bool,
    /// `Settle` waits for it to have handled the initial list.
    pub settle: bool,
}

impl HandlerProbe {
    /// A fresh probe for `h`.
    pub fn new(h: &crate::spec::HandlerSpec) -> Self {
        HandlerProbe {
            name: h.name.clone(),
            probe: Arc::new(Probe::default()),
            tracked: h.tracked,
            settle: h.settle,
        }
    }

    /// Events handled in total.
    pub fn total(&self) -> u64 {
        self.probe.total.load(Ordering::Relaxed)
    }
}

/// Parses a resourceVersion; the simulator's are decimal integers.
pub fn parse_rv(rv: Option<&str>) -> u64 {
    rv.and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_events_above_the_mark() {
        let p = Probe::default();
        p.observe(5);
        p.arm(10, true);
        p.observe(9);
        p.observe(11);
        p.observe(12);
        let r = p.report();
        assert_eq!(r.total, 4, "every event counts in total");
        assert_eq!(r.measured, 2);
        assert_eq!(r.max_rv, 12);
        assert_eq!(
            r.records.iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![11, 12]
        );
        assert!(r.first_ns > 0 && r.last_ns >= r.first_ns);
    }

    #[test]
    fn keeps_the_first_reconcile_of_the_watched_name() {
        let p = Probe::default();
        p.observe_named(1, "fresh");
        assert_eq!(p.fresh_seen(), None, "not watched yet");
        p.watch_for("fresh");
        p.observe_named(2, "other");
        assert_eq!(p.fresh_seen(), None);
        p.observe_named(3, "fresh");
        let (t, n) = p.fresh_seen().expect("seen");
        assert_eq!(n, 3, "three events handled by then, its own included");
        p.observe_named(4, "fresh");
        assert_eq!(p.fresh_seen(), Some((t, 3)), "the first one is kept");
    }
}
