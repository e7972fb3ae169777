//! The kernel's view of a TCP socket (`TCP_INFO`): retransmits, the
//! smoothed RTT and the bytes the peer acknowledged, for a throughput
//! test's sender; and `SO_RCVLOWAT`, which
//! lets the receiver wake once per batch of data instead of per packet.

// Unsafe is allowed here only for the kernel interface: getsockopt(TCP_INFO) reads the kernel's own structure.
#![allow(unsafe_code)]

use std::os::fd::{AsFd, AsRawFd};

/// What `TCP_INFO` says about a socket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TcpFacts {
    /// Segments retransmitted over the connection's life.
    pub total_retransmits: u32,
    /// Smoothed RTT in ms.
    pub rtt_ms: f64,
    /// Bytes the peer acknowledged over the connection's life; `None` on
    /// kernels before 4.1, which do not count them.
    pub bytes_acked: Option<u64>,
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
    // Older kernels fill less: retransmits and RTT are in every version
    // since 2.6, the acknowledged bytes (which end at byte 128) since 4.1.
    let filled = len as usize;
    (rc == 0 && filled >= 104).then(|| TcpFacts {
        total_retransmits: info.tcpi_total_retrans,
        rtt_ms: f64::from(info.tcpi_rtt) / 1e3,
        bytes_acked: (filled >= 128).then_some(info.tcpi_bytes_acked),
    })
}

/// Asks the kernel to wake readers of `socket` only once `bytes` are
/// waiting (or the stream ends). Best effort: an error leaves the default.
///
/// Linux clamps the TCP window to the low-water mark when the receive
/// buffer must grow to hold twice the mark, which would cap the goodput; so
/// the mark is set only where the buffer already holds four times it.
pub fn set_receive_low_water(socket: &(impl AsRawFd + AsFd), bytes: u32) {
    let buffer = socket2::SockRef::from(socket).recv_buffer_size();
    if buffer.map_or(true, |b| (b as u64) < 4 * u64::from(bytes)) {
        return;
    }
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: setsockopt reads one c_int from a valid pointer.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            (&raw const value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        tracing::debug!(err = %std::io::Error::last_os_error(), "SO_RCVLOWAT not set");
    }
}
