//! The store's resource limiter: caps each linear memory at the plugin's
//! `memory_mb` and remembers whether it refused a growth, so the trap that
//! follows can be reported as a memory-limit hit rather than a panic.
//!
//! Invariant: no linear memory of the instance ever exceeds the cap; `refused`
//! is true iff a growth past the cap was attempted since the last reset.

/// Caps memory growth and records refusals.
#[derive(Debug)]
pub struct MemoryLimiter {
    max_bytes: usize,
    refused: bool,
    /// The largest size granted to a linear memory so far.
    largest: usize,
}

/// Most table elements an instance may hold (JavaScript components use large
/// function tables).
pub const MAX_TABLE_ELEMENTS: usize = 1 << 20;

impl MemoryLimiter {
    /// A limiter with the given cap per linear memory.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            refused: false,
            largest: 0,
        }
    }

    /// The cap, in bytes.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// The size of the instance's largest linear memory, in bytes (memories
    /// never shrink).
    pub fn largest_memory(&self) -> usize {
        self.largest
    }

    /// Whether a growth was refused since the last [`MemoryLimiter::reset`].
    pub fn refused(&self) -> bool {
        self.refused
    }

    /// Forgets past refusals (called before each event).
    pub fn reset(&mut self) {
        self.refused = false;
    }
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_bytes {
            self.refused = true;
            return Ok(false);
        }
        let ok = maximum.is_none_or(|m| desired <= m);
        if ok {
            self.largest = self.largest.max(desired);
        }
        Ok(ok)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS && maximum.is_none_or(|m| desired <= m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    #[test]
    fn refuses_past_cap_and_remembers() {
        let mut l = MemoryLimiter::new(1 << 20);
        assert!(l.memory_growing(0, 1 << 20, None).unwrap());
        assert!(!l.refused());
        assert!(!l.memory_growing(1 << 20, 2 << 20, None).unwrap());
        assert!(l.refused());
        l.reset();
        assert!(!l.refused());
        assert_eq!(l.largest_memory(), 1 << 20);
        // The module's own maximum is honoured without counting as a cap hit.
        assert!(!l.memory_growing(0, 1 << 19, Some(1 << 18)).unwrap());
        assert!(!l.refused());
    }
}
