//! How long a failed key waits before its next attempt: client-go's rate
//! limiters, on the tokio clock.
//!
//! Job: [`ItemExponential`] doubles a key's delay on each failure (5 ms, 10 ms,
//! 20 ms, ... up to 1000 s by default) until the key is forgotten;
//! [`Bucket`] is one token bucket for every key together (10 per second,
//! burst 100 by default), so that many keys failing at once cannot retry
//! faster than that; [`MaxOf`] takes the longest delay of several limiters.
//! [`RateLimiterConfig::default`] is client-go's
//! `DefaultTypedControllerRateLimiter`: the larger of the per-key exponential
//! and the overall bucket.
//!
//! Invariants:
//! - A limiter holds state only for keys that failed and were not forgotten
//!   (the bucket holds none per key): memory is O(failing keys).
//! - Every delay is a pure function of the calls made and the instants passed
//!   in, so tests on a paused clock see exact values.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

/// Decides the delay of a key's next attempt.
pub trait RateLimiter<K>: Send + 'static {
    /// The delay before `key` may be tried again, counting this as one more
    /// failure. `now` is the current instant.
    fn when(&mut self, key: &K, now: Instant) -> Duration;

    /// Forgets `key`'s failures (it succeeded, or is gone): its next failure
    /// starts from the base delay again.
    fn forget(&mut self, key: &K);

    /// How many failures of `key` are counted now.
    fn retries(&self, key: &K) -> u32;
}

impl<K: 'static> RateLimiter<K> for Box<dyn RateLimiter<K>> {
    fn when(&mut self, key: &K, now: Instant) -> Duration {
        (**self).when(key, now)
    }

    fn forget(&mut self, key: &K) {
        (**self).forget(key)
    }

    fn retries(&self, key: &K) -> u32 {
        (**self).retries(key)
    }
}

/// Per-key exponential backoff: `base * 2^failures`, at most `max`.
#[derive(Debug, Clone)]
pub struct ItemExponential<K> {
    base: Duration,
    max: Duration,
    failures: HashMap<K, u32>,
}

impl<K> ItemExponential<K> {
    /// Starts at `base` and doubles up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: HashMap::new(),
        }
    }

    /// Keys with failures counted (the limiter's memory).
    pub fn tracked(&self) -> usize {
        self.failures.len()
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> RateLimiter<K> for ItemExponential<K> {
    fn when(&mut self, key: &K, _now: Instant) -> Duration {
        let n = self.failures.entry(key.clone()).or_insert(0);
        let exp = *n;
        *n = n.saturating_add(1);
        // base * 2^exp in nanoseconds fits in a u128 for every exp below 64.
        if exp >= 64 {
            return self.max;
        }
        let nanos = self.base.as_nanos().saturating_mul(1u128 << exp);
        if nanos >= self.max.as_nanos() {
            self.max
        } else {
            Duration::from_nanos(nanos as u64)
        }
    }

    fn forget(&mut self, key: &K) {
        self.failures.remove(key);
    }

    fn retries(&self, key: &K) -> u32 {
        self.failures.get(key).copied().unwrap_or(0)
    }
}

/// One token bucket shared by every key: `qps` tokens a second, at most
/// `burst` saved up. Each failure takes a token; without one, the delay is
/// the time until the bucket will have paid it back (as Go's
/// `rate.Limiter.Reserve().Delay()`).
#[derive(Debug, Clone)]
pub struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Option<Instant>,
}

impl Bucket {
    /// `qps` tokens a second (more than 0), up to `burst` (at least 1),
    /// starting full.
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            qps: if qps > 0.0 { qps } else { f64::MIN_POSITIVE },
            burst,
            tokens: burst,
            last: None,
        }
    }
}

impl<K> RateLimiter<K> for Bucket {
    fn when(&mut self, _key: &K, now: Instant) -> Duration {
        if let Some(last) = self.last {
            let refill = now.saturating_duration_since(last).as_secs_f64() * self.qps;
            self.tokens = (self.tokens + refill).min(self.burst);
        }
        self.last = Some(now);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }

    fn forget(&mut self, _key: &K) {}

    fn retries(&self, _key: &K) -> u32 {
        0
    }
}

/// The longest delay of several limiters (every one counts the failure).
pub struct MaxOf<K> {
    limiters: Vec<Box<dyn RateLimiter<K>>>,
}

impl<K> std::fmt::Debug for MaxOf<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaxOf")
            .field("limiters", &self.limiters.len())
            .finish()
    }
}

impl<K> MaxOf<K> {
    /// The maximum of `limiters`.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<K>>>) -> Self {
        Self { limiters }
    }
}

impl<K: 'static> RateLimiter<K> for MaxOf<K> {
    fn when(&mut self, key: &K, now: Instant) -> Duration {
        self.limiters
            .iter_mut()
            .map(|l| l.when(key, now))
            .max()
            .unwrap_or(Duration::ZERO)
    }

    fn forget(&mut self, key: &K) {
        for l in &mut self.limiters {
            l.forget(key);
        }
    }

    fn retries(&self, key: &K) -> u32 {
        self.limiters
            .iter()
            .map(|l| l.retries(key))
            .max()
            .unwrap_or(0)
    }
}

/// The settings of a work queue's retry limiter (the manifest's `retry_*`
/// keys). The default is client-go's `DefaultTypedControllerRateLimiter`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimiterConfig {
    /// A key's first retry delay (default 5 ms); doubled on each further
    /// failure.
    pub base_delay: Duration,
    /// A key's longest retry delay (default 1000 s).
    pub max_delay: Duration,
    /// Retries per second across all keys (default 10); 0 for no overall
    /// limit.
    pub qps: f64,
    /// Retries the overall bucket allows at once (default 100).
    pub burst: u32,
}

impl Default for RateLimiterConfig {
    fn default() -> Self {
        Self {
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_secs(1000),
            qps: 10.0,
            burst: 100,
        }
    }
}

impl RateLimiterConfig {
    /// The limiter: the per-key exponential, and the overall bucket unless
    /// `qps` is 0.
    pub fn build<K: Clone + Eq + Hash + Send + 'static>(&self) -> Box<dyn RateLimiter<K>> {
        let exp = ItemExponential::new(self.base_delay, self.max_delay);
        if self.qps > 0.0 {
            Box::new(MaxOf::new(vec![
                Box::new(exp),
                Box::new(Bucket::new(self.qps, self.burst)),
            ]))
        } else {
            Box::new(exp)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn item_exponential_doubles_to_its_cap_and_forgets() {
        let t = Instant::now();
        let mut l = ItemExponential::new(5 * MS, Duration::from_secs(1000));
        let got: Vec<Duration> = (0..4).map(|_| l.when(&"a", t)).collect();
        assert_eq!(got, vec![5 * MS, 10 * MS, 20 * MS, 40 * MS]);
        assert_eq!(l.retries(&"a"), 4);
        assert_eq!(l.when(&"b", t), 5 * MS, "keys are independent");
        for _ in 0..100 {
            l.when(&"a", t);
        }
        assert_eq!(l.when(&"a", t), Duration::from_secs(1000));
        l.forget(&"a");
        assert_eq!(l.retries(&"a"), 0);
        assert_eq!(l.when(&"a", t), 5 * MS);
        assert_eq!(l.tracked(), 2);
    }

    #[test]
    fn bucket_allows_its_burst_then_paces_at_qps() {
        let t = Instant::now();
        let mut b = Bucket::new(10.0, 3);
        let first: Vec<Duration> = (0..3)
            .map(|_| RateLimiter::<&str>::when(&mut b, &"k", t))
            .collect();
        assert_eq!(first, vec![Duration::ZERO; 3]);
        // The 4th and 5th wait 100 ms and 200 ms: the debt accumulates.
        assert_eq!(RateLimiter::<&str>::when(&mut b, &"k", t), 100 * MS);
        assert_eq!(RateLimiter::<&str>::when(&mut b, &"k", t), 200 * MS);
        // A second later the debt (2 tokens) is paid and 8 more saved, capped
        // at the burst of 3.
        let later = t + Duration::from_secs(1);
        let again: Vec<Duration> = (0..3)
            .map(|_| RateLimiter::<&str>::when(&mut b, &"k", later))
            .collect();
        assert_eq!(again, vec![Duration::ZERO; 3]);
        assert_eq!(RateLimiter::<&str>::when(&mut b, &"k", later), 100 * MS);
    }

    #[test]
    fn default_is_the_max_of_exponential_and_bucket() {
        let t = Instant::now();
        let mut l = RateLimiterConfig::default().build::<String>();
        // 100 distinct keys failing at once spend the burst at 5 ms each...
        for i in 0..100 {
            assert_eq!(l.when(&format!("k{i}"), t), 5 * MS);
        }
        // ...then the bucket dominates: 100 ms, 200 ms, ...
        assert_eq!(l.when(&"x".to_string(), t), 100 * MS);
        assert_eq!(l.when(&"y".to_string(), t), 200 * MS);
        assert_eq!(l.retries(&"x".to_string()), 1);
        l.forget(&"x".to_string());
        assert_eq!(l.retries(&"x".to_string()), 0);
    }

    #[test]
    fn zero_qps_means_exponential_only() {
        let t = Instant::now();
        let cfg = RateLimiterConfig {
            qps: 0.0,
            ..RateLimiterConfig::default()
        };
        let mut l = cfg.build::<u32>();
        for i in 0..500 {
            assert_eq!(l.when(&i, t), 5 * MS);
        }
    }
}
