//! A Lease lock with client-go's semantics (`tools/leaderelection`, its Lease
//! resource lock), over kube-client and k8s-openapi's
//! `coordination.k8s.io/v1` Lease.
//!
//! Job: read, create, renew, release and delete one Lease, and judge whether
//! a lease held by someone else has expired the way client-go does: a lease
//! is expired once its record has gone unchanged for a whole lease duration,
//! timed on this process's monotonic clock from the moment the change was
//! *observed*. `renewTime` is written for people and other tools; it is never
//! compared with this clock, so clock offsets between nodes do not matter.
//!
//! A lease is held by a *process*, not only by an identity: every record
//! this process writes carries [`INSTANCE_ANNOTATION`], a token drawn when the
//! process starts. A record with this process's identity but another token was
//! written by another process under the same identity (a second replica
//! configured with it, or an earlier run of this one): it is treated like any
//! other holder's, and taken over only once it has expired. So two processes
//! with one identity never both hold the lease, and a restarted replica waits
//! for its previous run's lease to expire, as it must, since it cannot tell a
//! dead predecessor from a live duplicate.
//!
//! A Lease that disappears is not free: its holder may still be acting under
//! it until its renew deadline. A lock that has seen the Lease held by another
//! process and then finds it missing waits a whole lease duration from the
//! moment it first saw it missing before it creates it again (the holder's
//! last renewal was sent before the deletion, so its fence closed by then).
//! Only the process that held it may create it again at once.
//!
//! Invariants:
//! - Every write is conditional on the resourceVersion last read or written
//!   (optimistic concurrency): of two replicas racing for an expired lease,
//!   one wins and the other gets a conflict.
//! - This process renews, releases or deletes only a record that carries its
//!   own instance token.
//! - [`Attempt::Held`] is returned only after the API server accepted the
//!   write, and carries the instant taken before the attempt's first request,
//!   which is what the [`super::fence::Fence`] counts from.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, DeleteParams, PostParams, Preconditions};

/// client-go's jitter factor: the renew deadline must exceed 1.2 retry periods.
pub const JITTER_FACTOR: f64 = 1.2;

/// The annotation that names the process holding a Lease (see the module doc).
pub const INSTANCE_ANNOTATION: &str = "wasm-informer.dev/instance";

/// This process's instance token: random, drawn once per process.
pub fn process_instance() -> &'static str {
    static INSTANCE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    INSTANCE.get_or_init(|| {
        // The standard library's per-process random hash keys, mixed with the
        // pid and the start time: distinct between processes, no new crate.
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos(),
        );
        format!("{:016x}", h.finish())
    })
}

/// The instance token of a Lease record, if any.
pub fn instance(lease: &Lease) -> Option<&str> {
    lease
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(INSTANCE_ANNOTATION))
        .map(String::as_str)
}

/// The three durations of client-go's leader election, plus our fence margin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long others wait, after observing the last renewal, before taking
    /// the lease over.
    pub lease_duration: Duration,
    /// How long the holder keeps retrying a renewal before it gives up.
    pub renew_deadline: Duration,
    /// Time between attempts.
    pub retry_period: Duration,
    /// Taken off the fence's deadline against clock-rate differences.
    pub skew_margin: Duration,
}

impl Default for Timing {
    /// kube-controller-manager's and controller-runtime's 15 s / 10 s / 2 s,
    /// and a 1 s margin.
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            skew_margin: Duration::from_secs(1),
        }
    }
}

impl Timing {
    /// client-go's checks (`NewLeaderElector`), and the margin's: it must
    /// leave the fence open at least until the renew deadline.
    pub fn validate(&self) -> Result<(), String> {
        let ms = |d: Duration| d.as_millis();
        if self.lease_duration.is_zero() {
            return Err("lease_duration_ms must be greater than zero".into());
        }
        if self.renew_deadline.is_zero() {
            return Err("renew_deadline_ms must be greater than zero".into());
        }
        if self.retry_period.is_zero() {
            return Err("retry_period_ms must be greater than zero".into());
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(format!(
                "lease_duration_ms ({}) must be greater than renew_deadline_ms ({})",
                ms(self.lease_duration),
                ms(self.renew_deadline)
            ));
        }
        let jittered = self.retry_period.mul_f64(JITTER_FACTOR);
        if self.renew_deadline <= jittered {
            return Err(format!(
                "renew_deadline_ms ({}) must be greater than {JITTER_FACTOR} x retry_period_ms ({} x {JITTER_FACTOR} = {})",
                ms(self.renew_deadline),
                ms(self.retry_period),
                ms(jittered)
            ));
        }
        if self.skew_margin > self.lease_duration - self.renew_deadline {
            return Err(format!(
                "clock_skew_margin_ms ({}) must not exceed lease_duration_ms - renew_deadline_ms ({})",
                ms(self.skew_margin),
                ms(self.lease_duration - self.renew_deadline)
            ));
        }
        Ok(())
    }
}

/// When this process last saw a lease record change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// The record's resourceVersion (any write changes it).
    pub resource_version: String,
    /// The holder then, if any.
    pub holder: Option<String>,
    /// The record's own lease duration.
    pub record_duration: Duration,
    /// Local time of the observation.
    pub at: Instant,
}

impl Observation {
    /// Observes `lease` at `now`: keeps `previous`'s time if the record did
    /// not change.
    pub fn of(lease: &Lease, previous: Option<&Observation>, now: Instant) -> Observation {
        let rv = lease.metadata.resource_version.clone().unwrap_or_default();
        let at = match previous {
            Some(p) if p.resource_version == rv => p.at,
            _ => now,
        };
        Observation {
            resource_version: rv,
            holder: holder(lease),
            record_duration: record_duration(lease),
            at,
        }
    }

    /// When the lease expires for this process: the observation plus the
    /// longer of our lease duration and the record's.
    pub fn expires(&self, ours: Duration) -> Instant {
        self.at + ours.max(self.record_duration)
    }
}

/// The holder of a lease, if any.
pub fn holder(lease: &Lease) -> Option<String> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .filter(|h| !h.is_empty())
}

fn record_duration(lease: &Lease) -> Duration {
    let secs = lease
        .spec
        .as_ref()
        .and_then(|s| s.lease_duration_seconds)
        .unwrap_or(0)
        .max(0);
    Duration::from_secs(secs as u64)
}

fn now_micro() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// The outcome of one [`LeaseLock::try_acquire_or_renew`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// This process holds the lease; the write was sent no earlier than `sent`.
    Held {
        /// Taken before the attempt's first request.
        sent: Instant,
        /// The lease changed hands to us (or was created) by this attempt.
        acquired: bool,
    },
    /// Someone else holds it and it has not expired.
    Taken {
        /// The holder.
        holder: String,
        /// When it expires for us, unless its record changes before.
        expires: Instant,
    },
    /// The attempt failed (API error, conflict, timeout).
    Failed(String),
}

/// One Lease, as this process sees and writes it.
pub struct LeaseLock {
    api: Api<Lease>,
    name: String,
    identity: String,
    /// This process's token (see [`INSTANCE_ANNOTATION`]).
    instance: String,
    lease_duration: Duration,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, Option<String>>,
    /// The last version read or written.
    last: Option<Lease>,
    observed: Option<Observation>,
    /// When this process first found the Lease missing after it had seen
    /// another process hold it: it may not be created before a lease
    /// duration has passed since.
    missing_since: Option<Instant>,
}

impl std::fmt::Debug for LeaseLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseLock")
            .field("name", &self.name)
            .field("identity", &self.identity)
            .finish()
    }
}

fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

fn describe(what: &str, e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{what}: {} ({})", s.message, s.code),
        other => format!("{what}: {other}"),
    }
}

impl LeaseLock {
    /// The lock on Lease `name` held as `identity`, written with `labels`.
    pub fn new(
        api: Api<Lease>,
        name: impl Into<String>,
        identity: impl Into<String>,
        lease_duration: Duration,
        labels: BTreeMap<String, String>,
    ) -> Self {
        Self {
            api,
            name: name.into(),
            identity: identity.into(),
            instance: process_instance().to_string(),
            lease_duration,
            labels,
            annotations: BTreeMap::new(),
            last: None,
            observed: None,
            missing_since: None,
        }
    }

    /// The same lock as another process would hold it: with its own
    /// instance token (tests of two processes in one).
    pub fn with_instance(mut self, instance: impl Into<String>) -> Self {
        self.instance = instance.into();
        self
    }

    /// Whether `lease` was written by this process.
    fn is_mine(&self, lease: &Lease) -> bool {
        holder(lease).as_deref() == Some(self.identity.as_str())
            && instance(lease) == Some(self.instance.as_str())
    }

    /// Who holds `lease`, as a log line should name them.
    fn describe_holder(&self, lease: &Lease) -> Option<String> {
        let h = holder(lease)?;
        if h != self.identity || self.is_mine(lease) {
            return Some(h);
        }
        Some(format!(
            "{h} in another process (instance {}): an earlier run of this replica, whose lease will \
             expire, or a second process configured with this replica's identity, which needs its own",
            instance(lease).unwrap_or("unknown")
        ))
    }

    /// The Lease's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This process's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Sets (or, with `None`, removes) an annotation written with every
    /// following renewal.
    pub fn set_annotation(&mut self, key: &str, value: Option<String>) {
        self.annotations.insert(key.to_string(), value);
    }

    /// The holder last seen, if any.
    pub fn observed_holder(&self) -> Option<String> {
        self.observed.as_ref().and_then(|o| o.holder.clone())
    }

    /// The lease's transitions count, as last seen.
    pub fn transitions(&self) -> i32 {
        self.last
            .as_ref()
            .and_then(|l| l.spec.as_ref())
            .and_then(|s| s.lease_transitions)
            .unwrap_or(0)
    }

    fn seconds(&self) -> i32 {
        // The record holds whole seconds; round up so that nobody reading it
        // waits less than we do.
        self.lease_duration.as_millis().div_ceil(1000).max(1) as i32
    }

    fn apply_meta(&self, meta: &mut ObjectMeta) {
        let labels = meta.labels.get_or_insert_with(BTreeMap::new);
        for (k, v) in &self.labels {
            labels.insert(k.clone(), v.clone());
        }
        let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
        for (k, v) in &self.annotations {
            match v {
                Some(v) => {
                    annotations.insert(k.clone(), v.clone());
                }
                None => {
                    annotations.remove(k);
                }
            }
        }
    }

    /// Our record over `base` (the current object, or a new one).
    fn ours(&self, base: Option<&Lease>) -> Lease {
        let now = now_micro();
        let mut lease = base.cloned().unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..ObjectMeta::default()
            },
            spec: None,
        });
        let was_ours = self.is_mine(&lease);
        self.apply_meta(&mut lease.metadata);
        lease
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(INSTANCE_ANNOTATION.to_string(), self.instance.clone());
        let old = lease.spec.take().unwrap_or_default();
        let transitions = old.lease_transitions.unwrap_or(0);
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.seconds()),
            renew_time: Some(now.clone()),
            acquire_time: if was_ours {
                old.acquire_time.or(Some(now))
            } else {
                Some(now)
            },
            lease_transitions: Some(if was_ours || base.is_none() {
                transitions
            } else {
                transitions + 1
            }),
            ..old
        });
        lease
    }

    fn record_own(&mut self, lease: Lease) {
        self.observed = Some(Observation::of(&lease, None, Instant::now()));
        self.last = Some(lease);
    }

    /// client-go's `tryAcquireOrRenew`: creates the lease if it is missing,
    /// renews it if we hold it, takes it over if its holder is gone (record
    /// unchanged for a lease duration) or released it, and otherwise reports
    /// who holds it.
    pub async fn try_acquire_or_renew(&mut self) -> Attempt {
        let sent = Instant::now();
        // Holder's fast path: update the version we wrote last, without a GET.
        if let Some(cur) = self.last.clone().filter(|l| self.is_mine(l)) {
            let next = self.ours(Some(&cur));
            match self
                .api
                .replace(&self.name, &PostParams::default(), &next)
                .await
            {
                Ok(l) => {
                    self.record_own(l);
                    return Attempt::Held {
                        sent,
                        acquired: false,
                    };
                }
                Err(e) if matches!(api_code(&e), Some(409) | Some(404)) => {
                    // Someone else wrote it (or deleted it): read it again.
                    self.last = None;
                }
                Err(e) => return Attempt::Failed(describe("renewing the lease", &e)),
            }
        }
        let current = match self.api.get_opt(&self.name).await {
            Ok(c) => c,
            Err(e) => return Attempt::Failed(describe("reading the lease", &e)),
        };
        let Some(current) = current else {
            // Missing. If another process held it when we last looked, it
            // may still act until its renew deadline: wait a lease duration
            // from the moment we first found it missing.
            let seen_other = self
                .last
                .as_ref()
                .is_some_and(|l| holder(l).is_some() && !self.is_mine(l))
                || self.missing_since.is_some();
            if seen_other {
                let since = *self.missing_since.get_or_insert_with(Instant::now);
                let expires = since + self.lease_duration;
                if Instant::now() < expires {
                    let holder = self
                        .last
                        .as_ref()
                        .and_then(|l| self.describe_holder(l))
                        .unwrap_or_else(|| "nobody".into());
                    return Attempt::Taken {
                        holder: format!("{holder} (the Lease was deleted; it may still be acting)"),
                        expires,
                    };
                }
            }
            let fresh = self.ours(None);
            return match self.api.create(&PostParams::default(), &fresh).await {
                Ok(l) => {
                    self.missing_since = None;
                    self.record_own(l);
                    Attempt::Held {
                        sent,
                        acquired: true,
                    }
                }
                Err(e) => Attempt::Failed(describe("creating the lease", &e)),
            };
        };
        self.missing_since = None;
        let now = Instant::now();
        let observed = Observation::of(&current, self.observed.as_ref(), now);
        let expires = observed.expires(self.lease_duration);
        self.observed = Some(observed);
        self.last = Some(current.clone());
        let ours = self.is_mine(&current);
        if let Some(h) = self.describe_holder(&current).filter(|_| !ours) {
            if now < expires {
                return Attempt::Taken { holder: h, expires };
            }
        }
        let next = self.ours(Some(&current));
        match self
            .api
            .replace(&self.name, &PostParams::default(), &next)
            .await
        {
            Ok(l) => {
                self.record_own(l);
                Attempt::Held {
                    sent,
                    acquired: !ours,
                }
            }
            Err(e) => Attempt::Failed(describe("updating the lease", &e)),
        }
    }

    /// Gives the lease up if we hold it (client-go's `release`): no holder,
    /// a one-second duration, so that a standby takes it at its next attempt.
    pub async fn release(&mut self) -> Result<bool, String> {
        let Some(mut lease) = self.last.clone().filter(|l| self.is_mine(l)) else {
            return Ok(false);
        };
        self.apply_meta(&mut lease.metadata);
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(now_micro());
            spec.acquire_time = Some(now_micro());
        }
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(l) => {
                self.record_own(l);
                Ok(true)
            }
            Err(e) => Err(describe("releasing the lease", &e)),
        }
    }

    /// Deletes the lease if it is still the version we wrote last.
    pub async fn delete(&mut self) -> Result<bool, String> {
        let Some(rv) = self
            .last
            .as_ref()
            .filter(|l| self.is_mine(l))
            .and_then(|l| l.metadata.resource_version.clone())
        else {
            return Ok(false);
        };
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: Some(rv),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        match self.api.delete(&self.name, &dp).await {
            Ok(_) => {
                self.last = None;
                Ok(true)
            }
            Err(e) if matches!(api_code(&e), Some(404) | Some(409)) => Ok(false),
            Err(e) => Err(describe("deleting the lease", &e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(l: u64, r: u64, p: u64, m: u64) -> Timing {
        Timing {
            lease_duration: Duration::from_millis(l),
            renew_deadline: Duration::from_millis(r),
            retry_period: Duration::from_millis(p),
            skew_margin: Duration::from_millis(m),
        }
    }

    #[test]
    fn validates_as_client_go_does() {
        assert!(Timing::default().validate().is_ok());
        assert!(t(3000, 2000, 500, 500).validate().is_ok());
        let e = t(10_000, 10_000, 2000, 0).validate().unwrap_err();
        assert!(
            e.contains("lease_duration_ms (10000) must be greater than renew_deadline_ms (10000)"),
            "{e}"
        );
        // 1.2 x 2000 = 2400: a renew deadline of 2400 is not enough.
        let e = t(15_000, 2400, 2000, 0).validate().unwrap_err();
        assert!(
            e.contains("must be greater than 1.2 x retry_period_ms"),
            "{e}"
        );
        assert!(t(15_000, 2401, 2000, 0).validate().is_ok());
        assert!(t(0, 0, 0, 0).validate().is_err());
        let e = t(15_000, 10_000, 2000, 6000).validate().unwrap_err();
        assert!(e.contains("clock_skew_margin_ms"), "{e}");
    }

    #[test]
    fn expiry_counts_from_the_observed_change_not_the_renew_time() {
        let lease = Lease {
            metadata: ObjectMeta {
                resource_version: Some("7".into()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some("a".into()),
                lease_duration_seconds: Some(20),
                // Written by a clock far in the past: irrelevant.
                renew_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
                ..LeaseSpec::default()
            }),
        };
        let t0 = Instant::now();
        let o = Observation::of(&lease, None, t0);
        assert_eq!(o.holder.as_deref(), Some("a"));
        // The record's 20 s is longer than our 15 s: we wait 20 s.
        assert_eq!(
            o.expires(Duration::from_secs(15)),
            t0 + Duration::from_secs(20)
        );
        let later = Observation::of(&lease, Some(&o), t0 + Duration::from_secs(5));
        assert_eq!(
            later.at, t0,
            "an unchanged record keeps its observation time"
        );
        let mut renewed = lease.clone();
        renewed.metadata.resource_version = Some("8".into());
        let seen = Observation::of(&renewed, Some(&o), t0 + Duration::from_secs(5));
        assert_eq!(seen.at, t0 + Duration::from_secs(5));
    }
}

/// Against the simulator: the oracle is the Lease as the server stores it.
#[cfg(test)]
mod server_tests {
    use super::*;

    async fn api() -> (apisim::RunningSim, Api<Lease>) {
        let sim = apisim::Sim::new(apisim::SimConfig::default())
            .start("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let client = kube_informer::reflector::client_from_kubeconfig_yaml(&sim.kubeconfig_yaml())
            .await
            .unwrap();
        (sim, Api::namespaced(client, "default"))
    }

    fn lock(api: &Api<Lease>, identity: &str, instance: &str, d: Duration) -> LeaseLock {
        LeaseLock::new(api.clone(), "lock", identity, d, BTreeMap::new()).with_instance(instance)
    }

    /// The record's resourceVersion and instance token, as stored.
    async fn stored(api: &Api<Lease>) -> Option<(String, Option<String>)> {
        let l = api.get_opt("lock").await.unwrap()?;
        Some((
            l.metadata.resource_version.clone().unwrap(),
            instance(&l).map(str::to_string),
        ))
    }

    /// `a` holds the Lease, `b` has seen it held, then someone else deletes it.
    async fn held_then_deleted(
        d: Duration,
    ) -> (apisim::RunningSim, Api<Lease>, LeaseLock, LeaseLock) {
        let (sim, api) = api().await;
        let mut holder = lock(&api, "a", "a", d);
        let mut standby = lock(&api, "b", "b", d);
        assert!(matches!(
            holder.try_acquire_or_renew().await,
            Attempt::Held { .. }
        ));
        assert!(matches!(
            standby.try_acquire_or_renew().await,
            Attempt::Taken { .. }
        ));
        api.delete("lock", &DeleteParams::default()).await.unwrap();
        (sim, api, holder, standby)
    }

    #[tokio::test]
    async fn a_second_process_with_the_same_identity_never_writes_while_the_first_renews() {
        let d = Duration::from_millis(1500);
        let (_sim, api) = api().await;
        let mut first = lock(&api, "web-0", "first", d);
        let mut second = lock(&api, "web-0", "second", d);
        assert!(matches!(
            first.try_acquire_or_renew().await,
            Attempt::Held { acquired: true, .. }
        ));
        let until = Instant::now() + 2 * d;
        while Instant::now() < until {
            assert!(matches!(
                first.try_acquire_or_renew().await,
                Attempt::Held { .. }
            ));
            let before = stored(&api).await.unwrap();
            match second.try_acquire_or_renew().await {
                Attempt::Taken { holder, .. } => {
                    assert!(holder.contains("another process"), "{holder}")
                }
                other => panic!("the second process got {other:?}"),
            }
            assert_eq!(
                stored(&api).await.unwrap(),
                before,
                "the second process wrote the first one's lease"
            );
            assert_eq!(before.1.as_deref(), Some("first"));
            // Nor may it release or delete what it does not hold.
            assert_eq!(second.release().await, Ok(false));
            assert_eq!(second.delete().await, Ok(false));
            assert_eq!(stored(&api).await.unwrap(), before);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // The first stops renewing: the second takes over once it expired.
        let deadline = Instant::now() + 3 * d;
        loop {
            if let Attempt::Held { acquired, .. } = second.try_acquire_or_renew().await {
                assert!(acquired);
                break;
            }
            assert!(Instant::now() < deadline, "never taken over");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(stored(&api).await.unwrap().1.as_deref(), Some("second"));
    }

    #[tokio::test]
    async fn a_deleted_lease_is_not_created_again_before_its_holder_has_stopped() {
        let d = Duration::from_millis(1500);
        let (_sim, api, _holder, mut standby) = held_then_deleted(d).await;
        let missing = Instant::now();
        // Until a lease duration after it found the Lease missing, the
        // standby does not create it.
        while missing.elapsed() < d - Duration::from_millis(200) {
            match standby.try_acquire_or_renew().await {
                Attempt::Taken { holder, .. } => assert!(holder.contains("deleted"), "{holder}"),
                other => panic!("took a deleted lease at once: {other:?}"),
            }
            assert_eq!(stored(&api).await, None, "the standby created it");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let deadline = missing + 3 * d;
        loop {
            if let Attempt::Held { acquired, .. } = standby.try_acquire_or_renew().await {
                assert!(acquired);
                break;
            }
            assert!(Instant::now() < deadline, "never created again");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(missing.elapsed() >= d);
        assert_eq!(stored(&api).await.unwrap().1.as_deref(), Some("b"));
    }

    #[tokio::test]
    async fn the_holder_of_a_deleted_lease_creates_it_again_at_once() {
        let d = Duration::from_millis(1500);
        let (_sim, api, mut holder, mut standby) = held_then_deleted(d).await;
        assert!(matches!(
            holder.try_acquire_or_renew().await,
            Attempt::Held { .. }
        ));
        assert_eq!(stored(&api).await.unwrap().1.as_deref(), Some("a"));
        match standby.try_acquire_or_renew().await {
            Attempt::Taken { holder, .. } => assert_eq!(holder, "a"),
            other => panic!("{other:?}"),
        }
    }
}
