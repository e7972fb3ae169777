//! Which peers an agent probes. A full mesh costs each agent one probe
//! stream per node and the collector a pair history per node pair: fine at
//! a hundred nodes, not at thousands. So past a bound each agent probes a
//! bounded set that rotates, and what nobody probes now is estimated
//! (`crate::coordinates`, `crate::estimate`).
//!
//! Placement needs a node's links inside its zone most (a job lives in one
//! zone), and the zone summary and the coordinates need links to every
//! other zone. So, past the bound, a node probes:
//!
//! - **a few nodes of every other zone** ([`PeerBound::per_other_zone`]
//!   each, by rendezvous hashing of (node, peer, epoch): a different few
//!   for every node and every epoch);
//! - **its own zone**: all of it while it fits in what is left of the bound,
//!   else a rotating sample. The zone's nodes are put in name order on a
//!   ring; in epoch `e` a node probes the `k` nodes at ring offsets
//!   `e*k+1 ..= e*k+k` (modulo the ring), so every directed pair inside
//!   the zone is probed within [`cycle_epochs`] epochs, and every node is
//!   probed by exactly `k` zone mates in each (its health stays measured).
//!
//! Whatever the cluster's size, an agent probes at most `max` peers, and
//! at least one of them in its own zone when it has zone mates (however
//! small the bound: its links inside the zone are what node health and
//! fault localisation judge it by).
//! Choosing is pure: the epoch comes from the caller's clock.

/// A candidate peer: its name and zone.
pub type Candidate<'a> = (&'a str, &'a str);

/// How many peers each agent probes, and which rotation step it is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerBound {
    /// Most peers an agent probes; 0 for a full mesh at any size.
    pub max: usize,
    /// The rotation step (e.g. minutes since the epoch / rotation period).
    pub epoch: u64,
}

/// Most nodes of each other zone an agent probes.
pub const MAX_PER_OTHER_ZONE: usize = 4;

impl PeerBound {
    /// A full mesh, whatever the size.
    pub const FULL_MESH: Self = Self { max: 0, epoch: 0 };

    /// How many nodes of each other zone a node probes when there are
    /// `other_zones` of them: a third of the bound shared out, between 1
    /// and [`MAX_PER_OTHER_ZONE`].
    pub fn per_other_zone(&self, other_zones: usize) -> usize {
        if other_zones == 0 {
            return 0;
        }
        (self.max / 3 / other_zones).clamp(1, MAX_PER_OTHER_ZONE)
    }

    /// How many other zones a node reaches in one epoch: all of them
    /// unless they would take more than half the bound (hundreds of
    /// zones), then a rotating half-bound's worth.
    fn zones_reached(&self, other_zones: usize) -> usize {
        other_zones.min(self.max.div_ceil(2))
    }
}

/// Epochs in which a node of a zone of `zone_size` nodes probes every zone
/// mate at least once when `sample` mates are probed per epoch (1 when the
/// zone fits, as a full mesh).
pub fn cycle_epochs(zone_size: usize, sample: usize) -> usize {
    let mates = zone_size.saturating_sub(1);
    if mates == 0 || sample >= mates {
        return 1;
    }
    mates.div_ceil(sample.max(1))
}

/// The indices into `candidates` of the peers `node` (in `zone`) probes:
/// every other candidate when the bound is 0 or covers them, else at most
/// `bound.max` of them (module docs).
pub fn choose(
    node: &str,
    zone: &str,
    candidates: &[Candidate<'_>],
    bound: PeerBound,
) -> Vec<usize> {
    PeerIndex::new(candidates).choose(node, zone, bound)
}

/// Candidates prepared once for choosing the peers of many nodes: in name
/// order and grouped by zone. Choosing among 20,000 candidates then looks
/// nothing up by comparing names and sorts nothing but the few it keeps,
/// where [`choose`] alone does both for every call (a collector choosing
/// every agent's set after a membership change spent most of a core on
/// it).
#[derive(Debug, Clone, Default)]
pub struct PeerIndex {
    /// Each candidate's name, by index.
    names: Vec<String>,
    /// Candidate indices by name.
    by_name: Vec<usize>,
    /// Each zone's name and its candidates in name order, by zone name.
    zones: Vec<(String, Vec<usize>)>,
    /// Each candidate's zone, as an index into `zones`.
    zone_of: Vec<usize>,
}

impl PeerIndex {
    /// The index of `candidates`; choices name candidates by their index
    /// in this slice.
    pub fn new(candidates: &[Candidate<'_>]) -> Self {
        let mut by_name: Vec<usize> = (0..candidates.len()).collect();
        by_name.sort_by_key(|&i| candidates[i].0);
        let mut zone_names: Vec<&str> = candidates.iter().map(|c| c.1).collect();
        zone_names.sort_unstable();
        zone_names.dedup();
        let mut zones: Vec<(String, Vec<usize>)> = zone_names
            .iter()
            .map(|&z| (z.to_owned(), Vec::new()))
            .collect();
        let mut zone_of = vec![0; candidates.len()];
        for &i in &by_name {
            let zone = zone_names.binary_search(&candidates[i].1).unwrap_or(0);
            zone_of[i] = zone;
            zones[zone].1.push(i);
        }
        Self {
            names: candidates.iter().map(|c| c.0.to_owned()).collect(),
            by_name,
            zones,
            zone_of,
        }
    }

    /// How many candidates there are.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The index of the candidate named `node`, if there is one.
    pub fn position(&self, node: &str) -> Option<usize> {
        let at = self
            .by_name
            .partition_point(|&i| self.names[i].as_str() < node);
        self.by_name
            .get(at)
            .copied()
            .filter(|&i| self.names[i] == node)
    }

    /// The zone of the candidate named `node`, if there is one.
    pub fn zone_of(&self, node: &str) -> Option<&str> {
        let i = self.position(node)?;
        Some(self.zones[self.zone_of[i]].0.as_str())
    }

    /// The indices of the peers `node` (in `zone`) probes: every other
    /// candidate when the bound is 0 or covers them, else at most
    /// `bound.max` of them (module docs).
    pub fn choose(&self, node: &str, zone: &str, bound: PeerBound) -> Vec<usize> {
        let is_node = |i: usize| self.names[i] == node;
        let others = self.len() - self.named(node);
        if bound.max == 0 || others <= bound.max {
            return (0..self.len()).filter(|&i| !is_node(i)).collect();
        }
        let own = self
            .zones
            .binary_search_by(|(z, _)| z.as_str().cmp(zone))
            .ok();
        let ring: &[usize] = own.map_or(&[], |z| self.zones[z].1.as_slice());
        let other_zones: Vec<usize> = (0..self.zones.len()).filter(|&z| Some(z) != own).collect();
        let key = RendezvousKey::new(node, bound.epoch);
        let mut chosen = self.other_zone_peers(node, zone, &other_zones, key, bound);
        // At least one zone mate, however small the bound: fault localisation
        // and node health need a node's links inside its zone.
        let has_mates = ring.iter().any(|&i| !is_node(i));
        chosen.truncate(bound.max - usize::from(has_mates));
        let room = bound.max - chosen.len().min(bound.max);
        chosen.splice(0..0, self.zone_peers(node, ring, room, key, bound.epoch));
        // Room the zone left (a small zone) goes to more nodes of other zones.
        let spare = bound.max.saturating_sub(chosen.len());
        if spare > 0 {
            let mut more = self.extra_other_zone_peers(&other_zones, &chosen, spare, key);
            chosen.append(&mut more);
        }
        chosen
    }

    /// How many candidates are named `node`.
    fn named(&self, node: &str) -> usize {
        let from = self
            .by_name
            .partition_point(|&i| self.names[i].as_str() < node);
        let to = self
            .by_name
            .partition_point(|&i| self.names[i].as_str() <= node);
        to - from
    }

    /// The zone mates `node` probes: all while they fit in `room`, else the
    /// `room` at this epoch's offsets on the ring of the zone in name order.
    fn zone_peers(
        &self,
        node: &str,
        ring: &[usize],
        room: usize,
        key: RendezvousKey,
        epoch: u64,
    ) -> Vec<usize> {
        // The ring is in name order.
        let found = ring.binary_search_by(|&i| self.names[i].as_str().cmp(node));
        let Ok(me) = found else {
            // Not a member (yet): any `room` of them, by hash.
            let keyed = ring.iter().map(|&i| (key.weight(&self.names[i]), i));
            return smallest(keyed.collect(), room);
        };
        let size = ring.len();
        let mates = size - 1;
        if mates <= room {
            return (1..size).map(|offset| ring[(me + offset) % size]).collect();
        }
        // Offsets 1..=mates, this epoch's block of `room` of them.
        let start = (epoch % mates as u64) as usize * room;
        (0..room)
            .map(|t| {
                let offset = (start + t) % mates + 1;
                ring[(me + offset) % size]
            })
            .collect()
    }

    /// A few nodes of each other zone (all zones, or a rotating share of
    /// them when there are hundreds), chosen by rendezvous hashing with the
    /// epoch.
    fn other_zone_peers(
        &self,
        node: &str,
        zone: &str,
        other_zones: &[usize],
        key: RendezvousKey,
        bound: PeerBound,
    ) -> Vec<usize> {
        let per_zone = bound.per_other_zone(other_zones.len());
        let mut reached: Vec<(u64, usize)> = other_zones
            .iter()
            .map(|&z| {
                let name = self.zones[z].0.as_str();
                (
                    rendezvous(node, name, bound.epoch) ^ rendezvous(zone, name, 0),
                    z,
                )
            })
            .collect();
        let reach = bound.zones_reached(other_zones.len());
        reached.sort_unstable();
        reached.truncate(reach);
        // Zones are indexed in name order.
        reached.sort_unstable_by_key(|&(_, z)| z);
        let mut chosen = Vec::new();
        for (_, z) in reached {
            let keyed = self.zones[z]
                .1
                .iter()
                .map(|&i| (key.weight(&self.names[i]), i));
            chosen.extend(smallest(keyed.collect(), per_zone));
        }
        chosen.truncate(bound.max);
        chosen
    }

    /// `spare` more nodes of other zones, not yet in `taken`, one of each
    /// zone a round.
    fn extra_other_zone_peers(
        &self,
        other_zones: &[usize],
        taken: &[usize],
        spare: usize,
        key: RendezvousKey,
    ) -> Vec<usize> {
        let mut groups: Vec<std::vec::IntoIter<usize>> = other_zones
            .iter()
            .map(|&z| {
                let keyed = self.zones[z]
                    .1
                    .iter()
                    .filter(|i| !taken.contains(i))
                    .map(|&i| (key.weight(&self.names[i]), i));
                smallest(keyed.collect(), spare).into_iter()
            })
            .collect();
        let mut more = Vec::new();
        while more.len() < spare {
            let before = more.len();
            for group in &mut groups {
                if more.len() == spare {
                    break;
                }
                more.extend(group.next());
            }
            if more.len() == before {
                break;
            }
        }
        more
    }
}

/// The `max` smallest of `keyed`, in order, without sorting the rest.
fn smallest(mut keyed: Vec<(u64, usize)>, max: usize) -> Vec<usize> {
    if max == 0 {
        return Vec::new();
    }
    if keyed.len() > max {
        keyed.select_nth_unstable(max - 1);
        keyed.truncate(max);
    }
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// A chooser's side of the rendezvous weights in one epoch: the weight of
/// `b` for `a` is FNV-1a over `a`, `b` and the epoch, so that every (node,
/// epoch) ranks the candidates differently, and stably while membership
/// changes (a candidate's weight depends on its own name alone). The hash
/// of `a` is taken once, not once per candidate.
#[derive(Debug, Clone, Copy)]
struct RendezvousKey {
    /// FNV-1a's state after `a` and its separator.
    after_chooser: u64,
    epoch: u64,
}

impl RendezvousKey {
    fn new(chooser: &str, epoch: u64) -> Self {
        Self {
            after_chooser: fnv(FNV_OFFSET, chooser.bytes().chain([0xff])),
            epoch,
        }
    }

    /// The weight of the candidate named `peer`.
    fn weight(self, peer: &str) -> u64 {
        let tail = peer.bytes().chain([0xff]).chain(self.epoch.to_le_bytes());
        fnv(self.after_chooser, tail)
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a from `state` over `bytes`.
fn fnv(state: u64, bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(state, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Rendezvous weight of `b` for `a` in `epoch`.
fn rendezvous(a: &str, b: &str, epoch: u64) -> u64 {
    RendezvousKey::new(a, epoch).weight(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

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

    fn bound(max: usize, epoch: u64) -> PeerBound {
        PeerBound { max, epoch }
    }

    #[test]
    fn a_weight_is_fnv_over_both_names_and_the_epoch() {
        let whole: Vec<u8> = [&b"n1"[..], &[0xff], b"n22", &[0xff], &7u64.to_le_bytes()].concat();
        assert_eq!(rendezvous("n1", "n22", 7), fnv(FNV_OFFSET, whole));
        assert_ne!(rendezvous("n1", "n22", 7), rendezvous("n1", "n22", 8));
        assert_ne!(rendezvous("n1", "n22", 7), rendezvous("n12", "n2", 7));
    }

    #[test]
    fn an_index_finds_nodes_and_their_zones_and_chooses_as_often_as_asked() {
        let c = cluster(50, 3);
        let v = view(&c);
        let index = PeerIndex::new(&v);
        assert_eq!(index.len(), 50);
        assert_eq!(index.position("n17"), Some(17));
        assert_eq!(index.zone_of("n17"), Some("z2"));
        assert_eq!(index.position("n170"), None);
        assert_eq!(index.zone_of(""), None);
        for node in ["n0", "n17", "n49"] {
            let zone = index.zone_of(node).unwrap();
            for epoch in 0..3 {
                let chosen = index.choose(node, zone, bound(10, epoch));
                assert_eq!(chosen, choose(node, zone, &v, bound(10, epoch)));
                assert_eq!(chosen.len(), 10);
            }
        }
        // A node the index does not hold still gets a set, of others.
        let outsider = index.choose("x", "z1", bound(10, 0));
        assert_eq!(outsider.len(), 10);
    }

    #[test]
    fn everyone_when_there_is_room_or_no_limit() {
        let c = cluster(10, 3);
        let v = view(&c);
        assert_eq!(choose("n0", "z0", &v, PeerBound::FULL_MESH).len(), 9);
        assert_eq!(choose("n0", "z0", &v, bound(9, 7)).len(), 9);
        assert!(!choose("n0", "z0", &v, bound(0, 0)).contains(&0));
    }

    #[test]
    fn a_zone_that_fits_is_a_full_mesh_and_every_other_zone_is_reached() {
        // 4 zones of 25, a bound of 40: the 24 zone mates, then others.
        let c = cluster(100, 4);
        let v = view(&c);
        let chosen = choose("n0", "z0", &v, bound(40, 3));
        assert_eq!(chosen.len(), 40);
        assert_eq!(chosen.iter().filter(|&&i| v[i].1 == "z0").count(), 24);
        let zones: BTreeSet<&str> = chosen.iter().map(|&i| v[i].1).collect();
        assert_eq!(zones.len(), 4);
    }

    #[test]
    fn different_nodes_and_epochs_choose_differently() {
        let c = cluster(1_000, 2);
        let v = view(&c);
        let a = choose("n0", "z0", &v, bound(20, 0));
        assert_ne!(a, choose("n2", "z0", &v, bound(20, 0)));
        assert_ne!(a, choose("n0", "z0", &v, bound(20, 1)));
        assert_eq!(a, choose("n0", "z0", &v, bound(20, 0)));
    }

    #[test]
    fn the_cycle_is_stated() {
        assert_eq!(cycle_epochs(500, 43), 12);
        assert_eq!(cycle_epochs(20, 43), 1);
        assert_eq!(cycle_epochs(1, 0), 1);
    }

    proptest! {
        #[test]
        fn bounded_deterministic_never_self_never_twice(
            nodes in 2usize..400, zones in 1usize..12, max in 0usize..80,
            me in 0usize..400, epoch in 0u64..1_000,
        ) {
            let c = cluster(nodes, zones);
            let v = view(&c);
            let me = me % nodes;
            let (name, zone) = v[me];
            let chosen = choose(name, zone, &v, bound(max, epoch));
            let expected = if max == 0 { nodes - 1 } else { max.min(nodes - 1) };
            prop_assert!(chosen.len() <= expected);
            prop_assert!(!chosen.contains(&me));
            let unique: BTreeSet<usize> = chosen.iter().copied().collect();
            prop_assert_eq!(unique.len(), chosen.len());
            prop_assert_eq!(&choose(name, zone, &v, bound(max, epoch)), &chosen);
            // The bound is used up unless the cluster is smaller.
            prop_assert_eq!(chosen.len(), expected);
            // Every other zone is reached while the zones fit the bound
            // beside the one zone mate every node keeps.
            let reached: BTreeSet<&str> = chosen.iter().map(|&i| v[i].1).collect();
            let other_zones = zones.min(nodes) - 1;
            let has_mates = v.iter().filter(|c| c.1 == zone).count() > 1;
            let room = if has_mates { max.saturating_sub(1) } else { max };
            if max > 0 && other_zones <= max.div_ceil(2) && other_zones <= room {
                for z in 0..zones.min(nodes) {
                    let z = format!("z{z}");
                    prop_assert!(z == zone || reached.contains(z.as_str()), "{} not reached", z);
                }
            }
        }

        #[test]
        fn rotation_probes_every_zone_pair_within_the_cycle(
            nodes in 40usize..400, zones in 1usize..6, max in 4usize..30, start in 0u64..1_000,
        ) {
            let c = cluster(nodes, zones);
            let v = view(&c);
            let b = bound(max, 0);
            let other_zones = zones - 1;
            // What is left of the bound for the zone.
            let room = max - (b.per_other_zone(other_zones) * b.zones_reached(other_zones)).min(max);
            let zone_size = v.iter().filter(|x| x.1 == "z0").count();
            prop_assume!(room > 0 && zone_size - 1 > room);
            let cycle = cycle_epochs(zone_size, room) as u64;
            let mut probed = BTreeSet::new();
            for epoch in start..start + cycle {
                for (i, &(name, zone)) in v.iter().enumerate().filter(|(_, x)| x.1 == "z0") {
                    for j in choose(name, zone, &v, bound(max, epoch)) {
                        if v[j].1 == "z0" {
                            probed.insert((i, j));
                        }
                    }
                }
            }
            prop_assert_eq!(probed.len(), zone_size * (zone_size - 1));
        }

        #[test]
        fn every_node_is_probed_by_its_zone_in_every_epoch(
            nodes in 100usize..300, max in 8usize..30, epoch in 0u64..100,
        ) {
            let c = cluster(nodes, 2);
            let v = view(&c);
            let mut probed_by = vec![0usize; nodes];
            for &(name, zone) in &v {
                for j in choose(name, zone, &v, bound(max, epoch)) {
                    if v[j].1 == zone {
                        probed_by[j] += 1;
                    }
                }
            }
            let least = probed_by.iter().min().copied().unwrap_or(0);
            let most = probed_by.iter().max().copied().unwrap_or(0);
            prop_assert!(least > 0);
            prop_assert_eq!(least, most, "the ring spreads the probing evenly");
        }
    }

    #[test]
    fn every_agent_probes_a_zone_mate_whatever_its_bound() {
        for zones in 2..=8 {
            let cluster = cluster(zones * 5, zones);
            let candidates = view(&cluster);
            for max in 1..=zones + 1 {
                for epoch in 0..3 {
                    for (node, zone) in &candidates {
                        let set = choose(node, zone, &candidates, bound(max, epoch));
                        assert!(set.len() <= max);
                        assert!(
                            set.iter().any(|&i| candidates[i].1 == *zone),
                            "{node} in {zone}, {zones} zones, bound {max}: {set:?}"
                        );
                    }
                }
            }
        }
    }
}
