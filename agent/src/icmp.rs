//! ICMP echo over surge-ping: one client per address family, shared by all
//! probes of the agent.
//!
//! Raw sockets need CAP_NET_RAW; without it surge-ping falls back to the
//! unprivileged datagram ICMP socket, which Linux allows only to the groups
//! in `net.ipv4.ping_group_range`. Either way one socket serves every peer,
//! and replies are matched to probes by (host, identifier, sequence).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

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
        let client = |kind, bind: Option<IpAddr>| {
            let mut config = Config::builder()
                .kind(kind)
                .sock_type_hint(socket2::Type::RAW);
            if let Some(ip) = bind {
                config = config.bind(SocketAddr::new(ip, 0));
            }
            Client::new(&config.build())
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
            ident: PingIdentifier(rand::random()),
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
