//! Whether a node itself is degraded, from its own links inside its zone:
//! a NIC that loses packets or runs far below its zone-mates' rate shows on
//! most of its links at once.
//!
//! Placement already fails a node whose link to a placed worker is lossy or
//! slow, but only where that link was measured. Without this verdict, a
//! degraded node is avoided while good nodes are free and then picked, by
//! the same policy, when only leftovers are: across zones, where agents
//! probe only a few peers, nothing else would say it is bad. (The
//! simulator showed it: at full load, twenty jobs on such leftovers took
//! three quarters of all job time.)
//!
//! Only links inside the node's zone count. A cut-off zone loses every link
//! to the others; that is the zone's trouble, not its nodes'. A node needs
//! fresh links with at least [`MIN_PEERS`] zone-mates for a verdict, so
//! that a bad link between two nodes does not condemn both.

use crate::scored_pair::ScoredPair;
use crate::stats::{lower_median, upper_median};
use crate::verdict::Degradation;

/// Zone-mates a node must have fresh links with before it can be judged.
pub const MIN_PEERS: usize = 2;

/// What a node's links inside its zone say about the node.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct NodeHealth {
    /// Zone-mates with a fresh link to or from the node.
    pub peers: usize,
    /// Loss that at least half of its fresh zone links exceed (the lower
    /// median), when it has [`MIN_PEERS`] zone-mates.
    pub loss: Option<f64>,
    /// Goodput that at least half of its fresh measured zone links reach
    /// (the upper median), bits/s, when it has [`MIN_PEERS`] zone-mates
    /// with one.
    pub goodput_bps: Option<f64>,
    /// The median of the zone's nodes' `goodput_bps`: what is usual there.
    pub zone_goodput_bps: Option<f64>,
}

impl NodeHealth {
    /// Whether the links say enough to judge the node at all.
    pub fn judged(&self) -> bool {
        self.loss.is_some() || self.goodput_bps.is_some()
    }

    /// Why the node is degraded, or `None`: loss above `loss_threshold` on
    /// most of its zone links, or goodput below `min_goodput_fraction` of
    /// its zone's usual on most of them (0: goodput never fails it).
    pub fn degraded(&self, loss_threshold: f64, min_goodput_fraction: f64) -> Option<Degradation> {
        if let Some(loss) = self.loss.filter(|&loss| loss > loss_threshold) {
            return Some(Degradation::Loss {
                loss,
                peers: self.peers,
                threshold: loss_threshold,
            });
        }
        let (goodput, usual) = (self.goodput_bps?, self.zone_goodput_bps?);
        if min_goodput_fraction <= 0.0 || goodput >= min_goodput_fraction * usual {
            return None;
        }
        Some(Degradation::Goodput {
            goodput_bps: goodput,
            zone_goodput_bps: usual,
            fraction: min_goodput_fraction,
        })
    }
}

/// Every node's health, by node index, from the pairs between zone-mates:
/// `nodes` nodes, each in the zone (of `zones`) that `zone_of` gives, each
/// with the measured pairs that `links` gives (both directions), walked
/// where the scored matrix keeps them by node. (It runs on every snapshot,
/// over every pair: no list of links is laid out again, no set is built
/// per figure.)
pub fn of<'m, L: Iterator<Item = &'m ScoredPair>>(
    nodes: usize,
    zones: usize,
    zone_of: impl Fn(usize) -> Option<usize>,
    links: impl Fn(usize) -> L,
) -> Vec<NodeHealth> {
    let n = nodes;
    // Which zone-mates were counted already, for which count: the count's
    // own stamp, so that no list of mates is sorted or cleared per node.
    let mut counted = vec![usize::MAX; n];
    let mut stamp = 0usize;
    let mut distinct_mates = |mates: &mut dyn Iterator<Item = usize>| {
        stamp += 1;
        // A mate out of range (no such node) is not counted.
        mates
            .filter(|&mate| {
                counted
                    .get_mut(mate)
                    .is_some_and(|seen| std::mem::replace(seen, stamp) != stamp)
            })
            .count()
    };
    let mut values = Vec::new();
    let mut health: Vec<NodeHealth> = Vec::with_capacity(n);
    for node in 0..n {
        let zone = zone_of(node);
        // A node of no zone has no zone-mates.
        let fresh_in_zone = |pair: &&ScoredPair| {
            !pair.stale && zone.is_some() && zone_of(pair.other_end(node)) == zone
        };
        let zone_links = || links(node).filter(fresh_in_zone);
        let mate = |pair: &ScoredPair| pair.other_end(node);
        let peers = distinct_mates(&mut zone_links().map(mate));
        // The median of a figure of its links, when links with at least
        // `MIN_PEERS` zone-mates have it.
        let mut judged = |figure: fn(&ScoredPair) -> Option<f64>, median: Median| {
            let with_figure = |pair: &&ScoredPair| figure(pair).is_some();
            if distinct_mates(&mut zone_links().filter(with_figure).map(mate)) < MIN_PEERS {
                return None;
            }
            values.clear();
            values.extend(zone_links().filter_map(figure));
            median(&mut values)
        };
        health.push(NodeHealth {
            peers,
            loss: judged(|pair| pair.summary.loss_ratio, lower_median),
            goodput_bps: judged(ScoredPair::fresh_goodput, upper_median),
            zone_goodput_bps: None,
        });
    }
    let mut by_zone: Vec<Vec<f64>> = vec![Vec::new(); zones];
    for (node, h) in health.iter().enumerate() {
        let goodputs = zone_of(node).and_then(|zone| by_zone.get_mut(zone));
        if let (Some(goodput), Some(goodputs)) = (h.goodput_bps, goodputs) {
            goodputs.push(goodput);
        }
    }
    let usual: Vec<Option<f64>> = by_zone.iter_mut().map(|g| upper_median(g)).collect();
    for (node, h) in health.iter_mut().enumerate() {
        h.zone_goodput_bps = zone_of(node).and_then(|zone| usual.get(zone).copied().flatten());
    }
    health
}

/// A median of values, reordering them.
type Median = fn(&mut [f64]) -> Option<f64>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scored::ScoredMatrix;
    use crate::scored::tests::{scored, with_goodputs};

    const NOW: u64 = 10_000;

    /// Every pair among `nodes` measured, with the loss `loss` gives it.
    fn measured<'a>(
        nodes: &[(&'a str, &'a str)],
        loss: impl Fn(&str, &str) -> f64,
    ) -> Vec<(&'a str, &'a str, f64, f64)> {
        let mut pairs = Vec::new();
        for (src, _) in nodes {
            for (dst, _) in nodes.iter().filter(|(dst, _)| dst != src) {
                pairs.push((*src, *dst, 0.2, loss(src, dst)));
            }
        }
        pairs
    }

    fn health_of<'m>(matrix: &'m ScoredMatrix, name: &str) -> &'m NodeHealth {
        &matrix.health()[matrix.index_of(name).unwrap()]
    }

    fn verdict(matrix: &ScoredMatrix, name: &str) -> Option<String> {
        health_of(matrix, name)
            .degraded(0.05, 0.2)
            .map(|d| format!("degraded: {d}"))
    }

    const ZONE_A: [(&str, &str); 4] = [("a1", "a"), ("a2", "a"), ("a3", "a"), ("a4", "a")];

    const TWO_ZONES: [(&str, &str); 6] = [
        ("a1", "a"),
        ("a2", "a"),
        ("a3", "a"),
        ("b1", "b"),
        ("b2", "b"),
        ("b3", "b"),
    ];

    #[test]
    fn a_node_lossy_on_most_zone_links_is_degraded_and_its_mates_are_not() {
        let matrix = scored(
            &ZONE_A,
            &measured(
                &ZONE_A,
                |src, dst| {
                    if src == "a3" || dst == "a3" { 0.1 } else { 0.0 }
                },
            ),
            NOW,
        );
        let reason = verdict(&matrix, "a3").expect("a3 is degraded");
        assert!(
            reason.starts_with("degraded: loss 10.0% on most of its links with 3 zone-mates"),
            "{reason}"
        );
        for mate in ["a1", "a2", "a4"] {
            assert_eq!(verdict(&matrix, mate), None, "{mate}");
            assert_eq!(health_of(&matrix, mate).loss, Some(0.0));
        }
        // Under a looser threshold, a3 passes.
        assert_eq!(health_of(&matrix, "a3").degraded(0.2, 0.2), None);
    }

    #[test]
    fn one_bad_link_condemns_neither_end_and_two_nodes_are_never_judged() {
        let bad_link = |src: &str, dst: &str| {
            if [src, dst] == ["a1", "a2"] || [src, dst] == ["a2", "a1"] {
                0.5
            } else {
                0.0
            }
        };
        let matrix = scored(&ZONE_A, &measured(&ZONE_A, bad_link), NOW);
        assert!(matrix.health().iter().all(|h| h.peers == 3));
        assert!(ZONE_A.iter().all(|(n, _)| verdict(&matrix, n).is_none()));
        // A zone of two: their one link is bad, but whose fault is it?
        let pair = [("a1", "a"), ("a2", "a")];
        let matrix = scored(&pair, &measured(&pair, bad_link), NOW);
        assert_eq!(health_of(&matrix, "a1").peers, 1);
        assert_eq!(health_of(&matrix, "a1").loss, None);
        assert_eq!(verdict(&matrix, "a1"), None);
    }

    #[test]
    fn a_zone_cut_off_from_the_others_keeps_healthy_nodes() {
        let cut = |src: &str, dst: &str| if src[..1] != dst[..1] { 1.0 } else { 0.0 };
        let matrix = scored(&TWO_ZONES, &measured(&TWO_ZONES, cut), NOW);
        assert!(TWO_ZONES.iter().all(|(n, _)| verdict(&matrix, n).is_none()));
    }

    #[test]
    fn a_node_far_below_its_zones_usual_goodput_is_degraded_a_slow_zone_is_not() {
        let matrix = scored(&TWO_ZONES, &measured(&TWO_ZONES, |_, _| 0.0), NOW);
        // Zone a at 100 Gbit/s with a3 at 10; zone b at 10 all through.
        let matrix = with_goodputs(&matrix, |src, dst| match (&src[..1], &dst[..1]) {
            ("a", "a") if src == "a3" || dst == "a3" => Some(10e9),
            ("a", "a") => Some(100e9),
            ("b", "b") => Some(10e9),
            _ => None,
        });
        let reason = verdict(&matrix, "a3").expect("a3 is degraded");
        assert!(
            reason.starts_with("degraded: goodput 10.000 Gbit/s")
                && reason.contains("usual 100.000 Gbit/s"),
            "{reason}"
        );
        let a1 = health_of(&matrix, "a1");
        // a1's links: 100 to a2, 10 to a3; most reach 100.
        assert_eq!(
            (a1.goodput_bps, a1.zone_goodput_bps),
            (Some(100e9), Some(100e9))
        );
        for node in ["a1", "a2", "b1", "b2", "b3"] {
            assert_eq!(verdict(&matrix, node), None, "{node}");
        }
        // 0 turns the goodput verdict off.
        assert_eq!(health_of(&matrix, "a3").degraded(0.05, 0.0), None);
    }

    #[test]
    fn stale_links_say_nothing() {
        use crate::matrix::PairMatrix;
        use crate::registry::Registry;
        use crate::score::ScoreConfig;
        use crate::scored::tests::{node, window};

        let mut registry = Registry::new();
        for (name, zone) in ZONE_A {
            registry.agent_hello(node(name, zone), 1_000, NOW).unwrap();
        }
        let mut pairs = PairMatrix::new(6);
        for (src, dst, median, loss) in measured(&ZONE_A, |_, _| 0.3) {
            pairs.record(src, dst, window(NOW, median, loss));
        }
        let config = ScoreConfig::default();
        let fresh = ScoredMatrix::build(&registry, &pairs, &config, NOW);
        assert!(verdict(&fresh, "a1").is_some());
        // The same windows an hour later: every link stale.
        let later = ScoredMatrix::build(&registry, &pairs, &config, NOW + 3_600_000);
        assert!(later.pairs().iter().all(|p| p.stale));
        assert!(
            later
                .health()
                .iter()
                .all(|h| h.peers == 0 && h.loss.is_none())
        );
        assert_eq!(verdict(&later, "a1"), None);
    }
}
