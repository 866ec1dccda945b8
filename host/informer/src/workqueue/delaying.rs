//! Keys that become ready later: requeue-after timers and rate-limited
//! retries, as client-go's delaying queue holds them.
//!
//! Job: [`Timers`] holds each waiting key with the instant it becomes ready,
//! tells the earliest such instant (what a waiting worker sleeps until), and
//! hands out the keys that are due.
//!
//! Invariants:
//! - A key waits at most once; the queue keeps the earliest of the instants
//!   it was given (a later one never postpones it).
//! - Memory is one entry per waiting key, whatever the number of timers set.

use std::collections::BTreeSet;

use tokio::time::Instant;

/// Waiting keys by the instant they become ready.
#[derive(Debug)]
pub struct Timers<K> {
    order: BTreeSet<(Instant, u64, K)>,
}

impl<K> Default for Timers<K> {
    fn default() -> Self {
        Self {
            order: BTreeSet::new(),
        }
    }
}

impl<K: Ord + Clone> Timers<K> {
    /// Adds `key`, ready at `at`; `seq` tells apart keys due at one instant.
    /// The caller ensures the key is not already waiting.
    pub fn insert(&mut self, key: K, at: Instant, seq: u64) {
        self.order.insert((at, seq, key));
    }

    /// Removes `key`, known to be waiting as (`at`, `seq`).
    pub fn remove(&mut self, key: &K, at: Instant, seq: u64) -> bool {
        self.order.remove(&(at, seq, key.clone()))
    }

    /// When the first waiting key becomes ready.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.order.first().map(|(at, _, _)| *at)
    }

    /// Takes the next key due at or before `now`, with its instant.
    pub fn pop_due(&mut self, now: Instant) -> Option<(K, Instant)> {
        if self.order.first().is_some_and(|(at, _, _)| *at <= now) {
            self.order.pop_first().map(|(at, _, k)| (k, at))
        } else {
            None
        }
    }

    /// Number of waiting keys.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether no key waits.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Keeps only the keys for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&K) -> bool) {
        self.order.retain(|(_, _, k)| keep(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn due_keys_come_out_in_time_order() {
        let t = Instant::now();
        let s = Duration::from_secs(1);
        let mut w = Timers::default();
        w.insert("c", t + 3 * s, 1);
        w.insert("a", t + s, 2);
        w.insert("b", t + 2 * s, 3);
        assert_eq!(w.next_deadline(), Some(t + s));
        assert_eq!(w.pop_due(t), None);
        assert_eq!(w.pop_due(t + 2 * s), Some(("a", t + s)));
        assert_eq!(w.pop_due(t + 2 * s), Some(("b", t + 2 * s)));
        assert_eq!(w.pop_due(t + 2 * s), None);
        assert!(w.remove(&"c", t + 3 * s, 1));
        assert!(w.is_empty());
    }
}
