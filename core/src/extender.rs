//! The kube-scheduler extender's decisions, pure: which candidate nodes
//! pass the filter and what each scores, from the placement policy
//! ([`crate::placement::rank`], the same code as `netaware rank`).
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

use crate::placement::{JobRequest, NodeTerms, PlacementConfig, RankedNode, ZoneReason, judge};
use crate::snapshot::ScoredMatrix;
use crate::verdict::Failure;

/// The highest score an extender may give (kube-scheduler's
/// MaxExtenderPriority).
pub const MAX_EXTENDER_PRIORITY: i64 = 10;

/// How the extender decides.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PolicyConfig {
    /// The placement policy's settings.
    pub placement: PlacementConfig,
    /// Fail nodes outside the job's zone instead of scoring them low.
    pub strict_zone: bool,
}

/// Why the answer is neutral, if it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Neutral {
    /// No fresh scores from the collector.
    NoScores,
    /// The pod belongs to no job the extender recognises.
    NoJob,
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

/// Decides for `candidates`. `matrix` is `None` without fresh scores, `job`
/// is `None` for a pod of no recognised job.
pub fn decide<'a>(
    matrix: Option<&ScoredMatrix>,
    job: Option<&JobContext>,
    candidates: &'a [String],
    config: &PolicyConfig,
) -> Decision<'a> {
    let (matrix, job) = match (matrix, job) {
        (None, _) => return neutral(candidates, Neutral::NoScores),
        (_, None) => return neutral(candidates, Neutral::NoJob),
        (Some(matrix), Some(job)) => (matrix, job),
    };
    let request = JobRequest {
        size: job.size.max(1),
        placed: &job.placed,
        candidates: Some(candidates),
        strict_zone: config.strict_zone,
    };
    let ranking = judge(matrix, &request, &config.placement);
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
    let scale = |node: &RankedNode| {
        let relative = if best > 0.0 { node.score / best } else { 0.0 };
        ((relative * MAX_EXTENDER_PRIORITY as f64).round() as i64).clamp(0, MAX_EXTENDER_PRIORITY)
    };
    // judge() gives one verdict per place in the request, repeated names
    // included, in the request's order: kept by position, whatever the
    // order.
    let mut verdicts: Vec<Option<&RankedNode>> = vec![None; candidates.len()];
    for node in &ranking.nodes {
        verdicts[node.candidate] = Some(node);
    }
    let mut passing = Vec::with_capacity(candidates.len());
    let mut failed = BTreeMap::new();
    let mut scores = Vec::with_capacity(candidates.len());
    for (name, node) in candidates.iter().map(String::as_str).zip(verdicts) {
        // Every place has its verdict; none is skipped.
        let Some(node) = node else { continue };
        scores.push((name, scale(node)));
        match &node.failure {
            Some(failure) if failure.fails_filter() => {
                failed.insert(name, Failure::clone(failure));
            }
            _ => passing.push(name),
        }
    }
    let best = ranking
        .nodes
        .iter()
        .filter(|n| n.feasible())
        .take(EXPLAINED_CANDIDATES)
        .map(|n| (n.name.to_owned(), n.score, n.terms))
        .collect();
    Decision {
        passing,
        failed,
        scores,
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
pub fn place_job(
    matrix: &ScoredMatrix,
    size: usize,
    free: &[String],
    config: &PolicyConfig,
) -> Option<Vec<String>> {
    let mut placed: Vec<String> = Vec::with_capacity(size);
    let mut candidates: Vec<String> = free.to_vec();
    while placed.len() < size {
        let job = JobContext {
            size,
            placed: placed.clone(),
        };
        let decision = decide(Some(matrix), Some(&job), &candidates, config);
        let best = decision
            .scores
            .iter()
            .enumerate()
            .filter(|(_, (name, _))| decision.passing.contains(name))
            // max_by_key keeps the last of equals; reversing keeps the first.
            .rev()
            .max_by_key(|(_, (_, score))| *score)
            .map(|(i, _)| i)?;
        placed.push(candidates.remove(best));
    }
    Some(placed)
}

fn neutral(candidates: &[String], why: Neutral) -> Decision<'_> {
    Decision {
        passing: candidates.iter().map(String::as_str).collect(),
        failed: BTreeMap::new(),
        scores: candidates.iter().map(|c| (c.as_str(), 0)).collect(),
        neutral: Some(why),
        explanation: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::{PairMatrix, PairWindow, RttStats};
    use crate::registry::Registry;
    use crate::score::ScoreConfig;
    use crate::verdict::FailureCode;
    use crate::{NodeInfo, NodeKind};

    #[test]
    fn scores_are_scaled_to_the_best_candidate() {
        let candidates = names(&["a1", "a2", "a3", "b1"]);
        let job = JobContext {
            size: 2,
            placed: Vec::new(),
        };
        let decision = decide(
            Some(&matrix()),
            Some(&job),
            &candidates,
            &PolicyConfig::default(),
        );
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
        let matrix = matrix();
        let free: Vec<String> = ["a1", "a2", "a3", "b1"].map(String::from).to_vec();
        let config = PolicyConfig::default();
        let placed = place_job(&matrix, 2, &free, &config).unwrap();
        assert_eq!(placed.len(), 2);
        assert!(
            placed.iter().all(|n| n == "a1" || n == "a2"),
            "the clean pair of zone-a: {placed:?}"
        );
        // Five workers on four nodes: impossible.
        assert_eq!(place_job(&matrix, 5, &free, &config), None);
    }

    /// a1, a2 in zone-a with a clean link; a1 <-> a3 losing 20%; b1 alone.
    fn matrix() -> ScoredMatrix {
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
        for (src, dst, received) in [
            ("a1", "a2", 100),
            ("a2", "a1", 100),
            ("a1", "a3", 80),
            ("a3", "a1", 80),
        ] {
            pairs.record(
                src,
                dst,
                PairWindow::new(1_000, 100, received, rtt).unwrap(),
            );
        }
        ScoredMatrix::build(&registry, &pairs, &ScoreConfig::default(), 1_000)
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn neutral_without_scores_or_job() {
        let candidates = names(&["a1", "b1"]);
        let job = JobContext {
            size: 2,
            placed: Vec::new(),
        };
        let decision = decide(None, Some(&job), &candidates, &PolicyConfig::default());
        assert_eq!(decision.neutral, Some(Neutral::NoScores));
        assert_eq!(decision.passing, candidates);
        assert!(decision.scores.iter().all(|(_, s)| *s == 0));
        let decision = decide(Some(&matrix()), None, &candidates, &PolicyConfig::default());
        assert_eq!(decision.neutral, Some(Neutral::NoJob));
    }

    #[test]
    fn loss_to_a_placed_worker_fails_and_scores_follow_links() {
        let job = JobContext {
            size: 3,
            placed: names(&["a1"]),
        };
        let candidates = names(&["a2", "a3", "b1", "ghost"]);
        let decision = decide(
            Some(&matrix()),
            Some(&job),
            &candidates,
            &PolicyConfig::default(),
        );
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
        let config = PolicyConfig {
            strict_zone: true,
            ..PolicyConfig::default()
        };
        let candidates = names(&["a2", "b1"]);
        let decision = decide(Some(&matrix()), Some(&job), &candidates, &config);
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
        let decision = decide(
            Some(&matrix()),
            Some(&job),
            &candidates,
            &PolicyConfig::default(),
        );
        assert_eq!(decision.passing, names(&["a2", "a2"]));
        let scores: Vec<i64> = decision.scores.iter().map(|(_, s)| *s).collect();
        assert_eq!(scores[2], scores[3]);
        assert!(scores[2] > 0);
        assert_eq!(scores[0], 0);
    }
}
