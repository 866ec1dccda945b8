//! Sharded membership: this replica's Lease in a ring of Leases, and the
//! hand-over protocol that keeps one key on one replica.
//!
//! Job: hold this replica's own Lease (named after it, labelled with the
//! ring's name, as in kubernetes-controller-sharding), renew it with
//! client-go's timing, read the ring's Leases, and decide which arcs of the
//! consistent-hash ring this replica delivers.
//!
//! Membership is the set of live Leases of the ring: a Lease is live while it
//! has a holder and its record has changed within a lease duration, as timed
//! by this process from its own observations (client-go's rule, see
//! [`super::lease`]). Each replica writes into its Lease, in the annotation
//! [`VIEW_ANNOTATION`], the member list it currently *claims* under: the ring
//! of that list gives the arcs it may be delivering. The protocol:
//!
//! 1. Every retry period, at the moment a peer's lease expires, and when a
//!    watch on the ring's Leases shows a peer change its claim, join or leave,
//!    list the ring's Leases. The intended view is the live members plus this
//!    replica. (The watch also times peers' renewals as they happen, so that a
//!    dead peer's lease expires for us a lease duration after its last
//!    renewal rather than up to a retry period later.)
//! 2. If the intended view differs from the published one, first narrow what
//!    is delivered to what the replica owns under *both* views, and wait until
//!    no plugin handles a key it gave up; then publish the intended view (a
//!    renewal that writes the annotation). The wait lasts at most a lease
//!    duration: past it, the fence's tenure is revoked, so that nothing begun
//!    before can write any more, and the replica waits only until no request
//!    already sent can still be applied.
//! 3. After a publish, list again (a quorum read, so it sees every write that
//!    completed before it). Deliver, in addition to what is already delivered,
//!    the arcs this replica owns under its published view that no live peer
//!    claims under its own published view.
//!
//! Why no key is delivered by two live replicas: a replica delivers only arcs
//! it claims (step 2 narrows before the claim shrinks), and it widens only into
//! arcs no live peer claimed in a read taken after its own claim was written.
//! Of two replicas widening into one arc, the one whose claim was written
//! later reads the other's claim (the reads are linearizable), so it does not
//! widen. A peer that stops renewing is ignored only once its lease has
//! expired for us, by which time its own renew deadline has passed and it has
//! stopped delivering (see [`super::fence`]). The new owner of a key therefore
//! takes it only after the old owner released it (published a view without
//! it), or after the old owner's lease expired.
//!
//! Invariants:
//! - What is delivered is always within the arcs of the published view and of
//!   the view being written; nothing is delivered while the lease is not held.
//! - On losing the lease (no renewal within the renew deadline) the fence is
//!   closed, then delivery is narrowed to nothing, and the claim is withdrawn.
//! - A clean shutdown narrows to nothing, waits for the plugins, withdraws
//!   its claim (a renewal without a view), then deletes the Lease, so peers
//!   take the keys at their next read. The Lease of a replica that died is
//!   deleted by the first peer that sees it expired.
//! - A peer's Lease that disappears while it still claims arcs (deleted by
//!   someone else: its holder does not know and goes on delivering until its
//!   next renewal recreates it) keeps its claim until its lease expires, as
//!   an unchanged Lease would.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, ListParams, Preconditions, WatchEvent, WatchParams};
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};

use super::delivery::{Delivery, Share};
use super::fence::Fence;
use super::lease::{Attempt, LeaseLock, Observation, Timing};
use super::ring::{ArcSet, Ring};
use super::source::ShardSources;

/// The label that puts a Lease in a ring; its value is the ring's name.
pub const RING_LABEL: &str = "wasm-informer.dev/ring";
/// The annotation holding the member list a replica claims under.
pub const VIEW_ANNOTATION: &str = "wasm-informer.dev/view";
/// The annotation holding the virtual nodes per member of that replica's ring,
/// so that its peers compute its claim exactly as it does.
pub const VNODES_ANNOTATION: &str = "wasm-informer.dev/virtual-nodes";

/// A Lease expired this long (beyond its duration) is deleted by any member
/// that sees it. Deleting at once is safe (its holder stopped delivering
/// before it expired, and recreates it if it comes back) and keeps a replica
/// that starts later from waiting a lease duration for a Lease it has never
/// seen renewed (client-go's rule makes a first observation count as fresh).
const ORPHAN_AFTER: Duration = Duration::ZERO;

/// This replica's view of the ring, for the report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RingStatus {
    /// This replica holds its lease.
    pub held: bool,
    /// Live members seen in the last read, this replica included when held.
    pub members: Vec<String>,
    /// The member list published in this replica's lease.
    pub view: Vec<String>,
    /// A hand-over is under way (views differ, or a plugin still handles a
    /// key given up, or arcs are still claimed by a peer).
    pub settling: bool,
    /// The last failed request, if the last one failed.
    pub last_error: Option<String>,
}

/// Settings of one member.
#[derive(Debug, Clone)]
pub struct MemberConfig {
    /// The ring's name (the value of [`RING_LABEL`]).
    pub ring: String,
    /// This replica's Lease name, also its name in the ring.
    pub name: String,
    /// Virtual nodes per member.
    pub virtual_nodes: u32,
    /// Durations.
    pub timing: Timing,
}

/// The view a Lease claims under, and its virtual nodes per member.
fn view_of(lease: &Lease) -> (Vec<String>, Option<u32>) {
    let a = lease.metadata.annotations.as_ref();
    let view = a
        .and_then(|a| a.get(VIEW_ANNOTATION))
        .map(|v| parse_view(v))
        .unwrap_or_default();
    let vnodes = a
        .and_then(|a| a.get(VNODES_ANNOTATION))
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > 0);
    (view, vnodes)
}

/// Parses a view annotation: member names separated by commas.
pub fn parse_view(v: &str) -> Vec<String> {
    let mut out: Vec<String> = v
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// What the watch on the ring's Leases saw.
enum Seen {
    Upsert(Box<Lease>),
    Gone(String),
}

/// Watches the ring's Leases and forwards every change, re-establishing the
/// watch after errors. Ends when the receiver is gone.
async fn watch_ring(
    api: Api<Lease>,
    selector: String,
    tx: mpsc::UnboundedSender<Seen>,
    retry: Duration,
) {
    while !tx.is_closed() {
        let lp = ListParams::default().labels(&selector).limit(1);
        let rv = match tokio::time::timeout(retry, api.list(&lp)).await {
            Ok(Ok(l)) => l.metadata.resource_version.unwrap_or_default(),
            _ => {
                tokio::time::sleep(retry).await;
                continue;
            }
        };
        let wp = WatchParams::default().labels(&selector).timeout(290);
        let stream = match api.watch(&wp, &rv).await {
            Ok(s) => s,
            Err(_) => {
                tokio::time::sleep(retry).await;
                continue;
            }
        };
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            let seen = match ev {
                Ok(WatchEvent::Added(l)) | Ok(WatchEvent::Modified(l)) => Seen::Upsert(Box::new(l)),
                Ok(WatchEvent::Deleted(l)) => Seen::Gone(l.metadata.name.unwrap_or_default()),
                Ok(WatchEvent::Bookmark(_)) => continue,
                Ok(WatchEvent::Error(_)) | Err(_) => break,
            };
            if tx.send(seen).is_err() {
                return;
            }
        }
    }
}

/// A peer as last read.
struct Peer {
    observation: Observation,
    view: Vec<String>,
    /// Its virtual nodes per member.
    vnodes: Option<u32>,
}

impl Peer {
    /// The arcs `name` claims. A claim whose ring we cannot rebuild (no
    /// virtual node count) is taken to cover the whole ring.
    fn claim(&self, name: &str) -> ArcSet {
        if self.view.is_empty() {
            return ArcSet::empty();
        }
        match self.vnodes {
            Some(v) => Ring::new(&self.view, v).arcs_of(name),
            None => ArcSet::full(),
        }
    }
}

struct State {
    held: bool,
    /// When the last successful renewal was sent.
    last_ok: Instant,
    /// The view in the lease as last written successfully.
    published: Option<Vec<String>>,
    /// The view the next renewal writes.
    writing: Option<Vec<String>>,
    /// What is delivered.
    delivered: ArcSet,
    /// A narrowing whose plugins are still busy with a key given up.
    pending: Option<Pending>,
    /// The last read came before the last publish.
    stale_read: bool,
    peers: HashMap<String, Peer>,
    /// The view last intended (what the caches sharded at the source
    /// prepare for).
    intended: Option<Vec<String>>,
}

/// A narrowing still waiting for the plugins.
struct Pending {
    /// Resolves once no plugin handles a key given up.
    wait: BoxFuture<'static, ()>,
    started: Instant,
    /// The wait outlasted its bound and the tenure was revoked: what is
    /// left is the drain of requests already sent.
    revoked: bool,
}

/// One replica in a ring.
pub struct Member {
    config: MemberConfig,
    api: Api<Lease>,
    lock: LeaseLock,
    fence: Arc<Fence>,
    delivery: Arc<Delivery>,
    status: Arc<Mutex<RingStatus>>,
    sources: Option<Arc<ShardSources>>,
    st: State,
}

impl Member {
    /// A member holding `lock` (its own Lease) in the ring of `config`.
    pub fn new(
        config: MemberConfig,
        api: Api<Lease>,
        mut lock: LeaseLock,
        fence: Arc<Fence>,
        delivery: Arc<Delivery>,
        status: Arc<Mutex<RingStatus>>,
        sources: Option<Arc<ShardSources>>,
    ) -> Self {
        lock.set_annotation(VIEW_ANNOTATION, None);
        lock.set_annotation(VNODES_ANNOTATION, Some(config.virtual_nodes.to_string()));
        Self {
            config,
            api,
            lock,
            fence,
            delivery,
            status,
            sources,
            st: State {
                held: false,
                last_ok: Instant::now(),
                published: None,
                writing: None,
                delivered: ArcSet::empty(),
                pending: None,
                stale_read: true,
                peers: HashMap::new(),
                intended: None,
            },
        }
    }

    fn ring(&self, view: &[String]) -> Ring {
        Ring::new(view, self.config.virtual_nodes)
    }

    fn mine(&self, view: &[String]) -> ArcSet {
        self.ring(view).arcs_of(&self.config.name)
    }

    /// Delivers `arcs` (must be within the arcs of every view claimed).
    fn deliver(&mut self, arcs: ArcSet) {
        if arcs == self.st.delivered {
            return;
        }
        let narrowing = !arcs.contains_set(&self.st.delivered);
        let (handover, started) = self.delivery.apply(Share::Arcs(arcs.clone()));
        self.st.delivered = arcs;
        self.retarget();
        if narrowing && handover.is_waiting() {
            let delivery = self.delivery.clone();
            self.st.pending = Some(Pending {
                wait: Box::pin(async move {
                    handover.finished().await;
                    delivery.finished(started);
                }),
                started,
                revoked: false,
            });
        } else {
            self.delivery.finished(started);
        }
    }

    /// Points the caches sharded at the source at what this replica
    /// delivers and what it owns under the view it intends: gained arcs are
    /// listed before they are delivered, and no delivered arc is evicted.
    fn retarget(&self) {
        let Some(sources) = &self.sources else {
            return;
        };
        let intended = self
            .st
            .intended
            .as_deref()
            .map(|v| self.mine(v))
            .unwrap_or_default();
        sources.set_target(self.st.delivered.union(&intended));
    }

    /// What every cache sharded at the source holds completely (the whole
    /// ring when none is).
    fn covered(&self) -> ArcSet {
        self.sources
            .as_ref()
            .map_or_else(ArcSet::full, |s| s.covered())
    }

    /// One renewal (also the way a view is published), bounded in time.
    async fn renew(&mut self) {
        let t = self.config.timing;
        let limit = if self.st.held {
            (self.st.last_ok + t.renew_deadline)
                .saturating_duration_since(Instant::now())
                .min(t.retry_period)
        } else {
            t.retry_period
        };
        let writing = self.st.writing.clone();
        self.lock
            .set_annotation(VIEW_ANNOTATION, writing.as_ref().map(|v| v.join(",")));
        let outcome = if limit.is_zero() {
            Attempt::Failed("renew deadline passed".into())
        } else {
            match tokio::time::timeout(limit, self.lock.try_acquire_or_renew()).await {
                Ok(a) => a,
                Err(_) => Attempt::Failed(format!("no answer within {} ms", limit.as_millis())),
            }
        };
        match outcome {
            Attempt::Held { sent, .. } => {
                self.fence.renewed(sent);
                self.st.last_ok = sent;
                if !self.st.held {
                    tracing::info!(ring = %self.config.ring, member = %self.config.name, "holding the shard lease");
                }
                self.st.held = true;
                if self.st.published != writing {
                    self.st.published = writing;
                    self.st.stale_read = true;
                }
                self.status.lock().last_error = None;
            }
            Attempt::Taken { holder, .. } => {
                self.failed(format!("the shard lease is held by {holder}"));
            }
            Attempt::Failed(err) => self.failed(err),
        }
    }

    fn failed(&mut self, err: String) {
        tracing::debug!(member = %self.config.name, error = %err, "shard lease renewal failed");
        self.status.lock().last_error = Some(err.clone());
        let deadline = self.st.last_ok + self.config.timing.renew_deadline;
        if self.st.held && Instant::now() >= deadline {
            self.lose(err);
        }
    }

    /// The lease is lost: fence, then delivery, then the claim.
    fn lose(&mut self, why: String) {
        self.fence.close();
        tracing::warn!(ring = %self.config.ring, member = %self.config.name, reason = %why, "lost the shard lease; delivering nothing");
        self.st.held = false;
        self.st.pending = None;
        self.deliver(ArcSet::empty());
        self.st.published = None;
        self.st.writing = None;
    }

    /// Reads the ring's Leases; false when the read failed.
    async fn read(&mut self) -> bool {
        let lp = ListParams::default().labels(&format!("{RING_LABEL}={}", self.config.ring));
        let limit = self.config.timing.retry_period;
        let list = match tokio::time::timeout(limit, self.api.list(&lp)).await {
            Ok(Ok(l)) => l,
            Ok(Err(e)) => {
                self.status.lock().last_error = Some(format!("listing the ring's leases: {e}"));
                return false;
            }
            Err(_) => return false,
        };
        let now = Instant::now();
        let mut peers = HashMap::new();
        for lease in list.items {
            let Some(name) = lease.metadata.name.clone() else {
                continue;
            };
            if name == self.config.name {
                continue;
            }
            let observation = Observation::of(
                &lease,
                self.st.peers.get(&name).map(|p| &p.observation),
                now,
            );
            let (view, vnodes) = view_of(&lease);
            let orphaned =
                now >= observation.expires(self.config.timing.lease_duration) + ORPHAN_AFTER;
            if orphaned {
                collect_orphan(&self.api, &self.config, &name, &lease).await;
            }
            peers.insert(
                name,
                Peer {
                    observation,
                    view,
                    vnodes,
                },
            );
        }
        // Leases deleted while they still claimed arcs stay until they
        // expire (see `claims_until_expiry`).
        for (name, p) in std::mem::take(&mut self.st.peers) {
            if !peers.contains_key(&name) && self.claims_until_expiry(&p, now) {
                peers.insert(name, p);
            }
        }
        self.st.peers = peers;
        self.st.stale_read = false;
        true
    }

    /// Whether a peer whose Lease is gone still counts as claiming its arcs:
    /// it was live and claimed some when last seen, and its lease has not
    /// expired since. A deletion says nothing to the holder (a replica
    /// withdraws its claim before it deletes its own Lease), which goes on
    /// delivering until its next renewal.
    fn claims_until_expiry(&self, p: &Peer, now: Instant) -> bool {
        p.observation.holder.is_some()
            && !p.view.is_empty()
            && now < p.observation.expires(self.config.timing.lease_duration)
    }

    /// Records what the watch saw; returns whether membership or a claim
    /// changed (so that a read and a coordination step are due).
    fn seen(&mut self, seen: Seen) -> bool {
        let now = Instant::now();
        match seen {
            Seen::Gone(name) => {
                let keep = self
                    .st
                    .peers
                    .get(&name)
                    .is_some_and(|p| self.claims_until_expiry(p, now));
                // Deleted while it still claimed arcs (by an operator, not by
                // its holder, which withdraws its claim first): kept until
                // its lease expires, as if it were unchanged.
                !keep && self.st.peers.remove(&name).is_some()
            }
            Seen::Upsert(lease) => {
                let Some(name) = lease.metadata.name.clone() else {
                    return false;
                };
                if name == self.config.name {
                    return false;
                }
                let previous = self.st.peers.get(&name);
                let was_live = previous.is_some_and(|p| {
                    p.observation.holder.is_some()
                        && now < p.observation.expires(self.config.timing.lease_duration)
                });
                let old_view = previous.map(|p| p.view.clone());
                let observation = Observation::of(&lease, previous.map(|p| &p.observation), now);
                let (view, vnodes) = view_of(&lease);
                let changed =
                    !was_live || observation.holder.is_none() || old_view.as_ref() != Some(&view);
                self.st.peers.insert(
                    name,
                    Peer {
                        observation,
                        view,
                        vnodes,
                    },
                );
                changed
            }
        }
    }

    /// Live peers (holder set, not expired for us), with their claims.
    fn live_peers(&self, now: Instant) -> BTreeMap<&str, &Peer> {
        let l = self.config.timing.lease_duration;
        self.st
            .peers
            .iter()
            .filter(|(_, p)| p.observation.holder.is_some() && now < p.observation.expires(l))
            .map(|(n, p)| (n.as_str(), p))
            .collect()
    }

    /// A plugin still handles a key given up a lease duration after the
    /// narrowing (it is in backoff, in quarantine, or stuck): the wait ends.
    /// Every call begun before now may write nothing more (the fence's
    /// tenure is revoked), and the hand-over goes on once no request they
    /// sent can still be applied. The plugin's wait goes on in the
    /// background, and the delivery stays reported in transition until it
    /// ends.
    fn stop_waiting(&mut self, bound: Duration) {
        let Some(p) = self.st.pending.take() else {
            return;
        };
        let drained = self.fence.revoke();
        tracing::warn!(
            ring = %self.config.ring,
            member = %self.config.name,
            waited_ms = bound.as_millis() as u64,
            "a plugin still handles a key this replica gave up; its calls in flight may write nothing more, and the hand-over goes on"
        );
        tokio::spawn(p.wait);
        self.st.pending = drained.map(|at| Pending {
            wait: Box::pin(tokio::time::sleep_until(at.into())),
            started: Instant::now(),
            revoked: true,
        });
    }

    /// Steps 1-3 of the protocol, after a read.
    async fn coordinate(&mut self) {
        if !self.st.held || self.st.pending.is_some() {
            return;
        }
        let now = Instant::now();
        let mut intended: Vec<String> =
            self.live_peers(now).keys().map(|s| s.to_string()).collect();
        intended.push(self.config.name.clone());
        intended.sort();
        intended.dedup();
        if self.st.intended.as_ref() != Some(&intended) {
            self.st.intended = Some(intended.clone());
            self.retarget();
        }
        if self.st.published.as_ref() != Some(&intended)
            || self.st.writing.as_ref() != Some(&intended)
        {
            // Narrow to what is ours under both views, then publish.
            let keep = self.st.delivered.intersect(&self.mine(&intended));
            self.deliver(keep);
            if self.st.pending.is_some() {
                return;
            }
            tracing::info!(ring = %self.config.ring, member = %self.config.name, view = %intended.join(","), "publishing shard view");
            self.st.writing = Some(intended);
            self.renew().await;
            if self.st.stale_read && !self.read().await {
                return;
            }
        }
        let Some(published) = self.st.published.clone() else {
            return;
        };
        if self.st.writing.as_ref() != Some(&published) || self.st.stale_read {
            return;
        }
        // Widen into what is ours and claimed by no live peer.
        let now = Instant::now();
        let mut claimed = ArcSet::empty();
        for (name, peer) in self.live_peers(now) {
            claimed = claimed.union(&peer.claim(name));
        }
        // Only what the caches hold: a gained arc is delivered once listed.
        let free = self
            .mine(&published)
            .subtract(&claimed)
            .intersect(&self.covered());
        let target = self.st.delivered.union(&free);
        self.deliver(target);
    }

    fn update_status(&self) {
        let now = Instant::now();
        let mut members: Vec<String> = self.live_peers(now).keys().map(|s| s.to_string()).collect();
        if self.st.held {
            members.push(self.config.name.clone());
        }
        members.sort();
        let view = self.st.published.clone().unwrap_or_default();
        let full = !view.is_empty() && self.st.delivered == self.mine(&view);
        let mut s = self.status.lock();
        s.held = self.st.held;
        s.settling = self.st.held && (members != view || !full || self.st.pending.is_some());
        s.members = members;
        s.view = view;
    }

    /// When the next read is due: a retry period on, or the moment a live
    /// peer's lease expires, whichever comes first.
    fn next_read(&self, now: Instant) -> Instant {
        let l = self.config.timing.lease_duration;
        let mut at = now + self.config.timing.retry_period;
        for p in self.live_peers(now).values() {
            // Just after expiry, so that the peer reads as expired.
            at = at.min(p.observation.expires(l) + Duration::from_millis(1));
        }
        at
    }

    /// Runs until `stop` turns true; returns the lock for the caller to delete
    /// once the plugins have drained.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) -> LeaseLock {
        let t = self.config.timing;
        let mut next_renew = Instant::now();
        let mut next_read = Instant::now();
        let (tx, mut seen) = mpsc::unbounded_channel();
        let watcher = tokio::spawn(watch_ring(
            self.api.clone(),
            format!("{RING_LABEL}={}", self.config.ring),
            tx,
            t.retry_period,
        ));
        let _stop_watcher = AbortOnDrop(watcher);
        let mut coverage = self.sources.as_ref().map(|s| s.changed());
        loop {
            self.update_status();
            let bound = t.lease_duration;
            let pending = async {
                match self.st.pending.as_mut() {
                    Some(p) if !p.revoked => {
                        tokio::select! {
                            _ = p.wait.as_mut() => true,
                            _ = tokio::time::sleep_until((p.started + bound).into()) => false,
                        }
                    }
                    Some(p) => {
                        p.wait.as_mut().await;
                        true
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = stop.changed() => {}
                _ = tokio::time::sleep_until(next_renew.into()) => {
                    self.renew().await;
                    next_renew = if self.st.held {
                        (Instant::now() + t.retry_period).min(self.st.last_ok + t.renew_deadline)
                    } else {
                        Instant::now() + t.retry_period
                    };
                    // A new holder reads (and claims) at once.
                    if self.st.held && self.st.published.is_none() {
                        next_read = Instant::now();
                    }
                    continue;
                }
                finished = pending => {
                    if finished {
                        self.st.pending = None;
                    } else {
                        self.stop_waiting(bound);
                    }
                    next_read = Instant::now();
                    continue;
                }
                // A cache sharded at the source covers more: read, then
                // widen into it.
                Ok(()) = async {
                    match coverage.as_mut() {
                        Some(rx) => rx.changed().await,
                        None => std::future::pending().await,
                    }
                } => {
                    next_read = Instant::now();
                    continue;
                }
                Some(s) = seen.recv() => {
                    let now = Instant::now();
                    next_read = if self.seen(s) { now } else { next_read.min(self.next_read(now)) };
                    continue;
                }
                _ = tokio::time::sleep_until(next_read.into()) => {
                    if self.read().await {
                        self.coordinate().await;
                    }
                    next_read = self.next_read(Instant::now());
                    continue;
                }
            }
            if *stop.borrow() {
                return self.lock;
            }
        }
    }
}

/// Deletes a ring Lease that has expired (its replica died without deleting
/// it), if it is still the version read.
async fn collect_orphan(api: &Api<Lease>, config: &MemberConfig, name: &str, lease: &Lease) {
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            resource_version: lease.metadata.resource_version.clone(),
            uid: None,
        }),
        ..DeleteParams::default()
    };
    let r = tokio::time::timeout(config.timing.retry_period, api.delete(name, &dp)).await;
    if let Ok(Ok(_)) = r {
        tracing::info!(ring = %config.ring, lease = %name, "deleted an orphaned shard lease");
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
