//! Delivery: the one place that changes which keys this replica's plugins
//! receive.
//!
//! Job: turn a [`Share`] (nothing, everything, or a set of ring arcs) into the
//! ownership predicate that every plugin listener follows
//! ([`kube_informer::Ownership`]), count the cached keys each change moves,
//! and keep the figures the report and `/metrics` show.
//!
//! Invariants:
//! - Changes are applied one at a time, in the order asked, and each returns
//!   the informer's [`Handover`]: the plugins start no event for a lost key
//!   once [`Delivery::apply`] has returned, and handle none once the handover
//!   has finished.
//! - Until a share is applied, a host in a cluster mode delivers nothing;
//!   once sealed (shutdown), it never delivers again.
//! - A wait for a hand-over is reported: a WARN every [`WAIT_WARN_EVERY`]
//!   while a plugin still handles a lost key. [`Delivery::apply_and_wait_at_most`]
//!   also gives up waiting after a bound; use it only where the fence already
//!   refuses what the late handler could still write (a closed or shut fence,
//!   or a tenure that ended). A ring change, where the replica still holds
//!   the lease for the lost keys, bounds its wait by revoking the fence's
//!   tenure first (see `membership.rs`, `Member::stop_waiting`).

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kube_informer::ownership::{Everything, Nothing};
use kube_informer::{Handover, InformerRegistry, Ownership, Owns};
use parking_lot::{Mutex, RwLock};

use super::ring::ArcSet;
use super::shard::{Kinds, Placement, ShardOwns};

/// How often a hand-over that is still waiting is logged.
pub const WAIT_WARN_EVERY: Duration = Duration::from_secs(5);

/// What this replica delivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Share {
    /// Nothing (standby, lost lease, shutting down).
    Nothing,
    /// Every key (the leader).
    Everything,
    /// The keys hashing into these arcs (a shard).
    Arcs(ArcSet),
}

impl Share {
    /// The share of the ring, from 0 to 1.
    pub fn fraction(&self) -> f64 {
        match self {
            Share::Nothing => 0.0,
            Share::Everything => 1.0,
            Share::Arcs(a) => a.fraction(),
        }
    }

    /// As arcs of the ring.
    pub fn arcs(&self) -> ArcSet {
        match self {
            Share::Nothing => ArcSet::empty(),
            Share::Everything => ArcSet::full(),
            Share::Arcs(a) => a.clone(),
        }
    }
}

/// Figures of the changes applied so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeliveryStats {
    /// Changes that moved at least one key or changed the share.
    pub handovers: u64,
    /// Cached keys gained (delivered as a replay), over all changes.
    pub keys_gained: u64,
    /// Cached keys released, over all changes.
    pub keys_released: u64,
    /// How long the last change took until no plugin handled a lost key, ms.
    pub last_handover_ms: u64,
    /// The longest such time, ms.
    pub max_handover_ms: u64,
    /// A change is applied but some plugin still handles a lost key.
    pub in_transition: bool,
    /// Wall-clock time of the last change, ms since the Unix epoch.
    pub changed_at_unix_ms: u64,
}

struct State {
    share: Share,
    /// When the change in force started (a late [`Delivery::finished`] of
    /// an earlier one does not end its transition).
    current: Option<Instant>,
    stats: DeliveryStats,
    /// Shutting down: only [`Share::Nothing`] may be applied.
    sealed: bool,
}

/// The delivery gate of one host.
pub struct Delivery {
    ownership: Arc<Ownership>,
    kinds: Arc<Kinds>,
    placement: Arc<Placement>,
    registry: RwLock<Weak<InformerRegistry>>,
    state: Mutex<State>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("share", &self.state.lock().share)
            .finish()
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Delivery {
    /// A gate that delivers nothing yet, placing objects on the ring by
    /// `placement`.
    pub fn new(kinds: Arc<Kinds>, placement: Arc<Placement>) -> Arc<Self> {
        Arc::new(Self {
            ownership: Ownership::new(Nothing),
            kinds,
            placement,
            registry: RwLock::new(Weak::new()),
            state: Mutex::new(State {
                share: Share::Nothing,
                current: None,
                stats: DeliveryStats::default(),
                sealed: false,
            }),
        })
    }

    /// The predicate every plugin listener is registered with.
    pub fn ownership(&self) -> &Arc<Ownership> {
        &self.ownership
    }

    /// The registry attached, while it lives.
    pub fn registry(&self) -> Option<Arc<InformerRegistry>> {
        self.registry.read().upgrade()
    }

    /// Counts moved keys over `registry`'s caches.
    pub fn attach(&self, registry: &Arc<InformerRegistry>) {
        *self.registry.write() = Arc::downgrade(registry);
    }

    /// Records the group and kind of `resource` (from discovery), which
    /// shard keys need; call it before subscribing a listener to it.
    pub fn learn_kind(&self, resource: &str, group: &str, kind: &str) {
        self.kinds.insert(resource, group, kind);
    }

    fn predicate(&self, share: &Share) -> Arc<dyn Owns> {
        match share {
            Share::Nothing => Arc::new(Nothing),
            Share::Everything => Arc::new(Everything),
            Share::Arcs(a) => Arc::new(ShardOwns::placed(
                a.clone(),
                self.kinds.clone(),
                self.placement.clone(),
            )),
        }
    }

    /// The share in force.
    pub fn share(&self) -> Share {
        self.state.lock().share.clone()
    }

    /// Figures so far.
    pub fn stats(&self) -> DeliveryStats {
        self.state.lock().stats.clone()
    }

    /// Every cached object of every running informer, by resource.
    fn caches(&self) -> Vec<(String, Vec<kube_informer::ObjectRef>)> {
        let Some(registry) = self.registry.read().upgrade() else {
            return Vec::new();
        };
        registry
            .resources()
            .into_iter()
            .filter_map(|r| {
                let i = registry.informer(&r)?;
                Some((r, i.indexer().snapshot()))
            })
            .collect()
    }

    /// Applies `share`. Returns the handover (await it to know no plugin
    /// still handles a lost key) and when the change started.
    pub fn apply(&self, share: Share) -> (Handover, Instant) {
        let started = Instant::now();
        let mut st = self.state.lock();
        if st.share == share || (st.sealed && share != Share::Nothing) {
            return (Handover::default(), started);
        }
        let (old, new) = (self.predicate(&st.share), self.predicate(&share));
        let (mut gained, mut released) = (0u64, 0u64);
        for (resource, objects) in self.caches() {
            for o in objects {
                match (old.owns(&resource, &o), new.owns(&resource, &o)) {
                    (false, true) => gained += 1,
                    (true, false) => released += 1,
                    _ => {}
                }
            }
        }
        let handover = self.ownership.set(SharedOwns(new));
        st.share = share;
        st.current = Some(started);
        let s = &mut st.stats;
        s.handovers += 1;
        s.keys_gained += gained;
        s.keys_released += released;
        s.in_transition = handover.is_waiting();
        s.changed_at_unix_ms = unix_ms();
        if gained + released > 0 {
            tracing::info!(
                keys_gained = gained,
                keys_released = released,
                share = format!("{:.3}", st.share.fraction()),
                "delivery changed"
            );
        }
        (handover, started)
    }

    /// From now on only [`Share::Nothing`] is applied (shutdown).
    pub fn seal(&self) {
        self.state.lock().sealed = true;
    }

    /// Records that the change started at `started` has finished.
    pub fn finished(&self, started: Instant) {
        let ms = started.elapsed().as_millis() as u64;
        let mut st = self.state.lock();
        let current = st.current == Some(started);
        let s = &mut st.stats;
        if current {
            s.in_transition = false;
        }
        s.last_handover_ms = ms;
        s.max_handover_ms = s.max_handover_ms.max(ms);
        s.changed_at_unix_ms = unix_ms();
    }

    /// Applies `share` and waits until no plugin handles a lost key,
    /// logging a WARN every [`WAIT_WARN_EVERY`] meanwhile.
    pub async fn apply_and_wait(&self, share: Share) {
        let (handover, started) = self.apply(share);
        let mut wait = std::pin::pin!(handover.finished());
        loop {
            tokio::select! {
                _ = &mut wait => break,
                _ = tokio::time::sleep(WAIT_WARN_EVERY) => warn_waiting(started),
            }
        }
        self.finished(started);
    }

    /// Applies `share` and waits as [`Delivery::apply_and_wait`] does, but
    /// for at most `bound`: past it, logs a WARN and returns `false` while
    /// the rest of the hand-over finishes in the background (the report shows
    /// it in transition until then). Only where the fence already stops what
    /// a late handler could write.
    pub async fn apply_and_wait_at_most(self: &Arc<Self>, share: Share, bound: Duration) -> bool {
        let (handover, started) = self.apply(share);
        let mut wait = tokio::spawn(handover.finished());
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let next = (tokio::time::Instant::now() + WAIT_WARN_EVERY).min(deadline);
            tokio::select! {
                _ = &mut wait => {
                    self.finished(started);
                    return true;
                }
                _ = tokio::time::sleep_until(next) => {
                    if next < deadline {
                        warn_waiting(started);
                        continue;
                    }
                    tracing::warn!(
                        waited_ms = started.elapsed().as_millis() as u64,
                        "stopped waiting for the hand-over: a plugin still handles a key this \
                         replica gave up; the fence refuses its writes"
                    );
                    let me = self.clone();
                    tokio::spawn(async move {
                        let _ = wait.await;
                        me.finished(started);
                    });
                    return false;
                }
            }
        }
    }

    /// Cached keys delivered now, by resource.
    pub fn owned_keys(&self) -> BTreeMap<String, Vec<String>> {
        let p = self.ownership.current();
        self.caches()
            .into_iter()
            .map(|(r, objects)| {
                let mut keys: Vec<String> = objects
                    .iter()
                    .filter(|o| p.owns(&r, o))
                    .map(|o| o.key())
                    .collect();
                keys.sort();
                (r, keys)
            })
            .collect()
    }

    /// Every cached key, delivered or not, by resource.
    pub fn cached_keys(&self) -> BTreeMap<String, Vec<String>> {
        self.caches()
            .into_iter()
            .map(|(r, objects)| {
                let mut keys: Vec<String> = objects.iter().map(|o| o.key()).collect();
                keys.sort();
                (r, keys)
            })
            .collect()
    }

    /// Number of cached keys delivered now, by resource.
    pub fn shard_keys(&self) -> BTreeMap<String, u64> {
        let p = self.ownership.current();
        self.caches()
            .into_iter()
            .map(|(r, objects)| {
                let n = objects.iter().filter(|o| p.owns(&r, o)).count() as u64;
                (r, n)
            })
            .collect()
    }
}

fn warn_waiting(started: Instant) {
    tracing::warn!(
        waited_ms = started.elapsed().as_millis() as u64,
        "the hand-over waits for a plugin still handling a key this replica gave up"
    );
}

/// An already shared predicate, as [`Ownership::set`] takes one by value.
struct SharedOwns(Arc<dyn Owns>);

impl Owns for SharedOwns {
    fn owns(&self, resource: &str, object: &kube_informer::Object) -> bool {
        self.0.owns(resource, object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_informer::ownership::{Follower, FollowerWait};

    /// A follower whose work on lost keys never ends (a plugin held in
    /// quarantine with its batch).
    struct Stuck;

    impl Follower for Stuck {
        fn rebase(&self, _p: &dyn Owns, _n: &Arc<dyn Owns>) -> Option<FollowerWait> {
            Some(FollowerWait::new(std::future::pending()))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_bounded_hand_over_wait_gives_up_at_its_bound_and_stays_in_transition() {
        let d = Delivery::new(Kinds::new(), Default::default());
        let stuck: Arc<dyn Follower> = Arc::new(Stuck);
        d.ownership().follow(Arc::downgrade(&stuck));
        let t0 = tokio::time::Instant::now();
        let done = d
            .apply_and_wait_at_most(Share::Everything, Duration::from_secs(12))
            .await;
        assert!(!done, "the stuck hand-over cannot finish");
        assert_eq!(t0.elapsed(), Duration::from_secs(12));
        assert!(d.stats().in_transition, "reported as still in transition");
        assert_eq!(d.share(), Share::Everything, "the share is in force");
        // A later change that finishes at once while the first still waits
        // in the background.
        drop(stuck);
        assert!(
            d.apply_and_wait_at_most(Share::Nothing, Duration::from_secs(1))
                .await
        );
        assert!(!d.stats().in_transition);
        let stuck: Arc<dyn Follower> = Arc::new(Stuck);
        d.ownership().follow(Arc::downgrade(&stuck));
        // The unbounded wait never returns while the plugin is stuck.
        let d2 = d.clone();
        let unbounded = tokio::spawn(async move { d2.apply_and_wait(Share::Everything).await });
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(!unbounded.is_finished());
        drop(stuck);
    }
}
