//! Time accounting of one call into the guest.
//!
//! Job: remember when the call started, its wall deadline, how long the guest
//! has been blocked in host calls (API requests), and what is left of the
//! event's API time budget; and decide, when the epoch deadline fires, whether
//! the guest's own time is really over.
//!
//! Invariant: the guest's own time (wall time minus time blocked in the host)
//! never exceeds the call's timeout by more than one epoch tick before the
//! call traps; time blocked in the host is bounded by the API budget instead.

use std::time::{Duration, Instant};

use super::api::Tenure;
use super::kube::ApiBudget;

/// The clock of the call in progress.
#[derive(Debug, Clone)]
pub struct CallClock {
    started: Instant,
    timeout: Duration,
    limit: Duration,
    blocked: Duration,
    budget: ApiBudget,
    api_time: Duration,
}

impl CallClock {
    /// A clock for calls of at most `timeout` of guest time and `api_time`
    /// blocked in API calls.
    pub fn new(timeout: Duration, api_time: Duration) -> Self {
        Self {
            started: Instant::now(),
            timeout,
            limit: timeout,
            blocked: Duration::ZERO,
            budget: ApiBudget::new(api_time),
            api_time,
        }
    }

    /// Starts a new call: the guest gets `scale` times the timeout (and the
    /// API budget), `scale` being more than 1 for `init`; its API calls are
    /// sent only under `tenure`, the lease tenure it starts in.
    pub fn start(&mut self, scale: u32, tenure: Option<Tenure>) {
        self.started = Instant::now();
        self.limit = self.timeout * scale;
        self.blocked = Duration::ZERO;
        self.budget = ApiBudget::within(self.api_time * scale, tenure);
    }

    /// The guest-time limit of the call in progress.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// What is left of the call's guest time (zero once it is over).
    pub fn remaining(&self) -> Duration {
        self.limit.saturating_sub(self.guest_time())
    }

    /// What is left of the event's API budget.
    pub fn budget(&self) -> &ApiBudget {
        &self.budget
    }

    /// Counts `d` spent blocked in the host.
    pub fn blocked_for(&mut self, d: Duration) {
        self.blocked += d;
    }

    /// The guest's own time so far in this call.
    pub fn guest_time(&self) -> Duration {
        self.started.elapsed().saturating_sub(self.blocked)
    }

    /// Time spent blocked in the host so far in this call.
    pub fn blocked(&self) -> Duration {
        self.blocked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_time_is_not_guest_time() {
        let mut c = CallClock::new(Duration::from_millis(100), Duration::from_secs(1));
        c.start(1, None);
        c.blocked_for(Duration::from_millis(25));
        let before = c.started.elapsed();
        let g = c.guest_time();
        let after = c.started.elapsed();
        let blocked = Duration::from_millis(25);
        assert!(g >= before.saturating_sub(blocked) && g <= after.saturating_sub(blocked));
        assert_eq!(c.blocked(), blocked);
        c.start(10, None);
        assert_eq!(c.blocked(), Duration::ZERO);
        assert_eq!(c.limit(), Duration::from_secs(1));
        assert!(c.remaining() <= c.limit());
    }
}
