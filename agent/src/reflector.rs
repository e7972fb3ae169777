//! The agent's STAMP reflector (RFC 8762): answers the UDP probes of every
//! peer on the agent's port (`--udp-port`), with its kernel's receive
//! stamp and its own send time, so that the prober can take the
//! reflector's hold out of the round trip. The send time is the stamp
//! taken before the send plus what sends lately took until the kernel
//! handed the reply to the device (its transmit stamps, SO_TIMESTAMPING),
//! since a reply cannot carry the moment it leaves.
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
    if let Err(err) = kernel_stamps::stamp_sends(&socket) {
        // Then the hold leaves out the send, as it did before.
        tracing::warn!(%err, %addr, "no send stamps on the STAMP reflector");
    }
    kernel_stamps::register(socket)
}

/// Answers probes on `socket` until `shutdown`.
pub async fn serve(socket: AsyncFd<Socket>, counters: Arc<Counters>, shutdown: CancellationToken) {
    let mut buffer = [0u8; stamp_packet::MAX_LEN + 1];
    let mut budget = Budget::new(MAX_REPLIES_PER_SECOND, Instant::now());
    let mut seq = 0u32;
    let mut send_delay = SendDelay::default();
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
        let stamped_at = SystemTime::now();
        // The reply leaves once the send is through the stack, after this
        // stamp: what the sends lately took is counted in the hold.
        let sending = NtpTime::from_system(stamped_at + send_delay.typical());
        let Some(reply) = stamp_packet::reflect(&buffer[..len], seq, arrived, sending) else {
            counters.reflector_refused.fetch_add(1, Relaxed);
            continue;
        };
        let to = SockAddr::from(from);
        match socket.get_ref().send_to(&reply, &to) {
            Ok(_) => {
                counters.reflected.fetch_add(1, Relaxed);
                // The kernel stamps the reply as it hands it to the device,
                // within the send: a stamp from before this one's own
                // (an earlier reply's, late) says nothing of it.
                kernel_stamps::sent_stamps(socket.get_ref(), |left| {
                    if let Ok(took) = left.duration_since(stamped_at) {
                        send_delay.note(took);
                    }
                });
            }
            // A full send buffer drops the reply, as the network would.
            Err(err) => tracing::debug!(%err, %from, "reflecting a probe"),
        }
    }
}

/// How many of the latest sends [`SendDelay`] keeps.
const SEND_DELAY_SAMPLES: usize = 31;

/// What a reply's send takes, from the reflector's last stamp until the
/// kernel hands the packet to the device, as the hold claims it: a low
/// quantile of the last few dozen sends' transmit stamps (the 4th of 31),
/// the part of the hold that the reply cannot stamp itself. A claim above
/// a reply's own send makes its round trip read low by the difference, on
/// loopback 0, so the claim is what nearly every send takes: the sends'
/// times are skewed (a few preempted ones take far longer), and when they
/// drift (a reflector's first sends, cold, take longer than the ones
/// after) a mean, or even the median, of the latest over-claimed the hold
/// of most replies. Claiming too little leaves a microsecond or two in the
/// round trip instead. An ICMP echo reply, sent by the kernel, never pays
/// it.
#[derive(Debug, Default)]
struct SendDelay {
    /// The latest sends, oldest overwritten first.
    latest: Vec<Duration>,
    next: usize,
}

impl SendDelay {
    fn note(&mut self, took: Duration) {
        if self.latest.len() < SEND_DELAY_SAMPLES {
            self.latest.push(took);
        } else {
            self.latest[self.next] = took;
        }
        self.next = (self.next + 1) % SEND_DELAY_SAMPLES;
    }

    fn typical(&self) -> Duration {
        let mut sorted = self.latest.clone();
        sorted.sort_unstable();
        sorted.get(sorted.len() / 8).copied().unwrap_or_default()
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
    fn the_send_delay_follows_the_sends_and_ignores_a_preempted_one() {
        let mut delay = SendDelay::default();
        assert_eq!(delay.typical(), Duration::ZERO);
        delay.note(Duration::from_micros(8));
        assert_eq!(delay.typical(), Duration::from_micros(8));
        for _ in 0..200 {
            delay.note(Duration::from_micros(12));
        }
        assert_eq!(delay.typical(), Duration::from_micros(12));
        // A send kept from running for 5 ms moves it not at all, nor do a
        // few slow ones among many quick ones (their mean would be 21 us).
        delay.note(Duration::from_millis(5));
        assert_eq!(delay.typical(), Duration::from_micros(12));
        for i in 0..31 {
            delay.note(Duration::from_micros(if i % 3 == 0 { 40 } else { 7 }));
        }
        assert_eq!(delay.typical(), Duration::from_micros(7));
    }

    #[test]
    fn the_send_delay_follows_sends_that_got_faster_without_waiting_for_half_of_them() {
        // A reflector's first sends, cold, take longer than the ones
        // after: a median of the latest would claim 30 us for the replies
        // that now take 10, and their round trips would read 20 us low.
        let mut delay = SendDelay::default();
        for _ in 0..10 {
            delay.note(Duration::from_micros(30));
        }
        for _ in 0..5 {
            delay.note(Duration::from_micros(10));
        }
        assert_eq!(delay.typical(), Duration::from_micros(10));
    }

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
