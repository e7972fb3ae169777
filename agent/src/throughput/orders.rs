//! Carries out the collector's throughput orders: a server order arms the
//! token book, a client order runs a test at its start time and hands the
//! result to the session, which sends it inside the next window.
//!
//! An order names its network: the client sends from this node's address
//! on it (bound, so the test leaves by that network's interface) to the
//! peer's address on it. An order for a network this node is not on is
//! refused.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use netaware_core::network::{InvalidNetwork, Network};
use netaware_proto::convert;
use netaware_proto::v1::{ThroughputOrder, ThroughputResult, throughput_order::Role};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::client::{self, Plan};
use super::server::ServerHandle;
use super::tokens::{BookFull, Expected};
use super::wire::MAX_TEST;
use super::{MAX_STREAMS, Outcome, ThroughputError};
use crate::counters::Counters;
use crate::quiet::QuietPeers;
use netaware_runtime::clock::now_ms;

/// Clock difference between agents and the collector that token times
/// tolerate (agents' clocks are NTP-synced on a cluster).
const CLOCK_SKEW_MS: u64 = 2_000;
/// How long before a test probes to its other end stop.
const PAUSE_BEFORE_MS: u64 = 200;
/// How long after the sending ends they stay stopped: the client's tail
/// and the queue draining.
const PAUSE_AFTER_MS: u64 = 500;

/// Carries out orders.
#[derive(Clone, Debug)]
pub struct Orders {
    /// The local server, if this agent runs one.
    pub server: Option<ServerHandle>,
    /// SO_SNDBUF for client streams.
    pub send_buffer: Option<u32>,
    /// The node's addresses: tests on the primary network are sent from
    /// the one of the server's family, which is the address the collector
    /// gave the server.
    pub addresses: Vec<IpAddr>,
    /// The node's address on each named network it is on: tests on one
    /// are sent from it.
    pub networks: Vec<(Network, IpAddr)>,
    /// Probes to the other end pause during a test.
    pub quiet: Arc<QuietPeers>,
    /// Where finished tests go (to the session's next window).
    pub results: mpsc::Sender<ThroughputResult>,
    /// The agent's counters.
    pub counters: Arc<Counters>,
    /// Stops tests in flight.
    pub shutdown: CancellationToken,
}

impl Orders {
    /// Acts on one order.
    pub fn handle(&self, order: ThroughputOrder) {
        let checked = check(&order).and_then(|(token, peer, network)| {
            let source = self.source(&network, peer)?;
            Ok((token, peer, source))
        });
        if checked.is_ok() {
            // While data flows: from just before the start (the probes of
            // the last RTT before it would meet the first bytes) to the end
            // of the sending and its drain, not to the end of the slot.
            let sending = u64::from(order.omit_ms) + u64::from(order.duration_ms);
            self.quiet.pause(
                &order.peer,
                order.start_unix_ms.saturating_sub(PAUSE_BEFORE_MS),
                (order.start_unix_ms + sending + PAUSE_AFTER_MS).min(order.expires_unix_ms),
            );
        }
        let outcome = match (checked, order.role()) {
            (Err(reason), _) => Err(reason),
            (Ok((token, peer, _)), Role::Server) => self.arm(&order, token, peer),
            (Ok((token, peer, source)), Role::Client) => {
                self.spawn_client(order, token, peer, source);
                Ok(())
            }
            (Ok(_), Role::Unspecified) => Err(OrderError::NoRole),
        };
        if let Err(reason) = outcome {
            self.counters
                .throughput_orders_refused
                .fetch_add(1, Relaxed);
            tracing::warn!(%reason, "throughput order not carried out");
        }
    }

    fn arm(
        &self,
        order: &ThroughputOrder,
        token: [u8; 16],
        client: IpAddr,
    ) -> Result<(), OrderError> {
        let server = self.server.as_ref().ok_or(OrderError::NoServer)?;
        Ok(server.expect(Expected {
            token,
            client: Some(client),
            not_before: order.start_unix_ms.saturating_sub(CLOCK_SKEW_MS),
            expires: order.expires_unix_ms.saturating_add(CLOCK_SKEW_MS),
        })?)
    }

    /// The address a test on `network` to `peer` is sent from: on the
    /// primary network the node's address of the peer's family (`None`:
    /// the kernel's choice), on a named network the node's address on it.
    fn source(&self, network: &Network, peer: IpAddr) -> Result<Option<IpAddr>, OrderError> {
        if !network.is_named() {
            let family = |a: &&IpAddr| a.is_ipv4() == peer.is_ipv4();
            return Ok(self.addresses.iter().find(family).copied());
        }
        self.networks
            .iter()
            .find(|(n, _)| n == network)
            .map(|&(_, address)| Some(address))
            .ok_or_else(|| OrderError::NotOnNetwork(network.clone()))
    }

    fn spawn_client(
        &self,
        order: ThroughputOrder,
        token: [u8; 16],
        server: IpAddr,
        source: Option<IpAddr>,
    ) {
        let this = self.clone();
        tokio::spawn(async move {
            let wait = order.start_unix_ms.saturating_sub(now_ms());
            tokio::select! {
                () = this.shutdown.cancelled() => return,
                () = tokio::time::sleep(Duration::from_millis(wait)) => {}
            }
            let plan = Plan {
                server: SocketAddr::new(server, u16::try_from(order.port).unwrap_or(0)),
                source,
                token,
                streams: u8::try_from(order.streams).unwrap_or(1),
                omit: Duration::from_millis(order.omit_ms.into()),
                duration: Duration::from_millis(order.duration_ms.into()),
                send_buffer: this.send_buffer,
            };
            let outcome = tokio::select! {
                () = this.shutdown.cancelled() => return,
                outcome = client::run(&plan) => outcome,
            };
            this.counters.throughput_tests.fetch_add(1, Relaxed);
            if outcome.is_err() {
                this.counters.throughput_failures.fetch_add(1, Relaxed);
            }
            if let Err(ThroughputError::Claim(_)) = &outcome {
                this.counters
                    .throughput_claims_refused
                    .fetch_add(1, Relaxed);
            }
            match &outcome {
                Ok(o) => {
                    tracing::info!(peer = %order.peer, goodput_mbps = o.goodput_bps / 1e6, "throughput test done")
                }
                Err(err) => tracing::warn!(peer = %order.peer, %err, "throughput test failed"),
            }
            let result = result(&order, outcome.map_err(|e| e.to_string()), now_ms());
            let _ = this.results.send(result).await;
        });
    }
}

/// Why an order is not carried out.
#[derive(Debug, thiserror::Error)]
pub enum OrderError {
    /// The token is not 16 bytes.
    #[error("token of {0} bytes, not 16")]
    Token(usize),
    /// The peer's address does not parse.
    #[error("peer address {0:?} is not an IP address")]
    PeerAddress(String),
    /// The network's name does not parse.
    #[error(transparent)]
    Network(#[from] InvalidNetwork),
    /// An order for a network this node has no address on.
    #[error("a test on network {0}, which this node is not on")]
    NotOnNetwork(Network),
    /// The test's length or its streams are out of range.
    #[error("test length or streams out of range")]
    OutOfRange,
    /// A client order without a usable port.
    #[error("port {0} out of range")]
    Port(u32),
    /// The order says neither client nor server.
    #[error("order without a role")]
    NoRole,
    /// A server order to an agent that runs no throughput server.
    #[error("server order, but this agent runs no throughput server")]
    NoServer,
    /// The server expects too many tests already.
    #[error(transparent)]
    BookFull(#[from] BookFull),
}

/// The token, the peer's address and the network of a sound order.
fn check(order: &ThroughputOrder) -> Result<([u8; 16], IpAddr, Network), OrderError> {
    let token: [u8; 16] = order
        .token
        .as_slice()
        .try_into()
        .map_err(|_| OrderError::Token(order.token.len()))?;
    let address = order
        .peer_address
        .parse()
        .map_err(|_| OrderError::PeerAddress(order.peer_address.clone()))?;
    let network = convert::network_from_wire(&order.network)?;
    let test = Duration::from_millis(u64::from(order.omit_ms) + u64::from(order.duration_ms));
    let streams_ok = (1..=u32::from(MAX_STREAMS)).contains(&order.streams);
    if order.duration_ms == 0 || test > MAX_TEST || !streams_ok {
        return Err(OrderError::OutOfRange);
    }
    if order.role() == Role::Client && !(1..=u32::from(u16::MAX)).contains(&order.port) {
        return Err(OrderError::Port(order.port));
    }
    Ok((token, address, network))
}

/// The result message for a test.
pub fn result(
    order: &ThroughputOrder,
    outcome: Result<Outcome, String>,
    end_unix_ms: u64,
) -> ThroughputResult {
    let mut result = ThroughputResult {
        test_id: order.test_id,
        peer: order.peer.clone(),
        end_unix_ms,
        streams: order.streams,
        ..ThroughputResult::default()
    };
    match outcome {
        Ok(outcome) => {
            result.goodput_bps = outcome.goodput_bps;
            result.bytes = outcome.bytes;
            result.measured_ms = u32::try_from(outcome.measured.as_millis()).unwrap_or(u32::MAX);
            result.retransmits = outcome.retransmits;
            result.tcp_rtt_ms = outcome.tcp_rtt_ms;
        }
        Err(error) => result.error = error,
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn orders() -> Orders {
        Orders {
            server: None,
            send_buffer: None,
            addresses: vec!["10.0.0.1".parse().unwrap(), "fd00::1".parse().unwrap()],
            networks: vec![(
                Network::parse("rail-0").unwrap(),
                "172.16.0.1".parse().unwrap(),
            )],
            quiet: Arc::default(),
            results: mpsc::channel(1).0,
            counters: Arc::default(),
            shutdown: CancellationToken::new(),
        }
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_test_leaves_from_this_nodes_address_on_the_orders_network() {
        let orders = orders();
        let primary = Network::primary();
        assert_eq!(
            orders.source(&primary, ip("10.0.0.2")).unwrap(),
            Some(ip("10.0.0.1"))
        );
        assert_eq!(
            orders.source(&primary, ip("fd00::2")).unwrap(),
            Some(ip("fd00::1"))
        );
        let rail = Network::parse("rail-0").unwrap();
        assert_eq!(
            orders.source(&rail, ip("172.16.0.2")).unwrap(),
            Some(ip("172.16.0.1"))
        );
        let elsewhere = Network::parse("rail-1").unwrap();
        assert!(matches!(
            orders.source(&elsewhere, ip("172.17.0.2")),
            Err(OrderError::NotOnNetwork(n)) if n == elsewhere
        ));
    }

    #[test]
    fn an_order_for_a_network_this_node_is_not_on_is_refused_and_counted() {
        let orders = orders();
        let order = ThroughputOrder {
            test_id: 1,
            role: Role::Client.into(),
            peer: "b".into(),
            peer_address: "172.17.0.2".into(),
            port: 7471,
            token: vec![1; 16],
            duration_ms: 1_000,
            streams: 1,
            network: "rail-1".into(),
            ..ThroughputOrder::default()
        };
        assert!(matches!(check(&order), Ok((_, _, n)) if n.as_str() == "rail-1"));
        orders.handle(order.clone());
        assert_eq!(orders.counters.throughput_orders_refused.load(Relaxed), 1);
        let unreadable = ThroughputOrder {
            network: "Rail 1".into(),
            ..order
        };
        assert!(matches!(check(&unreadable), Err(OrderError::Network(_))));
    }
}
