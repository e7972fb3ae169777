//! Throughput tests between agents: iperf-style TCP goodput, run only when
//! the collector orders them.
//!
//! A test is one client sending to one server over one or more parallel TCP
//! streams for a warm-up (left out, like iperf3's `--omit`) and a measured
//! part; the result is the goodput the sender saw acknowledged over the
//! measured part (never the receiver's word alone: [`claims`]), with the
//! sender's retransmits and TCP RTT from `TCP_INFO`.
//!
//! The server accepts a stream only with a token that the collector issued
//! for this pair and time ([`tokens`]), and never sends bulk data: a
//! stranger gets at most one status byte and is closed within a second.
//!
//! Layout: [`wire`] (the stream header, status and result, pure),
//! [`tokens`] (which tokens the server accepts, pure, time passed in),
//! [`server`] and [`client`] (the socket shells), [`tcp_info`] (the kernel's
//! view of a socket), [`claims`] (the server's count checked against the
//! client's own, pure), [`orders`] (turning the collector's orders into
//! tests and results).

pub mod claims;
pub mod client;
pub mod orders;
pub mod server;
pub mod tcp_info;
pub mod tokens;
pub mod wire;

use std::time::Duration;

/// Size of each write and read.
pub const CHUNK_BYTES: usize = 128 * 1024;
/// How long a server waits for a stream's header before closing it.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(1);
/// Most parallel streams in one test.
pub const MAX_STREAMS: u8 = 16;
/// Most connections a throughput server holds at once (a test needs at
/// most [`MAX_STREAMS`]); one more is closed at once, unread.
pub const MAX_CONNECTIONS: usize = 64;

/// Why a throughput test failed.
#[derive(Debug, thiserror::Error)]
pub enum ThroughputError {
    /// A socket operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The cause.
        source: std::io::Error,
    },
    /// The server refused the stream.
    #[error("refused by the server: {0}")]
    Refused(wire::Status),
    /// The other end broke the protocol or went quiet.
    #[error("{0}")]
    Protocol(String),
    /// The server's count was not taken.
    #[error(transparent)]
    Claim(#[from] claims::ClaimError),
}

impl ThroughputError {
    fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> Self {
        move |source| Self::Io { what, source }
    }
}

/// What one test measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    /// Goodput over the measured part, bit/s: the bytes the receiver
    /// acknowledged, as the sender counted them.
    pub goodput_bps: f64,
    /// Bytes acknowledged in the measured part.
    pub bytes: u64,
    /// Length of the measured part as the sender timed it.
    pub measured: Duration,
    /// Retransmitted segments, summed over the sender's streams.
    pub retransmits: Option<u32>,
    /// Smoothed TCP RTT (ms), mean over the sender's streams.
    pub tcp_rtt_ms: Option<f64>,
    /// Streams used.
    pub streams: u8,
}
