//! The collector's state and every change to it, with no I/O: node registry,
//! pair matrix, duplicate check, node stats, and the scored snapshot.
//!
//! The gRPC shells lock one [`CollectorState`] and call these methods with
//! the current time; tests call them directly.

use std::collections::HashMap;

use netaware_core::matrix::PairMatrix;
use netaware_core::placement::PlacementConfig;
use netaware_core::registry::Registry;
use netaware_core::score::ScoreConfig;
use netaware_core::snapshot::ScoredMatrix;
use netaware_core::{NodeInfo, UnixMillis};
use netaware_proto::v1::{Hello, NodeStats, Peer, Window};

use crate::validate::{self, Invalid};

/// How the collector scores and places.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelConfig {
    /// The score model.
    pub score: ScoreConfig,
    /// The placement policy.
    pub placement: PlacementConfig,
    /// Windows kept per pair.
    pub windows_kept: usize,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            score: ScoreConfig::default(),
            placement: PlacementConfig::default(),
            windows_kept: 6,
        }
    }
}

/// What became of a window.
#[derive(Debug, Clone, PartialEq)]
pub enum Ingested {
    /// Entered the matrix.
    Accepted,
    /// Already accepted before (a replay): acknowledged, not applied again.
    Duplicate,
}

/// Where the duplicate check stands for one agent.
#[derive(Debug, Clone, Copy, PartialEq)]
struct SeqMark {
    instance: u64,
    last_seq: u64,
}

/// Everything the collector knows.
#[derive(Debug, Clone)]
pub struct CollectorState {
    config: ModelConfig,
    registry: Registry,
    matrix: PairMatrix,
    seq_marks: HashMap<String, SeqMark>,
    node_stats: HashMap<String, NodeStats>,
    version: u64,
}

impl CollectorState {
    /// An empty state with these inventory nodes.
    pub fn new(config: ModelConfig, inventory: Vec<NodeInfo>) -> Self {
        let mut registry = Registry::new();
        for node in inventory {
            registry.add_inventory(node);
        }
        Self {
            config,
            matrix: PairMatrix::new(config.windows_kept),
            registry,
            seq_marks: HashMap::new(),
            node_stats: HashMap::new(),
            version: 1,
        }
    }

    /// The model configuration.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// Increases with every applied change.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Registers an agent. Returns the node name and whether membership
    /// changed (so every session must get a new peer set).
    pub fn hello(&mut self, hello: &Hello, now: UnixMillis) -> Result<(String, bool), Invalid> {
        let (info, window_ms) = validate::hello(hello)?;
        let name = info.name.clone();
        let changed = self
            .registry
            .agent_hello(info, window_ms, now)
            .map_err(|err| Invalid(err.to_string()))?;
        let mark = self.seq_marks.entry(name.clone()).or_insert(SeqMark {
            instance: hello.instance,
            last_seq: 0,
        });
        if mark.instance != hello.instance {
            *mark = SeqMark {
                instance: hello.instance,
                last_seq: 0,
            };
        }
        self.version += 1;
        Ok((name, changed))
    }

    /// The peers that `node` must probe: every other node.
    pub fn peer_set(&self, node: &str) -> Vec<Peer> {
        self.registry
            .nodes()
            .filter(|entry| entry.info.name != node)
            .map(|entry| Peer {
                name: entry.info.name.clone(),
                address: entry.info.address.clone(),
                zone: entry.info.zone.clone(),
                region: entry.info.region.clone(),
            })
            .collect()
    }

    /// Checks a window from `node` and applies it whole, or refuses it
    /// whole and changes nothing.
    pub fn ingest(
        &mut self,
        node: &str,
        window: &Window,
        now: UnixMillis,
    ) -> Result<Ingested, Invalid> {
        let Some(mark) = self.seq_marks.get(node).copied() else {
            return Err(Invalid(format!("unknown node {node:?}: no hello")));
        };
        let pairs = validate::window(node, window, &self.registry, now)?;
        if window.seq <= mark.last_seq {
            return Ok(Ingested::Duplicate);
        }
        for (peer, pair_window, one_way) in pairs {
            self.matrix.record(node, &peer, pair_window);
            if let Some(one_way) = one_way {
                // The node saw the peer's requests: loss from peer to node.
                self.matrix.record_one_way(&peer, node, one_way);
            }
        }
        if let Some(stats) = &window.stats {
            self.node_stats.insert(node.to_owned(), stats.clone());
        }
        self.seq_marks.insert(
            node.to_owned(),
            SeqMark {
                last_seq: window.seq,
                ..mark
            },
        );
        self.registry.note_report(node, now);
        self.version += 1;
        Ok(Ingested::Accepted)
    }

    /// The scored matrix as of `now`.
    pub fn snapshot(&self, now: UnixMillis) -> ScoredMatrix {
        ScoredMatrix::build(&self.registry, &self.matrix, &self.config.score, now)
    }

    /// The last node stats of a node.
    pub fn node_stats(&self, node: &str) -> Option<&NodeStats> {
        self.node_stats.get(node)
    }

    /// Number of known nodes.
    pub fn node_count(&self) -> usize {
        self.registry.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netaware_proto::v1::PeerWindow;

    fn hello(node: &str, instance: u64) -> Hello {
        Hello {
            node: node.into(),
            addresses: vec!["127.0.0.2".into()],
            zone: "a".into(),
            region: String::new(),
            agent_version: "test".into(),
            window_ms: 1_000,
            probe_interval_ms: 100,
            instance,
        }
    }

    fn window(seq: u64, end: u64, received: u32) -> Window {
        Window {
            seq,
            start_unix_ms: end - 1_000,
            end_unix_ms: end,
            peers: vec![PeerWindow {
                peer: "n2".into(),
                sent: 10,
                received,
                rtt_min_ms: 1.0,
                rtt_median_ms: 1.0,
                rtt_p90_ms: 1.0,
                rtt_p99_ms: 1.0,
                rtt_max_ms: 1.0,
                jitter_ms: 0.0,
                ..PeerWindow::default()
            }],
            stats: None,
        }
    }

    fn state() -> CollectorState {
        let mut state = CollectorState::new(ModelConfig::default(), Vec::new());
        state.hello(&hello("n1", 7), 0).unwrap();
        state.hello(&hello("n2", 8), 0).unwrap();
        state
    }

    fn loss(state: &CollectorState, now: u64) -> Option<f64> {
        let m = state.snapshot(now);
        m.pair(m.index_of("n1").unwrap(), m.index_of("n2").unwrap())
            .unwrap()
            .summary
            .loss_ratio
    }

    #[test]
    fn each_window_counts_once_per_agent_instance() {
        let mut state = state();
        assert_eq!(
            state.ingest("n1", &window(1, 1_000, 10), 1_000),
            Ok(Ingested::Accepted)
        );
        assert_eq!(
            state.ingest("n1", &window(1, 1_000, 0), 1_000),
            Ok(Ingested::Duplicate)
        );
        assert_eq!(loss(&state, 1_000), Some(0.0));
        // A restarted agent numbers from 1 again.
        state.hello(&hello("n1", 9), 1_500).unwrap();
        assert_eq!(
            state.ingest("n1", &window(1, 2_000, 0), 2_000),
            Ok(Ingested::Accepted)
        );
        assert_eq!(loss(&state, 2_000), Some(0.5));
        // The same instance reconnecting keeps its mark.
        state.hello(&hello("n1", 9), 2_500).unwrap();
        assert_eq!(
            state.ingest("n1", &window(1, 2_000, 0), 2_500),
            Ok(Ingested::Duplicate)
        );
    }

    #[test]
    fn refused_windows_change_nothing() {
        let mut state = state();
        state.ingest("n1", &window(1, 1_000, 10), 1_000).unwrap();
        let version = state.version();
        let mut bad = window(2, 2_000, 3);
        bad.peers.push(PeerWindow {
            peer: "n2".into(),
            ..bad.peers[0].clone()
        });
        assert!(state.ingest("n1", &bad, 2_000).is_err());
        assert!(state.ingest("ghost", &window(2, 2_000, 3), 2_000).is_err());
        assert_eq!(state.version(), version);
        assert_eq!(loss(&state, 2_000), Some(0.0));
        // The refused seq was not marked as seen.
        assert_eq!(
            state.ingest("n1", &window(2, 2_000, 0), 2_000),
            Ok(Ingested::Accepted)
        );
    }

    #[test]
    fn peer_sets_name_every_other_node() {
        let mut state = state();
        state.hello(&hello("n3", 1), 0).unwrap();
        let names: Vec<String> = state.peer_set("n2").into_iter().map(|p| p.name).collect();
        assert_eq!(names, ["n1", "n3"]);
    }
}
