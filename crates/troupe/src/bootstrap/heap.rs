//! The heap a run freed, handed back to the system at the run's close.
//!
//! A process that runs many runs (a session, `troupe acp`, `troupe mcp serve`, the soak) would
//! otherwise keep, as resident memory, the largest transient working set any run had: glibc
//! returns freed memory only from the top of each arena, and each thread that allocated may
//! have an arena of its own. `malloc_trim(0)` releases the free pages of every arena. It walks
//! the allocator's free lists once, a few milliseconds for a heap of tens of MiB: nothing next
//! to a run. Elsewhere (another C library or system) it is nothing.

/// Hands the free pages of every heap arena back to the system.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(super) fn give_back_freed() {
    // SAFETY: `malloc_trim` takes no pointer and only reorganises the allocator's own free
    // memory; it is thread-safe (it locks each arena as it walks it).
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Nothing to do where the allocator is not glibc's.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(super) fn give_back_freed() {}
