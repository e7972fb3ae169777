//! What placement acts on among a network's open faults
//! ([`crate::faults`]): a node's own fault fails the node, and a bad block
//! uplink lowers the score of a node whose worker would put the job's
//! traffic across it.
//!
//! Only these two kinds change placement. A bad pair already fails a node
//! through its link to a placed worker ([`crate::placement`]'s loss and
//! goodput checks, which read the same pair); a bad zone link is what
//! zone-first placement avoids anyway; a wrong zone label is for people to
//! fix, since a scheduler's other parts read the label too.
//!
//! The marks travel by name, with the matrix they were found on, from the
//! collector to every follower; [`IndexedMarks`] is their form over one
//! matrix's node indices, worked out once per placer.

use crate::fault_kind::FaultMetric;

/// The factor on the score of a node whose worker would put the job's
/// traffic across a bad block uplink: low enough that a node on a clean
/// path of similar quality always wins, not so low that a job with no
/// other room fails over it (the uplink's loss is already in the pair
/// figures; the fault says it will not get better by itself).
pub const BAD_UPLINK_FACTOR: f64 = 0.5;

/// One open fault that placement acts on.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultMark {
    /// A node's own fault (its NIC, its cable): it fails the node.
    Node {
        /// The node.
        node: String,
        /// What shows it.
        metric: FaultMetric,
        /// How bad: a loss ratio or added milliseconds.
        value: f64,
        /// What is usual on its network.
        baseline: f64,
    },
    /// A block whose links out of it are bad while its inside is clean.
    BlockUplink {
        /// The block's zone.
        zone: String,
        /// The block's number in its zone.
        block: u32,
        /// The block's nodes.
        nodes: Vec<String>,
        /// What shows it.
        metric: FaultMetric,
        /// How bad.
        value: f64,
        /// What is usual.
        baseline: f64,
    },
}

/// The open faults of one network that placement acts on.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FaultMarks {
    /// Each one, in the order the collector found them.
    pub marks: Vec<FaultMark>,
}

/// A node's own fault, as placement reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeFault {
    /// What shows it.
    pub metric: FaultMetric,
    /// How bad: a loss ratio or added milliseconds.
    pub value: f64,
    /// What is usual on its network.
    pub baseline: f64,
}

/// A bad uplink a worker's traffic would cross.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BadUplink<'a> {
    /// The block's zone.
    pub zone: &'a str,
    /// The block's number in its zone.
    pub block: u32,
    /// What shows it.
    pub metric: FaultMetric,
    /// How bad.
    pub value: f64,
}

/// The marks over one matrix's nodes, by node index.
#[derive(Debug, Clone, Default)]
pub struct IndexedMarks {
    node: Vec<Option<NodeFault>>,
    /// Index into `uplinks` of the bad uplink a node sits behind.
    behind: Vec<Option<usize>>,
    uplinks: Vec<Uplink>,
}

#[derive(Debug, Clone)]
struct Uplink {
    zone: String,
    block: u32,
    metric: FaultMetric,
    value: f64,
    /// Its nodes that the matrix knows.
    members: usize,
}

impl IndexedMarks {
    /// `marks` over the `n` nodes that `index_of` finds by name. A node
    /// with faults by both metrics keeps its loss fault (what training
    /// feels most); a name the matrix does not know is left out.
    pub fn new(marks: &FaultMarks, n: usize, index_of: impl Fn(&str) -> Option<usize>) -> Self {
        let mut indexed = Self {
            node: vec![None; n],
            behind: vec![None; n],
            uplinks: Vec::new(),
        };
        for mark in &marks.marks {
            match mark {
                FaultMark::Node {
                    node,
                    metric,
                    value,
                    baseline,
                } => {
                    let Some(i) = index_of(node) else { continue };
                    let held = &mut indexed.node[i];
                    if held.is_none_or(|h| h.metric != FaultMetric::Loss) {
                        *held = Some(NodeFault {
                            metric: *metric,
                            value: *value,
                            baseline: *baseline,
                        });
                    }
                }
                FaultMark::BlockUplink {
                    zone,
                    block,
                    nodes,
                    metric,
                    value,
                    ..
                } => {
                    let at = indexed.uplinks.len();
                    let members: Vec<usize> = nodes
                        .iter()
                        .filter_map(|name| index_of(name))
                        // A block is inside one zone; its nodes sit behind
                        // one uplink. Should two marks name a node, the
                        // first keeps it.
                        .filter(|&i| indexed.behind[i].is_none())
                        .collect();
                    if members.is_empty() {
                        continue;
                    }
                    for &i in &members {
                        indexed.behind[i] = Some(at);
                    }
                    indexed.uplinks.push(Uplink {
                        zone: zone.clone(),
                        block: *block,
                        metric: *metric,
                        value: *value,
                        members: members.len(),
                    });
                }
            }
        }
        indexed
    }

    /// Node `i`'s own fault.
    pub fn node_fault(&self, i: usize) -> Option<NodeFault> {
        self.node.get(i).copied().flatten()
    }

    /// The bad uplink that a worker on `candidate` would put the job's
    /// traffic across: with workers placed, the uplink of the block that
    /// holds one side only (the candidate's, or a placed worker's); with
    /// none placed, the candidate's own when its block has fewer nodes
    /// than the job has workers, so the job cannot stay inside it.
    pub fn crossed_uplink(
        &self,
        candidate: usize,
        placed: &[usize],
        size: usize,
    ) -> Option<BadUplink<'_>> {
        // Most matrices have no bad uplink: no walk over the placed workers
        // for each candidate then.
        if self.uplinks.is_empty() {
            return None;
        }
        let behind = |i: usize| self.behind.get(i).copied().flatten();
        let own = behind(candidate);
        let crossed = if placed.is_empty() {
            own.filter(|&u| self.uplinks[u].members < size)
        } else {
            placed
                .iter()
                .map(|&p| behind(p))
                .find(|&theirs| theirs != own)
                .and_then(|theirs| own.or(theirs))
        }?;
        let uplink = &self.uplinks[crossed];
        Some(BadUplink {
            zone: &uplink.zone,
            block: uplink.block,
            metric: uplink.metric,
            value: uplink.value,
        })
    }

    /// Whether any fault is marked (most matrices have none).
    pub fn is_empty(&self) -> bool {
        self.uplinks.is_empty() && self.node.iter().all(Option::is_none)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn marks() -> FaultMarks {
        FaultMarks {
            marks: vec![
                FaultMark::Node {
                    node: "a1".into(),
                    metric: FaultMetric::Delay,
                    value: 0.4,
                    baseline: 0.2,
                },
                FaultMark::Node {
                    node: "a1".into(),
                    metric: FaultMetric::Loss,
                    value: 0.05,
                    baseline: 0.0,
                },
                FaultMark::BlockUplink {
                    zone: "z".into(),
                    block: 2,
                    nodes: vec!["b1".into(), "b2".into(), "gone".into()],
                    metric: FaultMetric::Loss,
                    value: 0.03,
                    baseline: 0.0,
                },
            ],
        }
    }

    fn index_by_name(names: &[&str]) -> impl Fn(&str) -> Option<usize> {
        let by_name: BTreeMap<String, usize> = names
            .iter()
            .enumerate()
            .map(|(i, n)| ((*n).to_owned(), i))
            .collect();
        move |name| by_name.get(name).copied()
    }

    const NODES: [&str; 5] = ["a1", "a2", "b1", "b2", "c1"];

    #[test]
    fn a_node_keeps_its_loss_fault_over_its_delay_fault() {
        let indexed = IndexedMarks::new(&marks(), NODES.len(), index_by_name(&NODES));
        let fault = indexed.node_fault(0).unwrap();
        assert_eq!(fault.metric, FaultMetric::Loss);
        assert_eq!(indexed.node_fault(1), None);
        assert!(!indexed.is_empty());
        assert!(IndexedMarks::new(&FaultMarks::default(), 3, |_| None).is_empty());
    }

    #[test]
    fn only_a_job_with_workers_on_one_side_of_the_uplink_crosses_it() {
        let indexed = IndexedMarks::new(&marks(), NODES.len(), index_by_name(&NODES));
        let (a2, b1, b2, c1) = (1, 2, 3, 4);
        // Inside the block, with the worker inside: no crossing.
        assert_eq!(indexed.crossed_uplink(b2, &[b1], 2), None);
        // Outside, with the worker outside: none either.
        assert_eq!(indexed.crossed_uplink(c1, &[a2], 2), None);
        // One side each, both ways round.
        let crossed = indexed.crossed_uplink(b2, &[a2], 2).unwrap();
        assert_eq!((crossed.zone, crossed.block), ("z", 2));
        assert!(indexed.crossed_uplink(c1, &[b1], 2).is_some());
        assert!(indexed.crossed_uplink(c1, &[a2, b1], 3).is_some());
        // A first worker: only when the job does not fit in the block
        // (two of its three named nodes are known).
        assert_eq!(indexed.crossed_uplink(b1, &[], 2), None);
        assert!(indexed.crossed_uplink(b1, &[], 3).is_some());
        assert_eq!(indexed.crossed_uplink(c1, &[], 8), None);
    }
}
