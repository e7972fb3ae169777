//! The agent's probers side by side, one call for any transport: what the
//! measuring loop asks to probe a peer by ICMP, UDP or a TCP handshake, and
//! which of them can reach a given peer.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use netaware_core::transport::{Transport, TransportSet};
use netaware_proto::v1::Peer;

use crate::icmp::Icmp;
use crate::pending::ProbeError;
use crate::tcp_probe;
use crate::udp::Udp;

/// The agent's probers; a transport whose socket could not be opened is
/// `None`, and is never planned.
#[derive(Debug)]
pub struct Probers {
    /// ICMP echo.
    pub icmp: Option<Icmp>,
    /// UDP (STAMP) probes.
    pub udp: Option<Udp>,
    /// The agent's addresses: TCP handshakes leave from the first of the
    /// peer's family.
    pub local: Vec<IpAddr>,
}

impl Probers {
    /// The transports that can reach `peer`.
    pub fn usable(&self, peer: &Peer) -> TransportSet {
        let mut usable = TransportSet::EMPTY;
        if self.icmp.is_some() {
            usable.insert(Transport::Icmp);
        }
        if self.udp.is_some() && port(peer.stamp_port).is_some() {
            usable.insert(Transport::Udp);
        }
        if port(peer.tcp_port).is_some() {
            usable.insert(Transport::Tcp);
        }
        usable
    }

    /// One probe to `peer` at `host` by `transport`.
    pub async fn probe(
        &self,
        transport: Transport,
        host: IpAddr,
        peer: &Peer,
        seq: u16,
        timeout: Duration,
    ) -> Result<Duration, ProbeError> {
        let unusable = || ProbeError::Failed(format!("{transport} cannot reach {}", peer.name));
        match transport {
            Transport::Icmp => {
                let icmp = self.icmp.as_ref().ok_or_else(unusable)?;
                icmp.probe(host, seq, timeout).await
            }
            Transport::Udp => {
                let udp = self.udp.as_ref().ok_or_else(unusable)?;
                let port = port(peer.stamp_port).ok_or_else(unusable)?;
                udp.probe(SocketAddr::new(host, port), timeout).await
            }
            Transport::Tcp => {
                let port = port(peer.tcp_port).ok_or_else(unusable)?;
                let local = self
                    .local
                    .iter()
                    .copied()
                    .find(|a| a.is_ipv4() == host.is_ipv4());
                tcp_probe::probe(local, SocketAddr::new(host, port), timeout).await
            }
        }
    }
}

/// A port from the wire; `None` for 0 (none) or one out of range.
fn port(value: u32) -> Option<u16> {
    u16::try_from(value).ok().filter(|p| *p != 0)
}
