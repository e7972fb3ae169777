//! The state and its saved form ([`crate::saved`]): what a save takes from
//! the state, and how saved records are applied back to a new one.
//!
//! Pure, like the rest of the state. While the collector saves, every
//! accepted hello and window leaves a [`Record`] in the state's journal,
//! which each save takes whole ([`CollectorState::take_journal`]: a swap,
//! never a copy of the state). A checkpoint starts from a
//! [`CheckpointCut`] (the nodes and their marks at one instant) and then
//! copies the pairs a slice at a time ([`CollectorState::saved_pairs`]), so
//! the lock is held for a slice, never for the whole matrix. The slices
//! are read after the cut and may hold windows that the next journal holds
//! too: a pair keeps one window per end, so restoring both changes nothing.

use std::collections::HashMap;

use netaware_core::UnixMillis;
use netaware_core::matrix::PairMatrix;
use netaware_core::network::Network;
use netaware_proto::v1::Hello;
use prost::Message;

use super::CollectorState;
use crate::config::ModelConfig;
use crate::inventory::InventoryNode;
use crate::saved::{AcceptedWindow, Encoded, NetworkPairs, Record, SavedNode, SavedPair};

/// What a checkpoint begins from, taken under the lock at one instant.
#[derive(Debug)]
pub struct CheckpointCut {
    /// Every agent's node, its mark as of the cut.
    pub nodes: Vec<SavedNode>,
    /// The changes made before the cut: the end of the previous journal.
    pub before: Encoded,
    /// The networks with pairs, the primary first.
    pub networks: Vec<Network>,
}

/// Saved records that could not be restored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Nodes whose hello is refused now.
    pub nodes: u64,
    /// Pairs with a bad figure, an unknown end or an unknown network.
    pub pairs: u64,
    /// Windows of nodes not restored.
    pub windows: u64,
}

/// A state rebuilt from saved records, one record at a time.
#[derive(Debug)]
pub struct Restored {
    /// The state so far.
    pub state: CollectorState,
    /// Windows accepted from each node over the collector's lifetimes.
    pub accepted: HashMap<String, u64>,
    /// What was left out.
    pub skipped: Skipped,
    /// Records applied.
    pub records: u64,
}

impl CollectorState {
    /// From now on, every accepted hello and window is kept for the next
    /// save (until [`take_journal`](Self::take_journal) takes it).
    pub fn start_journal(&mut self) {
        self.journal.get_or_insert_with(Encoded::default);
    }

    /// The changes since the last call, for a save to write.
    pub fn take_journal(&mut self) -> Encoded {
        self.journal
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Adds `record` to the journal, if the collector saves.
    pub(super) fn note_in_journal(&mut self, record: impl FnOnce() -> Record) {
        if let Some(journal) = &mut self.journal {
            journal.push(&record());
        }
    }

    /// Notes `name`'s hello in the journal.
    pub(super) fn journal_hello(&mut self, name: &str, now: UnixMillis) {
        if self.journal.is_none() {
            return;
        }
        if let Some(node) = self.saved_node(name, now, None) {
            self.note_in_journal(|| Record::Node(node));
        }
    }

    fn saved_node(
        &self,
        name: &str,
        last_seen: UnixMillis,
        accepted: Option<u64>,
    ) -> Option<SavedNode> {
        let marks = self.seq_marks.get(name)?;
        Some(SavedNode {
            name: name.to_owned(),
            instance: marks.current(),
            hello: self.hellos.get(name)?.clone(),
            last_seq: marks.last_seq(),
            last_seen,
            accepted,
        })
    }

    /// The start of a checkpoint: every agent's node as of now (with
    /// `accepted` windows each, the shell's count), and the journal so far.
    pub fn checkpoint_cut(&mut self, accepted: impl Fn(&str) -> u64) -> CheckpointCut {
        let nodes = self
            .registry
            .nodes()
            .filter_map(|entry| {
                let name = &entry.info.name;
                let last_seen = entry.last_seen.unwrap_or(0);
                self.saved_node(name, last_seen, Some(accepted(name)))
            })
            .collect();
        let networks = std::iter::once(Network::primary())
            .chain(self.other_matrices.keys().cloned())
            .collect();
        CheckpointCut {
            nodes,
            before: self.take_journal(),
            networks,
        }
    }

    /// At most `count` kept pairs of `network` from position `from`, and
    /// the matrix's removal count (positions move when it changes).
    pub fn saved_pairs(
        &self,
        network: &Network,
        from: usize,
        count: usize,
    ) -> (Vec<SavedPair>, u64) {
        match self.matrix_of(network) {
            Some(matrix) => (
                matrix.kept_slice(from, count).map(SavedPair::of).collect(),
                matrix.removals(),
            ),
            None => (Vec::new(), 0),
        }
    }

    /// Each agent's current instance and the sequence number of its last
    /// accepted window: (node, instance, last_seq).
    pub fn agent_marks(&self) -> Vec<(String, u64, u64)> {
        self.seq_marks
            .iter()
            .map(|(node, marks)| (node.clone(), marks.current(), marks.last_seq()))
            .collect()
    }
}

impl crate::saved::Apply for Restored {
    fn apply(&mut self, record: &Record) {
        Restored::apply(self, record);
    }
}

impl Restored {
    /// An empty state to apply records to.
    pub fn new(config: ModelConfig, inventory: Vec<InventoryNode>) -> Self {
        Self {
            state: CollectorState::new(config, inventory),
            accepted: HashMap::new(),
            skipped: Skipped::default(),
            records: 0,
        }
    }

    /// Applies one saved record, every figure checked as if it came from
    /// the network; what fails a check is left out and counted.
    pub fn apply(&mut self, record: &Record) {
        self.records += 1;
        match record {
            Record::Node(node) => self.node(node),
            Record::Pairs(pairs) => self.pairs(pairs),
            Record::Window(window) => {
                self.window(&window.accepted, window.networks.iter().cloned());
            }
            Record::Taken(window) => self.window(&window.accepted, window.pairs()),
            Record::End(_) => {}
        }
    }

    fn node(&mut self, node: &SavedNode) {
        let hello = Hello::decode(node.hello.as_slice())
            .ok()
            .filter(|hello| hello.node == node.name && hello.instance == node.instance);
        let Some(hello) = hello else {
            self.skipped.nodes += 1;
            return;
        };
        if let Err(refused) = self.state.hello(&hello, node.last_seen) {
            tracing::warn!(node = node.name, %refused, "a saved node left out");
            self.skipped.nodes += 1;
            return;
        }
        if let Some(marks) = self.state.seq_marks.get_mut(&node.name) {
            marks.restore(node.last_seq.max(marks.last_seq()));
        }
        if let Some(accepted) = node.accepted {
            self.accepted.insert(node.name.clone(), accepted);
        }
    }

    /// The `accepted` window, which added `pairs`.
    fn window(&mut self, accepted: &AcceptedWindow, pairs: impl Iterator<Item = NetworkPairs>) {
        let AcceptedWindow {
            node,
            instance,
            seq,
            at,
        } = accepted;
        let (instance, seq, at) = (*instance, *seq, *at);
        let Some(marks) = self.state.seq_marks.get_mut(node) else {
            self.skipped.windows += 1;
            return;
        };
        if marks.current() == instance && seq > marks.last_seq() {
            marks.accepted(seq);
            *self.accepted.entry(node.clone()).or_default() += 1;
        }
        self.state.registry.note_report(node, at);
        for pairs in pairs {
            self.pairs(&pairs);
        }
    }

    fn pairs(&mut self, pairs: &NetworkPairs) {
        let Ok(network) = Network::parse(&pairs.network) else {
            self.skipped.pairs += pairs.pairs.len() as u64;
            return;
        };
        for pair in &pairs.pairs {
            let known =
                |node: &str| self.state.knows(node) && self.state.on_network(node, &network);
            if pair.src == pair.dst || !known(&pair.src) || !known(&pair.dst) {
                self.skipped.pairs += 1;
                continue;
            }
            let matrix: &mut PairMatrix = self.state.matrix_of_mut(&network);
            if pair.restore_into(matrix).is_err() {
                self.skipped.pairs += 1;
            }
        }
        self.state.version += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::saved::{PAIRS_PER_RECORD, RecordReader, encode, header};
    use crate::state::Ingested;
    use netaware_proto::v1::{PeerWindow, Window};

    fn hello(node: &str, instance: u64) -> Hello {
        Hello {
            zone: "a".into(),
            region: "r".into(),
            instance,
            throughput_port: 7471,
            ..netaware_testkit::hello(node)
        }
    }

    fn window(seq: u64, end: u64, peer: &str, received: u32) -> Window {
        Window {
            seq,
            start_unix_ms: end - 1_000,
            end_unix_ms: end,
            peers: vec![PeerWindow {
                peer: peer.into(),
                sent: 10,
                received,
                rtt_min_ms: 1.0,
                rtt_median_ms: 2.0,
                rtt_p90_ms: 3.0,
                rtt_p99_ms: 4.0,
                rtt_max_ms: 5.0,
                jitter_ms: 0.5,
                ..PeerWindow::default()
            }],
            ..Window::default()
        }
    }

    fn summaries(state: &CollectorState) -> Vec<(String, String, String)> {
        let mut pairs: Vec<_> = state
            .matrix()
            .pairs()
            .map(|(a, b, summary)| (a.to_owned(), b.to_owned(), format!("{summary:?}")))
            .collect();
        pairs.sort();
        pairs
    }

    /// A checkpoint as the saver writes it: the cut, then slices.
    fn checkpoint(state: &mut CollectorState) -> Vec<Record> {
        let cut = state.checkpoint_cut(|_| 3);
        let mut records: Vec<Record> = cut.nodes.into_iter().map(Record::Node).collect();
        for network in cut.networks {
            let (pairs, _) = state.saved_pairs(&network, 0, PAIRS_PER_RECORD);
            records.push(Record::Pairs(NetworkPairs {
                network: network.as_str().to_owned(),
                pairs,
            }));
        }
        records
    }

    /// A file of `records`, then the journal bytes `then`.
    fn file(records: &[Record], then: &[&Encoded]) -> Vec<u8> {
        let mut bytes = header().to_vec();
        for record in records {
            encode(record, &mut bytes);
        }
        for journal in then {
            bytes.extend_from_slice(&journal.to_bytes());
        }
        bytes
    }

    fn restore(bytes: &[u8]) -> Restored {
        let mut restored = Restored::new(ModelConfig::default(), Vec::new());
        for record in RecordReader::new(bytes).unwrap() {
            restored.apply(&record.unwrap());
        }
        restored
    }

    #[test]
    fn a_checkpoint_and_its_journal_restore_the_same_state_and_marks() {
        let mut state = CollectorState::new(ModelConfig::default(), Vec::new());
        state.start_journal();
        state.hello(&hello("n1", 7), 1_000).unwrap();
        state.hello(&hello("n2", 8), 1_000).unwrap();
        for seq in 1..=3 {
            let end = 1_000 + seq * 1_000;
            state.ingest("n1", &window(seq, end, "n2", 9), end).unwrap();
        }
        let before_cut = state.take_journal();
        assert_eq!(before_cut.records, 5, "two hellos, three windows");
        assert_eq!(before_cut.marks.last(), Some(&("n1".to_owned(), 7, 3)));
        // The journal alone restores everything.
        let from_journal = restore(&file(&[], &[&before_cut]));
        assert_eq!(summaries(&from_journal.state), summaries(&state));
        assert_eq!(from_journal.accepted.get("n1"), Some(&3));

        // A checkpoint, then more windows into the next journal; one of
        // them is in both (it came between the cut and the slice).
        let cut = state.checkpoint_cut(|node| if node == "n1" { 3 } else { 0 });
        state
            .ingest("n1", &window(4, 5_000, "n2", 9), 5_000)
            .unwrap();
        let mut records: Vec<Record> = cut.nodes.into_iter().map(Record::Node).collect();
        let (pairs, _) = state.saved_pairs(&Network::primary(), 0, 100);
        records.push(Record::Pairs(NetworkPairs {
            network: "primary".into(),
            pairs,
        }));
        state
            .ingest("n2", &window(1, 5_000, "n1", 10), 5_000)
            .unwrap();
        let restored = restore(&file(&records, &[&state.take_journal()]));
        assert_eq!(summaries(&restored.state), summaries(&state));
        assert_eq!(restored.skipped, Skipped::default());
        assert_eq!(restored.accepted.get("n1"), Some(&4));
        assert_eq!(restored.accepted.get("n2"), Some(&1));
        let mut restored = restored.state;
        assert_eq!(restored.seq_marks["n1"].current(), 7);
        // The agent's replay of a window taken before the restart is a
        // duplicate; its next one is new.
        restored.hello(&hello("n1", 7), 6_000).unwrap();
        assert_eq!(
            restored.ingest("n1", &window(4, 5_000, "n2", 0), 6_000),
            Ok(Ingested::Duplicate)
        );
        assert_eq!(
            restored.ingest("n1", &window(5, 6_000, "n2", 0), 6_000),
            Ok(Ingested::Accepted)
        );
    }

    #[test]
    fn a_bad_node_or_pair_is_left_out_and_the_rest_restored() {
        let mut state = CollectorState::new(ModelConfig::default(), Vec::new());
        for node in ["n1", "n2", "n3"] {
            state.hello(&hello(node, 1), 1_000).unwrap();
        }
        state
            .ingest("n1", &window(1, 2_000, "n2", 9), 2_000)
            .unwrap();
        state
            .ingest("n1", &window(2, 3_000, "n3", 9), 3_000)
            .unwrap();
        let mut records = checkpoint(&mut state);
        // n3's hello is damaged; one of n1's pairs has a negative RTT.
        let Record::Node(n3) = &mut records[2] else {
            panic!("nodes first")
        };
        n3.hello.truncate(3);
        let Record::Pairs(pairs) = &mut records[3] else {
            panic!("then pairs")
        };
        pairs.pairs[0].windows[0].probed.rtt_ms = Some([-1.0, 1.0, 1.0, 1.0, 1.0, 0.0]);
        let restored = restore(&file(&records, &[]));
        assert_eq!(
            restored.skipped,
            Skipped {
                nodes: 1,
                // The bad one, and n1 -> n3 of the node left out.
                pairs: 2,
                windows: 0
            }
        );
        assert_eq!(restored.state.node_count(), 2);
        assert_eq!(restored.state.matrix().pair_count(), 0);
    }
}
