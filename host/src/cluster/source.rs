//! Sharding at the source: which informers list and watch only this
//! replica's ranges, and how far their caches have caught up with the ring.
//!
//! Job: [`ShardSources`] is the registry's [`SourceSharding`]: an informer of
//! a resource placed by `uid` or `namespace` follows a [`SourceShard`] whose
//! ranges are the membership's *target* (the arcs this replica owns under the
//! view it is moving to, plus what it still delivers). [`ShardSources::covered`]
//! is what every such cache holds completely, so that the membership delivers
//! a gained arc only once its objects are cached, and
//! [`ShardSources::changed`] wakes it when coverage grows.
//!
//! Invariants:
//! - Every source-sharded informer follows the same target, set before the
//!   delivery can grow into it and never shrunk below what is delivered (the
//!   membership keeps `target ⊇ delivered`), so a delivered key's object is
//!   never evicted.
//! - An informer started later begins at the target in force.

use std::sync::{Arc, Weak};

use kube_informer::shard::{ArcSet, SourceShard, SourceSharding};
use parking_lot::Mutex;
use tokio::sync::watch;

use super::shard::Placement;

/// The source-sharded informers of one replica.
pub struct ShardSources {
    placement: Arc<Placement>,
    state: Mutex<State>,
    changed: watch::Sender<u64>,
}

struct State {
    target: ArcSet,
    sources: Vec<(String, Weak<SourceShard>)>,
}

impl std::fmt::Debug for ShardSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.state.lock();
        f.debug_struct("ShardSources")
            .field("target", &st.target)
            .field("sources", &st.sources.len())
            .finish()
    }
}

impl ShardSources {
    /// No target yet: informers started now cache nothing until the
    /// membership sets one.
    pub fn new(placement: Arc<Placement>) -> Arc<Self> {
        Arc::new(Self {
            placement,
            state: Mutex::new(State {
                target: ArcSet::empty(),
                sources: Vec::new(),
            }),
            changed: watch::channel(0).0,
        })
    }

    /// Asks every source-sharded informer to cache exactly `arcs`.
    pub fn set_target(&self, arcs: ArcSet) {
        let mut st = self.state.lock();
        if st.target == arcs {
            return;
        }
        st.target = arcs.clone();
        st.sources.retain(|(_, w)| w.strong_count() > 0);
        for s in st.sources.iter().filter_map(|(_, w)| w.upgrade()) {
            s.set_target(arcs.clone());
        }
    }

    /// The target in force.
    pub fn target(&self) -> ArcSet {
        self.state.lock().target.clone()
    }

    /// The arcs every source-sharded cache holds completely: the whole
    /// space when no informer is sharded at the source.
    pub fn covered(&self) -> ArcSet {
        let st = self.state.lock();
        st.sources
            .iter()
            .filter_map(|(_, w)| w.upgrade())
            .fold(ArcSet::full(), |acc, s| acc.intersect(&s.covered()))
    }

    /// Changes each time some cache's coverage does.
    pub fn changed(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The live handles, by resource.
    pub fn sources(&self) -> Vec<(String, Arc<SourceShard>)> {
        let st = self.state.lock();
        st.sources
            .iter()
            .filter_map(|(r, w)| w.upgrade().map(|s| (r.clone(), s)))
            .collect()
    }
}

impl SourceSharding for ShardSources {
    fn source_for(&self, resource: &str) -> Option<Arc<SourceShard>> {
        let field = self.placement.of(resource).source_field()?;
        let mut st = self.state.lock();
        let shard = SourceShard::new(field, st.target.clone());
        st.sources.retain(|(_, w)| w.strong_count() > 0);
        st.sources
            .push((resource.to_string(), Arc::downgrade(&shard)));
        // Wake the membership each time this cache covers more (or less);
        // the task ends with the informer.
        let mut rx = shard.watch_covered();
        let changed = self.changed.clone();
        tokio::spawn(async move {
            while rx.changed().await.is_ok() {
                changed.send_modify(|n| *n = n.wrapping_add(1));
            }
        });
        Some(shard)
    }
}
