//! Keeps a process's memory in small pages.
//!
//! The `netaware` binary's allocator (mimalloc, chosen for the collector's
//! large snapshots) asks the kernel for transparent huge pages on its
//! arenas, so that a few small allocations pin 2 MiB each. An agent, which
//! runs on every node, sat at 20.6 MB resident instead of 12.2 MB; the
//! collector at 5,000 agents sampled 90 to 140 MB more at its lowest and
//! up to 260 MB more at its highest (BENCHMARKS.md). So every process of
//! the binary turns huge pages off for itself (`PR_SET_THP_DISABLE`) as it
//! starts. It lives in the agent, the crate that talks to the kernel.

// Unsafe is allowed here only for the kernel interface: prctl(PR_SET_THP_DISABLE).
#![allow(unsafe_code)]

/// Turns transparent huge pages off for this process from now on; says so
/// in the log where the kernel refuses (the process then runs as before).
pub fn turn_off() {
    // SAFETY: prctl with PR_SET_THP_DISABLE reads its integer arguments only.
    let result = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if result != 0 {
        tracing::debug!(err = %std::io::Error::last_os_error(), "huge pages stay on");
    }
}
