//! Per-plugin handler latency: a lock-free, log-bucketed histogram of how long
//! each `Handler::handle` took, and the handler wrapper that feeds it.
//!
//! Invariant: recording is a few relaxed atomic adds (no lock, no allocation), so
//! measuring never slows the listener; a quantile is accurate to within one
//! bucket (8 buckets per power of two, so about 6% relative error).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::handler::{Delivery, Handled, Handler};
use crate::notification::NotificationRef;

const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;
const BUCKETS: usize = 8 + 61 * 8;

/// A histogram of durations in microseconds.
#[derive(Debug)]
pub struct LatencyHistogram {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum_us: AtomicU64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_us: AtomicU64::new(0),
        }
    }
}

fn index(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    let m = (v >> (e - SUB_BITS)) & (SUB - 1);
    (SUB + (e - SUB_BITS) as u64 * SUB + m) as usize
}

/// Lowest and highest values that land in bucket `i`.
fn bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < SUB {
        return (i, i);
    }
    let e = (i - SUB) / SUB + SUB_BITS as u64;
    let m = (i - SUB) % SUB;
    let shift = e - SUB_BITS as u64;
    let lo = (SUB + m) << shift;
    let hi = ((SUB + m + 1) << shift) - 1;
    (lo, hi)
}

impl LatencyHistogram {
    /// Records one duration in microseconds.
    pub fn record_us(&self, us: u64) {
        self.buckets[index(us).min(BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    /// Records one duration.
    pub fn record(&self, d: std::time::Duration) {
        self.record_us(d.as_micros().min(u64::MAX as u128) as u64);
    }

    /// Number of recorded durations.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Sum of recorded durations, in microseconds.
    pub fn sum_us(&self) -> u64 {
        self.sum_us.load(Ordering::Relaxed)
    }

    /// The `q` quantile (0.0..=1.0) in microseconds: the midpoint of the bucket
    /// holding it; 0 when nothing was recorded.
    pub fn quantile_us(&self, q: f64) -> u64 {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bounds(i);
                return lo + (hi - lo) / 2;
            }
        }
        bounds(BUCKETS - 1).1
    }
}

/// Counts read from a [`LatencyHistogram`] at one moment, for exposition as a
/// cumulative histogram.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CumulativeCounts {
    /// For each requested bound, how many recorded durations were below it.
    pub below: Vec<u64>,
    /// All recorded durations (the sum of every bucket read).
    pub count: u64,
    /// Their sum, in microseconds.
    pub sum_us: u64,
}

impl LatencyHistogram {
    /// How many recorded durations were below each of `bounds_us`
    /// (ascending), in one pass over the buckets. A bound is exact when it
    /// is a bucket edge: every value up to 8 and every power of two is one;
    /// any other bound counts its whole bucket as above it.
    pub fn cumulative_us(&self, bounds_us: &[u64]) -> CumulativeCounts {
        let mut below = vec![0u64; bounds_us.len()];
        let mut count = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            let c = b.load(Ordering::Relaxed);
            if c == 0 {
                continue;
            }
            count += c;
            let hi = bounds(i).1;
            for (j, bound) in bounds_us.iter().enumerate() {
                if hi < *bound {
                    below[j] += c;
                }
            }
        }
        CumulativeCounts {
            below,
            count,
            sum_us: self.sum_us(),
        }
    }
}

/// A [`Handler`] that times every call of the handler it wraps.
pub struct TimedHandler<H> {
    inner: H,
    histogram: Arc<LatencyHistogram>,
}

impl<H> TimedHandler<H> {
    /// Wraps `inner`, recording into `histogram`.
    pub fn new(inner: H, histogram: Arc<LatencyHistogram>) -> Self {
        Self { inner, histogram }
    }
}

impl<H: Handler> Handler for TimedHandler<H> {
    async fn handle(&mut self, n: NotificationRef) -> Delivery {
        let start = Instant::now();
        let d = self.inner.handle(n).await;
        self.histogram.record_us(start.elapsed().as_micros() as u64);
        d
    }

    fn max_batch(&self) -> usize {
        self.inner.max_batch()
    }

    fn own_thread(&self) -> Option<String> {
        self.inner.own_thread()
    }

    /// Records each event of a batch on its own: from the previous event's
    /// completion (the batch's start for the first) to its own.
    async fn handle_batch(&mut self, batch: Vec<NotificationRef>) -> Vec<Handled> {
        let mut prev = Instant::now();
        let handled = self.inner.handle_batch(batch).await;
        for h in &handled {
            let at = h.at.max(prev);
            self.histogram.record_us((at - prev).as_micros() as u64);
            prev = at;
        }
        handled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_values_contiguously() {
        let mut prev_hi = None;
        for i in 0..200 {
            let (lo, hi) = bounds(i);
            if let Some(p) = prev_hi {
                assert_eq!(lo, p + 1, "gap before bucket {i}");
            }
            assert!(lo <= hi);
            assert_eq!(index(lo), i);
            assert_eq!(index(hi), i);
            prev_hi = Some(hi);
        }
    }

    #[test]
    fn quantiles_within_one_bucket() {
        let h = LatencyHistogram::default();
        for v in 1..=1000u64 {
            h.record_us(v);
        }
        let p50 = h.quantile_us(0.5) as f64;
        let p99 = h.quantile_us(0.99) as f64;
        assert!((p50 - 500.0).abs() / 500.0 < 0.07, "p50 {p50}");
        assert!((p99 - 990.0).abs() / 990.0 < 0.07, "p99 {p99}");
        assert_eq!(h.count(), 1000);
        assert_eq!(h.sum_us(), 500_500);
        assert_eq!(LatencyHistogram::default().quantile_us(0.5), 0);
    }

    #[test]
    fn cumulative_counts_are_exact_at_powers_of_two() {
        let h = LatencyHistogram::default();
        for v in 0..5000u64 {
            h.record_us(v);
        }
        h.record_us(10_000_000);
        let bounds = [1, 4, 8, 64, 1024, 4096, 1 << 24];
        let c = h.cumulative_us(&bounds);
        let want: Vec<u64> = bounds
            .iter()
            .map(|b| (0..5000u64).filter(|v| v < b).count() as u64 + u64::from(*b > 10_000_000))
            .collect();
        assert_eq!(c.below, want);
        assert_eq!(c.count, 5001);
        assert_eq!(c.sum_us, (0..5000u64).sum::<u64>() + 10_000_000);
    }
}
