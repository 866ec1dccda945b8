//! Exponential backoff with jitter for the Reflector's retries.
//!
//! Job: decide how long to wait after a failed list or watch, the way client-go's
//! reflector does (800 ms doubling to 30 s, jittered, reset after 2 min of health).
//!
//! Invariant: the un-jittered step never exceeds `max`; a jittered delay lies in
//! `[step, step * (1 + jitter)]`; once `reset_after` has passed since the previous
//! failure the step starts again from `initial`. Time is read from
//! [`tokio::time::Instant`], so tests drive it with a paused clock.

#![warn(missing_docs)]

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

/// Parameters of a [`Backoff`].
#[derive(Debug, Clone, PartialEq)]
pub struct BackoffConfig {
    /// First delay.
    pub initial: Duration,
    /// Largest un-jittered delay.
    pub max: Duration,
    /// Growth factor per consecutive failure.
    pub factor: f64,
    /// Jitter as a fraction of the step: the delay is `step * (1 + jitter * u)`,
    /// `u` uniform in `[0, 1)`.
    pub jitter: f64,
    /// A failure this long after the previous one starts again from `initial`.
    pub reset_after: Duration,
}

impl Default for BackoffConfig {
    /// client-go's reflector values: 800 ms, 30 s, x2, jitter 1.0, reset after 2 min.
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
            factor: 2.0,
            jitter: 1.0,
            reset_after: Duration::from_secs(120),
        }
    }
}

/// Backoff state for one retry loop.
#[derive(Debug)]
pub struct Backoff {
    config: BackoffConfig,
    step: Option<Duration>,
    last_failure: Option<Instant>,
    rng: StdRng,
}

impl Backoff {
    /// A backoff with an entropy-seeded jitter source.
    pub fn new(config: BackoffConfig) -> Self {
        Self::with_rng(config, StdRng::from_os_rng())
    }

    /// A backoff whose jitter is reproducible from `seed`.
    pub fn with_seed(config: BackoffConfig, seed: u64) -> Self {
        Self::with_rng(config, StdRng::seed_from_u64(seed))
    }

    fn with_rng(config: BackoffConfig, rng: StdRng) -> Self {
        Self {
            config,
            step: None,
            last_failure: None,
            rng,
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &BackoffConfig {
        &self.config
    }

    /// The un-jittered step the next failure would use (without recording it).
    pub fn peek_step(&self, now: Instant) -> Duration {
        match (self.step, self.last_failure) {
            (Some(step), Some(last)) if now.duration_since(last) < self.config.reset_after => {
                let next = step.as_secs_f64() * self.config.factor;
                Duration::from_secs_f64(next.min(self.config.max.as_secs_f64()))
            }
            _ => self.config.initial.min(self.config.max),
        }
    }

    /// Records a failure at `now` and returns how long to wait before retrying.
    pub fn next_delay(&mut self, now: Instant) -> Duration {
        let step = self.peek_step(now);
        self.step = Some(step);
        self.last_failure = Some(now);
        let u: f64 = self.rng.random_range(0.0..1.0);
        Duration::from_secs_f64(step.as_secs_f64() * (1.0 + self.config.jitter * u))
    }

    /// Forgets past failures (the next delay is `initial` again).
    pub fn reset(&mut self) {
        self.step = None;
        self.last_failure = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_jitter() -> BackoffConfig {
        BackoffConfig {
            jitter: 0.0,
            ..BackoffConfig::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn doubles_from_800ms_and_caps_at_30s() {
        let mut b = Backoff::with_seed(no_jitter(), 1);
        let now = Instant::now();
        let got: Vec<u64> = (0..8)
            .map(|_| b.next_delay(now).as_millis() as u64)
            .collect();
        assert_eq!(got, vec![800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);
    }

    #[tokio::test(start_paused = true)]
    async fn jitter_stays_within_one_step() {
        let mut b = Backoff::with_seed(BackoffConfig::default(), 7);
        let now = Instant::now();
        let mut step = 0.8f64;
        let mut saw_jitter = false;
        for _ in 0..10 {
            let d = b.next_delay(now).as_secs_f64();
            assert!(
                d >= step - 1e-9 && d <= 2.0 * step + 1e-9,
                "{d} not in [{step}, {}]",
                2.0 * step
            );
            saw_jitter |= (d - step).abs() > 1e-6;
            step = (step * 2.0).min(30.0);
        }
        assert!(saw_jitter, "jitter never moved a delay");
    }

    #[tokio::test(start_paused = true)]
    async fn resets_after_two_minutes_without_failure() {
        let mut b = Backoff::with_seed(no_jitter(), 1);
        for _ in 0..5 {
            b.next_delay(Instant::now());
        }
        assert_eq!(b.peek_step(Instant::now()), Duration::from_millis(25600));
        tokio::time::advance(Duration::from_secs(119)).await;
        assert_eq!(b.next_delay(Instant::now()), Duration::from_millis(25600));
        tokio::time::advance(Duration::from_secs(121)).await;
        assert_eq!(b.next_delay(Instant::now()), Duration::from_millis(800));
    }
}
