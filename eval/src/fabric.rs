//! A data-centre fabric with the structure that RTT estimates must cope
//! with, for judging network coordinates against bounded peer sets: zones
//! apart from each other, racks (top-of-rack switches) inside each zone, a
//! per-node host delay, a few slow nodes, and probe noise.
//!
//! The truth of a pair's RTT (ms) is both hosts' delays plus its path:
//!
//! - same rack: [`RACK_PATH_MS`];
//! - same zone, other rack: [`SPINE_PATH_MS`] plus a per-rack uplink delay
//!   at each end (racks sit at different distances from the spine);
//! - other zone: the zones' distance (zones are points in a plane, 0.4 to
//!   about 3 ms apart) times a detour of the fibre between them (1 to 1.25,
//!   drawn per zone pair, so that the zones do not fit a plane exactly),
//!   plus both racks' uplinks and the spine.
//!
//! A host delay is 5 to 40 us; slow nodes (a loaded host, a bad NIC
//! setting) add [`SLOW_NODE_MS`]. What a probe window measures is the median
//! of its samples, each the truth plus exponential queueing jitter: so a
//! measured median sits a little above the truth, as on real networks.

use rand::Rng;

/// RTT of the path between two nodes under one top-of-rack switch.
pub const RACK_PATH_MS: f64 = 0.010;
/// RTT of the path between racks through the zone's spine.
pub const SPINE_PATH_MS: f64 = 0.030;
/// Added to a slow node's host delay.
pub const SLOW_NODE_MS: f64 = 0.300;
/// Mean of the exponential jitter of one probe.
pub const JITTER_MEAN_MS: f64 = 0.008;
/// Probes in one window (a 2 s window at 10 probes a second).
pub const PROBES_PER_WINDOW: usize = 20;

/// The shape of a fabric.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct FabricSpec {
    /// Zones.
    pub zones: usize,
    /// Nodes in each zone.
    pub nodes_per_zone: usize,
    /// Nodes under one top-of-rack switch.
    pub nodes_per_rack: usize,
    /// Share of slow nodes.
    pub slow_nodes: f64,
}

impl Default for FabricSpec {
    fn default() -> Self {
        Self {
            zones: 10,
            nodes_per_zone: 500,
            nodes_per_rack: 32,
            slow_nodes: 0.01,
        }
    }
}

/// A drawn fabric.
#[derive(Debug, Clone)]
pub struct Fabric {
    /// Node names, zone by zone, rack by rack.
    pub names: Vec<String>,
    /// Each node's zone name.
    pub zone_names: Vec<String>,
    zone: Vec<usize>,
    rack: Vec<usize>,
    host_ms: Vec<f64>,
    rack_uplink_ms: Vec<f64>,
    zone_place: Vec<[f64; 2]>,
    /// Per zone pair (`a * zones + b`, symmetric), the fibre's detour.
    zone_detour: Vec<f64>,
}

/// Whether a pair is inside one zone or between two; and, of the pairs
/// inside a zone, those inside one rack (counted among both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PairClass {
    /// Both nodes in one zone.
    IntraZone,
    /// The nodes in different zones.
    InterZone,
    /// Both nodes under one top-of-rack switch (also intra-zone): the one
    /// path that is not the sum of what its two ends add.
    SameRack,
}

impl Fabric {
    /// Draws a fabric of `spec`'s shape.
    pub fn generate(spec: &FabricSpec, rng: &mut impl Rng) -> Self {
        let n = spec.zones * spec.nodes_per_zone;
        let racks_per_zone = spec.nodes_per_zone.div_ceil(spec.nodes_per_rack.max(1));
        let mut fabric = Fabric {
            names: Vec::with_capacity(n),
            zone_names: Vec::with_capacity(n),
            zone: Vec::with_capacity(n),
            rack: Vec::with_capacity(n),
            host_ms: Vec::with_capacity(n),
            rack_uplink_ms: (0..spec.zones * racks_per_zone)
                .map(|_| rng.random_range(0.002..0.012))
                .collect(),
            // Zones of a region spread over a 2.5 ms square, at least
            // 0.4 ms apart (redrawn until they are).
            zone_place: Vec::with_capacity(spec.zones),
            zone_detour: vec![1.0; spec.zones * spec.zones],
        };
        for a in 0..spec.zones {
            for b in a + 1..spec.zones {
                let detour = rng.random_range(1.0..1.25);
                fabric.zone_detour[a * spec.zones + b] = detour;
                fabric.zone_detour[b * spec.zones + a] = detour;
            }
        }
        while fabric.zone_place.len() < spec.zones {
            let place = [rng.random_range(0.0..2.5), rng.random_range(0.0..2.5)];
            if fabric
                .zone_place
                .iter()
                .all(|other| distance(*other, place) >= 0.4)
            {
                fabric.zone_place.push(place);
            }
        }
        for z in 0..spec.zones {
            for i in 0..spec.nodes_per_zone {
                let rack = z * racks_per_zone + i / spec.nodes_per_rack.max(1);
                fabric.names.push(format!("z{z:02}-r{rack:03}-n{i:03}"));
                fabric.zone_names.push(format!("zone-{z:02}"));
                fabric.zone.push(z);
                fabric.rack.push(rack);
                let slow = rng.random_bool(spec.slow_nodes.clamp(0.0, 1.0));
                let host = rng.random_range(0.005..0.040) + if slow { SLOW_NODE_MS } else { 0.0 };
                fabric.host_ms.push(host);
            }
        }
        fabric
    }

    /// Nodes.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// How many zones.
    pub fn zone_count(&self) -> usize {
        self.zone_place.len()
    }

    /// A node and its zone, as a pair's end for the residuals.
    pub fn end(&self, node: usize) -> netaware_core::coordinates::End {
        netaware_core::coordinates::End {
            node,
            zone: self.zone[node],
        }
    }

    /// Whether the pair is inside a zone.
    /// Whether `a` and `b` sit under one top-of-rack switch.
    pub fn same_rack(&self, a: usize, b: usize) -> bool {
        self.rack[a] == self.rack[b]
    }

    /// Whether a pair is inside one zone or between two.
    pub fn class(&self, a: usize, b: usize) -> PairClass {
        if self.zone[a] == self.zone[b] {
            PairClass::IntraZone
        } else {
            PairClass::InterZone
        }
    }

    /// The true RTT (ms) of a pair, without jitter.
    pub fn rtt_ms(&self, a: usize, b: usize) -> f64 {
        let hosts = self.host_ms[a] + self.host_ms[b];
        let path = if self.rack[a] == self.rack[b] {
            RACK_PATH_MS
        } else {
            let uplinks = self.rack_uplink_ms[self.rack[a]] + self.rack_uplink_ms[self.rack[b]];
            let zones = if self.zone[a] == self.zone[b] {
                0.0
            } else {
                let (za, zb) = (self.zone[a], self.zone[b]);
                distance(self.zone_place[za], self.zone_place[zb])
                    * self.zone_detour[za * self.zone_place.len() + zb]
            };
            SPINE_PATH_MS + uplinks + zones
        };
        hosts + path
    }

    /// What a probe window measures: the median of its samples.
    pub fn window_median_ms(&self, a: usize, b: usize, rng: &mut impl Rng) -> f64 {
        let truth = self.rtt_ms(a, b);
        let mut samples: Vec<f64> = (0..PROBES_PER_WINDOW)
            .map(|_| truth + exponential(JITTER_MEAN_MS, rng))
            .collect();
        samples.sort_by(f64::total_cmp);
        samples[samples.len() / 2]
    }

    /// What a probe window's median is on average: the truth plus the
    /// jitter's median. The reference an estimate is judged against (an
    /// estimate cannot know better than what probes would have measured).
    pub fn expected_median_ms(&self, a: usize, b: usize) -> f64 {
        self.rtt_ms(a, b) + JITTER_MEAN_MS * std::f64::consts::LN_2
    }
}

fn distance(a: [f64; 2], b: [f64; 2]) -> f64 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt()
}

fn exponential(mean: f64, rng: &mut impl Rng) -> f64 {
    let u: f64 = rng.random_range(f64::EPSILON..1.0);
    -mean * u.ln()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn racks_are_closer_than_the_zone_and_zones_are_farther_still() {
        let spec = FabricSpec {
            zones: 3,
            nodes_per_zone: 64,
            nodes_per_rack: 32,
            slow_nodes: 0.0,
        };
        let fabric = Fabric::generate(&spec, &mut rand::rngs::StdRng::seed_from_u64(1));
        assert_eq!(fabric.len(), 192);
        let same_rack = fabric.rtt_ms(0, 1);
        let same_zone = fabric.rtt_ms(0, 40);
        let other_zone = fabric.rtt_ms(0, 70);
        assert!(same_rack < same_zone && same_zone < other_zone);
        assert!(other_zone > 0.4);
        assert_eq!(fabric.class(0, 40), PairClass::IntraZone);
        assert_eq!(fabric.class(0, 70), PairClass::InterZone);
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let measured = fabric.window_median_ms(0, 40, &mut rng);
        assert!(measured > same_zone && measured < same_zone + 0.05);
    }
}
