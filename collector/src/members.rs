//! The member list that peer sets are chosen from: copied out of the state
//! once per membership change and shared by every session, so that choosing
//! a node's peers takes no lock. Thousands of agents joining at once would
//! otherwise each choose among thousands of nodes under the state's lock.

use std::time::{Duration, Instant};

use netaware_core::peers::{self, PeerBound, PeerIndex};
use netaware_proto::v1::Peer;

/// Members are copied again at most this often, however fast nodes join;
/// a session that got an older copy asks again at its next turn.
pub const MIN_COPY_GAP: Duration = Duration::from_millis(200);

/// Every known node, as peers are told of it, at one membership version.
#[derive(Debug, Clone)]
pub struct Members {
    /// The membership version copied.
    pub version: u64,
    /// When it was copied.
    pub copied: Instant,
    /// How many peers each agent probes at most (0: all).
    pub max_peers: usize,
    /// How long one rotation step of the peer sets lasts.
    pub rotation: Duration,
    /// Every node, ordered by name, as the primary network's peer.
    pub nodes: Vec<Peer>,
    /// Each node's entries on its other networks (a dual-stack node's
    /// other family), by the index of `nodes`.
    pub other_networks: Vec<Vec<Peer>>,
    /// `nodes` prepared for choosing peers among them, once per copy
    /// rather than once per session.
    index: PeerIndex,
}

impl Members {
    /// A member list of `nodes` at membership `version`, on the primary
    /// network only.
    pub fn new(version: u64, max_peers: usize, rotation: Duration, nodes: Vec<Peer>) -> Self {
        let other_networks = vec![Vec::new(); nodes.len()];
        let candidates: Vec<peers::Candidate<'_>> = nodes
            .iter()
            .map(|p| (p.name.as_str(), p.zone.as_str()))
            .collect();
        let index = PeerIndex::new(&candidates);
        Self {
            version,
            copied: Instant::now(),
            max_peers,
            rotation,
            nodes,
            other_networks,
            index,
        }
    }

    /// The same members, with each node's entries on its other networks
    /// (`other_networks[i]` for `nodes[i]`).
    pub fn with_other_networks(mut self, other_networks: Vec<Vec<Peer>>) -> Self {
        debug_assert_eq!(other_networks.len(), self.nodes.len());
        self.other_networks = other_networks;
        self
    }

    /// `node`'s rotation step at `unix_ms`: wall-clock time (so that a
    /// restarted collector goes on with the same step), shifted by a phase
    /// of the node's own within the step. Every node still goes through
    /// every step in turn, but the nodes do not all move at once: 5,000
    /// sessions choosing new sets in the same instant took a second of the
    /// collector's CPU and held acks up for as long.
    pub fn epoch(&self, node: &str, unix_ms: u64) -> u64 {
        unix_ms.saturating_add(self.phase(node)) / self.step_ms()
    }

    /// Time from `unix_ms` to `node`'s next rotation step.
    pub fn until_next_epoch(&self, node: &str, unix_ms: u64) -> Duration {
        let step = self.step_ms();
        Duration::from_millis(step - unix_ms.saturating_add(self.phase(node)) % step)
    }

    fn step_ms(&self) -> u64 {
        u64::try_from(self.rotation.as_millis().max(1)).unwrap_or(u64::MAX)
    }

    /// A node's phase in [0, step), from its name (FNV-1a).
    fn phase(&self, node: &str) -> u64 {
        let hash = node.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
        hash % self.step_ms()
    }

    /// The peers that `node` must probe in rotation step `epoch`: every
    /// other node, or `max_peers` of them (`netaware_core::peers::choose`),
    /// on the primary network, and each of those again on every other
    /// network that both are on.
    pub fn peer_set(&self, node: &str, epoch: u64) -> Vec<Peer> {
        let zone = self.index.zone_of(node).unwrap_or("");
        let bound = PeerBound {
            max: self.max_peers,
            epoch,
        };
        let chosen = self.index.choose(node, zone, bound);
        let mine = self
            .index
            .position(node)
            .map_or(&[][..], |i| self.other_networks[i].as_slice());
        let mut set: Vec<Peer> = chosen.iter().map(|&i| self.nodes[i].clone()).collect();
        for &i in &chosen {
            set.extend(
                self.other_networks[i]
                    .iter()
                    .filter(|entry| mine.iter().any(|m| m.network == entry.network))
                    .cloned(),
            );
        }
        set
    }

    /// Least time between two peer sets down one session: a second, and a
    /// millisecond per node past a thousand, so that recomputing every
    /// agent's set after a change costs the collector a bounded share of a
    /// core however large the cluster.
    pub fn peer_set_spacing(&self) -> Duration {
        Duration::from_millis(
            u64::try_from(self.nodes.len())
                .unwrap_or(u64::MAX)
                .max(1_000),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(name: &str, zone: &str) -> Peer {
        Peer {
            name: name.into(),
            address: "127.0.0.2".into(),
            zone: zone.into(),
            region: String::new(),
            ..Peer::default()
        }
    }

    #[test]
    fn a_node_gets_its_zone_and_a_few_of_the_other_and_never_itself() {
        let nodes = (0..20)
            .map(|i| peer(&format!("n{i:02}"), if i % 2 == 0 { "a" } else { "b" }))
            .collect();
        let members = Members::new(3, 12, Duration::from_secs(60), nodes);
        let set = members.peer_set("n00", 0);
        assert_eq!(set.len(), 12);
        assert!(set.iter().all(|p| p.name != "n00"));
        // A third of the bound to the other zone, the rest to a sample
        // of its 9 zone mates.
        assert_eq!(set.iter().filter(|p| p.zone == "b").count(), 4);
        assert_eq!(set.iter().filter(|p| p.zone == "a").count(), 8);
        // Each node's steps last a minute, their boundaries spread out.
        let boundary = |node: &str| {
            let next = members.until_next_epoch(node, 125_000).as_millis() as u64;
            assert!((1..=60_000).contains(&next));
            let before = members.epoch(node, 125_000 + next - 1);
            assert_eq!(members.epoch(node, 125_000 + next), before + 1);
            assert_eq!(members.epoch(node, 125_000 + next + 59_999), before + 1);
            next
        };
        let boundaries: std::collections::BTreeSet<u64> =
            (0..20).map(|i| boundary(&format!("n{i:02}"))).collect();
        assert!(boundaries.len() > 10, "{boundaries:?}");
        assert_eq!(members.peer_set_spacing(), Duration::from_secs(1));
        let large = Members::new(1, 64, Duration::from_secs(60), vec![peer("x", "a"); 5_000]);
        assert_eq!(large.peer_set_spacing(), Duration::from_secs(5));
    }

    #[test]
    fn a_dual_stack_peer_comes_again_on_the_other_family_only_to_dual_stack_nodes() {
        let nodes: Vec<Peer> = ["a", "b", "c"].map(|n| peer(n, "z")).to_vec();
        let ipv6 = |name: &str| Peer {
            address: "2001:2::1".into(),
            network: "primary-ipv6".into(),
            ..peer(name, "z")
        };
        // a and b are dual-stack, c is not.
        let members = Members::new(1, 0, Duration::from_secs(60), nodes).with_other_networks(vec![
            vec![ipv6("a")],
            vec![ipv6("b")],
            vec![],
        ]);
        let entries = |node: &str| -> Vec<(String, String)> {
            members
                .peer_set(node, 0)
                .into_iter()
                .map(|p| (p.name, p.network))
                .collect()
        };
        assert_eq!(
            entries("a"),
            [
                ("b".into(), String::new()),
                ("c".into(), String::new()),
                ("b".into(), "primary-ipv6".into())
            ]
        );
        assert_eq!(
            entries("c"),
            [("a".into(), String::new()), ("b".into(), String::new())]
        );
    }
}
