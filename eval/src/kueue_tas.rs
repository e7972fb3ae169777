//! Kueue's topology-aware scheduling (TAS), as it places a job of
//! whole-node workers that asks for `kueue.x-k8s.io/podset-preferred-topology`
//! at the rack level, on a topology of three levels (zone, rack,
//! hostname) read from node labels ([`NodePlaces`]).
//!
//! Modelled on kubernetes-sigs/kueue `pkg/cache/tas_flavor_snapshot.go`
//! (`findTopologyAssignment`, `findLevelWithFitDomains`,
//! `findBestFitDomainIdx`, `updateCountsToMinimum`, `sortedDomains`,
//! `buildAssignment`), with the BestFit profile that is its default for
//! required and preferred requests:
//!
//! 1. Each domain's count is the pods that fit in it: here its usable free
//!    nodes.
//! 2. At the requested level, domains are sorted by count, most first
//!    (ties by name); if the first holds the job, the one that holds it
//!    with the fewest to spare (BestFit, the first of equals) is taken.
//!    If none does, a preferred request climbs a level and tries again;
//!    at the top, it takes domains most first until the job fits, the last
//!    one again by BestFit.
//! 3. Going down, the chosen domains' children are sorted the same way and
//!    taken most first until the job fits, the last by BestFit; nodes are
//!    taken by name.
//! 4. Ranks follow the assignment's order, sorted by zone, rack and node
//!    (`buildAssignment`), so that consecutive ranks share a domain.
//!
//! `TASBalancedPlacement` (alpha), as an option: when the job spans racks,
//! the fewest racks that hold it, and the most even share of them
//! (Kueue's docs: 12 pods over two racks of 10 go 6 and 6, not 10 and 2).
//!
//! Simplified: one pod per node and no other resources (whole-node
//! training pods), no quota and no other queues (the jobs come first come,
//! first served, as for every policy of the simulator), no node
//! replacement while a job runs.

use std::collections::BTreeMap;

use crate::labels::NodePlaces;

/// A domain at one level: its name and its usable free nodes.
#[derive(Debug, Clone)]
struct Domain<'a> {
    name: (&'a str, &'a str),
    nodes: Vec<&'a str>,
}

/// Places `size` workers on `free` nodes as Kueue TAS would, from the
/// labels `places`; `None` when its usable free nodes cannot hold them.
pub fn place(
    places: &NodePlaces,
    free: &[String],
    size: usize,
    balanced: bool,
) -> Option<Vec<String>> {
    // The topology: zone -> rack -> nodes, usable free nodes only.
    let mut tree: BTreeMap<&str, BTreeMap<&str, Vec<&str>>> = BTreeMap::new();
    for name in free {
        if let Some(place) = places.get(name).filter(|p| p.usable()) {
            let rack = place.rack.as_deref().expect("usable: labelled");
            tree.entry(place.zone.as_str())
                .or_default()
                .entry(rack)
                .or_default()
                .push(name.as_str());
        }
    }
    let racks: Vec<Domain<'_>> = tree
        .iter()
        .flat_map(|(zone, racks)| {
            racks.iter().map(move |(rack, nodes)| {
                let mut nodes = nodes.clone();
                nodes.sort_unstable();
                Domain {
                    name: (zone, rack),
                    nodes,
                }
            })
        })
        .collect();
    if racks.iter().map(|r| r.nodes.len()).sum::<usize>() < size || size == 0 {
        return None;
    }
    let sorted_racks = sorted(racks);
    // The requested level: one rack.
    let chosen: Vec<(Domain<'_>, usize)> = if sorted_racks[0].nodes.len() >= size {
        vec![(sorted_racks[best_fit(&sorted_racks, size)].clone(), size)]
    } else {
        // Climb to the zones.
        let zones: Vec<Domain<'_>> = tree
            .keys()
            .map(|zone| Domain {
                name: (zone, ""),
                nodes: sorted_racks
                    .iter()
                    .filter(|r| r.name.0 == *zone)
                    .flat_map(|r| r.nodes.iter().copied())
                    .collect(),
            })
            .collect();
        let sorted_zones = sorted(zones);
        let zones_taken: Vec<&str> = if sorted_zones[0].nodes.len() >= size {
            vec![sorted_zones[best_fit(&sorted_zones, size)].name.0]
        } else {
            // The top: the zones most first, the last by BestFit.
            to_minimum(&sorted_zones, size)
                .into_iter()
                .map(|(zone, _)| zone.name.0)
                .collect()
        };
        let children = sorted(
            sorted_racks
                .into_iter()
                .filter(|r| zones_taken.contains(&r.name.0))
                .collect(),
        );
        if balanced {
            balanced_over(&children, size)
        } else {
            to_minimum(&children, size)
        }
    };
    // Nodes by name in each rack; ranks by zone, rack, node.
    let mut assignment: Vec<(&str, &str, &str)> = chosen
        .iter()
        .flat_map(|(rack, count)| {
            rack.nodes
                .iter()
                .take(*count)
                .map(|node| (rack.name.0, rack.name.1, *node))
        })
        .collect();
    assignment.sort_unstable();
    Some(
        assignment
            .into_iter()
            .map(|(_, _, node)| node.to_owned())
            .collect(),
    )
}

/// Most nodes first, ties by name (`sortedDomains`, BestFit profile).
fn sorted(mut domains: Vec<Domain<'_>>) -> Vec<Domain<'_>> {
    domains.sort_by(|a, b| {
        b.nodes
            .len()
            .cmp(&a.nodes.len())
            .then_with(|| a.name.cmp(&b.name))
    });
    domains
}

/// The index of the first domain with the fewest nodes that still hold
/// `count`, in a list sorted most first (`findBestFitDomainIdx`); 0 when
/// none holds it.
fn best_fit(sorted: &[Domain<'_>], count: usize) -> usize {
    let mut best = 0;
    for (i, domain) in sorted.iter().enumerate() {
        if domain.nodes.len() >= count && domain.nodes.len() != sorted[best].nodes.len() {
            best = i;
        }
    }
    best
}

/// Domains most first until `count` is held, the last one by BestFit
/// among those left (`updateCountsToMinimum`): each with how many it takes.
fn to_minimum<'a>(sorted: &[Domain<'a>], count: usize) -> Vec<(Domain<'a>, usize)> {
    let mut taken = Vec::new();
    let mut remaining = count;
    for (i, domain) in sorted.iter().enumerate() {
        if domain.nodes.len() >= remaining {
            let last = &sorted[i + best_fit(&sorted[i..], remaining)];
            taken.push((last.clone(), remaining));
            return taken;
        }
        remaining -= domain.nodes.len();
        taken.push((domain.clone(), domain.nodes.len()));
    }
    taken
}

/// The fewest domains of a list sorted most first that hold `count`, and
/// the most even share of it over them: the smallest first, each taking
/// what is left over the domains left, at most its nodes.
fn balanced_over<'a>(sorted: &[Domain<'a>], count: usize) -> Vec<(Domain<'a>, usize)> {
    let mut held = 0;
    let fewest = sorted
        .iter()
        .position(|d| {
            held += d.nodes.len();
            held >= count
        })
        .map_or(sorted.len(), |i| i + 1);
    let mut chosen: Vec<&Domain<'a>> = sorted[..fewest].iter().collect();
    chosen.sort_by_key(|d| d.nodes.len());
    let mut remaining = count;
    let mut shares = Vec::with_capacity(fewest);
    for (k, domain) in chosen.iter().enumerate() {
        let left = fewest - k;
        let share = remaining.div_ceil(left).min(domain.nodes.len());
        shares.push(((*domain).clone(), share));
        remaining -= share;
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Zone a: racks r1 (3 nodes), r2 (5), r3 (8); zone b: rack r4 (10),
    /// r5 (10).
    fn places() -> (NodePlaces, Vec<String>) {
        crate::fixtures::racks(&[
            ("a", "a-r1", 3),
            ("a", "a-r2", 5),
            ("a", "a-r3", 8),
            ("b", "b-r4", 10),
            ("b", "b-r5", 10),
        ])
    }

    fn racks_of(placed: &[String]) -> Vec<String> {
        let mut racks: Vec<String> = placed.iter().map(|n| n[..4].to_owned()).collect();
        racks.dedup();
        racks
    }

    #[test]
    fn a_job_goes_to_the_rack_that_holds_it_with_the_fewest_to_spare() {
        let (places, free) = places();
        let placed = place(&places, &free, 4, false).unwrap();
        assert_eq!(racks_of(&placed), ["a-r2"]);
        assert_eq!(placed[0], "a-r2-n00", "nodes by name");
        assert_eq!(
            racks_of(&place(&places, &free, 3, false).unwrap()),
            ["a-r1"]
        );
        assert_eq!(
            racks_of(&place(&places, &free, 9, false).unwrap()),
            ["b-r4"]
        );
    }

    #[test]
    fn a_job_no_rack_holds_climbs_to_a_zone_and_packs_its_largest_racks() {
        let (places, free) = places();
        // 11: zone a (16) holds it with fewer to spare than b (20); its
        // largest rack first (8), then the rest by BestFit: r1 (3).
        let placed = place(&places, &free, 11, false).unwrap();
        assert_eq!(racks_of(&placed), ["a-r1", "a-r3"], "ranks by rack");
        assert_eq!(placed.len(), 11);
        // 21: no zone holds it: zones most first (b, 20), then a by BestFit.
        let placed = place(&places, &free, 21, false).unwrap();
        assert_eq!(placed.iter().filter(|n| n.starts_with('b')).count(), 20);
        assert_eq!(racks_of(&placed)[0], "a-r1");
        assert_eq!(place(&places, &free, 37, false), None);
    }

    #[test]
    fn balanced_placement_evens_out_the_racks_it_needs() {
        let (places, free) = places();
        // 12 in zone b: greedy 10 + 2, balanced 6 + 6.
        let only_b: Vec<String> = free
            .iter()
            .filter(|n| n.starts_with('b'))
            .cloned()
            .collect();
        let count =
            |placed: &[String], rack: &str| placed.iter().filter(|n| n.starts_with(rack)).count();
        let greedy = place(&places, &only_b, 12, false).unwrap();
        assert_eq!((count(&greedy, "b-r4"), count(&greedy, "b-r5")), (10, 2));
        let even = place(&places, &only_b, 12, true).unwrap();
        assert_eq!((count(&even, "b-r4"), count(&even, "b-r5")), (6, 6));
        // A job one rack holds is placed as without the option.
        assert_eq!(
            place(&places, &free, 4, true),
            place(&places, &free, 4, false)
        );
    }

    #[test]
    fn unlabelled_and_excluded_nodes_take_no_worker() {
        let places = NodePlaces::from_entries([
            ("n1", "a", Some("a-r1"), false),
            ("n2", "a", None, false),
            ("n3", "a", Some("a-r1"), true),
        ]);
        let free = ["n1", "n2", "n3"].map(String::from).to_vec();
        assert_eq!(place(&places, &free, 1, false).unwrap(), ["n1"]);
        assert_eq!(place(&places, &free, 2, false), None);
    }
}
