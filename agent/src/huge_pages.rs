//! Keeps the agent's memory in small pages: a process that runs on every
//! node should cost each node as little as it can.
//!
//! The `netaware` binary's allocator (mimalloc, chosen for the collector's
//! large snapshots) asks the kernel for transparent huge pages on its
//! arenas, so that a few small allocations pin 2 MiB each: an agent then
//! sat at 20.6 MB resident instead of 12.2 MB (BENCHMARKS.md). The agent
//! turns huge pages off for its own process (`PR_SET_THP_DISABLE`) as it
//! starts; the collector keeps them.

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
