//! The kernel's view of a TCP socket (`TCP_INFO`): retransmits and the
//! smoothed RTT, for a throughput test's sender.

use std::os::fd::AsRawFd;

/// What `TCP_INFO` says about a socket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TcpFacts {
    /// Segments retransmitted over the connection's life.
    pub total_retransmits: u32,
    /// Smoothed RTT in ms.
    pub rtt_ms: f64,
}

/// Reads `TCP_INFO`; `None` where the kernel does not give it.
pub fn read(socket: &impl AsRawFd) -> Option<TcpFacts> {
    // SAFETY: tcp_info is plain old data; the kernel fills at most `len`
    // bytes of it and says how many.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut info).cast(),
            &mut len,
        )
    };
    // Older kernels fill less; the fields used here are in every version
    // since 2.6.
    (rc == 0 && len as usize >= 104).then(|| TcpFacts {
        total_retransmits: info.tcpi_total_retrans,
        rtt_ms: f64::from(info.tcpi_rtt) / 1e3,
    })
}
