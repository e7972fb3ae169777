//! Volcano's network-topology-aware scheduling, as it places a job of
//! whole-node workers whose `networkTopology` allows tiers up to
//! `highest_tier`, on HyperNodes built from node labels ([`NodePlaces`]):
//! tier 1, each rack's nodes; tier 2, each zone's racks.
//!
//! Modelled on volcano-sh/volcano `pkg/scheduler/actions/allocate/allocate.go`
//! (`allocateResourceForTasksWithTopology`, `selectBestHyperNode`) and the
//! `network-topology-aware` plugin
//! (`pkg/scheduler/plugins/network-topology-aware/network_topology_aware.go`):
//!
//! - **hard** mode: tier by tier from the lowest, every HyperNode of that
//!   tier that can hold the whole job is a candidate; the first tier with
//!   one wins. Among its candidates, the best by the plugins' scores: for
//!   a job with nothing placed yet the plugin scores none, and whole free
//!   nodes score alike, so any of them (here, at random). Inside it, each
//!   task goes to the node of the best score; in a zone that is a node of
//!   the rack holding most of the job's tasks so far (the plugin's task
//!   number score, `scoreWithTaskNum`), else any. A job no HyperNode up
//!   to its highest tier holds waits.
//! - **soft** mode, as the user guide describes it ("best effort"): the
//!   same search, and where nothing up to the highest tier holds the job,
//!   its tasks go anywhere, each next to the racks the job already holds
//!   where it can.
//!
//! Ranks follow the order the tasks were placed in. Simplified: one pod
//! per node and no other resources, no queues or preemption, HyperNodes
//! of two tiers only.

use std::collections::BTreeMap;

use rand::Rng;
use rand::seq::SliceRandom;

use crate::labels::NodePlaces;

/// How strictly a job keeps to its HyperNode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Within one HyperNode up to the highest tier, or wait.
    Hard,
    /// Within one where it can, anywhere else.
    Soft,
}

/// Places `size` workers on `free` nodes as Volcano would, from the
/// labels `places`, within tier `highest_tier` (1: a rack, 2: a zone);
/// `None` when the job waits.
pub fn place(
    places: &NodePlaces,
    free: &[String],
    size: usize,
    mode: Mode,
    highest_tier: u8,
    rng: &mut impl Rng,
) -> Option<Vec<String>> {
    // Tier 1: racks; tier 2: zones; each with its usable free nodes.
    let mut racks: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    for name in free {
        if let Some(place) = places.get(name).filter(|p| p.usable()) {
            let rack = place.rack.as_deref().expect("usable: labelled");
            racks
                .entry((place.zone.as_str(), rack))
                .or_default()
                .push(name.as_str());
        }
    }
    let usable: usize = racks.values().map(Vec::len).sum();
    if size == 0 || usable < size {
        return None;
    }
    let mut zones: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
    for key in racks.keys() {
        zones.entry(key.0).or_default().push(*key);
    }
    // Tier 1: any rack that holds the job.
    if highest_tier >= 1 {
        let fit: Vec<&(&str, &str)> = racks.keys().filter(|k| racks[*k].len() >= size).collect();
        if !fit.is_empty() {
            let chosen = fit[rng.random_range(0..fit.len())];
            let mut nodes = racks[chosen].clone();
            nodes.shuffle(rng);
            return Some(nodes.into_iter().take(size).map(str::to_owned).collect());
        }
    }
    // Tier 2: any zone that holds it, packed by the task number score.
    let within =
        |zone_racks: &[(&str, &str)]| -> usize { zone_racks.iter().map(|k| racks[k].len()).sum() };
    if highest_tier >= 2 {
        let fit: Vec<&str> = zones
            .iter()
            .filter(|(_, zone_racks)| within(zone_racks) >= size)
            .map(|(zone, _)| *zone)
            .collect();
        if !fit.is_empty() {
            let zone = fit[rng.random_range(0..fit.len())];
            let candidates: Vec<(&str, &str)> = zones[zone].clone();
            return Some(pack(&racks, &candidates, size, rng));
        }
    }
    match mode {
        Mode::Hard => None,
        Mode::Soft => {
            let every: Vec<(&str, &str)> = racks.keys().copied().collect();
            Some(pack(&racks, &every, size, rng))
        }
    }
}

/// `size` nodes of `candidates`' racks, one task at a time: the first
/// anywhere, each next in the rack holding most of the job's tasks that
/// still has a free node (ties at random).
fn pack(
    racks: &BTreeMap<(&str, &str), Vec<&str>>,
    candidates: &[(&str, &str)],
    size: usize,
    rng: &mut impl Rng,
) -> Vec<String> {
    let mut left: BTreeMap<(&str, &str), Vec<&str>> = candidates
        .iter()
        .map(|k| {
            let mut nodes = racks[k].clone();
            nodes.shuffle(rng);
            (*k, nodes)
        })
        .collect();
    let mut held: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    let mut placed = Vec::with_capacity(size);
    while placed.len() < size {
        let open: Vec<(&str, &str)> = left
            .iter()
            .filter(|(_, nodes)| !nodes.is_empty())
            .map(|(k, _)| *k)
            .collect();
        let Some(most) = open.iter().map(|k| held.get(k).copied().unwrap_or(0)).max() else {
            break;
        };
        // A node's chance goes with its rack's nodes: ties are nodes, not
        // racks.
        let best: Vec<(&str, &str)> = open
            .iter()
            .filter(|k| held.get(*k).copied().unwrap_or(0) == most)
            .flat_map(|k| std::iter::repeat_n(*k, left[k].len()))
            .collect();
        let key = best[rng.random_range(0..best.len())];
        let node = left.get_mut(&key).and_then(Vec::pop).expect("a free node");
        *held.entry(key).or_default() += 1;
        placed.push(node.to_owned());
    }
    placed
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    /// Zone a: racks a-r1 (4 nodes), a-r2 (4); zone b: b-r3 (2), b-r4 (2).
    fn places() -> (NodePlaces, Vec<String>) {
        crate::fixtures::racks(&[
            ("a", "a-r1", 4),
            ("a", "a-r2", 4),
            ("b", "b-r3", 2),
            ("b", "b-r4", 2),
        ])
    }

    fn racks_of(placed: &[String]) -> Vec<String> {
        let mut racks: Vec<String> = placed.iter().map(|n| n[..4].to_owned()).collect();
        racks.sort();
        racks.dedup();
        racks
    }

    #[test]
    fn hard_mode_takes_the_lowest_tier_that_holds_the_job_or_waits() {
        let (places, free) = places();
        let mut rng = StdRng::seed_from_u64(1);
        let mut racks_seen = std::collections::BTreeSet::new();
        for _ in 0..50 {
            // Two fit every rack: any of them.
            let placed = place(&places, &free, 2, Mode::Hard, 2, &mut rng).unwrap();
            assert_eq!(racks_of(&placed).len(), 1, "{placed:?}");
            racks_seen.insert(racks_of(&placed)[0].clone());
            // Four fit zone a's racks only.
            let placed = place(&places, &free, 4, Mode::Hard, 2, &mut rng).unwrap();
            assert!(racks_of(&placed) == ["a-r1"] || racks_of(&placed) == ["a-r2"]);
        }
        assert_eq!(racks_seen.len(), 4, "ties at random: {racks_seen:?}");
        // Six: no rack, zone a: packed, the first rack filled first.
        let placed = place(&places, &free, 6, Mode::Hard, 2, &mut rng).unwrap();
        assert_eq!(racks_of(&placed).len(), 2);
        let first = &placed[0][..4];
        assert_eq!(
            placed[..4].iter().filter(|n| n.starts_with(first)).count(),
            4,
            "{placed:?}"
        );
        // Nine: no zone holds it: it waits; within tier 1, so does six.
        assert_eq!(place(&places, &free, 9, Mode::Hard, 2, &mut rng), None);
        assert_eq!(place(&places, &free, 6, Mode::Hard, 1, &mut rng), None);
    }

    #[test]
    fn soft_mode_spills_over_where_hard_mode_waits() {
        let (places, free) = places();
        let mut rng = StdRng::seed_from_u64(2);
        let placed = place(&places, &free, 9, Mode::Soft, 2, &mut rng).unwrap();
        let mut unique = placed.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 9);
        assert_eq!(place(&places, &free, 13, Mode::Soft, 2, &mut rng), None);
        // Where a rack holds it, soft is hard.
        let placed = place(&places, &free, 3, Mode::Soft, 2, &mut rng).unwrap();
        assert_eq!(racks_of(&placed).len(), 1);
    }
}
