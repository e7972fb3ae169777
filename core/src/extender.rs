//! The kube-scheduler extender's decisions, pure: which candidate nodes
//! pass the filter and what each scores, from the placement policy
//! ([`Placer::judge`], the same code as `netaware rank`). The collector's
//! Rank answer carries each node's [`priorities`] too, so that `rank` and
//! `explain` show what the extender does.
//!
//! The extender never blocks scheduling on missing data: without fresh
//! scores, or for a pod that belongs to no known job, every node passes with
//! the same score. Only what the measurements show fails a node (see
//! [`crate::verdict::FailureCode::fails_filter`]): loss above the threshold, or goodput far
//! below the usual, to a worker of the same job already placed or on most
//! of the node's own links inside its zone (and, in strict mode, a node
//! outside the job's zone).
//!
//! It lives in the core, not in the extender's crate, so that the
//! evaluation places jobs with this very code without linking an HTTP
//! server or a Kubernetes client.

use std::collections::BTreeMap;

use crate::placement::{JobRequest, NodeTerms, Placer, RankedNode, Ranking, ZoneReason};
use crate::verdict::Failure;

/// The highest score an extender may give (kube-scheduler's
/// MaxExtenderPriority).
pub const MAX_EXTENDER_PRIORITY: i64 = 10;

/// Why the answer is neutral, if it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Neutral {
    /// No fresh scores from the collector.
    NoScores,
    /// The pod belongs to no job the extender recognises.
    NoJob,
    /// Most nodes of the cluster reach none of their peers: the probes do
    /// not get through, and nothing measured can be trusted
    /// ([`crate::reachability`]).
    CannotMeasure,
}

impl Neutral {
    /// Every reason, in the order metrics list them.
    pub const ALL: [Neutral; 3] = [Neutral::NoScores, Neutral::NoJob, Neutral::CannotMeasure];

    /// The reason's snake_case name (metrics, JSON, the wire).
    pub fn as_str(self) -> &'static str {
        match self {
            Neutral::NoScores => "no_scores",
            Neutral::NoJob => "no_job",
            Neutral::CannotMeasure => "cannot_measure",
        }
    }

    /// The reason named by [`Neutral::as_str`].
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|n| n.as_str() == name)
    }
}

impl std::fmt::Display for Neutral {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Neutral::NoScores => "no fresh scores from the collector",
            Neutral::NoJob => "the pod belongs to no job",
            Neutral::CannotMeasure => {
                "netaware cannot measure: most nodes reach none of their peers (probes filtered?); placement fails open"
            }
        })
    }
}

/// The verdict on a set of candidates (borrowing their names).
#[derive(Debug, Clone, PartialEq)]
pub struct Decision<'a> {
    /// Candidates that pass, in the order given.
    pub passing: Vec<&'a str>,
    /// Candidates that fail, with the reason.
    pub failed: BTreeMap<&'a str, Failure>,
    /// Every candidate's score, 0 to MaxExtenderPriority, in the order given.
    pub scores: Vec<(&'a str, i64)>,
    /// The place of the candidate kube-scheduler would pick with this
    /// extender alone weighing in ([`next_worker`]); `None` when none
    /// passes.
    pub next: Option<usize>,
    /// Set when the answer carries no opinion, and why.
    pub neutral: Option<Neutral>,
    /// Why, for people (none when neutral): the zone and the best
    /// candidates with their terms.
    pub explanation: Option<Explanation>,
}

/// How many of the best candidates an explanation names.
pub const EXPLAINED_CANDIDATES: usize = 3;

/// Why the extender answered as it did.
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    /// The chosen zone, if any candidate is feasible.
    pub zone: Option<String>,
    /// Why that zone.
    pub zone_reason: ZoneReason,
    /// The best feasible candidates (at most [`EXPLAINED_CANDIDATES`]),
    /// best first: name, score in [0, 1] and the terms behind it.
    pub best: Vec<(String, f64, NodeTerms)>,
}

/// The job a pod belongs to: its size and where its workers already run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JobContext {
    /// Workers in the job.
    pub size: usize,
    /// Nodes where workers already run.
    pub placed: Vec<String>,
}

/// What the extender answers for one candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority {
    /// 0 to [`MAX_EXTENDER_PRIORITY`], scaled to the best candidate.
    pub score: i64,
    /// Whether it passes the filter: a node fails it only for what the
    /// measurements show ([`Failure::fails_filter`]).
    pub passes_filter: bool,
}

/// The extender's answer for every node of `ranking`, by its place in the
/// request (`RankedNode::candidate`). A node in one of `unmeasured_zones`
/// (where netaware cannot measure) passes the filter whatever its verdict:
/// a measurement fault fails no node.
pub fn priorities(ranking: &Ranking<'_>, unmeasured_zones: &[&str]) -> Vec<Priority> {
    // kube-scheduler takes whole scores from 0 to 10. Scaled to the best
    // candidate (as kube-scheduler's own plugins normalise theirs), the
    // best gets 10 and the others keep their order at the resolution left:
    // raw, every node outside the chosen zone (0.1 x its quality) would
    // round to 0 or 1, and a job that must spill over would land on any of
    // them, degraded ones included.
    let best = ranking
        .nodes
        .iter()
        .filter(|n| n.feasible())
        .map(|n| n.score)
        .fold(0.0, f64::max);
    let scale = |node: &RankedNode<'_>| {
        let relative = if best > 0.0 { node.score / best } else { 0.0 };
        ((relative * MAX_EXTENDER_PRIORITY as f64).round() as i64).clamp(0, MAX_EXTENDER_PRIORITY)
    };
    let mut answers = neutral_priorities(ranking);
    for node in &ranking.nodes {
        answers[node.candidate] = Priority {
            score: scale(node),
            passes_filter: node.failure.as_deref().is_none_or(|f| !f.fails_filter())
                || unmeasured_zones.contains(&node.zone),
        };
    }
    answers
}

/// Where kube-scheduler puts the pod when this extender alone weighs in:
/// the place of the passing candidate with the highest priority, the first
/// of equals; `None` when no candidate passes.
pub fn next_worker(priorities: &[Priority]) -> Option<usize> {
    priorities
        .iter()
        .enumerate()
        .filter(|(_, p)| p.passes_filter)
        // max_by_key keeps the last of equals; reversing keeps the first.
        .rev()
        .max_by_key(|(_, p)| p.score)
        .map(|(place, _)| place)
}

/// What the collector's Rank answers, and so `netaware rank` and `netaware
/// explain`: the ranking, best first, with the extender's answer for each
/// node and where the extender would put the next worker.
#[derive(Debug, Clone, PartialEq)]
pub struct RankAnswer<'a> {
    /// Feasible nodes by score, then the infeasible ones.
    pub ranking: Ranking<'a>,
    /// The extender's answer for each node, by its place in the request
    /// (`RankedNode::candidate`).
    pub priorities: Vec<Priority>,
    /// The node [`next_worker`] picks.
    pub next: Option<&'a str>,
    /// Set when the extender would answer neutrally for want of
    /// measurements ([`Neutral::CannotMeasure`]); the priorities are then
    /// the neutral ones.
    pub neutral: Option<Neutral>,
}

/// Whether placement fails open for the whole cluster.
fn cannot_measure(placer: &Placer) -> bool {
    placer.matrix().reachability().cluster_cannot_measure()
}

/// Ranks `job` as the collector's Rank does: the same judgement the
/// extender's [`decide`] makes on the same candidates.
pub fn rank_answer<'a>(placer: &'a Placer, job: &JobRequest<'a>) -> RankAnswer<'a> {
    let ranking = placer.judge(job);
    let neutral = cannot_measure(placer).then_some(Neutral::CannotMeasure);
    let priorities = match neutral {
        Some(_) => neutral_priorities(&ranking),
        None => priorities(&ranking, &placer.matrix().zones_that_cannot_be_measured()),
    };
    let next = next_worker(&priorities).and_then(|place| {
        ranking
            .nodes
            .iter()
            .find(|n| n.candidate == place)
            .map(|n| n.name)
    });
    RankAnswer {
        ranking: ranking.sorted(),
        priorities,
        next,
        neutral,
    }
}

/// What a neutral answer gives every node of `ranking`: no opinion.
fn neutral_priorities(ranking: &Ranking<'_>) -> Vec<Priority> {
    let places = ranking
        .nodes
        .iter()
        .map(|n| n.candidate + 1)
        .max()
        .unwrap_or(0);
    vec![NEUTRAL; places]
}

/// A neutral answer for one candidate.
const NEUTRAL: Priority = Priority {
    score: 0,
    passes_filter: true,
};

/// Decides for `candidates`. `placer` is `None` without fresh scores, `job`
/// is `None` for a pod of no recognised job.
pub fn decide<'a>(
    placer: Option<&Placer>,
    job: Option<&JobContext>,
    candidates: &'a [String],
) -> Decision<'a> {
    let (placer, job) = match (placer, job) {
        (None, _) => return neutral(candidates, Neutral::NoScores),
        (_, None) => return neutral(candidates, Neutral::NoJob),
        (Some(placer), Some(job)) => (placer, job),
    };
    if cannot_measure(placer) {
        return neutral(candidates, Neutral::CannotMeasure);
    }
    let request = JobRequest {
        size: job.size.max(1),
        placed: &job.placed,
        candidates: Some(candidates),
        strict_zone: false,
    };
    let ranking = placer.judge(&request);
    let answers = priorities(&ranking, &placer.matrix().zones_that_cannot_be_measured());
    let next = next_worker(&answers);
    let mut passing = Vec::with_capacity(candidates.len());
    let mut failed = BTreeMap::new();
    let mut scores = Vec::with_capacity(candidates.len());
    // judge() gives one verdict per place in the request, repeated names
    // included, in the request's order.
    for node in &ranking.nodes {
        let place = node.candidate;
        let name = candidates[place].as_str();
        let answer = answers[place];
        scores.push((name, answer.score));
        match &node.failure {
            Some(failure) if !answer.passes_filter => {
                failed.insert(name, Failure::clone(failure));
            }
            _ => passing.push(name),
        }
    }
    let best = ranking
        .best_feasible(EXPLAINED_CANDIDATES)
        .into_iter()
        .map(|n| (n.name.to_owned(), n.score, n.terms))
        .collect();
    Decision {
        passing,
        failed,
        scores,
        next,
        neutral: None,
        explanation: Some(Explanation {
            zone: ranking.zone.clone(),
            zone_reason: ranking.zone_reason,
            best,
        }),
    }
}

/// Places a job of `size` workers on `free` nodes the way kube-scheduler
/// does with this extender and nothing else weighing in: pod after pod,
/// each to the passing candidate with the highest score (ties: the first
/// in `free`), with the workers placed before it as the job's context.
/// `None` when fewer than `size` nodes pass. The evaluation's "netaware"
/// policy is this function, so that it is the extender's own code.
pub fn place_job(placer: &Placer, size: usize, free: &[String]) -> Option<Vec<String>> {
    let mut placed: Vec<String> = Vec::with_capacity(size);
    let mut candidates: Vec<String> = free.to_vec();
    while placed.len() < size {
        let job = JobContext {
            size,
            placed: placed.clone(),
        };
        let next = decide(Some(placer), Some(&job), &candidates).next?;
        placed.push(candidates.remove(next));
    }
    Some(placed)
}

fn neutral(candidates: &[String], why: Neutral) -> Decision<'_> {
    Decision {
        passing: candidates.iter().map(String::as_str).collect(),
        failed: BTreeMap::new(),
        next: (!candidates.is_empty()).then_some(0),
        scores: candidates.iter().map(|c| (c.as_str(), 0)).collect(),
        neutral: Some(why),
        explanation: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::{PairMatrix, PairWindow, RttStats};
    use crate::placement::PlacementConfig;
    use crate::registry::Registry;
    use crate::score::ScoreConfig;
    use crate::scored::ScoredMatrix;
    use crate::verdict::FailureCode;
    use crate::{NodeInfo, NodeKind};

    #[test]
    fn scores_are_scaled_to_the_best_candidate() {
        let candidates = names(&["a1", "a2", "a3", "b1"]);
        let job = JobContext {
            size: 2,
            placed: Vec::new(),
        };
        let decision = decide(Some(&placer()), Some(&job), &candidates);
        let score = |name: &str| decision.scores.iter().find(|(n, _)| *n == name).unwrap().1;
        // The best gets the whole range, whatever its quality (raw, about
        // 0.9 of it); the rest keep their order.
        let best = decision.scores.iter().map(|(_, s)| *s).max().unwrap();
        assert_eq!(best, MAX_EXTENDER_PRIORITY, "{:?}", decision.scores);
        assert!(score("a3") < score("a2"), "{:?}", decision.scores);
        assert!(score("b1") < score("a3"), "{:?}", decision.scores);
    }

    #[test]
    fn a_job_goes_where_the_extender_scores_best_pod_after_pod() {
        let placer = placer();
        let free: Vec<String> = ["a1", "a2", "a3", "b1"].map(String::from).to_vec();
        let placed = place_job(&placer, 2, &free).unwrap();
        assert_eq!(placed.len(), 2);
        assert!(
            placed.iter().all(|n| n == "a1" || n == "a2"),
            "the clean pair of zone-a: {placed:?}"
        );
        // Five workers on four nodes: impossible.
        assert_eq!(place_job(&placer, 5, &free), None);
    }

    /// a1, a2 in zone-a with a clean link; a1 <-> a3 losing 20%; b1 alone.
    fn matrix() -> ScoredMatrix {
        matrix_with(&[
            ("a1", "a2", 100),
            ("a2", "a1", 100),
            ("a1", "a3", 80),
            ("a3", "a1", 80),
        ])
    }

    /// a1, a2, a3 in zone-a, b1 in zone-b, with these pairs (src, dst,
    /// replies of 100).
    fn matrix_with(measured: &[(&str, &str, u32)]) -> ScoredMatrix {
        let mut registry = Registry::new();
        for (name, zone) in [
            ("a1", "zone-a"),
            ("a2", "zone-a"),
            ("a3", "zone-a"),
            ("b1", "zone-b"),
        ] {
            let info = NodeInfo {
                name: name.into(),
                address: "10.0.0.1".into(),
                zone: zone.into(),
                region: String::new(),
                kind: NodeKind::Agent,
            };
            registry.agent_hello(info, 1_000, 1_000).unwrap();
        }
        let rtt = RttStats {
            min: 0.2,
            median: 0.2,
            p90: 0.2,
            p99: 0.2,
            max: 0.2,
            jitter: 0.0,
        };
        let mut pairs = PairMatrix::new(6);
        for &(src, dst, received) in measured {
            pairs.record(
                src,
                dst,
                PairWindow::new(1_000, 100, received, rtt).unwrap(),
            );
        }
        ScoredMatrix::build(&registry, &pairs, &ScoreConfig::default(), 1_000)
    }

    fn placer() -> Placer {
        Placer::new(matrix(), PlacementConfig::default())
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// Every directed pair among `nodes`, with `replies` of 100 each.
    fn mesh(nodes: &[&'static str], replies: u32) -> Vec<(&'static str, &'static str, u32)> {
        nodes
            .iter()
            .flat_map(|&s| {
                nodes
                    .iter()
                    .filter(move |&&d| d != s)
                    .map(move |&d| (s, d, replies))
            })
            .collect()
    }

    #[test]
    fn nothing_answered_anywhere_fails_open_in_rank_and_extender_alike() {
        let placer = Placer::new(
            matrix_with(&mesh(&["a1", "a2", "a3", "b1"], 0)),
            PlacementConfig::default(),
        );
        let candidates = names(&["a1", "a2", "a3", "b1"]);
        let job = JobContext {
            size: 2,
            placed: names(&["a1"]),
        };
        let decision = decide(Some(&placer), Some(&job), &candidates);
        assert_eq!(decision.neutral, Some(Neutral::CannotMeasure));
        assert_eq!(decision.passing, candidates[..]);
        let request = JobRequest {
            size: 2,
            placed: &job.placed,
            candidates: Some(&candidates),
            strict_zone: false,
        };
        let answer = rank_answer(&placer, &request);
        assert_eq!(answer.neutral, Some(Neutral::CannotMeasure));
        assert!(answer.priorities.iter().all(|p| *p == NEUTRAL));
        assert_eq!(answer.next, Some("a1"));
        assert_eq!(decision.next, Some(0));
    }

    #[test]
    fn a_zone_that_cannot_be_measured_has_no_node_failed_for_it() {
        // Inside zone-a nothing answers; a1 <-> b1 does.
        let mut measured = mesh(&["a1", "a2", "a3"], 0);
        measured.extend([("a1", "b1", 100), ("b1", "a1", 100)]);
        let placer = Placer::new(matrix_with(&measured), PlacementConfig::default());
        assert!(!placer.matrix().reachability().cluster_cannot_measure());
        assert_eq!(placer.matrix().zones_that_cannot_be_measured(), ["zone-a"]);
        let candidates = names(&["a1", "a2", "a3", "b1"]);
        let job = JobContext {
            size: 2,
            placed: Vec::new(),
        };
        let decision = decide(Some(&placer), Some(&job), &candidates);
        assert_eq!(decision.neutral, None);
        assert!(decision.failed.is_empty(), "{:?}", decision.failed);
        // Where it can measure, a node still fails: the same pairs, with
        // zone-a's answered but lossy to a3, fail a3.
        let lossy = Placer::new(matrix(), PlacementConfig::default());
        let job = JobContext {
            size: 2,
            placed: names(&["a1"]),
        };
        let decision = decide(Some(&lossy), Some(&job), &candidates);
        assert!(decision.failed.contains_key("a3"), "{decision:?}");
    }

    #[test]
    fn neutral_without_scores_or_job() {
        let candidates = names(&["a1", "b1"]);
        let job = JobContext {
            size: 2,
            placed: Vec::new(),
        };
        let decision = decide(None, Some(&job), &candidates);
        assert_eq!(decision.neutral, Some(Neutral::NoScores));
        assert_eq!(decision.passing, candidates);
        assert!(decision.scores.iter().all(|(_, s)| *s == 0));
        let decision = decide(Some(&placer()), None, &candidates);
        assert_eq!(decision.neutral, Some(Neutral::NoJob));
    }

    #[test]
    fn loss_to_a_placed_worker_fails_and_scores_follow_links() {
        let job = JobContext {
            size: 3,
            placed: names(&["a1"]),
        };
        let candidates = names(&["a2", "a3", "b1", "ghost"]);
        let decision = decide(Some(&placer()), Some(&job), &candidates);
        assert_eq!(decision.passing, names(&["a2", "b1", "ghost"]));
        assert_eq!(decision.failed["a3"].code(), FailureCode::LossToWorker);
        assert!(
            decision.failed["a3"].to_string().starts_with("loss 20.0%"),
            "{:?}",
            decision.failed
        );
        let score = |n: &str| decision.scores.iter().find(|(h, _)| *h == n).unwrap().1;
        assert!(score("a2") > score("b1"));
        assert_eq!(score("ghost"), 0);
        assert!(
            decision
                .scores
                .iter()
                .all(|(_, s)| (0..=MAX_EXTENDER_PRIORITY).contains(s))
        );
    }

    #[test]
    fn strict_mode_fails_other_zones() {
        let job = JobContext {
            size: 2,
            placed: names(&["a1"]),
        };
        let config = PlacementConfig {
            strict_zone: true,
            ..PlacementConfig::default()
        };
        let candidates = names(&["a2", "b1"]);
        let strict = Placer::new(matrix(), config);
        let decision = decide(Some(&strict), Some(&job), &candidates);
        assert_eq!(decision.passing, ["a2"]);
        assert_eq!(
            decision.failed["b1"],
            Failure::OutsideZone {
                zone: "zone-a".into()
            }
        );
    }

    #[test]
    fn a_repeated_name_gets_the_same_verdict_everywhere() {
        let job = JobContext {
            size: 3,
            placed: names(&["a1"]),
        };
        let candidates = names(&["a3", "a3", "a2", "a2", "a3"]);
        let decision = decide(Some(&placer()), Some(&job), &candidates);
        assert_eq!(decision.passing, names(&["a2", "a2"]));
        let scores: Vec<i64> = decision.scores.iter().map(|(_, s)| *s).collect();
        assert_eq!(scores[2], scores[3]);
        assert!(scores[2] > 0);
        assert_eq!(scores[0], 0);
    }
}
