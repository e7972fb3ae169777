//! The simulated agents of a load test, pure: their names, zones and
//! addresses, the peers each one reports on, and the windows it sends
//! (plausible figures that vary with the agent and the window, so that the
//! collector does real work on each).

use netaware_proto::v1 as pb;

/// A fleet of simulated agents.
#[derive(Debug, Clone)]
pub struct Fleet {
    agents: usize,
    peers: usize,
    zones: usize,
    /// The window length the agents announce and keep, in ms.
    pub window_ms: u32,
}

impl Fleet {
    /// `agents` agents in `zones` zones, each reporting on `peers` others
    /// (fewer when the fleet is smaller).
    pub fn new(agents: usize, peers: usize, zones: usize, window_ms: u32) -> Self {
        Self {
            agents,
            peers: peers.min(agents.saturating_sub(1)),
            zones: zones.clamp(1, agents.max(1)),
            window_ms,
        }
    }

    /// How many agents.
    pub fn len(&self) -> usize {
        self.agents
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.agents == 0
    }

    /// The node name of agent `i`.
    pub fn name(&self, i: usize) -> String {
        format!("sim-{i:05}")
    }

    fn zone(&self, i: usize) -> usize {
        i % self.zones
    }

    /// The hello of agent `i` (no throughput server: a load test orders no
    /// tests).
    pub fn hello(&self, i: usize, instance: u64) -> pb::Hello {
        pb::Hello {
            node: self.name(i),
            // 10.0.0.0/8 holds 16 million: one address each.
            addresses: vec![format!(
                "10.{}.{}.{}",
                (i >> 16) & 255,
                (i >> 8) & 255,
                i & 255
            )],
            zone: format!("zone-{}", self.zone(i)),
            region: "region-1".into(),
            agent_version: format!("loadgen {}", env!("CARGO_PKG_VERSION")),
            window_ms: self.window_ms,
            probe_interval_ms: (self.window_ms / 10).max(1),
            sent_unix_ms: netaware_runtime::clock::now_ms(),
            networks: Vec::new(),
            instance,
            stamp_port: 0,
            throughput_port: 0,
        }
    }

    /// The peers agent `i` reports on: its zone first (the next agents of
    /// its zone, round the fleet), then the next agents of other zones.
    pub fn peers_of(&self, i: usize) -> Vec<usize> {
        let next = (1..self.agents).map(|step| (i + step) % self.agents);
        let same_zone = next.clone().filter(|&j| self.zone(j) == self.zone(i));
        let other_zones = next.filter(|&j| self.zone(j) != self.zone(i));
        same_zone.chain(other_zones).take(self.peers).collect()
    }

    /// Window `seq` of agent `i`, ending at `end_ms`.
    pub fn window(&self, i: usize, peers: &[usize], seq: u64, end_ms: u64) -> pb::Window {
        let probes = 10;
        let entries = peers
            .iter()
            .map(|&j| {
                // A cheap hash: every pair and window a little different.
                let h = (i as u64 * 31 + j as u64 * 17 + seq * 13) % 97;
                let base = if self.zone(i) == self.zone(j) {
                    0.2
                } else {
                    5.0
                };
                let median = base + h as f64 / 1_000.0;
                let lost = u32::from(h == 0);
                pb::PeerWindow {
                    peer: self.name(j),
                    sent: probes,
                    received: probes - lost,
                    rtt_min_ms: median * 0.9,
                    rtt_median_ms: median,
                    rtt_p90_ms: median * 1.1,
                    rtt_p99_ms: median * 1.2,
                    rtt_max_ms: median * 1.3,
                    jitter_ms: median * 0.05,
                    ..pb::PeerWindow::default()
                }
            })
            .collect();
        pb::Window {
            seq,
            start_unix_ms: end_ms.saturating_sub(u64::from(self.window_ms)),
            end_unix_ms: end_ms,
            peers: entries,
            stats: None,
            throughput: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_are_others_of_the_same_zone_first() {
        let fleet = Fleet::new(100, 10, 4, 1_000);
        for i in [0, 37, 99] {
            let peers = fleet.peers_of(i);
            assert_eq!(peers.len(), 10);
            assert!(!peers.contains(&i));
            assert!(peers.iter().all(|&j| fleet.zone(j) == fleet.zone(i)));
            let mut unique = peers.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), peers.len());
        }
        // A zone smaller than the peer count: the rest come from others.
        let fleet = Fleet::new(8, 5, 4, 1_000);
        let peers = fleet.peers_of(0);
        assert_eq!(peers.len(), 5);
        assert_eq!(fleet.zone(peers[0]), fleet.zone(0));
    }

    #[test]
    fn names_and_addresses_are_unique() {
        let fleet = Fleet::new(70_000, 1, 3, 1_000);
        let mut addresses: Vec<String> = [0, 255, 256, 65_535, 65_536, 69_999]
            .iter()
            .map(|&i| fleet.hello(i, 1).addresses[0].clone())
            .collect();
        addresses.sort();
        addresses.dedup();
        assert_eq!(addresses.len(), 6);
        assert_ne!(fleet.name(1), fleet.name(10));
    }

    #[test]
    fn windows_are_valid_figures() {
        let fleet = Fleet::new(10, 9, 2, 1_000);
        let peers = fleet.peers_of(3);
        let window = fleet.window(3, &peers, 7, 50_000);
        assert_eq!(window.peers.len(), 9);
        assert_eq!(window.end_unix_ms - window.start_unix_ms, 1_000);
        for p in &window.peers {
            assert!(p.received <= p.sent);
            assert!(p.rtt_min_ms <= p.rtt_median_ms && p.rtt_median_ms <= p.rtt_max_ms);
        }
    }
}
