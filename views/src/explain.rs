//! A ranking explained, as `netaware explain` prints it and the web view's
//! job form shows it: where the next worker would go, the zone and why,
//! every candidate with its score and the one phrase that says what holds
//! it back (the reason it may not be used, the bad uplink it would cross,
//! or the term furthest below the best of its zone).

use std::collections::BTreeMap;

use netaware_core::network::Network;
use netaware_core::placement::PlacementConfig;
use netaware_proto::v1 as pb;
use serde::{Deserialize, Serialize};

use crate::json::{RankJson, RankedJson};
use crate::text::fault_effect;

/// A gap between a node's term and the best of its zone below which the
/// term does not hold it back.
pub const NOTABLE_GAP: f64 = 0.05;

/// One of a score's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Term {
    /// Delay.
    Delay,
    /// Loss.
    Loss,
    /// Throughput.
    Throughput,
}

impl Term {
    const ALL: [Term; 3] = [Term::Delay, Term::Loss, Term::Throughput];

    fn of(self, node: &RankedJson) -> f64 {
        match self {
            Term::Delay => node.terms.delay,
            Term::Loss => node.terms.loss,
            Term::Throughput => node.terms.throughput,
        }
    }

    /// Its name, for people.
    pub fn name(self) -> &'static str {
        match self {
            Term::Delay => "delay",
            Term::Loss => "loss",
            Term::Throughput => "throughput",
        }
    }
}

/// The term that holds a node back most.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WeakestJson {
    /// Which term.
    pub term: Term,
    /// The node's.
    pub value: f64,
    /// The best of the feasible candidates of its zone.
    pub best: f64,
}

/// One candidate, explained.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExplainedJson {
    /// Its ranking (as `rank --json`).
    #[serde(flatten)]
    pub node: RankedJson,
    /// For a feasible node, the term furthest below its zone's best, when
    /// it is 0.05 or more below.
    pub weakest: Option<WeakestJson>,
    /// What holds it back, for people: why it may not be used, the bad
    /// uplink its worker would cross, its weakest term, or its terms.
    #[serde(default)]
    pub why: String,
}

/// `explain --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExplainJson {
    /// Workers in the job.
    pub size: usize,
    /// Where its workers run.
    pub placed: Vec<String>,
    /// The network it is placed by, or a comma list (each pair its worst
    /// network's).
    pub network: String,
    /// Where the extender would put the next worker; null when no node
    /// may take it.
    pub next: Option<String>,
    /// Set ("cannot_measure") when the extender answers neutrally for want
    /// of measurements: placement fails open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neutral: Option<String>,
    /// The collector's placement settings, which the extender places by.
    pub placement: PlacementConfig,
    /// The chosen zone; null if none.
    pub zone: Option<String>,
    /// Why that zone.
    pub zone_reason: String,
    /// Feasible candidates best first, then the others.
    pub nodes: Vec<ExplainedJson>,
}

impl ExplainJson {
    /// The explanation of `ranking` for a job of `size` on `placed`,
    /// ranked by `networks`.
    pub fn new(
        size: usize,
        placed: Vec<String>,
        networks: &[Network],
        ranking: &pb::RankResponse,
    ) -> Self {
        let rank = RankJson::from(ranking);
        let mut best: BTreeMap<(&str, Term), f64> = BTreeMap::new();
        for node in rank.nodes.iter().filter(|n| n.feasible) {
            for term in Term::ALL {
                let entry = best.entry((node.zone.as_str(), term)).or_insert(0.0);
                *entry = entry.max(term.of(node));
            }
        }
        let weakest = |node: &RankedJson| {
            if !node.feasible {
                return None;
            }
            Term::ALL
                .into_iter()
                .map(|term| WeakestJson {
                    term,
                    value: term.of(node),
                    best: best
                        .get(&(node.zone.as_str(), term))
                        .copied()
                        .unwrap_or(0.0),
                })
                .filter(|w| w.best - w.value >= NOTABLE_GAP)
                .max_by(|a, b| (a.best - a.value).total_cmp(&(b.best - b.value)))
        };
        let nodes: Vec<ExplainedJson> = rank
            .nodes
            .iter()
            .map(|node| {
                let weakest = weakest(node);
                ExplainedJson {
                    why: why(node, weakest.as_ref()),
                    weakest,
                    node: node.clone(),
                }
            })
            .collect();
        Self {
            size,
            placed,
            network: netaware_proto::convert::networks_to_wire(networks),
            next: rank.next,
            neutral: rank.neutral,
            placement: rank.placement,
            zone: rank.zone,
            zone_reason: rank.zone_reason,
            nodes,
        }
    }
}

/// What holds `node` back, for people.
fn why(node: &RankedJson, weakest: Option<&WeakestJson>) -> String {
    let t = &node.terms;
    match (&node.reason, &node.bad_uplink, weakest) {
        (Some(reason), _, _) => format!("not there: {reason}"),
        (None, Some(uplink), _) => format!(
            "held back by a network fault: the job would cross the uplink of block {} of {}, which {} (score x{})",
            uplink.block,
            uplink.zone,
            fault_effect(&uplink.metric, uplink.value),
            uplink.factor
        ),
        (None, None, Some(weak)) => format!(
            "held back by {} {:.2} (its zone's best {:.2}); {} pairs, {} estimated",
            weak.term.name(),
            weak.value,
            weak.best,
            t.pairs,
            t.fallback_pairs
        ),
        (None, None, None) => format!(
            "delay {:.2}, loss {:.2}, throughput {:.2}; {} pairs, {} estimated",
            t.delay, t.loss, t.throughput, t.pairs, t.fallback_pairs
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranked(name: &str, zone: &str, feasible: bool, delay: f64) -> pb::RankedNode {
        pb::RankedNode {
            name: name.into(),
            zone: zone.into(),
            score: if feasible { delay * 0.7 } else { 0.0 },
            feasible,
            reason: if feasible {
                String::new()
            } else {
                "degraded: loss 20.0%".into()
            },
            terms: Some(pb::NodeTerms {
                delay,
                loss: 1.0,
                throughput: 0.5,
                pairs: 4,
                ..pb::NodeTerms::default()
            }),
            ..pb::RankedNode::default()
        }
    }

    #[test]
    fn the_slow_node_is_held_back_by_delay_and_the_lossy_one_is_not_there() {
        let ranking = pb::RankResponse {
            zone: "zone-b".into(),
            zone_reason: "the best zone".into(),
            nodes: vec![
                ranked("b1", "zone-b", true, 0.97),
                ranked("b3", "zone-b", true, 0.95),
                ranked("b2", "zone-b", true, 0.40),
                ranked("a3", "zone-a", false, 0.9),
            ],
            next: "b1".into(),
            placement: None,
            neutral: String::new(),
        };
        let rails = Network::parse_list("rail-0,rail-1").unwrap();
        let explain = ExplainJson::new(3, vec![], &rails, &ranking);
        assert_eq!(explain.next.as_deref(), Some("b1"));
        assert_eq!(explain.network, "rail-0,rail-1");
        let b2 = explain.nodes.iter().find(|n| n.node.name == "b2").unwrap();
        assert_eq!(
            b2.weakest,
            Some(WeakestJson {
                term: Term::Delay,
                value: 0.40,
                best: 0.97
            })
        );
        assert_eq!(
            b2.why,
            "held back by delay 0.40 (its zone's best 0.97); 4 pairs, 0 estimated"
        );
        assert_eq!(explain.nodes[1].weakest, None, "b3 is within 0.05 of b1");
        let a3 = explain.nodes.iter().find(|n| n.node.name == "a3").unwrap();
        assert_eq!(a3.why, "not there: degraded: loss 20.0%");
    }
}
