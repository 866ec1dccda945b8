//! The process's memory policy: whether the kernel may back its heap with
//! transparent huge pages.
//!
//! Job: turn transparent huge pages off for the whole process (unless
//! host.toml's `huge_pages = true` keeps them), before the host builds its
//! informers and instances.
//!
//! Why: the allocator (mimalloc) asks the kernel for huge pages on its 1 GiB
//! arenas (`MADV_HUGEPAGE`), so on a kernel whose THP mode is `madvise` (the
//! common default) every 2 MiB region the heap touches becomes 2 MiB of RSS,
//! however little of it is live. Each plugin's thread allocates from its own
//! pages, so each plugin then costs about 1.5 MiB of RSS that holds a few
//! KiB: 50 idle no-op plugins over 100 pods measured 136 MB of RSS with huge
//! pages and 49 MB without (docs/BENCHMARKS.md, B7).
//!
//! Invariant: once [`apply`] has run with `huge_pages = false`, the kernel
//! reports `THP_enabled: 0` for the process (`/proc/self/status`), which
//! overrides any `MADV_HUGEPAGE` the allocator asks for; regions already
//! backed by huge pages keep them (the host calls it before its heap grows).

/// Sets the process's transparent-huge-page policy; returns the kernel's
/// error when it refuses (an old kernel without `PR_SET_THP_DISABLE`).
pub fn apply(huge_pages: bool) -> std::io::Result<()> {
    let disable: libc::c_ulong = if huge_pages { 0 } else { 1 };
    // SAFETY: PR_SET_THP_DISABLE takes plain integers and changes only a
    // flag of this process's memory map.
    let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, disable, 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether the kernel lets this process use transparent huge pages, from
/// its own account (`THP_enabled` in `/proc/self/status`); `None` when the
/// kernel does not say.
pub fn huge_pages_enabled() -> Option<bool> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:"))
        .map(|v| v.trim() != "0")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's view, not our flag, is the oracle. The test restores
    /// the policy it found, since the test process is shared.
    #[test]
    fn apply_false_makes_the_kernel_refuse_huge_pages_to_the_process() {
        let before = huge_pages_enabled().expect("the kernel reports THP_enabled");
        apply(false).unwrap();
        assert_eq!(huge_pages_enabled(), Some(false));
        apply(true).unwrap();
        assert_eq!(huge_pages_enabled(), Some(true));
        apply(before).unwrap();
    }
}
