//! Process memory as the kernel sees it: resident set size from `/proc/self/statm`.
//!
//! Invariant: values are bytes; a read failure is reported, never guessed.

use anyhow::{Context, Result};

/// Resident set size of this process, in bytes.
pub fn rss_bytes() -> Result<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").context("reading /proc/self/statm")?;
    let resident: u64 = s
        .split_whitespace()
        .nth(1)
        .context("/proc/self/statm: missing the resident field")?
        .parse()
        .context("/proc/self/statm: resident field is not a number")?;
    Ok(resident * page_size())
}

fn page_size() -> u64 {
    // The page size is 4 KiB on every Linux target this project runs on; read it from
    // the auxiliary vector through /proc when available.
    std::fs::read("/proc/self/auxv")
        .ok()
        .and_then(|b| {
            b.chunks_exact(16).find_map(|c| {
                let key = u64::from_ne_bytes(c[..8].try_into().ok()?);
                let val = u64::from_ne_bytes(c[8..].try_into().ok()?);
                (key == 6).then_some(val) // AT_PAGESZ
            })
        })
        .unwrap_or(4096)
}

/// Returns freed heap pages to the kernel, so that an RSS reading reflects
/// live memory: the global allocator (mimalloc) purges what it holds, and
/// glibc (which C dependencies still use) trims its arenas.
pub fn trim() {
    unsafe extern "C" {
        fn malloc_trim(pad: usize) -> i32;
        // Linked in by the `mimalloc` crate.
        fn mi_collect(force: bool);
    }
    // SAFETY: mi_collect only walks mimalloc's own heaps; malloc_trim only
    // glibc's arenas.
    unsafe {
        mi_collect(true);
        malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn rss_grows_when_memory_is_touched() {
        let before = super::rss_bytes().unwrap();
        let v = vec![1u8; 64 << 20];
        let after = super::rss_bytes().unwrap();
        assert!(v.iter().map(|&b| b as u64).sum::<u64>() == 64 << 20);
        assert!(after >= before + (48 << 20), "{before} -> {after}");
    }
}
