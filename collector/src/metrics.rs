//! The collector's Prometheus metrics on /metrics.
//!
//! Two kinds: counters of the collector's own work ([`WorkMetrics`],
//! updated as sessions, windows and test results come and go), and what the
//! matrix says at the moment of the scrape ([`exposition`], pure: built from
//! a snapshot): per zone pair and per measured block always, per node
//! pair for the pairs that fit the series budget, worst first
//! ([`crate::pair_series`]), each node's score and staleness.
//! Units are the base units of the Prometheus conventions: seconds, bytes,
//! ratios.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

use netaware_core::faults::FaultKind;
use netaware_core::network::Network;
use netaware_core::placement::PlacementConfig;
use netaware_core::scored::{ScoredMatrix, ZoneSummary};
use netaware_core::transport::Transport;

use crate::pair_series::{ExportedPair, pairs_to_export};
use crate::state::ThroughputCounts;

type FloatGauge = Gauge<f64, AtomicU64>;

/// One node.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeLabels {
    /// Node name.
    pub node: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ZoneNodeLabels {
    node: String,
    zone: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FaultLabels {
    network: String,
    kind: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ZoneLabels {
    zone: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProbeLabels {
    probe: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransportLabels {
    transport: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ZonePairLabels {
    src_zone: String,
    dst_zone: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BlockLabels {
    network: String,
    zone: String,
    /// The block's number in its zone.
    block: String,
    /// `inside` (both ends in the block) or `leaving` (from the block to
    /// the rest of its zone: the block's uplink).
    links: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PairLabels {
    src: String,
    dst: String,
    src_zone: String,
    dst_zone: String,
    /// The network the pair was measured over (`primary`, a rail's name).
    network: String,
}

/// Why the collector refused or ended an agent's session.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
pub enum Refusal {
    /// No hello within [`crate::HELLO_DEADLINE`].
    NoHello,
    /// A first message that is not a hello, or a message after it that is
    /// not a window.
    OutOfOrder,
    /// A hello that fails its checks.
    InvalidHello,
    /// A hello for another node than the client's certificate, or a zone
    /// other than its Node's.
    Identity,
    /// A message the stream could not decode (too large, broken).
    StreamError,
    /// A session ended because a newer agent instance of its node said
    /// hello.
    Replaced,
}

impl Refusal {
    /// Its label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoHello => "no_hello",
            Self::OutOfOrder => "out_of_order",
            Self::InvalidHello => "invalid_hello",
            Self::Identity => "identity",
            Self::StreamError => "stream_error",
            Self::Replaced => "replaced",
        }
    }
}

impl prometheus_client::encoding::EncodeLabelValue for Refusal {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelValueEncoder<'_>,
    ) -> Result<(), std::fmt::Error> {
        use std::fmt::Write as _;
        encoder.write_str(self.as_str())
    }
}

/// One [`Refusal`].
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    /// Why.
    pub reason: Refusal,
}

/// Why a watch stream was refused or cut off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchRefusal {
    /// [`crate::WatchLimits::max_watchers`] streams were open already.
    TooMany,
    /// [`crate::WatchLimits::max_per_client`] streams were open from the
    /// client's address already.
    TooManyFromClient,
    /// An update waited longer than [`crate::WatchLimits::send_deadline`]
    /// to be taken: the client stopped reading.
    Stalled,
}

impl WatchRefusal {
    /// Its label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TooMany => "too_many",
            Self::TooManyFromClient => "too_many_from_client",
            Self::Stalled => "stalled",
        }
    }
}

/// Why a gRPC connection was closed by the collector before any request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionRefusal {
    /// [`crate::ConnectionLimits::max_total`] connections were open.
    TooMany,
    /// [`crate::ConnectionLimits::max_per_client`] connections were open
    /// from the client's address.
    TooManyFromClient,
    /// It sent too little within
    /// [`crate::ConnectionLimits::first_bytes_within`].
    Silent,
    /// Its TLS handshake failed, or did not end within
    /// [`crate::ConnectionLimits::first_bytes_within`].
    TlsHandshake,
}

impl ConnectionRefusal {
    /// Its label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TooMany => "too_many",
            Self::TooManyFromClient => "too_many_from_client",
            Self::Silent => "silent",
            Self::TlsHandshake => "tls_handshake",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

/// What a save wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaveKind {
    /// An append of what changed.
    Journal,
    /// A whole new checkpoint.
    Checkpoint,
}

impl SaveKind {
    fn label(self) -> &'static str {
        match self {
            Self::Journal => "journal",
            Self::Checkpoint => "checkpoint",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

/// Scored snapshots alive in this process (`crate::snapshots` counts
/// them): published, kept for paging or warm, and any older one a reader
/// (a watch stream, a topology round, a save) still holds. Each is a copy
/// of every pair's scores, about 100 MB at 5,000 agents, so this says how
/// much of the collector's memory is snapshots at any moment. One gauge
/// for the process, as its memory is.
pub static LIVE_SNAPSHOTS: std::sync::LazyLock<Gauge> = std::sync::LazyLock::new(Gauge::default);

/// Counters of the collector's work, shared by the sessions.
#[derive(Debug)]
pub struct WorkMetrics {
    /// Agent sessions opened.
    pub sessions_opened: Counter,
    /// Agent sessions refused or ended by the collector, by why.
    pub sessions_refused: Family<RefusalLabels, Counter>,
    /// Watch streams refused or cut off, by why.
    watchers_refused: Family<ReasonLabels, Counter>,
    /// gRPC connections closed before any request, by why.
    connections_refused: Family<ReasonLabels, Counter>,
    /// gRPC connections open now.
    pub grpc_connections: Gauge,
    /// Windows that entered the matrix, by node.
    pub windows_accepted: Family<NodeLabels, Counter>,
    /// Windows acknowledged as duplicates (replays), by node.
    pub windows_duplicate: Family<NodeLabels, Counter>,
    /// Windows refused as invalid, by node.
    pub windows_rejected: Family<NodeLabels, Counter>,
    /// State saves to `--state-dir` that succeeded, by `kind`.
    state_saves: Family<KindLabels, Counter>,
    /// State saves that failed.
    pub state_save_errors: Counter,
    /// Bytes written to `--state-dir`, by `kind` (journal, checkpoint).
    state_saved_bytes: Family<KindLabels, Counter>,
    /// Seconds each save held the state's lock: one swap of the journal,
    /// or one slice of a checkpoint.
    pub state_save_lock: Histogram,
    /// 1 while the last save failed.
    state_save_failing: Gauge,
    /// Why the last save failed, while it did (for /healthz).
    state_save_problem: std::sync::Mutex<Option<String>>,
    /// Seconds each shared snapshot took to build, copy and scoring.
    pub snapshot_build: Histogram,
    /// Seconds each build held the state's lock (the copy alone).
    pub snapshot_lock: Histogram,
    /// Seconds from a window's arrival to its ack queued on the session:
    /// the wait for the state's lock and the ingest itself.
    pub ingest: Histogram,
    /// Seconds from the earliest change a snapshot holds to its
    /// publication: how far behind the state readers are.
    pub snapshot_delay: Histogram,
    /// Bytes of updates sent on watch streams.
    pub watch_sent_bytes: Counter,
    /// How far off the network coordinates' prediction of each measured
    /// pair was before its median moved them (|predicted - measured| /
    /// measured), inside zones and between them.
    pub coordinate_error: Family<PairClassLabels, Histogram>,
    /// The size of each peer set sent to an agent: the peers it probes,
    /// and so its probes per interval.
    pub peer_set_size: Histogram,
    /// How long each round of the measured topology took.
    pub topology_round: Histogram,
    /// The pairs' median RTTs between each two zones, observed every
    /// topology round ([`crate::rtt_histograms`]).
    pub zone_pair_rtts: crate::rtt_histograms::ZonePairRtts,
}

/// Whether a pair is inside one zone or between two.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PairClassLabels {
    /// `intra_zone` or `inter_zone`.
    pub class: PairClass,
}

/// Inside a zone or between zones, as a label.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
pub enum PairClass {
    /// Both ends in one zone.
    IntraZone,
    /// The ends in different zones.
    InterZone,
}

impl prometheus_client::encoding::EncodeLabelValue for PairClass {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelValueEncoder<'_>,
    ) -> Result<(), std::fmt::Error> {
        use std::fmt::Write as _;
        encoder.write_str(match self {
            Self::IntraZone => "intra_zone",
            Self::InterZone => "inter_zone",
        })
    }
}

/// Buckets of relative errors: 1% to about 3x.
fn relative_error_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 1.8, 11))
}

impl Default for WorkMetrics {
    fn default() -> Self {
        // 1 ms to about 20 s.
        let seconds = || Histogram::new(exponential_buckets(0.001, 2.7, 11));
        Self {
            sessions_opened: Counter::default(),
            sessions_refused: Family::default(),
            watchers_refused: Family::default(),
            connections_refused: Family::default(),
            grpc_connections: Gauge::default(),
            windows_accepted: Family::default(),
            windows_duplicate: Family::default(),
            windows_rejected: Family::default(),
            state_saves: Family::default(),
            state_save_errors: Counter::default(),
            state_saved_bytes: Family::default(),
            // 10 us to about 1.5 s.
            state_save_lock: Histogram::new(exponential_buckets(0.00001, 2.7, 13)),
            state_save_failing: Gauge::default(),
            state_save_problem: std::sync::Mutex::new(None),
            snapshot_build: seconds(),
            snapshot_lock: seconds(),
            snapshot_delay: seconds(),
            ingest: Histogram::new(exponential_buckets(0.0001, 2.5, 12)),
            watch_sent_bytes: Counter::default(),
            coordinate_error: Family::new_with_constructor(relative_error_buckets),
            // 1 to 1,024 peers.
            peer_set_size: Histogram::new(exponential_buckets(1.0, 2.0, 11)),
            topology_round: seconds(),
            zone_pair_rtts: Family::new_with_constructor(crate::rtt_histograms::buckets),
        }
    }
}

impl WorkMetrics {
    /// A save of `kind` wrote `bytes` and is on disk.
    pub fn save_done(&self, kind: SaveKind, bytes: u64) {
        let kind = KindLabels { kind: kind.label() };
        self.state_saves.get_or_create(&kind).inc();
        self.state_saved_bytes.get_or_create(&kind).inc_by(bytes);
        self.state_save_failing.set(0);
        *self
            .state_save_problem
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// A save failed, for `why`.
    pub fn save_failed(&self, why: String) {
        self.state_save_errors.inc();
        self.state_save_failing.set(1);
        *self
            .state_save_problem
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(why);
    }

    /// Why the last save failed, while it did.
    pub fn save_problem(&self) -> Option<String> {
        self.state_save_problem
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Counts a session refused or ended for `reason`.
    pub fn refused(&self, reason: Refusal) {
        self.sessions_refused
            .get_or_create(&RefusalLabels { reason })
            .inc();
    }

    /// Counts a gRPC connection closed for `reason`.
    pub fn connection_refused(&self, reason: ConnectionRefusal) {
        self.connections_refused
            .get_or_create(&ReasonLabels {
                reason: reason.as_str(),
            })
            .inc();
    }

    /// Counts a watch stream refused or cut off for `reason`.
    pub fn watch_refused(&self, reason: WatchRefusal) {
        self.watchers_refused
            .get_or_create(&ReasonLabels {
                reason: reason.as_str(),
            })
            .inc();
    }

    /// Windows accepted from `node` so far.
    pub fn accepted(&self, node: &str) -> u64 {
        self.windows_accepted
            .get_or_create(&NodeLabels {
                node: node.to_owned(),
            })
            .get()
    }

    /// Starts `node`'s window counters at 0, so that rates over them exist
    /// (and read 0) before the first rejection or replay.
    pub fn node_seen(&self, node: &str) {
        let labels = NodeLabels {
            node: node.to_owned(),
        };
        for family in [
            &self.windows_accepted,
            &self.windows_duplicate,
            &self.windows_rejected,
        ] {
            drop(family.get_or_create(&labels));
        }
    }
}

/// Everything a scrape shows besides [`WorkMetrics`].
#[derive(Debug, Clone)]
pub struct ScrapeFacts {
    /// Open agent sessions.
    pub open_sessions: usize,
    /// What became of throughput tests.
    pub throughput: ThroughputCounts,
    /// Peers left out of accepted windows as unknown.
    pub unknown_peers: u64,
    /// Node pairs exported with series of their own, over every network
    /// (`--pair-series`).
    pub pair_series: usize,
    /// The measured blocks of every network, as of the last round.
    pub blocks: Vec<BlockFacts>,
    /// Each agent's node and the sequence number of its last accepted
    /// window.
    pub last_seqs: Vec<(String, u64)>,
    /// The placement thresholds that say whether a node is degraded.
    pub placement: PlacementConfig,
    /// The networks of the last round of fault localisation, and its open
    /// faults.
    pub faults: FaultFacts,
}

/// One measured block, for the metrics.
#[derive(Debug, Clone)]
pub struct BlockFacts {
    /// Its network.
    pub network: Network,
    /// Its zone.
    pub zone: String,
    /// Its number in the zone.
    pub number: u32,
    /// Its nodes, by name.
    pub nodes: Vec<String>,
}

/// What the last round of fault localisation found, for the metrics.
#[derive(Debug, Clone, Default)]
pub struct FaultFacts {
    /// The networks it looked at.
    pub networks: Vec<Network>,
    /// Its open faults: (network, kind).
    pub open: Vec<(Network, FaultKind)>,
}

/// The metrics text of a scrape: the work counters and the matrix as of
/// the snapshot.
pub fn exposition(work: &WorkMetrics, snapshot: &ScoredMatrix, facts: &ScrapeFacts) -> String {
    exposition_of_networks(work, snapshot, &[], facts)
}

/// The same, with the pairs of every other network (`others`) beside the
/// primary network's, each pair labelled with its network.
pub fn exposition_of_networks(
    work: &WorkMetrics,
    snapshot: &ScoredMatrix,
    others: &[(&Network, &ScoredMatrix)],
    facts: &ScrapeFacts,
) -> String {
    let mut registry = Registry::with_prefix("netaware");
    register_work(&mut registry, work, facts);
    register_matrix(&mut registry, snapshot, facts);
    register_pairs(&mut registry, snapshot, others, facts);
    register_faults(&mut registry, &facts.faults);
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
    text
}

/// Open faults per network and kind: one series each, 0 included, so that
/// an alert can say `> 0` and a panel draws a line that goes back down.
fn register_faults(registry: &mut Registry, faults: &FaultFacts) {
    let open = Family::<FaultLabels, Gauge>::default();
    for network in &faults.networks {
        for kind in FaultKind::ALL {
            let labels = FaultLabels {
                network: network.as_str().to_owned(),
                kind: kind.as_str().to_owned(),
            };
            let count = faults
                .open
                .iter()
                .filter(|(n, k)| n == network && *k == kind)
                .count();
            open.get_or_create(&labels)
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
    }
    registry.register(
        "faults",
        "Open faults by network and kind (node, block_uplink, zone_link, pair, zone_label): what `netaware faults` lists",
        open,
    );
}

fn register_work(registry: &mut Registry, work: &WorkMetrics, facts: &ScrapeFacts) {
    registry.register_with_unit(
        "zone_pair_rtt_median",
        "The fresh measured pairs' median RTTs between two zones, each pair observed once a topology round: the shape a zone pair's mean hides (two racks behind a slow uplink)",
        prometheus_client::registry::Unit::Seconds,
        work.zone_pair_rtts.clone(),
    );
    let collector = registry.sub_registry_with_prefix("collector");
    netaware_runtime::build_info::register_build_info(collector);
    netaware_runtime::http::register_refusals(collector);
    collector.register(
        "connections_refused",
        "gRPC connections closed before any request, by reason: too_many (--max-connections), too_many_from_client (--max-connections-per-client), silent (sent too little within 10 s)",
        work.connections_refused.clone(),
    );
    collector.register(
        "grpc_connections",
        "gRPC connections open now",
        work.grpc_connections.clone(),
    );
    collector.register(
        "sessions_opened",
        "Agent sessions opened",
        work.sessions_opened.clone(),
    );
    collector.register(
        "sessions_refused",
        "Agent sessions the collector refused or ended, by reason",
        work.sessions_refused.clone(),
    );
    collector.register(
        "watchers_refused",
        "WatchMatrix streams the collector refused (too_many, too_many_from_client) or cut off (stalled: the client stopped reading)",
        work.watchers_refused.clone(),
    );
    let open = Gauge::<i64>::default();
    open.set(i64::try_from(facts.open_sessions).unwrap_or(i64::MAX));
    collector.register("sessions_open", "Agent sessions open now", open);
    collector.register(
        "windows_accepted",
        "Windows that entered the matrix, by node",
        work.windows_accepted.clone(),
    );
    collector.register(
        "windows_duplicate",
        "Windows acknowledged as replays of accepted ones, by node",
        work.windows_duplicate.clone(),
    );
    collector.register(
        "windows_rejected",
        "Windows refused as invalid, by node",
        work.windows_rejected.clone(),
    );
    let last_seq = Family::<NodeLabels, Gauge>::default();
    for (node, seq) in &facts.last_seqs {
        last_seq
            .get_or_create(&NodeLabels { node: node.clone() })
            .set(i64::try_from(*seq).unwrap_or(i64::MAX));
    }
    collector.register(
        "window_seq",
        "Sequence number of the node's last accepted window (its agent numbers them from 1, without gaps)",
        last_seq,
    );
    collector.register(
        "state_saves",
        "State saves to --state-dir, by kind: journal (an append of what changed) or checkpoint (all of it)",
        work.state_saves.clone(),
    );
    collector.register(
        "state_save_errors",
        "State saves to --state-dir that failed",
        work.state_save_errors.clone(),
    );
    collector.register(
        "state_save_failing",
        "1 while the last save to --state-dir failed (acks then say how far the last good one reaches, and agents keep the rest)",
        work.state_save_failing.clone(),
    );
    collector.register_with_unit(
        "state_saved",
        "Bytes written to --state-dir, by kind: journal (what changed) or checkpoint (all of it)",
        prometheus_client::registry::Unit::Bytes,
        work.state_saved_bytes.clone(),
    );
    collector.register(
        "snapshots_live",
        "Scored snapshots alive in the process: published, warm, kept for paging, or still held by a reader (each a copy of every pair's scores)",
        LIVE_SNAPSHOTS.clone(),
    );
    let seconds = [
        (
            "snapshot_build",
            "Time to build the scored snapshot every reader shares (copy under the state's lock, then scoring)",
            &work.snapshot_build,
        ),
        (
            "snapshot_lock",
            "Time each snapshot build held the state's lock (ingest waits that long at most)",
            &work.snapshot_lock,
        ),
        (
            "ingest",
            "Time from a window's arrival to its ack queued (the wait for the state's lock and the ingest)",
            &work.ingest,
        ),
        (
            "snapshot_delay",
            "Time from the earliest change a snapshot holds to its publication (how far readers are behind the state)",
            &work.snapshot_delay,
        ),
        (
            "state_save_lock",
            "Time each save held the state's lock (one swap of the journal, or one slice of a checkpoint)",
            &work.state_save_lock,
        ),
        (
            "topology_round",
            "Time each round of the measured topology (blocks, degraded marks, costs between zones) took",
            &work.topology_round,
        ),
    ];
    collector.register(
        "coordinate_error_ratio",
        "How far off the network coordinates predicted each measured pair's median RTT before it moved them (|predicted - measured| / measured), by class: intra_zone or inter_zone",
        work.coordinate_error.clone(),
    );
    collector.register(
        "peer_set_size",
        "Peers in each peer set sent to an agent (what it probes every probe interval)",
        work.peer_set_size.clone(),
    );
    for (name, help, histogram) in seconds {
        collector.register_with_unit(
            name,
            help,
            prometheus_client::registry::Unit::Seconds,
            histogram.clone(),
        );
    }
    collector.register_with_unit(
        "watch_sent",
        "Bytes of updates sent on WatchMatrix streams",
        prometheus_client::registry::Unit::Bytes,
        work.watch_sent_bytes.clone(),
    );
    let unknown_peers = Counter::<u64>::default();
    unknown_peers.inc_by(facts.unknown_peers);
    collector.register(
        "window_peers_unknown",
        "Peers left out of accepted windows because the collector does not know them (forgotten, or not restored after a restart); the rest of each window was taken",
        unknown_peers,
    );
    let orders = Counter::<u64>::default();
    orders.inc_by(facts.throughput.ordered);
    collector.register(
        "throughput_tests_ordered",
        "Throughput tests ordered",
        orders,
    );
    let results = Family::<OutcomeLabels, Counter>::default();
    let counts = facts.throughput;
    for (outcome, count) in [
        ("measured", counts.measured),
        ("failed", counts.failed),
        ("ignored", counts.ignored),
    ] {
        results
            .get_or_create(&OutcomeLabels { outcome })
            .inc_by(count);
    }
    collector.register(
        "throughput_results",
        "Throughput results by outcome: measured, failed, or ignored (not ordered by this collector)",
        results,
    );
}

/// Whether the probes get through: placement fails open where they do not.
fn register_reachability(registry: &mut Registry, snapshot: &ScoredMatrix, summary: &ZoneSummary) {
    let reachability = snapshot.reachability();
    let cannot = Gauge::<i64>::default();
    cannot.set(i64::from(reachability.cluster_cannot_measure()));
    registry.register(
        "cannot_measure",
        "1 when most nodes reach none of their peers (probes filtered, not every NIC at once): the extender answers neutrally and placement fails open",
        cannot,
    );
    let unreached = Gauge::<i64>::default();
    unreached.set(i64::try_from(reachability.cluster.unreached).unwrap_or(i64::MAX));
    registry.register(
        "nodes_unreached",
        "Nodes whose every fresh pair, either way, went unanswered",
        unreached,
    );
    let zones = Family::<ZoneLabels, Gauge>::default();
    for zone in &summary.zones {
        zones
            .get_or_create(&ZoneLabels {
                zone: zone.name.clone(),
            })
            .set(i64::from(zone.cannot_measure));
    }
    registry.register(
        "zone_cannot_measure",
        "1 when most of the zone's nodes reach none of their zone-mates: its nodes are not failed for what was not measured",
        zones,
    );
}

/// How many pairs each transport measures, and on how many each was found
/// filtered: every transport gets a sample, 0 included, so that a filter
/// showing up is a change of value, not a new series.
fn register_transports(registry: &mut Registry, snapshot: &ScoredMatrix) {
    let probed = Family::<ProbeLabels, Gauge>::default();
    let filtered = Family::<TransportLabels, Gauge>::default();
    for transport in Transport::ALL {
        let name = transport.as_str().to_owned();
        let count = |has: &dyn Fn(&netaware_core::matrix::PairSummary) -> bool| {
            let n = snapshot.pairs().iter().filter(|p| has(&p.summary)).count();
            i64::try_from(n).unwrap_or(i64::MAX)
        };
        probed
            .get_or_create(&ProbeLabels {
                probe: name.clone(),
            })
            .set(count(&|s| s.probe == Some(transport)));
        filtered
            .get_or_create(&TransportLabels { transport: name })
            .set(count(&|s| s.filtered.contains(transport)));
    }
    registry.register(
        "pairs_probed",
        "Measured pairs by the transport of their figures (icmp, udp, tcp): an agent probes each peer by the most preferred one that gets through",
        probed,
    );
    registry.register(
        "pairs_filtered",
        "Pairs on which the transport got no reply while a less preferred one did: a filter on the way, not a lossy link",
        filtered,
    );
}

fn register_matrix(registry: &mut Registry, snapshot: &ScoredMatrix, facts: &ScrapeFacts) {
    let nodes = snapshot.nodes();
    let zone_nodes = |i: usize| ZoneNodeLabels {
        node: nodes[i].info.name.clone(),
        zone: nodes[i].info.zone.clone(),
    };
    let stale = Family::<ZoneNodeLabels, Gauge>::default();
    let score = Family::<ZoneNodeLabels, FloatGauge>::default();
    for (i, node) in nodes.iter().enumerate() {
        stale
            .get_or_create(&zone_nodes(i))
            .set(i64::from(node.stale));
        // A node's score: the mean quality of its links inside its zone,
        // both ways, what placement starts from.
        let in_zone: Vec<f64> = snapshot
            .links(i)
            .filter(|p| nodes[p.src].info.zone == nodes[p.dst].info.zone)
            .map(|p| p.quality)
            .collect();
        if !in_zone.is_empty() {
            let mean = in_zone.iter().sum::<f64>() / in_zone.len() as f64;
            score.get_or_create(&zone_nodes(i)).set(mean);
        }
    }
    // Only nodes with enough zone-mates to judge get a sample: no made-up 0.
    let degraded = Family::<ZoneNodeLabels, Gauge>::default();
    let placement = &facts.placement;
    for (i, health) in snapshot.health().iter().enumerate() {
        if health.judged() {
            let verdict = health.degraded(placement.loss_threshold, placement.min_goodput_fraction);
            degraded
                .get_or_create(&zone_nodes(i))
                .set(i64::from(verdict.is_some()));
        }
    }
    registry.register("node_stale", "1 when the node has no fresh reports", stale);
    registry.register(
        "node_degraded",
        "1 when most of the node's links inside its zone are lossy or far slower than its zone's usual, so placement fails it; 0 when they are not",
        degraded,
    );
    registry.register(
        "node_score",
        "Mean quality (0 to 1) of the node's measured links inside its zone, both ways",
        score,
    );

    let summary = snapshot.zones();
    register_reachability(registry, snapshot, &summary);
    register_transports(registry, snapshot);
    let zone_pair = |src: &str, dst: &str| ZonePairLabels {
        src_zone: src.to_owned(),
        dst_zone: dst.to_owned(),
    };
    let families = PairFamilies::default();
    for z in &summary.zone_pairs {
        let labels = zone_pair(&z.src_zone, &z.dst_zone);
        families.set(
            &labels,
            z.rtt_median_ms.map(seconds),
            None,
            z.loss_ratio,
            z.throughput_bps,
            z.quality,
        );
    }
    families.register(
        registry,
        "zone_pair",
        "zone pair: mean over its measured node pairs",
    );
}

/// The node pairs of every network that fit the series budget, each
/// labelled with its network; how many pairs that is, beside the budget;
/// and every network's measured blocks, inside and leaving.
fn register_pairs(
    registry: &mut Registry,
    primary: &ScoredMatrix,
    others: &[(&Network, &ScoredMatrix)],
    facts: &ScrapeFacts,
) {
    let primary_network = Network::primary();
    let networks: Vec<(&Network, &ScoredMatrix)> = std::iter::once((&primary_network, primary))
        .chain(others.iter().copied())
        .collect();
    let matrices: Vec<&ScoredMatrix> = networks.iter().map(|(_, m)| *m).collect();
    let exported = pairs_to_export(&matrices, facts.pair_series);
    let families = PairFamilies::default();
    for ExportedPair { network, pair } in &exported {
        let (network, snapshot) = networks[*network];
        let nodes = snapshot.nodes();
        let p = &snapshot.pairs()[*pair];
        let labels = PairLabels {
            src: nodes[p.src].info.name.clone(),
            dst: nodes[p.dst].info.name.clone(),
            src_zone: nodes[p.src].info.zone.clone(),
            dst_zone: nodes[p.dst].info.zone.clone(),
            network: network.to_string(),
        };
        let s = &p.summary;
        families.set(
            &labels,
            s.rtt_median_ms.map(seconds),
            s.jitter_ms.map(seconds),
            s.loss_ratio,
            s.throughput.map(|t| t.bps),
            p.quality,
        );
    }
    families.register(registry, "pair", "node pair src -> dst over a network");
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let budget = Gauge::<i64>::default();
    budget.set(count(facts.pair_series));
    registry.register(
        "pair_series_budget",
        "Node pairs that may have netaware_pair_* series of their own (--pair-series); the rest are in the zone pair and block aggregates",
        budget,
    );
    let shown = Gauge::<i64>::default();
    shown.set(count(exported.len()));
    registry.register(
        "pairs_exported",
        "Node pairs with netaware_pair_* series of their own: all of them within the budget, else the worst by quality, loss and RTT inflation",
        shown,
    );
    register_blocks(registry, &networks, &facts.blocks);
}

/// Each measured block's links, per network: the mean figures of the
/// measured pairs inside it, and of those leaving it for the rest of its
/// zone, so that a bad block uplink shows at any cluster size.
fn register_blocks(
    registry: &mut Registry,
    networks: &[(&Network, &ScoredMatrix)],
    blocks: &[BlockFacts],
) {
    let families = PairFamilies::default();
    for (network, snapshot) in networks {
        let of_network: Vec<&BlockFacts> =
            blocks.iter().filter(|b| &b.network == *network).collect();
        if of_network.is_empty() {
            continue;
        }
        let nodes = snapshot.nodes();
        let block_of_name: std::collections::HashMap<&str, usize> = of_network
            .iter()
            .enumerate()
            .flat_map(|(i, b)| b.nodes.iter().map(move |n| (n.as_str(), i)))
            .collect();
        let block_of: Vec<Option<usize>> = nodes
            .iter()
            .map(|n| block_of_name.get(n.info.name.as_str()).copied())
            .collect();
        // [inside, leaving] of each block.
        let mut means = vec![[Mean::default(), Mean::default()]; of_network.len()];
        for p in snapshot.pairs() {
            let Some(from) = block_of[p.src] else {
                continue;
            };
            let side = match block_of[p.dst] {
                Some(to) if to == from => 0,
                _ if nodes[p.dst].info.zone == of_network[from].zone => 1,
                _ => continue,
            };
            means[from][side].add(p);
        }
        for (block, sides) in of_network.iter().zip(&means) {
            for (links, mean) in ["inside", "leaving"].into_iter().zip(sides) {
                if mean.pairs == 0 {
                    continue;
                }
                let labels = BlockLabels {
                    network: network.to_string(),
                    zone: block.zone.clone(),
                    block: block.number.to_string(),
                    links,
                };
                families.set(
                    &labels,
                    mean.rtt.mean().map(seconds),
                    None,
                    mean.loss.mean(),
                    mean.goodput.mean(),
                    mean.quality.mean().unwrap_or(0.0),
                );
            }
        }
    }
    families.register(
        registry,
        "block",
        "links of a measured block (inside it, or leaving it for the rest of its zone): mean over its measured pairs",
    );
}

/// Running means of a set of pairs' figures, each over the pairs that
/// have it.
#[derive(Debug, Clone, Default)]
struct Mean {
    pairs: usize,
    rtt: Sum,
    loss: Sum,
    goodput: Sum,
    quality: Sum,
}

impl Mean {
    fn add(&mut self, p: &netaware_core::scored_pair::ScoredPair) {
        self.pairs += 1;
        self.rtt.add(p.summary.rtt_median_ms);
        self.loss.add(p.summary.loss_ratio);
        self.goodput.add(p.summary.throughput.map(|t| t.bps));
        self.quality.add(Some(p.quality));
    }
}

/// A sum and a count.
#[derive(Debug, Clone, Copy, Default)]
struct Sum {
    total: f64,
    count: usize,
}

impl Sum {
    fn add(&mut self, value: Option<f64>) {
        if let Some(value) = value.filter(|v| v.is_finite()) {
            self.total += value;
            self.count += 1;
        }
    }

    fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.total / self.count as f64)
    }
}

fn seconds(ms: f64) -> f64 {
    ms / 1e3
}

/// What a label set of a pair family must be.
trait PairLabelSet:
    EncodeLabelSet + Clone + std::hash::Hash + Eq + std::fmt::Debug + Send + Sync + 'static
{
}

impl PairLabelSet for ZonePairLabels {}
impl PairLabelSet for PairLabels {}
impl PairLabelSet for BlockLabels {}

/// The same five figures for zone pairs and node pairs.
struct PairFamilies<L: PairLabelSet> {
    rtt: Family<L, FloatGauge>,
    jitter: Family<L, FloatGauge>,
    loss: Family<L, FloatGauge>,
    goodput: Family<L, FloatGauge>,
    quality: Family<L, FloatGauge>,
}

impl<L: PairLabelSet> Default for PairFamilies<L> {
    fn default() -> Self {
        Self {
            rtt: Family::default(),
            jitter: Family::default(),
            loss: Family::default(),
            goodput: Family::default(),
            quality: Family::default(),
        }
    }
}

impl<L: PairLabelSet> PairFamilies<L> {
    /// Sets what is known; a figure that does not exist gets no sample
    /// rather than a made-up 0.
    fn set(
        &self,
        labels: &L,
        rtt_s: Option<f64>,
        jitter_s: Option<f64>,
        loss: Option<f64>,
        goodput_bps: Option<f64>,
        quality: f64,
    ) {
        for (family, value) in [
            (&self.rtt, rtt_s),
            (&self.jitter, jitter_s),
            (&self.loss, loss),
            (&self.goodput, goodput_bps.map(|bps| bps / 8.0)),
            (&self.quality, Some(quality)),
        ] {
            if let Some(value) = value {
                family.get_or_create(labels).set(value);
            }
        }
    }

    fn register(self, registry: &mut Registry, prefix: &str, what: &str) {
        registry.register(
            format!("{prefix}_rtt_seconds"),
            format!("Median round-trip time of the {what}"),
            self.rtt,
        );
        registry.register(
            format!("{prefix}_jitter_seconds"),
            format!("Jitter of the {what}"),
            self.jitter,
        );
        registry.register(
            format!("{prefix}_loss_ratio"),
            format!("Round-trip loss (0 to 1) of the {what}"),
            self.loss,
        );
        registry.register(
            format!("{prefix}_goodput_bytes_per_second"),
            format!("Last measured TCP goodput of the {what}"),
            self.goodput,
        );
        registry.register(
            format!("{prefix}_quality"),
            format!("Pair quality (0 to 1) of the {what}"),
            self.quality,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelConfig;
    use crate::fixtures::{hello, peer, window};
    use crate::state::CollectorState;
    use netaware_proto::v1::PeerWindow;

    fn state() -> CollectorState {
        let mut state = CollectorState::new(ModelConfig::default(), Vec::new());
        for (node, zone) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
            state.hello(&hello(node, zone, "127.0.0.2"), 1_000).unwrap();
        }
        let peer = |name: &str, rtt: f64, received: u32| PeerWindow {
            jitter_ms: 0.01,
            ..peer(name, rtt, 10, received)
        };
        let window = window(vec![
            peer("a2", 0.25, 10),
            // Measured by UDP, ICMP filtered on the way.
            PeerWindow {
                probe: netaware_proto::v1::Transport::Udp.into(),
                filtered: vec![netaware_proto::v1::Transport::Icmp.into()],
                ..peer("b1", 5.0, 8)
            },
        ]);
        state.ingest("a1", &window, 2_000).unwrap();
        state
    }

    fn facts(pair_series: usize) -> ScrapeFacts {
        ScrapeFacts {
            open_sessions: 2,
            throughput: ThroughputCounts {
                ordered: 4,
                measured: 3,
                failed: 1,
                ignored: 0,
            },
            unknown_peers: 2,
            pair_series,
            blocks: Vec::new(),
            last_seqs: vec![("a1".into(), 7)],
            placement: PlacementConfig::default(),
            faults: FaultFacts {
                networks: vec![Network::primary()],
                open: vec![(Network::primary(), FaultKind::Node)],
            },
        }
    }

    #[test]
    fn exports_zone_pairs_node_pairs_nodes_and_work_in_base_units() {
        let work = WorkMetrics::default();
        work.windows_accepted
            .get_or_create(&NodeLabels { node: "a1".into() })
            .inc();
        let text = exposition(&work, &state().snapshot(2_000), &facts(100));
        for line in [
            r#"netaware_pair_rtt_seconds{src="a1",dst="a2",src_zone="a",dst_zone="a",network="primary"} 0.00025"#,
            r#"netaware_pair_loss_ratio{src="a1",dst="b1",src_zone="a",dst_zone="b",network="primary"} 0.2"#,
            r#"netaware_zone_pair_rtt_seconds{src_zone="a",dst_zone="b"} 0.005"#,
            r#"netaware_node_stale{node="a1",zone="a"} 0"#,
            r#"netaware_pairs_probed{probe="icmp"} 1"#,
            r#"netaware_pairs_probed{probe="udp"} 1"#,
            r#"netaware_pairs_probed{probe="tcp"} 0"#,
            r#"netaware_pairs_filtered{transport="icmp"} 1"#,
            r#"netaware_pairs_filtered{transport="udp"} 0"#,
            r#"netaware_collector_windows_accepted_total{node="a1"} 1"#,
            r#"netaware_collector_sessions_open 2"#,
            r#"netaware_collector_window_seq{node="a1"} 7"#,
            r#"netaware_collector_throughput_results_total{outcome="failed"} 1"#,
            r#"netaware_faults{network="primary",kind="node"} 1"#,
            r#"netaware_faults{network="primary",kind="block_uplink"} 0"#,
            r#"netaware_faults{network="primary",kind="zone_label"} 0"#,
        ] {
            assert!(text.contains(line), "missing {line}:\n{text}");
        }
        assert!(text.contains("netaware_node_score{node=\"a1\",zone=\"a\"}"));
        let version = netaware_runtime::build_info::VERSION;
        assert!(text.contains(&format!(
            "netaware_collector_build_info{{version=\"{version}\"}} 1\n"
        )));
        // No goodput was measured: no sample rather than a made-up 0.
        assert!(!text.contains("netaware_pair_goodput_bytes_per_second{"));
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn every_networks_pairs_are_exported_each_with_its_network() {
        let primary = state().snapshot(2_000);
        // Another network's matrix: here the same figures, under its name.
        let rail = Network::parse("rail-0").unwrap();
        let text = exposition_of_networks(
            &WorkMetrics::default(),
            &primary,
            &[(&rail, &primary)],
            &facts(100),
        );
        for network in ["primary", "rail-0"] {
            let line = format!(
                r#"netaware_pair_rtt_seconds{{src="a1",dst="a2",src_zone="a",dst_zone="a",network="{network}"}} 0.00025"#
            );
            assert!(text.contains(&line), "missing {line}:\n{text}");
        }
        // Node and zone figures stay the primary network's, once.
        assert_eq!(text.matches("netaware_node_stale{node=\"a1\"").count(), 1);
    }

    #[test]
    fn a_node_lossy_to_its_zone_mates_is_exported_as_degraded() {
        let mut state = CollectorState::new(ModelConfig::default(), Vec::new());
        let nodes = [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b")];
        for (node, zone) in nodes {
            state.hello(&hello(node, zone, "127.0.0.2"), 1_000).unwrap();
        }
        for (node, _) in nodes {
            let peers = nodes
                .iter()
                .filter(|(peer, _)| *peer != node)
                // a3 loses 30% both ways.
                .map(|(other, _)| {
                    let received = if node == "a3" || *other == "a3" {
                        7
                    } else {
                        10
                    };
                    peer(other, 0.2, 10, received)
                })
                .collect();
            state.ingest(node, &window(peers), 2_000).unwrap();
        }
        let text = exposition(&WorkMetrics::default(), &state.snapshot(2_000), &facts(100));
        for line in [
            r#"netaware_node_degraded{node="a3",zone="a"} 1"#,
            r#"netaware_node_degraded{node="a1",zone="a"} 0"#,
            r#"netaware_node_degraded{node="a2",zone="a"} 0"#,
        ] {
            assert!(text.contains(line), "missing {line}:\n{text}");
        }
        // b1 has no zone-mate to be judged by.
        assert!(
            !text.contains(r#"netaware_node_degraded{node="b1""#),
            "{text}"
        );
        // Under a looser threshold, a3 is not degraded.
        let loose = ScrapeFacts {
            placement: PlacementConfig {
                loss_threshold: 0.5,
                ..PlacementConfig::default()
            },
            ..facts(100)
        };
        let text = exposition(&WorkMetrics::default(), &state.snapshot(2_000), &loose);
        assert!(text.contains(r#"netaware_node_degraded{node="a3",zone="a"} 0"#));
    }

    #[test]
    fn a_budget_smaller_than_the_pairs_keeps_the_worst_and_says_so() {
        // a1 -> a2 is clean, a1 -> b1 loses 20%: a budget of one pair
        // keeps the lossy one.
        let text = exposition(&WorkMetrics::default(), &state().snapshot(2_000), &facts(1));
        assert!(
            text.contains(r#"netaware_pair_loss_ratio{src="a1",dst="b1",src_zone="a",dst_zone="b",network="primary"} 0.2"#),
            "{text}"
        );
        assert!(!text.contains(r#"netaware_pair_rtt_seconds{src="a1",dst="a2""#));
        assert!(text.contains("netaware_pair_series_budget 1\n"), "{text}");
        assert!(text.contains("netaware_pairs_exported 1\n"), "{text}");
        assert!(text.contains("netaware_zone_pair_rtt_seconds{"));
        let none = exposition(&WorkMetrics::default(), &state().snapshot(2_000), &facts(0));
        assert!(!none.contains("netaware_pair_rtt_seconds{"));
        assert!(none.contains("netaware_pairs_exported 0\n"));
    }

    #[test]
    fn a_block_shows_its_inside_and_its_links_to_the_rest_of_its_zone() {
        let facts = ScrapeFacts {
            blocks: vec![BlockFacts {
                network: Network::primary(),
                zone: "a".into(),
                number: 1,
                nodes: vec!["a1".into()],
            }],
            ..facts(0)
        };
        let text = exposition(&WorkMetrics::default(), &state().snapshot(2_000), &facts);
        // a1's one pair to a zone-mate outside its block leaves it; the
        // pair to b1 is another zone's, and in no block figure.
        let leaving = r#"netaware_block_rtt_seconds{network="primary",zone="a",block="1",links="leaving"} 0.00025"#;
        assert!(text.contains(leaving), "{text}");
        assert!(text.contains(
            r#"netaware_block_loss_ratio{network="primary",zone="a",block="1",links="leaving"} 0.0"#
        ));
        // Nothing inside a block of one.
        assert!(!text.contains(r#"links="inside""#), "{text}");
    }

    /// At 5,000 nodes with 8 peers each (40,000 pairs) and the default
    /// budget, the pair series stay within it, and a planted lossy pair
    /// is among them, for the lossy-link alert to fire on.
    #[test]
    fn at_five_thousand_nodes_the_pair_series_fit_the_budget_and_hold_the_lossy_pair() {
        const NODES: usize = 5_000;
        const PEERS: usize = 8;
        let mut state = CollectorState::new(ModelConfig::default(), Vec::new());
        let name = |i: usize| format!("n{i:04}");
        for i in 0..NODES {
            let address = format!("10.0.{}.{}", i / 250, i % 250 + 1);
            let zone = format!("z{}", i % 10);
            state
                .hello(&hello(&name(i), &zone, &address), 1_000)
                .unwrap();
        }
        for i in 0..NODES {
            let peers = (1..=PEERS)
                .map(|k| {
                    let lossy = i == 1234 && k == 1;
                    let received = if lossy { 90 } else { 100 };
                    peer(&name((i + k * 10) % NODES), 0.2, 100, received)
                })
                .collect();
            state.ingest(&name(i), &window(peers), 2_000).unwrap();
        }
        let budget = crate::pair_series::DEFAULT_PAIR_SERIES;
        let text = exposition(
            &WorkMetrics::default(),
            &state.snapshot(2_000),
            &facts(budget),
        );
        let pair_series = text
            .lines()
            .filter(|l| l.starts_with("netaware_pair_") && l.contains('{'))
            .count();
        // Five figures at most per pair (no jitter or goodput here).
        assert!(
            pair_series > 0 && pair_series <= 5 * budget,
            "{pair_series}"
        );
        assert!(text.contains(&format!("netaware_pairs_exported {budget}\n")));
        let lossy = format!(
            r#"netaware_pair_loss_ratio{{src="{}",dst="{}",src_zone="z4",dst_zone="z4",network="primary"}} 0.1"#,
            name(1234),
            name(1244)
        );
        assert!(text.contains(&lossy), "missing {lossy}");
    }
}
