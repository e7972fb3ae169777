//! Which peers an agent probes when the cluster is too big for everyone to
//! probe everyone (`--max-peers`). A full mesh costs each agent one probe
//! stream per node and the collector a pair history per node pair: fine at
//! a hundred nodes, not at thousands.
//!
//! Placement needs a node's links inside its zone most (a job lives in one
//! zone), and the zone summary needs some links to every other zone. So a
//! node gets the nodes of its own zone first, then the other zones in turn,
//! one node of each per round. Within each group the order is a hash of the
//! (node, peer) names: stable while membership changes, and different for
//! every node, so that together the agents cover many pairs.

use std::collections::BTreeMap;

/// A candidate peer: its name and zone.
pub type Candidate<'a> = (&'a str, &'a str);

/// The indices into `candidates` of the peers `node` (in `zone`) probes:
/// all of them when `max` is 0 or covers them, else `max` of them.
pub fn choose(node: &str, zone: &str, candidates: &[Candidate<'_>], max: usize) -> Vec<usize> {
    let others: Vec<usize> = (0..candidates.len())
        .filter(|&i| candidates[i].0 != node)
        .collect();
    if max == 0 || others.len() <= max {
        return others;
    }
    // Each candidate's hash is worked out once: a collector chooses for
    // thousands of nodes among thousands of candidates.
    let keyed = |i: usize| (fnv(node, candidates[i].0), i);
    let mut same = Vec::new();
    let mut zones: BTreeMap<&str, Vec<(u64, usize)>> = BTreeMap::new();
    for i in others {
        if candidates[i].1 == zone {
            same.push(keyed(i));
        } else {
            zones.entry(candidates[i].1).or_default().push(keyed(i));
        }
    }
    if same.len() >= max {
        return smallest(same, max);
    }
    same.sort_unstable();
    // The other zones, each in hash order, taken one node per zone a round.
    let mut zones: Vec<std::vec::IntoIter<usize>> = zones
        .into_values()
        .map(|group| smallest(group, max).into_iter())
        .collect();
    // Start the rounds at a zone that depends on the node, so that the
    // zones left out when `max` is small differ from node to node.
    let start = if zones.is_empty() {
        0
    } else {
        (fnv(node, zone) % zones.len() as u64) as usize
    };
    zones.rotate_left(start);
    let mut chosen: Vec<usize> = same.into_iter().map(|(_, i)| i).collect();
    while chosen.len() < max {
        let mut took = false;
        for group in &mut zones {
            if chosen.len() == max {
                break;
            }
            if let Some(i) = group.next() {
                chosen.push(i);
                took = true;
            }
        }
        if !took {
            break;
        }
    }
    chosen
}

/// The `max` smallest of `keyed`, in order, without sorting the rest.
fn smallest(mut keyed: Vec<(u64, usize)>, max: usize) -> Vec<usize> {
    if keyed.len() > max && max > 0 {
        keyed.select_nth_unstable(max - 1);
        keyed.truncate(max);
    }
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// FNV-1a over two names: a stable, well-spread order.
fn fnv(a: &str, b: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in a.bytes().chain([0xff]).chain(b.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cluster(nodes: usize, zones: usize) -> Vec<(String, String)> {
        (0..nodes)
            .map(|i| (format!("n{i}"), format!("z{}", i % zones)))
            .collect()
    }

    fn view(cluster: &[(String, String)]) -> Vec<Candidate<'_>> {
        cluster
            .iter()
            .map(|(n, z)| (n.as_str(), z.as_str()))
            .collect()
    }

    #[test]
    fn everyone_when_there_is_room_or_no_limit() {
        let c = cluster(10, 3);
        let v = view(&c);
        assert_eq!(choose("n0", "z0", &v, 0).len(), 9);
        assert_eq!(choose("n0", "z0", &v, 9).len(), 9);
        assert!(!choose("n0", "z0", &v, 0).contains(&0));
    }

    #[test]
    fn the_own_zone_first_then_every_other_zone() {
        // 4 zones of 25: 24 zone mates, then one of each other zone.
        let c = cluster(100, 4);
        let v = view(&c);
        let chosen = choose("n0", "z0", &v, 27);
        assert_eq!(chosen.len(), 27);
        assert!(chosen[..24].iter().all(|&i| v[i].1 == "z0"));
        let mut others: Vec<&str> = chosen[24..].iter().map(|&i| v[i].1).collect();
        others.sort_unstable();
        assert_eq!(others, ["z1", "z2", "z3"]);
    }

    #[test]
    fn different_nodes_choose_differently() {
        let c = cluster(1_000, 2);
        let v = view(&c);
        let a = choose("n0", "z0", &v, 20);
        let b = choose("n2", "z0", &v, 20);
        assert_ne!(a, b);
    }

    proptest! {
        #[test]
        fn never_self_never_twice_at_most_max_and_stable(
            nodes in 2usize..300, zones in 1usize..12, max in 0usize..80, me in 0usize..300,
        ) {
            let c = cluster(nodes, zones);
            let v = view(&c);
            let me = me % nodes;
            let (name, zone) = v[me];
            let chosen = choose(name, zone, &v, max);
            let expected = if max == 0 { nodes - 1 } else { max.min(nodes - 1) };
            prop_assert_eq!(chosen.len(), expected);
            prop_assert!(!chosen.contains(&me));
            let mut unique = chosen.clone();
            unique.sort_unstable();
            unique.dedup();
            prop_assert_eq!(unique.len(), chosen.len());
            prop_assert_eq!(&choose(name, zone, &v, max), &chosen);
            // When limited, zone mates before anyone else.
            prop_assume!(max > 0 && max < nodes - 1);
            let first_foreign = chosen.iter().position(|&i| v[i].1 != zone).unwrap_or(chosen.len());
            prop_assert!(chosen[first_foreign..].iter().all(|&i| v[i].1 != zone));
        }
    }
}
