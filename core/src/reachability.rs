//! Whether netaware can measure at all, pure: a measurement fault must
//! never become a scheduling fault.
//!
//! A pair whose every fresh probe went unanswered is *unreachable*, which
//! is not the same as lossy: a firewall that drops the probes looks like
//! total loss on every pair it covers. A node is *unreached* when every
//! one of its fresh pairs, either way, is unreachable. One unreached node
//! among zone-mates that reach each other is a node fault; but when most
//! nodes of the cluster, or of a zone (counting its pairs inside it), are
//! unreached at once, the likelier cause is that the probes do not get
//! through, not that every NIC failed together: netaware then cannot
//! measure there, and placement fails open (the extender answers
//! neutrally, [`crate::extender::Neutral::CannotMeasure`]) rather than
//! failing every node for loss it never saw.

use crate::scored_pair::ScoredPair;

/// The share of nodes that, unreached at once, means netaware cannot
/// measure (in the cluster, or in a zone): more than this.
pub const CANNOT_MEASURE_FRACTION: f64 = 0.5;

/// Fewest nodes with fresh pairs a verdict needs: of two nodes that cannot
/// reach each other, nothing says which is at fault, or whether either is.
pub const MIN_NODES: usize = 3;

/// How many nodes no probe got through to or from, in the cluster and in
/// each zone (by its pairs inside it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reachability {
    /// Every node with fresh pairs, zones mixed.
    pub cluster: NodeCount,
    /// Each zone's nodes with fresh pairs inside it, by zone index.
    pub zones: Vec<NodeCount>,
}

/// Nodes with fresh pairs, and how many of them are unreached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeCount {
    /// Nodes with at least one fresh pair with probes sent.
    pub nodes: usize,
    /// Of those, nodes all of whose fresh pairs are unreachable.
    pub unreached: usize,
}

impl NodeCount {
    /// Whether these nodes are mostly unreached, by the rule above.
    pub fn cannot_measure(&self) -> bool {
        self.nodes >= MIN_NODES
            && self.unreached as f64 > CANNOT_MEASURE_FRACTION * self.nodes as f64
    }
}

/// Whether a pair's fresh probes all went unanswered (the score model's
/// dead pair).
pub fn is_unreachable(pair: &ScoredPair) -> bool {
    !pair.stale && pair.terms.dead
}

/// Per node: (fresh pairs, fresh pairs reached).
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    fresh: usize,
    reached: usize,
}

impl Tally {
    fn add(&mut self, reached: bool) {
        self.fresh += 1;
        self.reached += usize::from(reached);
    }
}

fn count(tallies: impl Iterator<Item = Tally>) -> NodeCount {
    let mut count = NodeCount::default();
    for tally in tallies.filter(|t| t.fresh > 0) {
        count.nodes += 1;
        count.unreached += usize::from(tally.reached == 0);
    }
    count
}

impl Reachability {
    /// Counts the nodes of a matrix whose node `i` is in zone `zone_of[i]`
    /// (of `zones`).
    pub fn of(zones: usize, zone_of: &[usize], pairs: &[ScoredPair]) -> Self {
        let mut anywhere = vec![Tally::default(); zone_of.len()];
        let mut inside = vec![Tally::default(); zone_of.len()];
        for pair in pairs.iter().filter(|p| !p.stale && p.summary.samples > 0) {
            let reached = !is_unreachable(pair);
            let same_zone =
                zone_of.get(pair.src).is_some() && zone_of.get(pair.src) == zone_of.get(pair.dst);
            for node in [pair.src, pair.dst] {
                if let Some(tally) = anywhere.get_mut(node) {
                    tally.add(reached);
                }
                if same_zone && let Some(tally) = inside.get_mut(node) {
                    tally.add(reached);
                }
            }
        }
        Reachability {
            cluster: count(anywhere.into_iter()),
            zones: (0..zones)
                .map(|zone| {
                    count(
                        inside
                            .iter()
                            .zip(zone_of)
                            .filter(|(_, z)| **z == zone)
                            .map(|(tally, _)| *tally),
                    )
                })
                .collect(),
        }
    }

    /// Whether placement must fail open for the whole cluster.
    pub fn cluster_cannot_measure(&self) -> bool {
        self.cluster.cannot_measure()
    }

    /// Whether zone `zone` cannot be measured.
    pub fn zone_cannot_measure(&self, zone: usize) -> bool {
        self.zones.get(zone).is_some_and(NodeCount::cannot_measure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::PairSummary;
    use crate::score::{Source, Terms};
    use proptest::prelude::*;

    fn pair(src: usize, dst: usize, loss: f64) -> ScoredPair {
        ScoredPair {
            src,
            dst,
            summary: PairSummary {
                loss_ratio: Some(loss),
                samples: 100,
                ..PairSummary::default()
            },
            age_ms: Some(0),
            stale: false,
            terms: Terms::of(
                (0.0, Source::Measured),
                (1.0 - loss, Source::Measured),
                (0.0, Source::Estimated),
                loss == 1.0,
            ),
            quality: 0.0,
        }
    }

    /// Every directed pair of nodes 0..n, with `loss(src, dst)`.
    fn mesh(n: usize, loss: impl Fn(usize, usize) -> f64) -> Vec<ScoredPair> {
        (0..n)
            .flat_map(|s| (0..n).filter(move |&d| d != s).map(move |d| (s, d)))
            .map(|(s, d)| pair(s, d, loss(s, d)))
            .collect()
    }

    #[test]
    fn everything_unreachable_is_a_fault_of_measurement_not_of_the_nodes() {
        let zone_of = [0, 0, 0, 1, 1, 1];
        let filtered = Reachability::of(2, &zone_of, &mesh(6, |_, _| 1.0));
        assert!(filtered.cluster_cannot_measure());
        assert!(filtered.zone_cannot_measure(0) && filtered.zone_cannot_measure(1));
        // Heavy loss that still lets replies through is loss, measured.
        let lossy = Reachability::of(2, &zone_of, &mesh(6, |_, _| 0.9));
        assert!(!lossy.cluster_cannot_measure());
        assert_eq!(lossy.cluster.unreached, 0);
    }

    #[test]
    fn one_node_nobody_reaches_is_that_nodes_fault() {
        let zone_of = [0, 0, 0, 0, 1, 1, 1, 1];
        // Node 0 is cut off.
        let cut = Reachability::of(2, &zone_of, &mesh(8, |s, d| f64::from(s == 0 || d == 0)));
        assert!(!cut.cluster_cannot_measure());
        assert!(!cut.zone_cannot_measure(0), "{:?}", cut.zones[0]);
        assert_eq!(
            cut.cluster,
            NodeCount {
                nodes: 8,
                unreached: 1
            }
        );
        // In a zone of three, too: its two others reach each other.
        let small = Reachability::of(1, &[0, 0, 0], &mesh(3, |s, d| f64::from(s == 0 || d == 0)));
        assert!(!small.zone_cannot_measure(0));
        // Half of a zone cut off is still two node faults, not a filter.
        let half = Reachability::of(1, &[0; 4], &mesh(4, |s, d| f64::from(s < 2 || d < 2)));
        assert_eq!(
            half.zones[0],
            NodeCount {
                nodes: 4,
                unreached: 2
            }
        );
        assert!(!half.zone_cannot_measure(0));
    }

    #[test]
    fn one_zone_filtered_cannot_be_measured_and_the_others_can() {
        let zone_of = [0, 0, 0, 1, 1, 1];
        let filtered = Reachability::of(
            2,
            &zone_of,
            &mesh(6, |s, d| f64::from(zone_of[s] == 0 || zone_of[d] == 0)),
        );
        assert!(filtered.zone_cannot_measure(0));
        assert!(!filtered.zone_cannot_measure(1));
    }

    #[test]
    fn too_few_nodes_say_nothing() {
        let two = Reachability::of(1, &[0, 0], &mesh(2, |_, _| 1.0));
        assert!(!two.cluster_cannot_measure());
        assert!(!two.zone_cannot_measure(0));
        assert!(!two.zone_cannot_measure(7), "an unknown zone");
    }

    #[test]
    fn stale_and_unprobed_pairs_are_not_counted() {
        let mut pairs = mesh(4, |_, _| 1.0);
        for p in &mut pairs[..6] {
            p.stale = true;
        }
        pairs[6].summary.samples = 0;
        // Node 0's outgoing pairs stale, node 1's first unprobed: node 0
        // still has its incoming pairs.
        let counts = Reachability::of(1, &[0; 4], &pairs);
        assert_eq!(
            counts.cluster,
            NodeCount {
                nodes: 4,
                unreached: 4
            }
        );
        let all_stale: Vec<ScoredPair> = pairs
            .into_iter()
            .map(|p| ScoredPair { stale: true, ..p })
            .collect();
        assert_eq!(
            Reachability::of(1, &[0; 4], &all_stale).cluster,
            NodeCount::default()
        );
    }

    proptest! {
        /// The verdict follows the rule exactly: at least MIN_NODES nodes
        /// with fresh pairs, and more than the fraction of them unreached.
        #[test]
        fn the_rule_as_stated(cut in prop::collection::vec(any::<bool>(), 2..12)) {
            // Every pair with a cut node at either end is unreachable.
            let n = cut.len();
            let pairs = mesh(n, |s, d| f64::from(cut[s] || cut[d]));
            let counts = Reachability::of(1, &vec![0; n], &pairs);
            let cut_nodes = cut.iter().filter(|&&c| c).count();
            // A node that is not cut is unreached only when every other is.
            let unreached = if cut_nodes >= n - 1 { n } else { cut_nodes };
            prop_assert_eq!(counts.cluster, NodeCount { nodes: n, unreached });
            let expected = n >= MIN_NODES && 2 * unreached > n;
            prop_assert_eq!(counts.cluster_cannot_measure(), expected);
            prop_assert_eq!(counts.zone_cannot_measure(0), expected);
        }
    }
}
