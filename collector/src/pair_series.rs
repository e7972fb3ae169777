//! Which node pairs get Prometheus series of their own: a stated budget
//! of pairs (`--pair-series`), the worst ones first.
//!
//! A series per node pair grows with the square of the nodes (5,000 nodes
//! with 64 peers each are 320,000 pairs, five figures each), which no
//! Prometheus wants; a cut by cluster size would leave the alerts on lossy
//! links silent exactly where there are the most links. So every pair
//! stays in the aggregates (per zone pair and per measured block), and the
//! budget goes to the pairs an operator looks for: the lowest quality, the
//! highest loss and the largest RTT inflation (median over its zone pair's
//! mean), taken in turn from each ranking, so that a budget too small for
//! all three still holds the worst of each. Pure and deterministic: the
//! same matrices give the same pairs, whatever the order of a hash map.

use std::collections::{HashMap, HashSet};

use netaware_core::scored::ScoredMatrix;
use netaware_core::scored_pair::ScoredPair;

/// Node pairs exported with series of their own by default: 1,000 pairs
/// over every network, five figures each.
pub const DEFAULT_PAIR_SERIES: usize = 1_000;

/// One pair of one network: its network's position in the list given to
/// [`pairs_to_export`], and the pair's in that network's matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExportedPair {
    /// Position of the network.
    pub network: usize,
    /// Position of the pair in [`ScoredMatrix::pairs`].
    pub pair: usize,
}

/// The pairs of `networks` that get series of their own: all of them
/// while they fit `budget`, else `budget` of them, the worst first by
/// quality, loss and RTT inflation in turn. Sorted by network and pair.
pub fn pairs_to_export(networks: &[&ScoredMatrix], budget: usize) -> Vec<ExportedPair> {
    let every = || {
        networks.iter().enumerate().flat_map(|(network, matrix)| {
            (0..matrix.pairs().len()).map(move |pair| ExportedPair { network, pair })
        })
    };
    let total: usize = networks.iter().map(|m| m.pairs().len()).sum();
    if total <= budget {
        return every().collect();
    }
    let rankings = [
        worst_first(networks, budget, |_, p| Some(1.0 - p.quality)),
        worst_first(networks, budget, |_, p| {
            p.summary.loss_ratio.filter(|loss| *loss > 0.0)
        }),
        worst_first(networks, budget, rtt_inflation(networks)),
    ];
    let mut chosen = HashSet::with_capacity(budget);
    let mut cursors = [0usize; 3];
    while chosen.len() < budget {
        let mut moved = false;
        for (ranking, cursor) in rankings.iter().zip(cursors.iter_mut()) {
            // The next pair of this ranking not taken yet.
            while let Some(pair) = ranking.get(*cursor) {
                *cursor += 1;
                if chosen.insert(*pair) {
                    moved = true;
                    break;
                }
            }
            if chosen.len() == budget {
                break;
            }
        }
        if !moved {
            break;
        }
    }
    let mut chosen: Vec<ExportedPair> = chosen.into_iter().collect();
    chosen.sort_unstable();
    chosen
}

/// The `budget` worst pairs of `networks` by `badness` (of a pair of the
/// network at a position: larger is worse, `None` is not bad by it at
/// all), worst first, ties by network and pair.
fn worst_first(
    networks: &[&ScoredMatrix],
    budget: usize,
    badness: impl Fn(usize, &ScoredPair) -> Option<f64>,
) -> Vec<ExportedPair> {
    // A reference, so that each network's inner closure can copy it.
    let badness = &badness;
    let mut bad: Vec<(f64, ExportedPair)> = networks
        .iter()
        .enumerate()
        .flat_map(|(network, matrix)| {
            matrix
                .pairs()
                .iter()
                .enumerate()
                .filter_map(move |(pair, p)| {
                    let value = badness(network, p).filter(|v| v.is_finite())?;
                    Some((value, ExportedPair { network, pair }))
                })
        })
        .collect();
    let order =
        |a: &(f64, ExportedPair), b: &(f64, ExportedPair)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
    if bad.len() > budget {
        bad.select_nth_unstable_by(budget, order);
        bad.truncate(budget);
    }
    bad.sort_unstable_by(order);
    bad.into_iter().map(|(_, pair)| pair).collect()
}

/// A pair's median RTT over its zone pair's mean median, for pairs above
/// it: how much slower than its neighbours' this path is.
fn rtt_inflation<'m>(
    networks: &'m [&'m ScoredMatrix],
) -> impl Fn(usize, &ScoredPair) -> Option<f64> + 'm {
    // Each network's zone pairs' mean medians, by zone index (the summary
    // lists zones in the matrix's order).
    let baselines: Vec<(usize, Vec<Option<f64>>)> = networks
        .iter()
        .map(|matrix| {
            let summary = matrix.zones();
            let index: HashMap<&str, usize> = summary
                .zones
                .iter()
                .enumerate()
                .map(|(i, zone)| (zone.name.as_str(), i))
                .collect();
            let zones = summary.zones.len();
            let mut table = vec![None; zones * zones];
            for z in &summary.zone_pairs {
                if let (Some(&src), Some(&dst)) = (
                    index.get(z.src_zone.as_str()),
                    index.get(z.dst_zone.as_str()),
                ) {
                    table[src * zones + dst] = z.rtt_median_ms;
                }
            }
            (zones, table)
        })
        .collect();
    move |network, p| {
        let matrix = networks[network];
        let (zones, table) = &baselines[network];
        let (src, dst) = (matrix.zone_index(p.src)?, matrix.zone_index(p.dst)?);
        let baseline = (*table.get(src * zones + dst)?)?;
        let rtt = p.summary.rtt_median_ms?;
        (baseline > 0.0 && rtt > baseline).then(|| rtt / baseline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{peer, scored_after};

    /// Six nodes of one zone, a1 probing the other five: to a3 with 20%
    /// loss, to a4 ten times slower than the rest, the others clean.
    fn matrix() -> ScoredMatrix {
        let nodes = ["a1", "a2", "a3", "a4", "a5", "a6"].map(|n| (n, "a"));
        let peers = vec![
            peer("a2", 0.2, 10, 10),
            peer("a3", 0.2, 10, 8),
            peer("a4", 2.0, 10, 10),
            peer("a5", 0.2, 10, 10),
            peer("a6", 0.2, 10, 10),
        ];
        scored_after(&nodes, "a1", peers)
    }

    fn destinations(matrix: &ScoredMatrix, chosen: &[ExportedPair]) -> Vec<String> {
        let mut names: Vec<String> = chosen
            .iter()
            .map(|c| matrix.nodes()[matrix.pairs()[c.pair].dst].info.name.clone())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn every_pair_while_they_fit() {
        let matrix = matrix();
        let chosen = pairs_to_export(&[&matrix, &matrix], 100);
        assert_eq!(chosen.len(), 2 * matrix.pairs().len());
    }

    #[test]
    fn a_small_budget_holds_the_lossy_and_the_slow_pair_and_nothing_clean() {
        let matrix = matrix();
        let chosen = pairs_to_export(&[&matrix], 2);
        assert_eq!(destinations(&matrix, &chosen), ["a3", "a4"]);
        // The same matrices give the same pairs.
        assert_eq!(pairs_to_export(&[&matrix], 2), chosen);
        assert!(pairs_to_export(&[&matrix], 0).is_empty());
    }
}
