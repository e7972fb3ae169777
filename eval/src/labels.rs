//! Where a label-driven scheduler (Kueue's topology-aware scheduling,
//! Volcano's HyperNodes) believes each node sits: its zone, its rack (the
//! level under the zone), and whether it may take a worker at all. Three
//! sources, the three the evaluation compares:
//!
//! - [`NodePlaces::correct`]: rack labels that say where each node is
//!   cabled, as a careful operator keeps them;
//! - [`NodePlaces::as_clusters_have_them`]: the same with the errors real
//!   clusters carry: a share of nodes without a rack label (Kueue #5039,
//!   #6996: a missing level label keeps a node out of the topology), and a
//!   share labelled with another rack of their zone (re-cabled, relabelled
//!   late or never);
//! - [`NodePlaces::published`]: what `netaware publish-topology` writes from
//!   what it measured: each zone's measured blocks as the rack level, and
//!   the degraded nodes and those behind a bad uplink kept out (the
//!   `netaware.io/degraded` label, or the taint, which both schedulers
//!   honour).
//!
//! A node without a rack label takes no worker: Kueue leaves a node that
//! lacks a level's label out of its topology's domains, and Volcano's
//! HyperNodes, built from the same labels, hold no such node.

use std::collections::HashMap;

use netaware_core::measured_topology::MeasuredTopology;
use rand::Rng;

use crate::cluster::Cluster;

/// Where one node sits, as the labels say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// Its zone label.
    pub zone: String,
    /// Its rack label; `None` when it has none.
    pub rack: Option<String>,
    /// Kept out of placement (a degraded mark, a taint).
    pub excluded: bool,
}

impl Place {
    /// Whether a label-driven scheduler may put a worker there.
    pub fn usable(&self) -> bool {
        self.rack.is_some() && !self.excluded
    }
}

/// Which source a scheduler's labels come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LabelSource {
    /// Labels that say where each node is cabled.
    Correct,
    /// Labels with the errors clusters carry.
    AsClustersHaveThem,
    /// The topology netaware publishes from what it measured.
    Netaware,
}

impl LabelSource {
    /// The name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            LabelSource::Correct => "labels",
            LabelSource::AsClustersHaveThem => "stale labels",
            LabelSource::Netaware => "netaware's topology",
        }
    }
}

/// The errors of labels as clusters have them.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LabelErrors {
    /// Share of nodes without a rack label.
    pub missing: f64,
    /// Share of nodes labelled with another rack of their zone.
    pub wrong: f64,
}

impl Default for LabelErrors {
    /// 2% of nodes unlabelled and 3% mislabelled: a cluster whose labels
    /// are kept by hand and lag behind re-cabling.
    fn default() -> Self {
        Self {
            missing: 0.02,
            wrong: 0.03,
        }
    }
}

/// Which of netaware's node labels a label-driven job selects `false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepOff {
    /// `netaware.io/degraded`: nodes whose own links are degraded.
    Degraded,
    /// That and `netaware.io/bad-uplink`: also the racks behind an uplink
    /// that an open fault names.
    DegradedAndBadUplink,
}

/// Every node's place, by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodePlaces(HashMap<String, Place>);

impl NodePlaces {
    /// The place of `name`, if the source knows it.
    pub fn get(&self, name: &str) -> Option<&Place> {
        self.0.get(name)
    }

    /// Places as given: (name, zone, rack, excluded).
    pub fn from_entries<'a>(
        entries: impl IntoIterator<Item = (&'a str, &'a str, Option<&'a str>, bool)>,
    ) -> Self {
        Self(
            entries
                .into_iter()
                .map(|(name, zone, rack, excluded)| {
                    (
                        name.to_owned(),
                        Place {
                            zone: zone.to_owned(),
                            rack: rack.map(str::to_owned),
                            excluded,
                        },
                    )
                })
                .collect(),
        )
    }

    /// The labels that say where each node of `cluster` is cabled.
    pub fn correct(cluster: &Cluster) -> Self {
        Self::from_entries((0..cluster.names.len()).map(|i| {
            (
                cluster.names[i].as_str(),
                cluster.zone_label(i),
                Some(cluster.rack_name(i)),
                false,
            )
        }))
    }

    /// The labels of `cluster` with `errors`: each node without a rack
    /// label with the chance `errors.missing`, else labelled with another
    /// rack of its zone (when its zone has one) with the chance
    /// `errors.wrong`.
    pub fn as_clusters_have_them(
        cluster: &Cluster,
        errors: &LabelErrors,
        rng: &mut impl Rng,
    ) -> Self {
        let mut racks_of_zone: HashMap<&str, Vec<&str>> = HashMap::new();
        for i in 0..cluster.names.len() {
            let racks = racks_of_zone.entry(cluster.zone_label(i)).or_default();
            if racks.last() != Some(&cluster.rack_name(i)) {
                racks.push(cluster.rack_name(i));
            }
        }
        let mut places = Self::correct(cluster);
        for (i, name) in cluster.names.iter().enumerate() {
            let place = places.0.get_mut(name).expect("every node");
            if rng.random_bool(errors.missing.clamp(0.0, 1.0)) {
                place.rack = None;
                continue;
            }
            let others: Vec<&str> = racks_of_zone[cluster.zone_label(i)]
                .iter()
                .copied()
                .filter(|rack| *rack != cluster.rack_name(i))
                .collect();
            if !others.is_empty() && rng.random_bool(errors.wrong.clamp(0.0, 1.0)) {
                place.rack = Some(others[rng.random_range(0..others.len())].to_owned());
            }
        }
        places
    }

    /// What `netaware publish-topology` writes from `topology`: each
    /// zone's measured blocks (`ZONE-N`) as the rack level, and the nodes
    /// that a job selecting `keep_off`'s labels false keeps off kept out.
    pub fn published(topology: &MeasuredTopology, keep_off: KeepOff) -> Self {
        let places = topology
            .nodes()
            .map(|(zone, block, node)| {
                let excluded = match keep_off {
                    KeepOff::Degraded => node.degraded,
                    KeepOff::DegradedAndBadUplink => node.kept_out(),
                };
                let place = Place {
                    zone: zone.zone.clone(),
                    rack: Some(format!("{}-{}", zone.zone, block.number)),
                    excluded,
                };
                (node.name.clone(), place)
            })
            .collect();
        Self(places)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ClusterSpec;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn cluster() -> Cluster {
        let spec = ClusterSpec {
            zones: 2,
            nodes_per_zone: 100,
            degraded_nodes: 0.0,
            degraded_links: 0.0,
            nodes_per_rack: 10,
            ..ClusterSpec::default()
        };
        Cluster::generate(&spec, &mut StdRng::seed_from_u64(1))
    }

    #[test]
    fn stale_labels_miss_and_misplace_their_share_and_stay_in_the_zone() {
        let cluster = cluster();
        let correct = NodePlaces::correct(&cluster);
        assert_eq!(
            correct.get("z01-n015").unwrap().rack.as_deref(),
            Some("zone-01-rack-01")
        );
        let errors = LabelErrors {
            missing: 0.1,
            wrong: 0.2,
        };
        let stale =
            NodePlaces::as_clusters_have_them(&cluster, &errors, &mut StdRng::seed_from_u64(2));
        let (mut missing, mut wrong) = (0, 0);
        for (i, name) in cluster.names.iter().enumerate() {
            let place = stale.get(name).unwrap();
            assert_eq!(place.zone, cluster.zone_label(i));
            match &place.rack {
                None => missing += 1,
                Some(rack) if rack != cluster.rack_name(i) => {
                    assert!(rack.starts_with(cluster.zone_label(i)), "{rack}");
                    wrong += 1;
                }
                Some(_) => {}
            }
            assert_eq!(place.usable(), place.rack.is_some());
        }
        // About 10% of 200 and 20% of the other 180.
        assert!((10..32).contains(&missing), "{missing}");
        assert!((22..52).contains(&wrong), "{wrong}");
    }

    #[test]
    fn netaware_publishes_its_blocks_and_keeps_degraded_nodes_and_bad_uplinks_out() {
        let topology = MeasuredTopology::one_zone(
            "zone-a",
            &[
                &[("a1", false, false), ("a2", true, false)],
                &[("a3", false, false), ("a4", false, true)],
            ],
        );
        let usable = |keep_off| {
            let places = NodePlaces::published(&topology, keep_off);
            assert_eq!(places.get("a1").unwrap().rack.as_deref(), Some("zone-a-1"));
            assert_eq!(places.get("a3").unwrap().rack.as_deref(), Some("zone-a-2"));
            assert_eq!(places.get("b1"), None);
            ["a1", "a2", "a3", "a4"].map(|n| places.get(n).unwrap().usable())
        };
        assert_eq!(usable(KeepOff::Degraded), [true, false, true, true]);
        assert_eq!(
            usable(KeepOff::DegradedAndBadUplink),
            [true, false, true, false]
        );
    }
}
