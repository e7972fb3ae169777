//! Perfect information: the pairs that the agents' peer sets hold, scored
//! from their truth (RTT and goodput within +-10%, loss exact), every one
//! fresh with 600 samples, and the network coordinates worked out from
//! them. The upper bound of what measuring could give netaware; the
//! evaluation reports it beside measured mode so that the cost of
//! imperfect measurement shows.

use netaware_core::coordinate_pass::{self, PassInput};
use netaware_core::coordinates::Coordinates;
use netaware_core::matrix::{PairSummary, Throughput};
use netaware_core::peers::{PeerBound, choose};
use netaware_core::score::ScoreConfig;
use netaware_core::scored::{NodeView, ScoredMatrix, ScoredPair, own_terms};
use netaware_core::transport::{Transport, TransportSet};
use netaware_core::{NodeInfo, NodeKind, UnixMillis};
use rand::Rng;

use crate::cluster::Cluster;

/// Passes the collector's coordinates make over the medians in one
/// rotation step of its peer sets (a pass every 10 s, a step every 5 min).
const COORDINATE_PASSES: u64 = 30;

/// The matrix of the truth of the pairs that agents probing `max_peers`
/// peers each (0: all) hold, scored by the core's score model.
pub fn matrix(
    cluster: &Cluster,
    config: &ScoreConfig,
    max_peers: usize,
    rng: &mut impl Rng,
) -> ScoredMatrix {
    let now = 0;
    let candidates = cluster.candidates();
    let mut pairs = Vec::new();
    for (src, &(name, zone)) in candidates.iter().enumerate() {
        let bound = PeerBound {
            max: max_peers,
            epoch: 0,
        };
        for dst in choose(name, zone, &candidates, bound) {
            let truth = cluster.link(src, dst);
            let summary = PairSummary {
                rtt_median_ms: Some(truth.rtt_ms * rng.random_range(0.9..1.1)),
                rtt_p99_ms: Some(truth.rtt_ms * 1.5),
                jitter_ms: Some(truth.rtt_ms * 0.05),
                loss_ratio: Some(truth.loss),
                samples: 600,
                last_end: Some(now),
                throughput: Some(Throughput {
                    bps: truth.goodput_bps() * rng.random_range(0.9..1.1),
                    at: now,
                    retransmits: None,
                    tcp_rtt_ms: None,
                }),
                one_way_loss_ratio: None,
                probe: Some(Transport::Icmp),
                filtered: TransportSet::EMPTY,
            };
            pairs.push(fresh_pair(config, src, dst, summary, now));
        }
    }
    let nodes = |coordinates: &Coordinates| -> Vec<NodeView> {
        candidates
            .iter()
            .map(|&(name, zone)| NodeView {
                coordinate: coordinates.coordinate(name).cloned(),
                ..agent_node(name, zone)
            })
            .collect()
    };
    let mut coordinates = Coordinates::default();
    let without = ScoredMatrix::from_parts(nodes(&coordinates), pairs, config.fallback());
    if max_peers == 0 {
        return without;
    }
    // The collector's passes over these medians (the very code it runs).
    let input = PassInput::of(&without);
    for pass in 1..=COORDINATE_PASSES {
        coordinate_pass::run(&mut coordinates, &input, pass);
    }
    ScoredMatrix::from_parts(
        nodes(&coordinates),
        without.pairs().to_vec(),
        config.fallback(),
    )
}

/// A pair measured just now (`now`) with `summary`, scored by `config`
/// from its own figures alone.
pub fn fresh_pair(
    config: &ScoreConfig,
    src: usize,
    dst: usize,
    summary: PairSummary,
    now: UnixMillis,
) -> ScoredPair {
    let terms = own_terms(config, &config.measured_terms(&summary, true, now));
    ScoredPair {
        src,
        dst,
        summary,
        age_ms: Some(0),
        stale: false,
        quality: config.quality(&terms),
        terms,
    }
}

/// An agent `name` in `zone` that reported just now, with no coordinate.
pub fn agent_node(name: &str, zone: &str) -> NodeView {
    NodeView {
        info: NodeInfo {
            name: name.to_owned(),
            address: String::new(),
            zone: zone.to_owned(),
            region: String::new(),
            kind: NodeKind::Agent,
        },
        stale: false,
        last_report_age_ms: Some(0),
        coordinate: None,
        agent: None,
    }
}
