//! A synthetic GPU cluster for the simulator: zones of nodes and links
//! whose truth only the simulator knows. What netaware (or any policy)
//! knows of it comes from [`crate::information`].
//!
//! The truth: inside a zone, 0.1 ms RTT at the slower NIC's rate (healthy
//! NICs: 100 Gbit/s), non-blocking. Zones are points in a plane (0.4 to
//! about 3 ms apart); between two zones the RTT is 0.5 ms plus their
//! distance, a flow gets at most 25 Gbit/s (one path of the spine), and
//! every flow leaving or entering a zone shares the zone's uplink
//! ([`Cluster::uplink_bps`]: its NICs' rate over an oversubscription of
//! 8). A share of nodes is degraded, half slow (a NIC at 10 Gbit/s) and
//! half lossy (1% loss, bad optics); a share of the pairs inside zones
//! loses 0.5% (a bad cable or port between them).

use std::collections::HashSet;

use netaware_core::score::ScoreConfig;
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
/// RTT between two zones at the same point; their distance adds to it.
const INTER_ZONE_BASE_MS: f64 = 0.5;
const INTER_ZONE_BPS: f64 = 25e9;
/// A zone's uplink carries this share of its NICs' rate.
const UPLINK_OVERSUBSCRIPTION: f64 = 8.0;

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
    /// Each node's zone label.
    zone_labels: Vec<String>,
    nic_bps: Vec<f64>,
    nic_loss: Vec<f64>,
    lossy_pairs: HashSet<(usize, usize)>,
    /// Where each zone sits (ms apart).
    zone_place: Vec<[f64; 2]>,
    nodes_per_zone: usize,
}

impl Cluster {
    /// Draws a cluster of `spec`'s shape.
    pub fn generate(spec: &ClusterSpec, rng: &mut impl Rng) -> Self {
        let n = spec.zones * spec.nodes_per_zone;
        let mut cluster = Cluster {
            names: Vec::with_capacity(n),
            zone: Vec::with_capacity(n),
            zone_labels: Vec::with_capacity(n),
            nic_bps: vec![HEALTHY_NIC_BPS; n],
            nic_loss: vec![0.0; n],
            lossy_pairs: HashSet::new(),
            zone_place: Vec::with_capacity(spec.zones),
            nodes_per_zone: spec.nodes_per_zone,
        };
        // Zones over a 2.5 ms square, at least 0.4 ms apart (redrawn until
        // they are; a square this size holds dozens).
        while cluster.zone_place.len() < spec.zones {
            let place = [rng.random_range(0.0..2.5), rng.random_range(0.0..2.5)];
            let apart = |other: &[f64; 2]| distance(*other, place) >= 0.4;
            if cluster.zone_place.iter().all(apart) || cluster.zone_place.len() >= 40 {
                cluster.zone_place.push(place);
            }
        }
        for z in 0..spec.zones {
            for i in 0..spec.nodes_per_zone {
                cluster.names.push(format!("z{z:02}-n{i:03}"));
                cluster.zone.push(z);
                cluster.zone_labels.push(format!("zone-{z:02}"));
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

    /// Every node as the agents' peer choice takes them: (name, zone).
    pub fn candidates(&self) -> Vec<(&str, &str)> {
        self.names
            .iter()
            .zip(&self.zone_labels)
            .map(|(name, zone)| (name.as_str(), zone.as_str()))
            .collect()
    }

    /// The zone of a node, as a number.
    pub fn zone_of(&self, node: usize) -> usize {
        self.zone[node]
    }

    /// How many zones.
    pub fn zone_count(&self) -> usize {
        self.zone_place.len()
    }

    /// What a zone's uplink to the spine carries (each way), bit/s: every
    /// flow leaving the zone shares it, and every flow entering it the
    /// downlink of the same size.
    pub fn uplink_bps(&self) -> f64 {
        self.nodes_per_zone as f64 * HEALTHY_NIC_BPS / UPLINK_OVERSUBSCRIPTION
    }

    /// The true RTT between two zones (ms).
    pub fn zone_rtt_ms(&self, a: usize, b: usize) -> f64 {
        if a == b {
            INTRA_ZONE_RTT_MS
        } else {
            INTER_ZONE_BASE_MS + distance(self.zone_place[a], self.zone_place[b])
        }
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
            rtt_ms: self.zone_rtt_ms(self.zone[a], self.zone[b]),
            loss: 1.0 - keep,
            rate_bps: if same_zone {
                nic
            } else {
                nic.min(INTER_ZONE_BPS)
            },
        }
    }
}

fn distance(a: [f64; 2], b: [f64; 2]) -> f64 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt()
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
}
