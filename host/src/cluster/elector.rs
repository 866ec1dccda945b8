//! Leader election over one Lease, with client-go's timing.
//!
//! Job: run this replica's side of the election. As a standby, try to take
//! the lease every retry period, and exactly when the holder's record has gone
//! unchanged for a lease duration (or at once when it was released). As the
//! leader, renew every retry period; give up when no renewal has succeeded
//! within the renew deadline. Publish the role on a watch channel, and keep
//! the [`Fence`] in step.
//!
//! Invariants:
//! - Leadership ends no later than the renew deadline after the last
//!   successful renewal was sent: every attempt is bounded by the time left
//!   until then. (client-go allows a retry period more, since its deadline
//!   starts with each renew round; ours starts with the last success.)
//! - The fence is renewed on every success and closed *before* the change to
//!   standby is published, so no write passes once delivery is told to stop.
//! - Stopping the elector does not release the lease: the caller releases it
//!   after the plugins have drained ([`Elector::run`] hands the lock back).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

use super::fence::Fence;
use super::lease::{Attempt, LeaseLock, Timing};

/// This replica's view of the election.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Election {
    /// This replica holds the lease.
    pub leader: bool,
    /// The holder last seen, if any.
    pub holder: Option<String>,
    /// Times this replica became the leader.
    pub acquisitions: u64,
    /// Wall-clock time of the last role change, ms since the Unix epoch.
    pub since_unix_ms: u64,
    /// The last failed attempt, if the last attempt failed.
    pub last_error: Option<String>,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// One replica's elector.
pub struct Elector {
    lock: LeaseLock,
    timing: Timing,
    fence: Arc<Fence>,
    status: watch::Sender<Election>,
}

impl Elector {
    /// An elector on `lock`; its role is published on the returned receiver.
    pub fn new(
        lock: LeaseLock,
        timing: Timing,
        fence: Arc<Fence>,
    ) -> (Self, watch::Receiver<Election>) {
        let (status, rx) = watch::channel(Election::default());
        (
            Self {
                lock,
                timing,
                fence,
                status,
            },
            rx,
        )
    }

    fn publish(&self, f: impl FnOnce(&mut Election)) {
        self.status.send_modify(|e| {
            let was = e.leader;
            f(e);
            if e.leader != was {
                e.since_unix_ms = unix_ms();
            }
        });
    }

    /// One attempt, bounded by `limit`.
    async fn attempt(&mut self, limit: Duration) -> Attempt {
        match tokio::time::timeout(limit, self.lock.try_acquire_or_renew()).await {
            Ok(a) => a,
            Err(_) => Attempt::Failed(format!("no answer within {} ms", limit.as_millis())),
        }
    }

    /// Runs until `stop` turns true; returns the lock, still held if this
    /// replica was leading, for the caller to release.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) -> LeaseLock {
        let t = self.timing;
        loop {
            // Standby: try to acquire.
            let mut last_ok = loop {
                if *stop.borrow() {
                    return self.lock;
                }
                let wake = match self.attempt(t.retry_period).await {
                    Attempt::Held { sent, .. } => break sent,
                    Attempt::Taken { holder, expires } => {
                        self.publish(|e| {
                            e.holder = Some(holder);
                            e.last_error = None;
                        });
                        // Poll every retry period, and try exactly at expiry.
                        (Instant::now() + t.retry_period).min(expires)
                    }
                    Attempt::Failed(err) => {
                        tracing::debug!(lease = %self.lock.name(), error = %err, "cannot acquire the lease");
                        self.publish(|e| e.last_error = Some(err));
                        Instant::now() + t.retry_period
                    }
                };
                tokio::select! {
                    _ = tokio::time::sleep_until(wake.into()) => {}
                    _ = stop.changed() => {}
                }
            };
            self.fence.renewed(last_ok);
            let identity = self.lock.identity().to_string();
            tracing::info!(lease = %self.lock.name(), identity = %identity, "became the leader");
            self.publish(|e| {
                e.leader = true;
                e.holder = Some(identity);
                e.acquisitions += 1;
                e.last_error = None;
            });

            // Leader: renew every retry period until the renew deadline is missed.
            let mut next = last_ok + t.retry_period;
            loop {
                tokio::select! {
                    _ = tokio::time::sleep_until(next.into()) => {}
                    _ = stop.changed() => {}
                }
                if *stop.borrow() {
                    return self.lock;
                }
                let deadline = last_ok + t.renew_deadline;
                let left = deadline.saturating_duration_since(Instant::now());
                let outcome = if left.is_zero() {
                    Attempt::Failed("renew deadline passed".into())
                } else {
                    self.attempt(left.min(t.retry_period)).await
                };
                match outcome {
                    Attempt::Held { sent, .. } => {
                        self.fence.renewed(sent);
                        last_ok = sent;
                        next = sent + t.retry_period;
                        continue;
                    }
                    Attempt::Taken { holder, .. } => {
                        self.lose(format!("the lease is held by {holder}"));
                        break;
                    }
                    Attempt::Failed(err) => {
                        if Instant::now() >= deadline {
                            self.lose(err);
                            break;
                        }
                        tracing::warn!(lease = %self.lock.name(), error = %err, "lease renewal failed; retrying");
                        next = (Instant::now() + t.retry_period).min(deadline);
                    }
                }
            }
        }
    }

    /// Leadership is lost: fence first, then the role change.
    fn lose(&self, why: String) {
        self.fence.close();
        tracing::warn!(lease = %self.lock.name(), reason = %why, "stopped leading");
        let holder = self.lock.observed_holder();
        self.publish(|e| {
            e.leader = false;
            e.holder = holder.filter(|h| h != self.lock.identity());
            e.last_error = Some(why);
        });
    }
}
