//! UDP echo probes in the STAMP format ([`crate::stamp_packet`]): what
//! measures a peer where ICMP is filtered. One socket per address family,
//! bound to the agent's address, shared by every probe.
//!
//! The round trip runs from the kernel's stamp of the probe's send to its
//! stamp of the reply's arrival, less the time the reflector says it held the probe
//! (its own kernel stamp on arrival to just before its send), so that the
//! figure is the network's and not the peer agent's wake-up time. A reply
//! is the probe's only when it comes from the probed address and carries
//! back the probe's random sequence number and exact timestamp; anything
//! else is refused and counted, as for ICMP.

use std::io::{self, ErrorKind};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant, SystemTime};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::counters::Counters;
use crate::kernel_stamps::{self, StampedSends};
use crate::pending::{Pending, ProbeError};
use crate::stamp_packet;

/// A reply's kernel stamp and the hold its reflector claims.
type Answer = (SystemTime, Option<Duration>);

#[derive(Debug)]
struct ProbeSocket {
    socket: AsyncFd<Socket>,
    sends: StampedSends,
    pending: Pending<(IpAddr, u32), Answer>,
}

/// The agent's UDP probe sockets.
#[derive(Debug)]
pub struct Udp {
    v4: Option<Arc<ProbeSocket>>,
    v6: Option<Arc<ProbeSocket>>,
    counters: Arc<Counters>,
    receivers: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Udp {
    fn drop(&mut self) {
        for receiver in &self.receivers {
            receiver.abort();
        }
    }
}

impl Udp {
    /// Opens a socket for each of `addresses` (the first of each family),
    /// on a port the kernel picks. Read errors count in `counters`.
    pub fn open(addresses: &[IpAddr], counters: Arc<Counters>) -> io::Result<Self> {
        let first = |v4: bool| addresses.iter().copied().find(|a| a.is_ipv4() == v4);
        let open = |ip: Option<IpAddr>| ip.map(ProbeSocket::open).transpose();
        let (v4, v6) = (open(first(true))?, open(first(false))?);
        let receivers = [&v4, &v6]
            .into_iter()
            .flatten()
            .map(|socket| tokio::spawn(receive(Arc::clone(socket), Arc::clone(&counters))))
            .collect();
        Ok(Self {
            v4,
            v6,
            counters,
            receivers,
        })
    }

    /// Sends one probe to the reflector at `target` and waits for its
    /// reply, until a sweep ([`Udp::expire_due`]) past `deadline`.
    pub async fn probe(
        &self,
        target: SocketAddr,
        deadline: Instant,
    ) -> Result<Duration, ProbeError> {
        let socket = match target {
            SocketAddr::V4(_) => self.v4.as_ref(),
            SocketAddr::V6(_) => self.v6.as_ref(),
        }
        .ok_or_else(|| ProbeError::Failed("no address of this family to probe from".into()))?;
        let seq: u32 = rand::random();
        // Stamped for the early check no later than the probe leaves.
        let expected_at = SystemTime::now();
        // The packet's own timestamp is part of what the reply must carry
        // back; the RTT starts at the kernel's stamp of the send.
        let sent_at = SystemTime::now();
        let (packet, id) = stamp_packet::request(seq, sent_at, rand::random());
        let key = (target.ip(), id.seq);
        let waiter = socket.pending.expect(key, id.sent.0, expected_at, deadline);
        let to = SockAddr::from(target);
        let left = match socket.sends.send_to(&socket.socket, &packet, &to).await {
            Ok(left) => self.counters.left_at(left),
            Err(err) => {
                socket.pending.forget(&key);
                return Err(ProbeError::Failed(err.to_string()));
            }
        };
        let (arrived, hold) = waiter.reply().await?;
        let (rtt, left_in) = stamp_packet::round_trip(left, arrived, hold);
        if !left_in.is_zero() {
            self.counters.holds_cut.fetch_add(1, Relaxed);
            let nanos = u64::try_from(left_in.as_nanos()).unwrap_or(u64::MAX);
            self.counters.hold_left_ns.fetch_add(nanos, Relaxed);
        }
        Ok(rtt)
    }

    /// Times out the probes whose deadline is `now` or earlier; the
    /// earliest deadline of those that still wait.
    pub fn expire_due(&self, now: Instant) -> Option<Instant> {
        let sockets = [&self.v4, &self.v6].into_iter().flatten();
        crate::pending::expire_due_in(sockets.map(|socket| &socket.pending), now)
    }
}

impl ProbeSocket {
    fn open(ip: IpAddr) -> io::Result<Arc<Self>> {
        let domain = if ip.is_ipv4() {
            Domain::IPV4
        } else {
            Domain::IPV6
        };
        let socket = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
        socket.bind(&SockAddr::from(SocketAddr::new(ip, 0)))?;
        let sends = StampedSends::on(&socket);
        Ok(Arc::new(Self {
            socket: kernel_stamps::register(socket)?,
            sends,
            pending: Pending::default(),
        }))
    }
}

/// Reads replies and hands each, with its kernel stamp and the hold its
/// reflector claims, to its probe.
async fn receive(socket: Arc<ProbeSocket>, counters: Arc<Counters>) {
    let mut buffer = [0u8; stamp_packet::MAX_LEN];
    loop {
        let received = socket
            .socket
            .async_io(Interest::READABLE, |s| kernel_stamps::recv(s, &mut buffer))
            .await;
        let (len, from, stamped) = match received {
            Ok(received) => received,
            Err(err) if err.kind() == ErrorKind::Interrupted => continue,
            Err(err) => {
                // An ICMP port unreachable from a peer without a reflector
                // comes back as ECONNREFUSED on the next read: not a fault.
                if err.kind() != ErrorKind::ConnectionRefused {
                    counters.receive_error();
                    tracing::warn!(%err, "reading UDP replies");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                continue;
            }
        };
        let Some(reply) = stamp_packet::parse_reply(&buffer[..len]) else {
            counters.reply_refused(crate::replies::Refusal::Forged);
            continue;
        };
        let arrived = counters.arrived_at(stamped);
        socket.pending.answer(
            &(from.ip(), reply.id.seq),
            Some(reply.id.sent.0),
            arrived,
            (arrived, reply.hold),
            &counters,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[tokio::test]
    async fn a_probe_nobody_answers_waits_until_a_sweep_past_its_deadline() {
        // A port on loopback that nothing listens on: no reply comes.
        let silent = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let target = silent.local_addr().unwrap();
        drop(silent);
        let udp = Arc::new(Udp::open(&[Ipv4Addr::LOCALHOST.into()], Arc::default()).unwrap());
        let deadline = Instant::now() + Duration::from_millis(50);
        let probe = tokio::spawn({
            let udp = Arc::clone(&udp);
            async move { udp.probe(target, deadline).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Past its deadline, but no sweep yet: it still waits.
        assert!(!probe.is_finished());
        assert_eq!(
            udp.expire_due(deadline - Duration::from_millis(1)),
            Some(deadline)
        );
        assert_eq!(udp.expire_due(deadline), None);
        let outcome = tokio::time::timeout(Duration::from_secs(5), probe).await;
        assert!(
            matches!(outcome, Ok(Ok(Err(ProbeError::Timeout)))),
            "{outcome:?}"
        );
    }
}
