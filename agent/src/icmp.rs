//! ICMP echo with kernel receive timestamps: one socket per address family,
//! shared by every probe of the agent.
//!
//! Why not surge-ping, which the first version used: it takes the reply's
//! time when its tokio task gets to read the packet, so every RTT carries
//! the time it takes to wake the agent up. On the lab that was +0.05 ms on
//! 0.2 ms links and +0.13 ms on 5 to 30 ms links, measured against iputils
//! ping (BENCHMARKS.md). Here the kernel stamps each reply as it arrives
//! (SO_TIMESTAMPNS, as ping does), and the request as the kernel hands it
//! to the device (SO_TIMESTAMPING), where ping stamps it in user space
//! before the send: so a busy node's scheduling delays are in neither end.
//!
//! Each request carries a random nonce in its payload, which its reply
//! must carry back: a reply is the probe's only when it comes from the
//! probed address with the probe's sequence number and nonce, stamped
//! after the probe left. Anything else is refused and counted
//! ([`crate::replies`]): a reply nobody can send before it has seen the
//! request, so that no node can answer ahead of the probes and look closer
//! than it is.
//!
//! Raw sockets need CAP_NET_RAW; without it the unprivileged datagram ICMP
//! socket is used, which Linux allows only to the groups in
//! `net.ipv4.ping_group_range` (the kernel then picks the identifier). A
//! raw socket receives every ICMP packet the host gets, so a classic BPF
//! filter in the kernel passes only echo replies carrying this agent's
//! identifier: the agent never wakes up for the rest.

use std::io::{self, ErrorKind};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::AgentError;
use crate::counters::Counters;
use crate::icmp_packet::{
    Family, echo_reply_filter, echo_request, ipv4_header_len, parse_echo_reply,
};
use crate::kernel_stamps::{self, StampedSends};
use crate::pending::Pending;
pub use crate::pending::ProbeError;

type EchoPending = Pending<(IpAddr, u16), SystemTime>;

/// One ICMP socket, its receive task and the probes waiting for replies.
#[derive(Debug)]
struct EchoSocket {
    socket: AsyncFd<Socket>,
    sends: StampedSends,
    family: Family,
    /// Raw sockets see IPv4 headers and need our identifier checked;
    /// datagram ICMP sockets get only their own replies, without header.
    raw: bool,
    pending: EchoPending,
}

/// The agent's ICMP sockets.
#[derive(Debug)]
pub struct Icmp {
    v4: Option<Arc<EchoSocket>>,
    v6: Option<Arc<EchoSocket>>,
    ident: u16,
    counters: Arc<Counters>,
    receivers: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Icmp {
    fn drop(&mut self) {
        for receiver in &self.receivers {
            receiver.abort();
        }
    }
}

impl Icmp {
    /// Opens the sockets, bound to the agent's own addresses when given so
    /// that probes leave from the address peers know the agent by.
    /// Read errors count in `counters`.
    pub fn open(
        bind_v4: Option<Ipv4Addr>,
        bind_v6: Option<Ipv6Addr>,
        counters: Arc<Counters>,
    ) -> Result<Self, AgentError> {
        let ident: u16 = rand::random();
        let v4 = EchoSocket::open(Family::V4, bind_v4.map(IpAddr::V4), ident)
            .map(Arc::new)
            .map_err(AgentError::IcmpSocket)?;
        let v6 = match EchoSocket::open(Family::V6, bind_v6.map(IpAddr::V6), ident) {
            Ok(socket) => Some(Arc::new(socket)),
            Err(err) => {
                tracing::warn!(%err, "no IPv6 ICMP socket; IPv6 peers will count as lost");
                None
            }
        };
        Ok(Self::receiving(Some(v4), v6, ident, counters))
    }

    /// Opens one socket, of `address`'s family, bound to it: the probes of
    /// a named network, which leave from the node's address on it.
    pub fn open_on(address: IpAddr, counters: Arc<Counters>) -> Result<Self, AgentError> {
        let ident: u16 = rand::random();
        let family = match address {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        };
        let socket = EchoSocket::open(family, Some(address), ident)
            .map(Arc::new)
            .map_err(AgentError::IcmpSocket)?;
        let (v4, v6) = match family {
            Family::V4 => (Some(socket), None),
            Family::V6 => (None, Some(socket)),
        };
        Ok(Self::receiving(v4, v6, ident, counters))
    }

    /// Starts a receive task for each socket.
    fn receiving(
        v4: Option<Arc<EchoSocket>>,
        v6: Option<Arc<EchoSocket>>,
        ident: u16,
        counters: Arc<Counters>,
    ) -> Self {
        let receivers = [&v4, &v6]
            .into_iter()
            .flatten()
            .map(|socket| tokio::spawn(receive(Arc::clone(socket), ident, Arc::clone(&counters))))
            .collect();
        Self {
            v4,
            v6,
            ident,
            counters,
            receivers,
        }
    }

    /// Sends one echo request and waits for its reply, until a sweep
    /// ([`Icmp::expire_due`]) past `deadline`; the RTT runs from the
    /// kernel's send stamp to its receive stamp.
    pub async fn probe(
        &self,
        host: IpAddr,
        seq: u16,
        deadline: Instant,
    ) -> Result<Duration, ProbeError> {
        let socket = match host {
            IpAddr::V4(_) => self.v4.as_ref(),
            IpAddr::V6(_) => self.v6.as_ref(),
        }
        .ok_or_else(|| ProbeError::Failed(format!("no ICMP socket for {host}'s family")))?;
        let nonce: u64 = rand::random();
        let packet = echo_request(socket.family, self.ident, seq, nonce);
        let target = SockAddr::from(SocketAddr::new(host, 0));
        let key = (host, seq);
        // Stamped for the early check no later than the probe leaves; the
        // RTT starts at the send.
        let waiter = socket
            .pending
            .expect(key, nonce, SystemTime::now(), deadline);
        let left = match socket.sends.send_to(&socket.socket, &packet, &target).await {
            Ok(left) => self.counters.left_at(left),
            Err(err) => {
                socket.pending.forget(&key);
                return Err(ProbeError::Failed(err.to_string()));
            }
        };
        let received_at = waiter.reply().await?;
        Ok(received_at.duration_since(left).unwrap_or_default())
    }

    /// Times out the probes whose deadline is `now` or earlier; the
    /// earliest deadline of those that still wait.
    pub fn expire_due(&self, now: Instant) -> Option<Instant> {
        let sockets = [&self.v4, &self.v6].into_iter().flatten();
        crate::pending::expire_due_in(sockets.map(|socket| &socket.pending), now)
    }
}

/// Which ICMP echo socket this process may open, as the agent opens them:
/// raw (needs CAP_NET_RAW) or else datagram (needs the process's group in
/// `net.ipv4.ping_group_range`).
#[derive(Debug)]
pub enum EchoAccess {
    /// A raw socket.
    Raw,
    /// A datagram socket; the raw one was refused.
    Datagram {
        /// Why the raw socket was refused.
        raw_refused: io::Error,
    },
    /// Neither: the agent cannot probe.
    Neither {
        /// Why the raw socket was refused.
        raw_refused: io::Error,
        /// Why the datagram socket was refused.
        datagram_refused: io::Error,
    },
}

/// What the agent's echo sockets would get for `family`, without keeping one.
pub fn echo_access(family: Family) -> EchoAccess {
    match new_echo_socket(family) {
        Ok((_, None)) => EchoAccess::Raw,
        Ok((_, Some(raw_refused))) => EchoAccess::Datagram { raw_refused },
        Err((raw_refused, datagram_refused)) => EchoAccess::Neither {
            raw_refused,
            datagram_refused,
        },
    }
}

/// A raw ICMP socket (with no error), or else a datagram one (with why the
/// raw one was refused); both errors when neither opens.
fn new_echo_socket(family: Family) -> Result<(Socket, Option<io::Error>), (io::Error, io::Error)> {
    let (domain, protocol) = match family {
        Family::V4 => (Domain::IPV4, Protocol::ICMPV4),
        Family::V6 => (Domain::IPV6, Protocol::ICMPV6),
    };
    match Socket::new(domain, Type::RAW, Some(protocol)) {
        Ok(socket) => Ok((socket, None)),
        Err(raw_err) => match Socket::new(domain, Type::DGRAM, Some(protocol)) {
            Ok(socket) => Ok((socket, Some(raw_err))),
            Err(dgram_err) => Err((raw_err, dgram_err)),
        },
    }
}

impl EchoSocket {
    fn open(family: Family, bind: Option<IpAddr>, ident: u16) -> io::Result<Self> {
        let (socket, raw_refused) = new_echo_socket(family).map_err(|(raw_err, _)| raw_err)?;
        let raw = raw_refused.is_none();
        if let Some(ip) = bind {
            socket.bind(&SockAddr::from(SocketAddr::new(ip, 0)))?;
        }
        if raw {
            socket.attach_filter(&echo_reply_filter(family, ident))?;
        }
        let sends = StampedSends::on(&socket);
        let socket = kernel_stamps::register(socket)?;
        Ok(Self {
            socket,
            sends,
            family,
            raw,
            pending: Pending::default(),
        })
    }
}

/// Reads replies and hands each, with its kernel timestamp, to its probe.
async fn receive(socket: Arc<EchoSocket>, ident: u16, counters: Arc<Counters>) {
    let mut buffer = [0u8; 2048];
    loop {
        let received = socket
            .socket
            .async_io(Interest::READABLE, |s| kernel_stamps::recv(s, &mut buffer))
            .await;
        let (len, from, stamped) = match received.map(|(len, from, at)| (len, from.ip(), at)) {
            Ok(received) => received,
            Err(err) if err.kind() == ErrorKind::Interrupted => continue,
            Err(err) => {
                counters.receive_error();
                tracing::warn!(%err, "reading ICMP replies");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let header = if socket.raw && socket.family == Family::V4 {
            ipv4_header_len(&buffer[..len])
        } else {
            Some(0)
        };
        let Some(reply) = header.and_then(|h| buffer.get(h..len)) else {
            continue;
        };
        let Some(reply) = parse_echo_reply(reply, socket.family) else {
            continue;
        };
        // Datagram sockets only ever see their own replies, under the
        // identifier the kernel picked.
        if socket.raw && reply.ident != ident {
            continue;
        }
        let received_at = counters.arrived_at(stamped);
        socket.pending.answer(
            &(from, reply.seq),
            reply.nonce,
            received_at,
            received_at,
            &counters,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The echo socket the agent opens here (raw as root, else datagram)
    /// has its requests stamped by the kernel, and a probe of loopback gets
    /// its reply.
    #[tokio::test]
    async fn echo_requests_are_stamped_by_the_kernel_as_they_leave() {
        let socket = match EchoSocket::open(Family::V4, Some(Ipv4Addr::LOCALHOST.into()), 7) {
            Ok(socket) => socket,
            Err(err) => {
                assert!(
                    std::env::var("NETAWARE_REQUIRE_ROOT").as_deref() != Ok("1"),
                    "no echo socket: {err}"
                );
                eprintln!("skipping: no echo socket ({err})");
                return;
            }
        };
        let packet = echo_request(Family::V4, 7, 1, 42);
        let to = SockAddr::from(SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 0));
        let before = SystemTime::now();
        let left = socket
            .sends
            .send_to(&socket.socket, &packet, &to)
            .await
            .unwrap();
        assert!(left.by_kernel && left.at >= before, "{left:?}");

        let icmp = Icmp::open(Some(Ipv4Addr::LOCALHOST), None, Arc::default()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(1);
        let rtt = icmp
            .probe(Ipv4Addr::LOCALHOST.into(), 1, deadline)
            .await
            .unwrap();
        assert!(rtt < Duration::from_millis(50), "{rtt:?}");
        assert_eq!(icmp.expire_due(Instant::now()), None, "nothing waits");
    }
}
