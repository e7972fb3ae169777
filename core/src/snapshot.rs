//! A scored view of the whole matrix at one instant: every node with its
//! liveness, every directed pair with its figures, terms and quality, and
//! the zone aggregates.
//!
//! This is what the collector serves and what placement reads. It is built
//! from the registry and the pair matrix by [`ScoredMatrix::build`], where
//! missing and stale data get their fallback: per term, the average of the
//! fresh measured pairs of the same zone pair less the penalty, or 0 when the
//! zone pair has none. A consumer that received a matrix over the wire can
//! rebuild the same view with [`ScoredMatrix::from_parts`].

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use crate::matrix::PairMatrix;
use crate::node_health::{self, NodeHealth};
use crate::registry::{Registry, STALE_AFTER_WINDOWS};
use crate::score::{MeasuredTerms, ScoreConfig, Source, Terms};
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
    /// Mean quality over all pairs, fallbacks included.
    pub quality: f64,
    /// Directed pairs between the zones.
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
}

/// The terms of a pair scored on its own figures alone, with no zone
/// averages to fall back on: a missing term is 0 and `Unknown`. (The
/// collector fills missing terms from zone averages instead; the
/// simulator, which has no collector, uses this.)
pub fn own_terms(config: &ScoreConfig, measured: &MeasuredTerms) -> Terms {
    ZoneAverages::new(std::iter::empty()).fill(("", ""), measured, config)
}

/// Nodes and scored pairs, indexed for lookups.
#[derive(Debug, Clone, Default)]
pub struct ScoredMatrix {
    nodes: Vec<NodeView>,
    pairs: Vec<ScoredPair>,
    node_index: HashMap<String, usize>,
    pair_index: HashMap<(usize, usize), usize>,
    /// Per node, the indices of the pairs it probes and of those probing it,
    /// so that placement walks a node's links instead of looking up every
    /// possible pair (5,000 candidates times 64 peers would be 640,000
    /// lookups per call).
    outgoing: Vec<Vec<usize>>,
    incoming: Vec<Vec<usize>>,
    /// Each node's health, worked out on first use: one walk over every
    /// link, which the extender must not repeat for every pod.
    health: OnceLock<Vec<NodeHealth>>,
}

impl ScoredMatrix {
    /// Scores every pair (every agent to every other node) as of `now`.
    pub fn build(
        registry: &Registry,
        matrix: &PairMatrix,
        config: &ScoreConfig,
        now: UnixMillis,
    ) -> Self {
        let entries: Vec<_> = registry.nodes().collect();
        let mut pairs = Vec::new();
        let mut measured = Vec::new();
        for (src, src_entry) in entries.iter().enumerate() {
            if src_entry.info.kind != NodeKind::Agent {
                continue;
            }
            let src_stale = src_entry.agent_stale(now);
            let max_age = STALE_AFTER_WINDOWS * src_entry.window_ms;
            for (dst, dst_entry) in entries.iter().enumerate() {
                if src == dst {
                    continue;
                }
                let summary = matrix.summary(&src_entry.info.name, &dst_entry.info.name);
                let age_ms = summary.last_end.map(|end| now.saturating_sub(end));
                let stale = src_stale || age_ms.is_none_or(|age| age > max_age);
                measured.push(config.measured_terms(&summary, !stale, now));
                pairs.push((src, dst, summary, age_ms, stale));
            }
        }
        let zone_of = |i: usize| entries[i].info.zone.as_str();
        let averages = ZoneAverages::new(
            pairs
                .iter()
                .zip(&measured)
                .map(|((src, dst, ..), m)| ((zone_of(*src), zone_of(*dst)), *m)),
        );
        let pairs: Vec<ScoredPair> = pairs
            .into_iter()
            .zip(measured)
            .map(|((src, dst, summary, age_ms, stale), measured)| {
                let terms = averages.fill((zone_of(src), zone_of(dst)), &measured, config);
                let quality = config.quality(&terms);
                ScoredPair {
                    src,
                    dst,
                    summary,
                    age_ms,
                    stale,
                    terms,
                    quality,
                }
            })
            .collect();

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
            })
            .collect();
        Self::from_parts(nodes, pairs)
    }

    /// Indexes nodes and pairs that were scored elsewhere (for example
    /// received from the collector). Pairs whose indices are out of range
    /// are left out.
    pub fn from_parts(nodes: Vec<NodeView>, pairs: Vec<ScoredPair>) -> Self {
        let node_index = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.info.name.clone(), i))
            .collect();
        let pairs: Vec<ScoredPair> = pairs
            .into_iter()
            .filter(|p| p.src < nodes.len() && p.dst < nodes.len() && p.src != p.dst)
            .collect();
        let pair_index = pairs
            .iter()
            .enumerate()
            .map(|(i, p)| ((p.src, p.dst), i))
            .collect();
        let mut outgoing = vec![Vec::new(); nodes.len()];
        let mut incoming = vec![Vec::new(); nodes.len()];
        for (i, pair) in pairs.iter().enumerate() {
            outgoing[pair.src].push(i);
            incoming[pair.dst].push(i);
        }
        Self {
            nodes,
            pairs,
            node_index,
            pair_index,
            outgoing,
            incoming,
            health: OnceLock::new(),
        }
    }

    /// The pairs `node` probes.
    pub fn outgoing(&self, node: usize) -> impl Iterator<Item = &ScoredPair> {
        self.outgoing
            .get(node)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|&i| &self.pairs[i])
    }

    /// The pairs `node` probes and the pairs probing it.
    pub fn links(&self, node: usize) -> impl Iterator<Item = &ScoredPair> {
        let out = self
            .outgoing
            .get(node)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let inc = self
            .incoming
            .get(node)
            .map(Vec::as_slice)
            .unwrap_or_default();
        out.iter().chain(inc).map(|&i| &self.pairs[i])
    }

    /// The same matrix with the zones (and regions) that `place` gives,
    /// for nodes it knows: kube-scheduler's node labels can be newer than
    /// what the agents said at hello.
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
        Self::from_parts(nodes, self.pairs.clone())
    }

    /// What each node's own links inside its zone say of it, by node index.
    pub fn health(&self) -> &[NodeHealth] {
        self.health.get_or_init(|| {
            let zones: Vec<&str> = self.nodes.iter().map(|n| n.info.zone.as_str()).collect();
            node_health::of(&zones, &self.pairs)
        })
    }

    /// All nodes, by name.
    pub fn nodes(&self) -> &[NodeView] {
        &self.nodes
    }

    /// All scored pairs.
    pub fn pairs(&self) -> &[ScoredPair] {
        &self.pairs
    }

    /// The index of a node by name.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.node_index.get(name).copied()
    }

    /// The pair src -> dst by indices.
    pub fn pair(&self, src: usize, dst: usize) -> Option<&ScoredPair> {
        self.pair_index.get(&(src, dst)).map(|&i| &self.pairs[i])
    }

    /// Per zone and per zone pair aggregates.
    pub fn zones(&self) -> ZoneSummary {
        let mut zones: BTreeMap<&str, ZoneView> = BTreeMap::new();
        for node in &self.nodes {
            let zone = zones.entry(&node.info.zone).or_insert_with(|| ZoneView {
                name: node.info.zone.clone(),
                region: String::new(),
                nodes: 0,
                fresh_nodes: 0,
            });
            if zone.region.is_empty() {
                zone.region.clone_from(&node.info.region);
            }
            zone.nodes += 1;
            zone.fresh_nodes += u32::from(!node.stale);
        }
        let mut sums: BTreeMap<(&str, &str), ZonePairSums> = BTreeMap::new();
        for pair in &self.pairs {
            let key = (
                self.nodes[pair.src].info.zone.as_str(),
                self.nodes[pair.dst].info.zone.as_str(),
            );
            sums.entry(key).or_default().add(pair);
        }
        ZoneSummary {
            zones: zones.into_values().collect(),
            zone_pairs: sums
                .into_iter()
                .map(|((src, dst), sums)| sums.view(src, dst))
                .collect(),
        }
    }
}

/// Per zone pair, the averages of fresh measured terms.
struct ZoneAverages<'a> {
    delay: HashMap<(&'a str, &'a str), Mean>,
    loss: HashMap<(&'a str, &'a str), Mean>,
    throughput: HashMap<(&'a str, &'a str), Mean>,
}

impl<'a> ZoneAverages<'a> {
    fn new(pairs: impl Iterator<Item = ((&'a str, &'a str), MeasuredTerms)>) -> Self {
        let mut averages = Self {
            delay: HashMap::new(),
            loss: HashMap::new(),
            throughput: HashMap::new(),
        };
        for (key, m) in pairs {
            for (map, value) in [
                (&mut averages.delay, m.delay),
                (&mut averages.loss, m.loss),
                (&mut averages.throughput, m.throughput),
            ] {
                if let Some(value) = value {
                    map.entry(key).or_default().add(value);
                }
            }
        }
        averages
    }

    fn fill(&self, key: (&str, &str), m: &MeasuredTerms, config: &ScoreConfig) -> Terms {
        let term = |own: Option<f64>, map: &HashMap<(&str, &str), Mean>| match own {
            Some(value) => (value, Source::Measured),
            None => match map.get(&key).and_then(Mean::value) {
                Some(avg) => (
                    (avg - config.fallback_penalty).max(0.0),
                    Source::ZoneAverage,
                ),
                None => (0.0, Source::Unknown),
            },
        };
        let (delay, delay_source) = term(m.delay, &self.delay);
        let (loss, loss_source) = term(m.loss, &self.loss);
        let (throughput, throughput_source) = term(m.throughput, &self.throughput);
        Terms {
            delay,
            loss,
            throughput,
            delay_source,
            loss_source,
            throughput_source,
            dead: m.dead,
        }
    }
}

/// A running mean.
#[derive(Debug, Clone, Copy, Default)]
struct Mean {
    sum: f64,
    count: u32,
}

impl Mean {
    fn add(&mut self, value: f64) {
        self.sum += value;
        self.count += 1;
    }

    fn value(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / f64::from(self.count))
    }
}

#[derive(Default)]
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

    fn view(&self, src: &str, dst: &str) -> ZonePairView {
        ZonePairView {
            src_zone: src.to_owned(),
            dst_zone: dst.to_owned(),
            rtt_median_ms: self.rtt.value(),
            loss_ratio: self.loss.value(),
            throughput_bps: self.throughput.value(),
            quality: self.quality.value().unwrap_or(0.0),
            pairs: self.quality.count,
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
        ScoredMatrix::from_parts(matrix.nodes().to_vec(), pairs)
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
        let guessed = m.pair(a1, a3).unwrap();
        assert_eq!(guessed.terms.delay_source, Source::ZoneAverage);
        assert_eq!(guessed.terms.delay, 0.25);
        assert!(guessed.quality < measured.quality);
        assert!(guessed.stale);
        // Throughput was never measured anywhere: unknown, counted as 0.
        assert_eq!(measured.terms.throughput_source, Source::Unknown);
        assert_eq!(
            m.pair(a2, a1).unwrap().terms.delay_source,
            Source::ZoneAverage
        );
    }

    #[test]
    fn a_pair_in_a_zone_pair_without_data_is_unknown() {
        let m = scored(&[("a1", "a"), ("b1", "b")], &[], 10_000);
        let pair = m.pair(0, 1).unwrap();
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
        assert!(before.pair(nas, before.index_of("a1").unwrap()).is_none());
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
        assert!((aa.rtt_median_ms.unwrap() - 0.3).abs() < 1e-9);
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
            let fallback = m.pair(m.index_of("a1").unwrap(), m.index_of("a0").unwrap()).unwrap();
            prop_assert_eq!(fallback.terms.delay_source, Source::ZoneAverage);
            prop_assert!(fallback.quality < best_fresh || best_fresh == 0.0);
            for pair in m.pairs() {
                prop_assert!(pair.quality.is_finite() && (0.0..=1.0).contains(&pair.quality));
            }
        }
    }
}
