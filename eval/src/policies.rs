//! Where each policy under comparison puts a job's workers, given the
//! nodes that are free. Each returns the workers in rank order (the order
//! a ring all-reduce passes data in), or `None` when the job does not fit.
//!
//! - [`Policy::Netaware`]: the extender's own code,
//!   [`netaware_core::extender::place_job`], on the measured matrix.
//! - [`Policy::Spread`]: kube-scheduler's default. Its default topology
//!   spread constraints (zone, maxSkew 5, ScheduleAnyway) score a node
//!   higher the fewer of the job's pods its zone holds, so each pod goes to
//!   the zone holding fewest so far; inside it, nodes tie (the scoring
//!   plugins see equal empty nodes) and kube-scheduler picks among equals
//!   at random.
//! - [`Policy::ZoneOnly`]: topology labels without measurements, as
//!   Volcano's HyperNodes and Kueue's topology-aware scheduling give: the
//!   tightest zone the job fits in (Kueue's BestFit; among equals, any),
//!   nodes inside it chosen blind (at random); a job that fits in no zone
//!   takes the fullest zones first.
//! - [`Policy::Random`]: any free nodes.
//!
//! The baselines read only the zone labels of the matrix's nodes.

use std::collections::BTreeMap;

use netaware_core::extender::{PolicyConfig, place_job};
use netaware_core::snapshot::ScoredMatrix;
use rand::Rng;
use rand::seq::SliceRandom;

/// A placement policy under comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// netaware's extender, pod after pod.
    Netaware,
    /// kube-scheduler's default spreading.
    Spread,
    /// Zone-only packing (a topology-aware scheduler with zone labels).
    ZoneOnly,
    /// Any free nodes.
    Random,
}

impl Policy {
    /// Every policy, netaware first.
    pub const ALL: [Policy; 4] = [
        Policy::Netaware,
        Policy::Spread,
        Policy::ZoneOnly,
        Policy::Random,
    ];

    /// The name in tables, plots and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Netaware => "netaware",
            Policy::Spread => "default-spread",
            Policy::ZoneOnly => "zone-only",
            Policy::Random => "random",
        }
    }

    /// Places `size` workers on `free` nodes of `matrix`.
    pub fn place(
        self,
        matrix: &ScoredMatrix,
        free: &[String],
        size: usize,
        config: &PolicyConfig,
        rng: &mut impl Rng,
    ) -> Option<Vec<String>> {
        if size == 0 || free.len() < size {
            return None;
        }
        match self {
            Policy::Netaware => place_job(matrix, size, free, config),
            Policy::Spread => Some(spread(&by_zone(matrix, free), size, rng)),
            Policy::ZoneOnly => Some(zone_only(&by_zone(matrix, free), size, rng)),
            Policy::Random => {
                let mut nodes = free.to_vec();
                nodes.shuffle(rng);
                nodes.truncate(size);
                Some(nodes)
            }
        }
    }
}

/// Free nodes by zone label (nodes the matrix does not know: zone "").
fn by_zone(matrix: &ScoredMatrix, free: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut zones: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for name in free {
        let zone = matrix
            .index_of(name)
            .map(|i| matrix.nodes()[i].info.zone.clone())
            .unwrap_or_default();
        zones.entry(zone).or_default().push(name.clone());
    }
    zones
}

fn take_random(nodes: &mut Vec<String>, rng: &mut impl Rng) -> String {
    let i = rng.random_range(0..nodes.len());
    nodes.swap_remove(i)
}

fn spread(zones: &BTreeMap<String, Vec<String>>, size: usize, rng: &mut impl Rng) -> Vec<String> {
    let mut free = zones.clone();
    let mut used: BTreeMap<String, usize> = BTreeMap::new();
    let mut placed = Vec::with_capacity(size);
    while placed.len() < size {
        // The zones with free nodes holding fewest of the job's pods; among
        // them, kube-scheduler's pick is any.
        let fewest = free
            .iter()
            .filter(|(_, nodes)| !nodes.is_empty())
            .map(|(zone, _)| used.get(zone).copied().unwrap_or(0))
            .min()
            .expect("enough free nodes were checked");
        let zones: Vec<&String> = free
            .iter()
            .filter(|(zone, nodes)| {
                !nodes.is_empty() && used.get(*zone).copied().unwrap_or(0) == fewest
            })
            .map(|(zone, _)| zone)
            .collect();
        let zone = zones[rng.random_range(0..zones.len())].clone();
        let nodes = free.get_mut(&zone).expect("a zone of the map");
        placed.push(take_random(nodes, rng));
        *used.entry(zone).or_default() += 1;
    }
    placed
}

fn zone_only(
    zones: &BTreeMap<String, Vec<String>>,
    size: usize,
    rng: &mut impl Rng,
) -> Vec<String> {
    // The tightest zone that fits (any of equals: labels say nothing more),
    // else the fullest first (fewest zones).
    let tightest = zones
        .values()
        .filter(|nodes| nodes.len() >= size)
        .map(Vec::len)
        .min();
    let order: Vec<&Vec<String>> = match tightest {
        Some(fewest) => {
            let ties: Vec<&Vec<String>> = zones.values().filter(|n| n.len() == fewest).collect();
            vec![ties[rng.random_range(0..ties.len())]]
        }
        None => {
            let mut all: Vec<&Vec<String>> = zones.values().collect();
            all.sort_by_key(|nodes| std::cmp::Reverse(nodes.len()));
            all
        }
    };
    let mut placed = Vec::with_capacity(size);
    for nodes in order {
        let mut nodes = nodes.clone();
        while placed.len() < size && !nodes.is_empty() {
            placed.push(take_random(&mut nodes, rng));
        }
    }
    placed
}

#[cfg(test)]
mod tests {
    use super::*;
    use netaware_core::snapshot::NodeView;
    use netaware_core::{NodeInfo, NodeKind};
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    /// Zones a (3 nodes), b (3), c (2); no pairs.
    fn matrix() -> (ScoredMatrix, Vec<String>) {
        let names = ["a1", "a2", "a3", "b1", "b2", "b3", "c1", "c2"];
        let nodes = names
            .iter()
            .map(|name| NodeView {
                info: NodeInfo {
                    name: (*name).into(),
                    address: String::new(),
                    zone: format!("zone-{}", &name[..1]),
                    region: String::new(),
                    kind: NodeKind::Agent,
                },
                stale: false,
                last_report_age_ms: Some(0),
                coordinate: None,
            })
            .collect();
        (
            ScoredMatrix::from_parts(nodes, Vec::new(), Default::default()),
            names.map(String::from).to_vec(),
        )
    }

    fn zones_of(placed: &[String]) -> Vec<char> {
        placed.iter().map(|n| n.chars().next().unwrap()).collect()
    }

    #[test]
    fn spreading_puts_each_pod_in_the_zone_with_fewest() {
        let (matrix, free) = matrix();
        let mut rng = StdRng::seed_from_u64(1);
        for _ in 0..20 {
            let placed = Policy::Spread
                .place(&matrix, &free, 3, &PolicyConfig::default(), &mut rng)
                .unwrap();
            let mut zones = zones_of(&placed);
            zones.sort();
            assert_eq!(zones, ['a', 'b', 'c'], "{placed:?}");
        }
    }

    #[test]
    fn zone_only_takes_the_tightest_zone_that_fits() {
        let (matrix, free) = matrix();
        let mut rng = StdRng::seed_from_u64(2);
        let placed = Policy::ZoneOnly
            .place(&matrix, &free, 2, &PolicyConfig::default(), &mut rng)
            .unwrap();
        assert_eq!(zones_of(&placed), ['c', 'c']);
        let placed = Policy::ZoneOnly
            .place(&matrix, &free, 3, &PolicyConfig::default(), &mut rng)
            .unwrap();
        let zones = zones_of(&placed);
        assert!(
            zones == ['a', 'a', 'a'] || zones == ['b', 'b', 'b'],
            "{placed:?}"
        );
        // Fits nowhere: the fullest zones first.
        let placed = Policy::ZoneOnly
            .place(&matrix, &free, 5, &PolicyConfig::default(), &mut rng)
            .unwrap();
        assert_eq!(zones_of(&placed), ['a', 'a', 'a', 'b', 'b']);
    }

    #[test]
    fn every_policy_returns_distinct_free_nodes_or_none() {
        let (matrix, free) = matrix();
        let mut rng = StdRng::seed_from_u64(3);
        for policy in Policy::ALL {
            for size in 1..=8 {
                let placed = policy
                    .place(&matrix, &free, size, &PolicyConfig::default(), &mut rng)
                    .unwrap_or_else(|| panic!("{policy:?} {size}"));
                let mut unique = placed.clone();
                unique.sort();
                unique.dedup();
                assert_eq!(unique.len(), size, "{policy:?}: {placed:?}");
                assert!(placed.iter().all(|n| free.contains(n)));
            }
            assert_eq!(
                policy.place(&matrix, &free, 9, &PolicyConfig::default(), &mut rng),
                None
            );
        }
    }
}
