//! The memory a component needs before any of its code runs: the initial size
//! of its largest linear memory, checked against the plugin's `memory_mb` cap
//! when the plugin is loaded (and by `check`).
//!
//! Invariant: a component whose memory floor is above the cap is refused at
//! load with a [`MemoryFloorError`] that says what it needs and what the cap
//! allows; it is never instantiated, so it never shows up as a trap.

use wasmtime::component::Component;

use super::limits::PluginLimits;

/// A WebAssembly page.
pub const WASM_PAGE_BYTES: u64 = 64 << 10;

/// The initial size, in pages, of the largest linear memory the component's
/// core instances create (the cap applies to each memory on its own); `None`
/// when it has none or it cannot be known before instantiation.
pub fn memory_floor_pages(component: &Component) -> Option<u64> {
    component.resources_required()?.max_initial_memory_size
}

/// A component that cannot start under its memory cap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "its component needs a linear memory of at least {needed} to start ({pages} pages of 64 KiB), \
     but memory_mb = {memory_mb} allows {memory_mb} MiB per memory; it was not started \
     (set memory_mb to at least {min_mb})",
    needed = mib(*pages * WASM_PAGE_BYTES)
)]
pub struct MemoryFloorError {
    /// Initial pages of the component's largest memory.
    pub pages: u64,
    /// The cap, from the manifest.
    pub memory_mb: u64,
    /// The smallest `memory_mb` that fits.
    pub min_mb: u64,
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}

/// Checks the component's memory floor against `limits.memory_mb`.
pub fn check_memory_floor(
    component: &Component,
    limits: &PluginLimits,
) -> Result<(), MemoryFloorError> {
    check_floor_pages(memory_floor_pages(component), limits)
}

/// Checks a memory floor of `pages` (`None`: none known) against
/// `limits.memory_mb`.
pub fn check_floor_pages(
    pages: Option<u64>,
    limits: &PluginLimits,
) -> Result<(), MemoryFloorError> {
    let Some(pages) = pages else {
        return Ok(());
    };
    let needed = pages.saturating_mul(WASM_PAGE_BYTES);
    if needed <= limits.memory_bytes() as u64 {
        return Ok(());
    }
    Err(MemoryFloorError {
        pages,
        memory_mb: limits.memory_mb,
        min_mb: needed.div_ceil(1 << 20),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_says_what_is_needed_and_allowed() {
        let e = MemoryFloorError {
            pages: 1041,
            memory_mb: 64,
            min_mb: 66,
        };
        assert_eq!(
            e.to_string(),
            "its component needs a linear memory of at least 65.1 MiB to start (1041 pages of 64 KiB), \
             but memory_mb = 64 allows 64 MiB per memory; it was not started (set memory_mb to at least 66)"
        );
    }
}
