//! What a page of the web view shows, worked out from a snapshot: pure,
//! so that the choices (which nodes a heat map holds, in which order;
//! which pairs are the worst) are tested without a server.
//!
//! A heat map shows one zone, one measured block of it, or every node,
//! at most [`MAX_MAP_NODES`] nodes at a time: a 5,000-node cluster is
//! never 25 million cells in one page. Nodes go zone by zone and block by
//! block (in block order, then by name), so that each block is a square
//! on the diagonal and a bad uplink shows as a cross of its rows and
//! columns.

use std::collections::HashMap;

use netaware_core::UnixMillis;
use netaware_core::fault_marks::FaultMarks;
use netaware_core::measured_topology::MeasuredTopology;
use netaware_core::network::Network;
use netaware_core::pair_rtt::RttLookup;
use netaware_core::scored::ScoredMatrix;
use netaware_proto::convert;
use netaware_proto::v1 as pb;
use netaware_views::heatmap::{CellBasis, HeatMap, Metric};
use serde::Serialize;

use crate::pair_series::pairs_to_export;

/// The most nodes one heat map shows: a block of a large zone at once, a
/// zone of a thousand nodes in pages.
pub const MAX_MAP_NODES: usize = 160;
/// The most pairs the worst-pairs table lists.
pub const MAX_WORST_PAIRS: usize = 500;

/// Which nodes a heat map holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MapNodes {
    /// The nodes shown, rows and columns alike.
    pub nodes: Vec<String>,
    /// Each one's zone.
    pub zones: Vec<String>,
    /// Each one's measured block (its number in its zone), if it is in one.
    pub blocks: Vec<Option<u32>>,
    /// Where the page starts among the nodes asked for.
    pub offset: usize,
    /// How many nodes were asked for (the zone's, the block's, or every
    /// node).
    pub total: usize,
}

/// The nodes of `zone` (every zone: `None`), or of its block `block`,
/// that a page from `offset` shows, at most `limit` (up to
/// [`MAX_MAP_NODES`]): zone by zone, block by block as `topology` has
/// them, then each zone's nodes in no block, by name.
pub fn map_nodes(
    scored: &ScoredMatrix,
    topology: &MeasuredTopology,
    zone: Option<&str>,
    block: Option<u32>,
    offset: usize,
    limit: usize,
) -> MapNodes {
    let block_of: HashMap<(&str, &str), u32> = topology
        .nodes()
        .map(|(z, b, n)| ((z.zone.as_str(), n.name.as_str()), b.number))
        .collect();
    // Zone, block order, then name; nodes in no block last in their zone.
    let mut ordered: Vec<(&str, Option<u32>, &str)> = scored
        .nodes()
        .iter()
        .map(|n| (n.info.zone.as_str(), n.info.name.as_str()))
        .filter(|(z, _)| zone.is_none_or(|wanted| *z == wanted))
        .map(|(z, name)| (z, block_of.get(&(z, name)).copied(), name))
        .filter(|(_, b, _)| block.is_none() || *b == block)
        .collect();
    ordered.sort_unstable_by_key(|&(z, b, name)| (z, b.is_none(), b, name));
    let total = ordered.len();
    let offset = offset.min(total);
    let shown = &ordered[offset..(offset + limit.clamp(1, MAX_MAP_NODES)).min(total)];
    MapNodes {
        nodes: shown.iter().map(|(_, _, n)| (*n).to_owned()).collect(),
        zones: shown.iter().map(|(z, _, _)| (*z).to_owned()).collect(),
        blocks: shown.iter().map(|(_, b, _)| *b).collect(),
        offset,
        total,
    }
}

/// The heat map of `nodes` on `network`'s `scored` matrix: their measured
/// pairs, and for RTT the estimates of those nobody probes; the faults
/// placement acts on name the nodes they hold back.
pub fn heat_map(
    scored: &ScoredMatrix,
    network: &Network,
    faults: &FaultMarks,
    at: UnixMillis,
    nodes: &MapNodes,
    metric: Metric,
) -> HeatMap {
    let indices: Vec<usize> = nodes
        .nodes
        .iter()
        .filter_map(|n| scored.index_of(n))
        .collect();
    let shown: std::collections::HashSet<usize> = indices.iter().copied().collect();
    let name = |i: usize| scored.nodes()[i].info.name.as_str();
    let pairs: Vec<pb::Pair> = indices
        .iter()
        .flat_map(|&src| scored.outgoing(src))
        .filter(|pair| shown.contains(&pair.dst))
        .map(|pair| convert::pair_to_wire(pair, network, name, at))
        .collect();
    let matrix = pb::Matrix {
        pairs,
        placement_faults: convert::fault_marks_to_wire(faults, network),
        ..pb::Matrix::default()
    };
    let estimates: Vec<pb::PairEstimate> = if metric == Metric::Rtt {
        let lookup = RttLookup::new(scored);
        indices
            .iter()
            .flat_map(|&src| indices.iter().map(move |&dst| (src, dst)))
            .filter(|&(src, dst)| src != dst && scored.pair(src, dst).is_none())
            .map(|(src, dst)| convert::pair_rtt_to_wire(scored, &lookup.pair(src, dst)))
            .collect()
    } else {
        Vec::new()
    };
    HeatMap::of_nodes(&matrix, metric, nodes.nodes.clone(), &estimates)
}

/// How many of a map's cells rest on each basis, for the page's legend.
pub fn cells_by_basis(map: &HeatMap) -> [(CellBasis, usize); 3] {
    let count = |basis: CellBasis| {
        map.cells
            .iter()
            .flatten()
            .filter(|cell| cell.basis == basis)
            .count()
    };
    [
        CellBasis::Measured,
        CellBasis::Estimated,
        CellBasis::Missing,
    ]
    .map(|basis| (basis, count(basis)))
}

/// The worst `limit` pairs of `scored` (up to [`MAX_WORST_PAIRS`]): the
/// pairs the metrics' series budget keeps (the worst by quality, loss and
/// RTT inflation in turn), lowest quality first.
pub fn worst_pairs(
    scored: &ScoredMatrix,
    network: &Network,
    at: UnixMillis,
    limit: usize,
) -> Vec<pb::Pair> {
    let name = |i: usize| scored.nodes()[i].info.name.as_str();
    let mut worst: Vec<_> = pairs_to_export(&[scored], limit.min(MAX_WORST_PAIRS))
        .into_iter()
        .map(|chosen| &scored.pairs()[chosen.pair])
        .collect();
    worst.sort_by(|a, b| {
        a.quality
            .total_cmp(&b.quality)
            .then_with(|| name(a.src).cmp(name(b.src)))
            .then_with(|| name(a.dst).cmp(name(b.dst)))
    });
    worst
        .into_iter()
        .map(|pair| convert::pair_to_wire(pair, network, name, at))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{peer, scored_after};
    use netaware_core::measured_topology::{Block, BlockNode, ZoneBlocks};
    use netaware_views::heatmap::colour;

    /// Zone a of five nodes and zone b of one; a1 probes a2 (clean), a3
    /// (20% lost) and b1; nobody probes a2 -> a4.
    fn matrix() -> ScoredMatrix {
        let nodes = [
            ("a1", "a"),
            ("a2", "a"),
            ("a3", "a"),
            ("a4", "a"),
            ("a5", "a"),
            ("b1", "b"),
        ];
        let peers = vec![
            peer("a2", 0.2, 10, 10),
            peer("a3", 0.2, 10, 8),
            peer("b1", 5.0, 10, 10),
        ];
        scored_after(&nodes, "a1", peers)
    }

    /// Zone a measured as block 1 (a3, a1) and block 2 (a2); a4 and a5 in
    /// no block yet.
    fn topology() -> MeasuredTopology {
        let block = |number, names: &[&str]| Block {
            number,
            nodes: names
                .iter()
                .map(|n| BlockNode {
                    name: (*n).to_owned(),
                    degraded: false,
                    bad_uplink: false,
                })
                .collect(),
        };
        MeasuredTopology {
            zones: vec![ZoneBlocks {
                zone: "a".into(),
                region: String::new(),
                blocks: vec![block(2, &["a2"]), block(1, &["a3", "a1"])],
            }],
            ..MeasuredTopology::default()
        }
    }

    #[test]
    fn a_zones_nodes_go_block_by_block_then_those_in_none_and_page_by_page() {
        let (scored, topology) = (matrix(), topology());
        let all = map_nodes(&scored, &topology, Some("a"), None, 0, 100);
        assert_eq!(all.nodes, ["a1", "a3", "a2", "a4", "a5"]);
        assert_eq!(all.blocks, [Some(1), Some(1), Some(2), None, None]);
        assert_eq!(all.total, 5);
        let page = map_nodes(&scored, &topology, Some("a"), None, 3, 100);
        assert_eq!(
            (page.nodes.as_slice(), page.offset),
            (&["a4".to_owned(), "a5".to_owned()][..], 3)
        );
        let block = map_nodes(&scored, &topology, Some("a"), Some(1), 0, 1);
        assert_eq!(
            (block.nodes.as_slice(), block.total),
            (&["a1".to_owned()][..], 2)
        );
        // Never more than a map holds, never past the end.
        assert!(
            map_nodes(&scored, &topology, Some("a"), None, 0, usize::MAX)
                .nodes
                .len()
                <= MAX_MAP_NODES
        );
        assert!(
            map_nodes(&scored, &topology, Some("a"), None, 99, 10)
                .nodes
                .is_empty()
        );
        assert!(
            map_nodes(&scored, &topology, Some("nowhere"), None, 0, 10)
                .nodes
                .is_empty()
        );
        // Every zone: zone by zone, each as above.
        let every = map_nodes(&scored, &topology, None, None, 0, 100);
        assert_eq!(every.nodes, ["a1", "a3", "a2", "a4", "a5", "b1"]);
        assert_eq!(every.zones[4..], ["a".to_owned(), "b".to_owned()]);
    }

    #[test]
    fn the_lossy_pair_is_red_by_loss_and_an_unprobed_pair_shows_its_estimate() {
        let (scored, topology) = (matrix(), topology());
        let nodes = map_nodes(&scored, &topology, Some("a"), None, 0, 100);
        let primary = Network::primary();
        let faults = FaultMarks::default();
        let by_loss = heat_map(&scored, &primary, &faults, 2_000, &nodes, Metric::Loss);
        // Rows and columns: a1, a3, a2, a4, a5.
        assert_eq!(
            by_loss.cells[0][1].colour,
            colour(1.0),
            "a1 -> a3 loses 20%"
        );
        assert_eq!(by_loss.cells[0][2].colour, colour(0.0), "a1 -> a2 is clean");
        assert_eq!(by_loss.cells[2][3].basis, CellBasis::Missing);
        let by_rtt = heat_map(&scored, &primary, &faults, 2_000, &nodes, Metric::Rtt);
        assert_eq!(by_rtt.cells[0][2].basis, CellBasis::Measured);
        // a2 -> a1 is probed by nobody: its zone's figures estimate it.
        assert_eq!(by_rtt.cells[2][0].basis, CellBasis::Estimated);
        let [measured, _, _] = cells_by_basis(&by_rtt);
        assert_eq!(measured, (CellBasis::Measured, 2));
    }

    #[test]
    fn the_worst_pairs_come_lossy_first_within_the_limit() {
        let scored = matrix();
        let worst = worst_pairs(&scored, &Network::primary(), 2_000, 1);
        assert_eq!(worst.len(), 1);
        assert_eq!((worst[0].src.as_str(), worst[0].dst.as_str()), ("a1", "a3"));
        let every = worst_pairs(&scored, &Network::primary(), 2_000, 100);
        assert_eq!(every.len(), 3);
        assert!(every.windows(2).all(|w| w[0].quality <= w[1].quality));
    }
}
