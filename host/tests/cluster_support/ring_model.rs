//! An independent model of the shard ring, written from the documentation
//! of `host/src/cluster/ring.rs` and docs/RUNNING-IN-A-CLUSTER.md, not from
//! its code: the history checker uses it to tell which member a claim gives
//! a key to, without asking the host.
//!
//! What the documentation fixes: a key's point is FNV-1a (64-bit) over its
//! bytes followed by MurmurHash3's 64-bit finaliser; each member `m` has
//! virtual nodes at the points of `m#0` ... `m#(v-1)`; a point is owned by
//! the member of the first virtual node at or after it, wrapping around; when
//! two virtual nodes fall on one point, the member first in name order keeps
//! it.
//!
//! Invariant: `owner` depends only on the member set, the virtual node count
//! and the key.

/// FNV-1a 64 over `bytes`, then the fmix64 finaliser.
pub fn point(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 14_695_981_039_346_656_037;
    const PRIME: u64 = 1_099_511_628_211;
    let mut h = OFFSET;
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(PRIME);
    }
    let mut k = h;
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51afd7ed558ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ceb9fe1a85ec53);
    k ^ (k >> 33)
}

/// A ring of members with `vnodes` virtual nodes each.
#[derive(Debug, Clone)]
pub struct RingModel {
    /// (point, member), sorted by point; one entry per point.
    nodes: Vec<(u64, String)>,
}

impl RingModel {
    pub fn new(members: &[String], vnodes: u32) -> RingModel {
        let mut names: Vec<&String> = members.iter().collect();
        names.sort();
        names.dedup();
        let mut nodes: Vec<(u64, String)> = Vec::new();
        for m in names {
            for v in 0..vnodes.max(1) {
                nodes.push((point(format!("{m}#{v}").as_bytes()), m.clone()));
            }
        }
        // Sorted by point, then by name: the first name on a shared point wins.
        nodes.sort();
        nodes.dedup_by(|later, earlier| later.0 == earlier.0);
        RingModel { nodes }
    }

    /// The member owning `key`; `None` for an empty ring.
    pub fn owner(&self, key: &str) -> Option<&str> {
        self.owner_at(point(key.as_bytes()))
    }

    /// The member owning point `h` of the hash space (for placements that
    /// hash a field themselves, as `shard_by = "uid"` does).
    pub fn owner_at(&self, h: u64) -> Option<&str> {
        if self.nodes.is_empty() {
            return None;
        }
        let i = self.nodes.partition_point(|(p, _)| *p < h);
        Some(self.nodes[i % self.nodes.len()].1.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_hashes_as_the_documented_pins() {
        // The values ring.rs pins in its own test; the model reaches them
        // from the documented definition.
        assert_eq!(point(b""), 0xefd0_1f60_ba99_2926);
        assert_eq!(point(b"apps/ReplicaSet/ns/web"), 0x7011_2f08_3f97_295f);
    }
}
