//! The collector's state as it is saved to disk (`--state-dir`): the
//! records, and how a file of them is framed and read back.
//!
//! Pure, and about the format only. A saved state is two kinds of file of
//! the same records ([`Record`]):
//!
//! - a *checkpoint*: every agent's node ([`SavedNode`]: its hello as it
//!   sent it, the sequence number of its last accepted window), then every
//!   network's kept pairs ([`NetworkPairs`], a slice at a time), then an
//!   [`Record::End`] that says it is whole;
//! - a *journal*: what changed since its checkpoint was begun, in the order
//!   the collector took it: hellos ([`Record::Node`]) and accepted windows
//!   ([`Record::Taken`], the figures each one added, by peer: the node and
//!   the window's end once, not per pair).
//!
//! A file is [`MAGIC`], [`FORMAT`] (little-endian u32), then records, each
//! framed as its length (u32), the CRC-32 of its bytes (u32) and its bytes
//! (postcard, serde's compact binary format). A reader stops at the first
//! frame that is cut short or fails its checksum ([`RecordReader`]): in a
//! journal that is the tail a crash left half-written; everything before
//! it is good. Each record is checked again as it is restored, as if it
//! came from the network (a file is input too): a bad pair or node is left
//! out and counted, never the whole file.

use std::io::Read;

use netaware_core::UnixMillis;
use netaware_core::matrix::{KeptPair, OneWayWindow, PairMatrix, PairWindow, RttStats, Throughput};
use netaware_core::network::Network;
use netaware_core::transport::{Transport, TransportSet};
use serde::{Deserialize, Serialize};

use crate::validate::Invalid;

/// The first bytes of every saved file.
pub const MAGIC: &[u8; 8] = b"NAWSTATE";
/// The version of the saved format that is written.
pub const FORMAT: u32 = 3;
/// The oldest version still read: format 2 wrote windows as pairs
/// ([`Record::Window`]), which format 3 reads as they were.
pub const OLDEST_FORMAT_READ: u32 = 2;
/// The largest record read back: a slice of a checkpoint is at most
/// [`PAIRS_PER_RECORD`] pairs, a window at most a few hundred peers.
pub const MAX_RECORD_BYTES: u32 = 16 << 20;
/// Pairs in each [`Record::Pairs`] of a checkpoint: one slice of the
/// matrix, copied under the collector's lock at a time.
pub const PAIRS_PER_RECORD: usize = 2_048;

/// One entry of a checkpoint or a journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Record {
    /// An agent's node, as its last hello described it.
    Node(SavedNode),
    /// Kept pairs of one network.
    Pairs(NetworkPairs),
    /// A window the collector accepted, and what it added, as pairs (as
    /// format 2 wrote it; read, no longer written).
    Window(TakenWindow),
    /// The end of a whole checkpoint.
    End(CheckpointEnd),
    /// A window the collector accepted, and what it added, by peer.
    Taken(WindowTaken),
}

/// An agent's node: its hello and how far its windows were taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedNode {
    /// Node name (also in the hello; kept apart to be read without it).
    pub name: String,
    /// The agent process's instance (also in the hello).
    pub instance: u64,
    /// The hello, as the agent sent it (protobuf): restored through the
    /// same checks as a live one.
    pub hello: Vec<u8>,
    /// Sequence number of the instance's last accepted window.
    pub last_seq: u64,
    /// When its last report arrived.
    pub last_seen: UnixMillis,
    /// Windows accepted from the node over the collector's lifetimes, so
    /// that `netaware_collector_windows_accepted_total` goes on counting
    /// across restarts; `None` in a journal's hello (the count goes on).
    pub accepted: Option<u64>,
}

/// Pairs of one network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkPairs {
    /// The network's name.
    pub network: String,
    /// Its pairs.
    pub pairs: Vec<SavedPair>,
}

/// Which window the collector accepted, and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcceptedWindow {
    /// The reporting node.
    pub node: String,
    /// Its agent instance.
    pub instance: u64,
    /// The window's sequence number.
    pub seq: u64,
    /// When the collector took it.
    pub at: UnixMillis,
}

/// An accepted window, and the figures it added to each pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TakenWindow {
    /// Which window.
    pub accepted: AcceptedWindow,
    /// What it added, by network.
    pub networks: Vec<NetworkPairs>,
}

/// An accepted window, and what it added to each peer's pairs. Every
/// figure of a window ends at the window's end, and each is of a pair
/// with the node at one end, so both are said once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowTaken {
    /// Which window.
    pub accepted: AcceptedWindow,
    /// The window's end (Unix ms).
    pub end: UnixMillis,
    /// What it added, by network.
    pub networks: Vec<NetworkPeers>,
}

/// What a window added on one network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkPeers {
    /// The network's name.
    pub network: String,
    /// By peer.
    pub peers: Vec<PeerTaken>,
}

/// What a window added to the pairs between its node and one peer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerTaken {
    /// The peer.
    pub peer: String,
    /// The node's probes of the peer (node -> peer).
    pub probed: Option<Probed>,
    /// The peer's requests the node saw: (expected, received), the loss
    /// of peer -> node.
    pub arrived: Option<(u32, u32)>,
    /// A goodput of node -> peer.
    pub throughput: Option<SavedThroughput>,
}

/// Says a checkpoint is whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointEnd {
    /// Records before this one.
    pub records: u64,
    /// When the checkpoint was begun (Unix ms).
    pub begun_at: UnixMillis,
}

/// One pair's windows and goodput (all it keeps, in a checkpoint; what one
/// window added, in a journal).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedPair {
    /// Probing node.
    pub src: String,
    /// Probed node.
    pub dst: String,
    /// Windows, oldest first.
    pub windows: Vec<SavedWindow>,
    /// One-way windows, oldest first.
    pub one_way: Vec<SavedOneWay>,
    /// Last goodput.
    pub throughput: Option<SavedThroughput>,
}

/// A [`PairWindow`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedWindow {
    /// End of the window (Unix ms).
    pub end: UnixMillis,
    /// Its figures.
    pub probed: Probed,
}

/// A [`PairWindow`]'s figures but its end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probed {
    /// Probes sent.
    pub sent: u32,
    /// Replies received.
    pub received: u32,
    /// min, median, p90, p99, max, jitter (ms); absent when none came back.
    pub rtt_ms: Option<[f64; 6]>,
    /// The transport that probed it, by its place in [`Transport::ALL`].
    pub probe: u8,
    /// Transports tried and unanswered, one bit per place in
    /// [`Transport::ALL`].
    pub filtered: u8,
}

/// A [`OneWayWindow`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedOneWay {
    /// End of the window (Unix ms).
    pub end: UnixMillis,
    /// Requests the sequence numbers say were sent.
    pub expected: u32,
    /// Requests that arrived.
    pub received: u32,
}

/// A [`Throughput`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedThroughput {
    /// Goodput, bits/s.
    pub bps: f64,
    /// When the test ended (Unix ms).
    pub at: UnixMillis,
    /// Segments retransmitted, when the kernel said.
    pub retransmits: Option<u32>,
    /// Smoothed TCP RTT (ms), when the kernel said.
    pub tcp_rtt_ms: Option<f64>,
}

fn transport_place(transport: Transport) -> u8 {
    Transport::ALL
        .iter()
        .position(|t| *t == transport)
        .map_or(0, |place| place as u8)
}

impl SavedWindow {
    /// `window` as saved.
    pub fn of(window: &PairWindow) -> Self {
        Self {
            end: window.end,
            probed: Probed::of(window),
        }
    }

    fn checked(&self) -> Result<PairWindow, String> {
        self.probed.checked(self.end)
    }
}

impl Probed {
    /// `window`'s figures as saved.
    pub fn of(window: &PairWindow) -> Self {
        Self {
            sent: window.sent,
            received: window.received,
            rtt_ms: window.rtt.map(|r| r.to_array()),
            probe: transport_place(window.probe),
            filtered: window
                .filtered
                .iter()
                .fold(0, |bits, t| bits | 1 << transport_place(t)),
        }
    }

    /// The window of these figures ending at `end`, checked.
    fn checked(&self, end: UnixMillis) -> Result<PairWindow, String> {
        let rtt = RttStats::from_array(self.rtt_ms.unwrap_or_default());
        if self.received > 0 && self.rtt_ms.is_none() {
            return Err("a window with replies but no RTT".into());
        }
        let probe = *Transport::ALL
            .get(usize::from(self.probe))
            .ok_or_else(|| format!("no transport numbered {}", self.probe))?;
        let filtered = TransportSet::of(
            Transport::ALL
                .into_iter()
                .enumerate()
                .filter(|(place, _)| self.filtered & (1 << place) != 0)
                .map(|(_, t)| t),
        );
        PairWindow::new(end, self.sent, self.received, rtt)
            .map(|w| w.probed_by(probe, filtered))
            .map_err(|e| e.to_string())
    }
}

impl SavedOneWay {
    /// `window` as saved.
    pub fn of(window: &OneWayWindow) -> Self {
        Self {
            end: window.end,
            expected: window.expected,
            received: window.received,
        }
    }
}

impl SavedThroughput {
    /// `throughput` as saved.
    pub fn of(throughput: &Throughput) -> Self {
        Self {
            bps: throughput.bps,
            at: throughput.at,
            retransmits: throughput.retransmits,
            tcp_rtt_ms: throughput.tcp_rtt_ms,
        }
    }
}

impl SavedPair {
    /// All that `pair` keeps.
    pub fn of(pair: KeptPair<'_>) -> Self {
        Self {
            src: pair.src.to_owned(),
            dst: pair.dst.to_owned(),
            windows: pair
                .windows()
                .map(|window| SavedWindow::of(&window))
                .collect(),
            one_way: pair.one_way.iter().map(SavedOneWay::of).collect(),
            throughput: pair.throughput.as_ref().map(SavedThroughput::of),
        }
    }

    /// A pair with nothing yet.
    pub fn empty(src: &str, dst: &str) -> Self {
        Self {
            src: src.to_owned(),
            dst: dst.to_owned(),
            windows: Vec::new(),
            one_way: Vec::new(),
            throughput: None,
        }
    }

    /// Records this pair's windows and goodput into `matrix`, every figure
    /// checked first: a bad one leaves the whole pair out.
    pub fn restore_into(&self, matrix: &mut PairMatrix) -> Result<(), Invalid> {
        let refuse = |why: String| Invalid(format!("pair {} -> {}: {why}", self.src, self.dst));
        let windows = self
            .windows
            .iter()
            .map(SavedWindow::checked)
            .collect::<Result<Vec<_>, _>>()
            .map_err(refuse)?;
        let one_way = self
            .one_way
            .iter()
            .map(|w| OneWayWindow::new(w.end, w.expected, w.received))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| refuse(e.to_string()))?;
        let throughput = self
            .throughput
            .as_ref()
            .map(|t| Throughput::new(t.bps, t.at, t.retransmits, t.tcp_rtt_ms))
            .transpose()
            .map_err(|e| refuse(e.to_string()))?;
        for window in windows {
            matrix.record(&self.src, &self.dst, window);
        }
        for window in one_way {
            matrix.record_one_way(&self.src, &self.dst, window);
        }
        if let Some(throughput) = throughput {
            matrix.record_throughput(&self.src, &self.dst, throughput);
        }
        Ok(())
    }
}

/// What one accepted window adds, gathered as it is applied.
#[derive(Debug, Default)]
pub struct WindowChanges {
    networks: Vec<NetworkPeers>,
}

impl WindowChanges {
    /// The entry of `peer` on `network`, made on first use.
    fn peer(&mut self, network: &Network, peer: &str) -> &mut PeerTaken {
        let at = match self
            .networks
            .iter()
            .position(|n| n.network == network.as_str())
        {
            Some(at) => at,
            None => {
                self.networks.push(NetworkPeers {
                    network: network.as_str().to_owned(),
                    peers: Vec::new(),
                });
                self.networks.len() - 1
            }
        };
        let peers = &mut self.networks[at].peers;
        // A window names each peer once, with its one-way figures: the
        // last entry is the only one to look at.
        if peers.last().is_none_or(|p| p.peer != peer) {
            peers.push(PeerTaken {
                peer: peer.to_owned(),
                probed: None,
                arrived: None,
                throughput: None,
            });
        }
        peers.last_mut().expect("pushed above")
    }

    /// The node's window of `peer` (it ends where the window does).
    pub fn window(&mut self, network: &Network, peer: &str, window: &PairWindow) {
        self.peer(network, peer).probed = Some(Probed::of(window));
    }

    /// The one-way window of `peer` -> the node (it ends where the window
    /// does).
    pub fn arrived(&mut self, network: &Network, peer: &str, window: &OneWayWindow) {
        self.peer(network, peer).arrived = Some((window.expected, window.received));
    }

    /// A goodput of the node -> `peer`.
    pub fn throughput(&mut self, network: &Network, peer: &str, throughput: &Throughput) {
        self.peer(network, peer).throughput = Some(SavedThroughput::of(throughput));
    }

    /// The record of window `seq` of `node`'s `instance`, ending at `end`,
    /// taken `at`.
    pub fn into_record(
        self,
        node: &str,
        instance: u64,
        seq: u64,
        (end, at): (UnixMillis, UnixMillis),
    ) -> Record {
        Record::Taken(WindowTaken {
            accepted: AcceptedWindow {
                node: node.to_owned(),
                instance,
                seq,
                at,
            },
            end,
            networks: self.networks,
        })
    }
}

impl WindowTaken {
    /// What it added, as pairs.
    pub fn pairs(&self) -> impl Iterator<Item = NetworkPairs> + '_ {
        self.networks.iter().map(|network| NetworkPairs {
            network: network.network.clone(),
            pairs: network
                .peers
                .iter()
                .flat_map(|peer| self.pairs_with(peer))
                .collect(),
        })
    }

    /// The pairs of the node with `peer`: node -> peer, and peer -> node
    /// when the node saw the peer's requests.
    fn pairs_with(&self, peer: &PeerTaken) -> impl Iterator<Item = SavedPair> {
        let outbound = (peer.probed.is_some() || peer.throughput.is_some()).then(|| SavedPair {
            windows: peer
                .probed
                .iter()
                .map(|probed| SavedWindow {
                    end: self.end,
                    probed: probed.clone(),
                })
                .collect(),
            throughput: peer.throughput.clone(),
            ..SavedPair::empty(&self.accepted.node, &peer.peer)
        });
        let inbound = peer.arrived.map(|(expected, received)| SavedPair {
            one_way: vec![SavedOneWay {
                end: self.end,
                expected,
                received,
            }],
            ..SavedPair::empty(&peer.peer, &self.accepted.node)
        });
        outbound.into_iter().chain(inbound)
    }
}

/// What saved records are applied to (a state being restored).
pub trait Apply {
    /// Applies one record.
    fn apply(&mut self, record: &Record);
}

/// Records framed for a file, and the marks they hold: what a journal
/// gathers between two saves (kept encoded, a few KiB a window, rather
/// than as the records' many small allocations).
///
/// The bytes are kept in chunks of [`JOURNAL_CHUNK_BYTES`]: one buffer
/// would copy everything it holds each time it grew (a journal reaches
/// 100 MB between two saves at 5,000 agents), and it grows under the
/// collector's lock, in the middle of a window's ingest.
#[derive(Debug, Clone, Default)]
pub struct Encoded {
    chunks: Vec<Vec<u8>>,
    /// (node, instance, last_seq) of every hello and window in them, in
    /// order.
    pub marks: Vec<(String, u64, u64)>,
    /// How many records.
    pub records: u64,
}

/// Bytes in each chunk of an [`Encoded`] journal (a larger record has a
/// chunk of its own).
pub const JOURNAL_CHUNK_BYTES: usize = 1 << 20;

impl Encoded {
    /// Adds `record`.
    pub fn push(&mut self, record: &Record) {
        let body = postcard::to_stdvec(record).unwrap_or_default();
        let framed = FRAME_BYTES + body.len();
        let chunk = match self.chunks.last_mut() {
            Some(chunk) if chunk.capacity() - chunk.len() >= framed => chunk,
            _ => {
                self.chunks
                    .push(Vec::with_capacity(framed.max(JOURNAL_CHUNK_BYTES)));
                self.chunks.last_mut().expect("pushed above")
            }
        };
        frame(&body, chunk);
        self.records += 1;
        match record {
            Record::Node(node) => {
                self.marks
                    .push((node.name.clone(), node.instance, node.last_seq));
            }
            Record::Window(TakenWindow { accepted, .. })
            | Record::Taken(WindowTaken { accepted, .. }) => {
                self.marks
                    .push((accepted.node.clone(), accepted.instance, accepted.seq));
            }
            Record::Pairs(_) | Record::End(_) => {}
        }
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// The framed records, a chunk at a time, in order.
    pub fn chunks(&self) -> impl Iterator<Item = &[u8]> {
        self.chunks.iter().map(Vec::as_slice)
    }

    /// How many bytes the framed records take.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(Vec::len).sum()
    }

    /// The framed records in one buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.chunks.concat()
    }
}

/// The bytes a saved file begins with.
pub fn header() -> [u8; 12] {
    let mut header = [0; 12];
    header[..8].copy_from_slice(MAGIC);
    header[8..].copy_from_slice(&FORMAT.to_le_bytes());
    header
}

/// Bytes of a record's frame before its body: its length and checksum.
const FRAME_BYTES: usize = 8;

/// Appends `record`, framed, to `out`.
pub fn encode(record: &Record, out: &mut Vec<u8>) {
    // Every field serializes, into memory: no error to meet.
    frame(&postcard::to_stdvec(record).unwrap_or_default(), out);
}

/// Appends an encoded record `body` to `out` with its length and checksum.
fn frame(body: &[u8], out: &mut Vec<u8>) {
    let length = u32::try_from(body.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&length.to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    out.extend_from_slice(body);
}

/// Why a saved file, or its rest, could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Damage {
    /// Not a saved state of this format.
    #[error("not a netaware state file of format {OLDEST_FORMAT_READ} to {FORMAT}: {0}")]
    Header(String),
    /// A record cut short: the file ends inside it.
    #[error("record {record} cut short at byte {offset}")]
    CutShort {
        /// Records read before it.
        record: u64,
        /// Where it begins.
        offset: u64,
    },
    /// A record whose bytes do not match its checksum or do not decode.
    #[error("record {record} at byte {offset} is damaged: {why}")]
    Damaged {
        /// Records read before it.
        record: u64,
        /// Where it begins.
        offset: u64,
        /// What is wrong.
        why: String,
    },
    /// The file could not be read.
    #[error("{0}")]
    Io(String),
}

/// Reads the records of a saved file one by one, checking each frame.
#[derive(Debug)]
pub struct RecordReader<R> {
    input: R,
    offset: u64,
    records: u64,
    done: bool,
}

impl<R: Read> RecordReader<R> {
    /// A reader of `input`, its header checked.
    pub fn new(mut input: R) -> Result<Self, Damage> {
        let mut head = [0; 12];
        read_full(&mut input, &mut head)
            .map_err(|e| Damage::Io(e.to_string()))
            .and_then(|read| {
                if read < head.len() {
                    Err(Damage::Header(format!("{read} bytes")))
                } else {
                    Ok(())
                }
            })?;
        if &head[..8] != MAGIC {
            return Err(Damage::Header("no magic number".into()));
        }
        let format = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
        if !(OLDEST_FORMAT_READ..=FORMAT).contains(&format) {
            return Err(Damage::Header(format!("format {format}")));
        }
        Ok(Self {
            input,
            offset: 12,
            records: 0,
            done: false,
        })
    }

    /// Records read so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Where the next record begins: after a [`Damage`], where the good
    /// part of the file ends.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    fn read_next(&mut self) -> Result<Option<Record>, Damage> {
        let cut_short = Damage::CutShort {
            record: self.records,
            offset: self.offset,
        };
        let damaged = |why: String| Damage::Damaged {
            record: self.records,
            offset: self.offset,
            why,
        };
        let mut frame = [0; 8];
        match read_full(&mut self.input, &mut frame).map_err(|e| Damage::Io(e.to_string()))? {
            0 => return Ok(None),
            8 => {}
            _ => return Err(cut_short),
        }
        let length = u32::from_le_bytes([frame[0], frame[1], frame[2], frame[3]]);
        let checksum = u32::from_le_bytes([frame[4], frame[5], frame[6], frame[7]]);
        if length > MAX_RECORD_BYTES {
            return Err(damaged(format!(
                "{length} bytes, more than {MAX_RECORD_BYTES}"
            )));
        }
        let mut bytes = vec![0; length as usize];
        if read_full(&mut self.input, &mut bytes).map_err(|e| Damage::Io(e.to_string()))?
            < bytes.len()
        {
            return Err(cut_short);
        }
        if crc32fast::hash(&bytes) != checksum {
            return Err(damaged("checksum mismatch".into()));
        }
        let record = postcard::from_bytes(&bytes).map_err(|e| damaged(e.to_string()))?;
        self.offset += 8 + u64::from(length);
        self.records += 1;
        Ok(Some(record))
    }
}

impl<R: Read> Iterator for RecordReader<R> {
    type Item = Result<Record, Damage>;

    /// The next record; after the first damage, nothing more.
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = self.read_next().transpose();
        if !matches!(next, Some(Ok(_))) {
            self.done = true;
        }
        next
    }
}

/// Reads until `buf` is full or the input ends; how much was read.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut read = 0;
    while read < buf.len() {
        match input.read(&mut buf[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(end: UnixMillis) -> PairWindow {
        let rtt = RttStats {
            min: 1.0,
            median: 2.0,
            p90: 3.0,
            p99: 4.0,
            max: 5.0,
            jitter: 0.5,
        };
        PairWindow::new(end, 10, 9, rtt)
            .unwrap()
            .probed_by(Transport::Udp, TransportSet::of([Transport::Icmp]))
    }

    fn records() -> Vec<Record> {
        let mut changes = WindowChanges::default();
        let primary = Network::primary();
        changes.window(&primary, "b", &window(1_000));
        changes.arrived(&primary, "b", &OneWayWindow::new(1_000, 10, 8).unwrap());
        changes.throughput(
            &Network::parse("rail0").unwrap(),
            "b",
            &Throughput::new(1e9, 900, Some(3), Some(0.2)).unwrap(),
        );
        vec![
            Record::Node(SavedNode {
                name: "a".into(),
                instance: 7,
                hello: vec![1, 2, 3],
                last_seq: 4,
                last_seen: 5,
                accepted: Some(4),
            }),
            changes.into_record("a", 7, 5, (1_000, 1_001)),
            Record::End(CheckpointEnd {
                records: 2,
                begun_at: 1_000,
            }),
        ]
    }

    fn file(records: &[Record]) -> Vec<u8> {
        let mut bytes = header().to_vec();
        for record in records {
            encode(record, &mut bytes);
        }
        bytes
    }

    fn read(bytes: &[u8]) -> (Vec<Record>, Option<Damage>) {
        let mut good = Vec::new();
        for record in RecordReader::new(bytes).unwrap() {
            match record {
                Ok(record) => good.push(record),
                Err(damage) => return (good, Some(damage)),
            }
        }
        (good, None)
    }

    #[test]
    fn records_come_back_as_written_with_every_figure() {
        let written = records();
        assert_eq!(read(&file(&written)), (written.clone(), None));
        let Record::Taken(taken) = &written[1] else {
            panic!("a window record")
        };
        let networks: Vec<_> = taken.pairs().collect();
        assert_eq!(networks.len(), 2, "primary and rail0");
        let pairs = &networks[0].pairs;
        assert_eq!(
            pairs.iter().map(|p| (&*p.src, &*p.dst)).collect::<Vec<_>>(),
            [("a", "b"), ("b", "a")]
        );
        let mut matrix = PairMatrix::new(6);
        pairs[0].restore_into(&mut matrix).unwrap();
        let back = matrix.kept().next().unwrap().windows().next().unwrap();
        assert_eq!(back, window(1_000), "probe and filtered too");
    }

    #[test]
    fn a_journal_in_chunks_reads_as_one_file_of_its_records() {
        let big = Record::Node(SavedNode {
            name: "big".into(),
            instance: 1,
            hello: vec![7; JOURNAL_CHUNK_BYTES / 3],
            last_seq: 1,
            last_seen: 1,
            accepted: None,
        });
        let mut written = Vec::new();
        let mut journal = Encoded::default();
        for _ in 0..4 {
            for record in records().into_iter().chain([big.clone()]) {
                journal.push(&record);
                written.push(record);
            }
        }
        assert!(journal.chunks().count() >= 2, "past one chunk");
        assert!(journal.chunks().all(|c| c.len() <= JOURNAL_CHUNK_BYTES));
        assert_eq!(journal.len(), journal.to_bytes().len());
        let mut bytes = header().to_vec();
        bytes.extend(journal.chunks().flatten());
        assert_eq!(read(&bytes), (written.clone(), None));
        assert_eq!(journal.records, written.len() as u64);
        assert_eq!(
            journal.marks.len(),
            12,
            "a hello and a window each round, and the big hello"
        );
    }

    #[test]
    fn a_cut_or_damaged_record_ends_the_good_part_and_says_where() {
        let bytes = file(&records());
        let first_two = {
            let mut reader = RecordReader::new(&bytes[..]).unwrap();
            reader.next();
            reader.next();
            reader.offset() as usize
        };
        // A crash in the middle of the last record.
        let (good, damage) = read(&bytes[..first_two + 5]);
        assert_eq!(good.len(), 2);
        assert_eq!(
            damage,
            Some(Damage::CutShort {
                record: 2,
                offset: first_two as u64
            })
        );
        // A flipped bit in the second.
        let mut flipped = bytes.clone();
        flipped[first_two - 3] ^= 0x10;
        let (good, damage) = read(&flipped);
        assert_eq!(good.len(), 1);
        assert!(matches!(damage, Some(Damage::Damaged { record: 1, .. })));
        // Another format, or no saved file at all.
        let mut other = bytes.clone();
        other[8] = 9;
        assert!(RecordReader::new(&other[..]).is_err());
        assert!(RecordReader::new(&b"{\"format\":1}"[..]).is_err());
        assert!(RecordReader::new(&b""[..]).is_err());
    }

    /// A window of `peers` peers as format 3 writes it, and as format 2
    /// wrote it.
    fn both_ways(peers: usize) -> (Record, Record) {
        let mut changes = WindowChanges::default();
        let primary = Network::primary();
        let names: Vec<String> = (0..peers).map(|i| format!("node-{i:05}")).collect();
        for name in &names {
            changes.window(&primary, name, &window(1_764_000_000_000));
            let one_way = OneWayWindow::new(1_764_000_000_000, 10, 10).unwrap();
            changes.arrived(&primary, name, &one_way);
        }
        let times = (1_764_000_000_000, 1_764_000_000_003);
        let taken = changes.into_record("node-99999", 1, 9, times);
        let Record::Taken(compact) = &taken else {
            panic!("a window record")
        };
        let as_pairs = Record::Window(TakenWindow {
            accepted: compact.accepted.clone(),
            networks: compact.pairs().collect(),
        });
        (taken, as_pairs)
    }

    #[test]
    fn a_window_is_written_by_peer_and_reads_as_the_pairs_it_added() {
        let (taken, as_pairs) = both_ways(64);
        let (mut compact, mut pairs) = (Vec::new(), Vec::new());
        encode(&taken, &mut compact);
        encode(&as_pairs, &mut pairs);
        // The node, the window's end and a list's length once per window
        // rather than per pair: about a third less.
        assert!(
            compact.len() * 4 < pairs.len() * 3,
            "{} bytes by peer, {} as pairs",
            compact.len(),
            pairs.len()
        );
        let Record::Window(old) = &as_pairs else {
            panic!("a window record")
        };
        assert_eq!(old.networks[0].pairs.len(), 128, "both ways of 64 peers");
    }

    #[test]
    fn a_file_of_the_previous_format_is_read() {
        let (_, as_pairs) = both_ways(3);
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&2_u32.to_le_bytes());
        encode(&as_pairs, &mut bytes);
        assert_eq!(read(&bytes), (vec![as_pairs], None));
    }

    #[test]
    fn a_bad_figure_leaves_its_pair_out_whole() {
        let Record::Taken(taken) = records().remove(1) else {
            panic!("a window record")
        };
        let mut networks: Vec<_> = taken.pairs().collect();
        let pair = &mut networks[0].pairs[0];
        pair.windows.push(SavedWindow {
            end: 2_000,
            probed: Probed {
                rtt_ms: Some([-1.0, 1.0, 1.0, 1.0, 1.0, 0.0]),
                ..pair.windows[0].probed.clone()
            },
        });
        let mut matrix = PairMatrix::new(6);
        let refused = pair.restore_into(&mut matrix).unwrap_err();
        assert!(refused.0.contains("rtt_min_ms"), "{refused:?}");
        assert_eq!(matrix.pair_count(), 0, "nothing of it taken");
        pair.windows[1].probed.rtt_ms = None;
        assert!(pair.restore_into(&mut matrix).is_err(), "replies, no RTT");
        pair.windows[1].probed.received = 0;
        pair.windows[1].probed.probe = 9;
        assert!(pair.restore_into(&mut matrix).is_err(), "no such transport");
    }
}
