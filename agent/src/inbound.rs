//! The other direction: echo requests that peers send to this node.
//!
//! Every agent numbers its probes to a peer 1, 2, 3, ... under one ICMP
//! identifier. So the node being probed can count, per peer, how many
//! requests arrived and how many the sequence numbers say were sent: the
//! loss from that peer to this node, one way, which a round-trip probe
//! cannot tell apart from loss on the way back.
//!
//! [`InboundTracker`] is the pure counting; [`watch`] is the raw socket that
//! feeds it (a kernel filter passes only echo requests).

// Unsafe is allowed here only for the kernel interface: registering the raw socket with tokio and reading into an uninitialised buffer.
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::io::ErrorKind;
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc;

use crate::counters::Counters;
use crate::icmp_packet::{echo_request_filter, parse_echo_request};

/// One echo request seen arriving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Who sent it.
    pub source: IpAddr,
    /// Its ICMP identifier.
    pub ident: u16,
    /// Its sequence number.
    pub seq: u16,
}

/// What one request adds to the counts of its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counted {
    /// Requests the source sent since the last one seen (gaps included).
    pub expected: u32,
    /// Requests received: 1, or 0 for a duplicate.
    pub received: u32,
}

#[derive(Debug, Clone, Copy)]
struct Source {
    ident: u16,
    last_seq: u16,
}

/// Per source, the last identifier and sequence number seen.
#[derive(Debug, Default)]
pub struct InboundTracker {
    sources: HashMap<IpAddr, Source>,
}

impl InboundTracker {
    /// Counts one request.
    pub fn observe(&mut self, request: Request) -> Counted {
        let fresh = Source {
            ident: request.ident,
            last_seq: request.seq,
        };
        match self.sources.get_mut(&request.source) {
            // First from this source, or the source's agent restarted.
            None => {
                self.sources.insert(request.source, fresh);
                Counted {
                    expected: 1,
                    received: 1,
                }
            }
            Some(source) if source.ident != request.ident => {
                *source = fresh;
                Counted {
                    expected: 1,
                    received: 1,
                }
            }
            Some(source) => {
                let ahead = request.seq.wrapping_sub(source.last_seq);
                match ahead {
                    0 => Counted::default(),
                    // Forward: everything in the gap was sent too.
                    1..0x8000 => {
                        source.last_seq = request.seq;
                        Counted {
                            expected: u32::from(ahead),
                            received: 1,
                        }
                    }
                    // Behind: a late arrival, already counted as expected.
                    _ => Counted {
                        expected: 0,
                        received: 1,
                    },
                }
            }
        }
    }
}

/// Opens the raw socket that sees echo requests to `local` (IPv4), or says
/// why it cannot (it needs CAP_NET_RAW like the probes).
pub fn open(local: Ipv4Addr) -> std::io::Result<(AsyncFd<Socket>, Ipv4Addr)> {
    let socket = raw_socket()?;
    socket.attach_filter(&echo_request_filter(local))?;
    socket.set_nonblocking(true)?;
    // SAFETY: the socket owns its descriptor, which stays open and the same
    // for as long as the AsyncFd that owns the socket.
    let registered =
        unsafe { AsyncFd::register_with_interest(socket, tokio::io::Interest::READABLE) };
    Ok((registered.map_err(std::io::Error::from)?, local))
}

/// Reads echo requests until the receiver of `requests` is dropped.
pub async fn watch(
    socket: AsyncFd<Socket>,
    local: Ipv4Addr,
    requests: mpsc::Sender<Request>,
    counters: Arc<Counters>,
) {
    let mut buffer = [MaybeUninit::<u8>::uninit(); 2048];
    loop {
        // Stop with the measuring loop, even when no request comes.
        let readable = tokio::select! {
            () = requests.closed() => return,
            readable = socket.readable() => readable,
        };
        let Ok(mut ready) = readable else { return };
        loop {
            match ready.get_inner().recv(&mut buffer) {
                Ok(len) => {
                    // SAFETY: recv initialised the first `len` bytes.
                    let packet: &[u8] =
                        unsafe { std::slice::from_raw_parts(buffer.as_ptr().cast(), len) };
                    let Some((source, ident, seq)) = parse_echo_request(packet, local) else {
                        continue;
                    };
                    let source = IpAddr::V4(source);
                    let request = Request { source, ident, seq };
                    if requests.send(request).await.is_err() {
                        return;
                    }
                }
                Err(err) if err.kind() == ErrorKind::WouldBlock => {
                    ready.clear_ready();
                    break;
                }
                Err(err) => {
                    counters.receive_error();
                    tracing::warn!(%err, "reading inbound echo requests");
                    return;
                }
            }
        }
    }
}

/// The raw ICMP socket the watch reads (CAP_NET_RAW).
fn raw_socket() -> std::io::Result<Socket> {
    Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4))
}

/// Whether this process may open that socket.
pub fn can_open() -> bool {
    raw_socket().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(seq: u16, ident: u16) -> Request {
        Request {
            source: "198.18.1.1".parse().unwrap(),
            ident,
            seq,
        }
    }

    #[test]
    fn counts_gaps_duplicates_late_arrivals_and_restarts() {
        let mut tracker = InboundTracker::default();
        assert_eq!(
            tracker.observe(request(10, 7)),
            Counted {
                expected: 1,
                received: 1
            }
        );
        assert_eq!(
            tracker.observe(request(11, 7)),
            Counted {
                expected: 1,
                received: 1
            }
        );
        // 12 and 13 lost.
        assert_eq!(
            tracker.observe(request(14, 7)),
            Counted {
                expected: 3,
                received: 1
            }
        );
        assert_eq!(tracker.observe(request(14, 7)), Counted::default());
        // 13 arrives late after all.
        assert_eq!(
            tracker.observe(request(13, 7)),
            Counted {
                expected: 0,
                received: 1
            }
        );
        // Wrap-around.
        let mut wrap = InboundTracker::default();
        wrap.observe(request(u16::MAX, 7));
        assert_eq!(
            wrap.observe(request(0, 7)),
            Counted {
                expected: 1,
                received: 1
            }
        );
        // A restarted agent has a new identifier.
        assert_eq!(
            tracker.observe(request(1, 9)),
            Counted {
                expected: 1,
                received: 1
            }
        );
    }
}
