//! A token bucket: a sustained rate with bursts, as client-go's
//! `flowcontrol` rate limiter and the plugin log limit use it.
//!
//! Invariant: over any interval of length `t`, at most `burst + rate * t`
//! tokens are taken; a bucket never holds more than `burst`. It is plain
//! arithmetic on an `Instant` (no timer, no thread), so an idle bucket costs
//! nothing.

use std::time::{Duration, Instant};

/// A token bucket.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket refilling at `rate` tokens per second, holding at most
    /// `burst` (at least 1). A `rate` of 0 or less means no limit.
    pub fn new(rate: f64, burst: f64) -> Self {
        let burst = burst.max(1.0);
        Self {
            rate,
            burst,
            tokens: burst,
            last: Instant::now(),
        }
    }

    /// Changes the rate and the burst, keeping the tokens already there (at
    /// most the new burst): a new setting never refills the bucket.
    pub fn set_rate(&mut self, now: Instant, rate: f64, burst: f64) {
        self.refill(now);
        self.rate = rate;
        self.burst = burst.max(1.0);
        self.tokens = self.tokens.min(self.burst);
    }

    /// The sustained rate (tokens per second; 0 or less: no limit).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The burst.
    pub fn burst(&self) -> f64 {
        self.burst
    }

    /// Whether the bucket limits at all.
    pub fn unlimited(&self) -> bool {
        self.rate <= 0.0
    }

    fn refill(&mut self, now: Instant) {
        if now > self.last {
            let add = now.duration_since(self.last).as_secs_f64() * self.rate;
            self.tokens = (self.tokens + add).min(self.burst);
            self.last = now;
        }
    }

    /// Takes a token now if one is there.
    pub fn try_take(&mut self, now: Instant) -> bool {
        if self.unlimited() {
            return true;
        }
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Reserves a token and says how long to wait before using it: zero when
    /// one is there, else the time until one will be. The reservation is
    /// kept (the bucket goes negative), so waiters are served in order.
    /// Returns `None`, reserving nothing, when the wait would be longer than
    /// `max_wait`.
    pub fn reserve(&mut self, now: Instant, max_wait: Duration) -> Option<Duration> {
        if self.unlimited() {
            return Some(Duration::ZERO);
        }
        self.refill(now);
        let missing = 1.0 - self.tokens;
        let wait = if missing <= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(missing / self.rate)
        };
        if wait > max_wait {
            return None;
        }
        self.tokens -= 1.0;
        Some(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_rate_keeps_the_tokens_and_never_refills() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(5.0, 10.0);
        b.last = t0;
        for _ in 0..10 {
            assert!(b.try_take(t0));
        }
        b.set_rate(t0, 5.0, 10.0);
        assert!(!b.try_take(t0), "the same setting again gives no token");
        b.set_rate(t0, 1.0, 2.0);
        assert!(!b.try_take(t0 + Duration::from_millis(500)));
        assert!(b.try_take(t0 + Duration::from_secs(1)));
    }

    #[test]
    fn burst_then_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10.0, 3.0);
        b.last = t0;
        assert!(b.try_take(t0) && b.try_take(t0) && b.try_take(t0));
        assert!(!b.try_take(t0), "burst of 3");
        assert!(!b.try_take(t0 + Duration::from_millis(50)));
        assert!(
            b.try_take(t0 + Duration::from_millis(100)),
            "one per 100 ms"
        );
        // A long idle period refills to the burst, not beyond.
        let later = t0 + Duration::from_secs(60);
        let taken = (0..10).filter(|_| b.try_take(later)).count();
        assert_eq!(taken, 3);
    }

    #[test]
    fn reservations_queue_and_respect_the_limit() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(5.0, 1.0);
        b.last = t0;
        assert_eq!(b.reserve(t0, Duration::from_secs(1)), Some(Duration::ZERO));
        let w1 = b.reserve(t0, Duration::from_secs(1)).unwrap();
        let w2 = b.reserve(t0, Duration::from_secs(1)).unwrap();
        assert!((w1.as_secs_f64() - 0.2).abs() < 1e-9, "{w1:?}");
        assert!((w2.as_secs_f64() - 0.4).abs() < 1e-9, "{w2:?}");
        // Too long a wait reserves nothing.
        assert_eq!(b.reserve(t0, Duration::from_millis(100)), None);
        let w3 = b.reserve(t0, Duration::from_secs(1)).unwrap();
        assert!((w3.as_secs_f64() - 0.6).abs() < 1e-9, "{w3:?}");
    }

    #[test]
    fn zero_rate_is_unlimited() {
        let mut b = TokenBucket::new(0.0, 1.0);
        let now = Instant::now();
        assert!((0..1000).all(|_| b.try_take(now)));
    }
}
