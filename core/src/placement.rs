//! Where the workers of a distributed training job should go: DESIGN.md's
//! zone-first algorithm over a [`ScoredMatrix`].
//!
//! 1. Zone first. With workers already placed, the zone holding most of them;
//!    otherwise a zone with at least k feasible candidates whose k best
//!    candidates are best connected to each other (or, when no zone has k,
//!    the zone with the most). Nodes of other zones keep a score scaled by
//!    [`PlacementConfig::out_of_zone_factor`]; in strict mode they fail.
//! 2. Inside the zone, a node's score is its mean pair quality to the placed
//!    workers (both directions), or to the zone's other candidates when none
//!    is placed. Loss above [`PlacementConfig::loss_threshold`] to a placed
//!    worker fails the node, with the reason; so does a goodput to a placed
//!    worker below [`PlacementConfig::min_goodput_fraction`] of that
//!    worker's typical (median) goodput: a ring all-reduce runs at its
//!    slowest link, and a mean of qualities would hide one.
//!    A node degraded on its own (most of its links inside its zone lossy or
//!    far slower than its zone's usual, see [`crate::node_health`]) fails
//!    by the same two thresholds, with or without workers placed; so does
//!    a node that fault localisation names as faulty itself, whatever the
//!    thresholds, and a node whose worker would put the job's traffic
//!    across a bad block uplink scores [`BAD_UPLINK_FACTOR`] of what it
//!    would ([`crate::fault_marks`]).
//! 3. Every score carries the terms behind it ([`NodeTerms`]).
//!
//! A [`Placer`] is a scored matrix with the settings it is placed by: the
//! collector's Rank RPC (and so `netaware rank` and `netaware explain`) and
//! the scheduler extender ([`crate::extender`]) all place through one, and
//! the settings travel with the matrix from the collector to the extender,
//! so they can never disagree.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::NodeKind;
use crate::estimate::Estimate;
use crate::fault_marks::{BAD_UPLINK_FACTOR, BadUplink, FaultMarks, IndexedMarks};
use crate::memo::LastAnswer;
use crate::node_estimate::{End, Group};
use crate::score::{Fallback, Source, Terms};
use crate::scored::{ScoredMatrix, ScoredPair};
use crate::verdict::Failure;

/// The placement policy's settings. The collector's are the truth: they
/// travel with the matrix to every follower.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PlacementConfig {
    /// Loss ratio to a placed worker (either direction) above which a node
    /// fails.
    pub loss_threshold: f64,
    /// Factor applied to the score of nodes outside the chosen zone.
    pub out_of_zone_factor: f64,
    /// Share of a placed worker's median goodput below which a node's
    /// goodput with it fails the node (0: never).
    pub min_goodput_fraction: f64,
    /// Fail nodes outside the chosen zone instead of scoring them low.
    pub strict_zone: bool,
}

impl Default for PlacementConfig {
    fn default() -> Self {
        Self {
            loss_threshold: 0.05,
            out_of_zone_factor: 0.1,
            min_goodput_fraction: 0.2,
            strict_zone: false,
        }
    }
}

/// Why a set of placement settings is unusable.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("{setting} is {value}, not between 0 and 1")]
pub struct PlacementConfigError {
    /// The setting (as its flag).
    pub setting: &'static str,
    /// Its value.
    pub value: f64,
}

impl PlacementConfig {
    /// The settings, checked: every ratio in [0, 1].
    pub fn checked(self) -> Result<Self, PlacementConfigError> {
        for (setting, value) in [
            ("--loss-threshold", self.loss_threshold),
            ("--out-of-zone-factor", self.out_of_zone_factor),
            ("--min-goodput-fraction", self.min_goodput_fraction),
        ] {
            if !(value.is_finite() && (0.0..=1.0).contains(&value)) {
                return Err(PlacementConfigError { setting, value });
            }
        }
        Ok(self)
    }
}

/// Settings a follower of the collector places by instead of the
/// collector's (the extender's flags): each one set overrides the
/// collector's, and the extender logs that it does.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PlacementOverrides {
    /// Instead of the collector's loss threshold.
    pub loss_threshold: Option<f64>,
    /// Instead of the collector's out-of-zone factor.
    pub out_of_zone_factor: Option<f64>,
    /// Instead of the collector's goodput fraction.
    pub min_goodput_fraction: Option<f64>,
    /// Instead of the collector's strict-zone setting.
    pub strict_zone: Option<bool>,
}

impl PlacementOverrides {
    /// `collector`'s settings with these overrides applied.
    pub fn apply(&self, collector: PlacementConfig) -> PlacementConfig {
        PlacementConfig {
            loss_threshold: self.loss_threshold.unwrap_or(collector.loss_threshold),
            out_of_zone_factor: self
                .out_of_zone_factor
                .unwrap_or(collector.out_of_zone_factor),
            min_goodput_fraction: self
                .min_goodput_fraction
                .unwrap_or(collector.min_goodput_fraction),
            strict_zone: self.strict_zone.unwrap_or(collector.strict_zone),
        }
    }

    /// The flags that are set, for the log.
    pub fn named(&self) -> Vec<(&'static str, String)> {
        let mut set = Vec::new();
        if let Some(v) = self.loss_threshold {
            set.push(("--loss-threshold", v.to_string()));
        }
        if let Some(v) = self.out_of_zone_factor {
            set.push(("--out-of-zone-factor", v.to_string()));
        }
        if let Some(v) = self.min_goodput_fraction {
            set.push(("--min-goodput-fraction", v.to_string()));
        }
        if let Some(v) = self.strict_zone {
            set.push(("--strict-zone", v.to_string()));
        }
        set
    }
}

/// A scored matrix and the settings it is placed by, with what placement
/// works out once per matrix and keeps: every ranking and every extender
/// decision goes through one.
#[derive(Debug)]
pub struct Placer {
    matrix: ScoredMatrix,
    config: PlacementConfig,
    /// The open faults of the matrix's network that placement acts on,
    /// by name (what followers receive) and over the matrix's nodes.
    faults: FaultMarks,
    marks: IndexedMarks,
    /// Each feasible node's terms with its zone, for the last feasible set
    /// asked about: the extender is asked to filter and then to prioritize
    /// each pod of a job, every time with the same candidates.
    zone_terms: LastAnswer<Vec<bool>, Vec<Option<NodeTerms>>>,
}

impl Clone for Placer {
    /// A copy starts with nothing worked out.
    fn clone(&self) -> Self {
        Self::new(self.matrix.clone(), self.config).with_faults(self.faults.clone())
    }
}

impl Default for Placer {
    fn default() -> Self {
        Self::new(ScoredMatrix::default(), PlacementConfig::default())
    }
}

impl Placer {
    /// Places on `matrix` by `config`.
    pub fn new(matrix: ScoredMatrix, config: PlacementConfig) -> Self {
        Self {
            matrix,
            config,
            faults: FaultMarks::default(),
            marks: IndexedMarks::default(),
            zone_terms: LastAnswer::default(),
        }
    }

    /// The same placer acting on `faults`, the open faults of its
    /// matrix's network: a node's own fault fails it, a bad uplink lowers
    /// the nodes whose workers would cross it ([`crate::fault_marks`]).
    pub fn with_faults(mut self, faults: FaultMarks) -> Self {
        let n = self.matrix.nodes().len();
        self.marks = IndexedMarks::new(&faults, n, |name| self.matrix.index_of(name));
        self.faults = faults;
        self.zone_terms = LastAnswer::default();
        self
    }

    /// The faults it acts on.
    pub fn faults(&self) -> &FaultMarks {
        &self.faults
    }

    /// The scored matrix.
    pub fn matrix(&self) -> &ScoredMatrix {
        &self.matrix
    }

    /// The settings.
    pub fn config(&self) -> &PlacementConfig {
        &self.config
    }

    /// The same placer on the matrix with the zones (and regions) that
    /// `place` gives ([`ScoredMatrix::with_places`]).
    pub fn with_places(&self, place: impl Fn(&str) -> Option<(String, String)>) -> Self {
        Self::new(self.matrix.with_places(place), self.config).with_faults(self.faults.clone())
    }

    /// Ranks the candidates for a job. Ties keep the candidates' order. A
    /// name given more than once gets one verdict at each of its places
    /// (the same one: a node's verdict does not depend on where it was
    /// named) and counts once when the zone is chosen.
    pub fn rank<'a>(&'a self, job: &JobRequest<'a>) -> Ranking<'a> {
        self.judge(job).sorted()
    }

    /// What [`Placer::rank`] finds, with the nodes left in the request's
    /// order (one per place): for the extender, which answers in that
    /// order, sorting 5,000 verdicts would be a third of its call.
    pub fn judge<'a>(&'a self, job: &JobRequest<'a>) -> Ranking<'a> {
        judge(
            &self.matrix,
            job,
            &self.config,
            &self.marks,
            &self.zone_terms,
        )
    }

    /// Works out ahead what every ranking reads (node health, what the
    /// estimates of unprobed pairs read) and what the rankings of first
    /// workers share when every agent is a candidate (each node's terms
    /// with its zone), so that the first `rank` or /prioritize after a new
    /// snapshot finds it done: the collector and the extender call this
    /// where they build a snapshot, off the path of any request.
    pub fn warm(&self) {
        self.matrix.prepare();
        let first_worker = JobRequest {
            size: 1,
            ..JobRequest::default()
        };
        self.judge(&first_worker);
    }
}

/// A job to place. It borrows its names: the extender ranks thousands of
/// candidates per request and must not copy them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct JobRequest<'a> {
    /// Number of workers (k).
    pub size: usize,
    /// Nodes where workers of the job already run.
    pub placed: &'a [String],
    /// Nodes to consider; `None` means every agent node not in `placed`.
    pub candidates: Option<&'a [String]>,
    /// Fail nodes outside the chosen zone instead of scoring them low, even
    /// where the settings do not ([`PlacementConfig::strict_zone`]).
    pub strict_zone: bool,
}

/// What the pairs behind a score would say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// Scored against the job's placed workers.
    Placed,
    /// Scored against the other candidates of its zone.
    Zone,
    /// The only placed worker runs on this node: no network between them.
    Colocated,
}

impl Basis {
    /// The name used on the wire and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Basis::Placed => "placed",
            Basis::Zone => "zone",
            Basis::Colocated => "colocated",
        }
    }
}

/// The terms behind one node's score: means over the pairs it averaged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeTerms {
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
    /// Of those, pairs whose delay or loss term fell back.
    pub fallback_pairs: u32,
    /// What the node was scored against.
    pub basis: Basis,
    /// Whether the node is in the chosen zone.
    pub in_chosen_zone: bool,
}

/// One candidate's verdict, borrowing names from the request and the
/// matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedNode<'a> {
    /// Position of the node in the candidate list (the request's, or the
    /// default list of agent nodes by name).
    pub candidate: usize,
    /// Node name.
    pub name: &'a str,
    /// Its zone (empty for an unknown node).
    pub zone: &'a str,
    /// In [0, 1]; 0 for infeasible nodes.
    pub score: f64,
    /// Why the node must not be used; `None` when it may. Boxed: the
    /// extender ranks thousands of candidates per call and most pass, so
    /// each carries a pointer rather than room for the largest failure.
    pub failure: Option<Box<Failure>>,
    /// The terms behind the score.
    pub terms: NodeTerms,
    /// The bad block uplink its worker would put the job's traffic
    /// across, which scaled its score by [`BAD_UPLINK_FACTOR`].
    pub bad_uplink: Option<BadUplink<'a>>,
}

impl RankedNode<'_> {
    /// Whether the node may be used.
    pub fn feasible(&self) -> bool {
        self.failure.is_none()
    }
}

/// The answer: a zone and the candidates, feasible ones best first.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranking<'a> {
    /// The chosen zone, if any candidate is feasible.
    pub zone: Option<String>,
    /// Why that zone.
    pub zone_reason: ZoneReason,
    /// Feasible nodes by score (best first), then the infeasible ones.
    pub nodes: Vec<RankedNode<'a>>,
}

/// Why placement chose the zone it chose (or none).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ZoneReason {
    /// The zone holds the most of the job's placed workers.
    HoldsPlaced {
        /// Placed workers in the zone.
        count: usize,
        /// Placed workers in all.
        placed: usize,
    },
    /// The zone has room for the job and its best nodes are the best
    /// connected of any such zone.
    BestConnected {
        /// Feasible nodes in the zone.
        feasible: usize,
        /// Workers in the job.
        size: usize,
        /// Mean pair quality among its `size` best connected nodes.
        quality: f64,
    },
    /// No zone has room for the job: this one has the most feasible nodes.
    Largest {
        /// Feasible nodes in the zone.
        feasible: usize,
        /// Workers in the job.
        size: usize,
    },
    /// No candidate is feasible: no zone.
    NoFeasibleCandidate,
}

impl std::fmt::Display for ZoneReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            ZoneReason::HoldsPlaced { count, placed } => {
                write!(f, "holds {count} of the job's {placed} placed workers")
            }
            ZoneReason::BestConnected {
                feasible,
                size,
                quality,
            } => write!(
                f,
                "has {feasible} feasible nodes for {size} workers; best {size} connected at mean quality {quality:.3}"
            ),
            ZoneReason::Largest { feasible, size } => write!(
                f,
                "no zone has {size} feasible nodes; this one has the most ({feasible})"
            ),
            ZoneReason::NoFeasibleCandidate => f.write_str("no feasible candidate"),
        }
    }
}

impl<'a> Ranking<'a> {
    /// The same nodes, feasible ones by score (best first), then the
    /// infeasible ones; ties keep the candidates' order.
    pub fn sorted(mut self) -> Self {
        self.nodes.sort_by(|a, b| {
            b.feasible()
                .cmp(&a.feasible())
                .then(b.score.total_cmp(&a.score))
                .then(a.candidate.cmp(&b.candidate))
        });
        self
    }

    /// The `k` best feasible nodes, best first (ties: the earlier
    /// candidate), found without sorting every node.
    pub fn best_feasible(&self, k: usize) -> Vec<&RankedNode<'a>> {
        let better = |a: &RankedNode<'_>, b: &RankedNode<'_>| {
            a.score > b.score || (a.score == b.score && a.candidate < b.candidate)
        };
        let mut best: Vec<&RankedNode<'a>> = Vec::with_capacity(k + 1);
        for node in self.nodes.iter().filter(|n| n.feasible()) {
            // Most nodes are no better than the last of a full list.
            if best.len() == k && best.last().is_some_and(|last| !better(node, last)) {
                continue;
            }
            let at = best
                .iter()
                .position(|b| better(node, b))
                .unwrap_or(best.len());
            if at < k {
                best.insert(at, node);
                best.truncate(k);
            }
        }
        best
    }
}

/// The nodes of a ranking in the request's order, one per place.
fn judge<'a>(
    matrix: &'a ScoredMatrix,
    job: &JobRequest<'a>,
    config: &PlacementConfig,
    marks: &'a IndexedMarks,
    zone_terms_cache: &LastAnswer<Vec<bool>, Vec<Option<NodeTerms>>>,
) -> Ranking<'a> {
    let strict_zone = job.strict_zone || config.strict_zone;
    let n = matrix.nodes().len();
    let placed: Vec<usize> = job
        .placed
        .iter()
        .filter_map(|name| matrix.index_of(name))
        .collect();
    let placed_set = membership(n, placed.iter().copied());
    // Everything placement needs from the placed workers' links, gathered in
    // one walk over those links only.
    let to_placed = links_to(matrix, &placed, &placed_medians(matrix, &placed));
    let candidate_names: Vec<&str> = match &job.candidates {
        Some(names) => names.iter().map(String::as_str).collect(),
        None => matrix
            .nodes()
            .iter()
            .enumerate()
            .filter(|(i, node)| node.info.kind == NodeKind::Agent && !placed_set[*i])
            .map(|(_, node)| node.info.name.as_str())
            .collect(),
    };

    // Node-level failures that do not depend on the zone.
    // (place in the request, name, index in the matrix, failure).
    type Verdict<'a> = (usize, &'a str, Option<usize>, Option<Box<Failure>>);
    let verdicts: Vec<Verdict<'_>> = candidate_names
        .into_iter()
        .enumerate()
        .map(|(candidate, name)| {
            let index = matrix.index_of(name);
            let failure = match index {
                None => Some(Failure::UnknownNode),
                Some(i) if matrix.nodes()[i].stale => Some(Failure::Stale),
                Some(i) => lossy_peer(matrix, &to_placed[i], config.loss_threshold)
                    .or_else(|| slow_peer(matrix, &to_placed[i], config.min_goodput_fraction))
                    // A named fault says more than the degraded mark
                    // (which part is broken, against what baseline).
                    .or_else(|| marks.node_fault(i).map(Failure::NodeFault))
                    .or_else(|| {
                        matrix.health()[i]
                            .degraded(config.loss_threshold, config.min_goodput_fraction)
                            .map(Failure::Degraded)
                    }),
            };
            (candidate, name, index, failure.map(Box::new))
        })
        .collect();

    let feasible_set = membership(
        n,
        verdicts
            .iter()
            .filter(|(_, _, _, f)| f.is_none())
            .filter_map(|(_, _, i, _)| *i),
    );
    // Each feasible node once, however often it was named.
    let feasible: Vec<usize> = (0..n).filter(|&i| feasible_set[i]).collect();
    let zone_counts = ZoneCounts::of(matrix, &feasible);
    // A first worker's terms are its links with its zone: the same for
    // every call with these candidates, so worked out once per snapshot
    // and feasible set (the filter and prioritize calls of every pod).
    let feasible_zone_terms = if placed.is_empty() {
        zone_terms_cache.get(&feasible_set, || {
            (0..n)
                .map(|i| {
                    feasible_set[i].then(|| zone_terms(matrix, i, &feasible_set, &zone_counts))
                })
                .collect()
        })
    } else {
        std::sync::Arc::default()
    };
    let (zone, zone_reason) = choose_zone(matrix, &placed, &feasible, job.size, |i| {
        feasible_zone_terms
            .get(i)
            .copied()
            .flatten()
            .map_or(0.0, |t| t.quality)
    });
    let zone_of = |i: usize| matrix.nodes()[i].info.zone.as_str();

    let nodes: Vec<RankedNode<'_>> = verdicts
        .into_iter()
        .map(|(candidate, name, index, mut failure)| {
            let Some(i) = index else {
                return RankedNode {
                    candidate,
                    name,
                    zone: "",
                    score: 0.0,
                    failure,
                    terms: NodeTerms::empty(),
                    bad_uplink: None,
                };
            };
            let in_zone = zone.as_deref() == Some(zone_of(i));
            let mut terms = if placed.is_empty() {
                feasible_zone_terms
                    .get(i)
                    .copied()
                    .flatten()
                    .unwrap_or_else(|| zone_terms(matrix, i, &feasible_set, &zone_counts))
            } else if placed.iter().all(|&p| p == i) {
                NodeTerms::colocated()
            } else {
                to_placed[i].terms(Basis::Placed)
            };
            terms.in_chosen_zone = in_zone;
            if failure.is_none() && !in_zone && strict_zone {
                failure = Some(Box::new(match &zone {
                    Some(zone) => Failure::OutsideZone { zone: zone.clone() },
                    None => Failure::NoZone,
                }));
            }
            let bad_uplink = marks.crossed_uplink(i, &placed, job.size);
            let factor = if in_zone {
                1.0
            } else {
                config.out_of_zone_factor
            } * if bad_uplink.is_some() {
                BAD_UPLINK_FACTOR
            } else {
                1.0
            };
            let score = if failure.is_some() {
                0.0
            } else {
                (terms.quality * factor).clamp(0.0, 1.0)
            };
            RankedNode {
                candidate,
                name,
                zone: zone_of(i),
                score,
                failure,
                terms,
                bad_uplink,
            }
        })
        .collect();
    Ranking {
        zone,
        zone_reason,
        nodes,
    }
}

/// A membership table over node indices.
fn membership(n: usize, members: impl Iterator<Item = usize>) -> Vec<bool> {
    let mut set = vec![false; n];
    for i in members {
        set[i] = true;
    }
    set
}

impl NodeTerms {
    fn empty() -> Self {
        Self {
            quality: 0.0,
            delay: 0.0,
            loss: 0.0,
            throughput: 0.0,
            pairs: 0,
            fallback_pairs: 0,
            basis: Basis::Zone,
            in_chosen_zone: false,
        }
    }

    /// The job's only placed worker is on this node: no link to pay for.
    fn colocated() -> Self {
        Self {
            quality: 1.0,
            delay: 1.0,
            loss: 1.0,
            throughput: 1.0,
            basis: Basis::Colocated,
            ..Self::empty()
        }
    }
}

/// Sums of the terms of a set of pairs, for their means.
#[derive(Debug, Clone, Copy, Default)]
struct TermSums {
    /// quality, delay, loss, throughput.
    sums: [f64; 4],
    pairs: u32,
    fallback_pairs: u32,
}

impl TermSums {
    fn add_pair(&mut self, pair: &ScoredPair) {
        self.add(pair.quality, &pair.terms, pair.is_fallback(), 1);
    }

    /// A pair nobody probes whose reverse was measured: the reverse's
    /// delay and loss, and `throughput` (term and source) as estimated.
    fn add_reversed(
        &mut self,
        reverse: &ScoredPair,
        throughput: Option<(f64, Source)>,
        fallback: Fallback,
    ) {
        let (throughput, throughput_source) = throughput.unwrap_or((0.0, Source::Unknown));
        let terms = Terms::of(
            (reverse.terms.delay, reverse.terms.delay_source),
            (reverse.terms.loss, reverse.terms.loss_source),
            (throughput, throughput_source),
            reverse.terms.dead,
        );
        let fallback_pair = reverse.is_fallback();
        self.add(fallback.quality(&terms), &terms, fallback_pair, 1);
    }

    /// `count` pairs nobody measured, each taken to be `estimate`.
    fn add_estimates(&mut self, estimate: &Estimate, count: u32) {
        self.add(estimate.quality, &estimate.terms, true, count);
    }

    fn add(&mut self, quality: f64, terms: &Terms, fallback: bool, count: u32) {
        let weight = f64::from(count);
        self.sums[0] += quality * weight;
        self.sums[1] += terms.delay * weight;
        self.sums[2] += terms.loss * weight;
        self.sums[3] += terms.throughput * weight;
        self.pairs += count;
        self.fallback_pairs += if fallback { count } else { 0 };
    }

    fn terms(&self, basis: Basis) -> NodeTerms {
        let mut terms = NodeTerms {
            basis,
            pairs: self.pairs,
            fallback_pairs: self.fallback_pairs,
            ..NodeTerms::empty()
        };
        if self.pairs > 0 {
            let count = f64::from(self.pairs);
            terms.quality = self.sums[0] / count;
            terms.delay = self.sums[1] / count;
            terms.loss = self.sums[2] / count;
            terms.throughput = self.sums[3] / count;
        }
        terms
    }
}

/// What the links between one node and the placed workers add up to.
#[derive(Debug, Clone, Default)]
struct Links<'m> {
    sums: TermSums,
    /// The lossiest fresh pair, for the filter's reason.
    lossiest: Option<&'m ScoredPair>,
    /// The pair with the lowest fresh goodput against its placed end's
    /// median: (pair, goodput, median).
    slowest: Option<(&'m ScoredPair, f64, f64)>,
}

impl<'m> Links<'m> {
    fn add(&mut self, pair: &'m ScoredPair, placed_median: Option<f64>) {
        if let (Some(goodput), Some(median)) = (pair.fresh_goodput(), placed_median) {
            let ratio = |(_, g, m): (&ScoredPair, f64, f64)| g / m;
            if self
                .slowest
                .is_none_or(|worst| goodput / median < ratio(worst))
            {
                self.slowest = Some((pair, goodput, median));
            }
        }
        self.sums.add_pair(pair);
        if !pair.stale {
            let loss = |p: &ScoredPair| p.summary.loss_ratio.unwrap_or(0.0);
            if self.lossiest.is_none_or(|worst| loss(pair) > loss(worst)) {
                self.lossiest = Some(pair);
            }
        }
    }

    fn terms(&self, basis: Basis) -> NodeTerms {
        self.sums.terms(basis)
    }
}

/// Each placed worker's median fresh goodput over all its links, by node
/// index (`None`: not placed, or no goodput).
fn placed_medians(matrix: &ScoredMatrix, placed: &[usize]) -> Vec<Option<f64>> {
    let mut medians = vec![None; matrix.nodes().len()];
    for &peer in placed {
        let mut goodputs: Vec<f64> = matrix
            .links(peer)
            .filter_map(ScoredPair::fresh_goodput)
            .collect();
        medians[peer] = crate::stats::upper_median(&mut goodputs);
    }
    medians
}

/// For every node, its links with the placed workers (both directions):
/// the measured ones from one walk over the placed workers' own links, and
/// every other pair between them estimated from their zones (counted per
/// zone of the placed workers, so that the cost does not grow with
/// candidates times workers).
fn links_to<'m>(
    matrix: &'m ScoredMatrix,
    placed: &[usize],
    medians: &[Option<f64>],
) -> Vec<Links<'m>> {
    let n = matrix.nodes().len();
    let mut links = vec![Links::default(); n];
    let mut walked = vec![false; n];
    // The placed workers' zones, and in each how many workers and agents.
    let mut zones: Vec<(usize, u32, u32)> = Vec::new();
    let slot_of = |zones: &mut Vec<(usize, u32, u32)>, zone: usize| match zones
        .iter()
        .position(|(z, ..)| *z == zone)
    {
        Some(slot) => slot,
        None => {
            zones.push((zone, 0, 0));
            zones.len() - 1
        }
    };
    let mut placed_slots = Vec::new();
    for &peer in placed {
        if std::mem::replace(&mut walked[peer], true) {
            continue;
        }
        let Some(zone) = matrix.zone_index(peer) else {
            continue;
        };
        let slot = slot_of(&mut zones, zone);
        zones[slot].1 += 1;
        zones[slot].2 += u32::from(matrix.probes(peer));
        placed_slots.push((peer, slot));
    }
    // Per node and placed zone: measured pairs to and from its workers.
    let mut measured_out = vec![0u32; n * zones.len()];
    let mut measured_in = vec![0u32; n * zones.len()];
    for &(peer, slot) in &placed_slots {
        // Each pair lands with the node at its other end; a pair between
        // two placed workers lands once with each of them.
        for pair in matrix.links(peer) {
            let other = pair.other_end(peer);
            links[other].add(pair, medians[peer]);
            let counts = if pair.dst == peer {
                &mut measured_out
            } else {
                &mut measured_in
            };
            counts[other * zones.len() + slot] += 1;
        }
    }
    // Each zone's placed workers taken together: the other end of the
    // pairs nobody probes between them and a node.
    let groups: Vec<Group> = zones
        .iter()
        .enumerate()
        .map(|(slot, &(zone, ..))| {
            let members = placed_slots.iter().filter(move |(_, s)| *s == slot);
            matrix.group(zone, members.map(|&(peer, _)| peer))
        })
        .collect();
    for (node, node_links) in links.iter_mut().enumerate() {
        let Some(zone) = matrix.zone_index(node) else {
            continue;
        };
        let probes = matrix.probes(node);
        for (slot, &(placed_zone, workers, agents)) in zones.iter().enumerate() {
            // The node itself, if placed, has no pair with itself.
            let itself = walked[node] && zone == placed_zone;
            let out_expected = if probes {
                workers - u32::from(itself)
            } else {
                0
            };
            let in_expected = agents - u32::from(itself && probes);
            let index = node * zones.len() + slot;
            let (me, workers) = (End::Node(node), End::Group(&groups[slot]));
            let missing_out = out_expected.saturating_sub(measured_out[index]);
            if missing_out > 0 {
                let estimate = matrix.estimate_between(me, workers);
                node_links.sums.add_estimates(&estimate, missing_out);
            }
            let missing_in = in_expected.saturating_sub(measured_in[index]);
            if missing_in > 0 {
                let estimate = matrix.estimate_between(workers, me);
                node_links.sums.add_estimates(&estimate, missing_in);
            }
        }
    }
    links
}

/// Why a node fails the filter: too much loss to a placed worker.
fn lossy_peer(matrix: &ScoredMatrix, links: &Links<'_>, threshold: f64) -> Option<Failure> {
    let pair = links.lossiest?;
    let loss = pair.summary.loss_ratio.filter(|&loss| loss > threshold)?;
    let name = |i: usize| matrix.nodes()[i].info.name.clone();
    Some(Failure::LossToWorker {
        src: name(pair.src),
        dst: name(pair.dst),
        loss,
        threshold,
    })
}

/// Why a node fails the filter: its goodput with a placed worker is a small
/// share of what that worker usually gets.
fn slow_peer(matrix: &ScoredMatrix, links: &Links<'_>, fraction: f64) -> Option<Failure> {
    let (pair, goodput_bps, median_bps) = links.slowest?;
    if fraction <= 0.0 || goodput_bps >= fraction * median_bps {
        return None;
    }
    let name = |i: usize| matrix.nodes()[i].info.name.clone();
    Some(Failure::GoodputToWorker {
        src: name(pair.src),
        dst: name(pair.dst),
        goodput_bps,
        median_bps,
        fraction,
    })
}

/// How many nodes of each zone may take a worker, and how many of those
/// run agents: what a node's links with its zone-mates would number if
/// every pair were measured.
struct ZoneCounts {
    feasible: Vec<u32>,
    feasible_agents: Vec<u32>,
}

impl ZoneCounts {
    fn of(matrix: &ScoredMatrix, feasible: &[usize]) -> Self {
        let mut counts = Self {
            feasible: vec![0; matrix.zone_count()],
            feasible_agents: vec![0; matrix.zone_count()],
        };
        for &i in feasible {
            if let Some(zone) = matrix.zone_index(i) {
                counts.feasible[zone] += 1;
                counts.feasible_agents[zone] += u32::from(matrix.probes(i));
            }
        }
        counts
    }
}

/// Means of the pair terms between `node` and the feasible nodes of its
/// zone, both ways: its measured links, and the rest estimated.
fn zone_terms(
    matrix: &ScoredMatrix,
    node: usize,
    feasible_set: &[bool],
    counts: &ZoneCounts,
) -> NodeTerms {
    let Some(zone) = matrix.zone_index(node) else {
        return NodeTerms::empty();
    };
    let mate = |j: usize| feasible_set[j] && matrix.zone_index(j) == Some(zone);
    let mut sums = TermSums::default();
    // Each direction's pairs with mates, by the mate at the other end
    // (each list allocated once: this runs for every candidate).
    let with_mate = |pair: &ScoredPair| mate(pair.other_end(node));
    let mut outgoing = kept(matrix.outgoing(node), with_mate);
    let mut incoming = kept(matrix.incoming(node), with_mate);
    outgoing.sort_unstable_by_key(|p| p.other_end(node));
    incoming.sort_unstable_by_key(|p| p.other_end(node));
    // Each pair's reverse, found by one walk along both sorted lists.
    let (reverse_of_outgoing, reverse_of_incoming) = reverses(&outgoing, &incoming, node);
    // A round trip takes the same path either way: a direction without
    // fresh figures (nobody probes it now, or its data went stale) whose
    // reverse was measured takes the reverse's delay and loss (goodput,
    // which is one-way, is its own). Otherwise which of a node's pairs the
    // rotating peer sets probe now, not the node, would decide how many
    // estimates (and their penalty) it carries.
    let fallback = matrix.fallback();
    for (pairs, their_reverses, reverses) in [
        (&outgoing, &reverse_of_outgoing, &incoming),
        (&incoming, &reverse_of_incoming, &outgoing),
    ] {
        for (pair, reverse) in pairs.iter().zip(their_reverses) {
            let reverse = reverse
                .map(|i| reverses[i])
                .filter(|reverse| pair.is_fallback() && !reverse.is_fallback());
            match reverse {
                Some(reverse) => sums.add_reversed(
                    reverse,
                    Some((pair.terms.throughput, pair.terms.throughput_source)),
                    fallback,
                ),
                None => sums.add_pair(pair),
            }
        }
    }
    let mut measured_out = u32::try_from(outgoing.len()).unwrap_or(u32::MAX);
    let mut measured_in = u32::try_from(incoming.len()).unwrap_or(u32::MAX);
    let mates_group = matrix.zone_group(zone);
    let throughput_estimate = |me_first: bool| {
        mates_group.map(|mates| {
            let (me, mates) = (End::Node(node), End::Group(mates));
            let estimate = if me_first {
                matrix.estimate_between(me, mates)
            } else {
                matrix.estimate_between(mates, me)
            };
            (estimate.terms.throughput, estimate.terms.throughput_source)
        })
    };
    // The directions nobody probes at all, where the reverse is measured.
    if matrix.probes(node) {
        let throughput = throughput_estimate(true);
        let unpaired = incoming.iter().zip(&reverse_of_incoming);
        for (reverse, _) in unpaired.filter(|(r, out)| !r.is_fallback() && out.is_none()) {
            sums.add_reversed(reverse, throughput, fallback);
            measured_out += 1;
        }
    }
    let throughput = throughput_estimate(false);
    let unpaired = outgoing.iter().zip(&reverse_of_outgoing);
    for (reverse, _) in unpaired.filter(|(r, inc)| !r.is_fallback() && inc.is_none()) {
        if matrix.probes(reverse.dst) {
            sums.add_reversed(reverse, throughput, fallback);
            measured_in += 1;
        }
    }
    let itself = feasible_set[node];
    let out_expected = if matrix.probes(node) {
        counts.feasible[zone] - u32::from(itself)
    } else {
        0
    };
    let in_expected = counts.feasible_agents[zone] - u32::from(itself && matrix.probes(node));
    if let Some(mates) = matrix.zone_group(zone) {
        let (me, mates) = (End::Node(node), End::Group(mates));
        let missing_out = out_expected.saturating_sub(measured_out);
        if missing_out > 0 {
            sums.add_estimates(&matrix.estimate_between(me, mates), missing_out);
        }
        let missing_in = in_expected.saturating_sub(measured_in);
        if missing_in > 0 {
            sums.add_estimates(&matrix.estimate_between(mates, me), missing_in);
        }
    }
    sums.terms(Basis::Zone)
}

/// For each of `node`'s outgoing pairs, where its reverse sits among the
/// incoming ones, and the other way round; both lists sorted by the node
/// at the other end, each end at most once, so one walk along both finds
/// every reverse.
fn reverses(
    outgoing: &[&ScoredPair],
    incoming: &[&ScoredPair],
    node: usize,
) -> (Vec<Option<usize>>, Vec<Option<usize>>) {
    let mut of_outgoing = vec![None; outgoing.len()];
    let mut of_incoming = vec![None; incoming.len()];
    let (mut o, mut i) = (0, 0);
    while o < outgoing.len() && i < incoming.len() {
        match outgoing[o]
            .other_end(node)
            .cmp(&incoming[i].other_end(node))
        {
            Ordering::Less => o += 1,
            Ordering::Greater => i += 1,
            Ordering::Equal => {
                of_outgoing[o] = Some(i);
                of_incoming[i] = Some(o);
                o += 1;
                i += 1;
            }
        }
    }
    (of_outgoing, of_incoming)
}

/// The pairs that `keep` keeps, in a list allocated once at the most it
/// can hold.
fn kept<'m>(
    pairs: impl ExactSizeIterator<Item = &'m ScoredPair>,
    keep: impl Fn(&ScoredPair) -> bool,
) -> Vec<&'m ScoredPair> {
    let mut kept = Vec::with_capacity(pairs.len());
    kept.extend(pairs.filter(|pair| keep(pair)));
    kept
}

/// The zone for the job, and why.
fn choose_zone(
    matrix: &ScoredMatrix,
    placed: &[usize],
    feasible: &[usize],
    size: usize,
    quality_in_zone: impl Fn(usize) -> f64,
) -> (Option<String>, ZoneReason) {
    let zone_of = |i: usize| matrix.nodes()[i].info.zone.as_str();
    if !placed.is_empty() {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for &p in placed {
            *counts.entry(zone_of(p)).or_default() += 1;
        }
        // BTreeMap order makes ties go to the first zone by name.
        let (zone, count) = counts
            .iter()
            .fold(None, |best: Option<(&str, usize)>, (&z, &c)| match best {
                Some((_, bc)) if bc >= c => best,
                _ => Some((z, c)),
            })
            .expect("placed is not empty");
        return (
            Some(zone.to_owned()),
            ZoneReason::HoldsPlaced {
                count,
                placed: placed.len(),
            },
        );
    }
    let mut by_zone: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for &i in feasible {
        by_zone.entry(zone_of(i)).or_default().push(i);
    }
    let best = by_zone
        .iter()
        .map(|(&zone, members)| {
            (
                zone,
                members.len(),
                best_group_quality(matrix, members, size, &quality_in_zone),
            )
        })
        .max_by(|a, b| {
            (a.1 >= size)
                .cmp(&(b.1 >= size))
                .then_with(|| {
                    if a.1 >= size {
                        a.2.total_cmp(&b.2)
                    } else {
                        a.1.cmp(&b.1).then(a.2.total_cmp(&b.2))
                    }
                })
                .then_with(|| b.0.cmp(a.0))
        });
    match best {
        None => (None, ZoneReason::NoFeasibleCandidate),
        Some((zone, feasible, quality)) if feasible >= size => (
            Some(zone.to_owned()),
            ZoneReason::BestConnected {
                feasible,
                size,
                quality,
            },
        ),
        Some((zone, feasible, _)) => (
            Some(zone.to_owned()),
            ZoneReason::Largest { feasible, size },
        ),
    }
}

/// Mean pair quality among the `size` members of a zone best connected to
/// the rest (`quality_in_zone`; measured pairs, the others estimated).
fn best_group_quality(
    matrix: &ScoredMatrix,
    members: &[usize],
    size: usize,
    quality_in_zone: impl Fn(usize) -> f64,
) -> f64 {
    let mut scored: Vec<(usize, f64)> = members.iter().map(|&i| (i, quality_in_zone(i))).collect();
    // The best `size` by quality, ties to the lower index: a selection, not
    // a sort of the whole zone (the group's order does not matter).
    let best_first = |a: &(usize, f64), b: &(usize, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    let size = size.max(1);
    if size < scored.len() {
        scored.select_nth_unstable_by(size - 1, best_first);
    }
    let group: Vec<usize> = scored.iter().take(size).map(|(i, _)| *i).collect();
    let in_group = membership(matrix.nodes().len(), group.iter().copied());
    let mut sums = TermSums::default();
    for &a in &group {
        let mut measured = 0u32;
        for pair in matrix.outgoing(a).filter(|pair| in_group[pair.dst]) {
            sums.add_pair(pair);
            measured += 1;
        }
        if matrix.probes(a) {
            let others = u32::try_from(group.len() - 1).unwrap_or(u32::MAX);
            let mates = matrix
                .zone_index(a)
                .and_then(|zone| matrix.zone_group(zone));
            if let Some(mates) = mates {
                sums.add_estimates(
                    &matrix.estimate_between(End::Node(a), End::Group(mates)),
                    others.saturating_sub(measured),
                );
            }
        }
    }
    sums.terms(Basis::Zone).quality
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scored::tests::{scored, with_goodputs};

    /// Three zones: a (3 nodes, a3 lossy), b (3 clean nodes, slower), c (1).
    fn cluster() -> ScoredMatrix {
        let nodes = [
            ("a1", "a"),
            ("a2", "a"),
            ("a3", "a"),
            ("b1", "b"),
            ("b2", "b"),
            ("b3", "b"),
            ("c1", "c"),
        ];
        let mut measured = Vec::new();
        for (src, sz) in nodes {
            for (dst, dz) in nodes {
                if src == dst {
                    continue;
                }
                let (median, loss) = match (sz == dz, sz) {
                    (true, "a") if src == "a3" || dst == "a3" => (0.1, 0.2),
                    (true, "a") => (0.1, 0.0),
                    (true, _) => (0.3, 0.0),
                    (false, _) => (20.0, 0.0),
                };
                measured.push((src, dst, median, loss));
            }
        }
        scored(&nodes, &measured, 10_000)
    }

    fn owned(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn job(size: usize, placed: &[String]) -> JobRequest<'_> {
        JobRequest {
            size,
            placed,
            ..JobRequest::default()
        }
    }

    #[test]
    fn a_direction_nobody_probes_takes_its_reverse_round_trip() {
        // b2 is 2 ms slower than its mates; the rotating peer sets probe
        // b1 <-> b2 both ways, b3 -> b1 and b3 -> b2 only.
        let nodes = [("b1", "zone-b"), ("b2", "zone-b"), ("b3", "zone-b")];
        let measured = [
            ("b1", "b2", 2.2, 0.0),
            ("b2", "b1", 2.2, 0.0),
            ("b3", "b1", 0.2, 0.0),
            ("b3", "b2", 2.2, 0.0),
        ];
        let placer = Placer::new(
            scored(&nodes, &measured, 1_000_000),
            PlacementConfig::default(),
        );
        let ranking = placer.rank(&job(1, &[]));
        let node = |name: &str| ranking.nodes.iter().find(|n| n.name == name).unwrap();
        // Every pair is measured one way or the other: nothing estimated,
        // and b1 -> b3 is as good as b3 -> b1.
        for name in ["b1", "b2", "b3"] {
            assert_eq!(node(name).terms.fallback_pairs, 0, "{:?}", node(name));
            assert_eq!(node(name).terms.pairs, 4);
        }
        assert!(node("b1").terms.delay > node("b2").terms.delay);
        assert!(node("b3").terms.delay > node("b2").terms.delay);
        assert_eq!(names(&ranking).last(), Some(&"b2"), "{ranking:?}");
        // b1 and b3 see the same links: their delay terms agree.
        assert!((node("b1").terms.delay - node("b3").terms.delay).abs() < 1e-9);
    }

    fn names<'a>(ranking: &Ranking<'a>) -> Vec<&'a str> {
        ranking.nodes.iter().map(|n| n.name).collect()
    }

    #[test]
    fn a_warmed_or_asked_matrix_ranks_as_a_fresh_one() {
        let config = PlacementConfig::default();
        let asked = Placer::new(cluster(), config);
        asked.warm();
        let fewer = owned(&["a1", "b1", "b2", "b3"]);
        let with_fewer = JobRequest {
            candidates: Some(&fewer),
            ..job(2, &[])
        };
        // Each question against a matrix that answered others before, and
        // against a fresh copy (a copy starts with nothing worked out).
        for request in [&with_fewer, &job(2, &[]), &with_fewer] {
            let fresh = asked.clone();
            assert_eq!(fresh.matrix().pairs(), asked.matrix().pairs());
            assert_eq!(
                asked.rank(request),
                Placer::new(fresh.matrix().clone(), config).rank(request)
            );
        }
        // Without a2, a3 (lossy) and c1, zone a has one node left and b
        // three: a1 has no zone mate to be measured with.
        let ranking = asked.rank(&with_fewer);
        assert_eq!(ranking.zone.as_deref(), Some("b"));
    }

    #[test]
    fn picks_the_zone_whose_best_k_are_best_connected() {
        let matrix = cluster();
        let placer = Placer::new(matrix.clone(), PlacementConfig::default());
        let ranking = placer.rank(&job(2, &[]));
        assert_eq!(ranking.zone.as_deref(), Some("a"));
        assert_eq!(&names(&ranking)[..2], ["a1", "a2"]);
        // For 3 workers, zone a would need its lossy host: b is better.
        let placer = Placer::new(matrix.clone(), PlacementConfig::default());
        let ranking = placer.rank(&job(3, &[]));
        assert_eq!(ranking.zone.as_deref(), Some("b"));
        assert!(
            ranking.nodes[..3]
                .iter()
                .all(|n| n.zone == "b" && n.terms.in_chosen_zone)
        );
        assert!(ranking.nodes[3].score < ranking.nodes[2].score);
    }

    /// [`cluster`] with goodputs in zone b: 10 Gbit/s, but 0.5 to and from b3.
    fn cluster_with_a_slow_b3() -> ScoredMatrix {
        with_goodputs(&cluster(), |src, dst| {
            let slow = src == "b3" || dst == "b3";
            (src.starts_with('b') && dst.starts_with('b')).then_some(if slow {
                0.5e9
            } else {
                10e9
            })
        })
    }

    #[test]
    fn a_node_far_slower_than_a_placed_workers_usual_goodput_fails() {
        let matrix = cluster_with_a_slow_b3();
        let placed = owned(&["b1"]);
        let placer = Placer::new(matrix.clone(), PlacementConfig::default());
        let ranking = placer.rank(&job(3, &placed));
        let b3 = ranking.nodes.iter().find(|n| n.name == "b3").unwrap();
        let reason = b3.failure.as_ref().expect("b3 fails").to_string();
        assert!(reason.starts_with("goodput 0.500 Gbit/s"), "{reason}");
        assert!(reason.contains("median 10.000"), "{reason}");
        let b2 = ranking.nodes.iter().find(|n| n.name == "b2").unwrap();
        assert!(b2.feasible());
        // With nothing placed yet, b3 fails all the same: most of its own
        // links in its zone are that slow (and a3's that lossy).
        let placer = Placer::new(matrix.clone(), PlacementConfig::default());
        let ranking = placer.rank(&job(3, &[]));
        let failed: Vec<(&str, String)> = ranking
            .nodes
            .iter()
            .filter_map(|n| Some((n.name, n.failure.as_ref()?.to_string())))
            .collect();
        assert_eq!(failed.len(), 2, "{failed:?}");
        assert!(
            failed.iter().any(|(name, reason)| *name == "b3"
                && reason.starts_with("degraded: goodput 0.500 Gbit/s"))
        );
        assert!(
            failed
                .iter()
                .any(|(name, reason)| *name == "a3" && reason.starts_with("degraded: loss 20.0%"))
        );
        // Off: b3 is merely scored, placed worker or not.
        let off = PlacementConfig {
            min_goodput_fraction: 0.0,
            ..PlacementConfig::default()
        };
        for placed in [&placed[..], &[]] {
            let placer = Placer::new(matrix.clone(), off);
            let ranking = placer.rank(&job(3, placed));
            assert!(ranking.nodes.iter().all(|n| n.name != "b3" || n.feasible()));
        }
    }

    #[test]
    fn placed_workers_pull_their_zone_and_fail_lossy_nodes() {
        let matrix = cluster();
        let placed = owned(&["a1"]);
        let placer = Placer::new(matrix.clone(), PlacementConfig::default());
        let ranking = placer.rank(&job(3, &placed));
        assert_eq!(ranking.zone.as_deref(), Some("a"));
        assert_eq!(names(&ranking)[0], "a2");
        assert_eq!(ranking.nodes[0].terms.basis, Basis::Placed);
        let a3 = ranking.nodes.iter().find(|n| n.name == "a3").unwrap();
        assert!(!a3.feasible());
        assert!(
            a3.failure
                .as_ref()
                .unwrap()
                .to_string()
                .contains("loss 20.0%"),
            "{:?}",
            a3.failure
        );
        assert_eq!(ranking.nodes.last().unwrap().name, "a3");
        assert!(!names(&ranking).contains(&"a1"));
    }

    /// Zone b's open faults: b1's NIC loses 2% (under the loss threshold,
    /// so only the fault says so), and the uplink of block 1 (b2 alone).
    fn zone_b_faults() -> FaultMarks {
        use crate::fault_kind::FaultMetric;
        use crate::fault_marks::FaultMark;
        FaultMarks {
            marks: vec![
                FaultMark::Node {
                    node: "b1".into(),
                    metric: FaultMetric::Loss,
                    value: 0.02,
                    baseline: 0.0,
                },
                FaultMark::BlockUplink {
                    zone: "b".into(),
                    block: 1,
                    nodes: vec!["b2".into()],
                    metric: FaultMetric::Loss,
                    value: 0.03,
                    baseline: 0.0,
                },
            ],
        }
    }

    #[test]
    fn a_node_fault_fails_the_node_and_a_bad_uplink_halves_a_crossing_score() {
        let placed = owned(&["b3"]);
        let plain = Placer::new(cluster(), PlacementConfig::default());
        let faulty = plain.clone().with_faults(zone_b_faults());
        let before = plain.rank(&job(3, &placed));
        let after = faulty.rank(&job(3, &placed));
        fn node<'r>(ranking: &Ranking<'r>, name: &str) -> RankedNode<'r> {
            ranking
                .nodes
                .iter()
                .find(|n| n.name == name)
                .cloned()
                .unwrap()
        }
        // Without the faults both are fine: 2% is under the threshold.
        assert!(node(&before, "b1").feasible() && node(&before, "b2").feasible());
        let b1 = node(&after, "b1");
        assert_eq!(
            b1.failure.as_ref().map(|f| f.code()),
            Some(crate::verdict::FailureCode::NodeFault)
        );
        assert!(b1.failure.unwrap().fails_filter());
        // b2's worker would talk to b3 across its block's bad uplink.
        let b2 = node(&after, "b2");
        assert!(b2.feasible());
        let uplink = b2.bad_uplink.expect("crosses the uplink");
        assert_eq!((uplink.zone, uplink.block), ("b", 1));
        let ratio = b2.score / node(&before, "b2").score;
        assert!((ratio - BAD_UPLINK_FACTOR).abs() < 1e-9, "{ratio}");
        // The rest of the ranking is as it was.
        for name in ["a1", "a2", "a3", "c1"] {
            assert_eq!(node(&after, name), node(&before, name), "{name}");
        }
        // The same placer copied, or with other places, keeps its faults.
        assert_eq!(faulty.clone().rank(&job(3, &placed)), after);
        assert_eq!(faulty.with_places(|_| None).faults(), &zone_b_faults());
    }

    #[test]
    fn a_first_worker_behind_a_bad_uplink_is_held_back_only_when_the_job_cannot_fit_behind_it() {
        let faulty =
            Placer::new(cluster(), PlacementConfig::default()).with_faults(zone_b_faults());
        let candidates = owned(&["b2"]);
        let crosses = |size: usize| {
            let request = JobRequest {
                candidates: Some(&candidates),
                ..job(size, &[])
            };
            faulty.rank(&request).nodes[0].bad_uplink.is_some()
        };
        assert!(!crosses(1));
        assert!(crosses(2));
    }

    #[test]
    fn strict_mode_fails_other_zones() {
        let matrix = cluster();
        let placed = owned(&["b1"]);
        let request = JobRequest {
            strict_zone: true,
            ..job(2, &placed)
        };
        let placer = Placer::new(matrix.clone(), PlacementConfig::default());
        let ranking = placer.rank(&request);
        let feasible: Vec<&str> = ranking
            .nodes
            .iter()
            .filter(|n| n.feasible())
            .map(|n| n.name)
            .collect();
        assert_eq!(feasible, ["b2", "b3"]);
        let a1 = ranking.nodes.iter().find(|n| n.name == "a1").unwrap();
        assert_eq!(
            a1.failure.as_deref(),
            Some(&Failure::OutsideZone { zone: "b".into() })
        );
    }

    #[test]
    fn unknown_and_colocated_candidates() {
        let matrix = cluster();
        let placed = owned(&["b1"]);
        let candidates = owned(&["ghost", "b1", "b2"]);
        let request = JobRequest {
            candidates: Some(&candidates),
            ..job(2, &placed)
        };
        let placer = Placer::new(matrix.clone(), PlacementConfig::default());
        let ranking = placer.rank(&request);
        assert_eq!(names(&ranking), ["b1", "b2", "ghost"]);
        assert_eq!(ranking.nodes[0].terms.basis, Basis::Colocated);
        assert_eq!(
            ranking.nodes[2].failure.as_deref(),
            Some(&Failure::UnknownNode)
        );
    }

    #[test]
    fn too_small_zones_fall_back_to_the_largest() {
        let matrix = cluster();
        let placer = Placer::new(matrix.clone(), PlacementConfig::default());
        let ranking = placer.rank(&job(5, &[]));
        assert_eq!(
            ranking.zone_reason,
            ZoneReason::Largest {
                feasible: 3,
                size: 5
            }
        );
        assert!(matches!(ranking.zone.as_deref(), Some("a" | "b")));
        assert!(Placer::default().rank(&job(1, &[])).zone.is_none());
    }

    /// `matrix` with every pair it would estimate written out as a pair:
    /// what the collector served before it kept measured pairs only.
    fn densified(matrix: &ScoredMatrix) -> ScoredMatrix {
        let n = matrix.nodes().len();
        let pairs = (0..n)
            .flat_map(|src| (0..n).map(move |dst| (src, dst)))
            .filter_map(|(src, dst)| Some(matrix.pair_or_estimate(src, dst)?.into_owned()))
            .collect();
        ScoredMatrix::from_parts(matrix.nodes().to_vec(), pairs, matrix.fallback())
            .with_zone_averages_only()
    }

    proptest::proptest! {
        /// Counting the pairs nobody probes ranks exactly as writing every
        /// one of them out would. (Each end's own figures are left out
        /// here: placement estimates a node's pairs with a zone's typical
        /// node, not pair by pair, so only the zone averages are the same
        /// both ways.)
        #[test]
        fn sparse_ranks_as_dense(
            zones in proptest::collection::vec(0usize..3, 2..9),
            measured in proptest::collection::vec((0usize..9, 0usize..9, 0.05f64..30.0, 0.0f64..0.3), 0..40),
            size in 1usize..5,
            placed in proptest::collection::vec(0usize..9, 0..3),
            goodput in proptest::option::of(1e8f64..2e10),
        ) {
            let names: Vec<String> = (0..zones.len()).map(|i| format!("n{i}")).collect();
            let zone_names: Vec<String> = zones.iter().map(|z| format!("z{z}")).collect();
            let nodes: Vec<(&str, &str)> = names.iter().map(String::as_str).zip(zone_names.iter().map(String::as_str)).collect();
            let pairs: Vec<(&str, &str, f64, f64)> = measured
                .iter()
                .filter(|(s, d, ..)| s != d && *s < names.len() && *d < names.len())
                .map(|&(s, d, median, loss)| (names[s].as_str(), names[d].as_str(), median, loss))
                .collect();
            let sparse = with_goodputs(&scored(&nodes, &pairs, 10_000), |src, dst| {
                goodput.filter(|_| src < dst)
            })
            .with_zone_averages_only();
            let dense = densified(&sparse);
            let placed: Vec<String> = placed.iter().filter(|&&p| p < names.len()).map(|&p| names[p].clone()).collect();
            for strict_zone in [false, true] {
                let request = JobRequest { size, placed: &placed, candidates: None, strict_zone };
                let config = PlacementConfig::default();
                let (sparse, dense) = (Placer::new(sparse.clone(), config), Placer::new(dense.clone(), config));
                let (a, b) = (sparse.rank(&request), dense.rank(&request));
                proptest::prop_assert_eq!(&a.zone, &b.zone);
                proptest::prop_assert_eq!(a.nodes.len(), b.nodes.len());
                for x in &a.nodes {
                    let y = b.nodes.iter().find(|y| y.candidate == x.candidate).unwrap();
                    proptest::prop_assert_eq!(&x.failure, &y.failure);
                    proptest::prop_assert!((x.score - y.score).abs() < 1e-9, "{} vs {}", x.score, y.score);
                    proptest::prop_assert_eq!((x.terms.pairs, x.terms.fallback_pairs), (y.terms.pairs, y.terms.fallback_pairs));
                }
            }
        }
    }
}
