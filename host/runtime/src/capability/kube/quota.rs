//! A plugin's API quota: one token bucket per plugin name, shared by every
//! runner, worker, instance and version that runs under that name, and the
//! accounting of the calls it refused.
//!
//! Job: pace every request a plugin sends (each retry included) and every
//! call the host refuses before sending, at the plugin's `write_qps` and
//! `write_burst`; bound the audit lines of refusals; count what a plugin
//! waited and what was refused, for the metrics and `/readyz`.
//!
//! Invariants:
//! - over any interval `t`, a plugin name makes at most `burst + qps * t`
//!   requests and refusals together, however many resources, workers or
//!   versions it has: the bucket belongs to the name, not to a runner, and a
//!   reload changes its rate without refilling it ([`Quota::configure`]);
//! - refusals are audited at most [`REFUSAL_LINES_PER_SEC`] lines a second
//!   (burst [`REFUSAL_LINE_BURST`]) per plugin; the rest are counted and
//!   summed up in the next line, so a plugin cannot flood the host's log.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::rate::TokenBucket;
use crate::stop::{Stop, Stopped};

/// Audit lines of refused calls per second and plugin.
pub const REFUSAL_LINES_PER_SEC: f64 = 1.0;
/// Burst of audit lines of refused calls.
pub const REFUSAL_LINE_BURST: f64 = 10.0;

/// One plugin's API quota.
#[derive(Debug)]
pub struct Quota {
    bucket: Mutex<TokenBucket>,
    lines: Mutex<TokenBucket>,
    refused: AtomicU64,
    suppressed: AtomicU64,
    audited: AtomicU64,
    throttled: AtomicU64,
    waited_micros: AtomicU64,
    waiting: AtomicU64,
}

/// What a token reservation came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ticket {
    /// A token was taken after this wait (zero when one was there).
    After(Duration),
    /// No token comes before the deadline; nothing was taken.
    TooLate,
    /// The plugin version stopped while it waited; nothing was taken.
    Stopped,
}

/// Counters of a quota, as the metrics and the report show them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuotaStats {
    /// Calls refused before sending (forbidden or invalid).
    pub refused: u64,
    /// Refusals not audited line by line since the last line (summed up in
    /// the next one).
    pub suppressed: u64,
    /// Refusals audited line by line.
    pub audited: u64,
    /// Calls that had to wait for a token.
    pub throttled: u64,
    /// Total time spent waiting for tokens.
    pub waited: Duration,
    /// Calls waiting for a token now.
    pub waiting: u64,
}

impl Quota {
    /// A full bucket of `burst` refilling at `qps` (0: no limit).
    pub fn new(qps: f64, burst: u32) -> Arc<Self> {
        Arc::new(Self {
            bucket: Mutex::new(TokenBucket::new(qps, burst as f64)),
            lines: Mutex::new(TokenBucket::new(REFUSAL_LINES_PER_SEC, REFUSAL_LINE_BURST)),
            refused: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
            audited: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
            waited_micros: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
        })
    }

    /// Applies a (re)loaded manifest's rate, keeping the tokens there are.
    pub fn configure(&self, qps: f64, burst: u32) {
        let mut b = self.bucket.lock();
        if b.rate() != qps || b.burst() != (burst.max(1)) as f64 {
            b.set_rate(Instant::now(), qps, burst as f64);
        }
    }

    /// Takes one token, waiting for it on this thread, unless none comes
    /// before `deadline` or `stop` is raised meanwhile.
    pub fn take(&self, deadline: Instant, stop: &Stop) -> Ticket {
        if stop.is_raised() {
            return Ticket::Stopped;
        }
        let now = Instant::now();
        let wait = self
            .bucket
            .lock()
            .reserve(now, deadline.saturating_duration_since(now));
        match wait {
            None => Ticket::TooLate,
            Some(w) if w.is_zero() => Ticket::After(w),
            Some(w) => {
                self.throttled.fetch_add(1, Ordering::Relaxed);
                self.waiting.fetch_add(1, Ordering::Relaxed);
                let started = Instant::now();
                let slept = {
                    let _w =
                        stop.waiting_on(format!("a write token (write_qps {})", self.rate().0));
                    stop.sleep(w)
                };
                self.waiting.fetch_sub(1, Ordering::Relaxed);
                self.waited_micros
                    .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
                match slept {
                    // The reserved token is spent: a stopped version makes no
                    // more calls, and the bucket is the name's, not the version's.
                    Ok(()) => Ticket::After(w),
                    Err(Stopped) => Ticket::Stopped,
                }
            }
        }
    }

    /// Counts one refused call; `Some(n)` when its audit line may be
    /// written, `n` being the refusals suppressed since the last line.
    pub fn refusal(&self) -> Option<u64> {
        self.refused.fetch_add(1, Ordering::Relaxed);
        if self.lines.lock().try_take(Instant::now()) {
            self.audited.fetch_add(1, Ordering::Relaxed);
            Some(self.suppressed.swap(0, Ordering::Relaxed))
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            None
        }
    }

    /// The counters now.
    pub fn stats(&self) -> QuotaStats {
        QuotaStats {
            refused: self.refused.load(Ordering::Relaxed),
            suppressed: self.suppressed.load(Ordering::Relaxed),
            audited: self.audited.load(Ordering::Relaxed),
            throttled: self.throttled.load(Ordering::Relaxed),
            waited: Duration::from_micros(self.waited_micros.load(Ordering::Relaxed)),
            waiting: self.waiting.load(Ordering::Relaxed),
        }
    }

    /// The sustained rate and the burst now.
    pub fn rate(&self) -> (f64, f64) {
        let b = self.bucket.lock();
        (b.rate(), b.burst())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_lines_are_bounded_and_the_rest_counted() {
        let q = Quota::new(0.0, 1);
        let logged: Vec<u64> = (0..100).filter_map(|_| q.refusal()).collect();
        assert_eq!(logged.len(), REFUSAL_LINE_BURST as usize);
        assert!(logged.iter().all(|&n| n == 0));
        let s = q.stats();
        assert_eq!(s.refused, 100);
        assert_eq!(s.suppressed, 90);
        assert_eq!(s.audited, 10);
    }

    #[test]
    fn a_reload_does_not_refill() {
        let q = Quota::new(1.0, 2);
        let far = Instant::now() + Duration::from_secs(60);
        assert_eq!(
            q.take(Instant::now(), &Stop::default()),
            Ticket::After(Duration::ZERO)
        );
        assert_eq!(
            q.take(Instant::now(), &Stop::default()),
            Ticket::After(Duration::ZERO)
        );
        q.configure(1.0, 2);
        assert_eq!(
            q.take(Instant::now(), &Stop::default()),
            Ticket::TooLate,
            "no token after a reload"
        );
        q.configure(2.0, 4);
        assert_eq!(
            q.take(Instant::now(), &Stop::default()),
            Ticket::TooLate,
            "a larger burst is not a refill"
        );
        assert!(matches!(q.take(far, &Stop::default()), Ticket::After(w) if w > Duration::ZERO));
        assert_eq!(q.stats().throttled, 1);
    }
}
