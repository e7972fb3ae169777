//! The matrix of a job that uses several networks at once (its pods
//! labelled `netaware.io/network: rail-0,rail-1`): a pair is as good as
//! its worst network, because a collective over all of them waits for the
//! slowest.
//!
//! Built from the networks' scored matrices by name, not by index (each
//! network lists the nodes that are on it): the nodes on every network,
//! each stale where it is stale on any; for each pair that some network
//! measured, the pair (measured or estimated) of the network where its
//! quality is lowest, whole, so that its figures say why. A pair that no
//! network measured is estimated by the combined matrix as any matrix
//! estimates its unmeasured pairs, from the worst-of pairs' zone averages
//! and the first network's coordinates.

use std::collections::BTreeSet;

use crate::placement::Placer;
use crate::scored::{NodeView, ScoredMatrix, ScoredPair};

/// What places a job over all of `placers`' networks: their worst-of
/// matrix, by the first's settings; `None` without any.
pub fn worst_of_placers(placers: &[&Placer]) -> Option<Placer> {
    let matrices: Vec<&ScoredMatrix> = placers.iter().map(|p| p.matrix()).collect();
    Some(Placer::new(
        worst_of(&matrices)?,
        *placers.first()?.config(),
    ))
}

/// The worst-of matrix of `networks` (the first's coordinates and
/// fallback); `None` without any network.
pub fn worst_of(networks: &[&ScoredMatrix]) -> Option<ScoredMatrix> {
    let (first, others) = networks.split_first()?;
    let on_every_network = |name: &str| others.iter().all(|m| m.index_of(name).is_some());
    let nodes: Vec<NodeView> = first
        .nodes()
        .iter()
        .filter(|node| on_every_network(&node.info.name))
        .map(|node| {
            let mut node = node.clone();
            node.stale |= others.iter().any(|m| {
                m.index_of(&node.info.name)
                    .is_some_and(|i| m.nodes()[i].stale)
            });
            node
        })
        .collect();
    let combined = ScoredMatrix::from_parts(nodes, Vec::new(), first.fallback());
    let measured: BTreeSet<(usize, usize)> = networks
        .iter()
        .flat_map(|m| {
            let name = |i: usize| m.nodes()[i].info.name.as_str();
            m.pairs()
                .iter()
                .filter_map(|p| {
                    Some((
                        combined.index_of(name(p.src))?,
                        combined.index_of(name(p.dst))?,
                    ))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let pairs: Vec<ScoredPair> = measured
        .into_iter()
        .filter_map(|(src, dst)| {
            let names = (
                combined.nodes()[src].info.name.as_str(),
                combined.nodes()[dst].info.name.as_str(),
            );
            let worst = networks
                .iter()
                .filter_map(|m| m.pair_or_estimate(m.index_of(names.0)?, m.index_of(names.1)?))
                .min_by(|a, b| a.quality.total_cmp(&b.quality))?;
            Some(ScoredPair {
                src,
                dst,
                ..worst.into_owned()
            })
        })
        .collect();
    Some(ScoredMatrix::from_parts(
        combined.nodes().to_vec(),
        pairs,
        first.fallback(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scored::tests::scored;
    use proptest::prelude::*;

    const NODES: [(&str, &str); 4] = [("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")];

    /// The four nodes with `measured` (median ms, loss) on the pairs given
    /// by index into [`NODES`].
    fn network(measured: &[(usize, usize, f64, f64)]) -> ScoredMatrix {
        let pairs: Vec<(&str, &str, f64, f64)> = measured
            .iter()
            .filter(|(s, d, _, _)| s != d)
            .map(|&(s, d, median, loss)| (NODES[s].0, NODES[d].0, median, loss))
            .collect();
        scored(&NODES, &pairs, 10_000)
    }

    fn quality(matrix: &ScoredMatrix, src: &str, dst: &str) -> f64 {
        let (s, d) = (matrix.index_of(src).unwrap(), matrix.index_of(dst).unwrap());
        matrix.pair_or_estimate(s, d).unwrap().quality
    }

    #[test]
    fn a_pair_takes_its_worst_network_with_that_networks_figures() {
        // a1 -> a2 is lossy on rail-0 alone, a1 -> b1 slow on rail-1 alone.
        let rail_0 = network(&[(0, 1, 0.2, 0.3), (0, 2, 5.0, 0.0)]);
        let rail_1 = network(&[(0, 1, 0.2, 0.0), (0, 2, 40.0, 0.0)]);
        let both = worst_of(&[&rail_0, &rail_1]).unwrap();
        let pair = |m: &ScoredMatrix, src: &str, dst: &str| {
            m.pair(m.index_of(src).unwrap(), m.index_of(dst).unwrap())
                .unwrap()
                .clone()
        };
        assert_eq!(pair(&both, "a1", "a2").summary.loss_ratio, Some(0.3));
        assert_eq!(pair(&both, "a1", "b1").summary.rtt_median_ms, Some(40.0));
        assert!(quality(&both, "a1", "a2") < quality(&rail_1, "a1", "a2"));
        assert!(quality(&both, "a1", "b1") < quality(&rail_0, "a1", "b1"));
        assert!(worst_of(&[]).is_none());
    }

    #[test]
    fn a_node_missing_from_one_network_is_not_in_the_combined_one() {
        let rail_0 = network(&[(0, 1, 0.2, 0.0)]);
        let three = scored(&NODES[..3], &[("a1", "a2", 0.2, 0.0)], 10_000);
        let both = worst_of(&[&rail_0, &three]).unwrap();
        assert!(both.index_of("b2").is_none());
        assert_eq!(both.nodes().len(), 3);
    }

    fn measured_pairs() -> impl Strategy<Value = Vec<(usize, usize, f64, f64)>> {
        prop::collection::vec((0..4usize, 0..4usize, 0.05..50.0f64, 0.0..0.5f64), 0..12)
    }

    proptest! {
        /// Every pair of the combined matrix is no better than that pair on
        /// any network, the order of the networks does not change a
        /// quality, and a network combined with itself is itself.
        #[test]
        fn the_combination_is_the_worst_whatever_the_order(
            first in measured_pairs(),
            second in measured_pairs(),
        ) {
            let (one, two) = (network(&first), network(&second));
            let both = worst_of(&[&one, &two]).unwrap();
            let swapped = worst_of(&[&two, &one]).unwrap();
            let itself = worst_of(&[&one, &one]).unwrap();
            for pair in both.pairs() {
                let src = both.nodes()[pair.src].info.name.as_str();
                let dst = both.nodes()[pair.dst].info.name.as_str();
                prop_assert!(pair.quality <= quality(&one, src, dst) + 1e-12);
                prop_assert!(pair.quality <= quality(&two, src, dst) + 1e-12);
                prop_assert!((pair.quality - quality(&swapped, src, dst)).abs() < 1e-12);
            }
            prop_assert_eq!(both.pairs().len(), swapped.pairs().len());
            prop_assert_eq!(itself.pairs().len(), one.pairs().len());
            for pair in one.pairs() {
                let src = one.nodes()[pair.src].info.name.as_str();
                let dst = one.nodes()[pair.dst].info.name.as_str();
                prop_assert!((quality(&itself, src, dst) - pair.quality).abs() < 1e-12);
            }
        }
    }
}
