//! The one mapping between the core's types and the wire's, both ways.
//!
//! The collector sends scored matrices, zone summaries and rankings
//! (`*_to_wire`); the extender and the CLI read them back
//! (`*_from_wire`). Every enum has its pair of functions here and nowhere
//! else, so that both ends always agree on what a value means, and what a
//! consumer needs is carried on the wire rather than re-derived by it.
//!
//! Reading never trusts the sender: pairs that name unknown nodes are left
//! out, unit figures outside [0, 1] are clamped, and values of enums this
//! build does not know read as the most cautious one.

use std::collections::HashMap;

use netaware_core::coordinates::{Coordinate, DIMENSIONS};
use netaware_core::extender::{Neutral, Priority, RankAnswer};
use netaware_core::fault_kind::{FaultKind, FaultMetric};
use netaware_core::fault_marks::{BAD_UPLINK_FACTOR, BadUplink, FaultMark, FaultMarks};
use netaware_core::matrix::RttStats;
use netaware_core::matrix::{PairSummary, Throughput};
use netaware_core::measured_topology::{
    Block, BlockNode, LinkCost, MeasuredTopology, NetworkCosts, ZoneBlocks,
};
use netaware_core::network::{InvalidNetwork, InvalidNetworkList, Network};
use netaware_core::pair_rtt::{PairRtt, RttBasis};
use netaware_core::placement::{Basis, PlacementConfig, Placer};
use netaware_core::registry::AgentFacts;
use netaware_core::score::{Fallback, Source, Terms, Weights};
use netaware_core::scored::{NodeView, ScoredMatrix, ScoredPair, ZoneSummary};
use netaware_core::transport::{Transport, TransportSet};
use netaware_core::verdict::FailureCode;
use netaware_core::window::PeerWindow;
use netaware_core::{NodeInfo, NodeKind, UnixMillis};

use crate::v1 as pb;

const MS_PER_S: f64 = 1_000.0;

/// The wire form of a term's source.
pub fn source_to_wire(source: Source) -> pb::Source {
    match source {
        Source::Measured => pb::Source::Measured,
        Source::Estimated => pb::Source::Estimated,
        Source::ZoneAverage => pb::Source::ZoneAverage,
        Source::Unknown => pb::Source::Unknown,
    }
}

/// The wire form of a transport.
pub fn transport_to_wire(transport: Transport) -> pb::Transport {
    match transport {
        Transport::Icmp => pb::Transport::Icmp,
        Transport::Udp => pb::Transport::Udp,
        Transport::Tcp => pb::Transport::Tcp,
    }
}

/// A transport from the wire; `None` for a value this build does not know.
pub fn transport_from_wire(value: i32) -> Option<Transport> {
    Some(match pb::Transport::try_from(value).ok()? {
        pb::Transport::Icmp => Transport::Icmp,
        pb::Transport::Udp => Transport::Udp,
        pb::Transport::Tcp => Transport::Tcp,
    })
}

fn transports_to_wire(set: TransportSet) -> Vec<i32> {
    set.iter().map(|t| transport_to_wire(t).into()).collect()
}

/// A set of transports from the wire, leaving out values this build does
/// not know.
fn transports_from_wire(values: &[i32]) -> TransportSet {
    TransportSet::of(values.iter().filter_map(|v| transport_from_wire(*v)))
}

/// A term's source from the wire; anything unknown is `Unknown`.
pub fn source_from_wire(value: i32) -> Source {
    match pb::Source::try_from(value) {
        Ok(pb::Source::Measured) => Source::Measured,
        Ok(pb::Source::Estimated) => Source::Estimated,
        Ok(pb::Source::ZoneAverage) => Source::ZoneAverage,
        _ => Source::Unknown,
    }
}

/// The wire form of a node kind.
pub fn node_kind_to_wire(kind: NodeKind) -> pb::NodeKind {
    match kind {
        NodeKind::Agent => pb::NodeKind::Agent,
        NodeKind::Inventory => pb::NodeKind::Inventory,
    }
}

/// A node kind from the wire: only an explicit inventory node is one; a
/// node that says nothing is an agent (it reports, so it is not probed as
/// a bare host).
pub fn node_kind_from_wire(value: i32) -> NodeKind {
    match pb::NodeKind::try_from(value) {
        Ok(pb::NodeKind::Inventory) => NodeKind::Inventory,
        _ => NodeKind::Agent,
    }
}

/// The wire form of what a node's score was measured against.
pub fn basis_to_wire(basis: Basis) -> pb::Basis {
    match basis {
        Basis::Placed => pb::Basis::Placed,
        Basis::Zone => pb::Basis::Zone,
        Basis::Colocated => pb::Basis::Colocated,
    }
}

/// What a node's score was measured against, from the wire (`None` when
/// the sender did not say).
pub fn basis_from_wire(value: i32) -> Option<Basis> {
    match pb::Basis::try_from(value).ok()? {
        pb::Basis::Placed => Some(Basis::Placed),
        pb::Basis::Zone => Some(Basis::Zone),
        pb::Basis::Colocated => Some(Basis::Colocated),
        pb::Basis::Unspecified => None,
    }
}

/// The wire form of what a pair's RTT rests on.
pub fn rtt_basis_to_wire(basis: RttBasis) -> pb::RttBasis {
    match basis {
        RttBasis::Measured => pb::RttBasis::Measured,
        RttBasis::Estimated => pb::RttBasis::Estimated,
        RttBasis::ZoneAverage => pb::RttBasis::ZoneAverage,
        RttBasis::Unknown => pb::RttBasis::Unknown,
    }
}

/// What a pair's RTT rests on, from the wire (an unknown value: unknown).
pub fn rtt_basis_from_wire(value: i32) -> RttBasis {
    match pb::RttBasis::try_from(value) {
        Ok(pb::RttBasis::Measured) => RttBasis::Measured,
        Ok(pb::RttBasis::Estimated) => RttBasis::Estimated,
        Ok(pb::RttBasis::ZoneAverage) => RttBasis::ZoneAverage,
        _ => RttBasis::Unknown,
    }
}

/// The wire form of a pair's RTT, its ends named from `scored`.
pub fn pair_rtt_to_wire(scored: &ScoredMatrix, rtt: &PairRtt) -> pb::PairEstimate {
    let name = |i: usize| {
        scored
            .nodes()
            .get(i)
            .map(|n| n.info.name.clone())
            .unwrap_or_default()
    };
    pb::PairEstimate {
        src: name(rtt.src),
        dst: name(rtt.dst),
        rtt_ms: rtt.rtt_ms,
        error_ms: rtt.error_ms,
        basis: rtt_basis_to_wire(rtt.basis).into(),
    }
}

/// The wire form of a failure code (`None`: the node is feasible).
pub fn failure_to_wire(code: Option<FailureCode>) -> pb::Failure {
    match code {
        None => pb::Failure::None,
        Some(FailureCode::UnknownNode) => pb::Failure::UnknownNode,
        Some(FailureCode::Stale) => pb::Failure::Stale,
        Some(FailureCode::LossToWorker) => pb::Failure::LossToWorker,
        Some(FailureCode::GoodputToWorker) => pb::Failure::GoodputToWorker,
        Some(FailureCode::DegradedLoss) => pb::Failure::DegradedLoss,
        Some(FailureCode::DegradedGoodput) => pb::Failure::DegradedGoodput,
        Some(FailureCode::NodeFault) => pb::Failure::NodeFault,
        Some(FailureCode::OutsideZone) => pb::Failure::OutsideZone,
        Some(FailureCode::NoZone) => pb::Failure::NoZone,
    }
}

/// A failure code from the wire (`None`: no failure, or a code this build
/// does not know).
pub fn failure_from_wire(value: i32) -> Option<FailureCode> {
    match pb::Failure::try_from(value).ok()? {
        pb::Failure::None => None,
        pb::Failure::UnknownNode => Some(FailureCode::UnknownNode),
        pb::Failure::Stale => Some(FailureCode::Stale),
        pb::Failure::LossToWorker => Some(FailureCode::LossToWorker),
        pb::Failure::GoodputToWorker => Some(FailureCode::GoodputToWorker),
        pb::Failure::DegradedLoss => Some(FailureCode::DegradedLoss),
        pb::Failure::DegradedGoodput => Some(FailureCode::DegradedGoodput),
        pb::Failure::NodeFault => Some(FailureCode::NodeFault),
        pb::Failure::OutsideZone => Some(FailureCode::OutsideZone),
        pb::Failure::NoZone => Some(FailureCode::NoZone),
    }
}

fn ms_to_seconds(ms: u64) -> f64 {
    ms as f64 / MS_PER_S
}

fn seconds_to_ms(seconds: f64) -> Option<u64> {
    (seconds.is_finite() && seconds >= 0.0).then(|| (seconds * MS_PER_S).round() as u64)
}

/// A figure that must lie in [0, 1]; anything else from the wire is 0.
fn unit(value: f64) -> f64 {
    if value.is_finite() {
        value.clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// The wire form of a node.
pub fn node_to_wire(node: &NodeView) -> pb::Node {
    pb::Node {
        name: node.info.name.clone(),
        zone: node.info.zone.clone(),
        region: node.info.region.clone(),
        address: node.info.address.clone(),
        stale: node.stale,
        kind: node_kind_to_wire(node.info.kind).into(),
        last_report_age_s: node.last_report_age_ms.map(ms_to_seconds),
        coordinate: node.coordinate.as_ref().map(coordinate_to_wire),
        agent_version: node
            .agent
            .as_ref()
            .map(|a| a.version.clone())
            .unwrap_or_default(),
        clock_offset_ms: node.agent.as_ref().and_then(|a| a.clock_offset_ms),
    }
}

/// The wire form of a network coordinate.
pub fn coordinate_to_wire(coordinate: &Coordinate) -> pb::Coordinate {
    pb::Coordinate {
        vec: coordinate.vec.to_vec(),
        error: coordinate.error,
        height: coordinate.height,
        adjustment: coordinate.adjustment,
    }
}

/// A network coordinate from the wire; `None` unless it has every
/// dimension, finite figures, a positive error and no negative height.
pub fn coordinate_from_wire(coordinate: &pb::Coordinate) -> Option<Coordinate> {
    let vec: [f64; DIMENSIONS] = coordinate.vec.as_slice().try_into().ok()?;
    let finite = vec.iter().all(|x| x.is_finite())
        && coordinate.error.is_finite()
        && coordinate.height.is_finite()
        && coordinate.adjustment.is_finite();
    (finite && coordinate.error > 0.0 && coordinate.height >= 0.0).then_some(Coordinate {
        vec,
        error: coordinate.error,
        height: coordinate.height,
        adjustment: coordinate.adjustment,
    })
}

/// A node from the wire.
pub fn node_from_wire(node: &pb::Node) -> NodeView {
    NodeView {
        info: NodeInfo {
            name: node.name.clone(),
            address: node.address.clone(),
            zone: node.zone.clone(),
            region: node.region.clone(),
            kind: node_kind_from_wire(node.kind),
        },
        stale: node.stale,
        last_report_age_ms: node.last_report_age_s.and_then(seconds_to_ms),
        coordinate: node.coordinate.as_ref().and_then(coordinate_from_wire),
        agent: (!node.agent_version.is_empty() || node.clock_offset_ms.is_some()).then(|| {
            AgentFacts {
                version: node.agent_version.clone(),
                clock_offset_ms: node.clock_offset_ms,
            }
        }),
    }
}

/// The wire form of what an agent measured towards one peer in a window.
pub fn peer_window_to_wire(window: &PeerWindow) -> pb::PeerWindow {
    pb::PeerWindow {
        peer: window.peer.clone(),
        network: network_to_wire(&window.network),
        sent: window.sent,
        received: window.received,
        rtt_min_ms: window.rtt.min,
        rtt_median_ms: window.rtt.median,
        rtt_p90_ms: window.rtt.p90,
        rtt_p99_ms: window.rtt.p99,
        rtt_max_ms: window.rtt.max,
        jitter_ms: window.rtt.jitter,
        inbound_expected: window.inbound_expected,
        inbound_received: window.inbound_received,
        probe: transport_to_wire(window.probe).into(),
        filtered: transports_to_wire(window.filtered),
    }
}

/// A peer window from the wire, as sent: the collector checks it into the
/// matrix with [`PeerWindow::checked`], which refuses what no agent can
/// have measured. A transport this build does not know is an error
/// there: its figures must not be taken for another transport's.
pub fn peer_window_from_wire(window: &pb::PeerWindow) -> Result<PeerWindow, PeerWindowError> {
    Ok(PeerWindow {
        peer: window.peer.clone(),
        network: network_from_wire(&window.network)?,
        sent: window.sent,
        received: window.received,
        rtt: RttStats {
            min: window.rtt_min_ms,
            median: window.rtt_median_ms,
            p90: window.rtt_p90_ms,
            p99: window.rtt_p99_ms,
            max: window.rtt_max_ms,
            jitter: window.jitter_ms,
        },
        inbound_expected: window.inbound_expected,
        inbound_received: window.inbound_received,
        probe: transport_from_wire(window.probe).ok_or(UnknownTransport(window.probe))?,
        filtered: transports_from_wire(&window.filtered),
    })
}

/// A peer window names a transport this build does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("probe transport {0} is not one this collector knows (icmp 0, udp 1, tcp 2)")]
pub struct UnknownTransport(pub i32);

/// Why a peer window from the wire cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeerWindowError {
    /// A transport this build does not know.
    #[error(transparent)]
    Transport(#[from] UnknownTransport),
    /// A network name that no network can have.
    #[error(transparent)]
    Network(#[from] InvalidNetwork),
}

/// A network on the wire: its name; the primary network may be left
/// empty, as agents and requests that predate networks send it.
pub fn network_from_wire(name: &str) -> Result<Network, InvalidNetwork> {
    if name.is_empty() {
        Ok(Network::primary())
    } else {
        Network::parse(name)
    }
}

/// The networks of a Rank request: one name or a comma list, none the
/// primary.
pub fn networks_from_wire(list: &str) -> Result<Vec<Network>, InvalidNetworkList> {
    if list.is_empty() {
        Ok(vec![Network::primary()])
    } else {
        Network::parse_list(list)
    }
}

/// The wire form of a list of networks: their names, comma-separated.
pub fn networks_to_wire(networks: &[Network]) -> String {
    networks
        .iter()
        .map(Network::as_str)
        .collect::<Vec<_>>()
        .join(",")
}

/// A network's wire form: its name, always written out.
pub fn network_to_wire(network: &Network) -> String {
    network.as_str().to_owned()
}

/// The wire form of a scored pair, naming its ends by `name`.
pub fn pair_to_wire<'n>(
    pair: &ScoredPair,
    network: &Network,
    name: impl Fn(usize) -> &'n str,
    now: UnixMillis,
) -> pb::Pair {
    let s = &pair.summary;
    pb::Pair {
        network: network_to_wire(network),
        src: name(pair.src).to_owned(),
        dst: name(pair.dst).to_owned(),
        rtt_median_ms: s.rtt_median_ms,
        rtt_p99_ms: s.rtt_p99_ms,
        jitter_ms: s.jitter_ms,
        loss_ratio: s.loss_ratio,
        throughput_bps: s.throughput.map(|tp| tp.bps),
        throughput_retransmits: s.throughput.and_then(|tp| tp.retransmits),
        throughput_tcp_rtt_ms: s.throughput.and_then(|tp| tp.tcp_rtt_ms),
        throughput_age_s: s
            .throughput
            .map(|tp| ms_to_seconds(now.saturating_sub(tp.at))),
        samples: s.samples,
        age_s: pair.age_ms.map_or(-1.0, ms_to_seconds),
        quality: pair.quality,
        terms: Some(pb::Terms {
            delay: pair.terms.delay,
            loss: pair.terms.loss,
            throughput: pair.terms.throughput,
            delay_source: source_to_wire(pair.terms.delay_source).into(),
            loss_source: source_to_wire(pair.terms.loss_source).into(),
            throughput_source: source_to_wire(pair.terms.throughput_source).into(),
            dead: pair.terms.dead,
        }),
        stale: pair.stale,
        one_way_loss_ratio: s.one_way_loss_ratio,
        probe: s.probe.map(|t| transport_to_wire(t).into()),
        filtered: transports_to_wire(s.filtered),
    }
}

/// A scored pair from the wire, its ends looked up by `index`; `None` when
/// either end is unknown.
pub fn pair_from_wire(
    pair: &pb::Pair,
    index: impl Fn(&str) -> Option<usize>,
) -> Option<ScoredPair> {
    let (src, dst) = (index(&pair.src)?, index(&pair.dst)?);
    let terms = pair.terms.unwrap_or_default();
    Some(ScoredPair {
        src,
        dst,
        summary: PairSummary {
            rtt_median_ms: pair.rtt_median_ms,
            rtt_p99_ms: pair.rtt_p99_ms,
            jitter_ms: pair.jitter_ms,
            loss_ratio: pair.loss_ratio.map(unit),
            samples: pair.samples,
            last_end: None,
            throughput: pair.throughput_bps.map(|bps| Throughput {
                bps,
                at: 0,
                retransmits: pair.throughput_retransmits,
                tcp_rtt_ms: pair.throughput_tcp_rtt_ms,
            }),
            one_way_loss_ratio: pair.one_way_loss_ratio.map(unit),
            probe: pair.probe.and_then(transport_from_wire),
            filtered: transports_from_wire(&pair.filtered),
        },
        age_ms: seconds_to_ms(pair.age_s),
        stale: pair.stale,
        terms: Terms {
            delay: unit(terms.delay),
            loss: unit(terms.loss),
            throughput: unit(terms.throughput),
            delay_source: source_from_wire(terms.delay_source),
            loss_source: source_from_wire(terms.loss_source),
            throughput_source: source_from_wire(terms.throughput_source),
            dead: terms.dead,
        },
        quality: unit(pair.quality),
    })
}

/// The wire form of a placer's matrix: its nodes, its measured pairs, how
/// it estimates the others, and how it places.
pub fn matrix_to_wire(placer: &Placer, version: u64, now: UnixMillis) -> pb::Matrix {
    let scored = placer.matrix();
    let name = |i: usize| scored.nodes()[i].info.name.as_str();
    let fallback = settings_to_wire(scored.fallback(), placer.config());
    pb::Matrix {
        version,
        generated_unix_ms: now,
        nodes: scored.nodes().iter().map(node_to_wire).collect(),
        pairs: scored
            .pairs()
            .iter()
            .map(|pair| pair_to_wire(pair, &Network::primary(), name, now))
            .collect(),
        weights: fallback.weights,
        fallback_penalty: fallback.penalty,
        references: fallback.references,
        placement: fallback.placement,
        placement_faults: fault_marks_to_wire(placer.faults(), &Network::primary()),
        next_page_token: String::new(),
        collector_version: String::new(),
        followers: Vec::new(),
    }
}

/// How a matrix scores, estimates and places, as the wire says it (on the
/// first page of a matrix or a watch update).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct WireSettings {
    /// The terms' weights.
    pub weights: Option<pb::ScoreWeights>,
    /// The penalty of estimated terms.
    pub penalty: f64,
    /// The terms' references.
    pub references: Option<pb::ScoreReferences>,
    /// The placement settings.
    pub placement: Option<pb::PlacementSettings>,
}

impl WireSettings {
    /// What a matrix (its first page) says.
    pub fn of_matrix(matrix: &pb::Matrix) -> Self {
        Self {
            weights: matrix.weights,
            penalty: matrix.fallback_penalty,
            references: matrix.references,
            placement: matrix.placement,
        }
    }

    /// What a watch update (its first page) says.
    pub fn of_update(update: &pb::MatrixUpdate) -> Self {
        Self {
            weights: update.weights,
            penalty: update.fallback_penalty,
            references: update.references,
            placement: update.placement,
        }
    }
}

/// The wire form of how a scored matrix scores and estimates pairs and of
/// how it is placed.
pub fn settings_to_wire(fallback: Fallback, placement: &PlacementConfig) -> WireSettings {
    WireSettings {
        weights: Some(pb::ScoreWeights {
            delay: fallback.weights.delay,
            loss: fallback.weights.loss,
            throughput: fallback.weights.throughput,
        }),
        penalty: fallback.penalty,
        references: Some(pb::ScoreReferences {
            delay_reference_ms: fallback.delay_reference_ms,
            loss_ceiling: fallback.loss_ceiling,
            throughput_reference_bps: fallback.throughput_reference_bps,
        }),
        placement: Some(placement_to_wire(placement)),
    }
}

/// The wire form of the placement settings.
pub fn placement_to_wire(placement: &PlacementConfig) -> pb::PlacementSettings {
    pb::PlacementSettings {
        loss_threshold: placement.loss_threshold,
        out_of_zone_factor: placement.out_of_zone_factor,
        min_goodput_fraction: placement.min_goodput_fraction,
        strict_zone: placement.strict_zone,
    }
}

/// The placement settings from the wire: a ratio outside [0, 1] (or not a
/// number) is the default's, and a collector that sent none is taken to
/// place by the defaults.
pub fn placement_from_wire(wire: Option<pb::PlacementSettings>) -> PlacementConfig {
    let default = PlacementConfig::default();
    let Some(wire) = wire else { return default };
    let ratio = |value: f64, default: f64| {
        if value.is_finite() && (0.0..=1.0).contains(&value) {
            value
        } else {
            default
        }
    };
    PlacementConfig {
        loss_threshold: ratio(wire.loss_threshold, default.loss_threshold),
        out_of_zone_factor: ratio(wire.out_of_zone_factor, default.out_of_zone_factor),
        min_goodput_fraction: ratio(wire.min_goodput_fraction, default.min_goodput_fraction),
        strict_zone: wire.strict_zone,
    }
}

/// How a wire matrix scores and estimates pairs; figures that make no
/// sense (negative, not finite, all weights 0, references not above 0) or
/// that an older collector did not send give the defaults.
pub fn fallback_from_wire(wire: WireSettings) -> Fallback {
    let default = Fallback::default();
    let weights = wire
        .weights
        .map(|w| Weights {
            delay: w.delay,
            loss: w.loss,
            throughput: w.throughput,
        })
        .filter(|w| {
            let all = [w.delay, w.loss, w.throughput];
            all.iter().all(|x| x.is_finite() && *x >= 0.0) && all.iter().any(|x| *x > 0.0)
        })
        .unwrap_or(default.weights);
    let penalty = Some(wire.penalty)
        .filter(|p| p.is_finite() && (0.0..=1.0).contains(p))
        .unwrap_or(default.penalty);
    let positive = |value: Option<f64>, default: f64| {
        value
            .filter(|v| v.is_finite() && *v > 0.0)
            .unwrap_or(default)
    };
    let references = wire.references;
    Fallback {
        weights,
        penalty,
        delay_reference_ms: positive(
            references.map(|r| r.delay_reference_ms),
            default.delay_reference_ms,
        ),
        loss_ceiling: positive(references.map(|r| r.loss_ceiling), default.loss_ceiling),
        throughput_reference_bps: positive(
            references.map(|r| r.throughput_reference_bps),
            default.throughput_reference_bps,
        ),
    }
}

/// The scored matrix a wire matrix describes.
pub fn matrix_from_wire(matrix: &pb::Matrix) -> ScoredMatrix {
    scored_from_wire(
        &matrix.nodes,
        &matrix.pairs,
        fallback_from_wire(WireSettings::of_matrix(matrix)),
    )
}

/// The placer a wire matrix describes, placing by the settings it carries,
/// so that a consumer runs the very placement the collector runs.
pub fn placer_from_wire(matrix: &pb::Matrix) -> Placer {
    Placer::new(
        matrix_from_wire(matrix),
        placement_from_wire(matrix.placement),
    )
    .with_faults(fault_marks_from_wire(&matrix.placement_faults))
}

/// The scored matrix of wire nodes and pairs (however they arrived).
pub fn scored_from_wire<'p>(
    nodes: &[pb::Node],
    pairs: impl IntoIterator<Item = &'p pb::Pair>,
    fallback: Fallback,
) -> ScoredMatrix {
    let nodes: Vec<NodeView> = nodes.iter().map(node_from_wire).collect();
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.info.name.as_str(), i))
        .collect();
    let pairs = pairs
        .into_iter()
        .filter_map(|p| pair_from_wire(p, |name| index.get(name).copied()))
        .collect();
    ScoredMatrix::from_parts(nodes, pairs, fallback)
}

/// The wire form of the zone summary.
pub fn zones_to_wire(summary: &ZoneSummary) -> pb::ZoneSummary {
    pb::ZoneSummary {
        zones: summary
            .zones
            .iter()
            .map(|z| pb::Zone {
                name: z.name.clone(),
                region: z.region.clone(),
                nodes: z.nodes,
                fresh_nodes: z.fresh_nodes,
                unreached_nodes: z.unreached_nodes,
                cannot_measure: z.cannot_measure,
            })
            .collect(),
        unreached_nodes: summary.unreached_nodes,
        cannot_measure: summary.cannot_measure,
        zone_pairs: summary
            .zone_pairs
            .iter()
            .map(|z| pb::ZonePair {
                src_zone: z.src_zone.clone(),
                dst_zone: z.dst_zone.clone(),
                rtt_median_ms: z.rtt_median_ms,
                loss_ratio: z.loss_ratio,
                throughput_bps: z.throughput_bps,
                quality: z.quality,
                pairs: z.pairs,
                measured_pairs: z.measured_pairs,
            })
            .collect(),
    }
}

/// The wire form of a fault.
pub fn fault_to_wire(fault: &netaware_core::faults::tracker::Fault) -> pb::Fault {
    pb::Fault {
        kind: fault.kind.as_str().to_owned(),
        nodes: fault.nodes.clone(),
        network: network_to_wire(&fault.network),
        metric: fault.metric.as_str().to_owned(),
        value: fault.value,
        baseline: fault.baseline,
        confidence: fault.confidence,
        since_unix_ms: fault.since_unix_ms,
        evidence: fault
            .evidence
            .iter()
            .map(|e| pb::FaultEvidence {
                src: e.src.clone(),
                dst: e.dst.clone(),
                value: e.value,
                baseline: e.baseline,
            })
            .collect(),
        zones: fault.zones.clone(),
        block: fault.block.unwrap_or(0),
        measures_like: fault.measures_like.clone().unwrap_or_default(),
    }
}

/// A fault from the wire; `None` for one of a kind, metric or network
/// this build does not know, or with a figure that is not a finite
/// number (confidence outside [0, 1] included).
pub fn fault_from_wire(fault: &pb::Fault) -> Option<netaware_core::faults::tracker::Fault> {
    use netaware_core::faults::tracker::{Fault, NamedEvidence};
    let finite = |v: f64| v.is_finite().then_some(v);
    Some(Fault {
        kind: FaultKind::from_name(&fault.kind)?,
        network: network_from_wire(&fault.network).ok()?,
        metric: FaultMetric::from_name(&fault.metric)?,
        nodes: fault.nodes.clone(),
        zones: fault.zones.clone(),
        block: (fault.kind == FaultKind::BlockUplink.as_str()).then_some(fault.block),
        measures_like: (!fault.measures_like.is_empty()).then(|| fault.measures_like.clone()),
        value: finite(fault.value)?,
        baseline: finite(fault.baseline)?,
        confidence: Some(fault.confidence).filter(|c| (0.0..=1.0).contains(c))?,
        evidence: fault
            .evidence
            .iter()
            .filter_map(|e| {
                Some(NamedEvidence {
                    src: e.src.clone(),
                    dst: e.dst.clone(),
                    value: finite(e.value)?,
                    baseline: finite(e.baseline)?,
                })
            })
            .collect(),
        since_unix_ms: fault.since_unix_ms,
    })
}

/// The wire form of the faults placement acts on, found on `network`
/// (without evidence, confidence or time: a follower places by them and
/// does not show them).
pub fn fault_marks_to_wire(marks: &FaultMarks, network: &Network) -> Vec<pb::Fault> {
    marks
        .marks
        .iter()
        .map(|mark| match mark {
            FaultMark::Node {
                node,
                metric,
                value,
                baseline,
            } => pb::Fault {
                kind: FaultKind::Node.as_str().to_owned(),
                nodes: vec![node.clone()],
                network: network_to_wire(network),
                metric: metric.as_str().to_owned(),
                value: *value,
                baseline: *baseline,
                ..pb::Fault::default()
            },
            FaultMark::BlockUplink {
                zone,
                block,
                nodes,
                metric,
                value,
                baseline,
            } => pb::Fault {
                kind: FaultKind::BlockUplink.as_str().to_owned(),
                nodes: nodes.clone(),
                network: network_to_wire(network),
                metric: metric.as_str().to_owned(),
                value: *value,
                baseline: *baseline,
                zones: vec![zone.clone()],
                block: *block,
                ..pb::Fault::default()
            },
        })
        .collect()
}

/// The faults placement acts on, from the wire: a fault of another kind,
/// or of a kind or metric this build does not know, or with a figure that
/// is not a finite non-negative number, is left out (placing as if it
/// were not there is what a follower without it would do).
pub fn fault_marks_from_wire(faults: &[pb::Fault]) -> FaultMarks {
    let figure = |v: f64| (v.is_finite() && v >= 0.0).then_some(v);
    let marks = faults
        .iter()
        .filter_map(|fault| {
            let metric = FaultMetric::from_name(&fault.metric)?;
            let (value, baseline) = (figure(fault.value)?, figure(fault.baseline)?);
            match FaultKind::from_name(&fault.kind)? {
                FaultKind::Node => Some(FaultMark::Node {
                    node: fault.nodes.first()?.clone(),
                    metric,
                    value,
                    baseline,
                }),
                FaultKind::BlockUplink => Some(FaultMark::BlockUplink {
                    zone: fault.zones.first()?.clone(),
                    block: fault.block,
                    nodes: fault.nodes.clone(),
                    metric,
                    value,
                    baseline,
                }),
                FaultKind::ZoneLink | FaultKind::Pair | FaultKind::ZoneLabel => None,
            }
        })
        .collect();
    FaultMarks { marks }
}

/// The wire form of a bad uplink a candidate's worker would cross.
fn bad_uplink_to_wire(uplink: &BadUplink<'_>) -> pb::BadUplink {
    pb::BadUplink {
        zone: uplink.zone.to_owned(),
        block: uplink.block,
        metric: uplink.metric.as_str().to_owned(),
        value: uplink.value,
        factor: BAD_UPLINK_FACTOR,
    }
}

/// The wire form of the measured topology, as of `observed_unix_ms`,
/// moved after `confirmations` rounds.
pub fn topology_to_wire(
    topology: &MeasuredTopology,
    observed_unix_ms: UnixMillis,
    confirmations: u32,
) -> pb::Topology {
    let costs = |costs: &[LinkCost]| {
        costs
            .iter()
            .map(|c| pb::LinkCost {
                origin: c.origin.clone(),
                destination: c.destination.clone(),
                rtt_p90_ms: c.rtt_p90_ms,
                goodput_bps: c.goodput_bps,
                pairs: c.pairs,
            })
            .collect()
    };
    pb::Topology {
        zones: topology
            .zones
            .iter()
            .map(|zone| pb::TopologyZone {
                name: zone.zone.clone(),
                region: zone.region.clone(),
                blocks: zone
                    .blocks
                    .iter()
                    .map(|block| pb::Block {
                        number: block.number,
                        nodes: block
                            .nodes
                            .iter()
                            .map(|node| pb::BlockNode {
                                name: node.name.clone(),
                                degraded: node.degraded,
                                bad_uplink: node.bad_uplink,
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect(),
        zone_costs: costs(&topology.costs.zones),
        region_costs: costs(&topology.costs.regions),
        observed_unix_ms,
        confirmations,
    }
}

/// The measured topology from the wire. Nodes and zones without a name,
/// a node named twice (after its first block), blocks numbered 0 or
/// twice, and costs whose RTT is not a finite figure of at least 0 are
/// left out; a goodput that is not finite and positive reads as unknown.
pub fn topology_from_wire(topology: pb::Topology) -> MeasuredTopology {
    let mut seen = std::collections::HashSet::new();
    let costs = |costs: Vec<pb::LinkCost>| {
        costs
            .into_iter()
            .filter(|c| c.rtt_p90_ms.is_finite() && c.rtt_p90_ms >= 0.0)
            .filter(|c| !c.origin.is_empty() && !c.destination.is_empty())
            .map(|c| LinkCost {
                origin: c.origin,
                destination: c.destination,
                rtt_p90_ms: c.rtt_p90_ms,
                goodput_bps: c.goodput_bps.filter(|g| g.is_finite() && *g > 0.0),
                pairs: c.pairs,
            })
            .collect()
    };
    let mut zones: Vec<ZoneBlocks> = topology
        .zones
        .into_iter()
        .filter(|zone| !zone.name.is_empty())
        .map(|zone| {
            let mut numbers = std::collections::HashSet::new();
            let mut blocks: Vec<Block> = zone
                .blocks
                .into_iter()
                .filter(|block| block.number > 0 && numbers.insert(block.number))
                .map(|block| Block {
                    number: block.number,
                    nodes: block
                        .nodes
                        .into_iter()
                        .filter(|node| !node.name.is_empty() && seen.insert(node.name.clone()))
                        .map(|node| BlockNode {
                            name: node.name,
                            degraded: node.degraded,
                            bad_uplink: node.bad_uplink,
                        })
                        .collect(),
                })
                .filter(|block| !block.nodes.is_empty())
                .collect();
            blocks.sort_by_key(|block| block.number);
            ZoneBlocks {
                zone: zone.name,
                region: zone.region,
                blocks,
            }
        })
        .collect();
    zones.sort_by(|a, b| a.zone.cmp(&b.zone));
    zones.dedup_by(|a, b| a.zone == b.zone);
    MeasuredTopology {
        zones,
        costs: NetworkCosts {
            zones: costs(topology.zone_costs),
            regions: costs(topology.region_costs),
        },
    }
}

/// The neutral answer a Rank response names; `None` for an empty field
/// (or one this version does not know).
pub fn neutral_from_wire(name: &str) -> Option<Neutral> {
    Neutral::from_name(name)
}

/// The wire form of a Rank answer: every verdict with its reason for
/// people and its code for programs, what the extender answers for each
/// node, the settings it was decided by, and whether it is neutral.
pub fn rank_answer_to_wire(
    answer: &RankAnswer<'_>,
    placement: &PlacementConfig,
) -> pb::RankResponse {
    let RankAnswer {
        ranking,
        priorities,
        next,
        neutral,
    } = answer;
    let priority = |candidate: usize| {
        priorities.get(candidate).copied().unwrap_or(Priority {
            score: 0,
            passes_filter: true,
        })
    };
    pb::RankResponse {
        zone: ranking.zone.clone().unwrap_or_default(),
        zone_reason: ranking.zone_reason.to_string(),
        placement: Some(placement_to_wire(placement)),
        next: next.unwrap_or_default().to_owned(),
        neutral: neutral.map(Neutral::as_str).unwrap_or_default().to_owned(),
        nodes: ranking
            .nodes
            .iter()
            .map(|n| pb::RankedNode {
                extender_score: priority(n.candidate).score,
                passes_filter: priority(n.candidate).passes_filter,
                name: n.name.to_owned(),
                zone: n.zone.to_owned(),
                score: n.score,
                feasible: n.feasible(),
                reason: n
                    .failure
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
                failure: failure_to_wire(n.failure.as_ref().map(|f| f.code())).into(),
                terms: Some(pb::NodeTerms {
                    quality: n.terms.quality,
                    delay: n.terms.delay,
                    loss: n.terms.loss,
                    throughput: n.terms.throughput,
                    pairs: n.terms.pairs,
                    fallback_pairs: n.terms.fallback_pairs,
                    basis: basis_to_wire(n.terms.basis).into(),
                    in_chosen_zone: n.terms.in_chosen_zone,
                }),
                bad_uplink: n.bad_uplink.as_ref().map(bad_uplink_to_wire),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netaware_core::coordinates::Coordinates;
    use netaware_core::extender::{JobContext, decide, rank_answer};
    use netaware_core::matrix::{PairMatrix, PairWindow};
    use netaware_core::node_estimate::End;
    use netaware_core::placement::JobRequest;
    use netaware_core::registry::Registry;
    use netaware_core::score::ScoreConfig;
    use proptest::prelude::*;

    const NOW: UnixMillis = 100_000;

    /// One measured pair: (src, dst, median RTT, received of 100, goodput).
    type Measured = (usize, usize, f64, u32, Option<f64>);

    fn build(zones: &[usize], measured: &[Measured], stale_agent: Option<usize>) -> ScoredMatrix {
        let mut registry = Registry::new();
        for (i, zone) in zones.iter().enumerate() {
            let info = NodeInfo {
                name: format!("n{i}"),
                address: format!("10.0.0.{i}"),
                zone: format!("z{zone}"),
                region: "r".into(),
                kind: NodeKind::Agent,
            };
            // A stale agent last said hello long ago.
            let seen = if stale_agent == Some(i) { 1_000 } else { NOW };
            registry.agent_hello(info, 1_000, seen).unwrap();
        }
        let mut pairs = PairMatrix::new(6);
        let mut coordinates = Coordinates::default();
        for &(src, dst, median, received, goodput) in measured {
            let (src, dst) = (format!("n{src}"), format!("n{dst}"));
            let rtt = RttStats {
                min: median,
                median,
                p90: median,
                p99: median * 2.0,
                max: median * 2.0,
                jitter: median / 10.0,
            };
            let window = PairWindow::new(NOW - 500, 100, received, rtt).unwrap();
            pairs.record(&src, &dst, window);
            coordinates.observe(&src, &dst, median).unwrap();
            if let Some(bps) = goodput {
                let throughput = Throughput {
                    bps,
                    at: NOW - 1_000,
                    retransmits: Some(3),
                    tcp_rtt_ms: Some(median),
                };
                pairs.record_throughput(&src, &dst, throughput);
            }
        }
        // References other than the defaults: a follower must read them
        // from the wire to estimate as the collector does.
        let config = ScoreConfig {
            delay_reference_ms: 2.0,
            loss_ceiling: 0.1,
            throughput_reference_bps: 25e9,
            ..ScoreConfig::default()
        };
        ScoredMatrix::score(&registry, &pairs.readings(), &config, &coordinates, NOW)
    }

    fn cluster() -> impl Strategy<Value = (Vec<usize>, Vec<Measured>, Option<usize>)> {
        (2usize..9).prop_flat_map(|n| {
            let zones = prop::collection::vec(0usize..3, n);
            let pair = (
                0..n,
                0..n,
                0.05f64..30.0,
                prop_oneof![Just(100u32), Just(0u32), 50u32..100],
                prop::option::of(1e8f64..2e10),
            )
                .prop_filter("no self pair", |(s, d, ..)| s != d);
            let measured = prop::collection::vec(pair, 0..(n * n));
            let stale = prop::option::of(0..n);
            (zones, measured, stale)
        })
    }

    /// Any placement settings, the defaults' neighbourhood and the edges.
    fn settings() -> impl Strategy<Value = PlacementConfig> {
        let ratio = || prop_oneof![Just(0.0), Just(1.0), 0.0f64..1.0];
        (ratio(), ratio(), ratio(), any::<bool>()).prop_map(
            |(loss_threshold, out_of_zone_factor, min_goodput_fraction, strict_zone)| {
                PlacementConfig {
                    loss_threshold: loss_threshold * 0.5,
                    out_of_zone_factor,
                    min_goodput_fraction,
                    strict_zone,
                }
            },
        )
    }

    proptest! {
        /// One placement everywhere, for any settings: what the collector
        /// sends is what the extender places on, by the settings it sends,
        /// and the collector's Rank answer (what `netaware rank` and
        /// `netaware explain` print) says exactly what the extender
        /// decides: the same pairs, estimates, verdicts, filter, scores
        /// and next worker.
        #[test]
        fn rank_explain_and_the_extender_agree_for_any_settings(
            (zones, measured, stale) in cluster(),
            size in 1usize..5,
            placed_count in 0usize..3,
            config in settings(),
            (faulty, behind) in (
                proptest::collection::vec(0usize..8, 0..3),
                proptest::collection::vec(0usize..8, 0..4),
            ),
        ) {
            let faults = planted_faults(zones.len(), &faulty, &behind);
            let collector =
                Placer::new(build(&zones, &measured, stale), config).with_faults(faults);
            let wire = matrix_to_wire(&collector, 7, NOW);
            let follower = placer_from_wire(&wire);
            prop_assert_eq!(follower.config(), collector.config());
            prop_assert_eq!(follower.faults(), collector.faults());
            let (scored, back) = (collector.matrix(), follower.matrix());

            prop_assert_eq!(back.nodes(), scored.nodes());
            prop_assert_eq!(back.pairs().len(), scored.pairs().len());
            for (a, b) in scored.pairs().iter().zip(back.pairs()) {
                prop_assert_eq!((a.src, a.dst, a.stale, a.age_ms), (b.src, b.dst, b.stale, b.age_ms));
                prop_assert_eq!(a.terms, b.terms);
                prop_assert_eq!(a.quality, b.quality);
                prop_assert_eq!(a.fresh_goodput(), b.fresh_goodput());
                prop_assert_eq!(a.summary.loss_ratio, b.summary.loss_ratio);
            }
            prop_assert_eq!(back.health(), scored.health());
            prop_assert_eq!(back.fallback(), scored.fallback());
            // Every pair nobody measured is estimated the same at both ends,
            // and against a typical node of each zone.
            for src in 0..zones.len() {
                for dst in 0..zones.len() {
                    prop_assert_eq!(back.estimate(src, dst), scored.estimate(src, dst));
                }
                for zone in 0..scored.zone_count() {
                    let node = End::Node(src);
                    let (sent, read) = (scored.zone_group(zone).unwrap(), back.zone_group(zone).unwrap());
                    prop_assert_eq!(sent, read);
                    prop_assert_eq!(back.estimate_between(node, End::Group(read)), scored.estimate_between(node, End::Group(sent)));
                    prop_assert_eq!(back.estimate_between(End::Group(read), node), scored.estimate_between(End::Group(sent), node));
                }
            }

            let placed: Vec<String> = (0..placed_count.min(zones.len())).map(|i| format!("n{i}")).collect();
            let request = JobRequest { size, placed: &placed, candidates: None, strict_zone: false };
            let answer = rank_answer(&collector, &request);
            prop_assert_eq!(&answer, &rank_answer(&follower, &request));
            let sent = rank_answer_to_wire(&answer, collector.config());
            prop_assert_eq!(placement_from_wire(sent.placement), config);

            // The extender, on the follower's copy, with the candidates a
            // Rank without candidates ranks: every agent not placed.
            let candidates: Vec<String> = (0..zones.len())
                .map(|i| format!("n{i}"))
                .filter(|name| !placed.contains(name))
                .collect();
            let job = JobContext { size, placed: placed.clone() };
            let decision = decide(Some(&follower), Some(&job), &candidates);
            prop_assert_eq!(&decision, &decide(Some(&collector), Some(&job), &candidates));
            prop_assert_eq!(sent.nodes.len(), candidates.len());
            for node in &sent.nodes {
                let place = candidates.iter().position(|c| *c == node.name).unwrap();
                prop_assert_eq!(node.extender_score, decision.scores[place].1);
                let passes = decision.passing.contains(&node.name.as_str());
                prop_assert_eq!(node.passes_filter, passes);
                if !passes {
                    prop_assert_eq!(&node.reason, &decision.failed[node.name.as_str()].to_string());
                }
            }
            let next = decision.next.map(|place| candidates[place].as_str()).unwrap_or_default();
            prop_assert_eq!(sent.next.as_str(), next);
        }
    }

    /// Node faults on the nodes `faulty` names and a bad uplink behind
    /// which sit the nodes `behind` names (indices taken modulo `n`).
    fn planted_faults(n: usize, faulty: &[usize], behind: &[usize]) -> FaultMarks {
        let name = |i: &usize| format!("n{}", i % n.max(1));
        let mut marks: Vec<FaultMark> = faulty
            .iter()
            .map(|i| FaultMark::Node {
                node: name(i),
                metric: FaultMetric::Loss,
                value: 0.02,
                baseline: 0.001,
            })
            .collect();
        if !behind.is_empty() {
            marks.push(FaultMark::BlockUplink {
                zone: "z0".into(),
                block: 3,
                nodes: behind.iter().map(name).collect(),
                metric: FaultMetric::Delay,
                value: 0.4,
                baseline: 0.2,
            });
        }
        FaultMarks { marks }
    }

    #[test]
    fn a_fault_goes_to_the_wire_and_back_and_nonsense_is_refused() {
        use netaware_core::faults::tracker::{Fault, NamedEvidence};
        let fault = Fault {
            kind: FaultKind::BlockUplink,
            network: Network::primary(),
            metric: FaultMetric::Loss,
            nodes: vec!["a4".into(), "a5".into()],
            zones: vec!["zone-a".into()],
            block: Some(2),
            measures_like: None,
            value: 0.05,
            baseline: 0.001,
            confidence: 0.9,
            evidence: vec![NamedEvidence {
                src: "a4".into(),
                dst: "b1".into(),
                value: 0.06,
                baseline: 0.001,
            }],
            since_unix_ms: 17,
        };
        let wire = fault_to_wire(&fault);
        assert_eq!(fault_from_wire(&wire), Some(fault));
        for edit in [
            (|f: &mut pb::Fault| f.confidence = 2.0) as fn(&mut pb::Fault),
            |f| f.value = f64::INFINITY,
            |f| f.kind = "gremlin".into(),
            |f| f.network = "not a network!".into(),
        ] {
            let mut bad = wire.clone();
            edit(&mut bad);
            assert_eq!(fault_from_wire(&bad), None, "{bad:?}");
        }
    }

    #[test]
    fn faults_that_make_no_sense_or_are_not_for_placement_are_left_out() {
        let sent = planted_faults(4, &[1], &[2, 3]);
        let mut wire = fault_marks_to_wire(&sent, &Network::primary());
        assert_eq!(fault_marks_from_wire(&wire), sent);
        let bad = |edit: fn(&mut pb::Fault)| {
            let mut fault = wire[0].clone();
            edit(&mut fault);
            fault
        };
        wire.extend([
            bad(|f| f.value = f64::NAN),
            bad(|f| f.baseline = -1.0),
            bad(|f| f.metric = "smell".into()),
            bad(|f| f.kind = "pair".into()),
            bad(|f| f.kind = "cosmic_ray".into()),
            bad(|f| f.nodes.clear()),
        ]);
        assert_eq!(fault_marks_from_wire(&wire), sent);
    }

    #[test]
    fn every_enum_value_maps_both_ways() {
        for source in [Source::Measured, Source::ZoneAverage, Source::Unknown] {
            assert_eq!(source_from_wire(source_to_wire(source).into()), source);
        }
        for kind in [NodeKind::Agent, NodeKind::Inventory] {
            assert_eq!(node_kind_from_wire(node_kind_to_wire(kind).into()), kind);
        }
        for basis in [Basis::Placed, Basis::Zone, Basis::Colocated] {
            assert_eq!(basis_from_wire(basis_to_wire(basis).into()), Some(basis));
        }
        assert_eq!(failure_from_wire(failure_to_wire(None).into()), None);
        for code in FailureCode::ALL {
            assert_eq!(
                failure_from_wire(failure_to_wire(Some(code)).into()),
                Some(code)
            );
        }
    }

    #[test]
    fn hostile_figures_are_clamped_and_unknown_ends_dropped() {
        let node = |name: &str| pb::Node {
            name: name.into(),
            kind: 99,
            ..pb::Node::default()
        };
        let pair = |src: &str, dst: &str| pb::Pair {
            src: src.into(),
            dst: dst.into(),
            quality: f64::NAN,
            loss_ratio: Some(7.0),
            age_s: -3.0,
            terms: Some(pb::Terms {
                delay: -1.0,
                loss: f64::INFINITY,
                delay_source: 42,
                ..pb::Terms::default()
            }),
            ..pb::Pair::default()
        };
        let wire = pb::Matrix {
            nodes: vec![node("a"), node("b")],
            pairs: vec![pair("a", "b"), pair("a", "ghost")],
            ..pb::Matrix::default()
        };
        let read = matrix_from_wire(&wire);
        assert_eq!(read.nodes()[0].info.kind, NodeKind::Agent);
        assert_eq!(read.pairs().len(), 1);
        let p = &read.pairs()[0];
        assert_eq!(p.quality, 0.0);
        assert_eq!(p.summary.loss_ratio, Some(1.0));
        assert_eq!(p.age_ms, None);
        assert_eq!((p.terms.delay, p.terms.loss), (0.0, 0.0));
        assert_eq!(p.terms.delay_source, Source::Unknown);
    }

    fn sample_topology() -> MeasuredTopology {
        let node = |name: &str, degraded| BlockNode {
            name: name.into(),
            degraded,
            bad_uplink: name == "a3",
        };
        MeasuredTopology {
            zones: vec![ZoneBlocks {
                zone: "zone-a".into(),
                region: "region-1".into(),
                blocks: vec![
                    Block {
                        number: 1,
                        nodes: vec![node("a1", false), node("a2", true)],
                    },
                    Block {
                        number: 3,
                        nodes: vec![node("a3", false)],
                    },
                ],
            }],
            costs: NetworkCosts {
                zones: vec![LinkCost {
                    origin: "zone-a".into(),
                    destination: "zone-b".into(),
                    rtt_p90_ms: 5.25,
                    goodput_bps: Some(1e9),
                    pairs: 9,
                }],
                regions: Vec::new(),
            },
        }
    }

    #[test]
    fn the_topology_goes_to_the_wire_and_back_unchanged() {
        let topology = sample_topology();
        let wire = topology_to_wire(&topology, 1234, 3);
        assert_eq!((wire.observed_unix_ms, wire.confirmations), (1234, 3));
        assert_eq!(topology_from_wire(wire), topology);
    }

    #[test]
    fn a_topology_from_the_wire_loses_what_makes_no_sense() {
        let mut wire = topology_to_wire(&sample_topology(), 1234, 3);
        // a1 again in another block, a block numbered 0, a cost of NaN and
        // a negative goodput.
        wire.zones[0].blocks.push(pb::Block {
            number: 0,
            nodes: vec![pb::BlockNode {
                name: "a9".into(),
                ..Default::default()
            }],
        });
        wire.zones[0].blocks[1].nodes.push(pb::BlockNode {
            name: "a1".into(),
            degraded: true,
            bad_uplink: true,
        });
        wire.zone_costs[0].goodput_bps = Some(-1.0);
        let mut nan = wire.zone_costs[0].clone();
        nan.rtt_p90_ms = f64::NAN;
        wire.zone_costs.push(nan);
        let topology = topology_from_wire(wire);
        let names: Vec<&str> = topology.nodes().map(|(_, _, n)| n.name.as_str()).collect();
        assert_eq!(names, ["a1", "a2", "a3"]);
        assert_eq!(topology.costs.zones.len(), 1);
        assert_eq!(topology.costs.zones[0].goodput_bps, None);
    }
}
