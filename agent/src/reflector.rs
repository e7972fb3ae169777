//! The agent's STAMP reflector (RFC 8762): answers the UDP probes of every
//! peer on the agent's port (`--udp-port`), with its kernel's receive
//! stamp and its own send time, so that the prober can take the
//! reflector's hold out of the round trip.
//!
//! It answers anyone, as any echo service does, within bounds: a reply is
//! never longer than its request (no amplification), packets that are not
//! STAMP requests are dropped, and at most [`MAX_REPLIES_PER_SECOND`]
//! replies go out; what is dropped is counted.

use std::io::{self, ErrorKind};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, SystemTime};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::counters::Counters;
use crate::kernel_stamps;
use crate::stamp_packet::{self, NtpTime};

/// The reflector's port unless configured otherwise (STAMP's own, 862, is
/// privileged).
pub const DEFAULT_PORT: u16 = 7472;
/// The most replies a second: 64 peers probing every 10 ms is 6,400.
pub const MAX_REPLIES_PER_SECOND: u32 = 20_000;

/// Binds the reflector's socket on `addr`.
pub fn bind(addr: SocketAddr) -> io::Result<AsyncFd<Socket>> {
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let socket = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    socket.bind(&SockAddr::from(addr))?;
    kernel_stamps::register(socket)
}

/// Answers probes on `socket` until `shutdown`.
pub async fn serve(socket: AsyncFd<Socket>, counters: Arc<Counters>, shutdown: CancellationToken) {
    let mut buffer = [0u8; stamp_packet::MAX_LEN + 1];
    let mut budget = Budget::new(MAX_REPLIES_PER_SECOND, Instant::now());
    let mut seq = 0u32;
    loop {
        let received = tokio::select! {
            () = shutdown.cancelled() => return,
            received = socket.async_io(Interest::READABLE, |s| kernel_stamps::recv(s, &mut buffer)) => received,
        };
        let (len, from, stamped) = match received {
            Ok(received) => received,
            Err(err)
                if matches!(
                    err.kind(),
                    ErrorKind::Interrupted | ErrorKind::ConnectionRefused
                ) =>
            {
                continue;
            }
            Err(err) => {
                counters.receive_error();
                tracing::warn!(%err, "reading UDP probes");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if !budget.take(Instant::now()) {
            counters.reflector_limited.fetch_add(1, Relaxed);
            continue;
        }
        let arrived = NtpTime::from_system(stamped.unwrap_or_else(SystemTime::now));
        seq = seq.wrapping_add(1);
        let sending = NtpTime::from_system(SystemTime::now());
        let Some(reply) = stamp_packet::reflect(&buffer[..len], seq, arrived, sending) else {
            counters.reflector_refused.fetch_add(1, Relaxed);
            continue;
        };
        let to = SockAddr::from(from);
        match socket.get_ref().send_to(&reply, &to) {
            Ok(_) => {
                counters.reflected.fetch_add(1, Relaxed);
            }
            // A full send buffer drops the reply, as the network would.
            Err(err) => tracing::debug!(%err, %from, "reflecting a probe"),
        }
    }
}

/// So many replies a second, refilled continuously, with a second's worth
/// at most in hand.
#[derive(Debug)]
struct Budget {
    per_second: f64,
    tokens: f64,
    at: Instant,
}

impl Budget {
    fn new(per_second: u32, now: Instant) -> Self {
        Self {
            per_second: f64::from(per_second),
            tokens: f64::from(per_second),
            at: now,
        }
    }

    fn take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.per_second);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_allows_its_rate_and_no_more() {
        let start = Instant::now();
        let mut budget = Budget::new(100, start);
        assert_eq!((0..150).filter(|_| budget.take(start)).count(), 100);
        // Half a second later, half a second's worth.
        let later = start + Duration::from_millis(500);
        assert_eq!((0..150).filter(|_| budget.take(later)).count(), 50);
    }
}
