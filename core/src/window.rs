//! Folding probes into the windows an agent reports: what the agent
//! measures, and what the simulator's fleet measures with the same code.
//!
//! Pure: the prober tells an [`OpenWindow`] what happened to each
//! [`Probe`], in any order, and [`OpenWindow::finish`] turns the window
//! into one [`PeerWindow`] per peer: probes sent and answered, RTT
//! quantiles by nearest rank ([`crate::stats`]), and jitter as the mean
//! absolute difference between consecutive replies in the order the probes
//! were sent. [`PeerWindow::checked`] is how a peer window enters the
//! matrix, on the collector and in the simulator alike.

use std::collections::BTreeMap;

use crate::UnixMillis;
use crate::matrix::{OneWayWindow, PairWindow, RttStats, WindowError};
use crate::network::Network;
use crate::stats::nearest_rank;
use crate::transport::{Transport, TransportSet};

/// What became of one probe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Probe {
    /// Increasing per agent: orders probes by the time they were sent.
    pub order: u64,
    /// Round-trip time in ms, or `None` when no reply came in time.
    pub rtt_ms: Option<f64>,
    /// How it was sent.
    pub transport: Transport,
    /// What it was for.
    pub purpose: Purpose,
}

/// Why a probe was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// For the window's figures.
    Measure,
    /// To see whether another transport gets through (one the agent
    /// prefers, or, while the one measuring goes unanswered, one it
    /// prefers less): it decides which transport measures, and never
    /// enters the figures.
    Scout,
}

impl Probe {
    /// A probe for the window's figures.
    pub fn measured(order: u64, rtt_ms: Option<f64>, transport: Transport) -> Self {
        Self {
            order,
            rtt_ms,
            transport,
            purpose: Purpose::Measure,
        }
    }
}

/// What one agent measured towards one peer over one window: the figures
/// it reports (`netaware.v1.PeerWindow` on the wire).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PeerWindow {
    /// Peer name.
    pub peer: String,
    /// The network the peer was probed over.
    pub network: Network,
    /// Probes sent.
    pub sent: u32,
    /// Replies received in time.
    pub received: u32,
    /// RTT figures over the replies (all zero without replies).
    pub rtt: RttStats,
    /// The transport of the probes counted here.
    pub probe: Transport,
    /// Transports tried towards the peer in the window that got no reply
    /// while `probe` did: filtered on the way, not lost.
    pub filtered: TransportSet,
    /// Echo requests from the peer that its sequence numbers say it sent.
    pub inbound_expected: u32,
    /// Of those, the ones that arrived.
    pub inbound_received: u32,
}

impl PeerWindow {
    /// The window as the matrix keeps it, checked, for a window that ended
    /// at `end`: the pair towards the peer, and the one-way counts of the
    /// peer's requests towards the reporting node when there are any.
    pub fn checked(
        &self,
        end: UnixMillis,
    ) -> Result<(PairWindow, Option<OneWayWindow>), WindowError> {
        let pair = PairWindow::new(end, self.sent, self.received, self.rtt)?
            .probed_by(self.probe, self.filtered);
        let one_way = if self.inbound_expected > 0 || self.inbound_received > 0 {
            Some(OneWayWindow::new(
                end,
                self.inbound_expected,
                self.inbound_received,
            )?)
        } else {
            None
        };
        Ok((pair, one_way))
    }
}

#[derive(Debug, Clone, Default)]
struct PeerRecord {
    probes: Vec<Probe>,
    inbound_expected: u32,
    inbound_received: u32,
}

/// A window still collecting probes, per peer and network.
#[derive(Debug, Clone, Default)]
pub struct OpenWindow {
    peers: BTreeMap<(String, Network), PeerRecord>,
}

impl OpenWindow {
    /// An empty window.
    pub fn new() -> Self {
        Self::default()
    }

    fn peer(&mut self, peer: &str, network: &Network) -> &mut PeerRecord {
        self.peers
            .entry((peer.to_owned(), network.clone()))
            .or_default()
    }

    /// Records one probe to `peer` over `network`.
    pub fn record(&mut self, peer: &str, network: &Network, probe: Probe) {
        self.peer(peer, network).probes.push(probe);
    }

    /// Records echo requests from `peer` (over the primary network):
    /// `expected` sent by its count, `received` arrived.
    pub fn record_inbound(&mut self, peer: &str, expected: u32, received: u32) {
        let record = self.peer(peer, &Network::primary());
        record.inbound_expected = record.inbound_expected.saturating_add(expected);
        record.inbound_received = record.inbound_received.saturating_add(received);
    }

    /// Whether no probe was recorded.
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// The window of every peer probed, by peer name and network.
    pub fn finish(self) -> Vec<PeerWindow> {
        self.peers
            .into_iter()
            .map(|((peer, network), mut record)| {
                record.probes.sort_by_key(|p| p.order);
                let (probe, filtered) = transports(&record.probes);
                let counted: Vec<Probe> = record
                    .probes
                    .iter()
                    .filter(|p| p.purpose == Purpose::Measure && p.transport == probe)
                    .copied()
                    .collect();
                PeerWindow {
                    network,
                    probe,
                    filtered,
                    // Late arrivals can outnumber the gaps seen in a window.
                    inbound_expected: record.inbound_expected,
                    inbound_received: record.inbound_received.min(record.inbound_expected),
                    ..figures(peer, &counted)
                }
            })
            .collect()
    }
}

/// The transport a peer's window counts (that of its newest measuring
/// probe: an agent that changed transport in the window counts only the
/// new one's probes), and the more preferred transports that got no reply
/// in the window while that one did. A less preferred one is tried only
/// while the counted one goes unanswered: its scout lost then says
/// nothing of a filter.
fn transports(in_order: &[Probe]) -> (Transport, TransportSet) {
    let counted = in_order
        .iter()
        .rev()
        .find(|p| p.purpose == Purpose::Measure)
        .map_or(Transport::default(), |p| p.transport);
    let answered = |t: Transport| {
        in_order
            .iter()
            .any(|p| p.transport == t && p.rtt_ms.is_some())
    };
    let mut filtered = TransportSet::EMPTY;
    if answered(counted) {
        for p in in_order {
            if p.transport < counted && !answered(p.transport) {
                filtered.insert(p.transport);
            }
        }
    }
    (counted, filtered)
}

fn figures(peer: String, probes: &[Probe]) -> PeerWindow {
    let in_order: Vec<f64> = probes.iter().filter_map(|p| p.rtt_ms).collect();
    let sent = u32::try_from(probes.len()).unwrap_or(u32::MAX);
    let received = u32::try_from(in_order.len()).unwrap_or(u32::MAX);
    if in_order.is_empty() {
        return PeerWindow {
            peer,
            sent,
            ..PeerWindow::default()
        };
    }
    let jitter = if in_order.len() < 2 {
        0.0
    } else {
        let diffs: f64 = in_order.windows(2).map(|w| (w[1] - w[0]).abs()).sum();
        diffs / (in_order.len() - 1) as f64
    };
    let mut sorted = in_order;
    sorted.sort_by(f64::total_cmp);
    PeerWindow {
        peer,
        sent,
        received,
        rtt: RttStats {
            min: sorted[0],
            median: nearest_rank(&sorted, 0.5),
            p90: nearest_rank(&sorted, 0.9),
            p99: nearest_rank(&sorted, 0.99),
            max: sorted[sorted.len() - 1],
            jitter,
        },
        ..PeerWindow::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn probe(order: u64, rtt_ms: Option<f64>) -> Probe {
        Probe::measured(order, rtt_ms, Transport::Icmp)
    }

    #[test]
    fn one_peer_over_two_networks_gives_two_windows_never_mixed() {
        let ipv6 = Network::parse("primary-ipv6").unwrap();
        let mut window = OpenWindow::new();
        window.record("b", &Network::primary(), probe(1, Some(1.0)));
        window.record("b", &ipv6, probe(2, Some(5.0)));
        window.record("b", &ipv6, probe(3, None));
        let windows = window.finish();
        assert_eq!(windows.len(), 2);
        let of = |network: &Network| windows.iter().find(|w| &w.network == network).unwrap();
        let primary = of(&Network::primary());
        assert_eq!(
            (primary.sent, primary.received, primary.rtt.median),
            (1, 1, 1.0)
        );
        let other = of(&ipv6);
        assert_eq!((other.sent, other.received, other.rtt.median), (2, 1, 5.0));
    }

    #[test]
    fn a_window_counts_one_transport_and_names_what_was_filtered() {
        let mut window = OpenWindow::new();
        // ICMP lost twice, then the agent moved to UDP, which answers;
        // a scout back to ICMP is lost too, and a TCP scout answered.
        window.record("b", &Network::primary(), probe(1, None));
        window.record("b", &Network::primary(), probe(2, None));
        window.record(
            "b",
            &Network::primary(),
            Probe::measured(3, Some(1.0), Transport::Udp),
        );
        window.record(
            "b",
            &Network::primary(),
            Probe::measured(4, None, Transport::Udp),
        );
        let scout = |order, rtt_ms, transport| Probe {
            purpose: Purpose::Scout,
            ..Probe::measured(order, rtt_ms, transport)
        };
        window.record("b", &Network::primary(), scout(5, None, Transport::Icmp));
        window.record(
            "b",
            &Network::primary(),
            scout(6, Some(9.0), Transport::Tcp),
        );
        window.record(
            "b",
            &Network::primary(),
            Probe::measured(7, Some(3.0), Transport::Udp),
        );
        let b = &window.finish()[0];
        assert_eq!(b.probe, Transport::Udp);
        assert_eq!((b.sent, b.received, b.rtt.max), (3, 2, 3.0));
        assert_eq!(b.filtered, TransportSet::of([Transport::Icmp]));
        // Nothing answered at all: nothing is called filtered, it is lost.
        let mut silent = OpenWindow::new();
        silent.record("c", &Network::primary(), probe(1, None));
        silent.record(
            "c",
            &Network::primary(),
            Probe::measured(2, None, Transport::Udp),
        );
        let c = &silent.finish()[0];
        assert_eq!((c.probe, c.sent, c.received), (Transport::Udp, 1, 0));
        assert!(c.filtered.is_empty());
        let (pair, _) = b.checked(1).unwrap();
        assert_eq!((pair.probe, pair.filtered), (b.probe, b.filtered));
    }

    #[test]
    fn figures_of_a_window() {
        let mut window = OpenWindow::new();
        // Arrive out of order; jitter follows the order the probes were sent.
        for (order, rtt) in [
            (3, Some(3.0)),
            (1, Some(1.0)),
            (2, None),
            (4, Some(2.0)),
            (5, Some(4.0)),
        ] {
            window.record("b", &Network::primary(), probe(order, rtt));
        }
        let figures = window.finish();
        assert_eq!(figures.len(), 1);
        let b = &figures[0];
        assert_eq!((b.sent, b.received), (5, 4));
        assert_eq!((b.rtt.min, b.rtt.median, b.rtt.max), (1.0, 2.0, 4.0));
        assert_eq!(b.rtt.p90, 4.0);
        // 1 -> 3 -> 2 -> 4: |2| + |1| + |2| over 3.
        assert!((b.rtt.jitter - 5.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn a_silent_peer_has_sent_probes_and_no_figures() {
        let mut window = OpenWindow::new();
        window.record("c", &Network::primary(), probe(1, None));
        window.record("c", &Network::primary(), probe(2, None));
        let c = &window.finish()[0];
        assert_eq!((c.sent, c.received, c.rtt.median), (2, 0, 0.0));
    }

    #[test]
    fn inbound_counts_add_up_and_never_exceed_expected() {
        let mut window = OpenWindow::new();
        window.record_inbound("d", 3, 1);
        window.record_inbound("d", 0, 1);
        window.record_inbound("e", 1, 2);
        let figures = window.finish();
        assert_eq!(
            (figures[0].inbound_expected, figures[0].inbound_received),
            (3, 2)
        );
        assert_eq!(
            (figures[1].inbound_expected, figures[1].inbound_received),
            (1, 1)
        );
        assert_eq!(figures[1].sent, 0);
    }

    #[test]
    fn a_peer_window_is_checked_into_the_matrix_form() {
        let mut window = OpenWindow::new();
        window.record("b", &Network::primary(), probe(1, Some(2.0)));
        window.record("b", &Network::primary(), probe(2, None));
        window.record_inbound("b", 4, 3);
        let b = &window.finish()[0];
        let (pair, one_way) = b.checked(5_000).unwrap();
        assert_eq!((pair.end, pair.sent, pair.received), (5_000, 2, 1));
        assert_eq!(pair.rtt.map(|r| r.median), Some(2.0));
        let one_way = one_way.expect("requests were seen");
        assert_eq!((one_way.expected, one_way.received), (4, 3));
        // Without inbound counts there is no one-way window; a broken
        // window is refused with the reason.
        let silent = PeerWindow {
            peer: "c".into(),
            sent: 1,
            ..PeerWindow::default()
        };
        assert_eq!(silent.checked(1).unwrap().1, None);
        let broken = PeerWindow {
            received: 2,
            ..silent
        };
        assert!(broken.checked(1).is_err());
    }

    proptest! {
        #[test]
        fn quantiles_are_ordered_and_counts_add_up(
            rtts in prop::collection::vec(prop::option::of(0.0f64..1000.0), 1..200)
        ) {
            let mut window = OpenWindow::new();
            for (i, rtt) in rtts.iter().enumerate() {
                window.record("p", &Network::primary(), probe(i as u64, *rtt));
            }
            let f = &window.finish()[0];
            prop_assert_eq!(f.sent as usize, rtts.len());
            prop_assert_eq!(f.received as usize, rtts.iter().flatten().count());
            prop_assert!(f.rtt.min <= f.rtt.median && f.rtt.median <= f.rtt.p90);
            prop_assert!(f.rtt.p90 <= f.rtt.p99 && f.rtt.p99 <= f.rtt.max);
            prop_assert!(f.rtt.jitter >= 0.0 && f.rtt.jitter <= f.rtt.max - f.rtt.min);
        }
    }
}
