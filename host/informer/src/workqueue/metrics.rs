//! What a work queue measures, as client-go's workqueue metrics define it.
//!
//! Job: count adds and retries, keep the depth, and record two histograms
//! with client-go's buckets (`ExponentialBuckets(10e-9, 10, 10)`: 10 ns to
//! 10 s): how long a key waited ready in the queue before a worker took it
//! (`queue_duration`), and how long its processing took (`work_duration`).
//! The in-progress figures (`unfinished_work_seconds`,
//! `longest_running_processor_seconds`) are computed by the queue from its
//! processing set when a snapshot is taken, and so is the age of the oldest
//! ready low-priority key (`oldest_low_priority_seconds`, the queue's
//! ageing at work; with `aged`, the keys it handed out as overdue).
//!
//! Invariant: recording is a few relaxed atomic operations and never takes a
//! lock; a snapshot never blocks a worker for longer than the queue's own
//! lock is held.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Upper bounds of the histogram buckets, in seconds: client-go's
/// `prometheus.ExponentialBuckets(10e-9, 10, 10)`.
pub const BUCKETS: [f64; 10] = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0];

/// A fixed-bucket histogram of durations.
#[derive(Debug, Default)]
pub struct DurationHistogram {
    /// Observations per bucket (not cumulative); the last slot is `+Inf`.
    buckets: [AtomicU64; BUCKETS.len() + 1],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl DurationHistogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(BUCKETS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// A copy.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            buckets: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            count: self.count.load(Ordering::Relaxed),
            sum_seconds: self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

/// A copy of a [`DurationHistogram`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HistogramSnapshot {
    /// Observations per bucket of [`BUCKETS`] (not cumulative), then the
    /// `+Inf` bucket.
    pub buckets: Vec<u64>,
    /// Observations.
    pub count: u64,
    /// Sum of the observations, in seconds.
    pub sum_seconds: f64,
}

impl HistogramSnapshot {
    /// (upper bound, observations in that bucket), `+Inf` last, as
    /// Prometheus encoders take them.
    pub fn bounds(&self) -> Vec<(f64, u64)> {
        BUCKETS
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(self.buckets.iter().copied())
            .collect()
    }

    /// Adds `other`'s observations (to sum two versions of a plugin).
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0);
        }
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.count += other.count;
        self.sum_seconds += other.sum_seconds;
    }
}

/// Live counters of one work queue.
#[derive(Debug, Default)]
pub struct QueueMetrics {
    /// Keys that entered the ready queue (a key already queued is not counted
    /// again; one that becomes ready from a timer is).
    pub adds: AtomicU64,
    /// Rate-limited re-adds (retries).
    pub retries: AtomicU64,
    /// Keys ready and not yet taken by a worker (including ready keys held
    /// back because a worker is processing them).
    pub depth: AtomicU64,
    /// From a key becoming ready to a worker taking it.
    pub queue_duration: DurationHistogram,
    /// From a worker taking a key to its `done`.
    pub work_duration: DurationHistogram,
    /// Low-priority keys handed out ahead of live ones because they were
    /// overdue (the queue's ageing).
    pub aged: AtomicU64,
}

/// A copy of a queue's metrics, with the in-progress figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueMetricsSnapshot {
    /// `workqueue_depth`: keys ready and waiting for a worker.
    pub depth: u64,
    /// Keys waiting for a timer (requeue-after, retry backoff).
    pub waiting: u64,
    /// Keys being processed now.
    pub processing: u64,
    /// `workqueue_adds_total`.
    pub adds: u64,
    /// `workqueue_retries_total`.
    pub retries: u64,
    /// `workqueue_queue_duration_seconds`.
    pub queue_duration: HistogramSnapshot,
    /// `workqueue_work_duration_seconds`.
    pub work_duration: HistogramSnapshot,
    /// `workqueue_unfinished_work_seconds`: the time the keys in progress
    /// have been processed so far, summed.
    pub unfinished_work_seconds: f64,
    /// `workqueue_longest_running_processor_seconds`: how long the longest
    /// key in progress has been processed.
    pub longest_running_processor_seconds: f64,
    /// How long the oldest ready low-priority key (an initial list's, a
    /// resync's) has waited so far; 0 when there is none.
    #[serde(default)]
    pub oldest_low_priority_seconds: f64,
    /// Low-priority keys handed out ahead of live ones because they waited
    /// past the queue's `max_low_priority_wait`.
    #[serde(default)]
    pub aged: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_client_go_buckets() {
        let h = DurationHistogram::default();
        h.observe(Duration::from_nanos(5));
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_millis(2));
        h.observe(Duration::from_secs(30));
        let s = h.snapshot();
        assert_eq!(s.count, 4);
        assert_eq!(s.buckets[0], 1, "5 ns <= 10 ns");
        assert_eq!(s.buckets[4], 1, "50 us <= 100 us");
        assert_eq!(s.buckets[6], 1, "2 ms <= 10 ms");
        assert_eq!(s.buckets[10], 1, "30 s in +Inf");
        assert!((s.sum_seconds - 30.002_050_005).abs() < 1e-9);
        let b = s.bounds();
        assert_eq!(b.len(), 11);
        assert!(b[10].0.is_infinite());
    }
}
