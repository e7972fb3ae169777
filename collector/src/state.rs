//! The collector's state and every change to it, with no I/O: node registry,
//! pair matrix, duplicate check, node stats, the throughput test plan and
//! the tests issued, and the scored snapshot.
//!
//! The gRPC shells lock one [`CollectorState`] and call these methods with
//! the current time; tests call them directly.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use netaware_core::coordinates::Coordinates;
use netaware_core::matrix::{PairMatrix, PairReadings};
use netaware_core::network::Network;
use netaware_core::registry::{AgentFacts, NodeEntry, Registry};
use netaware_core::scored::ScoredMatrix;
use netaware_core::throughput_plan::{PlannedTest, Planner};
use netaware_core::{NodeKind, UnixMillis};
use netaware_proto::convert;
use netaware_proto::v1::{Hello, NodeStats, Peer, ThroughputOrder, Window, throughput_order};
use prost::Message;

use crate::config::{ModelConfig, ThroughputConfig};
use crate::inventory::InventoryNode;
use crate::members::Members;
use crate::saved::{Encoded, WindowChanges};
use crate::seq_marks::NodeMarks;
use crate::validate::{self, Invalid};

mod saving;

pub use saving::{CheckpointCut, Restored, Skipped};

/// What a snapshot is scored from, copied out of the state.
#[derive(Debug, Clone)]
pub struct SnapshotInputs {
    registry: Registry,
    readings: PairReadings,
    /// The readings of every other network, by name.
    other_readings: Vec<(Network, PairReadings)>,
    /// The model it is scored with.
    pub config: ModelConfig,
    /// The state's version when copied.
    pub version: u64,
}

impl SnapshotInputs {
    /// The scored matrix as of `now`, with the nodes' network coordinates.
    pub fn score(&self, coordinates: &Coordinates, now: UnixMillis) -> ScoredMatrix {
        ScoredMatrix::score(
            &self.registry,
            &self.readings,
            &self.config.score,
            coordinates,
            now,
        )
    }

    /// The scored matrix of every network but the primary, as of `now`:
    /// measured pairs only (coordinates are the primary network's).
    pub fn score_other_networks(&self, now: UnixMillis) -> BTreeMap<Network, ScoredMatrix> {
        self.other_readings
            .iter()
            .map(|(network, readings)| {
                let scored = ScoredMatrix::score(
                    &self.registry,
                    readings,
                    &self.config.score,
                    &Coordinates::default(),
                    now,
                );
                (network.clone(), scored)
            })
            .collect()
    }
}

/// How long an issued test waits for its result (results travel inside
/// windows, which an agent may replay after an outage).
const ISSUED_KEPT_MS: u64 = 15 * 60_000;

/// A test the collector ordered and whose result it waits for.
#[derive(Debug, Clone, PartialEq)]
struct IssuedTest {
    client: String,
    server: String,
    network: Network,
    end: UnixMillis,
}

/// What became of throughput results and orders, counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ThroughputCounts {
    /// Tests ordered.
    pub ordered: u64,
    /// Results that entered the matrix.
    pub measured: u64,
    /// Results of tests that failed.
    pub failed: u64,
    /// Results for tests the collector did not issue to that pair (or
    /// forgot, after a restart): not applied.
    pub ignored: u64,
}

/// What became of a window.
#[derive(Debug, Clone, PartialEq)]
pub enum Ingested {
    /// Entered the matrix.
    Accepted,
    /// Already accepted before (a replay): acknowledged, not applied again.
    Duplicate,
}

/// Everything the collector knows.
#[derive(Debug, Clone)]
pub struct CollectorState {
    config: ModelConfig,
    registry: Registry,
    matrix: PairMatrix,
    /// The matrix of every network but the primary.
    other_matrices: BTreeMap<Network, PairMatrix>,
    /// Each node's addresses on its networks other than the primary.
    other_networks: HashMap<String, Vec<(Network, String)>>,
    seq_marks: HashMap<String, NodeMarks>,
    node_stats: HashMap<String, NodeStats>,
    ports: HashMap<String, AgentPorts>,
    /// One test planner per network that throughput is tested on (the
    /// primary and every named network: each is its own NIC and fabric,
    /// with a budget of its own), made when the network first has nodes.
    planners: BTreeMap<Network, Planner>,
    /// The last test id given out: ids are the collector's, unique across
    /// the networks' planners.
    last_test_id: u64,
    issued: HashMap<u64, IssuedTest>,
    throughput_counts: ThroughputCounts,
    version: u64,
    /// Each agent's last hello, as it sent it (protobuf): what a saved
    /// state restores it from.
    hellos: HashMap<String, Vec<u8>>,
    /// What changed since the last save took it, while the collector
    /// saves (see [`saving`]).
    journal: Option<Encoded>,
    /// Peers left out of accepted windows as unknown.
    unknown_peers: u64,
}

/// Where a node answers its peers: an agent's throughput server (which
/// TCP probes also reach) and its STAMP reflector, or an inventory node's
/// reflector; 0 for none.
#[derive(Debug, Clone, Copy, Default)]
struct AgentPorts {
    throughput: u32,
    stamp: u32,
}

impl CollectorState {
    /// The ports `node` said in its hello, or its inventory entry gives.
    fn ports_of(&self, node: &str) -> AgentPorts {
        self.ports.get(node).copied().unwrap_or_default()
    }

    /// An empty state with these inventory nodes.
    pub fn new(config: ModelConfig, inventory: Vec<InventoryNode>) -> Self {
        let mut registry = Registry::new();
        let mut ports = HashMap::new();
        for node in inventory {
            if let Some(port) = node.stamp_port {
                let stamp = u32::from(port);
                ports.insert(
                    node.info.name.clone(),
                    AgentPorts {
                        throughput: 0,
                        stamp,
                    },
                );
            }
            registry.add_inventory(node.info);
        }
        Self {
            config,
            matrix: PairMatrix::new(config.windows_kept),
            other_matrices: BTreeMap::new(),
            other_networks: HashMap::new(),
            registry,
            seq_marks: HashMap::new(),
            node_stats: HashMap::new(),
            ports,
            planners: BTreeMap::new(),
            last_test_id: 0,
            issued: HashMap::new(),
            throughput_counts: ThroughputCounts::default(),
            version: 1,
            hellos: HashMap::new(),
            journal: None,
            unknown_peers: 0,
        }
    }

    /// The pair matrix.
    pub fn matrix(&self) -> &PairMatrix {
        &self.matrix
    }

    /// Whether `node` is registered.
    pub fn knows(&self, node: &str) -> bool {
        self.registry.get(node).is_some()
    }

    /// The sequence number of the last window accepted from `node`'s
    /// current agent instance.
    pub fn last_seq(&self, node: &str) -> Option<u64> {
        self.seq_marks.get(node).map(NodeMarks::last_seq)
    }

    /// Whether agent `instance` speaks for `node` now: it said hello last.
    /// A session of another instance has been replaced and must end, its
    /// windows not taken (they would count under the newer one's mark).
    pub fn speaks_for(&self, node: &str, instance: u64) -> bool {
        self.seq_marks
            .get(node)
            .is_some_and(|marks| marks.current() == instance)
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
        let checked = validate::hello(hello)?;
        let name = checked.info.name.clone();
        let changed = self
            .registry
            .agent_hello(checked.info, checked.window_ms, now)
            .map_err(|err| Invalid(err.to_string()))?;
        self.seq_marks
            .entry(name.clone())
            .and_modify(|marks| marks.hello(hello.instance))
            .or_insert_with(|| NodeMarks::new(hello.instance, 0));
        self.ports.insert(
            name.clone(),
            AgentPorts {
                throughput: hello.throughput_port,
                stamp: hello.stamp_port,
            },
        );
        let others: Vec<(Network, String)> = checked
            .other_networks
            .into_iter()
            .map(|(network, address)| (network, address.to_string()))
            .collect();
        let clock_offset_ms = (hello.sent_unix_ms > 0).then(|| {
            let offset = i128::from(hello.sent_unix_ms) - i128::from(now);
            i64::try_from(offset).unwrap_or(if offset < 0 { i64::MIN } else { i64::MAX })
        });
        self.registry.note_agent(
            &name,
            AgentFacts {
                version: hello.agent_version.clone(),
                clock_offset_ms,
            },
        );
        let networks_changed = self.other_networks.get(&name) != Some(&others);
        self.other_networks.insert(name.clone(), others);
        self.hellos.insert(name.clone(), hello.encode_to_vec());
        self.journal_hello(&name, now);
        self.version += 1;
        Ok((name, changed || networks_changed))
    }

    /// Whether `node` is on `network`.
    fn on_network(&self, node: &str, network: &Network) -> bool {
        network.is_primary()
            || self
                .other_networks
                .get(node)
                .is_some_and(|others| others.iter().any(|(n, _)| n == network))
    }

    /// `node`'s address on `network`, if it is on it.
    fn address_on<'a>(&'a self, node: &'a NodeEntry, network: &Network) -> Option<&'a str> {
        if network.is_primary() {
            return Some(&node.info.address);
        }
        let others = self.other_networks.get(&node.info.name)?;
        others
            .iter()
            .find(|(n, _)| n == network)
            .map(|(_, address)| address.as_str())
    }

    /// The matrix that `network`'s figures go to, made on its first figure.
    fn matrix_of_mut(&mut self, network: &Network) -> &mut PairMatrix {
        if network.is_primary() {
            return &mut self.matrix;
        }
        let windows_kept = self.config.windows_kept;
        self.other_matrices
            .entry(network.clone())
            .or_insert_with(|| PairMatrix::new(windows_kept))
    }

    /// The matrix of `network`, if anything was measured on it.
    pub fn matrix_of(&self, network: &Network) -> Option<&PairMatrix> {
        if network.is_primary() {
            Some(&self.matrix)
        } else {
            self.other_matrices.get(network)
        }
    }

    /// Every known node as peers are told of it, at membership `version`
    /// (see [`Members`]).
    pub fn members(&self, version: u64) -> Members {
        let peer = |entry: &netaware_core::registry::NodeEntry| Peer {
            name: entry.info.name.clone(),
            address: entry.info.address.clone(),
            zone: entry.info.zone.clone(),
            region: entry.info.region.clone(),
            stamp_port: self.ports_of(&entry.info.name).stamp,
            tcp_port: self.ports_of(&entry.info.name).throughput,
            network: String::new(),
        };
        let nodes: Vec<Peer> = self.registry.nodes().map(peer).collect();
        let other_networks = self
            .registry
            .nodes()
            .map(|entry| {
                let others = self.other_networks.get(&entry.info.name);
                others
                    .into_iter()
                    .flatten()
                    .map(|(network, address)| Peer {
                        address: address.clone(),
                        network: convert::network_to_wire(network),
                        ..peer(entry)
                    })
                    .collect()
            })
            .collect();
        Members::new(
            version,
            self.config.max_peers,
            self.config.peer_rotation,
            nodes,
        )
        .with_other_networks(other_networks)
    }

    /// The peers that `node` must probe in the first rotation step (see
    /// [`Members::peer_set`]).
    pub fn peer_set(&self, node: &str) -> Vec<Peer> {
        self.members(0).peer_set(node, 0)
    }

    /// Checks a window from `node` and applies it whole, or refuses it
    /// whole and changes nothing.
    pub fn ingest(
        &mut self,
        node: &str,
        window: &Window,
        now: UnixMillis,
    ) -> Result<Ingested, Invalid> {
        let Some(last_seq) = self.last_seq(node) else {
            return Err(Invalid(format!("unknown node {node:?}: no hello")));
        };
        let validate::CheckedWindow {
            pairs,
            unknown_peers,
        } = validate::window(node, window, &self.registry, now)?;
        if let Some(off) = pairs
            .iter()
            .find(|p| !self.on_network(node, &p.network) || !self.on_network(&p.peer, &p.network))
        {
            return Err(Invalid(format!(
                "peer {:?}: {node} and it are not both on network {}",
                off.peer, off.network
            )));
        }
        let results = validate::throughput_results(node, window, &self.registry, now)?;
        if window.seq <= last_seq {
            return Ok(Ingested::Duplicate);
        }
        self.unknown_peers += unknown_peers;
        let mut changes = self.journal.is_some().then(WindowChanges::default);
        for result in results {
            let ordered = self
                .issued
                .get(&result.test_id)
                .is_some_and(|t| t.client == node && t.server == result.peer);
            let Some(test) = ordered
                .then(|| self.issued.remove(&result.test_id))
                .flatten()
            else {
                self.throughput_counts.ignored += 1;
                continue;
            };
            match result.outcome {
                Ok(throughput) => {
                    self.matrix_of_mut(&test.network).record_throughput(
                        node,
                        &result.peer,
                        throughput,
                    );
                    if let Some(changes) = &mut changes {
                        changes.throughput(&test.network, &result.peer, &throughput);
                    }
                    self.throughput_counts.measured += 1;
                }
                Err(_) => self.throughput_counts.failed += 1,
            }
        }
        for checked in pairs {
            if let Some(changes) = &mut changes {
                changes.window(&checked.network, &checked.peer, &checked.pair);
            }
            if !checked.network.is_primary() {
                self.matrix_of_mut(&checked.network)
                    .record(node, &checked.peer, checked.pair);
                continue;
            }
            self.matrix.record(node, &checked.peer, checked.pair);
            if let Some(one_way) = checked.one_way {
                // The node saw the peer's requests: loss from peer to node.
                self.matrix.record_one_way(&checked.peer, node, one_way);
                if let Some(changes) = &mut changes {
                    changes.arrived(&checked.network, &checked.peer, &one_way);
                }
            }
        }
        if let Some(stats) = &window.stats {
            self.node_stats.insert(node.to_owned(), stats.clone());
        }
        if let Some(marks) = self.seq_marks.get_mut(node) {
            marks.accepted(window.seq);
        }
        self.registry.note_report(node, now);
        if let Some(changes) = changes {
            let instance = self.seq_marks.get(node).map_or(0, NodeMarks::current);
            let times = (window.end_unix_ms, now);
            self.note_in_journal(|| changes.into_record(node, instance, window.seq, times));
        }
        self.version += 1;
        Ok(Ingested::Accepted)
    }

    /// Plans the throughput tests to start now among the fresh agents that
    /// run a throughput server, on each network they share, and returns the
    /// orders: (node, order), two per test. `token` draws each test's
    /// random token.
    ///
    /// Throughput is tested on the primary and on every named network (a
    /// rail is a NIC and a fabric of its own), each with its own planner
    /// and budget; not on a dual-stack node's other family, which crosses
    /// the primary's NIC and links.
    pub fn plan_tests(
        &mut self,
        now: UnixMillis,
        mut token: impl FnMut() -> [u8; 16],
    ) -> Vec<(String, ThroughputOrder)> {
        let Some(config) = self.config.throughput else {
            return Vec::new();
        };
        self.issued
            .retain(|_, test| test.end.saturating_add(ISSUED_KEPT_MS) > now);
        let mut orders = Vec::new();
        for network in self.tested_networks() {
            let planned = {
                let testable: Vec<(&str, &str)> = self
                    .registry
                    .nodes()
                    .filter(|entry| {
                        entry.info.kind == NodeKind::Agent
                            && !entry.agent_stale(now)
                            && self.ports_of(&entry.info.name).throughput > 0
                            && self.address_on(entry, &network).is_some()
                    })
                    .map(|e| (e.info.name.as_str(), e.info.zone.as_str()))
                    .collect();
                let planner = self.planners.entry(network.clone()).or_insert_with(|| {
                    Planner::new(config.plan).expect("a ThroughputConfig is validated")
                });
                planner.set_nodes(testable, now);
                planner.plan(now)
            };
            for test in planned {
                if let Some(pair) = self.order_pair(&network, &test, &config, token()) {
                    orders.extend(pair);
                }
            }
        }
        orders
    }

    /// The networks throughput is tested on: the primary, then the named
    /// networks some node is on.
    fn tested_networks(&self) -> Vec<Network> {
        let named: BTreeSet<&Network> = self
            .other_networks
            .values()
            .flatten()
            .map(|(network, _)| network)
            .filter(|network| network.is_named())
            .collect();
        std::iter::once(Network::primary())
            .chain(named.into_iter().cloned())
            .collect()
    }

    /// The server's and the client's orders for `test` on `network`
    /// (server first, so that it holds the token before the client
    /// connects), recorded as issued; `None` if an end is gone.
    fn order_pair(
        &mut self,
        network: &Network,
        test: &PlannedTest,
        config: &ThroughputConfig,
        token: [u8; 16],
    ) -> Option<[(String, ThroughputOrder); 2]> {
        let client = self.registry.get(&test.client)?;
        let server = self.registry.get(&test.server)?;
        let client_address = self.address_on(client, network)?.to_owned();
        let server_address = self.address_on(server, network)?.to_owned();
        self.last_test_id += 1;
        let order = ThroughputOrder {
            test_id: self.last_test_id,
            token: token.to_vec(),
            start_unix_ms: test.start,
            expires_unix_ms: test.end,
            omit_ms: config.omit_ms,
            duration_ms: config.duration_ms,
            streams: config.streams,
            network: convert::network_to_wire(network),
            ..ThroughputOrder::default()
        };
        let client_order = ThroughputOrder {
            role: throughput_order::Role::Client.into(),
            peer: test.server.clone(),
            peer_address: server_address,
            port: self.ports_of(&test.server).throughput,
            ..order.clone()
        };
        let server_order = ThroughputOrder {
            role: throughput_order::Role::Server.into(),
            peer: test.client.clone(),
            peer_address: client_address,
            ..order
        };
        self.issued.insert(
            self.last_test_id,
            IssuedTest {
                client: test.client.clone(),
                server: test.server.clone(),
                network: network.clone(),
                end: test.end,
            },
        );
        self.throughput_counts.ordered += 1;
        Some([
            (test.server.clone(), server_order),
            (test.client.clone(), client_order),
        ])
    }

    /// Peers left out of accepted windows because the collector did not
    /// know them.
    pub fn unknown_peers(&self) -> u64 {
        self.unknown_peers
    }

    /// What became of throughput tests so far.
    pub fn throughput_counts(&self) -> ThroughputCounts {
        self.throughput_counts
    }

    /// The scored matrix as of `now`, without coordinates (those are the
    /// collector's, not the state's: see `crate::snapshots`).
    pub fn snapshot(&self, now: UnixMillis) -> ScoredMatrix {
        self.snapshot_inputs().score(&Coordinates::default(), now)
    }

    /// A copy of what a snapshot is scored from: taken under the state's
    /// lock, scored after it is released ([`SnapshotInputs::score`]), so
    /// that ingest never waits for the scoring.
    pub fn snapshot_inputs(&self) -> SnapshotInputs {
        SnapshotInputs {
            registry: self.registry.clone(),
            readings: self.matrix.readings(),
            other_readings: self
                .other_matrices
                .iter()
                .map(|(network, matrix)| (network.clone(), matrix.readings()))
                .collect(),
            config: self.config,
            version: self.version,
        }
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
    use netaware_proto::v1::{PeerWindow, ThroughputResult};

    /// The testkit's hello in zone a, with a throughput server.
    fn hello(node: &str, instance: u64) -> Hello {
        Hello {
            zone: "a".into(),
            instance,
            throughput_port: 7471,
            ..netaware_testkit::hello(node)
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
            throughput: Vec::new(),
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
        assert!(state.speaks_for("n1", 9) && !state.speaks_for("n1", 7));
    }

    #[test]
    fn two_agents_of_one_node_never_take_each_other_s_windows_for_duplicates() {
        let mut state = state();
        // The old agent has sent far; a high number from it...
        state
            .ingest("n1", &window(u64::MAX, 1_000, 10), 1_000)
            .unwrap();
        // ...does not hold back the new one, which counts from 1.
        state.hello(&hello("n1", 9), 1_500).unwrap();
        assert_eq!(
            state.ingest("n1", &window(1, 2_000, 10), 2_000),
            Ok(Ingested::Accepted)
        );
        // The old one comes back: its own mark, so its replay is known.
        state.hello(&hello("n1", 7), 2_500).unwrap();
        assert_eq!(
            state.ingest("n1", &window(u64::MAX, 1_000, 10), 2_500),
            Ok(Ingested::Duplicate)
        );
        state.hello(&hello("n1", 9), 3_000).unwrap();
        assert_eq!(
            state.ingest("n1", &window(2, 3_000, 10), 3_000),
            Ok(Ingested::Accepted)
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

    #[test]
    fn plans_tests_and_takes_only_the_results_it_ordered() {
        let mut state = CollectorState::new(ModelConfig::default(), Vec::new());
        state.hello(&hello("n1", 1), 1_000).unwrap();
        state.hello(&hello("n2", 2), 1_000).unwrap();
        let orders = state.plan_tests(1_000, || [7; 16]);
        assert_eq!(orders.len(), 2);
        let (server_node, server) = &orders[0];
        let (client_node, client) = &orders[1];
        assert_eq!((server_node.as_str(), client_node.as_str()), ("n2", "n1"));
        assert_eq!(server.role(), throughput_order::Role::Server);
        assert_eq!(client.role(), throughput_order::Role::Client);
        assert_eq!((client.peer.as_str(), client.port), ("n2", 7471));
        assert_eq!(server.peer, "n1");
        assert_eq!(client.token, vec![7; 16]);
        assert_eq!(client.test_id, server.test_id);
        assert_eq!(client.start_unix_ms, 2_000);
        // Both nodes are busy and within their budget: nothing more.
        assert!(state.plan_tests(1_500, || [8; 16]).is_empty());

        let result = |test_id: u64, peer: &str, goodput: f64| ThroughputResult {
            test_id,
            peer: peer.into(),
            goodput_bps: goodput,
            bytes: (goodput / 8.0 * 2.0) as u64,
            measured_ms: 2_000,
            end_unix_ms: 5_000,
            streams: 1,
            ..ThroughputResult::default()
        };
        let mut with = window(1, 5_000, 10);
        with.throughput = vec![result(client.test_id, "n2", 4e8), result(999, "n2", 9e9)];
        assert_eq!(state.ingest("n1", &with, 5_000), Ok(Ingested::Accepted));
        let snapshot = state.snapshot(5_000);
        let pair = snapshot
            .pair(
                snapshot.index_of("n1").unwrap(),
                snapshot.index_of("n2").unwrap(),
            )
            .unwrap();
        assert_eq!(pair.summary.throughput.map(|t| t.bps), Some(4e8));
        let counts = state.throughput_counts();
        assert_eq!((counts.ordered, counts.measured, counts.ignored), (1, 1, 1));
        // A result sent again (a replayed window of another number) is not
        // applied twice.
        let mut again = window(2, 6_000, 10);
        again.throughput = vec![result(client.test_id, "n2", 1e6)];
        assert_eq!(state.ingest("n1", &again, 6_000), Ok(Ingested::Accepted));
        assert_eq!(state.throughput_counts().ignored, 2);
        // Nonsense refuses the whole window.
        let mut bad = window(3, 7_000, 10);
        bad.throughput = vec![result(client.test_id, "n2", f64::NAN)];
        assert!(state.ingest("n1", &bad, 7_000).is_err());
    }

    #[test]
    fn each_named_network_is_tested_over_its_own_addresses_into_its_own_matrix() {
        use netaware_proto::v1::NetworkAddress;
        let on_rail = |node: &str, instance: u64, rail_address: &str| Hello {
            networks: vec![NetworkAddress {
                network: "rail-0".into(),
                address: rail_address.into(),
            }],
            ..hello(node, instance)
        };
        // All of each node's time, so that every pair comes round soon.
        let config = ModelConfig {
            throughput: Some(ThroughputConfig::new(1.0, 500, 2_000, 1, false, None).unwrap()),
            ..ModelConfig::default()
        };
        let mut state = CollectorState::new(config, Vec::new());
        // n3 is on the primary network only: no rail test involves it.
        let hellos = [
            on_rail("n1", 1, "172.16.0.1"),
            on_rail("n2", 2, "172.16.0.2"),
            hello("n3", 3),
        ];
        let mut orders = Vec::new();
        for now in (1_000..40_000).step_by(250) {
            for hello in &hellos {
                state.hello(hello, now).unwrap();
            }
            orders.extend(state.plan_tests(now, || [5; 16]));
        }
        let on = |network: &str| -> Vec<&ThroughputOrder> {
            orders
                .iter()
                .map(|(_, o)| o)
                .filter(|o| o.network == network)
                .collect()
        };
        let rail = on("rail-0");
        assert!(!on("primary").is_empty() && !rail.is_empty());
        assert!(on("primary").iter().any(|o| o.peer == "n3"));
        for order in &rail {
            assert!(order.peer != "n3", "{order:?}");
            assert!(order.peer_address.starts_with("172.16.0."), "{order:?}");
        }
        // Every test id is given once, whatever its network.
        let mut ids: Vec<u64> = orders
            .iter()
            .filter(|(_, o)| o.role() == throughput_order::Role::Client)
            .map(|(_, o)| o.test_id)
            .collect();
        let count = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), count);

        // A rail test's result goes to the rail's matrix, not the primary's.
        let client = rail
            .iter()
            .find(|o| o.role() == throughput_order::Role::Client && o.peer == "n2")
            .expect("n1 tests n2 on rail-0");
        let mut with = window(1, 41_000, 10);
        with.throughput = vec![ThroughputResult {
            test_id: client.test_id,
            peer: "n2".into(),
            goodput_bps: 5e7,
            bytes: 12_500_000,
            measured_ms: 2_000,
            end_unix_ms: 41_000,
            streams: 1,
            ..ThroughputResult::default()
        }];
        assert_eq!(state.ingest("n1", &with, 41_000), Ok(Ingested::Accepted));
        let rail_network = Network::parse("rail-0").unwrap();
        let goodput = |network: &Network| {
            state
                .matrix_of(network)
                .map(|m| m.summary("n1", "n2").throughput.map(|t| t.bps))
        };
        assert_eq!(goodput(&rail_network), Some(Some(5e7)));
        assert_ne!(goodput(&Network::primary()), Some(Some(5e7)));
    }
}
