//! A synthetic GPU cluster for the simulator: zones of nodes (and, when
//! asked, racks inside them) and links whose truth only the simulator
//! knows. What netaware (or any policy) knows of it comes from
//! [`crate::information`].
//!
//! The truth: inside a zone, 0.1 ms RTT at the slower NIC's rate (healthy
//! NICs: 100 Gbit/s), non-blocking. With racks (`nodes_per_rack`), two
//! nodes under one rack switch are 0.05 ms apart, and every flow between
//! racks shares its racks' uplinks to the zone's spine (the rack's NICs'
//! rate over `rack_oversubscription`). Zones are points in a plane (0.4 to
//! about 3 ms apart); between two zones the RTT is 0.5 ms plus their
//! distance, a flow gets at most 25 Gbit/s (one path of the spine), and
//! every flow leaving or entering a zone shares the zone's uplink
//! ([`Cluster::uplink_bps`]: its NICs' rate over an oversubscription of
//! 8). A share of nodes is degraded, half slow (a NIC at 10 Gbit/s) and
//! half lossy (1% loss, bad optics); a share of the pairs inside zones
//! loses 0.5% (a bad cable or port between them). Grey failures
//! ([`crate::grey`]) come and go on NICs and rack uplinks over a run:
//! [`Cluster::link_at`] is the truth at a moment.

use std::collections::HashSet;

use netaware_core::score::ScoreConfig;
use rand::Rng;

use crate::grey::{Component, Effect, GreyFault};
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
    /// Nodes under one rack switch; 0: a zone is one non-blocking switch.
    pub nodes_per_rack: usize,
    /// A rack's uplink carries its NICs' rate over this.
    pub rack_oversubscription: f64,
}

impl Default for ClusterSpec {
    fn default() -> Self {
        Self {
            zones: 8,
            nodes_per_zone: 128,
            degraded_nodes: 0.05,
            degraded_links: 0.01,
            max_peers: 0,
            nodes_per_rack: 0,
            rack_oversubscription: 4.0,
        }
    }
}

const HEALTHY_NIC_BPS: f64 = 100e9;
const SLOW_NIC_BPS: f64 = 10e9;
const LOSSY_NIC_LOSS: f64 = 0.01;
const LOSSY_LINK_LOSS: f64 = 0.005;
const INTRA_ZONE_RTT_MS: f64 = 0.1;
/// RTT between two nodes under one rack switch (with racks).
const INTRA_RACK_RTT_MS: f64 = 0.05;
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
    /// Each node's rack (its zone's when the zones have no racks).
    rack: Vec<usize>,
    /// Each rack's name, its rack label's true value.
    rack_names: Vec<String>,
    /// Nodes under one rack switch; 0: no racks.
    nodes_per_rack: usize,
    rack_oversubscription: f64,
    /// The grey failures of the run.
    grey: Vec<GreyFault>,
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
            rack: Vec::with_capacity(n),
            rack_names: Vec::new(),
            nodes_per_rack: if spec.nodes_per_rack > 0 && spec.nodes_per_rack < spec.nodes_per_zone
            {
                spec.nodes_per_rack
            } else {
                0
            },
            rack_oversubscription: spec.rack_oversubscription.max(1.0),
            grey: Vec::new(),
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
        let per_rack = match cluster.nodes_per_rack {
            0 => spec.nodes_per_zone.max(1),
            racked => racked,
        };
        for z in 0..spec.zones {
            for i in 0..spec.nodes_per_zone {
                cluster.names.push(format!("z{z:02}-n{i:03}"));
                cluster.zone.push(z);
                cluster.zone_labels.push(format!("zone-{z:02}"));
                if i % per_rack == 0 {
                    cluster
                        .rack_names
                        .push(format!("zone-{z:02}-rack-{:02}", i / per_rack));
                }
                cluster.rack.push(cluster.rack_names.len() - 1);
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

    /// The rack of a node, as a number (its zone's only rack when the
    /// zones have none).
    pub fn rack_of(&self, node: usize) -> usize {
        self.rack[node]
    }

    /// How many racks.
    pub fn rack_count(&self) -> usize {
        self.rack_names.len()
    }

    /// A node's true rack, as its rack label would say it.
    pub fn rack_name(&self, node: usize) -> &str {
        &self.rack_names[self.rack[node]]
    }

    /// A node's zone label.
    pub fn zone_label(&self, node: usize) -> &str {
        &self.zone_labels[node]
    }

    /// Whether zones have racks whose uplinks flows between them share.
    pub fn racked(&self) -> bool {
        self.nodes_per_rack > 0
    }

    /// The cluster with `faults` coming and going over its run.
    pub fn with_grey(mut self, faults: Vec<GreyFault>) -> Self {
        self.grey = faults;
        self
    }

    /// The grey failures of the run.
    pub fn grey(&self) -> &[GreyFault] {
        &self.grey
    }

    /// What a rack's uplink to the spine carries (each way), bit/s, when
    /// healthy.
    pub fn rack_uplink_bps(&self) -> f64 {
        self.nodes_per_rack as f64 * HEALTHY_NIC_BPS / self.rack_oversubscription
    }

    /// The shared links a flow from `a` to `b` crosses, as indices into
    /// [`Cluster::capacities_at`]: its racks' uplink and downlink when the
    /// racks differ, its zones' when the zones do.
    pub fn path_resources(&self, a: usize, b: usize) -> Vec<usize> {
        let zones = self.zone_count();
        let mut resources = Vec::with_capacity(4);
        let (ra, rb) = (self.rack[a], self.rack[b]);
        if self.racked() && ra != rb {
            resources.push(2 * zones + 2 * ra);
            resources.push(2 * zones + 2 * rb + 1);
        }
        let (za, zb) = (self.zone[a], self.zone[b]);
        if za != zb {
            resources.push(2 * za);
            resources.push(2 * zb + 1);
        }
        resources
    }

    /// What each shared link carries at `t_s` (bit/s): every zone's uplink
    /// and downlink, then every rack's (a slow rack uplink carries its
    /// share of its rate while it lasts).
    pub fn capacities_at(&self, t_s: f64) -> Vec<f64> {
        let mut capacities = vec![self.uplink_bps(); 2 * self.zone_count()];
        let rack = self.rack_uplink_bps();
        capacities.extend(std::iter::repeat_n(rack, 2 * self.rack_count()));
        for fault in self.grey.iter().filter(|f| f.active_at(t_s)) {
            if let (Component::RackUplink(r), Effect::Slow(share)) = (fault.component, fault.effect)
            {
                let base = 2 * self.zone_count() + 2 * r;
                capacities[base] *= share;
                capacities[base + 1] *= share;
            }
        }
        capacities
    }

    /// The components that fail at `t_s` and that a flow from `a` to `b`
    /// crosses: either end's NIC, and either end's rack uplink when the
    /// flow leaves its rack.
    pub fn faults_on_path(&self, a: usize, b: usize, t_s: f64) -> impl Iterator<Item = &GreyFault> {
        let leaves = self.rack[a] != self.rack[b];
        self.grey.iter().filter(move |fault| {
            fault.active_at(t_s)
                && match fault.component {
                    Component::Nic(n) => n == a || n == b,
                    Component::RackUplink(r) => {
                        leaves && self.racked() && (r == self.rack[a] || r == self.rack[b])
                    }
                }
        })
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

    /// The true link from `a` to `b` with no grey failure.
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
        let rtt_ms = if self.racked() && self.rack[a] == self.rack[b] {
            INTRA_RACK_RTT_MS
        } else {
            self.zone_rtt_ms(self.zone[a], self.zone[b])
        };
        Link {
            rtt_ms,
            loss: 1.0 - keep,
            rate_bps: if same_zone {
                nic
            } else {
                nic.min(INTER_ZONE_BPS)
            },
        }
    }

    /// The true link from `a` to `b` at `t_s`: with the grey failures on
    /// its path then (a lossy component adds its loss, a slow one caps the
    /// flow at its share of the rate).
    pub fn link_at(&self, a: usize, b: usize, t_s: f64) -> Link {
        let mut link = self.link(a, b);
        for fault in self.faults_on_path(a, b, t_s) {
            match fault.effect {
                Effect::Loss(loss) => link.loss = 1.0 - (1.0 - link.loss) * (1.0 - loss),
                Effect::Slow(share) => link.rate_bps *= share,
            }
        }
        link
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
            ..ClusterSpec::default()
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
    fn racks_share_their_uplinks_and_grey_failures_come_and_go() {
        let spec = ClusterSpec {
            zones: 2,
            nodes_per_zone: 8,
            degraded_nodes: 0.0,
            degraded_links: 0.0,
            nodes_per_rack: 4,
            ..ClusterSpec::default()
        };
        let cluster = Cluster::generate(&spec, &mut StdRng::seed_from_u64(1));
        assert!(cluster.racked());
        assert_eq!(cluster.rack_count(), 4);
        assert_eq!(cluster.rack_name(5), "zone-00-rack-01");
        assert_eq!(cluster.rack_of(8), 2);
        // Under one rack switch: closer, and no shared link.
        assert!(cluster.link(0, 1).rtt_ms < cluster.link(0, 5).rtt_ms);
        assert!(cluster.path_resources(0, 1).is_empty());
        // Across racks: both racks' links; across zones, the zones' too.
        assert_eq!(cluster.path_resources(0, 5), [4, 4 + 3]);
        assert_eq!(cluster.path_resources(0, 9), [4, 4 + 5, 0, 3]);
        assert_eq!(cluster.rack_uplink_bps(), 100e9);

        let cluster = cluster.with_grey(vec![
            GreyFault {
                component: Component::Nic(1),
                effect: Effect::Loss(0.02),
                start_s: 10.0,
                end_s: 20.0,
            },
            GreyFault {
                component: Component::RackUplink(1),
                effect: Effect::Slow(0.25),
                start_s: 10.0,
                end_s: 20.0,
            },
        ]);
        assert_eq!(cluster.link_at(0, 1, 5.0), cluster.link(0, 1));
        assert!((cluster.link_at(0, 1, 15.0).loss - 0.02).abs() < 1e-12);
        // The slow uplink: flows leaving rack 1 only, while it lasts.
        assert_eq!(cluster.link_at(0, 5, 15.0).rate_bps, 25e9);
        assert_eq!(cluster.link_at(4, 5, 15.0).rate_bps, 100e9);
        assert_eq!(cluster.capacities_at(15.0)[4 + 2], 25e9);
        assert_eq!(cluster.capacities_at(25.0)[4 + 2], 100e9);
        assert_eq!(cluster.faults_on_path(0, 5, 15.0).count(), 1);
    }
}
