//! The agent's probers side by side, one call for any transport: what the
//! measuring loop asks to probe a peer by ICMP, UDP or a TCP handshake, and
//! which of them can reach a given peer.
//!
//! Probes leave from the agent's address on the peer's network: the
//! primary sockets (one per family) for the primary network and its other
//! family's, and sockets bound to the node's address on each named network
//! (a rail), so that a rail's probes cross that rail and not the frontend.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use netaware_core::network::Network;
use netaware_core::transport::{Transport, TransportSet};
use netaware_proto::convert;
use netaware_proto::v1::Peer;

use crate::icmp::Icmp;
use crate::pending::ProbeError;
use crate::tcp_probe;
use crate::udp::Udp;

/// The probers of one source: a transport whose socket could not be
/// opened is `None`, and is never planned.
#[derive(Debug)]
pub struct Source {
    /// ICMP echo.
    pub icmp: Option<Icmp>,
    /// UDP (STAMP) probes.
    pub udp: Option<Udp>,
    /// The addresses probes leave from: TCP handshakes leave from the
    /// first of the peer's family.
    pub local: Vec<IpAddr>,
}

/// The agent's probers: the primary source, and one per named network.
#[derive(Debug)]
pub struct Probers {
    /// For the primary network and its other family's.
    pub primary: Source,
    /// For each named network the node is on.
    pub named: Vec<(Network, Source)>,
}

impl Probers {
    /// The source that probes `peer`'s entry: its network's, `None` for a
    /// named network this node is not on (the collector never sends one).
    fn source(&self, peer: &Peer) -> Option<&Source> {
        match convert::network_from_wire(&peer.network) {
            Ok(network) if network.is_named() => self
                .named
                .iter()
                .find(|(n, _)| *n == network)
                .map(|(_, source)| source),
            Ok(_) => Some(&self.primary),
            Err(_) => None,
        }
    }

    /// The transports that can reach `peer`.
    pub fn usable(&self, peer: &Peer) -> TransportSet {
        let mut usable = TransportSet::EMPTY;
        let Some(source) = self.source(peer) else {
            return usable;
        };
        if source.icmp.is_some() {
            usable.insert(Transport::Icmp);
        }
        if source.udp.is_some() && port(peer.stamp_port).is_some() {
            usable.insert(Transport::Udp);
        }
        if port(peer.tcp_port).is_some() {
            usable.insert(Transport::Tcp);
        }
        usable
    }

    /// One probe to `peer` at `host` by `transport`, from this node's
    /// address on the peer's network. An ICMP or UDP probe waits for its
    /// reply until a sweep ([`Probers::expire_due`]) past `deadline`; a
    /// handshake times out at `deadline` by itself.
    pub async fn probe(
        &self,
        transport: Transport,
        host: IpAddr,
        peer: &Peer,
        seq: u16,
        deadline: Instant,
    ) -> Result<Duration, ProbeError> {
        let unusable = || ProbeError::Failed(format!("{transport} cannot reach {}", peer.name));
        let source = self.source(peer).ok_or_else(unusable)?;
        match transport {
            Transport::Icmp => {
                let icmp = source.icmp.as_ref().ok_or_else(unusable)?;
                icmp.probe(host, seq, deadline).await
            }
            Transport::Udp => {
                let udp = source.udp.as_ref().ok_or_else(unusable)?;
                let port = port(peer.stamp_port).ok_or_else(unusable)?;
                udp.probe(SocketAddr::new(host, port), deadline).await
            }
            Transport::Tcp => {
                let port = port(peer.tcp_port).ok_or_else(unusable)?;
                let local = source
                    .local
                    .iter()
                    .copied()
                    .find(|a| a.is_ipv4() == host.is_ipv4());
                tcp_probe::probe(local, SocketAddr::new(host, port), deadline).await
            }
        }
    }

    /// Times out every ICMP and UDP probe whose deadline is `now` or
    /// earlier; the earliest deadline of those that still wait.
    pub fn expire_due(&self, now: Instant) -> Option<Instant> {
        let sources = std::iter::once(&self.primary).chain(self.named.iter().map(|(_, s)| s));
        sources
            .flat_map(|source| {
                let icmp = source.icmp.as_ref().and_then(|icmp| icmp.expire_due(now));
                let udp = source.udp.as_ref().and_then(|udp| udp.expire_due(now));
                [icmp, udp]
            })
            .flatten()
            .min()
    }
}

/// A port from the wire; `None` for 0 (none) or one out of range.
fn port(value: u32) -> Option<u16> {
    u16::try_from(value).ok().filter(|p| *p != 0)
}
