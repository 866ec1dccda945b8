//! Server-side sharded list and watch (KEP-5866, feature gate `ShardedListAndWatch`): the
//! `shardSelector` query parameter, parsed into a typed [`ShardSelector`], and the hash it ranges
//! over.
//!
//! Invariant: an object belongs to a selector exactly when the 64-bit FNV-1a hash of the selected
//! field's bytes lies in one of the selector's half-open ranges `[start, end)`; ranges that tile
//! `[0, 2^64)` therefore put every object in exactly one of them. The hash is a pure function of
//! the field's bytes, so any other component (the informer's ring, a client-side fallback filter)
//! that uses [`fnv1a_64`] agrees with the server on every object.

mod fnv;
mod selector;

pub use fnv::fnv1a_64;
pub use selector::{ShardField, ShardRange, ShardSelector, ShardSelectorError, HASH_SPACE_END};
