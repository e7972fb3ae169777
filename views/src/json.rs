//! The JSON contracts of `netaware matrix -o json`, `zones`, `rank`,
//! `estimate`, `topology` and `faults` (documented in docs/cli.md), made
//! from the wire's answers; the collector's web view answers its API with
//! the same documents. Field names are the contract; figures that do not
//! exist yet are `null`, never a made-up number.

use netaware_core::measured_topology::{BlockNode, LinkCost, MeasuredTopology};
use netaware_core::pair_rtt::RttBasis;
use netaware_core::placement::{Basis, PlacementConfig};
use netaware_core::verdict::FailureCode;
use netaware_proto::convert::{
    self, basis_from_wire, failure_from_wire, neutral_from_wire, placement_from_wire,
    rtt_basis_from_wire,
};
use netaware_proto::v1 as pb;
use serde::{Deserialize, Serialize};

use crate::text::{fault_figure, fault_judged, fault_subject};

/// `matrix --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MatrixJson {
    /// Every node.
    pub nodes: Vec<NodeJson>,
    /// Every measured directed pair.
    pub pairs: Vec<PairJson>,
}

/// One node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeJson {
    /// Node name.
    pub name: String,
    /// Zone.
    pub zone: String,
    /// Region ("" when not set).
    pub region: String,
    /// Probed address.
    pub address: String,
    /// No fresh reports or measurements.
    pub stale: bool,
    /// Its agent's version ("" for inventory nodes and until its hello).
    #[serde(default)]
    pub agent_version: String,
    /// Its agent's clock less the collector's at its hello (ms), null
    /// where unknown.
    #[serde(default)]
    pub clock_offset_ms: Option<i64>,
}

/// One directed pair.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PairJson {
    /// The network the figures were measured over (`primary`, or a
    /// dual-stack cluster's `primary-ipv6`).
    pub network: String,
    /// Probing node.
    pub src: String,
    /// Probed node.
    pub dst: String,
    /// Median RTT (ms), null without replies.
    pub rtt_median_ms: Option<f64>,
    /// p99 RTT (ms).
    pub rtt_p99_ms: Option<f64>,
    /// Jitter (ms).
    pub jitter_ms: Option<f64>,
    /// Lost over sent, null when nothing was sent.
    pub loss_ratio: Option<f64>,
    /// Loss from src to dst alone (seen by dst), null until dst reported it.
    pub one_way_loss_ratio: Option<f64>,
    /// Last goodput (bit/s), null until measured.
    pub throughput_bps: Option<f64>,
    /// The last test's retransmits, null when unknown.
    pub throughput_retransmits: Option<u32>,
    /// The last test's smoothed TCP RTT (ms), null when unknown.
    pub throughput_tcp_rtt_ms: Option<f64>,
    /// Seconds since the last test, null until measured.
    pub throughput_age_s: Option<f64>,
    /// Probes over the recent windows.
    pub samples: u64,
    /// Seconds since the newest window, null if never measured.
    pub age_s: Option<f64>,
    /// q(src, dst) in [0, 1].
    pub quality: f64,
    /// The transport of the figures (`icmp`, `udp`, `tcp`), null when no
    /// window carried the pair.
    pub probe: Option<String>,
    /// Transports found filtered towards dst (no reply while `probe` got
    /// through).
    pub filtered: Vec<String>,
}

impl From<&pb::Matrix> for MatrixJson {
    fn from(matrix: &pb::Matrix) -> Self {
        Self {
            nodes: matrix.nodes.iter().map(NodeJson::from).collect(),
            pairs: matrix.pairs.iter().map(PairJson::from).collect(),
        }
    }
}

impl From<&pb::Node> for NodeJson {
    fn from(n: &pb::Node) -> Self {
        Self {
            name: n.name.clone(),
            zone: n.zone.clone(),
            region: n.region.clone(),
            address: n.address.clone(),
            stale: n.stale,
            agent_version: n.agent_version.clone(),
            clock_offset_ms: n.clock_offset_ms,
        }
    }
}

impl From<&pb::Pair> for PairJson {
    fn from(p: &pb::Pair) -> Self {
        Self {
            network: p.network.clone(),
            src: p.src.clone(),
            dst: p.dst.clone(),
            rtt_median_ms: p.rtt_median_ms,
            rtt_p99_ms: p.rtt_p99_ms,
            jitter_ms: p.jitter_ms,
            loss_ratio: p.loss_ratio,
            one_way_loss_ratio: p.one_way_loss_ratio,
            throughput_bps: p.throughput_bps,
            throughput_retransmits: p.throughput_retransmits,
            throughput_tcp_rtt_ms: p.throughput_tcp_rtt_ms,
            throughput_age_s: p.throughput_age_s,
            samples: p.samples,
            age_s: (p.age_s >= 0.0).then_some(p.age_s),
            quality: p.quality,
            probe: p.probe.and_then(transport_name),
            filtered: p
                .filtered
                .iter()
                .filter_map(|t| transport_name(*t))
                .collect(),
        }
    }
}

fn transport_name(wire: i32) -> Option<String> {
    convert::transport_from_wire(wire).map(|t| t.as_str().to_owned())
}

/// Writes `matrix --json` page by page, as the pages arrive: a large
/// cluster's matrix is never held whole. The output is one JSON object,
/// the same as [`MatrixJson`]'s.
#[derive(Debug)]
pub struct MatrixJsonWriter<W: std::io::Write> {
    out: W,
    started: bool,
    pairs: usize,
    failed: Option<std::io::Error>,
}

impl<W: std::io::Write> MatrixJsonWriter<W> {
    /// A writer to `out`.
    pub fn new(out: W) -> Self {
        Self {
            out,
            started: false,
            pairs: 0,
            failed: None,
        }
    }

    /// Writes one page (its nodes, if it is the first, then its pairs).
    pub fn page(&mut self, page: &pb::Matrix) {
        if self.failed.is_none()
            && let Err(err) = self.write_page(page)
        {
            self.failed = Some(err);
        }
    }

    fn write_page(&mut self, page: &pb::Matrix) -> std::io::Result<()> {
        if !self.started {
            self.started = true;
            let nodes: Vec<NodeJson> = page.nodes.iter().map(NodeJson::from).collect();
            write!(self.out, "{{\"nodes\": ")?;
            serde_json::to_writer(&mut self.out, &nodes)?;
            write!(self.out, ", \"pairs\": [")?;
        }
        for pair in &page.pairs {
            if self.pairs > 0 {
                write!(self.out, ",")?;
            }
            writeln!(self.out)?;
            serde_json::to_writer(&mut self.out, &PairJson::from(pair))?;
            self.pairs += 1;
        }
        Ok(())
    }

    /// Closes the object; the first error of any page, if one failed.
    pub fn finish(mut self) -> std::io::Result<()> {
        if let Some(err) = self.failed.take() {
            return Err(err);
        }
        if !self.started {
            self.write_page(&pb::Matrix::default())?;
        }
        writeln!(self.out, "]}}")?;
        self.out.flush()
    }
}

/// `zones --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ZonesJson {
    /// Every zone.
    pub zones: Vec<ZoneJson>,
    /// Every zone pair with pairs.
    pub zone_pairs: Vec<ZonePairJson>,
    /// Nodes whose every fresh pair went unanswered.
    #[serde(default)]
    pub unreached_nodes: u32,
    /// Most nodes are unreached: netaware cannot measure, placement fails
    /// open.
    #[serde(default)]
    pub cannot_measure: bool,
}

/// One zone.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ZoneJson {
    /// Zone name.
    pub name: String,
    /// Region.
    pub region: String,
    /// Nodes.
    pub nodes: u32,
    /// Nodes not stale.
    pub fresh_nodes: u32,
    /// Nodes that none of their zone-mates reach, nor they them.
    #[serde(default)]
    pub unreached_nodes: u32,
    /// Most of its nodes are unreached: netaware cannot measure the zone.
    #[serde(default)]
    pub cannot_measure: bool,
}

/// One zone pair.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ZonePairJson {
    /// Zone of the probing nodes.
    pub src_zone: String,
    /// Zone of the probed nodes.
    pub dst_zone: String,
    /// Mean median RTT over measured pairs (ms).
    pub rtt_median_ms: Option<f64>,
    /// Mean loss over measured pairs.
    pub loss_ratio: Option<f64>,
    /// Mean goodput (bit/s).
    pub throughput_bps: Option<f64>,
    /// Mean quality.
    pub quality: f64,
    /// Directed pairs.
    pub pairs: u32,
    /// Pairs with fresh measurements.
    pub measured_pairs: u32,
}

impl From<&pb::ZoneSummary> for ZonesJson {
    fn from(summary: &pb::ZoneSummary) -> Self {
        Self {
            zones: summary
                .zones
                .iter()
                .map(|z| ZoneJson {
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
                .map(|z| ZonePairJson {
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
}

/// `rank --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RankJson {
    /// The chosen zone, null if none.
    pub zone: Option<String>,
    /// Why that zone.
    pub zone_reason: String,
    /// Where the extender would put the job's next worker (the passing
    /// node of the highest `extender_score`); null when none passes.
    pub next: Option<String>,
    /// Set ("cannot_measure") when the extender answers neutrally for want
    /// of measurements: placement fails open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neutral: Option<String>,
    /// The collector's placement settings the answer was decided by: the
    /// extender places by the same.
    pub placement: PlacementConfig,
    /// Feasible nodes best first, then the infeasible ones.
    pub nodes: Vec<RankedJson>,
}

/// One ranked node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RankedJson {
    /// Node name.
    pub name: String,
    /// Zone.
    pub zone: String,
    /// Score in [0, 1].
    pub score: f64,
    /// Whether the node may be used.
    pub feasible: bool,
    /// Why not, for people; null when feasible.
    pub reason: Option<String>,
    /// Why not, for programs: a stable code (`loss_to_worker`,
    /// `goodput_to_worker`, `degraded_loss`, `degraded_goodput`,
    /// `node_fault`, `outside_zone`, `no_zone`, `stale`, `unknown_node`);
    /// null when feasible.
    pub failure: Option<FailureCode>,
    /// The bad block uplink (an open `block_uplink` fault) its worker
    /// would put the job's traffic across, which scaled its score down;
    /// absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bad_uplink: Option<BadUplinkJson>,
    /// The terms behind the score.
    pub terms: TermsJson,
    /// The extender's priority for the node (0 to 10, scaled to the best
    /// candidate).
    pub extender_score: i64,
    /// Whether the node passes the extender's filter.
    pub passes_filter: bool,
}

/// A bad block uplink a candidate's worker would cross.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BadUplinkJson {
    /// The block's zone.
    pub zone: String,
    /// The block's number in its zone.
    pub block: u32,
    /// "loss", "delay" or "goodput".
    pub metric: String,
    /// Its loss ratio or added milliseconds.
    pub value: f64,
    /// The factor its score was scaled by.
    pub factor: f64,
}

/// The terms behind a node's score.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TermsJson {
    /// Mean pair quality.
    pub quality: f64,
    /// Mean delay term.
    pub delay: f64,
    /// Mean loss term.
    pub loss: f64,
    /// Mean throughput term.
    pub throughput: f64,
    /// Directed pairs averaged.
    pub pairs: u32,
    /// Pairs without fresh measurements of their own: estimated from
    /// their ends, from zone averages, or unknown.
    pub fallback_pairs: u32,
    /// "placed", "zone" or "colocated"; null when the collector did not say.
    pub basis: Option<Basis>,
    /// In the chosen zone.
    pub in_chosen_zone: bool,
}

impl From<&pb::RankResponse> for RankJson {
    fn from(rank: &pb::RankResponse) -> Self {
        Self {
            zone: (!rank.zone.is_empty()).then(|| rank.zone.clone()),
            zone_reason: rank.zone_reason.clone(),
            next: (!rank.next.is_empty()).then(|| rank.next.clone()),
            neutral: neutral_from_wire(&rank.neutral).map(|n| n.as_str().to_owned()),
            placement: placement_from_wire(rank.placement),
            nodes: rank
                .nodes
                .iter()
                .map(|n| {
                    let t = n.terms.unwrap_or_default();
                    RankedJson {
                        name: n.name.clone(),
                        zone: n.zone.clone(),
                        score: n.score,
                        feasible: n.feasible,
                        reason: (!n.reason.is_empty()).then(|| n.reason.clone()),
                        failure: failure_from_wire(n.failure),
                        bad_uplink: n.bad_uplink.as_ref().map(|u| BadUplinkJson {
                            zone: u.zone.clone(),
                            block: u.block,
                            metric: u.metric.clone(),
                            value: u.value,
                            factor: u.factor,
                        }),
                        terms: TermsJson {
                            quality: t.quality,
                            delay: t.delay,
                            loss: t.loss,
                            throughput: t.throughput,
                            pairs: t.pairs,
                            fallback_pairs: t.fallback_pairs,
                            basis: basis_from_wire(t.basis),
                            in_chosen_zone: t.in_chosen_zone,
                        },
                        extender_score: n.extender_score,
                        passes_filter: n.passes_filter,
                    }
                })
                .collect(),
        }
    }
}

/// `estimate --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EstimateJson {
    /// The pairs asked for.
    pub pairs: Vec<PairRttJson>,
}

/// One pair's RTT and what it rests on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PairRttJson {
    /// Probing node.
    pub src: String,
    /// Probed node.
    pub dst: String,
    /// RTT (ms); null when nothing is known.
    pub rtt_ms: Option<f64>,
    /// How far it may be off (ms): a measured pair's jitter, an estimate's
    /// own bound; null for zone averages.
    pub error_ms: Option<f64>,
    /// `measured`, `estimated` (network coordinates), `zone_average` or
    /// `unknown`.
    pub basis: RttBasis,
}

impl From<&pb::EstimateResponse> for EstimateJson {
    fn from(response: &pb::EstimateResponse) -> Self {
        Self {
            pairs: response
                .pairs
                .iter()
                .map(|p| PairRttJson {
                    src: p.src.clone(),
                    dst: p.dst.clone(),
                    rtt_ms: p.rtt_ms,
                    error_ms: p.error_ms,
                    basis: rtt_basis_from_wire(p.basis),
                })
                .collect(),
        }
    }
}

/// `topology --json`: the measured topology.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TopologyJson {
    /// When the collector worked it out (ms since the Unix epoch).
    pub observed_unix_ms: u64,
    /// Zones by name.
    pub zones: Vec<TopologyZoneJson>,
    /// Costs between zones, both ways.
    pub zone_costs: Vec<LinkCost>,
    /// Costs between regions, both ways.
    pub region_costs: Vec<LinkCost>,
}

/// One zone's blocks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TopologyZoneJson {
    /// Zone name.
    pub name: String,
    /// Region (may be empty).
    pub region: String,
    /// By number.
    pub blocks: Vec<BlockJson>,
}

/// One block.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BlockJson {
    /// Its number in the zone.
    pub number: u32,
    /// Its `netaware.io/block` label value.
    pub label: String,
    /// Its nodes, by name.
    pub nodes: Vec<String>,
    /// Those of them marked degraded.
    pub degraded: Vec<String>,
    /// Those of them behind a block uplink that an open fault names
    /// (labelled, as the degraded ones, to keep training workers off).
    #[serde(default)]
    pub behind_bad_uplink: Vec<String>,
}

impl TopologyJson {
    /// The JSON of `topology`, worked out at `observed_unix_ms`.
    pub fn new(topology: &MeasuredTopology, observed_unix_ms: u64) -> Self {
        Self {
            observed_unix_ms,
            zones: topology
                .zones
                .iter()
                .map(|zone| TopologyZoneJson {
                    name: zone.zone.clone(),
                    region: zone.region.clone(),
                    blocks: zone
                        .blocks
                        .iter()
                        .map(|block| BlockJson {
                            number: block.number,
                            label: netaware_publish::objects::block_label(&zone.zone, block.number),
                            nodes: block.nodes.iter().map(|n| n.name.clone()).collect(),
                            degraded: names_where(&block.nodes, |n| n.degraded),
                            behind_bad_uplink: names_where(&block.nodes, |n| n.bad_uplink),
                        })
                        .collect(),
                })
                .collect(),
            zone_costs: topology.costs.zones.clone(),
            region_costs: topology.costs.regions.clone(),
        }
    }
}

/// The names of the `nodes` that `pick` picks.
fn names_where(nodes: &[BlockNode], pick: impl Fn(&BlockNode) -> bool) -> Vec<String> {
    nodes
        .iter()
        .filter(|n| pick(n))
        .map(|n| n.name.clone())
        .collect()
}

/// `faults --json`: the open faults.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FaultsJson {
    /// When the collector's last round ran (ms since the Unix epoch).
    pub observed_unix_ms: u64,
    /// By network, kind and name.
    pub faults: Vec<FaultJson>,
}

/// One fault.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FaultJson {
    /// "node", "block_uplink", "zone_link", "pair" or "zone_label".
    pub kind: String,
    /// The nodes it is about: the node, the block's nodes, the pair's two
    /// ends, the mislabelled node; none for a zone link.
    pub nodes: Vec<String>,
    /// The zones it is about.
    pub zones: Vec<String>,
    /// A block uplink's block number in its zone.
    pub block: Option<u32>,
    /// A mislabelled node: the zone its links say it is in.
    pub measures_like: Option<String>,
    /// The network it was found on.
    pub network: String,
    /// "loss", "delay", "goodput" or "rtt".
    pub metric: String,
    /// A loss ratio, the ms added, or (zone labels) the node's RTT to its
    /// labelled zone in ms.
    pub value: f64,
    /// What is usual there, in the same unit.
    pub baseline: f64,
    /// In [0, 1].
    pub confidence: f64,
    /// When it was first found (ms since the Unix epoch).
    pub since_unix_ms: u64,
    /// Its worst links.
    pub evidence: Vec<FaultEvidenceJson>,
    /// What it is about, for people ("zone-a block 2 (3 nodes)").
    #[serde(default)]
    pub subject: String,
    /// What it does beside what is usual, for people ("loses 8.00%
    /// (usual 0.05%)").
    #[serde(default)]
    pub summary: String,
}

/// One link of a fault's evidence.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FaultEvidenceJson {
    /// The probing node.
    pub src: String,
    /// The probed node.
    pub dst: String,
    /// Its loss ratio or RTT (ms).
    pub value: f64,
    /// What it would be without the fault.
    pub baseline: f64,
    /// Both in the fault's unit, for people ("12.00% (usual 0.05%)").
    #[serde(default)]
    pub summary: String,
}

impl From<&pb::FaultsResponse> for FaultsJson {
    fn from(answer: &pb::FaultsResponse) -> Self {
        Self {
            observed_unix_ms: answer.observed_unix_ms,
            faults: answer.faults.iter().map(FaultJson::from).collect(),
        }
    }
}

impl From<&pb::Fault> for FaultJson {
    fn from(f: &pb::Fault) -> Self {
        let block = (f.block > 0).then_some(f.block);
        let measures_like = (!f.measures_like.is_empty()).then(|| f.measures_like.clone());
        Self {
            subject: fault_subject(&f.kind, &f.nodes, &f.zones, block, measures_like.as_deref()),
            summary: fault_judged(&f.metric, f.value, f.baseline),
            kind: f.kind.clone(),
            nodes: f.nodes.clone(),
            zones: f.zones.clone(),
            block,
            measures_like,
            network: f.network.clone(),
            metric: f.metric.clone(),
            value: f.value,
            baseline: f.baseline,
            confidence: f.confidence,
            since_unix_ms: f.since_unix_ms,
            evidence: f
                .evidence
                .iter()
                .map(|e| FaultEvidenceJson {
                    src: e.src.clone(),
                    dst: e.dst.clone(),
                    value: e.value,
                    baseline: e.baseline,
                    summary: format!(
                        "{} (usual {})",
                        fault_figure(&f.metric, e.value),
                        fault_figure(&f.metric, e.baseline)
                    ),
                })
                .collect(),
        }
    }
}
