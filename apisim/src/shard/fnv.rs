//! The 64-bit FNV-1a hash that shard selectors range over.
//!
//! Invariant: `fnv1a_64(b)` is the FNV-1a hash with the 64-bit offset basis `0xcbf29ce484222325`
//! and prime `0x100000001b3` (XOR each byte in, then multiply, modulo 2^64), the function Go's
//! `hash/fnv.New64a` computes and the apiserver applies to `metadata.uid` or
//! `metadata.namespace`.

/// The 64-bit FNV offset basis.
const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
/// The 64-bit FNV prime.
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a 64 of `bytes`.
pub fn fnv1a_64(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(OFFSET_BASIS, |h, b| (h ^ u64::from(*b)).wrapping_mul(PRIME))
}
