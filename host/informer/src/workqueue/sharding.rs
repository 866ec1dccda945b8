//! A work queue under an [`Ownership`] predicate: leader election and
//! sharding cover a controller's keys as they cover listeners.
//!
//! Job: [`OwnedKeys`] decides whether a key of the primary resource is this
//! host's by asking the predicate about the primary object it names (from the
//! cache; a key whose object is gone is judged by its name alone). It is the
//! [`KeyFilter`] of the triggers that do not carry the predicate themselves
//! (`watches`, whose objects are not hashed with their primary), and of the
//! workers, which check every key before they reconcile it. As a
//! [`Follower`] of the predicate, on each change it drops the queued keys it
//! lost (forgetting their retries and timers) and makes the [`Handover`](crate::ownership::Handover)
//! wait until no worker is still reconciling one.
//! Keys it gains arrive as the replay of the listeners registered with the
//! predicate (`for` and `owns`), at low priority.
//!
//! Invariant (I10 for controllers): once the predicate has changed, no worker
//! starts a reconcile of a key it does not own (the workers check after
//! taking the key, and a key taken before the change is in the processing
//! set the handover waits on); once the handover has finished, none is
//! running one.

use std::sync::{Arc, Weak};

use crate::cache_view::CacheView;
use crate::object::{Object, ObjectMeta};
use crate::ownership::{Follower, FollowerWait, Ownership, Owns};

use super::queue::WorkQueue;
use super::triggers::KeyFilter;

/// The keys of `primary` that an [`Ownership`] gives this host.
pub struct OwnedKeys {
    ownership: Arc<Ownership>,
    cache: Arc<dyn CacheView>,
    primary: Arc<str>,
    queue: Weak<WorkQueue<Arc<str>>>,
}

impl std::fmt::Debug for OwnedKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedKeys")
            .field("primary", &self.primary)
            .finish()
    }
}

/// A stand-in for a key whose object is gone: its namespace and name only.
fn by_name(key: &str) -> Object {
    let (namespace, name) = match key.split_once('/') {
        Some((ns, n)) => (Some(ns.to_string()), n.to_string()),
        None => (None, key.to_string()),
    };
    Object {
        meta: ObjectMeta {
            namespace,
            name,
            ..ObjectMeta::default()
        },
        json: "{}".into(),
    }
}

impl OwnedKeys {
    /// Follows `ownership` for `queue`, whose keys name objects of `primary`
    /// in `cache`. Keep the returned handle as long as the queue runs.
    pub fn follow(
        ownership: Arc<Ownership>,
        cache: Arc<dyn CacheView>,
        primary: &str,
        queue: &Arc<WorkQueue<Arc<str>>>,
    ) -> Arc<Self> {
        let me = Arc::new(Self {
            ownership: ownership.clone(),
            cache,
            primary: primary.into(),
            queue: Arc::downgrade(queue),
        });
        let weak: Weak<dyn Follower> = Arc::downgrade(&(me.clone() as Arc<dyn Follower>));
        ownership.follow(weak);
        me
    }

    fn owned_by(&self, p: &dyn Owns, key: &str) -> bool {
        match self.cache.get(&self.primary, key) {
            Ok(Some(o)) => p.owns(&self.primary, &o),
            _ => p.owns(&self.primary, &by_name(key)),
        }
    }
}

impl KeyFilter for OwnedKeys {
    fn admits(&self, _resource: &str, key: &str) -> bool {
        self.owned_by(&*self.ownership.current(), key)
    }
}

impl Follower for OwnedKeys {
    fn rebase(&self, _previous: &dyn Owns, next: &Arc<dyn Owns>) -> Option<FollowerWait> {
        let queue = self.queue.upgrade()?;
        // Decided outside the queue's lock: the cache is read for each key.
        let lost: std::collections::HashSet<Arc<str>> = queue
            .queued_keys()
            .into_iter()
            .filter(|k| !self.owned_by(&**next, k))
            .collect();
        if !lost.is_empty() {
            queue.retain(|k| !lost.contains(k));
        }
        let busy: Vec<Arc<str>> = queue
            .processing_keys()
            .into_iter()
            .filter(|k| !self.owned_by(&**next, k))
            .collect();
        if busy.is_empty() {
            return None;
        }
        Some(FollowerWait::new(async move {
            queue.wait_finished(busy).await;
        }))
    }
}
