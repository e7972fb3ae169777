//! A synthetic GPU cluster for the simulator: zones of nodes, links whose
//! truth the simulator knows, and the matrix that netaware's agents would
//! have measured on them (with measurement noise), scored by the core's
//! own score model.
//!
//! The truth: inside a zone, 0.1 ms RTT at the slower NIC's rate (healthy
//! NICs: 100 Gbit/s); between zones, 2 ms RTT and 25 Gbit/s per flow (an
//! oversubscribed spine). A share of nodes is degraded, half slow (a NIC
//! at 10 Gbit/s) and half lossy (1% loss, bad optics); a share of the pairs
//! inside zones loses 0.5% (a bad cable or port between them).
//!
//! What agents measure: the pairs their peer sets hold, chosen by the
//! agents' own rule (`netaware_core::peers::choose`, the collector's
//! `--max-peers`: the node's zone first, then the other zones in turn), RTT
//! and goodput within +-10% of the truth, loss as is.

use std::collections::HashSet;

use netaware_core::coordinates::Coordinates;
use netaware_core::matrix::{PairSummary, Throughput};
use netaware_core::score::ScoreConfig;
use netaware_core::snapshot::{NodeView, ScoredMatrix, ScoredPair, own_terms};
use netaware_core::{NodeInfo, NodeKind};
use rand::Rng;

use crate::model::Link;

/// The shape of a synthetic cluster.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ClusterSpec {
    /// Zones.
    pub zones: usize,
    /// Nodes in each zone.
    pub nodes_per_zone: usize,
    /// Share of nodes with a degraded NIC (half slow, half lossy).
    pub degraded_nodes: f64,
    /// Share of the pairs inside zones with a lossy path.
    pub degraded_links: f64,
    /// Peers each agent probes (`--max-peers`; 0: every node).
    pub max_peers: usize,
}

impl Default for ClusterSpec {
    fn default() -> Self {
        Self {
            zones: 8,
            nodes_per_zone: 128,
            degraded_nodes: 0.05,
            degraded_links: 0.01,
            max_peers: 0,
        }
    }
}

const HEALTHY_NIC_BPS: f64 = 100e9;
const SLOW_NIC_BPS: f64 = 10e9;
const LOSSY_NIC_LOSS: f64 = 0.01;
const LOSSY_LINK_LOSS: f64 = 0.005;
const INTRA_ZONE_RTT_MS: f64 = 0.1;
const INTER_ZONE_RTT_MS: f64 = 2.0;
const INTER_ZONE_BPS: f64 = 25e9;

/// The score configuration an operator of this cluster would set: the
/// throughput term's reference at a healthy NIC's rate.
pub fn score_config() -> ScoreConfig {
    ScoreConfig {
        throughput_reference_bps: HEALTHY_NIC_BPS,
        ..ScoreConfig::default()
    }
}

/// A cluster and the truth of its links.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// Node names, zone by zone.
    pub names: Vec<String>,
    zone: Vec<usize>,
    nic_bps: Vec<f64>,
    nic_loss: Vec<f64>,
    lossy_pairs: HashSet<(usize, usize)>,
}

impl Cluster {
    /// Draws a cluster of `spec`'s shape.
    pub fn generate(spec: &ClusterSpec, rng: &mut impl Rng) -> Self {
        let n = spec.zones * spec.nodes_per_zone;
        let mut cluster = Cluster {
            names: Vec::with_capacity(n),
            zone: Vec::with_capacity(n),
            nic_bps: vec![HEALTHY_NIC_BPS; n],
            nic_loss: vec![0.0; n],
            lossy_pairs: HashSet::new(),
        };
        for z in 0..spec.zones {
            for i in 0..spec.nodes_per_zone {
                cluster.names.push(format!("z{z:02}-n{i:03}"));
                cluster.zone.push(z);
            }
        }
        for node in 0..n {
            if rng.random_bool(spec.degraded_nodes.clamp(0.0, 1.0)) {
                if rng.random_bool(0.5) {
                    cluster.nic_bps[node] = SLOW_NIC_BPS;
                } else {
                    cluster.nic_loss[node] = LOSSY_NIC_LOSS;
                }
            }
        }
        for a in 0..n {
            for b in a + 1..n {
                if cluster.zone[a] == cluster.zone[b]
                    && rng.random_bool(spec.degraded_links.clamp(0.0, 1.0))
                {
                    cluster.lossy_pairs.insert((a, b));
                }
            }
        }
        cluster
    }

    /// The zone of each node, as its topology label.
    pub fn zone_name(&self, node: usize) -> String {
        format!("zone-{:02}", self.zone[node])
    }

    /// Whether a node's NIC is degraded (slow or lossy).
    pub fn degraded(&self, node: usize) -> bool {
        self.nic_bps[node] < HEALTHY_NIC_BPS || self.nic_loss[node] > 0.0
    }

    /// The index of a node name.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// The true link from `a` to `b`.
    pub fn link(&self, a: usize, b: usize) -> Link {
        let same_zone = self.zone[a] == self.zone[b];
        let pair = (a.min(b), a.max(b));
        let path_loss = if self.lossy_pairs.contains(&pair) {
            LOSSY_LINK_LOSS
        } else {
            0.0
        };
        let keep = (1.0 - self.nic_loss[a]) * (1.0 - self.nic_loss[b]) * (1.0 - path_loss);
        let nic = self.nic_bps[a].min(self.nic_bps[b]);
        Link {
            rtt_ms: if same_zone {
                INTRA_ZONE_RTT_MS
            } else {
                INTER_ZONE_RTT_MS
            },
            loss: 1.0 - keep,
            rate_bps: if same_zone {
                nic
            } else {
                nic.min(INTER_ZONE_BPS)
            },
        }
    }

    /// What netaware would have measured and scored, as of `now` (ms),
    /// with each agent probing `max_peers` peers (0: all).
    pub fn measured(
        &self,
        config: &ScoreConfig,
        max_peers: usize,
        now: u64,
        rng: &mut impl Rng,
    ) -> ScoredMatrix {
        let nodes: Vec<NodeView> = (0..self.names.len())
            .map(|i| NodeView {
                info: NodeInfo {
                    name: self.names[i].clone(),
                    address: String::new(),
                    zone: self.zone_name(i),
                    region: String::new(),
                    kind: NodeKind::Agent,
                },
                stale: false,
                last_report_age_ms: Some(0),
                coordinate: None,
            })
            .collect();
        let zones: Vec<String> = (0..self.names.len()).map(|i| self.zone_name(i)).collect();
        let candidates: Vec<(&str, &str)> = self
            .names
            .iter()
            .zip(&zones)
            .map(|(name, zone)| (name.as_str(), zone.as_str()))
            .collect();
        let mut pairs = Vec::new();
        for src in 0..self.names.len() {
            let (name, zone) = candidates[src];
            for dst in netaware_core::peers::choose(
                name,
                zone,
                &candidates,
                netaware_core::peers::PeerBound {
                    max: max_peers,
                    epoch: 0,
                },
            ) {
                let truth = self.link(src, dst);
                let noise = |rng: &mut dyn rand::RngCore| rng.random_range(0.9..1.1);
                let summary = PairSummary {
                    rtt_median_ms: Some(truth.rtt_ms * noise(rng)),
                    rtt_p99_ms: Some(truth.rtt_ms * 1.5),
                    jitter_ms: Some(truth.rtt_ms * 0.05),
                    loss_ratio: Some(truth.loss),
                    samples: 600,
                    last_end: Some(now),
                    throughput: Some(Throughput {
                        bps: truth.goodput_bps() * noise(rng),
                        at: now,
                        retransmits: None,
                        tcp_rtt_ms: None,
                    }),
                    one_way_loss_ratio: None,
                };
                let terms = own_terms(config, &config.measured_terms(&summary, true, now));
                pairs.push(ScoredPair {
                    src,
                    dst,
                    summary,
                    age_ms: Some(0),
                    stale: false,
                    quality: config.quality(&terms),
                    terms,
                });
            }
        }
        let nodes = if max_peers > 0 {
            with_coordinates(nodes, &pairs)
        } else {
            nodes
        };
        ScoredMatrix::from_parts(nodes, pairs, config.fallback())
    }
}

/// Passes the collector's coordinates make over the medians in one
/// rotation step of its peer sets (a pass every 10 s, a step every 5 min).
const COORDINATE_PASSES: usize = 30;

/// The nodes with the network coordinates that the collector would have
/// worked out from the measured medians of `pairs` (the same code, the
/// same number of passes), so that placement estimates the pairs nobody
/// probes as the product does.
fn with_coordinates(nodes: Vec<NodeView>, pairs: &[ScoredPair]) -> Vec<NodeView> {
    let mut coordinates = Coordinates::default();
    for _ in 0..COORDINATE_PASSES {
        for pair in pairs {
            if let Some(rtt) = pair.summary.rtt_median_ms {
                let (src, dst) = (&nodes[pair.src].info.name, &nodes[pair.dst].info.name);
                // The simulator's medians are all usable samples.
                let _ = coordinates.observe(src, dst, rtt);
            }
        }
    }
    nodes
        .into_iter()
        .map(|node| NodeView {
            coordinate: coordinates.coordinate(&node.info.name).cloned(),
            ..node
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn links_follow_zones_and_degradations() {
        let spec = ClusterSpec {
            zones: 2,
            nodes_per_zone: 10,
            degraded_nodes: 0.0,
            degraded_links: 0.0,
            max_peers: 0,
        };
        let cluster = Cluster::generate(&spec, &mut StdRng::seed_from_u64(1));
        assert_eq!(cluster.names.len(), 20);
        let inside = cluster.link(0, 1);
        let across = cluster.link(0, 10);
        assert_eq!((inside.rate_bps, inside.loss), (HEALTHY_NIC_BPS, 0.0));
        assert_eq!(across.rate_bps, INTER_ZONE_BPS);
        assert!(across.rtt_ms > inside.rtt_ms);

        let degraded = ClusterSpec {
            degraded_nodes: 1.0,
            ..spec
        };
        let cluster = Cluster::generate(&degraded, &mut StdRng::seed_from_u64(1));
        let worse = (0..20).all(|i| {
            let link = cluster.link(i, (i + 1) % 20);
            link.rate_bps < HEALTHY_NIC_BPS.min(INTER_ZONE_BPS) + 1.0 || link.loss > 0.0
        });
        assert!(worse);
    }

    #[test]
    fn the_measured_matrix_scores_every_pair_and_ranks_bad_links_lower() {
        let spec = ClusterSpec {
            zones: 2,
            nodes_per_zone: 6,
            degraded_nodes: 0.3,
            degraded_links: 0.0,
            max_peers: 0,
        };
        let mut rng = StdRng::seed_from_u64(7);
        let cluster = Cluster::generate(&spec, &mut rng);
        let config = score_config();
        let matrix = cluster.measured(&config, 0, 1_000, &mut rng);
        assert_eq!(matrix.pairs().len(), 12 * 11);
        // Five peers each: a sample of four of its zone, one of the other.
        let sparse = cluster.measured(&config, 5, 1_000, &mut rng);
        assert_eq!(sparse.pairs().len(), 12 * 5);
        let inside = sparse.pairs().iter().filter(|p| p.src / 6 == p.dst / 6);
        assert_eq!(inside.count(), 12 * 4);
        for pair in matrix.pairs() {
            assert!((0.0..=1.0).contains(&pair.quality));
            let truth = cluster.link(pair.src, pair.dst);
            let clean = truth.loss == 0.0 && truth.rate_bps == HEALTHY_NIC_BPS;
            if truth.rtt_ms > INTRA_ZONE_RTT_MS {
                continue; // across zones: slower by design
            }
            if !clean {
                assert!(pair.quality < 0.9, "{truth:?}: {}", pair.quality);
            } else {
                assert!(pair.quality > 0.9, "{truth:?}: {}", pair.quality);
            }
        }
    }
}
