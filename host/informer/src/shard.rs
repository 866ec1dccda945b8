//! Sharding at the source (KEP-5866, server-side sharded list and watch): the
//! hash the API server ranges over, sets of ranges of its space, and the
//! handle through which a host tells an informer which ranges to cache.
//!
//! Job: a Reflector with a [`SourceShard`] lists and watches only the objects
//! whose 64-bit FNV-1a hash of `metadata.uid` or `metadata.namespace` lies in
//! the handle's *target* ranges, by sending `shardSelector`; it also filters
//! every object it receives by the same hash before the DeltaFIFO, so that a
//! server that ignores the parameter (no `shardInfo` in its list answer) still
//! leaves only the shard in the cache. When the target changes, the Reflector
//! lists only the gained ranges, at the resourceVersion its watch had reached,
//! drops the objects of the lost ranges from the cache without telling any
//! handler (an eviction, not a delete), and resumes its one watch with the
//! new selector. The handle reports what the cache holds completely
//! ([`SourceShard::covered`]), so that the host delivers a gained key to its
//! plugins only once its object is cached.
//!
//! Invariants:
//! - [`fnv1a_64`] is Go's `hash/fnv.New64a`, the apiserver's hash, applied to
//!   the field's bytes; [`ShardField::point`] is therefore the point the
//!   server puts an object on, and uid and namespace never change in an
//!   object's life, so an object never moves between ranges.
//! - The cache of a sharded informer holds only objects whose point is in the
//!   ranges last requested; [`SourceShard::covered`] is always within them,
//!   and grows only after the gained ranges' objects have been applied to the
//!   cache.
//! - An [`ArcSet`] is a sorted list of disjoint, non-adjacent, inclusive
//!   ranges of `u64`.

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use serde::Serialize;
use tokio::sync::watch;

use crate::object::Object;

/// The 64-bit FNV offset basis.
const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
/// The 64-bit FNV prime.
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a 64 of `bytes` (XOR each byte in, then multiply, modulo 2^64): the
/// hash KEP-5866 ranges over.
pub fn fnv1a_64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET_BASIS, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(FNV_PRIME)
    })
}

/// The object field whose hash places an object in a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ShardField {
    /// `metadata.uid`: spreads one large namespace over every replica.
    Uid,
    /// `metadata.namespace` (empty for cluster-scoped objects): keeps a
    /// namespace, and so an owner with its children, on one replica.
    Namespace,
}

impl ShardField {
    /// The CEL path of the field, as a `shardSelector` names it.
    pub fn path(self) -> &'static str {
        match self {
            ShardField::Uid => "object.metadata.uid",
            ShardField::Namespace => "object.metadata.namespace",
        }
    }

    /// `uid` or `namespace`.
    pub fn as_str(self) -> &'static str {
        match self {
            ShardField::Uid => "uid",
            ShardField::Namespace => "namespace",
        }
    }

    /// The point of the hash space `object` sits on.
    pub fn point(self, object: &Object) -> u64 {
        match self {
            ShardField::Uid => fnv1a_64(object.meta.uid.as_bytes()),
            // Cluster-scoped objects hash the empty namespace.
            ShardField::Namespace => {
                fnv1a_64(object.meta.namespace.as_deref().unwrap_or("").as_bytes())
            }
        }
    }
}

/// The `shardSelector` of `arcs` over `field`: one `shardRange` per range,
/// ORed, with bounds as 16 lowercase hex digits (the end exclusive,
/// `0x10000000000000000` for the end of the space). `None` for the whole
/// space (no parameter is needed) and for no point at all (no request is).
pub fn selector(field: ShardField, arcs: &ArcSet) -> Option<String> {
    if arcs.is_empty() || *arcs == ArcSet::full() {
        return None;
    }
    let parts: Vec<String> = arcs
        .ranges()
        .iter()
        .map(|(a, b)| {
            let end = match b.checked_add(1) {
                Some(e) => format!("0x{e:016x}"),
                None => "0x10000000000000000".to_string(),
            };
            format!("shardRange({}, '0x{a:016x}', '{end}')", field.path())
        })
        .collect();
    Some(parts.join(" || "))
}

/// Who keeps a sharded informer's cache to its shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Filtering {
    /// No list has answered yet.
    Unknown,
    /// The server applied the selector (its list echoed `shardInfo`): the
    /// replica receives only its shard.
    Server,
    /// The server ignored the selector: the replica receives everything and
    /// drops what is not its shard, so the watch traffic is not split.
    Client,
}

impl Filtering {
    fn from_u8(v: u8) -> Self {
        match v {
            1 => Filtering::Server,
            2 => Filtering::Client,
            _ => Filtering::Unknown,
        }
    }

    fn as_u8(self) -> u8 {
        match self {
            Filtering::Unknown => 0,
            Filtering::Server => 1,
            Filtering::Client => 2,
        }
    }
}

/// The ranges a host wants one informer to cache, and what that informer
/// reports back. Shared between the host (which sets the target) and the
/// informer's Reflector (which follows it).
pub struct SourceShard {
    field: ShardField,
    target: watch::Sender<ArcSet>,
    covered: watch::Sender<ArcSet>,
    filtering: AtomicU8,
    /// Objects received outside the ranges requested, dropped before the
    /// DeltaFIFO.
    filtered_out: AtomicU64,
    /// Cached objects dropped because their range was lost.
    evicted: AtomicU64,
    /// Lists of gained ranges only.
    range_lists: AtomicU64,
    /// Objects those lists brought.
    range_listed: AtomicU64,
}

impl fmt::Debug for SourceShard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceShard")
            .field("field", &self.field)
            .field("target", &*self.target.borrow())
            .field("covered", &*self.covered.borrow())
            .finish()
    }
}

/// A copy of a [`SourceShard`]'s state, for views and metrics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceShardStatus {
    /// The field hashed.
    pub field: ShardField,
    /// The ranges asked for, as `[start, end]` inclusive pairs in hex.
    pub target: Vec<(String, String)>,
    /// The share of the hash space asked for, 0 to 1.
    pub target_fraction: f64,
    /// The share of the hash space the cache holds completely.
    pub covered_fraction: f64,
    /// Whether the server or this replica applies the selector.
    pub filtering: Filtering,
    /// Objects received outside the ranges asked for and dropped.
    pub filtered_out: u64,
    /// Cached objects evicted with a lost range.
    pub evicted: u64,
    /// Lists of gained ranges.
    pub range_lists: u64,
    /// Objects those lists brought.
    pub range_listed: u64,
}

impl SourceShard {
    /// A handle over `field`, starting with `target` (often empty: nothing
    /// is listed until the host knows its share).
    pub fn new(field: ShardField, target: ArcSet) -> Arc<Self> {
        Arc::new(Self {
            field,
            target: watch::channel(target).0,
            covered: watch::channel(ArcSet::empty()).0,
            filtering: AtomicU8::new(0),
            filtered_out: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            range_lists: AtomicU64::new(0),
            range_listed: AtomicU64::new(0),
        })
    }

    /// The field hashed.
    pub fn field(&self) -> ShardField {
        self.field
    }

    /// Asks the informer to cache exactly `arcs`.
    pub fn set_target(&self, arcs: ArcSet) {
        self.target.send_if_modified(|t| {
            let changed = *t != arcs;
            *t = arcs;
            changed
        });
    }

    /// The ranges asked for.
    pub fn target(&self) -> ArcSet {
        self.target.borrow().clone()
    }

    /// The ranges whose objects are all in the cache (within the target).
    pub fn covered(&self) -> ArcSet {
        self.covered.borrow().clone()
    }

    /// Told each time [`SourceShard::covered`] changes.
    pub fn watch_covered(&self) -> watch::Receiver<ArcSet> {
        self.covered.subscribe()
    }

    /// Whether the server or this replica applies the selector.
    pub fn filtering(&self) -> Filtering {
        Filtering::from_u8(self.filtering.load(Ordering::Relaxed))
    }

    /// A copy of the state.
    pub fn status(&self) -> SourceShardStatus {
        let target = self.target();
        SourceShardStatus {
            field: self.field,
            target: target
                .ranges()
                .iter()
                .map(|(a, b)| (format!("0x{a:016x}"), format!("0x{b:016x}")))
                .collect(),
            target_fraction: target.fraction(),
            covered_fraction: self.covered().fraction(),
            filtering: self.filtering(),
            filtered_out: self.filtered_out.load(Ordering::Relaxed),
            evicted: self.evicted.load(Ordering::Relaxed),
            range_lists: self.range_lists.load(Ordering::Relaxed),
            range_listed: self.range_listed.load(Ordering::Relaxed),
        }
    }

    // The Reflector's side.

    pub(crate) fn subscribe_target(&self) -> watch::Receiver<ArcSet> {
        self.target.subscribe()
    }

    pub(crate) fn set_covered(&self, arcs: ArcSet) {
        self.covered.send_if_modified(|c| {
            let changed = *c != arcs;
            *c = arcs;
            changed
        });
    }

    pub(crate) fn set_filtering(&self, f: Filtering) {
        self.filtering.store(f.as_u8(), Ordering::Relaxed);
    }

    pub(crate) fn count_filtered(&self) {
        self.filtered_out.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_evicted(&self, n: usize) {
        self.evicted.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub(crate) fn count_range_list(&self, objects: usize) {
        self.range_lists.fetch_add(1, Ordering::Relaxed);
        self.range_listed
            .fetch_add(objects as u64, Ordering::Relaxed);
    }
}

/// Decides, per resource, whether an informer is sharded at the source: a
/// registry asks it before starting each informer.
pub trait SourceSharding: Send + Sync + 'static {
    /// The handle the informer of `resource` (a canonical id such as
    /// `v1/pods`) follows, or `None` for an informer that caches everything.
    fn source_for(&self, resource: &str) -> Option<Arc<SourceShard>>;
}

/// A set of points of the hash space, as inclusive ranges.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct ArcSet {
    ranges: Vec<(u64, u64)>,
}

impl fmt::Debug for ArcSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ArcSet({} ranges, {:.3} of the ring)",
            self.ranges.len(),
            self.fraction()
        )
    }
}

impl ArcSet {
    /// No point.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Every point.
    pub fn full() -> Self {
        Self {
            ranges: vec![(0, u64::MAX)],
        }
    }

    /// From arbitrary inclusive ranges (any order, overlapping or not).
    pub fn from_ranges(mut ranges: Vec<(u64, u64)>) -> Self {
        ranges.retain(|(a, b)| a <= b);
        ranges.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
        for (a, b) in ranges {
            match out.last_mut() {
                Some((_, e)) if *e == u64::MAX || a <= *e + 1 => *e = (*e).max(b),
                _ => out.push((a, b)),
            }
        }
        Self { ranges: out }
    }

    /// The ranges, sorted and disjoint.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }

    /// Whether `h` is in the set (a binary search).
    pub fn contains(&self, h: u64) -> bool {
        let i = self.ranges.partition_point(|(_, e)| *e < h);
        self.ranges.get(i).is_some_and(|(a, _)| *a <= h)
    }

    /// Whether the set holds no point.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The share of the hash space in the set, from 0 to 1.
    pub fn fraction(&self) -> f64 {
        let points: f64 = self.ranges.iter().map(|(a, b)| (b - a) as f64 + 1.0).sum();
        points / 18_446_744_073_709_551_616.0
    }

    /// Points in both sets.
    pub fn intersect(&self, other: &ArcSet) -> ArcSet {
        let (mut i, mut j) = (0, 0);
        let mut out = Vec::new();
        while i < self.ranges.len() && j < other.ranges.len() {
            let (a1, b1) = self.ranges[i];
            let (a2, b2) = other.ranges[j];
            let (a, b) = (a1.max(a2), b1.min(b2));
            if a <= b {
                out.push((a, b));
            }
            if b1 < b2 {
                i += 1;
            } else {
                j += 1;
            }
        }
        ArcSet::from_ranges(out)
    }

    /// Points not in the set.
    pub fn complement(&self) -> ArcSet {
        let mut out = Vec::new();
        let mut next: Option<u64> = Some(0);
        for (a, b) in &self.ranges {
            if let Some(n) = next {
                if *a > n {
                    out.push((n, a - 1));
                }
            }
            next = b.checked_add(1);
        }
        if let Some(n) = next {
            out.push((n, u64::MAX));
        }
        ArcSet { ranges: out }
    }

    /// Points in `self` and not in `other`.
    pub fn subtract(&self, other: &ArcSet) -> ArcSet {
        self.intersect(&other.complement())
    }

    /// Points in either set.
    pub fn union(&self, other: &ArcSet) -> ArcSet {
        let mut all = self.ranges.clone();
        all.extend_from_slice(&other.ranges);
        ArcSet::from_ranges(all)
    }

    /// Whether every point of `other` is in `self`.
    pub fn contains_set(&self, other: &ArcSet) -> bool {
        other.subtract(self).is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::Transform;

    #[test]
    fn fnv1a_64_matches_the_published_vectors() {
        // From the FNV reference test suite (Go's hash/fnv computes the same).
        assert_eq!(fnv1a_64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn a_selector_names_each_range_half_open_and_nothing_for_the_whole_space() {
        let a = ArcSet::from_ranges(vec![
            (0, 0x7fff_ffff_ffff_ffff),
            (0xf000_0000_0000_0000, u64::MAX),
        ]);
        assert_eq!(
            selector(ShardField::Uid, &a).unwrap(),
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || \
             shardRange(object.metadata.uid, '0xf000000000000000', '0x10000000000000000')"
        );
        assert_eq!(selector(ShardField::Namespace, &ArcSet::full()), None);
        assert_eq!(selector(ShardField::Namespace, &ArcSet::empty()), None);
    }

    #[test]
    fn an_objects_point_is_the_hash_of_its_uid_or_namespace() {
        let o = Object::from_json(
            br#"{"metadata":{"name":"p","namespace":"shop","uid":"1b4e28ba-2fa1-11d2-883f-0016d3cca427"}}"#,
            &Transform::default(),
        )
        .unwrap();
        assert_eq!(
            ShardField::Uid.point(&o),
            fnv1a_64(b"1b4e28ba-2fa1-11d2-883f-0016d3cca427")
        );
        assert_eq!(ShardField::Namespace.point(&o), fnv1a_64(b"shop"));
        let node = Object::from_json(
            br#"{"metadata":{"name":"n1","uid":"u"}}"#,
            &Transform::default(),
        )
        .unwrap();
        assert_eq!(ShardField::Namespace.point(&node), fnv1a_64(b""));
    }

    #[test]
    fn arc_set_algebra() {
        let a = ArcSet::from_ranges(vec![(0, 10), (20, 30), (11, 12)]);
        assert_eq!(a.ranges(), &[(0, 12), (20, 30)]);
        let b = ArcSet::from_ranges(vec![(5, 25)]);
        assert_eq!(a.intersect(&b).ranges(), &[(5, 12), (20, 25)]);
        assert_eq!(a.subtract(&b).ranges(), &[(0, 4), (26, 30)]);
        assert_eq!(a.union(&b).ranges(), &[(0, 30)]);
        assert_eq!(a.complement().ranges(), &[(13, 19), (31, u64::MAX)]);
        assert!(ArcSet::full().complement().is_empty());
        assert_eq!(ArcSet::empty().complement(), ArcSet::full());
        assert!(ArcSet::full().contains(u64::MAX) && ArcSet::full().contains(0));
        assert!(a.contains(12) && !a.contains(13) && a.contains(30) && !a.contains(31));
        assert!(a.contains_set(&ArcSet::from_ranges(vec![(1, 2), (21, 22)])));
        assert!((ArcSet::full().fraction() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn the_target_is_told_only_when_it_changes() {
        let s = SourceShard::new(ShardField::Uid, ArcSet::empty());
        let mut rx = s.subscribe_target();
        rx.borrow_and_update();
        s.set_target(ArcSet::empty());
        assert!(!rx.has_changed().unwrap());
        s.set_target(ArcSet::full());
        assert!(rx.has_changed().unwrap());
        assert_eq!(s.status().target_fraction, 1.0);
    }
}
