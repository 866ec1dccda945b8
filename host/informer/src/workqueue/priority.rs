//! The order in which ready keys are handed out: by priority, then first come
//! first served, as controller-runtime's priority queue does it.
//!
//! Job: [`Priority`] names the levels the host uses ([`Priority::LIVE`] for a
//! change seen as it happens, [`Priority::LOW`] for keys of an initial list,
//! a relist or a resync); [`ReadySet`] holds the ready keys and pops the one
//! with the highest priority that became ready first, or (for the queue's
//! ageing, see [`super::queue`]) the oldest key below [`Priority::LIVE`].
//!
//! Invariants:
//! - A key is in the set at most once; raising its priority moves it, and it
//!   keeps its place in arrival order among keys of its new priority.
//! - Every operation is O(log n); the set holds one entry per ready key, and
//!   one more per key below [`Priority::LIVE`] in the index of the oldest.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

/// How urgent a key is: higher runs first. Any `i32` works; the host uses
/// two levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Priority(pub i32);

impl Priority {
    /// A change seen as it happens (watch events, owned objects changing,
    /// retries and requeues of such keys). The default.
    pub const LIVE: Priority = Priority(0);
    /// Keys queued because the object was listed (the initial list, a relist
    /// after 410) or resynced, not because it changed: they wait behind
    /// every live key (controller-runtime's `LowPriority`, -100).
    pub const LOW: Priority = Priority(-100);
}

impl Default for Priority {
    fn default() -> Self {
        Priority::LIVE
    }
}

/// Ready keys in hand-out order.
#[derive(Debug)]
pub struct ReadySet<K> {
    order: BTreeSet<(Reverse<Priority>, u64, K)>,
    /// The keys below [`Priority::LIVE`], by arrival.
    low: BTreeMap<u64, (K, Priority)>,
}

impl<K> Default for ReadySet<K> {
    fn default() -> Self {
        Self {
            order: BTreeSet::new(),
            low: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Clone> ReadySet<K> {
    /// Adds `key`, which arrived as number `seq` with `priority`. The caller
    /// ensures the key is not already in the set.
    pub fn insert(&mut self, key: K, priority: Priority, seq: u64) {
        if priority < Priority::LIVE {
            self.low.insert(seq, (key.clone(), priority));
        }
        self.order.insert((Reverse(priority), seq, key));
    }

    /// Removes `key`, known to be in the set as (`priority`, `seq`).
    pub fn remove(&mut self, key: &K, priority: Priority, seq: u64) -> bool {
        if priority < Priority::LIVE {
            self.low.remove(&seq);
        }
        self.order.remove(&(Reverse(priority), seq, key.clone()))
    }

    /// Takes the key of highest priority that arrived first.
    pub fn pop(&mut self) -> Option<(K, Priority, u64)> {
        let (Reverse(p), seq, k) = self.order.pop_first()?;
        if p < Priority::LIVE {
            self.low.remove(&seq);
        }
        Some((k, p, seq))
    }

    /// The key below [`Priority::LIVE`] that arrived first.
    pub fn oldest_low(&self) -> Option<&K> {
        self.low.first_key_value().map(|(_, (k, _))| k)
    }

    /// Takes the key below [`Priority::LIVE`] that arrived first.
    pub fn pop_oldest_low(&mut self) -> Option<(K, Priority, u64)> {
        let (seq, (k, p)) = self.low.pop_first()?;
        let k = self
            .order
            .take(&(Reverse(p), seq, k))
            .map(|(_, _, k)| k)
            .expect("the index of low keys follows the order");
        Some((k, p, seq))
    }

    /// Whether a key of [`Priority::LIVE`] or above is ready.
    pub fn has_live(&self) -> bool {
        self.order
            .first()
            .is_some_and(|(Reverse(p), _, _)| *p >= Priority::LIVE)
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Keeps only the keys for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&K) -> bool) {
        self.order.retain(|(_, _, k)| keep(k));
        let order = &self.order;
        self.low
            .retain(|seq, (k, p)| order.contains(&(Reverse(*p), *seq, k.clone())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn higher_priority_first_then_arrival_order() {
        let mut s = ReadySet::default();
        s.insert("low-1", Priority::LOW, 1);
        s.insert("low-2", Priority::LOW, 2);
        s.insert("live-3", Priority::LIVE, 3);
        s.insert("live-4", Priority::LIVE, 4);
        // A raised key keeps its arrival number.
        assert!(s.remove(&"low-2", Priority::LOW, 2));
        s.insert("low-2", Priority::LIVE, 2);
        let order: Vec<&str> = std::iter::from_fn(|| s.pop().map(|(k, _, _)| k)).collect();
        assert_eq!(order, vec!["low-2", "live-3", "live-4", "low-1"]);
        assert!(s.is_empty());
    }

    #[test]
    fn the_oldest_low_key_can_be_taken_ahead_of_live_ones() {
        let mut s = ReadySet::default();
        s.insert("low-1", Priority::LOW, 1);
        s.insert("live-2", Priority::LIVE, 2);
        s.insert("low-3", Priority::LOW, 3);
        assert_eq!(s.oldest_low(), Some(&"low-1"));
        assert!(s.has_live());
        assert_eq!(s.pop_oldest_low().map(|(k, _, _)| k), Some("low-1"));
        assert_eq!(s.pop().map(|(k, _, _)| k), Some("live-2"));
        assert!(!s.has_live());
        assert_eq!(s.oldest_low(), Some(&"low-3"));
        s.retain(|k| *k != "low-3");
        assert_eq!(s.oldest_low(), None);
        assert!(s.is_empty());
    }
}
