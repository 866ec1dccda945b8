//! The shard ring: a stable hash, a consistent-hash ring with virtual nodes,
//! and sets of arcs of the hash space.
//!
//! Job: map a shard key to the member that owns it, the same way in every
//! replica and in every version of this binary, and describe what a member
//! owns as a set of arcs, so that ownership can be intersected and subtracted
//! (the hand-over needs "mine under my view, and claimed by no one else").
//!
//! Invariants:
//! - [`hash`] is defined here (FNV-1a over the bytes, then a 64-bit
//!   finaliser), never by the standard library, so replicas built by different
//!   compilers agree during a rolling upgrade.
//! - A ring depends only on the set of member names and the number of virtual
//!   nodes. In a non-empty ring every point of the hash space has exactly one
//!   owner: the member of the first virtual node at or after it, wrapping.
//! - An [`ArcSet`] is a sorted list of disjoint, non-adjacent, inclusive
//!   ranges of `u64`.

pub use kube_informer::shard::ArcSet;

/// The stable 64-bit hash of shard keys and virtual nodes.
pub fn hash(bytes: &[u8]) -> u64 {
    // FNV-1a, 64-bit.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // A finaliser spreads FNV's low-entropy high bits (MurmurHash3's fmix64).
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

/// Default virtual nodes per member, as in kubernetes-controller-sharding.
pub const DEFAULT_VIRTUAL_NODES: u32 = 100;

/// A consistent-hash ring over a set of members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ring {
    members: Vec<String>,
    /// Virtual node positions with the index of their member, sorted.
    points: Vec<(u64, u32)>,
}

impl Ring {
    /// The ring of `members` (deduplicated) with `virtual_nodes` points each.
    pub fn new<S: AsRef<str>>(members: impl IntoIterator<Item = S>, virtual_nodes: u32) -> Self {
        let mut members: Vec<String> = members
            .into_iter()
            .map(|m| m.as_ref().to_string())
            .collect();
        members.sort();
        members.dedup();
        let mut points = Vec::with_capacity(members.len() * virtual_nodes as usize);
        for (i, m) in members.iter().enumerate() {
            for v in 0..virtual_nodes.max(1) {
                points.push((hash(format!("{m}#{v}").as_bytes()), i as u32));
            }
        }
        points.sort_unstable();
        // Two virtual nodes on one point: the first (by member order) wins.
        points.dedup_by_key(|p| p.0);
        Self { members, points }
    }

    /// The members, sorted.
    pub fn members(&self) -> &[String] {
        &self.members
    }

    /// The member owning point `h`; `None` for an empty ring.
    pub fn owner(&self, h: u64) -> Option<&str> {
        if self.points.is_empty() {
            return None;
        }
        let i = self.points.partition_point(|(p, _)| *p < h);
        let (_, m) = self.points[i % self.points.len()];
        Some(&self.members[m as usize])
    }

    /// The member owning shard key `key`.
    pub fn owner_of(&self, key: &str) -> Option<&str> {
        self.owner(hash(key.as_bytes()))
    }

    /// Every point `member` owns (empty when it is not a member).
    pub fn arcs_of(&self, member: &str) -> ArcSet {
        let Ok(idx) = self.members.binary_search_by(|m| m.as_str().cmp(member)) else {
            return ArcSet::empty();
        };
        let idx = idx as u32;
        let n = self.points.len();
        let mut ranges = Vec::new();
        for i in 0..n {
            let (pos, m) = self.points[i];
            if m != idx {
                continue;
            }
            if i == 0 {
                // From after the last point, around zero, up to this one.
                let last = self.points[n - 1].0;
                if n == 1 {
                    return ArcSet::full();
                }
                if last < u64::MAX {
                    ranges.push((last + 1, u64::MAX));
                }
                ranges.push((0, pos));
            } else {
                ranges.push((self.points[i - 1].0 + 1, pos));
            }
        }
        ArcSet::from_ranges(ranges)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_stable() {
        // Pinned values: a change here would move keys between replicas
        // running different builds.
        assert_eq!(hash(b""), 0xefd0_1f60_ba99_2926);
        assert_eq!(hash(b"apps/ReplicaSet/ns/web"), 0x7011_2f08_3f97_295f);
    }

    #[test]
    fn every_point_has_exactly_one_owner_and_arcs_agree_with_owner() {
        let ring = Ring::new(["a", "b", "c"], 50);
        let arcs: Vec<ArcSet> = ring.members().iter().map(|m| ring.arcs_of(m)).collect();
        let total: f64 = arcs.iter().map(ArcSet::fraction).sum();
        assert!(
            (total - 1.0).abs() < 1e-9,
            "arcs cover the ring once: {total}"
        );
        for i in 0..arcs.len() {
            for j in i + 1..arcs.len() {
                assert!(arcs[i].intersect(&arcs[j]).is_empty());
            }
        }
        for k in 0..5000u32 {
            let h = hash(format!("key-{k}").as_bytes());
            let owner = ring.owner(h).unwrap();
            let idx = ring.members().iter().position(|m| m == owner).unwrap();
            assert!(arcs[idx].contains(h));
        }
        for edge in [0, u64::MAX] {
            let owner = ring.owner(edge).unwrap();
            let idx = ring.members().iter().position(|m| m == owner).unwrap();
            assert!(arcs[idx].contains(edge), "edge {edge}");
        }
    }

    #[test]
    fn virtual_nodes_spread_keys_evenly() {
        let ring = Ring::new(["r-0", "r-1", "r-2"], DEFAULT_VIRTUAL_NODES);
        let mut counts = [0u32; 3];
        for k in 0..30_000u32 {
            let o = ring
                .owner_of(&format!("/Pod/ns-{}/pod-{k}", k % 7))
                .unwrap();
            counts[ring.members().iter().position(|m| m == o).unwrap()] += 1;
        }
        for c in counts {
            assert!((7_000..13_000).contains(&c), "uneven split {counts:?}");
        }
    }

    #[test]
    fn adding_a_member_moves_only_keys_to_it() {
        let before = Ring::new(["a", "b"], 100);
        let after = Ring::new(["a", "b", "c"], 100);
        let mut moved = 0;
        for k in 0..10_000u32 {
            let key = format!("k{k}");
            let (x, y) = (
                before.owner_of(&key).unwrap(),
                after.owner_of(&key).unwrap(),
            );
            if x != y {
                assert_eq!(y, "c", "a key moved between surviving members");
                moved += 1;
            }
        }
        assert!((2_000..4_700).contains(&moved), "moved {moved}");
    }

    #[test]
    fn a_single_member_owns_everything_and_a_stranger_nothing() {
        let ring = Ring::new(["only"], 10);
        assert_eq!(ring.arcs_of("only"), ArcSet::full());
        assert!(ring.arcs_of("stranger").is_empty());
        assert_eq!(Ring::new(Vec::<String>::new(), 10).owner(5), None);
    }
}
