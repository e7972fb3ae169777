//! Where each policy under comparison puts a job's workers, given the
//! nodes that are free and what it knows (a [`View`]). Each returns the
//! workers in rank order (the order a ring all-reduce passes data in), or
//! `None` when the job does not fit.
//!
//! - [`Policy::Netaware`]: the extender's own code,
//!   [`netaware_core::extender::place_job`], on the view's matrix.
//! - [`Policy::KubeDefault`]: kube-scheduler as it treats a training job's
//!   pods. Its default topology spread constraints apply only to pods of a
//!   Service, ReplicaSet, StatefulSet or ReplicationController, so a job's
//!   pods get none; each pod is filtered for fit and scored by resources,
//!   and whole free nodes all score the same. It looks at nodes in its
//!   node tree's order (zones taken in turn), from a starting point that
//!   moves on, until it has found `percentageOfNodesToScore`'s worth of
//!   feasible ones (at least 100; 50% less 1% per 125 nodes, at least 5%),
//!   and picks at random among the best-scored, here all of them.
//! - [`Policy::ZoneOnly`]: topology labels without measurements, as
//!   Volcano's HyperNodes and Kueue's topology-aware scheduling give: the
//!   tightest zone the job fits in (Kueue's BestFit; among equals, any),
//!   nodes inside it chosen blind (at random); a job that fits in no zone
//!   takes the fullest zones first.
//! - [`Policy::Diktyo`]: the scheduler-plugins NetworkOverhead plugin with
//!   the job as an AppGroup whose workers depend on each other, reading the
//!   zone costs of the view (the 90th percentile RTT between zones, as a
//!   `NetworkTopology` holds them, refreshed with each view). Pod by pod,
//!   a node's cost is the sum over the workers placed so far of 1 in the
//!   same zone, else the zones' cost (an unknown cost: 100, its `MaxCost`);
//!   the lowest cost wins, ties at random. Its filter (`maxNetworkCost`)
//!   is left open: a job's workers may go anywhere.
//! - [`Policy::Random`]: any free nodes.
//!
//! The baselines read only the zone labels of the matrix's nodes, and
//! Diktyo the zone costs.

use std::collections::BTreeMap;

use netaware_core::extender::place_job;
use netaware_core::scored::ScoredMatrix;
use rand::Rng;
use rand::seq::SliceRandom;

use crate::information::View;

/// A placement policy under comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// netaware's extender, pod after pod.
    Netaware,
    /// kube-scheduler's defaults for pods with no spread constraint.
    KubeDefault,
    /// Zone-only packing (a topology-aware scheduler with zone labels).
    ZoneOnly,
    /// scheduler-plugins' NetworkOverhead (Diktyo) with zone costs.
    Diktyo,
    /// Any free nodes.
    Random,
}

impl Policy {
    /// Every policy, netaware first.
    pub const ALL: [Policy; 5] = [
        Policy::Netaware,
        Policy::KubeDefault,
        Policy::ZoneOnly,
        Policy::Diktyo,
        Policy::Random,
    ];

    /// The name in tables, plots and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Netaware => "netaware",
            Policy::KubeDefault => "kube-default",
            Policy::ZoneOnly => "zone-only",
            Policy::Diktyo => "diktyo",
            Policy::Random => "random",
        }
    }

    /// Places `size` workers on `free` nodes, knowing `view` (netaware by
    /// the settings the view is placed by).
    pub fn place(
        self,
        view: &View,
        free: &[String],
        size: usize,
        rng: &mut impl Rng,
    ) -> Option<Vec<String>> {
        if size == 0 || free.len() < size {
            return None;
        }
        let matrix = view.matrix();
        match self {
            Policy::Netaware => place_job(&view.placer, size, free),
            Policy::KubeDefault => Some(kube_default(matrix, free, size, rng)),
            Policy::ZoneOnly => Some(zone_only(&by_zone(matrix, free), size, rng)),
            Policy::Diktyo => Some(diktyo(view, free, size, rng)),
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
        zones
            .entry(zone_of(matrix, name).to_owned())
            .or_default()
            .push(name.clone());
    }
    zones
}

fn zone_of<'m>(matrix: &'m ScoredMatrix, name: &str) -> &'m str {
    matrix
        .index_of(name)
        .map_or("", |i| matrix.nodes()[i].info.zone.as_str())
}

fn take_random(nodes: &mut Vec<String>, rng: &mut impl Rng) -> String {
    let i = rng.random_range(0..nodes.len());
    nodes.swap_remove(i)
}

/// How many feasible nodes kube-scheduler looks for among `nodes`
/// (`percentageOfNodesToScore` left at its default).
fn nodes_to_find(nodes: usize) -> usize {
    if nodes < 100 {
        return nodes;
    }
    let percentage = (50 - (nodes / 125) as i64).max(5) as usize;
    (nodes * percentage / 100).max(100)
}

fn kube_default(
    matrix: &ScoredMatrix,
    free: &[String],
    size: usize,
    rng: &mut impl Rng,
) -> Vec<String> {
    // The node tree's order: the zones in turn, a node of each.
    let mut zones: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for node in matrix.nodes() {
        zones
            .entry(node.info.zone.as_str())
            .or_default()
            .push(node.info.name.as_str());
    }
    let deepest = zones.values().map(Vec::len).max().unwrap_or(0);
    let tree: Vec<&str> = (0..deepest)
        .flat_map(|i| {
            zones
                .values()
                .filter_map(move |nodes| nodes.get(i).copied())
        })
        .collect();
    let mut free: std::collections::HashSet<&str> = free.iter().map(String::as_str).collect();
    let wanted = nodes_to_find(tree.len());
    let mut placed = Vec::with_capacity(size);
    while placed.len() < size && !free.is_empty() {
        // Its starting point moves on from cycle to cycle; here, anywhere.
        let start = rng.random_range(0..tree.len().max(1));
        let feasible: Vec<&str> = (0..tree.len())
            .map(|i| tree[(start + i) % tree.len()])
            .filter(|name| free.contains(name))
            .take(wanted)
            .collect();
        let Some(&pick) = feasible.get(rng.random_range(0..feasible.len().max(1))) else {
            break;
        };
        free.remove(pick);
        placed.push(pick.to_owned());
    }
    placed
}

/// Diktyo's cost for a pair of zones with nothing measured (`MaxCost`).
const DIKTYO_MAX_COST: u64 = 100;
/// Diktyo's cost for two pods in the same zone (`SameZone`).
const DIKTYO_SAME_ZONE: u64 = 1;

fn diktyo(view: &View, free: &[String], size: usize, rng: &mut impl Rng) -> Vec<String> {
    let matrix = view.matrix();
    let mut free: Vec<(&str, &str)> = free
        .iter()
        .map(|name| (name.as_str(), zone_of(matrix, name)))
        .collect();
    let mut placed: Vec<(&str, &str)> = Vec::with_capacity(size);
    while placed.len() < size && !free.is_empty() {
        let cost = |zone: &str| -> u64 {
            placed
                .iter()
                .map(|(_, placed_zone)| {
                    if zone == *placed_zone {
                        DIKTYO_SAME_ZONE
                    } else {
                        view.zone_costs
                            .cost(zone, placed_zone)
                            .unwrap_or(DIKTYO_MAX_COST)
                    }
                })
                .sum()
        };
        // Costs by zone: every node of a zone costs the same.
        let mut by_zone: BTreeMap<&str, u64> = BTreeMap::new();
        for (_, zone) in &free {
            by_zone.entry(zone).or_insert_with(|| cost(zone));
        }
        let lowest = by_zone.values().copied().min().unwrap_or(0);
        let best: Vec<usize> = (0..free.len())
            .filter(|&i| by_zone[free[i].1] == lowest)
            .collect();
        let pick = best[rng.random_range(0..best.len())];
        placed.push(free.swap_remove(pick));
    }
    placed
        .into_iter()
        .map(|(name, _)| name.to_owned())
        .collect()
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
    use crate::information::ZoneCosts;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    /// Zones a (3 nodes), b (3), c (2); no pairs.
    fn view() -> (View, Vec<String>) {
        let names = ["a1", "a2", "a3", "b1", "b2", "b3", "c1", "c2"];
        let nodes = names
            .iter()
            .map(|name| crate::perfect::agent_node(name, &format!("zone-{}", &name[..1])))
            .collect();
        (
            View::with_defaults(ScoredMatrix::from_parts(
                nodes,
                Vec::new(),
                Default::default(),
            )),
            names.map(String::from).to_vec(),
        )
    }

    fn zones_of(placed: &[String]) -> Vec<char> {
        placed.iter().map(|n| n.chars().next().unwrap()).collect()
    }

    #[test]
    fn kube_default_looks_at_a_share_of_the_nodes_and_at_every_zone() {
        assert_eq!(nodes_to_find(50), 50);
        assert_eq!(nodes_to_find(1_000), 420);
        assert_eq!(nodes_to_find(5_000), 500);
        assert_eq!(nodes_to_find(200), 100);
        // Zones mean nothing to it: over many jobs of 3, most span zones.
        let (view, free) = view();
        let mut rng = StdRng::seed_from_u64(1);
        let across = (0..200)
            .filter(|_| {
                let placed = Policy::KubeDefault
                    .place(&view, &free, 3, &mut rng)
                    .unwrap();
                let mut zones = zones_of(&placed);
                zones.dedup();
                zones.len() > 1
            })
            .count();
        assert!(across > 150, "{across} of 200");
    }

    #[test]
    fn diktyo_keeps_a_job_in_its_first_workers_zone_then_the_nearest() {
        let (mut view, free) = view();
        // b is near a, c far from both.
        view.zone_costs = ZoneCosts::from_pairs(&[
            ("zone-a", "zone-b", 500),
            ("zone-b", "zone-a", 500),
            ("zone-a", "zone-c", 3_000),
            ("zone-c", "zone-a", 3_000),
            ("zone-b", "zone-c", 3_000),
            ("zone-c", "zone-b", 3_000),
        ]);
        let a_and_b: Vec<String> = free
            .iter()
            .filter(|n| !n.starts_with('c'))
            .cloned()
            .collect();
        let mut rng = StdRng::seed_from_u64(4);
        let mut firsts = Vec::new();
        for _ in 0..20 {
            let placed = Policy::Diktyo.place(&view, &a_and_b, 3, &mut rng).unwrap();
            let zones = zones_of(&placed);
            assert!(zones.iter().all(|z| *z == zones[0]), "{placed:?}");
            // Four: the first worker's zone whole, then the near zone,
            // never the far one.
            let placed = Policy::Diktyo.place(&view, &free, 4, &mut rng).unwrap();
            let mut zones = zones_of(&placed);
            firsts.push(zones[0]);
            zones.sort();
            match firsts.last() {
                Some('a') => assert_eq!(zones, ['a', 'a', 'a', 'b'], "{placed:?}"),
                Some('b') => assert_eq!(zones, ['a', 'b', 'b', 'b'], "{placed:?}"),
                // From c (two nodes), a or b are as far as each other.
                _ => assert!(zones[2..] == ['c', 'c'], "{placed:?}"),
            }
        }
        // The first worker goes anywhere.
        firsts.sort();
        firsts.dedup();
        assert!(firsts.len() >= 2, "{firsts:?}");
    }

    #[test]
    fn zone_only_takes_the_tightest_zone_that_fits() {
        let (view, free) = view();
        let mut rng = StdRng::seed_from_u64(2);
        let placed = Policy::ZoneOnly.place(&view, &free, 2, &mut rng).unwrap();
        assert_eq!(zones_of(&placed), ['c', 'c']);
        let placed = Policy::ZoneOnly.place(&view, &free, 3, &mut rng).unwrap();
        let zones = zones_of(&placed);
        assert!(
            zones == ['a', 'a', 'a'] || zones == ['b', 'b', 'b'],
            "{placed:?}"
        );
        // Fits nowhere: the fullest zones first.
        let placed = Policy::ZoneOnly.place(&view, &free, 5, &mut rng).unwrap();
        assert_eq!(zones_of(&placed), ['a', 'a', 'a', 'b', 'b']);
    }

    #[test]
    fn every_policy_returns_distinct_free_nodes_or_none() {
        let (view, free) = view();
        let mut rng = StdRng::seed_from_u64(3);
        for policy in Policy::ALL {
            for size in 1..=8 {
                let placed = policy
                    .place(&view, &free, size, &mut rng)
                    .unwrap_or_else(|| panic!("{policy:?} {size}"));
                let mut unique = placed.clone();
                unique.sort();
                unique.dedup();
                assert_eq!(unique.len(), size, "{policy:?}: {placed:?}");
                assert!(placed.iter().all(|n| free.contains(n)));
            }
            assert_eq!(policy.place(&view, &free, 9, &mut rng), None);
        }
    }
}
