//! A scored view of the matrix at one instant: every node with its
//! liveness, every measured directed pair with its figures, terms and
//! quality, and what any other pair is estimated to be.
//!
//! This is what the collector serves and what placement reads. It is built
//! from the registry and the pair matrix by [`ScoredMatrix::build`]. It is
//! sparse: only pairs with data are kept; a pair nobody measured is
//! estimated when asked ([`ScoredMatrix::pair_or_estimate`], from its ends
//! by [`crate::node_estimate`], else its zone pair by [`crate::estimate`]),
//! so a cluster of N nodes whose agents probe k peers
//! each costs N x k, not N x N. A measured pair whose data went stale falls
//! back the same way, term by term. A consumer that received a matrix over
//! the wire rebuilds the same view, estimates included, with
//! [`ScoredMatrix::from_parts`].

use std::borrow::Cow;
use std::collections::BTreeMap;

use foldhash::HashMap;
use std::sync::OnceLock;

use crate::coordinates::{Coordinate, Coordinates};
use crate::estimate::{Estimate, Mean, ZoneAverages, ZoneEstimates};
use crate::matrix::{NodeId, PairMatrix, PairReadings, PairSummary};
use crate::node_estimate::{End, EndEstimates, Group};
use crate::node_health::{self, NodeHealth};
use crate::reachability::Reachability;
use crate::registry::{AgentFacts, Registry, STALE_AFTER_WINDOWS};
use crate::score::{Fallback, MeasuredTerms, ScoreConfig, Source, Terms};
pub use crate::scored_pair::ScoredPair;
use crate::{NodeInfo, NodeKind, UnixMillis};

/// A node and its liveness.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    /// Identity and place.
    pub info: NodeInfo,
    /// No fresh reports (agent) or no fresh measurements of it (inventory).
    pub stale: bool,
    /// Time since the agent's last report; `None` for inventory nodes.
    pub last_report_age_ms: Option<u64>,
    /// Its network coordinate, when the collector has one
    /// ([`crate::coordinates`]): what estimates the delay of its pairs
    /// nobody probes ([`crate::node_estimate`]).
    pub coordinate: Option<Coordinate>,
    /// What its agent said of itself (version, clock), if it did.
    pub agent: Option<AgentFacts>,
}

/// One zone.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneView {
    /// Zone name.
    pub name: String,
    /// Its region (the first non-empty one among its nodes).
    pub region: String,
    /// Nodes in the zone.
    pub nodes: u32,
    /// Nodes that are not stale.
    pub fresh_nodes: u32,
    /// Nodes that none of their zone-mates reach, nor they them.
    pub unreached_nodes: u32,
    /// Most of its nodes are unreached: netaware cannot measure the zone
    /// ([`Reachability`]).
    pub cannot_measure: bool,
}

/// Aggregates of the pairs from one zone to another (or within one).
#[derive(Debug, Clone, PartialEq)]
pub struct ZonePairView {
    /// Zone of the probing nodes.
    pub src_zone: String,
    /// Zone of the probed nodes.
    pub dst_zone: String,
    /// Mean median RTT over fresh measured pairs.
    pub rtt_median_ms: Option<f64>,
    /// Mean loss over fresh measured pairs.
    pub loss_ratio: Option<f64>,
    /// Mean goodput over pairs with a fresh one.
    pub throughput_bps: Option<f64>,
    /// Mean quality over all pairs, estimated ones included.
    pub quality: f64,
    /// Directed pairs between the zones (every agent of the first to every
    /// other node of the second), measured or not.
    pub pairs: u32,
    /// Of those, pairs with fresh measurements.
    pub measured_pairs: u32,
}

/// The zone summary.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ZoneSummary {
    /// Every zone, by name.
    pub zones: Vec<ZoneView>,
    /// Every zone pair that has pairs, by (src, dst).
    pub zone_pairs: Vec<ZonePairView>,
    /// Nodes of the cluster whose every fresh pair went unanswered.
    pub unreached_nodes: u32,
    /// Most nodes of the cluster are unreached: netaware cannot measure,
    /// and placement fails open.
    pub cannot_measure: bool,
}

/// The terms of a pair scored on its own figures alone, with no zone
/// averages to fall back on: a missing term is 0 and `Unknown`. (The
/// collector fills missing terms from zone averages instead; the
/// simulator, which has no collector, uses this.)
pub fn own_terms(config: &ScoreConfig, measured: &MeasuredTerms) -> Terms {
    ZoneAverages::default().fill(0, 0, measured, &config.fallback())
}

/// Nodes and scored pairs, indexed for lookups.
#[derive(Debug, Clone, Default)]
pub struct ScoredMatrix {
    nodes: Vec<NodeView>,
    /// Sorted by (src, dst), so that a node's outgoing pairs lie together
    /// and a pair is found by a binary search among its source's: no index
    /// of every pair (a hash map would cost some 40 bytes a pair).
    pairs: Vec<ScoredPair>,
    node_index: HashMap<String, usize>,
    /// Per node, where its outgoing pairs start in `pairs` (one more entry
    /// than nodes, the last the number of pairs), and the indices of the
    /// pairs probing it (`incoming` from `incoming_start[n]` to
    /// `incoming_start[n + 1]`): placement walks a node's links instead of
    /// looking up every possible pair (5,000 candidates times 64 peers
    /// would be 640,000 lookups per call).
    outgoing_start: Vec<u32>,
    incoming_start: Vec<u32>,
    incoming: Vec<u32>,
    /// Each node's zone, as an index into `zone_names`.
    zone_of: Vec<usize>,
    /// Whether each node runs an agent: read for every candidate, so kept
    /// apart from the node views.
    agents: Vec<bool>,
    /// Every zone, by name.
    zone_names: Vec<String>,
    /// What an unmeasured pair between two zones is taken to be.
    estimates: ZoneEstimates,
    /// How estimates were scored, kept for rebuilding with other zones.
    fallback: Fallback,
    /// Each node's health, worked out on first use: one walk over every
    /// link, which the extender must not repeat for every pod.
    health: OnceLock<Vec<NodeHealth>>,
    /// What is known of each node and zone for the pairs nobody probes,
    /// worked out on first use (it reads the health).
    ends: OnceLock<EndEstimates>,
    /// How many fresh pairs no probe got through on, worked out on first
    /// use: whether placement must fail open.
    reachability: OnceLock<Reachability>,
}

impl ScoredMatrix {
    /// Scores every measured pair as of `now`: pairs the matrix holds data
    /// for, from an agent to another known node.
    pub fn build(
        registry: &Registry,
        matrix: &PairMatrix,
        config: &ScoreConfig,
        now: UnixMillis,
    ) -> Self {
        Self::score(
            registry,
            &matrix.readings(),
            config,
            &Coordinates::default(),
            now,
        )
    }

    /// [`ScoredMatrix::build`] from a copy of the matrix's figures, so that
    /// a collector can take the copy under its lock and score without it,
    /// with the nodes' network coordinates.
    pub fn score(
        registry: &Registry,
        readings: &PairReadings,
        config: &ScoreConfig,
        coordinates: &Coordinates,
        now: UnixMillis,
    ) -> Self {
        let entries: Vec<_> = registry.nodes().collect();
        let index: HashMap<&str, usize> = entries
            .iter()
            .enumerate()
            .map(|(i, entry)| (entry.info.name.as_str(), i))
            .collect();
        // The matrix's node numbers to the registry's, looked up once each.
        let by_id: Vec<Option<usize>> = readings
            .names
            .iter()
            .map(|name| index.get(name.as_str()).copied())
            .collect();
        let node = |id: NodeId| by_id.get(id as usize).copied().flatten();
        let (zone_of, zone_names) = zones_of(entries.iter().map(|e| e.info.zone.as_str()));
        // The pairs kept, sorted, as (src, dst, position among the
        // readings): the scored pairs are then built once, in order, with no
        // copy of every pair's figures in between (at 320,000 pairs each
        // such copy is tens of megabytes the allocator keeps afterwards).
        let mut order: Vec<(usize, usize, usize)> = readings
            .pairs
            .iter()
            .enumerate()
            .filter_map(|(at, &(src, dst, _))| {
                let (src, dst) = (node(src)?, node(dst)?);
                let from_agent = entries[src].info.kind == NodeKind::Agent;
                (from_agent && src != dst).then_some((src, dst, at))
            })
            .collect();
        order.sort_unstable();
        // Each pair's own terms, added up by zone pair on the way: a pair's
        // missing terms fall back to its zone pair's averages, known once
        // every pair is read.
        let mut averages = ZoneAverages::new(zone_names.len());
        let mut pairs: Vec<ScoredPair> = Vec::with_capacity(order.len());
        pairs.extend(order.iter().filter_map(|&(src, dst, at)| {
            let &(_, _, summary) = readings.pairs.get(at)?;
            let src_entry = entries[src];
            let max_age = STALE_AFTER_WINDOWS * src_entry.window_ms;
            let age_ms = summary.last_end.map(|end| now.saturating_sub(end));
            let stale = src_entry.agent_stale(now) || age_ms.is_none_or(|age| age > max_age);
            let measured = config.measured_terms(&summary, !stale, now);
            averages.add(zone_of[src], zone_of[dst], &measured);
            // Nothing yet: the terms are filled in below.
            let unknown = (0.0, Source::Unknown);
            let terms = Terms::of(unknown, unknown, unknown, false);
            Some(ScoredPair {
                src,
                dst,
                summary,
                age_ms,
                stale,
                quality: 0.0,
                terms,
            })
        }));
        drop(order);
        let fallback = config.fallback();
        for pair in &mut pairs {
            // Worked out again rather than kept from the first pass: it is a
            // few arithmetic operations, and keeping it would take 56 bytes
            // a pair.
            let measured = config.measured_terms(&pair.summary, !pair.stale, now);
            pair.terms = averages.fill(zone_of[pair.src], zone_of[pair.dst], &measured, &fallback);
            pair.quality = fallback.quality(&pair.terms);
        }

        let mut has_fresh_data = vec![false; entries.len()];
        for pair in &pairs {
            if !pair.stale && pair.summary.samples > 0 {
                has_fresh_data[pair.dst] = true;
            }
        }
        let nodes = entries
            .iter()
            .enumerate()
            .map(|(i, entry)| NodeView {
                info: entry.info.clone(),
                stale: match entry.info.kind {
                    NodeKind::Agent => entry.agent_stale(now),
                    NodeKind::Inventory => !has_fresh_data[i],
                },
                last_report_age_ms: entry.last_seen.map(|seen| now.saturating_sub(seen)),
                coordinate: coordinates.coordinate(&entry.info.name).cloned(),
                agent: entry.agent.clone(),
            })
            .collect();
        Self::from_parts(nodes, pairs, fallback)
    }

    /// Indexes nodes and pairs that were scored elsewhere (for example
    /// received from the collector), and works out the estimates of the
    /// pairs not among them with `fallback`. Pairs whose indices are out of
    /// range, from a node to itself, or repeated are left out.
    pub fn from_parts(
        nodes: Vec<NodeView>,
        mut pairs: Vec<ScoredPair>,
        fallback: Fallback,
    ) -> Self {
        let node_index = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.info.name.clone(), i))
            .collect();
        pairs.retain(|p| p.src < nodes.len() && p.dst < nodes.len() && p.src != p.dst);
        // Pairs scored here or received from a collector come in order:
        // sorting them again would take a buffer of half their size.
        if !pairs.is_sorted_by(|a, b| (a.src, a.dst) < (b.src, b.dst)) {
            // Stable, so that of repeated pairs the first is the one kept.
            pairs.sort_by_key(|p| (p.src, p.dst));
            pairs.dedup_by_key(|p| (p.src, p.dst));
            pairs.shrink_to_fit();
        }
        let links = Links::of(nodes.len(), &pairs);
        let (zone_of, zone_names) = zones_of(nodes.iter().map(|n| n.info.zone.as_str()));
        let estimates = ZoneEstimates::of(zone_names.len(), |i| zone_of[i], &pairs, &fallback);
        let agents = nodes
            .iter()
            .map(|n| n.info.kind == NodeKind::Agent)
            .collect();
        Self {
            agents,
            nodes,
            pairs,
            node_index,
            outgoing_start: links.outgoing_start,
            incoming_start: links.incoming_start,
            incoming: links.incoming,
            zone_of,
            zone_names,
            estimates,
            fallback,
            health: OnceLock::new(),
            ends: OnceLock::new(),
            reachability: OnceLock::new(),
        }
    }

    /// The pairs `node` probes, by the probed node's index.
    pub fn outgoing(&self, node: usize) -> impl ExactSizeIterator<Item = &ScoredPair> {
        self.outgoing_of(node).iter()
    }

    /// The measured pairs probing `node`.
    pub fn incoming(&self, node: usize) -> impl ExactSizeIterator<Item = &ScoredPair> {
        let range = Links::range(&self.incoming_start, node);
        let incoming = self.incoming.get(range).unwrap_or_default();
        incoming.iter().map(|&i| &self.pairs[i as usize])
    }

    fn outgoing_of(&self, node: usize) -> &[ScoredPair] {
        let range = Links::range(&self.outgoing_start, node);
        self.pairs.get(range).unwrap_or_default()
    }

    /// The measured pairs `node` probes and the measured pairs probing it.
    pub fn links(&self, node: usize) -> impl Iterator<Item = &ScoredPair> {
        self.outgoing(node).chain(self.incoming(node))
    }

    /// The same matrix with the zones (and regions) that `place` gives,
    /// for nodes it knows: kube-scheduler's node labels can be newer than
    /// what the agents said at hello. The estimates follow the new zones.
    pub fn with_places(&self, place: impl Fn(&str) -> Option<(String, String)>) -> ScoredMatrix {
        let nodes = self
            .nodes
            .iter()
            .map(|node| match place(&node.info.name) {
                Some((zone, region)) => NodeView {
                    info: NodeInfo {
                        zone,
                        region,
                        ..node.info.clone()
                    },
                    ..node.clone()
                },
                None => node.clone(),
            })
            .collect();
        Self::from_parts(nodes, self.pairs.clone(), self.fallback)
    }

    /// What each node's own links inside its zone say of it, by node index.
    pub fn health(&self) -> &[NodeHealth] {
        self.health.get_or_init(|| {
            node_health::of(
                self.nodes.len(),
                self.zone_count(),
                |node| self.zone_index(node),
                |node| self.links(node),
            )
        })
    }

    /// Works out now what is otherwise worked out on first use (node
    /// health and what estimates read), so that no request pays for it.
    pub fn prepare(&self) {
        self.ends();
        self.reachability();
    }

    /// How many fresh pairs, in the cluster and inside each zone, no probe
    /// got through on.
    pub fn reachability(&self) -> &Reachability {
        self.reachability
            .get_or_init(|| Reachability::of(self.zone_names.len(), &self.zone_of, &self.pairs))
    }

    /// The zones whose nodes are mostly unreached inside them (by name):
    /// placement fails open there ([`Reachability`]). Usually none.
    pub fn zones_that_cannot_be_measured(&self) -> Vec<&str> {
        let reachability = self.reachability();
        self.zone_names
            .iter()
            .enumerate()
            .filter(|(zone, _)| reachability.zone_cannot_measure(*zone))
            .map(|(_, name)| name.as_str())
            .collect()
    }

    /// What is known of each node and zone for estimating pairs.
    fn ends(&self) -> &EndEstimates {
        self.ends.get_or_init(|| {
            let coordinates: Vec<Option<&Coordinate>> =
                self.nodes.iter().map(|n| n.coordinate.as_ref()).collect();
            EndEstimates::of(
                self.zone_names.len(),
                &self.zone_of,
                &coordinates,
                self.health(),
                &self.pairs,
            )
        })
    }

    /// The same matrix estimating every pair nobody probes from its zone
    /// pair's averages alone, as if nothing were known of the ends: for
    /// tests of how placement counts those pairs.
    #[cfg(test)]
    pub(crate) fn with_zone_averages_only(mut self) -> Self {
        self.ends = OnceLock::from(EndEstimates::zone_averages_only(self.zone_names.len()));
        self
    }

    /// All nodes, by name.
    pub fn nodes(&self) -> &[NodeView] {
        &self.nodes
    }

    /// All measured pairs, by (src, dst).
    pub fn pairs(&self) -> &[ScoredPair] {
        &self.pairs
    }

    /// How unmeasured pairs are scored.
    pub fn fallback(&self) -> Fallback {
        self.fallback
    }

    /// The index of a node by name.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.node_index.get(name).copied()
    }

    /// The measured pair src -> dst by indices.
    pub fn pair(&self, src: usize, dst: usize) -> Option<&ScoredPair> {
        let outgoing = self.outgoing_of(src);
        let found = outgoing.binary_search_by_key(&dst, |pair| pair.dst);
        found.ok().map(|i| &outgoing[i])
    }

    /// The estimate for the pair src -> dst, nobody probing it.
    pub fn estimate(&self, src: usize, dst: usize) -> Estimate {
        self.estimate_between(End::Node(src), End::Node(dst))
    }

    /// The estimate for a pair nobody probes between two ends: nodes, or
    /// groups of nodes of one zone ([`crate::node_estimate`]).
    pub fn estimate_between(&self, src: End<'_>, dst: End<'_>) -> Estimate {
        let zone = |end: End<'_>| match end {
            End::Node(node) => self.zone_of.get(node).copied(),
            End::Group(group) => Some(group.zone()),
        };
        let (Some(src_zone), Some(dst_zone)) = (zone(src), zone(dst)) else {
            return Estimate::default();
        };
        let average = self.estimates.get(src_zone, dst_zone);
        self.ends().estimate(src, dst, &average, &self.fallback)
    }

    /// `members` (node indices of `zone`) taken together as one end of the
    /// pairs nobody probes.
    pub fn group(&self, zone: usize, members: impl Iterator<Item = usize>) -> Group {
        self.ends().group(zone, members)
    }

    /// A zone's nodes taken together as one end of the pairs nobody probes.
    pub fn zone_group(&self, zone: usize) -> Option<&Group> {
        self.ends().zone_group(zone)
    }

    /// The RTT (ms) the coordinates estimate between two ends, corrected
    /// by their zone pair's measured pairs; `None` without coordinates.
    pub fn estimated_rtt_ms(&self, src: End<'_>, dst: End<'_>) -> Option<f64> {
        self.ends().rtt_ms(src, dst)
    }

    /// The pair src -> dst: measured, or else estimated. `None` where
    /// there is no such pair: src is not an agent (only agents probe), the
    /// two are one node, or either is unknown.
    pub fn pair_or_estimate(&self, src: usize, dst: usize) -> Option<Cow<'_, ScoredPair>> {
        if let Some(pair) = self.pair(src, dst) {
            return Some(Cow::Borrowed(pair));
        }
        if !self.probes(src) || src == dst || dst >= self.nodes.len() {
            return None;
        }
        Some(Cow::Owned(self.estimated_pair(src, dst)))
    }

    /// An unmeasured pair, as placement sees it: no figures, stale, and the
    /// estimate's terms.
    pub fn estimated_pair(&self, src: usize, dst: usize) -> ScoredPair {
        let estimate = self.estimate(src, dst);
        ScoredPair {
            src,
            dst,
            summary: PairSummary::default(),
            age_ms: None,
            stale: true,
            terms: estimate.terms,
            quality: estimate.quality,
        }
    }

    /// Whether `node` runs an agent, and so probes others.
    pub fn probes(&self, node: usize) -> bool {
        self.agents.get(node).copied().unwrap_or(false)
    }

    /// A node's zone as an index (see [`ScoredMatrix::zone_count`]).
    pub fn zone_index(&self, node: usize) -> Option<usize> {
        self.zone_of.get(node).copied()
    }

    /// How many zones the nodes are in.
    pub fn zone_count(&self) -> usize {
        self.zone_names.len()
    }

    /// Per zone and per zone pair aggregates. A zone pair's `pairs` counts
    /// every directed pair between them, and its quality averages them
    /// all: measured ones with their own, the others with the estimate.
    pub fn zones(&self) -> ZoneSummary {
        let zone_count = self.zone_names.len();
        let reachability = self.reachability();
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let mut zones: Vec<ZoneView> = self
            .zone_names
            .iter()
            .enumerate()
            .map(|(zone, name)| ZoneView {
                name: name.clone(),
                region: String::new(),
                nodes: 0,
                fresh_nodes: 0,
                unreached_nodes: count(reachability.zones[zone].unreached),
                cannot_measure: reachability.zone_cannot_measure(zone),
            })
            .collect();
        let mut agents = vec![0u64; zone_count];
        for (i, node) in self.nodes.iter().enumerate() {
            let zone = &mut zones[self.zone_of[i]];
            if zone.region.is_empty() {
                zone.region.clone_from(&node.info.region);
            }
            zone.nodes += 1;
            zone.fresh_nodes += u32::from(!node.stale);
            agents[self.zone_of[i]] += u64::from(self.probes(i));
        }
        let mut sums: BTreeMap<(usize, usize), ZonePairSums> = BTreeMap::new();
        for pair in &self.pairs {
            let key = (self.zone_of[pair.src], self.zone_of[pair.dst]);
            sums.entry(key).or_default().add(pair);
        }
        let mut zone_pairs = Vec::new();
        for (src, &src_agents) in agents.iter().enumerate() {
            for (dst, dst_zone) in zones.iter().enumerate() {
                // Every agent of src to every node of dst but itself.
                let possible = src_agents * u64::from(dst_zone.nodes)
                    - if src == dst { src_agents } else { 0 };
                let present = sums.get(&(src, dst));
                if possible == 0 && present.is_none() {
                    continue;
                }
                let sums = present.cloned().unwrap_or_default();
                let estimate = self.estimates.get(src, dst);
                zone_pairs.push(sums.view(
                    &self.zone_names[src],
                    &self.zone_names[dst],
                    possible,
                    estimate.quality,
                ));
            }
        }
        ZoneSummary {
            zones,
            zone_pairs,
            unreached_nodes: count(reachability.cluster.unreached),
            cannot_measure: reachability.cluster_cannot_measure(),
        }
    }
}

/// Each name's index among the sorted distinct names, and those names.
/// Where each node's links lie among pairs sorted by (src, dst).
struct Links {
    outgoing_start: Vec<u32>,
    incoming_start: Vec<u32>,
    incoming: Vec<u32>,
}

impl Links {
    /// The links of `nodes` nodes over `pairs`, sorted by (src, dst) with
    /// every index below `nodes`.
    fn of(nodes: usize, pairs: &[ScoredPair]) -> Self {
        // Pair indices fit 32 bits: a matrix of 4 billion pairs would not
        // fit in memory.
        let index = |i: usize| u32::try_from(i).unwrap_or(u32::MAX);
        let mut outgoing_start = vec![0u32; nodes + 1];
        let mut incoming_start = vec![0u32; nodes + 1];
        for pair in pairs {
            outgoing_start[pair.src + 1] += 1;
            incoming_start[pair.dst + 1] += 1;
        }
        for node in 0..nodes {
            outgoing_start[node + 1] += outgoing_start[node];
            incoming_start[node + 1] += incoming_start[node];
        }
        // Each node's probing pairs in the order of `pairs`, so by source.
        let mut next = incoming_start.clone();
        let mut incoming = vec![0u32; pairs.len()];
        for (i, pair) in pairs.iter().enumerate() {
            let slot = &mut next[pair.dst];
            incoming[*slot as usize] = index(i);
            *slot += 1;
        }
        Self {
            outgoing_start,
            incoming_start,
            incoming,
        }
    }

    /// The range of `node`'s entries under `start`; empty for an unknown
    /// node.
    fn range(start: &[u32], node: usize) -> std::ops::Range<usize> {
        match (start.get(node), start.get(node + 1)) {
            (Some(&from), Some(&to)) => from as usize..to as usize,
            _ => 0..0,
        }
    }
}

fn zones_of<'a>(zones: impl Iterator<Item = &'a str> + Clone) -> (Vec<usize>, Vec<String>) {
    let names: Vec<String> = zones
        .clone()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(str::to_owned)
        .collect();
    let index: HashMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(i, name)| (name.as_str(), i))
        .collect();
    (zones.map(|zone| index[zone]).collect(), names)
}

#[derive(Default, Clone)]
struct ZonePairSums {
    rtt: Mean,
    loss: Mean,
    throughput: Mean,
    quality: Mean,
    measured: u32,
}

impl ZonePairSums {
    fn add(&mut self, pair: &ScoredPair) {
        self.quality.add(pair.quality);
        if pair.stale {
            return;
        }
        if pair.summary.samples > 0 {
            self.measured += 1;
        }
        if let Some(loss) = pair.summary.loss_ratio {
            self.loss.add(loss);
        }
        if let Some(rtt) = pair.summary.rtt_median_ms {
            self.rtt.add(rtt);
        }
        if let Some(tp) = pair
            .summary
            .throughput
            .filter(|_| pair.terms.throughput_source == Source::Measured)
        {
            self.throughput.add(tp.bps);
        }
    }

    /// The view over `possible` pairs, those without data at `estimated`.
    fn view(&self, src: &str, dst: &str, possible: u64, estimated: f64) -> ZonePairView {
        let present = u64::from(self.quality.count());
        let possible = possible.max(present);
        let missing = (possible - present) as f64;
        let quality = if possible == 0 {
            0.0
        } else {
            (self.quality.value().unwrap_or(0.0) * present as f64 + estimated * missing)
                / possible as f64
        };
        ZonePairView {
            src_zone: src.to_owned(),
            dst_zone: dst.to_owned(),
            rtt_median_ms: self.rtt.value(),
            loss_ratio: self.loss.value(),
            throughput_bps: self.throughput.value(),
            quality,
            pairs: u32::try_from(possible).unwrap_or(u32::MAX),
            measured_pairs: self.measured,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::matrix::{PairWindow, RttStats};
    use proptest::prelude::*;

    pub(crate) fn node(name: &str, zone: &str) -> NodeInfo {
        NodeInfo {
            name: name.into(),
            address: format!("10.0.0.{}", name.len()),
            zone: zone.into(),
            region: "r".into(),
            kind: NodeKind::Agent,
        }
    }

    pub(crate) fn window(end: UnixMillis, median: f64, loss: f64) -> PairWindow {
        let received = ((1.0 - loss) * 100.0).round() as u32;
        let rtt = RttStats {
            min: median,
            median,
            p90: median,
            p99: median,
            max: median,
            jitter: 0.0,
        };
        PairWindow::new(end, 100, received, rtt).unwrap()
    }

    /// Nodes (name, zone) all alive at `now`, with the given pairs measured.
    pub(crate) fn scored(
        nodes: &[(&str, &str)],
        measured: &[(&str, &str, f64, f64)],
        now: UnixMillis,
    ) -> ScoredMatrix {
        let mut registry = Registry::new();
        for (name, zone) in nodes {
            registry.agent_hello(node(name, zone), 1_000, now).unwrap();
        }
        let mut matrix = PairMatrix::new(6);
        for (src, dst, median, loss) in measured {
            matrix.record(src, dst, window(now, *median, *loss));
        }
        ScoredMatrix::build(&registry, &matrix, &ScoreConfig::default(), now)
    }

    /// `matrix` with the goodput (bits/s) that `goodput` gives a pair by
    /// its names, measured and fresh as of `matrix`'s pairs.
    pub(crate) fn with_goodputs(
        matrix: &ScoredMatrix,
        goodput: impl Fn(&str, &str) -> Option<f64>,
    ) -> ScoredMatrix {
        let name = |i: usize| matrix.nodes()[i].info.name.as_str();
        let pairs = matrix
            .pairs()
            .iter()
            .cloned()
            .map(|mut pair| {
                if let Some(bps) = goodput(name(pair.src), name(pair.dst)) {
                    pair.summary.throughput = Some(crate::matrix::Throughput {
                        bps,
                        at: pair.summary.last_end.unwrap_or(0),
                        retransmits: None,
                        tcp_rtt_ms: None,
                    });
                    pair.terms.throughput_source = Source::Measured;
                }
                pair
            })
            .collect();
        ScoredMatrix::from_parts(matrix.nodes().to_vec(), pairs, matrix.fallback())
    }

    /// `matrix` with the network coordinates that `coordinate` gives its
    /// nodes by name.
    pub(crate) fn with_coordinates(
        matrix: &ScoredMatrix,
        coordinate: impl Fn(&str) -> Option<Coordinate>,
    ) -> ScoredMatrix {
        let nodes = matrix
            .nodes()
            .iter()
            .map(|node| NodeView {
                coordinate: coordinate(&node.info.name),
                ..node.clone()
            })
            .collect();
        ScoredMatrix::from_parts(nodes, matrix.pairs().to_vec(), matrix.fallback())
    }

    #[test]
    fn unmeasured_pairs_fall_back_to_the_zone_average_with_a_penalty() {
        let m = scored(
            &[("a1", "a"), ("a2", "a"), ("a3", "a")],
            &[("a1", "a2", 1.0, 0.0)],
            10_000,
        );
        let (a1, a2, a3) = (
            m.index_of("a1").unwrap(),
            m.index_of("a2").unwrap(),
            m.index_of("a3").unwrap(),
        );
        let measured = m.pair(a1, a2).unwrap();
        assert_eq!(measured.terms.delay_source, Source::Measured);
        assert_eq!(measured.terms.delay, 0.5);
        let guessed = m.pair_or_estimate(a1, a3).unwrap();
        assert_eq!(guessed.terms.delay_source, Source::ZoneAverage);
        assert_eq!(guessed.terms.delay, 0.25);
        assert!(guessed.quality < measured.quality);
        assert!(guessed.stale);
        // Throughput was never measured anywhere: unknown, counted as 0.
        assert_eq!(measured.terms.throughput_source, Source::Unknown);
        assert_eq!(
            m.pair_or_estimate(a2, a1).unwrap().terms.delay_source,
            Source::ZoneAverage
        );
    }

    #[test]
    fn pairs_from_elsewhere_are_found_in_any_order_the_first_of_a_repeat_kept() {
        let m = scored(
            &[("a1", "a"), ("a2", "a"), ("a3", "a")],
            &[("a1", "a2", 1.0, 0.0), ("a3", "a1", 2.0, 0.0)],
            10_000,
        );
        let mut pairs: Vec<ScoredPair> = m.pairs().iter().rev().cloned().collect();
        let mut repeat = pairs[0].clone();
        repeat.quality = 0.123;
        pairs.push(repeat);
        let mut outside = pairs[0].clone();
        outside.dst = 7;
        pairs.push(outside);
        let mut to_itself = pairs[0].clone();
        to_itself.dst = to_itself.src;
        pairs.push(to_itself);
        let read = ScoredMatrix::from_parts(m.nodes().to_vec(), pairs, m.fallback());
        assert_eq!(read.pairs().len(), 2);
        for pair in m.pairs() {
            assert_eq!(read.pair(pair.src, pair.dst), Some(pair));
        }
        assert_eq!(read.pair(1, 0), None);
        assert_eq!(read.pair(9, 0), None);
        // a1 probes a2 and is probed by a3; a2 is only probed.
        let ends = |node: usize| -> Vec<(usize, usize)> {
            read.links(node).map(|p| (p.src, p.dst)).collect()
        };
        assert_eq!(ends(0), [(0, 1), (2, 0)]);
        assert_eq!(ends(1), [(0, 1)]);
        assert_eq!(read.outgoing(2).count(), 1);
        assert_eq!(read.outgoing(9).count(), 0);
        assert_eq!(read.links(9).count(), 0);
    }

    #[test]
    fn a_pair_in_a_zone_pair_without_data_is_unknown() {
        let m = scored(&[("a1", "a"), ("b1", "b")], &[], 10_000);
        let pair = m.pair_or_estimate(0, 1).unwrap();
        assert_eq!(pair.terms.loss_source, Source::Unknown);
        assert_eq!(pair.quality, 0.0);
    }

    #[test]
    fn silent_agents_and_old_windows_go_stale() {
        let mut registry = Registry::new();
        registry.agent_hello(node("a1", "a"), 1_000, 0).unwrap();
        registry.agent_hello(node("a2", "a"), 1_000, 0).unwrap();
        let mut matrix = PairMatrix::new(6);
        matrix.record("a1", "a2", window(0, 1.0, 0.0));
        let config = ScoreConfig::default();
        let fresh = ScoredMatrix::build(&registry, &matrix, &config, 3_000);
        assert!(!fresh.pair(0, 1).unwrap().stale);
        assert!(!fresh.nodes()[0].stale);
        let later = ScoredMatrix::build(&registry, &matrix, &config, 3_001);
        assert!(later.pair(0, 1).unwrap().stale);
        assert!(later.nodes()[0].stale);
        assert_eq!(
            later.pair(0, 1).unwrap().terms.delay_source,
            Source::Unknown
        );
    }

    #[test]
    fn inventory_nodes_are_fresh_while_agents_measure_them() {
        let mut registry = Registry::new();
        registry.agent_hello(node("a1", "a"), 1_000, 0).unwrap();
        registry.add_inventory(node("nas", "a"));
        let mut matrix = PairMatrix::new(6);
        let config = ScoreConfig::default();
        let before = ScoredMatrix::build(&registry, &matrix, &config, 0);
        let nas = before.index_of("nas").unwrap();
        assert!(before.nodes()[nas].stale);
        // Inventory nodes do not probe: there is no pair from them.
        assert!(
            before
                .pair_or_estimate(nas, before.index_of("a1").unwrap())
                .is_none()
        );
        matrix.record("a1", "nas", window(0, 1.0, 1.0));
        let after = ScoredMatrix::build(&registry, &matrix, &config, 0);
        assert!(!after.nodes()[nas].stale);
        assert_eq!(
            after
                .pair(after.index_of("a1").unwrap(), nas)
                .unwrap()
                .quality,
            0.0
        );
    }

    #[test]
    fn zone_summary_aggregates_pairs() {
        let m = scored(
            &[("a1", "a"), ("a2", "a"), ("b1", "b")],
            &[
                ("a1", "a2", 0.2, 0.0),
                ("a2", "a1", 0.4, 0.0),
                ("a1", "b1", 10.0, 0.5),
            ],
            10_000,
        );
        let zones = m.zones();
        assert_eq!(zones.zones.len(), 2);
        assert_eq!(zones.zones[0].nodes, 2);
        let aa = zones
            .zone_pairs
            .iter()
            .find(|z| z.src_zone == "a" && z.dst_zone == "a")
            .unwrap();
        assert_eq!(aa.pairs, 2);
        assert_eq!(aa.measured_pairs, 2);
        assert!(crate::rings::is_kept_as(aa.rtt_median_ms.unwrap(), 0.3));
        let ab = zones
            .zone_pairs
            .iter()
            .find(|z| z.src_zone == "a" && z.dst_zone == "b")
            .unwrap();
        assert_eq!(ab.pairs, 2);
        assert_eq!(ab.measured_pairs, 1);
        assert_eq!(ab.loss_ratio, Some(0.5));
    }

    proptest! {
        #[test]
        fn stale_data_never_beats_fresh_data_of_the_zone(
            figures in prop::collection::vec((0.0f64..50.0, 0.0f64..0.2), 2..6),
        ) {
            // Zone "a" of n nodes: a0 measures every other node; a1 -> a0 is
            // never measured, so it falls back.
            let names: Vec<String> = (0..figures.len() + 1).map(|i| format!("a{i}")).collect();
            let nodes: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "a")).collect();
            let measured: Vec<(&str, &str, f64, f64)> = figures
                .iter()
                .enumerate()
                .map(|(i, (median, loss))| ("a0", names[i + 1].as_str(), *median, *loss))
                .collect();
            let m = scored(&nodes, &measured, 5_000);
            let best_fresh = m
                .pairs()
                .iter()
                .filter(|p| p.terms.delay_source == Source::Measured)
                .map(|p| p.quality)
                .fold(0.0, f64::max);
            let fallback = m.pair_or_estimate(m.index_of("a1").unwrap(), m.index_of("a0").unwrap()).unwrap();
            prop_assert_eq!(fallback.terms.delay_source, Source::ZoneAverage);
            prop_assert!(fallback.quality < best_fresh || best_fresh == 0.0);
            for pair in m.pairs() {
                prop_assert!(pair.quality.is_finite() && (0.0..=1.0).contains(&pair.quality));
            }
        }
    }
}
