//! The RTT of any pair of nodes, and what it rests on: the pair's own
//! fresh median where an agent probes it, else the nodes' network
//! coordinates ([`crate::coordinates`]) corrected by what they got wrong on
//! the measured pairs ([`Residuals`]) or, where that predicts the zone
//! pair's measured pairs better, an additive model of them (a base per zone
//! pair, a delay per node: [`Residuals::host_model`]), else the mean of the
//! fresh medians between their zones. What `netaware estimate` and the
//! `Estimate` call answer.

use foldhash::{HashMap, HashMapExt};

use crate::coordinates::{End, RttEstimate};
use crate::estimate::Mean;
use crate::residuals::{Model, Residuals};
use crate::scored::ScoredMatrix;

/// What an RTT rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RttBasis {
    /// The pair's own fresh median.
    Measured,
    /// What is known of the two nodes: their coordinates, or their zone
    /// pair's base and their own delays.
    Estimated,
    /// The mean of the fresh medians between the two zones.
    ZoneAverage,
    /// Nothing to go on.
    Unknown,
}

/// A pair's RTT.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairRtt {
    /// The probing node (index into the matrix's nodes).
    pub src: usize,
    /// The probed node.
    pub dst: usize,
    /// The RTT (ms); `None` when [`RttBasis::Unknown`].
    pub rtt_ms: Option<f64>,
    /// How far it may be off (ms): a measured pair's jitter, an estimate's
    /// own error bound; `None` for zone averages and unknowns.
    pub error_ms: Option<f64>,
    /// What it rests on.
    pub basis: RttBasis,
}

/// Answers pair RTTs from one matrix and its nodes' coordinates; the zone
/// means and residuals are worked out once, at [`RttLookup::new`].
#[derive(Debug)]
pub struct RttLookup<'a> {
    matrix: &'a ScoredMatrix,
    zone_means: HashMap<(usize, usize), f64>,
    residuals: Residuals,
}

/// What the two nodes' coordinates predict, when both have one.
fn predicted(matrix: &ScoredMatrix, src: usize, dst: usize) -> Option<RttEstimate> {
    let nodes = matrix.nodes();
    let (a, b) = (
        nodes.get(src)?.coordinate.as_ref()?,
        nodes.get(dst)?.coordinate.as_ref()?,
    );
    Some(a.estimate(b))
}

impl<'a> RttLookup<'a> {
    /// A lookup over `matrix`.
    pub fn new(matrix: &'a ScoredMatrix) -> Self {
        let mut means: HashMap<(usize, usize), Mean> = HashMap::new();
        let mut residuals = Residuals::new(matrix.zone_count());
        for pair in matrix.pairs() {
            if let (false, Some(rtt), Some(src), Some(dst)) = (
                pair.stale,
                pair.summary.rtt_median_ms,
                matrix.zone_index(pair.src),
                matrix.zone_index(pair.dst),
            ) {
                means.entry((src, dst)).or_default().add(rtt);
                if let Some(predicted) = predicted(matrix, pair.src, pair.dst) {
                    let ends = (
                        End {
                            node: pair.src,
                            zone: src,
                        },
                        End {
                            node: pair.dst,
                            zone: dst,
                        },
                    );
                    residuals.add(ends.0, ends.1, rtt, predicted.rtt_ms);
                }
            }
        }
        let zone_means = means
            .into_iter()
            .filter_map(|(key, mean)| Some((key, mean.value()?)))
            .collect();
        Self {
            matrix,
            zone_means,
            residuals,
        }
    }

    /// The RTT of src -> dst (indices into the matrix's nodes).
    pub fn pair(&self, src: usize, dst: usize) -> PairRtt {
        let answer = |rtt_ms, error_ms, basis| PairRtt {
            src,
            dst,
            rtt_ms,
            error_ms,
            basis,
        };
        if let Some(pair) = self.matrix.pair(src, dst).filter(|p| !p.stale)
            && let Some(rtt) = pair.summary.rtt_median_ms
        {
            return answer(Some(rtt), pair.summary.jitter_ms, RttBasis::Measured);
        }
        let zones = (self.matrix.zone_index(src), self.matrix.zone_index(dst));
        if let (Some(src_zone), Some(dst_zone)) = zones
            && let Some(estimate) = predicted(self.matrix, src, dst)
        {
            let ends = (
                End {
                    node: src,
                    zone: src_zone,
                },
                End {
                    node: dst,
                    zone: dst_zone,
                },
            );
            let (estimate, model) = self.residuals.estimate(ends.0, ends.1, estimate);
            // Either model estimates from what is known of the two nodes.
            let (Model::Coordinates | Model::HostDelays) = model;
            return answer(
                Some(estimate.rtt_ms),
                Some(estimate.error_ms),
                RttBasis::Estimated,
            );
        }
        if let (Some(src_zone), Some(dst_zone)) = zones
            && let Some(&mean) = self.zone_means.get(&(src_zone, dst_zone))
        {
            return answer(Some(mean), None, RttBasis::ZoneAverage);
        }
        answer(None, None, RttBasis::Unknown)
    }
}

#[cfg(test)]
mod lab_shape {
    //! The lab's shape, simulated with the product's own window, matrix,
    //! coordinate pass, peer sets and lookup: 3 zones of 3 nodes, RTTs of
    //! 0.27 ms inside a zone and 5, 20 and 30 ms between zones (30 > 5 +
    //! 20: no plane holds them), every agent probing 3 peers (one of each
    //! other zone, one zone-mate) that rotate every 30 s at each node's own
    //! phase, 2 s windows of 20 probes, a coordinate pass every second, as
    //! the lab test of bounded peer sets runs it; with and without a slow
    //! host (b2's stack adds 2 ms to each of its round trips).
    //!
    //! On this shape the coordinates' predictions of a zone pair scatter by
    //! more than a millisecond as the peer sets rotate: corrected by the
    //! residuals alone, some pair between zones was off by more than 15%
    //! in 46% of the windows, for up to 40 s in a row (and, on a loaded
    //! machine, for the minute the lab test waits). The additive model
    //! holds them.

    use super::*;
    use crate::coordinate_pass::{self, PassInput};
    use crate::coordinates::Coordinates;
    use crate::matrix::PairMatrix;
    use crate::peers::{PeerBound, choose};
    use crate::registry::Registry;
    use crate::score::ScoreConfig;
    use crate::transport::Transport;
    use crate::window::{OpenWindow, Probe};
    use crate::{NodeInfo, NodeKind};

    const NODES: [(&str, &str); 9] = [
        ("a1", "zone-a"),
        ("a2", "zone-a"),
        ("a3", "zone-a"),
        ("b1", "zone-b"),
        ("b2", "zone-b"),
        ("b3", "zone-b"),
        ("c1", "zone-c"),
        ("c2", "zone-c"),
        ("c3", "zone-c"),
    ];
    const STEP_MS: u64 = 30_000;
    const WINDOW_MS: u64 = 2_000;

    /// The RTT of a pair (ms), b2 `slow` ms slower on each of its pairs.
    fn truth(a: usize, b: usize, slow: f64) -> f64 {
        let zone = |i: usize| NODES[i].1;
        let base = match (zone(a), zone(b)) {
            (x, y) if x == y => 0.27,
            ("zone-a", "zone-b") | ("zone-b", "zone-a") => 5.07,
            ("zone-b", "zone-c") | ("zone-c", "zone-b") => 20.07,
            _ => 30.07,
        };
        base + if NODES[a].0 == "b2" || NODES[b].0 == "b2" {
            slow
        } else {
            0.0
        }
    }

    /// A node's phase in its rotation steps (as the collector's, by name).
    fn phase(node: &str) -> u64 {
        let hash = node.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
        hash % STEP_MS
    }

    /// What the estimates of pairs nobody probes got wrong, over every
    /// window from one minute to ten.
    #[derive(Debug, Default)]
    struct Errors {
        /// The worst relative error of a pair between zones.
        worst_between: f64,
        /// The worst absolute error (ms) of a pair inside a zone.
        worst_inside_ms: f64,
        /// Windows in which some pair between zones was over 15% off.
        bad_windows: usize,
    }

    fn run(seed: u64, slow: f64) -> Errors {
        let mut noise = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut jitter = move |mean: f64| {
            // xorshift, then an exponential draw.
            noise ^= noise << 13;
            noise ^= noise >> 7;
            noise ^= noise << 17;
            let u = (noise >> 11) as f64 / (1u64 << 53) as f64;
            -mean * (1.0 - u).max(1e-12).ln()
        };
        let mut registry = Registry::new();
        // Every agent reports every window: alive.
        let report = |registry: &mut Registry, now| {
            for (name, zone) in NODES {
                let info = NodeInfo {
                    name: name.into(),
                    address: String::new(),
                    zone: zone.into(),
                    region: String::new(),
                    kind: NodeKind::Agent,
                };
                registry.agent_hello(info, WINDOW_MS, now).unwrap();
            }
        };
        let candidates: Vec<(&str, &str)> = NODES.to_vec();
        let mut matrix = PairMatrix::new(6);
        let mut coordinates = Coordinates::default();
        let (mut pass, mut order) = (0, 0);
        let mut errors = Errors::default();
        for window in 0..300u64 {
            let end = (window + 1) * WINDOW_MS;
            report(&mut registry, end);
            for (src, &(name, zone)) in NODES.iter().enumerate() {
                let bound = PeerBound {
                    max: 3,
                    epoch: (end + phase(name)) / STEP_MS,
                };
                let mut open = OpenWindow::new();
                for dst in choose(name, zone, &candidates, bound) {
                    let rtt = truth(src, dst, slow);
                    for _ in 0..20 {
                        order += 1;
                        let rtt_ms = Some(rtt + jitter(0.01 + 0.002 * rtt));
                        open.record(
                            NODES[dst].0,
                            &crate::network::Network::primary(),
                            Probe::measured(order, rtt_ms, Transport::Icmp),
                        );
                    }
                }
                for peer_window in open.finish() {
                    let (pair, _) = peer_window.checked(end).unwrap();
                    matrix.record(name, &peer_window.peer, pair);
                }
            }
            let scored = |coordinates: &Coordinates| {
                ScoredMatrix::score(
                    &registry,
                    &matrix.readings(),
                    &ScoreConfig::default(),
                    coordinates,
                    end,
                )
            };
            for _ in 0..2 {
                pass += 1;
                let input = PassInput::of(&scored(&coordinates));
                coordinate_pass::run(&mut coordinates, &input, pass);
            }
            if end < 60_000 {
                continue;
            }
            let scored = scored(&coordinates);
            let lookup = RttLookup::new(&scored);
            let mut window_worst: f64 = 0.0;
            for (src, (src_name, src_zone)) in NODES.iter().enumerate() {
                for (dst, (dst_name, dst_zone)) in NODES.iter().enumerate() {
                    if src == dst {
                        continue;
                    }
                    let (a, b) = (
                        scored.index_of(src_name).unwrap(),
                        scored.index_of(dst_name).unwrap(),
                    );
                    let rtt = lookup.pair(a, b);
                    if rtt.basis != RttBasis::Estimated {
                        continue;
                    }
                    let off = (rtt.rtt_ms.unwrap() - truth(src, dst, slow)).abs();
                    if src_zone == dst_zone {
                        errors.worst_inside_ms = errors.worst_inside_ms.max(off);
                    } else {
                        window_worst = window_worst.max(off / truth(src, dst, slow));
                    }
                }
            }
            errors.worst_between = errors.worst_between.max(window_worst);
            errors.bad_windows += usize::from(window_worst > 0.15);
        }
        errors
    }

    #[test]
    fn estimates_hold_on_the_labs_shape_with_and_without_a_slow_host() {
        for slow in [0.0, 2.0] {
            for seed in 1..=3 {
                let errors = run(seed, slow);
                eprintln!("slow {slow} ms, seed {seed}: {errors:?}");
                assert!(errors.worst_between < 0.10, "slow {slow}: {errors:?}");
                assert_eq!(errors.bad_windows, 0, "slow {slow}: {errors:?}");
                assert!(errors.worst_inside_ms < 0.5, "slow {slow}: {errors:?}");
            }
        }
    }
}
