//! What the policies may know of a simulated cluster, and when.
//!
//! Two modes ([`Information`]):
//!
//! - **measured** (the default): what netaware's agents and collector would
//!   have served at that moment, produced by the product's own code on
//!   simulated probes ([`crate::fleet`]);
//! - **perfect**: every pair's truth, fresh, as an upper bound
//!   ([`crate::perfect`]).
//!
//! A [`View`] is what placement reads at one moment: the scored matrix, and
//! the zone costs that a Diktyo `NetworkTopology` written from it would
//! hold. A [`Timeline`] is the views a run goes through, built once and
//! shared by every policy of that run.

use std::collections::HashMap;
use std::sync::Arc;

use netaware_core::blocks::BlockConfig;
use netaware_core::measured_topology::{BlockTracker, Observation, observe};
use netaware_core::placement::{PlacementConfig, Placer};
use netaware_core::scored::ScoredMatrix;

use crate::cluster::Cluster;
use crate::labels::{KeepOff, NodePlaces};

/// Where a policy's knowledge of the network comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Information {
    /// What the product would have measured by then.
    Measured,
    /// The truth of every pair, always fresh.
    Perfect,
}

impl Information {
    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Information::Measured => "measured",
            Information::Perfect => "perfect",
        }
    }
}

/// Why an information mode was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown information mode {0:?}: measured or perfect")]
pub struct UnknownInformation(pub String);

impl std::str::FromStr for Information {
    type Err = UnknownInformation;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        [Information::Measured, Information::Perfect]
            .into_iter()
            .find(|mode| mode.name() == text)
            .ok_or_else(|| UnknownInformation(text.to_owned()))
    }
}

/// What placement reads at one moment.
#[derive(Debug)]
pub struct View {
    /// The scored matrix, as the collector would serve it, with the
    /// settings netaware places by.
    pub placer: Placer,
    /// Zone-to-zone costs (us), as netaware's published `NetworkTopology`
    /// has them: the 90th percentile of the fresh RTT medians between two
    /// zones.
    pub zone_costs: ZoneCosts,
    /// The blocks and degraded marks netaware publishes for other
    /// schedulers from this matrix.
    pub published: NodePlaces,
}

impl View {
    /// The view of `placer`'s matrix, its zone costs, blocks and degraded
    /// marks read by the product's own topology code (one look, as one
    /// round of the collector's topology sees it).
    pub fn new(placer: Placer) -> Self {
        let observation = observe(
            placer.matrix(),
            &BlockConfig::default(),
            &PlacementConfig::default(),
        );
        // What a first round publishes: no fault is open after one look
        // (the collector opens one after two in a row), so no uplink is
        // marked.
        let topology = BlockTracker::new(&BlockConfig::default()).update(&observation);
        Self {
            zone_costs: ZoneCosts::of(&observation),
            published: NodePlaces::published(&topology, KeepOff::Degraded),
            placer,
        }
    }

    /// The view of `matrix`, placed by the default settings.
    pub fn with_defaults(matrix: ScoredMatrix) -> Self {
        Self::new(Placer::new(matrix, PlacementConfig::default()))
    }

    /// The scored matrix.
    pub fn matrix(&self) -> &ScoredMatrix {
        self.placer.matrix()
    }
}

/// How much of the truth a view holds: the pairs inside zones with a
/// goodput to judge them by, and which degraded nodes placement fails.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Coverage {
    /// Share of the directed pairs inside zones with a fresh goodput.
    pub goodput_share: f64,
    /// Nodes with a degraded NIC that the view's health fails.
    pub degraded_caught: usize,
    /// Nodes with a degraded NIC that it lets through.
    pub degraded_missed: usize,
    /// Healthy nodes that it fails.
    pub healthy_failed: usize,
}

impl Coverage {
    /// What `view` holds of `cluster`, judged by the thresholds it is
    /// placed by.
    pub fn of(view: &View, cluster: &Cluster) -> Self {
        let matrix = view.matrix();
        let placement = view.placer.config();
        let inside = |src: usize, dst: usize| cluster.zone_of(src) == cluster.zone_of(dst);
        let tested = matrix
            .pairs()
            .iter()
            .filter(|p| inside(p.src, p.dst) && p.fresh_goodput().is_some())
            .count();
        let zone_pairs: usize = (0..cluster.zone_count())
            .map(|z| {
                let n = (0..cluster.names.len())
                    .filter(|&i| cluster.zone_of(i) == z)
                    .count();
                n * n.saturating_sub(1)
            })
            .sum();
        let mut coverage = Self {
            goodput_share: tested as f64 / zone_pairs.max(1) as f64,
            degraded_caught: 0,
            degraded_missed: 0,
            healthy_failed: 0,
        };
        for (node, health) in matrix.health().iter().enumerate() {
            let failed = health
                .degraded(placement.loss_threshold, placement.min_goodput_fraction)
                .is_some();
            match (cluster.degraded(node), failed) {
                (true, true) => coverage.degraded_caught += 1,
                (true, false) => coverage.degraded_missed += 1,
                (false, true) => coverage.healthy_failed += 1,
                (false, false) => {}
            }
        }
        coverage
    }
}

/// Network costs between zones, origin to destination, in microseconds.
#[derive(Debug, Clone, Default)]
pub struct ZoneCosts(HashMap<(String, String), u64>);

impl ZoneCosts {
    /// The costs that `netaware publish-topology` would write from one
    /// look at a matrix.
    pub fn of(observation: &Observation) -> Self {
        Self(
            observation
                .costs
                .zones
                .iter()
                .map(|cost| {
                    let us = (cost.rtt_p90_ms * 1e3).round().max(0.0) as u64;
                    ((cost.origin.clone(), cost.destination.clone()), us)
                })
                .collect(),
        )
    }

    /// Costs as given: (origin, destination, us).
    pub fn from_pairs(costs: &[(&str, &str, u64)]) -> Self {
        Self(
            costs
                .iter()
                .map(|&(origin, destination, us)| ((origin.to_owned(), destination.to_owned()), us))
                .collect(),
        )
    }

    /// The cost from zone `origin` to `destination`, if measured.
    pub fn cost(&self, origin: &str, destination: &str) -> Option<u64> {
        self.0
            .get(&(origin.to_owned(), destination.to_owned()))
            .copied()
    }
}

/// The views a run goes through: the first from `start_s`, a new one
/// every `every_s` (the last one stands for every later moment).
#[derive(Debug, Clone)]
pub struct Timeline {
    start_s: f64,
    every_s: f64,
    views: Vec<Arc<View>>,
}

impl Timeline {
    /// One view for all time.
    pub fn fixed(view: View) -> Self {
        Self {
            start_s: 0.0,
            every_s: f64::INFINITY,
            views: vec![Arc::new(view)],
        }
    }

    /// `views` from `start_s` on, `every_s` apart (at least one view).
    pub fn new(start_s: f64, every_s: f64, views: Vec<View>) -> Self {
        assert!(!views.is_empty(), "a timeline holds at least one view");
        Self {
            start_s,
            every_s,
            views: views.into_iter().map(Arc::new).collect(),
        }
    }

    /// The view served at `t_s`: the newest built by then.
    pub fn at(&self, t_s: f64) -> &Arc<View> {
        let step = ((t_s - self.start_s) / self.every_s).floor();
        let index = if step.is_finite() && step > 0.0 {
            (step as usize).min(self.views.len() - 1)
        } else {
            0
        };
        &self.views[index]
    }

    /// Every view, oldest first.
    pub fn views(&self) -> impl Iterator<Item = &View> {
        self.views.iter().map(|view| view.as_ref())
    }

    /// How many views.
    pub fn len(&self) -> usize {
        self.views.len()
    }

    /// Whether there are none (never: a timeline holds one at least).
    pub fn is_empty(&self) -> bool {
        self.views.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_perfect_information_every_degraded_nic_is_failed_and_no_healthy_one() {
        use crate::cluster::{ClusterSpec, score_config};
        use rand::SeedableRng;
        let spec = ClusterSpec {
            zones: 2,
            nodes_per_zone: 10,
            degraded_nodes: 0.2,
            degraded_links: 0.0,
            max_peers: 0,
            ..ClusterSpec::default()
        };
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let cluster = Cluster::generate(&spec, &mut rng);
        let view = View::with_defaults(crate::perfect::matrix(
            &cluster,
            &score_config(),
            0,
            &mut rng,
        ));
        let coverage = Coverage::of(&view, &cluster);
        assert_eq!(coverage.goodput_share, 1.0);
        assert!(coverage.degraded_caught > 0, "{coverage:?}");
        assert_eq!((coverage.degraded_missed, coverage.healthy_failed), (0, 0));
    }

    #[test]
    fn modes_parse_by_name_and_nothing_else() {
        for mode in [Information::Measured, Information::Perfect] {
            assert_eq!(mode.name().parse::<Information>(), Ok(mode));
        }
        assert!("truth".parse::<Information>().is_err());
    }

    #[test]
    fn a_timeline_serves_the_newest_view_built_by_then() {
        let views = (0..3)
            .map(|_| View::with_defaults(ScoredMatrix::default()))
            .collect();
        let timeline = Timeline::new(100.0, 10.0, views);
        let index = |t: f64| {
            let view = timeline.at(t);
            (0..3)
                .find(|&i| Arc::ptr_eq(view, &timeline.views[i]))
                .unwrap()
        };
        assert_eq!(index(0.0), 0);
        assert_eq!(index(109.9), 0);
        assert_eq!(index(110.0), 1);
        assert_eq!(index(125.0), 2);
        assert_eq!(index(1e9), 2);
    }
}
