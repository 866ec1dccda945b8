//! The cluster layer: how several replicas of the host share the work, on
//! `coordination.k8s.io/v1` Leases (`[cluster]` in host.toml).
//!
//! Job: resolve this replica's identity, run leader election
//! ([`elector`]) or ring membership ([`membership`]), and turn the outcome
//! into what the plugins receive ([`delivery`]): everything for the leader,
//! nothing for a standby, a share of a consistent-hash ring ([`ring`],
//! [`shard`]) for a ring member. Every replica keeps its informers synced
//! whatever its role, and only delivery to plugins is gated, except that a
//! ring member's informers of resources placed by `uid` or `namespace` list
//! and watch only the arcs it owns or is about to ([`source`]). The [`fence`]
//! tells the write path whether this replica may still act.
//!
//! Invariants:
//! - I10, one writer per key: at most one live replica delivers a key at any
//!   moment (see [`membership`] for the argument); a replica that cannot show
//!   it still holds its lease closes its fence, then stops delivering, before
//!   its lease can expire for the others.
//! - Shutdown order: fence shut, delivery narrowed to nothing and waited for,
//!   then (after the host drained its plugins) the lease released (leader) or
//!   its claim withdrawn and the lease deleted (sharded).

pub mod delivery;
pub mod elector;
pub mod fence;
pub mod lease;
pub mod membership;
pub mod ring;
pub mod shard;
pub mod source;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube_informer::{InformerLease, InformerRegistry, Ownership};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::{ClusterMode, ClusterSettings, RESERVED_CONFIG_KEY};
use crate::report::ClusterReport;
use delivery::{Delivery, Share};
use elector::{Election, Elector};
use fence::Fence;
use lease::LeaseLock;
use membership::{Member, MemberConfig, RingStatus, RING_LABEL};
use shard::{Kinds, Placement};
use source::ShardSources;

/// This replica's identity: `--identity`, else the `POD_NAME` environment
/// variable (the downward API), else the host name and the process id, so that
/// several processes on one machine differ.
pub fn resolve_identity(flag: Option<&str>) -> String {
    if let Some(id) = flag.map(str::trim).filter(|s| !s.is_empty()) {
        return id.to_string();
    }
    if let Some(pod) = std::env::var("POD_NAME")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
    {
        return pod;
    }
    format!("{}-{}", hostname(), std::process::id())
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "wasm-informer".to_string())
}

/// A Lease name for `identity`: lower case, characters outside
/// `[a-z0-9.-]` replaced by `-`, trimmed to 253 and to alphanumeric ends.
/// An identity that had to be changed to become a name gets the first eight
/// hex digits of its hash appended, so that two identities share a Lease name
/// only if they are equal (`Replica_A` and `replica-a` do not collide). An
/// identity that is already a valid name (a pod name) is its own Lease name.
pub fn lease_name_for(identity: &str) -> String {
    let base = normalised_name(identity);
    if base == identity {
        return base;
    }
    let suffix = format!("{:08x}", ring::hash(identity.as_bytes()) >> 32);
    let mut base = base;
    base.truncate(253 - suffix.len() - 1);
    let base = base.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    if base.is_empty() {
        format!("wasm-informer-{suffix}")
    } else {
        format!("{base}-{suffix}")
    }
}

fn normalised_name(identity: &str) -> String {
    let mut s: String = identity
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    s.truncate(253);
    let s = s.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if s.is_empty() {
        "wasm-informer".to_string()
    } else {
        s.to_string()
    }
}

/// The namespace of the Leases: `[cluster] namespace`, else `POD_NAMESPACE`,
/// else `default`.
fn lease_namespace(settings: &ClusterSettings) -> String {
    settings
        .namespace
        .clone()
        .or_else(|| {
            std::env::var("POD_NAMESPACE")
                .ok()
                .filter(|s| !s.trim().is_empty())
        })
        .unwrap_or_else(|| "default".to_string())
}

/// This replica's part in a cluster.
pub struct Cluster {
    settings: ClusterSettings,
    identity: String,
    /// Leader mode: the election Lease; sharded: this replica's Lease.
    lease: String,
    namespace: String,
    client: kube::Client,
    fence: Arc<Fence>,
    delivery: Arc<Delivery>,
    placement: Arc<Placement>,
    /// Sharded mode with resources placed by uid or namespace.
    sources: Option<Arc<ShardSources>>,
    election: Mutex<Option<watch::Receiver<Election>>>,
    ring: Arc<Mutex<RingStatus>>,
    stop: watch::Sender<bool>,
    task: tokio::sync::Mutex<Option<JoinHandle<LeaseLock>>>,
    follower: Mutex<Option<JoinHandle<()>>>,
    stopped: Mutex<bool>,
    started: Instant,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("mode", &self.settings.mode)
            .field("identity", &self.identity)
            .finish()
    }
}

impl Cluster {
    /// The cluster layer for `settings` (mode `leader` or `sharded`; `None`
    /// for mode `none`), as `identity`, talking to the API through `client`.
    pub fn new(
        settings: &ClusterSettings,
        identity: String,
        client: kube::Client,
    ) -> Option<Arc<Self>> {
        if settings.mode == ClusterMode::None {
            return None;
        }
        let timing = settings.timing();
        let lease = match settings.mode {
            ClusterMode::Sharded => lease_name_for(&identity),
            _ => settings.lease_name.clone(),
        };
        let (stop, _) = watch::channel(false);
        let placement = Arc::new(Placement::of_settings(settings));
        let sources = (settings.mode == ClusterMode::Sharded && placement.shards_at_source())
            .then(|| ShardSources::new(placement.clone()));
        Some(Arc::new(Self {
            settings: settings.clone(),
            lease,
            namespace: lease_namespace(settings),
            client,
            fence: Fence::new(timing.lease_duration, timing.skew_margin),
            delivery: Delivery::new(Kinds::new(), placement.clone()),
            placement,
            sources,
            election: Mutex::new(None),
            ring: Arc::new(Mutex::new(RingStatus::default())),
            stop,
            task: tokio::sync::Mutex::new(None),
            follower: Mutex::new(None),
            stopped: Mutex::new(false),
            started: Instant::now(),
            identity,
        }))
    }

    /// The mode.
    pub fn mode(&self) -> ClusterMode {
        self.settings.mode
    }

    /// This replica's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The namespace of the host's Leases (no plugin may write Leases there).
    pub fn lease_namespace(&self) -> &str {
        &self.namespace
    }

    /// The fence the write path consults ([`Fence::check`]).
    pub fn fence(&self) -> &Arc<Fence> {
        &self.fence
    }

    /// The predicate every plugin listener must be registered with.
    pub fn ownership(&self) -> &Arc<Ownership> {
        self.delivery.ownership()
    }

    /// Resolves `resource` through `registry` (discovery, for resources
    /// outside the built-in table) and records its group and kind, which
    /// sharding hashes objects with. Call it before subscribing a plugin to
    /// `resource`; until then, no replica delivers its objects. Keep the
    /// returned lease until the plugin is subscribed, so that the informer is
    /// not stopped and started again in between.
    pub async fn learn_resource(
        &self,
        registry: &Arc<InformerRegistry>,
        resource: &str,
    ) -> Option<InformerLease> {
        let lease = registry.acquire(resource).await.ok()?;
        let spec = lease.informer().spec();
        self.delivery
            .learn_kind(&spec.id_string(), &spec.id.group, &spec.kind);
        if spec.id_string() != resource {
            self.delivery
                .learn_kind(resource, &spec.id.group, &spec.kind);
        }
        Some(lease)
    }

    /// Makes `registry`'s informers of resources placed by uid or
    /// namespace list and watch this replica's ranges only. Call it before
    /// the first informer starts.
    pub fn shard_at_source(&self, registry: &InformerRegistry) {
        if let Some(s) = &self.sources {
            registry.set_source_sharding(s.clone());
        }
    }

    /// The informers sharded at the source, when any are.
    pub fn sources(&self) -> Option<&Arc<ShardSources>> {
        self.sources.as_ref()
    }

    /// Refuses a controller whose keys the placement cannot route (see
    /// [`Placement::check_controller`]); any controller passes outside
    /// sharded mode.
    pub fn check_controller(
        &self,
        primary: &str,
        owns: &[String],
        watches: &[String],
    ) -> Result<(), String> {
        if self.settings.mode != ClusterMode::Sharded {
            return Ok(());
        }
        self.placement.check_controller(primary, owns, watches)
    }

    fn api(&self) -> Api<Lease> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Starts the election or the membership. Until this replica leads (or
    /// has claimed its share), the plugins receive nothing.
    pub fn start(self: &Arc<Self>, registry: &Arc<InformerRegistry>) {
        self.delivery.attach(registry);
        let timing = self.settings.timing();
        let stop = self.stop.subscribe();
        match self.settings.mode {
            ClusterMode::None => {}
            ClusterMode::Leader => {
                let lock = LeaseLock::new(
                    self.api(),
                    self.lease.clone(),
                    self.identity.clone(),
                    timing.lease_duration,
                    BTreeMap::new(),
                );
                let (elector, mut rx) = Elector::new(lock, timing, self.fence.clone());
                *self.election.lock() = Some(rx.clone());
                let delivery = self.delivery.clone();
                let bound = timing.lease_duration;
                // Follow the role: everything while leading, nothing otherwise.
                // The wait for the previous role's handlers is bounded: the
                // fence closed before the role changed, and a handler begun
                // under the lost tenure may not write under the next one.
                let follower = tokio::spawn(async move {
                    loop {
                        let leader = rx.borrow_and_update().leader;
                        let share = if leader {
                            Share::Everything
                        } else {
                            Share::Nothing
                        };
                        delivery.apply_and_wait_at_most(share, bound).await;
                        if rx.changed().await.is_err() {
                            return;
                        }
                    }
                });
                *self.follower.lock() = Some(follower);
                *self.task.try_lock().expect("not started twice") =
                    Some(tokio::spawn(elector.run(stop)));
            }
            ClusterMode::Sharded => {
                let mut labels = BTreeMap::new();
                labels.insert(RING_LABEL.to_string(), self.settings.ring.clone());
                let lock = LeaseLock::new(
                    self.api(),
                    self.lease.clone(),
                    self.identity.clone(),
                    timing.lease_duration,
                    labels,
                );
                let member = Member::new(
                    MemberConfig {
                        ring: self.settings.ring.clone(),
                        name: self.lease.clone(),
                        virtual_nodes: self.settings.virtual_nodes,
                        timing,
                    },
                    self.api(),
                    lock,
                    self.fence.clone(),
                    self.delivery.clone(),
                    self.ring.clone(),
                    self.sources.clone(),
                );
                *self.task.try_lock().expect("not started twice") =
                    Some(tokio::spawn(member.run(stop)));
            }
        }
        tracing::info!(
            mode = self.settings.mode.as_str(),
            identity = %self.identity,
            namespace = %self.namespace,
            lease = %self.lease,
            "cluster layer started"
        );
    }

    /// Waits until this replica's first attempt at its lease has an outcome
    /// (held, held by another replica, or failed), for at most `max`; true
    /// if it has. Plugins loaded at start-up wait for it, so that a leader's
    /// (or a shard holder's) `init` begins in its first tenure and its writes
    /// are sent, while a standby's are refused as any standby write is.
    pub async fn first_outcome(&self, max: Duration) -> bool {
        let until = Instant::now() + max;
        loop {
            if self.decided() {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn decided(&self) -> bool {
        match self.settings.mode {
            ClusterMode::None => true,
            ClusterMode::Leader => self.election.lock().as_ref().is_some_and(|rx| {
                let e = rx.borrow();
                e.leader || e.holder.is_some() || e.last_error.is_some()
            }),
            ClusterMode::Sharded => {
                let r = self.ring.lock();
                r.held || r.last_error.is_some()
            }
        }
    }

    /// What a plugin's `init` receives: its manifest's `[config]` plus, under
    /// the reserved key [`RESERVED_CONFIG_KEY`], this replica's identity and
    /// shard.
    pub fn plugin_config(&self, config_json: &str) -> String {
        let mut map: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(config_json).unwrap_or_default();
        let mut info = serde_json::json!({
            "identity": self.identity,
            "mode": self.settings.mode.as_str(),
            "namespace": self.namespace,
        });
        match self.settings.mode {
            ClusterMode::Sharded => {
                info["ring"] = self.settings.ring.clone().into();
                info["shard"] = self.lease.clone().into();
                // What places each resource: `uid` and `namespace` are
                // cached by shard, so cache queries see this replica's only.
                info["shard_by"] = self.settings.shard_by.as_str().into();
                info["shard_by_resource"] = self
                    .settings
                    .shard_by_resource
                    .iter()
                    .map(|(r, b)| (r.clone(), serde_json::Value::from(b.as_str())))
                    .collect::<serde_json::Map<_, _>>()
                    .into();
            }
            _ => info["lease"] = self.lease.clone().into(),
        }
        map.insert(RESERVED_CONFIG_KEY.to_string(), info);
        serde_json::Value::Object(map).to_string()
    }

    /// Stops delivering, for shutdown: shuts the fence, stops the election or
    /// membership from changing what is delivered, narrows delivery to nothing
    /// and waits until no plugin handles an event, for at most a lease
    /// duration (the fence refuses whatever a later handler would write). The lease is still held
    /// (leader) or still present (sharded): [`Cluster::release`] gives it up.
    pub async fn stop_delivery(&self) {
        if std::mem::replace(&mut *self.stopped.lock(), true) {
            return;
        }
        self.fence.shut();
        self.delivery.seal();
        let follower = self.follower.lock().take();
        if let Some(f) = follower {
            f.abort();
            let _ = f.await;
        }
        // Bounded: the fence is shut, so a handler that outlives the wait
        // cannot write, and shutdown must not outlast the pod's grace.
        let bound = self.settings.timing().lease_duration;
        self.delivery
            .apply_and_wait_at_most(Share::Nothing, bound)
            .await;
    }

    /// Gives the lease up, after the plugins drained: a leader releases the
    /// election Lease (a standby takes it at its next attempt), a ring member
    /// deletes its own Lease (its peers take its share at their next read).
    pub async fn release(&self) {
        self.stop_delivery().await;
        let _ = self.stop.send(true);
        let Some(task) = self.task.lock().await.take() else {
            return;
        };
        let Ok(mut lock) = task.await else { return };
        let limit = self
            .settings
            .timing()
            .retry_period
            .max(std::time::Duration::from_secs(1));
        let done = match self.settings.mode {
            ClusterMode::Sharded => {
                // Withdraw the claim first (a renewal without a view): peers
                // keep the claim of a Lease that merely disappears until it
                // expires, but take arcs withdrawn this way at once.
                if lock.observed_holder().as_deref() == Some(lock.identity()) {
                    lock.set_annotation(membership::VIEW_ANNOTATION, None);
                    let _ = tokio::time::timeout(limit, lock.try_acquire_or_renew()).await;
                }
                tokio::time::timeout(limit, lock.delete()).await
            }
            _ => tokio::time::timeout(limit, lock.release()).await,
        };
        match done {
            Ok(Ok(true)) => tracing::info!(lease = %self.lease, "lease given up"),
            Ok(Ok(false)) => {}
            Ok(Err(e)) => {
                tracing::warn!(lease = %self.lease, error = %e, "cannot give the lease up")
            }
            Err(_) => tracing::warn!(lease = %self.lease, "giving the lease up timed out"),
        }
    }

    /// The role in words.
    fn role(&self) -> String {
        if *self.stopped.lock() {
            return "stopped".into();
        }
        match self.settings.mode {
            ClusterMode::Leader => {
                let leader = self
                    .election
                    .lock()
                    .as_ref()
                    .is_some_and(|e| e.borrow().leader);
                if leader { "leader" } else { "standby" }.into()
            }
            _ => {
                let r = self.ring.lock();
                if !r.held {
                    if self.started.elapsed() < self.settings.timing().lease_duration {
                        "joining".into()
                    } else {
                        "lost".into()
                    }
                } else if r.settling {
                    "settling".into()
                } else {
                    "member".into()
                }
            }
        }
    }

    /// This replica's line of the report.
    pub fn report(&self) -> ClusterReport {
        self.report_with(true)
    }

    /// The report, with the per-resource key counts (a pass over the
    /// caches) only when `with_keys`.
    fn report_with(&self, with_keys: bool) -> ClusterReport {
        let stats = self.delivery.stats();
        let mut r = ClusterReport {
            mode: self.settings.mode.as_str().into(),
            identity: self.identity.clone(),
            namespace: self.namespace.clone(),
            lease: self.lease.clone(),
            role: self.role(),
            owned_fraction: self.delivery.share().fraction(),
            shard_keys: if with_keys {
                self.delivery.shard_keys()
            } else {
                BTreeMap::new()
            },
            handovers: stats.handovers,
            keys_gained: stats.keys_gained,
            keys_released: stats.keys_released,
            last_handover_ms: stats.last_handover_ms,
            max_handover_ms: stats.max_handover_ms,
            in_transition: stats.in_transition,
            changed_at_unix_ms: stats.changed_at_unix_ms,
            fence_open: self.fence.permits(Instant::now()),
            ..ClusterReport::default()
        };
        match self.settings.mode {
            ClusterMode::Sharded => {
                let ring = self.ring.lock().clone();
                r.ring = Some(self.settings.ring.clone());
                r.members = ring.members;
                r.view = ring.view;
                r.in_transition |= ring.settling;
                r.last_error = ring.last_error;
                r.caches = self.caches();
            }
            _ => {
                if let Some(e) = self.election.lock().as_ref() {
                    let e = e.borrow();
                    r.leader = e.holder.clone();
                    r.leader_acquisitions = e.acquisitions;
                    r.last_error = e.last_error.clone();
                    r.members = e.holder.iter().cloned().collect();
                }
            }
        }
        r
    }

    /// Cached keys delivered now, by resource.
    pub fn owned_keys(&self) -> BTreeMap<String, Vec<String>> {
        self.delivery.owned_keys()
    }

    /// Every cached key, by resource (a sharded cache holds its shard only).
    pub fn cached_keys(&self) -> BTreeMap<String, Vec<String>> {
        self.delivery.cached_keys()
    }

    /// Why this replica is not ready, as far as the cluster layer is
    /// concerned. A standby is ready (it is warm and can take over); a ring
    /// member is ready once it holds its lease.
    pub fn not_ready(&self) -> Vec<String> {
        match self.settings.mode {
            ClusterMode::Sharded if !*self.stopped.lock() && !self.ring.lock().held => {
                let ring = self.ring.lock();
                match &ring.last_error {
                    Some(e) => vec![format!("shard lease {} is not held: {e}", self.lease)],
                    None => vec![format!("shard lease {} is not held", self.lease)],
                }
            }
            _ => Vec::new(),
        }
    }

    /// Each running informer's cache, as `/cluster` shows it.
    fn caches(&self) -> BTreeMap<String, crate::report::ClusterCache> {
        let Some(registry) = self.delivery.registry() else {
            return BTreeMap::new();
        };
        registry
            .resources()
            .into_iter()
            .filter_map(|r| {
                let i = registry.informer(&r)?;
                let source = i
                    .source_shard()
                    .map(|s| crate::report::SourceShardReport::of(&s.status()));
                Some((
                    r.clone(),
                    crate::report::ClusterCache {
                        shard_by: self.placement.of(&r).as_str().into(),
                        objects: i.indexer().len() as u64,
                        source,
                    },
                ))
            })
            .collect()
    }

    /// Lines for `/readyz`: role, lease, shard, and each cache.
    pub fn status_lines(&self) -> Vec<String> {
        let r = self.report_with(false);
        let mut out = vec![
            format!("mode: {}", r.mode),
            format!("identity: {}", r.identity),
            format!("role: {}", r.role),
        ];
        match self.settings.mode {
            ClusterMode::Sharded => {
                out.push(format!(
                    "ring: {} ({})",
                    self.settings.ring,
                    r.members.join(",")
                ));
                out.push(format!(
                    "shard: {} owns {:.3} of the ring",
                    r.lease, r.owned_fraction
                ));
                for (res, c) in &r.caches {
                    out.push(match &c.source {
                        Some(s) => format!(
                            "cache {res}: {} objects, by {}, {:.3} of the space asked, {:.3} covered, filtered by the {}",
                            c.objects, s.shard_by, s.target_fraction, s.covered_fraction, s.filtering
                        ),
                        None => format!("cache {res}: {} objects, in full (by {})", c.objects, c.shard_by),
                    });
                }
            }
            _ => out.push(format!(
                "leader: {}",
                r.leader.as_deref().unwrap_or("(none seen)")
            )),
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_prefers_the_flag_then_pod_name_then_host_and_pid() {
        assert_eq!(resolve_identity(Some(" web-0 ")), "web-0");
        // POD_NAME is read from the environment; the fallback has the pid.
        if std::env::var_os("POD_NAME").is_none() {
            let id = resolve_identity(None);
            assert!(id.ends_with(&format!("-{}", std::process::id())), "{id}");
        }
    }

    /// The API server's rule for a DNS subdomain (a Lease's name).
    fn is_subdomain(n: &str) -> bool {
        let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        !n.is_empty()
            && n.len() <= 253
            && n.chars().all(|c| alnum(c) || c == '-' || c == '.')
            && n.starts_with(alnum)
            && n.ends_with(alnum)
    }

    #[test]
    fn lease_names_are_valid_subdomains() {
        let long = "a".repeat(300);
        for id in ["Web_0.Example", "--x--", "___", long.as_str(), "web-0", "x"] {
            let n = lease_name_for(id);
            assert!(is_subdomain(&n), "{id:?} -> {n:?}");
        }
        assert_eq!(lease_name_for("web-0"), "web-0", "a pod name is its own");
        assert!(lease_name_for("Web_0.Example").starts_with("web-0.example-"));
        assert_eq!(lease_name_for(&long).len(), 253);
    }

    #[test]
    fn identities_that_normalise_alike_get_distinct_lease_names() {
        let ids = [
            "Replica_A",
            "replica-a",
            "REPLICA-A",
            "replica_a",
            "replica-a-",
        ];
        let names: std::collections::BTreeSet<String> =
            ids.iter().map(|i| lease_name_for(i)).collect();
        assert_eq!(names.len(), ids.len(), "{names:?}");
        assert_eq!(lease_name_for("Replica_A"), lease_name_for("Replica_A"));
    }
}
