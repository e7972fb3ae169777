//! Folding probe outcomes into per-peer window statistics.
//!
//! Pure: the prober tells [`WindowStats`] what happened to each probe, in any
//! order, and [`WindowStats::finish`] turns the window into figures: probes
//! sent and answered, RTT quantiles by nearest rank, and jitter as the mean
//! absolute difference between consecutive replies in the order the probes
//! were sent.

use std::collections::BTreeMap;

/// What became of one probe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeOutcome {
    /// Increasing per agent: orders probes by the time they were sent.
    pub order: u64,
    /// Round-trip time in ms, or `None` when no reply came in time.
    pub rtt_ms: Option<f64>,
}

/// The figures of one peer over one window.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PeerFigures {
    /// Peer name.
    pub peer: String,
    /// Probes sent.
    pub sent: u32,
    /// Replies received in time.
    pub received: u32,
    /// Fastest reply (ms); 0 without replies.
    pub min_ms: f64,
    /// Median (ms).
    pub median_ms: f64,
    /// 90th percentile (ms).
    pub p90_ms: f64,
    /// 99th percentile (ms).
    pub p99_ms: f64,
    /// Slowest reply (ms).
    pub max_ms: f64,
    /// Mean absolute difference of consecutive RTTs (ms).
    pub jitter_ms: f64,
    /// Echo requests from the peer that its sequence numbers say it sent.
    pub inbound_expected: u32,
    /// Of those, the ones that arrived.
    pub inbound_received: u32,
}

#[derive(Debug, Clone, Default)]
struct PeerRecord {
    outcomes: Vec<ProbeOutcome>,
    inbound_expected: u32,
    inbound_received: u32,
}

/// Outcomes of one window, per peer.
#[derive(Debug, Clone, Default)]
pub struct WindowStats {
    peers: BTreeMap<String, PeerRecord>,
}

impl WindowStats {
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

    /// Records the outcome of one probe to `peer`.
    pub fn record(&mut self, peer: &str, outcome: ProbeOutcome) {
        self.peer(peer).outcomes.push(outcome);
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

    /// The figures of every peer probed in the window, by peer name.
    pub fn finish(self) -> Vec<PeerFigures> {
        self.peers
            .into_iter()
            .map(|(peer, mut record)| {
                record.outcomes.sort_by_key(|o| o.order);
                PeerFigures {
                    // Late arrivals can outnumber the gaps seen in a window.
                    inbound_expected: record.inbound_expected,
                    inbound_received: record.inbound_received.min(record.inbound_expected),
                    ..figures(peer, &record.outcomes)
                }
            })
            .collect()
    }
}

fn figures(peer: String, outcomes: &[ProbeOutcome]) -> PeerFigures {
    let in_order: Vec<f64> = outcomes.iter().filter_map(|o| o.rtt_ms).collect();
    let sent = u32::try_from(outcomes.len()).unwrap_or(u32::MAX);
    let received = u32::try_from(in_order.len()).unwrap_or(u32::MAX);
    if in_order.is_empty() {
        return PeerFigures {
            peer,
            sent,
            ..PeerFigures::default()
        };
    }
    let jitter_ms = if in_order.len() < 2 {
        0.0
    } else {
        let diffs: f64 = in_order.windows(2).map(|w| (w[1] - w[0]).abs()).sum();
        diffs / (in_order.len() - 1) as f64
    };
    let mut sorted = in_order;
    sorted.sort_by(f64::total_cmp);
    PeerFigures {
        peer,
        sent,
        received,
        min_ms: sorted[0],
        median_ms: nearest_rank(&sorted, 0.5),
        p90_ms: nearest_rank(&sorted, 0.9),
        p99_ms: nearest_rank(&sorted, 0.99),
        max_ms: sorted[sorted.len() - 1],
        jitter_ms,
        ..PeerFigures::default()
    }
}

/// The nearest-rank quantile of sorted, non-empty values.
pub fn nearest_rank(sorted: &[f64], q: f64) -> f64 {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn outcome(order: u64, rtt_ms: Option<f64>) -> ProbeOutcome {
        ProbeOutcome { order, rtt_ms }
    }

    #[test]
    fn figures_of_a_window() {
        let mut window = WindowStats::new();
        // Arrive out of order; jitter follows the order the probes were sent.
        for (order, rtt) in [
            (3, Some(3.0)),
            (1, Some(1.0)),
            (2, None),
            (4, Some(2.0)),
            (5, Some(4.0)),
        ] {
            window.record("b", outcome(order, rtt));
        }
        let figures = window.finish();
        assert_eq!(figures.len(), 1);
        let b = &figures[0];
        assert_eq!((b.sent, b.received), (5, 4));
        assert_eq!((b.min_ms, b.median_ms, b.max_ms), (1.0, 2.0, 4.0));
        assert_eq!(b.p90_ms, 4.0);
        // 1 -> 3 -> 2 -> 4: |2| + |1| + |2| over 3.
        assert!((b.jitter_ms - 5.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn a_silent_peer_has_sent_probes_and_no_figures() {
        let mut window = WindowStats::new();
        window.record("c", outcome(1, None));
        window.record("c", outcome(2, None));
        let c = &window.finish()[0];
        assert_eq!((c.sent, c.received, c.median_ms), (2, 0, 0.0));
    }

    #[test]
    fn inbound_counts_add_up_and_never_exceed_expected() {
        let mut window = WindowStats::new();
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
    fn nearest_rank_quantiles() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(nearest_rank(&values, 0.5), 50.0);
        assert_eq!(nearest_rank(&values, 0.99), 99.0);
        assert_eq!(nearest_rank(&values, 0.0), 1.0);
        assert_eq!(nearest_rank(&[7.0], 0.9), 7.0);
    }

    proptest! {
        #[test]
        fn quantiles_are_ordered_and_counts_add_up(
            rtts in prop::collection::vec(prop::option::of(0.0f64..1000.0), 1..200)
        ) {
            let mut window = WindowStats::new();
            for (i, rtt) in rtts.iter().enumerate() {
                window.record("p", outcome(i as u64, *rtt));
            }
            let f = &window.finish()[0];
            prop_assert_eq!(f.sent as usize, rtts.len());
            prop_assert_eq!(f.received as usize, rtts.iter().flatten().count());
            prop_assert!(f.min_ms <= f.median_ms && f.median_ms <= f.p90_ms);
            prop_assert!(f.p90_ms <= f.p99_ms && f.p99_ms <= f.max_ms);
            prop_assert!(f.jitter_ms >= 0.0 && f.jitter_ms <= f.max_ms - f.min_ms);
        }
    }
}
