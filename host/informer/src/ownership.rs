//! Which keys a listener delivers: an ownership predicate shared by any number
//! of listeners, and the hand-over when it changes.
//!
//! Job: an [`Ownership`] holds the current [`Owns`] predicate. A listener
//! registered with it (see [`crate::HandlerOptions::ownership`]) hands its
//! handler only notifications of objects the predicate owns; the others are
//! dropped at the dispatcher, before they take room in the queue.
//! [`Ownership::set`] replaces the predicate. Every attached listener, with its
//! informer's dispatcher excluded, drops what it holds for keys it no longer
//! owns and queues the cached objects of the keys it now owns as a replay; the
//! [`Handover`] it returns resolves once no listener is still handling a batch,
//! taken under an older predicate, that holds a key it no longer owns.
//!
//! The informer knows nothing of why a key is owned: a predicate may be "all"
//! or "none" (leader election), a hash ring (sharding), or anything else.
//!
//! Work that outlives a listener's batch (a controller's work queue, whose
//! keys are reconciled after the batch that queued them) follows the same
//! predicate as a [`Follower`]: told of every change under the same lock, it
//! drops what it no longer owns and adds its own wait to the [`Handover`].
//!
//! Invariants:
//! - After [`Ownership::set`] returns, no attached listener starts handling a
//!   notification of a key the new predicate does not own. Once the
//!   [`Handover`] resolves, none is handling one either.
//! - A gained key reaches the handler as one add of its cached state flagged
//!   `in_initial_list` (a replay, as in I6), then its live events, with no gap
//!   and no duplicate: the replay is taken while the dispatcher is excluded.
//! - A released key gets no notification: the handler simply stops hearing of
//!   it.
//! - The dispatcher pays one predicate call per notification and listener and
//!   never waits (I1).

#![warn(missing_docs)]

use std::sync::{Arc, Weak};

use parking_lot::{Mutex, RwLock};

use crate::listener::ListenerShared;
use crate::object::Object;

/// Decides whether a listener delivers an object.
pub trait Owns: Send + Sync + 'static {
    /// Whether `object`, of resource `resource` (an id such as `v1/pods`), is
    /// delivered. Called by the dispatcher for every notification: keep it
    /// cheap and never block.
    fn owns(&self, resource: &str, object: &Object) -> bool;
}

impl<F> Owns for F
where
    F: Fn(&str, &Object) -> bool + Send + Sync + 'static,
{
    fn owns(&self, resource: &str, object: &Object) -> bool {
        self(resource, object)
    }
}

/// Owns every object.
#[derive(Debug, Clone, Copy, Default)]
pub struct Everything;

impl Owns for Everything {
    fn owns(&self, _resource: &str, _object: &Object) -> bool {
        true
    }
}

/// Owns no object.
#[derive(Debug, Clone, Copy, Default)]
pub struct Nothing;

impl Owns for Nothing {
    fn owns(&self, _resource: &str, _object: &Object) -> bool {
        false
    }
}

/// The predicate shared by a set of listeners.
pub struct Ownership {
    current: RwLock<Arc<dyn Owns>>,
    /// Serialises changes and attachments, so that a listener attached during
    /// a change starts with the predicate that change installs.
    changes: Mutex<Vec<Weak<ListenerShared>>>,
    /// Followers, told of each change after the listeners.
    followers: Mutex<Vec<Weak<dyn Follower>>>,
}

/// Work beyond the listeners that follows an [`Ownership`] (a controller's
/// work queue): on each change it drops what the new predicate does not own
/// and says how to wait until nothing it does for a lost key is still in
/// progress.
pub trait Follower: Send + Sync + 'static {
    /// The predicate changed from `previous` to `next` (already in force).
    /// Returns a wait for work in progress on keys `next` does not own, if
    /// there is any.
    fn rebase(&self, previous: &dyn Owns, next: &Arc<dyn Owns>) -> Option<FollowerWait>;
}

/// A follower's part of a [`Handover`]: resolves once the follower does
/// nothing for a lost key any more.
pub struct FollowerWait(std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>);

impl FollowerWait {
    /// Wraps the wait.
    pub fn new(wait: impl std::future::Future<Output = ()> + Send + 'static) -> Self {
        Self(Box::pin(wait))
    }
}

impl std::fmt::Debug for FollowerWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FollowerWait")
    }
}

impl std::fmt::Debug for Ownership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ownership")
            .field("listeners", &self.changes.lock().len())
            .finish()
    }
}

/// Two handles are equal when they are the same shared predicate.
impl PartialEq for Ownership {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Ownership {
    /// A shared predicate, starting as `initial`.
    pub fn new(initial: impl Owns) -> Arc<Self> {
        Arc::new(Self {
            current: RwLock::new(Arc::new(initial)),
            changes: Mutex::new(Vec::new()),
            followers: Mutex::new(Vec::new()),
        })
    }

    /// Adds a follower, told of every later change (until it is dropped).
    /// It should start from [`Ownership::current`].
    pub fn follow(&self, follower: Weak<dyn Follower>) {
        let _changes = self.changes.lock();
        self.followers.lock().push(follower);
    }

    /// The predicate now in force.
    pub fn current(&self) -> Arc<dyn Owns> {
        self.current.read().clone()
    }

    /// Whether the predicate now in force owns `object`.
    pub fn owns(&self, resource: &str, object: &Object) -> bool {
        self.current.read().owns(resource, object)
    }

    /// Number of listeners attached and not yet closed.
    pub fn listeners(&self) -> usize {
        let mut l = self.changes.lock();
        l.retain(|w| w.upgrade().is_some_and(|s| !s.is_closed()));
        l.len()
    }

    /// Installs `next`. Each attached listener, with its dispatcher excluded,
    /// drops the queued, pending and replayed notifications of keys `next`
    /// does not own, and queues the cached objects of keys `next` owns and the
    /// previous predicate did not as a replay. Await the returned
    /// [`Handover`] to know when no listener is still handling a key it lost.
    pub fn set(&self, next: impl Owns) -> Handover {
        let next: Arc<dyn Owns> = Arc::new(next);
        let mut listeners = self.changes.lock();
        let previous = std::mem::replace(&mut *self.current.write(), next.clone());
        let mut out = Handover::default();
        listeners.retain(|w| w.upgrade().is_some_and(|s| !s.is_closed()));
        for l in listeners.iter().filter_map(Weak::upgrade) {
            let r = l.rebase(&previous, &next);
            out.gained += r.gained;
            out.released += r.released;
            if let Some(seq) = r.wait_for {
                out.waits.push((Arc::downgrade(&l), seq));
            }
        }
        let mut followers = self.followers.lock();
        followers.retain(|w| w.strong_count() > 0);
        for f in followers.iter().filter_map(Weak::upgrade) {
            if let Some(w) = f.rebase(&*previous, &next) {
                out.follows.push(w);
            }
        }
        out
    }

    /// Attaches a listener under the change lock: `install` runs with the
    /// predicate in force, and no change can slip between it and the
    /// attachment.
    pub(crate) fn attach(&self, l: &Arc<ListenerShared>, install: impl FnOnce(Arc<dyn Owns>)) {
        let mut listeners = self.changes.lock();
        install(self.current());
        listeners.push(Arc::downgrade(l));
    }
}

/// What one [`Ownership::set`] changed, and the wait for the old predicate's
/// batches to finish.
#[derive(Debug, Default)]
#[must_use = "await `finished` before acting on the assumption that lost keys are idle"]
pub struct Handover {
    /// Cached keys queued as a replay, summed over the listeners.
    pub gained: u64,
    /// Cached keys no longer delivered, summed over the listeners.
    pub released: u64,
    waits: Vec<(Weak<ListenerShared>, u64)>,
    follows: Vec<FollowerWait>,
}

impl Handover {
    /// Whether some listener is still handling a batch that holds a key it
    /// lost (so that [`Handover::finished`] would wait).
    pub fn is_waiting(&self) -> bool {
        !self.waits.is_empty() || !self.follows.is_empty()
    }

    /// Resolves once every listener has finished the batch it was handling
    /// when the predicate changed, if that batch held a key it lost, and every
    /// follower has finished its work on lost keys. A listener that closes (or
    /// is removed) in the meantime counts as finished.
    pub async fn finished(self) {
        for (l, seq) in self.waits {
            let Some(l) = l.upgrade() else { continue };
            l.batch_finished(seq).await;
        }
        for w in self.follows {
            w.0.await;
        }
    }
}
