//! Process memory as the kernel sees it: resident set size now from
//! `/proc/self/statm`, and its high-water mark (`VmHWM`) from `/proc/self/status`.
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

/// The kernel's high-water mark of this process's resident set (`VmHWM` in
/// `/proc/self/status`), in bytes: the largest RSS since the process started,
/// whenever it occurred, trims included (a trim lowers RSS, never the mark).
pub fn peak_rss_bytes() -> Result<u64> {
    let s = std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    parse_vm_hwm(&s)
}

/// `VmHWM:   123456 kB` from the text of `/proc/<pid>/status`, in bytes.
fn parse_vm_hwm(status: &str) -> Result<u64> {
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .context("/proc/self/status: no VmHWM line")?;
    let mut it = line.split_whitespace();
    let kb: u64 = it
        .next()
        .context("/proc/self/status: VmHWM has no value")?
        .parse()
        .context("/proc/self/status: VmHWM is not a number")?;
    match it.next() {
        Some("kB") => Ok(kb * 1024),
        other => anyhow::bail!("/proc/self/status: VmHWM in unit {other:?}, expected kB"),
    }
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

/// The environment variable that keeps transparent huge pages on in the
/// children (both sides), for comparing against the host's default policy.
const HUGE_PAGES_ENV: &str = "BENCH_HUGE_PAGES";

/// Whether this run keeps transparent huge pages on (`BENCH_HUGE_PAGES=1`);
/// off by default, as the host runs.
pub fn huge_pages() -> bool {
    std::env::var(HUGE_PAGES_ENV).is_ok_and(|v| v == "1")
}

/// Applies the run's huge page policy to this child process (both sides).
pub fn apply_huge_page_policy() -> anyhow::Result<()> {
    wasm_informer::memory::apply(huge_pages())
        .map_err(|e| anyhow::anyhow!("cannot set the transparent huge page policy: {e}"))
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

/// Held by every test that reads process-wide memory figures, so that their
/// large allocations do not overlap.
#[cfg(test)]
pub static MEMORY_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(test)]
mod tests {
    #[test]
    fn rss_grows_when_memory_is_touched() {
        let _one = super::MEMORY_TESTS.lock();
        let before = super::rss_bytes().unwrap();
        let v = vec![1u8; 64 << 20];
        let after = super::rss_bytes().unwrap();
        assert!(v.iter().map(|&b| b as u64).sum::<u64>() == 64 << 20);
        assert!(after >= before + (48 << 20), "{before} -> {after}");
    }

    /// The high-water mark keeps a peak that is gone from the current RSS.
    #[test]
    fn peak_rss_keeps_memory_touched_and_since_freed() {
        const N: usize = 128 << 20;
        let _one = super::MEMORY_TESTS.lock();
        // Pages the allocators kept from earlier tests go back first, so that
        // the vector below has to touch new ones.
        super::trim();
        let before = super::peak_rss_bytes().unwrap();
        let now = super::rss_bytes().unwrap();
        // Mapped outside the allocator's pools, so that freeing returns it.
        let v = vec![1u8; N];
        assert_eq!(v.iter().map(|&b| b as usize).sum::<usize>(), N);
        drop(v);
        super::trim();
        let peak = super::peak_rss_bytes().unwrap();
        let after = super::rss_bytes().unwrap();
        assert!(
            peak >= now + (N as u64 * 3 / 4),
            "peak {peak}, rss before {now}"
        );
        assert!(peak >= before && peak >= after, "{before} {peak} {after}");
        assert!(
            after + (N as u64 / 2) <= peak,
            "rss after free {after}, peak {peak}"
        );
    }

    #[test]
    fn vm_hwm_is_parsed_in_bytes_and_a_bad_line_is_named() {
        let s = "Name:\tbench\nVmPeak:\t  999 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(super::parse_vm_hwm(s).unwrap(), 2048 * 1024);
        let e = super::parse_vm_hwm("VmRSS: 1 kB\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no VmHWM"), "{e}");
        let e = super::parse_vm_hwm("VmHWM: 1 MB\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unit"), "{e}");
    }
}
