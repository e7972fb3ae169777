//! ICMP echo over surge-ping: one client per address family, shared by all
//! probes of the agent.
//!
//! Raw sockets need CAP_NET_RAW; without it surge-ping falls back to the
//! unprivileged datagram ICMP socket, which Linux allows only to the groups
//! in `net.ipv4.ping_group_range`. Either way one socket serves every peer,
//! and replies are matched to probes by (host, identifier, sequence).
//!
//! A raw ICMP socket receives every ICMP packet the host gets: the echo
//! requests of every other agent probing this node, and the replies meant
//! for them. A classic BPF filter in the kernel passes only echo replies
//! carrying this agent's identifier, so the agent never wakes up for the
//! rest (see BENCHMARKS.md for what that saves).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::BorrowedFd;
use std::time::Duration;

use socket2::{SockFilter, SockRef};
use surge_ping::{Client, Config, ICMP, PingIdentifier, PingSequence, SurgeError};

use crate::AgentError;

/// Bytes of payload per echo request, as ping(8) sends by default.
const PAYLOAD: [u8; 56] = [0; 56];

/// What a single probe can end in besides a reply.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// No reply within the timeout: counted as loss.
    #[error("no reply within the timeout")]
    Timeout,
    /// The probe could not be sent (counted as loss too).
    #[error("probe failed: {0}")]
    Failed(String),
}

/// The agent's ICMP sockets.
pub struct Icmp {
    v4: Client,
    v6: Option<Client>,
    ident: PingIdentifier,
}

impl Icmp {
    /// Opens the sockets, bound to the agent's own addresses when given so
    /// that probes leave from the address peers know the agent by.
    pub fn open(bind_v4: Option<Ipv4Addr>, bind_v6: Option<Ipv6Addr>) -> Result<Self, AgentError> {
        let ident: u16 = rand::random();
        let client = |kind, bind: Option<IpAddr>| {
            let mut config = Config::builder()
                .kind(kind)
                .sock_type_hint(socket2::Type::RAW);
            if let Some(ip) = bind {
                config = config.bind(SocketAddr::new(ip, 0));
            }
            let client = Client::new(&config.build())?;
            let socket = client.get_socket();
            if socket.get_type() == socket2::Type::RAW {
                // SAFETY: the descriptor belongs to `client`, which outlives
                // this borrow.
                let fd = unsafe { BorrowedFd::borrow_raw(socket.get_native_sock()) };
                SockRef::from(&fd).attach_filter(&echo_reply_filter(kind, ident))?;
            }
            Ok::<_, std::io::Error>(client)
        };
        let v4 = client(ICMP::V4, bind_v4.map(IpAddr::V4)).map_err(AgentError::IcmpSocket)?;
        let v6 = match client(ICMP::V6, bind_v6.map(IpAddr::V6)) {
            Ok(client) => Some(client),
            Err(err) => {
                tracing::warn!(%err, "no IPv6 ICMP socket; IPv6 peers will count as lost");
                None
            }
        };
        Ok(Self {
            v4,
            v6,
            ident: PingIdentifier(ident),
        })
    }

    /// Sends one echo request and waits for its reply.
    pub async fn probe(
        &self,
        host: IpAddr,
        seq: u16,
        timeout: Duration,
    ) -> Result<Duration, ProbeError> {
        let client = match host {
            IpAddr::V4(_) => &self.v4,
            IpAddr::V6(_) => self
                .v6
                .as_ref()
                .ok_or_else(|| ProbeError::Failed("no IPv6 socket".into()))?,
        };
        let mut pinger = client.pinger(host, self.ident).await;
        pinger.timeout(timeout);
        match pinger.ping(PingSequence(seq), &PAYLOAD).await {
            Ok((_, rtt)) => Ok(rtt),
            Err(SurgeError::Timeout { .. }) => Err(ProbeError::Timeout),
            Err(err) => Err(ProbeError::Failed(err.to_string())),
        }
    }
}

// Classic BPF opcodes (linux/filter.h).
const BPF_LDX_B_MSH: u16 = 0xb1; // X = 4 * (P[k] & 0xf): the IPv4 header length
const BPF_LD_B_IND: u16 = 0x50; // A = P[X + k], one byte
const BPF_LD_H_IND: u16 = 0x48; // A = P[X + k], two bytes, network order
const BPF_JEQ_K: u16 = 0x15; // if A == k skip jt else skip jf
const BPF_RET_K: u16 = 0x06; // accept k bytes (0 drops)
const BPF_LDX_IMM: u16 = 0x01; // X = k

/// A filter that passes only echo replies with identifier `ident`.
/// IPv4 raw sockets see the IP header first; IPv6 ones start at ICMPv6.
fn echo_reply_filter(kind: ICMP, ident: u16) -> Vec<SockFilter> {
    let (header, echo_reply) = match kind {
        ICMP::V4 => (SockFilter::new(BPF_LDX_B_MSH, 0, 0, 0), 0),
        ICMP::V6 => (SockFilter::new(BPF_LDX_IMM, 0, 0, 0), 129),
    };
    vec![
        header,
        SockFilter::new(BPF_LD_B_IND, 0, 0, 0),
        SockFilter::new(BPF_JEQ_K, 0, 3, echo_reply),
        SockFilter::new(BPF_LD_H_IND, 0, 0, 4),
        SockFilter::new(BPF_JEQ_K, 0, 1, u32::from(ident)),
        SockFilter::new(BPF_RET_K, 0, 0, 0xffff),
        SockFilter::new(BPF_RET_K, 0, 0, 0),
    ]
}
