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
use crate::stats::nearest_rank;

/// What became of one probe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Probe {
    /// Increasing per agent: orders probes by the time they were sent.
    pub order: u64,
    /// Round-trip time in ms, or `None` when no reply came in time.
    pub rtt_ms: Option<f64>,
}

/// What one agent measured towards one peer over one window: the figures
/// it reports (`netaware.v1.PeerWindow` on the wire).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PeerWindow {
    /// Peer name.
    pub peer: String,
    /// Probes sent.
    pub sent: u32,
    /// Replies received in time.
    pub received: u32,
    /// RTT figures over the replies (all zero without replies).
    pub rtt: RttStats,
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
        let pair = PairWindow::new(end, self.sent, self.received, self.rtt)?;
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

/// A window still collecting probes, per peer.
#[derive(Debug, Clone, Default)]
pub struct OpenWindow {
    peers: BTreeMap<String, PeerRecord>,
}

impl OpenWindow {
    /// An empty window.
    pub fn new() -> Self {
        Self::default()
    }

    fn peer(&mut self, peer: &str) -> &mut PeerRecord {
        if !self.peers.contains_key(peer) {
            self.peers.insert(peer.to_owned(), PeerRecord::default());
        }
        self.peers.get_mut(peer).expect("just inserted")
    }

    /// Records one probe to `peer`.
    pub fn record(&mut self, peer: &str, probe: Probe) {
        self.peer(peer).probes.push(probe);
    }

    /// Records echo requests from `peer`: `expected` sent by its count,
    /// `received` arrived.
    pub fn record_inbound(&mut self, peer: &str, expected: u32, received: u32) {
        let record = self.peer(peer);
        record.inbound_expected = record.inbound_expected.saturating_add(expected);
        record.inbound_received = record.inbound_received.saturating_add(received);
    }

    /// Whether no probe was recorded.
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// The window of every peer probed, by peer name.
    pub fn finish(self) -> Vec<PeerWindow> {
        self.peers
            .into_iter()
            .map(|(peer, mut record)| {
                record.probes.sort_by_key(|p| p.order);
                PeerWindow {
                    // Late arrivals can outnumber the gaps seen in a window.
                    inbound_expected: record.inbound_expected,
                    inbound_received: record.inbound_received.min(record.inbound_expected),
                    ..figures(peer, &record.probes)
                }
            })
            .collect()
    }
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
        Probe { order, rtt_ms }
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
            window.record("b", probe(order, rtt));
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
        window.record("c", probe(1, None));
        window.record("c", probe(2, None));
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
        window.record("b", probe(1, Some(2.0)));
        window.record("b", probe(2, None));
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
                window.record("p", probe(i as u64, *rtt));
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
