//! Faults over time: a finding becomes a fault once it has been found in
//! [`TrackerConfig::open_after`] looks in a row, keeps the time it was first
//! found (`since`), and clears once it has been missing from
//! [`TrackerConfig::clear_after`] looks in a row: the hysteresis that keeps
//! one noisy window from opening or clearing a fault. Pure: time passed in.

use std::collections::BTreeMap;

use super::input::FaultInput;
use super::{Component, FaultKind, FaultMetric, Finding, Subject};
use crate::UnixMillis;
use crate::fault_marks::{FaultMark, FaultMarks};
use crate::network::Network;

/// One link of a fault's evidence, by node name.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedEvidence {
    /// The probing node.
    pub src: String,
    /// The probed node.
    pub dst: String,
    /// Its loss ratio or RTT (ms).
    pub value: f64,
    /// What it would be without the fault.
    pub baseline: f64,
}

/// A fault as it is reported: by name, with its network and its time.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// What it is about.
    pub kind: FaultKind,
    /// The network it was found on.
    pub network: Network,
    /// What shows it.
    pub metric: FaultMetric,
    /// The nodes it is about: the node, the block's nodes, the pair's two
    /// ends, the mislabelled node; none for a zone link.
    pub nodes: Vec<String>,
    /// The zones it is about: the node's or block's zone, a zone link's
    /// two zones, a pair's zones.
    pub zones: Vec<String>,
    /// A block uplink's block number in its zone.
    pub block: Option<u32>,
    /// A mislabelled node: the zone its links say it is in.
    pub measures_like: Option<String>,
    /// How bad (see [`Finding::value`]).
    pub value: f64,
    /// What is usual (see [`Finding::baseline`]).
    pub baseline: f64,
    /// In [0, 1] (see [`Finding::confidence`]).
    pub confidence: f64,
    /// Its worst links.
    pub evidence: Vec<NamedEvidence>,
    /// When it was first found (of the looks in a row that opened it).
    pub since_unix_ms: UnixMillis,
}

impl Fault {
    /// `finding` of `input`, found on `network` at `now`.
    pub fn named(
        input: &FaultInput,
        network: &Network,
        finding: &Finding,
        now: UnixMillis,
    ) -> Self {
        let name = |node: usize| input.nodes[node].name.clone();
        let zone = |zone: usize| input.zones[zone].clone();
        let zone_of = |node: usize| zone(input.nodes[node].zone);
        let (nodes, mut zones, block, measures_like) = match finding.subject {
            Subject::Component(Component::Node(node)) => {
                (vec![name(node)], vec![zone_of(node)], None, None)
            }
            Subject::Component(component @ Component::BlockUplink(block)) => {
                let (z, number) = input.blocks[block];
                let nodes = input.nodes_of(component).into_iter().map(name).collect();
                (nodes, vec![zone(z)], Some(number), None)
            }
            Subject::Component(Component::ZoneLink(a, b)) => {
                (Vec::new(), vec![zone(a), zone(b)], None, None)
            }
            Subject::Component(Component::Pair(a, b)) => (
                vec![name(a), name(b)],
                vec![zone_of(a), zone_of(b)],
                None,
                None,
            ),
            Subject::ZoneLabel {
                node,
                measures_like,
            } => (
                vec![name(node)],
                vec![zone_of(node)],
                None,
                Some(zone(measures_like)),
            ),
        };
        zones.dedup();
        Self {
            kind: finding.subject.kind(),
            network: network.clone(),
            metric: finding.metric,
            nodes,
            zones,
            block,
            measures_like,
            value: finding.value,
            baseline: finding.baseline,
            confidence: finding.confidence,
            evidence: finding
                .evidence
                .iter()
                .map(|e| NamedEvidence {
                    src: name(e.src),
                    dst: name(e.dst),
                    value: e.value,
                    baseline: e.baseline,
                })
                .collect(),
            since_unix_ms: now,
        }
    }

    /// What makes it the same fault from one look to the next.
    pub fn key(&self) -> FaultKey {
        let subject = match self.kind {
            FaultKind::BlockUplink => {
                let mut subject = self.zones.clone();
                subject.push(self.block.unwrap_or(0).to_string());
                subject
            }
            FaultKind::ZoneLink => self.zones.clone(),
            FaultKind::ZoneLabel => {
                let mut subject = self.nodes.clone();
                subject.extend(self.measures_like.clone());
                subject
            }
            FaultKind::Node | FaultKind::Pair => self.nodes.clone(),
        };
        FaultKey {
            network: self.network.clone(),
            kind: self.kind,
            metric: self.metric,
            subject,
        }
    }

    /// Whether placement fails the node it names (and the publisher may
    /// taint it): a node fault by loss or delay. A node named for goodput
    /// is left to placement's own reading of the same tests, its
    /// throughput term and the degraded mark at `--min-goodput-fraction`,
    /// which the operator sets: it ranks low, and fails where its goodput
    /// is below that share of its zone's.
    pub fn fails_its_node(&self) -> bool {
        self.kind == FaultKind::Node && self.metric != FaultMetric::Goodput
    }
}

/// What placement acts on among `faults` (of one network): its node
/// faults that fail a node ([`Fault::fails_its_node`]) and its block
/// uplink faults ([`crate::fault_marks`]).
pub fn placement_marks<'a>(faults: impl IntoIterator<Item = &'a Fault>) -> FaultMarks {
    let marks = faults
        .into_iter()
        .filter_map(|fault| match fault.kind {
            FaultKind::Node if fault.fails_its_node() => Some(FaultMark::Node {
                node: fault.nodes.first()?.clone(),
                metric: fault.metric,
                value: fault.value,
                baseline: fault.baseline,
            }),
            FaultKind::BlockUplink => Some(FaultMark::BlockUplink {
                zone: fault.zones.first()?.clone(),
                block: fault.block?,
                nodes: fault.nodes.clone(),
                metric: fault.metric,
                value: fault.value,
                baseline: fault.baseline,
            }),
            FaultKind::Node | FaultKind::ZoneLink | FaultKind::Pair | FaultKind::ZoneLabel => None,
        })
        .collect();
    FaultMarks { marks }
}

/// What makes a fault the same from one look to the next: its network,
/// kind, metric and what it names (a block by zone and number, since its
/// nodes may change).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FaultKey {
    /// Its network.
    pub network: Network,
    /// Its kind.
    pub kind: FaultKind,
    /// Its metric.
    pub metric: FaultMetric,
    /// The names it is about.
    pub subject: Vec<String>,
}

/// The hysteresis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackerConfig {
    /// Looks in a row that must find a fault before it is reported.
    pub open_after: u32,
    /// Looks in a row that must miss an open fault before it clears.
    pub clear_after: u32,
}

impl Default for TrackerConfig {
    fn default() -> Self {
        Self {
            open_after: 2,
            clear_after: 3,
        }
    }
}

/// A fault that opened or cleared in one look.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Reported from now on.
    Opened(Fault),
    /// No longer reported.
    Cleared(Fault),
}

#[derive(Debug, Clone)]
struct Tracked {
    fault: Fault,
    found_in_a_row: u32,
    missed_in_a_row: u32,
    open: bool,
}

/// The faults of every network over time.
#[derive(Debug, Clone, Default)]
pub struct FaultTracker {
    config: TrackerConfig,
    tracked: BTreeMap<FaultKey, Tracked>,
}

impl FaultTracker {
    /// A tracker with no faults.
    pub fn new(config: TrackerConfig) -> Self {
        Self {
            config,
            tracked: BTreeMap::new(),
        }
    }

    /// Takes one look's faults of `network` (those of other networks are
    /// left as they are) and says what opened and what cleared.
    pub fn update(&mut self, network: &Network, found: Vec<Fault>) -> Vec<Change> {
        let mut changes = Vec::new();
        let mut seen = std::collections::BTreeSet::new();
        for fault in found {
            let key = fault.key();
            seen.insert(key.clone());
            match self.tracked.get_mut(&key) {
                Some(tracked) => {
                    let since = tracked.fault.since_unix_ms;
                    tracked.fault = Fault {
                        since_unix_ms: since,
                        ..fault
                    };
                    tracked.found_in_a_row += 1;
                    tracked.missed_in_a_row = 0;
                }
                None => {
                    self.tracked.insert(
                        key.clone(),
                        Tracked {
                            fault,
                            found_in_a_row: 1,
                            missed_in_a_row: 0,
                            open: false,
                        },
                    );
                }
            }
            let tracked = self.tracked.get_mut(&key).expect("just inserted");
            if !tracked.open && tracked.found_in_a_row >= self.config.open_after {
                tracked.open = true;
                changes.push(Change::Opened(tracked.fault.clone()));
            }
        }
        let mut gone = Vec::new();
        for (key, tracked) in self.tracked.iter_mut() {
            if &key.network != network || seen.contains(key) {
                continue;
            }
            tracked.found_in_a_row = 0;
            tracked.missed_in_a_row += 1;
            if !tracked.open || tracked.missed_in_a_row >= self.config.clear_after {
                gone.push(key.clone());
            }
        }
        for key in gone {
            if let Some(tracked) = self.tracked.remove(&key)
                && tracked.open
            {
                changes.push(Change::Cleared(tracked.fault));
            }
        }
        changes
    }

    /// The open faults, by network, kind and name.
    pub fn open(&self) -> Vec<Fault> {
        self.tracked
            .values()
            .filter(|t| t.open)
            .map(|t| t.fault.clone())
            .collect()
    }
}
